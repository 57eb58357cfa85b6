//! The ordered hand-off: batches from the reader are converted a window at a time on the
//! workers and handed on, in input order, to the collector's thread, which has the writers
//! place each batch's rollouts and records the batch.

use std::collections::{HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Instant;

use crate::audit::Summary;
use crate::input::batch::BatchIndex;
use crate::input::format::FileCache;
use crate::output::{Manifest, OutputError};
use crate::rules::RuleSet;

use super::budget;
use super::collect::Collector;
use super::error::panicked;
use super::placement::{converted_mut, place_batch, place_batch_here};
use super::reader::{self, Work};
use super::record::{self, Outcome};
use super::threads::Priorities;
use super::{failpoint, gate, returns, Options, PipelineError, PlannedFile, Progress, RunPlan};
use crate::output::Output;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

/// The workers' loop, on the calling thread: each batch the reader sends is converted on the
/// pool and sent on to the collector, until the reader is done or the collector hangs up (it
/// failed, and says why when joined). Returns the seconds spent converting, or the failure
/// of a worker.
pub(super) fn convert(
    reader: &reader::Reader<'_>,
    context: &BatchContext<'_>,
    workers: &rayon::ThreadPool,
    to_collector: &SyncSender<ConvertedBatch>,
) -> Result<f64, PipelineError> {
    // Batches are converted a window at a time and handed on in order, each on one worker:
    // with one batch at a time, every worker but the one on its last record waited at the
    // end of each batch; with a batch's works spread over the workers, a record's bytes,
    // tape and outcome crossed cores (small records' workers took ~20 % more CPU at `-j 2`
    // than at `-j 1`). One more batch than workers waits in the pool's queue, so that a worker
    // done with its batch starts the next before this thread wakes to hand it on.
    let window = workers.current_num_threads() + 1;
    let (done, finished) = std::sync::mpsc::channel::<(usize, Vec<Work>, Converting)>();
    let mut flight = InFlight::default();
    workers.in_place_scope(|scope| {
        let mut going = true;
        for seq in 0.. {
            while flight.count >= window {
                flight.receive(&finished);
                going = going && flight.hand_on(reader, context, to_collector)?;
            }
            if !going {
                break;
            }
            // While the reader has nothing yet, batches that came back are handed on: a
            // reader waiting for `--memory` ([`budget`]) waits for them to be written.
            let batch = loop {
                match reader.batches.recv_timeout(HAND_ON_EVERY) {
                    Ok(batch) => break Some(batch),
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break None,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        while flight.try_receive(&finished) {}
                        going = going && flight.hand_on(reader, context, to_collector)?;
                        if !going {
                            break None;
                        }
                    }
                }
            };
            let Some(batch) = batch else {
                break;
            };
            flight.busy_since.get_or_insert_with(Instant::now);
            flight.count += 1;
            let done = done.clone();
            scope.spawn(move |_| {
                let mut batch = batch;
                let caught = catch_unwind(AssertUnwindSafe(|| convert_batch(&mut batch, context)));
                // The receiver lives until every batch spawned is back.
                let _ = done.send((seq, batch, caught));
            });
        }
        while flight.count > 0 {
            flight.receive(&finished);
            if going {
                going = flight.hand_on(reader, context, to_collector)?;
            }
        }
        Ok(flight.seconds)
    })
}

/// A batch's outcomes, or the panic that stopped its conversion.
pub(super) type Converting = std::thread::Result<BatchOutcomes>;

/// How often the converting loop, waiting for the reader, hands on the batches back.
pub(super) const HAND_ON_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// The batches being converted, and those converted before their turn to be handed on.
#[derive(Default)]
pub(super) struct InFlight {
    pub(super) waiting: std::collections::BTreeMap<usize, (Vec<Work>, Converting)>,
    /// The next batch to hand on.
    pub(super) next: usize,
    /// Batches spawned and not back yet.
    pub(super) count: usize,
    /// Time with at least one batch converting (the report's estimate of a sampled run).
    pub(super) seconds: f64,
    pub(super) busy_since: Option<Instant>,
}

impl InFlight {
    /// Takes a batch that came back, if one did; false when none has.
    pub(super) fn try_receive(
        &mut self,
        finished: &Receiver<(usize, Vec<Work>, Converting)>,
    ) -> bool {
        match finished.try_recv() {
            Ok(back) => {
                self.back(Some(back));
                true
            }
            Err(_) => false,
        }
    }

    /// Waits for a batch to come back.
    pub(super) fn receive(&mut self, finished: &Receiver<(usize, Vec<Work>, Converting)>) {
        self.back(finished.recv().ok());
    }

    /// A batch came back (`None`: its worker is gone).
    pub(super) fn back(&mut self, back: Option<(usize, Vec<Work>, Converting)>) {
        if let Some((seq, batch, caught)) = back {
            self.waiting.insert(seq, (batch, caught));
        }
        self.count -= 1;
        if self.count == 0 {
            self.seconds += self
                .busy_since
                .take()
                .map_or(0.0, |since| since.elapsed().as_secs_f64());
        }
    }

    /// Hands on the batches that are next in order; false once the collector is gone.
    pub(super) fn hand_on(
        &mut self,
        reader: &reader::Reader<'_>,
        context: &BatchContext<'_>,
        to_collector: &SyncSender<ConvertedBatch>,
    ) -> Result<bool, PipelineError> {
        while let Some((batch, caught)) = self.waiting.remove(&self.next) {
            self.next += 1;
            // Batches are handed on in order: a file whose end is in this one has nothing
            // left to read (a zip export's directory and handle are let go here, not at the
            // run's end).
            for work in &batch {
                if let Work::FileEnd(file) = work {
                    if let Some(cache) = context.caches.get(*file) {
                        cache.clear();
                    }
                }
            }
            let (outcomes, owners) = caught.map_err(|panic| panicked("convert", panic.as_ref()))?;
            let converted = ConvertedBatch {
                batch,
                outcomes,
                owners,
                disk_read: reader.disk_read.load(Ordering::Relaxed),
            };
            if to_collector.send(converted).is_err() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// What every worker of a batch reads.
pub(super) struct BatchContext<'a> {
    pub(super) files: &'a [PlannedFile],
    /// What readers keep per file between calls, by file index; cleared at each file's end.
    pub(super) caches: &'a [FileCache],
    pub(super) rules: &'a RuleSet,
    pub(super) index: &'a BatchIndex,
    pub(super) options: &'a Options,
    /// Where the collector gives each work's outcomes back to the worker that made them.
    pub(super) returns: &'a returns::Returns,
    /// Identities whose sessions keep an id of scheme 2.
    pub(super) aliases: &'a HashMap<u128, String>,
    pub(super) output: &'a dyn Output,
}

/// How the workers name a file's sessions in a home of scheme 2; `None` (the usual way) in any
/// other.
pub(super) fn naming<'a>(
    aliases: &'a HashMap<u128, String>,
    legacy: Option<&'a HashSet<String>>,
) -> Option<crate::convert::Naming<'a>> {
    (!aliases.is_empty() || legacy.is_some()).then_some(crate::convert::Naming {
        aliases: (!aliases.is_empty()).then_some(aliases),
        legacy,
    })
}

/// Converts one batch on the calling worker: for each of its works, one outcome per record,
/// in batch order (none for the other events), and the worker that converted it. Each work's
/// records are released once converted ([`reader::Records::release`]); a worker first frees
/// the outcomes it was given back ([`returns`]).
pub(super) fn convert_batch(batch: &mut [Work], context: &BatchContext<'_>) -> BatchOutcomes {
    batch
        .iter_mut()
        .map(|work| {
            let Work::Records(work) = work else {
                return (Vec::new(), None);
            };
            context.returns.free_mine();
            failpoint("convert");
            let file = &context.files[work.file].source;
            let options = context.options;
            let context = record::WorkContext {
                read: crate::input::format::ReadContext {
                    rules: context.rules,
                    path: &file.path,
                    key: &file.key,
                    root: file.root.as_deref(),
                    follow: options.walk.follow,
                    cache: &context.caches[work.file],
                },
                batch: context.index,
                output: context.output,
                sample: options.sample,
                dry_run: options.dry_run,
                baseline: options.baseline,
                naming: naming(context.aliases, context.files[work.file].legacy.as_deref()),
            };
            let outcomes = record::process_work(work, &context);
            work.release();
            (outcomes, returns::Returns::owner())
        })
        .unzip()
}

/// A batch converted: each work's outcomes, and the worker that made them.
pub(super) type BatchOutcomes = (Vec<Vec<Outcome>>, Vec<Option<usize>>);

/// A batch on its way to the collector: its events, each work's outcomes (one per record),
/// and the bytes on disk read when it was converted.
pub(super) struct ConvertedBatch {
    pub(super) batch: Vec<Work>,
    pub(super) outcomes: Vec<Vec<Outcome>>,
    /// The worker that converted each work ([`returns`]).
    pub(super) owners: Vec<Option<usize>>,
    pub(super) disk_read: u64,
}

/// The collector's loop, on its own thread: in batch order, marks the sessions an earlier
/// conversation of the run placed, has the writers place the rest, and records the batch.
pub(super) fn collect<'p>(
    converted: Receiver<ConvertedBatch>,
    mut collector: Collector<'p>,
    writers: Option<&rayon::ThreadPool>,
    plan: &'p RunPlan,
    manifest: &mut Manifest,
    progress: &dyn Progress,
    returns: &returns::Returns,
) -> Result<Collector<'p>, OutputError> {
    let mut gate = gate::Gate::new(&plan.files, &plan.guard, manifest, plan.guard.force());
    for mut done in converted.iter() {
        if let Some(writers) = writers {
            gate.admit(&done.batch, &mut done.outcomes);
            // A placement that reads nothing from the disk (a dry run's into a fresh home)
            // costs about a microsecond: handing it to the pool cost more (a wake-up of its
            // threads and of this one per batch; small records' dry run took ~7 % longer).
            place_batch_here(&mut done.outcomes, &plan.home, &plan.guard)?;
            if converted_mut(&mut done.outcomes).any(|done| done.placed.is_none()) {
                writers.install(|| place_batch(&mut done.outcomes, &plan.home, &plan.guard))?;
            }
        }
        collector.batch(
            &done.batch,
            &mut done.outcomes,
            progress,
            done.disk_read,
            manifest,
        )?;
        for (outcomes, owner) in done.outcomes.into_iter().zip(done.owners) {
            returns.give_back(owner, outcomes);
        }
    }
    Ok(collector)
}

/// The collector of the run's outcomes, in the run's report folder.
pub(super) fn collector<'p>(
    plan: &'p RunPlan,
    summary: Summary,
    manifest: &Manifest,
    options: &Options,
) -> Result<Collector<'p>, OutputError> {
    let mut collector = Collector::new(
        &plan.home,
        summary,
        &plan.files,
        &plan.guard,
        &*plan.output,
        manifest,
    )?;
    collector.fingerprint = options.fingerprint.clone();
    collector.walked = plan.walk.iter().map(|f| f.origin.clone()).collect();
    collector.protected = plan.protected.clone();
    collector.report.max_quarantine_rate = options.max_quarantine_rate;
    collector.report.report_text = options.report_text;
    collector.report.review = options.review;
    Ok(collector)
}

/// What the threads of [`run`] share.
pub(super) struct Stages<'s, 'p> {
    pub(super) plan: &'p RunPlan,
    pub(super) index: &'s BatchIndex,
    pub(super) options: &'s Options,
    pub(super) progress: &'s dyn Progress,
    pub(super) priorities: Priorities,
    pub(super) workers: &'s rayon::ThreadPool,
    /// The pool that places Codex rollouts, when the output has a file per conversation.
    pub(super) writers: Option<&'s rayon::ThreadPool>,
}

/// The reader, the workers (on the calling thread's loop, [`convert`]) and the collector's
/// thread, until every file is read, a signal stopped the reader, or a stage failed: the
/// reader's end, the collector, the seconds spent converting, the bytes on disk read.
pub(super) fn run<'p>(
    stages: &Stages<'_, 'p>,
    context: &BatchContext<'_>,
    collector: Collector<'p>,
    manifest: &mut Manifest,
    returns: &returns::Returns,
) -> (
    std::thread::Result<()>,
    Result<Collector<'p>, PipelineError>,
    Result<f64, PipelineError>,
    u64,
) {
    let Stages {
        plan,
        index,
        options,
        progress,
        priorities,
        workers,
        writers,
    } = *stages;
    let output = context.output;
    std::thread::scope(|scope| {
        let reader = reader::spawn(
            scope,
            reader::Plan {
                files: &plan.files,
                index,
                shard: plan.shard,
                stop: Arc::clone(&options.stop),
                from: options.from,
                max_record_bytes: options.max_record_bytes,
                archive: crate::input::format::archive_lines(),
                max_conversation_bytes: options.max_conversation_bytes,
                budget: budget::Budget::new(options.memory),
                // Decompressing takes 25-40 % of a record's CPU (zstd; 181 M instructions to
                // the worker's 276 M on agent transcripts, 158 M to 464 M on small records):
                // half as many files at once as workers keep them fed, and leave 2 cores
                // uncrowded.
                readers: workers.current_num_threads().div_ceil(2),
                priority: priorities.serial,
                batches: reader::Batches::for_run(options.dry_run, output.file_per_conversation()),
            },
        );
        // The ordered collector runs on its own thread, fed in batch order through a channel
        // of one: it places batch n's rollouts and records the batch while the workers convert
        // batch n+1 (on the main thread, it was ~5-15 % of a run spent with every worker idle).
        let (to_collector, converted) = sync_channel::<ConvertedBatch>(1);
        let collecting = scope.spawn(move || {
            priorities.serial.apply();
            collect(
                converted, collector, writers, plan, manifest, progress, returns,
            )
        });
        let converting = convert(&reader, context, workers, &to_collector);
        drop(to_collector);
        let collected = match collecting.join() {
            Ok(done) => done.map_err(PipelineError::from),
            Err(panic) => Err(panicked("collect", panic.as_ref())),
        };
        // Dropping the receiver unblocks a reader still sending, so the join below returns.
        drop(reader.batches);
        let read = reader.handle.join();
        let disk_read = reader.disk_read.load(Ordering::Relaxed);
        (read, collected, converting, disk_read)
    })
}
