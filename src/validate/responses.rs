//! The invariants adapted to a Responses API request body (`--format responses`), checked on
//! the bytes written, read as plain JSON (never through the renderer's types).
//!
//! Kept from the rollout's: no `system` role and only known item types (3), content types by
//! role (4), `phase` only on assistant messages and only a value the API takes (5), unique call
//! ids each followed by exactly one output (6), `arguments` a string and `output` a string or
//! an array (7). Dropped by design: the session meta (a body has none: a `session_meta` or
//! event item is a violation instead), UI events (11), timestamps. Added, the API's own
//! constraints: `custom_id` a UUID, `input` a list, tools `{"type":"function"}` with a valid
//! name and object parameters, image `detail` one the API knows, Codex's Lite
//! `additional_tools` item only first.

use std::collections::HashSet;

use serde_json::Value;

use super::meta::is_uuid;
use super::{Invariant, Violation};
use crate::model::responses::TYPE_ADDITIONAL_TOOLS;

/// Item types a body may hold.
const ITEM_TYPES: [&str; 6] = [
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
];
/// Phases the public API takes (`partial_answer` is Codex's own).
const API_PHASES: [&str; 2] = ["commentary", "final_answer"];
const IMAGE_DETAILS: [&str; 4] = ["auto", "low", "high", "original"];

/// Checks one body line (bare, or a Batch API line with the body under `body`).
pub fn check_body(bytes: &[u8]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut bad = |invariant: Invariant, message: String| {
        out.push(Violation {
            invariant,
            line: 1,
            message,
        })
    };
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if trimmed.contains(&b'\n') {
        bad(Invariant::LineFormat, "a body must be one line".into());
    }
    let value: Value = match serde_json::from_slice(trimmed) {
        Ok(v) => v,
        Err(e) => {
            bad(Invariant::LineFormat, format!("not JSON: {e}"));
            return out;
        }
    };
    let custom_id = value["custom_id"].as_str();
    let body = if value.get("method").is_some() {
        if value["method"] != "POST" || value["url"] != "/v1/responses" {
            bad(
                Invariant::LineFormat,
                "a Batch API line must POST to /v1/responses".into(),
            );
        }
        &value["body"]
    } else {
        &value
    };
    if !custom_id.is_some_and(is_uuid) {
        bad(Invariant::SessionMeta, "custom_id is not a UUID".into());
    }
    for key in ["instructions", "model"] {
        if body.get(key).is_some_and(|v| !v.is_string()) {
            bad(Invariant::LineFormat, format!("`{key}` is not a string"));
        }
    }
    if let Some(tools) = body.get("tools") {
        check_tools(tools, &mut bad);
    }
    let Some(input) = body["input"].as_array() else {
        bad(Invariant::LineFormat, "`input` is not a list".into());
        return out;
    };
    check_items(input, &mut bad);
    out
}

/// The input items: known types, content by role, every call paired with one output after it.
fn check_items(input: &[Value], mut bad: impl FnMut(Invariant, String)) {
    let mut calls: HashSet<&str> = HashSet::new();
    let mut open: HashSet<&str> = HashSet::new();
    for (i, item) in input.iter().enumerate() {
        let kind = item["type"].as_str().unwrap_or("");
        if kind == TYPE_ADDITIONAL_TOOLS {
            if i != 0 || item["role"] != "developer" {
                bad(
                    Invariant::Roles,
                    format!("input[{i}]: additional_tools only first, as a developer item"),
                );
            }
            check_tools(&item["tools"], &mut bad);
            continue;
        }
        if !ITEM_TYPES.contains(&kind) {
            bad(
                Invariant::Roles,
                format!("input[{i}]: item type `{kind}` is not a Responses input item"),
            );
            continue;
        }
        match kind {
            "message" => check_message(i, item, &mut bad),
            "function_call" | "custom_tool_call" => {
                let id = item["call_id"].as_str().unwrap_or("");
                if id.is_empty() || !calls.insert(id) {
                    bad(
                        Invariant::CallPairing,
                        format!("input[{i}]: call id `{id}` missing or used before"),
                    );
                }
                open.insert(id);
                let field = if kind == "function_call" {
                    "arguments"
                } else {
                    "input"
                };
                if !item[field].is_string() {
                    bad(
                        Invariant::CallShapes,
                        format!("input[{i}]: `{field}` is not a string"),
                    );
                }
            }
            "function_call_output" | "custom_tool_call_output" => {
                let id = item["call_id"].as_str().unwrap_or("");
                if !open.remove(id) {
                    bad(
                        Invariant::CallPairing,
                        format!("input[{i}]: output for `{id}` without its call before it"),
                    );
                }
                if !(item["output"].is_string() || item["output"].is_array()) {
                    bad(
                        Invariant::CallShapes,
                        format!("input[{i}]: `output` is not a string or a list"),
                    );
                }
            }
            // A reasoning item pairs with nothing (a reasoning item was read as an output, and
            // every record with reasoning was quarantined: found by the conformance test).
            _ => {}
        }
    }
    let mut left: Vec<&str> = open.into_iter().collect();
    left.sort_unstable();
    for id in left {
        bad(Invariant::CallPairing, format!("call `{id}` has no output"));
    }
}

fn check_message(i: usize, item: &Value, bad: &mut impl FnMut(Invariant, String)) {
    let role = item["role"].as_str().unwrap_or("");
    let allowed: &[&str] = match role {
        "user" | "developer" => &["input_text", "input_image", "input_audio", "input_file"],
        "assistant" => &["output_text", "refusal"],
        other => {
            bad(
                Invariant::Roles,
                format!("input[{i}]: role `{other}` (no system role in a body)"),
            );
            return;
        }
    };
    if let Some(phase) = item.get("phase") {
        let known = phase.as_str().is_some_and(|p| API_PHASES.contains(&p));
        if role != "assistant" || !known {
            bad(
                Invariant::Phase,
                format!("input[{i}]: phase {phase} on a {role} message"),
            );
        }
    }
    for part in item["content"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let kind = part["type"].as_str().unwrap_or("");
        if !allowed.contains(&kind) {
            bad(
                Invariant::ContentTypes,
                format!("input[{i}]: `{kind}` content in a {role} message"),
            );
        }
        if let Some(detail) = part.get("detail") {
            if !detail.as_str().is_some_and(|d| IMAGE_DETAILS.contains(&d)) {
                bad(
                    Invariant::ContentTypes,
                    format!("input[{i}]: image detail {detail} the API does not take"),
                );
            }
        }
    }
}

fn check_tools(tools: &Value, bad: &mut impl FnMut(Invariant, String)) {
    let Some(tools) = tools.as_array() else {
        bad(Invariant::CallShapes, "`tools` is not a list".into());
        return;
    };
    for tool in tools {
        let name = tool["name"].as_str().unwrap_or("");
        let name_ok = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        let parameters_ok = tool.get("parameters").is_none_or(Value::is_object);
        if tool["type"] != "function" || !name_ok || !parameters_ok {
            bad(
                Invariant::CallShapes,
                format!("tool `{name}` is not a valid function definition"),
            );
        }
    }
}
