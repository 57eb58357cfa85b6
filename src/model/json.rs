//! Writing JSON strings fast, byte for byte as serde_json writes them; and the one key
//! serde_json's `Value` reader treats specially.
//!
//! serde_json escapes a string one byte at a time, with a table lookup and a write call per
//! escape; in a rollout most bytes are long texts (tool outputs, messages), and that loop was
//! the largest single cost of rendering (~12 % of a conversion). [`escape_into`] skips 8 bytes
//! at a time while none needs escaping and writes the same escapes serde_json does (`\"`,
//! `\\`, `\b \t \n \f \r`, other controls as lowercase `\u00XX`; nothing else), so the bytes
//! written are unchanged. The fast writers of the wire tables (`rollout::table`) use
//! it; what goes through serde_json is escaped by serde_json, to the same bytes.
//!
//! [`is_raw_value_key`]: with its `raw_value` feature (which the views use), serde_json reads
//! an object whose first key is the private name of its `RawValue` as that raw value, not as
//! an object. A reader that builds the same `Value` another way must leave such objects to
//! serde_json; the name is learned from serde_json's public API, never written here.

use std::sync::OnceLock;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

/// Appends `text` as a JSON string literal, quotes included, exactly as serde_json writes it.
pub(crate) fn escape_into(out: &mut Vec<u8>, text: &str) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    escape_walk(text, out);
    out.push(b'"');
}

/// `n` in decimal, as serde_json writes an unsigned integer.
pub(crate) fn decimal_into(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// The escapes of the control characters, as serde_json writes them.
const CONTROL: [&str; 32] = [
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
    "\\u0008", "\\u0009", "\\u000a", "\\u000b", "\\u000c", "\\u000d", "\\u000e", "\\u000f",
    "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
    "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
];

/// The bytes a block holds when the escapes are found a block at a time.
pub(crate) const BLOCK: usize = 32;

/// The body of the literal (no quotes): runs needing no escape copied whole. Whole blocks of
/// [`BLOCK`] bytes are searched with vector compares ([`block_mask`]), then each escape in the
/// block is visited by its bit; the last bytes (and short texts: most keys and tags) 8 at a
/// time. Every escaped byte is ASCII, so the output stays UTF-8.
///
/// Why blocks: code and tool output hold an escape every ~44 bytes (agent transcripts).
/// memchr, restarted after each escape, cost ~200 instructions an escape, ~10 % of a
/// conversion of agent transcripts to Responses bodies; a block's mask is found once.
fn escape_walk(text: &str, out: &mut Vec<u8>) {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while let Some(block) = bytes
        .get(i..i + BLOCK)
        .and_then(|block| <&[u8; BLOCK]>::try_from(block).ok())
    {
        let mut mask = block_mask(block);
        while mask != 0 {
            let at = i + mask.trailing_zeros() as usize;
            out.extend_from_slice(&bytes[start..at]);
            push_escape(out, bytes[at]);
            start = at + 1;
            mask &= mask - 1;
        }
        i += BLOCK;
    }
    while i < bytes.len() {
        match bytes.get(i..i + 8) {
            Some(word) => {
                let mask = escape_mask(u64::from_le_bytes(word.try_into().unwrap_or_default()));
                if mask == 0 {
                    i += 8;
                    continue;
                }
                // The lowest flagged byte is always a true match.
                i += (mask.trailing_zeros() / 8) as usize;
            }
            None if ESCAPED[bytes[i] as usize] => {}
            None => {
                i += 1;
                continue;
            }
        }
        out.extend_from_slice(&bytes[start..i]);
        push_escape(out, bytes[i]);
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Appends the escape of a byte serde_json escapes: two bytes for the common ones (a store,
/// not a copy of a variable length).
#[inline(always)]
fn push_escape(out: &mut Vec<u8>, byte: u8) {
    let short = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        b'\t' => b't',
        b'\n' => b'n',
        0x0c => b'f',
        b'\r' => b'r',
        byte => {
            out.extend_from_slice(CONTROL[usize::from(byte & 0x1f)].as_bytes());
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

/// A bit for each byte of `block` serde_json escapes (controls, `"`, `\`), the first byte's
/// the lowest.
#[inline(always)]
pub(crate) fn block_mask(block: &[u8; BLOCK]) -> u32 {
    let half = |at: usize| -> [u8; 16] {
        // Always 16 bytes: the default is never taken.
        block[at..at + 16].try_into().unwrap_or_default()
    };
    escape_bits(&half(0)) | (escape_bits(&half(16)) << 16)
}

/// A bit for each of the 16 bytes that is a control character, `"` or `\` (the bytes a JSON
/// string must escape, and the bytes that end a run of a string's text), the first byte's the
/// lowest: three vector compares and a byte mask (`wide` picks SSE2, NEON or plain code, with
/// no unsafe code here).
#[inline(always)]
pub(crate) fn escape_bits(bytes: &[u8; 16]) -> u32 {
    use wide::u8x16;
    let bytes = u8x16::new(*bytes);
    let flagged = bytes.simd_eq(u8x16::splat(b'"'))
        | bytes.simd_eq(u8x16::splat(b'\\'))
        | bytes.simd_lt(u8x16::splat(0x20));
    flagged.to_bitmask()
}

/// The bytes serde_json escapes: controls, `"` and `\`.
const ESCAPED: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// The high bit of each of the 8 bytes of `word` that is a control character, `"` or `\`,
/// possibly with bytes above a match flagged too (a borrow); the lowest flagged byte is
/// always a match, and none is flagged when none matches.
pub(crate) fn escape_mask(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    let quote = has_zero(word ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(word ^ (ONES * u64::from(b'\\')));
    below_space | quote | backslash
}

/// True when serde_json's `Value` reader reads an object whose first key is `key` as a raw
/// value (see the module docs).
pub(crate) fn is_raw_value_key(key: &str) -> bool {
    raw_value_key() == Some(key)
}

/// The object key serde_json's `Value` reader takes for a raw value: the name `RawValue`
/// deserialises through, asked of its public `Deserialize` once, and kept only if
/// `serde_json::from_str::<Value>` does read an object with that key as something else than
/// an object. `None` when no such key is found (then no key is special).
pub(crate) fn raw_value_key() -> Option<&'static str> {
    static KEY: OnceLock<Option<&'static str>> = OnceLock::new();
    *KEY.get_or_init(|| {
        let mut name = None;
        // Fails by design once the name is taken: nothing is read.
        let _ = Box::<RawValue>::deserialize(NameOf(&mut name));
        let name = name?;
        let probe = format!("{{{}:\"0\"}}", serde_json::to_string(name).ok()?);
        match serde_json::from_str::<Value>(&probe) {
            Ok(Value::Object(_)) | Err(_) => None,
            Ok(_) => Some(name),
        }
    })
}

/// A deserializer that reads nothing and keeps the name of the newtype or struct a type asks
/// it for.
struct NameOf<'a>(&'a mut Option<&'static str>);

impl<'de> Deserializer<'de> for NameOf<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only a name is kept"))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(name);
        Err(de::Error::custom("only a name is kept"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_newtype_struct(name, visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ours(text: &str) -> String {
        let mut out = Vec::new();
        escape_into(&mut out, text);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_byte_escapes_as_serde_json_escapes_it() {
        let all: String = (0u32..0x300).filter_map(char::from_u32).collect();
        for text in [
            "",
            "plain",
            "\"",
            "a\\b",
            "\u{7f}\u{80}é😀",
            "12345678\n12345678",
            // Bytes just above a match, which a borrow from it flags too.
            "\u{0} !\u{1f}#\"]\\ abc\u{0}\u{0}  \"\"##\\\\]]",
            "x\u{0}\u{1}\u{2}\u{3}\u{4}\u{5}\u{6}\u{7}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{e}\u{f}\u{10}\u{1f}\u{20}!",
            &all,
            // Long texts, searched a block at a time: escapes dense and sparse, at a block's
            // first and last bytes, a control other than a newline inside a block, and
            // two-byte characters across a block's edge.
            &"code(\"x\")\\n\n".repeat(20),
            &format!("{}\t{}", "x\n".repeat(40), "é\"".repeat(40)),
            &format!("\"{}\"\\{}\u{1}{}\u{1f}", "a".repeat(30), "b".repeat(31), "é".repeat(40)),
            &format!("{}é{}\r", "x".repeat(31), "y".repeat(62)),
        ] {
            assert_eq!(ours(text), serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn the_raw_value_key_is_learned_and_is_what_serde_json_reads_specially() {
        let key = raw_value_key().expect("serde_json's raw-value key");
        assert!(is_raw_value_key(key));
        assert!(!is_raw_value_key("type"));
        let object = format!(r#"{{{}:"[1, 2]"}}"#, serde_json::to_string(key).unwrap());
        let value: Value = serde_json::from_str(&object).unwrap();
        assert_eq!(value, serde_json::json!([1, 2]));
        // Any other key is an object's.
        let value: Value = serde_json::from_str(r#"{"$schema":"[1, 2]"}"#).unwrap();
        assert!(value.is_object());
    }

    proptest! {
        #[test]
        fn any_string_escapes_as_serde_json_escapes_it(text in "(?s).{0,64}|[a-z \"\\\\\n\u{e9}]{60,300}", controls in proptest::collection::vec(0u8..0x24, 0..8)) {
            let mut text = text;
            for (k, c) in controls.into_iter().enumerate() {
                if k % 2 == 0 {
                    text.push(char::from(c));
                } else {
                    text.insert(0, char::from(c));
                }
            }
            prop_assert_eq!(ours(&text), serde_json::to_string(&text).unwrap());
        }
    }
}
