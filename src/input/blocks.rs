//! Anthropic content blocks to messages: the one mapper the Anthropic Messages API logs and
//! Claude Code sessions share.
//!
//! In: a role and an Anthropic `content` (a string or a list of blocks), and the policies. Out:
//! model [`Message`]s in block order, plus [`SourceNote`]s for what was dropped or transformed
//! by rule. A pure function: no I/O, no state.
//!
//! - `text` → a text part; `image` (base64 → a `data:` URL, `url` passed through, `file` by
//!   id) → an image part; `document` → its text inlined (`policy.text_document`, text sources
//!   only) or a file part (then `policy.file_part` decides).
//! - `tool_result` → a tool message (`tool_call_ids: [tool_use_id]`, content a string or parts
//!   with images, `tool_error` from `is_error`).
//! - `tool_use` → a call (`arguments` the JSON of `input`); `thinking` → [`Message::thinking`]
//!   with origin Anthropic, its `signature` never kept (`builtin.thinking-signature`);
//!   `redacted_thinking` dropped (`builtin.redacted-thinking`).
//! - server-tool blocks (`server_tool_use`, `web_search_tool_result`, `mcp_tool_use`, ...):
//!   `policy.server_tool` (a call and its output, a text note, or dropped).
//! - any other block: an unknown part, which `policy.unknown_part` decides.
//!
//! Order is kept: thinking after text or calls, or text after calls, starts a new message of the
//! same role, and a tool result or server-tool result splits the message it interrupts.
//! Messages are numbered by the [`TranscriptBuilder`](super::builder::TranscriptBuilder) they
//! are handed to, not here. Merging blocks of one API message spread over several lines (Claude Code)
//! is the caller's business: map the merged content once, or map each line and concatenate.

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

use crate::model::transcript::{
    Content, Message, Part, ReasoningOrigin, Role, SourceNote, Thinking, ToolCall,
};
use crate::rules::policy::{Policies, ServerTool, TextDocument};
use crate::rules::template::fill;
use crate::rules::RuleRef;
use crate::rules::{Builtin, PolicyId};

/// What a content became.
#[derive(Debug, Clone, Default)]
pub(crate) struct Mapped {
    pub messages: Vec<Message>,
    pub notes: Notes,
}

/// Maps one Anthropic `content` of `role` to messages.
pub(crate) fn map_content(role: Role, content: Value, policy: &Policies) -> Mapped {
    let mut builder = Builder {
        role,
        policy,
        out: Mapped::default(),
        current: None,
    };
    match content {
        Value::String(text) => builder.part(Part::Text(text)),
        Value::Array(blocks) => {
            for block in blocks {
                builder.block(block);
            }
        }
        Value::Null => {
            builder.open();
            if let Some(m) = builder.current.as_mut() {
                m.content = Content::Null;
            }
        }
        other @ Value::Bool(_) | other @ Value::Number(_) | other @ Value::Object(_) => {
            // A lone block object, as some loggers write it.
            builder.block(other);
        }
    }
    builder.flush();
    builder.out
}

/// Adds `count` to the note with the same rule and what, or appends one. A search: for a list
/// of the few notes the code names; one whose `what` the input names (a block or item type)
/// is gathered in [`Notes`].
pub(crate) fn add_note(
    notes: &mut Vec<SourceNote>,
    rule: impl Into<RuleRef>,
    what: &str,
    count: u64,
    bytes: usize,
) {
    let rule = rule.into();
    if let Some(note) = notes.iter_mut().find(|n| n.rule == rule && n.what == what) {
        note.count += count;
        note.bytes_dropped += bytes;
        return;
    }
    notes.push(SourceNote {
        rule,
        what: what.to_string(),
        count,
        bytes_dropped: bytes,
    });
}

/// Notes whose `what` the input can name (`{kind} block`, `{kind} item dropped`), as
/// [`add_note`] gathers them: each rule and what once, with its counts, in the order first
/// seen. An index finds a note again, so N blocks of N types are not an O(N²) search.
#[derive(Debug, Clone, Default)]
pub(crate) struct Notes {
    list: Vec<SourceNote>,
    /// Each rule's whats, with their note's place in `list`.
    index: FxHashMap<RuleRef, FxHashMap<String, usize>>,
}

impl Notes {
    /// Adds `count` and `bytes` to the note of `rule` and `what`, or appends one.
    pub(crate) fn add(&mut self, rule: impl Into<RuleRef>, what: &str, count: u64, bytes: usize) {
        let rule = rule.into();
        let at = self.index.get(&rule).and_then(|whats| whats.get(what));
        if let Some(note) = at.and_then(|&at| self.list.get_mut(at)) {
            note.count += count;
            note.bytes_dropped += bytes;
            return;
        }
        let whats = self.index.entry(rule.clone()).or_default();
        whats.insert(what.to_string(), self.list.len());
        self.list.push(SourceNote {
            rule,
            what: what.to_string(),
            count,
            bytes_dropped: bytes,
        });
    }

    /// Adds each of `notes`, in order.
    pub(crate) fn merge(&mut self, notes: impl IntoIterator<Item = SourceNote>) {
        for note in notes {
            self.add(&note.rule, &note.what, note.count, note.bytes_dropped);
        }
    }

    pub(crate) fn into_vec(self) -> Vec<SourceNote> {
        self.list
    }
}

impl std::ops::Deref for Notes {
    type Target = [SourceNote];

    fn deref(&self) -> &[SourceNote] {
        &self.list
    }
}

impl IntoIterator for Notes {
    type Item = SourceNote;
    type IntoIter = std::vec::IntoIter<SourceNote>;

    fn into_iter(self) -> Self::IntoIter {
        self.list.into_iter()
    }
}

/// Whether a block type is a server tool's use (`server_tool_use`, `mcp_tool_use`).
fn is_server_use(kind: &str) -> bool {
    kind == "server_tool_use" || kind == "mcp_tool_use"
}

/// Whether a block type is a server tool's result (`web_search_tool_result`,
/// `code_execution_tool_result`, `mcp_tool_result`, `web_fetch_tool_result`, ...).
fn is_server_result(kind: &str) -> bool {
    kind != "tool_result" && kind.ends_with("_tool_result")
}

struct Builder<'a> {
    role: Role,
    policy: &'a Policies,
    out: Mapped,
    current: Option<Message>,
}

fn take_str(map: &mut Map<String, Value>, key: &str) -> Option<String> {
    match map.get_mut(key) {
        Some(Value::String(s)) => Some(std::mem::take(s)),
        _ => None,
    }
}

impl Builder<'_> {
    fn open(&mut self) -> &mut Message {
        let role = &self.role;
        self.current.get_or_insert_with(|| Message {
            role: role.clone(),
            content: Content::Missing,
            ..Message::default()
        })
    }

    fn flush(&mut self) {
        if let Some(message) = self.current.take() {
            self.out.messages.push(message);
        }
    }

    fn has_body(&self) -> bool {
        self.current.as_ref().is_some_and(|m| {
            !m.tool_calls.is_empty() || !matches!(m.content, Content::Missing | Content::Null)
        })
    }

    fn has_calls(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|m| !m.tool_calls.is_empty())
    }

    fn note(&mut self, rule: impl Into<RuleRef>, what: &str, bytes: usize) {
        self.out.notes.add(rule, what, 1, bytes);
    }

    /// A content part; text after calls starts a new message.
    fn part(&mut self, part: Part) {
        if self.has_calls() {
            self.flush();
        }
        let message = self.open();
        match &mut message.content {
            Content::Parts(parts) => parts.push(part),
            slot @ Content::Missing | slot @ Content::Null | slot @ Content::Text(_) => {
                *slot = Content::Parts(vec![part])
            }
        }
    }

    fn thinking(&mut self, thinking: Thinking) {
        if self.has_body() {
            self.flush();
        }
        self.open().thinking.push(thinking);
    }

    fn call(&mut self, call: ToolCall) {
        self.open().tool_calls.push(call);
    }

    /// A message of its own (a tool result) between what came before and after it.
    fn own_message(&mut self, message: Message) {
        self.flush();
        self.out.messages.push(message);
    }

    fn block(&mut self, block: Value) {
        let Value::Object(mut map) = block else {
            let kind = match block {
                Value::String(text) => return self.part(Part::Text(text)),
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                Value::Number(_) => "number",
                Value::Array(_) => "list",
                Value::Object(_) => "object",
            };
            return self.part(Part::Unknown {
                kind: kind.to_string(),
            });
        };
        let kind = map
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("(no type)")
            .to_string();
        match kind.as_str() {
            "text" => {
                let text = take_str(&mut map, "text").unwrap_or_default();
                self.part(Part::Text(text));
            }
            "image" | "document" => {
                let parts = media_part(&kind, map, self.policy, &mut self.out.notes);
                for part in parts {
                    self.part(part);
                }
            }
            "tool_use" => {
                let call = tool_call(&mut map);
                self.call(call);
            }
            "tool_result" => {
                let message = self.tool_result(map);
                self.own_message(message);
            }
            "thinking" => {
                if map
                    .get("signature")
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty())
                {
                    self.note(Builtin::ThinkingSignature, "thinking signature", 0);
                }
                let text = take_str(&mut map, "thinking").unwrap_or_default();
                self.thinking(Thinking {
                    summary: Vec::new(),
                    content: vec![text],
                    encrypted: None,
                    origin: ReasoningOrigin::Anthropic,
                });
            }
            "redacted_thinking" => {
                self.note(Builtin::RedactedThinking, "redacted_thinking block", 0);
            }
            k if is_server_use(k) || is_server_result(k) => self.server_tool(&kind, map),
            _ => self.part(Part::Unknown { kind }),
        }
    }

    fn tool_result(&mut self, mut map: Map<String, Value>) -> Message {
        let id = take_str(&mut map, "tool_use_id");
        let is_error = map.get("is_error").and_then(Value::as_bool) == Some(true);
        let content = match map.remove("content") {
            None | Some(Value::Null) => Content::Text(String::new()),
            Some(Value::String(text)) => Content::Text(text),
            Some(Value::Array(blocks)) => {
                let mut parts = Vec::new();
                for block in blocks {
                    parts.extend(self.inner_part(block));
                }
                Content::Parts(parts)
            }
            Some(other) => Content::Parts(self.inner_part(other)),
        };
        Message {
            role: Role::Tool,
            content,
            tool_call_ids: id.into_iter().collect(),
            tool_error: is_error,
            ..Message::default()
        }
    }

    /// A block inside a tool result: text, image or document; anything else unknown.
    fn inner_part(&mut self, block: Value) -> Vec<Part> {
        match block {
            Value::String(text) => vec![Part::Text(text)],
            Value::Object(mut map) => {
                let kind = map
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("(no type)")
                    .to_string();
                match kind.as_str() {
                    "text" => vec![Part::Text(take_str(&mut map, "text").unwrap_or_default())],
                    "image" | "document" => {
                        media_part(&kind, map, self.policy, &mut self.out.notes)
                    }
                    _ => vec![Part::Unknown { kind }],
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => {
                vec![Part::Unknown {
                    kind: "non-object".to_string(),
                }]
            }
        }
    }

    fn server_tool(&mut self, kind: &str, mut map: Map<String, Value>) {
        let rule = PolicyId::ServerTool;
        match self.policy.server_tool {
            ServerTool::Drop => self.note(rule, &format!("{kind} block"), 0),
            ServerTool::Text => {
                let name = map
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let body = if is_server_use(kind) {
                    map.remove("input")
                } else {
                    map.remove("content")
                }
                .unwrap_or(Value::Null);
                let json = body.to_string();
                let text = fill(
                    &self.policy.server_tool_template,
                    &[("type", kind), ("name", &name), ("json", &json)],
                );
                self.note(rule, &format!("{kind} block as text"), 0);
                self.part(Part::Text(text));
            }
            ServerTool::Call => {
                if is_server_use(kind) {
                    let call = tool_call(&mut map);
                    self.note(rule, &format!("{kind} block as a call"), 0);
                    self.call(call);
                } else {
                    let id = take_str(&mut map, "tool_use_id");
                    let content = map.remove("content").unwrap_or(Value::Null);
                    let is_error = map.get("is_error").and_then(Value::as_bool) == Some(true)
                        || content
                            .get("type")
                            .and_then(Value::as_str)
                            .is_some_and(|t| t.ends_with("_error"));
                    let content = match content {
                        Value::String(text) => Content::Text(text),
                        Value::Array(blocks)
                            if blocks
                                .iter()
                                .all(|b| b.get("type").and_then(Value::as_str) == Some("text")) =>
                        {
                            let mut parts = Vec::new();
                            for block in blocks {
                                parts.extend(self.inner_part(block));
                            }
                            Content::Parts(parts)
                        }
                        other @ Value::Null
                        | other @ Value::Bool(_)
                        | other @ Value::Number(_)
                        | other @ Value::Array(_)
                        | other @ Value::Object(_) => Content::Text(other.to_string()),
                    };
                    self.note(rule, &format!("{kind} block as a call output"), 0);
                    self.own_message(Message {
                        role: Role::Tool,
                        content,
                        tool_call_ids: id.into_iter().collect(),
                        tool_error: is_error,
                        ..Message::default()
                    });
                }
            }
        }
    }
}

/// `tool_use{id, name, input}` (or a server tool's use) as a call.
fn tool_call(map: &mut Map<String, Value>) -> ToolCall {
    let id = take_str(map, "id");
    let name = take_str(map, "name").unwrap_or_default();
    let (arguments, from_object, missing) = match map.remove("input") {
        None | Some(Value::Null) => (String::new(), false, true),
        Some(Value::String(text)) => (text, false, false),
        Some(value) => {
            let object = value.is_object();
            (value.to_string(), object, false)
        }
    };
    ToolCall {
        id,
        name,
        arguments,
        arguments_from_object: from_object,
        arguments_missing: missing,
        custom: false,
    }
}

/// An `image` or `document` block as parts.
fn media_part(
    kind: &str,
    mut map: Map<String, Value>,
    policy: &Policies,
    notes: &mut Notes,
) -> Vec<Part> {
    let mut source = match map.remove("source") {
        Some(Value::Object(source)) => source,
        _ => Map::new(),
    };
    let source_type = source
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let title = take_str(&mut map, "title");
    if kind == "image" {
        return vec![match source_type.as_str() {
            "base64" => {
                let media = take_str(&mut source, "media_type").unwrap_or_default();
                let data = take_str(&mut source, "data").unwrap_or_default();
                Part::Image {
                    url: Some(format!("data:{media};base64,{data}")),
                    file_id: None,
                    detail: None,
                }
            }
            "url" => Part::Image {
                url: take_str(&mut source, "url"),
                file_id: None,
                detail: None,
            },
            "file" => Part::Image {
                url: None,
                file_id: take_str(&mut source, "file_id"),
                detail: None,
            },
            other => Part::Unknown {
                kind: format!(
                    "image ({} source)",
                    if other.is_empty() { "no" } else { other }
                ),
            },
        }];
    }
    // A document.
    match source_type.as_str() {
        "text" if policy.text_document == TextDocument::Inline => {
            notes.add(PolicyId::TextDocument, "text document inlined", 1, 0);
            vec![Part::Text(
                take_str(&mut source, "data").unwrap_or_default(),
            )]
        }
        "content" if policy.text_document == TextDocument::Inline => {
            // A document whose source is a list of blocks: its text blocks, in order.
            let blocks = match source.remove("content") {
                Some(Value::Array(blocks)) => blocks,
                Some(Value::String(text)) => vec![Value::String(text)],
                _ => Vec::new(),
            };
            notes.add(PolicyId::TextDocument, "text document inlined", 1, 0);
            blocks
                .into_iter()
                .map(|b| match b {
                    Value::String(text) => Part::Text(text),
                    Value::Object(mut m) => match take_str(&mut m, "text") {
                        Some(text) => Part::Text(text),
                        None => Part::Unknown {
                            kind: "document content block".to_string(),
                        },
                    },
                    Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => {
                        Part::Unknown {
                            kind: "document content block".to_string(),
                        }
                    }
                })
                .collect()
        }
        _ => {
            let data_len = source
                .get("data")
                .and_then(Value::as_str)
                .map_or(0, str::len);
            let filename = title
                .or_else(|| take_str(&mut source, "url"))
                .or_else(|| take_str(&mut source, "file_id"))
                .or_else(|| take_str(&mut source, "media_type"))
                .or_else(|| Some("document".to_string()));
            vec![Part::File {
                filename,
                file_id: None,
                data_len,
            }]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RuleSet;
    use serde_json::json;

    fn policies() -> Policies {
        RuleSet::builtin().unwrap().policy
    }

    fn map(role: &str, content: Value) -> Mapped {
        map_content(Role::named(role.to_string()), content, &policies())
    }

    fn texts(m: &Message) -> Vec<&str> {
        m.content.texts()
    }

    #[test]
    fn a_string_is_one_text_part() {
        let out = map("user", json!("hello"));
        assert_eq!(out.messages.len(), 1);
        assert_eq!(out.messages[0].role.as_str(), "user");
        assert_eq!(
            out.messages[0].content,
            Content::Parts(vec![Part::Text("hello".into())])
        );
        assert!(out.notes.is_empty());
    }

    #[test]
    fn images_become_data_urls_or_pass_their_url() {
        let out = map(
            "user",
            json!([
                {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.jpg"}},
            ]),
        );
        assert_eq!(
            out.messages[0].content,
            Content::Parts(vec![
                Part::Text("look".into()),
                Part::Image {
                    url: Some("data:image/png;base64,iVBO".into()),
                    file_id: None,
                    detail: None
                },
                Part::Image {
                    url: Some("https://x/y.jpg".into()),
                    file_id: None,
                    detail: None
                },
            ])
        );
    }

    #[test]
    fn text_documents_are_inlined_and_others_are_file_parts() {
        let out = map(
            "user",
            json!([
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "the doc"}},
                {"type": "document", "source": {"type": "url", "url": "https://pdfobject.com/pdf/sample.pdf"}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}, "title": "spec.pdf"},
            ]),
        );
        assert_eq!(
            out.messages[0].content,
            Content::Parts(vec![
                Part::Text("the doc".into()),
                Part::File {
                    filename: Some("https://pdfobject.com/pdf/sample.pdf".into()),
                    file_id: None,
                    data_len: 0
                },
                Part::File {
                    filename: Some("spec.pdf".into()),
                    file_id: None,
                    data_len: 8
                },
            ])
        );
        assert_eq!(out.notes[0].rule.as_str(), "policy.text_document");
        let mut as_files = policies();
        as_files.text_document = TextDocument::FilePart;
        let out = map_content(
            Role::User,
            json!([{"type": "document", "source": {"type": "text", "data": "the doc"}}]),
            &as_files,
        );
        assert!(matches!(
            &out.messages[0].content,
            Content::Parts(p) if matches!(p[0], Part::File { .. })
        ));
    }

    #[test]
    fn tool_results_are_tool_messages_in_order() {
        let out = map(
            "user",
            json!([
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true, "content": [
                    {"type": "text", "text": "boom"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"}},
                ]},
                {"type": "text", "text": "and then?"},
            ]),
        );
        let m = &out.messages;
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].role.as_str(), "tool");
        assert_eq!(m[0].tool_call_ids, ["toolu_1"]);
        assert_eq!(m[0].content, Content::Text("42".into()));
        assert!(!m[0].tool_error);
        assert_eq!(m[1].tool_call_ids, ["toolu_2"]);
        assert!(m[1].tool_error);
        assert_eq!(
            m[1].content,
            Content::Parts(vec![
                Part::Text("boom".into()),
                Part::Image {
                    url: Some("data:image/jpeg;base64,/9j/".into()),
                    file_id: None,
                    detail: None
                },
            ])
        );
        assert_eq!(
            (m[2].role.as_str(), texts(&m[2])),
            ("user", vec!["and then?"])
        );
    }

    #[test]
    fn thinking_text_and_calls_make_one_assistant_message_without_the_signature() {
        let out = map(
            "assistant",
            json!([
                {"type": "thinking", "thinking": "let me see", "signature": "EqEE"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"q": 1}},
                {"type": "tool_use", "id": "toolu_2", "name": "get", "input": {}},
            ]),
        );
        assert_eq!(out.messages.len(), 1);
        let m = &out.messages[0];
        assert_eq!(
            m.thinking,
            vec![Thinking {
                summary: vec![],
                content: vec!["let me see".into()],
                encrypted: None,
                origin: ReasoningOrigin::Anthropic,
            }]
        );
        assert_eq!(texts(m), vec!["Checking."]);
        assert_eq!(
            m.tool_calls,
            vec![
                ToolCall {
                    id: Some("toolu_1".into()),
                    name: "get".into(),
                    arguments: r#"{"q":1}"#.into(),
                    arguments_from_object: true,
                    ..ToolCall::default()
                },
                ToolCall {
                    id: Some("toolu_2".into()),
                    name: "get".into(),
                    arguments: "{}".into(),
                    arguments_from_object: true,
                    ..ToolCall::default()
                },
            ]
        );
        assert_eq!(
            out.notes.to_vec(),
            vec![SourceNote {
                rule: crate::rules::Builtin::ThinkingSignature.into(),
                what: "thinking signature".into(),
                count: 1,
                bytes_dropped: 0,
            }]
        );
    }

    #[test]
    fn text_after_a_call_or_thinking_after_text_starts_a_new_message() {
        let out = map(
            "assistant",
            json!([
                {"type": "text", "text": "a"},
                {"type": "thinking", "thinking": "t"},
                {"type": "tool_use", "id": "c", "name": "n", "input": {}},
                {"type": "text", "text": "b"},
            ]),
        );
        let m = &out.messages;
        assert_eq!(m.len(), 3);
        assert_eq!(texts(&m[0]), vec!["a"]);
        assert_eq!(m[1].thinking.len(), 1);
        assert_eq!(m[1].tool_calls.len(), 1);
        assert_eq!(m[1].content, Content::Missing);
        assert_eq!(texts(&m[2]), vec!["b"]);
    }

    #[test]
    fn redacted_thinking_is_dropped_and_counted() {
        let out = map(
            "assistant",
            json!([
                {"type": "redacted_thinking", "data": "EvgF"},
                {"type": "redacted_thinking", "data": "EvgG"},
                {"type": "text", "text": "ok"},
            ]),
        );
        assert_eq!(out.messages.len(), 1);
        assert!(out.messages[0].thinking.is_empty());
        assert_eq!(out.notes[0].rule.as_str(), "builtin.redacted-thinking");
        assert_eq!(out.notes[0].count, 2);
    }

    #[test]
    fn server_tools_follow_the_policy() {
        let content = json!([
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "web_search_result", "url": "https://a", "title": "A"}]},
            {"type": "text", "text": "found"},
        ]);
        let out = map("assistant", content.clone());
        let m = &out.messages;
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].tool_calls[0].id.as_deref(), Some("srvtoolu_1"));
        assert_eq!(m[0].tool_calls[0].arguments, r#"{"query":"q"}"#);
        assert_eq!(
            (m[1].role.as_str(), m[1].tool_call_ids.clone()),
            ("tool", vec!["srvtoolu_1".to_string()])
        );
        assert_eq!(
            m[1].content,
            Content::Text(r#"[{"title":"A","type":"web_search_result","url":"https://a"}]"#.into())
        );
        assert_eq!(texts(&m[2]), vec!["found"]);
        assert!(out
            .notes
            .iter()
            .all(|n| n.rule.as_str() == "policy.server_tool"));

        let mut p = policies();
        p.server_tool = ServerTool::Text;
        let out = map_content(Role::Assistant, content.clone(), &p);
        assert_eq!(out.messages.len(), 1);
        assert_eq!(
            texts(&out.messages[0]),
            vec![
                r#"[server_tool_use web_search: {"query":"q"}]"#,
                r#"[web_search_tool_result : [{"title":"A","type":"web_search_result","url":"https://a"}]]"#,
                "found"
            ]
        );
        p.server_tool = ServerTool::Drop;
        let out = map_content(Role::Assistant, content, &p);
        assert_eq!(out.messages.len(), 1);
        assert_eq!(texts(&out.messages[0]), vec!["found"]);
        assert_eq!(out.notes.len(), 2);
    }

    /// Issue 26: a content of N server-tool results of N types (and some again) makes N
    /// notes, in the order first seen, each with its count.
    #[test]
    fn notes_of_many_block_types_are_counted_in_first_seen_order() {
        let n = 3000;
        let block = |i: usize| json!({"type": format!("k{i}_tool_result"), "tool_use_id": format!("s{i}"), "content": "r"});
        let mut blocks: Vec<Value> = (0..n).map(block).collect();
        blocks.extend((0..n).step_by(3).map(block));
        let mut p = policies();
        p.server_tool = ServerTool::Drop;
        let out = map_content(Role::Assistant, Value::Array(blocks), &p);
        let expected: Vec<SourceNote> = (0..n)
            .map(|i| SourceNote {
                rule: crate::rules::PolicyId::ServerTool.into(),
                what: format!("k{i}_tool_result block"),
                count: if i % 3 == 0 { 2 } else { 1 },
                bytes_dropped: 0,
            })
            .collect();
        assert_eq!(out.notes.to_vec(), expected);
    }

    #[test]
    fn unknown_blocks_are_unknown_parts_for_the_policy() {
        let out = map(
            "user",
            json!([{"type": "container_upload", "file_id": "f"}, 5]),
        );
        assert_eq!(
            out.messages[0].content,
            Content::Parts(vec![
                Part::Unknown {
                    kind: "container_upload".into()
                },
                Part::Unknown {
                    kind: "number".into()
                },
            ])
        );
    }
}
