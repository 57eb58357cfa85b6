//! What `convert` shows while it runs: a progress bar on a terminal, plain log lines
//! otherwise, and the run's notes worded for people.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::audit::summary::files_phrase;
use crate::commands::ui::{bytes, bytes_per_second, group, plural, Ui};
use crate::pipeline::{FileCounts, Note, PlanCounts, Progress};
use crate::source::Damage;

/// A progress bar on a terminal, plain log lines (every few seconds) otherwise; nothing but
/// damage (an error) with `--quiet`; a line per input file done with `--verbose`.
pub(super) struct Reporter {
    bar: Option<ProgressBar>,
    plain: Mutex<PlainState>,
    quiet: bool,
    verbose: bool,
}

struct PlainState {
    started: Instant,
    last: Instant,
    records: u64,
    bytes: u64,
}

impl Reporter {
    pub(super) fn new(ui: &Ui) -> Reporter {
        let bar = (std::io::stderr().is_terminal() && !ui.quiet).then(|| {
            let bar = ProgressBar::new(0);
            // Two lines, so that 80 columns hold them: the bar measures the input files on disk
            // (its ETA holds for compressed archives); the message counts records and the
            // decompressed bytes the summary will show.
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {wide_bar} ETA {eta}\n  {binary_bytes}/{binary_total_bytes} on disk, {wide_msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        Reporter {
            bar,
            plain: Mutex::new(PlainState {
                started: Instant::now(),
                last: Instant::now(),
                records: 0,
                bytes: 0,
            }),
            quiet: ui.quiet,
            verbose: ui.verbose,
        }
    }

    /// What another thread (the signal thread) prints while the run goes on.
    pub(super) fn notices(&self) -> Notices {
        Notices {
            bar: self.bar.clone(),
        }
    }

    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// A line above the bar, or on stderr.
    /// A line on stderr; control characters a file name or a reason brought (an escape
    /// sequence, a newline) are shown as escapes, never sent to the terminal.
    fn line(&self, line: String) {
        let line = crate::audit::report::visible(&line);
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }
}

/// Lines printed from outside the run: through the bar, so that it is drawn again below them
/// and cleared at the end, instead of a copy of it left on the screen above the summary.
pub(super) struct Notices {
    bar: Option<ProgressBar>,
}

impl Notices {
    pub(super) fn say(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// The last line before the process exits: the bar is cleared first, not left half drawn.
    pub(super) fn last(&self, line: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        eprintln!("{line}");
    }
}

impl Progress for Reporter {
    fn start(&self, files: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
        } else if !self.quiet && files > 0 {
            // The files this run reads (an incremental run's plan line has said the rest).
            eprintln!(
                "rollover: reading {}, {} on disk",
                plural(files, "file", "files"),
                bytes(total)
            );
        }
    }

    fn advance(&self, records: u64, read: u64, disk: u64) {
        let Ok(mut s) = self.plain.lock() else { return };
        s.records += records;
        s.bytes += read;
        let secs = s.started.elapsed().as_secs_f64().max(1e-9);
        let rate = s.records as f64 / secs;
        if let Some(bar) = &self.bar {
            bar.set_position(disk);
            bar.set_message(format!(
                "{} ({}/s), {} decompressed",
                plural(s.records, "record", "records"),
                group(rate as u64),
                bytes(s.bytes)
            ));
        } else if !self.quiet && s.last.elapsed() >= Duration::from_secs(5) {
            s.last = Instant::now();
            eprintln!(
                "rollover: {} ({}/s), {} decompressed ({})",
                plural(s.records, "record", "records"),
                group(rate as u64),
                bytes(s.bytes),
                bytes_per_second(s.bytes as f64 / secs)
            );
        }
    }

    fn note(&self, note: &Note) {
        if !self.quiet {
            self.line(format!("rollover: {}", words(note)));
        }
    }

    fn damage(&self, damage: &Damage) {
        self.line(format!(
            "rollover: {damage}; the records before it were read"
        ));
    }

    fn file_done(&self, file: &FileCounts) {
        if self.verbose {
            // Every place a record can go, as the summary counts it: the terms add up.
            let mut terms = vec![
                format!("converted {}", group(file.converted)),
                format!("quarantined {}", group(file.quarantined)),
            ];
            for (n, term) in [
                (file.merged, "merged"),
                (file.joined, "joined"),
                (file.dropped, "dropped by rule"),
            ] {
                if n > 0 {
                    terms.push(format!("{term} {}", group(n)));
                }
            }
            self.line(format!(
                "rollover: done {}: {} = {}",
                file.file,
                plural(file.records, "record", "records"),
                terms.join(" + ")
            ));
        }
    }
}

/// A note as the user reads it.
fn words(note: &Note) -> String {
    match note {
        Note::Walk(text) | Note::LinkedFolder(text) | Note::Waiting(text) => text.clone(),
        Note::SymlinkLoop { path } => format!("symlink loop at {path}: skipped"),
        Note::Unreadable { path, message } => format!("cannot read {path}: {message}; skipped"),
        Note::TookOverLock { pid } => {
            format!("took over the lock left by pid {pid}, which is no longer running")
        }
        Note::StrayRunFolder { name } => {
            format!("skipped {name}: it is named as a run folder but is not a folder")
        }
        Note::Plan(counts) => plan_line(counts),
        Note::SettingsChanged {
            what,
            since_run,
            files,
            dry_run,
        } => {
            let since = match since_run {
                0 => "an earlier run".to_string(),
                n => format!("run {n:04}"),
            };
            let verb = if *dry_run {
                "would be converted again"
            } else {
                "converted again"
            };
            format!("{what} changed since {since}: {} {verb}", files_phrase(*files))
        }
        Note::Pending { files } => format!(
            "{} with sessions kept pending (changed in Codex since, in conflict with another file's version, or open in another process): read again; --force replaces those changed or in conflict",
            files_phrase(*files),
        ),
        Note::RunsRemoved { removed: 1, keep } => {
            format!("removed the oldest run folder, keeping {keep} (--keep-runs)")
        }
        Note::RunsRemoved { removed, keep } => {
            format!("removed the {removed} oldest run folders, keeping {keep} (--keep-runs)")
        }
        Note::ClaimingElsewhere { unclaimed } => format!(
            "{unclaimed} Batch API results of this shard's files have no request in them: looking for their requests in the other shards' files"
        ),
    }
}

/// What the run will read, said before it reads: `plan: read 5 files (2 new, 1 changed, 2
/// again: their rules, options or pending sessions); 40 unchanged`.
fn plan_line(counts: &PlanCounts) -> String {
    let PlanCounts {
        new,
        changed,
        again,
        unchanged,
        full,
    } = *counts;
    let mut parts = Vec::new();
    for (n, what) in [(new, "new"), (changed, "changed")] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    if again > 0 {
        let why = if full {
            "again: --full, or a dry run, reads every file"
        } else {
            "again: their rules, options or pending sessions"
        };
        parts.push(format!("{again} {why}"));
    }
    let read = new + changed + again;
    let mut line = format!("plan: read {}", files_phrase(read));
    if !parts.is_empty() {
        line.push_str(&format!(" ({})", parts.join(", ")));
    }
    if unchanged > 0 {
        line.push_str(&format!("; {unchanged} unchanged"));
    }
    line
}
