//! Thread names: `$CODEX_HOME/session_index.jsonl`, where Codex 0.169 keeps the name of each
//! thread (`{"id", "thread_name", "updated_at"}` lines, append-only, the last line for an id
//! wins; codex-rs `rollout/src/session_index.rs`). A source's title (a Claude Code session's
//! `custom-title`/`ai-title`/`summary`, a ChatGPT conversation's `title`) is written there.
//!
//! In: the converted conversations' ids, titles and start times. Out: the lines appended, only
//! for ids whose last name in the file differs, so running again adds nothing. Fails with an
//! [`OutputError`] when the file cannot be read or written.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;

use serde::{Deserialize, Serialize};

use super::home::{private_file, write_error};
use super::{Home, OutputError};

/// The file's name in the Codex home.
pub(crate) const SESSION_INDEX: &str = "session_index.jsonl";

/// One line of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IndexEntry {
    pub id: String,
    pub thread_name: String,
    /// RFC 3339, as Codex writes it: here the session's start, so output stays deterministic.
    pub updated_at: String,
}

/// Appends the entries whose name is not already the last one for their id; returns how many.
pub(crate) fn append(home: &Home, entries: &[IndexEntry]) -> Result<usize, OutputError> {
    if entries.is_empty() {
        return Ok(0);
    }
    let path = home.root.join(SESSION_INDEX);
    let mut latest: HashMap<String, String> = HashMap::new();
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            for line in text.lines() {
                // Codex skips lines it cannot read; so do we.
                if let Ok(entry) = serde_json::from_str::<IndexEntry>(line) {
                    latest.insert(entry.id, entry.thread_name);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(write_error(&path, e)),
    }
    let mut out = Vec::new();
    let mut added = 0;
    for entry in entries {
        if latest.get(&entry.id) == Some(&entry.thread_name) {
            continue;
        }
        latest.insert(entry.id.clone(), entry.thread_name.clone());
        serde_json::to_writer(&mut out, entry).map_err(|e| write_error(&path, e.into()))?;
        out.push(b'\n');
        added += 1;
    }
    if added > 0 {
        let mut file = private_file(OpenOptions::new().create(true).append(true), &path)?;
        file.write_all(&out).map_err(|e| write_error(&path, e))?;
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_appended_once() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        let entry = IndexEntry {
            id: "0199a213-81c0-7800-8aa1-bbab2a035a53".into(),
            thread_name: "Fix the parser".into(),
            updated_at: "2026-02-10T10:00:00.000Z".into(),
        };
        assert_eq!(append(&home, std::slice::from_ref(&entry)).unwrap(), 1);
        assert_eq!(append(&home, std::slice::from_ref(&entry)).unwrap(), 0);
        let text = std::fs::read_to_string(dir.path().join(SESSION_INDEX)).unwrap();
        assert_eq!(
            text,
            "{\"id\":\"0199a213-81c0-7800-8aa1-bbab2a035a53\",\"thread_name\":\"Fix the parser\",\"updated_at\":\"2026-02-10T10:00:00.000Z\"}\n"
        );
    }
}
