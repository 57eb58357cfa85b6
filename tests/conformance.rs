//! Conformance with the real Codex CLI: what `rollover convert` writes is exactly what Codex
//! restores and sends to the model.
//!
//! `samples/`, the Parquet datasets of `tests/fixtures/parquet/` and every set of
//! `../shared/corpora` are converted into one fresh Codex home.
//! `codex migrate-rollouts --json` (dry run) must find every rollout eligible. Then a
//! deterministic sample of rollouts (a greedy cover of every (input set, decision rule) and
//! (input set, item kind) pair, filled up by a fixed stride) is resumed, each in its own
//! CODEX_HOME, with `codex exec resume <id> <prompt>` against a fake Responses server on
//! 127.0.0.1; the request must hold the base instructions, then exactly our response items in
//! our order, then Codex's fresh context and the prompt. The rollout as Codex left it, with the
//! turn it appended, must then pass `rollover validate`.
//!
//! Every test runs once per Codex release rollover supports (`rollover::validate::
//! SUPPORTED_CODEX`, the list `--version` names), each `@openai/codex@<version>` found where
//! `.ci/run` installs it, `${ROLLOVER_CODEX_CACHE:-$HOME/.cache/rollover-codex}/<version>`;
//! `ROLLOVER_CODEX_VERSION=0.171.0` (or a comma-separated list) picks releases, and
//! `ROLLOVER_CODEX_BIN` one binary you have. No binary is a failure, never a skip. `ROLLOVER_CONFORMANCE_KEEP=1` keeps the work folders
//! (each resume's home with its `request-1.json`).
//!
//! `source_sessions_resume_exactly_in_codex` does the same for Claude Code sessions (parallel
//! calls, a compaction) and ChatGPT exports, and resumes one by its thread name;
//! `codex_own_importer_keeps_less_than_rollover` runs Codex's own Claude Code importer beside
//! rollover on one session (the README's comparison with Codex's own importer).
//!
//! The last two tests break a rollout on purpose and prove the check reports it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::Workdir;
use crate::conformance_support::{
    self, check_resume, codexes, edit_rollout, is_fresh_context, read_rollout_lines,
    run_with_timeout, write_codex_config, Codex, FakeServer,
};

/// Runs `test` once for each Codex release under test, saying which.
fn on_every_release(name: &str, test: fn(&Codex)) {
    for codex in codexes() {
        println!(
            "[conformance] {name}: Codex {} ({})",
            codex.version, codex.origin
        );
        test(codex);
    }
}

/// At least this many rollouts are resumed.
const MIN_SAMPLE: usize = 30;
/// Resumes run this many at a time (`ROLLOVER_CONFORMANCE_JOBS` overrides).
const PARALLEL: usize = 3;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn corpora_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpora"))
}

/// A work folder, kept when `ROLLOVER_CONFORMANCE_KEEP` is set.
fn work(name: &str) -> Workdir {
    let keep = std::env::var_os("ROLLOVER_CONFORMANCE_KEEP").is_some_and(|v| !v.is_empty());
    Workdir::kept_if(&format!("conformance-{name}"), keep)
}

/// One input given to `rollover convert`, and how its conversations are grouped into sets.
struct Input {
    path: PathBuf,
    /// `samples/` is grouped per file (`samples/<file>`), a corpora set as a whole (`corpora/<set>`).
    per_file: bool,
    label: String,
}

fn inputs() -> Vec<Input> {
    let samples = manifest_dir().join("samples");
    assert!(samples.is_dir(), "{} is missing", samples.display());
    let corpora = corpora_dir();
    let entries = std::fs::read_dir(&corpora).unwrap_or_else(|e| {
        panic!(
            "the shared corpora are missing at {} ({e}): the conformance test converts them",
            corpora.display()
        )
    });
    let mut sets: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    assert!(!sets.is_empty(), "no set in {}", corpora.display());
    let mut inputs = vec![
        Input {
            path: samples,
            per_file: true,
            label: "samples".into(),
        },
        // The Parquet datasets (tests/parquet.rs writes them): a set per file, so that a
        // conversation of each layout is resumed.
        Input {
            path: manifest_dir().join("tests/fixtures/parquet"),
            per_file: true,
            label: "fixtures/parquet".into(),
        },
    ];
    // The Gemini CLI and OpenTelemetry samples, a set per format.
    for format in ["gemini-cli", "otel"] {
        inputs.push(Input {
            path: manifest_dir().join("tests/fixtures").join(format),
            per_file: false,
            label: format!("fixtures/{format}"),
        });
    }
    // `sources` holds one folder per source format: each is a set of its own, so the sample
    // resumes at least one conversation of every format.
    let sets: Vec<PathBuf> = sets
        .into_iter()
        .flat_map(|set| {
            if set.file_name().is_some_and(|n| n == "sources") {
                let mut formats: Vec<PathBuf> = std::fs::read_dir(&set)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect();
                formats.sort();
                formats
            } else {
                vec![set]
            }
        })
        .collect();
    for set in sets {
        let name = match set.parent().and_then(|p| p.file_name()) {
            Some(parent) if parent == "sources" => {
                format!("sources/{}", set.file_name().unwrap().to_string_lossy())
            }
            _ => set.file_name().unwrap().to_string_lossy().into_owned(),
        };
        inputs.push(Input {
            path: set,
            per_file: false,
            label: format!("corpora/{name}"),
        });
    }
    inputs
}

/// The input set a `conversations.jsonl` source belongs to.
fn source_set(source: &str, inputs: &[Input]) -> String {
    for input in inputs {
        let prefix = format!("{}/", input.path.display());
        if let Some(rest) = source.strip_prefix(&prefix) {
            return if input.per_file {
                format!("{}/{}", input.label, rest)
            } else {
                input.label.clone()
            };
        }
    }
    panic!("source {source:?} is under none of the inputs");
}

/// `rollover convert INPUTS... --out OUT`; panics on failure. Exit 1 (some records
/// quarantined, e.g. the Codex rollouts of the corpora, which are already in the target format)
/// is fine: the quarantine is not what this test checks.
fn convert(inputs: &[&Path], out: &Path) {
    convert_with(inputs, out, &[]);
}

/// `rollover convert INPUTS --out OUT EXTRA...` from the crate root; it must finish (exit 0 or
/// 1) and write its run's summary.
fn convert_with(inputs: &[&Path], out: &Path, extra: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_rollover"))
        .arg("convert")
        .args(inputs)
        .arg("--out")
        .arg(out)
        .args(extra)
        .current_dir(manifest_dir())
        .output()
        .expect("run rollover");
    assert!(
        matches!(output.status.code(), Some(0 | 1))
            && out.join("rollover/latest/summary.json").is_file(),
        "rollover convert failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// One line of `rollover/conversations.jsonl`.
struct Conversation {
    source: String,
    line: u64,
    id: String,
    /// Relative to the home: `sessions/YYYY/MM/DD/rollout-...jsonl`.
    path: PathBuf,
    /// The digest of what was converted (`conversations.jsonl`'s `digest`).
    digest: String,
    set: String,
    /// What this conversation exercises: `rule:<rule>/<action>` and item kinds.
    keys: BTreeSet<String>,
}

fn read_conversations(home: &Path, inputs: &[Input]) -> Vec<Conversation> {
    let file = home.join("rollover/latest/conversations.jsonl");
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("conversations.jsonl line is JSON");
            let source = v["source"].as_str().expect("source").to_string();
            let path = PathBuf::from(v["path"].as_str().expect("path"));
            let mut keys = BTreeSet::new();
            for d in v["decisions"].as_array().expect("decisions") {
                keys.insert(format!(
                    "rule:{}/{}",
                    d["rule"].as_str().expect("rule"),
                    d["action"].as_str().expect("action")
                ));
            }
            keys.extend(item_keys(&home.join(&path)));
            Conversation {
                set: source_set(&source, inputs),
                source,
                line: v["line"].as_u64().expect("line"),
                id: v["id"].as_str().expect("id").to_string(),
                path,
                digest: v["digest"].as_str().expect("digest").to_string(),
                keys,
            }
        })
        .collect()
}

/// The item kinds of a rollout, as coverage keys.
fn item_keys(rollout: &Path) -> BTreeSet<String> {
    let lines = read_rollout_lines(rollout).unwrap_or_else(|e| panic!("{e}"));
    let mut keys = BTreeSet::new();
    let meta = &lines[0]["payload"];
    keys.insert(if meta["base_instructions"].is_object() {
        "meta:base_instructions".to_string()
    } else {
        "meta:no_base_instructions".to_string()
    });
    for line in &lines[1..] {
        let tag = line["type"].as_str().unwrap_or("?");
        if tag == "event_msg" {
            continue;
        }
        if tag != "response_item" {
            keys.insert(format!("tag:{tag}"));
            continue;
        }
        let item = &line["payload"];
        let kind = item["type"].as_str().unwrap_or("?");
        match kind {
            "message" => {
                let role = item["role"].as_str().unwrap_or("?");
                keys.insert(format!("item:message:{role}"));
                if let Some(phase) = item["phase"].as_str() {
                    keys.insert(format!("phase:{role}:{phase}"));
                }
                for part in item["content"].as_array().into_iter().flatten() {
                    let t = part["type"].as_str().unwrap_or("?");
                    keys.insert(format!("part:{role}:{t}"));
                    if let Some(detail) = part["detail"].as_str() {
                        keys.insert(format!("part:{t}:detail:{detail}"));
                    }
                }
                if item["content"].as_array().is_some_and(|c| c.len() > 1) {
                    keys.insert(format!("item:message:{role}:multipart"));
                }
            }
            "function_call_output" | "custom_tool_call_output" => {
                let shape = match &item["output"] {
                    Value::String(s) if s.is_empty() => "empty",
                    Value::String(_) => "string",
                    Value::Array(_) => "array",
                    _ => "other",
                };
                keys.insert(format!("item:{kind}:{shape}"));
            }
            _ => {
                keys.insert(format!("item:{kind}"));
            }
        }
    }
    keys
}

/// Greedy cover of every (set, key) pair (and every set), earliest conversation on ties, then
/// every `stride`-th conversation until there are `MIN_SAMPLE`. Returns (index, why) pairs.
fn choose_sample(conversations: &[Conversation]) -> Vec<(usize, String)> {
    let pairs = |c: &Conversation| -> Vec<(String, String)> {
        std::iter::once("set".to_string())
            .chain(c.keys.iter().cloned())
            .map(|k| (c.set.clone(), k))
            .collect()
    };
    let mut uncovered: BTreeSet<(String, String)> = conversations.iter().flat_map(pairs).collect();
    let mut chosen: Vec<(usize, String)> = Vec::new();
    while !uncovered.is_empty() {
        let (best, gain) = conversations
            .iter()
            .enumerate()
            .map(|(i, c)| (i, pairs(c).iter().filter(|p| uncovered.contains(p)).count()))
            .fold((0, 0), |acc, x| if x.1 > acc.1 { x } else { acc });
        assert!(gain > 0, "greedy cover made no progress");
        let new: Vec<String> = pairs(&conversations[best])
            .into_iter()
            .filter(|p| uncovered.remove(p))
            .map(|(_, k)| k)
            .filter(|k| k != "set")
            .collect();
        chosen.push((best, format!("cover {}", new.join(" "))));
    }
    let stride = (conversations.len() / MIN_SAMPLE).max(1);
    let fill = (0..stride).flat_map(|offset| (offset..conversations.len()).step_by(stride));
    for i in fill {
        if chosen.len() >= MIN_SAMPLE {
            break;
        }
        if !chosen.iter().any(|(c, _)| *c == i) {
            chosen.push((i, format!("stride {stride}")));
        }
    }
    chosen
}

/// Whether a rollout has a `compacted` line without a replacement history.
fn rebuilds_history(rollout: &Path) -> bool {
    read_rollout_lines(rollout)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .any(|l| l["type"] == "compacted" && !l["payload"]["replacement_history"].is_array())
}

/// The rollouts the conversions wrote: one per session. The same conversation read from two
/// files (a Parquet fixture holding corpus rows as they are) is one session, identified by its
/// JSON value; sessions sharing a rollout must have converted the same content.
fn rollouts_written(conversations: &[Conversation]) -> usize {
    let mut digests: BTreeMap<&Path, &str> = BTreeMap::new();
    for c in conversations {
        let digest = digests.entry(c.path.as_path()).or_insert(c.digest.as_str());
        assert_eq!(
            *digest,
            c.digest,
            "{}:{} writes {} with other content than another conversation",
            c.source,
            c.line,
            c.path.display()
        );
    }
    digests.len()
}

/// `codex migrate-rollouts --json` (dry run) on the home: every outcome `eligible`, one per
/// rollout written.
fn check_migrate(bin: &Path, home: &Path, expected: usize) {
    let server = FakeServer::start();
    write_codex_config(home, server.port());
    let mut cmd = conformance_support::codex_command(bin, home);
    cmd.args(["migrate-rollouts", "--json"]);
    let out = run_with_timeout(cmd, Duration::from_secs(300)).expect("spawn codex");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "codex migrate-rollouts --json failed ({}):\n{stderr}",
        out.status
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "codex migrate-rollouts --json printed no JSON ({e}):\n{}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let outcomes = report["outcomes"]
        .as_array()
        .unwrap_or_else(|| panic!("no `outcomes` in the migration report: {report}"));
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    let mut bad = Vec::new();
    for o in outcomes {
        let status = o["status"].as_str().unwrap_or("?").to_string();
        if status != "eligible" && bad.len() < 20 {
            bad.push(o.to_string());
        }
        *statuses.entry(status).or_default() += 1;
    }
    println!("[conformance] migrate-rollouts --json: {statuses:?}");
    assert!(
        bad.is_empty(),
        "codex migrate-rollouts found rollouts not eligible ({statuses:?}); first ones:\n{}",
        bad.join("\n")
    );
    assert_eq!(
        outcomes.len(),
        expected,
        "codex migrate-rollouts reported {} rollouts, rollover wrote {expected}",
        outcomes.len()
    );
    assert!(server.requests().is_empty() && server.problems().is_empty());
}

#[test]
fn converted_rollouts_resume_exactly_in_codex() {
    on_every_release(
        "converted_rollouts_resume_exactly_in_codex",
        converted_rollouts_resume_exactly_in_codex_in,
    );
}

fn converted_rollouts_resume_exactly_in_codex_in(codex: &Codex) {
    let total = Instant::now();
    println!("[conformance] Codex: {} ({})", codex.version, codex.origin);
    let work = work("main");
    let home = work.root().join("home");
    let inputs = inputs();

    let t = Instant::now();
    let paths: Vec<&Path> = inputs.iter().map(|i| i.path.as_path()).collect();
    convert(&paths, &home);
    let conversations = read_conversations(&home, &inputs);
    println!(
        "[conformance] convert: {} conversations in {:.1?}",
        conversations.len(),
        t.elapsed()
    );
    let converted = rollouts_written(&conversations);
    // A `compacted` line without a replacement history (kept from a Codex rollout) has Codex
    // rebuild the history, which `check_resume` does not model: such sessions are resumed
    // beside their source by `converted_codex_rollouts_of_every_generation_resume_with_their_history`.
    let (conversations, rebuilt): (Vec<Conversation>, Vec<Conversation>) = conversations
        .into_iter()
        .partition(|c| !c.keys.contains("tag:compacted") || !rebuilds_history(&home.join(&c.path)));
    for c in &rebuilt {
        println!(
            "[conformance] left to the Codex-source test (Codex rebuilds its compacted history): {} line {}",
            c.source, c.line
        );
    }

    let mut per_set: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &conversations {
        *per_set.entry(c.set.as_str()).or_default() += 1;
    }
    for input in &inputs {
        if !input.per_file && !per_set.contains_key(input.label.as_str()) {
            println!(
                "[conformance] note: {} converted no conversation (see rollover/quarantine.jsonl)",
                input.label
            );
        }
    }
    assert!(!conversations.is_empty(), "rollover converted nothing");

    let t = Instant::now();
    check_migrate(&codex.bin, &home, converted);
    println!("[conformance] migrate-rollouts: {:.1?}", t.elapsed());
    let sample = choose_sample(&conversations);
    let all_keys: BTreeSet<(&str, &str)> = conversations
        .iter()
        .flat_map(|c| c.keys.iter().map(|k| (c.set.as_str(), k.as_str())))
        .collect();
    let rules: BTreeSet<&str> = all_keys
        .iter()
        .map(|(_, k)| *k)
        .filter(|k| k.starts_with("rule:"))
        .collect();
    println!(
        "[conformance] sample: {} of {} rollouts, covering {} sets, {} (set, kind) pairs, rules {:?}",
        sample.len(),
        conversations.len(),
        per_set.len(),
        all_keys.len(),
        rules
    );

    let jobs = std::env::var("ROLLOVER_CONFORMANCE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(PARALLEL);
    let t = Instant::now();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<conformance_support::ResumeCheck, String>)>> =
        Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                let Some((index, _)) = sample.get(n) else {
                    break;
                };
                let c = &conversations[*index];
                let resume_home = work.root().join(format!("resume-{n:03}"));
                let result = check_resume(&codex.bin, &resume_home, &home.join(&c.path), &c.path);
                results.lock().unwrap().push((n, result));
            });
        }
    });
    let resumes = t.elapsed();
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(n, _)| *n);

    let mut failures = Vec::new();
    for (n, result) in &results {
        let (index, why) = &sample[*n];
        let c = &conversations[*index];
        match result {
            Ok(check) => println!(
                "  ok   {:>6.2?} {:>4} items  {} line {}  {}  [{}]",
                check.elapsed, check.items, c.source, c.line, c.id, why
            ),
            Err(e) => {
                println!("  FAIL {} line {}  {}  [{}]", c.source, c.line, c.id, why);
                failures.push(format!(
                    "{} line {} (set {}), id {}, rollout {}:\n  {}",
                    c.source,
                    c.line,
                    c.set,
                    c.id,
                    c.path.display(),
                    e.replace('\n', "\n  ")
                ));
            }
        }
    }
    println!(
        "[conformance] {} resumes ({} at a time) in {:.1?}; whole test {:.1?}",
        results.len(),
        jobs,
        resumes,
        total.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {} sampled rollouts are not restored exactly by {}:\n\n{}",
        failures.len(),
        results.len(),
        codex.version,
        failures.join("\n\n")
    );
}

/// Claude Code sessions and ChatGPT exports (issue 12): one session of each format, a Claude
/// Code session with parallel tool calls (results in later lines) and one with a compaction,
/// each resumed by the real Codex, which must send exactly what was written (after a
/// compaction: the summary that replaced the history, then what followed).
#[test]
fn source_sessions_resume_exactly_in_codex() {
    on_every_release(
        "source_sessions_resume_exactly_in_codex",
        source_sessions_resume_exactly_in_codex_in,
    );
}

fn source_sessions_resume_exactly_in_codex_in(codex: &Codex) {
    let work = work("sources");
    let home = work.root().join("home");
    let sources = corpora_dir().join("sources");
    let files = [
        "claude-code/spotter-v2.1/tool_heavy.jsonl",
        "claude-code/spotter-v2.1/subagent.jsonl",
        "claude-code/simonw-synthetic/sample_session.loglines.json",
        "chatgpt-export/chatgpt-exporter-thinking-summaries.json",
        "chatgpt-export/polylogue-native-conversation-v1.json",
    ];
    let paths: Vec<PathBuf> = files.iter().map(|f| sources.join(f)).collect();
    let inputs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    convert(&inputs, &home);
    let text = std::fs::read_to_string(home.join("rollover/latest/conversations.jsonl"))
        .expect("conversations.jsonl");
    let mut seen = BTreeSet::new();
    let mut failures = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).expect("JSON line");
        let source = v["source"].as_str().expect("source").to_string();
        let relative = PathBuf::from(v["path"].as_str().expect("path"));
        let rollout = home.join(&relative);
        let resume_home = work.root().join(format!("resume-{n:03}"));
        match check_resume(&codex.bin, &resume_home, &rollout, &relative) {
            Ok(check) => println!("  ok   {} items  {source}", check.items),
            Err(e) => failures.push(format!("{source}: {e}")),
        }
        seen.insert(source);
    }
    assert_eq!(seen.len(), files.len(), "one rollout per file: {seen:?}");
    let compacted = text.lines().any(|l| l.contains("\"compaction\""));
    assert!(compacted, "the compaction session took policy.compaction");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // Titles are Codex thread names: `codex exec resume <name>` finds the session by the
    // name rollover wrote in session_index.jsonl.
    let index = std::fs::read_to_string(home.join("session_index.jsonl")).expect("session index");
    let entry: Value = serde_json::from_str(index.lines().next().expect("a name")).unwrap();
    let name = entry["thread_name"].as_str().unwrap();
    let id = entry["id"].as_str().unwrap();
    let line = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["id"] == id)
        .expect("the named conversation");
    let relative = PathBuf::from(line["path"].as_str().unwrap());
    let named_home = work.root().join("by-name");
    let target = named_home.join(&relative);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(home.join(&relative), &target).unwrap();
    std::fs::copy(
        home.join("session_index.jsonl"),
        named_home.join("session_index.jsonl"),
    )
    .unwrap();
    let server = FakeServer::start();
    write_codex_config(&named_home, server.port());
    let out = conformance_support::run_resume(&codex.bin, &named_home, name, "by name");
    assert!(
        out.status.success() && server.requests().len() == 1,
        "codex exec resume {name:?} did not find the session by its thread name ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The README's comparison, on the real thing: Codex 0.169's own Claude Code importer
/// (`codex app-server`, `externalAgentConfig/detect` then `/import`, sources.md §1.11) against
/// rollover, on the same session (`spotter-v2.1/subagent.jsonl`, its timestamps moved into the
/// last 30 days and its `cwd` to a folder that exists, as the importer requires).
#[test]
fn codex_own_importer_keeps_less_than_rollover() {
    on_every_release(
        "codex_own_importer_keeps_less_than_rollover",
        codex_own_importer_keeps_less_than_rollover_in,
    );
}

fn codex_own_importer_keeps_less_than_rollover_in(codex: &Codex) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let work = work("importer");
    let source = corpora_dir().join("sources/claude-code/spotter-v2.1/subagent.jsonl");
    let project = work.root().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let cwd = project.to_str().unwrap().to_string();
    let encoded: String = cwd
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let home = work.root().join("home");
    let sessions = home.join(".claude/projects").join(&encoded);
    std::fs::create_dir_all(&sessions).unwrap();
    let text = std::fs::read_to_string(&source).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let first = lines
        .iter()
        .filter_map(|l| l["timestamp"].as_str())
        .filter_map(rollover::model::time::parse_rfc3339_ms)
        .min()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let shift = now - 86_400_000 - first;
    for line in &mut lines {
        if let Some(t) = line["timestamp"]
            .as_str()
            .and_then(rollover::model::time::parse_rfc3339_ms)
        {
            line["timestamp"] = rollover::model::time::format_ms(t + shift).into();
        }
        if line.get("cwd").is_some() {
            line["cwd"] = cwd.clone().into();
        }
    }
    let session = sessions.join("491e126e-1e71-469c-ade2-fcc8af567c74.jsonl");
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&session, body).unwrap();

    // Codex's importer, driven over JSON-RPC.
    let codex_home = work.root().join("codex-home");
    let server = FakeServer::start();
    write_codex_config(&codex_home, server.port());
    let mut cmd = conformance_support::codex_command(&codex.bin, &codex_home);
    cmd.env("HOME", &home)
        .arg("app-server")
        .stdin(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn codex app-server");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if tx.send(v).is_err() {
                    break;
                }
            }
        }
    });
    let call = |stdin: &mut std::process::ChildStdin, id: u64, method: &str, params: Value| {
        let request =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{request}").unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Ok(v) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            if v["id"] == id {
                return v;
            }
        }
        panic!("codex app-server did not answer {method}");
    };
    call(
        &mut stdin,
        1,
        "initialize",
        serde_json::json!({"clientInfo": {"name": "rollover-test", "version": "1"}}),
    );
    writeln!(
        stdin,
        "{}",
        serde_json::json!({"jsonrpc": "2.0", "method": "initialized"})
    )
    .unwrap();
    let detected = call(
        &mut stdin,
        2,
        "externalAgentConfig/detect",
        serde_json::json!({"includeHome": true, "cwds": [cwd]}),
    );
    let items: Vec<Value> = detected["result"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["itemType"] == "SESSIONS")
        .cloned()
        .collect();
    assert_eq!(
        items.len(),
        1,
        "the importer did not detect the session: {detected}"
    );
    call(
        &mut stdin,
        3,
        "externalAgentConfig/import",
        serde_json::json!({"migrationItems": items}),
    );
    let mut imported = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while imported.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
        imported = walk_jsonl(&codex_home.join("sessions")).into_iter().next();
    }
    let _ = child.kill();
    let _ = child.wait();
    let imported = imported.expect("Codex's importer wrote no rollout");
    let count = |path: &Path| {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let (mut notes, mut output_chars) = (0, 0);
        for line in read_rollout_lines(path).unwrap() {
            if line["type"] != "response_item" {
                continue;
            }
            let item = &line["payload"];
            *counts
                .entry(item["type"].as_str().unwrap().to_string())
                .or_default() += 1;
            let text_of = |v: &Value| -> usize {
                match v {
                    Value::String(s) => s.chars().count(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .map(|t| t.chars().count())
                        .sum(),
                    _ => 0,
                }
            };
            if item["type"] == "function_call_output" {
                output_chars += text_of(&item["output"]);
            }
            for part in item["content"].as_array().into_iter().flatten() {
                let text = part["text"].as_str().unwrap_or("");
                notes += text.matches("[external_agent_tool_call:").count();
                for chunk in text.split("[/external_agent_tool_result]") {
                    if let Some(at) = chunk.find("[external_agent_tool_result") {
                        let rest = &chunk[at..];
                        let body = rest.split_once("]\n").map_or("", |(_, b)| b);
                        output_chars += body.strip_suffix('\n').unwrap_or(body).chars().count();
                    }
                }
            }
        }
        (counts, notes, output_chars)
    };
    let (theirs, notes, their_chars) = count(&imported);
    println!("[conformance] Codex's importer: {theirs:?}, {notes} call notes, {their_chars} output chars");
    assert_eq!(theirs.get("function_call"), None);
    assert_eq!(theirs.get("reasoning"), None);
    assert_eq!((notes, their_chars), (16, 25_441));

    let out = work.root().join("rollover");
    convert(&[session.as_path()], &out);
    let ours = walk_jsonl(&out.join("sessions"));
    assert_eq!(ours.len(), 1);
    let (counts, _, our_chars) = count(&ours[0]);
    println!("[conformance] rollover: {counts:?}, {our_chars} output chars");
    assert_eq!(counts.get("function_call"), Some(&16));
    assert_eq!(counts.get("function_call_output"), Some(&16));
    assert_eq!(counts.get("reasoning"), Some(&4));
    assert_eq!(our_chars, 31_375);
}

/// The `.jsonl` files under `dir`, sorted.
fn walk_jsonl(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Converts `samples/` into `work/home` and returns its conversations.
fn convert_samples(work: &Workdir) -> (PathBuf, Vec<Conversation>) {
    let home = work.root().join("home");
    let samples = manifest_dir().join("samples");
    convert(&[samples.as_path()], &home);
    let inputs = [Input {
        path: samples,
        per_file: true,
        label: "samples".into(),
    }];
    let conversations = read_conversations(&home, &inputs);
    (home, conversations)
}

/// A converted rollout, the same rollout resumed unchanged (must pass), and a broken copy at
/// the same relative path in another folder.
fn broken_copy(
    codex: &Codex,
    work: &Workdir,
    pick: impl Fn(&[Value]) -> bool,
    breakage: impl FnOnce(&mut Vec<Value>),
) -> (
    PathBuf,
    PathBuf,
    Result<conformance_support::ResumeCheck, String>,
) {
    let (home, conversations) = convert_samples(work);
    let c = conversations
        .iter()
        .find(|c| pick(&read_rollout_lines(&home.join(&c.path)).unwrap()))
        .expect("a sample rollout to break");
    let original = home.join(&c.path);
    check_resume(&codex.bin, &work.root().join("control"), &original, &c.path)
        .unwrap_or_else(|e| panic!("the unbroken rollout {} must pass: {e}", original.display()));
    let broken = work.root().join("broken").join(&c.path);
    std::fs::create_dir_all(broken.parent().unwrap()).unwrap();
    std::fs::copy(&original, &broken).unwrap();
    edit_rollout(&broken, breakage);
    let result = check_resume(
        &codex.bin,
        &work.root().join("broken-home"),
        &broken,
        &c.path,
    );
    (original, broken, result)
}

/// A `function_call_output` written in the object form `{"content":..,"success":true}` does not
/// parse in Codex: it drops the line and sends an invented `"aborted"` output. The history
/// comparison must report it.
#[test]
fn check_catches_object_tool_output() {
    on_every_release(
        "check_catches_object_tool_output",
        check_catches_object_tool_output_in,
    );
}

fn check_catches_object_tool_output_in(codex: &Codex) {
    let work = work("object-output");
    let is_string_output = |l: &Value| {
        l["payload"]["type"] == "function_call_output" && l["payload"]["output"].is_string()
    };
    let (_, broken, result) = broken_copy(
        codex,
        &work,
        |lines| lines.iter().any(is_string_output),
        |lines| {
            let line = lines.iter_mut().find(|l| is_string_output(l)).unwrap();
            let text = line["payload"]["output"].take();
            line["payload"]["output"] = serde_json::json!({"content": text, "success": true});
        },
    );
    let err = match result {
        Ok(_) => panic!(
            "the check accepted {} although its tool output is an object",
            broken.display()
        ),
        Err(e) => e,
    };
    println!("reported as expected:\n{err}");
    assert!(err.contains("history mismatch"), "{err}");
    assert!(err.contains(r#""output":"aborted""#), "{err}");
    assert!(err.contains(r#""success":true"#), "{err}");
}

/// Without `session_meta.payload.cwd` Codex refuses to resume: the check must report the exit.
#[test]
fn check_catches_missing_cwd() {
    on_every_release("check_catches_missing_cwd", check_catches_missing_cwd_in);
}

fn check_catches_missing_cwd_in(codex: &Codex) {
    let work = work("missing-cwd");
    let (_, broken, result) = broken_copy(
        codex,
        &work,
        |_| true,
        |lines| {
            let removed = lines[0]["payload"]
                .as_object_mut()
                .expect("session_meta payload")
                .remove("cwd");
            assert!(removed.is_some(), "the rollout had a cwd");
        },
    );
    let err = match result {
        Ok(_) => panic!(
            "the check accepted {} although its session_meta has no cwd",
            broken.display()
        ),
        Err(e) => e,
    };
    println!("reported as expected:\n{err}");
    assert!(err.contains("exited with"), "{err}");
}

/// README "Open the result in Codex", run with the real Codex: samples converted with
/// `--cwd DIR`, the README's `config.toml` snippet as the home's config, and Codex's picker
/// listing (`thread/list` through `codex app-server`) shows every session for DIR, none for
/// another folder, and all of them without the filter (`codex resume --all`).
#[test]
fn readme_open_in_codex_lists_the_sessions_for_their_cwd() {
    on_every_release(
        "readme_open_in_codex_lists_the_sessions_for_their_cwd",
        readme_open_in_codex_lists_the_sessions_for_their_cwd_in,
    );
}

fn readme_open_in_codex_lists_the_sessions_for_their_cwd_in(codex: &Codex) {
    use conformance_support::picker;
    let work = work("open-in-codex");
    let home = work.root().join("home");
    let project = "/srv/rollover-project";
    convert_with(&[Path::new("samples")], &home, &["--cwd", project]);
    let readme = std::fs::read_to_string(manifest_dir().join("README.md")).expect("read README");
    let snippet = picker::readme_toml(&readme, "## Open the result in Codex");
    let provider = snippet
        .lines()
        .find_map(|l| l.strip_prefix("model_provider = "))
        .expect("the snippet sets model_provider")
        .trim_matches('"')
        .to_string();
    picker::write_readme_config(&home, &snippet);
    let mut ids: Vec<String> =
        read_rollout_lines(&home.join("rollover/latest/conversations.jsonl"))
            .expect("read conversations.jsonl")
            .iter()
            .map(|c| c["id"].as_str().expect("id").to_string())
            .collect();
    ids.sort();
    assert!(!ids.is_empty());
    let listed_ids = |threads: &[Value]| {
        let mut found: Vec<String> = threads
            .iter()
            .map(|t| t["id"].as_str().unwrap_or_default().to_string())
            .collect();
        found.sort();
        found
    };

    let here = picker::thread_list(&codex.bin, &home, Some(project));
    assert_eq!(listed_ids(&here), ids, "listed for {project}: {here:#?}");
    for thread in &here {
        assert_eq!(thread["cwd"], project, "{thread}");
        // No model_provider in the sessions: Codex lists them under the configured one, and
        // resumes them with it.
        assert_eq!(thread["modelProvider"], provider.as_str(), "{thread}");
    }
    let elsewhere = picker::thread_list(&codex.bin, &home, Some("/somewhere/else"));
    assert!(
        elsewhere.is_empty(),
        "listed for another folder: {elsewhere:#?}"
    );
    let all = picker::thread_list(&codex.bin, &home, None);
    assert_eq!(listed_ids(&all), ids);
}

/// Every Responses body written for `samples/` with `--wire WIRE`, by `custom_id`.
fn responses_bodies(work: &Workdir, wire: &str) -> BTreeMap<String, Value> {
    let out = work.root().join(format!("responses-{wire}"));
    let flags = ["--format", "responses", "--wire", wire];
    convert_with(&[Path::new("samples")], &out, &flags);
    let mut bodies = BTreeMap::new();
    let mut stack = vec![out.join("responses")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read responses/").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read bodies");
            for line in text.lines() {
                let body: Value = serde_json::from_str(line).expect("a body is JSON");
                let id = body["custom_id"].as_str().expect("custom_id").to_string();
                bodies.insert(id, body);
            }
        }
    }
    bodies
}

/// Codex's request split as `compare_input` reads it: its first item (the base instructions,
/// or its own default prompt) and the history between it and its fresh context.
fn split_request(input: &[Value]) -> (Value, Vec<Value>) {
    let first = input.first().cloned().unwrap_or(Value::Null);
    let rest = &input[1..input.len().saturating_sub(1)];
    let mut end = rest.len();
    while end > 0 && is_fresh_context(&rest[end - 1]) {
        end -= 1;
    }
    (first, rest[..end].to_vec())
}

/// A reasoning item with its null `content`/`encrypted_content` left out: Codex writes them
/// as null when absent, which is the same item.
fn without_null_reasoning_fields(item: &Value) -> Value {
    let mut item = item.clone();
    if item["type"] == "reasoning" {
        if let Some(obj) = item.as_object_mut() {
            obj.retain(|_, v| !v.is_null());
        }
    }
    item
}

/// A body's `input` items, compared as Codex sends them.
fn body_items(body: &Value) -> Vec<Value> {
    let items = body["input"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    items.iter().map(without_null_reasoning_fields).collect()
}

/// What the Lite wire does to history items: no image `detail`.
fn without_detail(items: &[Value]) -> Vec<Value> {
    let mut items = items.to_vec();
    for item in &mut items {
        if let Some(parts) = item.get_mut("content").and_then(Value::as_array_mut) {
            for part in parts {
                if let Some(obj) = part.as_object_mut() {
                    obj.remove("detail");
                }
            }
        }
    }
    items
}

/// Issue 14: Codex is the reference for the history. For each conversation of `samples/`, the
/// real Codex 0.169 resumes its rollout; our Responses bodies (normal and Lite) must hold
/// exactly the items Codex sent between its first item and its fresh context, and our base
/// instructions must equal Codex's first item (top-level `instructions` in the normal wire,
/// the same developer message after `additional_tools` in Lite). What else Codex's request
/// differs in (its own tools, `parallel_tool_calls`, `store`, `stream`...) is by design: it
/// sends Codex's tools, we send the record's.
#[test]
fn responses_bodies_hold_exactly_the_history_codex_sends() {
    on_every_release(
        "responses_bodies_hold_exactly_the_history_codex_sends",
        responses_bodies_hold_exactly_the_history_codex_sends_in,
    );
}

fn responses_bodies_hold_exactly_the_history_codex_sends_in(codex: &Codex) {
    let work = work("responses");
    let (home, conversations) = convert_samples(&work);
    let normal = responses_bodies(&work, "normal");
    let lite = responses_bodies(&work, "lite");
    assert_eq!(
        normal.len(),
        conversations.len(),
        "one normal body per conversation"
    );
    assert_eq!(
        lite.len(),
        conversations.len(),
        "one Lite body per conversation"
    );
    let mut failures = Vec::new();
    for (n, c) in conversations.iter().enumerate() {
        // A body stands a summary in for a history Codex would rebuild (README): not
        // compared with Codex's rebuild.
        if rebuilds_history(&home.join(&c.path)) {
            println!(
                "[conformance] not compared (Codex rebuilds its compacted history): {} line {}",
                c.source, c.line
            );
            continue;
        }
        let resume_home = work.root().join(format!("resume-{n:03}"));
        if let Err(e) = check_resume(&codex.bin, &resume_home, &home.join(&c.path), &c.path) {
            failures.push(format!("{} line {}: resume failed: {e}", c.source, c.line));
            continue;
        }
        let request: Value = serde_json::from_slice(
            &std::fs::read(resume_home.join("request-1.json")).expect("the request Codex sent"),
        )
        .expect("request JSON");
        let input = request["input"].as_array().expect("input").clone();
        let (first, history) = split_request(&input);
        let history: Vec<Value> = history.iter().map(without_null_reasoning_fields).collect();
        let rollout = conformance_support::parse_rollout(&home.join(&c.path)).expect("rollout");
        let base = rollout.base_instructions.clone();
        let codex_first_text = first["content"][0]["text"].as_str().map(str::to_string);

        let body = &normal[&c.id];
        let ours = body_items(body);
        if ours != history {
            failures.push(format!(
                "{} line {}: normal wire history differs from Codex's:\n  ours:  {}\n  Codex: {}",
                c.source,
                c.line,
                Value::from(ours),
                Value::from(history.clone())
            ));
        }
        match &base {
            Some(text) => {
                if body["instructions"].as_str() != Some(text)
                    || codex_first_text.as_deref() != Some(text)
                {
                    failures.push(format!(
                        "{} line {}: normal `instructions` {:?} vs Codex's first item {:?}",
                        c.source, c.line, body["instructions"], codex_first_text
                    ));
                }
            }
            None => {
                if body.get("instructions").is_some() {
                    failures.push(format!(
                        "{} line {}: instructions written for a record without base instructions",
                        c.source, c.line
                    ));
                }
            }
        }

        let body = &lite[&c.id];
        let items = body_items(body);
        let mut rest = items.as_slice();
        if rest.first().map(|i| &i["type"]) != Some(&Value::from("additional_tools")) {
            failures.push(format!(
                "{} line {}: Lite body does not start with additional_tools",
                c.source, c.line
            ));
            continue;
        }
        rest = &rest[1..];
        if base.is_some() {
            // Codex gives its first item an id of its own; the message is the same.
            let mut codex_first = first.clone();
            if let Some(obj) = codex_first.as_object_mut() {
                obj.remove("id");
            }
            if rest.first() != Some(&codex_first) {
                failures.push(format!(
                    "{} line {}: Lite's developer message {:?} is not Codex's first item {}",
                    c.source,
                    c.line,
                    rest.first(),
                    first
                ));
            }
            rest = &rest[1.min(rest.len())..];
        }
        if rest != without_detail(&history).as_slice() {
            failures.push(format!(
                "{} line {}: Lite history differs from Codex's (less image detail)",
                c.source, c.line
            ));
        }
        if body.get("instructions").is_some_and(|i| i != "") || body.get("tools").is_some() {
            failures.push(format!(
                "{} line {}: Lite body has top-level instructions or tools",
                c.source, c.line
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

// ---------------------------------------------------------------------------------------------
// Codex's own rollouts as a source (issue 60).
// ---------------------------------------------------------------------------------------------

/// A rollout copied into a fresh home `home` at a Codex path, resumed by `codex`: the
/// request's first item (the base instructions) and the history Codex restored (the items
/// between it and its fresh context before the prompt). The copy's `model_provider` is left
/// out, as rollover writes it: Codex refuses a session whose provider is not its own.
fn restored_history(
    codex: &Codex,
    home: &Path,
    rollout: &Path,
) -> Result<(Value, Vec<Value>), String> {
    let lines = read_rollout_lines(rollout)?;
    let id = crate::codex_source::expected(rollout).id;
    let relative = PathBuf::from(format!(
        "sessions/2026/01/01/rollout-2026-01-01T00-00-00-{id}.jsonl"
    ));
    let target = home.join(&relative);
    std::fs::create_dir_all(target.parent().expect("a folder")).map_err(|e| e.to_string())?;
    let mut text = String::new();
    for mut line in lines {
        if line["type"] == "session_meta" {
            if let Some(meta) = line["payload"].as_object_mut() {
                meta.remove("model_provider");
            }
        }
        text.push_str(&line.to_string());
        text.push('\n');
    }
    std::fs::write(&target, text).map_err(|e| e.to_string())?;
    let server = FakeServer::start();
    write_codex_config(home, server.port());
    let out = conformance_support::run_resume(&codex.bin, home, &id, conformance_support::PROMPT);
    let requests = server.requests();
    drop(server);
    if !out.status.success() || requests.len() != 1 {
        return Err(format!(
            "codex exec resume {id} ({}, {} requests):\n{}",
            out.status,
            requests.len(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let input = requests[0]["input"].as_array().cloned().unwrap_or_default();
    let Some((first, rest)) = input.split_first() else {
        return Err("an empty request".to_string());
    };
    let mut end = rest.len().saturating_sub(1);
    while end > 0 && is_fresh_context(&rest[end - 1]) {
        end -= 1;
    }
    let history = rest[..end]
        .iter()
        .map(conformance_support::normalize_like_codex)
        .collect();
    Ok((first.clone(), history))
}

/// Converted Codex rollouts of every generation resume in each supported Codex release with
/// the same model-visible history as their source: where Codex can resume the source (the
/// legacy and paginated ones), both are resumed and their requests compared item for item,
/// base instructions included; where it cannot (pre-envelope) or resumes a history the model
/// never had (prompts only in events), what Codex restores from ours is the source's items
/// as the test reads them.
#[test]
fn converted_codex_rollouts_of_every_generation_resume_with_their_history() {
    on_every_release(
        "converted_codex_rollouts_of_every_generation_resume_with_their_history",
        codex_generations_resume_in,
    );
}

fn codex_generations_resume_in(codex: &Codex) {
    use crate::codex_source::{corpora, expected, fixtures, EVENT_PROMPTS, PRE_ENVELOPE};
    let work = work("codex-generations");
    let sources: Vec<PathBuf> = fixtures().into_iter().chain(corpora()).collect();
    let mut failures = Vec::new();
    for (n, source) in sources.iter().enumerate() {
        let home = work.root().join(format!("home-{n}"));
        convert_with(&[source.as_path()], &home, &["--from", "codex"]);
        let converted = conversation_paths(&home);
        assert_eq!(converted.len(), 1, "{}: one session", source.display());
        let ours = restored_history(
            codex,
            &work.root().join(format!("ours-{n}")),
            &home.join(&converted[0]),
        );
        let name = source.file_name().unwrap().to_string_lossy().into_owned();
        let resumable = name != PRE_ENVELOPE && name != EVENT_PROMPTS;
        let want = if resumable {
            restored_history(codex, &work.root().join(format!("source-{n}")), source)
        } else {
            // An item's `"id": null` (pre-envelope items have it) is no id: Codex sends none.
            let items = expected(source)
                .items
                .iter()
                .map(|item| {
                    let mut item = conformance_support::normalize_like_codex(item);
                    if let Some(object) = item.as_object_mut() {
                        if object.get("id").is_some_and(Value::is_null) {
                            object.remove("id");
                        }
                    }
                    item
                })
                .collect();
            ours.as_ref()
                .map(|(first, _)| (first.clone(), items))
                .map_err(Clone::clone)
        };
        match (ours, want) {
            (Ok(ours), Ok(want)) if ours == want => println!(
                "  ok   {} history items  {}",
                ours.1.len(),
                source.display()
            ),
            (Ok(ours), Ok(want)) => {
                let at =
                    (0..ours.1.len().max(want.1.len())).find(|&i| ours.1.get(i) != want.1.get(i));
                failures.push(format!(
                    "{}: Codex restores another history from the conversion ({} items, the source {}); first difference at {at:?}:\n  ours:   {:?}\n  source: {:?}\n  base instructions equal: {}",
                    source.display(),
                    ours.1.len(),
                    want.1.len(),
                    at.and_then(|i| ours.1.get(i)),
                    at.and_then(|i| want.1.get(i)),
                    ours.0 == want.0
                ));
            }
            (Err(e), _) | (_, Err(e)) => failures.push(format!("{}: {e}", source.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The rollouts a convert run wrote, relative to its home.
fn conversation_paths(home: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(home.join("rollover/latest/conversations.jsonl"))
        .expect("conversations.jsonl");
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("JSON");
            PathBuf::from(v["path"].as_str().expect("path"))
        })
        .collect()
}

/// Codex migrates the conversions of every generation (`migrate-rollouts --apply --json`):
/// every one `migrated`, every response item kept. The paginated rollouts it writes are the
/// paginated generation made live from our own output: rollover validates them, and reads
/// them back into the same items.
#[test]
fn codex_migrates_converted_sessions_of_every_generation() {
    on_every_release(
        "codex_migrates_converted_sessions_of_every_generation",
        codex_migrates_in,
    );
}

fn codex_migrates_in(codex: &Codex) {
    use crate::codex_source::{corpora, fixtures};
    let work = work("codex-migrate");
    let home = work.root().join("home");
    let sources: Vec<PathBuf> = fixtures().into_iter().chain(corpora()).collect();
    let inputs: Vec<&Path> = sources.iter().map(PathBuf::as_path).collect();
    convert_with(&inputs, &home, &["--from", "codex"]);
    let mut paths = conversation_paths(&home);
    paths.sort();
    paths.dedup();
    // The paginated fixture is a fixture's session migrated: the same session, placed once.
    let ids: BTreeSet<String> = sources
        .iter()
        .map(|s| crate::codex_source::expected(s).id)
        .collect();
    assert_eq!(paths.len(), ids.len(), "one session a session id");
    // The items, as Codex keeps them: `"id": null` (a pre-envelope item's) is no id, and
    // Codex's migration writes none; a reasoning item gets its `null` fields
    // (`normalize_like_codex`).
    let items_of = |path: &Path| -> Vec<Value> {
        read_rollout_lines(path)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .filter(|l| l["type"] == "response_item")
            .map(|mut l| {
                if let Some(item) = l["payload"].as_object_mut() {
                    if item.get("id").is_some_and(Value::is_null) {
                        item.remove("id");
                    }
                }
                conformance_support::normalize_like_codex(&l["payload"])
            })
            .collect()
    };
    let before: Vec<Vec<Value>> = paths.iter().map(|p| items_of(&home.join(p))).collect();
    let server = FakeServer::start();
    write_codex_config(&home, server.port());
    let mut cmd = conformance_support::codex_command(&codex.bin, &home);
    cmd.args(["migrate-rollouts", "--apply", "--json"]);
    let out = run_with_timeout(cmd, Duration::from_secs(300)).expect("spawn codex");
    assert!(
        out.status.success(),
        "codex migrate-rollouts --apply --json failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let outcomes = report["outcomes"].as_array().expect("outcomes");
    assert_eq!(outcomes.len(), paths.len(), "{report}");
    assert!(
        outcomes.iter().all(|o| o["status"] == "migrated"),
        "not every conversion migrated: {report:#}"
    );
    println!(
        "[conformance] migrate-rollouts --apply --json: {} of {} migrated",
        outcomes.len(),
        paths.len()
    );
    for (path, items) in paths.iter().zip(&before) {
        let migrated = home.join(path);
        let lines = read_rollout_lines(&migrated).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            lines.iter().all(|l| l.get("ordinal").is_some()),
            "{}: Codex wrote the paginated form",
            path.display()
        );
        let kept = items_of(&migrated);
        let at = (0..kept.len().max(items.len())).find(|&i| kept.get(i) != items.get(i));
        assert_eq!(
            at,
            None,
            "{}: items kept ({} migrated, {} before); at the first difference:\n  migrated: {:?}\n  before:   {:?}",
            path.display(),
            kept.len(),
            items.len(),
            at.and_then(|i| kept.get(i)),
            at.and_then(|i| items.get(i))
        );
        // The paginated generation, as Codex wrote it from ours: valid, and read back whole.
        let check = Command::new(env!("CARGO_BIN_EXE_rollover"))
            .arg("validate")
            .arg(&migrated)
            .output()
            .expect("run rollover validate");
        assert!(
            check.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&check.stdout)
        );
        let again = work
            .root()
            .join(format!("again-{}", path.display()).replace('/', "_"));
        convert_with(&[migrated.as_path()], &again, &[]);
        let back = conversation_paths(&again);
        assert_eq!(back.len(), 1);
        assert_eq!(
            &items_of(&again.join(&back[0])),
            items,
            "{}: the paginated rollout reads back into the same items",
            path.display()
        );
    }
}
