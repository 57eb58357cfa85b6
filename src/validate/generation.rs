//! Which generation of Codex rollout a file is, and the checks of the paginated form:
//! ordinals contiguous from 0 on every line, and one mode per file (a legacy file carries no
//! ordinal; a paginated one's session meta says so). A missing or repeated ordinal stalls
//! Codex's projection of the thread (openai/codex #38792, #45150).
//!
//! A paginated file shows its turns by `item_completed` events, not by `user_message` and
//! `agent_message` events: its UI parity (invariant 11) is checked by those here.
//!
//! A pre-envelope file is not checked line by line: every line would fail the envelope, and
//! what the user needs is its name and the command that converts it.

use memchr::memmem;
use serde_json::Value;

use super::{Findings, Invariant};
use crate::model::rollout::generation::{Generation, HISTORY_MODE, ORDINAL, PAGINATED};
use crate::model::rollout::wire::{content, item, key, line, role, tag};
use crate::rules::Marker;

/// The start of a line that is surely an envelope (how every writer we know starts one).
const ENVELOPE_START: &[u8] = b"{\"timestamp\":\"";
/// An `ordinal` key as a compact writer writes it (inside a JSON string its quotes would be
/// escaped, so only a key matches).
const ORDINAL_KEY: &[u8] = b"\"ordinal\":";
const PAGINATED_MODE: &[u8] = b"\"history_mode\":\"paginated\"";

/// The generation of the rollout in `bytes`, by its first line; `None` when that line is no
/// rollout's (or the file is empty).
pub(crate) fn generation(bytes: &[u8]) -> Option<Generation> {
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let first = body
        .split(|b| *b == b'\n')
        .find(|l| !l.iter().all(u8::is_ascii_whitespace))?;
    let marked =
        memmem::find(first, ORDINAL_KEY).is_some() || memmem::find(first, PAGINATED_MODE).is_some();
    if first.starts_with(ENVELOPE_START) && !marked {
        // The common case (every rollout rollover writes): no parse of a long first line.
        return Some(Generation::Legacy);
    }
    let value: Value = serde_json::from_slice(first).ok()?;
    Generation::of_first_line(&value)
}

/// One mode per file, and a paginated file's ordinals (contiguous from 0, one a line) and UI
/// (invariant 11, by `item_completed` events: a paginated file has no `user_message` or
/// `agent_message` events).
pub(super) fn check(bytes: &[u8], generation: Generation, markers: &[Marker], out: &mut Findings) {
    match generation {
        Generation::Paginated => check_paginated(bytes, markers, out),
        Generation::Legacy => check_legacy(bytes, out),
        Generation::PreEnvelope => {}
    }
}

/// The lines of `bytes` that are JSON objects, with their 1-based numbers.
fn objects(bytes: &[u8]) -> impl Iterator<Item = (usize, serde_json::Map<String, Value>)> + '_ {
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter_map(|(i, raw)| match serde_json::from_slice::<Value>(raw) {
            Ok(Value::Object(object)) => Some((i + 1, object)),
            Ok(_) | Err(_) => None,
        })
}

fn check_legacy(bytes: &[u8], out: &mut Findings) {
    // Most files hold no ordinal anywhere: one fast search, and no line parsed.
    if memmem::find(bytes, ORDINAL_KEY).is_none() {
        return;
    }
    for (n, object) in objects(bytes) {
        if object.contains_key(ORDINAL) {
            out.violation(
                Invariant::LineFormat,
                n,
                "a line with an `ordinal` in a legacy rollout: a file is legacy or paginated, never both"
                    .to_string(),
            );
        }
    }
}

fn check_paginated(bytes: &[u8], markers: &[Marker], out: &mut Findings) {
    let mut expected: u64 = 0;
    let mut ui = PaginatedUi::default();
    for (n, object) in objects(bytes) {
        ui.line(n, &object, markers);
        match object.get(ORDINAL).and_then(Value::as_u64) {
            None => out.violation(
                Invariant::LineFormat,
                n,
                "a line without an `ordinal` in a paginated rollout: a file is legacy or paginated, never both"
                    .to_string(),
            ),
            Some(ordinal) if ordinal != expected => {
                out.violation(
                    Invariant::LineFormat,
                    n,
                    format!(
                        "ordinal {ordinal} where {expected} comes next: ordinals run from 0 without a gap or a repeat (Codex's projection stalls otherwise)"
                    ),
                );
                expected = ordinal + 1;
            }
            Some(_) => expected += 1,
        }
        let is_meta = object.get(line::TYPE).and_then(Value::as_str) == Some(tag::SESSION_META);
        let mode = object
            .get(line::PAYLOAD)
            .and_then(|p| p.get(HISTORY_MODE))
            .and_then(Value::as_str);
        if is_meta && mode.is_some_and(|m| m != PAGINATED) {
            out.violation(
                Invariant::SessionMeta,
                n,
                format!(
                    "history_mode `{}` in a paginated rollout: one mode per file",
                    mode.unwrap_or_default()
                ),
            );
        }
    }
    ui.finish(out);
}

/// The kinds of message a paginated rollout's UI shows, by the `item_completed` item's type.
const USER_ITEM: &str = "UserMessage";
const AGENT_ITEM: &str = "AgentMessage";

/// Real user and assistant messages, and the `item_completed` events the UI shows them by:
/// the n-th of a kind pairs with the n-th event of that kind, with the same text.
#[derive(Default)]
struct PaginatedUi {
    users: Vec<(usize, String)>,
    assistants: Vec<(usize, String)>,
    user_events: Vec<String>,
    agent_events: Vec<String>,
}

/// The `text` fields of a list of parts, joined by newlines.
fn joined(parts: Option<&Value>, kinds: &[&str]) -> String {
    let texts: Vec<&str> = parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|p| {
            p.get(key::TYPE)
                .and_then(Value::as_str)
                .is_some_and(|t| kinds.contains(&t))
        })
        .filter_map(|p| p.get(key::TEXT).and_then(Value::as_str))
        .collect();
    texts.join("\n")
}

impl PaginatedUi {
    fn line(&mut self, n: usize, object: &serde_json::Map<String, Value>, markers: &[Marker]) {
        let Some(payload) = object.get(line::PAYLOAD) else {
            return;
        };
        let kind = payload.get(key::TYPE).and_then(Value::as_str);
        match object.get(line::TYPE).and_then(Value::as_str) {
            Some(tag::RESPONSE_ITEM) if kind == Some(item::MESSAGE) => {
                let content = payload.get(key::CONTENT);
                match payload.get(key::ROLE).and_then(Value::as_str) {
                    Some(role::USER) => {
                        let contextual = content
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(|p| p.get(key::TEXT).and_then(Value::as_str))
                            .any(|t| markers.iter().any(|m| m.wraps(t)));
                        if !contextual {
                            let text = joined(content, &[content::INPUT_TEXT]);
                            self.users.push((n, text));
                        }
                    }
                    Some(role::ASSISTANT) => {
                        let text = joined(content, &[content::OUTPUT_TEXT]);
                        self.assistants.push((n, text));
                    }
                    _ => {}
                }
            }
            Some(tag::EVENT_MSG) if kind == Some(ITEM_COMPLETED) => {
                let item = payload.get("item");
                let text = joined(item.and_then(|i| i.get(key::CONTENT)), &["text", "Text"]);
                match item.and_then(|i| i.get(key::TYPE)).and_then(Value::as_str) {
                    Some(USER_ITEM) => self.user_events.push(text),
                    Some(AGENT_ITEM) => self.agent_events.push(text),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn finish(self, out: &mut Findings) {
        let pairs = [
            (self.users, self.user_events, "real user", USER_ITEM),
            (self.assistants, self.agent_events, "assistant", AGENT_ITEM),
        ];
        for (messages, events, who, item_type) in pairs {
            for (i, (n, text)) in messages.iter().enumerate() {
                match events.get(i) {
                    None => out.violation(
                        Invariant::UiParity,
                        *n,
                        format!("{who} message without an item_completed {item_type} event"),
                    ),
                    Some(shown) if shown != text => out.violation(
                        Invariant::UiParity,
                        *n,
                        format!(
                            "its item_completed {item_type} event shows another text ({} bytes, the message has {})",
                            shown.len(),
                            text.len()
                        ),
                    ),
                    Some(_) => {}
                }
            }
        }
    }
}

/// The event a paginated rollout shows a completed item by.
const ITEM_COMPLETED: &str = "item_completed";

#[cfg(test)]
mod tests {
    use super::*;

    fn findings(text: &str) -> Vec<(usize, String)> {
        let mut out = Findings::default();
        let g = generation(text.as_bytes()).expect("a rollout");
        check(text.as_bytes(), g, &[], &mut out);
        out.violations
            .into_iter()
            .map(|v| (v.line, v.message))
            .collect()
    }

    #[test]
    fn generations_by_the_first_line() {
        assert_eq!(
            generation(b"{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{}}\n"),
            Some(Generation::Legacy)
        );
        assert_eq!(
            generation(
                b"\n{\"timestamp\":\"t\",\"ordinal\":0,\"type\":\"session_meta\",\"payload\":{}}\n"
            ),
            Some(Generation::Paginated)
        );
        assert_eq!(
            generation(
                b"{\"id\":\"00000000-0000-0000-0000-000000000001\",\"timestamp\":\"t\",\"instructions\":null}\n{\"record_type\":\"state\"}\n"
            ),
            Some(Generation::PreEnvelope)
        );
        assert_eq!(generation(b"{\"messages\":[]}\n"), None);
        assert_eq!(generation(b""), None);
    }

    #[test]
    fn paginated_ordinals_run_from_zero_and_modes_do_not_mix() {
        let good = "{\"timestamp\":\"t\",\"ordinal\":0,\"type\":\"session_meta\",\"payload\":{\"history_mode\":\"paginated\"}}\n\
                    {\"timestamp\":\"t\",\"ordinal\":1,\"type\":\"event_msg\",\"payload\":{}}\n";
        assert_eq!(findings(good), []);
        let gap = "{\"timestamp\":\"t\",\"ordinal\":0,\"type\":\"session_meta\",\"payload\":{\"history_mode\":\"legacy\"}}\n\
                   {\"timestamp\":\"t\",\"ordinal\":2,\"type\":\"event_msg\",\"payload\":{}}\n\
                   {\"timestamp\":\"t\",\"ordinal\":2,\"type\":\"event_msg\",\"payload\":{}}\n\
                   {\"timestamp\":\"t\",\"type\":\"event_msg\",\"payload\":{}}\n";
        let lines: Vec<usize> = findings(gap).iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [1, 2, 3, 4]);
        let mixed = "{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{}}\n\
                     {\"timestamp\":\"t\",\"ordinal\":1,\"type\":\"event_msg\",\"payload\":{\"text\":\"\\\"ordinal\\\":\"}}\n";
        let found = findings(mixed);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, 2);
    }
}
