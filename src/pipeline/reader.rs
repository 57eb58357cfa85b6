//! The reader: one thread walks the files in order and sends their records in bounded
//! batches, so memory stays flat in the archive's size.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::input::batch::BatchIndex;
use crate::input::format::{self, Granularity, SourceFormat};
use crate::source::{records, Damage, RawRecord, RecordEvent, SourceFile};

const BATCH_RECORDS: usize = 512;
const BATCH_BYTES: usize = 16 << 20;
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
    /// Set by a signal: stop reading; the file being read is not finished.
    pub stop: Arc<AtomicBool>,
    /// The format every file is in (`--from`); detected per file when `None`.
    pub from: Option<SourceFormat>,
}

/// Starts the reader thread over the plan's files. Files whose batch results were read ahead
/// are replayed from `index.leftovers` (what is not a result line).
pub fn spawn(plan: Plan) -> Reader {
    let Plan {
        files,
        skip,
        index,
        stop,
        from,
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
            // Decided at the file's first record; a whole-file format collects it here.
            let mut format = from;
            let mut whole: Vec<(RawRecord, u64)> = Vec::new();
            for (event, given) in events(&index, file_index, file, &in_file) {
                super::failpoint("reader");
                if stop.load(Ordering::Relaxed) {
                    stopped = true;
                    break;
                }
                match event {
                    RecordEvent::Record(record) => {
                        batch_bytes += record.bytes.len();
                        let ordinal_here = given.unwrap_or(ordinal);
                        let format = *format.get_or_insert_with(|| detect(&record));
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

/// The events of one file, each with its ordinal when it was read ahead. `in_file` follows
/// the bytes on disk read so far in this file.
fn events<'a>(
    index: &'a BatchIndex,
    file_index: usize,
    file: &SourceFile,
    in_file: &Arc<AtomicU64>,
) -> Box<dyn Iterator<Item = (RecordEvent, Option<u64>)> + 'a> {
    match index.leftovers.get(&file_index) {
        Some(left) => Box::new(left.iter().map(|(e, o)| (clone_event(e), Some(*o)))),
        None => {
            let reader = records(file);
            let counter = reader.disk_counter();
            let in_file = Arc::clone(in_file);
            Box::new(reader.map(move |e| {
                in_file.store(counter.load(Ordering::Relaxed), Ordering::Relaxed);
                (e, None)
            }))
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
