//! Typed rule references: what a decision or a quarantine cites as its reason.
//!
//! A decision names the rule behind it as one string in the audit: `policy.<key>` for a repair
//! policy, `builtin.<name>` for what no rule file can change, `input.role_aliases` for a role
//! renamed by an alias, or a `[[rule]]`'s own `id`. The
//! types here keep that string's shape in one place and let code match on the reason instead of
//! comparing text. They live in `rules` so that `audit`, `input` and `convert` can all use them
//! (each of those may depend on `rules`, never the other way round).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::PolicyId;

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
}

const ROLE_ALIASES: &str = "input.role_aliases";

/// The rule behind a decision or quarantine. Serialises to exactly the audit's string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RuleRef {
    /// A `[policy]` key: `policy.<key>`.
    Policy(PolicyId),
    /// `builtin.<name>`.
    Builtin(Builtin),
    /// The `[input] role_aliases` table: `input.role_aliases`.
    RoleAliases,
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
            RuleRef::File(id) => id,
        }
    }

    /// Reads an audit id back: a known `policy.`/`builtin.` id is typed, anything else is a
    /// rule file's id.
    pub fn parse(text: &str) -> RuleRef {
        let policy = text
            .strip_prefix("policy.")
            .and_then(PolicyId::from_key)
            .map(RuleRef::Policy);
        let builtin = || {
            let name = text.strip_prefix("builtin.")?;
            let found = Builtin::ALL.iter().find(|b| b.name() == name)?;
            Some(RuleRef::Builtin(*found))
        };
        if text == ROLE_ALIASES {
            return RuleRef::RoleAliases;
        }
        policy
            .or_else(builtin)
            .unwrap_or_else(|| RuleRef::File(text.to_string()))
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

impl<'de> Deserialize<'de> for RuleRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(RuleRef::parse(&String::deserialize(deserializer)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_refs_serialise_to_the_audit_strings_and_read_back() {
        let cases = [
            (
                RuleRef::Policy(PolicyId::MissingOutput),
                "policy.missing_output",
            ),
            (
                RuleRef::Builtin(Builtin::SharedOutput),
                "builtin.shared-output",
            ),
            (
                RuleRef::File("first-leading-system".to_string()),
                "first-leading-system",
            ),
        ];
        for (rule, text) in cases {
            assert_eq!(serde_json::to_value(&rule).unwrap(), text);
            assert_eq!(RuleRef::parse(text), rule);
        }
        for builtin in Builtin::ALL {
            let rule = RuleRef::from(*builtin);
            assert_eq!(rule.as_str(), format!("builtin.{}", builtin.name()));
            assert_eq!(RuleRef::parse(rule.as_str()), rule);
        }
    }
}
