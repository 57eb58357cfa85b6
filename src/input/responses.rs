//! OpenAI Responses API logs: stored input lists, response objects, request/response pairs,
//! `previous_response_id` chains and stateless logs that resend the history.
//!
//! Each record is one entry: a `{request, response}` pair (the response a body or SSE events,
//! reassembled from `response.completed` or the `response.output_item.done` items), a request
//! body (`input`), a response object (`object: "response"`, `output`), or a stored input list
//! (`{"object": "list", "data": [...]}`, or a bare list of items). An entry whose request names a
//! `previous_response_id` continues the entry whose response has that id: its history is the
//! earlier history, that response's output, then its own input. A `previous_response_id` no
//! entry of the file answers is quarantined with the id, with every entry continuing it. The
//! histories are then grouped into chains like every stateless log ([`super::chain`]), a linked
//! entry after the one it continues wherever the log wrote it (newest first too).
//!
//! Memory and time are linear in the log: the links are followed without recursion
//! ([`resolve`]), a history is held as its parent's plus the entry's own items (never a copy of
//! the parent's), and only a conversation being written is made whole.
//!
//! Items pass through normalised: `id`, `status`, `annotations` and `logprobs` dropped; a message
//! without `type` (string content) is a message; `reasoning` items become the next message's
//! [`Thinking`] (origin OpenAI, `encrypted_content` carried for the converter's
//! `policy.encrypted_reasoning`); `instructions` become a leading system message, which the
//! `[[rule]]`s classify (base instructions by default). Items Codex 0.169 does not know
//! (`code_interpreter_call`, `image_generation_call`, `mcp_call`, `web_search_call`,
//! `file_search_call`, `local_shell_call`, `computer_call`, ...) follow `policy.hosted_tool`:
//! a call and its output Codex knows, a text placeholder, or dropped (counted).

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::builder::TranscriptBuilder;
use super::chain::{self, request_body, response_body};
use super::messages::{read_content, read_role};
use super::meta::read_meta;
use super::format::{FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceFormat};
use super::sse;
use super::InputError;
use crate::model::transcript::{
    Content, DroppedField, Message, Part, ReasoningOrigin, Role, Thinking, ToolCall, Transcript,
};
use crate::rules::policy::{HostedTool, ResentHistory};
use crate::rules::template::fill;
use crate::rules::PolicyId;

pub struct ResponsesReader;

impl SourceFormat {
    /// OpenAI Responses API logs: inputs, responses, pairs, previous_response_id chains.
    pub const RESPONSES: SourceFormat = SourceFormat::named("responses");
}

const FORMAT: SourceFormat = SourceFormat::RESPONSES;

/// Keys an item loses on the way to Codex.
const NORMALISED: [&str; 4] = ["id", "status", "annotations", "logprobs"];

fn is_response(value: &Value) -> bool {
    value.get("object").and_then(Value::as_str) == Some("response")
        && value.get("output").is_some_and(Value::is_array)
}

fn is_item(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str).is_some() || value.get("role").is_some()
}

fn is_request(value: &Value) -> bool {
    let input = value.get("input");
    input.is_some_and(|i| i.is_array() || i.is_string())
        && value.get("messages").is_none()
        && (value.get("model").is_some()
            || value.get("instructions").is_some()
            || value.get("previous_response_id").is_some()
            || input.and_then(Value::as_array).is_some_and(|items| {
                items.iter().any(|i| {
                    i.get("type").and_then(Value::as_str).is_some_and(|t| {
                        matches!(
                            t,
                            "message" | "function_call" | "function_call_output" | "reasoning"
                        )
                    })
                })
            }))
}

fn is_pair(value: &Value) -> bool {
    let Some(request) = value.get("request") else {
        return false;
    };
    let body = request.get("body").unwrap_or(request);
    let uri = request
        .get("uri")
        .or_else(|| request.get("url"))
        .and_then(Value::as_str);
    let response = value.get("response");
    let response_body = response
        .and_then(|r| r.get("body"))
        .unwrap_or(response.unwrap_or(&Value::Null));
    body.get("input").is_some()
        && body.get("messages").is_none()
        && (uri.is_some_and(|u| u.contains("/responses"))
            || is_response(response_body)
            || sse::events(value).is_some_and(|events| {
                events.data.iter().any(|e| {
                    e.get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.starts_with("response."))
                })
            }))
}

fn is_input_list(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.get("object").and_then(Value::as_str) == Some("list")
                && map
                    .get("data")
                    .and_then(Value::as_array)
                    .is_some_and(|d| d.iter().all(is_item))
                && map.get("data").and_then(Value::as_array).is_some_and(|d| {
                    d.iter()
                        .any(|i| i.get("type").and_then(Value::as_str).is_some())
                })
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            false
        }
    }
}

impl FormatReader for ResponsesReader {
    fn format(&self) -> SourceFormat {
        SourceFormat::RESPONSES
    }

    fn describe(&self) -> &'static str {
        "OpenAI Responses API logs: inputs, responses, pairs, previous_response_id chains"
    }

    fn granularity(&self) -> Granularity {
        Granularity::File
    }

    fn detect(&self, first: Option<&Value>, _raw: &[u8]) -> bool {
        first.is_some_and(|v| is_pair(v) || is_response(v) || is_request(v) || is_input_list(v))
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        let mut read = FileRead::default();
        let mut entries = Vec::new();
        for record in records {
            match entry_of(record.value, record.index) {
                Ok(entry) => entries.push(entry),
                Err(problem) => read.refused.push((
                    record.index,
                    InputError::NotInFormat {
                        format: FORMAT,
                        problem,
                    },
                )),
            }
        }
        conversations(entries, context, &mut read);
        read.conversations
            .sort_by_key(|c| c.records.first().copied());
        read
    }
}

/// One logged exchange: what was sent and what came back.
#[derive(Debug, Default, Clone)]
pub struct Entry {
    pub record: usize,
    pub input: Vec<Value>,
    pub output: Vec<Value>,
    pub response_id: Option<String>,
    pub previous: Option<String>,
    pub instructions: Option<String>,
    pub facts: Map<String, Value>,
    /// The response's `status` is `completed`.
    pub finished: bool,
    /// What reading its logged events dropped.
    pub unreadable: sse::Unreadable,
}

fn items_of(input: Option<Value>) -> Vec<Value> {
    match input {
        Some(Value::Array(items)) => items,
        Some(Value::String(text)) => vec![json!({"role": "user", "content": text})],
        _ => Vec::new(),
    }
}

fn take_string(map: &mut Value, key: &str) -> Option<String> {
    match map.get_mut(key).map(std::mem::take) {
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        _ => None,
    }
}

fn entry_of(mut value: Value, record: usize) -> Result<Entry, String> {
    let mut entry = Entry {
        record,
        ..Entry::default()
    };
    if let Value::Array(items) = value {
        if !items.iter().all(is_item) {
            return Err("a list that is not of Responses items".into());
        }
        entry.input = items;
        return Ok(entry);
    }
    if is_input_list(&value) {
        entry.input = items_of(value.get_mut("data").map(std::mem::take));
        return Ok(entry);
    }
    let (mut request, response) = if is_pair(&value) {
        let events = sse::events(&value);
        let request = request_body(&mut value).ok_or("the request has no body")?;
        let response = match events {
            Some(events) => {
                entry.unreadable = events.unreadable;
                Some(response_from_events(events.data))
            }
            None => response_body(&mut value),
        };
        (Some(request), response)
    } else if is_response(&value) {
        (None, Some(value))
    } else if is_request(&value) {
        (Some(value), None)
    } else {
        return Err("neither a Responses request, a response object, a {request, response} pair nor an input list".into());
    };
    if let Some(request) = request.as_mut() {
        entry.input = items_of(request.get_mut("input").map(std::mem::take));
        entry.previous = take_string(request, "previous_response_id");
        entry.instructions = take_string(request, "instructions");
        for key in ["model", "tools"] {
            if let Some(v) = request
                .get_mut(key)
                .map(std::mem::take)
                .filter(|v| !v.is_null())
            {
                entry.facts.insert(key.into(), v);
            }
        }
    }
    if let Some(mut response) = response {
        entry.output = items_of(response.get_mut("output").map(std::mem::take));
        entry.response_id = take_string(&mut response, "id");
        // A stored response object carries its own request's facts.
        if entry.previous.is_none() {
            entry.previous = take_string(&mut response, "previous_response_id");
        }
        if entry.instructions.is_none() {
            entry.instructions = take_string(&mut response, "instructions");
        }
        if entry.input.is_empty() {
            entry.input = items_of(response.get_mut("input").map(std::mem::take));
        }
        if let Some(id) = &entry.response_id {
            entry.facts.insert("id".into(), json!(id));
        }
        for key in ["model", "created_at", "tools"] {
            if let Some(v) = response
                .get_mut(key)
                .map(std::mem::take)
                .filter(|v| !v.is_null())
            {
                entry.facts.entry(key.to_string()).or_insert(v);
            }
        }
        entry.finished = response.get("status").and_then(Value::as_str) == Some("completed");
    }
    Ok(entry)
}

/// A streamed response: the `response.completed` (or `incomplete`/`failed`) event's response,
/// else the items of `response.output_item.done` events in output order.
fn response_from_events(events: Vec<Value>) -> Value {
    let mut done_items: Vec<(u64, Value)> = Vec::new();
    let mut created = None;
    for mut event in events {
        let kind = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "response.completed" | "response.incomplete" | "response.failed" => {
                if let Some(response) = event
                    .get_mut("response")
                    .map(std::mem::take)
                    .filter(Value::is_object)
                {
                    return response;
                }
            }
            "response.created" => {
                created = event
                    .get_mut("response")
                    .map(std::mem::take)
                    .filter(Value::is_object)
            }
            "response.output_item.done" => {
                let index = event
                    .get("output_index")
                    .and_then(Value::as_u64)
                    .unwrap_or(done_items.len() as u64);
                if let Some(item) = event.get_mut("item").map(std::mem::take) {
                    done_items.push((index, item));
                }
            }
            _ => {}
        }
    }
    done_items.sort_by_key(|(i, _)| *i);
    let mut response = created.unwrap_or_else(|| json!({}));
    response["output"] = Value::Array(done_items.into_iter().map(|(_, item)| item).collect());
    response
}

fn conversations(entries: Vec<Entry>, context: &ReadContext<'_>, read: &mut FileRead) {
    let links = resolve(&entries);
    // The entries whose history resolves, in file order, and each one's place among them.
    let mut kept: Vec<usize> = Vec::new();
    let mut place: Vec<Option<usize>> = vec![None; entries.len()];
    for (i, link) in links.parents.iter().enumerate() {
        match link {
            Ok(_) => {
                place[i] = Some(kept.len());
                kept.push(i);
            }
            Err(missing) => read
                .refused
                .push((entries[i].record, InputError::MissingLink(missing.clone()))),
        }
    }
    // Each entry's history as compared: its parent's history and output (shared, not
    // copied), then its own input; parts made parents first.
    let mut histories = chain::Histories::default();
    let mut input_part = vec![None; entries.len()];
    let mut output_part = vec![None; entries.len()];
    for &i in &links.settled {
        let parent = links.parent(i);
        let entry = &entries[i];
        let before = parent.and_then(|p| output_part[p]);
        let input = histories.part(
            before,
            entry.input.iter().map(normalise_for_compare).collect(),
        );
        input_part[i] = Some(input);
        let output = entry.output.iter().map(normalise_for_compare).collect();
        output_part[i] = Some(histories.part(Some(input), output));
    }
    for &i in &kept {
        let after = links.parent(i).and_then(|p| place[p]);
        histories.request(input_part[i], after);
    }
    let members: Vec<Member> = kept
        .iter()
        .map(|&i| Member {
            entry: i,
            records: [entries[i].record],
        })
        .collect();
    let merge = context.rules.policy.resent_history == ResentHistory::Merge;
    let merged = "request merged into a later one continuing its history";
    chain::drive(members, histories, merge, merged, read, |members| {
        let mut unreadable = sse::Unreadable::default();
        members
            .iter()
            .for_each(|m| unreadable.add(entries[m.entry].unreadable));
        let Some(last) = members.last().map(|m| m.entry) else {
            return Err(InputError::NotARecord("empty chain"));
        };
        // Only the conversation written is made whole: its ancestors' items, copied once.
        let mut items = links.history(last, &entries);
        items.extend(entries[last].output.iter().cloned());
        let mut transcript = transcript(items, &entries[last], context)?;
        transcript.source_notes.extend(unreadable.note());
        Ok(transcript)
    });
}

/// A resolved entry, as the chain driver sees it.
struct Member {
    entry: usize,
    /// The entry's record, as the chain driver asks for it.
    records: [usize; 1],
}

impl chain::Link for Member {
    fn records(&self) -> &[usize] {
        &self.records
    }
}

/// The entries' `previous_response_id` links followed: each entry's parent (the entry whose
/// response its request continues), or the id in its ancestry that no entry answers.
#[derive(Debug)]
pub struct Links {
    /// Per entry: `Ok(parent)` (`None`: a history of its own), or `Err(id)`, the missing link.
    pub parents: Vec<Result<Option<usize>, String>>,
    /// The entries that resolve, each after its parent.
    pub settled: Vec<usize>,
}

impl Links {
    fn parent(&self, entry: usize) -> Option<usize> {
        self.parents
            .get(entry)
            .cloned()
            .and_then(Result::ok)
            .flatten()
    }

    /// Entry `entry`'s full request history: its ancestors' inputs and outputs, then its own
    /// input (copied, walked up the links, not recursively).
    pub fn history(&self, entry: usize, entries: &[Entry]) -> Vec<Value> {
        let mut line = vec![entry];
        let mut at = entry;
        while let Some(parent) = self.parent(at) {
            line.push(parent);
            at = parent;
        }
        let mut items = Vec::new();
        for (k, &a) in line.iter().enumerate().rev() {
            items.extend(entries[a].input.iter().cloned());
            if k > 0 {
                items.extend(entries[a].output.iter().cloned());
            }
        }
        items
    }
}

/// Follows every entry's `previous_response_id` to the entry whose response has that id (the
/// last one, when ids repeat), without recursion: a chain of any length, written in any
/// order, is walked up with a stack of its own. An entry whose ancestry names an id no entry
/// answers, loops back on itself or reaches a loop, is `Err` with the id where it broke.
pub fn resolve(entries: &[Entry]) -> Links {
    let by_response: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((e.response_id.as_deref()?, i)))
        .collect();
    let mut parents: Vec<Option<Result<Option<usize>, String>>> = vec![None; entries.len()];
    let mut settled = Vec::new();
    let mut on_stack = vec![false; entries.len()];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..entries.len() {
        if parents[start].is_some() {
            continue;
        }
        // Up the links to an entry already settled, or one that settles here.
        let mut at = start;
        loop {
            let Some(previous) = &entries[at].previous else {
                parents[at] = Some(Ok(None));
                settled.push(at);
                break;
            };
            match by_response.get(previous.as_str()) {
                Some(&parent) if parent != at && !on_stack[at] => {
                    on_stack[at] = true;
                    stack.push((at, parent));
                    if parents[parent].is_some() {
                        break;
                    }
                    at = parent;
                }
                // Missing, itself, or back to an entry on the way up (a loop).
                Some(_) | None => {
                    parents[at] = Some(Err(previous.clone()));
                    break;
                }
            }
        }
        // Down again: each entry as its parent went.
        while let Some((entry, parent)) = stack.pop() {
            on_stack[entry] = false;
            let outcome = match &parents[parent] {
                Some(Ok(_)) => Ok(Some(parent)),
                Some(Err(missing)) => Err(missing.clone()),
                None => Err(entries[entry].previous.clone().unwrap_or_default()),
            };
            if outcome.is_ok() {
                settled.push(entry);
            }
            parents[entry] = Some(outcome);
        }
    }
    Links {
        parents: parents
            .into_iter()
            .map(|p| p.unwrap_or_else(|| Err(String::new())))
            .collect(),
        settled,
    }
}

/// An item as compared between requests: normalised keys dropped, a message's string content
/// as one `input_text`, and `type: "message"` implied.
fn normalise_for_compare(item: &Value) -> Value {
    let mut value = chain::canonical(item, &NORMALISED, "input_text");
    if let Value::Object(map) = &mut value {
        if map.contains_key("role") && !map.contains_key("type") {
            map.insert("type".into(), json!("message"));
        }
        // An assistant's echoed output_text and a typed input_text say the same.
        if let Some(Value::Array(parts)) = map.get_mut("content") {
            for part in parts {
                if part.get("type").and_then(Value::as_str) == Some("output_text") {
                    part["type"] = json!("input_text");
                }
            }
        }
    }
    value
}

fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Reads the items of one conversation into `built`, message by message.
struct Items<'a> {
    built: TranscriptBuilder,
    context: &'a ReadContext<'a>,
}

impl Items<'_> {
    /// A message's content or a call's output as the chat reader reads a content (a string or
    /// a list of parts), refused at the position the message takes.
    fn content(&self, value: Value) -> Result<(Content, Vec<DroppedField>), InputError> {
        let mut dropped = Vec::new();
        let content =
            read_content(Some(value), &mut dropped).map_err(|problem| self.bad(problem))?;
        Ok((content, dropped))
    }

    /// The message about to be pushed cannot be read.
    fn bad(&self, problem: String) -> InputError {
        InputError::BadMessage {
            path: MESSAGES_AT.to_string(),
            index: self.built.len(),
            problem,
        }
    }

    /// A function (or freeform, `custom`) call with its id.
    fn call(&mut self, id: &str, name: String, arguments: String, custom: bool) {
        self.built.call(ToolCall {
            id: Some(id.to_string()),
            name,
            arguments,
            custom,
            ..ToolCall::default()
        });
    }

    /// A function-style call of a hosted tool, its arguments as JSON text.
    fn hosted_call(&mut self, id: &str, name: &str, arguments: Value) {
        let arguments = match arguments {
            Value::String(s) => s,
            other @ Value::Null
            | other @ Value::Bool(_)
            | other @ Value::Number(_)
            | other @ Value::Array(_)
            | other @ Value::Object(_) => other.to_string(),
        };
        self.call(id, name.to_string(), arguments, false);
    }

    /// The output of the call `call_id`: a string, or a list of parts.
    fn output(&mut self, call_id: &str, output: Value, failed: bool) -> Result<(), InputError> {
        let (content, dropped) = self.content(output)?;
        self.built
            .output_message(Some(call_id.to_string()), content, dropped, failed);
        Ok(())
    }

    /// A placeholder text for an item nothing else can say.
    fn placeholder(&mut self, kind: &str, item: &Value) {
        let json = item.to_string();
        let text = fill(
            &self.context.rules.policy.hosted_tool_template,
            &[("type", kind), ("json", &json)],
        );
        self.note(&format!("{kind} item as a placeholder"));
        self.built.text(Role::Assistant, text);
    }

    fn note(&mut self, what: &str) {
        self.built.note(PolicyId::HostedTool, what, 1, 0);
    }

    /// A `message` item: its role (aliased), content (parts normalised) and phase.
    fn message(&mut self, mut item: Value, annotations: &mut u64) -> Result<(), InputError> {
        let role = match item.get_mut("role").map(std::mem::take) {
            None => Some(Value::String("user".to_string())),
            given => given,
        };
        let (role, aliased_from) = read_role(role, &self.context.rules.input.role_aliases)
            .map_err(|problem| self.bad(problem))?;
        let content = match item.get_mut("content").map(std::mem::take) {
            Some(Value::Array(mut parts)) => {
                for part in &mut parts {
                    if let Value::Object(m) = part {
                        if m.get("annotations")
                            .and_then(Value::as_array)
                            .is_some_and(|a| !a.is_empty())
                        {
                            *annotations += 1;
                        }
                        for k in NORMALISED {
                            m.remove(k);
                        }
                    }
                }
                Value::Array(parts)
            }
            Some(other) => other,
            None => Value::Null,
        };
        let (content, dropped_fields) = self.content(content)?;
        let phase = match item.get_mut("phase").map(std::mem::take) {
            Some(Value::String(phase)) => Some(phase),
            _ => None,
        };
        self.built.message(Message {
            role,
            aliased_from,
            content,
            dropped_fields,
            phase,
            ..Message::default()
        });
        Ok(())
    }

    /// A `reasoning` item: the next message's thinking.
    fn reasoning(&mut self, item: &Value) {
        let texts = |key: &str| -> Vec<String> {
            item.get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
                .collect()
        };
        let encrypted = item
            .get("encrypted_content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        self.built.thinking(Thinking {
            summary: texts("summary"),
            content: texts("content"),
            encrypted,
            origin: ReasoningOrigin::OpenAi,
        });
    }

    /// An item Codex 0.169 does not know: `policy.hosted_tool`.
    fn hosted(&mut self, kind: &str, mut item: Value, call_id: &str) -> Result<(), InputError> {
        match self.context.rules.policy.hosted_tool {
            HostedTool::Drop => {
                self.note(&format!("{kind} item dropped"));
                return Ok(());
            }
            HostedTool::Placeholder => {
                if let Value::Object(m) = &mut item {
                    for k in NORMALISED {
                        m.remove(k);
                    }
                }
                self.placeholder(kind, &item);
                return Ok(());
            }
            HostedTool::Call => {}
        }
        match kind {
            "code_interpreter_call" => {
                let code = text_of(item.get("code"));
                self.call(call_id, "code_interpreter".to_string(), code, true);
                let parts: Vec<Part> = item
                    .get("outputs")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|out| match out.get("type").and_then(Value::as_str) {
                        Some("logs") => Part::Text(text_of(out.get("logs"))),
                        Some("image") => Part::Image {
                            url: Some(text_of(out.get("url"))),
                            file_id: None,
                            detail: None,
                        },
                        _ => Part::Text(out.to_string()),
                    })
                    .collect();
                // Logs only: one text, a line each; with an image, the parts in order.
                let logs_only = parts.iter().all(|p| matches!(p, Part::Text(_)));
                let mut content = Content::Parts(parts);
                if logs_only {
                    content = Content::Text(content.texts().join("\n"));
                }
                self.built.output(Some(call_id.to_string()), content, false);
            }
            "image_generation_call" => {
                let prompt = text_of(item.get("revised_prompt"));
                self.hosted_call(call_id, "image_generation", json!({"prompt": prompt}));
                let content = match item.get("result").and_then(Value::as_str) {
                    Some(b64) if !b64.is_empty() => Content::Parts(vec![Part::Image {
                        url: Some(format!("data:image/png;base64,{b64}")),
                        file_id: None,
                        detail: None,
                    }]),
                    _ => Content::Text(String::new()),
                };
                self.built.output(Some(call_id.to_string()), content, false);
            }
            "mcp_call" => {
                let label = text_of(item.get("server_label"));
                let name = text_of(item.get("name"));
                let name = if label.is_empty() {
                    name
                } else {
                    format!("{label}.{name}")
                };
                let arguments = item
                    .get_mut("arguments")
                    .map(std::mem::take)
                    .unwrap_or_else(|| Value::String("{}".to_string()));
                self.hosted_call(call_id, &name, arguments);
                let error = item
                    .get("error")
                    .filter(|e| !e.is_null())
                    .map(|e| text_of(Some(e)));
                let failed = error.is_some();
                let output = error.unwrap_or_else(|| text_of(item.get("output")));
                self.built
                    .output(Some(call_id.to_string()), Content::Text(output), failed);
            }
            "web_search_call" | "file_search_call" => {
                let name = kind.trim_end_matches("_call");
                let arguments = match item.get_mut("action").map(std::mem::take) {
                    Some(action) => action,
                    None => match item.get("queries") {
                        Some(queries) => json!({"queries": queries}),
                        None => json!({}),
                    },
                };
                self.hosted_call(call_id, name, arguments);
                let output = item
                    .get("results")
                    .filter(|r| !r.is_null())
                    .map(|r| r.to_string())
                    .unwrap_or_default();
                self.built
                    .output(Some(call_id.to_string()), Content::Text(output), false);
            }
            "local_shell_call" | "computer_call" => {
                let name = kind.trim_end_matches("_call");
                let action = item
                    .get_mut("action")
                    .map(std::mem::take)
                    .unwrap_or_else(|| json!({}));
                self.hosted_call(call_id, name, action);
            }
            "local_shell_call_output" | "computer_call_output" => {
                let (content, dropped) = match item.get_mut("output").map(std::mem::take) {
                    Some(Value::Object(mut o)) if o.contains_key("image_url") => {
                        let url = o.remove("image_url").unwrap_or_default();
                        // The chat reader's image part: a URL string or `{url, detail}`.
                        self.content(json!([{"type": "input_image", "image_url": url}]))?
                    }
                    other => (Content::Text(text_of(other.as_ref())), Vec::new()),
                };
                self.built
                    .output_message(Some(call_id.to_string()), content, dropped, false);
            }
            _ => {
                // Nothing to call: a placeholder, so it is not lost.
                self.placeholder(kind, &item);
                return Ok(());
            }
        }
        self.note(&format!("{kind} item as a call and its output"));
        Ok(())
    }

    /// Every item of the conversation, in order.
    fn items(&mut self, items: Vec<Value>) -> Result<(), InputError> {
        let mut annotations = 0u64;
        for (n, mut item) in items.into_iter().enumerate() {
            let kind = match item.get("type").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None if item.get("role").is_some() => "message".to_string(),
                None => "(no type)".to_string(),
            };
            let item_id = item.get("id").and_then(Value::as_str).map(str::to_string);
            let call_id = item
                .get("call_id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or(item_id)
                .unwrap_or_else(|| format!("call_item_{n}"));
            match kind.as_str() {
                "message" => self.message(item, &mut annotations)?,
                "reasoning" => self.reasoning(&item),
                "function_call" => {
                    let name = text_of(item.get("name"));
                    let arguments = text_of(item.get("arguments"));
                    self.call(&call_id, name, arguments, false);
                }
                "custom_tool_call" => {
                    let name = text_of(item.get("name"));
                    let input = text_of(item.get("input"));
                    self.call(&call_id, name, input, true);
                }
                "function_call_output" | "custom_tool_call_output" => {
                    let output = match item.get_mut("output").map(std::mem::take) {
                        Some(Value::Array(parts)) => Value::Array(parts),
                        other => Value::String(text_of(other.as_ref())),
                    };
                    self.output(&call_id, output, false)?;
                }
                _ => self.hosted(&kind, item, &call_id)?,
            }
        }
        if annotations > 0 {
            self.built.note(
                crate::rules::Builtin::ResponsesAnnotations,
                "output_text annotations dropped",
                annotations,
                0,
            );
        }
        Ok(())
    }
}

/// Where the audit says a Responses conversation's messages are.
const MESSAGES_AT: &str = "messages";

/// One conversation: `entry`'s instructions (a leading system message), then `items`.
fn transcript(
    items: Vec<Value>,
    entry: &Entry,
    context: &ReadContext<'_>,
) -> Result<Transcript, InputError> {
    let mut built = TranscriptBuilder::new(SourceFormat::RESPONSES, MESSAGES_AT);
    let facts = Value::Object(entry.facts.clone());
    read_meta(&facts, &context.rules.input, &mut built.meta);
    built.meta.finished |= entry.finished;
    if let Some(Value::Array(tools)) = facts.get("tools") {
        // Responses function tools are flat; the transcript keeps them Chat Completions shaped.
        let wrapped: Vec<Value> = tools
            .iter()
            .map(|t| match t.get("type").and_then(Value::as_str) {
                Some("function") if t.get("function").is_none() => {
                    let mut f = t.clone();
                    if let Value::Object(m) = &mut f {
                        m.remove("type");
                    }
                    json!({"type": "function", "function": f})
                }
                _ => t.clone(),
            })
            .collect();
        built.tools(wrapped);
    }
    // The audit has named a completed `status` as `choices` since the Responses reader
    // was written (kept, so that the audit reads the same).
    let mut ignored: Vec<&str> = entry.facts.keys().map(String::as_str).collect();
    if entry.finished {
        ignored.push("choices");
    }
    ignored.sort_unstable();
    for field in ignored {
        built.ignore(field);
    }
    if let Some(instructions) = &entry.instructions {
        built.text(Role::System, instructions.clone());
    }
    let mut reading = Items { built, context };
    reading.items(items)?;
    reading.built.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::transcript::{Content, ToolCall};
    use crate::rules::RuleSet;
    use std::path::Path;

    fn read(values: Vec<Value>) -> FileRead {
        read_with(values, RuleSet::builtin().unwrap())
    }

    fn read_with(values: Vec<Value>, rules: RuleSet) -> FileRead {
        crate::input::format::read_values(&ResponsesReader, values, &rules, Path::new("log.jsonl"))
    }

    fn stored(id: &str, previous: Option<&str>, input: Value, output: Value) -> Value {
        json!({"object": "response", "id": id, "previous_response_id": previous, "status": "completed",
               "model": "gpt-5", "input": input, "output": output})
    }

    /// The resolver as it was, kept as the definition [`resolve`] must equal: each entry's
    /// full history built by recursion, every history its parent's copied and extended
    /// (quadratic in memory, a stack frame per link: for small inputs only).
    fn reference_resolve(
        i: usize,
        entries: &[Entry],
        by_response: &HashMap<String, usize>,
        full: &mut Vec<Option<Result<Vec<Value>, String>>>,
        visiting: &mut std::collections::HashSet<usize>,
    ) {
        if full[i].is_some() {
            return;
        }
        let entry = &entries[i];
        let result = match &entry.previous {
            None => Ok(entry.input.clone()),
            Some(previous) => match by_response.get(previous) {
                None => Err(previous.clone()),
                Some(&parent) if parent == i || !visiting.insert(i) => Err(previous.clone()),
                Some(&parent) => {
                    reference_resolve(parent, entries, by_response, full, visiting);
                    match full[parent].clone() {
                        Some(Ok(mut history)) => {
                            history.extend(entries[parent].output.iter().cloned());
                            history.extend(entry.input.iter().cloned());
                            Ok(history)
                        }
                        Some(Err(missing)) => Err(missing),
                        None => Err(previous.clone()),
                    }
                }
            },
        };
        full[i] = Some(result);
    }

    fn reference_histories(entries: &[Entry]) -> Vec<Option<Result<Vec<Value>, String>>> {
        let by_response: HashMap<String, usize> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((e.response_id.clone()?, i)))
            .collect();
        let mut full = vec![None; entries.len()];
        for i in 0..entries.len() {
            let mut visiting = std::collections::HashSet::new();
            reference_resolve(i, entries, &by_response, &mut full, &mut visiting);
        }
        full
    }

    proptest::proptest! {
        /// Random chain shapes in random orders (ids repeated, links to ids no entry has,
        /// links to itself and loops): every entry's history, or the missing id, exactly as
        /// the recursive resolver gives it; and the parts made parents first.
        #[test]
        fn the_linear_resolver_equals_the_recursive_one(
            shapes in proptest::collection::vec(
                (
                    proptest::option::of(0u8..6),
                    proptest::option::of(0u8..7),
                    proptest::collection::vec(0u8..4, 0..3),
                    proptest::collection::vec(0u8..4, 0..3),
                ),
                0..14,
            )
        ) {
            let entries: Vec<Entry> = shapes
                .iter()
                .enumerate()
                .map(|(record, (id, previous, input, output))| Entry {
                    record,
                    response_id: id.map(|n| format!("resp_{n}")),
                    previous: previous.map(|n| format!("resp_{n}")),
                    input: input.iter().map(|m| json!({"role": "user", "content": format!("in {m}")})).collect(),
                    output: output.iter().map(|m| json!({"type": "message", "role": "assistant", "content": format!("out {m}")})).collect(),
                    ..Entry::default()
                })
                .collect();
            let links = resolve(&entries);
            let want = reference_histories(&entries);
            for (i, want) in want.into_iter().enumerate() {
                let got = links.parents[i].clone().map(|_| links.history(i, &entries));
                proptest::prop_assert_eq!(Some(got), want, "entry {}", i);
            }
            let mut seen = vec![false; entries.len()];
            for &i in &links.settled {
                if let Some(parent) = links.parent(i) {
                    proptest::prop_assert!(seen[parent], "{} settled before its parent", i);
                }
                seen[i] = true;
            }
            let resolved = links.parents.iter().filter(|p| p.is_ok()).count();
            proptest::prop_assert_eq!(links.settled.len(), resolved);
        }
    }

    #[test]
    fn a_previous_response_id_chain_is_one_conversation() {
        let values = vec![
            stored(
                "resp_1",
                None,
                json!([{"role": "user", "content": "Hi"}]),
                json!([{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Greet."}], "encrypted_content": "gAAA"},
                       {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!", "annotations": [], "logprobs": []}]}]),
            ),
            stored(
                "resp_2",
                Some("resp_1"),
                json!([{"role": "user", "content": "Run it"}]),
                json!([{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "run", "arguments": "{}", "status": "completed"}]),
            ),
            stored(
                "resp_3",
                Some("resp_2"),
                json!([{"type": "function_call_output", "call_id": "call_1", "output": "done"}]),
                json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}]),
            ),
        ];
        assert!(ResponsesReader.detect(Some(&values[0]), b""));
        let read = read(values);
        assert!(read.refused.is_empty(), "{:?}", read.refused);
        assert_eq!(read.conversations.len(), 1);
        let c = &read.conversations[0];
        assert_eq!(c.records, vec![0, 1, 2]);
        let m = &c.transcript.messages;
        let roles: Vec<&str> = m.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "user",
                "assistant",
                "tool",
                "assistant"
            ]
        );
        assert_eq!(m[0].content, Content::Text("Hi".into()));
        assert_eq!(
            m[1].thinking,
            vec![Thinking {
                summary: vec!["Greet.".into()],
                content: vec![],
                encrypted: Some("gAAA".into()),
                origin: ReasoningOrigin::OpenAi
            }]
        );
        assert_eq!(m[1].content.texts(), vec!["Hello!"]);
        assert_eq!(
            m[3].tool_calls,
            vec![ToolCall {
                id: Some("call_1".into()),
                name: "run".into(),
                arguments: "{}".into(),
                ..ToolCall::default()
            }]
        );
        assert_eq!(m[4].tool_call_ids, ["call_1"]);
        assert_eq!(m[4].content, Content::Text("done".into()));
        assert_eq!(m[5].content.texts(), vec!["Done."]);
        let notes = c.transcript.note_counts();
        assert_eq!(notes, [("policy.resent_history", 2)]);
    }

    #[test]
    fn a_missing_link_is_quarantined_with_its_id_and_what_continues_it() {
        let values = vec![
            stored(
                "resp_2",
                Some("resp_gone"),
                json!([{"role": "user", "content": "Run it"}]),
                json!([]),
            ),
            stored(
                "resp_3",
                Some("resp_2"),
                json!([{"role": "user", "content": "Again"}]),
                json!([]),
            ),
            stored(
                "resp_9",
                None,
                json!([{"role": "user", "content": "Other"}]),
                json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]),
            ),
        ];
        let read = read(values);
        assert_eq!(read.conversations.len(), 1);
        assert_eq!(read.conversations[0].records, vec![2]);
        assert_eq!(read.refused.len(), 2);
        for (index, error) in &read.refused {
            assert!([0, 1].contains(index));
            assert_eq!(error, &InputError::MissingLink("resp_gone".into()));
        }
        assert!(read.refused[0].1.to_string().contains("resp_gone"));
    }

    #[test]
    fn a_code_interpreter_call_is_a_custom_call_and_its_logs() {
        let values = vec![stored(
            "resp_1",
            None,
            json!("Compute 2**10"),
            json!([{"type": "code_interpreter_call", "id": "ci_1", "code": "print(2**10)", "container_id": "cntr", "status": "completed",
                    "outputs": [{"type": "logs", "logs": "1024\n"}]},
                   {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "1024"}]}]),
        )];
        let read = read(values);
        let m = &read.conversations[0].transcript.messages;
        assert_eq!(m.len(), 4);
        assert_eq!(
            m[1].tool_calls,
            vec![ToolCall {
                id: Some("ci_1".into()),
                name: "code_interpreter".into(),
                arguments: "print(2**10)".into(),
                custom: true,
                ..ToolCall::default()
            }]
        );
        assert_eq!(
            (m[2].role.as_str(), m[2].tool_call_ids.clone()),
            ("tool", vec!["ci_1".to_string()])
        );
        assert_eq!(m[2].content, Content::Text("1024\n".into()));
        assert_eq!(m[3].content.texts(), vec!["1024"]);
        let notes = &read.conversations[0].transcript.source_notes;
        assert_eq!(notes[0].rule.as_str(), "policy.hosted_tool");
        assert_eq!(
            notes[0].what,
            "code_interpreter_call item as a call and its output"
        );
    }

    #[test]
    fn stateless_requests_resending_history_merge_and_instructions_lead() {
        let first = json!({"request": {"uri": "https://api.openai.com/v1/responses", "body": {"model": "m", "instructions": "Be kind.",
                "input": [{"role": "user", "content": "Q"}]}},
            "response": {"body": {"object": "response", "id": "r1", "output": [{"type": "function_call", "id": "fc", "call_id": "c1", "name": "f", "arguments": "{}", "status": "completed"}]}}});
        let second = json!({"request": {"uri": "https://api.openai.com/v1/responses", "body": {"model": "m", "instructions": "Be kind.",
                "input": [{"role": "user", "content": "Q"}, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "status": null},
                          {"type": "function_call_output", "call_id": "c1", "output": "42"}]}},
            "response": {"body": {"object": "response", "id": "r2", "status": "completed", "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "42."}]}]}}});
        let read = read(vec![first, second]);
        assert_eq!(read.conversations.len(), 1);
        let t = &read.conversations[0].transcript;
        let roles: Vec<&str> = t.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
        assert_eq!(t.messages[0].content, Content::Text("Be kind.".into()));
        assert!(t.meta.finished);
    }
}
