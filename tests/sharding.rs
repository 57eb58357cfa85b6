//! Sharded runs (issue 15): `convert --shard K/N` over one archive, each shard a separate
//! process writing into one shared home, then `report merge`, must give exactly what one
//! unsharded run gives: the same rollouts byte for byte, the same report lines in the same
//! order, a summary whose numbers add up to the unsharded run's; also when Batch API requests
//! and their results files are in different shards (issue 25).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common;
use crate::common::Workdir;
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
    common::files_below(dir, dir)
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

/// Runs the shards of `count` over `archive` as separate processes at once, each shard's index
/// from a different source (the flag, Slurm's variables, Kubernetes' index).
fn run_shards(wd: &Workdir, home: &str, count: u32, only: &[u32]) {
    run_shards_of(wd, "archive", home, count, only);
}

/// [`run_shards`] over `input`; returns each shard's stderr.
fn run_shards_of(wd: &Workdir, input: &str, home: &str, count: u32, only: &[u32]) -> Vec<String> {
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
        let mut all: Vec<String> = ["convert", input, "--out", home, "--jobs", "1"]
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
    let mut stderrs = Vec::new();
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
        stderrs.push(stderr.into_owned());
    }
    stderrs
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

/// Every one of `count` shards over `input` into `home`, then `report merge`, which exits 1
/// (the archives hold quarantined records).
fn shard_and_merge(wd: &Workdir, input: &str, home: &str, count: u32) {
    let all: Vec<u32> = (0..count).collect();
    run_shards_of(wd, input, home, count, &all);
    let merged = merge(wd, home);
    assert_eq!(
        merged.status.code(),
        Some(1),
        "{}",
        show(&["report", "merge"], &merged)
    );
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
        shard_and_merge(&wd, "archive", &home, count);

        // The same rollouts, report lines and summary as the unsharded run.
        assert_merged_equals(&wd, &home, "whole", count);
        let summary = json(&wd.path(&format!("{home}/rollover/latest/summary.json")));

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
    // The first runs find the quarantined records and the damage (1); the second skips their
    // files, and carries what was found in them (1 again).
    for expected in [1, 1] {
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

/// The shard counts of the Batch API tests: every pair of request and results files below is
/// owned by two different shards at each of them (`batch_archive` asserts it).
const BATCH_COUNTS: [u32; 3] = [2, 3, 5];
const OPENAI_REQUESTS: &str = "batches/openai/batch_6f1e_input.jsonl";
const OPENAI_RESULTS: &str = "batches/openai/batch_6f1e_output.jsonl";
const ANTHROPIC_REQUESTS: &str = "batches/anthropic/msgbatch_01Fp2x-requests.jsonl";
const ANTHROPIC_RESULTS: &str = "batches/anthropic/msgbatch_01Fp2x-results.jsonl";
/// Results files larger than the split size, plain and zstd: their ranges are spread over
/// the shards, their requests in files of their own.
const SPLIT_RESULTS: &str = "batches/openai/batch_77aa_output.jsonl";
const SPLIT_RESULTS_ZSTD: &str = "batches/openai/batch_9c0d_output.jsonl.zst";

/// The shard that owns the whole file keyed `key` among `count`.
fn owner(key: &str, count: u32) -> u32 {
    let plan = rollover::source::ShardPlan {
        shard: rollover::source::Shard { index: 0, count },
        split_bytes: 64 << 10,
        split: true,
    };
    plan.file_owner(key)
}

/// `n` letters and spaces that zstd cannot squeeze much (a seeded xorshift).
fn noise(seed: &mut u64, n: usize) -> String {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            match *seed % 28 {
                26 | 27 => ' ',
                c => char::from(b'a' + c as u8),
            }
        })
        .collect()
}

fn openai_request(id: &str, question: &str) -> Value {
    serde_json::json!({
        "custom_id": id, "method": "POST", "url": "/v1/chat/completions",
        "body": {"model": "gpt-4o-mini", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": question}
        ]}
    })
}

fn openai_result(id: &str, n: u64, answer: &str) -> Value {
    serde_json::json!({
        "id": format!("batch_req_{n}"), "custom_id": id,
        "response": {"status_code": 200, "request_id": format!("req_{n}"), "body": {
            "id": format!("chatcmpl-{n}"), "object": "chat.completion",
            "created": 1727784100 + n, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                         "finish_reason": "stop"}]
        }},
        "error": null
    })
}

fn lines(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for value in values {
        out.extend_from_slice(value.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// A split results file's lines: a result for most of `requests`, in another order, a few
/// with no request, a blank line, a broken line and a request line of its own near its end
/// (what the pipeline reads of a results file beside its results). Returns the lines and how
/// many of them join a request.
fn split_results(prefix: &str, requests: u64, seed: &mut u64) -> (Vec<u8>, u64) {
    let mut results = Vec::new();
    let mut joined = 0;
    for i in (0..requests).rev() {
        if i % 9 == 4 {
            continue;
        }
        let answer = format!("{prefix} answer {i}: {}", noise(seed, 900));
        results.push(openai_result(&format!("{prefix}-{i}"), i, &answer));
        joined += 1;
        if i % 50 == 7 {
            let id = format!("{prefix}-gone-{i}");
            results.push(openai_result(&id, 10_000 + i, "nobody asked"));
        }
    }
    let mut out = lines(&results);
    let at = out.len() / 3;
    let at = at + out[at..].iter().position(|b| *b == b'\n').unwrap_or(0) + 1;
    out.splice(
        at..at,
        b"\n{\"custom_id\": \"broken\", \"response\": {\n"
            .iter()
            .copied(),
    );
    let own = openai_request(&format!("{prefix}-in-results"), "Asked inside the results?");
    out.extend(lines(&[own]));
    (out, joined)
}

/// The Batch API archive, `batches/`: OpenAI Batch request and results files (one of them
/// with an error line and a result without request), Anthropic Message Batches requests and
/// results (the corpus's: two joined, three failed without request), two results files split
/// into ranges, and one file of each of the seven source formats. Returns how many results
/// join a request.
fn batch_archive(wd: &Workdir) -> u64 {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let corpus = root.join("../shared/corpora/sources");
    let copy = |from: PathBuf, to: &str| {
        let bytes = fs::read(&from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        wd.create(to, bytes);
    };
    let questions: Vec<Value> = (0..5)
        .map(|i| openai_request(&format!("6f1e-{i}"), &format!("Question {i}?")))
        .collect();
    wd.create(OPENAI_REQUESTS, lines(&questions));
    let answer = |i: u64| openai_result(&format!("6f1e-{i}"), i, &format!("6f1e answer {i}"));
    let expired = serde_json::json!({
        "id": "batch_req_4", "custom_id": "6f1e-4", "response": null,
        "error": {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}
    });
    let orphan = openai_result("6f1e-gone", 9, "nobody asked");
    let results = [answer(3), answer(0), orphan, expired, answer(2), answer(1)];
    wd.create(OPENAI_RESULTS, lines(&results));
    let mut joined = 5;

    let anthropic = corpus.join("anthropic-messages-api");
    copy(
        anthropic.join("batch_requests.constructed.jsonl"),
        ANTHROPIC_REQUESTS,
    );
    copy(
        anthropic.join("batch_results.constructed.jsonl"),
        ANTHROPIC_RESULTS,
    );
    joined += 2;

    let mut seed = 0x9e37_79b9_7f4a_7c15;
    for (prefix, requests, results) in [
        ("77aa", 240, SPLIT_RESULTS),
        ("9c0d", 160, SPLIT_RESULTS_ZSTD),
    ] {
        let asked: Vec<Value> = (0..requests)
            .map(|i| openai_request(&format!("{prefix}-{i}"), &format!("{prefix} question {i}?")))
            .collect();
        wd.create(
            &format!("batches/openai/batch_{prefix}_input.jsonl"),
            lines(&asked),
        );
        let (bytes, n) = split_results(prefix, requests, &mut seed);
        joined += n;
        assert!(
            bytes.len() > 2 * (64 << 10),
            "{results} spans several ranges"
        );
        let bytes = match results.ends_with(".zst") {
            true => zstd::encode_all(&bytes[..], 3).expect("zstd"),
            false => bytes,
        };
        assert!(bytes.len() > 64 << 10, "{results} is split");
        wd.create(results, bytes);
    }

    // One file of each source format (the last one: chat).
    let formats = [
        ("claude-code/spotter-v2.1/short.jsonl", "claude-code.jsonl"),
        (
            "chatgpt-export/chatgpt-exporter-thinking-summaries.json",
            "chatgpt.json",
        ),
        (
            "anthropic-messages-api/tool_with_thinking.jsonl",
            "anthropic.jsonl",
        ),
        (
            "openai-responses-api/simple_response_with_tool_call.jsonl",
            "responses.jsonl",
        ),
        (
            "openai-chat-completions/stream_with_tool_calls.jsonl",
            "chat-stream.jsonl",
        ),
        (
            "sharegpt/llamafactory-mllm_demo.openai-style.json",
            "sharegpt.json",
        ),
    ];
    for (from, to) in formats {
        copy(corpus.join(from), &format!("batches/formats/{to}"));
    }
    copy(
        root.join("samples/evals.jsonl"),
        "batches/formats/chat.jsonl",
    );

    for count in BATCH_COUNTS {
        for (requests, results) in [
            (OPENAI_REQUESTS, OPENAI_RESULTS),
            (ANTHROPIC_REQUESTS, ANTHROPIC_RESULTS),
        ] {
            let (a, b) = (owner(requests, count), owner(results, count));
            assert_ne!(
                a, b,
                "{count} shards: {requests} and {results} in shard {a}"
            );
            for key in [requests, results] {
                let size = fs::metadata(wd.path(key)).expect("written").len();
                assert!(size < 64 << 10, "{key} is one shard's, not split");
            }
        }
    }
    joined
}

/// The latest run of shard `index` of `count` in `home`.
fn shard_summary(wd: &Workdir, home: &str, index: u32, count: u32) -> Value {
    let folder = format!("{home}/rollover/shards/{index:04}-of-{count:04}/latest");
    json(&wd.path(&folder).join("summary.json"))
}

/// The merged run of `home` equals the unsharded run of `whole`: the same rollouts byte for
/// byte, the same report lines, the same summary; every shard's records add up.
fn assert_merged_equals(wd: &Workdir, home: &str, whole: &str, count: u32) {
    let expected_run = wd.path(&format!("{whole}/rollover/latest"));
    let run = wd.path(&format!("{home}/rollover/latest"));
    let expected_sessions = tree(&wd.path(&format!("{whole}/sessions")));
    let sessions = tree(&wd.path(&format!("{home}/sessions")));
    let missing: Vec<_> = expected_sessions
        .keys()
        .filter(|p| !sessions.contains_key(*p))
        .collect();
    let extra: Vec<_> = sessions
        .keys()
        .filter(|p| !expected_sessions.contains_key(*p))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{count} shards: the same rollout paths; missing {missing:?}, extra {extra:?}"
    );
    for (path, bytes) in &expected_sessions {
        assert!(sessions[path] == *bytes, "{count} shards: {path} differs");
    }
    for name in ["conversations.jsonl", "quarantine.jsonl", "report.md"] {
        let (got, want) = (fs::read(run.join(name)), fs::read(expected_run.join(name)));
        assert!(
            got.is_ok() && got.ok() == want.ok(),
            "{count} shards: {name}"
        );
    }
    let expected = json(&expected_run.join("summary.json"));
    let mut summary = json(&run.join("summary.json"));
    for key in ["records", "converted", "quarantined", "joined"] {
        assert_eq!(summary[key], expected[key], "{count} shards: {key}");
    }
    assert_eq!(summary["merged_shards"], count);
    summary.as_object_mut().map(|m| m.remove("merged_shards"));
    assert_eq!(summary, expected, "{count} shards: summary.json");
    for index in 0..count {
        let shard = shard_summary(wd, home, index, count);
        assert_eq!(
            n(&shard, "records"),
            placed(&shard),
            "shard {index}/{count}"
        );
    }
}

/// Issue 25, item 6: Batch API requests and their results files in different shards (OpenAI
/// Batch and Anthropic Message Batches, whole and split results files), beside one file of
/// every source format: each request is joined with its result in its own shard, each result
/// counted once, by the shard of its file, and the union is the unsharded run.
#[test]
fn batch_files_in_different_shards_join_as_in_an_unsharded_run() {
    let wd = Workdir::new("sharding-batches");
    let joined = batch_archive(&wd);
    let args = ["convert", "batches", "--out", "whole", "--jobs", "2"];
    let whole = rollover(wd.root(), &args, &[]);
    assert_eq!(whole.status.code(), Some(1), "{}", show(&args, &whole));
    let expected = json(&wd.path("whole/rollover/latest/summary.json"));
    assert_eq!(
        n(&expected, "joined"),
        joined,
        "every result with a request joins it"
    );
    assert!(n(&expected, "quarantined") > 0, "results without a request");
    for format in [
        "claude-code",
        "chatgpt",
        "anthropic",
        "responses",
        "chat-stream",
        "sharegpt",
    ] {
        assert!(
            expected["formats"][format].as_u64() >= Some(1),
            "{format}: {}",
            expected["formats"]
        );
    }
    let sessions = tree(&wd.path("whole/sessions"));
    let replied = |text: &str| {
        sessions
            .values()
            .any(|bytes| String::from_utf8_lossy(bytes).contains(text))
    };
    let anthropic_reply = "I'll help you find the largest city in your country";
    for text in [
        "6f1e answer 2",
        anthropic_reply,
        "77aa answer 17",
        "9c0d answer 150",
    ] {
        assert!(replied(text), "a request got its reply: {text}");
    }

    for count in BATCH_COUNTS {
        let home = format!("sharded-{count}");
        shard_and_merge(&wd, "batches", &home, count);
        assert_merged_equals(&wd, &home, "whole", count);
        // The results files' shards counted their results, joined to requests they did not read.
        for (requests, results, at_least) in [
            (OPENAI_REQUESTS, OPENAI_RESULTS, 5),
            (ANTHROPIC_REQUESTS, ANTHROPIC_RESULTS, 2),
        ] {
            let shard = shard_summary(&wd, &home, owner(results, count), count);
            assert!(
                n(&shard, "joined") >= at_least,
                "{count} shards: {results}: {shard}"
            );
            let index = json(&wd.path(&format!(
                "{home}/rollover/shards/{:04}-of-{count:04}/latest/shard.json",
                owner(results, count)
            )));
            let keys: Vec<&str> = index["files"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f["key"].as_str())
                .collect();
            assert!(
                keys.contains(&results) && !keys.contains(&requests),
                "{count} shards: {keys:?}"
            );
        }
    }
}

/// A results file that changed makes the shard of its requests (another shard) read them
/// again, as an unsharded run reads every file then; a results file only touched changes
/// nothing. Each time, the merge equals the unsharded re-run.
#[test]
fn a_changed_results_file_makes_every_shard_read_its_requests_again() {
    let wd = Workdir::new("sharding-batches-rerun");
    batch_archive(&wd);
    let count = 3;
    let all: Vec<u32> = (0..count).collect();
    // Returns how many shards looked in other shards' files for their results' requests.
    let round = |expected: i32| -> usize {
        let args = ["convert", "batches", "--out", "whole"];
        let whole = rollover(wd.root(), &args, &[]);
        assert_eq!(
            whole.status.code(),
            Some(expected),
            "{}",
            show(&args, &whole)
        );
        let stderrs = run_shards_of(&wd, "batches", "home", count, &all);
        let merged = merge(&wd, "home");
        let shown = show(&["report", "merge"], &merged);
        assert_eq!(merged.status.code(), Some(expected), "{shown}");
        assert_merged_equals(&wd, "home", "whole", count);
        let looking = "looking for their requests in the other shards' files";
        stderrs.iter().filter(|e| e.contains(looking)).count()
    };
    assert!(
        round(1) > 0,
        "the results' shards looked for their requests"
    );

    let results = String::from_utf8(wd.read(OPENAI_RESULTS)).expect("UTF-8");
    assert!(results.contains("6f1e answer 2\""));
    wd.create(
        OPENAI_RESULTS,
        results.replace("6f1e answer 2\"", "6f1e answer two\""),
    );
    assert!(round(1) > 0);
    let requests = shard_summary(&wd, "home", owner(OPENAI_REQUESTS, count), count);
    assert_eq!(n(&requests, "files_unchanged"), 0, "read again: {requests}");
    assert!(n(&requests, "converted") >= 5, "{requests}");
    let texts: Vec<String> = tree(&wd.path("home/sessions"))
        .into_values()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .collect();
    assert!(texts.iter().any(|t| t.contains("6f1e answer two")));
    assert!(!texts.iter().any(|t| t.contains("6f1e answer 2\"")));

    // Touched, not changed: no shard reads anything again.
    let file = fs::File::options()
        .append(true)
        .open(wd.path(ANTHROPIC_RESULTS))
        .expect("open");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    file.set_modified(later).expect("touch");
    // What the earlier runs quarantined in these files is carried: still a finding.
    assert_eq!(
        round(1),
        0,
        "results already counted are not looked for again"
    );
    let summary = json(&wd.path("home/rollover/latest/summary.json"));
    assert_eq!(n(&summary, "files_unchanged"), n(&summary, "files"));
}
