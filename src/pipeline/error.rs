//! How a run fails: a [`PipelineError`], and the stop a signal or a panicking stage makes.

use std::sync::atomic::Ordering;

use thiserror::Error;

use crate::output::OutputError;

use super::{Options, Signal};
use crate::source::SourceError;

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
    #[error("stopped by {} while {stage}, before anything was converted; run again to convert", Signal::recorded(*signal).map_or_else(|| format!("signal {signal}"), Signal::name))]
    Interrupted { signal: usize, stage: &'static str },
    /// A bug: a stage panicked. The run stops rather than write a summary that looks complete.
    #[error("the {stage} stage failed unexpectedly ({message}); the run stopped and its report is incomplete: please report this with the input that caused it")]
    Panicked {
        stage: &'static str,
        message: String,
    },
}

/// A pre-pass (the walk, the digests, the Batch API scan) stops early when a signal comes: its
/// partial result is not used, the run ends here.
pub(super) fn interrupted(options: &Options, stage: &'static str) -> Result<(), PipelineError> {
    match options.stop.load(Ordering::Relaxed) {
        0 => Ok(()),
        signal => Err(PipelineError::Interrupted { signal, stage }),
    }
}

pub(super) fn panicked(stage: &'static str, panic: &(dyn std::any::Any + Send)) -> PipelineError {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string());
    PipelineError::Panicked { stage, message }
}
