//! Never clobber, lose or bring back a user's session. Codex appends a user's new turns to the
//! rollout it resumed, a person may edit one, archive it (Codex moves it to
//! `archived_sessions/`) or delete it; converting again must not cut it back nor write it
//! again. Each rollout is placed knowing the digest the manifest recorded when rollover wrote
//! it:
//!
//! - a path rollover never wrote is written, unless a file is there (then it is kept);
//! - a file whose bytes still have the recorded digest is ours: replaced (updated) when the new
//!   bytes differ, left alone when they do not;
//! - a file changed since (Codex appended to it) is left alone when the source has nothing new
//!   for it (the new bytes are those recorded), and otherwise kept and pending: the next run
//!   says so again, `--force` replaces it after copying it to `rollover/replaced/RUN/`;
//! - a file another process holds open (Codex, appending a resumed session's turns), or one
//!   whose size or time changed while the run read it, is never renamed over or removed: it
//!   is kept pending with the reason ([`Placed::Busy`]), and the next run tries again;
//! - a file rollover wrote that is gone from its path was archived (found in
//!   `archived_sessions/`) or deleted by the user: it is withheld, not written again, unless
//!   `--force`.
//!
//! A dry run ([`Guard::planning`]) takes the same decisions and writes nothing: its placements
//! are the plan of a run.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rustc_hash::FxHashMap;

use super::holders::Holders;
use super::home::{read_nofollow_stat, write_error, Home};
use super::manifest::digest;
use super::OutputError;

/// Where Codex moves the sessions a user archives, beside `sessions/`.
pub(crate) const ARCHIVED_DIR: &str = "archived_sessions";

/// What happened (or, in a dry run, would happen) to one rollout path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// Written where nothing was.
    Written,
    /// Replacing what rollover wrote there before (the same session, new content).
    Updated,
    /// The same bytes were already there, or Codex changed the file and the source has nothing
    /// newer for it.
    Unchanged,
    /// Changed on disk since rollover wrote it, while the source has newer data: kept as it is,
    /// and pending.
    Kept,
    /// Changed on disk, replaced (`--force`) after a copy was kept at `copy`.
    Replaced { copy: PathBuf },
    /// Written by rollover once, then archived or deleted by the user: not written again.
    Withheld(Withheld),
    /// The same session as one placed earlier in this run (the same conversation read twice):
    /// not placed again.
    Duplicate,
    /// An older version of the conversation than the one placed (an older export, a backup):
    /// not written. `newer` names the source of the one placed.
    Older { newer: String },
    /// A version that neither extends nor is extended by the one placed, from another file:
    /// the session is left as it is (`--force` writes it, keeping a copy). `other` names the
    /// source of the one placed.
    Conflict { other: String },
    /// Another process holds the file open, or it changed while the run read it: kept as it
    /// is, and pending.
    Busy { reason: String },
}

/// How to place one session beyond its bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// The digest this run placed at the path before (a newer version of a conversation read
    /// earlier in the run): what is there is ours, as a recorded digest would be.
    pub expect: Option<String>,
    /// Keep a copy of what is there before replacing it (`--force` over a conflict).
    pub copy: bool,
}

/// Why a session rollover wrote once is not written again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Withheld {
    /// Found in `archived_sessions/`.
    Archived,
    /// Gone from the home.
    Deleted,
}

impl Withheld {
    pub fn name(self) -> &'static str {
        match self {
            Withheld::Archived => "archived",
            Withheld::Deleted => "deleted",
        }
    }
}

/// What happened to a rollout whose record is gone from its input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// Moved out of the home, its copy kept at `copy`.
    Removed { copy: PathBuf },
    /// Changed on disk since rollover wrote it: kept.
    Kept,
    /// Another process holds it open, or it changed while the run read it: kept.
    Busy { reason: String },
    /// Not there any more.
    Missing,
}

#[derive(Debug, Default)]
pub struct Guard {
    /// Rollout path (relative to the home) → digest written, from the manifest.
    written: HashMap<String, String>,
    force: bool,
    /// Decide only: write, copy and remove nothing (a dry run's plan).
    dry: bool,
    /// A dry run's folders (relative to the home) found missing, each looked up once: nothing
    /// is in them, and a dry run makes none. Looking for every session of a fresh home one by
    /// one was ~6 % of a dry run's CPU on small records (64,000 `openat` calls, each failing
    /// at the same missing folder).
    /// Keyed by the folder's bytes: a `Path` hashes and compares component by component.
    missing: Mutex<FxHashMap<OsString, bool>>,
    /// The files other processes hold open.
    holders: Holders,
}

impl Guard {
    pub fn new(written: HashMap<String, String>, force: bool) -> Guard {
        Guard {
            written,
            force,
            dry: false,
            missing: Mutex::default(),
            holders: Holders::default(),
        }
    }

    /// A guard that plans: the same decisions as [`Guard::new`]'s, nothing written.
    pub fn planning(written: HashMap<String, String>, force: bool) -> Guard {
        Guard {
            written,
            force,
            dry: true,
            missing: Mutex::default(),
            holders: Holders::default(),
        }
    }

    /// `--force`: sessions changed since are replaced, a copy kept first.
    pub fn force(&self) -> bool {
        self.force
    }

    /// The digest the manifest recorded for the session at this path.
    pub fn recorded(&self, relative: &str) -> Option<&str> {
        self.written.get(relative).map(String::as_str)
    }

    /// Puts `bytes` (whose digest is `new_digest`) at `relative`, unless that would clobber a
    /// changed session, bring back one the user archived or deleted, or replace one another
    /// process has open.
    pub fn place(
        &self,
        home: &Home,
        relative: &Path,
        bytes: &[u8],
        new_digest: &str,
        how: &Placement,
    ) -> Result<Placed, OutputError> {
        // A path rollover has not written before is most likely free: written under its name
        // only if it is ([`Home::write_new`]), with no look-up first. A file there after all
        // (or a file system without unnamed files) goes the way of every known path.
        let known = how.expect.is_some()
            || (!self.written.is_empty() && self.written.contains_key(&key(relative)));
        if !known && !self.dry && home.write_new(relative, bytes)? {
            return Ok(Placed::Written);
        }
        self.place_with(home, relative, new_digest, how, || {
            home.write_atomic(relative, bytes).map(|_| ())
        })
    }

    /// [`Guard::place`] with the writing left to `put` (which must put the new bytes at
    /// `relative` atomically); `put` is not called when the file is kept or unchanged, nor in
    /// a dry run.
    pub fn place_with(
        &self,
        home: &Home,
        relative: &Path,
        new_digest: &str,
        how: &Placement,
        put: impl FnOnce() -> Result<(), OutputError>,
    ) -> Result<Placed, OutputError> {
        // A dry run planned this run's earlier version there: a newer one updates it.
        if how.expect.is_some() && self.dry {
            return Ok(Placed::Updated);
        }
        let recorded = match &how.expect {
            Some(expect) => Some(expect),
            None if self.written.is_empty() => None,
            None => self.written.get(&key(relative)),
        };
        // Never through a symlink at a session's name: an error that names it.
        // (The path is joined only to be read: a fresh home's folders are missing, and a
        // join was three allocations a record.)
        let target = home.root.join(relative);
        let existing = if self.in_missing_folder(home, relative) {
            None
        } else {
            read_nofollow_stat(&target)?
        };
        let (on_disk, read) = match existing {
            Some((existing, read)) => (digest(&existing), read),
            None => {
                if let (Some(_), false) = (recorded, self.force) {
                    return Ok(Placed::Withheld(withheld(home, relative)));
                }
                if !self.dry {
                    put()?;
                }
                return Ok(Placed::Written);
            }
        };
        if on_disk == new_digest {
            return Ok(Placed::Unchanged);
        }
        let ours = recorded == Some(&on_disk);
        // Changed since rollover wrote it, and the source says nothing new: Codex's turns stay.
        if !ours && recorded.map(String::as_str) == Some(new_digest) {
            return Ok(Placed::Unchanged);
        }
        if !ours && !self.force {
            return Ok(Placed::Kept);
        }
        if let Some(reason) = self.busy(&target, &read) {
            return Ok(Placed::Busy { reason });
        }
        let copy = !ours || how.copy;
        if self.dry {
            return Ok(if copy {
                Placed::Replaced {
                    copy: home.replaced_path(relative),
                }
            } else {
                Placed::Updated
            });
        }
        if !copy {
            put()?;
            return Ok(Placed::Updated);
        }
        let copy = home.keep_replaced(relative)?;
        put()?;
        Ok(Placed::Replaced { copy })
    }

    /// Why the file at `target`, read as `read`, must not be replaced now: another process
    /// holds it open, or it changed since it was read.
    fn busy(&self, target: &Path, read: &fs::Metadata) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let now = match fs::symlink_metadata(target) {
            Ok(now) => now,
            Err(e) => return Some(format!("it could not be looked at again ({e})")),
        };
        let same = now.len() == read.len()
            && now.ino() == read.ino()
            && now.mtime() == read.mtime()
            && now.mtime_nsec() == read.mtime_nsec();
        if !same {
            return Some("it changed while the run read it".to_string());
        }
        self.holders
            .of(now.dev(), now.ino())
            .map(|holder| format!("{holder} has it open"))
    }

    /// Whether placing `relative` may read the disk: always in a run that writes, and in a
    /// dry run unless the session's folder is missing from the home (then nothing is there to
    /// read, and the decision is made from the manifest alone).
    pub fn reads_disk(&self, home: &Home, relative: &Path) -> bool {
        !self.dry || !self.in_missing_folder(home, relative)
    }

    /// True when a dry run knows the folder of `relative` is missing from the home (so no
    /// session is at `relative`). Only a folder that is not there at all counts: one that is
    /// a symlink, a file, or unreadable goes the way of every path, which says what is wrong.
    fn in_missing_folder(&self, home: &Home, relative: &Path) -> bool {
        if !self.dry {
            return false;
        }
        let Some(folder) = folder_of(relative) else {
            return false;
        };
        let Ok(mut missing) = self.missing.lock() else {
            return false;
        };
        if let Some(&known) = missing.get(folder.as_os_str()) {
            return known;
        }
        let gone = matches!(
            fs::symlink_metadata(home.root.join(folder)),
            Err(e) if e.kind() == ErrorKind::NotFound
        );
        missing.insert(folder.as_os_str().to_owned(), gone);
        gone
    }

    /// Removes the rollout at `relative`, recorded with `recorded` digest, whose record is gone
    /// (`--prune`): moved to `rollover/pruned/RUN/`, a copy of its own. One that Codex changed
    /// since is kept, even with `--force`, and so is one another process holds open.
    pub fn remove(
        &self,
        home: &Home,
        relative: &str,
        recorded: &str,
    ) -> Result<Removal, OutputError> {
        let target = home.root.join(relative);
        let (on_disk, read) = match read_nofollow_stat(&target)? {
            Some((existing, read)) => (digest(&existing), read),
            None => return Ok(Removal::Missing),
        };
        if on_disk != recorded {
            return Ok(Removal::Kept);
        }
        if let Some(reason) = self.busy(&target, &read) {
            return Ok(Removal::Busy { reason });
        }
        if self.dry {
            return Ok(Removal::Removed {
                copy: home.pruned_path(Path::new(relative)),
            });
        }
        let copy = home.keep_pruned(Path::new(relative))?;
        fs::remove_file(&target).map_err(|e| write_error(&target, e))?;
        super::failpoint::hit("prune");
        Ok(Removal::Removed { copy })
    }
}

/// Why a session the manifest knows is not at its path: Codex moved it to
/// `archived_sessions/` (by its file name, as Codex does, or under its dated folders), or the
/// user deleted it.
fn withheld(home: &Home, relative: &Path) -> Withheld {
    let archive = home.root.join(ARCHIVED_DIR);
    let by_name = relative.file_name().map(|name| archive.join(name));
    let dated = relative
        .strip_prefix(crate::model::rollout::SESSIONS_DIR)
        .ok()
        .map(|rest| archive.join(rest));
    if by_name.into_iter().chain(dated).any(|p| p.is_file()) {
        Withheld::Archived
    } else {
        Withheld::Deleted
    }
}

/// The manifest's key for a relative path (`/` separators).
pub(crate) fn key(relative: &Path) -> String {
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The folder of `relative`, as [`Path::parent`] gives it: cut at the last `/` when the path
/// is a plain UTF-8 one (ours: `sessions/YYYY/MM/DD/rollout-....jsonl`), which costs a search;
/// `Path::parent` parses every component again, ~840 instructions a call, and a dry run asks
/// twice for each session. Any other path goes through `Path::parent`.
fn folder_of(relative: &Path) -> Option<&Path> {
    let plain = relative.to_str().and_then(|text| {
        let (folder, name) = text.rsplit_once('/')?;
        let normal = !matches!(name, "" | "." | "..")
            && !folder.is_empty()
            && !folder.ends_with('/')
            && !folder.ends_with("/.")
            && folder != ".";
        normal.then(|| Path::new(folder))
    });
    plain.or_else(|| relative.parent())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_folder_is_the_paths_parent() {
        for path in [
            "sessions/2025/01/02/rollout-a.jsonl",
            "responses/in.jsonl.zst",
            "file",
            "",
            "/",
            "/x",
            "/abs/x",
            "a//b",
            "a//b/c",
            "a/./b",
            "a/./b/c",
            "./b",
            ".",
            "..",
            "../b",
            "a/../b",
            "a/b/",
            "a/b//",
            "a/b/.",
            "a/b/..",
            "a/b/./",
            "./",
            "//x",
            "x/.hidden",
        ] {
            let path = Path::new(path);
            // As bytes: `Path`'s equality is by components (`a/` is `a`), the cache's by bytes.
            assert_eq!(
                folder_of(path).map(Path::as_os_str),
                path.parent().map(Path::as_os_str),
                "{path:?}"
            );
        }
    }

    /// A path the manifest does not know is written without a look-up first: it must still
    /// never replace a file that is there (a lost manifest, a session made by hand).
    #[test]
    fn a_path_the_manifest_does_not_know_is_written_new_and_never_clobbers() {
        let root = tempfile::tempdir().expect("temp dir");
        let home = Home::new(root.path());
        let guard = Guard::new(HashMap::new(), false);
        let relative = Path::new("sessions/2025/01/02/rollout-a.jsonl");
        let bytes = b"{\"new\":1}\n";
        let placed = guard.place(
            &home,
            relative,
            bytes,
            &digest(bytes),
            &Placement::default(),
        );
        assert_eq!(placed.expect("placed"), Placed::Written);
        let target = root.path().join(relative);
        assert_eq!(fs::read(&target).expect("read"), bytes);
        let mode = fs::metadata(&target).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let placed = guard.place(
            &home,
            relative,
            bytes,
            &digest(bytes),
            &Placement::default(),
        );
        assert_eq!(placed.expect("placed"), Placed::Unchanged);

        let edited = b"{\"edited by a person\":1}\n";
        fs::write(&target, edited).expect("edit");
        let placed = guard.place(
            &home,
            relative,
            bytes,
            &digest(bytes),
            &Placement::default(),
        );
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

    /// A dry run looks a missing folder up once, and plans every session in it as written;
    /// a session in a folder that is there is still read, and one the manifest recorded in a
    /// missing folder is still withheld. Nothing is made on disk.
    #[test]
    fn a_dry_run_plans_sessions_in_missing_folders_without_looking_each_up() {
        let root = tempfile::tempdir().expect("temp dir");
        let home = Home::new(root.path());
        let there = Path::new("sessions/2025/01/02/rollout-a.jsonl");
        fs::create_dir_all(root.path().join("sessions/2025/01/02")).expect("folder");
        fs::write(root.path().join(there), b"{\"by hand\":1}\n").expect("session");
        let gone = "sessions/2025/01/04/rollout-gone.jsonl";
        let written = HashMap::from([(gone.to_string(), digest(b"x\n"))]);
        let guard = Guard::planning(written, false);
        let bytes = b"{\"new\":1}\n";
        let plan = |relative: &str| {
            guard
                .place(
                    &home,
                    Path::new(relative),
                    bytes,
                    &digest(bytes),
                    &Placement::default(),
                )
                .expect("planned")
        };
        assert_eq!(plan("sessions/2025/01/02/rollout-a.jsonl"), Placed::Kept);
        assert_eq!(plan("sessions/2025/01/02/rollout-b.jsonl"), Placed::Written);
        assert_eq!(plan("sessions/2025/01/03/rollout-c.jsonl"), Placed::Written);
        assert_eq!(plan("sessions/2025/01/03/rollout-d.jsonl"), Placed::Written);
        assert_eq!(plan(gone), Placed::Withheld(Withheld::Deleted));
        let missing = guard.missing.lock().expect("lock");
        assert_eq!(
            missing.get(std::ffi::OsStr::new("sessions/2025/01/03")),
            Some(&true)
        );
        assert_eq!(
            missing.get(std::ffi::OsStr::new("sessions/2025/01/02")),
            Some(&false)
        );
        assert!(!root.path().join("sessions/2025/01/03").exists());
        // A folder that is a symlink is not "missing": the session's own look-up says so.
        drop(missing);
        std::os::unix::fs::symlink("/nonexistent", root.path().join("sessions/2025/01/05"))
            .expect("symlink");
        assert_eq!(plan("sessions/2025/01/05/rollout-e.jsonl"), Placed::Written);
        let missing = guard.missing.lock().expect("lock");
        assert_eq!(
            missing.get(std::ffi::OsStr::new("sessions/2025/01/05")),
            Some(&false)
        );
    }
}
