//! ChatGPT data exports: `conversations.json` (an array: the splitter makes one record per
//! conversation), `conversations-NNN.json`, or a single conversation object; in an export zip,
//! its conversations files as lines ([`FormatReader::archive_lines`]: export.rs).
//!
//! In: one conversation object. Out: the [`Transcript`] of its **active path**, walked from
//! `current_node` to the root through `parent` (a visited set guards against cycles), then
//! reversed. What the path leaves out or a rule drops is a [`SourceNote`]: inactive branches
//! (`policy.inactive_branch`), hidden and empty system nodes and `reasoning_recap` markers
//! (`policy.hidden_node`), memory (`policy.memory`), citation markers
//! (`policy.citation_markers`), images not in the export (`policy.unresolved_image`).
//!
//! - An assistant node whose `recipient` is not `all` is a call to that tool, with call id
//!   `call_<node id>` (node ids are unique and stable, so re-imports give the same ids): JSON
//!   text is a function call, anything else (code) a custom tool call keeping the text as is.
//! - The `tool` nodes after it are its output (several are one output, parts in order);
//!   `system_error` marks it failed (`policy.tool_error`). A tool node with no call before it:
//!   `policy.tool_without_call` (a synthesised call named after the tool, or an orphan output).
//! - `thoughts` are the summaries ChatGPT showed: every non-empty `summary` and `content` is a
//!   summary text of reasoning (origin ChatGPT) on the next assistant message.
//! - `user_editable_context` (custom instructions) and, if kept, `model_editable_context`
//!   (memory) become system messages named `chatgpt:<content type>`, which the rule files
//!   classify (default: developer context).
//! - `image_asset_pointer` parts are resolved from files beside the export (or inside its zip,
//!   given by the source layer) to `data:` URLs: the file the pointer names exactly, listed once
//!   per file, read only inside the export folder and within 20 MiB ([`super::inside`]).
//!
//! Fails (refuses the record) when it is not an object with a `mapping` object.

mod export;
mod files;
mod walk;

use std::collections::{BTreeMap, HashSet};

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::blocks::add_note;
use super::builder::TranscriptBuilder;
use super::fields::{lenient, lenient_struct, object, present};
use super::format::{
    FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceConversation, SourceFormat,
};
use super::InputError;
use crate::model::transcript::{RecordMeta, Transcript};
use crate::rules::{DropOrQuarantine, PolicyId, RuleSet};
use crate::source::open::ArchiveLines;
pub use files::ImageFiles;
use walk::{node_text_bytes, Walk};

pub struct ChatGptReader;

/// The name the audit writes.
impl SourceFormat {
    /// ChatGPT data exports (conversations.json, the export zip, single conversations).
    pub const CHATGPT: SourceFormat = SourceFormat::named("chatgpt").with_global_ids();
}

const FORMAT: SourceFormat = SourceFormat::CHATGPT;

impl FormatReader for ChatGptReader {
    fn format(&self) -> SourceFormat {
        SourceFormat::CHATGPT
    }

    fn describe(&self) -> &'static str {
        "ChatGPT data exports (conversations.json, the export zip, single conversations)"
    }

    fn granularity(&self) -> Granularity {
        Granularity::Record
    }

    fn detect(&self, first: Option<&Value>, _raw: &[u8]) -> bool {
        first.is_some_and(is_conversation)
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        let mut read = FileRead::default();
        let images = context.cache.get_or_make(|| match context.root {
            Some(_) => ImageFiles::beside(context.path, context.follow),
            None => ImageFiles::default(),
        });
        for record in records {
            let index = record.index;
            match conversation(record.value, context.rules, &images) {
                Ok(mut transcript) => {
                    transcript.meta.unicode_repairs = record.repairs;
                    read.conversations.push(SourceConversation {
                        transcript,
                        records: vec![index],
                    });
                }
                Err(err) => read.refused.push((index, err)),
            }
        }
        read
    }

    fn archive_lines(&self) -> Option<ArchiveLines> {
        Some(export::export_conversations)
    }
}

/// A conversation object: a `mapping` object and a `current_node` or `title` beside it.
pub fn is_conversation(value: &Value) -> bool {
    let Some(object) = value.as_object() else {
        return false;
    };
    object.get("mapping").is_some_and(Value::is_object)
        && (object.contains_key("current_node") || object.contains_key("title"))
}

fn refuse(problem: impl Into<String>) -> InputError {
    InputError::NotInFormat {
        format: FORMAT,
        problem: problem.into(),
    }
}

/// A conversation object: the fields read, typed; the rest named in the audit as ignored.
/// A field of another type than the one read is as if absent, as exports differ.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default, deserialize_with = "object")]
    mapping: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "lenient")]
    current_node: Option<String>,
    /// Present (of any type) wins over `id`, even when it is not a string.
    #[serde(default, deserialize_with = "present")]
    conversation_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "lenient")]
    id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    create_time: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    default_model_slug: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    title: Option<String>,
    /// Everything else, `update_time` included: it dates the version, but nothing of it is
    /// written, so the audit names it among the ignored fields.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A node of the `mapping`.
#[derive(Deserialize, Default)]
struct Node {
    #[serde(default, deserialize_with = "lenient")]
    parent: Option<String>,
    /// Only whether there are any is read.
    #[serde(default, deserialize_with = "lenient")]
    children: Option<Vec<IgnoredAny>>,
    #[serde(default, deserialize_with = "lenient_struct")]
    message: Option<NodeMessage>,
}

impl Node {
    /// A node as written; anything but an object is a node with nothing in it.
    fn read(value: Value) -> Node {
        match value {
            Value::Object(_) => Node::deserialize(value).unwrap_or_default(),
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Array(_) => Node::default(),
        }
    }
}

/// A node's message; its `content` stays JSON, read by content type ([`walk`]).
#[derive(Deserialize, Default)]
struct NodeMessage {
    #[serde(default, deserialize_with = "lenient_struct")]
    author: Option<Author>,
    #[serde(default, deserialize_with = "lenient")]
    recipient: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    create_time: Option<f64>,
    #[serde(default, deserialize_with = "lenient_struct")]
    metadata: Option<Metadata>,
    #[serde(default, deserialize_with = "object")]
    content: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "lenient")]
    end_turn: Option<bool>,
}

#[derive(Deserialize, Default)]
struct Author {
    #[serde(default, deserialize_with = "lenient")]
    role: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    name: Option<String>,
}

#[derive(Deserialize, Default)]
struct Metadata {
    #[serde(default, deserialize_with = "lenient")]
    is_visually_hidden_from_conversation: Option<bool>,
}

/// Reads one conversation object.
pub fn conversation(
    value: Value,
    rules: &RuleSet,
    images: &ImageFiles,
) -> Result<Transcript, InputError> {
    if !value.is_object() {
        return Err(refuse("not a JSON object"));
    }
    let envelope = Envelope::deserialize(value).map_err(|e| refuse(e.to_string()))?;
    let Some(mapping) = envelope.mapping else {
        return Err(refuse("no `mapping` object"));
    };
    let mut nodes: BTreeMap<String, Node> = mapping
        .into_iter()
        .map(|(id, node)| (id, Node::read(node)))
        .collect();
    let policy = &rules.policy;
    let path = active_path(&nodes, envelope.current_node.as_deref());
    let mut walk = Walk::new(policy, images);
    // Nodes off the path: counted, with their text.
    let on_path: HashSet<&str> = path.iter().map(String::as_str).collect();
    let (mut inactive, mut inactive_bytes) = (0u64, 0usize);
    for (id, node) in &nodes {
        if let Some(message) = node
            .message
            .as_ref()
            .filter(|_| !on_path.contains(id.as_str()))
        {
            inactive += 1;
            inactive_bytes += node_text_bytes(message.content.as_ref());
        }
    }
    if inactive > 0 {
        if policy.inactive_branch == DropOrQuarantine::Quarantine {
            return Err(InputError::RefusedByRule {
                rule: PolicyId::InactiveBranch.into(),
                reason: format!("{inactive} nodes off the active path"),
            });
        }
        let rule = PolicyId::InactiveBranch;
        add_note(
            &mut walk.notes,
            rule,
            "inactive branch node",
            inactive,
            inactive_bytes,
        );
    }
    // The user saw the last answer end its turn: the conversation finished there.
    let finished = path
        .last()
        .and_then(|id| nodes.get(id))
        .and_then(|node| node.message.as_ref())
        .is_some_and(|m| {
            let role = m.author.as_ref().and_then(|a| a.role.as_deref());
            role == Some("assistant") && m.end_turn == Some(true)
        });
    for id in &path {
        let Some(message) = nodes.remove(id).and_then(|node| node.message) else {
            continue;
        };
        walk.node(id, message)?;
    }
    walk.flush_thinking();
    let messages = walk.messages;
    if messages.is_empty() {
        return Err(InputError::EmptyMessages(
            "mapping (active path)".to_string(),
        ));
    }
    let Envelope {
        conversation_id,
        id,
        create_time,
        default_model_slug,
        title,
        rest,
        ..
    } = envelope;
    let id = conversation_id.unwrap_or(id);
    let meta = RecordMeta {
        id: id.clone(),
        created_ms: create_time.and_then(ms),
        updated_ms: rest.get("update_time").and_then(Value::as_f64).and_then(ms),
        model: default_model_slug,
        format: Some(FORMAT),
        title: title.filter(|t| !t.is_empty()),
        source_id: id,
        messages_at: "mapping".to_string(),
        finished,
        ..RecordMeta::default()
    };
    let mut built = TranscriptBuilder::with_meta(meta);
    built.messages(messages);
    built.notes(walk.notes);
    for (field, _) in rest {
        built.ignore(field);
    }
    built.finish()
}

/// Node ids from the root to `current` (or, without one, to the latest leaf), guarding
/// against cycles and missing parents.
fn active_path(nodes: &BTreeMap<String, Node>, current: Option<&str>) -> Vec<String> {
    let leaf = current
        .filter(|c| nodes.contains_key(*c))
        .map(str::to_string)
        .or_else(|| latest_leaf(nodes));
    let mut path = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut at = leaf;
    while let Some(id) = at {
        if !seen.insert(id.clone()) {
            break;
        }
        let parent = nodes
            .get(&id)
            .and_then(|n| n.parent.clone())
            .filter(|p| nodes.contains_key(p));
        path.push(id);
        at = parent;
    }
    path.reverse();
    path
}

/// Without `current_node`: the leaf written last (the first such leaf in the file on a tie).
fn latest_leaf(nodes: &BTreeMap<String, Node>) -> Option<String> {
    let mut best: Option<(f64, &String)> = None;
    for (id, node) in nodes {
        if !node.children.as_ref().is_none_or(Vec::is_empty) {
            continue;
        }
        let time = node
            .message
            .as_ref()
            .and_then(|m| m.create_time)
            .unwrap_or(f64::MIN);
        if best.is_none_or(|(t, _)| time > t) {
            best = Some((time, id));
        }
    }
    best.map(|(_, id)| id.clone())
}

/// Seconds (as exports write times) to milliseconds.
fn ms(seconds: f64) -> Option<i64> {
    seconds
        .is_finite()
        .then(|| (seconds * 1000.0).round() as i64)
}
