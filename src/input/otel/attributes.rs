//! OTLP attribute values as plain JSON, and the GenAI attributes that carry a conversation
//! (current, deprecated and OpenLLMetry's flattened ones) read into an [`Exchange`].

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::{Exchange, MAX_DEPTH};
use crate::input::fields::text_or_json;

/// An OTLP `AnyValue` (`{"stringValue": ..}`, `{"arrayValue": {"values": [..]}}`, ...) as plain
/// JSON; `depth` counts the levels read.
pub(super) fn any_value(value: Value, depth: usize) -> Value {
    let Value::Object(mut map) = value else {
        return value;
    };
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(v) = map.remove("stringValue") {
        return v;
    }
    if let Some(v) = map.remove("boolValue") {
        return v;
    }
    if let Some(v) = map.remove("intValue") {
        return match &v {
            Value::String(s) => s.parse::<i64>().map(Value::from).unwrap_or(v),
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::Array(_)
            | Value::Object(_) => v,
        };
    }
    if let Some(v) = map.remove("doubleValue") {
        return v;
    }
    if let Some(v) = map.remove("bytesValue") {
        return v;
    }
    if let Some(Value::Object(mut array)) = map.remove("arrayValue") {
        let values = match array.remove("values") {
            Some(Value::Array(values)) => values,
            _ => Vec::new(),
        };
        return Value::Array(
            values
                .into_iter()
                .map(|v| any_value(v, depth + 1))
                .collect(),
        );
    }
    if let Some(Value::Object(mut list)) = map.remove("kvlistValue") {
        let values = match list.remove("values") {
            Some(Value::Array(values)) => values,
            _ => Vec::new(),
        };
        return Value::Object(key_values(values, depth + 1));
    }
    Value::Null
}

/// OTLP `KeyValue`s (`[{"key", "value"}]`) as a map.
pub(super) fn key_values(list: Vec<Value>, depth: usize) -> Map<String, Value> {
    let mut map = Map::new();
    for item in list {
        let Value::Object(mut item) = item else {
            continue;
        };
        let Some(Value::String(key)) = item.remove("key") else {
            continue;
        };
        let value = item
            .remove("value")
            .map_or(Value::Null, |v| any_value(v, depth));
        map.insert(key, value);
    }
    map
}

/// Attributes as a map, from either encoding (OTLP's list, or the SDK's map).
pub(super) fn attributes(value: Option<Value>) -> Map<String, Value> {
    match value {
        Some(Value::Array(list)) => key_values(list, 0),
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// A JSON value an attribute may hold as a string of JSON.
pub(super) fn json_value(value: Value) -> Value {
    match value {
        Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        other @ (Value::Null
        | Value::Bool(_)
        | Value::Number(_)
        | Value::Array(_)
        | Value::Object(_)) => other,
    }
}

pub(super) fn list(value: Value) -> Vec<Value> {
    match json_value(value) {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        other @ (Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Object(_)) => {
            vec![other]
        }
    }
}

/// A message as the conventions write it (`{role, parts}`); a chat-style message (`{role,
/// content, tool_calls, tool_call_id}`, what the deprecated attributes and events hold) is
/// turned into one.
pub(super) fn message_parts(message: Value) -> Value {
    let Value::Object(mut map) = message else {
        return json!({"role": "user", "parts": [{"type": "text", "content": text_or_json(message)}]});
    };
    if map.contains_key("parts") {
        return Value::Object(map);
    }
    let role = map.remove("role").unwrap_or(Value::Null);
    let mut parts = Vec::new();
    let call_id = map.remove("tool_call_id").or_else(|| map.remove("id"));
    match map.remove("content").map(json_value) {
        Some(Value::Array(items)) => {
            for item in items {
                let text = item
                    .get("text")
                    .or_else(|| item.get("content"))
                    .cloned()
                    .unwrap_or(item);
                parts.push(json!({"type": "text", "content": text_or_json(text)}));
            }
        }
        Some(Value::Null) | None => {}
        Some(other) => {
            if role.as_str() == Some("tool") {
                parts.push(json!({"type": "tool_call_response", "id": call_id, "response": other}));
            } else {
                parts.push(json!({"type": "text", "content": text_or_json(other)}));
            }
        }
    }
    if let Some(Value::Array(calls)) = map.remove("tool_calls").map(json_value) {
        for mut c in calls {
            let function = c
                .get_mut("function")
                .map(Value::take)
                .unwrap_or(Value::Null);
            let name = function.get("name").or_else(|| c.get("name")).cloned();
            let arguments = function
                .get("arguments")
                .or_else(|| c.get("arguments"))
                .cloned();
            parts.push(json!({"type": "tool_call", "id": c.get("id"), "name": name, "arguments": arguments}));
        }
    }
    let mut out = Map::new();
    out.insert("role".to_string(), role);
    out.insert("parts".to_string(), Value::Array(parts));
    if let Some(reason) = map.remove("finish_reason") {
        out.insert("finish_reason".to_string(), reason);
    }
    Value::Object(out)
}

/// The deprecated per-message events: which role each one's message has.
pub(super) fn event_role(name: &str) -> Option<&'static str> {
    Some(match name {
        "gen_ai.system.message" => "system",
        "gen_ai.user.message" => "user",
        "gen_ai.assistant.message" => "assistant",
        "gen_ai.tool.message" => "tool",
        _ => return None,
    })
}

/// Attributes of a span or event that say the conversation, read into `exchange`; the names
/// of those that do not are added to `ignored`.
pub(super) fn read_attributes(
    attrs: Map<String, Value>,
    exchange: &mut Exchange,
    ignored: &mut BTreeSet<String>,
    at: &str,
) {
    // OpenLLMetry's flattened prompt and completion: `gen_ai.prompt.<n>.<field>`.
    let mut flat: [std::collections::BTreeMap<usize, Map<String, Value>>; 2] = Default::default();
    for (key, value) in attrs {
        match key.as_str() {
            "gen_ai.input.messages" => exchange.input = list(value),
            "gen_ai.output.messages" => exchange.output = list(value),
            "gen_ai.system_instructions" => exchange.system = Some(json_value(value)),
            "gen_ai.tool.definitions" => exchange.tools = list(value),
            "gen_ai.prompt" => exchange.input = list(value),
            "gen_ai.completion" => exchange.output = list(value),
            "gen_ai.response.model" => exchange.model = value.as_str().map(str::to_string),
            "gen_ai.request.model" => {
                if exchange.model.is_none() {
                    exchange.model = value.as_str().map(str::to_string);
                }
            }
            _ => {
                let flattened = ["gen_ai.prompt.", "gen_ai.completion."]
                    .iter()
                    .enumerate()
                    .find_map(|(side, prefix)| {
                        let rest = key.strip_prefix(prefix)?;
                        let (n, field) = rest.split_once('.')?;
                        Some((side, n.parse::<usize>().ok()?, field.to_string()))
                    });
                match flattened {
                    Some((side, n, field)) => {
                        flat[side].entry(n).or_default().insert(field, value);
                    }
                    None => {
                        ignored.insert(format!("{at}{key}"));
                    }
                }
            }
        }
    }
    let [prompt, completion] = flat;
    for (side, messages) in [(0, prompt), (1, completion)] {
        for (_, fields) in messages {
            let message = unflatten(fields);
            if side == 0 {
                exchange.input.push(message);
            } else {
                exchange.output.push(message);
            }
        }
    }
}

/// OpenLLMetry's fields of one message (`role`, `content`, `tool_calls.<k>.name`, ...) as a
/// chat-style message.
pub(super) fn unflatten(fields: Map<String, Value>) -> Value {
    let mut message = Map::new();
    let mut calls: std::collections::BTreeMap<usize, Map<String, Value>> = Default::default();
    for (field, value) in fields {
        let call = field
            .strip_prefix("tool_calls.")
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(k, name)| Some((k.parse::<usize>().ok()?, name.to_string())));
        match call {
            Some((k, name)) => {
                calls.entry(k).or_default().insert(name, value);
            }
            None => {
                message.insert(field, value);
            }
        }
    }
    if !calls.is_empty() {
        let calls: Vec<Value> = calls.into_values().map(Value::Object).collect();
        message.insert("tool_calls".to_string(), Value::Array(calls));
    }
    Value::Object(message)
}
