//! Responses API request bodies, as `--format responses` writes them: one JSON line per
//! conversation, `{"custom_id","model"?,"instructions"?,"input":[...],"tools"?,
//! "parallel_tool_calls"?}`, optionally wrapped as a Batch API line. The history items are the
//! rollout's own [`ResponseItem`]s (Codex is the reference for them); what is new here is the
//! body around them, the tool definitions and, for the Lite wire, Codex's `additional_tools`
//! item.

use std::borrow::Cow;

use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;
use serde_json::Value;

use super::rollout::wire::{key, names};
use super::rollout::{optional, ResponseItem};

names! {
    /// The keys of a body and of a Batch API line, declared once: [`RequestBody`] and
    /// [`BatchLine`] serialise with them, and so does the hand writer of `convert::responses`
    /// (the items inside take the rollout's names).
    body {
        CUSTOM_ID = "custom_id",
        MODEL = "model",
        INSTRUCTIONS = "instructions",
        INPUT = "input",
        TOOLS = "tools",
        PARALLEL_TOOL_CALLS = "parallel_tool_calls",
        METHOD = "method",
        URL = "url",
        BODY = "body",
    }
}

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
/// Item type of Codex's Lite tool carrier.
pub const TYPE_ADDITIONAL_TOOLS: &str = "additional_tools";
/// Tool definition type written for every translated tool.
pub const TOOL_FUNCTION: &str = "function";
/// The Batch API line's method and endpoint.
pub const BATCH_METHOD: &str = "POST";
pub const BATCH_URL: &str = "/v1/responses";
/// Image `detail` values the Lite wire keeps (none: Lite takes no per-image detail).
pub const LITE_IMAGE_DETAILS: &[&str] = &[];

/// A Responses function tool definition (flattened from Chat Completions' nested `function`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolDefinition {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// One input item of a body.
#[derive(Debug, Clone, PartialEq)]
pub enum InputItem<'a> {
    /// Codex's Lite tool carrier: `{"type":"additional_tools","role":"developer","tools":[..]}`.
    AdditionalTools {
        kind: &'static str,
        role: &'static str,
        tools: &'a [ToolDefinition],
    },
    Item(Cow<'a, ResponseItem>),
}

/// One request body: serialised in this field order, an absent field left out.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestBody<'a> {
    /// The session id; left out inside a Batch API line, which carries it itself (the API
    /// takes no `custom_id` in a body).
    pub custom_id: Option<&'a str>,
    pub model: Option<&'a str>,
    pub instructions: Option<&'a str>,
    pub input: Vec<InputItem<'a>>,
    pub tools: Option<&'a [ToolDefinition]>,
    pub parallel_tool_calls: Option<bool>,
}

/// A body as a Batch API input line.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchLine<'a> {
    pub custom_id: &'a str,
    pub method: &'static str,
    pub url: &'static str,
    pub body: &'a RequestBody<'a>,
}

// Serialised by hand with the names of [`body`] (serde's derive takes only literal names):
// what the derive wrote, checked by the tests of `convert::responses`.

impl Serialize for InputItem<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            InputItem::AdditionalTools { kind, role, tools } => {
                let mut s = serializer.serialize_struct("AdditionalTools", 3)?;
                s.serialize_field(key::TYPE, kind)?;
                s.serialize_field(key::ROLE, role)?;
                s.serialize_field(body::TOOLS, tools)?;
                s.end()
            }
            InputItem::Item(item) => item.serialize(serializer),
        }
    }
}

impl Serialize for RequestBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("RequestBody", 6)?;
        optional(&mut s, body::CUSTOM_ID, self.custom_id)?;
        optional(&mut s, body::MODEL, self.model)?;
        optional(&mut s, body::INSTRUCTIONS, self.instructions)?;
        s.serialize_field(body::INPUT, &self.input)?;
        optional(&mut s, body::TOOLS, self.tools)?;
        optional(&mut s, body::PARALLEL_TOOL_CALLS, self.parallel_tool_calls)?;
        s.end()
    }
}

impl Serialize for BatchLine<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("BatchLine", 4)?;
        s.serialize_field(body::CUSTOM_ID, self.custom_id)?;
        s.serialize_field(body::METHOD, self.method)?;
        s.serialize_field(body::URL, self.url)?;
        s.serialize_field(body::BODY, self.body)?;
        s.end()
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
