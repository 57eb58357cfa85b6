//! Sharded runs (issue 15): `convert --shard K/N` over one archive, each shard a separate
//! process writing into one shared home, then `report merge`, must give exactly what one
//! unsharded run gives: the same rollouts byte for byte, the same report lines in the same
//! order, a summary whose numbers add up to the unsharded run's.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::Workdir;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rollover");
/// Small enough that the large files are split into many ranges, large enough that the
/// others are not.
const SPLIT: &str = "64KiB";
/// The job engines' variables: cleared for every run, so a test run inside a Slurm job
/// array or a Kubernetes Job is not sharded by its own environment.
const ENGINE_VARS: [&str; 3] = [
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "JOB_COMPLETION_INDEX",
];

fn rollover(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(BIN);
    command.current_dir(dir).args(args).stdin(Stdio::null());
    for var in ENGINE_VARS {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    command
        .output()
        .unwrap_or_else(|e| panic!("cannot run rollover {args:?}: {e}"))
}

fn show(args: &[&str], out: &Output) -> String {
    format!(
        "rollover {}\nstatus {:?}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The archive: the shipped samples (every shape, a gzip and a zstd file, a JSON document),
/// a few small generated files, a truncated zstd file (damage), and two files much larger
/// than the rest: one plain, with blank lines and broken records in it, and one zstd.
fn archive(wd: &Workdir) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for entry in fs::read_dir(root.join("samples")).expect("samples") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        if rollover::source::discover::is_record_file(&path) {
            wd.create(
                &format!("archive/samples/{name}"),
                fs::read(&path).expect("read"),
            );
        }
    }
    let generate = |records: u32, seed: u32| -> Vec<u8> {
        let out = wd.path(&format!("gen-{seed}.jsonl"));
        let status = Command::new("python3")
            .arg(root.join("samples/generate.py"))
            .args([
                "--records",
                &records.to_string(),
                "--seed",
                &seed.to_string(),
            ])
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::null())
            .status()
            .expect("python3 runs samples/generate.py (bash .ci/run installs python3)");
        assert!(status.success(), "samples/generate.py failed");
        fs::read(&out).expect("generated archive")
    };
    for seed in 1..=5 {
        wd.create(
            &format!("archive/small/part-{seed}.jsonl"),
            generate(8, seed),
        );
    }
    // The plain large file: blank lines, a broken record and CRLF endings here and there.
    let mut big = Vec::new();
    for (n, line) in generate(500, 42).split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        big.extend_from_slice(line);
        match n % 41 {
            7 => big.extend_from_slice(b"\n\n"),
            13 => big.extend_from_slice(b"\r\n"),
            20 => big.extend_from_slice(b"\n{\"messages\": [{\"role\": \"user\"\n"),
            _ => big.push(b'\n'),
        }
    }
    wd.create("archive/huge/big.jsonl", &big);
    let compressed = zstd::encode_all(&generate(300, 7)[..], 3).expect("zstd");
    wd.create("archive/huge/big-z.jsonl.zst", &compressed);
    // A Claude Code session larger than the split size: its lines make one conversation, so it
    // is never cut into ranges (one shard reads it whole).
    let session = root.join("../shared/corpora/sources/claude-code/spotter-v2.1/subagent.jsonl");
    let session = fs::read(&session).expect("the corpus beside the project (../shared)");
    assert!(session.len() > 2 * (64 << 10), "the session would be split");
    wd.create("archive/claude/session.jsonl", &session);
    let chat = fs::read(root.join("samples/chat-completions.jsonl.zst")).expect("sample");
    wd.create("archive/damaged.jsonl.zst", &chat[..chat.len() * 2 / 3]);
    let small = fs::metadata(wd.path("archive/small/part-1.jsonl")).expect("small");
    assert!(small.len() < 64 << 10, "the small files are not split");
    assert!(
        big.len() > 20 * (64 << 10),
        "the large file is split into many ranges"
    );
}

/// Every file under `dir`, by relative path.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(dir).expect("below").display().to_string();
                files.insert(relative, fs::read(&path).expect("read"));
            }
        }
    }
    files
}

fn json(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("JSON")
}

fn n(value: &Value, key: &str) -> u64 {
    value[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {value}"))
}

/// Runs the shards of `count` as separate processes at once, each shard's index from a
/// different source (the flag, Slurm's variables, Kubernetes' index).
fn run_shards(wd: &Workdir, home: &str, count: u32, only: &[u32]) {
    let mut children = Vec::new();
    for index in only {
        let shard = format!("{index}/{count}");
        let shards = count.to_string();
        let (mut args, env): (Vec<String>, Vec<(&str, String)>) = match index % 3 {
            0 => (vec!["--shard".into(), shard.clone()], vec![]),
            1 => (
                vec![],
                vec![
                    ("SLURM_ARRAY_TASK_ID", index.to_string()),
                    ("SLURM_ARRAY_TASK_COUNT", shards.clone()),
                ],
            ),
            _ => (
                vec!["--shards".into(), shards.clone()],
                vec![("JOB_COMPLETION_INDEX", index.to_string())],
            ),
        };
        let mut all: Vec<String> = ["convert", "archive", "--out", home, "--jobs", "1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        all.extend(["--split-bytes".to_string(), SPLIT.to_string()]);
        all.append(&mut args);
        let mut command = Command::new(BIN);
        command
            .current_dir(wd.root())
            .args(&all)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for var in ENGINE_VARS {
            command.env_remove(var);
        }
        for (k, v) in &env {
            command.env(k, v);
        }
        let child = command.spawn().expect("spawn a shard");
        children.push((all, env, shard, child));
    }
    for (args, env, shard, child) in children {
        let out = child.wait_with_output().expect("shard ends");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let shown = format!("{env:?} {}", show(&args, &out));
        // Records quarantined or a file damaged: exit 1; anything else is a failure.
        assert!(matches!(out.status.code(), Some(0 | 1)), "{shown}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let source = match env.first() {
            None => "from --shard",
            Some(("SLURM_ARRAY_TASK_ID", _)) => {
                "from SLURM_ARRAY_TASK_ID, count from SLURM_ARRAY_TASK_COUNT"
            }
            Some(_) => "from JOB_COMPLETION_INDEX, count from --shards",
        };
        let said = format!("shard {shard} ({source})");
        assert!(stderr.contains(&said), "{said}\n{shown}");
    }
}

/// Where the summary says the records went: converted, merged into a conversation,
/// quarantined, joined, or dropped by a rule.
fn placed(summary: &Value) -> u64 {
    let dropped: u64 = summary["records_dropped"]
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    // `records_merged` is left out of a summary where it is 0.
    let merged = summary["records_merged"].as_u64().unwrap_or(0);
    ["converted", "quarantined", "joined"]
        .iter()
        .map(|k| n(summary, k))
        .sum::<u64>()
        + merged
        + dropped
}

fn merge(wd: &Workdir, home: &str) -> Output {
    rollover(wd.root(), &["report", "merge", home], &[])
}

/// The union of N = 1, 3 and 7 shards, each run as its own process, equals one unsharded run.
#[test]
fn union_of_shards_equals_an_unsharded_run() {
    let wd = Workdir::new("sharding-union");
    archive(&wd);
    let args = ["convert", "archive", "--out", "whole", "--jobs", "2"];
    let whole = rollover(wd.root(), &args, &[]);
    assert_eq!(whole.status.code(), Some(1), "{}", show(&args, &whole));
    let expected_sessions = tree(&wd.path("whole/sessions"));
    let expected_run = wd.path("whole/rollover/latest");
    let expected_summary = json(&expected_run.join("summary.json"));
    assert!(n(&expected_summary, "quarantined") > 0 && n(&expected_summary, "blank_lines") > 0);
    assert_eq!(
        expected_summary["damaged_files"].as_array().map(Vec::len),
        Some(1)
    );
    assert!(expected_sessions.len() > 800, "{}", expected_sessions.len());

    for count in [1u32, 3, 7] {
        let home = format!("sharded-{count}");
        let all: Vec<u32> = (0..count).collect();
        run_shards(&wd, &home, count, &all);
        let merged = merge(&wd, &home);
        assert_eq!(
            merged.status.code(),
            Some(1),
            "{}",
            show(&["report", "merge"], &merged)
        );

        let sessions = tree(&wd.path(&format!("{home}/sessions")));
        assert_eq!(
            sessions.keys().collect::<Vec<_>>(),
            expected_sessions.keys().collect::<Vec<_>>(),
            "{count} shards: the same rollout paths"
        );
        for (path, bytes) in &expected_sessions {
            assert!(sessions[path] == *bytes, "{count} shards: {path} differs");
        }
        let run = wd.path(&format!("{home}/rollover/latest"));
        for name in ["conversations.jsonl", "quarantine.jsonl", "report.md"] {
            let (got, want) = (fs::read(run.join(name)), fs::read(expected_run.join(name)));
            assert!(
                got.is_ok() && got.ok() == want.ok(),
                "{count} shards: {name}"
            );
        }
        let mut summary = json(&run.join("summary.json"));
        assert_eq!(summary["merged_shards"], count);
        summary.as_object_mut().map(|m| m.remove("merged_shards"));
        assert_eq!(summary, expected_summary, "{count} shards: summary.json");

        // The numbers add up: in the merged run, and over the shards.
        assert_eq!(n(&summary, "records"), placed(&summary));
        assert_eq!(
            summary["formats"]["claude-code"], 1,
            "{count} shards: formats"
        );
        let mut totals = [0u64; 4];
        for index in 0..count {
            let folder = format!("{home}/rollover/shards/{index:04}-of-{count:04}/latest");
            let shard = json(&wd.path(&folder).join("summary.json"));
            assert_eq!(shard["shard"]["index"], index);
            assert_eq!(n(&shard, "records"), placed(&shard));
            for (total, key) in
                totals
                    .iter_mut()
                    .zip(["files", "records", "converted", "bytes_on_disk"])
            {
                *total += n(&shard, key);
            }
        }
        // The large files were split: their records came from several shards.
        for key in ["archive/huge/big.jsonl", "archive/huge/big-z.jsonl.zst"] {
            let readers = (0..count)
                .filter(|index| {
                    let folder = format!("{home}/rollover/shards/{index:04}-of-{count:04}/latest");
                    let files = json(&wd.path(&folder).join("shard.json"))["files"].clone();
                    files
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|f| f["key"] == key && f["stats"]["records"].as_u64().unwrap_or(0) > 0)
                })
                .count();
            assert!(
                readers == (count as usize).min(3) || readers >= 3,
                "{key}: {readers}"
            );
        }
        let want: Vec<u64> = ["files", "records", "converted", "bytes_on_disk"]
            .iter()
            .map(|k| n(&expected_summary, k))
            .collect();
        assert_eq!(totals.to_vec(), want, "{count} shards: files counted once");
        let leftovers: Vec<_> = tree(&wd.path(&home))
            .into_keys()
            .filter(|p| p.contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

/// A shard that did not run is named by the merge, with the command that fixes it; running
/// it (alone) then makes the merge whole.
#[test]
fn a_missing_shard_is_named_and_rerunning_it_completes_the_merge() {
    let wd = Workdir::new("sharding-missing");
    archive(&wd);
    let args = ["convert", "archive", "--out", "whole"];
    rollover(wd.root(), &args, &[]);
    run_shards(&wd, "home", 3, &[0, 1]);
    let merged = merge(&wd, "home");
    let stderr = String::from_utf8_lossy(&merged.stderr);
    assert_eq!(merged.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("shard 2/3 is missing"), "{stderr}");
    assert!(stderr.contains("--shard K/3"), "{stderr}");
    assert!(
        !wd.path("home/rollover/runs").exists(),
        "no merged run is written"
    );

    // A shard whose run was killed (no summary.json) did not finish.
    run_shards(&wd, "home", 3, &[2]);
    let summary = wd.path("home/rollover/shards/0001-of-0003/runs/0001/summary.json");
    let kept = fs::read(&summary).expect("shard 1's summary");
    fs::remove_file(&summary).expect("remove");
    let merged = merge(&wd, "home");
    let stderr = String::from_utf8_lossy(&merged.stderr);
    assert_eq!(merged.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("shard 1/3 did not finish"), "{stderr}");
    fs::write(&summary, kept).expect("put back");

    let merged = merge(&wd, "home");
    assert_eq!(
        merged.status.code(),
        Some(1),
        "{}",
        show(&["merge"], &merged)
    );
    let got = fs::read(wd.path("home/rollover/latest/conversations.jsonl")).expect("merged");
    let want = fs::read(wd.path("whole/rollover/latest/conversations.jsonl")).expect("whole");
    assert!(
        got == want,
        "the merged conversations are the unsharded run's"
    );
    assert!(tree(&wd.path("home/sessions")) == tree(&wd.path("whole/sessions")));
}

/// Shards that ran with different rules cannot be merged into one report.
#[test]
fn shards_with_different_rules_are_not_merged() {
    let wd = Workdir::new("sharding-rules");
    wd.create(
        "archive/a.jsonl",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n",
    );
    wd.create(
        "archive/b.jsonl",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"yo\"}]}\n",
    );
    wd.create("cwd.toml", "[session]\ncwd = \"/srv\"\n");
    let first = ["convert", "archive", "--out", "home", "--shard", "0/2"];
    let out = rollover(wd.root(), &first, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&first, &out));
    let second = [
        "convert", "archive", "--out", "home", "--shard", "1/2", "--rules", "default", "--rules",
        "cwd.toml",
    ];
    let out = rollover(wd.root(), &second, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&second, &out));
    let merged = merge(&wd, "home");
    let stderr = String::from_utf8_lossy(&merged.stderr);
    assert_eq!(merged.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("shard 1/2") && stderr.contains("other rules"),
        "{stderr}"
    );
}

/// Extra arguments, environment, and what the error must say.
type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

/// Bad shard numbers and engine variables are usage errors that say the fix.
#[test]
fn shard_numbers_are_checked_and_the_engine_index_needs_a_count() {
    let wd = Workdir::new("sharding-usage");
    wd.create(
        "archive/a.jsonl",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n",
    );
    let cases: [Case; 6] = [
        (&["--shard", "3/3"], &[], "numbered 0 to 2"),
        (&["--shard", "1/0"], &[], "at least 1"),
        (&["--shards", "4"], &[], "needs this run's index"),
        (&[], &[("JOB_COMPLETION_INDEX", "1")], "pass --shards N"),
        (
            &[],
            &[("SLURM_ARRAY_TASK_ID", "x")],
            "is not a shard number",
        ),
        (
            &["--shards", "2"],
            &[("SLURM_ARRAY_TASK_ID", "2")],
            "shard 2 is not below the shard count 2",
        ),
    ];
    for (extra, env, message) in cases {
        let mut args = vec!["convert", "archive", "--out", "home"];
        args.extend_from_slice(extra);
        let out = rollover(wd.root(), &args, env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{env:?} {}", show(&args, &out));
        assert!(stderr.contains(message), "{message}: {stderr}");
    }
    assert!(!wd.path("home").exists(), "nothing written");
    // Under a Slurm array task, the run says where its shard came from.
    let args = ["convert", "archive", "--out", "home"];
    let env = [
        ("SLURM_ARRAY_TASK_ID", "0"),
        ("SLURM_ARRAY_TASK_COUNT", "1"),
    ];
    let out = rollover(wd.root(), &args, &env);
    assert_eq!(out.status.code(), Some(0), "{}", show(&args, &out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("shard 0/1 (from SLURM_ARRAY_TASK_ID"),
        "{stderr}"
    );
}

/// Scheduled re-runs work per shard: a second sharded run over an unchanged archive skips
/// what each shard converted, and the merge reports what an unsharded re-run reports.
#[test]
fn a_rerun_of_every_shard_is_incremental_like_an_unsharded_rerun() {
    let wd = Workdir::new("sharding-rerun");
    archive(&wd);
    // The first runs find the quarantined records and the damage (1); the second skips them.
    for expected in [1, 0] {
        let args = ["convert", "archive", "--out", "whole"];
        let out = rollover(wd.root(), &args, &[]);
        assert_eq!(out.status.code(), Some(expected), "{}", show(&args, &out));
        run_shards(&wd, "home", 3, &[0, 1, 2]);
        let merged = merge(&wd, "home");
        let shown = show(&["merge"], &merged);
        assert_eq!(merged.status.code(), Some(expected), "{shown}");
    }
    let mut summary = json(&wd.path("home/rollover/runs/0002/summary.json"));
    summary.as_object_mut().map(|m| m.remove("merged_shards"));
    let expected = json(&wd.path("whole/rollover/runs/0002/summary.json"));
    assert_eq!(n(&expected, "files_unchanged"), n(&expected, "files"));
    assert_eq!(summary, expected);
    for name in ["conversations.jsonl", "quarantine.jsonl"] {
        let got = fs::read(wd.path("home/rollover/latest").join(name)).expect("merged");
        let want = fs::read(wd.path("whole/rollover/latest").join(name)).expect("whole");
        assert!(got == want, "{name}");
    }
}
