//! Helpers for the converter's unit tests: transcripts written in a line, and the items a walk
//! makes of them, as whole lists to compare.

use super::build::{build, Built};
use crate::model::rollout::{ContentItem, ResponseItem, ToolOutput};
use crate::model::transcript::{Content, Message, Role, ToolCall, Transcript};
use crate::rules::RuleSet;

pub(super) fn message(role: &str, text: &str) -> Message {
    Message {
        role: Role::named(role.to_string()),
        content: Content::Text(text.to_string()),
        ..Message::default()
    }
}

pub(super) fn call(id: Option<&str>, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.map(str::to_string),
        name: name.to_string(),
        arguments: arguments.to_string(),
        ..ToolCall::default()
    }
}

/// Walks `messages` (indexed in order) with the built-in rules.
pub(super) fn walk(messages: Vec<Message>) -> Built {
    walk_with(messages, &RuleSet::builtin().expect("built-in rules load"))
}

pub(super) fn walk_with(messages: Vec<Message>, rules: &RuleSet) -> Built {
    let messages = messages
        .into_iter()
        .enumerate()
        .map(|(index, m)| Message { index, ..m })
        .collect();
    let mut transcript = Transcript {
        messages,
        ..Transcript::default()
    };
    build(&mut transcript, rules, "test.jsonl").expect("walk converts")
}

/// The response items of a walk (compacted lines left out).
pub(super) fn items(built: &Built) -> Vec<ResponseItem> {
    built
        .items
        .iter()
        .filter_map(|item| match &item.payload {
            super::OutPayload::Item(item) => Some(item.clone()),
            super::OutPayload::Compacted(_)
            | super::OutPayload::CompactedReplacing(_)
            | super::OutPayload::CompactedNative(_) => None,
        })
        .collect()
}

/// The rule ids of a walk's decisions, in order.
pub(super) fn rules_fired(built: &Built) -> Vec<String> {
    built.decisions.iter().map(|d| d.rule.to_string()).collect()
}

pub(super) fn text_message(role: &'static str, texts: &[&str]) -> ResponseItem {
    let content = texts
        .iter()
        .map(|t| match role {
            "assistant" => ContentItem::OutputText {
                text: t.to_string(),
            },
            _ => ContentItem::InputText {
                text: t.to_string(),
            },
        })
        .collect();
    ResponseItem::Message {
        role,
        content,
        phase: None,
    }
}

pub(super) fn function_call(call_id: &str, name: &str, arguments: &str) -> ResponseItem {
    ResponseItem::FunctionCall {
        name: name.to_string(),
        arguments: arguments.to_string(),
        call_id: call_id.to_string(),
    }
}

pub(super) fn output(call_id: &str, text: &str) -> ResponseItem {
    ResponseItem::FunctionCallOutput {
        call_id: call_id.to_string(),
        output: ToolOutput::Text(text.to_string()),
    }
}
