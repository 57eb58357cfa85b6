//! `rollover report merge OUT`: join the reports of a sharded run's shards into one run
//! report, as an unsharded run over the same inputs would have written it.
//!
//! In: each shard's last run, `OUT/rollover/shards/KKKK-of-NNNN/runs/NNNN/` (summary.json,
//! shard.json, conversations.jsonl, quarantine.jsonl, timing.json). Out: one run folder,
//! `OUT/rollover/runs/NNNN/` (`latest` points at it): the counters added up, the report lines
//! put back in the walk's order by the shards' segments (file, then byte range; streamed, one
//! open file per shard, since each shard's lines are already in that order), report.md
//! and report.html rendered from the merged numbers. Fails (exit 2), naming each shard and the
//! command to run, when a shard is missing or did not finish, or when the shards disagree on
//! the rules, the options that change the output, rollover's version, or the inputs they walked.
//!
//! A shard's files are read as what they claim to be, never more: no file or folder is
//! followed through a symlink, each JSON file is read up to a size cap, report lines are
//! copied without being held whole, and counters are added with checked arithmetic.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::audit::report::{self, Excerpt, FileStats, ReportOptions};
use crate::audit::summary::{HomeChanges, Merge, ShardReport, WalkFindings};
use crate::audit::Summary;
use crate::cli::ReportMergeArgs;
use crate::commands::ui::{group, Ui};
use crate::commands::{json_with_exit, outln, Exit, RunError};
use crate::model::hash::xxh3_128;
use crate::output::home::{RUNS_DIR, SHARDS_DIR, STATE_DIR};
use crate::output::{Home, OutputKind, RunLock};
use crate::pipeline::collect::{ShardIndex, Timing, EXCERPTS, SHARD_INDEX};
use crate::pipeline::Signal;
use crate::source::Shard;

/// One shard's last run, as read back.
struct ShardRun {
    shard: Shard,
    folder: PathBuf,
    summary: Summary,
    report: ShardReport,
    index: ShardIndex,
    seconds: f64,
}

/// The merged report lines' files, and which lines come from which shard.
const LINE_FILES: [&str; 2] = ["conversations.jsonl", "quarantine.jsonl"];

pub fn run(args: &ReportMergeArgs, ui: &Ui) -> Result<Exit, RunError> {
    let shards_dir = args.out.join(STATE_DIR).join(SHARDS_DIR);
    let count = shard_count(&shards_dir, args.shards)?;
    let mut runs = Vec::new();
    let mut problems = Vec::new();
    for index in 0..count {
        let shard = Shard { index, count };
        match load(&shards_dir, shard) {
            Ok(run) => runs.push(run),
            Err(problem) => problems.push(problem),
        }
    }
    if !problems.is_empty() {
        return Err(anyhow::anyhow!(
            "cannot merge {count} shards of {}:\n  {}\nrun each of them again with the same inputs and options (`rollover convert INPUT... --out {} --shard K/{count}`, or the same array task), then merge",
            args.out.display(),
            problems.join("\n  "),
            args.out.display()
        ).into());
    }
    check_same(&runs)?;
    let merged = merge(&runs)?;
    let home = Home::new(&args.out);
    let wait = args.wait.unwrap_or_default();
    let stop = std::sync::atomic::AtomicUsize::new(0);
    let lock = RunLock::acquire_within(&home, wait, &stop, |pid| {
        if !ui.quiet {
            eprintln!("rollover: {}", RunLock::waiting_note(&home, pid, wait));
        }
    })?;
    let summary = write(home, merged, &runs)?;
    drop(lock);
    let max_rate = runs[0].report.max_quarantine_rate;
    let stopped_by = summary.interrupted.as_deref().and_then(Signal::named);
    let exit = Exit::for_run(&summary, stopped_by, Some(max_rate));
    if args.json {
        let out = json_with_exit(&summary, exit).context("writing the JSON summary")?;
        outln!("{out}")?;
    } else if !ui.quiet {
        let folder = args
            .out
            .join(STATE_DIR)
            .join(RUNS_DIR)
            .join(format!("{:04}", summary.run));
        outln!("rollover report merge: {count} shards")?;
        outln!(
            "  records      {} = converted {} + merged {} + quarantined {} + joined {} + dropped by rule {}",
            group(summary.totals.records),
            group(summary.totals.converted),
            group(summary.reading.records_merged),
            group(summary.totals.quarantined),
            group(summary.totals.joined),
            group(summary.reading.records_dropped.values().sum())
        )?;
        outln!("  files        {}", group(summary.totals.files))?;
        outln!("  summary      {}", folder.join("summary.json").display())?;
        outln!("  report       {}", folder.join("report.html").display())?;
    }
    Ok(exit)
}

/// The shard count to merge: `--shards`, or the only count found.
fn shard_count(shards_dir: &Path, asked: Option<u32>) -> Result<u32> {
    let entries = std::fs::read_dir(shards_dir).with_context(|| {
        format!(
            "reading {}: no shard has run into this output (run `rollover convert ... --shard K/N` first)",
            shards_dir.display()
        )
    })?;
    let mut counts = BTreeSet::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", shards_dir.display()))?;
        if let Some(shard) = entry
            .file_name()
            .to_str()
            .and_then(Shard::parse_folder_name)
        {
            counts.insert(shard.count);
        }
    }
    match (asked, counts.len()) {
        (Some(count), _) => Ok(count),
        (None, 1) => Ok(counts.into_iter().next().unwrap_or(1)),
        (None, 0) => bail!(
            "{} holds no shard folder (KKKK-of-NNNN): run `rollover convert ... --shard K/N` first",
            shards_dir.display()
        ),
        (None, _) => {
            let list: Vec<String> = counts.iter().map(u32::to_string).collect();
            bail!(
                "{} holds shards of runs with {} shards: pass --shards N to say which to merge",
                shards_dir.display(),
                list.join(" and ")
            )
        }
    }
}

/// The last run of `shard`, or what is wrong with it.
fn load(shards_dir: &Path, shard: Shard) -> Result<ShardRun, String> {
    let state = shards_dir.join(shard.folder_name());
    let runs = state.join(RUNS_DIR);
    let numbers: Option<Vec<u32>> = std::fs::read_dir(&runs).ok().map(|entries| {
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect()
    });
    let Some(last) = numbers.and_then(|n| n.into_iter().max()) else {
        return Err(format!(
            "shard {shard} is missing: {} holds no run",
            state.display()
        ));
    };
    let folder = runs.join(format!("{last:04}"));
    for dir in [&state, &runs, &folder] {
        if let Err(e) = real_folder(dir) {
            return Err(format!("shard {shard}: {} {e}", dir.display()));
        }
    }
    let read = |name: &str, cap: u64| -> Result<String, String> {
        read_capped(&folder.join(name), cap).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "shard {shard} did not finish: its last run, {}, has no readable {name} ({e}; killed, or still running?)",
                    folder.display()
                )
            } else {
                format!("shard {shard}: {}: {e}", folder.join(name).display())
            }
        })
    };
    let summary: Summary = serde_json::from_str(&read("summary.json", JSON_CAP)?).map_err(|e| {
        format!(
            "shard {shard}: {} is not a summary this rollover reads ({e})",
            folder.join("summary.json").display()
        )
    })?;
    if let Some(signal) = &summary.interrupted {
        return Err(format!(
            "shard {shard} did not finish: its last run, {}, was stopped by {signal}",
            folder.display()
        ));
    }
    let report = match &summary.shard {
        Some(report) if report.index == shard.index && report.count == shard.count => {
            report.clone()
        }
        Some(report) => {
            return Err(format!(
                "shard {shard}: {} says it is shard {}/{}",
                folder.display(),
                report.index,
                report.count
            ))
        }
        None => {
            return Err(format!(
                "shard {shard}: {} is not a shard's run",
                folder.display()
            ))
        }
    };
    let index: ShardIndex = serde_json::from_str(&read(SHARD_INDEX, JSON_CAP)?)
        .map_err(|e| format!("shard {shard}: {SHARD_INDEX} does not parse ({e})"))?;
    for name in LINE_FILES {
        if let Err(e) = open_regular(&folder.join(name)) {
            return Err(format!(
                "shard {shard} did not finish: its last run, {}, has no {name} ({e})",
                folder.display()
            ));
        }
    }
    // The time is optional (a shard without it adds none); a timing.json that is not a
    // plain file of a few numbers is not.
    let timing = match read_capped(&folder.join("timing.json"), TIMING_CAP) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(format!(
                "shard {shard}: {}: {e}",
                folder.join("timing.json").display()
            ))
        }
    };
    let seconds = timing
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|t| t["seconds"].as_f64())
        .unwrap_or(0.0);
    Ok(ShardRun {
        shard,
        folder,
        summary,
        report,
        index,
        seconds,
    })
}

/// Every shard ran with the same rules, options and rollover as the first, and as this one.
fn check_same(runs: &[ShardRun]) -> Result<()> {
    let Some(first) = runs.first() else {
        bail!("no shard to merge");
    };
    let ours = env!("CARGO_PKG_VERSION");
    for run in runs {
        let (a, b) = (&first.summary, &run.summary);
        let (ra, rb) = (&first.report, &run.report);
        let differences = [
            (
                "rules",
                a.setup.rule_digests != b.setup.rule_digests || a.setup.rules != b.setup.rules,
            ),
            (
                "Codex version",
                a.setup.codex_version != b.setup.codex_version,
            ),
            (
                "output options (--cwd, --wire, --messages-at, ...)",
                a.fingerprint.options != b.fingerprint.options,
            ),
            (
                "rollover version",
                ra.rollover_version != rb.rollover_version,
            ),
            ("inputs (files, sizes or times)", ra.inputs != rb.inputs),
            ("--split-bytes", ra.split_bytes != rb.split_bytes),
            ("--format", ra.format != rb.format),
            ("--dry-run", a.setup.dry_run != b.setup.dry_run),
            ("--sample", a.sample_rate != b.sample_rate),
            (
                "--max-quarantine-rate",
                ra.max_quarantine_rate != rb.max_quarantine_rate,
            ),
            ("--report-text", ra.report_text != rb.report_text),
        ];
        if let Some((what, _)) = differences.iter().find(|(_, differs)| *differs) {
            bail!(
                "shard {} ({}) ran with other {what} than shard {} ({}): run every shard with the same rollover, rules and options, then merge",
                run.shard,
                run.folder.display(),
                first.shard,
                first.folder.display()
            );
        }
        if rb.rollover_version != ours {
            bail!(
                "shard {} ({}) was converted by rollover {}, this is rollover {ours}: merge with the rollover that converted",
                run.shard,
                run.folder.display(),
                rb.rollover_version
            );
        }
    }
    Ok(())
}

/// The merged run: summary (without its run number yet), where its report lines come from,
/// per-file counts.
struct Merged {
    summary: Summary,
    /// In order: (shard, conversation lines, quarantine lines) to copy.
    lines: Vec<(usize, [u64; 2])>,
    files: Vec<FileStats>,
    options: ReportOptions,
    seconds: f64,
}

fn merge(runs: &[ShardRun]) -> Result<Merged> {
    let first = &runs[0];
    // The setup is the same in every shard (checked), and so are the walk's findings (each
    // walks every input): shard 0's, with only the unreadable files the walk found.
    let walk_unreadable = first
        .report
        .walk_unreadable
        .min(first.summary.walk.unreadable.len());
    let mut summary = Summary {
        setup: first.summary.setup.clone(),
        fingerprint: first.summary.fingerprint.clone(),
        sample_rate: first.summary.sample_rate,
        walk: WalkFindings {
            unreadable: first.summary.walk.unreadable[..walk_unreadable].to_vec(),
            ..first.summary.walk.clone()
        },
        merged_shards: Some(runs.len() as u32),
        ..Summary::default()
    };
    for run in runs {
        summary
            .merge_from(&run.summary)
            .with_context(|| format!("merging shard {} ({})", run.shard, run.folder.display()))?;
        // The files of its own that a shard could not read.
        let own = run
            .report
            .walk_unreadable
            .min(run.summary.walk.unreadable.len());
        summary
            .walk
            .unreadable
            .extend_from_slice(&run.summary.walk.unreadable[own..]);
    }
    summary.walk = std::mem::take(&mut summary.walk).with_unreadable_listed();
    // Every file's place in the walk, and its counts added over the shards that read it.
    let mut files: BTreeMap<usize, FileStats> = BTreeMap::new();
    let mut places: BTreeMap<&str, usize> = BTreeMap::new();
    for run in runs {
        for file in &run.index.files {
            places.insert(&file.key, file.index);
            let total = files.entry(file.index).or_insert_with(|| FileStats {
                file: file.stats.file.clone(),
                ..FileStats::default()
            });
            let sums = [
                (&mut total.records, file.stats.records),
                (&mut total.converted, file.stats.converted),
                (&mut total.quarantined, file.stats.quarantined),
                (&mut total.repairs, file.stats.repairs),
                (&mut total.output_bytes, file.stats.output_bytes),
            ];
            for (sum, more) in sums {
                sum.merge_from(&more)
                    .with_context(|| format!("shard {}: the counts of {}", run.shard, file.key))?;
            }
        }
    }

    // Each shard's segments, with where their entries start in its lists; then all of them
    // in the walk's order (a file, or a range of a split file, is one shard's).
    let mut segments = Vec::new();
    for (n, run) in runs.iter().enumerate() {
        let mut at = [0u64; 6];
        for segment in &run.index.segments {
            let counts = [
                segment.conversations,
                segment.quarantine,
                segment.damaged_files,
                segment.sessions_kept,
                segment.sessions_replaced,
                segment.excerpts,
            ];
            segments.push(((segment.file, segment.range, n), at, counts));
            for (position, count) in at.iter_mut().zip(counts) {
                position.merge_from(&count).with_context(|| {
                    format!("shard {}: the segments of {SHARD_INDEX}", run.shard)
                })?;
            }
        }
    }
    segments.sort_by_key(|(order, _, _)| *order);
    let mut lines = Vec::new();
    let mut excerpts: Vec<Excerpt> = Vec::new();
    for ((_, _, n), at, counts) in &segments {
        let run = &runs[*n];
        // Out of range (a count no list holds) is an empty slice: `get` below.
        let slice = |list: usize| {
            let start = usize::try_from(at[list]).unwrap_or(usize::MAX);
            let count = usize::try_from(counts[list]).unwrap_or(usize::MAX);
            start..start.saturating_add(count)
        };
        lines.push((*n, [counts[0], counts[1]]));
        let s = &run.summary;
        summary.breakdown.damaged_files.extend(
            s.breakdown
                .damaged_files
                .get(slice(2))
                .unwrap_or_default()
                .iter()
                .cloned(),
        );
        summary.home.sessions_kept.extend(
            s.home
                .sessions_kept
                .get(slice(3))
                .unwrap_or_default()
                .iter()
                .cloned(),
        );
        summary.home.sessions_replaced.extend(
            s.home
                .sessions_replaced
                .get(slice(4))
                .unwrap_or_default()
                .iter()
                .cloned(),
        );
        excerpts.extend(
            run.index
                .excerpts
                .get(slice(5))
                .unwrap_or_default()
                .iter()
                .cloned(),
        );
    }
    // A shard's excerpts are its first ones, so the first of all are among them.
    excerpts.truncate(EXCERPTS);
    let seconds = runs.iter().map(|r| r.seconds).fold(0.0, f64::max);
    Ok(Merged {
        summary,
        lines,
        files: files.into_values().collect(),
        options: ReportOptions {
            max_quarantine_rate: first.report.max_quarantine_rate,
            excerpts,
            report_text: first.report.report_text,
            review: false,
            body_files: first.report.format == OutputKind::Responses.name(),
            seconds,
            convert_seconds: seconds,
        },
        seconds,
    })
}

/// Writes the merged run as the home's next run folder; returns its summary.
fn write(mut home: Home, merged: Merged, runs: &[ShardRun]) -> Result<Summary> {
    let Merged {
        mut summary,
        lines,
        files,
        options,
        seconds,
    } = merged;
    let number = home.start_run()?.number;
    summary.run = number;
    for (list, name) in LINE_FILES.iter().enumerate() {
        let mut sources = Vec::new();
        for run in runs {
            let path = run.folder.join(name);
            let file =
                open_regular(&path).with_context(|| format!("reading {}", path.display()))?;
            sources.push((path, BufReader::new(file)));
        }
        let mut out = BufWriter::new(home.create_run_file(name)?);
        // A session of a file per conversation placed by several shards: in one run, each
        // after the first in the walk's order is a duplicate.
        let mut placed = (list == 0 && runs[0].report.format == OutputKind::Codex.name())
            .then(PlacedByShards::default);
        let mut line = KeptLine::default();
        for (n, counts) in &lines {
            let (path, source) = &mut sources[*n];
            for _ in 0..counts[list] {
                line.clear();
                let copied = copy_line(source, &mut out, &mut line)?;
                if let (true, Some(placed)) = (copied, placed.as_mut()) {
                    placed.line(*n, &line);
                }
                if !copied {
                    bail!(
                        "{} ends before the lines its {SHARD_INDEX} counts: the shard's run is incomplete; run the shard again",
                        path.display()
                    );
                }
            }
        }
        for (path, source) in &mut sources {
            if !source.fill_buf()?.is_empty() {
                bail!(
                    "{} holds more lines than its {SHARD_INDEX} counts: run the shard again",
                    path.display()
                );
            }
        }
        out.flush()?;
        if let Some(placed) = placed {
            placed.count_into(&mut summary.home, summary.setup.dry_run);
        }
    }
    let mut timing = serde_json::to_vec_pretty(&Timing::of(&summary, seconds))?;
    timing.push(b'\n');
    home.write_run_file_atomic("timing.json", &timing)?;
    summary.verdict = report::verdict(&summary, &options).to_string();
    let reports =
        report::render(&summary, &files, &options).context("rendering the merged report")?;
    home.write_run_file_atomic("report.md", reports.markdown.as_bytes())?;
    home.write_run_file_atomic(report::FILES_CSV, reports.files_csv.as_bytes())?;
    home.write_run_file_atomic("report.html", reports.html.as_bytes())?;
    let mut bytes = serde_json::to_vec_pretty(&summary)?;
    bytes.push(b'\n');
    // Last: its presence marks the run folder as finished.
    home.write_run_file_atomic("summary.json", &bytes)?;
    home.mark_latest()?;
    Ok(summary)
}

/// The most a shard's `summary.json` or shard index may hold: far more than a run writes
/// (a million input files' entries), far less than a file that never ends (`/dev/zero`).
const JSON_CAP: u64 = 1 << 30;
/// The most a shard's `timing.json` may hold (a few numbers).
const TIMING_CAP: u64 = 1 << 20;

/// `path` if it is a folder itself, not a symlink to one.
fn real_folder(path: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Err(std::io::Error::other(
            "is a symlink: a shard's folders are never followed",
        ));
    }
    if !meta.is_dir() {
        return Err(std::io::Error::other("is not a folder"));
    }
    Ok(())
}

/// Opens `path` if it is a regular file itself, not a symlink (to `/dev/zero`, or another
/// run's report) nor a device or a pipe: the file opened is checked to be the one looked at.
fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::MetadataExt;
    let looked = std::fs::symlink_metadata(path)?;
    if looked.file_type().is_symlink() {
        return Err(std::io::Error::other(
            "is a symlink: a shard's files are read only as they are",
        ));
    }
    if !looked.is_file() {
        return Err(std::io::Error::other("is not a regular file"));
    }
    let file = File::open(path)?;
    let opened = file.metadata()?;
    if (opened.dev(), opened.ino()) != (looked.dev(), looked.ino()) || !opened.is_file() {
        return Err(std::io::Error::other("changed while it was opened"));
    }
    Ok(file)
}

/// The text of a shard's file at `path` (a regular file, [`open_regular`]) of at most `cap`
/// bytes; a longer one is refused unread.
fn read_capped(path: &Path, cap: u64) -> std::io::Result<String> {
    use std::io::Read;
    let file = open_regular(path)?;
    let size = file.metadata()?.len();
    if size > cap {
        return Err(std::io::Error::other(format!(
            "is {size} bytes, more than a shard's run writes there ({cap}): not read"
        )));
    }
    let mut text = String::new();
    file.take(cap.saturating_add(1)).read_to_string(&mut text)?;
    if text.len() as u64 > cap {
        return Err(std::io::Error::other(format!(
            "holds more than a shard's run writes there ({cap} bytes): not read"
        )));
    }
    Ok(text)
}

/// The start of a report line, kept while it is copied: the whole line when it is at most
/// [`KEPT_LINE`] bytes (a conversation's line is a few KB), so that no line is held whole
/// past that, whatever a shard's file holds.
#[derive(Default)]
struct KeptLine {
    bytes: Vec<u8>,
    whole: bool,
}

const KEPT_LINE: usize = 4 << 20;

impl KeptLine {
    fn clear(&mut self) {
        self.bytes.clear();
        self.whole = true;
    }

    fn keep(&mut self, part: &[u8]) {
        if self.whole && self.bytes.len() + part.len() <= KEPT_LINE {
            self.bytes.extend_from_slice(part);
        } else {
            self.whole = false;
        }
    }
}

/// The sessions the shards' conversation lines name, in the walk's order: which shard first
/// placed each path, with what digest, and the later shards that placed it again. A shard
/// counts a duplicate only among its own records; another shard's copy of the same session
/// it found on disk with the same bytes (`rollouts_unchanged`), or, in a dry run, as new.
#[derive(Default)]
struct PlacedByShards {
    first: HashMap<u128, (usize, u128)>,
    again: HashSet<(u128, usize)>,
    duplicates: u64,
}

/// The fields of a conversation line that say where its session went.
#[derive(serde::Deserialize)]
struct SessionOfLine {
    path: String,
    digest: String,
}

impl PlacedByShards {
    fn line(&mut self, shard: usize, line: &KeptLine) {
        let Some(session) = line
            .whole
            .then(|| serde_json::from_slice::<SessionOfLine>(&line.bytes).ok())
            .flatten()
        else {
            return;
        };
        let path = xxh3_128(session.path.as_bytes());
        let digest = xxh3_128(session.digest.as_bytes());
        match self.first.get(&path) {
            None => {
                self.first.insert(path, (shard, digest));
            }
            // Another version of the session (its digest differs) is not a duplicate.
            Some(&(first, placed)) if first != shard && placed == digest => {
                if self.again.insert((path, shard)) {
                    self.duplicates += 1;
                }
            }
            Some(_) => {}
        }
    }

    /// Counts the sessions placed by more than one shard as an unsharded run does.
    fn count_into(self, home: &mut HomeChanges, dry_run: bool) {
        let taken_from = if dry_run {
            &mut home.sessions_new
        } else {
            &mut home.rollouts_unchanged
        };
        let moved = self.duplicates.min(*taken_from);
        *taken_from -= moved;
        home.sessions_duplicate += moved;
    }
}

/// Copies one line (its `\n` included) from `source` to `out` a buffer at a time, never
/// holding it whole (`kept` keeps its start); false when the source ends before the line
/// does.
fn copy_line(
    source: &mut impl BufRead,
    out: &mut impl Write,
    kept: &mut KeptLine,
) -> std::io::Result<bool> {
    loop {
        let buf = match source.fill_buf() {
            Ok(buf) => buf,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if buf.is_empty() {
            return Ok(false);
        }
        match memchr::memchr(b'\n', buf) {
            Some(at) => {
                out.write_all(&buf[..=at])?;
                kept.keep(&buf[..at]);
                source.consume(at + 1);
                return Ok(true);
            }
            None => {
                let n = buf.len();
                out.write_all(buf)?;
                kept.keep(buf);
                source.consume(n);
            }
        }
    }
}
