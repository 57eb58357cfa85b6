//! Source formats: from a file's records to [`Transcript`](crate::model::transcript::Transcript)s.
//!
//! Every format is a [`FormatReader`] registered in [`format::readers`] (detection order,
//! `chat` last): Chat Completions records and their relatives ([`chat`]: batch lines, eval
//! samples, trajectories, turn lists, any path a rule file or `--messages-at` names), Claude
//! Code sessions ([`claude_code`]), Codex's own rollouts ([`codex`]), ChatGPT exports ([`chatgpt`]), Anthropic Messages logs
//! ([`anthropic`]), Responses logs ([`responses`]), streamed Chat Completions logs
//! ([`chat_stream`]), ShareGPT datasets ([`sharegpt`]), Gemini CLI sessions ([`gemini_cli`]),
//! OpenTelemetry GenAI traces ([`otel`]) and Parquet chat datasets ([`parquet`], found by the
//! file's magic: the source layer renders each row as a JSON object). A reader is given parsed records
//! (one, or a whole file's when a conversation spans records) and says what became of each:
//! part of a conversation, refused with an [`InputError`], or dropped by a rule; the pipeline
//! quarantines what is refused and checks that every record is accounted for.
//!
//! Every reader emits its conversations through one [`builder::TranscriptBuilder`]: messages,
//! texts, calls (parallel calls join one assistant message), outputs (`failed` when the source
//! marks the call as failed), reasoning (attached to the message it explains), notes of what a
//! rule dropped, and the record's facts; the builder numbers the messages and refuses an empty
//! conversation alike for every format. No reader builds another format's JSON to be read
//! again, and no reader imports another: what a source writes as Chat Completions messages (a
//! chat record, a logged request's `messages`, an OpenAI-style dataset row) is read by the
//! shared message reader (`messages::read_message_list`), everything else is built field by
//! field.
//!
//! What the readers share (no reader imports another): [`parse`] (simd-json, Unicode
//! repair), `messages` (Chat Completions messages), `meta` (a record's id, time, model and end
//! by the rule paths), `fields` (serde helpers of the typed envelopes: a field of another type
//! is as if absent), [`blocks`] (content blocks of Claude Code and Anthropic), [`media`]
//! (content parts and tool outputs several formats build alike), [`chain`] (the one chain
//! driver of the three API logs),
//! [`sse`] (SSE lines and logged events), [`batch`] (Batch API results joined to their
//! requests), [`inside`] (the only way a reader opens a file a record points to), `tree` (a
//! message read alike from simd-json's tape or a `Value`: the chat fast path), `turns`
//! (ShareGPT-style turn lists, read alike in ShareGPT and Parquet datasets).

pub(crate) mod anthropic;
pub mod batch;
pub(crate) mod blocks;
pub(crate) mod builder;
pub mod chain;
pub(crate) mod chat;
pub(crate) mod chat_stream;
pub mod chatgpt;
pub mod claude_code;
pub(crate) mod codex;
pub(crate) mod fields;
pub mod format;
pub(crate) mod gemini_cli;
pub(crate) mod inside;
pub(crate) mod media;
pub(crate) mod messages;
pub(crate) mod meta;
pub(crate) mod otel;
pub(crate) mod parquet;
pub(crate) mod parse;
pub(crate) mod responses;
pub(crate) mod sharegpt;
pub(crate) mod sse;
pub(crate) mod tree;
pub(crate) mod turns;

pub use chat::extract;
pub use format::{FormatReader, SourceFormat};
pub use parse::parse_record;

use thiserror::Error;

use crate::model::quarantine::{QuarantineClass, QuarantineReason};
use crate::rules::RuleRef;

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
    #[error("record is a Codex rollout line (`{0}`) in a file of another format: a rollout file converts with `--from codex`, `rollover validate` checks it")]
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
        format: SourceFormat,
        problem: String,
    },
    #[error("{reason} (rule `{rule}`)")]
    RefusedByRule { rule: RuleRef, reason: String },
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

/// Each error's class, beside the error: a new variant is classed here, where the compiler
/// asks for it, not in a list kept by the quarantine's writer.
impl QuarantineReason for InputError {
    fn class(&self) -> QuarantineClass {
        match self {
            InputError::InvalidJson(_) => QuarantineClass::InvalidJson,
            InputError::InvalidUnicode(_) => QuarantineClass::InvalidUnicode,
            InputError::Truncated => QuarantineClass::Truncated,
            InputError::NotARecord(_) | InputError::NotInFormat { .. } => {
                QuarantineClass::NotARecord
            }
            InputError::RolloutLine(_) => QuarantineClass::RolloutLine,
            InputError::BatchResultWithoutRequest(_) => QuarantineClass::BatchResultWithoutRequest,
            InputError::NoMessages(_) => QuarantineClass::NoMessages,
            InputError::AmbiguousMessages(..) => QuarantineClass::AmbiguousMessages,
            InputError::EmptyMessages(_) => QuarantineClass::EmptyMessages,
            InputError::BadMessage { .. } => QuarantineClass::BadMessage,
            InputError::RefusedByRule { .. } => QuarantineClass::Rule,
            InputError::MissingLink(_) => QuarantineClass::MissingLink,
            InputError::BatchFailed { .. } => QuarantineClass::BatchFailed,
        }
    }
}
