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
