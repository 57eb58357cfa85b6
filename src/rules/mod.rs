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
pub mod matcher;
pub mod path;
pub mod policy;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;
use thiserror::Error;

use file::{MarkerEntry, RuleEntry, RuleFile};
pub use file::{Position, Slot};
pub use id::{Builtin, RuleRef};
use policy::override_opt;
pub use policy::{
    DropOrQuarantine, EmptyMessage, InvalidUnicode, Lookalike, MissingOutput, OrphanOutput,
    PartAction, Policies, PolicyAction, PolicyDoc, PolicyId, Reasoning, Refusal, ReusedCallId,
    UnknownRole,
};

pub use path::PathExpr;

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

/// A contextual-user fragment kind Codex recognises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    pub kind: String,
    pub start: String,
    pub end: String,
    pub template: String,
    pub separate: bool,
    start_lower: String,
    end_lower: String,
}

impl Marker {
    /// Codex's test: the trimmed text starts with `start` and ends with `end`, ignoring case.
    pub fn wraps(&self, text: &str) -> bool {
        let trimmed = text.trim();
        starts_with_ignore_case(trimmed, &self.start_lower)
            && ends_with_ignore_case(trimmed, &self.end_lower)
    }
}

fn starts_with_ignore_case(text: &str, lower_prefix: &str) -> bool {
    text.len() >= lower_prefix.len()
        && text.is_char_boundary(lower_prefix.len())
        && lowercases_to(&text[..lower_prefix.len()], lower_prefix)
}

fn ends_with_ignore_case(text: &str, lower_suffix: &str) -> bool {
    let Some(at) = text.len().checked_sub(lower_suffix.len()) else {
        return false;
    };
    text.is_char_boundary(at) && lowercases_to(&text[at..], lower_suffix)
}

/// `part.to_lowercase() == lower`, without allocating when `part` is ASCII (nearly always:
/// this runs for every user text against every marker, in convert and validate).
fn lowercases_to(part: &str, lower: &str) -> bool {
    if part.is_ascii() {
        part.bytes()
            .map(|b| b.to_ascii_lowercase())
            .eq(lower.bytes())
    } else {
        part.to_lowercase() == lower
    }
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

fn invalid(file: &LoadedFile, needle: &str, message: String) -> RulesError {
    RulesError::Invalid {
        path: file.name.clone(),
        line: line_of(&file.text, needle),
        message,
    }
}

fn compile(
    file: &LoadedFile,
    rule: &str,
    what: &str,
    pattern: &Option<String>,
) -> Result<Option<Regex>, RulesError> {
    match pattern {
        None => Ok(None),
        Some(p) => Regex::new(p).map(Some).map_err(|err| {
            invalid(
                file,
                p,
                format!("rule `{rule}`: invalid {what} regex: {err}"),
            )
        }),
    }
}

fn paths(file: &LoadedFile, key: &str, list: &[String]) -> Result<Vec<PathExpr>, RulesError> {
    list.iter()
        .map(|p| PathExpr::parse(p).map_err(|msg| invalid(file, p, format!("{key}: {msg}"))))
        .collect()
}

/// Merges parsed files in order into one rule set, checking values that TOML cannot.
pub fn resolve(files: &[LoadedFile]) -> Result<RuleSet, RulesError> {
    let mut names = Vec::new();
    let mut codex_version = None;
    let mut input = file::InputSection::default();
    let mut session = file::SessionSection::default();
    let mut phase = file::PhaseSection::default();
    let mut policy = policy::PolicySection::default();
    let mut prefixes: Option<Vec<String>> = None;
    let mut markers: Vec<(MarkerEntry, usize)> = Vec::new();
    let mut rules: Vec<(RuleEntry, usize)> = Vec::new();

    for (file_index, loaded) in files.iter().enumerate() {
        let f = &loaded.file;
        names.push(loaded.name.clone());
        if let Some(meta) = &f.meta {
            override_opt(&mut codex_version, &meta.codex_version);
        }
        if let Some(s) = &f.input {
            merge_input(&mut input, s);
        }
        if let Some(s) = &f.session {
            merge_session(&mut session, s);
        }
        if let Some(s) = &f.phase {
            override_opt(&mut phase.infer, &s.infer);
            override_opt(&mut phase.finished, &s.finished);
        }
        if let Some(s) = &f.policy {
            policy.merge(s);
        }
        if let Some(d) = &f.developer {
            override_opt(&mut prefixes, &d.prefixes);
        }
        for marker in &f.marker {
            match markers.iter_mut().find(|(m, _)| m.kind == marker.kind) {
                Some(existing) => *existing = merge_marker(&existing.0, marker, file_index),
                None => markers.push((marker.clone(), file_index)),
            }
        }
        let mut new_rules = Vec::new();
        for rule in &f.rule {
            match rules.iter_mut().find(|(r, _)| r.id == rule.id) {
                Some(existing) => *existing = (rule.clone(), file_index),
                None => new_rules.push((rule.clone(), file_index)),
            }
        }
        new_rules.extend(rules);
        rules = new_rules;
    }

    let last = files.last();
    let missing = |what: &str| {
        RulesError::Invalid {
        path: last.map(|f| f.name.clone()).unwrap_or_default(),
        line: 1,
        message: format!("`{what}` is not set by any rule file (the default rules set it: pass `--rules default` first)"),
    }
    };

    let mut resolved_markers = Vec::new();
    for (m, file_index) in markers {
        if m.enabled == Some(false) {
            continue;
        }
        let file = &files[file_index];
        let (Some(start), Some(end)) = (m.start.clone(), m.end.clone()) else {
            return Err(invalid(
                file,
                &m.kind,
                format!("marker `{}` needs `start` and `end`", m.kind),
            ));
        };
        if start.trim().is_empty() || end.trim().is_empty() {
            return Err(invalid(
                file,
                &m.kind,
                format!("marker `{}` has an empty start or end", m.kind),
            ));
        }
        let template = m
            .template
            .clone()
            .unwrap_or_else(|| format!("{start}\n{{text}}\n{end}"));
        resolved_markers.push(Marker {
            start_lower: start.trim().to_lowercase(),
            end_lower: end.trim().to_lowercase(),
            kind: m.kind.clone(),
            start,
            end,
            template,
            separate: m.separate.unwrap_or(false),
        });
    }

    let mut resolved_rules = Vec::new();
    for (r, file_index) in rules {
        if r.enabled == Some(false) {
            continue;
        }
        let file = &files[file_index];
        let needle = format!("\"{}\"", r.id);
        let slot = r
            .slot
            .ok_or_else(|| invalid(file, &needle, format!("rule `{}` has no `slot`", r.id)))?;
        if slot == Slot::ContextualUser {
            match &r.kind {
                Some(kind) if resolved_markers.iter().any(|m| &m.kind == kind) => {}
                Some(kind) => {
                    return Err(invalid(
                        file,
                        &needle,
                        format!("rule `{}`: kind `{kind}` is not a registered marker", r.id),
                    ))
                }
                None if r.wrapped == Some(true) => {}
                None => {
                    return Err(invalid(
                        file,
                        &needle,
                        format!(
                            "rule `{}`: slot contextual_user needs a `kind` (or `wrapped = true`)",
                            r.id
                        ),
                    ))
                }
            }
        }
        resolved_rules.push(Rule {
            name: compile(file, &r.id, "name", &r.name)?,
            regex: compile(file, &r.id, "text", &r.regex)?,
            model: compile(file, &r.id, "model", &r.model)?,
            source: compile(file, &r.id, "source", &r.source)?,
            id: r.id.clone(),
            roles: r.role.clone().unwrap_or_default(),
            position: r.position.unwrap_or(Position::Any),
            index: r.index,
            first_in_block: r.first_in_block.unwrap_or(false),
            prefix: r.prefix.clone(),
            wrapped: r.wrapped,
            wrapped_kind: r.wrapped_kind.clone(),
            min_len: r.min_len,
            max_len: r.max_len,
            slot,
            kind: r.kind.clone(),
            template: r.template.clone(),
            reason: r.reason.clone(),
            origin: file.name.clone(),
        });
    }

    let first = files.first().ok_or_else(|| missing("any rule"))?;
    let timestamp_text = session
        .timestamp
        .clone()
        .ok_or_else(|| missing("session.timestamp"))?;
    let timestamp_ms = crate::model::time::parse_rfc3339_ms(&timestamp_text).ok_or_else(|| {
        invalid(
            first,
            &timestamp_text,
            format!("session.timestamp `{timestamp_text}` is not an RFC 3339 time"),
        )
    })?;
    let finished = phase
        .finished
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|f| {
            PathExpr::parse(&f.path)
                .map(|path| FinishedSignal {
                    path,
                    equals: f.equals.clone(),
                })
                .map_err(|msg| invalid(first, &f.path, format!("phase.finished: {msg}")))
        })
        .collect::<Result<Vec<_>, _>>()?;

    let policies = policy.resolve(missing)?;
    policies
        .check()
        .map_err(|(key, message)| invalid(first, key, message))?;
    let input_files = files
        .iter()
        .rev()
        .find(|f| f.file.input.is_some())
        .unwrap_or(first);
    Ok(RuleSet {
        names,
        codex_version: codex_version.ok_or_else(|| missing("meta.codex_version"))?,
        input: InputRules {
            messages_at: paths(
                input_files,
                "input.messages_at",
                &input
                    .messages_at
                    .clone()
                    .ok_or_else(|| missing("input.messages_at"))?,
            )?,
            role_aliases: input.role_aliases.clone().unwrap_or_default(),
            id_at: paths(
                input_files,
                "input.id_at",
                &input.id_at.clone().unwrap_or_default(),
            )?,
            created_at: paths(
                input_files,
                "input.created_at",
                &input.created_at.clone().unwrap_or_default(),
            )?,
            model_at: paths(
                input_files,
                "input.model_at",
                &input.model_at.clone().unwrap_or_default(),
            )?,
            reply_at: paths(
                input_files,
                "input.reply_at",
                &input.reply_at.clone().unwrap_or_default(),
            )?,
            finished,
        },
        session: SessionDefaults {
            cwd: session.cwd.clone().ok_or_else(|| missing("session.cwd"))?,
            originator: session
                .originator
                .clone()
                .ok_or_else(|| missing("session.originator"))?,
            cli_version: session
                .cli_version
                .clone()
                .ok_or_else(|| missing("session.cli_version"))?,
            source: session.source.clone(),
            model_provider: session.model_provider.clone(),
            timestamp_ms,
        },
        infer_phase: phase.infer.unwrap_or(true),
        policy: policies,
        markers: resolved_markers,
        developer_prefixes: prefixes.unwrap_or_default(),
        rules: resolved_rules,
    })
}

fn merge_input(t: &mut file::InputSection, s: &file::InputSection) {
    override_opt(&mut t.messages_at, &s.messages_at);
    if let Some(aliases) = &s.role_aliases {
        t.role_aliases
            .get_or_insert_with(BTreeMap::new)
            .extend(aliases.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    override_opt(&mut t.id_at, &s.id_at);
    override_opt(&mut t.created_at, &s.created_at);
    override_opt(&mut t.model_at, &s.model_at);
    override_opt(&mut t.reply_at, &s.reply_at);
}

fn merge_session(t: &mut file::SessionSection, s: &file::SessionSection) {
    override_opt(&mut t.cwd, &s.cwd);
    override_opt(&mut t.originator, &s.originator);
    override_opt(&mut t.cli_version, &s.cli_version);
    override_opt(&mut t.source, &s.source);
    override_opt(&mut t.model_provider, &s.model_provider);
    override_opt(&mut t.timestamp, &s.timestamp);
}

fn merge_marker(old: &MarkerEntry, new: &MarkerEntry, file_index: usize) -> (MarkerEntry, usize) {
    let mut merged = old.clone();
    override_opt(&mut merged.start, &new.start);
    override_opt(&mut merged.end, &new.end);
    override_opt(&mut merged.template, &new.template);
    override_opt(&mut merged.separate, &new.separate);
    override_opt(&mut merged.enabled, &new.enabled);
    (merged, file_index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowercases_to_is_to_lowercase_then_equal() {
        let parts = [
            "", "<ENV>", "<env>", "<EnV", "<ENVX", "AbC", "abc", "ÀB", "àb", "İ", "i\u{307}", "ΟΣ",
            "ος", "οσ", "K", "\u{212A}", "k", "a\u{0}",
        ];
        for part in parts {
            for lower in parts.iter().map(|p| p.to_lowercase()) {
                assert_eq!(
                    lowercases_to(part, &lower),
                    part.to_lowercase() == lower,
                    "{part:?} {lower:?}"
                );
            }
        }
    }
}
