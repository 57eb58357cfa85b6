//! `rollover explain` (issue 28, item 1): any conversation of any source format, from its file
//! (`FILE[:LINE]`, format detected or `--from`) or from the home convert wrote
//! (`OUT SESSION`, through the run reports and the manifest), with the session id convert
//! wrote; a record that would be quarantined shows what was read and why, and exits 1.
//! The expected outputs are in `tests/expected/explain-*.txt`, read and checked by hand
//! against the source files when they were recorded.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::Workdir;

const BIN: &str = env!("CARGO_BIN_EXE_rollover");

fn corpora() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpora"))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run rollover")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One file of each of the eight source formats, explained exactly as recorded.
#[test]
fn explain_reads_one_file_of_each_of_the_eight_formats() {
    let cases = [
        ("chat", "openai-evals/ascii-digit-recognition/samples.jsonl", include_str!("expected/explain-chat.txt")),
        ("claude-code", "sources/claude-code/claude-code-viewer-v1.0/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl", include_str!("expected/explain-claude-code.txt")),
        ("chatgpt", "sources/chatgpt-export/chatgpt-exporter-thinking-summaries.json", include_str!("expected/explain-chatgpt.txt")),
        ("anthropic", "sources/anthropic-messages-api/tool_with_thinking.jsonl", include_str!("expected/explain-anthropic.txt")),
        ("responses", "sources/openai-responses-api/thinking_with_tool_calls.jsonl", include_str!("expected/explain-responses.txt")),
        ("chat-stream", "sources/openai-chat-completions/stream_with_tool_calls.jsonl", include_str!("expected/explain-chat-stream.txt")),
        ("sharegpt", "sources/sharegpt/llamafactory-glaive_toolcall_en_demo.json", include_str!("expected/explain-sharegpt.txt")),
        ("codex", "codex-rollouts/session-migrate/codex-0.144.4-basic.jsonl", include_str!("expected/explain-codex.txt")),
    ];
    for (format, file, expected) in cases {
        let out = run(&corpora(), &["explain", file]);
        assert_eq!(out.status.code(), Some(0), "{format}: {out:?}");
        let text = stdout(&out);
        assert!(
            text.lines()
                .next()
                .unwrap_or_default()
                .contains(&format!("({format}")),
            "{format} not read as itself: {text}"
        );
        assert_eq!(text, expected, "explain {file}");
        // Forcing the format reads the same.
        let forced = run(&corpora(), &["explain", file, "--from", format]);
        assert_eq!(stdout(&forced), expected, "explain {file} --from {format}");
    }
}

/// `explain OUT SESSION` finds the session's record through the home and explains it with
/// the id convert wrote: by id and by rollout path, for every session of `convert samples`
/// and the first session of each format of `convert sources`.
#[test]
fn explain_from_the_home_gives_the_session_convert_wrote() {
    let wd = Workdir::new("explain_home");
    let home = wd.path("samples-home");
    let home = home.to_str().expect("utf-8");
    let out = run(&repo(), &["convert", "samples", "--out", home, "-q"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let sources_home = wd.path("sources-home");
    let sources_home = sources_home.to_str().expect("utf-8");
    let out = run(
        &corpora(),
        &["convert", "sources", "--out", sources_home, "-q"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "sources has quarantined records: {out:?}"
    );
    let lines = |home: &str| -> Vec<Value> {
        std::fs::read_to_string(Path::new(home).join("rollover/latest/conversations.jsonl"))
            .expect("conversations.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).expect("a report line"))
            .collect()
    };
    let mut sessions: Vec<(String, Value)> = lines(home)
        .into_iter()
        .map(|l| (home.to_string(), l))
        .collect();
    let mut formats_seen = std::collections::BTreeSet::new();
    for line in lines(sources_home) {
        let explained = run(
            &corpora(),
            &[
                "explain",
                sources_home,
                line["id"].as_str().expect("id"),
                "--json",
            ],
        );
        let v: Value = serde_json::from_slice(&explained.stdout).expect("JSON");
        if formats_seen.insert(v["format"].as_str().expect("format").to_string()) {
            sessions.push((sources_home.to_string(), line));
        }
    }
    let mut formats = std::collections::BTreeSet::new();
    for (home, line) in sessions {
        let id = line["id"].as_str().expect("id");
        for session in [
            id.to_string(),
            format!("{home}/{}", line["path"].as_str().expect("path")),
        ] {
            let out = run(&repo(), &["explain", &home, &session, "--json"]);
            assert_eq!(
                out.status.code(),
                Some(0),
                "explain {home} {session}: {out:?}"
            );
            let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
            assert_eq!(v["session_id"], id, "explain {home} {session}");
            formats.insert(v["format"].as_str().expect("format").to_string());
            let record = v["record"].as_str().expect("record");
            let source = line["source"].as_str().expect("source");
            let file = Path::new(source)
                .file_name()
                .expect("a name")
                .to_str()
                .expect("utf-8");
            assert!(
                record.contains(&format!("{file}:{} ", line["line"])),
                "{record} is not {source}:{}",
                line["line"]
            );
        }
    }
    assert_eq!(
        formats.len(),
        8,
        "every format explained from a home: {formats:?}"
    );
}

/// The samples session of `chat-completions.jsonl.zst` line 3, from the home, as recorded.
#[test]
fn explain_out_session_prints_the_same_as_explain_file_line() {
    let wd = Workdir::new("explain_session");
    let home = wd.path("home");
    let home = home.to_str().expect("utf-8");
    let out = run(&repo(), &["convert", "samples", "--out", home, "-q"]);
    assert_eq!(out.status.code(), Some(0));
    let conversations =
        std::fs::read_to_string(Path::new(home).join("rollover/latest/conversations.jsonl"))
            .expect("conversations.jsonl");
    let line: Value = conversations
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("line"))
        .find(|c| c["source"] == "samples/chat-completions.jsonl.zst" && c["line"] == 3)
        .expect("the record's line");
    let from_home = run(
        &repo(),
        &["explain", home, line["id"].as_str().expect("id")],
    );
    assert_eq!(from_home.status.code(), Some(0), "{from_home:?}");
    let expected = include_str!("expected/explain-chat-completions-3.txt");
    // The home knows the file by its full path.
    let full = repo().join("samples/chat-completions.jsonl.zst");
    assert_eq!(
        stdout(&from_home),
        expected.replacen(
            "samples/chat-completions.jsonl.zst",
            full.to_str().expect("utf-8"),
            1
        )
    );
    let unknown = run(
        &repo(),
        &["explain", home, "0190aaaa-0000-7000-8000-000000000000"],
    );
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("no run of"),
        "{unknown:?}"
    );
}

/// A record the reader refuses: no session, the class and reason, exit 1.
#[test]
fn explain_of_a_refused_record_shows_why_and_exits_1() {
    let out = run(
        &corpora(),
        &[
            "explain",
            "sources/claude-code/claude-code-log-synthetic/edge_cases.jsonl:11",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        stdout(&out),
        "sources/claude-code/claude-code-log-synthetic/edge_cases.jsonl:11 (byte 7641) (claude-code): no session\n\
         quarantined (not_a_record): sources/claude-code/claude-code-log-synthetic/edge_cases.jsonl:11 (byte 7641): not a claude-code record: `user` line without a `message` object\n"
    );
}

/// A conversation the converter refuses (a rule says quarantine): its messages as read, then
/// the rule and the message it stopped at, exit 1.
#[test]
fn explain_of_a_conversation_a_rule_quarantines_shows_its_messages_and_the_rule() {
    let wd = Workdir::new("explain_rule");
    wd.create(
        "calls.jsonl",
        r#"{"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{}"}}]},{"role":"assistant","content":"Sunny."}]}"#,
    );
    wd.create("strict.toml", "[policy]\nmissing_output = \"quarantine\"\n");
    let args = [
        "explain",
        "calls.jsonl",
        "--rules",
        "default",
        "--rules",
        "strict.toml",
    ];
    let out = run(wd.root(), &args);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stdout(&out);
    assert!(text.starts_with("calls.jsonl:1 (byte 0) (chat): no session\n[0] user (8 chars)\n[1] assistant (0 chars, 1 tool call)\n[2] assistant (6 chars)\n"), "{text}");
    assert!(
        text.contains("quarantined (rule): ") && text.contains("(rule `policy.missing_output`)"),
        "{text}"
    );
    let json = run(wd.root(), &[&args[..], &["--json"]].concat());
    let v: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(v["refused"]["class"], "rule");
    assert_eq!(v["messages"].as_array().map(Vec::len), Some(3));
}
