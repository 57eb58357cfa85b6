//! Quarantine entries: a record that could not be converted, unchanged, with where it came from
//! and why. The record's exact bytes are kept: as `record` (text) when they are UTF-8, as
//! `record_base64` otherwise.

use base64::Engine;
use serde::{Serialize, Serializer};

use crate::model::Location;
use crate::validate::Invariant;

/// The pipeline stage that refused a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading the file: the record was cut by damage.
    Source,
    /// Parsing and finding the messages.
    Input,
    /// A rule said quarantine.
    Convert,
    /// The converted conversation broke an invariant.
    Validate,
}

/// Why a record was quarantined: the `class` written in `quarantine.jsonl` and counted in
/// the summary's `quarantine_reasons`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuarantineClass {
    Truncated,
    /// Longer than `--max-record-bytes`: never loaded whole.
    TooLarge,
    InvalidJson,
    InvalidUnicode,
    NotARecord,
    RolloutLine,
    BatchResultWithoutRequest,
    /// A Batch API result that is not a message (`errored`, `expired`, `canceled`).
    BatchFailed,
    /// A `previous_response_id` no entry of the file answers.
    MissingLink,
    NoMessages,
    /// Two fields qualified when looking for the messages by shape.
    AmbiguousMessages,
    EmptyMessages,
    BadMessage,
    /// A classification rule or repair policy said quarantine.
    Rule,
    /// The converted conversation broke this invariant (12 is the text accounting).
    Invariant(Invariant),
}

impl QuarantineClass {
    /// The class name, as written.
    pub fn name(self) -> &'static str {
        match self {
            QuarantineClass::Truncated => "truncated",
            QuarantineClass::TooLarge => "too_large",
            QuarantineClass::InvalidJson => "invalid_json",
            QuarantineClass::InvalidUnicode => "invalid_unicode",
            QuarantineClass::NotARecord => "not_a_record",
            QuarantineClass::RolloutLine => "rollout_line",
            QuarantineClass::BatchResultWithoutRequest => "batch_result_without_request",
            QuarantineClass::BatchFailed => "batch_failed",
            QuarantineClass::MissingLink => "missing_link",
            QuarantineClass::NoMessages => "no_messages",
            QuarantineClass::AmbiguousMessages => "ambiguous_messages",
            QuarantineClass::EmptyMessages => "empty_messages",
            QuarantineClass::BadMessage => "bad_message",
            QuarantineClass::Rule => "rule",
            QuarantineClass::Invariant(_) => "invariant",
        }
    }

    pub fn stage(self) -> Stage {
        match self {
            QuarantineClass::Truncated | QuarantineClass::TooLarge => Stage::Source,
            QuarantineClass::InvalidJson
            | QuarantineClass::InvalidUnicode
            | QuarantineClass::NotARecord
            | QuarantineClass::RolloutLine
            | QuarantineClass::BatchResultWithoutRequest
            | QuarantineClass::BatchFailed
            | QuarantineClass::MissingLink
            | QuarantineClass::NoMessages
            | QuarantineClass::AmbiguousMessages
            | QuarantineClass::EmptyMessages
            | QuarantineClass::BadMessage => Stage::Input,
            QuarantineClass::Rule => Stage::Convert,
            QuarantineClass::Invariant(_) => Stage::Validate,
        }
    }

    /// The invariant broken, for quarantines by the validator.
    pub fn invariant(self) -> Option<Invariant> {
        match self {
            QuarantineClass::Invariant(invariant) => Some(invariant),
            QuarantineClass::Truncated
            | QuarantineClass::TooLarge
            | QuarantineClass::InvalidJson
            | QuarantineClass::InvalidUnicode
            | QuarantineClass::NotARecord
            | QuarantineClass::RolloutLine
            | QuarantineClass::BatchResultWithoutRequest
            | QuarantineClass::BatchFailed
            | QuarantineClass::MissingLink
            | QuarantineClass::NoMessages
            | QuarantineClass::AmbiguousMessages
            | QuarantineClass::EmptyMessages
            | QuarantineClass::BadMessage
            | QuarantineClass::Rule => None,
        }
    }
}

impl Serialize for QuarantineClass {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct QuarantineEntry {
    pub source: String,
    pub line: u64,
    pub byte_offset: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub element: Option<usize>,
    /// Reason class (`invalid_json`, `no_messages`, `rule`, `invariant`, ...).
    pub class: QuarantineClass,
    /// One-line reason.
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_base64: Option<String>,
}

impl QuarantineEntry {
    pub fn new(
        location: &Location,
        class: QuarantineClass,
        reason: String,
        raw: &[u8],
    ) -> QuarantineEntry {
        let (record, record_base64) = match std::str::from_utf8(raw) {
            Ok(text) => (Some(text.to_string()), None),
            Err(_) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(raw)),
            ),
        };
        QuarantineEntry {
            source: location.path.to_string(),
            line: location.line,
            byte_offset: location.byte_offset,
            element: location.element,
            class,
            reason: reason.replace('\n', " "),
            record,
            record_base64,
        }
    }

    /// The record's original bytes.
    pub fn raw(&self) -> Vec<u8> {
        match (&self.record, &self.record_base64) {
            (Some(text), _) => text.as_bytes().to_vec(),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap_or_default(),
            (None, None) => Vec::new(),
        }
    }
}
