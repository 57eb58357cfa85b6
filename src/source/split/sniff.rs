//! What a file is, told from its first non-blank line: JSON Lines, one JSON document (an
//! object, an array of records, a sequence of values) or a stream of OTLP trace exports.

use super::*;
use document::Base;

impl RecordReader {
    /// Decides between JSON Lines and one document on the first non-blank line. Blank lines
    /// before it are counted, never stored: whether they are reported depends on the decision
    /// (a document's own white space is not), so they are owed until then.
    pub(super) fn sniff(&mut self) {
        if self.spans_of_trace_exports() {
            return;
        }
        self.sniffing = true;
        self.sniff_first();
        self.sniffing = false;
    }

    pub(super) fn sniff_first(&mut self) {
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
    pub(super) fn spans_of_trace_exports(&mut self) -> bool {
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
    pub(super) fn owe_blanks(&mut self) {
        self.owed_blanks += std::mem::take(&mut self.leading_blanks);
    }
}

/// `bytes` hold exactly one complete JSON value.
pub(super) fn is_json_value(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

/// A chat message object: has a `role`.
pub(super) fn looks_like_message(json: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        role: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Probe>(json)
        .map(|p| p.role.is_some())
        .unwrap_or(false)
}

/// `value` (one complete JSON value) is an array whose first element is not a chat message: an
/// array of records, one per element. An array of messages is one record; an empty array holds
/// no record (an export of nothing, not a conversation without messages).
pub(super) fn is_record_array(value: &[u8]) -> bool {
    if value.trim_ascii_start().first() != Some(&b'[') {
        return false;
    }
    match Elements::new(value, Framing::Array, u64::MAX).next() {
        Some(Element::Value { bytes, .. }) => !looks_like_message(&bytes),
        Some(Element::Oversized { .. } | Element::Broken { .. }) => false,
        None => true,
    }
}

/// `bytes` are two or more complete JSON values one after another (`jq .` output).
pub(super) fn is_json_sequence(bytes: &[u8]) -> bool {
    let mut count = 0usize;
    for value in serde_json::Deserializer::from_slice(bytes).into_iter::<serde::de::IgnoredAny>() {
        if value.is_err() {
            return false;
        }
        count += 1;
    }
    count >= 2
}
