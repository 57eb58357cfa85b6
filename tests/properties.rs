//! Property tests over random transcripts of every source format, converted by the real binary.
//!
//! Three properties, each over its own inputs:
//! - `convert_is_total_accounted_valid_and_deterministic`: one JSONL file of 12 to 20 random
//!   Chat Completions records in every input shape of migration.md section 2 (messages /
//!   body.messages / batch result / input string or list / history / question turns / bare
//!   list, plus some broken lines);
//! - `every_source_format_is_total_accounted_valid_and_deterministic`: a folder of one random
//!   file of each of the eleven source formats (`properties/formats.rs`; the Parquet dataset
//!   written by the test's Parquet writer), each found by detection (the summary's `formats`
//!   must name all eleven);
//! - `any_thread_count_writes_the_same_tree_over_batches_and_read_ahead`: an archive that spans
//!   several batches (over 512 records) and several files read ahead (64 KiB or more), beside
//!   small files and a file of each other format, converted with `--jobs` 1, 2 and 3.
//!
//! What must hold for each run:
//! - it ends with exit 0 (nothing quarantined) or 1 (something quarantined), never a panic or a
//!   usage/I-O error;
//! - every record is accounted for: `records` is the number of lines given, and equals
//!   converted + merged into a conversation + quarantined + joined + dropped by a rule; one
//!   rollout per new session, one audit line per conversation, one quarantine line per
//!   quarantined record, each with a non-empty reason and the record's exact bytes;
//! - every conversation's text account balances (invariant 12), and no record is quarantined
//!   by the invariants or the accounting (that would be a converter bug);
//! - the audit lines and quarantine lines come in input order (files in walk order, lines
//!   rising within a file);
//! - `rollover validate HOME` passes on everything written;
//! - every thread count writes byte-identical homes (all but `timing.json`).
//!
//! `PROPTEST_CASES` sets the number of cases of the first two (default 24 and 12); the third
//! runs an eighth as many (at least 2), each ~3 runs of ~1,000 conversations.
//! `ROLLOVER_PROP_DEBUG=1` prints each case's counts and any invariant quarantine.
//!
//! Plain-text reasoning is generated on assistant messages only: on other roles the converter
//! drops it without a decision, and the accounting quarantines the record (reported on issue 3).

mod formats;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use serde_json::{json, Value};

use crate::common::Workdir;

// Placeholders replaced in the serialised line by escapes serde_json cannot write: lone
// surrogates are valid JSON, invalid Unicode.
const LONE_HIGH: &str = "@@LONE_HIGH@@";
const LONE_LOW: &str = "@@LONE_LOW@@";
const PAIR: &str = "@@PAIR@@";

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-zA-Z ,.?]{0,16}",
        1 => Just(String::new()),
        1 => Just(" \n ".to_string()),
        1 => "\\PC{0,8}",
        // Looks like a registered fragment (Codex would hide it as user text).
        1 => "[a-z ]{0,8}".prop_map(|s| format!("<environment_context>{s}</environment_context>")),
        1 => "[a-z]{0,6}".prop_map(|s| format!("  <SKILL>{s}</skill>\n")),
        1 => Just("# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nbe nice\n</INSTRUCTIONS>".to_string()),
        1 => Just("<hook_prompt hook_run_id=\"1\">x</hook_prompt>".to_string()),
        1 => Just("<user_instructions>older marker</user_instructions>".to_string()),
        1 => Just("<model_switch>now gpt-5</model_switch>".to_string()),
        1 => Just("<permissions instructions>sandboxed</permissions instructions>".to_string()),
        1 => Just(format!("bad {LONE_HIGH} high")),
        1 => Just(LONE_LOW.to_string()),
        1 => Just(format!("ok {PAIR} pair")),
    ]
}

fn call_id() -> impl Strategy<Value = Option<String>> {
    // A small pool, so ids get reused across turns and outputs find (or miss) their calls.
    prop_oneof![
        4 => prop::sample::select(vec!["call_a", "call_b", "call_c", "call_a#2"]).prop_map(|s| Some(s.to_string())),
        1 => Just(None),
    ]
}

fn arguments() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        3 => Just(Some(json!("{\"cmd\":\"ls\"}"))),
        1 => text().prop_map(|t| Some(Value::String(t))),
        2 => Just(Some(json!({"cmd": ["ls", "-l"], "n": 1}))),
        1 => Just(Some(Value::Null)),
        1 => Just(None),
    ]
}

fn function(name: String, args: Option<Value>) -> Value {
    let mut f = json!({ "name": name });
    if let Some(a) = args {
        f["arguments"] = a;
    }
    f
}

fn tool_call() -> impl Strategy<Value = Value> {
    (
        call_id(),
        prop::sample::select(vec!["shell", "get_weather", "Finish"]),
        arguments(),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(id, name, args, custom)| {
            let mut call = if custom {
                json!({"type": "custom", "custom": {"name": name, "input": "raw input"}})
            } else {
                json!({"type": "function", "function": function(name.to_string(), args)})
            };
            if let Some(id) = id {
                call["id"] = json!(id);
            }
            call
        })
}

fn part() -> impl Strategy<Value = Value> {
    let url = prop_oneof![
        Just("https://example.com/cat.png".to_string()),
        Just("data:image/png;base64,iVBORw0KGgo=".to_string()),
        Just("data:image/png;base64,@@@not base64".to_string()),
    ];
    let detail = prop::option::of(prop::sample::select(vec!["low", "high", "auto", "odd"]));
    prop_oneof![
        5 => text().prop_map(|t| json!({"type": "text", "text": t})),
        1 => text().prop_map(Value::String),
        2 => (url, detail).prop_map(|(u, d)| {
            let mut image = json!({"url": u});
            if let Some(d) = d {
                image["detail"] = json!(d);
            }
            json!({"type": "image_url", "image_url": image})
        }),
        1 => Just(json!({"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}})),
        1 => Just(json!({"type": "file", "file": {"filename": "a.pdf", "file_data": "JVBERi0="}})),
        1 => text().prop_map(|t| json!({"type": "refusal", "refusal": t})),
        1 => Just(json!({"type": "video", "video": "x"})),
    ]
}

fn content() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        5 => text().prop_map(|t| Some(Value::String(t))),
        1 => Just(Some(Value::Null)),
        1 => Just(None),
        1 => Just(Some(json!(""))),
        3 => prop::collection::vec(part(), 0..4).prop_map(|p| Some(Value::Array(p))),
    ]
}

fn role() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        2 => Just("system"),
        1 => Just("developer"),
        5 => Just("user"),
        5 => Just("assistant"),
        3 => Just("tool"),
        1 => Just("function"),
        1 => Just("human"),
        1 => Just("alien"),
    ]
}

/// Optional fields of a message, each present now and then on any role (assistant fields
/// mostly on assistants).
#[derive(Debug, Clone)]
struct Extras {
    tool_calls: Option<Vec<Value>>,
    function_call: Option<Value>,
    tool_ref: Option<Value>,
    refusal: Option<String>,
    reasoning: Option<(bool, String)>,
    phase: Option<&'static str>,
    name: Option<&'static str>,
    unknown_key: bool,
}

fn extras() -> impl Strategy<Value = Extras> {
    let tool_ref = prop_oneof![
        4 => call_id().prop_map(|id| id.map(|id| json!({"tool_call_id": id}))),
        1 => prop::collection::vec(call_id(), 0..3).prop_map(|ids| {
            Some(json!({"tool_call_ids": ids.into_iter().flatten().collect::<Vec<_>>()}))
        }),
    ];
    (
        prop::option::weighted(0.35, prop::collection::vec(tool_call(), 0..3)),
        prop::option::weighted(
            0.1,
            (
                prop::sample::select(vec!["get_weather", "shell"]),
                arguments(),
            )
                .prop_map(|(n, a)| function(n.to_string(), a)),
        ),
        tool_ref,
        prop::option::weighted(0.1, text()),
        prop::option::weighted(0.15, (any::<bool>(), text())),
        prop::option::weighted(
            0.1,
            prop::sample::select(vec![
                "commentary",
                "final_answer",
                "partial_answer",
                "bogus",
            ]),
        ),
        prop::option::weighted(
            0.1,
            prop::sample::select(vec!["get_weather", "example_user", "example_assistant"]),
        ),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(
                tool_calls,
                function_call,
                tool_ref,
                refusal,
                reasoning,
                phase,
                name,
                unknown_key,
            )| {
                Extras {
                    tool_calls,
                    function_call,
                    tool_ref,
                    refusal,
                    reasoning,
                    phase,
                    name,
                    unknown_key,
                }
            },
        )
}

fn message() -> impl Strategy<Value = Value> {
    (role(), content(), extras()).prop_map(|(role, content, x)| {
        let mut m = json!({ "role": role });
        if let Some(c) = content {
            m["content"] = c;
        }
        let assistant = role == "assistant";
        if let Some(calls) = x.tool_calls.filter(|_| assistant) {
            m["tool_calls"] = Value::Array(calls);
        }
        if let Some(f) = x.function_call.filter(|_| assistant) {
            m["function_call"] = f;
        }
        if let Some(Value::Object(r)) = x.tool_ref.filter(|_| role == "tool") {
            for (k, v) in r {
                m[k] = v;
            }
        }
        if let Some(r) = x.refusal.filter(|_| assistant) {
            m["refusal"] = json!(r);
        }
        if let Some((structured, r)) = x.reasoning.filter(|_| assistant) {
            if structured {
                m["reasoning"] = json!({ "text": r });
            } else {
                m["reasoning_content"] = json!(r);
            }
        }
        if let Some(p) = x.phase {
            m["phase"] = json!(p);
        }
        if let Some(n) = x.name {
            m["name"] = json!(n);
        } else if role == "function" {
            m["name"] = json!("get_weather");
        }
        if x.unknown_key {
            m["weight"] = json!(1);
        }
        m
    })
}

/// One record's line (no `\n`), in one of the input shapes, or a broken line now and then.
fn record() -> impl Strategy<Value = Vec<u8>> {
    let messages = prop::collection::vec(message(), 0..7);
    (
        0u8..12,
        messages,
        prop::option::of(1_600_000_000u64..1_800_000_000),
        text(),
        0u8..5,
    )
        .prop_map(|(shape, messages, created, reply, junk)| {
            let msgs = Value::Array(messages.clone());
            let value = match shape {
                0 | 1 => {
                    let mut r = json!({"id": "r", "model": "gpt-4o", "messages": msgs, "metadata": {"k": 1}});
                    if let Some(c) = created {
                        r["created"] = json!(c);
                    }
                    r
                }
                2 => json!({"custom_id": "req-1", "method": "POST", "body": {"model": "m", "messages": msgs}}),
                3 => json!({
                    "custom_id": "req-2",
                    "body": {"messages": msgs},
                    "response": {"status_code": 200, "body": {
                        "created": created.unwrap_or(1_700_000_000),
                        "choices": [{"message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}]
                    }}
                }),
                4 => json!({"input": reply, "ideal": "x"}),
                5 => json!({"input": msgs}),
                6 => json!({"history": msgs, "info": {"exit_status": "submitted"}}),
                7 => {
                    let half = messages.len() / 2;
                    json!({"question": [messages[..half].to_vec(), Vec::<Value>::new(), messages[half..].to_vec()]})
                }
                8 => msgs,
                9 => {
                    return match junk {
                        0 => b"{\"messages\": [".to_vec(),
                        // Cut inside a string, right after a backslash (this panicked the run).
                        4 => b"{\"messages\":[{\"role\":\"user\",\"content\":\"cut \\".to_vec(),
                        1 => b"42".to_vec(),
                        2 => b"{\"messages\":[{\"role\":\"user\",\"content\":\"raw \xff\xfe bytes\"}]}"
                            .to_vec(),
                        _ => br#"{"timestamp":"2025-01-01T00:00:00Z","type":"response_item","payload":{}}"#
                            .to_vec(),
                    }
                }
                _ => json!({"messages": msgs, "choices": [{"finish_reason": "stop"}]}),
            };
            line(&value)
        })
}

/// A first record's line: `value` serialised without its placeholders. A file's format is
/// detected from its first record, which must parse for that (lone surrogates do not).
fn plain_line(value: &Value) -> Vec<u8> {
    value
        .to_string()
        .replace(LONE_HIGH, "")
        .replace(LONE_LOW, "")
        .replace(PAIR, "")
        .into_bytes()
}

/// A record's line: `value` serialised, its placeholders made the escapes they stand for.
fn line(value: &Value) -> Vec<u8> {
    value
        .to_string()
        .replace(LONE_HIGH, "\\ud800")
        .replace(LONE_LOW, "\\udc00")
        .replace(PAIR, "\\ud83d\\ude00")
        .into_bytes()
}

/// One `rollover` run: exit code, stdout, stderr.
fn rollover(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rollover"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run rollover");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every file under `root`, relative path to bytes.
fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n != "timing.json") {
                let relative = path
                    .strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .into_owned();
                files.insert(relative, std::fs::read(&path).expect("read file"));
            }
        }
    }
    files
}

/// The input of a case: files (path below the input folder `in/`, in walk order) and their
/// lines, without `\n`.
type Inputs = BTreeMap<String, Vec<Vec<u8>>>;

/// Writes `inputs` under `dir/in/`: a `.parquet` file's lines are its rows
/// ([`formats::parquet`]).
fn write_inputs(dir: &Path, inputs: &Inputs) {
    for (name, lines) in inputs {
        let mut bytes = Vec::new();
        if name.ends_with(".parquet") {
            let rows: Vec<Value> = lines
                .iter()
                .map(|l| serde_json::from_slice(l).expect("a row"))
                .collect();
            let layout = crate::common::parquet::Layout {
                group_rows: 3,
                ..Default::default()
            };
            bytes = crate::common::parquet::write(formats::PARQUET_SCHEMA, &rows, layout);
        }
        for line in lines.iter().filter(|_| !name.ends_with(".parquet")) {
            bytes.extend_from_slice(line);
            bytes.push(b'\n');
        }
        let path = dir.join("in").join(name);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("create input folder");
        std::fs::write(path, bytes).expect("write input");
    }
}

/// Converts `dir/in` once for each `--jobs` value, checks every property on each home and
/// that all wrote the same files. `formats`: the summary's count of files by format, when the
/// case knows it.
fn check_case(
    inputs: &Inputs,
    jobs: &[&str],
    formats: Option<&BTreeMap<String, u64>>,
) -> Result<(), TestCaseError> {
    let work = Workdir::new("properties");
    let dir = work.root();
    write_inputs(dir, inputs);
    let mut homes = Vec::new();
    for jobs in jobs {
        let home = format!("home{jobs}");
        let (code, stdout, stderr) =
            rollover(dir, &["convert", "in", "--out", &home, "--jobs", jobs]);
        let shown =
            format!("convert --jobs {jobs}: exit {code}\nstdout:\n{stdout}\nstderr:\n{stderr}");
        prop_assert!(code == 0 || code == 1, "{}", shown);
        prop_assert!(!stderr.contains("panicked"), "{}", shown);
        let files = tree(&dir.join(&home));
        check_home(inputs, &files, code, formats, &shown)?;

        let (vcode, vout, verr) = rollover(dir, &["validate", "--json", &home]);
        let report: Value = serde_json::from_str(&vout).unwrap_or(Value::Null);
        let rollouts = files
            .keys()
            .filter(|k| k.starts_with("sessions/") && k.ends_with(".jsonl"))
            .count() as u64;
        prop_assert_eq!(vcode, 0, "validate {}:\n{}\n{}", home, vout, verr);
        prop_assert_eq!(report["files"].as_u64(), Some(rollouts), "{}", vout);
        homes.push((jobs, files));
    }
    let (first_jobs, first) = &homes[0];
    for (jobs, files) in &homes[1..] {
        if files != first {
            let differ: Vec<&String> = first
                .keys()
                .chain(files.keys())
                .filter(|k| first.get(*k) != files.get(*k))
                .collect();
            prop_assert!(
                false,
                "--jobs {} and --jobs {} wrote different files: {:?}",
                first_jobs,
                jobs,
                differ
            );
        }
    }
    Ok(())
}

/// Every property of one home written from `inputs`.
fn check_home(
    inputs: &Inputs,
    files: &BTreeMap<String, Vec<u8>>,
    code: i32,
    formats: Option<&BTreeMap<String, u64>>,
    shown: &str,
) -> Result<(), TestCaseError> {
    let report = |name: &str| {
        String::from_utf8(files[&format!("rollover/runs/0001/{name}")].clone())
            .expect("a report is UTF-8")
    };
    let summary: Value = serde_json::from_str(&report("summary.json")).expect("summary is JSON");
    let count = |key: &str| required_count(&summary, key);
    let (records, converted, quarantined) =
        (count("records"), count("converted"), count("quarantined"));
    if std::env::var_os("ROLLOVER_PROP_DEBUG").is_some() {
        eprintln!(
            "case: records {records}, converted {converted}, merged {:?}, dropped {:?}, \
             quarantined {:?}, formats {}, items {}",
            summary.get("records_merged"),
            summary.get("records_dropped"),
            summary["quarantine_reasons"],
            summary["formats"],
            summary["items"]
        );
        for entry in report("quarantine.jsonl")
            .lines()
            .filter(|l| l.contains("\"class\":\"invariant\""))
        {
            eprintln!("  {entry}");
        }
    }
    if let Some(formats) = formats {
        let found: BTreeMap<String, u64> =
            serde_json::from_value(summary["formats"].clone()).expect("formats by name");
        prop_assert_eq!(&found, formats, "{}", shown);
    }

    // Every record accounted for.
    let given: u64 = inputs.values().map(|lines| lines.len() as u64).sum();
    prop_assert_eq!(records, given, "{}", shown);
    let optional = |key: &str| summary.get(key).and_then(Value::as_u64).unwrap_or(0);
    let dropped: u64 = summary
        .get("records_dropped")
        .and_then(Value::as_object)
        .map(|by_rule| by_rule.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    prop_assert_eq!(
        records,
        converted + optional("records_merged") + quarantined + count("joined") + dropped,
        "records = converted + merged + quarantined + joined + dropped\n{}",
        shown
    );
    let damaged = summary["damaged_files"]
        .as_array()
        .is_some_and(|d| !d.is_empty());
    prop_assert_eq!(code, i32::from(quarantined > 0 || damaged), "{}", shown);
    prop_assert_eq!(
        count("text_bytes_in") + count("text_bytes_added"),
        count("text_bytes_out") + count("text_bytes_dropped"),
        "{}",
        shown
    );
    let rollouts = files
        .keys()
        .filter(|k| k.starts_with("sessions/") && k.ends_with(".jsonl"))
        .count() as u64;
    let sessions_new = optional("sessions_new");
    prop_assert_eq!(rollouts, sessions_new, "{}", shown);
    // Each conversation placed once: a new session, the same one read again, or another
    // version of one placed (older, or in conflict with it).
    let listed = |key: &str| {
        summary
            .get(key)
            .and_then(Value::as_array)
            .map_or(0, |l| l.len() as u64)
    };
    prop_assert_eq!(
        converted,
        sessions_new
            + optional("sessions_duplicate")
            + listed("sessions_older")
            + listed("sessions_conflict"),
        "{}",
        shown
    );

    // One quarantine line per quarantined record, with the record's exact bytes.
    let quarantine = report("quarantine.jsonl");
    let entries: Vec<Value> = quarantine
        .lines()
        .map(|l| serde_json::from_str(l).expect("quarantine line is JSON"))
        .collect();
    prop_assert_eq!(entries.len() as u64, quarantined, "{}", shown);
    for entry in &entries {
        let reason = entry["reason"].as_str().unwrap_or("");
        prop_assert!(!reason.trim().is_empty(), "empty reason: {}", entry);
        prop_assert!(
            !entry["class"].as_str().unwrap_or("").is_empty(),
            "{}",
            entry
        );
        // The converter's output always passes the invariants and the accounting: a
        // record quarantined by them is a converter bug hidden as a quarantine.
        prop_assert_ne!(entry["class"].as_str(), Some("invariant"), "{}", entry);
        let raw = match (entry["record"].as_str(), entry["record_base64"].as_str()) {
            (Some(text), _) => text.as_bytes().to_vec(),
            (None, Some(b64)) => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .expect("base64")
            }
            (None, None) => Vec::new(),
        };
        let source = entry["source"].as_str().unwrap_or("");
        let lines = source.strip_prefix("in/").and_then(|name| inputs.get(name));
        prop_assert!(
            lines.is_some(),
            "quarantined from an unknown file: {}",
            entry
        );
        let line = entry["line"].as_u64().expect("line") as usize;
        prop_assert_eq!(
            Some(&raw),
            lines.and_then(|l| l.get(line - 1)),
            "quarantine keeps the record: {}",
            entry
        );
    }

    // One audit line per conversation, each account balanced.
    let conversations: Vec<Value> = report("conversations.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("conversation line"))
        .collect();
    prop_assert_eq!(conversations.len() as u64, converted, "{}", shown);
    for c in &conversations {
        let a = &c["account"];
        let n = |k: &str| required_count(a, k);
        prop_assert_eq!(
            n("bytes_in") + n("bytes_added"),
            n("bytes_out") + n("bytes_dropped"),
            "unbalanced: {}",
            c
        );
    }

    // Both reports in input order: files as walked, lines rising within a file.
    for (name, lines) in [("conversations", &conversations), ("quarantine", &entries)] {
        let order: Vec<(Vec<String>, u64)> = lines
            .iter()
            .map(|l| {
                let source = l["source"].as_str().unwrap_or("");
                let parts: Vec<String> = source.split('/').map(str::to_string).collect();
                (parts, l["line"].as_u64().unwrap_or(0))
            })
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        prop_assert!(
            order == sorted,
            "{}.jsonl is not in input order: {:?}",
            name,
            order
        );
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(24)
}

/// A file name's format prefix, so that the walk (by name) takes them in this order.
const FORMATS: [&str; 11] = [
    "anthropic",
    "chat",
    "chat-stream",
    "chatgpt",
    "claude-code",
    "codex",
    "gemini-cli",
    "otel",
    "parquet",
    "responses",
    "sharegpt",
];

/// The file of format `name`: `NAME.jsonl`, a Parquet dataset `parquet.parquet`.
fn file_of(name: &str) -> String {
    match name {
        "parquet" => "parquet.parquet".to_string(),
        _ => format!("{name}.jsonl"),
    }
}

/// One file of each of the eleven source formats: `NAME.jsonl` for the format `NAME` (a Parquet
/// dataset `parquet.parquet`).
fn every_format() -> impl Strategy<Value = Inputs> {
    (
        formats::anthropic(),
        prop::collection::vec(record(), 3..8),
        formats::chat_stream(),
        formats::chatgpt(0),
        formats::claude_code(0),
        formats::codex(),
        formats::gemini_cli(),
        formats::otel(),
        formats::parquet(),
        formats::responses(),
        formats::sharegpt(),
    )
        .prop_map(
            |(
                anthropic,
                chat,
                chat_stream,
                chatgpt,
                claude_code,
                codex,
                gemini,
                otel,
                parquet,
                responses,
                sharegpt,
            )| {
                let chat = once_chat(chat);
                [
                    anthropic,
                    chat,
                    chat_stream,
                    chatgpt,
                    claude_code,
                    codex,
                    gemini,
                    otel,
                    parquet,
                    responses,
                    sharegpt,
                ]
                .into_iter()
                .zip(FORMATS)
                .map(|(lines, name)| (file_of(name), lines))
                .collect()
            },
        )
}

/// Chat records, the first a plain `{"messages": [...]}` one, so the file is detected as chat
/// whatever the other records are (a broken first line would make it a file of no format).
fn once_chat(mut records: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    records.insert(
        0,
        line(&json!({"messages": [{"role": "user", "content": "hello"}]})),
    );
    records
}

/// `lines` repeated until they make at least `bytes` bytes: a file the reader reads ahead.
fn at_least(lines: Vec<Vec<u8>>, bytes: usize) -> Vec<Vec<u8>> {
    let mut out = lines.clone();
    let mut size: usize = out.iter().map(|l| l.len() + 1).sum();
    for line in lines.iter().cycle() {
        if size >= bytes {
            break;
        }
        size += line.len() + 1;
        out.push(line.clone());
    }
    out
}

/// 64 KiB: from this size, a file is read ahead by its own thread (`AHEAD_MIN_BYTES` in
/// src/pipeline/reader/mod.rs). A batch holds 512 records at most (`BATCH_RECORDS`).
const READ_AHEAD: usize = 64 << 10;
const BATCH_RECORDS: usize = 512;

/// An archive of several batches: three chat files of 64 KiB or more (read ahead) between two
/// small ones, a ShareGPT dataset (read record by record) and a Claude Code session (read as
/// a whole) of 64 KiB or more, and one file of each format.
fn archive() -> impl Strategy<Value = Inputs> {
    (
        prop::collection::vec(prop::collection::vec(record(), 60..90), 3),
        prop::collection::vec(prop::collection::vec(record(), 1..6), 2),
        formats::sharegpt(),
        formats::claude_code(1),
        every_format(),
    )
        .prop_map(|(big, small, sharegpt, session, others)| {
            let mut inputs = others;
            for (i, records) in big.into_iter().enumerate() {
                let lines = at_least(once_chat(records), READ_AHEAD);
                inputs.insert(format!("chat/big-{i}.jsonl"), lines);
            }
            for (i, records) in small.into_iter().enumerate() {
                inputs.insert(format!("chat/small-{i}.jsonl"), once_chat(records));
            }
            inputs.insert(
                "sharegpt/big.jsonl".to_string(),
                at_least(sharegpt, READ_AHEAD),
            );
            inputs.insert(
                "claude-code/big.jsonl".to_string(),
                at_least(session, READ_AHEAD),
            );
            inputs
        })
}

proptest! {
    #![proptest_config(Config {
        cases: cases(),
        max_shrink_iters: 200,
        ..Config::default()
    })]

    #[test]
    fn convert_is_total_accounted_valid_and_deterministic(
        lines in prop::collection::vec(record(), 12..=20)
    ) {
        let inputs: Inputs = [("in.jsonl".to_string(), lines)].into_iter().collect();
        check_case(&inputs, &["1", "2"], None)?;
    }
}

proptest! {
    #![proptest_config(Config {
        cases: cases().div_ceil(2),
        max_shrink_iters: 100,
        ..Config::default()
    })]

    #[test]
    fn every_source_format_is_total_accounted_valid_and_deterministic(inputs in every_format()) {
        let formats = FORMATS.iter().map(|f| (f.to_string(), 1)).collect();
        check_case(&inputs, &["1", "2"], Some(&formats))?;
    }
}

proptest! {
    // Each case converts ~1,000 conversations three times: few cases, and a failure shrinks
    // only a little (every step is three conversions).
    #![proptest_config(Config {
        cases: (cases() / 8).max(2),
        max_shrink_iters: 8,
        ..Config::default()
    })]

    #[test]
    fn any_thread_count_writes_the_same_tree_over_batches_and_read_ahead(inputs in archive()) {
        // What the case claims to cover: several batches, several files read ahead.
        let records: usize = inputs.values().map(Vec::len).sum();
        prop_assert!(records > 2 * BATCH_RECORDS, "{} records", records);
        let ahead = inputs
            .values()
            .filter(|lines| lines.iter().map(|l| l.len() + 1).sum::<usize>() >= READ_AHEAD)
            .count();
        prop_assert!(ahead >= 5, "{} files to read ahead", ahead);
        let mut formats: BTreeMap<String, u64> = FORMATS.iter().map(|f| (f.to_string(), 1)).collect();
        formats.insert("chat".to_string(), 6);
        formats.insert("sharegpt".to_string(), 2);
        formats.insert("claude-code".to_string(), 2);
        check_case(&inputs, &["1", "2", "3"], Some(&formats))?;
    }
}

/// A count the summary or an account must carry. A missing or non-numeric key fails the
/// property: defaulting it (to `u64::MAX`, as this file once did) made both sides of a sum
/// wrap the same way in release builds, so a missing key passed.
fn required_count(object: &Value, key: &str) -> u64 {
    match object.get(key).and_then(Value::as_u64) {
        Some(n) => n,
        None => panic!("`{key}` is missing or not a count in {object}"),
    }
}

#[test]
#[should_panic(expected = "`text_bytes_added` is missing or not a count")]
fn a_missing_summary_key_fails_the_property() {
    let summary =
        serde_json::json!({"text_bytes_in": 5, "text_bytes_out": 5, "text_bytes_dropped": 0});
    let added =
        required_count(&summary, "text_bytes_in") + required_count(&summary, "text_bytes_added");
    assert_eq!(added, 5);
}
