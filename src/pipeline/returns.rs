//! Outcomes freed by the worker that made them.
//!
//! A conversation's outcome (its audit line, digest, paths and decisions; a Responses body's
//! bytes) is allocated on a worker and read by the collector, on its own thread. Dropped
//! there, every allocation went back to the worker's heap through mimalloc's cross-thread
//! free list: the worker then gathered them (`_mi_page_free_collect`) and reused blocks last
//! written from the collector's core. On small records at `-j 2` that was ~100 ms of the
//! workers' ~1.6 s of CPU (perf, per thread), against ~10 ms when every thread shares one
//! core. So the collector gives each work's outcomes back here, to the worker that converted
//! the work, and that worker drops them before it converts its next work: every free is then
//! a local one.
//!
//! Memory: what a worker is given back waits at most until its next work, and a worker only
//! gets back what it made, so it holds no more than the batches in flight did; of the bodies
//! it keeps a few buffers for its next ones (at most 8 MiB, [`crate::convert::body_buffer`]).

use std::sync::Mutex;

use super::record::Outcome;

/// One slot a worker of the converting pool, by its index in the pool.
pub(super) struct Returns {
    slots: Vec<Mutex<Vec<Vec<Outcome>>>>,
}

impl Returns {
    pub(super) fn new(workers: usize) -> Returns {
        Returns {
            slots: (0..workers).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// The worker of the converting pool this runs on (`None` off the pool).
    pub(super) fn owner() -> Option<usize> {
        rayon::current_thread_index()
    }

    /// Gives a work's outcomes back to the worker `owner` that made them; dropped here when
    /// there is none.
    pub(super) fn give_back(&self, owner: Option<usize>, outcomes: Vec<Outcome>) {
        if outcomes.is_empty() {
            return;
        }
        let slot = owner.and_then(|owner| self.slots.get(owner));
        if let Some(Ok(mut slot)) = slot.map(Mutex::lock) {
            slot.push(outcomes);
        }
    }

    /// Drops what was given back to the calling worker, but the Responses bodies, which it
    /// keeps for its next ones ([`crate::convert::recycle_body`]).
    pub(super) fn free_mine(&self) {
        let Some(slot) = Self::owner().and_then(|owner| self.slots.get(owner)) else {
            return;
        };
        let mut given = match slot.lock() {
            Ok(mut slot) => std::mem::take(&mut *slot),
            Err(_) => return,
        };
        for outcome in given.iter_mut().flatten() {
            if let Outcome::Converted(done) = outcome {
                crate::convert::recycle_body(std::mem::take(&mut done.bytes));
            }
        }
        drop(given);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(n: usize) -> Vec<Outcome> {
        (0..n).map(|_| Outcome::Merged).collect()
    }

    #[test]
    fn a_worker_frees_what_it_was_given_back_and_only_that() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap_or_else(|e| panic!("pool: {e}"));
        let returns = Returns::new(2);
        // Given back to worker 0 and to no worker (dropped at once).
        returns.give_back(Some(0), outcomes(3));
        returns.give_back(None, outcomes(2));
        returns.give_back(Some(7), outcomes(1));
        let held = |i: usize| returns.slots[i].lock().map_or(0, |s| s.len());
        assert_eq!((held(0), held(1)), (1, 0));
        // Worker 1 frees nothing of worker 0's; worker 0 frees its own.
        pool.broadcast(|context| {
            if context.index() == 1 {
                returns.free_mine();
            }
        });
        assert_eq!(held(0), 1);
        pool.broadcast(|context| {
            if context.index() == 0 {
                returns.free_mine();
            }
        });
        assert_eq!(held(0), 0);
        // Off the pool, nothing is freed and nothing panics.
        returns.give_back(Some(1), outcomes(1));
        returns.free_mine();
        assert_eq!(held(1), 1);
    }
}
