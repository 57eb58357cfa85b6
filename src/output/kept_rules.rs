//! The rule set a run converted with, kept whole: every rule file's name and text, in order
//! (`default` included), in the run's folder (`runs/NNNN/rules.json`) and once per distinct
//! set in the state folder (`rollover/rules-FINGERPRINT.json`, named by the rules fingerprint
//! the manifest records with each file). `explain` reads a session with the rules that wrote
//! it from any folder, after the rule files changed or went, and after `--keep-runs` removed
//! the run.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::dir::Dir;
use super::home::{write_error, Home};
use super::OutputError;
use crate::rules::{parse_text, resolve, RuleSet, RulesError};

/// The rule set's file in a run folder.
pub(crate) const RUN_FILE: &str = "rules.json";

/// A run's resolved rule set, as its files' texts.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct KeptRules {
    /// The rules fingerprint the manifest records with each file the set converted.
    pub fingerprint: String,
    pub files: Vec<KeptFile>,
}

/// One rule file as the run read it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct KeptFile {
    /// As given to `--rules` (`default`: the built-in rules of the rollover that ran).
    pub name: String,
    /// SHA-256 of `text`, as the summary's `rule_digests` names it.
    pub sha256: String,
    pub text: String,
}

/// The state file of the rule set whose fingerprint is `fingerprint`.
pub(crate) fn state_name(fingerprint: &str) -> String {
    format!("rules-{fingerprint}.json")
}

impl KeptRules {
    pub(crate) fn of(rules: &RuleSet, fingerprint: &str) -> KeptRules {
        let files = rules.names.iter().zip(&rules.digests).zip(&rules.texts);
        KeptRules {
            fingerprint: fingerprint.to_string(),
            files: files
                .map(|((name, sha256), text)| KeptFile {
                    name: name.clone(),
                    sha256: sha256.clone(),
                    text: text.clone(),
                })
                .collect(),
        }
    }

    /// Writes the set into the run's folder, and into the state folder unless a run with the
    /// same rules did.
    pub(crate) fn keep(&self, home: &Home) -> Result<(), OutputError> {
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| write_error(&home.run_file(RUN_FILE), e.into()))?;
        bytes.push(b'\n');
        home.write_run_file_atomic(RUN_FILE, &bytes)?;
        let name = state_name(&self.fingerprint);
        if !home.state_file(&name).exists() {
            home.write_state_atomic(&name, &bytes)?;
        }
        Ok(())
    }

    /// The set kept in `path`; `None` when there is no such file.
    pub(crate) fn read(path: &Path) -> Result<Option<KeptRules>, KeptRulesError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(KeptRulesError::Read {
                    path: path.display().to_string(),
                    source,
                })
            }
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| KeptRulesError::Parse {
                path: path.display().to_string(),
                source,
            })
    }

    /// The rule set again, resolved from the texts as the run resolved its files.
    pub(crate) fn rule_set(&self) -> Result<RuleSet, RulesError> {
        let files = self
            .files
            .iter()
            .map(|f| parse_text(&f.name, &f.text))
            .collect::<Result<Vec<_>, _>>()?;
        resolve(&files)
    }
}

/// How the reports name the rule set whose fingerprint is `fingerprint`: its rule files as
/// the home kept them (`default + mine.toml`) and the fingerprint's first 8 digits, which tell
/// two versions of one file apart; `this run's rules, ...` when it is `current`. `state` is
/// the home's state folder, read without following a symlink.
pub(crate) fn label(state: Option<&Dir>, fingerprint: &str, current: Option<&str>) -> String {
    if fingerprint.is_empty() {
        return "rules not recorded (written before the manifest recorded them)".to_string();
    }
    let short = &fingerprint[..fingerprint.len().min(8)];
    let kept = state
        .and_then(|dir| dir.read(&state_name(fingerprint)).ok().flatten())
        .and_then(|bytes| serde_json::from_slice::<KeptRules>(&bytes).ok());
    let names = match kept {
        Some(kept) => kept
            .files
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(" + "),
        None => return format!("rules {short} (not kept in this home)"),
    };
    if current == Some(fingerprint) {
        format!("this run's rules, {names} ({short})")
    } else {
        format!("rules {names} ({short})")
    }
}

/// A kept rule set that cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeptRulesError {
    #[error("cannot read the rules a run kept, {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the rules a run kept, {path}, do not parse ({source}): the file was changed by hand; give the rule files with --rules")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
}
