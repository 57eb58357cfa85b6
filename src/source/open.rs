//! Open a file through its compression, detected by magic bytes (not by its name).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::SourceError;

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
const GZIP_MAGIC: [u8; 2] = [0x1F, 0x8B];
const READ_BUFFER: usize = 256 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
    Gzip,
}

/// A decompressed stream and a counter of the compressed bytes consumed so far, so that
/// damage can be reported at its offset in the file on disk.
pub struct Opened {
    pub reader: Box<dyn BufRead + Send>,
    pub compression: Compression,
    pub compressed_read: Arc<AtomicU64>,
}

/// Opens `path`, sniffing zstd or gzip magic. Several zstd frames or gzip members in one file
/// are read as one stream.
pub fn open(path: &Path) -> Result<Opened, SourceError> {
    let file = File::open(path).map_err(|source| SourceError::Open {
        path: path.display().to_string(),
        source,
    })?;
    let counter = Arc::new(AtomicU64::new(0));
    let mut raw = BufReader::with_capacity(
        READ_BUFFER,
        CountingReader {
            inner: file,
            count: Arc::clone(&counter),
        },
    );
    let head = raw.fill_buf().map_err(|source| SourceError::Open {
        path: path.display().to_string(),
        source,
    })?;
    let compression = if head.starts_with(&ZSTD_MAGIC) {
        Compression::Zstd
    } else if head.starts_with(&GZIP_MAGIC) {
        Compression::Gzip
    } else {
        Compression::None
    };
    let reader: Box<dyn BufRead + Send> = match compression {
        Compression::None => Box::new(raw),
        Compression::Zstd => {
            let decoder = zstd::stream::read::Decoder::with_buffer(raw).map_err(|source| {
                SourceError::Open {
                    path: path.display().to_string(),
                    source,
                }
            })?;
            Box::new(BufReader::with_capacity(READ_BUFFER, decoder))
        }
        Compression::Gzip => Box::new(BufReader::with_capacity(
            READ_BUFFER,
            flate2::bufread::MultiGzDecoder::new(raw),
        )),
    };
    Ok(Opened {
        reader,
        compression,
        compressed_read: counter,
    })
}

struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}
