//! RFC 3339 times in milliseconds, formatted as Codex writes them (UTC, millis, `Z`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Parses an RFC 3339 time (`Z`, a `+hh:mm` offset, or none meaning UTC) to milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let text = text.trim();
    let (base, offset_ms) = split_offset(text)?;
    let time = humantime::parse_rfc3339_weak(base).ok()?;
    let ms = i64::try_from(time.duration_since(UNIX_EPOCH).ok()?.as_millis()).ok()?;
    Some(ms - offset_ms)
}

/// Splits a trailing `+hh:mm` / `-hh:mm` offset (humantime reads only UTC).
fn split_offset(text: &str) -> Option<(&str, i64)> {
    if text.len() > 19 && text.is_char_boundary(text.len() - 6) {
        let (base, tail) = text.split_at(text.len() - 6);
        let b = tail.as_bytes();
        if (b[0] == b'+' || b[0] == b'-') && b[3] == b':' {
            let hours: i64 = tail[1..3].parse().ok()?;
            let minutes: i64 = tail[4..6].parse().ok()?;
            let sign = if b[0] == b'-' { -1 } else { 1 };
            return Some((base, sign * (hours * 60 + minutes) * 60_000));
        }
    }
    Some((text, 0))
}

/// `2025-10-01T12:00:00.000Z`.
/// 9999-12-31T23:59:59.999Z: RFC 3339 has four-digit years (and humantime panics past them).
pub const MAX_MS: i64 = 253_402_300_799_999;

/// Formats `ms`, clamped to the RFC 3339 range (the epoch to [`MAX_MS`]).
pub fn format_ms(ms: i64) -> String {
    let ms = ms.clamp(0, MAX_MS);
    let time = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(time).to_string()
}

/// Seconds or milliseconds since the epoch, guessed by magnitude, to milliseconds.
pub fn epoch_number_to_ms(n: f64) -> Option<i64> {
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    // Before 2001-09-09 in milliseconds, or after year 33658 in seconds: milliseconds.
    let ms = if n >= 1e12 { n } else { n * 1000.0 };
    if ms > 253_402_300_799_000.0 {
        return None;
    }
    Some(ms as i64)
}

/// The UTC date folders and the file-name time of a rollout: (`YYYY`, `MM`, `DD`, `YYYY-MM-DDThh-mm-ss`).
pub fn path_parts(ms: i64) -> (String, String, String, String) {
    let text = format_ms(ms);
    let stamp = format!("{}T{}", &text[0..10], text[11..19].replace(':', "-"));
    (
        text[0..4].to_string(),
        text[5..7].to_string(),
        text[8..10].to_string(),
        stamp,
    )
}

/// The current time is never used for output; only for run timing.
pub fn now() -> SystemTime {
    SystemTime::now()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_parts() {
        let ms = parse_rfc3339_ms("2025-10-01T12:00:01.5Z").unwrap();
        assert_eq!(format_ms(ms), "2025-10-01T12:00:01.500Z");
        assert_eq!(
            parse_rfc3339_ms("2025-10-01T14:00:00+02:00"),
            parse_rfc3339_ms("2025-10-01T12:00:00Z")
        );
        let (y, m, d, stamp) = path_parts(ms);
        assert_eq!(
            (y.as_str(), m.as_str(), d.as_str(), stamp.as_str()),
            ("2025", "10", "01", "2025-10-01T12-00-01")
        );
        assert_eq!(epoch_number_to_ms(1_700_000_000.0), Some(1_700_000_000_000));
        assert_eq!(
            epoch_number_to_ms(1_700_000_000_123.0),
            Some(1_700_000_000_123)
        );
    }
}
