//! Output stays byte-identical across refactors: `samples/` and every set of
//! `../shared/corpora` are converted, and a SHA-256 digest of each output tree (every rollout
//! under `sessions/` with its path, plus the run's `conversations.jsonl` and `quarantine.jsonl`)
//! is compared with the one recorded in `tests/golden/digests.txt`.
//!
//! A change that is meant to change the output re-records the digests with
//! `ROLLOVER_BLESS=1 cargo test --release --test tests digest::` and says why in its commit.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::common;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/digests.txt");

/// The input sets, by the name the golden file uses.
fn sets() -> Vec<(&'static str, PathBuf)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let corpora = root.join("../shared/corpora");
    vec![
        ("samples", root.join("samples")),
        ("bfcl", corpora.join("bfcl")),
        ("codex-rollouts", corpora.join("codex-rollouts")),
        ("openai-evals", corpora.join("openai-evals")),
        ("swe-agent", corpora.join("swe-agent")),
        ("toolbench", corpora.join("toolbench")),
    ]
}

/// Every file below `dir`, as (path relative to `base`, bytes), sorted by path.
fn files_below(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("read dir entry").path();
        if path.is_dir() {
            files_below(base, &path, out);
        } else {
            let relative = path
                .strip_prefix(base)
                .expect("below base")
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(relative, fs::read(&path).expect("read output file"));
        }
    }
}

/// The digest of what a conversion of `input` writes.
fn digest_of(name: &str, input: &Path) -> String {
    let work = common::Workdir::new(&format!("digest-{name}"));
    let home = work.path("home");
    // Run from the input's parent with a relative path, as a user would: the reports name the
    // source as given, and the digest must not depend on where the repository is cloned.
    let parent = input.parent().expect("input has a parent");
    let set = input.file_name().expect("input has a name");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rollover"))
        .current_dir(parent)
        .arg("convert")
        .arg(set)
        .arg("--out")
        .arg(&home)
        .output()
        .expect("run rollover");
    let code = out.status.code();
    assert!(
        matches!(code, Some(0) | Some(1)),
        "convert {name} exited {code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut files = BTreeMap::new();
    files_below(&home, &home.join("sessions"), &mut files);
    let run = common::run_folder(&home);
    for report in ["conversations.jsonl", "quarantine.jsonl"] {
        let bytes = fs::read(run.join(report)).expect("read run report");
        files.insert(format!("rollover/{report}"), bytes);
    }
    let mut hasher = Sha256::new();
    for (path, bytes) in &files {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    format!("{} files {:x}", files.len(), hasher.finalize())
}

#[test]
fn output_trees_match_the_recorded_digests() {
    let actual: BTreeMap<&str, String> = sets()
        .iter()
        .map(|(name, path)| (*name, digest_of(name, path)))
        .collect();
    let text: String = actual
        .iter()
        .map(|(name, digest)| format!("{name} {digest}\n"))
        .collect();
    if std::env::var_os("ROLLOVER_BLESS").is_some() {
        fs::write(GOLDEN, &text).expect("write golden digests");
        return;
    }
    let golden = fs::read_to_string(GOLDEN).expect("read tests/golden/digests.txt");
    let mut changed = Vec::new();
    for line in golden.lines() {
        let (name, digest) = line.split_once(' ').expect("golden line: NAME DIGEST");
        match actual.get(name) {
            Some(now) if now == digest => {}
            Some(now) => changed.push(format!("{name}: recorded {digest}, now {now}")),
            None => changed.push(format!("{name}: recorded but not converted")),
        }
    }
    assert!(
        changed.is_empty() && golden.lines().count() == actual.len(),
        "output changed (re-record with ROLLOVER_BLESS=1 only if the change is intended):\n{}",
        changed.join("\n")
    );
}
