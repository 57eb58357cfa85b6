//! Chat-style records (Chat Completions, Batch API, evals, trajectories, turn lists) to a
//! [`Transcript`].

use serde_json::{Map, Value};

use super::InputError;
use crate::model::time::{epoch_number_to_ms, parse_rfc3339_ms};
use crate::model::transcript::{
    Content, DroppedField, Message, Part, RecordMeta, ToolCall, Transcript,
};
use crate::rules::InputRules;

/// Keys of a message that we convert; anything else is an ignored field.
const MESSAGE_KEYS: [&str; 11] = [
    "role",
    "content",
    "name",
    "tool_calls",
    "function_call",
    "tool_call_id",
    "tool_call_ids",
    "refusal",
    "reasoning_content",
    "reasoning",
    "phase",
];

/// Rollout line tags: a record carrying one of these plus `payload` is a rollout line.
const ROLLOUT_TAGS: [&str; 5] = [
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
];

/// The rules `rules` with messages read from `messages` only and no reply appended: for a
/// record another format's reader built (`{"messages": [...], "model", "id", "created"}`),
/// which must read the same whatever paths a rule file names.
pub fn built_record_rules(rules: &InputRules) -> InputRules {
    let mut built = rules.clone();
    built.messages_at = vec![crate::rules::PathExpr::parse("messages").expect("a plain key")];
    built.reply_at = Vec::new();
    built.guess = false;
    built
}

/// Reads a parsed record as a conversation, moving its strings out of `value`.
pub fn extract(mut value: Value, rules: &InputRules) -> Result<Transcript, InputError> {
    let mut meta = RecordMeta::default();
    let mut tools = Vec::new();
    let (list, path) = match &mut value {
        Value::Array(_) => (std::mem::take(&mut value), "(record)".to_string()),
        Value::Object(map) => {
            if let (Some(Value::String(tag)), true) = (map.get("type"), map.contains_key("payload"))
            {
                if ROLLOUT_TAGS.contains(&tag.as_str()) {
                    return Err(InputError::RolloutLine(tag.clone()));
                }
            }
            read_meta(&value, rules, &mut meta);
            tools = read_tools(&value);
            let found = rules.messages_at.iter().find_map(|path| {
                let v = path.get(&value)?;
                match v {
                    Value::Array(_) | Value::String(_) => Some(path.clone()),
                    _ => None,
                }
            });
            match found {
                Some(path) => {
                    let taken = path
                        .get_mut(&mut value)
                        .map(std::mem::take)
                        .unwrap_or(Value::Null);
                    (taken, path.as_str().to_string())
                }
                None => guess_messages(&mut value, rules, &mut meta)?,
            }
        }
        Value::Null => return Err(InputError::NotARecord("null")),
        Value::Bool(_) => return Err(InputError::NotARecord("boolean")),
        Value::Number(_) => return Err(InputError::NotARecord("number")),
        Value::String(_) => return Err(InputError::NotARecord("string")),
    };
    let mut raw_messages = match list {
        Value::String(text) => vec![Value::Object(Map::from_iter([
            ("role".to_string(), Value::String("user".to_string())),
            ("content".to_string(), Value::String(text)),
        ]))],
        Value::Array(items) => flatten_turns(items),
        _ => Vec::new(),
    };
    // A Batch API result appended to its request: the assistant's reply.
    if let Value::Object(_) = &value {
        for path in &rules.reply_at {
            if let Some(reply) = path.get_mut(&mut value) {
                if reply.is_object() {
                    raw_messages.push(std::mem::take(reply));
                    break;
                }
            }
        }
    }
    if raw_messages.is_empty() {
        return Err(InputError::EmptyMessages(path));
    }
    let mut messages = Vec::with_capacity(raw_messages.len());
    for (index, raw) in raw_messages.into_iter().enumerate() {
        let message = read_message(raw, index, &rules.role_aliases).map_err(|problem| {
            InputError::BadMessage {
                path: path.clone(),
                index,
                problem,
            }
        })?;
        messages.push(message);
    }
    meta.messages_at = path;
    meta.format = "chat";
    let ignored_fields = match &value {
        Value::Object(map) => map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, _)| k.clone())
            .collect(),
        _ => Vec::new(),
    };
    Ok(Transcript {
        messages,
        meta,
        ignored_fields,
        tools,
        source_notes: Vec::new(),
    })
}

/// No configured path holds messages: a batch result without its request, or (unless
/// `--no-guess`) the one field whose shape is a message list.
fn guess_messages(
    value: &mut Value,
    rules: &InputRules,
    meta: &mut RecordMeta,
) -> Result<(Value, String), InputError> {
    if rules.reply_at.iter().any(|p| p.get(value).is_some()) {
        let id = meta.id.clone().unwrap_or_else(|| "(none)".to_string());
        return Err(InputError::BatchResultWithoutRequest(id));
    }
    let shaped = if rules.guess {
        messages_by_shape(map_of(value))
    } else {
        Vec::new()
    };
    match shaped.as_slice() {
        [] => {
            let tried: Vec<String> = rules.messages_at.iter().map(|p| format!("`{p}`")).collect();
            Err(InputError::NoMessages(tried.join(", ")))
        }
        [one] => {
            let taken = take_at(value, one);
            meta.messages_by_shape = true;
            Ok((taken, one.join(".")))
        }
        [first, second, ..] => Err(InputError::AmbiguousMessages(
            first.join("."),
            second.join("."),
        )),
    }
}

fn map_of(value: &Value) -> Option<&Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// The fields, at the top level or one level down, that hold a non-empty list of objects each
/// with a string `role`: where a record of an unknown shape (tau-bench's `traj`) keeps its
/// messages. Each path as its keys, in the record's key order.
fn messages_by_shape(record: Option<&Map<String, Value>>) -> Vec<Vec<String>> {
    let is_messages = |value: &Value| match value {
        Value::Array(items) => {
            !items.is_empty()
                && items
                    .iter()
                    .all(|item| matches!(item.get("role"), Some(Value::String(_))))
        }
        _ => false,
    };
    let mut found = Vec::new();
    for (key, value) in record.into_iter().flatten() {
        if is_messages(value) {
            found.push(vec![key.clone()]);
        } else if let Value::Object(inner) = value {
            for (inner_key, inner_value) in inner {
                if is_messages(inner_value) {
                    found.push(vec![key.clone(), inner_key.clone()]);
                }
            }
        }
    }
    found
}

/// Moves the value at `keys` out of `value` (leaving null).
fn take_at(value: &mut Value, keys: &[String]) -> Value {
    let mut here = Some(value);
    for key in keys {
        here = here.and_then(|v| v.get_mut(key.as_str()));
    }
    here.map(std::mem::take).unwrap_or(Value::Null)
}

/// The record's tool definitions: `tools`, else legacy `functions` (each wrapped as a
/// `function` tool), at the top level or in a Batch API request `body`. Copied, not moved, so
/// the keys stay in the audit's ignored fields exactly as before.
fn read_tools(value: &Value) -> Vec<Value> {
    let holders = [Some(value), value.get("body")];
    for holder in holders.into_iter().flatten() {
        if let Some(Value::Array(tools)) = holder.get("tools") {
            return tools.clone();
        }
        if let Some(Value::Array(functions)) = holder.get("functions") {
            return functions
                .iter()
                .map(|f| serde_json::json!({"type": "function", "function": f}))
                .collect();
        }
    }
    Vec::new()
}

/// A list of messages, or a list of turns each a list of messages (flattened in order).
fn flatten_turns(items: Vec<Value>) -> Vec<Value> {
    if items.iter().all(|i| i.is_array()) {
        items
            .into_iter()
            .flat_map(|turn| match turn {
                Value::Array(messages) => messages,
                _ => Vec::new(),
            })
            .collect()
    } else {
        items
    }
}

fn read_meta(record: &Value, rules: &InputRules, meta: &mut RecordMeta) {
    meta.id = rules.id_at.iter().find_map(|p| match p.get(record)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    });
    meta.created_ms = rules.created_at.iter().find_map(|p| match p.get(record)? {
        Value::Number(n) => epoch_number_to_ms(n.as_f64()?),
        Value::String(s) => parse_rfc3339_ms(s),
        _ => None,
    });
    meta.model = rules
        .model_at
        .iter()
        .find_map(|p| p.get(record)?.as_str().map(str::to_string));
    meta.finished = rules
        .finished
        .iter()
        .any(|signal| match signal.path.get(record) {
            None | Some(Value::Null) => false,
            Some(value) => match &signal.equals {
                None => value.as_bool() != Some(false),
                Some(expected) => match value {
                    Value::String(s) => s == expected,
                    other => serde_json::from_str::<Value>(expected).is_ok_and(|e| &e == other),
                },
            },
        });
}

fn take_string(map: &mut Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match map.get_mut(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(std::mem::take(s))),
        Some(other) => Err(format!("`{key}` is a {}, not a string", kind(other))),
    }
}

/// An optional string field where another type is not worth refusing the message for: the
/// field is left out and recorded in `dropped` (with `at`, its path in the message), so the
/// converter can audit the drop instead of it vanishing.
fn take_string_or_drop(
    map: &mut Map<String, Value>,
    key: &str,
    at: &dyn std::fmt::Display,
    dropped: &mut Vec<DroppedField>,
) -> Option<String> {
    match map.get_mut(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(std::mem::take(s)),
        Some(other) => {
            dropped.push(DroppedField {
                path: format!("{at}{key}"),
                found: kind(other),
            });
            None
        }
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

pub(crate) fn read_message(
    raw: Value,
    index: usize,
    aliases: &std::collections::BTreeMap<String, String>,
) -> Result<Message, String> {
    let mut map = match raw {
        Value::Object(map) => map,
        other => return Err(format!("is a {}, not a message object", kind(&other))),
    };
    let role = take_string(&mut map, "role")?.ok_or_else(|| "has no `role`".to_string())?;
    // Keep the role as written when an alias renames it, so that the renaming is audited
    // (a silent rename would be a decision without a trace).
    let (role, aliased_from) = match aliases.get(&role) {
        Some(alias) => (alias.clone(), Some(role)),
        None => (role, None),
    };
    let mut dropped = Vec::new();
    let content = match map.get_mut("content") {
        None => Content::Missing,
        Some(Value::Null) => Content::Null,
        Some(Value::String(s)) => Content::Text(std::mem::take(s)),
        Some(Value::Array(parts)) => Content::Parts(
            parts
                .iter_mut()
                .enumerate()
                .map(|(i, part)| read_part(part, &PartAt(i), &mut dropped))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(single @ Value::Object(_)) => {
            Content::Parts(vec![read_part(single, &"content.", &mut dropped)?])
        }
        Some(other) => return Err(format!("`content` is a {}", kind(other))),
    };
    let mut tool_calls = Vec::new();
    match map.get_mut("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for call in calls.iter_mut() {
                tool_calls.push(read_tool_call(call)?);
            }
        }
        Some(other) => return Err(format!("`tool_calls` is a {}", kind(other))),
    }
    let function_call = match map.get_mut("function_call") {
        None | Some(Value::Null) => None,
        Some(call @ Value::Object(_)) => Some(read_function(call, false)?),
        Some(other) => return Err(format!("`function_call` is a {}", kind(other))),
    };
    let tool_call_ids = read_tool_call_ids(&mut map)?;
    let refusal = take_string(&mut map, "refusal")?;
    let reasoning = read_reasoning(&mut map)?;
    let phase = take_string_or_drop(&mut map, "phase", &"", &mut dropped);
    let name = take_string_or_drop(&mut map, "name", &"", &mut dropped);
    let ignored_fields = map
        .iter()
        .filter(|(k, v)| !MESSAGE_KEYS.contains(&k.as_str()) && !v.is_null())
        .map(|(k, _)| k.clone())
        .collect();
    Ok(Message {
        index,
        role,
        aliased_from,
        name,
        content,
        tool_calls,
        function_call,
        tool_call_ids,
        refusal,
        reasoning,
        phase,
        ignored_fields,
        dropped_fields: dropped,
        ..Message::default()
    })
}

/// `tool_call_id`, then every id of a `tool_call_ids` list.
fn read_tool_call_ids(map: &mut Map<String, Value>) -> Result<Vec<String>, String> {
    let mut tool_call_ids = Vec::new();
    if let Some(id) = take_string(map, "tool_call_id")? {
        tool_call_ids.push(id);
    }
    match map.get_mut("tool_call_ids") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ids)) => {
            for id in ids.iter_mut() {
                match id {
                    Value::String(s) => tool_call_ids.push(std::mem::take(s)),
                    other => return Err(format!("`tool_call_ids` holds a {}", kind(other))),
                }
            }
        }
        Some(other) => return Err(format!("`tool_call_ids` is a {}", kind(other))),
    }
    Ok(tool_call_ids)
}

/// Plain-text reasoning: `reasoning_content`, or `reasoning` as a string or an object.
fn read_reasoning(map: &mut Map<String, Value>) -> Result<Option<String>, String> {
    Ok(match take_string(map, "reasoning_content")? {
        Some(r) => Some(r),
        None => match map.get_mut("reasoning") {
            Some(Value::String(s)) => Some(std::mem::take(s)),
            // A structured reasoning object (e.g. `{"content": "..."}`, `{"text": "..."}`).
            Some(Value::Object(o)) => {
                ["content", "text", "summary"]
                    .iter()
                    .find_map(|k| match o.get_mut(*k) {
                        Some(Value::String(s)) => Some(std::mem::take(s)),
                        _ => None,
                    })
            }
            _ => None,
        },
    })
}

fn read_tool_call(call: &mut Value) -> Result<ToolCall, String> {
    let Value::Object(map) = call else {
        return Err(format!("a tool call is a {}", kind(call)));
    };
    let id = take_string(map, "id")?;
    let custom = map.get("type").and_then(Value::as_str) == Some("custom");
    let mut parsed = if custom {
        let inner = map
            .get_mut("custom")
            .ok_or_else(|| "custom tool call without `custom`".to_string())?;
        let Value::Object(c) = inner else {
            return Err("`custom` is not an object".to_string());
        };
        let name = take_string(c, "name")?.unwrap_or_default();
        let input = take_string(c, "input")?;
        ToolCall {
            id: None,
            name,
            arguments_missing: input.is_none(),
            arguments: input.unwrap_or_default(),
            arguments_from_object: false,
            custom: true,
        }
    } else {
        let function = map
            .get_mut("function")
            .ok_or_else(|| "tool call without `function`".to_string())?;
        read_function(function, false)?
    };
    parsed.id = id;
    Ok(parsed)
}

fn read_function(function: &mut Value, custom: bool) -> Result<ToolCall, String> {
    let Value::Object(f) = function else {
        return Err(format!("`function` is a {}", kind(function)));
    };
    let name = take_string(f, "name")?.ok_or_else(|| "function call without `name`".to_string())?;
    let (arguments, from_object, missing) = match f.get_mut("arguments") {
        None | Some(Value::Null) => (String::new(), false, true),
        Some(Value::String(s)) => (std::mem::take(s), false, false),
        Some(other) => (other.to_string(), true, false),
    };
    Ok(ToolCall {
        id: None,
        name,
        arguments,
        arguments_from_object: from_object,
        arguments_missing: missing,
        custom,
    })
}

/// One content part; `at` is its path in the message (`content[2].`), for dropped fields.
/// Where a content part is, as a dropped field's path names it (`content[2].`): written only
/// when a field is dropped, not formatted for every part.
struct PartAt(usize);

impl std::fmt::Display for PartAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "content[{}].", self.0)
    }
}

fn read_part(
    part: &mut Value,
    at: &dyn std::fmt::Display,
    dropped: &mut Vec<DroppedField>,
) -> Result<Part, String> {
    let map = match part {
        Value::String(s) => return Ok(Part::Text(std::mem::take(s))),
        Value::Object(map) => map,
        other => return Err(format!("a content part is a {}", kind(other))),
    };
    let kind_name = map
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or(if map.contains_key("text") { "text" } else { "" })
        .to_string();
    Ok(match kind_name.as_str() {
        "text" | "input_text" | "output_text" => {
            Part::Text(take_string(map, "text")?.unwrap_or_default())
        }
        "refusal" => Part::Refusal(take_string(map, "refusal")?.unwrap_or_default()),
        "image_url" | "input_image" => {
            let mut url = None;
            let mut detail = take_string_or_drop(map, "detail", at, dropped);
            let file_id = take_string_or_drop(map, "file_id", at, dropped);
            match map.get_mut("image_url") {
                Some(Value::String(s)) => url = Some(std::mem::take(s)),
                Some(Value::Object(o)) => {
                    url = take_string(o, "url")?;
                    if detail.is_none() {
                        detail = take_string(o, "detail")?;
                    }
                }
                _ => {}
            }
            Part::Image {
                url,
                file_id,
                detail,
            }
        }
        "input_audio" => {
            let (mut data, mut format) = (None, None);
            if let Some(Value::Object(o)) = map.get_mut("input_audio") {
                data = take_string(o, "data")?;
                format = take_string(o, "format")?;
            }
            Part::Audio {
                data,
                format,
                url: take_string_or_drop(map, "audio_url", at, dropped),
                file_id: take_string_or_drop(map, "file_id", at, dropped),
            }
        }
        "file" | "input_file" => {
            let mut filename = take_string_or_drop(map, "filename", at, dropped);
            let mut file_id = take_string_or_drop(map, "file_id", at, dropped);
            let mut data_len = 0;
            if let Some(Value::Object(o)) = map.get_mut("file") {
                filename = filename.or(take_string(o, "filename")?);
                file_id = file_id.or(take_string(o, "file_id")?);
                data_len = o
                    .get("file_data")
                    .and_then(Value::as_str)
                    .map_or(0, str::len);
            }
            Part::File {
                filename,
                file_id,
                data_len,
            }
        }
        other => Part::Unknown {
            kind: if other.is_empty() {
                "untyped".to_string()
            } else {
                other.to_string()
            },
        },
    })
}
