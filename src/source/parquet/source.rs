//! Where a Parquet file's bytes are read from (a file read at offsets, or bytes in memory),
//! as the parquet crate asks for them.

use super::*;

/// Where the file's bytes are.
pub(super) enum Backing {
    File(File),
    Memory(Bytes),
}

/// The file as the parquet crate reads it: positioned reads that count the bytes read (the
/// progress bar) and fail once the run is asked to stop.
#[derive(Clone)]
pub(super) struct Source {
    pub(super) backing: Arc<Backing>,
    pub(super) len: u64,
    pub(super) read: Arc<AtomicU64>,
    pub(super) stop: Option<Arc<AtomicUsize>>,
}

impl Source {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        if self
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed) != 0)
        {
            return Err(io::Error::other("the run was asked to stop"));
        }
        let n = match self.backing.as_ref() {
            Backing::File(file) => read_file_at(file, offset, buf)?,
            Backing::Memory(bytes) => {
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                let n = buf.len().min(bytes.len() - start);
                buf[..n].copy_from_slice(&bytes[start..start + n]);
                n
            }
        };
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    /// `len` bytes at `offset`, all inside the file (checked before anything is allocated).
    pub(super) fn bytes(&self, offset: u64, len: u64) -> io::Result<Bytes> {
        let end = offset.checked_add(len).filter(|end| *end <= self.len);
        let Some(end) = end else {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{len} bytes at byte {offset} are past the end of the file ({} bytes)",
                    self.len
                ),
            ));
        };
        if let Backing::Memory(bytes) = self.backing.as_ref() {
            // Both ends are within the file's length, which is the buffer's.
            self.read.fetch_add(len, Ordering::Relaxed);
            return Ok(bytes.slice(offset as usize..end as usize));
        }
        let mut buf = vec![0; len as usize];
        let mut filled = 0;
        while filled < buf.len() {
            match self.read_at(offset + filled as u64, &mut buf[filled..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => filled += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(buf.into())
    }
}

#[cfg(unix)]
pub(super) fn read_file_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
pub(super) fn read_file_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

impl Length for Source {
    fn len(&self) -> u64 {
        self.len
    }
}

/// A sequential reader from one offset (the crate reads page headers through it).
pub(super) struct At {
    source: Source,
    at: u64,
}

impl Read for At {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.source.len.saturating_sub(self.at);
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.source.read_at(self.at, &mut buf[..want])?;
        self.at += n as u64;
        Ok(n)
    }
}

impl ChunkReader for Source {
    type T = io::BufReader<At>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(io::BufReader::with_capacity(
            8 << 10,
            At {
                source: self.clone(),
                at: start,
            },
        ))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        Ok(self.bytes(start, length as u64)?)
    }
}
