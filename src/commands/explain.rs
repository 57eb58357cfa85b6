//! `rollover explain FILE[:LINE]`: one record through the converter, shown message by message:
//! the input message (index, role, size), each decision with the rule behind it (repairs and
//! drops marked `!`), and the items it became. The tool a reviewer uses to question a number.
//! Sizes and ids only, no transcript text, like the reports.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::json;

use crate::audit::{Action, Decision};
use crate::cli::ExplainArgs;
use crate::commands::convert::load_rules;
use crate::commands::{out, outln, Exit};
use crate::convert::{convert, ItemKind, OutItem, OutPayload, RecordKey};
use crate::input::{extract, parse_record};
use crate::model::identity::Occurrences;
use crate::model::rollout::{ResponseItem, ToolOutput};
use crate::model::transcript::{Content, Message};
use crate::source::{discover, records, RawRecord, RecordEvent, WalkOptions};
use crate::validate;

pub fn run(args: &ExplainArgs) -> Result<Exit> {
    let rules = load_rules(&args.rules, &args.messages_at)?;
    let (path, line) = split_line(&args.record);
    let walk = WalkOptions {
        hidden: true,
        follow: true,
        stdin_name: "stdin".to_string(),
        filter: Default::default(),
        stop: Default::default(),
    };
    let found = discover(std::slice::from_ref(&path), None, &walk)
        .with_context(|| format!("explaining {}", args.record))?;
    let Some(file) = found.files.first() else {
        bail!("{} holds no record file", path.display());
    };
    let record = find_record(file, line)?;
    let (value, repairs) = parse_record(&record.bytes, true)
        .map_err(|e| anyhow::anyhow!("{}: {e}", record.location))?;
    let mut transcript =
        extract(value, &rules.input).map_err(|e| anyhow::anyhow!("{}: {e}", record.location))?;
    transcript.meta.unicode_repairs = repairs;
    let inputs: Vec<InputMessage> = transcript.messages.iter().map(InputMessage::of).collect();
    let key = RecordKey {
        source: &file.key,
        record: record.id,
    };
    let conversation = convert(transcript, &rules, &key)
        .map_err(|e| anyhow::anyhow!("{}: quarantined: {e}", record.location))?;
    let bytes = conversation.to_bytes();
    let violations = validate::check(&bytes, Some(&conversation.meta.id), &rules.markers);
    let base = conversation.meta.base_instructions.as_ref();
    let explained = Explained {
        record: format!("{}", record.location),
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
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&json!(explained))?)?;
    } else {
        out!("{}", explained.text())?;
    }
    Ok(Exit::findings_if(!violations.is_empty()))
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

/// The record starting on `line` (or the first), with its identity in the file (counted as
/// the reader of `convert` counts it, so the session id is the one convert writes).
fn find_record(file: &crate::source::SourceFile, line: Option<u64>) -> Result<RawRecord> {
    let mut occurrences = Occurrences::default();
    for event in records(file) {
        match event {
            RecordEvent::Record(mut record) => {
                record.id = occurrences.next(&record.bytes);
                if line.is_none_or(|l| record.location.line == l) {
                    return Ok(record);
                }
            }
            RecordEvent::Blank(_) => {}
            RecordEvent::Damage(damage) => bail!("{}: {}", damage.location, damage.message),
        }
    }
    match line {
        Some(l) => bail!("{}: no record starts on line {l}", file.display),
        None => bail!("{}: holds no record", file.display),
    }
}

#[derive(Debug, Serialize)]
struct Explained {
    record: String,
    session_id: String,
    base_instructions_chars: Option<usize>,
    messages: Vec<MessageView>,
    synthesized: SynthesizedView,
    violations: Vec<String>,
}

#[derive(Debug, Serialize)]
struct InputMessage {
    index: usize,
    role: String,
    chars: usize,
    parts: usize,
    tool_calls: usize,
}

impl InputMessage {
    fn of(m: &Message) -> InputMessage {
        let parts = match &m.content {
            Content::Parts(parts) => parts.len(),
            Content::Missing | Content::Null | Content::Text(_) => 0,
        };
        InputMessage {
            index: m.index,
            role: m.role.clone(),
            chars: m.content.texts().iter().map(|t| t.chars().count()).sum(),
            parts,
            tool_calls: m.tool_calls.len() + usize::from(m.function_call.is_some()),
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
                changes: !matches!(d.action, Action::Classified { .. }),
            }
        })
        .collect()
}

fn items_of(items: &[OutItem], origin: Option<usize>) -> Vec<String> {
    items
        .iter()
        .filter(|i| i.origin == origin)
        .map(describe)
        .collect()
}

/// One item in a line: its type, role or kind, ids and sizes.
fn describe(item: &OutItem) -> String {
    let chars = |t: &str| t.chars().count();
    match &item.payload {
        OutPayload::Compacted(text) => format!("compacted ({} chars)", chars(text)),
        OutPayload::CompactedReplacing(text) => {
            format!("compacted, replacing the history ({} chars)", chars(text))
        }
        OutPayload::Item(response) => match response {
            ResponseItem::Message {
                role,
                content,
                phase,
            } => {
                let kind = match item.kind {
                    ItemKind::ContextualUser => "contextual user",
                    ItemKind::RealUser
                    | ItemKind::Developer
                    | ItemKind::Assistant
                    | ItemKind::Reasoning
                    | ItemKind::Call
                    | ItemKind::Output
                    | ItemKind::Compacted => role,
                };
                let parts: Vec<String> = content
                    .iter()
                    .map(|c| match c.text() {
                        Some(t) => format!("{} {} chars", content_type(c), chars(t)),
                        None => content_type(c).to_string(),
                    })
                    .collect();
                let phase = phase
                    .map(|p| format!(", phase {}", p.as_str()))
                    .unwrap_or_default();
                format!("message {kind}: {}{phase}", parts.join(", "))
            }
            ResponseItem::Reasoning {
                content, summary, ..
            } => {
                let n: usize = content
                    .iter()
                    .flatten()
                    .map(|r| chars(&r.text))
                    .sum::<usize>()
                    + summary.iter().map(|s| chars(&s.text)).sum::<usize>();
                format!("reasoning ({n} chars)")
            }
            ResponseItem::FunctionCall {
                name,
                arguments,
                call_id,
            } => format!(
                "function_call {name} (call_id {call_id}, arguments {} chars)",
                chars(arguments)
            ),
            ResponseItem::CustomToolCall {
                name,
                input,
                call_id,
            } => {
                format!(
                    "custom_tool_call {name} (call_id {call_id}, input {} chars)",
                    chars(input)
                )
            }
            ResponseItem::FunctionCallOutput { call_id, output }
            | ResponseItem::CustomToolCallOutput { call_id, output } => {
                let size = match output {
                    ToolOutput::Text(t) => format!("{} chars", chars(t)),
                    ToolOutput::Items(items) => format!("{} content items", items.len()),
                };
                format!("function_call_output (call_id {call_id}, {size})")
            }
        },
    }
}

fn content_type(item: &crate::model::rollout::ContentItem) -> &'static str {
    item.type_name()
}

impl Explained {
    fn text(&self) -> String {
        let mut out = format!("{}: session {}\n", self.record, self.session_id);
        if let Some(chars) = self.base_instructions_chars {
            out.push_str(&format!(
                "base instructions: {chars} chars (session_meta)\n"
            ));
        }
        for m in &self.messages {
            let i = &m.input;
            let mut what = format!("{} chars", i.chars);
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
            if m.items.is_empty() && m.decisions.iter().all(|d| !d.changes) {
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
        let mut action = d.action.clone();
        let name = action
            .as_object_mut()
            .and_then(|m| m.remove("action"))
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let details: Vec<String> = action
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| match v.as_str() {
                        Some(s) => format!("{k} {s}"),
                        None => format!("{k} {v}"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let details = if details.is_empty() {
            String::new()
        } else {
            format!(" ({})", details.join(", "))
        };
        out.push_str(&format!("  {mark} {name}{details}  [rule {}]\n", d.rule));
    }
}
