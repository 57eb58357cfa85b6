//! Claude Code sessions: `~/.claude/projects/<project>/<session>.jsonl`, subagent files
//! (`<session>/subagents/agent-*.jsonl`, older `agent-*.jsonl`), and the `{"loglines": [...]}`
//! session JSON some tools save.
//!
//! In: every line of one file, in file order (one session is one conversation). Out: the
//! session's [`Transcript`], plus, by `policy.sidechain`, one per subagent; every line is in a
//! conversation, dropped by rule, or refused with why.
//!
//! - Lines of one API response share `message.id`: they are merged in file order, also across
//!   the tool results written between them (parallel calls: the calls first, then every
//!   result, as the model saw them). Content blocks go through the shared Anthropic mapper
//!   ([`super::blocks`]): `tool_use`/`tool_result` become calls and tool messages paired by id,
//!   `is_error` a failed output, images in results output images, `thinking` reasoning with
//!   origin Anthropic (its signature and `redacted_thinking` dropped and counted).
//! - Lines that hold no message (`progress`, `file-history-snapshot`, `queue-operation`,
//!   `system` lines, titles, and any other line type without a `message`) are dropped by
//!   `policy.structural_line` and counted, as are the files beside the sessions that hold no
//!   conversation (`sessions-index.json`, the prompt history `history.jsonl`, a subagent's
//!   `agent-<id>.meta.json`), so that a whole `~/.claude` converts with no quarantine; titles (`summary`, `custom-title`, `ai-title`) are
//!   read first.
//! - Harness lines become user messages named `claude-code:<kind>` for the rule files to
//!   classify: `meta` (`isMeta`), `system-reminder`, `command` (`<command-name>`),
//!   `command-output` (`<local-command-stdout>`), `interrupted` (`[Request interrupted by
//!   user…]`).
//! - `isCompactSummary` lines are compaction summaries (`policy.compaction`).
//! - Sidechains (`isSidechain`: 1.0.x inline lines, 2.x subagent files): `policy.sidechain`.
//!
//! A line that is not a JSON object, or a conversational line whose `message` is unreadable,
//! is refused with a reason naming it; the rest of the session still converts.

mod envelope;

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::blocks::{map_content, Notes};
use super::builder::TranscriptBuilder;
use super::format::{
    DroppedRecord, FileRead, FormatReader, Granularity, InputRecord, MemoryCost, ReadContext,
    SourceConversation, SourceFormat,
};
use super::media::json_kind;
use super::InputError;
use crate::model::time::parse_rfc3339_ms;
use crate::model::transcript::{Message, RecordMeta, Role, SourceNote, Transcript};
use crate::rules::{DropOrQuarantine, PolicyId, RuleSet, Sidechain};
use envelope::{Envelope, MessageField};

pub struct ClaudeCodeReader;

impl SourceFormat {
    /// Claude Code session files (~/.claude/projects/*/*.jsonl).
    pub const CLAUDE_CODE: SourceFormat = SourceFormat::named("claude-code").with_global_ids();
}

const FORMAT: SourceFormat = SourceFormat::CLAUDE_CODE;

/// Line types that hold a conversation message.
const MESSAGE_TYPES: [&str; 2] = ["user", "assistant"];
/// Line types Claude Code writes besides messages (known, so detection recognises them).
const OTHER_TYPES: [&str; 11] = [
    "summary",
    "system",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "custom-title",
    "ai-title",
    "attachment",
    "agent-setting",
    "pr-link",
    "permission-mode",
];
/// The name prefix of harness messages, for rules.
const HARNESS: &str = "claude-code:";

impl FormatReader for ClaudeCodeReader {
    fn format(&self) -> SourceFormat {
        SourceFormat::CLAUDE_CODE
    }

    fn describe(&self) -> &'static str {
        "Claude Code session files (~/.claude/projects/*/*.jsonl)"
    }

    fn granularity(&self) -> Granularity {
        Granularity::File
    }

    fn detect(&self, first: Option<&Value>, _raw: &[u8]) -> bool {
        first.is_some_and(is_session_line)
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        read_session(records, context.rules)
    }

    fn streams(&self) -> bool {
        true
    }

    /// Read a line at a time, its lines compressed while the session converts: the session's
    /// text as messages, items and written lines (~3 bytes a byte), and ~1 KB a line (a
    /// message, an item, a record's place and outcome, two written lines' views). A 100 MB
    /// session of 375-byte lines peaked at 428 MB, one of 260-byte lines at ~6.5 times its
    /// size, one of 8 KB tool results at 298 MB.
    fn memory_cost(&self) -> MemoryCost {
        MemoryCost {
            per_byte: 3,
            per_record: 1 << 10,
        }
    }

    fn read_each(
        &self,
        records: &mut dyn Iterator<Item = InputRecord>,
        context: &ReadContext<'_>,
    ) -> FileRead {
        read_lines(records, context.rules)
    }
}

/// A Claude Code line: a known `type` with the session envelope (`sessionId`, `uuid`,
/// `parentUuid`), a `summary` line with `leafUuid`, or a `{"loglines": [...]}` session.
pub fn is_session_line(value: &Value) -> bool {
    let Some(object) = value.as_object() else {
        return false;
    };
    if is_sessions_index(object) || sidecar(object).is_some() {
        return true;
    }
    if let Some(lines) = object.get("loglines").and_then(Value::as_array) {
        return lines.first().is_some_and(|l| {
            l.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| MESSAGE_TYPES.contains(&t))
        });
    }
    let Some(kind) = object.get("type").and_then(Value::as_str) else {
        return false;
    };
    if kind == "summary" && object.contains_key("leafUuid") {
        return true;
    }
    let known = MESSAGE_TYPES.contains(&kind) || OTHER_TYPES.contains(&kind);
    let envelope = ["sessionId", "uuid", "parentUuid", "messageId"]
        .iter()
        .any(|k| object.contains_key(*k));
    // A line type newer than this reader, with the full session envelope.
    let newer = object.contains_key("sessionId")
        && (object.contains_key("uuid") || object.contains_key("parentUuid"));
    (known && envelope) || newer
}

/// A project's `sessions-index.json` (`{"entries": [{"sessionId", "fullPath", ...}]}`): an index
/// of the session files beside it, not a transcript.
fn is_sessions_index(object: &Map<String, Value>) -> bool {
    object
        .get("entries")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
        .is_some_and(|e| e.get("sessionId").is_some() && e.get("fullPath").is_some())
}

/// The files Claude Code keeps beside its sessions that hold no conversation: the prompt
/// history (`~/.claude/history.jsonl`: `{"display", "pastedContents", "timestamp", "project"}`
/// lines, what was typed, not what was said) and a subagent's `agent-<id>.meta.json` (its
/// `agentType` and settings). What it is, for the count of dropped records.
fn sidecar(object: &Map<String, Value>) -> Option<&'static str> {
    let conversational = ["type", "message", "messages", "loglines"]
        .iter()
        .any(|k| object.contains_key(*k));
    if conversational {
        return None;
    }
    let text = |key: &str| object.get(key).is_some_and(Value::is_string);
    if text("display") && text("project") {
        return Some("prompt history line");
    }
    if text("agentType") {
        return Some("subagent metadata");
    }
    None
}

fn refuse(problem: impl Into<String>) -> InputError {
    InputError::NotInFormat {
        format: FORMAT,
        problem: problem.into(),
    }
}

/// One line, by record index.
struct Line {
    index: usize,
    envelope: Envelope,
}

impl Line {
    /// The line `object` of record `index`, its envelope read.
    fn read(index: usize, object: Map<String, Value>) -> Result<Line, InputError> {
        let envelope =
            Envelope::deserialize(Value::Object(object)).map_err(|e| refuse(e.to_string()))?;
        Ok(Line { index, envelope })
    }
}

/// Reads one session file.
pub fn read_session(records: Vec<InputRecord>, rules: &RuleSet) -> FileRead {
    read_lines(&mut records.into_iter(), rules)
}

/// Reads one session file's records as they come, each line taken into its session and let
/// go before the next is parsed: memory is the conversations read, never every line's parsed
/// JSON at once (short lines held as `Value`s are ~10× their bytes).
fn read_lines(records: &mut dyn Iterator<Item = InputRecord>, rules: &RuleSet) -> FileRead {
    let mut reading = Reading::new(rules);
    // About a message a line: the main session's list made once at its size, not grown by
    // doubling (a message is ~400 bytes, more than a chatty session's line).
    let (_, lines) = records.size_hint();
    reading.main.messages.reserve_exact(lines.unwrap_or(0));
    for record in records {
        reading.repairs += record.repairs;
        match record.value {
            Value::Object(object) if is_sessions_index(&object) => {
                reading.read.dropped.push(DroppedRecord {
                    index: record.index,
                    rule: PolicyId::StructuralLine.into(),
                    what: "sessions-index file".to_string(),
                });
            }
            Value::Object(object) if sidecar(&object).is_some() => {
                reading.read.dropped.push(DroppedRecord {
                    index: record.index,
                    rule: PolicyId::StructuralLine.into(),
                    what: sidecar(&object).unwrap_or_default().to_string(),
                });
            }
            // A `{"loglines": [...]}` record is one session on its own.
            Value::Object(mut object) if object.contains_key("loglines") => {
                match object.remove("loglines") {
                    Some(Value::Array(inner)) => {
                        let bad = inner.iter().enumerate().find(|(_, v)| !v.is_object());
                        if let Some((k, other)) = bad {
                            let err = refuse(format!(
                                "loglines[{k}] is a JSON {}, not a line",
                                json_kind(other)
                            ));
                            reading.read.refused.push((record.index, err));
                            continue;
                        }
                        for value in inner {
                            if let Value::Object(object) = value {
                                reading.read_line(record.index, object);
                            }
                        }
                    }
                    _ => reading
                        .read
                        .refused
                        .push((record.index, refuse("`loglines` is not a list"))),
                }
            }
            Value::Object(object) => reading.read_line(record.index, object),
            other @ Value::Null
            | other @ Value::Bool(_)
            | other @ Value::Number(_)
            | other @ Value::String(_)
            | other @ Value::Array(_) => reading.read.refused.push((
                record.index,
                refuse(format!(
                    "line is a JSON {}, not a session line",
                    json_kind(&other)
                )),
            )),
        }
    }
    reading.finish()
}

/// A session file being read, a line at a time: the main session and each sidechain
/// (subagent run) built as their lines come, in file order.
struct Reading<'r> {
    rules: &'r RuleSet,
    read: FileRead,
    repairs: usize,
    titles: Titles,
    main: SessionBuilder,
    /// Each sidechain: its conversation (`policy.sidechain = "rollout"`) and the first
    /// `sessionId` its lines carry.
    chains: Vec<(Option<SessionBuilder>, Option<String>)>,
    /// The sidechain each sidechain line's `uuid` is in: a line joins the chain holding its
    /// parent, or starts a new one.
    chain_of: HashMap<String, usize>,
}

impl<'r> Reading<'r> {
    fn new(rules: &'r RuleSet) -> Reading<'r> {
        Reading {
            rules,
            read: FileRead::default(),
            repairs: 0,
            titles: Titles::default(),
            main: SessionBuilder::new(),
            chains: Vec::new(),
            chain_of: HashMap::new(),
        }
    }

    /// The line `object` of record `index`, its envelope read (see [`Reading::line`]).
    fn read_line(&mut self, index: usize, object: Map<String, Value>) {
        match Line::read(index, object) {
            Ok(line) => self.line(line),
            Err(err) => self.read.refused.push((index, err)),
        }
    }

    /// One line: into its session, or dropped or refused with why. Lines with no message
    /// give their titles, then are dropped by rule.
    fn line(&mut self, line: Line) {
        let policy = &self.rules.policy;
        let kind = line.envelope.kind.as_deref();
        match kind {
            Some(k) if MESSAGE_TYPES.contains(&k) => {
                if matches!(line.envelope.message, Some(MessageField::Object(_))) {
                    self.conversational(line);
                } else {
                    self.read.refused.push((
                        line.index,
                        refuse(format!("`{k}` line without a `message` object")),
                    ));
                }
            }
            Some(k) if line.envelope.message.is_none() => {
                self.titles.read(k, &line.envelope.rest);
                if policy.structural_line == DropOrQuarantine::Quarantine {
                    self.read.refused.push((
                        line.index,
                        InputError::RefusedByRule {
                            rule: PolicyId::StructuralLine.into(),
                            reason: format!("`{k}` line"),
                        },
                    ));
                } else {
                    self.read.dropped.push(DroppedRecord {
                        index: line.index,
                        rule: PolicyId::StructuralLine.into(),
                        what: format!("{k} line"),
                    });
                }
            }
            Some(k) => self.read.refused.push((
                line.index,
                refuse(format!("unrecognised line type `{k}` with a message")),
            )),
            None => self
                .read
                .refused
                .push((line.index, refuse("line without a string `type`"))),
        }
    }

    /// A line with a message: the main session's, or a sidechain's (dropped, or its own
    /// conversation, by `policy.sidechain`).
    fn conversational(&mut self, line: Line) {
        if !is_sidechain(&line) {
            self.main.push(line, self.rules);
            return;
        }
        let parent = line
            .envelope
            .id("parentUuid")
            .and_then(|p| self.chain_of.get(&p).copied());
        let k = match parent {
            Some(k) => k,
            None => {
                let session = match self.rules.policy.sidechain {
                    Sidechain::Drop => None,
                    Sidechain::Rollout => Some(SessionBuilder::new()),
                };
                self.chains.push((session, None));
                self.chains.len() - 1
            }
        };
        if let Some(id) = line.envelope.id("uuid") {
            self.chain_of.insert(id, k);
        }
        let (session, first_id) = &mut self.chains[k];
        if first_id.is_none() {
            first_id.clone_from(&line.envelope.session_id);
        }
        match session {
            Some(session) => session.push(line, self.rules),
            None => self.read.dropped.push(DroppedRecord {
                index: line.index,
                rule: PolicyId::Sidechain.into(),
                what: "sidechain (subagent) line".to_string(),
            }),
        }
    }

    /// The sessions read: each sidechain kept as its own, then the main one; a session whose
    /// lines hold no message converts to nothing and is refused, with why.
    fn finish(self) -> FileRead {
        let Reading {
            rules,
            mut read,
            repairs,
            titles,
            main,
            chains,
            ..
        } = self;
        let session_id = main
            .meta
            .source_id
            .clone()
            .or_else(|| chains.iter().find_map(|(_, id)| id.clone()));
        let mut sessions = Vec::new();
        for (session, _) in chains {
            if let Some(session) = session {
                let mut session = session.finish(rules, &titles);
                if let Ok(transcript) = &mut session.transcript {
                    transcript.meta.parent_source_id = session_id.clone();
                }
                sessions.push(session);
            }
        }
        if !main.records.is_empty() {
            let mut session = main.finish(rules, &titles);
            if let Ok(transcript) = &mut session.transcript {
                transcript.meta.unicode_repairs = repairs;
            }
            sessions.push(session);
        }
        let mut empty = Vec::new();
        for Session {
            transcript,
            mut records,
        } in sessions
        {
            // A record read as several lines (loglines) is named once.
            records.dedup();
            match transcript {
                _ if records.is_empty() => {}
                Ok(transcript) => read.conversations.push(SourceConversation {
                    transcript,
                    records,
                }),
                Err(_) => empty.extend(records),
            }
        }
        for index in empty {
            let err = InputError::EmptyMessages("session lines".to_string());
            read.refused.push((index, err));
        }
        read
    }
}

/// Titles a session gives itself; a custom title wins over an AI one, both over a summary.
#[derive(Default)]
struct Titles {
    custom: Option<String>,
    ai: Option<String>,
    summary: Option<String>,
}

impl Titles {
    fn read(&mut self, kind: &str, object: &Map<String, Value>) {
        let get = |key: &str| {
            object
                .get(key)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
        };
        match kind {
            "custom-title" => self.custom = get("customTitle").or(self.custom.take()),
            "ai-title" => self.ai = get("aiTitle").or(self.ai.take()),
            "summary" => self.summary = get("summary").or(self.summary.take()),
            _ => {}
        }
    }

    fn best(&self) -> Option<String> {
        self.custom
            .clone()
            .or_else(|| self.ai.clone())
            .or_else(|| self.summary.clone())
    }
}

fn is_sidechain(line: &Line) -> bool {
    line.envelope.flag("isSidechain")
}

/// An assistant response being merged from its lines.
struct Response {
    id: String,
    blocks: Vec<Value>,
    time: Option<i64>,
}

/// One conversation being built from its lines, in file order.
struct SessionBuilder {
    meta: RecordMeta,
    notes: Notes,
    messages: Vec<Message>,
    records: Vec<usize>,
    open: Option<Response>,
    /// Tool results written while a response was still being written.
    deferred: Vec<Message>,
    ignored: HashSet<String>,
}

impl SessionBuilder {
    fn new() -> SessionBuilder {
        SessionBuilder {
            meta: RecordMeta {
                format: Some(FORMAT),
                messages_at: "lines".to_string(),
                ..RecordMeta::default()
            },
            notes: Notes::default(),
            messages: Vec::new(),
            records: Vec::new(),
            open: None,
            deferred: Vec::new(),
            ignored: HashSet::new(),
        }
    }

    /// The next line of the session.
    fn push(&mut self, line: Line, rules: &RuleSet) {
        let policy = &rules.policy;
        let meta = &mut self.meta;
        self.records.push(line.index);
        let envelope = line.envelope;
        let flags = (
            envelope.is_meta == Some(true),
            envelope.flag("isCompactSummary"),
        );
        for (value, slot) in [
            (envelope.cwd, &mut meta.cwd),
            (envelope.git_branch, &mut meta.git_branch),
            (envelope.session_id, &mut meta.source_id),
            (envelope.version, &mut meta.source_version),
        ] {
            if slot.is_none() {
                *slot = value;
            }
        }
        let time = envelope.timestamp.as_deref().and_then(parse_rfc3339_ms);
        if meta.created_ms.is_none() {
            meta.created_ms = time;
        }
        for (key, _) in envelope.rest {
            self.ignored.insert(key);
        }
        let kind = envelope.kind.unwrap_or_default();
        let Some(MessageField::Object(message)) = envelope.message else {
            return;
        };
        let content = message.content;
        if kind == "assistant" {
            if let Some(model) = message.model.filter(|m| m != "<synthetic>") {
                meta.model = Some(model);
            }
            let id = message.id.unwrap_or_else(|| format!("line-{}", line.index));
            let blocks = match content {
                Value::Array(blocks) => blocks,
                Value::Null => Vec::new(),
                other @ Value::Bool(_)
                | other @ Value::Number(_)
                | other @ Value::String(_)
                | other @ Value::Object(_) => vec![other],
            };
            match &mut self.open {
                Some(response) if response.id == id => response.blocks.extend(blocks),
                _ => {
                    self.close(rules);
                    self.open = Some(Response { id, blocks, time });
                }
            }
            return;
        }
        // A user line.
        let mut mapped = user_line(content, flags, policy);
        for m in &mut mapped.0 {
            m.timestamp_ms = time;
        }
        self.notes.merge(mapped.1);
        let only_results = !mapped.0.is_empty() && mapped.0.iter().all(|m| m.role == Role::Tool);
        if only_results && self.open.is_some() {
            self.deferred.extend(mapped.0);
        } else {
            self.close(rules);
            self.messages.extend(mapped.0);
        }
    }

    /// Ends the response being merged: its messages, then the results written meanwhile.
    fn close(&mut self, rules: &RuleSet) {
        if let Some(response) = self.open.take() {
            let mapped = map_content(
                Role::Assistant,
                Value::Array(response.blocks),
                &rules.policy,
            );
            for mut m in mapped.messages {
                m.timestamp_ms = response.time;
                self.messages.push(m);
            }
            self.notes.merge(mapped.notes);
        }
        self.messages.append(&mut self.deferred);
    }

    /// The session's conversation, titled as the file says.
    fn finish(mut self, rules: &RuleSet, titles: &Titles) -> Session {
        self.close(rules);
        let SessionBuilder {
            mut meta,
            notes,
            mut messages,
            records,
            ignored,
            ..
        } = self;
        for m in &mut messages {
            if m.role == Role::Tool {
                m.content = super::media::without_empty_texts(std::mem::take(&mut m.content));
            }
        }
        meta.title = titles.best();
        meta.id = meta.source_id.clone();
        let mut ignored_fields: Vec<String> = ignored.into_iter().collect();
        ignored_fields.sort();
        let mut built = TranscriptBuilder::with_meta(meta);
        built.messages(messages);
        built.notes(notes);
        for field in ignored_fields {
            built.ignore(field);
        }
        Session {
            transcript: built.finish(),
            records,
        }
    }
}

/// A session's conversation (refused when its lines hold no message) and its lines.
struct Session {
    transcript: Result<Transcript, InputError>,
    records: Vec<usize>,
}

/// What kind of harness text a user text is, if it is one.
fn harness_kind(text: &str) -> Option<&'static str> {
    let trimmed = text.trim_start();
    if trimmed.starts_with("<system-reminder>") {
        Some("system-reminder")
    } else if trimmed.starts_with("<command-name>")
        || trimmed.starts_with("<command-message>")
        || trimmed.starts_with("<command-args>")
    {
        Some("command")
    } else if trimmed.starts_with("<local-command-stdout>")
        || trimmed.starts_with("<local-command-stderr>")
        || trimmed.starts_with("<local-command-caveat>")
        || trimmed.starts_with("<bash-stdout>")
        || trimmed.starts_with("<bash-stderr>")
    {
        Some("command-output")
    } else if trimmed.starts_with("[Request interrupted by user") {
        Some("interrupted")
    } else {
        None
    }
}

fn named(mut messages: Vec<Message>, kind: &str) -> Vec<Message> {
    for m in &mut messages {
        if m.role == Role::User {
            m.name = Some(format!("{HARNESS}{kind}"));
        }
    }
    messages
}

/// A user line's content: real user text, harness text (named for the rules), tool results,
/// or a compaction summary.
fn user_line(
    content: Value,
    (meta, compaction): (bool, bool),
    policy: &crate::rules::Policies,
) -> (Vec<Message>, Vec<SourceNote>) {
    if compaction {
        let mapped = map_content(Role::User, content, policy);
        let mut messages = mapped.messages;
        for m in &mut messages {
            if m.role == Role::User {
                m.compaction = true;
            }
        }
        return (messages, mapped.notes.into_vec());
    }
    if meta {
        let mapped = map_content(Role::User, content, policy);
        return (named(mapped.messages, "meta"), mapped.notes.into_vec());
    }
    let blocks = match content {
        Value::String(text) => {
            let kind = harness_kind(&text);
            let mapped = map_content(Role::User, Value::String(text), policy);
            return match kind {
                Some(kind) => (named(mapped.messages, kind), mapped.notes.into_vec()),
                None => (mapped.messages, mapped.notes.into_vec()),
            };
        }
        Value::Array(blocks) => blocks,
        other @ Value::Null
        | other @ Value::Bool(_)
        | other @ Value::Number(_)
        | other @ Value::Object(_) => {
            let mapped = map_content(Role::User, other, policy);
            return (mapped.messages, mapped.notes.into_vec());
        }
    };
    // Harness text blocks become messages of their own, the rest maps in runs.
    let mut messages = Vec::new();
    let mut notes = Vec::new();
    let mut run: Vec<Value> = Vec::new();
    let flush = |run: &mut Vec<Value>, messages: &mut Vec<Message>, notes: &mut Vec<SourceNote>| {
        if !run.is_empty() {
            let mapped = map_content(Role::User, Value::Array(std::mem::take(run)), policy);
            messages.extend(mapped.messages);
            notes.extend(mapped.notes);
        }
    };
    for block in blocks {
        let harness = (block.get("type").and_then(Value::as_str) == Some("text"))
            .then(|| {
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .and_then(harness_kind)
            })
            .flatten();
        match harness {
            Some(kind) => {
                flush(&mut run, &mut messages, &mut notes);
                let mapped = map_content(Role::User, Value::Array(vec![block]), policy);
                messages.extend(named(mapped.messages, kind));
                notes.extend(mapped.notes);
            }
            None => run.push(block),
        }
    }
    flush(&mut run, &mut messages, &mut notes);
    (messages, notes)
}
