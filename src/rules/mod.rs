//! Rule files: load, merge, check; classify messages; the marker registry.
//!
//! In: TOML rule files (`rules/default.toml` is built in and used when no `--rules` is given).
//! Out: one resolved [`RuleSet`] that every later stage reads. Later files override scalar keys,
//! replace a rule or marker with the same id or kind in place, and put new rules *before* the
//! earlier files' rules (an override file's rule wins over the defaults). `enabled = false`
//! removes a rule or marker. Fails with a [`RulesError`] naming the file and line.

pub(crate) mod check;
pub(crate) mod file;
mod marker;
pub(crate) mod matcher;
pub(crate) mod path;
pub(crate) mod policy;
mod resolve;
pub(crate) mod template;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use regex::Regex;
use thiserror::Error;

pub use crate::model::rule::{Builtin, RuleRef};
use file::RuleFile;
pub use file::{Position, Slot};
pub use policy::{
    Citations, Compaction, KeepOrDrop, Sidechain, Thinking as ThinkingPolicy, ToolError,
    ToolWithoutCall, UnresolvedImage,
};
pub use policy::{
    DropOrQuarantine, EmptyMessage, InvalidUnicode, Lookalike, MissingOutput, OrphanOutput,
    PartAction, Policies, PolicyAction, PolicyDoc, PolicyId, Reasoning, Refusal, ReusedCallId,
    UnknownRole,
};

pub use marker::Marker;
pub use path::PathExpr;
pub(crate) use resolve::is_absolute_folder;
pub use resolve::{resolve, resolve_all};

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
    /// TOML syntax, an unknown key or a value of the wrong type.
    #[error("{path}:{line}:{column}: {message}{}", help_suffix(.help))]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
        /// How to fix it, when we can tell (`did you mean ...`, the expected keys).
        help: Option<String>,
        /// Bytes of the file the error points at.
        span: Range<usize>,
    },
    /// A value TOML accepts but rollover cannot use (a regex, a path, a marker).
    #[error("{path}:{line}: {message}")]
    Invalid {
        path: String,
        line: usize,
        message: String,
        /// Bytes of the file the error points at, when the value could be found in it.
        span: Option<Range<usize>>,
    },
    /// Keys no rule file sets; checked once every file is merged.
    #[error("{path}: {} not set by any rule file (the default rules set {}: pass `--rules default` first)", keys.join(", "), if keys.len() == 1 { "it" } else { "them" })]
    NotSet { path: String, keys: Vec<String> },
}

impl RulesError {
    /// The rule file the error is about.
    pub fn path(&self) -> &str {
        match self {
            RulesError::Read { path, .. }
            | RulesError::Syntax { path, .. }
            | RulesError::Invalid { path, .. }
            | RulesError::NotSet { path, .. } => path,
        }
    }
}

fn help_suffix(help: &Option<String>) -> String {
    help.as_ref().map(|h| format!("; {h}")).unwrap_or_default()
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
    pub role_aliases: RoleAliases,
    pub id_at: Vec<PathExpr>,
    pub created_at: Vec<PathExpr>,
    pub model_at: Vec<PathExpr>,
    pub reply_at: Vec<PathExpr>,
    pub finished: Vec<FinishedSignal>,
    /// The tags of ShareGPT datasets (`[input.sharegpt]`).
    pub sharegpt: ShareGptTags,
    /// When no `messages_at` path holds messages, look for them by shape (`--no-guess` turns
    /// it off).
    pub guess: bool,
}

impl InputRules {
    /// Paths given beside the rule files (`--messages-at`), tried before the files' own.
    pub fn prefer_messages_at(&mut self, mut paths: Vec<PathExpr>) {
        paths.append(&mut self.messages_at);
        self.messages_at = paths;
    }
}

/// The `[input] role_aliases` table (a role as written -> the role it stands for), with a
/// filter that answers "no alias" for most roles without a lookup: every message's role is
/// looked up, and the B-tree's key compares cost 26 `memcmp` calls a small record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleAliases {
    table: BTreeMap<String, String>,
    /// One bit a name's length and first byte ([`RoleAliases::bit`]) for every aliased name.
    names: u64,
}

impl RoleAliases {
    pub fn new(table: BTreeMap<String, String>) -> RoleAliases {
        let names = table.keys().fold(0, |names, name| names | Self::bit(name));
        RoleAliases { table, names }
    }

    fn bit(name: &str) -> u64 {
        let first = name.as_bytes().first().copied().unwrap_or(0);
        1 << ((name.len() * 7 + usize::from(first)) % 64)
    }

    /// The role `role` stands for, when an alias names it.
    #[inline]
    pub fn get(&self, role: &str) -> Option<&String> {
        if self.names & Self::bit(role) == 0 {
            return None;
        }
        self.table.get(role)
    }
}

/// The tags of a ShareGPT dataset: which key holds the role and the text, and the role names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGptTags {
    pub role_tag: String,
    pub content_tag: String,
    pub user_tag: String,
    pub assistant_tag: String,
    pub observation_tag: String,
    pub function_tag: String,
    pub system_tag: String,
}

impl Default for ShareGptTags {
    /// LLaMA-Factory's defaults.
    fn default() -> Self {
        ShareGptTags {
            role_tag: "from".into(),
            content_tag: "value".into(),
            user_tag: "human".into(),
            assistant_tag: "gpt".into(),
            observation_tag: "observation".into(),
            function_tag: "function_call".into(),
            system_tag: "system".into(),
        }
    }
}

/// Session-meta defaults.
#[derive(Debug, Clone)]
pub struct SessionDefaults {
    pub cwd: String,
    /// `cwd` wins over the folder a source records (a Claude Code session's `cwd`): set by
    /// `convert --cwd`, which names the folder of every session.
    pub cwd_overrides_source: bool,
    /// The model of a Responses body whose record names none (`convert --model`).
    pub default_model: Option<String>,
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
    /// Each rule file's text, in the order of `names`: what a run keeps of its rules, so
    /// that `explain` reads a session with them whatever became of the files.
    pub texts: Vec<String>,
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
        let trimmed = text.trim();
        self.markers.iter().find(|m| m.wraps_trimmed(trimmed))
    }

    pub fn marker(&self, kind: &str) -> Option<&Marker> {
        self.markers.iter().find(|m| m.kind == kind)
    }
}

/// Reads and parses one rule file (`default` is the built-in one).
pub fn load_file(path: &Path) -> Result<LoadedFile, RulesError> {
    let (name, text) = read_source(path)?;
    parse_text(&name, &text)
}

/// The name and text of a rule file (`default` is the built-in one).
pub fn read_source(path: &Path) -> Result<(String, String), RulesError> {
    if path.as_os_str() == DEFAULT_RULES_NAME && !path.exists() {
        return Ok((DEFAULT_RULES_NAME.to_string(), DEFAULT_RULES.to_string()));
    }
    let text = std::fs::read_to_string(path).map_err(|source| RulesError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok((path.display().to_string(), text))
}

/// Parses rule-file text; the first syntax error or unknown key comes back with its line.
pub fn parse_text(name: &str, text: &str) -> Result<LoadedFile, RulesError> {
    parse_text_all(name, text).map_err(|errors| {
        errors
            .into_iter()
            .next()
            .unwrap_or_else(|| RulesError::NotSet {
                path: name.to_string(),
                keys: Vec::new(),
            })
    })
}

/// How many errors one file may report: each one found costs a parse of the file.
const MAX_ERRORS_PER_FILE: usize = 50;

/// Parses rule-file text and reports every unknown key and wrong value, not only the first.
///
/// A TOML syntax error stops the parser, so it is the only error reported. Errors of the
/// schema (unknown keys, wrong types, unknown variants) stop serde at the first; so each
/// line in error is blanked (offsets kept) and the text parsed again, until it passes.
pub fn parse_text_all(name: &str, text: &str) -> Result<LoadedFile, Vec<RulesError>> {
    parse_text_partial(name, text).map_err(|partial| partial.errors)
}

/// A rule file with schema errors, as far as it could be read.
#[derive(Debug)]
pub struct Partial {
    pub errors: Vec<RulesError>,
    /// The file with its lines in error blanked, when the rest parses: what `rules check`
    /// checks further (regexes, roles), so that one unknown table does not hide them.
    pub rest: Option<Box<LoadedFile>>,
    /// The byte ranges of the tables that held a blanked line: what the rest says of them is
    /// an artefact of the blanking (a rule whose `slot` line was blanked has no slot).
    pub tainted: Vec<Range<usize>>,
}

/// [`parse_text_all`], keeping what could be read of a file in error.
pub fn parse_text_partial(name: &str, text: &str) -> Result<LoadedFile, Partial> {
    if let Err(err) = text.parse::<toml::Table>() {
        return Err(Partial {
            errors: vec![syntax_error(name, text, &err)],
            rest: None,
            tainted: Vec::new(),
        });
    }
    let mut errors: Vec<RulesError> = Vec::new();
    let mut work = text.as_bytes().to_vec();
    let mut seen: Vec<Range<usize>> = Vec::new();
    let mut tainted: Vec<Range<usize>> = Vec::new();
    let mut rest = None;
    while errors.len() < MAX_ERRORS_PER_FILE {
        let current = String::from_utf8_lossy(&work).into_owned();
        match toml::from_str::<RuleFile>(&current) {
            Ok(file) if errors.is_empty() => {
                return Ok(LoadedFile {
                    name: name.to_string(),
                    text: text.to_string(),
                    file,
                })
            }
            Ok(file) => {
                rest = Some(Box::new(LoadedFile {
                    name: name.to_string(),
                    text: text.to_string(),
                    file,
                }));
                break;
            }
            Err(err) => {
                let span = err.span();
                errors.push(syntax_error(name, text, &err));
                let Some(span) = span else { break };
                if seen.contains(&span) {
                    break;
                }
                // An unknown table goes whole: its keys, left under the table before it,
                // would each be reported again as that table's unknown fields.
                let section = table_of(&work, span.start);
                if header_at(&work, span.start) {
                    blank_lines(&mut work, &section);
                } else {
                    blank_lines(&mut work, &span);
                }
                tainted.push(section);
                seen.push(span);
            }
        }
    }
    Err(Partial {
        errors,
        rest,
        tainted,
    })
}

/// Whether the line holding `offset` is a table header (`[name]`, `[[name]]`).
fn header_at(text: &[u8], offset: usize) -> bool {
    let (start, end) = line_around(text, offset);
    is_header(&text[start..end])
}

fn is_header(line: &[u8]) -> bool {
    let line = String::from_utf8_lossy(line);
    let code = line.split('#').next().unwrap_or_default().trim();
    code.starts_with('[') && code.ends_with(']') && !code.contains('=')
}

/// The bounds of the line holding `offset` (without its newline).
fn line_around(text: &[u8], offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let start = text[..offset]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let end = text[offset..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |i| offset + i);
    (start, end)
}

/// The table holding `offset`: from its header line (or the start of the text) to the
/// newline before the next header line (or the end).
fn table_of(text: &[u8], offset: usize) -> Range<usize> {
    let (mut start, _) = line_around(text, offset);
    loop {
        let (s, e) = line_around(text, start);
        if start == 0 || is_header(&text[s..e]) {
            break;
        }
        start = line_around(text, start - 1).0;
    }
    let (_, mut line_end) = line_around(text, offset);
    let mut stop = text.len();
    while line_end < text.len() {
        let (s, e) = line_around(text, line_end + 1);
        if is_header(&text[s..e]) {
            // The newline before it: blanking stops short of the next header.
            stop = s - 1;
            break;
        }
        line_end = e;
    }
    start..stop
}

/// Replaces every line `span` touches by spaces, keeping every offset of the text.
fn blank_lines(text: &mut [u8], span: &Range<usize>) {
    let start = text[..span.start.min(text.len())]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let end = text[span.end.min(text.len())..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(text.len(), |i| span.end + i);
    for byte in &mut text[start..end] {
        if *byte != b'\n' {
            *byte = b' ';
        }
    }
}

fn syntax_error(name: &str, text: &str, err: &toml::de::Error) -> RulesError {
    let span = err.span().unwrap_or(0..0);
    let (line, column) = line_col(text, span.start);
    let (message, help) = split_message(err.message());
    RulesError::Syntax {
        path: name.to_string(),
        line,
        column,
        message,
        help,
        span,
    }
}

/// `unknown field `x`, expected one of ...` becomes the cause and the fix: the closest
/// expected name when one is close, else the list. A multi-line TOML message keeps its first
/// line as the cause.
fn split_message(message: &str) -> (String, Option<String>) {
    let message = message.trim();
    if let Some((cause, expected)) = message.split_once(", expected ") {
        let given = backticked(cause).into_iter().next();
        let names = backticked(expected);
        let closest = given.and_then(|given| {
            names
                .iter()
                .map(|name| (edit_distance(given, name), *name))
                .filter(|(d, name)| *d <= 2.max(name.len() / 4))
                .min()
        });
        let help = match closest {
            Some((_, name)) => format!("did you mean `{name}`?"),
            None => format!("expected {expected}"),
        };
        return (cause.to_string(), Some(help));
    }
    match message.split_once('\n') {
        Some((first, rest)) => (first.to_string(), Some(rest.trim().replace('\n', "; "))),
        None => (message.to_string(), None),
    }
}

/// The names written between backticks.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The one of `names` closest to `given`, when it is close enough to be a typo of it.
pub(crate) fn closest<'a>(
    given: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    names
        .into_iter()
        .map(|name| (edit_distance(given, name), name))
        .filter(|(d, name)| *d <= 2.max(name.len() / 4))
        .min()
        .map(|(_, name)| name)
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map(|i| offset - i).unwrap_or(offset + 1);
    (line, column)
}

/// Where a value is written, as toml spans it ([`toml::Spanned`]), narrowed to a string's
/// text: its quotes (one or three, basic or literal) left out.
pub fn value_span(text: &str, span: Range<usize>) -> Range<usize> {
    let written = text.get(span.clone()).unwrap_or_default();
    for quote in ["\"\"\"", "'''", "\"", "'"] {
        if written.len() >= 2 * quote.len()
            && written.starts_with(quote)
            && written.ends_with(quote)
        {
            return span.start + quote.len()..span.end - quote.len();
        }
    }
    span
}

/// An error about the value `file` writes at `span` (a [`toml::Spanned`] span).
pub(crate) fn invalid(file: &LoadedFile, span: Range<usize>, message: String) -> RulesError {
    let span = value_span(&file.text, span);
    RulesError::Invalid {
        path: file.name.clone(),
        line: line_col(&file.text, span.start).0,
        message,
        span: Some(span),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The filter only ever skips a lookup that finds nothing: every role, aliased or not,
        /// gets what the table says.
        #[test]
        fn role_aliases_answer_as_their_table(
            table in proptest::collection::btree_map("[a-z_]{0,12}", "[a-z]{1,9}", 0..12),
            asked in proptest::collection::vec("[a-z_]{0,12}", 0..24),
        ) {
            let aliases = RoleAliases::new(table.clone());
            for role in asked.iter().chain(table.keys()).map(String::as_str)
                .chain(["user", "assistant", "system", "tool", "developer", "function", ""])
            {
                proptest::prop_assert_eq!(aliases.get(role), table.get(role), "{}", role);
            }
        }
    }

    #[test]
    fn an_unknown_key_close_to_a_known_one_suggests_it() {
        let (cause, help) = split_message(
            "unknown field `orphan_ouput`, expected one of `missing_output`, `orphan_output`",
        );
        assert_eq!(cause, "unknown field `orphan_ouput`");
        assert_eq!(help.as_deref(), Some("did you mean `orphan_output`?"));
    }

    #[test]
    fn an_unknown_key_far_from_every_known_one_lists_them() {
        let (_, help) = split_message("unknown field `bogus`, expected `a` or `b`");
        assert_eq!(help.as_deref(), Some("expected `a` or `b`"));
    }

    /// The built-in rules, then `text` as `name`.
    fn over_defaults(name: &str, text: &str) -> Vec<LoadedFile> {
        vec![
            parse_text(DEFAULT_RULES_NAME, DEFAULT_RULES).unwrap(),
            parse_text(name, text).unwrap(),
        ]
    }

    #[test]
    fn an_error_points_at_its_value_even_when_the_same_text_is_written_earlier() {
        let text = "# the pattern \"([\" is unclosed on purpose\n[[rule]]\nid = \"r1\"\ndescription = \"([\"\nrole = [\"system\"]\nregex = \"([\"\nslot = \"drop\"\n";
        let errors = resolve_all(&over_defaults("t.toml", text))
            .err()
            .unwrap_or_default();
        let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            shown,
            ["t.toml:6: rule `r1`: invalid text regex: unclosed character class"]
        );
        let Some(RulesError::Invalid {
            span: Some(span), ..
        }) = errors.first()
        else {
            panic!("{errors:?}");
        };
        assert_eq!(span.start, text.rfind("([").unwrap());
        assert_eq!(&text[span.clone()], "([");
    }

    #[test]
    fn a_forbidden_policy_value_points_at_the_file_and_line_that_set_it() {
        let text = "[policy]\n# file_part = \"keep\" is refused\nfile_part = \"keep\"\n";
        let errors = resolve_all(&over_defaults("mine.toml", text))
            .err()
            .unwrap_or_default();
        let shown: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(shown.len(), 1, "{shown:?}");
        assert!(
            shown[0].starts_with("mine.toml:3: policy.file_part cannot be `Keep`"),
            "{shown:?}"
        );
    }

    #[test]
    fn a_finding_points_at_its_rule_even_when_its_id_is_written_earlier() {
        let text = "[[rule]]\nid = \"catch-all\"\ndescription = 'catches \"late\" too'\nrole = [\"system\"]\nslot = \"developer\"\n\n[[rule]]\nid = \"late\"\nrole = [\"system\"]\nslot = \"drop\"\n";
        let files = over_defaults("mine.toml", text);
        let rules = resolve(&files).unwrap();
        let found: Vec<(String, usize)> = check::check(&rules, &files)
            .into_iter()
            .filter(|f| f.message.starts_with("rule `late` is unreachable"))
            .map(|f| (f.file, f.line))
            .collect();
        assert_eq!(found, [("mine.toml".to_string(), 8)]);
    }

    #[test]
    fn every_unknown_key_of_a_file_is_reported() {
        let text = "[policy]\nbogus = 1\norphan_output = \"drop\"\nother = 2\n";
        let errors = parse_text_all("t.toml", text).err().unwrap_or_default();
        let lines: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with("t.toml:2:1: unknown field `bogus`"),
            "{lines:?}"
        );
        assert!(
            lines[1].starts_with("t.toml:4:1: unknown field `other`"),
            "{lines:?}"
        );
    }
}
