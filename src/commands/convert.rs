//! `rollover convert`: the main job.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::audit::sample::SampleEstimate;
use crate::audit::Summary;
use crate::cli::{ConvertArgs, OutputFormat, WireArg};
use crate::commands::ui::{bytes, bytes_per_second, group, plural, wrap_list, wrap_text, Ui};
use crate::commands::{json_with_exit, load_rules, outln, Exit, RunError};
use crate::input::SourceFormat;
use crate::model::responses::{Format, ResponsesOptions, Wire};
use crate::pipeline::{self, FileCounts, Options, Progress};
use crate::rules::RuleSet;
use crate::source::shard::{resolve, Shard};
use crate::source::{Damage, PathFilter, ShardSource, WalkOptions};

mod review;

/// How many rules "rules fired" names; the rest are counted ("+10 more").
const RULES_SHOWN: usize = 8;

/// `rollover audit`: convert's dry run.
pub fn audit(args: &ConvertArgs, ui: &Ui) -> Result<Exit, RunError> {
    let mut args = args.clone();
    refuse_contradictions(&args, "audit")?;
    args.dry_run = true;
    run_as(&args, ui, "audit")
}

pub fn run(args: &ConvertArgs, ui: &Ui) -> Result<Exit, RunError> {
    refuse_contradictions(args, "convert --dry-run")?;
    run_as(args, ui, "convert")
}

/// Flags that cannot all hold, refused with the reason before anything is read (issue 28:
/// they were accepted, and one of them silently did nothing). `dry_run` names the command
/// that writes no rollout (`audit`, or `convert --dry-run`).
fn refuse_contradictions(args: &ConvertArgs, dry_run: &str) -> Result<()> {
    let is_audit = dry_run == "audit";
    if args.dry_run || is_audit {
        let instead = if is_audit {
            "run `rollover convert` instead"
        } else {
            "drop --dry-run"
        };
        if args.force {
            anyhow::bail!("{dry_run} writes no session, so --force has none to replace: leave --force out to see what a run would do (sessions it would replace are listed as kept pending), or {instead} to replace them");
        }
        if args.durable {
            anyhow::bail!("{dry_run} writes no session or manifest for --durable to fsync: leave --durable out, or {instead}");
        }
    }
    let stdin = std::path::Path::new("-");
    if args.inputs.iter().filter(|i| i.as_path() == stdin).count() > 1 {
        anyhow::bail!(
            "`-` (standard input) is given more than once: a stream can be read once; give it once"
        );
    }
    Ok(())
}

fn run_as(args: &ConvertArgs, ui: &Ui, name: &str) -> Result<Exit, RunError> {
    let mut rules = load_rules(&args.rules, &args.messages_at)?;
    rules.input.guess = !args.no_guess;
    if let Some(cwd) = &args.cwd {
        let cwd = std::path::absolute(cwd).with_context(|| format!("--cwd {}", cwd.display()))?;
        rules.session.cwd = cwd.display().to_string();
        rules.session.cwd_overrides_source = true;
    }
    if let Some(model) = &args.model {
        if args.format != OutputFormat::Responses {
            return Err(anyhow::anyhow!("--model names the model of Responses bodies, and a Codex rollout has no model field: use it with --format responses").into());
        }
        rules.session.default_model = Some(model.clone());
    }
    if args.out.is_file() {
        return Err(
            anyhow::anyhow!("--out must be a folder: {} is a file", args.out.display()).into(),
        );
    }
    let format = output_format(args)?;
    let from = match &args.from {
        Some(name) => Some(
            name.parse::<SourceFormat>()
                .map_err(|e| anyhow::anyhow!("--from: {e}"))?,
        ),
        None => None,
    };
    let filter = PathFilter::new(&args.globs, &args.excludes).map_err(anyhow::Error::from)?;
    let shard = shard_of(args)?;
    if let (Some(source), false) = (&shard, ui.quiet) {
        eprintln!("rollover: {}", shard_line(source));
    }
    let stop = Arc::new(AtomicUsize::new(0));
    handle_signals(&stop)?;
    let fingerprint = fingerprint(args, &rules);
    let options = Options {
        inputs: args.inputs.clone(),
        out: args.out.clone(),
        dry_run: args.dry_run,
        jobs: args.jobs,
        baseline: args.baseline,
        full: args.full,
        force: args.force,
        durable: args.durable,
        stop: Arc::clone(&stop),
        sample: args.sample,
        max_quarantine_rate: args.max_quarantine_rate.unwrap_or(0.0),
        report_text: args.report_text,
        review: args.review.is_some(),
        from,
        walk: WalkOptions {
            hidden: args.hidden,
            follow: args.follow,
            stdin_name: args.stdin_name.clone(),
            filter,
            stop,
            codex_homes: from == Some(SourceFormat::CODEX),
        },
        format,
        shard,
        split_bytes: args.split_bytes,
        max_record_bytes: args.max_record_bytes,
        max_conversation_bytes: args.max_conversation_bytes,
        memory: args.memory.unwrap_or_else(pipeline::budget::default_memory),
        prune: args.prune,
        max_prune: match &args.max_prune {
            Some(text) => text
                .parse()
                .map_err(|e: String| anyhow::anyhow!("--max-prune {e}"))?,
            None => pipeline::prune::MaxPrune::default(),
        },
        fingerprint,
        wait: args.wait.unwrap_or_default(),
        keep_runs: args.keep_runs,
    };
    if args.sample.is_some() && !args.dry_run {
        return Err(anyhow::anyhow!("--sample converts only a share of the records: use it with `rollover audit` (or --dry-run), which writes no rollout").into());
    }
    let progress = Reporter::new(ui);
    let result = pipeline::run(&options, &rules, &progress).map_err(|err| {
        RunError::from(err).context(format!("converting into {}", args.out.display()))
    });
    progress.finish();
    // With --json, `main` prints the error object for this failure as for any other.
    let summary = result?;
    let stdin = args
        .inputs
        .iter()
        .any(|i| i.as_os_str() == "-")
        .then_some(args.stdin_name.as_str());
    let review = match args.review {
        Some(n) => Some(
            review::write(&args.out, summary.run, n as usize, &rules, from, stdin)
                .with_context(|| format!("writing the review pages of run {}", summary.run))?,
        ),
        None => None,
    };
    let exit = Exit::for_run(&summary, args.max_quarantine_rate);
    if args.json {
        let out = json_with_exit(&summary, exit).context("writing the JSON summary")?;
        outln!("{out}")?;
    } else if !ui.quiet {
        print_summary(&summary, args, ui, name)?;
        if let Some(review) = review {
            outln!(
                "review: {} {} with transcript text: {}",
                review.pages,
                if review.pages == 1 { "page" } else { "pages" },
                review.index.display()
            )?;
        }
    }
    Ok(exit)
}

/// What makes this run's output what it is, beside its inputs: the resolved rule set (each
/// rule file's name and digest, the target Codex release) and every option that changes
/// output. The manifest records both with each file; a file recorded under others is
/// converted again.
fn fingerprint(args: &ConvertArgs, rules: &RuleSet) -> pipeline::Fingerprint {
    let digest = |value: serde_json::Value| {
        format!(
            "{:032x}",
            crate::model::hash::xxh3_128(value.to_string().as_bytes())
        )
    };
    let rules_value = json!({
        "names": rules.names,
        "digests": rules.digests,
        "codex_version": rules.codex_version,
    });
    let wire = match args.wire {
        WireArg::Normal => "normal",
        WireArg::Lite => "lite",
    };
    let mut options_value = json!({
        "format": match args.format {
            OutputFormat::Codex => "codex",
            OutputFormat::Responses => "responses",
        },
        "wire": wire,
        "batch_envelope": args.batch_envelope,
        "compress": args.compress,
        "cwd": args.cwd.as_ref().map(|c| std::path::absolute(c).unwrap_or_else(|_| c.clone())),
        "messages_at": args.messages_at,
        "from": args.from,
        "guess": rules.input.guess,
        "max_record_bytes": args.max_record_bytes,
    });
    // Named only when set: homes converted before the option existed keep their fingerprint.
    if let Some(map) = options_value.as_object_mut() {
        if args.max_conversation_bytes != crate::source::split::DEFAULT_MAX_CONVERSATION_BYTES {
            map.insert(
                "max_conversation_bytes".into(),
                args.max_conversation_bytes.into(),
            );
        }
        if let Some(model) = &args.model {
            map.insert("model".into(), model.as_str().into());
        }
        // `--cwd` also replaces the folder a Claude Code session records: the fingerprint says
        // so, so that a home whose manifest lacks it is converted again.
        if args.cwd.is_some() {
            map.insert("cwd_overrides_source".into(), true.into());
        }
    }
    pipeline::Fingerprint {
        rules: digest(rules_value),
        options: digest(options_value),
    }
}

/// The shard of this run: `--shard`, or the job engine's index (see [`resolve`]).
fn shard_of(args: &ConvertArgs) -> Result<Option<ShardSource>> {
    let flag = args.shard.map(|s| Shard {
        index: s.index,
        count: s.count,
    });
    resolve(flag, args.shards, |name| std::env::var(name).ok()).map_err(anyhow::Error::msg)
}

/// `shard 2/4 (from SLURM_ARRAY_TASK_ID, count from SLURM_ARRAY_TASK_COUNT)`.
fn shard_line(source: &ShardSource) -> String {
    let from = if source.index_from == source.count_from {
        format!("from {}", source.index_from)
    } else {
        format!(
            "from {}, count from {}",
            source.index_from, source.count_from
        )
    };
    format!("shard {} ({from})", source.shard)
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

/// A progress bar on a terminal, plain log lines (every few seconds) otherwise; nothing but
/// damage (an error) with `--quiet`; a line per input file done with `--verbose`.
struct Reporter {
    bar: Option<ProgressBar>,
    plain: Mutex<PlainState>,
    quiet: bool,
    verbose: bool,
}

struct PlainState {
    started: Instant,
    last: Instant,
    records: u64,
    bytes: u64,
}

impl Reporter {
    fn new(ui: &Ui) -> Reporter {
        let bar = (std::io::stderr().is_terminal() && !ui.quiet).then(|| {
            let bar = ProgressBar::new(0);
            // Two lines, so that 80 columns hold them: the bar measures the input files on disk
            // (its ETA holds for compressed archives); the message counts records and the
            // decompressed bytes the summary will show.
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} ETA {eta}\n  {binary_bytes}/{binary_total_bytes} on disk, {wide_msg}",
                )
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
            }),
            quiet: ui.quiet,
            verbose: ui.verbose,
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// A line above the bar, or on stderr.
    /// A line on stderr; control characters a file name or a reason brought (an escape
    /// sequence, a newline) are shown as escapes, never sent to the terminal.
    fn line(&self, line: String) {
        let line = crate::audit::report::visible(&line);
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }
}

impl Progress for Reporter {
    fn start(&self, files: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
        } else if !self.quiet {
            eprintln!(
                "rollover: {}, {} on disk",
                plural(files, "input file", "input files"),
                bytes(total)
            );
        }
    }

    fn advance(&self, records: u64, read: u64, disk: u64) {
        let Ok(mut s) = self.plain.lock() else { return };
        s.records += records;
        s.bytes += read;
        let secs = s.started.elapsed().as_secs_f64().max(1e-9);
        let rate = s.records as f64 / secs;
        if let Some(bar) = &self.bar {
            bar.set_position(disk);
            bar.set_message(format!(
                "{} ({}/s), {} decompressed",
                plural(s.records, "record", "records"),
                group(rate as u64),
                bytes(s.bytes)
            ));
        } else if !self.quiet && s.last.elapsed() >= Duration::from_secs(5) {
            s.last = Instant::now();
            eprintln!(
                "rollover: {} ({}/s), {} decompressed ({})",
                plural(s.records, "record", "records"),
                group(rate as u64),
                bytes(s.bytes),
                bytes_per_second(s.bytes as f64 / secs)
            );
        }
    }

    fn note(&self, message: &str) {
        if !self.quiet {
            self.line(format!("rollover: {message}"));
        }
    }

    fn damage(&self, damage: &Damage) {
        self.line(format!(
            "rollover: {damage}; the records before it were read"
        ));
    }

    fn file_done(&self, file: &FileCounts) {
        if self.verbose {
            self.line(format!(
                "rollover: done {}: {} = converted {} + quarantined {}",
                file.file,
                plural(file.records, "record", "records"),
                group(file.converted),
                group(file.quarantined)
            ));
        }
    }
}

/// `name count` pairs, counts grouped.
fn counted<'a>(pairs: impl IntoIterator<Item = (&'a String, &'a u64)>) -> Vec<String> {
    pairs
        .into_iter()
        .map(|(k, v)| format!("{k} {}", group(*v)))
        .collect()
}

/// The summary for people: one screen, fitted to the terminal's width, every count grouped,
/// every size in binary units, nothing left out without saying so.
/// The summary's lines, each label in a column and long values wrapped to the width.
struct SummaryLines {
    width: usize,
    lines: Vec<String>,
}

impl SummaryLines {
    fn text(&mut self, label: &str, body: String) {
        let label = format!("{label:<13}");
        self.lines
            .extend(wrap_text("  ", &label, &body, self.width));
    }

    /// An empty list is no line at all, rather than a label with nothing after it.
    fn list(&mut self, label: &str, items: Vec<String>) {
        if !items.is_empty() {
            let label = format!("{label:<13}");
            self.lines
                .extend(wrap_list("  ", &label, &items, self.width));
        }
    }
}

fn print_summary(s: &Summary, args: &ConvertArgs, ui: &Ui, name: &str) -> std::io::Result<()> {
    let mut out = SummaryLines {
        width: ui.width,
        lines: Vec::new(),
    };
    sample_lines(&mut out, s, ui);
    input_lines(&mut out, s, ui);
    result_lines(&mut out, s, ui);
    state_lines(&mut out, s, args, ui);
    let lines = out.lines;
    // `audit` is a dry run by definition: its header says which command ran, and only
    // `convert --dry-run` needs saying that nothing was written.
    outln!(
        "rollover {name}{}",
        if s.setup.dry_run && name == "convert" {
            " (dry run: no rollout written)"
        } else {
            ""
        }
    )?;
    for line in lines {
        outln!("{}", line.trim_end())?;
    }
    Ok(())
}

/// A sampled run says so first, with what it estimates of the full run and how sure it is
/// (the 95 % margins of [`SampleEstimate`]): every count below is the sample's.
fn sample_lines(out: &mut SummaryLines, s: &Summary, ui: &Ui) {
    let Some(estimate) = SampleEstimate::of(s) else {
        return;
    };
    let percent = |share: f64| {
        let text = format!("{:.2}", 100.0 * share);
        let text = text.trim_end_matches('0').trim_end_matches('.');
        format!("{text} %")
    };
    out.text(
        "sampled",
        ui.warn(&format!(
            "{} of conversations ({} of {} audited), estimates ± a 95 % margin: {} ± {} conversations, quarantined {} ± {} of records (Wilson interval {} to {}); the counts below are the sample's",
            percent(estimate.rate),
            plural(estimate.records_audited, "record", "records"),
            group(estimate.records),
            group(estimate.conversations),
            group(estimate.conversations_margin),
            percent(estimate.quarantine_share),
            percent(estimate.quarantine_margin()),
            percent(estimate.quarantine_low),
            percent(estimate.quarantine_high),
        )),
    );
}

/// What was read: rules, files, records, skips, damage.
fn input_lines(out: &mut SummaryLines, s: &Summary, ui: &Ui) {
    out.text(
        "rules",
        format!(
            "{} (Codex {})",
            s.setup.rules.join(", "),
            s.setup.codex_version
        ),
    );
    let mut files = vec![
        format!(
            "{}: {} on disk",
            plural(s.totals.files, "input file", "input files"),
            bytes(s.totals.bytes_on_disk)
        ),
        format!("{} decompressed", bytes(s.totals.bytes_read)),
    ];
    if s.totals.blank_lines > 0 {
        files.push(plural(s.totals.blank_lines, "blank line", "blank lines"));
    }
    out.list("files", files);
    if !crate::audit::summary::only_chat(&s.reading.formats) {
        let formats = s
            .reading
            .formats
            .iter()
            .map(|(f, n)| format!("{f} {}", group(*n)));
        out.list("formats", formats.collect());
    }
    let mut joined = if s.totals.joined > 0 {
        format!(" + batch results joined {}", group(s.totals.joined))
    } else {
        String::new()
    };
    if s.reading.records_merged > 0 {
        joined.push_str(&format!(
            " + merged into a conversation {}",
            group(s.reading.records_merged)
        ));
    }
    let dropped: u64 = s.reading.records_dropped.values().sum();
    if dropped > 0 {
        joined.push_str(&format!(" + dropped by rule {}", group(dropped)));
    }
    let quarantined = format!("quarantined {}", group(s.totals.quarantined));
    out.text(
        "records",
        format!(
            "{} = {} + {}{joined}",
            group(s.totals.records),
            ui.ok(&format!("converted {}", group(s.totals.converted))),
            if s.totals.quarantined > 0 {
                ui.bad(&quarantined)
            } else {
                quarantined
            }
        ),
    );
    for (class, n) in &s.breakdown.quarantine_reasons {
        out.text("", format!("quarantined {class}: {}", group(*n)));
    }
    for (rule, n) in &s.reading.records_dropped {
        out.text("", format!("dropped by {rule}: {}", group(*n)));
    }
    for (path, n) in &s.reading.messages_by_shape {
        out.text("guessed",
            format!(
                "messages found at `{path}` by shape in {}: pass `--messages-at {path}` to make it explicit",
                plural(*n, "record", "records")
            ),
        );
    }
    let other_extensions = s.walk.skipped_other_extensions.values().sum::<u64>();
    let skips = other_extensions
        + s.walk.skipped_hidden
        + s.walk.skipped_symlinks
        + s.walk.skipped_excluded
        + s.walk.skipped_unmatched
        + s.walk.skipped_codex_homes.len() as u64;
    if skips > 0 || !s.walk.unreadable.is_empty() || !s.walk.symlink_loops.is_empty() {
        out.list(
            "skipped",
            [
                (
                    other_extensions,
                    plural(other_extensions, "other extension", "other extensions"),
                ),
                (
                    s.walk.skipped_hidden,
                    format!("{} hidden", group(s.walk.skipped_hidden)),
                ),
                (
                    s.walk.skipped_symlinks,
                    format!("{} symlinks", group(s.walk.skipped_symlinks)),
                ),
                (
                    s.walk.skipped_excluded,
                    format!("{} excluded", group(s.walk.skipped_excluded)),
                ),
                (
                    s.walk.skipped_unmatched,
                    format!("{} matching no --glob", group(s.walk.skipped_unmatched)),
                ),
                (
                    s.walk.skipped_codex_homes.len() as u64,
                    plural(
                        s.walk.skipped_codex_homes.len() as u64,
                        "Codex home",
                        "Codex homes",
                    ),
                ),
                (
                    s.walk.symlink_loops.len() as u64,
                    plural(
                        s.walk.symlink_loops.len() as u64,
                        "symlink loop",
                        "symlink loops",
                    ),
                ),
                (
                    s.walk.unreadable.len() as u64,
                    format!("{} unreadable", group(s.walk.unreadable.len() as u64)),
                ),
            ]
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(_, text)| text)
            .collect(),
        );
    }
    for d in &s.breakdown.damaged_files {
        out.text(
            "damaged",
            format!(
                "{}:{} (byte {}): {}",
                crate::audit::report::visible(&d.file),
                d.line,
                group(d.byte_offset),
                ui.bad(&crate::audit::report::visible(&d.message))
            ),
        );
    }
}

/// What was written: items, phases, rules, violations, text, time.
fn result_lines(out: &mut SummaryLines, s: &Summary, ui: &Ui) {
    out.list("items", counted(&s.breakdown.items));
    out.list("phases", counted(&s.breakdown.phases));
    let mut fired: Vec<(&String, &u64)> = s.breakdown.rules_fired.iter().collect();
    fired.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut shown: Vec<String> = fired
        .iter()
        .take(RULES_SHOWN)
        .map(|(k, v)| {
            // Repairs (policies) stand out from classification rules.
            let name = if k.starts_with("policy.") {
                ui.warn(k)
            } else {
                k.to_string()
            };
            format!("{name} {}", group(**v))
        })
        .collect();
    if fired.len() > RULES_SHOWN {
        shown.push(format!(
            "+{} more (see summary.json)",
            group((fired.len() - RULES_SHOWN) as u64)
        ));
    }
    out.list("rules fired", shown);
    out.list("violations", counted(&s.breakdown.violations));
    if s.totals.converted > 0 {
        out.text(
            "text bytes",
            format!(
                "in {} + added {} = out {} + dropped {}",
                group(s.text.text_bytes_in),
                group(s.text.text_bytes_added),
                group(s.text.text_bytes_out),
                group(s.text.text_bytes_dropped)
            ),
        );
    }
    let secs = s.seconds.max(1e-9);
    out.text(
        "time",
        format!(
            "{:.2} s, {} records/s, {} decompressed",
            s.seconds,
            group((s.totals.records as f64 / secs) as u64),
            bytes_per_second(s.totals.bytes_read as f64 / secs)
        ),
    );
}

/// What the run did to sessions (a dry run: would do), each count with its meaning; counts of
/// zero left out.
fn session_counts(s: &Summary) -> Vec<String> {
    let counts = [
        (s.home.sessions_new, "new"),
        (s.home.sessions_updated, "updated"),
        (s.home.rollouts_unchanged, "unchanged"),
        (s.home.sessions_kept.len() as u64, "kept pending"),
        (s.home.sessions_replaced.len() as u64, "replaced"),
        (s.home.sessions_withheld.len() as u64, "withheld"),
        (s.home.sessions_duplicate, "duplicate"),
        (
            s.home.sessions_left,
            "left (their record is gone; --prune removes them)",
        ),
        (s.home.sessions_pruned.len() as u64, "pruned"),
        (
            s.home.sessions_not_pruned.len() as u64,
            "not pruned (changed in Codex, or open)",
        ),
        (
            s.home.sessions_older.len() as u64,
            "older snapshot, skipped",
        ),
        (s.home.sessions_conflict.len() as u64, "in conflict"),
        (s.home.sessions_split.len() as u64, "split"),
        (s.home.sessions_busy.len() as u64, "busy"),
    ];
    counts
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{} {what}", group(n)))
        .collect()
}

/// The home's state: incremental counts, kept and replaced sessions, where the reports are.
fn state_lines(out: &mut SummaryLines, s: &Summary, args: &ConvertArgs, ui: &Ui) {
    let state = match &s.shard {
        Some(shard) => {
            let shard = Shard {
                index: shard.index,
                count: shard.count,
            };
            args.out.join("rollover/shards").join(shard.folder_name())
        }
        None => args.out.join("rollover"),
    };
    let sessions = session_counts(s);
    if !sessions.is_empty() {
        // A dry run's counts are the plan: what a run would do.
        let label = if s.setup.dry_run { "plan" } else { "sessions" };
        out.text(label, sessions.join(", "));
    }
    if s.home.files_unchanged > 0 {
        out.text(
            "incremental",
            format!(
                "{} unchanged since the manifest recorded them (not read)",
                plural(s.home.files_unchanged, "file", "files")
            ),
        );
    }
    if !s.home.sessions_kept.is_empty() {
        out.text(
            "kept",
            ui.warn(&format!(
                "{} changed in Codex since written, while the source has newer data: kept and pending (--force replaces; listed in the report)",
                plural(s.home.sessions_kept.len() as u64, "session", "sessions")
            )),
        );
    }
    for conflict in &s.home.sessions_conflict {
        out.text(
            "conflict",
            ui.warn(&crate::audit::report::visible(&format!(
                "{} from {} neither extends nor is extended by the version placed (from {}): left as it is, pending (--force writes it, keeping a copy)",
                conflict.path, conflict.source, conflict.other
            ))),
        );
    }
    for busy in &s.home.sessions_busy {
        out.text(
            "busy",
            ui.warn(&crate::audit::report::visible(&format!(
                "{} not replaced: {}; the next run tries again",
                busy.path, busy.reason
            ))),
        );
    }
    if !s.home.sessions_older.is_empty() {
        out.text(
            "older",
            format!(
                "{} older than the version placed: skipped (listed in the report)",
                plural(s.home.sessions_older.len() as u64, "snapshot", "snapshots")
            ),
        );
    }
    if !s.home.sessions_split.is_empty() {
        out.text(
            "split",
            format!(
                "{} under the source id of another in the same input: each kept, under a session of its own",
                plural(s.home.sessions_split.len() as u64, "conversation", "conversations")
            ),
        );
    }
    let carried = &s.carried;
    if carried.carried_quarantined + carried.carried_damaged > 0 {
        out.text(
            "carried",
            ui.warn(&format!(
                "{} quarantined and {} damaged in files not read again (found by earlier runs; listed in the report)",
                plural(carried.carried_quarantined, "record", "records"),
                plural(carried.carried_damaged, "place", "places")
            )),
        );
    }
    if let Some(refused) = &s.home.prune_refused {
        out.text("prune", ui.warn(refused));
    }
    if !s.home.sessions_withheld.is_empty() {
        out.text(
            "withheld",
            format!(
                "{} archived or deleted since written: not written again (--force writes them)",
                plural(s.home.sessions_withheld.len() as u64, "session", "sessions")
            ),
        );
    }
    if !s.home.sessions_replaced.is_empty() {
        out.text(
            "replaced",
            format!(
                "{} (copies in {})",
                plural(
                    s.home.sessions_replaced.len() as u64,
                    "changed session",
                    "changed sessions"
                ),
                state.join("replaced").display()
            ),
        );
    }
    if let Some(signal) = &s.interrupted {
        out.text(
            "interrupted",
            ui.warn(&format!(
                "by {signal}: finished files are recorded; run again to resume"
            )),
        );
    }
    let run = state.join("runs").join(format!("{:04}", s.run));
    out.text("output", args.out.display().to_string());
    out.text("summary", run.join("summary.json").display().to_string());
    if s.totals.quarantined > 0 {
        out.text(
            "quarantine",
            run.join("quarantine.jsonl").display().to_string(),
        );
    }
    // Last, so it is what a person sees at the prompt: the page to open.
    out.text("report", run.join("report.html").display().to_string());
}
