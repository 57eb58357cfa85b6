//! `rollover validate`: check existing rollouts against invariants 1-11. Violations fail the
//! run; warnings (what Codex ignores on purpose) are shown and do not.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use walkdir::WalkDir;

use crate::audit::report::visible;
use crate::cli::ValidateArgs;
use crate::commands::ui::{group, plural, Ui};
use crate::commands::{given_or_codex_home, json_with_exit, outln, Exit};
use crate::rules::RuleSet;
use crate::source::open;
use crate::validate::{
    check_read, supported_codex, uuid_in_file_name, Findings, Generation, Invariant, LongLine,
    Violation, Warning, SUPPORTED_CODEX,
};

#[derive(Serialize)]
struct FileReport {
    path: String,
    ok: bool,
    /// The generation of Codex rollout the file is, when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<&'static str>,
    violations: Vec<Violation>,
    warnings: Vec<Warning>,
    /// How to bring the file to what current Codex resumes, when it needs converting.
    #[serde(skip_serializing_if = "Option::is_none")]
    convert: Option<String>,
}

#[derive(Serialize)]
struct Report {
    codex_version: String,
    files: usize,
    passed: usize,
    failed: usize,
    warnings: usize,
    reports: Vec<FileReport>,
    /// Homes whose config.toml makes Codex refuse sessions of another provider.
    provider_locks: Vec<ProviderLock>,
}

/// Prints the failures and the totals (`--verbose`: every file; `--quiet`: nothing but the
/// JSON with `--json`), and exits 1 when any file fails.
pub fn run(args: &ValidateArgs, ui: &Ui) -> Result<Exit> {
    let rules = RuleSet::load(&args.rules).context("loading rule files")?;
    // The rules' own target (0.169.0) was the release checked before the list existed.
    let own = (args.codex_version == rules.codex_version).then_some(rules.codex_version.as_str());
    let Some(codex) = supported_codex(&args.codex_version).or(own) else {
        bail!(
            "--codex-version {}: not a Codex release rollover checks against; give one of {} (or a prefix, such as 0.171)",
            args.codex_version,
            SUPPORTED_CODEX.join(", ")
        );
    };
    let paths = match args.paths.as_slice() {
        [] => vec![given_or_codex_home(None)?],
        given => given.to_vec(),
    };
    let files = rollout_files(&paths)?;
    let mut locks: Vec<ProviderLock> = paths.iter().filter_map(|p| provider_lock(p)).collect();
    let mut reports = Vec::new();
    for path in &files {
        let opened = open(path, crate::input::format::archive_lines())
            .with_context(|| format!("opening {}", path.display()))?;
        let mut reader = opened.reader;
        let mut findings_bytes = Vec::new();
        let findings = match read_capped(&mut reader, args.max_record_bytes) {
            Ok((bytes, long)) => {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let findings = check_read(&bytes, &long, uuid_in_file_name(&name), &rules.markers);
                findings_bytes = bytes;
                findings
            }
            Err(err) => Findings {
                violations: vec![Violation {
                    invariant: Invariant::LineFormat,
                    line: 0,
                    message: format!("cannot read: {err}"),
                }],
                warnings: Vec::new(),
                generation: None,
            },
        };
        if let Some(provider) = named_provider(&findings_bytes) {
            for lock in locks.iter_mut().filter(|l| path.starts_with(&l.home)) {
                if lock.provider != provider {
                    lock.rollouts_naming_another += 1;
                }
            }
        }
        let shown = path.display().to_string();
        let convert =
            (findings.generation == Some(Generation::PreEnvelope)).then(|| convert_command(&shown));
        reports.push(FileReport {
            ok: findings.violations.is_empty(),
            generation: findings.generation.map(Generation::name),
            violations: findings.violations,
            warnings: findings.warnings,
            convert,
            path: shown,
        });
    }
    let failed = reports.iter().filter(|r| !r.ok).count();
    let report = Report {
        codex_version: codex.to_string(),
        files: reports.len(),
        passed: reports.len() - failed,
        failed,
        warnings: reports.iter().map(|r| r.warnings.len()).sum(),
        reports,
        provider_locks: locks,
    };
    let exit = Exit::findings_if(failed > 0);
    if args.json {
        let object = json_with_exit(&report, exit)?;
        outln!("{}", serde_json::to_string_pretty(&object)?)?;
    } else if !ui.quiet {
        print_text(&report, args.max_per_file, ui)?;
    }
    Ok(exit)
}

/// A home whose `config.toml` sets `model_provider`: Codex then resumes only sessions of
/// that provider (a `session_meta.model_provider` naming another is refused), so a migration
/// into it must write none or the same.
#[derive(Serialize)]
struct ProviderLock {
    /// The Codex home, as given.
    home: PathBuf,
    /// The provider its config.toml sets.
    provider: String,
    /// Its rollouts whose `session_meta.model_provider` names another provider.
    rollouts_naming_another: usize,
}

/// The `model_provider` a folder's `config.toml` sets, when it is a Codex home that sets one.
fn provider_lock(folder: &Path) -> Option<ProviderLock> {
    let text = std::fs::read_to_string(folder.join("config.toml")).ok()?;
    let config: toml::Table = text.parse().ok()?;
    let provider = config.get("model_provider")?.as_str()?.to_string();
    Some(ProviderLock {
        home: folder.to_path_buf(),
        provider,
        rollouts_naming_another: 0,
    })
}

/// The `model_provider` a rollout's `session_meta` (its first line) names, if any.
fn named_provider(bytes: &[u8]) -> Option<String> {
    let first = bytes.split(|b| *b == b'\n').next()?;
    let line: serde_json::Value = serde_json::from_slice(first).ok()?;
    if line["type"] != "session_meta" {
        return None;
    }
    line["payload"]["model_provider"]
        .as_str()
        .map(str::to_string)
}

/// The command that converts a rollout Codex cannot resume into a home it can.
fn convert_command(path: &str) -> String {
    let quoted = if path.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
        format!("'{}'", path.replace('\'', "'\\''"))
    } else {
        path.to_string()
    };
    format!("rollover convert {quoted} --from codex --out HOME")
}

/// A rollout's bytes to check, its lines longer than `limit` left out as they are read (an
/// empty line stands for each) and listed: memory is the file's other lines, never one line
/// past the limit (a file read whole costs several times its size).
fn read_capped(reader: &mut dyn BufRead, limit: u64) -> std::io::Result<(Vec<u8>, Vec<LongLine>)> {
    let mut bytes = Vec::new();
    let mut long = Vec::new();
    let mut line = 1usize;
    // Where the current line starts in `bytes`, its size so far, and whether it is too long.
    let mut start = 0usize;
    let mut size = 0u64;
    let mut skipping = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if buf.is_empty() {
            break;
        }
        let (used, ends) = match memchr::memchr(b'\n', buf) {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        let content = used - usize::from(ends);
        size += content as u64;
        if !skipping && size > limit {
            skipping = true;
            bytes.truncate(start);
        }
        if !skipping {
            bytes.extend_from_slice(&buf[..used]);
        } else if ends {
            bytes.push(b'\n');
        }
        reader.consume(used);
        if ends {
            if skipping {
                long.push(LongLine { line, size, limit });
            }
            line += 1;
            start = bytes.len();
            size = 0;
            skipping = false;
        }
    }
    if skipping {
        long.push(LongLine { line, size, limit });
    }
    Ok((bytes, long))
}

fn print_text(report: &Report, max_per_file: usize, ui: &Ui) -> std::io::Result<()> {
    for r in &report.reports {
        // A file's name and what its lines hold, escaped for the terminal as the summary is.
        let path = visible(&r.path);
        let path = &path;
        // A generation Codex cannot resume: its name and the way out, not its every line.
        if let Some(command) = &r.convert {
            outln!(
                "{}  {}: {}; convert it with `{}`",
                ui.bad("FAIL"),
                path,
                Generation::PreEnvelope.describe(),
                visible(command)
            )?;
            continue;
        }
        let paginated = if r.generation == Some(Generation::Paginated.name()) {
            " (paginated)"
        } else {
            ""
        };
        if r.ok && r.warnings.is_empty() {
            if ui.verbose {
                outln!("{}  {}{paginated}", ui.ok("ok  "), path)?;
            }
            continue;
        }
        if r.ok {
            outln!("{}  {}{paginated}", ui.ok("ok  "), path)?;
        } else {
            outln!(
                "{}  {}{paginated} ({})",
                ui.bad("FAIL"),
                path,
                plural(r.violations.len() as u64, "violation", "violations")
            )?;
        }
        for v in r.violations.iter().take(max_per_file) {
            outln!(
                "      {}:{}: [{}] {}",
                path,
                v.line,
                v.invariant,
                visible(&v.message)
            )?;
        }
        if r.violations.len() > max_per_file {
            outln!(
                "      +{} more (--max-per-file, or --json for all)",
                group((r.violations.len() - max_per_file) as u64)
            )?;
        }
        for w in r.warnings.iter().take(max_per_file) {
            outln!(
                "      {}:{}: [warning] {}",
                path,
                w.line,
                visible(&w.message)
            )?;
        }
        if r.warnings.len() > max_per_file {
            outln!(
                "      +{} more warnings (--max-per-file, or --json for all)",
                group((r.warnings.len() - max_per_file) as u64)
            )?;
        }
    }
    let failed = format!("{} failed", group(report.failed as u64));
    let warnings = match report.warnings {
        0 => String::new(),
        n => format!(", {}", plural(n as u64, "warning", "warnings")),
    };
    let paginated = report
        .reports
        .iter()
        .filter(|r| r.generation == Some(Generation::Paginated.name()))
        .count();
    let warnings = match paginated {
        0 => warnings,
        n => format!("{warnings}, {} paginated", group(n as u64)),
    };
    for lock in &report.provider_locks {
        let (level, naming) = match lock.rollouts_naming_another {
            0 => ("note", "none of its rollouts names another".to_string()),
            n => (
                "warning",
                format!(
                    "{} another provider: Codex refuses to resume {}",
                    plural(n as u64, "rollout here names", "rollouts here name"),
                    if n == 1 { "it" } else { "them" }
                ),
            ),
        };
        outln!(
            "{}",
            ui.warn(&visible(&format!(
                "{level}: {} sets model_provider = \"{}\": Codex resumes only sessions whose session_meta names no provider or this one; {naming}",
                lock.home.join("config.toml").display(),
                lock.provider
            )))
        )?;
    }
    outln!(
        "{}: {} passed, {}{warnings} (Codex {})",
        plural(report.files as u64, "file", "files"),
        group(report.passed as u64),
        if report.failed > 0 {
            ui.bad(&failed)
        } else {
            failed
        },
        report.codex_version
    )?;
    Ok(())
}

/// Files named directly; under a folder, its `rollout-*.jsonl[.zst]` files (a Codex home),
/// or, when it has none, every `*.jsonl[.zst]` file (a folder of rollouts named otherwise).
/// A folder with neither is an error: checking nothing must not pass.
fn rollout_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path)
            .with_context(|| format!("cannot read {} (check the path)", path.display()))?;
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
