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
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use thiserror::Error;

use crate::audit::Summary;
use crate::input::batch::BatchIndex;
use crate::output::{Home, OutputError};
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
}

/// Progress callbacks; the command decides how to show them.
pub trait Progress: Sync {
    fn start(&self, files: u64, bytes: u64);
    /// `records` and `bytes` (decompressed) done in this batch; `disk` bytes of the input files
    /// read so far in all (compressed bytes for compressed files).
    fn advance(&self, records: u64, bytes: u64, disk: u64);
    fn damage(&self, damage: &Damage);
}

/// Runs the whole conversion and returns the summary.
pub fn run(
    options: &Options,
    rules: &RuleSet,
    progress: &dyn Progress,
) -> Result<Summary, PipelineError> {
    let started = Instant::now();
    let mut files = discover(&options.inputs, Some(&options.out))?;
    dedupe_keys(&mut files);
    let repair = rules.policy.invalid_unicode == InvalidUnicode::Replace;
    let batch_index = Arc::new(BatchIndex::scan(&files, &rules.input, repair));
    let files = Arc::new(files);
    let home = Home::new(&options.out);
    let summary = Summary {
        rules: rules.names.clone(),
        codex_version: rules.codex_version.clone(),
        dry_run: options.dry_run,
        files: files.len() as u64,
        ..Summary::default()
    };
    let mut collector = Collector::new(&home, summary)?;
    progress.start(files.len() as u64, files.iter().map(|f| f.size).sum());
    let threads = options.jobs.unwrap_or(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| PipelineError::Pool {
            threads,
            message: e.to_string(),
        })?;

    let reader = reader::spawn(Arc::clone(&files), Arc::clone(&batch_index));
    let mut failure: Option<PipelineError> = None;
    for batch in reader.batches.iter() {
        let work = AssertUnwindSafe(|| {
            pool.install(|| convert_batch(&batch, &files, rules, &batch_index, &home, options))
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
        if let Err(err) = collector.batch(&batch, outcomes, progress, disk_read) {
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
    collector.batch_results(&batch_index)?;
    Ok(collector.finish(started.elapsed().as_secs_f64())?)
}

/// Converts one batch in parallel and writes its rollouts; outcomes in batch order.
fn convert_batch(
    batch: &[Work],
    files: &[SourceFile],
    rules: &RuleSet,
    index: &BatchIndex,
    home: &Home,
    options: &Options,
) -> Result<Vec<Option<Outcome>>, OutputError> {
    batch
        .par_iter()
        .map(|work| {
            let Work::Record(record, file, ordinal) = work else {
                return Ok(None);
            };
            failpoint("convert");
            let outcome = if options.baseline {
                record::round_trip(record, *ordinal)
            } else {
                process_record(record, &files[*file].key, *ordinal, rules, index)
            };
            if let (Outcome::Converted(done), false) = (&outcome, options.dry_run) {
                home.write_atomic(&done.relative, &done.bytes)?;
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
