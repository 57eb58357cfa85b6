//! Parsed rule files to one [`RuleSet`]: merge in order, then check what TOML cannot.
//!
//! Later files override scalar keys, replace a rule or marker with the same id or kind in
//! place, and put new rules before the earlier files' rules. Every required key must be set by
//! some file; every error is
//! reported (`rules check` shows them all), the keys no file sets in one error.

use std::collections::BTreeMap;

use regex::Regex;
use toml::Spanned;

use crate::model::rollout::{ROLE_DEVELOPER, ROLE_SYSTEM, ROLE_USER};

use super::file::{InputSection, MarkerEntry, PhaseSection, RuleEntry, RuleFile, SessionSection};
use super::policy::{override_opt, PolicySection};
use super::{
    invalid, FinishedSignal, InputRules, LoadedFile, Marker, PathExpr, Position, RoleAliases, Rule,
    RuleSet, RulesError, SessionDefaults, Slot,
};

/// The roles a `[[rule]]` classifies (after `input.role_aliases`): what `role` may name.
const CLASSIFIED_ROLES: [&str; 3] = [ROLE_SYSTEM, ROLE_DEVELOPER, ROLE_USER];

/// The files' sections merged in order, before any check. Markers and rules keep the index of
/// the file that last defined them, for error lines.
#[derive(Default)]
struct Merged {
    names: Vec<String>,
    digests: Vec<String>,
    texts: Vec<String>,
    codex_version: Option<String>,
    input: InputSection,
    session: SessionSection,
    phase: PhaseSection,
    policy: PolicySection,
    prefixes: Option<Vec<String>>,
    markers: Vec<(MarkerEntry, usize)>,
    rules: Vec<(RuleEntry, usize)>,
}

/// Merges parsed files in order into one rule set, checking values that TOML cannot; the
/// first error when there are several (see [`resolve_all`]).
pub fn resolve(files: &[LoadedFile]) -> Result<RuleSet, RulesError> {
    resolve_all(files).map_err(|errors| {
        errors
            .into_iter()
            .next()
            .unwrap_or_else(|| not_set(files, vec!["any rule".to_string()]))
    })
}

/// Merges parsed files in order into one rule set; every value in error is reported, and the
/// keys no file sets come last, in one error.
pub fn resolve_all(files: &[LoadedFile]) -> Result<RuleSet, Vec<RulesError>> {
    let merged = merge(files);
    let mut errors = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let markers = resolve_markers(files, merged.markers, &mut errors);
    let rules = resolve_rules(files, merged.rules, &markers, &mut errors);
    let Some(first) = files.first() else {
        return Err(vec![not_set(files, vec!["any rule".to_string()])]);
    };
    let mut required = |value: Option<String>, key: &str| {
        if value.is_none() {
            missing.push(key.to_string());
        }
        value
    };
    let codex_version = required(merged.codex_version, "meta.codex_version");
    let s = merged.session;
    let cwd_span = s.cwd.as_ref().map(Spanned::span);
    let cwd = required(s.cwd.map(Spanned::into_inner), "session.cwd");
    // Codex lists a session under the folder it runs in, an absolute path: a relative one
    // matches no folder, and the sessions would show in no picker but `--all`.
    if let Some(relative) = cwd.as_deref().filter(|c| !is_absolute_folder(c)) {
        let file = setter(files, |f| {
            f.session.as_ref().is_some_and(|s| s.cwd.is_some())
        });
        errors.push(invalid(
            file.unwrap_or(first),
            cwd_span.clone().unwrap_or(0..0),
            format!(
                "session.cwd `{relative}` is relative: Codex lists a session in the folder it runs in, an absolute path such as `/home/me/project` (or give `convert --cwd DIR`, which makes DIR absolute)"
            ),
        ));
    }
    let originator = required(s.originator, "session.originator");
    let cli_version = required(s.cli_version, "session.cli_version");
    let timestamp_span = s.timestamp.as_ref().map(Spanned::span);
    let timestamp = required(s.timestamp.map(Spanned::into_inner), "session.timestamp");
    if merged.input.messages_at.is_none() {
        missing.push("input.messages_at".to_string());
    }
    let timestamp_ms = timestamp.and_then(|text| {
        let ms = crate::model::time::parse_rfc3339_ms(&text);
        if ms.is_none() {
            let message = format!("session.timestamp `{text}` is not an RFC 3339 time");
            let file = setter(files, |f| {
                f.session.as_ref().is_some_and(|s| s.timestamp.is_some())
            });
            errors.push(invalid(
                file.unwrap_or(first),
                timestamp_span.clone().unwrap_or(0..0),
                message,
            ));
        }
        ms
    });
    let finished_file = setter(files, |f| {
        f.phase.as_ref().is_some_and(|p| p.finished.is_some())
    });
    let finished = resolve_finished(finished_file.unwrap_or(first), &merged.phase, &mut errors);
    let policy_missing = merged.policy.missing_keys();
    let policy = if policy_missing.is_empty() {
        merged
            .policy
            .resolve(|key| not_set(files, vec![key.to_string()]))
            .ok()
    } else {
        missing.extend(policy_missing.iter().map(|k| k.to_string()));
        None
    };
    if let Some(Err((key, message))) = policy.as_ref().map(|p| p.check()) {
        // The value of the last file that sets the key: the one in force.
        let (file, span) = files
            .iter()
            .rev()
            .find_map(|f| Some((f, f.file.policy.as_ref()?.span_of(key)?)))
            .unwrap_or((first, 0..0));
        errors.push(invalid(file, span, message));
    }
    let input = resolve_input(files, first, &merged.input, finished, &mut errors);
    if !missing.is_empty() {
        errors.push(not_set(files, missing));
    }
    match (
        codex_version,
        input,
        cwd,
        originator,
        cli_version,
        timestamp_ms,
        policy,
    ) {
        (
            Some(codex_version),
            Some(input),
            Some(cwd),
            Some(originator),
            Some(cli_version),
            Some(timestamp_ms),
            Some(policy),
        ) if errors.is_empty() => Ok(RuleSet {
            names: merged.names,
            digests: merged.digests,
            texts: merged.texts,
            codex_version,
            input,
            session: SessionDefaults {
                cwd,
                cwd_overrides_source: false,
                default_model: None,
                originator,
                cli_version,
                source: s.source,
                model_provider: s.model_provider,
                timestamp_ms,
            },
            infer_phase: merged.phase.infer.unwrap_or(true),
            policy,
            markers,
            developer_prefixes: merged.prefixes.unwrap_or_default(),
            rules,
        }),
        _ => Err(errors),
    }
}

/// The last of `files` for which `sets` holds: the file a merged key's value came from (a
/// later file overrides the key whole).
fn setter(files: &[LoadedFile], sets: impl Fn(&RuleFile) -> bool) -> Option<&LoadedFile> {
    files.iter().rev().find(|f| sets(&f.file))
}

/// `keys` are set by no file: point at the last file, and at the defaults.
fn not_set(files: &[LoadedFile], keys: Vec<String>) -> RulesError {
    RulesError::NotSet {
        path: files.last().map(|f| f.name.clone()).unwrap_or_default(),
        keys: keys.into_iter().map(|k| format!("`{k}`")).collect(),
    }
}

fn merge(files: &[LoadedFile]) -> Merged {
    let mut m = Merged::default();
    for (file_index, loaded) in files.iter().enumerate() {
        let f = &loaded.file;
        m.names.push(loaded.name.clone());
        m.digests.push(text_digest(&loaded.text));
        m.texts.push(loaded.text.clone());
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

/// A folder Codex can list sessions under: `/...`, or a Windows drive's `C:\...`.
pub(crate) fn is_absolute_folder(cwd: &str) -> bool {
    let bytes = cwd.as_bytes();
    cwd.starts_with('/')
        || (bytes.len() >= 3
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && matches!(bytes[2], b'\\' | b'/'))
}

/// `enabled = false` removes what an earlier file defines; naming nothing, it removes
/// nothing, silently (a typo of the id). `defines` are the ids (or kinds) a file defines;
/// `what` says which (`rule`, `marker`).
fn disabled_names_nothing(
    files: &[LoadedFile],
    file_index: usize,
    span: std::ops::Range<usize>,
    what: &str,
    name: &str,
    defines: impl Fn(&RuleFile) -> Vec<&str>,
) -> Option<RulesError> {
    let defined: Vec<&str> = files[..file_index]
        .iter()
        .flat_map(|f| defines(&f.file))
        .collect();
    let file = &files[file_index];
    if defined.contains(&name) {
        return None;
    }
    let hint = match super::closest(name, defined.iter().copied()) {
        Some(near) => format!(": did you mean `{near}`?"),
        None if defined.is_empty() => {
            ": no earlier rule file defines any (give `--rules default` before this file to change the built-in rules)".to_string()
        }
        None => {
            let shown: Vec<String> = defined.iter().take(12).map(|d| format!("`{d}`")).collect();
            let more = defined.len().saturating_sub(shown.len());
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            format!(" (they define {}{more})", shown.join(", "))
        }
    };
    Some(invalid(
        file,
        span,
        format!(
            "`enabled = false` removes {what} `{name}`, which no earlier rule file defines{hint}"
        ),
    ))
}

fn resolve_markers(
    files: &[LoadedFile],
    markers: Vec<(MarkerEntry, usize)>,
    errors: &mut Vec<RulesError>,
) -> Vec<Marker> {
    let mut resolved = Vec::new();
    for (m, file_index) in markers {
        if m.enabled == Some(false) {
            errors.extend(disabled_names_nothing(
                files,
                file_index,
                m.kind.span(),
                "marker",
                m.kind.get_ref(),
                |f| f.marker.iter().map(|m| m.kind.get_ref().as_str()).collect(),
            ));
            continue;
        }
        let file = &files[file_index];
        let kind = m.kind.get_ref();
        let (Some(start), Some(end)) = (m.start, m.end) else {
            let message = format!("marker `{kind}` needs `start` and `end`");
            errors.push(invalid(file, m.kind.span(), message));
            continue;
        };
        if start.trim().is_empty() || end.trim().is_empty() {
            let message = format!("marker `{kind}` has an empty start or end");
            errors.push(invalid(file, m.kind.span(), message));
            continue;
        }
        let template = m
            .template
            .unwrap_or_else(|| format!("{start}\n{{text}}\n{end}"));
        let separate = m.separate.unwrap_or(false);
        resolved.push(Marker::new(
            m.kind.into_inner(),
            start,
            end,
            template,
            separate,
        ));
    }
    resolved
}

fn resolve_rules(
    files: &[LoadedFile],
    rules: Vec<(RuleEntry, usize)>,
    markers: &[Marker],
    errors: &mut Vec<RulesError>,
) -> Vec<Rule> {
    let mut resolved = Vec::new();
    for (r, file_index) in rules {
        if r.enabled == Some(false) {
            errors.extend(disabled_names_nothing(
                files,
                file_index,
                r.id.span(),
                "rule",
                r.id.get_ref(),
                |f| f.rule.iter().map(|r| r.id.get_ref().as_str()).collect(),
            ));
            continue;
        }
        let file = &files[file_index];
        let id = r.id.get_ref();
        let before = errors.len();
        // A rule classifies system, developer and user messages (README "Rule files"): a
        // role outside them, like a typo, is a rule that can never fire.
        for role in r.role.iter().flatten() {
            if !CLASSIFIED_ROLES.contains(&role.as_str()) {
                let hint = super::closest(role, CLASSIFIED_ROLES.iter().copied())
                    .map(|near| format!(" (did you mean `{near}`?)"))
                    .unwrap_or_default();
                errors.push(invalid(
                    file,
                    r.id.span(),
                    format!(
                        "rule `{id}`: role `{role}` can never match{hint}: rules classify messages of the roles {}",
                        CLASSIFIED_ROLES
                            .iter()
                            .map(|r| format!("`{r}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        let slot = r.slot.unwrap_or_else(|| {
            errors.push(invalid(
                file,
                r.id.span(),
                format!("rule `{id}` has no `slot`"),
            ));
            Slot::Drop
        });
        if slot == Slot::ContextualUser {
            if let Err(message) = check_contextual_kind(&r, markers) {
                errors.push(invalid(file, r.id.span(), message));
            }
        }
        let name = compile(file, id, "name", &r.name, errors);
        let regex = compile(file, id, "text", &r.regex, errors);
        let model = compile(file, id, "model", &r.model, errors);
        let source = compile(file, id, "source", &r.source, errors);
        if errors.len() > before {
            continue;
        }
        resolved.push(Rule {
            name,
            regex,
            model,
            source,
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
            id: r.id.into_inner(),
        });
    }
    resolved
}

/// A rule into `contextual_user` names a registered marker kind, or takes the wrapping one.
fn check_contextual_kind(r: &RuleEntry, markers: &[Marker]) -> Result<(), String> {
    match &r.kind {
        Some(kind) if markers.iter().any(|m| &m.kind == kind) => Ok(()),
        Some(kind) => Err(format!(
            "rule `{}`: kind `{kind}` is not a registered marker",
            r.id.get_ref()
        )),
        None if r.wrapped == Some(true) => Ok(()),
        None => Err(format!(
            "rule `{}`: slot contextual_user needs a `kind` (or `wrapped = true`)",
            r.id.get_ref()
        )),
    }
}

/// `file` is the one that set `phase.finished`, for error lines.
fn resolve_finished(
    file: &LoadedFile,
    phase: &PhaseSection,
    errors: &mut Vec<RulesError>,
) -> Vec<FinishedSignal> {
    let entries = phase.finished.as_deref().unwrap_or_default();
    let mut finished = Vec::new();
    for f in entries {
        match PathExpr::parse(f.path.get_ref()) {
            Ok(path) => finished.push(FinishedSignal {
                path,
                equals: f.equals.clone(),
            }),
            Err(msg) => errors.push(invalid(
                file,
                f.path.span(),
                format!("phase.finished: {msg}"),
            )),
        }
    }
    finished
}

/// `None` when `input.messages_at` is not set (the caller reports it) or a path is invalid.
/// Each list of paths is checked against the last file that sets it (for its lines).
fn resolve_input(
    files: &[LoadedFile],
    first: &LoadedFile,
    input: &InputSection,
    finished: Vec<FinishedSignal>,
    errors: &mut Vec<RulesError>,
) -> Option<InputRules> {
    type List = Option<Vec<Spanned<String>>>;
    let before = errors.len();
    let mut optional = |key: &str, get: fn(&InputSection) -> &List| {
        let file = setter(files, |f| {
            f.input.as_ref().is_some_and(|i| get(i).is_some())
        });
        let list = get(input).as_deref().unwrap_or_default();
        paths(file.unwrap_or(first), key, list, errors)
    };
    let messages_at = optional("input.messages_at", |i| &i.messages_at);
    let id_at = optional("input.id_at", |i| &i.id_at);
    let created_at = optional("input.created_at", |i| &i.created_at);
    let model_at = optional("input.model_at", |i| &i.model_at);
    let reply_at = optional("input.reply_at", |i| &i.reply_at);
    if input.messages_at.is_none() || errors.len() > before {
        return None;
    }
    Some(InputRules {
        messages_at,
        role_aliases: RoleAliases::new(input.role_aliases.clone().unwrap_or_default()),
        id_at,
        created_at,
        model_at,
        reply_at,
        finished,
        sharegpt: sharegpt_tags(input.sharegpt.as_ref()),
        guess: true,
    })
}

fn compile(
    file: &LoadedFile,
    rule: &str,
    what: &str,
    pattern: &Option<Spanned<String>>,
    errors: &mut Vec<RulesError>,
) -> Option<Regex> {
    let p = pattern.as_ref()?;
    match Regex::new(p.get_ref()) {
        Ok(regex) => Some(regex),
        Err(err) => {
            // The regex crate draws its own caret over the pattern: keep only the cause, the
            // diagnostic points at the pattern in the file.
            let text = err.to_string();
            let cause = text
                .lines()
                .rev()
                .find_map(|l| l.trim().strip_prefix("error: "))
                .unwrap_or(text.as_str());
            let message = format!("rule `{rule}`: invalid {what} regex: {cause}");
            errors.push(invalid(file, p.span(), message));
            None
        }
    }
}

fn paths(
    file: &LoadedFile,
    key: &str,
    list: &[Spanned<String>],
    errors: &mut Vec<RulesError>,
) -> Vec<PathExpr> {
    let mut parsed = Vec::new();
    for p in list {
        match PathExpr::parse(p.get_ref()) {
            Ok(path) => parsed.push(path),
            Err(msg) => errors.push(invalid(file, p.span(), format!("{key}: {msg}"))),
        }
    }
    parsed
}

fn sharegpt_tags(
    section: Option<&crate::rules::file::ShareGptSection>,
) -> crate::rules::ShareGptTags {
    let mut tags = crate::rules::ShareGptTags::default();
    let Some(s) = section else { return tags };
    for (slot, value) in [
        (&mut tags.role_tag, &s.role_tag),
        (&mut tags.content_tag, &s.content_tag),
        (&mut tags.user_tag, &s.user_tag),
        (&mut tags.assistant_tag, &s.assistant_tag),
        (&mut tags.observation_tag, &s.observation_tag),
        (&mut tags.function_tag, &s.function_tag),
        (&mut tags.system_tag, &s.system_tag),
    ] {
        if let Some(v) = value {
            slot.clone_from(v);
        }
    }
    tags
}

fn merge_input(t: &mut InputSection, s: &InputSection) {
    if let Some(later) = &s.sharegpt {
        let tags = t.sharegpt.get_or_insert_with(Default::default);
        override_opt(&mut tags.role_tag, &later.role_tag);
        override_opt(&mut tags.content_tag, &later.content_tag);
        override_opt(&mut tags.user_tag, &later.user_tag);
        override_opt(&mut tags.assistant_tag, &later.assistant_tag);
        override_opt(&mut tags.observation_tag, &later.observation_tag);
        override_opt(&mut tags.function_tag, &later.function_tag);
        override_opt(&mut tags.system_tag, &later.system_tag);
    }
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
    // The same kind, written where the file that now defines it writes it.
    merged.kind = new.kind.clone();
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
