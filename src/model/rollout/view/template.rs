//! The fastest way in: the lines a rollout is mostly made of, read by their bytes.
//!
//! A rollout's lines are written by serde_json (Codex) or as serde_json writes them (rollover's
//! renderer): compact, keys in the order of the types' fields. Most are one of a few shapes:
//! a message, a tool call or output, and the message events. Those are read here as literals
//! with holes: `{"timestamp":` then a string, `,"type":` then a plain tag, `,"payload":{"type":`
//! then a plain item type, then that type's members in codex-rs's order (a session meta's
//! payload has no type: its members follow `,"payload":`). Each key is compared
//! as the bytes it must be, where [`super::scan`] reads every key as a string, looks it up among
//! the fifteen the views know, and fills a flat set of fields it sorts into the view afterwards.
//!
//! The holes are read by the same strict scanner (strings, numbers, skipped values), so what
//! this accepts it reads exactly as [`super::scan::line`] does; any other byte (a space, another
//! key or order, `null`, an escape in a tag, an extra member) refuses the line, and the caller
//! reads it the scanner's way. The templates come from the wire format ([`wire`]), never from
//! the renderer, so the check stays independent of the converter. Tests hold the two readers
//! to each other on every template and on random and damaged lines (`view::tests`).
//!
//! Why: the scanner spent ~2,400 instructions on a ~350-byte line of small chat records, most
//! of them per key, not per byte; its line reading was ~18 % of a dry run of small records.

use super::{
    BaseInstructionsView, EventMsgView, Kind, LineView, MessageView, PartView, PhaseView,
    ResponseItemView, RolloutItemView, SessionMetaView, Text,
};
use crate::model::rollout::wire::{event, item, key, line, tag};
use crate::model::rollout::SessionMeta;
use crate::model::scan::Scanner;

/// The depth of a payload's values (inside the line and the payload), as [`super::scan`] has it.
const PAYLOAD_DEPTH: usize = 2;

/// Reads `raw` (one line, no newline) when it has one of the shapes below; `None` otherwise.
pub(super) fn line(raw: &str) -> Option<LineView<'_>> {
    let mut s = Scanner::new(raw);
    let line = read(&mut s)?;
    s.end()?;
    Some(line)
}

/// Reads the first line of `text` (lines to the end of a file) when it has one of the shapes
/// below and ends with the line: a newline or the end of `text` right after its last `}`.
/// The line and its length, without the newline. As no shape holds a newline (in strings,
/// JSON escapes it; between tokens, the shapes have no whitespace), the line is the text up to
/// its first newline, and [`line`] reads it the same.
pub(super) fn first_line(text: &str) -> Option<(LineView<'_>, usize)> {
    let mut s = Scanner::new(text);
    let line = read(&mut s)?;
    let len = s.offset();
    matches!(s.peek(), None | Some(b'\n')).then_some((line, len))
}

/// A line of one of the shapes, up to its last `}`.
#[inline(always)]
fn read<'a>(s: &mut Scanner<'a>) -> Option<LineView<'a>> {
    s.first(line::field::TIMESTAMP)?;
    let timestamp = s.text()?;
    s.member(line::field::TYPE)?;
    let tag = s.plain()?;
    s.member(line::field::PAYLOAD)?;
    let item = match tag {
        tag::SESSION_META => RolloutItemView::SessionMeta(session_meta(s)?),
        tag::RESPONSE_ITEM => {
            let kind = s.item_type()?;
            RolloutItemView::ResponseItem(response_item(s, kind)?)
        }
        tag::EVENT_MSG => {
            let kind = s.item_type()?;
            RolloutItemView::EventMsg(event(s, kind)?)
        }
        _ => return None,
    };
    // The payload's end and the line's.
    s.eat(b'}')?;
    s.eat(b'}')?;
    Some(LineView {
        timestamp: Some(timestamp),
        item,
        payload_is_object: true,
    })
}

/// A session meta: the members of [`SessionMeta`]'s table in its order, each present unless
/// the writer may leave it out (codex-rs's fields as an importer writes them). The view keeps
/// `id`, the types of four more and `base_instructions`' text (`{"text":..}`); any other member,
/// one added to the table included, is read and skipped.
fn session_meta<'a>(s: &mut Scanner<'a>) -> Option<SessionMetaView<'a>> {
    let mut view = SessionMetaView {
        id: None,
        timestamp: Kind::Null,
        cwd: Kind::Null,
        originator: Kind::Null,
        cli_version: Kind::Null,
        base_instructions: BaseInstructionsView::Absent,
    };
    for (at, member) in SessionMeta::MEMBERS.iter().enumerate() {
        if at == 0 {
            s.first(member.key)?;
        } else if member.optional {
            if s.member(member.key).is_none() {
                continue;
            }
        } else {
            s.member(member.key)?;
        }
        match member.name {
            key::ID => view.id = Some(s.text()?),
            key::TIMESTAMP => view.timestamp = s.value(Scanner::kind)?,
            key::CWD => view.cwd = s.value(Scanner::kind)?,
            key::ORIGINATOR => view.originator = s.value(Scanner::kind)?,
            key::CLI_VERSION => view.cli_version = s.value(Scanner::kind)?,
            key::BASE_INSTRUCTIONS => {
                s.first(key::field::TEXT)?;
                let text = s.text()?;
                s.eat(b'}')?;
                view.base_instructions = BaseInstructionsView::Object { text: Some(text) };
            }
            _ => s.value(|s| s.skip(PAYLOAD_DEPTH))?,
        }
    }
    // A table whose first member is not `id` would leave it unread: the scanner reads it.
    view.id.as_ref()?;
    Some(view)
}

/// A response item's members after its `type`, in codex-rs's order of fields.
fn response_item<'a>(s: &mut Scanner<'a>, kind: &str) -> Option<ResponseItemView<'a>> {
    Some(match kind {
        // `{"type":"message","role":..,"content":[..](,"phase":..)}`
        item::MESSAGE => {
            s.member(key::field::ROLE)?;
            let role = s.text()?;
            s.member(key::field::CONTENT)?;
            let content = parts(s)?;
            let phase = match s.member(key::field::PHASE) {
                Some(()) => PhaseView::Text(s.text()?),
                None => PhaseView::Absent,
            };
            ResponseItemView::Message(MessageView {
                role: Some(role),
                content: Some(content),
                phase,
                id: None,
            })
        }
        // `{"type":"function_call","name":..,"arguments":..,"call_id":..}`
        item::FUNCTION_CALL => {
            s.member(key::field::NAME)?;
            s.value(|s| s.skip(PAYLOAD_DEPTH))?;
            s.member(key::field::ARGUMENTS)?;
            let arguments = s.value(Scanner::kind)?;
            s.member(key::field::CALL_ID)?;
            ResponseItemView::FunctionCall {
                call_id: Some(s.text()?),
                arguments,
            }
        }
        // `{"type":"custom_tool_call","call_id":..,"name":..,"input":..}`
        item::CUSTOM_TOOL_CALL => {
            s.member(key::field::CALL_ID)?;
            let call_id = s.text()?;
            s.member(key::field::NAME)?;
            s.value(|s| s.skip(PAYLOAD_DEPTH))?;
            s.member(key::field::INPUT)?;
            ResponseItemView::CustomToolCall {
                call_id: Some(call_id),
                input: s.value(Scanner::kind)?,
            }
        }
        // `{"type":"function_call_output","call_id":..,"output":..}`, and the same of a
        // custom tool.
        item::FUNCTION_CALL_OUTPUT | item::CUSTOM_TOOL_CALL_OUTPUT => {
            s.member(key::field::CALL_ID)?;
            let call_id = Some(s.text()?);
            s.member(key::field::OUTPUT)?;
            let output: Kind = s.value(Scanner::kind)?;
            if kind == item::FUNCTION_CALL_OUTPUT {
                ResponseItemView::FunctionCallOutput { call_id, output }
            } else {
                ResponseItemView::CustomToolCallOutput { call_id, output }
            }
        }
        _ => return None,
    })
}

/// A message event's members after its `type`: `,"message":..(,"phase":..)`.
fn event<'a>(s: &mut Scanner<'a>, kind: &str) -> Option<EventMsgView<'a>> {
    let user = match kind {
        event::USER_MESSAGE => true,
        event::AGENT_MESSAGE => false,
        _ => return None,
    };
    s.member(key::field::MESSAGE)?;
    let message = Some(s.text()?);
    // Read and checked as the scanner checks it, and not kept: the views of events hold none.
    if s.member(key::field::PHASE).is_some() {
        s.text()?;
    }
    Some(if user {
        EventMsgView::UserMessage { message }
    } else {
        EventMsgView::AgentMessage { message }
    })
}

/// Content: `[` then parts `{"type":..,"text":..}` separated by commas, then `]`.
fn parts<'a>(s: &mut Scanner<'a>) -> Option<Vec<PartView<'a>>> {
    let mut parts = Vec::new();
    s.eat(b'[')?;
    if s.eat(b']').is_some() {
        return Some(parts);
    }
    loop {
        s.first(key::field::TYPE)?;
        let kind = s.text()?;
        s.member(key::field::TEXT)?;
        let text = s.text()?;
        s.eat(b'}')?;
        parts.push(PartView {
            kind: Some(kind),
            text: Some(text),
        });
        if s.eat(b']').is_some() {
            return Some(parts);
        }
        s.eat(b',')?;
    }
}

impl<'a> Scanner<'a> {
    /// A tagged payload's start, `{"type":`, and its type, a plain string.
    #[inline(always)]
    fn item_type(&mut self) -> Option<&'a str> {
        self.first(key::field::TYPE)?;
        self.plain()
    }

    /// A value only type-checked or skipped, read by `read` as the scanner reads it, within
    /// its line. In a file ([`first_line`]) a newline ends the line, and an array or an object
    /// may hold one between its tokens: such a value is read with the text cut at the next
    /// newline, so that it is refused there, as the line cut there is, and no reading goes
    /// past its line (a line opening a value it never closes would otherwise have each of the
    /// lines after it read again, up to the nesting limit). Whitespace before the value is
    /// not the templates' (they are compact): refused. Any other value (a string, a number, a
    /// literal) holds no newline.
    #[inline(always)]
    fn value<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        match self.peek()? {
            b'[' | b'{' => self.within_line(read),
            b' ' | b'\t' | b'\n' | b'\r' => None,
            _ => read(self),
        }
    }

    /// A string value, unescaped.
    #[inline(always)]
    fn text(&mut self) -> Option<Text<'a>> {
        Some(Text(self.string()?.text()?))
    }
}
