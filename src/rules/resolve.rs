//! Parsed rule files to one [`RuleSet`]: merge in order, then check what TOML cannot.
//!
//! Later files override scalar keys, replace a rule or marker with the same id or kind in
//! place, and put new rules before the earlier files' rules. Every required key must be set by
//! some file; the first one missing is the error.

use std::collections::BTreeMap;

use regex::Regex;

use super::file::{InputSection, MarkerEntry, PhaseSection, RuleEntry, SessionSection};
use super::policy::{override_opt, PolicySection};
use super::{
    invalid, FinishedSignal, InputRules, LoadedFile, Marker, PathExpr, Position, Rule, RuleSet,
    RulesError, SessionDefaults, Slot,
};

/// The files' sections merged in order, before any check. Markers and rules keep the index of
/// the file that last defined them, for error lines.
#[derive(Default)]
struct Merged {
    names: Vec<String>,
    digests: Vec<String>,
    codex_version: Option<String>,
    input: InputSection,
    session: SessionSection,
    phase: PhaseSection,
    policy: PolicySection,
    prefixes: Option<Vec<String>>,
    markers: Vec<(MarkerEntry, usize)>,
    rules: Vec<(RuleEntry, usize)>,
}

/// Merges parsed files in order into one rule set, checking values that TOML cannot.
pub fn resolve(files: &[LoadedFile]) -> Result<RuleSet, RulesError> {
    let merged = merge(files);
    let missing = |what: &str| not_set(files, what);
    let markers = resolve_markers(files, merged.markers)?;
    let rules = resolve_rules(files, merged.rules, &markers)?;
    let first = files.first().ok_or_else(|| missing("any rule"))?;
    let timestamp_ms = resolve_timestamp(first, &merged.session, missing)?;
    let finished = resolve_finished(first, &merged.phase)?;
    let policy = merged.policy.resolve(missing)?;
    policy
        .check()
        .map_err(|(key, message)| invalid(first, key, message))?;
    let codex_version = merged
        .codex_version
        .ok_or_else(|| missing("meta.codex_version"))?;
    // Paths are checked against the last file that has an [input] section (for its lines).
    let input_file = files
        .iter()
        .rev()
        .find(|f| f.file.input.is_some())
        .unwrap_or(first);
    let input = resolve_input(input_file, &merged.input, finished, missing)?;
    let s = merged.session;
    Ok(RuleSet {
        names: merged.names,
        digests: merged.digests,
        codex_version,
        input,
        session: SessionDefaults {
            cwd: s.cwd.ok_or_else(|| missing("session.cwd"))?,
            originator: s.originator.ok_or_else(|| missing("session.originator"))?,
            cli_version: s
                .cli_version
                .ok_or_else(|| missing("session.cli_version"))?,
            source: s.source,
            model_provider: s.model_provider,
            timestamp_ms,
        },
        infer_phase: merged.phase.infer.unwrap_or(true),
        policy,
        markers,
        developer_prefixes: merged.prefixes.unwrap_or_default(),
        rules,
    })
}

/// `what` is set by no file: point at the last file, and at the defaults.
fn not_set(files: &[LoadedFile], what: &str) -> RulesError {
    RulesError::Invalid {
        path: files.last().map(|f| f.name.clone()).unwrap_or_default(),
        line: 1,
        message: format!("`{what}` is not set by any rule file (the default rules set it: pass `--rules default` first)"),
    }
}

fn merge(files: &[LoadedFile]) -> Merged {
    let mut m = Merged::default();
    for (file_index, loaded) in files.iter().enumerate() {
        let f = &loaded.file;
        m.names.push(loaded.name.clone());
        m.digests.push(text_digest(&loaded.text));
        if let Some(meta) = &f.meta {
            override_opt(&mut m.codex_version, &meta.codex_version);
        }
        if let Some(s) = &f.input {
            merge_input(&mut m.input, s);
        }
        if let Some(s) = &f.session {
            merge_session(&mut m.session, s);
        }
        if let Some(s) = &f.phase {
            override_opt(&mut m.phase.infer, &s.infer);
            override_opt(&mut m.phase.finished, &s.finished);
        }
        if let Some(s) = &f.policy {
            m.policy.merge(s);
        }
        if let Some(d) = &f.developer {
            override_opt(&mut m.prefixes, &d.prefixes);
        }
        for marker in &f.marker {
            match m.markers.iter_mut().find(|(e, _)| e.kind == marker.kind) {
                Some(existing) => *existing = merge_marker(&existing.0, marker, file_index),
                None => m.markers.push((marker.clone(), file_index)),
            }
        }
        let mut new_rules = Vec::new();
        for rule in &f.rule {
            match m.rules.iter_mut().find(|(r, _)| r.id == rule.id) {
                Some(existing) => *existing = (rule.clone(), file_index),
                None => new_rules.push((rule.clone(), file_index)),
            }
        }
        new_rules.append(&mut m.rules);
        m.rules = new_rules;
    }
    m
}

fn resolve_markers(
    files: &[LoadedFile],
    markers: Vec<(MarkerEntry, usize)>,
) -> Result<Vec<Marker>, RulesError> {
    let mut resolved = Vec::new();
    for (m, file_index) in markers {
        if m.enabled == Some(false) {
            continue;
        }
        let file = &files[file_index];
        let (Some(start), Some(end)) = (m.start, m.end) else {
            let message = format!("marker `{}` needs `start` and `end`", m.kind);
            return Err(invalid(file, &m.kind, message));
        };
        if start.trim().is_empty() || end.trim().is_empty() {
            let message = format!("marker `{}` has an empty start or end", m.kind);
            return Err(invalid(file, &m.kind, message));
        }
        let template = m
            .template
            .unwrap_or_else(|| format!("{start}\n{{text}}\n{end}"));
        let separate = m.separate.unwrap_or(false);
        resolved.push(Marker::new(m.kind, start, end, template, separate));
    }
    Ok(resolved)
}

fn resolve_rules(
    files: &[LoadedFile],
    rules: Vec<(RuleEntry, usize)>,
    markers: &[Marker],
) -> Result<Vec<Rule>, RulesError> {
    let mut resolved = Vec::new();
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
            check_contextual_kind(&r, markers)
                .map_err(|message| invalid(file, &needle, message))?;
        }
        resolved.push(Rule {
            name: compile(file, &r.id, "name", &r.name)?,
            regex: compile(file, &r.id, "text", &r.regex)?,
            model: compile(file, &r.id, "model", &r.model)?,
            source: compile(file, &r.id, "source", &r.source)?,
            roles: r.role.unwrap_or_default(),
            position: r.position.unwrap_or(Position::Any),
            index: r.index,
            first_in_block: r.first_in_block.unwrap_or(false),
            prefix: r.prefix,
            wrapped: r.wrapped,
            wrapped_kind: r.wrapped_kind,
            min_len: r.min_len,
            max_len: r.max_len,
            slot,
            kind: r.kind,
            template: r.template,
            reason: r.reason,
            origin: file.name.clone(),
            id: r.id,
        });
    }
    Ok(resolved)
}

/// A rule into `contextual_user` names a registered marker kind, or takes the wrapping one.
fn check_contextual_kind(r: &RuleEntry, markers: &[Marker]) -> Result<(), String> {
    match &r.kind {
        Some(kind) if markers.iter().any(|m| &m.kind == kind) => Ok(()),
        Some(kind) => Err(format!(
            "rule `{}`: kind `{kind}` is not a registered marker",
            r.id
        )),
        None if r.wrapped == Some(true) => Ok(()),
        None => Err(format!(
            "rule `{}`: slot contextual_user needs a `kind` (or `wrapped = true`)",
            r.id
        )),
    }
}

fn resolve_timestamp(
    first: &LoadedFile,
    session: &SessionSection,
    missing: impl Fn(&str) -> RulesError,
) -> Result<i64, RulesError> {
    let text = session
        .timestamp
        .as_deref()
        .ok_or_else(|| missing("session.timestamp"))?;
    crate::model::time::parse_rfc3339_ms(text).ok_or_else(|| {
        let message = format!("session.timestamp `{text}` is not an RFC 3339 time");
        invalid(first, text, message)
    })
}

fn resolve_finished(
    first: &LoadedFile,
    phase: &PhaseSection,
) -> Result<Vec<FinishedSignal>, RulesError> {
    let entries = phase.finished.as_deref().unwrap_or_default();
    entries
        .iter()
        .map(|f| {
            PathExpr::parse(&f.path)
                .map(|path| FinishedSignal {
                    path,
                    equals: f.equals.clone(),
                })
                .map_err(|msg| invalid(first, &f.path, format!("phase.finished: {msg}")))
        })
        .collect()
}

fn resolve_input(
    file: &LoadedFile,
    input: &InputSection,
    finished: Vec<FinishedSignal>,
    missing: impl Fn(&str) -> RulesError,
) -> Result<InputRules, RulesError> {
    let messages_at = input
        .messages_at
        .as_deref()
        .ok_or_else(|| missing("input.messages_at"))?;
    let optional = |key: &str, list: &Option<Vec<String>>| {
        paths(file, key, list.as_deref().unwrap_or_default())
    };
    Ok(InputRules {
        messages_at: paths(file, "input.messages_at", messages_at)?,
        role_aliases: input.role_aliases.clone().unwrap_or_default(),
        id_at: optional("input.id_at", &input.id_at)?,
        created_at: optional("input.created_at", &input.created_at)?,
        model_at: optional("input.model_at", &input.model_at)?,
        reply_at: optional("input.reply_at", &input.reply_at)?,
        finished,
        guess: true,
    })
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
            let message = format!("rule `{rule}`: invalid {what} regex: {err}");
            invalid(file, p, message)
        }),
    }
}

fn paths(file: &LoadedFile, key: &str, list: &[String]) -> Result<Vec<PathExpr>, RulesError> {
    list.iter()
        .map(|p| PathExpr::parse(p).map_err(|msg| invalid(file, p, format!("{key}: {msg}"))))
        .collect()
}

fn merge_input(t: &mut InputSection, s: &InputSection) {
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

fn merge_session(t: &mut SessionSection, s: &SessionSection) {
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

/// SHA-256 of a rule file's text, hex: the audit names the exact rules a run used.
fn text_digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
