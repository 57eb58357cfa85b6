//! `rollover explain FILE[:LINE]` or `rollover explain OUT SESSION`: one conversation through
//! the converter, shown message by message: the input message (index, role, size), each
//! decision with the rule behind it (repairs and drops marked `!`), and the items it became.
//! The tool a reviewer uses to question a number. The file is read as `convert` reads it
//! ([`crate::pipeline::record::read_file`]: any format, detected or `--from`), so the session id
//! is the one `convert` writes; from a home, the session's record is found through the run
//! reports and the manifest. Sizes and ids only, no transcript text, like the reports.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::json;

use crate::audit::report::{visible, visible_lines};
use crate::audit::{Action, Decision};
use crate::cli::ExplainArgs;
use crate::commands::ui::conversion::{action_parts, describe, items_from};
use crate::commands::{json_with_exit, load_rules, out, outln, Exit};
use crate::convert::render::renderer;
use crate::convert::{convert, OutItem, RecordKey};
use crate::input::batch::BatchIndex;
use crate::input::SourceFormat;
use crate::model::quarantine::QuarantineReason;
use crate::model::responses::Format;
use crate::model::transcript::{Content, Message};
use crate::output::manifest::Manifest;
use crate::output::Home;
use crate::pipeline::record::{read_file, Outcome, ReadConversation, Refusal};
use crate::rules::RuleSet;
use crate::source::{discover, RawRecord};
use crate::validate;

pub fn run(args: &ExplainArgs) -> Result<Exit> {
    let target = match &args.session {
        None => {
            let (path, line) = split_line(&args.record);
            Target {
                path,
                line,
                from: None,
                rules: args.rules.clone(),
                written: None,
            }
        }
        Some(session) => find_session(Path::new(&args.record), session, &args.rules)?,
    };
    let rules = load_rules(&target.rules, &args.messages_at)?;
    let from = match args.from.as_deref().or(target.from.as_deref()) {
        Some(name) => Some(
            name.parse::<SourceFormat>()
                .map_err(|e| anyhow::anyhow!("--from: {e}"))?,
        ),
        None => None,
    };
    let walk = super::named_file_walk(from);
    let path = &target.path;
    let found = discover(std::slice::from_ref(path), None, &walk)
        .with_context(|| format!("explaining {}", path.display()))?;
    let Some(file) = found.files.first() else {
        bail!("{} holds no record file", path.display());
    };
    let (works, damage) = read_file(file, from, &rules, &BatchIndex::default());
    let Some((work, at)) = works.iter().find_map(|w| {
        let at = w
            .work
            .records
            .iter()
            .position(|(r, _)| target.line.is_none_or(|l| r.location.line == l))?;
        Some((w, at))
    }) else {
        if let Some(damage) = damage {
            bail!("{damage} (before the record asked for)");
        }
        match target.line {
            Some(l) => bail!("{}: no record starts on line {l}", file.display),
            None => bail!("{}: holds no record", file.display),
        }
    };
    let (record, _) = &work.work.records[at];
    let format = work.work.format;
    // The conversation holding the record, or what became of the record on its own.
    let read = work.conversations.iter().find(|c| c.indexes.contains(&at));
    let explained = match (read, &work.outcomes[at]) {
        (Some(read), _) => {
            let (first, _) = &work.work.records[read.indexes[0]];
            explain(read, first, &file.key, format, &rules)
        }
        (None, Some(Outcome::Quarantined { entry, .. })) => {
            Explained::refused(record, format, entry.class.name(), entry.reason.clone())
        }
        (None, Some(Outcome::Dropped { rule, what })) => Explained::refused(
            record,
            format,
            "dropped",
            format!("{what}, dropped by rule `{rule}`: it holds no conversation"),
        ),
        (None, Some(Outcome::Converted(_) | Outcome::Merged | Outcome::NotSampled) | None) => {
            Explained::refusal(record, format, &Refusal::Unaccounted(format))
        }
    };
    let mismatch = target
        .written
        .as_ref()
        .filter(|written| **written != explained.session_id);
    let exit = Exit::findings_if(
        explained.refused.is_some() || !explained.violations.is_empty() || mismatch.is_some(),
    );
    if args.json {
        let object = json_with_exit(&json!(explained), exit)?;
        outln!("{}", serde_json::to_string_pretty(&object)?)?;
    } else {
        // What the input named (a path, a role, a reason) goes to a terminal as the summary
        // shows it: control and bidi characters escaped.
        out!("{}", visible_lines(&explained.text()))?;
        if let Some(written) = mismatch {
            outln!(
                "{}",
                visible(&format!(
                    "note: convert wrote this record as session {written}; read again now it gives {} (the file, the rules or the options changed since)",
                    explained.session_id
                ))
            )?;
        }
    }
    Ok(exit)
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

/// What to explain: a record of a file, and for a session of a home, what convert wrote.
struct Target {
    path: PathBuf,
    line: Option<u64>,
    /// The format the run read the file as.
    from: Option<String>,
    rules: Vec<PathBuf>,
    /// The session id convert wrote for the record.
    written: Option<String>,
}

/// The source record of `session` (an id, or a rollout's path) in the home `out`: the newest
/// run report line that wrote it names the file (as the run was given it) and the line; the
/// manifest gives the file's full path and format; the run's summary its rule files (unless
/// `rules` names others).
fn find_session(out: &Path, session: &str, rules: &[PathBuf]) -> Result<Target> {
    let runs_dir = out.join("rollover").join("runs");
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&runs_dir)
        .with_context(|| {
            format!(
                "{} is not the output folder of a conversion (no rollover/runs): name the --out folder convert wrote",
                out.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    runs.sort();
    // A rollout path names its session at the end of its file name; an id is the id.
    let wanted = Path::new(session)
        .file_name()
        .and_then(|n| n.to_str())
        .map(|n| n.trim_end_matches(".zst").trim_end_matches(".jsonl"))
        .unwrap_or(session);
    for run in runs.iter().rev() {
        let Ok(file) = std::fs::File::open(run.join("conversations.jsonl")) else {
            continue;
        };
        for line in std::io::BufRead::lines(std::io::BufReader::new(file)) {
            let line = line.with_context(|| format!("reading {}", run.display()))?;
            if !line.contains(wanted) && !wanted.contains("rollout-") {
                continue;
            }
            let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let id = entry["id"].as_str().unwrap_or_default();
            if id.is_empty() || !(id == wanted || wanted.ends_with(id)) {
                continue;
            }
            let source = entry["source"].as_str().unwrap_or_default();
            let line_no = entry["line"].as_u64();
            let manifest = Manifest::load(&Home::new(out))
                .with_context(|| format!("reading the manifest of {}", out.display()))?;
            let listed = manifest.files.values().find(|f| f.name == source);
            let path = match listed {
                Some(f) => PathBuf::from(&f.key),
                None => PathBuf::from(source),
            };
            if !path.exists() {
                bail!(
                    "session {id} was converted from {source}, which is no longer at {}: explain it from where the file is now with `rollover explain FILE:{}`",
                    path.display(),
                    line_no.unwrap_or(1)
                );
            }
            let run_rules: Vec<PathBuf> = if rules.is_empty() {
                run_rules(run)
            } else {
                rules.to_vec()
            };
            return Ok(Target {
                path,
                line: line_no,
                from: listed.and_then(|f| f.format.clone()),
                rules: run_rules,
                written: Some(id.to_string()),
            });
        }
    }
    bail!(
        "no run of {} wrote session {session}: give a session id or a rollout path from `rollover status {}`",
        out.display(),
        out.display()
    )
}

/// The rule files a run read (its summary's `rules`; `default` is the built-in set).
fn run_rules(run: &Path) -> Vec<PathBuf> {
    let summary = std::fs::read(run.join("summary.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok());
    summary
        .as_ref()
        .and_then(|s| s["rules"].as_array())
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str())
                .filter(|n| *n != "default")
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default()
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
                changes: !matches!(d.action, Action::Classified { .. }),
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
        let mut out = if self.session_id.is_empty() {
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
            out.push_str(&format!(
                "quarantined ({}): {}\n",
                refused.class, refused.reason
            ));
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
