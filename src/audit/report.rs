//! The audit report a reviewer signs before cutover: `report.md` (the story, largest numbers
//! first) and `report.html` (one self-contained page: charts as inline SVG, a sortable table of
//! files, no network, no external script or font). Both come from templates fed by the same
//! [`ReportData`], built from the run's summary and per-file counts only: no transcript text
//! unless the run opted in (`--report-text`), and then only short excerpts, said at the top.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::chart::{charts, Chart};
use super::decision::is_repair;
use super::sample::SampleEstimate;
use super::Summary;
use crate::model::location::Place;
use crate::model::not_read::{NotRead, NotReadPath, NotReadReason};

const MARKDOWN: &str = include_str!("templates/report.md.j2");
/// Files report.html lists (the most quarantined first, then the most repaired); every file
/// is in `files.csv` beside it: a page listing a million files would weigh 165 MB.
pub const FILES_SHOWN: usize = 50;
/// The file that lists every input file's counts, beside the reports.
pub const FILES_CSV: &str = "files.csv";
const HTML: &str = include_str!("templates/report.html.j2");

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("the report template failed: {0}")]
    Template(#[from] minijinja::Error),
    #[error("a report chart failed: {0}")]
    Chart(String),
}

/// One input file's counts, for the table and the worst-files chart.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FileStats {
    pub file: String,
    pub records: u64,
    pub converted: u64,
    pub quarantined: u64,
    /// Decisions that changed something (every action but `classified`).
    pub repairs: u64,
    pub output_bytes: u64,
}

/// What the reviewer is told about the run, beyond its summary.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// The largest quarantined share still "ready" (`--max-quarantine-rate`, default 0).
    pub max_quarantine_rate: f64,
    /// Short excerpts of quarantined records (`--report-text`); empty otherwise.
    pub excerpts: Vec<Excerpt>,
    pub report_text: bool,
    /// Review pages are written beside the report (`--review`): report.html links them.
    pub review: bool,
    /// The run's seconds, for the estimate of a sampled run.
    pub seconds: f64,
    /// Seconds spent converting the sampled records (not reading them).
    pub convert_seconds: f64,
    /// The output is Responses body files (`--format responses`): the home's counts are of
    /// them, each holding an input file's conversations, not of sessions.
    pub body_files: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Excerpt {
    pub source: String,
    pub line: u64,
    pub class: String,
    pub text: String,
}

#[derive(Debug, Serialize)]
struct Row {
    label: String,
    count: u64,
}

#[derive(Debug, Serialize)]
struct Change {
    action: String,
    rule: String,
    count: u64,
}

#[derive(Debug, Serialize)]
struct Estimate {
    #[serde(flatten)]
    sample: SampleEstimate,
    output_bytes: u64,
    seconds: f64,
}

/// Everything both templates show.
#[derive(Debug, Serialize)]
struct ReportData<'a> {
    summary: &'a Summary,
    /// What the home's counts count: `sessions`, or `body files`.
    home_unit: &'static str,
    verdict: &'static str,
    verdict_reasons: Vec<String>,
    max_quarantine_rate: f64,
    quarantine_rate: f64,
    changes: Vec<Change>,
    quarantine: Vec<Row>,
    rule_files: Vec<Row2>,
    /// report.html's table of files: at most [`FILES_SHOWN`], the worst first.
    files_shown: Vec<&'a FileStats>,
    files_total: usize,
    worst_files: Vec<&'a FileStats>,
    charts: Vec<Chart>,
    report_text: bool,
    review: bool,
    excerpts: &'a [Excerpt],
    estimate: Option<Estimate>,
    /// What the run did to the home's sessions (a dry run: would do), counts of zero left out.
    home: Vec<Row>,
    /// Sessions to name, by what happened to them: at most [`LISTED`] each.
    listed: Vec<Listed>,
    /// What the run did not read, by reason: at most [`LISTED`] paths each.
    not_read: Vec<NotReadRow>,
    /// Each damaged file: where it broke, as stderr wrote it, and why.
    damaged: Vec<Damaged>,
    /// The paths `summary.json` keeps per reason.
    listed_max: usize,
}

#[derive(Debug, Serialize)]
struct Damaged {
    at: String,
    message: String,
}

/// The paths of one reason the run did not read them for.
#[derive(Debug, Serialize)]
struct NotReadRow {
    label: &'static str,
    count: u64,
    /// `.txt 8, .csv 4` for files of other extensions.
    detail: String,
    paths: Vec<NotReadPath>,
    /// How many more there are than listed here (`summary.json` lists up to
    /// [`NotRead::LISTED`]).
    more: u64,
}

/// The Not read section, in the order of the reasons (what needs a person first).
fn not_read_rows(summary: &Summary) -> Vec<NotReadRow> {
    summary
        .walk
        .not_read
        .0
        .iter()
        .map(|(why, list)| {
            // Files of other extensions are counted by extension too.
            let detail = if *why == NotReadReason::OtherExtension {
                let mut by_count: Vec<(&String, &u64)> =
                    summary.walk.skipped_other_extensions.iter().collect();
                by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                by_count
                    .iter()
                    .map(|(e, n)| format!("{} {}", visible(e), group(**n)))
                    .collect::<Vec<_>>()
                    .join(", ")
            } else {
                String::new()
            };
            let paths: Vec<NotReadPath> = list.paths.iter().take(LISTED).cloned().collect();
            NotReadRow {
                label: why.label(),
                count: list.count,
                detail,
                more: list.count.saturating_sub(paths.len() as u64),
                paths,
            }
        })
        .collect()
}

/// Sessions a report names one by one, beyond its counts.
const LISTED: usize = 50;

#[derive(Debug, Serialize)]
struct Listed {
    what: &'static str,
    /// What to know of them, said once under the heading.
    note: &'static str,
    paths: Vec<String>,
    /// How many more `summary.json` lists.
    more: usize,
}

/// `rules default (a1b2c3d4): 3 sessions`, for each rule set that wrote a session left.
fn left_by_rules(summary: &Summary) -> Vec<String> {
    summary
        .home
        .sessions_left_rules
        .iter()
        .map(|(rules, n)| format!("{rules}: {}", plural(*n, "session", "sessions")))
        .collect()
}

fn listed(what: &'static str, paths: Vec<String>) -> Listed {
    let more = paths.len().saturating_sub(LISTED);
    Listed {
        what,
        note: "",
        paths: paths.into_iter().take(LISTED).collect(),
        more,
    }
}

/// The sessions' counts, in the order a reader asks about them.
fn home_rows(summary: &Summary) -> Vec<Row> {
    let rows = [
        ("new", summary.home.sessions_new),
        (
            "updated (new content for a session written before)",
            summary.home.sessions_updated,
        ),
        ("unchanged", summary.home.rollouts_unchanged),
        (
            "kept pending (changed in Codex; the source has newer data)",
            summary.home.sessions_kept.len() as u64,
        ),
        (
            "replaced (--force; a copy kept)",
            summary.home.sessions_replaced.len() as u64,
        ),
        (
            "withheld (archived or deleted by the user)",
            summary.home.sessions_withheld.len() as u64,
        ),
        (
            "duplicate (the same conversation read twice)",
            summary.home.sessions_duplicate,
        ),
        (
            "left (their record is gone; --prune removes them)",
            summary.home.sessions_left,
        ),
        ("pruned", summary.home.sessions_pruned.len() as u64),
        (
            "not pruned (changed in Codex, or open in another process)",
            summary.home.sessions_not_pruned.len() as u64,
        ),
        (
            "older snapshot, skipped (a newer version is placed)",
            summary.home.sessions_older.len() as u64,
        ),
        (
            "conflict (another file's version under the same id; left as it is, pending)",
            summary.home.sessions_conflict.len() as u64,
        ),
        (
            "split (another conversation under one source id; a session of its own)",
            summary.home.sessions_split.len() as u64,
        ),
        (
            "busy (open in another process, or changed while read; pending)",
            summary.home.sessions_busy.len() as u64,
        ),
    ];
    rows.into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(label, count)| Row {
            label: label.to_string(),
            count,
        })
        .collect()
}

#[derive(Debug, Serialize)]
struct Row2 {
    name: String,
    digest: String,
}

/// Text from the input (a file name, a reason, an excerpt) with its control characters made
/// visible (`\n`, `\u{1b}`), so it stays on its line and sends nothing to a terminal; so are
/// the characters that reorder or break a line as shown (bidirectional overrides and
/// isolates such as U+202E, the line and paragraph separators), which would make a line
/// read as something it does not say.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || reorders(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Bidirectional formatting characters (marks, embeddings, overrides, isolates) and the
/// Unicode line and paragraph separators.
fn reorders(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
            | '\u{2028}' | '\u{2029}'
    )
}

/// `value` as JSON to embed in an HTML page (a `<script type="application/json">` element):
/// every `<` written `\u003c`, so that nothing in it (`</script>`, `<!--<script>`) can end the
/// element or change how the page parses it. `<` only occurs inside JSON strings, where the
/// escape reads back as the same character.
pub fn json_in_html(value: &serde_json::Value) -> String {
    value.to_string().replace('<', "\\u003c")
}

/// [`visible`] line by line: text a command prints for a terminal, its own line breaks kept.
pub fn visible_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&visible(line));
    }
    out
}

/// Input text as a Markdown code span that nothing in it can end: a fence one backtick longer
/// than its longest run of backticks, padded when it starts or ends with one. Outside a table
/// (a cell also needs its `|` escaped: the `cell_code` filter).
pub fn md_code(text: &str) -> String {
    let text = visible(text);
    if text.is_empty() {
        return "(empty)".to_string();
    }
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

/// Input text as plain Markdown text: every character Markdown or HTML gives a meaning
/// escaped, control characters made visible.
pub fn md_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in visible(text).chars() {
        if "\\`*_{}[]<>()#+-.!|~&".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The verdict both reports open with (`ready`, `ready with repairs`, `blocked`,
/// `incomplete`, `interrupted`): ready exactly when the run exits 0.
pub fn verdict(summary: &Summary, options: &ReportOptions) -> &'static str {
    data(summary, &[], options).verdict
}

/// The files of a run's report: `report.md`, `report.html` and `files.csv`.
#[derive(Debug)]
pub struct Reports {
    pub markdown: String,
    pub html: String,
    /// Every input file's counts (report.html shows the [`FILES_SHOWN`] worst).
    pub files_csv: String,
}

/// The reports of a run.
pub fn render(
    summary: &Summary,
    files: &[FileStats],
    options: &ReportOptions,
) -> Result<Reports, ReportError> {
    let mut data = data(summary, files, options);
    let mut env = minijinja::Environment::new();
    env.add_filter("code", |text: String| md_code(&text));
    env.add_filter("cell_code", |text: String| {
        md_code(&text).replace('|', "\\|")
    });
    env.add_filter("text", |text: String| md_text(&text));
    // Counts as people read them: `1,234,567`, and `1 file` / `2 files`.
    env.add_filter("group", |n: u64| group(n));
    env.add_filter("plural", |n: u64, one: String, many: String| {
        plural(n, &one, &many)
    });
    env.add_template("report.md", MARKDOWN)?;
    let markdown = env.get_template("report.md")?.render(&data)?;
    data.charts = charts(summary, files)?;
    env.add_template("report.html", HTML)?;
    let html = env.get_template("report.html")?.render(&data)?;
    Ok(Reports {
        markdown,
        html,
        files_csv: files_csv(files),
    })
}

/// `1234567` → `1,234,567`, as the terminal writes counts.
pub fn group(n: u64) -> String {
    indicatif::HumanCount(n).to_string()
}

/// `1 file`, `2 files`, `1,234 files`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", group(n), if n == 1 { one } else { many })
}

/// Every file's counts as CSV (RFC 4180: a field with a comma, quote or line break quoted,
/// quotes doubled). The file names come from the input: control and bidi characters are
/// escaped as the terminal shows them ([`visible`]: `\n`, `\u{1b}`), so that a planted name
/// can neither break a row nor colour a terminal that prints the file; and a name that a
/// spreadsheet would run as a formula (starting with `=`, `+`, `-`, `@`) is prefixed with
/// `'`, as OWASP advises.
fn files_csv(files: &[FileStats]) -> String {
    let field = |text: &str| {
        let text = visible(text);
        let text = if text.starts_with(['=', '+', '-', '@']) {
            format!("'{text}")
        } else {
            text
        };
        if text.contains([',', '"']) {
            format!("\"{}\"", text.replace('"', "\"\""))
        } else {
            text
        }
    };
    let mut csv = String::from("file,records,converted,quarantined,repairs,output_bytes\r\n");
    for f in files {
        csv.push_str(&format!(
            "{},{},{},{},{},{}\r\n",
            field(&f.file),
            f.records,
            f.converted,
            f.quarantined,
            f.repairs,
            f.output_bytes
        ));
    }
    csv
}

fn data<'a>(
    summary: &'a Summary,
    files: &'a [FileStats],
    options: &'a ReportOptions,
) -> ReportData<'a> {
    let quarantine_rate = summary.totals.quarantined as f64 / summary.totals.records.max(1) as f64;
    let reasons = super::findings::of(summary, Some(options.max_quarantine_rate));
    let carried = &summary.carried;
    // Every decision but a message's slot, the session defaults with the repairs.
    let mut changes: Vec<Change> = summary
        .decisions
        .iter()
        .filter(|(action, _)| action.as_str() != "classified")
        .flat_map(|(action, rules)| {
            rules.iter().map(move |(rule, count)| Change {
                action: action.clone(),
                rule: rule.clone(),
                count: *count,
            })
        })
        .collect();
    changes.sort_by(|a, b| b.count.cmp(&a.count).then(a.action.cmp(&b.action)));
    // A stopped run read only part of its input: nothing in it can be called ready, and the
    // reasons it found so far are still listed.
    // A path that could not be read leaves the run incomplete, whatever else it found.
    let verdict = if summary.interrupted.is_some() {
        "interrupted"
    } else if !summary.walk.unreadable.is_empty() {
        "incomplete"
    } else if !reasons.is_empty() {
        "blocked"
    } else if !changes.iter().any(|c| is_repair(&c.action)) {
        "ready"
    } else {
        "ready with repairs"
    };
    let mut worst: Vec<&FileStats> = files.iter().filter(|f| f.quarantined > 0).collect();
    worst.sort_by(|a, b| b.quarantined.cmp(&a.quarantined).then(a.file.cmp(&b.file)));
    worst.truncate(10);
    // report.html's table: the worst files, the most quarantined, then the most repaired
    // (ties in input order); all of them are in files.csv.
    let mut shown: Vec<&FileStats> = files.iter().collect();
    shown.sort_by(|a, b| {
        b.quarantined
            .cmp(&a.quarantined)
            .then(b.repairs.cmp(&a.repairs))
    });
    shown.truncate(FILES_SHOWN);
    let estimate = SampleEstimate::of(summary).map(|sample| {
        let rate = sample.rate;
        let reading = (options.seconds - options.convert_seconds).max(0.0);
        Estimate {
            output_bytes: (summary.output_bytes as f64 / rate).round() as u64,
            seconds: reading + options.convert_seconds / rate,
            sample,
        }
    });
    let withheld = summary
        .home
        .sessions_withheld
        .iter()
        .map(|w| format!("{} ({})", w.path, w.reason))
        .collect();
    let versions = |list: &[crate::audit::summary::VersionReport]| -> Vec<String> {
        list.iter()
            .map(|v| format!("{} (from {}; placed: {})", v.path, v.source, v.other))
            .collect()
    };
    let busy = summary
        .home
        .sessions_busy
        .iter()
        .map(|b| format!("{} ({})", b.path, b.reason))
        .collect();
    let copies = summary
        .home
        .copies_kept
        .iter()
        .map(|c| format!("{} (copy: {})", c.path, c.copy))
        .collect();
    let carried_files = carried
        .carried_files
        .iter()
        .flat_map(|f| {
            let head = format!(
                "{} (run {}): {} quarantined, {} damaged",
                f.file, f.run, f.quarantined, f.damaged
            );
            let lines = f.listed.iter().map(|l| {
                let place = Place {
                    path: &f.file,
                    line: l.line,
                    byte: l.byte_offset,
                    element: None,
                };
                format!("{place}: {}: {}", l.class, l.reason)
            });
            std::iter::once(head).chain(lines)
        })
        .collect();
    let listed = [
        listed("kept pending", summary.home.sessions_kept.clone()),
        listed("in conflict", versions(&summary.home.sessions_conflict)),
        listed("busy", busy),
        listed("older snapshots", versions(&summary.home.sessions_older)),
        listed("split", versions(&summary.home.sessions_split)),
        listed("copies kept", copies),
        listed("carried from earlier runs", carried_files),
        listed("replaced", summary.home.sessions_replaced.clone()),
        listed("withheld", withheld),
        Listed {
            note: "Each holds what the rules that wrote it made. --prune removes them; a record that comes back is converted again with this run's rules.",
            ..listed("left, by the rule set that wrote them", left_by_rules(summary))
        },
        Listed {
            more: (summary.home.sessions_left as usize)
                .saturating_sub(summary.home.sessions_left_listed.len().min(LISTED)),
            ..listed("left", summary.home.sessions_left_listed.clone())
        },
        listed("pruned", summary.home.sessions_pruned.clone()),
        listed("not pruned", summary.home.sessions_not_pruned.clone()),
    ]
    .into_iter()
    .filter(|l| !l.paths.is_empty())
    .collect();
    ReportData {
        home_unit: if options.body_files {
            "body files"
        } else {
            "sessions"
        },
        not_read: not_read_rows(summary),
        damaged: summary
            .breakdown
            .damaged_files
            .iter()
            .map(|d| Damaged {
                at: d.broke_at(),
                message: d.message.clone(),
            })
            .collect(),
        listed_max: NotRead::LISTED,
        home: home_rows(summary),
        listed,
        summary,
        verdict,
        verdict_reasons: reasons,
        max_quarantine_rate: options.max_quarantine_rate,
        quarantine_rate,
        changes,
        quarantine: rows(&summary.breakdown.quarantine_reasons),
        rule_files: summary
            .setup
            .rules
            .iter()
            .zip(&summary.setup.rule_digests)
            .map(|(name, digest)| Row2 {
                name: name.clone(),
                digest: digest.clone(),
            })
            .collect(),
        files_shown: shown,
        files_total: files.len(),
        worst_files: worst,
        charts: Vec::new(),
        report_text: options.report_text,
        review: options.review,
        excerpts: &options.excerpts,
        estimate,
    }
}

/// A count map as rows, largest first.
fn rows(map: &BTreeMap<String, u64>) -> Vec<Row> {
    let mut rows: Vec<Row> = map
        .iter()
        .map(|(label, count)| Row {
            label: label.clone(),
            count: *count,
        })
        .collect();
    rows.sort_by(|a, b| b.count.cmp(&a.count).then(a.label.cmp(&b.label)));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::summary::Totals;

    #[test]
    fn verdicts_follow_the_thresholds() {
        let mut summary = Summary {
            totals: Totals {
                records: 100,
                converted: 100,
                ..Totals::default()
            },
            ..Summary::default()
        };
        let options = ReportOptions::default();
        assert_eq!(data(&summary, &[], &options).verdict, "ready");
        summary
            .decisions
            .entry("output_synthesized".into())
            .or_default()
            .insert("policy.missing_output".into(), 3);
        assert_eq!(data(&summary, &[], &options).verdict, "ready with repairs");
        summary.totals.converted = 99;
        summary.totals.quarantined = 1;
        assert_eq!(data(&summary, &[], &options).verdict, "blocked");
        let lenient = ReportOptions {
            max_quarantine_rate: 0.05,
            ..ReportOptions::default()
        };
        assert_eq!(data(&summary, &[], &lenient).verdict, "ready with repairs");
        summary.interrupted = Some("SIGINT".into());
        assert_eq!(data(&summary, &[], &lenient).verdict, "interrupted");
        assert_eq!(data(&summary, &[], &options).verdict, "interrupted");
    }

    #[test]
    fn an_interrupted_run_says_so_at_the_top_of_both_reports() {
        let summary = Summary {
            totals: Totals {
                records: 10,
                converted: 10,
                ..Totals::default()
            },
            interrupted: Some("SIGTERM".into()),
            ..Summary::default()
        };
        let reports = render(&summary, &[], &ReportOptions::default()).unwrap();
        let (md, html) = (reports.markdown, reports.html);
        let top = md.lines().find(|l| l.starts_with("**")).unwrap_or_default();
        assert!(
            top.starts_with("**Interrupted: incomplete.** Stopped by SIGTERM"),
            "{md}"
        );
        assert!(!md.contains("Verdict: ready"), "{md}");
        assert!(
            html.contains(r#"<span class="verdict interrupted">Interrupted: incomplete</span>"#),
            "{html}"
        );
        assert!(html.contains("Stopped by SIGTERM"), "{html}");
    }
}
