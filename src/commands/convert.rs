//! `rollover convert`: the main job.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::json;

use crate::cli::{ConvertArgs, OutputFormat, WireArg};
use crate::commands::ui::Ui;
use crate::commands::{json_with_exit, load_rules, outln, Exit, RunError};
use crate::input::SourceFormat;
use crate::model::responses::{Format, ResponsesOptions, Wire};
use crate::pipeline::{self, Options};
use crate::rules::RuleSet;
use crate::source::shard::{resolve, Shard};
use crate::source::{PathFilter, ShardSource, WalkOptions};

mod review;

/// How many rules "rules fired" names; the rest are counted ("+10 more").
mod progress;
mod summary;

use progress::{Notices, Reporter};
use summary::print_summary;

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

/// Flags that cannot all hold, refused with the reason before anything is read: accepted,
/// one of them would silently do nothing. `dry_run` names the command
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
    let progress = Reporter::new(ui);
    let stop = Arc::new(AtomicUsize::new(0));
    handle_signals(&stop, progress.notices(), ui.quiet)?;
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
        write_through_links: args.write_through_links,
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
            archive: crate::input::format::archive_lines(),
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
    let result = pipeline::run(&options, &rules, &progress).map_err(|err| {
        RunError::from(err).context(format!("converting into {}", args.out.display()))
    });
    progress.finish();
    // With --json, `main` prints the error object for this failure as for any other.
    let pipeline::Finished {
        summary,
        stopped_by,
    } = result?;
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
    let exit = Exit::for_run(&summary, stopped_by, args.max_quarantine_rate);
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

/// SIGINT and SIGTERM ask the run to stop cleanly; a second one stops it at once, saying so
/// first. SIGXFSZ (a file size limit) becomes a write error naming the file instead of
/// killing the process.
fn handle_signals(stop: &Arc<AtomicUsize>, notices: Notices, quiet: bool) -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM, SIGXFSZ};
    for signal in [SIGINT, SIGTERM] {
        // Set in the handler itself: the run sees the first signal however busy the machine.
        signal_hook::flag::register_usize(signal, Arc::clone(stop), signal as usize)
            .context("installing signal handlers")?;
    }
    // What a person pressing Ctrl-C reads: from a thread of its own, since a handler may not
    // print (signal-hook delivers two signals that come before the thread wakes as one).
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .context("installing signal handlers")?;
    std::thread::Builder::new()
        .name("signals".to_string())
        .spawn(move || {
            let mut seen = false;
            for signal in signals.forever() {
                let name = crate::pipeline::Signal::recorded(signal as usize)
                    .map(crate::pipeline::Signal::name)
                    .unwrap_or_default();
                if seen {
                    notices.last(&format!(
                        "rollover: a second {name}: stopping now, without finishing the batch in flight or writing this run's reports; what is placed stays, and the next run converts the rest"
                    ));
                    std::process::exit(128 + signal);
                }
                seen = true;
                if !quiet {
                    notices.say(&format!(
                        "rollover: {name}: finishing the batch in flight, then stopping with the reports marked interrupted (send it again to stop at once)"
                    ));
                }
            }
        })
        .context("starting the signal thread")?;
    signal_hook::flag::register(SIGXFSZ, Arc::new(AtomicBool::new(false)))
        .context("installing signal handlers")?;
    Ok(())
}
