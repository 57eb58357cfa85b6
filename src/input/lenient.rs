//! Fields of the readers' typed envelopes that keep the readers' leniency: a field of the
//! wrong type is absent, not a reason to refuse the record (a log that writes a number where
//! a string belongs loses that field only), and a struct is read only from a JSON object.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A field read when its value has the type `T`, otherwise absent. `Loose<Value>` is any value
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
        let value = Value::deserialize(deserializer)?;
        Ok(Loose(serde_json::from_value(value).ok()))
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
}
