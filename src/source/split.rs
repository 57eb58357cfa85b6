//! Split a decompressed stream into records, each with its location.
//!
//! A file is JSON Lines when its first non-blank line is a complete JSON value, or cannot open
//! a multi-line one (does not start with `{` or `[`); otherwise it is read whole as one JSON
//! document (an object is one record, an array of objects one record per element, an array of
//! chat messages one record; several documents one after another, one record each). A
//! document that does not parse as a whole falls back to JSON
//! Lines, so every bad line is reported on its own; so does a damaged one whose other lines are
//! complete JSON objects (JSON Lines with a bad first line). A UTF-8 byte-order mark,
//! CRLF endings and blank lines are accepted. A read error (truncated or corrupt compression)
//! ends the file with a [`Damage`]; the records before it are still yielded, and a line cut by
//! the damage is yielded as `truncated`.

use std::collections::VecDeque;
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::value::RawValue;

use super::discover::SourceFile;
use super::open::{open, Compression, Opened};
use crate::model::Location;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One record's bytes, exactly as in the (decompressed) source, minus line ending and BOM.
#[derive(Debug, Clone)]
pub struct RawRecord {
    pub location: Location,
    pub bytes: Vec<u8>,
    /// The record was cut short by a damaged stream.
    pub truncated: bool,
    /// The record is longer than `--max-record-bytes` (its size in bytes): `bytes` hold only
    /// its first [`OVERSIZED_HEAD`] bytes, for the quarantine; the rest was never loaded.
    pub oversized: Option<u64>,
    /// The record's identity in its file (digest and occurrence), set by the reader, which
    /// sees a file's records in order.
    pub id: crate::model::identity::RecordId,
}

/// The default of `--max-record-bytes`.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 256 << 20;

/// What is kept of an oversized record: its first bytes, for the quarantine line.
pub const OVERSIZED_HEAD: usize = 1024;

/// The place where a file could not be read further.
#[derive(Debug, Clone)]
pub struct Damage {
    pub location: Location,
    /// Compressed bytes consumed when the error surfaced (approximate: read-ahead buffering).
    pub compressed_offset: Option<u64>,
    pub message: String,
}

/// What reading a file yields, in order.
#[derive(Debug)]
pub enum RecordEvent {
    Record(RawRecord),
    /// A blank line (whitespace only): skipped, counted.
    Blank,
    Damage(Damage),
}

/// Reads `file` and returns its events. Opening errors come back as a single damage event.
pub fn records(file: &SourceFile) -> RecordReader {
    match open(&file.path) {
        Ok(opened) => RecordReader::over(Arc::clone(&file.display), opened),
        Err(err) => {
            let mut queue = VecDeque::new();
            queue.push_back(RecordEvent::Damage(Damage {
                location: Location {
                    path: Arc::clone(&file.display),
                    line: 0,
                    byte_offset: 0,
                    element: None,
                },
                compressed_offset: None,
                message: err.to_string(),
            }));
            RecordReader {
                path: Arc::clone(&file.display),
                reader: None,
                compression: Compression::None,
                compressed_read: Arc::new(AtomicU64::new(0)),
                line: 0,
                offset: 0,
                mode: Mode::Done,
                queue,
                max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
                spill: Vec::new(),
            }
        }
    }
}

/// The events of a file's decompressed `bytes` held in memory, split exactly as [`records`]
/// splits a file on disk (JSON Lines or one document, blank lines, BOM, CRLF, oversized
/// records); `display` names the file in the records' locations. For tools and tests that
/// hold a file's bytes, not its path (the fuzz targets: [`crate::pipeline::process_bytes`]).
pub fn records_in(display: Arc<str>, bytes: Vec<u8>) -> RecordReader {
    RecordReader::over(
        display,
        Opened {
            reader: Box::new(std::io::Cursor::new(bytes)),
            compression: Compression::None,
            compressed_read: Arc::new(AtomicU64::new(0)),
        },
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Sniff,
    Lines,
    Done,
}

/// Iterator over a file's [`RecordEvent`]s.
pub struct RecordReader {
    path: Arc<str>,
    reader: Option<Box<dyn BufRead + Send>>,
    compression: Compression,
    compressed_read: Arc<AtomicU64>,
    line: u64,
    offset: u64,
    mode: Mode,
    queue: VecDeque<RecordEvent>,
    /// A longer record (or JSON document) is yielded as oversized, never buffered whole.
    max_record_bytes: u64,
    /// The bytes of a line that spans buffer refills, reused from line to line.
    spill: Vec<u8>,
}

/// `spill` grown past this by one long line is freed after it.
const SPILL_KEEP: usize = 16 << 20;

/// One physical line as read, or the error that stopped reading.
enum ReadLine {
    Line {
        bytes: Vec<u8>,
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
    Eof,
    Error {
        partial: Vec<u8>,
        line: u64,
        offset: u64,
        message: String,
    },
}

impl RecordReader {
    /// The records of an opened stream, named `path` in their locations.
    fn over(path: Arc<str>, opened: Opened) -> RecordReader {
        RecordReader {
            path,
            reader: Some(opened.reader),
            compression: opened.compression,
            compressed_read: opened.compressed_read,
            line: 0,
            offset: 0,
            mode: Mode::Sniff,
            queue: VecDeque::new(),
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            spill: Vec::new(),
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

    /// Records longer than `limit` bytes are yielded as oversized (`--max-record-bytes`).
    pub fn max_record_bytes(mut self, limit: u64) -> RecordReader {
        self.max_record_bytes = limit;
        self
    }

    /// The next line. A line is buffered up to the limit (plus its CRLF) only; past it, the
    /// rest is skipped to the line's end and the line is [`ReadLine::Oversized`].
    fn read_line(&mut self) -> ReadLine {
        let Some(reader) = self.reader.as_mut() else {
            return ReadLine::Eof;
        };
        let keep = usize::try_from(self.max_record_bytes.saturating_add(2)).unwrap_or(usize::MAX);
        // A line that spans buffer refills is gathered in `spill` (kept from line to line) and
        // copied out once at its size: growing a fresh vector per line cost reallocations and
        // freshly zeroed pages on the reader thread.
        let buf = &mut self.spill;
        buf.clear();
        let mut size = 0u64;
        let start = self.offset;
        let mut whole_chunk = None;
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
            let room = keep.saturating_sub(buf.len()).min(used);
            if ends && size == 0 && room == used {
                // The common case: the whole line is in the buffer.
                whole_chunk = Some(available[..used].to_vec());
            } else {
                buf.extend_from_slice(&available[..room]);
            }
            reader.consume(used);
            size += used as u64;
            if ends {
                break None;
            }
        };
        let mut buf = whole_chunk.unwrap_or_else(|| {
            let gathered = self.spill.as_slice().to_vec();
            if self.spill.capacity() > SPILL_KEEP {
                self.spill = Vec::new();
            }
            gathered
        });
        if let Some(err) = error {
            self.offset += size;
            self.line += 1;
            return ReadLine::Error {
                partial: buf,
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
        let whole = buf.len() as u64 == size;
        if whole && strip_line(&buf, start == 0).len() as u64 <= self.max_record_bytes {
            return ReadLine::Line {
                bytes: buf,
                line: self.line,
                offset: start,
            };
        }
        buf.truncate(OVERSIZED_HEAD);
        ReadLine::Oversized {
            head: buf,
            size,
            line: self.line,
            offset: start,
        }
    }

    /// The event of an oversized record: its first bytes, marked with its size.
    fn oversized(&self, head: &[u8], size: u64, line: u64, offset: u64) -> RecordEvent {
        let stripped = strip_line(head, offset == 0);
        RecordEvent::Record(RawRecord {
            location: self.location(line, offset, None),
            bytes: stripped[..stripped.len().min(OVERSIZED_HEAD)].to_vec(),
            truncated: false,
            oversized: Some(size),
            id: Default::default(),
        })
    }

    fn damage(&mut self, partial: Vec<u8>, line: u64, offset: u64, message: String) {
        let location = self.location(line, offset, None);
        let stripped = strip_line(&partial, offset == 0);
        if !stripped.iter().all(u8::is_ascii_whitespace) {
            self.queue.push_back(RecordEvent::Record(RawRecord {
                location: location.clone(),
                bytes: stripped.to_vec(),
                truncated: true,
                oversized: None,
                id: Default::default(),
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
    fn line_event(&self, mut bytes: Vec<u8>, line: u64, offset: u64) -> RecordEvent {
        let stripped = strip_line(&bytes, offset == 0);
        if stripped.iter().all(u8::is_ascii_whitespace) {
            return RecordEvent::Blank;
        }
        let start = stripped.as_ptr() as usize - bytes.as_ptr() as usize;
        bytes.truncate(start + stripped.len());
        bytes.drain(..start);
        RecordEvent::Record(RawRecord {
            location: self.location(line, offset, None),
            bytes,
            truncated: false,
            oversized: None,
            id: Default::default(),
        })
    }

    /// Decides between JSON Lines and one document on the first non-blank line.
    fn sniff(&mut self) {
        let mut head: Vec<(Vec<u8>, u64, u64)> = Vec::new();
        loop {
            match self.read_line() {
                ReadLine::Eof => {
                    self.mode = Mode::Done;
                    for (bytes, line, offset) in head {
                        let event = self.line_event(bytes, line, offset);
                        self.queue.push_back(event);
                    }
                    return;
                }
                ReadLine::Error {
                    partial,
                    line,
                    offset,
                    message,
                } => {
                    for (bytes, line, offset) in std::mem::take(&mut head) {
                        let event = self.line_event(bytes, line, offset);
                        self.queue.push_back(event);
                    }
                    self.damage(partial, line, offset, message);
                    return;
                }
                ReadLine::Oversized {
                    head: first,
                    size,
                    line,
                    offset,
                } => {
                    // Too long to be read as the start of a document: JSON Lines.
                    self.mode = Mode::Lines;
                    for (bytes, line, offset) in std::mem::take(&mut head) {
                        let event = self.line_event(bytes, line, offset);
                        self.queue.push_back(event);
                    }
                    let event = self.oversized(&first, size, line, offset);
                    self.queue.push_back(event);
                    return;
                }
                ReadLine::Line {
                    bytes,
                    line,
                    offset,
                } => {
                    let stripped = strip_line(&bytes, offset == 0);
                    if stripped.iter().all(u8::is_ascii_whitespace) {
                        head.push((bytes, line, offset));
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
                    head.push((bytes, line, offset));
                    if complete || !opens_document {
                        self.mode = Mode::Lines;
                        for (bytes, line, offset) in head {
                            let event = self.line_event(bytes, line, offset);
                            self.queue.push_back(event);
                        }
                    } else {
                        self.read_document(head);
                    }
                    return;
                }
            }
        }
    }

    /// Reads the rest of the file as one JSON document; falls back to lines if it is not one.
    fn read_document(&mut self, head: Vec<(Vec<u8>, u64, u64)>) {
        let mut lines = head;
        let mut damage = None;
        let mut size: u64 = lines.iter().map(|(b, _, _)| b.len() as u64).sum();
        loop {
            if size > self.max_record_bytes {
                self.oversized_document(lines, size);
                return;
            }
            match self.read_line() {
                ReadLine::Line {
                    bytes,
                    line,
                    offset,
                } => {
                    size += bytes.len() as u64;
                    lines.push((bytes, line, offset));
                }
                ReadLine::Oversized {
                    head, size: more, ..
                } => {
                    size += more;
                    lines.push((head, 0, 0));
                }
                ReadLine::Eof => break,
                ReadLine::Error {
                    partial,
                    line,
                    offset,
                    message,
                } => {
                    damage = Some((partial, line, offset, message));
                    break;
                }
            }
        }
        let mut doc = Vec::with_capacity(lines.iter().map(|(b, _, _)| b.len()).sum());
        for (bytes, _, offset) in &lines {
            if *offset == 0 && bytes.starts_with(BOM) {
                doc.extend_from_slice(&bytes[BOM.len()..]);
            } else {
                doc.extend_from_slice(bytes);
            }
        }
        let bom = lines
            .first()
            .map(|(b, _, o)| *o == 0 && b.starts_with(BOM))
            .unwrap_or(false);
        let doc_start = if bom { BOM.len() as u64 } else { 0 };
        let first_line = lines.first().map(|(_, l, _)| *l).unwrap_or(1);
        if let Some((partial, line, offset, message)) = damage {
            // A first line cut or corrupt at its end still starts with `{`. If other lines
            // are complete JSON objects on their own, this is JSON Lines, not a document:
            // read it as lines, so that the records before the damage are converted (as
            // the undamaged fallback below does).
            let lines_evidence = lines.iter().any(|(bytes, _, offset)| {
                let stripped = strip_line(bytes, *offset == 0).trim_ascii();
                stripped.first() == Some(&b'{') && is_json_value(stripped)
            });
            if lines_evidence {
                for (bytes, line, offset) in lines {
                    let event = self.line_event(bytes, line, offset);
                    self.queue.push_back(event);
                }
                self.damage(partial, line, offset, message);
                return;
            }
            // A document cut by damage is one truncated record: report it whole.
            doc.extend_from_slice(&partial);
            let trimmed = doc.trim_ascii();
            if !trimmed.is_empty() {
                self.queue.push_back(RecordEvent::Record(RawRecord {
                    location: self.location(first_line, doc_start, None),
                    bytes: trimmed.to_vec(),
                    truncated: true,
                    oversized: None,
                    id: Default::default(),
                }));
            }
            self.damage(Vec::new(), line, offset, message);
            return;
        }
        self.mode = Mode::Done;
        self.reader = None;
        match split_document(&doc) {
            Some(spans) => {
                for (start, end, element) in spans {
                    let line = first_line + count_newlines(&doc[..start]);
                    self.queue.push_back(RecordEvent::Record(RawRecord {
                        location: self.location(line, doc_start + start as u64, element),
                        bytes: doc[start..end].to_vec(),
                        truncated: false,
                        oversized: None,
                        id: Default::default(),
                    }));
                }
            }
            None => {
                for (bytes, line, offset) in lines {
                    let event = self.line_event(bytes, line, offset);
                    self.queue.push_back(event);
                }
            }
        }
    }

    /// A JSON document over the limit: one oversized record at its first line, the rest of
    /// the file skipped unbuffered (a damage there still ends it with a [`Damage`]).
    fn oversized_document(&mut self, lines: Vec<(Vec<u8>, u64, u64)>, mut size: u64) {
        let first_line = lines.first().map(|(_, l, _)| *l).unwrap_or(1);
        let mut head: Vec<u8> = Vec::with_capacity(OVERSIZED_HEAD);
        for (bytes, _, _) in &lines {
            let room = OVERSIZED_HEAD.saturating_sub(head.len()).min(bytes.len());
            head.extend_from_slice(&bytes[..room]);
        }
        drop(lines);
        let limit = std::mem::replace(&mut self.max_record_bytes, 0);
        let mut damage = None;
        loop {
            match self.read_line() {
                ReadLine::Eof => break,
                ReadLine::Line { bytes, .. } => size += bytes.len() as u64,
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
        let event = self.oversized(&head, size, first_line, 0);
        self.queue.push_back(event);
        self.mode = Mode::Done;
        match damage {
            Some((line, offset, message)) => self.damage(Vec::new(), line, offset, message),
            None => self.reader = None,
        }
    }
}

impl Iterator for RecordReader {
    type Item = RecordEvent;

    fn next(&mut self) -> Option<RecordEvent> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            match self.mode {
                Mode::Done => return None,
                Mode::Sniff => self.sniff(),
                Mode::Lines => match self.read_line() {
                    ReadLine::Eof => self.mode = Mode::Done,
                    ReadLine::Line {
                        bytes,
                        line,
                        offset,
                    } => return Some(self.line_event(bytes, line, offset)),
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

/// Removes the line ending (LF or CRLF) and, at the start of a file, a UTF-8 BOM.
fn strip_line(bytes: &[u8], file_start: bool) -> &[u8] {
    let mut s = bytes;
    if file_start && s.starts_with(BOM) {
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

/// Splits a whole JSON document into record spans `(start, end, element)`. Several documents
/// one after another (`jq .` output) are one record each. `None` when the bytes are neither.
fn split_document(doc: &[u8]) -> Option<Vec<(usize, usize, Option<usize>)>> {
    let base = doc.as_ptr() as usize;
    let whole: &RawValue = match serde_json::from_slice(doc) {
        Ok(whole) => whole,
        Err(_) => {
            let values = serde_json::Deserializer::from_slice(doc)
                .into_iter::<&RawValue>()
                .collect::<Result<Vec<_>, _>>()
                .ok()?;
            if values.len() < 2 {
                return None;
            }
            return Some(
                values
                    .iter()
                    .map(|raw| {
                        let start = raw.get().as_ptr() as usize - base;
                        (start, start + raw.get().len(), None)
                    })
                    .collect(),
            );
        }
    };
    let span = |raw: &RawValue| {
        let start = raw.get().as_ptr() as usize - base;
        (start, start + raw.get().len())
    };
    if whole.get().starts_with('[') {
        let elements: Vec<&RawValue> = serde_json::from_str(whole.get()).ok()?;
        let is_message_list = elements
            .first()
            .map(|first| looks_like_message(first.get()))
            .unwrap_or(false);
        if !is_message_list && !elements.is_empty() {
            return Some(
                elements
                    .iter()
                    .enumerate()
                    .map(|(i, raw)| {
                        let (start, end) = span(raw);
                        (start, end, Some(i))
                    })
                    .collect(),
            );
        }
    }
    let (start, end) = span(whole);
    Some(vec![(start, end, None)])
}

/// A chat message object: has a string `role`.
fn looks_like_message(json: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        role: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_str::<Probe>(json)
        .map(|p| p.role.is_some())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_array_splits_into_elements_with_lines() {
        let doc = b"[\n  {\"a\": 1},\n  {\"b\": 2}\n]\n";
        let spans = split_document(doc).unwrap();
        assert_eq!(spans.len(), 2);
        assert_eq!(&doc[spans[1].0..spans[1].1], b"{\"b\": 2}");
        assert_eq!(count_newlines(&doc[..spans[1].0]), 2);
    }

    #[test]
    fn concatenated_documents_are_one_record_each() {
        let doc = b"{\n  \"a\": 1\n}\n{\n  \"b\": 2\n}\n";
        let spans = split_document(doc).unwrap();
        assert_eq!(spans.len(), 2);
        assert_eq!(&doc[spans[1].0..spans[1].1], b"{\n  \"b\": 2\n}");
        assert_eq!(split_document(b"{\"a\": 1} {\"b\""), None);
    }

    #[test]
    fn message_array_is_one_record() {
        let doc = br#"[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]"#;
        assert_eq!(split_document(doc).unwrap(), vec![(0, doc.len(), None)]);
    }

    #[test]
    fn strip_handles_bom_and_crlf() {
        assert_eq!(strip_line(b"\xEF\xBB\xBF{}\r\n", true), b"{}");
        assert_eq!(strip_line(b"{}\r\n", false), b"{}");
    }
}
