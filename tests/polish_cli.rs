//! The command line's polish: hints that name what to do next (the record
//! nearest a line `explain` was asked for, the values a rule policy takes), one meaning per
//! flag, and a terminal whose numbers read alike on stderr and in the summary.

use crate::common::Workdir;

/// A ShareGPT file holding a JSON array of two conversations, one element over several lines.
const SHAREGPT_ARRAY: &str = r#"[
  {"conversations": [
    {"from": "human", "value": "What is two and two?"},
    {"from": "gpt", "value": "Four."}
  ]},
  {"conversations": [
    {"from": "human", "value": "And three and three?"},
    {"from": "gpt", "value": "Six."}
  ]}
]
"#;

/// Line 4 is inside element 0 (it starts on line 2): the error names that start and the
/// command that explains it, rather than only what is not there.
#[test]
fn explain_on_a_line_inside_a_json_array_names_the_nearest_record_start() {
    let dir = Workdir::new("polish-explain-nearest");
    dir.create("chats.json", SHAREGPT_ARRAY);
    let inside = dir.run(&["explain", "chats.json:4"]);
    assert_ne!(inside.code(), Some(0), "{}", inside.stdout());
    insta::assert_snapshot!(inside.stderr());
    let asked = dir.run(&["explain", "chats.json:2"]);
    asked.expect_code(0);
    let later = dir.run(&["explain", "chats.json:7"]);
    assert!(
        later.stderr().contains(
            "the nearest record starts on line 6 (element 1): `rollover explain chats.json:6`"
        ),
        "{}",
        later.stderr()
    );
}

/// A policy given a value of the wrong type names the values it takes.
#[test]
fn a_policy_of_the_wrong_type_names_its_allowed_values() {
    let dir = Workdir::new("polish-policy-type");
    dir.create("mine.toml", "[policy]\nreused_call_id = 3\n");
    let check = dir.run(&["rules", "check", "mine.toml"]);
    assert_ne!(check.code(), Some(0), "{}", check.stdout());
    let said = format!("{}{}", check.stdout(), check.stderr());
    assert!(said.contains("rename | quarantine"), "{said}");
    insta::assert_snapshot!(said);
}

/// `rules policies` warns that keep and omit_detail leave an image Codex will not load.
#[test]
fn rules_policies_says_omit_detail_keeps_what_codex_will_not_load() {
    let dir = Workdir::new("polish-policies-images");
    let run = dir.run(&["rules", "policies"]);
    run.expect_code(0);
    let out = run.stdout();
    let block = |key: &str| {
        let start = out.find(&format!("\n{key} = ")).unwrap();
        out[start..].lines().take(3).collect::<Vec<_>>().join("\n")
    };
    insta::assert_snapshot!(format!(
        "{}\n{}",
        block("remote_image"),
        block("undecodable_image")
    ));
}

/// The built-in rule file says it too, beside the two keys.
#[test]
fn default_rules_say_omit_detail_keeps_what_codex_will_not_load() {
    let default = include_str!("../rules/default.toml");
    for key in ["remote_image = ", "undecodable_image = "] {
        let line = default.lines().find(|l| l.starts_with(key)).unwrap();
        assert!(line.contains("omit_detail leave"), "{line}");
    }
}

const GOOD: &str = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"hello\"}]}\n";

/// The lines of `text` that carry `what`.
fn lines_with<'a>(text: &'a str, what: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(what)).collect()
}

#[test]
fn stderr_the_summary_and_the_reports_spell_a_damaged_place_alike() {
    let wd = Workdir::new("polish_damage_place");
    // A zstd file cut in half: damage past byte 1,000, where grouped and plain numbers differ.
    // Records that do not compress away, more than a zstd block (128 KiB) of them, so that
    // whole blocks are read before the cut.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut plain = String::new();
    for _ in 0..4000 {
        let text: String = (0..60)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b'a' + (state % 26) as u8)
            })
            .collect();
        plain.push_str(&GOOD.replace("hello", &text));
    }
    let compressed = zstd::stream::encode_all(plain.as_bytes(), 1).unwrap();
    wd.create("in.jsonl.zst", &compressed[..compressed.len() * 3 / 4]);
    let run = wd.run(&["convert", "in.jsonl.zst", "--out", "home"]);
    run.expect_code(1);
    let home = wd.path("home");
    let summary: serde_json::Value = serde_json::from_slice(
        &std::fs::read(crate::common::run_folder(&home).join("summary.json")).unwrap(),
    )
    .unwrap();
    let d = &summary["damaged_files"][0];
    let byte = d["byte_offset"].as_u64().unwrap();
    assert!(byte >= 1000, "{d}");
    let at = format!(
        "in.jsonl.zst:{} (byte {byte}), compressed byte {}",
        d["line"], d["compressed_offset"]
    );
    let reason = format!(": {}", d["message"].as_str().unwrap());
    let (err, out) = (run.stderr(), run.stdout());
    let stderr = lines_with(&err, &at);
    assert_eq!(stderr.len(), 1, "{at}\n{err}");
    assert!(
        stderr[0].starts_with(&format!("rollover: {at}{reason}")),
        "{}",
        stderr[0]
    );
    // The summary's entry, its wrapped lines joined again.
    let terminal: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("  damaged "))
        .enumerate()
        .take_while(|(i, l)| *i == 0 || l.starts_with("               "))
        .map(|(_, l)| l.trim())
        .collect();
    assert_eq!(
        terminal.join(" "),
        format!("damaged      {at}{reason}"),
        "{out}"
    );
    assert!(!out.contains(&group(byte)), "{out}");
    let folder = crate::common::run_folder(&home);
    let md = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(
        md.replace('\\', "").contains(&format!("- {at}{reason}")),
        "{md}"
    );
    let html = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(html.contains(&format!("<li>{at}{reason}</li>")), "{html}");
}

/// `1234567` as counts are written: `1,234,567`.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn an_incremental_run_counts_the_files_it_read_apart_from_the_unchanged() {
    let wd = Workdir::new("polish_incremental_counts");
    wd.create("in/a.jsonl", GOOD);
    wd.create("in/b.jsonl", GOOD);
    wd.create("one/c.jsonl", GOOD);
    let files = |run: &crate::common::Run| -> String {
        let out = run.stdout();
        let mut lines = out.lines().skip_while(|l| !l.starts_with("  files "));
        let mut text = vec![lines.next().unwrap_or_default().to_string()];
        text.extend(
            lines
                .take_while(|l| l.starts_with("     "))
                .map(str::to_string),
        );
        text.join("\n")
    };
    let first = wd.run(&["convert", "in", "--out", "home"]);
    first.expect_code(0);
    assert_eq!(
        files(&first),
        "  files        2 input files: 170 B on disk, 168 B decompressed"
    );

    let nothing = wd.run(&["convert", "in", "--out", "home"]);
    nothing.expect_code(0);
    assert_eq!(
        files(&nothing),
        "  files        2 input files, all unchanged since the manifest recorded them: none read"
    );
    assert!(
        !nothing.stdout().contains("0 B on disk"),
        "{}",
        nothing.stdout()
    );
    assert!(
        !nothing.stderr().contains("0 input files"),
        "{}",
        nothing.stderr()
    );

    wd.create("in/b.jsonl", format!("{GOOD}{GOOD}"));
    let some = wd.run(&["convert", "in", "--out", "home"]);
    some.expect_code(0);
    assert_eq!(
        files(&some),
        "  files        2 input files: read 1, 170 B on disk, 168 B decompressed,\n               1 unchanged since the manifest recorded it"
    );
    assert!(
        some.stderr()
            .contains("rollover: reading 1 file, 170 B on disk"),
        "{}",
        some.stderr()
    );

    wd.run(&["convert", "one", "--out", "single"])
        .expect_code(0);
    let single = wd.run(&["convert", "one", "--out", "single"]);
    assert_eq!(
        files(&single),
        "  files        1 input file, unchanged since the manifest recorded it: not read"
    );
}

/// What a terminal shows once `rollover args` has run in it with `failpoint` armed: the
/// pseudo-terminal's bytes (the progress bar drawn and cleared by escape sequences) rendered by
/// a terminal emulator, 400 rows so that nothing scrolls away.
fn screen_after(wd: &Workdir, args: &[&str], failpoint: &str) -> String {
    let bin = env!("CARGO_BIN_EXE_rollover");
    let command = format!("stty rows 400 cols 100; {bin} {}", args.join(" "));
    let output = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(wd.root())
        .env("TERM", "xterm")
        .env("ROLLOVER_FAILPOINT", failpoint)
        .env_remove("NO_COLOR")
        .output()
        .expect("run `script` (util-linux) to give rollover a terminal");
    let mut parser = vt100::Parser::new(400, 100, 0);
    parser.process(&output.stdout);
    parser.screen().contents()
}

#[test]
fn after_ctrl_c_no_progress_line_is_left_above_the_summary() {
    let wd = Workdir::new("polish_ctrl_c_screen");
    wd.create("in.jsonl", GOOD.repeat(20_000));
    let screen = screen_after(
        &wd,
        &["convert", "in.jsonl", "--out", "home"],
        "sigint-after:2000",
    );
    assert!(
        screen.contains("rollover: SIGINT: finishing the batch in flight"),
        "{screen}"
    );
    assert!(screen.contains("  interrupted  "), "{screen}");
    // The bar's two lines: `⠁ [00:00:01] ████░░ ETA 2s` and `1.25 MiB/3.2 MiB on disk, ...`.
    for line in screen.lines() {
        assert!(
            !line.contains(" ETA "),
            "a progress line left on the screen:\n{screen}"
        );
        assert!(
            !(line.contains("B/") && line.contains(" on disk, ")),
            "a progress line left on the screen:\n{screen}"
        );
    }
}

#[test]
fn follow_is_for_the_walk_and_a_symlinked_sessions_folder_needs_its_own_flag() {
    let wd = Workdir::new("polish_follow_split");
    wd.create("in/a.jsonl", GOOD);
    wd.create("elsewhere/b.jsonl", GOOD.replace("hi", "linked"));
    std::os::unix::fs::symlink(wd.path("elsewhere/b.jsonl"), wd.path("in/b.jsonl")).unwrap();
    std::fs::create_dir_all(wd.path("disk2/sessions")).unwrap();
    std::fs::create_dir_all(wd.path("home")).unwrap();
    std::os::unix::fs::symlink(wd.path("disk2/sessions"), wd.path("home/sessions")).unwrap();

    // --follow follows the input's symlink, and does not write through the output's.
    let refused = wd.run(&["convert", "in", "--out", "home", "--follow"]);
    refused.expect_code(2);
    let err = refused.stderr();
    assert!(err.contains("home/sessions is a symlink to "), "{err}");
    assert!(err.contains("only with --write-through-links"), "{err}");
    assert!(crate::common::files_below(&wd.path("disk2"), &wd.path("disk2")).is_empty());

    // --write-through-links writes through it, says so, and does not follow the input's.
    let through = wd.run(&["convert", "in", "--out", "home", "--write-through-links"]);
    through.expect_code(0);
    assert!(
        through
            .stderr()
            .contains("writing through it (--write-through-links)"),
        "{}",
        through.stderr()
    );
    assert!(
        through
            .stderr()
            .contains("skipped 1 symlink (--follow follows them)"),
        "{}",
        through.stderr()
    );
    assert_eq!(
        crate::common::files_below(&wd.path("disk2"), &wd.path("disk2")).len(),
        1
    );

    // Both: the linked input is read too, into the linked folder.
    let both = wd.run(&[
        "convert",
        "in",
        "--out",
        "home",
        "--follow",
        "--write-through-links",
    ]);
    both.expect_code(0);
    assert_eq!(
        crate::common::files_below(&wd.path("disk2"), &wd.path("disk2")).len(),
        2
    );

    // Each flag's help says what it is for and names the other.
    let help = wd.run(&["convert", "--help"]).stdout();
    let follow = help.split("      --follow\n").nth(1).unwrap();
    assert!(
        follow.contains("input folder") && follow.contains("--write-through-links"),
        "{help}"
    );
    let through = help.split("      --write-through-links\n").nth(1).unwrap();
    assert!(
        through.contains("OUT/sessions") && through.contains("stops the run"),
        "{help}"
    );
}

/// The first 8 digits of the rules fingerprint of the rule set named `names` (as the home kept
/// it in `rollover/rules-FINGERPRINT.json`).
fn kept_rule_set(home: &std::path::Path, names: &[&str]) -> String {
    for entry in std::fs::read_dir(home.join("rollover")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        let Some(fingerprint) = name
            .strip_prefix("rules-")
            .and_then(|n| n.strip_suffix(".json"))
        else {
            continue;
        };
        let kept: serde_json::Value =
            serde_json::from_slice(&std::fs::read(home.join("rollover").join(&name)).unwrap())
                .unwrap();
        let files: Vec<&str> = kept["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        if files == names {
            return fingerprint[..8].to_string();
        }
    }
    panic!("no kept rule set {names:?}");
}

#[test]
fn sessions_left_by_a_rule_change_are_named_with_the_rules_that_wrote_them() {
    let wd = Workdir::new("polish_left_by_rules");
    wd.create(
        "in/chats.jsonl",
        format!("{GOOD}{}\n", r#"{"messages":[{"role":"user","content":"do a bad thing"},{"role":"assistant","content":null,"refusal":"I can't help with that."}]}"#),
    );
    wd.create("strict.toml", "[policy]\nrefusal = \"quarantine\"\n");
    wd.run(&["convert", "in", "--out", "home"]).expect_code(0);
    // The stricter rules quarantine the refusal: its session, written by the default rules, is
    // left as they made it.
    let strict: Vec<&str> = "convert in --out home --rules default --rules strict.toml"
        .split(' ')
        .collect();
    let run = wd.run(&strict);
    run.expect_code(1);
    let home = wd.path("home");
    let old = format!("rules default ({})", kept_rule_set(&home, &["default"]));
    let summary: serde_json::Value = serde_json::from_slice(
        &std::fs::read(crate::common::run_folder(&home).join("summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["sessions_left"], 1);
    assert_eq!(
        summary["sessions_left_rules"],
        serde_json::json!({ &old: 1 })
    );
    let listed = summary["sessions_left_listed"][0].as_str().unwrap();
    assert!(
        listed.starts_with("sessions/") && listed.ends_with(&format!(".jsonl (written by {old})")),
        "{listed}"
    );
    let out = run.stdout().replace("\n               ", " ");
    assert!(
        out.contains(&format!("  left         1 written by {old}, each as those rules made it; --prune removes them, and a record that comes back is converted again with this run's rules\n")),
        "{out}"
    );
    let folder = crate::common::run_folder(&home);
    let md = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(
        md.replace('\\', "").contains("Sessions left, by the rule set that wrote them: Each holds what the rules that wrote it made. --prune removes them; a record that comes back is converted again with this run's rules."),
        "{md}"
    );
    assert!(md.contains(&format!("- `{old}: 1 session`")), "{md}");
    assert!(md.contains(&format!("(written by {old})`")), "{md}");
    let html = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(
        html.contains(&format!("<code>{old}: 1 session</code>")),
        "{html}"
    );
    assert!(
        html.contains("<p>Each holds what the rules that wrote it made. --prune removes them;"),
        "{html}"
    );

    let status = wd.run(&["status", "home", "--sessions"]);
    let text = status.stdout().replace("\n               ", " ");
    assert!(
        text.contains(&format!(
            "  left         1 written by {old}, each as those rules made it; --prune removes them"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "(from in/chats.jsonl, left: its record is gone; written by {old})"
        )),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&wd.run(&["status", "home", "--json"]).output.stdout).unwrap();
    assert_eq!(json["left_by_rules"], serde_json::json!({ &old: 1 }));

    // The input gone: its other session, written by this run's rules, is left too, and named so.
    std::fs::remove_file(wd.path("in/chats.jsonl")).unwrap();
    wd.create("in/other.jsonl", GOOD.replace("hi", "other"));
    let gone = wd.run(&strict);
    let now = format!(
        "this run's rules, default + strict.toml ({})",
        kept_rule_set(&home, &["default", "strict.toml"])
    );
    let summary: serde_json::Value = serde_json::from_slice(
        &std::fs::read(crate::common::run_folder(&home).join("summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        summary["sessions_left_rules"],
        serde_json::json!({ &old: 1, &now: 1 }),
        "{}",
        gone.stdout()
    );
}
