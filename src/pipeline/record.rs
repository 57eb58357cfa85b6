//! One record through parse → extract → convert → render → validate → account: the one
//! per-record function, which the pipeline's workers, the fuzz target and the tests all call.
//! It does no I/O: the caller writes what it returns.

use std::path::PathBuf;

use serde::Serialize;

use crate::audit::accounting::{account, transcript_bytes, Account};
use crate::audit::summary::SCHEMA_VERSION;
use crate::audit::Decision;
use crate::convert::render::renderer;
use crate::convert::{convert, ConvertError, ItemKind, OutPayload, RecordKey};
use crate::input::batch::BatchIndex;
use crate::input::{extract, parse_record, InputError};
use crate::model::responses::{output_path, Format};
use crate::model::rollout::ResponseItem;
use crate::model::transcript::Transcript;
use crate::output::manifest::digest;
use crate::output::quarantine::QuarantineClass;
use crate::output::{Placed, QuarantineEntry};
use crate::rules::{InvalidUnicode, RuleSet};
use crate::source::RawRecord;
use crate::validate::{self, Invariant};

/// The result of one record.
#[derive(Debug)]
pub enum Outcome {
    Converted(Box<Converted>),
    Quarantined(QuarantineEntry),
    /// Left out by `--sample`.
    NotSampled,
}

/// Whether the record `ordinal` of the file keyed `source_key` is in a sample of `rate`:
/// chosen by a hash of its key, so the same records are picked every time.
pub fn sampled(source_key: &str, ordinal: u64, rate: f64) -> bool {
    if rate >= 1.0 {
        return true;
    }
    let key = format!("{source_key}#{ordinal}");
    let hash = xxhash_rust::xxh3::xxh3_64(key.as_bytes());
    (hash as f64) < rate * (u64::MAX as f64)
}

/// A converted record; the serialised fields are its line in `conversations.jsonl`.
#[derive(Debug, Serialize)]
pub struct Converted {
    pub schema_version: u32,
    pub source: String,
    pub line: u64,
    pub id: String,
    pub path: String,
    pub account: Account,
    pub decisions: Vec<Decision>,
    /// xxh3-128 of the rollout's bytes (the manifest's digest): what `report diff` compares.
    pub digest: String,
    /// Items written by kind (`message:user`, `function_call`, ...) with assistant phases.
    #[serde(skip)]
    pub items: Vec<(&'static str, Option<&'static str>)>,
    /// `user_message` and `agent_message` events written.
    #[serde(skip)]
    pub events: (u64, u64),
    #[serde(skip)]
    pub ignored: Vec<String>,
    /// The rollout's bytes and its path relative to the home (for a Responses body, its line
    /// and the path of its input file's output file).
    #[serde(skip)]
    pub bytes: Vec<u8>,
    #[serde(skip)]
    pub relative: PathBuf,
    /// What writing it did (`None` in a dry run).
    #[serde(skip)]
    pub placed: Option<Placed>,
}

/// Converts one record of the file keyed `source_key` (its `ordinal`-th record) into a Codex
/// rollout.
pub fn process_record(
    record: &RawRecord,
    source_key: &str,
    ordinal: u64,
    rules: &RuleSet,
    batch: &BatchIndex,
) -> Outcome {
    process_record_as(record, source_key, ordinal, rules, batch, Format::Codex)
}

/// [`process_record`] for any output format: the same stages up to the conversation, then
/// that format's renderer and checks.
pub fn process_record_as(
    record: &RawRecord,
    source_key: &str,
    ordinal: u64,
    rules: &RuleSet,
    batch: &BatchIndex,
    format: Format,
) -> Outcome {
    let location = &record.location;
    let quarantine = |class: QuarantineClass, reason: String| {
        let reason = format!("{location}: {reason}");
        Outcome::Quarantined(QuarantineEntry::new(location, class, reason, &record.bytes))
    };
    let transcript = match read(record, rules, batch) {
        Ok(transcript) => transcript,
        Err((class, reason)) => return quarantine(class, reason),
    };
    let mut ignored = ignored_fields(&transcript);
    if let Format::Responses(_) = format {
        // The Responses output writes the record's tools.
        ignored.retain(|f| f != "record.tools" && f != "record.functions");
    }
    let bytes_in = transcript_bytes(&transcript);
    let key = RecordKey {
        source: source_key,
        ordinal,
        salt: 0,
    };
    let mut conversation = match convert(transcript, rules, &key) {
        Ok(c) => c,
        Err(ConvertError {
            rule,
            reason,
            message,
        }) => {
            let at = message
                .map(|m| format!(" at message {m}"))
                .unwrap_or_default();
            return quarantine(
                QuarantineClass::Rule,
                format!("{reason}{at} (rule `{rule}`)"),
            );
        }
    };
    let bytes = match renderer(format).render(&mut conversation, rules) {
        Ok(bytes) => bytes,
        Err(ConvertError { rule, reason, .. }) => {
            return quarantine(QuarantineClass::Rule, format!("{reason} (rule `{rule}`)"))
        }
    };
    let account = match check(&bytes, &conversation, bytes_in, rules, format) {
        Ok(account) => account,
        Err((class, reason)) => return quarantine(class, reason),
    };
    let items = conversation.items.iter().map(item_kind).collect();
    let count = |kind: ItemKind| conversation.items.iter().filter(|i| i.kind == kind).count();
    let (relative, events) = match format {
        Format::Codex => (
            conversation.relative_path(),
            (
                count(ItemKind::RealUser) as u64,
                count(ItemKind::Assistant) as u64,
            ),
        ),
        // One file per input file, written by the collector; no UI events in a body.
        Format::Responses(options) => (output_path(source_key, options.compress), (0, 0)),
    };
    Outcome::Converted(Box::new(Converted {
        schema_version: SCHEMA_VERSION,
        source: location.path.to_string(),
        line: location.line,
        id: conversation.meta.id.clone(),
        digest: digest(&bytes),
        path: relative.display().to_string(),
        decisions: conversation.decisions,
        items,
        events,
        account,
        ignored,
        bytes,
        relative,
        placed: None,
    }))
}

/// A refusal: the class and the reason of a quarantine.
type Refusal = (QuarantineClass, String);

/// Parse, join a batch result, read the messages.
fn read(record: &RawRecord, rules: &RuleSet, batch: &BatchIndex) -> Result<Transcript, Refusal> {
    if record.truncated {
        let reason = InputError::Truncated.to_string();
        return Err((QuarantineClass::Truncated, reason));
    }
    let repair = rules.policy.invalid_unicode == InvalidUnicode::Replace;
    let (mut value, repairs) =
        parse_record(&record.bytes, repair).map_err(|e| (input_class(&e), e.to_string()))?;
    batch.join(&mut value);
    let mut transcript =
        extract(value, &rules.input).map_err(|e| (input_class(&e), e.to_string()))?;
    transcript.meta.unicode_repairs = repairs;
    Ok(transcript)
}

/// The invariants on the written bytes, then the text accounting.
fn check(
    bytes: &[u8],
    conversation: &crate::convert::Conversation,
    bytes_in: usize,
    rules: &RuleSet,
    format: Format,
) -> Result<Account, Refusal> {
    let (violations, what) = match format {
        Format::Codex => (
            validate::check(bytes, Some(&conversation.meta.id), &rules.markers),
            "rollout",
        ),
        Format::Responses(_) => (validate::responses::check_body(bytes), "body"),
    };
    if let Some(first) = violations.first() {
        let reason = format!("[{}] {what} {}", first.invariant, first);
        return Err((QuarantineClass::Invariant(first.invariant), reason));
    }
    let base = conversation.meta.base_instructions.as_ref();
    let base = base.map(|b| b.text.as_str());
    let account = account(bytes_in, base, &conversation.items, &conversation.decisions);
    if !account.balanced() {
        let reason = format!(
            "[{}] text bytes in {} + added {} != out {} + dropped {}",
            Invariant::Accounting,
            account.bytes_in,
            account.bytes_added,
            account.bytes_out,
            account.bytes_dropped
        );
        return Err((QuarantineClass::Invariant(Invariant::Accounting), reason));
    }
    Ok(account)
}

/// The benchmark baseline for one record: parse and serialise, no conversion. What `convert`
/// must stay close to in throughput (`samples/bench.sh`).
pub fn round_trip(record: &RawRecord, ordinal: u64) -> Outcome {
    let location = &record.location;
    let value = match parse_record(&record.bytes, true) {
        Ok((value, _)) => value,
        Err(err) => {
            let entry =
                QuarantineEntry::new(location, input_class(&err), err.to_string(), &record.bytes);
            return Outcome::Quarantined(entry);
        }
    };
    let mut bytes = serde_json::to_vec(&value).unwrap_or_default();
    bytes.push(b'\n');
    let relative =
        PathBuf::from("baseline").join(format!("{ordinal:09}-{}.jsonl", location.byte_offset));
    Outcome::Converted(Box::new(Converted {
        schema_version: SCHEMA_VERSION,
        source: location.path.to_string(),
        line: location.line,
        id: String::new(),
        digest: String::new(),
        path: relative.display().to_string(),
        account: Account::default(),
        decisions: Vec::new(),
        items: Vec::new(),
        events: (0, 0),
        ignored: Vec::new(),
        bytes,
        relative,
        placed: None,
    }))
}

pub fn input_class(err: &InputError) -> QuarantineClass {
    match err {
        InputError::InvalidJson(_) => QuarantineClass::InvalidJson,
        InputError::InvalidUnicode(_) => QuarantineClass::InvalidUnicode,
        InputError::Truncated => QuarantineClass::Truncated,
        InputError::NotARecord(_) => QuarantineClass::NotARecord,
        InputError::RolloutLine(_) => QuarantineClass::RolloutLine,
        InputError::BatchResultWithoutRequest(_) => QuarantineClass::BatchResultWithoutRequest,
        InputError::NoMessages(_) => QuarantineClass::NoMessages,
        InputError::AmbiguousMessages(..) => QuarantineClass::AmbiguousMessages,
        InputError::EmptyMessages(_) => QuarantineClass::EmptyMessages,
        InputError::BadMessage { .. } => QuarantineClass::BadMessage,
        InputError::NotInFormat { .. } => QuarantineClass::NotARecord,
        InputError::RefusedByRule { .. } => QuarantineClass::Rule,
    }
}

/// Keys of the record and its messages that nothing converts, for the audit.
fn ignored_fields(transcript: &Transcript) -> Vec<String> {
    let record = transcript
        .ignored_fields
        .iter()
        .map(|f| format!("record.{f}"));
    let messages = transcript.messages.iter();
    let message_fields = messages
        .clone()
        .flat_map(|m| m.ignored_fields.iter().map(|f| format!("message.{f}")));
    let names = messages
        .filter(|m| m.name.is_some() && m.role != "function")
        .map(|_| "message.name".to_string());
    record.chain(message_fields).chain(names).collect()
}

/// How the summary counts an item: its type, with messages by kind, and its phase.
fn item_kind(item: &crate::convert::OutItem) -> (&'static str, Option<&'static str>) {
    match &item.payload {
        OutPayload::Compacted(_) | OutPayload::CompactedReplacing(_) => ("compacted", None),
        OutPayload::Item(ResponseItem::Message { phase, .. }) => {
            let kind = match item.kind {
                ItemKind::ContextualUser => "message:contextual_user",
                ItemKind::RealUser => "message:user",
                ItemKind::Developer => "message:developer",
                ItemKind::Assistant => "message:assistant",
                ItemKind::Reasoning | ItemKind::Call | ItemKind::Output | ItemKind::Compacted => {
                    "message"
                }
            };
            (kind, phase.map(|p| p.as_str()))
        }
        OutPayload::Item(other) => (item_type(other), None),
    }
}

fn item_type(item: &ResponseItem) -> &'static str {
    match item {
        ResponseItem::Message { .. } => "message",
        ResponseItem::Reasoning { .. } => "reasoning",
        ResponseItem::FunctionCall { .. } => "function_call",
        ResponseItem::FunctionCallOutput { .. } => "function_call_output",
        ResponseItem::CustomToolCall { .. } => "custom_tool_call",
        ResponseItem::CustomToolCallOutput { .. } => "custom_tool_call_output",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Location;

    fn record(bytes: &[u8]) -> RawRecord {
        RawRecord {
            location: Location {
                path: "t.jsonl".into(),
                line: 1,
                byte_offset: 0,
                element: None,
            },
            bytes: bytes.to_vec(),
            truncated: false,
        }
    }

    #[test]
    fn a_placeholder_is_accounted_and_the_conversation_written() {
        let rules = RuleSet::builtin().expect("built-in rules");
        let bytes = br#"{"messages":[
            {"role":"user","content":[{"type":"text","text":"see"},
                {"type":"file","file":{"filename":"a.pdf","file_data":"JVBERi0="}}]},
            {"role":"assistant","content":"ok"}]}"#;
        let outcome = process_record(&record(bytes), "t.jsonl", 0, &rules, &BatchIndex::default());
        let Outcome::Converted(done) = outcome else {
            panic!("expected a conversion, got {outcome:?}");
        };
        let placeholder = "[file not imported: a.pdf]".len();
        assert_eq!(
            done.account,
            Account {
                bytes_in: "see".len() + "ok".len(),
                bytes_out: "see".len() + placeholder + "ok".len(),
                bytes_dropped: 0,
                bytes_added: placeholder,
            }
        );
        assert_eq!(
            done.items,
            vec![("message:user", None), ("message:assistant", None)]
        );
        assert!(done.relative.starts_with("sessions"));
        assert!(done.bytes.ends_with(b"\n"));
    }

    #[test]
    fn a_rule_quarantine_names_its_class_stage_and_rule() {
        let rules = RuleSet::builtin().expect("built-in rules");
        let bytes = br#"{"messages":[{"role":"wizard","content":"x"}]}"#;
        let outcome = process_record(&record(bytes), "t.jsonl", 0, &rules, &BatchIndex::default());
        let Outcome::Quarantined(entry) = outcome else {
            panic!("expected a quarantine, got {outcome:?}");
        };
        assert_eq!(entry.class, QuarantineClass::Rule);
        assert_eq!(
            entry.class.stage(),
            crate::output::quarantine::Stage::Convert
        );
        assert!(
            entry.reason.contains("rule `policy.unknown_role`"),
            "{}",
            entry.reason
        );
        assert_eq!(entry.raw(), bytes.to_vec());
    }
}
