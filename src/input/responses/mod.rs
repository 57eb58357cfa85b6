//! OpenAI Responses API logs: stored input lists, response objects, request/response pairs,
//! `previous_response_id` chains and stateless logs that resend the history.
//!
//! Each record is one entry: a `{request, response}` pair (the response a body or SSE events,
//! reassembled from `response.completed` or the `response.output_item.done` items), a request
//! body (`input`), a response object (`object: "response"`, `output`), or a stored input list
//! (`{"object": "list", "data": [...]}`, or a bare list of items). An entry whose request names a
//! `previous_response_id` continues the entry whose response has that id: its history is the
//! earlier history, that response's output, then its own input. A `previous_response_id` no
//! entry of the file answers is quarantined with the id, with every entry continuing it. The
//! histories are then grouped into chains like every stateless log ([`super::chain`]), a linked
//! entry after the one it continues wherever the log wrote it (newest first too).
//!
//! Memory and time are linear in the log: the links are followed without recursion
//! ([`resolve`]), a history is held as its parent's plus the entry's own items (never a copy of
//! the parent's), and only a conversation being written is made whole.
//!
//! Items pass through normalised: `id`, `status`, `annotations` and `logprobs` dropped; a message
//! without `type` (string content) is a message; `reasoning` items become the next message's
//! [`Thinking`] (origin OpenAI, `encrypted_content` carried for the converter's
//! `policy.encrypted_reasoning`); `instructions` become a leading system message, which the
//! `[[rule]]`s classify (base instructions by default). Items Codex 0.169 does not know
//! (`code_interpreter_call`, `image_generation_call`, `mcp_call`, `web_search_call`,
//! `file_search_call`, `local_shell_call`, `computer_call`, ...) follow `policy.hosted_tool`:
//! a call and its output Codex knows, a text placeholder, or dropped (counted).

mod entry;
mod items;
mod links;
#[cfg(test)]
mod tests;

use serde_json::{json, Value};

use super::chain;
use super::format::{FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceFormat};
use super::sse;
use super::InputError;
use crate::rules::policy::ResentHistory;

use entry::entry_of;
pub(crate) use entry::Entry;
use items::transcript;
pub(crate) use links::resolve;

pub(crate) struct ResponsesReader;

impl SourceFormat {
    /// OpenAI Responses API logs: inputs, responses, pairs, previous_response_id chains.
    pub const RESPONSES: SourceFormat = SourceFormat::named("responses");
}

const FORMAT: SourceFormat = SourceFormat::RESPONSES;

/// Keys an item loses on the way to Codex.
const NORMALISED: [&str; 4] = ["id", "status", "annotations", "logprobs"];

fn is_response(value: &Value) -> bool {
    value.get("object").and_then(Value::as_str) == Some("response")
        && value.get("output").is_some_and(Value::is_array)
}

fn is_item(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str).is_some() || value.get("role").is_some()
}

fn is_request(value: &Value) -> bool {
    let input = value.get("input");
    input.is_some_and(|i| i.is_array() || i.is_string())
        && value.get("messages").is_none()
        && (value.get("model").is_some()
            || value.get("instructions").is_some()
            || value.get("previous_response_id").is_some()
            || input.and_then(Value::as_array).is_some_and(|items| {
                items.iter().any(|i| {
                    i.get("type").and_then(Value::as_str).is_some_and(|t| {
                        matches!(
                            t,
                            "message" | "function_call" | "function_call_output" | "reasoning"
                        )
                    })
                })
            }))
}

fn is_pair(value: &Value) -> bool {
    let Some(request) = value.get("request") else {
        return false;
    };
    let body = request.get("body").unwrap_or(request);
    let uri = request
        .get("uri")
        .or_else(|| request.get("url"))
        .and_then(Value::as_str);
    let response = value.get("response");
    let response_body = response
        .and_then(|r| r.get("body"))
        .unwrap_or(response.unwrap_or(&Value::Null));
    body.get("input").is_some()
        && body.get("messages").is_none()
        && (uri.is_some_and(|u| u.contains("/responses"))
            || is_response(response_body)
            || sse::events(value).is_some_and(|events| {
                events.data.iter().any(|e| {
                    e.get("type")
                        .and_then(Value::as_str)
                        .is_some_and(|t| t.starts_with("response."))
                })
            }))
}

fn is_input_list(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.get("object").and_then(Value::as_str) == Some("list")
                && map
                    .get("data")
                    .and_then(Value::as_array)
                    .is_some_and(|d| d.iter().all(is_item))
                && map.get("data").and_then(Value::as_array).is_some_and(|d| {
                    d.iter()
                        .any(|i| i.get("type").and_then(Value::as_str).is_some())
                })
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) | Value::Array(_) => {
            false
        }
    }
}

impl FormatReader for ResponsesReader {
    fn format(&self) -> SourceFormat {
        SourceFormat::RESPONSES
    }

    fn describe(&self) -> &'static str {
        "OpenAI Responses API logs: inputs, responses, pairs, previous_response_id chains"
    }

    fn granularity(&self) -> Granularity {
        Granularity::File
    }

    fn detect(&self, first: Option<&Value>, _raw: &[u8]) -> bool {
        first.is_some_and(|v| is_pair(v) || is_response(v) || is_request(v) || is_input_list(v))
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        let mut read = FileRead::default();
        let mut entries = Vec::new();
        for record in records {
            match entry_of(record.value, record.index) {
                Ok(entry) => entries.push(entry),
                Err(problem) => read.refused.push((
                    record.index,
                    InputError::NotInFormat {
                        format: FORMAT,
                        problem,
                    },
                )),
            }
        }
        conversations(entries, context, &mut read);
        read.conversations
            .sort_by_key(|c| c.records.first().copied());
        read
    }
}

fn conversations(entries: Vec<Entry>, context: &ReadContext<'_>, read: &mut FileRead) {
    let links = resolve(&entries);
    // The entries whose history resolves, in file order, and each one's place among them.
    let mut kept: Vec<usize> = Vec::new();
    let mut place: Vec<Option<usize>> = vec![None; entries.len()];
    for (i, link) in links.parents.iter().enumerate() {
        match link {
            Ok(_) => {
                place[i] = Some(kept.len());
                kept.push(i);
            }
            Err(missing) => read
                .refused
                .push((entries[i].record, InputError::MissingLink(missing.clone()))),
        }
    }
    // Each entry's history as compared: its parent's history and output (shared, not
    // copied), then its own input; parts made parents first.
    let mut histories = chain::Histories::default();
    let mut input_part = vec![None; entries.len()];
    let mut output_part = vec![None; entries.len()];
    for &i in &links.settled {
        let parent = links.parent(i);
        let entry = &entries[i];
        let before = parent.and_then(|p| output_part[p]);
        let input = histories.part(
            before,
            entry.input.iter().map(normalise_for_compare).collect(),
        );
        input_part[i] = Some(input);
        let output = entry.output.iter().map(normalise_for_compare).collect();
        output_part[i] = Some(histories.part(Some(input), output));
    }
    for &i in &kept {
        let after = links.parent(i).and_then(|p| place[p]);
        histories.request(input_part[i], after);
    }
    let members: Vec<Member> = kept
        .iter()
        .map(|&i| Member {
            entry: i,
            records: [entries[i].record],
        })
        .collect();
    let merge = context.rules.policy.resent_history == ResentHistory::Merge;
    let merged = "request merged into a later one continuing its history";
    chain::drive(members, histories, merge, merged, read, |members| {
        let mut unreadable = sse::Unreadable::default();
        members
            .iter()
            .for_each(|m| unreadable.add(entries[m.entry].unreadable));
        let Some(last) = members.last().map(|m| m.entry) else {
            return Err(InputError::NotARecord("empty chain"));
        };
        // Only the conversation written is made whole: its ancestors' items, copied once.
        let mut items = links.history(last, &entries);
        items.extend(entries[last].output.iter().cloned());
        let mut transcript = transcript(items, &entries[last], context)?;
        transcript.source_notes.extend(unreadable.note());
        Ok(transcript)
    });
}

/// A resolved entry, as the chain driver sees it.
struct Member {
    entry: usize,
    /// The entry's record, as the chain driver asks for it.
    records: [usize; 1],
}

impl chain::Link for Member {
    fn records(&self) -> &[usize] {
        &self.records
    }
}

/// An item as compared between requests: normalised keys dropped, a message's string content
/// as one `input_text`, and `type: "message"` implied.
fn normalise_for_compare(item: &Value) -> Value {
    let mut value = chain::canonical(item, &NORMALISED, "input_text");
    if let Value::Object(map) = &mut value {
        if map.contains_key("role") && !map.contains_key("type") {
            map.insert("type".into(), json!("message"));
        }
        // An assistant's echoed output_text and a typed input_text say the same.
        if let Some(Value::Array(parts)) = map.get_mut("content") {
            for part in parts {
                if part.get("type").and_then(Value::as_str) == Some("output_text") {
                    part["type"] = json!("input_text");
                }
            }
        }
    }
    value
}
