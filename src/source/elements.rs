//! The values of a JSON array, or of a sequence of JSON values, read one at a time from a
//! stream: what is held is one value (at most the limit), never the document, and each byte
//! is looked at once, so a document of any size is read in linear time and bounded memory.
//!
//! In: a [`BufRead`] positioned at the document's first byte. Out: each value's exact bytes,
//! from its first character to its last (as `serde_json::value::RawValue` spans it), with the
//! byte offset and the line (newlines before it) where it starts; a value longer than the
//! limit as its first [`OVERSIZED_HEAD`] bytes and its size, the rest skipped unbuffered;
//! and the place where the stream stops being a JSON array ([`Element::Broken`]). A value is
//! framed by its brackets, quotes and delimiters, not validated: the record's own parse says
//! what is wrong inside it.

use std::io::{self, BufRead};

use super::split::{gather, Blocks, OVERSIZED_HEAD};

/// A value's first bytes are gathered in one buffer, the rest in [`Blocks`].
const HEAD_BYTES: usize = 16 << 20;

/// How the values are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `[v, v, ...]`: the array's elements (a document that is not an array is one value).
    Array,
    /// `v v ...`: values one after another, separated by white space (`jq .` output).
    Sequence,
}

/// One value, or where the stream stops being readable.
#[derive(Debug)]
pub(crate) enum Element {
    Value {
        bytes: Vec<u8>,
        offset: u64,
        /// Newlines before the value in the stream.
        line: u64,
        /// Its index among the array's elements (`None` for the only value of a stream that
        /// is not an array, and for a sequence's values).
        index: Option<usize>,
    },
    Oversized {
        head: Vec<u8>,
        size: u64,
        offset: u64,
        line: u64,
        index: Option<usize>,
    },
    /// The stream is not JSON here, ends inside a value or cannot be read: nothing after it
    /// is read.
    Broken {
        offset: u64,
        line: u64,
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    /// After `[` or `,`: a value comes.
    Value,
    /// After a value: `,`, `]` (or, in a sequence, the next value) comes.
    After,
    /// After the array's `]`: only white space may follow.
    Closed,
    Done,
}

/// Iterator over the values of a stream (see the module docs).
pub(crate) struct Elements<R> {
    reader: R,
    framing: Framing,
    /// A longer value is [`Element::Oversized`].
    limit: u64,
    offset: u64,
    line: u64,
    index: usize,
    /// The stream is one value, not an array: it has no index.
    single: bool,
    state: State,
}

impl<R: BufRead> Elements<R> {
    pub(crate) fn new(reader: R, framing: Framing, limit: u64) -> Elements<R> {
        Elements {
            reader,
            framing,
            limit,
            offset: 0,
            line: 0,
            index: 0,
            single: false,
            state: State::Start,
        }
    }

    /// Bytes consumed so far.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Newlines consumed so far.
    pub(super) fn line(&self) -> u64 {
        self.line
    }

    /// The next byte, not consumed (`None` at the stream's end or a read error).
    pub(super) fn peek(&mut self) -> Option<u8> {
        loop {
            match self.reader.fill_buf() {
                Ok(buf) => return buf.first().copied(),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            }
        }
    }

    /// Reads the rest of the stream without keeping it: its size in bytes, and the read error
    /// that ended it early, if one did.
    pub(crate) fn skip_rest(&mut self) -> (u64, Option<io::Error>) {
        self.state = State::Done;
        let mut size = 0u64;
        loop {
            let n = match self.reader.fill_buf() {
                Ok(buf) => buf.len(),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return (size, Some(err)),
            };
            if n == 0 {
                return (size, None);
            }
            self.reader.consume(n);
            size += n as u64;
            self.offset += n as u64;
        }
    }

    fn broken(&mut self, message: impl Into<String>) -> Option<Element> {
        let (offset, line) = (self.offset, self.line);
        self.broken_at(offset, line, message)
    }

    fn broken_at(&mut self, offset: u64, line: u64, message: impl Into<String>) -> Option<Element> {
        self.state = State::Done;
        Some(Element::Broken {
            offset,
            line,
            message: message.into(),
        })
    }

    /// Skips white space; the next byte, not consumed (`None` at the end of the stream).
    pub(super) fn skip_space(&mut self) -> io::Result<Option<u8>> {
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            };
            if buf.is_empty() {
                return Ok(None);
            }
            let space = buf
                .iter()
                .position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
                .unwrap_or(buf.len());
            let newlines = memchr::memchr_iter(b'\n', &buf[..space]).count() as u64;
            let next = buf.get(space).copied();
            self.reader.consume(space);
            self.offset += space as u64;
            self.line += newlines;
            if next.is_some() {
                return Ok(next);
            }
        }
    }

    pub(super) fn take_byte(&mut self) {
        self.reader.consume(1);
        self.offset += 1;
    }

    /// Reads one value starting at the next byte (a value's first byte, checked).
    fn value(&mut self) -> Option<Element> {
        self.value_kept(true)
    }

    /// Reads one value starting at the next byte; its bytes are not kept unless `kept` (a
    /// value skipped: an empty [`Element::Value`], or [`Element::Oversized`] past the limit).
    /// For a walker of a document's inner arrays ([`super::nested`]).
    pub(super) fn value_kept(&mut self, kept: bool) -> Option<Element> {
        let (offset, line) = (self.offset, self.line);
        let index = (!self.single && self.framing == Framing::Array).then_some(self.index);
        self.index += 1;
        // Enough to tell a value under the limit, and the head of one over it.
        let keep = if kept {
            usize::try_from(self.limit.saturating_add(1).max(OVERSIZED_HEAD as u64))
                .unwrap_or(usize::MAX)
        } else {
            0
        };
        // The first bytes in one buffer, the rest of a long value in blocks of one size.
        let mut bytes: Vec<u8> = Vec::new();
        let mut blocks = Blocks::default();
        let mut size = 0u64;
        let mut depth = 0u64;
        let mut in_string = false;
        let mut escape = false;
        let mut ended = false;
        while !ended {
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return self.broken(err.to_string()),
            };
            if buf.is_empty() {
                if in_string || depth > 0 {
                    return self.broken_at(offset, line, "the JSON ends inside a value");
                }
                break;
            }
            let mut newlines = 0u64;
            let mut i = 0;
            while i < buf.len() {
                if in_string {
                    if escape {
                        escape = false;
                        i += 1;
                        continue;
                    }
                    match memchr::memchr2(b'"', b'\\', &buf[i..]) {
                        None => {
                            newlines += memchr::memchr_iter(b'\n', &buf[i..]).count() as u64;
                            i = buf.len();
                        }
                        Some(at) => {
                            newlines += memchr::memchr_iter(b'\n', &buf[i..i + at]).count() as u64;
                            i += at + 1;
                            if buf[i - 1] == b'\\' {
                                escape = true;
                            } else {
                                in_string = false;
                                if depth == 0 {
                                    ended = true;
                                    break;
                                }
                            }
                        }
                    }
                    continue;
                }
                match buf[i] {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if depth == 0 => {
                        // A scalar ended by its array's `]` (or a stray bracket, which the
                        // framing reports next).
                        ended = true;
                        break;
                    }
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            ended = true;
                            break;
                        }
                    }
                    b',' | b' ' | b'\t' | b'\r' | b'\n' if depth == 0 => {
                        ended = true;
                        break;
                    }
                    b'\n' => newlines += 1,
                    _ => {}
                }
                i += 1;
            }
            let room = keep.saturating_sub(bytes.len() + blocks.len()).min(i);
            let taken = &buf[..room];
            let into_head = HEAD_BYTES.saturating_sub(bytes.len()).min(taken.len());
            gather(&mut bytes, &taken[..into_head], HEAD_BYTES);
            blocks.push(&taken[into_head..]);
            if room < i {
                // Past the limit: only the head is kept.
                blocks = Blocks::default();
            }
            self.reader.consume(i);
            size += i as u64;
            self.offset += i as u64;
            self.line += newlines;
        }
        if size > self.limit {
            bytes.truncate(OVERSIZED_HEAD);
            bytes.shrink_to_fit();
            return Some(Element::Oversized {
                head: bytes,
                size,
                offset,
                line,
                index,
            });
        }
        if !blocks.is_empty() {
            blocks.append_to(&mut bytes);
        }
        Some(Element::Value {
            bytes,
            offset,
            line,
            index,
        })
    }
}

impl<R: BufRead> Iterator for Elements<R> {
    type Item = Element;

    fn next(&mut self) -> Option<Element> {
        loop {
            let next = match self.skip_space() {
                Ok(next) => next,
                Err(err) => return self.broken(err.to_string()),
            };
            match (self.state, next) {
                (State::Done, _) => return None,
                (State::Start, None) => {
                    self.state = State::Done;
                    return None;
                }
                (State::Start, Some(b'[')) if self.framing == Framing::Array => {
                    self.take_byte();
                    self.state = State::Value;
                    if self.skip_space().ok().flatten() == Some(b']') {
                        self.take_byte();
                        self.state = State::Closed;
                    }
                }
                (State::Start, Some(_)) => {
                    // A document that is not an array is one value; a sequence starts.
                    self.single = self.framing == Framing::Array;
                    self.state = match self.framing {
                        Framing::Array => State::Closed,
                        Framing::Sequence => State::After,
                    };
                    return self.checked_value();
                }
                (State::Value, None) | (State::After, None) if self.framing == Framing::Array => {
                    return self.broken("the JSON array is not closed")
                }
                (State::Value, None) | (State::After, None) | (State::Closed, None) => {
                    self.state = State::Done;
                    return None;
                }
                (State::Value, Some(_)) => {
                    self.state = State::After;
                    return self.checked_value();
                }
                (State::After, Some(b',')) if self.framing == Framing::Array => {
                    self.take_byte();
                    self.state = State::Value;
                }
                (State::After, Some(b']')) if self.framing == Framing::Array => {
                    self.take_byte();
                    self.state = State::Closed;
                }
                (State::After, Some(_)) if self.framing == Framing::Array => {
                    return self.broken("expected `,` or `]` after an element")
                }
                (State::After, Some(_)) => return self.checked_value(),
                (State::Closed, Some(_)) => {
                    return self.broken("more JSON after the document's end")
                }
            }
        }
    }
}

impl<R: BufRead> Elements<R> {
    /// A value, unless the next byte cannot start one (`]` after a `,`, a stray `:`).
    fn checked_value(&mut self) -> Option<Element> {
        let starts = self
            .reader
            .fill_buf()
            .ok()
            .and_then(|buf| buf.first().copied());
        match starts {
            Some(b']' | b'}' | b',' | b':') => self.broken("expected a JSON value"),
            Some(_) | None => self.value(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    fn spans(doc: &str, framing: Framing) -> Vec<(String, u64, u64, Option<usize>)> {
        Elements::new(doc.as_bytes(), framing, 1 << 20)
            .map(|e| match e {
                Element::Value {
                    bytes,
                    offset,
                    line,
                    index,
                } => (String::from_utf8(bytes).unwrap(), offset, line, index),
                other @ Element::Oversized { .. } | other @ Element::Broken { .. } => {
                    panic!("{other:?}")
                }
            })
            .collect()
    }

    /// The spans serde_json gives the same array's elements.
    fn serde_spans(doc: &str) -> Vec<(String, u64)> {
        let elements: Vec<&RawValue> = serde_json::from_str(doc).unwrap();
        elements
            .iter()
            .map(|raw| {
                let at = raw.get().as_ptr() as usize - doc.as_ptr() as usize;
                (raw.get().to_string(), at as u64)
            })
            .collect()
    }

    #[test]
    fn elements_are_the_spans_serde_json_gives() {
        let doc = "[\n  {\"a\": \"x]},\\\"\\\\\"},\n  [1, [2]] , 3.5e2,\"s\\\"\",true,null,\n{}]\n";
        let ours = spans(doc, Framing::Array);
        let theirs = serde_spans(doc);
        assert_eq!(
            ours.iter()
                .map(|(b, o, _, _)| (b.clone(), *o))
                .collect::<Vec<_>>(),
            theirs
        );
        assert_eq!(
            ours.iter().map(|(_, _, l, i)| (*l, *i)).collect::<Vec<_>>(),
            vec![
                (1, Some(0)),
                (2, Some(1)),
                (2, Some(2)),
                (2, Some(3)),
                (2, Some(4)),
                (2, Some(5)),
                (3, Some(6))
            ]
        );
    }

    #[test]
    fn a_document_that_is_not_an_array_is_one_value_and_a_sequence_several() {
        assert_eq!(
            spans(" {\"a\":[1]}\n", Framing::Array),
            vec![("{\"a\":[1]}".into(), 1, 0, None)]
        );
        assert_eq!(
            spans("{\"a\":1}\n{\n\"b\":2}[3]", Framing::Sequence),
            vec![
                ("{\"a\":1}".into(), 0, 0, None),
                ("{\n\"b\":2}".into(), 8, 1, None),
                ("[3]".into(), 16, 2, None)
            ]
        );
        assert!(spans("[ ]", Framing::Array).is_empty());
    }

    #[test]
    fn a_longer_value_is_its_head_and_size_and_the_next_is_read() {
        let doc = format!("[\"{}\", 1]", "x".repeat(5000));
        let mut elements = Elements::new(doc.as_bytes(), Framing::Array, 100);
        match elements.next() {
            Some(Element::Oversized { head, size, .. }) => {
                assert_eq!(head.len(), OVERSIZED_HEAD);
                assert_eq!(size, 5002);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(elements.next(), Some(Element::Value { bytes, .. }) if bytes == b"1"));
        assert!(elements.next().is_none());
    }

    #[test]
    fn a_broken_array_stops_where_it_breaks() {
        for (doc, message) in [
            ("[1, 2", "not closed"),
            ("[1,]", "expected a JSON value"),
            ("[1 2]", "expected `,` or `]`"),
            ("[1] x", "after the document's end"),
            ("[{\"a\": [1}", "ends inside a value"),
        ] {
            let last = Elements::new(doc.as_bytes(), Framing::Array, 100).last();
            match last {
                Some(Element::Broken { message: got, .. }) => {
                    assert!(got.contains(message), "{doc}: {got}")
                }
                other => panic!("{doc}: {other:?}"),
            }
        }
    }
}
