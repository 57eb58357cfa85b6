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
