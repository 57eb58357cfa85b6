//! Anthropic Messages API logs: request bodies, response objects, `{request, response}` pairs
//! (the response a body or SSE events), and Message Batches request lines joined to their
//! results.
//!
//! Every record is one entry: what was sent (`system`, `messages`, `tools`, `model`) and what
//! came back (a `message` object). SSE events are reassembled by block `index`
//! (`text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`). A Batch request line
//! (`{custom_id, params}`) gets its result from the results file read ahead
//! ([`super::batch::BatchIndex`], or a result line of the same file); an `errored`, `expired` or
//! `canceled` result quarantines the request with its reason.
//!
//! Requests resend the whole history, so entries are grouped into chains ([`super::chain`],
//! `policy.resent_history`). A conversation is its last request's `system` (a system message,
//! which the `[[rule]]`s classify), messages and response, each content mapped by the shared
//! block mapper ([`super::blocks`]).

use std::collections::hash_map;
use std::collections::HashMap;

use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde_json::{json, Map, Value};

mod envelope;

use super::batch::{batch_result, is_anthropic_result};
use super::blocks::{add_note, map_content, Notes};
use super::builder::TranscriptBuilder;
use super::chain::{self, request_body, response_body};
use super::fields::object_or_default;
use super::format::{FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceFormat};
use super::sse::{self, Line, Unreadable};
use super::InputError;
use crate::model::time::parse_rfc3339_ms;
use crate::model::transcript::{Content, Message, Part, RecordMeta, Role, SourceNote, Transcript};
use crate::rules::policy::ResentHistory;
use crate::rules::Builtin;
use envelope::{
    BatchLine, Delta, Event, Logged, Request, Response, SystemBlock, ToolDefinition, Turn,
};

pub(crate) struct AnthropicReader;

impl SourceFormat {
    /// Anthropic Messages API logs: requests, responses, pairs, SSE streams, Batch API files.
    pub const ANTHROPIC: SourceFormat = SourceFormat::named("anthropic");
}

const FORMAT: SourceFormat = SourceFormat::ANTHROPIC;

/// Whether a request body looks like the Messages API's (not Chat Completions').
fn is_messages_request(body: &Value) -> bool {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return false;
    };
    if messages.iter().any(|m| {
        matches!(
            m.get("role").and_then(Value::as_str),
            Some("system" | "developer" | "tool")
        )
    }) {
        return false;
    }
    let block_types = [
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "document",
    ];
    let has_blocks = messages.iter().any(|m| {
        m.get("content")
            .and_then(Value::as_array)
            .is_some_and(|blocks| {
                blocks.iter().any(|b| {
                    b.get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| block_types.contains(&t))
                        || (b.get("type").and_then(Value::as_str) == Some("image")
                            && b.get("source").is_some())
                })
            })
    });
    has_blocks
        || body.get("system").is_some()
        || body.get("anthropic_version").is_some()
        || body.get("thinking").is_some()
        || body.get("stop_sequences").is_some()
        || (body.get("max_tokens").is_some()
            && body
                .get("model")
                .and_then(Value::as_str)
                .is_some_and(|m| m.starts_with("claude")))
}

fn is_message_object(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str) == Some("message")
        && value.get("role").and_then(Value::as_str) == Some("assistant")
        && value.get("content").is_some_and(Value::is_array)
}

fn is_pair(value: &Value) -> bool {
    let (Some(request), Some(response)) = (value.get("request"), value.get("response")) else {
        return false;
    };
    let body = request.get("body").unwrap_or(request);
    if body.get("messages").is_none() {
        return false;
    }
    let uri = request
        .get("uri")
        .or_else(|| request.get("url"))
        .and_then(Value::as_str);
    let response_body = response.get("body").unwrap_or(response);
    uri.is_some_and(|u| u.contains("anthropic") || u.contains("/v1/messages"))
        || is_message_object(response_body)
        || response_body.get("type").and_then(Value::as_str) == Some("error")
            && is_messages_request(body)
        || sse::events(value).is_some_and(|events| {
            events
                .data
                .iter()
                .any(|e| e.get("type").and_then(Value::as_str) == Some("message_start"))
        })
}

fn is_batch_request(value: &Value) -> bool {
    value.get("custom_id").is_some_and(Value::is_string)
        && value
            .get("params")
            .is_some_and(|p| p.get("messages").is_some_and(Value::is_array))
}

/// A raw SSE line of a Messages stream: an `event:` line, or a `data:` line of a Messages
/// event (Chat Completions streams have neither). Later lines of the file (comments, `id:`)
/// belong to it too once the file is Anthropic.
fn is_sse_line(line: &str) -> bool {
    let kinds = [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    ];
    match sse::line(line) {
        Line::Filler => !line.trim().is_empty(),
        Line::Data(data) => data
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| kinds.contains(&t)),
        Line::Done | Line::Unreadable(_) | Line::Other => false,
    }
}

fn claims(value: &Value) -> bool {
    is_pair(value)
        || is_batch_request(value)
        || is_anthropic_result(value)
        || is_message_object(value)
        || is_messages_request(value)
}

impl FormatReader for AnthropicReader {
    fn format(&self) -> SourceFormat {
        SourceFormat::ANTHROPIC
    }

    fn describe(&self) -> &'static str {
        "Anthropic Messages API logs: requests, responses, pairs, SSE streams, Batch API files"
    }

    fn granularity(&self) -> Granularity {
        Granularity::File
    }

    fn detect(&self, first: Option<&Value>, raw: &[u8]) -> bool {
        match first {
            Some(Value::String(line)) => is_sse_line(line),
            Some(value) => claims(value),
            None => is_sse_line(&String::from_utf8_lossy(raw)),
        }
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        let mut read = FileRead::default();
        // Result lines of the same file, by custom_id, for requests that were not joined.
        let mut results: HashMap<String, (usize, Value)> = HashMap::new();
        let mut values = Vec::new();
        // A file of raw SSE lines: each stream (message_start to message_stop) a response.
        let mut stream: Option<(Vec<usize>, Vec<Value>, Unreadable)> = None;
        let mut streams = Vec::new();
        for record in records {
            if let Value::String(line) = &record.value {
                let open = stream.get_or_insert_with(Default::default);
                open.0.push(record.index);
                let read = sse::line(line);
                open.2.count(&read);
                let data = match read {
                    Line::Data(data) => Some(data),
                    Line::Done | Line::Filler | Line::Unreadable(_) | Line::Other => None,
                };
                let stop = data
                    .as_ref()
                    .and_then(|d| d.get("type"))
                    .and_then(Value::as_str)
                    == Some("message_stop");
                open.1.extend(data);
                if stop {
                    streams.extend(stream.take());
                }
                continue;
            }
            if is_anthropic_result(&record.value) {
                let line: BatchLine = object_or_default(record.value);
                let id = line.id();
                // The first result of an id joins its request, as across files
                // ([`super::batch::BatchIndex::scan`]); a later one has no request left to
                // join, and is refused rather than put in the first one's place, where the
                // first line would be in no conversation, refusal or drop.
                match results.entry(id) {
                    hash_map::Entry::Vacant(slot) => {
                        slot.insert((record.index, line.result.0.unwrap_or(Value::Null)));
                    }
                    hash_map::Entry::Occupied(slot) => {
                        let error = InputError::BatchResultWithoutRequest(slot.key().clone());
                        read.refused.push((record.index, error));
                    }
                }
            } else {
                values.push(record);
            }
        }
        streams.extend(stream.take());
        let mut entries = Vec::new();
        for (records, events, unreadable) in streams {
            if events.is_empty() {
                for index in records {
                    read.refused
                        .push((index, not_format("an SSE line with no Messages event")));
                }
                continue;
            }
            let response = assemble(events);
            match entry_of(response, records.clone()) {
                Ok(mut entry) => {
                    entry.unreadable = unreadable;
                    entries.push(entry)
                }
                Err(error) => {
                    for index in records {
                        read.refused.push((index, error.clone()));
                    }
                }
            }
        }
        for record in values {
            let mut records = vec![record.index];
            let entry = if is_batch_request(&record.value) {
                let mut line: BatchLine = object_or_default(record.value);
                if line.result.0.is_none() {
                    if let Some((index, result)) = results.remove(&line.id()) {
                        line.result.0 = Some(result);
                        records.push(index);
                    }
                }
                batch_entry(line, records.clone())
            } else {
                entry_of(record.value, records.clone())
            };
            match entry {
                Ok(entry) => entries.push(entry),
                Err(error) => {
                    for index in records {
                        read.refused.push((index, error.clone()));
                    }
                }
            }
        }
        for (id, (index, _)) in results {
            read.refused
                .push((index, InputError::BatchResultWithoutRequest(id)));
        }
        conversations(entries, context, &mut read);
        read.conversations
            .sort_by_key(|c| c.records.first().copied());
        read.refused.sort_by_key(|(i, _)| *i);
        read
    }
}

fn not_format(problem: impl Into<String>) -> InputError {
    InputError::NotInFormat {
        format: FORMAT,
        problem: problem.into(),
    }
}

/// One logged exchange.
#[derive(Debug, Default)]
struct Entry {
    records: Vec<usize>,
    system: Option<Value>,
    history: Vec<Value>,
    response: Option<Turn>,
    tools: Vec<Value>,
    model: Option<String>,
    id: Option<String>,
    created_ms: Option<i64>,
    /// Request keys nothing converts.
    ignored: Vec<String>,
    notes: Vec<SourceNote>,
    /// What reading its logged events dropped.
    unreadable: Unreadable,
}

fn entry_of(mut value: Value, records: Vec<usize>) -> Result<Entry, InputError> {
    if is_batch_request(&value) {
        return batch_entry(object_or_default(value), records);
    }
    let mut entry = Entry {
        records,
        ..Entry::default()
    };
    let (request, response) = if is_pair(&value) {
        let events = sse::events(&value);
        let request = request_body(&mut value);
        let response = match events {
            Some(events) => {
                entry.unreadable = events.unreadable;
                Some(assemble(events.data))
            }
            None => response_body(&mut value),
        };
        if let Some(time) = object_or_default::<Logged>(value).time() {
            entry.created_ms = parse_rfc3339_ms(&time);
        }
        (request, response)
    } else if is_message_object(&value) {
        (None, Some(value))
    } else if is_messages_request(&value) {
        (Some(value), None)
    } else {
        return Err(not_format(
            "neither a Messages request, a message object, a {request, response} pair nor a Message Batches line",
        ));
    };
    read_exchange(&mut entry, request, response)?;
    Ok(entry)
}

/// A Message Batches request line, its result joined: `errored`, `expired` and `canceled`
/// results refuse it with their reason.
fn batch_entry(line: BatchLine, records: Vec<usize>) -> Result<Entry, InputError> {
    let custom_id = line.id();
    let response = match line.result.0 {
        None | Some(Value::Null) => None,
        Some(result) => Some(batch_result(result, &custom_id)?),
    };
    let mut entry = Entry {
        records,
        id: Some(custom_id),
        ..Entry::default()
    };
    read_exchange(&mut entry, line.params, response)?;
    Ok(entry)
}

/// What was sent (a request body, when it is an object) and what came back.
fn read_exchange(
    entry: &mut Entry,
    request: Option<Value>,
    response: Option<Value>,
) -> Result<(), InputError> {
    if let Some(request @ Value::Object(_)) = request {
        let request: Request = object_or_default(request);
        let Some(messages) = request.messages.0 else {
            return Err(not_format("the request has no `messages` list"));
        };
        entry.history = messages;
        entry.system = request.system;
        if let Some(tools) = request.tools.0 {
            entry.tools = tools;
            entry.ignored.push("tools".into());
        }
        entry.model = request.model.0;
        entry.ignored.extend(
            request
                .rest
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, _)| k),
        );
    }
    if let Some(response) = response {
        let response: Response = object_or_default(response);
        if response.is_message() {
            if let Some(model) = response.model.0.clone() {
                entry.model = Some(model);
            }
            if entry.id.is_none() {
                entry.id = response.id.0.clone();
            }
            entry.response = Some(response.into_turn());
        } else {
            let what = match response.error.and_then(|error| error.kind.0) {
                Some(kind) => format!("response is an API error ({kind}): no reply"),
                None => "response is not a message: no reply".to_string(),
            };
            add_note(&mut entry.notes, Builtin::ApiErrorResponse, &what, 1, 0);
        }
    }
    Ok(())
}

/// Reassembles SSE events into a message object: blocks by `index`.
pub(crate) fn assemble(events: Vec<Value>) -> Value {
    let mut message = json!({"type": "message", "role": "assistant", "content": []});
    let mut blocks: Vec<(u64, Value, String)> = Vec::new();
    // The last block started with each index: a delta finds its block without a search,
    // so N blocks and their N deltas stay O(N).
    let mut last_with_index: FxHashMap<u64, usize> = FxHashMap::default();
    for event in events {
        let event: Event = object_or_default(event);
        match event.kind.0.as_deref() {
            Some("message_start") => {
                for (k, v) in event.message.into_iter().flatten() {
                    if k != "content" {
                        message[k] = v;
                    }
                }
            }
            Some("content_block_start") => {
                let index = event.index.0.unwrap_or(blocks.len() as u64);
                let block = match event.content_block {
                    Some(block @ Value::Object(_)) => block,
                    _ => json!({}),
                };
                last_with_index.insert(index, blocks.len());
                blocks.push((index, block, String::new()));
            }
            Some("content_block_delta") => {
                let at = event.index.0.and_then(|index| last_with_index.get(&index));
                let Some(slot) = at.and_then(|&at| blocks.get_mut(at)) else {
                    continue;
                };
                let Some(delta) = event.delta else {
                    continue;
                };
                let delta: Delta = object_or_default(delta);
                // Appended in place: copying the text so far for each delta would be O(N²) in
                // the deltas. A value that is not a string is replaced.
                let mut push = |key: &str, piece: Option<String>| {
                    let piece = piece.unwrap_or_default();
                    match slot.1.get_mut(key) {
                        Some(Value::String(current)) => current.push_str(&piece),
                        _ => slot.1[key] = Value::String(piece),
                    }
                };
                match delta.kind.0.as_deref() {
                    Some("text_delta") => push("text", delta.text.0),
                    Some("thinking_delta") => push("thinking", delta.thinking.0),
                    Some("signature_delta") => push("signature", delta.signature.0),
                    Some("input_json_delta") => slot
                        .2
                        .push_str(delta.partial_json.0.as_deref().unwrap_or_default()),
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(Value::Object(delta)) = event.delta {
                    for (k, v) in delta {
                        message[k] = v;
                    }
                }
            }
            _ => {}
        }
    }
    blocks.sort_by_key(|(i, _, _)| *i);
    let content: Vec<Value> = blocks
        .into_iter()
        .map(|(_, mut block, json)| {
            if !json.is_empty() {
                block["input"] = serde_json::from_str(&json).unwrap_or(Value::String(json));
            }
            block
        })
        .collect();
    message["content"] = Value::Array(content);
    message
}

impl chain::Link for Entry {
    fn records(&self) -> &[usize] {
        &self.records
    }
}

fn conversations(entries: Vec<Entry>, context: &ReadContext<'_>, read: &mut FileRead) {
    let merge = context.rules.policy.resent_history == ResentHistory::Merge;
    let mut histories = chain::Histories::default();
    for e in &entries {
        let mut h: Vec<Value> = e.system.iter().map(|s| json!({"system": s})).collect();
        h.extend(e.history.iter().cloned());
        if e.history.is_empty() {
            h.clear();
        }
        histories.whole(
            h.iter()
                .map(|m| chain::canonical(m, &["cache_control"], "text"))
                .collect(),
        );
    }
    let merged = "request merged into a later one resending its history";
    chain::drive(entries, histories, merge, merged, read, |mut members| {
        let mut unreadable = Unreadable::default();
        members.iter().for_each(|m| unreadable.add(m.unreadable));
        let Some(mut last) = members.pop() else {
            return Err(InputError::NotARecord("empty chain"));
        };
        let mut notes = std::mem::take(&mut last.notes);
        let mut transcript = transcript(last, context)?;
        notes.append(&mut transcript.source_notes);
        notes.extend(unreadable.note());
        transcript.source_notes = notes;
        Ok(transcript)
    });
}

fn transcript(entry: Entry, context: &ReadContext<'_>) -> Result<Transcript, InputError> {
    let policy = &context.rules.policy;
    let mut messages = Vec::new();
    if let Some(system) = entry.system {
        let content = match system {
            Value::String(text) => Content::Text(text),
            Value::Array(blocks) => Content::Parts(
                blocks
                    .into_iter()
                    .map(|b| match b {
                        Value::String(text) => Part::Text(text),
                        b @ (Value::Null
                        | Value::Bool(_)
                        | Value::Number(_)
                        | Value::Array(_)
                        | Value::Object(_)) => {
                            let block: SystemBlock = object_or_default(b);
                            match block.text.0 {
                                Some(text) => Part::Text(text),
                                None => Part::Unknown {
                                    kind: block.kind.0.unwrap_or_else(|| "(no type)".into()),
                                },
                            }
                        }
                    })
                    .collect(),
            ),
            other @ Value::Null
            | other @ Value::Bool(_)
            | other @ Value::Number(_)
            | other @ Value::Object(_) => Content::Text(other.to_string()),
        };
        messages.push(Message {
            role: Role::System,
            content,
            ..Message::default()
        });
    }
    let mut finished = false;
    let mut notes = Notes::default();
    let turns = entry
        .history
        .into_iter()
        .map(|m| (object_or_default::<Turn>(m), false))
        .chain(entry.response.map(|r| (r, true)));
    for (i, (turn, is_reply)) in turns.enumerate() {
        let role = match turn.role.0 {
            Some(role) => Role::named(role),
            None => {
                return Err(InputError::BadMessage {
                    path: "messages".into(),
                    index: i,
                    problem: "has no `role`".into(),
                })
            }
        };
        if is_reply {
            finished = turn.stop_reason.0.as_deref() == Some("end_turn");
        }
        let content = turn.content.unwrap_or(Value::Null);
        let mut mapped = map_content(role, content, policy);
        messages.append(&mut mapped.messages);
        notes.merge(mapped.notes);
    }
    if messages.iter().all(|m| m.role == Role::System) {
        return Err(InputError::EmptyMessages("messages".into()));
    }
    let mut built = TranscriptBuilder::with_meta(RecordMeta {
        id: entry.id,
        created_ms: entry.created_ms,
        model: entry.model,
        finished,
        messages_at: "messages".into(),
        format: Some(FORMAT),
        ..RecordMeta::default()
    });
    built.messages(messages);
    built.notes(notes);
    let tools = entry
        .tools
        .into_iter()
        .map(|tool| {
            // Read in place: a tool without `input_schema` is kept as given.
            let definition = match &tool {
                Value::Object(_) => ToolDefinition::deserialize(&tool).unwrap_or_default(),
                Value::Null
                | Value::Bool(_)
                | Value::Number(_)
                | Value::String(_)
                | Value::Array(_) => ToolDefinition::default(),
            };
            let Some(parameters) = definition.input_schema.0 else {
                // A server tool (web_search_20250305, ...).
                return tool;
            };
            let mut function = Map::new();
            let fields = [
                ("name", definition.name.0),
                ("description", definition.description.0),
                ("parameters", Some(parameters)),
            ];
            for (key, value) in fields {
                if let Some(value) = value {
                    function.insert(key.into(), value);
                }
            }
            json!({"type": "function", "function": Value::Object(function)})
        })
        .collect();
    built.tools(tools);
    for field in entry.ignored {
        built.ignore(field);
    }
    built.finish()
}

#[cfg(test)]
mod tests;
