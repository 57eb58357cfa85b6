//! Bytes to JSON, with the Unicode repairs the rules allow.
//!
//! simd-json turns a lone high surrogate escape (`"\ud800"`) into U+0000 without an error, so
//! surrogate escapes are checked before parsing: valid pairs pass, lone ones become `\ufffd`
//! (same length, repaired in place) and are counted. Invalid raw UTF-8 is replaced the same way.

use serde_json::Value;

use super::InputError;

/// Parses one record. `repair` allows U+FFFD repairs; without it, invalid Unicode is an error.
/// Returns the value and the number of repairs made. `bytes` is left unchanged.
pub fn parse_record(bytes: &[u8], repair: bool) -> Result<(Value, usize), InputError> {
    let (mut buf, repairs) = prepare(bytes, repair)?;
    match simd_json::serde::from_slice::<Value>(&mut buf) {
        Ok(value) => Ok((value, repairs)),
        // simd-json parses in place and its messages carry no line or column; serde_json's
        // do, so the failure path re-reads a clean copy with it.
        Err(_) => {
            let (clean, repairs) = prepare(bytes, repair)?;
            match serde_json::from_slice::<Value>(&clean) {
                Ok(value) => Ok((value, repairs)),
                Err(err) => Err(InputError::InvalidJson(err.to_string())),
            }
        }
    }
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
pub fn repair_lone_surrogates(bytes: &mut [u8]) -> usize {
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
        match hex4(bytes, at + 2) {
            Some(cp) if (0xD800..0xDC00).contains(&cp) => {
                let low = if bytes.get(at + 6) == Some(&b'\\') && bytes.get(at + 7) == Some(&b'u') {
                    hex4(bytes, at + 8)
                } else {
                    None
                };
                if matches!(low, Some(l) if (0xDC00..0xE000).contains(&l)) {
                    i = at + 12;
                } else {
                    bytes[at + 2..at + 6].copy_from_slice(b"fffd");
                    repairs += 1;
                    i = at + 6;
                }
            }
            Some(cp) if (0xDC00..0xE000).contains(&cp) => {
                bytes[at + 2..at + 6].copy_from_slice(b"fffd");
                repairs += 1;
                i = at + 6;
            }
            Some(_) | None => i = at + 2,
        }
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
