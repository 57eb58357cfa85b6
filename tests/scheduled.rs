//! Scheduled conversion jobs (issue 8): incremental, resumable, safe to kill, one at a time,
//! private. Each test runs the real binary.

mod identity;
mod prune;
mod sequences;
mod state_files;
mod state_model;
mod versions;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::Workdir;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rollover");

/// A generated archive: `files` JSONL files of `per_file` small chat conversations each.
fn archive(wd: &Workdir, files: usize, per_file: usize) {
    archive_padded(wd, files, per_file, 0);
}

/// [`archive`], each answer `pad` bytes longer: fewer records fill a batch (4 MiB at most).
fn archive_padded(wd: &Workdir, files: usize, per_file: usize, pad: usize) {
    let padding = "x".repeat(pad);
    for f in 0..files {
        let mut text = String::new();
        for r in 0..per_file {
            let record = json!({
                "id": format!("conv-{f}-{r}"),
                "created": 1_700_000_000 + (f * per_file + r) as i64,
                "messages": [
                    {"role": "system", "content": format!("You help with file {f}.")},
                    {"role": "user", "content": format!("Question {r} about archive file {f}?")},
                    {"role": "assistant", "content": format!("Answer {r}: it holds record {r}.{padding}")},
                ]
            });
            text.push_str(&record.to_string());
            text.push('\n');
        }
        wd.create(&format!("archive/part-{f:02}.jsonl"), text);
    }
}

fn rollover(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run rollover")
}

fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rollover")
}

/// Every file under `root` (symlinks not followed), relative path → bytes.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let entry = entry.expect("dir entry");
            let path = entry.path();
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let relative = path.strip_prefix(root).expect("below root");
                out.insert(
                    relative.to_string_lossy().into_owned(),
                    fs::read(&path).unwrap_or_default(),
                );
            }
        }
    }
    out
}

/// The cumulative state of a home: every rollout and the manifest (each run's own report
/// folder describes that run, and a resumed run did less work than an uninterrupted one).
fn state(home: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut state: BTreeMap<String, Vec<u8>> = tree(&home.join("sessions"))
        .into_iter()
        .map(|(k, v)| (format!("sessions/{k}"), v))
        .collect();
    let manifest = fs::read(home.join("rollover/manifest")).unwrap_or_default();
    state.insert("rollover/manifest".to_string(), manifest);
    state
}

fn assert_same_state(expected: &BTreeMap<String, Vec<u8>>, home: &Path, what: &str) {
    let actual = state(home);
    let missing: Vec<&String> = expected
        .keys()
        .filter(|k| !actual.contains_key(*k))
        .collect();
    let extra: Vec<&String> = actual
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .collect();
    assert!(missing.is_empty(), "{what}: missing {missing:?}");
    assert!(extra.is_empty(), "{what}: extra {extra:?}");
    for (name, bytes) in expected {
        assert!(actual[name] == *bytes, "{what}: {name} differs");
    }
    let temporary: Vec<String> = tree(home)
        .into_keys()
        .filter(|k| k.rsplit('/').next().is_some_and(|n| n.starts_with('.')))
        .collect();
    assert!(
        temporary.is_empty(),
        "{what}: temporary files left: {temporary:?}"
    );
}

fn count_rollouts(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                count_rollouts(&e.path())
            } else {
                usize::from(e.file_name().to_string_lossy().starts_with("rollout-"))
            }
        })
        .sum()
}

fn summary(home: &Path) -> Value {
    let bytes = fs::read(home.join("rollover/latest/summary.json")).expect("summary.json");
    serde_json::from_slice(&bytes).expect("summary is JSON")
}

/// `convert` with `ROLLOVER_FAILPOINT=FAILPOINT` set.
fn rollover_with_failpoint(dir: &Path, failpoint: &str, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .env("ROLLOVER_FAILPOINT", failpoint)
        .output()
        .expect("run rollover")
}

/// A run killed with SIGKILL at any point (the failpoint `die-after:N`: the process sends itself
/// SIGKILL once its writers have placed N rollouts, other writers perhaps mid-file), then run
/// again, leaves exactly the rollouts and manifest of a run never interrupted, and no
/// temporary file. The 800 records and 8 file ends make two batches (512 at most): the first
/// (507 records) is placed before the collector records its five whole files in the
/// manifest's journal. The kills land at the first rollout, inside the first batch and at its
/// last rollout (nothing recorded yet), at the first of the second (five files recorded), at a
/// file's last rollout and the next, and at the last rollout, before the run records its end.
/// One killed home also has its journal's last line cut, as a kill in the middle of that
/// append leaves it. Each rollout costs a file creation (~1 ms here), hence the size.
#[test]
fn killed_at_any_point_then_rerun_gives_the_uninterrupted_tree() {
    let wd = Workdir::new("kill");
    let (files, per_file) = (8, 100);
    archive(&wd, files, per_file);
    let total = files * per_file;
    let out = rollover(wd.root(), &["convert", "archive", "--out", "clean"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = state(&wd.path("clean"));
    assert_eq!(count_rollouts(&wd.path("clean/sessions")), total);

    let (mut cut_journal, mut recorded_files) = (false, Vec::new());
    for n in [1, 300, 507, 508, 600, 601, total - 1, total] {
        let home = format!("killed-{n}");
        let killed = rollover_with_failpoint(
            wd.root(),
            &format!("die-after:{n}"),
            &["convert", "archive", "--out", &home],
        );
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&killed.status),
            Some(9),
            "die-after:{n} did not kill the run: {}",
            String::from_utf8_lossy(&killed.stderr)
        );
        let home = wd.path(&home);
        // The kill left the work unfinished: at least N rollouts, and no finished manifest.
        assert!(count_rollouts(&home.join("sessions")) >= n, "die-after:{n}");
        assert!(
            !home.join("rollover/manifest").exists(),
            "die-after:{n}: the killed run finished its manifest"
        );
        let journal = home.join("rollover/manifest.journal");
        let recorded = fs::read_to_string(&journal).unwrap_or_default();
        recorded_files.push(recorded.lines().count());
        if !cut_journal && recorded.lines().count() >= 2 {
            // Half of its last line, as a kill in the middle of that append leaves it.
            let last = recorded.trim_end().rfind('\n').expect("two lines") + 1;
            let cut = last + (recorded.len() - last) / 2;
            fs::write(&journal, &recorded[..cut]).expect("cut the journal");
            cut_journal = true;
        }
        let again = rollover(
            wd.root(),
            &["convert", "archive", "--out", &format!("killed-{n}")],
        );
        assert_eq!(
            again.status.code(),
            Some(0),
            "die-after:{n}, run again: {}",
            String::from_utf8_lossy(&again.stderr)
        );
        assert_same_state(&expected, &home, &format!("die-after:{n}"));
        // The killed run's folder was taken back: one finished run, numbered 0001.
        assert_eq!(summary(&home)["run"], 1, "die-after:{n}");
    }
    // Kills both before any file was recorded and after some were.
    assert!(
        recorded_files.contains(&0) && recorded_files.iter().any(|n| *n >= 2) && cut_journal,
        "files in the journal at each kill: {recorded_files:?}"
    );
}

#[test]
fn a_rerun_with_nothing_changed_converts_nothing_and_changes_only_what_changed() {
    let wd = Workdir::new("incremental");
    archive(&wd, 3, 5);
    wd.convert("archive", "home", &[], 0);
    let home = wd.path("home");
    let first = state(&home);

    let again = wd.convert("archive", "home", &[], 0);
    let s = again.summary();
    assert_eq!(
        (s["records"].as_u64(), s["files_unchanged"].as_u64()),
        (Some(0), Some(3))
    );
    assert_eq!(s["run"], 2);
    assert_same_state(&first, &home, "unchanged re-run");

    // A new file converts alone.
    wd.create_jsonl(
        "archive/part-09.jsonl",
        &[json!({"id": "new", "messages": [{"role": "user", "content": "new one"}]})],
    );
    let s = wd.convert("archive", "home", &[], 0).summary();
    assert_eq!(
        (s["records"].as_u64(), s["files_unchanged"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(count_rollouts(&home.join("sessions")), 16);

    // Appending to a file converts it again, and only it: its old records are already
    // current, its new one is written.
    let part = wd.path("archive/part-00.jsonl");
    let mut text = fs::read_to_string(&part).expect("read part");
    text.push_str(
        &json!({"id": "appended", "messages": [{"role": "user", "content": "late"}]}).to_string(),
    );
    text.push('\n');
    fs::write(&part, text).expect("append");
    let s = wd.convert("archive", "home", &[], 0).summary();
    assert_eq!(
        (s["records"].as_u64(), s["files_unchanged"].as_u64()),
        (Some(6), Some(3))
    );
    assert_eq!(
        (s["rollouts_unchanged"].as_u64(), s["converted"].as_u64()),
        (Some(5), Some(6))
    );
    assert_eq!(count_rollouts(&home.join("sessions")), 17);

    // Truncating a file removes no session (copy semantics): those of the records that are
    // gone are left, remembered by the manifest; `--prune` would remove them.
    let part = wd.path("archive/part-01.jsonl");
    let text = fs::read_to_string(&part).expect("read part");
    let kept: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
    fs::write(&part, kept).expect("truncate part");
    let s = wd.convert("archive", "home", &[], 0).summary();
    assert_eq!(s["records"], 2);
    assert_eq!(s["rollouts_removed"], 0);
    assert_eq!(s["sessions_left"], 3);
    assert_eq!(s["rollouts_unchanged"], 2);
    assert_eq!(count_rollouts(&home.join("sessions")), 17);
    let manifest = fs::read_to_string(home.join("rollover/manifest")).expect("manifest");
    let lines: Vec<Value> = manifest
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("manifest line"))
        .collect();
    assert_eq!(lines[0], json!({"manifest": 3}));
    let entry = lines
        .iter()
        .find(|e| e["name"] == "archive/part-01.jsonl")
        .expect("entry for part-01");
    assert_eq!(entry["records"], 2);
    assert_eq!(entry["rollouts"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        lines.iter().filter(|l| l.get("orphan").is_some()).count(),
        3
    );
}

#[test]
fn a_session_resumed_in_codex_is_never_clobbered_and_force_keeps_a_copy() {
    let wd = Workdir::new("clobber");
    archive(&wd, 1, 3);
    wd.convert("archive", "home", &[], 0);
    let home = wd.path("home");
    let mut rollouts: Vec<PathBuf> = Vec::new();
    let mut stack = vec![home.join("sessions")];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(dir).expect("read").filter_map(Result::ok) {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                rollouts.push(e.path());
            }
        }
    }
    rollouts.sort();
    let resumed = &rollouts[0];
    let original = fs::read(resumed).expect("read rollout");
    // What Codex appends when a user resumes the session and types a new turn.
    let appended_line = b"{\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"user_message\",\"message\":\"one more thing\"}}\n";
    let mut resumed_bytes = original.clone();
    resumed_bytes.extend_from_slice(appended_line);
    fs::write(resumed, &resumed_bytes).expect("append");
    let relative = resumed
        .strip_prefix(&home)
        .expect("below home")
        .to_string_lossy()
        .into_owned();

    // A plain re-run: the input is unchanged, nothing is touched.
    wd.convert("archive", "home", &[], 0);
    assert_eq!(fs::read(resumed).expect("read"), resumed_bytes);
    // --full converts again; the source has nothing new for the resumed session: it is left
    // as Codex wrote it, and not reported as kept.
    let full = wd.convert("archive", "home", &["--full"], 0);
    assert_eq!(fs::read(resumed).expect("read"), resumed_bytes);
    assert_eq!(full.summary()["sessions_kept"], json!([]));
    assert_eq!(full.summary()["rollouts_unchanged"], 3);
    // Another working folder gives every session newer content: the resumed one is kept,
    // listed and pending (exit 1), the others updated.
    let newer = wd.convert("archive", "home", &["--cwd", "/srv/elsewhere"], 1);
    assert_eq!(fs::read(resumed).expect("read"), resumed_bytes);
    assert_eq!(newer.summary()["sessions_kept"], json!([relative]));
    assert_eq!(newer.summary()["sessions_updated"], 2);
    assert!(
        newer
            .run
            .stdout()
            .contains("kept         1 session changed in Codex since written, while the"),
        "{}",
        newer.run
    );
    // --force replaces it, after copying it aside.
    let forced = wd.convert(
        "archive",
        "home",
        &["--cwd", "/srv/elsewhere", "--force"],
        0,
    );
    assert_ne!(fs::read(resumed).expect("read"), resumed_bytes);
    assert_eq!(forced.summary()["sessions_replaced"], json!([relative]));
    let copy = home
        .join("rollover/replaced")
        .join(format!(
            "{:04}",
            forced.summary()["run"].as_u64().unwrap_or(0)
        ))
        .join(&relative);
    assert_eq!(
        forced.summary()["copies_kept"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(fs::read(copy).expect("the replaced copy"), resumed_bytes);
    let _ = original;
}

#[test]
fn a_second_run_on_the_same_output_exits_3_and_a_stale_lock_is_taken_over() {
    let wd = Workdir::new("lock");
    archive(&wd, 1, 2);
    // Held by a live process (this test), with its pid inside.
    let held = hold_lock(&wd, "home");
    let lock_path = wd.path("home/rollover/lock");
    let out = rollover(wd.root(), &["convert", "archive", "--out", "home"]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "the output home is in use by another rollover run (pid {}); wait for it to end, or stop it",
        std::process::id()
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(!wd.path("home/sessions").exists());
    drop(held);

    // A lock file left by a process that died (no lock held): taken over.
    let mut dead = Command::new("true").spawn().expect("spawn true");
    let dead_pid = dead.id();
    dead.wait().expect("reap");
    fs::write(&lock_path, format!("{dead_pid}\n")).expect("write stale pid");
    let out = rollover(wd.root(), &["convert", "archive", "--out", "home"]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "took over the lock left by pid {dead_pid}, which is no longer running"
        )),
        "{stderr}"
    );
}

/// Takes `home`'s run lock in this process, as a running rollover holds it: an advisory lock
/// on the folder `home/rollover` itself, with this process's pid in `home/rollover/lock`.
fn hold_lock(wd: &Workdir, home: &str) -> fs::File {
    let state = wd.path(&format!("{home}/rollover"));
    fs::create_dir_all(&state).expect("mkdir");
    let held = fs::File::open(&state).expect("open the state folder");
    held.try_lock().expect("take the lock");
    let lock_path = wd.path(&format!("{home}/rollover/lock"));
    fs::write(&lock_path, format!("{}\n", std::process::id())).expect("write pid");
    held
}

/// Lets the lock go as a finished run does: the pid emptied first, then the lock released.
fn release_lock(wd: &Workdir, home: &str, held: fs::File) {
    fs::write(wd.path(&format!("{home}/rollover/lock")), b"").expect("empty the lock file");
    drop(held);
}

#[test]
fn wait_waits_for_the_lock_then_gives_up_naming_the_holder_or_runs_once_it_is_free() {
    let wd = Workdir::new("wait");
    archive(&wd, 2, 3);
    let held = hold_lock(&wd, "home");
    let pid = std::process::id();
    // The time runs out: exit 3, naming the holder and how long it waited; nothing written.
    for command in ["convert", "audit"] {
        let out = rollover(
            wd.root(),
            &[command, "archive", "--out", "home", "--wait", "1"],
        );
        assert_eq!(out.status.code(), Some(3), "{command}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "home is in use by another rollover run (pid {pid}): waiting up to 1 s for it (--wait)"
            )),
            "{command}: {stderr}"
        );
        assert!(
            stderr.contains(&format!(
                "the output home is still in use by another rollover run (pid {pid}) after waiting 1."
            )) && stderr.contains(" s (--wait); wait longer, or stop that run"),
            "{command}: {stderr}"
        );
        assert!(!wd.path("home/sessions").exists());
        assert!(!wd.path("home/rollover/runs").exists());
    }
    // With --json, the scheduler reads why.
    let out = rollover(
        wd.root(),
        &[
            "convert", "archive", "--out", "home", "--wait", "0.2", "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(json["exit_reason"], "locked");

    // A longer wait: the run starts once the holder lets the lock go.
    let mut child = spawn(
        wd.root(),
        &["convert", "archive", "--out", "home", "--wait", "600"],
    );
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    // Its note says it is waiting: then, and only then, the lock is let go.
    let note = format!("in use by another rollover run (pid {pid}): waiting up to 600 s");
    let mut first = String::new();
    while !first.contains(&note) {
        let mut line = String::new();
        let read = std::io::BufRead::read_line(&mut stderr, &mut line).expect("read stderr");
        assert!(read > 0, "the run ended without waiting: {first}");
        first.push_str(&line);
    }
    release_lock(&wd, "home", held);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).expect("read stderr");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "{first}{rest}");
    assert!(!rest.contains("took over the lock"), "{rest}");
    assert_eq!(count_rollouts(&wd.path("home/sessions")), 6);
    assert_eq!(summary(&wd.path("home"))["run"], 1);
}

/// The names of the run folders under `home/rollover/runs`, sorted.
fn run_folders(home: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(home.join("rollover/runs"))
        .expect("read runs")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn keep_runs_removes_the_oldest_run_folders_and_never_the_latest() {
    let wd = Workdir::new("keep_runs");
    archive(&wd, 1, 2);
    let home = wd.path("home");
    for _ in 0..4 {
        let out = rollover(wd.root(), &["convert", "archive", "--out", "home"]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    assert_eq!(run_folders(&home), ["0001", "0002", "0003", "0004"]);
    // One run with --keep-runs N: exit 0, and what it said on stderr.
    let keep = |command: &str, n: &str| {
        let out = rollover(
            wd.root(),
            &[command, "archive", "--out", "home", "--keep-runs", n],
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Run 5 keeps itself and the one before it.
    let stderr = keep("convert", "2");
    assert_eq!(run_folders(&home), ["0004", "0005"]);
    assert!(
        stderr.contains("removed the 3 oldest run folders, keeping 2 (--keep-runs)"),
        "{stderr}"
    );
    // Numbering goes on from the last run, whatever was removed; audit prunes too.
    let stderr = keep("audit", "3");
    assert_eq!(run_folders(&home), ["0004", "0005", "0006"]);
    assert!(!stderr.contains("removed"));
    keep("convert", "1");
    assert_eq!(run_folders(&home), ["0007"]);
    assert_eq!(
        fs::read_link(home.join("rollover/latest")).expect("latest"),
        Path::new("runs/0007")
    );
    assert_eq!(summary(&home)["run"], 7);
    // Keeping more than there are removes nothing.
    keep("convert", "10");
    assert_eq!(run_folders(&home), ["0007", "0008"]);
    let stderr = keep("convert", "2");
    assert_eq!(run_folders(&home), ["0008", "0009"]);
    assert!(
        stderr.contains("removed the oldest run folder, keeping 2 (--keep-runs)"),
        "{stderr}"
    );
    // Keeping none would remove this run's own reports: a usage error, nothing run.
    let out = rollover(
        wd.root(),
        &["convert", "archive", "--out", "home", "--keep-runs", "0"],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--keep-runs <N>")
            && stderr.contains(
                "keeping 0 run folders would remove this run's own reports: keep at least 1"
            ),
        "{stderr}"
    );
    assert_eq!(run_folders(&home), ["0008", "0009"]);
}

/// Runs rollover with `args` (a shell's words) in the work folder, after `setup` (a shell
/// command: a ulimit, a umask) in the same shell.
fn in_shell(wd: &Workdir, setup: &str, args: &str) -> std::process::Output {
    Command::new("sh")
        .current_dir(wd.root())
        .arg("-c")
        .arg(format!("{setup}; exec {BIN} {args}"))
        .output()
        .unwrap_or_else(|e| panic!("run sh -c '{setup}; exec rollover {args}': {e}"))
}

#[test]
fn a_write_failure_names_the_path_once_exits_2_and_records_nothing_as_done() {
    let wd = Workdir::new("write_failure");
    // One conversation of about 20 KB: over a 8 KB file size limit.
    let long = "x".repeat(20_000);
    wd.create_jsonl(
        "archive/big.jsonl",
        &[json!({"messages": [{"role": "user", "content": long}]})],
    );
    let out = in_shell(&wd, "ulimit -f 8", "convert archive --out home");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("rollover: converting into home: cannot write home/sessions/"),
        "{stderr}"
    );
    assert!(
        stderr.contains("(check that the output folder is writable and has space): File too large"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("cannot write").count(), 1, "{stderr}");
    let manifest = fs::read_to_string(wd.path("home/rollover/manifest")).unwrap_or_default();
    assert!(manifest.is_empty(), "recorded as done: {manifest}");
    assert_eq!(count_rollouts(&wd.path("home/sessions")), 0);
    // Without the limit, the next run converts it.
    let out = rollover(wd.root(), &["convert", "archive", "--out", "home"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(count_rollouts(&wd.path("home/sessions")), 1);
}

#[test]
fn sigint_stops_cleanly_with_complete_reports_exit_130_and_the_rerun_resumes() {
    let wd = Workdir::new("sigint");
    // Records of ~60 KB, ~68 to a batch of 4 MiB: nine batches. The signal comes in the first;
    // the reader, a few batches ahead of the writers at most, stops well before the end (at
    // about 340 of the 600 here).
    let (files, per_file) = (12, 50);
    archive_padded(&wd, files, per_file, 60_000);
    let out = rollover(wd.root(), &["convert", "archive", "--out", "clean"]);
    assert_eq!(out.status.code(), Some(0));
    let expected = state(&wd.path("clean"));

    // SIGINT once 50 rollouts are placed: the process signals itself there.
    let output = rollover_with_failpoint(
        wd.root(),
        "sigint-after:50",
        &["convert", "archive", "--out", "home"],
    );
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let home = wd.path("home");
    let s = summary(&home);
    assert_eq!(s["interrupted"], "SIGINT");
    assert!(s["converted"].as_u64().unwrap_or(0) > 0);
    assert!(s["converted"].as_u64().unwrap_or(u64::MAX) < (files * per_file) as u64);
    // Complete report files: every line whole, one per conversation counted.
    let conversations = fs::read_to_string(home.join("rollover/latest/conversations.jsonl"))
        .expect("conversations.jsonl");
    assert!(conversations.ends_with('\n'));
    for line in conversations.lines() {
        serde_json::from_str::<Value>(line).expect("a whole JSON line");
    }
    assert_eq!(
        conversations.lines().count() as u64,
        s["converted"].as_u64().unwrap_or(0)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("interrupted  by SIGINT"));
    // Both reports open with the interrupted verdict, never "ready".
    let (md, html) = reports(&home);
    assert!(
        md.contains("\n**Interrupted: incomplete.** Stopped by SIGINT before the end: "),
        "{md}"
    );
    assert!(
        html.contains(
            "<p><span class=\"verdict interrupted\">Interrupted: incomplete</span> Stopped by SIGINT before the end: "
        ),
        "{html}"
    );
    for (name, report) in [("report.md", &md), ("report.html", &html)] {
        assert!(!report.contains("Verdict: ready"), "{name}: {report}");
        assert!(
            report.contains("run the same command again to resume"),
            "{name}"
        );
    }

    let again = rollover(wd.root(), &["convert", "archive", "--out", "home"]);
    assert_eq!(again.status.code(), Some(0));
    assert_same_state(&expected, &home, "resumed after SIGINT");
    assert_eq!(summary(&home)["run"], 2);
    // The run that finished the work is ready again.
    let (md, html) = reports(&home);
    assert!(md.contains("\n**Verdict: ready.**"), "{md}");
    assert!(html.contains(">Verdict: ready</span>"), "{html}");
    assert!(!md.contains("Interrupted") && !html.contains("Interrupted"));
}

/// The latest run's report.md and report.html.
fn reports(home: &Path) -> (String, String) {
    let read = |name: &str| {
        fs::read_to_string(home.join("rollover/latest").join(name))
            .unwrap_or_else(|e| panic!("read {name}: {e}"))
    };
    (read("report.md"), read("report.html"))
}

#[test]
fn files_are_0600_and_folders_0700_whatever_the_umask() {
    // 022 keeps 0600 and 0700 whole; 0277 takes the owner's write and execute bits away,
    // which would leave folders 0500 and files 0400 unless each is set outright.
    for umask in ["022", "0277"] {
        let wd = Workdir::new(&format!("modes_{umask}"));
        archive(&wd, 2, 2);
        let out = in_shell(&wd, &format!("umask {umask}"), "convert archive --out home");
        assert_eq!(out.status.code(), Some(0), "umask {umask}: {out:?}");
        assert_private_tree(&wd.path("home"));
    }
}

/// Every folder under `home` is 0700 and every file 0600.
fn assert_private_tree(home: &Path) {
    let mut checked = 0;
    let mut stack = vec![home.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mode = fs::metadata(&dir).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
        for entry in fs::read_dir(&dir).expect("read").filter_map(Result::ok) {
            let kind = entry.file_type().expect("type");
            if kind.is_symlink() {
                continue;
            }
            if kind.is_dir() {
                stack.push(entry.path());
            } else {
                let mode = entry.metadata().expect("meta").permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", entry.path().display());
                checked += 1;
            }
        }
    }
    assert!(checked >= 8, "{checked} files checked");
}

#[test]
fn json_prints_the_summary_numbers_and_the_exit_reason() {
    let wd = Workdir::new("json");
    wd.create(
        "in.jsonl",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\nnot json\n",
    );
    let out = rollover(
        wd.root(),
        &["convert", "in.jsonl", "--out", "home", "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let printed: Value = serde_json::from_str(&stdout).expect("one JSON document");
    let on_disk = summary(&wd.path("home"));
    for key in [
        "records",
        "converted",
        "quarantined",
        "items",
        "rules_fired",
        "run",
    ] {
        assert_eq!(printed[key], on_disk[key], "{key}");
    }
    assert_eq!(printed["exit_code"], 1);
    assert_eq!(printed["exit_reason"], "findings");

    // An error is JSON too.
    let locked = rollover(
        wd.root(),
        &["convert", "missing.jsonl", "--out", "home", "--json"],
    );
    assert_eq!(locked.status.code(), Some(2));
    let printed: Value = serde_json::from_slice(&locked.stdout).expect("JSON on error");
    assert_eq!(printed["exit_reason"], "error");
}

#[test]
fn max_quarantine_rate_sets_the_exit_code() {
    let wd = Workdir::new("rate");
    let mut text = String::new();
    for i in 0..9 {
        text.push_str(&format!(
            "{{\"messages\":[{{\"role\":\"user\",\"content\":\"q{i}\"}}]}}\n"
        ));
    }
    text.push_str("not json\n");
    wd.create("in.jsonl", text);
    let run = |home: &str, rate: &str| {
        let out = rollover(
            wd.root(),
            &[
                "convert",
                "in.jsonl",
                "--out",
                home,
                "--max-quarantine-rate",
                rate,
            ],
        );
        out.status.code()
    };
    assert_eq!(run("a", "0.2"), Some(0), "10 % quarantined, 20 % allowed");
    assert_eq!(run("b", "0.05"), Some(1), "10 % quarantined, 5 % allowed");
    let bad = rollover(
        wd.root(),
        &[
            "convert",
            "in.jsonl",
            "--out",
            "c",
            "--max-quarantine-rate",
            "5",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("`5` is not a share between 0 and 1"));
}
