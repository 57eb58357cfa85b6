//! The summary `convert` prints for people: one screen, fitted to the terminal's width.

use crate::audit::sample::SampleEstimate;
use crate::audit::Summary;
use crate::cli::{ConvertArgs, OutputFormat};
use crate::commands::outln;
use crate::commands::ui::{bytes, bytes_per_second, group, plural, wrap_list, wrap_text, Ui};
use crate::source::shard::Shard;

const RULES_SHOWN: usize = 8;

/// `name count` pairs, counts grouped.
fn counted<'a>(pairs: impl IntoIterator<Item = (&'a String, &'a u64)>) -> Vec<String> {
    pairs
        .into_iter()
        .map(|(k, v)| format!("{k} {}", group(*v)))
        .collect()
}

/// The summary for people: one screen, fitted to the terminal's width, every count grouped,
/// every size in binary units, nothing left out without saying so.
/// The summary's lines, each label in a column and long values wrapped to the width.
struct SummaryLines {
    width: usize,
    lines: Vec<String>,
}

impl SummaryLines {
    fn text(&mut self, label: &str, body: String) {
        let label = format!("{label:<13}");
        self.lines
            .extend(wrap_text("  ", &label, &body, self.width));
    }

    /// An empty list is no line at all, rather than a label with nothing after it.
    fn list(&mut self, label: &str, items: Vec<String>) {
        if !items.is_empty() {
            let label = format!("{label:<13}");
            self.lines
                .extend(wrap_list("  ", &label, &items, self.width));
        }
    }
}

pub(super) fn print_summary(
    s: &Summary,
    args: &ConvertArgs,
    ui: &Ui,
    name: &str,
) -> std::io::Result<()> {
    let mut out = SummaryLines {
        width: ui.width,
        lines: Vec::new(),
    };
    sample_lines(&mut out, s, ui);
    input_lines(&mut out, s, ui);
    result_lines(&mut out, s, ui);
    state_lines(&mut out, s, args, ui);
    let lines = out.lines;
    // `audit` is a dry run by definition: its header says which command ran, and only
    // `convert --dry-run` needs saying that nothing was written.
    outln!(
        "rollover {name}{}",
        if s.setup.dry_run && name == "convert" {
            " (dry run: no rollout written)"
        } else {
            ""
        }
    )?;
    for line in lines {
        outln!("{}", line.trim_end())?;
    }
    Ok(())
}

/// A sampled run says so first, with what it estimates of the full run and how sure it is
/// (the 95 % margins of [`SampleEstimate`]): every count below is the sample's.
fn sample_lines(out: &mut SummaryLines, s: &Summary, ui: &Ui) {
    let Some(estimate) = SampleEstimate::of(s) else {
        return;
    };
    let percent = |share: f64| {
        let text = format!("{:.2}", 100.0 * share);
        let text = text.trim_end_matches('0').trim_end_matches('.');
        format!("{text} %")
    };
    out.text(
        "sampled",
        ui.warn(&format!(
            "{} of conversations ({} of {} audited), estimates ± a 95 % margin: {} ± {} conversations, quarantined {} ± {} of records (Wilson interval {} to {}); the counts below are the sample's",
            percent(estimate.rate),
            plural(estimate.records_audited, "record", "records"),
            group(estimate.records),
            group(estimate.conversations),
            group(estimate.conversations_margin),
            percent(estimate.quarantine_share),
            percent(estimate.quarantine_margin()),
            percent(estimate.quarantine_low),
            percent(estimate.quarantine_high),
        )),
    );
}

/// The walk's files and, of those, the ones read with their bytes: an incremental run reads
/// only the files the manifest does not hold as they are, and its bytes are theirs.
fn files_read(s: &Summary) -> Vec<String> {
    let walked = plural(s.totals.files, "input file", "input files");
    let unchanged = s.home.files_unchanged;
    let read = s.totals.files.saturating_sub(unchanged);
    let sizes = format!(
        "{} on disk, {} decompressed",
        bytes(s.totals.bytes_on_disk),
        bytes(s.totals.bytes_read)
    );
    if unchanged == 0 {
        return vec![format!("{walked}: {sizes}")];
    }
    let them = |n: u64| if n == 1 { "it" } else { "them" };
    if read == 0 {
        let (all, none) = match unchanged {
            1 => ("", "not read"),
            _ => ("all ", "none read"),
        };
        return vec![format!(
            "{walked}, {all}unchanged since the manifest recorded {}: {none}",
            them(unchanged)
        )];
    }
    vec![
        format!("{walked}: read {}, {sizes}", group(read)),
        format!(
            "{} unchanged since the manifest recorded {}",
            group(unchanged),
            them(unchanged)
        ),
    ]
}

/// What was read: rules, files, records, skips, damage.
fn input_lines(out: &mut SummaryLines, s: &Summary, ui: &Ui) {
    out.text(
        "rules",
        format!(
            "{} (Codex {})",
            s.setup.rules.join(", "),
            s.setup.codex_version
        ),
    );
    let mut files = files_read(s);
    if s.totals.blank_lines > 0 {
        files.push(plural(s.totals.blank_lines, "blank line", "blank lines"));
    }
    out.list("files", files);
    if !crate::audit::summary::only_chat(&s.reading.formats) {
        let formats = s
            .reading
            .formats
            .iter()
            .map(|(f, n)| format!("{f} {}", group(*n)));
        out.list("formats", formats.collect());
    }
    let mut joined = if s.totals.joined > 0 {
        format!(" + batch results joined {}", group(s.totals.joined))
    } else {
        String::new()
    };
    if s.reading.records_merged > 0 {
        joined.push_str(&format!(
            " + merged into a conversation {}",
            group(s.reading.records_merged)
        ));
    }
    let dropped: u64 = s.reading.records_dropped.values().sum();
    if dropped > 0 {
        joined.push_str(&format!(" + dropped by rule {}", group(dropped)));
    }
    let quarantined = format!("quarantined {}", group(s.totals.quarantined));
    out.text(
        "records",
        format!(
            "{} = {} + {}{joined}",
            group(s.totals.records),
            ui.ok(&format!("converted {}", group(s.totals.converted))),
            if s.totals.quarantined > 0 {
                ui.bad(&quarantined)
            } else {
                quarantined
            }
        ),
    );
    for (class, n) in &s.breakdown.quarantine_reasons {
        out.text("", format!("quarantined {class}: {}", group(*n)));
    }
    for (rule, n) in &s.reading.records_dropped {
        out.text("", format!("dropped by {rule}: {}", group(*n)));
    }
    for (path, n) in &s.reading.messages_by_shape {
        out.text("guessed",
            format!(
                "messages found at `{path}` by shape in {}: pass `--messages-at {path}` to make it explicit",
                plural(*n, "record", "records")
            ),
        );
    }
    let other_extensions = s.walk.skipped_other_extensions.values().sum::<u64>();
    let skips = other_extensions
        + s.walk.skipped_hidden
        + s.walk.skipped_symlinks
        + s.walk.skipped_excluded
        + s.walk.skipped_unmatched
        + s.walk.skipped_codex_homes.len() as u64;
    if skips > 0 || !s.walk.unreadable.is_empty() || !s.walk.symlink_loops.is_empty() {
        out.list(
            "skipped",
            [
                (
                    other_extensions,
                    plural(other_extensions, "other extension", "other extensions"),
                ),
                (
                    s.walk.skipped_hidden,
                    format!("{} hidden", group(s.walk.skipped_hidden)),
                ),
                (
                    s.walk.skipped_symlinks,
                    format!("{} symlinks", group(s.walk.skipped_symlinks)),
                ),
                (
                    s.walk.skipped_excluded,
                    format!("{} excluded", group(s.walk.skipped_excluded)),
                ),
                (
                    s.walk.skipped_unmatched,
                    format!("{} matching no --glob", group(s.walk.skipped_unmatched)),
                ),
                (
                    s.walk.skipped_codex_homes.len() as u64,
                    plural(
                        s.walk.skipped_codex_homes.len() as u64,
                        "Codex home",
                        "Codex homes",
                    ),
                ),
                (
                    s.walk.symlink_loops.len() as u64,
                    plural(
                        s.walk.symlink_loops.len() as u64,
                        "symlink loop",
                        "symlink loops",
                    ),
                ),
                (
                    s.walk.unreadable.len() as u64,
                    format!("{} unreadable", group(s.walk.unreadable.len() as u64)),
                ),
            ]
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(_, text)| text)
            .collect(),
        );
    }
    for d in &s.breakdown.damaged_files {
        out.text(
            "damaged",
            format!(
                "{}: {}",
                crate::audit::report::visible(&d.broke_at()),
                ui.bad(&crate::audit::report::visible(&d.message))
            ),
        );
    }
}

/// What was written: items, phases, rules, violations, text, time.
fn result_lines(out: &mut SummaryLines, s: &Summary, ui: &Ui) {
    out.list("items", counted(&s.breakdown.items));
    out.list("phases", counted(&s.breakdown.phases));
    let mut fired: Vec<(&String, &u64)> = s.breakdown.rules_fired.iter().collect();
    fired.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut shown: Vec<String> = fired
        .iter()
        .take(RULES_SHOWN)
        .map(|(k, v)| {
            // Repairs (policies) stand out from classification rules.
            let name = if k.starts_with("policy.") {
                ui.warn(k)
            } else {
                k.to_string()
            };
            format!("{name} {}", group(**v))
        })
        .collect();
    if fired.len() > RULES_SHOWN {
        shown.push(format!(
            "+{} more (see summary.json)",
            group((fired.len() - RULES_SHOWN) as u64)
        ));
    }
    out.list("rules fired", shown);
    out.list("violations", counted(&s.breakdown.violations));
    if s.totals.converted > 0 {
        out.text(
            "text bytes",
            format!(
                "in {} + added {} = out {} + dropped {}",
                group(s.text.text_bytes_in),
                group(s.text.text_bytes_added),
                group(s.text.text_bytes_out),
                group(s.text.text_bytes_dropped)
            ),
        );
    }
    let secs = s.seconds.max(1e-9);
    out.text(
        "time",
        format!(
            "{:.2} s, {} records/s, {} decompressed",
            s.seconds,
            group((s.totals.records as f64 / secs) as u64),
            bytes_per_second(s.totals.bytes_read as f64 / secs)
        ),
    );
    // Time spent behind another run's lock is not this run's: said apart.
    if s.wait_seconds > 0.0 {
        out.text(
            "waited",
            format!(
                "{:.2} s for another run's lock (--wait), before the time above",
                s.wait_seconds
            ),
        );
    }
}

/// What the run did to sessions (a dry run: would do), each count with its meaning; counts of
/// zero left out.
fn session_counts(s: &Summary) -> Vec<String> {
    let counts = [
        (s.home.sessions_new, "new"),
        (s.home.sessions_updated, "updated"),
        (s.home.rollouts_unchanged, "unchanged"),
        (s.home.sessions_kept.len() as u64, "kept pending"),
        (s.home.sessions_replaced.len() as u64, "replaced"),
        (s.home.sessions_withheld.len() as u64, "withheld"),
        (s.home.sessions_duplicate, "duplicate"),
        (
            s.home.sessions_left,
            "left (their record is gone; --prune removes them)",
        ),
        (s.home.sessions_pruned.len() as u64, "pruned"),
        (
            s.home.sessions_not_pruned.len() as u64,
            "not pruned (changed in Codex, or open)",
        ),
        (
            s.home.sessions_older.len() as u64,
            "older snapshot, skipped",
        ),
        (s.home.sessions_conflict.len() as u64, "in conflict"),
        (s.home.sessions_split.len() as u64, "split"),
        (s.home.sessions_busy.len() as u64, "busy"),
    ];
    counts
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{} {what}", group(n)))
        .collect()
}

/// The sessions left, by the rule set that wrote them: a session left holds what those rules
/// made, which may not be what this run's rules make.
fn left_line(s: &Summary) -> Option<String> {
    if s.home.sessions_left_rules.is_empty() {
        return None;
    }
    let sets: Vec<String> = s
        .home
        .sessions_left_rules
        .iter()
        .map(|(rules, n)| format!("{} written by {rules}", group(*n)))
        .collect();
    Some(format!(
        "{}, each as those rules made it; --prune removes them, and a record that comes back is converted again with this run's rules",
        sets.join(", ")
    ))
}

/// The kept-pending sessions the summary lists by path (the report lists every one).
const KEPT_LISTED: usize = 20;

/// The home's state: incremental counts, kept and replaced sessions, where the reports are.
fn state_lines(out: &mut SummaryLines, s: &Summary, args: &ConvertArgs, ui: &Ui) {
    let state = match &s.shard {
        Some(shard) => {
            let shard = Shard {
                index: shard.index,
                count: shard.count,
            };
            args.out.join("rollover/shards").join(shard.folder_name())
        }
        None => args.out.join("rollover"),
    };
    let sessions = session_counts(s);
    if !sessions.is_empty() {
        // A dry run's counts are the plan: what a run would do.
        // A Responses run writes a body file per input file, not a session per conversation.
        let label = match (s.setup.dry_run, args.format) {
            (true, _) => "plan",
            (false, OutputFormat::Responses) => "body files",
            (false, OutputFormat::Codex) => "sessions",
        };
        out.text(label, sessions.join(", "));
    }
    if let Some(left) = left_line(s) {
        out.text("left", left);
    }
    if !s.home.sessions_kept.is_empty() {
        out.text(
            "kept",
            ui.warn(&format!(
                "{} changed in Codex since written, while the source has newer data: kept and pending (--force replaces):",
                plural(s.home.sessions_kept.len() as u64, "session", "sessions")
            )),
        );
        // Each by its path, as the README promises, up to a screenful; the report has all.
        for path in s.home.sessions_kept.iter().take(KEPT_LISTED) {
            out.text("", crate::audit::report::visible(path));
        }
        if s.home.sessions_kept.len() > KEPT_LISTED {
            out.text(
                "",
                format!(
                    "+{} more (listed in the report)",
                    group((s.home.sessions_kept.len() - KEPT_LISTED) as u64)
                ),
            );
        }
    }
    for conflict in &s.home.sessions_conflict {
        out.text(
            "conflict",
            ui.warn(&crate::audit::report::visible(&format!(
                "{} from {} neither extends nor is extended by the version placed (from {}): left as it is, pending (--force writes it, keeping a copy)",
                conflict.path, conflict.source, conflict.other
            ))),
        );
    }
    for busy in &s.home.sessions_busy {
        out.text(
            "busy",
            ui.warn(&crate::audit::report::visible(&format!(
                "{} not replaced: {}; the next run tries again",
                busy.path, busy.reason
            ))),
        );
    }
    if !s.home.sessions_older.is_empty() {
        out.text(
            "older",
            format!(
                "{} older than the version placed: skipped (listed in the report)",
                plural(s.home.sessions_older.len() as u64, "snapshot", "snapshots")
            ),
        );
    }
    if !s.home.sessions_split.is_empty() {
        out.text(
            "split",
            format!(
                "{} under the source id of another in the same input: each kept, under a session of its own",
                plural(s.home.sessions_split.len() as u64, "conversation", "conversations")
            ),
        );
    }
    let carried = &s.carried;
    if carried.carried_quarantined + carried.carried_damaged > 0 {
        out.text(
            "carried",
            ui.warn(&format!(
                "{} quarantined and {} damaged in files not read again (found by earlier runs; listed in the report)",
                plural(carried.carried_quarantined, "record", "records"),
                plural(carried.carried_damaged, "place", "places")
            )),
        );
    }
    if let Some(refused) = &s.home.prune_refused {
        out.text("prune", ui.warn(refused));
    }
    if !s.home.sessions_withheld.is_empty() {
        out.text(
            "withheld",
            format!(
                "{} archived or deleted since written: not written again (--force writes them)",
                plural(s.home.sessions_withheld.len() as u64, "session", "sessions")
            ),
        );
    }
    if !s.home.sessions_replaced.is_empty() {
        out.text(
            "replaced",
            format!(
                "{} (copies in {})",
                plural(
                    s.home.sessions_replaced.len() as u64,
                    "changed session",
                    "changed sessions"
                ),
                state.join("replaced").display()
            ),
        );
    }
    if let Some(signal) = &s.interrupted {
        out.text(
            "interrupted",
            ui.warn(&format!(
                "by {signal}: finished files are recorded; run again to resume"
            )),
        );
    }
    let run = state.join("runs").join(format!("{:04}", s.run));
    out.text("output", args.out.display().to_string());
    out.text("summary", run.join("summary.json").display().to_string());
    if s.totals.quarantined > 0 {
        out.text(
            "quarantine",
            run.join("quarantine.jsonl").display().to_string(),
        );
    }
    // Last, so it is what a person sees at the prompt: the page to open.
    out.text("report", run.join("report.html").display().to_string());
}
