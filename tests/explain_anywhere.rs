//! `explain` from any home, any time, and `status` telling what a home holds: a run keeps its
//! rule set, so a session is explained from any folder whatever became of the rule files;
//! after `--keep-runs` removed its run, through the manifest; after its file changed, by its
//! record's identity (said first), or said to be gone; `explain FILE` says what `convert`
//! does with the file (a session file that opens with a summary, a subagent file, a Batch
//! API results file); `status` lists sessions by id, sees a run in progress and the rollouts
//! no finished run recorded.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::{read_jsonl, Run, Workdir};

fn corpora() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora")
}

fn chat(text: &str) -> Value {
    json!({"messages": [
        {"role": "user", "content": text},
        {"role": "assistant", "content": format!("re: {text}")}
    ]})
}

/// `rollover ARGS...` run in `dir`.
fn run_in(wd: &Workdir, dir: &Path, args: &[&str]) -> Run {
    let output = wd
        .command(args)
        .current_dir(dir)
        .output()
        .expect("run rollover");
    Run {
        command: format!("rollover {}", args.join(" ")),
        output,
    }
}

/// The sessions a run listed, by source line: (line, id).
fn written(home: &Path, run: &str) -> Vec<(u64, String)> {
    read_jsonl(
        &home
            .join("rollover/runs")
            .join(run)
            .join("conversations.jsonl"),
    )
    .iter()
    .map(|c| {
        (
            c["line"].as_u64().expect("line"),
            c["id"].as_str().expect("id").to_string(),
        )
    })
    .collect()
}

fn json_of(run: &Run) -> Value {
    serde_json::from_str(&run.stdout()).unwrap_or_else(|e| panic!("{e}\n{run}"))
}

/// `project/mine.toml`, a rule file that changes the sessions' ids (records without a time of
/// their own take the rules' timestamp, and it makes their ids); the project folder and the
/// home `home` beside it.
fn project_with_rules(wd: &Workdir) -> (PathBuf, PathBuf, PathBuf) {
    let mine = wd.create(
        "project/mine.toml",
        "[session]\ntimestamp = \"2024-06-01T00:00:00Z\"\n",
    );
    (mine, wd.path("project"), wd.path("home"))
}

/// A home converted with `--rules default --rules mine.toml` from its project folder: its
/// sessions explain the same from another folder, after mine.toml was edited, and after it
/// was deleted; the rules matter (the built-in ones alone give other sessions).
#[test]
fn explain_reads_a_session_with_the_rules_its_run_kept_from_any_folder() {
    let wd = Workdir::new("explain_kept_rules");
    wd.create_jsonl("project/in/chats.jsonl", &[chat("one"), chat("two")]);
    let (mine, project, home) = project_with_rules(&wd);
    let home_arg = home.to_str().expect("utf-8");
    run_in(
        &wd,
        &project,
        &[
            "convert",
            "in",
            "--out",
            home_arg,
            "--rules",
            "default",
            "--rules",
            "mine.toml",
            "-q",
        ],
    )
    .expect_code(0);
    let kept: Value =
        serde_json::from_slice(&wd.read("home/rollover/runs/0001/rules.json")).expect("rules.json");
    let names: Vec<&str> = kept["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["default", "mine.toml"]);
    assert!(kept["files"][1]["text"]
        .as_str()
        .expect("text")
        .contains("2024-06-01"));
    let sessions = written(&home, "0001");
    assert_eq!(sessions.len(), 2);
    let explain_all = |what: &str| {
        for (line, id) in &sessions {
            let out = wd.run(&["explain", home_arg, id, "--json"]);
            out.expect_code(0);
            let v = json_of(&out);
            assert_eq!(v["session_id"], id.as_str(), "{what}: {out}");
            assert!(
                v.get("note").is_none(),
                "{what}: found where written: {out}"
            );
            assert!(
                v["record"]
                    .as_str()
                    .expect("record")
                    .contains(&format!("chats.jsonl:{line} ")),
                "{what}: {out}"
            );
        }
    };
    explain_all("from another folder");
    std::fs::write(&mine, "[session]\ntimestamp = \"2020-01-01T00:00:00Z\"\n").expect("edit");
    explain_all("mine.toml edited");
    std::fs::remove_file(&mine).expect("delete mine.toml");
    explain_all("mine.toml deleted");
    // The kept rules are what make these sessions: the built-in rules alone do not.
    let other = wd.run(&["explain", home_arg, &sessions[0].1, "--rules", "default"]);
    other.expect_code(2);
    assert!(other.stderr().contains("is gone from"), "{other}");
}

/// `--keep-runs 1` removed the run that wrote a session: the manifest names its file, the
/// state folder's copy of the rules reads it (the rule file deleted), and the first line says
/// how it was found.
#[test]
fn explain_finds_a_session_through_the_manifest_once_its_run_is_removed() {
    let wd = Workdir::new("explain_keep_runs");
    wd.create_jsonl("project/a/chats.jsonl", &[chat("from a")]);
    wd.create_jsonl("project/b/chats.jsonl", &[chat("from b")]);
    let (mine, project, home) = project_with_rules(&wd);
    let home_arg = home.to_str().expect("utf-8");
    let rules = ["--rules", "default", "--rules", "mine.toml", "-q"];
    let convert = |inputs: &[&str], extra: &[&str]| {
        let mut args = vec!["convert"];
        args.extend_from_slice(inputs);
        args.extend_from_slice(&["--out", home_arg]);
        args.extend_from_slice(&rules);
        args.extend_from_slice(extra);
        run_in(&wd, &project, &args).expect_code(0);
    };
    convert(&["a"], &[]);
    let (_, id) = written(&home, "0001").remove(0);
    // The second run reads `a` unchanged (no line of it in its report) and removes run 1.
    convert(&["a", "b"], &["--keep-runs", "1"]);
    assert!(!home.join("rollover/runs/0001").exists());
    assert!(written(&home, "0002").iter().all(|(_, s)| *s != id));
    std::fs::remove_file(&mine).expect("delete mine.toml");
    let out = wd.run(&["explain", home_arg, &id]);
    out.expect_code(0);
    let text = out.stdout();
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains(&format!("session {id}")) && first.contains("manifest"),
        "{out}"
    );
    assert!(
        text.lines()
            .nth(1)
            .unwrap_or_default()
            .contains(&format!("session {id}")),
        "{out}"
    );
}

/// The file changed since the run: the session's record is found by its identity where it
/// now is, and the first line says so; once the record is gone, explain says that plainly.
#[test]
fn explain_finds_a_changed_files_record_by_its_identity_or_says_it_is_gone() {
    let wd = Workdir::new("explain_identity");
    wd.create_jsonl("in/chats.jsonl", &[chat("one"), chat("two"), chat("three")]);
    let home = wd.convert("in", "home", &["-q"], 0);
    let home_arg = home.root.to_str().expect("utf-8");
    let (line, id) = written(&home.root, "0001")
        .into_iter()
        .find(|(line, _)| *line == 2)
        .expect("line 2");
    // Two new records before it: `two` is on line 4 now, and line 2 holds another.
    wd.create_jsonl(
        "in/chats.jsonl",
        &[
            chat("new"),
            chat("newer"),
            chat("one"),
            chat("two"),
            chat("three"),
        ],
    );
    let out = wd.run(&["explain", home_arg, &id, "--json"]);
    out.expect_code(0);
    let v = json_of(&out);
    assert_eq!(v["session_id"], id.as_str());
    assert!(
        v["record"]
            .as_str()
            .expect("record")
            .contains("chats.jsonl:4 "),
        "{out}"
    );
    let text = wd.run(&["explain", home_arg, &id]).stdout();
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains("changed since run 1")
            && first.contains("found by its identity")
            && first.contains("chats.jsonl:4 ")
            && first.contains(&format!("was line {line}")),
        "{text}"
    );
    assert!(!text.contains("note:"), "no note at the end: {text}");
    wd.create_jsonl("in/chats.jsonl", &[chat("one"), chat("three")]);
    let gone = wd.run(&["explain", home_arg, &id]);
    gone.expect_code(2);
    assert!(
        gone.stderr()
            .contains(&format!("the record of session {id} is gone from")),
        "{gone}"
    );
    assert!(
        gone.stdout().is_empty(),
        "no other conversation explained: {gone}"
    );
}

/// The session `convert FILE` writes, and how it counts the file's records.
fn converted(wd: &Workdir, input: &Path, extra: &[&str]) -> (Vec<String>, Value) {
    let home = wd.path(&format!("home-{}", extra.len() + input.as_os_str().len()));
    let mut args = vec![
        "convert",
        input.to_str().expect("utf-8"),
        "--out",
        home.to_str().expect("utf-8"),
        "-q",
    ];
    args.extend_from_slice(extra);
    let run = wd.run(&args);
    assert!(matches!(run.code(), Some(0 | 1)), "{run}");
    let ids = written(&home, "0001")
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    let summary: Value = serde_json::from_slice(
        &std::fs::read(home.join("rollover/runs/0001/summary.json")).expect("summary"),
    )
    .expect("summary JSON");
    (ids, summary)
}

/// `explain FILE` says what convert does with the file: a Claude Code session whose first
/// line is a summary is that session; a subagent file is dropped by `policy.sidechain` (not
/// quarantined), or is a session when the policy keeps it; a Batch API results file is
/// explained through its request, or names the file to explain instead.
#[test]
fn explain_file_says_what_convert_does_with_it() {
    let wd = Workdir::new("explain_file");
    let claude = corpora().join("sources/claude-code");
    // A summary line first.
    let summary_first = claude.join("simonw-synthetic/sample_session.jsonl");
    let first_line = std::fs::read_to_string(&summary_first).expect("read");
    assert!(first_line.starts_with(r#"{"type":"summary""#));
    let (ids, _) = converted(&wd, &summary_first, &[]);
    let out = wd.run(&["explain", summary_first.to_str().expect("utf-8"), "--json"]);
    out.expect_code(0);
    assert_eq!(json_of(&out)["session_id"], ids[0].as_str(), "{out}");
    // A subagent's file: dropped by the policy, as convert counts it.
    let subagent = claude.join("claude-code-viewer-v1.0/agent-test-hash-123.jsonl");
    let (ids, summary) = converted(&wd, &subagent, &[]);
    assert!(ids.is_empty());
    assert!(
        summary["records_dropped"]["policy.sidechain"].as_u64() > Some(0),
        "{summary}"
    );
    let out = wd.run(&["explain", subagent.to_str().expect("utf-8")]);
    out.expect_code(0);
    let text = out.stdout();
    assert!(
        text.contains("dropped: ")
            && text.contains("policy.sidechain")
            && !text.contains("quarantined"),
        "{out}"
    );
    // ... or a session of its own when the policy keeps subagents.
    let keep = wd.create("side.toml", "[policy]\nsidechain = \"rollout\"\n");
    let keep = keep.to_str().expect("utf-8");
    let (ids, _) = converted(&wd, &subagent, &["--rules", "default", "--rules", keep]);
    assert_eq!(ids.len(), 1);
    let out = wd.run(&[
        "explain",
        subagent.to_str().expect("utf-8"),
        "--rules",
        "default",
        "--rules",
        keep,
        "--json",
    ]);
    out.expect_code(0);
    assert_eq!(json_of(&out)["session_id"], ids[0].as_str(), "{out}");
    // A Batch API results file, its requests beside it.
    let anthropic = corpora().join("sources/anthropic-messages-api");
    for name in [
        "batch_requests.constructed.jsonl",
        "batch_results.constructed.jsonl",
    ] {
        wd.create(
            &format!("batch/{name}"),
            std::fs::read(anthropic.join(name)).expect("read"),
        );
    }
    let (ids, _) = converted(&wd, &wd.path("batch"), &[]);
    let results = wd.path("batch/batch_results.constructed.jsonl");
    let out = wd.run(&["explain", results.to_str().expect("utf-8")]);
    out.expect_code(0);
    let text = out.stdout();
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.contains("is a Batch API result")
            && first.contains("batch_requests.constructed.jsonl:1"),
        "{out}"
    );
    assert!(!text.contains("no messages"), "{out}");
    let json = json_of(&wd.run(&["explain", results.to_str().expect("utf-8"), "--json"]));
    assert!(
        ids.contains(&json["session_id"].as_str().expect("id").to_string()),
        "{json}"
    );
    // Alone, it names the file to explain instead.
    wd.create(
        "alone/batch_results.constructed.jsonl",
        std::fs::read(anthropic.join("batch_results.constructed.jsonl")).expect("read"),
    );
    let alone = wd.path("alone/batch_results.constructed.jsonl");
    let out = wd.run(&["explain", alone.to_str().expect("utf-8")]);
    out.expect_code(2);
    assert!(
        out.stderr().contains("explain the requests file instead"),
        "{out}"
    );
}

/// `status --sessions` lists the sessions by the ids `explain` takes, with their file.
#[test]
fn status_lists_the_sessions_by_the_ids_explain_takes() {
    let wd = Workdir::new("status_sessions");
    wd.create_jsonl("in/chats.jsonl", &[chat("one"), chat("two")]);
    let home = wd.convert("in", "home", &["-q"], 0);
    let home_arg = home.root.to_str().expect("utf-8");
    let out = wd.run(&["status", home_arg, "--sessions", "--json"]);
    out.expect_code(0);
    let listed: Vec<String> = json_of(&out)["session_list"]
        .as_array()
        .expect("session_list")
        .iter()
        .map(|s| s["id"].as_str().expect("id").to_string())
        .collect();
    let mut ids: Vec<String> = written(&home.root, "0001")
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    let mut sorted = listed.clone();
    sorted.sort();
    ids.sort();
    assert_eq!(sorted, ids);
    let text = wd.run(&["status", home_arg, "--sessions"]).stdout();
    for id in &listed {
        assert!(
            text.contains(id.as_str()) && text.contains("chats.jsonl"),
            "{text}"
        );
        wd.run(&["explain", home_arg, id]).expect_code(0);
    }
    // Without the flag, no list.
    let plain = wd.run(&["status", home_arg, "--json"]);
    assert!(json_of(&plain).get("session_list").is_none(), "{plain}");
}

/// A run holding the lock is seen (its pid), and status does not take the lock; once it is
/// let go, no run is said to be in progress.
#[test]
fn status_says_a_run_is_in_progress_while_one_holds_the_lock() {
    let wd = Workdir::new("status_running");
    wd.create_jsonl("in/chats.jsonl", &[chat("one")]);
    let home = wd.convert("in", "home", &["-q"], 0);
    let home_arg = home.root.to_str().expect("utf-8");
    // Hold the lock as a run does: a flock on the state folder, the pid in its lock file.
    let folder = std::fs::File::open(home.root.join("rollover")).expect("open the state folder");
    folder.lock().expect("lock");
    let pid = std::process::id();
    std::fs::write(home.root.join("rollover/lock"), format!("{pid}\n")).expect("pid");
    let out = wd.run(&["status", home_arg]);
    out.expect_code(0);
    assert!(
        out.stdout()
            .contains(&format!("a run is in progress (pid {pid})")),
        "{out}"
    );
    let json = json_of(&wd.run(&["status", home_arg, "--json"]));
    assert_eq!(json["running_pid"], pid);
    // status took no lock: a run still finds it held by the holder.
    let refused = wd.run(&["convert", "in", "--out", home_arg, "-q"]);
    refused.expect_code(3);
    folder.unlock().expect("unlock");
    std::fs::write(home.root.join("rollover/lock"), "").expect("empty");
    let out = wd.run(&["status", home_arg, "--json"]);
    assert!(json_of(&out)["running_pid"].is_null(), "{out}");
}

/// A first run killed before it recorded anything left rollouts: status counts them and says
/// what to do; the next run records them.
#[test]
fn status_counts_the_rollouts_a_killed_run_left_unrecorded() {
    let wd = Workdir::new("status_unrecorded");
    let chats: Vec<Value> = (0..6).map(|i| chat(&format!("chat {i}"))).collect();
    wd.create_jsonl("in/chats.jsonl", &chats);
    let home = wd.path("home");
    let home_arg = home.to_str().expect("utf-8");
    let killed = wd
        .command(&["convert", "in", "--out", home_arg, "-q"])
        .env("ROLLOVER_FAILPOINT", "die-after:2")
        .output()
        .expect("run");
    assert_eq!(killed.status.code(), None, "killed by SIGKILL: {killed:?}");
    let on_disk = crate::common::files_below(&home, &home.join("sessions")).len();
    assert_eq!(on_disk, 2, "the rollouts placed before the kill");
    let out = wd.run(&["status", home_arg, "--json"]);
    assert_eq!(json_of(&out)["rollouts_unrecorded"], on_disk, "{out}");
    // As one line: the terminal's width wraps it.
    let text = wd.run(&["status", home_arg]).stdout();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains("2 rollouts under sessions/ that no finished run recorded")
            && text.contains("convert the same inputs again"),
        "{text}"
    );
    wd.run(&["convert", "in", "--out", home_arg, "-q"])
        .expect_code(0);
    let out = wd.run(&["status", home_arg, "--json"]);
    assert_eq!(json_of(&out)["rollouts_unrecorded"], 0, "{out}");
}
