//! A rollout's bytes to its lines, read as [`LineView`]s, with the findings of invariant 2 that
//! concern the bytes themselves: a byte-order mark, invalid UTF-8, CRLF endings, lines that are
//! not JSON objects or that Codex's parser would refuse.
//!
//! The JSON checks here are this module's own, not the input reader's: a bug in a helper shared
//! with the converter could otherwise hide from both sides.

use serde_json::Value;

use super::{Findings, Invariant};
use crate::model::rollout::view::{self, LineView};

/// serde_json's nesting limit, which Codex's reader has: a deeper line is lost there.
const MAX_DEPTH: usize = 128;

/// The lines that parse, with their 1-based numbers. `None` when the file is not UTF-8 (Codex
/// then refuses it whole, and nothing else is worth reading). The lines `long` names (in
/// order) were too long to read: each is an empty line in `bytes` and a violation here.
pub(super) fn read<'a>(
    bytes: &'a [u8],
    long: &[super::LongLine],
    out: &mut Findings,
) -> Option<Vec<(usize, LineView<'a>)>> {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        out.violation(
            Invariant::LineFormat,
            1,
            "file starts with a UTF-8 byte-order mark".to_string(),
        );
    }
    // simdutf8 (simd-json's own check) reads a rollout a few times faster than std; it only
    // says no, and std says where.
    let text = match simdutf8::basic::from_utf8(bytes) {
        Ok(t) => t,
        Err(_) => {
            let at = std::str::from_utf8(bytes)
                .err()
                .map_or(0, |e| e.valid_up_to());
            let line = memchr::memchr_iter(b'\n', &bytes[..at]).count() + 1;
            out.violation(
                Invariant::LineFormat,
                line,
                format!("invalid UTF-8 at byte {at}: Codex refuses the whole file"),
            );
            return None;
        }
    };
    let body = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    // A long rollout's lines are counted first: its list of views is as large as its bytes
    // when the lines are short, and grown by doubling it took twice that at its peak.
    let capacity = if body.len() > EXACT_ABOVE {
        memchr::memchr_iter(b'\n', body.as_bytes()).count() + 1
    } else {
        body.len() / LINE_BYTES + 16
    };
    let mut lines = Vec::with_capacity(capacity);
    // A line a template reads ends where the template does: no search for its newline (a
    // search of every line was ~1.4 % of a dry run of small records). Any other line ends at
    // the next newline, found with memchr (`str::split` searched byte by byte: ~3 % of a
    // conversion of small records). Slicing a `str` at a `\n` is at a character boundary.
    let mut start = 0;
    let mut long = long.iter().peekable();
    for n in 1.. {
        let rest = &body[start..];
        if let Some(skipped) = long.next_if(|l| l.line == n) {
            out.violation(
                Invariant::LineFormat,
                n,
                format!(
                    "line of {} bytes, longer than --max-record-bytes ({}): not read",
                    skipped.size, skipped.limit
                ),
            );
            let Some(at) = memchr::memchr(b'\n', rest.as_bytes()) else {
                break;
            };
            start += at + 1;
            if start >= body.len() {
                break;
            }
            continue;
        }
        if let Some((line, len)) = view::fast_first_line(rest) {
            lines.push((n, line));
            start += len + 1;
            if start > body.len() {
                break;
            }
            continue;
        }
        let end = memchr::memchr(b'\n', rest.as_bytes()).map_or(body.len(), |at| start + at);
        let raw = &body[start..end];
        let last = end == body.len();
        start = end + 1;
        // What follows the last newline is a line only when it is not empty.
        if raw.is_empty() && last {
            break;
        }
        if raw.ends_with('\r') {
            out.violation(Invariant::LineFormat, n, "CRLF line ending".to_string());
        }
        let raw = raw.trim_end_matches('\r');
        match parse_line(raw) {
            Ok(Some(line)) => lines.push((n, line)),
            Ok(None) => out.violation(
                Invariant::LineFormat,
                n,
                "line is JSON but not an object".to_string(),
            ),
            Err(err) if raw.trim().is_empty() => {
                out.violation(Invariant::LineFormat, n, format!("blank line ({err})"))
            }
            Err(err) => out.violation(
                Invariant::LineFormat,
                n,
                format!("not JSON: {err} (Codex skips such a line silently)"),
            ),
        }
        if last {
            break;
        }
    }
    Some(lines)
}

/// The bytes of a rollout line, to size the list of lines at first: a small session's lines
/// fit (its lines are ~350 bytes), and the list is at most ~0.3x the file's size when its lines
/// are long (a line's view is ~140 bytes). More lines grow the list.
const LINE_BYTES: usize = 512;

/// A rollout longer than this has its list of lines sized by counting them.
const EXACT_ABOVE: usize = 1 << 20;

/// One line to its view; `Ok(None)` when it is JSON but not an object. A lone surrogate
/// escape is an error here: simd-json would read it as U+0000, and serde_json skips it unchecked
/// in the values the views ignore, while Codex (serde_json) rejects the line and so loses it.
fn parse_line(raw: &str) -> Result<Option<LineView<'_>>, String> {
    // The fast way refuses lone surrogates and nesting past the limit itself: a line it reads
    // needs neither scan below (two more passes over every line).
    if let Some(line) = view::fast(raw) {
        return Ok(Some(line));
    }
    let lone = lone_surrogates(raw.as_bytes());
    if lone > 0 {
        return Err(format!(
            "{lone} lone surrogate escape(s), which Codex cannot parse"
        ));
    }
    // Deeper than serde_json's limit: Codex cannot read the line, so serde_json says why
    // (simd-json would recurse without a limit and overflow the stack).
    if nests_deeper_than(raw.as_bytes(), MAX_DEPTH) {
        let value = serde_json::from_str::<Value>(raw).map_err(|e| e.to_string())?;
        return Ok(view::from_value(&value));
    }
    // Not JSON, or a shape the fast way does not read: parse to a `Value` (simd-json for speed,
    // serde_json for the error message).
    let mut buf = raw.as_bytes().to_vec();
    let value = match simd_json::serde::from_slice::<Value>(&mut buf) {
        Ok(value) => value,
        Err(_) => serde_json::from_str::<Value>(raw).map_err(|e| e.to_string())?,
    };
    Ok(view::from_value(&value))
}

/// The number of `\uD8xx`..`\uDFxx` escapes in `bytes` (JSON text) that are not a high
/// surrogate directly followed by a low one.
fn lone_surrogates(bytes: &[u8]) -> usize {
    // Built once: a searcher built per line cost ~0.6 % of a conversion of small records.
    static FINDER: std::sync::OnceLock<memchr::memmem::Finder<'static>> =
        std::sync::OnceLock::new();
    let finder = FINDER.get_or_init(|| memchr::memmem::Finder::new(b"\\u"));
    let mut count = 0;
    let mut i = 0;
    // `get(i..)`: a line may end in a backslash (cut inside a string), and `i` may pass the end.
    while let Some(found) = bytes.get(i..).and_then(|rest| finder.find(rest)) {
        let at = i + found;
        // An escaped backslash before the `u` (`\\u`) is no escape: count the run.
        let backslashes = bytes[..=at]
            .iter()
            .rev()
            .take_while(|b| **b == b'\\')
            .count();
        if backslashes % 2 == 0 {
            i = at + 2;
            continue;
        }
        match hex4(bytes, at + 2) {
            Some(0xD800..=0xDBFF) => {
                let low = match bytes.get(at + 6..at + 8) {
                    Some(b"\\u") => hex4(bytes, at + 8),
                    _ => None,
                };
                if matches!(low, Some(0xDC00..=0xDFFF)) {
                    i = at + 12;
                } else {
                    count += 1;
                    i = at + 6;
                }
            }
            Some(0xDC00..=0xDFFF) => {
                count += 1;
                i = at + 6;
            }
            Some(_) | None => i = at + 2,
        }
    }
    count
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = std::str::from_utf8(bytes.get(at..at + 4)?).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// True when arrays and objects in `bytes` (JSON text) nest deeper than `limit`, brackets
/// inside strings not counted. Malformed text may get either answer; the parser then fails.
fn nests_deeper_than(bytes: &[u8], limit: usize) -> bool {
    // Most lines have too few brackets to reach the limit: a count decides.
    if memchr::memchr2_iter(b'[', b'{', bytes).nth(limit).is_none() {
        return false;
    }
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_counted() {
        for (text, lone) in [
            (r#""\ud83d\ude00""#, 0),
            (r#""\ud83d""#, 1),
            (r#""\ude00x""#, 1),
            (r#""\ud83d\u0041""#, 1),
            (r#""\\ud83d""#, 0),
            (r#""\\\ud83d""#, 1),
            (r#""\u00e9""#, 0),
            ("\"x\\", 0),
            ("\"\\u", 0),
            (r#""\ud83d"#, 1),
        ] {
            assert_eq!(lone_surrogates(text.as_bytes()), lone, "{text}");
        }
    }

    #[test]
    fn depth_counts_brackets_outside_strings() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(nests_deeper_than(deep.as_bytes(), MAX_DEPTH));
        let quoted = format!("[\"{}\"]", "[".repeat(200));
        assert!(!nests_deeper_than(quoted.as_bytes(), MAX_DEPTH));
        let escaped = format!("[\"\\\"{}\"]", "{".repeat(200));
        assert!(!nests_deeper_than(escaped.as_bytes(), MAX_DEPTH));
        let exact = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert!(!nests_deeper_than(exact.as_bytes(), MAX_DEPTH));
    }
}
