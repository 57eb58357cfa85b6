//! Split a decompressed stream into records, each with its location.
//!
//! A file is JSON Lines when its first non-blank line is a complete JSON value, or cannot open
//! a multi-line one (does not start with `{` or `[`); otherwise it is read whole as one JSON
//! document (an object is one record, an array of objects one record per element, an array of
//! chat messages one record; several documents one after another, one record each). A
//! document that does not parse as a whole falls back to JSON
//! Lines, so every bad line is reported on its own; so does a damaged one whose other lines are
//! complete JSON objects (JSON Lines with a bad first line). A first line that opens an array
//! of records (a ChatGPT `conversations.json` written on one line) is read element by element
//! however long it is. A UTF-8 byte-order mark (at the start of any line: files joined with
//! `cat`), CRLF endings and blank lines are accepted. A read error (truncated or corrupt compression)
//! ends the file with a [`Damage`]; the records before it are still yielded, and a line cut by
//! the damage is yielded as `truncated`.
//!
//! Memory: a line is read whole (up to `--max-record-bytes`; past it only its head is kept),
//! a document up to the same limit. A JSON Lines record of a zstd file is a slice of the block
//! zstd decoded it into ([`super::open::ZstdBlocks`]), not copied; a line cut by a block's end
//! has its head carried into the next block (up to `CARRY_MAX`, 256 KiB). Of any other file, a
//! record is copied once out of the read buffer, into a 256 KiB block shared with the records
//! read around it (a longer one gets its own). A line longer than a buffer is gathered and
//! copied. A block is freed with the last of its records.

use std::collections::VecDeque;
use std::io::{BufRead, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::discover::SourceFile;
use super::elements::{Element, Elements, Framing};
use super::nested::{opens_path, Nested, OTLP_SPANS};
use super::open::{open_hashing, Compression, DigestSlot, LineSource, Opened, Plain};
use super::parquet::Rows;
use crate::model::Location;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One record's bytes, exactly as in the (decompressed) source, minus line ending and BOM.
#[derive(Debug, Clone)]
pub struct RawRecord {
    pub location: Location,
    pub bytes: Bytes,
    /// The record was cut short by a damaged stream.
    pub truncated: bool,
    /// The record is longer than `--max-record-bytes` (its size in bytes): `bytes` hold only
    /// its first [`OVERSIZED_HEAD`] bytes, for the quarantine; the rest was never loaded.
    pub oversized: Option<u64>,
    /// The record's identity in its file (digest and occurrence), set by the reader, which
    /// sees a file's records in order.
    pub id: crate::model::identity::RecordId,
    /// The magic of the binary file the record is a row of (Parquet's `PAR1`), `None` for
    /// text: such a file's format is found by its magic, not by its first row's shape, which
    /// a JSON record may share.
    pub magic: Option<&'static [u8]>,
}

impl RawRecord {
    /// Gives the record bytes of its own: a record kept long after the records read with it
    /// (a Batch API result waiting for its request) must not keep their block alive.
    pub fn detach(&mut self) {
        self.bytes = Bytes::copy_from_slice(&self.bytes);
    }
}

/// The default of `--max-record-bytes`.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 256 << 20;

/// The default of `--max-conversation-bytes`: a file whose format spans it with one
/// conversation is held whole while read, up to this.
pub const DEFAULT_MAX_CONVERSATION_BYTES: u64 = 1 << 30;

/// What is kept of an oversized record: its first bytes, for the quarantine line.
pub const OVERSIZED_HEAD: usize = 1024;

/// The place where a file could not be read further (of a Parquet file, a row group that
/// could not be read; the next one is).
#[derive(Debug, Clone)]
pub struct Damage {
    pub location: Location,
    /// Compressed bytes consumed when the error surfaced (approximate: read-ahead buffering).
    pub compressed_offset: Option<u64>,
    pub message: String,
}

/// Where the file broke and why, as the run reports it:
/// `path:line (byte N), compressed byte C: message`.
impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.location)?;
        if let Some(compressed) = self.compressed_offset {
            write!(f, ", compressed byte {compressed}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// What reading a file yields, in order.
#[derive(Debug)]
pub enum RecordEvent {
    Record(RawRecord),
    /// Blank lines in a row (white space only; their number): skipped, counted.
    Blank(u64),
    Damage(Damage),
}

/// Reads `file` and returns its events. Opening errors come back as a single damage event.
pub fn records(file: &SourceFile) -> RecordReader {
    records_hashing(file, None)
}

/// [`records`], with the digest of the file's bytes on disk left in `slot` once they were read
/// to the end ([`super::open::open_hashing`]).
pub fn records_hashing(file: &SourceFile, slot: Option<DigestSlot>) -> RecordReader {
    let display = Arc::clone(&file.display);
    match open_hashing(&file.path, slot) {
        Ok(mut opened) => {
            if !is_parquet(&mut opened) {
                return RecordReader::over(display, opened);
            }
            let read = Arc::new(AtomicU64::new(0));
            match std::fs::File::open(&file.path)
                .and_then(|f| Rows::of_file(Arc::clone(&display), f, Arc::clone(&read)))
            {
                Ok(rows) => RecordReader::rows(display, rows, read),
                Err(err) => RecordReader::failed(display, err.to_string()),
            }
        }
        Err(err) => RecordReader::failed(display, err.to_string()),
    }
}

/// Whether an opened stream is a Parquet file (its first bytes, already buffered, say so).
fn is_parquet(opened: &mut Opened) -> bool {
    opened.compression == Compression::None
        && opened
            .reader
            .fill_buf()
            .is_ok_and(super::parquet::is_parquet)
}

/// The events of a file's decompressed `bytes` held in memory, split exactly as [`records`]
/// splits a file on disk (JSON Lines or one document, blank lines, BOM, CRLF, oversized
/// records); `display` names the file in the records' locations. For tools and tests that
/// hold a file's bytes, not its path (the fuzz targets: [`crate::pipeline::process_bytes`]).
pub fn records_in(display: Arc<str>, bytes: Vec<u8>) -> RecordReader {
    if super::parquet::is_parquet(&bytes) {
        let read = Arc::new(AtomicU64::new(0));
        let rows = Rows::of_bytes(Arc::clone(&display), bytes.into(), Arc::clone(&read));
        return RecordReader::rows(display, rows, read);
    }
    RecordReader::over(
        display,
        Opened {
            reader: Box::new(Plain(std::io::Cursor::new(bytes))),
            compression: Compression::None,
            compressed_read: Arc::new(AtomicU64::new(0)),
        },
    )
}

enum Mode {
    Sniff,
    Lines,
    /// A Parquet file's rows: it is not split into lines.
    Rows(Box<Rows>),
    /// A document's elements (or values), read one at a time; where its first byte is.
    Elements(Box<(Elements<Box<dyn BufRead + Send>>, Base)>),
    /// The spans of OTLP trace exports, read one at a time from the stream.
    Nested(Box<(Nested<Box<dyn LineSource>>, Base)>),
    Done,
}

/// Iterator over a file's [`RecordEvent`]s.
pub struct RecordReader {
    path: Arc<str>,
    reader: Option<Box<dyn LineSource>>,
    compression: Compression,
    compressed_read: Arc<AtomicU64>,
    line: u64,
    offset: u64,
    mode: Mode,
    /// Blank lines before the first non-blank one, counted while the file is sniffed.
    leading_blanks: u64,
    /// The first line is being read: one that opens an array of records is streamed as
    /// soon as its first element shows it ([`ReadLine::OpensArray`]).
    sniffing: bool,
    /// Blank lines to report before anything queued.
    owed_blanks: u64,
    queue: VecDeque<RecordEvent>,
    /// A longer record (or JSON document) is yielded as oversized, never buffered whole.
    max_record_bytes: u64,
    /// The bytes of a line that spans buffer refills, reused from line to line.
    spill: Vec<u8>,
    /// Where whole lines are copied out of the read buffer: each record is a slice of a
    /// [`CHUNK`]-sized block shared by the records around it, not an allocation of its own.
    chunk: BytesMut,
}

/// The size of the blocks records are copied into. A block is freed when the last record in
/// it is: records are released a batch at a time, and a batch holds about 1 MiB of them.
const CHUNK: usize = 256 << 10;

/// A line too long to share a block ([`CHUNK`]) gets one of its own.
const CHUNK_LINE_MAX: usize = CHUNK / 8;

/// `line` as a record's bytes: copied into the current block of `chunk`, or a new one when it
/// does not fit. One allocation per 256 KiB of small records instead of one per record, and
/// the block is freed once, by whichever thread drops its last record: a worker freeing each
/// record the reader thread allocated made the reader reclaim every one (mimalloc's
/// cross-thread frees), on the pipeline's serial thread.
fn take_line(chunk: &mut BytesMut, line: &[u8]) -> Bytes {
    if line.len() > CHUNK_LINE_MAX {
        return Bytes::copy_from_slice(line);
    }
    if chunk.capacity() < line.len() {
        *chunk = BytesMut::with_capacity(CHUNK);
    }
    chunk.extend_from_slice(line);
    chunk.split().freeze()
}

/// The longest head of a line carried into the next block of a shared buffer
/// ([`LineSource::carry`]): a longer line is gathered in `spill`, as from any buffer.
pub(crate) const CARRY_MAX: usize = 256 << 10;

/// `spill` grown past this by one long line is freed after it.
const SPILL_KEEP: usize = 16 << 20;

/// One physical line as read, or the error that stopped reading.
enum ReadLine {
    Line {
        bytes: Bytes,
        line: u64,
        offset: u64,
    },
    /// A line longer than the limit: its first bytes and its whole size (line ending
    /// included); the rest was skipped.
    Oversized {
        head: Vec<u8>,
        size: u64,
        line: u64,
        offset: u64,
    },
    /// The first line opens an array whose first element is not a chat message: an array of
    /// records (a ChatGPT `conversations.json` on one line). `head` is what was read of it;
    /// the rest of the line is still in the stream.
    OpensArray {
        head: Vec<u8>,
        line: u64,
        offset: u64,
    },
    /// Empty lines in a row (bare `\n`s), counted at once.
    Blanks(u64),
    Eof,
    Error {
        partial: Vec<u8>,
        line: u64,
        offset: u64,
        message: String,
    },
}

impl RecordReader {
    /// A file that could not be opened: one damage event, `message` its reason.
    fn failed(path: Arc<str>, message: String) -> RecordReader {
        let mut reader = RecordReader::start(path, None, Arc::default(), Mode::Done);
        let location = reader.location(0, 0, None);
        reader.queue.push_back(RecordEvent::Damage(Damage {
            location,
            compressed_offset: None,
            message,
        }));
        reader
    }

    /// The rows of a Parquet file as its records; `read` counts the bytes read from it.
    fn rows(path: Arc<str>, rows: Rows, read: Arc<AtomicU64>) -> RecordReader {
        RecordReader::start(path, None, read, Mode::Rows(Box::new(rows)))
    }

    /// The records of an opened stream, named `path` in their locations.
    fn over(path: Arc<str>, opened: Opened) -> RecordReader {
        let Opened {
            reader,
            compression,
            compressed_read,
        } = opened;
        RecordReader {
            compression,
            ..RecordReader::start(path, Some(reader), compressed_read, Mode::Sniff)
        }
    }

    /// A reader at the start of its file, in `mode`.
    fn start(
        path: Arc<str>,
        reader: Option<Box<dyn LineSource>>,
        read: Arc<AtomicU64>,
        mode: Mode,
    ) -> RecordReader {
        RecordReader {
            path,
            reader,
            compression: Compression::None,
            compressed_read: read,
            line: 0,
            offset: 0,
            mode,
            leading_blanks: 0,
            sniffing: false,
            owed_blanks: 0,
            queue: VecDeque::new(),
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            spill: Vec::new(),
            chunk: BytesMut::new(),
        }
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Bytes of the file on disk consumed so far (compressed bytes for a compressed file), for
    /// progress.
    pub fn disk_counter(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.compressed_read)
    }

    fn location(&self, line: u64, offset: u64, element: Option<usize>) -> Location {
        Location {
            path: Arc::clone(&self.path),
            line,
            byte_offset: offset,
            element,
        }
    }

    /// Reading stops (the file ends in a damage the caller drops) once `stop` holds a signal.
    pub fn stop(mut self, stop: &Arc<std::sync::atomic::AtomicUsize>) -> RecordReader {
        if let Mode::Rows(rows) = &mut self.mode {
            rows.stop(stop);
        }
        self.reader = self.reader.take().map(|inner| {
            Box::new(super::open::Stoppable {
                inner,
                stop: Arc::clone(stop),
            }) as Box<dyn LineSource>
        });
        self
    }

    /// Records longer than `limit` bytes are yielded as oversized (`--max-record-bytes`).
    pub fn max_record_bytes(mut self, limit: u64) -> RecordReader {
        if let Mode::Rows(rows) = &mut self.mode {
            rows.max_record_bytes(limit);
        }
        self.max_record_bytes = limit;
        self
    }

    /// The next line. A line is buffered up to the limit (plus its CRLF) only; past it, the
    /// rest is skipped to the line's end and the line is [`ReadLine::Oversized`].
    fn read_line(&mut self) -> ReadLine {
        let Some(reader) = self.reader.as_mut() else {
            return ReadLine::Eof;
        };
        // Empty lines in a row are counted from the buffer in one pass: a file of newlines
        // is read at the speed of memchr, not a line's bookkeeping each.
        if let Ok(available) = reader.fill_buf() {
            let empty = available.iter().take_while(|b| **b == b'\n').count();
            if empty > 0 {
                reader.consume(empty);
                self.offset += empty as u64;
                self.line += empty as u64;
                return ReadLine::Blanks(empty as u64);
            }
        }
        // The limit, a BOM and a CRLF.
        let keep = usize::try_from(self.max_record_bytes.saturating_add(5)).unwrap_or(usize::MAX);
        // A first line that opens an array is looked at once it is this long, then at each
        // doubling (linear in all): an array of records is streamed from there.
        let mut array_check = self.sniffing.then_some(ARRAY_CHECK);
        // A line that spans buffer refills is gathered in `spill` (kept from line to line) and
        // copied out once at its size: growing a fresh vector per line cost reallocations and
        // freshly zeroed pages on the reader thread.
        let buf = &mut self.spill;
        let chunk = &mut self.chunk;
        buf.clear();
        // Past `SPILL_KEEP`, the line goes on in blocks of one size ([`Blocks`]).
        let mut blocks = Blocks::default();
        let mut size = 0u64;
        let start = self.offset;
        let mut whole_chunk = None;
        let shares = reader.shares();
        let mut carried = false;
        let mut opens_array = false;
        let error = loop {
            let available = match reader.fill_buf() {
                Ok(available) => available,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) => break Some(err),
            };
            if available.is_empty() {
                break None;
            }
            let (used, ends) = match memchr::memchr(b'\n', available) {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            let room = keep.saturating_sub(buf.len() + blocks.len()).min(used);
            if ends && size == 0 && room == used {
                // The common case: the whole line is in the buffer, taken as a slice of it
                // when the buffer is a shared block (zstd's), else copied into one.
                whole_chunk = Some(if shares {
                    reader.take_shared(used)
                } else {
                    let line = take_line(chunk, &available[..used]);
                    reader.consume(used);
                    line
                });
                size = used as u64;
                break None;
            }
            if !ends && size == 0 && shares && !carried && used <= CARRY_MAX {
                // A line cut by the end of a shared block: its head goes to the head of the
                // next block, so that the line is still one slice (once a line; a longer one
                // is gathered below).
                reader.carry();
                carried = true;
                continue;
            }
            let taken = &available[..room];
            let into_spill = SPILL_KEEP.saturating_sub(buf.len()).min(taken.len());
            gather(buf, &taken[..into_spill], SPILL_KEEP);
            blocks.push(&taken[into_spill..]);
            reader.consume(used);
            size += used as u64;
            if room < used {
                // Past the limit: the head in `buf` is all that is kept of it.
                blocks = Blocks::default();
            }
            if ends {
                break None;
            }
            if let Some(at) = array_check.filter(|&at| buf.len() >= at && room == used) {
                match opens_record_array(buf) {
                    Some(true) => {
                        opens_array = true;
                        break None;
                    }
                    Some(false) => array_check = None,
                    None => array_check = Some(at.saturating_mul(2)),
                }
            }
        };
        if let Some(line) = whole_chunk {
            self.offset += size;
            self.line += 1;
            if strip_line(&line).len() as u64 <= self.max_record_bytes {
                return ReadLine::Line {
                    bytes: line,
                    line: self.line,
                    offset: start,
                };
            }
            return ReadLine::Oversized {
                head: line[..line.len().min(OVERSIZED_HEAD)].to_vec(),
                size,
                line: self.line,
                offset: start,
            };
        }
        if opens_array {
            // Not a line: the array's elements are read from here (the line's head, then
            // the stream).
            let mut head = std::mem::take(&mut self.spill);
            blocks.append_to(&mut head);
            return ReadLine::OpensArray {
                head,
                line: self.line + 1,
                offset: start,
            };
        }
        // What was read of a line not read whole: a partial or oversized line's head only.
        let gathered = (self.spill.len() + blocks.len()) as u64;
        if let Some(err) = error {
            self.offset += size;
            self.line += 1;
            let mut partial = std::mem::take(&mut self.spill);
            blocks.append_to(&mut partial);
            return ReadLine::Error {
                partial,
                line: self.line,
                offset: start,
                message: err.to_string(),
            };
        }
        if size == 0 {
            return ReadLine::Eof;
        }
        self.offset += size;
        self.line += 1;
        if gathered == size {
            // A long line's buffer is handed over whole rather than copied: the copy was one
            // more record's worth of memory at the peak.
            let buf = if !blocks.is_empty() {
                let mut all = Vec::with_capacity(self.spill.len() + blocks.len());
                all.extend_from_slice(&self.spill);
                self.spill = Vec::new();
                blocks.append_to(&mut all);
                all
            } else if self.spill.capacity() > SPILL_KEEP {
                std::mem::take(&mut self.spill)
            } else {
                self.spill.as_slice().to_vec()
            };
            if strip_line(&buf).len() as u64 <= self.max_record_bytes {
                return ReadLine::Line {
                    bytes: buf.into(),
                    line: self.line,
                    offset: start,
                };
            }
            return ReadLine::Oversized {
                head: buf[..buf.len().min(OVERSIZED_HEAD)].to_vec(),
                size,
                line: self.line,
                offset: start,
            };
        }
        ReadLine::Oversized {
            head: self.spill[..self.spill.len().min(OVERSIZED_HEAD)].to_vec(),
            size,
            line: self.line,
            offset: start,
        }
    }

    /// The event of an oversized record: its first bytes, marked with its size.
    fn oversized(&self, head: &[u8], size: u64, line: u64, offset: u64) -> RecordEvent {
        let stripped = strip_line(head);
        RecordEvent::Record(RawRecord {
            location: self.location(line, offset, None),
            bytes: Bytes::copy_from_slice(&stripped[..stripped.len().min(OVERSIZED_HEAD)]),
            truncated: false,
            oversized: Some(size),
            id: Default::default(),
            magic: None,
        })
    }

    fn damage(&mut self, partial: Vec<u8>, line: u64, offset: u64, message: String) {
        let location = self.location(line, offset, None);
        let stripped = strip_line(&partial);
        if !stripped.iter().all(u8::is_ascii_whitespace) {
            self.queue.push_back(RecordEvent::Record(RawRecord {
                location: location.clone(),
                bytes: Bytes::copy_from_slice(stripped),
                truncated: true,
                oversized: None,
                id: Default::default(),
                magic: None,
            }));
        }
        let compressed_offset = match self.compression {
            Compression::None => None,
            Compression::Zstd | Compression::Gzip | Compression::Zip => {
                Some(self.compressed_read.load(Ordering::Relaxed))
            }
        };
        self.queue.push_back(RecordEvent::Damage(Damage {
            location,
            compressed_offset,
            message: format!("cannot read further: {message}"),
        }));
        self.mode = Mode::Done;
        self.reader = None;
    }

    /// The event of one line read whole: its bytes are the record's, stripped in place (a copy
    /// of every record here was ~2 % of the reader thread's instructions).
    fn line_event(&self, bytes: Bytes, line: u64, offset: u64) -> RecordEvent {
        let stripped = strip_line(&bytes);
        if stripped.iter().all(u8::is_ascii_whitespace) {
            return RecordEvent::Blank(1);
        }
        let bytes = bytes.slice_ref(stripped);
        RecordEvent::Record(RawRecord {
            location: self.location(line, offset, None),
            bytes,
            truncated: false,
            oversized: None,
            id: Default::default(),
            magic: None,
        })
    }

    /// Decides between JSON Lines and one document on the first non-blank line. Blank lines
    /// before it are counted, never stored: whether they are reported depends on the decision
    /// (a document's own white space is not), so they are owed until then.
    fn sniff(&mut self) {
        if self.spans_of_trace_exports() {
            return;
        }
        self.sniffing = true;
        self.sniff_first();
        self.sniffing = false;
    }

    fn sniff_first(&mut self) {
        loop {
            match self.read_line() {
                ReadLine::Blanks(n) => self.leading_blanks += n,
                ReadLine::Eof => {
                    self.mode = Mode::Done;
                    self.owe_blanks();
                    return;
                }
                ReadLine::Error {
                    partial,
                    line,
                    offset,
                    message,
                } => {
                    self.owe_blanks();
                    self.damage(partial, line, offset, message);
                    return;
                }
                ReadLine::OpensArray { head, line, offset } => {
                    self.stream_array(head, line, offset);
                    return;
                }
                ReadLine::Oversized {
                    head,
                    size,
                    line,
                    offset,
                } => {
                    // Too long to be read as the start of a document: JSON Lines.
                    self.mode = Mode::Lines;
                    self.owe_blanks();
                    let event = self.oversized(&head, size, line, offset);
                    self.queue.push_back(event);
                    return;
                }
                ReadLine::Line {
                    bytes,
                    line,
                    offset,
                } => {
                    let stripped = strip_line(&bytes);
                    if stripped.iter().all(u8::is_ascii_whitespace) {
                        self.leading_blanks += 1;
                        continue;
                    }
                    let complete = is_json_value(stripped);
                    // A JSON value that spans lines starts with `{` or `[` (a string cannot
                    // hold a raw newline, other scalars are one token). A first line that is
                    // not complete and starts otherwise (say, the tail of a line cut when an
                    // archive was split by size) is a bad JSON Lines record, not the start of
                    // a document: reading on as a document would hold the whole file in
                    // memory, and a damage further on would turn every good record before it
                    // into one truncated record.
                    let opens_document =
                        matches!(stripped.trim_ascii_start().first(), Some(b'{' | b'['));
                    // A whole array of records on one line (a ChatGPT `conversations.json`
                    // written without newlines) is a document too, read element by element.
                    let one_line_array = complete && is_record_array(stripped);
                    if one_line_array || (!complete && opens_document) {
                        self.read_document(bytes.into(), line, offset);
                    } else {
                        self.mode = Mode::Lines;
                        self.owe_blanks();
                        let event = self.line_event(bytes, line, offset);
                        self.queue.push_back(event);
                    }
                    return;
                }
            }
        }
    }

    /// A file that opens with an OTLP trace export (`{"resourceSpans": ...}`) is read as a
    /// sequence of them, each span a record, streamed: one export can hold every span of a
    /// day (the collector's file exporter writes one per line, a trace dump one for the whole
    /// file), and a conversation is a few of them. Whether it does is told from the first
    /// bytes, before any line is read whole.
    fn spans_of_trace_exports(&mut self) -> bool {
        if self.offset != 0 {
            return false;
        }
        let Some(reader) = self.reader.as_mut() else {
            return false;
        };
        let bom = match reader.fill_buf() {
            Ok(head) => {
                let bom = if head.starts_with(BOM) { BOM.len() } else { 0 };
                if !opens_path(&head[bom..], &OTLP_SPANS) {
                    return false;
                }
                bom
            }
            Err(_) => return false,
        };
        reader.consume(bom);
        let Some(reader) = self.reader.take() else {
            return false;
        };
        let base = Base {
            line: 1,
            offset: bom as u64,
        };
        let walk = Nested::new(reader, &OTLP_SPANS, self.max_record_bytes);
        self.mode = Mode::Nested(Box::new((walk, base)));
        true
    }

    /// The blank lines before the first record are reported (the file is not one document).
    fn owe_blanks(&mut self) {
        self.owed_blanks += std::mem::take(&mut self.leading_blanks);
    }

    /// Reads the rest of the file as one JSON document whose first line is `first` (at `line`,
    /// byte `offset`), held in one buffer up to `--max-record-bytes`; falls back to lines if
    /// it is not one. A longer array is read element by element from the stream.
    fn read_document(&mut self, first: Vec<u8>, line: u64, offset: u64) {
        let mut doc = first;
        let doc_cap = usize::try_from(self.max_record_bytes.saturating_add(BOM.len() as u64 + 1))
            .unwrap_or(usize::MAX);
        let mut error = None;
        while let Some(reader) = self.reader.as_mut() {
            let n = match reader.fill_buf() {
                Ok(available) => {
                    gather(&mut doc, available, doc_cap);
                    available.len()
                }
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    error = Some(err.to_string());
                    break;
                }
            };
            if n == 0 {
                break;
            }
            reader.consume(n);
            if doc.len() as u64 > self.max_record_bytes.saturating_add(BOM.len() as u64) {
                self.large_document(doc, line, offset);
                return;
            }
        }
        let bom = if offset == 0 && doc.starts_with(BOM) {
            BOM.len()
        } else {
            0
        };
        let base = Base {
            line,
            offset: offset + bom as u64,
        };
        if let Some(message) = error {
            self.damaged_document(doc, base, bom, message);
            return;
        }
        self.reader = None;
        let body = &doc[bom..];
        let framing = if is_json_value(body) {
            if is_record_array(body) {
                Some(Framing::Array)
            } else {
                // One record: the whole value, without the white space around it.
                let start = body.len() - body.trim_ascii_start().len();
                let record = RawRecord {
                    location: self.location(
                        base.line + count_newlines(&body[..start]),
                        base.offset + start as u64,
                        None,
                    ),
                    bytes: Bytes::copy_from_slice(body.trim_ascii()),
                    truncated: false,
                    oversized: None,
                    id: Default::default(),
                    magic: None,
                };
                self.queue.push_back(RecordEvent::Record(record));
                self.mode = Mode::Done;
                return;
            }
        } else if is_json_sequence(body) {
            Some(Framing::Sequence)
        } else {
            None
        };
        match framing {
            Some(framing) => {
                let elements = Elements::new(
                    Box::new(Consumed::new(doc, bom)) as Box<dyn BufRead + Send>,
                    framing,
                    self.max_record_bytes,
                );
                self.mode = Mode::Elements(Box::new((elements, base)));
            }
            // Not JSON as a whole: every line is reported on its own.
            None => self.replay_lines(doc, line, offset, None),
        }
    }

    /// Reads `doc` (the file from byte `offset`, line `line` on) again as JSON Lines, then the
    /// read error that ended it, if one did.
    fn replay_lines(&mut self, doc: Vec<u8>, line: u64, offset: u64, error: Option<String>) {
        self.owe_blanks();
        self.reader = Some(Box::new(Replay {
            bytes: std::io::Cursor::new(doc),
            error,
        }));
        self.line = line - 1;
        self.offset = offset;
        self.mode = Mode::Lines;
    }

    /// A document cut by a read error. If lines before the damage are complete JSON objects on
    /// their own, this is JSON Lines whose first line is cut or corrupt at its end: it is read
    /// as lines, so that the records before the damage are converted. Otherwise the document
    /// is one truncated record.
    fn damaged_document(&mut self, mut doc: Vec<u8>, base: Base, bom: usize, message: String) {
        let last_line = memchr::memrchr(b'\n', &doc).map_or(0, |at| at + 1);
        let lines_evidence = doc[..last_line].split(|b| *b == b'\n').any(|line| {
            let stripped = line.trim_ascii();
            stripped.first() == Some(&b'{') && is_json_value(stripped)
        });
        if lines_evidence {
            let offset = base.offset - bom as u64;
            self.replay_lines(doc, base.line, offset, Some(message));
            return;
        }
        let damage_line = base.line + count_newlines(&doc[..last_line]);
        let damage_offset = base.offset - bom as u64 + last_line as u64;
        let trimmed = doc[bom..].trim_ascii();
        if !trimmed.is_empty() {
            let bytes = Bytes::copy_from_slice(trimmed);
            doc = Vec::new();
            self.queue.push_back(RecordEvent::Record(RawRecord {
                location: self.location(base.line, base.offset, None),
                bytes,
                truncated: true,
                oversized: None,
                id: Default::default(),
                magic: None,
            }));
        }
        drop(doc);
        self.damage(Vec::new(), damage_line, damage_offset, message);
    }

    /// A JSON document over the limit. An array of records is read element by element from
    /// the stream, each under the limit; anything else is one oversized record at its first
    /// line, the rest of the file skipped unbuffered (a damage there still ends it with a
    /// [`Damage`]).
    fn large_document(&mut self, doc: Vec<u8>, line: u64, offset: u64) {
        let bom = if offset == 0 && doc.starts_with(BOM) {
            BOM.len()
        } else {
            0
        };
        let base = Base {
            line,
            offset: offset + bom as u64,
        };
        let head: Vec<u8> = doc[..doc.len().min(OVERSIZED_HEAD + bom)].to_vec();
        let buffered = doc.len() as u64;
        if doc[bom..].trim_ascii_start().first() == Some(&b'[') {
            let Some(rest) = self.reader.take() else {
                return;
            };
            let stream: Box<dyn BufRead + Send> = Box::new(Consumed::new(doc, bom).chain(rest));
            let mut elements = Elements::new(stream, Framing::Array, self.max_record_bytes);
            let first = elements.next();
            let message_list =
                matches!(&first, Some(Element::Value { bytes, .. }) if looks_like_message(bytes));
            if !message_list {
                if let Some(first) = first {
                    self.element_event(first, base);
                }
                if !matches!(self.mode, Mode::Done) {
                    self.mode = Mode::Elements(Box::new((elements, base)));
                }
                return;
            }
            // An array of chat messages is one record: over the limit as a whole.
            let (rest, error) = elements.skip_rest();
            let size = elements.offset() + bom as u64;
            let _ = rest;
            let event = self.oversized(&head, size, line, offset);
            self.queue.push_back(event);
            self.mode = Mode::Done;
            if let Some(err) = error {
                let at = base.offset + elements.offset();
                self.damage(Vec::new(), line, at, err.to_string());
            }
            return;
        }
        // Count the rest line by line, as JSON Lines would, so a damage is placed on its line.
        self.line = line - 1 + count_newlines(&doc);
        self.offset = offset + buffered;
        drop(doc);
        let mut size = buffered;
        let limit = std::mem::replace(&mut self.max_record_bytes, 0);
        let mut damage = None;
        loop {
            match self.read_line() {
                ReadLine::Eof => break,
                ReadLine::Blanks(n) => size += n,
                ReadLine::Line { bytes, .. } => size += bytes.len() as u64,
                ReadLine::OpensArray { head, .. } => size += head.len() as u64,
                ReadLine::Oversized { size: more, .. } => size += more,
                ReadLine::Error {
                    partial,
                    line,
                    offset,
                    message,
                } => {
                    size += partial.len() as u64;
                    damage = Some((line, offset, message));
                    break;
                }
            }
        }
        self.max_record_bytes = limit;
        let event = self.oversized(&head, size, line, offset);
        self.queue.push_back(event);
        self.mode = Mode::Done;
        match damage {
            Some((line, offset, message)) => self.damage(Vec::new(), line, offset, message),
            None => self.reader = None,
        }
    }

    /// A first line that opens an array of records, read element by element from its `head`
    /// (what was read of the line) and the rest of the stream, each element under the limit:
    /// the line may be longer than any limit.
    fn stream_array(&mut self, head: Vec<u8>, line: u64, offset: u64) {
        let bom = if head.starts_with(BOM) { BOM.len() } else { 0 };
        let base = Base {
            line,
            offset: offset + bom as u64,
        };
        let Some(rest) = self.reader.take() else {
            self.mode = Mode::Done;
            return;
        };
        let stream: Box<dyn BufRead + Send> = Box::new(Consumed::new(head, bom).chain(rest));
        let elements = Elements::new(stream, Framing::Array, self.max_record_bytes);
        self.mode = Mode::Elements(Box::new((elements, base)));
    }

    /// Queues the event of one element of a document whose first byte is at `base`.
    fn element_event(&mut self, element: Element, base: Base) {
        match element {
            Element::Value {
                bytes,
                offset,
                line,
                index,
            } => self.queue.push_back(RecordEvent::Record(RawRecord {
                location: self.location(base.line + line, base.offset + offset, index),
                bytes: bytes.into(),
                truncated: false,
                oversized: None,
                id: Default::default(),
                magic: None,
            })),
            Element::Oversized {
                head,
                size,
                offset,
                line,
                index,
            } => self.queue.push_back(RecordEvent::Record(RawRecord {
                location: self.location(base.line + line, base.offset + offset, index),
                bytes: head.into(),
                truncated: false,
                oversized: Some(size),
                id: Default::default(),
                magic: None,
            })),
            Element::Broken {
                offset,
                line,
                message,
                io: _,
            } => {
                self.reader = None;
                self.damage(Vec::new(), base.line + line, base.offset + offset, message);
            }
        }
    }
}

/// Where a document's first byte is in its file: the line (1-based) and byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Base {
    line: u64,
    offset: u64,
}

/// Bytes read ahead, given once more from `at` and freed as soon as they are consumed: the
/// head of a document, before the rest of its stream, held no longer than it is needed.
struct Consumed {
    bytes: Vec<u8>,
    at: usize,
}

impl Consumed {
    fn new(bytes: Vec<u8>, at: usize) -> Consumed {
        let mut consumed = Consumed { bytes, at: 0 };
        consumed.consume(at);
        consumed
    }
}

impl Read for Consumed {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let rest = &self.bytes[self.at..];
        let n = rest.len().min(out.len());
        out[..n].copy_from_slice(&rest[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Consumed {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Ok(&self.bytes[self.at..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = self.at.saturating_add(amount).min(self.bytes.len());
        if self.at == self.bytes.len() {
            self.bytes = Vec::new();
            self.at = 0;
        }
    }
}

/// A line (or JSON value) gathered past its first [`SPILL_KEEP`] bytes, in blocks of one
/// size: one buffer doubled up to the limit held twice the limit at the copy, and the
/// allocator kept each size it passed through (an oversized line of a 256 MiB limit peaked at
/// ~650 MB); blocks of one size are reused and cost the bytes held.
#[derive(Default)]
pub(crate) struct Blocks {
    blocks: Vec<Vec<u8>>,
    len: usize,
}

/// The size of a [`Blocks`] block.
const BLOCK: usize = 4 << 20;

impl Blocks {
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let full = self.blocks.last().is_none_or(|b| b.len() == b.capacity());
            if full {
                self.blocks.push(Vec::with_capacity(BLOCK));
            }
            let Some(last) = self.blocks.last_mut() else {
                return;
            };
            let n = (last.capacity() - last.len()).min(bytes.len());
            last.extend_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends the bytes to `out`, each block freed once copied.
    pub(crate) fn append_to(self, out: &mut Vec<u8>) {
        out.reserve_exact(self.len);
        for block in self.blocks {
            out.extend_from_slice(&block);
        }
    }
}

/// A first line at least this long that opens an array is looked at for its first element.
const ARRAY_CHECK: usize = 1 << 20;

/// Appends `bytes` to `buf`, its capacity doubling but never past `cap` (unless `bytes`
/// need it): a line or value gathered up to a limit costs the limit, not the next power of
/// two past it.
pub(crate) fn gather(buf: &mut Vec<u8>, bytes: &[u8], cap: usize) {
    let need = buf.len().saturating_add(bytes.len());
    if need > buf.capacity() {
        let want = buf.capacity().saturating_mul(2).clamp(need, cap.max(need));
        buf.reserve_exact(want - buf.len());
    }
    buf.extend_from_slice(bytes);
}

/// What the head of a first line says: `Some(true)` when it opens an array whose first
/// element (read whole) is not a chat message, `Some(false)` when it does not open an array or
/// its first element is a message (one record), `None` while the first element is cut.
fn opens_record_array(head: &[u8]) -> Option<bool> {
    let body = head.strip_prefix(BOM).unwrap_or(head).trim_ascii_start();
    if body.first() != Some(&b'[') {
        return Some(false);
    }
    match Elements::new(body, Framing::Array, u64::MAX).next() {
        Some(Element::Value { bytes, .. }) => Some(!looks_like_message(&bytes)),
        Some(Element::Oversized { .. }) => Some(false),
        Some(Element::Broken { .. }) | None => None,
    }
}

/// A document's bytes read again, then the read error that ended them the first time.
struct Replay {
    bytes: std::io::Cursor<Vec<u8>>,
    error: Option<String>,
}

impl std::io::Read for Replay {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.bytes.read(buf)?;
        if n == 0 {
            if let Some(message) = self.error.take() {
                return Err(std::io::Error::other(message));
            }
        }
        Ok(n)
    }
}

impl LineSource for Replay {}

impl BufRead for Replay {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        let at_end = self.bytes.position() >= self.bytes.get_ref().len() as u64;
        if at_end {
            if let Some(message) = self.error.take() {
                return Err(std::io::Error::other(message));
            }
        }
        self.bytes.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        self.bytes.consume(amount);
    }
}

impl Iterator for RecordReader {
    type Item = RecordEvent;

    fn next(&mut self) -> Option<RecordEvent> {
        loop {
            if self.owed_blanks > 0 {
                return Some(RecordEvent::Blank(std::mem::take(&mut self.owed_blanks)));
            }
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            match &mut self.mode {
                Mode::Done => return None,
                Mode::Sniff => self.sniff(),
                Mode::Rows(rows) => match rows.next_event() {
                    Some(event) => return Some(event),
                    None => self.mode = Mode::Done,
                },
                Mode::Elements(elements) => {
                    let base = elements.1;
                    match elements.0.next() {
                        Some(element) => self.element_event(element, base),
                        // A document read ahead whole ends the file; the stream it was read
                        // from, if still here, goes on as lines.
                        None if self.reader.is_some() => self.mode = Mode::Lines,
                        None => self.mode = Mode::Done,
                    }
                }
                Mode::Nested(walk) => {
                    let base = walk.1;
                    match walk.0.next() {
                        Some(element) => self.element_event(element, base),
                        None => self.mode = Mode::Done,
                    }
                }
                Mode::Lines => match self.read_line() {
                    ReadLine::Eof => self.mode = Mode::Done,
                    ReadLine::Blanks(n) => return Some(RecordEvent::Blank(n)),
                    ReadLine::Line {
                        bytes,
                        line,
                        offset,
                    } => return Some(self.line_event(bytes, line, offset)),
                    // Only a first line is looked at for an array; were another, the same.
                    ReadLine::OpensArray { head, line, offset } => {
                        self.stream_array(head, line, offset)
                    }
                    ReadLine::Oversized {
                        head,
                        size,
                        line,
                        offset,
                    } => return Some(self.oversized(&head, size, line, offset)),
                    ReadLine::Error {
                        partial,
                        line,
                        offset,
                        message,
                    } => self.damage(partial, line, offset, message),
                },
            }
        }
    }
}

/// Removes the line ending (LF or CRLF) and a UTF-8 BOM at the line's start: files joined
/// with `cat` carry each one's BOM at the start of a line.
fn strip_line(bytes: &[u8]) -> &[u8] {
    let mut s = bytes;
    if s.starts_with(BOM) {
        s = &s[BOM.len()..];
    }
    if let Some(rest) = s.strip_suffix(b"\n") {
        s = rest;
    }
    if let Some(rest) = s.strip_suffix(b"\r") {
        s = rest;
    }
    s
}

/// `bytes` hold exactly one complete JSON value.
fn is_json_value(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

fn count_newlines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

/// A chat message object: has a `role`.
fn looks_like_message(json: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        role: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Probe>(json)
        .map(|p| p.role.is_some())
        .unwrap_or(false)
}

/// `value` (one complete JSON value) is a non-empty array whose first element is not a chat
/// message: an array of records, one per element. An array of messages is one record.
fn is_record_array(value: &[u8]) -> bool {
    if value.trim_ascii_start().first() != Some(&b'[') {
        return false;
    }
    match Elements::new(value, Framing::Array, u64::MAX).next() {
        Some(Element::Value { bytes, .. }) => !looks_like_message(&bytes),
        Some(Element::Oversized { .. } | Element::Broken { .. }) | None => false,
    }
}

/// `bytes` are two or more complete JSON values one after another (`jq .` output).
fn is_json_sequence(bytes: &[u8]) -> bool {
    let mut count = 0usize;
    for value in serde_json::Deserializer::from_slice(bytes).into_iter::<serde::de::IgnoredAny>() {
        if value.is_err() {
            return false;
        }
        count += 1;
    }
    count >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of a file holding `bytes`, in a compact form: `R line offset element bytes`,
    /// `O line size`, `B`, `D line offset`.
    fn events(bytes: &[u8], max: u64) -> Vec<String> {
        let dir = std::env::temp_dir().join(format!(
            "rollover-split-{}-{}",
            std::process::id(),
            crate::model::hash::xxh3_64(bytes)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.json");
        std::fs::write(&path, bytes).unwrap();
        let file = SourceFile {
            path: path.clone(),
            display: Arc::from("f.json"),
            key: "f.json".into(),
            origin: "f.json".into(),
            size: bytes.len() as u64,
            mtime_ns: 0,
            ctime_ns: 0,
            ino: 0,
            root: None,
        };
        let out = records(&file)
            .max_record_bytes(max)
            .map(|event| match event {
                RecordEvent::Record(r) if r.oversized.is_some() => {
                    format!("O {} {}", r.location.line, r.oversized.unwrap_or(0))
                }
                RecordEvent::Record(r) => format!(
                    "R {} {} {:?} {}{}",
                    r.location.line,
                    r.location.byte_offset,
                    r.location.element,
                    String::from_utf8_lossy(&r.bytes),
                    if r.truncated { " (truncated)" } else { "" }
                ),
                RecordEvent::Blank(n) => format!("B{n}"),
                RecordEvent::Damage(d) => {
                    format!("D {} {}", d.location.line, d.location.byte_offset)
                }
            })
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        out
    }

    #[test]
    fn document_array_splits_into_elements_with_lines() {
        let doc = b"[\n  {\"a\": 1},\n  {\"b\": 2}\n]\n";
        assert_eq!(
            events(doc, 1 << 20),
            ["R 2 4 Some(0) {\"a\": 1}", "R 3 16 Some(1) {\"b\": 2}"]
        );
    }

    #[test]
    fn concatenated_documents_are_one_record_each() {
        let doc = b"{\n  \"a\": 1\n}\n{\n  \"b\": 2\n}\n";
        assert_eq!(
            events(doc, 1 << 20),
            [
                "R 1 0 None {\n  \"a\": 1\n}",
                "R 4 13 None {\n  \"b\": 2\n}"
            ]
        );
    }

    #[test]
    fn message_array_is_one_record() {
        let doc = br#"[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]"#;
        let text = String::from_utf8_lossy(doc);
        assert_eq!(events(doc, 1 << 20), [format!("R 1 0 None {text}")]);
    }

    #[test]
    fn a_one_line_array_of_records_is_read_element_by_element() {
        let doc = b"\xEF\xBB\xBF[{\"id\":\"a\"},{\"id\":\"b\"}]\n";
        assert_eq!(
            events(doc, 1 << 20),
            [
                "R 1 4 Some(0) {\"id\":\"a\"}",
                "R 1 15 Some(1) {\"id\":\"b\"}"
            ]
        );
    }

    #[test]
    fn blank_lines_are_counted_not_kept_and_a_document_owes_none() {
        let mut lines = vec![b'\n'; 5];
        lines.extend_from_slice(b"{\"a\":1}\n");
        assert_eq!(events(&lines, 1 << 20), ["B5", "R 6 5 None {\"a\":1}"]);
        let mut doc = vec![b'\n'; 3];
        doc.extend_from_slice(b"[\n{\"a\":1}\n]");
        assert_eq!(events(&doc, 1 << 20), ["R 5 5 Some(0) {\"a\":1}"]);
    }

    #[test]
    fn a_document_that_is_not_json_is_read_as_lines() {
        let doc = b"{\"a\":\n{\"b\":1}\n";
        assert_eq!(
            events(doc, 1 << 20),
            ["R 1 0 None {\"a\":", "R 2 6 None {\"b\":1}"]
        );
    }

    #[test]
    fn an_array_over_the_limit_is_read_element_by_element() {
        let mut doc = b"[\n".to_vec();
        for i in 0..50 {
            doc.extend_from_slice(format!("  {{\"n\": {i:03}}},\n").as_bytes());
        }
        doc.extend_from_slice(format!("  \"{}\"\n]\n", "x".repeat(300)).as_bytes());
        let got = events(&doc, 200);
        assert_eq!(got.len(), 51);
        assert_eq!(got[0], "R 2 4 Some(0) {\"n\": 000}");
        assert_eq!(got[49], "R 51 690 Some(49) {\"n\": 049}");
        assert_eq!(got[50], "O 52 302");
        // An object over the limit is one oversized record.
        let object = format!("{{\n\"a\": \"{}\"\n}}\n", "x".repeat(300));
        assert_eq!(events(object.as_bytes(), 200), ["O 1 312"]);
    }

    #[test]
    fn records_sharing_blocks_keep_their_own_bytes_and_places() {
        // Lines of every size around a block's room: many to one block, one that just fits
        // or just misses the rest of a block, one too long to share ([`CHUNK_LINE_MAX`]), and
        // CRLF endings stripped inside a shared block. Over 1 MiB in all: several blocks.
        let sizes = [
            1usize,
            7,
            300,
            CHUNK_LINE_MAX - 9,
            CHUNK_LINE_MAX - 8,
            CHUNK_LINE_MAX + 1,
            5000,
            2,
        ];
        let mut doc = Vec::new();
        let mut want = Vec::new();
        for i in 0..200 {
            let size = sizes[i % sizes.len()];
            let offset = doc.len();
            let text = format!("{{\"n\":{i},\"s\":\"{}\"}}", "x".repeat(size));
            doc.extend_from_slice(text.as_bytes());
            doc.extend_from_slice(if i % 3 == 0 { b"\r\n" } else { b"\n" });
            want.push(format!("R {} {offset} None {text}", i + 1));
        }
        assert!(doc.len() > 4 * CHUNK);
        assert_eq!(events(&doc, 1 << 20), want);
    }

    /// A zstd file's records (slices of the decoded blocks, a line cut by a block's end
    /// carried into the next, a longer one gathered) are the plain file's: bytes, lines,
    /// offsets, blank lines, oversized lines.
    #[test]
    fn a_zstd_files_records_are_the_plain_files() {
        let sizes = [
            10usize,
            70_000,
            CARRY_MAX - 40,
            CARRY_MAX + 1,
            3,
            600_000,
            150_000,
            1_500_000,
            200_000,
        ];
        let mut doc = Vec::new();
        for i in 0..60 {
            let size = sizes[i % sizes.len()];
            let text = format!("{{\"n\":{i},\"s\":\"{}\"}}", "y".repeat(size));
            doc.extend_from_slice(text.as_bytes());
            doc.extend_from_slice(match i % 4 {
                0 => b"\r\n",
                1 => b"\n\n\n",
                _ => b"\n",
            });
        }
        doc.extend_from_slice(b"{\"last\":\"no newline\"}");
        let zstd = zstd::encode_all(&doc[..], 3).unwrap();
        for max in [1 << 20, 100_000] {
            let plain = events(&doc, max);
            assert!(
                plain.iter().any(|e| e.starts_with('O')),
                "an oversized line"
            );
            assert_eq!(events(&zstd, max), plain, "max {max}");
        }
    }

    #[test]
    fn strip_handles_bom_and_crlf() {
        assert_eq!(strip_line(b"\xEF\xBB\xBF{}\r\n"), b"{}");
        assert_eq!(strip_line(b"{}\r\n"), b"{}");
    }
}
