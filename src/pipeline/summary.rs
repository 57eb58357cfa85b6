//! The summary as the plan knows it, before anything is converted, and what earlier runs
//! found in the files this run leaves unread.

use crate::audit::summary::{
    Fingerprints, HomeChanges, ReadAgain, Setup, ShardReport, Totals, WalkFindings,
};
use crate::audit::Summary;
use crate::output::{Manifest, OutputKind};
use crate::source::Skipped;

use super::plan::Planned;
use super::{PlannedFile, Request};

/// The summary as the plan knows it, before anything is converted.
pub(super) fn planned_summary(
    request: Request<'_>,
    planned: &Planned,
    skipped: &Skipped,
    run: u32,
    temporary_files_removed: u64,
    kind: OutputKind,
) -> Summary {
    let Request { options, rules, .. } = request;
    let counted = || planned.files.iter().filter(|f| f.portion.counted);
    Summary {
        setup: Setup {
            schema_version: crate::audit::summary::SCHEMA_VERSION,
            rules: rules.names.clone(),
            rule_digests: rules.digests.clone(),
            codex_version: rules.codex_version.clone(),
            dry_run: options.dry_run,
        },
        totals: Totals {
            files: counted().count() as u64,
            bytes_on_disk: counted().filter(|f| !f.skip).map(|f| f.source.size).sum(),
            ..Totals::default()
        },
        run,
        home: HomeChanges {
            files_unchanged: counted().filter(|f| f.skip).count() as u64,
            prune: options.prune,
            ..HomeChanges::default()
        },
        read_again: ReadAgain {
            settings_changed: planned.settings_changed.clone(),
            files_pending: planned.unsettled.pending,
        },
        fingerprint: Fingerprints {
            rules: options.fingerprint.rules.clone(),
            options: options.fingerprint.options.clone(),
        },
        temporary_files_removed,
        sample_rate: options.sample.unwrap_or(1.0),
        walk: WalkFindings {
            skipped_other_extensions: skipped.other_extensions.clone(),
            skipped_hidden: skipped.hidden(),
            skipped_symlinks: skipped.symlinks(),
            skipped_excluded: skipped.excluded(),
            skipped_unmatched: skipped.unmatched(),
            skipped_codex_homes: skipped.codex_homes.clone(),
            symlink_loops: skipped.loops.clone(),
            unreadable: planned.unreadable.clone(),
            not_read: skipped.not_read.clone(),
        }
        .with_unreadable_listed(),
        shard: options.shard.as_ref().map(|source| ShardReport {
            index: source.shard.index,
            count: source.shard.count,
            index_from: source.index_from.to_string(),
            count_from: source.count_from.to_string(),
            split_bytes: options.split_bytes,
            rollover_version: env!("CARGO_PKG_VERSION").to_string(),
            format: kind.name().to_string(),
            max_quarantine_rate: options.max_quarantine_rate,
            report_text: options.report_text,
            walk_unreadable: skipped.unreadable.len(),
            inputs: String::new(),
        }),
        ..Summary::default()
    }
}

/// What earlier runs found in the files this run does not read (unchanged since): carried
/// into its reports and verdict until the file is read again.
pub(super) fn carried(
    files: &[PlannedFile],
    manifest: &Manifest,
) -> crate::audit::summary::CarriedFindings {
    use crate::audit::summary::{CarriedFile, CarriedFinding, CarriedFindings};
    let mut carried = CarriedFindings::default();
    // Every part of a file this run leaves unread, a split file's ranges included (each
    // shard carries what it found in its own). Every unread record counts toward the rate,
    // so a sharded run's carried rate is the unsharded one's.
    for file in files.iter().filter(|f| f.skip) {
        let Some(entry) = manifest.files.get(&file.source.origin) else {
            continue;
        };
        carried.carried_records += entry.records;
        let Some(findings) = &entry.findings else {
            continue;
        };
        carried.add(CarriedFile {
            file: entry.name.clone(),
            run: findings.run,
            quarantined: findings.quarantined,
            damaged: findings.damaged,
            listed: findings
                .listed
                .iter()
                .map(|f| CarriedFinding {
                    line: f.line,
                    byte_offset: f.byte_offset,
                    class: f.class.clone(),
                    reason: f.reason.clone(),
                })
                .collect(),
        });
    }
    carried
}
