//! A conversation as the input adapters understand it, before any rule is applied.
//!
//! Strings are copied out of the parsed JSON once, then moved; everything an input shape can
//! say about a message has a field here, and what has no field is listed in `ignored_fields`.

use super::rule::RuleRef;
use super::source_format::SourceFormat;

/// One input conversation: its messages in order and what the record says about itself.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    pub messages: Vec<Message>,
    pub meta: RecordMeta,
    /// Top-level record keys that carry nothing we convert (kept by name in the audit).
    pub ignored_fields: Vec<String>,
    /// The record's own tool definitions (Chat Completions `tools`, or legacy `functions`
    /// wrapped as `{"type":"function","function":..}`), as given. Codex rollouts keep no tools;
    /// the Responses output translates them. Still listed in `ignored_fields`, so the Codex
    /// audit is unchanged.
    pub tools: Vec<serde_json::Value>,
    /// What the source reader dropped or transformed by rule before any message existed
    /// (Claude Code `progress` lines, a ChatGPT export's inactive branches, thinking
    /// signatures): the converter turns each into an audit decision.
    pub source_notes: Vec<SourceNote>,
}

impl Transcript {
    /// Each source note as (rule id as the audit writes it, count), in order.
    pub fn note_counts(&self) -> Vec<(&str, u64)> {
        self.source_notes
            .iter()
            .map(|n| (n.rule.as_str(), n.count))
            .collect()
    }
}

/// One thing a source reader did by rule, for the audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceNote {
    /// The rule behind it (`policy.structural_line`, `builtin.…` in the audit).
    pub rule: RuleRef,
    /// What was dropped or transformed (`progress line`, `inactive branch node`).
    pub what: String,
    pub count: u64,
    /// Text bytes of the input this removed (0 for structural lines: they hold no message
    /// text). Counted into the record's `bytes_in` as well, so the accounting balances.
    pub bytes_dropped: usize,
}

/// Facts about the record as a whole.
#[derive(Debug, Clone, Default)]
pub struct RecordMeta {
    /// `id` or `custom_id` of the record, when it has one.
    pub id: Option<String>,
    /// Creation time in milliseconds since the Unix epoch, when the record says.
    pub created_ms: Option<i64>,
    /// When the source last changed the conversation (ms), when it says (a ChatGPT
    /// `update_time`): the time of this version ([`crate::model::version`]).
    pub updated_ms: Option<i64>,
    /// The canonical digest of the record's JSON value ([`crate::model::identity`]), which
    /// identifies a conversation without an id of its own.
    pub record_digest: Option<u128>,
    /// `model` of the record (or of a batch request body).
    pub model: Option<String>,
    /// The record says the conversation finished (a rule-file signal matched).
    pub finished: bool,
    /// Where the messages were found (the `messages_at` path that matched).
    pub messages_at: String,
    /// No configured path held messages: `messages_at` was found by shape.
    pub messages_by_shape: bool,
    /// Lone surrogate escapes or invalid UTF-8 sequences replaced by U+FFFD while reading.
    pub unicode_repairs: usize,
    /// The source format it was read from (`None` only for a transcript no reader made).
    pub format: Option<SourceFormat>,
    /// A title the source gives the conversation (Claude Code `summary`/`custom-title`/
    /// `ai-title`, ChatGPT `title`).
    pub title: Option<String>,
    /// Working folder and git branch of the session (Claude Code `cwd`, `gitBranch`).
    pub cwd: Option<String>,
    pub git_branch: Option<String>,
    /// The source's own id of the conversation (Claude Code `sessionId`, ChatGPT
    /// `conversation_id`), kept for the audit.
    pub source_id: Option<String>,
    /// The conversation this one was spawned by (a Claude Code subagent's parent session),
    /// linked in the audit.
    pub parent_source_id: Option<String>,
    /// Version of the tool that wrote the source (Claude Code `version`).
    pub source_version: Option<String>,
}

/// A message's role (after the rule file's role aliases): one the converter knows, or any
/// other the input wrote, which a policy decides (`policy.unknown_role`). Written and shown
/// by its name, as the input spelt it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    /// A tool's output (`tool_call_id`).
    Tool,
    /// A legacy function's output (`name` instead of a call id).
    Function,
    Other(String),
}

impl Role {
    /// The role named `name`, as an input writes it.
    pub fn named(name: String) -> Role {
        match Role::of_known(&name) {
            Some(role) => role,
            None => Role::Other(name),
        }
    }

    /// The role named `name`, copied only when it is none of the roles with a name of their
    /// own: [`Role::named`] of a borrowed name.
    pub fn of(name: &str) -> Role {
        Role::of_known(name).unwrap_or_else(|| Role::Other(name.to_string()))
    }

    fn of_known(name: &str) -> Option<Role> {
        Some(match name {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "function" => Role::Function,
            _ => return None,
        })
    }

    /// The role's name, as the input wrote it.
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Function => "function",
            Role::Other(name) => name,
        }
    }

    /// System or developer: instructions, which the rule files classify.
    pub fn is_instructions(&self) -> bool {
        match self {
            Role::System | Role::Developer => true,
            Role::User | Role::Assistant | Role::Tool | Role::Function | Role::Other(_) => false,
        }
    }
}

/// The role of a message no reader has filled in: no name, as a `String` role was.
impl Default for Role {
    fn default() -> Role {
        Role::Other(String::new())
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One input message, normalised across shapes.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// Position in the input message list (0-based), after flattening turns.
    pub index: usize,
    /// After the rule file's role aliases.
    pub role: Role,
    /// The role as the input wrote it, when a rule-file role alias renamed it (`human` for
    /// `user`): the converter records the renaming as a decision.
    pub aliased_from: Option<String>,
    pub name: Option<String>,
    pub content: Content,
    /// `assistant.tool_calls[]` (also `type:"custom"` calls).
    pub tool_calls: Vec<ToolCall>,
    /// Legacy `assistant.function_call` (no id in the input).
    pub function_call: Option<ToolCall>,
    /// `tool_call_id`, or every id of a `tool_call_ids` list.
    pub tool_call_ids: Vec<String>,
    pub refusal: Option<String>,
    /// Plain-text reasoning (`reasoning_content` or `reasoning`).
    pub reasoning: Option<String>,
    /// An explicit phase given by the input.
    pub phase: Option<String>,
    /// Keys of the message we do not convert.
    pub ignored_fields: Vec<String>,
    /// Fields we would convert but whose JSON type was wrong (`"name": 5`), so they were left
    /// out: the converter records each as a decision.
    pub dropped_fields: Vec<DroppedField>,
    /// When the source says the message was written (ms since the Unix epoch).
    pub timestamp_ms: Option<i64>,
    /// Reasoning with its provenance, in order, before the message's text and calls
    /// (Anthropic `thinking`, ChatGPT `thoughts`, Responses `reasoning` items).
    pub thinking: Vec<Thinking>,
    /// A tool message the source marks as failed (Anthropic `is_error`, ChatGPT
    /// `system_error`): Codex has no flag, so a rule writes it into the output text.
    pub tool_error: bool,
    /// This user message is a compaction summary (Claude Code `isCompactSummary`): what the
    /// model saw in place of the history before it.
    pub compaction: bool,
}

/// Reasoning as a source wrote it, with where it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Thinking {
    /// Summary texts (Responses `summary_text`, ChatGPT `thoughts[].summary`).
    pub summary: Vec<String>,
    /// Full reasoning texts (Anthropic `thinking`, Responses `reasoning_text`, ChatGPT
    /// `thoughts[].content`).
    pub content: Vec<String>,
    /// OpenAI `encrypted_content`, only from OpenAI Responses logs; never another vendor's
    /// signature.
    pub encrypted: Option<String>,
    pub origin: ReasoningOrigin,
}

/// Which vendor's reasoning a [`Thinking`] is: decides what may be kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReasoningOrigin {
    #[default]
    OpenAi,
    Anthropic,
    ChatGpt,
    /// Gemini CLI thought summaries.
    Gemini,
    /// `reasoning` parts of an OpenTelemetry GenAI trace (any provider's readable reasoning).
    OpenTelemetry,
}

/// A message or part field left out because it held the wrong JSON type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedField {
    /// Where it was in the message: `name`, `content[1].detail`.
    pub path: String,
    /// The JSON type it held: `number`, `boolean`, `list` or `object`.
    pub found: &'static str,
}

/// A message's `content`, keeping apart the four ways of saying "nothing".
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Content {
    #[default]
    Missing,
    Null,
    Text(String),
    Parts(Vec<Part>),
}

/// One content part, in input order.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    /// `image_url{url, detail}` or `input_image{image_url | file_id, detail}`.
    Image {
        url: Option<String>,
        file_id: Option<String>,
        detail: Option<String>,
    },
    /// `input_audio{data, format}` (chat) or `input_audio{audio_url | file_id}` (Responses).
    Audio {
        data: Option<String>,
        format: Option<String>,
        url: Option<String>,
        file_id: Option<String>,
    },
    /// `file{filename, file_id, file_data}`: no Codex equivalent.
    File {
        filename: Option<String>,
        file_id: Option<String>,
        data_len: usize,
    },
    Refusal(String),
    /// A part type we do not know; kept by its type name for the audit.
    Unknown {
        kind: String,
    },
}

/// A tool call as the input gave it. `arguments` is already a string (objects are serialised).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCall {
    pub id: Option<String>,
    pub name: String,
    pub arguments: String,
    /// The arguments were given as a JSON object and serialised by us.
    pub arguments_from_object: bool,
    /// The arguments were missing or null.
    pub arguments_missing: bool,
    /// A freeform (`type:"custom"`) tool call.
    pub custom: bool,
}

impl Content {
    /// The text parts of the content joined by newlines: borrowed when there is at most one
    /// (most messages), so that classifying a message copies nothing.
    pub fn joined_texts(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Content::Missing | Content::Null => std::borrow::Cow::Borrowed(""),
            Content::Text(text) => std::borrow::Cow::Borrowed(text),
            Content::Parts(_) => match self.texts().as_slice() {
                [] => std::borrow::Cow::Borrowed(""),
                [one] => std::borrow::Cow::Borrowed(one),
                many => std::borrow::Cow::Owned(many.join("\n")),
            },
        }
    }

    /// The text parts of the content, in order.
    pub fn texts(&self) -> Vec<&str> {
        match self {
            Content::Missing | Content::Null => Vec::new(),
            Content::Text(text) => vec![text.as_str()],
            Content::Parts(parts) => parts
                .iter()
                .filter_map(|part| match part {
                    Part::Text(text) => Some(text.as_str()),
                    Part::Image { .. }
                    | Part::Audio { .. }
                    | Part::File { .. }
                    | Part::Refusal(_)
                    | Part::Unknown { .. } => None,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Role;

    #[test]
    fn a_role_is_written_as_the_input_named_it() {
        for name in [
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
            "function",
            "wizard",
            "",
        ] {
            assert_eq!(Role::named(name.to_string()).to_string(), name);
        }
        assert_eq!(Role::named("tool".into()), Role::Tool);
        assert_eq!(Role::named("Tool".into()), Role::Other("Tool".into()));
        assert_eq!(Role::default().as_str(), "");
    }
}
