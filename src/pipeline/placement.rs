//! Placing a batch's Codex rollouts into the home: on the collector's thread when placing
//! reads nothing from the disk, else on the writer pool.

use rayon::prelude::*;

use crate::output::{Guard, Home, OutputError};

use super::failpoint;
use super::record::{self, Outcome};
use crate::audit::summary::{CopyReport, HomeChanges, VersionReport, WithheldReport};
use crate::output::Placed;

/// The converted conversations of a batch's outcomes.
pub(super) fn converted_mut(
    outcomes: &mut [Vec<Outcome>],
) -> impl Iterator<Item = &mut record::Converted> {
    outcomes
        .iter_mut()
        .flatten()
        .filter_map(|outcome| match outcome {
            Outcome::Converted(done) => Some(&mut **done),
            Outcome::Merged
            | Outcome::Quarantined { .. }
            | Outcome::NotSampled
            | Outcome::Dropped { .. } => None,
        })
}

/// Writes the Codex rollouts of a converted batch into the home, in parallel on the current
/// pool (the writers), and frees their bytes; in a dry run, only decides what a run would do.
/// A duplicate ([`Claims`]) is left as marked.
pub(super) fn place_batch(
    outcomes: &mut [Vec<Outcome>],
    home: &Home,
    guard: &Guard,
) -> Result<(), OutputError> {
    outcomes.par_iter_mut().try_for_each(|outcomes| {
        converted_mut(std::slice::from_mut(outcomes)).try_for_each(|done| {
            if done.placed.is_none() {
                done.placed = Some(guard.place(
                    home,
                    &done.relative,
                    &done.bytes,
                    &done.digest,
                    &done.placement,
                )?);
                failpoint("placed");
            }
            done.bytes = Vec::new();
            Ok(())
        })
    })
}

/// [`place_batch`] for the rollouts whose placement reads nothing from the disk, on the
/// calling thread; the rest are left for the pool.
pub(super) fn place_batch_here(
    outcomes: &mut [Vec<Outcome>],
    home: &Home,
    guard: &Guard,
) -> Result<(), OutputError> {
    for done in converted_mut(outcomes) {
        if done.placed.is_none() && !guard.reads_disk(home, &done.relative) {
            done.placed = Some(guard.place(
                home,
                &done.relative,
                &done.bytes,
                &done.digest,
                &done.placement,
            )?);
            failpoint("placed");
            done.bytes = Vec::new();
        }
    }
    Ok(())
}

/// Counts into `home` what placing a session at `path` did (or, in a dry run, would do);
/// `source` is the record it was read from. True when the session is kept pending (changed
/// in Codex, in conflict, busy): its file records it.
pub(super) fn count_placed(
    home: &mut HomeChanges,
    path: &str,
    placed: &Placed,
    source: &str,
) -> bool {
    let version = |other: &String| VersionReport {
        path: path.to_string(),
        source: source.to_string(),
        other: other.clone(),
    };
    match placed {
        Placed::Written => {
            home.sessions_new += 1;
            false
        }
        Placed::Updated => {
            home.sessions_updated += 1;
            false
        }
        Placed::Unchanged => {
            home.rollouts_unchanged += 1;
            false
        }
        Placed::Kept => {
            home.sessions_kept.push(path.to_string());
            true
        }
        Placed::Replaced { copy } => {
            home.sessions_replaced.push(path.to_string());
            home.copies_kept.push(CopyReport {
                path: path.to_string(),
                copy: copy.display().to_string(),
            });
            false
        }
        Placed::Withheld(why) => {
            home.sessions_withheld.push(WithheldReport {
                path: path.to_string(),
                reason: why.name().to_string(),
            });
            false
        }
        Placed::Duplicate => {
            home.sessions_duplicate += 1;
            false
        }
        Placed::Older { newer } => {
            home.sessions_older.push(version(newer));
            false
        }
        Placed::Conflict { other } => {
            home.sessions_conflict.push(version(other));
            true
        }
        Placed::Busy { reason } => {
            home.sessions_busy.push(WithheldReport {
                path: path.to_string(),
                reason: reason.clone(),
            });
            true
        }
    }
}
