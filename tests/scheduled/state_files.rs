//! State files that cannot be turned against the machine (issue 26, item 5): a symlink
//! planted at the lock, the manifest, the journal or a session is refused with an error that
//! names it, and its target is left as it was; the run counter refuses to wrap; a temporary
//! name a kill left beside the state files is removed at the next start.

use std::fs;
use std::os::unix::fs::symlink;

use serde_json::json;

use crate::common::Workdir;

fn archive(wd: &Workdir, tag: &str) {
    wd.create_jsonl(
        "in/a.jsonl",
        &[json!({"created": 1_700_000_000, "messages": [
            {"role": "user", "content": format!("{tag}?")},
            {"role": "assistant", "content": "yes."},
        ]})],
    );
}

/// A file outside the home that a planted symlink points at; its bytes must not change.
fn canary(wd: &Workdir) -> (std::path::PathBuf, Vec<u8>) {
    let bytes = b"precious: must not be truncated, appended to or copied\n".to_vec();
    wd.create("canary/target", &bytes);
    (wd.path("canary/target"), bytes)
}

fn refused(wd: &Workdir, args: &[&str], planted: &str) {
    let run = wd.run(args);
    run.expect_code(2);
    let err = run.stderr();
    assert!(
        err.contains(planted) && err.contains("is a symlink"),
        "the error names the planted symlink {planted}: {err}"
    );
}

#[test]
fn a_symlink_planted_at_the_lock_is_refused_and_its_target_kept() {
    let wd = Workdir::new("planted-lock");
    archive(&wd, "lock");
    let (target, bytes) = canary(&wd);
    fs::create_dir_all(wd.path("home/rollover")).expect("state dir");
    symlink(&target, wd.path("home/rollover/lock")).expect("plant");
    refused(
        &wd,
        &["convert", "in", "--out", "home"],
        "home/rollover/lock",
    );
    assert_eq!(fs::read(&target).expect("canary"), bytes);
    assert!(!wd.path("home/sessions").exists());
}

#[test]
fn a_symlink_planted_at_the_manifest_or_the_journal_is_refused_and_its_target_kept() {
    for name in ["manifest", "manifest.journal"] {
        let wd = Workdir::new("planted-manifest");
        archive(&wd, "first");
        wd.convert("in", "home", &[], 0);
        let (target, bytes) = canary(&wd);
        let planted = wd.path(&format!("home/rollover/{name}"));
        let _ = fs::remove_file(&planted);
        symlink(&target, &planted).expect("plant");
        archive(&wd, "changed");
        refused(
            &wd,
            &["convert", "in", "--out", "home"],
            &format!("home/rollover/{name}"),
        );
        assert_eq!(fs::read(&target).expect("canary"), bytes, "{name}");
    }
}

#[test]
fn a_symlink_at_a_sessions_name_is_never_read_replaced_or_copied_by_force() {
    let wd = Workdir::new("planted-session");
    archive(&wd, "session");
    let home = wd.convert("in", "home", &[], 0);
    let rollout = home.rollouts()[0].clone();
    let (target, bytes) = canary(&wd);
    fs::remove_file(&rollout).expect("remove");
    symlink(&target, &rollout).expect("plant");
    let relative = rollout
        .strip_prefix(wd.root())
        .expect("below")
        .to_string_lossy()
        .into_owned();
    refused(
        &wd,
        &[
            "convert", "in", "--out", "home", "--cwd", "/srv/x", "--force",
        ],
        &relative,
    );
    assert_eq!(fs::read(&target).expect("canary"), bytes);
    assert!(!wd.path("home/rollover/replaced").exists());
}

#[test]
fn the_run_counter_refuses_to_wrap() {
    let wd = Workdir::new("counter");
    archive(&wd, "counter");
    wd.create("home/rollover/runs/4294967295/summary.json", "{}");
    let run = wd.run(&["convert", "in", "--out", "home"]);
    run.expect_code(2);
    assert!(run.stderr().contains("run numbers"), "{run}");
    assert!(!wd.path("home/rollover/runs/0000").exists());
    assert!(!wd.path("home/sessions").exists());
}

#[test]
fn a_temporary_name_left_by_a_kill_beside_the_state_files_is_removed() {
    let wd = Workdir::new("leftover");
    archive(&wd, "leftover");
    wd.convert("in", "home", &[], 0);
    // What a kill at the `latest` rename leaves: `.latest.tmp<pid>`.
    symlink("runs/0001", wd.path("home/rollover/.latest.tmp999999")).expect("plant");
    wd.create("home/rollover/.manifest.tmp999998", "half");
    wd.convert("in", "home", &[], 0);
    let names: Vec<String> = fs::read_dir(wd.path("home/rollover"))
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}
