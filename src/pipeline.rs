//! The convert pipeline: discover → read (one thread) → parse, convert, validate, write
//! (rayon, in parallel) → quarantine and counters (in input order).
//!
//! Records travel in bounded batches, so memory stays flat in the archive's size; results are
//! collected in input order, so every output (rollouts, quarantine, summary) is deterministic
//! whatever the thread count. Per-record problems are outcomes, not errors; only discovery and
//! output failures stop the run.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use thiserror::Error;

use crate::audit::accounting::{account, transcript_bytes};
use crate::audit::summary::{bump, DamageReport};
use crate::audit::{Decision, Summary};
use crate::convert::{convert, ConvertError, ItemKind, OutPayload, RecordKey};
use crate::input::batch::BatchIndex;
use crate::input::{extract, parse_record, InputError};
use crate::model::rollout::ResponseItem;
use crate::output::{Home, OutputError, QuarantineEntry};
use crate::rules::{InvalidUnicode, RuleSet};
use crate::source::{discover, records, Damage, RawRecord, RecordEvent, SourceError, SourceFile};
use crate::validate::{self, Invariant};

const BATCH_RECORDS: usize = 512;
const BATCH_BYTES: usize = 16 << 20;

#[derive(Debug, Error)]
pub enum PipelineError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("cannot start the worker pool: {0}")]
    Pool(String),
}

/// What the caller asks for.
#[derive(Debug, Clone)]
pub struct Options {
    pub inputs: Vec<PathBuf>,
    pub out: PathBuf,
    pub dry_run: bool,
    pub jobs: Option<usize>,
    /// Benchmark baseline: decompress, split, parse, serialise and write each record as is,
    /// through the same reader, batches and writer; no conversion. `samples/bench.sh` compares.
    pub baseline: bool,
}

/// Progress callbacks; the command decides how to show them.
pub trait Progress: Sync {
    fn start(&self, files: u64, bytes: u64);
    /// `records` and `bytes` (decompressed) done in this batch; `disk` bytes of the input files
    /// read so far in all (compressed bytes for compressed files).
    fn advance(&self, records: u64, bytes: u64, disk: u64);
    fn damage(&self, damage: &Damage);
}

/// The result of one record.
enum Outcome {
    Converted(Box<Converted>),
    Quarantined(QuarantineEntry),
}

/// A converted record; the serialised fields are its line in `conversations.jsonl`.
#[derive(serde::Serialize)]
struct Converted {
    source: String,
    line: u64,
    id: String,
    path: String,
    account: crate::audit::accounting::Account,
    decisions: Vec<Decision>,
    #[serde(skip)]
    items: Vec<(&'static str, Option<&'static str>)>,
    #[serde(skip)]
    events: (u64, u64),
    #[serde(skip)]
    ignored: Vec<String>,
}

enum Work {
    Record(RawRecord, usize, u64),
    Blank,
    Damage(Damage),
}

/// Runs the whole conversion and returns the summary.
pub fn run(
    options: &Options,
    rules: &RuleSet,
    progress: &dyn Progress,
) -> Result<Summary, PipelineError> {
    let started = Instant::now();
    let mut files = discover(&options.inputs, Some(&options.out))?;
    dedupe_keys(&mut files);
    let repair = rules.policy.invalid_unicode == InvalidUnicode::Replace;
    let batch_index = Arc::new(BatchIndex::scan(&files, &rules.input, repair));
    let files = Arc::new(files);
    let home = Home::new(&options.out);
    let mut quarantine = BufWriter::new(home.create_run_file("quarantine.jsonl")?);
    let mut conversations = BufWriter::new(home.create_run_file("conversations.jsonl")?);
    let mut summary = Summary {
        rules: rules.names.clone(),
        codex_version: rules.codex_version.clone(),
        dry_run: options.dry_run,
        files: files.len() as u64,
        ..Summary::default()
    };
    progress.start(files.len() as u64, files.iter().map(|f| f.size).sum());

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(options.jobs.unwrap_or(0))
        .build()
        .map_err(|e| PipelineError::Pool(e.to_string()))?;

    let (sender, receiver) = sync_channel::<Vec<Work>>(2);
    let reader_files = Arc::clone(&files);
    let reader_index = Arc::clone(&batch_index);
    // Bytes on disk read so far, across files: what the progress bar measures.
    let disk_read = Arc::new(AtomicU64::new(0));
    let reader_disk = Arc::clone(&disk_read);
    let reader = std::thread::spawn(move || {
        let mut batch = Vec::with_capacity(BATCH_RECORDS);
        let mut batch_bytes = 0;
        let mut disk_before = 0u64;
        for (index, file) in reader_files.iter().enumerate() {
            let mut ordinal = 0u64;
            let file_counter = Arc::new(AtomicU64::new(0));
            // Results files were read ahead: only what is not a result line goes through here.
            let events: Box<dyn Iterator<Item = (RecordEvent, Option<u64>)>> =
                match reader_index.leftovers.get(&index) {
                    Some(left) => Box::new(left.iter().map(|(e, o)| (clone_event(e), Some(*o)))),
                    None => {
                        let reader = records(file);
                        let counter = reader.disk_counter();
                        file_counter.store(0, Ordering::Relaxed);
                        let file_counter = Arc::clone(&file_counter);
                        Box::new(reader.map(move |e| {
                            file_counter.store(counter.load(Ordering::Relaxed), Ordering::Relaxed);
                            (e, None)
                        }))
                    }
                };
            for (event, given) in events {
                match event {
                    RecordEvent::Record(record) => {
                        batch_bytes += record.bytes.len();
                        batch.push(Work::Record(record, index, given.unwrap_or(ordinal)));
                        ordinal += 1;
                    }
                    RecordEvent::Blank => batch.push(Work::Blank),
                    RecordEvent::Damage(damage) => batch.push(Work::Damage(damage)),
                }
                if batch.len() >= BATCH_RECORDS || batch_bytes >= BATCH_BYTES {
                    let in_file = file_counter.load(Ordering::Relaxed).min(file.size);
                    reader_disk.store(disk_before + in_file, Ordering::Relaxed);
                    if sender.send(std::mem::take(&mut batch)).is_err() {
                        return;
                    }
                    batch_bytes = 0;
                }
            }
            disk_before += file.size;
        }
        reader_disk.store(disk_before, Ordering::Relaxed);
        if !batch.is_empty() {
            let _ = sender.send(batch);
        }
    });

    let mut write_error: Option<OutputError> = None;
    for batch in receiver {
        let outcomes: Vec<Option<Result<Outcome, OutputError>>> = pool.install(|| {
            batch
                .par_iter()
                .map(|work| match work {
                    Work::Record(record, _, ordinal) if options.baseline => {
                        Some(round_trip(record, *ordinal, &home, options.dry_run))
                    }
                    Work::Record(record, file, ordinal) => Some(process(
                        record,
                        &files[*file],
                        *ordinal,
                        rules,
                        &batch_index,
                        &home,
                        options.dry_run,
                    )),
                    Work::Blank | Work::Damage(_) => None,
                })
                .collect()
        });
        let mut batch_bytes = 0u64;
        let mut batch_records = 0u64;
        for (work, outcome) in batch.iter().zip(outcomes) {
            match work {
                Work::Blank => summary.blank_lines += 1,
                Work::Damage(damage) => {
                    progress.damage(damage);
                    summary.damaged_files.push(DamageReport {
                        file: damage.location.path.to_string(),
                        line: damage.location.line,
                        byte_offset: damage.location.byte_offset,
                        compressed_offset: damage.compressed_offset,
                        message: damage.message.clone(),
                    });
                }
                Work::Record(record, _, _) => {
                    summary.records += 1;
                    batch_records += 1;
                    batch_bytes += record.bytes.len() as u64;
                    match outcome {
                        None => {}
                        Some(Err(err)) => {
                            write_error.get_or_insert(err);
                        }
                        Some(Ok(Outcome::Quarantined(entry))) => {
                            summary.quarantined += 1;
                            bump(&mut summary.quarantine_reasons, &entry.class, 1);
                            if entry.class == "invariant" {
                                let name = entry
                                    .reason
                                    .split(']')
                                    .next()
                                    .unwrap_or("")
                                    .trim_start_matches('[');
                                bump(&mut summary.violations, name, 1);
                            }
                            serde_json::to_writer(&mut quarantine, &entry)
                                .map_err(|e| io_error(&home, "quarantine.jsonl", e.into()))?;
                            quarantine
                                .write_all(b"\n")
                                .map_err(|e| io_error(&home, "quarantine.jsonl", e))?;
                        }
                        Some(Ok(Outcome::Converted(done))) => {
                            summary.converted += 1;
                            record_converted(&mut summary, &done);
                            serde_json::to_writer(&mut conversations, &*done)
                                .map_err(|e| io_error(&home, "conversations.jsonl", e.into()))?;
                            conversations
                                .write_all(b"\n")
                                .map_err(|e| io_error(&home, "conversations.jsonl", e))?;
                        }
                    }
                }
            }
        }
        summary.bytes_read += batch_bytes;
        progress.advance(
            batch_records,
            batch_bytes,
            disk_read.load(Ordering::Relaxed),
        );
        if write_error.is_some() {
            break;
        }
    }
    let _ = reader.join();
    if let Some(err) = write_error {
        return Err(err.into());
    }
    // Batch results: joined to a request, or quarantined (no request claimed them).
    for result in batch_index.results() {
        summary.records += 1;
        if result.used() {
            summary.joined += 1;
            continue;
        }
        summary.quarantined += 1;
        bump(
            &mut summary.quarantine_reasons,
            "batch_result_without_request",
            1,
        );
        let id = result.record.location.clone();
        let reason =
            format!("{id}: batch result line whose request (same custom_id) is not in the input");
        let entry = QuarantineEntry::new(
            &result.record.location,
            "batch_result_without_request",
            reason,
            &result.record.bytes,
        );
        serde_json::to_writer(&mut quarantine, &entry)
            .map_err(|e| io_error(&home, "quarantine.jsonl", e.into()))?;
        quarantine
            .write_all(b"\n")
            .map_err(|e| io_error(&home, "quarantine.jsonl", e))?;
    }
    quarantine
        .flush()
        .map_err(|e| io_error(&home, "quarantine.jsonl", e))?;
    conversations
        .flush()
        .map_err(|e| io_error(&home, "conversations.jsonl", e))?;
    summary.seconds = started.elapsed().as_secs_f64();
    let mut file = home.create_run_file("summary.json")?;
    let mut for_file = summary.clone();
    // Timing varies run to run; the file on disk stays byte-identical for the same input.
    for_file.seconds = 0.0;
    serde_json::to_writer_pretty(&mut file, &for_file)
        .map_err(|e| io_error(&home, "summary.json", e.into()))?;
    file.write_all(b"\n")
        .map_err(|e| io_error(&home, "summary.json", e))?;
    Ok(summary)
}

fn io_error(home: &Home, name: &str, source: std::io::Error) -> OutputError {
    OutputError::Write {
        path: home.run_file(name).display().to_string(),
        source,
    }
}

/// Two inputs with the same relative key (`a/x.jsonl` and `b/x.jsonl` given as separate
/// arguments) would get the same session ids: the later ones get a `#n` suffix.
fn dedupe_keys(files: &mut [SourceFile]) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for file in files.iter_mut() {
        let count = seen.entry(file.key.clone()).or_insert(0);
        *count += 1;
        if *count > 1 {
            file.key = format!("{}#{}", file.key, count);
        }
    }
}

fn record_converted(summary: &mut Summary, done: &Converted) {
    for (kind, phase) in &done.items {
        bump(&mut summary.items, kind, 1);
        if *kind == "message:assistant" {
            bump(&mut summary.phases, phase.unwrap_or("none"), 1);
        }
    }
    bump(&mut summary.events, "user_message", done.events.0);
    bump(&mut summary.events, "agent_message", done.events.1);
    for decision in &done.decisions {
        bump(&mut summary.rules_fired, &decision.rule, 1);
        bump(&mut summary.actions, decision.action.name(), 1);
    }
    for field in &done.ignored {
        bump(&mut summary.ignored_fields, field, 1);
    }
    summary.text_bytes_in += done.account.bytes_in as u64;
    summary.text_bytes_out += done.account.bytes_out as u64;
    summary.text_bytes_dropped += done.account.bytes_dropped as u64;
    summary.text_bytes_added += done.account.bytes_added as u64;
}

fn input_class(err: &InputError) -> &'static str {
    match err {
        InputError::InvalidJson(_) => "invalid_json",
        InputError::InvalidUnicode(_) => "invalid_unicode",
        InputError::Truncated => "truncated",
        InputError::NotARecord(_) => "not_a_record",
        InputError::RolloutLine(_) => "rollout_line",
        InputError::BatchResultWithoutRequest(_) => "batch_result_without_request",
        InputError::NoMessages(_) => "no_messages",
        InputError::EmptyMessages(_) => "empty_messages",
        InputError::BadMessage { .. } => "bad_message",
    }
}

/// One record through parse, extract, convert, validate and write.
fn process(
    record: &RawRecord,
    file: &SourceFile,
    ordinal: u64,
    rules: &RuleSet,
    batch: &BatchIndex,
    home: &Home,
    dry_run: bool,
) -> Result<Outcome, OutputError> {
    let location = &record.location;
    let quarantine = |class: &str, reason: String| {
        Ok(Outcome::Quarantined(QuarantineEntry::new(
            location,
            class,
            format!("{location}: {reason}"),
            &record.bytes,
        )))
    };
    if record.truncated {
        return quarantine("truncated", InputError::Truncated.to_string());
    }
    let repair = rules.policy.invalid_unicode == InvalidUnicode::Replace;
    let (mut value, repairs) = match parse_record(&record.bytes, repair) {
        Ok(parsed) => parsed,
        Err(err) => return quarantine(input_class(&err), err.to_string()),
    };
    batch.join(&mut value);
    let mut transcript = match extract(value, &rules.input) {
        Ok(t) => t,
        Err(err) => return quarantine(input_class(&err), err.to_string()),
    };
    transcript.meta.unicode_repairs = repairs;
    let ignored: Vec<String> = transcript
        .ignored_fields
        .iter()
        .map(|f| format!("record.{f}"))
        .chain(
            transcript
                .messages
                .iter()
                .flat_map(|m| m.ignored_fields.iter().map(|f| format!("message.{f}"))),
        )
        .chain(
            transcript
                .messages
                .iter()
                .filter(|m| m.name.is_some() && m.role != "function")
                .map(|_| "message.name".to_string()),
        )
        .collect();
    let bytes_in = transcript_bytes(&transcript);
    let key = RecordKey {
        source: &file.key,
        ordinal,
        salt: 0,
    };
    let conversation = match convert(transcript, rules, &key) {
        Ok(c) => c,
        Err(ConvertError {
            rule,
            reason,
            message,
        }) => {
            let at = message
                .map(|m| format!(" at message {m}"))
                .unwrap_or_default();
            return quarantine("rule", format!("{reason}{at} (rule `{rule}`)"));
        }
    };
    let bytes = conversation.to_bytes();
    let violations = validate::check(&bytes, Some(&conversation.meta.id), &rules.markers);
    if let Some(first) = violations.first() {
        return quarantine(
            "invariant",
            format!("[{}] rollout {}", first.invariant, first),
        );
    }
    let account = account(bytes_in, &conversation);
    if !account.balanced() {
        return quarantine(
            "invariant",
            format!(
                "[{}] text bytes in {} + added {} != out {} + dropped {}",
                Invariant::Accounting,
                account.bytes_in,
                account.bytes_added,
                account.bytes_out,
                account.bytes_dropped
            ),
        );
    }
    let relative = conversation.relative_path();
    if !dry_run {
        home.write_atomic(&relative, &bytes)?;
    }
    let items = conversation
        .items
        .iter()
        .map(|item| match &item.payload {
            OutPayload::Compacted(_) => ("compacted", None),
            OutPayload::Item(ResponseItem::Message { phase, .. }) => {
                let kind = match item.kind {
                    ItemKind::ContextualUser => "message:contextual_user",
                    ItemKind::RealUser => "message:user",
                    ItemKind::Developer => "message:developer",
                    ItemKind::Assistant => "message:assistant",
                    ItemKind::Reasoning
                    | ItemKind::Call
                    | ItemKind::Output
                    | ItemKind::Compacted => "message",
                };
                (kind, phase.map(|p| p.as_str()))
            }
            OutPayload::Item(other) => (item_type(other), None),
        })
        .collect();
    let events = (
        conversation
            .items
            .iter()
            .filter(|i| i.kind == ItemKind::RealUser)
            .count() as u64,
        conversation
            .items
            .iter()
            .filter(|i| i.kind == ItemKind::Assistant)
            .count() as u64,
    );
    Ok(Outcome::Converted(Box::new(Converted {
        source: location.path.to_string(),
        line: location.line,
        id: conversation.meta.id.clone(),
        path: relative.display().to_string(),
        decisions: conversation.decisions,
        items,
        events,
        account,
        ignored,
    })))
}

/// The benchmark baseline for one record: parse, serialise, write. What `convert` must stay
/// close to in throughput.
fn round_trip(
    record: &RawRecord,
    ordinal: u64,
    home: &Home,
    dry_run: bool,
) -> Result<Outcome, OutputError> {
    let location = &record.location;
    let value = match parse_record(&record.bytes, true) {
        Ok((value, _)) => value,
        Err(err) => {
            return Ok(Outcome::Quarantined(QuarantineEntry::new(
                location,
                input_class(&err),
                err.to_string(),
                &record.bytes,
            )))
        }
    };
    let mut bytes = serde_json::to_vec(&value).unwrap_or_default();
    bytes.push(b'\n');
    let relative =
        PathBuf::from("baseline").join(format!("{ordinal:09}-{}.jsonl", location.byte_offset));
    if !dry_run {
        home.write_atomic(&relative, &bytes)?;
    }
    Ok(Outcome::Converted(Box::new(Converted {
        source: location.path.to_string(),
        line: location.line,
        id: String::new(),
        path: relative.display().to_string(),
        account: crate::audit::accounting::Account::default(),
        decisions: Vec::new(),
        items: Vec::new(),
        events: (0, 0),
        ignored: Vec::new(),
    })))
}

fn clone_event(event: &RecordEvent) -> RecordEvent {
    match event {
        RecordEvent::Record(r) => RecordEvent::Record(r.clone()),
        RecordEvent::Blank => RecordEvent::Blank,
        RecordEvent::Damage(d) => RecordEvent::Damage(d.clone()),
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
