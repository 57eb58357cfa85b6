//! `rollover status OUT`: what a home holds and what its last runs did, for whoever operates
//! a scheduled job: the input files the manifest knows, its sessions (those whose record is
//! gone, those kept pending because Codex changed them while their source has newer data),
//! and the last runs with their verdicts; whether a run is in progress (the lock probed, never
//! taken, so it is safe beside a running conversion), and the rollouts on disk that no
//! finished run recorded (a killed run's). `--sessions` lists the sessions by id.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::audit::Summary;
use crate::cli::StatusArgs;
use crate::commands::ui::{group, plural, wrap_text, Ui};
use crate::commands::{given_or_codex_home, json_with_exit, out, outln, Exit};
use crate::output::home::{RUNS_DIR, STATE_DIR};
use crate::output::kept_rules::label;
use crate::output::lock::holder_of;
use crate::output::manifest::{session_id_of, JOURNAL};
use crate::output::{Home, Manifest};

/// The state of a home, as `--json` prints it.
#[derive(Debug, Serialize)]
struct Status {
    out: String,
    files: usize,
    sessions: usize,
    /// Sessions whose record is gone from its source (kept; `--prune` removes them).
    sessions_left: usize,
    /// The sessions left by the rule set that wrote them (`rules default (a1b2c3d4)`).
    left_by_rules: BTreeMap<String, usize>,
    /// Sessions kept pending, with the file whose newer data waits for them.
    pending: Vec<Pending>,
    /// A journal is there: a run is going on, or one was killed (the next run resumes it).
    journal: bool,
    /// The pid of the run in progress (it holds the lock), if one is.
    running_pid: Option<u32>,
    /// Rollouts under `sessions/` that the manifest does not list: written by a run killed
    /// before it recorded them (or by another program).
    rollouts_unrecorded: usize,
    runs: Vec<RunLine>,
    /// With `--sessions`: every session the manifest knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    session_list: Option<Vec<SessionLine>>,
}

/// One session of the manifest.
#[derive(Debug, Serialize)]
struct SessionLine {
    id: String,
    path: String,
    /// The input file it came from, as the reports name it (an orphan's: its key).
    file: String,
    /// Its record is gone from the file (kept; `--prune` removes it).
    left: bool,
    /// For a session left, the rule set that wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    written_by: Option<String>,
}

#[derive(Debug, Serialize)]
struct Pending {
    session: String,
    file: String,
}

/// One run, from its `summary.json`.
#[derive(Debug, Serialize)]
struct RunLine {
    run: u32,
    dry_run: bool,
    verdict: String,
    interrupted: Option<String>,
    records: u64,
    converted: u64,
    quarantined: u64,
    sessions_new: u64,
    sessions_updated: u64,
    sessions_kept: usize,
    sessions_pruned: usize,
}

pub fn run(args: &StatusArgs, ui: &Ui) -> Result<Exit> {
    // With --json, `main` prints the error object of a failure as for every command.
    let out = given_or_codex_home(args.out.as_deref())?;
    let status = status(&out, args.runs, args.sessions)?;
    let exit = Exit::findings_if(!status.pending.is_empty());
    if args.json {
        outln!("{}", json_with_exit(&status, exit)?)?;
    } else if !ui.quiet {
        out!("{}", text(&status, ui.width))?;
    }
    Ok(exit)
}

fn status(out: &Path, last: usize, list: bool) -> Result<Status> {
    let state = out.join(STATE_DIR);
    if !state.is_dir() {
        bail!(
            "{} is not a home rollover wrote into (no {} folder): give the --out of a convert run",
            out.display(),
            state.display()
        );
    }
    let home = Home::new(out);
    let manifest = Manifest::load(&home)
        .with_context(|| format!("reading the manifest of {}", out.display()))?;
    let mut pending = Vec::new();
    for entry in manifest.files.values() {
        for session in &entry.pending {
            pending.push(Pending {
                session: session.clone(),
                file: entry.name.clone(),
            });
        }
    }
    let state_dir = home.existing_state().ok().flatten();
    let label = |rules: &str| label(state_dir.as_ref(), rules, None);
    let mut left_by_rules = BTreeMap::new();
    for orphan in manifest.orphans.values() {
        *left_by_rules.entry(label(&orphan.rules)).or_default() += 1;
    }
    Ok(Status {
        out: out.display().to_string(),
        left_by_rules,
        files: manifest.files.len(),
        sessions: manifest.session_count(),
        sessions_left: manifest.orphans.len(),
        pending,
        journal: home.state_file(JOURNAL).exists(),
        running_pid: holder_of(&home),
        rollouts_unrecorded: unrecorded(out, &manifest),
        runs: runs(&state.join(RUNS_DIR), last),
        session_list: list.then(|| sessions(&manifest, label)),
    })
}

/// Every session the manifest knows, by its file, then by path.
fn sessions(manifest: &Manifest, label: impl Fn(&str) -> String) -> Vec<SessionLine> {
    let line = |path: &str, file: &str, written_by: Option<String>| SessionLine {
        id: session_id_of(path.trim_end_matches(".zst"))
            .unwrap_or(path)
            .to_string(),
        path: path.to_string(),
        file: file.to_string(),
        left: written_by.is_some(),
        written_by,
    };
    let mut lines = Vec::new();
    for entry in manifest.files.values() {
        let mut paths: Vec<String> = entry.rollouts.entries().map(|r| r.path).collect();
        paths.sort();
        lines.extend(paths.iter().map(|path| line(path, &entry.name, None)));
    }
    for (path, orphan) in &manifest.orphans {
        // Named as the reports name its file while the manifest still lists it.
        let file = manifest
            .files
            .get(&orphan.from)
            .map_or(orphan.from.as_str(), |entry| entry.name.as_str());
        lines.push(line(path, file, Some(label(&orphan.rules))));
    }
    lines
}

/// The rollouts under `OUT/sessions/` the manifest does not list (symlinks not followed).
fn unrecorded(out: &Path, manifest: &Manifest) -> usize {
    let known = manifest.rollout_digests();
    let mut count = 0;
    let mut folders = vec![out.join("sessions")];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                folders.push(path);
                continue;
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let rollout = name.starts_with("rollout-")
                && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst"));
            let relative = path
                .strip_prefix(out)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            if kind.is_file() && rollout && !known.contains_key(&relative) {
                count += 1;
            }
        }
    }
    count
}

/// The last `last` finished runs, oldest first (a folder without `summary.json` is a run in
/// progress or killed: left out).
fn runs(dir: &Path, last: usize) -> Vec<RunLine> {
    let mut folders: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| {
                    let e = e.ok()?;
                    let number = e.file_name().to_str()?.parse().ok()?;
                    Some((number, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    folders.sort();
    let start = folders.len().saturating_sub(last);
    folders[start..]
        .iter()
        .filter_map(|(run, folder)| {
            let text = std::fs::read_to_string(folder.join("summary.json")).ok()?;
            let s: Summary = serde_json::from_str(&text).ok()?;
            Some(RunLine {
                run: *run,
                dry_run: s.setup.dry_run,
                verdict: if s.interrupted.is_some() {
                    "interrupted: incomplete".to_string()
                } else {
                    s.verdict.clone()
                },
                interrupted: s.interrupted.clone(),
                records: s.totals.records,
                converted: s.totals.converted,
                quarantined: s.totals.quarantined,
                sessions_new: s.home.sessions_new,
                sessions_updated: s.home.sessions_updated,
                sessions_kept: s.home.sessions_kept.len(),
                sessions_pruned: s.home.sessions_pruned.len(),
            })
        })
        .collect()
}

fn text(s: &Status, width: usize) -> String {
    let mut lines = vec![format!("rollover status {}", s.out)];
    let mut add = |label: &str, text: String| {
        lines.extend(wrap_text("  ", &format!("{label:<13}"), &text, width));
    };
    add(
        "manifest",
        format!(
            "{}, {}{}",
            plural(s.files as u64, "input file", "input files"),
            plural(s.sessions as u64, "session", "sessions"),
            if s.sessions_left > 0 {
                format!(
                    " ({} left: their record is gone; --prune removes them)",
                    group(s.sessions_left as u64)
                )
            } else {
                String::new()
            }
        ),
    );
    if !s.left_by_rules.is_empty() {
        let sets: Vec<String> = s
            .left_by_rules
            .iter()
            .map(|(rules, n)| format!("{} written by {rules}", group(*n as u64)))
            .collect();
        add(
            "left",
            format!(
                "{}, each as those rules made it; --prune removes them, and a record that comes back is converted again with the rules of the run that reads it",
                sets.join(", ")
            ),
        );
    }
    if !s.pending.is_empty() {
        add(
            "pending",
            format!(
                "{} kept: changed in Codex since written, while the source has newer data (--force replaces)",
                plural(s.pending.len() as u64, "session", "sessions")
            ),
        );
        for p in &s.pending {
            add("", format!("{} (from {})", p.session, p.file));
        }
    }
    match (s.running_pid, s.journal) {
        (Some(pid), _) => add(
            "running",
            format!("a run is in progress (pid {pid}): the counts above are those before it"),
        ),
        (None, true) => add(
            "journal",
            "a run was killed: the next run resumes it".to_string(),
        ),
        (None, false) => {}
    }
    if s.rollouts_unrecorded > 0 {
        add(
            "unrecorded",
            format!(
                "{} under sessions/ that no finished run recorded (a run killed before it recorded them, or another program's){}",
                plural(s.rollouts_unrecorded as u64, "rollout", "rollouts"),
                if s.running_pid.is_some() {
                    ": the run in progress records its own as it finishes each file"
                } else {
                    ": convert the same inputs again, and it records those it writes the same and keeps any other as it is (`--force` replaces it)"
                }
            ),
        );
    }
    if s.runs.is_empty() {
        add("runs", "none finished yet".to_string());
    }
    for r in &s.runs {
        let mut parts = vec![
            format!("{} records", group(r.records)),
            format!("{} converted", group(r.converted)),
        ];
        if r.quarantined > 0 {
            parts.push(format!("{} quarantined", group(r.quarantined)));
        }
        for (n, what) in [
            (r.sessions_new as usize, "new"),
            (r.sessions_updated as usize, "updated"),
            (r.sessions_kept, "kept pending"),
            (r.sessions_pruned, "pruned"),
        ] {
            if n > 0 {
                parts.push(format!("{} {what}", group(n as u64)));
            }
        }
        add(
            &format!("run {:04}", r.run),
            format!(
                "{}{}: {}",
                if r.verdict.is_empty() {
                    "finished"
                } else {
                    r.verdict.as_str()
                },
                if r.dry_run { " (dry run)" } else { "" },
                parts.join(", ")
            ),
        );
    }
    if let Some(list) = &s.session_list {
        add(
            "sessions",
            format!("{} (id, rollout, from)", group(list.len() as u64)),
        );
        for session in list {
            let left = match &session.written_by {
                Some(rules) => format!(", left: its record is gone; written by {rules}"),
                None => String::new(),
            };
            lines.push(format!(
                "  {}  {}  (from {}{left})",
                session.id, session.path, session.file
            ));
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}
