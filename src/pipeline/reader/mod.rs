//! The reader: one thread walks the files in order and sends their records in bounded
//! batches, so memory stays flat in the archive's size. In a sharded run it reads a split
//! file from its start (so every record keeps its ordinal) and sends only the records, blank
//! lines and damage of the ranges its shard owns, each run of them after a [`Work::Segment`]
//! marker; an uncompressed file is read no further than the shard's last range.
//!
//! When there are several files to read (of 64 KiB or more), up to half of `--jobs` of them
//! are decompressed and split at once by [`ReadAhead`] threads, each into its own bounded
//! channel, and the reader takes them in order: one zstd stream decompresses on one thread
//! only, and on agent transcripts that thread needs 65 % of a worker's time, so a single
//! reader would feed no more than ~1.5 workers on a machine with more cores. What the reader
//! sends is the same either way.
//!
//! By concern: this file holds the thread, its plan and its batches; [`walk`] the one loop of
//! a file's events ([`walk_file`]: identify, route, finish), which the reader and a file read
//! in memory ([`super::file`]) share; [`grouping`] a file's records identified and routed to
//! works ([`FileRecords`]); [`ahead`] the read-ahead threads; [`ranges`] which events of a
//! split file a shard keeps.

mod ahead;
mod grouping;
mod ranges;
mod walk;

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};

use crate::input::batch::BatchIndex;
use crate::input::format::SourceFormat;
use crate::source::open::ArchiveLines;
use crate::source::{records_hashing, Compression, Damage, RawRecord, RecordEvent, ShardPlan};

use super::budget::{Budget, OverBudget, Permit};
use super::PlannedFile;
use ahead::{read_ahead_events, ReadAhead};
pub(super) use grouping::{detect, FileRecords};
use ranges::{Ranges, Take};
use walk::Step;
pub(super) use walk::{walk_file, FileWalk, Halt};

/// A batch ends at this many records or bytes of records, whichever comes first. Every stage
/// between the reader and the collector holds a few batches and their outputs, so these set
/// the run's memory in flight; fewer, larger batches save hand-offs (each a channel send, a
/// spawn and a wake-up). A batch holding a long record ends at [`LONG_BATCH_BYTES`]; a dry run
/// or a run writing Responses bodies takes twice each ([`Batches::LARGE`]). How these sizes
/// were chosen, with the measurements: samples/BENCHMARKS.md, "Batch sizes".
const BATCH_RECORDS: usize = 256;
const BATCH_BYTES: usize = 512 << 10;
/// A record of this many bytes or more is long: its batch ends at [`LONG_BATCH_BYTES`] (a
/// Codex home's; twice that in [`Batches::LARGE`]).
const LONG_RECORD: usize = 16 << 10;
const LONG_BATCH_BYTES: usize = 256 << 10;
/// Batches read ahead of the workers.
const BATCHES_AHEAD: usize = 2;

/// Where a batch ends: at this many records or bytes of records, whichever comes first, or
/// at `long_bytes` once it holds a long record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Batches {
    pub records: usize,
    pub bytes: usize,
    /// Where a batch that holds a long record ends.
    pub long_bytes: usize,
}

impl Batches {
    /// A run that writes a Codex home: what its rollouts in flight allow ([`BATCH_RECORDS`],
    /// [`BATCH_BYTES`]). With [`Batches::LARGE`] a Codex home of small records peaked at 68 MB.
    pub(crate) const HOME: Batches = Batches {
        records: BATCH_RECORDS,
        bytes: BATCH_BYTES,
        long_bytes: LONG_BATCH_BYTES,
    };
    /// A dry run frees each rollout once it is checked, and a run writing Responses bodies
    /// holds each body only until the collector writes it, so their batches can be twice a
    /// home's: half the hand-offs, for a few MB more at the peak (samples/BENCHMARKS.md,
    /// "Batch sizes").
    pub(crate) const LARGE: Batches = Batches {
        records: 2 * BATCH_RECORDS,
        bytes: 2 * BATCH_BYTES,
        long_bytes: 2 * LONG_BATCH_BYTES,
    };

    /// The batches of a run (a dry run when `dry_run`) into an output that writes a file per
    /// conversation (`file_per_conversation`: a Codex home) or per input file.
    pub(crate) fn for_run(dry_run: bool, file_per_conversation: bool) -> Batches {
        match !dry_run && file_per_conversation {
            true => Batches::HOME,
            false => Batches::LARGE,
        }
    }
}

/// A smaller file is read by the reader itself: handing a file over (a channel, a wake-up)
/// costs more than reading a file of a record or two (`samples/BENCHMARKS.md`).
const AHEAD_MIN_BYTES: u64 = 64 << 10;

/// One event of the input, in order.
pub(crate) enum Work {
    /// Records to convert together: one record of a format read record by record, or a whole
    /// file's when the format's conversations span records.
    Records(Records),
    /// Blank lines in a row (their number).
    Blank(u64),
    Damage(Damage),
    /// Every event of this file was read: once the batch holding it is written, the file is
    /// completely on disk and can be recorded as done.
    FileEnd(usize),
    /// What follows, up to the next marker, is from this file (its index) and byte range (0
    /// for a whole file): `report merge` puts the shards' report lines back in input order by
    /// these.
    Segment(usize, u64),
}

/// The one unit of work: records of one file, in one format, read together by its reader.
pub(crate) struct Records {
    /// Each record with its ordinal in its file.
    pub records: Vec<(RawRecord, u64)>,
    pub file: usize,
    pub format: SourceFormat,
    /// The decompressed bytes its records took to read (an oversized one's whole size, though
    /// only its head was kept): what the progress and the summary count, still known once the
    /// records' bytes are released.
    read: u64,
    /// Its share of `--memory` (a whole file's work, or a large record's), given back when the
    /// work is dropped, its outcomes written.
    permit: Option<Permit>,
}

impl Records {
    pub(crate) fn new(
        records: Vec<(RawRecord, u64)>,
        file: usize,
        format: SourceFormat,
    ) -> Records {
        let read = records.iter().map(|(record, _)| read_size(record)).sum();
        Records {
            records,
            file,
            format,
            read,
            permit: None,
        }
    }

    /// The work holding `permit` until it is dropped.
    fn holding(mut self, permit: Permit) -> Records {
        self.permit = Some(permit);
        self
    }

    /// See [`Records::read`]: the same before and after [`Records::release`].
    pub(crate) fn read_size(&self) -> u64 {
        self.read
    }

    /// Frees the records' bytes once they are converted: each outcome holds what the
    /// collector writes of its record (a quarantine line keeps its own copy), so that a batch
    /// waiting for its turn holds its outputs only. With small records the batches between
    /// the workers and the collector held ~4,000 records (8 MB) of a run's peak.
    pub(crate) fn release(&mut self) {
        for (record, _) in &mut self.records {
            record.bytes = bytes::Bytes::new();
        }
    }
}

/// The decompressed bytes a record took to read: an oversized one's whole size, though only
/// its head was kept (a zip's conversations.json of 2 GiB reads as 2 GiB, not its first KiB).
fn read_size(record: &RawRecord) -> u64 {
    record.oversized.unwrap_or(record.bytes.len() as u64)
}

/// The running reader.
pub(crate) struct Reader<'scope> {
    pub handle: ScopedJoinHandle<'scope, ()>,
    pub batches: Receiver<Vec<Work>>,
    /// Bytes on disk read so far, across files: what the progress bar measures.
    pub disk_read: Arc<AtomicU64>,
}

/// What the reader reads.
pub(crate) struct Plan<'a> {
    /// The run's files, each with what part of it to read; those left out (unchanged since
    /// the manifest recorded them) are skipped.
    pub files: &'a [PlannedFile],
    pub index: &'a BatchIndex,
    /// The shard, when the run is one.
    pub shard: Option<ShardPlan>,
    /// The signal that asked the run to stop (0: none): stop reading; the file being read is
    /// not finished. Input streams check it at every buffer, so a long record or skip stops too.
    pub stop: Arc<AtomicUsize>,
    /// The format every file is in (`--from`); detected per file when `None`.
    pub from: Option<SourceFormat>,
    /// A longer record is sent as oversized, never loaded whole (`--max-record-bytes`).
    pub max_record_bytes: u64,
    /// How a zip is read ([`crate::input::format::archive_lines`]).
    pub archive: Option<ArchiveLines>,
    /// A whole-file format's records are collected up to this many bytes; past it the file is
    /// refused with a damage naming the limit, and its records dropped as they come.
    pub max_conversation_bytes: u64,
    /// At most this many files are decompressed at once (half of `--jobs`, rounded up).
    pub readers: usize,
    /// `--memory`: what whole-file work and large records are admitted against.
    pub budget: Arc<Budget>,
    /// The reader's priority, and its read-ahead threads' ([`super::Priorities`]).
    pub(super) priority: super::Priority,
    /// Where a batch of short records ends.
    pub batches: Batches,
}

/// Starts the reader thread over the plan's files, in `scope`: it borrows the plan's files
/// and index. Files whose batch results were read ahead are replayed from `index.leftovers`
/// (what is not a result line).
pub(crate) fn spawn<'scope, 'env: 'scope>(
    scope: &'scope Scope<'scope, 'env>,
    plan: Plan<'env>,
) -> Reader<'scope> {
    let (sender, batches) = sync_channel::<Vec<Work>>(BATCHES_AHEAD);
    let disk_read = Arc::new(AtomicU64::new(0));
    let disk = Arc::clone(&disk_read);
    let handle = scope.spawn(move || {
        // Before the read-ahead threads start: they start at the reader's priority.
        plan.priority.apply();
        // Files read whole from disk go to the read-ahead threads when there are several; a
        // small file, a file replayed from the batch index or cut into a shard's ranges is
        // read here.
        let ahead: Vec<usize> = (0..plan.files.len())
            .filter(|&i| plan.files[i].source.size >= AHEAD_MIN_BYTES)
            .filter(|&i| !plan.files[i].skip)
            .filter(|i| !plan.index.leftovers.contains_key(i))
            .filter(|&i| !plan.files[i].portion.ranges)
            .collect();
        let threads = if ahead.len() > 1 {
            plan.readers.clamp(1, ahead.len())
        } else {
            0
        };
        let plan = &plan;
        std::thread::scope(|scope| {
            // Dropped however the reader ends, a panic too: its threads then end, and the
            // scope can join them.
            let mut ahead = ReadAhead::start(scope, plan, ahead, threads);
            read(plan, &mut ahead, &sender, &disk);
            // A read-ahead thread's panic is the reader's, with its own message.
            for thread in ahead.finish() {
                if let Err(panic) = thread.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        });
    });
    Reader {
        handle,
        batches,
        disk_read,
    }
}

/// The reader's loop: every file in order, each walked ([`walk_file`]) into batches.
fn read(plan: &Plan, ahead: &mut ReadAhead<'_>, sender: &SyncSender<Vec<Work>>, disk: &AtomicU64) {
    let mut out = Batcher {
        sender,
        batches: plan.batches,
        batch: Vec::with_capacity(plan.batches.records),
        bytes: 0,
        limit: plan.batches.bytes,
        gone: false,
        disk,
        disk_before: 0,
    };
    for (file_index, planned) in plan.files.iter().enumerate() {
        let file = &planned.source;
        if planned.skip {
            out.disk_before += file.size;
            continue;
        }
        let in_file = Arc::new(AtomicU64::new(0));
        // A file read ahead is whole only once its last chunk came; until then it counts as
        // stopped (as a file the reader reads itself is until its last event).
        let complete = Arc::new(AtomicBool::new(true));
        let (events, compression) = match ahead.take(file_index) {
            Some(chunks) => {
                complete.store(false, Ordering::Relaxed);
                // Its compression matters only to a shard's ranges, never read ahead.
                (
                    read_ahead_events(chunks, &in_file, &complete),
                    Compression::None,
                )
            }
            None => events(plan.index, file_index, planned, &in_file, plan),
        };
        let ranges = plan
            .shard
            .filter(|_| planned.portion.ranges)
            .map(|shard| Ranges::new(shard, file, compression));
        if ranges.is_none() {
            out.batch.push(Work::Segment(file_index, 0));
        }
        let records = FileRecords::new(file_index, plan.from)
            .max_conversation_bytes(plan.max_conversation_bytes);
        let mut walker = FileRead {
            plan,
            out: &mut out,
            file: file_index,
            size: file.size,
            ranges,
            permit: plan.budget.permit(),
            own: None,
            in_file,
            complete,
        };
        if walk_file(events, records, &mut walker).is_break() {
            // Nobody takes batches any more: nothing left to count or send.
            if out.gone {
                return;
            }
            break;
        }
        out.disk_before += file.size;
    }
    disk.store(out.disk_before, Ordering::Relaxed);
    if !out.batch.is_empty() {
        // The receiver is gone only when the run stopped early; nothing left to do then.
        let _ = sender.send(out.batch);
    }
}

/// The batch the reader fills, file after file, and where it goes.
struct Batcher<'a> {
    sender: &'a SyncSender<Vec<Work>>,
    batches: Batches,
    batch: Vec<Work>,
    /// The bytes of the records read since the batch began, and where it ends.
    bytes: usize,
    limit: usize,
    /// The receiver is gone: the run stopped early, nothing more to send.
    gone: bool,
    /// Bytes on disk read so far (what the progress bar measures), set at each full batch;
    /// `disk_before` of the files before the one being read.
    disk: &'a AtomicU64,
    disk_before: u64,
}

impl Batcher<'_> {
    /// Sends the batch and begins the next.
    fn send(&mut self) -> ControlFlow<Halt> {
        if self.sender.send(std::mem::take(&mut self.batch)).is_err() {
            self.gone = true;
            return ControlFlow::Break(Halt::Stop);
        }
        self.bytes = 0;
        self.limit = self.batches.bytes;
        ControlFlow::Continue(())
    }
}

/// One file walked by the reader: the shard's ranges of it, the stop flag, its share of
/// `--memory`, and its works into the batch.
struct FileRead<'a, 'b> {
    plan: &'a Plan<'a>,
    out: &'b mut Batcher<'a>,
    file: usize,
    size: u64,
    ranges: Option<Ranges>,
    /// The file's share of the budget while its records are held whole, and a large record's
    /// own, given with its work.
    permit: Permit,
    own: Option<Permit>,
    /// Bytes of the file on disk read so far; whether its last event came.
    in_file: Arc<AtomicU64>,
    complete: Arc<AtomicBool>,
}

impl FileWalk for FileRead<'_, '_> {
    fn take(&mut self, event: &RecordEvent, records: &FileRecords) -> ControlFlow<Halt, Step> {
        super::failpoint("reader");
        if self.plan.stop.load(Ordering::Relaxed) != 0 {
            return ControlFlow::Break(Halt::Stop);
        }
        // A format whose conversations span the file is never cut into ranges: the shard of
        // its range 0 reads it whole, the others leave it.
        if let (Some(cut), true) = (&self.ranges, records.spans_file()) {
            if !cut.plan.owns_range(&cut.key, 0) {
                return ControlFlow::Break(Halt::End);
            }
            if cut.open != Some(0) {
                self.out.batch.push(Work::Segment(self.file, 0));
            }
            self.ranges = None;
        }
        if let Some(ranges) = self.ranges.as_mut() {
            match ranges.take(event) {
                Take::Skip => return ControlFlow::Continue(Step::Skip),
                Take::Past => return ControlFlow::Break(Halt::End),
                Take::Enter(range) => self.out.batch.push(Work::Segment(self.file, range)),
                Take::Keep => {}
            }
        }
        ControlFlow::Continue(Step::Take)
    }

    fn admit(&mut self, record: &RawRecord, records: &mut FileRecords) -> ControlFlow<Halt, Step> {
        let budget = &self.plan.budget;
        // Its share of `--memory` first: held whole (with its file) or large.
        let cost = records.cost(record);
        let mut own = None;
        if cost > 0 {
            let holder = match records.holds() {
                true => &mut self.permit,
                false => own.insert(budget.permit()),
            };
            if !budget.try_grow(holder, cost) {
                // Waits for work already sent to be written: what is batched goes first, so
                // that nothing it waits for is held here.
                if !self.out.batch.is_empty() {
                    self.out.send()?;
                }
                if let Err(over) = budget.grow(holder, cost, &self.plan.stop) {
                    match records.holds() {
                        true => {
                            records.refuse_over(over, record);
                            self.permit = budget.permit();
                        }
                        false => {
                            self.out.batch.push(Work::Damage(over_budget(record, over)));
                            return ControlFlow::Continue(Step::Skip);
                        }
                    }
                }
            }
        }
        self.own = own;
        self.out.bytes += record.bytes.len();
        if record.bytes.len() >= LONG_RECORD {
            self.out.limit = self.out.batches.long_bytes;
        }
        ControlFlow::Continue(Step::Take)
    }

    fn work(&mut self, work: Option<Work>, records: &FileRecords) -> ControlFlow<Halt> {
        if self.permit.bytes() > 0 && !records.holds() {
            // Refused on the way (--max-conversation-bytes): nothing is held.
            self.permit = self.plan.budget.permit();
        }
        let own = self.own.take();
        if let Some(work) = work {
            self.out.batch.push(match (work, own) {
                (Work::Records(records), Some(own)) => Work::Records(records.holding(own)),
                (work, _) => work,
            });
        }
        let out = &mut *self.out;
        if out.batch.len() >= out.batches.records || out.bytes >= out.limit {
            let read = self.in_file.load(Ordering::Relaxed).min(self.size);
            out.disk.store(out.disk_before + read, Ordering::Relaxed);
            out.send()?;
        }
        ControlFlow::Continue(())
    }

    fn finish(&mut self, last: Option<Work>) -> ControlFlow<()> {
        if !self.complete.load(Ordering::Relaxed) {
            return ControlFlow::Break(());
        }
        if let Some(work) = last {
            let permit = std::mem::replace(&mut self.permit, self.plan.budget.permit());
            self.out.batch.push(match work {
                Work::Records(records) => Work::Records(records.holding(permit)),
                other @ (Work::Blank(_)
                | Work::Damage(_)
                | Work::FileEnd(_)
                | Work::Segment(..)) => other,
            });
        }
        self.out.batch.push(Work::FileEnd(self.file));
        ControlFlow::Continue(())
    }
}

/// A record too large for the whole budget: not converted, a damage at its place naming
/// `--memory`.
fn over_budget(record: &RawRecord, over: OverBudget) -> Damage {
    Damage {
        location: record.location.clone(),
        compressed_offset: None,
        message: format!("a record of {} bytes: {over}", record.bytes.len()),
    }
}

pub(super) type Events<'a> = Box<dyn Iterator<Item = (RecordEvent, Option<u64>)> + 'a>;

/// The events of one file, each with its ordinal when it was read ahead, and the file's
/// compression. `in_file` follows the bytes on disk read so far in this file.
fn events<'a>(
    index: &'a BatchIndex,
    file_index: usize,
    planned: &PlannedFile,
    in_file: &Arc<AtomicU64>,
    plan: &Plan<'_>,
) -> (Events<'a>, Compression) {
    match index.leftovers.get(&file_index) {
        // The file's own compression: a shard's ranges of a split results file are found by
        // offsets in the decompressed stream, which its size on disk does not bound.
        Some(left) => (
            Box::new(left.iter().map(|(e, o)| (clone_event(e), Some(*o)))),
            index.compression(file_index),
        ),
        None => {
            let reader =
                records_hashing(&planned.source, planned.read_digest.clone(), plan.archive)
                    .max_record_bytes(plan.max_record_bytes)
                    .stop(&plan.stop);
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

fn clone_event(event: &RecordEvent) -> RecordEvent {
    match event {
        RecordEvent::Record(r) => RecordEvent::Record(r.clone()),
        RecordEvent::Blank(n) => RecordEvent::Blank(*n),
        RecordEvent::Damage(d) => RecordEvent::Damage(d.clone()),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::source::SourceFile;
    use std::io::Write;
    use std::time::Duration;

    pub(super) fn raw(bytes: &[u8], oversized: Option<u64>) -> RawRecord {
        RawRecord {
            oversized,
            ..super::super::record::tests::record(bytes)
        }
    }

    #[test]
    fn records_released_once_converted_still_count_the_bytes_read() {
        // An oversized record keeps only its head, but counts as its whole size read.
        let head = vec![b'x'; 1024];
        let records = vec![
            (raw(br#"{"a":1}"#, None), 0),
            (raw(&head, Some(5 << 20)), 1),
        ];
        let mut work = Records::new(records, 3, SourceFormat::CHAT);
        assert_eq!(work.read_size(), 7 + (5 << 20));
        work.release();
        assert!(work.records.iter().all(|(r, _)| r.bytes.is_empty()));
        assert_eq!(work.records.len(), 2, "the records stay, for their count");
        assert_eq!(work.read_size(), 7 + (5 << 20));
    }

    /// The records of file `i`: some files empty, some crossing several chunks.
    pub(super) fn lines(i: usize) -> usize {
        (i * 37) % 700
    }

    /// A Chat Completions record naming its file and line, ~300 bytes: a file of more than
    /// ~220 is read ahead, a shorter one by the reader itself.
    pub(super) fn record(i: usize, line: usize) -> String {
        let text = format!("{i} {line} {}", "x".repeat(250));
        format!(r#"{{"messages":[{{"role":"user","content":"{text}"}}]}}"#)
    }

    /// `count` files of Chat Completions records, file `i` holding `lines(i)` records.
    pub(super) fn archive(dir: &std::path::Path, count: usize) -> Vec<SourceFile> {
        (0..count)
            .map(|i| {
                let path = dir.join(format!("f{i:03}.jsonl"));
                let mut out = std::fs::File::create(&path).expect("create");
                for line in 0..lines(i) {
                    writeln!(out, "{}", record(i, line)).expect("write");
                }
                let size = std::fs::metadata(&path).expect("stat").len();
                SourceFile {
                    display: Arc::from(path.display().to_string()),
                    root: Some(Arc::from(dir)),
                    key: format!("f{i:03}.jsonl"),
                    origin: path.display().to_string(),
                    path,
                    size,
                    mtime_ns: 0,
                    ctime_ns: 0,
                    ino: 0,
                }
            })
            .collect()
    }

    /// The files as a run plans them: each whole, those of `skip` left out.
    pub(super) fn planned(files: &[SourceFile], skip: &[bool]) -> Vec<PlannedFile> {
        files
            .iter()
            .enumerate()
            .map(|(index, source)| PlannedFile {
                source: source.clone(),
                portion: super::super::Portion {
                    index,
                    ranges: false,
                    counted: true,
                },
                skip: skip[index],
                digest: String::new(),
                read_digest: None,
                legacy: None,
            })
            .collect()
    }

    pub(super) fn plan<'a>(
        files: &'a [PlannedFile],
        index: &'a BatchIndex,
        readers: usize,
    ) -> Plan<'a> {
        Plan {
            files,
            index,
            shard: None,
            stop: Arc::new(AtomicUsize::new(0)),
            from: None,
            max_record_bytes: 1 << 30,
            archive: crate::input::format::archive_lines(),
            max_conversation_bytes: 1 << 30,
            readers,
            budget: Budget::new(u64::MAX),
            priority: super::super::Priority::Run,
            batches: Batches::HOME,
        }
    }

    /// What a reader of `files` with `readers` threads ahead sent, as text: one entry per
    /// record (file, ordinal, bytes) and per file's end, in order; and the batches' sizes.
    fn sent(files: &[PlannedFile], readers: usize) -> (Vec<String>, Vec<usize>) {
        let index = BatchIndex::default();
        std::thread::scope(|scope| received(spawn(scope, plan(files, &index, readers))))
    }

    fn received(reader: Reader<'_>) -> (Vec<String>, Vec<usize>) {
        let mut events = Vec::new();
        let mut sizes = Vec::new();
        for batch in reader.batches.iter() {
            sizes.push(batch.len());
            for work in batch {
                match work {
                    Work::Records(work) => {
                        for (record, ordinal) in &work.records {
                            events.push(format!(
                                "{} {ordinal} {}",
                                work.file,
                                String::from_utf8_lossy(&record.bytes)
                            ))
                        }
                    }
                    Work::FileEnd(file) => events.push(format!("end {file}")),
                    Work::Segment(file, range) => events.push(format!("segment {file} {range}")),
                    Work::Blank(n) => events.push(format!("blank {n}")),
                    Work::Damage(damage) => events.push(format!("damage {}", damage.message)),
                }
            }
        }
        reader.handle.join().expect("the reader ends");
        (events, sizes)
    }

    #[test]
    fn files_read_ahead_arrive_whole_in_order_and_in_the_same_batches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = archive(dir.path(), 40);
        // Both kinds: files read ahead, and files too small to hand over.
        let large = files.iter().filter(|f| f.size >= AHEAD_MIN_BYTES).count();
        assert!(
            (10..30).contains(&large),
            "{large} of 40 files to read ahead"
        );
        let mut skip = vec![false; files.len()];
        skip[3] = true;
        skip[17] = true;
        // One file alone is read by the reader itself, with no thread ahead of it.
        let (alone, _) = sent(&planned(&files[5..6], &[false]), 4);
        assert_eq!(alone.len(), lines(5) + 2, "{alone:?}");
        let files = planned(&files, &skip);
        let (one, one_sizes) = sent(&files, 1);
        for readers in [2, 3, 8, 64] {
            let (many, sizes) = sent(&files, readers);
            assert_eq!(many, one, "{readers} threads ahead");
            assert_eq!(sizes, one_sizes, "{readers} threads ahead");
        }
        // Every record of every file not skipped, in order, each file ended once.
        let mut expected = Vec::new();
        for (i, _) in files.iter().enumerate().filter(|(i, _)| !skip[*i]) {
            expected.push(format!("segment {i} 0"));
            for line in 0..lines(i) {
                expected.push(format!("{i} {line} {}", record(i, line)));
            }
            expected.push(format!("end {i}"));
        }
        assert_eq!(one, expected);
    }

    #[test]
    fn a_reader_that_stops_early_leaves_no_thread_reading_ahead() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = planned(&archive(dir.path(), 40), &[false; 40]);
        let (done, joined) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let index = BatchIndex::default();
            let ended = std::thread::scope(|scope| {
                let reader = spawn(scope, plan(&files, &index, 4));
                let first = reader.batches.recv().expect("a first batch");
                assert!(!first.is_empty());
                // The run ends: nobody takes the reader's batches any more.
                drop(reader.batches);
                reader.handle.join().is_ok()
            });
            done.send(ended)
        });
        assert_eq!(
            joined.recv_timeout(Duration::from_secs(60)),
            Ok(true),
            "the reader and its threads did not end"
        );
    }

    /// A Chat Completions record of exactly `bytes` bytes.
    fn sized(bytes: usize) -> String {
        let shell = r#"{"messages":[{"role":"user","content":""}]}"#;
        let record = shell.replace(
            r#""""#,
            &format!(r#""{}""#, "x".repeat(bytes - shell.len())),
        );
        assert_eq!(record.len(), bytes);
        record
    }

    /// `text` written as `name` in `dir`, planned as a run's one file to read.
    fn one_file(dir: &std::path::Path, name: &str, text: &str) -> Vec<PlannedFile> {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        let source = SourceFile {
            display: Arc::from(path.display().to_string()),
            root: Some(Arc::from(dir)),
            key: name.to_owned(),
            origin: path.display().to_string(),
            size: std::fs::metadata(&path).expect("stat").len(),
            path,
            mtime_ns: 0,
            ctime_ns: 0,
            ino: 0,
        };
        planned(&[source], &[false])
    }

    /// The lengths of the records of each batch the reader sends for `files`, its short
    /// records' batches ending at `batches`.
    fn batch_lengths(files: &[PlannedFile], batches: Batches) -> Vec<Vec<usize>> {
        let index = BatchIndex::default();
        std::thread::scope(|scope| {
            let reader = spawn(
                scope,
                Plan {
                    batches,
                    ..plan(files, &index, 1)
                },
            );
            let sent = reader
                .batches
                .iter()
                .map(|batch| {
                    let records = batch.iter().filter_map(|work| match work {
                        Work::Records(work) => Some(work.records.iter()),
                        Work::Blank(_) | Work::Damage(_) | Work::FileEnd(_) | Work::Segment(..) => {
                            None
                        }
                    });
                    records.flatten().map(|(r, _)| r.bytes.len()).collect()
                })
                .collect();
            reader.handle.join().expect("the reader ends");
            sent
        })
    }

    /// A Codex home holds its rollouts in flight until written: its batches stay short. A dry
    /// run or Responses bodies take large ones.
    #[test]
    fn only_a_run_that_writes_a_codex_home_keeps_its_batches_short() {
        assert_eq!(Batches::for_run(false, true), Batches::HOME);
        assert_eq!(Batches::for_run(true, true), Batches::LARGE);
        assert_eq!(Batches::for_run(false, false), Batches::LARGE);
        assert_eq!(Batches::for_run(true, false), Batches::LARGE);
        assert_eq!(Batches::LARGE.records, 2 * Batches::HOME.records);
        assert_eq!(Batches::LARGE.bytes, 2 * Batches::HOME.bytes);
        assert_eq!(Batches::LARGE.long_bytes, 2 * Batches::HOME.long_bytes);
    }

    #[test]
    fn a_batch_ends_at_256_records_or_512_kib_or_256_kib_with_a_long_record_and_a_large_one_at_twice_that(
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let (short, long) = (1_500, LONG_RECORD + 3_616);
        // 300 short records, then 200 more with a long one at 400.
        let lengths: Vec<usize> = (0..500)
            .map(|i| if i == 400 { long } else { short })
            .collect();
        let text: String = lengths.iter().map(|&n| sized(n) + "\n").collect();
        let files = one_file(dir.path(), "mixed.jsonl", &text);
        let batches = batch_lengths(&files, Batches::HOME);
        let counts: Vec<usize> = batches.iter().map(Vec::len).collect();
        // 255 short records (374 KiB) and the file's opening segment make the first batch. The
        // next holds the long record: it ends once past 256 KiB, 17 short records after it
        // (145 + 1 + 17 records, 263,000 bytes; 16 would make 261,500). The rest is short again.
        assert_eq!(counts, [255, 163, 82], "{batches:?}");
        assert_eq!(batches.concat(), lengths);
        let bytes: Vec<usize> = batches.iter().map(|b| b.iter().sum()).collect();
        assert!(
            bytes[0] > LONG_BATCH_BYTES && bytes[0] < BATCH_BYTES,
            "{bytes:?}"
        );
        assert!(bytes[1] >= LONG_BATCH_BYTES && bytes[1] - short < LONG_BATCH_BYTES);

        // Large batches (a dry run's) are twice as long: of short records, 512 records or 1 MiB;
        // one that holds a long record ends once past 512 KiB, here right after the long record
        // (400 short records before it, 600,000 bytes), and the 99 records left make the last
        // batch.
        let dry = batch_lengths(&files, Batches::LARGE);
        let counts: Vec<usize> = dry.iter().map(Vec::len).collect();
        assert_eq!(counts, [401, 99], "{dry:?}");
        assert_eq!(dry.concat(), lengths);
        // 511 short records and the segment fill a large batch, at 766,500 bytes.
        let text: String = (0..600).map(|_| sized(short) + "\n").collect();
        let files = one_file(dir.path(), "short.jsonl", &text);
        let counts = |files: &[PlannedFile], batches| -> Vec<usize> {
            batch_lengths(files, batches).iter().map(Vec::len).collect()
        };
        assert_eq!(counts(&files, Batches::LARGE), [511, 89]);
        assert_eq!(counts(&files, Batches::HOME), [255, 256, 89]);
        // 30 long records of 20,000 bytes: a home's batch ends past 256 KiB (14 records,
        // 280,000 bytes), a large one past 512 KiB (27, 540,000).
        let text: String = (0..30).map(|_| sized(long) + "\n").collect();
        let files = one_file(dir.path(), "long.jsonl", &text);
        assert_eq!(counts(&files, Batches::HOME), [14, 14, 2]);
        assert_eq!(counts(&files, Batches::LARGE), [27, 3]);
    }

    /// The nice values of this process's threads named `rollover-read-*`, from `/proc`.
    #[cfg(target_os = "linux")]
    fn read_ahead_nice() -> Vec<i32> {
        let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
        let mut seen = Vec::new();
        for task in tasks.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // The fields after the name: the state is the third field, the nice value the 19th.
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map_or("", |(_, r)| r)
                .split(' ')
                .collect();
            if let (true, Some(nice)) = (comm.starts_with("rollover-read-"), fields.get(17)) {
                seen.push(nice.parse().expect("a nice value"));
            }
        }
        seen
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_reader_that_yields_starts_its_read_ahead_threads_yielding_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = planned(&archive(dir.path(), 40), &[false; 40]);
        let index = BatchIndex::default();
        let run = super::super::threads::tests::nice();
        let lowered = (run + super::super::threads::YIELD_NICE).min(19);
        let mut plan = plan(&files, &index, 2);
        plan.priority = super::super::Priority::Lowered;
        std::thread::scope(|scope| {
            let reader = spawn(scope, plan);
            // The reader waits to send its third batch: its read-ahead threads are running.
            let first = reader.batches.recv().expect("a first batch");
            assert!(!first.is_empty());
            std::thread::sleep(Duration::from_millis(200));
            // Other tests' readers run at the run's priority; only this one yields.
            assert!(
                read_ahead_nice().contains(&lowered),
                "no read-ahead thread at nice {lowered}: {:?}",
                read_ahead_nice()
            );
            drop(reader.batches);
            reader.handle.join().expect("the reader ends");
        });
        // The thread that spawned the reader keeps its priority.
        assert_eq!(super::super::threads::tests::nice(), run);
    }
}
