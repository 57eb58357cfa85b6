//! Codex's own rollouts as a source: `$CODEX_HOME/sessions/**/rollout-*.jsonl[.zst]` and
//! `archived_sessions/`, of every generation a user may hold (codex-target.md §10):
//!
//! - **pre-envelope** (mid-2025): a header `{"id", "timestamp", "instructions", "git"?}`,
//!   `{"record_type":"state"}` lines, then bare Responses items;
//! - **legacy envelope** (`{"timestamp","type","payload"}`, `session_meta` first), across its
//!   changes (`instructions` then `base_instructions`, user prompts only in `user_message`
//!   events in older files, `ghost_snapshot` items, reasoning runs, `compacted` lines with or
//!   without a replacement history);
//! - **paginated** (an `ordinal` on every line, `history_mode: "paginated"`).
//!
//! In: every line of one file, in file order (one rollout is one conversation). Out: one
//! [`Transcript`] whose messages each carry one item exactly as Codex wrote it
//! ([`NativeItem`]: ids, `status`, `namespace`, image details and hosted-tool items included),
//! so that the converted session holds the same model-visible history; the session meta's
//! facts (id, start, cwd, git, base instructions, model, CLI version); and a note of what was
//! not written. The session id is kept ([`SourceFormat::CODEX`] keeps session ids): a session
//! read again, from any home or folder, is the same session.
//!
//! What Codex itself keeps out of the model's history is dropped by `policy.codex_line`,
//! counted, never silently: UI events (`event_msg`), `turn_context`, `world_state`, token
//! counts, `ghost_snapshot` items, a pre-envelope file's state lines, system messages, and
//! items Codex cannot parse (an unknown phase, content that is not a list, arguments that are
//! not a string). A user prompt an older file recorded only as a `user_message` event becomes
//! the user message (`builtin.codex-event-prompt`); the turns a `thread_rolled_back` event
//! takes back are left out, as Codex resumes the session (`builtin.codex-rolled-back`). A
//! legacy header's `instructions` are the user's instructions (Codex's own `SessionMeta`
//! says so), given to the rule files as a system message named `codex:instructions` (an
//! AGENTS.md fragment by default), unless the history already holds them. A message with a
//! role Codex would send to the API as it is (and the API refuses) is refused with why; the
//! rest of the session still converts.
//!
//! Memory: the file's lines, held once (a rollout is one conversation); linear time, no
//! recursion on the input's depth (items are moved, not walked).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::builder::TranscriptBuilder;
use super::format::{
    DroppedRecord, FileRead, FormatReader, Granularity, InputRecord, ReadContext,
    SourceConversation, SourceFormat,
};
use super::InputError;
use crate::model::rollout::generation::{
    is_envelope, is_pre_envelope_header, is_uuid, RECORD_TYPE,
};
use crate::model::rollout::wire::{content, event, item, key, tag};
use crate::model::rollout::{NativeItem, NativeRole, Phase};
use crate::model::time::parse_rfc3339_ms;
use crate::model::transcript::{Content, Message, RecordMeta, Role};
use crate::rules::{Builtin, DropOrQuarantine, PolicyId, RuleSet};

pub(crate) struct CodexReader;

impl SourceFormat {
    /// Codex CLI rollouts (~/.codex/sessions), every generation.
    pub const CODEX: SourceFormat = SourceFormat::named("codex")
        .with_global_ids()
        .with_session_ids();
}

const FORMAT: SourceFormat = SourceFormat::CODEX;

/// The name a legacy header's `instructions` carry, for the rule files.
pub(crate) const INSTRUCTIONS_NAME: &str = "codex:instructions";

impl FormatReader for CodexReader {
    fn format(&self) -> SourceFormat {
        FORMAT
    }

    fn describe(&self) -> &'static str {
        "Codex CLI rollouts (~/.codex/sessions): pre-envelope, legacy and paginated"
    }

    fn granularity(&self) -> Granularity {
        Granularity::File
    }

    /// A rollout's first line: a pre-envelope header, or a `session_meta` line (legacy or
    /// paginated). Another rollout line first (a file cut short, or one line of a rollout
    /// pasted into another format's file) is left to that format, which refuses it.
    fn detect(&self, first: Option<&Value>, _raw: &[u8]) -> bool {
        first.and_then(Value::as_object).is_some_and(|object| {
            is_pre_envelope_header(object)
                || (is_envelope(object)
                    && object.get(key::TYPE).and_then(Value::as_str) == Some(tag::SESSION_META))
        })
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        read_rollout(records, context.rules)
    }
}

/// A rollout line: `{"timestamp", "type", "payload"}` (paginated lines add `ordinal`).
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(rename = "type")]
    tag: String,
    payload: Map<String, Value>,
    /// What the line holds besides (`ordinal`, `metadata`): not written.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A `session_meta` payload, or a pre-envelope header: the fields read; the others are
/// named in the audit as not converted.
#[derive(Deserialize, Default)]
struct SessionMeta {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    cli_version: Option<String>,
    #[serde(default)]
    model_provider: Option<String>,
    #[serde(default)]
    base_instructions: Option<BaseInstructions>,
    /// The user's instructions, in headers before `base_instructions` existed.
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    git: Option<Git>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize, Default)]
struct BaseInstructions {
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize, Default)]
struct Git {
    #[serde(default)]
    commit_hash: Option<String>,
    #[serde(default)]
    branch: Option<String>,
    #[serde(default)]
    repository_url: Option<String>,
}

/// A `user_message` event: the UI's copy of a prompt (older files: the only one).
#[derive(Deserialize)]
struct UserMessageEvent {
    message: String,
    #[serde(default)]
    images: Option<Vec<String>>,
}

/// What an item's fields say of its place, read (borrowed) before it is kept whole.
struct ItemHead<'a> {
    kind: &'a str,
    role: Option<&'a str>,
    content: Option<&'a Value>,
    phase: Option<&'a Value>,
    call_id: Option<&'a Value>,
    arguments: Option<&'a Value>,
    output: Option<&'a Value>,
}

impl<'a> ItemHead<'a> {
    /// The head of an item with a string `type`.
    fn of(payload: &'a Map<String, Value>) -> Option<ItemHead<'a>> {
        Some(ItemHead {
            kind: payload.get(key::TYPE)?.as_str()?,
            role: payload.get(key::ROLE).and_then(Value::as_str),
            content: payload.get(key::CONTENT),
            phase: payload.get(key::PHASE),
            call_id: payload.get(key::CALL_ID),
            arguments: payload.get(key::ARGUMENTS),
            output: payload.get(key::OUTPUT),
        })
    }
}

/// One line, read.
enum Line {
    /// The session meta (a pre-envelope header, or the first `session_meta`).
    Meta(Box<SessionMeta>),
    Item(NativeItem),
    /// A `user_message` event: a prompt's UI copy, or in older files the prompt itself.
    Prompt(UserMessageEvent),
    /// A `thread_rolled_back` event: the user took back the last turns, and Codex resumes
    /// without them.
    RolledBack(usize),
    /// Kept out of the model's history by `policy.codex_line`; what it is.
    Dropped(String),
    Refused(InputError),
}

fn refuse(problem: impl Into<String>) -> InputError {
    InputError::NotInFormat {
        format: FORMAT,
        problem: problem.into(),
    }
}

fn dropped(what: impl Into<String>) -> Line {
    Line::Dropped(what.into())
}

/// Reads one rollout file.
pub(crate) fn read_rollout(records: Vec<InputRecord>, rules: &RuleSet) -> FileRead {
    let mut read = FileRead::default();
    let mut reading = Reading::default();
    let mut lines: Vec<(usize, Option<i64>, Line)> = Vec::with_capacity(records.len());
    for record in records {
        reading.repairs += record.repairs;
        let first = lines.is_empty();
        let (time, line) = reading.line(record.value, first, rules);
        lines.push((record.index, time, line));
    }
    let has_real_prompt = lines
        .iter()
        .any(|(_, _, l)| matches!(l, Line::Item(n) if n.role == NativeRole::User));
    let policy = rules.policy.codex_line;
    let mut built = TranscriptBuilder::with_meta(RecordMeta {
        format: Some(FORMAT),
        messages_at: "lines".to_string(),
        ..RecordMeta::default()
    });
    let mut records = Vec::new();
    let mut items = Vec::new();
    for (index, time, line) in lines {
        match line {
            Line::Meta(meta) => {
                records.push(index);
                reading.meta = Some(*meta);
            }
            Line::Item(native) => {
                records.push(index);
                items.push((index, time, native));
            }
            // Older files hold the prompt only here: it is what the model was sent.
            Line::Prompt(event) if !has_real_prompt => {
                records.push(index);
                built.note(
                    Builtin::CodexEventPrompt,
                    "user prompt recorded only as a user_message event",
                    1,
                    0,
                );
                items.push((index, time, prompt_item(event, rules)));
            }
            Line::Prompt(_) => drop_line(&mut read, index, policy, "user_message event"),
            Line::RolledBack(turns) => {
                records.push(index);
                roll_back(&mut items, turns, &mut built);
            }
            Line::Dropped(what) => drop_line(&mut read, index, policy, &what),
            Line::Refused(err) => read.refused.push((index, err)),
        }
    }
    if items.is_empty() {
        // Nothing the model saw: a session opened and left (Codex lists none either).
        for index in records {
            drop_line(&mut read, index, policy, "line of a session with no item");
        }
        return read;
    }
    let meta = reading.meta.take().unwrap_or_default();
    let instructions = leading_messages(&mut built, meta, &items, &reading);
    for message in instructions {
        built.message(message);
    }
    for (_, time, native) in items {
        built.message(Message {
            role: native_role(native.role),
            timestamp_ms: time,
            native: Some(Box::new(native)),
            ..Message::default()
        });
    }
    built.meta.unicode_repairs = reading.repairs;
    for field in reading.ignored {
        built.ignore(field);
    }
    match built.finish() {
        Ok(transcript) => read.conversations.push(SourceConversation {
            transcript,
            records,
        }),
        Err(err) => {
            for index in records {
                read.refused.push((index, err.clone()));
            }
        }
    }
    read
}

/// The event by which the user took back the last turns of a session.
const ROLLED_BACK: &str = "thread_rolled_back";

/// The last `turns` turns taken back, as Codex resumes the session: every item from the
/// `turns`-th last real user message on (all of them when there are fewer turns). Counted,
/// their text as dropped.
fn roll_back(
    items: &mut Vec<(usize, Option<i64>, NativeItem)>,
    turns: usize,
    built: &mut TranscriptBuilder,
) {
    if turns == 0 {
        return;
    }
    let starts: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, (_, _, n))| n.role == NativeRole::User)
        .map(|(at, _)| at)
        .collect();
    let from = starts
        .len()
        .checked_sub(turns)
        .and_then(|k| starts.get(k))
        .or(starts.first())
        .copied()
        .unwrap_or(items.len());
    let taken: Vec<_> = items.drain(from..).collect();
    let bytes = taken.iter().map(|(_, _, n)| n.text_bytes()).sum();
    built.note(
        Builtin::CodexRolledBack,
        "item of a turn the user took back",
        taken.len() as u64,
        bytes,
    );
}

/// A line kept out of the model's history, by `policy.codex_line`.
fn drop_line(read: &mut FileRead, index: usize, policy: DropOrQuarantine, what: &str) {
    match policy {
        DropOrQuarantine::Drop => read.dropped.push(DroppedRecord {
            index,
            rule: PolicyId::CodexLine.into(),
            what: what.to_string(),
        }),
        DropOrQuarantine::Quarantine => read.refused.push((
            index,
            InputError::RefusedByRule {
                rule: PolicyId::CodexLine.into(),
                reason: what.to_string(),
            },
        )),
    }
}

/// The transcript's role for an item (what decides the leading block of instructions).
fn native_role(role: NativeRole) -> Role {
    match role {
        NativeRole::User | NativeRole::ContextualUser | NativeRole::Compacted => Role::User,
        NativeRole::Developer => Role::Developer,
        NativeRole::Assistant
        | NativeRole::Reasoning
        | NativeRole::Call { .. }
        | NativeRole::Standalone => Role::Assistant,
        NativeRole::Output => Role::Tool,
    }
}

/// What reading the lines gathered besides them.
#[derive(Default)]
struct Reading {
    meta: Option<SessionMeta>,
    /// The model of the last `turn_context`.
    model: Option<String>,
    /// Fields read and not written, once each, in the order met.
    ignored: Vec<String>,
    repairs: usize,
}

impl Reading {
    fn ignore(&mut self, field: String) {
        if !self.ignored.contains(&field) {
            self.ignored.push(field);
        }
    }

    /// One record: its time and what it is.
    fn line(&mut self, value: Value, first: bool, rules: &RuleSet) -> (Option<i64>, Line) {
        let Value::Object(object) = value else {
            return (None, Line::Refused(refuse("line is not a JSON object")));
        };
        if first && is_pre_envelope_header(&object) {
            return (None, self.meta(Value::Object(object)));
        }
        if is_envelope(&object) {
            let envelope: Envelope = match serde_json::from_value(Value::Object(object)) {
                Ok(envelope) => envelope,
                Err(err) => return (None, Line::Refused(refuse(format!("bad line: {err}")))),
            };
            let time = envelope.timestamp.as_deref().and_then(parse_rfc3339_ms);
            for name in envelope.rest.keys() {
                self.ignore(format!("line.{name}"));
            }
            return (time, self.envelope(envelope.tag, envelope.payload, rules));
        }
        if object.contains_key(RECORD_TYPE) {
            return (None, dropped("record_type state line"));
        }
        if object.get(key::TYPE).is_some_and(Value::is_string) {
            // A pre-envelope file's items stand bare on their lines.
            return (None, item_line(object, rules));
        }
        (
            None,
            Line::Refused(refuse(
                "neither a rollout line ({timestamp, type, payload}), a pre-envelope header nor a Responses item",
            )),
        )
    }

    fn envelope(&mut self, tag_name: String, payload: Map<String, Value>, rules: &RuleSet) -> Line {
        match tag_name.as_str() {
            tag::SESSION_META if self.meta.is_none() => self.meta(Value::Object(payload)),
            tag::SESSION_META => dropped("session_meta line after the first"),
            tag::RESPONSE_ITEM => item_line(payload, rules),
            tag::COMPACTED => match payload.get(key::MESSAGE) {
                Some(Value::String(_)) => Line::Item(NativeItem::compacted(payload)),
                _ => dropped("compacted line without a string message"),
            },
            tag::EVENT_MSG => {
                let kind = payload.get(key::TYPE).and_then(Value::as_str);
                if kind == Some(ROLLED_BACK) {
                    return match payload.get("num_turns").and_then(Value::as_u64) {
                        Some(turns) => {
                            Line::RolledBack(usize::try_from(turns).unwrap_or(usize::MAX))
                        }
                        None => dropped("thread_rolled_back event without num_turns"),
                    };
                }
                if kind == Some(event::USER_MESSAGE) {
                    if let Ok(prompt) = serde_json::from_value(Value::Object(payload)) {
                        return Line::Prompt(prompt);
                    }
                    return dropped("user_message event without a string message");
                }
                dropped(format!("{} event", kind.unwrap_or("untyped")))
            }
            tag::TURN_CONTEXT => {
                if let Some(model) = payload.get("model").and_then(Value::as_str) {
                    self.model = Some(model.to_string());
                }
                dropped("turn_context line")
            }
            other => dropped(format!("{other} line")),
        }
    }

    fn meta(&mut self, payload: Value) -> Line {
        match serde_json::from_value::<SessionMeta>(payload) {
            Ok(meta) => {
                for name in meta.rest.keys() {
                    self.ignore(format!("session_meta.{name}"));
                }
                Line::Meta(Box::new(meta))
            }
            Err(err) => Line::Refused(refuse(format!("unreadable session_meta: {err}"))),
        }
    }
}

/// A `response_item` payload (or a pre-envelope line): kept whole, in its place, or dropped
/// when Codex would drop it.
fn item_line(payload: Map<String, Value>, rules: &RuleSet) -> Line {
    let place = match ItemHead::of(&payload) {
        Some(head) => head.place(rules),
        None => Err(Line::Refused(refuse("item without a string type"))),
    };
    match place {
        Ok(role) => match NativeItem::item(role, payload) {
            Some(native) => Line::Item(native),
            None => dropped("item of a type Codex does not read"),
        },
        Err(line) => line,
    }
}

impl ItemHead<'_> {
    /// The item's place in the conversation, or the line it is instead (dropped as Codex
    /// would drop it, or refused).
    fn place(&self, rules: &RuleSet) -> Result<NativeRole, Line> {
        let is_string = |v: Option<&Value>| v.is_some_and(Value::is_string);
        match self.kind {
            item::MESSAGE => self.message_place(rules),
            item::REASONING => Ok(NativeRole::Reasoning),
            item::FUNCTION_CALL if !is_string(self.arguments) => Err(dropped(
                "function_call whose arguments are not a string (Codex drops it)",
            )),
            item::FUNCTION_CALL | item::CUSTOM_TOOL_CALL | item::LOCAL_SHELL_CALL
                if !is_string(self.call_id) =>
            {
                if self.kind == item::LOCAL_SHELL_CALL {
                    // Chat-completions era: no call id, nothing to pair.
                    return Ok(NativeRole::Standalone);
                }
                Err(dropped(format!("{} without a string call_id", self.kind)))
            }
            item::FUNCTION_CALL | item::LOCAL_SHELL_CALL => Ok(NativeRole::Call { custom: false }),
            item::CUSTOM_TOOL_CALL => Ok(NativeRole::Call { custom: true }),
            item::FUNCTION_CALL_OUTPUT | item::CUSTOM_TOOL_CALL_OUTPUT => {
                if !is_string(self.call_id) {
                    return Err(dropped(format!("{} without a string call_id", self.kind)));
                }
                match self.output {
                    Some(Value::String(_) | Value::Array(_)) => Ok(NativeRole::Output),
                    _ => Err(dropped(format!(
                        "{} whose output is neither a string nor a list (Codex drops it)",
                        self.kind
                    ))),
                }
            }
            item::GHOST_SNAPSHOT => Err(dropped("ghost_snapshot item")),
            other => match crate::model::rollout::native::known_kind(other) {
                Some(_) => Ok(NativeRole::Standalone),
                None => Err(dropped(format!(
                    "`{other}` item (a type Codex {} drops on resume)",
                    rules.codex_version
                ))),
            },
        }
    }

    fn message_place(&self, rules: &RuleSet) -> Result<NativeRole, Line> {
        let Some(Value::Array(parts)) = self.content else {
            return Err(dropped(
                "message whose content is not a list (Codex drops it)",
            ));
        };
        match self.role {
            Some("user") => {
                let contextual = parts.iter().any(|part| {
                    part.get(key::TYPE).and_then(Value::as_str) == Some(content::INPUT_TEXT)
                        && part
                            .get(key::TEXT)
                            .and_then(Value::as_str)
                            .is_some_and(|text| rules.marker_wrapping(text).is_some())
                });
                Ok(if contextual {
                    NativeRole::ContextualUser
                } else {
                    NativeRole::User
                })
            }
            Some("assistant") => match self.phase {
                None | Some(Value::Null) => Ok(NativeRole::Assistant),
                Some(Value::String(p)) if Phase::parse(p).is_some() => Ok(NativeRole::Assistant),
                Some(other) => Err(dropped(format!(
                    "assistant message with the unknown phase {other} (Codex drops it)"
                ))),
            },
            Some("developer") => Ok(NativeRole::Developer),
            Some("system") => Err(dropped("system message (Codex drops it from the history)")),
            Some(other) => Err(Line::Refused(refuse(format!(
                "message role `{other}`: Codex would send it as it is and the API refuses it"
            )))),
            None => Err(Line::Refused(refuse("message without a string role"))),
        }
    }
}

/// A prompt recorded only as a `user_message` event, as the user message Codex sends now
/// (contextual, as Codex takes it, when its text is wrapped in a registered marker).
fn prompt_item(event: UserMessageEvent, rules: &RuleSet) -> NativeItem {
    let role = if rules.marker_wrapping(&event.message).is_some() {
        NativeRole::ContextualUser
    } else {
        NativeRole::User
    };
    let mut parts = vec![serde_json::json!({"type": content::INPUT_TEXT, "text": event.message})];
    for url in event.images.unwrap_or_default() {
        parts.push(serde_json::json!({"type": content::INPUT_IMAGE, "image_url": url}));
    }
    let mut payload = Map::new();
    payload.insert(key::TYPE.into(), Value::String(item::MESSAGE.into()));
    payload.insert(key::ROLE.into(), Value::String("user".into()));
    payload.insert(key::CONTENT.into(), Value::Array(parts));
    NativeItem {
        role,
        kind: item::MESSAGE,
        payload,
    }
}

/// The session's facts into `built.meta`, and the messages that lead the conversation: the
/// base instructions (a system message, which the rules make the base instructions), then
/// a legacy header's user instructions (named for the rules) when the history does not hold
/// them already.
fn leading_messages(
    built: &mut TranscriptBuilder,
    meta: SessionMeta,
    items: &[(usize, Option<i64>, NativeItem)],
    reading: &Reading,
) -> Vec<Message> {
    let SessionMeta {
        id,
        timestamp,
        cwd,
        cli_version,
        model_provider,
        base_instructions,
        instructions,
        git,
        rest: _,
    } = meta;
    let facts = &mut built.meta;
    facts.source_id = id.filter(|id| is_uuid(id));
    facts.id = facts.source_id.clone();
    facts.created_ms = timestamp
        .as_deref()
        .and_then(parse_rfc3339_ms)
        .or_else(|| items.iter().find_map(|(_, time, _)| *time));
    facts.cwd = cwd
        .filter(|c| !c.is_empty())
        .or_else(|| items.iter().find_map(|(_, _, n)| context_cwd(n)));
    facts.source_version = cli_version;
    facts.model = reading.model.clone();
    let git = git.unwrap_or_default();
    facts.git_branch = git.branch;
    facts.git_commit = git.commit_hash;
    facts.git_repository = git.repository_url;
    if let Some(provider) = model_provider.filter(|p| !p.is_empty()) {
        built.note(
            Builtin::CodexModelProvider,
            &format!("model_provider `{provider}` not written"),
            1,
            0,
        );
    }
    let mut leading = Vec::new();
    if let Some(text) = base_instructions
        .and_then(|b| b.text)
        .filter(|t| !t.is_empty())
    {
        leading.push(Message {
            role: Role::System,
            content: Content::Text(text),
            ..Message::default()
        });
    }
    if let Some(text) = instructions.filter(|t| !t.trim().is_empty()) {
        let held = items
            .iter()
            .any(|(_, _, n)| n.texts().any(|t| t.contains(text.trim())));
        if held {
            built.note(
                Builtin::CodexUserInstructions,
                "header instructions already in the history",
                1,
                text.len(),
            );
        } else {
            leading.push(Message {
                role: Role::System,
                name: Some(INSTRUCTIONS_NAME.to_string()),
                content: Content::Text(text),
                ..Message::default()
            });
        }
    }
    leading
}

/// The working folder an `<environment_context>` fragment names (`<cwd>…</cwd>`): the only
/// place a pre-envelope file says it.
fn context_cwd(native: &NativeItem) -> Option<String> {
    if native.role != NativeRole::ContextualUser {
        return None;
    }
    native.texts().find_map(|text| {
        let start = text.find("<cwd>")? + "<cwd>".len();
        let end = text[start..].find("</cwd>")? + start;
        let cwd = text[start..end].trim();
        (!cwd.is_empty()).then(|| cwd.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    const ID: &str = "0199a213-81c0-7800-8aa1-bbab2a035a53";

    fn read(values: Vec<Value>) -> FileRead {
        let rules = RuleSet::builtin().unwrap();
        crate::input::format::read_values(&CodexReader, values, &rules, Path::new("r.jsonl"))
    }

    fn line(kind: &str, payload: Value) -> Value {
        json!({"timestamp": "2025-10-01T12:00:01.000Z", "type": kind, "payload": payload})
    }

    fn meta() -> Value {
        line(
            "session_meta",
            json!({"id": ID, "timestamp": "2025-10-01T12:00:00.000Z", "cwd": "/p", "originator": "codex_cli_rs",
                   "cli_version": "0.60.1", "model_provider": "openai", "base_instructions": {"text": "BASE"},
                   "git": {"commit_hash": "abc", "branch": "main", "repository_url": "https://x/r"}}),
        )
    }

    fn user(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    }

    #[test]
    fn a_legacy_rollout_keeps_its_items_and_facts_and_drops_ui_lines_by_rule() {
        let values = vec![
            meta(),
            line(
                "response_item",
                user("<environment_context>\n  <cwd>/p</cwd>\n</environment_context>"),
            ),
            line("turn_context", json!({"cwd": "/p", "model": "gpt-5-codex"})),
            line("response_item", user("hi")),
            line(
                "event_msg",
                json!({"type": "user_message", "message": "hi"}),
            ),
            line(
                "response_item",
                json!({"type": "ghost_snapshot", "ghost_commit": {}}),
            ),
            line(
                "response_item",
                json!({"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1", "status": "completed"}),
            ),
            line(
                "response_item",
                json!({"type": "function_call_output", "call_id": "c1", "output": "ok"}),
            ),
            line("event_msg", json!({"type": "token_count", "info": null})),
        ];
        assert!(CodexReader.detect(Some(&values[0]), b""));
        let read = read(values);
        assert!(read.refused.is_empty(), "{:?}", read.refused);
        let dropped: Vec<(usize, &str)> = read
            .dropped
            .iter()
            .map(|d| (d.index, d.what.as_str()))
            .collect();
        assert_eq!(
            dropped,
            [
                (2, "turn_context line"),
                (4, "user_message event"),
                (5, "ghost_snapshot item"),
                (8, "token_count event")
            ]
        );
        assert!(read
            .dropped
            .iter()
            .all(|d| d.rule.as_str() == "policy.codex_line"));
        let c = &read.conversations[0];
        assert_eq!(c.records, [0, 1, 3, 6, 7]);
        let t = &c.transcript;
        assert_eq!(t.meta.source_id.as_deref(), Some(ID));
        assert_eq!(t.meta.cwd.as_deref(), Some("/p"));
        assert_eq!(t.meta.model.as_deref(), Some("gpt-5-codex"));
        assert_eq!(t.meta.git_commit.as_deref(), Some("abc"));
        assert_eq!(t.meta.source_version.as_deref(), Some("0.60.1"));
        let roles: Vec<Option<NativeRole>> = t
            .messages
            .iter()
            .map(|m| m.native.as_ref().map(|n| n.role))
            .collect();
        assert_eq!(
            roles,
            [
                None,
                Some(NativeRole::ContextualUser),
                Some(NativeRole::User),
                Some(NativeRole::Call { custom: false }),
                Some(NativeRole::Output)
            ]
        );
        assert_eq!(t.messages[0].content, Content::Text("BASE".into()));
        // Kept whole: the call's status too.
        assert_eq!(
            t.messages[3].native.as_ref().unwrap().payload["status"],
            "completed"
        );
        assert_eq!(t.note_counts(), [("builtin.codex-model-provider", 1)]);
        assert!(t
            .ignored_fields
            .contains(&"session_meta.originator".to_string()));
    }

    #[test]
    fn prompts_recorded_only_as_events_become_the_user_messages() {
        let values = vec![
            meta(),
            line(
                "event_msg",
                json!({"type": "user_message", "message": "fix it", "images": ["data:image/png;base64,AA"]}),
            ),
            line(
                "response_item",
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}),
            ),
        ];
        let read = read(values);
        let t = &read.conversations[0].transcript;
        let prompt = t.messages[1].native.as_ref().unwrap();
        assert_eq!(prompt.role, NativeRole::User);
        assert_eq!(prompt.joined_text(), "fix it");
        assert_eq!(prompt.image_urls(), ["data:image/png;base64,AA"]);
        assert_eq!(
            t.note_counts(),
            [
                ("builtin.codex-event-prompt", 1),
                ("builtin.codex-model-provider", 1)
            ]
        );
    }

    #[test]
    fn a_pre_envelope_rollout_reads_its_header_and_bare_items() {
        let values = vec![
            json!({"id": ID, "timestamp": "2025-08-13T15:22:56.917Z", "instructions": "Use pnpm.", "git": {"branch": "dev"}}),
            json!({"record_type": "state"}),
            json!({"type": "message", "id": null, "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n<cwd>/home/u/app</cwd>\n</environment_context>"}]}),
            json!({"type": "message", "id": null, "role": "user", "content": [{"type": "input_text", "text": "hello"}]}),
            json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}),
            json!({"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}),
            json!([1]),
        ];
        assert!(CodexReader.detect(Some(&values[0]), b""));
        let read = read(values);
        assert_eq!(read.refused.len(), 1);
        assert_eq!(read.refused[0].0, 6);
        assert_eq!(read.dropped.len(), 1);
        let t = &read.conversations[0].transcript;
        assert_eq!(
            t.meta.created_ms,
            parse_rfc3339_ms("2025-08-13T15:22:56.917Z")
        );
        assert_eq!(t.meta.cwd.as_deref(), Some("/home/u/app"));
        assert_eq!(t.meta.git_branch.as_deref(), Some("dev"));
        // The header's instructions are the user's: named for the rules.
        assert_eq!(t.messages[0].role, Role::System);
        assert_eq!(t.messages[0].name.as_deref(), Some(INSTRUCTIONS_NAME));
        assert_eq!(t.messages.len(), 5);
    }

    #[test]
    fn what_codex_cannot_parse_is_dropped_and_an_unknown_role_refused() {
        let values = vec![
            meta(),
            line(
                "response_item",
                json!({"type": "message", "role": "assistant", "phase": "thinking", "content": [{"type": "output_text", "text": "x"}]}),
            ),
            line(
                "response_item",
                json!({"type": "message", "role": "user", "content": "plain"}),
            ),
            line(
                "response_item",
                json!({"type": "function_call", "name": "f", "arguments": {"a": 1}, "call_id": "c"}),
            ),
            line(
                "response_item",
                json!({"type": "message", "role": "system", "content": []}),
            ),
            line(
                "response_item",
                json!({"type": "message", "role": "tool", "content": []}),
            ),
            line("response_item", json!({"type": "future_item"})),
            line("response_item", user("kept")),
        ];
        let read = read(values);
        assert_eq!(read.dropped.len(), 5, "{:?}", read.dropped);
        assert_eq!(read.refused.len(), 1);
        assert_eq!(read.refused[0].0, 5);
        assert_eq!(read.conversations[0].records, [0, 7]);
    }

    #[test]
    fn a_session_with_no_item_is_dropped_whole() {
        let read = read(vec![
            meta(),
            line("event_msg", json!({"type": "task_started"})),
        ]);
        assert!(read.conversations.is_empty());
        assert_eq!(read.dropped.len(), 2);
    }
}
