//! Versions of one conversation (issue 56, items 1 and 2): read more than once, in one run or
//! across runs, the newest wins and no run writes an older one over it; a planted file under a
//! victim's id is a conflict, never a replacement; two conversations under one id in one
//! export are both kept; a file written again by another tool keeps its sessions.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde_json::{json, Value};

use crate::common::Workdir;

/// A ChatGPT conversation `id` of `turns` user/assistant pairs, `texts` replacing the text of
/// a node (`u0`, `a1`, ...), created at `create` and updated at `update`.
fn chatgpt(id: &str, turns: usize, texts: &[(&str, &str)], update: i64) -> Value {
    let create = 1_717_200_000i64;
    let mut mapping = serde_json::Map::new();
    mapping.insert("root".into(), json!({"id": "root", "children": []}));
    let mut previous = "root".to_string();
    for turn in 0..turns {
        for role in ["user", "assistant"] {
            let node = format!("{}{turn}", &role[..1]);
            let text = texts
                .iter()
                .find(|(n, _)| *n == node)
                .map_or_else(|| format!("{role} turn {turn}"), |(_, t)| t.to_string());
            let time = create + turn as i64 * 10 + i64::from(role == "assistant");
            mapping.insert(
                node.clone(),
                json!({"id": node, "parent": previous, "children": [], "message": {
                    "id": format!("m{node}"), "author": {"role": role}, "create_time": time,
                    "content": {"content_type": "text", "parts": [text]}}}),
            );
            mapping[&previous]["children"]
                .as_array_mut()
                .expect("children")
                .push(json!(node));
            previous = node;
        }
    }
    json!({"id": id, "title": format!("t {id}"), "create_time": create, "update_time": update,
           "current_node": previous, "mapping": mapping})
}

fn export(wd: &Workdir, path: &str, conversations: &[Value]) {
    wd.create(
        path,
        serde_json::to_vec_pretty(&Value::Array(conversations.to_vec())).expect("JSON"),
    );
}

/// Every session of the home: file name → its text.
fn sessions(home: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for entry in walkdir::WalkDir::new(home.join("sessions"))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        found.insert(name, fs::read_to_string(entry.path()).expect("read"));
    }
    found
}

fn only(home: &Path) -> String {
    let all = sessions(home);
    assert_eq!(all.len(), 1, "one session: {:?}", all.keys());
    all.into_values().next().expect("one")
}

fn summary(home: &Path) -> Value {
    let bytes = fs::read(home.join("rollover/latest/summary.json")).expect("summary");
    serde_json::from_slice(&bytes).expect("JSON")
}

#[test]
fn the_newer_export_wins_in_either_order_and_no_later_run_rolls_it_back() {
    // The walk reads `2024-06-01` first; named the other way round, it reads the newer first.
    for (older, newer) in [
        ("2024-06-01", "2024-06-02"),
        ("b-2024-06-01", "a-2024-06-02"),
    ] {
        let wd = Workdir::new("versions");
        export(
            &wd,
            &format!("exports/{older}/conversations.json"),
            &[chatgpt("c1", 2, &[], 1_717_200_020)],
        );
        export(
            &wd,
            &format!("exports/{newer}/conversations.json"),
            &[chatgpt(
                "c1",
                3,
                &[("a2", "the newest turn")],
                1_717_300_000,
            )],
        );
        let home = wd.convert("exports", "home", &[], 0);
        assert!(
            only(&home.root).contains("the newest turn"),
            "{older}/{newer}"
        );
        let run = summary(&home.root);
        assert_eq!(run["sessions_new"], 1);
        assert_eq!(run["sessions_older"].as_array().map(Vec::len), Some(1));
        assert_eq!(run["sessions_duplicate"], 0);
        assert!(run["sessions_older"][0]["source"]
            .as_str()
            .is_some_and(|s| s.contains(older)));

        // The older export alone again, every file read (`--full`), then with a rule change:
        // the session keeps the newest turn, and says why.
        fs::rename(
            wd.path(&format!("exports/{newer}")),
            wd.path(&format!("aside-{newer}")),
        )
        .expect("move the newer aside");
        let home = wd.convert("exports", "home", &["--full"], 0);
        assert!(only(&home.root).contains("the newest turn"));
        assert_eq!(
            summary(&home.root)["sessions_older"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
        let home = wd.convert("exports", "home", &["--cwd", "/srv/elsewhere"], 0);
        assert!(only(&home.root).contains("the newest turn"));
        assert_eq!(summary(&home.root)["sessions_updated"], 0);

        // Both again after a rule change: still the newest.
        fs::rename(
            wd.path(&format!("aside-{newer}")),
            wd.path(&format!("exports/{newer}")),
        )
        .expect("move it back");
        let home = wd.convert("exports", "home", &["--full", "--cwd", "/srv/x"], 0);
        let text = only(&home.root);
        assert!(
            text.contains("the newest turn") && text.contains("/srv/x"),
            "{text}"
        );
    }
}

#[test]
fn an_older_export_seen_only_after_the_newer_one_is_skipped_as_older() {
    let wd = Workdir::new("versions-late");
    export(
        &wd,
        "exports/new/conversations.json",
        &[chatgpt(
            "c1",
            3,
            &[("a2", "the newest turn")],
            1_717_300_000,
        )],
    );
    wd.convert("exports", "home", &[], 0);
    // The newer export removed: a plain run reads nothing, the session stays.
    export(
        &wd,
        "exports/old/conversations.json",
        &[chatgpt("c1", 2, &[], 1_717_200_020)],
    );
    let home = wd.convert("exports", "home", &[], 0);
    assert!(only(&home.root).contains("the newest turn"));
    let run = summary(&home.root);
    assert_eq!(run["sessions_older"].as_array().map(Vec::len), Some(1));
    assert_eq!(run["sessions_updated"], 0);
}

#[test]
fn a_planted_file_under_a_victims_id_is_a_conflict_and_the_victim_survives() {
    let wd = Workdir::new("planted");
    export(
        &wd,
        "in/a/conversations.json",
        &[chatgpt(
            "victim",
            2,
            &[("u0", "the victim's words")],
            1_717_200_020,
        )],
    );
    wd.convert("in", "home", &[], 0);
    // Same id, same create_time, a later update_time, other content.
    export(
        &wd,
        "in/b/conversations.json",
        &[chatgpt("victim", 3, &[("u0", "PLANTED")], 1_717_999_999)],
    );
    let home = wd.convert("in", "home", &[], 1);
    let text = only(&home.root);
    assert!(text.contains("the victim's words") && !text.contains("PLANTED"));
    let run = summary(&home.root);
    let conflict = &run["sessions_conflict"][0];
    assert!(conflict["source"]
        .as_str()
        .is_some_and(|s| s.contains("in/b/conversations.json")));
    assert!(conflict["other"]
        .as_str()
        .is_some_and(|s| s.ends_with("in/a/conversations.json")));
    let terminal = home.run.stdout();
    assert!(terminal.contains("conflict"), "{terminal}");
    for report in ["report.md", "report.html"] {
        let text = fs::read_to_string(home.root.join("rollover/latest").join(report))
            .expect("report")
            .replace("&#x2f;", "/");
        assert!(text.contains("in/b/conversations.json"), "{report}");
    }
    // Still pending: the next run says so again; --force writes it, keeping a copy.
    wd.convert("in", "home", &[], 1);
    let home = wd.convert("in", "home", &["--force"], 0);
    assert!(only(&home.root).contains("PLANTED"));
    let copies: Vec<_> = walkdir::WalkDir::new(home.root.join("rollover/replaced"))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .collect();
    assert_eq!(copies.len(), 1);
    let copy = fs::read_to_string(copies[0].path()).expect("copy");
    assert!(copy.contains("the victim's words"));
}

#[test]
fn two_conversations_under_one_id_in_one_export_are_both_kept() {
    let wd = Workdir::new("one-id-twice");
    export(
        &wd,
        "in/conversations.json",
        &[
            chatgpt("twin", 1, &[("u0", "first twin")], 1_717_200_020),
            chatgpt("twin", 1, &[("u0", "second twin")], 1_717_200_020),
        ],
    );
    let home = wd.convert("in", "home", &[], 0);
    let all = sessions(&home.root);
    assert_eq!(all.len(), 2, "{:?}", all.keys());
    assert!(all.values().any(|t| t.contains("first twin")));
    assert!(all.values().any(|t| t.contains("second twin")));
    let run = summary(&home.root);
    assert_eq!(run["sessions_new"], 2);
    assert_eq!(run["sessions_split"].as_array().map(Vec::len), Some(1));
    // Each conversation line names its own session.
    let lines =
        fs::read_to_string(home.root.join("rollover/latest/conversations.jsonl")).expect("lines");
    let paths: Vec<String> = lines
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("line")["path"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(paths.len(), 2);
    assert_ne!(paths[0], paths[1]);
    // A second run converts nothing new and keeps both.
    let home = wd.convert("in", "home", &["--full"], 0);
    assert_eq!(sessions(&home.root).len(), 2);
    assert_eq!(summary(&home.root)["rollouts_unchanged"], 2);
}

/// A Claude Code line of session `S`.
fn claude(uuid: &str, parent: Option<&str>, role: &str, text: &str, second: u32) -> Value {
    json!({
        "type": role, "uuid": uuid, "parentUuid": parent,
        "sessionId": "11111111-2222-4333-8444-555555555555",
        "cwd": "/home/me/proj", "version": "2.1.38", "isSidechain": false,
        "timestamp": format!("2026-02-10T10:00:{second:02}.000Z"),
        "message": {"role": role, "content": text},
    })
}

#[test]
fn a_shorter_backup_of_a_claude_code_session_sorted_first_does_not_roll_it_back() {
    let wd = Workdir::new("claude-backup");
    let lines = [
        claude("u1", None, "user", "first question", 1),
        claude("a1", Some("u1"), "assistant", "first answer", 2),
        claude("u2", Some("a1"), "user", "second question", 3),
        claude("a2", Some("u2"), "assistant", "the live answer", 4),
    ];
    // `a-backup/` sorts before `b-live/`.
    wd.create_jsonl("projects/a-backup/s.jsonl", &lines[..2]);
    wd.create_jsonl("projects/b-live/s.jsonl", &lines);
    let home = wd.convert("projects", "home", &[], 0);
    assert!(only(&home.root).contains("the live answer"));
    let home = wd.convert("projects", "home", &["--full", "--cwd", "/srv/p"], 0);
    assert!(only(&home.root).contains("the live answer"));
    assert_eq!(
        summary(&home.root)["sessions_older"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
}

#[test]
fn a_file_written_again_by_another_tool_keeps_its_sessions() {
    let wd = Workdir::new("reserialised");
    let records: Vec<Value> = (0..20)
        .map(|i| {
            json!({"id": format!("r{i}"), "temperature": 0.5, "messages": [
                {"role": "user", "content": format!("question {i} é")},
                {"role": "assistant", "content": "answer"},
            ]})
        })
        .collect();
    wd.create_jsonl("in/a.jsonl", &records);
    let home = wd.convert("in", "home", &[], 0);
    let before: Vec<String> = sessions(&home.root).into_keys().collect();
    assert_eq!(before.len(), 20);
    // The same values, keys reordered, numbers and escapes spelt otherwise, pretty-printed
    // into one JSON document.
    let mut text = String::from("[\n");
    for (i, record) in records.iter().enumerate() {
        let messages = serde_json::to_string_pretty(&record["messages"]).expect("JSON");
        let messages = messages.replace('é', "\\u00e9");
        text.push_str(&format!(
            "  {{ \"messages\": {messages},\n    \"temperature\": 5e-1, \"id\": \"r{i}\" }}{}\n",
            if i + 1 < records.len() { "," } else { "" }
        ));
    }
    text.push(']');
    fs::remove_file(wd.path("in/a.jsonl")).expect("remove");
    wd.create("in/a.json", text);
    let home = wd.convert("in", "home", &[], 0);
    let after: Vec<String> = sessions(&home.root).into_keys().collect();
    assert_eq!(after, before);
    let run = summary(&home.root);
    assert_eq!(run["sessions_new"], 0);
    assert_eq!(run["rollouts_unchanged"], 20);
}
