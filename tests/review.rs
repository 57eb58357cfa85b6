//! `--review N` (issue 28, item 2): review pages of real conversations, side by side, for each
//! rule that fired, each repair and each quarantine reason; chosen deterministically; every
//! page's decisions are the run's; self-contained, and rendered by a real Chromium.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::Workdir;

const BIN: &str = env!("CARGO_BIN_EXE_rollover");

fn corpora() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpora"))
}

/// `audit sources --review N` (and samples/, with `samples`) into `home`: the run folder.
fn audit_sources(wd: &Workdir, home: &str, n: &str, samples: bool) -> PathBuf {
    let mut args = vec![
        "audit".to_string(),
        "sources".to_string(),
        "--out".to_string(),
        wd.path(home).to_str().expect("utf-8").to_string(),
        "--review".to_string(),
        n.to_string(),
    ];
    if samples {
        args.push(concat!(env!("CARGO_MANIFEST_DIR"), "/samples").to_string());
    }
    let out = Command::new(BIN)
        .current_dir(corpora())
        .args(&args)
        .output()
        .expect("run rollover");
    assert_eq!(
        out.status.code(),
        Some(1),
        "sources has quarantined records: {out:?}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("review: ") && stdout.contains("pages with transcript text"),
        "{stdout}"
    );
    wd.path(&format!("{home}/rollover/runs/0001"))
}

/// The JSON a page carries for tools.
fn page_facts(html: &str) -> Value {
    let start = html.find("id=\"rollover-page\">").expect("the page's JSON")
        + "id=\"rollover-page\">".len();
    let end = start + html[start..].find("</script>").expect("its end");
    serde_json::from_str(&html[start..end]).expect("page JSON")
}

fn report_lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .expect("a run report")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a report line"))
        .collect()
}

#[test]
fn every_review_page_shows_the_decisions_and_quarantine_the_run_wrote() {
    let wd = Workdir::new("review");
    let run = audit_sources(&wd, "home", "2", false);
    let conversations = report_lines(&run.join("conversations.jsonl"));
    let quarantine = report_lines(&run.join("quarantine.jsonl"));
    let dir = run.join("review");
    let index = fs::read_to_string(dir.join("index.html")).expect("index.html");
    assert!(
        index.contains("These pages hold transcript text"),
        "{index}"
    );
    let report = fs::read_to_string(run.join("report.html")).expect("report.html");
    assert!(
        report.contains("href=\"review/index.html\""),
        "report.html links the review"
    );
    let mut pages = 0;
    let mut reasons = BTreeSet::new();
    for entry in fs::read_dir(&dir).expect("review/") {
        let path = entry.expect("entry").path();
        if path.file_name().is_some_and(|n| n == "index.html") {
            continue;
        }
        pages += 1;
        let name = path
            .file_name()
            .expect("name")
            .to_str()
            .expect("utf-8")
            .to_string();
        assert!(
            index.contains(&format!("href=\"{name}#")),
            "{name} is not in the index"
        );
        let html = fs::read_to_string(&path).expect("a page");
        assert!(
            html.contains(
                "This page holds transcript text, because <code>--review</code> asked for it"
            ),
            "{name}"
        );
        for external in [
            "src=\"http",
            "href=\"http",
            "<link",
            "<script src",
            "@import",
        ] {
            assert!(
                !html.contains(external),
                "{name} is not self-contained: {external}"
            );
        }
        let facts = page_facts(&html);
        let (source, line) = (&facts["source"], &facts["line"]);
        let written = conversations
            .iter()
            .find(|c| &c["source"] == source && &c["line"] == line);
        let refused = quarantine
            .iter()
            .find(|q| &q["source"] == source && &q["line"] == line);
        match (written, refused) {
            (Some(written), None) => {
                assert_eq!(
                    facts["decisions"], written["decisions"],
                    "{name}: {source}:{line}"
                );
                assert_eq!(facts["session_id"], written["id"], "{name}");
                reasons.insert("converted");
            }
            (None, Some(refused)) => {
                assert_eq!(
                    facts["quarantined"], refused["reason"],
                    "{name}: {source}:{line}"
                );
                reasons.insert("quarantined");
            }
            other => panic!("{name}: {source}:{line} is not one record of the run: {other:?}"),
        }
    }
    assert!(pages > 10, "{pages} pages");
    assert_eq!(
        reasons.len(),
        2,
        "pages of converted and of quarantined records"
    );
    // Every rule that fired and every quarantine class has its pages in the index.
    for c in &conversations {
        for d in c["decisions"].as_array().into_iter().flatten() {
            let rule = d["rule"].as_str().expect("rule");
            assert!(
                index.contains(&format!("<code>{rule}</code>")),
                "rule {rule} not in the index"
            );
        }
    }
    for q in &quarantine {
        let class = q["class"].as_str().expect("class");
        assert!(
            index.contains(&format!("<code>{class}</code>")),
            "class {class} not in the index"
        );
    }
    // The same choice every time.
    let again = audit_sources(&wd, "home2", "2", false);
    assert_eq!(
        fs::read(dir.join("index.html")).expect("a"),
        fs::read(again.join("review/index.html")).expect("b")
    );
}

#[test]
fn review_pages_render_in_headless_chromium() {
    let wd = Workdir::new("review_chromium");
    let run = audit_sources(&wd, "home", "5", true);
    let dir = run.join("review");
    let browser = crate::report::chromium();
    // The index and one page of each format.
    let mut formats = BTreeSet::new();
    let mut pages = vec![(dir.join("index.html"), "index".to_string())];
    let mut names: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("review/")
        .map(|e| e.expect("entry").path())
        .collect();
    names.sort();
    for path in names {
        let html = fs::read_to_string(&path).expect("page");
        if let Some(start) = html.find("<p class=\"meta\">Format <code>") {
            let rest = &html[start + "<p class=\"meta\">Format <code>".len()..];
            let format = rest[..rest.find('<').expect("end")].to_string();
            if formats.insert(format.clone()) {
                pages.push((path, format));
            }
        }
    }
    assert_eq!(formats.len(), 8, "a page of each format: {formats:?}");
    // Screenshots to look at: target/review-screenshots/{index,FORMAT}.png.
    let shots = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/review-screenshots"
    ));
    fs::create_dir_all(&shots).expect("screenshot folder");
    for (n, (page, label)) in pages.iter().enumerate() {
        let shot = Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                "--window-size=1400,1000",
                &format!(
                    "--user-data-dir={}",
                    wd.path(&format!("shot-{n}")).display()
                ),
                &format!(
                    "--screenshot={}",
                    shots.join(format!("{label}.png")).display()
                ),
                &format!("file://{}", page.display()),
            ])
            .output()
            .expect("run chromium");
        assert!(shot.status.success(), "no screenshot of {}", page.display());
        assert!(
            fs::metadata(shots.join(format!("{label}.png"))).is_ok_and(|m| m.len() > 10_000),
            "an empty screenshot of {}",
            page.display()
        );
        let out = Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                &format!(
                    "--user-data-dir={}",
                    wd.path(&format!("profile-{n}")).display()
                ),
                "--enable-logging=stderr",
                "--v=0",
                "--dump-dom",
                &format!("file://{}", page.display()),
            ])
            .output()
            .expect("run chromium");
        let dom = String::from_utf8_lossy(&out.stdout);
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "chromium failed on {}: {log}",
            page.display()
        );
        let console: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
            .collect();
        assert!(console.is_empty(), "{}: {console:?}", page.display());
        if n == 0 {
            assert!(
                dom.contains("Rules that fired") && dom.contains("Quarantine reasons"),
                "index: {dom}"
            );
        } else {
            assert!(
                dom.contains("<th>Source message</th>") && dom.contains("<th>Written</th>"),
                "{}: {dom}",
                page.display()
            );
            assert!(
                dom.matches("<tr id=\"m").count() >= 2,
                "{}: no message rows",
                page.display()
            );
        }
    }
}
