//! `rollover convert` end to end (issue 2, "must show" items 3, 4 and 5): each test writes
//! input files in its own folder, runs the real binary, and compares the rollout lines it wrote
//! (timestamps left out unless they are the point), the exit code, and the audit files under
//! `HOME/rollover/` with exact JSON values. Fixtures are inline and follow
//! `shared/spec/migration.md` sections 2 and 4; each test is named for the behaviour it pins.

use std::io::Write;

use serde_json::{json, Value};

use crate::body;
use crate::common::{
    assert_body, assert_json_eq, assistant_turn, event, item, user_turn, Home, Rollout, Workdir,
};

// ---------------------------------------------------------------------------------------------
// Record shapes (migration.md §2)
// ---------------------------------------------------------------------------------------------

#[test]
fn messages_record_converts_in_order() {
    let wd = Workdir::new("messages_record");
    let (home, rollout) = wd.convert_record(json!({
        "id": "conv-1",
        "model": "gpt-4o",
        "metadata": {"team": "x"},
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What files are here?"},
            {"role": "assistant", "content": "I'll look.", "tool_calls": [
                {"id": "call_abc123", "type": "function",
                 "function": {"name": "shell", "arguments": "{\"command\":[\"ls\"]}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_abc123", "content": "README.md\nsrc"},
            {"role": "assistant", "content": "There is README.md and src/."},
            {"role": "user", "content": "Thanks"}
        ]
    }));
    assert_json_eq(
        rollout.meta(),
        &json!({
            "id": rollout.file_uuid(),
            "timestamp": "2025-01-01T00:00:00.000Z",
            "cwd": "/",
            "originator": "rollover",
            "cli_version": "0.169.0",
            "source": "cli",
            "base_instructions": {"text": "You are terse."}
        }),
    );
    assert_body(
        &rollout,
        body![
            user_turn("What files are here?"),
            assistant_turn("I'll look.", Some("commentary")),
            item(json!({"type": "function_call", "name": "shell",
                        "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_abc123"})),
            item(
                json!({"type": "function_call_output", "call_id": "call_abc123",
                        "output": "README.md\nsrc"})
            ),
            assistant_turn("There is README.md and src/.", Some("final_answer")),
            user_turn("Thanks"),
        ],
    );
    // Extra record keys are kept in the audit as ignored fields, never a failure.
    let summary = home.summary();
    assert_json_eq(
        &summary["ignored_fields"],
        &json!({"record.id": 1, "record.metadata": 1, "record.model": 1}),
    );
    assert_eq!(summary["converted"], 1);
}

#[test]
fn batch_request_line_reads_body_messages() {
    let wd = Workdir::new("batch_request");
    let (_home, rollout) = wd.convert_record(json!({
        "custom_id": "request-1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": "gpt-4o-mini",
            "messages": [
                {"role": "system", "content": "Classify."},
                {"role": "user", "content": "I love it"}
            ]
        }
    }));
    assert_eq!(
        rollout.meta()["base_instructions"],
        json!({"text": "Classify."})
    );
    assert_body(&rollout, body![user_turn("I love it")]);
}

#[test]
fn batch_result_line_appends_reply_and_stop_makes_it_final_answer() {
    let wd = Workdir::new("batch_result");
    let (home, rollout) = wd.convert_record(json!({
        "custom_id": "request-2",
        "body": {"model": "gpt-4o", "messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "Let me think."},
            {"role": "user", "content": "Just the number."}
        ]},
        "response": {"status_code": 200, "body": {
            "created": 1700000000,
            "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"},
                         "finish_reason": "stop"}]
        }}
    }));
    assert_body(
        &rollout,
        body![
            user_turn("2+2?"),
            assistant_turn("Let me think.", Some("final_answer")),
            user_turn("Just the number."),
            // The record says it finished (finish_reason "stop"): the reply is final.
            assistant_turn("4", Some("final_answer")),
        ],
    );
    // The session starts at the response's `created` time, not at the clock.
    assert_eq!(rollout.meta()["timestamp"], "2023-11-14T22:13:20.000Z");
    assert!(rollout
        .path
        .to_string_lossy()
        .contains("sessions/2023/11/14/rollout-2023-11-14T22-13-20-"));
    assert_eq!(home.summary()["phases"], json!({"final_answer": 2}));
}

#[test]
fn batch_result_without_stop_leaves_reply_without_phase() {
    let wd = Workdir::new("batch_result_length");
    let (_home, rollout) = wd.convert_record(json!({
        "custom_id": "request-3",
        "body": {"messages": [{"role": "user", "content": "Write a long essay."}]},
        "response": {"body": {"choices": [{"message": {"role": "assistant", "content": "Once"},
                                           "finish_reason": "length"}]}}
    }));
    assert_body(
        &rollout,
        body![
            user_turn("Write a long essay."),
            assistant_turn("Once", None)
        ],
    );
}

#[test]
fn evals_input_list() {
    let wd = Workdir::new("evals_list");
    let (_home, rollout) = wd.convert_record(json!({
        "input": [
            {"role": "system", "content": "Answer with one word."},
            {"role": "user", "content": "Capital of France?"}
        ],
        "ideal": "Paris"
    }));
    assert_eq!(
        rollout.meta()["base_instructions"],
        json!({"text": "Answer with one word."})
    );
    assert_body(&rollout, body![user_turn("Capital of France?")]);
}

#[test]
fn evals_bare_string_input_is_one_user_message() {
    let wd = Workdir::new("evals_string");
    let (_home, rollout) = wd.convert_record(json!({"input": "Say hello", "ideal": "hello"}));
    assert!(rollout.meta().get("base_instructions").is_none());
    assert_body(&rollout, body![user_turn("Say hello")]);
}

#[test]
fn trajectory_history() {
    let wd = Workdir::new("history");
    let (_home, rollout) = wd.convert_record(json!({
        "history": [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "Looking at the code."}
        ],
        "info": {"exit_status": "submitted"}
    }));
    assert_body(
        &rollout,
        // `info.exit_status: submitted` says the trajectory finished.
        body![
            user_turn("Fix the bug."),
            assistant_turn("Looking at the code.", Some("final_answer"))
        ],
    );
}

#[test]
fn bfcl_question_turns_are_flattened_and_empty_turn_skipped() {
    let wd = Workdir::new("bfcl");
    let (_home, rollout) = wd.convert_record(json!({
        "id": "multi_turn_base_0",
        "question": [
            [{"role": "user", "content": "List the files."}],
            [],
            [{"role": "user", "content": "Now delete tmp."}]
        ],
        "function": [{"name": "ls"}]
    }));
    assert_body(
        &rollout,
        body![user_turn("List the files."), user_turn("Now delete tmp.")],
    );
}

#[test]
fn toolbench_reads_last_train_messages_run() {
    let wd = Workdir::new("toolbench");
    let (_home, rollout) = wd.convert_record(json!({
        "query_id": 42,
        "answer_generation": {
            "finish_type": "give_answer",
            "train_messages": [
                [{"role": "user", "content": "first attempt"}],
                [
                    {"role": "system", "content": "You can call tools."},
                    {"role": "user", "content": "Find a hotel."},
                    {"role": "assistant", "content": null,
                     "function_call": {"name": "search", "arguments": "{\"city\":\"Rome\"}"}},
                    {"role": "function", "name": "search", "content": "Hotel Roma"},
                    {"role": "assistant", "content": "Hotel Roma."}
                ]
            ]
        }
    }));
    assert_eq!(
        rollout.meta()["base_instructions"]["text"],
        "You can call tools."
    );
    assert_body(
        &rollout,
        body![
            user_turn("Find a hotel."),
            item(json!({"type": "function_call", "name": "search",
                        "arguments": "{\"city\":\"Rome\"}", "call_id": "call_rollover_m2_0"})),
            item(
                json!({"type": "function_call_output", "call_id": "call_rollover_m2_0",
                        "output": "Hotel Roma"})
            ),
            // finish_type give_answer: the record says it finished.
            assistant_turn("Hotel Roma.", Some("final_answer")),
        ],
    );
}

#[test]
fn messages_at_names_a_custom_path() {
    let wd = Workdir::new("messages_at");
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"custom": {"path": [
            {"role": "user", "content": "from a custom path"},
            {"role": "assistant", "content": "found"}
        ]}})],
    );
    let home = wd.convert("in.jsonl", "home", &["--messages-at", "custom.path"], 0);
    assert_body(
        &home.single_rollout(),
        body![
            user_turn("from a custom path"),
            assistant_turn("found", None)
        ],
    );

    // Without --messages-at (and with the search by shape off) the record has no message
    // list: quarantined, exit 1.
    let home = wd.convert("in.jsonl", "home2", &["--no-guess"], 1);
    assert!(home.rollouts().is_empty());
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1);
    assert_eq!(quarantine[0]["class"], "no_messages");
}

#[test]
fn json_pretty_printed_document_is_one_record() {
    let wd = Workdir::new("json_pretty");
    wd.create(
        "conversation.json",
        "{\n  \"id\": \"c-7\",\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"pretty\"},\n    {\"role\": \"assistant\", \"content\": \"printed\"}\n  ]\n}\n",
    );
    let home = wd.convert("conversation.json", "home", &[], 0);
    assert_body(
        &home.single_rollout(),
        body![user_turn("pretty"), assistant_turn("printed", None)],
    );
    let conversations = home.conversations();
    assert_eq!(conversations.len(), 1);
    assert_eq!(conversations[0]["source"], "conversation.json");
    assert_eq!(conversations[0]["line"], 1);
}

#[test]
fn json_array_of_records_is_one_record_per_element() {
    let wd = Workdir::new("json_array");
    wd.create(
        "many.json",
        "[\n  {\"messages\": [{\"role\": \"user\", \"content\": \"one\"}]},\n  {\"messages\": [{\"role\": \"user\", \"content\": \"two\"}]}\n]\n",
    );
    let home = wd.convert("many.json", "home", &[], 0);
    let mut bodies: Vec<Vec<Value>> = home.all_rollouts().iter().map(Rollout::body).collect();
    bodies.sort_by_key(|b| b[0]["payload"]["content"][0]["text"].to_string());
    assert_eq!(
        bodies,
        vec![user_turn("one").to_vec(), user_turn("two").to_vec()]
    );
    // Each element keeps its own line in the audit.
    let locations: Vec<Value> = home
        .conversations()
        .iter()
        .map(|c| json!([c["source"], c["line"]]))
        .collect();
    assert_eq!(
        locations,
        vec![json!(["many.json", 2]), json!(["many.json", 3])]
    );
}

#[test]
fn json_array_of_messages_is_one_record() {
    let wd = Workdir::new("json_message_list");
    wd.create(
        "chat.json",
        "[\n {\"role\": \"user\", \"content\": \"bare list\"},\n {\"role\": \"assistant\", \"content\": \"ok\"}\n]\n",
    );
    let home = wd.convert("chat.json", "home", &[], 0);
    assert_body(
        &home.single_rollout(),
        body![user_turn("bare list"), assistant_turn("ok", None)],
    );
}

#[test]
fn json_file_that_is_really_jsonl() {
    let wd = Workdir::new("json_is_jsonl");
    wd.create(
        "lines.json",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"l1\"}]}\n{\"messages\":[{\"role\":\"user\",\"content\":\"l2\"}]}\n",
    );
    let home = wd.convert("lines.json", "home", &[], 0);
    let mut texts: Vec<Value> = home
        .all_rollouts()
        .iter()
        .map(|r| r.items()[0]["content"][0]["text"].clone())
        .collect();
    texts.sort_by_key(Value::to_string);
    assert_eq!(texts, vec![json!("l1"), json!("l2")]);
    let lines = home.conversation_lines();
    assert_eq!(lines, vec![json!(1), json!(2)]);
}

// ---------------------------------------------------------------------------------------------
// Content (migration.md §2 and §4)
// ---------------------------------------------------------------------------------------------

#[test]
fn content_string_null_missing_and_empty() {
    let wd = Workdir::new("content_kinds");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "a string"},
        {"role": "user", "content": null},
        {"role": "user"},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
        {"role": "assistant", "content": [{"type": "text", "text": "parts"}]}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("a string"),
            // null / missing / "" user content: nothing to say, dropped by rule (audited).
            // An assistant with null or "" content and calls writes only the calls.
            item(json!({"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c1"})),
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "r1"})),
            item(json!({"type": "function_call", "name": "g", "arguments": "{}", "call_id": "c2"})),
            item(json!({"type": "function_call_output", "call_id": "c2", "output": "r2"})),
            assistant_turn("parts", None),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([
            {"message": 1, "rule": "policy.empty_message", "action": "empty_message_dropped"},
            {"message": 2, "rule": "policy.empty_message", "action": "empty_message_dropped"},
            {"message": 3, "rule": "policy.empty_message", "action": "empty_message_dropped"}
        ]),
    );
}

/// A valid 1x1 PNG (Codex decodes inline images on resume; this one decodes).
const PIXEL_PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

#[test]
fn user_parts_convert_in_order() {
    let wd = Workdir::new("user_parts");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": PIXEL_PNG}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": PIXEL_PNG, "detail": "low"}},
            {"type": "image_url", "image_url": {"url": PIXEL_PNG, "detail": "high"}},
            // Only the PNG signature: does not decode.
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            {"type": "file", "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
            {"type": "text", "text": "end"}
        ]}
    ]}));
    let remote = "[image not imported: https://example.com/cat.png]";
    let undecodable = "[image not imported: its data could not be decoded]";
    assert_body(
        &rollout,
        body![
            item(json!({"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": PIXEL_PNG},
                {"type": "input_text", "text": remote},
                // detail "low" is omitted (Codex would replace a low-detail image by a note).
                {"type": "input_image", "image_url": PIXEL_PNG},
                {"type": "input_image", "image_url": PIXEL_PNG, "detail": "high"},
                {"type": "input_text", "text": undecodable},
                {"type": "input_text", "text": "[audio not imported: wav]"},
                {"type": "input_text", "text": "[file not imported: report.pdf]"},
                {"type": "input_text", "text": "end"}
            ]})),
            event(json!({
                "type": "user_message",
                "message": format!("look\n{remote}\n{undecodable}\n[audio not imported: wav]\n[file not imported: report.pdf]\nend"),
                "images": [PIXEL_PNG, PIXEL_PNG, PIXEL_PNG]
            })),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([
            {"message": 0, "rule": "policy.remote_image", "action": "part_placeholder",
             "part": "remote_image", "bytes_added": remote.len()},
            {"message": 0, "rule": "policy.low_detail_image", "action": "image_detail_omitted"},
            {"message": 0, "rule": "policy.undecodable_image", "action": "part_placeholder",
             "part": "undecodable_image", "bytes_added": undecodable.len()},
            {"message": 0, "rule": "policy.audio_part", "action": "part_placeholder",
             "part": "audio", "bytes_added": 25},
            {"message": 0, "rule": "policy.file_part", "action": "part_placeholder",
             "part": "file", "bytes_added": 31}
        ]),
    );
    assert_json_eq(
        &home.summary()["actions"],
        &json!({"image_detail_omitted": 1, "part_placeholder": 4, "session_defaulted": 3}),
    );
}

/// Finding 5: a field of the wrong JSON type used to vanish without a trace
/// (`take_string(..).unwrap_or(None)`); each drop is now a decision, counted in the summary.
#[test]
fn wrong_type_fields_are_dropped_with_a_decision() {
    let wd = Workdir::new("wrong_type_fields");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "name": 5, "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": PIXEL_PNG, "detail": 3}
        ]},
        {"role": "assistant", "phase": ["final_answer"], "content": "a pixel"}
    ]}));
    assert_body(
        &rollout,
        body![
            item(json!({"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": PIXEL_PNG}
            ]})),
            event(json!({"type": "user_message", "message": "look", "images": [PIXEL_PNG]})),
            item(json!({"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "a pixel"}
            ]})),
            event(json!({"type": "agent_message", "message": "a pixel"})),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([
            {"message": 0, "rule": "builtin.wrong-type-field", "action": "field_dropped",
             "field": "content[1].detail", "found": "number"},
            {"message": 0, "rule": "builtin.wrong-type-field", "action": "field_dropped",
             "field": "name", "found": "number"},
            {"message": 1, "rule": "builtin.wrong-type-field", "action": "field_dropped",
             "field": "phase", "found": "list"}
        ]),
    );
    let summary = home.summary();
    assert_eq!(summary["rules_fired"]["builtin.wrong-type-field"], 3);
    assert_eq!(summary["actions"]["field_dropped"], 3);
}

#[test]
fn assistant_refusal_part_and_field_become_output_text() {
    let wd = Workdir::new("refusal");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "How do I pick a lock?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "I see."},
            {"type": "refusal", "refusal": "But I can't help with that."}
        ]},
        {"role": "user", "content": "Please?"},
        {"role": "assistant", "content": null, "refusal": "I can't help with that."}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("How do I pick a lock?"),
            item(json!({"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "I see."},
                {"type": "output_text", "text": "But I can't help with that."}
            ], "phase": "final_answer"})),
            event(json!({"type": "agent_message",
                         "message": "I see.\nBut I can't help with that.", "phase": "final_answer"})),
            user_turn("Please?"),
            assistant_turn("I can't help with that.", None),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([
            {"message": 1, "rule": "policy.refusal", "action": "refusal_as_text"},
            {"message": 3, "rule": "policy.refusal", "action": "refusal_as_text"}
        ]),
    );
}

// ---------------------------------------------------------------------------------------------
// Roles
// ---------------------------------------------------------------------------------------------

#[test]
fn every_known_role_converts() {
    let wd = Workdir::new("roles");
    let (_home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "system", "content": "base"},
        {"role": "developer", "content": "dev rules"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "tool_a", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "tool says"},
        {"role": "assistant", "content": null, "function_call": {"name": "legacy", "arguments": "{}"}},
        {"role": "function", "name": "legacy", "content": "function says"},
        {"role": "assistant", "content": "all done"}
    ]}));
    assert_eq!(rollout.meta()["base_instructions"]["text"], "base");
    assert_body(
        &rollout,
        body![
            item(json!({"type": "message", "role": "developer",
                        "content": [{"type": "input_text", "text": "dev rules"}]})),
            user_turn("go"),
            item(
                json!({"type": "function_call", "name": "tool_a", "arguments": "{}", "call_id": "t1"})
            ),
            item(json!({"type": "function_call_output", "call_id": "t1", "output": "tool says"})),
            item(
                json!({"type": "function_call", "name": "legacy", "arguments": "{}",
                        "call_id": "call_rollover_m5_0"})
            ),
            item(
                json!({"type": "function_call_output", "call_id": "call_rollover_m5_0",
                        "output": "function says"})
            ),
            assistant_turn("all done", None),
        ],
    );
}

#[test]
fn unknown_role_quarantines_record_with_reason() {
    let wd = Workdir::new("unknown_role");
    let record =
        r#"{"messages":[{"role":"user","content":"hi"},{"role":"critic","content":"bad answer"}]}"#;
    let good = r#"{"messages":[{"role":"user","content":"fine"}]}"#;
    wd.create("in.jsonl", format!("{record}\n{good}\n"));
    let home = wd.convert("in.jsonl", "home", &[], 1);
    assert_body(&home.single_rollout(), body![user_turn("fine")]);
    assert_json_eq(
        &Value::Array(home.quarantine()),
        &json!([{
            "source": "in.jsonl",
            "line": 1,
            "byte_offset": 0,
            "class": "rule",
            "reason": "in.jsonl:1 (byte 0): unknown role `critic` at message 1 (rule `policy.unknown_role`)",
            "record": record
        }]),
    );
    let summary = home.summary();
    assert_eq!(
        (
            &summary["records"],
            &summary["converted"],
            &summary["quarantined"]
        ),
        (&json!(2), &json!(1), &json!(1))
    );
    assert_eq!(summary["quarantine_reasons"], json!({"rule": 1}));
}

#[test]
fn name_on_messages_is_audited_as_ignored_field() {
    let wd = Workdir::new("names");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "name": "alice", "content": "hi"},
        {"role": "assistant", "name": "helper_bot", "content": "hello", "annotations": []}
    ]}));
    // Codex messages have no `name`: the text is unchanged and the field is counted.
    assert_body(
        &rollout,
        body![user_turn("hi"), assistant_turn("hello", None)],
    );
    assert_json_eq(
        &home.summary()["ignored_fields"],
        &json!({"message.annotations": 1, "message.name": 2}),
    );
}

// ---------------------------------------------------------------------------------------------
// Tool calls
// ---------------------------------------------------------------------------------------------

#[test]
fn tool_call_arguments_object_becomes_string() {
    let wd = Workdir::new("arguments_object");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c_str", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"id": "c_obj", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Rome", "units": "C"}}}
        ]},
        {"role": "tool", "tool_call_id": "c_str", "content": "rain"},
        {"role": "tool", "tool_call_id": "c_obj", "content": "sun"}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("weather?"),
            // A string is written as given; an object is serialised (key order kept).
            item(json!({"type": "function_call", "name": "get_weather",
                        "arguments": "{\"city\": \"Paris\"}", "call_id": "c_str"})),
            item(json!({"type": "function_call", "name": "get_weather",
                        "arguments": "{\"city\":\"Rome\",\"units\":\"C\"}", "call_id": "c_obj"})),
            item(json!({"type": "function_call_output", "call_id": "c_str", "output": "rain"})),
            item(json!({"type": "function_call_output", "call_id": "c_obj", "output": "sun"})),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([{"message": 1, "rule": "builtin.arguments-string", "action": "arguments_serialized"}]),
    );
}

#[test]
fn parallel_tool_calls_are_answered_in_order_of_their_results() {
    let wd = Workdir::new("parallel_calls");
    let (_home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "three lookups"},
        {"role": "assistant", "content": "Looking up all three.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"k\":1}"}},
            {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "{\"k\":2}"}},
            {"id": "call_3", "type": "function", "function": {"name": "lookup", "arguments": "{\"k\":3}"}}
        ]},
        {"role": "tool", "tool_call_id": "call_2", "content": "two"},
        {"role": "tool", "tool_call_id": "call_3", "content": "three"},
        {"role": "tool", "tool_call_id": "call_1", "content": "one"},
        {"role": "assistant", "content": "one two three"},
        {"role": "user", "content": "ok"}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("three lookups"),
            assistant_turn("Looking up all three.", Some("commentary")),
            item(
                json!({"type": "function_call", "name": "lookup", "arguments": "{\"k\":1}", "call_id": "call_1"})
            ),
            item(
                json!({"type": "function_call", "name": "lookup", "arguments": "{\"k\":2}", "call_id": "call_2"})
            ),
            item(
                json!({"type": "function_call", "name": "lookup", "arguments": "{\"k\":3}", "call_id": "call_3"})
            ),
            item(json!({"type": "function_call_output", "call_id": "call_2", "output": "two"})),
            item(json!({"type": "function_call_output", "call_id": "call_3", "output": "three"})),
            item(json!({"type": "function_call_output", "call_id": "call_1", "output": "one"})),
            assistant_turn("one two three", Some("final_answer")),
            user_turn("ok"),
        ],
    );
}

#[test]
fn legacy_function_call_pairs_by_name_with_synthesized_call_id() {
    let wd = Workdir::new("legacy_function_call");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "add and multiply"},
        {"role": "assistant", "content": null,
         "function_call": {"name": "add", "arguments": "{\"a\":1,\"b\":2}"}},
        {"role": "assistant", "content": null,
         "function_call": {"name": "mul", "arguments": {"a": 2, "b": 3}}},
        // Answered out of order: paired by name, not by position.
        {"role": "function", "name": "mul", "content": "6"},
        {"role": "function", "name": "add", "content": "3"},
        {"role": "assistant", "content": "3 and 6"}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("add and multiply"),
            item(
                json!({"type": "function_call", "name": "add", "arguments": "{\"a\":1,\"b\":2}",
                        "call_id": "call_rollover_m1_0"})
            ),
            item(
                json!({"type": "function_call", "name": "mul", "arguments": "{\"a\":2,\"b\":3}",
                        "call_id": "call_rollover_m2_0"})
            ),
            item(
                json!({"type": "function_call_output", "call_id": "call_rollover_m2_0", "output": "6"})
            ),
            item(
                json!({"type": "function_call_output", "call_id": "call_rollover_m1_0", "output": "3"})
            ),
            assistant_turn("3 and 6", None),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([
            {"message": 1, "rule": "builtin.call-id", "action": "call_id_synthesized",
             "call_id": "call_rollover_m1_0"},
            {"message": 2, "rule": "builtin.call-id", "action": "call_id_synthesized",
             "call_id": "call_rollover_m2_0"},
            {"message": 2, "rule": "builtin.arguments-string", "action": "arguments_serialized"}
        ]),
    );
}

#[test]
fn tool_call_ids_list_answers_each_listed_call() {
    let wd = Workdir::new("tool_call_ids");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_ids": ["c1", "c2"], "content": "both done"},
        {"role": "assistant", "content": "done"}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("x"),
            item(json!({"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c1"})),
            item(json!({"type": "function_call", "name": "g", "arguments": "{}", "call_id": "c2"})),
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "both done"})),
            item(json!({"type": "function_call_output", "call_id": "c2", "output": "both done"})),
            assistant_turn("done", None),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([{"message": 2, "rule": "builtin.shared-output", "action": "output_shared",
                 "call_id": "c2", "bytes_added": 9}]),
    );
}

#[test]
fn reused_call_id_is_renamed_in_call_and_its_output() {
    let wd = Workdir::new("reused_call_id");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "list"},
        {"role": "assistant", "tool_calls": [
            {"id": "call_x", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_x", "content": "first result"},
        {"role": "assistant", "content": "one file"},
        {"role": "user", "content": "again, long"},
        {"role": "assistant", "tool_calls": [
            {"id": "call_x", "type": "function", "function": {"name": "ls", "arguments": "{\"l\":true}"}}]},
        {"role": "tool", "tool_call_id": "call_x", "content": "second result"},
        {"role": "assistant", "content": "same file"}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("list"),
            item(
                json!({"type": "function_call", "name": "ls", "arguments": "{}", "call_id": "call_x"})
            ),
            item(
                json!({"type": "function_call_output", "call_id": "call_x", "output": "first result"})
            ),
            assistant_turn("one file", Some("final_answer")),
            user_turn("again, long"),
            item(
                json!({"type": "function_call", "name": "ls", "arguments": "{\"l\":true}",
                        "call_id": "call_x#2"})
            ),
            item(
                json!({"type": "function_call_output", "call_id": "call_x#2",
                        "output": "second result"})
            ),
            assistant_turn("same file", None),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([{"message": 5, "rule": "policy.reused_call_id", "action": "call_id_renamed",
                 "from": "call_x", "to": "call_x#2"}]),
    );
}

#[test]
fn missing_output_becomes_aborted() {
    let wd = Workdir::new("missing_output");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "user", "content": "never mind"},
        {"role": "assistant", "content": "ok"}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("run it"),
            item(
                json!({"type": "function_call", "name": "run", "arguments": "{}", "call_id": "c1"})
            ),
            // Placed right after the call's turn, before the next user message.
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "aborted"})),
            user_turn("never mind"),
            assistant_turn("ok", None),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([{"rule": "policy.missing_output", "action": "output_synthesized",
                 "call_id": "c1", "bytes_added": 7}]),
    );
}

#[test]
fn orphan_output_is_dropped_and_recorded() {
    let wd = Workdir::new("orphan_output");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_gone", "content": "stray result"},
        {"role": "assistant", "content": "hello"}
    ]}));
    assert_body(
        &rollout,
        body![user_turn("hi"), assistant_turn("hello", None)],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([{"message": 1, "rule": "policy.orphan_output", "action": "orphan_output_dropped",
                 "call_id": "call_gone", "bytes_dropped": 12}]),
    );
    let conversation = &home.conversations()[0];
    assert_eq!(conversation["source"], "in.jsonl");
    assert_eq!(conversation["line"], 1);
    assert_json_eq(
        &conversation["account"],
        &json!({"bytes_in": 19, "bytes_out": 7, "bytes_dropped": 12, "bytes_added": 0}),
    );
}

#[test]
fn conversation_ending_on_a_tool_call_gets_aborted_output() {
    let wd = Workdir::new("ends_on_call");
    let (_home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "deploy"},
        {"role": "assistant", "content": "Deploying now.", "tool_calls": [
            {"id": "call_d", "type": "function", "function": {"name": "deploy", "arguments": "{}"}}]}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("deploy"),
            assistant_turn("Deploying now.", Some("commentary")),
            item(
                json!({"type": "function_call", "name": "deploy", "arguments": "{}", "call_id": "call_d"})
            ),
            item(json!({"type": "function_call_output", "call_id": "call_d", "output": "aborted"})),
        ],
    );
}

#[test]
fn tool_result_with_empty_content_is_an_empty_output() {
    let wd = Workdir::new("empty_tool_result");
    let (_home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "touch it"},
        {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "touch", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "touch", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
        {"role": "tool", "tool_call_id": "c2", "content": null},
        {"role": "assistant", "content": "done"}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("touch it"),
            item(
                json!({"type": "function_call", "name": "touch", "arguments": "{}", "call_id": "c1"})
            ),
            item(
                json!({"type": "function_call", "name": "touch", "arguments": "{}", "call_id": "c2"})
            ),
            // An empty result is a real result, not a missing one.
            item(json!({"type": "function_call_output", "call_id": "c1", "output": ""})),
            item(json!({"type": "function_call_output", "call_id": "c2", "output": ""})),
            assistant_turn("done", None),
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Reasoning
// ---------------------------------------------------------------------------------------------

#[test]
fn reasoning_becomes_item_right_before_what_it_explains() {
    let wd = Workdir::new("reasoning");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "reasoning_content": "I should list first.", "content": "Let me look.",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "assistant", "reasoning": "Now read it.", "content": null,
         "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "hello"},
        {"role": "assistant", "reasoning_content": "Done.", "content": "It says hello."},
        {"role": "user", "content": "thanks"}
    ]}));
    let reasoning = |text: &str| {
        item(json!({"type": "reasoning", "summary": [],
                    "content": [{"type": "reasoning_text", "text": text}],
                    "encrypted_content": null}))
    };
    assert_body(
        &rollout,
        body![
            user_turn("q"),
            reasoning("I should list first."),
            assistant_turn("Let me look.", Some("commentary")),
            item(
                json!({"type": "function_call", "name": "ls", "arguments": "{}", "call_id": "c1"})
            ),
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "a.txt"})),
            reasoning("Now read it."),
            item(
                json!({"type": "function_call", "name": "cat", "arguments": "{}", "call_id": "c2"})
            ),
            item(json!({"type": "function_call_output", "call_id": "c2", "output": "hello"})),
            reasoning("Done."),
            assistant_turn("It says hello.", Some("final_answer")),
            user_turn("thanks"),
        ],
    );
    assert_eq!(
        home.summary()["actions"],
        json!({"reasoning_item": 3, "session_defaulted": 3})
    );
}

// ---------------------------------------------------------------------------------------------
// Phases (migration.md §4)
// ---------------------------------------------------------------------------------------------

#[test]
fn phases_commentary_before_more_output_and_final_answer_before_next_user() {
    let wd = Workdir::new("phases");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "thinking aloud"},
        {"role": "assistant", "content": "answer one"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "checking", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": "answer two"},
        {"role": "system", "content": "a mid-conversation note"},
        {"role": "user", "content": "third"},
        {"role": "assistant", "content": "unfinished"}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("first"),
            assistant_turn("thinking aloud", Some("commentary")),
            assistant_turn("answer one", Some("final_answer")),
            user_turn("second"),
            assistant_turn("checking", Some("commentary")),
            item(json!({"type": "function_call", "name": "f", "arguments": "{}", "call_id": "c1"})),
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "r"})),
            // A developer message in between does not end the turn; the next user does.
            assistant_turn("answer two", Some("final_answer")),
            item(json!({"type": "message", "role": "developer",
                        "content": [{"type": "input_text", "text": "a mid-conversation note"}]})),
            user_turn("third"),
            // The record does not say it finished: no phase is guessed.
            assistant_turn("unfinished", None),
        ],
    );
    assert_json_eq(
        &home.summary()["phases"],
        &json!({"commentary": 2, "final_answer": 2, "none": 1}),
    );
}

#[test]
fn no_phase_at_end_of_record_that_does_not_say_it_finished() {
    let wd = Workdir::new("no_phase_at_end");
    let (_home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a"}
    ]}));
    assert_body(&rollout, body![user_turn("q"), assistant_turn("a", None)]);
    // Not even in the event: the key is absent, not null.
    let agent = &rollout.events()[1];
    assert!(agent.get("phase").is_none(), "{agent}");
    assert!(rollout.items()[1].get("phase").is_none());
}

#[test]
fn finished_record_makes_last_assistant_final_answer() {
    let wd = Workdir::new("finished_choices");
    let (_home, rollout) = wd.convert_record(json!({
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"}
        ],
        "choices": [{"finish_reason": "stop"}]
    }));
    assert_body(
        &rollout,
        body![user_turn("q"), assistant_turn("a", Some("final_answer"))],
    );
}

#[test]
fn explicit_input_phase_is_kept() {
    let wd = Workdir::new("explicit_phase");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "q"},
        // Inference would say commentary (more output follows): the input says otherwise.
        {"role": "assistant", "content": "draft", "phase": "final_answer"},
        // Inference would say final_answer (a user follows).
        {"role": "assistant", "content": "note", "phase": "commentary"},
        {"role": "user", "content": "q2"},
        // Inference would give no phase at the end.
        {"role": "assistant", "content": "done", "phase": "final_answer"},
        {"role": "user", "content": "q3"},
        // An unknown phase is dropped by rule and the phase inferred instead.
        {"role": "assistant", "content": "odd", "phase": "thinking"}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("q"),
            assistant_turn("draft", Some("final_answer")),
            assistant_turn("note", Some("commentary")),
            user_turn("q2"),
            assistant_turn("done", Some("final_answer")),
            user_turn("q3"),
            assistant_turn("odd", None),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([{"message": 6, "rule": "policy.invalid_phase", "action": "invalid_phase_dropped",
                 "phase": "thinking"}]),
    );
}

// ---------------------------------------------------------------------------------------------
// Classification of system and developer content (migration.md §3, default rules)
// ---------------------------------------------------------------------------------------------

#[test]
fn first_leading_system_is_base_instructions_and_the_rest_one_developer_message() {
    let wd = Workdir::new("leading_block");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "system", "content": "You are Codex."},
        {"role": "system", "content": "Section A"},
        {"role": "developer", "content": [{"type": "text", "text": "Section B"}]},
        {"role": "system", "content": "Section C"},
        {"role": "user", "content": "hi"}
    ]}));
    assert_eq!(
        rollout.meta()["base_instructions"],
        json!({"text": "You are Codex."})
    );
    assert_body(
        &rollout,
        body![
            // One developer message, one input_text per section, never concatenated.
            item(json!({"type": "message", "role": "developer", "content": [
                {"type": "input_text", "text": "Section A"},
                {"type": "input_text", "text": "Section B"},
                {"type": "input_text", "text": "Section C"}
            ]})),
            user_turn("hi"),
        ],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([
            {"message": 0, "rule": "first-leading-system", "action": "classified", "slot": "base_instructions"},
            {"message": 1, "rule": "leading-context", "action": "classified", "slot": "developer"},
            {"message": 2, "rule": "leading-context", "action": "classified", "slot": "developer"},
            {"message": 3, "rule": "leading-context", "action": "classified", "slot": "developer"}
        ]),
    );
}

#[test]
fn mid_conversation_system_is_developer_message_at_its_position() {
    let wd = Workdir::new("mid_system");
    let (_home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "system", "content": "base"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "reply one"},
        {"role": "system", "content": "Be brief from now on."},
        {"role": "developer", "content": "And formal."},
        {"role": "user", "content": "two"}
    ]}));
    assert_body(
        &rollout,
        body![
            user_turn("one"),
            assistant_turn("reply one", Some("final_answer")),
            item(json!({"type": "message", "role": "developer", "content": [
                {"type": "input_text", "text": "Be brief from now on."},
                {"type": "input_text", "text": "And formal."}
            ]})),
            user_turn("two"),
        ],
    );
    // Never a `system` message in the items (Codex drops them).
    assert!(rollout.items().iter().all(|i| i["role"] != "system"));
}

#[test]
fn leading_environment_context_system_is_contextual_user_without_event() {
    let wd = Workdir::new("leading_env_context");
    let env =
        "<environment_context>\n  <cwd>/repo</cwd>\n  <shell>bash</shell>\n</environment_context>";
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "system", "content": "You are Codex."},
        {"role": "system", "content": env},
        {"role": "user", "content": "hi"}
    ]}));
    assert_eq!(
        rollout.meta()["base_instructions"]["text"],
        "You are Codex."
    );
    assert_body(
        &rollout,
        body![
            // Hidden runtime context: a user message with no user_message event.
            item(json!({"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": env}]})),
            user_turn("hi"),
        ],
    );
    let summary = home.summary();
    // (The summary lists a zero count for agent_message: events are bumped by 0.)
    assert_eq!(
        summary["events"],
        json!({"agent_message": 0, "user_message": 1})
    );
    assert_eq!(
        summary["items"],
        json!({"message:contextual_user": 1, "message:user": 1})
    );
}

#[test]
fn leading_agents_md_system_is_wrapped_as_agents_md_fragment() {
    let wd = Workdir::new("leading_agents_md");
    let (_home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "system", "content": "You are Codex."},
        {"role": "system", "content": "# AGENTS.md\n\nUse tabs."},
        {"role": "user", "content": "hi"}
    ]}));
    assert_body(
        &rollout,
        body![
            item(
                json!({"type": "message", "role": "user", "content": [{"type": "input_text",
                "text": "# AGENTS.md instructions for /\n\n<INSTRUCTIONS>\n# AGENTS.md\n\nUse tabs.\n</INSTRUCTIONS>"}]})
            ),
            user_turn("hi"),
        ],
    );
}

#[test]
fn user_text_that_looks_like_a_fragment_stays_real_user_with_zero_width_space() {
    let wd = Workdir::new("lookalike");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "<environment_context>x</environment_context>"},
        {"role": "assistant", "content": "That is a tag."}
    ]}));
    let escaped = "\u{200B}<environment_context>x</environment_context>";
    assert_body(
        &rollout,
        body![user_turn(escaped), assistant_turn("That is a tag.", None)],
    );
    // The raw bytes carry the escape (U+200B is E2 80 8B in UTF-8).
    let raw = String::from_utf8(rollout.bytes.clone()).unwrap();
    assert!(raw.contains("\u{200B}<environment_context>x"), "{raw}");
    assert_json_eq(
        &home.decisions(),
        &json!([{"message": 0, "rule": "policy.lookalike_user_text", "action": "lookalike_escaped",
                 "kind": "environment_context", "bytes_added": 3}]),
    );
}

// ---------------------------------------------------------------------------------------------
// Identity and events
// ---------------------------------------------------------------------------------------------

#[test]
fn session_id_file_name_and_timestamps_are_deterministic() {
    let wd = Workdir::new("identity");
    let (_home, rollout) = wd.convert_record(json!({
        "created": "2024-05-06T07:08:09Z",
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"}
        ]
    }));
    let id = rollout.meta()["id"].as_str().unwrap().to_string();
    assert_eq!(id, rollout.file_uuid());
    assert!(
        rollout.path.to_string_lossy().ends_with(&format!(
            "sessions/2024/05/06/rollout-2024-05-06T07-08-09-{id}.jsonl"
        )),
        "{:?}",
        rollout.path
    );
    let stamps: Vec<&str> = rollout
        .lines
        .iter()
        .map(|l| l["timestamp"].as_str().unwrap())
        .collect();
    assert_eq!(
        stamps,
        vec![
            "2024-05-06T07:08:09.000Z",
            "2024-05-06T07:08:09.001Z",
            "2024-05-06T07:08:09.002Z",
            "2024-05-06T07:08:09.003Z",
            "2024-05-06T07:08:09.004Z"
        ]
    );
    assert_eq!(rollout.meta()["timestamp"], "2024-05-06T07:08:09.000Z");
}

#[test]
fn every_real_user_and_assistant_message_has_its_event() {
    let wd = Workdir::new("events");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "system", "content": "base"},
        {"role": "system", "content": "<environment_context>e</environment_context>"},
        {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]},
        {"role": "assistant", "content": "a1", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": "a2"},
        {"role": "user", "content": "u2"}
    ]}));
    assert_json_eq(
        &Value::Array(rollout.events()),
        &json!([
            {"type": "user_message", "message": "part one\npart two"},
            {"type": "agent_message", "message": "a1", "phase": "commentary"},
            {"type": "agent_message", "message": "a2", "phase": "final_answer"},
            {"type": "user_message", "message": "u2"}
        ]),
    );
    // Each event comes right after its message.
    let body = rollout.body();
    for (i, line) in body.iter().enumerate() {
        if line["type"] == "event_msg" {
            let before = &body[i - 1]["payload"];
            assert_eq!(before["type"], "message");
            let role = if line["payload"]["type"] == "user_message" {
                "user"
            } else {
                "assistant"
            };
            assert_eq!(before["role"], role, "{line}");
        }
    }
    assert_eq!(
        home.summary()["events"],
        json!({"agent_message": 2, "user_message": 2})
    );
}

// ---------------------------------------------------------------------------------------------
// File oddities (migration.md §2)
// ---------------------------------------------------------------------------------------------

#[test]
fn utf8_bom_crlf_and_blank_lines_are_accepted() {
    let wd = Workdir::new("bom_crlf");
    wd.create(
        "in.jsonl",
        b"\xEF\xBB\xBF{\"messages\":[{\"role\":\"user\",\"content\":\"bom\"}]}\r\n\r\n   \n\n{\"messages\":[{\"role\":\"user\",\"content\":\"crlf\"}]}\r\n",
    );
    let home = wd.convert("in.jsonl", "home", &[], 0);
    let mut bodies: Vec<Vec<Value>> = home.all_rollouts().iter().map(Rollout::body).collect();
    bodies.sort_by_key(|b| b[0]["payload"]["content"][0]["text"].to_string());
    assert_eq!(
        bodies,
        vec![user_turn("bom").to_vec(), user_turn("crlf").to_vec()]
    );
    let summary = home.summary();
    assert_eq!(
        (
            &summary["records"],
            &summary["converted"],
            &summary["blank_lines"]
        ),
        (&json!(2), &json!(2), &json!(3))
    );
    let lines = home.conversation_lines();
    assert_eq!(lines, vec![json!(1), json!(5)]);
    // No BOM and no CR reach a rollout (Rollout::read checks the CR).
    for rollout in home.all_rollouts() {
        assert!(!rollout.bytes.starts_with(b"\xEF\xBB\xBF"));
    }
}

#[test]
fn bom_and_crlf_in_pretty_json_document() {
    let wd = Workdir::new("bom_json");
    wd.create(
        "doc.json",
        b"\xEF\xBB\xBF{\r\n  \"messages\": [\r\n    {\"role\": \"user\", \"content\": \"windows\"}\r\n  ]\r\n}\r\n",
    );
    let home = wd.convert("doc.json", "home", &[], 0);
    assert_body(&home.single_rollout(), body![user_turn("windows")]);
}

#[test]
fn two_zstd_frames_in_one_file_are_one_stream() {
    let wd = Workdir::new("zstd_frames");
    let mut bytes = zstd::stream::encode_all(
        &b"{\"messages\":[{\"role\":\"user\",\"content\":\"frame one\"}]}\n"[..],
        3,
    )
    .unwrap();
    bytes.extend(
        zstd::stream::encode_all(
            &b"{\"messages\":[{\"role\":\"user\",\"content\":\"frame two\"}]}\n"[..],
            3,
        )
        .unwrap(),
    );
    wd.create("archive.jsonl.zst", &bytes);
    let home = wd.convert("archive.jsonl.zst", "home", &[], 0);
    let mut texts: Vec<String> = home
        .all_rollouts()
        .iter()
        .map(|r| {
            r.items()[0]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    texts.sort();
    assert_eq!(texts, vec!["frame one", "frame two"]);
    let lines = home.conversation_lines();
    assert_eq!(lines, vec![json!(1), json!(2)]);
}

#[test]
fn gzip_file_without_gz_extension_is_detected_by_magic() {
    let wd = Workdir::new("gzip_no_ext");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder
        .write_all(b"{\"messages\":[{\"role\":\"user\",\"content\":\"gzipped\"}]}\n")
        .unwrap();
    wd.create("logs/export.jsonl", encoder.finish().unwrap());
    // Found by walking a folder, named .jsonl, gzip inside.
    let home = wd.convert("logs", "home", &[], 0);
    assert_body(&home.single_rollout(), body![user_turn("gzipped")]);
    assert_eq!(home.conversations()[0]["source"], "logs/export.jsonl");
}

#[test]
fn lone_surrogate_is_replaced_and_counted() {
    let wd = Workdir::new("lone_surrogate");
    // Written by hand: serde_json would never produce a lone surrogate escape.
    wd.create(
        "in.jsonl",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"bad \\ud800 here \\udc00 and \\ud83d\\ude00 ok\"}]}\n",
    );
    let home = wd.convert("in.jsonl", "home", &[], 0);
    let rollout = home.single_rollout();
    assert_body(
        &rollout,
        body![user_turn("bad \u{FFFD} here \u{FFFD} and \u{1F600} ok")],
    );
    // Never written raw: the file is valid UTF-8 with the replacement character.
    let raw = String::from_utf8(rollout.bytes.clone()).unwrap();
    assert!(
        !raw.contains("\\ud800") && !raw.contains("\\udc00"),
        "{raw}"
    );
    assert_json_eq(
        &home.decisions(),
        &json!([{"rule": "policy.invalid_unicode", "action": "unicode_repaired", "count": 2}]),
    );
    let summary = home.summary();
    assert_eq!(
        summary["actions"],
        json!({"unicode_repaired": 1, "session_defaulted": 3})
    );
    assert_eq!(
        summary["rules_fired"],
        json!({"policy.invalid_unicode": 1, "session.timestamp": 1, "session.cwd": 1,
               "session.originator": 1})
    );
}

// ---------------------------------------------------------------------------------------------
// Must show 4: deterministic output
// ---------------------------------------------------------------------------------------------

/// An input folder with a bit of everything: shapes, compression, repairs, quarantines.
fn mixed_archive(wd: &Workdir) {
    let mut lines = Vec::new();
    for i in 0..40 {
        lines.push(json!({"messages": [
            {"role": "system", "content": format!("system {i}")},
            {"role": "user", "content": format!("question {i}")},
            {"role": "assistant", "content": format!("answer {i}"), "tool_calls": [
                {"id": "call_same", "type": "function",
                 "function": {"name": "f", "arguments": {"i": i}}}]},
            {"role": "tool", "tool_call_id": "call_same", "content": format!("r{i}")},
            {"role": "assistant", "content": format!("done {i}")}
        ]}));
    }
    wd.create_jsonl("archive/a.jsonl", &lines);
    let mut text = String::new();
    for i in 0..30 {
        text.push_str(&format!(
            "{{\"custom_id\":\"r{i}\",\"body\":{{\"messages\":[{{\"role\":\"user\",\"content\":\"batch {i} \\ud800\"}}]}},\"response\":{{\"body\":{{\"created\":{},\"choices\":[{{\"message\":{{\"role\":\"assistant\",\"content\":\"reply {i}\"}},\"finish_reason\":\"stop\"}}]}}}}}}\n",
            1_700_000_000 + i * 3600
        ));
        if i % 7 == 0 {
            text.push_str("not json at all\n");
            text.push_str("{\"messages\":[{\"role\":\"oracle\",\"content\":\"?\"}]}\n");
        }
    }
    wd.create(
        "archive/b.jsonl.zst",
        zstd::stream::encode_all(text.as_bytes(), 3).unwrap(),
    );
    wd.create(
        "archive/nested/c.json",
        "[\n{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"tool\",\"tool_call_id\":\"gone\",\"content\":\"o\"}]},\n{\"input\":\"bare\"}\n]\n",
    );
}

#[track_caller]
fn assert_same_tree(a: &Home, b: &Home) {
    let (ta, tb) = (a.tree(), b.tree());
    let names = |t: &[(String, Vec<u8>)]| t.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ta), names(&tb), "same files");
    for ((name, x), (_, y)) in ta.iter().zip(tb.iter()) {
        assert!(
            x == y,
            "{name} differs:\n--- {:?}\n{}\n--- {:?}\n{}",
            a.root,
            String::from_utf8_lossy(x),
            b.root,
            String::from_utf8_lossy(y)
        );
    }
}

#[test]
fn converting_twice_gives_byte_identical_trees() {
    let wd = Workdir::new("deterministic");
    mixed_archive(&wd);
    let first = wd.convert("archive", "home1", &[], 1);
    let second = wd.convert("archive", "home2", &[], 1);
    let tree = first.tree();
    // The tree is not trivial: rollouts, and every audit file with content.
    assert!(tree.len() > 70, "{} files", tree.len());
    for name in [
        "rollover/runs/0001/summary.json",
        "rollover/runs/0001/quarantine.jsonl",
        "rollover/runs/0001/conversations.jsonl",
    ] {
        let bytes = &tree.iter().find(|(n, _)| n == name).unwrap().1;
        assert!(!bytes.is_empty(), "{name} is empty");
    }
    assert_same_tree(&first, &second);
    let summary = first.summary();
    assert_eq!(summary["records"], json!(40 + 30 + 10 + 2));
    assert_eq!(summary["quarantined"], 10);
    // Timing is in timing.json, not in the summary, which stays the same for the same input.
    assert_eq!(summary.get("seconds"), None);
    let timing: serde_json::Value = serde_json::from_slice(
        &std::fs::read(first.root.join("rollover/runs/0001/timing.json")).expect("timing.json"),
    )
    .expect("timing.json is JSON");
    assert_eq!(timing["records"], json!(40 + 30 + 10 + 2));
    for key in ["seconds", "records_per_second", "mib_per_second"] {
        assert!(timing[key].as_f64().is_some(), "{key}: {timing}");
    }
}

#[test]
fn jobs_1_and_jobs_2_give_byte_identical_trees() {
    let wd = Workdir::new("jobs");
    mixed_archive(&wd);
    let one = wd.convert("archive", "home1", &["--jobs", "1"], 1);
    let two = wd.convert("archive", "home2", &["--jobs", "2"], 1);
    assert_same_tree(&one, &two);
}

// ---------------------------------------------------------------------------------------------
// Must show 5: damaged input
// ---------------------------------------------------------------------------------------------

/// Lines that do not compress to nothing (so the stream has several zstd blocks), from a
/// fixed xorshift sequence.
fn varied_lines(count: usize) -> Vec<String> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..count)
        .map(|i| {
            let noise: Vec<String> = (0..12).map(|_| format!("{:x}", next())).collect();
            serde_json::to_string(&json!({"messages": [
                {"role": "user", "content": format!("record {i} {}", noise.join(" "))}
            ]}))
            .unwrap()
        })
        .collect()
}

#[test]
fn truncated_zstd_keeps_records_before_the_damage() {
    let wd = Workdir::new("truncated_zstd");
    let lines = varied_lines(2000);
    let plain = lines.join("\n") + "\n";
    let compressed = zstd::stream::encode_all(plain.as_bytes(), 1).unwrap();
    let cut = compressed.len() / 2;
    wd.create("archive.jsonl.zst", &compressed[..cut]);
    wd.create(
        "zz-after.jsonl",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"after the damaged file\"}]}\n",
    );
    // Both inputs: the run goes on past the damaged file.
    let run = wd.run(&[
        "convert",
        "archive.jsonl.zst",
        "zz-after.jsonl",
        "--out",
        "home",
    ]);
    run.expect_code(1);
    let home = Home {
        root: wd.path("home"),
        run,
    };
    let summary = home.summary();
    let damaged = summary["damaged_files"].as_array().unwrap();
    assert_eq!(damaged.len(), 1, "{summary:#}");
    let damage = &damaged[0];
    assert_eq!(damage["file"], "archive.jsonl.zst");
    let damage_line = damage["line"].as_u64().unwrap() as usize;
    let damage_offset = damage["byte_offset"].as_u64().unwrap() as usize;
    let compressed_offset = damage["compressed_offset"].as_u64().unwrap() as usize;
    assert!(damage_line > 1 && damage_line < lines.len(), "{damage}");
    // The offset is where the cut line starts in the decompressed stream.
    let line_start: usize = lines[..damage_line - 1].iter().map(|l| l.len() + 1).sum();
    assert_eq!(damage_offset, line_start, "{damage}");
    assert!(
        compressed_offset <= cut && compressed_offset > 0,
        "{damage}"
    );
    assert!(
        damage["message"]
            .as_str()
            .unwrap()
            .starts_with("cannot read further: "),
        "{damage}"
    );
    assert!(
        home.run.stderr().contains(&format!(
            "archive.jsonl.zst:{damage_line} (byte {damage_offset}), compressed byte {compressed_offset}"
        )),
        "{}",
        home.run
    );

    // Every record before the damage was converted, in order, unchanged.
    let conversations = home.conversations();
    let before = damage_line - 1;
    assert_eq!(conversations.len(), before + 1);
    for (i, conversation) in conversations[..before].iter().enumerate() {
        assert_eq!(conversation["source"], "archive.jsonl.zst");
        assert_eq!(conversation["line"], i + 1);
    }
    assert_eq!(conversations[before]["source"], "zz-after.jsonl");
    let mut converted_texts: Vec<String> = home
        .all_rollouts()
        .iter()
        .map(|r| {
            r.items()[0]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    converted_texts.sort();
    let mut expected_texts: Vec<String> = lines[..before]
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["messages"][0]["content"].as_str().unwrap().to_string()
        })
        .chain(["after the damaged file".to_string()])
        .collect();
    expected_texts.sort();
    assert_eq!(converted_texts, expected_texts);

    // The line cut by the damage is quarantined as truncated, its bytes a prefix of the line.
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1, "{quarantine:#?}");
    let entry = &quarantine[0];
    assert_eq!(entry["source"], "archive.jsonl.zst");
    assert_eq!(entry["line"], damage_line);
    assert_eq!(entry["byte_offset"], damage_offset);
    assert_eq!(entry["class"], "truncated");
    let partial = entry["record"].as_str().unwrap();
    assert!(!partial.is_empty() && lines[damage_line - 1].starts_with(partial));
    assert!(partial.len() < lines[damage_line - 1].len());

    assert_eq!(summary["records"], json!(before + 2));
    assert_eq!(summary["converted"], json!(before + 1));
    assert_eq!(summary["quarantined"], 1);
    assert_eq!(summary["quarantine_reasons"], json!({"truncated": 1}));
}

#[test]
fn bad_lines_are_quarantined_unchanged_and_the_run_goes_on() {
    let wd = Workdir::new("bad_lines");
    let bad: Vec<&str> = vec![
        "this is not json",
        r#"{"foo": "bar", "n": 1}"#,
        "[1, 2, 3]",
        r#"{"messages":[{"role":"user","content":"cut he"#,
        r#"{"messages":[]}"#,
        r#"{"messages":[{"content":"no role"}]}"#,
    ];
    let good = |t: &str| format!(r#"{{"messages":[{{"role":"user","content":"{t}"}}]}}"#);
    // A bad first line, CRLF endings and a blank line in the middle.
    let all = [
        bad[0].to_string(),
        good("good one"),
        bad[1].to_string(),
        bad[2].to_string(),
        String::new(),
        bad[3].to_string(),
        good("good two"),
        bad[4].to_string(),
        bad[5].to_string(),
    ];
    let text = all.join("\r\n") + "\r\n";
    wd.create("bad.jsonl", &text);
    let home = wd.convert("bad.jsonl", "home", &[], 1);

    let mut texts: Vec<String> = home
        .all_rollouts()
        .iter()
        .map(|r| {
            r.items()[0]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    texts.sort();
    assert_eq!(texts, vec!["good one", "good two"]);

    let offset = |line: usize| -> usize { all[..line - 1].iter().map(|l| l.len() + 2).sum() };
    let entry = |line: usize, class: &str, why: &str| {
        json!({
            "source": "bad.jsonl",
            "line": line,
            "byte_offset": offset(line),
            "class": class,
            "reason": format!("bad.jsonl:{line} (byte {}): {why}", offset(line)),
            "record": all[line - 1]
        })
    };
    let tried = "`messages`, `body.messages`, `input`, `history`, `question`, `answer_generation.train_messages[-1]`, `conversation`, `conversations`";
    assert_json_eq(
        &Value::Array(home.quarantine()),
        &json!([
            entry(1, "invalid_json", "invalid JSON: expected ident at line 1 column 2"),
            entry(3, "no_messages", &format!("no message list: none of the paths {tried} holds a list of messages or a string; name the right one with --messages-at")),
            entry(4, "bad_message", "message 0 at `(record)`: is a number, not a message object"),
            entry(6, "invalid_json", "invalid JSON: EOF while parsing a string at line 1 column 45"),
            entry(8, "empty_messages", "message list at `messages` is empty"),
            entry(9, "bad_message", "message 0 at `messages`: has no `role`"),
        ]),
    );
    // Raw bytes unchanged: each `record` is exactly the line as in the file (no CR).
    for q in home.quarantine() {
        let line = q["line"].as_u64().unwrap() as usize;
        assert_eq!(
            q["record"].as_str().unwrap().as_bytes(),
            all[line - 1].as_bytes()
        );
        assert!(!q["reason"].as_str().unwrap().contains('\n'));
    }

    let summary = home.summary();
    assert_eq!(summary["records"], 8);
    assert_eq!(summary["converted"], 2);
    assert_eq!(summary["quarantined"], 6);
    assert_eq!(summary["blank_lines"], 1);
    assert_eq!(
        summary["records"].as_u64().unwrap(),
        summary["converted"].as_u64().unwrap() + summary["quarantined"].as_u64().unwrap()
    );
    assert_json_eq(
        &summary["quarantine_reasons"],
        &json!({"bad_message": 2, "empty_messages": 1, "invalid_json": 2, "no_messages": 1}),
    );
    assert!(summary["damaged_files"].as_array().unwrap().is_empty());
}

#[test]
fn json_array_document_quarantines_bad_elements_with_their_element_index() {
    let wd = Workdir::new("json_bad_elements");
    let doc =
        "[\n  1,\n  {\"messages\": [{\"role\": \"user\", \"content\": \"ok\"}]},\n  \"s\"\n]\n";
    wd.create("mixed.json", doc);
    let s_at = doc.find("\"s\"").unwrap();
    let home = wd.convert("mixed.json", "home", &[], 1);
    assert_body(&home.single_rollout(), body![user_turn("ok")]);
    assert_json_eq(
        &Value::Array(home.quarantine()),
        &json!([
            {"source": "mixed.json", "line": 2, "byte_offset": 4, "element": 0,
             "class": "not_a_record",
             "reason": "mixed.json:2 (byte 4, element 0): record is a JSON number, not an object or a list of messages",
             "record": "1"},
            {"source": "mixed.json", "line": 4, "byte_offset": s_at, "element": 2,
             "class": "not_a_record",
             "reason": format!("mixed.json:4 (byte {s_at}, element 2): record is a JSON string, not an object or a list of messages"),
             "record": "\"s\""}
        ]),
    );
    let summary = home.summary();
    assert_eq!(
        (
            &summary["records"],
            &summary["converted"],
            &summary["quarantined"]
        ),
        (&json!(3), &json!(1), &json!(2))
    );
}

#[test]
fn cut_first_line_then_truncated_zstd_keeps_records_before_the_damage() {
    // An archive split by size starts with the tail of a cut line, and the part is damaged.
    // Regression: the bad first line made the whole file be read as one JSON document, and
    // the damage then turned every good record into one truncated record.
    let wd = Workdir::new("cut_first_line");
    let mut lines = vec![r#"ntent":"tail of a line cut by split"}]}"#.to_string()];
    lines.extend(varied_lines(2000));
    let plain = lines.join("\n") + "\n";
    let compressed = zstd::stream::encode_all(plain.as_bytes(), 1).unwrap();
    wd.create("part-2.jsonl.zst", &compressed[..compressed.len() / 2]);
    let home = wd.convert("part-2.jsonl.zst", "home", &[], 1);
    let summary = home.summary();
    let damage_line = summary["damaged_files"][0]["line"].as_u64().unwrap() as usize;
    assert!(damage_line > 100, "{summary:#}");
    // Lines 2 .. damage_line-1 converted; line 1 and the cut line quarantined.
    assert_eq!(home.rollouts().len(), damage_line - 2);
    assert_eq!(summary["converted"], json!(damage_line - 2));
    let quarantine = home.quarantine();
    let classes: Vec<(Value, Value)> = quarantine
        .iter()
        .map(|q| (q["line"].clone(), q["class"].clone()))
        .collect();
    assert_eq!(
        classes,
        vec![
            (json!(1), json!("invalid_json")),
            (json!(damage_line), json!("truncated"))
        ]
    );
    assert_eq!(quarantine[0]["record"], lines[0].as_str());
    assert_eq!(summary["records"], json!(damage_line));
}

#[test]
fn truncated_first_record_then_truncated_zstd_keeps_records_before_the_damage() {
    // The first line is a record cut at its end (it starts like a document would), and the
    // stream is damaged further on: still JSON Lines, read line by line.
    let wd = Workdir::new("truncated_first_record");
    let mut lines = vec![r#"{"messages":[{"role":"user","content":"cut he"#.to_string()];
    lines.extend(varied_lines(2000));
    let plain = lines.join("\n") + "\n";
    let compressed = zstd::stream::encode_all(plain.as_bytes(), 1).unwrap();
    wd.create("log.jsonl.zst", &compressed[..compressed.len() / 2]);
    let home = wd.convert("log.jsonl.zst", "home", &[], 1);
    let summary = home.summary();
    let damage_line = summary["damaged_files"][0]["line"].as_u64().unwrap() as usize;
    assert!(damage_line > 100, "{summary:#}");
    assert_eq!(summary["converted"], json!(damage_line - 2));
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 2, "{quarantine:#?}");
    assert_eq!(quarantine[0]["line"], 1);
    assert_eq!(quarantine[0]["class"], "invalid_json");
    assert_eq!(quarantine[0]["record"], lines[0].as_str());
    assert_eq!(quarantine[1]["line"], damage_line);
    assert_eq!(quarantine[1]["class"], "truncated");
}

#[test]
fn truncated_zstd_json_document_is_one_truncated_record() {
    let wd = Workdir::new("truncated_document");
    let messages: Vec<Value> = varied_lines(1500)
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["messages"][0].clone())
        .collect();
    let doc = serde_json::to_string_pretty(&json!({"messages": messages})).unwrap();
    let compressed = zstd::stream::encode_all(doc.as_bytes(), 1).unwrap();
    wd.create("big.json.zst", &compressed[..compressed.len() / 2]);
    let home = wd.convert("big.json.zst", "home", &[], 1);
    assert!(home.rollouts().is_empty());
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1);
    assert_eq!(
        (
            &quarantine[0]["line"],
            &quarantine[0]["byte_offset"],
            &quarantine[0]["class"]
        ),
        (&json!(1), &json!(0), &json!("truncated"))
    );
    // The record is the document as far as it could be read, byte for byte.
    let partial = quarantine[0]["record"].as_str().unwrap();
    assert!(partial.len() > 1000 && doc.starts_with(partial));
    let summary = home.summary();
    assert_eq!(summary["damaged_files"].as_array().unwrap().len(), 1);
    assert_eq!(
        (&summary["records"], &summary["quarantined"]),
        (&json!(1), &json!(1))
    );
}

#[test]
fn truncated_gzip_keeps_records_before_the_damage() {
    let wd = Workdir::new("truncated_gzip");
    let lines = varied_lines(3000);
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder
        .write_all((lines.join("\n") + "\n").as_bytes())
        .unwrap();
    let gz = encoder.finish().unwrap();
    wd.create("old.jsonl.gz", &gz[..gz.len() / 2]);
    let home = wd.convert("old.jsonl.gz", "home", &[], 1);
    let summary = home.summary();
    let damage = &summary["damaged_files"][0];
    assert_eq!(damage["file"], "old.jsonl.gz");
    let damage_line = damage["line"].as_u64().unwrap() as usize;
    assert!(damage_line > 100, "{summary:#}");
    assert_eq!(summary["converted"], json!(damage_line - 1));
    assert_eq!(
        summary["records"].as_u64().unwrap(),
        summary["converted"].as_u64().unwrap() + summary["quarantined"].as_u64().unwrap()
    );
}

#[test]
fn invalid_utf8_is_replaced_in_good_records_and_kept_as_base64_in_quarantine() {
    let wd = Workdir::new("invalid_utf8");
    let good = b"{\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9 latin-1\"}]}";
    let bad = b"not json \xff\xfe";
    let mut bytes = good.to_vec();
    bytes.push(b'\n');
    bytes.extend_from_slice(bad);
    bytes.push(b'\n');
    wd.create("in.jsonl", &bytes);
    let home = wd.convert("in.jsonl", "home", &[], 1);
    assert_body(
        &home.single_rollout(),
        body![user_turn("caf\u{FFFD} latin-1")],
    );
    assert_json_eq(
        &home.decisions(),
        &json!([{"rule": "policy.invalid_unicode", "action": "unicode_repaired", "count": 1}]),
    );
    // The bad line is not UTF-8: kept byte for byte as base64.
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1);
    assert_eq!(quarantine[0]["line"], 2);
    assert!(quarantine[0].get("record").is_none());
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(quarantine[0]["record_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(raw, bad);
}

#[test]
fn role_aliases_are_applied_and_audited() {
    let wd = Workdir::new("role_aliases");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "human", "content": "hello"},
        {"role": "gpt", "content": "hi there"}
    ]}));
    assert_body(
        &rollout,
        body![user_turn("hello"), assistant_turn("hi there", None)],
    );
    // Regression: the renaming was silent (no decision in the audit).
    assert_json_eq(
        &home.decisions(),
        &json!([
            {"message": 0, "rule": "input.role_aliases", "action": "role_aliased",
             "from": "human", "to": "user"},
            {"message": 1, "rule": "input.role_aliases", "action": "role_aliased",
             "from": "gpt", "to": "assistant"}
        ]),
    );
    assert_eq!(
        home.summary()["actions"],
        json!({"role_aliased": 2, "session_defaulted": 3})
    );
}

#[test]
fn consecutive_user_messages_and_no_user_message_at_all() {
    let wd = Workdir::new("user_runs");
    wd.create_jsonl(
        "in.jsonl",
        &[
            json!({"messages": [
                {"role": "user", "content": "first"},
                {"role": "user", "content": "second"},
                {"role": "assistant", "content": "both read"}
            ]}),
            json!({"messages": [
                {"role": "system", "content": "narrator"},
                {"role": "assistant", "content": "a monologue"}
            ]}),
        ],
    );
    let home = wd.convert("in.jsonl", "home", &[], 0);
    let rollouts = home.all_rollouts();
    assert_eq!(rollouts.len(), 2);
    let by_line: Vec<Vec<Value>> = home
        .conversations()
        .iter()
        .map(|c| {
            let path = home.root.join(c["path"].as_str().unwrap());
            Rollout::read(&path).body()
        })
        .collect();
    // Each user message is its own turn, never merged.
    assert_eq!(
        by_line[0],
        body![
            user_turn("first"),
            user_turn("second"),
            assistant_turn("both read", None)
        ]
    );
    assert_eq!(by_line[1], body![assistant_turn("a monologue", None)]);
}

#[test]
fn context_block_before_the_system_prompt_does_not_take_its_base_instructions_slot() {
    let wd = Workdir::new("context_before_system_prompt");
    let env = "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>";
    let (_home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "system", "content": env},
        {"role": "system", "content": ""},
        {"role": "system", "content": "You are Codex."},
        {"role": "system", "content": "Prefer short answers."},
        {"role": "user", "content": "hi"}
    ]}));
    assert_eq!(
        rollout.meta()["base_instructions"]["text"],
        "You are Codex."
    );
    assert_body(
        &rollout,
        body![
            item(json!({"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": env}]})),
            item(json!({"type": "message", "role": "developer",
                        "content": [{"type": "input_text", "text": "Prefer short answers."}]})),
            user_turn("hi"),
        ],
    );
}

#[test]
fn top_level_choices_reply_is_appended_as_the_final_answer() {
    let wd = Workdir::new("choices_reply");
    let (_home, rollout) = wd.convert_record(json!({
        "messages": [{"role": "user", "content": "2+2?"}],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}]
    }));
    let body = rollout.body();
    let last_item = body
        .iter()
        .rev()
        .find(|l| l["type"] == "response_item")
        .unwrap();
    assert_eq!(
        last_item["payload"],
        json!({"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "4"}], "phase": "final_answer"})
    );
}

/// Whether a raw record holds a conversation at one of the shapes the corpora README names,
/// judged here independently of the converter.
fn holds_conversation(record: &Value) -> bool {
    let non_empty = |v: Option<&Value>| match v {
        Some(Value::Array(a)) => a.iter().any(|m| match m {
            Value::Array(turn) => !turn.is_empty(),
            _ => true,
        }),
        Some(Value::String(s)) => !s.is_empty(),
        _ => false,
    };
    non_empty(record.get("messages"))
        || non_empty(record.pointer("/body/messages"))
        || non_empty(record.get("input"))
        || non_empty(record.get("history"))
        || non_empty(record.get("question"))
        || non_empty(
            record
                .pointer("/answer_generation/train_messages")
                .and_then(Value::as_array)
                .and_then(|runs| runs.last()),
        )
}

/// Issue 2, must show 2: every corpora record that holds a conversation converts, the others
/// are quarantined with a reason, and the counts add up to the records read.
#[test]
fn corpora_sets_convert_every_conversation_and_quarantine_the_rest() {
    let corpora = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpora");
    // (set, exit code, quarantine class expected)
    let sets: [(&str, i32, Option<&str>); 5] = [
        ("toolbench", 1, Some("no_messages")),
        ("swe-agent", 0, None),
        // The few-shot `sample` files hold their messages at `sample`: found by shape.
        ("openai-evals", 0, None),
        ("bfcl", 0, None),
        // Codex's own rollouts: read by the codex format (issue 60).
        ("codex-rollouts", 0, None),
    ];
    for (set, code, class) in sets {
        let wd = Workdir::new(&format!("corpora_{set}"));
        let input = format!("{corpora}/{set}");
        let home = wd.convert(&input, "home", &[], code);
        let summary = home.summary();
        let n = |k: &str| summary[k].as_u64().unwrap_or(0);
        // A Codex rollout is one conversation over many lines: the others are merged into it
        // or dropped by rule.
        let dropped: u64 = summary["records_dropped"]
            .as_object()
            .map_or(0, |d| d.values().filter_map(Value::as_u64).sum());
        assert_eq!(
            n("records"),
            n("converted") + n("quarantined") + n("joined") + n("records_merged") + dropped,
            "{set}: {summary}"
        );
        assert!(n("converted") + n("quarantined") > 0, "{set}");
        let quarantine = home.quarantine();
        assert_eq!(quarantine.len() as u64, n("quarantined"), "{set}");
        for entry in &quarantine {
            let at = format!("{set}: {} line {}", entry["source"], entry["line"]);
            assert_eq!(entry["class"].as_str(), class, "{at}: {}", entry["reason"]);
            assert!(!entry["reason"].as_str().unwrap().is_empty(), "{at}");
            let record: Value = serde_json::from_str(entry["record"].as_str().unwrap()).unwrap();
            assert!(
                !holds_conversation(&record),
                "{at}: a record that holds a conversation was quarantined: {}",
                entry["reason"]
            );
        }
        // Every converted conversation passes the validator.
        if n("converted") > 0 {
            let run = wd.run(&["validate", "home/sessions"]);
            run.expect_code(0);
        }
    }
}

#[test]
fn assistant_only_fields_on_other_roles_are_dropped_with_a_decision() {
    let wd = Workdir::new("assistant_fields_elsewhere");
    let (home, rollout) = wd.convert_record(json!({"messages": [
        {"role": "user", "content": "hi", "reasoning_content": "why", "refusal": "no",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "assistant", "content": "hello"}
    ]}));
    assert_body(
        &rollout,
        body![user_turn("hi"), assistant_turn("hello", None)],
    );
    let decisions = home.decisions();
    let dropped: Vec<&str> = decisions
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["action"] == "field_dropped")
        .map(|d| d["field"].as_str().unwrap())
        .collect();
    assert_eq!(dropped, ["reasoning", "refusal", "tool_calls"]);
    let account = &home.conversations()[0]["account"];
    assert_eq!(account["bytes_dropped"], 3 + 2 + 2);
}
