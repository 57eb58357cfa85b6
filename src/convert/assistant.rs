//! Assistant messages: reasoning, the message with its phase, then its calls, in that order.
//!
//! Reasoning goes right before what it explains (`policy.reasoning`); reasoning with nothing
//! after it is `policy.unpaired_reasoning`. A phase given by the input is kept when Codex knows
//! it (`policy.invalid_phase` otherwise); [`super::phase`] infers the rest afterwards.

use super::build::Builder;
use super::parts::Side;
use super::{ConvertError, ItemKind};
use crate::audit::Action;
use crate::model::rollout::{
    ContentItem, Phase, ReasoningText, ResponseItem, SummaryText, ROLE_ASSISTANT,
};
use crate::model::transcript::{Message, ReasoningOrigin, Thinking, ToolCall};
use crate::rules::{
    Builtin, DropOrQuarantine, EmptyMessage, KeepOrDrop, PolicyId, Reasoning, ThinkingPolicy,
};

/// The origin's name as the audit writes it.
fn origin_name(origin: ReasoningOrigin) -> &'static str {
    match origin {
        ReasoningOrigin::OpenAi => "openai",
        ReasoningOrigin::Anthropic => "anthropic",
        ReasoningOrigin::ChatGpt => "chatgpt",
        ReasoningOrigin::Gemini => "gemini",
        ReasoningOrigin::OpenTelemetry => "opentelemetry",
    }
}

impl Builder<'_> {
    pub(super) fn assistant(&mut self, m: &mut Message) -> Result<(), ConvertError> {
        let index = Some(m.index);
        self.flush_context();
        let mut content = self.content_items(m, Side::Output)?;
        if let Some(refusal) = &m.refusal {
            content.extend(self.refusal(refusal, m.index, Side::Output)?);
        }
        let phase = self.given_phase(m)?;
        // The message's own list, taken (a new list was an allocation a message with calls);
        // a legacy `function_call` goes first.
        let mut calls: Vec<ToolCall> = std::mem::take(&mut m.tool_calls);
        if let Some(call) = m.function_call.take() {
            calls.insert(0, call);
        }
        let has_message =
            !content.is_empty() && !content.iter().all(|c| c.text().is_some_and(str::is_empty));
        let thinking = std::mem::take(&mut m.thinking);
        let had_reasoning = m.reasoning.is_some() || !thinking.is_empty();
        let explains = has_message || !calls.is_empty();
        for thought in thinking {
            self.thinking(m.index, thought, explains)?;
        }
        if let Some(reasoning) = m.reasoning.take() {
            self.reasoning(m.index, reasoning, explains)?;
        }
        if has_message {
            let item = ResponseItem::Message {
                role: ROLE_ASSISTANT,
                content,
                phase,
            };
            self.push(ItemKind::Assistant, item, index);
        } else if calls.is_empty() && !had_reasoning {
            self.empty_assistant(m.index, &content, phase);
        }
        for (position, call) in calls.into_iter().enumerate() {
            self.call(m, call, position)?;
        }
        Ok(())
    }

    /// The phase the input gave, if Codex knows it.
    fn given_phase(&mut self, m: &Message) -> Result<Option<Phase>, ConvertError> {
        let Some(given) = &m.phase else {
            return Ok(None);
        };
        if let Some(phase) = Phase::parse(given) {
            return Ok(Some(phase));
        }
        let rule = PolicyId::InvalidPhase;
        match self.rules.policy.invalid_phase {
            DropOrQuarantine::Drop => {
                let action = Action::InvalidPhaseDropped {
                    phase: given.clone(),
                };
                self.decide(Some(m.index), rule, action, 0, 0);
                Ok(None)
            }
            DropOrQuarantine::Quarantine => {
                let reason = format!("unknown phase `{given}`");
                Err(self.quarantine(rule, reason, Some(m.index)))
            }
        }
    }

    /// Plain-text reasoning: an item before what it explains, when something follows.
    fn reasoning(
        &mut self,
        index: usize,
        reasoning: String,
        explains_something: bool,
    ) -> Result<(), ConvertError> {
        if !explains_something {
            let rule = PolicyId::UnpairedReasoning;
            return match self.rules.policy.unpaired_reasoning {
                DropOrQuarantine::Drop => {
                    let action = Action::UnpairedReasoningDropped;
                    self.decide(Some(index), rule, action, reasoning.len(), 0);
                    Ok(())
                }
                DropOrQuarantine::Quarantine => {
                    let reason = "reasoning with no message or call after it".to_string();
                    Err(self.quarantine(rule, reason, Some(index)))
                }
            };
        }
        let rule = PolicyId::Reasoning;
        match self.rules.policy.reasoning {
            Reasoning::Item => {
                self.decide(Some(index), rule, Action::ReasoningItem, 0, 0);
                let item = ResponseItem::Reasoning {
                    summary: Vec::new(),
                    content: Some(vec![ReasoningText { text: reasoning }]),
                    encrypted_content: None,
                };
                self.push(ItemKind::Reasoning, item, Some(index));
            }
            Reasoning::Drop => {
                let action = Action::ReasoningDropped;
                self.decide(Some(index), rule, action, reasoning.len(), 0);
            }
        }
        Ok(())
    }

    /// Reasoning with its provenance: its texts by `policy.thinking`; an OpenAI blob by
    /// `policy.encrypted_reasoning`, any other vendor's never (Codex would send it to OpenAI).
    fn thinking(
        &mut self,
        index: usize,
        thought: Thinking,
        explains_something: bool,
    ) -> Result<(), ConvertError> {
        let Thinking {
            summary,
            content,
            encrypted,
            origin,
        } = thought;
        let bytes: usize = summary.iter().chain(content.iter()).map(String::len).sum();
        let at = Some(index);
        if !explains_something {
            let rule = PolicyId::UnpairedReasoning;
            return match self.rules.policy.unpaired_reasoning {
                DropOrQuarantine::Drop => {
                    self.decide(at, rule, Action::UnpairedReasoningDropped, bytes, 0);
                    Ok(())
                }
                DropOrQuarantine::Quarantine => {
                    let reason = "reasoning with no message or call after it".to_string();
                    Err(self.quarantine(rule, reason, at))
                }
            };
        }
        let origin_name = origin_name(origin).to_string();
        let encrypted_content = match encrypted {
            None => None,
            Some(_) if origin != ReasoningOrigin::OpenAi => {
                let action = Action::EncryptedReasoningDropped {
                    origin: origin_name.clone(),
                };
                self.decide(at, Builtin::ForeignReasoningBlob, action, 0, 0);
                None
            }
            Some(blob) => match self.rules.policy.encrypted_reasoning {
                KeepOrDrop::Keep => {
                    let action = Action::EncryptedReasoningKept;
                    self.decide(at, PolicyId::EncryptedReasoning, action, 0, 0);
                    Some(blob)
                }
                KeepOrDrop::Drop => {
                    let action = Action::EncryptedReasoningDropped {
                        origin: origin_name.clone(),
                    };
                    self.decide(at, PolicyId::EncryptedReasoning, action, 0, 0);
                    None
                }
            },
        };
        let rule = PolicyId::Thinking;
        // Empty texts carry nothing (a thinking block that only had a signature).
        let summary: Vec<String> = summary.into_iter().filter(|t| !t.is_empty()).collect();
        let content: Vec<String> = content.into_iter().filter(|t| !t.is_empty()).collect();
        let (summary, content) = match self.rules.policy.thinking {
            ThinkingPolicy::Keep => (summary, content),
            ThinkingPolicy::Summary => (summary.into_iter().chain(content).collect(), Vec::new()),
            ThinkingPolicy::Content => (Vec::new(), summary.into_iter().chain(content).collect()),
            ThinkingPolicy::Drop => {
                if bytes > 0 {
                    self.decide(at, rule, Action::ReasoningDropped, bytes, 0);
                }
                (Vec::new(), Vec::new())
            }
        };
        if summary.is_empty() && content.is_empty() && encrypted_content.is_none() {
            return Ok(());
        }
        let action = Action::ThinkingItem {
            origin: origin_name,
        };
        self.decide(at, rule, action, 0, 0);
        let item = ResponseItem::Reasoning {
            summary: summary
                .into_iter()
                .map(|text| SummaryText { text })
                .collect(),
            content: (!content.is_empty()).then(|| {
                content
                    .into_iter()
                    .map(|text| ReasoningText { text })
                    .collect()
            }),
            encrypted_content,
        };
        self.push(ItemKind::Reasoning, item, at);
        Ok(())
    }

    /// An assistant message with no text, reasoning or call: `policy.empty_message`.
    fn empty_assistant(&mut self, index: usize, content: &[ContentItem], phase: Option<Phase>) {
        let rule = PolicyId::EmptyMessage;
        match self.rules.policy.empty_message {
            EmptyMessage::Drop => {
                let dropped = content.iter().filter_map(ContentItem::text).map(str::len);
                let dropped = dropped.sum();
                self.decide(Some(index), rule, Action::EmptyMessageDropped, dropped, 0);
            }
            EmptyMessage::Keep => {
                self.decide(Some(index), rule, Action::EmptyMessageKept, 0, 0);
                let content = vec![ContentItem::OutputText {
                    text: String::new(),
                }];
                let item = ResponseItem::Message {
                    role: ROLE_ASSISTANT,
                    content,
                    phase,
                };
                self.push(ItemKind::Assistant, item, Some(index));
            }
        }
    }

    /// Reasoning, refusal and tool calls on a message that is not the assistant's have no
    /// place in Codex: each is dropped with a decision that counts its bytes, so the accounting
    /// explains it (otherwise the record would be quarantined for an unexplained loss).
    pub(super) fn drop_assistant_fields(&mut self, m: &mut Message) {
        let mut dropped: Vec<(&str, usize)> = Vec::new();
        if let Some(r) = m.reasoning.take() {
            dropped.push(("reasoning", r.len()));
        }
        if !m.thinking.is_empty() {
            let texts = m
                .thinking
                .drain(..)
                .flat_map(|t| t.summary.into_iter().chain(t.content));
            dropped.push(("thinking", texts.map(|t| t.len()).sum()));
        }
        if let Some(r) = m.refusal.take() {
            dropped.push(("refusal", r.len()));
        }
        if let Some(call) = m.function_call.take() {
            dropped.push(("function_call", call.arguments.len()));
        }
        if !m.tool_calls.is_empty() {
            let bytes = m.tool_calls.drain(..).map(|c| c.arguments.len()).sum();
            dropped.push(("tool_calls", bytes));
        }
        for (field, bytes) in dropped {
            let action = Action::FieldDropped {
                field: field.to_string(),
                found: None,
            };
            self.decide(Some(m.index), Builtin::AssistantFields, action, bytes, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{
        call, function_call, items, message, output, rules_fired, text_message, walk,
    };
    use crate::model::rollout::{ReasoningText, ResponseItem};
    use crate::rules::PolicyId;

    #[test]
    fn reasoning_goes_before_the_message_and_calls_get_outputs() {
        let mut assistant = message("assistant", "Looking.");
        assistant.reasoning = Some("think".to_string());
        assistant.tool_calls = vec![call(Some("c1"), "ls", "{}"), call(Some("c2"), "pwd", "{}")];
        let built = walk(vec![message("user", "files?"), assistant]);
        let reasoning = ResponseItem::Reasoning {
            summary: Vec::new(),
            content: Some(vec![ReasoningText {
                text: "think".to_string(),
            }]),
            encrypted_content: None,
        };
        assert_eq!(
            items(&built),
            vec![
                text_message("user", &["files?"]),
                reasoning,
                text_message("assistant", &["Looking."]),
                function_call("c1", "ls", "{}"),
                function_call("c2", "pwd", "{}"),
                output("c1", "aborted"),
                output("c2", "aborted"),
            ]
        );
        assert_eq!(
            rules_fired(&built),
            [
                PolicyId::Reasoning.rule_id(),
                PolicyId::MissingOutput.rule_id(),
                PolicyId::MissingOutput.rule_id()
            ]
        );
    }

    #[test]
    fn unknown_phase_is_dropped_and_reasoning_alone_is_unpaired() {
        let mut assistant = message("assistant", "ok");
        assistant.phase = Some("thinking_aloud".to_string());
        let mut lone = message("assistant", "");
        lone.reasoning = Some("hmm".to_string());
        let built = walk(vec![message("user", "q"), assistant, lone]);
        assert_eq!(
            items(&built),
            vec![
                text_message("user", &["q"]),
                text_message("assistant", &["ok"])
            ]
        );
        assert_eq!(
            rules_fired(&built),
            [
                PolicyId::InvalidPhase.rule_id(),
                PolicyId::UnpairedReasoning.rule_id()
            ]
        );
    }

    #[test]
    fn thinking_keeps_its_texts_and_never_another_vendors_blob() {
        use crate::model::rollout::SummaryText;
        use crate::model::transcript::{ReasoningOrigin, Thinking};
        let mut assistant = message("assistant", "Done.");
        assistant.thinking = vec![
            Thinking {
                content: vec!["Let me think.".to_string()],
                encrypted: Some("EqSig".to_string()),
                origin: ReasoningOrigin::Anthropic,
                ..Thinking::default()
            },
            Thinking {
                summary: vec!["Searching".to_string()],
                origin: ReasoningOrigin::ChatGpt,
                ..Thinking::default()
            },
        ];
        let built = walk(vec![message("user", "q"), assistant]);
        assert_eq!(
            items(&built),
            vec![
                text_message("user", &["q"]),
                ResponseItem::Reasoning {
                    summary: Vec::new(),
                    content: Some(vec![ReasoningText {
                        text: "Let me think.".to_string()
                    }]),
                    encrypted_content: None,
                },
                ResponseItem::Reasoning {
                    summary: vec![SummaryText {
                        text: "Searching".to_string()
                    }],
                    content: None,
                    encrypted_content: None,
                },
                text_message("assistant", &["Done."]),
            ]
        );
        assert_eq!(
            rules_fired(&built),
            [
                crate::rules::Builtin::ForeignReasoningBlob.rule_id(),
                PolicyId::Thinking.rule_id(),
                PolicyId::Thinking.rule_id(),
            ]
        );
    }
}
