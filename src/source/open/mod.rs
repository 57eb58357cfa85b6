//! Open a file through its compression, detected by magic bytes (not by its name).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::SourceError;

mod zstd_blocks;

pub(crate) use zstd_blocks::ZstdBlocks;

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
const GZIP_MAGIC: [u8; 2] = [0x1F, 0x8B];
const ZIP_MAGIC: [u8; 4] = [b'P', b'K', 0x03, 0x04];
pub(crate) const READ_BUFFER: usize = 256 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
    Gzip,
    /// A zip: read as the lines its format's reader finds in it ([`ArchiveLines`]; a ChatGPT
    /// data export's conversations, one a line).
    Zip,
}

/// The lines of a zip at a path, as a format's reader finds them in it: the source layer
/// knows no archive's layout, only that a zip is read whole through this hook.
pub(crate) type ArchiveLines = fn(&Path) -> io::Result<Box<dyn BufRead + Send>>;

/// What an [`ArchiveLines`] hook answers for a zip that holds nothing its reader reads (an
/// ordinary zip kept beside the transcripts): the zip is not read, and it is not damaged.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct NotAnArchive(pub &'static str);

/// Why the zip at `path` is not read, when it is a zip `archive` reads nothing in: the walk
/// leaves it out, as it leaves out a file of another extension. `None` for any other file,
/// and for a zip that fails for another reason (its reader reports that as damage).
pub(crate) fn not_an_archive(path: &Path, archive: Option<ArchiveLines>) -> Option<String> {
    let archive_lines = archive?;
    let mut head = [0u8; 4];
    File::open(path).ok()?.read_exact(&mut head).ok()?;
    if head != ZIP_MAGIC {
        return None;
    }
    match archive_lines(path) {
        Err(err) => err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<NotAnArchive>())
            .map(|not| not.0.to_string()),
        Ok(_) => None,
    }
}

/// A decompressed stream and a counter of the compressed bytes consumed so far, so that
/// damage can be reported at its offset in the file on disk.
pub struct Opened {
    pub reader: Box<dyn LineSource>,
    pub compression: Compression,
    pub compressed_read: Arc<AtomicU64>,
}

/// Where [`open_hashing`] leaves the digest of a file's bytes on disk (as the manifest writes
/// it) once they were read to the end; unset when they were not (a stream that stopped early,
/// a zip export read by its directory).
pub type DigestSlot = Arc<std::sync::OnceLock<String>>;

/// Opens `path`, sniffing zstd, gzip or zip magic. Several zstd frames or gzip members in one
/// file are read as one stream; a zip is read through `archive`, and without it fails to open.
pub fn open(path: &Path, archive: Option<ArchiveLines>) -> Result<Opened, SourceError> {
    open_hashing(path, None, archive)
}

/// [`open`], and the digest of the file's bytes on disk, taken as they are read, into `slot`
/// once the last is: a file read for its digest before it was read for its records was read
/// twice, from disk twice when the archive is larger than the page cache.
pub fn open_hashing(
    path: &Path,
    slot: Option<DigestSlot>,
    archive: Option<ArchiveLines>,
) -> Result<Opened, SourceError> {
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
            hashing: slot.map(|slot| (Box::new(crate::model::hash::Xxh3::new()), slot)),
        },
    );
    let head = raw.fill_buf().map_err(|source| SourceError::Open {
        path: path.display().to_string(),
        source,
    })?;
    let compression = if is_zstd(head) {
        Compression::Zstd
    } else if head.starts_with(&GZIP_MAGIC) {
        Compression::Gzip
    } else if head.starts_with(&ZIP_MAGIC) {
        Compression::Zip
    } else {
        Compression::None
    };
    let reader: Box<dyn LineSource> = match compression {
        Compression::None => Box::new(Plain(raw)),
        Compression::Zstd => {
            Box::new(ZstdBlocks::new(raw).map_err(|source| SourceError::Open {
                path: path.display().to_string(),
                source,
            })?)
        }
        Compression::Gzip => Box::new(Plain(BufReader::with_capacity(
            READ_BUFFER,
            flate2::bufread::MultiGzDecoder::new(raw),
        ))),
        Compression::Zip => {
            let lines = match archive {
                Some(archive_lines) => archive_lines(path),
                None => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a zip, and no reader of zips was given",
                )),
            }
            .map_err(|source| SourceError::Open {
                path: path.display().to_string(),
                source,
            })?;
            counter.store(
                std::fs::metadata(path).map_or(0, |m| m.len()),
                Ordering::Relaxed,
            );
            Box::new(Plain(lines))
        }
    };
    Ok(Opened {
        reader,
        compression,
        compressed_read: counter,
    })
}

/// Whether `head` (a file's first bytes) opens a zstd stream: a frame, or skippable frames
/// (magic `0x184D2A50..=0x184D2A5F`, as `pzstd` writes one first) before one. A skippable
/// frame followed, within `head`, by anything but another frame is not zstd.
fn is_zstd(head: &[u8]) -> bool {
    let mut at = 0usize;
    loop {
        let Some(magic) = head.get(at..at + 4) else {
            // The head ends inside the frames: the frames' own checks say the rest.
            return at > 0;
        };
        if magic == ZSTD_MAGIC {
            return true;
        }
        let skippable = magic[0] & 0xF0 == 0x50 && magic[1..] == [0x2A, 0x4D, 0x18];
        if !skippable {
            return false;
        }
        let Some(size) = head.get(at + 4..at + 8) else {
            return true;
        };
        let size = u32::from_le_bytes([size[0], size[1], size[2], size[3]]) as usize;
        at = at.saturating_add(8).saturating_add(size);
    }
}

/// `Read` for a reader whose bytes are in its own buffer: copied out of it.
pub(crate) fn read_buffered(reader: &mut impl BufRead, buf: &mut [u8]) -> io::Result<usize> {
    let available = reader.fill_buf()?;
    let n = available.len().min(buf.len());
    buf[..n].copy_from_slice(&available[..n]);
    reader.consume(n);
    Ok(n)
}
/// A decompressed stream, read by lines ([`super::split`]): a `BufRead` whose buffered bytes
/// may be handed out as a shared block's slice instead of copied.
pub trait LineSource: BufRead + Send {
    /// True when [`LineSource::take_shared`] hands out the buffer without a copy: then the
    /// splitter takes a whole buffered line from it rather than copying it into a block.
    fn shares(&self) -> bool {
        false
    }

    /// The first `n` bytes of what `fill_buf` returned, consumed. A copy unless
    /// [`LineSource::shares`]; `n` past the buffer is cut to it.
    fn take_shared(&mut self, n: usize) -> bytes::Bytes {
        let line = match self.fill_buf() {
            Ok(buffer) => bytes::Bytes::copy_from_slice(&buffer[..n.min(buffer.len())]),
            Err(_) => bytes::Bytes::new(),
        };
        self.consume(line.len());
        line
    }

    /// Keeps what is buffered (unconsumed) at the head of the next buffer, which then holds
    /// more after it: a line cut by the end of a shared buffer becomes one slice, its head
    /// copied once. Only when [`LineSource::shares`]; otherwise it does nothing.
    fn carry(&mut self) {}
}

/// A `BufRead` whose buffer is its own (copied out line by line).
pub(crate) struct Plain<R>(pub R);

impl<R: Read> Read for Plain<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R: BufRead> BufRead for Plain<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.0.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        self.0.consume(amount);
    }
}

impl<R: BufRead + Send> LineSource for Plain<R> {}

/// A stream that fails once the run is asked to stop (`stop` holds the signal's number, 0
/// until one comes): every loop that reads input, however long one record or one skip over
/// an oversized line is, sees it at its next buffer, within a read's time. The error is not
/// [`io::ErrorKind::Interrupted`], which readers retry.
pub(crate) struct Stoppable<R> {
    pub inner: R,
    pub stop: Arc<AtomicUsize>,
}

impl<R> Stoppable<R> {
    fn check(&self) -> io::Result<()> {
        match self.stop.load(Ordering::Relaxed) {
            0 => Ok(()),
            _ => Err(io::Error::other("the run was asked to stop")),
        }
    }
}

impl<R: Read> Read for Stoppable<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.check()?;
        self.inner.read(buf)
    }
}

impl<R: BufRead> BufRead for Stoppable<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.check()?;
        self.inner.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        self.inner.consume(amount);
    }
}

impl<R: LineSource + ?Sized> LineSource for Stoppable<Box<R>> {
    fn shares(&self) -> bool {
        self.inner.shares()
    }

    fn take_shared(&mut self, n: usize) -> bytes::Bytes {
        self.inner.take_shared(n)
    }

    fn carry(&mut self) {
        self.inner.carry();
    }
}

struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
    /// The digest of the bytes read so far, and where it goes at the end.
    hashing: Option<(Box<crate::model::hash::Xxh3>, DigestSlot)>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        if n > 0 {
            if let Some((hasher, _)) = self.hashing.as_mut() {
                hasher.update(&buf[..n]);
            }
        } else if !buf.is_empty() {
            // The end of the file: its digest is whole.
            if let Some((hasher, slot)) = self.hashing.take() {
                let _ = slot.set(crate::model::identity::hex128(hasher.digest128()));
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::zstd_blocks::FreeBlocks;
    use super::*;
    use crate::model::identity::hex128;

    /// A zstd file opening with skippable frames (as `pzstd` writes one first) is zstd; bytes
    /// that only look like a skippable frame's magic, followed by text, are not.
    #[test]
    fn skippable_frames_before_a_zstd_frame_are_zstd() {
        let text = b"{\"messages\":[]}\n".repeat(50);
        let frame = zstd::encode_all(&text[..], 3).unwrap();
        let mut pzstd = vec![0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4];
        pzstd.extend_from_slice(&[0x5F, 0x2A, 0x4D, 0x18, 0, 0, 0, 0]);
        pzstd.extend_from_slice(&frame);
        assert!(is_zstd(&pzstd));
        assert!(is_zstd(&frame));
        assert!(is_zstd(&pzstd[..10]), "a head cut inside the frames");
        assert!(!is_zstd(b"P*M\x18\0\0\0\0{\"messages\":[]}"));
        assert!(!is_zstd(b"{\"a\":1}"));
        assert!(!is_zstd(b"P*"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, &pzstd).unwrap();
        let mut opened = open(&path, None).unwrap();
        assert_eq!(opened.compression, Compression::Zstd);
        let mut out = Vec::new();
        opened.reader.read_to_end(&mut out).unwrap();
        assert_eq!(out, text);
    }

    /// A file read to its end through [`open_hashing`] leaves the digest of its bytes on
    /// disk, whatever its compression and however many frames or members it has; one read
    /// only in part leaves none (its digest is then taken by reading the file again).
    #[test]
    fn a_file_read_to_its_end_leaves_its_digest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let lines: Vec<u8> = (0..2000)
            .flat_map(|i| {
                format!("{{\"messages\":[{{\"role\":\"user\",\"content\":\"{i}\"}}]}}\n")
                    .into_bytes()
            })
            .collect();
        let zstd_frames = [
            zstd::encode_all(&lines[..30_000], 3).expect("zstd"),
            zstd::encode_all(&lines[30_000..], 3).expect("zstd"),
        ]
        .concat();
        let gzip = |bytes: &[u8]| {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(bytes).expect("gzip");
            encoder.finish().expect("gzip")
        };
        let gzip_members = [gzip(&lines[..1000]), gzip(&lines[1000..])].concat();
        let files = [
            ("plain.jsonl", lines.clone()),
            ("empty.jsonl", Vec::new()),
            (
                "one.jsonl.zst",
                zstd::encode_all(&lines[..], 3).expect("zstd"),
            ),
            ("frames.jsonl.zst", zstd_frames),
            ("members.jsonl.gz", gzip_members),
        ];
        for (name, bytes) in files {
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes).expect("write");
            let slot = DigestSlot::default();
            let mut opened = open_hashing(&path, Some(Arc::clone(&slot)), None).expect("open");
            let mut read = Vec::new();
            opened.reader.read_to_end(&mut read).expect("read");
            assert_eq!(read, lines[..read.len()], "{name}");
            let whole = hex128(crate::model::hash::xxh3_128(&bytes));
            assert_eq!(slot.get(), Some(&whole), "{name}");
        }
        let path = dir.path().join("plain.jsonl");
        let slot = DigestSlot::default();
        let mut opened = open_hashing(&path, Some(Arc::clone(&slot)), None).expect("open");
        let mut head = [0u8; 100];
        opened.reader.read_exact(&mut head).expect("read");
        assert_eq!(slot.get(), None, "read in part");
    }

    /// What zstd's own reader, behind a `BufReader` of [`READ_BUFFER`] bytes, makes of
    /// `stream`: its bytes, and the error that ended it.
    fn zstd_reads(stream: &[u8]) -> (Vec<u8>, Option<String>) {
        let decoder = zstd::stream::read::Decoder::with_buffer(stream).expect("decoder");
        let mut reader = BufReader::with_capacity(READ_BUFFER, decoder);
        let mut out = Vec::new();
        loop {
            match reader.fill_buf() {
                Ok([]) => return (out, None),
                Ok(buffer) => {
                    let n = buffer.len();
                    out.extend_from_slice(buffer);
                    reader.consume(n);
                }
                Err(err) => return (out, Some(err.to_string())),
            }
        }
    }

    /// What [`ZstdBlocks`] makes of `stream`, taken as the splitter takes it: lines of
    /// `step` bytes as shared slices where the block holds them; at a block's end, the rest
    /// carried into the next block when `carry` (and then found again at its head), else
    /// read in pieces.
    /// A block no record holds any more is the next block's memory; a block a record still
    /// holds is never written over, however many blocks follow.
    #[test]
    fn blocks_given_back_are_reused_and_held_ones_are_not() {
        let lines: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("{{\"n\":{i}}}\n").into_bytes())
            .collect();
        let stream = zstd::encode_all(&lines[..], 3).expect("zstd");
        // Blocks of its own: the tests around it share the process's.
        let mut blocks =
            ZstdBlocks::with_blocks(&stream[..], FreeBlocks::default()).expect("decoder");
        let mut whole = || {
            let n = blocks.fill_buf().expect("a block").len();
            blocks.take_shared(n)
        };
        let held = whole();
        let kept = held.to_vec();
        let second = whole();
        assert_ne!(second.as_ptr(), held.as_ptr(), "a held block is not reused");
        let mut read = [&held[..], &second[..]].concat();
        let given_back = second.as_ptr();
        drop(second);
        let third = whole();
        assert_eq!(
            third.as_ptr(),
            given_back,
            "the block given back is the next one"
        );
        read.extend_from_slice(&third);
        drop(third);
        loop {
            let block = whole();
            if block.is_empty() {
                break;
            }
            assert_ne!(block.as_ptr(), held.as_ptr(), "a held block is not reused");
            read.extend_from_slice(&block);
        }
        assert!(read.len() > 8 * READ_BUFFER);
        assert!(read == lines, "the blocks are the stream");
        assert!(held[..] == kept[..], "the held block is as it was read");
    }

    fn blocks_read(stream: &[u8], step: usize, carry: bool) -> (Vec<u8>, Option<String>) {
        let mut blocks = ZstdBlocks::new(stream).expect("decoder");
        let mut out = Vec::new();
        let mut carried: Option<Vec<u8>> = None;
        // As the splitter does, once a line: never twice without reading on.
        let mut carried_at = None;
        loop {
            let available = match blocks.fill_buf() {
                Ok(available) => available,
                Err(err) => return (out, Some(err.to_string())),
            };
            if let Some(head) = carried.take() {
                assert!(available.starts_with(&head), "the carried bytes lead");
            }
            let available = available.len();
            if available == 0 {
                return (out, None);
            }
            if available >= step {
                out.extend_from_slice(&blocks.take_shared(step));
            } else if carry && carried_at != Some(out.len()) && out.len() % 3 == 0 {
                carried = Some(blocks.fill_buf().expect("buffered").to_vec());
                carried_at = Some(out.len());
                blocks.carry();
            } else {
                let mut piece = vec![0; available.min(7)];
                blocks.read_exact(&mut piece).expect("buffered");
                out.extend_from_slice(&piece);
            }
        }
    }

    /// The zstd reader of `convert` decodes as zstd's own reader did behind a `BufReader`,
    /// lines carried from block to block or not: one frame or several, a skippable frame
    /// between them, many blocks; a stream cut inside a frame, corrupt or followed by garbage
    /// yields the same bytes, then the same error (after the carried bytes).
    #[test]
    fn zstd_blocks_read_as_zstds_own_reader() {
        let lines: Vec<u8> = (0..40_000u32)
            .flat_map(|i| {
                format!(
                    "{{\"n\":{},\"t\":\"{}\"}}\n",
                    i,
                    "ab".repeat((i % 97) as usize)
                )
                .into_bytes()
            })
            .collect();
        assert!(lines.len() > 3 * READ_BUFFER);
        let one = zstd::encode_all(&lines[..], 3).expect("zstd");
        let skippable = [
            &0x184D_2A50u32.to_le_bytes()[..],
            &3u32.to_le_bytes(),
            b"abc",
        ]
        .concat();
        let frames = [
            zstd::encode_all(&lines[..100_000], 1).expect("zstd"),
            skippable,
            zstd::encode_all(&lines[100_000..], 19).expect("zstd"),
        ]
        .concat();
        let streams = [
            ("one frame", one.clone()),
            ("frames", frames.clone()),
            ("cut", one[..one.len() / 2].to_vec()),
            ("cut at the end", one[..one.len() - 3].to_vec()),
            ("garbage after", [&one[..], b"not zstd at all"].concat()),
            ("corrupt", {
                let mut corrupt = frames.clone();
                let middle = corrupt.len() / 2;
                corrupt[middle..middle + 64].fill(0xA5);
                corrupt
            }),
        ];
        for (name, stream) in streams {
            let (expected, error) = zstd_reads(&stream);
            for (step, carry) in [(1, false), (100, true), (4096, false), (70_000, true)] {
                let (read, read_error) = blocks_read(&stream, step, carry);
                assert!(
                    read == expected,
                    "{name}, step {step}: {} bytes, not {}",
                    read.len(),
                    expected.len()
                );
                assert_eq!(read_error, error, "{name}, step {step}");
            }
        }
        assert_eq!(zstd_reads(&one), (lines.clone(), None));
        assert_eq!(zstd_reads(&frames), (lines, None));
    }
}
