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

pub mod render;
pub mod thrift;

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

/// Where the file's bytes are.
enum Backing {
    File(File),
    Memory(Bytes),
}

/// The file as the parquet crate reads it: positioned reads that count the bytes read (the
/// progress bar) and fail once the run is asked to stop.
#[derive(Clone)]
struct Source {
    backing: Arc<Backing>,
    len: u64,
    read: Arc<AtomicU64>,
    stop: Option<Arc<AtomicUsize>>,
}

impl Source {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        if self
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed) != 0)
        {
            return Err(io::Error::other("the run was asked to stop"));
        }
        let n = match self.backing.as_ref() {
            Backing::File(file) => read_file_at(file, offset, buf)?,
            Backing::Memory(bytes) => {
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                let n = buf.len().min(bytes.len() - start);
                buf[..n].copy_from_slice(&bytes[start..start + n]);
                n
            }
        };
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    /// `len` bytes at `offset`, all inside the file (checked before anything is allocated).
    fn bytes(&self, offset: u64, len: u64) -> io::Result<Bytes> {
        let end = offset.checked_add(len).filter(|end| *end <= self.len);
        let Some(end) = end else {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{len} bytes at byte {offset} are past the end of the file ({} bytes)",
                    self.len
                ),
            ));
        };
        if let Backing::Memory(bytes) = self.backing.as_ref() {
            // Both ends are within the file's length, which is the buffer's.
            self.read.fetch_add(len, Ordering::Relaxed);
            return Ok(bytes.slice(offset as usize..end as usize));
        }
        let mut buf = vec![0; len as usize];
        let mut filled = 0;
        while filled < buf.len() {
            match self.read_at(offset + filled as u64, &mut buf[filled..]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => filled += n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(buf.into())
    }
}

#[cfg(unix)]
fn read_file_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn read_file_at(file: &File, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

impl Length for Source {
    fn len(&self) -> u64 {
        self.len
    }
}

/// A sequential reader from one offset (the crate reads page headers through it).
struct At {
    source: Source,
    at: u64,
}

impl Read for At {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.source.len.saturating_sub(self.at);
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = self.source.read_at(self.at, &mut buf[..want])?;
        self.at += n as u64;
        Ok(n)
    }
}

impl ChunkReader for Source {
    type T = io::BufReader<At>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(io::BufReader::with_capacity(
            8 << 10,
            At {
                source: self.clone(),
                at: start,
            },
        ))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        Ok(self.bytes(start, length as u64)?)
    }
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

    /// What the row group's metadata and page headers declare, against the file and the
    /// limit, before any page is decompressed.
    fn check_group(&self, group: &RowGroupMetaData) -> Result<(), Problem> {
        if group.num_rows() < 0 {
            return Err(format!("it declares {} rows", group.num_rows()));
        }
        let mut declared = Totals::default();
        for column in group.columns() {
            let path = column.column_path().string();
            match column.compression() {
                Compression::UNCOMPRESSED
                | Compression::SNAPPY
                | Compression::GZIP(_)
                | Compression::ZSTD(_) => {}
                other @ (Compression::LZO
                | Compression::BROTLI(_)
                | Compression::LZ4
                | Compression::LZ4_RAW) => {
                    return Err(format!(
                        "column `{path}` is compressed with {other}, which rollover does not read (it reads snappy, gzip, zstd and uncompressed pages)"
                    ))
                }
            }
            let (chunk_start, chunk_len) = chunk_range(column)
                .ok_or_else(|| format!("column `{path}` declares a negative offset or size"))?;
            if chunk_start.saturating_add(chunk_len) > self.source.len {
                return Err(format!(
                    "column `{path}` declares {chunk_len} bytes at byte {chunk_start}, past the end of the file"
                ));
            }
            declared.add(
                u64::try_from(column.uncompressed_size()).unwrap_or(u64::MAX),
                chunk_len,
                0,
            );
            declared.check(self.limit)?;
        }
        let mut pages = Totals::default();
        for column in group.columns() {
            let gzip = matches!(column.compression(), Compression::GZIP(_));
            let path = column.column_path().string();
            let (chunk_start, chunk_len) = chunk_range(column).unwrap_or((0, 0));
            self.check_pages(chunk_start, chunk_len, gzip, &mut pages)
                .map_err(|problem| format!("column `{path}`: {problem}"))?;
        }
        Ok(())
    }

    /// Reads each page header of the column chunk `len` bytes at `start`, adds what it
    /// declares to `totals`, and fails once they pass the limit.
    fn check_pages(
        &self,
        start: u64,
        len: u64,
        gzip: bool,
        totals: &mut Totals,
    ) -> Result<(), Problem> {
        let end = start + len;
        let mut at = start;
        while at < end {
            let sizes = self.page_header(at, end)?;
            let (Ok(uncompressed), Ok(compressed), Ok(values)) = (
                u64::try_from(sizes.uncompressed),
                u64::try_from(sizes.compressed),
                u64::try_from(sizes.values),
            ) else {
                return Err(format!("the page at byte {at} declares a negative size"));
            };
            let data = at + sizes.header_len as u64;
            if data.saturating_add(compressed) > end {
                return Err(format!(
                    "the page at byte {at} declares {compressed} bytes, past the end of its column chunk"
                ));
            }
            totals.add(uncompressed, compressed, values);
            totals.check(self.limit)?;
            let levels = u64::try_from(sizes.levels).unwrap_or(0);
            // Index pages are skipped, and v2 pages may store their values uncompressed.
            if gzip && sizes.kind != 1 && sizes.compressed_values && compressed > levels {
                let bytes = self
                    .source
                    .bytes(data + levels, compressed - levels)
                    .map_err(|e| e.to_string())?;
                let expands = gunzipped_size(&bytes, uncompressed.saturating_sub(levels) + 1);
                if expands > uncompressed.saturating_sub(levels) {
                    return Err(format!(
                        "the gzip page at byte {at} expands past the {uncompressed} bytes its header declares"
                    ));
                }
            }
            at = data + compressed;
        }
        Ok(())
    }

    /// The page header at `at` (its column chunk ends at `end`), read a little at a time: a
    /// header is not longer than the limit.
    fn page_header(&self, at: u64, end: u64) -> Result<thrift::PageSizes, Problem> {
        let mut want = HEADER_READ as u64;
        loop {
            let len = want.min(end - at);
            let bytes = self.source.bytes(at, len).map_err(|e| e.to_string())?;
            match thrift::page_header(&bytes) {
                Ok(sizes) => return Ok(sizes),
                Err(_) if len < end - at && len < self.limit => want = len * 8,
                Err(err) => return Err(format!("the page header at byte {at}: {err}")),
            }
        }
    }

    /// Decodes the row group's levels and values without building its rows, to weigh each
    /// row: a row, and the row group, must decode to at most the limit.
    fn weigh(&self, group: &RowGroupMetaData) -> Result<(), Problem> {
        let reader = self.row_group_reader(group).map_err(|e| e.to_string())?;
        let mut rows: Vec<u64> = Vec::new();
        let declared = usize::try_from(group.num_rows()).unwrap_or(0);
        let weighed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for column in 0..group.num_columns() {
                let descr = group.column(column).column_descr();
                let levels = (descr.max_def_level(), descr.max_rep_level());
                let reader = reader.get_column_reader(column)?;
                weigh_column(reader, levels, declared, &mut rows)?;
            }
            Ok::<(), parquet::errors::ParquetError>(())
        }));
        match weighed {
            Ok(Ok(())) => {}
            Ok(Err(err)) => return Err(format!("its pages cannot be decoded: {}", short(&err))),
            Err(panic) => return Err(format!("the parquet reader failed: {}", said(&*panic))),
        }
        let total: u64 = rows.iter().sum();
        if let Some((row, weight)) = rows.iter().enumerate().find(|(_, w)| **w > self.limit) {
            return Err(format!(
                "its row {} decodes to ~{weight} bytes, more than --max-record-bytes ({}); raise the limit to read it",
                row + 1,
                self.limit
            ));
        }
        if total > self.limit {
            return Err(format!(
                "it decodes to ~{total} bytes, more than --max-record-bytes ({}); raise the limit to read it",
                self.limit
            ));
        }
        Ok(())
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

/// Declared sizes of a row group, summed.
#[derive(Default)]
struct Totals {
    uncompressed: u64,
    compressed: u64,
    values: u64,
}

impl Totals {
    fn add(&mut self, uncompressed: u64, compressed: u64, values: u64) {
        self.uncompressed = self.uncompressed.saturating_add(uncompressed);
        self.compressed = self.compressed.saturating_add(compressed);
        self.values = self.values.saturating_add(values);
    }

    fn check(&self, limit: u64) -> Result<(), Problem> {
        let over = |what: &str, n: u64| {
            format!("it declares {n} {what}, more than --max-record-bytes ({limit}); raise the limit to read it")
        };
        if self.uncompressed > limit {
            return Err(over("bytes uncompressed", self.uncompressed));
        }
        if self.compressed > limit {
            return Err(over("bytes compressed", self.compressed));
        }
        if self.values.saturating_mul(LEVEL_WEIGHT) > limit {
            return Err(format!(
                "it declares {} values, more than --max-record-bytes ({limit}) allows at {LEVEL_WEIGHT} bytes each; raise the limit to read it",
                self.values
            ));
        }
        Ok(())
    }
}

/// Where a column chunk's pages are: its first page (the dictionary's, when it has one), as
/// the parquet crate reads it, and its compressed length.
fn chunk_range(column: &parquet::file::metadata::ColumnChunkMetaData) -> Option<(u64, u64)> {
    let start = column
        .dictionary_page_offset()
        .unwrap_or(column.data_page_offset());
    Some((
        u64::try_from(start).ok()?,
        u64::try_from(column.compressed_size()).ok()?,
    ))
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

/// How many bytes `gzip` expands to, counted up to `cap` (and no further).
fn gunzipped_size(gzip: &[u8], cap: u64) -> u64 {
    let mut decoder = flate2::read::MultiGzDecoder::new(gzip).take(cap);
    io::copy(&mut decoder, &mut io::sink()).unwrap_or(cap)
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

/// Adds the weight of each row's levels and values in `reader`'s column to `rows` (one slot a
/// row, at most `declared` rows).
/// `levels`: the column's maximum definition and repetition levels.
fn weigh_column(
    reader: ColumnReader,
    levels: (i16, i16),
    declared: usize,
    rows: &mut Vec<u64>,
) -> parquet::errors::Result<()> {
    let rows = Weighed {
        levels,
        declared,
        rows,
    };
    match reader {
        ColumnReader::BoolColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::Int32ColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::Int64ColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::Int96ColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::FloatColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::DoubleColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::ByteArrayColumnReader(r) => rows.typed(r, |v| v.len() as u64),
        ColumnReader::FixedLenByteArrayColumnReader(r) => rows.typed(r, |v| v.len() as u64),
    }
}

/// The weights of a row group's rows, as one column's levels are added to them.
struct Weighed<'r> {
    levels: (i16, i16),
    declared: usize,
    rows: &'r mut Vec<u64>,
}

/// Records are read this many at a time when weighed (a record is one row).
const WEIGH_BATCH: usize = 256;

impl Weighed<'_> {
    /// Adds the column's levels, and the bytes of its values (`bytes` of each), to their rows.
    fn typed<T: DataType>(
        self,
        mut reader: ColumnReaderImpl<T>,
        bytes: impl Fn(&T::T) -> u64,
    ) -> parquet::errors::Result<()> {
        let Weighed {
            levels: (max_def, max_rep),
            declared,
            rows,
        } = self;
        let mut def = Vec::new();
        let mut rep = Vec::new();
        let mut values = Vec::new();
        // The row of the level being weighed (none before the first).
        let mut row: Option<usize> = None;
        loop {
            def.clear();
            rep.clear();
            values.clear();
            let (records, _, levels) = reader.read_records(
                WEIGH_BATCH,
                (max_def > 0).then_some(&mut def),
                (max_rep > 0).then_some(&mut rep),
                &mut values,
            )?;
            if records == 0 && levels == 0 {
                return Ok(());
            }
            // The record API asserts these (a panic on a corrupt page): refused here, first.
            if let Some(d) = def.iter().find(|d| **d > max_def || **d < 0) {
                return Err(parquet::errors::ParquetError::General(format!(
                    "a definition level of {d}, outside the column's 0-{max_def}"
                )));
            }
            if let Some(r) = rep.iter().find(|r| **r > max_rep || **r < 0) {
                return Err(parquet::errors::ParquetError::General(format!(
                    "a repetition level of {r}, outside the column's 0-{max_rep}"
                )));
            }
            let mut value = 0;
            for level in 0..levels {
                let starts_row = max_rep == 0 || rep.get(level) == Some(&0);
                if starts_row {
                    row = Some(row.map_or(0, |r| r + 1));
                }
                let Some(r) = row.filter(|r| *r < declared) else {
                    continue;
                };
                if rows.len() <= r {
                    rows.resize(r + 1, 0);
                }
                let mut weight = LEVEL_WEIGHT;
                if max_def == 0 || def.get(level) == Some(&max_def) {
                    weight += values.get(value).map_or(0, &bytes);
                    value += 1;
                }
                rows[r] = rows[r].saturating_add(weight);
            }
        }
    }
}

/// Refuses a schema the record API would panic on (it asserts the shape of lists and maps,
/// and converts a leaf's physical and converted types by a fixed table): the first problem,
/// naming the field.
fn check_schema(schema: &SchemaDescriptor) -> Result<(), String> {
    let mut stack: Vec<&Type> = schema
        .root_schema()
        .get_fields()
        .iter()
        .map(|f| &**f)
        .collect();
    while let Some(field) = stack.pop() {
        let name = field.name();
        let info = field.get_basic_info();
        if !info.has_repetition() {
            return Err(format!("field `{name}` has no repetition"));
        }
        if field.is_primitive() {
            check_leaf(field)?;
            continue;
        }
        let fields = field.get_fields();
        if fields.is_empty() {
            return Err(format!("group `{name}` has no fields"));
        }
        match info.converted_type() {
            ConvertedType::LIST => {
                let [repeated] = fields else {
                    return Err(format!(
                        "list `{name}` has {} fields, not one",
                        fields.len()
                    ));
                };
                if repeated.get_basic_info().repetition() != Repetition::REPEATED {
                    return Err(format!("list `{name}`: its field is not repeated"));
                }
            }
            ConvertedType::MAP | ConvertedType::MAP_KEY_VALUE => {
                let [entries] = fields else {
                    return Err(format!("map `{name}` has {} fields, not one", fields.len()));
                };
                let pairs = if entries.is_primitive() {
                    0
                } else {
                    entries.get_fields().len()
                };
                let repeated = entries.get_basic_info().has_repetition()
                    && entries.get_basic_info().repetition() == Repetition::REPEATED;
                let key_primitive = pairs > 0 && entries.get_fields()[0].is_primitive();
                if !repeated || !(1..=2).contains(&pairs) || !key_primitive {
                    return Err(format!(
                        "map `{name}` is not a repeated group of a primitive key and a value"
                    ));
                }
            }
            ConvertedType::NONE
            | ConvertedType::UTF8
            | ConvertedType::ENUM
            | ConvertedType::DECIMAL
            | ConvertedType::DATE
            | ConvertedType::TIME_MILLIS
            | ConvertedType::TIME_MICROS
            | ConvertedType::TIMESTAMP_MILLIS
            | ConvertedType::TIMESTAMP_MICROS
            | ConvertedType::UINT_8
            | ConvertedType::UINT_16
            | ConvertedType::UINT_32
            | ConvertedType::UINT_64
            | ConvertedType::INT_8
            | ConvertedType::INT_16
            | ConvertedType::INT_32
            | ConvertedType::INT_64
            | ConvertedType::JSON
            | ConvertedType::BSON
            | ConvertedType::INTERVAL => {}
        }
        stack.extend(fields.iter().map(|f| &**f));
    }
    Ok(())
}

/// A leaf whose physical and converted types the record API converts.
fn check_leaf(field: &Type) -> Result<(), String> {
    let converted = field.get_basic_info().converted_type();
    let physical = field.get_physical_type();
    let supported = match physical {
        PhysicalType::BOOLEAN
        | PhysicalType::INT96
        | PhysicalType::FLOAT
        | PhysicalType::DOUBLE => true,
        PhysicalType::INT32 => matches!(
            converted,
            ConvertedType::NONE
                | ConvertedType::INT_8
                | ConvertedType::INT_16
                | ConvertedType::INT_32
                | ConvertedType::UINT_8
                | ConvertedType::UINT_16
                | ConvertedType::UINT_32
                | ConvertedType::DATE
                | ConvertedType::TIME_MILLIS
                | ConvertedType::DECIMAL
        ),
        PhysicalType::INT64 => matches!(
            converted,
            ConvertedType::NONE
                | ConvertedType::INT_64
                | ConvertedType::UINT_64
                | ConvertedType::TIME_MICROS
                | ConvertedType::TIMESTAMP_MILLIS
                | ConvertedType::TIMESTAMP_MICROS
                | ConvertedType::DECIMAL
        ),
        PhysicalType::BYTE_ARRAY => matches!(
            converted,
            ConvertedType::NONE
                | ConvertedType::UTF8
                | ConvertedType::ENUM
                | ConvertedType::JSON
                | ConvertedType::BSON
                | ConvertedType::DECIMAL
        ),
        PhysicalType::FIXED_LEN_BYTE_ARRAY => {
            matches!(converted, ConvertedType::NONE | ConvertedType::DECIMAL)
        }
    };
    if supported {
        Ok(())
    } else {
        Err(format!(
            "column `{}` is {physical} annotated {converted}, which the record reader does not convert",
            field.name()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A data page header (compact protocol) declaring these sizes and values.
    fn header(uncompressed: i32, compressed: i32, values: i32) -> Vec<u8> {
        fn zigzag(out: &mut Vec<u8>, n: i32) {
            let mut n = ((n << 1) ^ (n >> 31)) as u32;
            while n >= 0x80 {
                out.push((n as u8) | 0x80);
                n >>= 7;
            }
            out.push(n as u8);
        }
        let mut out = vec![0x15];
        zigzag(&mut out, 0);
        out.push(0x15);
        zigzag(&mut out, uncompressed);
        out.push(0x15);
        zigzag(&mut out, compressed);
        // Field 5, the data page header: its num_values.
        out.push(0x2C);
        out.push(0x15);
        zigzag(&mut out, values);
        out.push(0);
        out.push(0);
        out
    }

    fn pages(chunk: Vec<u8>, gzip: bool) -> Result<(), Problem> {
        let len = chunk.len() as u64;
        let rows = Rows::of_bytes("t.parquet".into(), chunk.into(), Arc::default());
        rows.check_pages(0, len, gzip, &mut Totals::default())
    }

    #[test]
    fn a_page_declaring_more_than_the_limit_is_refused_before_it_is_read() {
        let mut chunk = header(i32::MAX, 10, 1);
        chunk.extend_from_slice(&[0; 10]);
        let err = pages(chunk, false).unwrap_err();
        assert_eq!(
            err,
            format!("it declares {} bytes uncompressed, more than --max-record-bytes ({DEFAULT_MAX_RECORD_BYTES}); raise the limit to read it", i32::MAX)
        );
        // Values that would take more than the limit once decoded (a run-length bomb).
        let mut chunk = header(10, 10, 100_000_000);
        chunk.extend_from_slice(&[0; 10]);
        let err = pages(chunk, false).unwrap_err();
        assert!(err.starts_with("it declares 100000000 values"), "{err}");
        // A page longer than its column chunk, and a negative size.
        let mut chunk = header(10, 11, 1);
        chunk.extend_from_slice(&[0; 10]);
        assert!(pages(chunk, false)
            .unwrap_err()
            .contains("past the end of its column chunk"));
        let mut chunk = header(-1, 10, 1);
        chunk.extend_from_slice(&[0; 10]);
        assert!(pages(chunk, false).unwrap_err().contains("a negative size"));
    }

    #[test]
    fn a_gzip_page_that_expands_past_its_header_is_refused_without_holding_it() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(&vec![0; 8 << 20]).unwrap();
        let bomb = encoder.finish().unwrap();
        assert!(bomb.len() < 16 << 10);
        let mut chunk = header(100, bomb.len() as i32, 1);
        chunk.extend_from_slice(&bomb);
        let err = pages(chunk, true).unwrap_err();
        assert_eq!(
            err,
            "the gzip page at byte 0 expands past the 100 bytes its header declares"
        );
        // The same bytes in a page that declares them all are read.
        let mut chunk = header(8 << 20, bomb.len() as i32, 1);
        chunk.extend_from_slice(&bomb);
        assert_eq!(pages(chunk, true), Ok(()));
    }
}
