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
use super::open::{open_hashing, ArchiveLines, Compression, DigestSlot, LineSource, Opened, Plain};
use super::parquet::Rows;
use crate::model::location::BrokeAt;
use crate::model::Location;

mod document;
mod lines;
mod sniff;
#[cfg(test)]
mod tests;

use document::Base;
pub(crate) use lines::{gather, Blocks, CARRY_MAX};
use lines::{strip_line, ReadLine};

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
pub(crate) const DEFAULT_MAX_RECORD_BYTES: u64 = 256 << 20;

/// The default of `--max-conversation-bytes`: a file whose format spans it with one
/// conversation is held whole while read, up to this.
pub(crate) const DEFAULT_MAX_CONVERSATION_BYTES: u64 = 1 << 30;

/// What is kept of an oversized record: its first bytes, for the quarantine line.
pub(crate) const OVERSIZED_HEAD: usize = 1024;

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
        let at = BrokeAt {
            place: self.location.place(),
            compressed: self.compressed_offset,
        };
        write!(f, "{at}: {}", self.message)
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

/// Reads `file` and returns its events; a zip through `archive`
/// ([`super::open::ArchiveLines`]). Opening errors come back as a single damage event.
pub fn records(file: &SourceFile, archive: Option<ArchiveLines>) -> RecordReader {
    records_hashing(file, None, archive)
}

/// [`records`], with the digest of the file's bytes on disk left in `slot` once they were read
/// to the end ([`super::open::open_hashing`]).
pub fn records_hashing(
    file: &SourceFile,
    slot: Option<DigestSlot>,
    archive: Option<ArchiveLines>,
) -> RecordReader {
    let display = Arc::clone(&file.display);
    match open_hashing(&file.path, slot, archive) {
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
