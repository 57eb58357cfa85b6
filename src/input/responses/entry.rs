//! One record of a Responses log read as an [`Entry`]: a request, a response (a body or its
//! streamed events), a pair of both, or a stored input list.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::{is_input_list, is_item, is_pair, is_request, is_response};
use crate::input::chain::{request_body, response_body};
use crate::input::fields::{object_or_default, Loose};
use crate::input::sse;

/// One logged exchange: what was sent and what came back.
#[derive(Debug, Default, Clone)]
pub(crate) struct Entry {
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

/// A request body or a response object: the fields the reader takes from either (a stored
/// response repeats its request's `input`, `instructions` and `previous_response_id`).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Exchange {
    input: Option<Value>,
    output: Option<Value>,
    id: Loose<String>,
    previous_response_id: Loose<String>,
    instructions: Loose<String>,
    model: Option<Value>,
    created_at: Option<Value>,
    tools: Option<Value>,
    status: Loose<String>,
}

/// One streamed event of a logged response.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Event {
    #[serde(rename = "type")]
    kind: Loose<String>,
    /// Present, even `null` (a `response.created` without one forgets the one before).
    response: Loose<Value>,
    output_index: Loose<u64>,
    item: Loose<Value>,
}

fn items_of(input: Option<Value>) -> Vec<Value> {
    match input {
        Some(Value::Array(items)) => items,
        Some(Value::String(text)) => vec![json!({"role": "user", "content": text})],
        _ => Vec::new(),
    }
}

/// An id or a text the reader keeps: a string that is not empty.
fn non_empty(text: Loose<String>) -> Option<String> {
    text.0.filter(|s| !s.is_empty())
}

pub(super) fn entry_of(mut value: Value, record: usize) -> Result<Entry, String> {
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
    let (request, response) = if is_pair(&value) {
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
    if let Some(request) = request {
        let request: Exchange = object_or_default(request);
        entry.input = items_of(request.input);
        entry.previous = non_empty(request.previous_response_id);
        entry.instructions = non_empty(request.instructions);
        for (key, fact) in [("model", request.model), ("tools", request.tools)] {
            if let Some(fact) = fact {
                entry.facts.insert(key.into(), fact);
            }
        }
    }
    if let Some(response) = response {
        let response: Exchange = object_or_default(response);
        entry.output = items_of(response.output);
        entry.response_id = non_empty(response.id);
        // A stored response object carries its own request's facts.
        if entry.previous.is_none() {
            entry.previous = non_empty(response.previous_response_id);
        }
        if entry.instructions.is_none() {
            entry.instructions = non_empty(response.instructions);
        }
        if entry.input.is_empty() {
            entry.input = items_of(response.input);
        }
        if let Some(id) = &entry.response_id {
            entry.facts.insert("id".into(), json!(id));
        }
        let facts = [
            ("model", response.model),
            ("created_at", response.created_at),
            ("tools", response.tools),
        ];
        for (key, fact) in facts {
            if let Some(fact) = fact {
                entry.facts.entry(key.to_string()).or_insert(fact);
            }
        }
        entry.finished = response.status.0.as_deref() == Some("completed");
    }
    Ok(entry)
}

/// A streamed response: the `response.completed` (or `incomplete`/`failed`) event's response,
/// else the items of `response.output_item.done` events in output order.
fn response_from_events(events: Vec<Value>) -> Value {
    let mut done_items: Vec<(u64, Value)> = Vec::new();
    let mut created = None;
    for event in events {
        let event: Event = object_or_default(event);
        match event.kind.0.as_deref().unwrap_or_default() {
            "response.completed" | "response.incomplete" | "response.failed" => {
                if let Some(response) = event.response.0.filter(Value::is_object) {
                    return response;
                }
            }
            "response.created" => created = event.response.0.filter(Value::is_object),
            "response.output_item.done" => {
                let index = event.output_index.0.unwrap_or(done_items.len() as u64);
                if let Some(item) = event.item.0 {
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
