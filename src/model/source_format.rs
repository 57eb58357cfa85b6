//! A conversation's source format, as a value: the name `--from` takes and the audit writes,
//! and what the format's ids promise. Each reader declares its own format beside its reader
//! (`impl SourceFormat { pub const SHAREGPT: SourceFormat = ... }` in `input::sharegpt`); the
//! type is here because a [`Transcript`](super::transcript::Transcript) says which format it
//! was read from and the converter, which knows no reader, keys session ids by it.

use std::fmt;

use serde::{Serialize, Serializer};

/// A source format, compared as a value (never by its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceFormat {
    name: &'static str,
    global_ids: bool,
    session_ids: bool,
}

impl SourceFormat {
    /// The format named `name`; for a reader's module to declare its own.
    pub const fn named(name: &'static str) -> SourceFormat {
        SourceFormat {
            name,
            global_ids: false,
            session_ids: false,
        }
    }

    /// The same format, whose conversation ids are unique beyond one file (a Claude Code
    /// `sessionId`, a ChatGPT conversation `id`): they name a conversation wherever it is
    /// found, so its session id is made from them.
    pub const fn with_global_ids(self) -> SourceFormat {
        SourceFormat {
            global_ids: true,
            ..self
        }
    }

    /// The same format, whose conversation ids are Codex session ids (a Codex rollout's): a
    /// conversation keeps its id as its session id, so that a session read again, from
    /// another home or folder, is the same session and never a second one.
    pub const fn with_session_ids(self) -> SourceFormat {
        SourceFormat {
            session_ids: true,
            ..self
        }
    }

    /// Whether a conversation's id is its session id.
    pub const fn keeps_session_ids(self) -> bool {
        self.session_ids
    }

    /// The name `--from` takes and the audit writes.
    pub const fn name(self) -> &'static str {
        self.name
    }

    /// Whether the format's conversation ids are unique beyond one file.
    pub const fn has_global_ids(self) -> bool {
        self.global_ids
    }
}

impl fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl Serialize for SourceFormat {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name)
    }
}
