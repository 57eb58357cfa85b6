//! Run counters: what was read, converted, quarantined, decided and repaired.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One damaged file: where reading stopped.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DamageReport {
    pub file: String,
    pub line: u64,
    pub byte_offset: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compressed_offset: Option<u64>,
    pub message: String,
}

/// A path the walk or the reader could not read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UnreadableReport {
    pub path: String,
    pub message: String,
}

/// A session rollover wrote once that the user archived or deleted since: not written again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WithheldReport {
    pub path: String,
    /// `archived` (found in `archived_sessions/`) or `deleted`.
    pub reason: String,
}

/// The fingerprints of a run (hex digests).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Fingerprints {
    pub rules: String,
    pub options: String,
}

/// Files read again because what converts them changed since the run that converted them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SettingsChange {
    /// `rules`, `options`, or `rules and options`.
    pub what: String,
    /// The latest run whose report is still there that converted these files' under the
    /// settings they had (0 when none is: its run folder was removed).
    pub since_run: u32,
    pub files: u64,
}

/// One shard of a sharded run (`convert --shard K/N`): which, where the index came from, and
/// what `report merge` checks is the same in every shard.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShardReport {
    pub index: u32,
    pub count: u32,
    /// Where the index came from: `--shard`, `SLURM_ARRAY_TASK_ID`, `JOB_COMPLETION_INDEX`.
    pub index_from: String,
    /// Where the count came from: `--shard`, `--shards`, `SLURM_ARRAY_TASK_COUNT`.
    pub count_from: String,
    /// Files larger than this were split into ranges of this many bytes.
    pub split_bytes: u64,
    /// The rollover that wrote this shard (`CARGO_PKG_VERSION`).
    pub rollover_version: String,
    /// `--format` (`codex`, `responses`).
    pub format: String,
    /// `--max-quarantine-rate`, for the merged report's verdict.
    pub max_quarantine_rate: f64,
    /// `--report-text`.
    pub report_text: bool,
    /// How many of `unreadable` the walk found (every shard walks every input: the merge
    /// counts those once); the rest are this shard's own files.
    pub walk_unreadable: usize,
}

/// The whole run, as written to `rollover/summary.json` and printed at the end.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    /// The version of this file's schema (README "Report files"); bumped on any change that
    /// is not a new optional field.
    pub schema_version: u32,
    pub rules: Vec<String>,
    /// SHA-256 of each rule file's text, in the order of `rules`.
    pub rule_digests: Vec<String>,
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
    #[serde(skip, default)]
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
    /// Rollouts removed by `--prune` (the length of `sessions_pruned`).
    pub rollouts_removed: u64,
    /// Sessions changed on disk since rollover wrote them (resumed in Codex, or edited), whose
    /// source has newer data: kept as they are and pending (the next run says so again;
    /// `--force` replaces them). Relative paths.
    pub sessions_kept: Vec<String>,
    /// Sessions changed on disk and replaced anyway (`--force`); each was first copied to
    /// `rollover/replaced/<path>`.
    pub sessions_replaced: Vec<String>,
    /// Sessions written where nothing was.
    pub sessions_new: u64,
    /// Sessions rollover wrote before, written again with new content (their source changed,
    /// or the rules or options did).
    pub sessions_updated: u64,
    /// Sessions rollover wrote once that the user archived or deleted since: not written again
    /// (`--force` writes them).
    pub sessions_withheld: Vec<WithheldReport>,
    /// Conversations read more than once in this run (one file under two names, ...): each
    /// session placed once, by the first in input order.
    pub sessions_duplicate: u64,
    /// Sessions whose record is gone from its source: kept as written (copy semantics;
    /// `--prune` removes them).
    pub sessions_left: u64,
    /// Sessions `--prune` removed. Relative paths.
    pub sessions_pruned: Vec<String>,
    /// Sessions `--prune` did not remove because Codex changed them since.
    pub sessions_not_pruned: Vec<String>,
    /// `--prune` was given.
    pub prune: bool,
    /// Files read again because the rules or the options changed since the run that
    /// converted them.
    pub settings_changed: Vec<SettingsChange>,
    /// Files read again because sessions of theirs were kept pending.
    pub files_pending: u64,
    /// The reports' verdict (`ready`, `ready with repairs`, `blocked`, ...).
    #[serde(default)]
    pub verdict: String,
    /// The fingerprints of the rules and of the output options of this run (what the manifest
    /// records with each file it converts).
    #[serde(default)]
    pub fingerprint: Fingerprints,
    /// Temporary files a killed run had left, removed at the start of this one.
    pub temporary_files_removed: u64,
    /// Every decision, by action, then by the rule behind it.
    pub decisions: BTreeMap<String, BTreeMap<String, u64>>,
    /// Records audited, as a share of all (`--sample`): 1 when every record was.
    pub sample_rate: f64,
    /// Records left out by `--sample`.
    pub records_not_sampled: u64,
    /// Bytes of the rollouts written (or, in a dry run, that would be).
    pub output_bytes: u64,
    /// Files found by walking a folder that are not record files, by extension (`.txt`,
    /// `(none)`).
    pub skipped_other_extensions: BTreeMap<String, u64>,
    /// Hidden files and folders not read (`--hidden` reads them; a folder counts once).
    pub skipped_hidden: u64,
    /// Symlinks not followed (`--follow` follows them).
    pub skipped_symlinks: u64,
    /// Files and folders matching `--exclude`, not read (a folder counts once).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub skipped_excluded: u64,
    /// Record files matching no `--glob`, not read.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub skipped_unmatched: u64,
    /// Codex homes found inside an input folder, not entered.
    pub skipped_codex_homes: Vec<String>,
    /// Symlinks leading back to a folder above them, not followed again.
    pub symlink_loops: Vec<String>,
    /// Files and folders that could not be read; the run went on without them.
    pub unreadable: Vec<UnreadableReport>,
    /// Records whose messages were found by shape (no `messages_at` path held them), by path.
    pub messages_by_shape: BTreeMap<String, u64>,
    /// Input files read, by source format (`chat`, `claude-code`, ...).
    #[serde(default)]
    pub formats: BTreeMap<String, u64>,
    /// Records read into a conversation after its first record (the other lines of a Claude
    /// Code session, the earlier requests of a logged chain): converted as part of it.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub records_merged: u64,
    /// Records that hold no conversation, dropped by a rule (Claude Code `progress` lines),
    /// by the rule's id.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub records_dropped: BTreeMap<String, u64>,
    /// A shard's run (`--shard K/N`): which shard; absent in an unsharded run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardReport>,
    /// A run merged by `report merge` from this many shards; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_shards: Option<u32>,
}

/// Every input file was Chat Completions (or there was none).
pub fn only_chat(formats: &BTreeMap<String, u64>) -> bool {
    formats.keys().all(|f| f == "chat")
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The schema version of `summary.json` and of each `conversations.jsonl` line.
pub const SCHEMA_VERSION: u32 = 1;

impl Summary {
    /// Something was quarantined or a file damaged: the run exits 1 so a scheduler can act.
    pub fn has_findings(&self) -> bool {
        self.quarantined > 0
            || !self.damaged_files.is_empty()
            || !self.unreadable.is_empty()
            || !self.symlink_loops.is_empty()
    }

    /// Records read = converted + merged into a conversation + quarantined + joined +
    /// dropped by a rule: nothing is lost without a trace.
    pub fn adds_up(&self) -> bool {
        let dropped: u64 = self.records_dropped.values().sum();
        self.records
            == self.converted + self.records_merged + self.quarantined + self.joined + dropped
    }
}

impl Summary {
    /// Adds another part of the same run's counters and counts by key to these (`report
    /// merge`: one shard's to the others'). Lists and the walk's skips, which are not sums,
    /// are left to the caller.
    pub fn add_counts(&mut self, other: &Summary) {
        let sums = [
            (&mut self.files, other.files),
            (&mut self.bytes_on_disk, other.bytes_on_disk),
            (&mut self.bytes_read, other.bytes_read),
            (&mut self.records, other.records),
            (&mut self.blank_lines, other.blank_lines),
            (&mut self.converted, other.converted),
            (&mut self.quarantined, other.quarantined),
            (&mut self.joined, other.joined),
            (&mut self.records_merged, other.records_merged),
            (&mut self.text_bytes_in, other.text_bytes_in),
            (&mut self.text_bytes_out, other.text_bytes_out),
            (&mut self.text_bytes_dropped, other.text_bytes_dropped),
            (&mut self.text_bytes_added, other.text_bytes_added),
            (&mut self.files_unchanged, other.files_unchanged),
            (&mut self.files_done, other.files_done),
            (&mut self.rollouts_unchanged, other.rollouts_unchanged),
            (&mut self.rollouts_removed, other.rollouts_removed),
            (&mut self.sessions_new, other.sessions_new),
            (&mut self.sessions_updated, other.sessions_updated),
            (&mut self.sessions_duplicate, other.sessions_duplicate),
            (&mut self.sessions_left, other.sessions_left),
            (&mut self.files_pending, other.files_pending),
            (
                &mut self.temporary_files_removed,
                other.temporary_files_removed,
            ),
            (&mut self.records_not_sampled, other.records_not_sampled),
            (&mut self.output_bytes, other.output_bytes),
        ];
        for (total, part) in sums {
            *total += part;
        }
        let maps = [
            (&mut self.quarantine_reasons, &other.quarantine_reasons),
            (&mut self.items, &other.items),
            (&mut self.events, &other.events),
            (&mut self.phases, &other.phases),
            (&mut self.rules_fired, &other.rules_fired),
            (&mut self.actions, &other.actions),
            (&mut self.violations, &other.violations),
            (&mut self.ignored_fields, &other.ignored_fields),
            (&mut self.messages_by_shape, &other.messages_by_shape),
            (&mut self.formats, &other.formats),
            (&mut self.records_dropped, &other.records_dropped),
        ];
        for (total, part) in maps {
            for (key, n) in part {
                bump(total, key, *n);
            }
        }
        self.sessions_withheld
            .extend(other.sessions_withheld.iter().cloned());
        self.sessions_pruned
            .extend(other.sessions_pruned.iter().cloned());
        self.sessions_not_pruned
            .extend(other.sessions_not_pruned.iter().cloned());
        self.settings_changed
            .extend(other.settings_changed.iter().cloned());
        self.prune |= other.prune;
        for (action, by_rule) in &other.decisions {
            let total = self.decisions.entry(action.clone()).or_default();
            for (rule, n) in by_rule {
                bump(total, rule, *n);
            }
        }
    }
}

/// `1 file`, `2 files` (digits grouped by the terminal's own formatter elsewhere).
pub fn files_phrase(n: u64) -> String {
    if n == 1 {
        "1 file".to_string()
    } else {
        format!("{n} files")
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
