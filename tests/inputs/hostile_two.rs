//! Hostile archives, round two (issue 57): chains of logged requests that were quadratic in
//! memory or deep enough to overflow the stack, whole-file sources that multiplied by the jobs,
//! a one-line export past the record limit, zstd behind a skippable frame, and the last
//! unbounded paths (a long line, validate, terminal and HTML escaping, report merge, a
//! source's cwd). Every test runs the real binary.

use std::io::Write;
use std::process::Command;

use super::hostile::zstd_file;
use crate::common::{Home, Rollout, Run, Workdir};
use serde_json::{json, Value};

/// `prlimit --as=LIMIT rollover ARGS...` in `wd`.
fn run_limited(wd: &Workdir, limit: u64, args: &[&str]) -> Run {
    let output = Command::new("prlimit")
        .arg(format!("--as={limit}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_rollover"))
        .args(args)
        .current_dir(wd.root())
        .output()
        .expect("prlimit (util-linux) runs rollover under an address-space limit");
    Run {
        command: format!("prlimit --as={limit} rollover {}", args.join(" ")),
        output,
    }
}

fn home(wd: &Workdir, name: &str, run: Run) -> Home {
    Home {
        root: wd.path(name),
        run,
    }
}

/// A stored Responses object `n` of a chain: its own input and output, and the response it
/// continues.
fn entry(n: usize) -> Value {
    let mut entry = json!({
        "object": "response", "id": format!("resp_{n}"), "status": "completed", "model": "gpt-5",
        "input": [{"role": "user", "content": format!("step {n}")}],
        "output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": format!("done {n}")}]}],
    });
    if n > 0 {
        entry["previous_response_id"] = json!(format!("resp_{}", n - 1));
    }
    entry
}

/// A log of a chain of `n` entries, oldest first or newest first.
fn chain_log(n: usize, newest_first: bool) -> Vec<u8> {
    let mut order: Vec<usize> = (0..n).collect();
    if newest_first {
        order.reverse();
    }
    let mut bytes = Vec::new();
    for k in order {
        serde_json::to_writer(&mut bytes, &entry(k)).unwrap();
        bytes.push(b'\n');
    }
    bytes
}

fn chat(text: &str) -> Value {
    json!({"messages": [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "ok"},
    ]})
}

/// The user texts of a rollout's messages, in order.
fn user_texts(rollout: &Rollout) -> Vec<String> {
    rollout
        .items()
        .iter()
        .filter(|i| i["type"] == "message" && i["role"] == "user")
        .map(|i| {
            i["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// A chain of 10,000 entries written newest first overflowed the stack (the process aborted:
/// no report, nothing after it converted). It converts into one conversation, as the same log
/// written oldest first does, in bounded memory; the file after it converts; `--json` answers;
/// `audit` and `explain` read it too.
#[test]
fn a_chain_of_ten_thousand_entries_written_newest_first_converts_with_the_file_after_it() {
    let wd = Workdir::new("hostile2_chain");
    let n = 10_000;
    wd.create("newest/a-chain.jsonl", chain_log(n, true));
    wd.create_jsonl("newest/b-after.jsonl", &[chat("the file after the chain")]);
    wd.create("oldest/a-chain.jsonl", chain_log(n, false));
    let limit = 1 << 30;
    let run = run_limited(
        &wd,
        limit,
        &["convert", "newest", "--out", "home", "--json", "--quiet"],
    );
    run.expect_code(0);
    let summary: Value = serde_json::from_str(&run.stdout()).expect("--json answers");
    assert_eq!(summary["records"], json!(n + 1), "{summary}");
    assert_eq!(summary["converted"], json!(2), "{summary}");
    assert_eq!(summary["records_merged"], json!(n - 1), "{summary}");
    assert_eq!(summary["quarantined"], json!(0), "{summary}");
    let newest = home(&wd, "home", run);
    let rollouts = newest.all_rollouts();
    assert_eq!(rollouts.len(), 2);
    let chain = rollouts
        .iter()
        .find(|r| r.items().len() > 2)
        .expect("the chain's rollout");
    let texts = user_texts(chain);
    assert_eq!(texts.len(), n);
    assert_eq!(texts[0], "step 0");
    assert_eq!(texts[n - 1], format!("step {}", n - 1));
    // Oldest first: the same conversation.
    let oldest = run_limited(&wd, limit, &["convert", "oldest", "--out", "home-oldest"]);
    oldest.expect_code(0);
    let oldest = home(&wd, "home-oldest", oldest).single_rollout();
    assert_eq!(oldest.items(), chain.items());
    let audit = run_limited(
        &wd,
        limit,
        &["audit", "newest", "--out", "home-audit", "--json"],
    );
    audit.expect_code(0);
    let audited: Value = serde_json::from_str(&audit.stdout()).unwrap();
    assert_eq!(audited["converted"], json!(2), "{audited}");
    let explain = run_limited(&wd, limit, &["explain", "newest/a-chain.jsonl:1", "--json"]);
    explain.expect_code(0);
    let explained: Value = serde_json::from_str(&explain.stdout()).unwrap();
    assert_eq!(explained["records"], json!(n), "{explain}");
    assert_eq!(explained["format"], json!("responses"));
}

/// Each entry's history was its own copy of its parent's (2,000 entries: ~10 GB). Now a
/// history is the parent's plus the entry's own items: the log converts under an address
/// space a fraction of a gibibyte, into one conversation.
#[test]
fn a_long_chain_written_oldest_first_converts_in_linear_memory() {
    let wd = Workdir::new("hostile2_chain_memory");
    let n = 3_000;
    wd.create("chain.jsonl", chain_log(n, false));
    let run = run_limited(&wd, 768 << 20, &["convert", "chain.jsonl", "--out", "home"]);
    run.expect_code(0);
    let home = home(&wd, "home", run);
    assert_eq!(user_texts(&home.single_rollout()).len(), n);
}

/// A Claude Code session line.
fn session_line(session: &str, n: usize, cwd: &str, text: &str) -> Value {
    json!({"type": "user", "sessionId": session, "uuid": format!("{session}-{n}"),
        "parentUuid": if n == 0 { Value::Null } else { json!(format!("{session}-{}", n - 1)) },
        "cwd": cwd, "version": "2.1.38", "timestamp": "2026-02-10T10:00:00.000Z",
        "isSidechain": false, "message": {"role": "user", "content": text}})
}

fn session(wd: &Workdir, path: &str, id: &str, lines: usize) {
    let lines: Vec<Value> = (0..lines)
        .map(|n| session_line(id, n, "/home/me/proj", &format!("line {n} of {id}")))
        .collect();
    wd.create_jsonl(path, &lines);
}

/// Whole-file work is admitted against one budget for the run: two sessions that fit one at
/// a time convert one after the other, exactly as with room for both, at any `--jobs`; a
/// session (or a single record) that could never fit is refused with a reason naming
/// `--memory`, and the run goes on.
#[test]
fn whole_file_work_waits_for_the_memory_budget_and_what_cannot_fit_is_refused() {
    let wd = Workdir::new("hostile2_budget");
    // ~1.5 MB each: about 10.5 MB of budget each at 3 bytes a byte and 1 KiB a line.
    session(&wd, "sessions/a.jsonl", "s-a", 6_000);
    session(&wd, "sessions/b.jsonl", "s-b", 6_000);
    let roomy = wd.convert("sessions", "roomy", &["--jobs", "2"], 0);
    for jobs in ["1", "2"] {
        let name = format!("tight-{jobs}");
        let tight = wd.convert("sessions", &name, &["--jobs", jobs, "--memory", "16MiB"], 0);
        assert_eq!(tight.summary()["converted"], json!(2));
        let bodies = |home: &Home| -> Vec<Vec<Value>> {
            home.all_rollouts()
                .iter()
                .map(|r| r.lines.clone())
                .collect()
        };
        assert_eq!(bodies(&tight), bodies(&roomy), "--jobs {jobs}");
    }
    // Too little for either session, and for a 2 MB record on its own.
    wd.create_jsonl(
        "sessions/c-large-record.jsonl",
        &[chat(&"x".repeat(2 << 20))],
    );
    wd.create_jsonl("sessions/d-small.jsonl", &[chat("small")]);
    let refused = wd.convert("sessions", "refused", &["--memory", "4MiB"], 1);
    let summary = refused.summary();
    let damaged = summary["damaged_files"].as_array().unwrap();
    assert_eq!(damaged.len(), 3, "{summary}");
    for damage in damaged {
        let message = damage["message"].as_str().unwrap();
        assert!(message.contains("--memory"), "{message}");
    }
    assert_eq!(summary["converted"], json!(1), "the small file converts");
    assert!(
        refused.run.stderr().contains("raise --memory"),
        "{}",
        refused.run
    );
}

/// A Claude Code session of short lines held every line's parsed JSON at once (~10 bytes a
/// byte). Read a line at a time, a 40 MB session converts under an address space that would
/// not hold those trees.
#[test]
fn a_chatty_claude_code_session_is_read_a_line_at_a_time() {
    let wd = Workdir::new("hostile2_chatty");
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 40 << 20 {
        text.push_str(
            &session_line("s-chatty", n, "/home/me/proj", &format!("ok {n}")).to_string(),
        );
        text.push('\n');
        n += 1;
    }
    wd.create("session.jsonl", &text);
    let run = run_limited(
        &wd,
        640 << 20,
        &["audit", "session.jsonl", "--out", "home", "--jobs", "1"],
    );
    run.expect_code(0);
    let home = home(&wd, "home", run);
    assert_eq!(home.summary()["converted"], json!(1));
    assert_eq!(home.summary()["records_merged"], json!(n - 1));
}

/// A ChatGPT export's conversations.json written on one line, longer than
/// `--max-record-bytes`, was one quarantined record; it is read element by element.
#[test]
fn a_one_line_conversations_json_past_the_record_limit_is_read_element_by_element() {
    let wd = Workdir::new("hostile2_loose_export");
    let conversation = |i: usize| {
        json!({"id": format!("conv-{i}"), "title": format!("c{i}"), "create_time": 1.7e9,
        "current_node": "b", "mapping": {
            "a": {"id": "a", "parent": null, "children": ["b"], "message": {"id": "a",
                "author": {"role": "user"}, "create_time": 1.7e9,
                "content": {"content_type": "text", "parts": [format!("question {i} {}", "q".repeat(4000))]}}},
            "b": {"id": "b", "parent": "a", "children": [], "message": {"id": "b",
                "author": {"role": "assistant"}, "create_time": 1.7e9 + 1.0,
                "content": {"content_type": "text", "parts": ["answer"]}}},
        }})
    };
    let all: Vec<Value> = (0..600).map(conversation).collect();
    let line = Value::Array(all).to_string();
    assert!(line.len() > 2 << 20);
    wd.create("export/conversations.json", format!("{line}\n"));
    let home = wd.convert(
        "export/conversations.json",
        "home",
        &["--max-record-bytes", "1MiB", "--dry-run"],
        0,
    );
    let summary = home.summary();
    assert_eq!(summary["records"], json!(600), "{summary}");
    assert_eq!(summary["converted"], json!(600), "{summary}");
    assert_eq!(summary["quarantined"], json!(0), "{summary}");
}

/// An oversized line cost ~3x `--max-record-bytes` before it was let go (the buffer doubled
/// up to the limit, and the allocator kept every size it passed through: ~650 MB for the
/// default 256 MiB); now about the limit. A 600 MiB line, in a zstd file and inside a zip
/// export, is quarantined under an address space the doubling would pass, and the record
/// after it converts.
#[test]
fn an_oversized_line_is_let_go_in_memory_bounded_by_the_limit() {
    let wd = Workdir::new("hostile2_oversized");
    std::fs::create_dir_all(wd.path("in")).unwrap();
    let spaces = vec![b' '; 1 << 20];
    zstd_file(&wd, "in/long.jsonl.zst", |out| {
        out.write_all(b"{\"messages\": [").unwrap();
        for _ in 0..600 {
            out.write_all(&spaces).unwrap();
        }
        out.write_all(b"]}\n").unwrap();
        writeln!(out, "{}", chat("after the long line")).unwrap();
    });
    let file = std::fs::File::create(wd.path("in/export.zip")).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default()
        .compression_level(Some(1))
        .large_file(true);
    zip.start_file("conversations.json", options).unwrap();
    zip.write_all(b"[{\"id\": \"spaces\", \"mapping\": {")
        .unwrap();
    for _ in 0..600 {
        zip.write_all(&spaces).unwrap();
    }
    zip.write_all(b"}}]").unwrap();
    zip.finish().unwrap();
    let run = run_limited(
        &wd,
        512 << 20,
        &["convert", "in", "--out", "home", "--jobs", "1"],
    );
    assert_eq!(run.code(), Some(1), "{run}");
    let home = home(&wd, "home", run);
    let summary = home.summary();
    assert_eq!(summary["converted"], json!(1), "{summary}");
    assert_eq!(summary["quarantined"], json!(2), "{summary}");
    for line in home.quarantine() {
        assert_eq!(line["class"], json!("too_large"), "{line}");
    }
}

/// `pzstd` writes a skippable frame before the zstd frames: the file was read as plain text
/// (one invalid_json record for every conversation in it).
#[test]
fn a_zstd_file_opening_with_a_skippable_frame_converts() {
    let wd = Workdir::new("hostile2_pzstd");
    let mut text = Vec::new();
    for i in 0..50 {
        serde_json::to_writer(&mut text, &chat(&format!("conversation {i}"))).unwrap();
        text.push(b'\n');
    }
    // A skippable frame as pzstd writes it (magic 0x184D2A50, 4 bytes of frame size), then
    // the zstd frame.
    let mut bytes = vec![0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0];
    bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&zstd::encode_all(&text[..], 3).unwrap());
    wd.create("log.jsonl.zst", bytes);
    let home = wd.convert("log.jsonl.zst", "home", &[], 0);
    assert_eq!(home.summary()["converted"], json!(50));
}

/// `cat a.jsonl b.jsonl` of two files that each start with a BOM: the second BOM is at the
/// start of a line, and that record was quarantined.
#[test]
fn a_bom_at_the_start_of_any_line_is_accepted() {
    let wd = Workdir::new("hostile2_bom");
    let mut bytes = Vec::new();
    for text in ["first file", "second file"] {
        bytes.extend_from_slice(b"\xEF\xBB\xBF");
        serde_json::to_writer(&mut bytes, &chat(text)).unwrap();
        bytes.push(b'\n');
    }
    wd.create("joined.jsonl", bytes);
    let home = wd.convert("joined.jsonl", "home", &[], 0);
    assert_eq!(home.summary()["converted"], json!(2));
    assert_eq!(home.summary()["quarantined"], json!(0));
}

/// `validate` read a rollout whole and parsed a line of any length; a line over its
/// `--max-record-bytes` is a violation, skipped as it is read, and the other lines are
/// checked.
#[test]
fn validate_skips_a_line_longer_than_its_limit() {
    let wd = Workdir::new("hostile2_validate");
    let (home, rollout) = wd.convert_record(chat("hello"));
    drop(home);
    let text = String::from_utf8(rollout.bytes.clone()).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let long = json!({"timestamp": "2026-01-01T00:00:00.000Z", "type": "response_item",
        "payload": {"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "y".repeat(3 << 20)}]}});
    lines.insert(2, long.to_string());
    let name = rollout
        .path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    wd.create(&format!("check/{name}"), lines.join("\n") + "\n");
    let run = run_limited(
        &wd,
        512 << 20,
        &["validate", "check", "--max-record-bytes", "1MiB", "--json"],
    );
    run.expect_code(1);
    let report: Value = serde_json::from_str(&run.stdout()).unwrap();
    let violations = report["reports"][0]["violations"].as_array().unwrap();
    let long_line = violations
        .iter()
        .find(|v| v["line"] == json!(3))
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(long_line["invariant"], json!("line_format"));
    assert!(
        long_line["message"]
            .as_str()
            .unwrap()
            .contains("--max-record-bytes"),
        "{report}"
    );
    // The same file under the default limit: every line read and checked.
    let whole = wd.run(&["validate", "check", "--json"]);
    let whole: Value = serde_json::from_str(&whole.stdout()).unwrap();
    let read = whole["reports"][0]["violations"].as_array().unwrap();
    assert!(read.iter().all(|v| !v["message"]
        .as_str()
        .unwrap()
        .contains("--max-record-bytes")));
}

/// What the input names reaches a terminal as the summary shows it: `explain` wrote raw
/// escape sequences (clear screen, a window title, a bell) and bidi overrides from a role.
#[test]
fn explain_escapes_control_and_bidi_characters() {
    let wd = Workdir::new("hostile2_explain_escapes");
    let role = "\u{1b}[2J\u{1b}]0;owned\u{7}user\u{202e}txt.exe";
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": role, "content": "hi"},
                              {"role": "assistant", "content": "ok"}]})],
    );
    let run = wd.run(&["explain", "in.jsonl:1"]);
    let out = run.stdout();
    for raw in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!out.contains(raw), "{raw:?} reached the terminal: {out:?}");
        assert!(!run.stderr().contains(raw), "{:?}", run.stderr());
    }
    assert!(
        out.contains("\\u{1b}[2J") && out.contains("\\u{202e}"),
        "{out}"
    );
}

/// A review page's JSON is in a `<script type="application/json">`: `<!--<script>` in what
/// the input named kept the element open to the end of the page. Every `<` in it is
/// `\u003c` now, and the JSON reads back as it was.
#[test]
fn a_review_page_keeps_input_text_inside_its_json() {
    let wd = Workdir::new("hostile2_review");
    let name = "<!--<script>x.jsonl";
    wd.create_jsonl(
        name,
        &[json!({"messages": [{"role": "</script><!--<script>", "content": "hi"}]})],
    );
    let run = wd.run(&["audit", name, "--out", "home", "--review", "5"]);
    run.expect_code(1);
    let dir = crate::common::run_folder(&wd.path("home")).join("review");
    let mut pages = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let html = std::fs::read_to_string(&path).unwrap();
        let Some(start) = html.find("id=\"rollover-page\">") else {
            continue;
        };
        let start = start + "id=\"rollover-page\">".len();
        let end = start + html[start..].find("</script>").unwrap();
        let json = &html[start..end];
        assert!(!json.contains('<'), "{json}");
        let facts: Value = serde_json::from_str(json).unwrap();
        assert_eq!(facts["source"], json!(name), "{facts}");
        assert!(facts["quarantined"]
            .as_str()
            .unwrap()
            .contains("</script><!--<script>"));
        pages += 1;
    }
    assert!(pages > 0, "no review page in {dir:?}");
}

/// A Claude Code `cwd` went unchecked into `session_meta.cwd`. One that is relative, climbs,
/// holds a control character or is over 4096 bytes is replaced by the rules' cwd, counted
/// under `builtin.source-cwd`, and kept as `source_cwd`.
#[test]
fn a_source_cwd_that_is_not_a_clean_absolute_path_is_replaced_and_counted() {
    let wd = Workdir::new("hostile2_cwd");
    let long = format!("/{}", "a".repeat(5000));
    let bad = [
        "proj",
        "../../etc",
        "/home/me/../../etc",
        "/home/me\u{0}x",
        "/home/me\nevil",
        long.as_str(),
    ];
    for (i, cwd) in bad.iter().enumerate() {
        let line = session_line(&format!("s-{i}"), 0, cwd, "hi");
        wd.create_jsonl(&format!("sessions/{i}.jsonl"), &[line]);
    }
    wd.create_jsonl(
        "sessions/good.jsonl",
        &[session_line("s-good", 0, "/home/me/proj", "hi")],
    );
    let home = wd.convert("sessions", "home", &[], 0);
    let summary = home.summary();
    assert_eq!(
        summary["rules_fired"]["builtin.source-cwd"],
        json!(bad.len()),
        "{summary}"
    );
    let conversations = home.conversations();
    for rollout in home.all_rollouts() {
        let id = rollout.meta()["id"].as_str().unwrap().to_string();
        let line = conversations.iter().find(|c| c["id"] == json!(id)).unwrap();
        let cwd = rollout.meta()["cwd"].as_str().unwrap();
        match line.get("source_cwd").and_then(Value::as_str) {
            Some(source) => {
                assert!(bad.contains(&source), "{source:?}");
                assert_eq!(cwd, "/");
                let decided = line["decisions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d["rule"] == json!("builtin.source-cwd"));
                assert!(decided, "{line}");
            }
            None => assert_eq!(cwd, "/home/me/proj"),
        }
    }
    assert_eq!(
        conversations
            .iter()
            .filter(|c| c.get("source_cwd").is_some())
            .count(),
        bad.len()
    );
}

/// Two shards of one run over `archive`.
fn shards(wd: &Workdir, home: &str) {
    for shard in ["0/2", "1/2"] {
        wd.run(&["convert", "archive", "--out", home, "--shard", shard])
            .expect_code(0);
    }
}

fn shard_run(wd: &Workdir, home: &str, shard: &str) -> std::path::PathBuf {
    wd.path(&format!("{home}/rollover/shards/{shard}/runs/0001"))
}

/// `report merge` followed a symlinked `timing.json` (to `/dev/zero`, never ending), added
/// tampered counters with wrap-around, and merged shards run over different inputs as one
/// run. Each is refused now, naming the shard.
#[test]
fn report_merge_refuses_symlinks_wrapping_counters_and_shards_of_other_inputs() {
    let wd = Workdir::new("hostile2_merge");
    for i in 0..6 {
        wd.create_jsonl(&format!("archive/{i}.jsonl"), &[chat(&format!("file {i}"))]);
    }
    shards(&wd, "home");
    wd.run(&["report", "merge", "home"]).expect_code(0);

    let first = shard_run(&wd, "home", "0000-of-0002");
    std::fs::remove_file(first.join("timing.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", first.join("timing.json")).unwrap();
    let merged = wd.run(&["report", "merge", "home"]);
    merged.expect_code(2);
    assert!(merged.stderr().contains("symlink"), "{merged}");

    let wd = Workdir::new("hostile2_merge_wrap");
    for i in 0..6 {
        wd.create_jsonl(&format!("archive/{i}.jsonl"), &[chat(&format!("file {i}"))]);
    }
    shards(&wd, "home");
    let summary_path = shard_run(&wd, "home", "0001-of-0002").join("summary.json");
    let mut summary: Value =
        serde_json::from_slice(&std::fs::read(&summary_path).unwrap()).unwrap();
    summary["records"] = json!(u64::MAX);
    std::fs::write(&summary_path, serde_json::to_vec_pretty(&summary).unwrap()).unwrap();
    let merged = wd.run(&["report", "merge", "home"]);
    merged.expect_code(2);
    assert!(merged.stderr().contains("64 bits"), "{merged}");

    let wd = Workdir::new("hostile2_merge_inputs");
    for i in 0..6 {
        wd.create_jsonl(&format!("archive/{i}.jsonl"), &[chat(&format!("file {i}"))]);
    }
    wd.run(&["convert", "archive", "--out", "home", "--shard", "0/2"])
        .expect_code(0);
    wd.create_jsonl("archive/6.jsonl", &[chat("a file only shard 1 saw")]);
    wd.run(&["convert", "archive", "--out", "home", "--shard", "1/2"])
        .expect_code(0);
    let merged = wd.run(&["report", "merge", "home"]);
    merged.expect_code(2);
    assert!(
        merged.stderr().contains("shard 1/2") && merged.stderr().contains("other inputs"),
        "{merged}"
    );
}
