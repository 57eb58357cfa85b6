//! The run's side of the output home: its lock taken, its format checked, the finished run
//! recorded (the manifest saved, `latest` pointed at the run, old run folders removed).

use super::{Note, Options, PipelineError, Progress, Request, RunPlan};
use crate::output::kept_rules::KeptRules;
use crate::output::{Home, Manifest, OutputKind, RunLock};
use crate::source::ShardPlan;

/// The output home of the run (a shard's own folder in a sharded run), its linked folders
/// checked, and its lock, waiting for another run's as `--wait` says.
pub(super) fn lock_home(
    options: &Options,
    shard: Option<&ShardPlan>,
    progress: &dyn Progress,
) -> Result<(Home, RunLock), PipelineError> {
    let mut home = match shard {
        Some(plan) => Home::for_shard(&options.out, &plan.shard.folder_name()),
        None => Home::new(&options.out),
    };
    home.durable = options.durable;
    for note in home.check_linked_folders(options.write_through_links)? {
        progress.note(&Note::LinkedFolder(note));
    }
    let lock = RunLock::acquire_within(&home, options.wait, &options.stop, |pid| {
        progress.note(&Note::Waiting(RunLock::waiting_note(
            &home,
            pid,
            options.wait,
        )));
    })?;
    if let Some(pid) = lock.taken_over_from {
        progress.note(&Note::TookOverLock { pid });
    }
    Ok((home, lock))
}

/// Keeps the run's rule set in its folder ([`KeptRules`]) before its summary marks it
/// finished: the sessions the run lists are read with it.
pub(super) fn keep_rules(home: &Home, request: Request<'_>) -> Result<(), PipelineError> {
    let Request { options, rules, .. } = request;
    Ok(KeptRules::of(rules, &options.fingerprint.rules).keep(home)?)
}

/// Records the finished run in the home: the manifest saved and `latest` pointed at the run
/// (a dry run's only in a fresh home; otherwise `latest-plan`), the oldest run folders
/// removed (`--keep-runs`).
pub(super) fn record_run(
    plan: &RunPlan,
    manifest: &mut Manifest,
    request: Request<'_>,
) -> Result<(), PipelineError> {
    let Request {
        options, progress, ..
    } = request;
    let home = &plan.home;
    if !options.dry_run {
        manifest.save(home)?;
        if let Some(seen) = &plan.seen {
            seen.save(home)?;
        }
        home.mark_latest()?;
    } else if plan.fresh {
        home.mark_latest()?;
    } else {
        // A plan leaves `latest` on the last real run.
        home.mark_link(crate::output::home::LATEST_PLAN)?;
    }
    if let Some(keep) = options.keep_runs {
        let removed = home.prune_runs(keep)?;
        if !removed.is_empty() {
            progress.note(&Note::RunsRemoved {
                removed: removed.len(),
                keep,
            });
        }
    }
    Ok(())
}

/// One output home holds one format: a manifest that recorded the other format's files would
/// skip unchanged inputs (their output never written) or remove the other format's files.
pub(super) fn check_format(
    home: &Home,
    manifest: &Manifest,
    asked: OutputKind,
) -> Result<(), PipelineError> {
    let found = manifest
        .files
        .values()
        .map(|entry| OutputKind::recorded(entry.format.as_deref()))
        .find(|found| *found != asked);
    match found {
        None => Ok(()),
        Some(found) => Err(PipelineError::FormatMismatch {
            out: home.root.display().to_string(),
            found: found.name(),
            asked: asked.name(),
        }),
    }
}

/// Starts the run's folder in the home: says which stray entries it skipped, and removes the
/// temporary files a killed run (or one whose manifest had to be recovered) may have left.
/// Returns the run's number and the temporary files removed.
pub(super) fn start_run(
    home: &mut Home,
    manifest: &Manifest,
    progress: &dyn Progress,
) -> Result<(u32, u64), PipelineError> {
    let started = home.start_run()?;
    for stray in &started.stray {
        progress.note(&Note::StrayRunFolder {
            name: stray.clone(),
        });
    }
    let removed = if manifest.recovered || started.killed {
        home.remove_temporary_files()?
    } else {
        0
    };
    Ok((started.number, removed))
}
