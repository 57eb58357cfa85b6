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
//!
//! One check, two readings of the body ([`Doc`]). The body is first read off simd-json's tape
//! in the thread's scratch (no `Value` built: that parse was 40 % of a small record's
//! conversion); only a body that breaks an invariant, or one the tape leaves to serde_json
//! (not JSON to simd-json, nesting past 128, a surrogate escape), is read again as a
//! `serde_json::Value`, and the violations and their messages come from that reading alone.

use rustc_hash::FxHashSet;
use serde_json::Value;
use simd_json::Node;

use super::meta::is_uuid;
use super::{Invariant, Violation};
use crate::model::responses::TYPE_ADDITIONAL_TOOLS;
use crate::model::tape::{self, TapeNode};

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
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let one_line = memchr::memchr(b'\n', trimmed).is_none();
    if one_line && clean_on_the_tape(trimmed) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut bad = |invariant: Invariant, message: &dyn Fn() -> String| {
        out.push(Violation {
            invariant,
            line: 1,
            message: message(),
        })
    };
    if !one_line {
        bad(Invariant::LineFormat, &|| "a body must be one line".into());
    }
    let value: Value = match serde_json::from_slice(trimmed) {
        Ok(v) => v,
        Err(e) => {
            bad(Invariant::LineFormat, &|| format!("not JSON: {e}"));
            return out;
        }
    };
    check(&value, &mut bad);
    out
}

/// True when the body, read off simd-json's tape, breaks no invariant. False when it breaks
/// one, and when the tape cannot answer as serde_json would: then [`check_body`] reads it
/// again as a `Value`.
fn clean_on_the_tape(body: &[u8]) -> bool {
    // simd-json reads a lone surrogate escape as U+0000 where serde_json refuses it: a body
    // with any surrogate escape is left to serde_json (the renderer writes none).
    let surrogate_escapes = |copy: &mut [u8]| {
        memchr::memmem::find_iter(copy, b"\\u")
            .filter(|&at| matches!(copy.get(at + 2), Some(b'd' | b'D')))
            .count()
    };
    tape::with_scratch(body, surrogate_escapes, |escapes, nodes| {
        let plain = |nodes: &&[Node<'_>]| tape::nests_within(nodes, tape::SERDE_JSON_LEVELS);
        let Some(nodes) = nodes.filter(|nodes| escapes == 0 && plain(nodes)) else {
            return false;
        };
        let mut clean = true;
        check(TapeNode::root(nodes), &mut |_, _| clean = false);
        clean
    })
}

/// A JSON value as the check reads it: a `serde_json::Value`, or a node of a simd-json tape.
/// Both answer alike (a later duplicate key wins; a key of a non-object is absent).
trait Doc<'a>: Copy {
    fn get(self, key: &str) -> Option<Self>;
    fn str(self) -> Option<&'a str>;
    fn list(self) -> Option<Vec<Self>>;
    fn is_string(self) -> bool;
    fn is_object(self) -> bool;
    /// The value as JSON text, for a message. Only the `Value` reading formats messages.
    fn text(self) -> String;

    /// The string at `key`, or "" (what `value[key].as_str().unwrap_or("")` gives).
    fn str_at(self, key: &str) -> &'a str {
        self.get(key).and_then(Doc::str).unwrap_or("")
    }
}

impl<'a> Doc<'a> for &'a Value {
    fn get(self, key: &str) -> Option<Self> {
        Value::get(self, key)
    }
    fn str(self) -> Option<&'a str> {
        self.as_str()
    }
    fn list(self) -> Option<Vec<Self>> {
        self.as_array().map(|items| items.iter().collect())
    }
    fn is_string(self) -> bool {
        Value::is_string(self)
    }
    fn is_object(self) -> bool {
        Value::is_object(self)
    }
    fn text(self) -> String {
        self.to_string()
    }
}

impl<'t> Doc<'t> for TapeNode<'t> {
    fn get(self, key: &str) -> Option<Self> {
        self.lookup(key)
    }
    fn str(self) -> Option<&'t str> {
        self.as_str()
    }
    fn list(self) -> Option<Vec<Self>> {
        self.is_list().then(|| self.items().collect())
    }
    fn is_string(self) -> bool {
        TapeNode::is_string(&self)
    }
    fn is_object(self) -> bool {
        TapeNode::is_object(&self)
    }
    /// Never shown: a violation found on the tape is reported from the `Value` reading.
    fn text(self) -> String {
        match self.node() {
            Some(Node::String(s)) => s.to_owned(),
            _ => String::new(),
        }
    }
}

/// Where a violation goes: its invariant, and its message built only when asked for.
type Bad<'b> = dyn FnMut(Invariant, &dyn Fn() -> String) + 'b;

/// The invariants of one body, each violation given to `bad`.
fn check<'a, D: Doc<'a>>(value: D, bad: &mut Bad<'_>) {
    let custom_id = value.get("custom_id").and_then(Doc::str);
    let body = if value.get("method").is_some() {
        if value.get("method").and_then(Doc::str) != Some("POST")
            || value.get("url").and_then(Doc::str) != Some("/v1/responses")
        {
            bad(Invariant::LineFormat, &|| {
                "a Batch API line must POST to /v1/responses".into()
            });
        }
        value.get("body")
    } else {
        Some(value)
    };
    if !custom_id.is_some_and(is_uuid) {
        bad(Invariant::SessionMeta, &|| "custom_id is not a UUID".into());
    }
    for key in ["instructions", "model"] {
        if body
            .and_then(|b| b.get(key))
            .is_some_and(|v| !v.is_string())
        {
            bad(Invariant::LineFormat, &|| {
                format!("`{key}` is not a string")
            });
        }
    }
    if let Some(tools) = body.and_then(|b| b.get("tools")) {
        check_tools(Some(tools), bad);
    }
    let Some(input) = body.and_then(|b| b.get("input")).and_then(Doc::list) else {
        bad(Invariant::LineFormat, &|| "`input` is not a list".into());
        return;
    };
    check_items(&input, bad);
}

/// The input items: known types, content by role, every call paired with one output after it.
fn check_items<'a, D: Doc<'a>>(input: &[D], bad: &mut Bad<'_>) {
    let mut calls: FxHashSet<&str> = FxHashSet::default();
    let mut open: FxHashSet<&str> = FxHashSet::default();
    for (i, item) in input.iter().copied().enumerate() {
        let kind = item.str_at("type");
        if kind == TYPE_ADDITIONAL_TOOLS {
            if i != 0 || item.get("role").and_then(Doc::str) != Some("developer") {
                bad(Invariant::Roles, &|| {
                    format!("input[{i}]: additional_tools only first, as a developer item")
                });
            }
            check_tools(item.get("tools"), bad);
            continue;
        }
        if !ITEM_TYPES.contains(&kind) {
            bad(Invariant::Roles, &|| {
                format!("input[{i}]: item type `{kind}` is not a Responses input item")
            });
            continue;
        }
        match kind {
            "message" => check_message(i, item, bad),
            "function_call" | "custom_tool_call" => {
                let id = item.str_at("call_id");
                if id.is_empty() || !calls.insert(id) {
                    bad(Invariant::CallPairing, &|| {
                        format!("input[{i}]: call id `{id}` missing or used before")
                    });
                }
                open.insert(id);
                let field = if kind == "function_call" {
                    "arguments"
                } else {
                    "input"
                };
                if !item.get(field).is_some_and(Doc::is_string) {
                    bad(Invariant::CallShapes, &|| {
                        format!("input[{i}]: `{field}` is not a string")
                    });
                }
            }
            "function_call_output" | "custom_tool_call_output" => {
                let id = item.str_at("call_id");
                if !open.remove(id) {
                    bad(Invariant::CallPairing, &|| {
                        format!("input[{i}]: output for `{id}` without its call before it")
                    });
                }
                let output = item.get("output");
                if !(output.is_some_and(Doc::is_string) || output.and_then(Doc::list).is_some()) {
                    bad(Invariant::CallShapes, &|| {
                        format!("input[{i}]: `output` is not a string or a list")
                    });
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
        bad(Invariant::CallPairing, &|| {
            format!("call `{id}` has no output")
        });
    }
}

fn check_message<'a, D: Doc<'a>>(i: usize, item: D, bad: &mut Bad<'_>) {
    let role = item.str_at("role");
    let allowed: &[&str] = match role {
        "user" | "developer" => &["input_text", "input_image", "input_audio", "input_file"],
        "assistant" => &["output_text", "refusal"],
        other => {
            bad(Invariant::Roles, &|| {
                format!("input[{i}]: role `{other}` (no system role in a body)")
            });
            return;
        }
    };
    if let Some(phase) = item.get("phase") {
        let known = phase.str().is_some_and(|p| API_PHASES.contains(&p));
        if role != "assistant" || !known {
            bad(Invariant::Phase, &|| {
                format!("input[{i}]: phase {} on a {role} message", phase.text())
            });
        }
    }
    for part in item.get("content").and_then(Doc::list).unwrap_or_default() {
        let kind = part.str_at("type");
        if !allowed.contains(&kind) {
            bad(Invariant::ContentTypes, &|| {
                format!("input[{i}]: `{kind}` content in a {role} message")
            });
        }
        if let Some(detail) = part.get("detail") {
            if !detail.str().is_some_and(|d| IMAGE_DETAILS.contains(&d)) {
                bad(Invariant::ContentTypes, &|| {
                    format!(
                        "input[{i}]: image detail {} the API does not take",
                        detail.text()
                    )
                });
            }
        }
    }
}

fn check_tools<'a, D: Doc<'a>>(tools: Option<D>, bad: &mut Bad<'_>) {
    let Some(tools) = tools.and_then(Doc::list) else {
        bad(Invariant::CallShapes, &|| "`tools` is not a list".into());
        return;
    };
    for tool in tools {
        let name = tool.str_at("name");
        let name_ok = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        let parameters_ok = tool.get("parameters").is_none_or(Doc::is_object);
        if tool.get("type").and_then(Doc::str) != Some("function") || !name_ok || !parameters_ok {
            bad(Invariant::CallShapes, &|| {
                format!("tool `{name}` is not a valid function definition")
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "01941f29-7c00-7428-b2fc-ba5fbe597eb1";

    fn body(input: &str) -> String {
        format!(r#"{{"custom_id":"{ID}","model":"gpt-5","input":{input}}}"#)
    }

    /// The violations as the `Value` reading alone finds them.
    fn by_value(bytes: &[u8]) -> Vec<String> {
        let mut found = Vec::new();
        match serde_json::from_slice::<Value>(bytes) {
            Ok(value) => check(&value, &mut |i, m| found.push(format!("{i:?}: {}", m()))),
            Err(e) => found.push(format!("not JSON: {e}")),
        }
        found
    }

    fn messages(bytes: &[u8]) -> Vec<String> {
        check_body(bytes)
            .into_iter()
            .map(|v| format!("{:?}: {}", v.invariant, v.message))
            .collect()
    }

    #[test]
    fn a_clean_body_is_clean_on_the_tape_and_as_a_value() {
        let text = body(
            r#"[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"data:x","detail":"auto"}]},
            {"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
            {"type":"function_call_output","call_id":"c1","output":"ok"},
            {"type":"message","role":"assistant","phase":"final_answer","content":[{"type":"output_text","text":"done"}]}]"#,
        )
        .replace('\n', "");
        assert!(clean_on_the_tape(text.as_bytes()));
        assert!(by_value(text.as_bytes()).is_empty());
        assert!(check_body(text.as_bytes()).is_empty());
    }

    #[test]
    fn every_violation_is_found_on_the_tape_and_told_as_the_value_reading_tells_it() {
        let bodies = [
            body(r#"[{"type":"message","role":"system","content":[]}]"#),
            body(r#"[{"type":"message","role":"user","phase":"commentary","content":[]}]"#),
            body(r#"[{"type":"message","role":"assistant","phase":{"x":1},"content":[]}]"#),
            body(r#"[{"type":"message","role":"assistant","content":[{"type":"input_text"}]}]"#),
            body(
                r#"[{"type":"message","role":"user","content":[{"type":"input_image","detail":7}]}]"#,
            ),
            body(r#"[{"type":"function_call","call_id":"a","arguments":{}}]"#),
            body(r#"[{"type":"function_call_output","call_id":"a","output":1}]"#),
            body(r#"[{"type":"function_call","call_id":"","arguments":"{}"}]"#),
            body(r#"[{"type":"session_meta"}]"#),
            body(
                r#"[{"type":"message","role":"user"},{"type":"additional_tools","role":"developer","tools":[]}]"#,
            ),
            body(r#"{"not":"a list"}"#),
            // A later duplicate key wins on both readings.
            body(r#"[{"type":"message","role":"user","role":"system","content":[]}]"#),
            format!(
                r#"{{"custom_id":"{ID}","input":[],"tools":[{{"type":"function","name":"bad name"}}]}}"#
            ),
            format!(
                r#"{{"custom_id":"{ID}","input":[],"tools":[{{"type":"function","name":"f","parameters":[]}}]}}"#
            ),
            format!(r#"{{"custom_id":"{ID}","input":[],"instructions":null}}"#),
            format!(
                r#"{{"custom_id":"{ID}","method":"GET","url":"/v1/responses","body":{{"input":[]}}}}"#
            ),
            format!(r#"{{"custom_id":"{ID}","method":"POST","url":"/v1/responses"}}"#),
            r#"{"custom_id":"x","input":[]}"#.to_string(),
            r#"[1,2]"#.to_string(),
        ];
        for text in bodies {
            let expected = by_value(text.as_bytes());
            assert!(!expected.is_empty(), "{text}");
            assert!(!clean_on_the_tape(text.as_bytes()), "{text}");
            assert_eq!(messages(text.as_bytes()), expected, "{text}");
        }
    }

    #[test]
    fn what_the_tape_cannot_read_as_serde_json_does_goes_to_serde_json() {
        // A lone surrogate: simd-json reads U+0000, serde_json refuses the body.
        let lone = body(
            r#"[{"type":"message","role":"user","content":[{"type":"input_text","text":"\ud800"}]}]"#,
        );
        assert!(!clean_on_the_tape(lone.as_bytes()));
        assert!(messages(lone.as_bytes())[0].starts_with("LineFormat: not JSON: "));
        // Nesting past serde_json's limit in a tool's parameters (the body's own four levels
        // included): refused by serde_json, at exactly the depth it refuses.
        for (levels, refused) in [(123, false), (124, true), (200, true)] {
            let deep = format!(
                r#"{{"custom_id":"{ID}","input":[],"tools":[{{"type":"function","name":"f","parameters":{{"a":{}1{}}}}}]}}"#,
                "[".repeat(levels),
                "]".repeat(levels)
            );
            assert_eq!(clean_on_the_tape(deep.as_bytes()), !refused, "{levels}");
            assert_eq!(
                messages(deep.as_bytes())
                    .first()
                    .is_some_and(|m| m.contains("recursion limit")),
                refused,
                "{levels}"
            );
        }
        // Two lines, and not JSON at all.
        assert_eq!(
            messages(b"{}\n{}\n")[0],
            "LineFormat: a body must be one line"
        );
        assert!(messages(b"{")
            .iter()
            .any(|m| m.starts_with("LineFormat: not JSON")));
    }
}
