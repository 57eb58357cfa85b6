//! Open a file through its compression, detected by magic bytes (not by its name).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::SourceError;

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
const GZIP_MAGIC: [u8; 2] = [0x1F, 0x8B];
const ZIP_MAGIC: [u8; 4] = [b'P', b'K', 0x03, 0x04];
const READ_BUFFER: usize = 256 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
    Gzip,
    /// A ChatGPT data export zip: the conversations of its `conversations.json` (or
    /// `conversations-NNN.json`) files, read as JSON Lines, one conversation a line.
    Zip,
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
    } else if head.starts_with(&ZIP_MAGIC) {
        Compression::Zip
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
        Compression::Zip => {
            let bytes = export_conversations(path).map_err(|source| SourceError::Open {
                path: path.display().to_string(),
                source,
            })?;
            counter.store(
                std::fs::metadata(path).map_or(0, |m| m.len()),
                Ordering::Relaxed,
            );
            Box::new(io::Cursor::new(bytes))
        }
    };
    Ok(Opened {
        reader,
        compression,
        compressed_read: counter,
    })
}

/// Whether a zip entry is an export's conversations file: `conversations.json` or
/// `conversations-NNN.json`, in any folder of the archive.
pub fn is_conversations_entry(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    let Some(stem) = base.strip_suffix(".json") else {
        return false;
    };
    stem == "conversations"
        || stem
            .strip_prefix("conversations-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The conversations of a ChatGPT export zip as JSON Lines, one conversation a line: the
/// arrays of its conversations files in name order (a lone object counts as one).
fn export_conversations(path: &Path) -> io::Result<Vec<u8>> {
    let mut archive = zip::ZipArchive::new(File::open(path)?).map_err(io::Error::other)?;
    let mut names: Vec<String> = archive
        .file_names()
        .filter(|n| is_conversations_entry(n))
        .map(str::to_string)
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a zip without conversations.json (only ChatGPT export zips are read)",
        ));
    }
    let mut out: Vec<u8> = Vec::new();
    for name in names {
        let mut text = Vec::new();
        archive
            .by_name(&name)
            .map_err(io::Error::other)?
            .read_to_end(&mut text)?;
        let value = serde_json::from_slice(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{name}: {e}")))?;
        let items = match value {
            serde_json::Value::Array(items) => items,
            other => vec![other],
        };
        for item in items {
            serde_json::to_writer(&mut out, &item).map_err(io::Error::other)?;
            out.push(b'\n');
        }
    }
    Ok(out)
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
