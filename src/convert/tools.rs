//! Tool calls and their outputs: one call ledger per conversation.
//!
//! Every call gets a unique id (a reused id is renamed by `policy.reused_call_id`, a missing
//! one synthesised) and exactly one output: the tool message that answers it (matched by id,
//! or by order and name for legacy `function` messages), or one made by
//! `policy.missing_output` when the turn ends without it. An output with no call is
//! `policy.orphan_output`.

use rustc_hash::{FxHashMap, FxHashSet};

use super::build::Builder;
use super::parts::Side;
use super::{ids, ConvertError, ItemKind};
use crate::audit::Action;
use crate::model::rollout::{ContentItem, ResponseItem, ToolOutput, ROLE_USER};
use crate::model::transcript::{Content, Message, ToolCall};
use crate::rules::{Builtin, MissingOutput, OrphanOutput, PolicyId, ReusedCallId, ToolError};

/// A call waiting for its output.
#[derive(Debug)]
struct PendingCall {
    call_id: String,
    /// The id the input gave, if any (outputs refer to it).
    original: Option<String>,
    name: String,
    custom: bool,
}

/// The calls of one conversation.
#[derive(Debug, Default)]
pub(super) struct CallLedger {
    pending: Vec<PendingCall>,
    /// How often each input id was used for a call.
    uses: FxHashMap<String, usize>,
    /// Every call id written.
    ids: FxHashSet<String>,
}

impl CallLedger {
    /// Takes the pending calls that `tool_call_ids` (or, without ids, the message's role and
    /// name) designate, in the order of the ids; `None` where no pending call matches.
    fn take_targets(&mut self, m: &Message) -> Vec<Option<PendingCall>> {
        // The common case, one target: no lists of indices to build and sort.
        match m.tool_call_ids.as_slice() {
            [] => {
                let by_name = match (&m.name, m.role == "function") {
                    (Some(name), true) => self.pending.iter().position(|c| &c.name == name),
                    _ => None,
                };
                let first = (!self.pending.is_empty()).then_some(0);
                return vec![by_name.or(first).map(|i| self.pending.remove(i))];
            }
            [id] => {
                let found = self
                    .pending
                    .iter()
                    .position(|c| c.original.as_deref() == Some(id.as_str()));
                return vec![found.map(|i| self.pending.remove(i))];
            }
            _ => {}
        }
        // A list: a message names a few ids.
        let mut targets: Vec<Option<usize>> = Vec::new();
        let mut taken: Vec<usize> = Vec::new();
        for id in &m.tool_call_ids {
            let found = self.pending.iter().enumerate().position(|(i, c)| {
                c.original.as_deref() == Some(id.as_str()) && !taken.contains(&i)
            });
            if let Some(i) = found {
                taken.push(i);
            }
            targets.push(found);
        }
        // Remove matched calls from pending (highest index first), keeping the ids' order.
        let mut order: Vec<(usize, usize)> = targets
            .iter()
            .enumerate()
            .filter_map(|(k, t)| t.map(|i| (i, k)))
            .collect();
        order.sort_unstable_by_key(|b| std::cmp::Reverse(b.0));
        let mut removed: Vec<Option<PendingCall>> = targets.iter().map(|_| None).collect();
        for (i, k) in order {
            let call = self.pending.remove(i);
            if let Some(slot) = removed.get_mut(k) {
                *slot = Some(call);
            }
        }
        removed
    }
}

/// The output item of a call: custom tool calls take a custom output.
fn output_item(custom: bool, call_id: String, output: ToolOutput) -> ResponseItem {
    if custom {
        ResponseItem::CustomToolCallOutput { call_id, output }
    } else {
        ResponseItem::FunctionCallOutput { call_id, output }
    }
}

impl Builder<'_> {
    /// One call of an assistant message (`position` among its calls).
    pub(super) fn call(
        &mut self,
        m: &Message,
        mut call: ToolCall,
        position: usize,
    ) -> Result<(), ConvertError> {
        let index = Some(m.index);
        let call_id = match &call.id {
            Some(original) if !original.is_empty() => self.call_id_for(original, m.index)?,
            _ => self.synthesized_call_id(m.index, position),
        };
        self.calls.ids.insert(call_id.clone());
        let mut arguments = std::mem::take(&mut call.arguments);
        let rule = Builtin::ArgumentsString;
        if call.arguments_from_object {
            self.decide(index, rule, Action::ArgumentsSerialized, 0, 0);
        }
        if call.arguments_missing && !call.custom {
            arguments = "{}".to_string();
            self.decide(index, rule, Action::ArgumentsDefaulted, 0, 2);
        }
        let item = if call.custom {
            ResponseItem::CustomToolCall {
                call_id: call_id.clone(),
                name: call.name.clone(),
                input: arguments,
            }
        } else {
            ResponseItem::FunctionCall {
                name: call.name.clone(),
                arguments,
                call_id: call_id.clone(),
            }
        };
        self.push(ItemKind::Call, item, index);
        self.calls.pending.push(PendingCall {
            call_id,
            original: call.id.filter(|id| !id.is_empty()),
            name: call.name,
            custom: call.custom,
        });
        Ok(())
    }

    /// The id to write for a call the input gave `original`: itself the first time, renamed
    /// (`call_x#2`) by `policy.reused_call_id` when it was used before.
    fn call_id_for(&mut self, original: &str, index: usize) -> Result<String, ConvertError> {
        let uses = self.calls.uses.entry(original.to_string()).or_insert(0);
        *uses += 1;
        let n = *uses;
        if n == 1 && !self.calls.ids.contains(original) {
            return Ok(original.to_string());
        }
        let rule = PolicyId::ReusedCallId;
        if self.rules.policy.reused_call_id == ReusedCallId::Quarantine {
            let reason = format!("call id `{original}` used again");
            return Err(self.quarantine(rule, reason, Some(index)));
        }
        let mut k = n.max(2);
        let mut renamed = ids::renamed_call_id(original, k);
        while self.calls.ids.contains(&renamed) {
            k += 1;
            renamed = ids::renamed_call_id(original, k);
        }
        let action = Action::CallIdRenamed {
            from: original.to_string(),
            to: renamed.clone(),
        };
        self.decide(Some(index), rule, action, 0, 0);
        Ok(renamed)
    }

    fn synthesized_call_id(&mut self, index: usize, position: usize) -> String {
        let mut id = ids::synthesized_call_id(index, position);
        while self.calls.ids.contains(&id) {
            id.push('_');
        }
        let action = Action::CallIdSynthesized {
            call_id: id.clone(),
        };
        self.decide(Some(index), Builtin::CallId, action, 0, 0);
        id
    }

    /// Every call still waiting gets its output by `policy.missing_output`.
    pub(super) fn close_pending_calls(
        &mut self,
        before: Option<usize>,
    ) -> Result<(), ConvertError> {
        let pending = std::mem::take(&mut self.calls.pending);
        let rule = PolicyId::MissingOutput;
        for call in pending {
            if self.rules.policy.missing_output == MissingOutput::Quarantine {
                let reason = format!("call `{}` has no output", call.call_id);
                return Err(self.quarantine(rule, reason, before));
            }
            let text = self.rules.policy.missing_output_text.clone();
            let action = Action::OutputSynthesized {
                call_id: call.call_id.clone(),
            };
            self.decide(None, rule, action, 0, text.len());
            let item = output_item(call.custom, call.call_id, ToolOutput::Text(text));
            self.push(ItemKind::Output, item, None);
        }
        Ok(())
    }

    /// A `tool` or `function` message: the output of one (or several) pending calls.
    pub(super) fn tool_output(&mut self, m: &mut Message) -> Result<(), ConvertError> {
        let index = Some(m.index);
        self.flush_context();
        let mut output = self.output_of(m)?;
        if m.tool_error {
            self.mark_error(m.index, &mut output);
        }
        let output_bytes = tool_output_bytes(&output);
        let targets = self.calls.take_targets(m);
        let last_matched = targets.iter().rposition(Option::is_some);
        let mut first = true;
        let mut output = Some(output);
        for (k, target) in targets.into_iter().enumerate() {
            // The last call to get this output takes it; earlier ones (shared) get a copy.
            let this_output = if Some(k) == last_matched {
                output.take()
            } else {
                output.clone()
            };
            let this_output = this_output.unwrap_or_else(|| ToolOutput::Text(String::new()));
            match target {
                Some(call) => {
                    if !first {
                        let action = Action::OutputShared {
                            call_id: call.call_id.clone(),
                        };
                        self.decide(index, Builtin::SharedOutput, action, 0, output_bytes);
                    }
                    let item = output_item(call.custom, call.call_id, this_output);
                    self.push(ItemKind::Output, item, index);
                }
                None => {
                    let call_id = m.tool_call_ids.get(k).cloned();
                    let dropped = if first { output_bytes } else { 0 };
                    self.orphan(m.index, call_id, &this_output, dropped, first)?;
                }
            }
            first = false;
        }
        Ok(())
    }

    /// An output with no call, by `policy.orphan_output`. Only the first target of a tool
    /// message `carries_text` (the others would repeat it).
    fn orphan(
        &mut self,
        index: usize,
        call_id: Option<String>,
        output: &ToolOutput,
        dropped: usize,
        carries_text: bool,
    ) -> Result<(), ConvertError> {
        let rule = PolicyId::OrphanOutput;
        let shown = call_id.as_deref().unwrap_or("(no id)");
        match self.rules.policy.orphan_output {
            OrphanOutput::Quarantine => {
                let reason = format!("tool output for `{shown}` has no matching call");
                Err(self.quarantine(rule, reason, Some(index)))
            }
            OrphanOutput::Drop => {
                let action = Action::OrphanOutputDropped { call_id };
                self.decide(Some(index), rule, action, dropped, 0);
                Ok(())
            }
            OrphanOutput::Text if !carries_text => {
                let action = Action::OrphanOutputDropped { call_id };
                self.decide(Some(index), rule, action, 0, 0);
                Ok(())
            }
            OrphanOutput::Text => {
                let body = match output {
                    ToolOutput::Text(t) => t.clone(),
                    ToolOutput::Items(items) => {
                        let texts: Vec<&str> = items.iter().filter_map(ContentItem::text).collect();
                        texts.join("\n")
                    }
                };
                let text = self
                    .rules
                    .policy
                    .orphan_output_template
                    .replace("{call_id}", shown)
                    .replace("{text}", &body);
                let added = text.len().saturating_sub(tool_output_bytes(output));
                let action = Action::OrphanOutputAsText { call_id };
                self.decide(Some(index), rule, action, 0, added);
                self.flush_context();
                let item = ResponseItem::Message {
                    role: ROLE_USER,
                    content: vec![ContentItem::InputText { text }],
                    phase: None,
                };
                self.push(ItemKind::RealUser, item, Some(index));
                Ok(())
            }
        }
    }

    /// A failed output, by `policy.tool_error`: its text (or first text item) gets the prefix.
    fn mark_error(&mut self, index: usize, output: &mut ToolOutput) {
        let rule = PolicyId::ToolError;
        match self.rules.policy.tool_error {
            ToolError::Keep => self.decide(Some(index), rule, Action::ToolErrorKept, 0, 0),
            ToolError::Prefix => {
                let prefix = self.rules.policy.tool_error_prefix.clone();
                let added = prefix.len();
                match output {
                    ToolOutput::Text(text) => text.insert_str(0, &prefix),
                    ToolOutput::Items(items) => match items.first_mut() {
                        Some(ContentItem::InputText { text }) => text.insert_str(0, &prefix),
                        _ => items.insert(0, ContentItem::InputText { text: prefix }),
                    },
                }
                self.decide(Some(index), rule, Action::ToolErrorPrefixed, 0, added);
            }
        }
    }

    fn output_of(&mut self, m: &mut Message) -> Result<ToolOutput, ConvertError> {
        Ok(match &mut m.content {
            Content::Missing | Content::Null => ToolOutput::Text(String::new()),
            Content::Text(t) => ToolOutput::Text(std::mem::take(t)),
            Content::Parts(_) => ToolOutput::Items(self.content_items(m, Side::Input)?),
        })
    }
}

fn tool_output_bytes(output: &ToolOutput) -> usize {
    match output {
        ToolOutput::Text(t) => t.len(),
        ToolOutput::Items(items) => items
            .iter()
            .filter_map(ContentItem::text)
            .map(str::len)
            .sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{
        call, function_call, items, message, output, rules_fired, text_message, walk,
    };
    use crate::rules::{Builtin, PolicyId};

    fn assistant_calling(
        calls: Vec<crate::model::transcript::ToolCall>,
    ) -> crate::model::transcript::Message {
        let mut m = message("assistant", "");
        m.tool_calls = calls;
        m
    }

    fn tool(id: &str, text: &str) -> crate::model::transcript::Message {
        let mut m = message("tool", text);
        m.tool_call_ids = vec![id.to_string()];
        m
    }

    #[test]
    fn reused_call_id_is_renamed_in_the_call_and_its_own_output() {
        let built = walk(vec![
            message("user", "go"),
            assistant_calling(vec![call(Some("c"), "ls", "{}")]),
            tool("c", "one"),
            assistant_calling(vec![call(Some("c"), "ls", "{}")]),
            tool("c", "two"),
        ]);
        assert_eq!(
            items(&built),
            vec![
                text_message("user", &["go"]),
                function_call("c", "ls", "{}"),
                output("c", "one"),
                function_call("c#2", "ls", "{}"),
                output("c#2", "two"),
            ]
        );
        assert_eq!(rules_fired(&built), [PolicyId::ReusedCallId.rule_id()]);
    }

    #[test]
    fn legacy_function_call_pairs_by_name_with_a_synthesised_id() {
        let mut assistant = message("assistant", "");
        assistant.function_call = Some(call(None, "weather", "{\"city\":\"Oslo\"}"));
        let mut result = message("function", "rain");
        result.name = Some("weather".to_string());
        let built = walk(vec![message("user", "w?"), assistant, result]);
        let id = super::ids::synthesized_call_id(1, 0);
        assert_eq!(
            items(&built),
            vec![
                text_message("user", &["w?"]),
                function_call(&id, "weather", "{\"city\":\"Oslo\"}"),
                output(&id, "rain"),
            ]
        );
        assert_eq!(rules_fired(&built), [Builtin::CallId.rule_id()]);
    }

    #[test]
    fn one_output_for_two_calls_is_shared_and_an_orphan_dropped() {
        let mut shared = message("tool", "both");
        shared.tool_call_ids = vec!["a".to_string(), "b".to_string()];
        let built = walk(vec![
            message("user", "go"),
            assistant_calling(vec![call(Some("a"), "x", "{}"), call(Some("b"), "y", "{}")]),
            shared,
            tool("zzz", "lost"),
        ]);
        assert_eq!(
            items(&built),
            vec![
                text_message("user", &["go"]),
                function_call("a", "x", "{}"),
                function_call("b", "y", "{}"),
                output("a", "both"),
                output("b", "both"),
            ]
        );
        assert_eq!(
            rules_fired(&built),
            [
                Builtin::SharedOutput.rule_id(),
                PolicyId::OrphanOutput.rule_id()
            ]
        );
    }

    #[test]
    fn a_failed_output_gets_the_error_prefix_in_text_and_in_items() {
        use crate::model::rollout::{ContentItem, ResponseItem, ToolOutput};
        use crate::model::transcript::{Content, Part};
        let mut failed = tool("a", "no such file");
        failed.tool_error = true;
        let mut image = message("tool", "");
        image.tool_call_ids = vec!["b".to_string()];
        image.content = Content::Parts(vec![Part::Image {
            url: Some("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==".to_string()),
            file_id: None,
            detail: None,
        }]);
        image.tool_error = true;
        let built = walk(vec![
            message("user", "go"),
            assistant_calling(vec![call(Some("a"), "x", "{}"), call(Some("b"), "y", "{}")]),
            failed,
            image,
        ]);
        let with_image = ResponseItem::FunctionCallOutput {
            call_id: "b".to_string(),
            output: ToolOutput::Items(vec![
                ContentItem::InputText {
                    text: "Error: ".to_string(),
                },
                ContentItem::InputImage {
                    image_url: Some("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==".to_string()),
                    file_id: None,
                    detail: None,
                },
            ]),
        };
        let got = items(&built);
        assert_eq!(
            got[..4],
            [
                text_message("user", &["go"]),
                function_call("a", "x", "{}"),
                function_call("b", "y", "{}"),
                output("a", "Error: no such file"),
            ]
        );
        assert_eq!(got[4], with_image);
        assert_eq!(got.len(), 5);
        let fired = rules_fired(&built);
        assert_eq!(
            fired
                .iter()
                .filter(|r| *r == PolicyId::ToolError.rule_id())
                .count(),
            2
        );
    }
}
