//! What the pipeline writes into, chosen once per run ([`for_format`]): the Codex home (one
//! rollout per conversation, placed by the writer pool as its batch comes in) or the Responses
//! bodies' files (one file per input file, appended to in input order). As ripgrep's searcher
//! reports to a `Sink` that each printer implements, the pipeline asks an [`Output`] what
//! depends on the format (on the workers) and hands each conversation to its [`Sink`] (on the
//! collector), and never matches on the format itself.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::model::responses::{output_path, Format, ResponsesOptions};
use crate::rules::Marker;
use crate::validate::Violation;

use super::bodies::BodyFile;
use super::guard::key;
use super::session_index::IndexEntry;
use super::{Guard, Home, Manifest, OutputError, Placed};

/// A format of output, as a home's manifest records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    Codex,
    Responses,
}

impl OutputKind {
    /// The name `--format` takes, and the manifest and `shard.json` record.
    pub fn name(self) -> &'static str {
        match self {
            OutputKind::Codex => "codex",
            OutputKind::Responses => "responses",
        }
    }

    /// The kind a manifest entry records: none is Codex (entries written before the format
    /// was recorded), any other name the Responses bodies.
    pub fn recorded(name: Option<&str>) -> OutputKind {
        match name {
            None | Some("codex") => OutputKind::Codex,
            Some(_) => OutputKind::Responses,
        }
    }

    /// What a manifest entry records: nothing for Codex, so that homes written before stay
    /// byte-identical.
    pub fn to_record(self) -> Option<String> {
        match self {
            OutputKind::Codex => None,
            OutputKind::Responses => Some(self.name().to_string()),
        }
    }
}

/// What the pipeline asks of the output it writes; shared by every worker.
pub trait Output: Sync {
    /// The format the renderer writes.
    fn format(&self) -> Format;
    fn kind(&self) -> OutputKind;
    /// Each conversation is a file of its own, placed as its batch comes in (the writer pool,
    /// the placement gate), and an input file may be split among shards; otherwise one file
    /// per input file holds its conversations, written by one collector.
    fn file_per_conversation(&self) -> bool;
    /// The output file of the input file `source_key`, when there is one per input file.
    fn file_of_input(&self, source_key: &str) -> Option<String>;
    /// Whether the output writes the record's field `name` (it is then not ignored).
    fn writes_record_field(&self, name: &str) -> bool;
    /// The invariants one conversation's bytes break, and what those bytes are called.
    fn check(&self, bytes: &[u8], id: &str, markers: &[Marker]) -> (Vec<Violation>, &'static str);
    /// The output files of the input files (`(key, origin)`, in run order) whose usual one is
    /// taken, by index.
    fn renamed(&self, inputs: &[(&str, &str)], manifest: &Manifest) -> HashMap<usize, String>;
    /// The collector's side, for one run (`dry_run`: nothing is written).
    fn sink<'h>(
        &self,
        home: &'h Home,
        guard: &'h Guard,
        dry_run: bool,
        renamed: HashMap<usize, String>,
    ) -> Box<dyn Sink + 'h>;
}

/// One converted conversation as the collector hands it on.
pub struct Written<'a> {
    /// Where it goes, under the home.
    pub relative: &'a Path,
    pub bytes: &'a [u8],
    pub id: &'a str,
    /// Whether a writer placed it (a file of its own).
    pub placed: bool,
    /// The title its source gave it, and its start.
    pub title: Option<&'a str>,
    pub started_at: Option<&'a str>,
}

/// The collector's side of an [`Output`]: conversations in input order, each input file's end,
/// the run's end.
pub trait Sink: Send {
    /// The output file of input file `file` when its usual one is taken.
    fn renamed(&self, file: usize) -> Option<&str>;
    fn conversation(&mut self, file: usize, written: Written<'_>) -> Result<(), OutputError>;
    /// Input file `file` is read: its output file placed, when it has one (its path, what
    /// placing did, the digest on disk).
    fn file_done(&mut self, file: usize) -> Result<Option<(String, Placed, String)>, OutputError>;
    /// Every conversation is in: what is written last.
    fn finish(&mut self) -> Result<(), OutputError>;
}

/// The output of `format`.
pub fn for_format(format: Format) -> Box<dyn Output> {
    match format {
        Format::Codex => Box::new(CodexHome),
        Format::Responses(options) => Box::new(ResponsesFiles { options }),
    }
}

/// The Codex home: a rollout per conversation, thread names in `session_index.jsonl`.
pub(crate) struct CodexHome;

impl Output for CodexHome {
    fn format(&self) -> Format {
        Format::Codex
    }

    fn kind(&self) -> OutputKind {
        OutputKind::Codex
    }

    fn file_per_conversation(&self) -> bool {
        true
    }

    fn file_of_input(&self, _source_key: &str) -> Option<String> {
        None
    }

    fn writes_record_field(&self, _name: &str) -> bool {
        false
    }

    fn check(&self, bytes: &[u8], id: &str, markers: &[Marker]) -> (Vec<Violation>, &'static str) {
        (crate::validate::check(bytes, Some(id), markers), "rollout")
    }

    fn renamed(&self, _inputs: &[(&str, &str)], _manifest: &Manifest) -> HashMap<usize, String> {
        HashMap::new()
    }

    fn sink<'h>(
        &self,
        home: &'h Home,
        _guard: &'h Guard,
        dry_run: bool,
        _renamed: HashMap<usize, String>,
    ) -> Box<dyn Sink + 'h> {
        Box::new(ThreadNames {
            home,
            dry_run,
            names: Vec::new(),
        })
    }
}

/// The titles of the rollouts placed, appended to Codex's thread names at the run's end.
struct ThreadNames<'h> {
    home: &'h Home,
    dry_run: bool,
    names: Vec<IndexEntry>,
}

impl Sink for ThreadNames<'_> {
    fn renamed(&self, _file: usize) -> Option<&str> {
        None
    }

    fn conversation(&mut self, _file: usize, written: Written<'_>) -> Result<(), OutputError> {
        if let (true, Some(title)) = (written.placed, written.title) {
            self.names.push(IndexEntry {
                id: written.id.to_string(),
                thread_name: title.to_string(),
                updated_at: written.started_at.unwrap_or_default().to_string(),
            });
        }
        Ok(())
    }

    fn file_done(&mut self, _file: usize) -> Result<Option<(String, Placed, String)>, OutputError> {
        Ok(None)
    }

    fn finish(&mut self) -> Result<(), OutputError> {
        if !self.dry_run {
            super::session_index::append(self.home, &self.names)?;
        }
        Ok(())
    }
}

/// The Responses bodies: one JSON Lines file per input file ([`super::bodies`]).
pub(crate) struct ResponsesFiles {
    pub options: ResponsesOptions,
}

impl Output for ResponsesFiles {
    fn format(&self) -> Format {
        Format::Responses(self.options)
    }

    fn kind(&self) -> OutputKind {
        OutputKind::Responses
    }

    fn file_per_conversation(&self) -> bool {
        false
    }

    fn file_of_input(&self, source_key: &str) -> Option<String> {
        Some(body_path(source_key, self.options.compress))
    }

    fn writes_record_field(&self, name: &str) -> bool {
        name == "tools" || name == "functions"
    }

    fn check(
        &self,
        bytes: &[u8],
        _id: &str,
        _markers: &[Marker],
    ) -> (Vec<Violation>, &'static str) {
        (crate::validate::responses::check_body(bytes), "body")
    }

    /// Two files whose names give the same output file (`x.jsonl` and `x.jsonl.zst`; a
    /// same-named export of another day, whose bodies the home holds) must not overwrite each
    /// other: the later gets a name of its own, `x.<8 hex of its origin>.jsonl`.
    fn renamed(&self, inputs: &[(&str, &str)], manifest: &Manifest) -> HashMap<usize, String> {
        let compress = self.options.compress;
        let mut used: HashSet<String> = HashSet::new();
        let mut out = HashMap::new();
        for (index, &(file_key, origin)) in inputs.iter().enumerate() {
            let usual = key(&output_path(file_key, compress));
            let taken = used.contains(&usual) || manifest.listed_by_other(&usual, origin);
            let path = if taken {
                let tag = format!(
                    "{:08x}",
                    crate::model::hash::xxh3_64(origin.as_bytes()) as u32
                );
                let suffix = if compress { ".jsonl.zst" } else { ".jsonl" };
                let stem = usual.strip_suffix(suffix).unwrap_or(&usual);
                let own = format!("{stem}.{tag}{suffix}");
                out.insert(index, own.clone());
                own
            } else {
                usual
            };
            used.insert(path);
        }
        out
    }

    fn sink<'h>(
        &self,
        home: &'h Home,
        guard: &'h Guard,
        dry_run: bool,
        renamed: HashMap<usize, String>,
    ) -> Box<dyn Sink + 'h> {
        Box::new(BodyFiles {
            home,
            guard,
            dry_run,
            compress: self.options.compress,
            renamed,
            open: HashMap::new(),
        })
    }
}

/// The bodies' files being written, by input file.
struct BodyFiles<'h> {
    home: &'h Home,
    guard: &'h Guard,
    dry_run: bool,
    compress: bool,
    renamed: HashMap<usize, String>,
    open: HashMap<usize, BodyFile>,
}

impl Sink for BodyFiles<'_> {
    fn renamed(&self, file: usize) -> Option<&str> {
        self.renamed.get(&file).map(String::as_str)
    }

    fn conversation(&mut self, file: usize, written: Written<'_>) -> Result<(), OutputError> {
        if self.dry_run {
            return Ok(());
        }
        let body = match self.open.entry(file) {
            Entry::Occupied(open) => open.into_mut(),
            Entry::Vacant(slot) => slot.insert(BodyFile::create(
                self.home,
                written.relative,
                self.compress,
            )?),
        };
        body.append(written.bytes)
    }

    fn file_done(&mut self, file: usize) -> Result<Option<(String, Placed, String)>, OutputError> {
        let Some(body) = self.open.remove(&file) else {
            return Ok(None);
        };
        let path = key(body.relative());
        let (placed, digest) = body.finish(self.home, self.guard)?;
        Ok(Some((path, placed, digest)))
    }

    fn finish(&mut self) -> Result<(), OutputError> {
        Ok(())
    }
}

/// [`output_path`] as text: the same for every record of a file, so each thread keeps the
/// last one it made (it was ~4 allocations and a walk of the path's components per record).
fn body_path(key: &str, compress: bool) -> String {
    thread_local! {
        static LAST: std::cell::RefCell<(String, bool, String)> = Default::default();
    }
    LAST.with_borrow_mut(|(last_key, last_compress, path)| {
        if last_key.as_str() != key || *last_compress != compress || path.is_empty() {
            *path = output_path(key, compress).display().to_string();
            key.clone_into(last_key);
            *last_compress = compress;
        }
        path.clone()
    })
}
