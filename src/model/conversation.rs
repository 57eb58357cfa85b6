//! A converted conversation's items: each Responses item (or `compacted` summary) with what
//! kind of item it is and the input message it came from. The converter makes them; the
//! renderer writes them; the audit counts them.

use super::rollout::{NativeItem, ResponseItem};

/// What kind of item an output item is, for events, phases and grouping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    RealUser,
    ContextualUser,
    Developer,
    Assistant,
    Reasoning,
    Call,
    Output,
    Compacted,
}

/// One output item with the input message it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct OutItem {
    pub kind: ItemKind,
    pub payload: OutPayload,
    /// Index of the input message it came from (`None` for synthesised items).
    pub origin: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OutPayload {
    Item(ResponseItem),
    Compacted(String),
    /// A `compacted` line whose replacement history is this summary as one user message:
    /// Codex resumes from exactly that, as the source's model saw it after compaction.
    CompactedReplacing(String),
    /// A `compacted` line read from a Codex rollout, written as it was read (its replacement
    /// history, when it has one, is what Codex resumes from).
    CompactedNative(NativeItem),
}
