//! Placing a batch's Codex rollouts into the home: on the collector's thread when placing
//! reads nothing from the disk, else on the writer pool.

use rayon::prelude::*;

use crate::output::{Guard, Home, OutputError};

use super::failpoint;
use super::record::{self, Outcome};

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
