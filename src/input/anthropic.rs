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
use serde_json::{json, Map, Value};

use super::batch::{batch_result, is_anthropic_result};
use super::blocks::{add_note, map_content, Notes};
use super::builder::TranscriptBuilder;
use super::chain::{self, request_body, response_body};
use super::format::{FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceFormat};
use super::sse::{self, Line, Unreadable};
use super::InputError;
use crate::model::time::parse_rfc3339_ms;
use crate::model::transcript::{Content, Message, Part, RecordMeta, Role, SourceNote, Transcript};
use crate::rules::policy::ResentHistory;
use crate::rules::Builtin;

pub struct AnthropicReader;

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
                let id = record.value["custom_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                // The first result of an id joins its request, as across files
                // ([`super::batch::BatchIndex::scan`]); a later one has no request left to
                // join, and is refused rather than put in the first one's place, where the
                // first line would be in no conversation, refusal or drop.
                match results.entry(id) {
                    hash_map::Entry::Vacant(slot) => {
                        slot.insert((record.index, record.value));
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
            let response = assemble(&events);
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
            let mut value = record.value;
            let mut records = vec![record.index];
            if is_batch_request(&value) && value.get("result").is_none() {
                let id = value["custom_id"].as_str().unwrap_or_default().to_string();
                if let Some((index, mut line)) = results.remove(&id) {
                    value["result"] = line
                        .get_mut("result")
                        .map(std::mem::take)
                        .unwrap_or(Value::Null);
                    records.push(index);
                }
            }
            match entry_of(value, records.clone()) {
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
    response: Option<Value>,
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
    let mut entry = Entry {
        records,
        ..Entry::default()
    };
    let (request, response) = if is_batch_request(&value) {
        let custom_id = value["custom_id"].as_str().unwrap_or_default().to_string();
        entry.id = Some(custom_id.clone());
        let response = match value.get_mut("result").map(std::mem::take) {
            None | Some(Value::Null) => None,
            Some(result) => Some(batch_result(result, &custom_id)?),
        };
        (value.get_mut("params").map(std::mem::take), response)
    } else if is_pair(&value) {
        let events = sse::events(&value);
        let request = request_body(&mut value);
        let response = match events {
            Some(events) => {
                entry.unreadable = events.unreadable;
                Some(assemble(&events.data))
            }
            None => response_body(&mut value),
        };
        if let Some(time) = value
            .get("timestamp")
            .or_else(|| value.get("created_at"))
            .and_then(Value::as_str)
        {
            entry.created_ms = parse_rfc3339_ms(time);
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
    if let Some(Value::Object(mut request)) = request {
        entry.history = match request.remove("messages") {
            Some(Value::Array(messages)) => messages,
            _ => return Err(not_format("the request has no `messages` list")),
        };
        entry.system = request.remove("system").filter(|s| !s.is_null());
        if let Some(Value::Array(tools)) = request.remove("tools") {
            entry.tools = tools;
            entry.ignored.push("tools".into());
        }
        entry.model = request
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string);
        entry.ignored.extend(
            request
                .iter()
                .filter(|(k, v)| !v.is_null() && k.as_str() != "model")
                .map(|(k, _)| k.clone()),
        );
    }
    if let Some(response) = response {
        if is_message_object(&response) {
            if let Some(model) = response.get("model").and_then(Value::as_str) {
                entry.model = Some(model.to_string());
            }
            if entry.id.is_none() {
                entry.id = response
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            entry.response = Some(response);
        } else {
            let what = match response.pointer("/error/type").and_then(Value::as_str) {
                Some(kind) => format!("response is an API error ({kind}): no reply"),
                None => "response is not a message: no reply".to_string(),
            };
            add_note(&mut entry.notes, Builtin::ApiErrorResponse, &what, 1, 0);
        }
    }
    Ok(entry)
}

/// Reassembles SSE events into a message object: blocks by `index`.
pub fn assemble(events: &[Value]) -> Value {
    let mut message = json!({"type": "message", "role": "assistant", "content": []});
    let mut blocks: Vec<(u64, Value, String)> = Vec::new();
    // The last block started with each index: a delta finds its block without a search,
    // so N blocks and their N deltas stay O(N).
    let mut last_with_index: FxHashMap<u64, usize> = FxHashMap::default();
    for event in events {
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                if let Some(Value::Object(start)) = event.get("message") {
                    for (k, v) in start {
                        if k != "content" {
                            message[k] = v.clone();
                        }
                    }
                }
            }
            Some("content_block_start") => {
                let index = event
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(blocks.len() as u64);
                let block = match event.get("content_block") {
                    Some(block @ Value::Object(_)) => block.clone(),
                    _ => json!({}),
                };
                last_with_index.insert(index, blocks.len());
                blocks.push((index, block, String::new()));
            }
            Some("content_block_delta") => {
                let at = event
                    .get("index")
                    .and_then(Value::as_u64)
                    .and_then(|index| last_with_index.get(&index));
                let Some(slot) = at.and_then(|&at| blocks.get_mut(at)) else {
                    continue;
                };
                let Some(delta) = event.get("delta") else {
                    continue;
                };
                let text = |key: &str| {
                    delta
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                // Appended in place: copying the text so far for each delta would be O(N²) in
                // the deltas. A value that is not a string is replaced.
                let mut push = |key: &str, piece: String| match slot.1.get_mut(key) {
                    Some(Value::String(current)) => current.push_str(&piece),
                    _ => slot.1[key] = Value::String(piece),
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => push("text", text("text")),
                    Some("thinking_delta") => push("thinking", text("thinking")),
                    Some("signature_delta") => push("signature", text("signature")),
                    Some("input_json_delta") => slot.2.push_str(&text("partial_json")),
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(Value::Object(delta)) = event.get("delta") {
                    for (k, v) in delta {
                        message[k] = v.clone();
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
                        mut b @ (Value::Null
                        | Value::Bool(_)
                        | Value::Number(_)
                        | Value::Array(_)
                        | Value::Object(_)) => match b.get_mut("text").map(std::mem::take) {
                            Some(Value::String(text)) => Part::Text(text),
                            _ => Part::Unknown {
                                kind: b
                                    .get("type")
                                    .and_then(Value::as_str)
                                    .unwrap_or("(no type)")
                                    .to_string(),
                            },
                        },
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
        .map(|m| (m, false))
        .chain(entry.response.map(|r| (r, true)));
    for (i, (mut message, is_reply)) in turns.enumerate() {
        let role = match message.get("role").and_then(Value::as_str) {
            Some(role) => Role::named(role.to_string()),
            None => {
                return Err(InputError::BadMessage {
                    path: "messages".into(),
                    index: i,
                    problem: "has no `role`".into(),
                })
            }
        };
        if is_reply {
            finished = message.get("stop_reason").and_then(Value::as_str) == Some("end_turn");
        }
        let content = message
            .get_mut("content")
            .map(std::mem::take)
            .unwrap_or(Value::Null);
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
            let mut function = Map::new();
            for (from, to) in [
                ("name", "name"),
                ("description", "description"),
                ("input_schema", "parameters"),
            ] {
                if let Some(v) = tool.get(from) {
                    function.insert(to.into(), v.clone());
                }
            }
            if tool.get("input_schema").is_none() {
                // A server tool (web_search_20250305, ...): kept as given.
                return tool;
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
mod tests {
    use super::*;
    use crate::model::transcript::{ReasoningOrigin, Thinking, ToolCall};
    use crate::rules::RuleSet;
    use std::path::Path;

    fn read(values: Vec<Value>) -> FileRead {
        let rules = RuleSet::builtin().unwrap();
        crate::input::format::read_values(&AnthropicReader, values, &rules, Path::new("log.jsonl"))
    }

    fn ev(data: Value) -> Value {
        json!({"event": data["type"].clone(), "data": data})
    }

    #[test]
    fn an_sse_stream_with_thinking_and_a_tool_call() {
        let events = vec![
            ev(
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-0", "content": []}}),
            ),
            ev(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ),
            ev(json!({"type": "ping"})),
            ev(
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "The user wants "}}),
            ),
            ev(
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "the weather."}}),
            ),
            ev(
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}}),
            ),
            ev(json!({"type": "content_block_stop", "index": 0})),
            ev(
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            ),
            ev(
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Checking."}}),
            ),
            ev(json!({"type": "content_block_stop", "index": 1})),
            ev(
                json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}}),
            ),
            ev(
                json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            ),
            ev(
                json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": "}}),
            ),
            ev(
                json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"Paris\"}"}}),
            ),
            ev(json!({"type": "content_block_stop", "index": 2})),
            ev(
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}}),
            ),
            ev(json!({"type": "message_stop"})),
        ];
        let pair = json!({"request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages", "body": {
                "model": "claude-sonnet-4-0", "max_tokens": 1024, "stream": true, "system": "Be brief.",
                "messages": [{"role": "user", "content": "Weather in Paris?"}]}},
            "response": {"status": 200, "sse_events": events}});
        assert!(AnthropicReader.detect(Some(&pair), b""));
        let read = read(vec![pair]);
        assert!(read.refused.is_empty(), "{:?}", read.refused);
        let t = &read.conversations[0].transcript;
        assert_eq!(t.messages.len(), 3);
        assert_eq!(
            (t.messages[0].role.as_str(), t.messages[0].content.clone()),
            ("system", Content::Text("Be brief.".into()))
        );
        assert_eq!(
            t.messages[1].content,
            Content::Parts(vec![Part::Text("Weather in Paris?".into())])
        );
        let reply = &t.messages[2];
        assert_eq!(reply.role.as_str(), "assistant");
        assert_eq!(
            reply.thinking,
            vec![Thinking {
                summary: vec![],
                content: vec!["The user wants the weather.".into()],
                encrypted: None,
                origin: ReasoningOrigin::Anthropic
            }]
        );
        assert_eq!(
            reply.content,
            Content::Parts(vec![Part::Text("Checking.".into())])
        );
        assert_eq!(
            reply.tool_calls,
            vec![ToolCall {
                id: Some("toolu_1".into()),
                name: "weather".into(),
                arguments: r#"{"city":"Paris"}"#.into(),
                arguments_from_object: true,
                ..ToolCall::default()
            }]
        );
        assert_eq!(t.meta.model.as_deref(), Some("claude-sonnet-4-0"));
        assert!(!t.meta.finished);
        let notes: Vec<&str> = t.source_notes.iter().map(|n| n.rule.as_str()).collect();
        assert_eq!(notes, ["builtin.thinking-signature"]);
    }

    /// Many blocks, their deltas in any order; a delta goes to the last block
    /// started with its index, a delta without one nowhere, and text is appended to the text
    /// the block holds (a value that is no string is replaced).
    #[test]
    fn sse_deltas_find_their_blocks_among_many() {
        let n = 2000;
        let mut events =
            vec![json!({"type": "message_start", "message": {"id": "m", "model": "c"}})];
        for i in 0..n {
            events.push(json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": format!("t{i}"), "name": "f", "input": {}}}));
        }
        for i in (0..n).rev() {
            events.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": format!("{{\"i\":{i}")}}));
        }
        for i in 0..n {
            events.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": "}"}}));
        }
        // Index `n` twice: the deltas go to the second block.
        events.push(json!({"type": "content_block_start", "index": n, "content_block": {"type": "text", "text": "first"}}));
        events.push(json!({"type": "content_block_start", "index": n, "content_block": {"type": "text", "text": 7}}));
        for word in ["a", "b", "c"] {
            events.push(json!({"type": "content_block_delta", "index": n, "delta": {"type": "text_delta", "text": word}}));
        }
        events.push(
            json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "lost"}}),
        );
        let mut content: Vec<Value> = (0..n)
            .map(|i| json!({"type": "tool_use", "id": format!("t{i}"), "name": "f", "input": {"i": i}}))
            .collect();
        content.push(json!({"type": "text", "text": "first"}));
        content.push(json!({"type": "text", "text": "abc"}));
        assert_eq!(
            assemble(&events),
            json!({"type": "message", "role": "assistant", "id": "m", "model": "c", "content": content})
        );
    }

    fn request(messages: Value) -> Value {
        json!({"model": "claude-haiku-4-5", "max_tokens": 100, "messages": messages})
    }

    fn pair(messages: Value, reply: &str) -> Value {
        json!({"request": {"uri": "https://api.anthropic.com/v1/messages", "body": request(messages)},
               "response": {"status": 200, "body": {"type": "message", "role": "assistant", "id": "msg", "stop_reason": "end_turn",
                 "content": [{"type": "text", "text": reply}]}}})
    }

    #[test]
    fn a_file_of_raw_sse_lines_is_a_response() {
        let lines = [
            "event: message_start",
            r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[]}}"#,
            "event: content_block_start",
            r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi there"}}"#,
            r#"data: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#,
            r#"data: {"type":"message_stop"}"#,
        ];
        assert!(AnthropicReader.detect(None, lines[0].as_bytes()));
        assert!(!AnthropicReader.detect(
            None,
            br#"data: {"object":"chat.completion.chunk","choices":[]}"#
        ));
        let read = read(lines.iter().map(|l| json!(l)).collect());
        assert!(read.refused.is_empty(), "{:?}", read.refused);
        let c = &read.conversations[0];
        assert_eq!(c.records, (0..7).collect::<Vec<_>>());
        assert_eq!(c.transcript.messages.len(), 1);
        assert_eq!(c.transcript.messages[0].content.texts(), vec!["Hi there"]);
        assert!(c.transcript.meta.finished);
    }

    #[test]
    fn a_chain_of_three_requests_is_one_conversation() {
        let u1 = json!({"role": "user", "content": "Who is youngest?"});
        let a1 = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "info", "input": {"name": "Alice"}}]});
        let r1 = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "Alice is 30", "cache_control": {"type": "ephemeral"}}]});
        let r1_moved = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "Alice is 30"}]});
        let a2 = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_b", "name": "info", "input": {"name": "Bob"}}]});
        let r2 = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "Bob is 5", "is_error": false}]});
        let read = read(vec![
            pair(json!([u1]), "ignored: the next request holds it"),
            pair(json!([u1, a1, r1]), "ignored too"),
            pair(json!([u1, a1, r1_moved, a2, r2]), "Bob."),
        ]);
        assert_eq!(read.conversations.len(), 1);
        let c = &read.conversations[0];
        assert_eq!(c.records, vec![0, 1, 2]);
        type Shape<'a> = (&'a str, Vec<&'a str>, Vec<String>, Vec<String>);
        let shape: Vec<Shape> = c
            .transcript
            .messages
            .iter()
            .map(|m| {
                (
                    m.role.as_str(),
                    m.content.texts(),
                    m.tool_calls.iter().filter_map(|t| t.id.clone()).collect(),
                    m.tool_call_ids.clone(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                ("user", vec!["Who is youngest?"], vec![], vec![]),
                ("assistant", vec![], vec!["toolu_a".to_string()], vec![]),
                (
                    "tool",
                    vec!["Alice is 30"],
                    vec![],
                    vec!["toolu_a".to_string()]
                ),
                ("assistant", vec![], vec!["toolu_b".to_string()], vec![]),
                (
                    "tool",
                    vec!["Bob is 5"],
                    vec![],
                    vec!["toolu_b".to_string()]
                ),
                ("assistant", vec!["Bob."], vec![], vec![]),
            ]
        );
        assert!(c.transcript.meta.finished);
        let notes = c.transcript.note_counts();
        assert_eq!(notes, [("policy.resent_history", 2)]);
    }

    #[test]
    fn a_chain_that_diverges_is_kept_apart_and_says_where() {
        let u1 = json!({"role": "user", "content": "Plan a trip"});
        let a1 = json!({"role": "assistant", "content": "Where to?"});
        let read = read(vec![
            pair(json!([u1]), "Where to?"),
            pair(
                json!([u1, a1, {"role": "user", "content": "Rome"}]),
                "Rome it is.",
            ),
            pair(
                json!([u1, a1, {"role": "user", "content": "Paris"}]),
                "Paris it is.",
            ),
        ]);
        assert_eq!(read.conversations.len(), 2);
        assert_eq!(read.conversations[0].records, vec![0, 1]);
        assert_eq!(read.conversations[1].records, vec![2]);
        let second = &read.conversations[1].transcript;
        assert_eq!(
            second.messages.last().unwrap().content.texts(),
            vec!["Paris it is."]
        );
        assert_eq!(
            second.source_notes,
            vec![SourceNote {
                rule: crate::rules::Builtin::ChainDiverged.into(),
                what: "request disagrees at message 3 with the history of record 2: a conversation of its own".into(),
                count: 1,
                bytes_dropped: 0,
            }]
        );
    }

    /// A second result line of one `custom_id` (found by the `anthropic` fuzz target) is
    /// refused; the first joins its request, so every line is in a conversation, a refusal
    /// or a drop.
    #[test]
    fn a_second_result_of_one_custom_id_is_refused_and_the_first_joins_its_request() {
        let errored = |message: &str| json!({"custom_id": "bad", "result": {"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error", "message": message}}}});
        let read = read(vec![
            json!({"custom_id": "bad", "params": request(json!([{"role": "user", "content": "Hello"}]))}),
            errored("first"),
            json!({"custom_id": "ok", "params": request(json!([{"role": "user", "content": "Hi"}]))}),
            errored("second"),
            json!({"custom_id": "ok", "result": {"type": "succeeded", "message": {"type": "message", "role": "assistant", "id": "msg_ok", "stop_reason": "end_turn", "content": [{"type": "text", "text": "Hello!"}]}}}),
            json!({"custom_id": "ok", "result": {"type": "succeeded", "message": {"type": "message", "role": "assistant", "id": "msg_2", "stop_reason": "end_turn", "content": [{"type": "text", "text": "Again!"}]}}}),
        ]);
        let failed = InputError::BatchFailed {
            custom_id: "bad".into(),
            kind: "errored".into(),
            reason: "first".into(),
        };
        assert_eq!(
            read.refused,
            vec![
                (0, failed.clone()),
                (1, failed),
                (3, InputError::BatchResultWithoutRequest("bad".into())),
                (5, InputError::BatchResultWithoutRequest("ok".into())),
            ]
        );
        assert_eq!(read.conversations.len(), 1);
        assert_eq!(read.conversations[0].records, vec![2, 4]);
        assert_eq!(
            read.conversations[0].transcript.messages[1].content.texts(),
            vec!["Hello!"]
        );
        assert!(read.dropped.is_empty());
    }

    #[test]
    fn a_batch_result_that_errored_quarantines_its_request_with_the_reason() {
        let read = read(vec![
            json!({"custom_id": "ok", "params": request(json!([{"role": "user", "content": "Hi"}]))}),
            json!({"custom_id": "bad", "params": request(json!([{"role": "user", "content": "Hello"}]))}),
            json!({"custom_id": "bad", "result": {"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}}}),
            json!({"custom_id": "ok", "result": {"type": "succeeded", "message": {"type": "message", "role": "assistant", "id": "msg_ok", "stop_reason": "end_turn", "content": [{"type": "text", "text": "Hello!"}]}}}),
            json!({"custom_id": "late", "result": {"type": "expired"}}),
        ]);
        assert_eq!(read.conversations.len(), 1);
        assert_eq!(read.conversations[0].records, vec![0, 3]);
        assert_eq!(
            read.conversations[0].transcript.messages[1].content.texts(),
            vec!["Hello!"]
        );
        assert_eq!(
            read.refused,
            vec![
                (
                    1,
                    InputError::BatchFailed {
                        custom_id: "bad".into(),
                        kind: "errored".into(),
                        reason: "max_tokens: too large".into()
                    }
                ),
                (
                    2,
                    InputError::BatchFailed {
                        custom_id: "bad".into(),
                        kind: "errored".into(),
                        reason: "max_tokens: too large".into()
                    }
                ),
                (4, InputError::BatchResultWithoutRequest("late".into())),
            ]
        );
        assert_eq!(
            read.refused[0].1.to_string(),
            "batch result `bad` errored: max_tokens: too large"
        );
    }
}
