//! A session line's envelope, typed: what the reader converts, the rest by name.

use serde::de::value::MapAccessDeserializer;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::input::fields::lenient;

/// A line's envelope: the fields converted, typed (a field of another type is as if absent),
/// and the rest by name, which the audit names as ignored. Ids and flags that only steer the
/// reading (`uuid`, `parentUuid`, `isSidechain`, `isCompactSummary`) are read from the rest.
#[derive(Deserialize)]
pub(super) struct Envelope {
    #[serde(rename = "type", default, deserialize_with = "lenient")]
    pub(super) kind: Option<String>,
    /// `Some` when the line has the key, `null` included.
    #[serde(default, deserialize_with = "field")]
    pub(super) message: Option<MessageField>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) cwd: Option<String>,
    #[serde(rename = "gitBranch", default, deserialize_with = "lenient")]
    pub(super) git_branch: Option<String>,
    #[serde(rename = "sessionId", default, deserialize_with = "lenient")]
    pub(super) session_id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) version: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) timestamp: Option<String>,
    #[serde(rename = "isMeta", default, deserialize_with = "lenient")]
    pub(super) is_meta: Option<bool>,
    #[serde(flatten)]
    pub(super) rest: Map<String, Value>,
}

impl Envelope {
    pub(super) fn flag(&self, key: &str) -> bool {
        self.rest.get(key).and_then(Value::as_bool) == Some(true)
    }

    pub(super) fn id(&self, key: &str) -> Option<String> {
        self.rest
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    }
}

/// A line's `message` as written: an API message, or something that is not an object (a
/// `null` too: the line says it has a message).
pub(super) enum MessageField {
    Object(ApiMessage),
    Other,
}

/// An API message of a line: its content blocks stay JSON for the shared block mapper.
#[derive(Deserialize)]
pub(super) struct ApiMessage {
    #[serde(default)]
    pub(super) content: Value,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) model: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub(super) id: Option<String>,
}

/// A key that is there, whatever its value: serde reads a `null` as an absent `Option`.
fn field<'de, D: Deserializer<'de>>(d: D) -> Result<Option<MessageField>, D::Error> {
    MessageField::deserialize(d).map(Some)
}

impl<'de> Deserialize<'de> for MessageField {
    /// Read in one pass: an object straight into its fields, anything else skipped.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MessageField, D::Error> {
        struct Field;
        impl<'de> Visitor<'de> for Field {
            type Value = MessageField;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a message")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<MessageField, A::Error> {
                ApiMessage::deserialize(MapAccessDeserializer::new(map)).map(MessageField::Object)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MessageField, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MessageField::Other)
            }

            fn visit_unit<E>(self) -> Result<MessageField, E> {
                Ok(MessageField::Other)
            }

            fn visit_bool<E>(self, _: bool) -> Result<MessageField, E> {
                Ok(MessageField::Other)
            }

            fn visit_i64<E>(self, _: i64) -> Result<MessageField, E> {
                Ok(MessageField::Other)
            }

            fn visit_u64<E>(self, _: u64) -> Result<MessageField, E> {
                Ok(MessageField::Other)
            }

            fn visit_f64<E>(self, _: f64) -> Result<MessageField, E> {
                Ok(MessageField::Other)
            }

            fn visit_str<E>(self, _: &str) -> Result<MessageField, E> {
                Ok(MessageField::Other)
            }
        }
        d.deserialize_any(Field)
    }
}
