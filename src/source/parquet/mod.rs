//! Parquet files (the format the Hugging Face Hub serves every dataset in), read a row group
//! at a time: each row becomes one record, its bytes the row as a JSON object
//! ([`render`]), located by its row number in the file (`line`, from 1) and the byte where
//! its row group starts (`byte`).
//!
//! A Parquet file is not a stream: its footer, at the end, says where each row group's column
//! chunks are. The parquet crate (arrow-rs, record API) decodes them; what it would allocate
//! from a hostile file is checked first, so that no declared size is trusted:
//! - the footer: its declared length against the file and `--max-record-bytes`, and the
//!   schema's depth ([`thrift::schema_shape`]: the crate builds the schema and its readers by
//!   recursion), then the schema's shape against what the record API reads;
//! - each row group, before a byte of it is decompressed: its column chunks inside the file,
//!   their codecs (none, snappy, gzip, zstd), and every page header ([`thrift::page_header`]):
//!   the sizes and values its pages declare, summed, against `--max-record-bytes` (a gzip
//!   page is decompressed once to count what it really expands to: the crate does not stop
//!   at the declared size for gzip); then its levels and values are decoded once without
//!   building rows, to weigh each row (a dictionary page lets a few bytes stand for many
//!   copies of a long string).
//!
//! A file or row group that fails a check is a [`Damage`] naming the row group, its rows and
//! why; the next row group is read. What the crate still refuses (a corrupt page, invalid
//! UTF-8 in a string column) is a damage from the row where it failed; a panic inside the
//! crate is caught and reported the same way.
//!
//! Memory: one row group at a time, its pages and its rows rendered as JSON: at most a small
//! multiple of `--max-record-bytes` (256 MiB by default; a dataset's row groups are usually
//! a few MB), whatever the file's size. Time: each row group's pages are decoded twice (once
//! weighed, once read), linear in the file.

mod checks;
pub(crate) mod render;
mod schema;
mod source;
#[cfg(test)]
mod tests;
pub mod thrift;
mod weigh;

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::{Compression, ConvertedType, Repetition, Type as PhysicalType};
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::DataType;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader, RowGroupMetaData};
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::{ChunkReader, Length, RowGroupReader};
use parquet::file::serialized_reader::SerializedRowGroupReader;
use parquet::record::reader::RowIter;
use parquet::schema::types::{SchemaDescriptor, Type};

use super::split::{Damage, RawRecord, RecordEvent, DEFAULT_MAX_RECORD_BYTES, OVERSIZED_HEAD};
use crate::model::Location;
use checks::chunk_range;
use schema::check_schema;
use source::{Backing, Source};

/// The first and last four bytes of every Parquet file.
pub const MAGIC: &[u8] = b"PAR1";

/// The magic of an encrypted footer, which is not read.
const ENCRYPTED_MAGIC: &[u8] = b"PARE";

/// A schema deeper than this is refused: chat datasets nest four or five levels (a list of
/// message structs holding a struct).
pub const MAX_SCHEMA_DEPTH: usize = 32;

/// What one level (a value, a null, an empty list) weighs once decoded into a row: the
/// record API's `Field` and its slot in a list or a struct, with its JSON punctuation.
const LEVEL_WEIGHT: u64 = 48;

/// Page headers are read this many bytes at a time (most are a few dozen bytes; one carrying
/// statistics of long strings is read again with more).
const HEADER_READ: usize = 1024;

/// Whether `head` (a file's first bytes) opens a Parquet file.
pub fn is_parquet(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// The rows of one Parquet file, as the record splitter yields records.
pub struct Rows {
    path: Arc<str>,
    source: Source,
    state: State,
    limit: u64,
    queue: VecDeque<RecordEvent>,
}

enum State {
    Footer,
    Groups(Box<Groups>),
    Done,
}

/// The file's metadata and the next row group to read.
struct Groups {
    metadata: ParquetMetaData,
    next: usize,
    /// The rows of the row groups before `next` (as their metadata counts them).
    rows_before: u64,
}

/// Why a file or a row group is not read.
type Problem = String;

impl Rows {
    /// The rows of the file at `file`, named `path` in their locations; `read` counts the
    /// bytes read from it.
    pub fn of_file(path: Arc<str>, file: File, read: Arc<AtomicU64>) -> io::Result<Rows> {
        let len = file.metadata()?.len();
        Ok(Rows::over(path, Backing::File(file), len, read))
    }

    /// The rows of a file held in memory.
    pub fn of_bytes(path: Arc<str>, bytes: Bytes, read: Arc<AtomicU64>) -> Rows {
        let len = bytes.len() as u64;
        Rows::over(path, Backing::Memory(bytes), len, read)
    }

    fn over(path: Arc<str>, backing: Backing, len: u64, read: Arc<AtomicU64>) -> Rows {
        Rows {
            path,
            source: Source {
                backing: Arc::new(backing),
                len,
                read,
                stop: None,
            },
            state: State::Footer,
            limit: DEFAULT_MAX_RECORD_BYTES,
            queue: VecDeque::new(),
        }
    }

    /// A row group, a footer or a row longer than `limit` bytes is not read
    /// (`--max-record-bytes`).
    pub fn max_record_bytes(&mut self, limit: u64) {
        self.limit = limit;
    }

    /// Reading stops once `stop` holds a signal.
    pub fn stop(&mut self, stop: &Arc<AtomicUsize>) {
        self.source.stop = Some(Arc::clone(stop));
    }

    fn location(&self, line: u64, byte_offset: u64) -> Location {
        Location {
            path: Arc::clone(&self.path),
            line,
            byte_offset,
            element: None,
        }
    }

    fn damage(&mut self, line: u64, byte_offset: u64, message: String) {
        let location = self.location(line, byte_offset);
        self.queue.push_back(RecordEvent::Damage(Damage {
            location,
            compressed_offset: None,
            message,
        }));
    }

    /// The next event: a row, or a damage.
    pub fn next_event(&mut self) -> Option<RecordEvent> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            match std::mem::replace(&mut self.state, State::Done) {
                State::Done => return None,
                State::Footer => match self.footer() {
                    Ok(metadata) => {
                        self.state = State::Groups(Box::new(Groups {
                            metadata,
                            next: 0,
                            rows_before: 0,
                        }))
                    }
                    Err((at, problem)) => self.damage(0, at, problem),
                },
                State::Groups(mut groups) => {
                    if groups.next < groups.metadata.num_row_groups() {
                        self.group(&mut groups);
                        groups.next += 1;
                        self.state = State::Groups(groups);
                    }
                }
            }
        }
    }

    /// The footer, checked, then decoded; or where it is and why it is not read.
    fn footer(&self) -> Result<ParquetMetaData, (u64, Problem)> {
        let len = self.source.len;
        let not_parquet = |what: String| (0, format!("not a readable Parquet file: {what}"));
        if len < 12 {
            return Err(not_parquet(format!(
                "{len} bytes, fewer than its magic and footer take"
            )));
        }
        let tail = self
            .source
            .bytes(len - 8, 8)
            .map_err(|e| not_parquet(e.to_string()))?;
        if &tail[4..] == ENCRYPTED_MAGIC {
            return Err(not_parquet("its footer is encrypted (PARE)".into()));
        }
        if &tail[4..] != MAGIC {
            return Err(not_parquet(
                "no PAR1 magic at its end (the file is cut short, or was not written whole)".into(),
            ));
        }
        let declared = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        if declared > len - 12 {
            return Err(not_parquet(format!(
                "its footer declares {declared} bytes, more than the file holds"
            )));
        }
        let at = len - 8 - declared;
        if declared > self.limit {
            return Err((
                at,
                format!(
                    "its footer declares {declared} bytes, more than --max-record-bytes ({}): not read; raise the limit to read it",
                    self.limit
                ),
            ));
        }
        let footer = self
            .source
            .bytes(at, declared)
            .map_err(|e| (at, format!("cannot read the footer: {e}")))?;
        thrift::schema_shape(&footer, MAX_SCHEMA_DEPTH)
            .map_err(|e| (at, format!("the footer's schema cannot be read: {e}")))?;
        let metadata = ParquetMetaDataReader::decode_metadata(&footer)
            .map_err(|e| (at, format!("the footer cannot be read: {e}")))?;
        check_schema(metadata.file_metadata().schema_descr())
            .map_err(|e| (at, format!("its schema is not one rollover reads: {e}")))?;
        Ok(metadata)
    }

    /// Reads row group `groups.next`: its rows queued as records, or a damage.
    fn group(&mut self, groups: &mut Groups) {
        let index = groups.next;
        let total = groups.metadata.num_row_groups();
        let group = groups.metadata.row_group(index);
        // Saturating: the counts are what the footer declares.
        let first = groups.rows_before.saturating_add(1);
        let rows = u64::try_from(group.num_rows()).unwrap_or(0);
        groups.rows_before = groups.rows_before.saturating_add(rows);
        let start = group_start(group);
        let name = match rows {
            0 => format!("row group {} of {total} (no rows)", index + 1),
            1 => format!("row group {} of {total} (row {first})", index + 1),
            _ => format!(
                "row group {} of {total} (rows {first}-{})",
                index + 1,
                first.saturating_add(rows - 1)
            ),
        };
        if let Err(problem) = self.check_group(group).and_then(|()| self.weigh(group)) {
            self.damage(first, start, format!("{name}: {problem}: not read"));
            return;
        }
        let (block, ends, failed) = self.decode(group, rows);
        let block = Bytes::from(block);
        let mut begin = 0;
        for (k, end) in ends.iter().copied().enumerate() {
            let bytes = block.slice(begin..end);
            begin = end;
            let size = bytes.len() as u64;
            let oversized = size > self.limit;
            let record = RawRecord {
                location: self.location(first.saturating_add(k as u64), start),
                bytes: if oversized {
                    bytes.slice(..OVERSIZED_HEAD.min(bytes.len()))
                } else {
                    bytes
                },
                truncated: false,
                oversized: oversized.then_some(size),
                id: Default::default(),
                magic: Some(MAGIC),
            };
            self.queue.push_back(RecordEvent::Record(record));
        }
        if let Some(problem) = failed {
            let row = first.saturating_add(ends.len() as u64);
            self.damage(
                row,
                start,
                format!("{name}, row {row}: {problem}: the rest of the row group is not read"),
            );
        }
    }

    fn row_group_reader<'g>(
        &self,
        group: &'g RowGroupMetaData,
    ) -> parquet::errors::Result<SerializedRowGroupReader<'g, Source>> {
        let properties = Arc::new(ReaderProperties::builder().build());
        SerializedRowGroupReader::new(Arc::new(self.source.clone()), group, None, properties)
    }

    /// The row group's rows rendered one after the other in one block, where each ends, and
    /// what stopped the reading before the last, if anything did.
    fn decode(
        &self,
        group: &RowGroupMetaData,
        rows: u64,
    ) -> (Vec<u8>, Vec<usize>, Option<Problem>) {
        let mut block = Vec::new();
        let mut ends = Vec::new();
        let cap = self.limit.saturating_mul(2);
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let reader = self.row_group_reader(group)?;
            let mut iter = RowIter::from_row_group(None, &reader)?;
            for _ in 0..rows {
                let Some(row) = iter.next() else {
                    return Err(parquet::errors::ParquetError::General(
                        "the row group ends before the rows it declares".into(),
                    ));
                };
                render::row(&row?, &mut block);
                ends.push(block.len());
                if block.len() as u64 > cap {
                    return Err(parquet::errors::ParquetError::General(format!(
                        "its rows take more than twice --max-record-bytes ({}) as JSON",
                        self.limit
                    )));
                }
            }
            Ok(())
        }));
        let failed = match decoded {
            Ok(Ok(())) => None,
            Ok(Err(err)) => Some(format!("cannot be read: {}", short(&err))),
            Err(panic) => Some(format!("the parquet reader failed: {}", said(&*panic))),
        };
        // A row cut short by the failure is not a row.
        block.truncate(ends.last().copied().unwrap_or(0));
        (block, ends, failed)
    }
}

/// Where a row group's data starts in the file: its first column chunk.
fn group_start(group: &RowGroupMetaData) -> u64 {
    group
        .columns()
        .iter()
        .filter_map(|c| chunk_range(c).map(|(start, _)| start))
        .min()
        .unwrap_or(0)
}

/// The parquet crate's error, its first 300 characters: some quote a whole value's bytes.
fn short(err: &parquet::errors::ParquetError) -> String {
    let text = err.to_string();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// What a caught panic said.
fn said(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        return (*text).to_string();
    }
    if let Some(text) = panic.downcast_ref::<String>() {
        return text.clone();
    }
    "a panic without a message".into()
}
