//! Which other processes hold a file open: a session Codex has open (it appends a user's turns
//! to the rollout it resumed, through the descriptor it opened) must not be renamed over or
//! removed, or the turns it writes next go into a file nobody can see.
//!
//! Read from `/proc/PID/fd` (every process's descriptors this user may see: all of them as
//! root), as one table of the files open, made at most once a second: a run replacing many
//! sessions does not read `/proc` for each. A session a process opens after the table was made
//! is caught by the check of its size and time just before the rename ([`super::guard`]).
//! Without `/proc`, nothing is found open.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a table of open files is used before it is made again.
const FRESH: Duration = Duration::from_secs(1);

/// (device, inode) → the pid of one process holding it open.
type Table = HashMap<(u64, u64), u32>;

/// The files other processes hold open, and when the table was made.
#[derive(Debug, Default)]
pub(crate) struct Holders {
    table: Mutex<Option<(Instant, Table)>>,
}

/// A process that holds a file open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holder {
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`), when it can be read.
    pub command: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.command.is_empty() {
            write!(f, "process {}", self.pid)
        } else {
            write!(f, "process {} ({})", self.pid, self.command)
        }
    }
}

impl Holders {
    /// A process other than this one that holds the file `(dev, ino)` open.
    pub(crate) fn of(&self, dev: u64, ino: u64) -> Option<Holder> {
        let mut guard = self.table.lock().ok()?;
        let stale = guard
            .as_ref()
            .is_none_or(|(made, _)| made.elapsed() > FRESH);
        if stale {
            *guard = Some((Instant::now(), open_files()));
        }
        let pid = *guard.as_ref()?.1.get(&(dev, ino))?;
        let command = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| c.trim().to_string())
            .unwrap_or_default();
        Some(Holder { pid, command })
    }
}

/// Every file open in another process, by device and inode.
fn open_files() -> Table {
    let mut open = HashMap::new();
    let own = std::process::id();
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return open;
    };
    for process in processes.flatten() {
        let Some(pid) = process
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own {
            continue;
        }
        let Ok(descriptors) = std::fs::read_dir(process.path().join("fd")) else {
            continue;
        };
        for descriptor in descriptors.flatten() {
            // The descriptor's link, followed: the open file itself.
            if let Ok(meta) = std::fs::metadata(descriptor.path()) {
                if meta.is_file() {
                    open.entry((meta.dev(), meta.ino())).or_insert(pid);
                }
            }
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file a child process holds open is found, with the child's pid; once the child is
    /// gone (and the table made again), it is not.
    #[test]
    fn a_file_another_process_holds_open_is_found() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("held");
        std::fs::write(&path, b"x").expect("write");
        let meta = std::fs::metadata(&path).expect("stat");
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec 3>>\"$1\"; echo ready; read _")
            .arg("sh")
            .arg(&path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("ready");
        let holders = Holders::default();
        let holder = holders.of(meta.dev(), meta.ino()).expect("held");
        assert_eq!(holder.pid, child.id());
        drop(child.stdin.take());
        child.wait().expect("wait");
        let fresh = Holders::default();
        assert_eq!(fresh.of(meta.dev(), meta.ino()), None);
    }
}
