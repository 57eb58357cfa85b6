//! `rollover validate` against hand-written rollouts: one test per broken invariant (each file
//! breaks exactly one, and the report must name that invariant and that line), the spec's
//! minimal rollout passing, compressed files, a Codex home walked, and the real Codex rollout
//! in the shared corpora.
//!
//! Every test runs the real binary in its own temporary folder; on a failed expectation the
//! command, its status, stdout and stderr are printed.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::Workdir;

const UUID: &str = "0199a213-81c0-7800-8aa1-bbab2a035a53";
const FILE_NAME: &str = "rollout-2025-10-01T12-00-00-0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl";

/// The verified minimal rollout of codex-target.md section 8, one line per entry.
const MINIMAL: [&str; 7] = [
    r#"{"timestamp":"2025-10-01T12:00:00.000Z","type":"session_meta","payload":{"id":"0199a213-81c0-7800-8aa1-bbab2a035a53","timestamp":"2025-10-01T12:00:00.000Z","cwd":"/abs/project","originator":"rollover","cli_version":"0.169.0","source":"cli","base_instructions":{"text":"<imported system prompt>"}}}"#,
    r#"{"timestamp":"2025-10-01T12:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"What files are here?"}]}}"#,
    r#"{"timestamp":"2025-10-01T12:00:01.000Z","type":"event_msg","payload":{"type":"user_message","message":"What files are here?"}}"#,
    r#"{"timestamp":"2025-10-01T12:00:02.000Z","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_abc123"}}"#,
    r#"{"timestamp":"2025-10-01T12:00:03.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"call_abc123","output":"README.md\nsrc"}}"#,
    r#"{"timestamp":"2025-10-01T12:00:04.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"There is README.md and src/."}],"phase":"final_answer"}}"#,
    r#"{"timestamp":"2025-10-01T12:00:04.000Z","type":"event_msg","payload":{"type":"agent_message","message":"There is README.md and src/.","phase":"final_answer"}}"#,
];

/// What one `validate --json` run said.
struct Run {
    code: i32,
    report: Value,
    shown: String,
}

/// `rollover validate --json PATHS...`, run in the work folder.
fn validate(work: &Workdir, paths: &[&Path]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rollover"));
    cmd.current_dir(work.root()).arg("validate").arg("--json");
    cmd.args(paths);
    let out = cmd.output().expect("run rollover");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let shown = format!(
        "command: {cmd:?}\nstatus: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal\n{shown}"));
    let report = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not a JSON report ({e})\n{shown}"));
    Run {
        code,
        report,
        shown,
    }
}

impl Run {
    /// The (invariant, line) pairs of the only file in the report.
    fn violations(&self) -> Vec<(String, u64)> {
        let reports = self.report["reports"].as_array().expect("reports");
        assert_eq!(reports.len(), 1, "one file expected\n{}", self.shown);
        reports[0]["violations"]
            .as_array()
            .expect("violations")
            .iter()
            .map(|v| {
                (
                    v["invariant"].as_str().expect("invariant").to_string(),
                    v["line"].as_u64().expect("line"),
                )
            })
            .collect()
    }
}

/// The minimal rollout with `edit` applied to its lines, as file bytes.
fn rollout(edit: impl FnOnce(&mut Vec<String>)) -> Vec<u8> {
    let mut lines: Vec<String> = MINIMAL.iter().map(|l| l.to_string()).collect();
    edit(&mut lines);
    let mut text = lines.join("\n");
    text.push('\n');
    text.into_bytes()
}

/// A response_item line at the minimal rollout's last timestamp.
fn item(payload: Value) -> String {
    json!({"timestamp": "2025-10-01T12:00:04.000Z", "type": "response_item", "payload": payload})
        .to_string()
}

/// Inserts a response_item right after session_meta, at the first line's timestamp (so that
/// timestamps stay non-decreasing and only the intended invariant breaks).
fn insert_after_meta(lines: &mut Vec<String>, payload: Value) {
    lines.insert(1, item(payload).replace("12:00:04", "12:00:00"));
}

/// An event_msg line at the minimal rollout's last timestamp.
fn event(payload: Value) -> String {
    json!({"timestamp": "2025-10-01T12:00:04.000Z", "type": "event_msg", "payload": payload})
        .to_string()
}

/// A real user message and its `user_message` event.
fn push_user_turn(lines: &mut Vec<String>, text: &str) {
    lines.push(item(user(text)));
    lines.push(event(json!({"type": "user_message", "message": text})));
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// Parses line `n` (1-based) of `lines`, lets `edit` change it, writes it back.
fn edit_line(lines: &mut [String], n: usize, edit: impl FnOnce(&mut Value)) {
    let mut value: Value = serde_json::from_str(&lines[n - 1]).expect("a JSON line");
    edit(&mut value);
    lines[n - 1] = value.to_string();
}

/// Writes `bytes` under the proper rollout name, validates it, and checks the exit code 1 and
/// that the violations are exactly `expected`.
fn assert_breaks(bytes: &[u8], expected: &[(&str, u64)]) -> Run {
    let work = Workdir::new("validate");
    let path = work.create(FILE_NAME, bytes);
    let run = validate(&work, &[&path]);
    let mut got = run.violations();
    got.sort();
    let mut want: Vec<(String, u64)> = expected.iter().map(|(i, l)| (i.to_string(), *l)).collect();
    want.sort();
    assert_eq!(got, want, "\n{}", run.shown);
    assert_eq!(run.code, 1, "\n{}", run.shown);
    assert_eq!(run.report["failed"], 1, "\n{}", run.shown);
    assert_eq!(run.report["reports"][0]["ok"], false, "\n{}", run.shown);
    run
}

// --- The minimal rollout passes -------------------------------------------------------------

#[test]
fn minimal_rollout_passes() {
    let work = Workdir::new("validate");
    let path = work.create(&format!("sessions/2025/10/01/{FILE_NAME}"), rollout(|_| {}));
    let run = validate(&work, &[&path]);
    assert_eq!(
        run.violations(),
        Vec::<(String, u64)>::new(),
        "\n{}",
        run.shown
    );
    assert_eq!(run.code, 0, "\n{}", run.shown);
    assert_eq!(
        (&run.report["files"], &run.report["passed"]),
        (&json!(1), &json!(1))
    );
}

// --- 1. session_meta -----------------------------------------------------------------------

#[test]
fn session_meta_missing_cwd() {
    let bytes = rollout(|l| {
        edit_line(l, 1, |v| {
            v["payload"].as_object_mut().expect("payload").remove("cwd");
        })
    });
    assert_breaks(&bytes, &[("session_meta", 1)]);
}

#[test]
fn session_meta_id_differs_from_file_name() {
    let bytes = rollout(|l| {
        edit_line(l, 1, |v| {
            v["payload"]["id"] = json!("0199a213-81c0-7800-8aa1-000000000000");
        })
    });
    let run = assert_breaks(&bytes, &[("session_meta", 1)]);
    let message = run.report["reports"][0]["violations"][0]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains(UUID),
        "the file name's UUID is named\n{}",
        run.shown
    );
}

#[test]
fn session_meta_id_not_a_uuid() {
    // Checked on a file named without a UUID, so only "not a UUID" can fire.
    let work = Workdir::new("validate");
    let bytes = rollout(|l| edit_line(l, 1, |v| v["payload"]["id"] = json!("session-1")));
    let path = work.create("session.jsonl", &bytes);
    let run = validate(&work, &[&path]);
    assert_eq!(
        run.violations(),
        vec![("session_meta".to_string(), 1)],
        "\n{}",
        run.shown
    );
    assert_eq!(run.code, 1);
}

#[test]
fn session_meta_twice() {
    let bytes = rollout(|l| {
        let mut second = l[0].clone();
        second = second.replace("12:00:00.000Z\",\"type", "12:00:04.000Z\",\"type");
        l.push(second);
    });
    assert_breaks(&bytes, &[("session_meta", 8)]);
}

#[test]
fn session_meta_not_first() {
    let bytes = rollout(|l| {
        l.insert(
            0,
            event(json!({"type": "task_started"})).replace("12:00:04", "12:00:00"),
        );
    });
    assert_breaks(&bytes, &[("session_meta", 1)]);
}

// --- 2. line format ------------------------------------------------------------------------

#[test]
fn byte_order_mark() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(rollout(|_| {}));
    assert_breaks(&bytes, &[("line_format", 1)]);
}

#[test]
fn timestamps_going_backwards() {
    let bytes = rollout(|l| {
        edit_line(l, 4, |v| v["timestamp"] = json!("2025-10-01T11:59:00.000Z"));
    });
    assert_breaks(&bytes, &[("line_format", 4)]);
}

#[test]
fn timestamp_not_rfc3339() {
    let bytes = rollout(|l| edit_line(l, 5, |v| v["timestamp"] = json!("yesterday")));
    assert_breaks(&bytes, &[("line_format", 5)]);
}

#[test]
fn invalid_utf8() {
    let mut bytes = rollout(|l| l[5] = l[5].replace("There is", "There\u{1}is"));
    // Replace the U+0001 placeholder (one byte) with a lone continuation byte.
    let at = bytes.iter().position(|b| *b == 1).expect("placeholder");
    bytes[at] = 0x80;
    assert_breaks(&bytes, &[("line_format", 6)]);
}

#[test]
fn line_not_json() {
    let bytes = rollout(|l| l.insert(3, "not json at all".to_string()));
    assert_breaks(&bytes, &[("line_format", 4)]);
}

#[test]
fn line_cut_after_a_backslash() {
    // Regression: the lone-surrogate scan sliced past the end here and panicked.
    let bytes =
        rollout(|l| l.push(r#"{"timestamp":"2025-10-01T12:00:04.000Z","a":"x\"#.to_string()));
    assert_breaks(&bytes, &[("line_format", 8)]);
}

#[test]
fn line_nested_too_deep() {
    // Regression: simd-json recursed once per level and overflowed the stack; Codex's
    // serde_json stops at 128 levels, so the line is lost there.
    let n = 100_000;
    let bytes = rollout(|l| {
        l.push(format!(
            r#"{{"timestamp":"2025-10-01T12:00:04.000Z","type":"event_msg","payload":{{"type":"x","v":{}{}}}}}"#,
            "[".repeat(n),
            "]".repeat(n)
        ))
    });
    assert_breaks(&bytes, &[("line_format", 8)]);
}

#[test]
fn crlf_line_ending() {
    let bytes = rollout(|l| l[2].push('\r'));
    assert_breaks(&bytes, &[("line_format", 3)]);
}

#[test]
fn unknown_line_type() {
    let bytes = rollout(|l| edit_line(l, 7, |v| v["type"] = json!("event")));
    // The agent_message event is now unknown, so the assistant message misses its event too:
    // that second finding is the point of UI parity, not noise.
    assert_breaks(&bytes, &[("line_format", 7), ("ui_parity", 6)]);
}

// --- 3. roles ------------------------------------------------------------------------------

#[test]
fn tool_role_message() {
    let bytes = rollout(|l| {
        l.push(item(json!({
            "type": "message", "role": "tool",
            "content": [{"type": "input_text", "text": "README.md"}]
        })))
    });
    assert_breaks(&bytes, &[("roles", 8)]);
}

#[test]
fn system_role_message() {
    let bytes = rollout(|l| {
        insert_after_meta(
            l,
            json!({
                "type": "message", "role": "system",
                "content": [{"type": "input_text", "text": "be brief"}]
            }),
        )
    });
    assert_breaks(&bytes, &[("roles", 2)]);
}

// --- 4. content types ----------------------------------------------------------------------

#[test]
fn user_content_output_text() {
    let bytes = rollout(|l| {
        edit_line(l, 2, |v| {
            v["payload"]["content"][0]["type"] = json!("output_text")
        })
    });
    assert_breaks(&bytes, &[("content_types", 2)]);
}

#[test]
fn assistant_content_input_text() {
    let bytes = rollout(|l| {
        edit_line(l, 6, |v| {
            v["payload"]["content"][0]["type"] = json!("input_text")
        })
    });
    assert_breaks(&bytes, &[("content_types", 6)]);
}

#[test]
fn assistant_refusal_content() {
    let bytes = rollout(|l| {
        edit_line(l, 6, |v| {
            v["payload"]["content"] = json!([{"type": "refusal", "refusal": "no"}]);
        });
        // The event shows the message's text, which is now none (UI parity compares texts).
        edit_line(l, 7, |v| v["payload"]["message"] = json!(""));
    });
    assert_breaks(&bytes, &[("content_types", 6)]);
}

#[test]
fn message_content_a_string() {
    let bytes = rollout(|l| {
        edit_line(l, 6, |v| {
            v["payload"]["content"] = json!("There is README.md")
        })
    });
    assert_breaks(&bytes, &[("content_types", 6)]);
}

// --- 5. phase ------------------------------------------------------------------------------

#[test]
fn phase_on_user_message() {
    let bytes = rollout(|l| edit_line(l, 2, |v| v["payload"]["phase"] = json!("final_answer")));
    assert_breaks(&bytes, &[("phase", 2)]);
}

#[test]
fn unknown_phase() {
    let bytes = rollout(|l| edit_line(l, 6, |v| v["payload"]["phase"] = json!("final")));
    assert_breaks(&bytes, &[("phase", 6)]);
}

// --- 6. call pairing -----------------------------------------------------------------------

#[test]
fn call_without_output() {
    let bytes = rollout(|l| {
        l.remove(4);
    });
    assert_breaks(&bytes, &[("call_pairing", 4)]);
}

#[test]
fn output_without_call() {
    let bytes = rollout(|l| {
        l.remove(3);
    });
    assert_breaks(&bytes, &[("call_pairing", 4)]);
}

#[test]
fn output_before_its_call() {
    let bytes = rollout(|l| {
        l.swap(3, 4);
        // Keep the timestamps non-decreasing, so only the order is wrong.
        edit_line(l, 4, |v| v["timestamp"] = json!("2025-10-01T12:00:02.000Z"));
    });
    // The output has no earlier call (line 4), and the call then has none after it (line 5).
    assert_breaks(&bytes, &[("call_pairing", 4), ("call_pairing", 5)]);
}

#[test]
fn same_call_id_twice() {
    let bytes = rollout(|l| {
        let call = l[3].replace("12:00:02", "12:00:04");
        let output = l[4].replace("12:00:03", "12:00:04");
        l.push(call);
        l.push(output);
    });
    assert_breaks(&bytes, &[("call_pairing", 8)]);
}

#[test]
fn second_output_for_one_call() {
    let bytes = rollout(|l| {
        let output = l[4].replace("12:00:03", "12:00:04");
        l.push(output);
    });
    assert_breaks(&bytes, &[("call_pairing", 8)]);
}

// --- 7. call shapes ------------------------------------------------------------------------

#[test]
fn output_as_content_success_object() {
    let bytes = rollout(|l| {
        edit_line(l, 5, |v| {
            v["payload"]["output"] = json!({"content": "README.md\nsrc", "success": true});
        })
    });
    assert_breaks(&bytes, &[("call_shapes", 5)]);
}

#[test]
fn arguments_as_object() {
    let bytes = rollout(|l| {
        edit_line(l, 4, |v| {
            v["payload"]["arguments"] = json!({"command": ["ls"]})
        });
    });
    assert_breaks(&bytes, &[("call_shapes", 4)]);
}

// --- 8. reasoning placement ----------------------------------------------------------------

#[test]
fn reasoning_followed_by_user_message() {
    let bytes = rollout(|l| {
        l.push(item(json!({
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "thinking"}],
            "content": null,
            "encrypted_content": null
        })));
        push_user_turn(l, "and now?");
    });
    assert_breaks(&bytes, &[("reasoning_placement", 8)]);
}

#[test]
fn reasoning_before_its_message_passes() {
    let bytes = rollout(|l| {
        l.insert(
            5,
            item(json!({
                "type": "reasoning",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "list the folder"}],
                "encrypted_content": null
            }))
            .replace("12:00:04", "12:00:03"),
        );
    });
    let work = Workdir::new("validate");
    let path = work.create(FILE_NAME, &bytes);
    let run = validate(&work, &[&path]);
    assert_eq!(
        run.violations(),
        Vec::<(String, u64)>::new(),
        "\n{}",
        run.shown
    );
    assert_eq!(run.code, 0);
}

// --- 9. contextual user --------------------------------------------------------------------

#[test]
fn user_message_mixing_fragment_and_real_text() {
    let bytes = rollout(|l| {
        l.insert(
            1,
            json!({
                "timestamp": "2025-10-01T12:00:00.000Z", "type": "response_item",
                "payload": {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "<environment_context>\n  <cwd>/abs/project</cwd>\n</environment_context>"},
                    {"type": "input_text", "text": "also, hello"}
                ]}
            })
            .to_string(),
        )
    });
    assert_breaks(&bytes, &[("contextual_user", 2)]);
}

#[test]
fn real_user_text_that_looks_like_a_fragment() {
    // A user_message event right after it says it was real input; Codex would hide it.
    let bytes = rollout(|l| {
        let text = "<skill>do the thing</skill>";
        l.push(item(user(text)));
        l.push(event(json!({"type": "user_message", "message": text})));
    });
    assert_breaks(&bytes, &[("contextual_user", 8)]);
}

#[test]
fn contextual_user_message_needs_no_event() {
    let bytes = rollout(|l| {
        insert_after_meta(
            l,
            user("<environment_context>\n  <cwd>/abs/project</cwd>\n</environment_context>"),
        );
    });
    let work = Workdir::new("validate");
    let path = work.create(FILE_NAME, &bytes);
    let run = validate(&work, &[&path]);
    assert_eq!(
        run.violations(),
        Vec::<(String, u64)>::new(),
        "\n{}",
        run.shown
    );
}

// --- 10. base instructions -----------------------------------------------------------------

#[test]
fn base_instructions_repeated_as_developer_message() {
    let bytes = rollout(|l| {
        insert_after_meta(
            l,
            json!({
                "type": "message", "role": "developer",
                "content": [{"type": "input_text", "text": "<imported system prompt>"}]
            }),
        )
    });
    assert_breaks(&bytes, &[("base_instructions", 2)]);
}

#[test]
fn empty_base_instructions() {
    let bytes = rollout(|l| {
        edit_line(l, 1, |v| {
            v["payload"]["base_instructions"]["text"] = json!("")
        })
    });
    assert_breaks(&bytes, &[("base_instructions", 1)]);
}

// --- 11. UI parity -------------------------------------------------------------------------

#[test]
fn user_message_without_user_message_event() {
    let bytes = rollout(|l| {
        l.remove(2);
    });
    assert_breaks(&bytes, &[("ui_parity", 2)]);
}

#[test]
fn assistant_message_without_agent_message_event() {
    let bytes = rollout(|l| {
        l.remove(6);
    });
    assert_breaks(&bytes, &[("ui_parity", 6)]);
}

// --- Files and folders ---------------------------------------------------------------------

#[test]
fn zstd_rollout_passes() {
    let work = Workdir::new("validate");
    let bytes = zstd::encode_all(&rollout(|_| {})[..], 3).expect("zstd");
    let path = work.create(&format!("{FILE_NAME}.zst"), &bytes);
    let run = validate(&work, &[&path]);
    assert_eq!(
        run.violations(),
        Vec::<(String, u64)>::new(),
        "\n{}",
        run.shown
    );
    assert_eq!(run.code, 0, "\n{}", run.shown);
}

#[test]
fn zstd_rollout_is_checked_after_decompression() {
    let work = Workdir::new("validate");
    let bad = rollout(|l| edit_line(l, 2, |v| v["payload"]["phase"] = json!("commentary")));
    let bytes = zstd::encode_all(&bad[..], 3).expect("zstd");
    let path = work.create(&format!("{FILE_NAME}.zst"), &bytes);
    let run = validate(&work, &[&path]);
    assert_eq!(
        run.violations(),
        vec![("phase".to_string(), 2)],
        "\n{}",
        run.shown
    );
    assert_eq!(run.code, 1, "\n{}", run.shown);
}

#[test]
fn codex_home_is_walked() {
    let work = Workdir::new("validate");
    let other = "0199a213-81c0-7800-8aa1-bbab2a035a54";
    let good = rollout(|_| {});
    let bad = rollout(|l| {
        edit_line(l, 1, |v| v["payload"]["id"] = json!(other));
        l.remove(2);
    });
    work.create(&format!("home/sessions/2025/10/01/{FILE_NAME}"), &good);
    work.create(
        &format!("home/sessions/2025/10/02/rollout-2025-10-02T12-00-00-{other}.jsonl.zst"),
        zstd::encode_all(&bad[..], 3).expect("zstd"),
    );
    // Not rollouts: never read.
    work.create("home/config.toml", b"model = \"x\"\n");
    work.create("home/rollover/summary.json", b"{}");
    work.create("home/sessions/2025/10/01/notes.jsonl", b"not json\n");

    let run = validate(&work, &[&work.path("home")]);
    assert_eq!(run.code, 1, "\n{}", run.shown);
    assert_eq!(
        (
            &run.report["files"],
            &run.report["passed"],
            &run.report["failed"]
        ),
        (&json!(2), &json!(1), &json!(1)),
        "\n{}",
        run.shown
    );
    let reports = run.report["reports"].as_array().expect("reports");
    let failed: Vec<&Value> = reports.iter().filter(|r| r["ok"] == false).collect();
    assert!(
        failed[0]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with(&format!("{other}.jsonl.zst"))),
        "\n{}",
        run.shown
    );
    assert_eq!(failed[0]["violations"][0]["invariant"], "ui_parity");
    assert_eq!(failed[0]["violations"][0]["line"], 2);

    // The same home with the bad file gone passes.
    std::fs::remove_dir_all(work.path("home/sessions/2025/10/02")).expect("remove");
    let run = validate(&work, &[&work.path("home")]);
    assert_eq!(run.code, 0, "\n{}", run.shown);
    assert_eq!(run.report["files"], 1, "\n{}", run.shown);
}

#[test]
fn missing_path_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_rollover"))
        .args(["validate", "/nonexistent/rollover-test-path"])
        .output()
        .expect("run rollover");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "rollover: cannot read /nonexistent/rollover-test-path (check the path): No such file or directory (os error 2)"
    );
}

#[test]
fn shared_codex_rollouts_pass() {
    const FOLDER: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/corpora/codex-rollouts"
    );
    const FILE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/corpora/codex-rollouts/kvsankar-agent-history/session-01.jsonl"
    );
    let work = Workdir::new("validate");
    let run = validate(&work, &[Path::new(FOLDER)]);
    assert_eq!(run.code, 0, "\n{}", run.shown);
    assert_eq!(run.report["failed"], 0, "\n{}", run.shown);
    // The fixture is not named `rollout-*.jsonl`, so a folder walk skips it: name it directly
    // too, so the real Codex file is actually checked.
    let run = validate(&work, &[Path::new(FILE)]);
    assert_eq!(
        run.violations(),
        Vec::<(String, u64)>::new(),
        "\n{}",
        run.shown
    );
    assert_eq!(run.code, 0, "\n{}", run.shown);
}

#[test]
fn lone_surrogate_escape_is_reported_because_codex_would_lose_the_line() {
    let dir = Workdir::new("validate");
    let id = "0199a213-81c0-7800-8aa1-bbab2a035a53";
    let path = dir
        .root()
        .join(format!("rollout-2025-10-01T12-00-00-{id}.jsonl"));
    let text = format!(
        concat!(
            "{{\"timestamp\":\"2025-10-01T12:00:00.000Z\",\"type\":\"session_meta\",\"payload\":{{\"id\":\"{id}\",\"timestamp\":\"2025-10-01T12:00:00.000Z\",\"cwd\":\"/p\",\"originator\":\"rollover\",\"cli_version\":\"0.169.0\"}}}}\n",
            "{{\"timestamp\":\"2025-10-01T12:00:01.000Z\",\"type\":\"response_item\",\"payload\":{{\"type\":\"message\",\"role\":\"user\",\"content\":[{{\"type\":\"input_text\",\"text\":\"bad \\ud800 text\"}}]}}}}\n",
            "{{\"timestamp\":\"2025-10-01T12:00:01.000Z\",\"type\":\"event_msg\",\"payload\":{{\"type\":\"user_message\",\"message\":\"bad\"}}}}\n"
        ),
        id = id
    );
    std::fs::write(&path, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rollover"))
        .args(["validate", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let violations = &report["reports"][0]["violations"];
    assert_eq!(violations[0]["invariant"], "line_format", "{report}");
    assert_eq!(violations[0]["line"], 2, "{report}");
    assert!(
        violations[0]["message"]
            .as_str()
            .unwrap()
            .contains("lone surrogate"),
        "{report}"
    );
}

#[test]
fn corpora_codex_rollout_folder_is_checked_not_just_walked() {
    let folder = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/corpora/codex-rollouts"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rollover"))
        .args(["validate", "--json", folder])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rollouts = walkdir::WalkDir::new(folder)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .count();
    assert!(rollouts >= 2, "the corpus holds its rollouts");
    assert_eq!(report["files"], rollouts, "{report}");
    assert_eq!(report["passed"], rollouts, "{report}");
    // Both real rollouts (Codex 0.135.0's and session-migrate's 0.144.4 fixture) are named as
    // the legacy generation.
    for file in report["reports"].as_array().unwrap() {
        assert_eq!(file["generation"], "legacy", "{report}");
    }
}

#[test]
fn folder_without_rollouts_is_an_error_not_a_pass() {
    let dir = Workdir::new("validate");
    std::fs::write(dir.root().join("notes.txt"), "nothing here").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rollover"))
        .arg("validate")
        .arg(dir.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no rollout files"));
}

// --- Findings of the architecture pass ---------------------------------------------------------

/// Validates `bytes` under the proper rollout name and checks that it passes: exit 0, no
/// violation.
fn assert_passes(bytes: &[u8]) -> Run {
    let work = Workdir::new("validate");
    let path = work.create(FILE_NAME, bytes);
    let run = validate(&work, &[&path]);
    assert_eq!(
        run.violations(),
        Vec::<(String, u64)>::new(),
        "\n{}",
        run.shown
    );
    assert_eq!(run.code, 0, "\n{}", run.shown);
    run
}

fn reasoning(text: &str) -> Value {
    json!({
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}],
        "content": null,
        "encrypted_content": null
    })
}

/// Finding 1: Codex and the API write runs of reasoning items before a call or message.
#[test]
fn reasoning_run_before_its_call_passes() {
    let bytes = rollout(|l| {
        for text in ["first", "second"] {
            l.insert(3, item(reasoning(text)).replace("12:00:04", "12:00:01"));
        }
    });
    assert_passes(&bytes);
}

/// Finding 1: a run is fine, but its last item must still be followed by what it explains.
#[test]
fn reasoning_run_followed_by_user_message() {
    let bytes = rollout(|l| {
        l.push(item(reasoning("first")));
        l.push(item(reasoning("second")));
        push_user_turn(l, "and now?");
    });
    assert_breaks(&bytes, &[("reasoning_placement", 9)]);
}

/// Finding 2: an item type Codex 0.169 does not know is dropped on resume without a word.
#[test]
fn unknown_response_item_type() {
    let bytes = rollout(|l| insert_after_meta(l, json!({"type": "bogus_item", "text": "x"})));
    let run = assert_breaks(&bytes, &[("roles", 2)]);
    let message = run.report["reports"][0]["violations"][0]["message"]
        .as_str()
        .expect("message");
    assert!(message.contains("bogus_item"), "{message}");
}

/// Finding 2: `ghost_snapshot` is a legacy type Codex ignores on purpose: a warning, and the
/// file still passes.
#[test]
fn ghost_snapshot_is_a_warning_not_a_failure() {
    let bytes = rollout(|l| {
        insert_after_meta(
            l,
            json!({"type": "ghost_snapshot", "ghost_commit": {"id": "abc", "parent": null}}),
        )
    });
    let run = assert_passes(&bytes);
    let warnings = &run.report["reports"][0]["warnings"];
    assert_eq!(
        warnings.as_array().map(Vec::len),
        Some(1),
        "\n{}",
        run.shown
    );
    assert_eq!(warnings[0]["kind"], "ignored_item_type", "\n{}", run.shown);
    assert_eq!(warnings[0]["line"], 2, "\n{}", run.shown);
    assert_eq!(run.report["warnings"], 1, "\n{}", run.shown);
    assert_eq!(run.report["passed"], 1, "\n{}", run.shown);

    // The text report shows it too, and still exits 0.
    let work = Workdir::new("validate");
    let path = work.create(FILE_NAME, &bytes);
    let out = Command::new(env!("CARGO_BIN_EXE_rollover"))
        .arg("validate")
        .arg(&path)
        .output()
        .expect("run rollover");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(":2: [warning] `ghost_snapshot`"),
        "{stdout}"
    );
    assert!(stdout.contains("1 passed, 0 failed, 1 warning"), "{stdout}");
}

/// Finding 3: the UI shows the agent_message event, the model sees the item: they must agree.
#[test]
fn agent_message_text_differs_from_its_message() {
    let bytes =
        rollout(|l| edit_line(l, 7, |v| v["payload"]["message"] = json!("Something else.")));
    assert_breaks(&bytes, &[("ui_parity", 6)]);
}

#[test]
fn user_message_event_text_differs_from_its_message() {
    let bytes = rollout(|l| edit_line(l, 3, |v| v["payload"]["message"] = json!("What files?")));
    assert_breaks(&bytes, &[("ui_parity", 2)]);
}

/// Lines as Codex 0.169 appends them when it resumes a migrated rollout (taken from a real
/// `codex exec resume` in the conformance test, shortened), at `12:00:05`.
fn codex_turn(base_instructions_again: bool) -> Vec<String> {
    let ts = "2025-10-01T12:00:05.000Z";
    let line = |tag: &str, payload: Value| {
        json!({"timestamp": ts, "type": tag, "payload": payload}).to_string()
    };
    let mut lines = vec![
        line(
            "event_msg",
            json!({"type": "thread_settings_applied", "thread_id": UUID,
            "thread_settings": {"model": "gpt-fake", "approval_policy": "never"}}),
        ),
        line(
            "event_msg",
            json!({"type": "task_started", "turn_id": "t1",
            "started_at": 1_796_097_614u64, "model_context_window": 258_400}),
        ),
        line(
            "response_item",
            json!({"type": "message", "id": "msg_1", "role": "developer",
            "content": [{"type": "input_text", "text": "<permissions instructions>\nread-only\n</permissions instructions>"},
                        {"type": "input_text", "text": "<skills_instructions>\n## Skills\n</skills_instructions>"}]}),
        ),
        line(
            "response_item",
            json!({"type": "message", "id": "msg_2", "role": "user",
            "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/p</cwd>\n</environment_context>"}],
            "internal_chat_message_metadata_passthrough": {"turn_id": "t1"}}),
        ),
        line(
            "world_state",
            json!({"full": true, "state": {"agents_md": {}, "current_date": "2025-10-01"}}),
        ),
        line(
            "turn_context",
            json!({"turn_id": "t1", "cwd": "/p", "approval_policy": "never",
            "model": "gpt-fake", "sandbox_policy": {"type": "read-only"}}),
        ),
        line(
            "event_msg",
            json!({"type": "thread_settings_applied", "thread_id": UUID,
            "thread_settings": {"model": "gpt-fake"}}),
        ),
    ];
    if base_instructions_again {
        lines.push(line(
            "response_item",
            json!({"type": "message", "role": "developer",
            "content": [{"type": "input_text", "text": "<imported system prompt>"}]}),
        ));
    }
    lines.extend([
        line(
            "response_item",
            json!({"type": "message", "id": "msg_3", "role": "user",
            "content": [{"type": "input_text", "text": "please continue"}]}),
        ),
        line(
            "event_msg",
            json!({"type": "user_message", "message": "please continue",
            "images": [], "local_images": [], "text_elements": []}),
        ),
        line(
            "event_msg",
            json!({"type": "agent_message", "message": "ok", "phase": null,
            "memory_citation": null}),
        ),
        line(
            "response_item",
            json!({"type": "message", "id": "msg_4", "role": "assistant",
            "content": [{"type": "output_text", "text": "ok"}]}),
        ),
        line(
            "event_msg",
            json!({"type": "token_count", "info": null, "rate_limits": {"primary": null}}),
        ),
        line(
            "token_usage_record",
            json!({"turn_id": "t1", "usage": {"input_tokens": 10, "output_tokens": 1}}),
        ),
        line(
            "event_msg",
            json!({"type": "task_complete", "turn_id": "t1", "last_agent_message": "ok"}),
        ),
    ]);
    lines
}

/// Finding 7: what Codex 0.169 itself appends on resume passes, including the base
/// instructions again as a developer message in the turn it ran.
#[test]
fn rollout_resumed_by_codex_passes() {
    let bytes = rollout(|l| l.extend(codex_turn(true)));
    assert_passes(&bytes);
}

/// Finding 7: the base instructions as a developer message in the migrated part, before any
/// turn Codex ran, are still a duplicate, even with a Codex turn after them.
#[test]
fn base_instructions_repeated_before_a_codex_turn() {
    let bytes = rollout(|l| {
        insert_after_meta(
            l,
            json!({
                "type": "message", "role": "developer",
                "content": [{"type": "input_text", "text": "<imported system prompt>"}]
            }),
        );
        l.extend(codex_turn(false));
    });
    assert_breaks(&bytes, &[("base_instructions", 2)]);
}
