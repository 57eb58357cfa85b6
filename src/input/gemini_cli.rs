//! Gemini CLI sessions: `~/.gemini/tmp/<project_hash>/chats/session-*.json` (one
//! `ConversationRecord` document) and the JSON Lines form Gemini CLI writes since (a header
//! `{sessionId, projectHash, startTime, lastUpdated, kind}`, one line per message record,
//! `{"$set": {...}}` metadata patches and `{"$rewindTo": id}` rewinds; subagents' sessions
//! are files of the same form under `chats/<parent session>/`).
//!
//! In: every record of one file, in file order. Out: the session as one [`Transcript`]. The
//! file is loaded as Gemini CLI loads it (`loadConversationRecord` in
//! `packages/core/src/services/chatRecordingService.ts`): a message line whose `id` was seen
//! replaces the earlier copy where it stood, `$rewindTo` removes that message and every
//! later one (all of them when the id is unknown), a `$set` merges into the metadata and,
//! when it holds `messages`, replaces the whole list; what each dropped is counted
//! (`policy.inactive_branch` for rewound or replaced messages, `policy.structural_line` for
//! superseded copies). Then each message is read as Gemini CLI sends it back to the model on
//! resume (`convertSessionToClientHistory` in `packages/core/src/utils/sessionUtils.ts`):
//! - `user` messages: their parts (text, `inlineData`, `fileData`) a user message; text Gemini
//!   CLI never sends (slash commands `/…`, `?…`, `<session_context>`, `<hook_context>`) is
//!   named `gemini-cli:<kind>` for the rule files to classify; `functionResponse` parts are
//!   tool outputs.
//! - `gemini` messages: `thoughts` (or `thought: true` parts) are reasoning, text parts an
//!   assistant message, `functionCall` parts or `toolCalls` calls with their ids, and each
//!   call's `result` (a string, or `functionResponse` parts with any media beside them) its
//!   output, failed when the call's `status` is `error` or `cancelled`.
//! - `info`, `error` and `warning` messages are the CLI's notices, never sent to the model:
//!   dropped by `policy.structural_line` and counted.
//!
//! Every field the typed records below do not read (`tokens`, `displayContent`, a call's
//! `resultDisplay`, …) is named in the audit's ignored fields; `sessionId` is the
//! conversation's id. A line that is none of the four kinds is refused with why; the rest
//! of the session still converts.
//!
//! Memory: one session is one conversation, held whole while read (as `--max-conversation-
//! bytes` bounds); time is linear in its lines.

use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::builder::TranscriptBuilder;
use super::fields::text_or_json;
use super::format::{
    FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceConversation, SourceFormat,
};
use super::media::{content, inline_part, json_kind, linked_part};
use super::InputError;
use crate::model::time::parse_rfc3339_ms;
use crate::model::transcript::{
    Content, Message, Part, ReasoningOrigin, Role, Thinking, ToolCall, Transcript,
};
use crate::rules::{DropOrQuarantine, PolicyId};

pub(crate) struct GeminiCliReader;

impl SourceFormat {
    /// Gemini CLI sessions (~/.gemini/tmp/*/chats/session-*.json, .jsonl).
    pub const GEMINI_CLI: SourceFormat = SourceFormat::named("gemini-cli").with_global_ids();
}

const FORMAT: SourceFormat = SourceFormat::GEMINI_CLI;

/// The name prefix of user text Gemini CLI never sends to the model, for rules.
const HARNESS: &str = "gemini-cli:";

impl FormatReader for GeminiCliReader {
    fn format(&self) -> SourceFormat {
        FORMAT
    }

    fn describe(&self) -> &'static str {
        "Gemini CLI sessions (~/.gemini/tmp/*/chats/session-*.json, .jsonl)"
    }

    fn granularity(&self) -> Granularity {
        Granularity::File
    }

    fn detect(&self, first: Option<&Value>, _raw: &[u8]) -> bool {
        first.is_some_and(is_session_header)
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        read_session(records, context)
    }
}

/// A session's header line, or a whole legacy session: a string `sessionId` and a string
/// `projectHash` (what Gemini CLI itself requires of a session's metadata).
pub(crate) fn is_session_header(value: &Value) -> bool {
    value.get("sessionId").is_some_and(Value::is_string)
        && value.get("projectHash").is_some_and(Value::is_string)
}

fn refuse(problem: impl Into<String>) -> InputError {
    InputError::NotInFormat {
        format: FORMAT,
        problem: problem.into(),
    }
}

/// A message record (`MessageRecord` in `chatRecordingTypes.ts`). Fields are read leniently
/// (`Value`) so that a field of the wrong type is named, not a reason to lose the message.
#[derive(Debug, Deserialize)]
struct MessageRecord {
    id: String,
    #[serde(default)]
    timestamp: Option<Value>,
    #[serde(rename = "type", default)]
    kind: Option<Value>,
    #[serde(default)]
    content: Option<Value>,
    #[serde(rename = "toolCalls", default)]
    tool_calls: Option<Value>,
    #[serde(default)]
    thoughts: Option<Value>,
    #[serde(default)]
    model: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A call record (`ToolCallRecord`).
#[derive(Debug, Deserialize)]
struct ToolCallRecord {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    status: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// The session's metadata (`PartialMetadataRecord`, or a `$set`'s patch of it).
#[derive(Debug, Default, Deserialize)]
struct Metadata {
    #[serde(rename = "sessionId", default)]
    session_id: Option<Value>,
    #[serde(rename = "startTime", default)]
    start_time: Option<Value>,
    #[serde(default)]
    summary: Option<Value>,
    #[serde(default)]
    messages: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Metadata keys read only to recognise the record, or kept by Gemini CLI for its own use.
const METADATA_KEPT: [&str; 6] = [
    "projectHash",
    "lastUpdated",
    "kind",
    "directories",
    "memoryScratchpad",
    "sessionId",
];

fn string(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_string)
}

/// The session as Gemini CLI loads it: metadata, then messages in order by id.
#[derive(Default)]
struct Loaded {
    session_id: Option<String>,
    start_time: Option<String>,
    summary: Option<String>,
    messages: Vec<MessageRecord>,
    position: HashMap<String, usize>,
    /// Messages a `$rewindTo` or a `$set` list removed.
    rewound: u64,
    /// Earlier copies of a message written again with the same id.
    superseded: u64,
    ignored: BTreeSet<String>,
}

impl Loaded {
    /// A message line: appended, or in place of its earlier copy.
    fn message(&mut self, message: MessageRecord) {
        match self.position.get(&message.id) {
            Some(&at) => {
                self.superseded += 1;
                self.messages[at] = message;
            }
            None => {
                self.position
                    .insert(message.id.clone(), self.messages.len());
                self.messages.push(message);
            }
        }
    }

    /// `$rewindTo`: the message and every later one go; all of them when the id is unknown.
    fn rewind(&mut self, id: &str) {
        let from = self.position.get(id).copied().unwrap_or(0);
        for gone in self.messages.drain(from..) {
            self.position.remove(&gone.id);
            self.rewound += 1;
        }
    }

    /// Metadata (a header or a `$set`); a `messages` list in a `$set` replaces every message,
    /// in a header adds to them.
    fn metadata(&mut self, mut metadata: Metadata, replaces: bool, refused: &mut Vec<String>) {
        if let Some(id) = string(metadata.session_id.as_ref()) {
            self.session_id = Some(id);
        }
        if let Some(time) = string(metadata.start_time.as_ref()) {
            self.start_time = Some(time);
        }
        if let Some(summary) = string(metadata.summary.as_ref()) {
            self.summary = Some(summary);
        }
        for key in metadata.rest.keys() {
            if !METADATA_KEPT.contains(&key.as_str()) {
                self.ignored.insert(key.clone());
            }
        }
        if let Some(Value::Array(list)) = metadata.messages.take() {
            if replaces {
                self.rewound += self.messages.len() as u64;
                self.messages.clear();
                self.position.clear();
            }
            for (k, value) in list.into_iter().enumerate() {
                match message_record(value) {
                    Ok(Some(message)) => self.message(message),
                    Ok(None) => refused.push(format!("messages[{k}] has no string `id`")),
                    Err(problem) => refused.push(format!("messages[{k}]: {problem}")),
                }
            }
        }
    }
}

/// A value as a message record: `None` when it has no string `id` (Gemini CLI skips it).
fn message_record(value: Value) -> Result<Option<MessageRecord>, String> {
    if !value.get("id").is_some_and(Value::is_string) {
        return Ok(None);
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Reads one session file.
pub(crate) fn read_session(records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
    let mut read = FileRead::default();
    let mut loaded = Loaded::default();
    let mut taken = Vec::new();
    let mut repairs = 0;
    for record in records {
        let index = record.index;
        let Value::Object(mut object) = record.value else {
            let kind = json_kind(&record.value);
            read.refused.push((
                index,
                refuse(format!("line is a JSON {kind}, not a session line")),
            ));
            continue;
        };
        repairs += record.repairs;
        let mut problems = Vec::new();
        if let Some(Value::String(id)) = object.get("$rewindTo") {
            let id = id.clone();
            loaded.rewind(&id);
        } else if object.get("id").is_some_and(Value::is_string) {
            match serde_json::from_value::<MessageRecord>(Value::Object(object)) {
                Ok(message) => loaded.message(message),
                Err(err) => problems.push(err.to_string()),
            }
        } else if let Some(Value::Object(patch)) = object.remove("$set") {
            match serde_json::from_value::<Metadata>(Value::Object(patch)) {
                Ok(metadata) => loaded.metadata(metadata, true, &mut problems),
                Err(err) => problems.push(err.to_string()),
            }
            for key in object.keys() {
                loaded.ignored.insert(format!("$set line: {key}"));
            }
        } else if is_session_header(&Value::Object(object.clone())) {
            match serde_json::from_value::<Metadata>(Value::Object(object)) {
                Ok(metadata) => loaded.metadata(metadata, false, &mut problems),
                Err(err) => problems.push(err.to_string()),
            }
        } else {
            read.refused.push((
                index,
                refuse("line is not a session header, a message, `$set` or `$rewindTo`"),
            ));
            continue;
        }
        match problems.into_iter().next() {
            Some(problem) => read.refused.push((index, refuse(problem))),
            None => taken.push(index),
        }
    }
    if taken.is_empty() {
        return read;
    }
    match transcript(loaded, repairs, context) {
        Ok(transcript) => read.conversations.push(SourceConversation {
            transcript,
            records: taken,
        }),
        Err(err) => read
            .refused
            .extend(taken.into_iter().map(|index| (index, err.clone()))),
    }
    read
}

/// What kind of harness text a user text is, if Gemini CLI never sends it to the model.
fn harness_kind(text: &str) -> Option<&'static str> {
    let trimmed = text.trim();
    if trimmed.starts_with('/') || trimmed.starts_with('?') {
        Some("command")
    } else if trimmed.starts_with("<session_context>") {
        Some("session-context")
    } else if trimmed.starts_with("<hook_context>") {
        Some("hook-context")
    } else {
        None
    }
}

/// A `PartListUnion` as a list of parts: a string is one text part.
fn parts_of(content: Option<Value>) -> Vec<Value> {
    let text = |t: String| {
        let mut part = Map::new();
        part.insert("text".to_string(), Value::String(t));
        Value::Object(part)
    };
    match content {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(t)) => vec![text(t)],
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Value::String(t) => text(t),
                other @ (Value::Null
                | Value::Bool(_)
                | Value::Number(_)
                | Value::Array(_)
                | Value::Object(_)) => other,
            })
            .collect(),
        Some(other @ (Value::Bool(_) | Value::Number(_) | Value::Object(_))) => vec![other],
    }
}

/// One part of a message, as the reader sorts it.
enum Piece {
    Text(String),
    Thought(String),
    Media(Part),
    Call(ToolCall),
    Response {
        id: Option<String>,
        text: String,
        failed: bool,
    },
}

/// A `functionCall` as a call.
fn call(id: Option<String>, name: Option<&Value>, args: Option<Value>) -> ToolCall {
    let (arguments, from_object, missing) = match args {
        None | Some(Value::Null) => ("{}".to_string(), false, true),
        Some(Value::String(text)) => (text, false, false),
        Some(other) => (other.to_string(), true, false),
    };
    ToolCall {
        id,
        name: name.and_then(Value::as_str).unwrap_or_default().to_string(),
        arguments,
        arguments_from_object: from_object,
        arguments_missing: missing,
        custom: false,
    }
}

/// A `functionResponse`'s text (`response.output`, else `response.error`, else the whole
/// response as JSON) and whether it reports an error.
fn response_text(response: Option<Value>) -> (String, bool) {
    match response {
        Some(Value::Object(mut map)) => {
            if let Some(output) = map.remove("output") {
                if map.is_empty() {
                    return (text_or_json(output), false);
                }
                map.insert("output".to_string(), output);
            }
            if let Some(error) = map.remove("error") {
                return (text_or_json(error), true);
            }
            (Value::Object(map).to_string(), false)
        }
        Some(other) => (text_or_json(other), false),
        None => (String::new(), false),
    }
}

/// A part's pieces; unknown part kinds become [`Part::Unknown`] named by their key.
fn piece(part: Value) -> Piece {
    let Value::Object(mut part) = part else {
        return Piece::Media(Part::Unknown {
            kind: json_kind(&part).to_string(),
        });
    };
    if let Some(Value::String(text)) = part.remove("text") {
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            return Piece::Thought(text);
        }
        return Piece::Text(text);
    }
    if let Some(Value::Object(mut call_part)) = part.remove("functionCall") {
        let id = string(call_part.get("id"));
        let args = call_part.remove("args");
        return Piece::Call(call(id, call_part.get("name"), args));
    }
    if let Some(Value::Object(mut response)) = part.remove("functionResponse") {
        let (text, failed) = response_text(response.remove("response"));
        return Piece::Response {
            id: string(response.get("id")),
            text,
            failed,
        };
    }
    if let Some(Value::Object(mut data)) = part.remove("inlineData") {
        let mime = string(data.get("mimeType"));
        let bytes = data.remove("data").map(text_or_json).unwrap_or_default();
        return Piece::Media(inline_part(mime.as_deref(), None, bytes));
    }
    if let Some(Value::Object(mut data)) = part.remove("fileData") {
        let mime = string(data.get("mimeType"));
        let uri = data.remove("fileUri").map(text_or_json).unwrap_or_default();
        return Piece::Media(linked_part(mime.as_deref(), None, uri));
    }
    let kind = part.keys().next().cloned().unwrap_or_else(|| "part".into());
    Piece::Media(Part::Unknown { kind })
}

/// A thought summary as Gemini CLI sends it back: `**subject** description`.
fn thought_text(thought: &Value) -> Option<String> {
    let subject = thought.get("subject").and_then(Value::as_str).unwrap_or("");
    let description = thought
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    if subject.is_empty() && description.is_empty() {
        return None;
    }
    Some(if subject.is_empty() {
        description.to_string()
    } else {
        format!("**{subject}** {description}")
    })
}

fn thinking(text: String) -> Thinking {
    Thinking {
        summary: vec![text],
        origin: ReasoningOrigin::Gemini,
        ..Thinking::default()
    }
}

/// The loaded session as one conversation.
fn transcript(
    loaded: Loaded,
    repairs: usize,
    context: &ReadContext<'_>,
) -> Result<Transcript, InputError> {
    let policy = &context.rules.policy;
    let mut built = TranscriptBuilder::new(FORMAT, "messages");
    built.meta.source_id = loaded.session_id.clone();
    built.meta.id = loaded.session_id;
    built.meta.created_ms = loaded.start_time.as_deref().and_then(parse_rfc3339_ms);
    built.meta.title = loaded.summary;
    built.meta.unicode_repairs = repairs;
    if loaded.rewound > 0 {
        if policy.inactive_branch == DropOrQuarantine::Quarantine {
            return Err(InputError::RefusedByRule {
                rule: PolicyId::InactiveBranch.into(),
                reason: format!("{} rewound or replaced messages", loaded.rewound),
            });
        }
        built.note(
            PolicyId::InactiveBranch,
            "message rewound ($rewindTo) or replaced by a $set list",
            loaded.rewound,
            0,
        );
    }
    if loaded.superseded > 0 {
        built.note(
            PolicyId::StructuralLine,
            "earlier copy of a message written again with its id",
            loaded.superseded,
            0,
        );
    }
    let mut ignored = loaded.ignored;
    let mut answered: BTreeSet<String> = BTreeSet::new();
    for message in loaded.messages {
        for key in message.rest.keys() {
            ignored.insert(key.clone());
        }
        let time = message
            .timestamp
            .as_ref()
            .and_then(Value::as_str)
            .and_then(parse_rfc3339_ms);
        let kind = match &message.kind {
            Some(Value::String(kind)) => kind.clone(),
            Some(other) => {
                ignored.insert(format!("type ({})", json_kind(other)));
                String::new()
            }
            None => String::new(),
        };
        match kind.as_str() {
            "gemini" => gemini_message(message, time, &mut built, &mut ignored, &mut answered),
            "info" | "error" | "warning" => {
                let text: usize = parts_of(message.content)
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .map(str::len)
                    .sum();
                if policy.structural_line == DropOrQuarantine::Quarantine {
                    return Err(InputError::RefusedByRule {
                        rule: PolicyId::StructuralLine.into(),
                        reason: format!("`{kind}` message"),
                    });
                }
                built.note(
                    PolicyId::StructuralLine,
                    &format!("{kind} message (a notice of the CLI)"),
                    1,
                    text,
                );
            }
            "user" => user_message(message, time, Role::User, &mut built, &mut answered),
            other => {
                let role = Role::Other(other.to_string());
                user_message(message, time, role, &mut built, &mut answered);
            }
        }
    }
    for field in ignored {
        built.ignore(field);
    }
    built.finish()
}

/// A user message: its parts, then its tool outputs (a response already given by its call's
/// `result` is not given twice).
fn user_message(
    message: MessageRecord,
    time: Option<i64>,
    role: Role,
    built: &mut TranscriptBuilder,
    answered: &mut BTreeSet<String>,
) {
    let mut parts = Vec::new();
    let mut outputs = Vec::new();
    for part in parts_of(message.content) {
        match piece(part) {
            Piece::Text(text) | Piece::Thought(text) => parts.push(Part::Text(text)),
            Piece::Media(part) => parts.push(part),
            Piece::Call(call) => parts.push(Part::Unknown {
                kind: format!("functionCall {}", call.name),
            }),
            Piece::Response { id, text, failed } => outputs.push((id, text, failed)),
        }
    }
    if !parts.is_empty() || outputs.is_empty() {
        let content = content(parts);
        let name = harness_kind(&content.joined_texts()).map(|kind| format!("{HARNESS}{kind}"));
        built.message(Message {
            role,
            name,
            content,
            timestamp_ms: time,
            ..Message::default()
        });
    }
    for (id, text, failed) in outputs {
        if id.as_ref().is_some_and(|id| answered.contains(id)) {
            continue;
        }
        built.output(id, Content::Text(text), failed);
    }
}

/// A model message: reasoning, text, calls, then each call's output.
fn gemini_message(
    message: MessageRecord,
    time: Option<i64>,
    built: &mut TranscriptBuilder,
    ignored: &mut BTreeSet<String>,
    answered: &mut BTreeSet<String>,
) {
    if let Some(model) = message.model.as_ref().and_then(Value::as_str) {
        built.meta.model = Some(model.to_string());
    }
    let pieces: Vec<Piece> = parts_of(message.content).into_iter().map(piece).collect();
    // Gemini CLI's own rule: content that holds calls or thoughts is the whole message;
    // otherwise the message is rebuilt from `thoughts`, content and `toolCalls`.
    let modern = pieces
        .iter()
        .any(|p| matches!(p, Piece::Call(_) | Piece::Thought(_)));
    if !modern {
        if let Some(Value::Array(thoughts)) = &message.thoughts {
            for thought in thoughts.iter().filter_map(thought_text) {
                built.thinking(thinking(thought));
            }
        }
    }
    let mut text: Vec<Part> = Vec::new();
    let flush = |text: &mut Vec<Part>, built: &mut TranscriptBuilder| {
        if !text.is_empty() {
            built.message(Message {
                role: Role::Assistant,
                content: content(std::mem::take(text)),
                timestamp_ms: time,
                ..Message::default()
            });
        }
    };
    let mut responses = Vec::new();
    for piece in pieces {
        match piece {
            // Gemini CLI records a message of calls alone with `content: ""`.
            Piece::Text(t) if t.is_empty() => {}
            Piece::Text(t) => text.push(Part::Text(t)),
            Piece::Media(part) => text.push(part),
            Piece::Thought(t) => {
                flush(&mut text, built);
                built.thinking(thinking(t));
            }
            Piece::Call(c) => {
                flush(&mut text, built);
                built.call(c);
            }
            Piece::Response { id, text, failed } => responses.push((id, text, failed)),
        }
    }
    flush(&mut text, built);
    let records: Vec<ToolCallRecord> = match message.tool_calls {
        Some(Value::Array(list)) => list
            .into_iter()
            .filter_map(|v| match serde_json::from_value(v) {
                Ok(record) => Some(record),
                Err(_) => {
                    ignored.insert("toolCalls[] (not an object)".to_string());
                    None
                }
            })
            .collect(),
        Some(other) => {
            ignored.insert(format!("toolCalls ({})", json_kind(&other)));
            Vec::new()
        }
        None => Vec::new(),
    };
    if !modern {
        for record in &records {
            let id = string(record.id.as_ref());
            built.call(call(id, record.name.as_ref(), record.args.clone()));
        }
    }
    for (id, text, failed) in responses {
        built.output(id, Content::Text(text), failed);
    }
    for record in records {
        for key in record.rest.keys() {
            ignored.insert(format!("toolCalls[].{key}"));
        }
        let id = string(record.id.as_ref());
        let failed = matches!(
            record.status.as_ref().and_then(Value::as_str),
            Some("error" | "cancelled")
        );
        let result = match record.result {
            None | Some(Value::Null) => continue,
            Some(Value::String(text)) => vec![(id.clone(), vec![Part::Text(text)], failed)],
            Some(Value::Array(parts)) => result_parts(parts, id.as_ref(), failed),
            Some(other) => result_parts(vec![other], id.as_ref(), failed),
        };
        for (call_id, parts, failed) in result {
            if let Some(call_id) = &call_id {
                answered.insert(call_id.clone());
            }
            built.output(call_id, content(parts), failed);
        }
    }
}

/// A call's `result` parts: one output per `functionResponse` (its id, else the call's),
/// each with the media and text parts written after it; parts before any response form one
/// output of the call.
fn result_parts(
    parts: Vec<Value>,
    call_id: Option<&String>,
    failed: bool,
) -> Vec<(Option<String>, Vec<Part>, bool)> {
    let mut outputs: Vec<(Option<String>, Vec<Part>, bool)> = Vec::new();
    for part in parts {
        match piece(part) {
            Piece::Response {
                id,
                text,
                failed: error,
            } => {
                outputs.push((
                    id.or_else(|| call_id.cloned()),
                    vec![Part::Text(text)],
                    failed || error,
                ));
            }
            Piece::Text(text) | Piece::Thought(text) => {
                push_to_last(&mut outputs, call_id, failed, Part::Text(text))
            }
            Piece::Media(part) => push_to_last(&mut outputs, call_id, failed, part),
            Piece::Call(c) => push_to_last(
                &mut outputs,
                call_id,
                failed,
                Part::Unknown {
                    kind: format!("functionCall {}", c.name),
                },
            ),
        }
    }
    outputs
}

fn push_to_last(
    outputs: &mut Vec<(Option<String>, Vec<Part>, bool)>,
    call_id: Option<&String>,
    failed: bool,
    part: Part,
) {
    match outputs.last_mut() {
        Some((_, parts, _)) => parts.push(part),
        None => outputs.push((call_id.cloned(), vec![part], failed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::format::read_values;
    use crate::rules::RuleSet;
    use serde_json::json;

    fn read(values: Vec<Value>) -> FileRead {
        let rules = RuleSet::builtin().expect("default rules");
        read_values(
            &GeminiCliReader,
            values,
            &rules,
            std::path::Path::new("chats/session-x.jsonl"),
        )
    }

    fn roles(read: &FileRead) -> Vec<String> {
        read.conversations[0]
            .transcript
            .messages
            .iter()
            .map(|m| format!("{}:{}", m.role, m.content.joined_texts()))
            .collect()
    }

    #[test]
    fn a_jsonl_session_loads_as_gemini_cli_loads_it() {
        let read = read(vec![
            json!({"sessionId": "s1", "projectHash": "h", "startTime": "2026-01-01T00:00:00Z", "kind": "main"}),
            json!({"id": "u1", "type": "user", "content": [{"text": "first"}]}),
            json!({"id": "g1", "type": "gemini", "content": "draft"}),
            json!({"id": "g1", "type": "gemini", "content": "answer", "tokens": {"input": 1}}),
            json!({"id": "u2", "type": "user", "content": "dropped later"}),
            json!({"id": "g2", "type": "gemini", "content": "gone"}),
            json!({"$rewindTo": "u2"}),
            json!({"$set": {"lastUpdated": "2026-01-01T00:01:00Z", "summary": "A title"}}),
            json!({"id": "i1", "type": "info", "content": "Switched model"}),
            json!({"id": "u3", "type": "user", "content": "/help"}),
        ]);
        assert!(read.refused.is_empty(), "{:?}", read.refused);
        assert_eq!(
            roles(&read),
            ["user:first", "assistant:answer", "user:/help"]
        );
        let t = &read.conversations[0].transcript;
        assert_eq!(t.meta.source_id.as_deref(), Some("s1"));
        assert_eq!(t.meta.title.as_deref(), Some("A title"));
        assert_eq!(t.messages[2].name.as_deref(), Some("gemini-cli:command"));
        assert_eq!(
            t.note_counts(),
            [
                ("policy.inactive_branch", 2),
                ("policy.structural_line", 1),
                ("policy.structural_line", 1)
            ]
        );
        assert_eq!(t.ignored_fields, ["tokens"]);
        assert_eq!(read.conversations[0].records, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn calls_thoughts_and_results_of_a_legacy_and_a_modern_message() {
        let read = read(vec![json!({
            "sessionId": "s2", "projectHash": "h", "messages": [
                {"id": "u", "type": "user", "content": "list"},
                {"id": "g", "type": "gemini", "content": "Listing.",
                 "thoughts": [{"subject": "Plan", "description": "use ls", "timestamp": "t"}],
                 "toolCalls": [{"id": "c1", "name": "ls", "args": {"path": "."}, "status": "error",
                   "result": [{"functionResponse": {"id": "c1", "name": "ls", "response": {"error": "denied"}}}],
                   "resultDisplay": "x"}]},
                {"id": "g2", "type": "gemini", "content": [
                    {"text": "think", "thought": true},
                    {"functionCall": {"id": "c2", "name": "cat", "args": {"f": "a"}}}],
                 "toolCalls": [{"id": "c2", "name": "cat", "result": "body", "status": "success"}]}
            ]
        })]);
        let t = &read.conversations[0].transcript;
        let shape: Vec<String> = t
            .messages
            .iter()
            .map(|m| {
                format!(
                    "{} {} calls={} ids={:?} thinking={} failed={}",
                    m.role,
                    m.content.joined_texts(),
                    m.tool_calls.len(),
                    m.tool_call_ids,
                    m.thinking.len(),
                    m.tool_error
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                "user list calls=0 ids=[] thinking=0 failed=false",
                "assistant Listing. calls=0 ids=[] thinking=1 failed=false",
                "assistant  calls=1 ids=[] thinking=0 failed=false",
                "tool denied calls=0 ids=[\"c1\"] thinking=0 failed=true",
                "assistant  calls=1 ids=[] thinking=1 failed=false",
                "tool body calls=0 ids=[\"c2\"] thinking=0 failed=false",
            ]
        );
        assert_eq!(t.messages[1].thinking[0].summary, ["**Plan** use ls"]);
        assert_eq!(t.ignored_fields, ["toolCalls[].resultDisplay"]);
    }

    #[test]
    fn a_line_of_no_known_kind_is_refused_and_the_session_still_reads() {
        let read = read(vec![
            json!({"sessionId": "s", "projectHash": "h"}),
            json!({"what": 1}),
            json!([1]),
            json!({"id": "u", "type": "user", "content": "hi"}),
        ]);
        let refused: Vec<usize> = read.refused.iter().map(|(i, _)| *i).collect();
        assert_eq!(refused, [1, 2]);
        assert_eq!(read.conversations[0].records, [0, 3]);
    }
}
