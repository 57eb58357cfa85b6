//! The manifest: the cumulative state of a Codex home that rollover writes into, so scheduled
//! runs are incremental and never lose, clobber, roll back or silently replace a session.
//!
//! `OUT/rollover/manifest` starts with a header line (`{"manifest":3}`), then holds one JSON
//! line per input file, sorted by its key (the file's absolute path, or `stdin:NAME` for a
//! stream): its size, mtime, ctime and inode (git's index rule: any of them changed and the
//! file's digest is taken again), its content digest, how many records it held, the
//! fingerprints of the rules and of the options that converted it, every rollout it produced
//! with the digest of the bytes written, the sessions kept pending, and what its reading found
//! (quarantined records, damage: carried into every later report until the file is read
//! again). Then one line per orphan (a session whose record is gone, kept and remembered),
//! and one line per session that has a version or an alias ([`SessionRecord`]): the version
//! placed (its source's time, its message count, the digest of its messages) and the file it
//! came from, so that no run writes an older version over a newer one.
//!
//! While a run goes, each input file that is completely on disk is appended to
//! `manifest.journal`, with the orphans, versions and removals it caused; a clean end folds
//! the journal into the manifest (written atomically, the one before kept as
//! `manifest.prev`) and removes it. A journal found at start is the trace of a killed run: its
//! complete lines count, a last line a kill cut does not (and is cut off before the next
//! append, so that no line is glued to it). A `--prune` journals what it will remove before it
//! starts, each removal as it is done, and then the files it forgets: a run after a kill
//! finishes what the killed prune started.
//!
//! Corrupt state is refused, never guessed ([`OutputError::CorruptManifest`]): an empty
//! manifest, a header that does not parse, any line that does not parse (but the journal's
//! last), a manifest missing beside its `manifest.prev`. A manifest without a header was
//! written by the scheme of ids before the current ones ([`OutputError::OldManifest`]); one of
//! scheme 2 is read, and its sessions keep their ids ([`FileEntry::legacy_ids`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, Write};

use serde::Serialize;

use super::dir::Dir;
use super::home::{write_error, Home};
pub(crate) use super::rollouts::Rollouts;
use super::OutputError;

mod digest;
mod entries;
mod listers;

pub(crate) use digest::{digest, file_digest, file_digest_unless};
pub(crate) use entries::{
    FileEntry, Finding, Findings, Orphan, PrunePlan, RolloutEntry, SessionRecord, Version,
};
use entries::{Forgotten, Header, Line, PruneDone, Pruned, Pruning};
use listers::Listers;

pub(crate) const MANIFEST: &str = "manifest";
pub(crate) const JOURNAL: &str = "manifest.journal";
/// The manifest before the last one saved: what to go back to when the manifest is corrupt.
pub(crate) const PREV: &str = "manifest.prev";
/// The scheme of the manifest and of session ids: 3 identifies a record without an id of its
/// own by its JSON value; 2 did by its bytes (still read: [`FileEntry::legacy_ids`]).
pub(crate) const SCHEME: u32 = 3;
const LEGACY_SCHEME: u32 = 2;
/// At most this many findings of one file are listed in its entry (all are counted).
pub(crate) const FINDINGS_LISTED: usize = 200;

/// The manifest of a home, as loaded.
#[derive(Debug, Default)]
pub struct Manifest {
    pub files: BTreeMap<String, FileEntry>,
    /// Sessions whose record is gone, by path.
    pub orphans: BTreeMap<String, Orphan>,
    /// Versions and aliases of sessions, by path.
    pub sessions: HashMap<String, SessionRecord>,
    /// A journal was found: the last run was killed before it finished.
    pub recovered: bool,
    /// A prune the killed run journalled and did not finish.
    pub unfinished_prune: Option<PrunePlan>,
    /// The scheme the manifest was written with.
    pub scheme: u32,
    journal: Option<File>,
    /// Where the journal's complete lines end, when a kill cut its last one: cut there before
    /// the first append.
    journal_cut: Option<u64>,
    /// Which files list each session (kept with `files`), so that asking who else holds a
    /// session costs a look-up, not a scan of the manifest.
    listers: Listers,
}

impl Manifest {
    /// Reads the manifest and any journal a killed run left. Corrupt state and a manifest of
    /// the first scheme are refused.
    pub fn load(home: &Home) -> Result<Manifest, OutputError> {
        let mut manifest = Manifest {
            scheme: SCHEME,
            ..Manifest::default()
        };
        let Some(state) = home.existing_state()? else {
            return Ok(manifest);
        };
        match state.open_read(MANIFEST)? {
            Some(file) => manifest.read_manifest(home, &state, file)?,
            None if state.contains(PREV) => {
                return Err(corrupt(
                    home,
                    &state,
                    MANIFEST,
                    0,
                    "the manifest is missing",
                ))
            }
            None => {}
        }
        if let Some(file) = state.open_read(JOURNAL)? {
            manifest.recovered = true;
            manifest.read_journal(home, &state, file)?;
        }
        Ok(manifest)
    }

    fn read_manifest(&mut self, home: &Home, state: &Dir, file: File) -> Result<(), OutputError> {
        let path = state.path_of(MANIFEST);
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut number = 0u64;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| write_error(&path, e))?;
            if n == 0 {
                break;
            }
            number += 1;
            if line.last() != Some(&b'\n') {
                // The manifest is written whole and renamed: a cut line is damage, not a kill.
                return Err(corrupt(
                    home,
                    state,
                    MANIFEST,
                    number,
                    "its last line is cut short",
                ));
            }
            let text = &line[..line.len() - 1];
            let parsed = serde_json::from_slice::<Line>(text).ok();
            if number == 1 {
                match parsed {
                    Some(Line::Header(h)) if h.manifest == SCHEME || h.manifest == LEGACY_SCHEME => {
                        self.scheme = h.manifest;
                        continue;
                    }
                    Some(Line::Header(h)) => {
                        return Err(corrupt(
                            home,
                            state,
                            MANIFEST,
                            1,
                            &format!("its header names scheme {}, which this rollover does not know (a newer rollover wrote it?)", h.manifest),
                        ))
                    }
                    Some(Line::File(_)) => {
                        return Err(OutputError::OldManifest {
                            path: home.root.display().to_string(),
                        })
                    }
                    // The first scheme wrote no header: its first line is a file's entry.
                    Some(_) | None if is_first_scheme_entry(text) => {
                        return Err(OutputError::OldManifest {
                            path: home.root.display().to_string(),
                        })
                    }
                    Some(_) | None => {
                        return Err(corrupt(home, state, MANIFEST, 1, "its header line does not parse"))
                    }
                }
            }
            match parsed {
                Some(line) => self.apply(line, self.scheme == LEGACY_SCHEME),
                None => {
                    return Err(corrupt(
                        home,
                        state,
                        MANIFEST,
                        number,
                        "the line does not parse",
                    ))
                }
            }
        }
        if number == 0 {
            return Err(corrupt(home, state, MANIFEST, 1, "it is empty (0 bytes)"));
        }
        Ok(())
    }

    fn read_journal(&mut self, home: &Home, state: &Dir, file: File) -> Result<(), OutputError> {
        let path = state.path_of(JOURNAL);
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut number = 0u64;
        let mut offset = 0u64;
        let mut line = Vec::new();
        // A journal a run of scheme 2 wrote has no header: its entries name their sessions
        // by that scheme.
        let mut legacy = true;
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| write_error(&path, e))?;
            if n == 0 {
                break;
            }
            number += 1;
            if line.last() != Some(&b'\n') {
                // Cut by a kill: that entry was not done. Cut off before the next append.
                self.journal_cut = Some(offset);
                break;
            }
            offset += n as u64;
            let text = &line[..line.len() - 1];
            if text.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Line>(text) {
                Ok(Line::Header(h)) if h.manifest == SCHEME => legacy = false,
                Ok(Line::Header(_)) => {
                    return Err(corrupt(
                        home,
                        state,
                        JOURNAL,
                        number,
                        "its header names another scheme",
                    ))
                }
                Ok(parsed) => self.apply(parsed, legacy),
                Err(_) => {
                    return Err(corrupt(
                        home,
                        state,
                        JOURNAL,
                        number,
                        "the line does not parse",
                    ))
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, line: Line, legacy: bool) {
        match line {
            Line::Header(_) => {}
            Line::Orphan(orphan) => {
                self.orphans.insert(orphan.orphan.path.clone(), orphan);
            }
            Line::Pruned(pruned) => {
                self.orphans.remove(&pruned.pruned);
                self.sessions.remove(&pruned.pruned);
                if let Some(plan) = self.unfinished_prune.as_mut() {
                    plan.sessions.retain(|s| s.path != pruned.pruned);
                }
            }
            Line::Forgotten(forgotten) => {
                self.unlist(&forgotten.forgotten);
                self.files.remove(&forgotten.forgotten);
                if let Some(plan) = self.unfinished_prune.as_mut() {
                    plan.files.retain(|f| *f != forgotten.forgotten);
                }
            }
            Line::Pruning(pruning) => self.unfinished_prune = Some(pruning.pruning),
            Line::PruneDone(done) => {
                if self
                    .unfinished_prune
                    .as_ref()
                    .is_some_and(|plan| plan.run == done.prune_done)
                {
                    self.unfinished_prune = None;
                }
            }
            Line::Session(record) => {
                self.sessions.insert(record.session.clone(), record);
            }
            Line::File(mut entry) => {
                entry.legacy_ids |= legacy;
                self.insert(*entry)
            }
        }
    }

    fn insert(&mut self, entry: FileEntry) {
        self.unlist(&entry.key);
        // By key: a session's path and digest are written out only for an orphan or a
        // session another file lists too (the collector, a serial stage, records every
        // session here).
        for at in 0..entry.rollouts.len() {
            let path = entry.rollouts.key_at(at);
            let mut text = None;
            if !self.orphans.is_empty() {
                let rollout = text.get_or_insert_with(|| entry.rollouts.entry_at(at));
                self.orphans.remove(&rollout.path);
            }
            // A digest is what is at the path now, whichever file wrote it last: another
            // file that lists the same session (one renamed away, a duplicate) gets it too,
            // so that no stale digest of it makes a later run take the session for one Codex
            // changed.
            for other in self.listers.of_key(path) {
                let rollout = text.get_or_insert_with(|| entry.rollouts.entry_at(at));
                if let Some(listed) = self.files.get_mut(other) {
                    listed.rollouts.set_digest(&rollout.path, &rollout.digest);
                }
            }
            self.listers.add(path, &entry.key);
        }
        self.files.insert(entry.key.clone(), entry);
    }

    /// Takes the sessions of the file `key` out of [`Manifest::listers`].
    fn unlist(&mut self, key: &str) {
        let Some(previous) = self.files.get(key) else {
            return;
        };
        for at in 0..previous.rollouts.len() {
            self.listers.remove(previous.rollouts.key_at(at), key);
        }
    }

    /// Every session the manifest knows (of files and orphans), by path, with the digest
    /// written.
    pub fn rollout_digests(&self) -> HashMap<String, String> {
        let mut digests = HashMap::new();
        for file in self.files.values() {
            file.rollouts.each(|path, digest| {
                digests.insert(path.to_string(), digest.to_string());
            });
        }
        for orphan in self.orphans.values() {
            let rollout = &orphan.orphan;
            digests.insert(rollout.path.clone(), rollout.digest.clone());
        }
        digests
    }

    /// The number of sessions the manifest knows.
    pub fn session_count(&self) -> usize {
        let mut paths = HashSet::new();
        for file in self.files.values() {
            file.rollouts.each(|path, _| {
                paths.insert(path.to_string());
            });
        }
        paths.extend(self.orphans.keys().cloned());
        paths.len()
    }

    /// The identities whose sessions keep the id scheme 2 gave them: identity digest →
    /// session id, for the workers.
    pub fn aliases(&self) -> HashMap<u128, String> {
        self.sessions
            .values()
            .filter_map(|record| {
                let alias = u128::from_str_radix(record.alias.as_deref()?, 16).ok()?;
                Some((alias, session_id_of(&record.session)?.to_string()))
            })
            .collect()
    }

    /// The versions placed, by session path, for the collector's gate.
    pub fn versions(&self) -> impl Iterator<Item = (&str, &SessionRecord)> {
        self.sessions
            .iter()
            .map(|(path, record)| (path.as_str(), record))
    }

    /// Whether a file other than `origin` lists the output at `path` (walked or not).
    pub fn listed_by_other(&self, path: &str, origin: &str) -> bool {
        self.listers.of(path).any(|k| k != origin)
    }

    /// Whether a file of `walked` other than `except` still lists the session at `path`.
    pub fn listed_elsewhere(&self, path: &str, except: &str, walked: &HashSet<String>) -> bool {
        self.listers
            .of(path)
            .any(|k| k != except && walked.contains(k))
    }

    fn append<T: Serialize>(&mut self, home: &Home, line: &T) -> Result<(), OutputError> {
        let path = home.state_file(JOURNAL);
        if self.journal.is_none() {
            let state = home.state()?;
            let mut file = state.open_append(JOURNAL)?;
            // A last line a kill cut is cut off: the next line starts fresh, not glued to it.
            if let Some(at) = self.journal_cut.take() {
                file.set_len(at).map_err(|e| write_error(&path, e))?;
            }
            let empty = file
                .seek(std::io::SeekFrom::End(0))
                .map_err(|e| write_error(&path, e))?
                == 0;
            if empty {
                self::line(&mut file, &Header { manifest: SCHEME })
                    .map_err(|e| write_error(&path, e))?;
            }
            self.journal = Some(file);
        }
        if let Some(journal) = self.journal.as_mut() {
            // Streamed, not built whole (a file of 64,000 sessions is a 10 MB line). A kill
            // may cut the line: a cut line does not parse, and `load` skips it.
            let mut out = std::io::BufWriter::with_capacity(1 << 16, &*journal);
            self::line(&mut out, line)
                .and_then(|()| out.flush())
                .map_err(|e| write_error(&path, e))?;
            drop(out);
            super::failpoint::hit("journal");
            if home.durable {
                journal.sync_data().map_err(|e| write_error(&path, e))?;
            }
        }
        Ok(())
    }

    /// Records a file as done: appended to the journal at once (so a kill after this point
    /// keeps it), and kept for the manifest written at the end.
    pub fn record(&mut self, home: &Home, entry: FileEntry) -> Result<(), OutputError> {
        self.append(home, &entry)?;
        self.insert(entry);
        Ok(())
    }

    /// Records what the manifest knows of a session (its version placed, its alias).
    pub fn record_session(
        &mut self,
        home: &Home,
        record: SessionRecord,
    ) -> Result<(), OutputError> {
        if self.sessions.get(&record.session) == Some(&record) {
            return Ok(());
        }
        self.append(home, &record)?;
        self.sessions.insert(record.session.clone(), record);
        Ok(())
    }

    /// Remembers a session whose record is gone from `from` (kept on disk as it is).
    pub fn orphan(
        &mut self,
        home: &Home,
        rollout: RolloutEntry,
        from: &str,
        rules: &str,
    ) -> Result<(), OutputError> {
        let orphan = Orphan {
            orphan: rollout,
            from: from.to_string(),
            rules: rules.to_string(),
        };
        self.append(home, &orphan)?;
        self.orphans.insert(orphan.orphan.path.clone(), orphan);
        Ok(())
    }

    /// The rules fingerprint of the rule set that wrote the session at `path` (empty when the
    /// manifest does not say).
    pub fn rules_of(&self, path: &str) -> String {
        if let Some(orphan) = self.orphans.get(path) {
            return orphan.rules.clone();
        }
        self.files
            .values()
            .find(|entry| entry.rollouts.paths().contains(path))
            .map(|entry| entry.rules.clone())
            .unwrap_or_default()
    }

    /// Journals what a `--prune` will remove, before it removes anything.
    pub fn prune_plan(&mut self, home: &Home, plan: PrunePlan) -> Result<(), OutputError> {
        self.append(
            home,
            &Pruning {
                pruning: plan.clone(),
            },
        )?;
        self.unfinished_prune = Some(plan);
        Ok(())
    }

    /// Journals that the prune of run `run` is done.
    pub fn prune_done(&mut self, home: &Home, run: u32) -> Result<(), OutputError> {
        self.append(home, &PruneDone { prune_done: run })?;
        self.unfinished_prune = None;
        Ok(())
    }

    /// Forgets a session `--prune` removed (its copy kept).
    pub fn pruned(&mut self, home: &Home, path: &str) -> Result<(), OutputError> {
        self.append(
            home,
            &Pruned {
                pruned: path.to_string(),
            },
        )?;
        self.orphans.remove(path);
        self.sessions.remove(path);
        if let Some(plan) = self.unfinished_prune.as_mut() {
            plan.sessions.retain(|s| s.path != path);
        }
        Ok(())
    }

    /// Forgets a file `--prune` found gone from the inputs, once its sessions are handled.
    pub fn forget(&mut self, home: &Home, key: &str) -> Result<(), OutputError> {
        self.append(
            home,
            &Forgotten {
                forgotten: key.to_string(),
            },
        )?;
        self.unlist(key);
        self.files.remove(key);
        if let Some(plan) = self.unfinished_prune.as_mut() {
            plan.files.retain(|f| f != key);
        }
        Ok(())
    }

    /// Writes the whole manifest, sorted, atomically, keeping the one before as
    /// `manifest.prev` (the manifest is never missing on the way), and removes the journal.
    pub fn save(&mut self, home: &Home) -> Result<(), OutputError> {
        let state = home.state()?;
        if state.contains(MANIFEST) {
            let temp = home.temp_name(PREV);
            state.remove_file(&temp)?;
            state.link_to(MANIFEST, &state, &temp)?;
            state.rename(&temp, PREV)?;
        }
        let mut sessions: Vec<&SessionRecord> = self.sessions.values().collect();
        sessions.sort_by(|a, b| a.session.cmp(&b.session));
        // Streamed to the file: built whole, the manifest of a large archive was the run's
        // peak of memory.
        home.write_state_atomic_with(MANIFEST, |out| {
            line(out, &Header { manifest: SCHEME })?;
            for entry in self.files.values() {
                line(out, entry)?;
            }
            for orphan in self.orphans.values() {
                line(out, orphan)?;
            }
            for record in sessions {
                line(out, record)?;
            }
            Ok(())
        })?;
        self.journal = None;
        self.journal_cut = None;
        self.scheme = SCHEME;
        state.remove_file(JOURNAL)
    }
}

/// Whether a manifest's first line is a file's entry as the first scheme wrote it (an object
/// with a `key` and `rollouts`), not a header cut short.
fn is_first_scheme_entry(line: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(line).is_ok_and(|v| {
        v.get("key").is_some_and(serde_json::Value::is_string) && v.get("rollouts").is_some()
    })
}

/// The session id of a path rollover names (`…/rollout-TIME-UUID.jsonl`).
pub(crate) fn session_id_of(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next()?;
    let stem = name.strip_suffix(".jsonl")?;
    let id = stem.get(stem.len().checked_sub(36)?..)?;
    (id.len() == 36 && uuid::Uuid::parse_str(id).is_ok()).then_some(id)
}

fn corrupt(home: &Home, state: &Dir, name: &str, line: u64, problem: &str) -> OutputError {
    let path = state.path_of(name).display().to_string();
    let manifest = home.state_file(MANIFEST).display().to_string();
    let fix = if name == JOURNAL {
        format!("Move the journal aside (`mv {path} {path}.bad`) and run again: the files it recorded are read again, no session is lost")
    } else if state.contains(PREV) {
        let prev = home.state_file(PREV).display().to_string();
        format!("The manifest of the run before is kept at {prev}: look at both, then copy it over the manifest (`cp {prev} {manifest}`) and run again: the files converted since are read again, no session is lost")
    } else {
        format!("Repair {manifest} by hand (one JSON object a line) or restore it from a backup, then run again; no session is removed meanwhile")
    };
    OutputError::CorruptManifest {
        path,
        line,
        problem: problem.to_string(),
        fix,
    }
}

/// One JSON line of the manifest or its journal.
fn line<T: Serialize>(out: &mut dyn Write, value: &T) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}
