//! Match one system, developer or user message against the classification rules.

use super::{Position, Rule, RuleSet};

/// What a rule can look at for one message.
#[derive(Debug, Clone)]
pub(crate) struct Subject<'a> {
    pub role: &'a str,
    pub text: &'a str,
    pub name: Option<&'a str>,
    pub index: usize,
    /// Before the first message that is not system or developer.
    pub leading: bool,
    /// No earlier message of the same role in the same block (leading or mid) went to base
    /// instructions or developer context (context fragments and dropped messages do not count).
    pub first_in_block: bool,
    pub model: Option<&'a str>,
    pub source: &'a str,
}

/// The first rule that matches, if any (first match wins).
pub(crate) fn classify<'r>(rules: &'r RuleSet, subject: &Subject<'_>) -> Option<&'r Rule> {
    rules
        .rules
        .iter()
        .find(|rule| matches(rules, rule, subject))
}

/// Whether `rule` matches `subject`.
pub(crate) fn matches(rules: &RuleSet, rule: &Rule, s: &Subject<'_>) -> bool {
    if !rule.roles.iter().any(|r| r == s.role) {
        return false;
    }
    let position_ok = match rule.position {
        Position::Any => true,
        Position::Leading => s.leading,
        Position::Mid => !s.leading,
    };
    if !position_ok {
        return false;
    }
    if rule.index.is_some_and(|i| i != s.index) {
        return false;
    }
    if rule.first_in_block && !s.first_in_block {
        return false;
    }
    if let Some(name) = &rule.name {
        if !s.name.is_some_and(|n| name.is_match(n)) {
            return false;
        }
    }
    if let Some(prefix) = &rule.prefix {
        if !s.text.trim_start().starts_with(prefix.as_str()) {
            return false;
        }
    }
    if let Some(regex) = &rule.regex {
        if !regex.is_match(s.text) {
            return false;
        }
    }
    if let Some(wanted) = rule.wrapped {
        let wrapped = match &rule.wrapped_kind {
            Some(kind) => rules.marker(kind).is_some_and(|m| m.wraps(s.text)),
            None => rules.marker_wrapping(s.text).is_some(),
        };
        if wrapped != wanted {
            return false;
        }
    }
    if rule.min_len.is_some_and(|min| s.text.len() < min) {
        return false;
    }
    if rule.max_len.is_some_and(|max| s.text.len() > max) {
        return false;
    }
    if let Some(model) = &rule.model {
        if !s.model.is_some_and(|m| model.is_match(m)) {
            return false;
        }
    }
    if let Some(source) = &rule.source {
        if !source.is_match(s.source) {
            return false;
        }
    }
    true
}
