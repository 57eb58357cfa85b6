//! A strict JSON reader over text, in one pass, with serde_json's acceptance: RFC 8259's
//! whitespace, string escapes, control characters refused in strings, number grammar, nothing
//! after the value. Two readers are built on it:
//!
//! - the rollout views' fast way in (`rollout::view::scan`), which reads a line straight into
//!   the fields the validator needs;
//! - [`outline`], which reads any JSON text into [`Part`]s: its values in order, strings as
//!   spans of the text (nothing copied, nothing unescaped), which the Responses body check
//!   walks ([`crate::validate::responses`]).
//!
//! It is stricter than serde_json in two ways, so that a text it reads needs no other check: a
//! lone surrogate escape is refused in every string (serde skips unread strings unchecked),
//! and so is nesting past the reader's limit (serde skips unread values at any depth).
//! Refusing is always safe: the caller then reads the text through serde_json, which says why.
//!
//! Why by hand: serde's visitors cost ~4,600 instructions a rollout line (a field-name match
//! per key, a visitor per value, a `RawValue` per skipped value), and simd-json copies the
//! text, marks every structural byte and copies every string out again; these readers spend
//! their time in the string scan, which skips a string's plain bytes 16 at a time.

use std::borrow::Cow;

use super::json;
use super::tape::MAX_DEPTH;

/// Arrays and objects serde_json reads nested (`serde_json::from_slice` refuses one more).
pub(crate) const SERDE_JSON_LEVELS: usize = MAX_DEPTH - 1;

/// A cursor in a JSON text. Each reading method reads one thing at the cursor and moves past
/// it; `None` when the text is not what it reads (then the cursor is anywhere).
pub(crate) struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

/// A string as it stands in the text: its bytes between the quotes, and whether they hold
/// escapes (then they are not the string's text).
pub(crate) struct RawString<'a> {
    inner: &'a str,
    escaped: bool,
}

impl<'a> RawString<'a> {
    #[inline(always)]
    pub(crate) fn text(self) -> Option<Cow<'a, str>> {
        if self.escaped {
            unescape(self.inner).map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(self.inner))
        }
    }
}

impl<'a> Scanner<'a> {
    /// A cursor at the start of `text`.
    pub(crate) fn new(text: &'a str) -> Scanner<'a> {
        Scanner { text, at: 0 }
    }

    /// How far the cursor is in the text, in bytes.
    pub(crate) fn offset(&self) -> usize {
        self.at
    }

    /// What `read` reads at the cursor with the text cut at the next newline: a value read
    /// there cannot reach past the line it starts on. The cursor moves past what was read.
    pub(crate) fn within_line<T>(
        &mut self,
        read: impl FnOnce(&mut Scanner<'a>) -> Option<T>,
    ) -> Option<T> {
        let rest = self.text.get(self.at..)?;
        let end = memchr::memchr(b'\n', rest.as_bytes()).unwrap_or(rest.len());
        let mut line = Scanner::new(rest.get(..end)?);
        let read = read(&mut line)?;
        self.at += line.at;
        Some(read)
    }

    /// Only whitespace is left: nothing may follow a JSON text's value.
    pub(crate) fn end(&mut self) -> Option<()> {
        self.ws();
        (self.at == self.text.len()).then_some(())
    }

    #[inline(always)]
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    #[inline(always)]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    /// serde_json's whitespace: space, tab, newline, carriage return.
    #[inline(always)]
    pub(crate) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    #[inline(always)]
    pub(crate) fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// After whitespace: true (and the `null` read) when the value is `null`.
    #[inline(always)]
    pub(crate) fn null(&mut self) -> Option<bool> {
        self.ws();
        if self.peek()? != b'n' {
            return Some(false);
        }
        self.literal(b"null")?;
        Some(true)
    }

    #[inline(always)]
    pub(crate) fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes().get(self.at..end)? == word).then(|| self.at = end)
    }

    /// An object's first member's key, compact: `{` and then `field` (`,"name":`) after its
    /// comma. The byte templates' way to read a key: compared as the bytes it must be.
    #[inline(always)]
    pub(crate) fn first(&mut self, field: &str) -> Option<()> {
        self.eat(b'{')?;
        self.literal(field.as_bytes().get(1..)?)
    }

    /// A next member's key, compact: `field` (`,"name":`) as it is. The cursor stays when it
    /// is not.
    #[inline(always)]
    pub(crate) fn member(&mut self, field: &str) -> Option<()> {
        self.literal(field.as_bytes())
    }

    /// The members of an object, each value left to `member` (called after the colon).
    pub(crate) fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, &str) -> Option<()>,
    ) -> Option<()> {
        self.sequence(b'{', b'}', |s| {
            let key = s.string()?.text()?;
            s.ws();
            s.eat(b':')?;
            s.ws();
            member(s, &key)
        })
    }

    /// The elements of an array, each left to `element`.
    pub(crate) fn array(&mut self, element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.sequence(b'[', b']', element)
    }

    /// `open`, then entries read by `entry` (after their leading whitespace) separated by
    /// commas, then `close`: an object's or an array's body. It may be empty; a trailing comma
    /// is refused.
    #[inline(always)]
    pub(crate) fn sequence(
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
    pub(crate) fn string(&mut self) -> Option<RawString<'a>> {
        self.eat(b'"')?;
        let start = self.at;
        let bytes = self.bytes();
        // The first special byte within the first 16 bytes, if any.
        let first = bytes
            .get(start..start + 16)
            .and_then(|block| <&[u8; 16]>::try_from(block).ok())
            .map(json::escape_bits)
            .filter(|&mask| mask != 0)
            .map(|mask| start + mask.trailing_zeros() as usize);
        if let Some(end) = first.filter(|&end| bytes.get(end) == Some(&b'"')) {
            self.at = end + 1;
            return Some(RawString {
                inner: self.text.get(start..end)?,
                escaped: false,
            });
        }
        self.string_rest(start)
    }

    /// A string with no escapes: its text (`None` for an escaped string, as for any other
    /// value). Names (tags, types) are compared as they stand.
    #[inline(always)]
    pub(crate) fn plain(&mut self) -> Option<&'a str> {
        let raw = self.string()?;
        (!raw.escaped).then_some(raw.inner)
    }

    /// [`Scanner::string`] from its first byte at `start`, any length, escapes checked.
    ///
    /// A block of 32 bytes gets one mask of its quotes, backslashes and controls (the
    /// escaper's, [`json::block_mask`]), and each flagged byte is visited in it: an escape
    /// clears the bits it covers, so a text with an escape every few dozen bytes (code, tool
    /// output) costs one mask per block, not one per escape. The last bytes, fewer than a
    /// block, are read 16, 8 and then 1 at a time ([`special`]).
    fn string_rest(&mut self, start: usize) -> Option<RawString<'a>> {
        let bytes = self.bytes();
        let mut escaped = false;
        let mut base = self.at;
        while let Some(block) = bytes
            .get(base..base + json::BLOCK)
            .and_then(|block| <&[u8; json::BLOCK]>::try_from(block).ok())
        {
            let mut mask = json::block_mask(block);
            let mut next = base + json::BLOCK;
            while mask != 0 {
                let at = base + mask.trailing_zeros() as usize;
                match bytes[at] {
                    b'"' => return self.string_end(start, at, escaped),
                    b'\\' => {
                        escaped = true;
                        let after = escape_end(bytes, at)?;
                        if after >= next {
                            next = after;
                            break;
                        }
                        mask &= u32::MAX << (after - base);
                    }
                    // A control character: serde_json refuses it in a string.
                    _ => return None,
                }
            }
            base = next;
        }
        loop {
            let at = special(bytes, base)?;
            match bytes[at] {
                b'"' => return self.string_end(start, at, escaped),
                b'\\' => {
                    escaped = true;
                    base = escape_end(bytes, at)?;
                }
                _ => return None,
            }
        }
    }

    /// The string from `start` to its closing quote at `end`; the cursor after the quote.
    fn string_end(&mut self, start: usize, end: usize, escaped: bool) -> Option<RawString<'a>> {
        self.at = end + 1;
        Some(RawString {
            inner: self.text.get(start..end)?,
            escaped,
        })
    }

    /// `null` (absent), or what `read` reads: as serde reads an `Option`.
    #[inline(always)]
    pub(crate) fn nullable<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        if self.null()? {
            return Some(None);
        }
        read(self).map(Some)
    }

    /// Any value, checked and skipped, inside `depth` arrays and objects (a rollout line's own object
    /// counts: its values are at depth 1).
    pub(crate) fn skip(&mut self, depth: usize) -> Option<()> {
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
    pub(crate) fn number(&mut self) -> Option<&'a str> {
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
}

/// One value of an outline, in the order the text holds them (an object's keys are parts too,
/// each before its value), as simd-json's tape orders its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// `len` members; `count` parts inside it (keys and values, nested ones included).
    Object { len: usize, count: usize },
    /// `len` elements; `count` parts inside it.
    Array { len: usize, count: usize },
    /// A string: its bytes between the quotes, `start..end` of the text, and whether they hold
    /// escapes (then they are not the string's text).
    String {
        start: usize,
        end: usize,
        escaped: bool,
    },
    /// A number, `true`, `false` or `null`.
    Scalar,
}

/// Reads `text`, one JSON value, into `parts` (cleared first). `None` (and `parts` anywhere)
/// when serde_json would refuse the text, and also, to leave them to serde_json, when arrays
/// and objects nest deeper than `levels`, an object has a key with escapes (its text is not
/// its bytes) or a first key serde_json's `Value` reader takes for a raw value
/// ([`json::is_raw_value_key`]). Linear in the text; memory is one part per value and key.
pub(crate) fn outline(text: &str, levels: usize, parts: &mut Vec<Part>) -> Option<()> {
    parts.clear();
    let mut s = Scanner::new(text);
    s.part(0, levels.min(MAX_DEPTH), parts)?;
    s.end()
}

impl Scanner<'_> {
    /// The value at the cursor into `parts`, inside `depth` arrays and objects.
    fn part(&mut self, depth: usize, levels: usize, parts: &mut Vec<Part>) -> Option<()> {
        self.ws();
        let open = parts.len();
        let (len, object) = match self.peek()? {
            b'"' => {
                let start = self.at + 1;
                let string = self.string()?;
                parts.push(Part::String {
                    start,
                    end: start + string.inner.len(),
                    escaped: string.escaped,
                });
                return Some(());
            }
            b'{' | b'[' if depth >= levels => return None,
            b'{' => {
                parts.push(Part::Object { len: 0, count: 0 });
                let mut len = 0;
                self.sequence(b'{', b'}', |s| {
                    let start = s.at + 1;
                    let key = s.string()?;
                    if key.escaped || (len == 0 && json::is_raw_value_key(key.inner)) {
                        return None;
                    }
                    let end = start + key.inner.len();
                    parts.push(Part::String {
                        start,
                        end,
                        escaped: false,
                    });
                    s.ws();
                    s.eat(b':')?;
                    len += 1;
                    s.part(depth + 1, levels, parts)
                })?;
                (len, true)
            }
            b'[' => {
                parts.push(Part::Array { len: 0, count: 0 });
                let mut len = 0;
                self.array(|s| {
                    len += 1;
                    s.part(depth + 1, levels, parts)
                })?;
                (len, false)
            }
            b't' => return self.literal(b"true").map(|()| parts.push(Part::Scalar)),
            b'f' => return self.literal(b"false").map(|()| parts.push(Part::Scalar)),
            b'n' => return self.literal(b"null").map(|()| parts.push(Part::Scalar)),
            _ => {
                // serde_json refuses a number out of f64's range (`1e400`).
                serde_json::from_str::<serde_json::Number>(self.number()?).ok()?;
                parts.push(Part::Scalar);
                return Some(());
            }
        };
        let count = parts.len() - open - 1;
        parts[open] = if object {
            Part::Object { len, count }
        } else {
            Part::Array { len, count }
        };
        Some(())
    }
}

/// A value in an [`outline`]: the text, its parts and the value's index.
#[derive(Clone, Copy)]
pub(crate) struct OutlineNode<'a> {
    text: &'a str,
    parts: &'a [Part],
    at: usize,
}

impl<'a> OutlineNode<'a> {
    /// The outline's root value (`parts` as [`outline`] filled them from `text`).
    pub(crate) fn root(text: &'a str, parts: &'a [Part]) -> OutlineNode<'a> {
        OutlineNode { text, parts, at: 0 }
    }

    pub(crate) fn part(self) -> Option<Part> {
        self.parts.get(self.at).copied()
    }

    /// How many parts the value spans, itself included.
    fn span(self) -> usize {
        match self.part() {
            Some(Part::Object { count, .. } | Part::Array { count, .. }) => count + 1,
            _ => 1,
        }
    }

    /// A string's bytes between its quotes (its text when it holds no escapes).
    pub(crate) fn raw_str(self) -> Option<&'a str> {
        match self.part()? {
            Part::String { start, end, .. } => self.text.get(start..end),
            Part::Object { .. } | Part::Array { .. } | Part::Scalar => None,
        }
    }

    /// The value at `key` of this object: the last one, as a `Value` keeps it.
    pub(crate) fn get(self, key: &str) -> Option<OutlineNode<'a>> {
        let Part::Object { len, .. } = self.part()? else {
            return None;
        };
        let (bytes, key) = (self.text.as_bytes(), key.as_bytes());
        let mut at = self.at + 1;
        let mut found = None;
        for _ in 0..len {
            // Keys hold no escapes (`outline` refuses them): their bytes are their text. The
            // length and the first byte tell most keys apart before the bytes are compared.
            if let Some(&Part::String { start, end, .. }) = self.parts.get(at) {
                let name = bytes.get(start..end).unwrap_or_default();
                if name.len() == key.len() && name.first() == key.first() && name == key {
                    found = Some(at + 1);
                }
            }
            at += 1 + OutlineNode { at: at + 1, ..self }.span();
        }
        found.map(|at| OutlineNode { at, ..self })
    }

    /// The elements of this array; `None` when it is not one.
    pub(crate) fn items(self) -> Option<OutlineItems<'a>> {
        let Part::Array { len, .. } = self.part()? else {
            return None;
        };
        Some(OutlineItems {
            next: OutlineNode {
                at: self.at + 1,
                ..self
            },
            left: len,
        })
    }
}

/// The elements of an array of an outline, in order ([`OutlineNode::items`]): a type of its
/// own, so that a reader generic over documents can name it (and need not collect a list).
#[derive(Clone, Copy)]
pub(crate) struct OutlineItems<'a> {
    next: OutlineNode<'a>,
    left: usize,
}

impl<'a> Iterator for OutlineItems<'a> {
    type Item = OutlineNode<'a>;

    fn next(&mut self) -> Option<OutlineNode<'a>> {
        self.left = self.left.checked_sub(1)?;
        let item = self.next;
        self.next.at += item.span();
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// The index of the first `"`, `\` or control character at or after `at`: 16 bytes at a
/// time ([`json::escape_bits`]), the last few 8 and then 1 at a time.
///
/// Why not memchr: a string with escapes (code, tool output: one every ~44 bytes) restarts the
/// search after each, and memchr's setup cost more than the search. Controls are found in the
/// same compares, so a line needs no pass of its own to rule them out first.
fn special(bytes: &[u8], at: usize) -> Option<usize> {
    let mut at = at;
    while let Some(block) = bytes
        .get(at..at + 16)
        .and_then(|block| <&[u8; 16]>::try_from(block).ok())
    {
        let mask = json::escape_bits(block);
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize);
        }
        at += 16;
    }
    while let Some(word) = word_at(bytes, at) {
        if let Some(k) = flagged(word) {
            return Some(at + k);
        }
        at += 8;
    }
    special_tail(bytes, at)
}

/// Where the escape whose backslash is at `at` ends, when it is one of JSON's. A surrogate
/// must come in a pair: a lone one is refused in every string, read or skipped (serde skips
/// unread strings unchecked, but Codex reads them and loses the line).
fn escape_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(at + 2),
        b'u' => match hex4(bytes, at + 2)? {
            0xD800..=0xDBFF => {
                if bytes.get(at + 6..at + 8)? != b"\\u" {
                    return None;
                }
                if !(0xDC00..=0xDFFF).contains(&hex4(bytes, at + 8)?) {
                    return None;
                }
                Some(at + 12)
            }
            0xDC00..=0xDFFF => None,
            _ => Some(at + 6),
        },
        _ => None,
    }
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

/// The last few bytes of a text, one at a time.
fn special_tail(bytes: &[u8], at: usize) -> Option<usize> {
    bytes
        .get(at..)?
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|k| at + k)
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;

    /// The outline of `text`, when it reads one.
    fn outlined(text: &str) -> Option<Vec<Part>> {
        let mut parts = vec![Part::Scalar; 3];
        outline(text, MAX_DEPTH, &mut parts)?;
        Some(parts)
    }

    /// True when the outline's `node` answers as `value` does: the same strings, the same
    /// elements, the same value at every key, scalars where it has scalars.
    fn answers_as(node: OutlineNode<'_>, value: &Value) -> bool {
        match (value, node.part()) {
            (Value::String(text), Some(Part::String { escaped, .. })) => {
                let raw = node.raw_str().unwrap_or_default();
                let read = if escaped {
                    unescape(raw)
                } else {
                    Some(raw.to_owned())
                };
                read.as_deref() == Some(text.as_str())
            }
            (Value::Array(items), Some(Part::Array { len, .. })) => {
                let nodes: Vec<_> = node.items().into_iter().flatten().collect();
                len == items.len()
                    && nodes.len() == len
                    && nodes.iter().zip(items).all(|(n, v)| answers_as(*n, v))
            }
            (Value::Object(map), Some(Part::Object { len, .. })) => {
                len >= map.len()
                    && map
                        .iter()
                        .all(|(k, v)| node.get(k).is_some_and(|n| answers_as(n, v)))
                    && node.get("not a key of it").is_none()
            }
            (Value::Null | Value::Bool(_) | Value::Number(_), Some(Part::Scalar)) => true,
            _ => false,
        }
    }

    /// Whatever the outline reads, serde_json reads too, to the same value.
    fn agrees(text: &str) {
        let value = serde_json::from_str::<Value>(text);
        if let Some(parts) = outlined(text) {
            let value = value.unwrap_or_else(|e| panic!("{text:?}: outlined, serde_json: {e}"));
            assert!(
                answers_as(OutlineNode::root(text, &parts), &value),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_value_read_within_its_line_stops_at_the_newline() {
        // Read to the newline and no further: the value there is all that is read.
        let mut s = Scanner::new("[1,{\"a\":2}] \n[3]");
        assert_eq!(s.within_line(|s| s.skip(1)), Some(()));
        assert_eq!(s.offset(), 11);
        // A value the newline cuts is refused, as the line cut there is; the cursor stays.
        for text in ["[1,\n2]", "{\"a\":\n1}", "[\"a\"\n]", "[[[[\n]]]]"] {
            let mut s = Scanner::new(text);
            assert_eq!(s.within_line(|s| s.skip(1)), None, "{text:?}");
            assert_eq!(s.offset(), 0, "{text:?}");
        }
        // Past a newline the cursor was already beyond, the next line is the limit.
        let mut s = Scanner::new("[0]\n[1,2]\n[3]");
        s.within_line(|s| s.skip(1));
        s.ws();
        assert_eq!(s.within_line(|s| s.skip(1)), Some(()));
        assert_eq!(s.offset(), 9);
    }

    #[test]
    fn outline_reads_json_as_serde_json_does() {
        for text in [
            r#"{"a":[1,{"b":"c"},[]],"d":{"e":null,"f":true},"g":"h\"i\u00e9\ud83d\ude00"}"#,
            r#"{"a":1,"a":2,"b":{"a":3}}"#,
            " [ 1 , -0.5e-3 , false , \"x\" ] ",
            "\"just a string\"",
            "0",
            "{}",
            "[]",
        ] {
            assert!(outlined(text).is_some(), "{text}");
            agrees(text);
        }
        // What serde_json refuses, and what it reads that the outline leaves to it.
        for text in [
            "",
            "{",
            "[1,]",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            "[1 2]",
            "01",
            "1e400",
            "nul",
            "\"a\u{1}\"",
            "\"\\x\"",
            "\"\\ud800\"",
            "{} {}",
            r#"{"\u0061":1}"#,
        ] {
            assert!(outlined(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn a_string_ends_at_its_quote_and_refuses_a_control_at_any_offset() {
        // A long string is read 32 bytes at a time, its last bytes 16, then 8, then 1 at a
        // time (a short one's first 16 at once): each offset below lands in a different one
        // of those, and on the edges between them.
        for at in [
            0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 60, 63, 64, 65, 95, 96,
        ] {
            let before = "a".repeat(at);
            for (special, refused) in [
                ("\\u0001", false),
                ("\\\"", false),
                ("\t", true),
                ("\u{1f}", true),
            ] {
                for after in ["", "b", &"é".repeat(20)] {
                    let text = format!("\"{before}{special}{after}\"");
                    assert_eq!(outlined(&text).is_none(), refused, "{text:?}");
                    agrees(&text);
                }
            }
            let text = format!("[\"{before}\",\"{}\"]", "c".repeat(at));
            assert!(outlined(&text).is_some(), "{text:?}");
            agrees(&text);
        }
    }

    #[test]
    fn outline_leaves_nesting_past_its_levels_to_serde_json() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let mut parts = Vec::new();
        assert!(outline(&deep(127), 127, &mut parts).is_some());
        assert!(outline(&deep(128), 127, &mut parts).is_none());
        assert!(outline(&deep(128), MAX_DEPTH, &mut parts).is_some());
        assert!(outline(&deep(100_000), MAX_DEPTH, &mut parts).is_none());
        assert!(
            serde_json::from_str::<Value>(&deep(127)).is_ok()
                && serde_json::from_str::<Value>(&deep(128)).is_err(),
            "serde_json reads 127 levels, not 128"
        );
    }

    fn json_text() -> impl Strategy<Value = String> {
        let value = json_leaf().prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-e]{1,2}", inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        });
        value.prop_map(|v| v.to_string())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any JSON is outlined as serde_json reads it; any JSON damaged by one edit is either
        /// refused or read as serde_json reads it.
        #[test]
        fn outline_answers_as_serde_json(text in json_text(), edit in one_edit()) {
            prop_assert!(outlined(&text).is_some(), "{}", text);
            agrees(&text);
            if let Some(damaged) = edit.apply(&text) {
                agrees(&damaged);
            }
        }

        /// Long strings dense with escapes (several to a 16-byte block, `\u` escapes and
        /// surrogate pairs across a block's edge, a backslash escaped just before a quote)
        /// are read whole, as serde_json reads them; damaged, refused or read the same.
        #[test]
        fn long_strings_with_escapes_answer_as_serde_json(
            texts in prop::collection::vec("[a-c\"\\\\\n\t\u{1}\u{e9}\u{1f600}☃§ ]{0,90}", 1..4),
            edit in one_edit(),
        ) {
            let text = Value::from(texts)
                .to_string()
                .replace('☃', "\\ud83d\\ude00")
                .replace('§', "\\u00e9");
            prop_assert!(outlined(&text).is_some(), "{}", text);
            agrees(&text);
            if let Some(damaged) = edit.apply(&text) {
                agrees(&damaged);
            }
        }
    }
}

/// A JSON scalar of every kind, strings with escapes and characters past ASCII, for the
/// scanners' property tests.
#[cfg(test)]
pub(crate) fn json_leaf() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::Value;
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z\"\\\\\n\u{e9}\u{1f600}<>/ ]{0,12}".prop_map(Value::String),
    ]
}

/// One edit that damages a JSON text, for the scanners' property tests: a byte removed,
/// inserted or replaced at a place, or the text cut there.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct Edit {
    at: proptest::sample::Index,
    kind: usize,
    byte: u8,
}

#[cfg(test)]
pub(crate) fn one_edit() -> impl proptest::strategy::Strategy<Value = Edit> {
    use proptest::prelude::*;
    (
        any::<prop::sample::Index>(),
        0usize..4,
        prop::sample::select(b"\"\\{}[],:0-.eEnu \t\x01x".to_vec()),
    )
        .prop_map(|(at, kind, byte)| Edit { at, kind, byte })
}

#[cfg(test)]
impl Edit {
    /// The damaged text; `None` when the edit left bytes that are not UTF-8.
    pub(crate) fn apply(&self, text: &str) -> Option<String> {
        let mut bytes = text.as_bytes().to_vec();
        if !bytes.is_empty() {
            let i = self.at.index(bytes.len());
            match self.kind {
                0 => {
                    bytes.remove(i);
                }
                1 => bytes.insert(i, self.byte),
                2 => bytes[i] = self.byte,
                _ => bytes.truncate(i),
            }
        }
        String::from_utf8(bytes).ok()
    }
}
