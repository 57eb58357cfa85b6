//! Responses API request bodies, as `--format responses` writes them: one JSON line per
//! conversation, `{"custom_id","model"?,"instructions"?,"input":[...],"tools"?,
//! "parallel_tool_calls"?}`, optionally wrapped as a Batch API line. The history items are the
//! rollout's own [`ResponseItem`]s (Codex is the reference for them); what is new here is the
//! body around them, the tool definitions and, for the Lite wire, Codex's `additional_tools`
//! item.

use std::borrow::Cow;

use serde_json::Value;

use super::rollout::table::{wire_enum, wire_struct, JsonOut, WriteJson};
use super::rollout::ResponseItem;

/// Which output the last stage writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Codex rollout files under `sessions/`.
    #[default]
    Codex,
    /// Responses API request bodies under `responses/`.
    Responses(ResponsesOptions),
}

/// How Responses bodies are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResponsesOptions {
    pub wire: Wire,
    /// Wrap each body as a Batch API line (`--batch-envelope`).
    pub envelope: bool,
    /// zstd-compress each output file (`--compress`).
    pub compress: bool,
}

/// The two wire encodings Codex uses for the Responses API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    /// Base instructions in top-level `instructions`, tools in top-level `tools`.
    #[default]
    Normal,
    /// Responses Lite: no top-level instructions or tools; an `additional_tools` developer
    /// item, then the base instructions as a developer message, lead the input.
    Lite,
}

/// Folder of the Responses output inside `OUT`.
pub const RESPONSES_DIR: &str = "responses";
/// Item type of Codex's Lite tool carrier (the table of [`InputItem`] writes it).
pub const TYPE_ADDITIONAL_TOOLS: &str = "additional_tools";
/// Tool definition type written for every translated tool.
pub const TOOL_FUNCTION: &str = "function";
/// The Batch API line's method and endpoint.
pub const BATCH_METHOD: &str = "POST";
pub const BATCH_URL: &str = "/v1/responses";
/// Image `detail` values the Lite wire keeps (none: Lite takes no per-image detail).
pub const LITE_IMAGE_DETAILS: &[&str] = &[];

wire_struct! {
    /// A Responses function tool definition (flattened from Chat Completions' nested `function`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct ToolDefinition {
        pub kind: &'static str = "type",
        pub name: String = "name",
        pub description: Option<String> = "description" if "Option::is_none",
        pub parameters: Option<Value> = "parameters" if "Option::is_none",
        pub strict: Option<bool> = "strict" if "Option::is_none",
    }
}

/// A tool's JSON Schema, as the source gave it.
impl WriteJson for Value {
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        out.serde(self)
    }
}

wire_enum! {
    /// One input item of a body.
    #[derive(Debug, Clone, PartialEq)]
    pub enum InputItem<'a> tag "type" {
        /// Codex's Lite tool carrier: `{"type":"additional_tools","role":"developer","tools":[..]}`.
        AdditionalTools = "additional_tools" {
            role: &'static str = "role",
            tools: &'a [ToolDefinition] = "tools",
        };
        untagged Item(Cow<'a, ResponseItem>)
    }
}

wire_struct! {
    /// One request body: written in this field order, an absent field left out.
    #[derive(Debug, Clone, PartialEq)]
    pub struct RequestBody<'a> {
        /// The session id; left out inside a Batch API line, which carries it itself (the API
        /// takes no `custom_id` in a body).
        pub custom_id: Option<&'a str> = "custom_id" if "Option::is_none",
        pub model: Option<&'a str> = "model" if "Option::is_none",
        pub instructions: Option<&'a str> = "instructions" if "Option::is_none",
        pub input: Vec<InputItem<'a>> = "input",
        pub tools: Option<&'a [ToolDefinition]> = "tools" if "Option::is_none",
        pub parallel_tool_calls: Option<bool> = "parallel_tool_calls" if "Option::is_none",
    }
}

wire_struct! {
    /// A body as a Batch API input line.
    #[derive(Debug, Clone, PartialEq)]
    pub struct BatchLine<'a> {
        pub custom_id: &'a str = "custom_id",
        pub method: &'static str = "method",
        pub url: &'static str = "url",
        pub body: &'a RequestBody<'a> = "body",
    }
}

/// Compression suffixes an input key may end in, stripped before `.jsonl` is added.
const COMPRESSED: [&str; 3] = [".zst", ".zstd", ".gz"];

/// What a `..` of a key becomes in its output path: a name of its own (`..` percent-encoded),
/// so that `../a.jsonl` and `a.jsonl` stay two files, and neither leaves `responses/`.
pub const PARENT_IN_PATH: &str = "%2E%2E";

/// The output file of the input file keyed `key`: `responses/<key>` with its compression
/// suffix removed and `.jsonl` added unless it ends so (`a/x.jsonl.zst` -> `a/x.jsonl`,
/// `a/y.traj` -> `a/y.traj.jsonl`), then `.zst` when compressed.
///
/// Always below `responses/`: a key is a path relative to an INPUT argument's parent, which
/// can climb (`../a.jsonl` for `cd sub && convert ..`) or start at the root (`convert /`), and
/// the writer must never follow it out of the output folder. Such a key is mapped to normal
/// components only: each `..` becomes [`PARENT_IN_PATH`], a root or `.` is dropped. A key
/// made of names (and `.`) only keeps the path it always had.
pub fn output_path(key: &str, compress: bool) -> std::path::PathBuf {
    use std::path::{Component, Path, PathBuf};
    let name = output_name(key, compress);
    let relative = Path::new(&name);
    let plain = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if plain {
        return Path::new(RESPONSES_DIR).join(relative);
    }
    let mut path = PathBuf::from(RESPONSES_DIR);
    for component in relative.components() {
        match component {
            Component::Normal(name) => path.push(name),
            Component::ParentDir => path.push(PARENT_IN_PATH),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    path
}

/// The file name part of [`output_path`], as the key spells it.
fn output_name(key: &str, compress: bool) -> String {
    let mut name = key;
    for suffix in COMPRESSED {
        if let Some(stem) = name.strip_suffix(suffix) {
            name = stem;
            break;
        }
    }
    let mut name = name.to_string();
    if !name.ends_with(".jsonl") {
        name.push_str(".jsonl");
    }
    if compress {
        name.push_str(".zst");
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn output_paths_stay_below_responses_whatever_the_key() {
        let path = |key: &str| output_path(key, false).display().to_string();
        assert_eq!(path("a/x.jsonl.zst"), "responses/a/x.jsonl");
        assert_eq!(path("a/y.traj"), "responses/a/y.traj.jsonl");
        assert_eq!(
            output_path("x.json", true),
            Path::new("responses/x.json.jsonl.zst")
        );
        // `cd samples && convert .`: the path it always had.
        assert_eq!(path("./evals.jsonl"), "responses/./evals.jsonl");
        assert_eq!(path("../a.jsonl"), "responses/%2E%2E/a.jsonl");
        assert_eq!(
            path("../../b/../c.jsonl"),
            "responses/%2E%2E/%2E%2E/b/%2E%2E/c.jsonl"
        );
        assert_eq!(path("//etc/x.jsonl"), "responses/etc/x.jsonl");
        assert_eq!(path("/abs.jsonl"), "responses/abs.jsonl");
        for key in ["../a.jsonl", "/abs.jsonl", "a/../../../x", "..", "./../x"] {
            let out = output_path(key, false);
            assert!(out.starts_with(RESPONSES_DIR), "{key}: {out:?}");
            assert!(
                out.components()
                    .all(|c| matches!(c, std::path::Component::Normal(_))),
                "{key}: {out:?}"
            );
        }
    }
}
