//! The home's state, trustworthy under damage and attack (issue 56, items 4, 6, 8, 9): a
//! session another process holds open is never replaced; what a killed run quarantined stays in
//! the reports; a corrupt manifest is refused, never guessed; no state file is reached through a
//! symlink at any component; the journal, the lock, the run folders and the file fingerprints
//! hold against what a kill, a user or a planted file does to them.

use std::fs;
use std::io::{BufRead, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::common::Workdir;

fn record(n: usize) -> Value {
    json!({"messages": [
        {"role": "user", "content": format!("question {n}")},
        {"role": "assistant", "content": format!("answer {n}")},
    ]})
}

fn sessions(home: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = walkdir::WalkDir::new(home.join("sessions"))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    found.sort();
    found
}

fn summary(home: &Path) -> Value {
    let bytes = fs::read(home.join("rollover/latest/summary.json")).expect("summary");
    serde_json::from_slice(&bytes).expect("JSON")
}

#[test]
fn a_session_open_in_another_process_is_not_replaced_and_its_live_turn_survives() {
    let wd = Workdir::new("live");
    wd.create_jsonl("in/a.jsonl", &[record(1)]);
    let home = wd.convert("in", "home", &[], 0).root;
    let session = sessions(&home).remove(0);
    // A process holding the session open for appending, as Codex does while a session runs.
    let mut codex = Command::new("sh")
        .arg("-c")
        .arg("exec 3>>\"$1\"; echo ready; read turn; printf '%s\\n' \"$turn\" >&3")
        .arg("sh")
        .arg(&session)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut ready = String::new();
    std::io::BufReader::new(codex.stdout.take().expect("stdout"))
        .read_line(&mut ready)
        .expect("ready");
    // A rule change would update the session: it is open, so it is left and pending.
    let run = wd.run(&["convert", "in", "--out", "home", "--cwd", "/srv/new"]);
    run.expect_code(1);
    let busy = &summary(&home)["sessions_busy"];
    assert!(
        busy[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("has it open")),
        "{busy}"
    );
    let live = r#"{"timestamp":"2025-01-02T00:00:00.000Z","type":"event_msg","payload":{"type":"user_message","message":"live turn"}}"#;
    writeln!(codex.stdin.take().expect("stdin"), "{live}").expect("send the turn");
    codex.wait().expect("wait");
    let text = fs::read_to_string(&session).expect("session");
    assert!(text.contains("live turn"), "the live turn is in the home");
    // Closed now: Codex changed it, so the next run keeps it (pending) rather than clobber it.
    wd.run(&["convert", "in", "--out", "home", "--cwd", "/srv/new"])
        .expect_code(1);
    assert!(fs::read_to_string(&session)
        .expect("session")
        .contains("live turn"));
}

#[test]
fn what_a_killed_run_quarantined_stays_in_the_reports_until_the_file_is_read_again() {
    let wd = Workdir::new("killed-quarantine");
    wd.create(
        "in/a.jsonl",
        format!(
            "{}\nnot json\n",
            serde_json::to_string(&record(1)).expect("JSON")
        ),
    );
    for n in 2..5 {
        wd.create_jsonl(&format!("in/b{n}.jsonl"), &[record(n)]);
    }
    // Killed right after the first file (the damaged one) is recorded as done.
    let killed = wd
        .command(&["convert", "in", "--out", "home", "-j", "1"])
        .env("ROLLOVER_FAILPOINT", "die-at:journal:1")
        .output()
        .expect("run");
    assert_eq!(killed.status.code(), None);
    let home = wd.path("home");
    let run = wd.run(&["convert", "in", "--out", "home"]);
    run.expect_code(1);
    let s = summary(&home);
    assert_eq!(s["carried_quarantined"], 1);
    assert_eq!(s["verdict"], "blocked");
    assert!(run.stdout().contains("carried"), "{}", run.stdout());
    // The record itself, unchanged, in the run folder that took the killed run's number.
    let kept = fs::read_to_string(home.join("rollover/runs/0001/quarantine.killed-run.jsonl"))
        .expect("the killed run's quarantine");
    assert!(kept.contains("\"record\":\"not json\""), "{kept}");
    for report in ["report.md", "report.html"] {
        let text = fs::read_to_string(home.join("rollover/latest").join(report))
            .expect("report")
            .replace("&#x2f;", "/");
        assert!(text.contains("in/a.jsonl"), "{report}");
    }
    // Every next run says so too, until the file is fixed and read again.
    wd.run(&["convert", "in", "--out", "home"]).expect_code(1);
    wd.create_jsonl("in/a.jsonl", &[record(1)]);
    wd.run(&["convert", "in", "--out", "home"]).expect_code(0);
    assert_eq!(summary(&home)["carried_quarantined"], 0);
}

#[test]
fn a_corrupt_manifest_is_refused_naming_the_line_and_the_copy_before_it() {
    let wd = Workdir::new("corrupt");
    wd.create_jsonl("in/a.jsonl", &[record(1)]);
    wd.convert("in", "home", &[], 0);
    wd.create_jsonl("in/b.jsonl", &[record(2)]);
    wd.convert("in", "home", &[], 0);
    let manifest = wd.path("home/rollover/manifest");
    let good = fs::read(&manifest).expect("manifest");
    assert!(wd.path("home/rollover/manifest.prev").exists());
    let before = sessions(&wd.path("home"));
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("empty", Vec::new(), "line 1: it is empty"),
        ("cut header", b"{\"manif".to_vec(), "line 1"),
        (
            "garbage line",
            [good.clone(), b"garbage\n".to_vec()].concat(),
            "line 4: the line does not parse",
        ),
        (
            "a file entry first",
            good.split(|&b| b == b'\n')
                .nth(1)
                .map(|l| [l, b"\n"].concat())
                .unwrap_or_default(),
            "earlier rollover",
        ),
    ];
    for (what, bytes, says) in cases {
        fs::write(&manifest, &bytes).expect("damage");
        let run = wd.run(&["convert", "in", "--out", "home", "--full"]);
        run.expect_code(2);
        let err = run.stderr();
        assert!(err.contains(says), "{what}: {err}");
        assert!(
            !err.contains("removing") && !err.contains("delete"),
            "{what}: {err}"
        );
        if what != "a file entry first" {
            assert!(
                err.contains("manifest corrupt") && err.contains("manifest.prev"),
                "{what}: {err}"
            );
        }
        assert_eq!(sessions(&wd.path("home")), before, "{what}");
        assert_eq!(
            fs::read(&manifest).expect("left as it was"),
            bytes,
            "{what}"
        );
    }
    // The named fix works.
    fs::copy(wd.path("home/rollover/manifest.prev"), &manifest).expect("restore");
    wd.convert("in", "home", &[], 0);
    assert_eq!(sessions(&wd.path("home")), before);
}

#[test]
fn a_journal_line_cut_by_a_kill_is_cut_off_before_the_next_line() {
    let wd = Workdir::new("journal-cut");
    for n in 0..3 {
        wd.create_jsonl(&format!("in/f{n}.jsonl"), &[record(n)]);
    }
    let killed = wd
        .command(&["convert", "in", "--out", "home", "-j", "1"])
        .env("ROLLOVER_FAILPOINT", "die-at:journal:1")
        .output()
        .expect("run");
    assert_eq!(killed.status.code(), None);
    // A kill in the middle of the next line: a cut tail.
    let journal = wd.path("home/rollover/manifest.journal");
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .expect("journal");
    file.write_all(b"{\"key\":\"/cut-by-a-kill\",\"na")
        .expect("cut line");
    drop(file);
    // The next run is killed too, after its first line: that line starts fresh.
    let killed = wd
        .command(&["convert", "in", "--out", "home", "-j", "1"])
        .env("ROLLOVER_FAILPOINT", "die-at:journal:1")
        .output()
        .expect("run");
    assert_eq!(killed.status.code(), None);
    let text = fs::read_to_string(&journal).expect("journal");
    assert!(!text.contains("cut-by-a-kill"), "{text}");
    for line in text.lines() {
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    wd.convert("in", "home", &[], 0);
    assert_eq!(sessions(&wd.path("home")).len(), 3);
}

#[test]
fn state_folders_are_never_reached_through_a_symlink() {
    for planted in ["runs", "replaced", "pruned"] {
        let wd = Workdir::new("planted-folder");
        wd.create_jsonl("in/a.jsonl", &[record(1)]);
        wd.convert("in", "home", &[], 0);
        let outside = wd.path("outside");
        fs::create_dir_all(&outside).expect("outside");
        let at = wd.path(&format!("home/rollover/{planted}"));
        let _ = fs::remove_dir_all(&at);
        symlink(&outside, &at).expect("plant");
        // A session changed in Codex, replaced and pruned, so that every folder is used.
        let session = sessions(&wd.path("home")).remove(0);
        fs::write(&session, b"{\"changed\":1}\n").expect("Codex changes it");
        let run = wd.run(&["convert", "in", "--out", "home", "--force", "--cwd", "/x"]);
        if planted == "pruned" {
            run.expect_code(0);
            fs::remove_file(wd.path("in/a.jsonl")).expect("remove");
            wd.create_jsonl("in/b.jsonl", &[record(2)]);
            let run = wd.run(&[
                "convert",
                "in",
                "--out",
                "home",
                "--prune",
                "--max-prune",
                "100%",
            ]);
            run.expect_code(2);
            assert!(run.stderr().contains("is a symlink"), "{}", run.stderr());
        } else {
            run.expect_code(2);
            assert!(
                run.stderr()
                    .contains(&format!("rollover/{planted} is a symlink")),
                "{}",
                run.stderr()
            );
        }
        assert_eq!(
            fs::read_dir(&outside).expect("outside").count(),
            0,
            "{planted}"
        );
    }
}

#[test]
fn deleting_the_lock_file_does_not_let_a_second_run_in() {
    let wd = Workdir::new("lock-deleted");
    wd.create_jsonl("in/a.jsonl", &[record(1)]);
    // A running rollover's lock: on the state folder itself, its pid in the lock file.
    fs::create_dir_all(wd.path("home/rollover")).expect("mkdir");
    let held = fs::File::open(wd.path("home/rollover")).expect("open the folder");
    held.try_lock().expect("lock");
    wd.create("home/rollover/lock", format!("{}\n", std::process::id()));
    // Someone deletes the lock file: the lock is not in it.
    fs::remove_file(wd.path("home/rollover/lock")).expect("delete the lock file");
    let run = wd.run(&["convert", "in", "--out", "home"]);
    run.expect_code(3);
    assert!(!wd.path("home/sessions").exists());
    drop(held);
    wd.convert("in", "home", &[], 0);
}

#[test]
fn a_stray_file_named_as_a_run_is_skipped_with_a_warning() {
    let wd = Workdir::new("stray-run");
    wd.create_jsonl("in/a.jsonl", &[record(1)]);
    wd.convert("in", "home", &[], 0);
    wd.create("home/rollover/runs/9999", b"stray");
    let run = wd.run(&["convert", "in", "--out", "home"]);
    run.expect_code(0);
    assert!(run
        .stderr()
        .contains("runs/9999: it is named as a run folder but is not a folder"));
    assert_eq!(summary(&wd.path("home"))["run"], 2);
}

#[test]
fn a_content_change_with_the_size_and_mtime_put_back_is_read_again() {
    let wd = Workdir::new("cp-p");
    wd.create_jsonl("in/a.jsonl", &[record(1)]);
    wd.convert("in", "home", &[], 0);
    let path = wd.path("in/a.jsonl");
    let mtime = fs::metadata(&path)
        .expect("stat")
        .modified()
        .expect("mtime");
    let text = fs::read_to_string(&path).expect("read");
    // Same length, other content, the mtime put back (as `cp -p` or `tar x` do).
    let changed = text.replace("question 1", "question 9");
    assert_eq!(changed.len(), text.len());
    fs::write(&path, changed).expect("change");
    fs::File::options()
        .write(true)
        .open(&path)
        .expect("open")
        .set_modified(mtime)
        .expect("put the mtime back");
    let home = wd.convert("in", "home", &[], 0).root;
    let s = summary(&home);
    assert_eq!(s["files_unchanged"], 0);
    assert_eq!(
        s["sessions_new"], 1,
        "the changed record is a new conversation"
    );
}

/// Copies `from` into `to`, every file and folder, as `cp -r` does.
fn copy_tree(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from).sort_by_file_name() {
        let entry = entry.expect("walk the fixture");
        let target = to.join(entry.path().strip_prefix(from).expect("below"));
        if entry.file_type().is_dir() {
            fs::create_dir_all(&target).expect("mkdir");
        } else {
            fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A home the previous release wrote (manifest scheme 2: ids of records without their own id
/// taken from their bytes) upgrades without renaming a session: reading its inputs again, with
/// the same options or another `--cwd`, keeps every session path, and records each alias.
/// The fixture is `rollover 0.1.0` at fed5cbf over six of the shipped samples; its manifest
/// names the inputs `@INPUT@/…`, put back here to where the test copies them.
#[test]
fn a_home_the_previous_release_wrote_keeps_every_session_id() {
    let wd = Workdir::new("previous-release");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/previous-release");
    copy_tree(&fixture, wd.root());
    let input = wd.path("input");
    let manifest = wd.path("home/rollover/manifest");
    let text = fs::read_to_string(&manifest).expect("manifest");
    assert!(
        text.starts_with("{\"manifest\":2}\n"),
        "a scheme-2 manifest"
    );
    fs::write(
        &manifest,
        text.replace("@INPUT@", input.to_str().expect("UTF-8")),
    )
    .expect("write");
    let home = wd.path("home");
    let before = sessions(&home);
    assert_eq!(before.len(), 13);
    let written: Vec<Vec<u8>> = before.iter().map(|p| fs::read(p).expect("read")).collect();

    // The copies have new mtimes and the same bytes: nothing to write.
    let run = wd.run(&["convert", "input", "--out", "home"]);
    run.expect_code(0);
    assert_eq!(
        sessions(&home),
        before,
        "no session renamed: {}",
        run.stderr()
    );
    let after: Vec<Vec<u8>> = before.iter().map(|p| fs::read(p).expect("read")).collect();
    assert_eq!(after, written, "the same bytes under the same names");
    let s = summary(&home);
    assert_eq!(s["sessions_new"], 0, "{s}");
    assert_eq!(s["sessions_left"], 0, "{s}");
    let text = fs::read_to_string(&manifest).expect("manifest");
    assert!(
        text.starts_with("{\"manifest\":3}\n"),
        "upgraded to scheme 3"
    );

    // Another --cwd reads every file again and rewrites each session in place: the same
    // names, new content, an alias recorded for each session named from its bytes.
    let run = wd.run(&["convert", "input", "--out", "home", "--cwd", "/srv/moved"]);
    run.expect_code(0);
    assert_eq!(sessions(&home), before, "{}", run.stderr());
    let s = summary(&home);
    assert_eq!(
        (s["sessions_new"].as_u64(), s["sessions_left"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
    assert_eq!(s["sessions_updated"], 13, "{s}");
    for path in &before {
        let text = fs::read_to_string(path).expect("read");
        assert!(
            text.contains("\"cwd\":\"/srv/moved\""),
            "{}",
            path.display()
        );
    }
    let text = fs::read_to_string(&manifest).expect("manifest");
    let aliases = text.lines().filter(|l| l.contains("\"alias\"")).count();
    assert_eq!(aliases, 13, "an alias per session: {text}");

    // A run after is a no-op: the aliases hold across runs.
    let run = wd.run(&["convert", "input", "--out", "home", "--cwd", "/srv/moved"]);
    run.expect_code(0);
    assert_eq!(sessions(&home), before);
    assert_eq!(summary(&home)["files_unchanged"], 6);
}
