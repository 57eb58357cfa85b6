//! One conversation's Responses items read into a transcript: messages, calls and their
//! outputs, reasoning, and the hosted tools Codex does not know (`policy.hosted_tool`).

use serde_json::{json, Value};

use super::{Entry, NORMALISED};
use crate::input::builder::TranscriptBuilder;
use crate::input::format::{ReadContext, SourceFormat};
use crate::input::messages::{read_content, read_role};
use crate::input::meta::read_meta;
use crate::input::InputError;
use crate::model::transcript::{
    Content, DroppedField, Message, Part, ReasoningOrigin, Role, Thinking, ToolCall, Transcript,
};
use crate::rules::policy::HostedTool;
use crate::rules::template::fill;
use crate::rules::PolicyId;

fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Reads the items of one conversation into `built`, message by message.
struct Items<'a> {
    built: TranscriptBuilder,
    context: &'a ReadContext<'a>,
}

impl Items<'_> {
    /// A message's content or a call's output as the chat reader reads a content (a string or
    /// a list of parts), refused at the position the message takes.
    fn content(&self, value: Value) -> Result<(Content, Vec<DroppedField>), InputError> {
        let mut dropped = Vec::new();
        let content =
            read_content(Some(value), &mut dropped).map_err(|problem| self.bad(problem))?;
        Ok((content, dropped))
    }

    /// The message about to be pushed cannot be read.
    fn bad(&self, problem: String) -> InputError {
        InputError::BadMessage {
            path: MESSAGES_AT.to_string(),
            index: self.built.len(),
            problem,
        }
    }

    /// A function (or freeform, `custom`) call with its id.
    fn call(&mut self, id: &str, name: String, arguments: String, custom: bool) {
        self.built.call(ToolCall {
            id: Some(id.to_string()),
            name,
            arguments,
            custom,
            ..ToolCall::default()
        });
    }

    /// A function-style call of a hosted tool, its arguments as JSON text.
    fn hosted_call(&mut self, id: &str, name: &str, arguments: Value) {
        let arguments = crate::input::fields::text_or_json(arguments);
        self.call(id, name.to_string(), arguments, false);
    }

    /// The output of the call `call_id`: a string, or a list of parts.
    fn output(&mut self, call_id: &str, output: Value, failed: bool) -> Result<(), InputError> {
        let (content, dropped) = self.content(output)?;
        self.built
            .output_message(Some(call_id.to_string()), content, dropped, failed);
        Ok(())
    }

    /// A placeholder text for an item nothing else can say.
    fn placeholder(&mut self, kind: &str, item: &Value) {
        let json = item.to_string();
        let text = fill(
            &self.context.rules.policy.hosted_tool_template,
            &[("type", kind), ("json", &json)],
        );
        self.note(&format!("{kind} item as a placeholder"));
        self.built.text(Role::Assistant, text);
    }

    fn note(&mut self, what: &str) {
        self.built.note(PolicyId::HostedTool, what, 1, 0);
    }

    /// A `message` item: its role (aliased), content (parts normalised) and phase.
    fn message(&mut self, mut item: Value, annotations: &mut u64) -> Result<(), InputError> {
        let role = match item.get_mut("role").map(std::mem::take) {
            None => Some(Value::String("user".to_string())),
            given => given,
        };
        let (role, aliased_from) = read_role(role, &self.context.rules.input.role_aliases)
            .map_err(|problem| self.bad(problem))?;
        let content = match item.get_mut("content").map(std::mem::take) {
            Some(Value::Array(mut parts)) => {
                for part in &mut parts {
                    if let Value::Object(m) = part {
                        if m.get("annotations")
                            .and_then(Value::as_array)
                            .is_some_and(|a| !a.is_empty())
                        {
                            *annotations += 1;
                        }
                        for k in NORMALISED {
                            m.remove(k);
                        }
                    }
                }
                Value::Array(parts)
            }
            Some(other) => other,
            None => Value::Null,
        };
        let (content, dropped_fields) = self.content(content)?;
        let phase = match item.get_mut("phase").map(std::mem::take) {
            Some(Value::String(phase)) => Some(phase),
            _ => None,
        };
        self.built.message(Message {
            role,
            aliased_from,
            content,
            dropped_fields,
            phase,
            ..Message::default()
        });
        Ok(())
    }

    /// A `reasoning` item: the next message's thinking.
    fn reasoning(&mut self, item: &Value) {
        let texts = |key: &str| -> Vec<String> {
            item.get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
                .collect()
        };
        let encrypted = item
            .get("encrypted_content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        self.built.thinking(Thinking {
            summary: texts("summary"),
            content: texts("content"),
            encrypted,
            origin: ReasoningOrigin::OpenAi,
        });
    }

    /// An item Codex 0.169 does not know: `policy.hosted_tool`.
    fn hosted(&mut self, kind: &str, mut item: Value, call_id: &str) -> Result<(), InputError> {
        match self.context.rules.policy.hosted_tool {
            HostedTool::Drop => {
                self.note(&format!("{kind} item dropped"));
                return Ok(());
            }
            HostedTool::Placeholder => {
                if let Value::Object(m) = &mut item {
                    for k in NORMALISED {
                        m.remove(k);
                    }
                }
                self.placeholder(kind, &item);
                return Ok(());
            }
            HostedTool::Call => {}
        }
        match kind {
            "code_interpreter_call" => {
                let code = text_of(item.get("code"));
                self.call(call_id, "code_interpreter".to_string(), code, true);
                let parts: Vec<Part> = item
                    .get("outputs")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|out| match out.get("type").and_then(Value::as_str) {
                        Some("logs") => Part::Text(text_of(out.get("logs"))),
                        Some("image") => Part::Image {
                            url: Some(text_of(out.get("url"))),
                            file_id: None,
                            detail: None,
                        },
                        _ => Part::Text(out.to_string()),
                    })
                    .collect();
                // Logs only: one text, a line each; with an image, the parts in order.
                let logs_only = parts.iter().all(|p| matches!(p, Part::Text(_)));
                let mut content = Content::Parts(parts);
                if logs_only {
                    content = Content::Text(content.texts().join("\n"));
                }
                self.built.output(Some(call_id.to_string()), content, false);
            }
            "image_generation_call" => {
                let prompt = text_of(item.get("revised_prompt"));
                self.hosted_call(call_id, "image_generation", json!({"prompt": prompt}));
                let content = match item.get("result").and_then(Value::as_str) {
                    Some(b64) if !b64.is_empty() => Content::Parts(vec![Part::Image {
                        url: Some(format!("data:image/png;base64,{b64}")),
                        file_id: None,
                        detail: None,
                    }]),
                    _ => Content::Text(String::new()),
                };
                self.built.output(Some(call_id.to_string()), content, false);
            }
            "mcp_call" => {
                let label = text_of(item.get("server_label"));
                let name = text_of(item.get("name"));
                let name = if label.is_empty() {
                    name
                } else {
                    format!("{label}.{name}")
                };
                let arguments = item
                    .get_mut("arguments")
                    .map(std::mem::take)
                    .unwrap_or_else(|| Value::String("{}".to_string()));
                self.hosted_call(call_id, &name, arguments);
                let error = item
                    .get("error")
                    .filter(|e| !e.is_null())
                    .map(|e| text_of(Some(e)));
                let failed = error.is_some();
                let output = error.unwrap_or_else(|| text_of(item.get("output")));
                self.built
                    .output(Some(call_id.to_string()), Content::Text(output), failed);
            }
            "web_search_call" | "file_search_call" => {
                let name = kind.trim_end_matches("_call");
                let arguments = match item.get_mut("action").map(std::mem::take) {
                    Some(action) => action,
                    None => match item.get("queries") {
                        Some(queries) => json!({"queries": queries}),
                        None => json!({}),
                    },
                };
                self.hosted_call(call_id, name, arguments);
                let output = item
                    .get("results")
                    .filter(|r| !r.is_null())
                    .map(|r| r.to_string())
                    .unwrap_or_default();
                self.built
                    .output(Some(call_id.to_string()), Content::Text(output), false);
            }
            "local_shell_call" | "computer_call" => {
                let name = kind.trim_end_matches("_call");
                let action = item
                    .get_mut("action")
                    .map(std::mem::take)
                    .unwrap_or_else(|| json!({}));
                self.hosted_call(call_id, name, action);
            }
            "local_shell_call_output" | "computer_call_output" => {
                let (content, dropped) = match item.get_mut("output").map(std::mem::take) {
                    Some(Value::Object(mut o)) if o.contains_key("image_url") => {
                        let url = o.remove("image_url").unwrap_or_default();
                        // The chat reader's image part: a URL string or `{url, detail}`.
                        self.content(json!([{"type": "input_image", "image_url": url}]))?
                    }
                    other => (Content::Text(text_of(other.as_ref())), Vec::new()),
                };
                self.built
                    .output_message(Some(call_id.to_string()), content, dropped, false);
            }
            _ => {
                // Nothing to call: a placeholder, so it is not lost.
                self.placeholder(kind, &item);
                return Ok(());
            }
        }
        self.note(&format!("{kind} item as a call and its output"));
        Ok(())
    }

    /// Every item of the conversation, in order.
    fn items(&mut self, items: Vec<Value>) -> Result<(), InputError> {
        let mut annotations = 0u64;
        for (n, mut item) in items.into_iter().enumerate() {
            let kind = match item.get("type").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None if item.get("role").is_some() => "message".to_string(),
                None => "(no type)".to_string(),
            };
            let item_id = item.get("id").and_then(Value::as_str).map(str::to_string);
            let call_id = item
                .get("call_id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or(item_id)
                .unwrap_or_else(|| format!("call_item_{n}"));
            match kind.as_str() {
                "message" => self.message(item, &mut annotations)?,
                "reasoning" => self.reasoning(&item),
                "function_call" => {
                    let name = text_of(item.get("name"));
                    let arguments = text_of(item.get("arguments"));
                    self.call(&call_id, name, arguments, false);
                }
                "custom_tool_call" => {
                    let name = text_of(item.get("name"));
                    let input = text_of(item.get("input"));
                    self.call(&call_id, name, input, true);
                }
                "function_call_output" | "custom_tool_call_output" => {
                    let output = match item.get_mut("output").map(std::mem::take) {
                        Some(Value::Array(parts)) => Value::Array(parts),
                        other => Value::String(text_of(other.as_ref())),
                    };
                    self.output(&call_id, output, false)?;
                }
                _ => self.hosted(&kind, item, &call_id)?,
            }
        }
        if annotations > 0 {
            self.built.note(
                crate::rules::Builtin::ResponsesAnnotations,
                "output_text annotations dropped",
                annotations,
                0,
            );
        }
        Ok(())
    }
}

/// Where the audit says a Responses conversation's messages are.
const MESSAGES_AT: &str = "messages";

/// One conversation: `entry`'s instructions (a leading system message), then `items`.
pub(super) fn transcript(
    items: Vec<Value>,
    entry: &Entry,
    context: &ReadContext<'_>,
) -> Result<Transcript, InputError> {
    let mut built = TranscriptBuilder::new(SourceFormat::RESPONSES, MESSAGES_AT);
    let facts = Value::Object(entry.facts.clone());
    read_meta(&facts, &context.rules.input, &mut built.meta);
    built.meta.finished |= entry.finished;
    if let Some(Value::Array(tools)) = facts.get("tools") {
        // Responses function tools are flat; the transcript keeps them Chat Completions shaped.
        let wrapped: Vec<Value> = tools
            .iter()
            .map(|t| match t.get("type").and_then(Value::as_str) {
                Some("function") if t.get("function").is_none() => {
                    let mut f = t.clone();
                    if let Value::Object(m) = &mut f {
                        m.remove("type");
                    }
                    json!({"type": "function", "function": f})
                }
                _ => t.clone(),
            })
            .collect();
        built.tools(wrapped);
    }
    // A completed `status` is audited under the name `choices`, the finished reply's field
    // in the other API logs, so that the audits of the logs read alike.
    let mut ignored: Vec<&str> = entry.facts.keys().map(String::as_str).collect();
    if entry.finished {
        ignored.push("choices");
    }
    ignored.sort_unstable();
    for field in ignored {
        built.ignore(field);
    }
    if let Some(instructions) = &entry.instructions {
        built.text(Role::System, instructions.clone());
    }
    let mut reading = Items { built, context };
    reading.items(items)?;
    reading.built.finish()
}
