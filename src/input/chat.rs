//! Chat-style records (Chat Completions, Batch API, evals, trajectories, turn lists) to a
//! [`Transcript`].

use serde_json::{Map, Value};

use super::builder::TranscriptBuilder;
use super::format::{
    FastRead, FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceConversation,
    SourceFormat,
};
use super::tree::{Json, Object, TapeNode, TapeObject, Tree};
use super::InputError;
use crate::model::time::{epoch_number_to_ms, parse_rfc3339_ms};
use crate::model::transcript::{
    Content, DroppedField, Message, Part, RecordMeta, Role, ToolCall, Transcript,
};
use crate::rules::{InputRules, PathExpr, RoleAliases};

/// Keys of a message that we convert ([`Members::slot`] takes each); anything else is an
/// ignored field.
#[cfg(test)]
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

/// Reads a parsed record as a conversation, moving its strings out of `value`.
pub fn extract(mut value: Value, rules: &InputRules) -> Result<Transcript, InputError> {
    let mut meta = RecordMeta::default();
    let mut tools = Vec::new();
    let (list, path) = match &mut value {
        Value::Array(_) => (std::mem::take(&mut value), "(record)".to_string()),
        Value::Object(map) => {
            if let Some(tag) = rollout_tag(map) {
                return Err(InputError::RolloutLine(tag.to_string()));
            }
            read_meta(&value, rules, &mut meta);
            tools = read_tools(&value);
            let found = rules.messages_at.iter().find_map(|path| {
                let v = path.get(&value)?;
                match v {
                    Value::Array(_) | Value::String(_) => Some(path.clone()),
                    Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => None,
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
        Value::String(text) => vec![user_text(text)],
        Value::Array(items) => flatten_turns(items),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => Vec::new(),
    };
    raw_messages.extend(take_reply(&mut value, rules));
    if raw_messages.is_empty() {
        return Err(InputError::EmptyMessages(path));
    }
    let messages = read_messages(raw_messages, 0, &path, rules)?;
    transcript(kept_keys(value), meta, tools, path, messages)
}

impl SourceFormat {
    /// Chat Completions records, batch files, eval samples, trajectories.
    pub const CHAT: SourceFormat = SourceFormat::named("chat");
}

/// The Chat Completions reader: each record on its own, through [`extract`], with the tape
/// fast path ([`extract_fast`]) for the common record. It detects any parsed record: it is
/// last in detection order, the format of a file no other reader recognises.
pub struct ChatReader;

impl FormatReader for ChatReader {
    fn format(&self) -> SourceFormat {
        SourceFormat::CHAT
    }

    fn describe(&self) -> &'static str {
        "Chat Completions records, batch files, eval samples, trajectories"
    }

    fn granularity(&self) -> Granularity {
        Granularity::Record
    }

    fn detect(&self, first: Option<&Value>, _raw: &[u8]) -> bool {
        first.is_some()
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        let mut read = FileRead::default();
        for record in records {
            match extract(record.value, &context.rules.input) {
                Ok(transcript) => read.conversations.push(SourceConversation {
                    transcript,
                    records: vec![record.index],
                }),
                Err(error) => read.refused.push((record.index, error)),
            }
        }
        read
    }

    fn read_fast(&self, bytes: &[u8], context: &ReadContext<'_>) -> Option<FastRead> {
        extract_fast(bytes, &context.rules.input)
    }
}

/// [`extract`] of the record `bytes` read straight from simd-json's tape, for the common
/// shape: an object whose messages are at a path no other rule path reads into. The messages
/// are read from the tape (`tree::Tree`) and the rest of the record as a `Value` with that path
/// `null`, which is what [`extract`] has once it took the list out. Anything else, and any
/// record whose reading fails, comes back as its `Value` for [`extract`], so that every
/// refusal reads as before; `None` when the parser's careful path must read it (invalid UTF-8
/// or JSON, lone surrogates, deep nesting): then [`super::parse_record`]. Not for a record
/// the batch index would join (the reply is joined into the `Value`).
pub fn extract_fast(bytes: &[u8], rules: &InputRules) -> Option<FastRead> {
    super::parse::with_tape(bytes, |nodes| match read_tape(nodes, rules) {
        Some(mut transcript) => {
            transcript.meta.record_digest = Some(crate::model::identity::tape_digest(nodes));
            Some(FastRead::Read(transcript))
        }
        None => super::parse::tape_value_without(nodes, usize::MAX).map(FastRead::Parsed),
    })
}

/// [`extract_fast`]'s reading, or `None` for [`extract`] to read the record.
fn read_tape(nodes: &[simd_json::Node<'_>], rules: &InputRules) -> Option<Transcript> {
    let root = TapeNode::new(nodes, 0);
    // The record's keys, looked up for every path of the rule file: made once.
    let object = root.object()?;
    let find = |key: &str| object.find(key);
    // The first path that holds a list or a string, as `extract` finds it.
    let (path, list) = rules.messages_at.iter().find_map(|path| {
        let node = path.walk(root, find, TapeNode::get, TapeNode::index)?;
        (node.is_list() || node.is_string()).then_some((path, node))
    })?;
    if reads_into(rules, path) {
        return None;
    }
    // The rest of the record is read where it is, unless it holds a reply to join (a Batch
    // API result appended to its request): that one is read from its `Value`, with the list
    // `null`, which the reply is then taken out of. A reply the tape does not hold, the
    // `Value` does not either (it is the tape with the list `null`).
    let reply = rules.reply_at.iter().any(|path| {
        path.walk(root, find, TapeNode::lookup, TapeNode::index)
            .is_some_and(|node| node.is_object())
    });
    let mut meta = RecordMeta::default();
    let (mut value, tools) = if reply {
        let value = super::parse::tape_value_without(nodes, list.at())?;
        if rollout_tag(value.as_object()?).is_some() {
            return None;
        }
        read_meta(&value, rules, &mut meta);
        let tools = read_tools(&value);
        (Some(value), tools)
    } else {
        if is_rollout_line(&object) {
            return None;
        }
        read_meta_tape(root, &object, rules, &mut meta);
        (None, read_tools_tape(&object)?)
    };
    let path = path.as_str().to_string();
    // The list is walked on the tape, never collected; a list of turns (lists) is read as
    // their messages in order.
    let mut messages = match list.into_items() {
        Ok(items) if items.len() > 0 && items.clone().all(|turn| turn.is_list()) => {
            read_messages(items.flat_map(TapeNode::items), 0, &path, rules).ok()?
        }
        Ok(items) => read_messages(items, 0, &path, rules).ok()?,
        Err(list) => match list.into_json() {
            Json::String(text) => read_messages([user_text(text)], 0, &path, rules).ok()?,
            Json::List(items) => read_messages(items, 0, &path, rules).ok()?,
            Json::Null | Json::Bool | Json::Number | Json::Object(_) => return None,
        },
    };
    if let Some(reply) = value.as_mut().and_then(|value| take_reply(value, rules)) {
        messages.extend(read_messages([reply], messages.len(), &path, rules).ok()?);
    }
    if messages.is_empty() {
        return None;
    }
    let ignored = match value {
        Some(value) => kept_keys(value),
        None => kept_keys_tape(&object, list.at()),
    };
    transcript(ignored, meta, tools, path, messages).ok()
}

/// [`rollout_tag`] of a record on the tape: a rollout line's tag and a `payload`.
fn is_rollout_line(record: &TapeObject<'_>) -> bool {
    let tag = record.find("type").and_then(|tag| tag.as_str());
    tag.is_some_and(|tag| ROLLOUT_TAGS.contains(&tag)) && record.contains("payload")
}

/// The top-level keys of a record whose value is not `null`, once each, in byte order: its
/// `Value`'s, whose map keeps the last of a key given twice. The keys are moved out.
fn kept_keys(value: Value) -> Vec<String> {
    match value {
        Value::Object(map) => map
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(key, _)| key)
            .collect(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            Vec::new()
        }
    }
}

/// [`kept_keys`] of the record on the tape with the value at node `hole` (its messages)
/// read as `null`, as [`super::parse::tape_value_without`] would build it.
fn kept_keys_tape(record: &TapeObject<'_>, hole: usize) -> Vec<String> {
    super::tree::kept_keys(
        record
            .entries()
            .map(|(key, v)| {
                let null = v.at() == hole || matches!(Found::of_tape(v), Found::Null);
                (key, null)
            })
            .collect(),
    )
}

/// A record's bare string of messages: one user message.
fn user_text(text: String) -> Value {
    Value::Object(Map::from_iter([
        ("role".to_string(), Value::String("user".to_string())),
        ("content".to_string(), Value::String(text)),
    ]))
}

/// True when a path [`extract`] reads before it takes the messages out overlaps the messages'
/// `path` (one is a prefix of the other): the rule paths of the record's id, time, model and
/// finished signals, and the record's own `type` and `payload` (a rollout line), `tools`,
/// `functions` and a batch request's `body.tools` and `body.functions`. [`extract_fast`]
/// never builds the messages' `Value`, so it leaves such a record to [`extract`].
fn reads_into(rules: &InputRules, path: &crate::rules::PathExpr) -> bool {
    static OWN: std::sync::OnceLock<Vec<crate::rules::PathExpr>> = std::sync::OnceLock::new();
    let own = OWN.get_or_init(|| {
        [
            "type",
            "payload",
            "tools",
            "functions",
            "body.tools",
            "body.functions",
        ]
        .iter()
        .filter_map(|p| crate::rules::PathExpr::parse(p).ok())
        .collect()
    });
    let mut read = (rules.id_at.iter())
        .chain(&rules.created_at)
        .chain(&rules.model_at)
        .chain(rules.finished.iter().map(|signal| &signal.path))
        .chain(own);
    read.any(|p| p.overlaps(path))
}

/// The record's tag when it is a Codex rollout line: a `type` naming one and a `payload`.
fn rollout_tag(map: &Map<String, Value>) -> Option<&str> {
    match (map.get("type"), map.contains_key("payload")) {
        (Some(Value::String(tag)), true) if ROLLOUT_TAGS.contains(&tag.as_str()) => Some(tag),
        _ => None,
    }
}

/// A Batch API result appended to its request: the assistant's reply, taken out of `value`.
fn take_reply(value: &mut Value, rules: &InputRules) -> Option<Value> {
    if !value.is_object() {
        return None;
    }
    for path in &rules.reply_at {
        if let Some(reply) = path.get_mut(value) {
            if reply.is_object() {
                return Some(std::mem::take(reply));
            }
        }
    }
    None
}

/// The transcript of a record whose messages were read from `path`: `ignored` are its other
/// top-level keys that are not `null` ([`kept_keys`], with the messages taken out).
fn transcript(
    ignored: Vec<String>,
    mut meta: RecordMeta,
    tools: Vec<Value>,
    path: String,
    messages: Vec<Message>,
) -> Result<Transcript, InputError> {
    meta.messages_at = path;
    meta.format = Some(SourceFormat::CHAT);
    let mut built = TranscriptBuilder::with_meta(meta);
    built.tools(tools);
    for key in ignored {
        built.ignore(key);
    }
    built.messages(messages);
    built.finish()
}

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
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            None
        }
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
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Object(_) => {
            false
        }
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

/// [`read_tools`] of a record on the tape: each definition made a `Value` (it is written as
/// given); `None` when one cannot be (the tape is then read the careful way).
fn read_tools_tape(record: &TapeObject<'_>) -> Option<Vec<Value>> {
    let value = |node: TapeNode<'_>| super::parse::tape_value_at(node.nodes(), &mut node.at());
    let body = record.find("body");
    let in_body = |key| body.and_then(|body| body.lookup(key));
    let holders = [
        (record.find("tools"), record.find("functions")),
        (in_body("tools"), in_body("functions")),
    ];
    for (tools, functions) in holders {
        if let Some(tools) = tools.filter(TapeNode::is_list) {
            return tools.items().map(value).collect();
        }
        if let Some(functions) = functions.filter(TapeNode::is_list) {
            return functions
                .items()
                .map(|f| Some(serde_json::json!({"type": "function", "function": value(f)?})))
                .collect();
        }
    }
    Some(Vec::new())
}

/// A list of messages, or a list of turns each a list of messages (flattened in order).
fn flatten_turns(items: Vec<Value>) -> Vec<Value> {
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

pub(crate) fn read_meta(record: &Value, rules: &InputRules, meta: &mut RecordMeta) {
    read_meta_with(
        rules,
        meta,
        |path| path.get(record).map(Found::of_value),
        |path| path.get(record).cloned(),
    );
}

/// [`read_meta`] of a record on the parser's tape: the same paths and the same readings,
/// without the record's `Value` (building it and searching its maps was ~2,000 instructions
/// and 6 allocations a small record).
fn read_meta_tape(
    root: TapeNode<'_>,
    record: &TapeObject<'_>,
    rules: &InputRules,
    meta: &mut RecordMeta,
) {
    let first = |key: &str| record.find(key);
    let find = |path: &PathExpr| path.walk(root, first, TapeNode::lookup, TapeNode::index);
    read_meta_with(
        rules,
        meta,
        |path| find(path).map(Found::of_tape),
        |path| {
            let node = find(path)?;
            super::parse::tape_value_at(node.nodes(), &mut node.at())
        },
    );
}

/// A value a rule path of the record's meta found, as [`read_meta`] reads it.
enum Found<'v> {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(&'v str),
    /// A list or an object.
    Nested,
}

impl<'v> Found<'v> {
    fn of_value(value: &'v Value) -> Found<'v> {
        match value {
            Value::Null => Found::Null,
            Value::Bool(b) => Found::Bool(*b),
            Value::Number(n) => Found::Number(n.clone()),
            Value::String(s) => Found::String(s),
            Value::Array(_) | Value::Object(_) => Found::Nested,
        }
    }

    /// As [`super::parse::tape_value_at`] reads the node: a float that is not finite is null.
    fn of_tape(node: TapeNode<'v>) -> Found<'v> {
        use simd_json::{Node, StaticNode};
        match node.node() {
            None | Some(Node::Static(StaticNode::Null)) => Found::Null,
            Some(Node::Static(StaticNode::Bool(b))) => Found::Bool(b),
            Some(Node::Static(StaticNode::I64(n))) => Found::Number(n.into()),
            Some(Node::Static(StaticNode::U64(n))) => Found::Number(n.into()),
            Some(Node::Static(StaticNode::F64(f))) => {
                serde_json::Number::from_f64(f).map_or(Found::Null, Found::Number)
            }
            Some(Node::String(s)) => Found::String(s),
            Some(Node::Array { .. } | Node::Object { .. }) => Found::Nested,
        }
    }
}

/// The record's id, start time, model and finished signal by the rule paths: `find` reads
/// the value at a path, `value_at` makes it a `Value` (only a finished signal's `equals` that
/// is not a string compares a whole value).
fn read_meta_with<'v>(
    rules: &InputRules,
    meta: &mut RecordMeta,
    find: impl Fn(&PathExpr) -> Option<Found<'v>>,
    value_at: impl Fn(&PathExpr) -> Option<Value>,
) {
    meta.id = rules.id_at.iter().find_map(|p| match find(p)? {
        Found::String(s) => Some(s.to_string()),
        Found::Number(n) => Some(n.to_string()),
        Found::Null | Found::Bool(_) | Found::Nested => None,
    });
    meta.created_ms = rules.created_at.iter().find_map(|p| match find(p)? {
        Found::Number(n) => epoch_number_to_ms(n.as_f64()?),
        Found::String(s) => parse_rfc3339_ms(s),
        Found::Null | Found::Bool(_) | Found::Nested => None,
    });
    meta.model = rules.model_at.iter().find_map(|p| match find(p)? {
        Found::String(s) => Some(s.to_string()),
        Found::Null | Found::Bool(_) | Found::Number(_) | Found::Nested => None,
    });
    meta.finished = rules
        .finished
        .iter()
        .any(|signal| match find(&signal.path) {
            None | Some(Found::Null) => false,
            Some(found) => match &signal.equals {
                None => !matches!(found, Found::Bool(false)),
                Some(expected) => match found {
                    Found::String(s) => s == expected,
                    Found::Null | Found::Bool(_) | Found::Number(_) | Found::Nested => {
                        value_at(&signal.path).is_some_and(|other| {
                            serde_json::from_str::<Value>(expected).is_ok_and(|e| e == other)
                        })
                    }
                },
            },
        });
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
fn read_messages<N: Tree>(
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
        // Read where it is kept: a `Message` built, returned and pushed was copied twice
        // (~400 bytes each time, ~1 % of a small record's time).
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
struct Members<N> {
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
    fn none() -> Members<N> {
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

    /// One walk of `raw`'s keys, or `raw` back when it is not an object. Each key was
    /// searched for before, once for each of the eleven and again for the others: ~1,600
    /// instructions a message, 8 % of a small record.
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
    fn slot(&mut self, key: &str) -> Option<&mut Option<N>> {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::input::parse_record;
    use crate::rules::{PathExpr, RuleSet};

    /// The built-in input rules, and rules whose other paths read into the messages' path.
    fn rule_sets() -> Vec<InputRules> {
        let builtin = RuleSet::builtin().expect("built-in rules").input;
        let path = |p: &str| PathExpr::parse(p).expect("a valid path");
        let mut nested = builtin.clone();
        nested.messages_at = vec![path("a.b[-1]"), path("messages")];
        nested.id_at = vec![path("a.b[0].id"), path("id")];
        nested.model_at = vec![path("messages")];
        let mut finished = builtin.clone();
        finished.finished = vec![crate::rules::FinishedSignal {
            path: path("body"),
            equals: Some(r#"{"messages":null}"#.to_string()),
        }];
        vec![builtin, nested, finished]
    }

    /// What the tape reader made of `text` is what parsing it and `extract` make: the same
    /// transcript (every field, by its debug form), or the same `Value` handed back.
    /// Returns whether the tape reader read it.
    fn agree(text: &str, rules: &InputRules) -> bool {
        let slow = parse_record(text.as_bytes(), true);
        match extract_fast(text.as_bytes(), rules) {
            Some(FastRead::Read(mut fast)) => {
                let (value, repairs) = slow.expect("the tape reader read what cannot be parsed");
                assert_eq!(repairs, 0, "{text}");
                // The record's identity off the tape is its value's.
                let digest = fast.meta.record_digest.take();
                assert_eq!(
                    digest,
                    Some(crate::model::identity::value_digest(&value)),
                    "{text}"
                );
                let slow = extract(value, rules).expect("the tape reader read a refused record");
                assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{text}");
                true
            }
            Some(FastRead::Parsed(value)) => {
                let (slow, repairs) = slow.expect("a value of what cannot be parsed");
                assert_eq!((value, 0), (slow, repairs), "{text}");
                false
            }
            None => false,
        }
    }

    #[test]
    fn common_records_are_read_from_the_tape_as_extract_reads_them() {
        let records = [
            r#"{"id":"c1","model":"gpt-4o","created":1700000000,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"t1","content":"ok"}]}"#,
            r#"{"custom_id":"r1","method":"POST","body":{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:x","detail":"low"}}]}]}}"#,
            r#"{"input":"just a question","ideal":"x"}"#,
            r#"{"id":5,"question":[[{"role":"user","content":"a"}],[{"role":"assistant","content":"b"}]]}"#,
            r#"{"messages":[{"role":"human","content":"alias","x":1,"phase":7,"name":null}],"messages":[{"role":"user","content":"the later key wins","extra":{"y":[]}}],"choices":[{"message":{"role":"assistant","content":"reply"}}]}"#,
            r#"{"messages":[{"role":"assistant","function_call":{"name":"f","arguments":{"b":2,"a":1e300}},"reasoning":{"text":"why"}}]}"#,
        ];
        for rules in rule_sets().iter().take(1) {
            for record in records {
                assert!(agree(record, rules), "not read from the tape: {record}");
            }
        }
    }

    /// The record's meta, tools and ignored keys are read from the tape (no `Value`) unless
    /// it holds a reply to join: either way, as `extract` reads them.
    #[test]
    fn the_rest_of_a_record_is_read_from_the_tape_as_from_its_value() {
        let path = |p: &str| PathExpr::parse(p).expect("a valid path");
        let mut signals = rule_sets()[0].clone();
        signals.finished = vec![
            crate::rules::FinishedSignal {
                path: path("status"),
                equals: Some("done".to_string()),
            },
            crate::rules::FinishedSignal {
                path: path("meta.done"),
                equals: Some("[true, 1.5]".to_string()),
            },
            crate::rules::FinishedSignal {
                path: path("over"),
                equals: None,
            },
        ];
        let records = [
            // Ids as numbers (an integer, a float, a negative one), times as text and floats.
            r#"{"id":1.5,"created":"2025-03-01T10:00:00.250+02:00","model":7,"messages":[{"role":"user","content":"a"}]}"#,
            r#"{"id":-3,"created_at":1700000000.75,"messages":[{"role":"user","content":"a"}]}"#,
            r#"{"custom_id":"q","timestamp":-5,"body":{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]},"messages":[{"role":"user","content":"a"}]}"#,
            // Legacy functions, at the top and in a batch body; tools win over functions.
            r#"{"functions":[{"name":"f","parameters":{}},{"name":"g"}],"messages":[{"role":"user","content":"a"}]}"#,
            r#"{"body":{"functions":[{"name":"g"}]},"tools":[],"messages":[{"role":"user","content":"a"}]}"#,
            r#"{"tools":{"not":"a list"},"body":{"tools":[{"type":"function"}]},"messages":[{"role":"user","content":"a"}]}"#,
            // Keys given twice (the last is kept), null ones, the messages' own key.
            r#"{"z":1,"a":null,"z":null,"b":{},"b":[1],"messages":[{"role":"user","content":"a"}],"c":false}"#,
            r#"{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}],"note":"x"}"#,
            r#"{"body":{"messages":[{"role":"user","content":"a"}],"model":"m"},"id":"r"}"#,
            // Finished signals: a string, a value compared whole, a flag.
            r#"{"status":"done","meta":{"done":[true,1.5]},"messages":[{"role":"assistant","content":"x"}]}"#,
            r#"{"status":"open","meta":{"done":[true,2]},"over":false,"messages":[{"role":"assistant","content":"x"}]}"#,
            r#"{"over":0,"messages":[{"role":"assistant","content":"x"}]}"#,
            // A reply to join: read from the record's Value.
            r#"{"messages":[{"role":"user","content":"q"}],"choices":[{"message":{"role":"assistant","content":"r"},"finish_reason":"stop"}],"id":"x"}"#,
            // A rollout line's tag with no payload is a record like any other.
            r#"{"type":"response_item","messages":[{"role":"user","content":"a"}]}"#,
        ];
        for rules in [&rule_sets()[0], &signals] {
            for record in records {
                assert!(agree(record, rules), "not read from the tape: {record}");
            }
        }
    }

    /// The message read from the tape and from its `Value`, `None` when it was refused.
    fn read_both_ways(message: &str) -> [Result<Message, String>; 2] {
        let rules = &rule_sets()[0];
        let record = format!(r#"{{"messages":[{message}]}}"#);
        let refused = |e: InputError| e.to_string();
        let fast = match extract_fast(record.as_bytes(), rules) {
            Some(FastRead::Read(t)) => Ok(t.messages),
            Some(FastRead::Parsed(value)) => extract(value, rules).map(|t| t.messages),
            None => panic!("the tape did not parse {record}"),
        };
        let (value, _) = parse_record(record.as_bytes(), true).expect("a record");
        let slow = extract(value, rules).map(|t| t.messages);
        [fast, slow].map(|read| read.map_err(refused).map(|mut messages| messages.remove(0)))
    }

    /// A message's keys are walked once: each key the reader converts is taken (the last of
    /// a key given twice), the others are listed as a `Value` keeps them (byte order, once,
    /// not when the last is `null`), and the fields are read in a fixed order.
    #[test]
    fn a_message_is_read_in_one_walk_as_its_value_keeps_it() {
        let mut members = Members::<Value>::none();
        for key in MESSAGE_KEYS {
            assert!(members.slot(key).is_some(), "{key} is not converted");
        }
        for key in [
            "type",
            "Role",
            "roles",
            "",
            "id",
            "tool_call",
            "reasoning_contents",
        ] {
            assert!(members.slot(key).is_none(), "{key} is taken");
        }

        let message = r#"{"role":"user","zeta":1,"alpha":null,"beta":2,"beta":null,"gamma":null,"gamma":[3],"content":"a","role":"assistant","name":5,"phase":[],"content":[{"type":"image_url","detail":3,"image_url":"u"}],"reasoning":"r","reasoning_content":null}"#;
        for read in read_both_ways(message) {
            let read = read.expect("a message");
            assert_eq!(read.role, Role::of("assistant"));
            assert_eq!(read.ignored_fields, ["gamma", "zeta"]);
            assert_eq!(read.reasoning.as_deref(), Some("r"));
            let Content::Parts(parts) = &read.content else {
                panic!("the later content is read: {:?}", read.content);
            };
            assert!(
                matches!(&parts[..], [Part::Image { url: Some(u), detail: None, .. }] if u == "u")
            );
            let dropped: Vec<_> = read
                .dropped_fields
                .iter()
                .map(|d| d.path.as_str())
                .collect();
            assert_eq!(dropped, ["content[0].detail", "phase", "name"]);
        }
        // A tool call's and a function's keys, the last of each kept.
        let message = r#"{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":{"k":1},"name":"g"},"id":"b","type":"function"}],"function_call":{"arguments":null,"name":"h","x":1}}"#;
        for read in read_both_ways(message) {
            let read = read.expect("a message");
            let call = &read.tool_calls[0];
            assert_eq!((call.id.as_deref(), call.name.as_str()), (Some("b"), "g"));
            assert_eq!(
                (call.arguments.as_str(), call.arguments_from_object),
                ("{\"k\":1}", true)
            );
            let legacy = read.function_call.as_ref().expect("the legacy call");
            assert_eq!(
                (legacy.name.as_str(), legacy.arguments_missing),
                ("h", true)
            );
        }
        // The first fault in reading order refuses the message, wherever it is written.
        for (message, problem) in [
            (r#"{"content":5,"tool_calls":1}"#, "has no `role`"),
            (
                r#"{"tool_calls":1,"role":"user","content":5}"#,
                "`content` is a number",
            ),
            (
                r#"{"refusal":1,"tool_call_id":2,"role":"tool"}"#,
                "`tool_call_id` is a number",
            ),
            (
                r#"{"reasoning_content":[],"refusal":1,"role":"user"}"#,
                "`refusal` is a number",
            ),
            (r#"{"role":"user","role":null}"#, "has no `role`"),
            (
                r#"{"role":"assistant","tool_calls":[7]}"#,
                "a tool call is a number",
            ),
            (
                r#"{"role":"assistant","tool_calls":[{"function":5}]}"#,
                "`function` is a number",
            ),
            (
                r#"{"role":"assistant","tool_calls":[{"id":1,"function":5}]}"#,
                "`id` is a number",
            ),
            (
                r#"{"role":"assistant","tool_calls":[{"type":"custom","type":"x"}]}"#,
                "without `function`",
            ),
            (
                r#"{"role":"assistant","tool_calls":[{"type":"custom","function":{}}]}"#,
                "without `custom`",
            ),
            (
                r#"{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}"#,
                "without `name`",
            ),
            (
                r#"{"role":"assistant","function_call":[]}"#,
                "`function_call` is a list",
            ),
        ] {
            for read in read_both_ways(message) {
                let error = read.expect_err(message);
                assert!(error.contains(problem), "{message}: {error}");
            }
        }
    }

    #[test]
    fn records_the_tape_reader_leaves_come_back_as_their_value_or_to_the_parser() {
        let rules = &rule_sets()[0];
        for record in [
            r#"[{"role":"user","content":"a list record"}]"#,
            r#"{"messages":[]}"#,
            r#"{"messages":[{"content":"no role"}]}"#,
            r#"{"type":"response_item","payload":{},"messages":[{"role":"user","content":"x"}]}"#,
            r#"{"traj":[{"role":"user","content":"found by shape"}]}"#,
            r#"{"tools":[],"messages":[[{"role":"user","content":"x"}],{"role":"user"}]}"#,
        ] {
            assert!(!agree(record, rules), "read from the tape: {record}");
        }
        // Repairs, bad JSON and deep nesting are the parser's.
        for record in [r#"{"messages":"\ud800"}"#, r#"{"messages":["#] {
            assert!(extract_fast(record.as_bytes(), rules).is_none());
        }
        let deep = format!(r#"{{"messages":{}{}}}"#, "[".repeat(130), "]".repeat(130));
        assert!(extract_fast(deep.as_bytes(), rules).is_none());
        // A path another rule reads into keeps the record off the tape.
        let nested = &rule_sets()[1];
        let record = r#"{"a":{"b":[[{"role":"user","content":"x"}]]},"messages":[{"role":"user","content":"y"}]}"#;
        assert!(!agree(record, nested));
        let record = r#"{"body":{"messages":[{"role":"user","content":"x"}]}}"#;
        assert!(!agree(record, &rule_sets()[2]));
        assert!(agree(record, rules));
    }

    /// JSON text of a value, keys drawn from the chat reader's, duplicates and nulls and
    /// wrong types included.
    fn json_text() -> impl Strategy<Value = String> {
        let others = "type text image_url url detail file_id input_audio data format audio_url \
            file filename file_data id function arguments custom input summary messages body \
            model created x history question payload tools functions response choices message \
            custom_id a b";
        let keys = MESSAGE_KEYS
            .iter()
            .copied()
            .chain(others.split_whitespace());
        let key = prop::sample::select(keys.collect::<Vec<_>>());
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            Just("1e999".to_string()),
            Just("-0.5".to_string()),
            Just("18446744073709551615".to_string()),
            prop::sample::select(vec![
                "user",
                "assistant",
                "system",
                "tool",
                "human",
                "text",
                "image_url",
                "custom",
                "input_audio",
                "file",
                "refusal",
                "function",
                "response_item",
            ])
            .prop_map(|s| format!("\"{s}\"")),
            "[a-z\"\\\\\n\u{e9}\u{1f600} ]{0,10}".prop_map(|s| Value::String(s).to_string()),
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5)
                    .prop_map(|items| format!("[{}]", items.join(","))),
                prop::collection::vec((key.clone(), inner), 0..7).prop_map(|members| {
                    let members: Vec<String> = members
                        .iter()
                        .map(|(k, v)| format!("\"{k}\":{v}"))
                        .collect();
                    format!("{{{}}}", members.join(","))
                }),
            ]
        })
    }

    /// A JSON string of a few characters, escapes included.
    fn string_text() -> impl Strategy<Value = String> {
        "[a-z\"\\\\\n\u{e9}\u{1f600} ]{0,10}".prop_map(|s| Value::String(s).to_string())
    }

    /// A value of the type the chat reader wants for `field`, its parts as varied as the
    /// reader's branches.
    fn plausible(field: &'static str) -> BoxedStrategy<String> {
        let part = prop_oneof![
            string_text(),
            string_text().prop_map(|t| format!(r#"{{"type":"text","text":{t}}}"#)),
            string_text().prop_map(|t| format!(r#"{{"text":{t},"x":1}}"#)),
            (string_text(), string_text()).prop_map(|(u, d)| {
                format!(
                    r#"{{"type":"image_url","image_url":{{"url":{u},"detail":{d}}},"detail":null}}"#
                )
            }),
            string_text()
                .prop_map(|u| format!(r#"{{"type":"input_image","image_url":{u},"file_id":5}}"#)),
            string_text().prop_map(|d| format!(
                r#"{{"type":"input_audio","input_audio":{{"data":{d},"format":"wav"}}}}"#
            )),
            string_text().prop_map(|d| format!(
                r#"{{"type":"file","file":{{"filename":"f","file_data":{d}}}}}"#
            )),
            string_text().prop_map(|r| format!(r#"{{"type":"refusal","refusal":{r}}}"#)),
            Just(r#"{"type":"video"}"#.to_string()),
            Just("{}".to_string()),
        ];
        let arguments = prop_oneof![string_text(), json_text(), Just("null".to_string())];
        let call = prop_oneof![
            (string_text(), arguments.clone()).prop_map(|(id, a)| {
                format!(
                    r#"{{"id":{id},"type":"function","function":{{"name":"f","arguments":{a}}}}}"#
                )
            }),
            string_text().prop_map(|i| format!(
                r#"{{"type":"custom","custom":{{"name":"c","input":{i}}}}}"#
            )),
        ];
        match field {
            "content" => prop_oneof![
                string_text(),
                Just("null".to_string()),
                prop::collection::vec(part.clone(), 0..4)
                    .prop_map(|p| format!("[{}]", p.join(","))),
                part,
            ]
            .boxed(),
            "tool_calls" => prop::collection::vec(call, 0..3)
                .prop_map(|c| format!("[{}]", c.join(",")))
                .boxed(),
            "function_call" => arguments
                .prop_map(|a| format!(r#"{{"name":"g","arguments":{a}}}"#))
                .boxed(),
            "tool_call_ids" => prop::collection::vec(string_text(), 0..3)
                .prop_map(|ids| format!("[{}]", ids.join(",")))
                .boxed(),
            "reasoning" => prop_oneof![
                string_text(),
                string_text().prop_map(|t| format!(r#"{{"summary":5,"text":{t}}}"#)),
            ]
            .boxed(),
            _ => string_text().boxed(),
        }
    }

    /// A message object: a role and a few fields, mostly of the type the reader wants,
    /// sometimes of any value.
    fn message_text() -> impl Strategy<Value = String> {
        let role = prop::sample::select(vec!["user", "assistant", "system", "tool", "human"]);
        // Every key the reader takes (`role` again: a duplicate), and one it ignores.
        let field = prop::sample::select(
            MESSAGE_KEYS
                .iter()
                .chain(&["x"])
                .copied()
                .collect::<Vec<_>>(),
        );
        let member = field.prop_flat_map(|field| {
            let value = prop_oneof![4 => plausible(field), 1 => json_text().boxed()];
            (Just(field), value)
        });
        (role, prop::collection::vec(member, 0..5)).prop_map(|(role, fields)| {
            let mut members = vec![format!("\"role\":\"{role}\"")];
            members.extend(fields.iter().map(|(k, v)| format!("\"{k}\":{v}")));
            format!("{{{}}}", members.join(","))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any record, shaped like a chat record or not: the tape reader reads what parsing
        /// and `extract` read, or hands the record back.
        #[test]
        fn the_tape_reader_reads_what_extract_reads(
            messages in prop::collection::vec(message_text(), 0..6),
            at in prop::sample::select(vec![
                "messages", "messages", "messages", "messages", "input", "question", "x", "body",
            ]),
            others in prop::collection::vec(json_text(), 0..3),
            other_keys in prop::collection::vec(
                prop::sample::select(vec!["id", "model", "created", "choices", "tools", "messages", "type", "payload"]),
                0..3,
            ),
            turns in any::<bool>(),
            rules in 0usize..3,
        ) {
            let list = if turns {
                format!("[[{}]]", messages.join(","))
            } else {
                format!("[{}]", messages.join(","))
            };
            let mut members = vec![format!("\"{at}\":{list}")];
            members.extend(other_keys.iter().zip(&others).map(|(k, v)| format!("\"{k}\":{v}")));
            let record = format!("{{{}}}", members.join(","));
            agree(&record, &rule_sets()[rules]);
            let body = format!("{{\"body\":{record}}}");
            agree(&body, &rule_sets()[rules]);
        }

        /// Any JSON value as a record.
        #[test]
        fn the_tape_reader_agrees_on_any_json(text in json_text(), rules in 0usize..3) {
            agree(&text, &rule_sets()[rules]);
        }
    }
}
