//! Chat-style records (Chat Completions, Batch API, evals, trajectories, turn lists) to a
//! [`Transcript`].

use serde_json::{Map, Value};

use super::builder::TranscriptBuilder;
use super::format::{
    FastRead, FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceConversation,
    SourceFormat,
};
use super::messages::{flatten_turns, read_messages};
use super::meta::{read_meta, read_meta_tape, Found};
use super::tree::{Json, TapeNode, TapeObject, Tree};
use super::InputError;
use crate::model::transcript::{Message, RecordMeta, Transcript};
use crate::rules::InputRules;

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
pub(crate) struct ChatReader;

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
pub(crate) fn extract_fast(bytes: &[u8], rules: &InputRules) -> Option<FastRead> {
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
/// the keys stay in the audit's ignored fields.
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::input::messages::{Members, MESSAGE_KEYS};
    use crate::input::parse_record;
    use crate::model::transcript::{Content, Part, Role};
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
