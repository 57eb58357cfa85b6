//! The fastest answer for a clean body: read by byte templates, each invariant checked as the
//! template reaches it.
//!
//! A body is written compact, its items with their keys in codex-rs's order (by
//! `--format responses`, and by serde_json from the same types). Its items are read here as
//! literals with holes, as the rollout lines are (`rollout::view::template`); the body's own
//! members, tools and content parts, fewer, by their keys in any order. The holes are read by
//! the strict scanner of [`crate::model::scan`], so a body read here is JSON serde_json reads
//! alike. This reading only ever says "clean": any other byte (another order, an extra member
//! in an item, `null`, a name with escapes, a duplicate key the check reads), and any
//! invariant broken, answers "not known", and the caller reads the body as before (the outline,
//! then a `Value` for the messages). So the violations and their messages still come from the
//! `Value` reading alone; tests hold this to it on random, broken and damaged bodies.
//!
//! Why: the outline and its walk, a part per value and a search of an object's keys per field
//! read, were ~17 % of a conversion of small records to bodies.

use rustc_hash::FxHashSet;

use super::{is_uuid, API_PHASES, IMAGE_DETAILS};
use crate::model::json;
use crate::model::scan::{Scanner, SERDE_JSON_LEVELS};

/// The containers a value may be in, the body's own counted, and one more (see [`body`]).
const MAX_DEPTH: usize = SERDE_JSON_LEVELS + 1;

/// The content types a message of each role may hold (as the check's `allowed`).
const USER_PARTS: [&str; 4] = ["input_text", "input_image", "input_audio", "input_file"];
const ASSISTANT_PARTS: [&str; 2] = ["output_text", "refusal"];

/// True when the body (one line, UTF-8) is read here and breaks no invariant; false when it
/// is not known.
pub(super) fn clean(text: &str) -> bool {
    clean_body(text).is_some()
}

fn clean_body(text: &str) -> Option<()> {
    let mut s = Scanner::new(text);
    // A Batch API line, as it is written: its envelope's members in order, the body inside.
    if s.literal(br#"{"custom_id":"#).is_some() {
        let id = s.plain()?;
        if s.literal(br#","method":"POST","url":"/v1/responses","body":"#)
            .is_some()
        {
            is_uuid(id).then_some(())?;
            body(&mut s, 3, false)?;
            s.eat(b'}')?;
            return s.end();
        }
    }
    let mut s = Scanner::new(text);
    body(&mut s, 2, true)?;
    s.end()
}

/// The members of a body, in any order, its values `depth` containers deep. Depths here
/// count one container more than there is: the outline reads one level less than the scanner
/// allows ([`crate::model::scan::SERDE_JSON_LEVELS`]), and so does this reading. A bare body
/// has its `custom_id` checked; in a Batch API line, the envelope's is.
fn body(s: &mut Scanner<'_>, depth: usize, bare: bool) -> Option<()> {
    let mut seen = Seen::default();
    let mut custom_id = None;
    members(s, |s, key| match key {
        "custom_id" if bare => {
            seen.once(0)?;
            custom_id = Some(s.plain()?);
            Some(())
        }
        "model" | "instructions" => {
            seen.once(if key == "model" { 1 } else { 2 })?;
            s.string().map(drop)
        }
        "input" => {
            seen.once(3)?;
            items(s, depth + 1)
        }
        "tools" => {
            seen.once(4)?;
            tools(s, depth + 1)
        }
        // A bare body with a `method` is read as a Batch API line by the check.
        "method" if bare => None,
        _ => skip(s, depth),
    })?;
    (seen.has(3) && (!bare || custom_id.is_some_and(is_uuid))).then_some(())
}

/// Which keys of an object were read: a key the check reads, given twice, is left to it
/// (a later one wins in a `Value`).
#[derive(Default)]
struct Seen(u32);

impl Seen {
    fn once(&mut self, key: u32) -> Option<()> {
        let bit = 1 << key;
        (self.0 & bit == 0).then(|| self.0 |= bit)
    }

    fn has(&self, key: u32) -> bool {
        self.0 & (1 << key) != 0
    }
}

/// The input items, compact: each known type, its content by its role, every call paired
/// with one output after it. Their values are `depth` containers deep.
fn items<'a>(s: &mut Scanner<'a>, depth: usize) -> Option<()> {
    let mut calls: FxHashSet<&str> = FxHashSet::default();
    let mut open: FxHashSet<&str> = FxHashSet::default();
    s.eat(b'[')?;
    if s.eat(b']').is_none() {
        loop {
            item(s, depth + 1, &mut calls, &mut open)?;
            if s.eat(b']').is_some() {
                break;
            }
            s.eat(b',')?;
        }
    }
    open.is_empty().then_some(())
}

/// One item, `{"type":..` and then its type's members in order.
fn item<'a>(
    s: &mut Scanner<'a>,
    depth: usize,
    calls: &mut FxHashSet<&'a str>,
    open: &mut FxHashSet<&'a str>,
) -> Option<()> {
    s.first(r#","type":"#)?;
    match s.plain()? {
        // `{"type":"message","role":..,"content":[..](,"phase":..)}`
        "message" => {
            s.member(r#","role":"#)?;
            let role = s.plain()?;
            let allowed: &[&str] = match role {
                "user" | "developer" => &USER_PARTS,
                "assistant" => &ASSISTANT_PARTS,
                _ => return None,
            };
            s.member(r#","content":"#)?;
            s.array(|s| part(s, depth + 2, allowed))?;
            if s.member(r#","phase":"#).is_some() {
                let phase = s.plain()?;
                (role == "assistant" && API_PHASES.contains(&phase)).then_some(())?;
            }
        }
        // `{"type":"function_call","name":..,"arguments":"..","call_id":".."}`
        "function_call" => {
            s.member(r#","name":"#)?;
            skip(s, depth)?;
            s.member(r#","arguments":"#)?;
            s.string()?;
            s.member(r#","call_id":"#)?;
            call(s.plain()?, calls, open)?;
        }
        // `{"type":"custom_tool_call","call_id":"..","name":..,"input":".."}`
        "custom_tool_call" => {
            s.member(r#","call_id":"#)?;
            call(s.plain()?, calls, open)?;
            s.member(r#","name":"#)?;
            skip(s, depth)?;
            s.member(r#","input":"#)?;
            s.string()?;
        }
        // `{"type":"function_call_output","call_id":"..","output":".." or [..]}`, and the
        // same of a custom tool.
        "function_call_output" | "custom_tool_call_output" => {
            s.member(r#","call_id":"#)?;
            open.remove(s.plain()?).then_some(())?;
            s.member(r#","output":"#)?;
            match s.peek()? {
                b'"' => s.string().map(drop)?,
                b'[' => skip(s, depth)?,
                _ => return None,
            }
        }
        // Pairs with nothing, and nothing in it is checked: its other members are only read,
        // compact. But a second `type` (a later key wins in a `Value`) would make it another
        // item: that is left to the check.
        "reasoning" => loop {
            if s.eat(b'}').is_some() {
                return Some(());
            }
            s.eat(b',')?;
            (*s.string()?.text()? != *"type").then_some(())?;
            s.eat(b':')?;
            skip(s, depth)?;
        },
        _ => return None,
    }
    s.eat(b'}')
}

/// A call's id: not empty, never used before, open until its output.
fn call<'a>(
    id: &'a str,
    calls: &mut FxHashSet<&'a str>,
    open: &mut FxHashSet<&'a str>,
) -> Option<()> {
    (!id.is_empty() && calls.insert(id)).then_some(())?;
    open.insert(id);
    Some(())
}

/// A content part, its members in any order: a `type` its message may hold, an image
/// `detail` the API takes. Its values are `depth` containers deep.
fn part(s: &mut Scanner<'_>, depth: usize, allowed: &[&str]) -> Option<()> {
    let mut seen = Seen::default();
    let mut known = false;
    members(s, |s, key| match key {
        "type" => {
            seen.once(0)?;
            known = allowed.contains(&s.plain()?);
            Some(())
        }
        "detail" => {
            seen.once(1)?;
            IMAGE_DETAILS.contains(&s.plain()?).then_some(())
        }
        _ => skip(s, depth),
    })?;
    known.then_some(())
}

/// The tools: each `{"type":"function"}`, a name of 1 to 64 letters, digits, `_` or `-`, and
/// `parameters` an object when given. Their values are `depth + 1` containers deep.
fn tools(s: &mut Scanner<'_>, depth: usize) -> Option<()> {
    s.array(|s| {
        let mut seen = Seen::default();
        members(s, |s, key| match key {
            "type" => {
                seen.once(0)?;
                (s.plain()? == "function").then_some(())
            }
            "name" => {
                seen.once(1)?;
                let name = s.plain()?;
                let valid = (1..=64).contains(&name.len())
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                valid.then_some(())
            }
            "parameters" => {
                seen.once(2)?;
                members(s, |s, _| skip(s, depth + 2))
            }
            _ => skip(s, depth + 1),
        })?;
        (seen.has(0) && seen.has(1)).then_some(())
    })
}

/// An object's members, each value left to `member`, as [`Scanner::object`] reads them. An
/// object with serde_json's raw value name for a key is left to the check: a `Value` reads it
/// as something else than an object ([`json::is_raw_value_key`]).
fn members<'a>(
    s: &mut Scanner<'a>,
    mut member: impl FnMut(&mut Scanner<'a>, &str) -> Option<()>,
) -> Option<()> {
    s.object(|s, key| {
        if json::is_raw_value_key(key) {
            return None;
        }
        member(s, key)
    })
}

/// Any value, checked and skipped as serde_json reads it into a `Value` (the check's own
/// reading): a number in f64's range, no object with the raw value name for a key, and
/// nesting within serde_json's levels (`depth` counts the containers it is in, one more than
/// there are: see [`body`]).
fn skip(s: &mut Scanner<'_>, depth: usize) -> Option<()> {
    s.ws();
    match s.peek()? {
        b'"' => s.string().map(drop),
        b'{' if depth < MAX_DEPTH => members(s, |s, _| skip(s, depth + 1)),
        b'[' if depth < MAX_DEPTH => s.array(|s| skip(s, depth + 1)),
        b'{' | b'[' => None,
        b't' => s.literal(b"true"),
        b'f' => s.literal(b"false"),
        b'n' => s.literal(b"null"),
        _ => serde_json::from_str::<serde_json::Number>(s.number()?)
            .ok()
            .map(drop),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;
    use crate::model::scan::one_edit;
    use crate::validate::responses::check_body;

    const ID: &str = "01941f29-7c00-7428-b2fc-ba5fbe597eb1";

    /// What the `Value` reading finds in the body: the check's verdict.
    fn clean_as_a_value(text: &str) -> bool {
        serde_json::from_str::<Value>(text).is_ok_and(|value| {
            let mut clean = true;
            super::super::check(&value, &mut |_, _| clean = false);
            clean
        })
    }

    /// A body's items and tools as the converter writes them.
    fn items() -> Vec<&'static str> {
        vec![
            r#"{"type":"message","role":"developer","content":[{"type":"input_text","text":"be \"brief\""}]}"#,
            r#"{"type":"message","role":"user","content":[{"type":"input_text","text":"a\nb"},{"type":"input_image","image_url":"data:image/png;base64,AA==","detail":"auto"}]}"#,
            r#"{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"content":[{"type":"reasoning_text","text":"r"}],"encrypted_content":null}"#,
            r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}],"phase":"commentary"}"#,
            r#"{"type":"function_call","name":"shell","arguments":"{\"a\":[1.5e3,-0]}","call_id":"call_1"}"#,
            r#"{"type":"custom_tool_call","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch"}"#,
            r#"{"type":"function_call_output","call_id":"call_1","output":"ok"}"#,
            r#"{"type":"custom_tool_call_output","call_id":"call_2","output":[{"type":"input_text","text":"done"}]}"#,
            r#"{"type":"message","role":"assistant","content":[],"phase":"final_answer"}"#,
        ]
    }

    const TOOLS: &str = r#"[{"type":"function","name":"shell","description":"run","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]},"strict":false}]"#;

    #[test]
    fn bodies_as_written_are_clean_by_template() {
        let input = items().join(",");
        let bodies = [
            format!(
                r#"{{"custom_id":"{ID}","model":"gpt-5","instructions":"be \"brief\"","input":[{input}],"tools":{TOOLS}}}"#
            ),
            format!(r#"{{"custom_id":"{ID}","input":[]}}"#),
            format!(
                r#"{{"custom_id":"{ID}","model":"m","input":[{input}],"parallel_tool_calls":false}}"#
            ),
            format!(
                r#"{{"custom_id":"{ID}","method":"POST","url":"/v1/responses","body":{{"model":"m","input":[{input}],"tools":{TOOLS}}}}}"#
            ),
            // Keys of the body in another order, and whitespace between them.
            format!(r#"{{ "input" : [{input}], "custom_id" : "{ID}" }}"#),
        ];
        for body in bodies {
            assert!(clean(&body), "{body}");
            assert!(clean_as_a_value(&body), "{body}");
            assert!(check_body(body.as_bytes()).is_empty(), "{body}");
        }
    }

    #[test]
    fn what_the_template_leaves_to_the_check() {
        let body = |input: &str| format!(r#"{{"custom_id":"{ID}","input":[{input}]}}"#);
        for (text, clean_as_value) in [
            // Clean, but not in the templates' shapes: another order of an item's keys, an
            // escape in a name the check reads, whitespace in an item, a message with an id.
            (
                body(
                    r#"{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":""}"#,
                ),
                true,
            ),
            (
                body(r#"{"type":"message","role":"us\u0065r","content":[]}"#),
                true,
            ),
            (
                body(r#"{ "type":"message","role":"user","content":[]}"#),
                true,
            ),
            (
                body(r#"{"type":"message","id":"m","role":"user","content":[]}"#),
                true,
            ),
            (
                body(r#"{"type":"additional_tools","role":"developer","tools":[]}"#),
                true,
            ),
            // An object a `Value` reads as a raw value, where the check reads nothing.
            (
                format!(
                    r#"{{"custom_id":"{ID}","input":[],"x":{{"{}":"1"}}}}"#,
                    json::raw_value_key().unwrap_or("x")
                ),
                true,
            ),
            // Broken: each invariant the template checks on its way.
            (
                body(r#"{"type":"message","role":"system","content":[]}"#),
                false,
            ),
            (
                body(r#"{"type":"message","role":"user","content":[],"phase":"commentary"}"#),
                false,
            ),
            (
                body(
                    r#"{"type":"message","role":"assistant","content":[],"phase":"partial_answer"}"#,
                ),
                false,
            ),
            (
                body(
                    r#"{"type":"message","role":"assistant","content":[{"type":"input_text","text":"x"}]}"#,
                ),
                false,
            ),
            (
                body(
                    r#"{"type":"message","role":"user","content":[{"type":"input_image","image_url":"x","detail":"huge"}]}"#,
                ),
                false,
            ),
            (
                body(r#"{"type":"message","role":"user","content":[{"text":"x"}]}"#),
                false,
            ),
            (
                body(
                    r#"{"type":"message","role":"user","content":[{"type":"input_text","type":"output_text"}]}"#,
                ),
                false,
            ),
            (
                body(r#"{"type":"function_call","name":"f","arguments":"{}","call_id":"c"}"#),
                false,
            ),
            (
                body(
                    r#"{"type":"function_call","name":"f","arguments":"{}","call_id":""},{"type":"function_call_output","call_id":"","output":""}"#,
                ),
                false,
            ),
            (
                body(
                    r#"{"type":"function_call","name":"f","arguments":{},"call_id":"c"},{"type":"function_call_output","call_id":"c","output":""}"#,
                ),
                false,
            ),
            (
                body(r#"{"type":"function_call_output","call_id":"c","output":""}"#),
                false,
            ),
            (
                body(
                    r#"{"type":"function_call","name":"f","arguments":"","call_id":"c"},{"type":"function_call_output","call_id":"c","output":1}"#,
                ),
                false,
            ),
            (
                body(
                    r#"{"type":"function_call","name":"f","arguments":"","call_id":"c"},{"type":"function_call","name":"f","arguments":"","call_id":"c"},{"type":"function_call_output","call_id":"c","output":""}"#,
                ),
                false,
            ),
            (
                body(r#"{"type":"reasoning","summary":[],"type":"message"}"#),
                false,
            ),
            (body(r#"{"type":"session_meta"}"#), false),
            (r#"{"custom_id":"x","input":[]}"#.to_string(), false),
            (r#"{"input":[]}"#.to_string(), false),
            (format!(r#"{{"custom_id":"{ID}"}}"#), false),
            (
                format!(r#"{{"custom_id":"{ID}","input":[],"model":7}}"#),
                false,
            ),
            (
                format!(r#"{{"custom_id":"{ID}","input":[],"n":1e400}}"#),
                false,
            ),
            (
                format!(
                    r#"{{"custom_id":"{ID}","input":[],"tools":[{{"type":"function","name":"a b"}}]}}"#
                ),
                false,
            ),
            (
                format!(
                    r#"{{"custom_id":"{ID}","input":[],"tools":[{{"type":"function","name":"f","parameters":null}}]}}"#
                ),
                false,
            ),
            (
                format!(r#"{{"custom_id":"{ID}","input":[],"tools":[{{"name":"f"}}]}}"#),
                false,
            ),
            (
                format!(r#"{{"custom_id":"{ID}","input":[],"method":"POST"}}"#),
                false,
            ),
            (
                format!(
                    r#"{{"custom_id":"{ID}","method":"GET","url":"/v1/responses","body":{{"input":[]}}}}"#
                ),
                false,
            ),
            (
                format!(r#"{{"custom_id":"{ID}","input":[],"input":{{}}}}"#),
                false,
            ),
        ] {
            assert!(!clean(&text), "{text}");
            assert_eq!(clean_as_a_value(&text), clean_as_value, "{text}");
        }
    }

    /// A JSON string: one of `valid` mostly, else one of `invalid`, or the valid one with an
    /// escape (`\u0061` for its first `a`), or not a string at all.
    fn name(
        valid: &'static [&'static str],
        invalid: &'static [&'static str],
    ) -> BoxedStrategy<String> {
        let quoted = |n: &str| format!("\"{n}\"");
        let mut choices = vec![(16, prop::sample::select(valid).prop_map(quoted).boxed())];
        if !invalid.is_empty() {
            choices.push((1, prop::sample::select(invalid).prop_map(quoted).boxed()));
        }
        let escaped = |n: &str| format!("\"{}\"", n.replacen('a', "\\u0061", 1));
        choices.push((1, prop::sample::select(valid).prop_map(escaped).boxed()));
        let other = prop::sample::select(vec!["null", "7", "[]"]).prop_map(String::from);
        choices.push((1, other.boxed()));
        proptest::strategy::Union::new_weighted(choices).boxed()
    }

    /// Any JSON value, as text.
    fn value() -> impl Strategy<Value = String> {
        crate::model::scan::json_leaf()
            .prop_recursive(2, 8, 3, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                    prop::collection::vec(("[a-z]{1,4}", inner), 0..3)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
            .prop_map(|v| v.to_string())
    }

    /// A string mostly, any value now and then.
    fn string_mostly() -> impl Strategy<Value = String> {
        prop_oneof![
            9 => "[a-z\"{} ]{0,8}".prop_map(|t| Value::from(t).to_string()),
            1 => value(),
        ]
    }

    /// A message, its content types and phase by its role mostly.
    fn message() -> impl Strategy<Value = String> {
        let part = |types: &'static [&'static str]| {
            (
                name(types, &["output_text", "input_text", "summary_text"]),
                prop::option::of(name(&["auto", "low", "high", "original"], &["huge"])),
                string_mostly(),
            )
                .prop_map(|(kind, detail, text)| {
                    let detail = detail.map_or(String::new(), |d| format!(r#","detail":{d}"#));
                    format!(r#"{{"type":{kind},"text":{text}{detail}}}"#)
                })
        };
        const USER: [&str; 4] = ["input_text", "input_image", "input_audio", "input_file"];
        prop_oneof![
            (
                name(&["user", "developer"], &["system"]),
                prop::collection::vec(part(&USER), 0..3),
                prop::option::weighted(0.1, name(&["commentary"], &[])),
            ),
            (
                name(&["assistant"], &["system"]),
                prop::collection::vec(part(&["output_text", "refusal"]), 0..3),
                prop::option::of(name(&["commentary", "final_answer"], &["partial_answer"])),
            ),
        ]
        .prop_map(|(role, parts, phase)| {
            let phase = phase.map_or(String::new(), |p| format!(r#","phase":{p}"#));
            let parts = parts.join(",");
            format!(r#"{{"type":"message","role":{role},"content":[{parts}]{phase}}}"#)
        })
    }

    /// The `k`th call of a body and its output after it (or not): its own id mostly, else an
    /// empty one or the first call's.
    fn call(k: usize) -> impl Strategy<Value = String> {
        (
            prop_oneof![
                18 => Just(format!("call_{k}")),
                1 => Just(String::new()),
                1 => Just("call_0".to_string()),
            ],
            any::<bool>(),
            string_mostly(),
            prop_oneof![9 => string_mostly(), 1 => Just("[]".to_string())],
            prop::option::weighted(0.95, Just(())),
            value(),
        )
            .prop_map(|(id, custom, arguments, output, answered, name)| {
                let id = Value::from(id).to_string();
                let (call, output_type) = if custom {
                    let call = format!(
                        r#"{{"type":"custom_tool_call","call_id":{id},"name":{name},"input":{arguments}}}"#
                    );
                    (call, "custom_tool_call_output")
                } else {
                    let call = format!(
                        r#"{{"type":"function_call","name":{name},"arguments":{arguments},"call_id":{id}}}"#
                    );
                    (call, "function_call_output")
                };
                match answered {
                    Some(()) => format!(
                        r#"{call},{{"type":"{output_type}","call_id":{id},"output":{output}}}"#
                    ),
                    None => call,
                }
            })
    }

    /// A body: messages, calls with their outputs and reasoning, maybe tools, bare or in a
    /// Batch API line.
    fn body() -> impl Strategy<Value = String> {
        let unit = |k: usize| {
            let reasoning =
                value().prop_map(|v| format!(r#"{{"type":"reasoning","summary":{v}}}"#));
            prop_oneof![
                4 => message().boxed(),
                3 => call(k).boxed(),
                1 => reasoning.boxed(),
            ]
        };
        let tool = (
            name(&["function"], &["custom"]),
            name(&["shell", "read_file"], &["a b", ""]),
            prop::option::of(prop_oneof![
                4 => Just(r#"{"type":"object"}"#.to_string()),
                1 => value(),
            ]),
        )
            .prop_map(|(kind, name, parameters)| {
                let parameters =
                    parameters.map_or(String::new(), |p| format!(r#","parameters":{p}"#));
                format!(r#"{{"type":{kind},"name":{name}{parameters}}}"#)
            });
        (
            (unit(0), unit(1), unit(2), unit(3)),
            0..=4usize,
            prop::option::of(prop::collection::vec(tool, 0..2)),
            prop_oneof![9 => Just(ID), 1 => Just("not-a-uuid")],
            any::<bool>(),
        )
            .prop_map(|((a, b, c, d), len, tools, id, envelope)| {
                let items = [a, b, c, d][..len].join(",");
                let tools =
                    tools.map_or(String::new(), |t| format!(r#","tools":[{}]"#, t.join(",")));
                let inner = format!(r#""model":"m","input":[{items}]{tools}"#);
                if envelope {
                    format!(
                        r#"{{"custom_id":"{id}","method":"POST","url":"/v1/responses","body":{{{inner}}}}}"#
                    )
                } else {
                    format!(r#"{{"custom_id":"{id}",{inner}}}"#)
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// A body the template finds clean the check finds clean, and the template finds
        /// every clean body of its shapes clean; damaged by one edit, the same.
        #[test]
        fn the_template_says_clean_only_when_the_check_does(text in body(), edit in one_edit()) {
            let by_value = clean_as_a_value(&text);
            let unescaped = !text.contains("\\u0061");
            prop_assert_eq!(clean(&text), by_value && unescaped, "{}", text);
            if let Some(damaged) = edit.apply(&text) {
                prop_assert!(!clean(&damaged) || clean_as_a_value(&damaged), "{}", damaged);
            }
        }
    }
}
