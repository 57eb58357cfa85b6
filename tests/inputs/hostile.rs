//! Hostile archives (issue 26): small files that expand into inputs a careless reader holds
//! whole, takes quadratic time over, or reads outside the input. Each runs the real binary
//! under an address-space limit (`prlimit --as`) a few times the stated memory bound, and
//! ends with exit 0 or 1, the reason in the quarantine or damage list, the file outside the
//! output untouched (a canary's bytes and mode) and the lock released.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::common::{Home, Run, Workdir};
use serde_json::{json, Value};

/// The address space each run gets: the README's bound is ~25 MB + ~10 × the largest record
/// per thread; these runs use `--max-record-bytes 1MiB` with two threads, and virtual memory
/// counts thread stacks and the allocator's reservations besides. Every input below would
/// need gigabytes if it were held whole.
const ADDRESS_SPACE: u64 = 768 << 20;

/// Limits for the runs: what the bound is computed from.
const LIMITS: [&str; 6] = [
    "--max-record-bytes",
    "1MiB",
    "--max-conversation-bytes",
    "4MiB",
    "--jobs",
    "2",
];

/// A file outside the output that no run may touch.
struct Canary {
    path: std::path::PathBuf,
    bytes: Vec<u8>,
}

impl Canary {
    fn plant(wd: &Workdir) -> Canary {
        let path = wd.path("canary.txt");
        let bytes = b"the canary: nothing outside --out is written\n".to_vec();
        std::fs::write(&path, &bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        Canary { path, bytes }
    }

    fn check(&self) {
        assert_eq!(
            std::fs::read(&self.path).unwrap(),
            self.bytes,
            "canary changed"
        );
        let mode = std::fs::metadata(&self.path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "canary's mode changed");
    }
}

/// `rollover convert INPUT --out home LIMITS EXTRA` under the address-space limit.
fn convert_bounded(wd: &Workdir, input: &str, extra: &[&str]) -> Home {
    let canary = Canary::plant(wd);
    let mut args = vec!["convert", input, "--out", "home"];
    args.extend_from_slice(&LIMITS);
    args.extend_from_slice(extra);
    let output = Command::new("prlimit")
        .arg(format!("--as={ADDRESS_SPACE}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_rollover"))
        .args(&args)
        .current_dir(wd.root())
        .output()
        .expect("prlimit (util-linux) runs rollover under an address-space limit");
    let run = Run {
        command: format!("prlimit --as={ADDRESS_SPACE} rollover {}", args.join(" ")),
        output,
    };
    assert!(
        matches!(run.code(), Some(0 | 1)),
        "expected exit 0 or 1\n{run}"
    );
    canary.check();
    assert_lock_released(wd);
    Home {
        root: wd.path("home"),
        run,
    }
}

/// Another run can take the output's lock at once (`flock -n`, as a run takes it): nothing
/// the run started still holds it.
fn assert_lock_released(wd: &Workdir) {
    let lock = wd.path("home/rollover");
    let taken = Command::new("flock")
        .args(["-n"])
        .arg(&lock)
        .arg("true")
        .status()
        .expect("flock (util-linux) tries the lock");
    assert!(taken.success(), "the lock {lock:?} is still held");
}

fn chat(text: &str) -> Value {
    json!({"messages": [
        {"role": "user", "content": text},
        {"role": "assistant", "content": "ok"},
    ]})
}

/// Writes `name` in `wd` as a zstd stream of what `write` writes.
pub(super) fn zstd_file(wd: &Workdir, name: &str, write: impl FnOnce(&mut dyn Write)) {
    let file = std::fs::File::create(wd.path(name)).unwrap();
    let mut encoder = zstd::stream::write::Encoder::new(file, 1).unwrap();
    write(&mut encoder);
    encoder.finish().unwrap();
}

#[test]
fn half_a_gibibyte_of_newlines_in_a_small_zstd_is_counted_in_bounded_memory() {
    let wd = Workdir::new("hostile_newlines");
    let newlines = 512usize << 20;
    zstd_file(&wd, "nl.jsonl.zst", |out| {
        let block = vec![b'\n'; 1 << 20];
        for _ in 0..newlines >> 20 {
            out.write_all(&block).unwrap();
        }
        out.write_all(chat("after the newlines").to_string().as_bytes())
            .unwrap();
        out.write_all(b"\n").unwrap();
    });
    assert!(std::fs::metadata(wd.path("nl.jsonl.zst")).unwrap().len() < 1 << 20);
    let home = convert_bounded(&wd, "nl.jsonl.zst", &[]);
    let summary = home.summary();
    assert_eq!(summary["blank_lines"], json!(newlines), "{summary}");
    assert_eq!(summary["converted"], json!(1), "{summary}");
}

#[test]
fn a_pretty_printed_array_larger_than_a_record_is_read_element_by_element() {
    let wd = Workdir::new("hostile_array");
    let rows: Vec<Value> = (0..20_000).map(|i| chat(&format!("row {i}"))).collect();
    let text = serde_json::to_string_pretty(&rows).unwrap();
    assert!(
        text.len() > 2 << 20,
        "the document is larger than --max-record-bytes"
    );
    wd.create("rows.json", &text);
    let home = convert_bounded(&wd, "rows.json", &["--dry-run"]);
    let summary = home.summary();
    assert_eq!(summary["converted"], json!(20_000), "{summary}");
    assert_eq!(summary["quarantined"], json!(0), "{summary}");
}

#[test]
fn a_chatgpt_zip_whose_conversations_json_expands_to_a_quarter_gibibyte_is_streamed() {
    let wd = Workdir::new("hostile_zip");
    let conversation = |id: &str, title: &str| {
        json!({"id": id, "title": title, "create_time": 1.7e9, "current_node": "b",
        "mapping": {
            "a": {"id": "a", "parent": null, "children": ["b"], "message": {"id": "a",
                "author": {"role": "user"}, "create_time": 1.7e9,
                "content": {"content_type": "text", "parts": ["hello"]}}},
            "b": {"id": "b", "parent": "a", "children": [], "message": {"id": "b",
                "author": {"role": "assistant"}, "create_time": 1.7e9 + 1.0,
                "content": {"content_type": "text", "parts": ["hi"]}}},
        }})
    };
    let file = std::fs::File::create(wd.path("export.zip")).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default()
        .compression_level(Some(1))
        .large_file(true);
    zip.start_file("conversations.json", options).unwrap();
    zip.write_all(b"[").unwrap();
    zip.write_all(conversation("small-1", "one").to_string().as_bytes())
        .unwrap();
    // A conversation whose title is 256 MiB: one record far over --max-record-bytes.
    let big = conversation("huge", "TITLE").to_string();
    let (before, after) = big.split_once("TITLE").unwrap();
    zip.write_all(b",").unwrap();
    zip.write_all(before.as_bytes()).unwrap();
    let block = vec![b'a'; 1 << 20];
    for _ in 0..256 {
        zip.write_all(&block).unwrap();
    }
    zip.write_all(after.as_bytes()).unwrap();
    zip.write_all(b",").unwrap();
    zip.write_all(conversation("small-2", "two").to_string().as_bytes())
        .unwrap();
    zip.write_all(b"]").unwrap();
    zip.finish().unwrap();
    assert!(std::fs::metadata(wd.path("export.zip")).unwrap().len() < 8 << 20);
    let home = convert_bounded(&wd, "export.zip", &[]);
    let summary = home.summary();
    assert_eq!(summary["converted"], json!(2), "{summary}");
    assert_eq!(summary["quarantined"], json!(1), "{summary}");
    let quarantine = home.quarantine();
    let reason = quarantine[0].to_string();
    assert!(reason.contains("max-record-bytes"), "{reason}");
    // The summary counts what was decompressed and read, not the zip's size.
    assert!(
        summary["bytes_read"].as_u64().unwrap() > 256 << 20,
        "{summary}"
    );
}

#[test]
fn a_claude_code_session_larger_than_the_conversation_limit_is_refused_with_the_reason() {
    let wd = Workdir::new("hostile_session");
    zstd_file(&wd, "session.jsonl.zst", |out| {
        let text = "x".repeat(4000);
        for i in 0..4_000 {
            let line = json!({"type": "user", "timestamp": "2025-12-24T10:00:00.000Z",
                "sessionId": "s-1", "uuid": format!("u-{i}"),
                "parentUuid": if i == 0 { Value::Null } else { json!(format!("u-{}", i - 1)) },
                "message": {"role": "user", "content": text}});
            writeln!(out, "{line}").unwrap();
        }
    });
    let home = convert_bounded(&wd, "session.jsonl.zst", &[]);
    assert_eq!(home.run.code(), Some(1), "{}", home.run);
    let summary = home.summary();
    let damage = summary["damaged_files"].to_string();
    assert!(
        damage.contains("--max-conversation-bytes") && damage.contains("claude-code"),
        "{summary}"
    );
    assert!(home.rollouts().is_empty());
}

#[test]
fn a_one_line_conversations_json_is_read_as_a_chatgpt_export() {
    let wd = Workdir::new("hostile_one_line");
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpora/sources/chatgpt-export/polylogue-native-conversation-v1.json");
    let conversation: Value = serde_json::from_slice(&std::fs::read(corpus).unwrap()).unwrap();
    let mut second = conversation.clone();
    second["id"] = json!("second-conversation");
    second["conversation_id"] = json!("second-conversation");
    let both = json!([conversation, second]);
    wd.create("one/conversations.json", both.to_string());
    wd.create(
        "pretty/conversations.json",
        serde_json::to_string_pretty(&both).unwrap(),
    );
    let one = wd.convert("one/conversations.json", "home-one", &[], 0);
    let pretty = wd.convert("pretty/conversations.json", "home-pretty", &[], 0);
    assert_eq!(one.summary()["converted"], json!(2));
    let bodies = |home: &Home| -> Vec<Vec<Value>> {
        home.all_rollouts().iter().map(|r| r.items()).collect()
    };
    assert_eq!(bodies(&one), bodies(&pretty));
}

#[test]
fn a_sessions_folder_that_is_a_symlink_is_written_through_only_with_write_through_links() {
    let wd = Workdir::new("hostile_sessions_link");
    wd.create_jsonl("in.jsonl", &[chat("hello")]);
    std::fs::create_dir_all(wd.path("home")).unwrap();
    std::fs::create_dir_all(wd.path("elsewhere")).unwrap();
    std::os::unix::fs::symlink(wd.path("elsewhere"), wd.path("home/sessions")).unwrap();
    let refused = wd.run(&["convert", "in.jsonl", "--out", "home"]);
    assert_eq!(refused.code(), Some(2), "{refused}");
    assert!(
        refused.stderr().contains("is a symlink to")
            && refused.stderr().contains("--write-through-links"),
        "{refused}"
    );
    assert_eq!(std::fs::read_dir(wd.path("elsewhere")).unwrap().count(), 0);
    let followed = wd.run(&[
        "convert",
        "in.jsonl",
        "--out",
        "home",
        "--write-through-links",
    ]);
    assert_eq!(followed.code(), Some(0), "{followed}");
    assert!(
        followed
            .stderr()
            .contains("writing through it (--write-through-links)"),
        "{followed}"
    );
    assert_eq!(std::fs::read_dir(wd.path("elsewhere")).unwrap().count(), 1);
}

#[test]
fn a_signal_during_a_pre_pass_stops_it_before_the_next_file_and_releases_the_lock() {
    let wd = Workdir::new("hostile_signal");
    for i in 0..400 {
        wd.create_jsonl(&format!("in/{i:03}.jsonl"), &[chat(&format!("file {i}"))]);
    }
    // The run sends itself SIGTERM as the plan's pre-pass takes its 50th file, and says so on
    // stderr of any file the pre-pass takes after it: none may be.
    let mut child = wd
        .command(&["convert", "in", "--out", "home"])
        .env("ROLLOVER_FAILPOINT", "sigterm-at:plan:50")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(!stderr.contains("after SIGTERM"), "{stderr}");
    assert!(stderr.contains("stopped by SIGTERM"), "{stderr}");
    assert!(!wd.path("home/sessions").exists());
    assert_lock_released(&wd);
    // The next run converts everything.
    let home = wd.convert("in", "home", &[], 0);
    assert_eq!(home.summary()["converted"], json!(400));
}
