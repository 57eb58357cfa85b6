//! Parse the command line, run the subcommand, map the outcome to an exit code (the table is
//! in `commands`: 0 clean, 1 findings, 2 error, 3 output locked).

use std::io::Write;

use clap::{CommandFactory, Parser};

/// The pipeline allocates many short-lived strings across threads; mimalloc spends far less
/// time in malloc/free than the system allocator there (see samples/bench.sh).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use rollover::cli::{Cli, Command, ReportCommand, RulesCommand};
use rollover::commands::{self, ui::Ui, Exit};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() {
                Exit::Error.code()
            } else {
                Exit::Clean.code()
            };
            let _ = err.print();
            std::process::exit(code);
        }
    };
    let ui = Ui::new(&cli.global);
    let result = match cli.command {
        Command::Convert(args) => commands::convert::run(&args, &ui),
        Command::Audit(args) => commands::convert::audit(&args, &ui),
        Command::Explain(args) => commands::explain::run(&args),
        Command::Report(args) => match args.command {
            ReportCommand::Diff(diff) => commands::report::diff(&diff),
            ReportCommand::Merge(merge) => commands::merge::run(&merge, &ui),
        },
        Command::Validate(args) => commands::validate::run(&args, &ui),
        Command::Status(args) => commands::status::run(&args, &ui),
        Command::Rules(args) => match args.command {
            RulesCommand::Check(check) => commands::rules::check(&check, &ui),
            RulesCommand::Policies(policies) => commands::rules::policies(&policies),
        },
        Command::Completions(args) => {
            let mut out = std::io::stdout().lock();
            clap_complete::generate(args.shell, &mut Cli::command(), "rollover", &mut out);
            out.flush()
                .map(|()| Exit::Clean)
                .map_err(anyhow::Error::from)
        }
        Command::Man => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(Cli::command())
                .render(&mut out)
                .and_then(|()| out.flush())
                .map(|()| Exit::Clean)
                .map_err(anyhow::Error::from)
        }
    };
    match result {
        Ok(exit) => std::process::exit(exit.code()),
        Err(err) => {
            if is_broken_pipe(&err) {
                std::process::exit(Exit::Clean.code());
            }
            eprintln!("rollover: {err:#}");
            std::process::exit(Exit::for_error(&err).code());
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
