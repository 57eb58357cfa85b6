//! Never clobber a user's session. Codex appends a user's new turns to the rollout it resumed,
//! and a person may edit one; converting again must not cut them back. Each rollout is placed
//! knowing the digest the manifest recorded when rollover wrote it: a file whose bytes still
//! have that digest (or already are the new bytes) is ours to replace; any other is kept,
//! counted and listed, unless `--force`, which first copies it to `rollover/replaced/`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::home::{write_error, Home};
use super::manifest::digest;
use super::OutputError;

/// What happened to one rollout path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// Written (new, or replacing what rollover wrote there before).
    Written,
    /// The same bytes were already there.
    Unchanged,
    /// Changed on disk since rollover wrote it: kept as it is.
    Kept,
    /// Changed on disk, replaced (`--force`) after a copy was kept at `copy`.
    Replaced { copy: PathBuf },
}

/// What happened to a rollout whose record is gone from its input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    Removed,
    /// Changed on disk since rollover wrote it: kept.
    Kept,
    /// Not there any more.
    Missing,
}

#[derive(Debug, Default)]
pub struct Guard {
    /// Rollout path (relative to the home) → digest written, from the manifest.
    written: HashMap<String, String>,
    force: bool,
}

impl Guard {
    pub fn new(written: HashMap<String, String>, force: bool) -> Guard {
        Guard { written, force }
    }

    /// Puts `bytes` (whose digest is `new_digest`) at `relative`, unless that would clobber a
    /// changed session.
    pub fn place(
        &self,
        home: &Home,
        relative: &Path,
        bytes: &[u8],
        new_digest: &str,
    ) -> Result<Placed, OutputError> {
        // A path rollover has not written before is most likely free: written under its name
        // only if it is ([`Home::write_new`]), with no look-up first. A file there after all
        // (or a file system without unnamed files) goes the way of every known path.
        let known = !self.written.is_empty() && self.written.contains_key(&key(relative));
        if !known && home.write_new(relative, bytes)? {
            return Ok(Placed::Written);
        }
        self.place_with(home, relative, new_digest, || {
            home.write_atomic(relative, bytes).map(|_| ())
        })
    }

    /// [`Guard::place`] with the writing left to `put` (which must put the new bytes at
    /// `relative` atomically); `put` is not called when the file is kept or unchanged.
    pub fn place_with(
        &self,
        home: &Home,
        relative: &Path,
        new_digest: &str,
        put: impl FnOnce() -> Result<(), OutputError>,
    ) -> Result<Placed, OutputError> {
        let target = home.root.join(relative);
        let on_disk = match fs::read(&target) {
            Ok(existing) => digest(&existing),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                put()?;
                return Ok(Placed::Written);
            }
            Err(e) => return Err(write_error(&target, e)),
        };
        if on_disk == new_digest {
            return Ok(Placed::Unchanged);
        }
        let ours = self.written.get(&key(relative)) == Some(&on_disk);
        if ours {
            put()?;
            return Ok(Placed::Written);
        }
        if !self.force {
            return Ok(Placed::Kept);
        }
        let copy = home.keep_replaced(relative)?;
        put()?;
        Ok(Placed::Replaced { copy })
    }

    /// Removes the rollout at `relative`, recorded with `recorded` digest, whose record is gone.
    pub fn remove(
        &self,
        home: &Home,
        relative: &str,
        recorded: &str,
    ) -> Result<Removal, OutputError> {
        let target = home.root.join(relative);
        let on_disk = match fs::read(&target) {
            Ok(existing) => digest(&existing),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Removal::Missing),
            Err(e) => return Err(write_error(&target, e)),
        };
        if on_disk != recorded && !self.force {
            return Ok(Removal::Kept);
        }
        if on_disk != recorded {
            home.keep_replaced(Path::new(relative))?;
        }
        fs::remove_file(&target).map_err(|e| write_error(&target, e))?;
        Ok(Removal::Removed)
    }
}

/// The manifest's key for a relative path (`/` separators).
pub fn key(relative: &Path) -> String {
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A path the manifest does not know is written without a look-up first: it must still
    /// never replace a file that is there (a lost manifest, a session made by hand).
    #[test]
    fn a_path_the_manifest_does_not_know_is_written_new_and_never_clobbers() {
        let root = tempfile::tempdir().expect("temp dir");
        let home = Home::new(root.path());
        let guard = Guard::new(HashMap::new(), false);
        let relative = Path::new("sessions/2025/01/02/rollout-a.jsonl");
        let bytes = b"{\"new\":1}\n";
        let placed = guard.place(&home, relative, bytes, &digest(bytes));
        assert_eq!(placed.expect("placed"), Placed::Written);
        let target = root.path().join(relative);
        assert_eq!(fs::read(&target).expect("read"), bytes);
        let mode = fs::metadata(&target).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let placed = guard.place(&home, relative, bytes, &digest(bytes));
        assert_eq!(placed.expect("placed"), Placed::Unchanged);

        let edited = b"{\"edited by a person\":1}\n";
        fs::write(&target, edited).expect("edit");
        let placed = guard.place(&home, relative, bytes, &digest(bytes));
        assert_eq!(placed.expect("placed"), Placed::Kept);
        assert_eq!(fs::read(&target).expect("read"), edited);
        // Nothing but the session in its folder: no temporary file left.
        let names: Vec<_> = fs::read_dir(target.parent().expect("dir"))
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("rollout-a.jsonl")]);
    }

    #[test]
    fn write_new_leaves_a_file_that_is_there_alone() {
        let root = tempfile::tempdir().expect("temp dir");
        let home = Home::new(root.path());
        let relative = Path::new("a/b.jsonl");
        assert!(home.write_new(relative, b"one\n").expect("first"));
        assert!(!home.write_new(relative, b"two\n").expect("second"));
        assert_eq!(
            fs::read(root.path().join(relative)).expect("read"),
            b"one\n"
        );
    }
}
