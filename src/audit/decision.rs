//! One decision of the converter, with the rule behind it.

use serde::Serialize;

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
}

impl Action {
    /// The action's name, as serialised in `action`.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Classified { .. } => "classified",
            Action::ModelDefaulted { .. } => "model_defaulted",
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
