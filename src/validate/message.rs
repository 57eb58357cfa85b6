//! One message item: its role (invariant 3), content types (4), phase (5), registered
//! fragments (9) and base instructions repeated (10).

use serde_json::Value;

use super::items::Walk;
use super::{Findings, Invariant, ROLE_ASSISTANT, ROLE_DEVELOPER, ROLE_SYSTEM, ROLE_USER};
use crate::model::rollout::view::{MessageView, PhaseView};
use crate::model::rollout::wire::content;
use crate::model::rollout::Phase;

const USER_CONTENT: [&str; 3] = [
    content::INPUT_TEXT,
    content::INPUT_IMAGE,
    content::INPUT_AUDIO,
];
const ASSISTANT_CONTENT: [&str; 1] = [content::OUTPUT_TEXT];
/// Content parts whose text the UI events repeat.
const TEXT_PARTS: [&str; 2] = [content::INPUT_TEXT, content::OUTPUT_TEXT];

/// What a message is, for the UI events it needs.
pub(super) enum Role {
    /// A user message of registered fragments only: hidden, no event.
    Contextual,
    RealUser,
    Assistant,
    /// Developer, or a role already reported.
    Other,
}

pub(super) fn check(walk: &Walk, n: usize, m: &MessageView, out: &mut Findings) -> Role {
    let role = m.role.as_deref().unwrap_or("");
    match role {
        ROLE_USER | ROLE_ASSISTANT | ROLE_DEVELOPER => {}
        ROLE_SYSTEM => out.violation(
            Invariant::Roles,
            n,
            "system message: Codex drops it from the history without a word".to_string(),
        ),
        other => out.violation(
            Invariant::Roles,
            n,
            format!("unknown role `{other}`: the API rejects it"),
        ),
    }
    check_phase(n, role, &m.phase, out);
    let Some(content) = &m.content else {
        out.violation(
            Invariant::ContentTypes,
            n,
            "content is not an array (Codex drops the message)".to_string(),
        );
        return Role::Other;
    };
    let allowed: &[&str] = if role == ROLE_ASSISTANT {
        &ASSISTANT_CONTENT
    } else {
        &USER_CONTENT
    };
    for part in content {
        let kind = part.kind.as_deref().unwrap_or("(none)");
        if !allowed.contains(&kind) {
            out.violation(
                Invariant::ContentTypes,
                n,
                format!("{role} content holds `{kind}`"),
            );
        }
    }
    match role {
        ROLE_USER => check_user(walk, n, m, out),
        ROLE_ASSISTANT => Role::Assistant,
        ROLE_DEVELOPER => {
            check_developer(walk, n, m, out);
            Role::Other
        }
        _ => Role::Other,
    }
}

fn check_phase(n: usize, role: &str, phase: &PhaseView, out: &mut Findings) {
    let shown = match phase {
        PhaseView::Absent => return,
        _ if role != ROLE_ASSISTANT => {
            out.violation(Invariant::Phase, n, format!("phase on a {role} message"));
            return;
        }
        PhaseView::Text(p) if Phase::parse(p).is_some() => return,
        // Shown as JSON, quoted when it is a string.
        PhaseView::Text(p) => Value::from(&**p).to_string(),
        PhaseView::NotText(json) => json.to_string(),
    };
    out.violation(
        Invariant::Phase,
        n,
        format!("unknown phase {shown} (Codex drops the message)"),
    );
}

fn check_user(walk: &Walk, n: usize, m: &MessageView, out: &mut Findings) -> Role {
    let content = m.content.as_deref().unwrap_or_default();
    let texts = content.iter().filter_map(|p| p.text.as_deref());
    let (mut with_text, mut fragments) = (0, 0);
    for text in texts {
        with_text += 1;
        let trimmed = text.trim();
        if walk
            .markers
            .iter()
            .any(|marker| marker.wraps_trimmed(trimmed))
        {
            fragments += 1;
        }
    }
    if fragments == 0 {
        return Role::RealUser;
    }
    if fragments < with_text || content.len() > with_text {
        out.violation(
            Invariant::ContextualUser,
            n,
            "user message mixes registered fragments and real text: Codex hides all of it"
                .to_string(),
        );
    }
    Role::Contextual
}

/// Invariant 10. Codex itself sends the base instructions again as a developer message for
/// some models, in turns it runs: such a message, after the first line of a Codex turn or
/// carrying an item `id` (only Codex writes those), is Codex's and passes. In the migrated part
/// it is a duplicate.
fn check_developer(walk: &Walk, n: usize, m: &MessageView, out: &mut Findings) {
    let Some(base) = walk.base else {
        return;
    };
    if walk.codex_turn || m.id.is_some() {
        return;
    }
    let content = m.content.as_deref().unwrap_or_default();
    if content.iter().any(|p| p.text.as_deref() == Some(base)) {
        out.violation(
            Invariant::BaseInstructions,
            n,
            "base instructions repeated as a developer message".to_string(),
        );
    }
}

fn texts<'m>(m: &'m MessageView) -> impl Iterator<Item = &'m str> {
    m.content
        .iter()
        .flatten()
        .filter_map(|p| match p.kind.as_deref() {
            Some(kind) if TEXT_PARTS.contains(&kind) => p.text.as_deref(),
            _ => None,
        })
}

/// True when `text` is the message's text parts joined by `\n`, as its UI event shows them.
pub(super) fn text_is(m: &MessageView, text: &str) -> bool {
    let mut rest = text;
    for (i, part) in texts(m).enumerate() {
        if i > 0 {
            match rest.strip_prefix('\n') {
                Some(r) => rest = r,
                None => return false,
            }
        }
        match rest.strip_prefix(part) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.is_empty()
}

/// The length in bytes of the text its UI event should show.
pub(super) fn text_len(m: &MessageView) -> usize {
    texts(m)
        .map(|t| t.len() + 1)
        .sum::<usize>()
        .saturating_sub(1)
}
