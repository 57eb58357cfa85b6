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
    BATCH_URL, LITE_IMAGE_DETAILS, TOOL_FUNCTION, TYPE_ADDITIONAL_TOOLS,
};
use crate::model::rollout::{ContentItem, ResponseItem, ROLE_DEVELOPER, ROLE_USER};
use crate::rules::{Builtin, DropOrQuarantine, PolicyId, RuleSet};

/// The body line of `conversation` (with `\n`), its decisions appended to the conversation's.
pub fn render(
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
            kind: TYPE_ADDITIONAL_TOOLS,
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
        let response = match &item.payload {
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
    let mut out = Vec::with_capacity(4096);
    // Serialising our own types to a Vec cannot fail: every map key is a string.
    let written = if options.envelope {
        serde_json::to_writer(
            &mut out,
            &BatchLine {
                custom_id: &conversation.meta.id,
                method: BATCH_METHOD,
                url: BATCH_URL,
                body: &body,
            },
        )
    } else {
        serde_json::to_writer(&mut out, &body)
    };
    if written.is_err() {
        out.clear();
    }
    out.push(b'\n');
    drop(body);
    conversation.decisions.append(&mut decisions);
    Ok(out)
}

/// An item as the Lite wire takes it: image `detail`s it does not take removed.
fn lite_item<'a>(
    item: &'a ResponseItem,
    origin: Option<usize>,
    decisions: &mut Vec<Decision>,
) -> Cow<'a, ResponseItem> {
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
            other => other.clone(),
        })
        .collect();
    Cow::Owned(ResponseItem::Message {
        role,
        content,
        phase: *phase,
    })
}

/// The record's tools as Responses function definitions: Chat Completions'
/// `{"type":"function","function":{name,description,parameters,strict}}` flattened, a
/// Responses-shaped `{"type":"function","name",..}` kept. Anything else (built-in or custom
/// tools, a name the API refuses, parameters that are not an object) is untranslatable.
pub fn translate_tools(
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
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
