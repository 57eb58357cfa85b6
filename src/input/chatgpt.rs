//! ChatGPT data exports: `conversations.json` (an array: the splitter makes one record per
//! conversation), `conversations-NNN.json`, or a single conversation object.
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

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::blocks::add_note;
use super::builder::TranscriptBuilder;
use super::format::{
    FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceConversation, SourceFormat,
};
use super::inside::{read_capped, InputTree, Refusal, IMAGE_CAP};
use super::media::tool_output_content;
use super::InputError;
use crate::model::transcript::{
    Content, Message, Part, ReasoningOrigin, RecordMeta, Role, SourceNote, Thinking, ToolCall,
    Transcript,
};
use crate::rules::template::fill;
use crate::rules::{Citations, DropOrQuarantine, KeepOrDrop, PolicyId, RuleSet, ToolWithoutCall};
use crate::rules::{Policies, UnresolvedImage};

pub struct ChatGptReader;

/// The name the audit writes.
impl SourceFormat {
    /// ChatGPT data exports (conversations.json, the export zip, single conversations).
    pub const CHATGPT: SourceFormat = SourceFormat::named("chatgpt").with_global_ids();
}

const FORMAT: SourceFormat = SourceFormat::CHATGPT;
/// Citation markers: `\u{e200}cite\u{e202}turn0search3\u{e201}`.
const CITE_START: char = '\u{e200}';
const CITE_END: char = '\u{e201}';

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

/// Files an export may point to, by name: the folder beside a loose `conversations.json`, or
/// the entries of the export zip it was read from. Listed once per input file (see
/// [`FileCache`](super::format::FileCache)); a zip's directory is read once, and its entries
/// are read through one opened archive.
#[derive(Debug, Default)]
pub struct ImageFiles {
    at: Place,
}

#[derive(Debug, Default)]
enum Place {
    /// Nothing to point to (standard input).
    #[default]
    Nowhere,
    /// A loose export: each name's path below the export folder, read only inside it
    /// ([`InputTree`]).
    Folder {
        dir: std::path::PathBuf,
        follow: bool,
        files: BTreeMap<String, std::path::PathBuf>,
    },
    /// The export zip and the index of each entry, by file name.
    Zip {
        archive: zip::ZipArchive<SharedFile>,
        entries: BTreeMap<String, usize>,
    },
}

impl ImageFiles {
    /// The files an export at `path` can point to: inside it when it is a zip, else in its
    /// folder and that folder's `dalle-generations/` and `user-*/` folders. A symlink there is
    /// listed only with `follow` and then read only if it leads inside the folder; a folder
    /// behind one is entered only when it is inside too.
    pub fn beside(path: &Path, follow: bool) -> ImageFiles {
        let is_zip = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("zip"));
        if is_zip {
            return ImageFiles::in_zip(path);
        }
        let Some(dir) = path.parent() else {
            return ImageFiles::default();
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let inside = |link: &Path| -> bool {
            let (Ok(root), Ok(target)) = (std::fs::canonicalize(dir), std::fs::canonicalize(link))
            else {
                return false;
            };
            target.starts_with(root)
        };
        // (name, path below the folder), sorted: the first of a name is the one read.
        let mut found: Vec<(String, std::path::PathBuf)> = Vec::new();
        let mut subdirs = Vec::new();
        for (name, file_type, below) in list(dir, Path::new("")) {
            let wanted_dir = name == "dalle-generations" || name.starts_with("user-");
            let is_dir = match () {
                () if file_type.is_dir() => true,
                () if file_type.is_symlink() && follow && wanted_dir => {
                    let link = dir.join(&below);
                    link.is_dir() && inside(&link)
                }
                () => false,
            };
            if is_dir && wanted_dir {
                subdirs.push(below);
            } else if name.starts_with("file") {
                // Whatever it is: reading it decides (a symlink without --follow, a FIFO and
                // the like are refused then, with the reason).
                found.push((name, below));
            }
        }
        for sub in subdirs {
            for (name, _, below) in list(dir, &sub) {
                found.push((name, below));
            }
        }
        found.sort();
        let mut files = BTreeMap::new();
        for (name, below) in found {
            files.entry(name).or_insert(below);
        }
        ImageFiles {
            at: Place::Folder {
                dir: dir.to_path_buf(),
                follow,
                files,
            },
        }
    }

    fn in_zip(path: &Path) -> ImageFiles {
        let archive = std::fs::File::open(path)
            .ok()
            .and_then(|file| SharedFile::new(file).ok())
            .and_then(|file| zip::ZipArchive::new(file).ok());
        let Some(archive) = archive else {
            return ImageFiles::default();
        };
        let mut named: Vec<(&str, &str, usize)> = (0..archive.len())
            .filter_map(|i| Some((archive.name_for_index(i)?, i)))
            .filter(|(n, _)| !n.ends_with('/'))
            .map(|(n, i)| (n.rsplit('/').next().unwrap_or(n), n, i))
            .filter(|(base, _, _)| !base.ends_with(".json") && !base.ends_with(".html"))
            .collect();
        named.sort();
        let mut entries = BTreeMap::new();
        for (base, _, index) in named {
            entries.entry(base.to_string()).or_insert(index);
        }
        ImageFiles {
            at: Place::Zip { archive, entries },
        }
    }

    /// The bytes of the file the export id `id` names, at most [`IMAGE_CAP`].
    fn read(&self, id: &str) -> Result<Vec<u8>, Refusal> {
        match &self.at {
            Place::Nowhere => Err(Refusal::Missing),
            Place::Folder { dir, follow, files } => {
                let below = named(files, id).ok_or(Refusal::Missing)?;
                let tree = InputTree {
                    root: Some(dir),
                    follow: *follow,
                };
                let below = below.to_str().ok_or(Refusal::Missing)?;
                tree.read(dir, below, IMAGE_CAP)
            }
            Place::Zip { archive, entries } => {
                let index = *named(entries, id).ok_or(Refusal::Missing)?;
                // A clone shares the directory read once; each read has its own position.
                let mut archive = archive.clone();
                let entry = archive.by_index(index).map_err(|_| Refusal::Unreadable)?;
                // The declared size first (a 1.5 GiB fake PNG is refused unread), then the
                // bytes themselves, which can be more than declared.
                if entry.size() > IMAGE_CAP {
                    return Err(Refusal::TooLarge);
                }
                read_capped(entry, IMAGE_CAP)
            }
        }
    }

    /// The `data:` URL of the file an asset pointer names (`file-service://file-XYZ`,
    /// `sediment://file_XYZ`), when it is here and is an image; else why not.
    fn resolve(&self, pointer: &str) -> Result<String, Refusal> {
        let id = pointer
            .strip_prefix("file-service://")
            .or_else(|| pointer.strip_prefix("sediment://"))
            .unwrap_or(pointer);
        if id.is_empty() {
            return Err(Refusal::Missing);
        }
        let bytes = self.read(id)?;
        let mime = image_mime(&bytes).ok_or(Refusal::NotImage)?;
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        Ok(format!("data:{mime};base64,{data}"))
    }
}

/// The entries of the folder `below` the export folder `dir`: name, type (a symlink is one,
/// not what it points to) and path below `dir`.
fn list(dir: &Path, below: &Path) -> Vec<(String, std::fs::FileType, std::path::PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir.join(below)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().to_string();
            let file_type = entry.file_type().ok()?;
            Some((name, file_type, below.join(entry.file_name())))
        })
        .collect()
}

/// The value of the name that export id `id` names: the name itself, or a name starting with
/// it followed by `-` or `.` (`file-AbC123-photo.png`, `file_00ab...-uuid.png`,
/// `file-AbC123.png`), the first in name order, as the export's own files are named. Never a
/// name that only starts with it: `sediment://file` is not `file_XYZ.png`.
fn named<'m, V>(map: &'m BTreeMap<String, V>, id: &str) -> Option<&'m V> {
    if let Some(value) = map.get(id) {
        return Some(value);
    }
    // `-` sorts before `.`: the first match in name order is the first of these.
    ['-', '.'].into_iter().find_map(|separator| {
        let prefix = format!("{id}{separator}");
        map.range(prefix.clone()..)
            .next()
            .filter(|(name, _)| name.starts_with(&prefix))
            .map(|(_, value)| value)
    })
}

/// An open file read at its own position (`pread`): clones share the file, so a zip archive
/// read once can be cloned for each read, from any thread.
#[derive(Debug, Clone)]
pub struct SharedFile {
    file: Arc<std::fs::File>,
    len: u64,
    at: u64,
}

impl SharedFile {
    fn new(file: std::fs::File) -> std::io::Result<SharedFile> {
        let len = file.metadata()?.len();
        Ok(SharedFile {
            file: Arc::new(file),
            len,
            at: 0,
        })
    }
}

impl std::io::Read for SharedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for SharedFile {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let at = match to {
            std::io::SeekFrom::Start(n) => Some(n),
            std::io::SeekFrom::End(d) => self.len.checked_add_signed(d),
            std::io::SeekFrom::Current(d) => self.at.checked_add_signed(d),
        };
        self.at = at.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.at)
    }
}

/// The MIME type of an image Codex loads, from its first bytes.
fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF8") {
        Some("image/gif")
    } else if bytes.len() > 12 && &bytes[0..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The call a tool node answers.
struct OpenCall {
    id: String,
}

/// The walk over the active path.
struct Walk<'a> {
    policy: &'a Policies,
    images: &'a ImageFiles,
    messages: Vec<Message>,
    notes: Vec<SourceNote>,
    /// Reasoning waiting for the assistant message it explains.
    thinking: Vec<Thinking>,
    thinking_time: Option<i64>,
    /// The last call made, until a user or assistant node comes.
    call: Option<OpenCall>,
    /// The tool message being filled for that call (several tool nodes are one output).
    output_open: bool,
}

/// Reads one conversation object.
pub fn conversation(
    value: Value,
    rules: &RuleSet,
    images: &ImageFiles,
) -> Result<Transcript, InputError> {
    let Value::Object(mut object) = value else {
        return Err(refuse("not a JSON object"));
    };
    let Some(Value::Object(mapping)) = object.remove("mapping") else {
        return Err(refuse("no `mapping` object"));
    };
    let policy = &rules.policy;
    let current = object
        .get("current_node")
        .and_then(Value::as_str)
        .map(str::to_string);
    let path = active_path(&mapping, current.as_deref());
    let mut walk = Walk {
        policy,
        images,
        messages: Vec::new(),
        notes: Vec::new(),
        thinking: Vec::new(),
        thinking_time: None,
        call: None,
        output_open: false,
    };
    // Nodes off the path: counted, with their text.
    let on_path: HashSet<&str> = path.iter().map(String::as_str).collect();
    let (mut inactive, mut inactive_bytes) = (0u64, 0usize);
    for (id, node) in &mapping {
        if !on_path.contains(id.as_str()) && node.get("message").is_some_and(Value::is_object) {
            inactive += 1;
            inactive_bytes += node_text_bytes(&node["message"]);
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
    let mut mapping = mapping;
    let mapping_last: std::collections::HashMap<String, bool> = path
        .last()
        .and_then(|id| mapping.get(id).map(|n| (id, n)))
        .map(|(id, n)| {
            let m = &n["message"];
            let end = m["author"]["role"] == "assistant" && m["end_turn"] == Value::Bool(true);
            (id.clone(), end)
        })
        .into_iter()
        .collect();
    for id in &path {
        let Some(Value::Object(mut node)) = mapping.remove(id) else {
            continue;
        };
        let Some(Value::Object(message)) = node.remove("message") else {
            continue;
        };
        walk.node(id, message)?;
    }
    // The user saw the last answer end its turn: the conversation finished there.
    let finished = path
        .last()
        .and_then(|id| mapping_last.get(id))
        .is_some_and(|end_turn| *end_turn);
    walk.flush_thinking();
    let messages = walk.messages;
    if messages.is_empty() {
        return Err(InputError::EmptyMessages(
            "mapping (active path)".to_string(),
        ));
    }
    let meta = RecordMeta {
        id: object
            .get("conversation_id")
            .or_else(|| object.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string),
        created_ms: object.get("create_time").and_then(seconds_to_ms),
        updated_ms: object.get("update_time").and_then(seconds_to_ms),
        model: object
            .get("default_model_slug")
            .and_then(Value::as_str)
            .map(str::to_string),
        format: Some(FORMAT),
        title: object
            .get("title")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_string),
        source_id: object
            .get("conversation_id")
            .or_else(|| object.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string),
        messages_at: "mapping".to_string(),
        finished,
        ..RecordMeta::default()
    };
    let known = [
        "mapping",
        "id",
        "conversation_id",
        "create_time",
        "default_model_slug",
        "title",
        "current_node",
    ];
    let ignored_fields: Vec<String> = object
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    let mut built = TranscriptBuilder::with_meta(meta);
    built.messages(messages);
    built.notes(walk.notes);
    for field in ignored_fields {
        built.ignore(field);
    }
    built.finish()
}

/// Node ids from the root to `current` (or, without one, to the latest leaf), guarding
/// against cycles and missing parents.
fn active_path(mapping: &Map<String, Value>, current: Option<&str>) -> Vec<String> {
    let leaf = current
        .filter(|c| mapping.contains_key(*c))
        .map(str::to_string)
        .or_else(|| latest_leaf(mapping));
    let mut path = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut at = leaf;
    while let Some(id) = at {
        if !seen.insert(id.clone()) {
            break;
        }
        let parent = mapping
            .get(&id)
            .and_then(|n| n.get("parent"))
            .and_then(Value::as_str)
            .filter(|p| mapping.contains_key(*p))
            .map(str::to_string);
        path.push(id);
        at = parent;
    }
    path.reverse();
    path
}

/// Without `current_node`: the leaf written last (the first such leaf in the file on a tie).
fn latest_leaf(mapping: &Map<String, Value>) -> Option<String> {
    let mut best: Option<(f64, &String)> = None;
    for (id, node) in mapping {
        let leaf = node
            .get("children")
            .and_then(Value::as_array)
            .is_none_or(|c| c.is_empty());
        if !leaf {
            continue;
        }
        let time = node
            .get("message")
            .and_then(|m| m.get("create_time"))
            .and_then(Value::as_f64)
            .unwrap_or(f64::MIN);
        if best.is_none_or(|(t, _)| time > t) {
            best = Some((time, id));
        }
    }
    best.map(|(_, id)| id.clone())
}

fn seconds_to_ms(value: &Value) -> Option<i64> {
    let seconds = value.as_f64()?;
    seconds
        .is_finite()
        .then(|| (seconds * 1000.0).round() as i64)
}

/// Text bytes of a node's message, as the reader would read them (for what it drops).
fn node_text_bytes(message: &Value) -> usize {
    let content = &message["content"];
    let mut total = 0;
    let keys = ["text", "result", "content", "output_str"];
    let context = ["user_profile", "user_instructions", "model_set_context"];
    for key in keys.iter().chain(context.iter()) {
        if let Some(t) = content.get(key).and_then(Value::as_str) {
            total += t.len();
        }
    }
    if let Some(parts) = content.get("parts").and_then(Value::as_array) {
        for part in parts {
            if let Some(t) = part.as_str() {
                total += t.len();
            } else if let Some(t) = part.get("text").and_then(Value::as_str) {
                total += t.len();
            }
        }
    }
    if let Some(thoughts) = content.get("thoughts").and_then(Value::as_array) {
        for thought in thoughts {
            for key in ["summary", "content"] {
                total += thought.get(key).and_then(Value::as_str).map_or(0, str::len);
            }
        }
    }
    total
}

fn text_of(content: &Map<String, Value>, key: &str) -> Option<String> {
    content.get(key).and_then(Value::as_str).map(str::to_string)
}

impl Walk<'_> {
    fn note(&mut self, id: PolicyId, what: &str, bytes: usize) {
        add_note(&mut self.notes, id, what, 1, bytes);
    }

    /// A node dropped by `policy.hidden_node`.
    fn hidden(&mut self, what: &str, message: &Map<String, Value>) -> Result<(), InputError> {
        if self.policy.hidden_node == DropOrQuarantine::Quarantine {
            return Err(InputError::RefusedByRule {
                rule: PolicyId::HiddenNode.into(),
                reason: format!("a {what}"),
            });
        }
        let bytes = node_text_bytes(&Value::Object(message.clone()));
        self.note(PolicyId::HiddenNode, what, bytes);
        Ok(())
    }

    fn node(&mut self, id: &str, mut message: Map<String, Value>) -> Result<(), InputError> {
        let author = message.remove("author").unwrap_or(Value::Null);
        let role = author
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let tool_name = author
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string);
        let recipient = message
            .get("recipient")
            .and_then(Value::as_str)
            .unwrap_or("all")
            .to_string();
        let time = message.get("create_time").and_then(seconds_to_ms);
        let hidden = message
            .get("metadata")
            .and_then(|m| m.get("is_visually_hidden_from_conversation"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let Some(Value::Object(content)) = message.get("content").cloned() else {
            return self.hidden("node without content", &message);
        };
        let kind = content
            .get("content_type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind.as_str() {
            "user_editable_context" => {
                let parts: Vec<Part> = ["user_profile", "user_instructions"]
                    .iter()
                    .filter_map(|k| text_of(&content, k))
                    .filter(|t| !t.is_empty())
                    .map(Part::Text)
                    .collect();
                return self.context_message(&kind, parts, time, &message);
            }
            "model_editable_context" => {
                if self.policy.memory == KeepOrDrop::Drop {
                    let bytes = node_text_bytes(&Value::Object(message.clone()));
                    self.note(PolicyId::Memory, "memory (model_editable_context)", bytes);
                    return Ok(());
                }
                let parts: Vec<Part> = ["model_set_context"]
                    .iter()
                    .filter_map(|k| text_of(&content, k))
                    .filter(|t| !t.is_empty())
                    .map(Part::Text)
                    .collect();
                return self.context_message(&kind, parts, time, &message);
            }
            "reasoning_recap" => return self.hidden("reasoning_recap", &message),
            _ => {}
        }
        if role == "system" && node_text_bytes(&Value::Object(message.clone())) == 0 {
            return self.hidden("empty system node", &message);
        }
        if hidden {
            return self.hidden("hidden node", &message);
        }
        match role.as_str() {
            "system" => {
                let parts = self.parts(&content, false);
                if parts
                    .iter()
                    .all(|p| matches!(p, Part::Text(t) if t.trim().is_empty()))
                {
                    return self.hidden("empty system node", &message);
                }
                self.close_call();
                // Named so the rules can tell it from a system prompt (default: developer
                // context, not Codex's base instructions).
                self.push(Message {
                    role: Role::System,
                    name: Some("chatgpt:system".to_string()),
                    content: Content::Parts(parts),
                    timestamp_ms: time,
                    ..Message::default()
                });
            }
            "user" => {
                self.close_call();
                self.flush_thinking();
                let parts = self.parts(&content, false);
                self.push(Message {
                    role: Role::User,
                    content: Content::Parts(parts),
                    timestamp_ms: time,
                    ..Message::default()
                });
            }
            "assistant" if kind == "thoughts" => {
                let mut texts = Vec::new();
                if let Some(thoughts) = content.get("thoughts").and_then(Value::as_array) {
                    for thought in thoughts {
                        for key in ["summary", "content"] {
                            if let Some(t) = thought.get(key).and_then(Value::as_str) {
                                if !t.is_empty() {
                                    texts.push(t.to_string());
                                }
                            }
                        }
                    }
                } else {
                    // Some exporters write thoughts as `parts`.
                    for part in self.parts(&content, false) {
                        if let Part::Text(t) = part {
                            if !t.is_empty() {
                                texts.push(t);
                            }
                        }
                    }
                }
                if !texts.is_empty() {
                    self.thinking.push(Thinking {
                        summary: texts,
                        origin: ReasoningOrigin::ChatGpt,
                        ..Thinking::default()
                    });
                    self.thinking_time = self.thinking_time.or(time);
                }
            }
            "assistant" if recipient != "all" => {
                self.close_call();
                let text = self
                    .parts(&content, true)
                    .into_iter()
                    .filter_map(|p| match p {
                        Part::Text(t) => Some(t),
                        Part::Image { .. }
                        | Part::Audio { .. }
                        | Part::File { .. }
                        | Part::Refusal(_)
                        | Part::Unknown { .. } => None,
                    })
                    .collect::<Vec<_>>()
                    .join("");
                let json = serde_json::from_str::<Value>(&text).is_ok_and(|v| v.is_object());
                // No input at all: a function call with no arguments (`{}`, counted).
                let missing = text.trim().is_empty();
                let call_id = format!("call_{id}");
                let call = ToolCall {
                    id: Some(call_id.clone()),
                    name: recipient,
                    arguments: text,
                    custom: !json && !missing,
                    arguments_missing: missing,
                    ..ToolCall::default()
                };
                let mut m = self.assistant_message(time);
                m.tool_calls.push(call);
                self.push(m);
                self.call = Some(OpenCall { id: call_id });
            }
            "assistant" => {
                self.close_call();
                let parts = self.parts(&content, true);
                let mut m = self.assistant_message(time);
                m.content = Content::Parts(parts);
                self.push(m);
            }
            "tool" => self.tool(id, tool_name, &kind, &content, time),
            _ => {
                // An unknown role: kept as given, for policy.unknown_role.
                self.close_call();
                let parts = self.parts(&content, false);
                self.push(Message {
                    role: Role::named(role.clone()),
                    content: Content::Parts(parts),
                    timestamp_ms: time,
                    ..Message::default()
                });
            }
        }
        Ok(())
    }

    /// A context node (custom instructions, memory): a system message the rules classify.
    fn context_message(
        &mut self,
        kind: &str,
        parts: Vec<Part>,
        time: Option<i64>,
        message: &Map<String, Value>,
    ) -> Result<(), InputError> {
        if parts.is_empty() {
            return self.hidden("empty context node", message);
        }
        self.close_call();
        self.push(Message {
            role: Role::System,
            name: Some(format!("chatgpt:{kind}")),
            content: Content::Parts(parts),
            timestamp_ms: time,
            ..Message::default()
        });
        Ok(())
    }

    /// An assistant message carrying the reasoning waiting for it.
    fn assistant_message(&mut self, time: Option<i64>) -> Message {
        Message {
            role: Role::Assistant,
            thinking: std::mem::take(&mut self.thinking),
            timestamp_ms: self.thinking_time.take().or(time),
            ..Message::default()
        }
    }

    /// Reasoning with nothing after it to explain: on an empty assistant message, for
    /// `policy.unpaired_reasoning`.
    fn flush_thinking(&mut self) {
        if !self.thinking.is_empty() {
            let m = self.assistant_message(None);
            self.push(m);
        }
    }

    fn close_call(&mut self) {
        self.call = None;
        self.output_open = false;
    }

    fn push(&mut self, m: Message) {
        self.output_open = false;
        self.messages.push(m);
    }

    /// A tool node: the output of the open call, or a node with no call.
    fn tool(
        &mut self,
        id: &str,
        name: Option<String>,
        kind: &str,
        content: &Map<String, Value>,
        time: Option<i64>,
    ) {
        let mut parts = self.tool_parts(kind, content);
        let error = kind == "system_error";
        if self.output_open {
            if let Some(last) = self.messages.last_mut() {
                // Several tool nodes answering one call are one output, parts in order.
                let earlier = match std::mem::take(&mut last.content) {
                    Content::Text(text) => vec![Part::Text(text)],
                    Content::Parts(parts) => parts,
                    Content::Missing | Content::Null => Vec::new(),
                };
                parts.splice(0..0, earlier);
                last.content = tool_output_content(parts);
                last.tool_error |= error;
                return;
            }
        }
        let call_id = match &self.call {
            Some(call) => call.id.clone(),
            None => {
                let call_id = format!("call_{id}");
                if self.policy.tool_without_call == ToolWithoutCall::Synthesize {
                    let mut m = self.assistant_message(time);
                    m.tool_calls.push(ToolCall {
                        id: Some(call_id.clone()),
                        name: name.clone().unwrap_or_else(|| "tool".to_string()),
                        arguments: String::new(),
                        arguments_missing: true,
                        ..ToolCall::default()
                    });
                    self.push(m);
                    self.note(PolicyId::ToolWithoutCall, "tool node without a call", 0);
                }
                call_id
            }
        };
        self.push(Message {
            role: Role::Tool,
            name,
            content: tool_output_content(parts),
            tool_call_ids: vec![call_id.clone()],
            tool_error: error,
            timestamp_ms: time,
            ..Message::default()
        });
        self.output_open = true;
        self.call = Some(OpenCall { id: call_id });
    }

    /// The output parts of a tool node, by content type.
    fn tool_parts(&mut self, kind: &str, content: &Map<String, Value>) -> Vec<Part> {
        let field = match kind {
            "execution_output" | "system_error" | "tether_quote" | "sonic_webpage" => "text",
            "tether_browsing_display" => "result",
            "citable_code_output" => "output_str",
            _ => "",
        };
        if !field.is_empty() {
            let text = text_of(content, field).unwrap_or_default();
            return vec![Part::Text(text)];
        }
        if content.contains_key("parts") {
            return self.parts(content, false);
        }
        match text_of(content, "text") {
            Some(text) => vec![Part::Text(text)],
            None => vec![Part::Unknown {
                kind: kind.to_string(),
            }],
        }
    }

    /// The parts of a `text`/`multimodal_text`/`code` content (assistant text has its citation
    /// markers handled by policy).
    fn parts(&mut self, content: &Map<String, Value>, assistant: bool) -> Vec<Part> {
        let mut out = Vec::new();
        match content.get("parts").and_then(Value::as_array) {
            Some(parts) => {
                for part in parts {
                    match part {
                        Value::String(text) => out.push(Part::Text(text.clone())),
                        Value::Object(object) => out.extend(self.object_part(object)),
                        Value::Null => {}
                        other @ Value::Bool(_)
                        | other @ Value::Number(_)
                        | other @ Value::Array(_) => out.push(Part::Text(other.to_string())),
                    }
                }
            }
            None => {
                if let Some(text) = text_of(content, "text") {
                    out.push(Part::Text(text));
                } else if let Some(text) = text_of(content, "content") {
                    out.push(Part::Text(text));
                }
            }
        }
        if assistant && self.policy.citation_markers == Citations::Strip {
            for part in &mut out {
                if let Part::Text(text) = part {
                    let (stripped, count, bytes) = strip_citations(text);
                    if count > 0 {
                        *text = stripped;
                        let rule = PolicyId::CitationMarkers;
                        add_note(&mut self.notes, rule, "citation marker", count, bytes);
                    }
                }
            }
        }
        out
    }

    fn object_part(&mut self, object: &Map<String, Value>) -> Option<Part> {
        let kind = object
            .get("content_type")
            .and_then(Value::as_str)
            .unwrap_or("object");
        match kind {
            "image_asset_pointer" => {
                let pointer = object
                    .get("asset_pointer")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match self.images.resolve(pointer) {
                    Ok(url) => Some(Part::Image {
                        url: Some(url),
                        file_id: None,
                        detail: None,
                    }),
                    Err(refusal) => {
                        let rule = PolicyId::UnresolvedImage;
                        let what = match refusal {
                            Refusal::Missing => "image not in the export",
                            Refusal::Outside => "image symlink leads outside the export",
                            Refusal::Unreadable
                            | Refusal::Symlink
                            | Refusal::NotRegular
                            | Refusal::TooLarge
                            | Refusal::NotImage
                            | Refusal::NoTree => refusal.what(),
                        };
                        add_note(&mut self.notes, rule, what, 1, 0);
                        match self.policy.unresolved_image {
                            UnresolvedImage::Placeholder => {
                                let text = fill(
                                    &self.policy.unresolved_image_template,
                                    &[("pointer", pointer)],
                                );
                                Some(Part::Text(text))
                            }
                            UnresolvedImage::Drop => None,
                        }
                    }
                }
            }
            "audio_transcription" => Some(Part::Text(text_of(object, "text").unwrap_or_default())),
            other => Some(Part::Unknown {
                kind: other.to_string(),
            }),
        }
    }
}

/// `text` without its citation markers: how many, and their bytes.
fn strip_citations(text: &str) -> (String, u64, usize) {
    let mut out = String::with_capacity(text.len());
    let (mut count, mut bytes) = (0u64, 0usize);
    let mut rest = text;
    while let Some(start) = rest.find(CITE_START) {
        let Some(len) = rest[start..].find(CITE_END) else {
            break;
        };
        out.push_str(&rest[..start]);
        let end = start + len + CITE_END.len_utf8();
        bytes += end - start;
        count += 1;
        rest = &rest[end..];
    }
    out.push_str(rest);
    (out, count, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_export_id_names_a_file_exactly_or_up_to_a_dash_or_dot() {
        let files: BTreeMap<String, &str> = [
            "file-AbC123-photo one.png",
            "file-AbC123.png",
            "file-AbC1234.png",
            "file_00ab-uuid.webp",
            "file_00abc.png",
            "file_XYZ.png",
            "plain",
        ]
        .into_iter()
        .map(|n| (n.to_string(), n))
        .collect();
        let found = |id: &str| named(&files, id).copied();
        assert_eq!(found("file-AbC123"), Some("file-AbC123-photo one.png"));
        assert_eq!(found("file-AbC1234"), Some("file-AbC1234.png"));
        assert_eq!(found("file_00ab"), Some("file_00ab-uuid.webp"));
        assert_eq!(found("file_XYZ"), Some("file_XYZ.png"));
        assert_eq!(found("plain"), Some("plain"));
        // `sediment://file` is not `file_XYZ.png` (nor any `file_` name).
        for none in ["file_", "file_XY", "file-AbC12", "file_00a", "fil", "pla"] {
            assert_eq!(found(none), None, "{none}");
        }
    }
}
