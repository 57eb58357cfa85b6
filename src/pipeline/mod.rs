//! The convert pipeline, in three parts: the [`reader`] (one thread: discover order, decompress,
//! split into bounded batches; each file's source format detected at its first record) →
//! [`record`] (the workers, in parallel: [`process_work`] reads a work's records with its
//! format's reader, then converts, renders, validates and accounts each conversation) → the writers (a pool of `--jobs` threads driven from the collector's thread:
//! each batch's Codex rollouts written while the workers convert the next batch; a dry run's
//! placement that reads nothing from the disk, into a folder the home lacks, is made on the
//! collector's thread itself) → the
//! [`collect`]or (in input order: quarantine lines, conversation lines, counters,
//! `summary.json`).
//!
//! The pipeline knows no format by name: every format, Chat Completions included, is a
//! [`crate::input::FormatReader`], and every unit of work is one [`reader::Records`] (one
//! record of a format read record by record, or a whole file's records when a format's
//! conversations span them) that ends in one [`Outcome`] per record.
//!
//! Records travel in bounded batches (256 records, 512 KiB of short records or 256 KiB with a long
//! one; twice each in a dry run or a run writing Responses bodies), so memory stays flat in the
//! archive's size; each batch converts on one worker, up to
//! `--jobs` + 1 of them at once, so that no worker waits for another's batch, and they are handed
//! on and collected in input order, so every output (rollouts, quarantine, summary) is
//! deterministic whatever the thread count. Whichever threads set the pace keep the run's priority
//! and the others yield to them ([`Priorities`]): with as many workers as cores, the reader and the
//! collector (one thread each) do, and a worker waits for them, never they for a worker; with fewer
//! workers than cores, the workers do. Before the first batch, each file's first record is looked
//! at on `--jobs` threads (Batch API results are read whole ahead of the requests they join).
//! Per-record problems are outcomes, not errors; only discovery, output failures and a panicking
//! stage stop the run.
//!
//! A sharded run (`--shard K/N`) walks every input like any run, then keeps the files (and
//! ranges of split files) its shard owns ([`crate::source::shard`]); it writes its rollouts
//! into the shared home and its state and reports into the shard's own folder, with a
//! `shard.json` that lets `report merge` rebuild the reports of one run. Batch API results
//! files are found among every file of the walk, so that a shard joins its requests with
//! their results wherever those sit; it counts the results of its own results files, and
//! looks in the other shards' files for the requests that claim them ([`claims`]).

pub mod budget;
pub mod claims;
pub mod collect;
mod gate;
pub mod prune;
pub mod reader;
pub mod record;
mod refusal;
mod returns;

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use thiserror::Error;

use crate::audit::summary::{
    Fingerprints, HomeChanges, ReadAgain, SettingsChange, Setup, ShardReport, Totals,
    UnreadableReport, WalkFindings,
};
use crate::audit::Summary;
use crate::input::batch::BatchIndex;
use crate::input::format::FileCache;
use crate::input::SourceFormat;
use crate::model::responses::Format;
use crate::model::Location;
use crate::output::manifest::file_digest_unless;
use crate::output::results_seen::ResultsSeen;
use crate::output::{Guard, Home, Manifest, Output, OutputError, OutputKind, RunLock};
use crate::rules::{InvalidUnicode, RuleSet};
use crate::source::discover::Spool;
use crate::source::{
    discover, open, Compression, Damage, Discovery, ShardPlan, ShardSource, Share, Skipped,
    SourceError, SourceFile, WalkOptions,
};
use collect::Collector;
use reader::Work;
pub use record::{process_bytes, process_work, Outcome, Refusal, WorkContext};

#[derive(Debug, Error)]
pub enum PipelineError {
    /// No input file was found: nothing is written, the run exits 2.
    #[error("no input file to convert: {found}")]
    NothingToDo { found: String },
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("{out} holds the output of --format {found}; write --format {asked} into another --out (the manifest of scheduled runs is per format)")]
    FormatMismatch {
        out: String,
        found: &'static str,
        asked: &'static str,
    },
    /// `--prune` with an input root missing or empty: nothing is read or removed.
    #[error("--prune refused: {why}; nothing was removed. Mount or restore the input, or run without --prune")]
    PruneRefused { why: String },
    #[error("cannot start {threads} worker threads: {message}; pass a smaller --jobs")]
    Pool { threads: usize, message: String },
    /// A signal came while the run was still looking at its inputs, before it converted any:
    /// nothing was written but the run's folder; the lock is released.
    #[error("stopped by {} while {stage}, before anything was converted; run again to convert", signal_name(*signal).unwrap_or_else(|| format!("signal {signal}")))]
    Interrupted { signal: usize, stage: &'static str },
    /// A bug: a stage panicked. The run stops rather than write a summary that looks complete.
    #[error("the {stage} stage failed unexpectedly ({message}); the run stopped and its report is incomplete: please report this with the input that caused it")]
    Panicked {
        stage: &'static str,
        message: String,
    },
}

/// What the caller asks for.
#[derive(Debug, Clone)]
pub struct Options {
    pub inputs: Vec<PathBuf>,
    pub out: PathBuf,
    pub dry_run: bool,
    pub jobs: Option<usize>,
    /// Benchmark baseline: decompress, split, parse, serialise and write each record as is,
    /// through the same reader, batches and writer; no conversion. `samples/bench.sh` compares.
    pub baseline: bool,
    /// Convert every input file, ignoring the manifest (`--full`).
    pub full: bool,
    /// Replace sessions changed on disk, keeping a copy (`--force`).
    pub force: bool,
    /// fsync files and folders (`--durable`).
    pub durable: bool,
    /// The signal that asked the run to stop (0: none yet). Set by the command's handlers.
    pub stop: Arc<AtomicUsize>,
    /// Convert only this share of the records, chosen by a hash of their key (`--sample`).
    pub sample: Option<f64>,
    /// The largest quarantined share the report still calls ready.
    pub max_quarantine_rate: f64,
    /// Short excerpts of quarantined records in the report (`--report-text`).
    pub report_text: bool,
    /// `--review N`: report.html links the review pages the command writes after the run.
    pub review: bool,
    /// Hidden files, symlinks, the key of standard input.
    pub walk: WalkOptions,
    /// What the last stage writes (`--format`).
    pub format: Format,
    /// The source format of every input (`--from`); detected per file when `None`.
    pub from: Option<SourceFormat>,
    /// This run is one shard of a sharded run (`--shard`, or the engine's index).
    pub shard: Option<ShardSource>,
    /// A sharded run splits files larger than this into ranges of this size (`--split-bytes`).
    pub split_bytes: u64,
    /// A longer record is quarantined unread (`--max-record-bytes`).
    pub max_record_bytes: u64,
    /// A file whose format spans it with one conversation, longer than this, is refused
    /// (`--max-conversation-bytes`): it would be held whole.
    pub max_conversation_bytes: u64,
    /// The memory the run may hold for work read whole and large records (`--memory`,
    /// [`budget`]).
    pub memory: u64,
    /// Remove the sessions whose records are gone from the inputs (`--prune`).
    pub prune: bool,
    /// At most this many sessions one `--prune` removes (`--max-prune`).
    pub max_prune: prune::MaxPrune,
    /// What makes this run's output what it is, beside the inputs: a file the manifest
    /// recorded under another fingerprint is converted again.
    pub fingerprint: Fingerprint,
    /// How long to wait for another run's lock on the output (`--wait`; zero: not at all).
    pub wait: std::time::Duration,
    /// Keep at most this many run folders, removing the oldest (`--keep-runs`).
    pub keep_runs: Option<usize>,
}

/// The fingerprints of what converts the inputs: the resolved rule set, and every option that
/// changes output (`--cwd`, `--format`, `--wire`, `--messages-at`, ...). Each is a digest
/// (hex); the manifest records both for every file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fingerprint {
    pub rules: String,
    pub options: String,
}

/// What part of one input file a run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Portion {
    /// The file's place among every file the walk found (the same in every shard).
    pub index: usize,
    /// Only the shard's ranges of a split file.
    pub ranges: bool,
    /// The file counts in this run's file-level numbers (files, bytes on disk, files done).
    pub counted: bool,
}

/// Progress callbacks; the command decides how to show them.
pub trait Progress: Sync {
    fn start(&self, files: u64, bytes: u64);
    /// `records` and `bytes` (decompressed) done in this batch; `disk` bytes of the input files
    /// read so far in all (compressed bytes for compressed files).
    fn advance(&self, records: u64, bytes: u64, disk: u64);
    fn damage(&self, damage: &Damage);
    /// Something the user should know that is not a problem with a record.
    fn note(&self, message: &str);
    /// Every record of one input file is done (`--verbose` shows it).
    fn file_done(&self, _file: &FileCounts) {}
}

/// One input file's records, once all are done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileCounts {
    /// The file as the reports name it.
    pub file: String,
    pub records: u64,
    pub converted: u64,
    pub quarantined: u64,
}

/// One input file as the run plans it. The reader, the workers and the collector number the
/// run's files by their place in one `[PlannedFile]`, so what the run knows of a file travels
/// together instead of in vectors kept aligned by hand.
#[derive(Debug, Clone)]
pub struct PlannedFile {
    pub source: SourceFile,
    /// What part of it this run reads.
    pub portion: Portion,
    /// Unchanged since the manifest recorded it, under this run's settings: not read.
    pub skip: bool,
    /// Its content digest, recorded in the manifest with the sessions it converts to (the
    /// manifest's own, when its size and mtime are unchanged). Empty when it is not known
    /// before the file is read: then `read_digest` is where the reader leaves it.
    pub digest: String,
    /// A whole file the manifest does not know, in a writing run: its digest is taken by the
    /// reader as it reads the file ([`crate::source::open::open_hashing`]), not by reading it
    /// once more before; the collector records it at the file's end.
    pub read_digest: Option<crate::source::DigestSlot>,
    /// A file the manifest lists under scheme 2: the session ids it lists, which its
    /// conversations keep ([`crate::convert::Naming`]).
    pub legacy: Option<Arc<HashSet<String>>>,
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

/// Runs the whole conversion and returns the summary: [`prepare`] decides what the run reads
/// and takes the output, [`execute`] converts and writes, [`finish`] counts what only the end
/// knows and records the run.
pub fn run(
    options: &Options,
    rules: &RuleSet,
    progress: &dyn Progress,
) -> Result<Summary, PipelineError> {
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
    let summary = finish(&plan, executed, index, &mut manifest, request, started)?;
    drop(lock);
    // The temporary copies of streams are removed only now: the reader is done with them.
    drop(spools);
    Ok(summary)
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
    let started = home.start_run()?;
    for stray in &started.stray {
        progress.note(&format!(
            "skipped {stray}: it is named as a run folder but is not a folder"
        ));
    }
    let run_number = started.number;
    // A killed run (or one whose manifest had to be recovered) may have left temporary files.
    let temporary_files_removed = if manifest.recovered || started.killed {
        home.remove_temporary_files()?
    } else {
        0
    };
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
    let index = scan_results(
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
    let protected = skipped
        .codex_homes
        .iter()
        .chain(skipped.unreadable.iter().map(|u| &u.path))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .map(|p| p.display().to_string())
        .collect();
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
            protected,
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
    let collector = collector(plan, summary, manifest, options)?;
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
        output: &*output,
    };
    let (read, collected, converting, disk_read) = std::thread::scope(|scope| {
        let reader = reader::spawn(
            scope,
            reader::Plan {
                files: &plan.files,
                index,
                shard: plan.shard,
                stop: Arc::clone(&options.stop),
                from: options.from,
                max_record_bytes: options.max_record_bytes,
                max_conversation_bytes: options.max_conversation_bytes,
                budget: budget::Budget::new(options.memory),
                // Decompressing takes 25-40 % of a record's CPU (zstd; 181 M instructions to
                // the worker's 276 M on agent transcripts, 158 M to 464 M on small records):
                // half as many files at once as workers keep them fed, and leave 2 cores
                // uncrowded.
                readers: workers.current_num_threads().div_ceil(2),
                priority: priorities.serial,
                batches: reader::Batches::for_run(options.dry_run, output.file_per_conversation()),
            },
        );
        // The ordered collector runs on its own thread, fed in batch order through a channel
        // of one: it places batch n's rollouts and records the batch while the workers convert
        // batch n+1 (on the main thread, it was ~5-15 % of a run spent with every worker idle).
        let (to_collector, converted) = sync_channel::<ConvertedBatch>(1);
        let writers = writers.as_ref();
        let returns = &returns;
        let collecting = scope.spawn(move || {
            priorities.serial.apply();
            collect(
                converted, collector, writers, plan, manifest, progress, returns,
            )
        });
        let converting = convert(&reader, &context, &workers, &to_collector);
        drop(to_collector);
        let collected = match collecting.join() {
            Ok(done) => done.map_err(PipelineError::from),
            Err(panic) => Err(panicked("collect", panic.as_ref())),
        };
        // Dropping the receiver unblocks a reader still sending, so the join below returns.
        drop(reader.batches);
        let read = reader.handle.join();
        let disk_read = reader.disk_read.load(Ordering::Relaxed);
        (read, collected, converting, disk_read)
    });
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
/// prunes with `--prune`; then writes the summary and the reports, saves the manifest, points
/// `latest` at the run and removes the oldest run folders (`--keep-runs`).
fn finish(
    plan: &RunPlan,
    executed: Executed<'_>,
    index: BatchIndex,
    manifest: &mut Manifest,
    request: Request<'_>,
    started: Instant,
) -> Result<Summary, PipelineError> {
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
            claim_in_other_shards(plan, &index, &workers, request);
        }
        count_results(plan, index, &mut collector, manifest, progress, disk_read)?;
        if options.prune {
            collector.prune_gone(manifest, options.max_prune)?;
        }
    }
    collector.summary.interrupted = signal_name(signal);
    collector.report.convert_seconds = convert_seconds;
    let summary = collector.finish(started.elapsed().as_secs_f64())?;
    record_run(plan, manifest, request)?;
    Ok(summary)
}

/// A shard's Batch API results that no request of its own claimed: their requests are looked
/// for in the files of the walk it did not convert ([`claims`]), on the workers.
fn claim_in_other_shards(
    plan: &RunPlan,
    index: &BatchIndex,
    workers: &rayon::ThreadPool,
    request: Request<'_>,
) {
    let unclaimed = index.unclaimed();
    if unclaimed > 0 {
        request.progress.note(&format!(
            "{unclaimed} Batch API results of this shard's files have no request in them: looking for their requests in the other shards' files"
        ));
    }
    // The files of the walk this run converts whole (not a split file's ranges): their
    // requests joined already.
    let mut converted = vec![false; plan.walk.len()];
    for file in plan.files.iter().filter(|f| !f.portion.ranges) {
        if let Some(whole) = converted.get_mut(file.portion.index) {
            *whole = true;
        }
    }
    let walk = claims::Walk {
        files: &plan.walk,
        converted: &converted,
    };
    workers.install(|| claims::claim_elsewhere(index, &walk, request.rules, request.options));
}

/// Records the finished run in the home: the manifest saved and `latest` pointed at the run
/// (a dry run's only in a fresh home; otherwise `latest-plan`), the oldest run folders
/// removed (`--keep-runs`).
fn record_run(
    plan: &RunPlan,
    manifest: &mut Manifest,
    request: Request<'_>,
) -> Result<(), PipelineError> {
    let Request {
        options, progress, ..
    } = request;
    let home = &plan.home;
    if !options.dry_run {
        manifest.save(home)?;
        if let Some(seen) = &plan.seen {
            seen.save(home)?;
        }
        home.mark_latest()?;
    } else if plan.fresh {
        home.mark_latest()?;
    } else {
        // A plan leaves `latest` on the last real run.
        home.mark_link(crate::output::home::LATEST_PLAN)?;
    }
    if let Some(keep) = options.keep_runs {
        let removed = home.prune_runs(keep)?;
        match removed.len() {
            0 => {}
            1 => progress.note(&format!(
                "removed the oldest run folder, keeping {keep} (--keep-runs)"
            )),
            n => progress.note(&format!(
                "removed the {n} oldest run folders, keeping {keep} (--keep-runs)"
            )),
        }
    }
    Ok(())
}

/// The output home of the run (a shard's own folder in a sharded run), its linked folders
/// checked, and its lock, waiting for another run's as `--wait` says.
fn lock_home(
    options: &Options,
    shard: Option<&ShardPlan>,
    progress: &dyn Progress,
) -> Result<(Home, RunLock), PipelineError> {
    let mut home = match shard {
        Some(plan) => Home::for_shard(&options.out, &plan.shard.folder_name()),
        None => Home::new(&options.out),
    };
    home.durable = options.durable;
    for note in home.check_linked_folders(options.walk.follow)? {
        progress.note(&note);
    }
    let lock = RunLock::acquire_within(&home, options.wait, &options.stop, |pid| {
        progress.note(&RunLock::waiting_note(&home, pid, options.wait));
    })?;
    if let Some(pid) = lock.taken_over_from {
        progress.note(&format!(
            "took over the lock left by pid {pid}, which is no longer running"
        ));
    }
    Ok((home, lock))
}

/// Says what the walk left out; returns the paths it could not read, for the summary.
fn note_skipped(skipped: &Skipped, progress: &dyn Progress) -> Vec<UnreadableReport> {
    for note in skipped.notes() {
        progress.note(&note);
    }
    for path in &skipped.loops {
        progress.note(&format!("symlink loop at {path}: skipped"));
    }
    let unreadable: Vec<UnreadableReport> = skipped
        .unreadable
        .iter()
        .map(|u| UnreadableReport {
            path: u.path.clone(),
            message: u.message.clone(),
        })
        .collect();
    note_unreadable(&unreadable, progress);
    unreadable
}

fn note_unreadable(unreadable: &[UnreadableReport], progress: &dyn Progress) {
    for entry in unreadable {
        progress.note(&format!(
            "cannot read {}: {}; skipped",
            entry.path, entry.message
        ));
    }
}

/// What [`plan_files`] decided.
struct Planned {
    files: Vec<PlannedFile>,
    /// The paths the walk and the plan could not read, the walk's first.
    unreadable: Vec<UnreadableReport>,
    /// Files read again though unchanged, and why.
    unsettled: Unsettled,
    settings_changed: Vec<SettingsChange>,
}

/// The files of the walk this run reads ([`select`], [`plan`]), said to the user as they are
/// decided: the files that cannot be read (`unreadable`: the walk's, to which the plan's are
/// added), then the plan's line.
fn plan_files(
    walk: &[SourceFile],
    shard: Option<&ShardPlan>,
    manifest: &mut Manifest,
    mut unreadable: Vec<UnreadableReport>,
    fresh: bool,
    request: Request<'_>,
) -> Planned {
    let Request {
        options, progress, ..
    } = request;
    // A dry run (and `audit`) reads every input: its report is the plan of the whole run.
    let full = options.full || options.dry_run;
    let reading = Reading {
        full,
        dry_run: options.dry_run,
        fingerprint: &options.fingerprint,
        stop: &options.stop,
    };
    let walk_unreadable = unreadable.len();
    let mut unsettled = Unsettled::default();
    let files = plan(
        walk,
        select(walk, shard),
        manifest,
        reading,
        &mut unreadable,
        &mut unsettled,
    );
    note_unreadable(&unreadable[walk_unreadable..], progress);
    if !fresh {
        progress.note(&plan_line(&files, manifest, full));
    }
    Planned {
        files,
        unreadable,
        unsettled,
        settings_changed: Vec::new(),
    }
}

/// Says why files unchanged since the last run are read again: the settings that changed
/// since (returned, for the summary), and the files with sessions kept pending.
fn note_read_again(
    unsettled: &Unsettled,
    home: &Home,
    request: Request<'_>,
) -> Vec<SettingsChange> {
    let Request {
        options, progress, ..
    } = request;
    let settings_changed = unsettled.changes(home);
    for change in &settings_changed {
        let since = match change.since_run {
            0 => "an earlier run".to_string(),
            n => format!("run {n:04}"),
        };
        let verb = if options.dry_run {
            "would be converted again"
        } else {
            "converted again"
        };
        progress.note(&format!(
            "{} changed since {since}: {} {verb}",
            change.what,
            crate::audit::summary::files_phrase(change.files),
        ));
    }
    if unsettled.pending > 0 {
        progress.note(&format!(
            "{} with sessions kept pending (changed in Codex since, in conflict with another file's version, or open in another process): read again; --force replaces those changed or in conflict",
            crate::audit::summary::files_phrase(unsettled.pending),
        ));
    }
    settings_changed
}

/// The Batch API results of every file of the walk, kept for what this run counts. When a
/// results file changed since the last run, every planned file is read again (`files`' skips
/// cleared): its requests may be anywhere. A shard knows its own results files' changes from
/// its manifest, the others' from what it saw of them last.
fn scan_results(
    walk: &[SourceFile],
    shard: Option<&ShardPlan>,
    mut seen: Option<&mut ResultsSeen>,
    files: &mut [PlannedFile],
    request: Request<'_>,
) -> Result<BatchIndex, PipelineError> {
    let Request { options, rules, .. } = request;
    let repair = rules.policy.invalid_unicode == InvalidUnicode::Replace;
    // Every file's first record is looked at on `--jobs` threads (one for a single file).
    let threads = if walk.len() > 1 {
        options.jobs.unwrap_or(0)
    } else {
        1
    };
    let pool = thread_pool(threads, None, Priority::Run)?;
    let mut index = BatchIndex::scan(
        walk,
        &rules.input,
        repair,
        options.max_record_bytes,
        &options.stop,
        &pool,
    );
    interrupted(options, "looking for Batch API results")?;
    // Each file of the walk's index among this run's files, if it reads it.
    let mut run_of = vec![None; walk.len()];
    for (i, file) in files.iter().enumerate() {
        if let Some(slot) = run_of.get_mut(file.portion.index) {
            *slot = Some(i);
        }
    }
    let mut results_changed = false;
    for &w in index.results_files() {
        let file = &walk[w];
        let changed = match (run_of[w], seen.as_deref_mut()) {
            (Some(i), _) => !files[i].skip,
            (None, Some(seen)) => seen.changed(&file.key, file.size, file.mtime_ns, &file.path),
            // Unsharded, a file the plan could not read: it is not converted.
            (None, None) => false,
        };
        results_changed |= changed;
    }
    if results_changed {
        files.iter_mut().for_each(|f| f.skip = false);
    }
    // The results of a file left out (unchanged) were counted when it was read.
    index.keep(&run_of, |w, location| {
        run_of[w].is_some_and(|i| !files[i].skip) && owns_result(shard, &walk[w], location)
    });
    Ok(index)
}

/// The summary as the plan knows it, before anything is converted.
fn planned_summary(
    request: Request<'_>,
    planned: &Planned,
    skipped: &Skipped,
    run: u32,
    temporary_files_removed: u64,
    kind: OutputKind,
) -> Summary {
    let Request { options, rules, .. } = request;
    let counted = || planned.files.iter().filter(|f| f.portion.counted);
    Summary {
        setup: Setup {
            schema_version: crate::audit::summary::SCHEMA_VERSION,
            rules: rules.names.clone(),
            rule_digests: rules.digests.clone(),
            codex_version: rules.codex_version.clone(),
            dry_run: options.dry_run,
        },
        totals: Totals {
            files: counted().count() as u64,
            bytes_on_disk: counted().filter(|f| !f.skip).map(|f| f.source.size).sum(),
            ..Totals::default()
        },
        run,
        home: HomeChanges {
            files_unchanged: counted().filter(|f| f.skip).count() as u64,
            prune: options.prune,
            ..HomeChanges::default()
        },
        read_again: ReadAgain {
            settings_changed: planned.settings_changed.clone(),
            files_pending: planned.unsettled.pending,
        },
        fingerprint: Fingerprints {
            rules: options.fingerprint.rules.clone(),
            options: options.fingerprint.options.clone(),
        },
        temporary_files_removed,
        sample_rate: options.sample.unwrap_or(1.0),
        walk: WalkFindings {
            skipped_other_extensions: skipped.other_extensions.clone(),
            skipped_hidden: skipped.hidden,
            skipped_symlinks: skipped.symlinks,
            skipped_excluded: skipped.excluded,
            skipped_unmatched: skipped.unmatched,
            skipped_codex_homes: skipped.codex_homes.clone(),
            symlink_loops: skipped.loops.clone(),
            unreadable: planned.unreadable.clone(),
        },
        shard: options.shard.as_ref().map(|source| ShardReport {
            index: source.shard.index,
            count: source.shard.count,
            index_from: source.index_from.to_string(),
            count_from: source.count_from.to_string(),
            split_bytes: options.split_bytes,
            rollover_version: env!("CARGO_PKG_VERSION").to_string(),
            format: kind.name().to_string(),
            max_quarantine_rate: options.max_quarantine_rate,
            report_text: options.report_text,
            walk_unreadable: skipped.unreadable.len(),
            inputs: String::new(),
        }),
        ..Summary::default()
    }
}

/// The collector of the run's outcomes, in the run's report folder.
fn collector<'p>(
    plan: &'p RunPlan,
    summary: Summary,
    manifest: &Manifest,
    options: &Options,
) -> Result<Collector<'p>, OutputError> {
    let mut collector = Collector::new(
        &plan.home,
        summary,
        &plan.files,
        &plan.guard,
        &*plan.output,
        manifest,
    )?;
    collector.fingerprint = options.fingerprint.clone();
    collector.walked = plan.walk.iter().map(|f| f.origin.clone()).collect();
    collector.protected = plan.protected.clone();
    collector.report.max_quarantine_rate = options.max_quarantine_rate;
    collector.report.report_text = options.report_text;
    collector.report.review = options.review;
    Ok(collector)
}

/// A pool of `threads` threads (0: one per core), named `{name}-{i}` when named, each at
/// `priority`.
fn thread_pool(
    threads: usize,
    name: Option<&'static str>,
    priority: Priority,
) -> Result<rayon::ThreadPool, PipelineError> {
    let mut builder = rayon::ThreadPoolBuilder::new().num_threads(threads);
    if let Some(name) = name {
        builder = builder.thread_name(move |i| format!("{name}-{i}"));
    }
    if priority == Priority::Lowered {
        builder = builder.start_handler(move |_| priority.apply());
    }
    builder.build().map_err(|e| PipelineError::Pool {
        threads,
        message: e.to_string(),
    })
}

/// A thread's priority in the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Priority {
    /// The run's own: the process's nice value.
    Run,
    /// [`YIELD_NICE`] below the run's.
    Lowered,
}

impl Priority {
    /// Sets the calling thread's priority. On Linux the threads it starts afterwards start at
    /// its nice value: the reader's read-ahead threads take the reader's.
    pub(crate) fn apply(self) {
        match self {
            Priority::Run => {}
            Priority::Lowered => lower_this_thread(YIELD_NICE),
        }
    }
}

/// The priorities of a run's two kinds of threads: the converting workers (`--jobs` of them)
/// and the serial threads (the reader and its read-ahead threads, the collector), one each
/// of which the pipeline cannot do without. The main thread, which hands batches on, and the
/// pool that writes rollouts keep the run's priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Priorities {
    workers: Priority,
    serial: Priority,
}

impl Priorities {
    /// For `--jobs` (0: one per core), whichever kind sets the pace keeps the run's priority,
    /// and the other yields to it ([`YIELD_NICE`]):
    /// - as many workers as the cores the process may run on (or more): the serial threads
    ///   set the pace, and the workers yield, so that the reader and the collector get a core
    ///   when they need one. Below them a lone worker (`-j 1` on 2 cores) ran only while both
    ///   waited, on one core of two (agent transcripts to Responses bodies: 0.50 s against
    ///   0.47-0.48 s, best of 8, interleaved).
    /// - fewer workers: they are the pace (a record's conversion costs more than its reading),
    ///   and the serial threads, which have the cores the workers leave, yield. Agent
    ///   transcripts to Responses bodies at `-j 1` on 2 cores: median 0.52-0.53 s -> 0.475-0.48 s
    ///   (14 and 10 runs, interleaved); small records' dry run and bodies within 1.5 %.
    fn for_jobs(jobs: usize) -> Priorities {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        match jobs == 0 || jobs >= cores {
            true => Priorities {
                workers: Priority::Lowered,
                serial: Priority::Run,
            },
            false => Priorities {
                workers: Priority::Run,
                serial: Priority::Lowered,
            },
        }
    }
}

/// How far below the run's other threads the threads that yield run, in nice values. The
/// reader (decompressing and splitting) and the collector are one thread each; the workers
/// are `--jobs` threads, and the pipeline is as fast as the slowest of them. At equal
/// priority, the reader of agent transcripts (~40 % of a dry run's CPU: it needs most of a
/// core while two workers share the other) shared its core with a worker, and the workers
/// then waited for its batches: a dry run on 2 cores took 0.45-0.49 s, and 0.41-0.42 s with
/// the workers at +10, for the same CPU. +10 leaves room for the collector and the main
/// thread too; a thread that yields runs as fast as ever on an idle core. The measurements:
/// samples/BENCHMARKS.md.
///
/// On Linux a nice value is a thread's own, and it orders the process's threads against
/// those of the same group only (the session's autogroup, or a cgroup with the CPU
/// controller: a Slurm job, a Kubernetes pod, a systemd service). Elsewhere nothing is
/// changed: there it would lower the whole process.
const YIELD_NICE: i32 = 10;

/// Lowers the calling thread's priority by `by` nice values (to 19 at most). Raising one's
/// own nice value needs no privilege; where it is refused (a sandbox filtering the call),
/// the thread keeps the run's priority, and only the threads' order on a busy core changes.
fn lower_this_thread(by: i32) {
    #[cfg(target_os = "linux")]
    {
        let thread = rustix::thread::gettid();
        if let Ok(nice) = rustix::process::getpriority_process(Some(thread)) {
            let _ = rustix::process::setpriority_process(Some(thread), (nice + by).min(19));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = by;
}

/// The workers' loop, on the calling thread: each batch the reader sends is converted on the
/// pool and sent on to the collector, until the reader is done or the collector hangs up (it
/// failed, and says why when joined). Returns the seconds spent converting, or the failure
/// of a worker.
fn convert(
    reader: &reader::Reader<'_>,
    context: &BatchContext<'_>,
    workers: &rayon::ThreadPool,
    to_collector: &SyncSender<ConvertedBatch>,
) -> Result<f64, PipelineError> {
    // Batches are converted a window at a time and handed on in order, each on one worker:
    // with one batch at a time, every worker but the one on its last record waited at the
    // end of each batch; with a batch's works spread over the workers, a record's bytes,
    // tape and outcome crossed cores (small records' workers took ~20 % more CPU at `-j 2`
    // than at `-j 1`). One more batch than workers waits in the pool's queue, so that a worker
    // done with its batch starts the next before this thread wakes to hand it on.
    let window = workers.current_num_threads() + 1;
    let (done, finished) = std::sync::mpsc::channel::<(usize, Vec<Work>, Converting)>();
    let mut flight = InFlight::default();
    workers.in_place_scope(|scope| {
        let mut going = true;
        for seq in 0.. {
            while flight.count >= window {
                flight.receive(&finished);
                going = going && flight.hand_on(reader, context, to_collector)?;
            }
            if !going {
                break;
            }
            // While the reader has nothing yet, batches that came back are handed on: a
            // reader waiting for `--memory` ([`budget`]) waits for them to be written.
            let batch = loop {
                match reader.batches.recv_timeout(HAND_ON_EVERY) {
                    Ok(batch) => break Some(batch),
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break None,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        while flight.try_receive(&finished) {}
                        going = going && flight.hand_on(reader, context, to_collector)?;
                        if !going {
                            break None;
                        }
                    }
                }
            };
            let Some(batch) = batch else {
                break;
            };
            flight.busy_since.get_or_insert_with(Instant::now);
            flight.count += 1;
            let done = done.clone();
            scope.spawn(move |_| {
                let mut batch = batch;
                let caught = catch_unwind(AssertUnwindSafe(|| convert_batch(&mut batch, context)));
                // The receiver lives until every batch spawned is back.
                let _ = done.send((seq, batch, caught));
            });
        }
        while flight.count > 0 {
            flight.receive(&finished);
            if going {
                going = flight.hand_on(reader, context, to_collector)?;
            }
        }
        Ok(flight.seconds)
    })
}

/// A batch's outcomes, or the panic that stopped its conversion.
type Converting = std::thread::Result<BatchOutcomes>;

/// How often the converting loop, waiting for the reader, hands on the batches back.
const HAND_ON_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// The batches being converted, and those converted before their turn to be handed on.
#[derive(Default)]
struct InFlight {
    waiting: std::collections::BTreeMap<usize, (Vec<Work>, Converting)>,
    /// The next batch to hand on.
    next: usize,
    /// Batches spawned and not back yet.
    count: usize,
    /// Time with at least one batch converting (the report's estimate of a sampled run).
    seconds: f64,
    busy_since: Option<Instant>,
}

impl InFlight {
    /// Takes a batch that came back, if one did; false when none has.
    fn try_receive(&mut self, finished: &Receiver<(usize, Vec<Work>, Converting)>) -> bool {
        match finished.try_recv() {
            Ok(back) => {
                self.back(Some(back));
                true
            }
            Err(_) => false,
        }
    }

    /// Waits for a batch to come back.
    fn receive(&mut self, finished: &Receiver<(usize, Vec<Work>, Converting)>) {
        self.back(finished.recv().ok());
    }

    /// A batch came back (`None`: its worker is gone).
    fn back(&mut self, back: Option<(usize, Vec<Work>, Converting)>) {
        if let Some((seq, batch, caught)) = back {
            self.waiting.insert(seq, (batch, caught));
        }
        self.count -= 1;
        if self.count == 0 {
            self.seconds += self
                .busy_since
                .take()
                .map_or(0.0, |since| since.elapsed().as_secs_f64());
        }
    }

    /// Hands on the batches that are next in order; false once the collector is gone.
    fn hand_on(
        &mut self,
        reader: &reader::Reader<'_>,
        context: &BatchContext<'_>,
        to_collector: &SyncSender<ConvertedBatch>,
    ) -> Result<bool, PipelineError> {
        while let Some((batch, caught)) = self.waiting.remove(&self.next) {
            self.next += 1;
            // Batches are handed on in order: a file whose end is in this one has nothing
            // left to read (a zip export's directory and handle are let go here, not at the
            // run's end).
            for work in &batch {
                if let Work::FileEnd(file) = work {
                    if let Some(cache) = context.caches.get(*file) {
                        cache.clear();
                    }
                }
            }
            let (outcomes, owners) = caught.map_err(|panic| panicked("convert", panic.as_ref()))?;
            let converted = ConvertedBatch {
                batch,
                outcomes,
                owners,
                disk_read: reader.disk_read.load(Ordering::Relaxed),
            };
            if to_collector.send(converted).is_err() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The collector's loop, on its own thread: in batch order, marks the sessions an earlier
/// conversation of the run placed, has the writers place the rest, and records the batch.
fn collect<'p>(
    converted: Receiver<ConvertedBatch>,
    mut collector: Collector<'p>,
    writers: Option<&rayon::ThreadPool>,
    plan: &'p RunPlan,
    manifest: &mut Manifest,
    progress: &dyn Progress,
    returns: &returns::Returns,
) -> Result<Collector<'p>, OutputError> {
    let mut gate = gate::Gate::new(&plan.files, &plan.guard, manifest, plan.guard.force());
    for mut done in converted.iter() {
        if let Some(writers) = writers {
            gate.admit(&done.batch, &mut done.outcomes);
            // A placement that reads nothing from the disk (a dry run's into a fresh home)
            // costs about a microsecond: handing it to the pool cost more (a wake-up of its
            // threads and of this one per batch; small records' dry run took ~7 % longer).
            place_batch_here(&mut done.outcomes, &plan.home, &plan.guard)?;
            if converted_mut(&mut done.outcomes).any(|done| done.placed.is_none()) {
                writers.install(|| place_batch(&mut done.outcomes, &plan.home, &plan.guard))?;
            }
        }
        collector.batch(
            &done.batch,
            &mut done.outcomes,
            progress,
            done.disk_read,
            manifest,
        )?;
        for (outcomes, owner) in done.outcomes.into_iter().zip(done.owners) {
            returns.give_back(owner, outcomes);
        }
    }
    Ok(collector)
}

/// Counts the Batch API results this run counts, once every file's report lines are in, as
/// in an unsharded run: one segment per results file (per range, split), at a place past the
/// walk's files (a segment's file past the run's files is its place itself), so that `report
/// merge` orders the shards' results as the walk does.
fn count_results(
    plan: &RunPlan,
    index: BatchIndex,
    collector: &mut Collector<'_>,
    manifest: &mut Manifest,
    progress: &dyn Progress,
    disk_read: u64,
) -> Result<(), OutputError> {
    let groups = index.into_groups(|result| {
        let file = &plan.walk[result.walk_file];
        let range = match &plan.shard {
            Some(shard) if shard.is_split(file) => {
                shard.range_of(result.record.location.byte_offset)
            }
            Some(_) | None => 0,
        };
        (result.walk_file, range)
    });
    for ((w, range), group) in groups {
        let segment = [Work::Segment(plan.walk.len() + w, range)];
        collector.batch(&segment, &mut [Vec::new()], progress, disk_read, manifest)?;
        collector.batch_results(&group)?;
    }
    Ok(())
}

/// Whether this run counts the Batch API result at `location` of `file`: every result in an
/// unsharded run; in a shard, those of its own files, and of its own ranges of a split file.
fn owns_result(shard: Option<&ShardPlan>, file: &SourceFile, location: &Location) -> bool {
    match shard {
        None => true,
        Some(plan) if plan.is_split(file) => {
            plan.owns_range(&file.key, plan.range_of(location.byte_offset))
        }
        Some(plan) => plan.file_owner(&file.key) == plan.shard.index,
    }
}

/// The files this run reads, and what part of each: every file whole in an unsharded run;
/// a shard keeps its own files and the split files one of whose ranges it owns.
fn select(walk: &[SourceFile], shard: Option<&ShardPlan>) -> Vec<Portion> {
    let Some(shard) = shard else {
        return (0..walk.len())
            .map(|index| Portion {
                index,
                ranges: false,
                counted: true,
            })
            .collect();
    };
    let mut portions = Vec::new();
    for (index, file) in walk.iter().enumerate() {
        // Only a split file is opened here, to see whether its size counts its ranges.
        let compressed = shard.is_split(file)
            && open(&file.path).map_or(true, |o| o.compression != Compression::None);
        let share = shard.share(file, compressed);
        if share != Share::None {
            portions.push(Portion {
                index,
                ranges: share == Share::Ranges,
                counted: shard.counts_file(file),
            });
        }
    }
    portions
}

/// Files read again though unchanged: their rules or options changed, or sessions of theirs
/// are pending.
#[derive(Debug, Default)]
struct Unsettled {
    /// (what changed, the rules and options fingerprints the file was converted with), per file.
    changed: Vec<(&'static str, Fingerprint)>,
    pending: u64,
}

impl Unsettled {
    /// The changes, one line per kind, each naming the last run (with its report still in
    /// `runs/`) that converted under the settings it changed from.
    fn changes(&self, home: &Home) -> Vec<SettingsChange> {
        let runs = finished_runs(home);
        let since = |old: &Fingerprint| {
            runs.iter()
                .rev()
                .find(|(_, s)| {
                    !s.setup.dry_run
                        && s.fingerprint.rules == old.rules
                        && s.fingerprint.options == old.options
                })
                .map_or(0, |(n, _)| *n)
        };
        let mut out: Vec<SettingsChange> = Vec::new();
        for what in ["rules", "options", "rules and options"] {
            let olds: Vec<&Fingerprint> = self
                .changed
                .iter()
                .filter(|(w, _)| *w == what)
                .map(|(_, old)| old)
                .collect();
            if olds.is_empty() {
                continue;
            }
            let since_run = olds.iter().map(|old| since(old)).max().unwrap_or(0);
            out.push(SettingsChange {
                what: what.to_string(),
                since_run,
                files: olds.len() as u64,
            });
        }
        out
    }
}

/// What the run will read, said before it reads: `plan: read 5 files (2 new, 1 changed, 2
/// again: their rules, options or pending sessions); 40 unchanged`.
fn plan_line(files: &[PlannedFile], manifest: &Manifest, full: bool) -> String {
    let (mut new, mut changed, mut again, mut unchanged) = (0u64, 0u64, 0u64, 0u64);
    for file in files.iter().filter(|f| f.portion.counted) {
        match manifest.files.get(&file.source.origin) {
            None => new += 1,
            Some(_) if file.skip => unchanged += 1,
            Some(entry) if entry.digest != file.digest => changed += 1,
            Some(_) => again += 1,
        }
    }
    let mut parts = Vec::new();
    for (n, what) in [(new, "new"), (changed, "changed")] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    if again > 0 {
        let why = if full {
            "again: --full, or a dry run, reads every file"
        } else {
            "again: their rules, options or pending sessions"
        };
        parts.push(format!("{again} {why}"));
    }
    let read = new + changed + again;
    let mut line = format!("plan: read {}", crate::audit::summary::files_phrase(read));
    if !parts.is_empty() {
        line.push_str(&format!(" ({})", parts.join(", ")));
    }
    if unchanged > 0 {
        line.push_str(&format!("; {unchanged} unchanged"));
    }
    line
}

/// The finished runs of a home (those with a `summary.json`), oldest first, with their
/// summaries.
fn finished_runs(home: &Home) -> Vec<(u32, Summary)> {
    let runs = home.state_dir().join(crate::output::home::RUNS_DIR);
    let mut out: Vec<(u32, Summary)> = std::fs::read_dir(&runs)
        .map(|entries| {
            entries
                .filter_map(|e| {
                    let e = e.ok()?;
                    let number: u32 = e.file_name().to_str()?.parse().ok()?;
                    let text = std::fs::read(e.path().join("summary.json")).ok()?;
                    Some((number, serde_json::from_slice(&text).ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by_key(|(n, _)| *n);
    out
}

/// Which input files to read: a file whose size and mtime the manifest recorded is unchanged;
/// one whose content digest it recorded is too (and its new mtime is kept, so the next run
/// need not read it). An unchanged file is read all the same when the rules or options that
/// converted it differ from this run's, or when sessions of it are pending (`unsettled` says
/// which). A file that cannot be read is left out and added to `unreadable` (when this run
/// counts it): the run goes on without it. A signal ends the pre-pass early: the caller then
/// ends the run.
fn plan(
    walk: &[SourceFile],
    portions: Vec<Portion>,
    manifest: &mut Manifest,
    reading: Reading<'_>,
    unreadable: &mut Vec<UnreadableReport>,
    unsettled: &mut Unsettled,
) -> Vec<PlannedFile> {
    let fingerprint = reading.fingerprint;
    let mut files = Vec::with_capacity(portions.len());
    for portion in portions {
        if reading.stop.load(Ordering::Relaxed) != 0 {
            break;
        }
        failpoint("plan");
        let Some(source) = walk.get(portion.index) else {
            continue;
        };
        // A split file is read by several shards: the one that counts it reports it.
        let counts = portion.counted;
        if let Some(entry) = manifest.files.get(&source.origin) {
            let what = match (
                entry.rules != fingerprint.rules,
                entry.options != fingerprint.options,
            ) {
                (true, true) => Some("rules and options"),
                (true, false) => Some("rules"),
                (false, true) => Some("options"),
                (false, false) => None,
            };
            if let (Some(what), true) = (what, counts) {
                let old = Fingerprint {
                    rules: entry.rules.clone(),
                    options: entry.options.clone(),
                };
                unsettled.changed.push((what, old));
            }
            if !entry.pending.is_empty() && counts {
                unsettled.pending += 1;
            }
        }
        match plan_file(source, portion, manifest, reading) {
            Ok(file) => files.push(file),
            Err(lost) if counts => unreadable.push(lost),
            Err(_) => {}
        }
    }
    files
}

/// How the plan reads the inputs: every file (`--full`, a dry run) or the changed ones, for
/// which settings, until a signal.
#[derive(Clone, Copy)]
struct Reading<'a> {
    full: bool,
    /// A dry run: nothing is recorded, so a file the manifest does not know needs no digest.
    dry_run: bool,
    fingerprint: &'a Fingerprint,
    stop: &'a AtomicUsize,
}

/// [`plan`] for one file, or why it cannot be read.
fn plan_file(
    source: &SourceFile,
    portion: Portion,
    manifest: &mut Manifest,
    reading: Reading<'_>,
) -> Result<PlannedFile, UnreadableReport> {
    let Reading {
        full,
        dry_run,
        fingerprint,
        stop,
    } = reading;
    let entry = manifest.files.get_mut(&source.origin);
    // Read again, whatever its content: converted by other rules or options, or pending.
    let unsettled = entry.as_ref().is_some_and(|e| {
        e.rules != fingerprint.rules || e.options != fingerprint.options || !e.pending.is_empty()
    });
    let read_anyway = full || unsettled;
    let legacy = entry.as_ref().filter(|e| e.legacy_ids).map(|e| {
        let ids = e
            .rollouts
            .entries()
            .filter_map(|r| crate::output::manifest::session_id_of(&r.path).map(str::to_string));
        Arc::new(ids.collect::<HashSet<String>>())
    });
    let planned = |skip: bool, digest: String| PlannedFile {
        source: source.clone(),
        portion,
        skip,
        digest,
        read_digest: None,
        legacy: legacy.clone(),
    };
    // Git's index rule: a file whose size, mtime, ctime and inode are as recorded is
    // unchanged; any of them moved (`cp -p` and `tar x` put an mtime back, not a ctime) and
    // its digest says.
    if let Some(entry) = &entry {
        if entry.size == source.size
            && entry.mtime_ns == source.mtime_ns
            && entry.ctime_ns == source.ctime_ns
            && entry.ino == source.ino
        {
            return Ok(planned(!read_anyway, entry.digest.clone()));
        }
    }
    let unreadable = |err: std::io::Error| UnreadableReport {
        path: source.display.to_string(),
        message: err.to_string(),
    };
    // A file the manifest does not know is new whatever its digest: its first bytes are read
    // here, to report an unreadable file before the run, and the whole file once, by the
    // reader, which takes its digest on the way (a dry run records none). Read here too, an
    // archive larger than the page cache was read from disk twice. A shard reads only its
    // ranges of a split file, so that file's digest is taken here.
    if entry.is_none() && !portion.ranges {
        readable(&source.path).map_err(unreadable)?;
        return Ok(PlannedFile {
            read_digest: (!dry_run).then(crate::source::DigestSlot::default),
            ..planned(false, String::new())
        });
    }
    let digest = file_digest_unless(&source.path, stop).map_err(|err| UnreadableReport {
        path: source.display.to_string(),
        message: err.to_string(),
    })?;
    let same = match entry {
        Some(entry) if entry.digest == digest => {
            entry.size = source.size;
            entry.mtime_ns = source.mtime_ns;
            entry.ctime_ns = source.ctime_ns;
            entry.ino = source.ino;
            true
        }
        Some(_) | None => false,
    };
    Ok(planned(same && !read_anyway, digest))
}

/// Opens `path` and reads its first bytes: what fails there makes a file unreadable (a
/// special file that opens and cannot be read, a file without permission).
fn readable(path: &std::path::Path) -> std::io::Result<()> {
    use std::io::Read;
    let mut head = [0u8; 4096];
    std::fs::File::open(path)?.read(&mut head).map(drop)
}

/// A pre-pass (the walk, the digests, the Batch API scan) stops early when a signal comes: its
/// partial result is not used, the run ends here.
fn interrupted(options: &Options, stage: &'static str) -> Result<(), PipelineError> {
    match options.stop.load(Ordering::Relaxed) {
        0 => Ok(()),
        signal => Err(PipelineError::Interrupted { signal, stage }),
    }
}

/// What the inputs held, for the error of a run with nothing to read.
fn nothing_found(options: &Options, skipped: &Skipped) -> String {
    let notes = skipped.notes();
    if notes.is_empty() {
        let inputs: Vec<String> = options
            .inputs
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        format!("no file in {}", inputs.join(", "))
    } else {
        notes.join("; ")
    }
}

/// One output home holds one format: a manifest that recorded the other format's files would
/// skip unchanged inputs (their output never written) or remove the other format's files.
fn check_format(home: &Home, manifest: &Manifest, asked: OutputKind) -> Result<(), PipelineError> {
    let found = manifest
        .files
        .values()
        .map(|entry| OutputKind::recorded(entry.format.as_deref()))
        .find(|found| *found != asked);
    match found {
        None => Ok(()),
        Some(found) => Err(PipelineError::FormatMismatch {
            out: home.root.display().to_string(),
            found: found.name(),
            asked: asked.name(),
        }),
    }
}

fn signal_name(signal: usize) -> Option<String> {
    match signal as i32 {
        0 => None,
        signal_hook::consts::SIGINT => Some("SIGINT".to_string()),
        signal_hook::consts::SIGTERM => Some("SIGTERM".to_string()),
        other => Some(format!("signal {other}")),
    }
}

/// What every worker of a batch reads.
struct BatchContext<'a> {
    files: &'a [PlannedFile],
    /// What readers keep per file between calls, by file index; cleared at each file's end.
    caches: &'a [FileCache],
    rules: &'a RuleSet,
    index: &'a BatchIndex,
    options: &'a Options,
    /// Where the collector gives each work's outcomes back to the worker that made them.
    returns: &'a returns::Returns,
    /// Identities whose sessions keep an id of scheme 2.
    aliases: &'a HashMap<u128, String>,
    output: &'a dyn Output,
}

/// How the workers name a file's sessions in a home of scheme 2; `None` (the usual way) in any
/// other.
fn naming<'a>(
    aliases: &'a HashMap<u128, String>,
    legacy: Option<&'a HashSet<String>>,
) -> Option<crate::convert::Naming<'a>> {
    (!aliases.is_empty() || legacy.is_some()).then_some(crate::convert::Naming {
        aliases: (!aliases.is_empty()).then_some(aliases),
        legacy,
    })
}

/// What earlier runs found in the files this run does not read (unchanged since): carried
/// into its reports and verdict until the file is read again.
fn carried(files: &[PlannedFile], manifest: &Manifest) -> crate::audit::summary::CarriedFindings {
    use crate::audit::summary::{CarriedFile, CarriedFinding, CarriedFindings};
    let mut carried = CarriedFindings::default();
    // Every part of a file this run leaves unread, a split file's ranges included (each
    // shard carries what it found in its own). Every unread record counts toward the rate,
    // so a sharded run's carried rate is the unsharded one's.
    for file in files.iter().filter(|f| f.skip) {
        let Some(entry) = manifest.files.get(&file.source.origin) else {
            continue;
        };
        carried.carried_records += entry.records;
        let Some(findings) = &entry.findings else {
            continue;
        };
        carried.add(CarriedFile {
            file: entry.name.clone(),
            run: findings.run,
            quarantined: findings.quarantined,
            damaged: findings.damaged,
            listed: findings
                .listed
                .iter()
                .map(|f| CarriedFinding {
                    line: f.line,
                    byte_offset: f.byte_offset,
                    class: f.class.clone(),
                    reason: f.reason.clone(),
                })
                .collect(),
        });
    }
    carried
}

/// Converts one batch on the calling worker: for each of its works, one outcome per record,
/// in batch order (none for the other events), and the worker that converted it. Each work's
/// records are released once converted ([`reader::Records::release`]); a worker first frees
/// the outcomes it was given back ([`returns`]).
fn convert_batch(batch: &mut [Work], context: &BatchContext<'_>) -> BatchOutcomes {
    batch
        .iter_mut()
        .map(|work| {
            let Work::Records(work) = work else {
                return (Vec::new(), None);
            };
            context.returns.free_mine();
            failpoint("convert");
            let file = &context.files[work.file].source;
            let options = context.options;
            let context = record::WorkContext {
                read: crate::input::format::ReadContext {
                    rules: context.rules,
                    path: &file.path,
                    key: &file.key,
                    root: file.root.as_deref(),
                    follow: options.walk.follow,
                    cache: &context.caches[work.file],
                },
                batch: context.index,
                output: context.output,
                sample: options.sample,
                dry_run: options.dry_run,
                baseline: options.baseline,
                naming: naming(context.aliases, context.files[work.file].legacy.as_deref()),
            };
            let outcomes = record::process_work(work, &context);
            work.release();
            (outcomes, returns::Returns::owner())
        })
        .unzip()
}

/// A batch converted: each work's outcomes, and the worker that made them.
type BatchOutcomes = (Vec<Vec<Outcome>>, Vec<Option<usize>>);

/// A batch on its way to the collector: its events, each work's outcomes (one per record),
/// and the bytes on disk read when it was converted.
struct ConvertedBatch {
    batch: Vec<Work>,
    outcomes: Vec<Vec<Outcome>>,
    /// The worker that converted each work ([`returns`]).
    owners: Vec<Option<usize>>,
    disk_read: u64,
}

/// The converted conversations of a batch's outcomes.
fn converted_mut(outcomes: &mut [Vec<Outcome>]) -> impl Iterator<Item = &mut record::Converted> {
    outcomes
        .iter_mut()
        .flatten()
        .filter_map(|outcome| match outcome {
            Outcome::Converted(done) => Some(&mut **done),
            Outcome::Merged
            | Outcome::Quarantined { .. }
            | Outcome::NotSampled
            | Outcome::Dropped { .. } => None,
        })
}

/// Writes the Codex rollouts of a converted batch into the home, in parallel on the current
/// pool (the writers), and frees their bytes; in a dry run, only decides what a run would do.
/// A duplicate ([`Claims`]) is left as marked.
fn place_batch(
    outcomes: &mut [Vec<Outcome>],
    home: &Home,
    guard: &Guard,
) -> Result<(), OutputError> {
    outcomes.par_iter_mut().try_for_each(|outcomes| {
        converted_mut(std::slice::from_mut(outcomes)).try_for_each(|done| {
            if done.placed.is_none() {
                done.placed = Some(guard.place(
                    home,
                    &done.relative,
                    &done.bytes,
                    &done.digest,
                    &done.placement,
                )?);
                failpoint("placed");
            }
            done.bytes = Vec::new();
            Ok(())
        })
    })
}

/// [`place_batch`] for the rollouts whose placement reads nothing from the disk, on the
/// calling thread; the rest are left for the pool.
fn place_batch_here(
    outcomes: &mut [Vec<Outcome>],
    home: &Home,
    guard: &Guard,
) -> Result<(), OutputError> {
    for done in converted_mut(outcomes) {
        if done.placed.is_none() && !guard.reads_disk(home, &done.relative) {
            done.placed = Some(guard.place(
                home,
                &done.relative,
                &done.bytes,
                &done.digest,
                &done.placement,
            )?);
            failpoint("placed");
            done.bytes = Vec::new();
        }
    }
    Ok(())
}

/// Test hook: see [`crate::output::failpoint`].
pub fn failpoint(stage: &str) {
    crate::output::failpoint::hit(stage);
}

fn panicked(stage: &'static str, panic: &(dyn std::any::Any + Send)) -> PipelineError {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string());
    PipelineError::Panicked { stage, message }
}

/// Two inputs with the same relative key (`a/x.jsonl` and `b/x.jsonl` given as separate
/// arguments) would get the same session ids: the later ones get a `#n` suffix.
fn dedupe_keys(files: &mut [SourceFile]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for file in files.iter_mut() {
        let count = seen.entry(file.key.clone()).or_insert(0);
        *count += 1;
        if *count > 1 {
            file.key = format!("{}#{}", file.key, count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{thread_pool, Priorities, Priority, YIELD_NICE};

    /// The nice value of the calling thread.
    #[cfg(target_os = "linux")]
    pub(crate) fn nice() -> i32 {
        rustix::process::getpriority_process(Some(rustix::thread::gettid()))
            .unwrap_or_else(|e| panic!("getpriority: {e}"))
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn the_threads_that_set_the_pace_keep_the_run_s_priority_and_the_others_yield() {
        let run = nice();
        let at = |priority| {
            let pool = thread_pool(2, None, priority).unwrap_or_else(|e| panic!("pool: {e}"));
            let mut seen: Vec<i32> = pool.broadcast(|_| nice());
            seen.dedup();
            seen
        };
        assert_eq!(at(Priority::Lowered), vec![(run + YIELD_NICE).min(19)]);
        assert_eq!(at(Priority::Run), vec![run]);
        // As many workers as cores, or one per core: the workers yield to the serial threads.
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let workers_yield = Priorities {
            workers: Priority::Lowered,
            serial: Priority::Run,
        };
        assert_eq!(Priorities::for_jobs(0), workers_yield);
        assert_eq!(Priorities::for_jobs(cores), workers_yield);
        assert_eq!(Priorities::for_jobs(cores + 3), workers_yield);
        // Fewer: the serial threads yield to the workers.
        if cores > 1 {
            let serial_yield = Priorities {
                workers: Priority::Run,
                serial: Priority::Lowered,
            };
            assert_eq!(Priorities::for_jobs(cores - 1), serial_yield);
            assert_eq!(Priorities::for_jobs(1), serial_yield);
        }
        // A thread lowered starts its own threads at its priority.
        let (lowered, started) = std::thread::spawn(|| {
            Priority::Lowered.apply();
            (nice(), std::thread::spawn(nice).join())
        })
        .join()
        .unwrap_or_else(|_| panic!("the thread"));
        assert_eq!(lowered, (run + YIELD_NICE).min(19));
        assert_eq!(started.ok(), Some(lowered));
        // The thread that built the pools (the run's main thread) keeps its priority.
        assert_eq!(nice(), run);
    }
}
