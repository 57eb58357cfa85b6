//! The version of a transcript ([`crate::model::version`]): its source's time, its message
//! count, and the chain of its messages' digests. Taken of what the source says, before any
//! rule applies, so that a change of rules is not a change of version.

use crate::model::hash::Xxh3;
use crate::model::transcript::{Content, Message, Part, ToolCall, Transcript};
use crate::model::version::{InHand, Version};

/// The version of `transcript`: the source's time of it (its `updated_ms`, else its latest
/// message's time), and each message's digest chained to the ones before.
pub(crate) fn in_hand(transcript: &Transcript) -> InHand {
    let mut chain = Vec::with_capacity(transcript.messages.len());
    let mut previous = 0u128;
    for message in &transcript.messages {
        let mut hasher = Xxh3::new();
        hasher.update(&previous.to_le_bytes());
        feed_message(&mut hasher, message);
        previous = hasher.digest128();
        chain.push(previous);
    }
    let time = transcript.meta.updated_ms.or_else(|| {
        transcript
            .messages
            .iter()
            .filter_map(|m| m.timestamp_ms)
            .max()
    });
    InHand {
        version: Version {
            time_ms: time,
            messages: chain.len() as u64,
            content: previous,
        },
        chain,
    }
}

/// Each field with a tag and its length, so that no two messages feed the same bytes.
struct Feed<'a>(&'a mut Xxh3);

impl Feed<'_> {
    fn text(&mut self, tag: u8, text: &str) {
        self.0.update(&[tag]);
        self.0.update(&(text.len() as u64).to_le_bytes());
        self.0.update(text.as_bytes());
    }

    fn maybe(&mut self, tag: u8, text: Option<&str>) {
        match text {
            Some(text) => self.text(tag, text),
            None => self.0.update(&[tag, 0xff]),
        }
    }

    fn number(&mut self, tag: u8, n: u64) {
        self.0.update(&[tag]);
        self.0.update(&n.to_le_bytes());
    }

    fn call(&mut self, tag: u8, call: &ToolCall) {
        self.maybe(tag, call.id.as_deref());
        self.text(b'n', &call.name);
        self.text(b'a', &call.arguments);
        self.number(b'c', u64::from(call.custom));
    }
}

fn feed_message(hasher: &mut Xxh3, message: &Message) {
    let mut feed = Feed(hasher);
    // The role as the source wrote it: a rule file's role alias is not a change of content.
    let role = message
        .aliased_from
        .as_deref()
        .unwrap_or_else(|| message.role.as_str());
    feed.text(b'r', role);
    feed.maybe(b'N', message.name.as_deref());
    match &message.content {
        Content::Missing => feed.number(b'C', 0),
        Content::Null => feed.number(b'C', 1),
        Content::Text(text) => feed.text(b'T', text),
        Content::Parts(parts) => {
            feed.number(b'P', parts.len() as u64);
            for part in parts {
                feed_part(&mut feed, part);
            }
        }
    }
    feed.number(b'k', message.tool_calls.len() as u64);
    for call in &message.tool_calls {
        feed.call(b'K', call);
    }
    if let Some(call) = &message.function_call {
        feed.call(b'F', call);
    }
    feed.number(b'i', message.tool_call_ids.len() as u64);
    for id in &message.tool_call_ids {
        feed.text(b'I', id);
    }
    feed.maybe(b'R', message.refusal.as_deref());
    feed.maybe(b'Z', message.reasoning.as_deref());
    feed.maybe(b'H', message.phase.as_deref());
    feed.number(b'h', message.thinking.len() as u64);
    for thinking in &message.thinking {
        feed.number(b's', thinking.summary.len() as u64);
        for text in &thinking.summary {
            feed.text(b'S', text);
        }
        feed.number(b'x', thinking.content.len() as u64);
        for text in &thinking.content {
            feed.text(b'X', text);
        }
        feed.maybe(b'E', thinking.encrypted.as_deref());
    }
    feed.number(b'e', u64::from(message.tool_error));
    feed.number(b'm', u64::from(message.compaction));
    feed.maybe(b't', message.timestamp_ms.map(|t| t.to_string()).as_deref());
}

fn feed_part(feed: &mut Feed<'_>, part: &Part) {
    match part {
        Part::Text(text) => feed.text(b'1', text),
        Part::Image {
            url,
            file_id,
            detail,
        } => {
            feed.maybe(b'2', url.as_deref());
            feed.maybe(b'2', file_id.as_deref());
            feed.maybe(b'2', detail.as_deref());
        }
        Part::Audio {
            data,
            format,
            url,
            file_id,
        } => {
            feed.maybe(b'3', data.as_deref());
            feed.maybe(b'3', format.as_deref());
            feed.maybe(b'3', url.as_deref());
            feed.maybe(b'3', file_id.as_deref());
        }
        Part::File {
            filename,
            file_id,
            data_len,
        } => {
            feed.maybe(b'4', filename.as_deref());
            feed.maybe(b'4', file_id.as_deref());
            feed.number(b'4', *data_len as u64);
        }
        Part::Refusal(text) => feed.text(b'5', text),
        Part::Unknown { kind } => feed.text(b'6', kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::transcript::Role;
    use crate::model::version::Standing;

    fn message(role: Role, text: &str) -> Message {
        Message {
            role,
            content: Content::Text(text.to_string()),
            ..Message::default()
        }
    }

    #[test]
    fn a_longer_transcript_extends_its_prefix_and_an_edit_does_not() {
        let short = Transcript {
            messages: vec![message(Role::User, "hi"), message(Role::Assistant, "hello")],
            ..Transcript::default()
        };
        let mut long = short.clone();
        long.messages.push(message(Role::User, "more"));
        let mut edited = short.clone();
        edited.messages[1] = message(Role::Assistant, "hullo");
        let (short, long, edited) = (in_hand(&short), in_hand(&long), in_hand(&edited));
        assert!(long.extends(&short.version));
        assert!(!short.extends(&long.version));
        assert_eq!(long.stands_to(&short.version), Standing::Newer);
        assert_eq!(short.stands_to(&long.version), Standing::Older);
        assert_eq!(edited.stands_to(&short.version), Standing::Unrelated);
        assert_eq!(short.chain[0], edited.chain[0]);
        assert_ne!(short.version.content, edited.version.content);
    }
}
