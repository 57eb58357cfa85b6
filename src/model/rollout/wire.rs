//! The names of the rollout format, declared once: the keys of a line, its tags, the keys of
//! the payloads and items, and the types of items, content parts and events.
//!
//! The readers take their names from here: the views and the scanner that read lines back
//! ([`super::view`]), the checks of `validate`, the line heads of `convert::render`. The
//! writer types are declared in their tables ([`super::table`]) with the same literals, and
//! the round-trip tests of [`super::view`] read every shape they write back with these names.
//! (The serde-derived reader kept as the views' reference in the tests spells the names again
//! on purpose, as an independent witness.)
//!
//! Each name is also given as a JSON object member's start (`field::NAME` is `,"name":`), so
//! the byte templates compare a key in one piece: no name needs escaping.

/// Declares a module of names: each a `&str` constant, and the same in `field` as a member's
/// start.
macro_rules! names {
    ($(#[$doc:meta])* $module:ident { $($(#[$meta:meta])* $name:ident = $text:literal,)+ }) => {
        $(#[$doc])*
        // A vocabulary: each name in both spellings, whichever a reader needs.
        #[allow(dead_code)]
        pub(crate) mod $module {
            $($(#[$meta])* pub(crate) const $name: &str = $text;)+

            /// The same names as the start of a JSON object member after another: `,"name":`
            /// (the first member of an object takes `{` for the comma).
            pub(crate) mod field {
                $(pub(crate) const $name: &str = concat!(",\"", $text, "\":");)+
            }
        }
    };
}

names! {
    /// The keys of a line: `{"timestamp":..,"type":..,"payload":..}`.
    line {
        TIMESTAMP = "timestamp",
        TYPE = "type",
        PAYLOAD = "payload",
    }
}

names! {
    /// A line's `type`: what its payload is (`RolloutItem` in codex-rs).
    tag {
        SESSION_META = "session_meta",
        RESPONSE_ITEM = "response_item",
        EVENT_MSG = "event_msg",
        COMPACTED = "compacted",
        TURN_CONTEXT = "turn_context",
        /// Written by Codex 0.169 when it runs a turn; an importer does not write it.
        WORLD_STATE = "world_state",
        /// Written by Codex 0.169 when it runs a turn; an importer does not write it.
        TOKEN_USAGE_RECORD = "token_usage_record",
    }
}

names! {
    /// The keys inside a payload: of the session meta, of response items and their content
    /// parts, of events and of a `compacted` line.
    key {
        /// The payload's own type (response items, content parts, events).
        TYPE = "type",
        ID = "id",
        TIMESTAMP = "timestamp",
        CWD = "cwd",
        ORIGINATOR = "originator",
        CLI_VERSION = "cli_version",
        SOURCE = "source",
        MODEL_PROVIDER = "model_provider",
        BASE_INSTRUCTIONS = "base_instructions",
        GIT = "git",
        COMMIT_HASH = "commit_hash",
        BRANCH = "branch",
        REPOSITORY_URL = "repository_url",
        TEXT = "text",
        ROLE = "role",
        CONTENT = "content",
        PHASE = "phase",
        SUMMARY = "summary",
        ENCRYPTED_CONTENT = "encrypted_content",
        NAME = "name",
        ARGUMENTS = "arguments",
        CALL_ID = "call_id",
        INPUT = "input",
        OUTPUT = "output",
        IMAGE_URL = "image_url",
        FILE_ID = "file_id",
        DETAIL = "detail",
        AUDIO_URL = "audio_url",
        MESSAGE = "message",
        IMAGES = "images",
        REPLACEMENT_HISTORY = "replacement_history",
    }
}

names! {
    /// A response item's `type` (`ResponseItem` in codex-rs).
    item {
        MESSAGE = "message",
        REASONING = "reasoning",
        FUNCTION_CALL = "function_call",
        FUNCTION_CALL_OUTPUT = "function_call_output",
        CUSTOM_TOOL_CALL = "custom_tool_call",
        CUSTOM_TOOL_CALL_OUTPUT = "custom_tool_call_output",
        LOCAL_SHELL_CALL = "local_shell_call",
        TOOL_SEARCH_CALL = "tool_search_call",
        TOOL_SEARCH_OUTPUT = "tool_search_output",
        WEB_SEARCH_CALL = "web_search_call",
        IMAGE_GENERATION_CALL = "image_generation_call",
        COMPACTION = "compaction",
        /// The older name of `compaction`, still read.
        COMPACTION_SUMMARY = "compaction_summary",
        /// A legacy type Codex 0.169 still parses and leaves out of the model's history.
        GHOST_SNAPSHOT = "ghost_snapshot",
    }
}

names! {
    /// A content part's `type`: of messages and tool outputs, and of reasoning.
    content {
        INPUT_TEXT = "input_text",
        INPUT_IMAGE = "input_image",
        INPUT_AUDIO = "input_audio",
        OUTPUT_TEXT = "output_text",
        SUMMARY_TEXT = "summary_text",
        REASONING_TEXT = "reasoning_text",
        /// A reasoning part as Codex also writes it.
        TEXT = "text",
    }
}

names! {
    /// An `event_msg` payload's `type`.
    event {
        USER_MESSAGE = "user_message",
        AGENT_MESSAGE = "agent_message",
        /// Codex starts each turn it runs with one.
        TASK_STARTED = "task_started",
    }
}

names! {
    /// A message's `role`.
    role {
        USER = "user",
        ASSISTANT = "assistant",
        DEVELOPER = "developer",
        SYSTEM = "system",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_the_name_as_a_json_key_after_a_comma() {
        for (name, field) in [
            (key::CALL_ID, key::field::CALL_ID),
            (tag::SESSION_META, tag::field::SESSION_META),
            (
                item::FUNCTION_CALL_OUTPUT,
                item::field::FUNCTION_CALL_OUTPUT,
            ),
            (content::INPUT_TEXT, content::field::INPUT_TEXT),
            (line::PAYLOAD, line::field::PAYLOAD),
        ] {
            let json = serde_json::to_string(name).unwrap();
            assert_eq!(field, format!(",{json}:"));
        }
    }
}
