//! What `convert` reads and what it leaves out (issue 9, part A): standard input and other
//! streams, nothing to do, Codex homes inside an input, the walk (hidden files, symlinks,
//! loops, unreadable paths), the same content converted from two roots, `--out` a file,
//! messages found by shape, `--cwd`; and (outside.rs, issue 26) that the files records point
//! to are read only inside the inputs.

// Hostile archives (issue 26): bounded memory, signals in every long loop, and reads that
// stay inside the input tree.
mod hostile;
// Round two (issue 57): chains, the memory budget, the last unbounded paths.
mod hostile_two;
mod outside;

use std::io::Write;
use std::process::Stdio;

use crate::common::{Home, Run, Workdir};
use serde_json::{json, Value};

fn record(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]})
}

fn jsonl(records: &[Value]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for r in records {
        serde_json::to_writer(&mut bytes, r).unwrap();
        bytes.push(b'\n');
    }
    bytes
}

/// `rollover ARGS...` with `input` on standard input.
fn run_with_stdin(wd: &Workdir, args: &[&str], input: &[u8]) -> Run {
    let mut cmd = wd.command(args);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run rollover");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write stdin");
    drop(stdin);
    Run {
        command: format!("rollover {}", args.join(" ")),
        output: child.wait_with_output().expect("wait for rollover"),
    }
}

fn home(wd: &Workdir, name: &str, run: Run) -> Home {
    Home {
        root: wd.path(name),
        run,
    }
}

/// Each line of `expected` is a whole line of `text`.
fn assert_lines(text: &str, expected: &[&str]) {
    // The summary wraps a long value onto lines indented under it: read those as one line.
    let mut logical: Vec<String> = Vec::new();
    for l in text.lines() {
        match logical.last_mut() {
            Some(last) if l.starts_with("               ") && l.trim_start() != l => {
                last.push(' ');
                last.push_str(l.trim_start());
            }
            _ => logical.push(l.to_string()),
        }
    }
    for line in expected {
        assert!(
            logical.iter().any(|l| l == *line),
            "missing line {line:?} in:\n{text}"
        );
    }
}

#[test]
fn stdin_plain_is_keyed_by_stdin_name() {
    let wd = Workdir::new("stdin_plain");
    let bytes = jsonl(&[record("one"), record("two")]);
    let run = run_with_stdin(&wd, &["convert", "-", "--out", "home"], &bytes);
    run.expect_code(0);
    let home = home(&wd, "home", run);
    assert_eq!(home.rollouts().len(), 2);
    assert_eq!(home.conversations()[0]["source"], "stdin");
    // The key is the name, not the temporary copy; the ids are the conversations': the same
    // bytes give the same ids under any --stdin-name.
    let run = run_with_stdin(
        &wd,
        &["convert", "-", "--out", "again", "--stdin-name", "stdin"],
        &bytes,
    );
    run.expect_code(0);
    let again = self::home(&wd, "again", run);
    assert_eq!(again.conversations(), home.conversations());
    let run = run_with_stdin(
        &wd,
        &[
            "convert",
            "-",
            "--out",
            "named",
            "--stdin-name",
            "day1.jsonl",
        ],
        &bytes,
    );
    run.expect_code(0);
    let named = self::home(&wd, "named", run);
    assert_eq!(named.conversations()[0]["source"], "day1.jsonl");
    assert_eq!(
        named.conversations()[0]["id"],
        home.conversations()[0]["id"]
    );
    let manifest = String::from_utf8(wd.read("named/rollover/manifest")).unwrap();
    assert!(
        manifest.contains(r#""key":"stdin:day1.jsonl","name":"day1.jsonl""#),
        "{manifest}"
    );
}

#[test]
fn stdin_zstd_is_detected_by_magic_bytes() {
    let wd = Workdir::new("stdin_zstd");
    let plain = jsonl(&[record("compressed")]);
    let packed = zstd::encode_all(&plain[..], 3).unwrap();
    let run = run_with_stdin(&wd, &["convert", "-", "--out", "home"], &packed);
    run.expect_code(0);
    let home = home(&wd, "home", run);
    assert_eq!(home.summary()["converted"], 1);
    assert_eq!(home.summary()["quarantined"], 0);
}

#[test]
fn a_named_fifo_is_read_as_a_file() {
    let wd = Workdir::new("fifo");
    let fifo = wd.path("pipe.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    let bytes = jsonl(&[record("through a fifo")]);
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&fifo)
            .expect("open fifo for writing");
        f.write_all(&bytes).expect("write fifo");
    });
    // Before: "0 input files", exit 0.
    let home = wd.convert("pipe.jsonl", "home", &[], 0);
    writer.join().expect("fifo writer");
    assert_eq!(home.summary()["converted"], 1);
    assert_eq!(home.conversations()[0]["source"], "pipe.jsonl");
}

#[test]
fn an_empty_folder_is_an_error_and_nothing_is_written() {
    let wd = Workdir::new("empty_folder");
    std::fs::create_dir(wd.path("empty")).unwrap();
    let run = wd.run(&["convert", "empty", "--out", "home"]);
    run.expect_code(2);
    assert_lines(
        &run.stderr(),
        &["rollover: converting into home: no input file to convert: no file in empty"],
    );
    assert!(!wd.path("home").exists());
}

#[test]
fn a_folder_of_other_extensions_says_what_it_skipped() {
    let wd = Workdir::new("other_extensions");
    for i in 0..8 {
        wd.create(&format!("in/notes{i}.txt"), "x");
    }
    for i in 0..4 {
        wd.create(&format!("in/table{i}.csv"), "x");
    }
    let run = wd.run(&["convert", "in", "--out", "home"]);
    run.expect_code(2);
    assert_eq!(
        run.stderr(),
        "rollover: converting into home: no input file to convert: skipped 12 files with other extensions: .txt 8, .csv 4\n"
    );
    assert!(!wd.path("home").exists());

    // With a record file beside them, the run goes on and the summary counts the skips.
    wd.create("in/real.jsonl", jsonl(&[record("hi")]));
    let home = wd.convert("in", "home", &[], 0);
    assert_lines(
        &home.run.stderr(),
        &["rollover: skipped 12 files with other extensions: .txt 8, .csv 4"],
    );
    assert_eq!(
        home.summary()["skipped_other_extensions"],
        json!({".csv": 4, ".txt": 8})
    );
}

#[test]
fn converting_an_archive_into_itself_is_an_error() {
    let wd = Workdir::new("into_itself");
    wd.create("archive/a.jsonl", jsonl(&[record("hi")]));
    let mut cmd = wd.command(&["convert", ".", "--out", "."]);
    cmd.current_dir(wd.path("archive"));
    let output = cmd.output().unwrap();
    let run = Run {
        command: "rollover convert . --out . (in archive/)".into(),
        output,
    };
    run.expect_code(2);
    assert_eq!(
        run.stderr(),
        "rollover: converting into .: no input file to convert: skipped .: it is the output folder (--out)\n"
    );
    // No report written into the archive.
    assert!(!wd.path("archive/rollover").exists());
    assert!(!wd.path("archive/sessions").exists());
}

#[test]
fn a_rerun_with_every_file_unchanged_is_not_nothing_to_do() {
    let wd = Workdir::new("rerun_unchanged");
    wd.create("in/a.jsonl", jsonl(&[record("hi")]));
    wd.convert("in", "home", &[], 0);
    let again = wd.convert("in", "home", &[], 0);
    assert_eq!(again.summary()["files_unchanged"], 1);
}

#[test]
fn codex_homes_inside_the_input_are_skipped() {
    let wd = Workdir::new("codex_home_inside");
    wd.create("in/a.jsonl", jsonl(&[record("hi")]));
    // An earlier rollover output, and a home Codex wrote (sessions/ with rollout-* files).
    wd.convert("in/a.jsonl", "in/old-home", &[], 0);
    wd.create(
        "in/codex/sessions/2025/01/01/rollout-2025-01-01T00-00-00-x.jsonl",
        "{\"timestamp\":\"2025-01-01T00:00:00.000Z\",\"type\":\"session_meta\",\"payload\":{\"id\":\"x\"}}\n",
    );
    // A home whose only sessions are archived and compressed is one too.
    let meta = b"{\"timestamp\":\"2025-01-01T00:00:00.000Z\",\"type\":\"session_meta\",\"payload\":{\"id\":\"y\"}}\n";
    wd.create(
        "in/packed/archived_sessions/rollout-2025-01-01T00-00-00-y.jsonl.zst",
        zstd::encode_all(&meta[..], 3).expect("zstd"),
    );
    // A folder skipped is a finding: someone must look at what was not read.
    let home = wd.convert("in", "home", &[], 1);
    assert_lines(
        &home.run.stderr(),
        &[
            "rollover: skipped in/codex: it is a Codex home (rollouts, not transcripts)",
            "rollover: skipped in/old-home: it is a Codex home (rollouts, not transcripts)",
            "rollover: skipped in/packed: it is a Codex home (rollouts, not transcripts)",
        ],
    );
    let summary = home.summary();
    assert_eq!(summary["files"], 1);
    assert_eq!(summary["quarantined"], 0);
    assert_eq!(
        summary["skipped_codex_homes"],
        json!(["in/codex", "in/old-home", "in/packed"])
    );
}

#[test]
fn hidden_files_and_folders_are_skipped_unless_hidden() {
    let wd = Workdir::new("hidden");
    wd.create("in/a.jsonl", jsonl(&[record("a")]));
    wd.create("in/.b.jsonl", jsonl(&[record("b")]));
    wd.create("in/.git/c.jsonl", jsonl(&[record("c")]));
    let home = wd.convert("in", "home", &[], 0);
    assert_lines(
        &home.run.stderr(),
        &["rollover: skipped 2 hidden files and folders (--hidden reads them)"],
    );
    assert_eq!(home.summary()["files"], 1);
    assert_eq!(home.summary()["skipped_hidden"], 2);
    let home = wd.convert("in", "home2", &["--hidden"], 0);
    assert_eq!(home.summary()["files"], 3);
    assert_eq!(home.summary()["skipped_hidden"], 0);
}

#[test]
fn symlinks_are_followed_only_with_follow() {
    let wd = Workdir::new("symlinks");
    wd.create("elsewhere/b.jsonl", jsonl(&[record("b")]));
    wd.create("in/a.jsonl", jsonl(&[record("a")]));
    std::os::unix::fs::symlink("../elsewhere", wd.path("in/linked")).unwrap();
    std::os::unix::fs::symlink("../elsewhere/b.jsonl", wd.path("in/c.jsonl")).unwrap();
    let home = wd.convert("in", "home", &[], 0);
    assert_lines(
        &home.run.stderr(),
        &["rollover: skipped 2 symlinks (--follow follows them)"],
    );
    assert_eq!(home.summary()["files"], 1);
    assert_eq!(home.summary()["skipped_symlinks"], 2);
    let home = wd.convert("in", "home2", &["--follow"], 0);
    assert_eq!(home.summary()["files"], 3);
    let sources: Vec<Value> = home
        .conversations()
        .iter()
        .map(|c| c["source"].clone())
        .collect();
    assert_eq!(
        sources,
        json!(["in/a.jsonl", "in/c.jsonl", "in/linked/b.jsonl"])
            .as_array()
            .unwrap()
            .clone()
    );
}

#[test]
fn a_symlink_loop_is_reported_and_skipped() {
    let wd = Workdir::new("symlink_loop");
    wd.create("in/sub/a.jsonl", jsonl(&[record("a")]));
    std::os::unix::fs::symlink("..", wd.path("in/sub/loop")).unwrap();
    // Before: "File system loop found", exit 2, nothing converted.
    let home = wd.convert("in", "home", &["--follow"], 1);
    let target = std::fs::canonicalize(wd.path("in")).unwrap();
    assert_lines(
        &home.run.stderr(),
        &[&format!(
            "rollover: symlink loop at in/sub/loop (leads back to {}): skipped",
            target.display()
        )],
    );
    let summary = home.summary();
    assert_eq!(summary["converted"], 1);
    assert_eq!(
        summary["symlink_loops"],
        json!([format!("in/sub/loop (leads back to {})", target.display())])
    );
}

/// Tests run as root, where `chmod 000` stops no read. What really fails for root:
/// `/proc/self/mem` opens but its first read fails (EIO: address 0 is not mapped), so a
/// symlink to it is an unreadable *file*; a dangling symlink is an unreadable entry. With
/// `--follow` both are reported with their path and counted; the run goes on, exit 1. A dry
/// run reports them the same, though it reads only the first bytes of a file the home does
/// not know before its reader reads it whole (it records no digest).
#[test]
fn unreadable_files_are_reported_and_the_run_goes_on() {
    let wd = Workdir::new("unreadable");
    wd.create("in/a.jsonl", jsonl(&[record("a")]));
    std::os::unix::fs::symlink("/proc/self/mem", wd.path("in/mem.jsonl")).unwrap();
    std::os::unix::fs::symlink("gone", wd.path("in/dangling.jsonl")).unwrap();
    for (home, extra) in [
        ("home", &["--follow"][..]),
        ("dry", &["--follow", "--dry-run"]),
    ] {
        let home = wd.convert("in", home, extra, 1);
        assert_lines(
            &home.run.stderr(),
            &[
                "rollover: cannot read in/dangling.jsonl: No such file or directory (os error 2); skipped",
                "rollover: cannot read in/mem.jsonl: Input/output error (os error 5); skipped",
            ],
        );
        let summary = home.summary();
        assert_eq!(summary["converted"], 1, "{extra:?}");
        assert_eq!(
            summary["unreadable"],
            json!([
                {"path": "in/dangling.jsonl", "message": "No such file or directory (os error 2)"},
                {"path": "in/mem.jsonl", "message": "Input/output error (os error 5)"}
            ]),
            "{extra:?}"
        );
    }
}

/// An unreadable folder: for root, `chmod 000` is no obstacle, so the folder is a symlink to
/// one root cannot list either when the kernel says so (`/proc/1/map_files` in a container
/// without CAP_SYS_ADMIN); elsewhere, a `chmod 000` folder. The test checks first that the
/// folder really cannot be listed.
#[test]
fn an_unreadable_folder_is_reported_and_the_run_goes_on() {
    use std::os::unix::fs::PermissionsExt;
    let wd = Workdir::new("unreadable_folder");
    wd.create("in/a.jsonl", jsonl(&[record("a")]));
    wd.create("in/locked/b.jsonl", jsonl(&[record("b")]));
    let locked = wd.path("in/locked");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let listable = |dir: &std::path::Path| {
        std::fs::read_dir(dir).is_ok_and(|entries| entries.into_iter().all(|e| e.is_ok()))
    };
    if listable(&locked) {
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_dir_all(&locked).unwrap();
        std::os::unix::fs::symlink("/proc/1/map_files", &locked).unwrap();
        assert!(
            !listable(&locked),
            "no folder here that this user cannot read: cannot test an unreadable folder"
        );
    }
    let home = wd.convert("in", "home", &["--follow"], 1);
    assert_lines(
        &home.run.stderr(),
        &["rollover: cannot read in/locked: Permission denied (os error 13); skipped"],
    );
    assert_eq!(home.summary()["converted"], 1);
    assert_eq!(home.summary()["unreadable"][0]["path"], "in/locked");
    let _ = std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755));
}

#[test]
fn the_same_files_from_another_root_are_the_same_files_and_sessions() {
    let wd = Workdir::new("two_roots");
    wd.create("samples/a.jsonl", jsonl(&[record("a")]));
    wd.create("samples/b.jsonl", jsonl(&[record("b")]));
    let first = wd.convert("samples", "H", &[], 0);
    assert_eq!(first.rollouts().len(), 2);
    // `cd samples && convert . --out ../H`: other keys (`./a.jsonl`), the same files (the
    // manifest knows them by their absolute path), so nothing to do and no duplicate.
    let mut cmd = wd.command(&["convert", ".", "--out", "../H"]);
    cmd.current_dir(wd.path("samples"));
    let run = Run {
        command: "rollover convert . --out ../H (in samples/)".into(),
        output: cmd.output().unwrap(),
    };
    run.expect_code(0);
    let home = home(&wd, "H", run);
    assert_eq!(home.summary()["files_unchanged"], 2);
    assert_eq!(home.rollouts().len(), 2);
    // A copy of the folder elsewhere: new files, the same conversations, the same sessions.
    wd.create("copy/a.jsonl", jsonl(&[record("a")]));
    wd.create("copy/b.jsonl", jsonl(&[record("b")]));
    let copy = wd.convert("copy", "H", &[], 0);
    assert_eq!(copy.summary()["rollouts_unchanged"], 2);
    assert_eq!(copy.summary()["sessions_new"], 0);
    assert_eq!(copy.rollouts().len(), 2);
}

#[test]
fn out_pointing_to_a_file_is_an_error() {
    let wd = Workdir::new("out_file");
    wd.create("in.jsonl", jsonl(&[record("a")]));
    wd.create("x", "not a folder");
    let run = wd.run(&["convert", "in.jsonl", "--out", "x"]);
    run.expect_code(2);
    assert_eq!(
        run.stderr(),
        "rollover: --out must be a folder: x is a file\n"
    );
}

#[test]
fn messages_are_found_by_shape() {
    let wd = Workdir::new("by_shape");
    let tau = |reply: &str| {
        json!({"traj": [
            {"role": "user", "content": "book a flight"},
            {"role": "assistant", "content": reply}
        ], "reward": 1})
    };
    wd.create_jsonl("tau.jsonl", &[tau("done"), tau("booked")]);
    let home = wd.convert("tau.jsonl", "home", &[], 0);
    assert_lines(
        &home.run.stdout(),
        &["  guessed      messages found at `traj` by shape in 2 records: pass `--messages-at traj` to make it explicit"],
    );
    let summary = home.summary();
    assert_eq!(summary["messages_by_shape"], json!({"traj": 2}));
    assert_eq!(summary["rules_fired"]["builtin.messages-by-shape"], 2);
    let decisions = home.conversations()[0]["decisions"].clone();
    assert_eq!(
        decisions[0],
        json!({"rule": "builtin.messages-by-shape", "action": "messages_found_by_shape", "path": "traj"})
    );

    // One level down.
    wd.create_jsonl(
        "nested.jsonl",
        &[json!({"run": {"steps": [{"role": "user", "content": "hi"}]}})],
    );
    let home = wd.convert("nested.jsonl", "home2", &[], 0);
    assert_eq!(home.summary()["messages_by_shape"], json!({"run.steps": 1}));

    // Two fields qualify: quarantined, both named.
    wd.create_jsonl(
        "two.jsonl",
        &[json!({"a": [{"role": "user", "content": "x"}], "b": {"c": [{"role": "user", "content": "y"}]}})],
    );
    let home = wd.convert("two.jsonl", "home3", &[], 1);
    let quarantine = home.quarantine();
    assert_eq!(quarantine[0]["class"], "ambiguous_messages");
    assert_eq!(
        quarantine[0]["reason"],
        "two.jsonl:1 (byte 0): two fields hold a list of messages, `a` and `b.c`: name the right one with --messages-at"
    );

    // --no-guess turns the search off.
    let home = wd.convert("tau.jsonl", "home4", &["--no-guess"], 1);
    assert_eq!(home.quarantine()[0]["class"], "no_messages");
}

#[test]
fn cwd_overrides_the_session_cwd() {
    let wd = Workdir::new("cwd");
    wd.create("in.jsonl", jsonl(&[record("a")]));
    let home = wd.convert("in.jsonl", "home", &["--cwd", "/srv/project"], 0);
    assert_eq!(home.single_rollout().meta()["cwd"], "/srv/project");
    // A relative folder is made absolute: Codex compares it with the folder it runs in.
    let home = wd.convert("in.jsonl", "home2", &["--cwd", "sub"], 0);
    let expected = wd.root().join("sub").display().to_string();
    assert_eq!(home.single_rollout().meta()["cwd"], expected.as_str());
}

#[test]
fn a_record_over_max_record_bytes_is_quarantined_unread() {
    let wd = Workdir::new("max_record_bytes");
    let big = record(&"x".repeat(5000));
    wd.create_jsonl("big.jsonl", &[record("small"), big, record("after")]);
    let home = wd.convert("big.jsonl", "home", &["--max-record-bytes", "2KiB"], 1);
    let summary = home.summary();
    assert_eq!(summary["records"], 3);
    assert_eq!(home.rollouts().len(), 2, "the records around it convert");
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1);
    assert_eq!(quarantine[0]["class"], "too_large");
    assert_eq!(quarantine[0]["line"], 2);
    let reason = quarantine[0]["reason"].as_str().unwrap();
    assert!(reason.contains("more than --max-record-bytes"), "{reason}");
    // Only its first bytes are kept: the record was never loaded whole.
    let kept = quarantine[0]["record"].as_str().unwrap();
    assert_eq!(kept.len(), 1024);
    assert!(kept.starts_with("{\"messages\""), "{kept}");

    // A multi-line JSON document over the limit is one such record, its file skipped.
    let doc = serde_json::to_string_pretty(&json!([record(&"y".repeat(3000))])).unwrap();
    wd.create("doc.json", doc);
    let home = wd.convert("doc.json", "home2", &["--max-record-bytes", "2KiB"], 1);
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1);
    assert_eq!(quarantine[0]["class"], "too_large");
    assert_eq!(home.summary()["records"], 1);

    // Under the default limit the same file converts whole.
    let home = wd.convert("big.jsonl", "home3", &[], 0);
    assert_eq!(home.rollouts().len(), 3);
}

/// The Batch API scan, which reads every file's first record and every results file before
/// the run, reads them as the run reads any file: up to `--max-record-bytes` a record. A
/// result line past it is quarantined `too_large` and joins no request; before, the scan
/// read it whole at the default limit (a 100 MiB first line under a 1 MiB limit: 500 MB).
#[test]
fn a_batch_result_over_max_record_bytes_is_quarantined_not_joined() {
    let wd = Workdir::new("max_record_bytes_batch");
    let request = |id: &str| {
        json!({"custom_id": id, "method": "POST", "url": "/v1/chat/completions",
               "body": {"model": "gpt-4o-mini",
                        "messages": [{"role": "user", "content": format!("Question {id}?")}]}})
    };
    let result = |id: &str, n: u64, answer: &str| {
        json!({"id": format!("batch_req_{n}"), "custom_id": id,
               "response": {"status_code": 200, "request_id": format!("req_{n}"), "body": {
                   "id": format!("chatcmpl-{n}"), "object": "chat.completion",
                   "created": 1727784100 + n, "model": "gpt-4o-mini",
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": answer}}]}},
               "error": null})
    };
    wd.create_jsonl("batches/requests.jsonl", &[request("a"), request("b")]);
    let long = "a long answer ".repeat(400);
    wd.create_jsonl(
        "batches/results.jsonl",
        &[result("a", 1, "a short answer"), result("b", 2, &long)],
    );
    let texts = |home: &Home| -> String {
        home.all_rollouts()
            .iter()
            .map(|r| serde_json::to_string(&r.items()).unwrap())
            .collect()
    };

    let home = wd.convert("batches", "home", &["--max-record-bytes", "2KiB"], 1);
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1, "{quarantine:?}");
    assert_eq!(quarantine[0]["class"], "too_large");
    assert_eq!(quarantine[0]["line"], 2);
    let source = quarantine[0]["source"].as_str().unwrap();
    assert!(source.ends_with("results.jsonl"), "{source}");
    let joined = texts(&home);
    assert!(joined.contains("a short answer"), "{joined}");
    assert!(!joined.contains("a long answer"), "{joined}");

    // Under the default limit the result joins its request.
    let home = wd.convert("batches", "home2", &[], 0);
    assert!(home.quarantine().is_empty());
    assert!(texts(&home).contains("a long answer"));
}

/// Issue 26, item 7: the copy of standard input is an unnamed file, so a run killed with
/// SIGKILL while it reads its input leaves nothing of the transcripts in `$TMPDIR`.
#[test]
fn a_killed_stdin_run_leaves_no_copy_of_the_transcripts_in_tmpdir() {
    let wd = Workdir::new("stdin_spool");
    std::fs::create_dir_all(wd.path("tmp")).expect("tmp");
    let mut child = wd
        .command(&["convert", "-", "--out", "home"])
        .env("TMPDIR", wd.path("tmp"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(&jsonl(&[record("private"), record("more private")]))
        .expect("feed");
    stdin.flush().expect("flush");
    // The spool is open (its descriptor names a file below TMPDIR) while the run waits for
    // the rest of its input: kill it there.
    let tmp = wd.path("tmp").canonicalize().expect("tmp");
    let fds = std::path::PathBuf::from(format!("/proc/{}/fd", child.id()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let spooling = loop {
        let open = std::fs::read_dir(&fds)
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.starts_with(&tmp)));
        if open || std::time::Instant::now() > deadline {
            break open;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(spooling, "the run never opened its copy of standard input");
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    drop(stdin);
    let left: Vec<_> = std::fs::read_dir(wd.path("tmp"))
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}
