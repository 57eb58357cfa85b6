//! Why a record was quarantined, as a class: the `class` written in `quarantine.jsonl`, counted
//! in the summary's `quarantine_reasons`, and the [`Stage`] that refused it. Each stage's error
//! says its own class (an input error through `InputError::class`, a broken invariant as
//! [`QuarantineClass::Invariant`]), so no list of another stage's errors is kept here.

use serde::{Serialize, Serializer};

use super::invariant::Invariant;

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
        // Not a match: [`QuarantineClass::stage`] already lists every class by name.
        if let QuarantineClass::Invariant(invariant) = self {
            Some(invariant)
        } else {
            None
        }
    }
}

impl Serialize for QuarantineClass {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// A reason to quarantine a record, as the stage that refused it knows it: its class, and
/// (through `Display`) the one-line reason written after the record's location.
pub trait QuarantineReason: std::fmt::Display {
    fn class(&self) -> QuarantineClass;
}
