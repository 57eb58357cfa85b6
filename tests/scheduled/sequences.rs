//! The state model's property (issue 25): for any sequence of runs over a changing input tree
//! (files added, appended, truncated, rewritten, renamed, duplicated under another name; the
//! rule file changed), no session once written is lost without `--prune`, and the home after
//! the sequence equals a fresh `--full` run over the final inputs plus exactly the sessions
//! the plans left (their records gone): those the manifest remembers as orphans or as held by
//! files gone from the walk. Then `--prune` brings the home to the fresh run exactly.
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
    ]
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

/// The input tree as the test holds it: file number → its records.
#[derive(Debug, Default)]
struct Inputs {
    files: BTreeMap<u8, Vec<u8>>,
    rules: u8,
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
        }
    }

    /// Writes the tree under `in/` (only what changed is rewritten, so mtimes of the rest
    /// stay) and the rule file.
    fn write(&self, wd: &Workdir) {
        let dir = wd.path("in");
        fs::create_dir_all(&dir).expect("in");
        for entry in fs::read_dir(&dir).expect("list") {
            let path = entry.expect("entry").path();
            let number = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.strip_prefix('f'))
                .and_then(|s| s.parse::<u8>().ok());
            if number.is_none_or(|n| !self.files.contains_key(&n)) {
                fs::remove_file(&path).expect("remove");
            }
        }
        for (f, records) in &self.files {
            let text: String = records.iter().map(|r| record(*r) + "\n").collect();
            let path = dir.join(format!("f{f}.jsonl"));
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

fn check_sequence(ops: &[Op]) -> Result<(), TestCaseError> {
    let wd = Workdir::new("sequence");
    let mut inputs = Inputs::default();
    inputs.write(&wd);
    let mut ever: BTreeSet<String> = BTreeSet::new();
    for op in ops {
        inputs.apply(op);
        inputs.write(&wd);
        if inputs.files.is_empty() {
            continue;
        }
        convert(&wd, "home", &[])?;
        let now = sessions(&wd.path("home"));
        for path in &ever {
            prop_assert!(
                now.contains_key(path),
                "session {} lost after {:?}",
                path,
                op
            );
        }
        ever.extend(now.keys().cloned());
    }
    if inputs.files.is_empty() || ever.is_empty() {
        return Ok(());
    }
    convert(&wd, "fresh", &["--full"])?;
    let home = sessions(&wd.path("home"));
    let fresh = sessions(&wd.path("fresh"));
    for (path, bytes) in &fresh {
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
    let walked: BTreeSet<String> = inputs.files.keys().map(|f| format!("f{f}.jsonl")).collect();
    let left = left_by_plans(&wd.path("home"), &walked);
    let left_on_disk: BTreeSet<String> = left
        .iter()
        .filter(|p| home.contains_key(*p) && !fresh.contains_key(*p))
        .cloned()
        .collect();
    prop_assert_eq!(&extra, &left_on_disk, "sessions beyond a fresh run");
    // --prune makes the home the fresh run's.
    convert(&wd, "home", &["--prune"])?;
    let pruned = sessions(&wd.path("home"));
    prop_assert_eq!(pruned, fresh);
    Ok(())
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
