//! The convert pipeline, in three parts: the [`reader`] (one thread: discover order, decompress,
//! split into bounded batches; each file's source format detected at its first record, and a
//! format whose conversations span records handed its whole file as one piece of work) → [`record`] (the workers, in parallel: parse, convert,
//! validate) → the writers (a pool of `--jobs` threads driven from the collector's thread:
//! each batch's Codex rollouts written while the workers convert the next batch) → the
//! [`collect`]or (in input order: quarantine lines, conversation lines, counters,
//! `summary.json`).
//!
//! Records travel in bounded batches, so memory stays flat in the archive's size; results are
//! collected in input order, so every output (rollouts, quarantine, summary) is deterministic
//! whatever the thread count. Per-record problems are outcomes, not errors; only discovery,
//! output failures and a panicking stage stop the run.
//!
//! A sharded run (`--shard K/N`) walks every input like any run, then keeps the files (and
//! ranges of split files) its shard owns ([`crate::source::shard`]); it writes its rollouts
//! into the shared home and its state and reports into the shard's own folder, with a
//! `shard.json` that lets `report merge` rebuild the reports of one run. Batch API results
//! files are found among every file of the walk, so that a shard joins its requests with
//! their results wherever those sit; it counts the results of its own results files, and
//! looks in the other shards' files for the requests that claim them ([`claims`]).

pub mod claims;
pub mod collect;
pub mod reader;
pub mod record;

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use thiserror::Error;

use crate::audit::summary::{SettingsChange, ShardReport, UnreadableReport};
use crate::audit::Summary;
use crate::input::batch::BatchIndex;
use crate::input::format::FileCache;
use crate::input::SourceFormat;
use crate::model::responses::Format;
use crate::model::Location;
use crate::output::manifest::file_digest_unless;
use crate::output::results_seen::ResultsSeen;
use crate::output::{Guard, Home, Manifest, OutputError, RunLock};
use crate::rules::{InvalidUnicode, RuleSet};
use crate::source::{
    discover, open, Compression, Damage, ShardPlan, ShardSource, Share, Skipped, SourceError,
    SourceFile, WalkOptions,
};
use collect::Collector;
use reader::Work;
pub use record::{process_bytes, process_record, process_record_as, Converted, Outcome};

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
    /// Remove the sessions whose records are gone from the inputs (`--prune`).
    pub prune: bool,
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

/// Runs the whole conversion and returns the summary.
pub fn run(
    options: &Options,
    rules: &RuleSet,
    progress: &dyn Progress,
) -> Result<Summary, PipelineError> {
    let started = Instant::now();
    // Discovery first: a run with nothing to read stops before it writes into the output.
    let discovery = discover(&options.inputs, Some(&options.out), &options.walk)?;
    interrupted(options, "walking the inputs")?;
    let skipped = &discovery.skipped;
    if discovery.files.is_empty() && skipped.unreadable.is_empty() && skipped.loops.is_empty() {
        return Err(PipelineError::NothingToDo {
            found: nothing_found(options, skipped),
        });
    }
    for note in skipped.notes() {
        progress.note(&note);
    }
    for path in &skipped.loops {
        progress.note(&format!("symlink loop at {path}: skipped"));
    }
    for entry in &skipped.unreadable {
        progress.note(&format!(
            "cannot read {}: {}; skipped",
            entry.path, entry.message
        ));
    }
    let shard = options.shard.as_ref().map(|source| ShardPlan {
        shard: source.shard,
        split_bytes: options.split_bytes,
        // A Responses body file is written per input file: one shard must write all of it.
        split: options.format == Format::Codex,
    });
    let mut home = match &shard {
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
    let mut manifest = Manifest::load(&home)?;
    check_format(&home, &manifest, options.format)?;
    // A home with no session yet: a dry run's report is its `latest`, as a run's would be.
    let fresh = manifest.files.is_empty() && manifest.orphans.is_empty();
    let (run_number, killed_run) = home.start_run()?;
    let temporary_files_removed = if manifest.recovered || killed_run {
        home.remove_temporary_files()?
    } else {
        0
    };
    let mut files = discovery.files;
    dedupe_keys(&mut files);
    // Every file of the walk, whatever the shard: `--prune` forgets only files gone from it.
    let walked: HashSet<String> = files.iter().map(|f| f.origin.clone()).collect();
    // Batch API results join requests anywhere: every file of the walk is looked at for them,
    // whatever share of it this run reads.
    let walk = files.clone();
    let mut portions = select(&mut files, shard.as_ref());
    let mut unreadable: Vec<UnreadableReport> = skipped
        .unreadable
        .iter()
        .map(|u| UnreadableReport {
            path: u.path.clone(),
            message: u.message.clone(),
        })
        .collect();
    // A dry run (and `audit`) reads every input: its report is the plan of the whole run.
    let full = options.full || options.dry_run;
    let mut planned = Planned::default();
    let (mut skip, digests) = plan(
        &mut files,
        &mut portions,
        &mut manifest,
        Reading {
            full,
            fingerprint: &options.fingerprint,
            stop: &options.stop,
        },
        &mut unreadable,
        &mut planned,
    );
    for entry in unreadable.iter().skip(skipped.unreadable.len()) {
        progress.note(&format!(
            "cannot read {}: {}; skipped",
            entry.path, entry.message
        ));
    }
    if !fresh {
        progress.note(&plan_line(
            &files, &portions, &skip, &digests, &manifest, full,
        ));
    }
    interrupted(options, "reading the inputs' digests")?;
    let settings_changed = planned.changes(&home);
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
    if planned.pending > 0 {
        progress.note(&format!(
            "{} with sessions kept pending (changed in Codex since, while the source has newer data): read again; --force replaces those sessions",
            crate::audit::summary::files_phrase(planned.pending),
        ));
    }
    let repair = rules.policy.invalid_unicode == InvalidUnicode::Replace;
    let mut batch_index = BatchIndex::scan(&walk, &rules.input, repair, &options.stop);
    interrupted(options, "looking for Batch API results")?;
    // Each file of the walk's index among this run's files, if it reads it.
    let mut run_of = vec![None; walk.len()];
    for (i, portion) in portions.iter().enumerate() {
        run_of[portion.index] = Some(i);
    }
    // The files of the walk this run converts whole (not a split file's ranges).
    let converted: Vec<bool> = run_of
        .iter()
        .map(|i| i.is_some_and(|i: usize| !portions[i].ranges))
        .collect();
    // When a Batch API results file changed, every file is read: its requests may be anywhere.
    // A shard knows its own results files' changes from its manifest, the others' from what it
    // saw of them last.
    let mut seen = match shard {
        Some(_) => Some(ResultsSeen::load(&home)?),
        None => None,
    };
    let mut results_changed = false;
    for &w in batch_index.results_files() {
        let file = &walk[w];
        let changed = match (run_of[w], seen.as_mut()) {
            (Some(i), _) => !skip[i],
            (None, Some(seen)) => seen.changed(&file.key, file.size, file.mtime_ns, &file.path),
            // Unsharded, a file the plan could not read: it is not converted.
            (None, None) => false,
        };
        results_changed |= changed;
    }
    if results_changed {
        skip.iter_mut().for_each(|s| *s = false);
    }
    // The results of a file left out (unchanged) were counted when it was read.
    batch_index.keep(&run_of, |w, location| {
        run_of[w].is_some_and(|i| !skip[i]) && owns_result(shard.as_ref(), &walk[w], location)
    });
    let batch_index = Arc::new(batch_index);
    let files = Arc::new(files);
    let guard = if options.dry_run {
        Guard::planning(manifest.rollout_digests(), options.force)
    } else {
        Guard::new(manifest.rollout_digests(), options.force)
    };
    let bytes_on_disk = files
        .iter()
        .zip(&skip)
        .zip(&portions)
        .filter(|((_, s), p)| !**s && p.counted)
        .map(|((f, _), _)| f.size)
        .sum();
    let summary = Summary {
        schema_version: crate::audit::summary::SCHEMA_VERSION,
        bytes_on_disk,
        rules: rules.names.clone(),
        rule_digests: rules.digests.clone(),
        codex_version: rules.codex_version.clone(),
        dry_run: options.dry_run,
        files: portions.iter().filter(|p| p.counted).count() as u64,
        run: run_number,
        files_unchanged: skip
            .iter()
            .zip(&portions)
            .filter(|(s, p)| **s && p.counted)
            .count() as u64,
        temporary_files_removed,
        sample_rate: options.sample.unwrap_or(1.0),
        skipped_other_extensions: skipped.other_extensions.clone(),
        skipped_hidden: skipped.hidden,
        skipped_symlinks: skipped.symlinks,
        skipped_excluded: skipped.excluded,
        skipped_unmatched: skipped.unmatched,
        skipped_codex_homes: skipped.codex_homes.clone(),
        symlink_loops: skipped.loops.clone(),
        unreadable,
        settings_changed,
        files_pending: planned.pending,
        fingerprint: crate::audit::summary::Fingerprints {
            rules: options.fingerprint.rules.clone(),
            options: options.fingerprint.options.clone(),
        },
        prune: options.prune,
        shard: options.shard.as_ref().map(|source| ShardReport {
            index: source.shard.index,
            count: source.shard.count,
            index_from: source.index_from.to_string(),
            count_from: source.count_from.to_string(),
            split_bytes: options.split_bytes,
            rollover_version: env!("CARGO_PKG_VERSION").to_string(),
            format: format_name(options.format).to_string(),
            max_quarantine_rate: options.max_quarantine_rate,
            report_text: options.report_text,
            walk_unreadable: skipped.unreadable.len(),
        }),
        ..Summary::default()
    };
    let mut collector = Collector::new(&home, summary, &files, digests, &guard, options.format)?;
    collector.portions = portions.clone();
    collector.fingerprint = options.fingerprint.clone();
    collector.walked = walked;
    if let Format::Responses(responses) = options.format {
        collector.body_paths = body_paths(&files, &manifest, responses.compress);
    }
    collector.report.max_quarantine_rate = options.max_quarantine_rate;
    collector.report.report_text = options.report_text;
    let mut convert_seconds = 0.0;
    let to_read = files.iter().zip(&skip).filter(|(_, s)| !**s);
    progress.start(
        to_read.clone().count() as u64,
        to_read.map(|(f, _)| f.size).sum(),
    );
    let threads = options.jobs.unwrap_or(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| PipelineError::Pool {
            threads,
            message: e.to_string(),
        })?;

    // Codex rollouts are written by their own pool, on the collector's thread, while the
    // converting pool works on the next batch: a rollout's file is mostly the kernel's work
    // (creating it, copying its bytes into the page cache, the rename), which on one thread
    // would stand in line with the conversion.
    // A dry run's writers only plan: they read what is on disk to decide what a run would do.
    let writers = match options.format {
        Format::Codex => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("rollover-write-{i}"))
                .build()
                .map_err(|e| PipelineError::Pool {
                    threads,
                    message: e.to_string(),
                })?,
        ),
        Format::Responses(_) => None,
    };

    let reader = reader::spawn(reader::Plan {
        files: Arc::clone(&files),
        skip: skip.clone(),
        index: Arc::clone(&batch_index),
        portions,
        shard,
        stop: Arc::clone(&options.stop),
        from: options.from,
        max_record_bytes: options.max_record_bytes,
        max_conversation_bytes: options.max_conversation_bytes,
        // Decompressing takes 25-40 % of a record's CPU (zstd; 181 M instructions to the
        // worker's 276 M on agent transcripts, 158 M to 464 M on small records): half as many
        // files at once as workers keep them fed, and leave 2 cores uncrowded.
        readers: pool.current_num_threads().div_ceil(2),
    });
    // The ordered collector runs on its own thread, fed in batch order through a channel of
    // one: it places batch n's rollouts and records the batch while the workers convert
    // batch n+1 (on the main thread, it was ~5-15 % of a run spent with every worker idle).
    let (to_collector, collected) = sync_channel::<(Vec<Work>, Vec<Option<Outcome>>, u64)>(1);
    let caches: Vec<FileCache> = files.iter().map(|_| FileCache::default()).collect();
    let mut failure: Option<PipelineError> = None;
    let collected = std::thread::scope(|scope| {
        let manifest = &mut manifest;
        let (home, guard) = (&home, &guard);
        let collecting = scope.spawn(move || {
            let mut collector = collector;
            let mut claims = Claims::default();
            for (batch, mut outcomes, disk_read) in collected.iter() {
                if let Some(writers) = &writers {
                    claims.mark_duplicates(&mut outcomes);
                    writers.install(|| place_batch(&mut outcomes, home, guard))?;
                }
                collector.batch(&batch, outcomes, progress, disk_read, manifest)?;
            }
            Ok::<_, OutputError>(collector)
        });
        for batch in reader.batches.iter() {
            let work = AssertUnwindSafe(|| {
                let context = BatchContext {
                    files: &files,
                    caches: &caches,
                    rules,
                    index: &batch_index,
                    options,
                };
                pool.install(|| convert_batch(&batch, &context))
            });
            let converting = Instant::now();
            let caught = catch_unwind(work);
            convert_seconds += converting.elapsed().as_secs_f64();
            // Batches are converted in order: a file whose end is in this one has nothing left
            // to read (a zip export's directory and handle are let go here, not at the run's end).
            for done in &batch {
                if let Work::FileEnd(file) = done {
                    if let Some(cache) = caches.get(*file) {
                        cache.clear();
                    }
                }
            }
            let outcomes = match caught {
                Ok(Ok(outcomes)) => outcomes,
                Ok(Err(err)) => {
                    failure = Some(err.into());
                    break;
                }
                Err(panic) => {
                    failure = Some(panicked("convert", panic.as_ref()));
                    break;
                }
            };
            let disk_read = reader.disk_read.load(Ordering::Relaxed);
            // The collector hung up: it failed, and says why when joined.
            if to_collector.send((batch, outcomes, disk_read)).is_err() {
                break;
            }
        }
        drop(to_collector);
        match collecting.join() {
            Ok(done) => done.map_err(PipelineError::from),
            Err(panic) => Err(panicked("collect", panic.as_ref())),
        }
    });
    // Dropping the receiver unblocks a reader still sending, so the join below returns.
    drop(reader.batches);
    if let Err(panic) = reader.handle.join() {
        return Err(panicked("reader", panic.as_ref()));
    }
    // The collector's failure came first: it stopped the conversion of later batches.
    let mut collector = match (collected, failure) {
        (Err(err), _) | (Ok(_), Some(err)) => return Err(err),
        (Ok(collector), None) => collector,
    };
    let signal = options.stop.load(Ordering::Relaxed);
    if signal == 0 {
        // The reader and the workers are done with the index: it is this thread's alone.
        let index = Arc::try_unwrap(batch_index).map_err(|_| PipelineError::Panicked {
            stage: "collect",
            message: "the batch results were still shared after the conversion".to_string(),
        })?;
        if shard.is_some() {
            let unclaimed = index.unclaimed();
            if unclaimed > 0 {
                progress.note(&format!(
                    "{unclaimed} Batch API results of this shard's files have no request in them: looking for their requests in the other shards' files"
                ));
            }
            let walk = claims::Walk {
                files: &walk,
                converted: &converted,
            };
            pool.install(|| claims::claim_elsewhere(&index, &walk, rules, options));
        }
        // After every file's report lines, as in an unsharded run: one segment per results
        // file (per range, split), at a place past the walk's files (a segment's file past
        // the run's files is its place itself), so that `report merge` orders the shards'
        // results as the walk does.
        let disk_read = reader.disk_read.load(Ordering::Relaxed);
        let groups = index.into_groups(|result| {
            let file = &walk[result.walk_file];
            let range = match &shard {
                Some(plan) if plan.is_split(file) => {
                    plan.range_of(result.record.location.byte_offset)
                }
                Some(_) | None => 0,
            };
            (result.walk_file, range)
        });
        for ((w, range), group) in groups {
            let segment = [Work::Segment(walk.len() + w, range)];
            collector.batch(&segment, vec![None], progress, disk_read, &mut manifest)?;
            collector.batch_results(&group, &skip)?;
        }
        if options.prune {
            collector.prune_gone(&mut manifest)?;
        }
    }
    collector.summary.interrupted = signal_name(signal);
    collector.report.convert_seconds = convert_seconds;
    let summary = collector.finish(started.elapsed().as_secs_f64())?;
    if !options.dry_run {
        manifest.save(&home)?;
        if let Some(seen) = &seen {
            seen.save(&home)?;
        }
        home.mark_latest()?;
    } else if fresh {
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
    drop(lock);
    // The temporary copies of streams are removed only now: the reader is done with them.
    drop(discovery.spools);
    Ok(summary)
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
fn select(files: &mut Vec<SourceFile>, shard: Option<&ShardPlan>) -> Vec<Portion> {
    let Some(shard) = shard else {
        return (0..files.len())
            .map(|index| Portion {
                index,
                ranges: false,
                counted: true,
            })
            .collect();
    };
    let mut portions = Vec::new();
    let mut index = 0;
    files.retain(|file| {
        // Only a split file is opened here, to see whether its size counts its ranges.
        let compressed = shard.is_split(file)
            && open(&file.path).map_or(true, |o| o.compression != Compression::None);
        let share = shard.share(file, compressed);
        let kept = share != Share::None;
        if kept {
            portions.push(Portion {
                index,
                ranges: share == Share::Ranges,
                counted: shard.counts_file(file),
            });
        }
        index += 1;
        kept
    });
    portions
}

/// What the plan found beside changed files: files read again because their rules or options
/// changed, or because sessions of theirs are pending.
#[derive(Debug, Default)]
struct Planned {
    /// (what changed, the rules and options fingerprints the file was converted with), per file.
    changed: Vec<(&'static str, Fingerprint)>,
    pending: u64,
}

impl Planned {
    /// The changes, one line per kind, each naming the last run (with its report still in
    /// `runs/`) that converted under the settings it changed from.
    fn changes(&self, home: &Home) -> Vec<SettingsChange> {
        let runs = finished_runs(home);
        let since = |old: &Fingerprint| {
            runs.iter()
                .rev()
                .find(|(_, s)| {
                    !s.dry_run
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
fn plan_line(
    files: &[SourceFile],
    portions: &[Portion],
    skip: &[bool],
    digests: &[String],
    manifest: &Manifest,
    full: bool,
) -> String {
    let (mut new, mut changed, mut again, mut unchanged) = (0u64, 0u64, 0u64, 0u64);
    for (i, file) in files.iter().enumerate() {
        if !portions.get(i).is_none_or(|p| p.counted) {
            continue;
        }
        match manifest.files.get(&file.origin) {
            None => new += 1,
            Some(_) if skip[i] => unchanged += 1,
            Some(entry) if entry.digest != digests[i] => changed += 1,
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

/// `--format responses` writes one output file per input file, named after its key: two
/// files whose names give the same output file (`x.jsonl` and `x.jsonl.zst`; a same-named
/// export of another day, whose bodies the home holds) must not overwrite each other. The
/// later gets a name of its own, `x.<8 hex of its origin>.jsonl`. Returns those names by file.
fn body_paths(files: &[SourceFile], manifest: &Manifest, compress: bool) -> HashMap<usize, String> {
    let mut used: HashSet<String> = HashSet::new();
    let mut out = HashMap::new();
    for (index, file) in files.iter().enumerate() {
        let usual =
            crate::output::guard::key(&crate::model::responses::output_path(&file.key, compress));
        let taken = used.contains(&usual) || manifest.listed_by_other(&usual, &file.origin);
        let path = if taken {
            let tag = format!(
                "{:08x}",
                xxhash_rust::xxh3::xxh3_64(file.origin.as_bytes()) as u32
            );
            let suffix = if compress { ".jsonl.zst" } else { ".jsonl" };
            let stem = usual.strip_suffix(suffix).unwrap_or(&usual);
            let own = format!("{stem}.{tag}{suffix}");
            out.insert(index, own.clone());
            own
        } else {
            usual
        };
        used.insert(path);
    }
    out
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
/// converted it differ from this run's, or when sessions of it are pending. Returns the files
/// to skip and every file's digest. A file that cannot be read is taken out of `files` (and
/// its portion out of `portions`) and added to `unreadable`: the run goes on without it.
fn plan(
    files: &mut Vec<SourceFile>,
    portions: &mut Vec<Portion>,
    manifest: &mut Manifest,
    reading: Reading<'_>,
    unreadable: &mut Vec<UnreadableReport>,
    planned: &mut Planned,
) -> (Vec<bool>, Vec<String>) {
    let fingerprint = reading.fingerprint;
    let mut skip = Vec::with_capacity(files.len());
    let mut digests = Vec::with_capacity(files.len());
    let mut kept = Vec::with_capacity(files.len());
    let mut counted = portions.iter().map(|p| p.counted);
    files.retain(|file| {
        // A signal ends the pre-pass: the caller ends the run.
        if reading.stop.load(Ordering::Relaxed) != 0 {
            kept.push(false);
            return false;
        }
        failpoint("plan");
        // A split file is read by several shards: the one that counts it reports it.
        let mut lost = Vec::new();
        let counts = counted.next().unwrap_or(true);
        if let Some(entry) = manifest.files.get(&file.origin) {
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
                planned.changed.push((what, old));
            }
            if !entry.pending.is_empty() && counts {
                planned.pending += 1;
            }
        }
        let keep = plan_file(file, manifest, reading, &mut lost, &mut skip, &mut digests);
        if counts {
            unreadable.append(&mut lost);
        }
        kept.push(keep);
        keep
    });
    let mut kept = kept.into_iter();
    portions.retain(|_| kept.next().unwrap_or(false));
    (skip, digests)
}

/// How the plan reads the inputs: every file (`--full`, a dry run) or the changed ones, for
/// which settings, until a signal.
#[derive(Clone, Copy)]
struct Reading<'a> {
    full: bool,
    fingerprint: &'a Fingerprint,
    stop: &'a AtomicUsize,
}

/// [`plan`] for one file: false when it cannot be read.
fn plan_file(
    file: &SourceFile,
    manifest: &mut Manifest,
    reading: Reading<'_>,
    unreadable: &mut Vec<UnreadableReport>,
    skip: &mut Vec<bool>,
    digests: &mut Vec<String>,
) -> bool {
    let Reading {
        full,
        fingerprint,
        stop,
    } = reading;
    let entry = manifest.files.get_mut(&file.origin);
    // Read again, whatever its content: converted by other rules or options, or pending.
    let unsettled = entry.as_ref().is_some_and(|e| {
        e.rules != fingerprint.rules || e.options != fingerprint.options || !e.pending.is_empty()
    });
    let read_anyway = full || unsettled;
    if let Some(entry) = &entry {
        if entry.size == file.size && entry.mtime_ns == file.mtime_ns {
            skip.push(!read_anyway);
            digests.push(entry.digest.clone());
            return true;
        }
    }
    let digest = match file_digest_unless(&file.path, stop) {
        Ok(digest) => digest,
        Err(err) => {
            unreadable.push(UnreadableReport {
                path: file.display.to_string(),
                message: err.to_string(),
            });
            return false;
        }
    };
    let same = match entry {
        Some(entry) if entry.digest == digest => {
            entry.size = file.size;
            entry.mtime_ns = file.mtime_ns;
            true
        }
        Some(_) | None => false,
    };
    skip.push(same && !read_anyway);
    digests.push(digest);
    true
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
fn check_format(home: &Home, manifest: &Manifest, format: Format) -> Result<(), PipelineError> {
    let asked = format_name(format);
    let found = manifest
        .files
        .values()
        .map(|entry| entry.format.as_deref().unwrap_or("codex"))
        .find(|found| *found != asked);
    match found {
        None => Ok(()),
        Some(found) => Err(PipelineError::FormatMismatch {
            out: home.root.display().to_string(),
            found: if found == "codex" {
                "codex"
            } else {
                "responses"
            },
            asked,
        }),
    }
}

/// The name of a format, as the manifest records it (Codex: none, as before).
pub fn format_name(format: Format) -> &'static str {
    match format {
        Format::Codex => "codex",
        Format::Responses(_) => "responses",
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
    files: &'a [SourceFile],
    /// What readers keep per file between calls, by file index; cleared at each file's end.
    caches: &'a [FileCache],
    rules: &'a RuleSet,
    index: &'a BatchIndex,
    options: &'a Options,
}

/// Converts one batch in parallel and places its rollouts; outcomes in batch order.
fn convert_batch(
    batch: &[Work],
    context: &BatchContext<'_>,
) -> Result<Vec<Option<Outcome>>, OutputError> {
    batch
        .par_iter()
        .map(|work| {
            if let Work::Source(source) = work {
                return convert_source(source, context).map(Some);
            }
            let Work::Record(record, file, ordinal) = work else {
                return Ok(None);
            };
            failpoint("convert");
            let key = &context.files[*file].key;
            if !record::sampled(key, *ordinal, context.options.sample.unwrap_or(1.0)) {
                return Ok(Some(Outcome::NotSampled));
            }
            let mut outcome = if context.options.baseline {
                record::round_trip(record, *ordinal)
            } else {
                let format = context.options.format;
                process_record_as(record, key, context.rules, context.index, format)
            };
            // Responses bodies are appended to their file by the ordered collector; a Codex
            // rollout is placed by the writers ([`place_batch`]), its bytes freed here in a
            // dry run.
            if let (Outcome::Converted(done), Format::Codex) =
                (&mut outcome, context.options.format)
            {
                if context.options.dry_run {
                    done.release_bytes();
                } else {
                    done.keep_exact();
                }
            }
            Ok(Some(outcome))
        })
        .collect()
}

/// Reads and converts a [`reader::SourceWork`] and places its rollouts.
fn convert_source(
    work: &reader::SourceWork,
    context: &BatchContext<'_>,
) -> Result<Outcome, OutputError> {
    failpoint("convert");
    let file = &context.files[work.file];
    let options = context.options;
    let read = crate::input::format::ReadContext {
        rules: context.rules,
        path: &file.path,
        key: &file.key,
        root: file.root.as_deref(),
        follow: options.walk.follow,
        cache: &context.caches[work.file],
    };
    let mut outcome =
        record::process_source_work(work, context.index, &read, options.format, options.sample);
    // The conversations' rollouts are copies at their exact size: in a dry run they are
    // freed here; written, by the writers.
    if let (Outcome::Source(results), Format::Codex, true) =
        (&mut outcome, options.format, options.dry_run)
    {
        converted_mut(results).for_each(|done| done.bytes = Vec::new());
    }
    Ok(outcome)
}

/// The converted conversations of a source's results.
fn converted_mut(
    results: &mut [record::SourceResult],
) -> impl Iterator<Item = &mut record::Converted> {
    results.iter_mut().filter_map(|result| match result {
        record::SourceResult::Conversation {
            outcome: Outcome::Converted(done),
            ..
        } => Some(&mut **done),
        record::SourceResult::Conversation {
            outcome: Outcome::Quarantined(_) | Outcome::NotSampled | Outcome::Source(_),
            ..
        }
        | record::SourceResult::Refused(_)
        | record::SourceResult::Dropped { .. } => None,
    })
}

/// The sessions placed so far in this run, by a hash of their path, with the digest placed:
/// a conversation read twice (one file under two names, a conversation in two exports) is
/// placed once, by the first in input order, so that a run's output does not depend on which
/// writer came first. Memory: ~40 bytes per session of the run.
#[derive(Debug, Default)]
struct Claims {
    placed: HashMap<u128, String, rustc_hash::FxBuildHasher>,
}

impl Claims {
    /// Marks, in input order, each conversation of the batch whose session an earlier one of
    /// the run took: it is not placed, and records the digest of what is there.
    fn mark_duplicates(&mut self, outcomes: &mut [Option<Outcome>]) {
        let mut claim = |done: &mut record::Converted| {
            let path = xxhash_rust::xxh3::xxh3_128(done.path.as_bytes());
            match self.placed.get(&path) {
                Some(digest) => {
                    done.placed = Some(crate::output::Placed::Duplicate);
                    done.digest = digest.clone();
                    done.bytes = Vec::new();
                }
                None => {
                    self.placed.insert(path, done.digest.clone());
                }
            }
        };
        for outcome in outcomes.iter_mut() {
            match outcome {
                Some(Outcome::Converted(done)) => claim(done),
                Some(Outcome::Source(results)) => converted_mut(results).for_each(&mut claim),
                Some(Outcome::Quarantined(_) | Outcome::NotSampled) | None => {}
            }
        }
    }
}

/// Writes the Codex rollouts of a converted batch into the home, in parallel on the current
/// pool (the writers), and frees their bytes; in a dry run, only decides what a run would do.
/// A duplicate ([`Claims`]) is left as marked.
fn place_batch(
    outcomes: &mut [Option<Outcome>],
    home: &Home,
    guard: &Guard,
) -> Result<(), OutputError> {
    let place = |done: &mut record::Converted| -> Result<(), OutputError> {
        if done.placed.is_none() {
            done.placed = Some(guard.place(home, &done.relative, &done.bytes, &done.digest)?);
            failpoint("placed");
        }
        done.bytes = Vec::new();
        Ok(())
    };
    outcomes
        .par_iter_mut()
        .try_for_each(|outcome| match outcome {
            Some(Outcome::Converted(done)) => place(done),
            Some(Outcome::Source(results)) => converted_mut(results).try_for_each(place),
            Some(Outcome::Quarantined(_) | Outcome::NotSampled) | None => Ok(()),
        })
}

/// Test hook: `ROLLOVER_FAILPOINT=STAGE` makes that stage panic, so the tests can prove that
/// a failing thread fails the run (exit 2, the stage named) instead of ending it early with a
/// summary that looks complete; `ROLLOVER_FAILPOINT=slow:STAGE` makes it take 20 ms a call, so
/// that a signal surely comes while it runs. `ROLLOVER_FAILPOINT=die-after:N` sends the process
/// SIGKILL once the writers have placed N rollouts (`kill -9`: no destructor, flush or cleanup
/// runs) and `sigint-after:N` sends it SIGINT there, so that the kill and interrupt tests stop a
/// run at a point they choose instead of polling its output. Read once; costs one atomic load
/// per call otherwise.
pub fn failpoint(stage: &str) {
    static FAILPOINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    static PLACED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let armed = FAILPOINT.get_or_init(|| std::env::var("ROLLOVER_FAILPOINT").ok());
    let Some(armed) = armed.as_deref() else {
        return;
    };
    if armed == stage {
        panic!("failpoint `{stage}` reached (ROLLOVER_FAILPOINT)");
    }
    if armed.strip_prefix("slow:") == Some(stage) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let after = |prefix: &str| armed.strip_prefix(prefix)?.parse::<u64>().ok();
    let signal = match (after("die-after:"), after("sigint-after:")) {
        (Some(n), _) => Some((n, signal_hook::consts::SIGKILL)),
        (None, Some(n)) => Some((n, signal_hook::consts::SIGINT)),
        (None, None) => None,
    };
    if let (Some((n, signal)), "placed") = (signal, stage) {
        // Counted over every writer thread: the one that places the N-th rollout signals.
        let placed = PLACED.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if placed == n && signal_hook::low_level::raise(signal).is_err() {
            panic!("failpoint `{armed}`: cannot send the signal");
        }
    }
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
