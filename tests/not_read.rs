//! What a run did not read, told whole: a "Not read" section in report.md and report.html
//! (each path with its reason, every reason counted) and a `not_read` object in summary.json,
//! merged shards included; an unreadable input makes the verdict "incomplete", and the
//! verdict never says ready when the run exits with findings; a zip that is not a ChatGPT
//! export is left out, not damaged; report.html states every fact report.md does; the help
//! and the README name every extension a walk reads.

use std::collections::BTreeSet;
use std::io::Write;

use serde_json::{json, Value};

use crate::common::{run_folder, Home, Workdir};

fn record(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]})
}

/// A zip holding no `conversations.json`: an ordinary archive kept beside the transcripts.
fn plain_zip(wd: &Workdir, relative: &str) {
    let path = wd.path(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    zip.start_file("notes.txt", zip::write::SimpleFileOptions::default())
        .unwrap();
    zip.write_all(b"not a transcript").unwrap();
    zip.finish().unwrap();
}

/// An input folder with a path of each reason the walk leaves one out: another extension, a
/// hidden file, a symlink, `--exclude` and no `--glob` matches, a zip that is not an export,
/// a folder taken for a Codex home.
fn input_with_every_skip(wd: &Workdir) {
    wd.create_jsonl("in/a.jsonl", &[record("a")]);
    wd.create("in/notes.txt", "notes");
    wd.create("in/.hidden.jsonl", "{}\n");
    wd.create("in/old.bak.jsonl", "{}\n");
    wd.create("in/data.ndjson", "{}\n");
    std::os::unix::fs::symlink("a.jsonl", wd.path("in/link.jsonl")).unwrap();
    plain_zip(wd, "in/photos.zip");
    wd.create("in/codex/rollover/manifest", "{\"manifest\":1}\n");
}

const SKIPS: [&str; 6] = [
    "--glob",
    "*.jsonl",
    "--glob",
    "*.zip",
    "--exclude",
    "*.bak.jsonl",
];

fn summary_of(home: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(run_folder(home).join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn report_md(home: &std::path::Path) -> String {
    std::fs::read_to_string(run_folder(home).join("report.md")).unwrap()
}

fn report_html(home: &std::path::Path) -> String {
    std::fs::read_to_string(run_folder(home).join("report.html")).unwrap()
}

/// Each path left out is in summary.json's `not_read` under its reason, with why, and in both
/// reports' "Not read" section; a sharded run's merged summary says the same.
#[test]
fn both_reports_and_the_summary_list_every_path_not_read_with_its_reason() {
    let wd = Workdir::new("not_read_listed");
    input_with_every_skip(&wd);
    let mut extra = SKIPS.to_vec();
    extra.extend(["--jobs", "1"]);
    // The Codex home inside the input is a finding: exit 1.
    let home = wd.convert("in", "home", &extra, 1);
    let summary = home.summary();
    let not_read = &summary["not_read"];
    let expected = [
        ("codex_home", "in/codex", "a Codex home"),
        ("not_an_export", "in/photos.zip", "not a ChatGPT export"),
        (
            "other_extension",
            "in/notes.txt",
            "another extension (.txt)",
        ),
        ("hidden", "in/.hidden.jsonl", "hidden (--hidden reads it)"),
        (
            "symlink",
            "in/link.jsonl",
            "a symlink (--follow follows it)",
        ),
        ("excluded", "in/old.bak.jsonl", "matches --exclude"),
        ("unmatched", "in/data.ndjson", "matches no --glob"),
    ];
    let md = report_md(&home.root);
    let html = report_html(&home.root);
    assert!(md.contains("\n## Not read\n"), "{md}");
    assert!(html.contains("<h2>Not read</h2>"), "{html}");
    let html = html_text(&html);
    for (reason, path, why) in expected {
        assert_eq!(not_read[reason]["count"], 1, "{reason}: {not_read:#}");
        let listed = &not_read[reason]["paths"][0];
        assert_eq!(listed["path"], path, "{reason}");
        let said = listed["reason"].as_str().unwrap();
        assert!(said.contains(why), "{reason}: {said}");
        assert!(
            md.contains(&format!("- `{path}`: ")),
            "{path} in report.md:\n{md}"
        );
        assert!(
            html.contains(&format!(" {path} : {said}")),
            "{path} in report.html:\n{html}"
        );
    }
    assert_eq!(
        not_read.as_object().unwrap().len(),
        expected.len(),
        "{not_read:#}"
    );
    // Counted once per reason in the table, the extensions named.
    let table = md_text(&md)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        table.contains("files with other extensions (.txt 1) 1"),
        "{md}"
    );

    // Three shards of the same walk, merged: the same `not_read`.
    for shard in ["0/3", "1/3", "2/3"] {
        let mut args = vec!["convert", "in", "--out", "sharded", "--shard", shard];
        args.extend_from_slice(&extra);
        let run = wd.run(&args);
        assert!(matches!(run.code(), Some(0 | 1)), "{}", run.stderr());
    }
    let merged = wd.run(&["report", "merge", "sharded"]);
    merged.expect_code(1);
    assert_eq!(summary_of(&wd.path("sharded"))["not_read"], *not_read);
}

/// A path that cannot be read leaves the run incomplete: the verdict says so in both reports
/// and summary.json, the run exits 1, and the path is listed with why under Not read.
#[test]
fn an_unreadable_input_makes_the_verdict_incomplete_and_the_run_exit_1() {
    let wd = Workdir::new("not_read_incomplete");
    wd.create_jsonl("in/a.jsonl", &[record("a")]);
    std::os::unix::fs::symlink("gone", wd.path("in/dangling.jsonl")).unwrap();
    let home = wd.convert("in", "home", &["--follow"], 1);
    let summary = home.summary();
    assert_eq!(summary["verdict"], "incomplete");
    assert_eq!(
        summary["not_read"]["unreadable"],
        json!({"count": 1, "paths": [
            {"path": "in/dangling.jsonl", "reason": "No such file or directory (os error 2)"}
        ]})
    );
    let md = report_md(&home.root);
    assert!(
        md.contains("**Verdict: incomplete.** 1 path could not be read"),
        "{md}"
    );
    assert!(
        md.contains("- `in/dangling.jsonl`: No such file or directory"),
        "{md}"
    );
    let html = report_html(&home.root);
    assert!(html.contains("Verdict: incomplete</span>"), "{html}");
}

/// The verdict and the exit code say the same of every run: ready (with or without repairs)
/// exactly when it exits 0. Quarantined records within `--max-quarantine-rate` are no finding
/// for either; beyond it, both block.
#[test]
fn the_verdict_never_contradicts_the_exit_code() {
    let wd = Workdir::new("not_read_verdict");
    let good: Vec<Value> = (0..9).map(|i| record(&format!("r{i}"))).collect();
    let mut with_bad = good.clone();
    with_bad.push(json!({"no": "messages"}));
    wd.create_jsonl("clean/a.jsonl", &good);
    wd.create_jsonl("bad/a.jsonl", &with_bad);
    wd.create_jsonl("loose/a.jsonl", &with_bad);
    wd.create_jsonl("loop/a.jsonl", &good);
    std::os::unix::fs::symlink(".", wd.path("loop/back")).unwrap();
    let runs = [
        ("clean", &[][..], 0),
        ("bad", &[][..], 1),
        ("loose", &["--max-quarantine-rate", "0.5"][..], 0),
        // A symlink loop is a finding (exit 1): the verdict cannot say ready.
        ("loop", &["--follow"][..], 1),
    ];
    for (input, extra, code) in runs {
        let home = wd.convert(input, &format!("home-{input}"), extra, code);
        let verdict = home.summary()["verdict"].as_str().unwrap().to_string();
        assert_eq!(
            verdict.starts_with("ready"),
            code == 0,
            "{input}: verdict {verdict}, exit {code}"
        );
        let md = report_md(&home.root);
        assert!(md.contains(&format!("**Verdict: {verdict}.**")), "{md}");
    }
}

/// A zip without `conversations.json`, found by the walk or named on the command line, is
/// left out as not a ChatGPT export: listed under Not read, not damaged, no finding.
#[test]
fn a_zip_that_is_not_a_chatgpt_export_is_not_read_and_not_damaged() {
    let wd = Workdir::new("not_read_zip");
    wd.create_jsonl("in/a.jsonl", &[record("a")]);
    plain_zip(&wd, "in/backup.zip");
    let walked = wd.convert("in", "home", &[], 0);
    let named = {
        let run = wd.run(&["convert", "in/a.jsonl", "in/backup.zip", "--out", "named"]);
        run.expect_code(0);
        Home {
            root: wd.path("named"),
            run,
        }
    };
    for home in [walked, named] {
        let summary = home.summary();
        assert_eq!(summary["damaged_files"], json!([]), "{summary:#}");
        assert_eq!(summary["converted"], 1);
        assert!(summary["verdict"].as_str().unwrap().starts_with("ready"));
        assert_eq!(
            summary["not_read"]["not_an_export"],
            json!({"count": 1, "paths": [{
                "path": "in/backup.zip",
                "reason": "a zip without conversations.json: not a ChatGPT export"
            }]})
        );
        let stderr = home.run.stderr();
        assert!(!stderr.contains("cannot open"), "{stderr}");
        let md = report_md(&home.root);
        assert!(
            md.contains(
                "- `in/backup.zip`: a zip without conversations\\.json: not a ChatGPT export"
            ),
            "{md}"
        );
    }
}

/// report.md as plain text: code spans, emphasis, table bars, list marks, escapes and link
/// targets taken away.
fn md_text(md: &str) -> String {
    let mut out = String::new();
    let mut chars = md.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            '`' | '*' | '|' => out.push(' '),
            // A link's target `(x.jsonl)` after its text `[x.jsonl]`: the text is kept.
            ']' if chars.peek() == Some(&'(') => {
                for c in chars.by_ref() {
                    if c == ')' {
                        break;
                    }
                }
            }
            '[' | ']' => {}
            c => out.push(c),
        }
    }
    out
}

/// report.html as plain text: tags (and the scripts, styles and charts inside them) taken
/// away, entities read back.
fn html_text(html: &str) -> String {
    let mut text = html.to_string();
    for (open, close) in [
        ("<script", "</script>"),
        ("<style", "</style>"),
        ("<svg", "</svg>"),
    ] {
        while let Some(start) = text.find(open) {
            let end = text[start..]
                .find(close)
                .map_or(text.len(), |e| start + e + close.len());
            text.replace_range(start..end, " ");
        }
    }
    let mut out = String::new();
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#x2f;", "/")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The facts a text states: every number (`1,234`, `0.00`, `0001`) and every path or file
/// name (a word holding `/` or a file extension), each trimmed of the punctuation around it.
fn facts(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || "(),;:".contains(c))
        .map(|w| w.trim_matches(|c: char| ".!?'\"".contains(c)))
        .filter(|w| {
            w.chars().any(|c| c.is_ascii_digit())
                || w.contains('/')
                || [".jsonl", ".json", ".zip", ".txt", ".zst", ".csv", ".html"]
                    .iter()
                    .any(|e| w.ends_with(e))
        })
        .map(str::to_string)
        .collect()
}

/// report.md and report.html of one run (damaged files, quarantined records, paths not read
/// for several reasons) state the same facts: every number and path report.md states is in
/// report.html, and both state the verdict, every damage (file, line, byte, reason) and
/// every path not read with its reason and count.
#[test]
fn report_html_states_every_fact_report_md_does() {
    let wd = Workdir::new("not_read_facts");
    let good: Vec<Value> = (0..3).map(|i| record(&format!("r{i}"))).collect();
    let mut lines: Vec<String> = good.iter().map(Value::to_string).collect();
    lines.push(json!({"no": "messages"}).to_string());
    let plain = lines.join("\n") + "\n";
    wd.create("in/mixed.jsonl", &plain);
    let compressed = zstd::stream::encode_all(plain.repeat(40).as_bytes(), 1).unwrap();
    wd.create("in/cut.jsonl.zst", &compressed[..compressed.len() / 2]);
    wd.create("in/notes.txt", "notes");
    wd.create("in/.hidden.jsonl", "{}\n");
    plain_zip(&wd, "in/photos.zip");
    std::os::unix::fs::symlink("gone", wd.path("in/dangling.jsonl")).unwrap();
    let home = wd.convert("in", "home", &["--follow"], 1);
    let summary = home.summary();
    let md = md_text(&report_md(&home.root));
    let html = html_text(&report_html(&home.root));

    let mut stated: Vec<String> =
        vec![format!("Verdict: {}", summary["verdict"].as_str().unwrap())];
    let damaged = summary["damaged_files"].as_array().unwrap();
    assert!(!damaged.is_empty(), "{summary:#}");
    for d in damaged {
        stated.push(format!(
            "{}:{} (byte {}){}: {}",
            d["file"].as_str().unwrap(),
            d["line"].as_u64().unwrap(),
            d["byte_offset"].as_u64().unwrap(),
            d["compressed_offset"]
                .as_u64()
                .map(|c| format!(", compressed byte {c}"))
                .unwrap_or_default(),
            d["message"].as_str().unwrap()
        ));
    }
    let not_read = summary["not_read"].as_object().unwrap();
    assert!(not_read.len() >= 4, "{not_read:?}");
    for list in not_read.values() {
        for p in list["paths"].as_array().unwrap() {
            stated.push(p["path"].as_str().unwrap().to_string());
            stated.push(p["reason"].as_str().unwrap().to_string());
        }
    }
    let squeeze = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let (md_flat, html_flat) = (squeeze(&md), squeeze(&html));
    for fact in &stated {
        let fact = squeeze(fact);
        assert!(md_flat.contains(&fact), "report.md lacks {fact:?}:\n{md}");
        assert!(
            html_flat.contains(&fact),
            "report.html lacks {fact:?}:\n{html}"
        );
    }
    for (what, key) in [
        ("records read", "records"),
        ("records quarantined", "quarantined"),
        ("input files", "files"),
    ] {
        let n = summary[key].as_u64().unwrap().to_string();
        for (name, text) in [("report.md", &md_flat), ("report.html", &html_flat)] {
            assert!(
                text.contains(&format!("{n} {what}")) || text.contains(&format!("{what} {n}")),
                "{name} lacks {n} {what}"
            );
        }
    }
    let (md_facts, html_facts) = (facts(&md), facts(&html));
    let missing: Vec<&String> = md_facts.difference(&html_facts).collect();
    assert!(
        missing.is_empty(),
        "report.html lacks these facts of report.md: {missing:?}\n{html}"
    );
}

/// `convert --help` names every extension a folder is walked for, .zip included, from the
/// walk's own lists; the README names each of them too.
#[test]
fn the_help_and_the_readme_name_every_extension_read() {
    let wd = Workdir::new("not_read_extensions");
    let help = wd.run(&["convert", "--help"]).stdout();
    let inputs = help
        .split("<INPUTS>...")
        .nth(2)
        .and_then(|rest| rest.split("Options:").next())
        .unwrap();
    let extensions: BTreeSet<String> = inputs
        .split(|c: char| c.is_whitespace() || ",;()".contains(c))
        .filter(|w| w.starts_with('.') && w.len() > 1)
        .map(|w| w.trim_end_matches('.').to_string())
        .collect();
    for expected in [".jsonl", ".json", ".zip", ".parquet", ".zst", ".gz"] {
        assert!(extensions.contains(expected), "{expected} in {inputs}");
    }
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for extension in &extensions {
        assert!(
            readme.contains(&format!("`{extension}`")),
            "README.md does not name {extension}"
        );
    }
}
