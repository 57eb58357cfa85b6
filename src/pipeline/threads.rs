//! The run's thread pools and their `nice` priorities: whichever threads set the pace keep the
//! run's priority, the others yield to them.

use super::PipelineError;

/// A pool of `threads` threads (0: one per core), named `{name}-{i}` when named, each at
/// `priority`.
pub(super) fn thread_pool(
    threads: usize,
    name: Option<&'static str>,
    priority: Priority,
) -> Result<rayon::ThreadPool, PipelineError> {
    let mut builder = rayon::ThreadPoolBuilder::new().num_threads(threads);
    if let Some(name) = name {
        builder = builder.thread_name(move |i| format!("{name}-{i}"));
    }
    if priority == Priority::Lowered {
        builder = builder.start_handler(move |_| priority.apply());
    }
    builder.build().map_err(|e| PipelineError::Pool {
        threads,
        message: e.to_string(),
    })
}

/// A thread's priority in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Priority {
    /// The run's own: the process's nice value.
    Run,
    /// [`YIELD_NICE`] below the run's.
    Lowered,
}

impl Priority {
    /// Sets the calling thread's priority. On Linux the threads it starts afterwards start at
    /// its nice value: the reader's read-ahead threads take the reader's.
    pub(crate) fn apply(self) {
        match self {
            Priority::Run => {}
            Priority::Lowered => lower_this_thread(YIELD_NICE),
        }
    }
}

/// The priorities of a run's two kinds of threads: the converting workers (`--jobs` of them)
/// and the serial threads (the reader and its read-ahead threads, the collector), one each
/// of which the pipeline cannot do without. The main thread, which hands batches on, and the
/// pool that writes rollouts keep the run's priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Priorities {
    pub(super) workers: Priority,
    pub(super) serial: Priority,
}

impl Priorities {
    /// For `--jobs` (0: one per core), whichever kind sets the pace keeps the run's priority,
    /// and the other yields to it ([`YIELD_NICE`]):
    /// - as many workers as the cores the process may run on (or more): the serial threads
    ///   set the pace, and the workers yield, so that the reader and the collector get a core
    ///   when they need one. Below them a lone worker (`-j 1` on 2 cores) ran only while both
    ///   waited, on one core of two (agent transcripts to Responses bodies: 0.50 s against
    ///   0.47-0.48 s, best of 8, interleaved).
    /// - fewer workers: they are the pace (a record's conversion costs more than its reading),
    ///   and the serial threads, which have the cores the workers leave, yield. Agent
    ///   transcripts to Responses bodies at `-j 1` on 2 cores: median 0.52-0.53 s -> 0.475-0.48 s
    ///   (14 and 10 runs, interleaved); small records' dry run and bodies within 1.5 %.
    pub(super) fn for_jobs(jobs: usize) -> Priorities {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        match jobs == 0 || jobs >= cores {
            true => Priorities {
                workers: Priority::Lowered,
                serial: Priority::Run,
            },
            false => Priorities {
                workers: Priority::Run,
                serial: Priority::Lowered,
            },
        }
    }
}

/// How far below the run's other threads the threads that yield run, in nice values. The
/// reader (decompressing and splitting) and the collector are one thread each; the workers
/// are `--jobs` threads, and the pipeline is as fast as the slowest of them. The workers
/// yield so that the serial threads never wait for a core a worker holds; +10 leaves room
/// for the collector and the main thread too, and a thread that yields runs as fast as ever
/// on an idle core. The measurements: `samples/BENCHMARKS.md`.
///
/// On Linux a nice value is a thread's own, and it orders the process's threads against
/// those of the same group only (the session's autogroup, or a cgroup with the CPU
/// controller: a Slurm job, a Kubernetes pod, a systemd service). Elsewhere nothing is
/// changed: there it would lower the whole process.
pub(super) const YIELD_NICE: i32 = 10;

/// Lowers the calling thread's priority by `by` nice values (to 19 at most). Raising one's
/// own nice value needs no privilege; where it is refused (a sandbox filtering the call),
/// the thread keeps the run's priority, and only the threads' order on a busy core changes.
pub(super) fn lower_this_thread(by: i32) {
    #[cfg(target_os = "linux")]
    {
        let thread = rustix::thread::gettid();
        if let Ok(nice) = rustix::process::getpriority_process(Some(thread)) {
            let _ = rustix::process::setpriority_process(Some(thread), (nice + by).min(19));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = by;
}

#[cfg(test)]
pub(super) mod tests {
    use super::{thread_pool, Priorities, Priority, YIELD_NICE};

    /// The nice value of the calling thread.
    #[cfg(target_os = "linux")]
    pub(crate) fn nice() -> i32 {
        rustix::process::getpriority_process(Some(rustix::thread::gettid()))
            .unwrap_or_else(|e| panic!("getpriority: {e}"))
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_threads_that_set_the_pace_keep_the_run_s_priority_and_the_others_yield() {
        let run = nice();
        let at = |priority| {
            let pool = thread_pool(2, None, priority).unwrap_or_else(|e| panic!("pool: {e}"));
            let mut seen: Vec<i32> = pool.broadcast(|_| nice());
            seen.dedup();
            seen
        };
        assert_eq!(at(Priority::Lowered), vec![(run + YIELD_NICE).min(19)]);
        assert_eq!(at(Priority::Run), vec![run]);
        // As many workers as cores, or one per core: the workers yield to the serial threads.
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let workers_yield = Priorities {
            workers: Priority::Lowered,
            serial: Priority::Run,
        };
        assert_eq!(Priorities::for_jobs(0), workers_yield);
        assert_eq!(Priorities::for_jobs(cores), workers_yield);
        assert_eq!(Priorities::for_jobs(cores + 3), workers_yield);
        // Fewer: the serial threads yield to the workers.
        if cores > 1 {
            let serial_yield = Priorities {
                workers: Priority::Run,
                serial: Priority::Lowered,
            };
            assert_eq!(Priorities::for_jobs(cores - 1), serial_yield);
            assert_eq!(Priorities::for_jobs(1), serial_yield);
        }
        // A thread lowered starts its own threads at its priority.
        let (lowered, started) = std::thread::spawn(|| {
            Priority::Lowered.apply();
            (nice(), std::thread::spawn(nice).join())
        })
        .join()
        .unwrap_or_else(|_| panic!("the thread"));
        assert_eq!(lowered, (run + YIELD_NICE).min(19));
        assert_eq!(started.ok(), Some(lowered));
        // The thread that built the pools (the run's main thread) keeps its priority.
        assert_eq!(nice(), run);
    }
}
