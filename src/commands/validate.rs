//! `rollover validate`: check existing rollouts against invariants 1-11. Violations fail the
//! run; warnings (what Codex ignores on purpose) are shown and do not.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use walkdir::WalkDir;

use crate::cli::ValidateArgs;
use crate::commands::Exit;
use crate::rules::RuleSet;
use crate::source::open;
use crate::validate::{
    check_with_warnings, uuid_in_file_name, Findings, Invariant, Violation, Warning,
};

#[derive(Serialize)]
struct FileReport {
    path: String,
    ok: bool,
    violations: Vec<Violation>,
    warnings: Vec<Warning>,
}

#[derive(Serialize)]
struct Report {
    codex_version: String,
    files: usize,
    passed: usize,
    failed: usize,
    warnings: usize,
    reports: Vec<FileReport>,
}

pub fn run(args: &ValidateArgs) -> Result<Exit> {
    let rules = RuleSet::load(&args.rules).context("loading rule files")?;
    if !rules.codex_version.starts_with(args.codex_version.as_str()) {
        bail!(
            "--codex-version {}: the rule files target Codex {}; pass rule files for that version with --rules",
            args.codex_version,
            rules.codex_version
        );
    }
    let files = rollout_files(&args.paths)?;
    let mut reports = Vec::new();
    for path in &files {
        let mut bytes = Vec::new();
        let opened = open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut reader = opened.reader;
        let findings = match reader.read_to_end(&mut bytes) {
            Ok(_) => {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                check_with_warnings(&bytes, uuid_in_file_name(&name), &rules.markers)
            }
            Err(err) => Findings {
                violations: vec![Violation {
                    invariant: Invariant::LineFormat,
                    line: 0,
                    message: format!("cannot read: {err}"),
                }],
                warnings: Vec::new(),
            },
        };
        reports.push(FileReport {
            path: path.display().to_string(),
            ok: findings.violations.is_empty(),
            violations: findings.violations,
            warnings: findings.warnings,
        });
    }
    let failed = reports.iter().filter(|r| !r.ok).count();
    let report = Report {
        codex_version: rules.codex_version.clone(),
        files: reports.len(),
        passed: reports.len() - failed,
        failed,
        warnings: reports.iter().map(|r| r.warnings.len()).sum(),
        reports,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for r in &report.reports {
            print_file(r, args.max_per_file);
        }
        let warnings = match report.warnings {
            0 => String::new(),
            1 => ", 1 warning".to_string(),
            n => format!(", {n} warnings"),
        };
        println!(
            "{} files: {} passed, {} failed{warnings} (Codex {})",
            report.files, report.passed, report.failed, report.codex_version
        );
    }
    Ok(Exit::findings_if(failed > 0))
}

/// One file's lines of the text report: its status, then up to `max` violations and up to
/// `max` warnings.
fn print_file(r: &FileReport, max: usize) {
    if r.ok {
        println!("ok    {}", r.path);
    } else {
        println!("FAIL  {} ({} violations)", r.path, r.violations.len());
    }
    for v in r.violations.iter().take(max) {
        println!(
            "      {}:{}: [{}] {}",
            r.path, v.line, v.invariant, v.message
        );
    }
    if r.violations.len() > max {
        println!(
            "      ... {} more (--max-per-file, or --json for all)",
            r.violations.len() - max
        );
    }
    for w in r.warnings.iter().take(max) {
        println!("      {}:{}: [warning] {}", r.path, w.line, w.message);
    }
    if r.warnings.len() > max {
        println!(
            "      ... {} more warnings (--max-per-file, or --json for all)",
            r.warnings.len() - max
        );
    }
}

/// Files named directly; under a folder, its `rollout-*.jsonl[.zst]` files (a Codex home),
/// or, when it has none, every `*.jsonl[.zst]` file (a folder of rollouts named otherwise).
/// A folder with neither is an error: checking nothing must not pass.
fn rollout_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path)
            .with_context(|| format!("{} does not exist or cannot be read", path.display()))?;
        if meta.is_file() {
            files.push(path.clone());
            continue;
        }
        let mut rollouts = Vec::new();
        let mut others = Vec::new();
        for entry in WalkDir::new(path).sort_by_file_name() {
            let entry = entry.with_context(|| format!("walking {}", path.display()))?;
            if !entry.file_type().is_file() {
                continue;
            }
            if is_rollout_name(entry.path()) {
                rollouts.push(entry.into_path());
            } else if is_jsonl_name(entry.path()) {
                others.push(entry.into_path());
            }
        }
        if rollouts.is_empty() && others.is_empty() {
            bail!(
                "no rollout files (rollout-*.jsonl or *.jsonl, optionally .zst) under {}; name files directly to check them",
                path.display()
            );
        }
        files.extend(if rollouts.is_empty() {
            others
        } else {
            rollouts
        });
    }
    Ok(files)
}

fn is_jsonl_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.ends_with(".jsonl") || name.ends_with(".jsonl.zst")
}

fn is_rollout_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.starts_with("rollout-") && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst"))
}
