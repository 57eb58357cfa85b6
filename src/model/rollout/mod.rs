//! Codex rollout lines and Responses items, as Codex 0.169 reads them (see
//! `shared/spec/codex-target.md`). Here the types `convert` writes (field order here is the
//! order written); in [`view`], the same lines read back, for `validate`.
//!
//! The writer enums hold only what the converter writes, so that every `match` on them in the
//! pipeline stays exhaustive; the views add what Codex itself writes and an `Other` case for
//! what it does not know. Round-trip tests in [`view`] keep the two in step.

use std::borrow::Cow;

use serde::Serialize;

pub mod view;

/// Line tags of a rollout file.
/// The folder of a Codex home that holds the live sessions.
pub const SESSIONS_DIR: &str = "sessions";
pub const TAG_SESSION_META: &str = "session_meta";
pub const TAG_RESPONSE_ITEM: &str = "response_item";
pub const TAG_EVENT_MSG: &str = "event_msg";
pub const TAG_COMPACTED: &str = "compacted";
pub const TAG_TURN_CONTEXT: &str = "turn_context";
/// Tags Codex 0.169 writes when it runs a turn; an importer does not write them.
pub const TAG_WORLD_STATE: &str = "world_state";
pub const TAG_TOKEN_USAGE_RECORD: &str = "token_usage_record";

/// Message roles written in response items.
pub const ROLE_USER: &str = "user";
pub const ROLE_ASSISTANT: &str = "assistant";
pub const ROLE_DEVELOPER: &str = "developer";
pub const ROLE_SYSTEM: &str = "system";

/// Assistant phases Codex 0.169 knows.
pub const KNOWN_PHASES: [&str; 3] = ["commentary", "final_answer", "partial_answer"];

/// The first line of every rollout.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionMeta {
    pub id: String,
    pub timestamp: String,
    pub cwd: String,
    pub originator: String,
    pub cli_version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_instructions: Option<BaseInstructions>,
    /// The session's git facts (Codex `GitInfo`); only the branch is known from sources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git: Option<GitInfo>,
}

/// `session_meta.git` as Codex reads it (`commit_hash`, `branch`, `repository_url`, each
/// optional): sources only say the branch.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GitInfo {
    pub branch: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BaseInstructions {
    /// A system prompt: often the longest text of a small record.
    #[serde(serialize_with = "crate::model::json::text")]
    pub text: String,
}

/// An assistant message's phase.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Commentary,
    FinalAnswer,
    PartialAnswer,
}

impl Phase {
    pub fn parse(text: &str) -> Option<Phase> {
        match text {
            "commentary" => Some(Phase::Commentary),
            "final_answer" => Some(Phase::FinalAnswer),
            "partial_answer" => Some(Phase::PartialAnswer),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Commentary => "commentary",
            Phase::FinalAnswer => "final_answer",
            Phase::PartialAnswer => "partial_answer",
        }
    }
}

/// A Responses item as written in a `response_item` line.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseItem {
    Message {
        role: &'static str,
        content: Vec<ContentItem>,
        #[serde(skip_serializing_if = "Option::is_none")]
        phase: Option<Phase>,
    },
    Reasoning {
        summary: Vec<SummaryText>,
        content: Option<Vec<ReasoningText>>,
        encrypted_content: Option<String>,
    },
    FunctionCall {
        name: String,
        #[serde(serialize_with = "crate::model::json::text")]
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
        #[serde(serialize_with = "crate::model::json::text")]
        input: String,
    },
    CustomToolCallOutput {
        call_id: String,
        output: ToolOutput,
    },
}

/// Message content items Codex accepts.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentItem {
    InputText {
        #[serde(serialize_with = "crate::model::json::text")]
        text: String,
    },
    InputImage {
        #[serde(skip_serializing_if = "Option::is_none")]
        image_url: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        file_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    InputAudio {
        #[serde(skip_serializing_if = "Option::is_none")]
        audio_url: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        file_id: Option<String>,
    },
    OutputText {
        #[serde(serialize_with = "crate::model::json::text")]
        text: String,
    },
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename = "summary_text")]
pub struct SummaryText {
    pub text: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename = "reasoning_text")]
pub struct ReasoningText {
    pub text: String,
}

/// A tool output: a bare string or a bare array of content items (never an object).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum ToolOutput {
    Text(#[serde(serialize_with = "crate::model::json::text")] String),
    Items(Vec<ContentItem>),
}

/// UI events written beside the items, so the session shows turns in Codex. They borrow the
/// text of the item they follow.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventMsg<'a> {
    UserMessage {
        #[serde(serialize_with = "crate::model::json::text")]
        message: Cow<'a, str>,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        images: Vec<&'a str>,
    },
    AgentMessage {
        #[serde(serialize_with = "crate::model::json::text")]
        message: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        phase: Option<Phase>,
    },
}

/// A `compacted` line's payload: a summary standing in for earlier history.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Compacted<'a> {
    pub message: &'a str,
    /// The history Codex resumes from instead of rebuilding one (`None`: Codex rebuilds it
    /// from the user messages before and the summary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacement_history: Option<Vec<ResponseItem>>,
}

/// One rollout line: `{"timestamp":..,"type":..,"payload":..}`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Line<'a, P: Serialize> {
    pub timestamp: &'a str,
    #[serde(rename = "type")]
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
