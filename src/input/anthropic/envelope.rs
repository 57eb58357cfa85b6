//! The envelopes of an Anthropic Messages log, typed: a request body, a message (a turn the
//! request resends, or the response), a Message Batches line and a streamed event. Content
//! blocks and tool definitions stay JSON for the shared block mapper; a field of another type
//! is as if absent, as logs of different SDK versions write them.

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::input::fields::{lenient_struct, object, Loose};

/// A Messages request body: the fields the conversation is built from, and the rest by name,
/// which the audit names as ignored (`model` is read, so never ignored).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Request {
    pub(super) messages: Loose<Vec<Value>>,
    /// `null` is no system prompt.
    pub(super) system: Option<Value>,
    pub(super) tools: Loose<Vec<Value>>,
    pub(super) model: Loose<String>,
    #[serde(flatten)]
    pub(super) rest: Map<String, Value>,
}

/// A response object: a message, or an API error in its place.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Response {
    #[serde(rename = "type")]
    pub(super) kind: Loose<String>,
    pub(super) model: Loose<String>,
    pub(super) id: Loose<String>,
    #[serde(deserialize_with = "lenient_struct")]
    pub(super) error: Option<ApiError>,
    role: Loose<String>,
    content: Option<Value>,
    stop_reason: Loose<String>,
}

impl Response {
    /// A message object (not an error, not another API's response).
    pub(super) fn is_message(&self) -> bool {
        self.kind.0.as_deref() == Some("message")
            && self.role.0.as_deref() == Some("assistant")
            && matches!(self.content, Some(Value::Array(_)))
    }

    /// The message as the conversation's last turn.
    pub(super) fn into_turn(self) -> Turn {
        Turn {
            role: self.role,
            content: self.content,
            stop_reason: self.stop_reason,
        }
    }
}

/// An API error's body.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct ApiError {
    #[serde(rename = "type")]
    pub(super) kind: Loose<String>,
}

/// One message of the conversation: its content blocks stay JSON for the block mapper.
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub(super) struct Turn {
    pub(super) role: Loose<String>,
    pub(super) content: Option<Value>,
    /// Read on the response only: `end_turn` is a finished conversation.
    pub(super) stop_reason: Loose<String>,
}

/// A Message Batches line: a request (`params`) or its result.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct BatchLine {
    pub(super) custom_id: Loose<String>,
    pub(super) params: Option<Value>,
    /// Present, even `null`: a request line that holds its result is not joined to another.
    pub(super) result: Loose<Value>,
}

impl BatchLine {
    pub(super) fn id(&self) -> String {
        self.custom_id.0.clone().unwrap_or_default()
    }
}

/// What a `{request, response}` pair says beside its bodies: when it was logged.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Logged {
    timestamp: Loose<Value>,
    created_at: Loose<Value>,
}

impl Logged {
    /// The time the pair was logged: its `timestamp`, else (when it has none) `created_at`.
    pub(super) fn time(self) -> Option<String> {
        match self.timestamp.0.or(self.created_at.0) {
            Some(Value::String(time)) => Some(time),
            _ => None,
        }
    }
}

/// A block of a `system` list: its text, or its type to say what was not read.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct SystemBlock {
    pub(super) text: Loose<String>,
    #[serde(rename = "type")]
    pub(super) kind: Loose<String>,
}

/// A tool definition's fields the Responses function tool takes (present, `null` too).
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct ToolDefinition {
    pub(super) name: Loose<Value>,
    pub(super) description: Loose<Value>,
    pub(super) input_schema: Loose<Value>,
}

/// One streamed event of a Messages response.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Event {
    #[serde(rename = "type")]
    pub(super) kind: Loose<String>,
    /// `message_start`'s message, when it is an object.
    #[serde(deserialize_with = "object")]
    pub(super) message: Option<Map<String, Value>>,
    pub(super) index: Loose<u64>,
    pub(super) content_block: Option<Value>,
    /// A `content_block_delta`'s [`Delta`], or a `message_delta`'s fields.
    pub(super) delta: Option<Value>,
}

/// A content block's delta: the piece of text, thinking, signature or tool input it adds.
#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Delta {
    #[serde(rename = "type")]
    pub(super) kind: Loose<String>,
    pub(super) text: Loose<String>,
    pub(super) thinking: Loose<String>,
    pub(super) signature: Loose<String>,
    pub(super) partial_json: Loose<String>,
}
