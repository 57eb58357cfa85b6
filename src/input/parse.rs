//! Bytes to JSON, with the Unicode repairs the rules allow.
//!
//! simd-json turns a lone high surrogate escape (`"\ud800"`) into U+0000 without an error, so
//! surrogate escapes are checked before parsing: valid pairs pass, lone ones become `\ufffd`
//! (same length, repaired in place) and are counted. Invalid raw UTF-8 is replaced the same way.

use serde_json::Value;

use super::InputError;
use crate::model::json::is_raw_value_key;

pub(crate) use crate::model::tape::span;
/// serde_json's nesting limit (arrays and objects), which Codex shares: a deeper record is
/// refused by serde_json with a clear error instead of being parsed.
pub(crate) use crate::model::tape::MAX_DEPTH;

/// Parses one record. `repair` allows U+FFFD repairs; without it, invalid Unicode is an error.
/// Returns the value and the number of repairs made. `bytes` is left unchanged.
///
/// The common case (valid UTF-8, simd-json parses it) costs one copy into this thread's
/// reused scratch and one pass of simd-json, which validates the UTF-8 itself: no separate
/// `from_utf8` pass and no buffers allocated per record. Anything else (invalid UTF-8 to
/// repair, a parse error, deep nesting) takes the careful path below, whose results are the
/// same as before.
pub fn parse_record(bytes: &[u8], repair: bool) -> Result<(Value, usize), InputError> {
    let parsed = with_scratch(bytes, |repairs, nodes| {
        if repairs > 0 && !repair {
            return Some(Err(InputError::InvalidUnicode(repairs)));
        }
        let value = tape_value(nodes?, &mut 0, 0, usize::MAX)?;
        Some(Ok((value, repairs)))
    });
    match parsed {
        Some(result) => result,
        None => parse_carefully(bytes, repair),
    }
}

/// Runs `read` on the simd-json tape of `bytes`, for a reader that takes what it needs from
/// the tape itself instead of a `Value` ([`super::chat::extract_fast`]). Only the common case
/// gets here: valid UTF-8 with no lone surrogate escape, valid JSON, no nesting deeper than
/// [`MAX_DEPTH`] and no raw-value key; otherwise, or when `read` declines, `None`, and the
/// caller reads the record through [`parse_record`], which refuses or repairs it as always.
/// `read` must not parse a record itself: the tape lives in this thread's scratch.
pub(crate) fn with_tape<R>(
    bytes: &[u8],
    read: impl FnOnce(&[simd_json::Node<'_>]) -> Option<R>,
) -> Option<R> {
    with_scratch(bytes, |repairs, nodes| {
        let nodes = nodes.filter(|nodes| repairs == 0 && crate::model::tape::is_plain(nodes))?;
        read(nodes)
    })
}

/// The `Value` of the tape with the value at node `hole` read as `null`, and not built: what
/// [`parse_record`] gives with that value then taken out (`std::mem::take`). `None` when
/// [`tape_value`] leaves the tape to the careful path.
pub(crate) fn tape_value_without(nodes: &[simd_json::Node<'_>], hole: usize) -> Option<Value> {
    tape_value(nodes, &mut 0, 0, hole)
}

/// The `Value` of the JSON at `nodes[*at]` of a simd-json tape, exactly as simd-json's serde
/// path builds it (a later duplicate key wins, a non-finite float is `null`), with `depth`
/// arrays and objects around it. simd-json builds the tape without recursion; this walk
/// recurses at most [`MAX_DEPTH`] deep and returns `None` past it (the careful path then
/// refuses the record with serde_json's message), so no byte scan for the depth and no
/// serde visitor run over the record again. The value at node `hole` is `null` and not read
/// (`usize::MAX` for none).
fn tape_value(
    nodes: &[simd_json::Node<'_>],
    at: &mut usize,
    depth: usize,
    hole: usize,
) -> Option<Value> {
    use simd_json::{Node, StaticNode};
    if *at == hole {
        *at += span(nodes, hole);
        return Some(Value::Null);
    }
    let node = *nodes.get(*at)?;
    *at += 1;
    Some(match node {
        Node::String(text) => Value::String(text.to_owned()),
        Node::Static(StaticNode::Null) => Value::Null,
        Node::Static(StaticNode::Bool(b)) => Value::Bool(b),
        Node::Static(StaticNode::I64(n)) => Value::Number(n.into()),
        Node::Static(StaticNode::U64(n)) => Value::Number(n.into()),
        Node::Static(StaticNode::F64(f)) => {
            serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
        }
        Node::Array { len, .. } => {
            if depth >= MAX_DEPTH {
                return None;
            }
            let mut items = Vec::with_capacity(len);
            for _ in 0..len {
                items.push(tape_value(nodes, at, depth + 1, hole)?);
            }
            Value::Array(items)
        }
        Node::Object { len, .. } => {
            if depth >= MAX_DEPTH {
                return None;
            }
            let mut map = serde_json::Map::new();
            for k in 0..len {
                let Node::String(key) = *nodes.get(*at)? else {
                    return None;
                };
                *at += 1;
                // serde_json reads such an object as a raw value: the careful path's.
                if k == 0 && is_raw_value_key(key) {
                    return None;
                }
                let value = tape_value(nodes, at, depth + 1, hole)?;
                map.insert(key.to_owned(), value);
            }
            Value::Object(map)
        }
    })
}

/// The `Value` of the JSON at `nodes[*at]` of a tape [`with_tape`] passed (so it nests no
/// deeper than [`MAX_DEPTH`]), as [`parse_record`] builds it.
pub(crate) fn tape_value_at(nodes: &[simd_json::Node<'_>], at: &mut usize) -> Option<Value> {
    tape_value(nodes, at, 0, usize::MAX)
}

/// Runs `read` on the number of lone surrogates repaired in a copy of `bytes` and the
/// simd-json tape of that copy (`None` when it is not JSON), in this thread's scratch.
fn with_scratch<R>(
    bytes: &[u8],
    read: impl FnOnce(usize, Option<&[simd_json::Node<'_>]>) -> R,
) -> R {
    crate::model::tape::with_scratch(bytes, repair_lone_surrogates, read)
}

/// [`parse_record`] for the records the fast path leaves: invalid UTF-8 (repaired or
/// refused), invalid JSON (serde_json's message, with line and column), deep nesting.
fn parse_carefully(bytes: &[u8], repair: bool) -> Result<(Value, usize), InputError> {
    let (mut buf, repairs) = prepare(bytes, repair)?;
    // simd-json's serde path recurses once per nesting level with no limit: a record of
    // 100 000 `[` overflowed the stack and aborted the whole run. Such records go straight to
    // serde_json, which stops at MAX_DEPTH with an error (and the record is quarantined).
    if !nests_deeper_than(&buf, MAX_DEPTH) {
        if let Ok(value) = simd_json::serde::from_slice::<Value>(&mut buf) {
            return Ok((value, repairs));
        }
        // simd-json parses in place and its messages carry no line or column; serde_json's
        // do, so the failure path re-reads a clean copy with it.
        buf = prepare(bytes, repair)?.0;
    }
    match serde_json::from_slice::<Value>(&buf) {
        Ok(value) => Ok((value, repairs)),
        Err(err) => Err(InputError::InvalidJson(err.to_string())),
    }
}

/// True when arrays and objects in `bytes` (JSON text) nest deeper than `limit`, brackets
/// inside strings not counted. Malformed text may get either answer; the parser then fails.
pub(crate) fn nests_deeper_than(bytes: &[u8], limit: usize) -> bool {
    // Most records have too few brackets to reach the limit: a count decides. memchr2 finds
    // them with SIMD and the count stops at the (limit+1)-th: this runs on every record and
    // every validated line (samples/BENCHMARKS.md).
    if memchr::memchr2_iter(b'[', b'{', bytes).nth(limit).is_none() {
        return false;
    }
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        i += 1;
        match byte {
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'"' => loop {
                // Skip the string: to its closing quote, stepping over escapes.
                let Some(rest) = bytes.get(i..) else {
                    return false;
                };
                match memchr::memchr2(b'"', b'\\', rest) {
                    None => return false,
                    Some(k) if rest[k] == b'\\' => i += k + 2,
                    Some(k) => {
                        i += k + 1;
                        break;
                    }
                }
            },
            _ => {}
        }
    }
    false
}

/// A copy of `bytes` with the allowed Unicode repairs made, and their count.
fn prepare(bytes: &[u8], repair: bool) -> Result<(Vec<u8>, usize), InputError> {
    let mut buf = bytes.to_vec();
    let mut repairs = repair_lone_surrogates(&mut buf);
    if repairs > 0 && !repair {
        return Err(InputError::InvalidUnicode(repairs));
    }
    if std::str::from_utf8(&buf).is_err() {
        let invalid = count_invalid_utf8(&buf);
        if !repair {
            return Err(InputError::InvalidUnicode(invalid));
        }
        repairs += invalid;
        buf = String::from_utf8_lossy(&buf).into_owned().into_bytes();
    }
    Ok((buf, repairs))
}

/// Replaces lone surrogate escapes by `\ufffd` in place; returns how many.
///
/// It searches for `\u` (rare) rather than stepping from backslash to backslash (one per
/// escaped newline or quote in a transcript's text, many in agent transcripts). A `\u` is an escape when the run of backslashes it ends is odd, which is
/// where stepping escape by escape lands: the same repairs as [`repair_stepping`].
pub(crate) fn repair_lone_surrogates(bytes: &mut [u8]) -> usize {
    static FINDER: std::sync::OnceLock<memchr::memmem::Finder<'static>> =
        std::sync::OnceLock::new();
    let finder = FINDER.get_or_init(|| memchr::memmem::Finder::new(b"\\u"));
    let mut repairs = 0;
    let mut i = 0;
    // `bytes.get(i..)`: `i` may pass the end after an escape cut at the end of the bytes.
    while let Some(found) = bytes.get(i..).and_then(|rest| finder.find(rest)) {
        let at = i + found;
        // Backslashes before it since `i` (always just past a non-backslash, or 0).
        let run = bytes[i..at]
            .iter()
            .rev()
            .take_while(|b| **b == b'\\')
            .count();
        if run % 2 == 1 {
            // `\\u`: an escaped backslash, then a `u`.
            i = at + 1;
            continue;
        }
        i = match repair_at(bytes, at) {
            (next, true) => {
                repairs += 1;
                next
            }
            (next, false) => next,
        };
        if i >= bytes.len() {
            break;
        }
    }
    repairs
}

/// The `\u` escape at `at`: where scanning resumes, and whether it was a lone surrogate,
/// now repaired.
fn repair_at(bytes: &mut [u8], at: usize) -> (usize, bool) {
    match hex4(bytes, at + 2) {
        Some(cp) if (0xD800..0xDC00).contains(&cp) => {
            let low = if bytes.get(at + 6) == Some(&b'\\') && bytes.get(at + 7) == Some(&b'u') {
                hex4(bytes, at + 8)
            } else {
                None
            };
            if matches!(low, Some(l) if (0xDC00..0xE000).contains(&l)) {
                (at + 12, false)
            } else {
                bytes[at + 2..at + 6].copy_from_slice(b"fffd");
                (at + 6, true)
            }
        }
        Some(cp) if (0xDC00..0xE000).contains(&cp) => {
            bytes[at + 2..at + 6].copy_from_slice(b"fffd");
            (at + 6, true)
        }
        Some(_) | None => (at + 2, false),
    }
}

/// The first way, escape by escape: the reference the tests hold [`repair_lone_surrogates`] to.
#[cfg(test)]
fn repair_stepping(bytes: &mut [u8]) -> usize {
    let mut repairs = 0;
    let mut i = 0;
    // `bytes.get(i..)`, not `&bytes[i..]`: after a backslash in the last byte (a record cut
    // inside a string) `i` is past the end, and slicing there panicked the whole run
    // (found by `cargo fuzz run convert_record`).
    while let Some(found) = bytes.get(i..).and_then(|rest| memchr::memchr(b'\\', rest)) {
        let at = i + found;
        if bytes.get(at + 1) != Some(&b'u') {
            i = at + 2;
            continue;
        }
        let (next, repaired) = repair_at(bytes, at);
        repairs += usize::from(repaired);
        i = next;
        if i >= bytes.len() {
            break;
        }
    }
    repairs
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let text = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(text, 16).ok()
}

fn count_invalid_utf8(mut bytes: &[u8]) -> usize {
    let mut count = 0;
    loop {
        match std::str::from_utf8(bytes) {
            Ok(_) => return count,
            Err(err) => {
                count += 1;
                let skip =
                    err.valid_up_to() + err.error_len().unwrap_or(bytes.len() - err.valid_up_to());
                bytes = &bytes[skip.min(bytes.len())..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::tree::{TapeNode, Tree};

    /// The record is parsed in place with padding after it (`fill_tape_padded`): a text that
    /// ends in a number, a literal or a string, or ends early, parses as serde_json parses it,
    /// strings unescaped, and a short text after a longer one in the same scratch sees nothing
    /// of it.
    #[test]
    fn a_record_parsed_in_place_reads_as_serde_json_reads_it() {
        let texts = [
            r#"{"content":"hello\nworld \u00e9\ud83d\ude00","n":-12.5e3,"t":true}"#,
            "123",
            "-12",
            "true",
            "nul",
            "tru",
            r#""a\"b""#,
            r#""unterminated"#,
            "[1,2,3]",
            "[1,2,3",
            r#"{"a":1}   "#,
            r#"{"a":1} x"#,
            r#"{"a":"#,
            "",
            "   ",
        ];
        for text in texts {
            let serde = serde_json::from_str::<serde_json::Value>(text).ok();
            // A long record first, so that the scratch holds its bytes past `text`'s end.
            crate::model::tape::with_scratch(
                format!(r#"{{"pad":"{}"}}"#, "x".repeat(4096)).as_bytes(),
                |_| 0,
                |_, _| (),
            );
            let tape = crate::model::tape::with_scratch(
                text.as_bytes(),
                |_| 0,
                |_, nodes| nodes.map(|nodes| TapeNode::root(nodes).to_json()),
            );
            assert_eq!(tape, serde.map(|value| value.to_string()), "{text:?}");
        }
    }

    #[test]
    fn the_tape_walk_builds_the_value_simd_jsons_serde_path_builds() {
        for text in [
            r#"{"a":1,"b":[1,-2,3.5,1e300,-0.0,18446744073709551615,-9223372036854775808],"c":{"d":null,"e":true,"f":false}}"#,
            r#"{"dup":1,"x":"y","dup":{"z":[]},"esc":"\n\"\u00e9\ud83d\ude00"}"#,
            r#"[[],{},[{}],"s",0]"#,
            r#""just a string""#,
            r#"{"$serde_json::private::RawValue":"[1]"}"#,
            r#"{"k":{"$serde_json::private::RawValue":"[1]"}}"#,
        ] {
            let expected = simd_json::serde::from_slice::<Value>(&mut text.as_bytes().to_vec());
            let ours = parse_record(text.as_bytes(), true).map(|(value, _)| value);
            match expected {
                Ok(expected) => assert_eq!(ours.unwrap(), expected, "{text}"),
                Err(_) => assert!(ours.is_err(), "{text}"),
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn the_search_repairs_as_stepping_escape_by_escape(
            text in proptest::collection::vec(proptest::sample::select(vec![
                b'\\', b'u', b'd', b'D', b'8', b'0', b'c', b'f', b'e', b'"', b'a', b'n',
            ]), 0..48)
        ) {
            let mut ours = text.clone();
            let mut reference = text.clone();
            let repairs = repair_lone_surrogates(&mut ours);
            proptest::prop_assert_eq!(repairs, repair_stepping(&mut reference));
            proptest::prop_assert_eq!(ours, reference);
        }
    }

    #[test]
    fn lone_surrogates_are_repaired_and_pairs_kept() {
        let (v, n) = parse_record(
            br#"{"a":"\ud800x","b":"\ud83d\ude00","c":"\\ud800","d":"\udc00"}"#,
            true,
        )
        .unwrap();
        assert_eq!(n, 2);
        assert_eq!(v["a"], "\u{FFFD}x");
        assert_eq!(v["b"], "😀");
        assert_eq!(v["c"], "\\ud800");
        assert_eq!(v["d"], "\u{FFFD}");
    }

    #[test]
    fn trailing_backslash_is_not_a_panic() {
        for bytes in [&b"\\"[..], b"{\"a\":\"x\\", b"\\u", b"\\ud800\\"] {
            let mut buf = bytes.to_vec();
            repair_lone_surrogates(&mut buf);
            assert!(parse_record(bytes, true).is_err());
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = format!(
            "{{\"messages\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let err = parse_record(deep.as_bytes(), true).unwrap_err();
        assert!(
            matches!(err, InputError::InvalidJson(ref m) if m.contains("recursion limit")),
            "{err}"
        );
        // At the limit it still parses; brackets inside strings do not count.
        let at_limit = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse_record(at_limit.as_bytes(), true).is_ok());
        assert!(!nests_deeper_than(at_limit.as_bytes(), MAX_DEPTH));
        let in_string = format!("{{\"a\":\"\\\"{}\"}}", "[".repeat(1000));
        assert!(!nests_deeper_than(in_string.as_bytes(), MAX_DEPTH));
        assert!(parse_record(in_string.as_bytes(), true).is_ok());
        assert!(nests_deeper_than(b"[[[", 2));
        assert!(!nests_deeper_than(b"[\"[[\\", 2));
    }

    #[test]
    fn repairs_refused_when_not_allowed() {
        assert_eq!(
            parse_record(br#"{"a":"\ud800"}"#, false).unwrap_err(),
            InputError::InvalidUnicode(1)
        );
        assert_eq!(
            parse_record(b"{\"a\":\"\xff\xfe\"}", false).unwrap_err(),
            InputError::InvalidUnicode(2)
        );
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let (v, n) = parse_record(b"{\"a\":\"x\xffy\"}", true).unwrap();
        assert_eq!((v["a"].as_str().unwrap(), n), ("x\u{FFFD}y", 1));
    }

    #[test]
    fn invalid_json_names_the_column() {
        let err = parse_record(b"{\"a\":", true).unwrap_err();
        assert!(
            matches!(err, InputError::InvalidJson(ref m) if m.contains("column")),
            "{err}"
        );
    }
}
