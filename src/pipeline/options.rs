//! What the caller asks of a run ([`Options`]), and what makes its output what it is
//! ([`Fingerprint`]).

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use crate::input::SourceFormat;
use crate::source::{ShardSource, WalkOptions};

use super::prune;
use crate::model::responses::Format;

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
    /// Write through a symlinked `OUT/sessions` (`--write-through-links`).
    pub write_through_links: bool,
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
