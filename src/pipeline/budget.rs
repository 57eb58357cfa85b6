//! One memory budget for the run (`--memory`), not one per job: the work that holds a whole
//! file while it is read and converted (a Claude Code session, an API log grouped by chain)
//! and any single large record (a JSON document, a long line) is admitted against it before
//! the reader gathers it, at what its format holds at its peak ([`memory_cost`]: so much a
//! byte and a record). Work that does not fit waits for earlier work to be written and let go, so such
//! files go one at a time when they must, whatever `--jobs` is; a file that could never fit
//! is refused with a reason naming the flag. Small records are not counted: the batches bound
//! them (a few MiB in flight whatever the input).
//!
//! A [`Permit`] travels with its work ([`super::reader::Records`]) to the collector and gives
//! its bytes back when the work is dropped, its output written. The reader is the only thread
//! that waits, and it sends what it batched before it does: everything that holds the budget
//! is then on its way to being written, which needs nothing from the reader.
//!
//! [`memory_cost`]: crate::input::FormatReader::memory_cost

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// A single record this long or longer is charged to the budget; shorter ones are bounded by
/// the batches.
pub(crate) const LARGE_RECORD: u64 = 1 << 20;

/// The budget's default when the machine's memory cannot be read.
const FALLBACK: u64 = 4 << 30;

/// The run's budget: `total` bytes, `used` by the permits given out.
#[derive(Debug)]
pub(crate) struct Budget {
    total: u64,
    used: Mutex<u64>,
    freed: Condvar,
}

/// Bytes of the budget held by one work; given back when dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    budget: Arc<Budget>,
    bytes: u64,
}

/// A work that needs more than the whole budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverBudget {
    /// What the work would hold.
    pub needed: u64,
    pub total: u64,
}

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "reading and converting it would hold at least {} bytes, more than --memory ({} bytes) allows the whole run: not converted; raise --memory to read it",
            self.needed, self.total
        )
    }
}

impl Budget {
    pub(crate) fn new(total: u64) -> Arc<Budget> {
        Arc::new(Budget {
            total,
            used: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    /// A permit of no bytes yet, grown as its work's records come ([`Budget::grow`]).
    pub(crate) fn permit(self: &Arc<Self>) -> Permit {
        Permit {
            budget: Arc::clone(self),
            bytes: 0,
        }
    }

    /// Adds `bytes` to `permit` when the budget has them free now; false (nothing taken)
    /// when it does not.
    pub(crate) fn try_grow(&self, permit: &mut Permit, bytes: u64) -> bool {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(after) = used.checked_add(bytes).filter(|&after| after <= self.total) else {
            return false;
        };
        *used = after;
        permit.bytes += bytes;
        true
    }

    /// Adds `bytes` to `permit`, waiting while other work holds the budget; refused when the
    /// permit would need more than the whole budget (nothing taken then), or when `stop`
    /// holds a signal (`Ok`, nothing taken: the run is ending).
    pub(crate) fn grow(
        &self,
        permit: &mut Permit,
        bytes: u64,
        stop: &AtomicUsize,
    ) -> Result<(), OverBudget> {
        let needed = permit.bytes.saturating_add(bytes);
        if needed > self.total {
            return Err(OverBudget {
                needed,
                total: self.total,
            });
        }
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        // The permit's own bytes are in `used`: what it needs more fits once the others'
        // fall to `total - needed`.
        while used.saturating_add(bytes) > self.total {
            if stop.load(Ordering::Relaxed) != 0 {
                return Ok(());
            }
            // A timeout too: a stop is seen even when nothing is freed.
            used = self
                .freed
                .wait_timeout(used, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *used += bytes;
        permit.bytes += bytes;
        Ok(())
    }

    fn release(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        *used = used.saturating_sub(bytes);
        self.freed.notify_all();
    }
}

impl Permit {
    /// The bytes it holds.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.budget.release(std::mem::take(&mut self.bytes));
    }
}

/// The default of `--memory`: half of the memory the run may use, the machine's (`MemTotal`)
/// or its cgroup's limit when lower (a container, a Slurm job), else 4 GiB when neither can
/// be read.
pub(crate) fn default_memory() -> u64 {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total(&text));
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| std::fs::read_to_string(path).ok())
    .and_then(|text| text.trim().parse::<u64>().ok());
    let limit = match (machine, cgroup) {
        (Some(m), Some(c)) => m.min(c),
        (Some(m), None) => m,
        (None, Some(c)) => c,
        (None, None) => return FALLBACK,
    };
    limit / 2
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_wait_for_each_other_and_give_back_when_dropped() {
        let budget = Budget::new(100);
        let stop = AtomicUsize::new(0);
        let mut first = budget.permit();
        assert!(budget.try_grow(&mut first, 60));
        let mut second = budget.permit();
        assert!(
            !budget.try_grow(&mut second, 60),
            "does not fit beside the first"
        );
        assert_eq!(second.bytes(), 0);
        // Waits on another thread until the first is dropped.
        let waiter = {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || {
                let stop = AtomicUsize::new(0);
                let mut second = budget.permit();
                budget.grow(&mut second, 60, &stop).map(|()| second.bytes())
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(first);
        assert_eq!(waiter.join().unwrap(), Ok(60));
        // More than the whole budget is refused at once, nothing taken.
        let mut big = budget.permit();
        assert_eq!(
            budget.grow(&mut big, 101, &stop),
            Err(OverBudget {
                needed: 101,
                total: 100
            })
        );
        assert_eq!(big.bytes(), 0);
        assert!(
            budget.try_grow(&mut big, 100),
            "every permit was given back"
        );
    }

    #[test]
    fn a_stop_ends_the_wait() {
        let budget = Budget::new(10);
        let mut held = budget.permit();
        assert!(budget.try_grow(&mut held, 10));
        let stop = AtomicUsize::new(15);
        let mut waiting = budget.permit();
        assert_eq!(budget.grow(&mut waiting, 5, &stop), Ok(()));
        assert_eq!(waiting.bytes(), 0);
    }

    #[test]
    fn mem_total_is_read_in_bytes() {
        let meminfo = "MemTotal:       24514060 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total(meminfo), Some(24_514_060 * 1024));
        assert_eq!(mem_total("nothing"), None);
        assert!(default_memory() > 0);
    }
}
