//! The rule-file format, as written in TOML. Every key is optional so that a later file can
//! override or extend an earlier one; unknown keys are errors (with their line). A value that
//! is checked after parsing (a rule id, a marker kind, a regex, a path, a time) keeps where it
//! is written ([`Spanned`]), so that its error points at it.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::policy::PolicySection;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    pub meta: Option<MetaSection>,
    pub input: Option<InputSection>,
    pub session: Option<SessionSection>,
    pub phase: Option<PhaseSection>,
    pub policy: Option<PolicySection>,
    pub developer: Option<DeveloperSection>,
    #[serde(default)]
    pub marker: Vec<MarkerEntry>,
    #[serde(default)]
    pub rule: Vec<RuleEntry>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetaSection {
    pub name: Option<String>,
    pub codex_version: Option<String>,
    pub description: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSection {
    pub messages_at: Option<Vec<Spanned<String>>>,
    pub role_aliases: Option<BTreeMap<String, String>>,
    pub id_at: Option<Vec<Spanned<String>>>,
    pub created_at: Option<Vec<Spanned<String>>>,
    pub model_at: Option<Vec<Spanned<String>>>,
    pub reply_at: Option<Vec<Spanned<String>>>,
    pub sharegpt: Option<ShareGptSection>,
}

/// `[input.sharegpt]`: the tags of a ShareGPT dataset (LLaMA-Factory's names).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareGptSection {
    pub role_tag: Option<String>,
    pub content_tag: Option<String>,
    pub user_tag: Option<String>,
    pub assistant_tag: Option<String>,
    pub observation_tag: Option<String>,
    pub function_tag: Option<String>,
    pub system_tag: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSection {
    pub cwd: Option<Spanned<String>>,
    pub originator: Option<String>,
    pub cli_version: Option<String>,
    pub source: Option<String>,
    pub model_provider: Option<String>,
    pub timestamp: Option<Spanned<String>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSection {
    pub infer: Option<bool>,
    pub finished: Option<Vec<FinishedEntry>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinishedEntry {
    pub path: Spanned<String>,
    pub equals: Option<String>,
}

/// Where a classified message goes (migration.md section 3).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum Slot {
    BaseInstructions,
    Developer,
    SeparateDeveloper,
    ModelSwitch,
    ContextualUser,
    Compacted,
    Drop,
    Quarantine,
    User,
}

impl Slot {
    /// The slot's name, as serde writes it (`snake_case`): the audit's decisions are written
    /// by hand with it ([`crate::audit::decision::Decision::write_json`], whose test holds
    /// the two equal for every slot).
    pub fn name(self) -> &'static str {
        match self {
            Slot::BaseInstructions => "base_instructions",
            Slot::Developer => "developer",
            Slot::SeparateDeveloper => "separate_developer",
            Slot::ModelSwitch => "model_switch",
            Slot::ContextualUser => "contextual_user",
            Slot::Compacted => "compacted",
            Slot::Drop => "drop",
            Slot::Quarantine => "quarantine",
            Slot::User => "user",
        }
    }
}

/// Where in the conversation a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    Any,
    Leading,
    Mid,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeveloperSection {
    pub prefixes: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkerEntry {
    pub kind: Spanned<String>,
    pub start: Option<String>,
    pub end: Option<String>,
    pub template: Option<String>,
    pub separate: Option<bool>,
    /// `false` removes a marker an earlier file registered.
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleEntry {
    pub id: Spanned<String>,
    pub description: Option<String>,
    pub role: Option<Vec<String>>,
    pub position: Option<Position>,
    pub index: Option<usize>,
    pub first_in_block: Option<bool>,
    pub name: Option<Spanned<String>>,
    pub prefix: Option<String>,
    pub regex: Option<Spanned<String>>,
    pub wrapped: Option<bool>,
    pub wrapped_kind: Option<String>,
    pub min_len: Option<usize>,
    pub max_len: Option<usize>,
    pub model: Option<Spanned<String>>,
    pub source: Option<Spanned<String>>,
    pub slot: Option<Slot>,
    pub kind: Option<String>,
    pub template: Option<String>,
    pub reason: Option<String>,
    /// `false` removes a rule an earlier file defined.
    pub enabled: Option<bool>,
}
