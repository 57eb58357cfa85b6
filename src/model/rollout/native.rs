//! Items a Codex rollout holds, kept exactly as Codex wrote them.
//!
//! A Codex rollout read as a source is already made of Responses items: what Codex resumes
//! from. Rebuilding them from the transcript's fields would lose what those fields cannot
//! say (item ids, a call's `status` and `namespace`, an image's `detail: "original"`, a
//! `web_search_call`, a `compaction` blob), so each item travels as its own JSON object and is
//! written back unchanged. [`NativeItem::role`] is the one thing the converter decides on: the
//! place the item takes in a turn (its UI event, its call pairing, its phase).

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::wire::{content, item, key, tag};
use super::Phase;

/// The place a native item takes in a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NativeRole {
    /// A real user message: a turn boundary, shown in the UI (`user_message` event).
    User,
    /// A user message made of registered fragments: runtime context, hidden from the UI.
    ContextualUser,
    Developer,
    /// An assistant message, shown in the UI (`agent_message` event).
    Assistant,
    Reasoning,
    /// A call answered by an output with its `call_id` (`function_call`, `local_shell_call`,
    /// and, with `custom`, `custom_tool_call`).
    Call {
        custom: bool,
    },
    /// A call's output (`function_call_output`, `custom_tool_call_output`).
    Output,
    /// An item that stands on its own (web search, image generation, tool search, a
    /// `compaction` blob).
    Standalone,
    /// A `compacted` line's payload: a summary, and the history Codex resumes from instead
    /// when it holds one.
    Compacted,
}

/// One item (or `compacted` payload) as a Codex rollout holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeItem {
    pub role: NativeRole,
    /// The item's `type`, one of [`wire::item`](super::wire::item) (a compacted line's
    /// payload: its tag, `compacted`).
    pub kind: &'static str,
    /// Every field, `type` included, as Codex wrote it.
    pub payload: Map<String, Value>,
}

/// The response item types a native item may have: the names Codex reads (`wire::item`).
const KINDS: [&str; 13] = [
    item::MESSAGE,
    item::REASONING,
    item::FUNCTION_CALL,
    item::FUNCTION_CALL_OUTPUT,
    item::CUSTOM_TOOL_CALL,
    item::CUSTOM_TOOL_CALL_OUTPUT,
    item::LOCAL_SHELL_CALL,
    item::TOOL_SEARCH_CALL,
    item::TOOL_SEARCH_OUTPUT,
    item::WEB_SEARCH_CALL,
    item::IMAGE_GENERATION_CALL,
    item::COMPACTION,
    item::COMPACTION_SUMMARY,
];

/// The model's name for the response item type `name`, when Codex reads that type.
pub(crate) fn known_kind(name: &str) -> Option<&'static str> {
    KINDS.iter().copied().find(|k| *k == name)
}

impl NativeItem {
    /// Its `type` as written.
    pub fn type_name(&self) -> &'static str {
        self.kind
    }

    /// A `compacted` line's payload.
    pub fn compacted(payload: Map<String, Value>) -> NativeItem {
        NativeItem {
            role: NativeRole::Compacted,
            kind: tag::COMPACTED,
            payload,
        }
    }

    /// A `response_item` payload of a type Codex reads.
    pub fn item(role: NativeRole, payload: Map<String, Value>) -> Option<NativeItem> {
        let kind = payload
            .get(key::TYPE)
            .and_then(Value::as_str)
            .and_then(known_kind)?;
        Some(NativeItem {
            role,
            kind,
            payload,
        })
    }

    fn text_field(&self, name: &str) -> Option<&str> {
        self.payload.get(name).and_then(Value::as_str)
    }

    /// The `call_id` of a call or output.
    pub fn call_id(&self) -> Option<&str> {
        self.text_field(key::CALL_ID)
    }

    /// Writes `call_id` in place of the one read (a reused id renamed).
    pub fn set_call_id(&mut self, call_id: String) {
        self.payload
            .insert(key::CALL_ID.to_string(), Value::String(call_id));
    }

    /// A message's `role`.
    pub fn message_role(&self) -> Option<&str> {
        self.text_field(key::ROLE)
    }

    /// A message's known phase (absent, `null` or unknown: none).
    pub fn phase(&self) -> Option<Phase> {
        self.text_field(key::PHASE).and_then(Phase::parse)
    }

    /// A compacted line's summary.
    pub fn summary(&self) -> &str {
        self.text_field(key::MESSAGE).unwrap_or_default()
    }

    /// The history a compacted line replaces the earlier one with, when it holds one: its
    /// items of types Codex reads, each as a native item.
    pub fn replacement_history(&self) -> Option<Vec<NativeItem>> {
        let items = self.payload.get(key::REPLACEMENT_HISTORY)?.as_array()?;
        Some(
            items
                .iter()
                .filter_map(|i| i.as_object().cloned())
                .filter_map(|payload| NativeItem::item(NativeRole::Standalone, payload))
                .collect(),
        )
    }

    /// The text parts of a message (`input_text`, `output_text`), in order.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.payload
            .get(key::CONTENT)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|part| {
                matches!(
                    part.get(key::TYPE).and_then(Value::as_str),
                    Some(content::INPUT_TEXT | content::OUTPUT_TEXT)
                )
            })
            .filter_map(|part| part.get(key::TEXT).and_then(Value::as_str))
    }

    /// A message's texts joined by newlines, as its UI event shows them.
    pub fn joined_text(&self) -> Cow<'_, str> {
        let mut texts = self.texts();
        let Some(first) = texts.next() else {
            return Cow::Borrowed("");
        };
        let rest: Vec<&str> = texts.collect();
        if rest.is_empty() {
            return Cow::Borrowed(first);
        }
        let mut joined = first.to_string();
        for text in rest {
            joined.push('\n');
            joined.push_str(text);
        }
        Cow::Owned(joined)
    }

    /// The URLs of a user message's images, as its UI event lists them.
    pub fn image_urls(&self) -> Vec<&str> {
        self.payload
            .get(key::CONTENT)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|part| {
                part.get(key::TYPE).and_then(Value::as_str) == Some(content::INPUT_IMAGE)
            })
            .filter_map(|part| part.get(key::IMAGE_URL).and_then(Value::as_str))
            .collect()
    }

    /// The text bytes the accounting counts in the item, the same on both sides of a
    /// conversion (it is written as read): message and reasoning texts, a call's arguments
    /// or input, an output's text, a compacted line's summary.
    pub fn text_bytes(&self) -> usize {
        let parts = |name: &str| -> usize {
            self.payload
                .get(name)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|part| part.get(key::TEXT).and_then(Value::as_str))
                .map(str::len)
                .sum()
        };
        let string = |name: &str| self.text_field(name).map_or(0, str::len);
        let output = match self.payload.get(key::OUTPUT) {
            Some(Value::String(text)) => text.len(),
            Some(Value::Array(_)) => parts(key::OUTPUT),
            _ => 0,
        };
        parts(key::CONTENT)
            + parts(key::SUMMARY)
            + string(key::ARGUMENTS)
            + string(key::INPUT)
            + output
            + match self.role {
                NativeRole::Compacted => self.summary().len(),
                NativeRole::User
                | NativeRole::ContextualUser
                | NativeRole::Developer
                | NativeRole::Assistant
                | NativeRole::Reasoning
                | NativeRole::Call { .. }
                | NativeRole::Output
                | NativeRole::Standalone => 0,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn native(role: NativeRole, value: Value) -> NativeItem {
        let Value::Object(payload) = value else {
            panic!("an object");
        };
        NativeItem::item(role, payload).expect("a known type")
    }

    #[test]
    fn a_message_shows_its_texts_images_and_phase() {
        let m = native(
            NativeRole::User,
            json!({"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "original"},
                {"type": "input_text", "text": "here"}]}),
        );
        assert_eq!(m.kind, item::MESSAGE);
        assert_eq!(m.joined_text(), "look\nhere");
        assert_eq!(m.image_urls(), ["data:image/png;base64,AA"]);
        assert_eq!(m.text_bytes(), 8);
        assert_eq!(m.phase(), None);
        let a = native(
            NativeRole::Assistant,
            json!({"type": "message", "role": "assistant", "phase": "final_answer",
                   "content": [{"type": "output_text", "text": "done"}]}),
        );
        assert_eq!(a.phase(), Some(Phase::FinalAnswer));
        assert_eq!(a.joined_text(), "done");
    }

    #[test]
    fn calls_keep_their_fields_and_a_renamed_id() {
        let mut call = native(
            NativeRole::Call { custom: false },
            json!({"type": "function_call", "name": "shell", "namespace": "ns", "status": "completed",
                   "arguments": "{}", "call_id": "c1"}),
        );
        assert_eq!(call.call_id(), Some("c1"));
        call.set_call_id("c1#2".to_string());
        assert_eq!(call.payload["call_id"], "c1#2");
        assert_eq!(call.payload["namespace"], "ns");
        assert_eq!(call.text_bytes(), 2);
        let output = native(
            NativeRole::Output,
            json!({"type": "function_call_output", "call_id": "c1",
                   "output": [{"type": "input_text", "text": "abc"}]}),
        );
        assert_eq!(output.text_bytes(), 3);
    }

    #[test]
    fn unknown_types_are_not_native_and_a_compacted_line_holds_its_history() {
        let mut other = Map::new();
        other.insert("type".into(), json!("ghost_snapshot"));
        assert!(NativeItem::item(NativeRole::Standalone, other).is_none());
        let Value::Object(payload) = json!({"message": "sum", "replacement_history": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
            {"type": "ghost_snapshot"},
            {"type": "compaction", "encrypted_content": "gAAA"}]})
        else {
            panic!("an object");
        };
        let compacted = NativeItem::compacted(payload);
        assert_eq!(compacted.summary(), "sum");
        assert_eq!(compacted.text_bytes(), 3);
        let history = compacted.replacement_history().expect("a history");
        let kinds: Vec<&str> = history.iter().map(|i| i.kind).collect();
        assert_eq!(kinds, ["message", "compaction"]);
    }
}
