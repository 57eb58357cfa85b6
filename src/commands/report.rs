//! `rollover report diff A B`: what moved between two runs (e.g. before and after a rule
//! change): outcomes, decisions by rule, and the conversations whose items changed, compared
//! by the digest of their rollout. Exit 1 when anything moved, so CI can gate a rule change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::cli::ReportDiffArgs;
use crate::commands::Exit;

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

pub fn diff(args: &ReportDiffArgs) -> Result<Exit> {
    let a = load(&args.before)?;
    let b = load(&args.after)?;
    println!(
        "before {}\nafter  {}",
        a.folder.display(),
        b.folder.display()
    );
    let mut anything = false;

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
        (
            "outcomes",
            moved(&outcome(&a.summary), &outcome(&b.summary)),
        ),
        (
            "decisions by rule",
            moved(
                &counts(&a.summary, "rules_fired"),
                &counts(&b.summary, "rules_fired"),
            ),
        ),
        (
            "decisions by action",
            moved(
                &counts(&a.summary, "actions"),
                &counts(&b.summary, "actions"),
            ),
        ),
        (
            "items by type",
            moved(&counts(&a.summary, "items"), &counts(&b.summary, "items")),
        ),
    ];
    for (title, rows) in &sections {
        if rows.is_empty() {
            continue;
        }
        anything = true;
        println!("{title}:");
        for (key, before, after) in rows {
            println!("  {key}: {before} -> {after} ({:+})", after - before);
        }
    }

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
    for (title, list) in [
        ("conversations whose items changed", &changed),
        ("conversations converted before only", &only_before),
        ("conversations converted after only", &only_after),
    ] {
        if list.is_empty() {
            continue;
        }
        anything = true;
        println!("{title}: {}", list.len());
        for (source, line) in list.iter().take(args.max_listed) {
            println!("  {source}:{line}");
        }
        if list.len() > args.max_listed {
            println!("  +{} more", list.len() - args.max_listed);
        }
    }
    if !anything {
        println!("nothing moved");
    }
    Ok(Exit::findings_if(anything))
}
