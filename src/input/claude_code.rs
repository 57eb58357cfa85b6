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

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::blocks::{map_content, Notes};
use super::builder::TranscriptBuilder;
use super::format::{
    DroppedRecord, FileRead, FormatReader, Granularity, InputRecord, ReadContext,
    SourceConversation, SourceFormat,
};
use super::media::json_kind;
use super::InputError;
use crate::model::time::parse_rfc3339_ms;
use crate::model::transcript::{Message, RecordMeta, Role, SourceNote, Transcript};
use crate::rules::{DropOrQuarantine, PolicyId, RuleSet, Sidechain};

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
    object: Map<String, Value>,
}

/// Reads one session file.
pub fn read_session(records: Vec<InputRecord>, rules: &RuleSet) -> FileRead {
    let mut read = FileRead::default();
    // A `{"loglines": [...]}` record is one session on its own.
    let mut lines: Vec<Line> = Vec::new();
    let mut repairs = 0;
    for record in records {
        repairs += record.repairs;
        match record.value {
            Value::Object(object) if is_sessions_index(&object) => {
                read.dropped.push(DroppedRecord {
                    index: record.index,
                    rule: PolicyId::StructuralLine.into(),
                    what: "sessions-index file".to_string(),
                });
            }
            Value::Object(object) if sidecar(&object).is_some() => {
                read.dropped.push(DroppedRecord {
                    index: record.index,
                    rule: PolicyId::StructuralLine.into(),
                    what: sidecar(&object).unwrap_or_default().to_string(),
                });
            }
            Value::Object(mut object) if object.contains_key("loglines") => {
                match object.remove("loglines") {
                    Some(Value::Array(inner)) => {
                        let objects: Result<Vec<Map<String, Value>>, InputError> = inner
                            .into_iter()
                            .enumerate()
                            .map(|(k, v)| match v {
                                Value::Object(o) => Ok(o),
                                other @ Value::Null
                                | other @ Value::Bool(_)
                                | other @ Value::Number(_)
                                | other @ Value::String(_)
                                | other @ Value::Array(_) => Err(refuse(format!(
                                    "loglines[{k}] is a JSON {}, not a line",
                                    json_kind(&other)
                                ))),
                            })
                            .collect();
                        match objects {
                            Ok(objects) => lines.extend(objects.into_iter().map(|object| Line {
                                index: record.index,
                                object,
                            })),
                            Err(err) => read.refused.push((record.index, err)),
                        }
                    }
                    _ => read
                        .refused
                        .push((record.index, refuse("`loglines` is not a list"))),
                }
            }
            Value::Object(object) => lines.push(Line {
                index: record.index,
                object,
            }),
            other @ Value::Null
            | other @ Value::Bool(_)
            | other @ Value::Number(_)
            | other @ Value::String(_)
            | other @ Value::Array(_) => read.refused.push((
                record.index,
                refuse(format!(
                    "line is a JSON {}, not a session line",
                    json_kind(&other)
                )),
            )),
        }
    }
    let policy = &rules.policy;
    // Lines with no message: titles read, then dropped by rule.
    let mut titles = Titles::default();
    let mut conversational: Vec<Line> = Vec::new();
    for line in lines {
        let kind = line.object.get("type").and_then(Value::as_str);
        match kind {
            Some(k) if MESSAGE_TYPES.contains(&k) => {
                if line.object.get("message").is_some_and(Value::is_object) {
                    conversational.push(line);
                } else {
                    read.refused.push((
                        line.index,
                        refuse(format!("`{k}` line without a `message` object")),
                    ));
                }
            }
            Some(k) if !line.object.contains_key("message") => {
                titles.read(k, &line.object);
                if policy.structural_line == DropOrQuarantine::Quarantine {
                    read.refused.push((
                        line.index,
                        InputError::RefusedByRule {
                            rule: PolicyId::StructuralLine.into(),
                            reason: format!("`{k}` line"),
                        },
                    ));
                } else {
                    read.dropped.push(DroppedRecord {
                        index: line.index,
                        rule: PolicyId::StructuralLine.into(),
                        what: format!("{k} line"),
                    });
                }
            }
            Some(k) => read.refused.push((
                line.index,
                refuse(format!("unrecognised line type `{k}` with a message")),
            )),
            None => read
                .refused
                .push((line.index, refuse("line without a string `type`"))),
        }
    }
    // Sidechains: dropped, or each chain its own conversation.
    let (main, chains) = split_sidechains(conversational);
    let session_id = main
        .iter()
        .chain(chains.iter().flatten())
        .find_map(|l| l.object.get("sessionId").and_then(Value::as_str))
        .map(str::to_string);
    let mut sessions = Vec::new();
    for chain in chains {
        match policy.sidechain {
            Sidechain::Drop => {
                for line in chain {
                    read.dropped.push(DroppedRecord {
                        index: line.index,
                        rule: PolicyId::Sidechain.into(),
                        what: "sidechain (subagent) line".to_string(),
                    });
                }
            }
            Sidechain::Rollout => {
                let mut session = session(chain, rules, &titles);
                if let Ok(transcript) = &mut session.transcript {
                    transcript.meta.parent_source_id = session_id.clone();
                }
                sessions.push(session);
            }
        }
    }
    if !main.is_empty() {
        let mut session = session(main, rules, &titles);
        if let Ok(transcript) = &mut session.transcript {
            transcript.meta.unicode_repairs = repairs;
        }
        sessions.push(session);
    }
    // A session whose lines hold no message at all converts to nothing: refused, with why.
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
    line.object.get("isSidechain").and_then(Value::as_bool) == Some(true)
}

fn uuid(line: &Line, key: &str) -> Option<String> {
    line.object
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The main session's lines, and each sidechain (subagent run) as its own list: a sidechain
/// line joins the chain holding its parent, or starts a new one.
fn split_sidechains(lines: Vec<Line>) -> (Vec<Line>, Vec<Vec<Line>>) {
    let mut main = Vec::new();
    let mut chains: Vec<Vec<Line>> = Vec::new();
    let mut chain_of: HashMap<String, usize> = HashMap::new();
    for line in lines {
        if !is_sidechain(&line) {
            main.push(line);
            continue;
        }
        let parent = uuid(&line, "parentUuid").and_then(|p| chain_of.get(&p).copied());
        let k = match parent {
            Some(k) => k,
            None => {
                chains.push(Vec::new());
                chains.len() - 1
            }
        };
        if let Some(id) = uuid(&line, "uuid") {
            chain_of.insert(id, k);
        }
        chains[k].push(line);
    }
    (main, chains)
}

/// An assistant response being merged from its lines.
struct Response {
    id: String,
    blocks: Vec<Value>,
    time: Option<i64>,
}

/// A session's lines (file order) to one conversation.
fn session(lines: Vec<Line>, rules: &RuleSet, titles: &Titles) -> Session {
    let policy = &rules.policy;
    let mut meta = RecordMeta {
        format: Some(FORMAT),
        title: titles.best(),
        messages_at: "lines".to_string(),
        ..RecordMeta::default()
    };
    let mut notes = Notes::default();
    let mut messages: Vec<Message> = Vec::new();
    let mut records = Vec::new();
    let mut open: Option<Response> = None;
    // Tool results written while a response was still being written.
    let mut deferred: Vec<Message> = Vec::new();
    let mut ignored: HashSet<String> = HashSet::new();
    for mut line in lines {
        records.push(line.index);
        let object = &mut line.object;
        for (key, slot) in [
            ("cwd", &mut meta.cwd),
            ("gitBranch", &mut meta.git_branch),
            ("sessionId", &mut meta.source_id),
            ("version", &mut meta.source_version),
        ] {
            if slot.is_none() {
                *slot = object.get(key).and_then(Value::as_str).map(str::to_string);
            }
        }
        let time = object
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_rfc3339_ms);
        if meta.created_ms.is_none() {
            meta.created_ms = time;
        }
        for key in object.keys() {
            if !ENVELOPE.contains(&key.as_str()) {
                ignored.insert(key.clone());
            }
        }
        let kind = object
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some(Value::Object(mut message)) = object.remove("message") else {
            continue;
        };
        let content = message.remove("content").unwrap_or(Value::Null);
        if kind == "assistant" {
            if let Some(model) = message.get("model").and_then(Value::as_str) {
                if model != "<synthetic>" {
                    meta.model = Some(model.to_string());
                }
            }
            let id = message
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("line-{}", line.index));
            let blocks = match content {
                Value::Array(blocks) => blocks,
                Value::Null => Vec::new(),
                other @ Value::Bool(_)
                | other @ Value::Number(_)
                | other @ Value::String(_)
                | other @ Value::Object(_) => vec![other],
            };
            match &mut open {
                Some(response) if response.id == id => response.blocks.extend(blocks),
                _ => {
                    close(&mut open, &mut deferred, &mut messages, &mut notes, rules);
                    open = Some(Response { id, blocks, time });
                }
            }
            continue;
        }
        // A user line.
        let flags = (
            object.get("isMeta").and_then(Value::as_bool) == Some(true),
            object.get("isCompactSummary").and_then(Value::as_bool) == Some(true),
        );
        let mut mapped = user_line(content, flags, policy);
        for m in &mut mapped.0 {
            m.timestamp_ms = time;
        }
        notes.merge(mapped.1);
        let only_results = !mapped.0.is_empty() && mapped.0.iter().all(|m| m.role == Role::Tool);
        if only_results && open.is_some() {
            deferred.extend(mapped.0);
        } else {
            close(&mut open, &mut deferred, &mut messages, &mut notes, rules);
            messages.extend(mapped.0);
        }
    }
    close(&mut open, &mut deferred, &mut messages, &mut notes, rules);
    for (i, m) in messages.iter_mut().enumerate() {
        m.index = i;
        if m.role == Role::Tool {
            m.content = super::chatgpt::without_empty_texts(std::mem::take(&mut m.content));
        }
    }
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

/// A session's conversation (refused when its lines hold no message) and its lines.
struct Session {
    transcript: Result<Transcript, InputError>,
    records: Vec<usize>,
}

/// Envelope keys read (or deliberately not converted: ids, the CLI-side tool result copy).
const ENVELOPE: [&str; 8] = [
    "type",
    "message",
    "cwd",
    "gitBranch",
    "sessionId",
    "version",
    "timestamp",
    "isMeta",
];

/// Ends the response being merged: its messages, then the results written meanwhile.
fn close(
    open: &mut Option<Response>,
    deferred: &mut Vec<Message>,
    messages: &mut Vec<Message>,
    notes: &mut Notes,
    rules: &RuleSet,
) {
    if let Some(response) = open.take() {
        let mapped = map_content(
            Role::Assistant,
            Value::Array(response.blocks),
            &rules.policy,
        );
        for mut m in mapped.messages {
            m.timestamp_ms = response.time;
            messages.push(m);
        }
        notes.merge(mapped.notes);
    }
    messages.append(deferred);
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
