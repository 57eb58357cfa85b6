//! `--prune`, guarded and kill-safe (issue 56, items 3, 5, 7): refused (exit 2, nothing
//! removed) when an input root is empty or more would go than `--max-prune`; a pruned session
//! is moved to `rollover/pruned/RUN/`; a kill at any removal or journal line is finished by the
//! next run; a folder taken for a Codex home is a finding and its sessions are never pruned.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde_json::{json, Value};

use crate::common::Workdir;

fn record(n: usize) -> Value {
    json!({"messages": [
        {"role": "user", "content": format!("question {n}")},
        {"role": "assistant", "content": format!("answer {n}")},
    ]})
}

/// `n` files of one record each under `folder`.
fn files(wd: &Workdir, folder: &str, range: std::ops::Range<usize>) {
    for n in range {
        wd.create_jsonl(&format!("{folder}/f{n:02}.jsonl"), &[record(n)]);
    }
}

fn names(home: &Path, below: &str) -> BTreeSet<String> {
    walkdir::WalkDir::new(home.join(below))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn summary(home: &Path) -> Value {
    let bytes = fs::read(home.join("rollover/latest/summary.json")).expect("summary");
    serde_json::from_slice(&bytes).expect("JSON")
}

#[test]
fn an_empty_input_root_refuses_the_prune_and_removes_nothing() {
    let wd = Workdir::new("prune-root");
    files(&wd, "disk-a", 0..4);
    files(&wd, "disk-b", 4..8);
    wd.run(&["convert", "disk-a", "disk-b", "--out", "home"])
        .expect_code(0);
    let home = wd.path("home");
    let before = names(&home, "sessions");
    assert_eq!(before.len(), 8);
    // disk-b unmounted: its folder is there, empty.
    fs::remove_dir_all(wd.path("disk-b")).expect("unmount");
    fs::create_dir(wd.path("disk-b")).expect("mount point");
    let run = wd.run(&["convert", "disk-a", "disk-b", "--out", "home", "--prune"]);
    run.expect_code(2);
    assert!(
        run.stderr()
            .contains("--prune refused: disk-b holds no file"),
        "{}",
        run.stderr()
    );
    assert_eq!(names(&home, "sessions"), before);
}

#[test]
fn more_than_max_prune_is_refused_and_a_prune_keeps_a_copy_of_each_session() {
    let wd = Workdir::new("prune-limit");
    files(&wd, "in", 0..10);
    let home = wd.convert("in", "home", &[], 0).root;
    let before = names(&home, "sessions");
    for n in 0..5 {
        fs::remove_file(wd.path(&format!("in/f{n:02}.jsonl"))).expect("remove");
    }
    // Half the home: more than the default 10 %.
    let run = wd.run(&["convert", "in", "--out", "home", "--prune"]);
    run.expect_code(2);
    assert!(
        run.stdout()
            .contains("--prune would remove 5 of the 10 sessions"),
        "{}",
        run.stdout()
    );
    assert_eq!(names(&home, "sessions"), before);
    assert_eq!(summary(&home)["sessions_left"], 5);
    // Allowed: moved into rollover/pruned/RUN/, each listed with its copy.
    wd.convert("in", "home", &["--prune", "--max-prune", "5"], 0);
    assert_eq!(names(&home, "sessions").len(), 5);
    let copies = names(&home, "rollover/pruned/0003");
    assert_eq!(copies.len(), 5);
    assert_eq!(
        copies
            .union(&names(&home, "sessions"))
            .cloned()
            .collect::<BTreeSet<_>>(),
        before
    );
    let run = summary(&home);
    assert_eq!(run["sessions_pruned"].as_array().map(Vec::len), Some(5));
    assert_eq!(run["copies_kept"].as_array().map(Vec::len), Some(5));
}

/// A kill at each removal and at each journal line of a prune: the next run (no `--prune`)
/// finishes it, and the home ends as an uninterrupted prune leaves it, every removed session
/// copied, none left untracked.
#[test]
fn a_prune_killed_at_any_point_is_finished_by_the_next_run() {
    let expected = {
        let wd = Workdir::new("prune-clean");
        files(&wd, "in", 0..12);
        wd.convert("in", "home", &[], 0);
        for n in 0..6 {
            fs::remove_file(wd.path(&format!("in/f{n:02}.jsonl"))).expect("remove");
        }
        wd.convert("in", "home", &["--prune", "--max-prune", "100%"], 0);
        names(&wd.path("home"), "sessions")
    };
    for failpoint in [
        "die-at:prune:1",
        "die-at:prune:4",
        "die-at:journal:2",
        "die-at:journal:5",
    ] {
        let wd = Workdir::new("prune-kill");
        files(&wd, "in", 0..12);
        wd.convert("in", "home", &[], 0);
        let all = names(&wd.path("home"), "sessions");
        for n in 0..6 {
            fs::remove_file(wd.path(&format!("in/f{n:02}.jsonl"))).expect("remove");
        }
        let killed = wd
            .command(&[
                "convert",
                "in",
                "--out",
                "home",
                "--prune",
                "--max-prune",
                "100%",
            ])
            .env("ROLLOVER_FAILPOINT", failpoint)
            .output()
            .expect("run");
        assert_eq!(killed.status.code(), None, "{failpoint}: killed by SIGKILL");
        // A plain run finishes the prune the killed one started.
        wd.convert("in", "home", &[], 0);
        let home = wd.path("home");
        assert_eq!(names(&home, "sessions"), expected, "{failpoint}");
        let copies = names(&home, "rollover/pruned");
        let gone: BTreeSet<String> = all.difference(&expected).cloned().collect();
        assert_eq!(
            copies, gone,
            "{failpoint}: every removed session has its copy"
        );
        // Nothing untracked: a full prune afterwards has nothing left to do.
        wd.convert("in", "home", &["--full", "--prune"], 0);
        assert_eq!(names(&home, "sessions"), expected, "{failpoint}");
        let status = wd.run(&["status", "home", "--json"]);
        let status: Value = serde_json::from_str(&status.stdout()).expect("status JSON");
        assert_eq!(status["sessions"], 6, "{failpoint}");
    }
}

#[test]
fn a_planted_rollout_name_does_not_make_a_folder_a_home() {
    let wd = Workdir::new("planted-home");
    files(&wd, "archive/team-a", 0..3);
    files(&wd, "archive/team-b", 3..6);
    wd.create("archive/team-b/sessions/rollout-x.jsonl", b"");
    wd.create("archive/rollover/manifest", b"{}\n");
    let home = wd.convert("archive", "home", &[], 0).root;
    assert_eq!(names(&home, "sessions").len(), 6);
}

#[test]
fn a_folder_taken_for_a_codex_home_is_a_finding_and_its_sessions_are_never_pruned() {
    let wd = Workdir::new("skipped-home");
    files(&wd, "archive/team-a", 0..3);
    files(&wd, "archive/team-b", 3..6);
    let home = wd.convert("archive", "home", &[], 0).root;
    assert_eq!(names(&home, "sessions").len(), 6);
    // team-b now holds a real Codex home: skipped, said, exit 1; --prune leaves its sessions.
    fs::create_dir_all(wd.path("archive/team-b/sessions/2025/01/01")).expect("mkdir");
    wd.create(
        "archive/team-b/sessions/2025/01/01/rollout-2025-01-01T00-00-00-0194.jsonl",
        b"{\"timestamp\":\"2025-01-01T00:00:00.000Z\",\"type\":\"session_meta\",\"payload\":{\"id\":\"x\"}}\n",
    );
    let run = wd.run(&[
        "convert",
        "archive",
        "--out",
        "home",
        "--prune",
        "--max-prune",
        "100%",
    ]);
    run.expect_code(1);
    assert!(
        run.stderr().contains("team-b: it is a Codex home"),
        "{}",
        run.stderr()
    );
    assert_eq!(names(&home, "sessions").len(), 6);
    assert_eq!(summary(&home)["verdict"], "blocked");
}

#[test]
fn a_second_force_keeps_the_first_copy() {
    let wd = Workdir::new("two-forces");
    wd.create_jsonl("in/a.jsonl", &[record(1)]);
    let home = wd.convert("in", "home", &[], 0).root;
    let session = walkdir::WalkDir::new(home.join("sessions"))
        .into_iter()
        .filter_map(Result::ok)
        .find(|e| e.file_type().is_file())
        .expect("a session")
        .into_path();
    for (turn, cwd) in [
        ("first Codex turn", "/srv/one"),
        ("second Codex turn", "/srv/two"),
    ] {
        let mut text = fs::read_to_string(&session).expect("read");
        text.push_str(&format!(
            "{{\"timestamp\":\"2025-01-02T00:00:00.000Z\",\"type\":\"event_msg\",\"payload\":{{\"type\":\"user_message\",\"message\":\"{turn}\"}}}}\n"
        ));
        fs::write(&session, text).expect("Codex appends");
        wd.convert("in", "home", &["--force", "--cwd", cwd], 0);
    }
    let copies: Vec<String> = walkdir::WalkDir::new(home.join("rollover/replaced"))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| fs::read_to_string(e.path()).expect("copy"))
        .collect();
    assert_eq!(copies.len(), 2);
    assert!(copies
        .iter()
        .any(|c| c.contains("first Codex turn") && !c.contains("second")));
    assert!(copies.iter().any(|c| c.contains("second Codex turn")));
}
