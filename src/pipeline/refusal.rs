//! Why the pipeline quarantines a record, as a value: each stage's refusal kept in its own
//! type until the quarantine line is written, which then takes its class and its reason from
//! the same value ([`QuarantineReason`]) and its location from the [`Located`] around it.
//!
//! In: the refusals of every stage (an oversized or cut record, the parser's and the readers'
//! [`InputError`]s, a rule's [`ConvertError`], the validator's [`Violation`]s, an unbalanced
//! [`Account`], a Batch API result no request claimed). Out: the `class` and `reason` of a
//! [`QuarantineEntry`](crate::output::QuarantineEntry). Nothing here fails.

use std::fmt;
use std::sync::Arc;

use crate::audit::accounting::Account;
use crate::convert::ConvertError;
use crate::input::{InputError, SourceFormat};
use crate::model::invariant::Invariant;
use crate::model::quarantine::{QuarantineClass, QuarantineReason};
use crate::model::rule::RuleRef;
use crate::model::Located;
use crate::validate::Violation;

/// Why a record is quarantined.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Longer than `--max-record-bytes` (`size`): only its first `kept` bytes were read.
    TooLarge { size: u64, kept: usize },
    /// The parser or the format's reader could not read it (a record cut by damage included).
    Input(InputError),
    /// A rule said quarantine while converting or rendering the conversation.
    Rule(ConvertError),
    /// The written conversation breaks invariants: every violation found, in line order, the
    /// first apart (there is one). `what` names what was written: `rollout` or `body`.
    Invariants {
        what: &'static str,
        first: Violation,
        more: Vec<Violation>,
    },
    /// The text accounting does not balance (invariant 12).
    Unbalanced(Account),
    /// The reader of `format` said nothing of the record: a bug of ours, caught here so that
    /// no record is lost.
    Unaccounted(SourceFormat),
    /// A Batch API result that no request of the input claimed; when the result is itself a
    /// failure (`errored`, `expired`, ...), that failure.
    UnclaimedResult(Option<InputError>),
    /// A later record of a conversation refused as a whole, and the refusal of its first
    /// record (shared by every record of the conversation).
    PartOf(Arc<Located<Refusal>>),
}

impl Refusal {
    /// The rule that refused the record, when a rule did (class `rule`).
    pub(crate) fn rule(&self) -> Option<&RuleRef> {
        match self {
            Refusal::Rule(error) => Some(&error.rule),
            Refusal::PartOf(first) => first.cause.rule(),
            Refusal::TooLarge { .. }
            | Refusal::Input(_)
            | Refusal::Invariants { .. }
            | Refusal::Unbalanced(_)
            | Refusal::Unaccounted(_)
            | Refusal::UnclaimedResult(_) => None,
        }
    }
}

impl QuarantineReason for Refusal {
    fn class(&self) -> QuarantineClass {
        match self {
            Refusal::TooLarge { .. } => QuarantineClass::TooLarge,
            Refusal::Input(err) => err.class(),
            Refusal::Rule(_) => QuarantineClass::Rule,
            Refusal::Invariants { first, .. } => QuarantineClass::Invariant(first.invariant),
            Refusal::Unbalanced(_) => QuarantineClass::Invariant(Invariant::Accounting),
            Refusal::Unaccounted(_) => QuarantineClass::NotARecord,
            Refusal::UnclaimedResult(Some(_)) => QuarantineClass::BatchFailed,
            Refusal::UnclaimedResult(None) => QuarantineClass::BatchResultWithoutRequest,
            Refusal::PartOf(first) => first.cause.class(),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooLarge { size, kept } => write!(
                f,
                "the record is {size} bytes, more than --max-record-bytes: not read (the quarantine keeps its first {kept} bytes)"
            ),
            Refusal::Input(err) => err.fmt(f),
            // The message's index before the rule: "... at message 3 (rule `x`)".
            Refusal::Rule(ConvertError {
                rule,
                reason,
                message,
            }) => {
                write!(f, "{reason}")?;
                if let Some(message) = message {
                    write!(f, " at message {message}")?;
                }
                write!(f, " (rule `{rule}`)")
            }
            // Every violation, the first one's invariant (the class) in front:
            // `[3-roles] rollout line 2: [3-roles] ...; line 5: [6-call_pairing] ...`.
            Refusal::Invariants { what, first, more } => {
                write!(f, "[{}] {what} {first}", first.invariant)?;
                more.iter().try_for_each(|v| write!(f, "; {v}"))
            }
            Refusal::Unbalanced(account) => write!(
                f,
                "[{}] text bytes in {} + added {} != out {} + dropped {}",
                Invariant::Accounting,
                account.bytes_in,
                account.bytes_added,
                account.bytes_out,
                account.bytes_dropped
            ),
            Refusal::Unaccounted(format) => write!(
                f,
                "the {format} reader gave no account of this record (a bug: please report it with the file)"
            ),
            Refusal::UnclaimedResult(Some(failure)) => {
                write!(f, "{failure} (its request is not in the input)")
            }
            Refusal::UnclaimedResult(None) => f.write_str(
                "batch result line whose request (same custom_id) is not in the input",
            ),
            Refusal::PartOf(first) => write!(f, "part of the conversation at {first}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::quarantine::QuarantineClass;
    use crate::model::Location;
    use crate::output::QuarantineEntry;

    fn at(line: u64) -> Location {
        Location {
            path: "in.jsonl".into(),
            line,
            byte_offset: 10 * line,
            element: None,
        }
    }

    fn violation(invariant: Invariant, line: usize, message: &str) -> Violation {
        Violation {
            invariant,
            line,
            message: message.to_string(),
        }
    }

    #[test]
    fn every_violation_is_in_the_reason_and_the_first_is_the_class() {
        let why = Refusal::Invariants {
            what: "rollout",
            first: violation(Invariant::Roles, 2, "role `wizard`"),
            more: vec![violation(Invariant::CallPairing, 5, "no output")],
        };
        let entry = QuarantineEntry::new(&at(3).at(why), b"{}");
        assert_eq!(entry.class, QuarantineClass::Invariant(Invariant::Roles));
        assert_eq!(
            entry.reason,
            "in.jsonl:3 (byte 30): [3-roles] rollout line 2: [3-roles] role `wizard`; \
             line 5: [6-call_pairing] no output"
        );
    }

    #[test]
    fn a_later_record_of_a_refused_conversation_names_both_places_and_the_first_class() {
        let first = Arc::new(at(1).at(Refusal::Unbalanced(Account {
            bytes_in: 3,
            bytes_out: 2,
            bytes_dropped: 0,
            bytes_added: 0,
        })));
        let entry = QuarantineEntry::new(&at(2).at(Refusal::PartOf(first)), b"{}");
        assert_eq!(
            entry.class,
            QuarantineClass::Invariant(Invariant::Accounting)
        );
        assert_eq!(
            entry.reason,
            "in.jsonl:2 (byte 20): part of the conversation at in.jsonl:1 (byte 10): \
             [12-accounting] text bytes in 3 + added 0 != out 2 + dropped 0"
        );
        assert_eq!((entry.line, entry.byte_offset), (2, 20));
    }
}
