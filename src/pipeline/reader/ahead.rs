//! The read-ahead threads: several files decompressed and split at once, each into its own
//! bounded channel of [`Chunk`]s, taken by the reader in its own order ([`ReadAhead`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};

use crate::source::{records_hashing, RecordEvent};

use super::{Events, Plan};

/// A file read ahead is handed over in chunks of this many bytes of records (or events)...
const CHUNK_BYTES: usize = 1 << 20;
const CHUNK_EVENTS: usize = 256;
/// ...of which this many wait in its channel: what a read-ahead thread holds besides its
/// decoder.
const CHUNKS_AHEAD: usize = 2;

/// A piece of one file read ahead, as its thread hands it to the reader.
pub(super) struct Chunk {
    events: Vec<RecordEvent>,
    /// Bytes of the file on disk read when the chunk was cut.
    disk_read: u64,
    /// The file's last chunk: a channel that ends without one lost its thread mid-file.
    last: bool,
}

/// A file for a read-ahead thread: its index among the run's files, and where its chunks go.
type Job = (usize, SyncSender<Chunk>);

/// Files decompressed and split ahead of the reader by a few threads. The reader hands the
/// files out in its own order, the k-th to thread k mod n, each with a bounded channel for
/// its chunks, and takes the channels back in the same order. Each thread reads the files
/// handed to it one after the other, each to its end (or until the reader drops its
/// channel). The reader hands out one file per thread beyond the file it is on, no more.
///
/// So the file the reader waits for is always being read: the thread it was handed to
/// finished its earlier files, which came before it in the reader's order, so the reader
/// drained them to their last chunk (or dropped them) before it came to this one. What is
/// held ahead is bounded by the thread count: at most one file per thread, each with at most
/// [`CHUNKS_AHEAD`] chunks in its channel. A thread that panics drops its channels, and the
/// jobs queued for it with theirs: the reader sees a file end without its last chunk and
/// stops. When the reader is done, or unwinds, dropping this closes the threads' queues and
/// the channels it did not take, and every thread ends.
pub(super) struct ReadAhead<'scope> {
    /// The files to read ahead, in the reader's order, and the first of them not handed out.
    files: Vec<usize>,
    next: usize,
    /// Each thread's queue of files. Unbounded, though it never holds more than two: handing
    /// a file out must not wait for a thread, which may itself be waiting for the reader.
    queues: Vec<Sender<Job>>,
    /// The files handed out that the reader has not taken yet, in order, with their channels.
    handed: VecDeque<(usize, Receiver<Chunk>)>,
    threads: Vec<ScopedJoinHandle<'scope, ()>>,
}

impl<'scope> ReadAhead<'scope> {
    /// Starts `threads` threads over `files` (in the reader's order) and hands each its first
    /// file. A thread the system will not start leaves its files to the others (and to the
    /// reader itself, when none starts).
    pub(super) fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        plan: &'env Plan<'_>,
        files: Vec<usize>,
        threads: usize,
    ) -> ReadAhead<'scope> {
        let mut ahead = ReadAhead {
            files,
            next: 0,
            queues: Vec::new(),
            handed: VecDeque::new(),
            threads: Vec::new(),
        };
        for i in 0..threads {
            let (queue, jobs) = channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name(format!("rollover-read-{i}"))
                .spawn_scoped(scope, move || read_ahead(jobs, plan));
            let Ok(thread) = spawned else {
                break;
            };
            ahead.queues.push(queue);
            ahead.threads.push(thread);
        }
        ahead.hand_out();
        ahead
    }

    /// Hands out the next files, in order, until every thread has one beyond the reader's.
    fn hand_out(&mut self) {
        while self.handed.len() < self.queues.len() {
            let Some(&file) = self.files.get(self.next) else {
                return;
            };
            let (to_reader, chunks) = sync_channel::<Chunk>(CHUNKS_AHEAD);
            // A thread that is gone (it panicked) drops the job, and with it the sender: the
            // reader finds the file's channel closed.
            let _ = self.queues[self.next % self.queues.len()].send((file, to_reader));
            self.handed.push_back((file, chunks));
            self.next += 1;
        }
    }

    /// The chunks of `file` when it is read ahead; `None` when the reader reads it itself.
    /// The reader takes its files in order: the one read ahead next is the first handed out.
    pub(super) fn take(&mut self, file: usize) -> Option<Receiver<Chunk>> {
        if self.handed.front().is_none_or(|(first, _)| *first != file) {
            return None;
        }
        let (_, chunks) = self.handed.pop_front()?;
        self.hand_out();
        Some(chunks)
    }

    /// The reader is done: closes the threads' queues and the channels it did not take, so
    /// that every thread ends; returns them to be joined.
    pub(super) fn finish(self) -> Vec<ScopedJoinHandle<'scope, ()>> {
        let ReadAhead {
            queues,
            handed,
            threads,
            ..
        } = self;
        drop(queues);
        drop(handed);
        threads
    }
}

/// One read-ahead thread: the files handed to it, in turn, until the reader closes its queue
/// or the run stops. A file is read to its end unless the reader drops its channel: a stop is
/// the reader's to see, between two events, as when it reads a file itself.
fn read_ahead(jobs: Receiver<Job>, plan: &Plan<'_>) {
    for (file, to_reader) in jobs {
        if plan.stop.load(Ordering::Relaxed) != 0 {
            return;
        }
        let planned = &plan.files[file];
        let reader = records_hashing(&planned.source, planned.read_digest.clone(), plan.archive)
            .max_record_bytes(plan.max_record_bytes)
            .stop(&plan.stop);
        let counter = reader.disk_counter();
        let mut events = Vec::new();
        let mut bytes = 0;
        let mut dropped = false;
        for event in reader {
            if let RecordEvent::Record(record) = &event {
                bytes += record.bytes.len();
            }
            events.push(event);
            if bytes >= CHUNK_BYTES || events.len() >= CHUNK_EVENTS {
                crate::pipeline::failpoint("prefetch");
                let chunk = Chunk {
                    events: std::mem::take(&mut events),
                    disk_read: counter.load(Ordering::Relaxed),
                    last: false,
                };
                if to_reader.send(chunk).is_err() {
                    dropped = true;
                    break;
                }
                bytes = 0;
            }
        }
        if !dropped {
            crate::pipeline::failpoint("prefetch");
            let _ = to_reader.send(Chunk {
                events,
                disk_read: counter.load(Ordering::Relaxed),
                last: true,
            });
        }
    }
}

/// A file's events read ahead, as [`events`] gives a file read here; `complete` is set when
/// its last chunk arrives. A channel that ends without it lost its thread mid-file.
pub(super) fn read_ahead_events<'a>(
    chunks: Receiver<Chunk>,
    in_file: &Arc<AtomicU64>,
    complete: &Arc<AtomicBool>,
) -> Events<'a> {
    let in_file = Arc::clone(in_file);
    let complete = Arc::clone(complete);
    Box::new(chunks.into_iter().flat_map(move |chunk| {
        in_file.store(chunk.disk_read, Ordering::Relaxed);
        if chunk.last {
            complete.store(true, Ordering::Relaxed);
        }
        chunk.events.into_iter().map(|e| (e, None))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::batch::BatchIndex;
    use crate::pipeline::reader::tests::{archive, lines, plan, planned};

    /// The files handed out and not yet taken.
    fn handed(ahead: &ReadAhead<'_>) -> Vec<usize> {
        ahead.handed.iter().map(|(file, _)| *file).collect()
    }

    #[test]
    fn threads_read_no_further_ahead_than_one_file_each() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = planned(&archive(dir.path(), 12), &[false; 12]);
        let index = BatchIndex::default();
        let plan = plan(&files, &index, 2);
        // Every third file is the reader's own: the others are read ahead, in order.
        let order: Vec<usize> = (0..files.len()).filter(|i| i % 3 != 1).collect();
        std::thread::scope(|scope| {
            let mut ahead = ReadAhead::start(scope, &plan, order.clone(), 2);
            // Nothing taken yet: the two threads have the first two files, no more.
            assert_eq!(handed(&ahead), order[..2]);
            // A file the reader reads itself is not handed out.
            assert!(ahead.take(1).is_none());
            for (n, &file) in order.iter().enumerate() {
                let chunks = ahead.take(file).expect("read ahead");
                // While the reader is on a file, one more per thread is handed out.
                let beyond = &order[n + 1..(n + 3).min(order.len())];
                assert_eq!(handed(&ahead), beyond, "reader on file {file}");
                // Taken in order, every file comes whole (its last chunk says so).
                let mut records = 0;
                let mut last = false;
                for chunk in chunks {
                    assert!(!last, "file {file}: a chunk after its last");
                    records += chunk.events.len();
                    last = chunk.last;
                }
                assert_eq!(records, lines(file), "file {file}");
                assert!(last, "file {file} came without its last chunk");
            }
            for thread in ahead.finish() {
                thread.join().expect("a read-ahead thread");
            }
        });
    }
}
