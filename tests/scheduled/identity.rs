//! The state model (issue 25): a session's identity is its conversation, a run's identity
//! includes its rules and options, nothing is deleted by default, and a run is a plan before
//! it is an execution. Each test runs the binary the way a nightly job or a cutover review
//! does, with exact counts of sessions before and after.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde_json::{json, Value};

use crate::common::Workdir;

/// `n` small chat records, `tag` making their text (so their identity) differ between sets.
fn records(tag: &str, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({
                "created": 1_700_000_000 + i as i64,
                "messages": [
                    {"role": "system", "content": "You help."},
                    {"role": "user", "content": format!("{tag}: question {i}?")},
                    {"role": "assistant", "content": format!("{tag}: answer {i}.")},
                ]
            })
        })
        .collect()
}

/// The rollouts under `home/sessions`, paths relative to the home.
fn sessions(wd: &Workdir, home: &str) -> BTreeSet<String> {
    let root = wd.path(home);
    crate::common::files_below(&root, &root.join("sessions"))
        .into_keys()
        .collect()
}

fn n(summary: &Value, key: &str) -> u64 {
    match &summary[key] {
        Value::Array(items) => items.len() as u64,
        other => other
            .as_u64()
            .unwrap_or_else(|| panic!("summary.{key} is {other}")),
    }
}

#[test]
fn same_named_exports_never_delete_each_others_sessions() {
    let wd = Workdir::new("same-named");
    wd.create_jsonl("days/d1/export.jsonl", &records("day one", 3));
    wd.create_jsonl("days/d2/export.jsonl", &records("day two", 3));
    let first = wd.convert("days/d1/export.jsonl", "home", &[], 0);
    assert_eq!(n(&first.summary(), "sessions_new"), 3);
    let day_one = sessions(&wd, "home");
    assert_eq!(day_one.len(), 3);
    let second = wd.convert("days/d2/export.jsonl", "home", &[], 0);
    let summary = second.summary();
    assert_eq!(n(&summary, "sessions_new"), 3);
    assert_eq!(n(&summary, "rollouts_removed"), 0);
    // Day one's file is not among this run's inputs: its sessions are kept, and counted as
    // left, which is what a `--prune` of this run would remove.
    assert_eq!(n(&summary, "sessions_left"), 3);
    let both = sessions(&wd, "home");
    assert_eq!(both.len(), 6, "{both:?}");
    assert!(day_one.is_subset(&both));
}

#[test]
fn standard_input_twice_keeps_the_first_runs_sessions() {
    let wd = Workdir::new("stdin-twice");
    let feed = |tag: &str| {
        let mut text = String::new();
        for r in records(tag, 2) {
            text.push_str(&r.to_string());
            text.push('\n');
        }
        let mut child = wd
            .command(&["convert", "-", "--out", "home", "--json"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("feed");
        let out = child.wait_with_output().expect("wait");
        assert_eq!(out.status.code(), Some(0));
        serde_json::from_slice::<Value>(&out.stdout).expect("json")
    };
    assert_eq!(n(&feed("first"), "sessions_new"), 2);
    let second = feed("second");
    assert_eq!(n(&second, "sessions_new"), 2);
    // The key `stdin` held other records before: theirs are kept, left by their source.
    assert_eq!(n(&second, "sessions_left"), 2);
    assert_eq!(n(&second, "rollouts_removed"), 0);
    assert_eq!(sessions(&wd, "home").len(), 4);
}

#[test]
fn two_file_names_that_are_one_lossy_key_give_separate_sessions() {
    use std::os::unix::ffi::OsStrExt;
    let wd = Workdir::new("lossy-names");
    fs::create_dir_all(wd.path("in")).expect("dir");
    for (byte, tag) in [(0xe9u8, "e acute"), (0xe8u8, "e grave")] {
        let mut name = b"caf".to_vec();
        name.push(byte);
        name.extend_from_slice(b".jsonl");
        let path = wd.path("in").join(std::ffi::OsStr::from_bytes(&name));
        let text: String = records(tag, 2).iter().map(|r| format!("{r}\n")).collect();
        fs::write(path, text).expect("write");
    }
    let home = wd.convert("in", "home", &[], 0);
    assert_eq!(n(&home.summary(), "sessions_new"), 4);
    assert_eq!(sessions(&wd, "home").len(), 4);
    // Again: both files are known by their own origin, nothing changes.
    let again = wd.convert("in", "home", &[], 0);
    assert_eq!(n(&again.summary(), "files_unchanged"), 2);
    assert_eq!(sessions(&wd, "home").len(), 4);
}

#[test]
fn the_same_file_name_in_two_folders_then_one_of_them_keeps_every_session() {
    let wd = Workdir::new("same-key");
    wd.create_jsonl("a/x.jsonl", &records("folder a", 2));
    wd.create_jsonl("b/x.jsonl", &records("folder b", 3));
    let home = wd.convert("a/x.jsonl", "home", &["b/x.jsonl"], 0);
    assert_eq!(n(&home.summary(), "sessions_new"), 5);
    let again = wd.convert("b/x.jsonl", "home", &[], 0);
    let summary = again.summary();
    assert_eq!(n(&summary, "files_unchanged"), 1);
    assert_eq!(n(&summary, "rollouts_removed"), 0);
    assert_eq!(sessions(&wd, "home").len(), 5);
}

#[test]
fn the_same_conversation_gets_the_same_session_from_any_folder_and_an_append_shifts_nothing() {
    let wd = Workdir::new("any-folder");
    let set = records("moved", 3);
    wd.create_jsonl("here/x.jsonl", &set);
    wd.create_jsonl("elsewhere/deeper/renamed.jsonl", &set);
    wd.convert("here/x.jsonl", "h1", &[], 0);
    wd.convert("elsewhere", "h2", &[], 0);
    assert_eq!(sessions(&wd, "h1"), sessions(&wd, "h2"));
    // An append adds sessions; the first three keep their ids and bytes.
    let before = sessions(&wd, "h1");
    let mut more = set.clone();
    more.extend(records("appended", 2));
    wd.create_jsonl("here/x.jsonl", &more);
    let home = wd.convert("here/x.jsonl", "h1", &[], 0);
    let summary = home.summary();
    assert_eq!(n(&summary, "sessions_new"), 2);
    assert_eq!(n(&summary, "rollouts_unchanged"), 3);
    let after = sessions(&wd, "h1");
    assert_eq!(after.len(), 5);
    assert!(before.is_subset(&after));
    // Identical records within one file stay separate sessions.
    wd.create_jsonl("twins/t.jsonl", &[set[0].clone(), set[0].clone()]);
    wd.convert("twins/t.jsonl", "h3", &[], 0);
    assert_eq!(sessions(&wd, "h3").len(), 2);
}

#[test]
fn changed_rules_or_options_convert_again_and_say_so() {
    let wd = Workdir::new("fingerprint");
    wd.create_jsonl("in/a.jsonl", &records("a", 2));
    wd.create_jsonl("in/b.jsonl", &records("b", 2));
    wd.convert("in", "home", &[], 0);
    wd.create("strict.toml", "[session]\ncwd = \"/srv/strict\"\n");
    let home = wd.convert(
        "in",
        "home",
        &["--rules", "default", "--rules", "strict.toml"],
        0,
    );
    let summary = home.summary();
    assert_eq!(n(&summary, "files_unchanged"), 0);
    assert_eq!(n(&summary, "sessions_updated"), 4);
    assert_eq!(
        summary["settings_changed"],
        json!([{"what": "rules", "since_run": 1, "files": 2}])
    );
    assert!(
        home.run
            .stderr()
            .contains("rules changed since run 0001: 2 files converted again"),
        "{}",
        home.run
    );
    for rollout in home.all_rollouts() {
        assert_eq!(rollout.meta()["cwd"], "/srv/strict");
    }
    let reports = fs::read_to_string(home.root.join("rollover/latest/report.md")).expect("md");
    assert!(reports.contains("rules changed since run 0001: 2 files converted again"));
    // The same rules again: nothing to do.
    let same = wd.convert(
        "in",
        "home",
        &["--rules", "default", "--rules", "strict.toml"],
        0,
    );
    assert_eq!(n(&same.summary(), "files_unchanged"), 2);
    // An option that changes output: every file again, one home, one setting.
    let cwd = wd.convert("in", "home", &["--cwd", "/home/me/proj"], 0);
    let summary = cwd.summary();
    assert_eq!(n(&summary, "sessions_updated"), 4);
    assert_eq!(
        summary["settings_changed"],
        // The last run under the settings it changes from: run 0003 had run 0002's.
        json!([{"what": "rules and options", "since_run": 3, "files": 2}])
    );
    for rollout in cwd.all_rollouts() {
        assert_eq!(rollout.meta()["cwd"], "/home/me/proj");
    }
    assert_eq!(sessions(&wd, "home").len(), 4);
}

#[test]
fn an_audit_in_a_home_reads_everything_shows_the_plan_and_leaves_the_home_alone() {
    let wd = Workdir::new("audit-plan");
    wd.create_jsonl("in/a.jsonl", &records("a", 3));
    let first = wd.convert("in", "home", &[], 0);
    let records_read = n(&first.summary(), "records");
    let before = first.tree();
    wd.create("strict.toml", "[session]\ncwd = \"/srv/strict\"\n");
    let run = wd.run(&[
        "audit",
        "in",
        "--out",
        "home",
        "--rules",
        "default",
        "--rules",
        "strict.toml",
    ]);
    run.expect_code(0);
    let plan: Value = serde_json::from_slice(
        &fs::read(wd.path("home/rollover/runs/0002/summary.json")).expect("plan summary"),
    )
    .expect("json");
    assert_eq!(n(&plan, "records"), records_read);
    assert_eq!(n(&plan, "sessions_updated"), 3);
    assert_eq!(plan["dry_run"], true);
    // The sessions and the manifest are as they were; `latest` still names the real run.
    let after = first.tree();
    let rollouts = |t: &[(String, Vec<u8>)]| -> Vec<(String, Vec<u8>)> {
        t.iter()
            .filter(|(p, _)| p.starts_with("sessions/") || p == "rollover/manifest")
            .cloned()
            .collect()
    };
    assert_eq!(rollouts(&before), rollouts(&after));
    let latest = fs::read_link(wd.path("home/rollover/latest")).expect("latest");
    assert_eq!(latest, Path::new("runs/0001"));
    let plan_link = fs::read_link(wd.path("home/rollover/latest-plan")).expect("latest-plan");
    assert_eq!(plan_link, Path::new("runs/0002"));
    let md = fs::read_to_string(wd.path("home/rollover/runs/0002/report.md")).expect("md");
    assert!(md.contains("What a run would do to the home"), "{md}");
    assert!(md.contains("| updated (new content for a session written before) | 3 |"));
}

/// Appends a line to a rollout as Codex does when a user resumes it.
fn resume_in_codex(path: &Path) {
    let mut text = fs::read_to_string(path).expect("rollout");
    text.push_str(
        "{\"timestamp\":\"2030-01-01T00:00:00.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"user_message\",\"message\":\"one more thing\",\"images\":[]}}\n",
    );
    fs::write(path, text).expect("append");
}

#[test]
fn a_resumed_session_whose_source_changed_stays_pending_until_force() {
    let wd = Workdir::new("pending");
    wd.create_jsonl("in/a.jsonl", &records("resumed", 2));
    let home = wd.convert("in", "home", &[], 0);
    let resumed = home.rollouts()[0].clone();
    resume_in_codex(&resumed);
    let resumed_bytes = fs::read(&resumed).expect("read");
    // The source now has newer output for that session: the same records under a rule file
    // that sets another working folder (a batch result joined later, or a Claude Code session
    // that grew, do the same).
    wd.create("cwd.toml", "[session]\ncwd = \"/srv/new\"\n");
    let rules = ["--rules", "default", "--rules", "cwd.toml"];
    let kept = wd.convert("in", "home", &rules, 1);
    let summary = kept.summary();
    assert_eq!(n(&summary, "sessions_kept"), 1);
    assert_eq!(n(&summary, "sessions_updated"), 1);
    assert_eq!(fs::read(&resumed).expect("read"), resumed_bytes);
    let md = fs::read_to_string(home.root.join("rollover/latest/report.md")).expect("md");
    assert!(md.contains("Sessions kept pending:"), "{md}");
    let relative = resumed
        .strip_prefix(&home.root)
        .expect("below")
        .to_string_lossy()
        .into_owned();
    assert!(md.contains(&relative), "{md}");
    // Nothing changed since: the next run says so again, and still exits 1.
    let again = wd.convert("in", "home", &rules, 1);
    let summary = again.summary();
    assert_eq!(n(&summary, "files_pending"), 1);
    assert_eq!(n(&summary, "sessions_kept"), 1);
    assert!(
        again.run.stderr().contains("sessions kept pending"),
        "{}",
        again.run
    );
    // --force alone (no --full) replaces it, keeping a copy.
    let forced = wd.convert(
        "in",
        "home",
        &["--force", rules[0], rules[1], rules[2], rules[3]],
        0,
    );
    assert_eq!(n(&forced.summary(), "sessions_replaced"), 1);
    let run = forced.summary()["run"].as_u64().unwrap_or(0);
    let copy = home
        .root
        .join(format!("rollover/replaced/{run:04}"))
        .join(&relative);
    assert_eq!(fs::read(copy).expect("copy"), resumed_bytes);
    let settled = wd.convert("in", "home", &rules, 0);
    assert_eq!(n(&settled.summary(), "sessions_kept"), 0);
    assert_eq!(n(&settled.summary(), "files_unchanged"), 1);
}

#[test]
fn a_resumed_session_whose_source_has_nothing_new_is_left_alone() {
    let wd = Workdir::new("resumed-same");
    wd.create_jsonl("in/a.jsonl", &records("same", 2));
    let home = wd.convert("in", "home", &[], 0);
    let resumed = home.rollouts()[0].clone();
    resume_in_codex(&resumed);
    let bytes = fs::read(&resumed).expect("read");
    let again = wd.convert("in", "home", &["--full"], 0);
    let summary = again.summary();
    assert_eq!(n(&summary, "sessions_kept"), 0);
    assert_eq!(n(&summary, "rollouts_unchanged"), 2);
    assert_eq!(fs::read(&resumed).expect("read"), bytes);
}

#[test]
fn an_archived_or_deleted_session_never_comes_back_unless_forced() {
    let wd = Workdir::new("archived");
    let mut set = records("archive me", 3);
    wd.create_jsonl("in/a.jsonl", &set);
    let home = wd.convert("in", "home", &[], 0);
    let rollouts = home.rollouts();
    assert_eq!(rollouts.len(), 3);
    // Codex moves an archived session to archived_sessions/ by its file name.
    let archived = &rollouts[0];
    fs::create_dir_all(home.root.join("archived_sessions")).expect("dir");
    let name = archived.file_name().expect("name");
    fs::rename(archived, home.root.join("archived_sessions").join(name)).expect("archive");
    fs::remove_file(&rollouts[1]).expect("delete");
    // The source changes: one record more.
    set.extend(records("new one", 1));
    wd.create_jsonl("in/a.jsonl", &set);
    let run = wd.convert("in", "home", &["--full"], 0);
    let summary = run.summary();
    assert_eq!(n(&summary, "sessions_new"), 1);
    assert_eq!(n(&summary, "rollouts_unchanged"), 1);
    let reasons: Vec<&str> = summary["sessions_withheld"]
        .as_array()
        .expect("withheld")
        .iter()
        .map(|w| w["reason"].as_str().expect("reason"))
        .collect();
    let mut sorted = reasons.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec!["archived", "deleted"]);
    assert!(!archived.exists());
    assert!(!rollouts[1].exists());
    assert_eq!(sessions(&wd, "home").len(), 2);
    // Remembered: the next run withholds them again.
    let again = wd.convert("in", "home", &["--full"], 0);
    assert_eq!(n(&again.summary(), "sessions_withheld"), 2);
    // --force writes them again.
    let forced = wd.convert("in", "home", &["--full", "--force"], 0);
    assert_eq!(n(&forced.summary(), "sessions_new"), 2);
    assert!(archived.exists() && rollouts[1].exists());
}

#[test]
fn prune_removes_only_sessions_whose_record_is_gone_and_never_one_codex_changed() {
    let wd = Workdir::new("prune");
    let set = records("prune", 4);
    wd.create_jsonl("in/a.jsonl", &set);
    wd.create_jsonl("in/b.jsonl", &records("other file", 1));
    let home = wd.convert("in", "home", &[], 0);
    assert_eq!(sessions(&wd, "home").len(), 5);
    let written_by_a: Vec<String> = home
        .conversations()
        .iter()
        .filter(|c| c["source"].as_str().is_some_and(|s| s.ends_with("a.jsonl")))
        .map(|c| c["path"].as_str().expect("path").to_string())
        .collect();
    assert_eq!(written_by_a.len(), 4);
    // Two records cut from a.jsonl, and b.jsonl gone.
    let first_two = sessions(&wd, "home");
    wd.create_jsonl("in/a.jsonl", &set[..2]);
    fs::remove_file(wd.path("in/b.jsonl")).expect("rm");
    let copy = wd.convert("in", "home", &[], 0);
    let summary = copy.summary();
    // The two records cut from a.jsonl and b.jsonl's one session.
    assert_eq!(n(&summary, "sessions_left"), 3);
    assert_eq!(n(&summary, "rollouts_removed"), 0);
    assert_eq!(
        sessions(&wd, "home"),
        first_two,
        "copy semantics: nothing removed"
    );
    // One of the left sessions was resumed in Codex: --prune keeps it.
    let kept = copy
        .conversations()
        .iter()
        .map(|c| c["path"].as_str().expect("path").to_string())
        .collect::<BTreeSet<_>>();
    let left: Vec<&String> = written_by_a.iter().filter(|p| !kept.contains(*p)).collect();
    assert_eq!(left.len(), 2);
    resume_in_codex(&home.root.join(left[0]));
    wd.convert(
        "in",
        "home",
        &["--prune", "--max-prune", "100%", "--dry-run"],
        0,
    );
    // A dry run's report is `latest-plan`: `latest` stays on the last real run.
    let plan: Value =
        serde_json::from_slice(&wd.read("home/rollover/latest-plan/summary.json")).expect("plan");
    assert_eq!(n(&plan, "sessions_pruned"), 2);
    assert_eq!(n(&plan, "sessions_not_pruned"), 1);
    assert_eq!(sessions(&wd, "home").len(), 5, "a dry run prunes nothing");
    let pruned = wd.convert("in", "home", &["--prune", "--max-prune", "100%"], 0);
    let summary = pruned.summary();
    assert_eq!(n(&summary, "sessions_pruned"), 2);
    assert_eq!(n(&summary, "sessions_not_pruned"), 1);
    assert_eq!(summary["sessions_not_pruned"][0], json!(left[0]));
    let now = sessions(&wd, "home");
    assert_eq!(now.len(), 3);
    assert!(now.contains(left[0].as_str()));
    let md = fs::read_to_string(home.root.join("rollover/latest/report.md")).expect("md");
    assert!(md.contains("Sessions pruned:"), "{md}");
}

#[test]
fn a_home_of_the_scheme_before_is_refused_with_what_to_do() {
    let wd = Workdir::new("old-home");
    wd.create_jsonl("in/a.jsonl", &records("old", 1));
    wd.create(
        "home/rollover/manifest",
        "{\"key\":\"a.jsonl\",\"size\":1,\"mtime_ns\":1,\"digest\":\"00\",\"records\":1,\"rollouts\":[]}\n",
    );
    let run = wd.run(&["convert", "in", "--out", "home"]);
    run.expect_code(2);
    let err = run.stderr();
    assert!(err.contains("earlier rollover"), "{err}");
    assert!(err.contains("--out NEW_HOME"), "{err}");
    assert!(!wd.path("home/sessions").exists());
}

#[test]
fn status_shows_the_manifest_pending_sessions_and_the_last_runs() {
    let wd = Workdir::new("status");
    wd.create_jsonl("in/a.jsonl", &records("status", 2));
    wd.convert("in", "home", &[], 0);
    wd.convert("in", "home", &["--cwd", "/elsewhere"], 0);
    let run = wd.run(&["status", "home", "--json"]);
    run.expect_code(0);
    let status: Value = serde_json::from_str(&run.stdout()).expect("json");
    assert_eq!(status["files"], 1);
    assert_eq!(status["sessions"], 2);
    assert_eq!(status["runs"].as_array().expect("runs").len(), 2);
    assert_eq!(status["runs"][1]["sessions_updated"], 2);
    assert_eq!(status["runs"][0]["sessions_new"], 2);
    let text = wd.run(&["status", "home"]);
    text.expect_code(0);
    assert!(
        text.stdout().contains("1 input file, 2 sessions"),
        "{}",
        text
    );
    assert!(text.stdout().contains("run 0002"), "{}", text);
    let missing = wd.run(&["status", "nowhere", "--json"]);
    missing.expect_code(2);
    let error: Value = serde_json::from_str(&missing.stdout()).expect("json error");
    assert_eq!(error["exit_reason"], "error");
}

#[test]
fn a_responses_home_converts_again_when_the_wire_or_compression_changes() {
    let wd = Workdir::new("wire");
    wd.create_jsonl("in/a.jsonl", &records("wire", 2));
    wd.convert("in", "home", &["--format", "responses"], 0);
    let lite = wd.convert(
        "in",
        "home",
        &["--format", "responses", "--wire", "lite"],
        0,
    );
    let summary = lite.summary();
    assert_eq!(n(&summary, "files_unchanged"), 0);
    assert_eq!(
        summary["settings_changed"],
        json!([{"what": "options", "since_run": 1, "files": 1}])
    );
    let body = fs::read_to_string(wd.path("home/responses/in/a.jsonl")).expect("bodies");
    for line in body.lines() {
        let v: Value = serde_json::from_str(line).expect("body");
        assert!(v.get("instructions").is_none(), "lite wire: {line}");
    }
    let same = wd.convert(
        "in",
        "home",
        &["--format", "responses", "--wire", "lite"],
        0,
    );
    assert_eq!(n(&same.summary(), "files_unchanged"), 1);
}

#[test]
fn same_named_exports_into_a_responses_home_keep_both_body_files() {
    let wd = Workdir::new("responses-same-name");
    wd.create_jsonl("days/d1/export.jsonl", &records("day one", 2));
    wd.create_jsonl("days/d2/export.jsonl", &records("day two", 3));
    wd.convert(
        "days/d1/export.jsonl",
        "home",
        &["--format", "responses"],
        0,
    );
    let first = fs::read(wd.path("home/responses/export.jsonl")).expect("day one's bodies");
    let second = wd.convert(
        "days/d2/export.jsonl",
        "home",
        &["--format", "responses"],
        0,
    );
    // Day one's file is untouched; day two's has a name of its own.
    assert_eq!(
        fs::read(wd.path("home/responses/export.jsonl")).expect("day one's bodies"),
        first
    );
    let path = second.conversations()[0]["path"]
        .as_str()
        .expect("path")
        .to_string();
    assert_ne!(path, "responses/export.jsonl");
    let bodies = fs::read_to_string(wd.path("home").join(&path)).expect("day two's bodies");
    assert_eq!(bodies.lines().count(), 3);
    // x.jsonl and x.jsonl.zst in one run would share responses/x.jsonl: each has its own.
    wd.create_jsonl("pair/x.jsonl", &records("plain", 1));
    let packed = std::process::Command::new("zstd")
        .args(["-q", "-o"])
        .arg(wd.path("pair/x.jsonl.zst"))
        .arg(wd.path("pair/x.jsonl"))
        .status()
        .expect("zstd (installed by .ci/run)");
    assert!(packed.success());
    wd.create_jsonl("pair/x.jsonl", &records("plain, other", 1));
    let pair = wd.convert("pair", "pairs", &["--format", "responses"], 0);
    let paths: BTreeSet<String> = pair
        .conversations()
        .iter()
        .map(|c| c["path"].as_str().expect("path").to_string())
        .collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
}

/// `records` spread over days: record `i` on day `days[i]` after 2023-11-14.
fn records_on_days(tag: &str, days: &[i64]) -> Vec<Value> {
    records(tag, days.len())
        .into_iter()
        .zip(days)
        .map(|(mut record, day)| {
            record["created"] = json!(1_700_000_000 + day * 86_400);
            record
        })
        .collect()
}

#[test]
fn a_dry_run_plans_for_each_session_what_the_run_then_does() {
    // A dry run places a session whose folder is missing from the home on the collector's
    // thread, and hands the rest to the pool, which reads what is on disk: both ways must
    // decide what the run then does.
    let wd = Workdir::new("plan-is-the-run");
    wd.create_jsonl("in/a.jsonl", &records_on_days("first", &[0, 0, 0, 1, 1]));
    wd.convert("in", "home", &[], 0);
    let written = sessions(&wd, "home");
    assert_eq!(written.len(), 5);
    // The user deleted day two's sessions, and Codex resumed one of day one's.
    let day_two = wd.path("home/sessions/2023/11/15");
    assert!(day_two.is_dir(), "{written:?}");
    fs::remove_dir_all(&day_two).expect("delete day two");
    let resumed = written
        .iter()
        .find(|p| p.contains("2023/11/14"))
        .expect("a day-one session");
    let mut bytes = fs::read(wd.path("home").join(resumed)).expect("rollout");
    bytes.extend_from_slice(
        b"{\"timestamp\":\"2030-01-01T00:00:00.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"task_started\"}}\n",
    );
    fs::write(wd.path("home").join(resumed), bytes).expect("resume");
    // New conversations: one on day one (its folder is there), two on a day not seen yet.
    wd.create_jsonl("in/b.jsonl", &records_on_days("second", &[0, 3, 3]));
    // `--full`: the run reads a.jsonl again too (unchanged since the first run, it would skip
    // it), as the dry run does.
    wd.convert("in", "home", &["--dry-run", "--full"], 0);
    let plan: Value = serde_json::from_slice(
        &fs::read(wd.path("home/rollover/runs/0002/summary.json")).expect("the plan's summary"),
    )
    .expect("json");
    let run = wd.convert("in", "home", &["--full"], 0).summary();
    assert_eq!(plan["dry_run"], true);
    for key in [
        "sessions_new",
        "sessions_updated",
        "sessions_kept",
        "sessions_withheld",
        "sessions_replaced",
        "sessions_duplicate",
        "rollouts_unchanged",
    ] {
        assert_eq!(
            plan[key], run[key],
            "{key}: the plan said one thing, the run did another"
        );
    }
    assert_eq!(n(&run, "sessions_new"), 3);
    assert_eq!(n(&run, "sessions_withheld"), 2);
    // Day one's three sessions, the resumed one too: the source has nothing new for them.
    assert_eq!(n(&run, "rollouts_unchanged"), 3);
    assert_eq!(sessions(&wd, "home").len(), 3 + 3);
}
