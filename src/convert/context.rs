//! System, developer and contextual-user content: the slots of migration.md section 3.
//!
//! A classified message lands in one slot: base instructions (kept aside for the session
//! meta), a developer section, a contextual-user fragment, a `compacted` line, or nowhere
//! (dropped or quarantined). Sections and fragments wait here until something else comes, then
//! form one message each way, one `input_text` per section, in order, as Codex groups them.

use super::build::Builder;
use super::parts::{convert_part, Side};
use super::{ConvertError, ItemKind, OutItem, OutPayload};
use crate::audit::Action;
use crate::model::rollout::{ContentItem, ResponseItem, ROLE_DEVELOPER, ROLE_USER};
use crate::model::transcript::{Content, Message, Part};
use crate::rules::template::fill;
use crate::rules::{Builtin, DropOrQuarantine, EmptyMessage, PolicyId, RuleRef, Slot};

/// A developer section waiting to be grouped.
#[derive(Debug)]
struct Section {
    text: String,
    /// A model-switch section: goes first in its bundle.
    first: bool,
    origin: usize,
}

/// Instructions and context seen so far.
#[derive(Debug, Default)]
pub(super) struct Context {
    /// The base instructions, once a rule put a message there.
    pub(super) base: Option<String>,
    developer: Vec<Section>,
    /// Contextual fragments waiting to be grouped, with their origin.
    contextual: Vec<(String, usize)>,
}

/// A rule's instructions for one message, beyond its slot.
struct Placement<'a> {
    rule: &'a RuleRef,
    index: usize,
    kind: Option<&'a str>,
    name: Option<&'a str>,
}

impl Builder<'_> {
    /// Places a classified message in its slot.
    pub(super) fn slot(
        &mut self,
        m: &mut Message,
        slot: Slot,
        rule: &RuleRef,
        kind: Option<&str>,
        template: Option<&str>,
        reason: Option<&str>,
    ) -> Result<(), ConvertError> {
        let index = Some(m.index);
        match slot {
            Slot::User => {
                self.decide(index, rule, Action::Classified { slot }, 0, 0);
                return self.user(m);
            }
            Slot::Drop => {
                let dropped = m.content.texts().iter().map(|t| t.len()).sum();
                self.decide(index, rule, Action::Dropped, dropped, 0);
                return Ok(());
            }
            Slot::Quarantine => {
                let reason = reason.map_or_else(
                    || format!("{} message classified as quarantine", m.role),
                    str::to_string,
                );
                return Err(self.quarantine(rule, reason, index));
            }
            Slot::BaseInstructions
            | Slot::Developer
            | Slot::SeparateDeveloper
            | Slot::ModelSwitch
            | Slot::ContextualUser
            | Slot::Compacted => {}
        }
        let text = self.instruction_text(m)?;
        if text.trim().is_empty() && self.rules.policy.empty_message == EmptyMessage::Drop {
            let action = Action::EmptyMessageDropped;
            self.decide(index, PolicyId::EmptyMessage, action, text.len(), 0);
            return Ok(());
        }
        self.landed_in_instructions = matches!(
            slot,
            Slot::BaseInstructions | Slot::Developer | Slot::SeparateDeveloper | Slot::ModelSwitch
        );
        let mut slot = slot;
        if slot == Slot::BaseInstructions {
            if self.context.base.is_none() {
                self.decide(index, rule, Action::Classified { slot }, 0, 0);
                self.repeated_before(&text)?;
                self.context.base = Some(text);
                return Ok(());
            }
            self.decide(index, rule, Action::BaseInstructionsAlreadySet, 0, 0);
            slot = Slot::Developer;
        } else {
            self.decide(index, rule, Action::Classified { slot }, 0, 0);
        }
        let text = match template {
            Some(template) => self.wrap(template, text, rule, "template", m),
            None => text,
        };
        let placement = Placement {
            rule,
            index: m.index,
            kind,
            name: m.name.as_deref(),
        };
        self.place(slot, text, placement)
    }

    /// Puts the (wrapped) text of a message in a slot that keeps it.
    fn place(&mut self, slot: Slot, text: String, at: Placement<'_>) -> Result<(), ConvertError> {
        match slot {
            Slot::Developer | Slot::SeparateDeveloper | Slot::ModelSwitch => {
                self.developer_section(slot, text, at)
            }
            Slot::ContextualUser => self.contextual_fragment(text, at),
            Slot::Compacted => {
                self.flush_context();
                self.items.push(OutItem {
                    kind: ItemKind::Compacted,
                    payload: OutPayload::Compacted(text),
                    origin: Some(at.index),
                });
                Ok(())
            }
            Slot::BaseInstructions | Slot::Drop | Slot::Quarantine | Slot::User => Ok(()),
        }
    }

    /// The base instructions `base` were just set: a developer section read before them and
    /// still waiting with the same text is a repetition of them, as one read after them is
    /// (`policy.duplicate_base_instructions`), wherever the leading system message stands.
    fn repeated_before(&mut self, base: &str) -> Result<(), ConvertError> {
        let rule = PolicyId::DuplicateBaseInstructions;
        let (repeated, kept): (Vec<Section>, Vec<Section>) =
            std::mem::take(&mut self.context.developer)
                .into_iter()
                .partition(|s| s.text == base);
        self.context.developer = kept;
        for section in repeated {
            let index = Some(section.origin);
            match self.rules.policy.duplicate_base_instructions {
                DropOrQuarantine::Drop => {
                    let action = Action::DuplicateBaseInstructionsDropped;
                    self.decide(index, rule, action, section.text.len(), 0);
                }
                DropOrQuarantine::Quarantine => {
                    let reason = "base instructions repeated as a developer message";
                    return Err(self.quarantine(rule, reason.to_string(), index));
                }
            }
        }
        Ok(())
    }

    fn developer_section(
        &mut self,
        slot: Slot,
        text: String,
        at: Placement<'_>,
    ) -> Result<(), ConvertError> {
        let index = Some(at.index);
        if self.context.base.as_deref() == Some(text.as_str()) {
            let rule = PolicyId::DuplicateBaseInstructions;
            return match self.rules.policy.duplicate_base_instructions {
                DropOrQuarantine::Drop => {
                    let action = Action::DuplicateBaseInstructionsDropped;
                    self.decide(index, rule, action, text.len(), 0);
                    Ok(())
                }
                DropOrQuarantine::Quarantine => {
                    let reason = "base instructions repeated as a developer message";
                    Err(self.quarantine(rule, reason.to_string(), index))
                }
            };
        }
        self.flush_contextual();
        let section = Section {
            text,
            first: slot == Slot::ModelSwitch,
            origin: at.index,
        };
        match slot {
            Slot::SeparateDeveloper => {
                self.flush_developer();
                self.context.developer.push(section);
                self.flush_developer();
            }
            Slot::ModelSwitch => {
                let developer = &mut self.context.developer;
                let position = developer.iter().take_while(|s| s.first).count();
                developer.insert(position, section);
            }
            Slot::BaseInstructions
            | Slot::Developer
            | Slot::ContextualUser
            | Slot::Compacted
            | Slot::Drop
            | Slot::Quarantine
            | Slot::User => self.context.developer.push(section),
        }
        Ok(())
    }

    fn contextual_fragment(&mut self, text: String, at: Placement<'_>) -> Result<(), ConvertError> {
        let marker = match at.kind {
            Some(k) => self.rules.marker(k),
            None => self.rules.marker_wrapping(&text),
        };
        let Some(marker) = marker.cloned() else {
            let reason = "contextual user text matches no registered marker";
            return Err(self.quarantine(at.rule, reason.to_string(), Some(at.index)));
        };
        let text = if marker.wraps(&text) {
            text
        } else {
            let wrapped = fill_template(&marker.template, &text, at.name, &self.rules.session.cwd);
            let added = wrapped.len().saturating_sub(text.len());
            let action = Action::Wrapped {
                kind: marker.kind.clone(),
            };
            self.decide(Some(at.index), at.rule, action, 0, added);
            wrapped
        };
        self.push_contextual(text, at.index, marker.separate);
        Ok(())
    }

    /// `text` wrapped in a rule's template, with the decision that says so.
    fn wrap(
        &mut self,
        template: &str,
        text: String,
        rule: &RuleRef,
        kind: &str,
        m: &Message,
    ) -> String {
        let wrapped = fill_template(template, &text, m.name.as_deref(), &self.rules.session.cwd);
        let added = wrapped.len().saturating_sub(text.len());
        let action = Action::Wrapped {
            kind: kind.to_string(),
        };
        self.decide(Some(m.index), rule, action, 0, added);
        wrapped
    }

    pub(super) fn push_contextual(&mut self, text: String, origin: usize, separate: bool) {
        self.flush_developer();
        if separate {
            self.flush_contextual();
        }
        self.context.contextual.push((text, origin));
        if separate {
            self.flush_contextual();
        }
    }

    /// One string for a system/developer message: text parts joined, other parts by policy.
    fn instruction_text(&mut self, m: &mut Message) -> Result<String, ConvertError> {
        let mut pieces: Vec<String> = Vec::new();
        match &mut m.content {
            Content::Missing | Content::Null => {}
            Content::Text(t) => pieces.push(std::mem::take(t)),
            Content::Parts(parts) => {
                for part in parts.iter_mut() {
                    match part {
                        Part::Text(t) | Part::Refusal(t) => pieces.push(std::mem::take(t)),
                        other @ Part::Image { .. }
                        | other @ Part::Audio { .. }
                        | other @ Part::File { .. }
                        | other @ Part::Unknown { .. } => {
                            let policy = &self.rules.policy;
                            let mut decisions = Vec::new();
                            let item =
                                convert_part(other, Side::Output, policy, m.index, &mut decisions)?;
                            self.decisions.extend(decisions);
                            if let Some(text) = item.as_ref().and_then(ContentItem::text) {
                                pieces.push(text.to_string());
                            }
                        }
                    }
                }
            }
        }
        if pieces.len() > 1 {
            let action = Action::PartsJoined {
                parts: pieces.len(),
            };
            let added = pieces.len() - 1;
            self.decide(Some(m.index), Builtin::JoinParts, action, 0, added);
        }
        Ok(pieces.join("\n"))
    }

    /// Writes the developer sections and contextual fragments waiting, in that order.
    pub(super) fn flush_context(&mut self) {
        self.flush_developer();
        self.flush_contextual();
    }

    /// Called before every message that is not context: most often there is none to flush.
    pub(super) fn flush_developer(&mut self) {
        if self.context.developer.is_empty() {
            return;
        }
        let sections = std::mem::take(&mut self.context.developer);
        let origin = sections.first().map(|s| s.origin);
        // One developer message, one input_text per section (never concatenated). Items from
        // several input messages share the first one's origin; accounting sums by item.
        let texts = sections.into_iter().map(|s| s.text).collect();
        self.push_bundle(ItemKind::Developer, ROLE_DEVELOPER, texts, origin);
    }

    fn flush_contextual(&mut self) {
        if self.context.contextual.is_empty() {
            return;
        }
        let fragments = std::mem::take(&mut self.context.contextual);
        let origin = fragments.first().map(|f| f.1);
        let texts = fragments.into_iter().map(|(text, _)| text).collect();
        self.push_bundle(ItemKind::ContextualUser, ROLE_USER, texts, origin);
    }

    /// One message of `input_text` parts, if there is any text to group.
    fn push_bundle(
        &mut self,
        kind: ItemKind,
        role: &'static str,
        texts: Vec<String>,
        origin: Option<usize>,
    ) {
        if texts.is_empty() {
            return;
        }
        let content = texts
            .into_iter()
            .map(|text| ContentItem::InputText { text })
            .collect();
        let item = ResponseItem::Message {
            role,
            content,
            phase: None,
        };
        self.push(kind, item, origin);
    }
}

/// Fills `{text}`, `{name}` and `{cwd}` in a wrap template (braces inside the values are
/// never read as placeholders).
fn fill_template(template: &str, text: &str, name: Option<&str>, cwd: &str) -> String {
    fill(
        template,
        &[("text", text), ("name", name.unwrap_or("")), ("cwd", cwd)],
    )
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{items, message, rules_fired, text_message, walk};

    #[test]
    fn a_cwd_holding_a_placeholder_is_kept_as_written() {
        let filled = super::fill_template(
            "# AGENTS.md instructions for {cwd}\n\n<INSTRUCTIONS>\n{text}\n</INSTRUCTIONS>",
            "be brief",
            None,
            "/work/{text}",
        );
        assert_eq!(
            filled,
            "# AGENTS.md instructions for /work/{text}\n\n<INSTRUCTIONS>\nbe brief\n</INSTRUCTIONS>"
        );
    }

    #[test]
    fn first_leading_system_is_base_the_rest_one_developer_message() {
        let built = walk(vec![
            message("system", "You are terse."),
            message("system", "Context A"),
            message("developer", "Context B"),
            message("user", "hi"),
        ]);
        assert_eq!(built.base_instructions.as_deref(), Some("You are terse."));
        assert_eq!(
            items(&built),
            vec![
                text_message("developer", &["Context A", "Context B"]),
                text_message("user", &["hi"]),
            ]
        );
        assert_eq!(
            rules_fired(&built),
            ["first-leading-system", "leading-context", "leading-context"]
        );
    }

    /// Found by the thread-count property: a developer message before the leading system
    /// message, with its text, was written and broke invariant 10 (base instructions repeated).
    #[test]
    fn a_developer_message_before_the_base_instructions_repeating_them_is_dropped() {
        let built = walk(vec![
            message("developer", "Be terse."),
            message("developer", "Use tabs."),
            message("system", "Be terse."),
            message("user", "hi"),
        ]);
        assert_eq!(built.base_instructions.as_deref(), Some("Be terse."));
        assert_eq!(
            items(&built),
            vec![
                text_message("developer", &["Use tabs."]),
                text_message("user", &["hi"]),
            ]
        );
        let dropped: Vec<(Option<usize>, usize)> = built
            .decisions
            .iter()
            .filter(|d| d.rule.to_string() == "policy.duplicate_base_instructions")
            .map(|d| (d.message, d.bytes_dropped))
            .collect();
        assert_eq!(dropped, [(Some(0), 9)]);
    }

    #[test]
    fn leading_agents_md_becomes_a_wrapped_contextual_fragment() {
        let built = walk(vec![
            message("system", "# AGENTS.md\nUse tabs."),
            message("user", "go"),
        ]);
        let wrapped = "# AGENTS.md instructions for /\n\n<INSTRUCTIONS>\n# AGENTS.md\nUse tabs.\n</INSTRUCTIONS>";
        assert_eq!(
            items(&built),
            vec![
                text_message("user", &[wrapped]),
                text_message("user", &["go"])
            ]
        );
        assert_eq!(built.base_instructions, None);
    }

    #[test]
    fn mid_conversation_system_is_developer_at_its_position() {
        let built = walk(vec![
            message("user", "a"),
            message("system", "be brief"),
            message("user", "b"),
        ]);
        assert_eq!(
            items(&built),
            vec![
                text_message("user", &["a"]),
                text_message("developer", &["be brief"]),
                text_message("user", &["b"]),
            ]
        );
    }
}
