//! A folder of rollover's state, held open by its descriptor, and every file in it reached
//! from that descriptor one name at a time with `O_NOFOLLOW`: no state file (the manifest, a
//! run's reports, a kept copy) is ever opened, made, renamed or removed through a symlink at
//! any component of its path, whatever was planted below the home (`rollover/runs` made a
//! symlink to `/etc`, say). A symlink where a folder or file of ours should be is
//! [`OutputError::Symlink`], naming it; its target is left alone.
//!
//! Folders are made 0700 and files 0600 whatever the umask: transcripts are personal data.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::OutputError;

/// An open folder of the home, and the path it was reached by (for messages only).
#[derive(Debug, Clone)]
pub struct Dir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

/// One entry of a listed folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    /// A folder (not a symlink to one).
    pub is_dir: bool,
}

fn io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

/// The error of an operation on `path`: a symlink met where `O_NOFOLLOW` was asked says so.
pub(crate) fn error_at(path: &Path, e: std::io::Error) -> OutputError {
    let raw = e.raw_os_error();
    if raw == Some(Errno::LOOP.raw_os_error()) || raw == Some(Errno::NOTDIR.raw_os_error()) {
        // ENOTDIR: a symlink (or a file) where a folder was expected.
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
            || raw == Some(Errno::LOOP.raw_os_error())
        {
            return OutputError::Symlink {
                path: path.display().to_string(),
            };
        }
    }
    OutputError::Write {
        path: path.display().to_string(),
        source: e,
    }
}

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::RDONLY);

impl Dir {
    /// Opens the folder at `path` itself (the home the user named: symlinks in its own path
    /// are the user's choice), creating it and its parents (0700) when missing.
    pub fn open_root(path: &Path) -> Result<Dir, OutputError> {
        let open = || {
            rustix::fs::open(
                path,
                OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY,
                Mode::empty(),
            )
        };
        let fd = match open() {
            Err(Errno::NOENT) => {
                super::home::private_dir_all(path)?;
                open().map_err(|e| error_at(path, io(e)))?
            }
            other => other.map_err(|e| error_at(path, io(e)))?,
        };
        Ok(Dir {
            fd: Arc::new(fd),
            path: path.to_path_buf(),
        })
    }

    /// Opens the folder at `path` without creating it: `None` when it is not there.
    pub fn open_root_existing(path: &Path) -> Result<Option<Dir>, OutputError> {
        match rustix::fs::open(
            path,
            OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Some(Dir {
                fd: Arc::new(fd),
                path: path.to_path_buf(),
            })),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(error_at(path, io(e))),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in this folder, for messages.
    pub fn path_of(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }

    fn fd(&self) -> impl AsFd + '_ {
        self.fd.as_fd()
    }

    /// The folder at `relative` below this one, each component opened with `O_NOFOLLOW`, made
    /// (0700) where missing when `create`; `None` when one is missing and not `create`.
    pub fn sub(
        &self,
        relative: impl AsRef<Path>,
        create: bool,
    ) -> Result<Option<Dir>, OutputError> {
        let relative = relative.as_ref();
        let mut current = self.clone();
        for component in relative.components() {
            let name = match component {
                Component::Normal(name) => name,
                Component::CurDir => continue,
                Component::RootDir | Component::ParentDir | Component::Prefix(_) => {
                    return Err(OutputError::Write {
                        path: self.path_of(relative).display().to_string(),
                        source: std::io::Error::new(
                            ErrorKind::InvalidInput,
                            "not a plain relative path below the home",
                        ),
                    })
                }
            };
            let path = current.path_of(name);
            let opened = match rustix::fs::openat(current.fd(), name, DIR_FLAGS, Mode::empty()) {
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(current.fd(), name, Mode::from_raw_mode(0o700)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(error_at(&path, io(e))),
                    }
                    let fd = rustix::fs::openat(current.fd(), name, DIR_FLAGS, Mode::empty())
                        .map_err(|e| error_at(&path, io(e)))?;
                    // A umask that takes owner bits away would leave it unwritable.
                    rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))
                        .map_err(|e| error_at(&path, io(e)))?;
                    fd
                }
                Err(Errno::NOENT) => return Ok(None),
                Err(e) => return Err(error_at(&path, io(e))),
                Ok(fd) => fd,
            };
            current = Dir {
                fd: Arc::new(opened),
                path,
            };
        }
        Ok(Some(current))
    }

    /// [`Dir::sub`], made where missing.
    pub fn sub_made(&self, relative: impl AsRef<Path>) -> Result<Dir, OutputError> {
        let relative = relative.as_ref();
        self.sub(relative, true)?.ok_or_else(|| OutputError::Write {
            path: self.path_of(relative).display().to_string(),
            source: std::io::Error::from(ErrorKind::NotFound),
        })
    }

    fn open_with(&self, name: &str, flags: OFlags) -> Result<Option<File>, OutputError> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(self.fd(), name, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => Ok(Some(File::from(fd))),
            Err(Errno::NOENT) if !flags.contains(OFlags::CREATE) => Ok(None),
            Err(e) => Err(error_at(&self.path_of(name), io(e))),
        }
    }

    /// Opens the file `name` to read: `None` when it is not there.
    pub fn open_read(&self, name: &str) -> Result<Option<File>, OutputError> {
        self.open_with(name, OFlags::RDONLY)
    }

    /// Reads the whole file `name`: `None` when it is not there.
    pub fn read(&self, name: &str) -> Result<Option<Vec<u8>>, OutputError> {
        use std::io::Read;
        let Some(mut file) = self.open_read(name)? else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| error_at(&self.path_of(name), e))?;
        Ok(Some(bytes))
    }

    /// Reads at most `limit` bytes of the file `name`; a longer file is an error naming it.
    pub fn read_capped(&self, name: &str, limit: u64) -> Result<Option<Vec<u8>>, OutputError> {
        use std::io::Read;
        let Some(file) = self.open_read(name)? else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        file.take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| error_at(&self.path_of(name), e))?;
        if bytes.len() as u64 > limit {
            return Err(OutputError::Write {
                path: self.path_of(name).display().to_string(),
                source: std::io::Error::new(
                    ErrorKind::InvalidData,
                    format!("larger than the {limit} bytes such a file can hold"),
                ),
            });
        }
        Ok(Some(bytes))
    }

    /// Opens (creating, 0600) the file `name` to append to.
    pub fn open_append(&self, name: &str) -> Result<File, OutputError> {
        let file = self
            .open_with(name, OFlags::WRONLY | OFlags::CREATE | OFlags::APPEND)?
            .ok_or_else(|| {
                error_at(
                    &self.path_of(name),
                    std::io::Error::from(ErrorKind::NotFound),
                )
            })?;
        private(&file, &self.path_of(name))?;
        Ok(file)
    }

    /// Opens the file `name` to read and write, created (0600) when missing.
    pub fn open_rw(&self, name: &str) -> Result<File, OutputError> {
        self.open_private(name, OFlags::RDWR | OFlags::CREATE)
    }

    /// Creates the file `name` (0600), truncating one that is there.
    pub fn create(&self, name: &str) -> Result<File, OutputError> {
        self.open_private(name, OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC)
    }

    /// Creates the file `name` (0600) only if no file (nor symlink) has that name.
    pub fn create_new(&self, name: &str) -> Result<File, OutputError> {
        self.open_private(name, OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL)
    }

    /// Opens `name` with `flags` (which create it), owner-only.
    fn open_private(&self, name: &str, flags: OFlags) -> Result<File, OutputError> {
        let file = self.open_with(name, flags)?.ok_or_else(|| {
            error_at(
                &self.path_of(name),
                std::io::Error::from(ErrorKind::NotFound),
            )
        })?;
        private(&file, &self.path_of(name))?;
        Ok(file)
    }

    /// Writes the file `name` atomically: into a temporary name of this folder (`temp`),
    /// then renamed over `name`. A temporary name found taken (a killed run's, or planted) is
    /// removed, the link itself never its target, and made anew.
    pub fn write_atomic_with(
        &self,
        name: &str,
        temp: &str,
        durable: bool,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<PathBuf, OutputError> {
        let target = self.path_of(name);
        let file = match self.create_new(temp) {
            Ok(file) => file,
            Err(_) => {
                self.remove_file(temp)?;
                self.create_new(temp)?
            }
        };
        let result = (|| {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, file);
            write(&mut out)
                .and_then(|()| out.flush())
                .map_err(|e| error_at(&target, e))?;
            if durable {
                out.get_ref().sync_all().map_err(|e| error_at(&target, e))?;
            }
            self.rename(temp, name)?;
            if durable {
                self.sync()?;
            }
            Ok(())
        })();
        if let Err(err) = result {
            let _ = self.remove_file(temp);
            return Err(err);
        }
        Ok(target)
    }

    /// Renames `from` to `to`, both names in this folder (replacing `to`).
    pub fn rename(&self, from: &str, to: &str) -> Result<(), OutputError> {
        rustix::fs::renameat(self.fd(), from, self.fd(), to)
            .map_err(|e| error_at(&self.path_of(to), io(e)))
    }

    /// Renames `from` in this folder to `to` in `other` (replacing nothing: a name taken there
    /// is an error).
    pub fn move_to(&self, from: &str, other: &Dir, to: &str) -> Result<(), OutputError> {
        rustix::fs::renameat_with(
            self.fd(),
            from,
            other.fd(),
            to,
            rustix::fs::RenameFlags::NOREPLACE,
        )
        .map_err(|e| error_at(&other.path_of(to), io(e)))
    }

    /// Hard-links `from` in this folder as `to` in `other` (never replacing a file there).
    pub fn link_to(&self, from: &str, other: &Dir, to: &str) -> Result<(), OutputError> {
        rustix::fs::linkat(self.fd(), from, other.fd(), to, AtFlags::empty())
            .map_err(|e| error_at(&other.path_of(to), io(e)))
    }

    /// Removes the file (or symlink) `name`; nothing when it is not there.
    pub fn remove_file(&self, name: &str) -> Result<(), OutputError> {
        match rustix::fs::unlinkat(self.fd(), name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(error_at(&self.path_of(name), io(e))),
        }
    }

    /// Removes the folder `name` and everything in it, without following a symlink in it
    /// (a symlink is removed, never its target), one folder at a time from an explicit stack.
    pub fn remove_tree(&self, name: &str) -> Result<(), OutputError> {
        let Some(top) = self.sub(name, false)? else {
            return Ok(());
        };
        // Folders still to empty, with the folder each is in and its name there.
        let mut stack: Vec<(Dir, Dir, String)> = vec![(top, self.clone(), name.to_string())];
        while let Some((dir, parent, dir_name)) = stack.pop() {
            let mut deeper = Vec::new();
            for entry in dir.list()? {
                if entry.is_dir {
                    if let Some(sub) = dir.sub(&entry.name, false)? {
                        deeper.push((sub, dir.clone(), entry.name));
                    }
                } else {
                    dir.remove_file(&entry.name)?;
                }
            }
            if deeper.is_empty() {
                match rustix::fs::unlinkat(parent.fd(), dir_name.as_str(), AtFlags::REMOVEDIR) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(e) => return Err(error_at(&parent.path_of(&dir_name), io(e))),
                }
            } else {
                // Emptied after its subfolders: pushed back first, popped after them.
                stack.push((dir, parent, dir_name));
                stack.extend(deeper);
            }
        }
        Ok(())
    }

    /// The entries of this folder (but `.` and `..`), sorted by name.
    pub fn list(&self) -> Result<Vec<Entry>, OutputError> {
        let fd = rustix::fs::openat(self.fd(), ".", DIR_FLAGS, Mode::empty())
            .map_err(|e| error_at(&self.path, io(e)))?;
        let dir = rustix::fs::Dir::new(fd).map_err(|e| error_at(&self.path, io(e)))?;
        let mut entries = Vec::new();
        for entry in dir {
            let entry = entry.map_err(|e| error_at(&self.path, io(e)))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." {
                continue;
            }
            // Some file systems leave the type unknown in the listing: ask, never following.
            let kind = entry.file_type();
            let is_dir = if kind == rustix::fs::FileType::Unknown {
                rustix::fs::statat(self.fd(), name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|s| rustix::fs::FileType::from_raw_mode(s.st_mode).is_dir())
            } else {
                kind == rustix::fs::FileType::Directory
            };
            entries.push(Entry { name, is_dir });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// Whether `name` is in this folder (a symlink counts, not followed).
    pub fn contains(&self, name: &str) -> bool {
        rustix::fs::statat(self.fd(), name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Whether `name` is a folder here (not a symlink to one).
    pub fn is_dir(&self, name: &str) -> bool {
        rustix::fs::statat(self.fd(), name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|s| rustix::fs::FileType::from_raw_mode(s.st_mode).is_dir())
    }

    /// The target of the symlink `name`, if it is one.
    pub fn read_link(&self, name: &str) -> Option<PathBuf> {
        let target = rustix::fs::readlinkat(self.fd(), name, Vec::new()).ok()?;
        let bytes: Vec<u8> = target.into_bytes();
        Some(PathBuf::from(
            <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(bytes),
        ))
    }

    /// Points the symlink `name` at `target`, replaced atomically through `temp`.
    pub fn point(&self, name: &str, target: &Path, temp: &str) -> Result<(), OutputError> {
        self.remove_file(temp)?;
        rustix::fs::symlinkat(target, self.fd(), temp)
            .map_err(|e| error_at(&self.path_of(temp), io(e)))?;
        self.rename(temp, name)
    }

    /// fsyncs the folder (a rename or link in it survives a power loss).
    pub fn sync(&self) -> Result<(), OutputError> {
        rustix::fs::fsync(self.fd()).map_err(|e| error_at(&self.path, io(e)))
    }

    /// The same folder through a descriptor of its own (a lock taken on it is let go when it
    /// is dropped, whoever else holds this folder open).
    pub fn reopen(&self) -> Result<Dir, OutputError> {
        let fd = rustix::fs::openat(self.fd(), ".", DIR_FLAGS, Mode::empty())
            .map_err(|e| error_at(&self.path, io(e)))?;
        Ok(Dir {
            fd: Arc::new(fd),
            path: self.path.clone(),
        })
    }

    /// Takes an advisory lock on the folder itself (`flock`): a folder cannot be removed from
    /// under a run while it holds files, as a lock file could. `Ok(false)` when another holds it.
    pub fn try_lock(&self) -> Result<bool, OutputError> {
        match rustix::fs::flock(
            self.fd(),
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::WOULDBLOCK) => Ok(false),
            Err(e) => Err(error_at(&self.path, io(e))),
        }
    }

    /// Whether another process holds the folder's lock, asked without keeping it: a shared
    /// lock taken and let go at once.
    pub fn locked_by_other(&self) -> bool {
        let Ok(fd) = rustix::fs::openat(self.fd(), ".", DIR_FLAGS, Mode::empty()) else {
            return false;
        };
        match rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockShared) {
            Ok(()) => {
                let _ = rustix::fs::flock(&fd, rustix::fs::FlockOperation::Unlock);
                false
            }
            Err(_) => true,
        }
    }
}

/// Sets a file 0600 outright when the umask took owner bits away.
fn private(file: &File, path: &Path) -> Result<(), OutputError> {
    let mode = file
        .metadata()
        .map_err(|e| error_at(path, e))?
        .permissions()
        .mode();
    if mode & 0o777 != 0o600 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(|e| error_at(path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_at_any_component_is_refused_and_its_target_left_alone() {
        let root = tempfile::tempdir().expect("temp dir");
        let outside = tempfile::tempdir().expect("outside");
        let home = Dir::open_root(root.path()).expect("root");
        home.sub_made("rollover").expect("state");
        std::os::unix::fs::symlink(outside.path(), root.path().join("rollover/runs"))
            .expect("plant");
        let err = home.sub("rollover/runs/0001", true).unwrap_err();
        assert!(matches!(err, OutputError::Symlink { .. }), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).expect("ls").count(), 0);
        // A planted symlink at a file's name is not followed either.
        let state = home.sub_made("rollover").expect("state");
        std::os::unix::fs::symlink(outside.path().join("x"), root.path().join("rollover/f"))
            .expect("plant file");
        assert!(matches!(
            state.create_new("f").unwrap_err(),
            OutputError::Write { .. } | OutputError::Symlink { .. }
        ));
        assert!(state.create("f").is_err());
        assert!(!outside.path().join("x").exists());
    }

    #[test]
    fn a_tree_is_removed_without_following_its_links() {
        let root = tempfile::tempdir().expect("temp dir");
        let outside = tempfile::tempdir().expect("outside");
        std::fs::write(outside.path().join("keep"), b"keep").expect("canary");
        let home = Dir::open_root(root.path()).expect("root");
        let deep = home.sub_made("t/a/b").expect("deep");
        deep.create("f").expect("file");
        home.sub_made("t/c").expect("c");
        std::os::unix::fs::symlink(outside.path(), root.path().join("t/a/link")).expect("link");
        home.remove_tree("t").expect("removed");
        assert!(!root.path().join("t").exists());
        assert!(outside.path().join("keep").exists());
    }

    #[test]
    fn an_atomic_write_replaces_a_planted_temporary_link() {
        let root = tempfile::tempdir().expect("temp dir");
        let outside = tempfile::tempdir().expect("outside");
        let canary = outside.path().join("canary");
        std::fs::write(&canary, b"keep me").expect("canary");
        let home = Dir::open_root(root.path()).expect("root");
        std::os::unix::fs::symlink(&canary, root.path().join(".m.tmp1")).expect("plant");
        home.write_atomic_with("m", ".m.tmp1", false, |out| out.write_all(b"new"))
            .expect("write");
        assert_eq!(std::fs::read(&canary).expect("canary"), b"keep me");
        assert_eq!(std::fs::read(root.path().join("m")).expect("m"), b"new");
    }
}
