//! The convert pipeline, in three parts: the [`reader`] (one thread: discover order, decompress,
//! split into bounded batches) → [`record`] (the workers, in parallel: parse, convert,
//! validate, then write each rollout) → the [`collect`]or (in input order: quarantine lines,
//! conversation lines, counters, `summary.json`).
//!
//! Records travel in bounded batches, so memory stays flat in the archive's size; results are
//! collected in input order, so every output (rollouts, quarantine, summary) is deterministic
//! whatever the thread count. Per-record problems are outcomes, not errors; only discovery,
//! output failures and a panicking stage stop the run.

pub mod collect;
pub mod reader;
pub mod record;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use thiserror::Error;

use crate::audit::Summary;
use crate::input::batch::BatchIndex;
use crate::output::manifest::file_digest;
use crate::output::{Guard, Home, Manifest, OutputError, RunLock};
use crate::rules::{InvalidUnicode, RuleSet};
use crate::source::{discover, Damage, SourceError, SourceFile};
use collect::Collector;
use reader::Work;
pub use record::{process_record, Converted, Outcome};

#[derive(Debug, Error)]
pub enum PipelineError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("cannot start {threads} worker threads: {message}; pass a smaller --jobs")]
    Pool { threads: usize, message: String },
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
    let mut home = Home::new(&options.out);
    home.durable = options.durable;
    let lock = RunLock::acquire(&home)?;
    if let Some(pid) = lock.taken_over_from {
        progress.note(&format!(
            "took over the lock left by pid {pid}, which is no longer running"
        ));
    }
    let mut manifest = Manifest::load(&home)?;
    let (run_number, killed_run) = home.start_run()?;
    let temporary_files_removed = if manifest.recovered || killed_run {
        home.remove_temporary_files()?
    } else {
        0
    };
    let mut files = discover(&options.inputs, Some(&options.out))?;
    dedupe_keys(&mut files);
    let repair = rules.policy.invalid_unicode == InvalidUnicode::Replace;
    let batch_index = Arc::new(BatchIndex::scan(&files, &rules.input, repair));
    let (skip, digests) = plan(&files, &batch_index, &mut manifest, options.full)?;
    let files = Arc::new(files);
    let guard = Guard::new(manifest.rollout_digests(), options.force);
    let bytes_on_disk = files
        .iter()
        .zip(&skip)
        .filter(|(_, s)| !**s)
        .map(|(f, _)| f.size)
        .sum();
    let summary = Summary {
        bytes_on_disk,
        rules: rules.names.clone(),
        codex_version: rules.codex_version.clone(),
        dry_run: options.dry_run,
        files: files.len() as u64,
        run: run_number,
        files_unchanged: skip.iter().filter(|s| **s).count() as u64,
        temporary_files_removed,
        ..Summary::default()
    };
    let mut collector = Collector::new(&home, summary, &files, digests, &guard)?;
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

    let stop = Arc::new(AtomicBool::new(false));
    let reader = reader::spawn(reader::Plan {
        files: Arc::clone(&files),
        skip: skip.clone(),
        index: Arc::clone(&batch_index),
        stop: Arc::clone(&stop),
    });
    let mut failure: Option<PipelineError> = None;
    for batch in reader.batches.iter() {
        if options.stop.load(Ordering::Relaxed) != 0 {
            stop.store(true, Ordering::Relaxed);
        }
        let work = AssertUnwindSafe(|| {
            let context = BatchContext {
                files: &files,
                rules,
                index: &batch_index,
                home: &home,
                guard: &guard,
                options,
            };
            pool.install(|| convert_batch(&batch, &context))
        });
        let outcomes = match catch_unwind(work) {
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
        let recorded = collector.batch(&batch, outcomes, progress, disk_read, &mut manifest);
        if let Err(err) = recorded {
            failure = Some(err.into());
            break;
        }
    }
    // Dropping the receiver unblocks a reader still sending, so the join below returns.
    drop(reader.batches);
    if let Err(panic) = reader.handle.join() {
        return Err(panicked("reader", panic.as_ref()));
    }
    if let Some(err) = failure {
        return Err(err);
    }
    let signal = options.stop.load(Ordering::Relaxed);
    if signal == 0 {
        collector.batch_results(&batch_index, &skip)?;
    }
    collector.summary.interrupted = signal_name(signal);
    let summary = collector.finish(started.elapsed().as_secs_f64())?;
    if !options.dry_run {
        manifest.save(&home)?;
    }
    home.mark_latest()?;
    drop(lock);
    Ok(summary)
}

/// Which input files to read: a file whose size and mtime the manifest recorded is unchanged;
/// one whose content digest it recorded is too (and its new mtime is kept, so the next run
/// need not read it). Returns the files to skip and every file's digest. When a Batch API
/// results file changed, every file is read: its requests may be anywhere.
fn plan(
    files: &[SourceFile],
    index: &BatchIndex,
    manifest: &mut Manifest,
    full: bool,
) -> Result<(Vec<bool>, Vec<String>), PipelineError> {
    let mut skip = Vec::with_capacity(files.len());
    let mut digests = Vec::with_capacity(files.len());
    for file in files {
        let entry = manifest.files.get_mut(&file.key);
        if let Some(entry) = &entry {
            if entry.size == file.size && entry.mtime_ns == file.mtime_ns {
                skip.push(!full);
                digests.push(entry.digest.clone());
                continue;
            }
        }
        let digest = file_digest(&file.path).map_err(|source| SourceError::Open {
            path: file.display.to_string(),
            source,
        })?;
        let same = match entry {
            Some(entry) if entry.digest == digest => {
                entry.size = file.size;
                entry.mtime_ns = file.mtime_ns;
                true
            }
            Some(_) | None => false,
        };
        skip.push(same && !full);
        digests.push(digest);
    }
    let results_changed = (0..files.len()).any(|i| index.is_results_file(i) && !skip[i]);
    if results_changed {
        skip.iter_mut().for_each(|s| *s = false);
    }
    Ok((skip, digests))
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
    rules: &'a RuleSet,
    index: &'a BatchIndex,
    home: &'a Home,
    guard: &'a Guard,
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
            let Work::Record(record, file, ordinal) = work else {
                return Ok(None);
            };
            failpoint("convert");
            let mut outcome = if context.options.baseline {
                record::round_trip(record, *ordinal)
            } else {
                let key = &context.files[*file].key;
                process_record(record, key, *ordinal, context.rules, context.index)
            };
            if let (Outcome::Converted(done), false) = (&mut outcome, context.options.dry_run) {
                done.digest = crate::output::manifest::digest(&done.bytes);
                let placed =
                    context
                        .guard
                        .place(context.home, &done.relative, &done.bytes, &done.digest)?;
                done.placed = Some(placed);
            }
            Ok(Some(outcome))
        })
        .collect()
}

/// Test hook: `ROLLOVER_FAILPOINT=STAGE` makes that stage panic, so the tests can prove that
/// a failing thread fails the run (exit 2, the stage named) instead of ending it early with a
/// summary that looks complete. Read once; costs one atomic load per call otherwise.
pub fn failpoint(stage: &str) {
    static FAILPOINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let armed = FAILPOINT.get_or_init(|| std::env::var("ROLLOVER_FAILPOINT").ok());
    if armed.as_deref() == Some(stage) {
        panic!("failpoint `{stage}` reached (ROLLOVER_FAILPOINT)");
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
