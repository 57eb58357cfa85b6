//! One file per subcommand; each owns its `run` and says how it ended as an [`Exit`]. The
//! exit codes live here; what each means for each command is one table,
//! [`ui::help::EXIT_MEANINGS`], from which every `--help` and man page lists its command's
//! own. In short:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | everything converted, every rollout passed, no rule-file finding |
//! | 1 | the command ran and found something: records quarantined, a file damaged, a rollout failing validation, a rule-file finding |
//! | 2 | usage error, or an error that stopped the command (missing input, bad rule file, unwritable output, a failed stage) |
//! | 3 | the output is locked by another run |
//! | 70 | internal error: a finished run's counts do not add up (a bug); its output is kept |
//! | 130 | stopped by SIGINT (Ctrl-C): finished work kept, reports marked `interrupted` |
//! | 143 | stopped by SIGTERM: the same |

pub mod convert;
pub mod explain;
pub mod man;
pub mod merge;
pub mod report;
pub mod rules;
pub mod status;
pub mod ui;
pub mod validate;

use std::sync::OnceLock;

use anyhow::Context as _;

use crate::audit::Summary;
use crate::input::SourceFormat;
use crate::source::shard::DEFAULT_SPLIT_BYTES;
use crate::source::split::{DEFAULT_MAX_CONVERSATION_BYTES, DEFAULT_MAX_RECORD_BYTES};

use crate::output::OutputError;
use crate::pipeline::{PipelineError, Signal};
use crate::rules::{PathExpr, RuleSet};

/// The rule set of `--rules` and `--messages-at` (`convert`, `audit`, `explain`): the
/// `--messages-at` paths are tried before the rule files'.
pub fn load_rules(paths: &[std::path::PathBuf], messages_at: &[String]) -> anyhow::Result<RuleSet> {
    let rules = RuleSet::load(paths).context("loading rule files")?;
    with_messages_at(rules, messages_at)
}

/// `rules` with the `--messages-at` paths tried before the rule files'.
pub(crate) fn with_messages_at(
    mut rules: RuleSet,
    messages_at: &[String],
) -> anyhow::Result<RuleSet> {
    let extra = messages_at
        .iter()
        .map(|path| {
            PathExpr::parse(path).map_err(|msg| {
                anyhow::anyhow!(
                    "--messages-at {path}: {msg}; write it like `body.messages` or `runs[-1].messages`"
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    rules.input.prefer_messages_at(extra);
    Ok(rules)
}

/// `println!` that returns the error instead of panicking: a reader that goes away
/// (`rollover validate --json | head -1`) is a broken pipe, which `main` takes for success;
/// `print!` would panic and exit 101.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}
pub(crate) use outln;

/// `print!`, returning the error as [`outln`] does.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}
pub(crate) use out;

/// Whether `err` is, or was caused by, a write to a reader that went away.
/// The walk that finds one file a user named (`explain FILE`, a review page's source): hidden
/// and through links, since naming it says to read it; a Codex rollout folder only under
/// `--from codex`, as `convert` reads it.
pub(crate) fn named_file_walk(from: Option<SourceFormat>) -> crate::source::WalkOptions {
    crate::source::WalkOptions {
        hidden: true,
        follow: true,
        stdin_name: "stdin".to_string(),
        filter: Default::default(),
        stop: Default::default(),
        codex_homes: from == Some(SourceFormat::CODEX),
        archive: crate::input::format::archive_lines(),
    }
}

/// The Codex home a command reads when none is named, found as Codex finds its own:
/// `$CODEX_HOME` when set and not empty, else `~/.codex`. Its path, and where it came from.
pub(crate) fn default_codex_home(
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> anyhow::Result<(std::path::PathBuf, &'static str)> {
    let set = |value: Option<std::ffi::OsString>| value.filter(|value| !value.is_empty());
    if let Some(home) = set(env("CODEX_HOME")) {
        return Ok((home.into(), "$CODEX_HOME"));
    }
    match set(env("HOME")) {
        Some(home) => Ok((std::path::PathBuf::from(home).join(".codex"), "~/.codex")),
        None => anyhow::bail!(
            "no folder given, and neither CODEX_HOME nor HOME is set to find the Codex home: name the folder"
        ),
    }
}

/// The folder a command was given, or the default Codex home ([`default_codex_home`]),
/// which must exist: a command that reads nothing must not pass.
pub(crate) fn given_or_codex_home(
    given: Option<&std::path::Path>,
) -> anyhow::Result<std::path::PathBuf> {
    if let Some(given) = given {
        return Ok(given.to_path_buf());
    }
    let (home, from) = default_codex_home(|name| std::env::var_os(name))?;
    if !home.is_dir() {
        anyhow::bail!(
            "no folder given, and the Codex home {} (from {from}) is not a folder: name the folder, or set CODEX_HOME",
            home.display()
        );
    }
    Ok(home)
}

pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `value` (a summary, a diff) as `--json` prints it: its fields, then `exit_code` and
/// `exit_reason`.
pub fn json_with_exit(
    value: &impl serde::Serialize,
    exit: Exit,
) -> serde_json::Result<serde_json::Value> {
    let mut out = serde_json::to_value(value)?;
    if let Some(map) = out.as_object_mut() {
        map.insert("exit_code".into(), exit.code().into());
        map.insert("exit_reason".into(), exit.reason().into());
    }
    Ok(out)
}

/// The object `--json` prints for a command that failed, as the README promises:
/// `{"exit_code","exit_reason","error"}`.
pub fn json_error(exit: Exit, error: &str) -> String {
    #[derive(serde::Serialize)]
    struct Failure<'a> {
        exit_code: i32,
        exit_reason: &'static str,
        error: &'a str,
    }
    let failure = Failure {
        exit_code: exit.code(),
        exit_reason: exit.reason(),
        error,
    };
    // Three plain fields: serialising them cannot fail, but a message is no reason to panic.
    serde_json::to_string(&failure).unwrap_or_else(|_| {
        format!(
            "{{\"exit_code\":{},\"exit_reason\":\"{}\"}}",
            exit.code(),
            exit.reason()
        )
    })
}

/// The command line as parsed, completed and documented: the clap types of [`crate::cli`]
/// with what only the library knows: the version (the Codex releases the output is tested
/// against), the extensions a walk reads (INPUT's help), the values `--from` takes (every [`SourceFormat`], so the shell completes
/// them and a typo is refused listing them) and the defaults of the size limits.
pub fn command() -> clap::Command {
    use clap::builder::PossibleValue;
    use clap::CommandFactory;
    let formats: Vec<PossibleValue> = SourceFormat::all()
        .map(|format| PossibleValue::new(format.name()).help(format.describe()))
        .collect();
    // The size limits' defaults are the library's, shown as `--help` shows a size.
    static SIZES: [(&str, u64, OnceLock<String>); 3] = [
        ("split_bytes", DEFAULT_SPLIT_BYTES, OnceLock::new()),
        (
            "max_record_bytes",
            DEFAULT_MAX_RECORD_BYTES,
            OnceLock::new(),
        ),
        (
            "max_conversation_bytes",
            DEFAULT_MAX_CONVERSATION_BYTES,
            OnceLock::new(),
        ),
    ];
    // Every extension a walk reads, from the walk's own lists.
    let inputs = format!(
        "Input files or folders; a folder is walked for {}. A file named here is read \
         whatever its name; `-` is standard input",
        crate::source::extensions_read()
    );
    let with_library_values = |mut cmd: clap::Command| {
        cmd = cmd.mut_arg("inputs", |arg| arg.help(inputs.clone()));
        cmd = cmd.mut_arg("from", |arg| {
            arg.value_parser(clap::builder::PossibleValuesParser::new(formats.clone()))
        });
        for (id, bytes, text) in &SIZES {
            let text: &'static str = text.get_or_init(|| size_text(*bytes));
            cmd = cmd.mut_arg(*id, |arg| arg.required(false).default_value(text));
        }
        cmd
    };
    let mut cmd = crate::cli::Cli::command().version(version());
    for name in ["convert", "audit"] {
        cmd = cmd.mut_subcommand(name, with_library_values);
    }
    // Audit takes convert's flags, but is always a dry run: it writes reports, no rollout.
    cmd = cmd.mut_subcommand("audit", |audit| {
        audit
            .mut_arg("out", |arg| arg.help(ui::help::AUDIT_OUT_HELP))
            .mut_arg("dry_run", |arg| arg.hide(true))
    });
    ui::help::speak_for_itself(cmd, "")
}

/// A size as the size flags read it and `--help` shows it: `256MiB`, `1GiB`, else bytes.
fn size_text(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// `--version`: rollover's, the Codex release the built-in rules target, and every release
/// the output is tested against (`validate::SUPPORTED_CODEX`).
pub fn version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        let target = crate::rules::RuleSet::builtin()
            .map(|rules| rules.codex_version)
            .unwrap_or_default();
        format!(
            "{} (target Codex {target}; tested with Codex {})",
            env!("CARGO_PKG_VERSION"),
            crate::validate::SUPPORTED_CODEX.join(", ")
        )
    })
}

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
    /// Exit 70 (`EX_SOFTWARE`): a bug showed, the run's accounting does not add up.
    Internal,
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Clean => 0,
            Exit::Findings => 1,
            Exit::Error => 2,
            Exit::Locked => 3,
            Exit::Interrupted(signal) => 128 + signal,
            Exit::Internal => 70,
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
            Exit::Internal => "internal",
        }
    }

    /// How a finished run (`convert`, `audit`, `report merge`) exits: interrupted (130/143),
    /// refused to prune (2), findings (1: [`Summary::has_findings`], beyond `max_rate` when
    /// given), or clean. Counts that do not add up ([`Summary::adds_up`]) are a bug: said on
    /// stderr whatever `--quiet`, exit 70; the output and reports are written all the same.
    pub fn for_run(summary: &Summary, stopped_by: Option<Signal>, max_rate: Option<f64>) -> Exit {
        if !summary.adds_up() {
            let t = &summary.totals;
            eprintln!(
                "rollover: internal error: the counts of run {} do not add up: {} records read, but {} converted + {} merged into a conversation + {} quarantined + {} joined + {} dropped by rule. This is a bug: please report it with the input. The output and reports are written.",
                summary.run,
                t.records,
                t.converted,
                summary.reading.records_merged,
                t.quarantined,
                t.joined,
                summary.reading.records_dropped.values().sum::<u64>()
            );
            return Exit::Internal;
        }
        if let Some(signal) = stopped_by {
            return Exit::Interrupted(signal.number());
        }
        // Refused to prune: nothing was removed, and someone must look (an input missing?).
        if summary.home.prune_refused.is_some() {
            return Exit::Error;
        }
        Exit::findings_if(summary.has_findings(max_rate))
    }
}

/// Why a command stopped, typed as far as its exit code needs: [`RunError::exit`] is the one
/// place an error becomes an exit code (as jaq's `Error` reports its own). The library's errors
/// are classed by their variant where a command receives them, never by searching a chain.
#[derive(Debug)]
pub enum RunError {
    /// Another run holds the output (exit 3).
    Locked(anyhow::Error),
    /// A signal stopped the run before it converted anything (exit 128 + the signal).
    Interrupted { signal: i32, error: anyhow::Error },
    /// Anything else that stopped the command: a usage error, a missing input, a bad rule
    /// file, an unwritable output (exit 2).
    Failed(anyhow::Error),
}

impl RunError {
    /// How a command that failed so exits.
    pub fn exit(&self) -> Exit {
        match self {
            RunError::Locked(_) => Exit::Locked,
            RunError::Interrupted { signal, .. } => Exit::Interrupted(*signal),
            RunError::Failed(_) => Exit::Error,
        }
    }

    /// The error as printed, with its causes.
    pub fn error(&self) -> &anyhow::Error {
        match self {
            RunError::Locked(error)
            | RunError::Interrupted { error, .. }
            | RunError::Failed(error) => error,
        }
    }

    /// The same error said after `context` (what the command was doing), its class kept.
    pub fn context(self, context: String) -> RunError {
        match self {
            RunError::Locked(error) => RunError::Locked(error.context(context)),
            RunError::Interrupted { signal, error } => RunError::Interrupted {
                signal,
                error: error.context(context),
            },
            RunError::Failed(error) => RunError::Failed(error.context(context)),
        }
    }
}

impl From<anyhow::Error> for RunError {
    fn from(error: anyhow::Error) -> RunError {
        RunError::Failed(error)
    }
}

/// A write to stdout that failed (a reader gone away among them: [`is_broken_pipe`]).
impl From<std::io::Error> for RunError {
    fn from(error: std::io::Error) -> RunError {
        RunError::Failed(error.into())
    }
}

/// Whether the output is held by another run.
fn is_locked(error: &OutputError) -> bool {
    match error {
        OutputError::Locked { .. } | OutputError::StillLocked { .. } => true,
        OutputError::Write { .. }
        | OutputError::OldManifest { .. }
        | OutputError::CorruptManifest { .. }
        | OutputError::Symlink { .. }
        | OutputError::LinkedFolder { .. }
        | OutputError::RunsExhausted { .. } => false,
    }
}

impl From<OutputError> for RunError {
    fn from(error: OutputError) -> RunError {
        if is_locked(&error) {
            RunError::Locked(error.into())
        } else {
            RunError::Failed(error.into())
        }
    }
}

impl From<PipelineError> for RunError {
    fn from(error: PipelineError) -> RunError {
        // (held by another run, the signal that stopped it)
        let (locked, signal) = match &error {
            PipelineError::Output(output) => (is_locked(output), None),
            PipelineError::Interrupted { signal, .. } => (false, i32::try_from(*signal).ok()),
            PipelineError::NothingToDo { .. }
            | PipelineError::Source(_)
            | PipelineError::FormatMismatch { .. }
            | PipelineError::PruneRefused { .. }
            | PipelineError::Pool { .. }
            | PipelineError::Panicked { .. } => (false, None),
        };
        match (locked, signal) {
            (true, _) => RunError::Locked(error.into()),
            (false, Some(signal)) => RunError::Interrupted {
                signal,
                error: error.into(),
            },
            (false, None) => RunError::Failed(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_run_whose_counts_do_not_add_up_exits_internal_before_anything_else() {
        let mut summary = Summary::default();
        summary.totals.records = 2;
        summary.totals.converted = 1;
        summary.totals.quarantined = 1;
        assert_eq!(Exit::for_run(&summary, None, None), Exit::Findings);
        assert_eq!(
            Exit::for_run(&summary, Some(Signal::Term), None),
            Exit::Interrupted(15)
        );
        summary.totals.converted = 0;
        assert_eq!(
            Exit::for_run(&summary, Some(Signal::Term), None),
            Exit::Internal
        );
        assert_eq!(
            (Exit::Internal.code(), Exit::Internal.reason()),
            (70, "internal")
        );
    }

    #[test]
    fn a_run_error_exits_by_its_class() {
        let locked = OutputError::Locked {
            path: "out".into(),
            pid: 7,
        };
        let stopped = PipelineError::Interrupted {
            signal: 2,
            stage: "walking",
        };
        let nothing = PipelineError::NothingToDo {
            found: "no file".into(),
        };
        let exits = [
            RunError::from(PipelineError::Output(locked)).exit(),
            RunError::from(stopped).exit(),
            RunError::from(nothing)
                .context("converting into out".into())
                .exit(),
            RunError::from(anyhow::anyhow!("bad flag")).exit(),
        ];
        assert_eq!(
            exits,
            [Exit::Locked, Exit::Interrupted(2), Exit::Error, Exit::Error]
        );
    }
}

#[cfg(test)]
mod home_tests {
    use std::ffi::OsString;
    use std::path::PathBuf;

    #[test]
    fn the_default_home_is_codex_home_then_dot_codex_as_codex_finds_it() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let found = |pairs| super::default_codex_home(env(pairs)).map_err(|e| e.to_string());
        assert_eq!(
            found(&[("CODEX_HOME", "/c"), ("HOME", "/h")]),
            Ok((PathBuf::from("/c"), "$CODEX_HOME"))
        );
        assert_eq!(
            found(&[("CODEX_HOME", ""), ("HOME", "/h")]),
            Ok((PathBuf::from("/h/.codex"), "~/.codex"))
        );
        assert!(found(&[]).unwrap_err().contains("name the folder"));
    }
}

#[cfg(test)]
mod version_tests {
    #[test]
    fn the_version_names_the_target_and_every_supported_codex_release() {
        let rules = crate::rules::RuleSet::builtin().map_err(|e| e.to_string());
        let target = rules.map(|r| r.codex_version);
        assert_eq!(
            Ok(super::version().to_string()),
            target.map(|t| format!(
                "{} (target Codex {t}; tested with Codex 0.169.1, 0.171.0)",
                env!("CARGO_PKG_VERSION")
            ))
        );
    }

    #[test]
    fn the_size_limits_default_to_the_library_values() {
        use clap::FromArgMatches;
        let matches = super::command()
            .try_get_matches_from(["rollover", "convert", "in.jsonl", "--out", "home"])
            .expect("a convert command line");
        let cli = crate::cli::Cli::from_arg_matches(&matches).expect("parsed");
        let crate::cli::Command::Convert(args) = cli.command else {
            panic!("not parsed as convert");
        };
        assert_eq!(
            (
                args.split_bytes,
                args.max_record_bytes,
                args.max_conversation_bytes
            ),
            (
                super::DEFAULT_SPLIT_BYTES,
                super::DEFAULT_MAX_RECORD_BYTES,
                super::DEFAULT_MAX_CONVERSATION_BYTES
            )
        );
        assert_eq!(
            [256 << 20, 1 << 30, 64 << 10, 1_000_000].map(super::size_text),
            ["256MiB", "1GiB", "64KiB", "1000000"]
        );
    }

    #[test]
    fn every_format_is_a_value_of_from() {
        let cmd = super::command();
        let convert = cmd.find_subcommand("convert").expect("convert");
        let from = convert
            .get_arguments()
            .find(|a| a.get_id() == "from")
            .expect("--from");
        let values: Vec<String> = from
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        let formats: Vec<String> = crate::input::SourceFormat::all()
            .map(|f| f.name().to_string())
            .collect();
        assert_eq!(values, formats);
    }
}
