//! Chat Completions API logs: streamed (`chat.completion.chunk` SSE events) and not.
//!
//! Read: `{request, response}` pairs whose response is a body with `choices` or a list of SSE
//! events (`response.sse_events`), files of raw SSE lines (`data: {...}` up to `data: [DONE]`,
//! with `event:` lines, comments and blank lines), and files of bare chunk objects. Chunks are
//! reassembled per choice and, within a choice, per tool-call `index` (id and name come with
//! the first fragment, arguments concatenate); `content`, `refusal`, `reasoning_content` and
//! `reasoning` deltas concatenate. The first choice is the reply; further choices (`n` > 1) are
//! dropped and counted (`builtin.extra-choices`).
//!
//! Requests resend the whole history, so the pairs of a file are grouped into chains
//! ([`super::chain`]); each chain is one conversation (`policy.resent_history`), its last
//! request's messages (read by the Chat Completions message reader,
//! [`super::messages::read_message_list`]) then the reply, built as a [`Message`]
//! ([`super::builder::TranscriptBuilder`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::builder::TranscriptBuilder;
use super::chain::{self, request_body, response_body};
use super::fields::{object_or_default, Loose};
use super::format::{FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceFormat};
use super::messages::{alias_role, read_message_list};
use super::meta::read_meta;
use super::sse::{self, Line as SseLine};
use super::InputError;
use crate::model::transcript::{Content, Message, SourceNote, ToolCall, Transcript};
use crate::rules::policy::ResentHistory;
use crate::rules::{Builtin, RoleAliases};

pub(crate) struct ChatStreamReader;

impl SourceFormat {
    /// Streamed Chat Completions logs (chat.completion.chunk SSE events).
    pub const CHAT_STREAM: SourceFormat = SourceFormat::named("chat-stream");
}

const FORMAT: SourceFormat = SourceFormat::CHAT_STREAM;

/// Whether `value` is a `chat.completion.chunk`.
fn is_chunk(value: &Value) -> bool {
    value.get("object").and_then(Value::as_str) == Some("chat.completion.chunk")
}

/// Whether `record` is a logged Chat Completions request/response pair.
fn is_pair(record: &Value) -> bool {
    let Some(request) = record.get("request") else {
        return false;
    };
    let body = request.get("body").unwrap_or(request);
    let has_messages = body.get("messages").is_some_and(Value::is_array);
    let Some(response) = record.get("response") else {
        return false;
    };
    let response_body = response.get("body").unwrap_or(response);
    let has_choices = response_body.get("choices").is_some_and(Value::is_array);
    let streamed = sse::events(record)
        .is_some_and(|events| events.data.first().is_some_and(is_chunk) || events.data.is_empty());
    has_messages && (has_choices || streamed)
}

/// What one record of the file is.
enum Line {
    Pair(Value),
    /// SSE data (a chunk), from a raw line or a bare chunk object.
    Chunk(Value),
    /// `data: [DONE]`: the end of a stream.
    Done,
    /// A blank line, an `event:` line or a comment: part of the stream around it.
    Filler,
    Other(String),
}

fn classify(value: Value) -> Line {
    match value {
        // One reading of a raw line for every log reader (`sse`): field lines (`event:`,
        // `id:`, `retry:`), comments and blanks are fillers.
        Value::String(line) => match sse::line(&line) {
            SseLine::Filler => Line::Filler,
            SseLine::Done => Line::Done,
            SseLine::Data(data) if is_chunk(&data) => Line::Chunk(data),
            SseLine::Data(_) => {
                Line::Other("an SSE data line that is not a chat.completion.chunk".into())
            }
            SseLine::Unreadable(_) => Line::Other("an SSE data line that is not JSON".into()),
            SseLine::Other => Line::Other("a line that is neither JSON nor an SSE line".into()),
        },
        value if is_chunk(&value) => Line::Chunk(value),
        value if is_pair(&value) => Line::Pair(value),
        Value::Object(ref map) if map.get("data").is_some() => match sse::data(&value) {
            Some(data) if is_chunk(&data) => Line::Chunk(data),
            _ if map.get("data").and_then(Value::as_str) == Some("[DONE]") => Line::Done,
            _ => Line::Other("an SSE event that is not a chat.completion.chunk".into()),
        },
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_) => Line::Other(
            "neither a {request, response} pair of the Chat Completions API nor a chat.completion.chunk"
                .into(),
        ),
    }
}

impl FormatReader for ChatStreamReader {
    fn format(&self) -> SourceFormat {
        SourceFormat::CHAT_STREAM
    }

    fn describe(&self) -> &'static str {
        "streamed Chat Completions logs (chat.completion.chunk SSE events)"
    }

    fn granularity(&self) -> Granularity {
        Granularity::File
    }

    fn detect(&self, first: Option<&Value>, raw: &[u8]) -> bool {
        match first {
            Some(Value::String(line)) => detect_line(line.as_bytes()),
            Some(value) => {
                is_chunk(value)
                    || is_pair(value)
                    || sse::data(value).is_some_and(|d| is_chunk(&d) && value.get("data").is_some())
            }
            None => detect_line(raw),
        }
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        let mut read = FileRead::default();
        let mut entries: Vec<Entry> = Vec::new();
        // The stream being read: its records and chunks.
        let mut stream: Option<Entry> = None;
        let mut pending: Vec<usize> = Vec::new();
        for record in records {
            match classify(record.value) {
                Line::Pair(mut value) => {
                    if let Some(open) = stream.take() {
                        entries.push(open);
                    }
                    match pair_entry(&mut value, record.index) {
                        Ok(mut entry) => {
                            entry.records.splice(0..0, pending.drain(..));
                            entries.push(entry);
                        }
                        Err(problem) => read.refused.push((record.index, not_format(problem))),
                    }
                }
                Line::Chunk(chunk) => {
                    let open = stream.get_or_insert_with(|| Entry::new(Vec::new()));
                    open.records.append(&mut pending);
                    open.records.push(record.index);
                    open.chunks.push(chunk);
                }
                Line::Done => match stream.take() {
                    Some(mut open) => {
                        open.records.append(&mut pending);
                        open.records.push(record.index);
                        entries.push(open);
                    }
                    None => pending.push(record.index),
                },
                Line::Filler => match stream.as_mut() {
                    Some(open) => open.records.push(record.index),
                    None => pending.push(record.index),
                },
                Line::Other(problem) => read.refused.push((record.index, not_format(problem))),
            }
        }
        if let Some(open) = stream.take() {
            entries.push(open);
        }
        // Blank lines after the last stream belong to it.
        if !pending.is_empty() {
            match entries.last_mut() {
                Some(last) => last.records.append(&mut pending),
                None => {
                    for index in pending {
                        read.refused.push((
                            index,
                            not_format("a file of SSE lines with no chat.completion.chunk".into()),
                        ));
                    }
                }
            }
        }
        conversations(entries, context, &mut read);
        read.conversations
            .sort_by_key(|c| c.records.first().copied());
        read
    }
}

/// A raw SSE line: `data:` (a chunk or `[DONE]`), `event:`, `id:`, `retry:` or a comment.
fn detect_line(raw: &[u8]) -> bool {
    let text = String::from_utf8_lossy(raw);
    !text.trim().is_empty() && sse::line(&text) != SseLine::Other
}

fn not_format(problem: String) -> InputError {
    InputError::NotInFormat {
        format: FORMAT,
        problem,
    }
}

/// The reply to a request: the logged message, or the one reassembled from its chunks.
enum Reply {
    Logged(Value),
    Streamed(Box<Message>),
}

/// One logged request (or bare stream) and its reply.
struct Entry {
    records: Vec<usize>,
    history: Vec<Value>,
    reply: Option<Reply>,
    chunks: Vec<Value>,
    /// `model`, `id`, `created`, `tools`, `finish_reason` of the exchange.
    facts: Map<String, Value>,
    extra_choices: (u64, usize),
    /// What reading its logged events dropped.
    unreadable: sse::Unreadable,
}

impl Entry {
    fn new(records: Vec<usize>) -> Entry {
        Entry {
            records,
            history: Vec::new(),
            reply: None,
            chunks: Vec::new(),
            facts: Map::new(),
            extra_choices: (0, 0),
            unreadable: sse::Unreadable::default(),
        }
    }
}

/// A logged request body, as far as the reader reads it.
#[derive(Deserialize, Default)]
#[serde(default)]
struct RequestBody {
    messages: Loose<Vec<Value>>,
    /// Present, even `null`: kept as the exchange's facts as written.
    tools: Loose<Value>,
    model: Loose<Value>,
}

/// A logged response body or one `chat.completion.chunk` of a stream: the completion's facts
/// and its choices (a logged reply each, or a chunk's deltas).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Completion {
    id: Option<Value>,
    created: Option<Value>,
    model: Option<Value>,
    choices: Loose<Vec<Value>>,
}

/// One of a logged response's `choices`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct LoggedChoice {
    /// Present, even `null`: the reply as logged.
    message: Loose<Value>,
    finish_reason: Option<Value>,
}

/// One choice of a chunk: its `delta` (a chunk's), else its `message`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ChunkChoice {
    index: Loose<u64>,
    finish_reason: Option<Value>,
    delta: Loose<Value>,
    message: Loose<Value>,
}

/// The pieces a delta adds to its choice.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Delta {
    role: Loose<String>,
    content: Loose<String>,
    refusal: Loose<String>,
    reasoning_content: Loose<String>,
    reasoning: Loose<String>,
    tool_calls: Loose<Vec<Value>>,
    /// Present, even `null`: the choice then has a (legacy) function call.
    function_call: Loose<Value>,
}

/// A fragment of a tool call: `function` (or a freeform call's `custom`) carries its pieces.
#[derive(Deserialize, Default)]
#[serde(default)]
struct CallDelta {
    index: Loose<u64>,
    id: Loose<String>,
    #[serde(rename = "type")]
    kind: Loose<String>,
    function: Loose<Value>,
    custom: Loose<Value>,
}

/// A fragment of a function's (or freeform call's) name and arguments (`input`).
#[derive(Deserialize, Default)]
#[serde(default)]
struct FunctionDelta {
    name: Loose<String>,
    arguments: Loose<Value>,
    input: Loose<Value>,
}

fn pair_entry(value: &mut Value, index: usize) -> Result<Entry, String> {
    let events = sse::events(value);
    let request = request_body(value).ok_or("the request has no body")?;
    let request: RequestBody = object_or_default(request);
    let Some(history) = request.messages.0 else {
        return Err("the request has no `messages` list".into());
    };
    let mut entry = Entry::new(vec![index]);
    entry.history = history;
    if let Some(tools) = request.tools.0 {
        entry.facts.insert("tools".into(), tools);
    }
    if let Some(model) = request.model.0 {
        entry.facts.insert("model".into(), model);
    }
    match events {
        Some(events) => {
            entry.chunks = events.data;
            entry.unreadable = events.unreadable;
        }
        None => {
            let body = response_body(value).ok_or("the response has no body")?;
            let body: Completion = object_or_default(body);
            for (key, fact) in [
                ("id", body.id),
                ("created", body.created),
                ("model", body.model),
            ] {
                if let Some(fact) = fact {
                    entry.facts.insert(key.into(), fact);
                }
            }
            let mut choices = body.choices.0.unwrap_or_default().into_iter();
            let first = choices.next().map(object_or_default::<LoggedChoice>);
            let extra: Vec<usize> = choices
                .map(|c| {
                    let choice: LoggedChoice = object_or_default(c);
                    let content = choice.message.0.as_ref().and_then(|m| m.get("content"));
                    content.and_then(Value::as_str).map_or(0, str::len)
                })
                .collect();
            if !extra.is_empty() {
                entry.extra_choices = (extra.len() as u64, extra.iter().sum());
            }
            if let Some(first) = first {
                if let Some(reason) = first.finish_reason {
                    entry.facts.insert("finish_reason".into(), reason);
                }
                entry.reply = first.message.0.map(Reply::Logged);
            }
        }
    }
    Ok(entry)
}

/// One choice being reassembled.
#[derive(Default)]
struct ChoiceAcc {
    role: Option<String>,
    content: Option<String>,
    refusal: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    /// Tool calls by their `index`: id, type, name, arguments.
    calls: BTreeMap<u64, (Option<String>, Option<String>, String, String)>,
    function_call: Option<(String, String)>,
    finish_reason: Option<Value>,
}

fn append(slot: &mut Option<String>, delta: Loose<String>) {
    if let Some(text) = delta.0 {
        slot.get_or_insert_with(String::new).push_str(&text);
    }
}

/// Reassembles chunks into each choice's message, by choice index; its role after the rule
/// file's role aliases.
fn assemble(
    chunks: Vec<Value>,
    aliases: &RoleAliases,
) -> (BTreeMap<u64, Message>, Map<String, Value>) {
    let mut choices: BTreeMap<u64, ChoiceAcc> = BTreeMap::new();
    let mut facts = Map::new();
    for chunk in chunks {
        let chunk: Completion = object_or_default(chunk);
        for (key, fact) in [
            ("id", chunk.id),
            ("created", chunk.created),
            ("model", chunk.model),
        ] {
            if let Some(fact) = fact {
                facts.entry(key.to_string()).or_insert(fact);
            }
        }
        for choice in chunk.choices.0.into_iter().flatten() {
            let choice: ChunkChoice = object_or_default(choice);
            let acc = choices.entry(choice.index.0.unwrap_or(0)).or_default();
            if let Some(reason) = choice.finish_reason {
                acc.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta.0.or(choice.message.0) else {
                continue;
            };
            let delta: Delta = object_or_default(delta);
            if let Some(role) = delta.role.0 {
                acc.role = Some(role);
            }
            append(&mut acc.content, delta.content);
            append(&mut acc.refusal, delta.refusal);
            append(&mut acc.reasoning_content, delta.reasoning_content);
            append(&mut acc.reasoning, delta.reasoning);
            for (n, call) in delta.tool_calls.0.into_iter().flatten().enumerate() {
                let call: CallDelta = object_or_default(call);
                let slot = acc
                    .calls
                    .entry(call.index.0.unwrap_or(n as u64))
                    .or_default();
                if let Some(id) = call.id.0 {
                    slot.0.get_or_insert(id);
                }
                if let Some(kind) = call.kind.0 {
                    slot.1.get_or_insert(kind);
                }
                let Some(function) = call.function.0.or(call.custom.0) else {
                    continue;
                };
                let function: FunctionDelta = object_or_default(function);
                if let Some(name) = function.name.0 {
                    slot.2.push_str(&name);
                }
                let args = function.arguments.0.or(function.input.0);
                if let Some(Value::String(args)) = args {
                    slot.3.push_str(&args);
                }
            }
            if let Some(fc) = delta.function_call.0 {
                let slot = acc.function_call.get_or_insert_with(Default::default);
                let fc: FunctionDelta = object_or_default(fc);
                if let Some(name) = fc.name.0 {
                    slot.0.push_str(&name);
                }
                if let Some(Value::String(args)) = fc.arguments.0 {
                    slot.1.push_str(&args);
                }
            }
        }
    }
    let messages = choices
        .into_iter()
        .map(|(index, acc)| {
            if let Some(reason) = &acc.finish_reason {
                if index == 0 {
                    facts.insert("finish_reason".into(), reason.clone());
                }
            }
            (index, acc.into_message(aliases))
        })
        .collect();
    (messages, facts)
}

impl ChoiceAcc {
    /// The choice's message. A call's `type` other than `custom` is a function call.
    fn into_message(self, aliases: &RoleAliases) -> Message {
        let (role, aliased_from) =
            alias_role(self.role.unwrap_or_else(|| "assistant".into()), aliases);
        let tool_calls = self
            .calls
            .into_values()
            .map(|(id, kind, name, arguments)| ToolCall {
                id,
                name,
                arguments,
                custom: kind.as_deref() == Some("custom"),
                ..ToolCall::default()
            })
            .collect();
        let function_call = self.function_call.map(|(name, arguments)| ToolCall {
            name,
            arguments,
            ..ToolCall::default()
        });
        Message {
            role,
            aliased_from,
            content: self.content.map_or(Content::Null, Content::Text),
            tool_calls,
            function_call,
            refusal: self.refusal,
            reasoning: self.reasoning_content.or(self.reasoning),
            ..Message::default()
        }
    }
}

/// The text bytes of a choice beyond the first: what dropping it removes.
fn text_len(message: &Message) -> usize {
    let calls = message.tool_calls.iter().filter(|c| !c.custom);
    message
        .content
        .texts()
        .iter()
        .map(|t| t.len())
        .sum::<usize>()
        + message.reasoning.as_ref().map_or(0, String::len)
        + message.refusal.as_ref().map_or(0, String::len)
        + calls.map(|c| c.arguments.len()).sum::<usize>()
}

fn finish(entry: &mut Entry, aliases: &RoleAliases) {
    if entry.chunks.is_empty() {
        return;
    }
    let (mut messages, facts) = assemble(std::mem::take(&mut entry.chunks), aliases);
    for (k, v) in facts {
        entry.facts.entry(k).or_insert(v);
    }
    let first = messages.keys().next().copied();
    if let Some(first) = first {
        entry.reply = messages
            .remove(&first)
            .map(|m| Reply::Streamed(Box::new(m)));
    }
    if !messages.is_empty() {
        let bytes = messages.values().map(text_len).sum();
        entry.extra_choices = (messages.len() as u64, bytes);
    }
}

impl chain::Link for Entry {
    fn records(&self) -> &[usize] {
        &self.records
    }
}

fn conversations(mut entries: Vec<Entry>, context: &ReadContext<'_>, read: &mut FileRead) {
    for entry in &mut entries {
        finish(entry, &context.rules.input.role_aliases);
    }
    let merge = context.rules.policy.resent_history == ResentHistory::Merge;
    let mut histories = chain::Histories::default();
    for e in &entries {
        histories.whole(
            e.history
                .iter()
                .map(|m| chain::canonical(m, &[], "text"))
                .collect(),
        );
    }
    let merged = "request merged into a later one resending its history";
    chain::drive(entries, histories, merge, merged, read, |mut members| {
        let extra = members.iter().fold((0u64, 0usize), |(n, bytes), e| {
            (n + e.extra_choices.0, bytes + e.extra_choices.1)
        });
        let mut unreadable = sse::Unreadable::default();
        members.iter().for_each(|e| unreadable.add(e.unreadable));
        let Some(last) = members.pop() else {
            return Err(InputError::NotARecord("empty chain"));
        };
        let mut transcript = transcript(last, context)?;
        if extra.0 > 0 {
            transcript.source_notes.push(SourceNote {
                rule: Builtin::ExtraChoices.into(),
                what: "choice beyond the first".into(),
                count: extra.0,
                bytes_dropped: extra.1,
            });
        }
        transcript.source_notes.extend(unreadable.note());
        Ok(transcript)
    });
}

/// Where the audit says a logged exchange's messages are: the request's `messages`.
const MESSAGES_AT: &str = "messages";

/// The conversation of the chain's last exchange: its request's messages, as the chat reader
/// reads a message list, then the reply.
fn transcript(mut entry: Entry, context: &ReadContext<'_>) -> Result<Transcript, InputError> {
    let rules = &context.rules.input;
    let mut built = TranscriptBuilder::new(SourceFormat::CHAT_STREAM, MESSAGES_AT);
    let reason = entry.facts.remove("finish_reason");
    let facts = Value::Object(entry.facts);
    read_meta(&facts, rules, &mut built.meta);
    built.meta.finished |= reason.as_ref().and_then(Value::as_str) == Some("stop");
    if let Some(Value::Array(tools)) = facts.get("tools") {
        built.tools(tools.clone());
    }
    // The finish reason is the response's `choices[0].finish_reason`: its field is `choices`.
    let mut ignored: Vec<&str> = facts
        .as_object()
        .into_iter()
        .flat_map(|f| f.keys())
        .map(String::as_str)
        .collect();
    if reason.is_some() {
        ignored.push("choices");
    }
    ignored.sort_unstable();
    for field in ignored {
        built.ignore(field);
    }
    let mut history = entry.history;
    let streamed = match entry.reply {
        Some(Reply::Logged(reply)) => {
            history.push(reply);
            None
        }
        Some(Reply::Streamed(reply)) => Some(*reply),
        None => None,
    };
    built.messages(read_message_list(
        history,
        streamed.is_some(),
        MESSAGES_AT,
        rules,
    )?);
    built.messages(streamed);
    built.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::transcript::{Content, ToolCall};
    use crate::rules::RuleSet;
    use serde_json::json;
    use std::path::Path;

    fn read_lines(lines: &[&str]) -> FileRead {
        let rules = RuleSet::builtin().unwrap();
        let context = ReadContext {
            rules: &rules,
            path: Path::new("log.jsonl"),
            key: "log.jsonl",
            root: Path::new("log.jsonl").parent(),
            follow: false,
            cache: &Default::default(),
        };
        let records = lines
            .iter()
            .enumerate()
            .map(|(index, line)| InputRecord {
                value: serde_json::from_str(line)
                    .unwrap_or_else(|_| Value::String(line.to_string())),
                index,
                repairs: 0,
            })
            .collect();
        ChatStreamReader.read(records, &context)
    }

    #[test]
    fn raw_sse_lines_reassemble_reasoning_text_and_a_tool_call() {
        let lines = [
            r#"data: {"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Think"}}]}"#,
            "",
            r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning_content":"ing."}}]}"#,
            r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Let me "}}]}"#,
            r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"check.","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":""}}]}}]}"#,
            r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]}"#,
            r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}"#,
            r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "data: [DONE]",
            "",
        ];
        assert!(ChatStreamReader.detect(None, lines[0].as_bytes()));
        let read = read_lines(&lines);
        assert!(read.refused.is_empty(), "{:?}", read.refused);
        assert_eq!(read.conversations.len(), 1);
        let c = &read.conversations[0];
        assert_eq!(c.records, (0..10).collect::<Vec<_>>());
        let m = &c.transcript.messages;
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].role.as_str(), "assistant");
        assert_eq!(m[0].reasoning.as_deref(), Some("Thinking."));
        assert_eq!(m[0].content, Content::Text("Let me check.".into()));
        assert_eq!(
            m[0].tool_calls,
            vec![ToolCall {
                id: Some("call_1".into()),
                name: "get".into(),
                arguments: r#"{"a":1}"#.into(),
                ..ToolCall::default()
            }]
        );
        assert_eq!(c.transcript.meta.model.as_deref(), Some("m"));
        assert_eq!(c.transcript.meta.format, Some(FORMAT));
    }

    #[test]
    fn id_lines_are_part_of_a_stream_and_unreadable_logged_events_are_counted() {
        // `id:` and `retry:` lines are SSE fields, read as every log reader reads them
        // (`sse::line`): not refused.
        let lines = [
            "id: 1",
            r#"data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"}}]}"#,
            "retry: 100",
            r#"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "data: [DONE]",
        ];
        assert!(ChatStreamReader.detect(None, lines[0].as_bytes()));
        let read = read_lines(&lines);
        assert!(read.refused.is_empty(), "{:?}", read.refused);
        assert_eq!(read.conversations[0].records, (0..5).collect::<Vec<_>>());
        // A logged event whose data is not JSON is dropped with a note carrying its bytes.
        let pair = json!({"request": {"body": {"model": "m", "messages": [{"role": "user", "content": "q"}]}},
            "response": {"status": 200, "sse_events": [
                {"data": {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "a"}}]}},
                {"data": "{\"object\": \"chat.comp"},
                {"data": "[DONE]"}]}});
        let read = read_lines(&[&pair.to_string()]);
        let notes = &read.conversations[0].transcript.source_notes;
        let note = notes
            .iter()
            .find(|n| n.rule.as_str() == "builtin.unreadable-event")
            .expect("the dropped event is noted");
        assert_eq!(
            (note.count, note.bytes_dropped),
            (1, r#"{"object": "chat.comp"#.len())
        );
    }

    #[test]
    fn logged_pairs_resending_history_are_one_conversation() {
        let first = json!({"request": {"body": {"model": "m", "messages": [{"role": "user", "content": "q"}]}},
            "response": {"status": 200, "sse_events": [
                {"data": {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]}},
                {"data": {"object": "chat.completion.chunk", "choices": [{"index": 1, "delta": {"role": "assistant", "content": "other"}}]}},
                {"data": "[DONE]"}]}});
        let second = json!({"request": {"body": {"model": "m", "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "42"}]}},
            "response": {"status": 200, "body": {"id": "chatcmpl-2", "created": 1700000000, "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "It is 42."}}]}}});
        let read = read_lines(&[&first.to_string(), &second.to_string()]);
        assert_eq!(read.conversations.len(), 1);
        let c = &read.conversations[0];
        assert_eq!(c.records, vec![0, 1]);
        let roles: Vec<&str> = c
            .transcript
            .messages
            .iter()
            .map(|m| m.role.as_str())
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
        assert_eq!(
            c.transcript.messages[3].content,
            Content::Text("It is 42.".into())
        );
        assert!(c.transcript.meta.finished);
        let notes = c.transcript.note_counts();
        assert_eq!(
            notes,
            [("policy.resent_history", 1), ("builtin.extra-choices", 1)]
        );
        assert_eq!(c.transcript.source_notes[1].bytes_dropped, 5);
    }

    #[test]
    fn a_line_of_another_kind_is_refused_alone() {
        let read = read_lines(&[r#"{"foo": 1}"#]);
        assert_eq!(read.refused.len(), 1);
        assert!(read.refused[0]
            .1
            .to_string()
            .contains("not a chat-stream record"));
    }
}
