//! Real user messages (turn boundaries) and the content parts of any message.
//!
//! User text that Codex would take for a contextual fragment and hide is decided by
//! `policy.lookalike_user_text`: escaped, quarantined, or made context on purpose.

use super::build::Builder;
use super::parts::{convert_part, Side};
use super::{ConvertError, ItemKind};
use crate::audit::Action;
use crate::model::rollout::{ContentItem, ResponseItem, ROLE_USER};
use crate::model::transcript::{Content, Message, Part};
use crate::rules::{EmptyMessage, Lookalike, Marker, PolicyId, Refusal};

impl Builder<'_> {
    /// A real user message: a turn boundary.
    pub(super) fn user(&mut self, m: &mut Message) -> Result<(), ConvertError> {
        let index = Some(m.index);
        let mut content = self.content_items(m, Side::Input)?;
        if content
            .iter()
            .all(|c| c.text().is_some_and(|t| t.is_empty()))
        {
            let rule = PolicyId::EmptyMessage;
            match self.rules.policy.empty_message {
                EmptyMessage::Drop => {
                    self.decide(index, rule, Action::EmptyMessageDropped, 0, 0);
                    return Ok(());
                }
                EmptyMessage::Keep => {
                    self.decide(index, rule, Action::EmptyMessageKept, 0, 0);
                    if content.is_empty() {
                        content.push(ContentItem::InputText {
                            text: String::new(),
                        });
                    }
                }
            }
        }
        // Real text that Codex would take for a fragment and hide.
        let lookalike = content
            .iter()
            .filter_map(ContentItem::text)
            .find_map(|t| self.rules.marker_wrapping(t))
            .cloned();
        if let Some(marker) = lookalike {
            match self.rules.policy.lookalike_user_text {
                Lookalike::Quarantine => {
                    let reason = format!("user text looks like a `{}` fragment", marker.kind);
                    return Err(self.quarantine(LOOKALIKE, reason, index));
                }
                Lookalike::Contextual => return self.lookalike_as_context(m, content, &marker),
                Lookalike::Escape => self.escape_lookalikes(m.index, &mut content, &marker),
            }
        }
        self.flush_context();
        self.close_pending_calls(index)?;
        let item = ResponseItem::Message {
            role: ROLE_USER,
            content,
            phase: None,
        };
        self.push(ItemKind::RealUser, item, index);
        Ok(())
    }

    /// `policy.lookalike_user_text = "contextual"`: the message becomes context, provided every
    /// text of it is a fragment (mixing real text with a fragment would hide the real text).
    fn lookalike_as_context(
        &mut self,
        m: &Message,
        content: Vec<ContentItem>,
        marker: &Marker,
    ) -> Result<(), ConvertError> {
        let index = Some(m.index);
        let action = Action::LookalikeAsContext {
            kind: marker.kind.clone(),
        };
        self.decide(index, LOOKALIKE, action, 0, 0);
        self.flush_developer();
        let texts: Vec<String> = content
            .into_iter()
            .filter_map(|c| match c {
                ContentItem::InputText { text } => Some(text),
                ContentItem::InputImage { .. }
                | ContentItem::InputAudio { .. }
                | ContentItem::OutputText { .. } => None,
            })
            .collect();
        for text in texts {
            if self.rules.marker_wrapping(&text).is_none() {
                let reason = "user message mixes a fragment and real text";
                return Err(self.quarantine(LOOKALIKE, reason.to_string(), index));
            }
            self.push_contextual(text, m.index, marker.separate);
        }
        Ok(())
    }

    /// `policy.lookalike_user_text = "escape"`: each lookalike text gets the escape prefix.
    fn escape_lookalikes(&mut self, index: usize, content: &mut [ContentItem], marker: &Marker) {
        let prefix = self.rules.policy.lookalike_escape_prefix.clone();
        for item in content.iter_mut() {
            if let ContentItem::InputText { text } = item {
                if self.rules.marker_wrapping(text).is_some() {
                    text.insert_str(0, &prefix);
                    let action = Action::LookalikeEscaped {
                        kind: marker.kind.clone(),
                    };
                    self.decide(Some(index), LOOKALIKE, action, 0, prefix.len());
                }
            }
        }
    }

    /// Content items of a user, assistant or tool message, parts in order.
    pub(super) fn content_items(
        &mut self,
        m: &mut Message,
        side: Side,
    ) -> Result<Vec<ContentItem>, ConvertError> {
        let mut items = Vec::with_capacity(match &m.content {
            Content::Missing | Content::Null => 0,
            Content::Text(_) => 1,
            Content::Parts(parts) => parts.len(),
        });
        match &mut m.content {
            Content::Missing | Content::Null => {}
            Content::Text(t) => items.push(text_item(side, std::mem::take(t))),
            Content::Parts(parts) => {
                for part in parts.iter_mut() {
                    match part {
                        Part::Text(t) => items.push(text_item(side, std::mem::take(t))),
                        Part::Refusal(t) => items.extend(self.refusal(t, m.index, side)?),
                        other @ Part::Image { .. }
                        | other @ Part::Audio { .. }
                        | other @ Part::File { .. }
                        | other @ Part::Unknown { .. } => {
                            let policy = &self.rules.policy;
                            let mut decisions = Vec::new();
                            let item = convert_part(other, side, policy, m.index, &mut decisions)?;
                            self.decisions.extend(decisions);
                            items.extend(item);
                        }
                    }
                }
            }
        }
        Ok(items)
    }

    /// A refusal (a part, or the assistant's `refusal` field), by `policy.refusal`.
    pub(super) fn refusal(
        &mut self,
        text: &str,
        index: usize,
        side: Side,
    ) -> Result<Option<ContentItem>, ConvertError> {
        let rule = PolicyId::Refusal;
        match self.rules.policy.refusal {
            Refusal::Text => {
                self.decide(Some(index), rule, Action::RefusalAsText, 0, 0);
                Ok(Some(text_item(side, text.to_string())))
            }
            Refusal::Drop => {
                self.decide(Some(index), rule, Action::RefusalDropped, text.len(), 0);
                Ok(None)
            }
            Refusal::Quarantine => {
                let reason = "assistant refusal".to_string();
                Err(self.quarantine(rule, reason, Some(index)))
            }
        }
    }
}

const LOOKALIKE: PolicyId = PolicyId::LookalikeUserText;

/// A text content item of the side's kind.
pub(super) fn text_item(side: Side, text: String) -> ContentItem {
    match side {
        Side::Input => ContentItem::InputText { text },
        Side::Output => ContentItem::OutputText { text },
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{items, message, rules_fired, text_message, walk};
    use crate::rules::PolicyId;

    #[test]
    fn user_text_that_looks_like_a_fragment_is_escaped() {
        let text = "<environment_context>mine</environment_context>";
        let built = walk(vec![message("user", text)]);
        let escaped = format!("\u{200B}{text}");
        assert_eq!(items(&built), vec![text_message("user", &[&escaped])]);
        assert_eq!(rules_fired(&built), [PolicyId::LookalikeUserText.rule_id()]);
    }

    #[test]
    fn empty_user_message_is_dropped_by_policy() {
        let built = walk(vec![message("user", ""), message("user", "real")]);
        assert_eq!(items(&built), vec![text_message("user", &["real"])]);
        assert_eq!(rules_fired(&built), [PolicyId::EmptyMessage.rule_id()]);
    }
}
