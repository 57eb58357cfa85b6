//! Issue 28, "Promises the command line does not keep": one test per promise, each running
//! the binary as a user would (`explain`'s formats and session ids are tested with explain).
//!
//! Broken pipes, the `--json` error object, `--sample` over whole-file formats, `--cwd` over
//! Claude Code sessions, man pages and completions, `report diff --json` and its exit codes,
//! contradictory flags, the wording of sizes, the reports' counts and files, the summary's
//! last line, `audit`'s header, `rules check`, the supported Codex releases and `--model`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::common::{read_jsonl, Workdir};

fn samples() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/samples"))
}

fn corpora() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpora"))
}

fn s(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// A home converted from `samples/` (13 rollouts), in `wd/home`.
fn samples_home(wd: &Workdir) -> PathBuf {
    wd.convert(s(&samples()), "home", &["-q"], 0);
    wd.path("home")
}

/// `rollover ARGS` with its stdout a pipe whose reading end is closed before it starts: its
/// first write fails with EPIPE, whatever its timing. Exit code and stderr.
fn run_into_closed_pipe(wd: &Workdir, args: &[&str]) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_rollover"))
        .current_dir(wd.root())
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run rollover");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_broken_pipe_is_success_on_every_command() {
    let wd = Workdir::new("promise_pipe");
    let home = samples_home(&wd);
    let run = format!("{}/rollover/latest", s(&home));
    let sample = format!("{}/chat-completions.jsonl.zst:3", s(&samples()));
    let samples = samples();
    let commands: Vec<Vec<&str>> = vec![
        vec!["validate", "--json", s(&home)],
        vec!["validate", s(&home), "-v"],
        vec!["convert", s(&samples), "--out", "again", "--json"],
        vec!["convert", s(&samples), "--out", "again2"],
        vec!["audit", s(&samples), "--out", "audit"],
        vec!["status", s(&home)],
        vec!["status", s(&home), "--json"],
        vec!["report", "diff", &run, &run],
        vec!["report", "diff", &run, &run, "--json"],
        vec!["explain", &sample],
        vec!["explain", &sample, "--json"],
        vec!["rules", "check", "default"],
        vec!["rules", "policies"],
        vec!["completions", "bash"],
        vec!["man"],
        vec!["man", "convert"],
        vec!["--help"],
        vec!["convert", "--help"],
        vec!["--version"],
    ];
    for args in &commands {
        let (code, stderr) = run_into_closed_pipe(&wd, args);
        assert_eq!(
            code,
            Some(0),
            "rollover {args:?} into a closed pipe:\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "rollover {args:?}:\n{stderr}");
        assert!(
            !stderr.contains("Broken pipe"),
            "rollover {args:?}:\n{stderr}"
        );
    }
    // What users type: the shell's pipe into `head -1`.
    let script = format!(
        "{} validate --json {} | head -1; exit ${{PIPESTATUS[0]}}",
        env!("CARGO_BIN_EXE_rollover"),
        s(&home)
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .output()
        .expect("bash");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "{\n");
}

/// The README's promise: with `--json`, every failure prints
/// `{"exit_code","exit_reason","error"}` on stdout, whatever failed.
#[test]
fn json_prints_the_error_object_for_every_failure() {
    let wd = Workdir::new("promise_json");
    let home = samples_home(&wd);
    wd.create("bad.toml", "[bogus]\nx = 1\n");
    wd.create("a-file", "not a folder");
    let samples = samples();
    let failures: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "convert",
                s(&samples),
                "--out",
                "o1",
                "--rules",
                "bad.toml",
                "--json",
            ],
            "unknown field `bogus`",
        ),
        (
            vec![
                "audit",
                s(&samples),
                "--out",
                "o2",
                "--rules",
                "bad.toml",
                "--json",
            ],
            "unknown field `bogus`",
        ),
        (
            vec!["convert", s(&samples), "--out", "a-file", "--json"],
            "--out must be a folder",
        ),
        (
            vec!["report", "merge", s(&home), "--json"],
            "no shard has run into this output",
        ),
        (vec!["explain", "missing.jsonl", "--json"], "missing.jsonl"),
        (vec!["validate", "missing", "--json"], "missing"),
        (vec!["status", "missing", "--json"], "missing"),
        (
            vec!["report", "diff", "missing", s(&home), "--json"],
            "missing",
        ),
        (
            vec!["validate", s(&home), "--codex-version", "0.170", "--json"],
            "0.169.1, 0.171.0",
        ),
        // Refused by the command line itself, before the command runs.
        (
            vec![
                "audit",
                s(&samples),
                "--out",
                "o3",
                "--sample",
                "0",
                "--json",
            ],
            "a sample of 0 audits no record",
        ),
        (
            vec![
                "convert",
                s(&samples),
                "--out",
                "o4",
                "--jobs",
                "0",
                "--json",
            ],
            "at least 1 worker thread",
        ),
    ];
    for (args, says) in &failures {
        let run = wd.run(args);
        run.expect_code(2);
        let object: Value = serde_json::from_str(run.stdout().trim())
            .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{run}"));
        let keys: Vec<&String> = object.as_object().expect("an object").keys().collect();
        assert_eq!(keys.len(), 3, "{run}");
        assert_eq!(object["exit_code"], 2, "{run}");
        assert_eq!(object["exit_reason"], "error", "{run}");
        let error = object["error"].as_str().expect("error is a string");
        assert!(
            error.contains(says),
            "{args:?}: {error:?} should say {says:?}"
        );
        // And stderr still says it to a person.
        assert!(run.stderr().contains(says), "{run}");
    }
}

fn summary(home: &Path) -> Value {
    let text = std::fs::read_to_string(home.join("rollover/latest/summary.json")).expect("summary");
    serde_json::from_str(&text).expect("summary is JSON")
}

/// Issue 28: a 5 % sample of the corpora audited 6.3 % of the records (the records of
/// whole-file formats that no conversation took, and failed batch results, were all kept)
/// and estimated a quarantine share of 1.37 % against 0.36 % for the full run.
#[test]
fn sample_takes_a_share_of_conversations_in_whole_file_formats_too() {
    let wd = Workdir::new("promise_sample");
    let input = corpora();
    let full = wd.run(&["audit", s(&input), "--out", "full", "-q"]);
    assert!(matches!(full.code(), Some(0 | 1)), "{full}");
    let full = summary(&wd.path("full"));
    let full_share = full["quarantined"].as_f64().unwrap() / full["records"].as_f64().unwrap();
    for (rate, folder) in [("0.05", "five"), ("0.2", "twenty")] {
        // Wide enough that no line of the summary wraps.
        let out = wd
            .command(&["audit", s(&input), "--out", folder, "--sample", rate])
            .env("COLUMNS", "1000")
            .output()
            .unwrap();
        assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
        let sampled = summary(&wd.path(folder));
        let audited = sampled["records"].as_f64().unwrap();
        let left_out = sampled["records_not_sampled"].as_f64().unwrap();
        assert_eq!(audited + left_out, full["records"].as_f64().unwrap());
        let share = audited / (audited + left_out);
        let rate: f64 = rate.parse().unwrap();
        assert!(
            (share - rate).abs() < rate * 0.3,
            "--sample {rate} audited {:.2} % of the records",
            100.0 * share
        );
        let out = String::from_utf8_lossy(&out.stdout).into_owned();
        let percent = format!("{} %", 100.0 * rate);
        assert!(
            out.starts_with(&format!(
                "rollover audit\n  sampled      {percent} of conversations ("
            )),
            "{out}"
        );
        assert!(out.contains("estimates ± a 95 % margin:"), "{out}");
        // The printed interval holds the full run's share.
        let interval = out
            .split("Wilson interval ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .expect("the interval");
        let bounds: Vec<f64> = interval
            .split(" to ")
            .map(|b| b.split_whitespace().next().unwrap().parse::<f64>().unwrap() / 100.0)
            .collect();
        assert!(
            bounds[0] <= full_share && full_share <= bounds[1],
            "full run {full_share}, sample's interval {bounds:?}\n{out}"
        );
        let md = std::fs::read_to_string(wd.path(&format!("{folder}/rollover/latest/report.md")))
            .unwrap();
        assert!(md.contains("of the conversations were audited"), "{md}");
        assert!(md.contains("Wilson interval"), "{md}");
    }
    // Deterministic: the same conversations every time.
    let again = wd.run(&[
        "audit",
        s(&input),
        "--out",
        "again",
        "--sample",
        "0.05",
        "-q",
    ]);
    assert!(matches!(again.code(), Some(0 | 1)), "{again}");
    assert_eq!(
        wd.read("five/rollover/latest/conversations.jsonl"),
        wd.read("again/rollover/latest/conversations.jsonl")
    );
    assert_eq!(
        wd.read("five/rollover/latest/quarantine.jsonl"),
        wd.read("again/rollover/latest/quarantine.jsonl")
    );
}

#[test]
fn cwd_overrides_every_session_claude_code_included() {
    let wd = Workdir::new("promise_cwd");
    let input = corpora().join("sources/claude-code");
    let run = wd.run(&[
        "convert",
        s(&input),
        "--out",
        "home",
        "--cwd",
        "/srv/project",
        "-q",
    ]);
    assert!(matches!(run.code(), Some(0 | 1)), "{run}");
    let mut sources = 0;
    for line in read_jsonl(&wd.path("home/rollover/latest/conversations.jsonl")) {
        let path = wd.path("home").join(line["path"].as_str().unwrap());
        let first = std::fs::read_to_string(&path).unwrap();
        let meta: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
        assert_eq!(meta["payload"]["cwd"], "/srv/project", "{}", path.display());
        if let Some(cwd) = line["source_cwd"].as_str() {
            assert_ne!(cwd, "/srv/project");
            sources += 1;
        }
    }
    assert!(
        sources >= 5,
        "the sessions' own folders are kept in the audit line"
    );
    // Without --cwd, a Claude Code session keeps its own folder, and the audit line says none.
    let run = wd.run(&["convert", s(&input), "--out", "plain", "-q"]);
    assert!(matches!(run.code(), Some(0 | 1)), "{run}");
    let lines = read_jsonl(&wd.path("plain/rollover/latest/conversations.jsonl"));
    assert!(lines.iter().all(|l| l.get("source_cwd").is_none()));
}

#[test]
fn man_prints_one_page_per_subcommand_and_writes_them_all() {
    let wd = Workdir::new("promise_man");
    for (args, title) in [
        (vec!["man"], ".TH rollover 1"),
        (vec!["man", "convert"], ".TH rollover-convert 1"),
        (vec!["man", "report", "diff"], ".TH rollover-report-diff 1"),
        (vec!["man", "rules", "check"], ".TH rollover-rules-check 1"),
    ] {
        let run = wd.run(&args);
        run.expect_code(0);
        assert!(run.stdout().contains(title), "{run}");
    }
    let convert = wd.run(&["man", "convert"]).stdout();
    assert!(convert.contains("max\\-quarantine\\-rate"), "{convert}");
    assert!(convert.contains("claude\\-code"), "the --from values");
    let unknown = wd.run(&["man", "convrt"]);
    unknown.expect_code(2);
    assert!(unknown.stderr().contains("convert"), "{unknown}");
    let all = wd.run(&["man", "--dir", "pages"]);
    all.expect_code(0);
    for page in [
        "rollover.1",
        "rollover-convert.1",
        "rollover-audit.1",
        "rollover-validate.1",
        "rollover-explain.1",
        "rollover-status.1",
        "rollover-report-diff.1",
        "rollover-report-merge.1",
        "rollover-rules-check.1",
        "rollover-rules-policies.1",
        "rollover-completions.1",
        "rollover-man.1",
    ] {
        assert!(wd.path("pages").join(page).is_file(), "{page}");
    }
}

#[test]
fn completions_offer_every_value() {
    let wd = Workdir::new("promise_completions");
    let formats: Vec<String> = rollover::input::format::SourceFormat::all()
        .map(|format| format.name().to_string())
        .collect();
    let expected: [(&str, Vec<String>); 4] = [
        ("--from", formats),
        ("--format", words("codex responses")),
        ("--wire", words("normal lite")),
        ("--color", words("auto always never")),
    ];
    for shell in ["bash", "zsh", "fish"] {
        let run = wd.run(&["completions", shell]);
        run.expect_code(0);
        let script = run.stdout();
        for (flag, values) in &expected {
            assert_eq!(
                &offered(shell, &script, flag),
                values,
                "{shell} completes `rollover convert {flag}`"
            );
        }
    }
    let fish = wd.run(&["completions", "fish"]).stdout();
    assert!(
        fish.contains("claude-code\\t'Claude Code session files"),
        "each --from value with what it reads:\n{fish}"
    );
    // A value not in the list is refused, naming the list.
    let run = wd.run(&[
        "convert",
        s(&samples()),
        "--out",
        "o",
        "--from",
        "claud-code",
    ]);
    run.expect_code(2);
    assert!(run.stderr().contains("claude-code"), "{run}");
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// The values a completion script offers for `flag` of `rollover convert`, read from the
/// script's own list: bash's `compgen -W "a b"`, zsh's `(a b)` or `((a\:"…" b\:"…"))`, fish's
/// `-a "a\t'…'` one value a line.
fn offered(shell: &str, script: &str, flag: &str) -> Vec<String> {
    let after = |text: &'static str| {
        let at = script
            .find(text)
            .unwrap_or_else(|| panic!("{shell}: no `{text}` in the script"));
        &script[at..]
    };
    let between = |text: &str, start: &str, end: &str| -> String {
        let from = text
            .find(start)
            .unwrap_or_else(|| panic!("{shell} {flag}: no `{start}`"))
            + start.len();
        let to = text[from..]
            .find(end)
            .unwrap_or_else(|| panic!("{shell} {flag}: no `{end}`"));
        text[from..from + to].to_string()
    };
    match shell {
        "bash" => {
            let section = after("        rollover__subcmd__convert)\n");
            let case = &section[section
                .find(&format!(" {flag})\n"))
                .unwrap_or_else(|| panic!("bash: no case for {flag}"))..];
            words(&between(case, "compgen -W \"", "\""))
        }
        "zsh" => {
            let section = after("\n(convert)\n");
            // `'--flag=[help]:NAME:(values)' \`, the values one a line when described.
            let arg = between(section, &format!("'{flag}=["), "' \\\n");
            let list = &arg[arg.find("]:").expect("zsh: a value list") + 2..];
            let list = &list[list.find(":(").expect("zsh: a value list") + 2..];
            let list = list.strip_suffix(')').unwrap_or(list);
            match list.strip_prefix('(') {
                Some(described) => names_before_descriptions(described),
                None => words(list),
            }
        }
        "fish" => {
            let long = flag.trim_start_matches('-');
            let start = format!(
                "complete -c rollover -n \"__fish_rollover_using_subcommand convert\" -l {long} "
            );
            let line = &script[script
                .find(&start)
                .unwrap_or_else(|| panic!("fish: no completion of {flag}"))..];
            between(line, " -a \"", "\"\n")
                .lines()
                .map(|value| value.split("\\t").next().unwrap_or_default().to_string())
                .collect()
        }
        other => panic!("no reader for {other}"),
    }
}

/// The names of zsh's `name\:"what it is"` list (a `"` in a description is escaped).
fn names_before_descriptions(list: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = list.trim_start();
    while let Some((name, after)) = rest.split_once("\\:\"") {
        names.push(name.to_string());
        let mut escaped = false;
        let end = after
            .char_indices()
            .find(|&(_, c)| {
                let closes = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                closes
            })
            .map_or(after.len(), |(at, _)| at + 1);
        rest = after[end..].trim_start();
    }
    names
}

#[test]
fn report_diff_prints_json_and_its_exit_codes() {
    let wd = Workdir::new("promise_diff");
    let home = samples_home(&wd);
    wd.create("mine.toml", "[policy]\nmissing_output = \"quarantine\"\n");
    let other = wd.run(&[
        "audit",
        s(&samples()),
        "--out",
        "other",
        "--rules",
        "default",
        "--rules",
        "mine.toml",
        "-q",
    ]);
    assert!(matches!(other.code(), Some(0 | 1)), "{other}");
    let same = wd.run(&["report", "diff", s(&home), s(&home), "--json"]);
    same.expect_code(0);
    let same: Value = serde_json::from_str(&same.stdout()).unwrap();
    assert_eq!(same["exit_code"], 0);
    assert_eq!(same["exit_reason"], "ok");
    let moved = wd.run(&[
        "report",
        "diff",
        s(&home),
        "other",
        "--json",
        "--max-listed",
        "1",
    ]);
    moved.expect_code(1);
    let moved: Value = serde_json::from_str(&moved.stdout()).unwrap();
    assert_eq!(moved["exit_code"], 1);
    assert_eq!(moved["exit_reason"], "findings");
    let outcomes = moved["counts"]["outcomes"].as_array().unwrap();
    assert!(
        outcomes.iter().any(
            |row| row["key"] == "quarantined" && row["after"].as_i64() > row["before"].as_i64()
        ),
        "{moved}"
    );
    // --json lists every conversation, --max-listed is for the text only.
    let changed = moved["conversations"]["before_only"]
        .as_array()
        .unwrap()
        .len()
        + moved["conversations"]["changed"].as_array().unwrap().len();
    assert!(changed > 1, "{moved}");
    let help = wd.run(&["report", "diff", "--help"]);
    help.expect_code(0);
    for row in [
        "Exit codes:",
        "  0    nothing moved",
        "  1    something moved",
        "  2    usage error",
    ] {
        assert!(help.stdout().contains(row), "{row}\n{help}");
    }
}

#[test]
fn contradictory_flags_are_refused_with_the_reason() {
    let wd = Workdir::new("promise_contradictions");
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    for (args, says) in [
        (
            vec!["convert", "in.jsonl", "--out", "h", "--dry-run", "--force"],
            "--dry-run writes no session, so --force has none to replace",
        ),
        (
            vec!["audit", "in.jsonl", "--out", "h", "--force"],
            "audit writes no session, so --force has none to replace",
        ),
        (
            vec![
                "convert",
                "in.jsonl",
                "--out",
                "h",
                "--dry-run",
                "--durable",
            ],
            "no session or manifest for --durable to fsync",
        ),
        (
            vec!["audit", "in.jsonl", "--out", "h", "--durable"],
            "no session or manifest for --durable to fsync",
        ),
        (
            vec!["convert", "-", "-", "--out", "h"],
            "`-` (standard input) is given more than once",
        ),
        (
            vec!["audit", "in.jsonl", "--out", "h", "--sample", "0"],
            "a sample of 0 audits no record at all",
        ),
        (
            vec!["convert", "in.jsonl", "--out", "h", "--model", "gpt-5"],
            "use it with --format responses",
        ),
    ] {
        let run = wd.run(&args);
        run.expect_code(2);
        assert!(run.stderr().contains(says), "{args:?}\n{run}");
        assert!(!wd.path("h").exists(), "{args:?} wrote nothing");
    }
}

#[test]
fn a_size_of_zero_is_refused_without_speaking_of_the_split_size() {
    let wd = Workdir::new("promise_zero_size");
    for flag in [
        "--max-record-bytes",
        "--max-conversation-bytes",
        "--split-bytes",
    ] {
        let run = wd.run(&["convert", "in.jsonl", "--out", "h", flag, "0"]);
        run.expect_code(2);
        assert!(
            run.stderr().contains("a size must be at least 1 byte"),
            "{run}"
        );
        assert!(!run.stderr().contains("split size"), "{run}");
        assert!(run.stderr().contains(flag), "{run}");
    }
}

/// A home whose run has one damaged input file and 60 input files in all.
fn damaged_home(wd: &Workdir) -> PathBuf {
    for i in 0..60 {
        let mut records = vec![json!({"messages": [{"role": "user", "content": "hi"}]})];
        if i % 7 == 0 {
            records.push(json!({"no": "messages"}));
        }
        wd.create_jsonl(&format!("archive/f{i:02}.jsonl"), &records);
    }
    // A zstd frame cut short: one damaged file.
    let mut zst = zstd::encode_all(
        &b"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}\n"[..],
        3,
    )
    .unwrap();
    zst.truncate(zst.len() - 4);
    wd.create("archive/damaged.jsonl.zst", zst);
    let run = wd.run(&["convert", "archive", "--out", "home"]);
    run.expect_code(1);
    wd.path("home/rollover/latest")
}

#[test]
fn reports_group_counts_and_say_one_file_in_the_singular() {
    let wd = Workdir::new("promise_report_words");
    let run = damaged_home(&wd);
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(md.contains("1 input file is damaged"), "{md}");
    assert!(!md.contains("1 input files"), "{md}");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("1 input file is damaged"));
    // Counts of a thousand and more are grouped.
    let wd = Workdir::new("promise_report_groups");
    let mut text = String::new();
    for i in 0..1200 {
        text.push_str(
            &json!({"messages": [{"role": "user", "content": format!("q{i}")}]}).to_string(),
        );
        text.push('\n');
    }
    wd.create("big.jsonl", text);
    wd.convert("big.jsonl", "home", &["-q"], 0);
    let md = std::fs::read_to_string(wd.path("home/rollover/latest/report.md")).unwrap();
    assert!(md.contains("| records read | 1,200 |"), "{md}");
    assert!(md.contains("| conversations converted | 1,200 |"), "{md}");
    let html = std::fs::read_to_string(wd.path("home/rollover/latest/report.html")).unwrap();
    assert!(html.contains("<b>1,200</b>records read"));
}

#[test]
fn report_html_shows_the_worst_files_and_links_a_csv_of_all() {
    let wd = Workdir::new("promise_report_files");
    let run = damaged_home(&wd);
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let table = html
        .split("<table id=\"files\">")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .expect("the files table");
    assert_eq!(table.matches("<tr><td><code>").count(), 50, "{table}");
    assert!(html.contains("The 50 worst of 61 input files"), "{html}");
    assert!(html.contains("<a href=\"files.csv\">files.csv</a>"));
    // The worst (with quarantined records) come first: the damaged file and f00, f07, ...
    let quarantined: Vec<u64> = table
        .split("<tr><td>")
        .skip(1)
        .map(|row| {
            let cell = row
                .split("data-value=\"")
                .nth(3)
                .expect("a quarantined cell");
            cell.split('"').next().unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(
        quarantined.iter().filter(|q| **q > 0).count(),
        10,
        "{table}"
    );
    assert!(
        quarantined.windows(2).all(|w| w[0] >= w[1]),
        "{quarantined:?}"
    );
    assert!(table.contains("archive&#x2f;damaged.jsonl.zst"), "{table}");
    let csv = std::fs::read_to_string(run.join("files.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "file,records,converted,quarantined,repairs,output_bytes"
    );
    assert_eq!(lines.len(), 62, "a header and every file");
    assert!(csv.contains("archive/f00.jsonl,2,1,1,"), "{csv}");
}

#[test]
fn the_summary_ends_on_report_html_and_audit_says_audit() {
    let wd = Workdir::new("promise_summary_end");
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    let convert = wd.convert("in.jsonl", "home", &[], 0);
    let out = convert.run.stdout();
    assert!(out.starts_with("rollover convert\n"), "{out}");
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("  report ") && last.ends_with("home/rollover/runs/0001/report.html"),
        "{out}"
    );
    assert!(
        out.contains("home/rollover/runs/0001/summary.json"),
        "{out}"
    );
    let audit = wd.run(&["audit", "in.jsonl", "--out", "audited"]);
    audit.expect_code(0);
    let out = audit.stdout();
    assert!(out.starts_with("rollover audit\n"), "{out}");
    assert!(!out.contains("rollover convert"), "{out}");
    assert!(
        out.trim_end()
            .ends_with("audited/rollover/runs/0001/report.html"),
        "{out}"
    );
}

#[test]
fn rules_check_reports_an_unknown_table_and_a_bad_regex_both() {
    let wd = Workdir::new("promise_rules_both");
    wd.create(
        "both.toml",
        "[bogus]\nalpha = 1\nbeta = \"x\"\n\n[[rule]]\nid = \"bad-regex\"\nrole = [\"system\"]\nregex = \"(unclosed\"\nslot = \"developer\"\n",
    );
    let run = wd.run(&["rules", "check", "default", "both.toml"]);
    run.expect_code(1);
    let out = run.stdout();
    assert!(out.contains("unknown field `bogus`"), "{out}");
    assert!(
        out.contains("rule `bad-regex`: invalid text regex"),
        "{out}"
    );
    assert!(
        out.contains("both.toml:8:"),
        "the regex at its line:\n{out}"
    );
    // The table's keys are not reported again as fields of another table.
    assert!(!out.contains("`alpha`") && !out.contains("`beta`"), "{out}");
    assert!(out.contains("2 errors in 1 of 2 rule files"), "{out}");
}

#[test]
fn rules_check_refuses_rules_that_cannot_fire_or_name_nothing() {
    let wd = Workdir::new("promise_rules_refused");
    for (text, says, line) in [
        (
            "[[rule]]\nid = \"never\"\nrole = [\"sytem\"]\nslot = \"developer\"\n",
            "role `sytem` can never match (did you mean `system`?): rules classify messages of the roles `system`, `developer`, `user`",
            ":2:",
        ),
        (
            "[[rule]]\nid = \"mid-conversation-sytem\"\nenabled = false\n",
            "`enabled = false` removes rule `mid-conversation-sytem`, which no earlier rule file defines: did you mean `mid-conversation-system`?",
            ":2:",
        ),
        (
            "[[marker]]\nkind = \"no-such-kind\"\nenabled = false\n",
            "`enabled = false` removes marker `no-such-kind`, which no earlier rule file defines",
            ":2:",
        ),
        (
            "[session]\ncwd = \"projects/app\"\n",
            "session.cwd `projects/app` is relative",
            ":2:",
        ),
        (
            "[session]\ntimestamp = \"2024-13-45T99:00:00Z\"\n",
            "session.timestamp `2024-13-45T99:00:00Z` is not an RFC 3339 time",
            ":2:",
        ),
    ] {
        wd.create("mine.toml", text);
        let run = wd.run(&["rules", "check", "default", "mine.toml"]);
        run.expect_code(1);
        let out = run.stdout();
        assert!(out.contains(says), "{text}\n{out}");
        // At the user's file and line, never at the defaults.
        assert!(out.contains(&format!("mine.toml{line}")), "{text}\n{out}");
        assert!(!out.contains("default:"), "{text}\n{out}");
        // A conversion with the file stops, saying the same.
        wd.create_jsonl("in.jsonl", &[json!({"messages": [{"role": "user", "content": "hi"}]})]);
        let convert = wd.run(&["convert", "in.jsonl", "--out", "h", "--rules", "default", "--rules", "mine.toml"]);
        convert.expect_code(2);
        assert!(convert.stderr().contains("mine.toml:2"), "{convert}");
    }
}

#[test]
fn every_supported_codex_release_is_named_and_accepted() {
    let wd = Workdir::new("promise_codex");
    let version = wd.run(&["--version"]);
    version.expect_code(0);
    assert!(
        version
            .stdout()
            .contains("tested with Codex 0.169.1, 0.171.0"),
        "{version}"
    );
    assert_eq!(rollover::validate::SUPPORTED_CODEX, ["0.169.1", "0.171.0"]);
    let home = samples_home(&wd);
    for (asked, checked) in [
        ("0.171", "0.171.0"),
        ("0.171.0", "0.171.0"),
        ("0.169", "0.169.1"),
        ("0.169.1", "0.169.1"),
        ("0.169.0", "0.169.0"),
    ] {
        let run = wd.run(&["validate", s(&home), "--codex-version", asked]);
        run.expect_code(0);
        assert!(
            run.stdout().ends_with(&format!("(Codex {checked})\n")),
            "{run}"
        );
        assert!(
            !run.stderr().contains("expected"),
            "no warning for a supported release: {run}"
        );
    }
    let json = wd.run(&["validate", s(&home), "--codex-version", "0.171", "--json"]);
    let report: Value = serde_json::from_str(&json.stdout()).unwrap();
    assert_eq!(report["codex_version"], "0.171.0");
    for refused in ["0.170", "0.17", "0.172.0"] {
        let run = wd.run(&["validate", s(&home), "--codex-version", refused]);
        run.expect_code(2);
        assert!(
            run.stderr().contains("give one of 0.169.1, 0.171.0"),
            "{run}"
        );
    }
}

#[test]
fn model_is_the_default_of_responses_bodies_and_is_audited() {
    let wd = Workdir::new("promise_model");
    wd.create_jsonl(
        "in.jsonl",
        &[
            json!({"messages": [{"role": "user", "content": "no model"}]}),
            json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "its own"}]}),
        ],
    );
    wd.convert(
        "in.jsonl",
        "home",
        &["--format", "responses", "--model", "gpt-5", "-q"],
        0,
    );
    let bodies = read_jsonl(&wd.path("home/responses/in.jsonl"));
    let models: Vec<&Value> = bodies.iter().map(|b| &b["model"]).collect();
    assert_eq!(models, [&json!("gpt-5"), &json!("gpt-4o")]);
    let lines = read_jsonl(&wd.path("home/rollover/latest/conversations.jsonl"));
    let defaulted: Vec<bool> = lines
        .iter()
        .map(|l| {
            l["decisions"].as_array().unwrap().iter().any(|d| {
                d["rule"] == "builtin.default-model"
                    && d["action"] == "model_defaulted"
                    && d["model"] == "gpt-5"
            })
        })
        .collect();
    assert_eq!(defaulted, [true, false]);
    let summary = summary(&wd.path("home"));
    assert_eq!(summary["rules_fired"]["builtin.default-model"], 1);
    // Another --model is another output: the file is converted again.
    let again = wd.run(&[
        "convert",
        "in.jsonl",
        "--out",
        "home",
        "--format",
        "responses",
        "--model",
        "gpt-5-mini",
    ]);
    again.expect_code(0);
    let bodies = read_jsonl(&wd.path("home/responses/in.jsonl"));
    assert_eq!(bodies[0]["model"], "gpt-5-mini");
}
