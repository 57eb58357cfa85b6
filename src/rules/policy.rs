//! The `[policy]` section: every repair policy, declared once.
//!
//! In: the `[policy]` tables of the rule files. Out: the resolved [`Policies`], the typed
//! [`PolicyId`] that decisions cite (`policy.<key>`), and the table `rollover rules policies`
//! prints. Fails with a [`RulesError`] when a key is set by no file or a value is forbidden.
//!
//! A policy is written in one place, the table of `crate::model::rule::policy_table!`: its
//! TOML key, its action type, its optional text or template key, what it decides, and any
//! actions it forbids. The table lives in `model` because the ids it declares ([`PolicyId`])
//! are named by a transcript's source notes; [`declare_policies!`] below generates from it the
//! file model ([`PolicySection`], unknown keys still rejected with their line), the resolved
//! model, merging, the "not set by any rule file" check and the docs.

use std::fmt;

use serde::Deserialize;
use toml::Spanned;

use super::RulesError;
pub use crate::model::rule::PolicyId;

/// An action type of a policy: the values a rule file may write for it.
pub trait PolicyAction: Copy + Eq + fmt::Debug + 'static {
    /// Every value, in the order the docs list them.
    const ALL: &'static [Self];
    /// The value as written in a rule file.
    fn name(self) -> &'static str;
}

/// Declares an action enum: each variant with its rule-file spelling, used both by serde and
/// by [`PolicyAction::name`], so the two cannot disagree.
macro_rules! action_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($variant,)+
        }

        // By hand rather than derived: a value of the wrong type (`= 3`) then names the
        // values the policy takes, not serde's "string or table".
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Names;
                impl serde::de::Visitor<'_> for Names {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "one of {}", [$($text),+].join(" | "))
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        match v {
                            $($text => Ok($name::$variant),)+
                            other => Err(E::unknown_variant(other, &[$($text),+])),
                        }
                    }
                }
                d.deserialize_str(Names)
            }
        }

        impl PolicyAction for $name {
            const ALL: &'static [Self] = &[$($name::$variant),+];
            fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }
    };
}

action_enum! {
    /// A call with no output.
    MissingOutput { Synthesize = "synthesize", Quarantine = "quarantine" }
}
action_enum! {
    /// An output whose call is not in the conversation.
    OrphanOutput { Drop = "drop", Text = "text", Quarantine = "quarantine" }
}
action_enum! {
    /// A call id the model used for an earlier call already.
    ReusedCallId { Rename = "rename", Quarantine = "quarantine" }
}
action_enum! {
    /// An assistant refusal (Codex has no refusal content item).
    Refusal { Text = "text", Drop = "drop", Quarantine = "quarantine" }
}
action_enum! {
    /// Plain-text reasoning.
    Reasoning { Item = "item", Drop = "drop" }
}
action_enum! {
    /// What to do with a content part Codex would not load as given.
    PartAction {
        Keep = "keep",
        OmitDetail = "omit_detail",
        Placeholder = "placeholder",
        Drop = "drop",
        Quarantine = "quarantine",
    }
}
action_enum! {
    /// A role that is not system, developer, user, assistant, tool or function (after aliases).
    UnknownRole { Quarantine = "quarantine", User = "user", Developer = "developer", Drop = "drop" }
}
action_enum! {
    /// Real user text that starts and ends like a registered fragment.
    Lookalike { Escape = "escape", Quarantine = "quarantine", Contextual = "contextual" }
}
action_enum! {
    /// A message with no content and nothing else.
    EmptyMessage { Drop = "drop", Keep = "keep" }
}
action_enum! {
    /// Lone surrogates and invalid UTF-8.
    InvalidUnicode { Replace = "replace", Quarantine = "quarantine" }
}
action_enum! {
    DropOrQuarantine { Drop = "drop", Quarantine = "quarantine" }
}
action_enum! {
    KeepOrDrop { Keep = "keep", Drop = "drop" }
}
action_enum! {
    /// Reasoning a source wrote as readable text (Anthropic `thinking`, ChatGPT `thoughts`).
    Thinking { Keep = "keep", Summary = "summary", Content = "content", Drop = "drop" }
}
action_enum! {
    /// A tool output the source marks as failed.
    ToolError { Prefix = "prefix", Keep = "keep" }
}
action_enum! {
    /// A compaction summary (Claude Code `isCompactSummary`).
    Compaction { Replace = "replace", Compacted = "compacted", Drop = "drop" }
}
action_enum! {
    /// Claude Code subagent transcripts (sidechains).
    Sidechain { Drop = "drop", Rollout = "rollout" }
}
action_enum! {
    /// ChatGPT citation markers (U+E200 ... U+E201) in assistant text.
    Citations { Strip = "strip", Keep = "keep" }
}
action_enum! {
    /// A ChatGPT tool node with no calling assistant node before it.
    ToolWithoutCall { Synthesize = "synthesize", Orphan = "orphan" }
}
action_enum! {
    /// An image a source points to that is not in the export.
    UnresolvedImage { Placeholder = "placeholder", Drop = "drop" }
}
action_enum! {
    /// Logged requests that resend an earlier request's history.
    ResentHistory { Merge = "merge", Keep = "keep" }
}
action_enum! {
    /// One ShareGPT observation after several parallel calls.
    SharedObservation { Split = "split", All = "all", First = "first" }
}
action_enum! {
    /// A dataset image file that is not there.
    MissingImage { Placeholder = "placeholder", Drop = "drop", Quarantine = "quarantine" }
}
action_enum! {
    /// A Responses item Codex 0.169 does not know (`code_interpreter_call`, `mcp_call`, ...).
    HostedTool { Call = "call", Placeholder = "placeholder", Drop = "drop" }
}
action_enum! {
    /// An Anthropic `document` block whose source is plain text.
    TextDocument { Inline = "inline", FilePart = "file_part" }
}
action_enum! {
    /// An Anthropic server-tool block (`server_tool_use`, `web_search_tool_result`, `mcp_tool_use`, ...).
    ServerTool { Call = "call", Text = "text", Drop = "drop" }
}

/// One policy as the docs show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDoc {
    pub id: PolicyId,
    /// The values a rule file may give it (forbidden ones left out).
    pub allowed: Vec<&'static str>,
    /// What it decides.
    pub what: &'static str,
    /// Its text or template key, and what that text is.
    pub text_key: Option<(&'static str, &'static str)>,
}

/// `None`, or the text key's name and meaning (a helper of [`declare_policies!`]).
macro_rules! text_key {
    () => {
        None
    };
    ($extra:ident, $meaning:literal) => {
        Some((stringify!($extra), $meaning))
    };
}

/// `None`, or the value of the text key in `p` (a helper of [`declare_policies!`]).
macro_rules! text_value {
    ($p:ident) => {
        None
    };
    ($p:ident, $extra:ident) => {
        Some($p.$extra.as_str())
    };
}

/// The forbidden actions of a policy (a helper of [`declare_policies!`]).
macro_rules! forbidden {
    ($action:ident) => {
        &[]
    };
    ($action:ident, $($bad:ident),+) => {
        &[$($action::$bad),+]
    };
}

/// Every part of the `[policy]` section, generated from the one table of policies
/// (`crate::model::rule::policy_table!`, which gives it here). Each entry:
/// `Variant(toml_key): ActionType, "what it decides"`, then optionally
/// `text text_key: "what the text is"` and `forbid [Variants] "why"`.
macro_rules! declare_policies {
    ($(
        $variant:ident($key:ident): $action:ident, $what:literal
        $(, text $extra:ident: $meaning:literal)?
        $(, forbid [$($bad:ident),+] $why:literal)?
        ;
    )+) => {
        /// The id itself (`PolicyId`: keys and rule ids) is generated in `model` from the same
        /// table, so that a source note can name it there.
        impl PolicyId {
            /// The policy as the docs show it.
            pub fn doc(self) -> PolicyDoc {
                match self {
                    $(PolicyId::$variant => {
                        let bad: &[$action] = forbidden!($action $(, $($bad),+)?);
                        PolicyDoc {
                            id: self,
                            allowed: $action::ALL
                                .iter()
                                .filter(|a| !bad.contains(a))
                                .map(|a| a.name())
                                .collect(),
                            what: $what,
                            text_key: text_key!($($extra, $meaning)?),
                        }
                    })+
                }
            }
        }

        /// `[policy]` as written in one file: every key optional so a later file can override;
        /// each value with where it is written, for errors.
        #[derive(Debug, Clone, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct PolicySection {
            $(
                pub $key: Option<Spanned<$action>>,
                $(pub $extra: Option<Spanned<String>>,)?
            )+
        }

        /// Repair policies, resolved: each with the rule id `policy.<key>` in decisions.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Policies {
            $(
                pub $key: $action,
                $(pub $extra: String,)?
            )+
        }

        impl PolicySection {
            /// Keys set in `later` override this section's.
            pub fn merge(&mut self, later: &PolicySection) {
                $(
                    override_opt(&mut self.$key, &later.$key);
                    $(override_opt(&mut self.$extra, &later.$extra);)?
                )+
            }

            /// The keys no file set, as `policy.KEY`.
            pub fn missing_keys(&self) -> Vec<&'static str> {
                let mut missing = Vec::new();
                $(
                    if self.$key.is_none() {
                        missing.push(concat!("policy.", stringify!($key)));
                    }
                    $(if self.$extra.is_none() {
                        missing.push(concat!("policy.", stringify!($extra)));
                    })?
                )+
                missing
            }

            /// Where the value of `key` (a key of `[policy]`) is written, if this section sets it.
            pub fn span_of(&self, key: &str) -> Option<std::ops::Range<usize>> {
                $(
                    if key == stringify!($key) {
                        return self.$key.as_ref().map(Spanned::span);
                    }
                    $(if key == stringify!($extra) {
                        return self.$extra.as_ref().map(Spanned::span);
                    })?
                )+
                None
            }

            /// Every key must be set by some file; `missing` names the first that is not.
            pub fn resolve(
                self,
                missing: impl Fn(&str) -> RulesError,
            ) -> Result<Policies, RulesError> {
                Ok(Policies {
                    $(
                        $key: self
                            .$key
                            .map(Spanned::into_inner)
                            .ok_or_else(|| missing(concat!("policy.", stringify!($key))))?,
                        $($extra: self
                            .$extra
                            .map(Spanned::into_inner)
                            .ok_or_else(|| missing(concat!("policy.", stringify!($extra))))?,)?
                    )+
                })
            }
        }

        impl Policies {
            /// The action set for `id`, as written in a rule file.
            pub fn action_name(&self, id: PolicyId) -> &'static str {
                match id {
                    $(PolicyId::$variant => self.$key.name(),)+
                }
            }

            /// The value of `id`'s text or template key, if it has one.
            pub fn text(&self, id: PolicyId) -> Option<&str> {
                let p = self;
                match id {
                    $(PolicyId::$variant => text_value!(p $(, $extra)?),)+
                }
            }

            /// A policy set to an action it forbids: its key and why.
            pub fn forbidden(&self) -> Option<(PolicyId, String)> {
                $(
                    $(
                        if [$($action::$bad),+].contains(&self.$key) {
                            let id = PolicyId::$variant;
                            let allowed = or_list(&id.doc().allowed);
                            return Some((id, format!(
                                "{} cannot be `{:?}`: {}; use {allowed}",
                                id.rule_id(),
                                self.$key,
                                $why,
                            )));
                        }
                    )?
                )+
                None
            }
        }
    };
}

// The table is declared with the ids it names, in `model` (see `policy_table!` there).
crate::model::rule::policy_table!(declare_policies);

impl Policies {
    /// Values TOML cannot rule out: a forbidden action, an escape prefix Codex would trim.
    /// The error is the key to point at and the message.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some((id, message)) = self.forbidden() {
            return Err((id.key(), message));
        }
        let prefix = &self.lookalike_escape_prefix;
        if prefix.trim().is_empty() && !prefix.is_empty() {
            return Err(("lookalike_escape_prefix", "policy.lookalike_escape_prefix is whitespace only: Codex trims it away, so it would not stop the text being hidden".to_string()));
        }
        Ok(())
    }
}

pub(super) fn override_opt<T: Clone>(target: &mut Option<T>, value: &Option<T>) {
    if value.is_some() {
        target.clone_from(value);
    }
}

/// `a, b or c`.
fn or_list(items: &[&str]) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::DEFAULT_RULES;

    /// Every key the declaration knows, action and text keys alike.
    fn declared_keys() -> Vec<&'static str> {
        PolicyId::ALL
            .iter()
            .flat_map(|id| {
                let doc = id.doc();
                std::iter::once(id.key()).chain(doc.text_key.map(|(key, _)| key))
            })
            .collect()
    }

    #[test]
    fn every_declared_policy_is_in_the_default_rules() {
        let file: toml::Table = toml::from_str(DEFAULT_RULES).unwrap();
        let policy = file["policy"].as_table().unwrap();
        let mut in_file: Vec<&str> = policy.keys().map(String::as_str).collect();
        let mut declared = declared_keys();
        in_file.sort_unstable();
        declared.sort_unstable();
        assert_eq!(in_file, declared);
    }

    #[test]
    fn every_declared_policy_is_in_the_readme_policy_list() {
        let readme = include_str!("../../README.md");
        let start = readme.find("- `[policy]`").unwrap();
        let end = start + readme[start..].find("\n- `[").unwrap();
        let list = &readme[start..end];
        let missing: Vec<&str> = declared_keys()
            .into_iter()
            .filter(|key| !list.contains(&format!("`{key}`")))
            .collect();
        assert_eq!(missing, Vec::<&str>::new());
    }

    #[test]
    fn policy_ids_serialise_as_their_key_and_rule_id_is_prefixed() {
        for id in PolicyId::ALL {
            let json = serde_json::to_string(id).unwrap();
            assert_eq!(json, format!("\"{}\"", id.key()));
            assert_eq!(serde_json::from_str::<PolicyId>(&json).unwrap(), *id);
            assert_eq!(id.rule_id(), format!("policy.{}", id.key()));
        }
    }

    #[test]
    fn forbidden_actions_are_left_out_of_the_docs() {
        assert_eq!(
            PolicyId::FilePart.doc().allowed,
            ["placeholder", "drop", "quarantine"]
        );
        assert_eq!(
            PolicyId::RemoteImage.doc().allowed,
            ["keep", "omit_detail", "placeholder", "drop", "quarantine"]
        );
    }

    #[test]
    fn or_list_reads_as_english() {
        assert_eq!(or_list(&["a"]), "a");
        assert_eq!(or_list(&["a", "b", "c"]), "a, b or c");
    }
}
