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
//! One check, two readings of the body ([`Doc`]). The body is first read into an outline by the
//! strict scanner the rollout validator uses too ([`crate::model::scan`]): its values as spans
//! of the bytes, in a buffer the thread reuses, nothing unescaped or copied (a `Value` parse was
//! 40 % of a small record's conversion; simd-json's tape, which replaced it, copied the body and
//! every string). Only a body that breaks an invariant, or one the outline leaves to serde_json
//! (not UTF-8 or not JSON, nesting past serde_json's levels, a key with escapes, or a string the
//! check reads that holds escapes), is read again as a `serde_json::Value`, and the violations
//! and their messages come from that reading alone.
//!
//! Before both, a body written as the converter and serde_json write one (compact, each item's
//! keys in codex-rs's order) is read by byte templates ([`template`]), which check each
//! invariant as they reach it and only ever answer "clean" (any other byte, or any invariant
//! broken, and the body goes to the outline as above): most bodies are read once, and no part
//! of them is stored.

use std::cell::{Cell, RefCell};

use rustc_hash::FxHashSet;
use serde_json::Value;

use super::meta::is_uuid;
use super::{Invariant, Violation};
use crate::model::responses::TYPE_ADDITIONAL_TOOLS;
use crate::model::scan::{self, OutlineItems, OutlineNode, Part};

mod template;

/// Item types a body may hold.
const ITEM_TYPES: [&str; 12] = [
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    // Items of a Codex rollout, written as read: Codex sends them in its own requests.
    "local_shell_call",
    "web_search_call",
    "image_generation_call",
    "tool_search_call",
    "tool_search_output",
    "compaction",
];
/// Phases the public API takes (`partial_answer` is Codex's own).
const API_PHASES: [&str; 2] = ["commentary", "final_answer"];
const IMAGE_DETAILS: [&str; 4] = ["auto", "low", "high", "original"];

/// Checks one body line (bare, or a Batch API line with the body under `body`).
pub fn check_body(bytes: &[u8]) -> Vec<Violation> {
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let one_line = memchr::memchr(b'\n', trimmed).is_none();
    if one_line {
        if let Ok(text) = simdutf8::basic::from_utf8(trimmed) {
            if template::clean(text) || clean_in_outline(text) {
                return Vec::new();
            }
        }
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

/// True when the body, read by the strict scanner into an outline, breaks no invariant. False
/// when it breaks one, and when the outline cannot answer as serde_json would (not UTF-8, not
/// JSON to the scanner, nesting past serde_json's levels, a key with escapes, a string the check
/// reads that holds escapes): then [`check_body`] reads it again as a `Value`.
fn clean_in_outline(text: &str) -> bool {
    thread_local! {
        static PARTS: RefCell<Vec<Part>> = const { RefCell::new(Vec::new()) };
    }
    PARTS.with(|parts| {
        let Ok(mut parts) = parts.try_borrow_mut() else {
            return false;
        };
        if scan::outline(text, scan::SERDE_JSON_LEVELS, &mut parts).is_none() {
            return false;
        }
        let escaped = Cell::new(false);
        let mut clean = true;
        let root = Outlined {
            node: OutlineNode::root(text, &parts),
            escaped: &escaped,
        };
        check(root, &mut |_, _| clean = false);
        if parts.capacity() > PARTS_KEPT {
            *parts = Vec::new();
        }
        clean && !escaped.get()
    })
}

/// A thread's outline buffer grown past this many parts for one huge body is freed after it.
const PARTS_KEPT: usize = 1 << 16;

/// A JSON value as the check reads it: a `serde_json::Value`, or a value of an outline.
/// Both answer alike (a later duplicate key wins; a key of a non-object is absent).
trait Doc<'a>: Copy {
    fn get(self, key: &str) -> Option<Self>;
    fn str(self) -> Option<&'a str>;
    /// The elements, when the value is a list: walked, not collected (a list a message's
    /// content was ~5 allocations a small record).
    type Items: Iterator<Item = Self>;
    fn list(self) -> Option<Self::Items>;
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
    type Items = std::slice::Iter<'a, Value>;
    fn list(self) -> Option<Self::Items> {
        self.as_array().map(|items| items.iter())
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

/// A value of the body's outline, and where to say that the check read a string whose
/// bytes are not its text (it holds escapes): the outline cannot answer then.
#[derive(Clone, Copy)]
struct Outlined<'a> {
    node: OutlineNode<'a>,
    escaped: &'a Cell<bool>,
}

/// The elements of a list of the outline, as [`Outlined`] values.
struct OutlinedItems<'a> {
    items: OutlineItems<'a>,
    escaped: &'a Cell<bool>,
}

impl<'a> Iterator for OutlinedItems<'a> {
    type Item = Outlined<'a>;

    fn next(&mut self) -> Option<Outlined<'a>> {
        let node = self.items.next()?;
        Some(Outlined {
            node,
            escaped: self.escaped,
        })
    }
}

impl<'a> Doc<'a> for Outlined<'a> {
    fn get(self, key: &str) -> Option<Self> {
        let node = self.node.get(key)?;
        Some(Outlined { node, ..self })
    }
    fn str(self) -> Option<&'a str> {
        match self.node.part()? {
            Part::String { escaped: false, .. } => self.node.raw_str(),
            Part::String { escaped: true, .. } => {
                self.escaped.set(true);
                None
            }
            Part::Object { .. } | Part::Array { .. } | Part::Scalar => None,
        }
    }
    type Items = OutlinedItems<'a>;
    fn list(self) -> Option<Self::Items> {
        Some(OutlinedItems {
            items: self.node.items()?,
            escaped: self.escaped,
        })
    }
    fn is_string(self) -> bool {
        matches!(self.node.part(), Some(Part::String { .. }))
    }
    fn is_object(self) -> bool {
        matches!(self.node.part(), Some(Part::Object { .. }))
    }
    /// Never shown: a violation found in the outline is reported from the `Value` reading.
    fn text(self) -> String {
        self.node.raw_str().unwrap_or_default().to_owned()
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
    check_items(input, bad);
}

/// The input items: known types, content by role, every call paired with one output after it.
fn check_items<'a, D: Doc<'a>>(input: impl Iterator<Item = D>, bad: &mut Bad<'_>) {
    let mut calls: FxHashSet<&str> = FxHashSet::default();
    let mut open: FxHashSet<&str> = FxHashSet::default();
    for (i, item) in input.enumerate() {
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
            // A local shell call's output is a `function_call_output`.
            "local_shell_call" => {
                let id = item.str_at("call_id");
                if !id.is_empty() && calls.insert(id) {
                    open.insert(id);
                }
            }
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
    for part in item
        .get("content")
        .and_then(Doc::list)
        .into_iter()
        .flatten()
    {
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

    /// Whether the outline finds the body clean.
    fn outlined(bytes: &[u8]) -> bool {
        std::str::from_utf8(bytes).is_ok_and(clean_in_outline)
    }

    fn messages(bytes: &[u8]) -> Vec<String> {
        check_body(bytes)
            .into_iter()
            .map(|v| format!("{:?}: {}", v.invariant, v.message))
            .collect()
    }

    #[test]
    fn a_clean_body_is_clean_in_outline_and_as_a_value() {
        let text = body(
            r#"[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"data:x","detail":"auto"}]},
            {"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
            {"type":"function_call_output","call_id":"c1","output":"ok"},
            {"type":"message","role":"assistant","phase":"final_answer","content":[{"type":"output_text","text":"done"}]}]"#,
        )
        .replace('\n', "");
        assert!(outlined(text.as_bytes()));
        assert!(by_value(text.as_bytes()).is_empty());
        assert!(check_body(text.as_bytes()).is_empty());
    }

    #[test]
    fn every_violation_is_found_in_the_outline_and_told_as_the_value_reading_tells_it() {
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
            assert!(!outlined(text.as_bytes()), "{text}");
            assert!(!template::clean(&text), "{text}");
            assert_eq!(messages(text.as_bytes()), expected, "{text}");
        }
    }

    #[test]
    fn what_the_outline_cannot_answer_goes_to_serde_json_and_gets_its_verdict() {
        // Each body, whether serde_json finds it clean, and whether the outline does (it leaves
        // a body to serde_json whenever it cannot answer alone).
        let cases: Vec<(Vec<u8>, bool, bool)> = vec![
            // A key with escapes is refused by the outline; serde_json reads `type`.
            (body(r#"[{"ty\u0070e":"message","role":"user","content":[]}]"#).into_bytes(), true, false),
            // Strings the check reads hold escapes: a call id with a quote, paired.
            (
                body(concat!(
                    r#"[{"type":"function_call","call_id":"a\"b","arguments":"{}"},"#,
                    r#"{"type":"function_call_output","call_id":"a\"b","output":"ok"}]"#
                ))
                .into_bytes(),
                true,
                false,
            ),
            // An escaped role that reads as a bad one.
            (body(r#"[{"type":"message","role":"sys\u0074em","content":[]}]"#).into_bytes(), false, false),
            // Escapes only in texts the check never reads: the outline answers alone.
            (
                body(r#"[{"type":"message","role":"user","content":[{"type":"input_text","text":"a\nb\"c\\"}]}]"#)
                    .into_bytes(),
                true,
                true,
            ),
            // A surrogate pair is text to both readings.
            (
                body(r#"[{"type":"message","role":"user","content":[{"type":"input_text","text":"\ud83d\ude00"}]}]"#)
                    .into_bytes(),
                true,
                true,
            ),
            // A number out of f64's range, a control character in a string, text after the
            // value, bytes that are not UTF-8.
            (body("[]").replace(r#""input""#, r#""n":1e400,"input""#).into_bytes(), false, false),
            (body("[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"text\":\"a\u{1}\"}]}]").into_bytes(), false, false),
            (format!("{} x", body("[]")).into_bytes(), false, false),
            ([body("[]").as_bytes(), b"\xff"].concat(), false, false),
            // Only whitespace around the value: clean.
            (format!(" {} ", body("[]")).into_bytes(), true, true),
        ];
        for (bytes, clean, in_outline) in cases {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let expected = by_value(&bytes);
            assert_eq!(expected.is_empty(), clean, "{text}");
            assert_eq!(outlined(&bytes), in_outline, "{text}");
            let told = messages(&bytes);
            if expected.first().is_some_and(|m| m.starts_with("not JSON")) {
                assert!(told[0].starts_with("LineFormat: not JSON: "), "{text}");
            } else {
                assert_eq!(told, expected, "{text}");
            }
        }
    }

    #[test]
    fn an_object_whose_first_key_is_serde_jsons_raw_value_name_goes_to_serde_json() {
        let Some(key) = crate::model::json::raw_value_key() else {
            return;
        };
        let text = body(&format!(r#"[{{"{key}":"1"}}]"#));
        assert!(!outlined(text.as_bytes()));
        assert!(!messages(text.as_bytes()).is_empty());
    }

    #[test]
    fn what_the_outline_cannot_read_as_serde_json_does_goes_to_serde_json() {
        // A lone surrogate: serde_json refuses the body.
        let lone = body(
            r#"[{"type":"message","role":"user","content":[{"type":"input_text","text":"\ud800"}]}]"#,
        );
        assert!(!outlined(lone.as_bytes()));
        assert!(messages(lone.as_bytes())[0].starts_with("LineFormat: not JSON: "));
        // Nesting past serde_json's limit in a tool's parameters (the body's own four levels
        // included): refused by serde_json, at exactly the depth it refuses.
        for (levels, refused) in [(123, false), (124, true), (200, true)] {
            let deep = format!(
                r#"{{"custom_id":"{ID}","input":[],"tools":[{{"type":"function","name":"f","parameters":{{"a":{}1{}}}}}]}}"#,
                "[".repeat(levels),
                "]".repeat(levels)
            );
            assert_eq!(outlined(deep.as_bytes()), !refused, "{levels}");
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
