//! Output: the Codex home (rollouts written atomically, or the Responses bodies' files) and the run's own files beside it
//! (`rollover/quarantine.jsonl`, `rollover/conversations.jsonl`, `rollover/summary.json`).
//!
//! In: rollout bytes with their relative path; quarantined records with their location.
//! The pipeline writes through an [`Output`] chosen once per run ([`sink`]): the Codex home
//! or the Responses bodies' files, each with the collector's side, a [`Sink`].
//! Fails with an [`OutputError`] naming the path; those are fatal to the run (an unwritable
//! output is not a per-record problem).

/// The buffer of a file written line by line through a run (the audit's `conversations.jsonl`
/// and `quarantine.jsonl`; a Responses output file is written in chunks of 1 MiB,
/// [`bodies`]): with std's 8 KiB, writing the small corpus's 211 MB of bodies took ~26,000
/// `write` calls, each a lock and a page-cache walk in the kernel, on the collector, a serial
/// stage.
pub const LINE_BUFFER: usize = 256 << 10;

pub(crate) mod bodies;
pub(crate) mod dir;
pub(crate) mod failpoint;
pub(crate) mod guard;
pub(crate) mod holders;
pub(crate) mod home;
pub(crate) mod kept_rules;
pub(crate) mod lock;
pub(crate) mod manifest;
pub(crate) mod quarantine;
pub(crate) mod results_seen;
pub(crate) mod rollouts;
pub(crate) mod session_index;
pub(crate) mod sink;

pub use guard::{Guard, Placed, Placement, Removal};
pub use home::Home;
pub use lock::RunLock;
pub use manifest::Manifest;
pub use quarantine::QuarantineEntry;
pub use sink::{for_format, Output, OutputKind, Sink};

use thiserror::Error;

#[derive(Debug, Error)]
pub enum OutputError {
    // The cause follows the message once, from the error chain (`{source}` is not repeated).
    #[error("cannot write {path} (check that the output folder is writable and has space)")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the output {path} is in use by another rollover run (pid {pid}); wait for it to end, or stop it (--wait SECONDS waits for it)")]
    Locked { path: String, pid: u32 },
    #[error("{path} was written by an earlier rollover, whose session ids depended on file paths and record positions: converting into this home would write every conversation again under a new id. Convert into a new home (`rollover convert INPUT... --out NEW_HOME`), check it with `rollover validate`, then move the old home aside; its sessions stay as they are")]
    OldManifest { path: String },
    /// The manifest or its journal does not read as rollover writes it: refused, never
    /// guessed (a guess could bring back sessions the user deleted, or write them twice).
    #[error("manifest corrupt: {path}{}: {problem}; nothing was changed. {fix}", line_of(*line))]
    CorruptManifest {
        path: String,
        line: u64,
        problem: String,
        /// What to do, naming `manifest.prev` when it is there.
        fix: String,
    },
    /// A state file or a session is a symlink: rollover never reads or writes its state, nor
    /// replaces a session, through one (it may have been planted to redirect a write).
    #[error("{path} is a symlink: rollover does not read or write its state or a session through a symlink (one may have been planted to redirect a write); remove it (or put the real file there) and run again")]
    Symlink { path: String },
    /// A folder sessions are written into is a symlink, and the run has no
    /// `--write-through-links`.
    #[error("{path} is a symlink to {target}: rollover writes sessions through a symlinked folder only with --write-through-links (a planted one would redirect writes outside the output); pass it if you moved the folder there yourself")]
    LinkedFolder { path: String, target: String },
    #[error("the run numbers of {path} are used up (a run folder numbered {last} is there): remove or renumber the folders in {path}")]
    RunsExhausted { path: String, last: u32 },
    /// `--wait` ran out (or a signal ended the wait) with the lock still held.
    #[error("the output {path} is still in use by another rollover run (pid {pid}) after waiting {waited} (--wait); wait longer, or stop that run")]
    StillLocked {
        path: String,
        pid: u32,
        waited: String,
    },
}

fn line_of(line: u64) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(" line {line}")
    }
}
