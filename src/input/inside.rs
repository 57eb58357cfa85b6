//! Reads that stay inside the inputs: a file a record points to (a dataset's
//! `images`, an export's uploaded files) is read only when it is a **regular file inside the
//! input tree**, reached without a symlink (with `--follow`, through symlinks whose targets are
//! inside the tree), and no larger than a cap.
//!
//! In: the tree's root (the INPUT folder the record's file was found under; its folder for a
//! file named on the command line; none for standard input), the folder a reference is relative
//! to, and the reference. Out: the file's bytes, or the [`Refusal`] saying why it was not read,
//! which the reader turns into its placeholder policy and counts.
//!
//! The path is walked one name at a time from a handle on the root (`openat`, `O_NOFOLLOW`), so
//! what is checked is what is opened: a `..` climbs back the folders actually entered and never
//! above the root, a symlink is seen as one (and followed only by resolving it and finding its
//! target inside the tree), and a device, FIFO or socket is refused from its `stat`, never
//! opened (a FIFO would block the run forever, `/dev/zero` grow it without end). The file is
//! opened non-blocking, checked again on its handle (it could have been swapped), and read
//! through `take(cap + 1)`, so a file that grows or lies about its size cannot exceed the cap.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The largest image read: the OpenAI API's limit for one image input (20 MiB).
pub(crate) const IMAGE_CAP: u64 = 20 << 20;

/// How many symlinks one reference may go through (with `--follow`): Linux's own limit, so a
/// link swapped again and again cannot keep the walk going.
const MAX_LINKS: usize = 40;

/// Why a file a record points to was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not there (or not under a folder: a file where a folder was needed).
    Missing,
    /// There, but it could not be opened or read (permissions, an I/O error).
    Unreadable,
    /// An absolute path, a `..` climbing above the tree, or a symlink whose target is outside it.
    Outside,
    /// A symlink on the way, and the run was not given `--follow`.
    Symlink,
    /// A folder, device, FIFO or socket.
    NotRegular,
    /// Larger than the cap ([`IMAGE_CAP`]): refused unread, or from the bytes read past it.
    TooLarge,
    /// Read, but not a PNG, JPEG, GIF or WebP image.
    NotImage,
    /// The record came from standard input or another stream: there is no folder around it.
    NoTree,
}

impl Refusal {
    /// What the audit writes, before the policy's outcome (`: placeholder`).
    pub fn what(self) -> &'static str {
        match self {
            Refusal::Missing => "image file not found",
            Refusal::Unreadable => "image file unreadable",
            Refusal::Outside => "image path outside the dataset",
            Refusal::Symlink => "image path through a symlink (--follow reads it)",
            Refusal::NotRegular => "image is not a regular file",
            Refusal::TooLarge => "image larger than 20 MiB",
            Refusal::NotImage => "image file is not a PNG, JPEG, GIF or WebP",
            Refusal::NoTree => "image path in standard input (no folder to read it from)",
        }
    }
}

/// Reads at most `cap` bytes from `reader`: more is [`Refusal::TooLarge`].
pub(crate) fn read_capped(reader: impl Read, cap: u64) -> Result<Vec<u8>, Refusal> {
    let mut bytes = Vec::new();
    reader
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|_| Refusal::Unreadable)?;
    if bytes.len() as u64 > cap {
        return Err(Refusal::TooLarge);
    }
    Ok(bytes)
}

/// The tree the files a record points to may be read from.
#[derive(Debug, Clone, Copy)]
pub struct InputTree<'a> {
    /// The root (`None`: a stream, nothing around it is read). An empty path is the current
    /// folder.
    pub root: Option<&'a Path>,
    /// `--follow`: symlinks inside the tree lead where they point, if that is inside it too.
    pub follow: bool,
}

impl InputTree<'_> {
    /// The bytes of the regular file `reference` names, relative to the folder `from` (inside
    /// the tree), when it is inside the tree and at most `cap` bytes.
    pub fn read(&self, from: &Path, reference: &str, cap: u64) -> Result<Vec<u8>, Refusal> {
        let file = self.open(from, reference)?;
        let stat = rustix::fs::fstat(&file).map_err(|_| Refusal::Unreadable)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(Refusal::NotRegular);
        }
        if u64::try_from(stat.st_size).unwrap_or(u64::MAX) > cap {
            return Err(Refusal::TooLarge);
        }
        read_capped(File::from(file), cap)
    }

    /// Opens the file `reference` names (see [`InputTree::read`]), checked all the way.
    fn open(&self, from: &Path, reference: &str) -> Result<OwnedFd, Refusal> {
        let root = self.root.ok_or(Refusal::NoTree)?;
        let reference = Path::new(reference);
        if reference.has_root() {
            return Err(Refusal::Outside);
        }
        // `from` is the input file's folder, below the root by construction of the walk; the
        // root itself was named by the user and is entered as it is.
        let below = from.strip_prefix(root).map_err(|_| Refusal::Outside)?;
        // A reference climbing above the root on paper is refused before anything is looked
        // at (through symlinks it could land inside again, but nothing needs it to).
        let mut depth = 0usize;
        for component in below.components().chain(reference.components()) {
            match component {
                Component::Normal(_) => depth += 1,
                Component::ParentDir => depth = depth.checked_sub(1).ok_or(Refusal::Outside)?,
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        let mut steps = Vec::new();
        for component in below.components().chain(reference.components()) {
            match component {
                Component::Normal(name) => steps.push(Step::Name(name.to_os_string())),
                Component::ParentDir => steps.push(Step::Up),
                Component::CurDir => {}
                Component::RootDir | Component::Prefix(_) => return Err(Refusal::Outside),
            }
        }
        let root = if root.as_os_str().is_empty() {
            Path::new(".")
        } else {
            root
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let handle = rustix::fs::open(root, flags, Mode::empty()).map_err(refusal)?;
        let mut walk = Walk {
            root,
            handle,
            folders: Vec::new(),
            follow: self.follow,
            links: 0,
        };
        walk.open(steps)
    }
}

/// One step of a path: a name to enter or open, or `..`.
#[derive(Debug, Clone)]
enum Step {
    Name(OsString),
    Up,
}

/// A walk down the tree: the folders entered, each by a handle opened without following a
/// symlink, so that `..` goes back to the one entered before.
struct Walk<'a> {
    root: &'a Path,
    handle: OwnedFd,
    /// The folders entered below the root: name and handle.
    folders: Vec<(OsString, OwnedFd)>,
    follow: bool,
    links: usize,
}

impl Walk<'_> {
    fn here(&self) -> std::os::fd::BorrowedFd<'_> {
        match self.folders.last() {
            Some((_, fd)) => fd.as_fd(),
            None => self.handle.as_fd(),
        }
    }

    /// The path of the folder the walk is in (for resolving a symlink).
    fn path(&self) -> PathBuf {
        let mut path = self.root.to_path_buf();
        path.extend(self.folders.iter().map(|(name, _)| name));
        path
    }

    /// Walks `steps`; the last names the file, opened and returned.
    fn open(&mut self, steps: Vec<Step>) -> Result<OwnedFd, Refusal> {
        let mut steps = steps.into_iter().peekable();
        while let Some(step) = steps.next() {
            let name = match step {
                Step::Up => {
                    // Above the root is outside the tree.
                    self.folders.pop().ok_or(Refusal::Outside)?;
                    if steps.peek().is_none() {
                        return Err(Refusal::NotRegular);
                    }
                    continue;
                }
                Step::Name(name) => name,
            };
            let last = steps.peek().is_none();
            let stat = rustix::fs::statat(self.here(), &name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(refusal)?;
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::Symlink => {
                    let rest: Vec<Step> = steps.collect();
                    return self.through_link(&name, rest);
                }
                FileType::Directory if !last => {
                    let flags =
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    let fd = rustix::fs::openat(self.here(), &name, flags, Mode::empty())
                        .map_err(refusal)?;
                    self.folders.push((name, fd));
                }
                FileType::RegularFile if last => {
                    // Non-blocking: if a FIFO was swapped in since the `stat`, the open does
                    // not wait for a writer (the handle's type is checked again by the caller).
                    let flags = OFlags::RDONLY
                        | OFlags::NOFOLLOW
                        | OFlags::NONBLOCK
                        | OFlags::NOCTTY
                        | OFlags::CLOEXEC;
                    return rustix::fs::openat(self.here(), &name, flags, Mode::empty())
                        .map_err(refusal);
                }
                FileType::RegularFile => return Err(Refusal::Missing),
                FileType::Directory
                | FileType::Fifo
                | FileType::CharacterDevice
                | FileType::BlockDevice
                | FileType::Socket
                | FileType::Unknown => return Err(Refusal::NotRegular),
            }
        }
        // No name at all (an empty reference to the dataset's own folder).
        Err(Refusal::NotRegular)
    }

    /// The symlink `name` here, then `rest`: refused without `--follow`; with it, the link is
    /// resolved, and the walk starts again from the root along its target, which must be inside
    /// the tree.
    // Matches a foreign non-exhaustive enum, which needs a wildcard arm.
    #[allow(clippy::wildcard_enum_match_arm)]
    fn through_link(&mut self, name: &OsStr, rest: Vec<Step>) -> Result<OwnedFd, Refusal> {
        if !self.follow {
            return Err(Refusal::Symlink);
        }
        self.links += 1;
        if self.links > MAX_LINKS {
            return Err(Refusal::Unreadable);
        }
        let target = std::fs::canonicalize(self.path().join(name)).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Refusal::Missing,
            // `ErrorKind` is non-exhaustive: a wildcard is the only way to match the rest.
            _ => Refusal::Unreadable,
        })?;
        let root = std::fs::canonicalize(self.root).map_err(|_| Refusal::Unreadable)?;
        let below = target.strip_prefix(&root).map_err(|_| Refusal::Outside)?;
        let mut steps: Vec<Step> = below
            .components()
            .map(|c| Step::Name(c.as_os_str().to_os_string()))
            .collect();
        steps.extend(rest);
        self.folders.clear();
        self.open(steps)
    }
}

fn refusal(errno: Errno) -> Refusal {
    match errno {
        Errno::NOENT | Errno::NOTDIR | Errno::NAMETOOLONG | Errno::INVAL => Refusal::Missing,
        // A symlink put in place between the check and the open.
        Errno::LOOP => Refusal::Symlink,
        _ => Refusal::Unreadable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dir(name: &str) -> Dir {
        let path =
            std::env::temp_dir().join(format!("rollover-inside-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(path.join("tree/data/img")).unwrap();
        std::fs::write(path.join("tree/data/img/a.png"), b"\x89PNG a").unwrap();
        std::fs::write(path.join("tree/b.png"), b"\x89PNG b").unwrap();
        std::fs::write(path.join("secret.png"), b"\x89PNG secret").unwrap();
        Dir(path)
    }

    fn read(dir: &Dir, follow: bool, reference: &str) -> Result<Vec<u8>, Refusal> {
        let root = dir.0.join("tree");
        let tree = InputTree {
            root: Some(&root),
            follow,
        };
        tree.read(&root.join("data"), reference, IMAGE_CAP)
    }

    #[test]
    fn references_resolve_inside_the_tree_only() {
        let d = dir("refs");
        assert_eq!(read(&d, false, "img/a.png"), Ok(b"\x89PNG a".to_vec()));
        assert_eq!(
            read(&d, false, "./img/../img/a.png"),
            Ok(b"\x89PNG a".to_vec())
        );
        assert_eq!(read(&d, false, "../b.png"), Ok(b"\x89PNG b".to_vec()));
        assert_eq!(read(&d, false, "../../secret.png"), Err(Refusal::Outside));
        assert_eq!(
            read(&d, false, "img/../../../secret.png"),
            Err(Refusal::Outside)
        );
        assert_eq!(
            read(&d, false, "nothing/../../../secret.png"),
            Err(Refusal::Outside)
        );
        let absolute = d.0.join("tree/b.png");
        assert_eq!(
            read(&d, false, absolute.to_str().unwrap()),
            Err(Refusal::Outside)
        );
        assert_eq!(read(&d, false, "img/missing.png"), Err(Refusal::Missing));
        assert_eq!(read(&d, false, "img/a.png/x"), Err(Refusal::Missing));
        assert_eq!(read(&d, false, "img"), Err(Refusal::NotRegular));
        assert_eq!(read(&d, false, ""), Err(Refusal::NotRegular));
        assert_eq!(read(&d, false, ".."), Err(Refusal::NotRegular));
        assert_eq!(read(&d, false, "a\0b"), Err(Refusal::Missing));
        let none = InputTree {
            root: None,
            follow: true,
        };
        assert_eq!(
            none.read(Path::new("x"), "a.png", IMAGE_CAP),
            Err(Refusal::NoTree)
        );
    }

    #[test]
    fn symlinks_need_follow_and_a_target_inside() {
        use std::os::unix::fs::symlink;
        let d = dir("links");
        symlink(d.0.join("secret.png"), d.0.join("tree/data/out.png")).unwrap();
        symlink("img/a.png", d.0.join("tree/data/in.png")).unwrap();
        symlink("../data/img", d.0.join("tree/data/pics")).unwrap();
        symlink(&d.0, d.0.join("tree/data/up")).unwrap();
        assert_eq!(read(&d, false, "in.png"), Err(Refusal::Symlink));
        assert_eq!(read(&d, false, "pics/a.png"), Err(Refusal::Symlink));
        assert_eq!(read(&d, false, "out.png"), Err(Refusal::Symlink));
        assert_eq!(read(&d, true, "in.png"), Ok(b"\x89PNG a".to_vec()));
        assert_eq!(read(&d, true, "pics/a.png"), Ok(b"\x89PNG a".to_vec()));
        assert_eq!(
            read(&d, true, "pics/../../b.png"),
            Ok(b"\x89PNG b".to_vec())
        );
        assert_eq!(read(&d, true, "out.png"), Err(Refusal::Outside));
        assert_eq!(read(&d, true, "up/secret.png"), Err(Refusal::Outside));
    }

    #[test]
    fn devices_are_refused_unopened_and_files_over_the_cap_unread() {
        let d = dir("special");
        let root = d.0.join("tree");
        let tree = InputTree {
            root: Some(Path::new("/")),
            follow: false,
        };
        assert_eq!(
            tree.read(Path::new("/dev"), "zero", IMAGE_CAP),
            Err(Refusal::NotRegular)
        );
        assert_eq!(
            tree.read(Path::new("/"), "dev/null", IMAGE_CAP),
            Err(Refusal::NotRegular)
        );
        let small = InputTree {
            root: Some(&root),
            follow: false,
        };
        assert_eq!(small.read(&root, "b.png", 5), Err(Refusal::TooLarge));
        assert_eq!(small.read(&root, "b.png", 6), Ok(b"\x89PNG b".to_vec()));
        assert_eq!(read_capped(std::io::repeat(0), 10), Err(Refusal::TooLarge));
    }
}
