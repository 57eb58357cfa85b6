//! Gemini CLI sessions and OpenTelemetry GenAI traces (issue 61), through the binary: the
//! samples under `tests/fixtures/{gemini-cli,otel}` (provenance in `tests/fixtures/README.md`)
//! convert with exact counts of messages, calls, outputs and reasoning items, each format is
//! found by shape and by `--from`, and an OTLP file of many traces is read a trace at a time.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{json, Value};

use crate::common::{Rollout, Workdir};

fn fixture(relative: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")).join(relative)
}

/// Copies fixture files into the work folder's `in/`.
fn inputs(wd: &Workdir, files: &[&str]) {
    for file in files {
        let name = file.rsplit('/').next().unwrap_or(file);
        wd.create(
            &format!("in/{name}"),
            std::fs::read(fixture(file)).expect("fixture"),
        );
    }
}

/// A rollout's items counted by kind (`message:<role>`, `function_call`, ...).
fn counts(rollout: &Rollout) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for item in rollout.items() {
        let kind = match item["type"].as_str().unwrap_or("") {
            "message" => format!("message:{}", item["role"].as_str().unwrap_or("")),
            other => other.to_string(),
        };
        *counts.entry(kind).or_insert(0) += 1;
    }
    counts
}

fn expect(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

/// Every rollout's counts, keyed by its first user text, with the run's summary.
fn converted(
    wd: &Workdir,
    home: &str,
    extra: &[&str],
) -> (BTreeMap<String, BTreeMap<String, usize>>, Value) {
    let home = wd.convert("in", home, extra, 0);
    let mut by_first_user = BTreeMap::new();
    for rollout in home.all_rollouts() {
        let first_user = rollout
            .items()
            .iter()
            .find(|i| i["role"] == "user")
            .and_then(|i| i["content"][0]["text"].as_str().map(str::to_string))
            .unwrap_or_default();
        by_first_user.insert(first_user, counts(&rollout));
    }
    (by_first_user, home.summary())
}

#[test]
fn gemini_cli_sessions_convert_with_exact_counts() {
    let wd = Workdir::new("gemini_cli_counts");
    inputs(
        &wd,
        &[
            "gemini-cli/session-2026-02-10T09-00-7c1e2a4b.json",
            "gemini-cli/session-2026-03-01T10-00-5e6f7a8b.jsonl",
        ],
    );
    for (n, extra) in [&[][..], &["--from", "gemini-cli"][..]]
        .into_iter()
        .enumerate()
    {
        let (by_first_user, summary) = converted(&wd, &format!("home{n}"), extra);
        assert_eq!(summary["quarantined"], 0, "{summary}");
        assert_eq!(
            by_first_user,
            BTreeMap::from([
                (
                    // The legacy document: two prompts, two calls with their outputs, one
                    // thought summary; the CLI's `info` notice dropped.
                    "Get secret.".to_string(),
                    expect(&[
                        ("function_call", 2),
                        ("function_call_output", 2),
                        ("message:assistant", 2),
                        ("message:user", 2),
                        ("reasoning", 1),
                    ])
                ),
                (
                    // The JSON Lines session: a rewound prompt and reply gone, a copy
                    // superseded by its id, `/stats` a developer message, one failed call.
                    "list files in src".to_string(),
                    expect(&[
                        ("function_call", 2),
                        ("function_call_output", 2),
                        ("message:assistant", 2),
                        ("message:developer", 1),
                        ("message:user", 2),
                        ("reasoning", 2),
                    ])
                ),
            ])
        );
    }
}

#[test]
fn otel_traces_convert_with_exact_counts() {
    let wd = Workdir::new("otel_counts");
    inputs(
        &wd,
        &[
            "otel/examples-llm-calls.otlp.jsonl",
            "otel/deprecated-conventions.spans.jsonl",
        ],
    );
    for (n, extra) in [&[][..], &["--from", "otel"][..]].into_iter().enumerate() {
        let weather = expect(&[
            ("function_call", 1),
            ("function_call_output", 1),
            ("message:assistant", 1),
            ("message:user", 1),
        ]);
        let home = wd.convert("in", &format!("home{n}"), extra, 0);
        let mut all: Vec<BTreeMap<String, usize>> =
            home.all_rollouts().iter().map(counts).collect();
        all.sort();
        let mut want = vec![
            // simple chat, two choices (the second counted, not written)
            expect(&[("message:assistant", 1), ("message:user", 1)]),
            expect(&[("message:assistant", 1), ("message:user", 1)]),
            // reasoning
            expect(&[
                ("message:assistant", 1),
                ("message:user", 1),
                ("reasoning", 1),
            ]),
            // system instructions (the base instructions) and a system message (developer context)
            expect(&[
                ("message:assistant", 1),
                ("message:developer", 1),
                ("message:user", 1),
            ]),
            // tool calls, as the conventions write them and as the deprecated ones did
            weather.clone(),
            weather,
        ];
        want.sort();
        assert_eq!(all, want);
        let summary = home.summary();
        assert_eq!(summary["converted"], 6, "{summary}");
        assert_eq!(summary["quarantined"], 0, "{summary}");
    }
}

/// `traces` traces of two inference spans and a root span each, one OTLP export per trace.
fn many_traces(traces: usize, pretty: bool) -> String {
    let kv = |k: &str, v: Value| json!({"key": k, "value": {"stringValue": v.to_string()}});
    let mut exports = Vec::new();
    for t in 0..traces {
        let trace = format!("{t:032x}");
        let q = json!([{"role": "user", "parts": [{"type": "text", "content": format!("question {t}")}]}]);
        let a = json!([{"role": "assistant", "parts": [{"type": "text", "content": "answer"}], "finish_reason": "stop"}]);
        let mut h = q.as_array().cloned().unwrap_or_default();
        h.extend(a.as_array().cloned().unwrap_or_default());
        h.push(json!({"role": "user", "parts": [{"type": "text", "content": "more"}]}));
        let spans = json!([
            {"traceId": trace, "spanId": "0000000000000002", "parentSpanId": "0000000000000001", "name": "chat", "startTimeUnixNano": "1000", "attributes": [kv("gen_ai.input.messages", q), kv("gen_ai.output.messages", a.clone())]},
            {"traceId": trace, "spanId": "0000000000000003", "parentSpanId": "0000000000000001", "name": "chat", "startTimeUnixNano": "2000", "attributes": [kv("gen_ai.input.messages", Value::Array(h)), kv("gen_ai.output.messages", a)]},
            {"traceId": trace, "spanId": "0000000000000001", "parentSpanId": "", "name": "agent", "startTimeUnixNano": "500", "attributes": []}
        ]);
        exports.push(json!({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}));
    }
    if pretty {
        // One export for the whole file, written as a person would read it.
        let mut all = Vec::new();
        for e in exports {
            all.extend(e["resourceSpans"].as_array().cloned().unwrap_or_default());
        }
        return serde_json::to_string_pretty(&json!({"resourceSpans": all})).unwrap();
    }
    exports.iter().map(|e| e.to_string() + "\n").collect()
}

/// A file of many traces is never held whole: with `--max-conversation-bytes` at a tenth of
/// the file, every trace still converts, from JSON Lines of exports and from one export.
#[test]
fn an_otlp_file_of_many_traces_is_held_a_trace_at_a_time() {
    let wd = Workdir::new("otel_streamed");
    for (name, pretty) in [("lines.json", false), ("one-export.json", true)] {
        let text = many_traces(200, pretty);
        let limit = (text.len() / 10).to_string();
        wd.create(&format!("{name}/traces.json"), &text);
        let home = wd.convert(
            name,
            &format!("home-{name}"),
            &["--max-conversation-bytes", &limit],
            0,
        );
        let summary = home.summary();
        assert_eq!(summary["converted"], 200, "{name}: {summary}");
        assert_eq!(summary["quarantined"], 0, "{name}: {summary}");
        let rollouts = home.all_rollouts();
        assert_eq!(rollouts.len(), 200);
        for rollout in &rollouts {
            assert_eq!(
                counts(rollout),
                expect(&[("message:assistant", 2), ("message:user", 2)]),
                "{name}"
            );
        }
    }
}

/// A file of traces whose spans are interleaved reads each trace whole: spans of two
/// traces alternate, each trace's root last.
#[test]
fn interleaved_traces_each_read_whole() {
    let wd = Workdir::new("otel_interleaved");
    let text = many_traces(2, false);
    let mut spans: Vec<Value> = Vec::new();
    for line in text.lines() {
        let export: Value = serde_json::from_str(line).unwrap();
        spans.push(export["resourceSpans"][0]["scopeSpans"][0]["spans"].clone());
    }
    let mut lines = String::new();
    for k in 0..3 {
        for trace in &spans {
            lines.push_str(&trace[k].to_string());
            lines.push('\n');
        }
    }
    wd.create("in/spans.jsonl", &lines);
    let home = wd.convert("in", "home", &[], 0);
    let rollouts = home.all_rollouts();
    assert_eq!(rollouts.len(), 2);
    for rollout in &rollouts {
        assert_eq!(
            counts(rollout),
            expect(&[("message:assistant", 2), ("message:user", 2)])
        );
    }
}

/// `rollover explain` on one record of each format, as recorded in `tests/expected/`
/// (checked by hand against the fixtures: the session's 9 messages with its rewind, copy
/// and notice counted; the weather trace's second export line, its two inference spans
/// merged).
#[test]
fn explain_reads_one_record_of_each_format() {
    let wd = Workdir::new("explain_sessions_traces");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for (format, file, expected) in [
        (
            "gemini-cli",
            "tests/fixtures/gemini-cli/session-2026-03-01T10-00-5e6f7a8b.jsonl",
            include_str!("expected/explain-gemini-cli.txt"),
        ),
        (
            "otel",
            "tests/fixtures/otel/examples-llm-calls.otlp.jsonl:2",
            include_str!("expected/explain-otel.txt"),
        ),
    ] {
        for extra in [&[][..], &["--from", format][..]] {
            let mut cmd = wd.command(&["explain", file]);
            cmd.args(extra).current_dir(&root);
            let out = cmd.output().expect("run rollover explain");
            assert_eq!(out.status.code(), Some(0), "{format}: {out:?}");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                expected,
                "{format} {extra:?}"
            );
        }
    }
}

/// The review pages show conversations of both formats.
#[test]
fn review_pages_show_both_formats() {
    let wd = Workdir::new("review_sessions_traces");
    inputs(
        &wd,
        &[
            "gemini-cli/session-2026-03-01T10-00-5e6f7a8b.jsonl",
            "otel/examples-llm-calls.otlp.jsonl",
        ],
    );
    let home = wd.convert("in", "home", &["--review", "20"], 0);
    let index = std::fs::read_to_string(home.root.join("rollover/runs/0001/review/index.html"))
        .expect("review index");
    for file in [
        "session-2026-03-01T10-00-5e6f7a8b.jsonl",
        "examples-llm-calls.otlp.jsonl",
    ] {
        assert!(index.contains(file), "{file} not in the review index");
    }
}
