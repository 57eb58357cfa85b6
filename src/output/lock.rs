//! One run at a time per output: `OUT/rollover/lock`, held with an advisory lock (flock) for
//! the whole run and holding the holder's pid for the message a second run prints. The kernel
//! releases the lock when its holder dies, however it dies, so a lock left by a killed run is
//! simply taken over. Each shard of a sharded run locks its own state folder
//! (`OUT/rollover/shards/KKKK-of-NNNN/lock`), so shards writing into one home never wait for
//! each other, and a shard started twice is refused like a second run.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use super::home::{private_file, write_error, Home};
use super::OutputError;

pub const LOCK: &str = "lock";

/// The held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct RunLock {
    file: File,
    path: PathBuf,
    /// The pid a dead holder left in the file, when the lock was taken over.
    pub taken_over_from: Option<u32>,
}

impl RunLock {
    /// Takes the lock of `home`, or fails at once with [`OutputError::Locked`].
    pub fn acquire(home: &Home) -> Result<RunLock, OutputError> {
        home.create_state_dir()?;
        let path = home.state_file(LOCK);
        let mut file = private_file(
            OpenOptions::new().read(true).write(true).create(true),
            &path,
        )?;
        let mut previous = String::new();
        let _ = file.read_to_string(&mut previous);
        let previous: Option<u32> = previous.trim().parse().ok();
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(OutputError::Locked {
                    path: home.root.display().to_string(),
                    pid: previous.unwrap_or(0),
                })
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(write_error(&path, e)),
        }
        let write_pid = |file: &mut File| -> std::io::Result<()> {
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            writeln!(file, "{}", std::process::id())
        };
        write_pid(&mut file).map_err(|e| write_error(&path, e))?;
        let taken_over_from = previous.filter(|pid| *pid != std::process::id());
        Ok(RunLock {
            file,
            path,
            taken_over_from,
        })
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Empty the pid first, so a reader between the two steps never names a finished run.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
        let _ = &self.path;
    }
}
