//! Parquet chat datasets (the format the Hugging Face Hub serves every dataset in): one row,
//! one conversation. The source layer reads the file a row group at a time and hands each row
//! over as a JSON object ([`crate::source::parquet`]: the memory bound is there); this reader
//! reads the row.
//!
//! Known layouts, all read by the same rules:
//! - lmsys-chat-1m: `conversation_id, model, conversation[{content, role}], turn, language,
//!   openai_moderation, redacted`;
//! - WildChat: `conversation_hash, model, timestamp, conversation[{content, role, timestamp,
//!   country, hashed_ip, header, language, redacted, state, toxic, turn_identifier}], ...`;
//! - UltraChat: `prompt, prompt_id, messages[{content, role}]`;
//! - ShareGPT-style: `conversations[{from, value}]`, with `system` and `tools` columns
//!   (the turns as [`super::turns`] reads them: calls, observations, `[input.sharegpt]`).
//!
//! The message list is the first of the rule files' `messages_at` paths (`--messages-at`
//! first) that holds a list; else, unless `--no-guess`, the one column (or struct field)
//! holding a list of `{role, ...}` or `{from, ...}` structs, found by shape. A message is
//! `role`, `content` (a string, null, or a list of `{type: text, text}` parts), `name`,
//! `tool_calls` (Chat Completions calls), `tool_call_id`, `reasoning_content`/`reasoning`
//! and `timestamp`; its other fields are ignored fields of the message. The row's identity is
//! its `conversation_id` or `conversation_hash` (global: the same conversation in another
//! file is the same session); its model, time and id come from the rules' paths. Every other
//! column is an ignored field. Fails (the row quarantined) on a row with no message list, or
//! two found by shape, or a message that is not an object with a string role.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::builder::TranscriptBuilder;
use super::fields::{object_or_default, present_struct, Loose};
use super::format::{FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceFormat};
use super::turns::{bad, classic_turns, dataset_tools, split_observations};
use super::InputError;
use crate::model::time::{epoch_number_to_ms, parse_rfc3339_ms};
use crate::model::transcript::{Content, DroppedField, Message, Part, Role, ToolCall, Transcript};
use crate::rules::{InputRules, PathExpr};
use crate::source::parquet::MAGIC;

pub(crate) struct ParquetReader;

impl SourceFormat {
    /// Parquet chat datasets: a row's `conversation_id`/`conversation_hash` names it anywhere.
    pub const PARQUET: SourceFormat = SourceFormat::named("parquet").with_global_ids();
}

/// Columns that name a conversation beyond its file, tried in order.
const IDENTITY_COLUMNS: [&str; 2] = ["conversation_id", "conversation_hash"];

impl FormatReader for ParquetReader {
    fn format(&self) -> SourceFormat {
        SourceFormat::PARQUET
    }

    fn describe(&self) -> &'static str {
        "Parquet chat datasets (lmsys-chat-1m, WildChat, UltraChat, ShareGPT-style rows)"
    }

    fn granularity(&self) -> Granularity {
        Granularity::Record
    }

    /// A Parquet file's rows are found by the file's magic ([`crate::source::parquet`] marks
    /// them with it), never by a row's shape, which a JSON record may share.
    fn detect(&self, first: Option<&Value>, raw: &[u8]) -> bool {
        first.is_none() && raw == MAGIC
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        FileRead::each(records, |row| read_row(row, context))
    }
}

fn not_format(problem: impl Into<String>) -> InputError {
    InputError::NotInFormat {
        format: SourceFormat::PARQUET,
        problem: problem.into(),
    }
}

/// A row once its message list and the columns its facts were read from are taken: the columns
/// converted, and the rest by name, which the audit names as ignored.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Row {
    system: Loose<String>,
    tools: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A message struct: what a message says, and its other fields by name. A field of another
/// type than the one read is a dropped field of the message, so these stay JSON.
#[derive(Deserialize, Default)]
#[serde(default)]
struct RowMessage {
    role: Loose<String>,
    /// Present, `null` too: a `null` content is not a missing one.
    content: Loose<Value>,
    name: Option<Value>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
    tool_call_id: Option<Value>,
    tool_calls: Option<Value>,
    timestamp: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A Chat Completions call: its function's name and arguments, or (no `function`) its own.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Call {
    id: Loose<String>,
    #[serde(rename = "type")]
    kind: Loose<String>,
    /// Present, `null` too: then the call's own `name` is not read.
    #[serde(deserialize_with = "present_struct")]
    function: Option<Option<Function>>,
    name: Loose<String>,
    arguments: Loose<Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Function {
    name: Loose<String>,
    /// Present, `null` too.
    arguments: Loose<Value>,
}

/// The JSON type of `value`, as the audit names it.
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

/// One row as a conversation.
pub(crate) fn read_row(
    mut row: Value,
    context: &ReadContext<'_>,
) -> Result<Transcript, InputError> {
    if !row.is_object() {
        return Err(not_format(format!(
            "a row is a JSON {}, not an object",
            kind(&row)
        )));
    }
    let rules = &context.rules.input;
    let found = messages_at(&row, rules)?;
    let list = match found.path.get_mut(&mut row).map(std::mem::take) {
        Some(Value::Array(list)) => list,
        _ => Vec::new(),
    };
    let at = found.path.as_str().to_string();
    let mut built = TranscriptBuilder::new(SourceFormat::PARQUET, at.clone());
    built.meta.messages_by_shape = found.by_shape;
    let mut used = Vec::new();
    read_meta(&row, rules, &mut built, &mut used);
    let Value::Object(mut map) = row else {
        return Err(not_format("a row is not an object"));
    };
    for key in used {
        map.remove(&key);
    }
    let row: Row = object_or_default(Value::Object(map));
    let mut messages = Vec::new();
    if let Some(system) = row.system.0.filter(|system| !system.is_empty()) {
        messages.push(Message {
            role: Role::System,
            content: Content::Text(system),
            ..Message::default()
        });
    }
    let tags = &rules.sharegpt;
    let turns = list
        .iter()
        .all(|m| m.get(&tags.role_tag).is_some() && m.get("role").is_none());
    if turns {
        classic_turns(list, &at, context, &mut messages)?;
    } else {
        for (index, item) in list.into_iter().enumerate() {
            messages.push(read_message(item, index, &at, rules)?);
        }
    }
    if let Some(tools) = row.tools {
        dataset_tools(tools, &mut built);
        built.ignore("tools");
    }
    for (key, value) in row.rest {
        if !value.is_null() {
            built.ignore(key);
        }
    }
    split_observations(&mut messages, &mut built);
    built.messages(messages);
    built.finish()
}

/// Where a row's messages are: a rule path, or a column found by shape.
struct Found {
    path: PathExpr,
    by_shape: bool,
}

/// The first `messages_at` path holding a list; else the one column holding a list of
/// messages or turns (at the top level or in a struct column), found by shape.
fn messages_at(row: &Value, rules: &InputRules) -> Result<Found, InputError> {
    if let Some(path) = rules
        .messages_at
        .iter()
        .find(|p| p.get(row).is_some_and(Value::is_array))
    {
        return Ok(Found {
            path: path.clone(),
            by_shape: false,
        });
    }
    let tried = || {
        let paths: Vec<String> = rules.messages_at.iter().map(|p| format!("`{p}`")).collect();
        InputError::NoMessages(paths.join(", "))
    };
    if !rules.guess {
        return Err(tried());
    }
    let role_tag = rules.sharegpt.role_tag.as_str();
    let is_messages = |value: &Value| {
        value.as_array().is_some_and(|items| {
            !items.is_empty()
                && items.iter().all(|m| {
                    m.get("role").is_some_and(Value::is_string)
                        || m.get(role_tag).is_some_and(Value::is_string)
                })
        })
    };
    let mut shaped = Vec::new();
    for (key, value) in row.as_object().into_iter().flatten() {
        if is_messages(value) {
            shaped.push(key.clone());
        } else if let Value::Object(inner) = value {
            for (inner_key, inner_value) in inner {
                if is_messages(inner_value) {
                    shaped.push(format!("{key}.{inner_key}"));
                }
            }
        }
    }
    match shaped.as_slice() {
        [] => Err(tried()),
        [one] => Ok(Found {
            // A key with a `.` or `[` of its own cannot be named by a path: never taken.
            path: PathExpr::parse(one).map_err(|_| tried())?,
            by_shape: true,
        }),
        [first, second, ..] => Err(InputError::AmbiguousMessages(first.clone(), second.clone())),
    }
}

/// The row's id, model, time and finished signal by the rule files' paths; its identity by
/// [`IDENTITY_COLUMNS`]. A top-level column read this way is `used` (not an ignored field).
fn read_meta(
    row: &Value,
    rules: &InputRules,
    built: &mut TranscriptBuilder,
    used: &mut Vec<String>,
) {
    let meta = &mut built.meta;
    meta.source_id = IDENTITY_COLUMNS.iter().find_map(|column| {
        let id = row.get(*column)?.as_str().filter(|id| !id.is_empty())?;
        used.push(column.to_string());
        Some(id.to_string())
    });
    let mut first = |paths: &[PathExpr], read: &dyn Fn(&Value) -> bool| {
        let path = paths.iter().find(|p| p.get(row).is_some_and(read))?;
        if !path.as_str().contains(['.', '[']) {
            used.push(path.as_str().to_string());
        }
        path.get(row)
    };
    meta.id = first(&rules.id_at, &|v| v.is_string() || v.is_number())
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other @ (Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::Array(_)
            | Value::Object(_)) => other.to_string(),
        })
        .or_else(|| meta.source_id.clone());
    meta.model = first(&rules.model_at, &Value::is_string)
        .and_then(Value::as_str)
        .map(str::to_string);
    meta.created_ms = first(&rules.created_at, &|v| time_ms(v).is_some()).and_then(time_ms);
    meta.finished =
        rules
            .finished
            .iter()
            .any(|signal| match (signal.path.get(row), &signal.equals) {
                (None | Some(Value::Null), _) => false,
                (Some(found), None) => found != &Value::Bool(false),
                (Some(Value::String(found)), Some(expected)) => found == expected,
                (Some(found), Some(expected)) => {
                    serde_json::from_str::<Value>(expected).is_ok_and(|e| &e == found)
                }
            });
}

/// A time as a row writes it: RFC 3339 text (a Parquet timestamp is rendered so), or a
/// number of seconds or milliseconds since the epoch.
fn time_ms(value: &Value) -> Option<i64> {
    match value {
        Value::String(text) => parse_rfc3339_ms(text),
        Value::Number(n) => epoch_number_to_ms(n.as_f64()?),
        Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_) => None,
    }
}

/// Message `index` of the list at `at`: a `{role, content, ...}` struct.
fn read_message(
    item: Value,
    index: usize,
    at: &str,
    rules: &InputRules,
) -> Result<Message, InputError> {
    if !item.is_object() {
        return Err(bad(at, index, "is not an object"));
    }
    let mut fields: RowMessage = object_or_default(item);
    let Some(role) = fields.role.0 else {
        return Err(bad(at, index, "has no string `role`"));
    };
    let mut message = Message::default();
    (message.role, message.aliased_from) = match rules.role_aliases.get(&role) {
        Some(alias) => (Role::named(alias.clone()), Some(role)),
        None => (Role::named(role), None),
    };
    let mut dropped = |path: &str, value: &Value| {
        message.dropped_fields.push(DroppedField {
            path: path.to_string(),
            found: kind(value),
        })
    };
    let content = match fields.content.0 {
        None => Content::Missing,
        Some(Value::Null) => Content::Null,
        Some(Value::String(text)) => Content::Text(text),
        Some(Value::Array(parts)) => Content::Parts(parts.into_iter().map(part).collect()),
        Some(other) => {
            dropped("content", &other);
            Content::Missing
        }
    };
    let name = match fields.name {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name),
        Some(other) => {
            dropped("name", &other);
            None
        }
    };
    // `reasoning` is read only when `reasoning_content` gives no text; else it is ignored.
    let mut reasoning = None;
    let candidates = [
        ("reasoning_content", fields.reasoning_content.take()),
        ("reasoning", fields.reasoning.take()),
    ];
    for (key, value) in candidates {
        if reasoning.is_some() {
            if let Some(value) = value {
                fields.rest.insert(key.to_string(), value);
            }
            continue;
        }
        reasoning = match value {
            Some(Value::String(text)) if !text.is_empty() => Some(text),
            Some(Value::String(_) | Value::Null) | None => None,
            Some(other) => {
                dropped(key, &other);
                None
            }
        };
    }
    let tool_call_ids = match fields.tool_call_id {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(id)) => vec![id],
        Some(other) => {
            dropped("tool_call_id", &other);
            Vec::new()
        }
    };
    let tool_calls = match fields.tool_calls {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls
            .into_iter()
            .filter_map(|c| call(c, &mut dropped))
            .collect(),
        Some(other) => {
            dropped("tool_calls", &other);
            Vec::new()
        }
    };
    let timestamp_ms = fields.timestamp.as_ref().and_then(time_ms);
    message.content = content;
    message.name = name;
    message.reasoning = reasoning;
    message.tool_call_ids = tool_call_ids;
    message.tool_calls = tool_calls;
    message.timestamp_ms = timestamp_ms;
    message.ignored_fields = fields
        .rest
        .into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, _)| k)
        .collect();
    Ok(message)
}

/// A content part: a `{type: text, text}` part is text, any other kept by its type.
fn part(value: Value) -> Part {
    let kind = match &value {
        Value::Object(fields) => match (fields.get("type"), fields.get("text")) {
            (Some(Value::String(t)), Some(Value::String(text))) if t == "text" => {
                return Part::Text(text.clone())
            }
            (None, Some(Value::String(text))) => return Part::Text(text.clone()),
            (Some(Value::String(t)), _) => t.clone(),
            _ => "object".to_string(),
        },
        other @ (Value::Null
        | Value::Bool(_)
        | Value::Number(_)
        | Value::String(_)
        | Value::Array(_)) => kind(other).to_string(),
    };
    Part::Unknown { kind }
}

/// A Chat Completions call (`{id, type, function: {name, arguments}}`); one with no name is
/// dropped, and said so.
fn call(value: Value, dropped: &mut impl FnMut(&str, &Value)) -> Option<ToolCall> {
    // Read in place: a call with no name is said as found.
    let call = match &value {
        Value::Object(_) => Call::deserialize(&value).unwrap_or_default(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            Call::default()
        }
    };
    let function = match call.function {
        Some(function) => function.unwrap_or_default(),
        None => Function {
            name: call.name,
            arguments: call.arguments,
        },
    };
    let Some(name) = function.name.0 else {
        dropped("tool_calls", &value);
        return None;
    };
    let (arguments, from_object, missing) = match function.arguments.0 {
        None | Some(Value::Null) => (String::new(), false, true),
        Some(Value::String(text)) => (text, false, false),
        Some(other) => (other.to_string(), other.is_object(), false),
    };
    Some(ToolCall {
        id: call.id.0,
        name,
        arguments,
        arguments_from_object: from_object,
        arguments_missing: missing,
        custom: call.kind.0.as_deref() == Some("custom"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RuleSet;
    use serde_json::json;
    use std::path::Path;

    fn row(value: Value) -> Result<Transcript, InputError> {
        let rules = RuleSet::builtin().unwrap();
        let context = ReadContext {
            rules: &rules,
            path: Path::new("/nonexistent/train.parquet"),
            key: "train.parquet",
            root: None,
            follow: false,
            cache: &Default::default(),
        };
        read_row(value, &context)
    }

    #[test]
    fn an_lmsys_row_names_its_conversation_and_ignores_its_other_columns() {
        let t = row(json!({
            "conversation_id": "33f01939a744455c869cb234afca47f1",
            "model": "wizardlm-13b",
            "conversation": [{"content": "hi", "role": "user"},
                             {"content": "Hello!", "role": "assistant"}],
            "turn": 1, "language": "English",
            "openai_moderation": [{"flagged": false}], "redacted": false,
        }))
        .unwrap();
        assert_eq!(
            t.meta.source_id.as_deref(),
            Some("33f01939a744455c869cb234afca47f1")
        );
        assert_eq!(t.meta.id, t.meta.source_id);
        assert_eq!(t.meta.model.as_deref(), Some("wizardlm-13b"));
        assert_eq!(t.meta.messages_at, "conversation");
        assert!(!t.meta.messages_by_shape);
        assert_eq!(
            t.ignored_fields,
            ["language", "openai_moderation", "redacted", "turn"]
        );
        let roles: Vec<&str> = t.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant"]);
    }

    #[test]
    fn a_wildchat_row_keeps_its_times_and_counts_each_message_field() {
        let t = row(json!({
            "conversation_hash": "c9ec5b44e8b47c4b8a7bd1b6f4d1c6d4",
            "model": "gpt-4-0314",
            "timestamp": "2023-04-09T00:02:53Z",
            "conversation": [
                {"content": "hi", "role": "user", "country": "US", "hashed_ip": "ab",
                 "timestamp": "2023-04-09T00:02:53Z", "toxic": false, "redacted": false,
                 "header": {"user-agent": "x"}, "state": null, "turn_identifier": 1},
                {"content": "Hello", "role": "assistant", "timestamp": null},
            ],
            "turn": 1, "toxic": false,
        }))
        .unwrap();
        assert_eq!(t.meta.created_ms, Some(1_680_998_573_000));
        assert_eq!(t.messages[0].timestamp_ms, Some(1_680_998_573_000));
        assert_eq!(
            t.messages[0].ignored_fields,
            [
                "country",
                "hashed_ip",
                "header",
                "redacted",
                "toxic",
                "turn_identifier"
            ]
        );
        assert!(t.messages[1].ignored_fields.is_empty());
        assert_eq!(t.ignored_fields, ["toxic", "turn"]);
    }

    #[test]
    fn sharegpt_turns_become_calls_and_outputs() {
        let t = row(json!({
            "conversations": [
                {"from": "human", "value": "weather?"},
                {"from": "function_call", "value": "{\"name\": \"w\", \"arguments\": {\"c\": \"P\"}}"},
                {"from": "observation", "value": "{\"t\": 20}"},
                {"from": "gpt", "value": "20 degrees"},
            ],
            "system": "Be brief.",
            "tools": "[{\"name\": \"w\", \"parameters\": {}}]",
        }))
        .unwrap();
        let roles: Vec<&str> = t.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
        assert_eq!(t.messages[2].tool_calls[0].name, "w");
        assert_eq!(t.messages[3].tool_call_ids, ["call_1_0"]);
        assert_eq!(t.tools.len(), 1);
        assert_eq!(t.ignored_fields, ["tools"]);
    }

    #[test]
    fn messages_are_found_by_shape_and_two_candidates_are_refused() {
        let t = row(json!({"dialog": [{"role": "user", "content": "x"}], "id": 7})).unwrap();
        assert_eq!(t.meta.messages_at, "dialog");
        assert!(t.meta.messages_by_shape);
        assert_eq!(t.meta.id.as_deref(), Some("7"));
        let err = row(json!({
            "a": [{"role": "user", "content": "x"}],
            "b": [{"from": "human", "value": "y"}],
        }))
        .unwrap_err();
        assert_eq!(err, InputError::AmbiguousMessages("a".into(), "b".into()));
        let err = row(json!({"text": "no messages"})).unwrap_err();
        assert!(matches!(err, InputError::NoMessages(_)), "{err:?}");
    }

    #[test]
    fn a_message_of_the_wrong_shape_is_refused_with_its_place() {
        let err = row(json!({"messages": [{"role": "user", "content": "x"}, 5]})).unwrap_err();
        assert_eq!(
            err,
            InputError::BadMessage {
                path: "messages".into(),
                index: 1,
                problem: "is not an object".into()
            }
        );
        let t = row(json!({"messages": [{"role": "user", "content": 5, "name": true}]})).unwrap();
        let dropped: Vec<(&str, &str)> = t.messages[0]
            .dropped_fields
            .iter()
            .map(|d| (d.path.as_str(), d.found))
            .collect();
        assert_eq!(dropped, [("content", "number"), ("name", "boolean")]);
    }

    #[test]
    fn only_a_binary_files_magic_is_this_format() {
        assert!(ParquetReader.detect(None, b"PAR1"));
        assert!(!ParquetReader.detect(Some(&json!({})), b"PAR1"));
        assert!(!ParquetReader.detect(None, b"{\"messages\":[]}"));
    }
}
