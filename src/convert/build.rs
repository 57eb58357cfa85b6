//! One pass over the messages: classify, group, convert parts, pair tool calls with outputs.

use std::collections::{HashMap, HashSet};

use super::parts::{convert_part, Side};
use super::{ids, ConvertError, ItemKind, OutItem, OutPayload};
use crate::audit::{Action, Decision};
use crate::model::rollout::{
    ContentItem, Phase, ReasoningText, ResponseItem, ToolOutput, ROLE_ASSISTANT, ROLE_DEVELOPER,
    ROLE_USER,
};
use crate::model::transcript::{Content, Message, Part, ToolCall, Transcript};
use crate::rules::matcher::{classify, Subject};
use crate::rules::{
    DropOrQuarantine, EmptyMessage, Lookalike, MissingOutput, OrphanOutput, Reasoning, Refusal,
    ReusedCallId, RuleSet, Slot, UnknownRole,
};

/// What the walk produced.
#[derive(Debug)]
pub struct Built {
    pub items: Vec<OutItem>,
    pub decisions: Vec<Decision>,
    pub base_instructions: Option<String>,
}

/// A call waiting for its output.
#[derive(Debug)]
struct PendingCall {
    call_id: String,
    original: Option<String>,
    name: String,
    custom: bool,
}

/// A developer section waiting to be grouped: text, first-in-bundle, origin.
type Section = (String, bool, usize);

struct Builder<'r> {
    rules: &'r RuleSet,
    source: &'r str,
    model: Option<&'r str>,
    items: Vec<OutItem>,
    decisions: Vec<Decision>,
    base: Option<String>,
    developer: Vec<Section>,
    contextual: Vec<(String, usize)>,
    pending: Vec<PendingCall>,
    uses: HashMap<String, usize>,
    call_ids: HashSet<String>,
    /// The current message went to base instructions or developer context.
    landed_in_instructions: bool,
}

/// Walks the transcript's messages in order.
pub fn build(
    transcript: &mut Transcript,
    rules: &RuleSet,
    source: &str,
) -> Result<Built, ConvertError> {
    let mut b = Builder {
        rules,
        source,
        model: transcript.meta.model.as_deref(),
        items: Vec::new(),
        decisions: Vec::new(),
        base: None,
        developer: Vec::new(),
        contextual: Vec::new(),
        pending: Vec::new(),
        uses: HashMap::new(),
        call_ids: HashSet::new(),
        landed_in_instructions: false,
    };
    let messages = &mut transcript.messages;
    let leading_end = messages
        .iter()
        .position(|m| !is_instruction_role(&m.role))
        .unwrap_or(messages.len());
    // `first_in_block`: no earlier message of the same role in the same block went to an
    // instruction slot. A context block or an empty system message before the real system
    // prompt must not rob it of being the base instructions.
    let mut seen_in_block: HashSet<(bool, String)> = HashSet::new();
    for message in messages.iter_mut() {
        let leading = message.index < leading_end;
        let key = (leading, message.role.clone());
        let first_in_block = !seen_in_block.contains(&key);
        b.landed_in_instructions = false;
        b.message(message, leading, first_in_block)?;
        if b.landed_in_instructions {
            seen_in_block.insert(key);
        }
    }
    b.flush_context();
    b.close_pending_calls(None)?;
    Ok(Built {
        items: b.items,
        decisions: b.decisions,
        base_instructions: b.base,
    })
}

fn is_instruction_role(role: &str) -> bool {
    role == "system" || role == "developer"
}

/// Text of a message for classification and for slots that take one string.
fn joined_text(content: &Content) -> String {
    content.texts().join("\n")
}

fn text_bytes(content: &Content) -> usize {
    content.texts().iter().map(|t| t.len()).sum()
}

impl<'r> Builder<'r> {
    fn decide(
        &mut self,
        message: Option<usize>,
        rule: &str,
        action: Action,
        dropped: usize,
        added: usize,
    ) {
        self.decisions.push(Decision {
            message,
            rule: rule.to_string(),
            action,
            bytes_dropped: dropped,
            bytes_added: added,
        });
    }

    fn quarantine(&self, rule: &str, reason: String, message: Option<usize>) -> ConvertError {
        ConvertError {
            rule: rule.to_string(),
            reason,
            message,
        }
    }

    fn push(&mut self, kind: ItemKind, item: ResponseItem, origin: Option<usize>) {
        self.items.push(OutItem {
            kind,
            payload: OutPayload::Item(item),
            origin,
        });
    }

    fn message(
        &mut self,
        m: &mut Message,
        leading: bool,
        first_in_block: bool,
    ) -> Result<(), ConvertError> {
        if m.role != "assistant" {
            self.drop_assistant_fields(m);
        }
        if let Some(from) = &m.aliased_from {
            self.decide(
                Some(m.index),
                "input.role_aliases",
                Action::RoleAliased {
                    from: from.clone(),
                    to: m.role.clone(),
                },
                0,
                0,
            );
        }
        let role = m.role.clone();
        match role.as_str() {
            "system" | "developer" | "user" => {
                let text = joined_text(&m.content);
                let subject = Subject {
                    role: &m.role,
                    text: &text,
                    name: m.name.as_deref(),
                    index: m.index,
                    leading,
                    first_in_block,
                    model: self.model,
                    source: self.source,
                };
                let matched = classify(self.rules, &subject).map(|rule| {
                    (
                        rule.slot,
                        rule.id.clone(),
                        rule.kind.clone(),
                        rule.template.clone(),
                        rule.reason.clone(),
                    )
                });
                match matched {
                    Some((slot, id, kind, template, reason)) => {
                        self.slot(m, slot, &id, kind, template, reason)
                    }
                    None if role == "user" => self.user(m),
                    None => self.slot(
                        m,
                        Slot::Developer,
                        "builtin.unmatched-instructions",
                        None,
                        None,
                        None,
                    ),
                }
            }
            "assistant" => self.assistant(m),
            "tool" | "function" => self.tool_output(m),
            other => {
                let rule = "policy.unknown_role";
                let action = Action::UnknownRole {
                    role: other.to_string(),
                };
                match self.rules.policy.unknown_role {
                    UnknownRole::Quarantine => {
                        Err(self.quarantine(rule, format!("unknown role `{other}`"), Some(m.index)))
                    }
                    UnknownRole::Drop => {
                        self.decide(Some(m.index), rule, action, message_text_bytes(m), 0);
                        Ok(())
                    }
                    UnknownRole::User => {
                        self.decide(Some(m.index), rule, action, 0, 0);
                        self.user(m)
                    }
                    UnknownRole::Developer => {
                        self.decide(Some(m.index), rule, action, 0, 0);
                        self.slot(m, Slot::Developer, rule, None, None, None)
                    }
                }
            }
        }
    }

    /// Reasoning, refusal and tool calls on a message that is not the assistant's have no
    /// place in Codex: each is dropped with a decision that counts its bytes, so the accounting
    /// explains it (otherwise the record would be quarantined for an unexplained loss).
    fn drop_assistant_fields(&mut self, m: &mut Message) {
        let index = Some(m.index);
        let rule = "builtin.assistant-fields";
        let mut dropped: Vec<(&str, usize)> = Vec::new();
        if let Some(r) = m.reasoning.take() {
            dropped.push(("reasoning", r.len()));
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
            self.decide(
                index,
                rule,
                Action::FieldDropped {
                    field: field.to_string(),
                },
                bytes,
                0,
            );
        }
    }

    /// Places a classified message in its slot.
    fn slot(
        &mut self,
        m: &mut Message,
        slot: Slot,
        rule: &str,
        kind: Option<String>,
        template: Option<String>,
        reason: Option<String>,
    ) -> Result<(), ConvertError> {
        let index = Some(m.index);
        let input_bytes = text_bytes(&m.content);
        match slot {
            Slot::User => {
                self.decide(index, rule, Action::Classified { slot }, 0, 0);
                return self.user(m);
            }
            Slot::Drop => {
                self.decide(index, rule, Action::Dropped, input_bytes, 0);
                return Ok(());
            }
            Slot::Quarantine => {
                let reason = reason
                    .unwrap_or_else(|| format!("{} message classified as quarantine", m.role));
                return Err(self.quarantine(rule, reason, index));
            }
            Slot::BaseInstructions
            | Slot::Developer
            | Slot::SeparateDeveloper
            | Slot::ModelSwitch
            | Slot::ContextualUser
            | Slot::Compacted => {}
        }
        let mut text = self.instruction_text(m)?;
        if text.trim().is_empty() && self.rules.policy.empty_message == EmptyMessage::Drop {
            self.decide(
                index,
                "policy.empty_message",
                Action::EmptyMessageDropped,
                text.len(),
                0,
            );
            return Ok(());
        }
        self.landed_in_instructions = matches!(
            slot,
            Slot::BaseInstructions | Slot::Developer | Slot::SeparateDeveloper | Slot::ModelSwitch
        );
        let mut slot = slot;
        if slot == Slot::BaseInstructions {
            if self.base.is_some() {
                self.decide(index, rule, Action::BaseInstructionsAlreadySet, 0, 0);
                slot = Slot::Developer;
            } else {
                self.decide(index, rule, Action::Classified { slot }, 0, 0);
                self.base = Some(text);
                return Ok(());
            }
        } else {
            self.decide(index, rule, Action::Classified { slot }, 0, 0);
        }
        if let Some(template) = template {
            let wrapped =
                fill_template(&template, &text, m.name.as_deref(), &self.rules.session.cwd);
            let added = wrapped.len().saturating_sub(text.len());
            self.decide(
                index,
                rule,
                Action::Wrapped {
                    kind: "template".to_string(),
                },
                0,
                added,
            );
            text = wrapped;
        }
        match slot {
            Slot::Developer | Slot::SeparateDeveloper | Slot::ModelSwitch => {
                if self.base.as_deref() == Some(text.as_str()) {
                    let rule = "policy.duplicate_base_instructions";
                    return match self.rules.policy.duplicate_base_instructions {
                        DropOrQuarantine::Drop => {
                            self.decide(
                                index,
                                rule,
                                Action::DuplicateBaseInstructionsDropped,
                                text.len(),
                                0,
                            );
                            Ok(())
                        }
                        DropOrQuarantine::Quarantine => Err(self.quarantine(
                            rule,
                            "base instructions repeated as a developer message".to_string(),
                            index,
                        )),
                    };
                }
                self.flush_contextual();
                match slot {
                    Slot::SeparateDeveloper => {
                        self.flush_developer();
                        self.developer.push((text, false, m.index));
                        self.flush_developer();
                    }
                    Slot::ModelSwitch => {
                        let at = self.developer.iter().take_while(|s| s.1).count();
                        self.developer.insert(at, (text, true, m.index));
                    }
                    _ => self.developer.push((text, false, m.index)),
                }
            }
            Slot::ContextualUser => {
                let marker = match &kind {
                    Some(k) => self.rules.marker(k),
                    None => self.rules.marker_wrapping(&text),
                };
                let Some(marker) = marker.cloned() else {
                    return Err(self.quarantine(
                        rule,
                        "contextual user text matches no registered marker".to_string(),
                        index,
                    ));
                };
                if !marker.wraps(&text) {
                    let wrapped = fill_template(
                        &marker.template,
                        &text,
                        m.name.as_deref(),
                        &self.rules.session.cwd,
                    );
                    let added = wrapped.len().saturating_sub(text.len());
                    self.decide(
                        index,
                        rule,
                        Action::Wrapped {
                            kind: marker.kind.clone(),
                        },
                        0,
                        added,
                    );
                    text = wrapped;
                }
                self.push_contextual(text, m.index, marker.separate);
            }
            Slot::Compacted => {
                self.flush_context();
                self.items.push(OutItem {
                    kind: ItemKind::Compacted,
                    payload: OutPayload::Compacted(text),
                    origin: index,
                });
            }
            Slot::BaseInstructions | Slot::Drop | Slot::Quarantine | Slot::User => {}
        }
        Ok(())
    }

    fn push_contextual(&mut self, text: String, origin: usize, separate: bool) {
        self.flush_developer();
        if separate {
            self.flush_contextual();
        }
        self.contextual.push((text, origin));
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
                        other => {
                            let mut decisions = Vec::new();
                            let item = convert_part(
                                other,
                                Side::Output,
                                &self.rules.policy,
                                m.index,
                                &mut decisions,
                            )?;
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
            self.decide(
                Some(m.index),
                "builtin.join-parts",
                Action::PartsJoined {
                    parts: pieces.len(),
                },
                0,
                pieces.len() - 1,
            );
        }
        Ok(pieces.join("\n"))
    }

    fn flush_context(&mut self) {
        self.flush_developer();
        self.flush_contextual();
    }

    fn flush_developer(&mut self) {
        let sections = std::mem::take(&mut self.developer);
        let origin = sections.first().map(|s| s.2);
        // One developer message, one input_text per section (never concatenated). Items from
        // several input messages share the first one's origin; accounting sums by item.
        let texts = sections.into_iter().map(|(text, _, _)| text).collect();
        self.push_bundle(ItemKind::Developer, ROLE_DEVELOPER, texts, origin);
    }

    fn flush_contextual(&mut self) {
        let fragments = std::mem::take(&mut self.contextual);
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
        self.push(
            kind,
            ResponseItem::Message {
                role,
                content,
                phase: None,
            },
            origin,
        );
    }

    /// A real user message: a turn boundary.
    fn user(&mut self, m: &mut Message) -> Result<(), ConvertError> {
        let index = Some(m.index);
        let mut content = self.content_items(m, Side::Input)?;
        if content
            .iter()
            .all(|c| c.text().is_some_and(|t| t.is_empty()))
        {
            match self.rules.policy.empty_message {
                EmptyMessage::Drop => {
                    self.decide(
                        index,
                        "policy.empty_message",
                        Action::EmptyMessageDropped,
                        0,
                        0,
                    );
                    return Ok(());
                }
                EmptyMessage::Keep => {
                    self.decide(
                        index,
                        "policy.empty_message",
                        Action::EmptyMessageKept,
                        0,
                        0,
                    );
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
            let rule = "policy.lookalike_user_text";
            match self.rules.policy.lookalike_user_text {
                Lookalike::Quarantine => {
                    return Err(self.quarantine(
                        rule,
                        format!("user text looks like a `{}` fragment", marker.kind),
                        index,
                    ))
                }
                Lookalike::Contextual => {
                    self.decide(
                        index,
                        rule,
                        Action::LookalikeAsContext {
                            kind: marker.kind.clone(),
                        },
                        0,
                        0,
                    );
                    self.flush_developer();
                    let texts: Vec<String> = content
                        .into_iter()
                        .filter_map(|c| match c {
                            ContentItem::InputText { text } => Some(text),
                            _ => None,
                        })
                        .collect();
                    if let Some(first) = texts.first() {
                        if self.rules.marker_wrapping(first).is_none() {
                            return Err(self.quarantine(
                                rule,
                                "user message mixes a fragment and real text".to_string(),
                                index,
                            ));
                        }
                    }
                    for text in texts {
                        if self.rules.marker_wrapping(&text).is_none() {
                            return Err(self.quarantine(
                                rule,
                                "user message mixes a fragment and real text".to_string(),
                                index,
                            ));
                        }
                        self.push_contextual(text, m.index, marker.separate);
                    }
                    return Ok(());
                }
                Lookalike::Escape => {
                    let prefix = self.rules.policy.lookalike_escape_prefix.clone();
                    for item in content.iter_mut() {
                        if let ContentItem::InputText { text } = item {
                            if self.rules.marker_wrapping(text).is_some() {
                                text.insert_str(0, &prefix);
                                self.decide(
                                    index,
                                    rule,
                                    Action::LookalikeEscaped {
                                        kind: marker.kind.clone(),
                                    },
                                    0,
                                    prefix.len(),
                                );
                            }
                        }
                    }
                }
            }
        }
        self.flush_context();
        self.close_pending_calls(index)?;
        self.push(
            ItemKind::RealUser,
            ResponseItem::Message {
                role: ROLE_USER,
                content,
                phase: None,
            },
            index,
        );
        Ok(())
    }

    /// Content items of a user or assistant message, parts in order.
    fn content_items(
        &mut self,
        m: &mut Message,
        side: Side,
    ) -> Result<Vec<ContentItem>, ConvertError> {
        let text_item = |text: String| match side {
            Side::Input => ContentItem::InputText { text },
            Side::Output => ContentItem::OutputText { text },
        };
        let mut items = Vec::new();
        match &mut m.content {
            Content::Missing | Content::Null => {}
            Content::Text(t) => items.push(text_item(std::mem::take(t))),
            Content::Parts(parts) => {
                for part in parts.iter_mut() {
                    match part {
                        Part::Text(t) => items.push(text_item(std::mem::take(t))),
                        Part::Refusal(t) => {
                            if let Some(item) = self.refusal(t, m.index, side)? {
                                items.push(item);
                            }
                        }
                        other => {
                            let mut decisions = Vec::new();
                            let item = convert_part(
                                other,
                                side,
                                &self.rules.policy,
                                m.index,
                                &mut decisions,
                            )?;
                            self.decisions.extend(decisions);
                            items.extend(item);
                        }
                    }
                }
            }
        }
        Ok(items)
    }

    fn refusal(
        &mut self,
        text: &str,
        index: usize,
        side: Side,
    ) -> Result<Option<ContentItem>, ConvertError> {
        let rule = "policy.refusal";
        match self.rules.policy.refusal {
            Refusal::Text => {
                self.decide(Some(index), rule, Action::RefusalAsText, 0, 0);
                Ok(Some(match side {
                    Side::Input => ContentItem::InputText {
                        text: text.to_string(),
                    },
                    Side::Output => ContentItem::OutputText {
                        text: text.to_string(),
                    },
                }))
            }
            Refusal::Drop => {
                self.decide(Some(index), rule, Action::RefusalDropped, text.len(), 0);
                Ok(None)
            }
            Refusal::Quarantine => {
                Err(self.quarantine(rule, "assistant refusal".to_string(), Some(index)))
            }
        }
    }

    fn assistant(&mut self, m: &mut Message) -> Result<(), ConvertError> {
        let index = Some(m.index);
        self.flush_context();
        let mut content = self.content_items(m, Side::Output)?;
        if let Some(refusal) = &m.refusal {
            if let Some(item) = self.refusal(refusal, m.index, Side::Output)? {
                content.push(item);
            }
        }
        let mut phase = None;
        if let Some(given) = &m.phase {
            match Phase::parse(given) {
                Some(p) => phase = Some(p),
                None => {
                    let rule = "policy.invalid_phase";
                    match self.rules.policy.invalid_phase {
                        DropOrQuarantine::Drop => self.decide(
                            index,
                            rule,
                            Action::InvalidPhaseDropped {
                                phase: given.clone(),
                            },
                            0,
                            0,
                        ),
                        DropOrQuarantine::Quarantine => {
                            return Err(self.quarantine(
                                rule,
                                format!("unknown phase `{given}`"),
                                index,
                            ))
                        }
                    }
                }
            }
        }
        let calls: Vec<ToolCall> = m
            .function_call
            .take()
            .into_iter()
            .chain(std::mem::take(&mut m.tool_calls))
            .collect();
        let has_message =
            !content.is_empty() && !content.iter().all(|c| c.text().is_some_and(str::is_empty));
        let had_reasoning = m.reasoning.is_some();
        if let Some(reasoning) = m.reasoning.take() {
            let rule = "policy.reasoning";
            if !has_message && calls.is_empty() {
                match self.rules.policy.unpaired_reasoning {
                    DropOrQuarantine::Drop => self.decide(
                        index,
                        "policy.unpaired_reasoning",
                        Action::UnpairedReasoningDropped,
                        reasoning.len(),
                        0,
                    ),
                    DropOrQuarantine::Quarantine => {
                        return Err(self.quarantine(
                            "policy.unpaired_reasoning",
                            "reasoning with no message or call after it".to_string(),
                            index,
                        ))
                    }
                }
            } else {
                match self.rules.policy.reasoning {
                    Reasoning::Item => {
                        self.decide(index, rule, Action::ReasoningItem, 0, 0);
                        self.push(
                            ItemKind::Reasoning,
                            ResponseItem::Reasoning {
                                summary: Vec::new(),
                                content: Some(vec![ReasoningText { text: reasoning }]),
                                encrypted_content: None,
                            },
                            index,
                        );
                    }
                    Reasoning::Drop => {
                        self.decide(index, rule, Action::ReasoningDropped, reasoning.len(), 0)
                    }
                }
            }
        }
        if has_message {
            self.push(
                ItemKind::Assistant,
                ResponseItem::Message {
                    role: ROLE_ASSISTANT,
                    content,
                    phase,
                },
                index,
            );
        } else if calls.is_empty() && !had_reasoning {
            let dropped: usize = content
                .iter()
                .filter_map(ContentItem::text)
                .map(str::len)
                .sum();
            match self.rules.policy.empty_message {
                EmptyMessage::Drop => self.decide(
                    index,
                    "policy.empty_message",
                    Action::EmptyMessageDropped,
                    dropped,
                    0,
                ),
                EmptyMessage::Keep => {
                    self.decide(
                        index,
                        "policy.empty_message",
                        Action::EmptyMessageKept,
                        0,
                        0,
                    );
                    let content = vec![ContentItem::OutputText {
                        text: String::new(),
                    }];
                    self.push(
                        ItemKind::Assistant,
                        ResponseItem::Message {
                            role: ROLE_ASSISTANT,
                            content,
                            phase,
                        },
                        index,
                    );
                }
            }
        }
        for (position, call) in calls.into_iter().enumerate() {
            self.call(m, call, position)?;
        }
        Ok(())
    }

    fn call(
        &mut self,
        m: &mut Message,
        mut call: ToolCall,
        position: usize,
    ) -> Result<(), ConvertError> {
        let index = Some(m.index);
        let call_id = match &call.id {
            Some(original) if !original.is_empty() => {
                let uses = self.uses.entry(original.clone()).or_insert(0);
                *uses += 1;
                let n = *uses;
                if n == 1 && !self.call_ids.contains(original) {
                    original.clone()
                } else {
                    let rule = "policy.reused_call_id";
                    if self.rules.policy.reused_call_id == ReusedCallId::Quarantine {
                        return Err(self.quarantine(
                            rule,
                            format!("call id `{original}` used again"),
                            index,
                        ));
                    }
                    let mut k = n.max(2);
                    let mut renamed = ids::renamed_call_id(original, k);
                    while self.call_ids.contains(&renamed) {
                        k += 1;
                        renamed = ids::renamed_call_id(original, k);
                    }
                    self.decide(
                        index,
                        rule,
                        Action::CallIdRenamed {
                            from: original.clone(),
                            to: renamed.clone(),
                        },
                        0,
                        0,
                    );
                    renamed
                }
            }
            _ => {
                let mut id = ids::synthesized_call_id(m.index, position);
                while self.call_ids.contains(&id) {
                    id.push('_');
                }
                self.decide(
                    index,
                    "builtin.call-id",
                    Action::CallIdSynthesized {
                        call_id: id.clone(),
                    },
                    0,
                    0,
                );
                id
            }
        };
        self.call_ids.insert(call_id.clone());
        let mut arguments = std::mem::take(&mut call.arguments);
        if call.arguments_from_object {
            self.decide(
                index,
                "builtin.arguments-string",
                Action::ArgumentsSerialized,
                0,
                0,
            );
        }
        if call.arguments_missing && !call.custom {
            arguments = "{}".to_string();
            self.decide(
                index,
                "builtin.arguments-string",
                Action::ArgumentsDefaulted,
                0,
                2,
            );
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
        self.pending.push(PendingCall {
            call_id,
            original: call.id.clone().filter(|id| !id.is_empty()),
            name: call.name.clone(),
            custom: call.custom,
        });
        Ok(())
    }

    /// Every call still waiting gets its output by `policy.missing_output`.
    fn close_pending_calls(&mut self, before: Option<usize>) -> Result<(), ConvertError> {
        let pending = std::mem::take(&mut self.pending);
        for call in pending {
            let rule = "policy.missing_output";
            if self.rules.policy.missing_output == MissingOutput::Quarantine {
                return Err(self.quarantine(
                    rule,
                    format!("call `{}` has no output", call.call_id),
                    before,
                ));
            }
            let text = self.rules.policy.missing_output_text.clone();
            self.decide(
                None,
                rule,
                Action::OutputSynthesized {
                    call_id: call.call_id.clone(),
                },
                0,
                text.len(),
            );
            let output = ToolOutput::Text(text);
            let item = if call.custom {
                ResponseItem::CustomToolCallOutput {
                    call_id: call.call_id,
                    output,
                }
            } else {
                ResponseItem::FunctionCallOutput {
                    call_id: call.call_id,
                    output,
                }
            };
            self.push(ItemKind::Output, item, None);
        }
        Ok(())
    }

    /// A `tool` or `function` message: the output of one (or several) pending calls.
    fn tool_output(&mut self, m: &mut Message) -> Result<(), ConvertError> {
        let index = Some(m.index);
        self.flush_context();
        let output = self.output_of(m)?;
        let output_bytes = tool_output_bytes(&output);
        let mut targets: Vec<Option<usize>> = Vec::new();
        if m.tool_call_ids.is_empty() {
            let by_name = if m.role == "function" {
                m.name
                    .as_ref()
                    .and_then(|n| self.pending.iter().position(|c| &c.name == n))
            } else {
                None
            };
            targets.push(by_name.or(if self.pending.is_empty() {
                None
            } else {
                Some(0)
            }));
        } else {
            let mut taken: HashSet<usize> = HashSet::new();
            for id in &m.tool_call_ids {
                let found = self.pending.iter().enumerate().position(|(i, c)| {
                    c.original.as_deref() == Some(id.as_str()) && !taken.contains(&i)
                });
                if let Some(i) = found {
                    taken.insert(i);
                }
                targets.push(found);
            }
        }
        // Remove matched calls from pending (highest index first), keeping their order of ids.
        let mut matched: Vec<Option<PendingCall>> = Vec::with_capacity(targets.len());
        let mut order: Vec<(usize, usize)> = targets
            .iter()
            .enumerate()
            .filter_map(|(k, t)| t.map(|i| (i, k)))
            .collect();
        order.sort_unstable_by_key(|b| std::cmp::Reverse(b.0));
        let mut removed: HashMap<usize, PendingCall> = HashMap::new();
        for (i, k) in order {
            removed.insert(k, self.pending.remove(i));
        }
        for k in 0..targets.len() {
            matched.push(removed.remove(&k));
        }
        let mut first = true;
        let last_matched = matched.iter().rposition(Option::is_some);
        let mut output = Some(output);
        for (k, target) in matched.into_iter().enumerate() {
            // The last call to get this output takes it; earlier ones (shared) get a copy.
            let this_output = if Some(k) == last_matched {
                output
                    .take()
                    .unwrap_or_else(|| ToolOutput::Text(String::new()))
            } else {
                output
                    .clone()
                    .unwrap_or_else(|| ToolOutput::Text(String::new()))
            };
            match target {
                Some(call) => {
                    let added = if first { 0 } else { output_bytes };
                    if !first {
                        self.decide(
                            index,
                            "builtin.shared-output",
                            Action::OutputShared {
                                call_id: call.call_id.clone(),
                            },
                            0,
                            added,
                        );
                    }
                    first = false;
                    let item = if call.custom {
                        ResponseItem::CustomToolCallOutput {
                            call_id: call.call_id,
                            output: this_output,
                        }
                    } else {
                        ResponseItem::FunctionCallOutput {
                            call_id: call.call_id,
                            output: this_output,
                        }
                    };
                    self.push(ItemKind::Output, item, index);
                }
                None => {
                    let call_id = m.tool_call_ids.get(k).cloned();
                    let dropped = if first { output_bytes } else { 0 };
                    self.orphan(m, call_id, &this_output, dropped, first)?;
                    first = false;
                }
            }
        }
        Ok(())
    }

    fn orphan(
        &mut self,
        m: &mut Message,
        call_id: Option<String>,
        output: &ToolOutput,
        dropped: usize,
        carries_text: bool,
    ) -> Result<(), ConvertError> {
        let index = Some(m.index);
        let rule = "policy.orphan_output";
        match self.rules.policy.orphan_output {
            OrphanOutput::Quarantine => Err(self.quarantine(
                rule,
                format!(
                    "tool output for `{}` has no matching call",
                    call_id.as_deref().unwrap_or("(no id)")
                ),
                index,
            )),
            OrphanOutput::Drop => {
                self.decide(
                    index,
                    rule,
                    Action::OrphanOutputDropped { call_id },
                    dropped,
                    0,
                );
                Ok(())
            }
            OrphanOutput::Text => {
                if !carries_text {
                    self.decide(index, rule, Action::OrphanOutputDropped { call_id }, 0, 0);
                    return Ok(());
                }
                let body = match output {
                    ToolOutput::Text(t) => t.clone(),
                    ToolOutput::Items(items) => items
                        .iter()
                        .filter_map(ContentItem::text)
                        .collect::<Vec<_>>()
                        .join("\n"),
                };
                let text = self
                    .rules
                    .policy
                    .orphan_output_template
                    .replace("{call_id}", call_id.as_deref().unwrap_or("(no id)"))
                    .replace("{text}", &body);
                let added = text.len().saturating_sub(tool_output_bytes(output));
                self.decide(
                    index,
                    rule,
                    Action::OrphanOutputAsText { call_id },
                    0,
                    added,
                );
                self.flush_context();
                self.push(
                    ItemKind::RealUser,
                    ResponseItem::Message {
                        role: ROLE_USER,
                        content: vec![ContentItem::InputText { text }],
                        phase: None,
                    },
                    index,
                );
                Ok(())
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

/// All text of an input message, as the accounting counts it.
pub fn message_text_bytes(m: &mut Message) -> usize {
    crate::audit::accounting::input_message_bytes(m)
}

/// Fills `{text}`, `{name}` and `{cwd}` in a wrap template.
fn fill_template(template: &str, text: &str, name: Option<&str>, cwd: &str) -> String {
    // `{text}` last, so that braces inside the text are never read as placeholders.
    let head = template
        .replace("{name}", name.unwrap_or(""))
        .replace("{cwd}", cwd);
    head.replacen("{text}", text, 1)
}
