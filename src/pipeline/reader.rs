//! The reader: one thread walks the files in order and sends their records in bounded
//! batches, so memory stays flat in the archive's size. In a sharded run it reads a split
//! file from its start (so every record keeps its ordinal) and sends only the records, blank
//! lines and damage of the ranges its shard owns, each run of them after a [`Work::Segment`]
//! marker; an uncompressed file is read no further than the shard's last range.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::input::batch::BatchIndex;
use crate::input::format::{self, Granularity, SourceFormat};
use crate::source::{records, Compression, Damage, RawRecord, RecordEvent, ShardPlan, SourceFile};

use super::Portion;

const BATCH_RECORDS: usize = 512;
const BATCH_BYTES: usize = 4 << 20;
/// Batches read ahead of the workers.
const BATCHES_AHEAD: usize = 2;

/// One event of the input, in order.
pub enum Work {
    /// A Chat Completions record, the index of its file and its ordinal in that file.
    Record(RawRecord, usize, u64),
    /// Records of another source format: one record, or a whole file when the format's
    /// conversations span records.
    Source(SourceWork),
    Blank,
    Damage(Damage),
    /// Every event of this file was read: once the batch holding it is written, the file is
    /// completely on disk and can be recorded as done.
    FileEnd(usize),
    /// What follows, up to the next marker, is from this file (its index) and byte range (0
    /// for a whole file): `report merge` puts the shards' report lines back in input order by
    /// these.
    Segment(usize, u64),
}

/// Records a format's reader reads together.
pub struct SourceWork {
    /// Each record with its ordinal in its file.
    pub records: Vec<(RawRecord, u64)>,
    pub file: usize,
    pub format: SourceFormat,
}

/// The running reader.
pub struct Reader {
    pub handle: JoinHandle<()>,
    pub batches: Receiver<Vec<Work>>,
    /// Bytes on disk read so far, across files: what the progress bar measures.
    pub disk_read: Arc<AtomicU64>,
}

/// What the reader reads.
pub struct Plan {
    pub files: Arc<Vec<SourceFile>>,
    /// Files left out (unchanged since the manifest recorded them).
    pub skip: Vec<bool>,
    pub index: Arc<BatchIndex>,
    /// What part of each file this run reads.
    pub portions: Vec<Portion>,
    /// The shard, when the run is one.
    pub shard: Option<ShardPlan>,
    /// Set by a signal: stop reading; the file being read is not finished.
    pub stop: Arc<AtomicBool>,
    /// The format every file is in (`--from`); detected per file when `None`.
    pub from: Option<SourceFormat>,
    /// A longer record is sent as oversized, never loaded whole (`--max-record-bytes`).
    pub max_record_bytes: u64,
}

/// Starts the reader thread over the plan's files. Files whose batch results were read ahead
/// are replayed from `index.leftovers` (what is not a result line).
pub fn spawn(plan: Plan) -> Reader {
    let Plan {
        files,
        skip,
        index,
        portions,
        shard,
        stop,
        from,
        max_record_bytes,
    } = plan;
    let (sender, batches) = sync_channel::<Vec<Work>>(BATCHES_AHEAD);
    let disk_read = Arc::new(AtomicU64::new(0));
    let disk = Arc::clone(&disk_read);
    let handle = std::thread::spawn(move || {
        let mut batch = Vec::with_capacity(BATCH_RECORDS);
        let mut batch_bytes = 0;
        let mut disk_before = 0u64;
        for (file_index, file) in files.iter().enumerate() {
            if skip.get(file_index).copied().unwrap_or(false) {
                disk_before += file.size;
                continue;
            }
            let mut ordinal = 0u64;
            let in_file = Arc::new(AtomicU64::new(0));
            let mut stopped = false;
            let (events, compression) =
                events(&index, file_index, file, &in_file, max_record_bytes);
            let mut ranges = portions
                .get(file_index)
                .filter(|p| p.ranges)
                .zip(shard)
                .map(|(_, plan)| Ranges::new(plan, file, compression));
            if ranges.is_none() {
                batch.push(Work::Segment(file_index, 0));
            }
            // Decided at the file's first record; a whole-file format collects it here.
            let mut format = from;
            let mut whole: Vec<(RawRecord, u64)> = Vec::new();
            for (event, given) in events {
                super::failpoint("reader");
                if stop.load(Ordering::Relaxed) {
                    stopped = true;
                    break;
                }
                if let (None, RecordEvent::Record(record)) = (format, &event) {
                    format = Some(detect(record));
                }
                // A format whose conversations span the file is never cut into ranges: the
                // shard of its range 0 reads it whole, the others leave it.
                let spans_file = format
                    .and_then(format::reader)
                    .is_some_and(|r| r.granularity() == Granularity::File);
                if let (Some(cut), true) = (&ranges, spans_file) {
                    if !cut.plan.owns_range(&cut.key, 0) {
                        break;
                    }
                    if cut.open != Some(0) {
                        batch.push(Work::Segment(file_index, 0));
                    }
                    ranges = None;
                }
                if let Some(ranges) = ranges.as_mut() {
                    match ranges.take(&event) {
                        Take::Skip => {
                            if let RecordEvent::Record(_) = event {
                                ordinal += 1;
                            }
                            continue;
                        }
                        Take::Past => break,
                        Take::Enter(range) => batch.push(Work::Segment(file_index, range)),
                        Take::Keep => {}
                    }
                }
                match event {
                    RecordEvent::Record(record) => {
                        batch_bytes += record.bytes.len();
                        let ordinal_here = given.unwrap_or(ordinal);
                        let format = format.unwrap_or(SourceFormat::Chat);
                        match format::reader(format).map(|r| r.granularity()) {
                            None => batch.push(Work::Record(record, file_index, ordinal_here)),
                            Some(Granularity::Record) => batch.push(Work::Source(SourceWork {
                                records: vec![(record, ordinal_here)],
                                file: file_index,
                                format,
                            })),
                            Some(Granularity::File) => whole.push((record, ordinal_here)),
                        }
                        ordinal += 1;
                    }
                    RecordEvent::Blank => batch.push(Work::Blank),
                    RecordEvent::Damage(damage) => batch.push(Work::Damage(damage)),
                }
                if batch.len() >= BATCH_RECORDS || batch_bytes >= BATCH_BYTES {
                    let read = in_file.load(Ordering::Relaxed).min(file.size);
                    disk.store(disk_before + read, Ordering::Relaxed);
                    if sender.send(std::mem::take(&mut batch)).is_err() {
                        return;
                    }
                    batch_bytes = 0;
                }
            }
            if stopped {
                break;
            }
            if let (Some(format), false) = (format, whole.is_empty()) {
                batch.push(Work::Source(SourceWork {
                    records: whole,
                    file: file_index,
                    format,
                }));
            }
            batch.push(Work::FileEnd(file_index));
            disk_before += file.size;
        }
        disk.store(disk_before, Ordering::Relaxed);
        if !batch.is_empty() {
            // The receiver is gone only when the run stopped early; nothing left to do then.
            let _ = sender.send(batch);
        }
    });
    Reader {
        handle,
        batches,
        disk_read,
    }
}

/// Which events of a split file the shard keeps.
struct Ranges {
    plan: ShardPlan,
    key: String,
    /// The range of the last record read: a blank line after it goes with it.
    last: u64,
    /// The range whose segment is open.
    open: Option<u64>,
    /// An uncompressed file is read up to the end of the shard's last range only.
    end: Option<u64>,
}

enum Take {
    /// Another shard's.
    Skip,
    /// Beyond this shard's last range: stop reading the file.
    Past,
    /// This shard's, in a range whose segment is open.
    Keep,
    /// This shard's, the first event of this range.
    Enter(u64),
}

impl Ranges {
    fn new(plan: ShardPlan, file: &SourceFile, compression: Compression) -> Ranges {
        let end = match compression {
            Compression::None => plan.last_owned_range(file),
            Compression::Zstd | Compression::Gzip | Compression::Zip => None,
        };
        Ranges {
            plan,
            key: file.key.clone(),
            last: 0,
            open: None,
            end,
        }
    }

    fn take(&mut self, event: &RecordEvent) -> Take {
        let range = match event {
            RecordEvent::Record(record) => {
                self.last = self.plan.range_of(record.location.byte_offset);
                self.last
            }
            RecordEvent::Blank => self.last,
            RecordEvent::Damage(damage) => self.plan.range_of(damage.location.byte_offset),
        };
        if self.end.is_some_and(|end| range > end) {
            return Take::Past;
        }
        if !self.plan.owns_range(&self.key, range) {
            return Take::Skip;
        }
        if self.open == Some(range) {
            return Take::Keep;
        }
        self.open = Some(range);
        Take::Enter(range)
    }
}

type Events<'a> = Box<dyn Iterator<Item = (RecordEvent, Option<u64>)> + 'a>;

/// The events of one file, each with its ordinal when it was read ahead, and the file's
/// compression. `in_file` follows the bytes on disk read so far in this file.
fn events<'a>(
    index: &'a BatchIndex,
    file_index: usize,
    file: &SourceFile,
    in_file: &Arc<AtomicU64>,
    max_record_bytes: u64,
) -> (Events<'a>, Compression) {
    match index.leftovers.get(&file_index) {
        Some(left) => (
            Box::new(left.iter().map(|(e, o)| (clone_event(e), Some(*o)))),
            Compression::None,
        ),
        None => {
            let reader = records(file).max_record_bytes(max_record_bytes);
            let compression = reader.compression();
            let counter = reader.disk_counter();
            let in_file = Arc::clone(in_file);
            let events = reader.map(move |e| {
                in_file.store(counter.load(Ordering::Relaxed), Ordering::Relaxed);
                (e, None)
            });
            (Box::new(events), compression)
        }
    }
}

/// The format of the file whose first record this is.
fn detect(record: &RawRecord) -> SourceFormat {
    if format::readers().is_empty() {
        return SourceFormat::Chat;
    }
    let value = serde_json::from_slice::<serde_json::Value>(&record.bytes).ok();
    format::detect(value.as_ref(), &record.bytes)
}

fn clone_event(event: &RecordEvent) -> RecordEvent {
    match event {
        RecordEvent::Record(r) => RecordEvent::Record(r.clone()),
        RecordEvent::Blank => RecordEvent::Blank,
        RecordEvent::Damage(d) => RecordEvent::Damage(d.clone()),
    }
}
