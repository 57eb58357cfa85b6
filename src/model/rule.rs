//! Rule ids: what a decision, a source note or a quarantine cites as its reason.
//!
//! A decision names the rule behind it as one string in the audit: `policy.<key>` for a repair
//! policy, `builtin.<name>` for what no rule file can change, `input.role_aliases` for a role
//! renamed by an alias, or a `[[rule]]`'s own `id`. [`RuleRef`] keeps that string's shape in
//! one place and lets code match on the reason instead of comparing text; it is carried as a
//! value from the reader or converter that decided to the audit line that writes it, and never
//! read back from its text.
//!
//! The ids live here, below `rules`, because a [`Transcript`](super::transcript::Transcript)'s
//! source notes name them. Every policy is declared once, in [`policy_table!`]: here the table
//! gives [`PolicyId`], and in `rules::policy` everything a rule file's `[policy]` section
//! needs (its action types, checks and docs).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The one declaration of every repair policy: its id, its `[policy]` key, its action type,
/// what it decides, its text or template key and the actions it forbids. It hands the table
/// to the macro `$declare`, invoked where the table is expanded: [`policy_ids!`] below (the
/// ids only), and `rules::policy`'s `declare_policies!`, whose scope the action types
/// (`MissingOutput`, `PartAction`, ...) are resolved in.
macro_rules! policy_table {
    ($declare:ident) => {
        $declare! {
            MissingOutput(missing_output): MissingOutput,
                "a call with no output: synthesise one, as Codex would, or quarantine",
                text missing_output_text: "the synthesised output's text";
            OrphanOutput(orphan_output): OrphanOutput,
                "an output whose call is not in the conversation",
                text orphan_output_template: "the user text `text` writes ({call_id}, {text})";
            ReusedCallId(reused_call_id): ReusedCallId,
                "a call id an earlier call used: rename (call_x -> call_x#2) in the call and its own output";
            Refusal(refusal): Refusal,
                "an assistant refusal (Codex has no refusal content item)";
            Reasoning(reasoning): Reasoning,
                "plain-text reasoning: a reasoning item before what it explains";
            RemoteImage(remote_image): PartAction,
                "an image given by URL, which Codex will not load: keep and omit_detail leave that URL in the session",
                text remote_image_template: "the placeholder text ({url})";
            UndecodableImage(undecodable_image): PartAction,
                "a data: image that does not decode as PNG/JPEG/GIF/WebP (Codex would replace it): keep and omit_detail leave that image, which Codex will not load, in the session",
                text undecodable_image_template: "the placeholder text";
            LowDetailImage(low_detail_image): PartAction,
                "an image with detail \"low\" (Codex would replace it by a note)",
                text low_detail_image_template: "the placeholder text";
            FilePart(file_part): PartAction,
                "a file content part (no Codex equivalent)",
                text file_part_template: "the placeholder text ({name})",
                forbid [Keep, OmitDetail] "Codex has no content item for it";
            AudioPart(audio_part): PartAction,
                "an audio content part (Codex 0.169 replaces audio for text models)",
                text audio_part_template: "the placeholder text ({format})";
            UnknownPart(unknown_part): PartAction,
                "a content part of an unknown type, or an image in assistant output",
                text unknown_part_template: "the placeholder text ({type})",
                forbid [Keep, OmitDetail] "Codex has no content item for it";
            UnknownRole(unknown_role): UnknownRole,
                "a role that is not system, developer, user, assistant, tool or function (after aliases)";
            LookalikeUserText(lookalike_user_text): Lookalike,
                "real user text that starts and ends like a registered fragment (Codex would hide it)",
                text lookalike_escape_prefix: "the prefix `escape` adds (not whitespace only: Codex trims)";
            EmptyMessage(empty_message): EmptyMessage,
                "a message with no content and nothing else";
            InvalidUnicode(invalid_unicode): InvalidUnicode,
                "lone surrogates and invalid UTF-8: replace by U+FFFD (counted)";
            InvalidPhase(invalid_phase): DropOrQuarantine,
                "an explicit phase Codex does not know";
            DuplicateBaseInstructions(duplicate_base_instructions): DropOrQuarantine,
                "a developer message repeating the base instructions";
            UnpairedReasoning(unpaired_reasoning): DropOrQuarantine,
                "reasoning with no message or call after it to explain";
            UntranslatableTool(untranslatable_tool): DropOrQuarantine,
                "a record's tool definition with no Responses function equivalent (--format responses)";
            Thinking(thinking): Thinking,
                "readable reasoning from a source (Anthropic thinking, ChatGPT thoughts): keep (summary as summary_text, content as reasoning_text), all as summary, all as content, or drop";
            EncryptedReasoning(encrypted_reasoning): KeepOrDrop,
                "OpenAI encrypted_content from a Responses log (another organisation's blob can fail on resume); another vendor's blob is never written";
            ToolError(tool_error): ToolError,
                "a tool output the source marks as failed (Claude is_error, ChatGPT system_error): Codex has no flag",
                text tool_error_prefix: "the prefix `prefix` writes before the output";
            Compaction(compaction): Compaction,
                "a compaction summary (Claude Code): replace (a compacted line whose replacement history is the summary, what the model saw), compacted (Codex rebuilds the history), or drop";
            StructuralLine(structural_line): DropOrQuarantine,
                "a source line that holds no message (Claude Code progress, file-history-snapshot, queue-operation, titles, system lines)";
            Sidechain(sidechain): Sidechain,
                "a Claude Code subagent (sidechain): drop (its report is the Task output) or its own rollout, linked in the audit";
            InactiveBranch(inactive_branch): DropOrQuarantine,
                "ChatGPT nodes off the active path (edited prompts, regenerated answers)";
            HiddenNode(hidden_node): DropOrQuarantine,
                "ChatGPT hidden nodes, empty system nodes and reasoning_recap markers";
            Memory(memory): KeepOrDrop,
                "ChatGPT model_editable_context (memory): keep as a system message the rules classify, or drop";
            CitationMarkers(citation_markers): Citations,
                "ChatGPT citation markers (U+E200 ... U+E201) in assistant text";
            ToolWithoutCall(tool_without_call): ToolWithoutCall,
                "a ChatGPT tool node with no call before it: synthesize a call named after the tool, or leave it to orphan_output";
            UnresolvedImage(unresolved_image): UnresolvedImage,
                "an image pointer whose file is not in the export",
                text unresolved_image_template: "the placeholder text ({pointer})";
            ResentHistory(resent_history): ResentHistory,
                "API logs: a request resending an earlier one's history continues its chain; merge a chain into one conversation (its last request and response), or keep each request";
            SharedObservation(shared_observation): SharedObservation,
                "ShareGPT: one observation after N parallel calls: split a JSON list of N items one per call (else answer all), answer every call with it, or only the first";
            MissingImage(missing_image): MissingImage,
                "ShareGPT: an <image> whose file is not beside the dataset",
                text missing_image_template: "the placeholder text ({path})";
            HostedTool(hosted_tool): HostedTool,
                "Responses logs: an item Codex 0.169 does not know (code_interpreter_call, image_generation_call, mcp_call, web_search_call, ...): a call and its output, a placeholder, or drop (counted)",
                text hosted_tool_template: "the placeholder text ({type}, {json})";
            TextDocument(text_document): TextDocument,
                "an Anthropic document block with a plain-text source: inline its text, or a file part (policy.file_part)";
            ServerTool(server_tool): ServerTool,
                "an Anthropic server-tool block: a call and its output, a text note, or drop (counted)",
                text server_tool_template: "the note `text` writes ({type}, {name}, {json})";
            CodexLine(codex_line): DropOrQuarantine,
                "a Codex rollout line or item Codex itself keeps out of the model's history (UI events, turn_context, world_state, token counts, ghost_snapshot, state lines, a system message, an item Codex cannot parse)";
        }
    };
}
pub(crate) use policy_table;

/// [`PolicyId`] from the table of [`policy_table!`]: the ids and their keys (the rest of an
/// entry is `rules`').
macro_rules! policy_ids {
    ($(
        $variant:ident($key:ident): $action:ident, $what:literal
        $(, text $extra:ident: $meaning:literal)?
        $(, forbid [$($bad:ident),+] $why:literal)?
        ;
    )+) => {
        /// A repair policy, named in decisions as `policy.<key>`; serialised as its TOML key.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum PolicyId {
            $($variant,)+
        }

        impl PolicyId {
            /// Every policy, in declaration (and default-file) order.
            pub const ALL: &'static [PolicyId] = &[$(PolicyId::$variant),+];

            /// The key in `[policy]`, e.g. `missing_output`.
            pub fn key(self) -> &'static str {
                match self {
                    $(PolicyId::$variant => stringify!($key),)+
                }
            }

            /// The rule id decisions carry, e.g. `policy.missing_output`.
            pub fn rule_id(self) -> &'static str {
                match self {
                    $(PolicyId::$variant => concat!("policy.", stringify!($key)),)+
                }
            }

            /// The policy whose `[policy]` key is `key` (as a rule file or `rules` names it).
            pub fn from_key(key: &str) -> Option<PolicyId> {
                PolicyId::ALL.iter().copied().find(|id| id.key() == key)
            }
        }
    };
}

policy_table!(policy_ids);

impl fmt::Display for PolicyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

impl Serialize for PolicyId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.key())
    }
}

/// A policy named by its key in a file the user wrote.
impl<'de> Deserialize<'de> for PolicyId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let key = String::deserialize(deserializer)?;
        PolicyId::from_key(&key)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown policy `{key}`")))
    }
}

/// Declares [`Builtin`] with each variant's name, the only place that name is written.
macro_rules! builtins {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)+) => {
        /// A decision no rule file can change, named `builtin.<name>` in the audit.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Builtin {
            $($(#[$doc])* $variant,)+
        }

        impl Builtin {
            pub const ALL: &'static [Builtin] = &[$(Builtin::$variant),+];

            /// The name after `builtin.`, e.g. `shared-output`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Builtin::$variant => $name,)+
                }
            }

            /// The rule id decisions carry, e.g. `builtin.shared-output`.
            pub fn rule_id(self) -> &'static str {
                match self {
                    $(Builtin::$variant => concat!("builtin.", $name),)+
                }
            }
        }
    };
}

builtins! {
    /// A system or developer message no `[[rule]]` matched: developer context.
    UnmatchedInstructions = "unmatched-instructions",
    /// A field only an assistant message can carry, found on another role.
    AssistantFields = "assistant-fields",
    /// Several text parts joined into one string.
    JoinParts = "join-parts",
    /// A call without an id got one.
    CallId = "call-id",
    /// Arguments given as an object serialised, or missing arguments written as `{}`.
    ArgumentsString = "arguments-string",
    /// One tool message answering several calls: each got a copy.
    SharedOutput = "shared-output",
    /// A message or part field of the wrong JSON type (e.g. `"name": 5`), dropped.
    WrongTypeField = "wrong-type-field",
    /// No `messages_at` path held messages: the one field holding a list of objects with a
    /// string `role` was used (`--no-guess` turns it off).
    MessagesByShape = "messages-by-shape",
    /// Responses Lite: an image `detail` the Lite wire does not take, removed.
    LiteImageDetail = "lite-image-detail",
    /// Another vendor's opaque reasoning (Anthropic `signature`, `redacted_thinking`): never
    /// written as `encrypted_content`, where Codex would send it to OpenAI.
    ForeignReasoningBlob = "foreign-reasoning-blob",
    /// An Anthropic thinking block's `signature`: another vendor's opaque blob, never kept as
    /// `encrypted_content`.
    ThinkingSignature = "thinking-signature",
    /// An Anthropic `redacted_thinking` block: opaque, nothing readable to keep.
    RedactedThinking = "redacted-thinking",
    /// A logged request that shares a beginning with an earlier request's history but then
    /// disagrees with it: a conversation of its own, and where it diverged.
    ChainDiverged = "chain-diverged",
    /// A streamed response's choices beyond the first (`n` > 1): not a conversation's reply.
    ExtraChoices = "extra-choices",
    /// A dataset row's `tools`: kept as the record's tools, their names in the audit.
    DatasetTools = "dataset-tools",
    /// Responses `output_text` annotations (citations): Codex items have no field for them.
    ResponsesAnnotations = "responses-annotations",
    /// A logged response that is an API error, not a message: the request has no reply.
    ApiErrorResponse = "api-error-response",
    /// The `rejected` answer of a ShareGPT preference row (the `chosen` one is kept).
    PreferenceRejected = "preference-rejected",
    /// A logged SSE `data:` line whose JSON cannot be read: dropped, its bytes counted.
    UnreadableEvent = "unreadable-event",
    /// A record that names no model, given `convert --model`'s for its Responses body.
    DefaultModel = "default-model",
    /// A user prompt an older Codex rollout recorded only as a `user_message` event: written
    /// as the user message the model was sent.
    CodexEventPrompt = "codex-event-prompt",
    /// The items of the turns a Codex session took back (`thread_rolled_back`): left out,
    /// as Codex resumes the session without them.
    CodexRolledBack = "codex-rolled-back",
    /// A Codex session's `model_provider`, not written: Codex refuses to resume a session
    /// whose provider differs from its own (its own migration clears it too).
    CodexModelProvider = "codex-model-provider",
    /// The `instructions` of an older Codex rollout's header: the user's instructions (not
    /// the base instructions), written as an AGENTS.md fragment unless the history holds them.
    CodexUserInstructions = "codex-user-instructions",
    /// A source's working folder (Claude Code `cwd`) that is not an absolute, clean path of
    /// bounded length: the rules' `[session] cwd` written instead, the source's kept as
    /// `source_cwd` in the audit.
    SourceCwd = "source-cwd",
}

const ROLE_ALIASES: &str = "input.role_aliases";

/// A `[session]` key of the rule files whose value a session meta took because its record
/// gave none of its own: the decision `session.<key>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SessionKey {
    /// `[session] timestamp`: the record carries no time.
    Timestamp,
    /// `[session] cwd`: the record names no working folder.
    Cwd,
    /// `[session] originator`: no source's originator is written, only the rules'.
    Originator,
}

impl SessionKey {
    /// The rule id decisions carry, e.g. `session.timestamp`.
    pub fn rule_id(self) -> &'static str {
        match self {
            SessionKey::Timestamp => "session.timestamp",
            SessionKey::Cwd => "session.cwd",
            SessionKey::Originator => "session.originator",
        }
    }
}

/// The rule behind a decision or quarantine. Serialises to exactly the audit's string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RuleRef {
    /// A `[policy]` key: `policy.<key>`.
    Policy(PolicyId),
    /// `builtin.<name>`.
    Builtin(Builtin),
    /// The `[input] role_aliases` table: `input.role_aliases`.
    RoleAliases,
    /// A `[session]` default a session meta took: `session.<key>`.
    Session(SessionKey),
    /// A `[[rule]]` of a rule file, by its `id`.
    File(String),
}

impl RuleRef {
    /// The id as the audit writes it.
    pub fn as_str(&self) -> &str {
        match self {
            RuleRef::Policy(id) => id.rule_id(),
            RuleRef::Builtin(builtin) => builtin.rule_id(),
            RuleRef::RoleAliases => ROLE_ALIASES,
            RuleRef::Session(key) => key.rule_id(),
            RuleRef::File(id) => id,
        }
    }
}

impl From<PolicyId> for RuleRef {
    fn from(id: PolicyId) -> RuleRef {
        RuleRef::Policy(id)
    }
}

impl From<Builtin> for RuleRef {
    fn from(builtin: Builtin) -> RuleRef {
        RuleRef::Builtin(builtin)
    }
}

/// A rule passed on by reference (a classification rule placing several decisions).
impl From<&RuleRef> for RuleRef {
    fn from(rule: &RuleRef) -> RuleRef {
        rule.clone()
    }
}

impl AsRef<str> for RuleRef {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RuleRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_refs_serialise_to_the_audit_strings() {
        let cases = [
            (
                RuleRef::Policy(PolicyId::MissingOutput),
                "policy.missing_output",
            ),
            (
                RuleRef::Builtin(Builtin::SharedOutput),
                "builtin.shared-output",
            ),
            (RuleRef::RoleAliases, "input.role_aliases"),
            (RuleRef::Session(SessionKey::Timestamp), "session.timestamp"),
            (RuleRef::Session(SessionKey::Cwd), "session.cwd"),
            (
                RuleRef::Session(SessionKey::Originator),
                "session.originator",
            ),
            (
                RuleRef::File("first-leading-system".to_string()),
                "first-leading-system",
            ),
        ];
        for (rule, text) in cases {
            assert_eq!(serde_json::to_value(&rule).unwrap(), text);
            assert_eq!(rule.to_string(), text);
        }
        for builtin in Builtin::ALL {
            let rule = RuleRef::from(*builtin);
            assert_eq!(rule.as_str(), format!("builtin.{}", builtin.name()));
        }
    }
}
