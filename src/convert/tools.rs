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
use crate::model::transcript::{Content, Message, Role, ToolCall};
use crate::rules::template::fill;
use crate::rules::{Builtin, MissingOutput, OrphanOutput, PolicyId, ReusedCallId, ToolError};

/// A call waiting for its output.
#[derive(Debug)]
struct PendingCall {
    call_id: String,
    custom: bool,
}

/// A call of the ledger, in the order of the calls: answered once its `call` is taken.
#[derive(Debug)]
struct Slot {
    call: Option<PendingCall>,
    /// The next slot whose call has the same input id, and the same name.
    next_same_id: Option<usize>,
    next_same_name: Option<usize>,
}

/// The slots of one input id or one name, as a list through [`Slot`]'s links: its first
/// slot not yet passed over, and its last (where a new call is linked).
#[derive(Debug, Clone, Copy)]
struct Chain {
    first: usize,
    last: usize,
}

/// The calls of one conversation.
///
/// An output finds its call in constant time (amortised), so that a message with N parallel
/// calls and their N outputs costs O(N), not O(N²): each call is a slot, in order,
/// and the pending calls of one input id, or of one name, are linked in a [`Chain`]. Taking a
/// call leaves its slot empty; a chain or the head passes over empty slots as it meets them,
/// once each. The first pending call (by order, by id, by name) is the one taken, as when
/// the pending calls were a list searched from its start.
#[derive(Debug, Default)]
pub(super) struct CallLedger {
    slots: Vec<Slot>,
    /// No slot before it holds a pending call.
    head: usize,
    by_name: FxHashMap<String, Option<Chain>>,
    /// Each input id used for a call: how often, whether it was written as it is, its
    /// pending calls. One entry holds all three, so that an id is copied once, not once a map.
    uses: FxHashMap<String, Uses>,
    /// The call ids written that are not an input id as it is: renamed or synthesised. With
    /// the input ids written as they are, every call id written ([`CallLedger::is_written`]).
    made_ids: FxHashSet<String>,
    /// The calls a tool message answers, kept for the next one (no list a message).
    targets: Vec<Option<PendingCall>>,
}

/// The uses of one input call id.
#[derive(Debug, Default)]
struct Uses {
    count: usize,
    /// The `k` of the last rename (0 before the first).
    last_rename: usize,
    /// A call was written with this id as it is.
    written: bool,
    /// The pending calls of this id, linked through [`Slot::next_same_id`].
    chain: Option<Chain>,
}

/// Links slot `at` at the end of `chain` (a new chain when there is none).
fn link(
    chain: &mut Option<Chain>,
    slots: &mut [Slot],
    at: usize,
    next: fn(&mut Slot) -> &mut Option<usize>,
) {
    match chain {
        Some(chain) => {
            if let Some(last) = slots.get_mut(chain.last) {
                *next(last) = Some(at);
            }
            chain.last = at;
        }
        None => {
            *chain = Some(Chain {
                first: at,
                last: at,
            })
        }
    }
}

/// The first slot of `chain` that holds a pending call; the slots passed over (answered)
/// leave the chain, and a chain left empty is none.
fn first_pending(
    chain: &mut Option<Chain>,
    slots: &mut [Slot],
    next: fn(&mut Slot) -> &mut Option<usize>,
) -> Option<usize> {
    let mut at = chain.map(|c| c.first);
    while let Some(i) = at {
        let Some(slot) = slots.get_mut(i) else {
            break;
        };
        if slot.call.is_some() {
            if let Some(chain) = chain {
                chain.first = i;
            }
            return Some(i);
        }
        at = *next(slot);
    }
    *chain = None;
    None
}

fn next_same_id(slot: &mut Slot) -> &mut Option<usize> {
    &mut slot.next_same_id
}

fn next_same_name(slot: &mut Slot) -> &mut Option<usize> {
    &mut slot.next_same_name
}

impl CallLedger {
    /// A call now waiting for its output.
    /// Its input id, if any, was linked by [`Builder::call_id_for`] when the id was chosen.
    fn add(&mut self, call: PendingCall, name: String) {
        let at = self.slots.len();
        self.slots.push(Slot {
            call: Some(call),
            next_same_id: None,
            next_same_name: None,
        });
        let chain = match self.by_name.get_mut(name.as_str()) {
            Some(chain) => chain,
            None => self.by_name.entry(name).or_insert(None),
        };
        link(chain, &mut self.slots, at, next_same_name);
    }

    /// A call id is taken: a call was written with it.
    fn is_written(&self, id: &str) -> bool {
        self.uses.get(id).is_some_and(|uses| uses.written) || self.made_ids.contains(id)
    }

    fn take(&mut self, at: Option<usize>) -> Option<PendingCall> {
        self.slots.get_mut(at?)?.call.take()
    }

    /// The first pending call.
    fn first(&mut self) -> Option<usize> {
        while let Some(slot) = self.slots.get(self.head) {
            if slot.call.is_some() {
                return Some(self.head);
            }
            self.head += 1;
        }
        None
    }

    fn first_with_id(&mut self, id: &str) -> Option<usize> {
        let chain = &mut self.uses.get_mut(id)?.chain;
        first_pending(chain, &mut self.slots, next_same_id)
    }

    fn first_with_name(&mut self, name: &str) -> Option<usize> {
        let chain = self.by_name.get_mut(name)?;
        let at = first_pending(chain, &mut self.slots, next_same_name);
        if at.is_none() {
            self.by_name.remove(name);
        }
        at
    }

    /// Takes the pending calls that `tool_call_ids` (or, without ids, the message's role and
    /// name) designate, in the order of the ids; `None` where no pending call matches. An id
    /// listed twice takes the first two calls that used it.
    fn take_targets(&mut self, m: &Message, targets: &mut Vec<Option<PendingCall>>) {
        targets.clear();
        if m.tool_call_ids.is_empty() {
            let by_name = match (&m.name, m.role == Role::Function) {
                (Some(name), true) => self.first_with_name(name),
                _ => None,
            };
            let at = by_name.or_else(|| self.first());
            targets.push(self.take(at));
            return;
        }
        for id in &m.tool_call_ids {
            let at = self.first_with_id(id);
            targets.push(self.take(at));
        }
    }

    /// Every pending call, in order; none is left pending (the ids written stay). The slots
    /// stay, empty, so that the chains of the input ids still lead through them: a later call
    /// of an id is linked after them and found past them, each passed over once.
    fn take_all(&mut self) -> Vec<PendingCall> {
        let pending = self
            .slots
            .iter_mut()
            .skip(self.head)
            .filter_map(|s| s.call.take())
            .collect();
        self.head = self.slots.len();
        self.by_name = FxHashMap::default();
        pending
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
        let call_id = match call.id.take().filter(|id| !id.is_empty()) {
            Some(original) => self.call_id_for(original, m.index)?,
            None => self.synthesized_call_id(m.index, position),
        };
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
        let pending = PendingCall {
            call_id,
            custom: call.custom,
        };
        self.calls.add(pending, call.name);
        Ok(())
    }

    /// A call written as read (a Codex rollout's), waiting for its output like any call: the
    /// id it is written with (its own, or renamed when it was used before).
    pub(super) fn native_call(
        &mut self,
        index: usize,
        original: String,
        name: String,
        custom: bool,
    ) -> Result<String, ConvertError> {
        let call_id = self.call_id_for(original, index)?;
        let pending = PendingCall {
            call_id: call_id.clone(),
            custom,
        };
        self.calls.add(pending, name);
        Ok(call_id)
    }

    /// The output of a call written as read: the id its call was written with, taken from the
    /// pending calls (`None`: no call waits for it).
    pub(super) fn native_output(&mut self, call_id: &str) -> Option<String> {
        let at = self.calls.first_with_id(call_id);
        self.calls.take(at).map(|call| call.call_id)
    }

    /// The id to write for a call the input gave `original`: itself the first time, renamed
    /// (`call_x#2`) by `policy.reused_call_id` when it was used before.
    /// The call gets the ledger's next slot: it is linked in the chain of `original` here.
    fn call_id_for(&mut self, original: String, index: usize) -> Result<String, ConvertError> {
        let ledger = &mut self.calls;
        let at = ledger.slots.len();
        let uses = match ledger.uses.get_mut(original.as_str()) {
            Some(uses) => uses,
            None => ledger.uses.entry(original.clone()).or_default(),
        };
        uses.count += 1;
        link(&mut uses.chain, &mut ledger.slots, at, next_same_id);
        let (n, last_rename) = (uses.count, uses.last_rename);
        if n == 1 && !ledger.is_written(&original) {
            if let Some(uses) = ledger.uses.get_mut(original.as_str()) {
                uses.written = true;
            }
            return Ok(original);
        }
        let original = original.as_str();
        let rule = PolicyId::ReusedCallId;
        if self.rules.policy.reused_call_id == ReusedCallId::Quarantine {
            let reason = format!("call id `{original}` used again");
            return Err(self.quarantine(rule, reason, Some(index)));
        }
        // The first free `k` from `n` on. Every `k` from the last rename's `n` up to its `k` is
        // taken (the walk found them so, and the ids only grow), so the walk resumes after it:
        // inputs that hold `call_x#2` ... `call_x#N` and reuse `call_x` N times cost O(N).
        let mut k = n.max(2).max(last_rename + 1);
        let mut renamed = ids::renamed_call_id(original, k);
        while self.calls.is_written(&renamed) {
            k += 1;
            renamed = ids::renamed_call_id(original, k);
        }
        if let Some(uses) = self.calls.uses.get_mut(original) {
            uses.last_rename = k;
        }
        self.calls.made_ids.insert(renamed.clone());
        let action = Action::CallIdRenamed {
            from: original.to_string(),
            to: renamed.clone(),
        };
        self.decide(Some(index), rule, action, 0, 0);
        Ok(renamed)
    }

    fn synthesized_call_id(&mut self, index: usize, position: usize) -> String {
        let mut id = ids::synthesized_call_id(index, position);
        while self.calls.is_written(&id) {
            id.push('_');
        }
        self.calls.made_ids.insert(id.clone());
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
        let pending = self.calls.take_all();
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
        let mut targets = std::mem::take(&mut self.calls.targets);
        self.calls.take_targets(m, &mut targets);
        let last_matched = targets.iter().rposition(Option::is_some);
        let mut first = true;
        let mut output = Some(output);
        for (k, target) in targets.drain(..).enumerate() {
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
        self.calls.targets = targets;
        Ok(())
    }

    /// An output with no call, by `policy.orphan_output`. Only the first target of a tool
    /// message `carries_text` (the others would repeat it).
    pub(super) fn orphan(
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
                let text = fill(
                    &self.rules.policy.orphan_output_template,
                    &[("call_id", shown), ("text", &body)],
                );
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

    /// Issue 26: thousands of parallel calls, answered one by one in reverse and by a list,
    /// each output on its own call (and in linear time: the ledger searches no list).
    #[test]
    fn many_parallel_calls_each_get_their_own_output() {
        let n = 3000;
        let id = |i: usize| format!("c{i}");
        let name = |i: usize| format!("f{}", i % 5);
        let calls = (0..n).map(|i| call(Some(&id(i)), &name(i), "{}")).collect();
        let mut messages = vec![message("user", "go"), assistant_calling(calls)];
        let odd: Vec<usize> = (0..n).rev().filter(|i| i % 2 == 1).collect();
        for &i in &odd {
            messages.push(tool(&id(i), &format!("o{i}")));
        }
        let even: Vec<usize> = (0..n).filter(|i| i % 2 == 0).collect();
        let mut listed = message("tool", "all");
        listed.tool_call_ids = even.iter().map(|&i| id(i)).collect();
        // Already answered, then never called: both orphans.
        listed.tool_call_ids.push(id(1));
        listed.tool_call_ids.push("nowhere".to_string());
        messages.push(listed);
        let built = walk(messages);

        let mut expected = vec![text_message("user", &["go"])];
        expected.extend((0..n).map(|i| function_call(&id(i), &name(i), "{}")));
        expected.extend(odd.iter().map(|&i| output(&id(i), &format!("o{i}"))));
        expected.extend(even.iter().map(|&i| output(&id(i), "all")));
        assert_eq!(items(&built), expected);
        let mut fired = vec![Builtin::SharedOutput.rule_id(); even.len() - 1];
        fired.extend([PolicyId::OrphanOutput.rule_id(); 2]);
        assert_eq!(rules_fired(&built), fired);
    }

    /// Legacy `function` outputs among many calls without ids: each takes the first call still
    /// waiting with its name, one with no such call the first call waiting, and the calls
    /// left over get `aborted`, in the calls' order.
    #[test]
    fn many_legacy_outputs_pair_by_name_then_by_order() {
        let n = 3000;
        let name = |i: usize| format!("f{}", i % 7);
        let calls = (0..n).map(|i| call(None, &name(i), "{}")).collect();
        let mut messages = vec![message("user", "go"), assistant_calling(calls)];
        // The k-th output named `f{j}` answers the k-th call named `f{j}`: names asked in
        // the order 6, 5, ... 0, and the last 100 calls' names never asked.
        let mut answers: Vec<(usize, usize)> = Vec::new();
        let mut asked = [0usize; 7];
        for k in 0..n - 100 {
            let j = 6 - k % 7;
            let call_at = j + 7 * asked[j];
            asked[j] += 1;
            let mut result = message("function", &format!("r{k}"));
            result.name = Some(name(j));
            messages.push(result);
            answers.push((call_at, k));
        }
        // Named for no call: the first call waiting.
        let mut stray = message("function", "stray");
        stray.name = Some("nope".to_string());
        messages.push(stray);
        let built = walk(messages);

        let answered: std::collections::BTreeSet<usize> = answers.iter().map(|a| a.0).collect();
        let mut waiting = (0..n).filter(|i| !answered.contains(i));
        let first_waiting = waiting.next().expect("calls left over");
        let id = |i: usize| super::ids::synthesized_call_id(1, i);
        let mut expected = vec![text_message("user", &["go"])];
        expected.extend((0..n).map(|i| function_call(&id(i), &name(i), "{}")));
        expected.extend(
            answers
                .iter()
                .map(|&(i, k)| output(&id(i), &format!("r{k}"))),
        );
        expected.push(output(&id(first_waiting), "stray"));
        expected.extend(waiting.map(|i| output(&id(i), "aborted")));
        assert_eq!(items(&built), expected);
    }

    /// An input that holds `c#2` ... `c#N` and reuses `c`: each reuse takes the next free
    /// `c#k` (the walk for a free `k` resumes where the last rename left it).
    #[test]
    fn reused_ids_skip_the_renamed_names_the_input_took() {
        let taken = 50;
        let mut calls: Vec<_> = (2..=taken + 1)
            .map(|k| call(Some(&format!("c#{k}")), "x", "{}"))
            .collect();
        calls.extend((0..5).map(|_| call(Some("c"), "x", "{}")));
        let built = walk(vec![message("user", "go"), assistant_calling(calls)]);
        let got: Vec<String> = items(&built)
            .iter()
            .filter_map(|item| match item {
                crate::model::rollout::ResponseItem::FunctionCall { call_id, .. } => {
                    Some(call_id.clone())
                }
                crate::model::rollout::ResponseItem::Message { .. }
                | crate::model::rollout::ResponseItem::Reasoning { .. }
                | crate::model::rollout::ResponseItem::FunctionCallOutput { .. }
                | crate::model::rollout::ResponseItem::CustomToolCall { .. }
                | crate::model::rollout::ResponseItem::CustomToolCallOutput { .. }
                | crate::model::rollout::ResponseItem::Native(_) => None,
            })
            .collect();
        let mut expected: Vec<String> = (2..=taken + 1).map(|k| format!("c#{k}")).collect();
        expected.push("c".to_string());
        expected.extend((taken + 2..taken + 6).map(|k| format!("c#{k}")));
        assert_eq!(got, expected);
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
