//! `rollover convert`: the main job.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::audit::Summary;
use crate::cli::{ConvertArgs, OutputFormat, WireArg};
use crate::commands::Exit;
use crate::model::responses::{Format, ResponsesOptions, Wire};
use crate::pipeline::{self, Options, Progress};
use crate::rules::{PathExpr, RuleSet};
use crate::source::{Damage, WalkOptions};

/// `rollover audit`: convert's dry run.
pub fn audit(args: &ConvertArgs) -> Result<Exit> {
    let mut args = args.clone();
    args.dry_run = true;
    run(&args)
}

/// The rule files given, with `--messages-at` paths tried before theirs.
pub fn load_rules(paths: &[std::path::PathBuf], messages_at: &[String]) -> Result<RuleSet> {
    let mut rules = RuleSet::load(paths).context("loading rule files")?;
    let mut extra = Vec::new();
    for path in messages_at {
        extra.push(PathExpr::parse(path).map_err(|msg| {
            anyhow::anyhow!(
                "--messages-at {path}: {msg}; write it like `body.messages` or `runs[-1].messages`"
            )
        })?);
    }
    extra.append(&mut rules.input.messages_at);
    rules.input.messages_at = extra;
    Ok(rules)
}

pub fn run(args: &ConvertArgs) -> Result<Exit> {
    let mut rules = load_rules(&args.rules, &args.messages_at)?;
    rules.input.guess = !args.no_guess;
    if let Some(cwd) = &args.cwd {
        let cwd = std::path::absolute(cwd).with_context(|| format!("--cwd {}", cwd.display()))?;
        rules.session.cwd = cwd.display().to_string();
    }
    if args.out.is_file() {
        anyhow::bail!("--out must be a folder: {} is a file", args.out.display());
    }
    let format = output_format(args)?;
    let stop = Arc::new(AtomicUsize::new(0));
    handle_signals(&stop)?;
    let options = Options {
        inputs: args.inputs.clone(),
        out: args.out.clone(),
        dry_run: args.dry_run,
        jobs: args.jobs,
        baseline: args.baseline,
        full: args.full,
        force: args.force,
        durable: args.durable,
        stop,
        sample: args.sample,
        max_quarantine_rate: args.max_quarantine_rate.unwrap_or(0.0),
        report_text: args.report_text,
        walk: WalkOptions {
            hidden: args.hidden,
            follow: args.follow,
            stdin_name: args.stdin_name.clone(),
        },
        format,
    };
    if args.sample.is_some() && !args.dry_run {
        anyhow::bail!("--sample converts only a share of the records: use it with `rollover audit` (or --dry-run), which writes no rollout");
    }
    let progress = Reporter::new();
    let result = pipeline::run(&options, &rules, &progress)
        .with_context(|| format!("converting into {}", args.out.display()));
    progress.finish();
    let summary = match result {
        Ok(summary) => summary,
        Err(err) => {
            if args.json {
                let exit = Exit::for_error(&err);
                let out = json!({"exit_code": exit.code(), "exit_reason": exit.reason(), "error": format!("{err:#}")});
                println!("{out}");
            }
            return Err(err);
        }
    };
    let exit = exit_for(&summary, args.max_quarantine_rate);
    if args.json {
        let mut out = serde_json::to_value(&summary).context("writing the JSON summary")?;
        if let Some(map) = out.as_object_mut() {
            map.insert("exit_code".into(), exit.code().into());
            map.insert("exit_reason".into(), exit.reason().into());
        }
        println!("{out}");
    } else {
        print_summary(&summary, args);
    }
    Ok(exit)
}

/// `--format` and the flags that only it takes.
fn output_format(args: &ConvertArgs) -> Result<Format> {
    let responses_only = [
        (args.wire == WireArg::Lite, "--wire lite"),
        (args.batch_envelope, "--batch-envelope"),
        (args.compress, "--compress"),
    ];
    match args.format {
        OutputFormat::Codex => match responses_only.iter().find(|(given, _)| *given) {
            Some((_, flag)) => Err(anyhow::anyhow!(
                "{flag} applies to Responses bodies only: add --format responses"
            )),
            None => Ok(Format::Codex),
        },
        OutputFormat::Responses => Ok(Format::Responses(ResponsesOptions {
            wire: match args.wire {
                WireArg::Normal => Wire::Normal,
                WireArg::Lite => Wire::Lite,
            },
            envelope: args.batch_envelope,
            compress: args.compress,
        })),
    }
}

/// The exit of a finished run: interrupted (130/143), findings (1: a damaged file, or records
/// quarantined, above `max_rate` when given), or clean.
fn exit_for(summary: &Summary, max_rate: Option<f64>) -> Exit {
    if let Some(signal) = &summary.interrupted {
        let number = match signal.as_str() {
            "SIGTERM" => signal_hook::consts::SIGTERM,
            _ => signal_hook::consts::SIGINT,
        };
        return Exit::Interrupted(number);
    }
    let rate = summary.quarantined as f64 / summary.records.max(1) as f64;
    let quarantine_finding = match max_rate {
        Some(max) => rate > max,
        None => summary.quarantined > 0,
    };
    Exit::findings_if(
        quarantine_finding
            || !summary.damaged_files.is_empty()
            || !summary.unreadable.is_empty()
            || !summary.symlink_loops.is_empty(),
    )
}

/// SIGINT and SIGTERM ask the run to stop cleanly (a second one stops it at once). SIGXFSZ
/// (a file size limit) becomes a write error naming the file instead of killing the process.
fn handle_signals(stop: &Arc<AtomicUsize>) -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM, SIGXFSZ};
    let asked = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_default(signal, Arc::clone(&asked))
            .context("installing signal handlers")?;
        signal_hook::flag::register_usize(signal, Arc::clone(stop), signal as usize)
            .context("installing signal handlers")?;
        signal_hook::flag::register(signal, Arc::clone(&asked))
            .context("installing signal handlers")?;
    }
    signal_hook::flag::register(SIGXFSZ, Arc::new(AtomicBool::new(false)))
        .context("installing signal handlers")?;
    Ok(())
}

/// A progress bar on a terminal, plain log lines (every few seconds) otherwise.
struct Reporter {
    bar: Option<ProgressBar>,
    plain: Mutex<PlainState>,
}

struct PlainState {
    started: Instant,
    last: Instant,
    records: u64,
    bytes: u64,
    total: u64,
}

impl Reporter {
    fn new() -> Reporter {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        Reporter {
            bar,
            plain: Mutex::new(PlainState {
                started: Instant::now(),
                last: Instant::now(),
                records: 0,
                bytes: 0,
                total: 0,
            }),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Reporter {
    fn start(&self, files: u64, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(bytes);
        } else {
            if let Ok(mut s) = self.plain.lock() {
                s.total = bytes;
            }
            eprintln!("rollover: {files} input files, {bytes} bytes on disk");
        }
    }

    fn advance(&self, records: u64, bytes: u64, disk: u64) {
        let Ok(mut s) = self.plain.lock() else { return };
        s.records += records;
        s.bytes += bytes;
        let secs = s.started.elapsed().as_secs_f64().max(1e-9);
        let rate = s.records as f64 / secs;
        if let Some(bar) = &self.bar {
            // The bar measures the input files on disk, so its ETA holds for compressed archives.
            bar.set_position(disk);
            bar.set_message(format!("{} records, {rate:.0} records/s", s.records));
        } else if s.last.elapsed() >= Duration::from_secs(5) {
            s.last = Instant::now();
            eprintln!(
                "rollover: {} records, {} bytes read, {rate:.0} records/s, {:.1} MB/s",
                s.records,
                s.bytes,
                s.bytes as f64 / secs / 1e6
            );
        }
    }

    fn note(&self, message: &str) {
        let line = format!("rollover: {message}");
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn damage(&self, damage: &Damage) {
        let at = damage
            .compressed_offset
            .map(|c| format!(", compressed byte {c}"))
            .unwrap_or_default();
        let line = format!(
            "rollover: {}{at}: {}; the records before it were read",
            damage.location, damage.message
        );
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }
}

fn print_summary(s: &Summary, args: &ConvertArgs) {
    let secs = s.seconds.max(1e-9);
    println!(
        "rollover convert{}",
        if s.dry_run {
            " (dry run: no rollout written)"
        } else {
            ""
        }
    );
    println!(
        "  rules        {} (Codex {})",
        s.rules.join(", "),
        s.codex_version
    );
    println!(
        "  files        {}  ({} bytes read, {} blank lines)",
        s.files, s.bytes_read, s.blank_lines
    );
    let joined = if s.joined > 0 {
        format!(" + batch results joined {}", s.joined)
    } else {
        String::new()
    };
    println!(
        "  records      {}  = converted {} + quarantined {}{joined}",
        s.records, s.converted, s.quarantined
    );
    for (class, n) in &s.quarantine_reasons {
        println!("    quarantined {class}: {n}");
    }
    for (path, n) in &s.messages_by_shape {
        println!(
            "  guessed      messages found at `{path}` by shape in {n} records: pass `--messages-at {path}` to make it explicit"
        );
    }
    let skips = s.skipped_other_extensions.values().sum::<u64>()
        + s.skipped_hidden
        + s.skipped_symlinks
        + s.skipped_codex_homes.len() as u64;
    if skips > 0 || !s.unreadable.is_empty() || !s.symlink_loops.is_empty() {
        println!(
            "  skipped      {} other extensions, {} hidden, {} symlinks, {} Codex homes, {} symlink loops, {} unreadable",
            s.skipped_other_extensions.values().sum::<u64>(),
            s.skipped_hidden,
            s.skipped_symlinks,
            s.skipped_codex_homes.len(),
            s.symlink_loops.len(),
            s.unreadable.len()
        );
    }
    if !s.same_content.is_empty() {
        println!(
            "  duplicates   {} files already converted into this home under other ids (listed in summary.json)",
            s.same_content.len()
        );
    }
    for d in &s.damaged_files {
        println!(
            "  damaged      {}:{} (byte {}): {}",
            d.file, d.line, d.byte_offset, d.message
        );
    }
    let items: Vec<String> = s.items.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("  items        {}", items.join(", "));
    let phases: Vec<String> = s.phases.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("  phases       {}", phases.join(", "));
    let mut top: Vec<(&String, &u64)> = s.rules_fired.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let top: Vec<String> = top
        .iter()
        .take(8)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!("  rules fired  {}", top.join(", "));
    if !s.violations.is_empty() {
        let v: Vec<String> = s
            .violations
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!("  violations   {}", v.join(", "));
    }
    println!(
        "  text bytes   in {} + added {} = out {} + dropped {}",
        s.text_bytes_in, s.text_bytes_added, s.text_bytes_out, s.text_bytes_dropped
    );
    println!(
        "  time         {:.2}s, {:.0} records/s, {:.1} MB/s",
        s.seconds,
        s.records as f64 / secs,
        s.bytes_read as f64 / secs / 1e6
    );
    if s.files_unchanged > 0 || s.rollouts_removed > 0 || s.rollouts_unchanged > 0 {
        println!(
            "  incremental  {} files unchanged (skipped), {} rollouts already current, {} removed (their record is gone)",
            s.files_unchanged, s.rollouts_unchanged, s.rollouts_removed
        );
    }
    if !s.sessions_kept.is_empty() {
        println!(
            "  kept         {} sessions changed since they were written (listed in summary.json; --force replaces them)",
            s.sessions_kept.len()
        );
    }
    if !s.sessions_replaced.is_empty() {
        println!(
            "  replaced     {} changed sessions (copies in {})",
            s.sessions_replaced.len(),
            args.out.join("rollover/replaced").display()
        );
    }
    if let Some(signal) = &s.interrupted {
        println!("  interrupted  by {signal}: finished files are recorded; run again to resume");
    }
    let run = args.out.join("rollover/runs").join(format!("{:04}", s.run));
    println!("  output       {}", args.out.display());
    println!("  report       {}", run.join("summary.json").display());
    if s.quarantined > 0 {
        println!("  quarantine   {}", run.join("quarantine.jsonl").display());
    }
}
