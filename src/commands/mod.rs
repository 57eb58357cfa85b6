//! One file per subcommand; each owns its `run` and says how it ended as an [`Exit`]. The
//! exit codes live here and nowhere else:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | everything converted, every rollout passed, no rule-file finding |
//! | 1 | the command ran and found something: records quarantined, a file damaged, a rollout failing validation, a rule-file finding |
//! | 2 | usage error, or an error that stopped the command (missing input, bad rule file, unwritable output, a failed stage) |
//! | 3 | the output is locked by another run |
//! | 130 | stopped by SIGINT (Ctrl-C): finished work kept, reports marked `interrupted` |
//! | 143 | stopped by SIGTERM: the same |

pub mod convert;
pub mod explain;
pub mod merge;
pub mod report;
pub mod review;
pub mod rules;
pub mod status;
pub mod ui;
pub mod validate;

/// The table above, for every command's `--help` (declared with the clap types).
pub use crate::cli::EXIT_CODES_HELP;

use crate::output::OutputError;
use crate::pipeline::PipelineError;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Exit 0.
    Clean,
    /// Exit 1: the command ran and found problems in its input.
    Findings,
    /// Exit 2: usage error, or an error stopped the command.
    Error,
    /// Exit 3: another run holds the output.
    Locked,
    /// Exit 128 + the signal: a signal stopped the run cleanly.
    Interrupted(i32),
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Clean => 0,
            Exit::Findings => 1,
            Exit::Error => 2,
            Exit::Locked => 3,
            Exit::Interrupted(signal) => 128 + signal,
        }
    }

    /// `Findings` when `found`, `Clean` otherwise.
    pub fn findings_if(found: bool) -> Exit {
        if found {
            Exit::Findings
        } else {
            Exit::Clean
        }
    }

    /// Why a command exits so, in a few words (`--json` prints it).
    pub fn reason(self) -> &'static str {
        match self {
            Exit::Clean => "ok",
            Exit::Findings => "findings",
            Exit::Error => "error",
            Exit::Locked => "locked",
            Exit::Interrupted(_) => "interrupted",
        }
    }

    /// How a command that failed with `err` exits.
    pub fn for_error(err: &anyhow::Error) -> Exit {
        // `PipelineError::Output` is transparent: its OutputError is not a link of the chain.
        let is_locked = |output: &OutputError| match output {
            OutputError::Locked { .. } | OutputError::StillLocked { .. } => true,
            OutputError::Write { .. }
            | OutputError::OldManifest { .. }
            | OutputError::Symlink { .. }
            | OutputError::LinkedFolder { .. }
            | OutputError::RunsExhausted { .. } => false,
        };
        let locked = err.chain().any(|cause| {
            cause.downcast_ref().is_some_and(is_locked)
                || matches!(
                    cause.downcast_ref(),
                    Some(PipelineError::Output(output)) if is_locked(output)
                )
        });
        let signal = err.chain().find_map(|cause| match cause.downcast_ref() {
            Some(PipelineError::Interrupted { signal, .. }) => i32::try_from(*signal).ok(),
            _ => None,
        });
        match (signal, locked) {
            (Some(signal), _) => Exit::Interrupted(signal),
            (None, true) => Exit::Locked,
            (None, false) => Exit::Error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_lists_every_exit_code() {
        let codes = [
            Exit::Clean,
            Exit::Findings,
            Exit::Error,
            Exit::Locked,
            Exit::Interrupted(2),
            Exit::Interrupted(15),
        ];
        for exit in codes {
            let row = format!("\n  {:<4} ", exit.code());
            assert!(EXIT_CODES_HELP.contains(&row), "{row:?}");
        }
    }
}

#[cfg(test)]
mod version_tests {
    #[test]
    fn the_version_names_the_codex_release_the_built_in_rules_target() {
        let rules = crate::rules::RuleSet::builtin().map_err(|e| e.to_string());
        let target = rules.map(|r| r.codex_version);
        assert_eq!(
            Ok(crate::cli::VERSION.to_string()),
            target.map(|t| format!("{} (target Codex {t})", env!("CARGO_PKG_VERSION")))
        );
    }
}
