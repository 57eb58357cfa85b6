//! Source formats: which one a file is in, and the one trait every format's reader implements.
//!
//! A file's format is decided once, from its first record (`--from` overrides it). Every
//! format, Chat Completions included, is a [`FormatReader`] registered in [`readers`], and
//! the pipeline knows no format by name. A format either reads each record on its own
//! ([`Granularity::Record`]: Chat Completions records,
//! ChatGPT export conversations, ShareGPT rows) or needs the whole file, because one
//! conversation spans many records ([`Granularity::File`]: a Claude Code session's lines, API
//! logs whose requests resend the history; of a file interleaving conversations, such as an
//! OTLP file's traces, the records of each conversation as it completes: [`FormatReader::group`]).
//! Either way its reader turns records into
//! [`Transcript`]s, and everything after (classification by rule files, conversion, invariants,
//! quarantine, the audit) is the same for every format.

use std::any::Any;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use super::inside::InputTree;
use super::InputError;
use crate::model::transcript::Transcript;
use crate::rules::RuleRef;
use crate::rules::RuleSet;
use crate::source::open::ArchiveLines;

/// A source format (the type is in `model`, since a transcript names its format). Each
/// format's module declares its own constant (`impl SourceFormat { pub const SHAREGPT:
/// SourceFormat = ... }`) beside its reader, and the set of formats is the list of readers
/// ([`readers`]): adding a format is a new module and one line there.
pub use crate::model::source_format::SourceFormat;

/// What the reader registry knows of a format.
impl SourceFormat {
    /// Every format, in detection order.
    pub fn all() -> impl Iterator<Item = SourceFormat> {
        readers().iter().map(|r| r.format())
    }

    /// What the format is, for `--help` and errors.
    pub fn describe(self) -> &'static str {
        reader(self).describe()
    }
}

impl FromStr for SourceFormat {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        SourceFormat::all()
            .find(|f| f.name() == text)
            .ok_or_else(|| format!("unknown format `{text}`: one of {}", tried()))
    }
}

/// Whether a format's conversations fit in one record or span the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    Record,
    File,
}

/// One record handed to a reader: its parsed value and its position among the records given.
#[derive(Debug)]
pub struct InputRecord {
    pub value: Value,
    /// 0-based position in the slice of records the reader was given (for a whole file, the
    /// record's ordinal in the file).
    pub index: usize,
    /// Lone surrogates or invalid UTF-8 sequences repaired while parsing it.
    pub repairs: usize,
}

impl InputRecord {
    /// `values` as a file's records, numbered in order, with no Unicode repairs.
    pub fn numbered(values: Vec<Value>) -> Vec<InputRecord> {
        let record = |(index, value)| InputRecord {
            value,
            index,
            repairs: 0,
        };
        values.into_iter().enumerate().map(record).collect()
    }
}

/// Reads parsed `values` as the records of the file at `path` (its key is the path as given,
/// its tree its folder): for tests and tools that hold values, not bytes.
pub fn read_values(
    reader: &dyn FormatReader,
    values: Vec<Value>,
    rules: &RuleSet,
    path: &Path,
) -> FileRead {
    let key = path.to_string_lossy();
    let cache = FileCache::default();
    let context = ReadContext {
        rules,
        path,
        key: &key,
        root: path.parent(),
        follow: false,
        cache: &cache,
    };
    reader.read(InputRecord::numbered(values), &context)
}

/// What a reader made of its records. Every record index given appears exactly once: in one
/// conversation's `records`, in `refused`, or in `dropped`. The pipeline checks this.
#[derive(Debug, Default)]
pub struct FileRead {
    pub conversations: Vec<SourceConversation>,
    /// Records that cannot be read, with why: quarantined unchanged.
    pub refused: Vec<(usize, InputError)>,
    /// Records that hold no conversation and are dropped by a rule (Claude Code `progress`
    /// lines, a Batch API result joined into its request): counted under the rule.
    pub dropped: Vec<DroppedRecord>,
}

impl FileRead {
    /// What a format whose records are each one conversation read: each record's value
    /// through `read_one`, its conversation or the reason it is refused.
    pub fn each(
        records: Vec<InputRecord>,
        mut read_one: impl FnMut(Value) -> Result<Transcript, InputError>,
    ) -> FileRead {
        let mut read = FileRead::default();
        for record in records {
            match read_one(record.value) {
                Ok(transcript) => read.conversations.push(SourceConversation {
                    transcript,
                    records: vec![record.index],
                }),
                Err(error) => read.refused.push((record.index, error)),
            }
        }
        read
    }
}

/// One conversation read from one or more records.
#[derive(Debug)]
pub struct SourceConversation {
    pub transcript: Transcript,
    /// The indexes of the records it was read from, in file order; the first one names it
    /// (its ordinal keys the session id, its location the conversation line).
    pub records: Vec<usize>,
}

/// A record dropped by rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedRecord {
    pub index: usize,
    /// The rule that dropped it.
    pub rule: RuleRef,
    /// What the record was (`progress line`, `file-history-snapshot line`).
    pub what: String,
}

/// What a reader may look at besides the records.
pub struct ReadContext<'a> {
    pub rules: &'a RuleSet,
    /// The input file (ChatGPT images are resolved beside it or inside its zip).
    pub path: &'a Path,
    /// The file's stable key (relative path).
    pub key: &'a str,
    /// The input tree, the only place a file a record points to is read from (ShareGPT
    /// images): the INPUT folder the file was found under, its folder for a file named on the
    /// command line, `None` for standard input and other streams.
    pub root: Option<&'a Path>,
    /// `--follow`: a symlink inside the tree is followed, to a target inside it.
    pub follow: bool,
    /// What a reader keeps for the whole file between its calls.
    pub cache: &'a FileCache,
}

impl ReadContext<'_> {
    /// The tree the record's references are read from.
    pub fn tree(&self) -> InputTree<'_> {
        InputTree {
            root: self.root,
            follow: self.follow,
        }
    }
}

/// What a reader builds once per input file and keeps between its calls: a reader of one
/// record at a time is called once per record, and what it lists per file (the files a
/// ChatGPT export points to, a zip's directory) would otherwise be listed again for every
/// conversation, O(conversations x files). The pipeline clears it when the file is done, so a
/// run holds what the files being read need, not every file's. A file has one format, so one
/// reader's value is kept; the type is the reader's own.
#[derive(Debug, Default)]
pub struct FileCache {
    kept: Mutex<Option<Arc<dyn Any + Send + Sync>>>,
}

impl FileCache {
    /// The value kept for the file, made by `make` on the first call.
    pub fn get_or_make<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        // Held while making: the other threads on the same file wait for the one listing.
        let mut slot = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(kept) = slot
            .as_ref()
            .and_then(|k| Arc::clone(k).downcast::<T>().ok())
        {
            return kept;
        }
        let made = Arc::new(make());
        *slot = Some(Arc::clone(&made) as Arc<dyn Any + Send + Sync>);
        made
    }

    /// Forgets what was kept (the file is done).
    pub fn clear(&self) {
        *self.kept.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// A source format's reader.
pub trait FormatReader: Sync {
    fn format(&self) -> SourceFormat;

    /// What the format is, for `--help` and errors.
    fn describe(&self) -> &'static str;

    fn granularity(&self) -> Granularity;

    /// Whether a file whose first record is `first` is in this format. `first` is `None` when
    /// the record is not JSON (its raw bytes are `raw`, e.g. an SSE `data:` line).
    fn detect(&self, first: Option<&Value>, raw: &[u8]) -> bool;

    /// Reads records (one, or a whole file's) into conversations.
    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead;

    /// Whether [`FormatReader::read_each`] takes a whole file's records as they are parsed,
    /// one at a time (memory: one record's `Value` and the conversations, not every record's
    /// `Value` at once). A format read whole that can, says so; the pipeline then parses each
    /// record only as the reader asks for it.
    fn streams(&self) -> bool {
        false
    }

    /// [`FormatReader::read`] of records parsed as they are taken from `records`.
    fn read_each(
        &self,
        records: &mut dyn Iterator<Item = InputRecord>,
        context: &ReadContext<'_>,
    ) -> FileRead {
        self.read(records.collect(), context)
    }

    /// What reading and converting a whole file (or a large record) in this format holds at
    /// its peak: what `--memory` charges such work.
    fn memory_cost(&self) -> MemoryCost {
        MemoryCost::PARSED
    }

    /// Reads one record straight from its bytes, when the format has a faster way than
    /// [`FormatReader::read`] of its parsed `Value`: the transcript, or the `Value` it parsed
    /// on the way for `read` to take, or `None` (the default) for the record to be parsed as
    /// usual. Only for a format read record by record; what it gives must equal `read`'s.
    fn read_fast(&self, _bytes: &[u8], _context: &ReadContext<'_>) -> Option<FastRead> {
        None
    }

    /// For a format read whole ([`Granularity::File`]) whose file interleaves several
    /// conversations' records (an OTLP file's spans, traces written side by side): the
    /// conversation a record belongs to, from its bytes, so that the pipeline holds the
    /// records of the conversations still open instead of the file's. The default holds every
    /// record for the file's end.
    fn group(&self, _bytes: &[u8]) -> Group {
        Group::File
    }

    /// The lines of a zip in this format, for a format whose files come zipped (a ChatGPT
    /// export): the source layer reads a zip only through the hook of a reader that has one.
    fn archive_lines(&self) -> Option<ArchiveLines> {
        None
    }
}

/// Where a record of a format read whole waits before its reader reads it
/// ([`FormatReader::group`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Group {
    /// Read with the file's other records at its end.
    File,
    /// Read at once, on its own (a record that belongs to no conversation of the file).
    Alone,
    /// Held with the records of the conversation keyed so, until its last one.
    Member(String),
    /// The last record of the conversation keyed so: the held records are read now.
    Last(String),
}

/// What a work holds at its peak, per byte of its records and per record (the record's own
/// place, its outcome, its conversation's message, item and written lines): measured, then
/// rounded up (samples/BENCHMARKS.md, "Memory of whole-file work").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryCost {
    pub per_byte: u64,
    pub per_record: u64,
}

impl MemoryCost {
    /// A format that holds every record's parsed `Value` at once (serde_json trees of small
    /// objects take ~10 bytes a byte of JSON) beside its conversations and their output: a
    /// chain of 10,000 short Responses entries (2.7 MB) peaked at ~90 MB over the process's own.
    pub const PARSED: MemoryCost = MemoryCost {
        per_byte: 12,
        per_record: 8 << 10,
    };

    /// What `records` records of `bytes` bytes cost.
    pub fn of(self, bytes: u64, records: u64) -> u64 {
        bytes
            .saturating_mul(self.per_byte)
            .saturating_add(records.saturating_mul(self.per_record))
    }
}

/// What [`FormatReader::read_fast`] made of a record. Returned once per record and taken
/// apart at once: a box would cost an allocation to save a move.
#[allow(clippy::large_enum_variant)]
pub enum FastRead {
    /// The transcript, read without building the record's `Value`.
    Read(Transcript),
    /// The record's `Value` (what [`super::parse_record`] gives, with no Unicode repairs), for
    /// [`FormatReader::read`]: a shape or a problem the fast path leaves to it.
    Parsed(Value),
}

/// Every format's reader, in detection order (`chat` last: it reads any record with a list
/// of messages somewhere). Each format's module adds its reader here.
pub fn readers() -> &'static [&'static dyn FormatReader] {
    &[
        &super::codex::CodexReader,
        &super::claude_code::ClaudeCodeReader,
        &super::gemini_cli::GeminiCliReader,
        &super::otel::OtelReader,
        &super::chatgpt::ChatGptReader,
        &super::anthropic::AnthropicReader,
        &super::responses::ResponsesReader,
        &super::chat_stream::ChatStreamReader,
        &super::sharegpt::ShareGptReader,
        &super::parquet::ParquetReader,
        &super::chat::ChatReader,
    ]
}

/// How a zip is read ([`FormatReader::archive_lines`]): the first registered reader's hook.
pub(crate) fn archive_lines() -> Option<ArchiveLines> {
    readers().iter().find_map(|r| r.archive_lines())
}

/// The reader of `format`.
pub fn reader(format: SourceFormat) -> &'static dyn FormatReader {
    readers()
        .iter()
        .copied()
        .find(|r| r.format() == format)
        .unwrap_or(&super::chat::ChatReader)
}

/// The format of a file whose first record is `first` (parsed) / `raw` (its bytes): the
/// first reader that recognises it, else `chat`.
pub fn detect(first: Option<&Value>, raw: &[u8]) -> SourceFormat {
    readers()
        .iter()
        .find(|r| r.detect(first, raw))
        .map(|r| r.format())
        .unwrap_or(SourceFormat::CHAT)
}

/// The names of every format, for "formats tried" in errors.
pub fn tried() -> String {
    let names: Vec<&str> = SourceFormat::all().map(|f| f.name()).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        assert_eq!(SourceFormat::all().count(), 11);
        for format in SourceFormat::all() {
            assert_eq!(format.name().parse::<SourceFormat>(), Ok(format));
        }
        let err = "slack".parse::<SourceFormat>().unwrap_err();
        assert!(
            err.contains("claude-code") && err.contains("sharegpt"),
            "{err}"
        );
    }

    #[test]
    fn a_plain_chat_record_is_chat() {
        let value: Value = serde_json::from_str(r#"{"messages":[]}"#).unwrap();
        assert_eq!(detect(Some(&value), b"{}"), SourceFormat::CHAT);
    }
}
