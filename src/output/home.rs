//! The output folder, a Codex home: rollouts under `sessions/`, rollover's own state under
//! `rollover/` (lock, manifest, one folder per run, `latest`, copies of replaced sessions).
//! A shard of a sharded run keeps the same state in its own folder,
//! `rollover/shards/KKKK-of-NNNN/`, so shards never share a lock, a manifest or a run folder,
//! and marks its temporary files with its name, so that it removes only its own.
//!
//! Everything is created private (files 0600, folders 0700: transcripts are personal data),
//! whatever the umask. Files appear under their final name only complete: each is written to a
//! hidden temporary name in the same folder (so the rename is atomic on any filesystem,
//! shared ones included) and renamed; a new rollout, on Linux, to an unnamed file of its
//! folder that `linkat` names once complete, only if no file has that name
//! ([`Home::write_new`]). `--durable` adds an fsync of the file before the rename (or link)
//! and of the folder after it, so a power loss cannot leave a named but empty file.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use walkdir::WalkDir;

use super::dir::Dir;
use super::OutputError;
use crate::model::responses::RESPONSES_DIR;

/// Folder of rollover's own files inside the home.
pub(crate) const STATE_DIR: &str = "rollover";
/// One folder per run inside it, numbered `0001`, `0002`...
pub(crate) const RUNS_DIR: &str = "runs";
/// A symlink to the last run's folder.
pub(crate) const LATEST: &str = "latest";
/// A symlink to the last dry run's folder, in a home that holds a real run (whose `latest`
/// a dry run leaves alone).
pub(crate) const LATEST_PLAN: &str = "latest-plan";
/// Where `--force` keeps a copy of each session it replaced, in a folder per run.
pub(crate) const REPLACED_DIR: &str = "replaced";
/// Where `--prune` moves each session it removes, in a folder per run.
pub(crate) const PRUNED_DIR: &str = "pruned";
/// What a killed run quarantined, kept in the folder of the run that takes its number.
pub(crate) const KILLED_QUARANTINE: &str = "quarantine.killed-run.jsonl";
/// Marks a temporary file: `.rollout-….jsonl.tmp<pid>` (`.tmp0002-of-0004.<pid>` for a shard).
pub(crate) const TEMP_MARK: &str = ".tmp";
/// The shards' state folders, inside `rollover/`.
pub(crate) const SHARDS_DIR: &str = "shards";

#[derive(Debug, Clone)]
pub struct Home {
    pub root: PathBuf,
    /// fsync files and folders (`--durable`).
    pub durable: bool,
    /// rollover's state relative to the root: `rollover`, or a shard's folder inside it.
    state_rel: PathBuf,
    /// This run's folder relative to the state (`runs/NNNN`), once started.
    run_rel: PathBuf,
    /// This run's number, once started: it names the run's kept copies.
    run_number: Option<u32>,
    /// Marks this run's temporary files (empty unless sharded).
    temp_tag: String,
    /// This process's id, the end of every temporary name (asked of the kernel once).
    pid: u32,
    /// The state folder, opened once from the root one name at a time ([`Dir`]).
    state: Arc<OnceLock<Dir>>,
}

/// What [`Home::start_run`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Started {
    pub number: u32,
    /// The last run was killed: its folder was removed and its number is taken again.
    pub killed: bool,
    /// Names in `runs/` that look like runs but are not folders: skipped.
    pub stray: Vec<String>,
}

pub(crate) fn write_error(path: &Path, source: std::io::Error) -> OutputError {
    OutputError::Write {
        path: path.display().to_string(),
        source,
    }
}

/// Creates `dir` and its missing parents, 0700 whatever the umask.
pub(crate) fn private_dir_all(dir: &Path) -> Result<(), OutputError> {
    if umask_keeps(0o700) {
        return DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| write_error(dir, e));
    }
    // A umask that takes owner bits away (0277) would leave each new folder 0500, and a
    // person other than root could not write into it: each missing folder, from the top, is
    // made and then set to 0700 before anything goes into it.
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .collect();
    for folder in missing.into_iter().rev() {
        match DirBuilder::new().mode(0o700).create(folder) {
            Ok(()) => fs::set_permissions(folder, fs::Permissions::from_mode(0o700))
                .map_err(|e| write_error(folder, e))?,
            // Made meanwhile by another writer, which sets its mode.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(write_error(folder, e)),
        }
    }
    Ok(())
}

/// Creates the temporary file `temp` in `dir`, 0600. It is created new, so the mode it is
/// created with is its mode, and the `fchmod` is needed only under a umask that takes owner
/// bits away; its folder is made only when missing. (A folder made for every file cost a
/// `mkdir` and a `stat`, and with the `fchmod` those were ~8 % of a writer's time on small
/// rollouts.) A temporary file left by a killed process of the same pid is replaced.
fn private_temp_file(dir: &Path, temp: &Path) -> Result<File, OutputError> {
    let create = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(temp)
    };
    let created = match create() {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            private_dir_all(dir)?;
            create()
        }
        other => other,
    };
    match created {
        Ok(file) if umask_keeps_private() => Ok(file),
        Ok(file) => {
            file.set_permissions(fs::Permissions::from_mode(0o600))
                .map_err(|e| write_error(temp, e))?;
            Ok(file)
        }
        // A name of ours (it ends in this process's id) left by a killed run of the same
        // pid, or planted: removed (a symlink itself, never its target), then made anew.
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            fs::remove_file(temp).map_err(|e| write_error(temp, e))?;
            create().map_err(|e| open_error(temp, e))
        }
        Err(e) => Err(write_error(temp, e)),
    }
}

/// Whether this process's umask leaves 0600 whole (takes neither owner bit away): then a file
/// created 0600 needs no `fchmod`.
fn umask_keeps_private() -> bool {
    umask_keeps(0o600)
}

/// Whether this process's umask takes none of `mode`'s bits away, read once from
/// `/proc/self/status`; false when it cannot be read, so every mode is set outright.
fn umask_keeps(mode: u32) -> bool {
    static UMASK: OnceLock<Option<u32>> = OnceLock::new();
    let umask = UMASK.get_or_init(|| {
        fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| umask_in_status(&status))
    });
    umask.is_some_and(|umask| umask & mode == 0)
}

/// The `Umask:` of a `/proc/PID/status` text (Linux 4.7 and later).
fn umask_in_status(status: &str) -> Option<u32> {
    let value = status
        .lines()
        .find_map(|line| line.strip_prefix("Umask:"))?;
    u32::from_str_radix(value.trim(), 8).ok()
}

/// Opens `path` with `options`, creating it 0600 whatever the umask.
/// Opens a state or run file, 0600, never through a symlink (`O_NOFOLLOW`): one planted at
/// its name is [`OutputError::Symlink`], and its target is left alone.
pub(crate) fn private_file(options: &mut OpenOptions, path: &Path) -> Result<File, OutputError> {
    let file = options
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| open_error(path, e))?;
    // The umask can only take bits away from 0600; a umask like 0277 would leave the owner
    // unable to write, so set the mode outright.
    file.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(|e| write_error(path, e))?;
    Ok(file)
}

/// The error of an open that failed: a symlink where `O_NOFOLLOW` was asked says so.
pub(crate) fn open_error(path: &Path, e: std::io::Error) -> OutputError {
    if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        OutputError::Symlink {
            path: path.display().to_string(),
        }
    } else {
        write_error(path, e)
    }
}

/// [`read_nofollow`], with the file's status as it was read (to tell later that it changed).
pub(crate) fn read_nofollow_stat(
    path: &Path,
) -> Result<Option<(Vec<u8>, fs::Metadata)>, OutputError> {
    use std::io::Read;
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_error(path, e)),
    };
    let meta = file.metadata().map_err(|e| write_error(path, e))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| write_error(path, e))?;
    Ok(Some((bytes, meta)))
}

/// Reads a file of the home without following a symlink at its name: `Ok(None)` when there
/// is no file, [`OutputError::Symlink`] when a symlink is there.
pub(crate) fn read_nofollow(path: &Path) -> Result<Option<Vec<u8>>, OutputError> {
    use std::io::Read;
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(open_error(path, e)),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| write_error(path, e))?;
    Ok(Some(bytes))
}

impl Home {
    pub fn new(root: &Path) -> Home {
        Home {
            root: root.to_path_buf(),
            durable: false,
            state_rel: PathBuf::from(STATE_DIR),
            run_rel: PathBuf::new(),
            run_number: None,
            temp_tag: String::new(),
            pid: std::process::id(),
            state: Arc::new(OnceLock::new()),
        }
    }

    /// The home as one shard sees it: rollouts in the shared `sessions/`, state in
    /// `rollover/shards/<folder>/`.
    pub fn for_shard(root: &Path, folder: &str) -> Home {
        Home {
            state_rel: Path::new(STATE_DIR).join(SHARDS_DIR).join(folder),
            temp_tag: format!("{folder}."),
            ..Home::new(root)
        }
    }

    /// The folders of the home that are symlinks, checked before the run takes its lock: the
    /// folders sessions and bodies go into (`sessions/`, `archived_sessions/`, `responses/`)
    /// are written through only when `write_through` (users move `sessions/` to another disk),
    /// and returned, to be said; rollover's own state folder never is.
    pub fn check_linked_folders(&self, write_through: bool) -> Result<Vec<String>, OutputError> {
        let mut linked = Vec::new();
        for name in [STATE_DIR, "sessions", "archived_sessions", "responses"] {
            let path = self.root.join(name);
            let is_link =
                std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
            if !is_link {
                continue;
            }
            let target = std::fs::read_link(&path).map_or_else(
                |e| format!("(unreadable: {e})"),
                |t| t.display().to_string(),
            );
            let path = path.display().to_string();
            if name == STATE_DIR {
                return Err(OutputError::Symlink { path });
            }
            if !write_through {
                return Err(OutputError::LinkedFolder { path, target });
            }
            linked.push(format!(
                "{path} is a symlink to {target}: writing through it (--write-through-links)"
            ));
        }
        Ok(linked)
    }

    /// `OUT/rollover` (a shard's: `OUT/rollover/shards/KKKK-of-NNNN`), for messages and
    /// for the commands that only read it.
    pub fn state_dir(&self) -> PathBuf {
        self.root.join(&self.state_rel)
    }

    /// The state folder, made where missing, reached from the home's root with no symlink
    /// at any step, and held open for the run.
    pub fn state(&self) -> Result<Dir, OutputError> {
        if let Some(dir) = self.state.get() {
            return Ok(dir.clone());
        }
        let dir = Dir::open_root(&self.root)?.sub_made(&self.state_rel)?;
        Ok(self.state.get_or_init(|| dir).clone())
    }

    /// The state folder if it is there, opened as [`Home::state`] does, without making it.
    pub fn existing_state(&self) -> Result<Option<Dir>, OutputError> {
        if let Some(dir) = self.state.get() {
            return Ok(Some(dir.clone()));
        }
        match Dir::open_root_existing(&self.root)? {
            Some(root) => root.sub(&self.state_rel, false),
            None => Ok(None),
        }
    }

    /// The hidden temporary name `name` is written under before its rename, in the same folder.
    pub(crate) fn temp_name(&self, name: &str) -> String {
        format!(".{name}{TEMP_MARK}{}{}", self.temp_tag, self.pid)
    }

    /// The path of a state file, for messages.
    pub fn state_file(&self, name: &str) -> PathBuf {
        self.state_dir().join(name)
    }

    /// The folder of this run's report files.
    pub fn run_dir(&self) -> PathBuf {
        self.state_dir().join(&self.run_rel)
    }

    /// This run's number, once started.
    pub fn run_number(&self) -> Option<u32> {
        self.run_number
    }

    pub fn run_file(&self, name: &str) -> PathBuf {
        self.run_dir().join(name)
    }

    fn run_folder(&self) -> Result<Dir, OutputError> {
        self.state()?.sub_made(&self.run_rel)
    }

    /// Creates `OUT/rollover` (0700).
    pub fn create_state_dir(&self) -> Result<(), OutputError> {
        self.state().map(drop)
    }

    /// Starts the next run folder, `runs/NNNN`. A last folder without `summary.json` belonged
    /// to a run that was killed: it is removed and its number used again, so the same sequence
    /// of finished runs always gives the same tree; what it quarantined is kept beside the new
    /// run's own report lines ([`KILLED_QUARANTINE`]). A name in `runs/` that is not a folder
    /// is skipped (returned, to be said).
    pub fn start_run(&mut self) -> Result<Started, OutputError> {
        let state = self.state()?;
        let runs = state.sub_made(RUNS_DIR)?;
        let mut numbers = Vec::new();
        let mut stray = Vec::new();
        for entry in runs.list()? {
            let Ok(number) = entry.name.parse::<u32>() else {
                continue;
            };
            if entry.is_dir {
                numbers.push(number);
            } else {
                stray.push(runs.path_of(&entry.name).display().to_string());
            }
        }
        numbers.sort_unstable();
        // Temporary names a kill left beside the state files (`.latest.tmp<pid>`).
        self.remove_state_temporaries(&state)?;
        let mut next = match numbers.last() {
            None => 1,
            Some(&last) => last
                .checked_add(1)
                .ok_or_else(|| OutputError::RunsExhausted {
                    path: runs.path().display().to_string(),
                    last,
                })?,
        };
        let mut killed = false;
        let mut kept_quarantine = None;
        if let Some(&last) = numbers.last() {
            let name = run_name(last);
            let folder = runs.sub_made(&name)?;
            if !folder.contains("summary.json") {
                // What the killed run quarantined: the records themselves, unchanged.
                kept_quarantine = folder.read(KILLED_QUARANTINE)?;
                if let Some(lines) = folder.read("quarantine.jsonl")? {
                    kept_quarantine.get_or_insert_with(Vec::new).extend(lines);
                }
                runs.remove_tree(&name)?;
                next = last;
                killed = true;
            }
        }
        self.run_rel = Path::new(RUNS_DIR).join(run_name(next));
        self.run_number = Some(next);
        let folder = self.run_folder()?;
        if let Some(lines) = kept_quarantine.filter(|l| !l.is_empty()) {
            let temp = self.temp_name(KILLED_QUARANTINE);
            folder.write_atomic_with(KILLED_QUARANTINE, &temp, self.durable, |out| {
                out.write_all(&lines)
            })?;
        }
        Ok(Started {
            number: next,
            killed,
            stray,
        })
    }

    /// Removes the oldest run folders (`runs/NNNN`, by number) so that at most `keep` remain
    /// (`--keep-runs`), never this run's nor the one `latest` points at (when those two are
    /// more than `keep`, both stay), with the copies those runs kept (`replaced/NNNN`,
    /// `pruned/NNNN`). Returns the folders removed, oldest first.
    pub fn prune_runs(&self, keep: usize) -> Result<Vec<PathBuf>, OutputError> {
        let state = self.state()?;
        let runs = state.sub_made(RUNS_DIR)?;
        let mut numbers: Vec<u32> = runs
            .list()?
            .into_iter()
            .filter(|e| e.is_dir)
            .filter_map(|e| e.name.parse::<u32>().ok())
            .collect();
        numbers.sort_unstable();
        let number = |name: &std::ffi::OsStr| name.to_str()?.parse::<u32>().ok();
        let current = self.run_number;
        let latest = state
            .read_link(LATEST)
            .and_then(|target| target.file_name().and_then(number));
        let mut excess = numbers.len().saturating_sub(keep);
        let mut removed = Vec::new();
        for n in numbers {
            if excess == 0 {
                break;
            }
            if Some(n) == current || Some(n) == latest {
                continue;
            }
            let name = run_name(n);
            runs.remove_tree(&name)?;
            for kept in [REPLACED_DIR, PRUNED_DIR] {
                if let Some(copies) = state.sub(kept, false)? {
                    copies.remove_tree(&name)?;
                }
            }
            removed.push(runs.path_of(&name));
            excess -= 1;
        }
        Ok(removed)
    }

    /// Removes this run's kind of temporary names directly in the state folder (a shard: only
    /// its own): what a kill between a write and its rename leaves there.
    fn remove_state_temporaries(&self, state: &Dir) -> Result<(), OutputError> {
        let mark = format!("{TEMP_MARK}{}", self.temp_tag);
        for entry in state.list()? {
            let name = &entry.name;
            let ours = name.starts_with('.')
                && name.contains(&mark)
                && name.rsplit(TEMP_MARK).next().is_some_and(|tail| {
                    tail.trim_start_matches(&self.temp_tag[..])
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == '.')
                });
            if ours && !entry.is_dir {
                state.remove_file(name)?;
            }
        }
        Ok(())
    }

    /// Points `rollover/latest` at this run's folder (a relative symlink, replaced atomically).
    pub fn mark_latest(&self) -> Result<(), OutputError> {
        self.mark_link(LATEST)
    }

    /// Points `rollover/<link>` at this run's folder (a relative symlink, replaced atomically).
    pub fn mark_link(&self, link: &str) -> Result<(), OutputError> {
        if self.run_number.is_none() {
            return Ok(());
        }
        let temp = self.temp_name(link);
        self.state()?.point(link, &self.run_rel, &temp)
    }

    /// Writes `bytes` at `relative` atomically (see the module docs).
    pub fn write_atomic(&self, relative: &Path, bytes: &[u8]) -> Result<PathBuf, OutputError> {
        self.write_atomic_with(relative, |out| out.write_all(bytes))
    }

    /// [`Home::write_atomic`], the bytes written by `write` as it makes them (through a
    /// buffer), so that a large file is never held whole in memory.
    pub fn write_atomic_with(
        &self,
        relative: &Path,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<PathBuf, OutputError> {
        let target = self.root.join(relative);
        let dir = target.parent().unwrap_or(&self.root);
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = dir.join(self.temp_name(&name));
        let result = (|| {
            let file = private_temp_file(dir, &temp)?;
            let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
            write(&mut out)
                .and_then(|()| out.flush())
                .map_err(|e| write_error(&target, e))?;
            let file = out.get_ref();
            if self.durable {
                file.sync_all().map_err(|e| write_error(&target, e))?;
            }
            fs::rename(&temp, &target).map_err(|e| write_error(&target, e))?;
            if self.durable {
                File::open(dir)
                    .and_then(|d| d.sync_all())
                    .map_err(|e| write_error(dir, e))?;
            }
            Ok(())
        })();
        if let Err(err) = result {
            let _ = fs::remove_file(&temp);
            return Err(err);
        }
        Ok(target)
    }

    /// Writes `bytes` at `relative` only if no file is there: false when one is, or when this
    /// file system has no unnamed files (the caller then looks and uses
    /// [`Home::write_atomic`]). The bytes go into an unnamed file of the folder (`O_TMPFILE`),
    /// named once complete by `linkat`, which never replaces a file: a rollout costs one
    /// directory entry, where a named temporary file cost one made, one removed and the
    /// rename's, and a killed run leaves no temporary file behind.
    pub fn write_new(&self, relative: &Path, bytes: &[u8]) -> Result<bool, OutputError> {
        let target = self.root.join(relative);
        let dir = target.parent().unwrap_or(&self.root);
        self.write_unnamed(dir, &target, bytes)
    }

    #[cfg(target_os = "linux")]
    fn write_unnamed(&self, dir: &Path, target: &Path, bytes: &[u8]) -> Result<bool, OutputError> {
        use rustix::fs::{linkat, openat, AtFlags, Mode, OFlags, CWD};
        use rustix::io::Errno;
        use std::os::fd::AsRawFd;

        let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
        let open = || openat(CWD, dir, flags, Mode::from_raw_mode(0o600));
        let opened = match open() {
            Err(Errno::NOENT) => {
                private_dir_all(dir)?;
                open()
            }
            other => other,
        };
        // No unnamed files here (EOPNOTSUPP, or EISDIR from kernels before 3.11), or any
        // other refusal: the named way says what is wrong, if anything is.
        let Ok(fd) = opened else {
            return Ok(false);
        };
        let mut file = File::from(fd);
        if !umask_keeps_private() {
            file.set_permissions(fs::Permissions::from_mode(0o600))
                .map_err(|e| write_error(target, e))?;
        }
        file.write_all(bytes).map_err(|e| write_error(target, e))?;
        if self.durable {
            file.sync_all().map_err(|e| write_error(target, e))?;
        }
        // Through /proc: linking the descriptor itself (AT_EMPTY_PATH) needs a capability.
        let unnamed = format!("/proc/self/fd/{}", file.as_raw_fd());
        // EEXIST: a file is there; anything else (no /proc): the named way.
        if linkat(CWD, unnamed.as_str(), CWD, target, AtFlags::SYMLINK_FOLLOW).is_err() {
            return Ok(false);
        }
        if self.durable {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| write_error(dir, e))?;
        }
        Ok(true)
    }

    #[cfg(not(target_os = "linux"))]
    fn write_unnamed(&self, _: &Path, _: &Path, _: &[u8]) -> Result<bool, OutputError> {
        Ok(false)
    }

    /// Writes one of rollover's state files (`rollover/NAME`) atomically.
    pub fn write_state_atomic(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, OutputError> {
        self.write_state_atomic_with(name, |out| out.write_all(bytes))
    }

    /// [`Home::write_state_atomic`], written by `write` as it goes.
    pub fn write_state_atomic_with(
        &self,
        name: &str,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<PathBuf, OutputError> {
        let temp = self.temp_name(name);
        self.state()?
            .write_atomic_with(name, &temp, self.durable, write)
    }

    /// Writes one of the run's own files atomically (`summary.json`: its presence marks the
    /// run as finished).
    pub fn write_run_file_atomic(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, OutputError> {
        let temp = self.temp_name(name);
        self.run_folder()?
            .write_atomic_with(name, &temp, self.durable, |out| out.write_all(bytes))
    }

    /// Creates (truncating) one of the run's own files, 0600.
    pub fn create_run_file(&self, name: &str) -> Result<File, OutputError> {
        self.run_folder()?.create(name)
    }

    /// The folder of the run's own files, made where missing (the review pages go there).
    pub fn run_folder_dir(&self) -> Result<Dir, OutputError> {
        self.run_folder()
    }

    /// Removes the temporary files a killed run left under `sessions/`, `responses/` and
    /// `rollover/` (a shard: only its own, which carry its name, since the other shards may
    /// be writing theirs at this moment); returns how many.
    pub fn remove_temporary_files(&self) -> Result<u64, OutputError> {
        let mut removed = 0;
        let mark = format!("{TEMP_MARK}{}", self.temp_tag);
        for dir in [self.root.join("sessions"), self.root.join(RESPONSES_DIR)] {
            if !dir.exists() {
                continue;
            }
            for entry in WalkDir::new(&dir).into_iter().filter_map(Result::ok) {
                let name = entry.file_name().to_string_lossy();
                if entry.file_type().is_dir() || !name.starts_with('.') || !name.contains(&mark) {
                    continue;
                }
                fs::remove_file(entry.path()).map_err(|e| write_error(entry.path(), e))?;
                removed += 1;
            }
        }
        // The state folder, one folder at a time from its descriptor (never through a link).
        let mut stack = vec![self.state()?];
        while let Some(dir) = stack.pop() {
            for entry in dir.list()? {
                if entry.is_dir {
                    if let Some(sub) = dir.sub(&entry.name, false)? {
                        stack.push(sub);
                    }
                } else if entry.name.starts_with('.') && entry.name.contains(&mark) {
                    dir.remove_file(&entry.name)?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// Where [`Home::keep_replaced`] copies the session at `relative`, in this run.
    pub fn replaced_path(&self, relative: &Path) -> PathBuf {
        self.kept_path(REPLACED_DIR, relative)
    }

    fn kept_path(&self, kind: &str, relative: &Path) -> PathBuf {
        let run = run_name(self.run_number.unwrap_or(0));
        self.state_dir().join(kind).join(run).join(relative)
    }

    /// Where [`Home::keep_pruned`] moves the session at `relative`, in this run.
    pub fn pruned_path(&self, relative: &Path) -> PathBuf {
        self.kept_path(PRUNED_DIR, relative)
    }

    /// Copies a session about to be replaced (`--force`) to
    /// `rollover/replaced/<run>/<relative>`: a copy of its own, never over another.
    pub fn keep_replaced(&self, relative: &Path) -> Result<PathBuf, OutputError> {
        self.keep_copy(REPLACED_DIR, relative)
    }

    /// Copies a session about to be pruned to `rollover/pruned/<run>/<relative>`. A copy
    /// already there with the same bytes (a prune a kill cut short) is the copy.
    pub fn keep_pruned(&self, relative: &Path) -> Result<PathBuf, OutputError> {
        self.keep_copy(PRUNED_DIR, relative)
    }

    fn keep_copy(&self, kind: &str, relative: &Path) -> Result<PathBuf, OutputError> {
        let source = self.root.join(relative);
        let Some(bytes) = read_nofollow(&source)? else {
            return Err(write_error(
                &source,
                std::io::Error::from(ErrorKind::NotFound),
            ));
        };
        let copy = self.kept_path(kind, relative);
        let (folder, name) = match (relative.parent(), relative.file_name()) {
            (Some(folder), Some(name)) => (folder, name.to_string_lossy().into_owned()),
            (None, _) | (_, None) => {
                return Err(write_error(
                    &copy,
                    std::io::Error::from(ErrorKind::InvalidInput),
                ))
            }
        };
        let run = run_name(self.run_number.unwrap_or(0));
        let dir = self
            .state()?
            .sub_made(Path::new(kind).join(run).join(folder))?;
        // Never over another copy: the same bytes there are this copy (a prune a kill cut
        // short); other bytes keep their name, and this copy takes the next free one.
        let mut name = name;
        let mut copy = copy;
        for n in 2..=1000u32 {
            match dir.read(&name)? {
                Some(there) if there == bytes => return Ok(copy),
                Some(_) => {
                    let base = relative
                        .file_name()
                        .map(|n| n.to_string_lossy())
                        .unwrap_or_default();
                    name = format!("{base}.{n}");
                    copy = copy.with_file_name(&name);
                }
                None => break,
            }
        }
        let mut file = dir.create_new(&name)?;
        file.write_all(&bytes).map_err(|e| write_error(&copy, e))?;
        if self.durable {
            file.sync_all().map_err(|e| write_error(&copy, e))?;
            dir.sync()?;
        }
        Ok(copy)
    }
}

fn run_name(number: u32) -> String {
    format!("{number:04}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symlink planted at the temporary name of a state file is replaced, never followed:
    /// its target keeps its bytes, and the state file is written.
    #[test]
    fn a_symlink_planted_at_a_temporary_name_is_not_followed() {
        let root = tempfile::tempdir().expect("temp dir");
        let outside = tempfile::tempdir().expect("outside");
        let canary = outside.path().join("canary");
        fs::write(&canary, b"keep me\n").expect("canary");
        let home = Home::new(root.path());
        home.create_state_dir().expect("state dir");
        let temp = home.state_file(&home.temp_name("manifest"));
        std::os::unix::fs::symlink(&canary, &temp).expect("plant");
        home.write_state_atomic("manifest", b"new\n")
            .expect("write");
        assert_eq!(fs::read(&canary).expect("canary"), b"keep me\n");
        assert_eq!(
            fs::read(home.state_file("manifest")).expect("manifest"),
            b"new\n"
        );
        assert!(!temp.exists() && fs::symlink_metadata(&temp).is_err());
    }

    #[test]
    fn the_umask_is_read_from_a_status_text() {
        let status = "Name:\trollover\nUmask:\t0022\nState:\tR (running)\n";
        assert_eq!(umask_in_status(status), Some(0o022));
        assert_eq!(umask_in_status("Umask:\t0277\n"), Some(0o277));
        // Kernels before 4.7 have no such line: unknown, so every file gets its fchmod.
        assert_eq!(umask_in_status("Name:\trollover\n"), None);
    }

    #[test]
    fn pruning_runs_keeps_the_current_run_and_the_one_latest_names() {
        let root = tempfile::tempdir().expect("temp dir");
        let runs = root.path().join("rollover/runs");
        for n in 1..=5 {
            fs::create_dir_all(runs.join(run_name(n))).expect("mkdir");
            fs::write(runs.join(run_name(n)).join("summary.json"), "{}").expect("summary");
        }
        std::os::unix::fs::symlink("runs/0002", root.path().join("rollover/latest"))
            .expect("latest");
        let mut home = Home::new(root.path());
        let started = home.start_run().expect("start");
        assert_eq!((started.number, started.killed), (6, false));
        let removed = home.prune_runs(1).expect("prune");
        let names = |paths: &[PathBuf]| -> Vec<String> {
            let names = paths.iter().filter_map(|p| p.file_name());
            names.map(|n| n.to_string_lossy().into_owned()).collect()
        };
        assert_eq!(names(&removed), ["0001", "0003", "0004", "0005"]);
        let mut left: Vec<PathBuf> = fs::read_dir(&runs)
            .expect("read runs")
            .map(|e| e.expect("entry").path())
            .collect();
        left.sort();
        assert_eq!(names(&left), ["0002", "0006"]);
    }

    #[test]
    fn a_temporary_file_is_made_with_its_folder_and_a_stale_one_replaced() {
        let root = tempfile::tempdir().expect("temp dir");
        let home = Home::new(root.path());
        let relative = Path::new("sessions/2025/01/02/rollout-a.jsonl");
        home.write_atomic(relative, b"first\n")
            .expect("first write");
        // A temporary file left by a killed process with this pid, another mode, other bytes.
        let dir = root.path().join("sessions/2025/01/02");
        let stale = dir.join(home.temp_name("rollout-b.jsonl"));
        fs::write(&stale, b"stale bytes, longer than the new ones").expect("stale");
        fs::set_permissions(&stale, fs::Permissions::from_mode(0o644)).expect("chmod");
        let target = home
            .write_atomic(
                Path::new("sessions/2025/01/02/rollout-b.jsonl"),
                b"second\n",
            )
            .expect("second write");
        assert_eq!(fs::read(&target).expect("read"), b"second\n");
        let mode = fs::metadata(&target).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(!stale.exists());
        assert_eq!(
            fs::read(dir.join("rollout-a.jsonl")).expect("read"),
            b"first\n"
        );
    }
}
