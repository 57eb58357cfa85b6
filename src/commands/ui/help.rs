//! What each command's `--help` and man page say of it alone: the exit codes it can return
//! (what each means for it, from one table, [`EXIT_MEANINGS`]) and what `-v` adds there.
//! `commands::command` applies them to the clap definition; `man` renders the same table.

use crate::commands::Exit;

/// `audit --out`: what an audit reads of the home, and the one thing it writes there.
pub(crate) const AUDIT_OUT_HELP: &str = "The Codex home to audit against: its manifest and sessions say what a run would read, write and keep. Nothing is written into it but the reports, under rollover/runs/NNNN/";

/// `cmd` (at `path`, `""` for the top) and its subcommands, each with its own exit codes and
/// its own words for `-v`: a command's help says what it does, not what another command does.
pub(crate) fn speak_for_itself(mut cmd: clap::Command, path: &str) -> clap::Command {
    let verbose = cmd
        .get_arguments()
        .find(|arg| arg.get_id() == "verbose")
        .cloned();
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in names {
        let sub_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        let verbose = verbose.clone();
        cmd = cmd.mut_subcommand(&name, |mut sub| {
            // A global flag defined on the subcommand too is not propagated over it (clap).
            if let Some(verbose) = verbose {
                sub = sub.arg(verbose.help(verbose_help(&sub_path)));
            }
            speak_for_itself(sub, &sub_path)
        });
    }
    let leaf = cmd.get_subcommands().next().is_none();
    if path.is_empty() {
        cmd.after_help(exit_codes_help(None))
    } else if leaf {
        cmd.after_help(exit_codes_help(Some(path)))
    } else {
        cmd
    }
}

/// What `-v` adds to the output of the command at `path`.
fn verbose_help(path: &str) -> &'static str {
    match path {
        "convert" | "audit" => {
            "Add a line per input file as it is done: its records, converted and quarantined"
        }
        "validate" => {
            "List every file checked, those that pass included (without it: the files that fail or warn)"
        }
        _ => "No effect on this command: it prints the same with or without it",
    }
}

/// The commands that run a conversion, and so take the output's lock and stop on a signal.
const RUNS: &[&str] = &["convert", "audit"];

/// What an exit code means for the commands named (each by its path: `report diff`): the one
/// table behind every command's `--help` and man page, so that a command lists the codes it
/// can return and no other.
pub(crate) struct ExitMeaning {
    pub exit: Exit,
    pub commands: &'static [&'static str],
    pub meaning: &'static str,
}

/// Every command's exit codes, in the order `--help` lists them.
pub(crate) const EXIT_MEANINGS: &[ExitMeaning] = &[
    ExitMeaning {
        exit: Exit::Clean,
        commands: RUNS,
        meaning: "all converted (or within --max-quarantine-rate), every rollout valid, no session pending",
    },
    ExitMeaning {
        exit: Exit::Clean,
        commands: &["report merge"],
        meaning: "the shards merged into one run without a finding",
    },
    ExitMeaning {
        exit: Exit::Clean,
        commands: &["validate"],
        meaning: "every file passed (warnings do not fail it)",
    },
    ExitMeaning {
        exit: Exit::Clean,
        commands: &["explain"],
        meaning: "the record converts, and its rollout breaks no invariant",
    },
    ExitMeaning {
        exit: Exit::Clean,
        commands: &["status"],
        meaning: "no session is kept pending",
    },
    ExitMeaning {
        exit: Exit::Clean,
        commands: &["report diff"],
        meaning: "nothing moved: the same outcomes, decisions, items and rollouts",
    },
    ExitMeaning {
        exit: Exit::Clean,
        commands: &["rules check"],
        meaning: "every rule file is valid, without a warning",
    },
    ExitMeaning {
        exit: Exit::Clean,
        commands: &["rules policies", "completions", "man"],
        meaning: "printed (man --dir: written)",
    },
    ExitMeaning {
        exit: Exit::Findings,
        commands: &["convert", "audit", "report merge"],
        meaning: "findings: records quarantined, a file damaged, a rollout failing validation, a session kept pending or in conflict",
    },
    ExitMeaning {
        exit: Exit::Findings,
        commands: &["validate"],
        meaning: "a file failed: a line breaks an invariant, or Codex cannot resume it",
    },
    ExitMeaning {
        exit: Exit::Findings,
        commands: &["explain"],
        meaning: "the record is quarantined, or its rollout breaks an invariant (a record a rule drops is not a finding: convert counts it)",
    },
    ExitMeaning {
        exit: Exit::Findings,
        commands: &["status"],
        meaning: "a session is kept pending (changed in Codex while its source has newer data)",
    },
    ExitMeaning {
        exit: Exit::Findings,
        commands: &["report diff"],
        meaning: "something moved (a count, or a conversation's rollout): listed above",
    },
    ExitMeaning {
        exit: Exit::Findings,
        commands: &["rules check"],
        meaning: "a rule file has an error or a warning",
    },
    ExitMeaning {
        exit: Exit::Error,
        commands: RUNS,
        meaning: "usage error, or an error that stopped the run (missing input, bad rule file, unwritable output, corrupt manifest), or --prune refused",
    },
    ExitMeaning {
        exit: Exit::Error,
        commands: &["report diff", "report merge"],
        meaning: "usage error, or a run could not be read (not a run folder or a home, a report that is not JSON, a shard missing)",
    },
    ExitMeaning {
        exit: Exit::Error,
        commands: &["validate", "explain", "status", "rules check", "rules policies", "completions", "man"],
        meaning: "usage error, or an error that stopped the command (a path that cannot be read, a bad rule file, an output that cannot be written)",
    },
    ExitMeaning {
        exit: Exit::Locked,
        commands: &["convert", "audit", "report merge"],
        meaning: "the output is locked by another run (--wait SECONDS waits for it)",
    },
    ExitMeaning {
        exit: Exit::Internal,
        commands: &["convert", "audit", "report merge"],
        meaning: "internal error: the run's counts do not add up (a bug); its output is kept",
    },
    ExitMeaning {
        exit: Exit::Interrupted(2),
        commands: RUNS,
        meaning: "stopped by SIGINT (Ctrl-C): finished work kept, reports marked interrupted",
    },
    ExitMeaning {
        exit: Exit::Interrupted(15),
        commands: RUNS,
        meaning: "stopped by SIGTERM: the same",
    },
];

/// The exit codes `command` (a path: `convert`, `report diff`) can return, with what each
/// means for it; for `None` (the top page), each code once with the commands that return it.
pub(crate) fn exit_codes_help(command: Option<&str>) -> String {
    let mut rows: Vec<(Exit, String)> = Vec::new();
    for row in EXIT_MEANINGS {
        match command {
            Some(command) if row.commands.contains(&command) => {
                rows.push((row.exit, row.meaning.to_string()));
            }
            Some(_) => {}
            None => match rows.iter_mut().find(|(exit, _)| *exit == row.exit) {
                Some((_, commands)) => {
                    for name in row.commands {
                        if !commands.split(", ").any(|c| c == *name) {
                            commands.push_str(", ");
                            commands.push_str(name);
                        }
                    }
                }
                None => rows.push((row.exit, row.commands.join(", "))),
            },
        }
    }
    let mut text = String::from("Exit codes:");
    for (exit, meaning) in rows {
        let meaning = match command {
            Some(_) => meaning,
            None => format!("{}: {meaning}", exit.reason()),
        };
        let code = format!("{:<4} ", exit.code());
        for line in crate::commands::ui::wrap_text("  ", &code, &meaning, HELP_WIDTH) {
            text.push('\n');
            text.push_str(&line);
        }
    }
    if command.is_none() {
        text.push_str("\n`rollover COMMAND --help` says what each code means for that command.");
    }
    text
}

/// The width `--help`'s exit codes are wrapped to: the narrowest terminal clap assumes.
const HELP_WIDTH: usize = 80;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::command;

    #[test]
    fn every_command_lists_a_success_and_an_error_and_only_known_commands_have_codes() {
        let mut leaves = Vec::new();
        let mut pending = vec![(String::new(), command())];
        while let Some((path, cmd)) = pending.pop() {
            if cmd.get_subcommands().next().is_none() {
                leaves.push(path.clone());
            }
            for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
                let sub_path = format!("{path} {}", sub.get_name());
                pending.push((sub_path.trim().to_string(), sub.clone()));
            }
        }
        for leaf in &leaves {
            let help = exit_codes_help(Some(leaf));
            for exit in [Exit::Clean, Exit::Error] {
                let row = format!("\n  {:<4} ", exit.code());
                assert!(help.contains(&row), "{leaf}: {help}");
            }
        }
        for row in EXIT_MEANINGS {
            for named in row.commands {
                assert!(leaves.iter().any(|l| l == named), "{named} is no command");
            }
        }
        let top = exit_codes_help(None);
        for code in [0, 1, 2, 3, 70, 130, 143] {
            assert!(top.contains(&format!("\n  {code:<4} ")), "{code}: {top}");
        }
    }
}
