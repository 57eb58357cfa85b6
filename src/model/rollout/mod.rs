//! Codex rollout lines and Responses items, as Codex 0.169 reads them (see
//! `shared/spec/codex-target.md`). Here the types `convert` writes (field order here is the
//! order written); in [`view`], the same lines read back, for `validate`.
//!
//! The writer enums hold only what the converter writes, so that every `match` on them in the
//! pipeline stays exhaustive; the views add what Codex itself writes and an `Other` case for
//! what it does not know. Round-trip tests in [`view`] keep the two in step.
//!
//! Every name on the wire (keys, tags, types) is declared once, in [`wire`]; the writer types
//! serialise by hand with those names, in the order written here.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeStruct, Serializer};

pub mod generation;
pub mod native;
pub mod view;
pub mod wire;

pub use native::{NativeItem, NativeRole};

use wire::{content, event, item, key, line};

/// The folder of a Codex home that holds the live sessions.
pub const SESSIONS_DIR: &str = "sessions";

/// Message roles written in response items.
pub const ROLE_USER: &str = wire::role::USER;
pub const ROLE_ASSISTANT: &str = wire::role::ASSISTANT;
pub const ROLE_DEVELOPER: &str = wire::role::DEVELOPER;
pub const ROLE_SYSTEM: &str = wire::role::SYSTEM;

/// Assistant phases Codex 0.169 knows.
pub const KNOWN_PHASES: [&str; 3] = [
    wire::phase::COMMENTARY,
    wire::phase::FINAL_ANSWER,
    wire::phase::PARTIAL_ANSWER,
];

/// The first line of every rollout. The fields every session shares (the rule file's
/// `[session]`) are borrowed from the rules: four copies a record fewer.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionMeta<'a> {
    pub id: String,
    pub timestamp: String,
    pub cwd: Cow<'a, str>,
    pub originator: Cow<'a, str>,
    pub cli_version: Cow<'a, str>,
    pub source: Option<Cow<'a, str>>,
    pub model_provider: Option<Cow<'a, str>>,
    pub base_instructions: Option<BaseInstructions>,
    /// The session's git facts (Codex `GitInfo`): the branch, and from a Codex rollout also
    /// the commit and the repository.
    pub git: Option<GitInfo>,
}

/// `session_meta.git` as Codex reads it (`commit_hash`, `branch`, `repository_url`, each
/// optional, written in this order when present).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GitInfo {
    pub commit_hash: Option<String>,
    pub branch: Option<String>,
    pub repository_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BaseInstructions {
    /// A system prompt: often the longest text of a small record.
    pub text: String,
}

/// An assistant message's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    Commentary,
    FinalAnswer,
    PartialAnswer,
}

impl Phase {
    pub fn parse(text: &str) -> Option<Phase> {
        match text {
            wire::phase::COMMENTARY => Some(Phase::Commentary),
            wire::phase::FINAL_ANSWER => Some(Phase::FinalAnswer),
            wire::phase::PARTIAL_ANSWER => Some(Phase::PartialAnswer),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Commentary => wire::phase::COMMENTARY,
            Phase::FinalAnswer => wire::phase::FINAL_ANSWER,
            Phase::PartialAnswer => wire::phase::PARTIAL_ANSWER,
        }
    }
}

/// A Responses item as written in a `response_item` line.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseItem {
    Message {
        role: &'static str,
        content: Vec<ContentItem>,
        phase: Option<Phase>,
    },
    Reasoning {
        summary: Vec<SummaryText>,
        content: Option<Vec<ReasoningText>>,
        encrypted_content: Option<String>,
    },
    FunctionCall {
        name: String,
        arguments: String,
        call_id: String,
    },
    FunctionCallOutput {
        call_id: String,
        output: ToolOutput,
    },
    CustomToolCall {
        call_id: String,
        name: String,
        input: String,
    },
    CustomToolCallOutput {
        call_id: String,
        output: ToolOutput,
    },
    /// An item read from a Codex rollout, written as it was read.
    Native(NativeItem),
}

/// Message content items Codex accepts.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentItem {
    InputText {
        text: String,
    },
    InputImage {
        image_url: Option<String>,
        file_id: Option<String>,
        detail: Option<String>,
    },
    InputAudio {
        audio_url: Option<String>,
        file_id: Option<String>,
    },
    OutputText {
        text: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SummaryText {
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReasoningText {
    pub text: String,
}

/// A tool output: a bare string or a bare array of content items (never an object).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    Text(String),
    Items(Vec<ContentItem>),
}

/// UI events written beside the items, so the session shows turns in Codex. They borrow the
/// text of the item they follow.
#[derive(Debug, Clone, PartialEq)]
pub enum EventMsg<'a> {
    UserMessage {
        message: Cow<'a, str>,
        images: Vec<&'a str>,
    },
    AgentMessage {
        message: Cow<'a, str>,
        phase: Option<Phase>,
    },
}

/// A `compacted` line's payload: a summary standing in for earlier history.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted<'a> {
    pub message: &'a str,
    /// The history Codex resumes from instead of rebuilding one (`None`: Codex rebuilds it
    /// from the user messages before and the summary).
    pub replacement_history: Option<Vec<ResponseItem>>,
}

/// One rollout line: `{"timestamp":..,"type":..,"payload":..}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a, P: Serialize> {
    pub timestamp: &'a str,
    /// One of [`wire::tag`].
    pub tag: &'static str,
    pub payload: P,
}

impl ContentItem {
    /// The text this item carries, if it is a text item.
    pub fn text(&self) -> Option<&str> {
        match self {
            ContentItem::InputText { text } | ContentItem::OutputText { text } => Some(text),
            ContentItem::InputImage { .. } | ContentItem::InputAudio { .. } => None,
        }
    }
}

impl ResponseItem {
    /// The item's `type`, as written.
    pub fn type_name(&self) -> &'static str {
        match self {
            ResponseItem::Message { .. } => item::MESSAGE,
            ResponseItem::Reasoning { .. } => item::REASONING,
            ResponseItem::FunctionCall { .. } => item::FUNCTION_CALL,
            ResponseItem::FunctionCallOutput { .. } => item::FUNCTION_CALL_OUTPUT,
            ResponseItem::CustomToolCall { .. } => item::CUSTOM_TOOL_CALL,
            ResponseItem::CustomToolCallOutput { .. } => item::CUSTOM_TOOL_CALL_OUTPUT,
            ResponseItem::Native(native) => native.kind,
        }
    }
}

impl ContentItem {
    /// The part's `type`, as written.
    pub fn type_name(&self) -> &'static str {
        match self {
            ContentItem::InputText { .. } => content::INPUT_TEXT,
            ContentItem::InputImage { .. } => content::INPUT_IMAGE,
            ContentItem::InputAudio { .. } => content::INPUT_AUDIO,
            ContentItem::OutputText { .. } => content::OUTPUT_TEXT,
        }
    }
}

impl EventMsg<'_> {
    /// The event's `type`, as written.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventMsg::UserMessage { .. } => event::USER_MESSAGE,
            EventMsg::AgentMessage { .. } => event::AGENT_MESSAGE,
        }
    }
}

// --- Serialising ------------------------------------------------------------------------------
//
// By hand, with the names of [`wire`]: what `#[derive(Serialize)]` wrote for these types (a
// tagged enum's `type` first, then the fields in order; an optional field left out when
// absent, `Option`s without that rule written as `null`), checked against serde_json on
// every shape by the tests of `convert::render`, whose hand writer writes the same bytes.

/// `value` under `name`, or nothing when there is none (`skip_serializing_if = "Option::is_none"`).
pub(crate) fn optional<S: SerializeStruct, T: Serialize>(
    s: &mut S,
    name: &'static str,
    value: Option<T>,
) -> Result<(), S::Error> {
    match value {
        Some(value) => s.serialize_field(name, &value),
        None => s.skip_field(name),
    }
}

impl Serialize for SessionMeta<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("SessionMeta", 9)?;
        s.serialize_field(key::ID, &self.id)?;
        s.serialize_field(key::TIMESTAMP, &self.timestamp)?;
        s.serialize_field(key::CWD, &self.cwd)?;
        s.serialize_field(key::ORIGINATOR, &self.originator)?;
        s.serialize_field(key::CLI_VERSION, &self.cli_version)?;
        optional(&mut s, key::SOURCE, self.source.as_ref())?;
        optional(&mut s, key::MODEL_PROVIDER, self.model_provider.as_ref())?;
        optional(
            &mut s,
            key::BASE_INSTRUCTIONS,
            self.base_instructions.as_ref(),
        )?;
        optional(&mut s, key::GIT, self.git.as_ref())?;
        s.end()
    }
}

impl Serialize for GitInfo {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("GitInfo", 3)?;
        optional(&mut s, key::COMMIT_HASH, self.commit_hash.as_ref())?;
        optional(&mut s, key::BRANCH, self.branch.as_ref())?;
        optional(&mut s, key::REPOSITORY_URL, self.repository_url.as_ref())?;
        s.end()
    }
}

impl Serialize for BaseInstructions {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("BaseInstructions", 1)?;
        s.serialize_field(key::TEXT, &self.text)?;
        s.end()
    }
}

impl Serialize for Phase {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl Serialize for ResponseItem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let ResponseItem::Native(native) = self {
            return native.serialize(serializer);
        }
        let mut s = serializer.serialize_struct("ResponseItem", 4)?;
        s.serialize_field(key::TYPE, self.type_name())?;
        match self {
            ResponseItem::Message {
                role,
                content,
                phase,
            } => {
                s.serialize_field(key::ROLE, role)?;
                s.serialize_field(key::CONTENT, content)?;
                optional(&mut s, key::PHASE, phase.as_ref())?;
            }
            ResponseItem::Reasoning {
                summary,
                content,
                encrypted_content,
            } => {
                s.serialize_field(key::SUMMARY, summary)?;
                s.serialize_field(key::CONTENT, content)?;
                s.serialize_field(key::ENCRYPTED_CONTENT, encrypted_content)?;
            }
            ResponseItem::FunctionCall {
                name,
                arguments,
                call_id,
            } => {
                s.serialize_field(key::NAME, name)?;
                s.serialize_field(key::ARGUMENTS, arguments)?;
                s.serialize_field(key::CALL_ID, call_id)?;
            }
            ResponseItem::CustomToolCall {
                call_id,
                name,
                input,
            } => {
                s.serialize_field(key::CALL_ID, call_id)?;
                s.serialize_field(key::NAME, name)?;
                s.serialize_field(key::INPUT, input)?;
            }
            ResponseItem::FunctionCallOutput { call_id, output }
            | ResponseItem::CustomToolCallOutput { call_id, output } => {
                s.serialize_field(key::CALL_ID, call_id)?;
                s.serialize_field(key::OUTPUT, output)?;
            }
            // Written above, whole.
            ResponseItem::Native(_) => {}
        }
        s.end()
    }
}

/// A native item as read, its `type` first (a compacted payload has none), then its other
/// fields in the order of its map.
impl Serialize for NativeItem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut s = serializer.serialize_map(Some(self.payload.len()))?;
        if let Some(kind) = self.payload.get(key::TYPE) {
            s.serialize_entry(key::TYPE, kind)?;
        }
        for (name, value) in &self.payload {
            if name != key::TYPE {
                s.serialize_entry(name, value)?;
            }
        }
        s.end()
    }
}

impl Serialize for ContentItem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("ContentItem", 4)?;
        s.serialize_field(key::TYPE, self.type_name())?;
        match self {
            ContentItem::InputText { text } | ContentItem::OutputText { text } => {
                s.serialize_field(key::TEXT, text)?;
            }
            ContentItem::InputImage {
                image_url,
                file_id,
                detail,
            } => {
                optional(&mut s, key::IMAGE_URL, image_url.as_ref())?;
                optional(&mut s, key::FILE_ID, file_id.as_ref())?;
                optional(&mut s, key::DETAIL, detail.as_ref())?;
            }
            ContentItem::InputAudio { audio_url, file_id } => {
                optional(&mut s, key::AUDIO_URL, audio_url.as_ref())?;
                optional(&mut s, key::FILE_ID, file_id.as_ref())?;
            }
        }
        s.end()
    }
}

/// A reasoning part: `{"type":KIND,"text":..}`.
fn reasoning_part<S: Serializer>(serializer: S, kind: &str, text: &str) -> Result<S::Ok, S::Error> {
    let mut s = serializer.serialize_struct("ReasoningPart", 2)?;
    s.serialize_field(key::TYPE, kind)?;
    s.serialize_field(key::TEXT, text)?;
    s.end()
}

impl Serialize for SummaryText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        reasoning_part(serializer, content::SUMMARY_TEXT, &self.text)
    }
}

impl Serialize for ReasoningText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        reasoning_part(serializer, content::REASONING_TEXT, &self.text)
    }
}

impl Serialize for ToolOutput {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolOutput::Text(text) => serializer.serialize_str(text),
            ToolOutput::Items(items) => items.serialize(serializer),
        }
    }
}

impl Serialize for EventMsg<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("EventMsg", 3)?;
        s.serialize_field(key::TYPE, self.type_name())?;
        match self {
            EventMsg::UserMessage { message, images } => {
                s.serialize_field(key::MESSAGE, message)?;
                optional(&mut s, key::IMAGES, Some(images).filter(|i| !i.is_empty()))?;
            }
            EventMsg::AgentMessage { message, phase } => {
                s.serialize_field(key::MESSAGE, message)?;
                optional(&mut s, key::PHASE, phase.as_ref())?;
            }
        }
        s.end()
    }
}

impl Serialize for Compacted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Compacted", 2)?;
        s.serialize_field(key::MESSAGE, self.message)?;
        optional(
            &mut s,
            key::REPLACEMENT_HISTORY,
            self.replacement_history.as_ref(),
        )?;
        s.end()
    }
}

impl<P: Serialize> Serialize for Line<'_, P> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Line", 3)?;
        s.serialize_field(line::TIMESTAMP, self.timestamp)?;
        s.serialize_field(line::TYPE, self.tag)?;
        s.serialize_field(line::PAYLOAD, &self.payload)?;
        s.end()
    }
}
