//! A file read as one JSON document: held whole up to `--max-record-bytes` and split into its
//! elements, streamed element by element when longer, or read again as lines when it does not
//! parse.

use super::*;
use lines::count_newlines;
use sniff::{is_json_sequence, is_json_value, is_record_array, looks_like_message};

impl RecordReader {
    /// Reads the rest of the file as one JSON document whose first line is `first` (at `line`,
    /// byte `offset`), held in one buffer up to `--max-record-bytes`; falls back to lines if
    /// it is not one. A longer array is read element by element from the stream.
    pub(super) fn read_document(&mut self, first: Vec<u8>, line: u64, offset: u64) {
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
        let bom = bom_len(&doc, offset);
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
    pub(super) fn replay_lines(
        &mut self,
        doc: Vec<u8>,
        line: u64,
        offset: u64,
        error: Option<String>,
    ) {
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
    pub(super) fn damaged_document(
        &mut self,
        mut doc: Vec<u8>,
        base: Base,
        bom: usize,
        message: String,
    ) {
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
    pub(super) fn large_document(&mut self, doc: Vec<u8>, line: u64, offset: u64) {
        let bom = bom_len(&doc, offset);
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
    pub(super) fn stream_array(&mut self, head: Vec<u8>, line: u64, offset: u64) {
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
    pub(super) fn element_event(&mut self, element: Element, base: Base) {
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
            } => {
                self.reader = None;
                self.damage(Vec::new(), base.line + line, base.offset + offset, message);
            }
        }
    }
}

/// Where a document's first byte is in its file: the line (1-based) and byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Base {
    pub(super) line: u64,
    pub(super) offset: u64,
}

/// The length of the byte-order mark `doc` starts with, when it starts the stream (`offset`
/// 0): the JSON begins after it.
fn bom_len(doc: &[u8], offset: u64) -> usize {
    if offset == 0 && doc.starts_with(BOM) {
        BOM.len()
    } else {
        0
    }
}

/// Bytes read ahead, given once more from `at` and freed as soon as they are consumed: the
/// head of a document, before the rest of its stream, held no longer than it is needed.
pub(super) struct Consumed {
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

/// A document's bytes read again, then the read error that ended them the first time.
pub(super) struct Replay {
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
