//! How one conversion is shown to a person, the same in `explain`'s lines and on the review
//! pages of `convert --review`: each decision's action and each written item, in a line.

use crate::convert::{ItemKind, OutItem, OutPayload};
use crate::model::rollout::{ResponseItem, ToolOutput};

/// The items written from the source message `origin` (`None`: from no one message), in
/// order: what explain lists and a review page shows beside that message.
pub fn items_from(items: &[OutItem], origin: Option<usize>) -> impl Iterator<Item = &OutItem> {
    items.iter().filter(move |i| i.origin == origin)
}

/// One item in a line: its type, role or kind, ids and sizes.
pub fn describe(item: &OutItem) -> String {
    let chars = |t: &str| t.chars().count();
    match &item.payload {
        OutPayload::Compacted(text) => format!("compacted ({} chars)", chars(text)),
        OutPayload::CompactedReplacing(text) => {
            format!("compacted, replacing the history ({} chars)", chars(text))
        }
        OutPayload::CompactedNative(native) => {
            format!(
                "compacted, as Codex wrote it ({} chars)",
                chars(native.summary())
            )
        }
        OutPayload::Item(response) => match response {
            ResponseItem::Message {
                role,
                content,
                phase,
            } => {
                let kind = match item.kind {
                    ItemKind::ContextualUser => "contextual user",
                    ItemKind::RealUser
                    | ItemKind::Developer
                    | ItemKind::Assistant
                    | ItemKind::Reasoning
                    | ItemKind::Call
                    | ItemKind::Output
                    | ItemKind::Compacted => role,
                };
                let parts: Vec<String> = content
                    .iter()
                    .map(|c| match c.text() {
                        Some(t) => format!("{} {} chars", c.type_name(), chars(t)),
                        None => c.type_name().to_string(),
                    })
                    .collect();
                let phase = phase
                    .map(|p| format!(", phase {}", p.as_str()))
                    .unwrap_or_default();
                format!("message {kind}: {}{phase}", parts.join(", "))
            }
            ResponseItem::Reasoning {
                content, summary, ..
            } => {
                let n: usize = content
                    .iter()
                    .flatten()
                    .map(|r| chars(&r.text))
                    .sum::<usize>()
                    + summary.iter().map(|s| chars(&s.text)).sum::<usize>();
                format!("reasoning ({n} chars)")
            }
            ResponseItem::FunctionCall {
                name,
                arguments,
                call_id,
            } => format!(
                "function_call {name} (call_id {call_id}, arguments {} chars)",
                chars(arguments)
            ),
            ResponseItem::CustomToolCall {
                name,
                input,
                call_id,
            } => {
                format!(
                    "custom_tool_call {name} (call_id {call_id}, input {} chars)",
                    chars(input)
                )
            }
            ResponseItem::FunctionCallOutput { call_id, output }
            | ResponseItem::CustomToolCallOutput { call_id, output } => {
                let size = match output {
                    ToolOutput::Text(t) => format!("{} chars", chars(t)),
                    ToolOutput::Items(items) => format!("{} content items", items.len()),
                };
                format!("function_call_output (call_id {call_id}, {size})")
            }
            ResponseItem::Native(native) => {
                let role = native
                    .message_role()
                    .map(|r| format!(" {r}"))
                    .unwrap_or_default();
                format!(
                    "{}{role}, as Codex wrote it ({} text bytes)",
                    native.kind,
                    native.text_bytes()
                )
            }
        },
    }
}

/// A decision's action (as serialised) as its name and its other fields, `key value` each.
pub fn action_parts(mut action: serde_json::Value) -> (String, Vec<String>) {
    let name = action
        .as_object_mut()
        .and_then(|m| m.remove("action"))
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let details = action
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| match v.as_str() {
                    Some(s) => format!("{k} {s}"),
                    None => format!("{k} {v}"),
                })
                .collect()
        })
        .unwrap_or_default();
    (name, details)
}
