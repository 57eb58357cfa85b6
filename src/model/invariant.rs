//! The invariants a written rollout must keep (migration.md section 5), by number and name:
//! what the validator reports, what a quarantine's class names (`invariant`) and what the
//! summary counts. Declared here, below `validate` and `output`, because both name them; the
//! checks themselves are in [`crate::validate`].

use std::fmt;

use serde::Serialize;

/// The invariants, in the order of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Invariant {
    SessionMeta,
    LineFormat,
    Roles,
    ContentTypes,
    Phase,
    CallPairing,
    CallShapes,
    ReasoningPlacement,
    ContextualUser,
    BaseInstructions,
    UiParity,
    Accounting,
}

impl Invariant {
    pub const ALL: [Invariant; 12] = [
        Invariant::SessionMeta,
        Invariant::LineFormat,
        Invariant::Roles,
        Invariant::ContentTypes,
        Invariant::Phase,
        Invariant::CallPairing,
        Invariant::CallShapes,
        Invariant::ReasoningPlacement,
        Invariant::ContextualUser,
        Invariant::BaseInstructions,
        Invariant::UiParity,
        Invariant::Accounting,
    ];

    pub fn number(self) -> usize {
        match self {
            Invariant::SessionMeta => 1,
            Invariant::LineFormat => 2,
            Invariant::Roles => 3,
            Invariant::ContentTypes => 4,
            Invariant::Phase => 5,
            Invariant::CallPairing => 6,
            Invariant::CallShapes => 7,
            Invariant::ReasoningPlacement => 8,
            Invariant::ContextualUser => 9,
            Invariant::BaseInstructions => 10,
            Invariant::UiParity => 11,
            Invariant::Accounting => 12,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Invariant::SessionMeta => "session_meta",
            Invariant::LineFormat => "line_format",
            Invariant::Roles => "roles",
            Invariant::ContentTypes => "content_types",
            Invariant::Phase => "phase",
            Invariant::CallPairing => "call_pairing",
            Invariant::CallShapes => "call_shapes",
            Invariant::ReasoningPlacement => "reasoning_placement",
            Invariant::ContextualUser => "contextual_user",
            Invariant::BaseInstructions => "base_instructions",
            Invariant::UiParity => "ui_parity",
            Invariant::Accounting => "accounting",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.number(), self.name())
    }
}
