//! The ordered collector: takes each batch's outcomes in input order and turns them into the
//! run's counters and report lines (`quarantine.jsonl`, `conversations.jsonl`), so every
//! output is deterministic whatever the thread count. When an input file's last batch is in,
//! every rollout it produced is on disk: the collector records it in the manifest, with the
//! sessions whose records are gone from it kept as orphans (or removed, with `--prune`). In a
//! dry run it records nothing: what it counts is the plan of a run.
//!
//! A shard's run also writes `shard.json` ([`ShardIndex`]): its files with their place in the
//! walk and their counts, and the segments (file and byte range) its report lines came in, so
//! that `report merge` can put every shard's lines back in the order of an unsharded run.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};

use serde::Serialize;

use super::placement::count_placed;
use super::progress::HeldLines;
use super::reader::Work;
use super::record::{Converted, Outcome, Refusal};
use super::run_files::Marks;
pub(crate) use super::run_files::{Segment, ShardFile, ShardIndex, Timing, SHARD_INDEX};
use super::{FileCounts, Fingerprint, PlannedFile, Progress};
use crate::audit::report::{self, Excerpt, FileStats, ReportOptions};
use crate::audit::summary::{bump, DamageReport, VersionReport};
use crate::audit::tally::Tally;
use crate::audit::{Action, Summary};
use crate::input::batch::BatchIndex;
use crate::input::SourceFormat;
use crate::output::manifest::{
    FileEntry, Finding, Findings, PrunePlan, RolloutEntry, SessionRecord, Version, FINDINGS_LISTED,
};
use crate::output::sink::Written;
use crate::output::{
    Guard, Home, Manifest, Output, OutputError, OutputKind, Placed, QuarantineEntry, Sink,
    LINE_BUFFER,
};

pub(crate) struct Collector<'h> {
    home: &'h Home,
    pub summary: Summary,
    quarantine: BufWriter<File>,
    conversations: BufWriter<File>,
    /// The run's files: what part of each the run reads, and its content digest.
    files: &'h [PlannedFile],
    guard: &'h Guard,
    /// Files being read: records seen and rollouts placed so far.
    open: HashMap<usize, FileEntry>,
    /// Per-file counts for the report, in input order.
    stats: Vec<FileStats>,
    /// What the report needs beyond the summary.
    pub report: ReportOptions,
    /// Where the conversations go, in input order, and the format the manifest records.
    sink: Box<dyn Sink + 'h>,
    kind: OutputKind,
    /// Files being read: their records converted and quarantined so far (`--verbose`).
    counts: HashMap<usize, FileCounts>,
    /// The Batch API results files' lines, waiting for their results to be counted.
    pub held: HeldLines,
    /// Files read by a format other than chat, with it.
    formats: HashMap<usize, SourceFormat>,
    /// Where each segment started: (file's place in the walk, range, marks).
    segments: Vec<(usize, u64, Marks)>,
    /// Lines written so far to `conversations.jsonl` and `quarantine.jsonl`.
    lines: (u64, u64),
    /// What converts the files, recorded with each.
    pub fingerprint: Fingerprint,
    /// The origins of every file of the walk (every shard's): a session only a file gone from
    /// the walk still lists is one whose record is gone.
    pub walked: std::collections::HashSet<String>,
    /// An ignored field's name joined to its scope (`record.created`), to count it: one
    /// buffer for the run, so that counting copies two short strings and allocates nothing.
    field_key: String,
    /// The counts of every converted record's items, events and decisions, added into the
    /// summary at [`Collector::finish`].
    tally: Tally,
    /// Files being read: what their reading found (quarantines, damage), for their entries.
    findings: HashMap<usize, Findings>,
    /// Paths the walk skipped (unreadable, Codex homes): no file under them is gone.
    pub protected: Vec<String>,
    /// A dry run's sessions whose records are gone (a run would remember them as orphans):
    /// what `--prune` would remove with the rest.
    dry_orphans: Vec<super::prune::Left>,
}

/// Excerpts of quarantined records the report shows with `--report-text`.
pub(crate) const EXCERPTS: usize = 10;
const EXCERPT_CHARS: usize = 120;

impl<'h> Collector<'h> {
    pub(crate) fn new(
        home: &'h Home,
        summary: Summary,
        files: &'h [PlannedFile],
        guard: &'h Guard,
        output: &dyn Output,
        manifest: &Manifest,
    ) -> Result<Collector<'h>, OutputError> {
        let dry_run = summary.setup.dry_run;
        let inputs: Vec<(&str, &str)> = files
            .iter()
            .map(|f| (f.source.key.as_str(), f.source.origin.as_str()))
            .collect();
        let renamed = output.renamed(&inputs, manifest);
        Ok(Collector {
            home,
            summary,
            quarantine: BufWriter::with_capacity(
                LINE_BUFFER,
                home.create_run_file("quarantine.jsonl")?,
            ),
            conversations: BufWriter::with_capacity(
                LINE_BUFFER,
                home.create_run_file("conversations.jsonl")?,
            ),
            files,
            guard,
            open: HashMap::new(),
            stats: files
                .iter()
                .map(|f| FileStats {
                    file: f.source.display.to_string(),
                    ..FileStats::default()
                })
                .collect(),
            report: ReportOptions {
                body_files: output.kind() == OutputKind::Responses,
                ..ReportOptions::default()
            },
            sink: output.sink(home, guard, dry_run, renamed),
            kind: output.kind(),
            counts: HashMap::new(),
            held: HeldLines::default(),
            formats: HashMap::new(),
            segments: Vec::new(),
            lines: (0, 0),
            fingerprint: Fingerprint::default(),
            walked: std::collections::HashSet::new(),
            field_key: String::new(),
            tally: Tally::default(),
            findings: HashMap::new(),
            protected: Vec::new(),
            dry_orphans: Vec::new(),
        })
    }

    fn marks(&self) -> Marks {
        Marks {
            conversations: self.lines.0,
            quarantine: self.lines.1,
            damaged_files: self.summary.breakdown.damaged_files.len() as u64,
            sessions_kept: self.summary.home.sessions_kept.len() as u64,
            sessions_replaced: self.summary.home.sessions_replaced.len() as u64,
            excerpts: self.report.excerpts.len() as u64,
        }
    }

    /// The file's place in the walk.
    fn walk_index(&self, file: usize) -> usize {
        self.files.get(file).map_or(file, |f| f.portion.index)
    }

    /// Whether `file` counts in the file-level numbers.
    fn counted(&self, file: usize) -> bool {
        self.files.get(file).is_none_or(|f| f.portion.counted)
    }

    /// The segments as `shard.json` writes them.
    fn shard_index(&self) -> ShardIndex {
        let end = self.marks();
        let segments = self
            .segments
            .iter()
            .enumerate()
            .map(|(i, (file, range, start))| {
                let next = self.segments.get(i + 1).map_or(end, |s| s.2);
                Segment {
                    file: *file,
                    range: *range,
                    conversations: next.conversations - start.conversations,
                    quarantine: next.quarantine - start.quarantine,
                    damaged_files: next.damaged_files - start.damaged_files,
                    sessions_kept: next.sessions_kept - start.sessions_kept,
                    sessions_replaced: next.sessions_replaced - start.sessions_replaced,
                    excerpts: next.excerpts - start.excerpts,
                }
            })
            .collect();
        let files = self
            .files
            .iter()
            .enumerate()
            .map(|(i, file)| ShardFile {
                index: self.walk_index(i),
                key: file.source.key.clone(),
                counted: self.counted(i),
                stats: self.stats[i].clone(),
            })
            .collect();
        ShardIndex {
            files,
            segments,
            excerpts: self.report.excerpts.clone(),
        }
    }

    /// One batch, in order. `outcomes[i]` is the outcome of `batch[i]` when it is a record.
    pub(crate) fn batch(
        &mut self,
        batch: &[Work],
        outcomes: &mut [Vec<Outcome>],
        progress: &dyn Progress,
        disk_read: u64,
        manifest: &mut Manifest,
    ) -> Result<(), OutputError> {
        let mut bytes = 0u64;
        let mut records = 0u64;
        for (work, outcomes) in batch.iter().zip(outcomes) {
            match work {
                Work::Segment(file, range) => {
                    let marks = self.marks();
                    self.segments.push((self.walk_index(*file), *range, marks));
                }
                Work::Blank(n) => self.summary.totals.blank_lines += n,
                Work::Damage(damage) => {
                    progress.damage(damage);
                    let display = damage.location.path.to_string();
                    if let Some(file) = self
                        .files
                        .iter()
                        .position(|f| *f.source.display == *display)
                    {
                        self.found(
                            file,
                            Finding {
                                line: damage.location.line,
                                byte_offset: damage.location.byte_offset,
                                class: "damaged".to_string(),
                                reason: damage.message.clone(),
                            },
                        );
                    }
                    self.summary.breakdown.damaged_files.push(DamageReport {
                        file: damage.location.path.to_string(),
                        line: damage.location.line,
                        byte_offset: damage.location.byte_offset,
                        compressed_offset: damage.compressed_offset,
                        message: damage.message.clone(),
                    });
                }
                Work::Records(work) => {
                    self.formats.insert(work.file, work.format);
                    bytes += work.read_size();
                    let listed = self.lists_rollouts(work.file, manifest);
                    for (_, outcome) in work.records.iter().zip(outcomes.iter_mut()) {
                        records += 1;
                        self.file_entry(work.file).records += 1;
                        self.outcome(work.file, outcome, listed, manifest)?;
                    }
                }
                Work::FileEnd(file) => {
                    let format = self.formats.remove(file).unwrap_or(SourceFormat::CHAT);
                    if self.counted(*file) {
                        bump(&mut self.summary.reading.formats, format.name(), 1);
                    }
                    let mut counts = self.counts.remove(file).unwrap_or_default();
                    counts.file = self.files[*file].source.display.to_string();
                    self.held.file_done(*file, counts, progress);
                    self.file_done(*file, manifest)?
                }
            }
        }
        self.summary.totals.bytes_read += bytes;
        progress.advance(records, bytes, disk_read);
        Ok(())
    }

    /// What one record became: each record counted once, as the first of a conversation,
    /// part of one, quarantined, dropped by a rule or left out of the sample.
    /// The outcome is left in place, for the caller to free where it was made.
    fn outcome(
        &mut self,
        file: usize,
        outcome: &mut Outcome,
        listed: bool,
        manifest: &mut Manifest,
    ) -> Result<(), OutputError> {
        if let Outcome::NotSampled = outcome {
            self.summary.records_not_sampled += 1;
            return Ok(());
        }
        self.summary.totals.records += 1;
        self.stats[file].records += 1;
        let counts = self.counts.entry(file).or_default();
        counts.records += 1;
        match outcome {
            Outcome::Converted(done) => {
                counts.converted += 1;
                let stats = &mut self.stats[file];
                stats.converted += 1;
                stats.output_bytes += done.output_len;
                stats.repairs += done
                    .decisions
                    .iter()
                    .filter(|d| crate::audit::decision::is_repair(d.action.name()))
                    .count() as u64;
                self.converted(file, done, listed, manifest)
            }
            Outcome::Merged => {
                counts.merged += 1;
                self.stats[file].converted += 1;
                self.summary.reading.records_merged += 1;
                Ok(())
            }
            Outcome::Quarantined { entry, why } => {
                counts.quarantined += 1;
                if let Some(rule) = why.rule() {
                    bump(
                        &mut self.summary.breakdown.quarantine_rules,
                        rule.as_str(),
                        1,
                    );
                }
                self.stats[file].quarantined += 1;
                self.found(
                    file,
                    Finding {
                        line: entry.line,
                        byte_offset: entry.byte_offset,
                        class: entry.class.name().to_string(),
                        reason: entry.reason.clone(),
                    },
                );
                self.quarantined(entry)
            }
            Outcome::Dropped { rule, .. } => {
                counts.dropped += 1;
                bump(&mut self.summary.reading.records_dropped, &rule, 1);
                Ok(())
            }
            Outcome::NotSampled => Ok(()),
        }
    }

    /// Whether the entry of `file` lists its rollouts as they are placed: always when the run
    /// records them in the manifest; in a dry run, only to count the sessions of a file the
    /// manifest lists whose records are gone ([`Collector::file_done`]). A dry run of a file
    /// new to the home lists none: a file of 64,000 records held ~10 MB of paths and digests
    /// nobody read, a sixth of the run's page faults.
    fn lists_rollouts(&self, file: usize, manifest: &Manifest) -> bool {
        if !self.summary.setup.dry_run {
            return true;
        }
        self.files
            .get(file)
            .is_some_and(|f| !f.portion.ranges && manifest.files.contains_key(&f.source.origin))
    }

    /// The entry of `file` being filled while its records come.
    fn file_entry(&mut self, file: usize) -> &mut FileEntry {
        let (files, fingerprint, kind) = (&self.files, &self.fingerprint, self.kind);
        self.open
            .entry(file)
            .or_insert_with(|| files[file].fresh_entry(fingerprint, kind))
    }

    /// Counts what placing a session at `path` did (or, in a dry run, would do); a session
    /// kept pending (changed in Codex, in conflict, busy) is recorded with its file. `source`
    /// is the record it was read from.
    fn count_placed(&mut self, file: usize, path: &str, placed: &Placed, source: &str) {
        if count_placed(&mut self.summary.home, path, placed, source) {
            self.file_entry(file).pending.push(path.to_string());
        }
    }

    /// A quarantined record or a damaged place of `file`, for its manifest entry.
    fn found(&mut self, file: usize, finding: Finding) {
        let findings = self.findings.entry(file).or_default();
        if finding.class == "damaged" {
            findings.damaged += 1;
        } else {
            findings.quarantined += 1;
        }
        if findings.listed.len() < FINDINGS_LISTED {
            findings.listed.push(finding);
        }
    }

    fn quarantined(&mut self, entry: &QuarantineEntry) -> Result<(), OutputError> {
        let summary = &mut self.summary;
        summary.totals.quarantined += 1;
        bump(
            &mut summary.breakdown.quarantine_reasons,
            entry.class.name(),
            1,
        );
        if let Some(invariant) = entry.class.invariant() {
            bump(&mut summary.breakdown.violations, &invariant.to_string(), 1);
        }
        if self.report.report_text && self.report.excerpts.len() < EXCERPTS {
            let raw = entry.raw();
            let text: String = String::from_utf8_lossy(&raw)
                .chars()
                .take(EXCERPT_CHARS)
                .collect();
            self.report.excerpts.push(Excerpt {
                source: entry.source.clone(),
                line: entry.line,
                class: entry.class.name().to_string(),
                text,
            });
        }
        self.lines.1 += 1;
        write_line(self.home, &mut self.quarantine, "quarantine.jsonl", entry)
    }

    /// A converted record: counted and reported; a Codex rollout was placed by its worker, a
    /// Responses body is appended here, in record order, to its input file's output file.
    fn converted(
        &mut self,
        file: usize,
        done: &mut Converted,
        listed: bool,
        manifest: &mut Manifest,
    ) -> Result<(), OutputError> {
        if let Some(path) = self.sink.renamed(file) {
            done.reword(Some(path), None);
            done.relative = std::path::PathBuf::from(path);
        }
        self.sink.conversation(
            file,
            Written {
                relative: &done.relative,
                bytes: &done.bytes,
                id: &done.id,
                placed: done.placed.is_some(),
                title: done.links.title.as_deref(),
                started_at: done.started_at.as_deref(),
            },
        )?;
        if let Some(placed) = &done.placed {
            let source = format!("{}:{}", done.source, done.line);
            let written = matches!(
                placed,
                Placed::Written | Placed::Updated | Placed::Unchanged | Placed::Replaced { .. }
            );
            match (&done.supersedes, written) {
                // A newer version over this run's own: the earlier is an older snapshot.
                (Some(earlier), true) => self.summary.home.sessions_older.push(VersionReport {
                    path: done.path.clone(),
                    source: earlier.clone(),
                    other: source.clone(),
                }),
                (Some(_) | None, _) => self.count_placed(file, &done.path, placed, &source),
            }
            if let Some(first) = &done.split_from {
                self.summary.home.sessions_split.push(VersionReport {
                    path: done.path.clone(),
                    source,
                    other: first.clone(),
                });
            }
            if written && !self.summary.setup.dry_run {
                self.record_session(file, done, manifest)?;
            }
        }
        if let (Some(placed), true) = (&done.placed, listed) {
            // What the manifest holds for the session is what is on disk: a kept (pending),
            // withheld or busy session keeps the digest written before.
            let guard = self.guard;
            let digest = match placed {
                Placed::Kept | Placed::Withheld(_) | Placed::Busy { .. } => {
                    guard.recorded(&done.path).unwrap_or(&done.digest)
                }
                Placed::Written
                | Placed::Updated
                | Placed::Unchanged
                | Placed::Replaced { .. }
                | Placed::Duplicate
                | Placed::Older { .. }
                | Placed::Conflict { .. } => &done.digest,
            };
            self.file_entry(file).rollouts.push(&done.path, digest);
        }
        self.tally.count(&done.items, done.events, &done.decisions);
        let summary = &mut self.summary;
        summary.totals.converted += 1;
        for decision in &done.decisions {
            if let Action::MessagesFoundByShape { path } = &decision.action {
                bump(&mut summary.reading.messages_by_shape, path, 1);
            }
        }
        summary.output_bytes += done.output_len;
        for field in &done.ignored {
            self.field_key.clear();
            self.field_key.push_str(field.scope);
            self.field_key.push_str(&field.name);
            bump(&mut summary.text.ignored_fields, &self.field_key, 1);
        }
        summary.text.text_bytes_in += done.account.bytes_in as u64;
        summary.text.text_bytes_out += done.account.bytes_out as u64;
        summary.text.text_bytes_dropped += done.account.bytes_dropped as u64;
        summary.text.text_bytes_added += done.account.bytes_added as u64;
        self.lines.0 += 1;
        // A title is transcript text: the audit line says its length unless --report-text
        // (the title itself is the Codex thread name, in session_index.jsonl).
        if let (Some(title), false) = (&done.links.title, self.report.report_text) {
            let mut line = serde_json::to_value(done.audit_fields())
                .map_err(|e| write_error(self.home, "conversations.jsonl", e.into()))?;
            if let Some(object) = line.as_object_mut() {
                object.remove("title");
                object.insert("title_chars".into(), title.chars().count().into());
            }
            return write_line(
                self.home,
                &mut self.conversations,
                "conversations.jsonl",
                &line,
            );
        }
        if let Some(line) = done.audit_line.take().or_else(|| done.audit_bytes()) {
            return self
                .conversations
                .write_all(&line)
                .and_then(|()| self.conversations.write_all(b"\n"))
                .map_err(|e| write_error(self.home, "conversations.jsonl", e));
        }
        write_line(
            self.home,
            &mut self.conversations,
            "conversations.jsonl",
            &done.audit_fields(),
        )
    }

    /// What the manifest keeps of a session placed beyond its file's list: its version and the
    /// file it came from; the alias of an id kept from scheme 2.
    fn record_session(
        &mut self,
        file: usize,
        done: &Converted,
        manifest: &mut Manifest,
    ) -> Result<(), OutputError> {
        if done.version.is_none() && done.alias.is_none() {
            return Ok(());
        }
        let from = self.files[file].source.origin.clone();
        let alias = done.alias.map(crate::model::identity::hex128).or_else(|| {
            manifest
                .sessions
                .get(&done.path)
                .and_then(|r| r.alias.clone())
        });
        let record = SessionRecord {
            session: done.path.clone(),
            from,
            version: done.version.as_ref().map(|v| Version::of(&v.version)),
            alias,
        };
        manifest.record_session(self.home, record)
    }

    /// Every rollout of `file` is on disk: record it, with the sessions of records that are gone
    /// since the manifest last recorded it kept as orphans (removed with `--prune`). A dry run
    /// records nothing and counts what a run would do.
    fn file_done(&mut self, file: usize, manifest: &mut Manifest) -> Result<(), OutputError> {
        if let Some((path, placed, digest)) = self.sink.file_done(file)? {
            self.count_placed(file, &path, &placed, "");
            self.file_entry(file).rollouts.push(&path, &digest);
        }
        // Taken, not cloned: a file of 64,000 sessions has 64,000 rollouts in its entry.
        let mut entry = match self.open.remove(&file) {
            Some(entry) => entry,
            None => self.files[file].fresh_entry(&self.fingerprint, self.kind),
        };
        if let Some(slot) = self.files.get(file).and_then(|f| f.read_digest.as_ref()) {
            entry.digest = read_digest(slot, &self.files[file].source.path);
        }
        entry.findings = self.findings.remove(&file).map(|findings| Findings {
            run: self.summary.run,
            ..findings
        });
        // The file's quarantined records are on disk before the file is recorded done: a
        // kill after this keeps them (the next run carries them over).
        if entry.findings.as_ref().is_some_and(|f| f.quarantined > 0) {
            self.quarantine
                .flush()
                .map_err(|e| write_error(self.home, "quarantine.jsonl", e))?;
        }
        if self.counted(file) {
            self.summary.home.files_done += 1;
        }
        // A record of a split file that left this shard's ranges (a file edited before it,
        // not appended to) may be in another shard's now, under the same path: only the
        // sessions of whole files become orphans here.
        let split = self.files.get(file).is_some_and(|f| f.portion.ranges);
        let previous = manifest.files.get(&entry.key).filter(|_| !split);
        let mut gone: Vec<RolloutEntry> = Vec::new();
        if let Some(previous) = previous {
            let now = entry.rollouts.paths();
            previous.rollouts.each(|path, digest| {
                if !now.contains(path) && !manifest.listed_elsewhere(path, &entry.key, &self.walked)
                {
                    gone.push(RolloutEntry {
                        path: path.to_string(),
                        digest: digest.to_string(),
                    });
                }
            });
        }
        // Remembered as orphans: counted as left, or removed by `--prune`, with the rest at the
        // run's end ([`Self::settle_gone`]), when it knows how many there are.
        // Written by the rules that converted the file before this run.
        let rules = previous.map(|p| p.rules.clone()).unwrap_or_default();
        for rollout in gone {
            if !self.summary.setup.dry_run {
                manifest.orphan(self.home, rollout, &entry.key, &rules)?;
            } else {
                self.dry_orphans.push(super::prune::Left {
                    rollout,
                    rules: rules.clone(),
                });
            }
        }
        if self.summary.setup.dry_run {
            return Ok(());
        }
        manifest.record(self.home, entry)
    }

    /// Once every file is done, the sessions whose records no input gives any more (the
    /// orphans, and the sessions of files gone from the walk): without `--prune` (`prune`
    /// `None`) counted as left, each run, so a reviewer sees what a prune would remove; with it
    /// moved out (unless Codex changed them, or a process holds them) and those files forgotten
    /// ([`super::prune`]); refused, nothing removed, when more would go than its limit.
    pub(crate) fn settle_gone(
        &mut self,
        manifest: &mut Manifest,
        prune: Option<super::prune::MaxPrune>,
    ) -> Result<(), OutputError> {
        let (mut sessions, files) =
            super::prune::candidates(manifest, &self.walked, &self.protected);
        sessions.append(&mut self.dry_orphans);
        sessions.sort_by(|a, b| a.rollout.path.cmp(&b.rollout.path));
        sessions.dedup_by(|a, b| a.rollout.path == b.rollout.path);
        let count = sessions.len() as u64;
        let total = manifest.session_count() as u64;
        let refused = prune.filter(|limit| !limit.allows(count, total));
        if prune.is_some() && refused.is_none() {
            let pruner = super::prune::Pruner {
                home: self.home,
                guard: self.guard,
                dry_run: self.summary.setup.dry_run,
            };
            let plan = PrunePlan {
                run: self.summary.run,
                sessions: sessions.into_iter().map(|s| s.rollout).collect(),
                files,
            };
            return pruner.execute(plan, manifest, &mut self.summary.home);
        }
        // Without --prune, or with one its limit refuses, every session stays: left.
        self.summary.home.sessions_left = count;
        super::prune::left_by_rules(
            self.home,
            &self.fingerprint.rules,
            &sessions,
            &mut self.summary.home,
        );
        if let Some(limit) = refused {
            self.summary.home.prune_refused = Some(format!(
                "--prune would remove {count} of the {total} sessions the home holds, more than --max-prune {limit} allows; nothing was removed. Check that every input is there (a disk not mounted?), then pass --max-prune {count} (or a share) to allow it"
            ));
        }
        Ok(())
    }

    /// Batch results: joined to a request, or quarantined (no request claimed them). Results
    /// of files left out (unchanged) are not counted again.
    pub(crate) fn batch_results(&mut self, index: &BatchIndex) -> Result<(), OutputError> {
        for result in index.results() {
            if self.files.get(result.file).is_some_and(|f| f.skip) {
                continue;
            }
            if result.used() {
                self.summary.totals.records += 1;
                self.summary.totals.joined += 1;
                self.held.result(result.file, true);
                continue;
            }
            let location = &result.record.location;
            // A sampled run: a result no request took may be one whose request the sample
            // left out, so it cannot be called orphaned; only a failed result is a finding of
            // its own, kept in the sample by its own place, as any record is.
            let rate = self.summary.sample_rate;
            if rate < 1.0 {
                let key = location.path.to_string();
                if result.failure().is_none() || !super::record::sampled(&key, location.line, rate)
                {
                    self.summary.records_not_sampled += 1;
                    continue;
                }
            }
            self.summary.totals.records += 1;
            self.held.result(result.file, false);
            // An Anthropic result with no message: its own reason says more.
            let why = Refusal::UnclaimedResult(result.failure());
            let entry = QuarantineEntry::new(&location.at(why), &result.record.bytes);
            self.quarantined(&entry)?;
        }
        Ok(())
    }

    /// Flushes the report lines, writes `timing.json`, then `summary.json` (last, atomically:
    /// its presence marks the run folder as finished); returns the summary.
    pub(crate) fn finish(mut self, seconds: f64) -> Result<Summary, OutputError> {
        let home = self.home;
        self.tally.add_to(&mut self.summary);
        self.quarantine
            .flush()
            .map_err(|e| write_error(home, "quarantine.jsonl", e))?;
        self.conversations
            .flush()
            .map_err(|e| write_error(home, "conversations.jsonl", e))?;
        self.sink.finish()?;
        // Timing varies run to run: it has its own file, so summary.json stays byte-identical
        // for the same input.
        self.summary.seconds = seconds;
        self.summary.verdict = report::verdict(&self.summary, &self.report).to_string();
        let mut timing = serde_json::to_vec_pretty(&Timing::of(&self.summary, seconds))
            .map_err(|e| write_error(home, "timing.json", e.into()))?;
        timing.push(b'\n');
        home.write_run_file_atomic("timing.json", &timing)?;
        let mut bytes = serde_json::to_vec_pretty(&self.summary)
            .map_err(|e| write_error(home, "summary.json", e.into()))?;
        bytes.push(b'\n');
        self.report.seconds = seconds;
        let reports = report::render(&self.summary, &self.stats, &self.report)
            .map_err(|e| write_error(home, "report.md", std::io::Error::other(e)))?;
        home.write_run_file_atomic("report.md", reports.markdown.as_bytes())?;
        home.write_run_file_atomic(report::FILES_CSV, reports.files_csv.as_bytes())?;
        home.write_run_file_atomic("report.html", reports.html.as_bytes())?;
        if self.summary.shard.is_some() {
            let mut index = serde_json::to_vec(&self.shard_index())
                .map_err(|e| write_error(home, SHARD_INDEX, e.into()))?;
            index.push(b'\n');
            home.write_run_file_atomic(SHARD_INDEX, &index)?;
        }
        // Last: its presence marks the run folder as finished.
        home.write_run_file_atomic("summary.json", &bytes)?;
        Ok(self.summary)
    }
}

/// The digest of a file the reader hashed as it read it ([`PlannedFile::read_digest`]); read
/// again only when its reader did not reach its end (a zip export, read by its directory; a
/// damaged stream its decoder gave up on), so that every file has one; empty when the file
/// is gone by then.
fn read_digest(slot: &crate::source::DigestSlot, path: &std::path::Path) -> String {
    match slot.get() {
        Some(digest) => digest.clone(),
        None => crate::output::manifest::file_digest(path).unwrap_or_default(),
    }
}

fn write_line<T: Serialize>(
    home: &Home,
    out: &mut BufWriter<File>,
    name: &str,
    value: &T,
) -> Result<(), OutputError> {
    serde_json::to_writer(&mut *out, value).map_err(|e| write_error(home, name, e.into()))?;
    out.write_all(b"\n").map_err(|e| write_error(home, name, e))
}

fn write_error(home: &Home, name: &str, source: std::io::Error) -> OutputError {
    OutputError::Write {
        path: home.run_file(name).display().to_string(),
        source,
    }
}
