//! Output stays byte-identical across refactors: `samples/` and every set of
//! `../shared/corpora` are converted, and a SHA-256 digest of each output tree (every rollout
//! under `sessions/` with its path, plus the run's `conversations.jsonl` and `quarantine.jsonl`)
//! is compared with the one recorded in `tests/golden/digests.txt`.
//!
//! When a digest differs, the test names the first file that differs, from a short digest of
//! every file recorded beside it (`tests/golden/file-digests.txt`, in path order), says which
//! input record wrote it and shows its first lines; with `ROLLOVER_DIGEST_BASELINE=BINARY` (a
//! `rollover` built from the commit that recorded the digests) it converts the set again with
//! that binary and shows the first differing lines of the two files.
//!
//! A change that is meant to change the output re-records the digests with
//! `ROLLOVER_BLESS=1 cargo test --release --test tests digest::` and says why in its commit.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::common;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/digests.txt");
const FILE_DIGESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/file-digests.txt");

/// The files a digest covers, by path.
type Files = BTreeMap<String, Vec<u8>>;

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
        // The seven source formats, real public transcripts (corpora/README.md).
        ("sources", corpora.join("sources")),
        // Gemini CLI sessions, OpenTelemetry traces and the Parquet datasets written from the
        // corpora (tests/fixtures/README.md).
        ("fixtures", root.join("tests/fixtures")),
    ]
}

/// Every file below `dir`, as (path relative to `base`, bytes), sorted by path.
fn files_below(base: &Path, dir: &Path, out: &mut Files) {
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

/// What a conversion of `input` by `binary` writes: the folder it is in (removed when
/// dropped) and the files the digest covers.
fn convert_set(name: &str, input: &Path, binary: &Path) -> (common::Workdir, Files) {
    let work = common::Workdir::new(&format!("digest-{name}"));
    let home = work.path("home");
    // Run from the input's parent with a relative path, as a user would: the reports name the
    // source as given, and the digest must not depend on where the repository is cloned.
    let parent = input.parent().expect("input has a parent");
    let set = input.file_name().expect("input has a name");
    let out = std::process::Command::new(binary)
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
    (work, files)
}

/// The digest of an output tree, as `tests/golden/digests.txt` records it.
fn tree_digest(files: &Files) -> String {
    let mut hasher = Sha256::new();
    for (path, bytes) in files {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    format!("{} files {:x}", files.len(), hasher.finalize())
}

/// The short digest of one output file that `tests/golden/file-digests.txt` records: enough
/// to find which file changed (the tree digest above decides whether one did).
fn file_digest(path: &str, bytes: &[u8]) -> String {
    let mut named = Vec::with_capacity(path.len() + 1 + bytes.len());
    named.extend_from_slice(path.as_bytes());
    named.push(0);
    named.extend_from_slice(bytes);
    format!("{:016x}", twox_hash::XxHash3_64::oneshot(&named))[..8].to_string()
}

const FILES_HEADER: &str = "\
# The digest of each output file of each set (xxh3-64 of its path, a NUL byte and its bytes;
# the first 8 hex digits), in path order under the set's name. Where a set's digest in
# digests.txt differs, these name the first file that differs (tests/digest.rs). Written with
# digests.txt by ROLLOVER_BLESS=1.
";

/// `tests/golden/file-digests.txt` for the converted sets.
fn file_digests_text(converted: &[(&str, Files)]) -> String {
    let mut text = FILES_HEADER.to_string();
    for (name, files) in converted {
        text.push_str(&format!("[{name}]\n"));
        for (path, bytes) in files {
            text.push_str(&file_digest(path, bytes));
            text.push('\n');
        }
    }
    text
}

/// The recorded file digests of each set, in path order.
fn parse_file_digests(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = Some(name.to_string());
            sets.entry(name.to_string()).or_default();
        } else if let Some(name) = &current {
            sets.entry(name.clone()).or_default().push(line.to_string());
        }
    }
    sets
}

/// Where a written tree first departs from the recorded one, both in path order.
#[derive(Debug, PartialEq)]
enum Difference<'a> {
    /// This written file is not a recorded one: its bytes or its name changed, or it is new.
    Changed(&'a str),
    /// The recorded file at this position (from 1) is written no more; `next` is the written
    /// file now in its place.
    Gone {
        position: usize,
        next: Option<&'a str>,
    },
}

fn first_difference<'a>(
    recorded: &[String],
    written: &[(&'a str, String)],
) -> Option<Difference<'a>> {
    let known: std::collections::HashSet<&str> = recorded.iter().map(String::as_str).collect();
    let at = (0..recorded.len().max(written.len()))
        .find(|&i| recorded.get(i) != written.get(i).map(|(_, digest)| digest))?;
    match written.get(at) {
        Some((path, digest)) if !known.contains(digest.as_str()) => Some(Difference::Changed(path)),
        next => Some(Difference::Gone {
            position: at + 1,
            next: next.map(|(path, _)| *path),
        }),
    }
}

/// A line as shown in a failure: cut at 240 characters.
fn shown(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    match text.char_indices().nth(240) {
        Some((cut, _)) => format!("{}... ({} bytes)", &text[..cut], line.len()),
        None => text.into_owned(),
    }
}

/// The first lines where `expected` and `actual` differ, the line before them for context.
fn first_differing_lines(expected: &[u8], actual: &[u8]) -> String {
    let expected: Vec<&[u8]> = expected.split(|b| *b == b'\n').collect();
    let actual: Vec<&[u8]> = actual.split(|b| *b == b'\n').collect();
    let Some(at) =
        (0..expected.len().max(actual.len())).find(|&i| expected.get(i) != actual.get(i))
    else {
        return "    (the same bytes)\n".to_string();
    };
    let mut out = format!("    first difference at line {}:\n", at + 1);
    if at > 0 {
        out.push_str(&format!("      {}\n", shown(expected[at - 1])));
    }
    for line in expected.iter().skip(at).take(3) {
        out.push_str(&format!("    - {}\n", shown(line)));
    }
    for line in actual.iter().skip(at).take(3) {
        out.push_str(&format!("    + {}\n", shown(line)));
    }
    out
}

/// Which file of set `name` differs from what was recorded, the record that wrote it, its
/// first lines, and (with `ROLLOVER_DIGEST_BASELINE`) how it differs from the baseline's.
fn explain(name: &str, input: &Path, files: &Files, recorded: Option<&Vec<String>>) -> String {
    let Some(recorded) = recorded else {
        return format!("  {name}: no file digests recorded for this set\n");
    };
    let written: Vec<(&str, String)> = files
        .iter()
        .map(|(path, bytes)| (path.as_str(), file_digest(path, bytes)))
        .collect();
    let now: std::collections::HashSet<&str> = written.iter().map(|(_, d)| d.as_str()).collect();
    let known: std::collections::HashSet<&str> = recorded.iter().map(String::as_str).collect();
    let mut out = format!(
        "  {name}: {} of {} written files differ from the {} recorded; {} recorded are not written\n",
        written.iter().filter(|(_, d)| !known.contains(d.as_str())).count(),
        written.len(),
        recorded.len(),
        recorded.iter().filter(|d| !now.contains(d.as_str())).count(),
    );
    let path = match first_difference(recorded, &written) {
        None => {
            out.push_str("  every file matches its recorded digest: file-digests.txt is stale\n");
            return out;
        }
        Some(Difference::Gone { position, next }) => {
            out.push_str(&format!(
                "  first difference: recorded file {position} is written no more (now in its place: {})\n",
                next.unwrap_or("nothing")
            ));
            return out;
        }
        Some(Difference::Changed(path)) => path,
    };
    out.push_str(&format!("  first file that differs: {path}\n"));
    let conversations = files
        .get("rollover/conversations.jsonl")
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default();
    let source = conversations
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|c| c["path"] == path);
    if let Some(c) = source {
        out.push_str(&format!(
            "  written from {}:{}\n",
            c["source"].as_str().unwrap_or("?"),
            c["line"]
        ));
    }
    let bytes = &files[path];
    match std::env::var_os("ROLLOVER_DIGEST_BASELINE") {
        Some(baseline) => {
            let (_work, before) =
                convert_set(&format!("{name}-baseline"), input, Path::new(&baseline));
            match before.get(path) {
                Some(expected) => {
                    out.push_str("  against the baseline (- baseline, + now):\n");
                    out.push_str(&first_differing_lines(expected, bytes));
                }
                None => out.push_str("  the baseline wrote no file of that name\n"),
            }
        }
        None => {
            out.push_str("  its first lines:\n");
            for line in bytes.split(|b| *b == b'\n').take(4) {
                out.push_str(&format!("    {}\n", shown(line)));
            }
            out.push_str(
                "  for the lines that changed, set ROLLOVER_DIGEST_BASELINE to a rollover built \
                 from the commit that recorded the digests\n",
            );
        }
    }
    out
}

/// A set's converted output: its work folder (kept while compared) and every file's bytes.
type ConvertedSet = (common::Workdir, BTreeMap<String, Vec<u8>>);

#[test]
fn output_trees_match_the_recorded_digests() {
    let binary = Path::new(env!("CARGO_BIN_EXE_rollover"));
    let sets = sets();
    let converted: Vec<(&str, ConvertedSet)> = sets
        .iter()
        .map(|(name, path)| (*name, convert_set(name, path, binary)))
        .collect();
    let actual: BTreeMap<&str, String> = converted
        .iter()
        .map(|(name, (_, files))| (*name, tree_digest(files)))
        .collect();
    let text: String = actual
        .iter()
        .map(|(name, digest)| format!("{name} {digest}\n"))
        .collect();
    if std::env::var_os("ROLLOVER_BLESS").is_some() {
        fs::write(GOLDEN, &text).expect("write golden digests");
        let mut by_name: Vec<(&str, Files)> = converted
            .into_iter()
            .map(|(name, (_, files))| (name, files))
            .collect();
        by_name.sort_by_key(|(name, _)| *name);
        fs::write(FILE_DIGESTS, file_digests_text(&by_name)).expect("write file digests");
        return;
    }
    let golden = fs::read_to_string(GOLDEN).expect("read tests/golden/digests.txt");
    let recorded_files = parse_file_digests(&fs::read_to_string(FILE_DIGESTS).unwrap_or_default());
    let mut changed = Vec::new();
    for line in golden.lines() {
        let (name, digest) = line.split_once(' ').expect("golden line: NAME DIGEST");
        match actual.get(name) {
            Some(now) if now == digest => {}
            Some(now) => {
                changed.push(format!("{name}: recorded {digest}, now {now}"));
                let (input, (_, files)) = sets
                    .iter()
                    .zip(&converted)
                    .find(|((set, _), _)| *set == name)
                    .map(|((_, input), (_, converted))| (input, converted))
                    .expect("a converted set");
                changed.push(explain(name, input, files, recorded_files.get(name)));
            }
            None => changed.push(format!("{name}: recorded but not converted")),
        }
    }
    assert!(
        changed.is_empty() && golden.lines().count() == actual.len(),
        "output changed (re-record with ROLLOVER_BLESS=1 only if the change is intended):\n{}",
        changed.join("\n")
    );
}

#[test]
fn a_difference_names_the_first_changed_or_missing_file() {
    let recorded: Vec<String> = ["aa", "bb", "cc"].iter().map(|s| s.to_string()).collect();
    let written = |digests: &[&str]| -> Vec<(&'static str, String)> {
        ["a", "b", "c", "d"]
            .iter()
            .zip(digests)
            .map(|(path, digest)| (*path, digest.to_string()))
            .collect()
    };
    assert_eq!(
        first_difference(&recorded, &written(&["aa", "bb", "cc"])),
        None
    );
    assert_eq!(
        first_difference(&recorded, &written(&["aa", "bx", "cc"])),
        Some(Difference::Changed("b"))
    );
    assert_eq!(
        first_difference(&recorded, &written(&["aa", "bb", "cc", "dd"])),
        Some(Difference::Changed("d"))
    );
    assert_eq!(
        first_difference(&recorded, &written(&["aa", "cc"])),
        Some(Difference::Gone {
            position: 2,
            next: Some("b")
        })
    );
    assert_eq!(
        first_difference(&recorded, &written(&["aa", "bb"])),
        Some(Difference::Gone {
            position: 3,
            next: None
        })
    );
    let lines = first_differing_lines(b"one\ntwo\nthree\n", b"one\n2\nthree\n");
    assert_eq!(
        lines,
        "    first difference at line 2:\n      one\n    - two\n    - three\n    - \n    + 2\n    + three\n    + \n"
    );
    assert_eq!(
        first_differing_lines(b"x\n", b"x\n"),
        "    (the same bytes)\n"
    );
}
