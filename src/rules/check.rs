//! `rules check`: problems in rule files that loading alone would not show.
//!
//! Syntax errors, unknown keys and invalid values or regexes come from loading (with their
//! line). On top: rules that can never fire because an earlier rule catches everything they
//! would, and markers whose start or end overlap so that one text could match both.

use std::ops::Range;

use super::{line_col, value_span, LoadedFile, Position, Rule, RuleSet};

/// A finding of the checker, with the file and line it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// Checks the resolved rule set (rules already in their merged order).
pub(crate) fn check(rules: &RuleSet, files: &[LoadedFile]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let line_at = |file: &LoadedFile, span: Range<usize>| {
        line_col(&file.text, value_span(&file.text, span).start).0
    };
    for (i, later) in rules.rules.iter().enumerate() {
        if let Some(earlier) = rules.rules[..i].iter().find(|e| shadows(e, later)) {
            // The rule's id in the file that defined it (the last of that id in it wins).
            let line = files
                .iter()
                .find(|f| f.name == later.origin)
                .and_then(|f| {
                    let entry = f
                        .file
                        .rule
                        .iter()
                        .rev()
                        .find(|r| *r.id.get_ref() == later.id)?;
                    Some(line_at(f, entry.id.span()))
                })
                .unwrap_or(1);
            findings.push(Finding {
                file: later.origin.clone(),
                line,
                message: format!(
                    "rule `{}` is unreachable: rule `{}` ({}) matches every message it would",
                    later.id, earlier.id, earlier.origin
                ),
            });
        }
    }
    for (i, a) in rules.markers.iter().enumerate() {
        for b in &rules.markers[i + 1..] {
            let (sa, sb) = (a.start.trim().to_lowercase(), b.start.trim().to_lowercase());
            let (ea, eb) = (a.end.trim().to_lowercase(), b.end.trim().to_lowercase());
            let starts_overlap = sa.starts_with(&sb) || sb.starts_with(&sa);
            let ends_overlap = ea.ends_with(&eb) || eb.ends_with(&ea);
            if starts_overlap && ends_overlap {
                // The last file that defines marker `b` (a later one merges into it).
                let (file, line) = files
                    .iter()
                    .rev()
                    .find_map(|f| {
                        let entry = f
                            .file
                            .marker
                            .iter()
                            .rev()
                            .find(|m| *m.kind.get_ref() == b.kind)?;
                        Some((f.name.clone(), line_at(f, entry.kind.span())))
                    })
                    .unwrap_or_else(|| (rules.names.last().cloned().unwrap_or_default(), 1));
                findings.push(Finding {
                    line,
                    file,
                    message: format!(
                        "markers `{}` and `{}` overlap: a text starting `{}` and ending `{}` matches both",
                        a.kind,
                        b.kind,
                        if sa.len() >= sb.len() { &a.start } else { &b.start },
                        if ea.len() >= eb.len() { &a.end } else { &b.end }
                    ),
                });
            }
        }
    }
    findings
}

/// `earlier` matches every message `later` matches (so `later` never fires).
fn shadows(earlier: &Rule, later: &Rule) -> bool {
    let roles = later.roles.iter().all(|r| earlier.roles.contains(r));
    let position = earlier.position == Position::Any || earlier.position == later.position;
    let same_or_absent = |a: &Option<String>, b: &Option<String>| a.is_none() || a == b;
    let regex_same = |a: &Option<regex::Regex>, b: &Option<regex::Regex>| match (a, b) {
        (None, _) => true,
        (Some(x), Some(y)) => x.as_str() == y.as_str(),
        (Some(_), None) => false,
    };
    let prefix = match (&earlier.prefix, &later.prefix) {
        (None, _) => true,
        (Some(a), Some(b)) => b.starts_with(a.as_str()),
        (Some(_), None) => false,
    };
    roles
        && position
        && (earlier.index.is_none() || earlier.index == later.index)
        && (!earlier.first_in_block || later.first_in_block)
        && regex_same(&earlier.name, &later.name)
        && prefix
        && regex_same(&earlier.regex, &later.regex)
        && (earlier.wrapped.is_none()
            || (earlier.wrapped == later.wrapped
                && same_or_absent(&earlier.wrapped_kind, &later.wrapped_kind)))
        && earlier
            .min_len
            .is_none_or(|m| later.min_len.is_some_and(|l| l >= m))
        && earlier
            .max_len
            .is_none_or(|m| later.max_len.is_some_and(|l| l <= m))
        && regex_same(&earlier.model, &later.model)
        && regex_same(&earlier.source, &later.source)
}
