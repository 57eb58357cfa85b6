//! The second renderer: a conversation as one Responses API request body (one JSON line).
//!
//! In: the converted conversation (the same items the rollout holds: Codex is the reference
//! for the history), its base instructions, the record's tool definitions and model. Out: the
//! body's bytes, in the normal or the Lite wire encoding, and the decisions rendering took
//! (tools dropped by `policy.untranslatable_tool`, Lite image details removed). Fails with a
//! [`ConvertError`] when a rule says quarantine.

use std::borrow::Cow;

use serde_json::Value;

use super::{Conversation, ConvertError, OutPayload};
use crate::audit::{Action, Decision};
use crate::model::responses::{
    BatchLine, InputItem, RequestBody, ResponsesOptions, ToolDefinition, Wire, BATCH_METHOD,
    BATCH_URL, LITE_IMAGE_DETAILS, TOOL_FUNCTION,
};
use crate::model::rollout::table::{JsonOut, WriteJson};
use crate::model::rollout::{ContentItem, ResponseItem, ROLE_DEVELOPER, ROLE_USER};
use crate::rules::{Builtin, DropOrQuarantine, PolicyId, RuleSet};

/// The body line of `conversation` (with `\n`), its decisions appended to the conversation's.
pub(crate) fn render(
    conversation: &mut Conversation,
    rules: &RuleSet,
    options: ResponsesOptions,
) -> Result<Vec<u8>, ConvertError> {
    let tools = translate_tools(&conversation.tools, rules, &mut conversation.decisions)?;
    let base = conversation
        .meta
        .base_instructions
        .as_ref()
        .map(|b| b.text.as_str());
    let lite = options.wire == Wire::Lite;
    let mut input = Vec::with_capacity(conversation.items.len() + 2);
    let mut base_item = None;
    if lite {
        input.push(InputItem::AdditionalTools {
            role: ROLE_DEVELOPER,
            tools: &tools,
        });
        base_item = base.map(|text| ResponseItem::Message {
            role: ROLE_DEVELOPER,
            content: vec![ContentItem::InputText {
                text: text.to_string(),
            }],
            phase: None,
        });
    }
    if let Some(item) = &base_item {
        input.push(InputItem::Item(Cow::Borrowed(item)));
    }
    let mut decisions = Vec::new();
    // What comes before the history (Lite's tools and base instructions).
    let prefix = input.len();
    for item in &conversation.items {
        if let OutPayload::CompactedReplacing(_) = &item.payload {
            // The summary replaces the history before it, as Codex resumes it (checked by
            // the conformance test): the body holds what the model saw.
            input.truncate(prefix);
        }
        if let OutPayload::CompactedNative(native) = &item.payload {
            // A Codex compaction with its replacement history: that history is what follows,
            // as Codex resumes it; without one, the summary stands for what came before.
            if let Some(history) = native.replacement_history() {
                input.truncate(prefix);
                for replaced in history {
                    input.push(InputItem::Item(Cow::Owned(ResponseItem::Native(replaced))));
                }
                continue;
            }
        }
        let response = match &item.payload {
            OutPayload::CompactedNative(native) => Cow::Owned(ResponseItem::Message {
                role: ROLE_USER,
                content: vec![ContentItem::InputText {
                    text: native.summary().to_string(),
                }],
                phase: None,
            }),
            // A compaction summary stands for the history before it: a user message, as
            // Codex rebuilds a compacted history (not checked against Codex: see README).
            OutPayload::Compacted(summary) | OutPayload::CompactedReplacing(summary) => {
                Cow::Owned(ResponseItem::Message {
                    role: ROLE_USER,
                    content: vec![ContentItem::InputText {
                        text: summary.clone(),
                    }],
                    phase: None,
                })
            }
            OutPayload::Item(response) if lite => lite_item(response, item.origin, &mut decisions),
            OutPayload::Item(response) => Cow::Borrowed(response),
        };
        input.push(InputItem::Item(response));
    }
    let body = RequestBody {
        custom_id: (!options.envelope).then_some(conversation.meta.id.as_str()),
        model: conversation.model.as_deref(),
        instructions: if lite { None } else { base },
        input,
        tools: (!lite && !tools.is_empty()).then_some(tools.as_slice()),
        parallel_tool_calls: lite.then_some(false),
    };
    // Sized up front from the texts the body holds (with room for keys and escapes): grown by
    // doubling from 4 KiB, an agent transcript's body was reallocated ~8 times, each a copy
    // (6 % of its conversion's instructions).
    let texts: usize = conversation
        .items
        .iter()
        .map(|item| crate::audit::accounting::output_item_bytes(item) + 96)
        .sum::<usize>()
        + base.map_or(0, str::len);
    let mut out = super::body_buffer(1024 + texts + texts / 16);
    let envelope = options.envelope.then_some(conversation.meta.id.as_str());
    // Writing our own types to a Vec cannot fail: every map key is a string.
    if write_body(&mut out, &body, envelope).is_err() {
        out.clear();
    }
    out.push(b'\n');
    drop(body);
    conversation.decisions.append(&mut decisions);
    Ok(out)
}

/// The body's line: the body ([`RequestBody`]), or with `envelope`, its custom id, the
/// [`BatchLine`] around it; by the tables' fast writers.
fn write_body(
    out: &mut Vec<u8>,
    body: &RequestBody<'_>,
    envelope: Option<&str>,
) -> Result<(), serde_json::Error> {
    let out = &mut JsonOut::new(out);
    match envelope {
        Some(custom_id) => BatchLine {
            custom_id,
            method: BATCH_METHOD,
            url: BATCH_URL,
            body,
        }
        .write_json(out),
        None => body.write_json(out),
    }
}

/// An item as the Lite wire takes it: image `detail`s it does not take removed.
fn lite_item<'a>(
    item: &'a ResponseItem,
    origin: Option<usize>,
    decisions: &mut Vec<Decision>,
) -> Cow<'a, ResponseItem> {
    if let ResponseItem::Native(native) = item {
        return lite_native(native, item, origin, decisions);
    }
    let ResponseItem::Message {
        role,
        content,
        phase,
    } = item
    else {
        return Cow::Borrowed(item);
    };
    let unsupported = |c: &ContentItem| match c {
        ContentItem::InputImage {
            detail: Some(detail),
            ..
        } => !LITE_IMAGE_DETAILS.contains(&detail.as_str()),
        ContentItem::InputImage { detail: None, .. }
        | ContentItem::InputText { .. }
        | ContentItem::InputAudio { .. }
        | ContentItem::OutputText { .. } => false,
    };
    if !content.iter().any(unsupported) {
        return Cow::Borrowed(item);
    }
    let content = content
        .iter()
        .map(|c| match c {
            ContentItem::InputImage {
                image_url,
                file_id,
                detail: _,
            } if unsupported(c) => {
                decisions.push(Decision {
                    message: origin,
                    rule: Builtin::LiteImageDetail.into(),
                    action: Action::ImageDetailOmitted,
                    bytes_dropped: 0,
                    bytes_added: 0,
                });
                ContentItem::InputImage {
                    image_url: image_url.clone(),
                    file_id: file_id.clone(),
                    detail: None,
                }
            }
            other @ ContentItem::InputText { .. }
            | other @ ContentItem::InputImage { .. }
            | other @ ContentItem::InputAudio { .. }
            | other @ ContentItem::OutputText { .. } => other.clone(),
        })
        .collect();
    Cow::Owned(ResponseItem::Message {
        role,
        content,
        phase: *phase,
    })
}

/// [`lite_item`] of a message read from a Codex rollout: its images' `detail` removed, as
/// for any message, each with its decision.
fn lite_native<'a>(
    native: &crate::model::rollout::NativeItem,
    item: &'a ResponseItem,
    origin: Option<usize>,
    decisions: &mut Vec<Decision>,
) -> Cow<'a, ResponseItem> {
    use crate::model::rollout::wire::{content, key};
    let unsupported = |part: &Value| {
        part.get(key::TYPE).and_then(Value::as_str) == Some(content::INPUT_IMAGE)
            && part
                .get(key::DETAIL)
                .and_then(Value::as_str)
                .is_some_and(|d| !LITE_IMAGE_DETAILS.contains(&d))
    };
    let parts = native.payload.get(key::CONTENT).and_then(Value::as_array);
    if !parts.is_some_and(|parts| parts.iter().any(unsupported)) {
        return Cow::Borrowed(item);
    }
    let mut native = native.clone();
    if let Some(Value::Array(parts)) = native.payload.get_mut(key::CONTENT) {
        for part in parts.iter_mut().filter(|p| unsupported(p)) {
            if let Some(part) = part.as_object_mut() {
                part.remove(key::DETAIL);
            }
            decisions.push(Decision {
                message: origin,
                rule: Builtin::LiteImageDetail.into(),
                action: Action::ImageDetailOmitted,
                bytes_dropped: 0,
                bytes_added: 0,
            });
        }
    }
    Cow::Owned(ResponseItem::Native(native))
}

/// The record's tools as Responses function definitions: Chat Completions'
/// `{"type":"function","function":{name,description,parameters,strict}}` flattened, a
/// Responses-shaped `{"type":"function","name",..}` kept. Anything else (built-in or custom
/// tools, a name the API refuses, parameters that are not an object) is untranslatable.
pub(crate) fn translate_tools(
    given: &[Value],
    rules: &RuleSet,
    decisions: &mut Vec<Decision>,
) -> Result<Vec<ToolDefinition>, ConvertError> {
    let mut tools = Vec::with_capacity(given.len());
    for tool in given {
        match translate_tool(tool) {
            Ok(definition) => tools.push(definition),
            Err(why) => match rules.policy.untranslatable_tool {
                DropOrQuarantine::Drop => decisions.push(Decision {
                    message: None,
                    rule: PolicyId::UntranslatableTool.into(),
                    action: Action::ToolDropped {
                        name: tool_name(tool).map(str::to_string),
                    },
                    bytes_dropped: 0,
                    bytes_added: 0,
                }),
                DropOrQuarantine::Quarantine => {
                    return Err(ConvertError {
                        rule: PolicyId::UntranslatableTool.into(),
                        reason: format!("untranslatable tool definition: {why}"),
                        message: None,
                    })
                }
            },
        }
    }
    Ok(tools)
}

fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("function")
        .and_then(|f| f.get("name"))
        .or_else(|| tool.get("name"))
        .and_then(Value::as_str)
}

fn translate_tool(tool: &Value) -> Result<ToolDefinition, String> {
    let kind = tool.get("type").and_then(Value::as_str);
    if kind != Some(TOOL_FUNCTION) {
        return Err(format!(
            "type {} has no Responses function equivalent",
            kind.map(|k| format!("`{k}`"))
                .unwrap_or_else(|| "missing".into())
        ));
    }
    let spec = tool.get("function").unwrap_or(tool);
    let name = spec
        .get("name")
        .and_then(Value::as_str)
        .ok_or("a function tool without a name")?;
    if !valid_tool_name(name) {
        return Err(format!(
            "name `{name}` is not 1 to 64 letters, digits, `_` or `-`"
        ));
    }
    let parameters = match spec.get("parameters") {
        None | Some(Value::Null) => None,
        Some(p @ Value::Object(_)) => Some(p.clone()),
        Some(_) => return Err(format!("`{name}`: parameters that are not an object")),
    };
    Ok(ToolDefinition {
        kind: TOOL_FUNCTION,
        name: name.to_string(),
        description: spec
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string),
        parameters,
        strict: spec.get("strict").and_then(Value::as_bool),
    })
}

/// The API's constraint on function names.
pub(crate) fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::responses::BatchLine;
    use crate::model::rollout::{ReasoningText, SummaryText, ToolOutput};

    /// Every body written by hand is byte for byte what serde_json writes for [`RequestBody`]
    /// and [`BatchLine`].
    #[test]
    fn bodies_by_hand_are_serde_json_bodies() {
        let text = "quote \" backslash \\ nl \n ctl \u{1} é 😀 and a longer tail past a word";
        let items = [
            ResponseItem::Message {
                role: ROLE_USER,
                content: vec![
                    ContentItem::InputText {
                        text: text.to_string(),
                    },
                    ContentItem::InputImage {
                        image_url: Some("data:image/png;base64,AAAA".into()),
                        file_id: None,
                        detail: Some("high".into()),
                    },
                ],
                phase: None,
            },
            ResponseItem::Message {
                role: "assistant",
                content: vec![ContentItem::OutputText {
                    text: text.repeat(3),
                }],
                phase: Some(crate::model::rollout::Phase::FinalAnswer),
            },
            ResponseItem::FunctionCall {
                name: "shell".into(),
                arguments: format!("{{\"cmd\": {text:?}}}"),
                call_id: "call_1".into(),
            },
            ResponseItem::FunctionCallOutput {
                call_id: "call_1".into(),
                output: ToolOutput::Items(vec![ContentItem::InputText {
                    text: text.to_string(),
                }]),
            },
            ResponseItem::CustomToolCall {
                call_id: "c2".into(),
                name: "apply_patch".into(),
                input: text.to_string(),
            },
            ResponseItem::CustomToolCallOutput {
                call_id: "c2".into(),
                output: ToolOutput::Text(text.to_string()),
            },
            ResponseItem::Reasoning {
                summary: vec![SummaryText {
                    text: text.to_string(),
                }],
                content: Some(vec![ReasoningText {
                    text: text.to_string(),
                }]),
                encrypted_content: None,
            },
        ];
        let tools = vec![ToolDefinition {
            kind: TOOL_FUNCTION,
            name: "shell".into(),
            description: Some(text.to_string()),
            parameters: Some(serde_json::json!({"type": "object"})),
            strict: None,
        }];
        for lite in [false, true] {
            let mut input = Vec::new();
            if lite {
                input.push(InputItem::AdditionalTools {
                    role: ROLE_DEVELOPER,
                    tools: &tools,
                });
            }
            input.extend(items.iter().map(|i| InputItem::Item(Cow::Borrowed(i))));
            let body = RequestBody {
                custom_id: (!lite).then_some("0199a213-81c0-7800-8aa1-bbab2a035a53"),
                model: lite.then_some("gpt-5"),
                instructions: (!lite).then_some(text),
                input,
                tools: (!lite).then_some(tools.as_slice()),
                parallel_tool_calls: lite.then_some(false),
            };
            let mut ours = Vec::new();
            write_body(&mut ours, &body, None).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(&body).unwrap()
            );
            let line = BatchLine {
                custom_id: "id \"1\"",
                method: BATCH_METHOD,
                url: BATCH_URL,
                body: &body,
            };
            let mut ours = Vec::new();
            write_body(&mut ours, &body, Some(line.custom_id)).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string(&line).unwrap()
            );
        }
        let empty = RequestBody {
            custom_id: None,
            model: None,
            instructions: None,
            input: Vec::new(),
            tools: None,
            parallel_tool_calls: Some(true),
        };
        let mut ours = Vec::new();
        write_body(&mut ours, &empty, None).unwrap();
        assert_eq!(ours, br#"{"input":[],"parallel_tool_calls":true}"#);
    }
}
