//! ShareGPT-style turn lists, for every reader of datasets that hold them (ShareGPT JSON,
//! Parquet datasets): the roles `[input.sharegpt]` names, `function_call` values as calls,
//! observations as the outputs of the calls waiting (one observation for several parallel
//! calls by `policy.shared_observation`), and a dataset's `tools` column.

use std::collections::VecDeque;

use serde_json::{Map, Value};

use super::builder::TranscriptBuilder;
use super::format::ReadContext;
use super::InputError;
use crate::model::transcript::{Content, Message, Part, Role, ToolCall};
use crate::rules::policy::SharedObservation;
use crate::rules::{Builtin, PolicyId};

/// Calls waiting for their outputs, in call order (a queue: N parallel calls and their N
/// observations are O(N)).
#[derive(Default)]
pub(crate) struct Pairing {
    pub(crate) pending: VecDeque<String>,
}

/// For each turn, how many observations follow in a row from it, itself included: counted
/// once from the end (counting from each observation was O(N²) in a run of N).
pub(crate) fn observation_runs(
    is_observation: impl DoubleEndedIterator<Item = bool>,
) -> Vec<usize> {
    let mut runs: Vec<usize> = is_observation
        .rev()
        .scan(0, |run, observation| {
            *run = if observation { *run + 1 } else { 0 };
            Some(*run)
        })
        .collect();
    runs.reverse();
    runs
}

/// The role a turn's tag names, after `[input.sharegpt]` and the role aliases.
pub(crate) enum Turn {
    Role(String, Option<String>),
    Call,
    Observation,
}

pub(crate) fn turn_of(tag: &str, context: &ReadContext<'_>) -> Turn {
    let tags = &context.rules.input.sharegpt;
    let aliases = &context.rules.input.role_aliases;
    if tag == tags.function_tag {
        return Turn::Call;
    }
    if tag == tags.observation_tag || tag == "tool" {
        return Turn::Observation;
    }
    let named = if tag == tags.user_tag {
        Some("user")
    } else if tag == tags.assistant_tag {
        Some("assistant")
    } else if tag == tags.system_tag {
        Some("system")
    } else {
        None
    };
    match (named, aliases.get(tag)) {
        (Some(role), _) if role == tag => Turn::Role(role.into(), None),
        (Some(role), _) => Turn::Role(role.into(), Some(tag.to_string())),
        (None, Some(alias)) => Turn::Role(alias.clone(), Some(tag.to_string())),
        (None, None) => Turn::Role(tag.to_string(), None),
    }
}

/// A list of `{from, value}` turns (the keys and tags of `[input.sharegpt]`) at `path`, as
/// messages: `function_call` turns as calls with ids `call_<turn>_<k>`, observations as the
/// outputs of the calls waiting.
pub(crate) fn classic_turns(
    turns: Vec<Value>,
    path: &str,
    context: &ReadContext<'_>,
    messages: &mut Vec<Message>,
) -> Result<(), InputError> {
    let tags = &context.rules.input.sharegpt;
    let runs = observation_runs(turns.iter().map(|t| {
        t.get(&tags.role_tag)
            .and_then(Value::as_str)
            .is_some_and(|tag| matches!(turn_of(tag, context), Turn::Observation))
    }));
    let mut pairing = Pairing::default();
    for (i, turn) in turns.into_iter().enumerate() {
        let Value::Object(mut turn) = turn else {
            return Err(bad(path, i, "is not an object"));
        };
        let tag = match turn.get(&tags.role_tag) {
            Some(Value::String(tag)) => tag.clone(),
            _ => return Err(bad(path, i, &format!("has no string `{}`", tags.role_tag))),
        };
        let text = match turn.remove(&tags.content_tag) {
            Some(Value::String(text)) => text,
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        match turn_of(&tag, context) {
            Turn::Call => messages.push(call_message(&text, i, &mut pairing)),
            Turn::Observation => {
                let run = runs.get(i).copied().unwrap_or(0);
                messages.push(observation(Content::Text(text), run, context, &mut pairing));
            }
            Turn::Role(role, aliased_from) => messages.push(Message {
                role: Role::named(role),
                aliased_from,
                content: Content::Text(text),
                ..Message::default()
            }),
        }
    }
    Ok(())
}

/// Turn `index` of the list at `path` cannot be read: `problem`.
pub(crate) fn bad(path: &str, index: usize, problem: &str) -> InputError {
    InputError::BadMessage {
        path: path.into(),
        index,
        problem: problem.into(),
    }
}

/// The calls of a `function_call` value (or a `tool_call` part).
pub(crate) fn calls_of(text: &str, turn: usize) -> Vec<ToolCall> {
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    let list = match parsed {
        Some(Value::Array(list)) if list.iter().all(|c| c.get("name").is_some()) => list,
        Some(one @ Value::Object(_)) if one.get("name").is_some() => vec![one],
        _ => {
            return vec![ToolCall {
                id: Some(format!("call_{turn}_0")),
                name: "function_call".into(),
                arguments: text.to_string(),
                custom: true,
                ..ToolCall::default()
            }]
        }
    };
    list.into_iter()
        .enumerate()
        .map(|(k, call)| {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let (arguments, from_object, missing) = match call.get("arguments") {
                None | Some(Value::Null) => (String::new(), false, true),
                Some(Value::String(s)) => (s.clone(), false, false),
                Some(v) => (v.to_string(), v.is_object(), false),
            };
            ToolCall {
                id: Some(format!("call_{turn}_{k}")),
                name,
                arguments,
                arguments_from_object: from_object,
                arguments_missing: missing,
                custom: false,
            }
        })
        .collect()
}

pub(crate) fn call_message(text: &str, turn: usize, pairing: &mut Pairing) -> Message {
    let calls = calls_of(text, turn);
    pairing.pending = calls.iter().filter_map(|c| c.id.clone()).collect();
    Message {
        role: Role::Assistant,
        content: Content::Missing,
        tool_calls: calls,
        ..Message::default()
    }
}

/// A tool output answering the next pending call(s). `run` is how many outputs follow in a
/// row (this one included): fewer than the calls pending means one output for several calls.
pub(crate) fn observation(
    content: Content,
    run: usize,
    context: &ReadContext<'_>,
    pairing: &mut Pairing,
) -> Message {
    let mut message = Message {
        role: Role::Tool,
        content,
        ..Message::default()
    };
    if pairing.pending.is_empty() {
        return message;
    }
    if run >= pairing.pending.len() || run > 1 {
        message.tool_call_ids = pairing.pending.pop_front().into_iter().collect();
        return message;
    }
    // One observation for several calls.
    let ids: Vec<String> = std::mem::take(&mut pairing.pending).into();
    match context.rules.policy.shared_observation {
        SharedObservation::First => {
            message.tool_call_ids = vec![ids[0].clone()];
            // The others are answered by policy.missing_output.
        }
        SharedObservation::All => message.tool_call_ids = ids,
        SharedObservation::Split => {
            let text = match &message.content {
                Content::Text(t) => Some(t.clone()),
                Content::Missing | Content::Null | Content::Parts(_) => None,
            };
            let items = text
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| match v {
                    Value::Array(items) if items.len() == ids.len() => Some(items),
                    Value::Null
                    | Value::Bool(_)
                    | Value::Number(_)
                    | Value::String(_)
                    | Value::Array(_)
                    | Value::Object(_) => None,
                });
            match items {
                Some(items) => {
                    // Marked for the caller: each item its own output, in call order.
                    message.tool_call_ids = ids;
                    message.content = Content::Parts(
                        items
                            .into_iter()
                            .map(|item| match item {
                                Value::String(s) => Part::Text(s),
                                other @ Value::Null
                                | other @ Value::Bool(_)
                                | other @ Value::Number(_)
                                | other @ Value::Array(_)
                                | other @ Value::Object(_) => Part::Text(other.to_string()),
                            })
                            .collect(),
                    );
                    message.name = Some(SPLIT_MARK.into());
                }
                None => message.tool_call_ids = ids,
            }
        }
    }
    message
}

/// Set on an observation split one item per call (see [`split_observations`]).
const SPLIT_MARK: &str = "\u{0}split";

/// Turns each observation marked for splitting into one tool message per call.
pub(crate) fn split_observations(messages: &mut Vec<Message>, built: &mut TranscriptBuilder) {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages.drain(..) {
        if message.name.as_deref() != Some(SPLIT_MARK) {
            out.push(message);
            continue;
        }
        let Content::Parts(parts) = message.content else {
            continue;
        };
        built.note(
            PolicyId::SharedObservation,
            "observation split one item per parallel call",
            1,
            0,
        );
        for (id, part) in message.tool_call_ids.into_iter().zip(parts) {
            let text = match part {
                Part::Text(t) => t,
                Part::Image { .. }
                | Part::Audio { .. }
                | Part::File { .. }
                | Part::Refusal(_)
                | Part::Unknown { .. } => String::new(),
            };
            out.push(Message {
                role: Role::Tool,
                content: Content::Text(text),
                tool_call_ids: vec![id],
                ..Message::default()
            });
        }
    }
    *messages = out;
}

/// The row's `tools` (a JSON string of function schemas, or a list): the transcript's tools
/// and a note naming them.
pub(crate) fn dataset_tools(tools: Value, built: &mut TranscriptBuilder) {
    let parsed = match tools {
        Value::String(text) => serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        other @ Value::Null
        | other @ Value::Bool(_)
        | other @ Value::Number(_)
        | other @ Value::Array(_)
        | other @ Value::Object(_) => other,
    };
    let list = match parsed {
        Value::Array(list) => list,
        Value::Object(_) => vec![parsed],
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => Vec::new(),
    };
    let mut names = Vec::new();
    for tool in list {
        let function = match tool.get("function") {
            Some(f) => f.clone(),
            None => tool.clone(),
        };
        if let Some(name) = function.get("name").and_then(Value::as_str) {
            names.push(name.to_string());
        }
        let mut wrapped = Map::new();
        wrapped.insert("type".into(), Value::String("function".into()));
        wrapped.insert("function".into(), function);
        built.tool(Value::Object(wrapped));
    }
    let what = if names.is_empty() {
        "dataset tools: none readable".to_string()
    } else {
        format!("dataset tools: {}", names.join(", "))
    };
    built.note(Builtin::DatasetTools, &what, 1, 0);
}
