//! Rollout lines read back: borrowed views of the wire types in [`super`], for checking any
//! rollout (ours, or one Codex wrote or appended to).
//!
//! A line is `{timestamp, type, payload}`; by its `type` the payload reads as a
//! [`RolloutItemView`] (tags Codex 0.169 does not know keep their name in
//! [`RolloutItemView::Other`]), and a `response_item` payload as a [`ResponseItemView`] tagged
//! by its own `type` (item types Codex 0.169 does not know keep theirs in
//! [`ResponseItemView::Other`]). The writer types and these views are kept in step by the
//! round-trip tests below: every variant the converter writes reads back as its view.
//!
//! Views hold what a check reads, not every field: strings the checks compare are borrowed
//! from the line (copied only when they hold escapes), values only type-checked
//! (`arguments`, `output`...) are skipped and kept as their JSON [`Kind`].
//!
//! Two ways in. The fast way reads the line in one pass into a flat set of fields (no
//! `serde_json::Value` tree, no map per object), by hand in [`scan`] with serde_json's
//! acceptance (the serde-derived reader of the same fields is its reference in the tests), and
//! then sorts them into the views. The lines a rollout is mostly made of (messages, tool calls
//! and outputs, message events, the session meta, each compact with its keys in codex-rs's
//! order) it first tries to read as byte templates ([`template`]), straight into their views
//! and exactly as [`scan`] reads them; any other line goes to [`scan`]. The fast way accepts
//! only the shapes a well-formed rollout has, and fails on anything else (a `phase` that is a
//! number, a `payload` that is an array, a duplicate key...). The slow way reads the same fields from a
//! `Value`, following `serde_json::Value` indexing (a missing key, `null` and a wrong type all
//! read as absent), and handles every line; use it when the fast way fails: for any line the
//! fast way accepts, both give the same view.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::wire::{self, event, item, key, tag};

/// One line: its timestamp, its payload read by its tag.
#[derive(Debug, PartialEq)]
pub(crate) struct LineView<'a> {
    pub timestamp: Option<Text<'a>>,
    pub item: RolloutItemView<'a>,
    /// False when `payload` is missing or not an object (the item then reads as if every
    /// field were absent).
    pub payload_is_object: bool,
}

/// A line's payload by the line's `type` (`RolloutItem` in codex-rs).
#[derive(Debug, PartialEq)]
pub(crate) enum RolloutItemView<'a> {
    SessionMeta(SessionMetaView<'a>),
    ResponseItem(ResponseItemView<'a>),
    EventMsg(EventMsgView<'a>),
    Compacted,
    TurnContext,
    /// Written by Codex 0.169 when it runs a turn (`{"full": bool, "state": {...}}`).
    WorldState,
    /// Written by Codex 0.169 when it runs a turn.
    TokenUsageRecord,
    /// A tag Codex 0.169 does not know: it skips the line silently.
    Other(Text<'a>),
    /// No string `type`.
    Untagged,
}

/// A `session_meta` payload. Of the required fields but `id`, only the JSON type matters.
#[derive(Debug, PartialEq)]
pub(crate) struct SessionMetaView<'a> {
    pub id: Option<Text<'a>>,
    pub timestamp: Kind,
    pub cwd: Kind,
    pub originator: Kind,
    pub cli_version: Kind,
    pub base_instructions: BaseInstructionsView<'a>,
}

#[derive(Debug, PartialEq)]
pub(crate) enum BaseInstructionsView<'a> {
    /// Missing or `null`.
    Absent,
    NotObject,
    /// `text` is `None` when it is missing or not a string.
    Object {
        text: Option<Text<'a>>,
    },
}

/// A `response_item` payload, by its `type` (`ResponseItem` in codex-rs). Fields missing or of
/// the wrong type read as `None`.
#[derive(Debug, PartialEq)]
pub(crate) enum ResponseItemView<'a> {
    Message(MessageView<'a>),
    Reasoning {
        /// `None` when missing or not an array.
        content: Option<Vec<PartView<'a>>>,
    },
    FunctionCall {
        call_id: Option<Text<'a>>,
        arguments: Kind,
    },
    FunctionCallOutput {
        call_id: Option<Text<'a>>,
        output: Kind,
    },
    CustomToolCall {
        call_id: Option<Text<'a>>,
        input: Kind,
    },
    CustomToolCallOutput {
        call_id: Option<Text<'a>>,
        output: Kind,
    },
    LocalShellCall {
        call_id: Option<Text<'a>>,
    },
    ToolSearchCall,
    ToolSearchOutput,
    WebSearchCall,
    ImageGenerationCall,
    /// Also read under its older name `compaction_summary`.
    Compaction,
    /// A legacy type Codex 0.169 still parses and leaves out of the model's history on purpose.
    GhostSnapshot,
    /// A type Codex 0.169 does not know (`None`: no string `type`): it drops the item on resume.
    Other(Option<Text<'a>>),
}

#[derive(Debug, PartialEq)]
pub(crate) struct MessageView<'a> {
    pub role: Option<Text<'a>>,
    /// `None` when missing or not an array.
    pub content: Option<Vec<PartView<'a>>>,
    pub phase: PhaseView<'a>,
    /// Set on items Codex wrote itself.
    pub id: Option<Text<'a>>,
}

#[derive(Debug, PartialEq)]
pub(crate) enum PhaseView<'a> {
    /// Missing or `null`.
    Absent,
    Text(Text<'a>),
    /// Neither a string nor `null`, as JSON text.
    NotText(Box<str>),
}

/// A content part (a part that is not an object reads as one with neither field).
#[derive(Debug, Default, PartialEq)]
#[cfg_attr(test, derive(serde::Deserialize))]
pub(crate) struct PartView<'a> {
    #[cfg_attr(test, serde(default, borrow, rename = "type"))]
    pub kind: Option<Text<'a>>,
    #[cfg_attr(test, serde(default, borrow))]
    pub text: Option<Text<'a>>,
}

/// An `event_msg` payload, by its `type`.
#[derive(Debug, PartialEq)]
pub(crate) enum EventMsgView<'a> {
    UserMessage {
        message: Option<Text<'a>>,
    },
    AgentMessage {
        message: Option<Text<'a>>,
    },
    /// Codex starts each turn it runs with one.
    TaskStarted,
    /// Any other event (Codex writes many: token counts, settings, ...); `None`: no string `type`.
    Other(Option<Text<'a>>),
}

impl<'a> LineView<'a> {}

impl ResponseItemView<'_> {
    /// The type name as written (`None` when there is none).
    pub(crate) fn type_name(&self) -> Option<&str> {
        Some(match self {
            ResponseItemView::Message(_) => item::MESSAGE,
            ResponseItemView::Reasoning { .. } => item::REASONING,
            ResponseItemView::FunctionCall { .. } => item::FUNCTION_CALL,
            ResponseItemView::FunctionCallOutput { .. } => item::FUNCTION_CALL_OUTPUT,
            ResponseItemView::CustomToolCall { .. } => item::CUSTOM_TOOL_CALL,
            ResponseItemView::CustomToolCallOutput { .. } => item::CUSTOM_TOOL_CALL_OUTPUT,
            ResponseItemView::LocalShellCall { .. } => item::LOCAL_SHELL_CALL,
            ResponseItemView::ToolSearchCall => item::TOOL_SEARCH_CALL,
            ResponseItemView::ToolSearchOutput => item::TOOL_SEARCH_OUTPUT,
            ResponseItemView::WebSearchCall => item::WEB_SEARCH_CALL,
            ResponseItemView::ImageGenerationCall => item::IMAGE_GENERATION_CALL,
            ResponseItemView::Compaction => item::COMPACTION,
            ResponseItemView::GhostSnapshot => item::GHOST_SNAPSHOT,
            ResponseItemView::Other(kind) => return kind.as_deref(),
        })
    }
}

// --- Reading ---------------------------------------------------------------------------------

/// The fast way: `None` when the line is not valid JSON or has a shape only the slow way reads.
/// Read by hand ([`scan`]), with the acceptance of the serde reader below.
pub(crate) fn fast(raw: &str) -> Option<LineView<'_>> {
    template::line(raw).or_else(|| scan::line(raw))
}

/// The first line of `text` (a file's lines from there on) the fast way, when a template reads
/// it and it ends where the template does: the line and its length, without its newline.
/// `None` says nothing of the line: find its end, and read it with [`fast`].
pub(crate) fn fast_first_line(text: &str) -> Option<(LineView<'_>, usize)> {
    template::first_line(text)
}

/// The fast way as serde derives it from the field types: the reference the tests hold
/// [`scan`] to, field by field.
#[cfg(test)]
fn fast_serde(raw: &str) -> Option<LineView<'_>> {
    serde_json::from_str::<Obj<RawLine<'_>>>(raw)
        .ok()
        .map(|line| line.0.into_view())
}

/// The slow way, for any value; `None` when it is not an object.
pub(crate) fn from_value(line: &Value) -> Option<LineView<'static>> {
    let Value::Object(_) = line else {
        return None;
    };
    let payload = match &line[wire::line::PAYLOAD] {
        p @ Value::Object(_) => Some(Obj(fields_from_value(p))),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            None
        }
    };
    Some(
        RawLine {
            timestamp: string(&line[wire::line::TIMESTAMP]),
            tag: string(&line[wire::line::TYPE]),
            payload,
        }
        .into_view(),
    )
}

/// A line as the fast way reads it.
#[derive(Default)]
#[cfg_attr(test, derive(serde::Deserialize))]
struct RawLine<'a> {
    #[cfg_attr(test, serde(default, borrow))]
    timestamp: Option<Text<'a>>,
    #[cfg_attr(test, serde(default, borrow, rename = "type"))]
    tag: Option<Text<'a>>,
    #[cfg_attr(test, serde(default, borrow))]
    payload: Option<Obj<Fields<'a>>>,
}

/// The fields of every payload type at once, read in one pass.
#[derive(Default)]
#[cfg_attr(test, derive(serde::Deserialize))]
struct Fields<'a> {
    #[cfg_attr(test, serde(default, borrow, rename = "type"))]
    kind: Option<Text<'a>>,
    #[cfg_attr(test, serde(default, borrow))]
    role: Option<Text<'a>>,
    #[cfg_attr(test, serde(default, borrow))]
    phase: Option<Text<'a>>,
    #[cfg_attr(test, serde(skip))]
    phase_json: Option<Box<str>>,
    #[cfg_attr(test, serde(default, borrow))]
    content: Option<Vec<Obj<PartView<'a>>>>,
    #[cfg_attr(test, serde(default, borrow))]
    call_id: Option<Text<'a>>,
    #[cfg_attr(test, serde(default))]
    arguments: Kind,
    #[cfg_attr(test, serde(default))]
    input: Kind,
    #[cfg_attr(test, serde(default))]
    output: Kind,
    #[cfg_attr(test, serde(default, borrow))]
    message: Option<Text<'a>>,
    #[cfg_attr(test, serde(default, borrow))]
    id: Option<Text<'a>>,
    #[cfg_attr(test, serde(default))]
    timestamp: Kind,
    #[cfg_attr(test, serde(default))]
    cwd: Kind,
    #[cfg_attr(test, serde(default))]
    originator: Kind,
    #[cfg_attr(test, serde(default))]
    cli_version: Kind,
    #[cfg_attr(test, serde(default, borrow))]
    base_instructions: Option<Obj<RawBaseInstructions<'a>>>,
    #[cfg_attr(test, serde(skip))]
    base_instructions_not_object: bool,
}

#[derive(Default)]
#[cfg_attr(test, derive(serde::Deserialize))]
struct RawBaseInstructions<'a> {
    #[cfg_attr(test, serde(default, borrow))]
    text: Option<Text<'a>>,
}

impl<'a> RawLine<'a> {
    /// The view, its fields taken out of the payload where they lie: moving the payload's
    /// fields (~400 bytes) out of their `Option` first was a copy of every line, ~1 % of a
    /// dry run of small records.
    fn into_view(mut self) -> LineView<'a> {
        let payload_is_object = self.payload.is_some();
        let mut absent = None;
        let fields = match &mut self.payload {
            Some(Obj(fields)) => fields,
            None => absent.insert(Fields::default()),
        };
        let item = match self.tag {
            None => RolloutItemView::Untagged,
            Some(tag) => match &*tag {
                tag::SESSION_META => RolloutItemView::SessionMeta(fields.take_session_meta()),
                tag::RESPONSE_ITEM => RolloutItemView::ResponseItem(fields.take_response_item()),
                tag::EVENT_MSG => RolloutItemView::EventMsg(fields.take_event()),
                tag::COMPACTED => RolloutItemView::Compacted,
                tag::TURN_CONTEXT => RolloutItemView::TurnContext,
                tag::WORLD_STATE => RolloutItemView::WorldState,
                tag::TOKEN_USAGE_RECORD => RolloutItemView::TokenUsageRecord,
                _ => RolloutItemView::Other(tag),
            },
        };
        LineView {
            timestamp: self.timestamp,
            item,
            payload_is_object,
        }
    }
}

fn parts(content: Option<Vec<Obj<PartView<'_>>>>) -> Option<Vec<PartView<'_>>> {
    content.map(|parts| parts.into_iter().map(|p| p.0).collect())
}

/// The fields a view keeps, each taken out of the payload (left `None` or default there).
impl<'a> Fields<'a> {
    fn take_session_meta(&mut self) -> SessionMetaView<'a> {
        let base_instructions = match self.base_instructions.take() {
            _ if self.base_instructions_not_object => BaseInstructionsView::NotObject,
            None => BaseInstructionsView::Absent,
            Some(b) => BaseInstructionsView::Object { text: b.0.text },
        };
        SessionMetaView {
            id: self.id.take(),
            timestamp: self.timestamp,
            cwd: self.cwd,
            originator: self.originator,
            cli_version: self.cli_version,
            base_instructions,
        }
    }

    fn take_response_item(&mut self) -> ResponseItemView<'a> {
        let Some(kind) = self.kind.take() else {
            return ResponseItemView::Other(None);
        };
        let call_id = self.call_id.take();
        match &*kind {
            item::MESSAGE => ResponseItemView::Message(MessageView {
                role: self.role.take(),
                content: parts(self.content.take()),
                phase: match (self.phase.take(), self.phase_json.take()) {
                    (Some(text), _) => PhaseView::Text(text),
                    (None, Some(json)) => PhaseView::NotText(json),
                    (None, None) => PhaseView::Absent,
                },
                id: self.id.take(),
            }),
            item::REASONING => ResponseItemView::Reasoning {
                content: parts(self.content.take()),
            },
            item::FUNCTION_CALL => ResponseItemView::FunctionCall {
                call_id,
                arguments: self.arguments,
            },
            item::FUNCTION_CALL_OUTPUT => ResponseItemView::FunctionCallOutput {
                call_id,
                output: self.output,
            },
            item::CUSTOM_TOOL_CALL => ResponseItemView::CustomToolCall {
                call_id,
                input: self.input,
            },
            item::CUSTOM_TOOL_CALL_OUTPUT => ResponseItemView::CustomToolCallOutput {
                call_id,
                output: self.output,
            },
            item::LOCAL_SHELL_CALL => ResponseItemView::LocalShellCall { call_id },
            item::TOOL_SEARCH_CALL => ResponseItemView::ToolSearchCall,
            item::TOOL_SEARCH_OUTPUT => ResponseItemView::ToolSearchOutput,
            item::WEB_SEARCH_CALL => ResponseItemView::WebSearchCall,
            item::IMAGE_GENERATION_CALL => ResponseItemView::ImageGenerationCall,
            item::COMPACTION | item::COMPACTION_SUMMARY => ResponseItemView::Compaction,
            item::GHOST_SNAPSHOT => ResponseItemView::GhostSnapshot,
            _ => ResponseItemView::Other(Some(kind)),
        }
    }

    fn take_event(&mut self) -> EventMsgView<'a> {
        match self.kind.as_deref() {
            Some(event::USER_MESSAGE) => EventMsgView::UserMessage {
                message: self.message.take(),
            },
            Some(event::AGENT_MESSAGE) => EventMsgView::AgentMessage {
                message: self.message.take(),
            },
            Some(event::TASK_STARTED) => EventMsgView::TaskStarted,
            _ => EventMsgView::Other(self.kind.take()),
        }
    }
}

fn fields_from_value(p: &Value) -> Fields<'static> {
    let (phase, phase_json) = match &p[key::PHASE] {
        Value::Null => (None, None),
        Value::String(s) => (Some(Text(Cow::Owned(s.clone()))), None),
        other @ Value::Bool(_)
        | other @ Value::Number(_)
        | other @ Value::Array(_)
        | other @ Value::Object(_) => (None, Some(other.to_string().into())),
    };
    let (base_instructions, base_instructions_not_object) = match &p[key::BASE_INSTRUCTIONS] {
        Value::Null => (None, false),
        b @ Value::Object(_) => (
            Some(Obj(RawBaseInstructions {
                text: string(&b[key::TEXT]),
            })),
            false,
        ),
        Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => (None, true),
    };
    Fields {
        kind: string(&p[key::TYPE]),
        role: string(&p[key::ROLE]),
        phase,
        phase_json,
        content: p[key::CONTENT].as_array().map(|parts| {
            parts
                .iter()
                .map(|part| {
                    Obj(PartView {
                        kind: string(&part[key::TYPE]),
                        text: string(&part[key::TEXT]),
                    })
                })
                .collect()
        }),
        call_id: string(&p[key::CALL_ID]),
        arguments: Kind::of(&p[key::ARGUMENTS]),
        input: Kind::of(&p[key::INPUT]),
        output: Kind::of(&p[key::OUTPUT]),
        message: string(&p[key::MESSAGE]),
        id: string(&p[key::ID]),
        timestamp: Kind::of(&p[key::TIMESTAMP]),
        cwd: Kind::of(&p[key::CWD]),
        originator: Kind::of(&p[key::ORIGINATOR]),
        cli_version: Kind::of(&p[key::CLI_VERSION]),
        base_instructions,
        base_instructions_not_object,
    }
}

fn string(v: &Value) -> Option<Text<'static>> {
    v.as_str().map(|s| Text(Cow::Owned(s.to_string())))
}

// --- Value types -----------------------------------------------------------------------------

/// A string, borrowed from the line when it has no escapes. (`#[serde(borrow)]` borrows a bare
/// `Cow<str>` field, but an `Option<Cow<str>>` always gets an owned copy.)
#[derive(Debug, PartialEq)]
pub(crate) struct Text<'a>(pub Cow<'a, str>);

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
struct Obj<T>(T);

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

/// The JSON type of a value the checks only type-check; the value itself is skipped. Missing
/// reads as `Null`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    #[default]
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    pub(crate) fn of(value: &Value) -> Kind {
        match value {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }

    /// As a message names it.
    pub(crate) fn article_name(self) -> &'static str {
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
    /// Read as serde_json's borrowed raw value (the fast way reads a `&str`): the value is
    /// scanned, never copied or unescaped, and its first byte says its type. Long tool
    /// outputs and arguments were unescaped into a buffer just to learn they are strings.
    /// A number is parsed as serde_json parses it, so one out of range still fails the line.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&serde_json::value::RawValue>::deserialize(deserializer)?;
        let text = raw.get();
        Ok(match text.as_bytes().first() {
            Some(b'"') => Kind::String,
            Some(b'{') => Kind::Object,
            Some(b'[') => Kind::Array,
            Some(b't' | b'f') => Kind::Bool,
            Some(b'n') => Kind::Null,
            _ => {
                serde_json::from_str::<serde_json::Number>(text).map_err(de::Error::custom)?;
                Kind::Number
            }
        })
    }
}

mod scan;
mod template;
#[cfg(test)]
mod tests;
