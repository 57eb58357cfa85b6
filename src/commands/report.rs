//! `rollover report diff A B`: what moved between two runs (e.g. before and after a rule
//! change): every outcome count of the summary, decisions by rule, and the conversations whose items changed, compared
//! by the digest of their rollout. Exit 1 when anything moved, so CI can gate a rule change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::audit::report::visible;
use crate::cli::ReportDiffArgs;
use crate::commands::ui::group;
use crate::commands::{json_with_exit, outln, Exit};
use crate::model::quarantine::QuarantineClass;

/// One run as read back: its summary and its conversations by (source, line).
struct Run {
    folder: PathBuf,
    summary: Value,
    conversations: BTreeMap<(String, u64), String>,
}

fn load(path: &Path) -> Result<Run> {
    let folder = if path.join("summary.json").is_file() {
        path.to_path_buf()
    } else {
        path.join("rollover/latest")
    };
    let summary_path = folder.join("summary.json");
    let text = std::fs::read_to_string(&summary_path).with_context(|| {
        format!(
            "reading {} (give a run folder, OUT/rollover/runs/NNNN, or a Codex home)",
            summary_path.display()
        )
    })?;
    let summary: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", summary_path.display()))?;
    let lines_path = folder.join("conversations.jsonl");
    let lines = std::fs::read_to_string(&lines_path)
        .with_context(|| format!("reading {}", lines_path.display()))?;
    let mut conversations = BTreeMap::new();
    for (n, line) in lines.lines().enumerate() {
        let v: Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not JSON", lines_path.display(), n + 1))?;
        let source = v["source"].as_str().unwrap_or_default().to_string();
        let at = v["line"].as_u64().unwrap_or_default();
        let digest = v["digest"].as_str().unwrap_or_default().to_string();
        conversations.insert((source, at), digest);
    }
    Ok(Run {
        folder,
        summary,
        conversations,
    })
}

fn counts(summary: &Value, key: &str) -> BTreeMap<String, i64> {
    summary[key]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// Every key whose count differs, with both counts.
fn moved(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> Vec<(String, i64, i64)> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (a, b) = (
                before.get(k).copied().unwrap_or(0),
                after.get(k).copied().unwrap_or(0),
            );
            (a != b).then(|| (k.clone(), a, b))
        })
        .collect()
}

/// A count that moved: its key, before and after.
#[derive(Serialize)]
struct Moved {
    key: String,
    before: i64,
    after: i64,
}

/// What moved between two runs, as `--json` prints it (every row, none left out).
#[derive(Serialize)]
struct Diff {
    before: String,
    after: String,
    /// Sections of counts: outcomes, decisions by rule and by action, items by type.
    counts: BTreeMap<&'static str, Vec<Moved>>,
    /// Conversations by `source:line`: rollout changed, converted before only, after only.
    conversations: BTreeMap<&'static str, Vec<String>>,
}

impl Diff {
    fn anything(&self) -> bool {
        self.counts.values().any(|rows| !rows.is_empty())
            || self.conversations.values().any(|list| !list.is_empty())
    }
}

/// The count sections, in the order the text shows them.
const COUNT_SECTIONS: [&str; 4] = [
    "outcomes",
    "decisions by rule",
    "decisions by action",
    "items by type",
];

/// The conversation lists, in order, each with the key `--json` gives it.
const CONVERSATION_SECTIONS: [(&str, &str); 3] = [
    ("changed", "conversations whose items changed"),
    ("before_only", "conversations converted before only"),
    ("after_only", "conversations converted after only"),
];

pub fn diff(args: &ReportDiffArgs) -> Result<Exit> {
    let a = load(&args.before)?;
    let b = load(&args.after)?;
    let diff = compare(&a, &b);
    let exit = Exit::findings_if(diff.anything());
    if args.json {
        let out = json_with_exit(&diff, exit).context("writing the JSON diff")?;
        outln!("{out}")?;
        return Ok(exit);
    }
    outln!("before {}\nafter  {}", diff.before, diff.after)?;
    for title in COUNT_SECTIONS {
        let rows = diff
            .counts
            .get(title)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if rows.is_empty() {
            continue;
        }
        outln!("{title}:")?;
        for Moved { key, before, after } in rows {
            outln!(
                "  {}: {} -> {} ({}{})",
                visible(key),
                group_signed(*before),
                group_signed(*after),
                if after >= before { "+" } else { "-" },
                group(after.abs_diff(*before))
            )?;
        }
    }
    for (key, title) in CONVERSATION_SECTIONS {
        let list = diff
            .conversations
            .get(key)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if list.is_empty() {
            continue;
        }
        outln!("{title}: {}", group(list.len() as u64))?;
        for at in list.iter().take(args.max_listed) {
            outln!("  {}", visible(at))?;
        }
        if list.len() > args.max_listed {
            outln!(
                "  +{} more (--json lists all)",
                group((list.len() - args.max_listed) as u64)
            )?;
        }
    }
    if !diff.anything() {
        outln!("nothing moved")?;
    }
    Ok(exit)
}

/// `-1234` → `-1,234`.
fn group_signed(n: i64) -> String {
    let grouped = group(n.unsigned_abs());
    if n < 0 {
        format!("-{grouped}")
    } else {
        grouped
    }
}

/// The summary's fields that are not outcome rows: the run's number and setup, and the
/// counts shown in sections of their own (quarantines by class, below by rule id).
const NOT_OUTCOMES: [&str; 10] = [
    "schema_version",
    "run",
    "sample_rate",
    "shard",
    "merged_shards",
    "decisions",
    "rules_fired",
    "actions",
    "items",
    "quarantine_reasons",
];

/// The outcome rows of a summary: every count it holds (each field but [`NOT_OUTCOMES`]; a
/// list counted by its length, a map by its keys, each row named as `summary.json` names
/// it), so that no field is left out; quarantines by reason class, and those a rule refused
/// by the rule's id instead of as the class `rule`.
fn outcomes(summary: &Value) -> BTreeMap<String, i64> {
    let mut rows = BTreeMap::new();
    let fields = summary.as_object().into_iter().flatten();
    for (field, value) in fields.filter(|(field, _)| !NOT_OUTCOMES.contains(&field.as_str())) {
        match value {
            Value::Number(n) => {
                rows.insert(field.clone(), n.as_i64().unwrap_or(0));
            }
            Value::Array(list) => {
                rows.insert(field.clone(), list.len() as i64);
            }
            Value::Object(map) => {
                for (key, n) in map {
                    if let Some(n) = n.as_i64() {
                        rows.insert(format!("{field}[{key}]"), n);
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::String(_) => {}
        }
    }
    let by_rule = !counts(summary, "quarantine_rules").is_empty();
    for (class, n) in counts(summary, "quarantine_reasons") {
        if !(by_rule && class == QuarantineClass::Rule.name()) {
            rows.insert(format!("quarantine_reasons[{class}]"), n);
        }
    }
    rows
}

fn compare(a: &Run, b: &Run) -> Diff {
    let sections = [
        moved(&outcomes(&a.summary), &outcomes(&b.summary)),
        moved(
            &counts(&a.summary, "rules_fired"),
            &counts(&b.summary, "rules_fired"),
        ),
        moved(
            &counts(&a.summary, "actions"),
            &counts(&b.summary, "actions"),
        ),
        moved(&counts(&a.summary, "items"), &counts(&b.summary, "items")),
    ];
    let counts = COUNT_SECTIONS
        .into_iter()
        .zip(sections)
        .map(|(title, rows)| {
            let rows = rows
                .into_iter()
                .map(|(key, before, after)| Moved { key, before, after })
                .collect();
            (title, rows)
        })
        .collect();

    let mut changed = Vec::new();
    let mut only_before = Vec::new();
    for (key, digest) in &a.conversations {
        match b.conversations.get(key) {
            Some(other) if other != digest => changed.push(key),
            Some(_) => {}
            None => only_before.push(key),
        }
    }
    let only_after: Vec<_> = b
        .conversations
        .keys()
        .filter(|k| !a.conversations.contains_key(*k))
        .collect();
    let named = |list: Vec<&(String, u64)>| -> Vec<String> {
        list.into_iter()
            .map(|(source, line)| format!("{source}:{line}"))
            .collect()
    };
    let lists = [named(changed), named(only_before), named(only_after)];
    let conversations = CONVERSATION_SECTIONS
        .into_iter()
        .zip(lists)
        .map(|((key, _), list)| (key, list))
        .collect();
    Diff {
        before: a.folder.display().to_string(),
        after: b.folder.display().to_string(),
        counts,
        conversations,
    }
}
