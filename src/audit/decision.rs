//! One decision of the converter, with the rule behind it.

use serde::Serialize;

use crate::model::json::{decimal_into, escape_into};
use crate::rules::{RuleRef, Slot};

/// What was decided for (part of) one input message. `rule` is the rule behind it, written as
/// its id: `policy.<key>` for repair policies, `builtin.<name>` for what no rule can change, or
/// a rule file's `[[rule]]` id.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Decision {
    /// Index of the input message, when the decision concerns one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<usize>,
    pub rule: RuleRef,
    #[serde(flatten)]
    pub action: Action,
    /// Text bytes of the input that this decision removed.
    #[serde(skip_serializing_if = "is_zero")]
    pub bytes_dropped: usize,
    /// Text bytes this decision added (placeholders, markers, synthesised outputs).
    #[serde(skip_serializing_if = "is_zero")]
    pub bytes_added: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Decision {
    /// Appends the decision as `serde_json::to_writer` writes it (a test holds the two equal
    /// for every action). serde's `flatten` goes through a map, and nearly every record has
    /// one decision, a system message classified (`samples/BENCHMARKS.md` has the cost).
    /// That action is written by hand; any other still goes
    /// through serde, written alone and spliced in (an internally tagged enum alone is
    /// `{"action":…,fields…}`, the entries `flatten` writes into the decision).
    pub fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.push(b'{');
        if let Some(message) = self.message {
            out.extend_from_slice(b"\"message\":");
            decimal_into(out, message as u64);
            out.push(b',');
        }
        out.extend_from_slice(b"\"rule\":");
        escape_into(out, self.rule.as_str());
        if let Action::Classified { slot } = self.action {
            // Most decisions (a system message's slot), written whole by hand.
            out.extend_from_slice(b",\"action\":\"classified\",\"slot\":\"");
            out.extend_from_slice(slot.name().as_bytes());
            out.push(b'"');
        } else {
            let action = out.len();
            serde_json::to_writer(&mut *out, &self.action)?;
            // `{"action":…}` becomes `,"action":…`.
            if out.get(action) == Some(&b'{') && out.last() == Some(&b'}') {
                out[action] = b',';
                out.pop();
            }
        }
        for (key, n) in [
            ("bytes_dropped", self.bytes_dropped),
            ("bytes_added", self.bytes_added),
        ] {
            if n != 0 {
                out.extend_from_slice(b",\"");
                out.extend_from_slice(key.as_bytes());
                out.extend_from_slice(b"\":");
                decimal_into(out, n as u64);
            }
        }
        out.push(b'}');
        Ok(())
    }
}

/// The kinds of decision, as counted in the summary.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// A system/developer/user message classified into a slot.
    Classified {
        slot: Slot,
    },
    /// A role renamed by an alias (e.g. `human` -> `user`).
    RoleAliased {
        from: String,
        to: String,
    },
    /// A role no rule knows, handled by `policy.unknown_role`.
    UnknownRole {
        role: String,
    },
    /// A call with no output got one.
    OutputSynthesized {
        call_id: String,
    },
    /// An output whose call is not in the conversation was dropped.
    OrphanOutputDropped {
        call_id: Option<String>,
    },
    /// An orphan output kept as a user text message.
    OrphanOutputAsText {
        call_id: Option<String>,
    },
    /// A call id used earlier was renamed in the call and its output.
    CallIdRenamed {
        from: String,
        to: String,
    },
    /// A call without an id (legacy `function_call`, or a tool call without `id`) got one.
    CallIdSynthesized {
        call_id: String,
    },
    /// One tool message answered several calls: each got a copy of its content.
    OutputShared {
        call_id: String,
    },
    /// Arguments given as a JSON object were serialised to a string.
    ArgumentsSerialized,
    /// Missing arguments written as `{}`.
    ArgumentsDefaulted,
    RefusalAsText,
    RefusalDropped,
    ReasoningItem,
    ReasoningDropped,
    /// A reasoning with nothing after it to explain.
    UnpairedReasoningDropped,
    /// A content part replaced by a placeholder text.
    PartPlaceholder {
        part: String,
    },
    PartDropped {
        part: String,
    },
    /// An image's `detail:"low"` removed (Codex would replace a low-detail image by a note).
    ImageDetailOmitted,
    /// A remote image or low-detail image kept as is (Codex will replace it on resume).
    PartKeptUnsupported {
        part: String,
    },
    /// Several text parts joined into one string (base instructions, contextual text).
    PartsJoined {
        parts: usize,
    },
    /// Text wrapped in a marker or template.
    Wrapped {
        kind: String,
    },
    /// Real user text that starts and ends like a registered fragment.
    LookalikeEscaped {
        kind: String,
    },
    LookalikeAsContext {
        kind: String,
    },
    EmptyMessageDropped,
    EmptyMessageKept,
    /// A tool definition with no Responses function equivalent, dropped (`--format responses`).
    ToolDropped {
        name: Option<String>,
    },
    InvalidPhaseDropped {
        phase: String,
    },
    DuplicateBaseInstructionsDropped,
    /// A second base-instructions message went to the developer context instead.
    BaseInstructionsAlreadySet,
    UnicodeRepaired {
        count: usize,
    },
    /// The messages were found by their shape at `path`, not at a configured path.
    MessagesFoundByShape {
        path: String,
    },
    /// The source format's reader dropped or transformed something by rule before the
    /// messages existed (`count` Claude Code progress lines, a thinking block's signature).
    SourceNote {
        what: String,
        count: u64,
    },
    /// Message dropped by a classification rule.
    Dropped,
    /// Reasoning with provenance written as a reasoning item (`origin`: openai, anthropic,
    /// chatgpt).
    ThinkingItem {
        origin: String,
    },
    /// An opaque reasoning blob left out (another vendor's, or by policy).
    EncryptedReasoningDropped {
        origin: String,
    },
    EncryptedReasoningKept,
    /// A failed tool output marked in its text.
    ToolErrorPrefixed,
    ToolErrorKept,
    /// A compaction summary, by `policy.compaction` (`replace`, `compacted`, `drop`).
    Compaction {
        how: String,
    },
    /// A field only an assistant message can carry (reasoning, refusal, tool calls) found on
    /// another role: nothing in Codex can hold it there. Or (`builtin.wrong-type-field`) a
    /// field of the wrong JSON type, e.g. `"name": 5`; `found` is the type it held.
    FieldDropped {
        field: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        found: Option<String>,
    },
    /// A record with no model given `--model`'s (`--format responses`).
    ModelDefaulted {
        model: String,
    },
    /// A session meta field the record gave no value for, written from the rules'
    /// `[session]` default (the rule id names the key): the value written.
    SessionDefaulted {
        value: String,
    },
}

/// Whether the action named `action` repairs the conversation: a message placed by its slot
/// (`classified`) or a session meta value from the rules' defaults (`session_defaulted`) is a
/// decision the reports show, not a repair (the verdict stays "ready").
pub(crate) fn is_repair(action: &str) -> bool {
    !matches!(action, "classified" | "session_defaulted")
}

impl Action {
    /// The action's name, as serialised in `action`.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Classified { .. } => "classified",
            Action::ModelDefaulted { .. } => "model_defaulted",
            Action::SessionDefaulted { .. } => "session_defaulted",
            Action::RoleAliased { .. } => "role_aliased",
            Action::UnknownRole { .. } => "unknown_role",
            Action::OutputSynthesized { .. } => "output_synthesized",
            Action::OrphanOutputDropped { .. } => "orphan_output_dropped",
            Action::OrphanOutputAsText { .. } => "orphan_output_as_text",
            Action::CallIdRenamed { .. } => "call_id_renamed",
            Action::CallIdSynthesized { .. } => "call_id_synthesized",
            Action::OutputShared { .. } => "output_shared",
            Action::ArgumentsSerialized => "arguments_serialized",
            Action::ArgumentsDefaulted => "arguments_defaulted",
            Action::RefusalAsText => "refusal_as_text",
            Action::RefusalDropped => "refusal_dropped",
            Action::ReasoningItem => "reasoning_item",
            Action::ReasoningDropped => "reasoning_dropped",
            Action::UnpairedReasoningDropped => "unpaired_reasoning_dropped",
            Action::PartPlaceholder { .. } => "part_placeholder",
            Action::PartDropped { .. } => "part_dropped",
            Action::ImageDetailOmitted => "image_detail_omitted",
            Action::PartKeptUnsupported { .. } => "part_kept_unsupported",
            Action::PartsJoined { .. } => "parts_joined",
            Action::Wrapped { .. } => "wrapped",
            Action::LookalikeEscaped { .. } => "lookalike_escaped",
            Action::LookalikeAsContext { .. } => "lookalike_as_context",
            Action::EmptyMessageDropped => "empty_message_dropped",
            Action::EmptyMessageKept => "empty_message_kept",
            Action::ToolDropped { .. } => "tool_dropped",
            Action::InvalidPhaseDropped { .. } => "invalid_phase_dropped",
            Action::DuplicateBaseInstructionsDropped => "duplicate_base_instructions_dropped",
            Action::BaseInstructionsAlreadySet => "base_instructions_already_set",
            Action::UnicodeRepaired { .. } => "unicode_repaired",
            Action::MessagesFoundByShape { .. } => "messages_found_by_shape",
            Action::SourceNote { .. } => "source_note",
            Action::Dropped => "dropped",
            Action::ThinkingItem { .. } => "thinking_item",
            Action::EncryptedReasoningDropped { .. } => "encrypted_reasoning_dropped",
            Action::EncryptedReasoningKept => "encrypted_reasoning_kept",
            Action::ToolErrorPrefixed => "tool_error_prefixed",
            Action::ToolErrorKept => "tool_error_kept",
            Action::Compaction { .. } => "compaction",
            Action::FieldDropped { .. } => "field_dropped",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::rule::PolicyId;

    /// One action of every kind, texts that need escaping in each of their strings.
    fn every_action() -> Vec<Action> {
        let text = || "a \"quoted\"\\ \u{1}\u{1f} \u{e9}\u{1f600}".to_string();
        let mut actions = vec![
            Action::ModelDefaulted { model: text() },
            Action::SessionDefaulted { value: text() },
            Action::RoleAliased {
                from: text(),
                to: "user".into(),
            },
            Action::UnknownRole { role: text() },
            Action::OutputSynthesized { call_id: text() },
            Action::OrphanOutputDropped { call_id: None },
            Action::OrphanOutputDropped {
                call_id: Some(text()),
            },
            Action::OrphanOutputAsText { call_id: None },
            Action::OrphanOutputAsText {
                call_id: Some(text()),
            },
            Action::CallIdRenamed {
                from: text(),
                to: "call_1#2".into(),
            },
            Action::CallIdSynthesized { call_id: text() },
            Action::OutputShared { call_id: text() },
            Action::ArgumentsSerialized,
            Action::ArgumentsDefaulted,
            Action::RefusalAsText,
            Action::RefusalDropped,
            Action::ReasoningItem,
            Action::ReasoningDropped,
            Action::UnpairedReasoningDropped,
            Action::PartPlaceholder { part: text() },
            Action::PartDropped { part: text() },
            Action::ImageDetailOmitted,
            Action::PartKeptUnsupported { part: text() },
            Action::PartsJoined { parts: 0 },
            Action::PartsJoined { parts: usize::MAX },
            Action::Wrapped { kind: text() },
            Action::LookalikeEscaped { kind: text() },
            Action::LookalikeAsContext { kind: text() },
            Action::EmptyMessageDropped,
            Action::EmptyMessageKept,
            Action::ToolDropped { name: None },
            Action::ToolDropped { name: Some(text()) },
            Action::InvalidPhaseDropped { phase: text() },
            Action::DuplicateBaseInstructionsDropped,
            Action::BaseInstructionsAlreadySet,
            Action::UnicodeRepaired { count: 3 },
            Action::MessagesFoundByShape { path: text() },
            Action::SourceNote {
                what: text(),
                count: u64::MAX,
            },
            Action::Dropped,
            Action::ThinkingItem { origin: text() },
            Action::EncryptedReasoningDropped { origin: text() },
            Action::EncryptedReasoningKept,
            Action::ToolErrorPrefixed,
            Action::ToolErrorKept,
            Action::Compaction { how: text() },
            Action::FieldDropped {
                field: text(),
                found: None,
            },
            Action::FieldDropped {
                field: text(),
                found: Some("number".into()),
            },
        ];
        for slot in [
            Slot::BaseInstructions,
            Slot::Developer,
            Slot::SeparateDeveloper,
            Slot::ModelSwitch,
            Slot::ContextualUser,
            Slot::Compacted,
            Slot::Drop,
            Slot::Quarantine,
            Slot::User,
        ] {
            actions.push(Action::Classified { slot });
        }
        actions
    }

    /// The hand-spliced decision is what serde_json writes of it: every action, with and
    /// without a message and byte counts, under every kind of rule.
    #[test]
    fn a_decision_is_written_as_serde_json_writes_it() {
        let actions = every_action();
        let names: std::collections::BTreeSet<&str> = actions.iter().map(Action::name).collect();
        // As many names as `Action::name` has arms: a new action must be added here.
        assert_eq!(names.len(), 43, "one action of every kind: {names:?}");
        let rules = [
            RuleRef::Policy(PolicyId::ALL[0]),
            RuleRef::Builtin(crate::rules::Builtin::ALL[0]),
            RuleRef::RoleAliases,
            RuleRef::Session(crate::model::rule::SessionKey::Cwd),
            RuleRef::File("my \"rule\"\\ \u{7}".into()),
        ];
        for (i, action) in actions.into_iter().enumerate() {
            for (message, bytes_dropped, bytes_added) in [
                (None, 0, 0),
                (Some(0), 1, 0),
                (Some(usize::MAX), 0, 7),
                (Some(i), i, i),
            ] {
                let decision = Decision {
                    message,
                    rule: rules[i % rules.len()].clone(),
                    action: action.clone(),
                    bytes_dropped,
                    bytes_added,
                };
                let mut ours = Vec::new();
                decision.write_json(&mut ours).expect("written");
                let serde = serde_json::to_vec(&decision).expect("serde");
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&serde)
                );
            }
        }
    }
}
