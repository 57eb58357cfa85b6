//! Codex rollout lines and Responses items, as Codex 0.169 reads them (see
//! `shared/spec/codex-target.md`). Here the types `convert` writes, each declared once in a
//! table ([`table`]: field order is the order written) that gives its serde derive and its
//! fast writer; in [`view`], the same lines read back, for `validate`.
//!
//! The writer enums hold only what the converter writes, so that every `match` on them in the
//! pipeline stays exhaustive; the views add what Codex itself writes and an `Other` case for
//! what it does not know. Round-trip tests in [`view`] keep the two in step. The names the
//! readers look for are in [`wire`].

use std::borrow::Cow;

use serde::ser::{Serialize, Serializer};

pub(crate) mod generation;
pub(crate) mod native;
pub(crate) mod table;
pub(crate) mod view;
pub(crate) mod wire;

pub(crate) use native::{NativeItem, NativeRole};

use table::{wire_enum, wire_names, wire_struct, JsonOut, WriteJson};
use wire::key;

/// The folder of a Codex home that holds the live sessions.
pub(crate) const SESSIONS_DIR: &str = "sessions";

/// Message roles written in response items.
pub(crate) const ROLE_USER: &str = wire::role::USER;
pub(crate) const ROLE_ASSISTANT: &str = wire::role::ASSISTANT;
pub(crate) const ROLE_DEVELOPER: &str = wire::role::DEVELOPER;
pub(crate) const ROLE_SYSTEM: &str = wire::role::SYSTEM;

wire_struct! {
    /// The first line of every rollout. The fields every session shares (the rule file's
    /// `[session]`) are borrowed from the rules: four copies a record fewer.
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct SessionMeta<'a> {
        pub id: String = "id",
        pub timestamp: String = "timestamp",
        pub cwd: Cow<'a, str> = "cwd",
        pub originator: Cow<'a, str> = "originator",
        pub cli_version: Cow<'a, str> = "cli_version",
        pub source: Option<Cow<'a, str>> = "source" if "Option::is_none",
        pub model_provider: Option<Cow<'a, str>> = "model_provider" if "Option::is_none",
        pub base_instructions: Option<BaseInstructions> = "base_instructions" if "Option::is_none",
        /// The session's git facts (Codex `GitInfo`): the branch, and from a Codex rollout also
        /// the commit and the repository.
        pub git: Option<GitInfo> = "git" if "Option::is_none",
    }
}

wire_struct! {
    /// `session_meta.git` as Codex reads it (each field optional).
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct GitInfo {
        pub commit_hash: Option<String> = "commit_hash" if "Option::is_none",
        pub branch: Option<String> = "branch" if "Option::is_none",
        pub repository_url: Option<String> = "repository_url" if "Option::is_none",
    }
}

wire_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct BaseInstructions {
        /// A system prompt: often the longest text of a small record.
        pub text: String = "text",
    }
}

wire_names! {
    /// An assistant message's phase, as Codex 0.169 knows them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Phase {
        Commentary = "commentary",
        FinalAnswer = "final_answer",
        PartialAnswer = "partial_answer",
    }
}

wire_enum! {
    /// A Responses item as written in a `response_item` line.
    #[derive(Debug, Clone, PartialEq)]
    pub enum ResponseItem tag "type" {
        Message = "message" {
            role: &'static str = "role",
            content: Vec<ContentItem> = "content",
            phase: Option<Phase> = "phase" if "Option::is_none",
        },
        Reasoning = "reasoning" {
            summary: Vec<SummaryText> = "summary",
            content: Option<Vec<ReasoningText>> = "content",
            encrypted_content: Option<String> = "encrypted_content",
        },
        FunctionCall = "function_call" {
            name: String = "name",
            arguments: String = "arguments",
            call_id: String = "call_id",
        },
        FunctionCallOutput = "function_call_output" {
            call_id: String = "call_id",
            output: ToolOutput = "output",
        },
        CustomToolCall = "custom_tool_call" {
            call_id: String = "call_id",
            name: String = "name",
            input: String = "input",
        },
        CustomToolCallOutput = "custom_tool_call_output" {
            call_id: String = "call_id",
            output: ToolOutput = "output",
        };
        /// An item read from a Codex rollout, written as it was read.
        untagged Native(NativeItem)
    }
}

wire_enum! {
    /// Message content items Codex accepts.
    #[derive(Debug, Clone, PartialEq)]
    pub enum ContentItem tag "type" {
        InputText = "input_text" {
            text: String = "text" with JsonOut::mark_text,
        },
        InputImage = "input_image" {
            image_url: Option<String> = "image_url" if "Option::is_none",
            file_id: Option<String> = "file_id" if "Option::is_none",
            detail: Option<String> = "detail" if "Option::is_none",
        },
        InputAudio = "input_audio" {
            audio_url: Option<String> = "audio_url" if "Option::is_none",
            file_id: Option<String> = "file_id" if "Option::is_none",
        },
        OutputText = "output_text" {
            text: String = "text" with JsonOut::mark_text,
        },
    }
}

wire_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct SummaryText tag "type" = "summary_text" {
        pub text: String = "text",
    }
}

wire_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct ReasoningText tag "type" = "reasoning_text" {
        pub text: String = "text",
    }
}

/// A tool output: a bare string or a bare array of content items (never an object).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum ToolOutput {
    Text(String),
    Items(Vec<ContentItem>),
}

impl WriteJson for ToolOutput {
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        match self {
            ToolOutput::Text(text) => text.write_json(out),
            ToolOutput::Items(items) => items.write_json(out),
        }
    }
}

wire_enum! {
    /// UI events written beside the items, so the session shows turns in Codex. They borrow the
    /// text of the item they follow, and copy the bytes it was written as
    /// ([`JsonOut::copied_text`]).
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) enum EventMsg<'a> tag "type" {
        UserMessage = "user_message" {
            message: Cow<'a, str> = "message" with JsonOut::copied_text,
            images: Vec<&'a str> = "images" if "Vec::is_empty",
        },
        AgentMessage = "agent_message" {
            message: Cow<'a, str> = "message" with JsonOut::copied_text,
            phase: Option<Phase> = "phase" if "Option::is_none",
        },
    }
}

wire_struct! {
    /// A `compacted` line's payload: a summary standing in for earlier history.
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct Compacted<'a> {
        pub message: &'a str = "message",
        /// The history Codex resumes from instead of rebuilding one (`None`: Codex rebuilds it
        /// from the user messages before and the summary).
        pub replacement_history: Option<Vec<ResponseItem>> = "replacement_history" if "Option::is_none",
    }
}

#[cfg(test)]
/// One rollout line: `{"timestamp":..,"type":..,"payload":..}`. Written by
/// `convert::render`'s clock, which keeps the head of the next line; this is its reference.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Line<'a, P: serde::Serialize> {
    pub timestamp: &'a str,
    /// One of [`wire::tag`].
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

impl WriteJson for NativeItem {
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        out.serde(self)
    }
}
