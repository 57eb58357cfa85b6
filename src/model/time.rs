//! RFC 3339 times in milliseconds, formatted as Codex writes them (UTC, millis, `Z`).

use std::time::{SystemTime, UNIX_EPOCH};

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

/// Formats `ms`, clamped to the RFC 3339 range (the epoch to [`MAX_MS`]): humantime's
/// `format_rfc3339_millis`, written by hand (through `Display` it cost ~650 instructions, and
/// a rollout formats three times and each path once).
pub fn format_ms(ms: i64) -> String {
    rfc3339(&ms_digits(ms)).to_string()
}

/// The bytes of [`format_ms`] of `ms`.
pub fn ms_digits(ms: i64) -> [u8; 24] {
    let ms = ms.clamp(0, MAX_MS);
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (year, month, day) = civil_from_days(days);
    let (h, m, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    // Each field's digits into its place in the template, last digit first.
    let mut text = *b"0000-00-00T00:00:00.000Z";
    let fields = [
        (0, 4, year),
        (5, 2, month),
        (8, 2, day),
        (11, 2, h),
        (14, 2, m),
        (17, 2, s),
        (20, 3, milli),
    ];
    for (at, width, mut value) in fields {
        for digit in text[at..at + width].iter_mut().rev() {
            *digit = b'0' + (value % 10) as u8;
            value /= 10;
        }
    }
    text
}

/// [`ms_digits`] as text (ASCII: never empty).
fn rfc3339(digits: &[u8; 24]) -> &str {
    std::str::from_utf8(digits).unwrap_or_default()
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days from the epoch on).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
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

/// Appends `sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss` of `ms` to `out`: a rollout's
/// UTC date folders and the time in its file name.
pub fn push_rollout_stem(out: &mut String, ms: i64) {
    let mut digits = ms_digits(ms);
    let text = rfc3339(&digits);
    out.push_str("sessions/");
    out.push_str(&text[0..4]);
    out.push('/');
    out.push_str(&text[5..7]);
    out.push('/');
    out.push_str(&text[8..10]);
    out.push_str("/rollout-");
    // The file name's time has `-` for `:`.
    digits[13] = b'-';
    digits[16] = b'-';
    out.push_str(&rfc3339(&digits)[0..19]);
}

/// The current time is never used for output; only for run timing.
pub fn now() -> SystemTime {
    SystemTime::now()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The hand formatter against humantime's, on every edge of the range and a spread of
    /// days, leap years and centuries included.
    #[test]
    fn format_ms_is_humantimes() {
        let humantime = |ms: i64| {
            let ms = ms.clamp(0, MAX_MS) as u64;
            humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
        };
        let mut cases = vec![
            i64::MIN,
            -1,
            0,
            1,
            999,
            1000,
            86_399_999,
            86_400_000,
            MAX_MS,
            MAX_MS + 1,
            i64::MAX,
        ];
        // Every day of 1999-2001 and 2099-2101 (leap rules at 2000 and 2100), then a stride
        // through the whole range.
        for start in [10_592_i64, 47_116] {
            cases.extend((start..start + 3 * 366).map(|d| d * 86_400_000 + 45_296_789));
        }
        cases.extend((0..200_000_i64).map(|i| i * 1_267_011_503_999 % (MAX_MS + 1)));
        for ms in cases {
            assert_eq!(format_ms(ms), humantime(ms), "{ms}");
            let t = humantime(ms);
            let mut stem = String::new();
            push_rollout_stem(&mut stem, ms);
            let expected = format!(
                "sessions/{}/{}/{}/rollout-{}T{}",
                &t[0..4],
                &t[5..7],
                &t[8..10],
                &t[0..10],
                t[11..19].replace(':', "-")
            );
            assert_eq!(stem, expected, "{ms}");
        }
    }

    #[test]
    fn round_trip_and_parts() {
        let ms = parse_rfc3339_ms("2025-10-01T12:00:01.5Z").unwrap();
        assert_eq!(format_ms(ms), "2025-10-01T12:00:01.500Z");
        assert_eq!(
            parse_rfc3339_ms("2025-10-01T14:00:00+02:00"),
            parse_rfc3339_ms("2025-10-01T12:00:00Z")
        );
        let mut stem = String::new();
        push_rollout_stem(&mut stem, ms);
        assert_eq!(stem, "sessions/2025/10/01/rollout-2025-10-01T12-00-01");
        assert_eq!(epoch_number_to_ms(1_700_000_000.0), Some(1_700_000_000_000));
        assert_eq!(
            epoch_number_to_ms(1_700_000_000_123.0),
            Some(1_700_000_000_123)
        );
    }
}
