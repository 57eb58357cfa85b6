//! `rollover rules check` and `rollover rules policies`.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use codespan_reporting::diagnostic::{Diagnostic, Label};
use codespan_reporting::files::SimpleFiles;
use codespan_reporting::term::termcolor::{Ansi, NoColor, WriteColor};
use codespan_reporting::term::{self, Chars, Config};

use crate::cli::{RulesCheckArgs, RulesPoliciesArgs};
use crate::commands::ui::{plural, wrap_text, Ui};
use crate::commands::Exit;
use crate::rules::{
    check::check as check_rules, load_file, parse_text_partial, read_source, resolve_all, PolicyId,
    RuleSet, RulesError, DEFAULT_RULES_NAME,
};

/// Checks every file on its own, then the loaded ones merged in order, and prints every error
/// (rustc style: the file, line and column, the source line and a caret), then the warnings.
pub fn check(args: &RulesCheckArgs, ui: &Ui) -> Result<Exit> {
    let mut files = SimpleFiles::new();
    let mut ids = Vec::new();
    let mut errors: Vec<RulesError> = Vec::new();
    let mut loaded = Vec::new();
    let mut complete = 0;
    let mut tainted: Vec<(String, Vec<std::ops::Range<usize>>)> = Vec::new();
    let mut unreadable = false;
    for path in &args.files {
        let (name, text) = match read_source(path) {
            Ok(source) => source,
            Err(err) => {
                errors.push(err);
                unreadable = true;
                continue;
            }
        };
        ids.push((name.clone(), files.add(name.clone(), text.clone())));
        match parse_text_partial(&name, &text) {
            Ok(file) => {
                complete += 1;
                loaded.push(file);
            }
            Err(mut partial) => {
                errors.append(&mut partial.errors);
                // What the file says beyond its errors is still checked (an unknown table must
                // not hide a bad regex), but for the tables the errors were in.
                if let Some(rest) = partial.rest {
                    tainted.push((name.clone(), partial.tainted));
                    loaded.push(*rest);
                }
            }
        }
    }
    let all_loaded = !unreadable && complete == args.files.len();
    let in_tainted = |err: &RulesError| match err {
        RulesError::Invalid {
            path,
            span: Some(span),
            ..
        } => tainted
            .iter()
            .any(|(name, ranges)| name == path && ranges.iter().any(|r| r.contains(&span.start))),
        RulesError::Invalid { span: None, .. }
        | RulesError::Read { .. }
        | RulesError::Syntax { .. }
        | RulesError::NotSet { .. } => false,
    };
    let mut merged = if loaded.is_empty() {
        None
    } else {
        match resolve_all(&loaded) {
            Ok(rules) => Some(rules),
            Err(found) => {
                // Keys "not set" may be set by a file that did not load: only say so when all did.
                errors.extend(found.into_iter().filter(|e| {
                    (all_loaded || !matches!(e, RulesError::NotSet { .. })) && !in_tainted(e)
                }));
                None
            }
        }
    };
    // A file that sets only some keys is an overlay of the built-in rules: checked on top of
    // them (as convert loads it), the keys it leaves to them counted rather than listed.
    let mut left_to_default: Vec<String> = Vec::new();
    let only_unset = errors
        .iter()
        .all(|e| matches!(e, RulesError::NotSet { .. }));
    let names_default = args
        .files
        .iter()
        .any(|f| f.as_os_str() == DEFAULT_RULES_NAME);
    if all_loaded && !errors.is_empty() && only_unset && !names_default {
        if let Ok(default) = load_file(Path::new(DEFAULT_RULES_NAME)) {
            let mut overlaid = vec![default];
            overlaid.extend(loaded.iter().cloned());
            if let Ok(rules) = resolve_all(&overlaid) {
                for err in errors.drain(..) {
                    if let RulesError::NotSet { keys, .. } = err {
                        left_to_default.extend(keys);
                    }
                }
                left_to_default.sort();
                left_to_default.dedup();
                merged = Some(rules);
                loaded = overlaid;
            }
        }
    }
    let mut out: Box<dyn WriteColor> = if ui.color {
        Box::new(Ansi::new(std::io::stdout().lock()))
    } else {
        Box::new(NoColor::new(std::io::stdout().lock()))
    };
    let config = Config {
        chars: Chars::ascii(),
        ..Config::default()
    };
    let file_id = |name: &str| ids.iter().find(|(n, _)| n == name).map(|(_, id)| *id);
    // File by file, in the order given; keys no file sets last.
    errors.sort_by_key(|e| match e {
        RulesError::NotSet { .. } => usize::MAX,
        RulesError::Read { .. } | RulesError::Syntax { .. } | RulesError::Invalid { .. } => {
            file_id(e.path()).unwrap_or(0)
        }
    });
    for err in &errors {
        let diagnostic = diagnostic(err, &file_id, &files, ui.width);
        term::emit(&mut *out, &config, &files, &diagnostic).context("printing a diagnostic")?;
    }
    let findings = match (&merged, errors.is_empty()) {
        (Some(rules), true) => check_rules(rules, &loaded),
        _ => Vec::new(),
    };
    if !ui.quiet {
        for f in &findings {
            let diagnostic = Diagnostic::warning()
                .with_message(&f.message)
                .with_labels(label_at_line(&files, file_id(&f.file), f.line));
            let diagnostic = match file_id(&f.file) {
                Some(_) => diagnostic,
                None => diagnostic.with_notes(vec![format!("in {}:{}", f.file, f.line)]),
            };
            term::emit(&mut *out, &config, &files, &diagnostic).context("printing a diagnostic")?;
        }
    }
    drop(out);
    let mut stdout = std::io::stdout().lock();
    match merged {
        Some(rules) if errors.is_empty() => {
            if !ui.quiet {
                writeln!(
                    stdout,
                    "{}: {}, {}, target Codex {}: {}",
                    rules.names.join(" + "),
                    plural(rules.rules.len() as u64, "rule", "rules"),
                    plural(rules.markers.len() as u64, "marker", "markers"),
                    rules.codex_version,
                    if findings.is_empty() {
                        ui.ok("ok")
                    } else {
                        ui.warn(&plural(findings.len() as u64, "warning", "warnings"))
                    }
                )?;
                if !left_to_default.is_empty() {
                    let given: Vec<String> =
                        args.files.iter().map(|f| f.display().to_string()).collect();
                    let rules_flags: String =
                        given.iter().map(|f| format!(" --rules {f}")).collect();
                    let shown: Vec<&str> = left_to_default
                        .iter()
                        .take(UNSET_SHOWN)
                        .map(String::as_str)
                        .collect();
                    let more = match left_to_default.len().saturating_sub(UNSET_SHOWN) {
                        0 => String::new(),
                        n => format!(", +{n} more"),
                    };
                    for line in wrap_text(
                        "",
                        "",
                        &format!(
                            "note: {} alone leaves {} unset ({}{more}): checked above on top of the built-in rules, as convert needs it: `--rules default{rules_flags}`",
                            given.join(" + "),
                            plural(left_to_default.len() as u64, "key", "keys"),
                            shown.join(", ")
                        ),
                        ui.width,
                    ) {
                        writeln!(stdout, "{line}")?;
                    }
                }
            }
            Ok(Exit::findings_if(!findings.is_empty()))
        }
        _ => {
            let mut in_files: Vec<&str> = errors.iter().map(RulesError::path).collect();
            in_files.sort_unstable();
            in_files.dedup();
            writeln!(
                stdout,
                "{} in {} of {}",
                ui.bad(&plural(errors.len() as u64, "error", "errors")),
                in_files.len(),
                plural(args.files.len() as u64, "rule file", "rule files"),
            )?;
            Ok(Exit::Findings)
        }
    }
}

/// The keys an overlay leaves to the built-in rules that `rules check` names (it counts the rest).
const UNSET_SHOWN: usize = 3;

/// The diagnostic of one error: a caret under the span when there is one.
fn diagnostic(
    err: &RulesError,
    file_id: &dyn Fn(&str) -> Option<usize>,
    files: &SimpleFiles<String, String>,
    width: usize,
) -> Diagnostic<usize> {
    match err {
        RulesError::Read { path, source } => Diagnostic::error()
            .with_message(format!("cannot read rule file {path}: {source}"))
            .with_notes(vec![
                "check the path, or name `default` for the built-in rules".into(),
            ]),
        RulesError::Syntax {
            path,
            message,
            help,
            span,
            ..
        } => {
            let d = Diagnostic::error().with_message(message);
            let d = match file_id(path) {
                Some(id) => d.with_labels(vec![Label::primary(id, first_line(files, id, span))]),
                None => d,
            };
            // "= help: " is 10 columns in.
            let notes = help
                .iter()
                .map(|h| wrap_words(&format!("help: {h}"), width.saturating_sub(10).max(30)));
            d.with_notes(notes.collect())
        }
        RulesError::Invalid {
            path,
            line,
            message,
            span,
        } => {
            let d = Diagnostic::error().with_message(message);
            match (file_id(path), span) {
                (Some(id), Some(span)) => d.with_labels(vec![Label::primary(id, span.clone())]),
                _ => d.with_notes(vec![format!("in {path}:{line}")]),
            }
        }
        RulesError::NotSet { .. } => Diagnostic::error().with_message(err.to_string()),
    }
}

/// `span`, cut at the end of its first line: a syntax error that runs to the end of the file
/// (an unclosed string) is shown where it starts.
fn first_line(
    files: &SimpleFiles<String, String>,
    id: usize,
    span: &std::ops::Range<usize>,
) -> std::ops::Range<usize> {
    use codespan_reporting::files::Files;
    let text: &str = files.source(id).unwrap_or_default();
    let start = span.start.min(text.len());
    let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let end = span.end.min(line_end).max(start);
    if end == start && start < line_end {
        start..start + 1
    } else {
        start..end
    }
}

/// `text` with line breaks between words, so that no line is longer than `width` columns.
fn wrap_words(text: &str, width: usize) -> String {
    wrap_text("", "", text, width).join("\n")
}

/// A label over the whole of line `line` (1-based) of a file, for findings that know a line.
fn label_at_line(
    files: &SimpleFiles<String, String>,
    id: Option<usize>,
    line: usize,
) -> Vec<Label<usize>> {
    use codespan_reporting::files::Files;
    let Some(id) = id else { return Vec::new() };
    match files.line_range(id, line.saturating_sub(1)) {
        Ok(range) => {
            let text: &str = files.source(id).unwrap_or_default();
            let end = text[range.clone()].trim_end().len() + range.start;
            vec![Label::primary(id, range.start..end)]
        }
        Err(_) => Vec::new(),
    }
}

/// Prints every policy from its one declaration ([`PolicyId::doc`]), with the value the given
/// rule files (or the built-in ones) set.
pub fn policies(args: &RulesPoliciesArgs) -> Result<Exit> {
    let rules = RuleSet::load(&args.files).context("loading rule files")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "[policy] of {}:", rules.names.join(" + "))?;
    for &id in PolicyId::ALL {
        let doc = id.doc();
        writeln!(
            out,
            "\n{} = \"{}\"    ({})",
            id.key(),
            rules.policy.action_name(id),
            doc.allowed.join(" | ")
        )?;
        writeln!(out, "    {}; rule id `{}`", doc.what, id.rule_id())?;
        if let (Some((key, meaning)), Some(value)) = (doc.text_key, rules.policy.text(id)) {
            writeln!(out, "{key} = {value:?}")?;
            writeln!(out, "    {meaning}")?;
        }
    }
    Ok(Exit::Clean)
}
