//! Chat Completions messages, read alike wherever a source writes them: a chat record's list,
//! a logged request's `messages` (streamed Chat Completions logs), an OpenAI-style dataset row
//! (ShareGPT), a Responses log's message content. Each message is read from a `Value` or from
//! simd-json's tape ([`Tree`]) by the same code, so the chat fast path and every other reader
//! agree on what a message is.

use serde_json::Value;

use super::tree::{Json, Object, Tree};
use super::InputError;
use crate::model::transcript::{Content, DroppedField, Message, Part, Role, ToolCall};
use crate::rules::{InputRules, RoleAliases};

/// Keys of a message that we convert ([`Members::slot`] takes each); anything else is an
/// ignored field.
#[cfg(test)]
pub(crate) const MESSAGE_KEYS: [&str; 11] = [
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

/// The messages of a Chat Completions list as a source holds it (a logged request's
/// `messages`, an OpenAI-style dataset row): a list of messages or of turns, each read as a
/// chat record's message is, at `path`. `more` says that messages follow the list (a logged
/// reply), so the list is not one of turns. Refused when the list is empty and nothing follows.
pub(crate) fn read_message_list(
    items: Vec<Value>,
    more: bool,
    path: &str,
    rules: &InputRules,
) -> Result<Vec<Message>, InputError> {
    let items = if more { items } else { flatten_turns(items) };
    if items.is_empty() && !more {
        return Err(InputError::EmptyMessages(path.to_string()));
    }
    read_messages(items, 0, path, rules)
}

/// A list of messages, or a list of turns each a list of messages (flattened in order).
pub(crate) fn flatten_turns(items: Vec<Value>) -> Vec<Value> {
    if items.iter().all(|i| i.is_array()) {
        items
            .into_iter()
            .flat_map(|turn| match turn {
                Value::Array(messages) => messages,
                Value::Null
                | Value::Bool(_)
                | Value::Number(_)
                | Value::String(_)
                | Value::Object(_) => Vec::new(),
            })
            .collect()
    } else {
        items
    }
}

/// Inlined, so that an absent key (most of the keys a message is asked for) costs the tape
/// object's key-bit test of a constant, and no call.
#[inline(always)]
fn take_string<M: Object>(map: &mut M, key: &str) -> Result<Option<String>, String>
where
    M::Node: Tree,
{
    match map.take(key) {
        None => Ok(None),
        Some(value) => string_at(value, key),
    }
}

/// [`string_at`] of a member that may be absent.
fn string_of<N: Tree>(value: Option<N>, key: &str) -> Result<Option<String>, String> {
    match value {
        None => Ok(None),
        Some(value) => string_at(value, key),
    }
}

/// The string `value` of `key`, `None` for `null`.
fn string_at<N: Tree>(value: N, key: &str) -> Result<Option<String>, String> {
    match value.into_json() {
        Json::Null => Ok(None),
        Json::String(s) => Ok(Some(s)),
        other @ Json::Bool
        | other @ Json::Number
        | other @ Json::List(_)
        | other @ Json::Object(_) => Err(format!("`{key}` is a {}, not a string", other.kind())),
    }
}

/// An optional string field where another type is not worth refusing the message for: the
/// field is left out and recorded in `dropped` (with `at`, its path in the message), so the
/// converter can audit the drop instead of it vanishing.
#[inline(always)]
fn take_string_or_drop<M: Object>(
    map: &mut M,
    key: &str,
    at: &dyn std::fmt::Display,
    dropped: &mut Vec<DroppedField>,
) -> Option<String>
where
    M::Node: Tree,
{
    let value = map.take(key)?;
    string_or_drop(value, key, at, dropped)
}

fn string_or_drop<N: Tree>(
    value: N,
    key: &str,
    at: &dyn std::fmt::Display,
    dropped: &mut Vec<DroppedField>,
) -> Option<String> {
    match value.into_json() {
        Json::Null => None,
        Json::String(s) => Some(s),
        other @ Json::Bool
        | other @ Json::Number
        | other @ Json::List(_)
        | other @ Json::Object(_) => {
            dropped.push(DroppedField {
                path: format!("{at}{key}"),
                found: other.kind(),
            });
            None
        }
    }
}

/// Reads the messages `raw` (the list at `path`, from position `first` on) with their
/// positions, or the first that cannot be read.
pub(crate) fn read_messages<N: Tree>(
    raw: impl IntoIterator<Item = N>,
    first: usize,
    path: &str,
    rules: &InputRules,
) -> Result<Vec<Message>, InputError> {
    // Sized up front: a `Message` is large, and growing the list moved each one again.
    let raw = raw.into_iter();
    let mut messages = Vec::with_capacity(raw.size_hint().0);
    for (i, raw) in raw.enumerate() {
        let index = first + i;
        // Read where it is kept: a `Message` built, returned and pushed would be copied
        // twice (a few hundred bytes each time).
        messages.push(Message {
            index,
            ..Message::default()
        });
        let read = match messages.last_mut() {
            Some(message) => read_message(raw, message, &rules.role_aliases),
            None => Ok(()),
        };
        read.map_err(|problem| InputError::BadMessage {
            path: path.to_string(),
            index,
            problem,
        })?;
    }
    Ok(messages)
}

/// A message's members, from one walk of its keys: the value of each key the reader converts
/// (the last of a key given twice, as a `Value` keeps it), and every other key with whether
/// its value is `null`, in the order given.
pub(crate) struct Members<N> {
    role: Option<N>,
    content: Option<N>,
    name: Option<N>,
    tool_calls: Option<N>,
    function_call: Option<N>,
    tool_call_id: Option<N>,
    tool_call_ids: Option<N>,
    refusal: Option<N>,
    reasoning_content: Option<N>,
    reasoning: Option<N>,
    phase: Option<N>,
    others: Vec<(String, bool)>,
}

impl<N: Tree> Members<N> {
    /// No member yet.
    pub(crate) fn none() -> Members<N> {
        Members {
            role: None,
            content: None,
            name: None,
            tool_calls: None,
            function_call: None,
            tool_call_id: None,
            tool_call_ids: None,
            refusal: None,
            reasoning_content: None,
            reasoning: None,
            phase: None,
            others: Vec::new(),
        }
    }

    /// One walk of `raw`'s keys, or `raw` back when it is not an object: searching for each
    /// of the eleven keys, then for the others, would cost more than reading the message.
    fn of(raw: N) -> Result<Members<N>, N> {
        let mut members = Members::none();
        raw.each_entry(|key, value| match members.slot(key) {
            Some(slot) => *slot = Some(value),
            None => members.others.push((key.to_string(), value.is_null())),
        })?;
        Ok(members)
    }

    /// Where the value of `key` goes, when the reader converts it (the keys `MESSAGE_KEYS`
    /// lists, for the tests).
    pub(crate) fn slot(&mut self, key: &str) -> Option<&mut Option<N>> {
        Some(match key {
            "role" => &mut self.role,
            "content" => &mut self.content,
            "name" => &mut self.name,
            "tool_calls" => &mut self.tool_calls,
            "function_call" => &mut self.function_call,
            "tool_call_id" => &mut self.tool_call_id,
            "tool_call_ids" => &mut self.tool_call_ids,
            "refusal" => &mut self.refusal,
            "reasoning_content" => &mut self.reasoning_content,
            "reasoning" => &mut self.reasoning,
            "phase" => &mut self.phase,
            _ => return None,
        })
    }
}

/// One message, from a `Value` or a tape node ([`Tree`]), read into `message` (the same
/// message either way); its fields are read in a fixed order, so a message with several
/// faults is refused for the same one every time.
pub(crate) fn read_message<N: Tree>(
    raw: N,
    message: &mut Message,
    aliases: &RoleAliases,
) -> Result<(), String> {
    let members = match Members::of(raw) {
        Ok(members) => members,
        Err(other) => {
            return Err(format!(
                "is a {}, not a message object",
                other.into_json().kind()
            ))
        }
    };
    (message.role, message.aliased_from) = read_role(members.role, aliases)?;
    let dropped = &mut message.dropped_fields;
    message.content = read_content(members.content, dropped)?;
    match members.tool_calls.map(Tree::into_items) {
        None => {}
        Some(Ok(calls)) => {
            for call in calls {
                message.tool_calls.push(read_tool_call(call)?);
            }
        }
        Some(Err(other)) => match other.into_json() {
            Json::Null => {}
            Json::List(calls) => {
                for call in calls {
                    message.tool_calls.push(read_tool_call(call)?);
                }
            }
            other @ Json::Bool
            | other @ Json::Number
            | other @ Json::String(_)
            | other @ Json::Object(_) => return Err(format!("`tool_calls` is a {}", other.kind())),
        },
    }
    message.function_call = match members.function_call.map(read_function) {
        None => None,
        Some(Ok(call)) => Some(call?),
        Some(Err(other)) => match other.into_json() {
            Json::Null => None,
            other @ Json::Bool
            | other @ Json::Number
            | other @ Json::String(_)
            | other @ Json::List(_)
            | other @ Json::Object(_) => {
                return Err(format!("`function_call` is a {}", other.kind()))
            }
        },
    };
    message.tool_call_ids = read_tool_call_ids(members.tool_call_id, members.tool_call_ids)?;
    message.refusal = string_of(members.refusal, "refusal")?;
    message.reasoning = read_reasoning(members.reasoning_content, members.reasoning)?;
    let dropped = &mut message.dropped_fields;
    message.phase = members
        .phase
        .and_then(|phase| string_or_drop(phase, "phase", &"", dropped));
    message.name = members
        .name
        .and_then(|name| string_or_drop(name, "name", &"", dropped));
    message.ignored_fields = super::tree::kept_keys(members.others);
    Ok(())
}

/// A message's `role` (a string), renamed by the rule file's role aliases: the role, and the
/// role as written when an alias renamed it (so that the renaming is audited: a silent rename
/// would be a decision without a trace). A role is read where it is: one of the roles with a
/// name of their own costs no copy (a hot path: samples/BENCHMARKS.md).
#[inline]
pub(crate) fn read_role<N: Tree>(
    role: Option<N>,
    aliases: &RoleAliases,
) -> Result<(Role, Option<String>), String> {
    let role = match role {
        None => None,
        Some(value) => match value.as_str() {
            Some(name) => return Ok(alias_role_of(name, aliases)),
            None => string_at(value, "role")?,
        },
    };
    let role = role.ok_or_else(|| "has no `role`".to_string())?;
    Ok(alias_role(role, aliases))
}

/// `role` after the rule file's role aliases, and the role as written when one renamed it.
pub(crate) fn alias_role(role: String, aliases: &RoleAliases) -> (Role, Option<String>) {
    match aliases.get(&role) {
        Some(alias) => (Role::named(alias.clone()), Some(role)),
        None => (Role::named(role), None),
    }
}

/// [`alias_role`] of a borrowed name: copied only when it is kept.
fn alias_role_of(role: &str, aliases: &RoleAliases) -> (Role, Option<String>) {
    match aliases.get(role) {
        Some(alias) => (Role::named(alias.clone()), Some(role.to_string())),
        None => (Role::of(role), None),
    }
}

/// A message's `content`: missing, `null`, a string, a list of parts or one part (an
/// object); part fields of the wrong type are left out and recorded in `dropped`.
#[inline]
pub(crate) fn read_content<N: Tree>(
    content: Option<N>,
    dropped: &mut Vec<DroppedField>,
) -> Result<Content, String> {
    let Some(content) = content else {
        return Ok(Content::Missing);
    };
    let content = match content.into_items() {
        Ok(parts) => return read_parts(parts, dropped),
        Err(content) => content,
    };
    Ok(match content.into_json() {
        Json::Null => Content::Null,
        Json::String(s) => Content::Text(s),
        Json::List(parts) => return read_parts(parts.into_iter(), dropped),
        single @ Json::Object(_) => Content::Parts(vec![read_part(single, &"content.", dropped)?]),
        other @ Json::Bool | other @ Json::Number => {
            return Err(format!("`content` is a {}", other.kind()))
        }
    })
}

/// A list of content parts, each read by [`read_part`].
fn read_parts<N: Tree>(
    parts: impl Iterator<Item = N>,
    dropped: &mut Vec<DroppedField>,
) -> Result<Content, String> {
    Ok(Content::Parts(
        parts
            .enumerate()
            .map(|(i, part)| read_part(part.into_json(), &PartAt(i), dropped))
            .collect::<Result<Vec<_>, _>>()?,
    ))
}

/// `tool_call_id`, then every id of a `tool_call_ids` list.
fn read_tool_call_ids<N: Tree>(id: Option<N>, ids: Option<N>) -> Result<Vec<String>, String> {
    let mut tool_call_ids = Vec::new();
    if let Some(id) = string_of(id, "tool_call_id")? {
        tool_call_ids.push(id);
    }
    match ids.map(Tree::into_json) {
        None | Some(Json::Null) => {}
        Some(Json::List(ids)) => {
            for id in ids {
                match id.into_json() {
                    Json::String(s) => tool_call_ids.push(s),
                    other @ Json::Null
                    | other @ Json::Bool
                    | other @ Json::Number
                    | other @ Json::List(_)
                    | other @ Json::Object(_) => {
                        return Err(format!("`tool_call_ids` holds a {}", other.kind()))
                    }
                }
            }
        }
        Some(other) => return Err(format!("`tool_call_ids` is a {}", other.kind())),
    }
    Ok(tool_call_ids)
}

/// Plain-text reasoning: `reasoning_content`, or `reasoning` as a string or an object.
fn read_reasoning<N: Tree>(
    reasoning_content: Option<N>,
    reasoning: Option<N>,
) -> Result<Option<String>, String> {
    Ok(match string_of(reasoning_content, "reasoning_content")? {
        Some(r) => Some(r),
        None => match reasoning.map(Tree::into_json) {
            Some(Json::String(s)) => Some(s),
            // A structured reasoning object (e.g. `{"content": "..."}`, `{"text": "..."}`).
            Some(Json::Object(mut o)) => ["content", "text", "summary"]
                .iter()
                .find_map(|k| o.take(k).and_then(|v| v.into_string().ok())),
            _ => None,
        },
    })
}

/// One of `tool_calls`: its keys walked once (the last of a key given twice).
fn read_tool_call<N: Tree>(call: N) -> Result<ToolCall, String> {
    let (mut id, mut kind, mut custom, mut function) = (None, None, None, None);
    call.each_entry(|key, value| {
        let slot = match key {
            "id" => &mut id,
            "type" => &mut kind,
            "custom" => &mut custom,
            "function" => &mut function,
            _ => return,
        };
        *slot = Some(value);
    })
    .map_err(|other| format!("a tool call is a {}", other.into_json().kind()))?;
    let id = string_of(id, "id")?;
    let mut parsed = if kind.as_ref().and_then(Tree::as_str) == Some("custom") {
        let inner = custom.ok_or_else(|| "custom tool call without `custom`".to_string())?;
        let Json::Object(mut c) = inner.into_json() else {
            return Err("`custom` is not an object".to_string());
        };
        let name = take_string(&mut c, "name")?.unwrap_or_default();
        let input = take_string(&mut c, "input")?;
        ToolCall {
            id: None,
            name,
            arguments_missing: input.is_none(),
            arguments: input.unwrap_or_default(),
            arguments_from_object: false,
            custom: true,
        }
    } else {
        let function = function.ok_or_else(|| "tool call without `function`".to_string())?;
        match read_function(function) {
            Ok(call) => call?,
            Err(other) => return Err(format!("`function` is a {}", other.into_json().kind())),
        }
    };
    parsed.id = id;
    Ok(parsed)
}

/// A function call (`{"name", "arguments"}`), its keys walked once; `Err` with the value
/// when it is not an object.
fn read_function<N: Tree>(f: N) -> Result<Result<ToolCall, String>, N> {
    let (mut name, mut arguments) = (None, None);
    f.each_entry(|key, value| match key {
        "name" => name = Some(value),
        "arguments" => arguments = Some(value),
        _ => {}
    })?;
    Ok(function_of(name, arguments))
}

/// [`read_function`]'s call from its `name` and `arguments`.
fn function_of<N: Tree>(name: Option<N>, arguments: Option<N>) -> Result<ToolCall, String> {
    let name =
        string_of(name, "name")?.ok_or_else(|| "function call without `name`".to_string())?;
    let (arguments, from_object, missing) = match arguments {
        None => (String::new(), false, true),
        Some(arguments) if arguments.is_null() => (String::new(), false, true),
        Some(arguments) => match arguments.into_string() {
            Ok(s) => (s, false, false),
            Err(other) => (other.to_json(), true, false),
        },
    };
    Ok(ToolCall {
        id: None,
        name,
        arguments,
        arguments_from_object: from_object,
        arguments_missing: missing,
        custom: false,
    })
}

/// Where a content part is, as a dropped field's path names it (`content[2].`): written only
/// when a field is dropped, not formatted for every part.
struct PartAt(usize);

impl std::fmt::Display for PartAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "content[{}].", self.0)
    }
}

/// One content part; `at` is its path in the message (`content[2].`), for dropped fields.
fn read_part<N: Tree>(
    part: Json<N>,
    at: &dyn std::fmt::Display,
    dropped: &mut Vec<DroppedField>,
) -> Result<Part, String> {
    let mut map = match part {
        Json::String(s) => return Ok(Part::Text(s)),
        Json::Object(map) => map,
        other @ Json::Null | other @ Json::Bool | other @ Json::Number | other @ Json::List(_) => {
            return Err(format!("a content part is a {}", other.kind()))
        }
    };
    let kind_name = map
        .str_of("type")
        .unwrap_or(if map.contains("text") { "text" } else { "" })
        .to_string();
    Ok(match kind_name.as_str() {
        "text" | "input_text" | "output_text" => {
            Part::Text(take_string(&mut map, "text")?.unwrap_or_default())
        }
        "refusal" => Part::Refusal(take_string(&mut map, "refusal")?.unwrap_or_default()),
        "image_url" | "input_image" => {
            let mut url = None;
            let mut detail = take_string_or_drop(&mut map, "detail", at, dropped);
            let file_id = take_string_or_drop(&mut map, "file_id", at, dropped);
            match map.take("image_url").map(Tree::into_json) {
                Some(Json::String(s)) => url = Some(s),
                Some(Json::Object(mut o)) => {
                    url = take_string(&mut o, "url")?;
                    if detail.is_none() {
                        detail = take_string(&mut o, "detail")?;
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
            if let Some(Json::Object(mut o)) = map.take("input_audio").map(Tree::into_json) {
                data = take_string(&mut o, "data")?;
                format = take_string(&mut o, "format")?;
            }
            Part::Audio {
                data,
                format,
                url: take_string_or_drop(&mut map, "audio_url", at, dropped),
                file_id: take_string_or_drop(&mut map, "file_id", at, dropped),
            }
        }
        "file" | "input_file" => {
            let mut filename = take_string_or_drop(&mut map, "filename", at, dropped);
            let mut file_id = take_string_or_drop(&mut map, "file_id", at, dropped);
            let mut data_len = 0;
            if let Some(Json::Object(mut o)) = map.take("file").map(Tree::into_json) {
                filename = filename.or(take_string(&mut o, "filename")?);
                file_id = file_id.or(take_string(&mut o, "file_id")?);
                data_len = o.str_of("file_data").map_or(0, str::len);
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
