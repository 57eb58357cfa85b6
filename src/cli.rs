//! Command-line types (clap derive). Help text is the doc comments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Migrate archives of chat transcripts into Codex rollouts and Responses items.
///
/// The version (`--version`, which names the Codex releases the output is tested against) and
/// the values of `--from` are set from the library's lists by `commands::command`, which
/// parses, completes and documents the command line: this module knows no other.
#[derive(Debug, Parser)]
#[command(name = "rollover", about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Print nothing but errors (with --json, nothing but the JSON).
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Say more: a line per input file done (convert, audit), every file checked (validate);
    /// each command's --help says what it adds there.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// When to colour: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Convert transcript archives into a Codex home (rollouts + audit under rollover/).
    Convert(ConvertArgs),
    /// Check rollout files (plain or .jsonl.zst, a file or a Codex home) against the invariants.
    Validate(ValidateArgs),
    /// Work with rule files.
    Rules(RulesArgs),
    /// Dry run for a cutover review: every check and the reports, no rollout.
    ///
    /// Every stage and check of convert and the reports (report.md, report.html), but no
    /// rollout. The same options as convert; `--sample` audits a share of the records.
    Audit(ConvertArgs),
    /// Convert one record and show the rule behind each item.
    ///
    /// Message by message: the input message, each decision with its rule (repairs and drops
    /// marked `!`), and the items it became.
    Explain(ExplainArgs),
    /// Work with run reports.
    Report(ReportArgs),
    /// Show a home's state: its input files, sessions (left and kept pending), last runs.
    ///
    /// Reads `OUT/rollover/` and lists `OUT/sessions/`; asks whether a run holds the lock
    /// without taking it: safe beside a running conversion.
    Status(StatusArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(CompletionsArgs),
    /// Print a man page (roff) on stdout: rollover(1), or one subcommand's
    /// (`rollover man convert`, `rollover man report diff`); `--dir` writes them all.
    Man(ManArgs),
}

impl Command {
    /// Whether the command was asked for JSON: then every failure prints its
    /// `{"exit_code","exit_reason","error"}` object on stdout too.
    pub fn json(&self) -> bool {
        match self {
            Command::Convert(args) | Command::Audit(args) => args.json,
            Command::Validate(args) => args.json,
            Command::Explain(args) => args.json,
            Command::Status(args) => args.json,
            Command::Report(args) => match &args.command {
                ReportCommand::Diff(diff) => diff.json,
                ReportCommand::Merge(merge) => merge.json,
            },
            Command::Rules(_) | Command::Completions(_) | Command::Man(_) => false,
        }
    }
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print, e.g. `convert`, or `report diff` (default: the
    /// top page, rollover(1)).
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Write every page (rollover.1, rollover-convert.1, rollover-report-diff.1, ...) into
    /// this folder instead, e.g. ~/.local/share/man/man1.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The record: `FILE` (its first record) or `FILE:LINE` (the record starting on that
    /// line), in any source format; or, with SESSION, the output folder of `convert`.
    pub record: String,
    /// A session of the output folder RECORD: its id or its rollout's path. Its source record
    /// is found through the run reports and the manifest, and read with the run's rules.
    pub session: Option<String>,
    /// Read the file as this source format instead of detecting it from its first record
    /// (as for convert).
    #[arg(long, value_name = "FORMAT")]
    pub from: Option<String>,
    /// Rule files, applied in order (`default` names the built-in rules). Default: built-in.
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// Where the record keeps its messages (as for convert).
    #[arg(long = "messages-at", value_name = "PATH")]
    pub messages_at: Vec<String>,
    /// Print the same as JSON, for machines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The output folder of `convert` (a Codex home). Default: the Codex home, found as Codex
    /// finds it: $CODEX_HOME, else ~/.codex.
    pub out: Option<PathBuf>,
    /// How many of the last runs to show.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub runs: usize,
    /// List every session the manifest knows, by id (the ids `explain OUT SESSION` takes),
    /// with its rollout and the input file it came from.
    #[arg(long)]
    pub sessions: bool,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub command: ReportCommand,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Compare two runs (e.g. before and after a rule change): outcomes, decisions by rule,
    /// and the conversations whose items changed. Exit 1 when anything moved.
    Diff(ReportDiffArgs),
    /// Join the reports of a sharded run's shards into one run report.
    ///
    /// Reads each shard's last run under OUT/rollover/shards/KKKK-of-NNNN/ and writes one run,
    /// OUT/rollover/runs/NNNN/ (`latest`), as an unsharded run would have: summary.json,
    /// conversations.jsonl, quarantine.jsonl, report.md, report.html. Fails, naming the shard
    /// and the command to re-run, when a shard is missing or did not finish, or when the
    /// shards ran with different rules, options or rollover versions.
    Merge(ReportMergeArgs),
}

#[derive(Debug, Args)]
pub struct ReportMergeArgs {
    /// The Codex home the shards wrote into (their --out).
    pub out: PathBuf,
    /// The shard count to merge, when OUT holds shards of several counts (default: the one
    /// count found).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub shards: Option<u32>,
    /// Print the merged summary as JSON on stdout instead of the text summary.
    #[arg(long)]
    pub json: bool,
    /// When another run holds the output's lock, wait up to this many seconds for it (as
    /// `flock -w`) instead of exiting 3 at once; then exit 3 naming its pid.
    #[arg(long, value_name = "SECONDS", value_parser = parse_wait)]
    pub wait: Option<std::time::Duration>,
}

#[derive(Debug, Args)]
pub struct ReportDiffArgs {
    /// A run folder (`OUT/rollover/runs/0001`), or a Codex home (its latest run).
    pub before: PathBuf,
    /// The run to compare with it.
    pub after: PathBuf,
    /// Conversations to list by name (the rest are counted).
    #[arg(long, default_value_t = 20)]
    pub max_listed: usize,
    /// Print what moved as one JSON document on stdout (every changed count and every
    /// conversation, none left out), with `exit_code` and `exit_reason`.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ConvertArgs {
    /// Input files or folders; `-` is standard input. (`commands::command` writes the
    /// help shown, naming every extension a walk reads.)
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The Codex home to write: rollouts under sessions/, the audit under rollover/.
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// Rule files, applied in order (`default` names the built-in rules). Default: built-in.
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// Where a record keeps its messages, e.g. `body.messages` or `runs[-1].messages`; tried
    /// before the rule files' paths. Repeatable.
    #[arg(long = "messages-at", value_name = "PATH")]
    pub messages_at: Vec<String>,
    /// Read every input as this source format instead of detecting each file's format from
    /// its first record (README "Source formats"; the values are listed below and completed
    /// by the shell).
    #[arg(long, value_name = "FORMAT")]
    pub from: Option<String>,
    /// Do not look for the messages by shape when no `messages_at` path holds them (quarantine
    /// the record instead).
    #[arg(long)]
    pub no_guess: bool,
    /// The folder every session says it ran in (session_meta.cwd), overriding the rule files'
    /// `[session] cwd` and the folder a source records (a Claude Code session's `cwd`, kept
    /// as `source_cwd` in conversations.jsonl). Codex's picker lists the sessions of the
    /// folder it runs in.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// --format responses: the `model` of every body whose record names none (a record's own
    /// model is kept), so each body is ready to send; counted under rule
    /// `builtin.default-model` in the audit.
    #[arg(long, value_name = "NAME", value_parser = parse_model)]
    pub model: Option<String>,
    /// The key of standard input (`-`) and other streams: session ids and reports use it, and
    /// --format responses writes OUT/responses/NAME. A relative path without `..` (e.g.
    /// `imports/today.jsonl`): an absolute or climbing name, or an empty one, is refused.
    #[arg(long, value_name = "NAME", default_value = "stdin", value_parser = parse_stdin_name)]
    pub stdin_name: String,
    /// Read hidden files and folders (names starting with `.`) when walking a folder.
    #[arg(long)]
    pub hidden: bool,
    /// Follow symlinks when walking an input folder (a symlink loop is reported and skipped).
    /// The inputs only: a symlinked folder in OUT is --write-through-links.
    #[arg(long)]
    pub follow: bool,
    /// Write through OUT/sessions, OUT/archived_sessions or OUT/responses when it is a symlink
    /// you made (sessions moved to another disk). Without it such a folder stops the run,
    /// naming it: a planted link would send the writes outside OUT.
    #[arg(long)]
    pub write_through_links: bool,
    /// When walking a folder, read only the files matching GLOB (repeatable: any of them),
    /// matched against the path below the INPUT folder: `*.jsonl.zst` (a name without `/`
    /// matches at any depth), `2024-*/**`; `*` stays within a name, `**` crosses folders.
    /// Files named on the command line are always read.
    #[arg(long = "glob", value_name = "GLOB")]
    pub globs: Vec<String>,
    /// When walking a folder, leave out the files matching GLOB and do not enter the folders
    /// matching it (repeatable), matched as --glob: `*.bak.jsonl`, `tmp`, `/drafts`. Wins
    /// over --glob.
    #[arg(long = "exclude", value_name = "GLOB")]
    pub excludes: Vec<String>,
    /// Threads that convert, 1 to 1024 (default: one per core); as many write the rollouts,
    /// and up to half as many decompress input files ahead of the reader.
    #[arg(short = 'j', long, value_parser = parse_jobs)]
    pub jobs: Option<usize>,
    /// Run every stage and write the report, but no rollout.
    #[arg(long)]
    pub dry_run: bool,
    /// Convert every input file again, ignoring the manifest of earlier runs (sessions changed
    /// since they were written are still never overwritten without --force).
    #[arg(long)]
    pub full: bool,
    /// Replace sessions changed on disk since rollover wrote them (resumed in Codex, edited),
    /// after copying each to OUT/rollover/replaced/.
    #[arg(long)]
    pub force: bool,
    /// Remove the sessions whose records are gone from the inputs (a record cut from a file,
    /// a file no longer in the walk), as `rclone sync` does; never one that Codex changed since.
    /// Without it a run only adds and updates (copy semantics).
    #[arg(long)]
    pub prune: bool,
    /// At most this many sessions one --prune removes: a number (`500`) or a share of the
    /// sessions the home holds (`10%`, the default). Beyond it --prune removes nothing, says
    /// how many would go, and the run exits 2.
    #[arg(long, value_name = "N|P%", requires = "prune")]
    pub max_prune: Option<String>,
    /// fsync every file and folder written, so a power loss cannot lose what the manifest
    /// records as done (slower: see README "Scheduled jobs").
    #[arg(long)]
    pub durable: bool,
    /// Print one machine-readable summary on stdout (summary.json's numbers plus the exit
    /// code and its reason) instead of the text summary.
    #[arg(long)]
    pub json: bool,
    /// When another run holds the output's lock, wait up to this many seconds (e.g. 600, or
    /// 0.5) for it to end, as `flock -w` does, instead of exiting 3 at once; when the time
    /// runs out, exit 3 naming its pid and how long this run waited.
    #[arg(long, value_name = "SECONDS", value_parser = parse_wait)]
    pub wait: Option<std::time::Duration>,
    /// After the run, remove the oldest run folders (OUT/rollover/runs/NNNN) so that at most N
    /// remain; never this run's, nor the one OUT/rollover/latest points at. Default: keep all.
    #[arg(long, value_name = "N", value_parser = parse_keep_runs)]
    pub keep_runs: Option<usize>,
    /// Exit 1 only when more than this share of the records was quarantined (e.g. 0.01);
    /// without it, any quarantined record makes the exit code 1.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub max_quarantine_rate: Option<f64>,
    /// Audit only this share of the records (e.g. 0.05), picked by a hash of each record's
    /// key so the same ones every time; the report estimates the full run. Dry runs only.
    #[arg(long, value_name = "RATE", value_parser = parse_sample)]
    pub sample: Option<f64>,
    /// Show short excerpts of quarantined records in the reports (they hold no transcript
    /// text otherwise); the reports say so at the top.
    #[arg(long)]
    pub report_text: bool,
    /// Write review pages into the run's report folder (`review/index.html`, linked from
    /// report.html): for each rule that fired, each repair and each quarantine reason, the
    /// first N conversations side by side (source messages, decisions, what was written).
    /// These pages hold transcript text; each says so at its top.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub review: Option<u32>,
    /// What to write: `codex` rollouts under OUT/sessions/, or `responses` API request bodies,
    /// one JSONL file per input file under OUT/responses/ (one line per conversation; always
    /// below it: a `..` of the input's path is written as a folder named `%2E%2E`). One OUT
    /// holds one format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Codex)]
    pub format: OutputFormat,
    /// --format responses: `normal` (instructions and tools top-level) or `lite` (as Codex
    /// encodes for Responses Lite: both as leading developer items).
    #[arg(long, value_enum, default_value_t = WireArg::Normal)]
    pub wire: WireArg,
    /// --format responses: wrap each body as a Batch API line
    /// (`{"custom_id","method":"POST","url":"/v1/responses","body"}`).
    #[arg(long)]
    pub batch_envelope: bool,
    /// --format responses: write each file zstd-compressed (`.jsonl.zst`).
    #[arg(long)]
    pub compress: bool,
    /// Convert only shard K of N (K from 0 to N-1): the input files, and ranges of files larger
    /// than --split-bytes, whose hash of their key falls in it. Shards write into one shared
    /// OUT, their reports under OUT/rollover/shards/; `rollover report merge OUT` joins them.
    /// Without it, the index comes from SLURM_ARRAY_TASK_ID (with SLURM_ARRAY_TASK_COUNT or
    /// --shards) or JOB_COMPLETION_INDEX (with --shards).
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    pub shard: Option<ShardArg>,
    /// The number of shards, with the index from the job engine's environment (a Slurm array
    /// task, a Kubernetes Indexed Job).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub shards: Option<u32>,
    /// Sharded runs: split files larger than this into byte ranges of this size, spread over
    /// the shards (e.g. 256MiB, 64KiB, 1000000).
    // Default: the library's limit, set by `commands::command`.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub split_bytes: u64,
    /// Quarantine (class `too_large`) any record longer than this, without ever loading it
    /// whole: memory stays bound by this times --jobs (e.g. 256MiB, 64KiB, 1000000).
    // Default: the library's limit, set by `commands::command`.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_record_bytes: u64,
    /// Refuse (the file marked damaged, with the reason) a file whose format holds one
    /// conversation across its records (Claude Code sessions, API logs) when those records
    /// add up to more than this: such a file is held whole while it is read (e.g. 1GiB, 64MiB).
    // Default: the library's limit, set by `commands::command`.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_conversation_bytes: u64,
    /// The memory the whole run may hold for work read whole (Claude Code sessions, API logs
    /// grouped by chain, JSON documents) and for records of 1 MiB or more, whatever --jobs:
    /// such work waits for earlier work to be written when it does not fit, and a file that
    /// could never fit is refused (marked damaged, the reason naming this flag). Default: half
    /// the machine's memory, or of its cgroup's limit when lower (e.g. 4GiB, 512MiB).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory: Option<u64>,
    /// Benchmark baseline (samples/bench.sh): parse and re-serialise each record, no conversion.
    #[arg(long, hide = true)]
    pub baseline: bool,
}

/// `--shard K/N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardArg {
    pub index: u32,
    pub count: u32,
}

fn parse_shard(text: &str) -> Result<ShardArg, String> {
    let usage = || {
        format!("`{text}` is not a shard: write K/N, e.g. 0/4 for the first of 4 (K from 0 to N-1)")
    };
    let (index, count) = text.split_once('/').ok_or_else(usage)?;
    let index: u32 = index.trim().parse().map_err(|_| usage())?;
    let count: u32 = count.trim().parse().map_err(|_| usage())?;
    if count == 0 {
        return Err("the shard count N must be at least 1".into());
    }
    if index >= count {
        return Err(format!(
            "shard {index} is not below the shard count {count}: shards are numbered 0 to {}",
            count - 1
        ));
    }
    Ok(ShardArg { index, count })
}

/// A size in bytes: a number, optionally with a binary unit (KiB, MiB, GiB; K, M, G alike).
fn parse_size(text: &str) -> Result<u64, String> {
    let usage = || format!("`{text}` is not a size: write e.g. 256MiB, 64KiB or 1000000 (bytes)");
    let trimmed = text.trim();
    let digits = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits);
    let number: u64 = number.parse().map_err(|_| usage())?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return Err(usage()),
    };
    let bytes = number.checked_shl(shift).filter(|b| b >> shift == number);
    match bytes {
        Some(0) => Err("a size must be at least 1 byte".into()),
        Some(bytes) => Ok(bytes),
        None => Err(usage()),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Codex,
    Responses,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WireArg {
    Normal,
    Lite,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Rollout files or folders (a Codex home is walked for rollout-*.jsonl[.zst]). Default:
    /// the Codex home, found as Codex finds it: $CODEX_HOME, else ~/.codex.
    pub paths: Vec<PathBuf>,
    /// The Codex release to check against: one of the supported releases (`--version` lists
    /// them), or a prefix of one (`0.171`). Their rollouts and marker registry are the same.
    #[arg(long, value_name = "VERSION", default_value = "0.169")]
    pub codex_version: String,
    /// Rule files whose marker registry to use (default: built-in).
    #[arg(long = "rules", value_name = "FILE")]
    pub rules: Vec<PathBuf>,
    /// Print a JSON report for machines instead of text.
    #[arg(long)]
    pub json: bool,
    /// Violations to print per file (text output).
    #[arg(long, default_value_t = 10)]
    pub max_per_file: usize,
    /// A rollout line longer than this is a violation and is not read: it is skipped without
    /// being loaded, so memory stays bound by this (e.g. 256MiB, 64KiB, 1000000).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "256MiB")]
    pub max_record_bytes: u64,
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    #[command(subcommand)]
    pub command: RulesCommand,
}

#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Check rule files: syntax (with line numbers), unknown keys, regexes, unreachable rules,
    /// overlapping markers. Files are checked on their own and then merged in order.
    Check(RulesCheckArgs),
    /// List every `[policy]` key: its rule id, allowed values, value under the rule files
    /// (default: built-in) and what it decides.
    Policies(RulesPoliciesArgs),
}

#[derive(Debug, Args)]
pub struct RulesCheckArgs {
    /// Rule files (`default` names the built-in rules).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RulesPoliciesArgs {
    /// Rule files whose values to show, applied in order (`default` names the built-in
    /// rules). Default: built-in.
    pub files: Vec<PathBuf>,
}

/// The most worker threads `--jobs` takes: far more than any machine has cores, and far fewer
/// than the process can start (100,000 threads abort it before a single record is read).
pub const MAX_JOBS: usize = 1024;

fn parse_jobs(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_JOBS).contains(&n) => Ok(n),
        Ok(0) => Err("give at least 1 worker thread, or leave --jobs out for one per core".into()),
        Ok(n) => Err(format!(
            "{n} threads is more than the {MAX_JOBS} rollover can use; leave --jobs out for one per core"
        )),
        Err(_) => Err(format!("`{text}` is not a number of threads (1 to {MAX_JOBS})")),
    }
}

fn parse_keep_runs(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("keeping 0 run folders would remove this run's own reports: keep at least 1 (leave --keep-runs out to keep every run)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{text}` is not a number of run folders to keep (1 or more)")),
    }
}

/// `--stdin-name`: a key like the walk's, a relative path that stays where it is, since the
/// Responses output writes a file at it below OUT.
fn parse_stdin_name(text: &str) -> Result<String, String> {
    use std::path::{Component, Path};
    let why = if text.trim().is_empty() {
        Some("it is empty, and session ids and reports need a name")
    } else if Path::new(text).is_absolute() {
        Some("it is absolute, and it names a file written below --out")
    } else if Path::new(text)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        Some("it has a `..` component, which would climb out of --out where it names a file")
    } else {
        None
    };
    match why {
        Some(why) => Err(format!(
            "`{text}` cannot be the stdin name: {why}; give a relative path such as `stdin` or `imports/today.jsonl`"
        )),
        None => Ok(text.to_string()),
    }
}

/// The longest `--wait`: a day, far beyond any nightly job's slot, well inside `Duration`.
const MAX_WAIT_SECONDS: f64 = 86_400.0;

fn parse_wait(text: &str) -> Result<std::time::Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(seconds) if (0.0..=MAX_WAIT_SECONDS).contains(&seconds) => {
            Ok(std::time::Duration::from_secs_f64(seconds))
        }
        _ => Err(format!(
            "`{text}` is not a number of seconds to wait for the lock (0 to {MAX_WAIT_SECONDS}, e.g. 600 or 0.5)"
        )),
    }
}

/// `--model`: a model slug as the API takes it.
fn parse_model(text: &str) -> Result<String, String> {
    if text.trim().is_empty() || text.trim() != text {
        return Err(format!(
            "`{text}` is not a model name: give the slug the API takes, e.g. gpt-5 (no spaces around it)"
        ));
    }
    Ok(text.to_string())
}

/// `--sample`: a share above 0 (0 would audit nothing) and at most 1.
fn parse_sample(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate > 0.0 && rate <= 1.0 => Ok(rate),
        Ok(0.0) => Err(
            "a sample of 0 audits no record at all: give a share above 0, e.g. 0.05 for 5 %, or leave --sample out to audit every record".into(),
        ),
        _ => Err(format!(
            "`{text}` is not a share above 0 and at most 1 (e.g. 0.05 for 5 %)"
        )),
    }
}

fn parse_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if (0.0..=1.0).contains(&rate) => Ok(rate),
        _ => Err(format!(
            "`{text}` is not a share between 0 and 1 (e.g. 0.01 for 1 %)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn shards_and_sizes_parse_with_messages_that_say_the_fix() {
        assert_eq!(parse_shard("2/4"), Ok(ShardArg { index: 2, count: 4 }));
        assert!(parse_shard("4/4").unwrap_err().contains("0 to 3"));
        assert!(parse_shard("0/0").is_err());
        assert!(parse_shard("2").unwrap_err().contains("K/N"));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("99999999999999G").is_err());
        assert_eq!(
            parse_wait("1.5"),
            Ok(std::time::Duration::from_millis(1500))
        );
        assert_eq!(parse_wait("0"), Ok(std::time::Duration::ZERO));
        assert!(parse_wait("-1").unwrap_err().contains("seconds"));
        assert!(parse_wait("soon").is_err());
        assert!(parse_wait("NaN").is_err());
        assert_eq!(parse_keep_runs("3"), Ok(3));
        assert!(parse_keep_runs("0").unwrap_err().contains("at least 1"));
        assert!(parse_keep_runs("-2").is_err());
        assert_eq!(parse_stdin_name("a/b.jsonl"), Ok("a/b.jsonl".to_string()));
        assert_eq!(parse_stdin_name("./x"), Ok("./x".to_string()));
        assert!(parse_stdin_name("../x").unwrap_err().contains("`..`"));
        assert!(parse_stdin_name("a/../../x").unwrap_err().contains("`..`"));
        assert!(parse_stdin_name("/tmp/x").unwrap_err().contains("absolute"));
        assert!(parse_stdin_name("").unwrap_err().contains("empty"));
        assert!(parse_stdin_name("..x/y").is_ok());
    }
}
