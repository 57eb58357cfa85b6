//! One run at a time per output: an advisory lock (flock) on the state folder `OUT/rollover`
//! itself, held for the whole run; the file `OUT/rollover/lock` holds the holder's pid for the
//! message a second run prints. The lock is on the folder, not on the file: deleting the file
//! (or the folder, which cannot be removed while it holds the state) cannot let a second run
//! in beside the first. The kernel releases the lock when its holder dies, however it dies,
//! so a lock left by a killed run is simply taken over. Each shard of a sharded run locks its
//! own state folder (`OUT/rollover/shards/KKKK-of-NNNN/`), so shards writing into one home
//! never wait for each other, and a shard started twice is refused like a second run.
//!
//! A run refuses a held lock at once, or, with `--wait SECONDS`, waits for it as `flock -w`
//! does: it tries again every [`POLL`] until the lock is free or the time is out (or a signal
//! asks the run to stop), then names the holder it gave up on and how long it waited.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::dir::Dir;
use super::home::{write_error, Home};
use super::OutputError;

pub(crate) const LOCK: &str = "lock";
/// How often a waiting run tries the lock again. std has no timed `flock`, and a blocking one
/// cut short by an alarm signal would race the run's own signal handlers: polling costs a
/// system call every 50 ms, and the wait ends within that of the holder's end.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// The held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct RunLock {
    /// The locked folder, held open: the lock lives as long as this descriptor.
    _folder: Dir,
    file: File,
    path: PathBuf,
    /// The pid a dead holder left in the file, when the lock was taken over.
    pub taken_over_from: Option<u32>,
    /// How long `--wait` waited for another run to let the lock go (zero when it was free).
    pub waited: Duration,
}

impl RunLock {
    /// Takes the lock of `home`, or fails at once with [`OutputError::Locked`].
    pub fn acquire(home: &Home) -> Result<RunLock, OutputError> {
        Self::acquire_within(home, Duration::ZERO, &AtomicUsize::new(0), |_| {})
    }

    /// Takes the lock of `home`, waiting up to `wait` for its holder to let it go. `waiting`
    /// is called once, with the holder's pid, when the first try finds it held. A non-zero
    /// `stop` (a signal) ends the wait early. Fails with [`OutputError::Locked`] when `wait`
    /// is zero, and with [`OutputError::StillLocked`] (how long it waited) otherwise.
    pub fn acquire_within(
        home: &Home,
        wait: Duration,
        stop: &AtomicUsize,
        waiting: impl FnOnce(u32),
    ) -> Result<RunLock, OutputError> {
        let folder = home.state()?.reopen()?;
        let path = home.state_file(LOCK);
        let mut file = folder.open_rw(LOCK)?;
        let previous = holder(&mut file);
        let started = Instant::now();
        let mut waiting = Some(waiting);
        loop {
            if folder.try_lock()? {
                break;
            }
            let pid = holder(&mut file).or(previous).unwrap_or(0);
            let path = home.root.display().to_string();
            if wait.is_zero() {
                return Err(OutputError::Locked { path, pid });
            }
            let waited = started.elapsed();
            if waited >= wait || stop.load(Ordering::Relaxed) != 0 {
                return Err(OutputError::StillLocked {
                    path,
                    pid,
                    waited: format!("{:.1} s", waited.as_secs_f64()),
                });
            }
            if let Some(waiting) = waiting.take() {
                waiting(pid);
            }
            std::thread::sleep(POLL.min(wait - waited));
        }
        // What the file holds now that the lock is ours: a holder that ended emptied it, so a
        // pid here is one left by a process that died holding the lock.
        let taken_over_from = holder(&mut file).filter(|pid| *pid != std::process::id());
        let write_pid = |file: &mut File| -> std::io::Result<()> {
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            writeln!(file, "{}", std::process::id())
        };
        write_pid(&mut file).map_err(|e| write_error(&path, e))?;
        Ok(RunLock {
            _folder: folder,
            file,
            path,
            taken_over_from,
            // `waiting` was called (and taken) only when the lock was found held.
            waited: if waiting.is_none() {
                started.elapsed()
            } else {
                Duration::ZERO
            },
        })
    }

    /// What a run says once when `--wait` finds the output locked.
    pub fn waiting_note(home: &Home, pid: u32, wait: Duration) -> String {
        format!(
            "{} is in use by another rollover run (pid {pid}): waiting up to {} s for it (--wait)",
            home.root.display(),
            wait.as_secs_f64()
        )
    }
}

/// The pid of the run holding the lock of `home` now, asked without taking the lock
/// (`status`, beside a run that may start at that moment): the kernel's list of locks,
/// `/proc/locks`, lists a `flock` by that pid on the state folder. Where the list cannot be
/// read, a shared lock taken and let go at once asks instead (pid 0 when the file names none).
pub(crate) fn holder_of(home: &Home) -> Option<u32> {
    let folder = home.existing_state().ok().flatten()?;
    let pid = folder
        .open_read(LOCK)
        .ok()
        .flatten()
        .and_then(|mut file| holder(&mut file));
    match std::fs::read_to_string("/proc/locks") {
        Ok(locks) => {
            let pid = pid?;
            let ino =
                std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(home.state_dir()).ok()?);
            listed(&locks, pid, ino).then_some(pid)
        }
        Err(_) => folder.locked_by_other().then(|| pid.unwrap_or(0)),
    }
}

/// Whether `locks` (as `/proc/locks` lists them: `1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE
/// 0 EOF`) holds a `flock` taken by `pid` on the inode `ino`; a waiter's line (`->`) holds none.
fn listed(locks: &str, pid: u32, ino: u64) -> bool {
    locks.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(&"FLOCK"), Some(held_by), Some(place)) =
            (fields.get(1), fields.get(4), fields.get(5))
        else {
            return false;
        };
        *held_by == pid.to_string() && place.rsplit(':').next() == Some(&ino.to_string())
    })
}

/// The pid the lock file holds (its holder's, or the last holder's when it died), if any.
fn holder(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Empty the pid first, so a reader between the two steps never names a finished run.
        // The lock itself goes with the folder's descriptor, after this.
        let _ = self.file.set_len(0);
        let _ = &self.path;
    }
}
