//! Items read from a Codex rollout ([`NativeItem`]): written as they were read.
//!
//! They are Codex's own items already, so no rule reshapes them. What the converter decides
//! for them is what it decides for any format: every call gets exactly one output (the call
//! ledger renames a reused id, synthesises a missing output, and orphans follow
//! `policy.orphan_output`), reasoning explains what follows it (`policy.unpaired_reasoning`),
//! the base instructions appear once (`policy.duplicate_base_instructions`), and the renderer
//! gives real user and assistant messages their UI events by the item's kind.

use super::build::Builder;
use super::{ConvertError, ItemKind, OutItem, OutPayload};
use crate::audit::Action;
use crate::model::rollout::{NativeItem, NativeRole, ResponseItem, ToolOutput};
use crate::model::transcript::Message;
use crate::rules::{DropOrQuarantine, PolicyId};

/// Whether each message is a native reasoning item with nothing after it to explain: the
/// next native item that is not reasoning is neither an assistant message nor a call (what
/// the validator's invariant 8 asks of reasoning).
/// Empty (no allocation) for a conversation with no native item: every other format's.
pub(super) fn unexplained_reasoning(messages: &[Message]) -> Vec<bool> {
    if !messages.iter().any(|m| m.native.is_some()) {
        return Vec::new();
    }
    let mut unexplained = vec![false; messages.len()];
    // Walking backwards: whether what follows explains reasoning.
    let mut explains_next = false;
    for (at, m) in messages.iter().enumerate().rev() {
        let Some(native) = m.native.as_deref() else {
            explains_next = false;
            continue;
        };
        match native.role {
            NativeRole::Reasoning => unexplained[at] = !explains_next,
            NativeRole::Assistant | NativeRole::Call { .. } => explains_next = true,
            NativeRole::Standalone => explains_next = explains_reasoning(native.kind),
            NativeRole::User
            | NativeRole::ContextualUser
            | NativeRole::Developer
            | NativeRole::Output
            | NativeRole::Compacted => explains_next = false,
        }
    }
    unexplained
}

/// The standalone items reasoning may come right before (calls of hosted tools).
fn explains_reasoning(kind: &str) -> bool {
    use crate::model::rollout::wire::item;
    matches!(
        kind,
        item::WEB_SEARCH_CALL | item::IMAGE_GENERATION_CALL | item::TOOL_SEARCH_CALL
    )
}

impl Builder<'_> {
    /// One item read from a Codex rollout. `unexplained`: a reasoning item with nothing after
    /// it to explain ([`unexplained_reasoning`]).
    pub(super) fn native(
        &mut self,
        m: &Message,
        mut item: NativeItem,
        unexplained: bool,
    ) -> Result<(), ConvertError> {
        let index = Some(m.index);
        self.flush_context();
        let kind = match item.role {
            NativeRole::User => {
                self.close_pending_calls(index)?;
                ItemKind::RealUser
            }
            NativeRole::ContextualUser => ItemKind::ContextualUser,
            NativeRole::Developer => {
                if self.repeats_base_instructions(&item) {
                    return self.native_duplicate_base(m.index, &item);
                }
                ItemKind::Developer
            }
            NativeRole::Assistant => ItemKind::Assistant,
            NativeRole::Reasoning if unexplained => {
                return self.native_unpaired_reasoning(m.index, &item);
            }
            NativeRole::Reasoning => ItemKind::Reasoning,
            NativeRole::Call { custom } => {
                let original = item.call_id().unwrap_or_default().to_string();
                let name = item
                    .payload
                    .get(crate::model::rollout::wire::key::NAME)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or(item.kind)
                    .to_string();
                let written = self.native_call(m.index, original.clone(), name, custom)?;
                if written != original {
                    item.set_call_id(written);
                }
                ItemKind::Call
            }
            NativeRole::Output => {
                let read = item.call_id().unwrap_or_default().to_string();
                match self.native_output(&read) {
                    Some(written) => {
                        if written != read {
                            item.set_call_id(written);
                        }
                        ItemKind::Output
                    }
                    None => {
                        let output = native_output(&item);
                        let dropped = item.text_bytes();
                        return self.orphan(m.index, Some(read), &output, dropped, true);
                    }
                }
            }
            NativeRole::Standalone => ItemKind::Call,
            NativeRole::Compacted => {
                self.close_pending_calls(index)?;
                self.items.push(OutItem {
                    kind: ItemKind::Compacted,
                    payload: OutPayload::CompactedNative(item),
                    origin: index,
                });
                return Ok(());
            }
        };
        self.push(kind, ResponseItem::Native(item), index);
        Ok(())
    }

    /// A developer message holding the base instructions as one of its texts (what the
    /// validator's invariant 10 looks for).
    fn repeats_base_instructions(&self, item: &NativeItem) -> bool {
        let Some(base) = self.context.base.as_deref() else {
            return false;
        };
        item.texts().any(|text| text == base)
    }

    fn native_duplicate_base(
        &mut self,
        index: usize,
        item: &NativeItem,
    ) -> Result<(), ConvertError> {
        let rule = PolicyId::DuplicateBaseInstructions;
        match self.rules.policy.duplicate_base_instructions {
            DropOrQuarantine::Drop => {
                let action = Action::DuplicateBaseInstructionsDropped;
                self.decide(Some(index), rule, action, item.text_bytes(), 0);
                Ok(())
            }
            DropOrQuarantine::Quarantine => {
                let reason = "base instructions repeated as a developer message";
                Err(self.quarantine(rule, reason.to_string(), Some(index)))
            }
        }
    }

    fn native_unpaired_reasoning(
        &mut self,
        index: usize,
        item: &NativeItem,
    ) -> Result<(), ConvertError> {
        let rule = PolicyId::UnpairedReasoning;
        match self.rules.policy.unpaired_reasoning {
            DropOrQuarantine::Drop => {
                let action = Action::UnpairedReasoningDropped;
                self.decide(Some(index), rule, action, item.text_bytes(), 0);
                Ok(())
            }
            DropOrQuarantine::Quarantine => {
                let reason = "reasoning with no message or call after it".to_string();
                Err(self.quarantine(rule, reason, Some(index)))
            }
        }
    }
}

/// An output's texts, for an orphan that `policy.orphan_output` writes as text: a string, or
/// its text parts (counted as [`NativeItem::text_bytes`] counts them).
fn native_output(item: &NativeItem) -> ToolOutput {
    use crate::model::rollout::wire::key;
    use crate::model::rollout::ContentItem;
    match item.payload.get(key::OUTPUT) {
        Some(serde_json::Value::String(text)) => ToolOutput::Text(text.clone()),
        Some(serde_json::Value::Array(parts)) => ToolOutput::Items(
            parts
                .iter()
                .filter_map(|p| p.get(key::TEXT).and_then(serde_json::Value::as_str))
                .map(|text| ContentItem::InputText {
                    text: text.to_string(),
                })
                .collect(),
        ),
        _ => ToolOutput::Text(String::new()),
    }
}
