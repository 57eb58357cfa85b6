//! Batch API result files: join each result line to its request by `custom_id`.
//!
//! OpenAI Batch archives keep requests (`{"custom_id","body":{"messages"}}`) and results
//! (`{"custom_id","response":{"body":{"choices":[{"message"}]}},"error"}`) in separate files. A
//! file whose first record is a result line is read ahead of the conversion; its results are
//! held by `custom_id` (the `response` object only), and a request with that id gets its
//! `response` before it is converted, so the reply is appended like a same-line result. A result
//! no request claims is quarantined at the end of the run. Memory grows with the results held,
//! not with the requests.
//!
//! The results files are found among every file of the walk, whatever part of it the run
//! reads: a shard (`--shard K/N`) joins its requests with results wherever their files sit,
//! and [`BatchIndex::keep`] then says which results the run counts (those of its own files,
//! or of its own ranges of a split file), and which results files it replays.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::fields::{lenient_struct, object_or_default, Loose};
use super::parse::parse_record;
use super::InputError;
use crate::model::location::Location;
use crate::rules::InputRules;
use crate::source::open::ArchiveLines;
use crate::source::{records, Compression, RawRecord, RecordEvent, SourceFile};

/// One result line held for its request.
#[derive(Debug)]
pub struct BatchResult {
    /// The result line (its bytes only when the run counts it: see [`BatchIndex::keep`]).
    pub record: RawRecord,
    /// Its file: its index among the run's files, once [`BatchIndex::keep`] kept it.
    pub file: usize,
    /// Its file's place in the walk.
    pub walk_file: usize,
    pub ordinal: u64,
    /// The key the result is given to its request under: `response` (OpenAI) or `result`
    /// (Anthropic Message Batches).
    key: &'static str,
    record_id: String,
    response: Value,
    used: AtomicBool,
    /// The run counts it: joined, or quarantined when no request claimed it.
    own: bool,
}

impl BatchResult {
    /// The `custom_id` that joins it to its request.
    pub fn custom_id(&self) -> &str {
        &self.record_id
    }

    pub fn used(&self) -> bool {
        self.used.load(Ordering::Relaxed)
    }

    /// Why an Anthropic result holds no message (`errored`, `expired`, `canceled`), if so.
    pub fn failure(&self) -> Option<InputError> {
        if self.key != "result" {
            return None;
        }
        let id = self.record_id.clone();
        batch_result(self.response.clone(), &id).err()
    }
}

/// The results read ahead, and what else the results files held.
#[derive(Debug, Default)]
pub struct BatchIndex {
    results: HashMap<String, BatchResult>,
    /// Events of results files that are not result lines (blank lines, bad lines, requests),
    /// with their record ordinal, to go through the normal pipeline, by the file's index
    /// (its place in the walk until [`BatchIndex::keep`]; then among the run's files).
    pub leftovers: HashMap<usize, Vec<(RecordEvent, u64)>>,
    /// Each results file's compression, by the same index as `leftovers`.
    compression: HashMap<usize, Compression>,
    /// The places in the walk of the results files, in order.
    results_files: Vec<usize>,
    /// The places in the walk of the files whose first record is a Batch request line
    /// (`custom_id` without a result): where requests most likely are.
    request_files: Vec<usize>,
}

/// Keeps an event of a results file that is not a result line. Blank lines in a row are one
/// event counting them: a results file of newlines is held in constant memory.
fn push_leftover(leftovers: &mut Vec<(RecordEvent, u64)>, event: RecordEvent, ordinal: u64) {
    match (leftovers.last_mut(), event) {
        (Some((RecordEvent::Blank(run), _)), RecordEvent::Blank(more)) => *run += more,
        (_, event) => leftovers.push((event, ordinal)),
    }
}

/// `Some(custom_id)` when `value` is a result line without messages of its own: an OpenAI
/// Batch result (`response` or `error`) or an Anthropic Message Batches result
/// (`result: {type: succeeded | errored | expired | canceled, ...}`, no `params`).
fn result_id(value: &Value, rules: &InputRules) -> Option<String> {
    let id = value.get("custom_id")?.as_str()?;
    let has_result = value.get("response").is_some_and(Value::is_object)
        || value.get("error").is_some_and(|e| !e.is_null())
        || is_anthropic_result(value);
    let has_messages =
        rules.messages_at.iter().any(|p| p.get(value).is_some()) || value.get("params").is_some();
    (has_result && !has_messages).then(|| id.to_string())
}

/// An Anthropic Message Batches result line.
pub fn is_anthropic_result(value: &Value) -> bool {
    value.get("custom_id").is_some_and(Value::is_string)
        && value.get("params").is_none()
        && value
            .get("result")
            .and_then(|r| r.get("type"))
            .is_some_and(Value::is_string)
}

/// A Message Batches result: succeeded with a message, or why not.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Outcome {
    #[serde(rename = "type")]
    kind: Loose<String>,
    message: Option<Value>,
    #[serde(deserialize_with = "lenient_struct")]
    error: Option<Failure>,
}

/// An `errored` result's error: the API's error object, or its body (`{type, error}`) with
/// the object inside. A reason is the first one present, read when it is text.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Failure {
    #[serde(deserialize_with = "lenient_struct")]
    error: Option<Reason>,
    #[serde(flatten)]
    own: Reason,
}

/// An error object's message and type (present, `null` too).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Reason {
    message: Loose<Value>,
    #[serde(rename = "type")]
    kind: Loose<Value>,
}

/// A Message Batches result: its message, or why there is none.
pub fn batch_result(result: Value, custom_id: &str) -> Result<Value, InputError> {
    let outcome: Outcome = object_or_default(result);
    let kind = outcome.kind.0.unwrap_or_else(|| "(no type)".to_string());
    if kind == "succeeded" {
        return Ok(outcome.message.unwrap_or(Value::Null));
    }
    let text = |value: Option<Value>| match value {
        Some(Value::String(text)) => Some(text),
        _ => None,
    };
    let reason = outcome.error.and_then(|error| {
        let inner = error.error.unwrap_or_default();
        text(inner.message.0.or(error.own.message.0))
            .or_else(|| text(inner.kind.0.or(error.own.kind.0)))
    });
    let reason = reason.unwrap_or_else(|| match kind.as_str() {
        "expired" => "the batch expired before the request was processed".to_string(),
        "canceled" => "the batch was canceled before the request was processed".to_string(),
        _ => "no message".to_string(),
    });
    Err(InputError::BatchFailed {
        custom_id: custom_id.to_string(),
        kind,
        reason,
    })
}

/// How [`BatchIndex::scan`] reads a file: up to the run's `--max-record-bytes` a record, as
/// long as no signal came, a zip as the run reads it.
struct Limits<'a> {
    max_record_bytes: u64,
    stop: &'a Arc<AtomicUsize>,
    archive: Option<ArchiveLines>,
}

impl Limits<'_> {
    fn records(&self, file: &SourceFile) -> crate::source::split::RecordReader {
        records(file, self.archive)
            .max_record_bytes(self.max_record_bytes)
            .stop(self.stop)
    }
}

/// What a file's first record says it is, to [`BatchIndex::scan`].
enum First {
    /// A Batch API result line: the file is read whole.
    Results,
    /// A line with a string `custom_id` (a Batch API request): a file results may join.
    Requests,
    /// Anything else, no record at all, or a signal came first.
    Other,
}

impl First {
    fn of(file: &SourceFile, rules: &InputRules, repair: bool, limits: &Limits<'_>) -> First {
        if limits.stop.load(Ordering::Relaxed) != 0 {
            return First::Other;
        }
        // Blank lines before the first record are skipped; a damage ends the file. A first
        // record past `--max-record-bytes` is read no further than the limit, as the run
        // reads it (its head is then no JSON: not a Batch file).
        let first = limits.records(file).find_map(|event| match event {
            RecordEvent::Record(record) => Some(record),
            RecordEvent::Blank(_) | RecordEvent::Damage(_) => None,
        });
        let Some(first) = first else {
            return First::Other;
        };
        let Some((value, _)) = parse_record(&first.bytes, repair).ok() else {
            return First::Other;
        };
        if result_id(&value, rules).is_some() {
            First::Results
        } else if value.get("custom_id").is_some_and(Value::is_string) {
            First::Requests
        } else {
            First::Other
        }
    }
}

impl BatchIndex {
    /// Reads ahead every file whose first record is a batch result line. Stops early, with
    /// what it found so far, once `stop` holds a signal (the caller then ends the run).
    ///
    /// Every file's first record is read on `pool`, the files at once: on the main thread,
    /// before any conversion starts, that look would be a run's largest serial stage over many
    /// files (samples/BENCHMARKS.md). Only a results file is then read whole, in order.
    ///
    /// Records are read as the run reads them, up to `--max-record-bytes` (`max_record_bytes`):
    /// a longer one is held as its head only, and the run quarantines it as `too_large`.
    pub fn scan(
        files: &[SourceFile],
        rules: &InputRules,
        repair: bool,
        max_record_bytes: u64,
        stop: &Arc<AtomicUsize>,
        pool: &rayon::ThreadPool,
    ) -> BatchIndex {
        use rayon::prelude::*;
        let limits = Limits {
            max_record_bytes,
            stop,
            archive: super::format::archive_lines(),
        };
        let firsts: Vec<First> = pool.install(|| {
            files
                .par_iter()
                .map(|file| First::of(file, rules, repair, &limits))
                .collect()
        });
        let mut index = BatchIndex::default();
        for (file_index, file) in files.iter().enumerate() {
            if stop.load(Ordering::Relaxed) != 0 {
                break;
            }
            match firsts.get(file_index) {
                Some(First::Results) => {}
                Some(First::Requests) => {
                    index.request_files.push(file_index);
                    continue;
                }
                Some(First::Other) | None => continue,
            }
            let mut events = limits.records(file);
            let compression = events.compression();
            // Blank lines before the first record are counted, never kept (a file of newlines
            // is read in constant memory); a damage ends the file.
            let mut head: Vec<(RecordEvent, u64)> = Vec::new();
            let first = loop {
                match events.next() {
                    Some(RecordEvent::Record(record)) => break Some(record),
                    Some(other) => push_leftover(&mut head, other, 0),
                    None => break None,
                }
            };
            let Some(first) = first else { continue };
            let first_value = parse_record(&first.bytes, repair).ok().map(|(v, _)| v);
            let is_results = first_value
                .as_ref()
                .is_some_and(|v| result_id(v, rules).is_some());
            if !is_results {
                if first_value.is_some_and(|v| v.get("custom_id").is_some_and(Value::is_string)) {
                    index.request_files.push(file_index);
                }
                continue;
            }
            let mut leftovers = head;
            let mut ordinal = 0u64;
            for event in std::iter::once(RecordEvent::Record(first)).chain(events) {
                let RecordEvent::Record(record) = event else {
                    push_leftover(&mut leftovers, event, ordinal);
                    continue;
                };
                let parsed = parse_record(&record.bytes, repair).ok();
                let id = parsed.as_ref().and_then(|(v, _)| result_id(v, rules));
                match (id, parsed) {
                    (Some(id), Some((mut value, _))) if !index.results.contains_key(&id) => {
                        // Kept until its request is read, or freed by `keep` if another
                        // shard counts it: either way, apart from its neighbours' block.
                        let mut record = record;
                        record.detach();
                        let key = if is_anthropic_result(&value) {
                            "result"
                        } else {
                            "response"
                        };
                        let response = value
                            .get_mut(key)
                            .map(std::mem::take)
                            .unwrap_or(Value::Null);
                        index.results.insert(
                            id.clone(),
                            BatchResult {
                                record,
                                file: file_index,
                                walk_file: file_index,
                                ordinal,
                                key,
                                record_id: id.clone(),
                                response,
                                used: AtomicBool::new(false),
                                own: true,
                            },
                        );
                    }
                    _ => leftovers.push((RecordEvent::Record(record), ordinal)),
                }
                ordinal += 1;
            }
            index.leftovers.insert(file_index, leftovers);
            index.compression.insert(file_index, compression);
            index.results_files.push(file_index);
        }
        index
    }

    /// Keeps what one run needs of a scan of the whole walk: every result (any request the
    /// run reads may be joined with any of them), the leftovers of the results files the run
    /// reads, under their index among the run's files (`run_of[place in the walk]`), and
    /// which results the run counts (`own(place in the walk, location)`). The bytes of the
    /// results it does not count are freed: only a result line quarantined needs them.
    pub fn keep(&mut self, run_of: &[Option<usize>], own: impl Fn(usize, &Location) -> bool) {
        let run = |walk: usize| run_of.get(walk).copied().flatten();
        for result in self.results.values_mut() {
            let file = run(result.walk_file);
            result.own = file.is_some() && own(result.walk_file, &result.record.location);
            match file {
                Some(file) if result.own => result.file = file,
                Some(_) | None => result.record.bytes = bytes::Bytes::new(),
            }
        }
        let leftovers = std::mem::take(&mut self.leftovers);
        self.leftovers = leftovers
            .into_iter()
            .filter_map(|(walk, events)| Some((run(walk)?, events)))
            .collect();
        let compression = std::mem::take(&mut self.compression);
        self.compression = compression
            .into_iter()
            .filter_map(|(walk, compression)| Some((run(walk)?, compression)))
            .collect();
    }

    /// True when no result is held: [`BatchIndex::join`] then changes nothing.
    pub fn is_empty(&self) -> bool {
        self.results.is_empty()
    }

    /// Gives a request line its result's `response` (OpenAI) or `result` (Anthropic), if one
    /// was read and it has none.
    pub fn join(&self, value: &mut Value) {
        let Some(id) = value.get("custom_id").and_then(Value::as_str) else {
            return;
        };
        let Some(result) = self.results.get(id) else {
            return;
        };
        result.used.store(true, Ordering::Relaxed);
        if let Value::Object(map) = value {
            if !map.get(result.key).is_some_and(Value::is_object) && result.response.is_object() {
                map.insert(result.key.to_string(), result.response.clone());
            }
        }
    }

    /// Marks the result `custom_id` claimed by a request the run does not read itself (another
    /// shard converts it): true when it is one the run counts, not claimed before.
    pub fn claim(&self, custom_id: &str) -> bool {
        self.results
            .get(custom_id)
            .is_some_and(|r| !r.used.swap(true, Ordering::Relaxed) && r.own)
    }

    /// How many results the run counts that no request has claimed yet.
    pub fn unclaimed(&self) -> usize {
        self.results.values().filter(|r| r.own && !r.used()).count()
    }

    /// Whether the run's file `file` is a results file (its leftovers are replayed).
    pub fn is_results_file(&self, file: usize) -> bool {
        self.leftovers.contains_key(&file)
    }

    /// The compression of the run's results file `file`, as scanned.
    pub fn compression(&self, file: usize) -> Compression {
        self.compression
            .get(&file)
            .copied()
            .unwrap_or(Compression::None)
    }

    /// The places in the walk of every results file, in order.
    pub fn results_files(&self) -> &[usize] {
        &self.results_files
    }

    /// The places in the walk of the files that start with a Batch request line.
    pub fn request_files(&self) -> &[usize] {
        &self.request_files
    }

    /// The ordinals of the result lines held, by their file's place in the walk: what a
    /// replay of a results file leaves out.
    pub fn held(&self) -> HashMap<usize, HashSet<u64>> {
        let mut held: HashMap<usize, HashSet<u64>> = HashMap::new();
        for result in self.results.values() {
            held.entry(result.walk_file)
                .or_default()
                .insert(result.ordinal);
        }
        held
    }

    /// Every result the run counts, in input order.
    pub fn results(&self) -> Vec<&BatchResult> {
        let mut all: Vec<&BatchResult> = self.results.values().filter(|r| r.own).collect();
        all.sort_by_key(|r| (r.file, r.ordinal));
        all
    }

    /// The results the run counts, as one index per group (`group(result)`: its file's place
    /// in the walk and a range of it), in input order: the collector counts them a group at a
    /// time, each after a segment marker of its own, so that `report merge` puts the lines of
    /// several shards' groups back in the order of an unsharded run.
    pub fn into_groups(
        self,
        group: impl Fn(&BatchResult) -> (usize, u64),
    ) -> Vec<((usize, u64), BatchIndex)> {
        let mut groups: BTreeMap<(usize, u64), BatchIndex> = BTreeMap::new();
        for (id, result) in self.results {
            if result.own {
                let index = groups.entry(group(&result)).or_default();
                index.results.insert(id, result);
            }
        }
        groups.into_iter().collect()
    }
}
