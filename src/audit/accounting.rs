//! Text accounting (invariant 12): text bytes in = text bytes out + dropped - added by rule.
//!
//! The input side is measured on the transcript, the output side on the written items, and
//! the difference must be explained by the decisions; the converter's own bookkeeping is not
//! trusted to add up.

use crate::audit::Decision;
use crate::model::conversation::{OutItem, OutPayload};
use crate::model::rollout::{ContentItem, ResponseItem, ToolOutput};
use crate::model::transcript::{Content, Message, Part, Transcript};

crate::model::rollout::table::wire_struct! {
    /// The four totals of one conversation.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Account {
        pub bytes_in: usize = "bytes_in",
        pub bytes_out: usize = "bytes_out",
        pub bytes_dropped: usize = "bytes_dropped",
        pub bytes_added: usize = "bytes_added",
    }
}

impl Account {
    pub fn balanced(&self) -> bool {
        self.bytes_in + self.bytes_added == self.bytes_out + self.bytes_dropped
    }
}

/// Text bytes of one input message: content text and refusal parts, `refusal`, reasoning
/// (plain and with provenance: summaries and contents), call arguments, and the texts of an
/// item read from a Codex rollout.
pub fn input_message_bytes(m: &Message) -> usize {
    let content = match &m.content {
        Content::Missing | Content::Null => 0,
        Content::Text(t) => t.len(),
        Content::Parts(parts) => parts
            .iter()
            .map(|p| match p {
                Part::Text(t) | Part::Refusal(t) => t.len(),
                Part::Image { .. }
                | Part::Audio { .. }
                | Part::File { .. }
                | Part::Unknown { .. } => 0,
            })
            .sum(),
    };
    let calls: usize = m
        .function_call
        .iter()
        .chain(m.tool_calls.iter())
        .map(|c| c.arguments.len())
        .sum();
    let thinking: usize = m
        .thinking
        .iter()
        .flat_map(|t| t.summary.iter().chain(t.content.iter()))
        .map(String::len)
        .sum();
    content
        + thinking
        + m.native.as_ref().map_or(0, |native| native.text_bytes())
        + m.refusal.as_ref().map_or(0, String::len)
        + m.reasoning.as_ref().map_or(0, String::len)
        + calls
}

fn content_bytes(items: &[ContentItem]) -> usize {
    items
        .iter()
        .filter_map(ContentItem::text)
        .map(str::len)
        .sum()
}

/// Text bytes of one written item.
pub fn output_item_bytes(item: &OutItem) -> usize {
    match &item.payload {
        // A replacing line repeats the summary in its replacement history: counted once.
        OutPayload::Compacted(message) | OutPayload::CompactedReplacing(message) => message.len(),
        OutPayload::CompactedNative(native) => native.text_bytes(),
        OutPayload::Item(response) => match response {
            ResponseItem::Message { content, .. } => content_bytes(content),
            ResponseItem::Reasoning {
                summary, content, ..
            } => {
                summary.iter().map(|s| s.text.len()).sum::<usize>()
                    + content
                        .as_ref()
                        .map_or(0, |c| c.iter().map(|r| r.text.len()).sum())
            }
            ResponseItem::FunctionCall { arguments, .. } => arguments.len(),
            ResponseItem::CustomToolCall { input, .. } => input.len(),
            ResponseItem::FunctionCallOutput { output, .. }
            | ResponseItem::CustomToolCallOutput { output, .. } => match output {
                ToolOutput::Text(t) => t.len(),
                ToolOutput::Items(items) => content_bytes(items),
            },
            ResponseItem::Native(native) => native.text_bytes(),
        },
    }
}

/// The account of a conversation: `bytes_in` measured on its transcript, the output side on
/// the base instructions and items written, drops and additions from its decisions.
pub fn account(
    bytes_in: usize,
    base_instructions: Option<&str>,
    items: &[OutItem],
    decisions: &[Decision],
) -> Account {
    Account {
        bytes_in,
        bytes_out: base_instructions.map_or(0, str::len)
            + items.iter().map(output_item_bytes).sum::<usize>(),
        bytes_dropped: decisions.iter().map(|d| d.bytes_dropped).sum(),
        bytes_added: decisions.iter().map(|d| d.bytes_added).sum(),
    }
}

/// Text bytes of a whole transcript.
pub fn transcript_bytes(transcript: &Transcript) -> usize {
    let notes: usize = transcript
        .source_notes
        .iter()
        .map(|n| n.bytes_dropped)
        .sum();
    transcript
        .messages
        .iter()
        .map(input_message_bytes)
        .sum::<usize>()
        + notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unbalanced_account_is_not_balanced() {
        let lost = Account {
            bytes_in: 10,
            bytes_out: 9,
            bytes_dropped: 0,
            bytes_added: 0,
        };
        assert!(!lost.balanced());
        // Added by a rule but never written: as wrong as text lost.
        let phantom = Account {
            bytes_in: 10,
            bytes_out: 10,
            bytes_dropped: 0,
            bytes_added: 4,
        };
        assert!(!phantom.balanced());
        let explained = Account {
            bytes_in: 10,
            bytes_out: 12,
            bytes_dropped: 3,
            bytes_added: 5,
        };
        assert!(explained.balanced());
    }
}
