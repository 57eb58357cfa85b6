//! What a shard last saw of the Batch API results files that are not its own.
//!
//! A results file joins requests anywhere in the archive, so a shard reads all of its files
//! again when any results file of the walk changed since its last run: the change of its own
//! results files is in its manifest; of the others, only here.
//! `OUT/rollover/shards/KKKK-of-NNNN/batch-results` holds one JSON line per such file (key,
//! size, mtime, content digest) as the shard's last run saw it, written atomically at the end
//! of a run (not a dry run). A file it does not list, or a state that cannot be read, counts
//! as changed: the shard then reads everything, which is never wrong, only slower.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::home::{write_error, Home};
use super::manifest::file_digest;
use super::OutputError;

pub(crate) const RESULTS_SEEN: &str = "batch-results";

/// A results file as a shard saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SeenFile {
    pub key: String,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    /// xxh3-128 of the file's bytes on disk, hex.
    pub digest: String,
}

/// The results files seen by the last run, and those this run sees.
#[derive(Debug, Default)]
pub(crate) struct ResultsSeen {
    before: BTreeMap<String, SeenFile>,
    now: BTreeMap<String, SeenFile>,
}

impl ResultsSeen {
    pub(crate) fn load(home: &Home) -> Result<ResultsSeen, OutputError> {
        let mut seen = ResultsSeen::default();
        let path = home.state_file(RESULTS_SEEN);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(seen),
            Err(e) => return Err(write_error(&path, e)),
        };
        for line in BufReader::new(file).split(b'\n') {
            let line = line.map_err(|e| write_error(&path, e))?;
            // A line that does not parse names no file: that file counts as changed.
            if let Ok(entry) = serde_json::from_slice::<SeenFile>(&line) {
                seen.before.insert(entry.key.clone(), entry);
            }
        }
        Ok(seen)
    }

    /// Whether the results file keyed `key` changed since the last run: not when its size and
    /// mtime are those seen, or its content is (a file touched, not edited). What it is now is
    /// kept for [`ResultsSeen::save`]; a file that cannot be read counts as changed.
    pub(crate) fn changed(&mut self, key: &str, size: u64, mtime_ns: u64, path: &Path) -> bool {
        let before = self.before.get(key);
        if let Some(before) = before.filter(|b| b.size == size && b.mtime_ns == mtime_ns) {
            self.now.insert(key.to_string(), before.clone());
            return false;
        }
        let Ok(digest) = file_digest(path) else {
            return true;
        };
        let same = before.is_some_and(|b| b.digest == digest);
        let entry = SeenFile {
            key: key.to_string(),
            size,
            mtime_ns,
            digest,
        };
        self.now.insert(key.to_string(), entry);
        !same
    }

    /// Writes what this run saw, sorted, atomically (nothing, when no run saw a results file).
    pub(crate) fn save(&self, home: &Home) -> Result<(), OutputError> {
        if self.now.is_empty() && self.before.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        for entry in self.now.values() {
            serde_json::to_writer(&mut bytes, entry)
                .map_err(|e| write_error(&home.state_file(RESULTS_SEEN), e.into()))?;
            bytes.push(b'\n');
        }
        home.write_state_atomic(RESULTS_SEEN, &bytes)?;
        Ok(())
    }
}
