//! The convert pipeline, in three parts: the [`reader`] (one thread: discover order,
//! decompress, split into bounded batches; each file's source format detected at its first
//! record) → [`record`] (the workers, in parallel: [`process_work`] reads a work's records with
//! its format's reader, then converts, renders, validates and accounts each conversation) → the
//! writers (a pool driven from the collector's thread, placing each batch's Codex rollouts while
//! the workers convert the next) → the [`collect`]or (in input order: quarantine lines,
//! conversation lines, counters, `summary.json`).
//!
//! The pipeline knows no format by name: every format, Chat Completions included, is a
//! [`crate::input::FormatReader`], and every unit of work is one [`reader::Records`] (one
//! record of a format read record by record, or a whole file's records when a format's
//! conversations span them) that ends in one [`Outcome`] per record.
//!
//! Records travel in bounded batches ([`reader::Batches`]), so memory stays flat in the
//! archive's size; each converts on one worker, up to `--jobs` + 1 at once, and they are handed
//! on and collected in input order, so every output is deterministic whatever the thread
//! count. Whichever threads set the pace keep the run's priority, the others yield
//! ([`Priorities`]). Each file's first record is looked at before the first batch (Batch API
//! results are read whole ahead of the requests they join). Per-record problems are outcomes,
//! not errors; only discovery, output failures and a panicking stage stop the run.
//!
//! A sharded run (`--shard K/N`) walks every input like any run, then keeps the files (and
//! ranges of split files) its shard owns ([`crate::source::shard`]); it writes its rollouts
//! into the shared home and its state and reports into the shard's own folder, with a
//! `shard.json` that lets `report merge` rebuild the reports of one run. Batch API results
//! files are found among every file of the walk, so that a shard joins its requests with
//! their results wherever those sit; it counts the results of its own results files, and
//! looks in the other shards' files for the requests that claim them ([`claims`]).
//!
//! This file only orchestrates ([`run`]: prepare → execute → finish); each concern has a file
//! (`plan`, `batch_api`, `shard`, `threads`, `handoff`, `placement`, `gate`, `home`, ...); what a
//! run writes is an [`crate::output::Output`], chosen once.

mod batch_api;
pub(crate) mod budget;
pub(crate) mod claims;
pub(crate) mod collect;
mod converted;
mod error;
mod file;
mod gate;
mod handoff;
mod home;
mod options;
mod placement;
mod plan;
mod progress;
pub(crate) mod prune;
pub(crate) mod reader;
pub(crate) mod record;
mod refusal;
mod returns;
mod run_files;
mod shard;
mod signal;
mod summary;
mod threads;

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::audit::Summary;
use crate::input::batch::BatchIndex;
use crate::input::format::FileCache;
/// Test hook: see [`crate::output::failpoint`].
pub use crate::output::failpoint::hit as failpoint;
use crate::output::results_seen::ResultsSeen;
use crate::output::{Guard, Home, Manifest, Output, RunLock};
use crate::rules::RuleSet;
use crate::source::discover::Spool;
use crate::source::{discover, Discovery, ShardPlan, SourceFile};
use collect::Collector;
pub use error::PipelineError;
use error::{interrupted, panicked};
use handoff::{collector, BatchContext};
use home::{check_format, keep_rules, lock_home, record_run, start_run};
pub use options::{Fingerprint, Options};
use plan::{dedupe_keys, note_read_again, note_skipped, nothing_found, plan_files, protected};
pub(crate) use plan::{PlannedFile, Portion};
pub use progress::{FileCounts, Note, PlanCounts, Progress};
use std::collections::HashMap;
use summary::{carried, planned_summary};
use threads::{thread_pool, Priorities, Priority};
pub use {file::process_bytes, record::Outcome, refusal::Refusal, signal::Signal};

/// A run done: its summary, and the signal that stopped it early, if one did.
pub struct Finished {
    pub summary: Summary,
    pub stopped_by: Option<Signal>,
}

/// What the command gave the run, passed through its phases as one value.
#[derive(Clone, Copy)]
struct Request<'a> {
    options: &'a Options,
    rules: &'a RuleSet,
    progress: &'a dyn Progress,
}

/// What [`prepare`] decided, before anything is converted: the [`RunPlan`] every later stage
/// reads, and what [`execute`] and [`finish`] change or use up.
struct Prepared {
    plan: RunPlan,
    manifest: Manifest,
    /// The Batch API results of the walk, kept for what this run counts: the workers join
    /// requests with them, then [`finish`] counts those no request claimed.
    index: BatchIndex,
    /// The summary as far as the plan knows it (files, the walk's skips, the settings).
    summary: Summary,
    /// Held until the run is done: the home's lock, and the copies of streams the reader reads.
    lock: RunLock,
    spools: Vec<Spool>,
}

/// What the run reads and where it writes: fixed once prepared, borrowed by the later stages.
struct RunPlan {
    home: Home,
    /// What the run writes, chosen once from `--format`.
    output: Box<dyn Output>,
    /// The home had no session yet: a dry run's report is its `latest`, as a run's would be.
    fresh: bool,
    shard: Option<ShardPlan>,
    /// Every file of the walk, whatever the shard: Batch API results join requests anywhere,
    /// and `--prune` forgets only files gone from it.
    walk: Vec<SourceFile>,
    /// The files this run reads or leaves unchanged, in input order.
    files: Vec<PlannedFile>,
    guard: Guard,
    /// A shard's record of the other shards' results files, saved when the run is done.
    seen: Option<ResultsSeen>,
    /// Identities whose sessions keep an id of scheme 2 (the manifest's aliases).
    aliases: HashMap<u128, String>,
    /// Paths the walk skipped (unreadable, Codex homes), resolved: no file under one is gone.
    protected: Vec<String>,
}

/// What [`execute`] hands to [`finish`].
struct Executed<'p> {
    /// Every batch in: the report lines written, the counters added up.
    collector: Collector<'p>,
    /// The converting pool: a shard's claims of Batch API results run on it.
    workers: rayon::ThreadPool,
    convert_seconds: f64,
    /// Bytes on disk the reader read, for the last progress update.
    disk_read: u64,
}

/// Runs the whole conversion and returns the summary and what stopped it: [`prepare`] decides what the run reads
/// and takes the output, [`execute`] converts and writes, [`finish`] counts what only the end
/// knows and records the run.
pub fn run(
    options: &Options,
    rules: &RuleSet,
    progress: &dyn Progress,
) -> Result<Finished, PipelineError> {
    let started = Instant::now();
    let request = Request {
        options,
        rules,
        progress,
    };
    let Prepared {
        plan,
        mut manifest,
        index,
        summary,
        lock,
        spools,
    } = prepare(request)?;
    let executed = execute(&plan, &index, &mut manifest, summary, request)?;
    let started = started + lock.waited; // the wait for the lock is not run time
    let finished = finish(&plan, executed, index, &mut manifest, request, started)?;
    drop(lock);
    // The temporary copies of streams are removed only now: the reader is done with them.
    drop(spools);
    Ok(finished)
}

/// The first phase: walks the inputs, takes the output home's lock, reads the manifest,
/// decides which files (and which part of each) the run reads, and finds the Batch API
/// results. Nothing is converted yet; a signal here ends the run with nothing written but the
/// run's folder.
fn prepare(request: Request<'_>) -> Result<Prepared, PipelineError> {
    let Request {
        options, progress, ..
    } = request;
    // Discovery first: a run with nothing to read stops before it writes into the output.
    let discovery = discover(&options.inputs, Some(&options.out), &options.walk)?;
    interrupted(options, "walking the inputs")?;
    let Discovery {
        files: mut walk,
        skipped,
        spools,
    } = discovery;
    if walk.is_empty() && skipped.unreadable.is_empty() && skipped.loops.is_empty() {
        return Err(PipelineError::NothingToDo {
            found: nothing_found(options, &skipped),
        });
    }
    if options.prune {
        if let Some(why) = prune::missing_root(&options.inputs, &walk) {
            return Err(PipelineError::PruneRefused { why });
        }
    }
    let unreadable = note_skipped(&skipped, progress);
    let output = crate::output::for_format(options.format);
    let shard = options.shard.as_ref().map(|source| ShardPlan {
        shard: source.shard,
        split_bytes: options.split_bytes,
        // An output file per input file (Responses bodies): one shard must write all of it.
        split: output.file_per_conversation(),
    });
    let (mut home, lock) = lock_home(options, shard.as_ref(), progress)?;
    let mut manifest = Manifest::load(&home)?;
    check_format(&home, &manifest, output.kind())?;
    let fresh = manifest.files.is_empty() && manifest.orphans.is_empty();
    let (run_number, temporary_files_removed) = start_run(&mut home, &manifest, progress)?;
    dedupe_keys(&mut walk);
    let mut planned = plan_files(
        &walk,
        shard.as_ref(),
        &mut manifest,
        unreadable,
        fresh,
        request,
    );
    interrupted(options, "reading the inputs' digests")?;
    planned.settings_changed = note_read_again(&planned.unsettled, &home, request);
    let mut seen = match shard {
        Some(_) => Some(ResultsSeen::load(&home)?),
        None => None,
    };
    let index = batch_api::scan(
        &walk,
        shard.as_ref(),
        seen.as_mut(),
        &mut planned.files,
        request,
    )?;
    let guard = if options.dry_run {
        Guard::planning(manifest.rollout_digests(), options.force)
    } else {
        Guard::new(manifest.rollout_digests(), options.force)
    };
    let mut summary = planned_summary(
        request,
        &planned,
        &skipped,
        run_number,
        temporary_files_removed,
        output.kind(),
    );
    summary.wait_seconds = lock.waited.as_secs_f64();
    if let Some(shard) = summary.shard.as_mut() {
        shard.inputs = crate::source::shard::walk_fingerprint(&walk);
    }
    // A prune a killed run started is finished before anything else.
    let pruner = prune::Pruner {
        home: &home,
        guard: &guard,
        dry_run: options.dry_run,
    };
    prune::finish_unfinished(&pruner, &mut manifest, &mut summary.home)?;
    summary.carried = carried(&planned.files, &manifest);
    Ok(Prepared {
        plan: RunPlan {
            home,
            output,
            fresh,
            shard,
            walk,
            files: planned.files,
            guard,
            seen,
            aliases: manifest.aliases(),
            protected: protected(&skipped),
        },
        manifest,
        index,
        summary,
        lock,
        spools,
    })
}

/// The second phase: the reader (one thread, with its read-ahead threads) sends the planned
/// files' records in batches; the workers convert each batch in parallel; the collector (a
/// thread of its own) has the writers place the batch's rollouts and records it, in input
/// order, while the workers convert the next. Ends when every file is read, a signal stopped
/// the reader, or a stage failed.
fn execute<'p>(
    plan: &'p RunPlan,
    index: &BatchIndex,
    manifest: &mut Manifest,
    summary: Summary,
    request: Request<'_>,
) -> Result<Executed<'p>, PipelineError> {
    let Request {
        options,
        rules,
        progress,
    } = request;
    let output = &*plan.output;
    let mut collector = collector(plan, summary, manifest, options)?;
    collector.held.files.extend(index.leftovers.keys().copied());
    let to_read = plan.files.iter().filter(|f| !f.skip);
    progress.start(
        to_read.clone().count() as u64,
        to_read.map(|f| f.source.size).sum(),
    );
    let threads = options.jobs.unwrap_or(0);
    let priorities = Priorities::for_jobs(threads);
    let workers = thread_pool(threads, None, priorities.workers)?;
    // Codex rollouts are written by their own pool, on the collector's thread, while the
    // converting pool works on the next batch: a rollout's file is mostly the kernel's work
    // (creating it, copying its bytes into the page cache, the rename), which on one thread
    // would stand in line with the conversion.
    // A dry run's writers only plan: they read what is on disk to decide what a run would do.
    let writers = match output.file_per_conversation() {
        true => Some(thread_pool(threads, Some("rollover-write"), Priority::Run)?),
        false => None,
    };
    let caches: Vec<FileCache> = plan.files.iter().map(|_| FileCache::default()).collect();
    let returns = returns::Returns::new(workers.current_num_threads());
    let context = BatchContext {
        files: &plan.files,
        caches: &caches,
        rules,
        index,
        options,
        returns: &returns,
        aliases: &plan.aliases,
        output,
    };
    let stages = handoff::Stages {
        plan,
        index,
        options,
        progress,
        priorities,
        workers: &workers,
        writers: writers.as_ref(),
    };
    let (read, collected, converting, disk_read) =
        handoff::run(&stages, &context, collector, manifest, &returns);
    if let Err(panic) = read {
        return Err(panicked("reader", panic.as_ref()));
    }
    // The collector's failure came first: it stopped the conversion of later batches.
    let collector = collected?;
    let convert_seconds = converting?;
    Ok(Executed {
        collector,
        workers,
        convert_seconds,
        disk_read,
    })
}

/// The third phase: when no signal stopped the run, counts the Batch API results no request
/// of the run claimed (a shard first looks for their requests in the other shards' files) and
/// prunes with `--prune`; then keeps the rule set, writes the summary and the reports, saves
/// the manifest, points `latest` at the run and removes the oldest run folders (`--keep-runs`).
fn finish(
    plan: &RunPlan,
    executed: Executed<'_>,
    index: BatchIndex,
    manifest: &mut Manifest,
    request: Request<'_>,
    started: Instant,
) -> Result<Finished, PipelineError> {
    let Request {
        options, progress, ..
    } = request;
    let Executed {
        mut collector,
        workers,
        convert_seconds,
        disk_read,
    } = executed;
    let signal = options.stop.load(Ordering::Relaxed);
    if signal == 0 {
        if plan.shard.is_some() {
            batch_api::join(plan, &index, &workers, request);
        }
        batch_api::settle(plan, index, &mut collector, manifest, progress, disk_read)?;
        collector.settle_gone(manifest, options.prune.then_some(options.max_prune))?;
    }
    let stopped_by = Signal::recorded(signal);
    collector.summary.interrupted = stopped_by.map(Signal::name);
    collector.report.convert_seconds = convert_seconds;
    keep_rules(&plan.home, request)?;
    let summary = collector.finish(started.elapsed().as_secs_f64())?;
    record_run(plan, manifest, request)?;
    Ok(Finished {
        summary,
        stopped_by,
    })
}
