//! Input shapes: from a raw record's bytes to a [`Transcript`].
//!
//! In: a [`RawRecord`](crate::source::RawRecord)'s bytes and the rule set (which paths hold
//! messages, role aliases, which record fields say "finished"). Out: a [`Transcript`] whose
//! strings were copied once out of the parser's tape: moved out of a parsed `Value`, or, for
//! the common chat record, read straight from simd-json's tape with no `Value` of its messages
//! built ([`chat::extract_fast`], through `tree::Tree`, which both share). Fails with an
//! [`InputError`] naming what is wrong; the caller quarantines the record.
//!
//! Shapes read: `{"messages": [...]}` records, Batch API request lines (`body.messages`) and
//! result lines (`response.body.choices[0].message` appended as the reply), eval samples
//! (`input`, a list or a bare string), agent trajectories (`history`), turn lists (`question`:
//! a list of turns, each a list of messages, flattened in order), and any path a rule file or
//! `--messages-at` names (e.g. `answer_generation.train_messages[-1]`).

pub mod anthropic;
pub mod batch;
pub mod blocks;
pub mod chain;
pub mod chat;
pub mod chat_stream;
pub mod chatgpt;
pub mod claude_code;
pub mod format;
pub mod inside;
pub mod parse;
pub mod responses;
pub mod sharegpt;
pub mod sse;
pub(crate) mod tree;

pub use chat::extract;
pub use format::{FormatReader, SourceFormat};
pub use parse::parse_record;

use thiserror::Error;

/// Why a record could not be read as a conversation.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum InputError {
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
    #[error("invalid Unicode ({0} lone surrogate escapes or invalid UTF-8 sequences) and the rules say quarantine")]
    InvalidUnicode(usize),
    #[error("record cut short by a damaged compressed stream")]
    Truncated,
    #[error("record is a JSON {0}, not an object or a list of messages")]
    NotARecord(&'static str),
    #[error("record is a Codex rollout line (`{0}`), not a transcript: check it with `rollover validate`")]
    RolloutLine(String),
    #[error(
        "batch result line without its request (custom_id {0}): no messages to append the reply to"
    )]
    BatchResultWithoutRequest(String),
    #[error("no message list: none of the paths {0} holds a list of messages or a string; name the right one with --messages-at")]
    NoMessages(String),
    #[error("two fields hold a list of messages, `{0}` and `{1}`: name the right one with --messages-at")]
    AmbiguousMessages(String, String),
    #[error("message list at `{0}` is empty")]
    EmptyMessages(String),
    #[error("not a {format} record: {problem}")]
    NotInFormat {
        format: &'static str,
        problem: String,
    },
    #[error("{reason} (rule `{rule}`)")]
    RefusedByRule { rule: String, reason: String },
    #[error(
        "previous_response_id `{0}` is in no entry of the file: the history before it is missing"
    )]
    MissingLink(String),
    #[error("batch result `{custom_id}` {kind}: {reason}")]
    BatchFailed {
        custom_id: String,
        kind: String,
        reason: String,
    },
    #[error("message {index} at `{path}`: {problem}")]
    BadMessage {
        path: String,
        index: usize,
        problem: String,
    },
}
