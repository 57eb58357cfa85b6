//! The content digests the manifest records: of bytes written, and of an input file.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// The digest of some bytes, as the manifest writes it.
pub(crate) fn digest(bytes: &[u8]) -> String {
    crate::model::identity::hex128(crate::model::hash::xxh3_128(bytes))
}

/// The digest of a file's bytes, read in blocks.
pub(crate) fn file_digest(path: &Path) -> std::io::Result<String> {
    file_digest_unless(path, &std::sync::atomic::AtomicUsize::new(0))
}

/// [`file_digest`], given up with an error once `stop` holds a signal (a run's pre-pass).
pub(crate) fn file_digest_unless(
    path: &Path,
    stop: &std::sync::atomic::AtomicUsize,
) -> std::io::Result<String> {
    let mut hasher = crate::model::hash::Xxh3::new();
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path)?);
    loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) != 0 {
            return Err(std::io::Error::other("the run was asked to stop"));
        }
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        hasher.update(buffer);
        let n = buffer.len();
        reader.consume(n);
    }
    Ok(format!("{:032x}", hasher.digest128()))
}
