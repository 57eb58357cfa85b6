//! Audit reports a reviewer signs before cutover (issue 11): report.md and report.html, no
//! transcript text by default, numbers that add up against the written rollouts, a real browser
//! rendering the page, `explain`, `report diff`, and sampled dry runs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::Workdir;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rollover");

fn corpora() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpora"))
}

fn samples() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/samples"))
}

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run rollover")
}

fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let kind = e.file_type().expect("type");
            if kind.is_dir() {
                stack.push(e.path());
            } else if kind.is_file() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Every JSON string of at least 40 characters with a space in it, from every record file of
/// the corpora and samples: the sentences a report must not leak.
fn sentences() -> BTreeSet<String> {
    fn collect(v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::String(s) if s.chars().count() >= 40 && s.contains(' ') => {
                out.insert(s.clone());
            }
            Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
            Value::Object(o) => o.values().for_each(|x| collect(x, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    for root in [corpora(), samples()] {
        for file in files_below(&root) {
            let name = file.to_string_lossy();
            if !(name.ends_with(".jsonl") || name.ends_with(".json") || name.ends_with(".traj")) {
                continue;
            }
            let text = fs::read_to_string(&file).unwrap_or_default();
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                collect(&v, &mut out);
            }
            for line in text.lines() {
                if let Ok(v) = serde_json::from_str::<Value>(line) {
                    collect(&v, &mut out);
                }
            }
        }
    }
    out
}

const REPORTS: [&str; 4] = [
    "summary.json",
    "conversations.jsonl",
    "report.md",
    "report.html",
];

#[test]
fn a_dry_run_over_the_corpora_writes_the_reports_no_session_and_no_transcript_text() {
    let wd = Workdir::new("report_corpora");
    let corpora = corpora();
    let out = run(
        wd.root(),
        &[
            "audit",
            corpora.to_str().expect("utf-8 path"),
            "--out",
            "home",
        ],
    );
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let home = wd.path("home");
    assert!(!home.join("sessions").exists(), "a dry run wrote sessions/");
    let run_dir = home.join("rollover/latest");
    for name in REPORTS {
        assert!(run_dir.join(name).is_file(), "{name} missing");
    }
    let sentences = sentences();
    assert!(
        sentences.len() > 1000,
        "only {} sentences collected",
        sentences.len()
    );
    for name in REPORTS {
        let text = fs::read_to_string(run_dir.join(name)).expect("read report");
        let leaked: Vec<&String> = sentences
            .iter()
            .filter(|s| text.contains(s.as_str()))
            .take(3)
            .collect();
        assert!(
            leaked.is_empty(),
            "{name} holds transcript text: {leaked:?}"
        );
    }
    let md = fs::read_to_string(run_dir.join("report.md")).expect("report.md");
    assert!(md.contains("**Verdict: blocked.**"), "{md}");
    assert!(
        md.contains("[quarantine.jsonl](quarantine.jsonl) (it holds transcript text by design)")
    );
    assert!(!md.contains("excerpts of transcript text"));
}

#[test]
fn report_text_opts_in_to_excerpts_and_says_so_at_the_top() {
    let wd = Workdir::new("report_text");
    wd.create(
        "in.jsonl",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n{\"not messages\": \"a quarantined record with a sentence in it\"}\n",
    );
    let out = run(
        wd.root(),
        &["audit", "in.jsonl", "--out", "home", "--report-text"],
    );
    assert_eq!(out.status.code(), Some(1));
    let md = fs::read_to_string(wd.path("home/rollover/latest/report.md")).expect("report.md");
    let top: String = md.lines().take(4).collect::<Vec<_>>().join("\n");
    assert!(
        top.contains("**This report holds short excerpts of transcript text**"),
        "{md}"
    );
    assert!(
        md.contains("a quarantined record with a sentence in it"),
        "{md}"
    );
}

/// Items of every rollout in a home, counted the way the summary counts them.
fn items_in_rollouts(home: &Path) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for file in files_below(&home.join("sessions")) {
        let text = fs::read_to_string(&file).expect("rollout");
        let mut user_events = 0;
        let mut user_messages = 0;
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).expect("rollout line");
            let payload = &v["payload"];
            let key = match (v["type"].as_str(), payload["type"].as_str()) {
                (Some("response_item"), Some("message")) => {
                    let role = payload["role"].as_str().unwrap_or_default();
                    if role == "user" {
                        user_messages += 1;
                        continue;
                    }
                    format!("message:{role}")
                }
                (Some("response_item"), Some(kind)) => kind.to_string(),
                (Some("compacted"), _) => "compacted".to_string(),
                (Some("event_msg"), Some("user_message")) => {
                    user_events += 1;
                    continue;
                }
                _ => continue,
            };
            *counts.entry(key).or_insert(0) += 1;
        }
        // A real user message has its user_message event; a contextual one has none.
        *counts.entry("message:user".to_string()).or_insert(0) += user_events;
        *counts
            .entry("message:contextual_user".to_string())
            .or_insert(0) += user_messages - user_events;
    }
    counts.retain(|_, n| *n > 0);
    counts
}

#[test]
fn the_numbers_add_up_against_a_real_run() {
    let wd = Workdir::new("report_numbers");
    let out = run(
        &samples().join(".."),
        &[
            "convert",
            "samples",
            "--out",
            wd.path("home").to_str().expect("path"),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let home = wd.path("home");
    let summary: Value = serde_json::from_slice(
        &fs::read(home.join("rollover/latest/summary.json")).expect("summary"),
    )
    .expect("json");
    let n = |k: &str| summary[k].as_u64().expect(k);
    // samples/codex holds a Codex rollout: one conversation whose other lines are merged into
    // it or dropped by rule.
    let dropped: u64 = summary["records_dropped"]
        .as_object()
        .map_or(0, |d| d.values().filter_map(Value::as_u64).sum());
    assert_eq!(
        n("records"),
        n("converted")
            + n("quarantined")
            + n("joined")
            + summary["records_merged"].as_u64().unwrap_or(0)
            + dropped
    );
    let reported: BTreeMap<String, u64> = summary["items"]
        .as_object()
        .expect("items")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().expect("count")))
        .collect();
    assert_eq!(reported, items_in_rollouts(&home));
    assert_eq!(summary["schema_version"], 1);
    let lines =
        fs::read_to_string(home.join("rollover/latest/conversations.jsonl")).expect("lines");
    assert_eq!(lines.lines().count() as u64, n("converted"));
    let md = fs::read_to_string(home.join("rollover/latest/report.md")).expect("report.md");
    assert!(
        md.contains(&format!("| conversations converted | {} |", n("converted"))),
        "{md}"
    );
}

/// Debian's Chromium, which `.ci/run` installs; missing, the test fails saying so (it never
/// skips, and installs nothing itself).
pub(crate) fn chromium() -> PathBuf {
    for name in ["chromium", "chromium-browser"] {
        if let Ok(out) = Command::new("which").arg(name).output() {
            if out.status.success() {
                return PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            }
        }
    }
    panic!(
        "chromium is missing: the HTML report and review tests render their pages in a real \
         browser; `bash .ci/run` installs it (Debian's chromium package)"
    );
}

#[test]
fn the_html_report_renders_in_headless_chromium_with_charts_and_no_console_error() {
    let wd = Workdir::new("report_html");
    let out = run(
        &samples().join(".."),
        &[
            "audit",
            "samples",
            "--out",
            wd.path("home").to_str().expect("path"),
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let page = wd.path("home/rollover/latest/report.html");
    let html = fs::read_to_string(&page).expect("report.html");
    // (An SVG's xmlns names a namespace; it is not fetched.)
    for external in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "<link",
        "<script src",
        "@import",
    ] {
        assert!(
            !html.contains(external),
            "the page is not self-contained: {external}"
        );
    }
    let browser = chromium();
    let screenshot = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/report-screenshot.png"
    ));
    let url = format!("file://{}", page.display());
    let base_args = |profile: &str| {
        vec![
            "--headless".to_string(),
            "--no-sandbox".to_string(),
            "--disable-gpu".to_string(),
            "--disable-background-networking".to_string(),
            "--disable-component-update".to_string(),
            "--disable-sync".to_string(),
            "--no-first-run".to_string(),
            format!("--user-data-dir={}", wd.path(profile).display()),
            "--enable-logging=stderr".to_string(),
            "--v=0".to_string(),
        ]
    };
    let mut shot = base_args("profile-shot");
    shot.extend([
        "--window-size=1280,2400".to_string(),
        format!("--screenshot={}", screenshot.display()),
        url.clone(),
    ]);
    let out = Command::new(&browser)
        .args(&shot)
        .output()
        .expect("run chromium");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {log}");
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    assert!(
        fs::metadata(&screenshot)
            .map(|m| m.len() > 10_000)
            .unwrap_or(false),
        "no screenshot"
    );

    let mut dump = base_args("profile-dom");
    dump.extend(["--dump-dom".to_string(), url]);
    let out = Command::new(&browser)
        .args(&dump)
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    // The page's script ran to its end (it sets data-ready after wiring the table's sorting).
    assert!(
        dom.contains("data-ready=\"1\""),
        "the page script did not finish"
    );
    let charts = dom.matches("<figure>").count();
    assert_eq!(charts, 6, "charts: {charts}");
    for figure in dom.split("<figure>").skip(1) {
        let svg = figure.split("</figure>").next().unwrap_or_default();
        // A chart with nothing to draw says so in a sentence instead of an empty axis.
        assert!(
            (svg.contains("<svg") && svg.matches("<rect").count() >= 2)
                || svg.contains("<p class=\"empty\">"),
            "an empty chart: {svg}"
        );
    }
}

#[test]
fn explain_shows_the_rule_ids_for_the_legacy_function_call_sample() {
    let out = run(
        &samples().join(".."),
        &["explain", "samples/toolbench-answer.json"],
    );
    assert_eq!(out.status.code(), Some(0));
    let expected = include_str!("expected/explain-toolbench-answer.txt");
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

#[test]
fn explain_shows_the_rule_ids_for_the_lookalike_fragment_sample() {
    let out = run(
        &samples().join(".."),
        &["explain", "samples/chat-completions.jsonl.zst:3"],
    );
    assert_eq!(out.status.code(), Some(0));
    let expected = include_str!("expected/explain-chat-completions-3.txt");
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
    let json = run(
        &samples().join(".."),
        &["explain", "samples/chat-completions.jsonl.zst:3", "--json"],
    );
    let v: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(
        v["messages"][1]["decisions"][0]["rule"],
        "policy.lookalike_user_text"
    );
    assert_eq!(
        v["messages"][1]["decisions"][0]["action"]["action"],
        "lookalike_escaped"
    );
}

#[test]
fn report_diff_shows_exactly_the_conversations_of_the_changed_policy() {
    let wd = Workdir::new("report_diff");
    wd.create(
        "mine.toml",
        "[policy]\nmissing_output_text = \"no output was recorded\"\n",
    );
    let samples = samples();
    let input = samples.to_str().expect("path");
    let a = run(wd.root(), &["audit", input, "--out", "a"]);
    let b = run(
        wd.root(),
        &[
            "audit",
            input,
            "--out",
            "b",
            "--rules",
            "default",
            "--rules",
            "mine.toml",
        ],
    );
    assert_eq!((a.status.code(), b.status.code()), (Some(0), Some(0)));
    // The conversations whose decisions cite the changed policy.
    let lines =
        fs::read_to_string(wd.path("a/rollover/latest/conversations.jsonl")).expect("lines");
    let mut expected: Vec<String> = lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("line"))
        .filter(|c| {
            c["decisions"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["rule"] == "policy.missing_output"))
        })
        .map(|c| {
            format!(
                "  {}:{}",
                c["source"].as_str().unwrap_or_default(),
                c["line"]
            )
        })
        .collect();
    expected.sort();
    assert!(!expected.is_empty());
    let diff = run(wd.root(), &["report", "diff", "a", "b"]);
    assert_eq!(diff.status.code(), Some(1));
    let text = String::from_utf8_lossy(&diff.stdout);
    let listed: Vec<String> = text
        .split("conversations whose items changed:")
        .nth(1)
        .expect("a changed section")
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(str::to_string)
        .collect();
    assert_eq!(listed, expected, "{text}");
    assert!(!text.contains("decisions by rule"), "{text}");
    let same = run(wd.root(), &["report", "diff", "a", "a"]);
    assert_eq!(same.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&same.stdout).contains("nothing moved"));
}

#[test]
fn a_ten_percent_sample_estimates_the_conversation_count_within_five_percent() {
    let wd = Workdir::new("report_sample");
    let mut text = String::new();
    for i in 0..5_000 {
        let record = json!({"id": format!("s{i}"), "messages": [
            {"role": "user", "content": format!("question {i}")},
            {"role": "assistant", "content": format!("answer {i}")}]});
        text.push_str(&record.to_string());
        text.push('\n');
    }
    wd.create("archive/big.jsonl", text);
    let out = run(
        wd.root(),
        &["audit", "archive", "--out", "home", "--sample", "0.1"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(
        &fs::read(wd.path("home/rollover/latest/summary.json")).expect("summary"),
    )
    .expect("json");
    let converted = summary["converted"].as_u64().expect("converted") as f64;
    let estimate = converted / 0.1;
    assert!(
        (estimate - 5_000.0).abs() <= 250.0,
        "estimated {estimate} of 5000"
    );
    assert_eq!(
        summary["records_not_sampled"].as_u64().expect("n") as f64 + converted,
        5_000.0
    );
    let md = fs::read_to_string(wd.path("home/rollover/latest/report.md")).expect("report.md");
    let grouped = {
        let n = estimate.round() as u64;
        if n >= 1000 {
            format!("{},{:03}", n / 1000, n % 1000)
        } else {
            n.to_string()
        }
    };
    assert!(
        md.contains(&format!(
            "Estimated full run, with 95 % margins: {grouped} ± "
        )),
        "{md}"
    );
    // The same records every time.
    let again = run(
        wd.root(),
        &["audit", "archive", "--out", "home2", "--sample", "0.1"],
    );
    assert_eq!(again.status.code(), Some(0));
    let a = fs::read(wd.path("home/rollover/latest/conversations.jsonl")).expect("a");
    let b = fs::read(wd.path("home2/rollover/latest/conversations.jsonl")).expect("b");
    assert_eq!(a, b);
    let refused = run(
        wd.root(),
        &["convert", "archive", "--out", "home3", "--sample", "0.1"],
    );
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn explain_names_the_session_that_convert_writes() {
    let root = samples().join("..");
    let home = Workdir::new("report");
    let out = run(
        &root,
        &[
            "convert",
            "samples",
            "--out",
            home.root().to_str().expect("utf-8"),
            "-q",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let lines = std::fs::read_to_string(home.root().join("rollover/latest/conversations.jsonl"))
        .expect("conversations");
    let written: Value = lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("line"))
        .find(|c| c["source"] == "samples/chat-completions.jsonl.zst" && c["line"] == 3)
        .expect("the record's line");
    let explained = run(
        &root,
        &["explain", "samples/chat-completions.jsonl.zst:3", "--json"],
    );
    let v: Value = serde_json::from_slice(&explained.stdout).expect("JSON");
    assert_eq!(v["session_id"], written["id"]);
}

/// Issue 26, item 6: a file name or an excerpt cannot forge a line of report.md, raw HTML or a
/// link: every value from the input is a code span its backticks cannot end, `|` escaped in
/// table cells, control characters made visible.
#[test]
fn file_names_and_excerpts_cannot_inject_markdown_into_the_report() {
    let wd = Workdir::new("md_injection");
    let name = "x`y|z\n**Verdict: ready.**<b>raw</b>[go](javascript:alert(1))\u{1b}[2J.jsonl";
    wd.create(
        name,
        "{\"not messages\": \"``` fenced ` ``` and <script>alert(1)</script>\"}\n",
    );
    let out = run(wd.root(), &["audit", ".", "--out", "home", "--report-text"]);
    assert_eq!(out.status.code(), Some(1));
    for stream in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(stream);
        assert!(
            !text.contains('\u{1b}'),
            "a raw escape sequence on the terminal: {text}"
        );
    }
    let md = fs::read_to_string(wd.path("home/rollover/latest/report.md")).expect("report.md");
    let verdicts = md
        .lines()
        .filter(|l| l.contains("Verdict: ready.") && !l.contains('`'))
        .count();
    assert_eq!(verdicts, 0, "a forged verdict line: {md}");
    assert!(md.contains("**Verdict: blocked.**"), "{md}");
    assert!(!md.contains('\u{1b}'), "a raw escape sequence: {md}");
    // Read as a Markdown reader reads it (GitHub's dialect, tables on): no raw HTML, no link,
    // and the one strong "Verdict" is the real one.
    use pulldown_cmark::{Event, Options, Parser, Tag};
    let mut strong = 0;
    let mut in_strong = false;
    let mut strong_text = String::new();
    for event in Parser::new_ext(&md, Options::ENABLE_TABLES) {
        match event {
            Event::Html(html) | Event::InlineHtml(html) => panic!("raw HTML in report.md: {html}"),
            Event::Start(Tag::Link { dest_url, .. }) => {
                assert!(!dest_url.starts_with("javascript:"), "a link: {dest_url}")
            }
            Event::Start(Tag::Strong) => in_strong = true,
            Event::End(pulldown_cmark::TagEnd::Strong) => {
                if strong_text.starts_with("Verdict") {
                    strong += 1;
                }
                in_strong = false;
                strong_text.clear();
            }
            Event::Text(text) if in_strong => strong_text.push_str(&text),
            _ => {}
        }
    }
    assert_eq!(strong, 1, "one verdict: {md}");
    let excerpt = md
        .lines()
        .find(|l| l.contains("fenced"))
        .expect("the excerpt line");
    assert!(
        excerpt.contains("````"),
        "a fence longer than ```: {excerpt}"
    );
    // The worst-files table keeps its three columns.
    let row = md
        .lines()
        .find(|l| l.starts_with("| ") && l.contains("raw</b>"))
        .expect("the file's row");
    assert_eq!(row.matches(" | ").count(), 2, "{row}");
}
