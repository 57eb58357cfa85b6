//! Open a file through its compression, detected by magic bytes (not by its name).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::split::CARRY_MAX;
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
    pub reader: Box<dyn LineSource>,
    pub compression: Compression,
    pub compressed_read: Arc<AtomicU64>,
}

/// Where [`open_hashing`] leaves the digest of a file's bytes on disk (as the manifest writes
/// it) once they were read to the end; unset when they were not (a stream that stopped early,
/// a zip export read by its directory).
pub type DigestSlot = Arc<std::sync::OnceLock<String>>;

/// Opens `path`, sniffing zstd or gzip magic. Several zstd frames or gzip members in one file
/// are read as one stream.
pub fn open(path: &Path) -> Result<Opened, SourceError> {
    open_hashing(path, None)
}

/// [`open`], and the digest of the file's bytes on disk, taken as they are read, into `slot`
/// once the last is: a file read for its digest before it was read for its records was read
/// twice, from disk twice when the archive is larger than the page cache.
pub fn open_hashing(path: &Path, slot: Option<DigestSlot>) -> Result<Opened, SourceError> {
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
            let lines = export_conversations(path).map_err(|source| SourceError::Open {
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
/// arrays of its conversations files in name order (a lone object counts as one), each
/// element's bytes as they are in the file but for line breaks outside strings, which become
/// spaces. The entries are decompressed and split as they are read: memory is one read buffer
/// whatever their size, and a conversation longer than `--max-record-bytes` is a line the
/// splitter reports oversized. A break in an entry's JSON between conversations, a truncated
/// or corrupt entry (its CRC-32 is checked) is a read error at that point.
// Matches a foreign non-exhaustive enum, which needs a wildcard arm.
#[allow(clippy::wildcard_enum_match_arm)]
fn export_conversations(path: &Path) -> io::Result<ExportLines> {
    let mut archive = zip::ZipArchive::new(File::open(path)?).map_err(io::Error::other)?;
    let mut entries = Vec::new();
    for index in 0..archive.len() {
        let entry = archive.by_index_raw(index).map_err(io::Error::other)?;
        if !entry.is_file() || !is_conversations_entry(entry.name()) {
            continue;
        }
        entries.push(Entry {
            name: entry.name().to_string(),
            data_start: entry.data_start(),
            compressed: entry.compressed_size(),
            deflated: match entry.compression() {
                zip::CompressionMethod::Stored => false,
                zip::CompressionMethod::Deflated => true,
                // `CompressionMethod` is non-exhaustive: a binding is the only way to match
                // the rest.
                other => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                        "{}: compression method {other} is not supported (stored and deflated are)",
                        entry.name()
                    ),
                    ))
                }
            },
            crc32: entry.crc32(),
        });
    }
    if entries.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a zip without conversations.json (only ChatGPT export zips are read)",
        ));
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries.reverse();
    Ok(ExportLines {
        path: path.to_path_buf(),
        entries,
        current: None,
        out: Vec::with_capacity(READ_BUFFER),
        at: 0,
    })
}

/// Where one conversations file is in the zip.
struct Entry {
    name: String,
    data_start: u64,
    compressed: u64,
    deflated: bool,
    crc32: u32,
}

/// The export's conversations as lines, produced a buffer at a time (see
/// [`export_conversations`]).
struct ExportLines {
    path: std::path::PathBuf,
    /// The entries still to read, the next last.
    entries: Vec<Entry>,
    current: Option<EntryLines>,
    /// Lines made and not yet consumed: `out[at..]`.
    out: Vec<u8>,
    at: usize,
}

/// One entry being read: its decompressed bytes and where its array is.
struct EntryLines {
    name: String,
    data: Box<dyn Read + Send>,
    crc: crc32fast::Hasher,
    crc32: u32,
    input: Vec<u8>,
    /// Decompressed bytes of the entry read so far.
    read: u64,
    state: Framing,
}

/// Where the transducer is in an entry's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// Before the document (a byte-order mark or white space may come).
    Start,
    /// In the array, between conversations.
    Between,
    /// In a conversation: `depth` brackets open, in a string or not, after a backslash or not;
    /// `lone` when the entry is one object, not an array.
    Value {
        depth: u32,
        string: bool,
        escape: bool,
        lone: bool,
    },
    /// After the document: only white space may come.
    End,
}

impl ExportLines {
    fn open_entry(&self, entry: Entry) -> io::Result<EntryLines> {
        let mut file = File::open(&self.path)?;
        io::Seek::seek(&mut file, io::SeekFrom::Start(entry.data_start))?;
        let raw = BufReader::with_capacity(READ_BUFFER, file.take(entry.compressed));
        let data: Box<dyn Read + Send> = if entry.deflated {
            Box::new(flate2::bufread::DeflateDecoder::new(raw))
        } else {
            Box::new(raw)
        };
        Ok(EntryLines {
            name: entry.name,
            data,
            crc: crc32fast::Hasher::new(),
            crc32: entry.crc32,
            input: vec![0; READ_BUFFER],
            read: 0,
            state: Framing::Start,
        })
    }

    /// Makes more lines into `out`; false at the end of the last entry.
    fn refill(&mut self) -> io::Result<bool> {
        self.out.clear();
        self.at = 0;
        loop {
            let current = match self.current.as_mut() {
                Some(current) => current,
                None => {
                    let Some(entry) = self.entries.pop() else {
                        return Ok(false);
                    };
                    let opened = self.open_entry(entry)?;
                    self.current.insert(opened)
                }
            };
            let n = loop {
                match current.data.read(&mut current.input) {
                    Ok(n) => break n,
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                    Err(err) => return Err(current.error(format!("cannot decompress: {err}"))),
                }
            };
            if n == 0 {
                current.finish()?;
                if !self.out.is_empty() {
                    // A lone object's line ends with its entry.
                    if self.out.last() != Some(&b'\n') {
                        self.out.push(b'\n');
                    }
                }
                self.current = None;
                if !self.out.is_empty() {
                    return Ok(true);
                }
                continue;
            }
            current.crc.update(&current.input[..n]);
            current.transduce(n, &mut self.out)?;
            current.read += n as u64;
            if !self.out.is_empty() {
                return Ok(true);
            }
        }
    }
}

impl EntryLines {
    fn error(&self, message: String) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} in the zip, byte {}: {message}", self.name, self.read),
        )
    }

    /// The entry ended: its JSON is complete and its checksum right.
    fn finish(&self) -> io::Result<()> {
        match self.state {
            Framing::End | Framing::Start => {}
            Framing::Between | Framing::Value { lone: false, .. } => {
                return Err(self.error("the conversations array is not closed".into()))
            }
            Framing::Value {
                lone: true,
                depth,
                string,
                ..
            } if depth > 0 || string => {
                return Err(self.error("the conversation object is not closed".into()))
            }
            Framing::Value { lone: true, .. } => {}
        }
        if self.crc.clone().finalize() != self.crc32 {
            return Err(self.error("CRC-32 mismatch: the zip is corrupt".into()));
        }
        Ok(())
    }

    /// Turns `input[..n]` into lines appended to `out`.
    fn transduce(&mut self, n: usize, out: &mut Vec<u8>) -> io::Result<()> {
        let mut i = 0;
        while i < n {
            let byte = self.input[i];
            match &mut self.state {
                Framing::Start => match byte {
                    b' ' | b'\t' | b'\r' | b'\n' => {}
                    // A UTF-8 byte-order mark.
                    0xEF | 0xBB | 0xBF if self.read + (i as u64) < 3 => {}
                    b'[' => self.state = Framing::Between,
                    b'{' => {
                        out.push(byte);
                        self.state = Framing::Value {
                            depth: 1,
                            string: false,
                            escape: false,
                            lone: true,
                        };
                    }
                    other => {
                        return Err(self.at_error(
                            i,
                            format!("expected `[` or `{{`, found {:?}", other as char),
                        ))
                    }
                },
                Framing::Between => match byte {
                    b' ' | b'\t' | b'\r' | b'\n' | b',' => {}
                    b']' => self.state = Framing::End,
                    _ => {
                        out.push(byte);
                        self.state = Framing::Value {
                            depth: u32::from(matches!(byte, b'{' | b'[')),
                            string: byte == b'"',
                            escape: false,
                            lone: false,
                        };
                    }
                },
                Framing::Value {
                    depth,
                    string,
                    escape,
                    lone,
                } => {
                    if *string {
                        // Jump to the next quote or backslash: a string's bytes pass as they are.
                        if *escape {
                            *escape = false;
                            out.push(byte);
                            i += 1;
                            continue;
                        }
                        let rest = &self.input[i..n];
                        let stop = memchr::memchr3(b'"', b'\\', b'\n', rest).unwrap_or(rest.len());
                        out.extend_from_slice(&rest[..stop]);
                        i += stop;
                        let Some(&special) = rest.get(stop) else {
                            continue;
                        };
                        match special {
                            b'"' => *string = false,
                            b'\\' => *escape = true,
                            // A raw line break in a string is not JSON: the record is reported as
                            // it is (the splitter's line ends here, and so does this one).
                            _ => {}
                        }
                        out.push(special);
                        let ended = special == b'"' && *depth == 0;
                        i += 1;
                        if ended {
                            self.state = if *lone {
                                Framing::End
                            } else {
                                Framing::Between
                            };
                            out.push(b'\n');
                        }
                        continue;
                    }
                    match byte {
                        b'"' => {
                            *string = true;
                            out.push(byte);
                        }
                        b'{' | b'[' => {
                            *depth += 1;
                            out.push(byte);
                        }
                        b'}' | b']' if *depth > 0 => {
                            *depth -= 1;
                            out.push(byte);
                            if *depth == 0 {
                                let lone = *lone;
                                out.push(b'\n');
                                self.state = if lone { Framing::End } else { Framing::Between };
                            }
                        }
                        // A scalar element ends at its delimiter.
                        b',' | b']' | b' ' | b'\t' | b'\r' | b'\n' if *depth == 0 => {
                            out.push(b'\n');
                            self.state = if byte == b']' {
                                Framing::End
                            } else {
                                Framing::Between
                            };
                        }
                        b'\r' | b'\n' => out.push(b' '),
                        _ => out.push(byte),
                    }
                }
                Framing::End => match byte {
                    b' ' | b'\t' | b'\r' | b'\n' => {}
                    other => {
                        return Err(self.at_error(
                            i,
                            format!("{:?} after the end of the document", other as char),
                        ))
                    }
                },
            }
            i += 1;
        }
        Ok(())
    }

    fn at_error(&self, i: usize, message: String) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} in the zip, byte {}: {message}",
                self.name,
                self.read + i as u64
            ),
        )
    }
}

/// `Read` for a reader whose bytes are in its own buffer: copied out of it.
fn read_buffered(reader: &mut impl BufRead, buf: &mut [u8]) -> io::Result<usize> {
    let available = reader.fill_buf()?;
    let n = available.len().min(buf.len());
    buf[..n].copy_from_slice(&available[..n]);
    reader.consume(n);
    Ok(n)
}

impl Read for ExportLines {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read_buffered(self, buf)
    }
}

impl BufRead for ExportLines {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.at >= self.out.len() && !self.refill()? {
            return Ok(&[]);
        }
        Ok(&self.out[self.at..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.out.len());
    }
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
pub struct Plain<R>(pub R);

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

/// A zstd stream decoded straight into blocks of up to `READ_BUFFER` (256 KiB), whose lines
/// the splitter then takes as slices ([`LineSource::take_shared`]): through zstd's reader and
/// a `BufReader`, every byte was copied out of the read buffer into a block of records once
/// more, a fifth of the reader thread's time on long records. A line cut by a block's end is
/// carried whole into the next block ([`LineSource::carry`]: its head copied once).
///
/// A block holds what that `BufReader` held at each refill, so the bytes read are the same up
/// to a damage too: frames one after another (skippable frames skipped), a stream ending
/// inside a frame an `incomplete frame` error, zstd's own window limit (128 MiB) for a frame
/// that asks for more. Memory: the blocks its records still hold (each at least half full),
/// and zstd's window; the run keeps up to [`BLOCKS_KEPT`] blocks no record holds any more for
/// the next ones, whichever file's ([`FreeBlocks`]).
pub struct ZstdBlocks<R> {
    input: R,
    decoder: zstd::stream::raw::Decoder<'static>,
    /// Where blocks are given back by their last record (the run's, [`FreeBlocks::shared`]).
    free: FreeBlocks,
    /// The decoded bytes not yet consumed.
    block: bytes::Bytes,
    /// Bytes kept for the head of the next block ([`LineSource::carry`]).
    carried: bytes::Bytes,
    /// The error that ended decoding while bytes were carried: given once they are read.
    pending: Option<io::Error>,
    state: Decoding,
    finished_frame: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Decoding {
    Reading,
    PastEof,
    Finished,
}

impl<R: BufRead> ZstdBlocks<R> {
    pub fn new(input: R) -> io::Result<ZstdBlocks<R>> {
        ZstdBlocks::with_blocks(input, FreeBlocks::shared())
    }

    /// A reader whose blocks are kept in `free`.
    fn with_blocks(input: R, free: FreeBlocks) -> io::Result<ZstdBlocks<R>> {
        Ok(ZstdBlocks {
            input,
            decoder: zstd::stream::raw::Decoder::new()?,
            free,
            block: bytes::Bytes::new(),
            carried: bytes::Bytes::new(),
            pending: None,
            state: Decoding::Reading,
            finished_frame: false,
        })
    }

    /// Decodes the next block (empty at the end of the stream), as zstd's reader fills a
    /// `BufReader` of [`READ_BUFFER`] bytes: the calls into zstd up to the first that gives
    /// bytes, so that a block holds exactly what that buffer held, up to a damage too (a
    /// call that fails gives none of its bytes).
    ///
    /// Bytes carried from the last block ([`LineSource::carry`]) come first, and zstd still
    /// writes after them into [`READ_BUFFER`] bytes of room, so the calls are the same. When
    /// decoding fails, the carried bytes are the block, and the error comes after them.
    fn decode(&mut self) -> io::Result<()> {
        let carried = std::mem::take(&mut self.carried);
        let at = carried.len();
        let mut out = self.free.take(at + READ_BUFFER);
        out[..at].copy_from_slice(&carried);
        let end = match self.decode_into(&mut out, at) {
            Ok(end) => end,
            Err(err) => {
                self.free.give(out);
                if carried.is_empty() {
                    return Err(err);
                }
                self.pending = Some(err);
                self.block = carried;
                return Ok(());
            }
        };
        out.truncate(end);
        // A block less than half full (the end of a frame or of the compressed buffer, or a
        // stream of tiny frames) is copied at its size: its records would otherwise each hold
        // a whole buffer's allocation alive.
        self.block = if out.len() >= READ_BUFFER / 2 {
            self.free.share(out)
        } else {
            let block = bytes::Bytes::copy_from_slice(&out);
            self.free.give(out);
            block
        };
        Ok(())
    }

    /// The calls into zstd for one block, writing after `out`'s first `at` bytes, up to its
    /// end; returns where what they wrote ends.
    fn decode_into(&mut self, out: &mut [u8], at: usize) -> io::Result<usize> {
        use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
        // The first call flushes what zstd holds from the last block, reading nothing.
        let mut first = true;
        let mut end = at;
        loop {
            match self.state {
                Decoding::Reading => {
                    let input = if first {
                        &[][..]
                    } else {
                        self.input.fill_buf()?
                    };
                    if !first && input.is_empty() {
                        self.state = Decoding::PastEof;
                        continue;
                    }
                    first = false;
                    if self.finished_frame && !input.is_empty() {
                        self.decoder.reinit()?;
                        self.finished_frame = false;
                    }
                    let mut src = InBuffer::around(input);
                    let mut dst = OutBuffer::around_pos(&mut *out, at);
                    let hint = self.decoder.run(&mut src, &mut dst)?;
                    end = dst.pos();
                    let used = src.pos();
                    self.input.consume(used);
                    if hint == 0 {
                        self.finished_frame = true;
                    }
                    if end > at {
                        break;
                    }
                }
                Decoding::PastEof => {
                    let mut dst = OutBuffer::around_pos(&mut *out, at);
                    let hint = self.decoder.finish(&mut dst, self.finished_frame)?;
                    end = dst.pos();
                    if hint == 0 {
                        self.state = Decoding::Finished;
                    }
                    break;
                }
                Decoding::Finished => break,
            }
        }
        Ok(end)
    }
}

/// How many blocks no record holds the run keeps for its next ones: more than a run
/// has in flight (the batches read ahead, those being converted or waiting their turn, the
/// one being collected: ~10 blocks), so that in a steady run every block is one given back.
/// With 8, blocks freed while the most were in flight were allocated again later, fresh.
const BLOCKS_KEPT: usize = 16;

/// The blocks of the run's zstd readers that no record holds any more. A block is 256 KiB that
/// the reader thread fills and the thread that drops its last record frees: freed to the
/// allocator, the next block was most often fresh memory, touched a page at a time, where a
/// block given back is memory already touched. Over 128 MB of small records, the reader's
/// blocks took ~1,650 page faults, and take ~850 given back (those first touched while the
/// most are in flight). A fresh page costs far more than its zeroing on a virtual machine
/// whose host reclaims idle memory: ~40 us each on ours, where zeroing fresh pages took 12 %
/// of a small dry run's CPU (perf).
/// Memory: at most [`BLOCKS_KEPT`] blocks for the whole process, however many files are
/// decompressed at once, each of the longest block's size (512 KiB, of which only the bytes
/// written were touched); a file's blocks serve the next file's.
#[derive(Clone, Default)]
struct FreeBlocks(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

impl FreeBlocks {
    /// The process's blocks, which every zstd reader shares.
    fn shared() -> FreeBlocks {
        static SHARED: std::sync::OnceLock<FreeBlocks> = std::sync::OnceLock::new();
        SHARED.get_or_init(FreeBlocks::default).clone()
    }

    /// A block of `len` bytes to write over: one given back if there is one (where only the
    /// bytes past its last length are zeroed, a few, as a block is most often full), else a new
    /// one, with room for the longest block ([`CARRY_MAX`] carried and [`READ_BUFFER`] read), so
    /// that any block given back serves any next one.
    fn take(&self, len: usize) -> Vec<u8> {
        let kept = match self.0.lock() {
            Ok(mut free) => free.pop(),
            Err(_) => None,
        };
        let mut block = kept
            .filter(|block| block.capacity() >= len)
            .unwrap_or_else(|| Vec::with_capacity(len.max(CARRY_MAX + READ_BUFFER)));
        block.resize(len, 0);
        block
    }

    /// Keeps `block` for a next one, unless enough are kept or it is larger than a block.
    fn give(&self, block: Vec<u8>) {
        if block.capacity() > CARRY_MAX + READ_BUFFER {
            return;
        }
        if let Ok(mut free) = self.0.lock() {
            if free.len() < BLOCKS_KEPT {
                free.push(block);
            }
        }
    }

    /// `block` as the records' shared bytes, given back here when the last of them is dropped.
    fn share(&self, block: Vec<u8>) -> bytes::Bytes {
        bytes::Bytes::from_owner(Shared {
            block,
            free: self.clone(),
        })
    }
}

/// A block whose bytes records share ([`FreeBlocks::share`]).
struct Shared {
    block: Vec<u8>,
    free: FreeBlocks,
}

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        &self.block
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.free.give(std::mem::take(&mut self.block));
    }
}

impl<R: BufRead> Read for ZstdBlocks<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read_buffered(self, buf)
    }
}

impl<R: BufRead> BufRead for ZstdBlocks<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.block.is_empty() {
            match self.pending.take() {
                // Carried again after the error: nothing can follow them, they come back.
                Some(err) if !self.carried.is_empty() => {
                    self.pending = Some(err);
                    self.block = std::mem::take(&mut self.carried);
                }
                Some(err) => return Err(err),
                None => self.decode()?,
            }
        }
        Ok(&self.block)
    }

    fn consume(&mut self, amount: usize) {
        let amount = amount.min(self.block.len());
        bytes::Buf::advance(&mut self.block, amount);
    }
}

impl<R: BufRead + Send> LineSource for ZstdBlocks<R> {
    fn shares(&self) -> bool {
        true
    }

    fn take_shared(&mut self, n: usize) -> bytes::Bytes {
        self.block.split_to(n.min(self.block.len()))
    }

    fn carry(&mut self) {
        self.carried = std::mem::take(&mut self.block);
    }
}

/// A stream that fails once the run is asked to stop (`stop` holds the signal's number, 0
/// until one comes): every loop that reads input, however long one record or one skip over
/// an oversized line is, sees it at its next buffer, within a read's time. The error is not
/// [`io::ErrorKind::Interrupted`], which readers retry.
pub struct Stoppable<R> {
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
        let mut opened = open(&path).unwrap();
        assert_eq!(opened.compression, Compression::Zstd);
        let mut out = Vec::new();
        opened.reader.read_to_end(&mut out).unwrap();
        assert_eq!(out, text);
    }

    /// A file read to its end through [`open_hashing`] leaves the digest of its bytes on
    /// disk, whatever its compression and however many frames or members it has; one read
    /// only in part leaves none (its digest is then taken the old way).
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
            let mut opened = open_hashing(&path, Some(Arc::clone(&slot))).expect("open");
            let mut read = Vec::new();
            opened.reader.read_to_end(&mut read).expect("read");
            assert_eq!(read, lines[..read.len()], "{name}");
            let whole = hex128(crate::model::hash::xxh3_128(&bytes));
            assert_eq!(slot.get(), Some(&whole), "{name}");
        }
        let path = dir.path().join("plain.jsonl");
        let slot = DigestSlot::default();
        let mut opened = open_hashing(&path, Some(Arc::clone(&slot))).expect("open");
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
