//! Assistant phases from the turn structure (migration.md section 4).
//!
//! An assistant message followed in the same turn by a call, reasoning or more assistant
//! output is `commentary`; the last one before the next real user message is `final_answer`;
//! at the end of the record it is `final_answer` only when the record says it finished,
//! otherwise it gets no phase. A phase given by the input is kept.

use super::{ItemKind, OutItem, OutPayload};
use crate::model::rollout::{Phase, ResponseItem};

pub(crate) fn assign(items: &mut [OutItem], infer: bool, finished: bool) {
    if !infer {
        return;
    }
    // Walk backwards, carrying what comes next in the turn.
    let mut next: Option<Phase> = if finished {
        Some(Phase::FinalAnswer)
    } else {
        None
    };
    for item in items.iter_mut().rev() {
        match item.kind {
            ItemKind::RealUser => next = Some(Phase::FinalAnswer),
            ItemKind::Call | ItemKind::Reasoning => next = Some(Phase::Commentary),
            ItemKind::Assistant => {
                if let OutPayload::Item(ResponseItem::Message { phase, .. }) = &mut item.payload {
                    if phase.is_none() {
                        *phase = next;
                    }
                }
                next = Some(Phase::Commentary);
            }
            ItemKind::Output
            | ItemKind::Developer
            | ItemKind::ContextualUser
            | ItemKind::Compacted => {}
        }
    }
}
