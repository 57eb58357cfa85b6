//! `rollover report diff A B`: what moved between two runs (e.g. before and after a rule
//! change): outcomes, decisions by rule, and the conversations whose items changed, compared
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

fn compare(a: &Run, b: &Run) -> Diff {
    let outcome_keys = ["records", "converted", "quarantined", "joined"];
    let outcome = |s: &Value| -> BTreeMap<String, i64> {
        outcome_keys
            .iter()
            .map(|k| (k.to_string(), s[*k].as_i64().unwrap_or(0)))
            .chain(
                counts(s, "quarantine_reasons")
                    .into_iter()
                    .map(|(k, v)| (format!("quarantined {k}"), v)),
            )
            .collect()
    };
    let sections = [
        moved(&outcome(&a.summary), &outcome(&b.summary)),
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
