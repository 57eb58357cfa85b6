//! One record through parse → extract → convert → render → validate → account: the one
//! per-record function, which the pipeline's workers, the fuzz target and the tests all call.
//! It does no I/O: the caller writes what it returns.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use super::converted::rollout_start;
pub(crate) use super::converted::{Converted, IgnoredField, Links};
pub(crate) use super::file::{read_file, WorkRead};
use super::reader::Records;
pub(crate) use super::refusal::Refusal;
use crate::audit::accounting::{transcript_bytes, Account};
use crate::audit::summary::SCHEMA_VERSION;
use crate::convert::render::render_as;
use crate::convert::{convert, ItemKind, Naming, OutPayload, RecordKey};
use crate::input::batch::BatchIndex;
use crate::input::format::{
    FastRead, FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceConversation,
};
use crate::input::{parse_record, InputError};
use crate::model::identity::RecordId;
use crate::model::rollout::ResponseItem;
use crate::model::transcript::{Role, Transcript};
use crate::model::Located;
use crate::output::manifest::digest;
use crate::output::Output;
use crate::output::QuarantineEntry;
use crate::rules::RuleRef;
use crate::rules::{InvalidUnicode, RuleSet};
use crate::source::RawRecord;

/// What became of one record: every record of a [`Records`] work ends in exactly one.
#[derive(Debug)]
pub enum Outcome {
    /// The conversation read from this record (and, when `records` > 1, from later records of
    /// the same work, each [`Outcome::Merged`]).
    Converted(Box<Converted>),
    /// A record read into the conversation of an earlier record of its work.
    Merged,
    /// Quarantined unchanged; a conversation refused as a whole has one per record. Boxed:
    /// a whole file's work holds an outcome per record, most of them [`Outcome::Merged`],
    /// and the inline entry made each 216 bytes (a chatty session's lines are ~280).
    Quarantined {
        /// The line `quarantine.jsonl` gets.
        entry: Box<QuarantineEntry>,
        /// Why, as a value: what a caller matches on (never the entry's reason text).
        why: Box<Refusal>,
    },
    /// Left out by `--sample`.
    NotSampled,
    /// A record that holds no conversation, dropped by a rule.
    Dropped { rule: RuleRef, what: String },
}

/// Whether the record `ordinal` of the file keyed `source_key` is in a sample of `rate`:
/// chosen by a hash of its key, so the same records are picked every time.
pub(crate) fn sampled(source_key: &str, ordinal: u64, rate: f64) -> bool {
    if rate >= 1.0 {
        return true;
    }
    let key = format!("{source_key}#{ordinal}");
    let hash = crate::model::hash::xxh3_64(key.as_bytes());
    (hash as f64) < rate * (u64::MAX as f64)
}

/// A transcript, from any source format, through convert → render → validate → account:
/// the converted conversation, or why it is refused. `location` is where its (first) record
/// is, `record` that record's identity.
pub(crate) fn finish(
    mut transcript: Transcript,
    location: &crate::model::Location,
    source_key: &str,
    record: RecordId,
    rules: &RuleSet,
    output: &dyn Output,
    naming: Option<&Naming<'_>>,
) -> Result<Box<Converted>, Refusal> {
    let version =
        versioned(&transcript).then(|| Box::new(crate::convert::version::in_hand(&transcript)));
    let mut ignored = ignored_fields(&mut transcript);
    ignored.retain(|f| !(f.scope == IgnoredField::RECORD && output.writes_record_field(&f.name)));
    let bytes_in = transcript_bytes(&transcript);
    let links = Links::of(&transcript.meta, rules);
    let key = RecordKey {
        source: source_key,
        record,
        naming,
    };
    let mut conversation = convert(transcript, rules, &key).map_err(Refusal::Rule)?;
    let bytes = render_as(output.format(), &mut conversation, rules).map_err(Refusal::Rule)?;
    // What is counted of the items, then the items let go: the checks of the written bytes
    // are the peak of a long conversation, and the items are as large again.
    let account = conversation.account(bytes_in);
    let items = count_kinds(conversation.items.iter().map(item_kind));
    let count = |kind: ItemKind| conversation.items.iter().filter(|i| i.kind == kind).count();
    let events = (
        count(ItemKind::RealUser) as u64,
        count(ItemKind::Assistant) as u64,
    );
    conversation.items = Vec::new();
    let account = check(&bytes, &conversation.meta.id, account, rules, output)?;
    // The path as text, then as a path (`Path::display` read it back through a lossy UTF-8
    // pass, ~1,800 instructions a record).
    let (path, events) = match output.file_of_input(source_key) {
        None => (conversation.relative_path(), events),
        // One file per input file, written by the collector; no UI events in a body.
        Some(path) => (path, (0, 0)),
    };
    let relative = PathBuf::from(&path);
    Ok(Box::new(Converted {
        schema_version: SCHEMA_VERSION,
        source: location.path.to_string(),
        line: location.line,
        id: conversation.meta.id.clone(),
        digest: digest(&bytes),
        path,
        decisions: conversation.decisions,
        items,
        events,
        account,
        ignored,
        output_len: bytes.len() as u64,
        started_at: links.title.as_ref().map(|_| rollout_start(&bytes)),
        bytes,
        relative,
        placed: None,
        records: 1,
        links,
        version,
        alias: conversation.alias,
        placement: crate::output::Placement::default(),
        supersedes: None,
        split_from: None,
        audit_line: None,
    }))
}

/// Whether a conversation has versions: one named by its source's own id, or one made of a
/// chain of records (a log that grows); a conversation that is one whole record is its own
/// identity, and another version of it is another conversation.
fn versioned(transcript: &Transcript) -> bool {
    let Some(format) = transcript.meta.format else {
        return false;
    };
    let named = format.has_global_ids()
        && transcript
            .meta
            .source_id
            .as_deref()
            .is_some_and(|id| !id.is_empty());
    named || crate::input::format::reader(format).granularity() == Granularity::File
}

/// What a worker needs besides the work itself.
pub(crate) struct WorkContext<'a> {
    /// The file the records are from, the rules, and what the reader keeps for the file.
    pub read: ReadContext<'a>,
    /// Batch API results read ahead, joined into their requests.
    pub batch: &'a BatchIndex,
    /// What the conversations are written into.
    pub output: &'a dyn Output,
    /// `--sample`: the share of conversations converted.
    pub sample: Option<f64>,
    /// A dry run: a rollout's bytes are freed once checked, none is written.
    pub dry_run: bool,
    /// `--baseline`: each record parsed and serialised, nothing converted (the benchmark's
    /// round trip).
    pub baseline: bool,
    /// Session ids kept from a home of scheme 2, when converting into one.
    pub naming: Option<Naming<'a>>,
}

/// A quarantine of `record` on its own, unchanged, refused for `why` at its location.
fn refuse(record: &RawRecord, why: Refusal) -> Outcome {
    let cause = record.location.at(why);
    Outcome::Quarantined {
        entry: Box::new(QuarantineEntry::new(&cause, &record.bytes)),
        why: Box::new(cause.cause),
    }
}

/// A quarantine of `record`, unchanged, for `cause` (found at `record` or, for a later
/// record of a refused conversation, at its first).
fn quarantine(record: &RawRecord, cause: &Located<Refusal>) -> Outcome {
    Outcome::Quarantined {
        entry: Box::new(QuarantineEntry::new(cause, &record.bytes)),
        why: Box::new(cause.cause.clone()),
    }
}

/// The one way records become outcomes, whatever their format: the work's records through
/// its format's reader (parse, read into transcripts), then each conversation through
/// [`finish`] (convert, render, validate, account). One outcome per record, in the work's
/// order: a conversation's first record carries it, its later records are
/// [`Outcome::Merged`], and a record the reader gave no account of is quarantined, never lost.
/// A format read record by record is sampled before it is read; a format read whole, by
/// conversation.
pub(crate) fn process_work(work: &mut Records, context: &WorkContext<'_>) -> Vec<Outcome> {
    process_with(crate::input::format::reader(work.format), work, context)
}

/// [`process_work`] with the reader given.
fn process_with(
    reader: &dyn FormatReader,
    work: &mut Records,
    context: &WorkContext<'_>,
) -> Vec<Outcome> {
    let key = context.read.key;
    let rate = context.sample.unwrap_or(1.0);
    let mut outcomes: Vec<Option<Outcome>> = work.records.iter().map(|_| None).collect();
    if reader.granularity() == Granularity::Record {
        for ((_, ordinal), outcome) in work.records.iter().zip(&mut outcomes) {
            if !sampled(key, *ordinal, rate) {
                *outcome = Some(Outcome::NotSampled);
            }
        }
    }
    if context.baseline {
        for ((record, ordinal), outcome) in work.records.iter().zip(&mut outcomes) {
            if outcome.is_none() {
                *outcome = Some(round_trip(record, *ordinal));
            }
        }
    } else {
        read_and_convert(reader, work, context, &mut outcomes);
    }
    let format = work.format;
    // The outcomes first in the zip: the list is collected in place, into its own allocation.
    outcomes
        .into_iter()
        .zip(work.records.iter())
        .map(|(outcome, (record, _))| {
            let mut outcome =
                outcome.unwrap_or_else(|| refuse(record, Refusal::Unaccounted(format)));
            if let (Outcome::Converted(done), true) = (&mut outcome, context.baseline) {
                settle(done, context);
            }
            outcome
        })
        .collect()
}

/// A rollout's bytes once checked: a Codex rollout is freed in a dry run (its buffer goes
/// back to the worker for the next render), else kept at its exact size for the writers.
fn settle(done: &mut Converted, context: &WorkContext<'_>) {
    done.render_audit_line();
    if context.output.file_per_conversation() {
        // A conversation with versions may be given a session of its own by the collector
        // ([`Converted::split`]), which rewrites its bytes: kept in a dry run too.
        if context.dry_run && done.version.is_none() {
            done.release_bytes();
        } else {
            done.keep_exact();
        }
    }
}

/// A conversation a reader made of records of one work, before it is converted.
#[derive(Debug)]
pub(crate) struct ReadConversation {
    /// The records it claimed (indexes into the work's records), in order: the first carries
    /// it, the others are [`Outcome::Merged`] into it.
    pub indexes: Vec<usize>,
    pub transcript: Transcript,
}

/// The records not yet given an outcome: size and damage checks, parse (or the reader's fast
/// path), the reader ([`read_work`]), then each conversation through [`finish`].
fn read_and_convert(
    reader: &dyn FormatReader,
    work: &mut Records,
    context: &WorkContext<'_>,
    outcomes: &mut [Option<Outcome>],
) {
    let per_conversation = reader.granularity() == Granularity::File;
    let rate = context.sample.unwrap_or(1.0);
    let conversations = read_work(reader, work, &context.read, context.batch, outcomes);
    // A large file's records are needed again only if a conversation of theirs is refused:
    // compressed meanwhile, they do not sit beside its conversion.
    let mut packed = if per_conversation {
        Packed::of(&mut work.records)
    } else {
        None
    };
    // A whole-file format's records that no conversation took (refused, dropped by a rule)
    // stand for themselves in a sample, as a record-by-record format's do: sampled by their
    // own key: kept in full, they would over-weight a sample and inflate its quarantine estimate.
    if per_conversation && rate < 1.0 {
        for (outcome, (_, ordinal)) in outcomes.iter_mut().zip(&work.records) {
            let alone = matches!(
                outcome,
                Some(Outcome::Quarantined { .. } | Outcome::Dropped { .. })
            );
            if alone && !sampled(context.read.key, *ordinal, rate) {
                *outcome = Some(Outcome::NotSampled);
            }
        }
    }
    for ReadConversation {
        indexes,
        transcript,
    } in conversations
    {
        let Some(&first) = indexes.first() else {
            continue;
        };
        let (record, ordinal) = &work.records[first];
        if per_conversation && !sampled(context.read.key, *ordinal, rate) {
            for &i in &indexes {
                outcomes[i] = Some(Outcome::NotSampled);
            }
            continue;
        }
        let (location, id) = (record.location.clone(), record.id);
        let finished = finish(
            transcript,
            &location,
            context.read.key,
            id,
            context.read.rules,
            context.output,
            context.naming.as_ref(),
        );
        outcomes[first] = Some(match finished {
            Ok(mut done) => {
                done.records = indexes.len() as u64;
                // Settled now, so that the render buffer is the next conversation's.
                settle(&mut done, context);
                Outcome::Converted(done)
            }
            Err(why) => {
                if let Some(packed) = packed.take() {
                    packed.unpack(&mut work.records);
                }
                // One quarantine line per record, each unchanged; the later ones point to the
                // first.
                let cause = Arc::new(location.at(why));
                for &i in &indexes[1..] {
                    let (other, _) = &work.records[i];
                    outcomes[i] = Some(refuse(other, Refusal::PartOf(Arc::clone(&cause))));
                }
                quarantine(&work.records[first].0, &cause)
            }
        });
    }
    // A record no one gave an account of is quarantined unchanged ([`process_with`]).
    if outcomes.iter().any(Option::is_none) {
        if let Some(packed) = packed.take() {
            packed.unpack(&mut work.records);
        }
    }
}

/// The bytes of a large whole file's records, compressed while its conversations convert
/// (zstd level 1: JSON Lines shrink ~10-fold, at ~400 MB/s): the file's records were the
/// largest part of what its work held beside the conversion (a chatty Claude Code session's
/// lines are ~1 of its ~4 bytes per byte), and they are read again only to quarantine them.
struct Packed {
    frame: Vec<u8>,
    /// Each record's length, in order.
    lengths: Vec<usize>,
}

impl Packed {
    /// A work whose records hold at least this many bytes is packed.
    const MIN_BYTES: usize = 16 << 20;

    /// Moves the records' bytes into one compressed frame, or leaves them when they are few
    /// (or cannot be compressed).
    fn of(records: &mut [(RawRecord, u64)]) -> Option<Packed> {
        use std::io::Write;
        let total: usize = records.iter().map(|(r, _)| r.bytes.len()).sum();
        if total < Packed::MIN_BYTES {
            return None;
        }
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), 1).ok()?;
        for (record, _) in records.iter() {
            encoder.write_all(&record.bytes).ok()?;
        }
        let frame = encoder.finish().ok()?;
        // Released in order, each block of records is freed with its last record.
        let lengths = records
            .iter_mut()
            .map(|(record, _)| std::mem::take(&mut record.bytes).len())
            .collect();
        Some(Packed { frame, lengths })
    }

    /// Gives the records their bytes back (slices of one buffer).
    fn unpack(self, records: &mut [(RawRecord, u64)]) {
        let total = self.lengths.iter().sum();
        // Packed by this process: the frame decompresses, to exactly this size.
        let all = zstd::bulk::decompress(&self.frame, total).unwrap_or_default();
        let all = bytes::Bytes::from(all);
        let mut at = 0;
        for ((record, _), len) in records.iter_mut().zip(self.lengths) {
            record.bytes = all.slice(at.min(all.len())..(at + len).min(all.len()));
            at += len;
        }
    }
}

/// The reading half of a work: each record not yet given an outcome is checked (size,
/// damage), parsed (or read by the format's fast path) and handed to the reader; what it
/// refuses or drops gets its outcome here, and the conversations it read come back, each
/// having claimed its records ([`Outcome::Merged`] until the caller decides) and counted its
/// Unicode repairs. `explain` reads a file through this too, so that it reads what `convert`
/// reads.
pub(crate) fn read_work(
    reader: &dyn FormatReader,
    work: &Records,
    read_context: &ReadContext<'_>,
    batch: &BatchIndex,
    outcomes: &mut [Option<Outcome>],
) -> Vec<ReadConversation> {
    let rules = read_context.rules;
    let repair = rules.policy.invalid_unicode == InvalidUnicode::Replace;
    // Each list is made when something goes in it: a chat record read fast needs neither
    // `inputs` nor `repairs` (a work is often one record: these were allocations a record).
    let mut inputs = Vec::new();
    let mut repairs: Vec<usize> = Vec::new();
    // Each parsed record's canonical digest (its identity when it has no id of its own).
    let mut values: Vec<u128> = Vec::new();
    let mut fast = Vec::new();
    if reader.streams() && reader.granularity() == Granularity::File {
        // Each record parsed as the reader takes it, its `Value` let go before the next.
        let mut each = work
            .records
            .iter()
            .enumerate()
            .filter_map(|(index, (record, _))| {
                if outcomes[index].is_some() {
                    return None;
                }
                match input_of(reader, record, index, None, repair, batch) {
                    Ok((input, digest)) => {
                        if digest != 0 {
                            values.resize(work.records.len(), 0);
                            values[index] = digest;
                        }
                        if input.repairs > 0 {
                            repairs.resize(work.records.len(), 0);
                            repairs[index] = input.repairs;
                        }
                        Some(input)
                    }
                    Err(why) => {
                        outcomes[index] = Some(refuse(record, why));
                        None
                    }
                }
            })
            .peekable();
        let read = match each.peek() {
            Some(_) => reader.read_each(&mut each, read_context),
            None => FileRead::default(),
        };
        drop(each);
        return claim(read, work, outcomes, &repairs, &values);
    }
    for (index, (record, _)) in work.records.iter().enumerate() {
        if outcomes[index].is_some() {
            continue;
        }
        // A format's own reading of the raw bytes (Chat Completions: straight from the
        // parser's tape), when no Batch API result is to be joined into the record.
        let whole = record.oversized.is_none() && !record.truncated;
        let read_fast = (whole && batch.is_empty())
            .then(|| reader.read_fast(&record.bytes, read_context))
            .flatten();
        let parsed = match read_fast {
            Some(FastRead::Read(transcript)) => {
                fast.push(SourceConversation {
                    transcript,
                    records: vec![index],
                });
                continue;
            }
            Some(FastRead::Parsed(value)) => Some(value),
            None => None,
        };
        match input_of(reader, record, index, parsed, repair, batch) {
            Ok((input, digest)) => {
                if digest != 0 {
                    values.resize(work.records.len(), 0);
                    values[index] = digest;
                }
                if input.repairs > 0 {
                    repairs.resize(work.records.len(), 0);
                    repairs[index] = input.repairs;
                }
                inputs.push(input);
            }
            Err(why) => outcomes[index] = Some(refuse(record, why)),
        }
    }
    let mut read = if inputs.is_empty() {
        FileRead::default()
    } else {
        reader.read(inputs, read_context)
    };
    // Read fast or not, a record's conversations come in its order.
    if !fast.is_empty() {
        fast.append(&mut read.conversations);
        read.conversations = fast;
    }
    claim(read, work, outcomes, &repairs, &values)
}

/// One record as a reader takes it: checked (size, damage) and parsed (unless `parsed`
/// already is its `Value`; a Batch API request joined to its result; the raw bytes of a format
/// whose records are not JSON), or why it cannot be; with the canonical digest of the value
/// parsed (its identity when it has no id of its own; 0 for raw bytes).
fn input_of(
    reader: &dyn FormatReader,
    record: &RawRecord,
    index: usize,
    parsed: Option<serde_json::Value>,
    repair: bool,
    batch: &BatchIndex,
) -> Result<(InputRecord, u128), Refusal> {
    if let Some(why) = too_large(record) {
        return Err(why);
    }
    if record.truncated {
        return Err(Refusal::Input(InputError::Truncated));
    }
    let parsed = match parsed {
        Some(value) => Ok((value, 0)),
        None => parse_record(&record.bytes, repair),
    };
    match parsed {
        Ok((mut value, repaired)) => {
            let digest = crate::model::identity::value_digest(&value);
            // A Batch API request gets its result read ahead (Anthropic Message Batches).
            batch.join(&mut value);
            let input = InputRecord {
                value,
                index,
                repairs: repaired,
            };
            Ok((input, digest))
        }
        // A format whose records are not JSON (SSE `data:` lines) reads the raw bytes.
        Err(_) if reader.detect(None, &record.bytes) => {
            let value = serde_json::Value::String(String::from_utf8_lossy(&record.bytes).into());
            let input = InputRecord {
                value,
                index,
                repairs: 0,
            };
            Ok((input, 0))
        }
        Err(err) => Err(Refusal::Input(err)),
    }
}

/// What a reader read, given its outcomes: refused and dropped records theirs, each
/// conversation its records (the first that names a record claims it), with its Unicode
/// repairs counted.
fn claim(
    read: FileRead,
    work: &Records,
    outcomes: &mut [Option<Outcome>],
    repairs: &[usize],
    values: &[u128],
) -> Vec<ReadConversation> {
    for (index, err) in read.refused {
        if let Some(slot @ None) = outcomes.get_mut(index) {
            let (record, _) = &work.records[index];
            *slot = Some(refuse(record, Refusal::Input(err)));
        }
    }
    for dropped in read.dropped {
        if let Some(slot @ None) = outcomes.get_mut(dropped.index) {
            *slot = Some(Outcome::Dropped {
                rule: dropped.rule,
                what: dropped.what,
            });
        }
    }
    let mut conversations = Vec::with_capacity(read.conversations.len());
    for conversation in read.conversations {
        // Each record is claimed once: by the first conversation (or refusal) that names it.
        let mut indexes = conversation.records;
        indexes.retain(|&i| match outcomes.get_mut(i) {
            Some(slot @ None) => {
                *slot = Some(Outcome::Merged);
                true
            }
            Some(Some(_)) | None => false,
        });
        if indexes.is_empty() {
            continue;
        }
        let mut transcript = conversation.transcript;
        if transcript.meta.record_digest.is_none() {
            transcript.meta.record_digest = indexes
                .first()
                .and_then(|&i| values.get(i))
                .copied()
                .filter(|&d| d != 0);
        }
        transcript.meta.unicode_repairs = indexes
            .iter()
            .map(|&i| repairs.get(i).copied().unwrap_or(0))
            .sum();
        conversations.push(ReadConversation {
            indexes,
            transcript,
        });
    }
    conversations
}

/// The refusal of a record longer than `--max-record-bytes`, whose first bytes only were read.
fn too_large(record: &RawRecord) -> Option<Refusal> {
    let size = record.oversized?;
    Some(Refusal::TooLarge {
        size,
        kept: record.bytes.len(),
    })
}

/// The invariants on the written bytes, then the text accounting.
fn check(
    bytes: &[u8],
    id: &str,
    account: Account,
    rules: &RuleSet,
    output: &dyn Output,
) -> Result<Account, Refusal> {
    let (violations, what) = output.check(bytes, id, &rules.markers);
    let mut violations = violations.into_iter();
    if let Some(first) = violations.next() {
        return Err(Refusal::Invariants {
            what,
            first,
            more: violations.collect(),
        });
    }
    if !account.balanced() {
        return Err(Refusal::Unbalanced(account));
    }
    Ok(account)
}

/// The benchmark baseline for one record: parse and serialise, no conversion. What `convert`
/// must stay close to in throughput (`samples/bench.sh`).
pub(crate) fn round_trip(record: &RawRecord, ordinal: u64) -> Outcome {
    let location = &record.location;
    if let Some(why) = too_large(record) {
        return refuse(record, why);
    }
    let value = match parse_record(&record.bytes, true) {
        Ok((value, _)) => value,
        Err(err) => return refuse(record, Refusal::Input(err)),
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
        output_len: bytes.len() as u64,
        started_at: None,
        bytes,
        relative,
        placed: None,
        records: 1,
        links: Links::default(),
        version: None,
        alias: None,
        placement: crate::output::Placement::default(),
        supersedes: None,
        split_from: None,
        audit_line: None,
    }))
}

/// Keys of the record and its messages that nothing converts, for the audit: taken out of the
/// transcript (nothing reads them after), not copied.
fn ignored_fields(transcript: &mut Transcript) -> Vec<IgnoredField> {
    let field = |scope, name| IgnoredField { scope, name };
    let record = std::mem::take(&mut transcript.ignored_fields)
        .into_iter()
        .map(|name| field(IgnoredField::RECORD, Cow::Owned(name)));
    let mut fields: Vec<IgnoredField> = record.collect();
    for m in &mut transcript.messages {
        let taken = std::mem::take(&mut m.ignored_fields);
        fields.extend(
            taken
                .into_iter()
                .map(|name| field(IgnoredField::MESSAGE, Cow::Owned(name))),
        );
    }
    let names = transcript
        .messages
        .iter()
        .filter(|m| m.name.is_some() && m.role != Role::Function)
        .map(|_| field(IgnoredField::MESSAGE, Cow::Borrowed("name")));
    fields.extend(names);
    fields
}

/// Each (kind, phase) pair of `kinds` with its count, in the order first seen. The pairs are
/// the few [`item_kind`] names (a dozen kinds, three phases), so the look-up is a short scan.
fn count_kinds(
    kinds: impl Iterator<Item = (&'static str, Option<&'static str>)>,
) -> Vec<(&'static str, Option<&'static str>, u64)> {
    let mut counts: Vec<(&'static str, Option<&'static str>, u64)> = Vec::new();
    for (kind, phase) in kinds {
        match counts
            .iter_mut()
            .find(|(k, p, _)| *k == kind && *p == phase)
        {
            Some((_, _, n)) => *n += 1,
            None => counts.push((kind, phase, 1)),
        }
    }
    counts
}

/// How the summary counts an item: its type, with messages by kind, and its phase.
fn item_kind(item: &crate::convert::OutItem) -> (&'static str, Option<&'static str>) {
    match &item.payload {
        OutPayload::Compacted(_)
        | OutPayload::CompactedReplacing(_)
        | OutPayload::CompactedNative(_) => ("compacted", None),
        OutPayload::Item(ResponseItem::Native(native)) if native.kind == ITEM_MESSAGE => {
            (message_kind(item.kind), native.phase().map(|p| p.as_str()))
        }
        OutPayload::Item(ResponseItem::Message { phase, .. }) => {
            (message_kind(item.kind), phase.map(|p| p.as_str()))
        }
        OutPayload::Item(other) => (other.type_name(), None),
    }
}

/// A message's type as the summary counts it: by its kind.
fn message_kind(kind: ItemKind) -> &'static str {
    match kind {
        ItemKind::ContextualUser => "message:contextual_user",
        ItemKind::RealUser => "message:user",
        ItemKind::Developer => "message:developer",
        ItemKind::Assistant => "message:assistant",
        ItemKind::Reasoning | ItemKind::Call | ItemKind::Output | ItemKind::Compacted => "message",
    }
}

/// The `type` of a message item.
const ITEM_MESSAGE: &str = crate::model::rollout::wire::item::MESSAGE;

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::audit::Decision;
    use crate::input::SourceFormat;
    use crate::model::responses::Format;
    use crate::model::Location;
    use crate::pipeline::process_bytes;
    use std::path::Path;

    /// A record of `t.jsonl`, line 1 (also the reader's tests' record).
    pub(in crate::pipeline) fn record(bytes: &[u8]) -> RawRecord {
        RawRecord {
            location: Location {
                path: "t.jsonl".into(),
                line: 1,
                byte_offset: 0,
                element: None,
            },
            bytes: bytes::Bytes::copy_from_slice(bytes),
            truncated: false,
            oversized: None,
            id: RecordId::of(bytes),
            magic: None,
        }
    }

    /// A context over the file `t.jsonl` with `rules`, converting to Codex rollouts.
    fn context<'a>(
        rules: &'a RuleSet,
        cache: &'a crate::input::format::FileCache,
        batch: &'a BatchIndex,
    ) -> WorkContext<'a> {
        WorkContext {
            read: ReadContext {
                rules,
                path: Path::new("t.jsonl"),
                key: "t.jsonl",
                root: None,
                follow: false,
                cache,
            },
            batch,
            output: &crate::output::sink::CodexHome,
            sample: None,
            dry_run: false,
            baseline: false,
            naming: None,
        }
    }

    /// One Chat Completions record through the pipeline.
    fn process_record(bytes: &[u8], rules: &RuleSet) -> Outcome {
        let mut work = Records::new(vec![(record(bytes), 0)], 0, SourceFormat::CHAT);
        let (cache, batch) = Default::default();
        let mut outcomes = process_work(&mut work, &context(rules, &cache, &batch));
        assert_eq!(outcomes.len(), 1, "one outcome per record");
        outcomes.remove(0)
    }

    /// The summary's counts come from these: every item counted once, under its kind and
    /// phase, whatever the order the kinds come in.
    #[test]
    fn item_kinds_are_counted_by_kind_and_phase_in_first_seen_order() {
        let kinds = [
            ("message:user", None),
            ("message:assistant", Some("commentary")),
            ("function_call", None),
            ("function_call_output", None),
            ("message:assistant", Some("commentary")),
            ("function_call", None),
            ("message:assistant", Some("final_answer")),
            ("message:assistant", None),
            ("message:user", None),
        ];
        assert_eq!(
            count_kinds(kinds.into_iter()),
            vec![
                ("message:user", None, 2),
                ("message:assistant", Some("commentary"), 2),
                ("function_call", None, 2),
                ("function_call_output", None, 1),
                ("message:assistant", Some("final_answer"), 1),
                ("message:assistant", None, 1),
            ]
        );
        assert!(count_kinds(std::iter::empty()).is_empty());
    }

    #[test]
    fn a_placeholder_is_accounted_and_the_conversation_written() {
        let rules = RuleSet::builtin().expect("built-in rules");
        let bytes = br#"{"messages":[
            {"role":"user","content":[{"type":"text","text":"see"},
                {"type":"file","file":{"filename":"a.pdf","file_data":"JVBERi0="}}]},
            {"role":"assistant","content":"ok"}]}"#;
        let outcome = process_record(bytes, &rules);
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
            vec![("message:user", None, 1), ("message:assistant", None, 1)]
        );
        assert!(done.relative.starts_with("sessions"));
        assert!(done.bytes.ends_with(b"\n"));
    }

    /// A format whose conversations are runs of lines sharing a `"c"` value; `{"drop":1}`
    /// lines are dropped by a rule, `{"bad":1}` refused, `{"lost":1}` forgotten (a reader bug).
    struct Runs;

    impl FormatReader for Runs {
        fn format(&self) -> crate::input::SourceFormat {
            crate::input::SourceFormat::CLAUDE_CODE
        }
        fn describe(&self) -> &'static str {
            "runs of lines sharing a `c` value"
        }
        fn granularity(&self) -> crate::input::format::Granularity {
            crate::input::format::Granularity::File
        }
        fn detect(&self, _: Option<&serde_json::Value>, _: &[u8]) -> bool {
            false
        }
        fn read(
            &self,
            records: Vec<InputRecord>,
            _: &ReadContext<'_>,
        ) -> crate::input::format::FileRead {
            use crate::input::format::{DroppedRecord, FileRead, SourceConversation};
            use crate::model::transcript::{Content, Message, Role, SourceNote};
            let mut read = FileRead::default();
            for record in records {
                let v = &record.value;
                if v.get("drop").is_some() {
                    read.dropped.push(DroppedRecord {
                        index: record.index,
                        rule: crate::rules::PolicyId::StructuralLine.into(),
                        what: "progress line".into(),
                    });
                } else if v.get("bad").is_some() {
                    read.refused
                        .push((record.index, InputError::NotARecord("bad line")));
                } else if let Some(text) = v.get("c").and_then(|c| c.as_str()) {
                    let role = Role::named(v["role"].as_str().unwrap_or("user").to_string());
                    let message = Message {
                        role,
                        content: Content::Text(text.to_string()),
                        ..Message::default()
                    };
                    match read.conversations.last_mut() {
                        Some(last) if v.get("next").is_none() => {
                            last.transcript.messages.push(message);
                            last.records.push(record.index);
                        }
                        _ => {
                            let mut transcript = Transcript::default();
                            transcript.messages.push(message);
                            transcript.source_notes.push(SourceNote {
                                rule: crate::rules::PolicyId::StructuralLine.into(),
                                what: "thinking signature".into(),
                                count: 1,
                                bytes_dropped: 4,
                            });
                            read.conversations.push(SourceConversation {
                                transcript,
                                records: vec![record.index],
                            });
                        }
                    }
                }
            }
            read
        }
    }

    #[test]
    fn every_record_of_a_source_work_ends_in_exactly_one_result() {
        let rules = RuleSet::builtin().expect("built-in rules");
        let lines: [&[u8]; 7] = [
            br#"{"c":"hi","role":"user"}"#,
            br#"{"drop":1}"#,
            br#"{"c":"hello","role":"assistant"}"#,
            br#"{"bad":1}"#,
            br#"not json"#,
            br#"{"lost":1}"#,
            br#"{"c":"again","role":"user","next":1}"#,
        ];
        let records = lines
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                let mut r = record(bytes);
                r.location.line = i as u64 + 1;
                (r, i as u64)
            })
            .collect();
        let mut work = Records::new(records, 0, crate::input::SourceFormat::CLAUDE_CODE);
        let (cache, batch) = Default::default();
        let outcomes = process_with(&Runs, &mut work, &context(&rules, &cache, &batch));
        assert_eq!(outcomes.len(), lines.len(), "one outcome per record");
        let mut converted = Vec::new();
        let mut refused = Vec::new();
        let mut merged = Vec::new();
        let mut dropped = 0;
        for (line, outcome) in (1..).zip(&outcomes) {
            match outcome {
                Outcome::Converted(done) => {
                    converted.push((done.line, done.records, done.decisions.clone()))
                }
                Outcome::Merged => merged.push(line),
                Outcome::Quarantined { entry, .. } => refused.push(entry.line),
                Outcome::Dropped { rule, .. } => {
                    assert_eq!(*rule, crate::rules::PolicyId::StructuralLine.into());
                    dropped += 1;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(merged, vec![3]);
        assert_eq!(dropped, 1);
        // Line 4 refused by the reader, 5 not JSON, 6 forgotten by the reader.
        assert_eq!(refused, vec![4, 5, 6]);
        assert_eq!(converted.len(), 2);
        assert_eq!((converted[0].0, converted[0].1), (1, 2));
        assert_eq!((converted[1].0, converted[1].1), (7, 1));
        let note = converted[0]
            .2
            .iter()
            .find(|d| d.action.name() == "source_note")
            .expect("the source note is a decision");
        assert_eq!(note.rule.as_str(), "policy.structural_line");
        assert_eq!(note.bytes_dropped, 4);
    }

    /// The kinds of outcomes, as text: `converted N` (its records), `merged`, `quarantined`,
    /// `dropped`, `not sampled`.
    fn kinds(outcomes: &[Outcome]) -> Vec<String> {
        let one = |outcome: &Outcome| match outcome {
            Outcome::Converted(done) => format!("converted {}", done.records),
            Outcome::Merged => "merged".to_string(),
            Outcome::Quarantined { .. } => "quarantined".to_string(),
            Outcome::NotSampled => "not sampled".to_string(),
            Outcome::Dropped { .. } => "dropped".to_string(),
        };
        outcomes.iter().map(one).collect()
    }

    /// The audit line's writer writes what serde's derive of its declaration writes, with
    /// every optional field left out or set, and texts that need escaping.
    #[test]
    fn the_audit_line_is_what_serde_json_writes() {
        let Outcome::Converted(mut done) = round_trip(&record(b"{\"messages\":[]}"), 7) else {
            panic!("not converted");
        };
        let same = |done: &Converted| {
            let hand = done.audit_bytes().expect("audit line");
            let serde = serde_json::to_vec(&done.audit_fields()).expect("serde line");
            assert_eq!(
                String::from_utf8_lossy(&hand),
                String::from_utf8_lossy(&serde)
            );
        };
        same(&done);
        done.source = "dir/\"quoted\"\\ \u{1}\u{1f}\u{7f} \u{e9}\u{1f600}.jsonl".into();
        done.line = u64::MAX;
        done.id = "018bcfe5-6800-7ef9-8668-7e3980c2fcb3".into();
        done.digest = "9d6771361f3d6a77e7702f42180ee1b5".into();
        done.account = Account {
            bytes_in: 1157,
            bytes_out: 0,
            bytes_dropped: 10,
            bytes_added: usize::MAX,
        };
        same(&done);
        done.decisions = vec![
            Decision {
                message: Some(0),
                rule: crate::rules::RuleRef::File("first \"leading\" system".into()),
                action: crate::audit::Action::Classified {
                    slot: crate::rules::Slot::BaseInstructions,
                },
                bytes_dropped: 0,
                bytes_added: 3,
            },
            Decision {
                message: None,
                rule: crate::rules::RuleRef::RoleAliases,
                action: crate::audit::Action::RoleAliased {
                    from: "human".into(),
                    to: "user".into(),
                },
                bytes_dropped: 12,
                bytes_added: 0,
            },
        ];
        done.records = 3;
        same(&done);
        done.links = Links {
            format: Some(SourceFormat::named("claude-code")),
            title: Some("a \"title\"\n".into()),
            source_id: Some("s1".into()),
            parent_source_id: Some("p\\0".into()),
            source_version: Some("1.0.\t2".into()),
            source_cwd: Some("/home/\u{e9}".into()),
        };
        same(&done);
        done.links.format = Some(SourceFormat::CHAT);
        done.links.title = None;
        done.links.source_version = None;
        done.records = 0;
        same(&done);
    }

    #[test]
    fn a_files_bytes_go_through_the_pipeline_as_its_format_reads_them() {
        let rules = RuleSet::builtin().expect("built-in rules");
        let batch = BatchIndex::default();
        let path = Path::new("in/session.jsonl");
        let claude = br#"{"type":"user","timestamp":"2025-12-24T10:00:00.000Z","sessionId":"s1","message":{"role":"user","content":"hi"},"uuid":"u1"}

{"type":"assistant","timestamp":"2025-12-24T10:00:05.000Z","sessionId":"s1","message":{"role":"assistant","content":[{"type":"text","text":"hello"}]},"uuid":"u2","parentUuid":"u1"}
not json
"#;
        let read = |bytes: &[u8], from| {
            let outcomes = process_bytes(
                bytes.to_vec(),
                path,
                "session.jsonl",
                from,
                &rules,
                &batch,
                Format::Codex,
            );
            kinds(&outcomes)
        };
        // A session's lines are read together, as one piece of work: one conversation of two
        // records, the bad line refused on its own; detected or forced alike.
        let whole = vec!["converted 2", "merged", "quarantined"];
        assert_eq!(read(claude, None), whole);
        assert_eq!(read(claude, Some(SourceFormat::CLAUDE_CODE)), whole);
        // Chat Completions records one by one; forced, a session's lines are not chat records.
        let chat = b"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}\n[{\"role\":\"user\",\"content\":\"b\"}]\n";
        assert_eq!(read(chat, None), vec!["converted 1", "converted 1"]);
        let forced = read(claude, Some(SourceFormat::CHAT));
        assert_eq!(forced, vec!["quarantined"; 3]);
        // ShareGPT rows, each its own piece of work.
        let rows =
            br#"[{"conversations":[{"from":"human","value":"q"},{"from":"gpt","value":"a"}]},
            {"conversations":[{"from":"human","value":"r"},{"from":"gpt","value":"b"}]}]"#;
        let rows = read(rows, Some(SourceFormat::SHAREGPT));
        assert_eq!(rows, vec!["converted 1", "converted 1"]);
    }

    #[test]
    fn a_rule_quarantine_names_its_class_stage_and_rule() {
        let rules = RuleSet::builtin().expect("built-in rules");
        let bytes = br#"{"messages":[{"role":"wizard","content":"x"}]}"#;
        let outcome = process_record(bytes, &rules);
        let Outcome::Quarantined { entry, why } = outcome else {
            panic!("expected a quarantine, got {outcome:?}");
        };
        assert_eq!(entry.class, crate::model::quarantine::QuarantineClass::Rule);
        assert_eq!(
            entry.class.stage(),
            crate::model::quarantine::Stage::Convert
        );
        assert!(
            entry.reason.contains("rule `policy.unknown_role`"),
            "{}",
            entry.reason
        );
        let Refusal::Rule(err) = *why else {
            panic!("expected a rule's refusal, got {why:?}");
        };
        assert_eq!(err.rule, crate::rules::PolicyId::UnknownRole.into());
        assert_eq!(entry.raw(), bytes.to_vec());
    }
}
