//! Test helpers for the integration tests (after xsv's `Workdir`): each test gets its own
//! temporary folder, runs the real `rollover` binary in it, and reads back the Codex home it
//! wrote. When the binary's exit code is not the expected one, the panic shows the command,
//! its status, stdout and stderr.

#![allow(dead_code)]

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

pub mod parquet;

/// A temporary folder for one test; commands run with it as their working directory, so the
/// paths written in reports are the short relative ones given on the command line.
pub struct Workdir {
    /// Removed when the test ends, unless kept ([`Workdir::kept_if`]).
    _dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl Workdir {
    pub fn new(name: &str) -> Workdir {
        Workdir::kept_if(name, false)
    }

    /// A folder left in place after the test when `keep`, its path printed, to look into.
    pub fn kept_if(name: &str, keep: bool) -> Workdir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("rollover-{name}-"))
            .tempdir()
            .expect("create temp dir");
        let path = dir.path().to_path_buf();
        let dir = if keep {
            eprintln!("[{name}] keeping {}", dir.keep().display());
            None
        } else {
            Some(dir)
        };
        Workdir { _dir: dir, path }
    }

    pub fn root(&self) -> &Path {
        &self.path
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.path.join(relative)
    }

    /// Writes `bytes` at `relative` (parent folders created), and says where.
    pub fn create(&self, relative: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create parent dir");
        }
        fs::write(&path, bytes).expect("write input file");
        path
    }

    /// Writes each record as one JSON line (`\n` endings).
    pub fn create_jsonl(&self, relative: &str, records: &[Value]) {
        let mut text = String::new();
        for record in records {
            text.push_str(&serde_json::to_string(record).expect("serialize record"));
            text.push('\n');
        }
        self.create(relative, text);
    }

    pub fn read(&self, relative: &str) -> Vec<u8> {
        fs::read(self.path(relative)).unwrap_or_else(|e| panic!("read {relative}: {e}"))
    }

    /// `rollover ARGS...` in this folder.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rollover"));
        cmd.current_dir(self.root()).args(args);
        cmd
    }

    /// Runs `rollover ARGS...` and returns what it did.
    pub fn run(&self, args: &[&str]) -> Run {
        let mut cmd = self.command(args);
        let output = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        Run {
            command: format!("rollover {}", args.join(" ")),
            output,
        }
    }

    /// `rollover convert INPUT --out HOME EXTRA...`, expecting exit code `code`.
    pub fn convert(&self, input: &str, home: &str, extra: &[&str], code: i32) -> Home {
        let mut args = vec!["convert", input, "--out", home];
        args.extend_from_slice(extra);
        let run = self.run(&args);
        run.expect_code(code);
        Home {
            root: self.path(home),
            run,
        }
    }

    /// Writes one record as `in.jsonl`, converts it into `home` and expects exit 0 and
    /// exactly one rollout.
    pub fn convert_record(&self, record: Value) -> (Home, Rollout) {
        self.create_jsonl("in.jsonl", &[record]);
        let home = self.convert("in.jsonl", "home", &[], 0);
        let rollout = home.single_rollout();
        (home, rollout)
    }
}

/// One run of the binary.
pub struct Run {
    pub command: String,
    pub output: Output,
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn expect_code(&self, code: i32) {
        if self.code() != Some(code) {
            panic!("expected exit code {code}\n{self}");
        }
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "command: {}\nstatus:  {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command,
            self.output.status,
            self.stdout(),
            self.stderr()
        )
    }
}

/// The Codex home a convert run wrote.
pub struct Home {
    pub root: PathBuf,
    pub run: Run,
}

impl Home {
    /// Every rollout under `sessions/`, sorted by path.
    pub fn rollouts(&self) -> Vec<PathBuf> {
        let sessions = self.root.join("sessions");
        if !sessions.exists() {
            return Vec::new();
        }
        let mut found: Vec<PathBuf> = walkdir::WalkDir::new(&sessions)
            .sort_by_file_name()
            .into_iter()
            .map(|e| e.expect("walk sessions"))
            .filter(|e| e.file_type().is_file())
            .map(|e| e.into_path())
            .collect();
        found.sort();
        found
    }

    /// The one rollout this run wrote (panics, with the run's output, if there is not one).
    pub fn single_rollout(&self) -> Rollout {
        let found = self.rollouts();
        if found.len() != 1 {
            panic!(
                "expected exactly one rollout, found {}: {found:?}\n{}\nquarantine: {}",
                found.len(),
                self.run,
                String::from_utf8_lossy(
                    &fs::read(run_folder(&self.root).join("quarantine.jsonl")).unwrap_or_default()
                )
            );
        }
        Rollout::read(&found[0])
    }

    /// Every rollout, read, in path order.
    pub fn all_rollouts(&self) -> Vec<Rollout> {
        self.rollouts().iter().map(|p| Rollout::read(p)).collect()
    }

    pub fn summary(&self) -> Value {
        let path = run_folder(&self.root).join("summary.json");
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
        serde_json::from_str(&text).expect("summary.json is JSON")
    }

    pub fn quarantine(&self) -> Vec<Value> {
        read_jsonl(&run_folder(&self.root).join("quarantine.jsonl"))
    }

    pub fn conversations(&self) -> Vec<Value> {
        read_jsonl(&run_folder(&self.root).join("conversations.jsonl"))
    }

    /// The source line of each converted conversation, in output order.
    pub fn conversation_lines(&self) -> Vec<Value> {
        self.conversations()
            .iter()
            .map(|c| c["line"].clone())
            .collect()
    }

    /// The `decisions` of the only converted conversation about its record, without the
    /// `[session]` defaults its session meta took (`session.*`, which nearly every record
    /// takes: `counts_agree` asserts them).
    pub fn decisions(&self) -> Value {
        let conversations = self.conversations();
        assert_eq!(conversations.len(), 1, "{conversations:#?}");
        let all = conversations[0]["decisions"].as_array().cloned();
        let about_the_record = all
            .into_iter()
            .flatten()
            .filter(|d| {
                !d["rule"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("session."))
            })
            .collect();
        Value::Array(about_the_record)
    }

    /// Every file under the home, relative path → bytes, sorted.
    pub fn tree(&self) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(&self.root)
            .sort_by_file_name()
            .into_iter()
            .map(|e| e.expect("walk home"))
            // timing.json says how long the run took: the one file that differs run to run.
            .filter(|e| e.file_type().is_file() && e.file_name() != "timing.json")
            .map(|e| {
                let relative = e
                    .path()
                    .strip_prefix(&self.root)
                    .expect("under home")
                    .to_string_lossy()
                    .replace('\\', "/");
                (relative, fs::read(e.path()).expect("read output file"))
            })
            .collect();
        files.sort();
        files
    }
}

/// Every file below `dir` (symlinks not followed), by its path relative to `root`, with its
/// bytes; nothing when `dir` is not there.
pub fn files_below(root: &Path, dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let relative = e
                .path()
                .strip_prefix(root)
                .expect("below root")
                .to_string_lossy()
                .into_owned();
            (relative, fs::read(e.path()).expect("read file"))
        })
        .collect()
}

pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{path:?}: {e}: {line}")))
        .collect()
}

/// One rollout file, parsed.
pub struct Rollout {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub lines: Vec<Value>,
}

impl Rollout {
    pub fn read(path: &Path) -> Rollout {
        let bytes = fs::read(path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
        let text = std::str::from_utf8(&bytes).expect("rollout is UTF-8");
        assert!(text.ends_with('\n'), "rollout ends with a newline");
        assert!(!text.contains('\r'), "rollout has \\n endings only");
        let lines = text
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{path:?}: {e}: {line}"))
            })
            .collect();
        Rollout {
            path: path.to_path_buf(),
            bytes,
            lines,
        }
    }

    /// The `session_meta` payload (the first line).
    pub fn meta(&self) -> &Value {
        assert_eq!(self.lines[0]["type"], "session_meta", "{:?}", self.path);
        &self.lines[0]["payload"]
    }

    /// Every line after the session meta as `{"type", "payload"}` (timestamps left out).
    pub fn body(&self) -> Vec<Value> {
        self.lines[1..]
            .iter()
            .map(|line| json!({"type": line["type"], "payload": line["payload"]}))
            .collect()
    }

    /// The `response_item` payloads, in order.
    pub fn items(&self) -> Vec<Value> {
        self.payloads("response_item")
    }

    /// The `event_msg` payloads, in order.
    pub fn events(&self) -> Vec<Value> {
        self.payloads("event_msg")
    }

    fn payloads(&self, tag: &str) -> Vec<Value> {
        self.lines
            .iter()
            .filter(|line| line["type"] == tag)
            .map(|line| line["payload"].clone())
            .collect()
    }

    /// The file name's UUID (`rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl`).
    pub fn file_uuid(&self) -> String {
        let name = self
            .path
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        let stem = name.strip_suffix(".jsonl").expect("ends in .jsonl");
        stem[stem.len() - 36..].to_string()
    }
}

/// A `response_item` line (without its timestamp).
pub fn item(payload: Value) -> Value {
    json!({"type": "response_item", "payload": payload})
}

/// An `event_msg` line (without its timestamp).
pub fn event(payload: Value) -> Value {
    json!({"type": "event_msg", "payload": payload})
}

/// A real user message with one text part, and its `user_message` event.
pub fn user_turn(text: &str) -> [Value; 2] {
    [
        item(
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
        ),
        event(json!({"type": "user_message", "message": text})),
    ]
}

/// An assistant message with one text part and its `agent_message` event; `phase` `None`
/// means the key must be absent from both.
pub fn assistant_turn(text: &str, phase: Option<&str>) -> [Value; 2] {
    let mut message = json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]});
    let mut agent = json!({"type": "agent_message", "message": text});
    if let Some(phase) = phase {
        message["phase"] = json!(phase);
        agent["phase"] = json!(phase);
    }
    [item(message), event(agent)]
}

/// Compares two JSON values and, when they differ, panics showing both pretty-printed.
#[track_caller]
pub fn assert_json_eq(actual: &Value, expected: &Value) {
    if actual != expected {
        panic!(
            "JSON differs\n--- actual ---\n{}\n--- expected ---\n{}",
            serde_json::to_string_pretty(actual).unwrap_or_default(),
            serde_json::to_string_pretty(expected).unwrap_or_default()
        );
    }
}

/// Compares a rollout's body (every line after the meta, without timestamps) with `expected`.
#[track_caller]
pub fn assert_body(rollout: &Rollout, expected: Vec<Value>) {
    let actual = Value::Array(rollout.body());
    let expected = Value::Array(expected);
    if actual != expected {
        panic!(
            "rollout {:?} differs\n--- actual ---\n{}\n--- expected ---\n{}",
            rollout.path,
            pretty_lines(&actual),
            pretty_lines(&expected)
        );
    }
}

fn pretty_lines(lines: &Value) -> String {
    lines
        .as_array()
        .map(|a| {
            a.iter()
                .map(|l| serde_json::to_string(l).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Anything that stands for some rollout lines in an expected body: one line, or an item and
/// its event.
pub trait Lines {
    fn push_into(self, out: &mut Vec<Value>);
}

impl Lines for Value {
    fn push_into(self, out: &mut Vec<Value>) {
        out.push(self);
    }
}

impl<const N: usize> Lines for [Value; N] {
    fn push_into(self, out: &mut Vec<Value>) {
        out.extend(self);
    }
}

/// `body![item(..), user_turn("hi"), ...]`: the expected lines, flattened in order.
#[macro_export]
macro_rules! body {
    ($($part:expr),* $(,)?) => {{
        let mut lines: Vec<serde_json::Value> = Vec::new();
        $( $crate::common::Lines::push_into($part, &mut lines); )*
        lines
    }};
}

/// The folder holding the latest run's report files in a Codex home written by `convert`.
pub fn run_folder(home: &Path) -> PathBuf {
    home.join("rollover/latest")
}
