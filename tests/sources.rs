//! Source formats read and converted through the library, item by item: ChatGPT exports and
//! Claude Code sessions (issue 12). Each test pins one case of the issue's list with the exact
//! items written.

use std::path::Path;

use rollover::convert::{convert, Conversation, OutPayload, RecordKey};
use rollover::input::chatgpt::{self, ImageFiles};
use rollover::input::format::{FileRead, FormatReader};
use rollover::model::transcript::{SourceNote, Transcript};
use rollover::rules::RuleSet;
use serde_json::{json, Value};

use crate::common;

/// The built-in rules, loaded once: a converted conversation borrows its session fields from
/// them.
fn rules() -> &'static RuleSet {
    static RULES: std::sync::OnceLock<RuleSet> = std::sync::OnceLock::new();
    RULES.get_or_init(|| RuleSet::builtin().expect("built-in rules load"))
}

/// The converted conversation's lines as the rollout has them (payloads only, `compacted`
/// lines tagged), after the session meta.
fn payloads(conversation: &Conversation) -> Vec<Value> {
    conversation
        .items
        .iter()
        .map(|item| match &item.payload {
            OutPayload::Item(item) => serde_json::to_value(item).unwrap(),
            OutPayload::Compacted(m) => json!({"compacted": m}),
            OutPayload::CompactedReplacing(m) => json!({"compacted_replacing": m}),
            OutPayload::CompactedNative(native) => json!({"compacted": native.payload}),
        })
        .collect()
}

fn converted(transcript: Transcript) -> Conversation<'static> {
    let key = RecordKey {
        source: "test.json",
        record: rollover::model::identity::RecordId {
            digest: 0,
            occurrence: 0,
            value: 0,
        },
        naming: None,
    };
    convert(transcript, rules(), &key).expect("converts")
}

fn note(notes: &[SourceNote], rule: &str, what: &str) -> (u64, usize) {
    notes
        .iter()
        .find(|n| n.rule.as_str() == rule && n.what == what)
        .map_or((0, 0), |n| (n.count, n.bytes_dropped))
}

fn chatgpt(value: Value) -> Transcript {
    chatgpt::conversation(value, rules(), &ImageFiles::default()).expect("reads")
}

fn node(id: &str, parent: Option<&str>, children: &[&str], message: Value) -> (String, Value) {
    (
        id.to_string(),
        json!({"id": id, "parent": parent, "children": children, "message": message}),
    )
}

fn text_message(role: &str, text: &str) -> Value {
    json!({"author": {"role": role}, "content": {"content_type": "text", "parts": [text]}, "recipient": "all", "create_time": 1_700_000_000.5})
}

#[test]
fn chatgpt_active_path_follows_current_node_not_the_last_child() {
    let mapping: serde_json::Map<String, Value> = [
        node("root", None, &["u1"], Value::Null),
        node(
            "u1",
            Some("root"),
            &["a-live", "a-regen"],
            text_message("user", "hi"),
        ),
        node(
            "a-live",
            Some("u1"),
            &[],
            text_message("assistant", "first answer"),
        ),
        node(
            "a-regen",
            Some("u1"),
            &[],
            text_message("assistant", "regenerated"),
        ),
    ]
    .into_iter()
    .collect();
    let transcript = chatgpt(json!({
        "title": "T", "create_time": 1_700_000_000.25, "current_node": "a-live",
        "default_model_slug": "gpt-4o", "mapping": mapping,
    }));
    assert_eq!(
        note(
            &transcript.source_notes,
            "policy.inactive_branch",
            "inactive branch node"
        ),
        (1, "regenerated".len())
    );
    assert_eq!(transcript.meta.title.as_deref(), Some("T"));
    assert_eq!(transcript.meta.model.as_deref(), Some("gpt-4o"));
    assert_eq!(transcript.meta.created_ms, Some(1_700_000_000_250));
    assert_eq!(transcript.messages[0].timestamp_ms, Some(1_700_000_000_500));
    let conversation = converted(transcript);
    assert_eq!(
        payloads(&conversation),
        vec![
            json!({"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}),
            json!({"type":"message","role":"assistant","content":[{"type":"output_text","text":"first answer"}]}),
        ]
    );
}

#[test]
fn chatgpt_a_cycle_in_parents_ends_the_walk() {
    let mapping: serde_json::Map<String, Value> = [
        node("a", Some("b"), &["b"], text_message("user", "one")),
        node("b", Some("a"), &["a"], text_message("assistant", "two")),
    ]
    .into_iter()
    .collect();
    let transcript = chatgpt(json!({"current_node": "b", "mapping": mapping}));
    assert_eq!(transcript.messages.len(), 2);
}

#[test]
fn chatgpt_recipient_call_its_tool_output_and_a_tool_node_without_call() {
    let call = json!({"author": {"role": "assistant"}, "recipient": "web.run",
        "content": {"content_type": "text", "parts": ["{\"q\":\"rust\"}"]}});
    let result = json!({"author": {"role": "tool", "name": "web.run"}, "recipient": "all",
        "content": {"content_type": "execution_output", "text": "3 results"}});
    let failed = json!({"author": {"role": "tool", "name": "python"}, "recipient": "all",
        "content": {"content_type": "system_error", "name": "x", "text": "timeout"}});
    let mapping: serde_json::Map<String, Value> = [
        node("u", None, &["c"], text_message("user", "search")),
        node("c", Some("u"), &["r"], call),
        node("r", Some("c"), &["a"], result),
        node(
            "a",
            Some("r"),
            &["orphan"],
            text_message("assistant", "found"),
        ),
        node("orphan", Some("a"), &[], failed),
    ]
    .into_iter()
    .collect();
    let transcript = chatgpt(json!({"current_node": "orphan", "mapping": mapping}));
    assert_eq!(
        note(
            &transcript.source_notes,
            "policy.tool_without_call",
            "tool node without a call"
        )
        .0,
        1
    );
    let conversation = converted(transcript);
    assert_eq!(
        payloads(&conversation),
        vec![
            json!({"type":"message","role":"user","content":[{"type":"input_text","text":"search"}]}),
            json!({"type":"function_call","name":"web.run","arguments":"{\"q\":\"rust\"}","call_id":"call_c"}),
            json!({"type":"function_call_output","call_id":"call_c","output":"3 results"}),
            json!({"type":"message","role":"assistant","content":[{"type":"output_text","text":"found"}],"phase":"commentary"}),
            json!({"type":"function_call","name":"python","arguments":"{}","call_id":"call_orphan"}),
            json!({"type":"function_call_output","call_id":"call_orphan","output":"Error: timeout"}),
        ]
    );
}

#[test]
fn chatgpt_hidden_nodes_recaps_memory_and_empty_system_are_dropped_and_counted() {
    let hidden_system = json!({"author": {"role": "system"}, "content": {"content_type": "text", "parts": [""]},
        "metadata": {"is_visually_hidden_from_conversation": true}});
    let instructions = json!({"author": {"role": "user"}, "content": {"content_type": "user_editable_context",
        "user_profile": "I am a dev.", "user_instructions": "Be terse."},
        "metadata": {"is_visually_hidden_from_conversation": true}});
    let memory = json!({"author": {"role": "assistant"}, "content": {"content_type": "model_editable_context",
        "model_set_context": "likes rust"}});
    let hidden_user = json!({"author": {"role": "user"}, "content": {"content_type": "text", "parts": ["secret"]},
        "metadata": {"is_visually_hidden_from_conversation": true}});
    let thoughts = json!({"author": {"role": "assistant"}, "content": {"content_type": "thoughts",
        "thoughts": [{"summary": "Plan", "content": "Check the docs"}]}});
    let recap = json!({"author": {"role": "assistant"}, "content": {"content_type": "reasoning_recap", "content": "Thought for 3s"}});
    let answer = json!({"author": {"role": "assistant"}, "recipient": "all", "end_turn": true,
        "content": {"content_type": "text", "parts": ["Done \u{e200}cite\u{e202}turn0search3\u{e201}."]}});
    let mapping: serde_json::Map<String, Value> = [
        node("s", None, &["ctx"], hidden_system),
        node("ctx", Some("s"), &["mem"], instructions),
        node("mem", Some("ctx"), &["h"], memory),
        node("h", Some("mem"), &["u"], hidden_user),
        node("u", Some("h"), &["t"], text_message("user", "go")),
        node("t", Some("u"), &["rc"], thoughts),
        node("rc", Some("t"), &["a"], recap),
        node("a", Some("rc"), &[], answer),
    ]
    .into_iter()
    .collect();
    let transcript = chatgpt(json!({"current_node": "a", "mapping": mapping}));
    let notes = &transcript.source_notes;
    assert_eq!(note(notes, "policy.hidden_node", "hidden node"), (1, 6));
    assert_eq!(
        note(notes, "policy.hidden_node", "empty system node"),
        (1, 0)
    );
    assert_eq!(
        note(notes, "policy.hidden_node", "reasoning_recap"),
        (1, 14)
    );
    assert_eq!(
        note(notes, "policy.memory", "memory (model_editable_context)"),
        (1, 10)
    );
    let marker = "\u{e200}cite\u{e202}turn0search3\u{e201}";
    assert_eq!(
        note(notes, "policy.citation_markers", "citation marker"),
        (1, marker.len())
    );
    let conversation = converted(transcript);
    assert_eq!(
        payloads(&conversation),
        vec![
            json!({"type":"message","role":"developer","content":[{"type":"input_text","text":"I am a dev.\nBe terse."}]}),
            json!({"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}),
            json!({"type":"reasoning","summary":[{"type":"summary_text","text":"Plan"},{"type":"summary_text","text":"Check the docs"}],"content":null,"encrypted_content":null}),
            json!({"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done ."}],"phase":"final_answer"}),
        ]
    );
}

/// A file or folder of `../shared/corpora/sources`, beside the project (as CI places it).
/// Missing, the test fails: a corpus test never passes by reading nothing.
fn corpus(relative: &str) -> std::path::PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/sources");
    let path = root.join(relative);
    assert!(
        path.exists(),
        "{} is missing: the corpus must be beside the project (../shared)",
        path.display()
    );
    path
}

/// Reads a whole file's records with a reader, as the pipeline hands them.
pub fn read_file(reader: &dyn FormatReader, path: &Path, values: Vec<Value>) -> FileRead {
    rollover::input::format::read_values(reader, values, rules(), path)
}

#[test]
fn chatgpt_corpus_files_read_and_detect() {
    let dir = &corpus("chatgpt-export");
    for name in [
        "polylogue-native-conversation-v1.json",
        "chatgpt-exporter-thinking-summaries.json",
    ] {
        let path = dir.join(name);
        let value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            rollover::input::format::detect(Some(&value), b"{"),
            rollover::input::SourceFormat::CHATGPT
        );
        let read = read_file(&chatgpt::ChatGptReader, &path, vec![value]);
        assert!(read.refused.is_empty(), "{name}: {:?}", read.refused);
        let transcript = read.conversations.into_iter().next().unwrap().transcript;
        let conversation = converted(transcript);
        assert!(!conversation.items.is_empty(), "{name}");
    }
}

/// Every record of a read is in exactly one place.
fn accounted(read: &FileRead, records: usize) -> Vec<String> {
    let mut seen = vec![0usize; records];
    for c in &read.conversations {
        for &i in &c.records {
            seen[i] += 1;
        }
    }
    for (i, _) in &read.refused {
        seen[*i] += 1;
    }
    for d in &read.dropped {
        seen[d.index] += 1;
    }
    seen.iter()
        .enumerate()
        .filter(|(_, n)| **n != 1)
        .map(|(i, n)| format!("record {i} placed {n} times"))
        .collect()
}

/// A source file's records, as the splitter makes them (JSONL lines; a JSON array's elements;
/// a JSON object alone).
fn records_of(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    if path.extension().is_some_and(|e| e == "jsonl") {
        return text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
            .collect();
    }
    match serde_json::from_str(&text).unwrap() {
        Value::Array(items) => items,
        other => vec![other],
    }
}

/// Reads, converts, renders and validates every conversation of a corpus file; returns the
/// converted conversations and the read.
pub fn convert_file(
    reader: &dyn FormatReader,
    path: &Path,
) -> (FileRead, Vec<Conversation<'static>>) {
    let values = records_of(path);
    let count = values.len();
    let mut read = read_file(reader, path, values);
    assert_eq!(
        accounted(&read, count),
        Vec::<String>::new(),
        "{}",
        path.display()
    );
    let rules = rules();
    let mut out = Vec::new();
    for (k, c) in std::mem::take(&mut read.conversations)
        .into_iter()
        .enumerate()
    {
        let bytes_in = rollover::audit::accounting::transcript_bytes(&c.transcript);
        let key = RecordKey {
            source: "corpus",
            record: rollover::model::identity::RecordId {
                digest: 0,
                occurrence: k as u32,
                value: 0,
            },
            naming: None,
        };
        let conversation = convert(c.transcript, rules, &key)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let account = conversation.account(bytes_in);
        assert!(account.balanced(), "{}: {account:?}", path.display());
        let bytes = conversation.to_bytes();
        let violations =
            rollover::validate::check(&bytes, Some(&conversation.meta.id), &rules.markers);
        assert!(violations.is_empty(), "{}: {violations:?}", path.display());
        out.push(conversation);
    }
    (read, out)
}

#[test]
fn claude_code_corpus_files_convert_with_every_line_accounted() {
    let dir = &corpus("claude-code");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl" || e == "json"))
        .collect();
    files.sort();
    for path in files {
        let first = records_of(&path).into_iter().next().unwrap();
        assert_eq!(
            rollover::input::format::detect(Some(&first), b"{"),
            rollover::input::SourceFormat::CLAUDE_CODE,
            "{}",
            path.display()
        );
        let (read, conversations) =
            convert_file(&rollover::input::claude_code::ClaudeCodeReader, &path);
        eprintln!(
            "{}: {} conversations, {} items, {} refused {:?}, {} dropped",
            path.display(),
            conversations.len(),
            conversations.iter().map(|c| c.items.len()).sum::<usize>(),
            read.refused.len(),
            read.refused
                .iter()
                .map(|(i, e)| format!("{i}: {e}"))
                .collect::<Vec<_>>(),
            read.dropped.len()
        );
    }
}

// ---------------------------------------------------------------------------------------
// Claude Code

const SESSION: &str = "11111111-2222-4333-8444-555555555555";

/// A Claude Code line: `type`, `uuid`, `parentUuid` and the envelope, plus `extra`.
fn cc(kind: &str, uuid: &str, parent: Option<&str>, extra: Value) -> Value {
    let mut line = json!({
        "type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": SESSION,
        "cwd": "/home/me/proj", "gitBranch": "main", "version": "2.1.38",
        "isSidechain": false, "userType": "external",
        "timestamp": format!("2026-02-10T10:00:{:02}.000Z", uuid.len() % 60),
    });
    for (k, v) in extra.as_object().unwrap() {
        line[k] = v.clone();
    }
    line
}

fn user_text(uuid: &str, parent: Option<&str>, text: &str) -> Value {
    cc(
        "user",
        uuid,
        parent,
        json!({"message": {"role": "user", "content": text}}),
    )
}

fn assistant_block(uuid: &str, parent: &str, msg: &str, block: Value) -> Value {
    cc(
        "assistant",
        uuid,
        Some(parent),
        json!({"requestId": "req_1", "message": {"id": msg, "type": "message", "role": "assistant",
            "model": "claude-opus-4-6", "content": [block], "stop_reason": null,
            "usage": {"input_tokens": 3, "output_tokens": 9}}}),
    )
}

fn tool_result(uuid: &str, parent: &str, id: &str, content: Value, error: Option<bool>) -> Value {
    let mut block = json!({"type": "tool_result", "tool_use_id": id, "content": content});
    if let Some(e) = error {
        block["is_error"] = json!(e);
    }
    cc(
        "user",
        uuid,
        Some(parent),
        json!({"message": {"role": "user", "content": [block]}, "toolUseResult": "x"}),
    )
}

fn claude_with(lines: Vec<Value>, rules: &RuleSet) -> FileRead {
    let reader = &rollover::input::claude_code::ClaudeCodeReader;
    rollover::input::format::read_values(reader, lines, rules, Path::new("session.jsonl"))
}

/// The payloads of each conversation a session converts to.
fn claude_items(read: FileRead, rules: &RuleSet) -> Vec<Vec<Value>> {
    read.conversations
        .into_iter()
        .enumerate()
        .map(|(k, c)| {
            let key = RecordKey {
                source: "session.jsonl",
                record: rollover::model::identity::RecordId {
                    digest: 0,
                    occurrence: k as u32,
                    value: 0,
                },
                naming: None,
            };
            let conversation = convert(c.transcript, rules, &key).expect("converts");
            let bytes = conversation.to_bytes();
            let violations =
                rollover::validate::check(&bytes, Some(&conversation.meta.id), &rules.markers);
            assert!(violations.is_empty(), "{violations:?}");
            payloads(&conversation)
        })
        .collect()
}

fn user_json(text: &str) -> Value {
    json!({"type":"message","role":"user","content":[{"type":"input_text","text":text}]})
}

/// An assistant message; `phase` "" for none (the last message of a session that does not
/// say it finished).
fn assistant_json(text: &str, phase: &str) -> Value {
    let mut m =
        json!({"type":"message","role":"assistant","content":[{"type":"output_text","text":text}]});
    if !phase.is_empty() {
        m["phase"] = json!(phase);
    }
    m
}

fn call_json(id: &str, name: &str, arguments: &str) -> Value {
    json!({"type":"function_call","name":name,"arguments":arguments,"call_id":id})
}

fn output_json(id: &str, output: Value) -> Value {
    json!({"type":"function_call_output","call_id":id,"output":output})
}

#[test]
fn claude_code_a_response_split_over_lines_is_one_response_with_parallel_calls_then_results() {
    let rules = rules();
    let lines = vec![
        user_text("u1", None, "look around"),
        assistant_block(
            "a1",
            "u1",
            "msg_1",
            json!({"type": "text", "text": "Checking."}),
        ),
        assistant_block(
            "a2",
            "a1",
            "msg_1",
            json!({"type": "thinking", "thinking": "ls and pwd", "signature": "EqX"}),
        ),
        assistant_block(
            "a3",
            "a2",
            "msg_1",
            json!({"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}),
        ),
        // The first result arrives before the second call's line.
        tool_result("r1", "a3", "toolu_1", json!("a.txt"), Some(false)),
        assistant_block(
            "a4",
            "a3",
            "msg_1",
            json!({"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "pwd"}}),
        ),
        json!({"type": "progress", "uuid": "p1", "parentUuid": "a4", "sessionId": SESSION, "data": {"type": "bash_progress"}}),
        tool_result("r2", "a4", "toolu_2", json!("/home/me/proj"), None),
        assistant_block(
            "a5",
            "r2",
            "msg_2",
            json!({"type": "text", "text": "One file."}),
        ),
    ];
    let read = claude_with(lines, rules);
    assert_eq!(read.dropped.len(), 1);
    assert_eq!(read.dropped[0].rule.as_str(), "policy.structural_line");
    let transcript = &read.conversations[0].transcript;
    assert_eq!(transcript.meta.cwd.as_deref(), Some("/home/me/proj"));
    assert_eq!(transcript.meta.git_branch.as_deref(), Some("main"));
    assert_eq!(transcript.meta.source_version.as_deref(), Some("2.1.38"));
    assert_eq!(transcript.meta.source_id.as_deref(), Some(SESSION));
    assert_eq!(
        claude_items(read, rules),
        vec![vec![
            user_json("look around"),
            assistant_json("Checking.", "commentary"),
            json!({"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"ls and pwd"}],"encrypted_content":null}),
            call_json("toolu_1", "Bash", "{\"command\":\"ls\"}"),
            call_json("toolu_2", "Bash", "{\"command\":\"pwd\"}"),
            output_json("toolu_1", json!("a.txt")),
            output_json("toolu_2", json!("/home/me/proj")),
            assistant_json("One file.", ""),
        ]]
    );
}

#[test]
fn claude_code_an_errored_result_and_an_image_in_a_result() {
    let rules = rules();
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    let lines = vec![
        user_text("u1", None, "show me"),
        assistant_block(
            "a1",
            "u1",
            "msg_1",
            json!({"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/nope"}}),
        ),
        tool_result(
            "r1",
            "a1",
            "toolu_1",
            json!("File does not exist."),
            Some(true),
        ),
        assistant_block(
            "a2",
            "r1",
            "msg_2",
            json!({"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "/a.png"}}),
        ),
        tool_result(
            "r2",
            "a2",
            "toolu_2",
            json!([{"type": "text", "text": "an image"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]),
            None,
        ),
    ];
    let read = claude_with(lines, rules);
    assert_eq!(
        claude_items(read, rules),
        vec![vec![
            user_json("show me"),
            call_json("toolu_1", "Read", "{\"file_path\":\"/nope\"}"),
            output_json("toolu_1", json!("Error: File does not exist.")),
            call_json("toolu_2", "Read", "{\"file_path\":\"/a.png\"}"),
            output_json(
                "toolu_2",
                json!([{"type":"input_text","text":"an image"},{"type":"input_image","image_url":format!("data:image/png;base64,{png}")}])
            ),
        ]]
    );
}

#[test]
fn claude_code_inline_sidechains_are_dropped_or_their_own_rollout() {
    let side = |uuid: &str, parent: Option<&str>, kind: &str, message: Value| {
        let mut line = cc(kind, uuid, parent, json!({"message": message}));
        line["isSidechain"] = json!(true);
        line
    };
    let lines = vec![
        user_text("u1", None, "run tests"),
        assistant_block(
            "a1",
            "u1",
            "msg_1",
            json!({"type": "tool_use", "id": "toolu_t", "name": "Task", "input": {"prompt": "Run the tests"}}),
        ),
        side(
            "s1",
            None,
            "user",
            json!({"role": "user", "content": "Run the tests"}),
        ),
        side(
            "s2",
            Some("s1"),
            "assistant",
            json!({"id": "msg_s", "role": "assistant", "content": [{"type": "text", "text": "All pass."}]}),
        ),
        tool_result(
            "r1",
            "a1",
            "toolu_t",
            json!([{"type": "text", "text": "All pass."}]),
            None,
        ),
        assistant_block(
            "a2",
            "r1",
            "msg_2",
            json!({"type": "text", "text": "Tests pass."}),
        ),
    ];
    let rules = rules();
    let read = claude_with(lines.clone(), rules);
    let dropped: Vec<(usize, &str)> = read
        .dropped
        .iter()
        .map(|d| (d.index, d.rule.as_str()))
        .collect();
    assert_eq!(dropped, [(2, "policy.sidechain"), (3, "policy.sidechain")]);
    assert_eq!(claude_items(read, rules)[0].len(), 4);

    let mut own = rules.clone();
    own.policy.sidechain = rollover::rules::Sidechain::Rollout;
    let read = claude_with(lines, &own);
    assert!(read.dropped.is_empty());
    assert_eq!(read.conversations.len(), 2);
    assert_eq!(read.conversations[0].records, [2, 3]);
    assert_eq!(
        read.conversations[0]
            .transcript
            .meta
            .parent_source_id
            .as_deref(),
        Some(SESSION)
    );
    let items = claude_items(read, &own);
    assert_eq!(
        items[0],
        vec![user_json("Run the tests"), assistant_json("All pass.", "")]
    );
    assert_eq!(
        items[1],
        vec![
            user_json("run tests"),
            call_json("toolu_t", "Task", "{\"prompt\":\"Run the tests\"}"),
            output_json("toolu_t", json!([{"type":"input_text","text":"All pass."}])),
            assistant_json("Tests pass.", ""),
        ]
    );
}

#[test]
fn claude_code_a_2x_subagent_file_is_dropped_whole_or_linked_to_its_session() {
    let line = |uuid: &str, parent: Option<&str>, kind: &str, message: Value| {
        let mut line = cc(
            kind,
            uuid,
            parent,
            json!({"message": message, "agentId": "a881341"}),
        );
        line["isSidechain"] = json!(true);
        line
    };
    let lines = vec![
        line(
            "s1",
            None,
            "user",
            json!({"role": "user", "content": "Find the bug"}),
        ),
        line(
            "s2",
            Some("s1"),
            "assistant",
            json!({"id": "msg_s", "role": "assistant", "content": [{"type": "text", "text": "Found it."}]}),
        ),
    ];
    let first = lines[0].clone();
    assert_eq!(
        rollover::input::format::detect(Some(&first), b"{"),
        rollover::input::SourceFormat::CLAUDE_CODE
    );
    let rules = rules();
    let read = claude_with(lines.clone(), rules);
    assert!(read.conversations.is_empty());
    assert_eq!(read.dropped.len(), 2);
    let mut own = rules.clone();
    own.policy.sidechain = rollover::rules::Sidechain::Rollout;
    let read = claude_with(lines, &own);
    assert_eq!(
        read.conversations[0]
            .transcript
            .meta
            .parent_source_id
            .as_deref(),
        Some(SESSION)
    );
    assert_eq!(
        claude_items(read, &own),
        vec![vec![
            user_json("Find the bug"),
            assistant_json("Found it.", "")
        ]]
    );
}

#[test]
fn claude_code_a_compaction_boundary_replaces_the_history_by_the_summary() {
    let rules = rules();
    let summary =
        "This session is being continued from a previous conversation. Summary: fixed the parser.";
    let lines = vec![
        user_text("u1", None, "fix the parser"),
        assistant_block(
            "a1",
            "u1",
            "msg_1",
            json!({"type": "text", "text": "Fixed."}),
        ),
        cc(
            "system",
            "b1",
            None,
            json!({"subtype": "compact_boundary", "content": "Conversation compacted",
            "logicalParentUuid": "a1", "compactMetadata": {"trigger": "auto", "preTokens": 167094}}),
        ),
        cc(
            "user",
            "c1",
            Some("b1"),
            json!({"isCompactSummary": true, "isVisibleInTranscriptOnly": true,
            "message": {"role": "user", "content": summary}}),
        ),
        user_text("u2", Some("c1"), "now the tests"),
        assistant_block(
            "a2",
            "u2",
            "msg_2",
            json!({"type": "text", "text": "On it."}),
        ),
    ];
    let read = claude_with(lines, rules);
    assert_eq!(read.dropped.len(), 1);
    assert_eq!(read.dropped[0].what, "system line");
    assert_eq!(
        claude_items(read, rules),
        vec![vec![
            user_json("fix the parser"),
            assistant_json("Fixed.", "final_answer"),
            json!({"compacted_replacing": summary}),
            user_json("now the tests"),
            assistant_json("On it.", ""),
        ]]
    );
}

#[test]
fn claude_code_titles_and_bad_lines() {
    let rules = rules();
    let lines = vec![
        json!({"type": "summary", "summary": "Old title", "leafUuid": "a1"}),
        user_text("u1", None, "hi"),
        json!(42),
        json!({"type": "custom-title", "customTitle": "Mine", "sessionId": SESSION}),
        json!({"type": "user", "uuid": "x", "sessionId": SESSION}),
        assistant_block(
            "a1",
            "u1",
            "msg_1",
            json!({"type": "text", "text": "hello"}),
        ),
    ];
    let read = claude_with(lines, rules);
    let refused: Vec<String> = read
        .refused
        .iter()
        .map(|(i, e)| format!("{i}: {e}"))
        .collect();
    assert_eq!(
        refused,
        [
            "2: not a claude-code record: line is a JSON number, not a session line",
            "4: not a claude-code record: `user` line without a `message` object",
        ]
    );
    assert_eq!(
        read.conversations[0].transcript.meta.title.as_deref(),
        Some("Mine")
    );
}

/// The binary on the real corpus: every file converts with no invariant violation, the only
/// quarantined records are the edge-case file's non-lines, and the summary places every line.
#[test]
fn corpus_claude_code_and_chatgpt_convert_and_every_line_is_accounted() {
    let root = &corpus("");
    let dir = common::Workdir::new("corpus_sources");
    let cc = root.join("claude-code");
    let gpt = root.join("chatgpt-export");
    let run = dir.run(&[
        "convert",
        cc.to_str().unwrap(),
        gpt.to_str().unwrap(),
        "--out",
        "home",
    ]);
    // Exit 1: five lines of the edge-case file are quarantined (not lines of a session).
    run.expect_code(1);
    let summary: Value =
        serde_json::from_slice(&dir.read("home/rollover/latest/summary.json")).unwrap();
    let n = |key: &str| summary[key].as_u64().unwrap_or(0);
    let dropped: u64 = summary["records_dropped"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        n("records"),
        n("converted") + n("quarantined") + n("records_merged") + dropped
    );
    assert_eq!(summary["violations"], json!({}));
    assert_eq!(summary["formats"], json!({"chatgpt": 2, "claude-code": 10}));
    assert_eq!(n("quarantined"), 5);
    let quarantine = String::from_utf8(dir.read("home/rollover/latest/quarantine.jsonl")).unwrap();
    for line in quarantine.lines() {
        let q: Value = serde_json::from_str(line).unwrap();
        assert!(
            q["source"].as_str().unwrap().ends_with("edge_cases.jsonl"),
            "{q}"
        );
        assert!(q["reason"].as_str().unwrap().contains("claude-code"), "{q}");
    }
    assert_eq!(
        summary["records_dropped"],
        json!({"policy.sidechain": 24, "policy.structural_line": 74})
    );
}

/// The README's comparison with Codex's own importer: what Codex 0.169's own importer keeps of
/// `spotter-v2.1/subagent.jsonl` (sources.md §1.11: user/assistant lines, `isMeta` and
/// `isSidechain` skipped, thinking dropped, each `tool_use` a text note, each `tool_result` a
/// note cut at 4,000 characters, no images) against what rollover writes.
#[test]
fn readme_side_by_side_with_codex_importer() {
    let path = &corpus("claude-code/spotter-v2.1/subagent.jsonl");
    let (mut notes, mut kept, mut source_chars, mut thinking) = (0, 0, 0, 0);
    for value in records_of(path) {
        if !matches!(value["type"].as_str(), Some("user" | "assistant"))
            || value["isSidechain"] == json!(true)
            || value["isMeta"] == json!(true)
        {
            continue;
        }
        for block in value["message"]["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("tool_use") => notes += 1,
                Some("thinking") => thinking += 1,
                Some("tool_result") => {
                    let text = match &block["content"] {
                        Value::String(s) => s.clone(),
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("\n"),
                        _ => String::new(),
                    };
                    let n = text.chars().count();
                    source_chars += n;
                    kept += n.min(4000);
                }
                _ => {}
            }
        }
    }
    assert_eq!(
        (notes, kept, source_chars, thinking),
        (16, 25_441, 31_376, 4)
    );
    let (_, conversations) = convert_file(&rollover::input::claude_code::ClaudeCodeReader, path);
    let items = payloads(&conversations[0]);
    let count = |kind: &str| items.iter().filter(|i| i["type"] == kind).count();
    let output_chars: usize = items
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| match &i["output"] {
            Value::String(s) => s.chars().count(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .map(|t| t.chars().count())
                .sum(),
            _ => 0,
        })
        .sum();
    assert_eq!(
        (
            count("function_call"),
            count("function_call_output"),
            output_chars,
            count("reasoning")
        ),
        (16, 16, 31_375, 4)
    );
}

/// A ChatGPT export zip is read directly: its `conversations.json` (and
/// `conversations-NNN.json`) conversations, and images resolved from the files inside it.
#[test]
fn chatgpt_export_zip_is_read_with_its_images() {
    use std::io::Write;
    let png = base64_png();
    let with_image = |id: &str, pointer: &str| {
        let user = json!({"author": {"role": "user"}, "recipient": "all", "create_time": 1_700_000_000.0,
        "content": {"content_type": "multimodal_text", "parts": [
            "what is this?",
            {"content_type": "image_asset_pointer", "asset_pointer": pointer, "width": 1, "height": 1}
        ]}});
        let mapping: serde_json::Map<String, Value> = [
            node("root", None, &["u"], Value::Null),
            node("u", Some("root"), &["a"], user),
            node("a", Some("u"), &[], text_message("assistant", "a pixel")),
        ]
        .into_iter()
        .collect();
        json!({"id": id, "title": id, "create_time": 1_700_000_000.0, "current_node": "a", "mapping": mapping})
    };
    let dir = common::Workdir::new("chatgpt_zip");
    let path = dir.path("export.zip");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = zip::write::SimpleFileOptions::default();
    zip.start_file("conversations.json", options).unwrap();
    let first = json!([with_image("one", "file-service://file-Abc123")]);
    zip.write_all(first.to_string().as_bytes()).unwrap();
    zip.start_file("conversations-001.json", options).unwrap();
    let second = json!([with_image("two", "sediment://file_missing")]);
    zip.write_all(second.to_string().as_bytes()).unwrap();
    zip.start_file("file-Abc123-pixel.png", options).unwrap();
    zip.write_all(&png).unwrap();
    zip.start_file("chat.html", options).unwrap();
    zip.write_all(b"<html></html>").unwrap();
    zip.finish().unwrap();

    let home = dir.convert("export.zip", "home", &[], 0);
    let summary = home.summary();
    assert_eq!(summary["formats"], json!({"chatgpt": 1}));
    assert_eq!(summary["converted"], json!(2));
    let mut users: Vec<Value> = Vec::new();
    for rollout in home.all_rollouts() {
        let text = String::from_utf8(std::fs::read(&rollout.path).unwrap()).unwrap();
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if v["payload"]["role"] == "user" {
                users.push(v["payload"]["content"].clone());
            }
        }
    }
    use base64::Engine;
    let url = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&png)
    );
    users.sort_by_key(|c| c.to_string());
    assert_eq!(
        users,
        vec![
            json!([{"type":"input_text","text":"what is this?"},{"type":"input_image","image_url":url}]),
            json!([{"type":"input_text","text":"what is this?"},{"type":"input_text","text":"[image not in the export: sediment://file_missing]"}]),
        ]
    );
}

fn base64_png() -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
        .unwrap()
}

/// Damaged input never crashes a reader: every corpus line with each of its fields (and each
/// field of its `message`) removed, nulled or made a number still reads, converts and
/// balances, or is refused with a reason.
#[test]
fn damaged_lines_never_crash_the_readers() {
    let cc_path = &corpus("claude-code/spotter-v2.1/short.jsonl");
    let gpt_path = &corpus("chatgpt-export/polylogue-native-conversation-v1.json");
    let rules = rules();
    let mutations = |value: &Value| -> Vec<Value> {
        let mut out = Vec::new();
        for (holder, key) in value
            .as_object()
            .into_iter()
            .flat_map(|o| o.keys().map(|k| (None, k.clone())))
            .chain(
                value["message"]
                    .as_object()
                    .into_iter()
                    .flat_map(|o| o.keys().map(|k| (Some("message"), k.clone()))),
            )
        {
            for replacement in [None, Some(Value::Null), Some(json!(7)), Some(json!("x"))] {
                let mut v = value.clone();
                let target = match holder {
                    Some(h) => &mut v[h],
                    None => &mut v,
                };
                let object = target.as_object_mut().unwrap();
                match &replacement {
                    None => {
                        object.remove(&key);
                    }
                    Some(r) => {
                        object.insert(key.clone(), r.clone());
                    }
                }
                out.push(v);
            }
        }
        out
    };
    let check = |read: FileRead| {
        for (k, c) in read.conversations.into_iter().enumerate() {
            let bytes_in = rollover::audit::accounting::transcript_bytes(&c.transcript)
                + c.transcript
                    .source_notes
                    .iter()
                    .map(|n| n.bytes_dropped)
                    .sum::<usize>();
            let notes: usize = c
                .transcript
                .source_notes
                .iter()
                .map(|n| n.bytes_dropped)
                .sum();
            let key = RecordKey {
                source: "m",
                record: rollover::model::identity::RecordId {
                    digest: 0,
                    occurrence: k as u32,
                    value: 0,
                },
                naming: None,
            };
            if let Ok(conversation) = convert(c.transcript, rules, &key) {
                let account = rollover::audit::accounting::account(
                    bytes_in - notes,
                    conversation
                        .meta
                        .base_instructions
                        .as_ref()
                        .map(|b| b.text.as_str()),
                    &conversation.items,
                    &conversation.decisions,
                );
                assert!(account.balanced(), "{account:?}");
                let _ = conversation.to_bytes();
            }
        }
    };
    let lines = records_of(cc_path);
    for (i, line) in lines.iter().enumerate() {
        for mutated in mutations(line) {
            let mut file = lines.clone();
            file[i] = mutated;
            check(claude_with(file, rules));
        }
    }
    let conversation = records_of(gpt_path).remove(0);
    let mut cases = mutations(&conversation);
    for (id, node) in conversation["mapping"].as_object().unwrap() {
        for mutated in mutations(node) {
            let mut c = conversation.clone();
            c["mapping"][id] = mutated;
            cases.push(c);
        }
        for mutated in mutations(&node["message"]) {
            let mut c = conversation.clone();
            c["mapping"][id]["message"] = mutated;
            cases.push(c);
        }
    }
    for case in cases {
        check(read_file(&chatgpt::ChatGptReader, gpt_path, vec![case]));
    }
}

/// A project's `sessions-index.json` beside the sessions is recognised and dropped by rule,
/// not quarantined as a transcript it is not.
#[test]
fn claude_code_sessions_index_is_dropped_by_rule() {
    let index = json!({"version": 1, "originalPath": "/home/me/proj", "entries": [
        {"sessionId": SESSION, "fullPath": "/home/me/.claude/projects/-home-me-proj/x.jsonl",
         "firstPrompt": "hi", "messageCount": 2, "gitBranch": "main"}]});
    assert_eq!(
        rollover::input::format::detect(Some(&index), b"{"),
        rollover::input::SourceFormat::CLAUDE_CODE
    );
    let read = claude_with(vec![index], rules());
    assert!(read.conversations.is_empty() && read.refused.is_empty());
    assert_eq!(read.dropped[0].what, "sessions-index file");
}

/// A whole `~/.claude` converts with nothing quarantined: the prompt history
/// (`history.jsonl`) and a subagent's `agent-<id>.meta.json` beside the sessions are
/// recognised, dropped by rule and counted, and the sessions still convert.
#[test]
fn claude_code_home_files_that_are_not_transcripts_are_dropped_by_rule() {
    let dir = common::Workdir::new("claude_home");
    let session = std::fs::read(corpus("claude-code/spotter-v2.1/short.jsonl")).unwrap();
    dir.create(".claude/projects/-home-me-proj/s1.jsonl", &session);
    dir.create_jsonl(
        ".claude/history.jsonl",
        &[
            json!({"display": "fix the failing test", "pastedContents": {},
                   "timestamp": 1_759_000_000_000u64, "project": "/home/me/proj"}),
            json!({"display": "/clear", "pastedContents": {}, "timestamp": 1_759_000_001_000u64,
                   "project": "/home/me/proj", "sessionId": SESSION}),
        ],
    );
    dir.create(
        ".claude/projects/-home-me-proj/s1/subagents/agent-a1b2c3.meta.json",
        json!({"agentType": "general-purpose", "description": "Explore the repo"}).to_string(),
    );
    let home = dir.convert(".claude", "home", &[], 0);
    let summary = home.summary();
    assert_eq!(summary["quarantined"], 0, "{:?}", home.quarantine());
    assert_eq!(summary["converted"], 1);
    assert_eq!(summary["formats"]["claude-code"], 3);
    let structural = summary["records_dropped"]["policy.structural_line"]
        .as_u64()
        .unwrap();
    // The session's own structural lines, plus the two history lines and the metadata file.
    let session_only = dir.convert(".claude/projects/-home-me-proj/s1.jsonl", "alone", &[], 0);
    let alone = session_only.summary()["records_dropped"]["policy.structural_line"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(structural, alone + 3);
}

/// `--format responses` on a compacted Claude Code session: the body holds what the model saw
/// after the compaction, the summary and what followed, as a resumed Codex sends it.
#[test]
fn responses_body_of_a_compacted_session_starts_at_the_summary() {
    let path = &corpus("claude-code/simonw-synthetic/sample_session.loglines.json");
    let dir = common::Workdir::new("compacted_responses");
    let run = dir.run(&[
        "convert",
        path.to_str().unwrap(),
        "--out",
        "home",
        "--format",
        "responses",
    ]);
    run.expect_code(0);
    let mut bodies = Vec::new();
    let mut stack = vec![dir.path("home")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() && !p.ends_with("rollover") {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                bodies.push(p);
            }
        }
    }
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let text = std::fs::read_to_string(&bodies[0]).unwrap();
    let body: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let input = body["input"].as_array().unwrap();
    let first = input[0]["content"][0]["text"].as_str().unwrap();
    assert!(
        first.starts_with("This is a session continuation summary"),
        "{first}"
    );
    assert_eq!(
        input[1]["content"][0]["text"],
        "Add a multiply function too"
    );
}
