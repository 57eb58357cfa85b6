//! The generations of Codex rollouts, told apart by their shape (codex-target.md §10): what
//! the Codex reader detects a file by, and what `validate` names a file it cannot check as a
//! legacy rollout.
//!
//! - **pre-envelope** (mid-2025): a header line `{"id", "timestamp", "instructions", "git"?}`
//!   and nothing else, then `{"record_type":"state"}` lines and bare Responses items. The
//!   header is recognised as Codex's own doctor recognises it
//!   (`codex-rs/cli/src/doctor/legacy_rollout.rs`): exactly those keys, a UUID `id`, a
//!   non-empty `timestamp`, `instructions` present and a string or `null`, `git` absent, `null`
//!   or an object.
//! - **legacy** envelope: `{"timestamp", "type", "payload"}` lines, `session_meta` first.
//! - **paginated** (Codex 0.153 and later): the same envelope with an `ordinal` on every line,
//!   contiguous from 0, and `history_mode: "paginated"` in the session meta.

use serde_json::{Map, Value};

use super::wire::{key, line, tag};

/// The key of a paginated line's position.
pub(crate) const ORDINAL: &str = "ordinal";
/// The session meta's key naming its generation, and the value of a paginated one.
pub(crate) const HISTORY_MODE: &str = "history_mode";
pub(crate) const PAGINATED: &str = "paginated";
/// A pre-envelope file's state lines: `{"record_type":"state"}`.
pub(crate) const RECORD_TYPE: &str = "record_type";

/// The keys a pre-envelope header may have.
const HEADER_KEYS: [&str; 4] = [key::GIT, key::ID, "instructions", key::TIMESTAMP];

/// A generation of Codex rollouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Generation {
    PreEnvelope,
    Legacy,
    Paginated,
}

impl Generation {
    /// The generation's name, as `validate` and the audit write it.
    pub fn name(self) -> &'static str {
        match self {
            Generation::PreEnvelope => "pre-envelope",
            Generation::Legacy => "legacy",
            Generation::Paginated => "paginated",
        }
    }

    /// What it is, for a user.
    pub fn describe(self) -> &'static str {
        match self {
            Generation::PreEnvelope => {
                "a pre-envelope Codex rollout (mid-2025, before session_meta), which current Codex neither resumes nor migrates"
            }
            Generation::Legacy => "a Codex rollout in the legacy envelope form",
            Generation::Paginated => "a paginated Codex rollout (Codex 0.153 and later)",
        }
    }

    /// The generation of a rollout whose first line is `first`; `None` when it is no
    /// rollout's first line.
    pub fn of_first_line(first: &Value) -> Option<Generation> {
        let object = first.as_object()?;
        if is_pre_envelope_header(object) {
            return Some(Generation::PreEnvelope);
        }
        if !is_envelope(object) {
            return None;
        }
        let paginated_meta = object.get(line::TYPE).and_then(Value::as_str)
            == Some(tag::SESSION_META)
            && object
                .get(line::PAYLOAD)
                .and_then(|p| p.get(HISTORY_MODE))
                .and_then(Value::as_str)
                == Some(PAGINATED);
        if object.contains_key(ORDINAL) || paginated_meta {
            Some(Generation::Paginated)
        } else {
            Some(Generation::Legacy)
        }
    }
}

/// A rollout line's envelope: a string `type` and an object `payload`.
pub(crate) fn is_envelope(object: &Map<String, Value>) -> bool {
    object.get(line::TYPE).is_some_and(Value::is_string)
        && object.get(line::PAYLOAD).is_some_and(Value::is_object)
}

/// A pre-envelope file's first line, as Codex's doctor recognises it (the file name's UUID
/// aside, which the caller compares when it has a name).
pub(crate) fn is_pre_envelope_header(object: &Map<String, Value>) -> bool {
    if object.keys().any(|k| !HEADER_KEYS.contains(&k.as_str())) {
        return false;
    }
    let id_ok = object
        .get(key::ID)
        .and_then(Value::as_str)
        .is_some_and(is_uuid);
    let timestamp_ok = object
        .get(key::TIMESTAMP)
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    let instructions_ok = matches!(
        object.get("instructions"),
        Some(Value::Null | Value::String(_))
    );
    let git_ok = matches!(
        object.get(key::GIT),
        None | Some(Value::Null | Value::Object(_))
    );
    id_ok && timestamp_ok && instructions_ok && git_ok
}

/// A UUID in its hyphenated form, any case (`8-4-4-4-12` hex digits).
pub(crate) fn is_uuid(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "00000000-0000-0000-0000-000000000001";

    /// The headers of Codex's own doctor tests (`legacy_rollout_tests.rs`): the historical
    /// shape and its variants are recognised, everything else is not.
    #[test]
    fn the_pre_envelope_header_is_the_doctors() {
        let of = |v: Value| Generation::of_first_line(&v);
        let pre = Some(Generation::PreEnvelope);
        assert_eq!(
            of(json!({"id": ID, "timestamp": "2025-08-13T15:22:56.917Z", "instructions": null})),
            pre
        );
        assert_eq!(
            of(
                json!({"id": ID, "timestamp": "2025-08-13T15:22:56.917Z", "instructions": "be concise", "git": {"branch": "main"}})
            ),
            pre
        );
        for header in [
            json!({"id": ID, "timestamp": "2025-08-13T15:22:56.917Z"}),
            json!({"id": ID, "timestamp": "2025-08-13T15:22:56.917Z", "instructions": null, "extra": true}),
            json!({"id": "not-a-uuid", "timestamp": "2025-08-13T15:22:56.917Z", "instructions": null}),
            json!({"id": ID, "timestamp": "", "instructions": null}),
            json!({"id": ID, "timestamp": "t", "instructions": null, "git": "main"}),
        ] {
            assert_eq!(of(header.clone()), None, "{header}");
        }
    }

    #[test]
    fn envelopes_are_legacy_or_paginated() {
        let of = |v: Value| Generation::of_first_line(&v);
        assert_eq!(
            of(json!({"timestamp": "t", "type": "session_meta", "payload": {"id": ID}})),
            Some(Generation::Legacy)
        );
        assert_eq!(
            of(
                json!({"timestamp": "t", "type": "session_meta", "payload": {"id": ID, "history_mode": "legacy"}})
            ),
            Some(Generation::Legacy)
        );
        assert_eq!(
            of(
                json!({"timestamp": "t", "ordinal": 0, "type": "session_meta", "payload": {"id": ID, "history_mode": "paginated"}})
            ),
            Some(Generation::Paginated)
        );
        assert_eq!(
            of(json!({"timestamp": "t", "type": "response_item", "payload": {"type": "message"}})),
            Some(Generation::Legacy)
        );
        assert_eq!(
            of(json!({"type": "response_item", "payload": "text"})),
            None
        );
        assert_eq!(of(json!({"messages": []})), None);
        assert_eq!(of(json!([1])), None);
    }
}
