//! One pass over the messages, in order: each message goes to the part of the converter that
//! owns its concern. The pass keeps three pieces of state, each owned by one file:
//! [`super::context`] (base instructions, developer sections and contextual fragments waiting
//! to be grouped), [`super::tools`] (the call ledger: pending calls, ids used) and the items and
//! decisions written so far (here). [`super::user`] and [`super::assistant`] convert the two
//! sides of a turn.

use super::context::Context;
use super::tools::CallLedger;
use super::{ConvertError, ItemKind, OutItem, OutPayload};
use crate::audit::{Action, Decision};
use crate::model::rollout::ResponseItem;
use crate::model::transcript::{Message, Role, Transcript};
use crate::rules::matcher::{classify, Subject};
use crate::rules::{
    Builtin, Compaction, PolicyAction, PolicyId, RuleRef, RuleSet, Slot, UnknownRole,
};

/// What the walk produced.
#[derive(Debug)]
pub(crate) struct Built {
    pub items: Vec<OutItem>,
    pub decisions: Vec<Decision>,
    pub base_instructions: Option<String>,
}

/// The state of one walk over a transcript.
pub(super) struct Builder<'r> {
    pub(super) rules: &'r RuleSet,
    /// The source file's key and the record's model, for rules that match on them.
    source: &'r str,
    model: Option<&'r str>,
    pub(super) items: Vec<OutItem>,
    pub(super) decisions: Vec<Decision>,
    pub(super) context: Context,
    pub(super) calls: CallLedger,
    /// The current message went to base instructions or developer context.
    pub(super) landed_in_instructions: bool,
}

/// Walks the transcript's messages in order.
pub(crate) fn build(
    transcript: &mut Transcript,
    rules: &RuleSet,
    source: &str,
) -> Result<Built, ConvertError> {
    let mut b = Builder {
        rules,
        source,
        model: transcript.meta.model.as_deref(),
        // About an item a message: sized once, not grown message by message.
        items: Vec::with_capacity(transcript.messages.len()),
        decisions: Vec::new(),
        context: Context::default(),
        calls: CallLedger::default(),
        landed_in_instructions: false,
    };
    let messages = &mut transcript.messages;
    let leading_end = messages
        .iter()
        .position(|m| !m.role.is_instructions())
        .unwrap_or(messages.len());
    // `first_in_block`: no earlier message of the same role in the same block went to an
    // instruction slot. A context block or an empty system message before the real system
    // prompt must not rob it of being the base instructions.
    // A list, not a set: a conversation has a few roles, and a role is copied only when it
    // lands in a slot for the first time.
    let mut seen_in_block: Vec<(bool, Role)> = Vec::new();
    let unexplained = super::native::unexplained_reasoning(messages);
    for (at, message) in messages.iter_mut().enumerate() {
        if let Some(native) = message.native.take() {
            let unexplained = unexplained.get(at).copied().unwrap_or(false);
            b.native(message, *native, unexplained)?;
            continue;
        }
        let leading = message.index < leading_end;
        let first_in_block = !seen_in_block
            .iter()
            .any(|(l, role)| *l == leading && *role == message.role);
        b.landed_in_instructions = false;
        b.message(message, leading, first_in_block)?;
        if b.landed_in_instructions && first_in_block {
            seen_in_block.push((leading, message.role.clone()));
        }
    }
    b.flush_context();
    b.close_pending_calls(None)?;
    Ok(Built {
        items: b.items,
        decisions: b.decisions,
        base_instructions: b.context.base,
    })
}

impl<'r> Builder<'r> {
    pub(super) fn decide(
        &mut self,
        message: Option<usize>,
        rule: impl Into<RuleRef>,
        action: Action,
        dropped: usize,
        added: usize,
    ) {
        self.decisions.push(Decision {
            message,
            rule: rule.into(),
            action,
            bytes_dropped: dropped,
            bytes_added: added,
        });
    }

    pub(super) fn quarantine(
        &self,
        rule: impl Into<RuleRef>,
        reason: String,
        message: Option<usize>,
    ) -> ConvertError {
        ConvertError {
            rule: rule.into(),
            reason,
            message,
        }
    }

    pub(super) fn push(&mut self, kind: ItemKind, item: ResponseItem, origin: Option<usize>) {
        self.items.push(OutItem {
            kind,
            payload: OutPayload::Item(item),
            origin,
        });
    }

    /// One input message, dispatched by role.
    fn message(
        &mut self,
        m: &mut Message,
        leading: bool,
        first_in_block: bool,
    ) -> Result<(), ConvertError> {
        for field in std::mem::take(&mut m.dropped_fields) {
            let action = Action::FieldDropped {
                field: field.path,
                found: Some(field.found.to_string()),
            };
            // Not text the accounting counts in (names, phases, image details): no bytes.
            self.decide(Some(m.index), Builtin::WrongTypeField, action, 0, 0);
        }
        if m.role != Role::Assistant {
            self.drop_assistant_fields(m);
        }
        if let Some(from) = &m.aliased_from {
            let action = Action::RoleAliased {
                from: from.clone(),
                to: m.role.to_string(),
            };
            self.decide(Some(m.index), RuleRef::RoleAliases, action, 0, 0);
        }
        if m.compaction {
            return self.compaction(m);
        }
        match m.role {
            Role::System | Role::Developer | Role::User => {
                self.classified(m, leading, first_in_block)
            }
            Role::Assistant => self.assistant(m),
            Role::Tool | Role::Function => self.tool_output(m),
            Role::Other(_) => self.unknown_role(m),
        }
    }

    /// A system, developer or user message: the first rule that matches decides its slot.
    fn classified(
        &mut self,
        m: &mut Message,
        leading: bool,
        first_in_block: bool,
    ) -> Result<(), ConvertError> {
        let text = m.content.joined_texts();
        let subject = Subject {
            role: m.role.as_str(),
            text: &text,
            name: m.name.as_deref(),
            index: m.index,
            leading,
            first_in_block,
            model: self.model,
            source: self.source,
        };
        // The rule is borrowed from the rule set, not from the builder: its fields need no copy.
        let rules: &'r RuleSet = self.rules;
        match classify(rules, &subject) {
            Some(rule) => {
                let id = RuleRef::File(rule.id.clone());
                let (kind, template) = (rule.kind.as_deref(), rule.template.as_deref());
                self.slot(m, rule.slot, &id, kind, template, rule.reason.as_deref())
            }
            None if m.role == Role::User => self.user(m),
            None => self.slot(
                m,
                Slot::Developer,
                &RuleRef::Builtin(Builtin::UnmatchedInstructions),
                None,
                None,
                None,
            ),
        }
    }

    /// A compaction summary, by `policy.compaction`: never a user turn of its own.
    fn compaction(&mut self, m: &mut Message) -> Result<(), ConvertError> {
        let index = Some(m.index);
        let texts = m.content.texts();
        let added = texts.len().saturating_sub(1);
        let text = texts.join("\n");
        let rule = PolicyId::Compaction;
        let how = self.rules.policy.compaction;
        let action = Action::Compaction {
            how: how.name().to_string(),
        };
        let payload = match how {
            Compaction::Drop => {
                self.decide(index, rule, action, text.len() - added, 0);
                return Ok(());
            }
            Compaction::Replace => OutPayload::CompactedReplacing(text),
            Compaction::Compacted => OutPayload::Compacted(text),
        };
        self.decide(index, rule, action, 0, added);
        self.flush_context();
        self.close_pending_calls(index)?;
        self.items.push(OutItem {
            kind: ItemKind::Compacted,
            payload,
            origin: index,
        });
        Ok(())
    }

    /// A role no rule knows: `policy.unknown_role` decides.
    fn unknown_role(&mut self, m: &mut Message) -> Result<(), ConvertError> {
        let rule = PolicyId::UnknownRole;
        let action = Action::UnknownRole {
            role: m.role.to_string(),
        };
        match self.rules.policy.unknown_role {
            UnknownRole::Quarantine => {
                let reason = format!("unknown role `{}`", m.role);
                Err(self.quarantine(rule, reason, Some(m.index)))
            }
            UnknownRole::Drop => {
                let dropped = message_text_bytes(m);
                self.decide(Some(m.index), rule, action, dropped, 0);
                Ok(())
            }
            UnknownRole::User => {
                self.decide(Some(m.index), rule, action, 0, 0);
                self.user(m)
            }
            UnknownRole::Developer => {
                self.decide(Some(m.index), rule, action, 0, 0);
                self.slot(m, Slot::Developer, &rule.into(), None, None, None)
            }
        }
    }
}

/// All text of an input message, as the accounting counts it.
pub(crate) fn message_text_bytes(m: &Message) -> usize {
    crate::audit::accounting::input_message_bytes(m)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{items, message, rules_fired, text_message, walk};
    use super::super::OutPayload;
    use crate::rules::PolicyId;

    #[test]
    fn a_compaction_summary_replaces_the_history_and_is_no_turn() {
        let mut summary = message("user", "Summary: we fixed the bug.");
        summary.compaction = true;
        let built = walk(vec![
            message("user", "fix it"),
            message("assistant", "fixed"),
            summary,
            message("user", "next"),
        ]);
        assert_eq!(
            items(&built),
            vec![
                text_message("user", &["fix it"]),
                text_message("assistant", &["fixed"]),
                text_message("user", &["next"]),
            ]
        );
        assert_eq!(
            built.items[2].payload,
            OutPayload::CompactedReplacing("Summary: we fixed the bug.".to_string())
        );
        assert_eq!(built.items[2].origin, Some(2));
        assert_eq!(rules_fired(&built), [PolicyId::Compaction.rule_id()]);
    }
}
