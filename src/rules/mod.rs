//! Rule files: load, merge, check; classify messages; the marker registry.
//!
//! In: TOML rule files (`rules/default.toml` is built in and used when no `--rules` is given).
//! Out: one resolved [`RuleSet`] that every later stage reads. Later files override scalar keys,
//! replace a rule or marker with the same id or kind in place, and put new rules *before* the
//! earlier files' rules (an override file's rule wins over the defaults). `enabled = false`
//! removes a rule or marker. Fails with a [`RulesError`] naming the file and line.

pub mod check;
pub mod file;
pub mod id;
mod marker;
pub mod matcher;
pub mod path;
pub mod policy;
mod resolve;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;
use thiserror::Error;

use file::RuleFile;
pub use file::{Position, Slot};
pub use id::{Builtin, RuleRef};
pub use policy::{
    DropOrQuarantine, EmptyMessage, InvalidUnicode, Lookalike, MissingOutput, OrphanOutput,
    PartAction, Policies, PolicyAction, PolicyDoc, PolicyId, Reasoning, Refusal, ReusedCallId,
    UnknownRole,
};

pub use marker::Marker;
pub use path::PathExpr;
pub use resolve::resolve;

/// The shipped default rules (target Codex 0.169), built into the binary.
pub const DEFAULT_RULES: &str = include_str!("../../rules/default.toml");
/// The name under which the built-in rules are shown and can be named with `--rules`.
pub const DEFAULT_RULES_NAME: &str = "default";

#[derive(Debug, Error)]
pub enum RulesError {
    #[error("cannot read rule file {path} (check the path given to --rules)")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}:{line}: {message}")]
    Invalid {
        path: String,
        line: usize,
        message: String,
    },
}

/// One rule file as read: its name, text and parsed content.
#[derive(Debug, Clone)]
pub struct LoadedFile {
    pub name: String,
    pub text: String,
    pub file: RuleFile,
}

/// One classification rule, compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub roles: Vec<String>,
    pub position: Position,
    pub index: Option<usize>,
    pub first_in_block: bool,
    pub name: Option<Regex>,
    pub prefix: Option<String>,
    pub regex: Option<Regex>,
    pub wrapped: Option<bool>,
    pub wrapped_kind: Option<String>,
    pub min_len: Option<usize>,
    pub max_len: Option<usize>,
    pub model: Option<Regex>,
    pub source: Option<Regex>,
    pub slot: Slot,
    pub kind: Option<String>,
    pub template: Option<String>,
    pub reason: Option<String>,
    /// The file that defined it, for messages.
    pub origin: String,
}

/// A record field that says the conversation finished.
#[derive(Debug, Clone)]
pub struct FinishedSignal {
    pub path: PathExpr,
    pub equals: Option<String>,
}

/// Input-side settings: where to find messages and record facts.
#[derive(Debug, Clone)]
pub struct InputRules {
    pub messages_at: Vec<PathExpr>,
    pub role_aliases: BTreeMap<String, String>,
    pub id_at: Vec<PathExpr>,
    pub created_at: Vec<PathExpr>,
    pub model_at: Vec<PathExpr>,
    pub reply_at: Vec<PathExpr>,
    pub finished: Vec<FinishedSignal>,
    /// When no `messages_at` path holds messages, look for them by shape (`--no-guess` turns
    /// it off).
    pub guess: bool,
}

/// Session-meta defaults.
#[derive(Debug, Clone)]
pub struct SessionDefaults {
    pub cwd: String,
    pub originator: String,
    pub cli_version: String,
    pub source: Option<String>,
    pub model_provider: Option<String>,
    pub timestamp_ms: i64,
}

/// Everything the rule files decide, resolved.
#[derive(Debug, Clone)]
pub struct RuleSet {
    pub names: Vec<String>,
    /// SHA-256 of each rule file's text, in the order of `names`.
    pub digests: Vec<String>,
    pub codex_version: String,
    pub input: InputRules,
    pub session: SessionDefaults,
    pub infer_phase: bool,
    pub policy: Policies,
    pub markers: Vec<Marker>,
    pub developer_prefixes: Vec<String>,
    pub rules: Vec<Rule>,
}

impl RuleSet {
    /// The built-in default rules.
    pub fn builtin() -> Result<RuleSet, RulesError> {
        resolve(&[parse_text(DEFAULT_RULES_NAME, DEFAULT_RULES)?])
    }

    /// Loads the given files in order (`default` names the built-in file); no files: built-in.
    pub fn load(paths: &[PathBuf]) -> Result<RuleSet, RulesError> {
        if paths.is_empty() {
            return RuleSet::builtin();
        }
        let files = paths
            .iter()
            .map(|p| load_file(p))
            .collect::<Result<Vec<_>, _>>()?;
        resolve(&files)
    }

    /// The registered marker that wraps `text`, if any.
    pub fn marker_wrapping(&self, text: &str) -> Option<&Marker> {
        self.markers.iter().find(|m| m.wraps(text))
    }

    pub fn marker(&self, kind: &str) -> Option<&Marker> {
        self.markers.iter().find(|m| m.kind == kind)
    }
}

/// Reads and parses one rule file (`default` is the built-in one).
pub fn load_file(path: &Path) -> Result<LoadedFile, RulesError> {
    if path.as_os_str() == DEFAULT_RULES_NAME && !path.exists() {
        return parse_text(DEFAULT_RULES_NAME, DEFAULT_RULES);
    }
    let text = std::fs::read_to_string(path).map_err(|source| RulesError::Read {
        path: path.display().to_string(),
        source,
    })?;
    parse_text(&path.display().to_string(), &text)
}

/// Parses rule-file text; syntax errors and unknown keys come back with their line.
pub fn parse_text(name: &str, text: &str) -> Result<LoadedFile, RulesError> {
    let file: RuleFile = toml::from_str(text).map_err(|err| {
        let (line, column) = err
            .span()
            .map(|span| line_col(text, span.start))
            .unwrap_or((1, 1));
        RulesError::Syntax {
            path: name.to_string(),
            line,
            column,
            message: err.message().to_string(),
        }
    })?;
    Ok(LoadedFile {
        name: name.to_string(),
        text: text.to_string(),
        file,
    })
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map(|i| offset - i).unwrap_or(offset + 1);
    (line, column)
}

/// The line where `needle` first appears in the file, for errors found after parsing.
pub fn line_of(text: &str, needle: &str) -> usize {
    text.find(needle)
        .map(|at| line_col(text, at).0)
        .unwrap_or(1)
}

pub(crate) fn invalid(file: &LoadedFile, needle: &str, message: String) -> RulesError {
    RulesError::Invalid {
        path: file.name.clone(),
        line: line_of(&file.text, needle),
        message,
    }
}
