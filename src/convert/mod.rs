//! Convert: a [`Transcript`] and the rules to a [`Conversation`] of Responses items.
//!
//! In: the transcript of one record, the resolved rules, and the record's identity (its
//! digest and occurrence in its file; the source's own id where it has one, see
//! [`crate::model::identity`]). Out: the session meta, the rollout lines in order, the decisions taken
//! (each with its rule id) and the text accounting. Fails with a [`ConvertError`] when a rule
//! says quarantine; the caller quarantines the record unchanged.
//!
//! Stages inside: [`build`] walks the messages once (classification, grouping, parts, tool
//! pairing); [`phase`] assigns assistant phases from the turn structure; [`render`] lays the
//! items out as rollout lines with events and timestamps, behind the [`render::Render`] trait
//! that [`responses`] also implements (Responses request bodies); [`ids`] makes every id
//! deterministic.

mod assistant;
pub(crate) mod build;
mod context;
pub(crate) mod ids;
pub(crate) mod image;
mod native;
pub(crate) mod parts;
pub(crate) mod phase;
pub(crate) mod render;
pub(crate) mod responses;
#[cfg(test)]
mod test_support;
mod tools;
mod user;
pub(crate) mod version;

use thiserror::Error;

use crate::audit::Decision;
pub use crate::model::conversation::{ItemKind, OutItem, OutPayload};
use crate::model::identity::{conversation_identity, legacy_conversation_identity, RecordId};
use crate::model::rollout::SessionMeta;
use crate::model::rule::SessionKey;
use crate::model::transcript::{RecordMeta, Transcript};
use crate::rules::{Builtin, PolicyId, RuleRef, RuleSet};

/// A rule said the record cannot be migrated as is.
#[derive(Debug, Clone, Error, PartialEq)]
#[error("{reason} (rule `{rule}`{})", message.map(|m| format!(", message {m}")).unwrap_or_default())]
pub struct ConvertError {
    pub rule: RuleRef,
    pub reason: String,
    pub message: Option<usize>,
}

/// The identity of a record: where it is (for rules that match on the source file) and what
/// it is (its digest and occurrence in its file, [`RecordId`]).
#[derive(Debug, Clone)]
pub struct RecordKey<'a> {
    /// Stable key of the source file (relative path): rules may match on it; ids never
    /// depend on it.
    pub source: &'a str,
    /// The conversation's first record.
    pub record: RecordId,
    /// Ids kept from a home of scheme 2 ([`Naming`]), when converting into one.
    pub naming: Option<&'a Naming<'a>>,
}

/// Session ids a home written by scheme 2 (records identified by their bytes) keeps: a
/// conversation whose session is already there under its old id keeps that id, so that
/// converting into the home again renames nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Naming<'a> {
    /// Identity digest (xxh3-128 of the identity) → the session id it keeps: the manifest's
    /// aliases, recorded when a file of scheme 2 was read again.
    pub aliases: Option<&'a std::collections::HashMap<u128, String>>,
    /// For a file the manifest lists under scheme 2: the session ids it lists.
    pub legacy: Option<&'a std::collections::HashSet<String>>,
}

/// A converted conversation, ready to validate and write.
#[derive(Debug, Clone)]
pub struct Conversation<'r> {
    /// Borrows the rule set's `[session]`.
    pub meta: SessionMeta<'r>,
    pub items: Vec<OutItem>,
    pub decisions: Vec<Decision>,
    /// Milliseconds since the epoch of the session start.
    pub started_ms: i64,
    /// The record's tool definitions, as given (only the Responses output writes them).
    pub tools: Vec<serde_json::Value>,
    /// The record's model, when it says.
    pub model: Option<String>,
    /// When each input message was written, by message index (empty when the source does not
    /// say): the rollout lines are stamped with these times.
    pub times: Vec<Option<i64>>,
    /// The title the source gives the conversation (the audit writes it; Codex keeps thread
    /// names in `session_index.jsonl`).
    pub title: Option<String>,
    /// The digest of its identity, when its session keeps an id of scheme 2 that the
    /// manifest must remember ([`Naming`]).
    pub alias: Option<u128>,
    /// The `[session]` defaults its session meta took: decisions of the Codex rollout, which
    /// writes that meta (a Responses body has none).
    pub meta_defaults: Vec<Decision>,
}

impl Conversation<'_> {
    /// `sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl`, relative to the home.
    /// The rollout file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Rendered into this thread's reused buffer, taken out and handed over whole: a fresh
        // Vec grown by doubling for each record cost its reallocations' memmoves and the
        // kernel's zeroing of new pages, and a copy at the exact size cost a memmove of every
        // rollout. [`recycle`] gives the buffer back once the rollout is placed.
        let mut out = RENDER.with(|buffer| std::mem::take(&mut *buffer.borrow_mut()));
        out.clear();
        // Serialising our own types to a Vec cannot fail: every map key is a string.
        let written = render::write(
            &self.meta,
            &self.items,
            self.started_ms,
            &self.times,
            &mut out,
        );
        if written.is_err() {
            out.clear();
        }
        out
    }

    /// The text accounting of this conversation against the `bytes_in` of its transcript
    /// (`audit::accounting::transcript_bytes`, taken before converting it).
    pub fn account(&self, bytes_in: usize) -> crate::audit::accounting::Account {
        let base = self.meta.base_instructions.as_ref();
        let base = base.map(|b| b.text.as_str());
        crate::audit::accounting::account(bytes_in, base, &self.items, &self.decisions)
    }

    pub fn relative_path(&self) -> String {
        // One string, written in place (four `join`s each grew and copied the path, then a
        // `format!` of the date's parts cost ~3,400 instructions a record); the same path.
        let mut path = String::with_capacity(64 + self.meta.id.len());
        crate::model::time::push_rollout_stem(&mut path, self.started_ms);
        path.push('-');
        path.push_str(&self.meta.id);
        path.push_str(".jsonl");
        path
    }
}

thread_local! {
    static RENDER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A render buffer grown past this for one huge rollout is freed after it.
const RENDER_KEEP: usize = 16 << 20;

/// Whether [`recycle`] keeps these bytes as a render buffer.
pub fn recyclable(bytes: &Vec<u8>) -> bool {
    bytes.capacity() <= RENDER_KEEP
}

/// Gives a rollout's bytes ([`Conversation::to_bytes`]) back to this thread as its render
/// buffer, for the next rollout; by the thread that rendered them, once they are placed (or
/// copied, for the conversations of a source, which are placed together).
pub fn recycle(bytes: Vec<u8>) {
    if !recyclable(&bytes) {
        return;
    }
    RENDER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        if bytes.capacity() > buffer.capacity() {
            *buffer = bytes;
        }
    });
}

thread_local! {
    static BODIES: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Responses bodies' buffers a thread keeps for its next bodies ([`body_buffer`]): more than a
/// worker has in flight (its batches being converted, written and given back).
const BODIES_KEPT: usize = 8;

/// A body buffer larger than this is freed, not kept: at most 8 MiB kept a thread.
const BODY_KEEP: usize = 1 << 20;

/// An empty buffer with room for a Responses body of `capacity` bytes: the smallest of this
/// thread's buffers given back ([`recycle_body`]) that has the room, else a new one.
///
/// A body is allocated at its size (~80 KB for an agent transcript), and one freed was not
/// the next one's memory: mimalloc gave a later body of another size fresh pages of its arena,
/// touched a page at a time (~2,300 page faults in a `--format responses` run over 256 MB of
/// agent transcripts), where a buffer given back is memory already touched.
pub fn body_buffer(capacity: usize) -> Vec<u8> {
    let kept = BODIES.with(|kept| {
        let mut kept = kept.borrow_mut();
        let fit = kept
            .iter()
            .enumerate()
            .filter(|(_, buffer)| buffer.capacity() >= capacity)
            .min_by_key(|(_, buffer)| buffer.capacity())
            .map(|(at, _)| at);
        fit.map(|at| kept.swap_remove(at))
    });
    kept.unwrap_or_else(|| Vec::with_capacity(capacity))
}

/// Gives a Responses body's bytes back to this thread for a next body, once they are written,
/// by the thread that rendered them (the pipeline's [`Returns`](crate::pipeline)); kept while
/// it keeps fewer than [`BODIES_KEPT`], else the smallest kept one gives way to a larger one.
pub fn recycle_body(mut bytes: Vec<u8>) {
    if bytes.capacity() == 0 || bytes.capacity() > BODY_KEEP {
        return;
    }
    bytes.clear();
    BODIES.with(|kept| {
        let mut kept = kept.borrow_mut();
        if kept.len() < BODIES_KEPT {
            kept.push(bytes);
            return;
        }
        let smallest = kept
            .iter()
            .enumerate()
            .min_by_key(|(_, buffer)| buffer.capacity())
            .filter(|(_, buffer)| buffer.capacity() < bytes.capacity())
            .map(|(at, _)| at);
        if let Some(at) = smallest {
            kept[at] = bytes;
        }
    });
}

/// Converts one transcript.
pub fn convert<'r>(
    mut transcript: Transcript,
    rules: &'r RuleSet,
    key: &RecordKey<'_>,
) -> Result<Conversation<'r>, ConvertError> {
    let started_ms = transcript
        .meta
        .created_ms
        .unwrap_or(rules.session.timestamp_ms);
    let (id, alias) = session_id(&transcript, key, started_ms);
    let tools = std::mem::take(&mut transcript.tools);
    let model = transcript.meta.model.clone();
    // `--model`: the model of a body whose record names none.
    let defaulted = match (&model, &rules.session.default_model) {
        (None, Some(default)) => Some(default.clone()),
        (Some(_), _) | (None, None) => None,
    };
    let built = build::build(&mut transcript, rules, key.source)?;
    let mut items = built.items;
    phase::assign(&mut items, rules.infer_phase, transcript.meta.finished);
    let meta = render::session_meta(
        rules,
        &id,
        started_ms,
        built.base_instructions,
        &transcript.meta,
    );
    let times = message_times(&transcript);
    let title = transcript.meta.title.clone();
    let mut decisions = built.decisions;
    if transcript.meta.unicode_repairs > 0 {
        decisions.push(Decision {
            message: None,
            rule: PolicyId::InvalidUnicode.into(),
            action: crate::audit::Action::UnicodeRepaired {
                count: transcript.meta.unicode_repairs,
            },
            bytes_dropped: 0,
            bytes_added: 0,
        });
    }
    for note in std::mem::take(&mut transcript.source_notes) {
        decisions.push(Decision {
            message: None,
            rule: note.rule,
            action: crate::audit::Action::SourceNote {
                what: note.what,
                count: note.count,
            },
            bytes_dropped: note.bytes_dropped,
            bytes_added: 0,
        });
    }
    let unusable_cwd = transcript.meta.cwd.as_deref().filter(|cwd| {
        !cwd.is_empty() && !render::usable_cwd(cwd) && !rules.session.cwd_overrides_source
    });
    if unusable_cwd.is_some() {
        decisions.push(Decision {
            message: None,
            rule: RuleRef::Builtin(Builtin::SourceCwd),
            action: crate::audit::Action::SourceNote {
                what: "working folder not an absolute, clean path: the rules' cwd written, the source's kept as source_cwd".to_string(),
                count: 1,
            },
            bytes_dropped: 0,
            bytes_added: 0,
        });
    }
    if transcript.meta.messages_by_shape {
        decisions.push(Decision {
            message: None,
            rule: RuleRef::Builtin(Builtin::MessagesByShape),
            action: crate::audit::Action::MessagesFoundByShape {
                path: transcript.meta.messages_at.clone(),
            },
            bytes_dropped: 0,
            bytes_added: 0,
        });
    }
    if let Some(model) = &defaulted {
        decisions.push(Decision {
            message: None,
            rule: RuleRef::Builtin(Builtin::DefaultModel),
            action: crate::audit::Action::ModelDefaulted {
                model: model.clone(),
            },
            bytes_dropped: 0,
            bytes_added: 0,
        });
    }
    let meta_defaults = meta_defaults(&transcript.meta, unusable_cwd.is_some(), &meta);
    Ok(Conversation {
        meta_defaults,
        meta,
        items,
        decisions,
        started_ms,
        tools,
        model: model.or(defaulted),
        times,
        title,
        alias,
    })
}

/// A decision for each `[session]` default the session meta took where the record gave no
/// value: its time, its working folder (one the record gave but is unusable is
/// `builtin.source-cwd`'s), and the originator, which no source's is written over.
fn meta_defaults(source: &RecordMeta, unusable_cwd: bool, meta: &SessionMeta<'_>) -> Vec<Decision> {
    let no_cwd = source.cwd.as_deref().is_none_or(str::is_empty) && !unusable_cwd;
    [
        (
            source.created_ms.is_none(),
            SessionKey::Timestamp,
            meta.timestamp.as_str(),
        ),
        (no_cwd, SessionKey::Cwd, &*meta.cwd),
        (true, SessionKey::Originator, &*meta.originator),
    ]
    .into_iter()
    .filter(|(defaulted, _, _)| *defaulted)
    .map(|(_, key, value)| Decision {
        message: None,
        rule: RuleRef::Session(key),
        action: crate::audit::Action::SessionDefaulted {
            value: value.to_string(),
        },
        bytes_dropped: 0,
        bytes_added: 0,
    })
    .collect()
}

/// The session id of a conversation (a Codex rollout's own, see [`kept_session_id`]), and
/// the digest of its identity when that id is one kept from scheme 2 and new to the
/// manifest's aliases.
fn session_id(
    transcript: &Transcript,
    key: &RecordKey<'_>,
    started_ms: i64,
) -> (String, Option<u128>) {
    if let Some(id) = kept_session_id(transcript) {
        return (id.to_ascii_lowercase(), None);
    }
    let (format, source_id, spawned) = (
        transcript.meta.format,
        transcript.meta.source_id.as_deref(),
        transcript.meta.parent_source_id.is_some(),
    );
    // The record's value digest, as its reader took it (or the pipeline, from its `Value`).
    let record = RecordId {
        value: match key.record.value {
            0 => transcript.meta.record_digest.unwrap_or(0),
            value => value,
        },
        ..key.record
    };
    let identity = conversation_identity(format, source_id, spawned, &record);
    let Some(naming) = key.naming else {
        return (ids::session_id(&identity, started_ms), None);
    };
    let digest = crate::model::hash::xxh3_128(identity.as_bytes());
    if let Some(kept) = naming.aliases.and_then(|aliases| aliases.get(&digest)) {
        return (kept.clone(), None);
    }
    if let Some(listed) = naming.legacy {
        let legacy = legacy_conversation_identity(format, source_id, spawned, &record);
        if legacy != identity {
            let old = ids::session_id(&legacy, started_ms);
            if listed.contains(&old) {
                return (old, Some(digest));
            }
        }
    }
    (ids::session_id(&identity, started_ms), None)
}

/// The session id a conversation keeps: its source's own, when its format's ids are Codex
/// session ids and it is a UUID (a Codex rollout read again is the same session).
fn kept_session_id(transcript: &Transcript) -> Option<&str> {
    let format = transcript.meta.format?;
    let id = transcript.meta.source_id.as_deref()?;
    (format.keeps_session_ids() && ids::is_uuid(id)).then_some(id)
}

/// Each message's time by its index; empty when no message has one (chat records), so their
/// rollouts are stamped exactly as before.
fn message_times(transcript: &Transcript) -> Vec<Option<i64>> {
    if transcript.messages.iter().all(|m| m.timestamp_ms.is_none()) {
        return Vec::new();
    }
    let len = transcript.messages.iter().map(|m| m.index + 1).max();
    let mut times = vec![None; len.unwrap_or(0)];
    for m in &transcript.messages {
        times[m.index] = m.timestamp_ms;
    }
    times
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body buffer given back is the next body's memory when it has the room (the smallest
    /// that has it), a thread keeps a bounded set of them, and it never keeps a huge one.
    #[test]
    fn body_buffers_given_back_are_reused_within_bounds() {
        // On a thread of its own: the buffers kept are this thread's alone.
        let run = std::thread::spawn(|| {
            let small = body_buffer(1000);
            let large = body_buffer(100_000);
            let (at_small, at_large) = (small.as_ptr(), large.as_ptr());
            let mut written = small;
            written.extend_from_slice(b"{\"input\":[]}\n");
            recycle_body(written);
            recycle_body(large);
            // The smallest with the room, emptied.
            let again = body_buffer(500);
            assert_eq!(again.as_ptr(), at_small);
            assert!(again.is_empty());
            let big = body_buffer(50_000);
            assert_eq!(big.as_ptr(), at_large);
            // None kept has the room: a new one.
            let fresh = body_buffer(200_000);
            assert!(fresh.capacity() >= 200_000);
            assert_ne!(fresh.as_ptr(), at_large);
            // A huge one is freed, not kept.
            let huge = Vec::with_capacity(BODY_KEEP + 1);
            recycle_body(huge);
            assert_eq!(BODIES.with(|kept| kept.borrow().len()), 0);
            // At most BODIES_KEPT; a larger one takes the smallest one's place.
            for size in 1..=BODIES_KEPT {
                recycle_body(Vec::with_capacity(size * 1000));
            }
            recycle_body(Vec::with_capacity(500));
            recycle_body(Vec::with_capacity(64_000));
            let kept: Vec<usize> =
                BODIES.with(|kept| kept.borrow().iter().map(Vec::capacity).collect());
            assert_eq!(kept.len(), BODIES_KEPT);
            assert!(!kept.contains(&1000), "{kept:?}");
            assert!(!kept.contains(&500), "{kept:?}");
            assert!(kept.contains(&64_000), "{kept:?}");
        });
        assert!(run.join().is_ok());
    }
}
