//! A Parquet row as one JSON object, the record every reader reads: columns as keys in schema
//! order, structs as objects, lists as arrays, maps as objects (a key that is not a string
//! written as its JSON text). Strings are escaped as serde_json escapes them; a binary value
//! is written as a string of its bytes, so that bytes that are not UTF-8 reach the parser,
//! which repairs or refuses them by rule like any record's. Timestamps are RFC 3339 (UTC),
//! dates `YYYY-MM-DD`, decimals strings, a float that is not finite `null`. Nested values are
//! walked with an explicit stack: no recursion, whatever the schema's depth.

use std::io::Write;

use parquet::record::{Field, Row};

use crate::model::json::escape_into;
use crate::model::time::ms_digits;

/// A container being written: what is left of it, and whether an item was written yet.
enum Open<'r> {
    Object(parquet::record::RowColumnIter<'r>, bool),
    Array(std::slice::Iter<'r, Field>, bool),
    Map(std::slice::Iter<'r, (Field, Field)>, bool),
}

/// Appends `row` to `out` as a JSON object.
pub(crate) fn row(row: &Row, out: &mut Vec<u8>) {
    out.push(b'{');
    let mut stack = vec![Open::Object(row.get_column_iter(), false)];
    while let Some(top) = stack.last_mut() {
        let next = match top {
            Open::Object(fields, written) => fields.next().map(|(key, field)| {
                comma(out, written);
                escape_into(out, key);
                out.push(b':');
                field
            }),
            Open::Array(items, written) => items.next().inspect(|_| comma(out, written)),
            Open::Map(entries, written) => entries.next().map(|(key, value)| {
                comma(out, written);
                map_key(key, out);
                out.push(b':');
                value
            }),
        };
        let Some(field) = next else {
            out.push(match stack.pop() {
                Some(Open::Array(..)) => b']',
                Some(Open::Object(..) | Open::Map(..)) | None => b'}',
            });
            continue;
        };
        match field {
            Field::Group(inner) => {
                out.push(b'{');
                stack.push(Open::Object(inner.get_column_iter(), false));
            }
            Field::ListInternal(list) => {
                out.push(b'[');
                stack.push(Open::Array(list.elements().iter(), false));
            }
            Field::MapInternal(map) => {
                out.push(b'{');
                stack.push(Open::Map(map.entries().iter(), false));
            }
            scalar @ (Field::Null
            | Field::Bool(_)
            | Field::Byte(_)
            | Field::Short(_)
            | Field::Int(_)
            | Field::Long(_)
            | Field::UByte(_)
            | Field::UShort(_)
            | Field::UInt(_)
            | Field::ULong(_)
            | Field::Float16(_)
            | Field::Float(_)
            | Field::Double(_)
            | Field::Decimal(_)
            | Field::Str(_)
            | Field::Bytes(_)
            | Field::Date(_)
            | Field::TimeMillis(_)
            | Field::TimeMicros(_)
            | Field::TimestampMillis(_)
            | Field::TimestampMicros(_)) => scalar_into(scalar, out),
        }
    }
}

fn comma(out: &mut Vec<u8>, written: &mut bool) {
    if *written {
        out.push(b',');
    }
    *written = true;
}

/// A map's key: a string as itself, anything else as its JSON text, quoted.
fn map_key(key: &Field, out: &mut Vec<u8>) {
    if let Field::Str(text) = key {
        escape_into(out, text);
        return;
    }
    let mut text = Vec::new();
    scalar_into(key, &mut text);
    match std::str::from_utf8(&text) {
        Ok(text) if text.starts_with('"') => out.extend_from_slice(text.as_bytes()),
        Ok(text) => escape_into(out, text),
        Err(_) => bytes_into(&text, out),
    }
}

/// A value that holds no other: its JSON. A container (never given here) is written `null`.
fn scalar_into(field: &Field, out: &mut Vec<u8>) {
    // Writing to a Vec cannot fail.
    let _ = match field {
        Field::Null => write!(out, "null"),
        Field::Bool(b) => write!(out, "{b}"),
        Field::Byte(n) => write!(out, "{n}"),
        Field::Short(n) => write!(out, "{n}"),
        Field::Int(n) => write!(out, "{n}"),
        Field::Long(n) => write!(out, "{n}"),
        Field::UByte(n) => write!(out, "{n}"),
        Field::UShort(n) => write!(out, "{n}"),
        Field::UInt(n) => write!(out, "{n}"),
        Field::ULong(n) => write!(out, "{n}"),
        Field::Float16(n) => float(f64::from(f32::from(*n)), out),
        Field::Float(n) => float(f64::from(*n), out),
        Field::Double(n) => float(*n, out),
        Field::Decimal(_) => {
            escape_into(out, &field.to_string());
            Ok(())
        }
        Field::Str(text) => {
            escape_into(out, text);
            Ok(())
        }
        Field::Bytes(bytes) => {
            bytes_into(bytes.data(), out);
            Ok(())
        }
        Field::Date(days) => {
            let digits = ms_digits(i64::from(*days) * 86_400_000);
            out.push(b'"');
            out.extend_from_slice(&digits[..10]);
            out.push(b'"');
            Ok(())
        }
        Field::TimeMillis(n) => write!(out, "{n}"),
        Field::TimeMicros(n) => write!(out, "{n}"),
        Field::TimestampMillis(ms) => {
            out.push(b'"');
            out.extend_from_slice(&ms_digits(*ms));
            out.push(b'"');
            Ok(())
        }
        Field::TimestampMicros(us) => {
            let digits = ms_digits(us.div_euclid(1000));
            out.push(b'"');
            out.extend_from_slice(&digits[..23]);
            write!(out, "{:03}Z\"", us.rem_euclid(1000))
        }
        Field::Group(_) | Field::ListInternal(_) | Field::MapInternal(_) => write!(out, "null"),
    };
}

/// A float as serde_json writes one; not finite, `null` (JSON has no such number).
fn float(n: f64, out: &mut Vec<u8>) -> std::io::Result<()> {
    if !n.is_finite() {
        return write!(out, "null");
    }
    serde_json::to_writer(out, &n).map_err(std::io::Error::other)
}

/// Bytes as a JSON string: escaped as text when they are UTF-8; otherwise only `"`, `\` and
/// control bytes are escaped and the rest written as they are, for the parser's rule on
/// invalid UTF-8 to decide.
fn bytes_into(bytes: &[u8], out: &mut Vec<u8>) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        escape_into(out, text);
        return;
    }
    out.push(b'"');
    for &byte in bytes {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x1f => {
                let _ = write!(out, "\\u{byte:04x}");
            }
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::data_type::ByteArray;

    fn rendered(fields: Vec<(&str, Field)>) -> Vec<u8> {
        let row = Row::new(
            fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        );
        let mut out = Vec::new();
        super::row(&row, &mut out);
        out
    }

    // Lists and maps are built by the crate's reader only: tests/parquet.rs reads them from
    // files.
    #[test]
    fn a_row_of_every_kind_of_scalar_is_one_json_object() {
        let header = Field::Group(Row::new(vec![
            ("user-agent".into(), Field::Str("x".into())),
            ("accept-language".into(), Field::Null),
        ]));
        let text = rendered(vec![
            ("id", Field::Str("a\"b\n".into())),
            ("turn", Field::Long(2)),
            ("score", Field::Double(0.5)),
            ("nan", Field::Float(f32::NAN)),
            ("flag", Field::Bool(true)),
            ("none", Field::Null),
            ("day", Field::Date(19_000)),
            ("at", Field::TimestampMicros(1_700_000_000_123_456)),
            ("ms", Field::TimestampMillis(1_700_000_000_123)),
            ("header", header),
            ("empty", Field::Group(Row::new(vec![]))),
        ]);
        let value: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "id": "a\"b\n", "turn": 2, "score": 0.5, "nan": null, "flag": true, "none": null,
                "day": "2022-01-08", "at": "2023-11-14T22:13:20.123456Z",
                "ms": "2023-11-14T22:13:20.123Z",
                "header": {"user-agent": "x", "accept-language": null}, "empty": {},
            })
        );
    }

    #[test]
    fn binary_that_is_not_utf8_reaches_the_parser_as_it_is() {
        let bytes = Field::Bytes(ByteArray::from(vec![b'a', 0xff, b'"', 1]));
        assert_eq!(
            rendered(vec![("b", bytes)]),
            b"{\"b\":\"a\xff\\\"\\u0001\"}"
        );
    }

    #[test]
    fn deep_nesting_is_walked_without_recursion() {
        let mut field = Field::Int(1);
        for _ in 0..100_000 {
            field = Field::Group(Row::new(vec![("a".into(), field)]));
        }
        let row = Row::new(vec![("deep".into(), field)]);
        let mut out = Vec::new();
        super::row(&row, &mut out);
        assert_eq!(
            out.len(),
            "{\"deep\":".len() + 100_000 * "{\"a\":}".len() + 2
        );
        // Dropping the row recurses in the crate's own types: in a thread with room for it
        // (what is tested here is the walk).
        std::thread::Builder::new()
            .stack_size(512 << 20)
            .spawn(move || drop(row))
            .unwrap()
            .join()
            .unwrap();
    }
}
