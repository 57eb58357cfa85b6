//! The state model's property: for any sequence of runs over a changing input tree (files
//! added, appended, truncated, rewritten, renamed, duplicated under another name, written again
//! by another tool; dated exports of conversations that grow, replaced by longer ones, older
//! copies added back; a folder removed then pruned, a prune killed at any point; the rule file
//! changed), no session once written is lost without `--prune` (nor without a copy with it), no
//! session ever holds an older version of its conversation than one written before, and the
//! home after the sequence equals a fresh `--full` run over the final inputs plus exactly what
//! the plans kept: the sessions whose record is gone (orphans, or held by files gone from the
//! walk) and the newer versions of conversations whose inputs now hold only older ones. Then
//! `--prune` brings the home to that fresh run, newer versions kept.
//!
//! `PROPTEST_CASES` sets the number of sequences (default 12).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use serde_json::{json, Value};

use crate::common::Workdir;

#[derive(Debug, Clone)]
enum Op {
    /// A new file of these records (by number).
    Add(u8, Vec<u8>),
    /// Records appended to a file.
    Append(u8, Vec<u8>),
    /// A file cut to its first records.
    Truncate(u8, u8),
    /// A file's content replaced.
    Rewrite(u8, Vec<u8>),
    /// A file renamed.
    Rename(u8, u8),
    /// A copy of a file under another name.
    Duplicate(u8, u8),
    /// The rule file changed (one of three working folders).
    Rules(u8),
    /// An export `e{N}.json` of conversation C at its version of T turns (a later version
    /// extends an earlier one).
    Export(u8, u8, u8),
    /// An export removed.
    Unexport(u8),
    /// A file written again by another tool: the same values, pretty-printed into a JSON
    /// document with its keys in another order.
    Reserialise(u8),
    /// A prune (every gone file's sessions) killed at its N-th removal, then a plain run.
    PruneKilled(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let ids = || prop::collection::vec(0u8..12, 1..4);
    prop_oneof![
        3 => (0u8..4, ids()).prop_map(|(f, r)| Op::Add(f, r)),
        2 => (0u8..4, ids()).prop_map(|(f, r)| Op::Append(f, r)),
        2 => (0u8..4, 0u8..3).prop_map(|(f, k)| Op::Truncate(f, k)),
        1 => (0u8..4, ids()).prop_map(|(f, r)| Op::Rewrite(f, r)),
        1 => (0u8..4, 0u8..4).prop_map(|(f, t)| Op::Rename(f, t)),
        1 => (0u8..4, 0u8..4).prop_map(|(f, t)| Op::Duplicate(f, t)),
        1 => (0u8..3).prop_map(Op::Rules),
        3 => (0u8..3, 0u8..3, 1u8..5).prop_map(|(f, c, t)| Op::Export(f, c, t)),
        1 => (0u8..3).prop_map(Op::Unexport),
        1 => (0u8..4).prop_map(Op::Reserialise),
        1 => (1u8..4).prop_map(Op::PruneKilled),
    ]
}

/// Conversation `c` of an export at its version of `turns` turns: the same id and start
/// whatever the version, each turn's text naming it.
fn conversation(c: u8, turns: u8) -> Value {
    let create = 1_717_200_000i64 + i64::from(c) * 3600;
    let mut mapping = serde_json::Map::new();
    mapping.insert("root".into(), json!({"id": "root", "children": []}));
    let mut previous = "root".to_string();
    for turn in 0..turns {
        for role in ["user", "assistant"] {
            let node = format!("{}{turn}", &role[..1]);
            mapping.insert(
                node.clone(),
                json!({"id": node, "parent": previous, "children": [], "message": {
                    "id": format!("c{c}-{node}"), "author": {"role": role},
                    "create_time": create + i64::from(turn) * 10 + i64::from(role == "assistant"),
                    "content": {"content_type": "text", "parts": [format!("conversation {c} {role} turn {turn}")]}}}),
            );
            mapping[&previous]["children"]
                .as_array_mut()
                .expect("children")
                .push(json!(node));
            previous = node;
        }
    }
    json!({"id": format!("conversation-{c}"), "title": format!("c{c}"), "create_time": create,
           "update_time": create + i64::from(turns) * 10, "current_node": previous, "mapping": mapping})
}

/// Record number `n`: the same number is the same record wherever it is (a duplicate).
fn record(n: u8) -> String {
    json!({
        "created": 1_700_000_000 + i64::from(n) * 60,
        "messages": [
            {"role": "system", "content": "You help."},
            {"role": "user", "content": format!("question {n}?")},
            {"role": "assistant", "content": format!("answer {n}.")},
        ]
    })
    .to_string()
}

/// The input tree as the test holds it: file number → its records; export number → its
/// conversation and version; the files written again by another tool.
#[derive(Debug, Default)]
struct Inputs {
    files: BTreeMap<u8, Vec<u8>>,
    rules: u8,
    exports: BTreeMap<u8, (u8, u8)>,
    pretty: BTreeSet<u8>,
}

impl Inputs {
    fn apply(&mut self, op: &Op) {
        match op {
            Op::Add(f, r) | Op::Rewrite(f, r) => {
                self.files.insert(*f, r.clone());
            }
            Op::Append(f, r) => self.files.entry(*f).or_default().extend(r),
            Op::Truncate(f, k) => {
                if let Some(records) = self.files.get_mut(f) {
                    records.truncate(usize::from(*k));
                }
            }
            Op::Rename(f, t) => {
                if let Some(records) = self.files.remove(f) {
                    self.files.insert(*t, records);
                }
            }
            Op::Duplicate(f, t) => {
                if let Some(records) = self.files.get(f).cloned() {
                    self.files.insert(*t, records);
                }
            }
            Op::Rules(n) => self.rules = *n,
            Op::Export(f, c, t) => {
                self.exports.insert(*f, (*c, *t));
            }
            Op::Unexport(f) => {
                self.exports.remove(f);
            }
            Op::Reserialise(f) => {
                if self.files.contains_key(f) {
                    self.pretty.insert(*f);
                }
            }
            Op::PruneKilled(_) => {}
        }
        self.pretty.retain(|f| self.files.contains_key(f));
    }

    /// The newest version of each conversation the exports hold.
    fn newest(&self) -> BTreeMap<u8, u8> {
        let mut newest = BTreeMap::new();
        for &(c, t) in self.exports.values() {
            let version = newest.entry(c).or_insert(t);
            *version = (*version).max(t);
        }
        newest
    }

    fn is_empty(&self) -> bool {
        self.files.is_empty() && self.exports.is_empty()
    }

    /// Writes the tree under `in/` (only what changed is rewritten, so mtimes of the rest
    /// stay) and the rule file.
    fn write(&self, wd: &Workdir) {
        let dir = wd.path("in");
        fs::create_dir_all(&dir).expect("in");
        for entry in fs::read_dir(&dir).expect("list") {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !self.names().contains(&name) {
                fs::remove_file(&path).expect("remove");
            }
        }
        for (f, records) in &self.files {
            let (name, text) = if self.pretty.contains(f) {
                // The same values: keys reordered, pretty-printed, in one JSON document.
                let values: Vec<Value> = records
                    .iter()
                    .map(|r| {
                        let value: Value = serde_json::from_str(&record(*r)).expect("record");
                        json!({"messages": value["messages"], "created": value["created"]})
                    })
                    .collect();
                let text = serde_json::to_string_pretty(&values).expect("JSON");
                (format!("f{f}.json"), text)
            } else {
                (
                    format!("f{f}.jsonl"),
                    records.iter().map(|r| record(*r) + "\n").collect(),
                )
            };
            let path = dir.join(name);
            if fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                fs::write(&path, text).expect("write");
            }
        }
        for (f, (c, t)) in &self.exports {
            let text = serde_json::to_string_pretty(&json!([conversation(*c, *t)])).expect("JSON");
            let path = dir.join(format!("e{f}.json"));
            if fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                fs::write(&path, text).expect("write");
            }
        }
        wd.create(
            "rules.toml",
            format!("[session]\ncwd = \"/srv/work-{}\"\n", self.rules),
        );
    }
}

impl Inputs {
    /// The file names of the tree.
    fn names(&self) -> BTreeSet<String> {
        let files = self.files.keys().map(|f| {
            if self.pretty.contains(f) {
                format!("f{f}.json")
            } else {
                format!("f{f}.jsonl")
            }
        });
        files
            .chain(self.exports.keys().map(|f| format!("e{f}.json")))
            .collect()
    }
}

/// Every rollout under `home/sessions`: path relative to the home → bytes.
fn sessions(home: &Path) -> BTreeMap<String, Vec<u8>> {
    crate::common::files_below(home, &home.join("sessions"))
}

/// The sessions the manifest remembers whose record is gone: its orphans, and those only
/// files gone from the walk still list.
fn left_by_plans(home: &Path, walked: &BTreeSet<String>) -> BTreeSet<String> {
    let text = fs::read_to_string(home.join("rollover/manifest")).expect("manifest");
    let mut held = BTreeSet::new();
    let mut stale = BTreeSet::new();
    let mut orphans = BTreeSet::new();
    for line in text.lines() {
        let value: Value = serde_json::from_str(line).expect("manifest line");
        if let Some(path) = value["orphan"]["path"].as_str() {
            orphans.insert(path.to_string());
        }
        if let (Some(key), Some(rollouts)) = (value["key"].as_str(), value["rollouts"].as_array()) {
            let name = Path::new(key)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let set = if walked.contains(&name) {
                &mut held
            } else {
                &mut stale
            };
            for r in rollouts {
                set.insert(r["path"].as_str().expect("path").to_string());
            }
        }
    }
    orphans.extend(stale.difference(&held).cloned());
    orphans
}

fn convert(wd: &Workdir, home: &str, extra: &[&str]) -> Result<(), TestCaseError> {
    let mut args = vec![
        "convert",
        "in",
        "--out",
        home,
        "--rules",
        "default",
        "--rules",
        "rules.toml",
    ];
    args.extend_from_slice(extra);
    let run = wd.run(&args);
    prop_assert_eq!(run.code(), Some(0), "{}", run);
    Ok(())
}

/// The session of conversation `c`, and the last turn it holds.
fn version_in(sessions: &BTreeMap<String, Vec<u8>>, c: u8) -> Option<(String, u8)> {
    let marker = format!("conversation {c} user turn 0");
    let (path, bytes) = sessions
        .iter()
        .find(|(_, bytes)| String::from_utf8_lossy(bytes).contains(&marker))?;
    let text = String::from_utf8_lossy(bytes);
    let turns = (0..=u8::MAX)
        .take_while(|t| text.contains(&format!("conversation {c} user turn {t}")))
        .count();
    Some((path.clone(), u8::try_from(turns).unwrap_or(u8::MAX)))
}

/// Every session ever moved out by a prune (`rollover/pruned/RUN/<path>`), by its path.
fn pruned_copies(home: &Path) -> BTreeSet<String> {
    crate::common::files_below(home, &home.join("rollover/pruned"))
        .into_keys()
        .filter_map(|p| {
            let mut parts = p.splitn(4, '/');
            let (_, _, _, rest) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
            Some(rest.to_string())
        })
        .collect()
}

fn check_sequence(ops: &[Op]) -> Result<(), TestCaseError> {
    let wd = Workdir::new("sequence");
    let mut inputs = Inputs::default();
    inputs.write(&wd);
    let mut ever: BTreeSet<String> = BTreeSet::new();
    // The newest version of each conversation any run wrote.
    let mut newest: BTreeMap<u8, u8> = BTreeMap::new();
    for op in ops {
        inputs.apply(op);
        inputs.write(&wd);
        if inputs.is_empty() {
            continue;
        }
        let before = sessions(&wd.path("home"));
        if let Op::PruneKilled(n) = op {
            // Killed at its n-th removal (or done, when it removes fewer): the next run
            // finishes it.
            let run = wd
                .command(&[
                    "convert",
                    "in",
                    "--out",
                    "home",
                    "--rules",
                    "default",
                    "--rules",
                    "rules.toml",
                    "--prune",
                    "--max-prune",
                    "100%",
                ])
                .env("ROLLOVER_FAILPOINT", format!("die-at:prune:{n}"))
                .output()
                .expect("run");
            prop_assert!(matches!(run.status.code(), None | Some(0)), "{:?}", run);
        }
        convert(&wd, "home", &[])?;
        let now = sessions(&wd.path("home"));
        let copies = pruned_copies(&wd.path("home"));
        for path in &ever {
            prop_assert!(
                now.contains_key(path) || copies.contains(path),
                "session {} lost (no copy kept) after {:?}",
                path,
                op
            );
        }
        if let Op::Reserialise(_) = op {
            prop_assert_eq!(
                now.len(),
                before.len(),
                "a file written again made new sessions"
            );
        }
        for (c, present) in inputs.newest() {
            let version = newest.entry(c).or_insert(present);
            *version = (*version).max(present);
        }
        for (c, want) in &newest {
            let held = version_in(&now, *c).map(|(_, t)| t);
            let pruned = held.is_none() && !inputs.exports.values().any(|(e, _)| e == c);
            prop_assert!(
                held == Some(*want) || pruned,
                "conversation {} holds {:?} turns after {:?}, {} were written before",
                c,
                held,
                op,
                want
            );
        }
        ever.extend(now.keys().cloned());
    }
    if inputs.is_empty() || ever.is_empty() {
        return Ok(());
    }
    convert(&wd, "fresh", &["--full"])?;
    let home = sessions(&wd.path("home"));
    let fresh = sessions(&wd.path("fresh"));
    // The conversations whose home session is newer than any version the inputs now hold:
    // the plans kept them.
    let kept_newer: BTreeSet<String> = newest
        .iter()
        .filter(|(c, want)| inputs.newest().get(c).is_some_and(|present| present < want))
        .filter_map(|(c, _)| version_in(&home, *c).map(|(path, _)| path))
        .collect();
    for (path, bytes) in &fresh {
        if kept_newer.contains(path) {
            continue;
        }
        prop_assert_eq!(
            home.get(path),
            Some(bytes),
            "the home's {} differs from a fresh run's",
            path
        );
    }
    let extra: BTreeSet<String> = home
        .keys()
        .filter(|p| !fresh.contains_key(*p))
        .cloned()
        .collect();
    let walked = inputs.names();
    let left = left_by_plans(&wd.path("home"), &walked);
    let left_on_disk: BTreeSet<String> = left
        .iter()
        .filter(|p| home.contains_key(*p) && !fresh.contains_key(*p))
        .cloned()
        .collect();
    prop_assert_eq!(&extra, &left_on_disk, "sessions beyond a fresh run");
    // --prune makes the home the fresh run's, newer versions kept.
    convert(&wd, "home", &["--prune", "--max-prune", "100%"])?;
    let pruned = sessions(&wd.path("home"));
    for (path, bytes) in &fresh {
        if !kept_newer.contains(path) {
            prop_assert_eq!(pruned.get(path), Some(bytes), "{} after --prune", path);
        }
    }
    prop_assert_eq!(
        pruned.keys().collect::<BTreeSet<_>>(),
        fresh.keys().collect::<BTreeSet<_>>()
    );
    Ok(())
}

/// A conversation's export replaced by a longer one, then the older copy added back beside
/// it, then the longer one removed and a prune killed: the newest version stays.
#[test]
fn snapshots_never_roll_a_conversation_back() {
    let ops = [
        Op::Export(0, 1, 2),
        Op::Export(0, 1, 4),
        Op::Export(1, 1, 2),
        Op::Add(0, vec![1, 2]),
        Op::Reserialise(0),
        Op::Unexport(0),
        Op::PruneKilled(1),
        Op::Rules(2),
    ];
    check_sequence(&ops).expect("the property holds");
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

proptest! {
    #![proptest_config(Config { cases: cases(), ..Config::default() })]

    #[test]
    fn no_session_is_lost_and_the_home_is_a_fresh_run_plus_what_the_plans_left(
        ops in prop::collection::vec(op(), 2..9)
    ) {
        check_sequence(&ops)?;
    }
}

#[test]
fn a_truncate_then_a_rename_then_a_rule_change_keeps_every_session() {
    let ops = [
        Op::Add(0, vec![1, 2, 3]),
        Op::Truncate(0, 1),
        Op::Rename(0, 1),
        Op::Duplicate(1, 2),
        Op::Rules(1),
        Op::Append(2, vec![1, 4]),
        Op::Truncate(1, 0),
    ];
    check_sequence(&ops).expect("the property holds");
}

/// Found by the property: a file renamed away still listed the session with the first rules'
/// digest, so after two rule changes the run took the session for one Codex had changed and
/// left the second rules' version on disk.
#[test]
fn a_rename_then_two_rule_changes_rewrite_the_session_each_time() {
    let ops = [
        Op::Add(1, vec![0]),
        Op::Rename(1, 0),
        Op::Rules(1),
        Op::Rules(0),
    ];
    check_sequence(&ops).expect("the property holds");
}
