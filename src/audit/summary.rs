//! Run counters: what was read, converted, quarantined, decided and repaired.
//!
//! [`Summary`] is made of parts ([`Setup`], [`Totals`], [`Breakdown`], ...), flattened into
//! the one object of `summary.json`. [`Merge`] adds the parts of two runs' summaries (`report
//! merge`: the shards'), each taken apart by a pattern that names every field; this module
//! denies unused variables, so a field named there but not merged is an error too.

// A field of a part named in its merge's pattern and not merged fails the build.
#![deny(unused_variables)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::location::{BrokeAt, Place};

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

impl DamageReport {
    /// Where the file broke, spelt as stderr spelt it when the run met the damage.
    pub fn broke_at(&self) -> String {
        BrokeAt {
            place: Place {
                path: &self.file,
                line: self.line,
                byte: self.byte_offset,
                element: None,
            },
            compressed: self.compressed_offset,
        }
        .to_string()
    }
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

/// A version of a conversation the run did not place as it came (older, in conflict) or
/// placed under a session of its own (another conversation under the same source id).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct VersionReport {
    /// The session's path.
    pub path: String,
    /// This version's record (`file:line`).
    pub source: String,
    /// The version placed: its record (`file:line`), or the file the manifest recorded.
    pub other: String,
}

/// A copy the run kept of a session before it replaced or pruned it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CopyReport {
    pub path: String,
    pub copy: String,
}

/// What earlier runs found in files this run did not read (unchanged since): their
/// quarantined records and damage, carried in every report until the file is read again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CarriedFindings {
    /// Records, quarantined records and damaged places of those files.
    pub carried_records: u64,
    pub carried_quarantined: u64,
    pub carried_damaged: u64,
    /// The files, each with the run that found its findings and the first of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carried_files: Vec<CarriedFile>,
}

/// One file's carried findings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CarriedFile {
    pub file: String,
    /// The run whose `quarantine.jsonl` holds the records.
    pub run: u32,
    pub quarantined: u64,
    pub damaged: u64,
    /// The first findings, in the file's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listed: Vec<CarriedFinding>,
}

/// One carried finding: where it is in its file, and what it is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CarriedFinding {
    pub line: u64,
    pub byte_offset: u64,
    /// The quarantine class, or `damaged`.
    pub class: String,
    pub reason: String,
}

impl CarriedFindings {
    /// At most this many findings of one file are listed.
    pub const LISTED: usize = 200;

    /// Adds one file's findings: a file already there (the ranges of a split file, carried by
    /// several shards) gets them added to its own, in its order.
    pub fn add(&mut self, file: CarriedFile) {
        self.carried_quarantined += file.quarantined;
        self.carried_damaged += file.damaged;
        match self.carried_files.iter_mut().find(|f| f.file == file.file) {
            Some(there) => {
                there.quarantined += file.quarantined;
                there.damaged += file.damaged;
                there.run = there.run.min(file.run);
                there.listed.extend(file.listed);
                there.listed.sort_by_key(|f| (f.line, f.byte_offset));
                there.listed.truncate(Self::LISTED);
            }
            None => {
                let at = self
                    .carried_files
                    .partition_point(|f| f.file.as_str() < file.file.as_str());
                self.carried_files.insert(at, file);
            }
        }
    }
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
    /// The fingerprint of the inputs the shard walked (every file's key, size and time, in
    /// order): shards of one run agree on it, and `report merge` refuses those that do not.
    #[serde(default)]
    pub inputs: String,
}

/// The whole run, as written to `rollover/summary.json` and printed at the end.
///
/// Its counters are grouped in parts, each flattened into the one JSON object `summary.json`
/// has always been (the parts follow its order of fields). `report merge` adds the shards'
/// summaries up with [`Merge`], which names every field of every part: a counter added
/// without deciding how shards merge it does not compile.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    #[serde(flatten)]
    pub setup: Setup,
    #[serde(flatten)]
    pub totals: Totals,
    #[serde(flatten)]
    pub breakdown: Breakdown,
    #[serde(flatten)]
    pub text: TextCounts,
    /// How long the run took. Not in `summary.json`, which stays byte-identical for the same
    /// input: it is in the run's `timing.json`.
    #[serde(skip, default)]
    pub seconds: f64,
    /// How long the run waited for another run's lock first (`--wait`): not run time, and
    /// not in `summary.json` either (`timing.json` has it).
    #[serde(skip, default)]
    pub wait_seconds: f64,
    /// The run's number: its report files are in `rollover/runs/NNNN/`.
    pub run: u32,
    /// `SIGINT` or `SIGTERM` when a signal stopped the run. Files it had not finished are not
    /// in the manifest: the next run converts them.
    pub interrupted: Option<String>,
    #[serde(flatten)]
    pub home: HomeChanges,
    #[serde(flatten)]
    pub read_again: ReadAgain,
    #[serde(flatten)]
    pub carried: CarriedFindings,
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
    #[serde(flatten)]
    pub walk: WalkFindings,
    #[serde(flatten)]
    pub reading: Reading,
    /// A shard's run (`--shard K/N`): which shard; absent in an unsharded run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardReport>,
    /// A run merged by `report merge` from this many shards; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_shards: Option<u32>,
}

/// What the run was set up with: the same in every shard of a sharded run (`report merge`
/// checks), so never added up.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Setup {
    /// The version of this file's schema (README "Report files"); bumped on any change that
    /// is not a new optional field.
    pub schema_version: u32,
    pub rules: Vec<String>,
    /// SHA-256 of each rule file's text, in the order of `rules`.
    pub rule_digests: Vec<String>,
    pub codex_version: String,
    pub dry_run: bool,
}

/// Files and bytes read, records and what became of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Totals {
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
}

/// The totals by kind: quarantined records by reason and the damaged files; what was written
/// by item, event and phase; the decisions by rule and action; violations by invariant.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Breakdown {
    /// Quarantined records by reason class.
    pub quarantine_reasons: BTreeMap<String, u64>,
    /// The records of class `rule` by the id of the rule that refused them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quarantine_rules: BTreeMap<String, u64>,
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
}

/// Where the transcripts' text went ([`crate::audit::accounting`]), and the input fields the
/// readers ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TextCounts {
    pub text_bytes_in: u64,
    pub text_bytes_out: u64,
    pub text_bytes_dropped: u64,
    pub text_bytes_added: u64,
    pub ignored_fields: BTreeMap<String, u64>,
}

/// What the run did to the output home (a dry run: would do): the input files it recorded,
/// the rollouts and sessions it wrote, kept, replaced, withheld, left or pruned.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HomeChanges {
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
    /// Sessions in the home whose record no input of the run gives (cut from its file, or the
    /// file gone from the walk), kept as written (copy semantics): what `--prune` would remove.
    pub sessions_left: u64,
    /// The sessions left by the rule set that wrote them (`rules default + mine.toml
    /// (a1b2c3d4)`, `this run's rules, ...`): they hold that rule set's output.
    #[serde(default)]
    pub sessions_left_rules: BTreeMap<String, u64>,
    /// The first sessions left, each with the rule set that wrote it.
    #[serde(default)]
    pub sessions_left_listed: Vec<String>,
    /// Sessions `--prune` removed. Relative paths.
    pub sessions_pruned: Vec<String>,
    /// Sessions `--prune` did not remove because Codex changed them since (or another
    /// process holds them open).
    pub sessions_not_pruned: Vec<String>,
    /// `--prune` was given.
    pub prune: bool,
    /// Versions older than the one placed (an older export, a backup beside the live file):
    /// not written.
    #[serde(default)]
    pub sessions_older: Vec<VersionReport>,
    /// Versions that neither extend nor are extended by the one placed, from another file:
    /// the placed session is left as it is and pending (`--force` writes the version, keeping
    /// a copy).
    #[serde(default)]
    pub sessions_conflict: Vec<VersionReport>,
    /// Conversations of one input under the source id of another, unrelated one: each kept,
    /// under a session of its own.
    #[serde(default)]
    pub sessions_split: Vec<VersionReport>,
    /// Sessions another process holds open, or that changed while the run read them: kept as
    /// they are and pending, with the reason.
    #[serde(default)]
    pub sessions_busy: Vec<WithheldReport>,
    /// The copies this run kept (`rollover/replaced/RUN/`, `rollover/pruned/RUN/`).
    #[serde(default)]
    pub copies_kept: Vec<CopyReport>,
    /// Why `--prune` removed nothing (more sessions would go than `--max-prune` allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune_refused: Option<String>,
}

/// Input files read again though unchanged since the run that converted them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReadAgain {
    /// Files read again because the rules or the options changed since the run that
    /// converted them.
    pub settings_changed: Vec<SettingsChange>,
    /// Files read again because sessions of theirs were kept pending.
    pub files_pending: u64,
}

/// What the walk of the inputs left out, and the paths the run could not read. Every shard
/// walks every input: `report merge` takes the first shard's, and adds each shard's own
/// unreadable files ([`ShardReport::walk_unreadable`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WalkFindings {
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
    /// Every path not read, by reason: the count and the first paths, each with why (the
    /// unreadable ones those of `unreadable`).
    #[serde(default)]
    pub not_read: crate::model::not_read::NotRead,
}

impl WalkFindings {
    /// These findings with `not_read` listing the paths of `unreadable`: the walk's and the
    /// run's own (a shard's, put together by `report merge`).
    pub(crate) fn with_unreadable_listed(mut self) -> WalkFindings {
        use crate::model::not_read::{NotReadPath, NotReadReason};
        let paths = self.unreadable.iter().map(|u| NotReadPath {
            path: u.path.clone(),
            reason: u.message.clone(),
        });
        self.not_read.set(NotReadReason::Unreadable, paths);
        self
    }
}

/// How the source formats' readers read the records: the formats, the messages found by
/// shape, the records merged into a conversation or dropped by a rule.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Reading {
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
}

/// Every input file was Chat Completions (or there was none).
pub(crate) fn only_chat(formats: &BTreeMap<String, u64>) -> bool {
    formats.keys().all(|f| f == "chat")
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The schema version of `summary.json` and of each `conversations.jsonl` line.
pub(crate) const SCHEMA_VERSION: u32 = 1;

impl Summary {
    /// Something needs a person: records quarantined (beyond `max_rate`, when given; carried
    /// ones included), a file damaged or not read, a session pending. The one rule a finished
    /// run exits 1 by (`commands::Exit::for_run`, for `convert` and `report merge`), so a
    /// scheduler can act.
    /// The reports' verdict says the same by the same findings ([`super::findings::of`]).
    pub fn has_findings(&self, max_rate: Option<f64>) -> bool {
        !super::findings::of(self, max_rate).is_empty()
    }

    /// Records read = converted + merged into a conversation + quarantined + joined +
    /// dropped by a rule: nothing is lost without a trace. Checked at the end of every run
    /// (`commands::Exit::for_run`): a run whose counts do not add up exits 70.
    pub fn adds_up(&self) -> bool {
        let Totals {
            records,
            converted,
            quarantined,
            joined,
            ..
        } = self.totals;
        let dropped: u64 = self.reading.records_dropped.values().sum();
        records == converted + self.reading.records_merged + quarantined + joined + dropped
    }
}

/// Adds another part of the same run's counters to these (`report merge`: one shard's to the
/// others'). Each implementation takes `other` apart with a pattern that names every field
/// (no `..`): a field added to a part fails to compile until its merge is written here, and
/// one named but not merged is an unused variable, denied in this module. Fields that are
/// not sums say so with `_` and why.
pub(crate) trait Merge {
    /// Fails, leaving `self` in part merged, when a sum would not fit: counters read back
    /// from files (a tampered shard's) are added with checked arithmetic, never wrapped.
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow>;
}

/// A sum of counters that does not fit in 64 bits: one of the parts added is not a real count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a counter does not fit in 64 bits once added up: a shard's report holds a count no run makes"
)]
pub(crate) struct Overflow;

impl Merge for u64 {
    fn merge_from(&mut self, other: &u64) -> Result<(), Overflow> {
        *self = self.checked_add(*other).ok_or(Overflow)?;
        Ok(())
    }
}

/// Counts by key (and counts by key by key): added key by key.
impl<V: Merge + Default> Merge for BTreeMap<String, V> {
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow> {
        for (key, value) in other {
            self.entry(key.clone()).or_default().merge_from(value)?;
        }
        Ok(())
    }
}

/// A list whose order is the shards' (not the walk's): the other's entries after these.
impl<T: Clone> Merge for Vec<T> {
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow> {
        self.extend(other.iter().cloned());
        Ok(())
    }
}

impl Merge for Summary {
    /// The parts that are the same in every shard, or the merged run's own, are left as they
    /// are: the caller sets them.
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow> {
        let Summary {
            // The same in every shard (`report merge` checks): the first shard's.
            setup: _,
            fingerprint: _,
            sample_rate: _,
            // Every shard walks every input: the first shard's, and each one's own unreadable
            // files, which the caller adds.
            walk: _,
            totals,
            breakdown,
            text,
            home,
            read_again,
            carried,
            reading,
            temporary_files_removed,
            decisions,
            records_not_sampled,
            output_bytes,
            // The merged run's own: its number, time and verdict. An interrupted shard is not
            // merged, and the merged run is no shard.
            seconds: _,
            wait_seconds: _,
            run: _,
            interrupted: _,
            verdict: _,
            shard: _,
            merged_shards: _,
        } = other;
        self.totals.merge_from(totals)?;
        self.breakdown.merge_from(breakdown)?;
        self.text.merge_from(text)?;
        self.home.merge_from(home)?;
        self.read_again.merge_from(read_again)?;
        self.carried.merge_from(carried)?;
        self.reading.merge_from(reading)?;
        self.temporary_files_removed
            .merge_from(temporary_files_removed)?;
        self.decisions.merge_from(decisions)?;
        self.records_not_sampled.merge_from(records_not_sampled)?;
        self.output_bytes.merge_from(output_bytes)?;
        Ok(())
    }
}

impl Merge for Totals {
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow> {
        let Totals {
            files,
            bytes_on_disk,
            bytes_read,
            records,
            blank_lines,
            converted,
            quarantined,
            joined,
        } = other;
        self.files.merge_from(files)?;
        self.bytes_on_disk.merge_from(bytes_on_disk)?;
        self.bytes_read.merge_from(bytes_read)?;
        self.records.merge_from(records)?;
        self.blank_lines.merge_from(blank_lines)?;
        self.converted.merge_from(converted)?;
        self.quarantined.merge_from(quarantined)?;
        self.joined.merge_from(joined)?;
        Ok(())
    }
}

impl Merge for Breakdown {
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow> {
        let Breakdown {
            quarantine_reasons,
            quarantine_rules,
            // In the walk's order: the caller puts the shards' back by their segments.
            damaged_files: _,
            items,
            events,
            phases,
            rules_fired,
            actions,
            violations,
        } = other;
        self.quarantine_reasons.merge_from(quarantine_reasons)?;
        self.quarantine_rules.merge_from(quarantine_rules)?;
        self.items.merge_from(items)?;
        self.events.merge_from(events)?;
        self.phases.merge_from(phases)?;
        self.rules_fired.merge_from(rules_fired)?;
        self.actions.merge_from(actions)?;
        self.violations.merge_from(violations)?;
        Ok(())
    }
}

impl Merge for TextCounts {
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow> {
        let TextCounts {
            text_bytes_in,
            text_bytes_out,
            text_bytes_dropped,
            text_bytes_added,
            ignored_fields,
        } = other;
        self.text_bytes_in.merge_from(text_bytes_in)?;
        self.text_bytes_out.merge_from(text_bytes_out)?;
        self.text_bytes_dropped.merge_from(text_bytes_dropped)?;
        self.text_bytes_added.merge_from(text_bytes_added)?;
        self.ignored_fields.merge_from(ignored_fields)?;
        Ok(())
    }
}

impl Merge for HomeChanges {
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow> {
        let HomeChanges {
            files_unchanged,
            files_done,
            rollouts_unchanged,
            rollouts_removed,
            // In the walk's order: the caller puts the shards' back by their segments.
            sessions_kept: _,
            sessions_replaced: _,
            sessions_new,
            sessions_updated,
            sessions_withheld,
            sessions_duplicate,
            sessions_left,
            sessions_left_rules,
            sessions_left_listed,
            sessions_pruned,
            sessions_not_pruned,
            prune,
            sessions_older,
            sessions_conflict,
            sessions_split,
            sessions_busy,
            copies_kept,
            prune_refused,
        } = other;
        self.files_unchanged.merge_from(files_unchanged)?;
        self.files_done.merge_from(files_done)?;
        self.rollouts_unchanged.merge_from(rollouts_unchanged)?;
        self.rollouts_removed.merge_from(rollouts_removed)?;
        self.sessions_new.merge_from(sessions_new)?;
        self.sessions_updated.merge_from(sessions_updated)?;
        self.sessions_withheld.merge_from(sessions_withheld)?;
        self.sessions_duplicate.merge_from(sessions_duplicate)?;
        self.sessions_left.merge_from(sessions_left)?;
        self.sessions_left_rules.merge_from(sessions_left_rules)?;
        // By path, the first listed, as one run lists them.
        self.sessions_left_listed.merge_from(sessions_left_listed)?;
        self.sessions_left_listed.sort();
        self.sessions_left_listed
            .truncate(crate::model::not_read::NotRead::LISTED);
        self.sessions_pruned.merge_from(sessions_pruned)?;
        self.sessions_not_pruned.merge_from(sessions_not_pruned)?;
        self.prune |= prune;
        self.sessions_older.merge_from(sessions_older)?;
        self.sessions_conflict.merge_from(sessions_conflict)?;
        self.sessions_split.merge_from(sessions_split)?;
        self.sessions_busy.merge_from(sessions_busy)?;
        self.copies_kept.merge_from(copies_kept)?;
        if self.prune_refused.is_none() {
            self.prune_refused.clone_from(prune_refused);
        }
        Ok(())
    }
}

impl Merge for CarriedFindings {
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow> {
        let CarriedFindings {
            carried_records,
            // Added up by `add`, with the files.
            carried_quarantined: _,
            carried_damaged: _,
            carried_files,
        } = other;
        self.carried_records.merge_from(carried_records)?;
        for file in carried_files {
            // `add` sums unchecked: a tampered shard's counts are checked first.
            let there = self.carried_files.iter().find(|f| f.file == file.file);
            let fits = |a: u64, b: u64| a.checked_add(b).is_some();
            let fit = fits(self.carried_quarantined, file.quarantined)
                && fits(self.carried_damaged, file.damaged)
                && there.is_none_or(|t| {
                    fits(t.quarantined, file.quarantined) && fits(t.damaged, file.damaged)
                });
            if !fit {
                return Err(Overflow);
            }
            self.add(file.clone());
        }
        Ok(())
    }
}

impl Merge for ReadAgain {
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow> {
        let ReadAgain {
            settings_changed,
            files_pending,
        } = other;
        self.settings_changed.merge_from(settings_changed)?;
        self.files_pending.merge_from(files_pending)?;
        Ok(())
    }
}

impl Merge for Reading {
    fn merge_from(&mut self, other: &Self) -> Result<(), Overflow> {
        let Reading {
            messages_by_shape,
            formats,
            records_merged,
            records_dropped,
        } = other;
        self.messages_by_shape.merge_from(messages_by_shape)?;
        self.formats.merge_from(formats)?;
        self.records_merged.merge_from(records_merged)?;
        self.records_dropped.merge_from(records_dropped)?;
        Ok(())
    }
}

/// `1 file`, `2 files` (digits grouped by the terminal's own formatter elsewhere).
pub(crate) fn files_phrase(n: u64) -> String {
    if n == 1 {
        "1 file".to_string()
    } else {
        format!("{n} files")
    }
}

/// Adds `by` to `key`'s count (`key`: any string-like id, e.g. a [`RuleRef`](crate::rules::RuleRef)).
pub(crate) fn bump<K: AsRef<str> + ?Sized>(map: &mut BTreeMap<String, u64>, key: &K, by: u64) {
    let key = key.as_ref();
    match map.get_mut(key) {
        Some(count) => *count += by,
        None => {
            map.insert(key.to_string(), by);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// A summary with every field set (optional ones present), as `summary.json` writes it:
    /// the parts flattened in one fixed order, so that its bytes do not move with the code's
    /// layout.
    const EVERY_FIELD: &str = r#"{
  "schema_version": 1,
  "rules": [
    "builtin"
  ],
  "rule_digests": [
    "ab"
  ],
  "codex_version": "0.1",
  "dry_run": false,
  "files": 3,
  "bytes_on_disk": 4,
  "bytes_read": 5,
  "records": 6,
  "blank_lines": 7,
  "converted": 8,
  "quarantined": 9,
  "joined": 10,
  "quarantine_reasons": {
    "invalid_json": 11
  },
  "quarantine_rules": {
    "first-leading-system": 11
  },
  "damaged_files": [
    {
      "file": "a.jsonl.zst",
      "line": 12,
      "byte_offset": 13,
      "compressed_offset": 14,
      "message": "cut short"
    }
  ],
  "items": {
    "message:user": 15
  },
  "events": {
    "user_message": 16
  },
  "phases": {
    "none": 17
  },
  "rules_fired": {
    "policy.x": 18
  },
  "actions": {
    "classified": 19
  },
  "violations": {
    "unpaired": 20
  },
  "text_bytes_in": 21,
  "text_bytes_out": 22,
  "text_bytes_dropped": 23,
  "text_bytes_added": 24,
  "ignored_fields": {
    "id": 25
  },
  "run": 26,
  "interrupted": "SIGINT",
  "files_unchanged": 27,
  "files_done": 28,
  "rollouts_unchanged": 29,
  "rollouts_removed": 30,
  "sessions_kept": [
    "kept.jsonl"
  ],
  "sessions_replaced": [
    "replaced.jsonl"
  ],
  "sessions_new": 31,
  "sessions_updated": 32,
  "sessions_withheld": [
    {
      "path": "withheld.jsonl",
      "reason": "archived"
    }
  ],
  "sessions_duplicate": 33,
  "sessions_left": 34,
  "sessions_left_rules": {
    "rules default (a1b2c3d4)": 34
  },
  "sessions_left_listed": [
    "left.jsonl (written by rules default (a1b2c3d4))"
  ],
  "sessions_pruned": [
    "pruned.jsonl"
  ],
  "sessions_not_pruned": [
    "not-pruned.jsonl"
  ],
  "prune": true,
  "sessions_older": [
    {
      "path": "older.jsonl",
      "source": "a.json:1",
      "other": "b.json:1"
    }
  ],
  "sessions_conflict": [
    {
      "path": "conflict.jsonl",
      "source": "c.json:1",
      "other": "d.json:1"
    }
  ],
  "sessions_split": [
    {
      "path": "split.jsonl",
      "source": "e.json:2",
      "other": "e.json:1"
    }
  ],
  "sessions_busy": [
    {
      "path": "busy.jsonl",
      "reason": "process 7 (codex) has it open"
    }
  ],
  "copies_kept": [
    {
      "path": "replaced.jsonl",
      "copy": "rollover/replaced/0026/replaced.jsonl"
    }
  ],
  "prune_refused": "--prune would remove 9 of the 10 sessions",
  "settings_changed": [
    {
      "what": "rules",
      "since_run": 35,
      "files": 36
    }
  ],
  "files_pending": 37,
  "carried_records": 54,
  "carried_quarantined": 52,
  "carried_damaged": 53,
  "carried_files": [
    {
      "file": "old.jsonl",
      "run": 25,
      "quarantined": 52,
      "damaged": 53,
      "listed": [
        {
          "line": 3,
          "byte_offset": 40,
          "class": "invalid_json",
          "reason": "invalid JSON"
        }
      ]
    }
  ],
  "verdict": "blocked",
  "fingerprint": {
    "rules": "r",
    "options": "o"
  },
  "temporary_files_removed": 38,
  "decisions": {
    "classified": {
      "policy.x": 39
    }
  },
  "sample_rate": 0.5,
  "records_not_sampled": 40,
  "output_bytes": 41,
  "skipped_other_extensions": {
    ".txt": 42
  },
  "skipped_hidden": 43,
  "skipped_symlinks": 44,
  "skipped_excluded": 45,
  "skipped_unmatched": 46,
  "skipped_codex_homes": [
    "home"
  ],
  "symlink_loops": [
    "loop"
  ],
  "unreadable": [
    {
      "path": "unreadable.jsonl",
      "message": "denied"
    }
  ],
  "not_read": {
    "unreadable": {
      "count": 1,
      "paths": [
        {
          "path": "unreadable.jsonl",
          "reason": "denied"
        }
      ]
    }
  },
  "messages_by_shape": {
    "/messages": 47
  },
  "formats": {
    "chat": 48
  },
  "records_merged": 49,
  "records_dropped": {
    "claude-code.progress": 50
  },
  "shard": {
    "index": 0,
    "count": 2,
    "index_from": "--shard",
    "count_from": "--shard",
    "split_bytes": 51,
    "rollover_version": "0.1.0",
    "format": "codex",
    "max_quarantine_rate": 0.0,
    "report_text": false,
    "walk_unreadable": 1,
    "inputs": "0123456789abcdef0123456789abcdef"
  },
  "merged_shards": 2
}"#;

    fn every_field() -> Summary {
        serde_json::from_str(EVERY_FIELD).expect("a summary")
    }

    #[test]
    fn summary_json_is_one_object_with_every_field_in_its_order() {
        let written = serde_json::to_string_pretty(&every_field()).expect("JSON");
        assert_eq!(written, EVERY_FIELD);
    }

    /// Counters read back from shards are added with checked arithmetic: a sum that would
    /// wrap (a tampered shard) is an error, not a small number.
    #[test]
    fn a_sum_that_would_wrap_is_refused() {
        let mut merged = Summary::default();
        merged.totals.records = u64::MAX;
        let mut shard = Summary::default();
        shard.totals.records = 1;
        assert_eq!(merged.merge_from(&shard), Err(Overflow));
        let mut counts = BTreeMap::from([("a".to_string(), u64::MAX - 1)]);
        let more = BTreeMap::from([("a".to_string(), 1u64)]);
        assert_eq!(counts.merge_from(&more), Ok(()));
        assert_eq!(counts.merge_from(&more), Err(Overflow));
    }

    /// What `report merge` does with each field of a shard's summary, checked from the JSON so
    /// that a new field is checked too: a number (in a map too) is added up, a list whose order
    /// is the shards' is joined; what is the same in every shard, in the walk's order, or the
    /// merged run's own is left to the caller, and listed here.
    #[test]
    fn merging_a_shard_twice_adds_every_counter_twice() {
        let shard = every_field();
        let mut merged = Summary::default();
        merged.merge_from(&shard).unwrap();
        merged.merge_from(&shard).unwrap();
        let left_to_the_caller = [
            "schema_version",
            "rules",
            "rule_digests",
            "codex_version",
            "dry_run",
            "damaged_files",
            "run",
            "interrupted",
            "sessions_kept",
            "sessions_replaced",
            "verdict",
            "fingerprint",
            "sample_rate",
            "skipped_other_extensions",
            "skipped_hidden",
            "skipped_symlinks",
            "skipped_excluded",
            "skipped_unmatched",
            "skipped_codex_homes",
            "symlink_loops",
            "unreadable",
            "not_read",
            "shard",
            "merged_shards",
            // Folded by file: a split file's ranges, carried by several shards, are one file
            // (`CarriedFindings::add`); its counts are added up.
            "carried_files",
        ];
        let twice = |value: &Value| -> Value {
            match value {
                Value::Number(n) => Value::from(n.as_u64().unwrap_or_default() * 2),
                Value::Array(list) => Value::Array(list.iter().chain(list).cloned().collect()),
                Value::Object(map) => map
                    .iter()
                    .map(|(k, v)| {
                        let n = v.as_u64().map(|n| Value::from(n * 2));
                        let by_rule = v.as_object().map(|inner| {
                            inner
                                .iter()
                                .map(|(k, v)| (k.clone(), Value::from(v.as_u64().unwrap_or(0) * 2)))
                                .collect()
                        });
                        (k.clone(), n.or(by_rule).unwrap_or(Value::Null))
                    })
                    .collect(),
                Value::Bool(b) => Value::Bool(*b),
                Value::Null | Value::String(_) => value.clone(),
            }
        };
        let shard = serde_json::to_value(&shard).expect("JSON");
        let merged = serde_json::to_value(&merged).expect("JSON");
        let (Value::Object(shard), Value::Object(merged)) = (shard, merged) else {
            panic!("a summary is a JSON object");
        };
        for (field, value) in &shard {
            if left_to_the_caller.contains(&field.as_str()) {
                continue;
            }
            assert_eq!(merged.get(field), Some(&twice(value)), "{field}");
        }
    }

    fn carried(file: &str, quarantined: u64) -> CarriedFindings {
        let mut findings = CarriedFindings::default();
        findings.add(CarriedFile {
            file: file.into(),
            run: 1,
            quarantined,
            damaged: 0,
            listed: Vec::new(),
        });
        findings
    }

    /// A shard's carried counts are summed like every other counter: a tampered one that
    /// would wrap is refused, one that fits is added to its file.
    #[test]
    fn carried_findings_merge_with_checked_sums() {
        let mut merged = carried("a.jsonl", 2);
        merged.merge_from(&carried("a.jsonl", 3)).unwrap();
        assert_eq!(merged.carried_quarantined, 5);
        assert_eq!(merged.carried_files[0].quarantined, 5);
        assert_eq!(
            merged.merge_from(&carried("a.jsonl", u64::MAX)),
            Err(Overflow)
        );
        assert_eq!(
            merged.merge_from(&carried("b.jsonl", u64::MAX)),
            Err(Overflow)
        );
        assert_eq!(merged.carried_quarantined, 5);
    }
}
