//! The response items and events in order: invariants 3 to 11 (item types, call pairing and
//! shapes, reasoning placement, UI parity; messages themselves in [`super::message`]).
//!
//! Codex appends to a rollout when it resumes it: its own turns start with a `turn_context`
//! line or a `task_started` event, and from there on what Codex wrote is taken as Codex's (see
//! [`Walk::codex_turn`]).

use rustc_hash::FxHashMap;

use super::message::{self, Role};
use super::{Findings, Invariant, WarningKind};
use crate::model::rollout::view::{
    EventMsgView, Kind, LineView, MessageView, ResponseItemView, RolloutItemView, Text,
};
use crate::model::rollout::wire::{content, event, item};
use crate::rules::Marker;

/// The state of one pass over a rollout's lines.
pub(super) struct Walk<'l> {
    pub markers: &'l [Marker],
    /// The session's base instructions, if any.
    pub base: Option<&'l str>,
    /// True from the first line of a turn Codex ran itself (a `turn_context` line or a
    /// `task_started` event): what follows was written by Codex, not by a migration.
    pub codex_turn: bool,
    /// Each call id, with its call's line and whether it has had its output.
    calls: FxHashMap<&'l str, (usize, bool)>,
    /// The open run of reasoning items: its first line, its last line, its length.
    reasoning: Option<(usize, usize, usize)>,
    /// The contextual user message on the line before, if any.
    last_contextual: Option<usize>,
    /// Real user messages and assistant messages, each needing its UI event.
    users: Vec<(usize, &'l MessageView<'l>)>,
    assistants: Vec<(usize, &'l MessageView<'l>)>,
    /// The `user_message` and `agent_message` events: line and text.
    user_events: Vec<(usize, Option<&'l str>)>,
    agent_events: Vec<(usize, Option<&'l str>)>,
    /// Messages show in the UI by `user_message` and `agent_message` events (a paginated file
    /// shows them otherwise).
    pub ui_events: bool,
}

impl<'l> Walk<'l> {
    pub(super) fn new(markers: &'l [Marker], base: Option<&'l str>) -> Walk<'l> {
        Walk {
            markers,
            base,
            codex_turn: false,
            calls: FxHashMap::default(),
            reasoning: None,
            last_contextual: None,
            users: Vec::new(),
            assistants: Vec::new(),
            user_events: Vec::new(),
            agent_events: Vec::new(),
            ui_events: true,
        }
    }

    /// Checks every line, then what can only be known at the end.
    pub(super) fn run(mut self, lines: &'l [(usize, LineView<'l>)], out: &mut Findings) {
        for (n, line) in lines {
            let contextual_before = self.last_contextual.take();
            match &line.item {
                RolloutItemView::EventMsg(event) => self.event(*n, event, contextual_before, out),
                RolloutItemView::ResponseItem(item) => {
                    self.item(*n, item, line.payload_is_object, out)
                }
                RolloutItemView::TurnContext => self.codex_turn = true,
                RolloutItemView::SessionMeta(_)
                | RolloutItemView::Compacted
                | RolloutItemView::WorldState
                | RolloutItemView::TokenUsageRecord
                | RolloutItemView::Other(_)
                | RolloutItemView::Untagged => {}
            }
        }
        self.finish(out);
    }

    fn event(
        &mut self,
        n: usize,
        event: &'l EventMsgView<'l>,
        contextual_before: Option<usize>,
        out: &mut Findings,
    ) {
        match event {
            EventMsgView::UserMessage { message } => match contextual_before {
                // The event belongs to the message before it, which the writer took for real
                // user text: Codex will hide that message.
                Some(at) => out.violation(
                    Invariant::ContextualUser,
                    at,
                    "real user text matches a registered marker: Codex would hide this message"
                        .to_string(),
                ),
                None => self.user_events.push((n, message.as_deref())),
            },
            EventMsgView::AgentMessage { message } => {
                self.agent_events.push((n, message.as_deref()))
            }
            EventMsgView::TaskStarted => self.codex_turn = true,
            EventMsgView::Other(_) => {}
        }
    }

    fn item(
        &mut self,
        n: usize,
        item: &'l ResponseItemView<'l>,
        payload_is_object: bool,
        out: &mut Findings,
    ) {
        self.reasoning_before(n, item, out);
        match item {
            ResponseItemView::Message(m) => match message::check(self, n, m, out) {
                Role::Contextual => self.last_contextual = Some(n),
                Role::RealUser => self.users.push((n, m)),
                Role::Assistant => self.assistants.push((n, m)),
                Role::Other => {}
            },
            ResponseItemView::Reasoning { content } => {
                if content.as_ref().is_some_and(|parts| {
                    parts.iter().any(|p| {
                        !matches!(
                            p.kind.as_deref(),
                            Some(content::REASONING_TEXT | content::TEXT)
                        )
                    })
                }) {
                    out.violation(
                        Invariant::ContentTypes,
                        n,
                        "reasoning content holds a part that is not reasoning_text".to_string(),
                    );
                }
            }
            ResponseItemView::FunctionCall { call_id, arguments } => {
                self.call(n, item::FUNCTION_CALL, call_id, out);
                if *arguments != Kind::String {
                    out.violation(
                        Invariant::CallShapes,
                        n,
                        "function_call arguments is not a string (Codex drops the call)"
                            .to_string(),
                    );
                }
            }
            ResponseItemView::CustomToolCall { call_id, input } => {
                self.call(n, item::CUSTOM_TOOL_CALL, call_id, out);
                if *input != Kind::String {
                    out.violation(
                        Invariant::CallShapes,
                        n,
                        "custom_tool_call input is not a string".to_string(),
                    );
                }
            }
            ResponseItemView::LocalShellCall { call_id } => {
                self.call(n, item::LOCAL_SHELL_CALL, call_id, out)
            }
            ResponseItemView::FunctionCallOutput { call_id, output } => {
                self.output(n, item::FUNCTION_CALL_OUTPUT, call_id, *output, out)
            }
            ResponseItemView::CustomToolCallOutput { call_id, output } => {
                self.output(n, item::CUSTOM_TOOL_CALL_OUTPUT, call_id, *output, out)
            }
            // Codex writes these itself and pairs what needs pairing.
            ResponseItemView::ToolSearchCall
            | ResponseItemView::ToolSearchOutput
            | ResponseItemView::WebSearchCall
            | ResponseItemView::ImageGenerationCall
            | ResponseItemView::Compaction => {}
            ResponseItemView::GhostSnapshot => out.warning(
                WarningKind::IgnoredItemType,
                n,
                "`ghost_snapshot` item: Codex keeps it out of the model's history on purpose"
                    .to_string(),
            ),
            // A line without an object payload is reported already (invariant 2).
            ResponseItemView::Other(_) if !payload_is_object => {}
            ResponseItemView::Other(Some(kind)) => out.violation(
                Invariant::Roles,
                n,
                format!(
                    "response item type `{}` is unknown to Codex 0.169: it drops the item on \
                     resume",
                    &**kind
                ),
            ),
            ResponseItemView::Other(None) => out.violation(
                Invariant::Roles,
                n,
                "response item has no string `type`: Codex drops it on resume".to_string(),
            ),
        }
    }

    /// Invariant 8. Reasoning is the model's: a reasoning item, or a run of them (Codex and
    /// the API write runs), explains the assistant message or call right after it. Anything
    /// else there means the item it explained was lost.
    fn reasoning_before(&mut self, n: usize, item: &ResponseItemView, out: &mut Findings) {
        if let ResponseItemView::Reasoning { .. } = item {
            let (first, _, count) = self.reasoning.unwrap_or((n, n, 0));
            self.reasoning = Some((first, n, count + 1));
            return;
        }
        let Some((_, last, count)) = self.reasoning.take() else {
            return;
        };
        let what = match item {
            ResponseItemView::Message(m) => match m.role.as_deref() {
                Some(super::ROLE_ASSISTANT) => return,
                role => format!("a {} message", role.unwrap_or("(no role)")),
            },
            ResponseItemView::FunctionCall { .. }
            | ResponseItemView::CustomToolCall { .. }
            | ResponseItemView::LocalShellCall { .. }
            | ResponseItemView::ToolSearchCall
            | ResponseItemView::WebSearchCall
            | ResponseItemView::ImageGenerationCall => return,
            other @ ResponseItemView::Reasoning { .. }
            | other @ ResponseItemView::FunctionCallOutput { .. }
            | other @ ResponseItemView::CustomToolCallOutput { .. }
            | other @ ResponseItemView::ToolSearchOutput
            | other @ ResponseItemView::Compaction
            | other @ ResponseItemView::GhostSnapshot
            | other @ ResponseItemView::Other(_) => {
                format!("`{}`", other.type_name().unwrap_or("(no type)"))
            }
        };
        out.violation(
            Invariant::ReasoningPlacement,
            last,
            format!(
                "{} followed by {what}, not by the assistant message or call it explains",
                run_name(count)
            ),
        );
    }

    fn call(&mut self, n: usize, kind: &str, call_id: &'l Option<Text<'l>>, out: &mut Findings) {
        let Some(id) = call_id.as_deref() else {
            out.violation(
                Invariant::CallShapes,
                n,
                format!("{kind} has no string call_id"),
            );
            return;
        };
        if let Some(earlier) = self.calls.insert(id, (n, false)) {
            out.violation(
                Invariant::CallPairing,
                n,
                format!(
                    "call id `{id}` used by an earlier call (line {})",
                    earlier.0
                ),
            );
        }
    }

    fn output(
        &mut self,
        n: usize,
        kind: &str,
        call_id: &'l Option<Text<'l>>,
        output: Kind,
        out: &mut Findings,
    ) {
        if !matches!(output, Kind::String | Kind::Array) {
            out.violation(
                Invariant::CallShapes,
                n,
                format!(
                    "output is {}, not a string or an array (Codex drops the line)",
                    output.article_name()
                ),
            );
        }
        let Some(id) = call_id.as_deref() else {
            out.violation(
                Invariant::CallShapes,
                n,
                format!("{kind} has no string call_id"),
            );
            return;
        };
        match self.calls.get_mut(id) {
            None => out.violation(
                Invariant::CallPairing,
                n,
                format!("output for `{id}` without an earlier call"),
            ),
            Some((_, answered)) if *answered => out.violation(
                Invariant::CallPairing,
                n,
                format!("second output for `{id}`"),
            ),
            Some((_, answered)) => *answered = true,
        }
    }

    fn finish(self, out: &mut Findings) {
        if let Some((_, last, count)) = self.reasoning {
            out.violation(
                Invariant::ReasoningPlacement,
                last,
                format!("{} at the end, with nothing after it", run_name(count)),
            );
        }
        let mut unanswered: Vec<(usize, &str)> = self
            .calls
            .iter()
            .filter(|(_, (_, answered))| !answered)
            .map(|(id, (n, _))| (*n, *id))
            .collect();
        unanswered.sort();
        for (n, id) in unanswered {
            out.violation(
                Invariant::CallPairing,
                n,
                format!("call `{id}` has no output (Codex would invent an \"aborted\" one)"),
            );
        }
        if !self.ui_events {
            return;
        }
        // 11. UI parity: the n-th message of a kind pairs with the n-th event of that kind
        // (Codex writes an assistant's event before its item, a user's after).
        ui_parity(
            &self.users,
            &self.user_events,
            "real user",
            event::USER_MESSAGE,
            out,
        );
        ui_parity(
            &self.assistants,
            &self.agent_events,
            "assistant",
            event::AGENT_MESSAGE,
            out,
        );
    }
}

fn run_name(count: usize) -> String {
    if count == 1 {
        "reasoning item".to_string()
    } else {
        format!("run of {count} reasoning items")
    }
}

fn ui_parity(
    messages: &[(usize, &MessageView)],
    events: &[(usize, Option<&str>)],
    who: &str,
    event_type: &str,
    out: &mut Findings,
) {
    for (i, (n, m)) in messages.iter().enumerate() {
        let Some((at, text)) = events.get(i) else {
            out.violation(
                Invariant::UiParity,
                *n,
                format!("{who} message without a {event_type} event"),
            );
            continue;
        };
        let Some(text) = text else {
            out.violation(
                Invariant::UiParity,
                *n,
                format!("its {event_type} event (line {at}) has no string `message`"),
            );
            continue;
        };
        if !message::text_is(m, text) {
            out.violation(
                Invariant::UiParity,
                *n,
                format!(
                    "its {event_type} event (line {at}) shows another text ({} bytes, the \
                     message has {}): the UI would not show what the model sees",
                    text.len(),
                    message::text_len(m)
                ),
            );
        }
    }
}
