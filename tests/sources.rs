//! Source formats read and converted through the library, item by item: ChatGPT exports and
//! Claude Code sessions (issue 12). Each test pins one case of the issue's list with the exact
//! items written.

use std::path::Path;

use rollover::convert::{convert, Conversation, OutPayload, RecordKey};
use rollover::input::chatgpt::{self, ImageFiles};
use rollover::input::format::{FileRead, FormatReader, InputRecord, ReadContext};
use rollover::model::transcript::{SourceNote, Transcript};
use rollover::rules::RuleSet;
use serde_json::{json, Value};

fn rules() -> RuleSet {
    RuleSet::builtin().expect("built-in rules load")
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
        })
        .collect()
}

fn converted(transcript: Transcript) -> Conversation {
    let key = RecordKey {
        source: "test.json",
        ordinal: 0,
        salt: 0,
    };
    convert(transcript, &rules(), &key).expect("converts")
}

fn note(notes: &[SourceNote], rule: &str, what: &str) -> (u64, usize) {
    notes
        .iter()
        .find(|n| n.rule == rule && n.what == what)
        .map_or((0, 0), |n| (n.count, n.bytes_dropped))
}

fn chatgpt(value: Value) -> Transcript {
    chatgpt::conversation(value, &rules(), &ImageFiles::default()).expect("reads")
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
            json!({"type":"function_call_output","call_id":"call_c","output":[{"type":"input_text","text":"3 results"}]}),
            json!({"type":"message","role":"assistant","content":[{"type":"output_text","text":"found"}],"phase":"commentary"}),
            json!({"type":"function_call","name":"python","arguments":"{}","call_id":"call_orphan"}),
            json!({"type":"function_call_output","call_id":"call_orphan","output":[{"type":"input_text","text":"Error: timeout"}]}),
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

/// Reads a whole file's records with a reader, as the pipeline hands them.
pub fn read_file(reader: &dyn FormatReader, path: &Path, values: Vec<Value>) -> FileRead {
    let rules = rules();
    let context = ReadContext {
        rules: &rules,
        path,
        key: "test",
    };
    let records = values
        .into_iter()
        .enumerate()
        .map(|(index, value)| InputRecord {
            value,
            index,
            repairs: 0,
        })
        .collect();
    reader.read(records, &context)
}

#[test]
fn chatgpt_corpus_files_read_and_detect() {
    let dir = Path::new("/work/shared/corpora/sources/chatgpt-export");
    if !dir.exists() {
        return;
    }
    for name in [
        "polylogue-native-conversation-v1.json",
        "chatgpt-exporter-thinking-summaries.json",
    ] {
        let path = dir.join(name);
        let value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            rollover::input::format::detect(Some(&value), b"{"),
            rollover::input::SourceFormat::ChatGpt
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
pub fn convert_file(reader: &dyn FormatReader, path: &Path) -> (FileRead, Vec<Conversation>) {
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
            ordinal: k as u64,
            salt: 0,
        };
        let conversation = convert(c.transcript, &rules, &key)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let account = rollover::audit::accounting::account(
            bytes_in,
            conversation
                .meta
                .base_instructions
                .as_ref()
                .map(|b| b.text.as_str()),
            &conversation.items,
            &conversation.decisions,
        );
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
    let dir = Path::new("/work/shared/corpora/sources/claude-code");
    if !dir.exists() {
        return;
    }
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
            rollover::input::SourceFormat::ClaudeCode,
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

#[test]
#[ignore]
fn dump_one() {
    let path = std::env::var("DUMP").unwrap();
    let reader: &dyn FormatReader = if path.ends_with(".jsonl") {
        &rollover::input::claude_code::ClaudeCodeReader
    } else {
        &chatgpt::ChatGptReader
    };
    let (_, conversations) = convert_file(reader, Path::new(&path));
    for c in conversations {
        print!("{}", String::from_utf8(c.to_bytes()).unwrap());
        for d in &c.decisions {
            eprintln!("{} {}", d.rule, d.action.name());
        }
    }
}
