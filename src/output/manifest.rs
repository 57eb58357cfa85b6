//! The manifest: the cumulative state of a Codex home that rollover writes into, so scheduled
//! runs are incremental and never lose, clobber or silently replace a session.
//!
//! `OUT/rollover/manifest` starts with a header line (`{"manifest":2}`: the scheme of session
//! ids, [`crate::model::identity`]), then holds one JSON line per input file, sorted by its
//! key (the file's absolute path, or `stdin:NAME` for a stream): its size, mtime and content
//! digest, how many records it held, the fingerprints of the rules and of the options that
//! converted it (each run's `summary.json` has its own, so a change names the run), every rollout it produced with the digest of the bytes
//! written, and the sessions kept pending (changed by Codex since, while the source has newer
//! data). Then one line per orphan: a session whose record is gone from its file, or whose
//! file is gone, kept (copy semantics) and remembered, so that it is never written again
//! without `--force` and `--prune` can find it.
//!
//! While a run goes, each input file that is completely on disk (every rollout under its final
//! name) is appended to `manifest.journal`, with the orphans and prunings it caused; a clean
//! end folds the journal into the manifest (written atomically) and removes it. A journal
//! found at start is the trace of a killed run: its complete lines count, a cut last line does
//! not. Each shard of a sharded run keeps its own manifest in its state folder, of the files
//! (or ranges) it converted, so one shard re-runs incrementally without the others.
//!
//! A manifest without the header was written by the scheme before (ids from paths and
//! positions): loading it is refused ([`OutputError::OldManifest`]) with what to do.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::home::{open_error, private_file, write_error, Home};
pub use super::rollouts::Rollouts;
use super::OutputError;
use std::os::unix::fs::OpenOptionsExt;

pub const MANIFEST: &str = "manifest";
pub const JOURNAL: &str = "manifest.journal";
/// The scheme of session ids the manifest's sessions were written with.
pub const SCHEME: u32 = 2;

/// An input file as converted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// The file's origin: its absolute path (lossless: bytes that are not UTF-8 escaped as
    /// `\xNN`), or `stdin:NAME` for standard input and other streams.
    pub key: String,
    /// The file as the reports name it.
    pub name: String,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    /// xxh3-128 of the file's bytes on disk, hex.
    pub digest: String,
    pub records: u64,
    /// Fingerprint of the resolved rule set that converted it.
    pub rules: String,
    /// Fingerprint of the options that change output (`--cwd`, `--format`, ...).
    pub options: String,
    /// For `--format codex`, the rollouts; for `--format responses`, the one output file
    /// (held compact, written as a list of `{"path","digest"}`: [`Rollouts`]).
    pub rollouts: Rollouts,
    /// Rollouts kept because Codex changed them since, while this file holds newer data for
    /// them: the next run reads the file again and says so; `--force` replaces them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
    /// The output format, when not Codex rollouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// A rollout written for an input file, with the digest of the bytes written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutEntry {
    pub path: String,
    pub digest: String,
}

/// A session whose record is gone from its source: kept as written, and remembered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Orphan {
    pub orphan: RolloutEntry,
    /// The key of the file it was read from.
    pub from: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    manifest: u32,
}

/// A session removed by `--prune` (a journal line).
#[derive(Debug, Serialize, Deserialize)]
struct Pruned {
    pruned: String,
}

/// A file's entry dropped from the manifest by `--prune` once its sessions are gone.
#[derive(Debug, Serialize, Deserialize)]
struct Forgotten {
    forgotten: String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Line {
    Header(Header),
    Orphan(Orphan),
    Pruned(Pruned),
    Forgotten(Forgotten),
    File(Box<FileEntry>),
}

/// The manifest of a home, as loaded.
#[derive(Debug, Default)]
pub struct Manifest {
    pub files: BTreeMap<String, FileEntry>,
    /// Sessions whose record is gone, by path.
    pub orphans: BTreeMap<String, Orphan>,
    /// A journal was found: the last run was killed before it finished.
    pub recovered: bool,
    journal: Option<File>,
    /// Which files list each session (kept with `files`), so that asking who else holds a
    /// session costs a look-up, not a scan of the manifest.
    listers: Listers,
}

/// Session path → the files that list it. A path is held by its xxh3-128 digest and a file by
/// its number, not as strings: this map has an entry per session of the home, and with the
/// strings it was ~220 bytes a session (14 MB of a run writing 64,000), now ~40.
#[derive(Debug, Default)]
struct Listers {
    /// The first file that lists a path: one, for almost every session.
    first: HashMap<u128, u32>,
    /// The others, for a path more than one file lists (a renamed or duplicated input).
    more: HashMap<u128, Vec<u32>>,
    /// Files by number, and numbers by file key.
    keys: Vec<String>,
    numbers: HashMap<String, u32>,
}

impl Listers {
    fn path(path: &str) -> u128 {
        super::rollouts::path_key(path)
    }

    fn number(&mut self, key: &str) -> u32 {
        if let Some(&n) = self.numbers.get(key) {
            return n;
        }
        let n = u32::try_from(self.keys.len()).unwrap_or(u32::MAX);
        self.keys.push(key.to_string());
        self.numbers.insert(key.to_string(), n);
        n
    }

    /// The keys of the files that list `path`.
    fn of(&self, path: &str) -> impl Iterator<Item = &str> {
        self.of_key(Listers::path(path))
    }

    /// The keys of the files that list the path of key `path` ([`Listers::path`]).
    fn of_key(&self, path: u128) -> impl Iterator<Item = &str> {
        let first = self.first.get(&path).into_iter();
        let more = self.more.get(&path).into_iter().flatten();
        first
            .chain(more)
            .filter_map(|&n| self.keys.get(n as usize).map(String::as_str))
    }

    fn add(&mut self, path: u128, key: &str) {
        let n = self.number(key);
        match self.first.get(&path) {
            None => {
                self.first.insert(path, n);
            }
            Some(&first) if first == n => {}
            Some(_) => {
                let more = self.more.entry(path).or_default();
                if !more.contains(&n) {
                    more.push(n);
                }
            }
        }
    }

    fn remove(&mut self, path: u128, key: &str) {
        let Some(&n) = self.numbers.get(key) else {
            return;
        };
        let more = self.more.get_mut(&path);
        if self.first.get(&path) == Some(&n) {
            match more.and_then(Vec::pop) {
                Some(next) => self.first.insert(path, next),
                None => self.first.remove(&path),
            };
        } else if let Some(more) = more {
            more.retain(|&m| m != n);
        }
        if self.more.get(&path).is_some_and(Vec::is_empty) {
            self.more.remove(&path);
        }
    }
}

impl Manifest {
    /// Reads the manifest and any journal a killed run left. A manifest of the scheme
    /// before is refused.
    pub fn load(home: &Home) -> Result<Manifest, OutputError> {
        let mut manifest = Manifest::default();
        for name in [MANIFEST, JOURNAL] {
            let path = home.state_file(name);
            let opened = OpenOptions::new()
                .read(true)
                .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                .open(&path);
            let file = match opened {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(open_error(&path, e)),
            };
            manifest.recovered |= name == JOURNAL;
            let mut first = true;
            for line in BufReader::new(file).split(b'\n') {
                let line = line.map_err(|e| write_error(&path, e))?;
                if line.is_empty() {
                    continue;
                }
                // A line cut by a kill does not parse: that file was not recorded as done.
                let parsed = serde_json::from_slice::<Line>(&line).ok();
                let current = matches!(&parsed, Some(Line::Header(h)) if h.manifest == SCHEME);
                if first && name == MANIFEST && !current {
                    return Err(OutputError::OldManifest {
                        path: home.root.display().to_string(),
                        state: home.state_dir().display().to_string(),
                    });
                }
                first = false;
                match parsed {
                    Some(Line::Header(_)) | None => {}
                    Some(Line::Orphan(orphan)) => {
                        manifest.orphans.insert(orphan.orphan.path.clone(), orphan);
                    }
                    Some(Line::Pruned(pruned)) => {
                        manifest.orphans.remove(&pruned.pruned);
                    }
                    Some(Line::Forgotten(forgotten)) => {
                        manifest.unlist(&forgotten.forgotten);
                        manifest.files.remove(&forgotten.forgotten);
                    }
                    Some(Line::File(entry)) => manifest.insert(*entry),
                }
            }
        }
        Ok(manifest)
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
            // changed (issue 27: a rename, then two rule changes, left the first rules'
            // session behind).
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
    pub fn sessions(&self) -> usize {
        let mut paths = std::collections::HashSet::new();
        for file in self.files.values() {
            file.rollouts.each(|path, _| {
                paths.insert(path.to_string());
            });
        }
        paths.extend(self.orphans.keys().cloned());
        paths.len()
    }

    /// Whether a file other than `origin` lists the output at `path` (walked or not).
    pub fn listed_by_other(&self, path: &str, origin: &str) -> bool {
        self.listers.of(path).any(|k| k != origin)
    }

    /// Whether a file of `walked` other than `except` still lists the session at `path`.
    pub fn listed_elsewhere(
        &self,
        path: &str,
        except: &str,
        walked: &std::collections::HashSet<String>,
    ) -> bool {
        self.listers
            .of(path)
            .any(|k| k != except && walked.contains(k))
    }

    fn append<T: Serialize>(&mut self, home: &Home, line: &T) -> Result<(), OutputError> {
        let path = home.state_file(JOURNAL);
        if self.journal.is_none() {
            let file = private_file(OpenOptions::new().create(true).append(true), &path)?;
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

    /// Remembers a session whose record is gone from `from` (kept on disk as it is).
    pub fn orphan(
        &mut self,
        home: &Home,
        rollout: RolloutEntry,
        from: &str,
    ) -> Result<(), OutputError> {
        let orphan = Orphan {
            orphan: rollout,
            from: from.to_string(),
        };
        self.append(home, &orphan)?;
        self.orphans.insert(orphan.orphan.path.clone(), orphan);
        Ok(())
    }

    /// Forgets a session `--prune` removed.
    pub fn pruned(&mut self, home: &Home, path: &str) -> Result<(), OutputError> {
        self.append(
            home,
            &Pruned {
                pruned: path.to_string(),
            },
        )?;
        self.orphans.remove(path);
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
        Ok(())
    }

    /// Writes the whole manifest, sorted, atomically, and removes the journal.
    pub fn save(&mut self, home: &Home) -> Result<(), OutputError> {
        // Streamed to the file: built whole, the manifest of a large archive was the run's
        // peak of memory (16 MB for 64,000 sessions, on top of the entries themselves).
        home.write_state_atomic_with(MANIFEST, |out| {
            line(out, &Header { manifest: SCHEME })?;
            for entry in self.files.values() {
                line(out, entry)?;
            }
            for orphan in self.orphans.values() {
                line(out, orphan)?;
            }
            Ok(())
        })?;
        self.journal = None;
        let journal = home.state_file(JOURNAL);
        match fs::remove_file(&journal) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(write_error(&journal, e)),
        }
    }
}

/// One JSON line of the manifest or its journal.
fn line<T: Serialize>(out: &mut dyn Write, value: &T) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}

/// The digest of some bytes, as the manifest writes it.
pub fn digest(bytes: &[u8]) -> String {
    crate::model::identity::hex128(crate::model::hash::xxh3_128(bytes))
}

/// The digest of a file's bytes, read in blocks.
pub fn file_digest(path: &Path) -> std::io::Result<String> {
    file_digest_unless(path, &std::sync::atomic::AtomicUsize::new(0))
}

/// [`file_digest`], given up with an error once `stop` holds a signal (a run's pre-pass).
pub fn file_digest_unless(
    path: &Path,
    stop: &std::sync::atomic::AtomicUsize,
) -> std::io::Result<String> {
    let mut hasher = crate::model::hash::Xxh3::new();
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path)?);
    loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) != 0 {
            return Err(std::io::Error::other("the run was asked to stop"));
        }
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            break;
        }
        hasher.update(buffer);
        let n = buffer.len();
        reader.consume(n);
    }
    Ok(format!("{:032x}", hasher.digest128()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(listers: &Listers, path: &str) -> Vec<String> {
        let mut keys: Vec<String> = listers.of(path).map(str::to_string).collect();
        keys.sort();
        keys
    }

    #[test]
    fn listers_answer_who_lists_a_session_as_files_come_and_go() {
        let mut listers = Listers::default();
        listers.add(Listers::path("s/a.jsonl"), "/in/one");
        listers.add(Listers::path("s/a.jsonl"), "/in/one");
        listers.add(Listers::path("s/b.jsonl"), "/in/one");
        assert_eq!(of(&listers, "s/a.jsonl"), ["/in/one"]);
        // A renamed input lists the same sessions: both files are listers.
        listers.add(Listers::path("s/a.jsonl"), "/in/renamed");
        listers.add(Listers::path("s/a.jsonl"), "/in/third");
        assert_eq!(
            of(&listers, "s/a.jsonl"),
            ["/in/one", "/in/renamed", "/in/third"]
        );
        // The first lister leaves: the others stay, whichever was first.
        listers.remove(Listers::path("s/a.jsonl"), "/in/one");
        assert_eq!(of(&listers, "s/a.jsonl"), ["/in/renamed", "/in/third"]);
        listers.remove(Listers::path("s/a.jsonl"), "/in/third");
        listers.remove(Listers::path("s/a.jsonl"), "/in/unknown");
        assert_eq!(of(&listers, "s/a.jsonl"), ["/in/renamed"]);
        listers.remove(Listers::path("s/a.jsonl"), "/in/renamed");
        assert!(of(&listers, "s/a.jsonl").is_empty());
        assert!(listers.first.len() == 1 && listers.more.is_empty());
        assert_eq!(of(&listers, "s/b.jsonl"), ["/in/one"]);
        assert!(of(&listers, "s/never.jsonl").is_empty());
    }
}
