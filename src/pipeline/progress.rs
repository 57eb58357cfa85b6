//! What a run tells its caller as it goes ([`Progress`]); the command decides how to show it.

use std::collections::{BTreeMap, HashSet};

use super::PlannedFile;
use crate::source::Damage;

/// Progress callbacks; the command decides how to show them.
pub trait Progress: Sync {
    fn start(&self, files: u64, bytes: u64);
    /// `records` and `bytes` (decompressed) done in this batch; `disk` bytes of the input files
    /// read so far in all (compressed bytes for compressed files).
    fn advance(&self, records: u64, bytes: u64, disk: u64);
    fn damage(&self, damage: &Damage);
    /// Something the user should know that is not a problem with a record.
    fn note(&self, note: &Note);
    /// Every record of one input file is done (`--verbose` shows it).
    fn file_done(&self, _file: &FileCounts) {}
}

/// One input file's records, once all are done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileCounts {
    /// The file as the reports name it.
    pub file: String,
    /// Every record: converted + merged + quarantined + joined + dropped.
    pub records: u64,
    /// Records that became a conversation (its first record).
    pub converted: u64,
    /// Records read into a conversation after its first (the summary's `records_merged`).
    pub merged: u64,
    pub quarantined: u64,
    /// Batch API results joined to their request.
    pub joined: u64,
    /// Records a rule drops (the summary's `records_dropped`).
    pub dropped: u64,
}

/// The `--verbose` lines of the Batch API results files: their results are counted once every
/// file is read (`Collector::batch_results`), so each file's line waits for them.
#[derive(Debug, Default)]
pub(crate) struct HeldLines {
    /// The run's results files, by their place among the run's files.
    pub files: HashSet<usize>,
    held: BTreeMap<usize, FileCounts>,
}

impl HeldLines {
    /// A file read to its end: its line now, or held when it is a results file.
    pub(crate) fn file_done(&mut self, file: usize, counts: FileCounts, progress: &dyn Progress) {
        if self.files.contains(&file) {
            self.held.insert(file, counts);
        } else {
            progress.file_done(&counts);
        }
    }

    /// A result of the results file `file`: joined to its request, or quarantined.
    pub(crate) fn result(&mut self, file: usize, joined: bool) {
        let counts = self.held.entry(file).or_default();
        counts.records += 1;
        if joined {
            counts.joined += 1;
        } else {
            counts.quarantined += 1;
        }
    }

    /// The held lines, their results counted, in input order.
    pub(crate) fn results_done(&mut self, files: &[PlannedFile], progress: &dyn Progress) {
        for (file, mut counts) in std::mem::take(&mut self.held) {
            if let Some(planned) = files.get(file) {
                counts.file = planned.source.display.to_string();
            }
            progress.file_done(&counts);
        }
    }
}

/// Something a run tells the user that is not a problem with a record; the command words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// What the walk left out (other extensions, hidden files, symlinks, ...), as the walk
    /// words it.
    Walk(String),
    /// A symlink loop the walk did not follow.
    SymlinkLoop { path: String },
    /// An input that cannot be read: skipped.
    Unreadable { path: String, message: String },
    /// A linked folder of the output home, as the home words it.
    LinkedFolder(String),
    /// Another run holds the home's lock: this one waits (`--wait`), as the lock words it.
    Waiting(String),
    /// The lock of a process no longer running was taken over.
    TookOverLock { pid: u32 },
    /// An entry of the runs folder named as a run folder that is not a folder.
    StrayRunFolder { name: String },
    /// What the run will read, said before it reads.
    Plan(PlanCounts),
    /// Files read again though unchanged: their rules or options changed since a run
    /// (`since_run`; 0: an earlier run whose report is gone).
    SettingsChanged {
        what: String,
        since_run: u32,
        files: u64,
        dry_run: bool,
    },
    /// Files read again for their sessions kept pending.
    Pending { files: u64 },
    /// `--keep-runs` removed this many run folders.
    RunsRemoved { removed: usize, keep: usize },
    /// A shard's Batch API results without a request in its own files: looked for in the
    /// other shards' files.
    ClaimingElsewhere { unclaimed: usize },
}

/// The plan's counts of files, by why each is read or left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanCounts {
    pub new: u64,
    pub changed: u64,
    /// Read again though unchanged.
    pub again: u64,
    pub unchanged: u64,
    /// Every file is read (`--full`, or a dry run).
    pub full: bool,
}
