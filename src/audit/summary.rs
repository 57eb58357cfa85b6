//! Run counters: what was read, converted, quarantined, decided and repaired.

use std::collections::BTreeMap;

use serde::Serialize;

/// One damaged file: where reading stopped.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DamageReport {
    pub file: String,
    pub line: u64,
    pub byte_offset: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compressed_offset: Option<u64>,
    pub message: String,
}

/// The whole run, as written to `rollover/summary.json` and printed at the end.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub rules: Vec<String>,
    pub codex_version: String,
    pub dry_run: bool,
    pub files: u64,
    /// Size on disk of the input files read (compressed, for compressed files).
    pub bytes_on_disk: u64,
    /// Bytes of records read, decompressed.
    pub bytes_read: u64,
    pub records: u64,
    pub blank_lines: u64,
    pub converted: u64,
    pub quarantined: u64,
    /// Batch result lines joined to their request (converted as part of it).
    pub joined: u64,
    /// Quarantined records by reason class.
    pub quarantine_reasons: BTreeMap<String, u64>,
    pub damaged_files: Vec<DamageReport>,
    /// Response items written, by type (`message:user`, `function_call`, ...).
    pub items: BTreeMap<String, u64>,
    pub events: BTreeMap<String, u64>,
    /// Assistant messages by phase (`none` when the record could not tell).
    pub phases: BTreeMap<String, u64>,
    /// Decisions by rule id.
    pub rules_fired: BTreeMap<String, u64>,
    /// Decisions by action.
    pub actions: BTreeMap<String, u64>,
    /// Conversations quarantined by the validator, by invariant.
    pub violations: BTreeMap<String, u64>,
    pub text_bytes_in: u64,
    pub text_bytes_out: u64,
    pub text_bytes_dropped: u64,
    pub text_bytes_added: u64,
    pub ignored_fields: BTreeMap<String, u64>,
    /// How long the run took. Not in `summary.json`, which stays byte-identical for the same
    /// input: it is in the run's `timing.json`.
    #[serde(skip)]
    pub seconds: f64,
    /// The run's number: its report files are in `rollover/runs/NNNN/`.
    pub run: u32,
    /// `SIGINT` or `SIGTERM` when a signal stopped the run. Files it had not finished are not
    /// in the manifest: the next run converts them.
    pub interrupted: Option<String>,
    /// Input files unchanged since the manifest recorded them: not converted again.
    pub files_unchanged: u64,
    /// Input files converted completely and recorded in the manifest.
    pub files_done: u64,
    /// Rollouts already holding exactly the bytes this run would write.
    pub rollouts_unchanged: u64,
    /// Rollouts removed because their record is gone from a changed input file.
    pub rollouts_removed: u64,
    /// Sessions changed on disk since rollover wrote them (resumed in Codex, or edited): kept
    /// as they are, not overwritten or removed. Relative paths.
    pub sessions_kept: Vec<String>,
    /// Sessions changed on disk and replaced anyway (`--force`); each was first copied to
    /// `rollover/replaced/<path>`.
    pub sessions_replaced: Vec<String>,
    /// Temporary files a killed run had left, removed at the start of this one.
    pub temporary_files_removed: u64,
}

impl Summary {
    /// Something was quarantined or a file damaged: the run exits 1 so a scheduler can act.
    pub fn has_findings(&self) -> bool {
        self.quarantined > 0 || !self.damaged_files.is_empty()
    }

    /// Records read = converted + quarantined + joined: nothing is lost without a trace.
    pub fn adds_up(&self) -> bool {
        self.records == self.converted + self.quarantined + self.joined
    }
}

/// Adds `by` to `key`'s count (`key`: any string-like id, e.g. a [`RuleRef`](crate::rules::RuleRef)).
pub fn bump<K: AsRef<str> + ?Sized>(map: &mut BTreeMap<String, u64>, key: &K, by: u64) {
    let key = key.as_ref();
    match map.get_mut(key) {
        Some(count) => *count += by,
        None => {
            map.insert(key.to_string(), by);
        }
    }
}
