//! The command line around conversion: `--dry-run`, rule files given with `--rules`,
//! `rules check`, `rules policies`, exit codes for usage errors.

use crate::common::{self, Workdir};
use serde_json::json;

#[test]
fn dry_run_writes_the_report_but_no_rollout() {
    let wd = Workdir::new("dry_run");
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    let home = wd.convert("in.jsonl", "home", &["--dry-run"], 0);
    assert!(home.rollouts().is_empty());
    let summary = home.summary();
    assert_eq!(summary["dry_run"], true);
    assert_eq!(summary["converted"], 1);
    assert!(
        home.run.stdout().contains("dry run"),
        "{}",
        home.run.stdout()
    );
}

/// A dry run reads its records in batches twice a run's size; what it reports is still what
/// the run then records: the same conversations in the same order, the same quarantine and the
/// same counts, over records spanning several batches of either size, with a repeated record,
/// a damaged line and a refused conversation among them.
#[test]
fn a_dry_run_reports_what_the_run_records_whatever_its_batches() {
    let wd = Workdir::new("dry_run_batches");
    let mut lines: Vec<String> = (0..1_300)
        .map(|i| {
            json!({"messages": [
                {"role": "system", "content": format!("You help with task {i}.")},
                {"role": "user", "content": format!("question {i}: {}", "words ".repeat(i % 40))},
                {"role": "assistant", "content": format!("answer {i}")},
            ]})
            .to_string()
        })
        .collect();
    // A repeat of an earlier record, a line cut short, a tool output with no call and an empty
    // message list, each near where a batch of 256 or of 512 records ends.
    lines.insert(255, lines[3].clone());
    lines.insert(
        511,
        r#"{"messages": [{"role": "user", "content": "cut"#.to_string(),
    );
    lines.insert(
        767,
        json!({"messages": [{"role": "tool", "tool_call_id": "x", "content": "r"}]}).to_string(),
    );
    lines.insert(1_023, json!({"messages": []}).to_string());
    wd.create("in.jsonl", lines.join("\n") + "\n");
    let plan = wd.convert("in.jsonl", "plan", &["--dry-run"], 1);
    let run = wd.convert("in.jsonl", "run", &[], 1);
    assert!(plan.rollouts().is_empty());
    // Every record but the damaged line and the refused one is a session; the tool output
    // with no call is dropped from its conversation, which is kept.
    assert_eq!(run.rollouts().len(), 1_302, "{}", run.run);
    let report = |home: &common::Home, file: &str| {
        std::fs::read(common::run_folder(&home.root).join(file)).expect("a report file")
    };
    for file in ["conversations.jsonl", "quarantine.jsonl", "files.csv"] {
        assert!(
            report(&plan, file) == report(&run, file),
            "{file}: the dry run reported one thing, the run recorded another"
        );
    }
    assert_eq!(plan.conversations().len(), 1_302);
    assert_eq!(plan.quarantine().len(), 2);
    let (mut planned, ran) = (plan.summary(), run.summary());
    assert_eq!(planned["dry_run"], true);
    planned["dry_run"] = json!(false);
    assert_eq!(planned, ran);
}

#[test]
fn a_later_rule_file_overrides_policies_and_its_rules_win() {
    let wd = Workdir::new("rules_override");
    wd.create(
        "mine.toml",
        r#"
[policy]
orphan_output = "quarantine"

[[rule]]
id = "all-system-is-developer"
role = ["system"]
slot = "developer"
"#,
    );
    wd.create_jsonl(
        "in.jsonl",
        &[
            json!({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}]}),
            json!({"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "x", "content": "r"}]}),
        ],
    );
    let home = wd.convert(
        "in.jsonl",
        "home",
        &["--rules", "default", "--rules", "mine.toml"],
        1,
    );
    // The new rule came before the default `first-leading-system`: no base instructions.
    let rollout = home.single_rollout();
    assert!(rollout.meta().get("base_instructions").is_none());
    let decisions = home.decisions();
    assert_eq!(decisions[0]["rule"], "all-system-is-developer");
    // The overridden policy quarantines the orphan output instead of dropping it.
    let quarantine = home.quarantine();
    assert_eq!(quarantine.len(), 1);
    assert!(
        quarantine[0]["reason"]
            .as_str()
            .unwrap()
            .contains("policy.orphan_output"),
        "{}",
        quarantine[0]["reason"]
    );
}

#[test]
fn rules_check_passes_the_shipped_rules() {
    let wd = Workdir::new("rules_check_default");
    let run = wd.run(&[
        "rules",
        "check",
        concat!(env!("CARGO_MANIFEST_DIR"), "/rules/default.toml"),
    ]);
    run.expect_code(0);
    assert!(run.stdout().contains(": ok"), "{}", run.stdout());
}

#[test]
fn rules_check_reports_unknown_keys_with_their_line() {
    let wd = Workdir::new("rules_check_unknown_key");
    wd.create(
        "bad.toml",
        "[policy]\norphan_output = \"drop\"\nbogus = 1\n",
    );
    let run = wd.run(&["rules", "check", "bad.toml"]);
    run.expect_code(1);
    assert!(
        run.stdout()
            .starts_with("error: unknown field `bogus`\n  --> bad.toml:3:1\n"),
        "{}",
        run.stdout()
    );
}

#[test]
fn rules_check_reports_an_invalid_value_with_its_line() {
    let wd = Workdir::new("rules_check_bad_value");
    wd.create("bad.toml", "[policy]\n\norphan_output = \"keep\"\n");
    let run = wd.run(&["rules", "check", "bad.toml"]);
    run.expect_code(1);
    assert!(run.stdout().contains("bad.toml:3:"), "{}", run.stdout());
    assert!(
        run.stdout().contains("unknown variant `keep`"),
        "{}",
        run.stdout()
    );
}

#[test]
fn rules_check_reports_an_invalid_regex_with_its_line() {
    let wd = Workdir::new("rules_check_bad_regex");
    wd.create(
        "bad.toml",
        "[[rule]]\nid = \"r\"\nrole = [\"system\"]\nregex = \"([\"\nslot = \"developer\"\n",
    );
    let run = wd.run(&["rules", "check", "default", "bad.toml"]);
    run.expect_code(1);
    assert!(
        run.stdout().contains(
            "error: rule `r`: invalid text regex: unclosed character class\n  --> bad.toml:4:10\n"
        ),
        "{}",
        run.stdout()
    );
}

#[test]
fn rules_check_warns_about_unreachable_rules_and_overlapping_markers() {
    let wd = Workdir::new("rules_check_unreachable");
    wd.create(
        "mine.toml",
        r#"[[rule]]
id = "catch-all"
role = ["system", "developer"]
slot = "developer"

[[marker]]
kind = "env2"
start = "<environment_context"
end = "</environment_context>"
"#,
    );
    let run = wd.run(&["rules", "check", "default", "mine.toml"]);
    run.expect_code(1);
    let out = run.stdout();
    assert!(
        out.contains("rule `first-leading-system` is unreachable: rule `catch-all`"),
        "{out}"
    );
    assert!(
        out.contains("markers `environment_context` and `env2` overlap"),
        "{out}"
    );
}

#[test]
fn rules_policies_lists_every_policy_with_its_values_and_the_override() {
    let wd = Workdir::new("rules_policies");
    let run = wd.run(&["rules", "policies"]);
    run.expect_code(0);
    let out = run.stdout();
    for line in [
        "missing_output = \"synthesize\"    (synthesize | quarantine)",
        "missing_output_text = \"aborted\"",
        "file_part = \"placeholder\"    (placeholder | drop | quarantine)",
        "lookalike_escape_prefix = \"\\u{200b}\"",
        "unpaired_reasoning = \"drop\"    (drop | quarantine)",
    ] {
        assert!(out.lines().any(|l| l == line), "{line}\n{out}");
    }
    assert!(out.contains("rule id `policy.orphan_output`"), "{out}");
    wd.create("mine.toml", "[policy]\norphan_output = \"quarantine\"\n");
    let run = wd.run(&["rules", "policies", "default", "mine.toml"]);
    run.expect_code(0);
    let out = run.stdout();
    assert!(
        out.lines()
            .any(|l| l == "orphan_output = \"quarantine\"    (drop | text | quarantine)"),
        "{out}"
    );
}

#[test]
fn a_forbidden_policy_value_names_the_key_and_the_allowed_values() {
    let wd = Workdir::new("rules_forbidden_value");
    wd.create("mine.toml", "[policy]\nfile_part = \"keep\"\n");
    let run = wd.run(&["rules", "check", "default", "mine.toml"]);
    run.expect_code(1);
    assert!(
        run.stdout().contains(
            "policy.file_part cannot be `Keep`: Codex has no content item for it; use placeholder, drop or quarantine"
        ),
        "{}",
        run.stdout()
    );
}

#[test]
fn usage_and_io_errors_exit_2_with_the_reason() {
    let wd = Workdir::new("usage_errors");
    let missing = wd.run(&["convert", "nope.jsonl", "--out", "home"]);
    missing.expect_code(2);
    assert!(
        missing.stderr().contains("nope.jsonl"),
        "{}",
        missing.stderr()
    );
    wd.create("bad.toml", "[policy\n");
    wd.create_jsonl("in.jsonl", &[json!({"messages": []})]);
    let bad_rules = wd.run(&[
        "convert", "in.jsonl", "--out", "home", "--rules", "bad.toml",
    ]);
    bad_rules.expect_code(2);
    assert!(
        bad_rules.stderr().contains("bad.toml:1:"),
        "{}",
        bad_rules.stderr()
    );
    let bad_path = wd.run(&[
        "convert",
        "in.jsonl",
        "--out",
        "home",
        "--messages-at",
        "a[x]",
    ]);
    bad_path.expect_code(2);
    assert!(
        bad_path.stderr().contains("--messages-at a[x]"),
        "{}",
        bad_path.stderr()
    );
    let no_args = wd.run(&["convert"]);
    no_args.expect_code(2);
}

#[test]
fn an_output_home_inside_the_input_folder_is_not_read_back() {
    let wd = Workdir::new("home_inside_input");
    wd.create_jsonl(
        "data/in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    let first = wd.convert("data", "data/home", &[], 0);
    assert_eq!(first.summary()["files"], 1);
    assert_eq!(first.summary()["records"], 1);
    // Again with --full (a plain re-run skips the unchanged file): the home's own rollouts
    // and reports are still not read as input.
    let second = wd.convert("data", "data/home", &["--full"], 0);
    assert_eq!(second.summary()["files"], 1);
    assert_eq!(second.summary()["records"], 1);
}

/// `archive/` for the walk's filters: 7 record files (`a.jsonl` with 2 records, the others
/// 1 each), two of them `.bak.jsonl`, and a `.txt` file.
fn filter_archive(wd: &Workdir) {
    let record = |text: &str| json!({"messages": [{"role": "user", "content": text}]});
    wd.create_jsonl("archive/a.jsonl", &[record("a1"), record("a2")]);
    for name in [
        "b.bak.jsonl",
        "tmp/c.jsonl",
        "tmp/d.jsonl",
        "keep/e.jsonl",
        "keep/sub/f.jsonl",
        "keep/sub/g.bak.jsonl",
    ] {
        wd.create_jsonl(&format!("archive/{name}"), &[record(name)]);
    }
    wd.create("archive/notes.txt", "not a record file");
}

/// (files, records, rollouts, skipped_excluded, skipped_unmatched) of a run.
fn filtered(home: &common::Home) -> (u64, u64, usize, u64, u64) {
    let s = home.summary();
    let n = |key: &str| s[key].as_u64().unwrap_or(0);
    (
        n("files"),
        n("records"),
        home.rollouts().len(),
        n("skipped_excluded"),
        n("skipped_unmatched"),
    )
}

#[test]
fn glob_and_exclude_filter_the_walk_by_the_path_below_the_input_folder() {
    let wd = Workdir::new("walk_filters");
    filter_archive(&wd);
    // A bare name matches at any depth; an excluded folder is not entered (it counts once).
    let home = wd.convert(
        "archive",
        "h1",
        &["--exclude", "*.bak.jsonl", "--exclude", "tmp"],
        0,
    );
    assert_eq!(filtered(&home), (3, 4, 4, 3, 0));
    assert_eq!(
        home.summary()["skipped_other_extensions"],
        json!({".txt": 1})
    );
    let stdout = home.run.stdout();
    assert!(
        stdout.contains("skipped      1 other extension, 3 excluded\n"),
        "{stdout}"
    );
    assert!(
        home.run
            .stderr()
            .contains("skipped 3 files and folders matching --exclude"),
        "{}",
        home.run.stderr()
    );
    // --glob keeps only the files it matches: keep/e, keep/sub/f, keep/sub/g.bak.
    let home = wd.convert("archive", "h2", &["--glob", "keep/**"], 0);
    assert_eq!(filtered(&home), (3, 3, 3, 0, 4));
    assert!(
        home.run.stdout().contains("4 matching no --glob"),
        "{}",
        home.run.stdout()
    );
    // --exclude wins over --glob.
    let both = ["--glob", "keep/**", "--exclude", "*.bak.jsonl"];
    let home = wd.convert("archive", "h3", &both, 0);
    assert_eq!(filtered(&home), (2, 2, 2, 2, 3));
    // A leading `/` anchors a name at the input folder: a.jsonl and b.bak.jsonl only.
    let home = wd.convert("archive", "h4", &["--glob", "/*.jsonl"], 0);
    assert_eq!(filtered(&home), (2, 3, 3, 0, 5));
    // The path matched starts below the INPUT folder, not at its parent as the key does:
    // `archive/**` matches nothing, and nothing to do is an error that says why.
    let run = wd.run(&["convert", "archive", "--out", "h5", "--glob", "archive/**"]);
    run.expect_code(2);
    assert!(
        run.stderr().contains("skipped 7 files matching no --glob"),
        "{run}"
    );
    assert!(!wd.path("h5").exists(), "{run}");
    // A file named on the command line is read whatever the filters say.
    let home = wd.convert(
        "archive/b.bak.jsonl",
        "h6",
        &["--exclude", "*.bak.jsonl"],
        0,
    );
    assert_eq!(filtered(&home), (1, 1, 1, 0, 0));
    // Without filters the summary has no such field (it stays as it was).
    let home = wd.convert("archive", "h7", &[], 0);
    assert_eq!(filtered(&home), (7, 8, 8, 0, 0));
    assert!(home.summary().get("skipped_excluded").is_none());
}

#[test]
fn a_bad_glob_is_a_usage_error_naming_the_pattern() {
    let wd = Workdir::new("bad_glob");
    filter_archive(&wd);
    for (flag, pattern) in [("--exclude", "a[b"), ("--glob", "{x,y")] {
        let run = wd.run(&["convert", "archive", "--out", "home", flag, pattern]);
        run.expect_code(2);
        let expected = format!("rollover: {flag} `{pattern}` is not a glob: ");
        assert!(run.stderr().starts_with(&expected), "{run}");
        assert!(
            run.stderr().contains("write it like `*.bak.jsonl`"),
            "{run}"
        );
        assert!(!wd.path("home").exists(), "{run}");
    }
}

/// Every file and folder under `root` but the output folders `out*` (relative paths, sorted).
fn entries_outside(root: &std::path::Path) -> Vec<String> {
    let mut found: Vec<String> = walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.depth() != 1 || !e.file_name().to_string_lossy().starts_with("out"))
        .map(|e| e.expect("walk"))
        .map(|e| {
            e.path()
                .strip_prefix(root)
                .expect("below")
                .display()
                .to_string()
        })
        .collect();
    found.sort();
    found
}

/// What `--format responses` wrote into `out` besides rollover's own folder.
fn written_outputs(out: &std::path::Path) -> Vec<String> {
    let mut found: Vec<String> = walkdir::WalkDir::new(out)
        .into_iter()
        .filter_entry(|e| e.file_name() != "rollover")
        .map(|e| e.expect("walk"))
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            e.path()
                .strip_prefix(out)
                .expect("below")
                .display()
                .to_string()
        })
        .collect();
    found.sort();
    found
}

/// Runs rollover in `wd/data/sub` (so `..` is `data`), standard input from `stdin` when given.
fn run_in_sub(wd: &Workdir, args: &[&str], stdin: Option<&str>) -> common::Run {
    let mut cmd = wd.command(args);
    cmd.current_dir(wd.path("data/sub"));
    if let Some(file) = stdin {
        cmd.stdin(std::fs::File::open(wd.path(file)).expect("open stdin file"));
    }
    let output = cmd.output().expect("run rollover");
    common::Run {
        command: format!("(cd data/sub && rollover {})", args.join(" ")),
        output,
    }
}

#[test]
fn stdin_name_that_climbs_or_is_absolute_or_empty_is_refused_and_nothing_is_written() {
    let wd = Workdir::new("stdin_name_confined");
    let record = json!({"messages": [{"role": "user", "content": "hi"}]});
    wd.create_jsonl("record.jsonl", std::slice::from_ref(&record));
    wd.create_jsonl("data/sub/in.jsonl", &[record]);
    std::fs::create_dir_all(wd.path("canary")).expect("canary");
    let before = entries_outside(wd.root());
    let absolute = wd.path("canary/abs.jsonl").display().to_string();
    // `convert - --out ../../out --format responses --stdin-name NAME` from data/sub.
    let stdin_named = |name: &str| {
        let args = [
            "convert",
            "-",
            "--out",
            "../../out",
            "--format",
            "responses",
            "--stdin-name",
            name,
        ];
        run_in_sub(&wd, &args, Some("record.jsonl"))
    };
    for (name, why) in [
        ("../../x.jsonl", "it has a `..` component"),
        ("a/../../x.jsonl", "it has a `..` component"),
        (absolute.as_str(), "it is absolute"),
        ("/tmp/abs.jsonl", "it is absolute"),
        ("", "it is empty"),
    ] {
        let run = stdin_named(name);
        run.expect_code(2);
        let expected = format!("`{name}` cannot be the stdin name: {why}");
        assert!(run.stderr().contains(&expected), "{run}");
        assert!(
            run.stderr()
                .contains("give a relative path such as `stdin`"),
            "{run}"
        );
        assert_eq!(entries_outside(wd.root()), before, "{run}");
        assert!(!wd.path("out").exists(), "{run}");
    }
    assert!(!std::path::Path::new("/tmp/abs.jsonl").exists());
    // A relative name below the folder is a key like any other.
    stdin_named("imports/today.jsonl").expect_code(0);
    assert_eq!(
        written_outputs(&wd.path("out")),
        ["responses/imports/today.jsonl"]
    );
    assert_eq!(entries_outside(wd.root()), before);
}

#[test]
fn keys_that_climb_with_dotdot_never_make_responses_write_outside_out() {
    let wd = Workdir::new("dotdot_confined");
    let record = |text: &str| json!({"messages": [{"role": "user", "content": text}]});
    wd.create_jsonl("data/a.jsonl", &[record("a")]);
    wd.create_jsonl("data/sub/b.jsonl", &[record("b")]);
    std::fs::create_dir_all(wd.path("canary")).expect("canary");
    let before = entries_outside(wd.root());
    // `convert INPUT --out OUT --format responses EXTRA...` from data/sub.
    let responses = |input: &str, out: &str, extra: &[&str]| {
        let mut args = vec!["convert", input, "--out", out, "--format", "responses"];
        args.extend_from_slice(extra);
        run_in_sub(&wd, &args, None)
    };
    // `cd data/sub && convert ..`: keys `../a.jsonl` and `../sub/b.jsonl`, each `..` written
    // as a name of its own below OUT/responses.
    let run = responses("..", "../../out", &[]);
    run.expect_code(0);
    let expected = ["responses/%2E%2E/a.jsonl", "responses/%2E%2E/sub/b.jsonl"];
    assert_eq!(written_outputs(&wd.path("out")), expected, "{run}");
    assert_eq!(entries_outside(wd.root()), before, "{run}");
    // The key, and so the session id, is unchanged: only the path is mapped.
    let lines = common::read_jsonl(&wd.path("out/rollover/latest/conversations.jsonl"));
    let paths: Vec<&str> = lines.iter().filter_map(|l| l["path"].as_str()).collect();
    assert_eq!(paths, expected);
    // A file named through `..` is keyed by its name.
    responses("../a.jsonl", "../../out2", &[]).expect_code(0);
    assert_eq!(written_outputs(&wd.path("out2")), ["responses/a.jsonl"]);

    // A forced re-run, over a body file changed since it was written while its input has a
    // record more (so newer data for it): the copy it keeps and the file it writes are
    // inside OUT too.
    let changed = wd.path("out/responses/%2E%2E/a.jsonl");
    std::fs::write(&changed, b"{\"edited\":true}\n").expect("edit");
    wd.create_jsonl("data/a.jsonl", &[record("a"), record("a, later")]);
    let before = entries_outside(wd.root());
    let run = responses("..", "../../out", &["--full", "--force"]);
    run.expect_code(0);
    assert_eq!(written_outputs(&wd.path("out")), expected, "{run}");
    assert_eq!(
        std::fs::read(replaced_copy(&wd.path("out"), "responses/%2E%2E/a.jsonl")).expect("copy"),
        b"{\"edited\":true}\n"
    );
    assert_eq!(entries_outside(wd.root()), before, "{run}");
    assert!(!wd.path("out2/a.jsonl").exists() && !wd.path("a.jsonl").exists());
}

/// Runs `args` (writing into `home`) with the failpoint armed: the run fails with exit 2,
/// names `stage` and the failpoint, and writes no summary.
fn fails_at(wd: &Workdir, args: &[&str], home: &str, failpoint: &str, stage: &str) {
    let out = wd
        .command(args)
        .env("ROLLOVER_FAILPOINT", failpoint)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run rollover");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{failpoint}: {stderr}");
    let expected = format!("rollover: converting into {home}: the {stage} stage failed unexpectedly (failpoint `{failpoint}` reached (ROLLOVER_FAILPOINT)); the run stopped and its report is incomplete");
    assert!(stderr.contains(&expected), "{failpoint}: {stderr}");
    assert!(
        !wd.path(&format!("{home}/rollover/summary.json")).exists(),
        "{failpoint}: a summary was written"
    );
}

/// Issue 7, finding 4: a panic in the reader thread was swallowed (`let _ = reader.join()`),
/// and the run ended early with exit 0 and a summary that looked complete.
#[test]
fn a_panicking_reader_fails_the_run_with_exit_2_naming_the_stage() {
    let wd = Workdir::new("reader_panic");
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    for stage in ["reader", "convert"] {
        fails_at(
            &wd,
            &["convert", "in.jsonl", "--out", "home"],
            "home",
            stage,
            stage,
        );
    }
}

/// Several files are read ahead by threads of their own: a panic in one fails the run like a
/// panic in the reader (not a file recorded as converted when it was read in part), and a
/// reader's panic stops them instead of leaving the run waiting on them.
#[test]
fn a_panic_reading_several_files_fails_the_run_with_exit_2() {
    let wd = Workdir::new("prefetch_panic");
    // Files of ~100 KB: a smaller file is read by the reader itself.
    let text = "x".repeat(300);
    for i in 0..6 {
        let records: Vec<_> = (0..300)
            .map(|n| json!({"messages": [{"role": "user", "content": format!("{i} {n} {text}")}]}))
            .collect();
        wd.create_jsonl(&format!("archive/f{i}.jsonl"), &records);
    }
    for failpoint in ["reader", "prefetch"] {
        let home = format!("home-{failpoint}");
        let args = ["convert", "archive", "--out", &home, "-j", "2"];
        fails_at(&wd, &args, &home, failpoint, "reader");
        // A file is recorded as done in the manifest's journal (or the manifest at a clean
        // end); none was read whole before the panic.
        for record in ["manifest", "manifest.journal"] {
            let text = std::fs::read_to_string(wd.path(&format!("{home}/rollover/{record}")))
                .unwrap_or_default();
            assert!(
                !text.contains("f0.jsonl"),
                "{failpoint}: a file read in part was recorded as converted in {record}: {text}"
            );
        }
    }
}

/// Issue 7, finding 8: `--jobs 100000` aborted the process (exit 134) trying to start the
/// threads.
#[test]
fn absurd_jobs_values_are_rejected_up_front() {
    let wd = Workdir::new("jobs_bounds");
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    let run = wd.run(&["convert", "in.jsonl", "--out", "home", "--jobs", "100000"]);
    run.expect_code(2);
    assert!(
        run.stderr().contains("invalid value '100000' for '--jobs <JOBS>': 100000 threads is more than the 1024 rollover can use; leave --jobs out for one per core"),
        "{}",
        run.stderr()
    );
    let run = wd.run(&["convert", "in.jsonl", "--out", "home", "--jobs", "0"]);
    run.expect_code(2);
    assert!(
        run.stderr().contains("give at least 1 worker thread"),
        "{}",
        run.stderr()
    );
    assert!(!wd.path("home").exists());
}

/// Issue 7, finding 9: messages printed their cause twice ("...: No such file or directory
/// (os error 2); check the path: No such file or directory (os error 2)").
#[test]
fn errors_state_their_cause_once() {
    let wd = Workdir::new("cause_once");
    let run = wd.run(&["convert", "missing.jsonl", "--out", "home"]);
    run.expect_code(2);
    assert_eq!(
        run.stderr().trim_end(),
        "rollover: converting into home: cannot read input path missing.jsonl (check the path): No such file or directory (os error 2)"
    );
    let run = wd.run(&[
        "convert",
        "missing.jsonl",
        "--out",
        "home",
        "--rules",
        "nope.toml",
    ]);
    run.expect_code(2);
    assert_eq!(
        run.stderr().trim_end(),
        "rollover: loading rule files: cannot read rule file nope.toml (check the path given to --rules): No such file or directory (os error 2)"
    );
    assert_eq!(run.stderr().matches("os error 2").count(), 1);
}

// Issue 9, part B: diagnostics, output for people, conventions.

/// Runs `rollover ARGS...` in `wd` with `COLUMNS=80` (stdout is not a terminal).
fn run_80(wd: &Workdir, args: &[&str]) -> common::Run {
    let mut cmd = wd.command(args);
    cmd.env("COLUMNS", "80").env_remove("NO_COLOR");
    let output = cmd.output().expect("run rollover");
    common::Run {
        command: format!("rollover {}", args.join(" ")),
        output,
    }
}

/// The summary with its one varying line (the time) redacted.
fn redact_time(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("  time ") {
                "  time         [redacted]"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn rules_check_reports_every_error_of_every_file_with_its_source_line() {
    let wd = Workdir::new("rules_check_every_error");
    wd.create(
        "typo.toml",
        "[policy]\norphan_ouput = \"drop\"\nbogus = 1\n\n[session]\ncwd = \"/\"\ncwdd = \"/x\"\n",
    );
    wd.create(
        "badre.toml",
        "[[rule]]\nid = \"r1\"\nrole = [\"system\"]\nregex = \"([\"\nslot = \"developer\"\n\n[[rule]]\nid = \"r2\"\nname = \"a{2,1}\"\nslot = \"drop\"\n",
    );
    wd.create("syntax.toml", "[policy]\norphan_output = \"drop\n");
    let run = run_80(
        &wd,
        &["rules", "check", "typo.toml", "badre.toml", "syntax.toml"],
    );
    run.expect_code(1);
    insta::assert_snapshot!(run.stdout());
}

#[test]
fn rules_check_suggests_the_key_a_typo_meant() {
    let wd = Workdir::new("rules_check_typo");
    wd.create("typo.toml", "[policy]\norphan_ouput = \"drop\"\n");
    let run = run_80(&wd, &["rules", "check", "default", "typo.toml"]);
    run.expect_code(1);
    let out = run.stdout();
    assert!(
        out.contains("error: unknown field `orphan_ouput`\n"),
        "{out}"
    );
    assert!(out.contains("typo.toml:2:1\n"), "{out}");
    assert!(
        out.contains("= help: did you mean `orphan_output`?\n"),
        "{out}"
    );
    assert!(out.ends_with("1 error in 1 of 2 rule files\n"), "{out}");
}

#[test]
fn convert_summary_fits_80_columns_groups_digits_and_says_what_it_left_out() {
    let wd = Workdir::new("summary_for_people");
    let samples = concat!(env!("CARGO_MANIFEST_DIR"), "/samples");
    let run = run_80(&wd, &["convert", samples, "-o", "home", "-j", "2"]);
    assert!(matches!(run.code(), Some(0 | 1)), "{run}");
    let out = run.stdout();
    for line in out.lines() {
        assert!(line.chars().count() <= 80, "wider than 80: {line:?}");
        assert!(!line.trim().is_empty(), "an empty line:\n{out}");
    }
    insta::assert_snapshot!(redact_time(&out));
}

#[test]
fn a_run_that_converts_nothing_prints_no_empty_line_and_counts_in_the_singular() {
    let wd = Workdir::new("summary_nothing_converted");
    wd.create_jsonl("in.jsonl", &[json!({"no": "messages"})]);
    let run = run_80(&wd, &["convert", "in.jsonl", "--out", "home"]);
    run.expect_code(1);
    let out = run.stdout();
    for label in ["items", "phases", "rules fired", "text bytes"] {
        assert!(!out.contains(&format!("  {label} ")), "{label}:\n{out}");
    }
    assert!(
        out.contains("  files        1 input file: 18 B on disk, 17 B decompressed\n"),
        "{out}"
    );
    assert!(
        out.contains("  records      1 = converted 0 + quarantined 1\n"),
        "{out}"
    );
    assert!(
        run.stderr()
            .starts_with("rollover: reading 1 file, 18 B on disk\n"),
        "{}",
        run.stderr()
    );
}

#[test]
fn timing_is_in_timing_json_and_the_summary_has_no_seconds() {
    let wd = Workdir::new("timing_json");
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    let home = wd.convert("in.jsonl", "home", &[], 0);
    assert_eq!(home.summary().get("seconds"), None);
    let run = common::run_folder(&home.root);
    let timing: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("timing.json")).expect("timing.json"))
            .expect("JSON");
    let keys: Vec<&str> = timing
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "bytes_on_disk",
            "bytes_read",
            "mib_per_second",
            "records",
            "records_per_second",
            "seconds",
            "wait_seconds"
        ]
    );
    assert_eq!(timing["records"], 1);
}

/// A home with one passing rollout and one failing (a tool output without its call).
fn one_good_one_bad_rollout(wd: &Workdir) {
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    let home = wd.convert("in.jsonl", "home", &[], 0);
    let rollout = home.rollouts().into_iter().next().expect("a rollout");
    let text = std::fs::read_to_string(&rollout).expect("read rollout");
    let orphan = r#"{"timestamp":"2030-01-01T00:00:00.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"nope","output":"x"}}"#;
    wd.create("bad/rollout-bad.jsonl", format!("{text}{orphan}\n"));
    wd.create("bad/rollout-good.jsonl", text);
}

#[test]
fn validate_prints_failures_and_totals_and_verbose_lists_every_file() {
    let wd = Workdir::new("validate_failures_only");
    one_good_one_bad_rollout(&wd);
    let run = run_80(&wd, &["validate", "bad"]);
    run.expect_code(1);
    let out = run.stdout();
    assert!(!out.contains("rollout-good"), "{out}");
    assert!(out.starts_with("FAIL  bad/rollout-bad.jsonl ("), "{out}");
    assert!(
        out.ends_with("2 files: 1 passed, 1 failed (Codex 0.169.1)\n"),
        "{out}"
    );
    let run = run_80(&wd, &["validate", "-v", "bad"]);
    assert!(
        run.stdout().contains("ok    bad/rollout-good.jsonl\n"),
        "{}",
        run.stdout()
    );
    let run = run_80(&wd, &["validate", "-q", "bad"]);
    run.expect_code(1);
    assert_eq!(run.stdout(), "");
}

#[test]
fn quiet_prints_nothing_but_errors_and_verbose_a_line_per_input_file() {
    let wd = Workdir::new("quiet_verbose");
    wd.create_jsonl(
        "in/a.jsonl",
        &[
            json!({"messages": [{"role": "user", "content": "hi"}]}),
            json!({"no": "messages"}),
        ],
    );
    let quiet = run_80(&wd, &["convert", "in", "-o", "h1", "-q"]);
    quiet.expect_code(1);
    assert_eq!(
        (quiet.stdout(), quiet.stderr()),
        (String::new(), String::new())
    );
    let json = run_80(&wd, &["convert", "in", "-o", "h2", "-q", "--json"]);
    json.expect_code(1);
    assert_eq!(json.stderr(), "");
    let value: serde_json::Value = serde_json::from_str(&json.stdout()).expect("only JSON");
    assert_eq!(value["exit_code"], 1);
    let verbose = run_80(&wd, &["convert", "in", "-o", "h3", "-v"]);
    verbose.expect_code(1);
    assert!(
        verbose
            .stderr()
            .contains("rollover: done in/a.jsonl: 2 records = converted 1 + quarantined 1\n"),
        "{}",
        verbose.stderr()
    );
    // An error still shows with --quiet.
    let missing = run_80(&wd, &["convert", "nope", "-o", "h4", "-q"]);
    missing.expect_code(2);
    assert!(missing.stderr().starts_with("rollover: "), "{missing}");
}

#[test]
fn color_only_when_asked_or_on_a_terminal() {
    let wd = Workdir::new("color");
    wd.create_jsonl(
        "in.jsonl",
        &[json!({"messages": [{"role": "user", "content": "hi"}]})],
    );
    let plain = run_80(&wd, &["convert", "in.jsonl", "-o", "h1"]);
    assert!(!plain.stdout().contains('\u{1b}'), "{plain}");
    let always = run_80(
        &wd,
        &["--color", "always", "convert", "in.jsonl", "-o", "h2"],
    );
    assert!(
        always.stdout().contains("\u{1b}[32mconverted 1\u{1b}[0m"),
        "{always}"
    );
    let never = run_80(
        &wd,
        &["convert", "in.jsonl", "-o", "h3", "--color", "never"],
    );
    assert!(!never.stdout().contains('\u{1b}'), "{never}");
}

#[test]
fn version_names_the_target_codex_release() {
    let wd = Workdir::new("version");
    let run = wd.run(&["--version"]);
    run.expect_code(0);
    assert_eq!(
        run.stdout(),
        format!(
            "rollover {} (target Codex 0.169.0; tested with Codex 0.169.1, 0.171.0)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// `convert --help` as users read it: every flag with its default, and the exit codes.
#[test]
fn convert_help_says_every_flag_and_its_default() {
    let wd = Workdir::new("convert_help");
    let run = wd.run(&["convert", "--help"]);
    run.expect_code(0);
    insta::assert_snapshot!(run.stdout());
}

/// Each command lists its own exit codes (`commands_speak` checks which and what they mean):
/// convert all seven, the top page every code with the commands that return it.
#[test]
fn every_command_help_lists_the_exit_codes() {
    let wd = Workdir::new("help_exit_codes");
    // (command, whether it can stop on a signal with its reports marked: exit 143)
    for (command, stops) in [
        (&[][..], true),
        (&["convert"], true),
        (&["validate"], false),
        (&["rules", "check"], false),
        (&["rules", "policies"], false),
        (&["completions"], false),
        (&["man"], false),
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let run = wd.run(&args);
        run.expect_code(0);
        let out = run.stdout();
        assert!(out.contains("Exit codes:\n  0    "), "{args:?}:\n{out}");
        assert_eq!(out.contains("\n  143  "), stops, "{args:?}:\n{out}");
    }
}

#[test]
fn help_tells_the_scheduling_filtering_and_confinement_flags() {
    let wd = Workdir::new("help_new_flags");
    for command in ["convert", "audit"] {
        let run = wd.run(&[command, "--help"]);
        run.expect_code(0);
        let out = run.stdout();
        for expected in [
            "--wait <SECONDS>",
            "as `flock -w` does, instead of exiting 3 at once",
            "--keep-runs <N>",
            "never this run's, nor the one OUT/rollover/latest points at",
            "--glob <GLOB>",
            "matched against the path below the INPUT folder",
            "--exclude <GLOB>",
            "do not enter the folders matching it",
            "an absolute or climbing name, or an empty one, is refused",
            "written as a folder named `%2E%2E`",
        ] {
            assert!(
                out.contains(expected),
                "{command} --help: {expected}\n{out}"
            );
        }
    }
    let run = wd.run(&["report", "merge", "--help"]);
    run.expect_code(0);
    assert!(run.stdout().contains("--wait <SECONDS>"), "{run}");
}

#[test]
fn completions_and_man_page_come_from_the_command_line_definition() {
    let wd = Workdir::new("completions_man");
    let bash = wd.run(&["completions", "bash"]);
    bash.expect_code(0);
    assert!(bash.stdout().contains("--max-quarantine-rate"), "{bash}");
    let zsh = wd.run(&["completions", "zsh"]);
    zsh.expect_code(0);
    assert!(zsh.stdout().starts_with("#compdef rollover"), "{zsh}");
    let man = wd.run(&["man"]);
    man.expect_code(0);
    assert!(man.stdout().contains(".TH rollover 1"), "{man}");
    assert!(man.stdout().contains("completions"), "{man}");
}

/// The copy `--force` kept of the file at `relative` (`rollover/replaced/RUN/<relative>`).
fn replaced_copy(home: &std::path::Path, relative: &str) -> std::path::PathBuf {
    let runs = std::fs::read_dir(home.join("rollover/replaced")).expect("replaced");
    let mut copies: Vec<std::path::PathBuf> = runs
        .map(|run| run.expect("entry").path().join(relative))
        .filter(|copy| copy.exists())
        .collect();
    assert_eq!(copies.len(), 1, "one copy of {relative}");
    copies.remove(0)
}
