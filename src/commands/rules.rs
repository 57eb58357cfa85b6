//! `rollover rules check` and `rollover rules policies`.

use std::io::Write;

use anyhow::{Context, Result};

use crate::cli::{RulesCheckArgs, RulesPoliciesArgs};
use crate::commands::Exit;
use crate::rules::{
    check::check as check_rules, load_file, resolve, PolicyId, RuleSet, RulesError,
};

pub fn check(args: &RulesCheckArgs) -> Result<Exit> {
    let mut errors: Vec<RulesError> = Vec::new();
    let mut loaded = Vec::new();
    for path in &args.files {
        match load_file(path) {
            Ok(file) => loaded.push(file),
            Err(err) => errors.push(err),
        }
    }
    for err in &errors {
        println!("error: {err}");
    }
    if !errors.is_empty() {
        println!("{} rule file(s) with errors", errors.len());
        return Ok(Exit::Findings);
    }
    let rules = match resolve(&loaded) {
        Ok(rules) => rules,
        Err(err) => {
            println!("error: {err}");
            return Ok(Exit::Findings);
        }
    };
    let findings = check_rules(&rules, &loaded);
    for f in &findings {
        println!("warning: {}:{}: {}", f.file, f.line, f.message);
    }
    println!(
        "{}: {} rules, {} markers, target Codex {}: {}",
        rules.names.join(" + "),
        rules.rules.len(),
        rules.markers.len(),
        rules.codex_version,
        if findings.is_empty() {
            "ok".to_string()
        } else {
            format!("{} warning(s)", findings.len())
        }
    );
    Ok(Exit::findings_if(!findings.is_empty()))
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
