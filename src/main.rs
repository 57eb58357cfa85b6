//! Parse the command line, run the subcommand, map the outcome to an exit code (the table is
//! in `commands`, and a failure's code is `RunError::exit`'s).
//!
//! Two promises are kept here, for every command: a reader that goes away (`| head`) is
//! success, never a panic; and a command given `--json` prints its
//! `{"exit_code","exit_reason","error"}` object on stdout for every failure, a usage error
//! included.

use std::io::Write;

use clap::FromArgMatches;

/// The pipeline allocates many short-lived strings across threads; mimalloc spends far less
/// time in malloc/free than the system allocator there (see samples/bench.sh). It is linked as
/// the process's `malloc` (the crate's `override` feature) rather than declared the global
/// allocator: Rust's default allocator then calls plain `malloc`, where the crate's
/// `GlobalAlloc` calls `mi_malloc_aligned` for every block, and mimalloc v3 serves an aligned
/// request over 1 KiB that is not a power of two by over-allocating (more instructions, and
/// ~10 % more peak RSS on small records).
use mimalloc as _;

use rollover::cli::{Cli, Command, ReportCommand, RulesCommand};
use rollover::commands::{self, is_broken_pipe, json_error, ui::Ui, Exit, RunError};

fn main() {
    let parsed = commands::command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => usage_error(&err),
    };
    let ui = Ui::new(&cli.global);
    let json = cli.command.json();
    // `print!` buffers a line; what is left must reach the reader before `exit`, and a reader
    // gone by then is a broken pipe like any other.
    let result = run(cli.command, &ui).and_then(|exit| {
        std::io::stdout().flush()?;
        Ok(exit)
    });
    match result {
        Ok(exit) => std::process::exit(exit.code()),
        Err(err) if is_broken_pipe(err.error()) => std::process::exit(Exit::Clean.code()),
        Err(err) => {
            let exit = err.exit();
            let message = format!("{:#}", err.error());
            if json {
                // Best effort: the error goes to stderr below whatever happens to stdout.
                let _ = writeln!(std::io::stdout(), "{}", json_error(exit, &message));
            }
            // A path or a reason from the input, shown as the summary shows it.
            eprintln!(
                "rollover: {}",
                rollover::audit::report::visible_lines(&message)
            );
            std::process::exit(exit.code());
        }
    }
}

/// Runs the subcommand.
fn run(command: Command, ui: &Ui) -> Result<Exit, RunError> {
    Ok(match command {
        Command::Convert(args) => commands::convert::run(&args, ui)?,
        Command::Audit(args) => commands::convert::audit(&args, ui)?,
        Command::Explain(args) => commands::explain::run(&args)?,
        Command::Report(args) => match args.command {
            ReportCommand::Diff(diff) => commands::report::diff(&diff)?,
            ReportCommand::Merge(merge) => commands::merge::run(&merge, ui)?,
        },
        Command::Validate(args) => commands::validate::run(&args, ui)?,
        Command::Status(args) => commands::status::run(&args, ui)?,
        Command::Rules(args) => match args.command {
            RulesCommand::Check(check) => commands::rules::check(&check, ui)?,
            RulesCommand::Policies(policies) => commands::rules::policies(&policies)?,
        },
        Command::Completions(args) => {
            // clap_complete panics on a failed write: the script is made in memory, then
            // written as any output is.
            let mut script = Vec::new();
            clap_complete::generate(
                args.shell,
                &mut commands::command(),
                "rollover",
                &mut script,
            );
            let mut out = std::io::stdout().lock();
            out.write_all(&script)?;
            out.flush()?;
            Exit::Clean
        }
        Command::Man(args) => commands::man::run(&args)?,
    })
}

/// A command line clap refused (or `--help`, `--version`, which it reports the same way):
/// clap's message on stderr, exit 2 (0 for help); with `--json` among the arguments, the
/// error object on stdout too, since the command never got to say it.
fn usage_error(err: &clap::Error) -> ! {
    if !err.use_stderr() {
        let printed = err.print();
        let code = match printed {
            Err(io) if io.kind() != std::io::ErrorKind::BrokenPipe => Exit::Error.code(),
            Ok(()) | Err(_) => Exit::Clean.code(),
        };
        std::process::exit(code);
    }
    let wants_json = std::env::args_os().skip(1).any(|arg| arg == "--json");
    if wants_json {
        let rendered = err.render().to_string();
        // clap's first paragraph is the error; the usage and `--help` hint follow it.
        let message = rendered
            .split("\n\n")
            .next()
            .unwrap_or_default()
            .trim()
            .trim_start_matches("error: ");
        let _ = writeln!(std::io::stdout(), "{}", json_error(Exit::Error, message));
    }
    let _ = err.print();
    std::process::exit(Exit::Error.code());
}
