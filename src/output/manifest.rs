//! The manifest: the cumulative state of a Codex home that rollover writes into, so scheduled
//! runs are incremental and never clobber a session a user resumed since.
//!
//! `OUT/rollover/manifest` holds one JSON line per input file, sorted by key: its size, mtime
//! and content digest, how many records it held, and every rollout it produced with the digest
//! of the bytes written. While a run goes, each input file that is completely on disk (every
//! rollout under its final name) is appended to `manifest.journal`; a clean end folds the
//! journal into the manifest (written atomically) and removes it. A journal found at start is
//! the trace of a killed run: its complete lines count, a cut last line does not. Each shard
//! of a sharded run keeps its own manifest in its state folder, of the files (or ranges) it
//! converted, so one shard re-runs incrementally without the others.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::home::{private_file, write_error, Home};
use super::OutputError;

pub const MANIFEST: &str = "manifest";
pub const JOURNAL: &str = "manifest.journal";

/// An input file as converted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub key: String,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    /// xxh3-128 of the file's bytes on disk, hex.
    pub digest: String,
    pub records: u64,
    /// For `--format codex`, the rollouts; for `--format responses`, the one output file.
    pub rollouts: Vec<RolloutEntry>,
    /// The output format, when not Codex rollouts (absent for them, as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// A rollout written for an input file, with the digest of the bytes written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutEntry {
    pub path: String,
    pub digest: String,
}

/// The manifest of a home, as loaded.
#[derive(Debug, Default)]
pub struct Manifest {
    pub files: BTreeMap<String, FileEntry>,
    /// A journal was found: the last run was killed before it finished.
    pub recovered: bool,
    journal: Option<File>,
}

impl Manifest {
    /// Reads the manifest and any journal a killed run left.
    pub fn load(home: &Home) -> Result<Manifest, OutputError> {
        let mut manifest = Manifest::default();
        for name in [MANIFEST, JOURNAL] {
            let path = home.state_file(name);
            let file = match File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(write_error(&path, e)),
            };
            manifest.recovered |= name == JOURNAL;
            for line in BufReader::new(file).split(b'\n') {
                let line = line.map_err(|e| write_error(&path, e))?;
                // A line cut by a kill does not parse: that file was not recorded as done.
                if let Ok(entry) = serde_json::from_slice::<FileEntry>(&line) {
                    manifest.files.insert(entry.key.clone(), entry);
                }
            }
        }
        Ok(manifest)
    }

    /// Every rollout the manifest knows, by path, with the digest written.
    pub fn rollout_digests(&self) -> HashMap<String, String> {
        self.files
            .values()
            .flat_map(|f| f.rollouts.iter())
            .map(|r| (r.path.clone(), r.digest.clone()))
            .collect()
    }

    /// Records a file as done: appended to the journal at once (so a kill after this point
    /// keeps it), and kept for the manifest written at the end.
    pub fn record(&mut self, home: &Home, entry: FileEntry) -> Result<(), OutputError> {
        let path = home.state_file(JOURNAL);
        if self.journal.is_none() {
            let file = private_file(OpenOptions::new().create(true).append(true), &path)?;
            self.journal = Some(file);
        }
        if let Some(journal) = self.journal.as_mut() {
            let mut line = serde_json::to_vec(&entry).map_err(|e| write_error(&path, e.into()))?;
            line.push(b'\n');
            journal
                .write_all(&line)
                .map_err(|e| write_error(&path, e))?;
            if home.durable {
                journal.sync_data().map_err(|e| write_error(&path, e))?;
            }
        }
        self.files.insert(entry.key.clone(), entry);
        Ok(())
    }

    /// Writes the whole manifest, sorted, atomically, and removes the journal.
    pub fn save(&mut self, home: &Home) -> Result<(), OutputError> {
        let mut bytes = Vec::new();
        for entry in self.files.values() {
            serde_json::to_writer(&mut bytes, entry)
                .map_err(|e| write_error(&home.state_file(MANIFEST), e.into()))?;
            bytes.push(b'\n');
        }
        home.write_state_atomic(MANIFEST, &bytes)?;
        self.journal = None;
        let journal = home.state_file(JOURNAL);
        match fs::remove_file(&journal) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(write_error(&journal, e)),
        }
    }
}

/// The digest of some bytes, as the manifest writes it.
pub fn digest(bytes: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(bytes))
}

/// The digest of a file's bytes, read in blocks.
pub fn file_digest(path: &Path) -> std::io::Result<String> {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path)?);
    loop {
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
