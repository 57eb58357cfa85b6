//! What in a finished run needs a person, each said in a sentence: the one list both the
//! reports' verdict (blocked or incomplete when it is not empty) and the exit code (1:
//! [`super::Summary::has_findings`]) are decided by, so the two never disagree.

use super::report::{plural, visible};
use super::Summary;

/// The run's findings, in the order the reports state them; empty when the run is ready.
/// `max_rate` is `--max-quarantine-rate` (`None`: any quarantined record is a finding).
/// Records quarantined in earlier runs, in files not read again, count until they are.
pub(crate) fn of(summary: &Summary, max_rate: Option<f64>) -> Vec<String> {
    let mut reasons = Vec::new();
    let walk = &summary.walk;
    if !walk.unreadable.is_empty() {
        reasons.push(format!(
            "{} could not be read (listed under Not read): the run is incomplete",
            plural(walk.unreadable.len() as u64, "path", "paths")
        ));
    }
    let carried = &summary.carried;
    let quarantined = summary.totals.quarantined + carried.carried_quarantined;
    let records = summary.totals.records + carried.carried_records;
    let rate = quarantined as f64 / records.max(1) as f64;
    let quarantine_finding = match max_rate {
        Some(max) => rate > max,
        None => quarantined > 0,
    };
    let broke = summary.breakdown.violations.values().sum::<u64>();
    if quarantine_finding && broke > 0 {
        reasons.push(format!(
            "{} {} an invariant of the target",
            plural(broke, "conversation", "conversations"),
            if broke == 1 { "breaks" } else { "break" }
        ));
    }
    if quarantine_finding {
        reasons.push(format!(
            "{:.2} % of the records were quarantined (threshold {:.2} %)",
            100.0 * rate,
            100.0 * max_rate.unwrap_or(0.0)
        ));
    }
    if !summary.breakdown.damaged_files.is_empty() {
        let damaged = summary.breakdown.damaged_files.len() as u64;
        reasons.push(format!(
            "{} {} damaged",
            plural(damaged, "input file", "input files"),
            if damaged == 1 { "is" } else { "are" }
        ));
    }
    if carried.carried_damaged > 0 || (quarantine_finding && carried.carried_quarantined > 0) {
        reasons.push(format!(
            "{} quarantined and {} damaged in {} not read again since an earlier run found them (listed below; they count until the file is read again)",
            plural(carried.carried_quarantined, "record", "records"),
            plural(carried.carried_damaged, "place", "places"),
            plural(carried.carried_files.len() as u64, "file", "files")
        ));
    }
    if !walk.symlink_loops.is_empty() {
        reasons.push(format!(
            "{} not followed again (listed under Not read)",
            plural(
                walk.symlink_loops.len() as u64,
                "symlink loop",
                "symlink loops"
            )
        ));
    }
    if !walk.skipped_codex_homes.is_empty() {
        reasons.push(format!(
            "{} not read: each holds a rollover manifest or Codex rollouts, so it was taken for a Codex home ({})",
            plural(walk.skipped_codex_homes.len() as u64, "folder", "folders"),
            walk.skipped_codex_homes
                .iter()
                .map(|h| visible(h))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let home = &summary.home;
    if !home.sessions_kept.is_empty() {
        reasons.push(format!(
            "{} kept pending: changed in Codex since written while the source has newer data (--force replaces it, keeping a copy)",
            plural(home.sessions_kept.len() as u64, "session", "sessions")
        ));
    }
    if !home.sessions_conflict.is_empty() {
        reasons.push(format!(
            "{} of another file under the id of a session placed: neither extends the other, the session is left as it is (--force writes it, keeping a copy)",
            plural(home.sessions_conflict.len() as u64, "conversation", "conversations")
        ));
    }
    if !home.sessions_busy.is_empty() {
        reasons.push(format!(
            "{} not replaced: open in another process, or changed while the run read it (the next run tries again)",
            plural(home.sessions_busy.len() as u64, "session", "sessions")
        ));
    }
    if let Some(refused) = &home.prune_refused {
        reasons.push(refused.clone());
    }
    reasons
}
