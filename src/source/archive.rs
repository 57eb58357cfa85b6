//! Zip archives, as any format that reads one needs them: the members by name, and a
//! member's bytes read within a cap. What a member holds is the reading format's business.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// A zip archive whose directory is read once; each member read has its own position, so one
/// archive serves reads from any thread.
#[derive(Debug)]
pub(crate) struct ZipFile {
    archive: zip::ZipArchive<SharedFile>,
}

/// Why a member was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberError {
    /// The member could not be found, decompressed or read.
    Unreadable,
    /// Larger than the cap: by its declared size (refused unread) or by the bytes read.
    TooLarge,
}

impl ZipFile {
    /// The archive at `path`, its directory read.
    pub(crate) fn open(path: &Path) -> std::io::Result<ZipFile> {
        let file = SharedFile::new(std::fs::File::open(path)?)?;
        let archive = zip::ZipArchive::new(file).map_err(std::io::Error::other)?;
        Ok(ZipFile { archive })
    }

    /// The members that are files (a name ending in `/` is a folder), with their indexes, in
    /// the archive's order.
    pub(crate) fn files(&self) -> impl Iterator<Item = (&str, usize)> {
        (0..self.archive.len())
            .filter_map(|i| Some((self.archive.name_for_index(i)?, i)))
            .filter(|(name, _)| !name.ends_with('/'))
    }

    /// The bytes of member `index`, at most `cap`: the declared size first (a 1.5 GiB fake
    /// image is refused unread), then the bytes themselves, which can be more than declared.
    pub(crate) fn read(&self, index: usize, cap: u64) -> Result<Vec<u8>, MemberError> {
        // A clone shares the directory read once; each read has its own position.
        let mut archive = self.archive.clone();
        let entry = archive
            .by_index(index)
            .map_err(|_| MemberError::Unreadable)?;
        if entry.size() > cap {
            return Err(MemberError::TooLarge);
        }
        let mut bytes = Vec::new();
        entry
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|_| MemberError::Unreadable)?;
        if bytes.len() as u64 > cap {
            return Err(MemberError::TooLarge);
        }
        Ok(bytes)
    }
}

/// An open file read at its own position (`pread`): clones share the file, so a zip archive
/// read once can be cloned for each read, from any thread.
#[derive(Debug, Clone)]
struct SharedFile {
    file: Arc<std::fs::File>,
    len: u64,
    at: u64,
}

impl SharedFile {
    fn new(file: std::fs::File) -> std::io::Result<SharedFile> {
        let len = file.metadata()?.len();
        Ok(SharedFile {
            file: Arc::new(file),
            len,
            at: 0,
        })
    }
}

impl Read for SharedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for SharedFile {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let at = match to {
            std::io::SeekFrom::Start(n) => Some(n),
            std::io::SeekFrom::End(d) => self.len.checked_add_signed(d),
            std::io::SeekFrom::Current(d) => self.at.checked_add_signed(d),
        };
        self.at = at.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.at)
    }
}
