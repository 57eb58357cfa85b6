//! API traffic logs and training datasets (issue 13): Anthropic Messages, OpenAI Responses,
//! Chat Completions (streamed and not) and ShareGPT, converted by the real binary. Every file of
//! the shared corpora converts with no invariant violation or is quarantined with a reason, and
//! the summary accounts for every record; each case of the issue's list is pinned with the
//! exact items written.

use std::path::{Path, PathBuf};

use crate::common::{Home, Workdir};
use serde_json::{json, Value};

fn corpus(set: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/corpora/sources"
    ))
    .join(set)
}

/// Records a file holds as the reader splits them: a JSON array one per element, else one per
/// non-blank line.
fn records_in(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap();
    if path.extension().is_some_and(|e| e == "json") {
        if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(&text) {
            return items.len() as u64;
        }
    }
    text.lines().filter(|l| !l.trim().is_empty()).count() as u64
}

fn count(summary: &Value, key: &str) -> u64 {
    summary[key].as_u64().unwrap_or(0)
}

#[test]
fn every_corpus_file_converts_or_is_quarantined_with_a_reason_and_every_record_is_counted() {
    let dir = Workdir::new("api-corpora");
    for set in [
        "anthropic-messages-api",
        "openai-responses-api",
        "openai-chat-completions",
        "sharegpt",
    ] {
        let input = corpus(set);
        let home = format!("home-{set}");
        let run = dir.run(&["convert", input.to_str().unwrap(), "--out", &home]);
        assert!(
            matches!(run.code(), Some(0 | 1)),
            "{set}: {}\n{}",
            run.stdout(),
            run.stderr()
        );
        let home = Home {
            root: dir.path(&home),
            run,
        };
        let summary = home.summary();
        // The originals of the cassettes (YAML) are not inputs.
        let mut lines = 0;
        let mut yaml = 0;
        for entry in walkdir::WalkDir::new(&input) {
            let entry = entry.unwrap();
            let path = entry.path();
            match path.extension().and_then(|e| e.to_str()) {
                Some("jsonl" | "json") => lines += records_in(path),
                Some("yaml") => yaml += 1,
                _ => {}
            }
        }
        assert_eq!(
            summary["skipped_other_extensions"][".yaml"]
                .as_u64()
                .unwrap_or(0),
            yaml,
            "{set}"
        );
        assert_eq!(count(&summary, "records"), lines, "{set}: {summary:#}");
        assert_eq!(
            count(&summary, "records"),
            count(&summary, "converted")
                + count(&summary, "quarantined")
                + count(&summary, "joined")
                + count(&summary, "records_merged")
                + count(&summary, "records_dropped"),
            "{set}: every record in exactly one place: {summary:#}"
        );
        assert!(count(&summary, "converted") > 0, "{set}");
        assert_eq!(summary["violations"], json!({}), "{set}");
        assert_eq!(
            count(&summary, "text_bytes_in") + count(&summary, "text_bytes_added"),
            count(&summary, "text_bytes_out") + count(&summary, "text_bytes_dropped"),
            "{set}: text accounting"
        );
        for entry in home.quarantine() {
            let reason = entry["reason"].as_str().unwrap_or_default();
            assert!(!reason.is_empty(), "{set}: {entry}");
            // No corpus record is refused for not being read at all.
            assert_ne!(entry["class"], "not_a_record", "{set}: {entry}");
        }
        let sessions = dir.path(&format!("home-{set}/sessions"));
        let validate = dir.run(&["validate", sessions.to_str().unwrap()]);
        validate.expect_code(0);
    }
}

/// The items of the only rollout `records` (written as `name`) become, with the home (which
/// lives as long as the returned folder).
fn items_of(name: &str, records: &[Value]) -> (Workdir, Home, Vec<Value>) {
    let dir = Workdir::new("api-items");
    dir.create_jsonl(name, records);
    let home = dir.convert(name, "home", &[], 0);
    let items = home.single_rollout().items();
    (dir, home, items)
}

fn msg(role: &str, kind: &str, text: &str) -> Value {
    json!({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})
}

fn phased(text: &str, phase: &str) -> Value {
    json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}], "phase": phase})
}

fn call(id: &str, name: &str, arguments: &str) -> Value {
    json!({"type": "function_call", "name": name, "arguments": arguments, "call_id": id})
}

fn output(id: &str, text: &str) -> Value {
    json!({"type": "function_call_output", "call_id": id, "output": text})
}

fn decision_rules(home: &Home) -> Vec<String> {
    let mut rules: Vec<String> = home.conversations()[0]["decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["rule"].as_str().map(str::to_string))
        .collect();
    rules.sort();
    rules.dedup();
    rules
}

fn anthropic_pair(messages: Value, content: Value, stop: &str) -> Value {
    json!({"request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages",
            "body": {"model": "claude-haiku-4-5", "max_tokens": 512, "messages": messages}},
           "response": {"status": 200, "body": {"id": "msg_x", "type": "message", "role": "assistant",
            "model": "claude-haiku-4-5", "content": content, "stop_reason": stop}}})
}

#[test]
fn anthropic_sse_stream_with_thinking_and_a_tool_call() {
    let ev = |data: Value| json!({"event": data["type"].clone(), "data": data});
    let events = vec![
        ev(
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-0", "content": []}}),
        ),
        ev(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Need the "}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "weather."}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 0})),
        ev(
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"city\":"}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": " \"Paris\"}"}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 1})),
        ev(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}})),
        ev(json!({"type": "message_stop"})),
    ];
    let record = json!({"request": {"uri": "https://api.anthropic.com/v1/messages", "body": {
            "model": "claude-sonnet-4-0", "max_tokens": 1024, "stream": true,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}]}},
        "response": {"status": 200, "sse_events": events}});
    let (_dir, home, items) = items_of("stream.jsonl", &[record]);
    assert_eq!(
        items,
        vec![
            msg("user", "input_text", "Weather in Paris?"),
            json!({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Need the weather."}], "encrypted_content": null}),
            call("toolu_1", "weather", r#"{"city":"Paris"}"#),
            output("toolu_1", "aborted"),
        ]
    );
    let rules = decision_rules(&home);
    assert!(
        rules.contains(&"builtin.thinking-signature".to_string()),
        "{rules:?}"
    );
    assert!(
        rules.contains(&"policy.missing_output".to_string()),
        "{rules:?}"
    );
}

#[test]
fn anthropic_chain_of_three_logged_requests_is_one_conversation() {
    let u1 = json!({"role": "user", "content": "Who is the youngest, Alice or Bob?"});
    let a1 = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "age", "input": {"name": "Alice"}}]});
    let r1 = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "30"}]});
    let a2 = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_b", "name": "age", "input": {"name": "Bob"}}]});
    let r2 = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "5", "is_error": false}]});
    let (_dir, home, items) = items_of(
        "chain.jsonl",
        &[
            anthropic_pair(json!([u1]), a1["content"].clone(), "tool_use"),
            anthropic_pair(json!([u1, a1, r1]), a2["content"].clone(), "tool_use"),
            anthropic_pair(
                json!([u1, a1, r1, a2, r2]),
                json!([{"type": "text", "text": "Bob."}]),
                "end_turn",
            ),
        ],
    );
    assert_eq!(
        items,
        vec![
            msg("user", "input_text", "Who is the youngest, Alice or Bob?"),
            call("toolu_a", "age", r#"{"name":"Alice"}"#),
            output("toolu_a", "30"),
            call("toolu_b", "age", r#"{"name":"Bob"}"#),
            output("toolu_b", "5"),
            phased("Bob.", "final_answer"),
        ]
    );
    let summary = home.summary();
    assert_eq!(count(&summary, "records"), 3);
    assert_eq!(count(&summary, "converted"), 1);
    assert_eq!(count(&summary, "records_merged"), 2);
    assert!(decision_rules(&home).contains(&"policy.resent_history".to_string()));
}

#[test]
fn anthropic_chain_that_diverges_is_two_conversations_and_the_audit_says_why() {
    let u1 = json!({"role": "user", "content": "Plan a trip"});
    let a1 = json!({"role": "assistant", "content": "Where to?"});
    let dir = Workdir::new("api-diverge");
    dir.create_jsonl(
        "log.jsonl",
        &[
            anthropic_pair(
                json!([u1]),
                json!([{"type": "text", "text": "Where to?"}]),
                "end_turn",
            ),
            anthropic_pair(
                json!([u1, a1, {"role": "user", "content": "Rome"}]),
                json!([{"type": "text", "text": "Rome it is."}]),
                "end_turn",
            ),
            anthropic_pair(
                json!([u1, a1, {"role": "user", "content": "Paris"}]),
                json!([{"type": "text", "text": "Paris it is."}]),
                "end_turn",
            ),
        ],
    );
    let home = dir.convert("log.jsonl", "home", &[], 0);
    let rollouts = home.all_rollouts();
    assert_eq!(rollouts.len(), 2);
    let mut bodies: Vec<Vec<Value>> = rollouts.iter().map(|r| r.items()).collect();
    bodies.sort_by_key(|items| items.last().unwrap().to_string());
    assert_eq!(
        bodies,
        vec![
            vec![
                msg("user", "input_text", "Plan a trip"),
                phased("Where to?", "final_answer"),
                msg("user", "input_text", "Paris"),
                phased("Paris it is.", "final_answer"),
            ],
            vec![
                msg("user", "input_text", "Plan a trip"),
                phased("Where to?", "final_answer"),
                msg("user", "input_text", "Rome"),
                phased("Rome it is.", "final_answer"),
            ],
        ]
    );
    let conversations = home.conversations();
    let diverged: Vec<&Value> = conversations
        .iter()
        .flat_map(|c| c["decisions"].as_array().into_iter().flatten())
        .filter(|d| d["rule"] == "builtin.chain-diverged")
        .collect();
    assert_eq!(diverged.len(), 1, "{conversations:#?}");
    assert!(
        diverged[0].to_string().contains("disagrees at message 3"),
        "{}",
        diverged[0]
    );
}

fn stored(id: &str, previous: Option<&str>, input: Value, output: Value) -> Value {
    json!({"object": "response", "id": id, "previous_response_id": previous, "status": "completed",
           "model": "gpt-5", "input": input, "output": output})
}

fn responses_chain() -> Vec<Value> {
    vec![
        stored(
            "resp_1",
            None,
            json!([{"role": "user", "content": "Run the tests"}]),
            json!([{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": "{\"cmd\":\"make test\"}", "status": "completed"}]),
        ),
        stored(
            "resp_2",
            Some("resp_1"),
            json!([{"type": "function_call_output", "call_id": "call_1", "output": "ok"}]),
            json!([{"type": "message", "id": "msg_2", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": "All green.", "annotations": [], "logprobs": []}]}]),
        ),
    ]
}

#[test]
fn responses_previous_response_id_chain_is_one_conversation() {
    let (_dir, home, items) = items_of("responses.jsonl", &responses_chain());
    assert_eq!(
        items,
        vec![
            msg("user", "input_text", "Run the tests"),
            call("call_1", "shell", r#"{"cmd":"make test"}"#),
            output("call_1", "ok"),
            phased("All green.", "final_answer"),
        ]
    );
    assert_eq!(count(&home.summary(), "records_merged"), 1);
}

#[test]
fn responses_chain_with_a_missing_link_is_quarantined_with_the_id() {
    let mut records = responses_chain();
    records.push(stored(
        "resp_4",
        Some("resp_3"),
        json!([{"role": "user", "content": "And now?"}]),
        json!([]),
    ));
    let dir = Workdir::new("api-missing-link");
    dir.create_jsonl("responses.jsonl", &records);
    let home = dir.convert("responses.jsonl", "home", &[], 1);
    assert_eq!(home.all_rollouts().len(), 1);
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1);
    assert_eq!(quarantine[0]["class"], "missing_link");
    assert_eq!(quarantine[0]["line"], 3);
    assert!(
        quarantine[0]["reason"]
            .as_str()
            .unwrap()
            .contains("`resp_3`"),
        "{}",
        quarantine[0]
    );
}

#[test]
fn responses_code_interpreter_call_is_a_custom_call_and_its_logs() {
    let record = stored(
        "resp_1",
        None,
        json!("What is 2**10?"),
        json!([{"type": "code_interpreter_call", "id": "ci_1", "code": "print(2**10)", "container_id": "cntr_1",
                "status": "completed", "outputs": [{"type": "logs", "logs": "1024\n"}]},
               {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "1024"}]}]),
    );
    let (_dir, home, items) = items_of("ci.jsonl", &[record]);
    assert_eq!(
        items,
        vec![
            msg("user", "input_text", "What is 2**10?"),
            json!({"type": "custom_tool_call", "call_id": "ci_1", "name": "code_interpreter", "input": "print(2**10)"}),
            json!({"type": "custom_tool_call_output", "call_id": "ci_1", "output": "1024\n"}),
            phased("1024", "final_answer"),
        ]
    );
    assert!(decision_rules(&home).contains(&"policy.hosted_tool".to_string()));
}

#[test]
fn sharegpt_parallel_calls_with_one_observation_are_split_by_rule() {
    let row = json!({
        "conversations": [
            {"from": "human", "value": "Weather in Paris and Rome?"},
            {"from": "function_call", "value": "[{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"weather\", \"arguments\": {\"city\": \"Rome\"}}]"},
            {"from": "observation", "value": "[\"20C\", \"25C\"]"},
            {"from": "gpt", "value": "20C and 25C."}
        ],
        "tools": "[{\"name\": \"weather\", \"description\": \"Weather of a city\", \"parameters\": {\"type\": \"object\"}}]"
    });
    let (_dir, home, items) = items_of("data.jsonl", &[row]);
    assert_eq!(
        items,
        vec![
            msg("user", "input_text", "Weather in Paris and Rome?"),
            call("call_1_0", "weather", r#"{"city":"Paris"}"#),
            call("call_1_1", "weather", r#"{"city":"Rome"}"#),
            output("call_1_0", "20C"),
            output("call_1_1", "25C"),
            // A dataset row says nothing about whether it finished: no phase is guessed.
            msg("assistant", "output_text", "20C and 25C."),
        ]
    );
    let rules = decision_rules(&home);
    for rule in ["policy.shared_observation", "builtin.dataset-tools"] {
        assert!(rules.contains(&rule.to_string()), "{rule}: {rules:?}");
    }
    let tools = home.conversations()[0].to_string();
    assert!(tools.contains("dataset tools: weather"), "{tools}");
}

#[test]
fn anthropic_batch_result_that_errored_quarantines_the_request_with_its_reason() {
    let dir = Workdir::new("api-batch");
    let params = |text: &str| json!({"model": "claude-haiku-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": text}]});
    dir.create_jsonl(
        "batch/requests.jsonl",
        &[
            json!({"custom_id": "ok", "params": params("Hi")}),
            json!({"custom_id": "bad", "params": params("Hello")}),
        ],
    );
    dir.create_jsonl(
        "batch/results.jsonl",
        &[
            json!({"custom_id": "bad", "result": {"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: 64 > 32"}}}}),
            json!({"custom_id": "ok", "result": {"type": "succeeded", "message": {"id": "msg_ok", "type": "message", "role": "assistant", "model": "claude-haiku-4-5", "stop_reason": "end_turn", "content": [{"type": "text", "text": "Hello!"}]}}}),
        ],
    );
    let home = dir.convert("batch", "home", &[], 1);
    assert_eq!(
        home.single_rollout().items(),
        vec![
            msg("user", "input_text", "Hi"),
            phased("Hello!", "final_answer")
        ]
    );
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1, "{quarantine:#?}");
    assert_eq!(quarantine[0]["class"], "batch_failed");
    assert_eq!(quarantine[0]["line"], 2);
    assert!(
        quarantine[0]["reason"]
            .as_str()
            .unwrap()
            .ends_with("batch result `bad` errored: max_tokens: 64 > 32"),
        "{}",
        quarantine[0]
    );
    let summary = home.summary();
    assert_eq!(count(&summary, "records"), 4);
    assert_eq!(count(&summary, "joined"), 2);
}

#[test]
fn chat_completions_sse_lines_reassemble_reasoning_and_a_tool_call() {
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}",
            json!({"id": "c1", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": "m",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let lines = [
        chunk(
            json!({"role": "assistant", "reasoning_content": "Look it "}),
            Value::Null,
        ),
        String::new(),
        chunk(json!({"reasoning_content": "up."}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_9", "type": "function", "function": {"name": "lookup", "arguments": ""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"q\":1}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        "data: [DONE]".to_string(),
    ];
    let dir = Workdir::new("api-sse");
    dir.create("stream.jsonl", lines.join("\n") + "\n");
    let home = dir.convert("stream.jsonl", "home", &[], 0);
    assert_eq!(
        home.single_rollout().items(),
        vec![
            json!({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Look it up."}], "encrypted_content": null}),
            call("call_9", "lookup", r#"{"q":1}"#),
            output("call_9", "aborted"),
        ]
    );
    let summary = home.summary();
    assert_eq!(count(&summary, "records"), 6);
    assert_eq!(count(&summary, "records_merged"), 5);
}

/// Every path into `value` (object keys and list positions), depth first, up to `limit`.
fn paths(value: &Value, limit: usize) -> Vec<Vec<String>> {
    fn walk(value: &Value, here: &mut Vec<String>, out: &mut Vec<Vec<String>>, limit: usize) {
        let children: Vec<(String, &Value)> = match value {
            Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
            // The first items of a list stand for the rest (SSE logs hold hundreds).
            Value::Array(items) => items
                .iter()
                .take(4)
                .enumerate()
                .map(|(i, v)| (i.to_string(), v))
                .collect(),
            _ => Vec::new(),
        };
        for (key, child) in children {
            if out.len() >= limit {
                return;
            }
            here.push(key);
            out.push(here.clone());
            walk(child, here, out, limit);
            here.pop();
        }
    }
    let mut out = Vec::new();
    walk(value, &mut Vec::new(), &mut out, limit);
    out
}

/// `value` with the node at `path` replaced (`None`: removed).
fn mutated(value: &Value, path: &[String], replacement: Option<&Value>) -> Value {
    let mut v = value.clone();
    let (last, parents) = path.split_last().unwrap();
    let mut here = &mut v;
    for key in parents {
        here = match here {
            Value::Object(map) => map.get_mut(key).unwrap(),
            Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
            _ => unreachable!(),
        };
    }
    match (here, replacement) {
        (Value::Object(map), None) => {
            map.remove(last);
        }
        (Value::Object(map), Some(r)) => {
            map.insert(last.clone(), r.clone());
        }
        (Value::Array(items), None) => {
            items.remove(last.parse::<usize>().unwrap());
        }
        (Value::Array(items), Some(r)) => items[last.parse::<usize>().unwrap()] = r.clone(),
        _ => unreachable!(),
    }
    v
}

/// Damaged input never crashes a reader: each corpus record with each node (the first 80
/// per record, the first items of each list) removed, nulled, made a number, a string or an empty object still
/// reads and converts with the text accounted for, or is refused with a reason.
#[test]
fn damaged_records_never_crash_the_api_and_dataset_readers() {
    use rollover::convert::{convert, RecordKey};
    use rollover::input::format::{reader, InputRecord, ReadContext, SourceFormat};
    use rollover::rules::RuleSet;
    let rules = RuleSet::builtin().unwrap();
    let sets = [
        ("anthropic-messages-api", SourceFormat::ANTHROPIC),
        ("openai-responses-api", SourceFormat::RESPONSES),
        ("openai-chat-completions", SourceFormat::CHAT_STREAM),
        ("sharegpt", SourceFormat::SHAREGPT),
    ];
    let replacements = [
        None,
        Some(Value::Null),
        Some(json!(7)),
        Some(json!("x")),
        Some(json!({})),
    ];
    for (set, format) in sets {
        let reader = reader(format);
        for entry in std::fs::read_dir(corpus(set)).unwrap().flatten() {
            let path = entry.path();
            let text = match path.extension().and_then(|e| e.to_str()) {
                Some("jsonl" | "json") => std::fs::read_to_string(&path).unwrap(),
                _ => continue,
            };
            // A file holding an inline image: every variant would decode it again (minutes in
            // a debug build) for nothing the other files do not cover.
            if text.contains("data:image/") {
                continue;
            }
            let records: Vec<Value> = match serde_json::from_str::<Value>(&text) {
                Ok(Value::Array(items)) => items.into_iter().take(3).collect(),
                _ => text
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect(),
            };
            let context = ReadContext {
                rules: &rules,
                path: &path,
                key: "damaged",
                root: path.parent(),
                follow: false,
                cache: &Default::default(),
            };
            for (n, record) in records.iter().enumerate() {
                for p in paths(record, 80) {
                    for replacement in &replacements {
                        let damaged = mutated(record, &p, replacement.as_ref());
                        let mut given: Vec<InputRecord> = records
                            .iter()
                            .enumerate()
                            .map(|(index, v)| InputRecord {
                                value: v.clone(),
                                index,
                                repairs: 0,
                            })
                            .collect();
                        given[n].value = damaged;
                        let read = reader.read(given, &context);
                        let mut seen: Vec<usize> = read
                            .conversations
                            .iter()
                            .flat_map(|c| c.records.iter().copied())
                            .chain(read.refused.iter().map(|(i, _)| *i))
                            .chain(read.dropped.iter().map(|d| d.index))
                            .collect();
                        seen.sort_unstable();
                        assert_eq!(
                            seen,
                            (0..records.len()).collect::<Vec<_>>(),
                            "{set} {path:?} {p:?}"
                        );
                        for (k, c) in read.conversations.into_iter().enumerate() {
                            // Source notes' dropped bytes included.
                            let bytes_in =
                                rollover::audit::accounting::transcript_bytes(&c.transcript);
                            let key = RecordKey {
                                source: "damaged",
                                record: rollover::model::identity::RecordId {
                                    digest: 0,
                                    occurrence: k as u32,
                                    value: 0,
                                },
                                naming: None,
                            };
                            if let Ok(conversation) = convert(c.transcript, &rules, &key) {
                                let account = conversation.account(bytes_in);
                                assert!(account.balanced(), "{set} {p:?}: {account:?}");
                            }
                        }
                    }
                }
            }
        }
    }
}
