//! The run files beside a run's reports: `shard.json` (what `report merge` needs of a shard's
//! run) and `timing.json` (how long the run took, apart from the summary).

use serde::{Deserialize, Serialize};

use crate::audit::report::{Excerpt, FileStats};
use crate::audit::Summary;

/// The run file `shard.json` of a shard's run: what `report merge` needs beyond the summary
/// and the report lines.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ShardIndex {
    pub files: Vec<ShardFile>,
    /// In the order the shard wrote them.
    pub segments: Vec<Segment>,
    /// `--report-text`: the excerpts of quarantined records, in order.
    pub excerpts: Vec<Excerpt>,
}

/// One input file a shard read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ShardFile {
    /// Its place in the walk, the same in every shard.
    pub index: usize,
    pub key: String,
    /// This shard counted it in the file-level numbers.
    pub counted: bool,
    /// This shard's records of it (a split file's are spread over shards).
    pub stats: FileStats,
}

/// A run of report lines from one file and byte range, with how many entries of each ordered
/// list it added.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Segment {
    /// The file's place in the walk.
    pub file: usize,
    pub range: u64,
    pub conversations: u64,
    pub quarantine: u64,
    pub damaged_files: u64,
    pub sessions_kept: u64,
    pub sessions_replaced: u64,
    pub excerpts: u64,
}

/// How long each ordered list was when a segment started.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Marks {
    pub(super) conversations: u64,
    pub(super) quarantine: u64,
    pub(super) damaged_files: u64,
    pub(super) sessions_kept: u64,
    pub(super) sessions_replaced: u64,
    pub(super) excerpts: u64,
}

/// How long a run took, and how fast it went: `runs/NNNN/timing.json`, apart from
/// `summary.json` so that the summary stays the same for the same input.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Timing {
    /// The run's own time, from its start to its end less `wait_seconds`.
    pub seconds: f64,
    /// The time spent waiting for another run's lock (`--wait`) before this one could start.
    pub wait_seconds: f64,
    pub records: u64,
    pub records_per_second: f64,
    /// Input files read, on disk.
    pub bytes_on_disk: u64,
    /// Records read, decompressed.
    pub bytes_read: u64,
    /// Decompressed MiB per second (1 MiB = 1,048,576 bytes).
    pub mib_per_second: f64,
}

impl Timing {
    pub(crate) fn of(summary: &Summary, seconds: f64) -> Timing {
        let per_second = |n: u64| n as f64 / seconds.max(1e-9);
        Timing {
            seconds,
            wait_seconds: summary.wait_seconds,
            records: summary.totals.records,
            records_per_second: per_second(summary.totals.records),
            bytes_on_disk: summary.totals.bytes_on_disk,
            bytes_read: summary.totals.bytes_read,
            mib_per_second: per_second(summary.totals.bytes_read) / (1024.0 * 1024.0),
        }
    }
}

/// A shard's run file for `report merge`.
pub(crate) const SHARD_INDEX: &str = "shard.json";
