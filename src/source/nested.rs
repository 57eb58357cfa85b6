//! The elements of the arrays at a key path inside JSON documents, read one at a time from a
//! stream: an OTLP trace export (`{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}`)
//! yields its spans, never the document, so a file of any number of traces is held one span
//! at a time.
//!
//! In: a [`BufRead`] at the first byte of a sequence of documents (one document, JSON Lines of
//! them, or pretty-printed ones one after another). Out: each element of the innermost array
//! as an [`Element`] (its exact bytes, offset, line, and its index among the stream's
//! elements), a longer one as [`Element::Oversized`]; the other members of the objects on the
//! way (`resource`, `scope`, `schemaUrl`) are skipped unbuffered; a document that is not an
//! object is yielded whole, as one value. Where the stream stops being JSON, an
//! [`Element::Broken`] ends it. Time is linear in the stream and nothing is recursive: the
//! path's depth is fixed, whatever the input's.

use std::io::BufRead;

use super::elements::{Element, Elements, Framing};

/// The path of an OTLP trace export's spans: each key names an array of objects, the last
/// one the array whose elements are yielded.
pub(crate) const OTLP_SPANS: [&[u8]; 3] = [b"resourceSpans", b"scopeSpans", b"spans"];

/// Where the walk is: in an object of the path (its level), or in an array of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    Object(usize),
    Array(usize),
}

/// What comes next inside the innermost frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// After `{` or `[`: a member or element, or the frame's end.
    First,
    /// After `,`: a member or element.
    Next,
    /// After a member or element: `,` or the frame's end.
    After,
}

/// Iterator over the elements at `path` (see the module docs).
pub(crate) struct Nested<R> {
    scan: Elements<R>,
    path: &'static [&'static [u8]],
    frames: Vec<Frame>,
    expect: Expect,
    /// Elements yielded so far.
    index: usize,
    done: bool,
}

impl<R: BufRead> Nested<R> {
    pub(crate) fn new(reader: R, path: &'static [&'static [u8]], limit: u64) -> Nested<R> {
        Nested {
            scan: Elements::new(reader, Framing::Sequence, limit),
            path,
            frames: Vec::with_capacity(2 * path.len() + 1),
            expect: Expect::First,
            index: 0,
            done: false,
        }
    }

    fn broken(&mut self, message: &str) -> Option<Element> {
        self.done = true;
        Some(Element::Broken {
            offset: self.scan.offset(),
            line: self.scan.line(),
            message: message.to_string(),
        })
    }

    /// A value of the stream, its bytes kept or not; a broken one ends the walk.
    fn value(&mut self, kept: bool) -> Result<Element, Option<Element>> {
        match self.scan.value_kept(kept) {
            Some(broken @ Element::Broken { .. }) => {
                self.done = true;
                Err(Some(broken))
            }
            Some(element) => Ok(element),
            None => Err(self.broken("the JSON ends inside a value")),
        }
    }

    /// One step of the walk: `Some` to yield, `None` to go on (`done` once it ended).
    fn step(&mut self) -> Option<Option<Element>> {
        let next = match self.scan.skip_space() {
            Ok(next) => next,
            Err(err) => {
                self.done = true;
                return Some(Some(Element::Broken {
                    offset: self.scan.offset(),
                    line: self.scan.line(),
                    message: err.to_string(),
                }));
            }
        };
        let Some(byte) = next else {
            self.done = true;
            if self.frames.is_empty() {
                return Some(None);
            }
            return Some(self.broken("the JSON ends inside a document"));
        };
        let Some(&frame) = self.frames.last() else {
            // Between documents.
            if byte == b'{' {
                self.scan.take_byte();
                self.frames.push(Frame::Object(0));
                self.expect = Expect::First;
                return None;
            }
            // A value cannot start here; reading one would consume nothing.
            if matches!(byte, b',' | b':' | b'}' | b']') {
                return Some(self.broken("expected a JSON value"));
            }
            return Some(match self.value(true) {
                Ok(mut element) => {
                    if let Element::Value { index, .. } | Element::Oversized { index, .. } =
                        &mut element
                    {
                        *index = None;
                    }
                    Some(element)
                }
                Err(broken) => broken,
            });
        };
        match (frame, self.expect, byte) {
            (Frame::Object(_), Expect::First | Expect::After, b'}')
            | (Frame::Array(_), Expect::First | Expect::After, b']') => {
                self.scan.take_byte();
                self.frames.pop();
                self.expect = Expect::After;
                None
            }
            (_, Expect::After, b',') => {
                self.scan.take_byte();
                self.expect = Expect::Next;
                None
            }
            (Frame::Object(_), Expect::After, _) => {
                Some(self.broken("expected `,` or `}` after a member"))
            }
            (Frame::Array(_), Expect::After, _) => {
                Some(self.broken("expected `,` or `]` after an element"))
            }
            (Frame::Object(level), Expect::First | Expect::Next, b'"') => {
                let key = match self.value(true) {
                    Ok(Element::Value { bytes, .. }) => bytes,
                    Ok(Element::Oversized { .. }) => Vec::new(),
                    Ok(Element::Broken { .. }) => return Some(self.broken("broken key")),
                    Err(broken) => return Some(broken),
                };
                match self.scan.skip_space() {
                    Ok(Some(b':')) => self.scan.take_byte(),
                    Ok(_) | Err(_) => return Some(self.broken("expected `:` after a key")),
                }
                if self.scan.skip_space().ok().flatten().is_none() {
                    return Some(self.broken("the JSON ends inside a document"));
                }
                let on_path = self.path.get(level).is_some_and(|want| {
                    key.len() == want.len() + 2 && &key[1..key.len() - 1] == *want
                });
                if on_path && self.scan.peek() == Some(b'[') {
                    self.scan.take_byte();
                    self.frames.push(Frame::Array(level));
                    self.expect = Expect::First;
                    return None;
                }
                self.expect = Expect::After;
                self.value(false).err()
            }
            (Frame::Object(_), Expect::First | Expect::Next, _) => {
                Some(self.broken("expected a key in an object"))
            }
            (Frame::Array(level), Expect::First | Expect::Next, _) => {
                self.expect = Expect::After;
                if matches!(byte, b',' | b':' | b'}' | b']') {
                    return Some(self.broken("expected a JSON value"));
                }
                if level + 1 < self.path.len() {
                    if byte == b'{' {
                        self.scan.take_byte();
                        self.frames.push(Frame::Object(level + 1));
                        self.expect = Expect::First;
                        return None;
                    }
                    return self.value(false).err();
                }
                let index = self.index;
                self.index += 1;
                Some(match self.value(true) {
                    Ok(mut element) => {
                        if let Element::Value { index: at, .. }
                        | Element::Oversized { index: at, .. } = &mut element
                        {
                            *at = Some(index);
                        }
                        Some(element)
                    }
                    Err(broken) => broken,
                })
            }
        }
    }
}

impl<R: BufRead> Iterator for Nested<R> {
    type Item = Element;

    fn next(&mut self) -> Option<Element> {
        while !self.done {
            if let Some(event) = self.step() {
                return event;
            }
        }
        None
    }
}

/// Whether `head` (a stream's first bytes, after any BOM) opens a document whose first key is
/// `path[0]`: `{`, white space, `"resourceSpans"`. `false` when the head is too short to tell.
pub(crate) fn opens_path(head: &[u8], path: &[&[u8]]) -> bool {
    let Some(first) = path.first() else {
        return false;
    };
    let rest = head.trim_ascii_start();
    let Some(rest) = rest.strip_prefix(b"{") else {
        return false;
    };
    let Some(rest) = rest.trim_ascii_start().strip_prefix(b"\"") else {
        return false;
    };
    rest.strip_prefix(*first)
        .is_some_and(|r| r.first() == Some(&b'"'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(doc: &str) -> Vec<String> {
        Nested::new(doc.as_bytes(), &OTLP_SPANS, 1 << 20)
            .map(|e| match e {
                Element::Value {
                    bytes,
                    offset,
                    line,
                    index,
                } => format!(
                    "{} @{offset} L{line} #{index:?}",
                    String::from_utf8_lossy(&bytes)
                ),
                Element::Oversized { size, index, .. } => format!("oversized {size} #{index:?}"),
                Element::Broken { message, .. } => format!("broken: {message}"),
            })
            .collect()
    }

    #[test]
    fn the_spans_of_every_document_in_order_and_nothing_else() {
        let doc = concat!(
            r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"spans","value":{"stringValue":"]"}}]},"#,
            r#""scopeSpans":[{"scope":{"name":"x"},"spans":[{"traceId":"a","n":[1,{"b":"}"}]},{"traceId":"b"}]},{"spans":[]}]}]}"#,
            "\n",
            "{\n  \"resourceSpans\": [ { \"scopeSpans\": [ { \"spans\": [\n    {\"traceId\": \"c\"}\n  ] } ] } ],\n  \"extra\": 1\n}\n"
        );
        assert_eq!(
            walk(doc),
            vec![
                r#"{"traceId":"a","n":[1,{"b":"}"}]} @136 L0 #Some(0)"#.to_string(),
                r#"{"traceId":"b"} @170 L0 #Some(1)"#.to_string(),
                r#"{"traceId": "c"} @263 L3 #Some(2)"#.to_string(),
            ]
        );
    }

    #[test]
    fn a_document_off_the_path_is_one_value_and_a_broken_one_ends_the_walk() {
        assert_eq!(walk("[1,2] 3"), vec!["[1,2] @0 L0 #None", "3 @6 L0 #None"]);
        for (doc, message) in [
            (
                r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"a":1}"#,
                "ends inside",
            ),
            (
                r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"a":1} {"b":2}]}]}]}"#,
                "expected `,` or `]`",
            ),
            (r#"{"resourceSpans" [] }"#, "expected `:`"),
            (
                r#"{"resourceSpans":[{"scopeSpans":[{"spans":[,]}]}]}"#,
                "expected a JSON value",
            ),
        ] {
            let got = walk(doc);
            assert!(
                got.last().is_some_and(|l| l.contains(message)),
                "{doc}: {got:?}"
            );
        }
    }

    #[test]
    fn only_a_document_opening_with_the_path_is_one() {
        assert!(opens_path(b"  {\n \"resourceSpans\" : [", &OTLP_SPANS));
        assert!(!opens_path(b"{\"resource\":1}", &OTLP_SPANS));
        assert!(!opens_path(b"{\"resourceSpansX\":1}", &OTLP_SPANS));
        assert!(!opens_path(b"[{\"resourceSpans\":1}]", &OTLP_SPANS));
        assert!(!opens_path(b"{", &OTLP_SPANS));
    }
}
