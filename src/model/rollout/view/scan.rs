//! The fast way in: one rollout line read by hand, straight into the fields the views need.
//!
//! This is a strict JSON reader with serde_json's acceptance (RFC 8259: its whitespace, string
//! escapes, control characters refused in strings, number grammar, nothing after the value)
//! that reads the line in one pass and fills [`RawLine`] and [`Fields`] as the serde-derived
//! reader it replaced did: the same fields of the same types, `null` as absent, unknown keys
//! skipped but still checked, a duplicate key or a field of another type refused. It is
//! stricter than serde in two ways, so that a line it reads needs no other check: a lone
//! surrogate escape is refused in every string (serde skips unread strings unchecked), and so
//! is nesting deeper than serde_json's limit (serde skips unread values at any depth). Refusing
//! a line is always safe: the caller then reads it the slow way, through a `Value`. Values only
//! type-checked are skipped without being copied; a kept string is borrowed from the line
//! unless it holds escapes.
//!
//! Why by hand: serde's visitors cost ~4,600 instructions a line (a field-name match per key,
//! a visitor per value, a `RawValue` per skipped value), a quarter of a whole conversion of
//! small chat records; this reader spends its time in the string scan. Tests compare it with
//! the serde reader on every shape (`view::tests`), including random and damaged lines.

use std::borrow::Cow;

use super::{Fields, Kind, LineView, Obj, PartView, RawBaseInstructions, RawLine, Text};
use crate::model::json;
use crate::model::rollout::wire;

/// The nesting limit the validator holds lines to (serde_json's, which Codex has): a line
/// nested deeper is refused here, and the slow way says why.
const MAX_DEPTH: usize = 128;

/// The depth of a payload's values (inside the line and the payload).
const PAYLOAD_DEPTH: usize = 2;

/// Reads `raw` (one line, no newline) the fast way; `None` when it is not JSON, not an
/// object, or has a shape the slow way must read.
///
/// The line and its payload are filled in place, and the line becomes its view here: moved
/// through the readers' `Option`s, the payload's fields (a few hundred bytes) were copied
/// five times a line, ~3 % of a conversion of small records.
pub(super) fn line(raw: &str) -> Option<LineView<'_>> {
    let mut s = Scanner {
        text: raw,
        at: 0,
        plain: no_controls(raw.as_bytes()),
    };
    s.ws();
    let mut line = RawLine::default();
    s.fill(&mut line, |s, line, seen, key| {
        match key {
            wire::line::TIMESTAMP => line.timestamp = seen.field(0, || s.opt_text())?,
            wire::line::TYPE => line.tag = seen.field(1, || s.opt_text())?,
            wire::line::PAYLOAD => seen.field(2, || s.payload(&mut line.payload))?,
            _ => s.skip(1)?,
        }
        Some(())
    })?;
    s.ws();
    if s.at != raw.len() {
        return None;
    }
    Some(line.into_view())
}

/// Which fields of one object were read: serde refuses a field given twice.
#[derive(Default)]
struct Seen(u32);

impl Seen {
    /// Reads field number `field` with `read`, or refuses it the second time.
    #[inline(always)]
    fn field<T>(&mut self, field: u32, read: impl FnOnce() -> Option<T>) -> Option<T> {
        let bit = 1 << field;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        read()
    }
}

struct Scanner<'a> {
    text: &'a str,
    at: usize,
    /// The line holds no control character (the case of every line serde_json writes, which
    /// escapes them all): a string ends at its first `"` or `\`, found with SIMD.
    plain: bool,
}

/// A string as it stands in the line: its bytes between the quotes, and whether they hold
/// escapes (then they are not the string's text).
struct RawString<'a> {
    inner: &'a str,
    escaped: bool,
}

impl<'a> RawString<'a> {
    #[inline(always)]
    fn text(self) -> Option<Cow<'a, str>> {
        if self.escaped {
            unescape(self.inner).map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(self.inner))
        }
    }
}

impl<'a> Scanner<'a> {
    #[inline(always)]
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    /// serde_json's whitespace: space, tab, newline, carriage return.
    #[inline(always)]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    #[inline(always)]
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// After whitespace: true (and the `null` read) when the value is `null`.
    #[inline(always)]
    fn null(&mut self) -> Option<bool> {
        self.ws();
        if self.peek()? != b'n' {
            return Some(false);
        }
        self.literal(b"null")?;
        Some(true)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes().get(self.at..end)? == word).then(|| self.at = end)
    }

    /// The members of an object, each value left to `member` (called after the colon).
    fn object(&mut self, mut member: impl FnMut(&mut Self, &str) -> Option<()>) -> Option<()> {
        self.sequence(b'{', b'}', |s| {
            let key = s.string()?.text()?;
            s.ws();
            s.eat(b':')?;
            s.ws();
            member(s, &key)
        })
    }

    /// An object read into a new `T` (see [`Scanner::fill`]).
    #[inline(always)]
    fn record<T: Default>(
        &mut self,
        member: impl FnMut(&mut Self, &mut T, &mut Seen, &str) -> Option<()>,
    ) -> Option<T> {
        let mut read = T::default();
        self.fill(&mut read, member)?;
        Some(read)
    }

    /// An object read into `read`: `member` reads each key's value into it (or skips it),
    /// with the object's [`Seen`] to refuse a field given twice.
    #[inline(always)]
    fn fill<T>(
        &mut self,
        read: &mut T,
        mut member: impl FnMut(&mut Self, &mut T, &mut Seen, &str) -> Option<()>,
    ) -> Option<()> {
        let mut seen = Seen::default();
        self.object(|s, key| member(s, read, &mut seen, key))
    }

    /// The elements of an array, each left to `element`.
    fn array(&mut self, element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.sequence(b'[', b']', element)
    }

    /// `open`, then entries read by `entry` (after their leading whitespace) separated by
    /// commas, then `close`: an object's or an array's body. It may be empty; a trailing comma
    /// is refused.
    #[inline(always)]
    fn sequence(
        &mut self,
        open: u8,
        close: u8,
        mut entry: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.ws();
        self.eat(open)?;
        self.ws();
        if self.eat(close).is_some() {
            return Some(());
        }
        loop {
            self.ws();
            entry(self)?;
            self.ws();
            match self.peek()? {
                b',' => self.at += 1,
                byte if byte == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string value at the cursor (after its opening quote is checked), validated as
    /// serde_json validates a string it reads: no control character, only JSON's escapes, four
    /// hex digits after `\u`, surrogates in pairs.
    ///
    /// Most strings (keys, tags, roles, item types) end within their first 16 bytes: that
    /// case is read inline, the rest by [`Scanner::string_rest`].
    #[inline(always)]
    fn string(&mut self) -> Option<RawString<'a>> {
        self.eat(b'"')?;
        let start = self.at;
        let bytes = self.bytes();
        // The first special byte within the first two words, if any.
        let first = match word_at(bytes, start).map(json::escape_mask) {
            Some(0) => word_at(bytes, start + 8)
                .and_then(flagged)
                .map(|k| start + 8 + k),
            Some(mask) => Some(start + (mask.trailing_zeros() / 8) as usize),
            None => None,
        };
        if let Some(end) = first.filter(|&end| bytes.get(end) == Some(&b'"')) {
            self.at = end + 1;
            return Some(RawString {
                inner: self.text.get(start..end)?,
                escaped: false,
            });
        }
        self.string_rest(start)
    }

    /// [`Scanner::string`] from its first byte at `start`, any length, escapes checked.
    fn string_rest(&mut self, start: usize) -> Option<RawString<'a>> {
        let bytes = self.bytes();
        let mut escaped = false;
        loop {
            let at = special(bytes, self.at, self.plain)?;
            match bytes[at] {
                b'"' => {
                    self.at = at + 1;
                    return Some(RawString {
                        inner: self.text.get(start..at)?,
                        escaped,
                    });
                }
                b'\\' => {
                    escaped = true;
                    self.at = at + 2;
                    match bytes.get(at + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            // A surrogate must come in a pair: a lone one is refused in
                            // every string, read or skipped (serde skips unread strings
                            // unchecked, but Codex reads them and loses the line).
                            match hex4(bytes, at + 2)? {
                                0xD800..=0xDBFF => {
                                    if bytes.get(at + 6..at + 8)? != b"\\u" {
                                        return None;
                                    }
                                    if !(0xDC00..=0xDFFF).contains(&hex4(bytes, at + 8)?) {
                                        return None;
                                    }
                                    self.at += 10;
                                }
                                0xDC00..=0xDFFF => return None,
                                _ => self.at += 4,
                            }
                        }
                        _ => return None,
                    }
                }
                // A control character: serde_json refuses it in a string.
                _ => return None,
            }
        }
    }

    /// `null` (absent), or what `read` reads: as serde reads an `Option`.
    #[inline(always)]
    fn nullable<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.null()? {
            return Some(None);
        }
        read(self).map(Some)
    }

    /// A string or `null` (absent), as serde reads an `Option<Text>`.
    #[inline(always)]
    fn opt_text(&mut self) -> Option<Option<Text<'a>>> {
        if self.null()? {
            return Some(None);
        }
        Some(Some(Text(self.string()?.text()?)))
    }

    /// Any value, checked and skipped, inside `depth` arrays and objects (the line's own object
    /// counts: its values are at depth 1).
    fn skip(&mut self, depth: usize) -> Option<()> {
        self.ws();
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.object(|s, _| s.skip(depth + 1))
            }
            b'[' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.array(|s| s.skip(depth + 1))
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(drop),
        }
    }

    /// A number by JSON's grammar (`-`, no leading zero, fraction, exponent): its text.
    fn number(&mut self) -> Option<&'a str> {
        let bytes = self.bytes();
        let start = self.at;
        let mut at = start;
        if bytes.get(at) == Some(&b'-') {
            at += 1;
        }
        match bytes.get(at)? {
            b'0' => at += 1,
            b'1'..=b'9' => at = digits(bytes, at),
            _ => return None,
        }
        if bytes.get(at) == Some(&b'.') {
            let end = digits(bytes, at + 1);
            if end == at + 1 {
                return None;
            }
            at = end;
        }
        if let Some(b'e' | b'E') = bytes.get(at) {
            at += 1;
            if let Some(b'+' | b'-') = bytes.get(at) {
                at += 1;
            }
            let end = digits(bytes, at);
            if end == at {
                return None;
            }
            at = end;
        }
        self.at = at;
        self.text.get(start..at)
    }

    /// A value the checks only type-check. A number is parsed as serde_json parses it, so one
    /// out of range is refused here as it was by the serde reader.
    fn kind(&mut self) -> Option<Kind> {
        self.ws();
        Some(match self.peek()? {
            b'"' => {
                self.string()?;
                Kind::String
            }
            b'{' => {
                self.skip(PAYLOAD_DEPTH)?;
                Kind::Object
            }
            b'[' => {
                self.skip(PAYLOAD_DEPTH)?;
                Kind::Array
            }
            b't' | b'f' => {
                self.skip(PAYLOAD_DEPTH)?;
                Kind::Bool
            }
            b'n' => {
                self.literal(b"null")?;
                Kind::Null
            }
            _ => {
                let number = self.number()?;
                serde_json::from_str::<serde_json::Number>(number).ok()?;
                Kind::Number
            }
        })
    }

    /// A payload: `null` (absent), or an object read into `slot` by [`Scanner::fields`].
    fn payload(&mut self, slot: &mut Option<Obj<Fields<'a>>>) -> Option<()> {
        if self.null()? {
            *slot = None;
            return Some(());
        }
        self.fields(&mut slot.insert(Obj(Fields::default())).0)
    }

    /// A payload object: every field the views read, of every payload type, in one pass.
    fn fields(&mut self, fields: &mut Fields<'a>) -> Option<()> {
        self.fill(fields, |s, f, seen, key| {
            match key {
                wire::key::TYPE => f.kind = seen.field(0, || s.opt_text())?,
                wire::key::ROLE => f.role = seen.field(1, || s.opt_text())?,
                wire::key::PHASE => f.phase = seen.field(2, || s.opt_text())?,
                wire::key::CONTENT => f.content = seen.field(3, || s.nullable(Self::parts))?,
                wire::key::CALL_ID => f.call_id = seen.field(4, || s.opt_text())?,
                wire::key::ARGUMENTS => f.arguments = seen.field(5, || s.kind())?,
                wire::key::INPUT => f.input = seen.field(6, || s.kind())?,
                wire::key::OUTPUT => f.output = seen.field(7, || s.kind())?,
                wire::key::MESSAGE => f.message = seen.field(8, || s.opt_text())?,
                wire::key::ID => f.id = seen.field(9, || s.opt_text())?,
                wire::key::TIMESTAMP => f.timestamp = seen.field(10, || s.kind())?,
                wire::key::CWD => f.cwd = seen.field(11, || s.kind())?,
                wire::key::ORIGINATOR => f.originator = seen.field(12, || s.kind())?,
                wire::key::CLI_VERSION => f.cli_version = seen.field(13, || s.kind())?,
                wire::key::BASE_INSTRUCTIONS => {
                    f.base_instructions =
                        seen.field(14, || s.nullable(|s| s.base_instructions().map(Obj)))?
                }
                _ => s.skip(PAYLOAD_DEPTH)?,
            }
            Some(())
        })
    }

    fn base_instructions(&mut self) -> Option<RawBaseInstructions<'a>> {
        self.record(|s, b: &mut RawBaseInstructions<'a>, seen, key| {
            if key == wire::key::TEXT {
                b.text = seen.field(0, || s.opt_text())?;
                Some(())
            } else {
                s.skip(3)
            }
        })
    }

    /// `content`: an array of objects (a part that is anything else is the slow way's).
    fn parts(&mut self) -> Option<Vec<Obj<PartView<'a>>>> {
        let mut parts = Vec::new();
        self.array(|s| {
            let part = s.record(|s, part: &mut PartView<'a>, seen, key| {
                match key {
                    wire::key::TYPE => part.kind = seen.field(0, || s.opt_text())?,
                    wire::key::TEXT => part.text = seen.field(1, || s.opt_text())?,
                    _ => s.skip(4)?,
                }
                Some(())
            })?;
            parts.push(Obj(part));
            Some(())
        })?;
        Some(parts)
    }
}

/// The index of the first `"`, `\` or control character at or after `at`. Most strings are
/// short (keys, types, ids) and end within the first two words, read 8 bytes at a time; past
/// those, a `plain` line is searched with memchr's SIMD, any other word by word.
fn special(bytes: &[u8], at: usize, plain: bool) -> Option<usize> {
    let mut at = at;
    for _ in 0..2 {
        let Some(word) = word_at(bytes, at) else {
            return special_tail(bytes, at);
        };
        if let Some(k) = flagged(word) {
            return Some(at + k);
        }
        at += 8;
    }
    if plain {
        return memchr::memchr2(b'"', b'\\', bytes.get(at..)?).map(|k| at + k);
    }
    while let Some(word) = word_at(bytes, at) {
        if let Some(k) = flagged(word) {
            return Some(at + k);
        }
        at += 8;
    }
    special_tail(bytes, at)
}

fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let chunk: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// The first byte of `word` (little-endian) that is `"`, `\` or a control character: the
/// bytes a JSON string must escape, found as the writer finds them.
fn flagged(word: u64) -> Option<usize> {
    let mask = json::escape_mask(word);
    (mask != 0).then(|| (mask.trailing_zeros() / 8) as usize)
}

/// The last few bytes of a line, one at a time.
fn special_tail(bytes: &[u8], at: usize) -> Option<usize> {
    bytes
        .get(at..)?
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|k| at + k)
}

/// True when `bytes` holds no control character (below U+0020): the least byte of each chunk,
/// a reduction the compiler does 16 bytes an instruction (no early exit within a chunk).
fn no_controls(bytes: &[u8]) -> bool {
    let mut chunks = bytes.chunks_exact(64);
    let least = |chunk: &[u8]| chunk.iter().fold(u8::MAX, |least, &b| least.min(b));
    chunks.all(|chunk| least(chunk) >= 0x20) && least(chunks.remainder()) >= 0x20
}

fn digits(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b'0'..=b'9') = bytes.get(at) {
        at += 1;
    }
    at
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let mut value = 0;
    for &b in bytes.get(at..at + 4)? {
        value = value * 16 + char::from(b).to_digit(16)?;
    }
    Some(value)
}

/// A string's text from its escaped form (already validated by [`Scanner::string`]). A lone
/// surrogate is refused, as serde_json refuses it in a string it reads.
fn unescape(inner: &str) -> Option<String> {
    let bytes = inner.as_bytes();
    let mut out = String::with_capacity(inner.len());
    let mut at = 0;
    while let Some(k) = memchr::memchr(b'\\', bytes.get(at..)?) {
        out.push_str(inner.get(at..at + k)?);
        at += k;
        let unit = match bytes.get(at + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let high = hex4(bytes, at + 2)?;
                at += 6;
                let code = match high {
                    0xD800..=0xDBFF => {
                        if bytes.get(at..at + 2)? != b"\\u" {
                            return None;
                        }
                        let low = hex4(bytes, at + 2)?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return None;
                        }
                        at += 6;
                        0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return None,
                    _ => high,
                };
                out.push(char::from_u32(code)?);
                continue;
            }
            _ => return None,
        };
        out.push(unit);
        at += 2;
    }
    out.push_str(inner.get(at..)?);
    Some(out)
}
