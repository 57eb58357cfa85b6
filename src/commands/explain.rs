//! `rollover explain FILE[:LINE]` or `rollover explain OUT SESSION`: one conversation through
//! the converter, shown message by message: the input message (index, role, size), each
//! decision with the rule behind it (repairs and drops marked `!`), and the items it became.
//! The tool a reviewer uses to question a number. The file is read as `convert` reads it
//! ([`crate::pipeline::record::read_file`]: any format, detected or `--from`), so the session id
//! is the one `convert` writes; a Batch API file with the files beside it ([`batch`]). From a
//! home, the session's file and rules are found through the run's folder or the manifest
//! ([`home`]), and its record by the session id, a function of the record's identity, when
//! the file changed since. Sizes and ids only, no transcript text, like the reports.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::json;

use crate::audit::report::visible_lines;
use crate::audit::Decision;
use crate::cli::ExplainArgs;
use crate::commands::ui::conversion::{action_parts, describe, items_from};
use crate::commands::{json_with_exit, load_rules, out, outln, Exit};
use crate::convert::render::renderer;
use crate::convert::{convert, OutItem, RecordKey};
use crate::input::SourceFormat;
use crate::model::quarantine::QuarantineReason;
use crate::model::responses::Format;
use crate::model::transcript::{Content, Message};
use crate::pipeline::record::{read_file, Outcome, ReadConversation, Refusal, WorkRead};
use crate::rules::RuleSet;
use crate::source::{discover, RawRecord};
use crate::validate;

mod batch;
mod home;

pub fn run(args: &ExplainArgs) -> Result<Exit> {
    let from = match args.from.as_deref() {
        Some(name) => Some(
            name.parse::<SourceFormat>()
                .map_err(|e| anyhow::anyhow!("--from: {e}"))?,
        ),
        None => None,
    };
    let (path, line, written, rules) = match &args.session {
        None => {
            let (path, line) = split_line(&args.record);
            (
                path,
                line,
                None,
                load_rules(&args.rules, &args.messages_at)?,
            )
        }
        Some(session) => {
            let found = home::find_session(
                Path::new(&args.record),
                session,
                &args.rules,
                &args.messages_at,
            )?;
            let line = found.written.line;
            (found.path, line, Some(found.written), found.rules)
        }
    };
    let walk = super::named_file_walk(from);
    let found = discover(std::slice::from_ref(&path), None, &walk)
        .with_context(|| format!("explaining {}", path.display()))?;
    let Some(file) = found.files.into_iter().next() else {
        bail!("{} holds no record file", path.display());
    };
    let joined = batch::joined(file, line, &rules, &walk)?;
    let file = &joined.file;
    let (works, damage) = read_file(file, from, &rules, &joined.index);
    let read = Reading {
        display: &file.display,
        key: &file.key,
        rules: &rules,
    };
    let explained = match &written {
        Some(written) => by_session(&works, written, &read, damage)?,
        None => {
            let mut explained = by_line(&works, joined.line, &read, damage)?;
            explained.note = joined.note;
            explained
        }
    };
    let dropped = explained
        .refused
        .as_ref()
        .is_some_and(|r| r.class == DROPPED);
    let exit = Exit::findings_if(
        (explained.refused.is_some() && !dropped) || !explained.violations.is_empty(),
    );
    if args.json {
        let object = json_with_exit(&json!(explained), exit)?;
        outln!("{}", serde_json::to_string_pretty(&object)?)?;
    } else {
        // What the input named (a path, a role, a reason) goes to a terminal as the summary
        // shows it: control and bidi characters escaped.
        out!("{}", visible_lines(&explained.text()))?;
    }
    Ok(exit)
}

/// The class a record convert drops by a rule is shown under: a count of the run, not a
/// finding.
const DROPPED: &str = "dropped";

/// The file read, and the rules it is read with.
struct Reading<'a> {
    display: &'a str,
    /// What keys its session ids, as convert keys them ([`RecordKey::source`]).
    key: &'a str,
    rules: &'a RuleSet,
}

/// The record on `line` of a file read, or with no line the file's first conversation (a
/// session file may start with lines that hold none, a summary), else its first record.
fn by_line(
    works: &[WorkRead],
    line: Option<u64>,
    read: &Reading<'_>,
    damage: Option<crate::source::Damage>,
) -> Result<Explained> {
    let display = read.display;
    if line.is_none() {
        let first = works
            .iter()
            .find_map(|w| w.conversations.first().map(|read| (w, read)));
        if let Some((work, conversation)) = first {
            return Ok(of_conversation(work, conversation, read));
        }
    }
    let Some((work, at)) = record_on(works, line) else {
        if let Some(damage) = damage {
            bail!("{damage} (before the record asked for)");
        }
        match line {
            Some(l) => match nearest_start(works, l) {
                Some(near) => bail!(
                    "{display}: no record starts on line {l}; the nearest record starts on {near}: `rollover explain {display}:{}`",
                    near.line
                ),
                None => bail!("{display}: no record starts on line {l}, and it holds none"),
            },
            None => bail!("{display}: holds no record"),
        }
    };
    Ok(of_record(work, at, read))
}

/// The conversation convert wrote as `written`: the one whose record starts on the line the
/// run's report gives, if it still gives that session; else the one of the file that does,
/// found by its identity (a session id is a function of it), wherever it now is.
fn by_session(
    works: &[WorkRead],
    written: &home::Written,
    read: &Reading<'_>,
    damage: Option<crate::source::Damage>,
) -> Result<Explained> {
    let display = read.display;
    let on_line = written.line.and_then(|line| record_on(works, Some(line)));
    if let Some((work, at)) = on_line {
        let explained = of_record(work, at, read);
        if explained.session_id == written.id {
            return Ok(explained);
        }
    }
    let run = match written.run {
        Some(run) => format!("run {run}"),
        None => "a run whose folder is gone (--keep-runs)".to_string(),
    };
    for work in works {
        for conversation in &work.conversations {
            let mut explained = of_conversation(work, conversation, read);
            if explained.session_id != written.id {
                continue;
            }
            explained.note = Some(match written.line {
                Some(line) => format!(
                    "{display} changed since {run} wrote session {}: its record, found by its identity, now starts at {} (it was line {line})",
                    written.id, explained.record
                ),
                None => format!(
                    "session {} was written by {run}: the manifest names {display}; its record, found by its identity, starts at {}",
                    written.id, explained.record
                ),
            });
            return Ok(explained);
        }
    }
    let damaged = damage
        .map(|d| format!(" (the file is damaged: {d})"))
        .unwrap_or_default();
    bail!(
        "the record of session {} is gone from {display}{damaged}: the file changed since {run} wrote it, and none of its records is that conversation now; the session stays in the home as written (`convert --prune` removes sessions whose record is gone)",
        written.id
    )
}

/// The work and index of the record starting on `line`, or of the file's first record.
fn record_on(works: &[WorkRead], line: Option<u64>) -> Option<(&WorkRead, usize)> {
    works.iter().find_map(|w| {
        let at = w
            .work
            .records
            .iter()
            .position(|(r, _)| line.is_none_or(|l| r.location.line == l))?;
        Some((w, at))
    })
}

/// Where the record starting closest to `line` starts (the earlier one on a tie): a line
/// inside a JSON array's element, or between records, names the record to ask for instead.
fn nearest_start(works: &[WorkRead], line: u64) -> Option<NearestStart> {
    works
        .iter()
        .flat_map(|w| w.work.records.iter().map(|(r, _)| &r.location))
        .min_by_key(|at| (at.line.abs_diff(line), at.line))
        .map(|at| NearestStart {
            line: at.line,
            element: at.element,
        })
}

/// A record's start as a user names it: its line, and its element in a JSON array.
struct NearestStart {
    line: u64,
    element: Option<usize>,
}

impl std::fmt::Display for NearestStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}", self.line)?;
        if let Some(element) = self.element {
            write!(f, " (element {element})")?;
        }
        Ok(())
    }
}

/// The conversation holding the record `at` of `work`, or what became of the record on its own.
fn of_record(work: &WorkRead, at: usize, read: &Reading<'_>) -> Explained {
    let (record, _) = &work.work.records[at];
    let format = work.work.format;
    match (
        work.conversations.iter().find(|c| c.indexes.contains(&at)),
        &work.outcomes[at],
    ) {
        (Some(conversation), _) => of_conversation(work, conversation, read),
        (None, Some(Outcome::Quarantined { entry, .. })) => {
            Explained::refused(record, format, entry.class.name(), entry.reason.clone())
        }
        (None, Some(Outcome::Dropped { rule, what })) => Explained::refused(
            record,
            format,
            DROPPED,
            format!("{what}: it holds no conversation, and convert drops it by rule `{rule}` (counted, no session)"),
        ),
        (None, Some(Outcome::Converted(_) | Outcome::Merged | Outcome::NotSampled) | None) => {
            Explained::refusal(record, format, &Refusal::Unaccounted(format))
        }
    }
}

fn of_conversation(
    work: &WorkRead,
    conversation: &ReadConversation,
    read: &Reading<'_>,
) -> Explained {
    let (first, _) = &work.work.records[conversation.indexes[0]];
    explain(conversation, first, read.key, work.work.format, read.rules)
}

/// `FILE:LINE` → (FILE, LINE); a path whose last part is not a number is all path.
fn split_line(text: &str) -> (PathBuf, Option<u64>) {
    if let Some((path, line)) = text.rsplit_once(':') {
        if let Ok(line) = line.parse::<u64>() {
            return (PathBuf::from(path), Some(line));
        }
    }
    (PathBuf::from(text), None)
}

/// The conversation `read` (its first record `first`) through the converter, as convert
/// converts it: keyed by the file, its decisions by message, the items it became, and the
/// invariants on the written bytes. A conversation the converter refuses shows its input
/// messages and why.
fn explain(
    read: &ReadConversation,
    first: &RawRecord,
    source_key: &str,
    format: SourceFormat,
    rules: &RuleSet,
) -> Explained {
    let transcript = read.transcript.clone();
    let inputs: Vec<InputMessage> = transcript.messages.iter().map(InputMessage::of).collect();
    let key = RecordKey {
        source: source_key,
        record: first.id,
        naming: None,
    };
    let records = read.indexes.len();
    let mut conversation = match convert(transcript, rules, &key) {
        Ok(conversation) => conversation,
        Err(err) => {
            let mut explained = Explained::refusal(first, format, &Refusal::Rule(err));
            explained.records = records;
            explained.messages = inputs
                .into_iter()
                .map(|input| MessageView {
                    input,
                    decisions: Vec::new(),
                    items: Vec::new(),
                })
                .collect();
            return explained;
        }
    };
    let bytes = match renderer(Format::Codex).render(&mut conversation, rules) {
        Ok(bytes) => bytes,
        Err(err) => {
            let mut explained = Explained::refusal(first, format, &Refusal::Rule(err));
            explained.records = records;
            return explained;
        }
    };
    let violations = validate::check(&bytes, Some(&conversation.meta.id), &rules.markers);
    let base = conversation.meta.base_instructions.as_ref();
    Explained {
        note: None,
        record: first.location.to_string(),
        format: format.name().to_string(),
        records,
        session_id: conversation.meta.id.clone(),
        base_instructions_chars: base.map(|b| b.text.chars().count()),
        messages: inputs
            .into_iter()
            .map(|input| {
                let index = Some(input.index);
                MessageView {
                    decisions: decisions_of(&conversation.decisions, index),
                    items: items_of(&conversation.items, index),
                    input,
                }
            })
            .collect(),
        synthesized: SynthesizedView {
            decisions: decisions_of(&conversation.decisions, None),
            items: items_of(&conversation.items, None),
        },
        violations: violations.iter().map(|v| v.to_string()).collect(),
        refused: None,
    }
}

#[derive(Debug, Serialize)]
struct Explained {
    /// How the record was found, when not where it was asked for: said first.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    record: String,
    /// The source format the file was read as.
    format: String,
    /// The records the conversation was read from (several for a session file or a log).
    records: usize,
    session_id: String,
    base_instructions_chars: Option<usize>,
    messages: Vec<MessageView>,
    synthesized: SynthesizedView,
    violations: Vec<String>,
    /// Why the record would be quarantined (or dropped), when it would be.
    refused: Option<RefusedView>,
}

#[derive(Debug, Serialize)]
struct RefusedView {
    class: String,
    reason: String,
}

impl Explained {
    /// A record the pipeline would quarantine for `why`: its class and reason as the
    /// quarantine line writes them (without the location, which `record` gives).
    fn refusal(record: &RawRecord, format: SourceFormat, why: &Refusal) -> Explained {
        Explained::refused(record, format, why.class().name(), why.to_string())
    }

    /// A record that becomes no session: its class and why.
    fn refused(record: &RawRecord, format: SourceFormat, class: &str, reason: String) -> Explained {
        Explained {
            note: None,
            record: record.location.to_string(),
            format: format.name().to_string(),
            records: 1,
            session_id: String::new(),
            base_instructions_chars: None,
            messages: Vec::new(),
            synthesized: SynthesizedView {
                decisions: Vec::new(),
                items: Vec::new(),
            },
            violations: Vec::new(),
            refused: Some(RefusedView {
                class: class.to_string(),
                reason,
            }),
        }
    }
}

#[derive(Debug, Serialize)]
struct InputMessage {
    index: usize,
    role: String,
    chars: usize,
    parts: usize,
    tool_calls: usize,
    /// The item's type, when it is an item read as Codex wrote it (a Codex rollout's).
    #[serde(skip_serializing_if = "Option::is_none")]
    native: Option<&'static str>,
}

impl InputMessage {
    fn of(m: &Message) -> InputMessage {
        let parts = match &m.content {
            Content::Parts(parts) => parts.len(),
            Content::Missing | Content::Null | Content::Text(_) => 0,
        };
        let native = m.native.as_deref();
        InputMessage {
            index: m.index,
            role: m.role.to_string(),
            chars: m.content.texts().iter().map(|t| t.chars().count()).sum(),
            parts,
            tool_calls: m.tool_calls.len() + usize::from(m.function_call.is_some()),
            native: native.map(|n| n.kind),
        }
    }
}

#[derive(Debug, Serialize)]
struct MessageView {
    input: InputMessage,
    decisions: Vec<DecisionView>,
    items: Vec<String>,
}

#[derive(Debug, Serialize)]
struct SynthesizedView {
    decisions: Vec<DecisionView>,
    items: Vec<String>,
}

#[derive(Debug, Serialize)]
struct DecisionView {
    rule: String,
    action: serde_json::Value,
    /// A repair or a drop: anything but a classification.
    changes: bool,
}

fn decisions_of(decisions: &[Decision], message: Option<usize>) -> Vec<DecisionView> {
    decisions
        .iter()
        .filter(|d| d.message == message)
        .map(|d| {
            let mut action = serde_json::to_value(&d.action).unwrap_or(serde_json::Value::Null);
            if let Some(map) = action.as_object_mut() {
                if d.bytes_dropped > 0 {
                    map.insert("bytes_dropped".into(), d.bytes_dropped.into());
                }
                if d.bytes_added > 0 {
                    map.insert("bytes_added".into(), d.bytes_added.into());
                }
            }
            DecisionView {
                rule: d.rule.to_string(),
                action,
                changes: crate::audit::decision::is_repair(d.action.name()),
            }
        })
        .collect()
}

fn items_of(items: &[OutItem], origin: Option<usize>) -> Vec<String> {
    items_from(items, origin).map(describe).collect()
}

impl Explained {
    fn text(&self) -> String {
        let records = match self.records {
            1 => String::new(),
            n => format!(", {n} records"),
        };
        let mut out = self
            .note
            .as_ref()
            .map(|note| format!("{note}\n"))
            .unwrap_or_default();
        out += &if self.session_id.is_empty() {
            format!("{} ({}{records}): no session\n", self.record, self.format)
        } else {
            format!(
                "{} ({}{records}): session {}\n",
                self.record, self.format, self.session_id
            )
        };
        if let Some(chars) = self.base_instructions_chars {
            out.push_str(&format!(
                "base instructions: {chars} chars (session_meta)\n"
            ));
        }
        for m in &self.messages {
            let i = &m.input;
            let mut what = match i.native {
                // Its texts are counted on the item it is written as.
                Some(kind) => format!("{kind}, as Codex wrote it"),
                None => format!("{} chars", i.chars),
            };
            if i.parts > 0 {
                what.push_str(&format!(", {} parts", i.parts));
            }
            match i.tool_calls {
                0 => {}
                1 => what.push_str(", 1 tool call"),
                n => what.push_str(&format!(", {n} tool calls")),
            }
            out.push_str(&format!("[{}] {} ({what})\n", i.index, i.role));
            push_decisions(&mut out, &m.decisions);
            if self.refused.is_none()
                && m.items.is_empty()
                && m.decisions.iter().all(|d| !d.changes)
            {
                out.push_str("    → (no item of its own: see the decisions above)\n");
            }
            for item in &m.items {
                out.push_str(&format!("    → {item}\n"));
            }
        }
        if !self.synthesized.decisions.is_empty() || !self.synthesized.items.is_empty() {
            out.push_str("not from one message:\n");
            push_decisions(&mut out, &self.synthesized.decisions);
            for item in &self.synthesized.items {
                out.push_str(&format!("    → {item}\n"));
            }
        }
        if let Some(refused) = &self.refused {
            out.push_str(&match refused.class.as_str() {
                DROPPED => format!("dropped: {}\n", refused.reason),
                class => format!("quarantined ({class}): {}\n", refused.reason),
            });
            return out;
        }
        match self.violations.len() {
            0 => out.push_str("invariants: all hold\n"),
            n => {
                out.push_str(&format!("invariants: {n} broken\n"));
                for v in &self.violations {
                    out.push_str(&format!("    {v}\n"));
                }
            }
        }
        out
    }
}

fn push_decisions(out: &mut String, decisions: &[DecisionView]) {
    for d in decisions {
        let mark = if d.changes { '!' } else { '=' };
        let (name, details) = action_parts(d.action.clone());
        let details = if details.is_empty() {
            String::new()
        } else {
            format!(" ({})", details.join(", "))
        };
        out.push_str(&format!("  {mark} {name}{details}  [rule {}]\n", d.rule));
    }
}
