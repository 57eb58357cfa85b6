//! The lines of the manifest and its journal, as serde reads and writes them: a header, one
//! entry per input file, orphans, session versions, and the steps of a prune.

use serde::{Deserialize, Serialize};

use super::Rollouts;

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
    /// Status change time (nanoseconds) and inode: a content change that kept the size and
    /// put the mtime back (`cp -p`, `tar x`) still moves these.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ctime_ns: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ino: u64,
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
    /// What reading the file found that a report must show while it is not read again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub findings: Option<Findings>,
    /// Its sessions were named by scheme 2 (a record's id from its bytes): reading it again
    /// keeps each session's id, and records an alias for it ([`SessionRecord::alias`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub legacy_ids: bool,
}

/// What reading a file found: quarantined records and damage, counted, the first
/// [`FINDINGS_LISTED`](super::FINDINGS_LISTED) listed, with the run whose `quarantine.jsonl` holds the records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Findings {
    pub run: u32,
    pub quarantined: u64,
    pub damaged: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listed: Vec<Finding>,
}

/// One quarantined record or damage of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub line: u64,
    pub byte_offset: u64,
    /// The quarantine class (`invalid_json`, ...) or `damaged`.
    pub class: String,
    pub reason: String,
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
    /// The rules fingerprint of the rule set that wrote it (empty: left before the manifest
    /// recorded it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rules: String,
}

/// What the manifest knows of one session beyond its file's list: the version placed (for a
/// conversation that can come again with other content: a source id, a log's chain) and the
/// file it came from; or the identity whose session kept the id scheme 2 gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The session's path in the home.
    pub session: String,
    /// The key of the file whose version was placed.
    pub from: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
    /// The digest (hex) of a conversation identity whose session keeps its scheme-2 id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
}

/// A version of a conversation: its source's own time (ms), its message count, and the
/// digest of its messages (hex). The model's [`crate::model::version::Version`] as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<i64>,
    pub messages: u64,
    pub content: String,
}

impl Version {
    pub fn of(version: &crate::model::version::Version) -> Version {
        Version {
            time: version.time_ms,
            messages: version.messages,
            content: crate::model::identity::hex128(version.content),
        }
    }

    pub fn model(&self) -> crate::model::version::Version {
        crate::model::version::Version {
            time_ms: self.time,
            messages: self.messages,
            content: u128::from_str_radix(&self.content, 16).unwrap_or_default(),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Header {
    pub(super) manifest: u32,
}

/// A session removed by `--prune` (a journal line), after its copy was kept.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Pruned {
    pub(super) pruned: String,
}

/// A file's entry dropped from the manifest by `--prune` once its sessions are gone.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Forgotten {
    pub(super) forgotten: String,
}

/// What a `--prune` will remove, journalled before it removes anything: the sessions, and the
/// files it forgets once they are handled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrunePlan {
    pub run: u32,
    pub sessions: Vec<RolloutEntry>,
    pub files: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Pruning {
    pub(super) pruning: PrunePlan,
}

/// A prune finished: every session of its plan removed or kept, every file forgotten.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct PruneDone {
    pub(super) prune_done: u32,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum Line {
    Header(Header),
    Orphan(Orphan),
    Pruned(Pruned),
    Forgotten(Forgotten),
    Pruning(Pruning),
    PruneDone(PruneDone),
    Session(SessionRecord),
    File(Box<FileEntry>),
}
