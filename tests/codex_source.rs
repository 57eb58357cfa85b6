//! Codex's own rollouts as a source (issue 60), through the binary: one test per generation
//! (pre-envelope, legacy envelope before and after `base_instructions`, prompts only in
//! events, paginated, and the real rollouts of `../shared/corpora/codex-rollouts`), each
//! showing the model-visible items equal between the source and the output, counted by type
//! and role and compared one by one, and the session id kept. Then re-homing (`--cwd`, a
//! session read again never a second one), a Codex home as input, the lines dropped by rule,
//! and `validate` on each generation.
//!
//! What the source holds for the model is read here independently of the reader
//! ([`expected`]): a pre-envelope file's bare items, an envelope file's `response_item`
//! payloads and `compacted` lines, less what Codex itself never sends (`ghost_snapshot`) and
//! the turns a `thread_rolled_back` event takes back, plus, in a file whose prompts exist only
//! as `user_message` events, those prompts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::{self, read_jsonl, Rollout, Workdir};

pub const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/codex");
const CORPORA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/corpora/codex-rollouts"
);

pub const PRE_ENVELOPE: &str =
    "rollout-2025-08-13T15-22-56-0198a3f2-6a1e-7c3d-9b2a-5e4f3c2b1a01.jsonl";
pub const LEGACY_INSTRUCTIONS: &str =
    "rollout-2025-09-22T09-14-03-0199b5c4-2d3e-7f10-8a9b-0c1d2e3f4a02.jsonl";
pub const EVENT_PROMPTS: &str =
    "rollout-2025-10-30T17-45-00-0199c7e6-4f50-7a21-9c3d-1e2f3a4b5c03.jsonl";
pub const BASE_INSTRUCTIONS: &str =
    "rollout-2026-03-02T08-00-00-019a1b2c-3d4e-7f50-8612-7a8b9c0d1e04.jsonl";
pub const PAGINATED: &str =
    "paginated/rollout-2026-03-02T08-00-00-019a1b2c-3d4e-7f50-8612-7a8b9c0d1e04.jsonl";

/// Every fixture, by generation.
pub fn fixtures() -> Vec<PathBuf> {
    [
        PRE_ENVELOPE,
        LEGACY_INSTRUCTIONS,
        EVENT_PROMPTS,
        BASE_INSTRUCTIONS,
        PAGINATED,
    ]
    .iter()
    .map(|name| Path::new(FIXTURES).join(name))
    .collect()
}

/// The real rollouts of the shared corpora.
pub fn corpora() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = walkdir::WalkDir::new(CORPORA)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| e.into_path())
        .collect();
    found.sort();
    found
}

/// What a source rollout holds for the model, read by the test's own rules.
#[derive(Debug)]
pub struct Expected {
    pub id: String,
    pub base_instructions: Option<String>,
    /// Response items, and `compacted` lines as `{"compacted": payload}`, in order.
    pub items: Vec<Value>,
}

fn is_contextual(item: &Value) -> bool {
    item["content"].as_array().is_some_and(|parts| {
        parts.iter().any(|p| {
            p["text"].as_str().is_some_and(|t| {
                let t = t.trim_start();
                t.starts_with("<environment_context>")
                    || t.starts_with("# AGENTS.md instructions for ")
            })
        })
    })
}

fn is_real_user(item: &Value) -> bool {
    item["type"] == "message" && item["role"] == "user" && !is_contextual(item)
}

/// The source's model-visible items.
pub fn expected(path: &Path) -> Expected {
    let lines = read_jsonl(path);
    let first = &lines[0];
    if first.get("payload").is_none() {
        // Pre-envelope: a header, then bare items.
        let items = lines[1..]
            .iter()
            .filter(|l| l["type"].is_string() && l["type"] != "ghost_snapshot")
            .cloned()
            .collect();
        return Expected {
            id: first["id"].as_str().unwrap().to_string(),
            base_instructions: None,
            items,
        };
    }
    let meta = &first["payload"];
    let response_items = || {
        lines
            .iter()
            .filter(|l| l["type"] == "response_item")
            .map(|l| &l["payload"])
    };
    let prompts_in_events = !response_items().any(is_real_user);
    let mut items: Vec<Value> = Vec::new();
    for line in &lines[1..] {
        let payload = &line["payload"];
        match line["type"].as_str() {
            // The user took back the last turns: from the n-th last real prompt on.
            Some("event_msg") if payload["type"] == "thread_rolled_back" => {
                let n = payload["num_turns"].as_u64().unwrap() as usize;
                let starts: Vec<usize> = (0..items.len())
                    .filter(|&i| is_real_user(&items[i]))
                    .collect();
                let from = starts.len().checked_sub(n).map_or(0, |k| starts[k]);
                items.truncate(from);
            }
            Some("response_item") if payload["type"] != "ghost_snapshot" => {
                items.push(payload.clone())
            }
            Some("compacted") => items.push(json!({ "compacted": payload })),
            Some("event_msg") if prompts_in_events && payload["type"] == "user_message" => {
                let mut content = vec![json!({"type": "input_text", "text": payload["message"]})];
                for url in payload["images"].as_array().into_iter().flatten() {
                    content.push(json!({"type": "input_image", "image_url": url}));
                }
                items.push(json!({"type": "message", "role": "user", "content": content}));
            }
            _ => {}
        }
    }
    Expected {
        id: meta["id"].as_str().unwrap().to_string(),
        base_instructions: meta["base_instructions"]["text"]
            .as_str()
            .map(str::to_string),
        items,
    }
}

/// An output rollout's items, in the same form as [`expected`]'s.
pub fn written(rollout: &Rollout) -> Vec<Value> {
    rollout.lines[1..]
        .iter()
        .filter_map(|line| match line["type"].as_str() {
            Some("response_item") => Some(line["payload"].clone()),
            Some("compacted") => Some(json!({ "compacted": line["payload"] })),
            _ => None,
        })
        .collect()
}

/// Items counted by type and, for messages, role.
fn counts(items: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for item in items {
        let kind = match (item["type"].as_str(), item["role"].as_str()) {
            (Some(t), Some(r)) => format!("{t}:{r}"),
            (Some(t), None) => t.to_string(),
            (None, _) => "compacted".to_string(),
        };
        *counts.entry(kind).or_insert(0) += 1;
    }
    counts
}

/// Converts `source` alone and checks the one session it becomes: the same id (in the meta
/// and the file name), the same base instructions, the same items by type and role and one
/// by one, every real user and assistant message with its UI event, and `validate` passing.
fn converts_item_for_item(name: &str, source: &Path) -> (Workdir, common::Home, Rollout) {
    let wd = Workdir::new(name);
    let input = wd.path("in.jsonl");
    std::fs::copy(source, &input).unwrap();
    let home = wd.convert("in.jsonl", "home", &[], 0);
    let rollout = home.single_rollout();
    let want = expected(source);
    assert_eq!(
        rollout.meta()["id"],
        want.id,
        "{name}: the session id is kept"
    );
    assert_eq!(rollout.file_uuid(), want.id, "{name}");
    assert_eq!(
        rollout.meta()["base_instructions"]["text"].as_str(),
        want.base_instructions.as_deref(),
        "{name}"
    );
    let got = written(&rollout);
    assert_eq!(
        counts(&got),
        counts(&want.items),
        "{name}: items by type and role"
    );
    for (i, (ours, theirs)) in got.iter().zip(&want.items).enumerate() {
        assert_eq!(ours, theirs, "{name}: item #{i} differs");
    }
    let users = got.iter().filter(|i| is_real_user(i)).count();
    let assistants = got
        .iter()
        .filter(|i| i["type"] == "message" && i["role"] == "assistant")
        .count();
    let events = rollout.events();
    let count = |t: &str| events.iter().filter(|e| e["type"] == t).count();
    assert_eq!(
        count("user_message"),
        users,
        "{name}: one event a real prompt"
    );
    assert_eq!(count("agent_message"), assistants, "{name}");
    let conversation = &home.conversations()[0];
    assert_eq!(conversation["format"], "codex", "{name}");
    assert_eq!(conversation["source_id"], want.id, "{name}");
    wd.run(&["validate", "home/sessions"]).expect_code(0);
    (wd, home, rollout)
}

#[test]
fn a_pre_envelope_rollout_converts_item_for_item() {
    let (_wd, _home, rollout) = converts_item_for_item(
        "codex_pre_envelope",
        &Path::new(FIXTURES).join(PRE_ENVELOPE),
    );
    let meta = rollout.meta();
    // The header's facts: its start, the git checkout, and the cwd its context names.
    assert_eq!(meta["timestamp"], "2025-08-13T15:22:56.917Z");
    assert_eq!(meta["cwd"], "/home/dev/billing");
    assert_eq!(meta["git"]["branch"], "fix/rounding");
    assert_eq!(
        meta["git"]["commit_hash"],
        "4f2c9e1d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d"
    );
    assert_eq!(
        meta["git"]["repository_url"],
        "git@github.com:example/billing.git"
    );
}

#[test]
fn a_legacy_rollout_with_header_instructions_converts_item_for_item() {
    let (_wd, home, _) = converts_item_for_item(
        "codex_legacy_instructions",
        &Path::new(FIXTURES).join(LEGACY_INSTRUCTIONS),
    );
    // The header's instructions are the user's, already in the history as a message: not
    // repeated, and counted.
    let decisions = home.decisions();
    let rules: Vec<&str> = decisions
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["rule"].as_str())
        .collect();
    assert!(
        rules.contains(&"builtin.codex-user-instructions"),
        "{rules:?}"
    );
    // The turn the user took back (`thread_rolled_back`) is left out, its two items counted.
    let rolled_back = decisions
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["rule"] == "builtin.codex-rolled-back")
        .unwrap_or_else(|| panic!("{decisions:#}"));
    assert_eq!(rolled_back["count"], 2, "{rolled_back}");
}

#[test]
fn a_legacy_rollout_whose_prompts_are_only_events_converts_item_for_item() {
    let (_wd, home, rollout) = converts_item_for_item(
        "codex_event_prompts",
        &Path::new(FIXTURES).join(EVENT_PROMPTS),
    );
    let prompts: Vec<Value> = rollout
        .events()
        .into_iter()
        .filter(|e| e["type"] == "user_message")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(
        prompts,
        [
            json!("Rename the `blog` folder to `posts` and fix the links."),
            json!("Thanks. Is anything else linking to /blog?")
        ]
    );
    let decisions = home.decisions();
    let recovered = decisions
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["rule"] == "builtin.codex-event-prompt")
        .count();
    assert_eq!(recovered, 1, "{decisions:#}");
}

#[test]
fn a_legacy_rollout_with_base_instructions_converts_item_for_item() {
    let (_wd, _home, rollout) = converts_item_for_item(
        "codex_base_instructions",
        &Path::new(FIXTURES).join(BASE_INSTRUCTIONS),
    );
    // Hosted-tool items and compactions are kept as Codex wrote them.
    let items = rollout.items();
    let kinds: Vec<&str> = items.iter().filter_map(|i| i["type"].as_str()).collect();
    for kind in ["web_search_call", "image_generation_call"] {
        assert!(kinds.contains(&kind), "{kinds:?}");
    }
    assert!(!kinds.contains(&"ghost_snapshot"));
    let compacted: Vec<&Value> = rollout
        .lines
        .iter()
        .filter(|l| l["type"] == "compacted")
        .collect();
    assert_eq!(compacted.len(), 2);
    assert_eq!(
        compacted[0]["payload"]["replacement_history"][1]["type"],
        "compaction"
    );
}

#[test]
fn a_paginated_rollout_converts_item_for_item() {
    let (_wd, _home, rollout) =
        converts_item_for_item("codex_paginated", &Path::new(FIXTURES).join(PAGINATED));
    // Written in the legacy form Codex reads and migrates: no ordinals, no history mode.
    assert!(rollout.lines.iter().all(|l| l.get("ordinal").is_none()));
    assert!(rollout.meta().get("history_mode").is_none());
}

#[test]
fn real_codex_rollouts_convert_item_for_item() {
    let found = corpora();
    assert!(!found.is_empty(), "no rollout in {CORPORA}");
    for (n, source) in found.iter().enumerate() {
        converts_item_for_item(&format!("codex_corpora_{n}"), source);
    }
}

/// `--cwd` re-homes a session (its own folder kept as `source_cwd`); the same session read
/// again, into the same home or from a home rollover wrote, is the same session, never a
/// second one.
#[test]
fn rehoming_keeps_the_session_id_and_never_duplicates_it() {
    let wd = Workdir::new("codex_rehoming");
    let source = Path::new(FIXTURES).join(BASE_INSTRUCTIONS);
    std::fs::create_dir_all(wd.path("old")).unwrap();
    std::fs::copy(&source, wd.path(&format!("old/{BASE_INSTRUCTIONS}"))).unwrap();
    let id = expected(&source).id;
    let first = wd.convert("old", "home", &["--cwd", "/new/shop"], 0);
    let rollout = first.single_rollout();
    assert_eq!(rollout.meta()["id"], id);
    assert_eq!(rollout.meta()["cwd"], "/new/shop");
    assert_eq!(first.conversations()[0]["source_cwd"], "/work/shop");
    // Again, elsewhere: the same session file, rewritten, not a second one.
    let again = wd.convert("old", "home", &["--cwd", "/other"], 0);
    let rollouts = again.rollouts();
    assert_eq!(rollouts.len(), 1, "{rollouts:?}");
    assert_eq!(Rollout::read(&rollouts[0]).meta()["cwd"], "/other");
    // The home rollover wrote, read as a Codex home: the same id, the same items.
    let from_home = wd.convert("home", "home2", &[], 0);
    let back = from_home.single_rollout();
    assert_eq!(back.meta()["id"], id);
    assert_eq!(written(&back), written(&Rollout::read(&rollouts[0])));
}

/// A Codex home given as input is read for its `sessions/` and `archived_sessions/` (and
/// nothing else of it); a home inside an input is left alone unless `--from codex` says so.
#[test]
fn a_codex_home_is_read_for_its_live_and_archived_sessions() {
    let wd = Workdir::new("codex_home_input");
    let put = |relative: &str, name: &str| {
        let target = wd.path(relative);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(Path::new(FIXTURES).join(name), target).unwrap();
    };
    put(
        &format!("projects/.codex/sessions/2026/03/02/{BASE_INSTRUCTIONS}"),
        BASE_INSTRUCTIONS,
    );
    put(
        &format!("projects/.codex/archived_sessions/{EVENT_PROMPTS}"),
        EVENT_PROMPTS,
    );
    wd.create(
        "projects/.codex/history.jsonl",
        "{\"session_id\":\"x\",\"ts\":1,\"text\":\"hi\"}\n",
    );
    wd.create("projects/.codex/config.toml", "model = \"gpt-5\"\n");
    let home = wd.convert("projects/.codex", "out", &[], 0);
    assert_eq!(home.rollouts().len(), 2);
    assert!(home.quarantine().is_empty(), "{:?}", home.quarantine());
    // Inside an input, a home is not entered by default (here nothing else is left)...
    let skipped = wd.run(&["convert", "projects", "--out", "out2", "--hidden"]);
    skipped.expect_code(2);
    assert!(
        skipped
            .stderr()
            .contains("skipped projects/.codex: it is a Codex home"),
        "{skipped}"
    );
    // ... and is with --from codex.
    let read = wd.convert("projects", "out3", &["--hidden", "--from", "codex"], 0);
    assert_eq!(read.rollouts().len(), 2);
}

/// A rollout compressed with zstd (as `.jsonl.zst`), given alone or under a Codex home's
/// `archived_sessions/`, converts item for item as its plain text does.
#[test]
fn a_zstd_rollout_converts_as_its_plain_text() {
    let wd = Workdir::new("codex_zstd");
    let plain = Path::new(FIXTURES).join(BASE_INSTRUCTIONS);
    let text = std::fs::read(&plain).unwrap();
    let packed = zstd::stream::encode_all(&text[..], 3).unwrap();
    wd.create("in.jsonl.zst", &packed);
    let want = expected(&plain);
    let home = wd.convert("in.jsonl.zst", "home", &[], 0);
    let rollout = home.single_rollout();
    assert_eq!(rollout.meta()["id"], want.id);
    assert_eq!(written(&rollout), want.items);
    // A home (a live session and the prompt history beside the archived one): only its
    // rollouts are read.
    for dir in ["archived_sessions", "sessions/2025/10/30"] {
        std::fs::create_dir_all(wd.path(&format!(".codex/{dir}"))).unwrap();
    }
    wd.create(
        &format!(".codex/archived_sessions/{BASE_INSTRUCTIONS}.zst"),
        &packed,
    );
    std::fs::copy(
        Path::new(FIXTURES).join(EVENT_PROMPTS),
        wd.path(&format!(".codex/sessions/2025/10/30/{EVENT_PROMPTS}")),
    )
    .unwrap();
    wd.create(
        ".codex/history.jsonl",
        "{\"session_id\":\"x\",\"ts\":1,\"text\":\"hi\"}\n",
    );
    let from_home = wd.convert(".codex", "home2", &[], 0);
    assert!(
        from_home.quarantine().is_empty(),
        "{:?}",
        from_home.quarantine()
    );
    let rollouts = from_home.rollouts();
    assert_eq!(rollouts.len(), 2, "{rollouts:?}");
    let again = rollouts
        .iter()
        .map(|p| Rollout::read(p))
        .find(|r| r.meta()["id"] == want.id)
        .unwrap_or_else(|| panic!("{rollouts:?}"));
    assert_eq!(written(&again), want.items);
}

/// What Codex keeps out of the model's history is dropped by `policy.codex_line` and counted;
/// a rule file can make it a quarantine instead.
#[test]
fn lines_codex_keeps_from_the_model_are_dropped_by_rule_and_counted() {
    let wd = Workdir::new("codex_dropped_lines");
    std::fs::copy(
        Path::new(FIXTURES).join(BASE_INSTRUCTIONS),
        wd.path("in.jsonl"),
    )
    .unwrap();
    let home = wd.convert("in.jsonl", "home", &[], 0);
    let source = read_jsonl(&wd.path("in.jsonl"));
    // Every event, the turn_context line and the ghost_snapshot item.
    let kept_out = source
        .iter()
        .filter(|l| {
            l["type"] == "event_msg"
                || l["type"] == "turn_context"
                || l["payload"]["type"] == "ghost_snapshot"
        })
        .count();
    let summary = home.summary();
    let dropped = summary["records_dropped"]["policy.codex_line"].as_u64();
    assert_eq!(dropped, Some(kept_out as u64), "{summary}");
    wd.create("quarantine.toml", "[policy]\ncodex_line = \"quarantine\"\n");
    let strict = wd.convert(
        "in.jsonl",
        "home2",
        &["--rules", "default", "--rules", "quarantine.toml"],
        1,
    );
    assert_eq!(strict.quarantine().len(), kept_out);
    assert!(strict
        .quarantine()
        .iter()
        .all(|q| q["reason"].as_str().unwrap().contains("policy.codex_line")));
    assert_eq!(strict.rollouts().len(), 1);
}

/// A pre-envelope rollout is named, with the command that converts it: one line, exit 1.
#[test]
fn validate_names_a_pre_envelope_rollout_and_the_command_that_converts_it() {
    let wd = Workdir::new("codex_validate_pre_envelope");
    std::fs::copy(
        Path::new(FIXTURES).join(PRE_ENVELOPE),
        wd.path(PRE_ENVELOPE),
    )
    .unwrap();
    let run = wd.run(&["validate", PRE_ENVELOPE]);
    run.expect_code(1);
    insta::assert_snapshot!(run.stdout());
    let json = wd.run(&["validate", "--json", PRE_ENVELOPE]);
    let report: Value = serde_json::from_str(&json.stdout()).unwrap();
    assert_eq!(report["reports"][0]["generation"], "pre-envelope");
    assert_eq!(
        report["reports"][0]["convert"],
        format!("rollover convert {PRE_ENVELOPE} --from codex --out HOME")
    );
}

/// A paginated rollout is checked, not refused: it passes as Codex wrote it, and a gap in its
/// ordinals or a line of the other mode fails with the line.
#[test]
fn validate_checks_a_paginated_rollout_and_its_ordinals() {
    let wd = Workdir::new("codex_validate_paginated");
    let source = Path::new(FIXTURES).join(PAGINATED);
    let name = source.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::copy(&source, wd.path(&name)).unwrap();
    let run = wd.run(&["validate", "--verbose", &name]);
    run.expect_code(0);
    assert!(run.stdout().contains("(paginated)"), "{run}");
    let mut lines = read_jsonl(&source);
    lines[3]["ordinal"] = json!(7);
    lines[5].as_object_mut().unwrap().remove("ordinal");
    wd.create_jsonl(&name, &lines);
    let run = wd.run(&["validate", "--json", &name]);
    run.expect_code(1);
    let report: Value = serde_json::from_str(&run.stdout()).unwrap();
    let at: Vec<(u64, &str)> = report["reports"][0]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["line"].as_u64().unwrap(),
                v["invariant"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(at.contains(&(4, "line_format")), "{at:?}");
    assert!(at.contains(&(6, "line_format")), "{at:?}");
}
