//! Invariant 1 (`session_meta` first and once, its required fields, its id) and the per-line
//! part of invariant 2 (timestamps, line tags, payloads), with this module's own strict
//! RFC 3339 and UUID checks.

use super::{Findings, Invariant};
use crate::model::rollout::view::{
    BaseInstructionsView, Kind, LineView, RolloutItemView, SessionMetaView,
};
use crate::model::rollout::wire;

/// Checks the session meta; returns the base instructions' text, when there is one.
pub(super) fn check_session_meta<'l>(
    lines: &'l [(usize, LineView)],
    file_uuid: Option<&str>,
    out: &mut Findings,
) -> Option<&'l str> {
    let base = match lines.first() {
        Some((n, line)) => match &line.item {
            RolloutItemView::SessionMeta(meta) => check_first(*n, meta, file_uuid, out),
            RolloutItemView::ResponseItem(_)
            | RolloutItemView::EventMsg(_)
            | RolloutItemView::Compacted
            | RolloutItemView::TurnContext
            | RolloutItemView::WorldState
            | RolloutItemView::TokenUsageRecord
            | RolloutItemView::Other(_)
            | RolloutItemView::Untagged => {
                out.violation(
                    Invariant::SessionMeta,
                    *n,
                    "first line is not session_meta".to_string(),
                );
                None
            }
        },
        None => {
            out.violation(Invariant::SessionMeta, 0, "no lines".to_string());
            None
        }
    };
    let metas = lines
        .iter()
        .filter(|(_, l)| matches!(l.item, RolloutItemView::SessionMeta(_)));
    for (n, _) in metas.skip(1) {
        out.violation(
            Invariant::SessionMeta,
            *n,
            "second session_meta line".to_string(),
        );
    }
    base
}

fn check_first<'l>(
    n: usize,
    meta: &'l SessionMetaView,
    file_uuid: Option<&str>,
    out: &mut Findings,
) -> Option<&'l str> {
    let id = if meta.id.is_some() {
        Kind::String
    } else {
        Kind::Null
    };
    for (key, kind) in [
        (wire::key::ID, id),
        (wire::key::TIMESTAMP, meta.timestamp),
        (wire::key::CWD, meta.cwd),
        (wire::key::ORIGINATOR, meta.originator),
        (wire::key::CLI_VERSION, meta.cli_version),
    ] {
        if kind != Kind::String {
            out.violation(
                Invariant::SessionMeta,
                n,
                format!("session_meta has no string `{key}` (Codex cannot resume without it)"),
            );
        }
    }
    if let Some(id) = meta.id.as_deref() {
        if !is_uuid(id) {
            out.violation(
                Invariant::SessionMeta,
                n,
                format!("session id `{id}` is not a UUID"),
            );
        }
        if let Some(name_id) = file_uuid {
            if !name_id.eq_ignore_ascii_case(id) {
                out.violation(
                    Invariant::SessionMeta,
                    n,
                    format!("session id `{id}` differs from the file name's `{name_id}`"),
                );
            }
        }
    }
    match &meta.base_instructions {
        BaseInstructionsView::Absent => None,
        BaseInstructionsView::NotObject => {
            out.violation(
                Invariant::SessionMeta,
                n,
                "base_instructions is not an object".to_string(),
            );
            None
        }
        BaseInstructionsView::Object { text: None } => {
            out.violation(
                Invariant::SessionMeta,
                n,
                "base_instructions has no string `text`".to_string(),
            );
            None
        }
        BaseInstructionsView::Object { text: Some(t) } if t.is_empty() => {
            out.violation(
                Invariant::BaseInstructions,
                n,
                "empty base_instructions.text: the model would get no instructions at all"
                    .to_string(),
            );
            None
        }
        BaseInstructionsView::Object { text: Some(t) } => Some(t),
    }
}

/// Invariant 2 per line: timestamps well-formed and non-decreasing, a tag Codex reads, an
/// object payload.
pub(super) fn check_envelopes(lines: &[(usize, LineView)], out: &mut Findings) {
    let mut previous: Option<i64> = None;
    let mut second = None;
    for (n, line) in lines {
        let n = *n;
        match line
            .timestamp
            .as_deref()
            .and_then(|text| timestamp_ms(text, &mut second))
        {
            None => out.violation(
                Invariant::LineFormat,
                n,
                "timestamp missing or not RFC 3339".to_string(),
            ),
            Some(ms) => {
                if previous.is_some_and(|p| ms < p) {
                    out.violation(
                        Invariant::LineFormat,
                        n,
                        "timestamp goes backwards".to_string(),
                    );
                }
                previous = Some(ms);
            }
        }
        match &line.item {
            RolloutItemView::SessionMeta(_)
            | RolloutItemView::ResponseItem(_)
            | RolloutItemView::EventMsg(_)
            | RolloutItemView::Compacted
            | RolloutItemView::TurnContext
            | RolloutItemView::WorldState
            | RolloutItemView::TokenUsageRecord => {}
            RolloutItemView::Other(tag) => out.violation(
                Invariant::LineFormat,
                n,
                format!("unknown line type `{}` (Codex skips it silently)", &**tag),
            ),
            RolloutItemView::Untagged => out.violation(
                Invariant::LineFormat,
                n,
                "line has no string `type`".to_string(),
            ),
        }
        if !line.payload_is_object {
            out.violation(
                Invariant::LineFormat,
                n,
                "line has no object `payload`".to_string(),
            );
        }
    }
}

/// [`rfc3339_ms`], remembering the second of the last `YYYY-MM-DDThh:mm:ss.mmmZ` timestamp
/// read (its first 19 bytes and their milliseconds): the lines of a rollout mostly share one,
/// and then only the three digits are read. Exact: for one valid second (a leap second
/// aside), the value is the second's plus the milliseconds.
fn timestamp_ms<'t>(text: &'t str, second: &mut Option<(&'t str, i64)>) -> Option<i64> {
    let b = text.as_bytes();
    let millis = match b.get(19..24) {
        Some([b'.', digits @ .., b'Z']) if b.len() == 24 => {
            digits.iter().try_fold(0i64, |acc, d| {
                d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
            })
        }
        _ => None,
    };
    if let (Some(millis), Some((prefix, base)), Some(head)) = (millis, *second, text.get(..19)) {
        if head == prefix {
            return Some(base + millis);
        }
    }
    let ms = rfc3339_ms(text)?;
    // A leap second (`:60`) is read as the last millisecond before the next: not remembered.
    if let (Some(millis), Some(head), false) = (millis, text.get(..19), b[17] == b'6') {
        *second = Some((head, ms - millis));
    }
    Some(ms)
}

/// A UUID in its hyphenated form, as Codex writes session ids.
pub(super) fn is_uuid(text: &str) -> bool {
    text.len() == 36 && uuid::Uuid::try_parse(text).is_ok()
}

/// Milliseconds since the epoch of a strict RFC 3339 date-time
/// (`YYYY-MM-DDThh:mm:ss[.frac](Z|+hh:mm|-hh:mm)`), or `None` when `text` is not one.
/// Digits past the milliseconds are read and dropped.
pub(super) fn rfc3339_ms(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |at: usize, len: usize| -> Option<i64> {
        let digits = b.get(at..at + len)?;
        digits.iter().try_fold(0i64, |acc, d| {
            d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
        })
    };
    let sep = |at: usize, allowed: &[u8]| b.get(at).is_some_and(|c| allowed.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut at = 19;
    let mut millis = 0;
    if sep(at, b".") {
        let digits = b[at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        for k in 0..3 {
            millis = millis * 10 + if k < digits { num(at + 1 + k, 1)? } else { 0 };
        }
        at += 1 + digits;
    }
    let offset_minutes = match b.get(at..)? {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (num(at + 1, 2)?, num(at + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            if *sign == b'-' {
                -(h * 60 + m)
            } else {
                h * 60 + m
            }
        }
        _ => return None,
    };
    // A leap second sorts with the last millisecond of its minute.
    let (second, millis) = if second == 60 {
        (59, 999)
    } else {
        (second, millis)
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_second_reads_as_the_whole_timestamp() {
        let texts = [
            "2025-01-01T00:00:00.000Z",
            "2025-01-01T00:00:00.001Z",
            "2025-01-01T00:00:00.999Z",
            "2025-01-01T00:00:00.99xZ",
            "2025-01-01T00:00:00.12Z",
            "2025-01-01T00:00:00.1234",
            "2025-01-01T00:00:01.000Z",
            "2025-01-01T00:00:00.500Z",
            "2025-01-01T00:00:00.500+01:00",
            "2025-01-01T00:00:00,500Z",
            "2025-13-01T00:00:00.500Z",
            "2025-13-01T00:00:00.501Z",
            "2024-02-29T23:59:60.250Z",
            "2024-02-29T23:59:60.251Z",
            "2025-02-29T23:59:59.251Z",
            "2025-01-01t00:00:00.000Z",
            "",
            "2025-01-01T00:00:00.000Zé",
        ];
        let mut second = None;
        for text in texts {
            assert_eq!(timestamp_ms(text, &mut second), rfc3339_ms(text), "{text}");
        }
    }

    #[test]
    fn strict_rfc3339() {
        for (text, ms) in [
            ("1970-01-01T00:00:00Z", Some(0)),
            ("1970-01-01T00:00:00.001Z", Some(1)),
            ("2025-10-01T12:00:00.000Z", Some(1_759_320_000_000)),
            ("2025-10-01T14:00:00.5+02:00", Some(1_759_320_000_500)),
            ("2025-10-01t12:00:00.123456z", Some(1_759_320_000_123)),
            ("2024-02-29T00:00:00Z", Some(1_709_164_800_000)),
            ("1969-12-31T23:59:59.999Z", Some(-1)),
            ("2016-12-31T23:59:60Z", Some(1_483_228_799_999)),
            ("2023-02-29T00:00:00Z", None),
            ("2025-10-01T12:00:00", None),
            ("2025-10-01 12:00:00Z", None),
            ("2025-10-01T12:00:00.Z", None),
            ("2025-10-01T24:00:00Z", None),
            ("2025-13-01T00:00:00Z", None),
            ("2025-10-01T12:00:00+0200", None),
            ("2025-10-01T12:00:00Z ", None),
            (" 2025-10-01T12:00:00Z", None),
            ("2025-1-01T12:00:00Z", None),
            ("yesterday", None),
            ("", None),
            ("2025-10-01T12:00:00+२३:00", None),
        ] {
            assert_eq!(rfc3339_ms(text), ms, "{text}");
        }
    }

    #[test]
    fn uuid_hyphenated_only() {
        assert!(is_uuid("0199a213-81c0-7800-8aa1-bbab2a035a53"));
        assert!(!is_uuid("0199a21381c078008aa1bbab2a035a53"));
        assert!(!is_uuid("{0199a213-81c0-7800-8aa1-bbab2a035a5}"));
        assert!(!is_uuid("session-1"));
    }
}
