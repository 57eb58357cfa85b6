//! The command line's polish (issue 62, part 2): hints that name what to do next (the record
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
