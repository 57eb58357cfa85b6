//! One record of a Responses log read as an [`Entry`]: a request, a response (a body or its
//! streamed events), a pair of both, or a stored input list.

use serde_json::{json, Map, Value};

use super::{is_input_list, is_item, is_pair, is_request, is_response};
use crate::input::chain::{request_body, response_body};
use crate::input::sse;

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
