//! Each command speaks for itself: its own `--help` and exit codes, the Codex home found as
//! Codex finds it, `exit_code`/`exit_reason` in every `--json` object, the conventions a user
//! relies on (a provider lock, escaped file names, wait time apart, kept sessions listed,
//! a short `rules check`, a second Ctrl-C, review links that land on the decision), and man
//! pages with EXAMPLES, ENVIRONMENT and FILES. All through the binary.

use std::fs;
use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

use crate::common::{Home, Workdir};

/// `rollover ARGS...` in `wd` with the environment changes `env` (`None`: removed).
fn run_with_env(wd: &Workdir, args: &[&str], env: &[(&str, Option<&Path>)]) -> Output {
    let mut cmd = wd.command(args);
    for (name, value) in env {
        match value {
            Some(value) => cmd.env(name, value),
            None => cmd.env_remove(name),
        };
    }
    cmd.output().expect("run rollover")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The `Exit codes:` block at the end of a `--help`, and the codes it lists.
fn exit_codes(help: &str) -> Vec<u32> {
    let block = help
        .split("Exit codes:")
        .nth(1)
        .unwrap_or_else(|| panic!("no exit codes in:\n{help}"));
    block
        .lines()
        .filter_map(|line| line.strip_prefix("  ")?.split(' ').next()?.parse().ok())
        .collect()
}

fn help(wd: &Workdir, command: &[&str]) -> String {
    let mut args = command.to_vec();
    args.push("--help");
    let run = wd.run(&args);
    run.expect_code(0);
    run.stdout()
}

/// Two conversations, converted into `home`.
fn converted_home(wd: &Workdir, home: &str) -> Home {
    wd.create_jsonl(
        "in.jsonl",
        &[
            json!({"id": "a", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}),
            json!({"id": "b", "messages": [{"role": "user", "content": "more"}, {"role": "assistant", "content": "sure"}]}),
        ],
    );
    wd.convert("in.jsonl", home, &[], 0)
}

#[test]
fn each_command_lists_the_exit_codes_it_can_return_and_says_what_v_does_there() {
    let wd = Workdir::new("speak_help");
    let cases: [(&[&str], &[u32]); 11] = [
        (&["convert"], &[0, 1, 2, 3, 70, 130, 143]),
        (&["audit"], &[0, 1, 2, 3, 70, 130, 143]),
        (&["report", "merge"], &[0, 1, 2, 3, 70]),
        (&["validate"], &[0, 1, 2]),
        (&["explain"], &[0, 1, 2]),
        (&["status"], &[0, 1, 2]),
        (&["report", "diff"], &[0, 1, 2]),
        (&["rules", "check"], &[0, 1, 2]),
        (&["rules", "policies"], &[0, 2]),
        (&["completions"], &[0, 2]),
        (&["man"], &[0, 2]),
    ];
    for (command, codes) in cases {
        let help = help(&wd, command);
        assert_eq!(exit_codes(&help), codes, "{command:?}:\n{help}");
    }
    // What 0 and 1 mean is the command's own.
    let validate = help(&wd, &["validate"]);
    assert!(validate.contains("  1    a file failed"), "{validate}");
    assert!(!validate.contains("quarantined"), "{validate}");
    let status = help(&wd, &["status"]);
    assert!(
        status.contains("  1    a session is kept pending"),
        "{status}"
    );
    // The top page lists every code once, with the commands that return it.
    let top = help(&wd, &[]);
    assert_eq!(exit_codes(&top), [0, 1, 2, 3, 70, 130, 143], "{top}");
    assert!(top.contains("`rollover COMMAND --help`"), "{top}");

    // -v in the words of each command.
    let verbose = |help: &str| {
        let at = help.find("-v, --verbose").expect("-v");
        help[at..].split("\n  -").next().unwrap().to_string()
    };
    assert!(
        verbose(&help(&wd, &["convert"])).contains("a line per input file"),
        "convert"
    );
    assert!(verbose(&validate).contains("List every file checked"));
    assert!(verbose(&status).contains("No effect on this command"));
    assert!(!verbose(&status).contains("convert"), "{status}");

    // audit is a dry run: its --out writes the reports only, and it has no --dry-run.
    let audit = help(&wd, &["audit"]);
    let out = audit[audit.find("-o, --out").expect("--out")..]
        .split("\n  -")
        .next()
        .unwrap()
        .to_string();
    assert!(
        out.contains("Nothing is written into it but the reports"),
        "{out}"
    );
    assert!(!out.contains("rollouts under sessions/"), "{out}");
    assert!(!audit.contains("--dry-run"), "{audit}");
}

#[test]
fn validate_and_status_read_codex_home_then_dot_codex_when_no_folder_is_given() {
    let wd = Workdir::new("speak_home");
    let home = converted_home(&wd, "codex-home").root;
    // $CODEX_HOME first, as Codex finds its home.
    let env = [("CODEX_HOME", Some(home.as_path()))];
    let validate = run_with_env(&wd, &["validate"], &env);
    assert_eq!(validate.status.code(), Some(0), "{validate:?}");
    assert!(text(&validate.stdout).contains("2 files: 2 passed, 0 failed"));
    let status = run_with_env(&wd, &["status"], &env);
    assert_eq!(status.status.code(), Some(0), "{status:?}");
    assert!(
        text(&status.stdout).starts_with(&format!("rollover status {}\n", home.display())),
        "{status:?}"
    );
    // Then ~/.codex.
    fs::create_dir_all(wd.path("user")).expect("mkdir");
    fs::rename(&home, wd.path("user/.codex")).expect("move the home");
    let user = wd.path("user");
    let env = [("CODEX_HOME", None), ("HOME", Some(user.as_path()))];
    let validate = run_with_env(&wd, &["validate", "--json"], &env);
    assert_eq!(validate.status.code(), Some(0), "{validate:?}");
    let report: Value = serde_json::from_slice(&validate.stdout).expect("JSON");
    assert_eq!(report["files"], 2);
    let status = run_with_env(&wd, &["status", "--json"], &env);
    let state: Value = serde_json::from_slice(&status.stdout).expect("JSON");
    assert_eq!(state["out"], user.join(".codex").display().to_string());
    // A home that is not there is named, with where it came from.
    let missing = wd.path("nowhere");
    let env = [("CODEX_HOME", Some(missing.as_path()))];
    let validate = run_with_env(&wd, &["validate"], &env);
    assert_eq!(validate.status.code(), Some(2));
    let stderr = text(&validate.stderr);
    assert!(
        stderr.contains(&format!(
            "the Codex home {} (from $CODEX_HOME) is not a folder",
            missing.display()
        )),
        "{stderr}"
    );
    // And the help says so.
    for command in ["validate", "status"] {
        let help = help(&wd, &[command]);
        assert!(help.contains("$CODEX_HOME, else ~/.codex"), "{help}");
    }
}

#[test]
fn every_json_object_carries_exit_code_and_exit_reason_success_included() {
    let wd = Workdir::new("speak_json");
    let home = converted_home(&wd, "home").root;
    let home_arg = home.display().to_string();
    let runs = [
        wd.run(&["validate", "home", "--json"]),
        wd.run(&["status", "home", "--json"]),
        wd.run(&["explain", "in.jsonl", "--json"]),
        wd.run(&["convert", "in.jsonl", "--out", "home", "--json"]),
        wd.run(&["audit", "in.jsonl", "--out", "home", "--json"]),
        wd.run(&["report", "diff", &home_arg, &home_arg, "--json"]),
    ];
    for run in runs {
        run.expect_code(0);
        let object: Value = serde_json::from_str(&run.stdout()).expect("one JSON object");
        assert_eq!(
            (&object["exit_code"], &object["exit_reason"]),
            (&json!(0), &json!("ok")),
            "{run}"
        );
    }
    // A finding says so too.
    wd.create("bad/rollout-x.jsonl", "not json\n");
    let run = wd.run(&["validate", "bad", "--json"]);
    run.expect_code(1);
    let object: Value = serde_json::from_str(&run.stdout()).expect("JSON");
    assert_eq!(
        (&object["exit_code"], &object["exit_reason"]),
        (&json!(1), &json!("findings"))
    );
}

#[test]
fn validate_warns_when_the_home_locks_codex_to_a_model_provider() {
    let wd = Workdir::new("speak_provider");
    let converted = converted_home(&wd, "home");
    let home = &converted.root;
    fs::write(home.join("config.toml"), "model_provider = \"fake\"\n").expect("config");
    // One rollout names another provider in its session_meta, as a session started under it.
    let rollout = converted.rollouts().remove(0);
    let bytes = fs::read_to_string(&rollout).expect("rollout");
    let (first, rest) = bytes.split_once('\n').expect("lines");
    let mut meta: Value = serde_json::from_str(first).expect("session_meta");
    meta["payload"]["model_provider"] = json!("openai");
    fs::write(&rollout, format!("{meta}\n{rest}")).expect("write");

    let run = wd.run(&["validate", "home", "--color", "never"]);
    run.expect_code(0);
    let out = run.stdout();
    assert!(
        out.contains(
            "warning: home/config.toml sets model_provider = \"fake\": Codex resumes only sessions whose session_meta names no provider or this one; 1 rollout here names another provider: Codex refuses to resume it"
        ),
        "{out}"
    );
    let run = wd.run(&["validate", "home", "--json"]);
    let report: Value = serde_json::from_str(&run.stdout()).expect("JSON");
    assert_eq!(
        report["provider_locks"],
        json!([{"home": "home", "provider": "fake", "rollouts_naming_another": 1}])
    );
}

#[test]
fn files_csv_and_the_terminal_show_control_characters_of_file_names_escaped() {
    let wd = Workdir::new("speak_csv");
    let planted = "in/a\u{1b}[31mred\nline.jsonl";
    wd.create_jsonl(
        planted,
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    let home = wd.convert("in", "home", &["-v", "--color", "never"], 0);
    let csv = fs::read_to_string(crate::common::run_folder(&home.root).join("files.csv"))
        .expect("files.csv");
    assert!(!csv.contains('\u{1b}'), "{csv:?}");
    assert_eq!(csv.lines().count(), 2, "{csv:?}");
    assert!(
        csv.contains("in/a\\u{1b}[31mred\\nline.jsonl,1,1,0,"),
        "{csv:?}"
    );
    let terminal = home.run.stdout() + &home.run.stderr();
    assert!(!terminal.contains('\u{1b}'), "{terminal:?}");
}

#[test]
fn time_waited_for_the_lock_is_reported_apart_from_the_run_time() {
    let wd = Workdir::new("speak_wait");
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    // Another run holds the lock: the folder locked, its pid in the lock file.
    let state = wd.path("home/rollover");
    fs::create_dir_all(&state).expect("mkdir");
    let held = fs::File::open(&state).expect("open the state folder");
    held.try_lock().expect("take the lock");
    fs::write(state.join("lock"), format!("{}\n", std::process::id())).expect("pid");
    let child = wd
        .command(&["convert", "in.jsonl", "--out", "home", "--wait", "60"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    fs::write(state.join("lock"), b"").expect("empty the lock file");
    drop(held);
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let timing: Value = serde_json::from_slice(
        &fs::read(wd.path("home/rollover/runs/0001/timing.json")).expect("timing.json"),
    )
    .expect("JSON");
    let waited = timing["wait_seconds"].as_f64().expect("wait_seconds");
    let seconds = timing["seconds"].as_f64().expect("seconds");
    assert!(waited >= 1.0, "{timing}");
    assert!(seconds < waited, "the wait counted as run time: {timing}");
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("  waited       1.")
            && stdout.contains(" s for another run's lock (--wait), before the time above"),
        "{stdout}"
    );
}

#[test]
fn kept_pending_sessions_are_listed_by_path_on_the_terminal() {
    let wd = Workdir::new("speak_kept");
    let converted = converted_home(&wd, "home");
    let home = &converted.root;
    let rollout = converted.rollouts().remove(0);
    // Resumed in Codex: a turn appended.
    let mut bytes = fs::read(&rollout).expect("rollout");
    bytes.extend_from_slice(b"{\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"user_message\",\"message\":\"one more thing\"}}\n");
    fs::write(&rollout, bytes).expect("append");
    let relative = rollout
        .strip_prefix(home)
        .expect("below home")
        .display()
        .to_string();
    // Newer content for every session: the resumed one is kept pending, and named.
    let newer = wd.convert(
        "in.jsonl",
        "home",
        &["--cwd", "/srv/elsewhere", "--color", "never"],
        1,
    );
    let out = newer.run.stdout();
    let kept = out
        .lines()
        .skip_while(|line| !line.starts_with("  kept "))
        .take(3)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(kept.contains(&relative), "{out}");
}

#[test]
fn rules_check_of_a_partial_file_is_short_and_suggests_only_flags_that_work() {
    let wd = Workdir::new("speak_rules");
    wd.create("mine.toml", "[policy]\norphan_output = \"quarantine\"\n");
    // Wide enough that the note is one line.
    let columns = [("COLUMNS", Some(Path::new("200")))];
    let run = run_with_env(
        &wd,
        &["rules", "check", "mine.toml", "--color", "never"],
        &columns,
    );
    let out = text(&run.stdout);
    assert!(out.lines().count() <= 6, "{out}");
    assert!(!out.contains("pass `--rules default` first"), "{out}");
    assert!(
        out.starts_with("default + mine.toml: ")
            && out.contains("`--rules default --rules mine.toml`"),
        "{out}"
    );
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    // The flags it suggests are the ones convert takes.
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    wd.convert(
        "in.jsonl",
        "home",
        &["--rules", "default", "--rules", "mine.toml"],
        0,
    );
}

#[test]
fn a_second_ctrl_c_says_what_it_does_before_stopping() {
    let wd = Workdir::new("speak_sigint");
    let padding = "x".repeat(60_000);
    for f in 0..6 {
        let records: Vec<Value> = (0..50)
            .map(|r| json!({"id": format!("c-{f}-{r}"), "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": format!("a{padding}")}]}))
            .collect();
        wd.create_jsonl(&format!("archive/p{f}.jsonl"), &records);
    }
    let output = wd
        .command(&["convert", "archive", "--out", "home"])
        .env("ROLLOVER_FAILPOINT", "sigint-twice-after:20")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(130), "{output:?}");
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("rollover: SIGINT: finishing the batch in flight, then stopping with the reports marked interrupted (send it again to stop at once)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("rollover: a second SIGINT: stopping now, without finishing the batch in flight or writing this run's reports"),
        "{stderr}"
    );
}

#[test]
fn review_index_links_land_on_the_decision_they_list() {
    let wd = Workdir::new("speak_review");
    wd.create_jsonl(
        "in.jsonl",
        &[
            json!({"messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": "be brief"}, {"role": "assistant", "content": "ok"}]}),
            json!({"nothing": "here"}),
        ],
    );
    let home = wd.convert("in.jsonl", "home", &["--review", "1"], 1);
    let review = crate::common::run_folder(&home.root).join("review");
    let index = fs::read_to_string(review.join("index.html")).expect("index.html");
    let mut links = 0;
    for piece in index.split("<a href=\"").skip(1) {
        let href = piece.split('"').next().expect("href");
        let Some((page, anchor)) = href.split_once('#') else {
            assert!(
                href.ends_with("report.html"),
                "a link without an anchor: {href}"
            );
            continue;
        };
        let html = fs::read_to_string(review.join(page)).expect("the page linked");
        assert!(
            html.contains(&format!(" id=\"{anchor}\"")),
            "{href}: no such place on the page"
        );
        links += 1;
    }
    assert!(links >= 2, "{index}");
    assert!(index.contains("#quarantined\""), "{index}");
    assert!(
        index.contains("#m1\""),
        "the system message mid-conversation: {index}"
    );
}

#[test]
fn man_pages_have_exit_status_examples_environment_and_files() {
    let wd = Workdir::new("speak_man");
    let page = |command: &[&str]| {
        let mut args = vec!["man"];
        args.extend_from_slice(command);
        let run = wd.run(&args);
        run.expect_code(0);
        run.stdout()
    };
    let top = page(&[]);
    for section in [
        ".SH \"EXIT STATUS\"",
        ".SH EXAMPLES",
        ".SH ENVIRONMENT",
        ".SH FILES",
    ] {
        assert!(top.contains(section), "{section}: {top}");
    }
    let environment = |page: &str| {
        page.split(".SH ENVIRONMENT")
            .nth(1)
            .and_then(|rest| rest.split(".SH ").next())
            .unwrap_or_default()
            .to_string()
    };
    // Every variable the code reads is on the top page.
    let top_environment = environment(&top);
    for name in variables_read() {
        assert!(
            top_environment.contains(&format!("\\fB{}\\fR", name.replace('-', "\\-"))),
            "{name} is read but not in ENVIRONMENT:\n{top_environment}"
        );
    }
    // A command's page has what applies to it.
    let validate = page(&["validate"]);
    assert!(environment(&validate).contains("CODEX_HOME"));
    assert!(!environment(&validate).contains("SLURM"));
    assert!(validate.contains("rollover validate"), "an example");
    let convert = page(&["convert"]);
    assert!(environment(&convert).contains("JOB_COMPLETION_INDEX"));
    assert!(environment(&convert).contains("TMPDIR"));
    let files = convert.split(".SH FILES").nth(1).expect("FILES");
    assert!(files.contains("OUT/rollover/runs/NNNN/"), "{files}");
    assert!(files.contains("files.csv"), "{files}");
    let exit = convert
        .split(".SH \"EXIT STATUS\"")
        .nth(1)
        .expect("EXIT STATUS");
    assert!(exit.contains("\\fB130\\fR"), "{exit}");
    assert!(!validate.contains("\\fB130\\fR"), "{validate}");
    // --dir writes every page, each with its sections.
    let run = wd.run(&["man", "--dir", "pages"]);
    run.expect_code(0);
    let diff = fs::read_to_string(wd.path("pages/rollover-report-diff.1")).expect("a page");
    assert!(diff.contains(".SH EXAMPLES") && diff.contains(".SH \"EXIT STATUS\""));
}

/// The names of the environment variables `src/` reads: `var("NAME")`, `var_os("NAME")`,
/// `env("NAME")`, and the `&str` constants passed to them (the sharding variables).
fn variables_read() -> Vec<String> {
    let mut names = vec!["TMPDIR".to_string()];
    let mut pending = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("src").filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let code = fs::read_to_string(&path).unwrap_or_default();
            for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for call in [
                    "var(\"",
                    "var_os(\"",
                    "env(\"",
                    "INDEX: &str = \"",
                    "COUNT: &str = \"",
                ] {
                    for piece in line.split(call).skip(1) {
                        let name: String = piece
                            .chars()
                            .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                            .collect();
                        if name.len() > 1 && piece[name.len()..].starts_with('"') {
                            names.push(name);
                        }
                    }
                }
            }
        }
    }
    names.sort();
    names.dedup();
    names
}
