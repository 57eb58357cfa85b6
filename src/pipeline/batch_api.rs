//! The Batch API results, behind three calls: [`scan`] (before the run: every file of the
//! walk's results, read whole ahead of the requests that join them), [`join`] (after it, in
//! a shard: the requests of its unclaimed results, looked for in the other shards' files) and
//! [`settle`] (the results counted, joined or quarantined, once every file's lines are in).

use crate::input::batch::BatchIndex;
use crate::output::results_seen::ResultsSeen;
use crate::output::{Manifest, OutputError};
use crate::rules::InvalidUnicode;
use crate::source::{ShardPlan, SourceFile};

use super::collect::Collector;
use super::error::interrupted;
use super::reader::Work;
use super::shard::owns_result;
use super::threads::{thread_pool, Priority};
use super::{claims, Note, PipelineError, PlannedFile, Progress, Request, RunPlan};

/// The Batch API results of every file of the walk, kept for what this run counts. When a
/// results file changed since the last run, every planned file is read again (`files`' skips
/// cleared): its requests may be anywhere. A shard knows its own results files' changes from
/// its manifest, the others' from what it saw of them last.
pub(super) fn scan(
    walk: &[SourceFile],
    shard: Option<&ShardPlan>,
    mut seen: Option<&mut ResultsSeen>,
    files: &mut [PlannedFile],
    request: Request<'_>,
) -> Result<BatchIndex, PipelineError> {
    let Request { options, rules, .. } = request;
    let repair = rules.policy.invalid_unicode == InvalidUnicode::Replace;
    // Every file's first record is looked at on `--jobs` threads (one for a single file).
    let threads = if walk.len() > 1 {
        options.jobs.unwrap_or(0)
    } else {
        1
    };
    let pool = thread_pool(threads, None, Priority::Run)?;
    let mut index = BatchIndex::scan(
        walk,
        &rules.input,
        repair,
        options.max_record_bytes,
        &options.stop,
        &pool,
    );
    interrupted(options, "looking for Batch API results")?;
    // Each file of the walk's index among this run's files, if it reads it.
    let mut run_of = vec![None; walk.len()];
    for (i, file) in files.iter().enumerate() {
        if let Some(slot) = run_of.get_mut(file.portion.index) {
            *slot = Some(i);
        }
    }
    let mut results_changed = false;
    for &w in index.results_files() {
        let file = &walk[w];
        let changed = match (run_of[w], seen.as_deref_mut()) {
            (Some(i), _) => !files[i].skip,
            (None, Some(seen)) => seen.changed(&file.key, file.size, file.mtime_ns, &file.path),
            // Unsharded, a file the plan could not read: it is not converted.
            (None, None) => false,
        };
        results_changed |= changed;
    }
    if results_changed {
        files.iter_mut().for_each(|f| f.skip = false);
    }
    // The results of a file left out (unchanged) were counted when it was read.
    index.keep(&run_of, |w, location| {
        run_of[w].is_some_and(|i| !files[i].skip) && owns_result(shard, &walk[w], location)
    });
    Ok(index)
}

/// A shard's Batch API results that no request of its own claimed: their requests are looked
/// for in the files of the walk it did not convert ([`claims`]), on the workers.
pub(super) fn join(
    plan: &RunPlan,
    index: &BatchIndex,
    workers: &rayon::ThreadPool,
    request: Request<'_>,
) {
    let unclaimed = index.unclaimed();
    if unclaimed > 0 {
        request
            .progress
            .note(&Note::ClaimingElsewhere { unclaimed });
    }
    // The files of the walk this run converts whole (not a split file's ranges): their
    // requests joined already.
    let mut converted = vec![false; plan.walk.len()];
    for file in plan.files.iter().filter(|f| !f.portion.ranges) {
        if let Some(whole) = converted.get_mut(file.portion.index) {
            *whole = true;
        }
    }
    let walk = claims::Walk {
        files: &plan.walk,
        converted: &converted,
    };
    workers.install(|| claims::claim_elsewhere(index, &walk, request.rules, request.options));
}

/// Counts the Batch API results this run counts, once every file's report lines are in, as
/// in an unsharded run: one segment per results file (per range, split), at a place past the
/// walk's files (a segment's file past the run's files is its place itself), so that `report
/// merge` orders the shards' results as the walk does.
pub(super) fn settle(
    plan: &RunPlan,
    index: BatchIndex,
    collector: &mut Collector<'_>,
    manifest: &mut Manifest,
    progress: &dyn Progress,
    disk_read: u64,
) -> Result<(), OutputError> {
    let groups = index.into_groups(|result| {
        let file = &plan.walk[result.walk_file];
        let range = match &plan.shard {
            Some(shard) if shard.is_split(file) => {
                shard.range_of(result.record.location.byte_offset)
            }
            Some(_) | None => 0,
        };
        (result.walk_file, range)
    });
    for ((w, range), group) in groups {
        let segment = [Work::Segment(plan.walk.len() + w, range)];
        collector.batch(&segment, &mut [Vec::new()], progress, disk_read, manifest)?;
        collector.batch_results(&group)?;
    }
    collector.held.results_done(&plan.files, progress);
    Ok(())
}
