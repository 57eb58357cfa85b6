//! What the invariants read of one rollout line, and two ways to get it.
//!
//! The fast way deserialises the line straight into these views: no `serde_json::Value` tree,
//! no map per object, no copy of strings without escapes, nothing built for the values the
//! invariants do not read. It accepts only the shapes a well-formed rollout has, and fails on
//! anything else (a `phase` that is a number, a `payload` that is an array, a
//! duplicate key...). The slow way reads the same facts from a `Value`, following
//! `serde_json::Value` indexing (a missing key, `null` and a wrong type all read as absent), and
//! handles every line; the validator uses it when the fast way fails, so both give the same
//! views, and so the same violations and messages, for any line the fast way accepts.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// One line: `{"timestamp":..,"type":..,"payload":{..}}`.
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
pub struct LineView<'a> {
    #[serde(default, borrow)]
    pub timestamp: Option<Text<'a>>,
    #[serde(default, borrow, rename = "type")]
    pub tag: Option<Text<'a>>,
    /// `None` when the payload is missing or not an object.
    #[serde(default, borrow)]
    pub payload: Option<Obj<Payload<'a>>>,
}

/// A payload of any line type: the fields the invariants read, for every type at once.
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
pub struct Payload<'a> {
    #[serde(default, borrow, rename = "type")]
    pub kind: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub role: Option<Text<'a>>,
    /// A string phase; `null` and missing read as `None`.
    #[serde(default, borrow)]
    pub phase: Option<Text<'a>>,
    /// A phase that is neither a string nor `null`, as JSON (the slow way only).
    #[serde(skip)]
    pub phase_json: Option<Box<str>>,
    /// `None` when the content is missing or not an array.
    #[serde(default, borrow)]
    pub content: Option<Vec<Obj<Part<'a>>>>,
    #[serde(default, borrow)]
    pub call_id: Option<Text<'a>>,
    #[serde(default)]
    pub arguments: Kind,
    #[serde(default)]
    pub input: Kind,
    #[serde(default)]
    pub output: Kind,
    // session_meta; of all but `id`, only the type matters. (The views move by value a few
    // times per line: small fields keep that cheap.)
    #[serde(default, borrow)]
    pub id: Option<Text<'a>>,
    #[serde(default)]
    pub timestamp: Kind,
    #[serde(default)]
    pub cwd: Kind,
    #[serde(default)]
    pub originator: Kind,
    #[serde(default)]
    pub cli_version: Kind,
    /// `None` when missing or `null`.
    #[serde(default, borrow)]
    pub base_instructions: Option<Obj<BaseInstructions<'a>>>,
    /// Base instructions that are there but not an object (the slow way only).
    #[serde(skip)]
    pub base_instructions_not_object: bool,
}

/// What a line without an object payload reads as: every field absent, as `Value` indexing
/// reads a non-object.
static NO_PAYLOAD: Payload<'static> = Payload {
    kind: None,
    role: None,
    phase: None,
    phase_json: None,
    content: None,
    call_id: None,
    arguments: Kind::Null,
    input: Kind::Null,
    output: Kind::Null,
    id: None,
    timestamp: Kind::Null,
    cwd: Kind::Null,
    originator: Kind::Null,
    cli_version: Kind::Null,
    base_instructions: None,
    base_instructions_not_object: false,
};

impl<'a> LineView<'a> {
    /// The payload, or an empty one when it is missing or not an object.
    pub fn payload(&self) -> &Payload<'a> {
        self.payload.as_ref().map_or(&NO_PAYLOAD, |p| &p.0)
    }
}

/// A content part (a part that is not an object reads as one with neither field).
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
pub struct Part<'a> {
    #[serde(default, borrow, rename = "type")]
    pub kind: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub text: Option<Text<'a>>,
}

#[derive(Debug, Default, PartialEq, serde::Deserialize)]
pub struct BaseInstructions<'a> {
    #[serde(default, borrow)]
    pub text: Option<Text<'a>>,
}

/// A string, borrowed from the line when it has no escapes. (`#[serde(borrow)]` borrows a bare
/// `Cow<str>` field, but an `Option<Cow<str>>` always gets an owned copy.)
#[derive(Debug, PartialEq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(PhantomData<&'a str>);
        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text.to_string())))
            }
            fn visit_string<E>(self, text: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(TextVisitor(PhantomData))
    }
}

/// A value that must be a JSON object. Derived structs also accept an array (field by field,
/// in order), which would read `[..]` as an object: this reads only a map.
#[derive(Debug, Default, PartialEq)]
pub struct Obj<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Obj)
            }
        }
        deserializer.deserialize_map(ObjVisitor(PhantomData))
    }
}

/// The JSON type of a value the invariants only type-check (`arguments`, `input`, `output`);
/// the value itself is skipped. Missing reads as `Null`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    #[default]
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    pub fn of(value: &Value) -> Kind {
        match value {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }

    /// As the violation messages name it.
    pub fn article_name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "an array",
            Kind::Object => "an object",
        }
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KindVisitor;
        impl<'de> Visitor<'de> for KindVisitor {
            type Value = Kind;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Kind, E> {
                Ok(Kind::Null)
            }
            fn visit_none<E>(self) -> Result<Kind, E> {
                Ok(Kind::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Kind, E> {
                Ok(Kind::Bool)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Kind, E> {
                Ok(Kind::Number)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Kind, E> {
                Ok(Kind::Number)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Kind, E> {
                Ok(Kind::Number)
            }
            fn visit_str<E>(self, _: &str) -> Result<Kind, E> {
                Ok(Kind::String)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Kind::Array)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Kind::Object)
            }
        }
        deserializer.deserialize_any(KindVisitor)
    }
}

/// The fast way, with serde_json: strings without escapes are borrowed from `raw`, values the
/// invariants do not read are skipped unparsed. `None` when the line is not valid JSON or has a
/// shape only the slow way reads.
pub fn fast<'a>(raw: &'a str) -> Option<LineView<'a>> {
    serde_json::from_str::<Obj<LineView<'a>>>(raw)
        .ok()
        .map(|line| line.0)
}

/// The slow way, for any value; `None` when it is not an object.
pub fn from_value(line: &Value) -> Option<LineView<'static>> {
    let Value::Object(_) = line else {
        return None;
    };
    let payload = match &line["payload"] {
        p @ Value::Object(_) => Some(Obj(payload_from_value(p))),
        _ => None,
    };
    Some(LineView {
        timestamp: string(&line["timestamp"]),
        tag: string(&line["type"]),
        payload,
    })
}

fn payload_from_value(p: &Value) -> Payload<'static> {
    let (phase, phase_json) = match &p["phase"] {
        Value::Null => (None, None),
        Value::String(s) => (Some(Text(Cow::Owned(s.clone()))), None),
        other => (None, Some(other.to_string().into())),
    };
    let (base_instructions, base_instructions_not_object) = match &p["base_instructions"] {
        Value::Null => (None, false),
        b @ Value::Object(_) => (
            Some(Obj(BaseInstructions {
                text: string(&b["text"]),
            })),
            false,
        ),
        _ => (None, true),
    };
    Payload {
        kind: string(&p["type"]),
        role: string(&p["role"]),
        phase,
        phase_json,
        content: p["content"].as_array().map(|parts| {
            parts
                .iter()
                .map(|part| {
                    Obj(Part {
                        kind: string(&part["type"]),
                        text: string(&part["text"]),
                    })
                })
                .collect()
        }),
        call_id: string(&p["call_id"]),
        arguments: Kind::of(&p["arguments"]),
        input: Kind::of(&p["input"]),
        output: Kind::of(&p["output"]),
        id: string(&p["id"]),
        timestamp: Kind::of(&p["timestamp"]),
        cwd: Kind::of(&p["cwd"]),
        originator: Kind::of(&p["originator"]),
        cli_version: Kind::of(&p["cli_version"]),
        base_instructions,
        base_instructions_not_object,
    }
}

fn string(v: &Value) -> Option<Text<'static>> {
    v.as_str().map(|s| Text(Cow::Owned(s.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast way, when it accepts a line, reads what the slow way reads.
    fn same(line: &str) -> bool {
        let fast = fast(line);
        let value: Value = serde_json::from_str(line).unwrap();
        let slow = from_value(&value);
        if let Some(fast) = &fast {
            assert_eq!(Some(fast), slow.as_ref(), "{line}");
        }
        fast.is_some()
    }

    #[test]
    fn fast_reads_what_slow_reads() {
        for line in [
            r#"{"timestamp":"2025-10-01T12:00:00.000Z","type":"session_meta","payload":{"id":"x","timestamp":"t","cwd":"/","originator":"o","cli_version":"1","source":"cli","base_instructions":{"text":"be \"nice\"\n"}}}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a\u00e9b"},{"type":"input_image","image_url":"x"}],"phase":"commentary"}}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[],"phase":null}}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"f","arguments":{"a":[1,{"b":null}]},"call_id":"c1"}}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"x"}]}}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c1","output":1.5,"input":true}}"#,
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"reasoning","summary":[],"content":null,"encrypted_content":null}}"#,
            r#"{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":"hi","images":["a"]}}"#,
            r#"{"timestamp":"t","type":"turn_context","payload":{"cwd":"/","approval_policy":"never","sandbox_policy":{"mode":"x"}}}"#,
            r#"{"type":"compacted","payload":{"message":"m"},"extra":[[],{}]}"#,
            r#"{"timestamp":"t","type":"x","payload":{}}"#,
            r#"{}"#,
        ] {
            assert!(same(line), "the fast way refused {line}");
        }
    }

    #[test]
    fn odd_shapes_go_the_slow_way() {
        for line in [
            r#"[1,2]"#,
            r#""text""#,
            r#"{"timestamp":1,"type":"x","payload":{}}"#,
            r#"{"timestamp":"t","type":"x","payload":["a","b"]}"#,
            r#"{"timestamp":"t","type":"x","payload":{"phase":7}}"#,
            r#"{"timestamp":"t","type":"x","payload":{"content":"text"}}"#,
            r#"{"timestamp":"t","type":"x","payload":{"content":["a"]}}"#,
            r#"{"timestamp":"t","type":"x","payload":{"content":[{"type":1}]}}"#,
            r#"{"timestamp":"t","type":"x","payload":{"call_id":5}}"#,
            r#"{"timestamp":"t","type":"x","payload":{"base_instructions":"b"}}"#,
            r#"{"timestamp":"t","type":"x","payload":{"base_instructions":{"text":3}}}"#,
            r#"{"timestamp":"t","type":"x","type":"y","payload":{}}"#,
            r#"{"timestamp":"t","type":"x","payload":{"role":"a","role":"b"}}"#,
        ] {
            assert!(!same(line), "the fast way accepted {line}");
        }
        // The slow way keeps what the invariants tell apart.
        let v: Value =
            serde_json::from_str(r#"{"payload":{"phase":7,"base_instructions":[]}}"#).unwrap();
        let view = from_value(&v).unwrap();
        let payload = view.payload.unwrap().0;
        assert_eq!(payload.phase_json.as_deref(), Some("7"));
        assert!(payload.base_instructions_not_object);
        let v: Value = serde_json::from_str(r#"{"payload":{"content":[1,{"type":2}]}}"#).unwrap();
        let parts = from_value(&v).unwrap().payload.unwrap().0.content.unwrap();
        assert_eq!(parts, vec![Obj(Part::default()), Obj(Part::default())]);
    }
}
