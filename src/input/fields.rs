//! serde helpers the typed envelopes share: a field of another type than the one read is as
//! if absent, never an error, since exports and log versions differ in what they write.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// The value when it has type `T`, else nothing.
pub(crate) fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(T::deserialize(value).ok())
}

/// [`lenient`] for a struct, which serde would also read from a list, by position: only an
/// object is one.
pub(crate) fn lenient_struct<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    match Value::deserialize(d)? {
        value @ Value::Object(_) => Ok(T::deserialize(value).ok()),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            Ok(None)
        }
    }
}

/// An object, kept as JSON; anything else is nothing.
pub(crate) fn object<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Map<String, Value>>, D::Error> {
    match Value::deserialize(d)? {
        Value::Object(object) => Ok(Some(object)),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            Ok(None)
        }
    }
}

/// A field that is there (`null` too): its value when it has type `T`.
pub(crate) fn present<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    lenient(d).map(Some)
}

/// [`present`] for a struct: a field that is there (`null` too), read when it is an object.
pub(crate) fn present_struct<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    lenient_struct(d).map(Some)
}

/// [`lenient`] as a type, for envelopes that mark their fields instead of naming a function:
/// read when its value has the type `T`, otherwise absent. `Loose<Value>` is any value
/// that is present, `null` included (`Some(Value::Null)`), where `Option<Value>` reads `null`
/// as absent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Loose<T>(pub(crate) Option<T>);

impl<T> Default for Loose<T> {
    fn default() -> Self {
        Loose(None)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Loose<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        lenient(deserializer).map(Loose)
    }
}

/// A string as it is, any other JSON value as its JSON text (a call's arguments, an image
/// reference given as an object).
pub(crate) fn text_or_json(value: Value) -> String {
    match value {
        Value::String(s) => s,
        other @ (Value::Null
        | Value::Bool(_)
        | Value::Number(_)
        | Value::Array(_)
        | Value::Object(_)) => other.to_string(),
    }
}

/// `value` read as the envelope `T` when it is an object, else `T`'s default (every field
/// absent): serde would also fill a struct from a list, by position, which no source means.
pub(crate) fn object_or_default<T: DeserializeOwned + Default>(value: Value) -> T {
    match value {
        Value::Object(_) => serde_json::from_value(value).unwrap_or_default(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            T::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Default, Debug, PartialEq)]
    #[serde(default)]
    struct Probe {
        name: Loose<String>,
        index: Loose<u64>,
        present: Loose<Value>,
        fact: Option<Value>,
    }

    /// A field of the wrong type is absent and the others are read; `Loose<Value>` keeps a
    /// `null` that `Option<Value>` reads as absent.
    #[test]
    fn a_field_of_the_wrong_type_is_absent_and_the_record_is_read() {
        let read: Probe = object_or_default(serde_json::json!({
            "name": 5, "index": 3, "present": null, "fact": null, "other": "x"
        }));
        assert_eq!(read.name, Loose(None));
        assert_eq!(read.index, Loose(Some(3)));
        assert_eq!(read.present, Loose(Some(Value::Null)));
        assert_eq!(read.fact, None);
        let negative: Probe = object_or_default(serde_json::json!({"index": -1}));
        assert_eq!(negative.index, Loose(None));
    }

    /// A list is not an envelope: serde would fill the struct by position.
    #[test]
    fn only_an_object_is_read_as_an_envelope() {
        let from_list: Probe = object_or_default(serde_json::json!(["n", 1, true, 2]));
        assert_eq!(from_list, Probe::default());
        let from_string: Probe = object_or_default(serde_json::json!("name"));
        assert_eq!(from_string, Probe::default());
    }

    #[test]
    fn a_string_is_its_text_and_any_other_value_its_json() {
        assert_eq!(text_or_json(Value::String("a \"b\"".into())), "a \"b\"");
        assert_eq!(text_or_json(serde_json::json!({"a": 1})), r#"{"a":1}"#);
        assert_eq!(text_or_json(serde_json::json!([1, null])), "[1,null]");
    }
}
