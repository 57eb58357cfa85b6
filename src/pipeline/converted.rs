//! A converted conversation as the pipeline carries it to the collector ([`Converted`]): its
//! bytes, where they go, and its line in `conversations.jsonl`, rendered by the worker.

use std::borrow::Cow;
use std::path::PathBuf;

use serde::Serialize;

use crate::audit::accounting::Account;
use crate::audit::Decision;
use crate::convert::render::usable_cwd;
use crate::input::SourceFormat;
use crate::model::json::{decimal_into, escape_into};
use crate::output::manifest::digest;
use crate::output::Placed;
use crate::rules::RuleSet;

/// A key of the record or of one of its messages that nothing converts: the audit counts it
/// as `scope` then `name` (`record.created`, `message.name`). The name is the one the reader
/// kept, moved here; the collector joins the two only to count a name it has not seen.
#[derive(Debug, Clone, PartialEq)]
pub struct IgnoredField {
    pub scope: &'static str,
    pub name: Cow<'static, str>,
}

impl IgnoredField {
    pub const RECORD: &'static str = "record.";
    pub const MESSAGE: &'static str = "message.";
}

/// A converted record; the serialised fields are its line in `conversations.jsonl`.
#[derive(Debug, Serialize)]
pub struct Converted {
    pub schema_version: u32,
    pub source: String,
    pub line: u64,
    pub id: String,
    pub path: String,
    pub account: Account,
    pub decisions: Vec<Decision>,
    /// xxh3-128 of the rollout's bytes (the manifest's digest): what `report diff` compares.
    pub digest: String,
    /// Items written by kind (`message:user`, `function_call`, ...) and assistant phase, each
    /// pair with its count, in the order first written ([`count_kinds`]): the collector adds a
    /// few counts a conversation instead of one per item.
    #[serde(skip)]
    pub items: Vec<(&'static str, Option<&'static str>, u64)>,
    /// `user_message` and `agent_message` events written.
    #[serde(skip)]
    pub events: (u64, u64),
    #[serde(skip)]
    pub ignored: Vec<IgnoredField>,
    /// The rollout's bytes and its path relative to the home (for a Responses body, its line
    /// and the path of its input file's output file). A Codex rollout's are released by the
    /// worker once placed ([`Converted::release_bytes`]): the collector needs only their
    /// length and first timestamp, kept below.
    #[serde(skip)]
    pub bytes: Vec<u8>,
    /// The length of `bytes`, as written.
    #[serde(skip)]
    pub output_len: u64,
    /// The session meta's timestamp, for a conversation with a title (the session index's
    /// `updated_at`).
    #[serde(skip)]
    pub started_at: Option<String>,
    #[serde(skip)]
    pub relative: PathBuf,
    /// What writing it did (`None` in a dry run).
    #[serde(skip)]
    pub placed: Option<Placed>,
    /// Input records it was read from (more than one for formats whose conversations span
    /// records, like a Claude Code session's lines).
    #[serde(skip_serializing_if = "is_one")]
    pub records: u64,
    #[serde(flatten)]
    pub links: Links,
    /// The version of a conversation that can come again with other content (a source's id,
    /// a chain of records), for the collector's gate; `None` for a record that is its own
    /// identity.
    #[serde(skip)]
    pub version: Option<Box<crate::model::version::InHand>>,
    /// The digest of its identity when its session keeps an id of scheme 2 (the manifest's
    /// alias to record).
    #[serde(skip)]
    pub alias: Option<u128>,
    /// How the writers place it ([`crate::output::Placement`]), as the collector's gate decided.
    #[serde(skip)]
    pub placement: crate::output::Placement,
    /// It is placed over a version this run placed earlier, whose record this names.
    #[serde(skip)]
    pub supersedes: Option<String>,
    /// It was given a session of its own ([`Converted::split`]): the record of the unrelated
    /// conversation that holds its source id.
    #[serde(skip)]
    pub split_from: Option<String>,
    /// Its line in `conversations.jsonl` (these fields as JSON), rendered by the worker once
    /// the conversation is settled, so that the collector, a serial stage, only writes it:
    /// rendered there, it was half of the collector's work on small records. `None` when the
    /// collector renders it: a title (replaced by its length unless `--report-text`), or a
    /// path or digest the collector changed since ([`Converted::reword`]).
    #[serde(skip)]
    pub audit_line: Option<Vec<u8>>,
}

/// What the audit line says of the conversation's source, beyond its place: its format
/// (when not Chat Completions), title, and the source's ids.
#[derive(Debug, Default, Serialize)]
pub struct Links {
    #[serde(skip_serializing_if = "is_chat")]
    pub format: Option<SourceFormat>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_id: Option<String>,
    /// The conversation that spawned this one (a subagent's parent session).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_source_id: Option<String>,
    /// The version of the tool that wrote the source (Claude Code `version`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_version: Option<String>,
    /// The folder the source says the session ran in, when another one is in the session
    /// meta: `--cwd`'s, or the rules' when the source's is not a usable folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_cwd: Option<String>,
}

impl Links {
    pub(super) fn of(meta: &crate::model::transcript::RecordMeta, rules: &RuleSet) -> Links {
        let overridden = rules.session.cwd_overrides_source;
        Links {
            source_cwd: meta.cwd.clone().filter(|cwd| {
                !cwd.is_empty() && *cwd != rules.session.cwd && (overridden || !usable_cwd(cwd))
            }),
            format: meta.format,
            title: meta.title.clone(),
            source_id: meta.source_id.clone(),
            parent_source_id: meta.parent_source_id.clone(),
            source_version: meta.source_version.clone(),
        }
    }
}

impl Converted {
    /// Renders the audit line ([`Converted::audit_line`]), unless the collector must.
    pub(super) fn render_audit_line(&mut self) {
        self.audit_line = None;
        if self.links.title.is_none() {
            self.audit_line = self.audit_bytes();
        }
    }

    /// The audit line, written by hand: the bytes `serde_json::to_vec` writes of these fields
    /// (a test holds the two equal), its decisions' actions still through serde
    /// ([`Decision::write_json`]). serde_json's writer
    /// escapes a string a byte at a time and goes through a map for the flattened links: ~7,000
    /// instructions a small record's line, 3.5 % of a dry run (issue 29).
    pub(super) fn audit_bytes(&self) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(512);
        let number = |out: &mut Vec<u8>, key: &str, n: u64| {
            key_into(out, key);
            decimal_into(out, n);
        };
        let text = |out: &mut Vec<u8>, key: &str, text: &str| {
            key_into(out, key);
            escape_into(out, text);
        };
        out.push(b'{');
        out.extend_from_slice(b"\"schema_version\":");
        decimal_into(&mut out, u64::from(self.schema_version));
        text(&mut out, "source", &self.source);
        number(&mut out, "line", self.line);
        text(&mut out, "id", &self.id);
        text(&mut out, "path", &self.path);
        let account = &self.account;
        key_into(&mut out, "account");
        out.extend_from_slice(b"{\"bytes_in\":");
        decimal_into(&mut out, account.bytes_in as u64);
        number(&mut out, "bytes_out", account.bytes_out as u64);
        number(&mut out, "bytes_dropped", account.bytes_dropped as u64);
        number(&mut out, "bytes_added", account.bytes_added as u64);
        out.push(b'}');
        key_into(&mut out, "decisions");
        out.push(b'[');
        for (i, decision) in self.decisions.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            decision.write_json(&mut out).ok()?;
        }
        out.push(b']');
        text(&mut out, "digest", &self.digest);
        if !is_one(&self.records) {
            number(&mut out, "records", self.records);
        }
        let links = &self.links;
        if let Some(format) = links.format.filter(|_| !is_chat(&links.format)) {
            text(&mut out, "format", format.name());
        }
        let optional = [
            ("title", &links.title),
            ("source_id", &links.source_id),
            ("parent_source_id", &links.parent_source_id),
            ("source_version", &links.source_version),
            ("source_cwd", &links.source_cwd),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                text(&mut out, key, value);
            }
        }
        out.push(b'}');
        Some(out)
    }

    /// The collector changes what the audit line says (a Responses body's output file, a
    /// duplicate's digest): the line rendered by the worker is dropped, and rendered again.
    pub fn reword(&mut self, path: Option<&str>, digest: Option<String>) {
        if let Some(path) = path {
            path.clone_into(&mut self.path);
        }
        if let Some(digest) = digest {
            self.digest = digest;
        }
        self.audit_line = None;
    }

    /// Gives a conversation that shares its source id with another, unrelated one of its
    /// input a session of its own ([`crate::convert::ids::split_session_id`], from its
    /// messages' digest): its id in the session meta, its path and its digest. A rollout
    /// names its session id once, in its first line; nothing else of it changes.
    pub fn split(&mut self) {
        let Some(version) = &self.version else {
            return;
        };
        let old = std::mem::take(&mut self.id);
        let new = crate::convert::ids::split_session_id(&old, version.version.content);
        let first_line = self
            .bytes
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(self.bytes.len());
        if let Some(at) = memchr::memmem::find(&self.bytes[..first_line], old.as_bytes()) {
            self.bytes[at..at + old.len()].copy_from_slice(new.as_bytes());
        }
        self.path = self.path.replace(&old, &new);
        self.relative = PathBuf::from(&self.path);
        if !self.bytes.is_empty() {
            self.digest = digest(&self.bytes);
        }
        self.id = new;
        self.audit_line = None;
    }

    /// Frees the rollout's bytes where they were made: they become the worker's render
    /// buffer again ([`crate::convert::recycle`]). Allocated by the worker and freed by the
    /// collector, each rollout went back to the worker's allocator through its cross-thread
    /// free list, and the worker's next rollout landed in cold memory.
    pub fn release_bytes(&mut self) {
        crate::convert::recycle(std::mem::take(&mut self.bytes));
    }

    /// Keeps a copy of the rollout's bytes at their exact size and gives the render buffer
    /// back to this thread, for rollouts that outlive the next render: a source's
    /// conversations, placed together, and every rollout of a batch, placed by the writers
    /// while this worker converts the next batch. A buffer too large to be kept is handed
    /// over as it is (no second copy of a huge rollout).
    pub fn keep_exact(&mut self) {
        if crate::convert::recyclable(&self.bytes) {
            let exact = self.bytes.to_vec();
            crate::convert::recycle(std::mem::replace(&mut self.bytes, exact));
        }
    }
}

/// The timestamp of a rollout's first line (its session meta), empty if it has none.
pub(super) fn rollout_start(bytes: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct First {
        timestamp: String,
    }
    let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    serde_json::from_slice::<First>(line)
        .map(|f| f.timestamp)
        .unwrap_or_default()
}

/// `,"key":` (no key here needs escaping).
fn key_into(out: &mut Vec<u8>, key: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

pub(super) fn is_chat(format: &Option<SourceFormat>) -> bool {
    format.is_none_or(|format| format == SourceFormat::CHAT)
}
