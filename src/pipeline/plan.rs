//! Incremental planning: which files of the walk the run reads, and what part of each. An
//! unchanged file (by the manifest, then by its digest) is left out unless its rules or options
//! changed since, or sessions of it are pending; why is said from the old runs' `summary.json`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::audit::summary::{SettingsChange, UnreadableReport};
use crate::audit::Summary;
use crate::output::manifest::{file_digest_unless, FileEntry, Rollouts};
use crate::output::OutputKind;
use crate::output::{Home, Manifest};
use crate::source::{ShardPlan, Skipped, SourceFile};

use super::progress::PlanCounts;
use super::shard::select;
use super::{failpoint, Fingerprint, Note, Options, Progress, Request};

/// What part of one input file a run reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Portion {
    /// The file's place among every file the walk found (the same in every shard).
    pub index: usize,
    /// Only the shard's ranges of a split file.
    pub ranges: bool,
    /// The file counts in this run's file-level numbers (files, bytes on disk, files done).
    pub counted: bool,
}

/// One input file as the run plans it. The reader, the workers and the collector number the
/// run's files by their place in one `[PlannedFile]`, so what the run knows of a file travels
/// together instead of in vectors kept aligned by hand.
#[derive(Debug, Clone)]
pub(crate) struct PlannedFile {
    pub source: SourceFile,
    /// What part of it this run reads.
    pub portion: Portion,
    /// Unchanged since the manifest recorded it, under this run's settings: not read.
    pub skip: bool,
    /// Its content digest, recorded in the manifest with the sessions it converts to (the
    /// manifest's own, when its size and mtime are unchanged). Empty when it is not known
    /// before the file is read: then `read_digest` is where the reader leaves it.
    pub digest: String,
    /// A whole file the manifest does not know, in a writing run: its digest is taken by the
    /// reader as it reads the file ([`crate::source::open::open_hashing`]), not by reading it
    /// once more before; the collector records it at the file's end.
    pub read_digest: Option<crate::source::DigestSlot>,
    /// A file the manifest lists under scheme 2: the session ids it lists, which its
    /// conversations keep ([`crate::convert::Naming`]).
    pub legacy: Option<Arc<HashSet<String>>>,
}

/// Says what the walk left out; returns the paths it could not read, for the summary.
pub(super) fn note_skipped(skipped: &Skipped, progress: &dyn Progress) -> Vec<UnreadableReport> {
    for note in skipped.notes() {
        progress.note(&Note::Walk(note));
    }
    for path in &skipped.loops {
        progress.note(&Note::SymlinkLoop { path: path.clone() });
    }
    let unreadable: Vec<UnreadableReport> = skipped
        .unreadable
        .iter()
        .map(|u| UnreadableReport {
            path: u.path.clone(),
            message: u.message.clone(),
        })
        .collect();
    note_unreadable(&unreadable, progress);
    unreadable
}

pub(super) fn note_unreadable(unreadable: &[UnreadableReport], progress: &dyn Progress) {
    for entry in unreadable {
        progress.note(&Note::Unreadable {
            path: entry.path.clone(),
            message: entry.message.clone(),
        });
    }
}

/// What [`plan_files`] decided.
pub(super) struct Planned {
    pub(super) files: Vec<PlannedFile>,
    /// The paths the walk and the plan could not read, the walk's first.
    pub(super) unreadable: Vec<UnreadableReport>,
    /// Files read again though unchanged, and why.
    pub(super) unsettled: Unsettled,
    pub(super) settings_changed: Vec<SettingsChange>,
}

/// The files of the walk this run reads ([`select`], [`plan`]), said to the user as they are
/// decided: the files that cannot be read (`unreadable`: the walk's, to which the plan's are
/// added), then the plan's line.
pub(super) fn plan_files(
    walk: &[SourceFile],
    shard: Option<&ShardPlan>,
    manifest: &mut Manifest,
    mut unreadable: Vec<UnreadableReport>,
    fresh: bool,
    request: Request<'_>,
) -> Planned {
    let Request {
        options, progress, ..
    } = request;
    // A dry run (and `audit`) reads every input: its report is the plan of the whole run.
    let full = options.full || options.dry_run;
    let reading = Reading {
        full,
        dry_run: options.dry_run,
        fingerprint: &options.fingerprint,
        stop: &options.stop,
    };
    let walk_unreadable = unreadable.len();
    let mut unsettled = Unsettled::default();
    let files = plan(
        walk,
        select(walk, shard),
        manifest,
        reading,
        &mut unreadable,
        &mut unsettled,
    );
    note_unreadable(&unreadable[walk_unreadable..], progress);
    if !fresh {
        progress.note(&Note::Plan(plan_counts(&files, manifest, full)));
    }
    Planned {
        files,
        unreadable,
        unsettled,
        settings_changed: Vec::new(),
    }
}

/// Says why files unchanged since the last run are read again: the settings that changed
/// since (returned, for the summary), and the files with sessions kept pending.
pub(super) fn note_read_again(
    unsettled: &Unsettled,
    home: &Home,
    request: Request<'_>,
) -> Vec<SettingsChange> {
    let Request {
        options, progress, ..
    } = request;
    let settings_changed = unsettled.changes(home);
    for change in &settings_changed {
        progress.note(&Note::SettingsChanged {
            what: change.what.clone(),
            since_run: change.since_run,
            files: change.files,
            dry_run: options.dry_run,
        });
    }
    if unsettled.pending > 0 {
        progress.note(&Note::Pending {
            files: unsettled.pending,
        });
    }
    settings_changed
}

/// Files read again though unchanged: their rules or options changed, or sessions of theirs
/// are pending.
#[derive(Debug, Default)]
pub(super) struct Unsettled {
    /// (what changed, the rules and options fingerprints the file was converted with), per file.
    pub(super) changed: Vec<(&'static str, Fingerprint)>,
    pub(super) pending: u64,
}

impl Unsettled {
    /// The changes, one line per kind, each naming the last run (with its report still in
    /// `runs/`) that converted under the settings it changed from.
    pub(super) fn changes(&self, home: &Home) -> Vec<SettingsChange> {
        let runs = finished_runs(home);
        let since = |old: &Fingerprint| {
            runs.iter()
                .rev()
                .find(|(_, s)| {
                    !s.setup.dry_run
                        && s.fingerprint.rules == old.rules
                        && s.fingerprint.options == old.options
                })
                .map_or(0, |(n, _)| *n)
        };
        let mut out: Vec<SettingsChange> = Vec::new();
        for what in ["rules", "options", "rules and options"] {
            let olds: Vec<&Fingerprint> = self
                .changed
                .iter()
                .filter(|(w, _)| *w == what)
                .map(|(_, old)| old)
                .collect();
            if olds.is_empty() {
                continue;
            }
            let since_run = olds.iter().map(|old| since(old)).max().unwrap_or(0);
            out.push(SettingsChange {
                what: what.to_string(),
                since_run,
                files: olds.len() as u64,
            });
        }
        out
    }
}

/// What the run will read, by why each file is read or left.
pub(super) fn plan_counts(files: &[PlannedFile], manifest: &Manifest, full: bool) -> PlanCounts {
    let mut counts = PlanCounts {
        full,
        ..PlanCounts::default()
    };
    for file in files.iter().filter(|f| f.portion.counted) {
        match manifest.files.get(&file.source.origin) {
            None => counts.new += 1,
            Some(_) if file.skip => counts.unchanged += 1,
            Some(entry) if entry.digest != file.digest => counts.changed += 1,
            Some(_) => counts.again += 1,
        }
    }
    counts
}

/// The finished runs of a home (those with a `summary.json`), oldest first, with their
/// summaries.
pub(super) fn finished_runs(home: &Home) -> Vec<(u32, Summary)> {
    let runs = home.state_dir().join(crate::output::home::RUNS_DIR);
    let mut out: Vec<(u32, Summary)> = std::fs::read_dir(&runs)
        .map(|entries| {
            entries
                .filter_map(|e| {
                    let e = e.ok()?;
                    let number: u32 = e.file_name().to_str()?.parse().ok()?;
                    let text = std::fs::read(e.path().join("summary.json")).ok()?;
                    Some((number, serde_json::from_slice(&text).ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by_key(|(n, _)| *n);
    out
}

/// Which input files to read: a file whose size and mtime the manifest recorded is unchanged;
/// one whose content digest it recorded is too (and its new mtime is kept, so the next run
/// need not read it). An unchanged file is read all the same when the rules or options that
/// converted it differ from this run's, or when sessions of it are pending (`unsettled` says
/// which). A file that cannot be read is left out and added to `unreadable` (when this run
/// counts it): the run goes on without it. A signal ends the pre-pass early: the caller then
/// ends the run.
pub(super) fn plan(
    walk: &[SourceFile],
    portions: Vec<Portion>,
    manifest: &mut Manifest,
    reading: Reading<'_>,
    unreadable: &mut Vec<UnreadableReport>,
    unsettled: &mut Unsettled,
) -> Vec<PlannedFile> {
    let fingerprint = reading.fingerprint;
    let mut files = Vec::with_capacity(portions.len());
    for portion in portions {
        if reading.stop.load(Ordering::Relaxed) != 0 {
            break;
        }
        failpoint("plan");
        let Some(source) = walk.get(portion.index) else {
            continue;
        };
        // A split file is read by several shards: the one that counts it reports it.
        let counts = portion.counted;
        if let Some(entry) = manifest.files.get(&source.origin) {
            let what = match (
                entry.rules != fingerprint.rules,
                entry.options != fingerprint.options,
            ) {
                (true, true) => Some("rules and options"),
                (true, false) => Some("rules"),
                (false, true) => Some("options"),
                (false, false) => None,
            };
            if let (Some(what), true) = (what, counts) {
                let old = Fingerprint {
                    rules: entry.rules.clone(),
                    options: entry.options.clone(),
                };
                unsettled.changed.push((what, old));
            }
            if !entry.pending.is_empty() && counts {
                unsettled.pending += 1;
            }
        }
        match plan_file(source, portion, manifest, reading) {
            Ok(file) => files.push(file),
            Err(lost) if counts => unreadable.push(lost),
            Err(_) => {}
        }
    }
    files
}

/// How the plan reads the inputs: every file (`--full`, a dry run) or the changed ones, for
/// which settings, until a signal.
#[derive(Clone, Copy)]
pub(super) struct Reading<'a> {
    pub(super) full: bool,
    /// A dry run: nothing is recorded, so a file the manifest does not know needs no digest.
    pub(super) dry_run: bool,
    pub(super) fingerprint: &'a Fingerprint,
    pub(super) stop: &'a AtomicUsize,
}

/// [`plan`] for one file, or why it cannot be read.
pub(super) fn plan_file(
    source: &SourceFile,
    portion: Portion,
    manifest: &mut Manifest,
    reading: Reading<'_>,
) -> Result<PlannedFile, UnreadableReport> {
    let Reading {
        full,
        dry_run,
        fingerprint,
        stop,
    } = reading;
    let entry = manifest.files.get_mut(&source.origin);
    // Read again, whatever its content: converted by other rules or options, or pending.
    let unsettled = entry.as_ref().is_some_and(|e| {
        e.rules != fingerprint.rules || e.options != fingerprint.options || !e.pending.is_empty()
    });
    let read_anyway = full || unsettled;
    let legacy = entry.as_ref().filter(|e| e.legacy_ids).map(|e| {
        let ids = e
            .rollouts
            .entries()
            .filter_map(|r| crate::output::manifest::session_id_of(&r.path).map(str::to_string));
        Arc::new(ids.collect::<HashSet<String>>())
    });
    let planned = |skip: bool, digest: String| PlannedFile {
        source: source.clone(),
        portion,
        skip,
        digest,
        read_digest: None,
        legacy: legacy.clone(),
    };
    // Git's index rule: a file whose size, mtime, ctime and inode are as recorded is
    // unchanged; any of them moved (`cp -p` and `tar x` put an mtime back, not a ctime) and
    // its digest says.
    if let Some(entry) = &entry {
        if entry.size == source.size
            && entry.mtime_ns == source.mtime_ns
            && entry.ctime_ns == source.ctime_ns
            && entry.ino == source.ino
        {
            return Ok(planned(!read_anyway, entry.digest.clone()));
        }
    }
    let unreadable = |err: std::io::Error| UnreadableReport {
        path: source.display.to_string(),
        message: err.to_string(),
    };
    // A file the manifest does not know is new whatever its digest: its first bytes are read
    // here, to report an unreadable file before the run, and the whole file once, by the
    // reader, which takes its digest on the way (a dry run records none). Read here too, an
    // archive larger than the page cache was read from disk twice. A shard reads only its
    // ranges of a split file, so that file's digest is taken here.
    if entry.is_none() && !portion.ranges {
        readable(&source.path).map_err(unreadable)?;
        return Ok(PlannedFile {
            read_digest: (!dry_run).then(crate::source::DigestSlot::default),
            ..planned(false, String::new())
        });
    }
    let digest = file_digest_unless(&source.path, stop).map_err(|err| UnreadableReport {
        path: source.display.to_string(),
        message: err.to_string(),
    })?;
    let same = match entry {
        Some(entry) if entry.digest == digest => {
            entry.size = source.size;
            entry.mtime_ns = source.mtime_ns;
            entry.ctime_ns = source.ctime_ns;
            entry.ino = source.ino;
            true
        }
        Some(_) | None => false,
    };
    Ok(planned(same && !read_anyway, digest))
}

/// Opens `path` and reads its first bytes: what fails there makes a file unreadable (a
/// special file that opens and cannot be read, a file without permission).
pub(super) fn readable(path: &std::path::Path) -> std::io::Result<()> {
    use std::io::Read;
    let mut head = [0u8; 4096];
    std::fs::File::open(path)?.read(&mut head).map(drop)
}

/// What the inputs held, for the error of a run with nothing to read.
pub(super) fn nothing_found(options: &Options, skipped: &Skipped) -> String {
    let notes = skipped.notes();
    if notes.is_empty() {
        let inputs: Vec<String> = options
            .inputs
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        format!("no file in {}", inputs.join(", "))
    } else {
        notes.join("; ")
    }
}

/// Two inputs with the same relative key (`a/x.jsonl` and `b/x.jsonl` given as separate
/// arguments) would get the same session ids: the later ones get a `#n` suffix.
pub(super) fn dedupe_keys(files: &mut [SourceFile]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for file in files.iter_mut() {
        let count = seen.entry(file.key.clone()).or_insert(0);
        *count += 1;
        if *count > 1 {
            file.key = format!("{}#{}", file.key, count);
        }
    }
}

/// Paths the walk skipped (unreadable, Codex homes), resolved: no file under one is gone.
pub(super) fn protected(skipped: &Skipped) -> Vec<String> {
    skipped
        .codex_homes
        .iter()
        .chain(skipped.unreadable.iter().map(|u| &u.path))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .map(|p| p.display().to_string())
        .collect()
}

/// The manifest entry of a planned file as it stands before any of its records.
impl PlannedFile {
    pub(crate) fn fresh_entry(&self, fingerprint: &Fingerprint, kind: OutputKind) -> FileEntry {
        let PlannedFile { source, digest, .. } = self;
        FileEntry {
            key: source.origin.clone(),
            name: source.display.to_string(),
            size: source.size,
            mtime_ns: source.mtime_ns,
            ctime_ns: source.ctime_ns,
            ino: source.ino,
            digest: digest.clone(),
            records: 0,
            rules: fingerprint.rules.clone(),
            options: fingerprint.options.clone(),
            rollouts: Rollouts::default(),
            pending: Vec::new(),
            format: kind.to_record(),
            findings: None,
            legacy_ids: false,
        }
    }
}
