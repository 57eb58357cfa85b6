//! `--prune`: the sessions whose records are gone from the inputs (orphans, and the sessions
//! of files gone from the walk) moved out of the home, each into `rollover/pruned/RUN/` (a copy
//! of its own, never over another), so that the home holds what the inputs give.
//!
//! Guarded: refused when an input root is missing or holds no file (an unmounted disk would
//! look like every file gone), or when more sessions would go than `--max-prune` allows; a
//! file the walk skipped (unreadable, a Codex home inside an input) is never taken for gone.
//! Kill-safe: the plan (every session and file) is journalled before anything is removed,
//! each removal as it is done, each file forgotten only once its sessions are handled, and a
//! run after a kill finishes what the killed prune started ([`finish_unfinished`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::audit::summary::{CopyReport, HomeChanges};
use crate::model::not_read::NotRead;
use crate::output::manifest::{PrunePlan, RolloutEntry};
use crate::output::{Guard, Home, Manifest, OutputError, Removal};
use crate::source::SourceFile;

/// How many sessions one `--prune` may remove (`--max-prune`): a number, or a share of the
/// sessions the manifest knows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaxPrune {
    Sessions(u64),
    Percent(f64),
}

impl Default for MaxPrune {
    /// A tenth of the home: more than a nightly job's deletions, less than a missing disk.
    fn default() -> MaxPrune {
        MaxPrune::Percent(10.0)
    }
}

impl FromStr for MaxPrune {
    type Err = String;
    fn from_str(text: &str) -> Result<MaxPrune, String> {
        let bad = || format!("`{text}` is not a number of sessions (`500`) nor a share (`10%`)");
        match text.strip_suffix('%') {
            Some(share) => {
                let share: f64 = share.trim().parse().map_err(|_| bad())?;
                if !(0.0..=100.0).contains(&share) {
                    return Err(format!("`{text}`: a share is between 0% and 100%"));
                }
                Ok(MaxPrune::Percent(share))
            }
            None => text
                .trim()
                .parse()
                .map(MaxPrune::Sessions)
                .map_err(|_| bad()),
        }
    }
}

impl std::fmt::Display for MaxPrune {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MaxPrune::Sessions(n) => write!(f, "{n}"),
            MaxPrune::Percent(share) => write!(f, "{share}%"),
        }
    }
}

impl MaxPrune {
    /// Whether removing `n` of the `total` sessions the manifest knows is allowed.
    pub fn allows(&self, n: u64, total: u64) -> bool {
        match *self {
            MaxPrune::Sessions(most) => n <= most,
            MaxPrune::Percent(share) => n as f64 <= total as f64 * share / 100.0,
        }
    }
}

/// Why `--prune` refuses to run at all: an input root that is missing or holds no file. Said
/// before anything is read or written.
pub(crate) fn missing_root(inputs: &[PathBuf], walk: &[SourceFile]) -> Option<String> {
    for input in inputs {
        if input.as_os_str() == "-" || input.starts_with("/dev") || input.starts_with("/proc") {
            continue;
        }
        let Ok(meta) = std::fs::metadata(input) else {
            return Some(format!(
                "{} is missing: with an input root gone (a disk not mounted), every session of it would be pruned",
                input.display()
            ));
        };
        if meta.is_dir() && !walk.iter().any(|f| f.path.starts_with(input)) {
            return Some(format!(
                "{} holds no file to read: with an input root empty (a disk not mounted), every session of it would be pruned",
                input.display()
            ));
        }
    }
    None
}

/// The sessions a prune would remove and the files it would forget: the manifest's files
/// gone from the walk (but those under a path the walk skipped, `protected`), with the sessions
/// no walked file lists, and every orphan.
pub(crate) fn candidates(
    manifest: &Manifest,
    walked: &HashSet<String>,
    protected: &[String],
) -> (Vec<Left>, Vec<String>) {
    let kept = |key: &str| {
        protected
            .iter()
            .any(|p| key == p || Path::new(key).starts_with(p))
    };
    let files: Vec<String> = manifest
        .files
        .keys()
        .filter(|key| !walked.contains(*key) && !kept(key))
        .cloned()
        .collect();
    let mut sessions: Vec<Left> = Vec::new();
    for key in &files {
        if let Some(entry) = manifest.files.get(key) {
            entry.rollouts.each(|path, digest| {
                if !manifest.listed_elsewhere(path, key, walked) {
                    sessions.push(Left {
                        rollout: RolloutEntry {
                            path: path.to_string(),
                            digest: digest.to_string(),
                        },
                        rules: entry.rules.clone(),
                    });
                }
            });
        }
    }
    sessions.extend(manifest.orphans.values().map(|o| Left {
        rollout: o.orphan.clone(),
        rules: o.rules.clone(),
    }));
    sessions.sort_by(|a, b| a.rollout.path.cmp(&b.rollout.path));
    sessions.dedup_by(|a, b| a.rollout.path == b.rollout.path);
    (sessions, files)
}

/// A session the home keeps whose record no input gives, with the rules fingerprint of the
/// rule set that wrote it: it holds what those rules made, whatever the rules are now.
#[derive(Debug, Clone)]
pub(crate) struct Left {
    pub rollout: RolloutEntry,
    pub rules: String,
}

/// Names the rule set that wrote each session left, so that a reviewer sees which hold an
/// older rule set's output: counted by rule set, and the first [`NotRead::LISTED`] listed.
pub(crate) fn left_by_rules(
    home: &Home,
    current: &str,
    sessions: &[Left],
    changes: &mut HomeChanges,
) {
    let state = home.existing_state().ok().flatten();
    let mut labels: HashMap<&str, String> = HashMap::new();
    for left in sessions {
        let label = labels.entry(left.rules.as_str()).or_insert_with(|| {
            crate::output::kept_rules::label(state.as_ref(), &left.rules, Some(current))
        });
        *changes
            .sessions_left_rules
            .entry(label.clone())
            .or_default() += 1;
        if changes.sessions_left_listed.len() < NotRead::LISTED {
            changes
                .sessions_left_listed
                .push(format!("{} (written by {label})", left.rollout.path));
        }
    }
}

/// What a prune needs of the run.
pub(crate) struct Pruner<'a> {
    pub home: &'a Home,
    pub guard: &'a Guard,
    pub dry_run: bool,
}

impl Pruner<'_> {
    /// Carries `plan` out: journalled first, then each session moved out (or kept, when Codex
    /// changed it or another process holds it: then remembered as an orphan), then each file
    /// forgotten, then the prune marked done. A dry run only counts.
    pub(crate) fn execute(
        &self,
        plan: PrunePlan,
        manifest: &mut Manifest,
        changes: &mut HomeChanges,
    ) -> Result<(), OutputError> {
        if !self.dry_run {
            manifest.prune_plan(self.home, plan.clone())?;
        }
        for rollout in &plan.sessions {
            self.one(rollout, manifest, changes)?;
        }
        if !self.dry_run {
            for key in &plan.files {
                manifest.forget(self.home, key)?;
            }
            manifest.prune_done(self.home, plan.run)?;
        }
        changes.rollouts_removed = changes.sessions_pruned.len() as u64;
        Ok(())
    }

    fn one(
        &self,
        rollout: &RolloutEntry,
        manifest: &mut Manifest,
        changes: &mut HomeChanges,
    ) -> Result<(), OutputError> {
        let removal = self
            .guard
            .remove(self.home, &rollout.path, &rollout.digest)?;
        match removal {
            Removal::Removed { copy } => {
                changes.sessions_pruned.push(rollout.path.clone());
                changes.copies_kept.push(CopyReport {
                    path: rollout.path.clone(),
                    copy: copy.display().to_string(),
                });
                if !self.dry_run {
                    manifest.pruned(self.home, &rollout.path)?;
                }
            }
            Removal::Missing => {
                changes.sessions_pruned.push(rollout.path.clone());
                if !self.dry_run {
                    manifest.pruned(self.home, &rollout.path)?;
                }
            }
            Removal::Kept | Removal::Busy { .. } => {
                changes.sessions_not_pruned.push(rollout.path.clone());
                if !self.dry_run && !manifest.orphans.contains_key(&rollout.path) {
                    let rules = manifest.rules_of(&rollout.path);
                    manifest.orphan(self.home, rollout.clone(), "", &rules)?;
                }
            }
        }
        Ok(())
    }
}

/// A prune a killed run journalled and did not finish: finished now, before this run reads
/// anything (a dry run leaves it for a run that writes).
pub(crate) fn finish_unfinished(
    pruner: &Pruner<'_>,
    manifest: &mut Manifest,
    changes: &mut HomeChanges,
) -> Result<(), OutputError> {
    if pruner.dry_run {
        return Ok(());
    }
    let Some(plan) = manifest.unfinished_prune.clone() else {
        return Ok(());
    };
    pruner.execute(plan, manifest, changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_a_count_or_a_share() {
        assert_eq!("500".parse(), Ok(MaxPrune::Sessions(500)));
        assert_eq!("10%".parse(), Ok(MaxPrune::Percent(10.0)));
        assert!("110%".parse::<MaxPrune>().is_err());
        assert!("ten".parse::<MaxPrune>().is_err());
        assert!(MaxPrune::Percent(10.0).allows(10, 100));
        assert!(!MaxPrune::Percent(10.0).allows(11, 100));
        assert!(MaxPrune::Sessions(3).allows(3, 1));
        assert!(!MaxPrune::Sessions(3).allows(4, 1000));
        assert!(MaxPrune::Percent(100.0).allows(7, 7));
    }
}
