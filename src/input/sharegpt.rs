//! ShareGPT-style fine-tuning datasets, one row at a time (a JSON array is split one record per
//! element, JSONL one per line).
//!
//! Shapes:
//! - classic: `{"conversations": [{"from", "value"}], "system"?, "tools"?}`, the keys and role
//!   names from `[input.sharegpt]` (LLaMA-Factory's `from`/`value`, `human`/`gpt`/
//!   `function_call`/`observation`/`system` by default). A `function_call` value (one
//!   `{"name", "arguments"}` object or a list of them for parallel calls) becomes calls with
//!   deterministic ids (`call_<turn>_<k>`); a value that is not JSON a freeform call. An
//!   `observation` answers the calls before it, in order; one observation after several calls
//!   is `policy.shared_observation`.
//! - LLaMA-Factory's typed parts: `{"messages": [{"role", "content": [{"type": "text" |
//!   "reasoning" | "tool_call", "value"}]}], "tools"?}`: reasoning parts become the message's
//!   reasoning, tool-call parts calls, `tool` messages their outputs.
//! - OpenAI style with media: `{"messages": [{"role", "content"}], "images": [paths]}`: each
//!   `<image>` in the text is the next image, read from the file relative to the dataset as a
//!   `data:` URL, or `policy.missing_image` when the file is not there or is refused: only a
//!   regular file inside the input tree, within 20 MiB, is read ([`super::inside`]).
//!
//! The `tools` string is kept as the transcript's tools (the Responses output translates them)
//! and its tool names are recorded in the audit (`builtin.dataset-tools`). The turns, calls,
//! observations and tools are read by [`super::turns`], which Parquet datasets share.

use std::path::Path;

use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::builder::TranscriptBuilder;
use super::fields::{object_or_default, Loose};
use super::format::{FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceFormat};
use super::inside::{Refusal, IMAGE_CAP};
use super::messages::{alias_role, read_message_list};
use super::turns::{
    bad, calls_of, classic_turns, dataset_tools, observation, observation_runs, split_observations,
    Pairing,
};
use super::InputError;
use crate::model::transcript::{Content, Message, Part, Role, Transcript};
use crate::rules::policy::MissingImage;
use crate::rules::template::fill;
use crate::rules::{Builtin, PolicyId, ShareGptTags};

pub(crate) struct ShareGptReader;

impl SourceFormat {
    /// ShareGPT-style datasets (conversations/from/value, LLaMA-Factory variants).
    pub const SHAREGPT: SourceFormat = SourceFormat::named("sharegpt");
}

const FORMAT: SourceFormat = SourceFormat::SHAREGPT;

fn is_classic(value: &Value, tags: &ShareGptTags) -> bool {
    value
        .get("conversations")
        .and_then(Value::as_array)
        .is_some_and(|turns| {
            !turns.is_empty()
                && turns
                    .iter()
                    .all(|t| t.get(&tags.role_tag).is_some() && t.get(&tags.content_tag).is_some())
        })
}

fn is_typed(value: &Value) -> bool {
    value
        .get("messages")
        .and_then(Value::as_array)
        .is_some_and(|messages| has_typed_parts(messages))
}

/// Whether a message has LLaMA-Factory's typed parts (`{type, value}`).
fn has_typed_parts(messages: &[Value]) -> bool {
    messages.iter().any(|m| {
        m.get("content")
            .and_then(Value::as_array)
            .is_some_and(|parts| {
                parts.iter().any(|p| {
                    p.get("value").is_some() && p.get("type").and_then(Value::as_str).is_some()
                })
            })
    })
}

fn has_media(value: &Value) -> bool {
    value.get("messages").is_some_and(Value::is_array)
        && ["images", "videos", "audios"]
            .iter()
            .any(|k| value.get(*k).is_some_and(Value::is_array))
}

impl FormatReader for ShareGptReader {
    fn format(&self) -> SourceFormat {
        SourceFormat::SHAREGPT
    }

    fn describe(&self) -> &'static str {
        "ShareGPT-style datasets (conversations/from/value, LLaMA-Factory variants)"
    }

    fn granularity(&self) -> Granularity {
        Granularity::Record
    }

    fn detect(&self, first: Option<&Value>, _raw: &[u8]) -> bool {
        // Detection runs before any rule file is known to the reader: LLaMA-Factory's tags.
        // `conversations` of `role`/`content` messages stay Chat Completions records (the chat
        // reader reads them as it always did); `--from sharegpt` with `[input.sharegpt]`
        // tags reads them as ShareGPT.
        first
            .is_some_and(|v| is_classic(v, &ShareGptTags::default()) || is_typed(v) || has_media(v))
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        FileRead::each(records, |row| read_row(row, context))
    }
}

fn not_format(problem: impl Into<String>) -> InputError {
    InputError::NotInFormat {
        format: FORMAT,
        problem: problem.into(),
    }
}

/// A row: the fields converted, typed (a field of another type is as if absent), and the rest
/// by name, which the audit names as ignored. Which of `conversations` and `messages` is the
/// conversation depends on the row's shape: the other one is ignored too.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Row {
    /// Present, `null` too: named as ignored once read for their tool names.
    tools: Loose<Value>,
    system: Loose<String>,
    /// A list of paths, or one path.
    images: Option<Value>,
    conversations: Option<Value>,
    messages: Option<Value>,
    /// A preference row's answers.
    chosen: Option<Value>,
    rejected: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A message of LLaMA-Factory's typed parts, its fields other than `role` and `content` by
/// name.
#[derive(Deserialize, Default)]
#[serde(default)]
struct TypedMessage {
    role: Loose<String>,
    content: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// One `{type, value}` part (`text` in place of `value` too; present, even `null`).
#[derive(Deserialize, Default)]
#[serde(default)]
struct TypedPart {
    #[serde(rename = "type")]
    kind: Loose<String>,
    value: Loose<Value>,
    text: Loose<Value>,
}

/// One row as a transcript.
pub(crate) fn read_row(value: Value, context: &ReadContext<'_>) -> Result<Transcript, InputError> {
    let rules = &context.rules.input;
    let tags = &rules.sharegpt;
    let classic = is_classic(&value, tags);
    if !value.is_object() {
        return Err(not_format("a row is not a JSON object"));
    }
    let mut row: Row = object_or_default(value);
    let messages_at = if classic { "conversations" } else { "messages" };
    let mut built = TranscriptBuilder::new(SourceFormat::SHAREGPT, messages_at);
    let system = row.system.0.filter(|text| !text.is_empty());
    let images: Vec<String> = match row.images {
        Some(Value::Array(list)) => list.into_iter().map(super::fields::text_or_json).collect(),
        Some(Value::String(one)) => vec![one],
        _ => Vec::new(),
    };
    let mut messages = Vec::new();
    if let Some(text) = system {
        messages.push(Message {
            role: Role::System,
            content: Content::Text(text),
            ..Message::default()
        });
    }
    // The fields of the shape not read: ignored, as every other field of the row.
    let mut unread: Vec<(&str, Option<Value>)> = Vec::new();
    let list = match row.messages.take() {
        Some(Value::Array(list)) if !classic => Some(list),
        other => {
            unread.push(("messages", other));
            None
        }
    };
    if classic {
        let mut turns = match row.conversations {
            Some(Value::Array(turns)) => turns,
            _ => Vec::new(),
        };
        // A preference row: the chosen answer ends the conversation, the rejected one is
        // dropped and counted.
        let as_turn = |v: Value| match v {
            Value::String(text) => {
                let mut turn = Map::new();
                turn.insert(
                    tags.role_tag.clone(),
                    Value::String(tags.assistant_tag.clone()),
                );
                turn.insert(tags.content_tag.clone(), Value::String(text));
                vec![Value::Object(turn)]
            }
            Value::Array(list) => list,
            other @ Value::Null
            | other @ Value::Bool(_)
            | other @ Value::Number(_)
            | other @ Value::Object(_) => vec![other],
        };
        if let Some(chosen) = row.chosen {
            turns.extend(as_turn(chosen));
        }
        if let Some(rejected) = row.rejected {
            let bytes: usize = as_turn(rejected)
                .iter()
                .filter_map(|t| t.get(&tags.content_tag).and_then(Value::as_str))
                .map(str::len)
                .sum();
            built.note(
                Builtin::PreferenceRejected,
                "rejected answer of a preference row",
                1,
                bytes,
            );
        }
        classic_turns(turns, "conversations", context, &mut messages)?;
    } else {
        unread.extend([
            ("conversations", row.conversations),
            ("chosen", row.chosen),
            ("rejected", row.rejected),
        ]);
        match list {
            Some(list) if has_typed_parts(&list) => {
                typed_messages(list, context, &mut messages)?;
            }
            // OpenAI style: the Chat Completions message reader, then the media.
            Some(list) => messages.extend(read_message_list(list, false, "messages", rules)?),
            None => {
                return Err(not_format(
                    "no `conversations` of {from, value} turns and no `messages` list",
                ))
            }
        }
    }
    if !images.is_empty()
        || messages
            .iter()
            .any(|m| m.content.texts().iter().any(|t| t.contains("<image>")))
    {
        place_images(&mut messages, images, context, &mut built)?;
    }
    if let Some(tools) = row.tools.0 {
        dataset_tools(tools, &mut built);
        built.ignore("tools");
    }
    for (key, value) in unread {
        if let Some(value) = value {
            row.rest.insert(key.to_string(), value);
        }
    }
    // What is left of the row is not converted.
    for (key, v) in row.rest {
        if !v.is_null() {
            built.ignore(key);
        }
    }
    split_observations(&mut messages, &mut built);
    if messages.is_empty() {
        return Err(InputError::EmptyMessages("conversations".into()));
    }
    built.messages(messages);
    built.finish()
}

fn typed_messages(
    list: Vec<Value>,
    context: &ReadContext<'_>,
    messages: &mut Vec<Message>,
) -> Result<(), InputError> {
    // A message that is not an object is refused in its turn, after the ones before it.
    let list: Vec<Option<TypedMessage>> = list
        .into_iter()
        .map(|m| m.is_object().then(|| object_or_default(m)))
        .collect();
    let runs = observation_runs(
        list.iter()
            .map(|m| m.as_ref().and_then(|m| m.role.0.as_deref()) == Some("tool")),
    );
    let mut pairing = Pairing::default();
    for (i, raw) in list.into_iter().enumerate() {
        let Some(raw) = raw else {
            return Err(bad("conversations", i, "is not an object"));
        };
        let Some(role) = raw.role.0 else {
            return Err(bad("conversations", i, "has no string `role`"));
        };
        let parts = match raw.content {
            Some(Value::Array(parts)) => parts,
            Some(Value::String(text)) => vec![serde_json::json!({"type": "text", "value": text})],
            _ => Vec::new(),
        };
        let mut texts = Vec::new();
        let mut reasoning: Vec<String> = Vec::new();
        let mut calls = Vec::new();
        for part in parts {
            if !part.is_object() {
                continue;
            }
            let part: TypedPart = object_or_default(part);
            let kind = part.kind.0.unwrap_or_else(|| "text".into());
            let value = match part.value.0.or(part.text.0) {
                Some(Value::String(s)) => s,
                Some(other) => other.to_string(),
                None => String::new(),
            };
            match kind.as_str() {
                "text" => texts.push(Part::Text(value)),
                "reasoning" | "thinking" => reasoning.push(value),
                "tool_call" | "function_call" => calls.extend(calls_of(&value, i)),
                other => texts.push(Part::Unknown {
                    kind: other.to_string(),
                }),
            }
        }
        // Ids unique per call across the message's parts.
        for (k, call) in calls.iter_mut().enumerate() {
            call.id = Some(format!("call_{i}_{k}"));
        }
        let content = if texts.is_empty() {
            Content::Missing
        } else {
            Content::Parts(texts)
        };
        if role == "tool" || role == context.rules.input.sharegpt.observation_tag {
            let run = runs.get(i).copied().unwrap_or(0);
            messages.push(observation(content, run, context, &mut pairing));
            continue;
        }
        if !calls.is_empty() {
            pairing.pending = calls.iter().filter_map(|c| c.id.clone()).collect();
        }
        let (role, aliased_from) = alias_role(role, &context.rules.input.role_aliases);
        let mut ignored: Vec<String> = raw.rest.into_iter().map(|(key, _)| key).collect();
        ignored.sort();
        messages.push(Message {
            role,
            aliased_from,
            content,
            tool_calls: calls,
            reasoning: (!reasoning.is_empty()).then(|| reasoning.join("\n\n")),
            ignored_fields: ignored,
            ..Message::default()
        });
    }
    Ok(())
}

/// Puts the row's images where its `<image>` placeholders are.
fn place_images(
    messages: &mut [Message],
    images: Vec<String>,
    context: &ReadContext<'_>,
    built: &mut TranscriptBuilder,
) -> Result<(), InputError> {
    let base = context.path.parent().unwrap_or(Path::new("."));
    let mut next = images.into_iter();
    let policy = &context.rules.policy;
    for message in messages.iter_mut() {
        let texts: Vec<String> = match &message.content {
            Content::Text(t) if t.contains("<image>") => vec![t.clone()],
            Content::Parts(parts)
                if parts
                    .iter()
                    .any(|p| matches!(p, Part::Text(t) if t.contains("<image>"))) =>
            {
                Vec::new()
            }
            Content::Missing | Content::Null | Content::Text(_) | Content::Parts(_) => continue,
        };
        let parts_in = match std::mem::take(&mut message.content) {
            Content::Text(_) => texts.into_iter().map(Part::Text).collect(),
            Content::Parts(parts) => parts,
            other @ Content::Missing | other @ Content::Null => {
                message.content = other;
                continue;
            }
        };
        let mut parts = Vec::new();
        for part in parts_in {
            let Part::Text(text) = part else {
                parts.push(part);
                continue;
            };
            let mut pieces = text.split("<image>").peekable();
            while let Some(piece) = pieces.next() {
                if !piece.is_empty() {
                    parts.push(Part::Text(piece.to_string()));
                }
                if pieces.peek().is_none() {
                    break;
                }
                let Some(path) = next.next() else {
                    // More placeholders than images: the placeholder stays as text.
                    parts.push(Part::Text("<image>".into()));
                    continue;
                };
                match read_image(context, base, &path) {
                    Ok(url) => parts.push(Part::Image {
                        url: Some(url),
                        file_id: None,
                        detail: None,
                    }),
                    Err(refusal) => {
                        let rule = PolicyId::MissingImage;
                        let what = refusal.what();
                        match policy.missing_image {
                            MissingImage::Placeholder => {
                                let note = format!("{what}: placeholder");
                                built.note(rule, &note, 1, 0);
                                parts.push(Part::Text(fill(
                                    &policy.missing_image_template,
                                    &[("path", &path)],
                                )));
                            }
                            MissingImage::Drop => {
                                let note = format!("{what}: dropped");
                                built.note(rule, &note, 1, 0);
                            }
                            MissingImage::Quarantine => {
                                let problem = match refusal {
                                    Refusal::Missing => format!(
                                        "image file `{path}` is not beside the dataset and policy.missing_image is quarantine"
                                    ),
                                    Refusal::Unreadable
                                    | Refusal::Outside
                                    | Refusal::Symlink
                                    | Refusal::NotRegular
                                    | Refusal::TooLarge
                                    | Refusal::NotImage
                                    | Refusal::NoTree => format!(
                                        "image `{path}`: {what}, and policy.missing_image is quarantine"
                                    ),
                                };
                                return Err(not_format(problem));
                            }
                        }
                    }
                }
            }
        }
        message.content = Content::Parts(parts);
    }
    let left: Vec<String> = next.collect();
    if !left.is_empty() {
        built.note(
            PolicyId::MissingImage,
            "image with no <image> placeholder: not placed",
            left.len() as u64,
            0,
        );
    }
    Ok(())
}

/// The file `reference` names (relative to the dataset's folder `base`) as a `data:` URL, when
/// it is a regular file inside the input tree, within the cap, and an image type we know.
fn read_image(context: &ReadContext<'_>, base: &Path, reference: &str) -> Result<String, Refusal> {
    let bytes = context.tree().read(base, reference, IMAGE_CAP)?;
    let mime = match bytes.as_slice() {
        [0x89, b'P', b'N', b'G', ..] => "image/png",
        [0xFF, 0xD8, 0xFF, ..] => "image/jpeg",
        [b'G', b'I', b'F', b'8', ..] => "image/gif",
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => "image/webp",
        _ => return Err(Refusal::NotImage),
    };
    Ok(format!(
        "data:{mime};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::transcript::ToolCall;
    use crate::rules::policy::SharedObservation;
    use crate::rules::RuleSet;
    use serde_json::json;

    fn row(value: Value) -> Result<Transcript, InputError> {
        row_with(value, RuleSet::builtin().unwrap())
    }

    fn row_with(value: Value, rules: RuleSet) -> Result<Transcript, InputError> {
        let context = ReadContext {
            rules: &rules,
            path: Path::new("/nonexistent/data.json"),
            key: "data.json",
            root: Path::new("/nonexistent/data.json").parent(),
            follow: false,
            cache: &Default::default(),
        };
        let read = ShareGptReader.read(
            vec![InputRecord {
                value,
                index: 0,
                repairs: 0,
            }],
            &context,
        );
        match (
            read.conversations.into_iter().next(),
            read.refused.into_iter().next(),
        ) {
            (Some(c), _) => Ok(c.transcript),
            (None, Some((_, e))) => Err(e),
            _ => unreachable!(),
        }
    }

    #[test]
    fn classic_rows_with_parallel_calls_and_one_observation_split_it() {
        let value = json!({
            "conversations": [
                {"from": "human", "value": "Weather in Paris and Rome?"},
                {"from": "function_call", "value": "[{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": \"weather\", \"arguments\": {\"city\": \"Rome\"}}]"},
                {"from": "observation", "value": "[{\"temp\": 20}, {\"temp\": 25}]"},
                {"from": "gpt", "value": "20 and 25."}
            ],
            "system": "Be brief.",
            "tools": "[{\"name\": \"weather\", \"description\": \"d\", \"parameters\": {}}]"
        });
        assert!(ShareGptReader.detect(Some(&value), b""));
        let t = row(value).unwrap();
        let summary: Vec<(&str, Vec<&str>, Vec<String>)> = t
            .messages
            .iter()
            .map(|m| (m.role.as_str(), m.content.texts(), m.tool_call_ids.clone()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("system", vec!["Be brief."], vec![]),
                ("user", vec!["Weather in Paris and Rome?"], vec![]),
                ("assistant", vec![], vec![]),
                ("tool", vec![r#"{"temp":20}"#], vec!["call_1_0".to_string()]),
                ("tool", vec![r#"{"temp":25}"#], vec!["call_1_1".to_string()]),
                ("assistant", vec!["20 and 25."], vec![]),
            ]
        );
        assert_eq!(
            t.messages[2].tool_calls,
            vec![
                ToolCall {
                    id: Some("call_1_0".into()),
                    name: "weather".into(),
                    arguments: r#"{"city":"Paris"}"#.into(),
                    arguments_from_object: true,
                    ..ToolCall::default()
                },
                ToolCall {
                    id: Some("call_1_1".into()),
                    name: "weather".into(),
                    arguments: r#"{"city":"Rome"}"#.into(),
                    arguments_from_object: true,
                    ..ToolCall::default()
                },
            ]
        );
        assert_eq!(t.messages[1].aliased_from.as_deref(), Some("human"));
        let notes: Vec<(&str, &str)> = t
            .source_notes
            .iter()
            .map(|n| (n.rule.as_str(), n.what.as_str()))
            .collect();
        assert_eq!(
            notes,
            [
                ("builtin.dataset-tools", "dataset tools: weather"),
                (
                    "policy.shared_observation",
                    "observation split one item per parallel call"
                ),
            ]
        );
        assert_eq!(t.tools.len(), 1);
    }

    /// Many parallel calls, one observation each, answered in call order.
    #[test]
    fn many_parallel_calls_each_take_the_next_observation() {
        let n = 2000;
        let calls: Vec<Value> = (0..n)
            .map(|i| json!({"name": "f", "arguments": {"i": i}}))
            .collect();
        let mut turns = vec![
            json!({"from": "human", "value": "go"}),
            json!({"from": "function_call", "value": Value::Array(calls).to_string()}),
        ];
        turns.extend((0..n).map(|i| json!({"from": "observation", "value": format!("r{i}")})));
        let t = row(json!({ "conversations": turns })).unwrap();
        let outputs: Vec<(String, Vec<String>)> = t.messages[2..]
            .iter()
            .map(|m| (m.content.texts().concat(), m.tool_call_ids.clone()))
            .collect();
        let expected: Vec<(String, Vec<String>)> = (0..n)
            .map(|i| (format!("r{i}"), vec![format!("call_1_{i}")]))
            .collect();
        assert_eq!(outputs, expected);
    }

    #[test]
    fn observation_runs_count_each_run_from_where_it_stands() {
        let kinds = [false, true, true, true, false, true, false];
        assert_eq!(
            observation_runs(kinds.into_iter()),
            vec![0, 3, 2, 1, 0, 1, 0]
        );
        assert_eq!(observation_runs(std::iter::empty()), Vec::<usize>::new());
    }

    #[test]
    fn one_observation_that_is_not_a_list_answers_every_call_or_the_first() {
        let value = json!({"conversations": [
            {"from": "human", "value": "a and b"},
            {"from": "function_call", "value": "[{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {}}]"},
            {"from": "observation", "value": "both done"},
            {"from": "gpt", "value": "ok"}
        ]});
        let t = row(value.clone()).unwrap();
        assert_eq!(t.messages[2].tool_call_ids, ["call_1_0", "call_1_1"]);
        assert_eq!(t.messages[2].content, Content::Text("both done".into()));
        let mut rules = RuleSet::builtin().unwrap();
        rules.policy.shared_observation = SharedObservation::First;
        let t = row_with(value, rules).unwrap();
        assert_eq!(t.messages[2].tool_call_ids, ["call_1_0"]);
    }

    #[test]
    fn a_preference_row_ends_with_the_chosen_answer() {
        let value = json!({"conversations": [{"from": "human", "value": "Best color?"}],
            "chosen": {"from": "gpt", "value": "Blue."}, "rejected": {"from": "gpt", "value": "Meh."}});
        let t = row(value).unwrap();
        assert_eq!(t.messages.len(), 2);
        assert_eq!(t.messages[1].content, Content::Text("Blue.".into()));
        assert_eq!(
            t.source_notes[0].rule.as_str(),
            "builtin.preference-rejected"
        );
        assert_eq!(t.source_notes[0].bytes_dropped, 4);
    }

    #[test]
    fn role_tags_come_from_the_rules() {
        let mut rules = RuleSet::builtin().unwrap();
        rules.input.sharegpt.role_tag = "speaker".into();
        rules.input.sharegpt.content_tag = "text".into();
        rules.input.sharegpt.user_tag = "prompter".into();
        let value = json!({"conversations": [
            {"speaker": "prompter", "text": "hi"},
            {"speaker": "gpt", "text": "hello"}
        ]});
        let t = row_with(value, rules).unwrap();
        assert_eq!(t.messages[0].role.as_str(), "user");
        assert_eq!(t.messages[0].aliased_from.as_deref(), Some("prompter"));
        assert_eq!(t.messages[1].role.as_str(), "assistant");
    }

    #[test]
    fn typed_parts_give_reasoning_calls_and_outputs() {
        let value = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "value": "2+2?"}]},
            {"role": "assistant", "content": [
                {"type": "reasoning", "value": "Use the tool."},
                {"type": "tool_call", "value": "{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 2}}"}
            ]},
            {"role": "tool", "content": [{"type": "text", "value": "4"}]},
            {"role": "assistant", "content": [{"type": "text", "value": "4"}]}
        ], "tools": "[]"});
        assert!(ShareGptReader.detect(Some(&value), b""));
        let t = row(value).unwrap();
        assert_eq!(t.messages[1].reasoning.as_deref(), Some("Use the tool."));
        assert_eq!(t.messages[1].tool_calls[0].id.as_deref(), Some("call_1_0"));
        assert_eq!(t.messages[1].tool_calls[0].arguments, r#"{"a":2,"b":2}"#);
        assert_eq!(t.messages[2].tool_call_ids, ["call_1_0"]);
        assert_eq!(t.messages[2].role.as_str(), "tool");
    }

    #[test]
    fn images_are_read_beside_the_dataset_or_become_placeholders() {
        let dir = std::env::temp_dir().join(format!("rollover-sharegpt-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("img")).unwrap();
        std::fs::write(dir.join("img/a.png"), [0x89, b'P', b'N', b'G', 1, 2]).unwrap();
        let rules = RuleSet::builtin().unwrap();
        let path = dir.join("data.json");
        let context = ReadContext {
            rules: &rules,
            path: &path,
            key: "data.json",
            root: path.parent(),
            follow: false,
            cache: &Default::default(),
        };
        let value = json!({"messages": [
            {"role": "user", "content": "<image>Who? <image>"},
            {"role": "assistant", "content": "Them."}
        ], "images": ["img/a.png", "img/missing.jpg"]});
        let t = read_row(value, &context).unwrap();
        assert_eq!(
            t.messages[0].content,
            Content::Parts(vec![
                Part::Image {
                    url: Some("data:image/png;base64,iVBORwEC".into()),
                    file_id: None,
                    detail: None
                },
                Part::Text("Who? ".into()),
                Part::Text("[image not found: img/missing.jpg]".into()),
            ])
        );
        assert_eq!(t.source_notes[0].rule.as_str(), "policy.missing_image");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
