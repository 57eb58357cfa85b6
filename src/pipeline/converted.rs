//! A converted conversation as the pipeline carries it to the collector ([`Converted`]): its
//! bytes, where they go, and its line in `conversations.jsonl`, rendered by the worker.

use std::borrow::Cow;
use std::path::PathBuf;

use crate::audit::accounting::Account;
use crate::audit::Decision;
use crate::convert::render::usable_cwd;
use crate::input::SourceFormat;
use crate::model::rollout::table::{wire_struct, JsonOut, WriteJson};
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

/// A converted record: its rollout, where it goes, and what its line in `conversations.jsonl`
/// says ([`AuditLine`]).
#[derive(Debug)]
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
    pub items: Vec<(&'static str, Option<&'static str>, u64)>,
    /// `user_message` and `agent_message` events written.
    pub events: (u64, u64),
    pub ignored: Vec<IgnoredField>,
    /// The rollout's bytes and its path relative to the home (for a Responses body, its line
    /// and the path of its input file's output file). A Codex rollout's are released by the
    /// worker once placed ([`Converted::release_bytes`]): the collector needs only their
    /// length and first timestamp, kept below.
    pub bytes: Vec<u8>,
    /// The length of `bytes`, as written.
    pub output_len: u64,
    /// The session meta's timestamp, for a conversation with a title (the session index's
    /// `updated_at`).
    pub started_at: Option<String>,
    pub relative: PathBuf,
    /// What writing it did (`None` in a dry run).
    pub placed: Option<Placed>,
    /// Input records it was read from (more than one for formats whose conversations span
    /// records, like a Claude Code session's lines).
    pub records: u64,
    pub links: Links,
    /// The version of a conversation that can come again with other content (a source's id,
    /// a chain of records), for the collector's gate; `None` for a record that is its own
    /// identity.
    pub version: Option<Box<crate::model::version::InHand>>,
    /// The digest of its identity when its session keeps an id of scheme 2 (the manifest's
    /// alias to record).
    pub alias: Option<u128>,
    /// How the writers place it ([`crate::output::Placement`]), as the collector's gate decided.
    pub placement: crate::output::Placement,
    /// It is placed over a version this run placed earlier, whose record this names.
    pub supersedes: Option<String>,
    /// It was given a session of its own ([`Converted::split`]): the record of the unrelated
    /// conversation that holds its source id.
    pub split_from: Option<String>,
    /// Its line in `conversations.jsonl` (these fields as JSON), rendered by the worker once
    /// the conversation is settled, so that the collector, a serial stage, only writes it:
    /// rendered there, it was half of the collector's work on small records. `None` when the
    /// collector renders it: a title (replaced by its length unless `--report-text`), or a
    /// path or digest the collector changed since ([`Converted::reword`]).
    pub audit_line: Option<Vec<u8>>,
}

/// What the audit line says of the conversation's source, beyond its place: its format
/// (when not Chat Completions), title, and the source's ids.
#[derive(Debug, Default)]
pub struct Links {
    pub format: Option<SourceFormat>,
    pub title: Option<String>,
    pub source_id: Option<String>,
    /// The conversation that spawned this one (a subagent's parent session).
    pub parent_source_id: Option<String>,
    /// The version of the tool that wrote the source (Claude Code `version`).
    pub source_version: Option<String>,
    /// The folder the source says the session ran in, when another one is in the session
    /// meta: `--cwd`'s, or the rules' when the source's is not a usable folder.
    pub source_cwd: Option<String>,
}

wire_struct! {
    /// A converted conversation's line in `conversations.jsonl`, declared once: the writer
    /// and serde's derive come from these lines; the table's writer copies each key whole
    /// (`samples/BENCHMARKS.md` has what serde's costs).
    pub(super) struct AuditLine<'a> {
        schema_version: u32 = "schema_version",
        source: &'a str = "source",
        line: u64 = "line",
        id: &'a str = "id",
        path: &'a str = "path",
        account: Account = "account",
        decisions: &'a [Decision] = "decisions" with write_decisions,
        digest: &'a str = "digest",
        /// Left out when the conversation is one record, as most are.
        records: Option<u64> = "records" if "Option::is_none",
        /// Left out for Chat Completions, the format most archives hold.
        format: Option<&'a str> = "format" if "Option::is_none",
        title: Option<&'a str> = "title" if "Option::is_none",
        source_id: Option<&'a str> = "source_id" if "Option::is_none",
        parent_source_id: Option<&'a str> = "parent_source_id" if "Option::is_none",
        source_version: Option<&'a str> = "source_version" if "Option::is_none",
        source_cwd: Option<&'a str> = "source_cwd" if "Option::is_none",
    }
}

/// A conversation's decisions, each through its own writer ([`Decision::write_json`]).
fn write_decisions(decisions: &&[Decision], out: &mut JsonOut<'_>) -> serde_json::Result<()> {
    out.bytes.push(b'[');
    for (i, decision) in decisions.iter().enumerate() {
        if i > 0 {
            out.bytes.push(b',');
        }
        decision.write_json(out.bytes)?;
    }
    out.bytes.push(b']');
    Ok(())
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

    /// What its line in `conversations.jsonl` says.
    pub(super) fn audit_fields(&self) -> AuditLine<'_> {
        let links = &self.links;
        AuditLine {
            schema_version: self.schema_version,
            source: &self.source,
            line: self.line,
            id: &self.id,
            path: &self.path,
            account: self.account,
            decisions: &self.decisions,
            digest: &self.digest,
            records: (self.records != 1).then_some(self.records),
            format: links
                .format
                .filter(|_| !is_chat(&links.format))
                .map(|f| f.name()),
            title: links.title.as_deref(),
            source_id: links.source_id.as_deref(),
            parent_source_id: links.parent_source_id.as_deref(),
            source_version: links.source_version.as_deref(),
            source_cwd: links.source_cwd.as_deref(),
        }
    }

    /// Its line in `conversations.jsonl`, without the line break (the fuzz targets compare
    /// two runs' lines).
    pub fn audit_bytes(&self) -> Option<Vec<u8>> {
        let mut bytes = Vec::with_capacity(512);
        self.audit_fields()
            .write_json(&mut JsonOut::new(&mut bytes))
            .ok()?;
        Some(bytes)
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
    /// buffer again ([`crate::convert::recycle`]), so no rollout is freed across threads and
    /// the next one is rendered into warm memory (`samples/BENCHMARKS.md`).
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

pub(super) fn is_chat(format: &Option<SourceFormat>) -> bool {
    format.is_none_or(|format| format == SourceFormat::CHAT)
}
