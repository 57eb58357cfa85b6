//! The walk over a conversation's active path: each node to messages, reasoning, calls and
//! outputs, and notes of what the rules drop.

use serde_json::{Map, Value};

use super::files::ImageFiles;
use super::{ms, NodeMessage};
use crate::input::blocks::add_note;
use crate::input::inside::Refusal;
use crate::input::media::tool_output_content;
use crate::input::InputError;
use crate::model::transcript::{
    Content, Message, Part, ReasoningOrigin, Role, SourceNote, Thinking, ToolCall,
};
use crate::rules::template::fill;
use crate::rules::{Citations, DropOrQuarantine, KeepOrDrop, PolicyId, ToolWithoutCall};
use crate::rules::{Policies, UnresolvedImage};

/// Citation markers: `\u{e200}cite\u{e202}turn0search3\u{e201}`.
const CITE_START: char = '\u{e200}';
const CITE_END: char = '\u{e201}';

/// The call a tool node answers.
struct OpenCall {
    id: String,
}

/// The walk over the active path.
pub(super) struct Walk<'a> {
    policy: &'a Policies,
    images: &'a ImageFiles,
    pub(super) messages: Vec<Message>,
    pub(super) notes: Vec<SourceNote>,
    /// Reasoning waiting for the assistant message it explains.
    thinking: Vec<Thinking>,
    thinking_time: Option<i64>,
    /// The last call made, until a user or assistant node comes.
    call: Option<OpenCall>,
    /// The tool message being filled for that call (several tool nodes are one output).
    output_open: bool,
}

/// Text bytes of a node's content, as the reader would read them (for what it drops).
pub(super) fn node_text_bytes(content: Option<&Map<String, Value>>) -> usize {
    let Some(content) = content else {
        return 0;
    };
    let mut total = 0;
    let keys = ["text", "result", "content", "output_str"];
    let context = ["user_profile", "user_instructions", "model_set_context"];
    for key in keys.iter().chain(context.iter()) {
        if let Some(t) = content.get(*key).and_then(Value::as_str) {
            total += t.len();
        }
    }
    if let Some(parts) = content.get("parts").and_then(Value::as_array) {
        for part in parts {
            if let Some(t) = part.as_str() {
                total += t.len();
            } else if let Some(t) = part.get("text").and_then(Value::as_str) {
                total += t.len();
            }
        }
    }
    if let Some(thoughts) = content.get("thoughts").and_then(Value::as_array) {
        for thought in thoughts {
            for key in ["summary", "content"] {
                total += thought.get(key).and_then(Value::as_str).map_or(0, str::len);
            }
        }
    }
    total
}

fn text_of(content: &Map<String, Value>, key: &str) -> Option<String> {
    content.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The non-empty texts of `keys` in `content`, in that order, as parts.
fn text_parts(content: &Map<String, Value>, keys: &[&str]) -> Vec<Part> {
    keys.iter()
        .filter_map(|k| text_of(content, k))
        .filter(|t| !t.is_empty())
        .map(Part::Text)
        .collect()
}

impl<'a> Walk<'a> {
    pub(super) fn new(policy: &'a Policies, images: &'a ImageFiles) -> Walk<'a> {
        Walk {
            policy,
            images,
            messages: Vec::new(),
            notes: Vec::new(),
            thinking: Vec::new(),
            thinking_time: None,
            call: None,
            output_open: false,
        }
    }

    pub(super) fn note(&mut self, id: PolicyId, what: &str, bytes: usize) {
        add_note(&mut self.notes, id, what, 1, bytes);
    }

    /// A node dropped by `policy.hidden_node`; `bytes` of text.
    fn hidden(&mut self, what: &str, bytes: usize) -> Result<(), InputError> {
        if self.policy.hidden_node == DropOrQuarantine::Quarantine {
            return Err(InputError::RefusedByRule {
                rule: PolicyId::HiddenNode.into(),
                reason: format!("a {what}"),
            });
        }
        self.note(PolicyId::HiddenNode, what, bytes);
        Ok(())
    }

    pub(super) fn node(&mut self, id: &str, message: NodeMessage) -> Result<(), InputError> {
        let (role, tool_name) = match message.author {
            Some(author) => (author.role.unwrap_or_default(), author.name),
            None => (String::new(), None),
        };
        let recipient = message.recipient.unwrap_or_else(|| "all".to_string());
        let time = message.create_time.and_then(ms);
        let hidden = message
            .metadata
            .and_then(|m| m.is_visually_hidden_from_conversation)
            .unwrap_or(false);
        let bytes = node_text_bytes(message.content.as_ref());
        let Some(content) = message.content else {
            return self.hidden("node without content", bytes);
        };
        let kind = content
            .get("content_type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind.as_str() {
            "user_editable_context" => {
                let parts = text_parts(&content, &["user_profile", "user_instructions"]);
                return self.context_message(&kind, parts, time, bytes);
            }
            "model_editable_context" => {
                if self.policy.memory == KeepOrDrop::Drop {
                    self.note(PolicyId::Memory, "memory (model_editable_context)", bytes);
                    return Ok(());
                }
                let parts = text_parts(&content, &["model_set_context"]);
                return self.context_message(&kind, parts, time, bytes);
            }
            "reasoning_recap" => return self.hidden("reasoning_recap", bytes),
            _ => {}
        }
        if role == "system" && bytes == 0 {
            return self.hidden("empty system node", bytes);
        }
        if hidden {
            return self.hidden("hidden node", bytes);
        }
        match role.as_str() {
            "system" => {
                let parts = self.parts(&content, false);
                if parts
                    .iter()
                    .all(|p| matches!(p, Part::Text(t) if t.trim().is_empty()))
                {
                    return self.hidden("empty system node", bytes);
                }
                self.close_call();
                // Named so the rules can tell it from a system prompt (default: developer
                // context, not Codex's base instructions).
                self.push(Message {
                    role: Role::System,
                    name: Some("chatgpt:system".to_string()),
                    content: Content::Parts(parts),
                    timestamp_ms: time,
                    ..Message::default()
                });
            }
            "user" => {
                self.close_call();
                self.flush_thinking();
                let parts = self.parts(&content, false);
                self.push(Message {
                    role: Role::User,
                    content: Content::Parts(parts),
                    timestamp_ms: time,
                    ..Message::default()
                });
            }
            "assistant" if kind == "thoughts" => {
                let mut texts = Vec::new();
                if let Some(thoughts) = content.get("thoughts").and_then(Value::as_array) {
                    for thought in thoughts {
                        for key in ["summary", "content"] {
                            if let Some(t) = thought.get(key).and_then(Value::as_str) {
                                if !t.is_empty() {
                                    texts.push(t.to_string());
                                }
                            }
                        }
                    }
                } else {
                    // Some exporters write thoughts as `parts`.
                    for part in self.parts(&content, false) {
                        if let Part::Text(t) = part {
                            if !t.is_empty() {
                                texts.push(t);
                            }
                        }
                    }
                }
                if !texts.is_empty() {
                    self.thinking.push(Thinking {
                        summary: texts,
                        origin: ReasoningOrigin::ChatGpt,
                        ..Thinking::default()
                    });
                    self.thinking_time = self.thinking_time.or(time);
                }
            }
            "assistant" if recipient != "all" => {
                self.close_call();
                let text = self
                    .parts(&content, true)
                    .into_iter()
                    .filter_map(|p| match p {
                        Part::Text(t) => Some(t),
                        Part::Image { .. }
                        | Part::Audio { .. }
                        | Part::File { .. }
                        | Part::Refusal(_)
                        | Part::Unknown { .. } => None,
                    })
                    .collect::<Vec<_>>()
                    .join("");
                let json = serde_json::from_str::<Value>(&text).is_ok_and(|v| v.is_object());
                // No input at all: a function call with no arguments (`{}`, counted).
                let missing = text.trim().is_empty();
                let call_id = format!("call_{id}");
                let call = ToolCall {
                    id: Some(call_id.clone()),
                    name: recipient,
                    arguments: text,
                    custom: !json && !missing,
                    arguments_missing: missing,
                    ..ToolCall::default()
                };
                let mut m = self.assistant_message(time);
                m.tool_calls.push(call);
                self.push(m);
                self.call = Some(OpenCall { id: call_id });
            }
            "assistant" => {
                self.close_call();
                let parts = self.parts(&content, true);
                let mut m = self.assistant_message(time);
                m.content = Content::Parts(parts);
                self.push(m);
            }
            "tool" => self.tool(id, tool_name, &kind, &content, time),
            _ => {
                // An unknown role: kept as given, for policy.unknown_role.
                self.close_call();
                let parts = self.parts(&content, false);
                self.push(Message {
                    role: Role::named(role.clone()),
                    content: Content::Parts(parts),
                    timestamp_ms: time,
                    ..Message::default()
                });
            }
        }
        Ok(())
    }

    /// A context node (custom instructions, memory): a system message the rules classify.
    fn context_message(
        &mut self,
        kind: &str,
        parts: Vec<Part>,
        time: Option<i64>,
        bytes: usize,
    ) -> Result<(), InputError> {
        if parts.is_empty() {
            return self.hidden("empty context node", bytes);
        }
        self.close_call();
        self.push(Message {
            role: Role::System,
            name: Some(format!("chatgpt:{kind}")),
            content: Content::Parts(parts),
            timestamp_ms: time,
            ..Message::default()
        });
        Ok(())
    }

    /// An assistant message carrying the reasoning waiting for it.
    fn assistant_message(&mut self, time: Option<i64>) -> Message {
        Message {
            role: Role::Assistant,
            thinking: std::mem::take(&mut self.thinking),
            timestamp_ms: self.thinking_time.take().or(time),
            ..Message::default()
        }
    }

    /// Reasoning with nothing after it to explain: on an empty assistant message, for
    /// `policy.unpaired_reasoning`.
    pub(super) fn flush_thinking(&mut self) {
        if !self.thinking.is_empty() {
            let m = self.assistant_message(None);
            self.push(m);
        }
    }

    fn close_call(&mut self) {
        self.call = None;
        self.output_open = false;
    }

    fn push(&mut self, m: Message) {
        self.output_open = false;
        self.messages.push(m);
    }

    /// A tool node: the output of the open call, or a node with no call.
    fn tool(
        &mut self,
        id: &str,
        name: Option<String>,
        kind: &str,
        content: &Map<String, Value>,
        time: Option<i64>,
    ) {
        let mut parts = self.tool_parts(kind, content);
        let error = kind == "system_error";
        if self.output_open {
            if let Some(last) = self.messages.last_mut() {
                // Several tool nodes answering one call are one output, parts in order.
                let earlier = match std::mem::take(&mut last.content) {
                    Content::Text(text) => vec![Part::Text(text)],
                    Content::Parts(parts) => parts,
                    Content::Missing | Content::Null => Vec::new(),
                };
                parts.splice(0..0, earlier);
                last.content = tool_output_content(parts);
                last.tool_error |= error;
                return;
            }
        }
        let call_id = match &self.call {
            Some(call) => call.id.clone(),
            None => {
                let call_id = format!("call_{id}");
                if self.policy.tool_without_call == ToolWithoutCall::Synthesize {
                    let mut m = self.assistant_message(time);
                    m.tool_calls.push(ToolCall {
                        id: Some(call_id.clone()),
                        name: name.clone().unwrap_or_else(|| "tool".to_string()),
                        arguments: String::new(),
                        arguments_missing: true,
                        ..ToolCall::default()
                    });
                    self.push(m);
                    self.note(PolicyId::ToolWithoutCall, "tool node without a call", 0);
                }
                call_id
            }
        };
        self.push(Message {
            role: Role::Tool,
            name,
            content: tool_output_content(parts),
            tool_call_ids: vec![call_id.clone()],
            tool_error: error,
            timestamp_ms: time,
            ..Message::default()
        });
        self.output_open = true;
        self.call = Some(OpenCall { id: call_id });
    }

    /// The output parts of a tool node, by content type.
    fn tool_parts(&mut self, kind: &str, content: &Map<String, Value>) -> Vec<Part> {
        let field = match kind {
            "execution_output" | "system_error" | "tether_quote" | "sonic_webpage" => "text",
            "tether_browsing_display" => "result",
            "citable_code_output" => "output_str",
            _ => "",
        };
        if !field.is_empty() {
            let text = text_of(content, field).unwrap_or_default();
            return vec![Part::Text(text)];
        }
        if content.contains_key("parts") {
            return self.parts(content, false);
        }
        match text_of(content, "text") {
            Some(text) => vec![Part::Text(text)],
            None => vec![Part::Unknown {
                kind: kind.to_string(),
            }],
        }
    }

    /// The parts of a `text`/`multimodal_text`/`code` content (assistant text has its citation
    /// markers handled by policy).
    fn parts(&mut self, content: &Map<String, Value>, assistant: bool) -> Vec<Part> {
        let mut out = Vec::new();
        match content.get("parts").and_then(Value::as_array) {
            Some(parts) => {
                for part in parts {
                    match part {
                        Value::String(text) => out.push(Part::Text(text.clone())),
                        Value::Object(object) => out.extend(self.object_part(object)),
                        Value::Null => {}
                        other @ Value::Bool(_)
                        | other @ Value::Number(_)
                        | other @ Value::Array(_) => out.push(Part::Text(other.to_string())),
                    }
                }
            }
            None => {
                if let Some(text) = text_of(content, "text") {
                    out.push(Part::Text(text));
                } else if let Some(text) = text_of(content, "content") {
                    out.push(Part::Text(text));
                }
            }
        }
        if assistant && self.policy.citation_markers == Citations::Strip {
            for part in &mut out {
                if let Part::Text(text) = part {
                    let (stripped, count, bytes) = strip_citations(text);
                    if count > 0 {
                        *text = stripped;
                        let rule = PolicyId::CitationMarkers;
                        add_note(&mut self.notes, rule, "citation marker", count, bytes);
                    }
                }
            }
        }
        out
    }

    fn object_part(&mut self, object: &Map<String, Value>) -> Option<Part> {
        let kind = object
            .get("content_type")
            .and_then(Value::as_str)
            .unwrap_or("object");
        match kind {
            "image_asset_pointer" => {
                let pointer = object
                    .get("asset_pointer")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match self.images.resolve(pointer) {
                    Ok(url) => Some(Part::Image {
                        url: Some(url),
                        file_id: None,
                        detail: None,
                    }),
                    Err(refusal) => {
                        let rule = PolicyId::UnresolvedImage;
                        let what = match refusal {
                            Refusal::Missing => "image not in the export",
                            Refusal::Outside => "image symlink leads outside the export",
                            Refusal::Unreadable
                            | Refusal::Symlink
                            | Refusal::NotRegular
                            | Refusal::TooLarge
                            | Refusal::NotImage
                            | Refusal::NoTree => refusal.what(),
                        };
                        add_note(&mut self.notes, rule, what, 1, 0);
                        match self.policy.unresolved_image {
                            UnresolvedImage::Placeholder => {
                                let text = fill(
                                    &self.policy.unresolved_image_template,
                                    &[("pointer", pointer)],
                                );
                                Some(Part::Text(text))
                            }
                            UnresolvedImage::Drop => None,
                        }
                    }
                }
            }
            "audio_transcription" => Some(Part::Text(text_of(object, "text").unwrap_or_default())),
            other => Some(Part::Unknown {
                kind: other.to_string(),
            }),
        }
    }
}

/// `text` without its citation markers: how many, and their bytes.
fn strip_citations(text: &str) -> (String, u64, usize) {
    let mut out = String::with_capacity(text.len());
    let (mut count, mut bytes) = (0u64, 0usize);
    let mut rest = text;
    while let Some(start) = rest.find(CITE_START) {
        let Some(len) = rest[start..].find(CITE_END) else {
            break;
        };
        out.push_str(&rest[..start]);
        let end = start + len + CITE_END.len_utf8();
        bytes += end - start;
        count += 1;
        rest = &rest[end..];
    }
    out.push_str(rest);
    (out, count, bytes)
}
