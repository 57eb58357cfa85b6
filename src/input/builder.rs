//! [`TranscriptBuilder`]: the one way a reader emits a conversation.
//!
//! A reader walks its source and says what it found, in order: a message, a text, a tool call,
//! a tool output (failed or not), some reasoning, a note of what it dropped by rule, and the
//! record's facts. The builder keeps the conversation's shape the same for every format:
//! reasoning waits for the message it explains, parallel calls join one assistant message,
//! messages are numbered in order, and a conversation with no message is refused the same way
//! everywhere. No reader builds another format's JSON to be read again.
//!
//! What a source writes as a Chat Completions message (a chat record, a logged request's
//! `messages`, an OpenAI-style dataset row) is read by the chat reader's own message reader
//! ([`super::messages::read_message_list`]) and handed over as [`Message`]s; everything else is
//! built here field by field.

use serde_json::Value;

use super::blocks::Notes;
use super::format::SourceFormat;
use super::InputError;
use crate::model::transcript::{
    Content, Message, RecordMeta, Role, SourceNote, Thinking, ToolCall, Transcript,
};
use crate::rules::RuleRef;

/// A conversation being read: messages in order, the reasoning waiting for the next one, the
/// notes, the record's facts.
#[derive(Debug, Default)]
pub(crate) struct TranscriptBuilder {
    messages: Vec<Message>,
    /// Reasoning read before the message it belongs to: attached to the next message pushed.
    pending_thinking: Vec<Thinking>,
    /// The last message, when it is an assistant message holding only calls: a call read next
    /// (with no reasoning between) joins it, as parallel calls of one turn.
    open_calls: Option<usize>,
    notes: Notes,
    /// Facts about the record as a whole; the reader fills what its source says.
    pub meta: RecordMeta,
    tools: Vec<Value>,
    ignored: Vec<String>,
}

impl TranscriptBuilder {
    /// A conversation of `format` whose messages the source keeps at `messages_at` (the path
    /// the audit names, and the one an empty conversation is refused at).
    pub(crate) fn new(format: SourceFormat, messages_at: impl Into<String>) -> TranscriptBuilder {
        TranscriptBuilder {
            meta: RecordMeta {
                format: Some(format),
                messages_at: messages_at.into(),
                ..RecordMeta::default()
            },
            ..TranscriptBuilder::default()
        }
    }

    /// A conversation whose record facts the reader has read already (`meta` names the format
    /// and where the messages are).
    pub(crate) fn with_meta(meta: RecordMeta) -> TranscriptBuilder {
        TranscriptBuilder {
            meta,
            ..TranscriptBuilder::default()
        }
    }

    /// Appends `message`, with the reasoning read before it; returns its position.
    pub(crate) fn message(&mut self, mut message: Message) -> usize {
        let at = self.messages.len();
        message.thinking.append(&mut self.pending_thinking);
        self.messages.push(message);
        self.open_calls = None;
        at
    }

    /// Appends each of `messages` in order. The first messages, with no reasoning waiting, are
    /// taken whole: a `Vec`'s buffer is kept, not copied message by message into a growing
    /// one (two allocations and ~6.5 KB moved per small chat record).
    pub(crate) fn messages(&mut self, messages: impl IntoIterator<Item = Message>) {
        if self.messages.is_empty() && self.pending_thinking.is_empty() {
            self.messages = messages.into_iter().collect();
            if !self.messages.is_empty() {
                self.open_calls = None;
            }
            return;
        }
        for message in messages {
            self.message(message);
        }
    }

    /// Appends a message of `role` whose content is `text`.
    pub(crate) fn text(&mut self, role: Role, text: String) -> usize {
        self.message(Message {
            role,
            content: Content::Text(text),
            ..Message::default()
        })
    }

    /// Appends a tool call: to the assistant message of the calls just before it, or to a new
    /// one (`content: null`) when something else came between.
    pub(crate) fn call(&mut self, call: ToolCall) {
        if self.pending_thinking.is_empty() {
            if let Some(open) = self.open_calls.and_then(|at| self.messages.get_mut(at)) {
                open.tool_calls.push(call);
                return;
            }
        }
        let at = self.message(Message {
            role: Role::Assistant,
            content: Content::Null,
            tool_calls: vec![call],
            ..Message::default()
        });
        self.open_calls = Some(at);
    }

    /// Appends the output of the call `call_id` (a tool message); `failed` when the source
    /// marks the call as failed.
    pub(crate) fn output(
        &mut self,
        call_id: Option<String>,
        content: Content,
        failed: bool,
    ) -> usize {
        self.output_message(call_id, content, Vec::new(), failed)
    }

    /// [`TranscriptBuilder::output`] whose content parts dropped fields of the wrong type.
    pub(crate) fn output_message(
        &mut self,
        call_id: Option<String>,
        content: Content,
        dropped_fields: Vec<crate::model::transcript::DroppedField>,
        failed: bool,
    ) -> usize {
        self.message(Message {
            role: Role::Tool,
            content,
            tool_call_ids: call_id.into_iter().collect(),
            dropped_fields,
            tool_error: failed,
            ..Message::default()
        })
    }

    /// Reasoning read before the message it explains.
    pub(crate) fn thinking(&mut self, thinking: Thinking) {
        self.pending_thinking.push(thinking);
    }

    /// What the reader dropped or transformed by `rule`: `count` of `what`, holding `bytes`
    /// of text (0 for structure).
    pub(crate) fn note(&mut self, rule: impl Into<RuleRef>, what: &str, count: u64, bytes: usize) {
        self.notes.add(rule, what, count, bytes);
    }

    /// Adds each of `notes`, in order.
    pub(crate) fn notes(&mut self, notes: impl IntoIterator<Item = SourceNote>) {
        self.notes.merge(notes);
    }

    /// The record's own tool definitions (Chat Completions shape).
    pub(crate) fn tools(&mut self, tools: Vec<Value>) {
        self.tools = tools;
    }

    /// One more of the record's tool definitions.
    pub(crate) fn tool(&mut self, tool: Value) {
        self.tools.push(tool);
    }

    /// A field of the record that carries nothing we convert (named in the audit).
    pub(crate) fn ignore(&mut self, field: impl Into<String>) {
        self.ignored.push(field.into());
    }

    /// The number of messages so far.
    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    /// The conversation, its messages numbered in order; refused when it has no message.
    /// Reasoning with nothing after it is carried by an empty assistant message, for the
    /// converter's `policy.unpaired_reasoning` to decide.
    pub(crate) fn finish(mut self) -> Result<Transcript, InputError> {
        if !self.pending_thinking.is_empty() {
            self.message(Message {
                role: Role::Assistant,
                content: Content::Null,
                ..Message::default()
            });
        }
        if self.messages.is_empty() {
            return Err(InputError::EmptyMessages(self.meta.messages_at));
        }
        let TranscriptBuilder {
            mut messages,
            pending_thinking: _,
            open_calls: _,
            notes,
            meta,
            tools,
            ignored,
        } = self;
        for (index, message) in messages.iter_mut().enumerate() {
            message.index = index;
        }
        Ok(Transcript {
            messages,
            meta,
            ignored_fields: ignored,
            tools,
            source_notes: notes.into_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Readers hand messages over unnumbered (or numbered in their own lists): the builder
    /// alone gives each its position in the conversation.
    #[test]
    fn the_builder_numbers_the_messages_whatever_they_carry() {
        let mut built = TranscriptBuilder::new(SourceFormat::named("test"), "messages");
        built.messages([
            Message {
                index: 7,
                ..Message::default()
            },
            Message {
                index: 7,
                ..Message::default()
            },
        ]);
        built.text(Role::User, "hi".into());
        built.thinking(Thinking::default());
        let transcript = built.finish().expect("three messages and a reasoning");
        let indexes: Vec<usize> = transcript.messages.iter().map(|m| m.index).collect();
        assert_eq!(indexes, [0, 1, 2, 3]);
    }
}
