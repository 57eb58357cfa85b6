//! Where a session of a home came from, and the rules that wrote it: the newest run report
//! that lists the session names its file and line; when `--keep-runs` removed that run, the
//! manifest names the file. The rules are the ones the run kept ([`KeptRules`]: its run
//! folder's, else the state folder's copy named by the manifest's rules fingerprint), so the
//! session reads the same from any folder, whatever became of the rule files.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::commands::{load_rules, with_messages_at};
use crate::output::home::{RUNS_DIR, STATE_DIR};
use crate::output::kept_rules::{self, KeptRules};
use crate::output::manifest::{session_id_of, FileEntry, Manifest};
use crate::output::Home;
use crate::rules::RuleSet;

/// A session of a home: the file its record is in, and what convert wrote of it.
pub(super) struct HomeSession {
    pub path: PathBuf,
    pub written: Written,
    pub rules: RuleSet,
}

/// What convert wrote of a session.
pub(super) struct Written {
    pub id: String,
    /// The run that wrote it, when its folder is still there.
    pub run: Option<u32>,
    /// The line its record started on then (the run's report says; the manifest does not).
    pub line: Option<u64>,
}

/// Finds `session` (an id, or a rollout's path) in the home `out`. `rules` (`--rules`), when
/// given, replace the rules the run kept.
pub(super) fn find_session(
    out: &Path,
    session: &str,
    rules: &[PathBuf],
    messages_at: &[String],
) -> Result<HomeSession> {
    if !out.join(STATE_DIR).is_dir() {
        bail!(
            "{} is not the output folder of a conversion (no {STATE_DIR} folder): name the --out folder convert wrote",
            out.display()
        );
    }
    let wanted = wanted_id(session);
    let manifest = Manifest::load(&Home::new(out))
        .with_context(|| format!("reading the manifest of {}", out.display()))?;
    let (source, written, run) = match in_runs(out, wanted)? {
        Some(found) => found,
        None => match in_manifest(&manifest, wanted) {
            Some(entry) => (
                entry.name.clone(),
                Written {
                    id: wanted.to_string(),
                    run: None,
                    line: None,
                },
                None,
            ),
            None => bail!(
                "no run of {} wrote session {session}, and its manifest lists no such session: `rollover status {} --sessions` lists the ids there are",
                out.display(),
                out.display()
            ),
        },
    };
    // The manifest's entry of the file the run names (the run names it as it was given).
    let listed = manifest
        .files
        .values()
        .find(|f| {
            f.name == source
                && f.rollouts
                    .entries()
                    .any(|r| ends_with_id(&r.path, &written.id))
        })
        .or_else(|| manifest.files.values().find(|f| f.name == source));
    let path = match listed {
        Some(f) => PathBuf::from(&f.key),
        None => PathBuf::from(&source),
    };
    if !path.exists() {
        bail!(
            "session {} was converted from {source}, which is no longer at {}: explain it from where the file is now with `rollover explain FILE`",
            written.id,
            path.display(),
        );
    }
    let rules = if rules.is_empty() {
        with_messages_at(kept(out, run.as_deref(), listed)?, messages_at)?
    } else {
        load_rules(rules, messages_at)?
    };
    Ok(HomeSession {
        path,
        written,
        rules,
    })
}

/// The id a session argument names: a rollout path names its session at the end of its file
/// name; an id is the id.
fn wanted_id(session: &str) -> &str {
    let name = Path::new(session)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(session);
    let stem = name.trim_end_matches(".zst").trim_end_matches(".jsonl");
    match stem.len().checked_sub(36).and_then(|at| stem.get(at..)) {
        Some(id) if stem.starts_with("rollout-") => id,
        _ => stem,
    }
}

fn ends_with_id(path: &str, id: &str) -> bool {
    let path = path.trim_end_matches(".zst");
    session_id_of(path) == Some(id)
}

/// The newest run report line that wrote session `id`: the file as the run named it, what
/// was written, and the run's folder.
fn in_runs(out: &Path, id: &str) -> Result<Option<(String, Written, Option<PathBuf>)>> {
    let runs_dir = out.join(STATE_DIR).join(RUNS_DIR);
    let mut runs: Vec<(u32, PathBuf)> = std::fs::read_dir(&runs_dir)
        .map(|entries| {
            entries
                .filter_map(|e| {
                    let e = e.ok()?;
                    Some((e.file_name().to_str()?.parse().ok()?, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    runs.sort();
    for (number, run) in runs.iter().rev() {
        let Ok(file) = std::fs::File::open(run.join("conversations.jsonl")) else {
            continue;
        };
        for line in std::io::BufRead::lines(std::io::BufReader::new(file)) {
            let line = line.with_context(|| format!("reading {}", run.display()))?;
            if !line.contains(id) {
                continue;
            }
            let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if entry["id"].as_str() != Some(id) {
                continue;
            }
            let written = Written {
                id: id.to_string(),
                run: Some(*number),
                line: entry["line"].as_u64(),
            };
            let source = entry["source"].as_str().unwrap_or_default().to_string();
            return Ok(Some((source, written, Some(run.clone()))));
        }
    }
    Ok(None)
}

/// The manifest's file that lists session `id`.
fn in_manifest<'m>(manifest: &'m Manifest, id: &str) -> Option<&'m FileEntry> {
    manifest
        .files
        .values()
        .find(|f| f.rollouts.entries().any(|r| ends_with_id(&r.path, id)))
}

/// The rules the run kept: its run folder's, else the state folder's copy of the set the
/// manifest says converted the file; a home written before runs kept their rules gives its
/// summary's rule file names, read from here.
fn kept(out: &Path, run: Option<&Path>, listed: Option<&FileEntry>) -> Result<RuleSet> {
    let state = out.join(STATE_DIR);
    let mut places = Vec::new();
    if let Some(run) = run {
        places.push(run.join(kept_rules::RUN_FILE));
    }
    if let Some(entry) = listed {
        places.push(state.join(kept_rules::state_name(&entry.rules)));
    }
    for place in &places {
        if let Some(kept) = KeptRules::read(place)? {
            return kept
                .rule_set()
                .with_context(|| format!("reading the rules kept in {}", place.display()));
        }
    }
    let names = run.map(summary_rules).unwrap_or_default();
    let paths: Vec<PathBuf> = names.iter().map(PathBuf::from).collect();
    load_rules(&paths, &[]).with_context(|| {
        format!(
            "{} kept no copy of the rules that converted the session: give them with --rules",
            out.display()
        )
    })
}

/// The rule files a run's summary names (`default`: the built-in set).
fn summary_rules(run: &Path) -> Vec<String> {
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
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
