//! Reads stay inside the inputs (issue 26, item 4): an image a record points to is read only
//! when it is a regular file inside the input tree, within 20 MiB; anything else is the
//! policy's placeholder, counted with the reason, and none of its bytes reach the output. A
//! ChatGPT export pointer names a file exactly, and a zip export's entries are bounded.
//!
//! Each run has a deadline: a FIFO or `/dev/zero` read as an image would hang the run or grow
//! it without end, and the test must fail rather than wait forever.

use std::io::{Cursor, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use crate::common::{Home, Run, Workdir};

/// Long enough for a loaded machine, short enough that a hang fails the test.
const DEADLINE: Duration = Duration::from_secs(30);

/// `rollover convert INPUT --out HOME EXTRA...` in `wd`, killed (and the test failed) if it
/// runs past the deadline; it must end with exit 0 or 1.
fn convert_within_deadline(wd: &Workdir, input: &str, home: &str, extra: &[&str]) -> Home {
    let mut args = vec!["convert", input, "--out", home];
    args.extend_from_slice(extra);
    let mut child = wd
        .command(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rollover");
    let started = Instant::now();
    while child.try_wait().expect("wait for rollover").is_none() {
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let output = child.wait_with_output().expect("reap rollover");
            panic!(
                "rollover {} ran past {DEADLINE:?} (killed)\n{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let run = Run {
        command: format!("rollover {}", args.join(" ")),
        output: child.wait_with_output().expect("collect rollover's output"),
    };
    assert!(
        matches!(run.code(), Some(0 | 1)),
        "expected exit 0 or 1\n{run}"
    );
    Home {
        root: wd.path(home),
        run,
    }
}

/// A PNG that decodes (Codex would load it), `width` pixels wide, so each test's secret differs
/// from the images it may read.
fn png(width: u32) -> Vec<u8> {
    let image = image::RgbImage::from_pixel(width, 1, image::Rgb([200, 30, 90]));
    let mut bytes = Cursor::new(Vec::new());
    image
        .write_to(&mut bytes, image::ImageFormat::Png)
        .expect("encode a PNG");
    bytes.into_inner()
}

fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// No file the run wrote holds `secret`, raw or as the base64 a `data:` URL would carry.
fn assert_not_in_output(home: &Home, secret: &[u8]) {
    let encoded = base64(secret);
    for (path, bytes) in home.tree() {
        assert!(
            !contains(&bytes, secret) && !contains(&bytes, encoded.as_bytes()),
            "{path} holds the bytes of a file outside the input\n{}",
            home.run
        );
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Every `what` the conversations' decisions record under `rule`, with its count, sorted.
fn reasons(home: &Home, rule: &str) -> Vec<(String, u64)> {
    let mut found: Vec<(String, u64)> = home
        .conversations()
        .iter()
        .flat_map(|c| c["decisions"].as_array().cloned().unwrap_or_default())
        .filter(|d| d["rule"] == rule)
        .map(|d| {
            let what = d["what"].as_str().unwrap_or_default().to_string();
            (what, d["count"].as_u64().unwrap_or(0))
        })
        .collect();
    found.sort();
    found
}

fn fired(home: &Home, rule: &str) -> Value {
    home.summary()["rules_fired"][rule].clone()
}

/// A ShareGPT row (OpenAI style with media) whose user turn shows `image`.
fn row(image: &str) -> Value {
    json!({"messages": [
        {"role": "user", "content": "<image>What is this?"},
        {"role": "assistant", "content": "A picture."}
    ], "images": [image]})
}

/// The dataset `in/data/rows.jsonl`, one row per image reference, and a secret PNG beside
/// `in/` (outside the tree): what is returned.
fn dataset(wd: &Workdir, images: &[&str]) -> Vec<u8> {
    let secret = png(7);
    wd.create("secret.png", &secret);
    let rows: Vec<Value> = images.iter().map(|i| row(i)).collect();
    wd.create_jsonl("in/data/rows.jsonl", &rows);
    secret
}

#[test]
fn sharegpt_image_absolute_path_is_refused() {
    let wd = Workdir::new("image_absolute");
    let absolute = wd.path("secret.png").display().to_string();
    let secret = dataset(&wd, &[&absolute]);
    let home = convert_within_deadline(&wd, "in", "home", &[]);
    assert_eq!(fired(&home, "policy.missing_image"), 1);
    assert_eq!(
        reasons(&home, "policy.missing_image"),
        [("image path outside the dataset: placeholder".to_string(), 1)]
    );
    assert_not_in_output(&home, &secret);
}

#[test]
fn sharegpt_image_dotdot_escape_is_refused() {
    let wd = Workdir::new("image_dotdot");
    // The first climbs to in/ (inside the tree: read); the others out of it.
    wd.create("in/inside.png", png(3));
    let secret = dataset(
        &wd,
        &[
            "../inside.png",
            "../../secret.png",
            "img/../../../secret.png",
        ],
    );
    let home = convert_within_deadline(&wd, "in", "home", &[]);
    assert_eq!(fired(&home, "policy.missing_image"), 2);
    assert_eq!(
        reasons(&home, "policy.missing_image"),
        vec![("image path outside the dataset: placeholder".to_string(), 1); 2]
    );
    assert_not_in_output(&home, &secret);
    let inside = base64(&png(3));
    assert!(
        home.tree()
            .iter()
            .any(|(_, b)| contains(b, inside.as_bytes())),
        "the image inside the tree is read\n{}",
        home.run
    );
}

#[test]
fn sharegpt_image_symlink_to_outside_is_refused_even_with_follow() {
    let wd = Workdir::new("image_symlink");
    let secret = dataset(&wd, &["out.png", "in.png"]);
    wd.create("in/data/real.png", png(3));
    std::os::unix::fs::symlink(wd.path("secret.png"), wd.path("in/data/out.png")).unwrap();
    std::os::unix::fs::symlink("real.png", wd.path("in/data/in.png")).unwrap();

    let home = convert_within_deadline(&wd, "in", "home", &[]);
    assert_eq!(fired(&home, "policy.missing_image"), 2);
    assert_eq!(
        reasons(&home, "policy.missing_image"),
        vec![
            (
                "image path through a symlink (--follow reads it): placeholder".to_string(),
                1
            );
            2
        ]
    );
    assert_not_in_output(&home, &secret);

    // With --follow, a link inside the tree is read; one leading out of it is not.
    let home = convert_within_deadline(&wd, "in", "home2", &["--follow"]);
    assert_eq!(fired(&home, "policy.missing_image"), 1);
    assert_eq!(
        reasons(&home, "policy.missing_image"),
        [("image path outside the dataset: placeholder".to_string(), 1)]
    );
    assert_not_in_output(&home, &secret);
    let inside = base64(&png(3));
    assert!(home
        .tree()
        .iter()
        .any(|(_, b)| contains(b, inside.as_bytes())));
}

#[test]
fn sharegpt_image_dev_zero_is_refused_unread() {
    let wd = Workdir::new("image_dev_zero");
    dataset(
        &wd,
        &[
            "/dev/zero",
            "../../../../../../../../../../dev/zero",
            "zero.png",
        ],
    );
    std::os::unix::fs::symlink("/dev/zero", wd.path("in/data/zero.png")).unwrap();
    for (home, link) in [
        (
            "home",
            "image path through a symlink (--follow reads it): placeholder",
        ),
        ("home2", "image path outside the dataset: placeholder"),
    ] {
        let extra: &[&str] = if home == "home" { &[] } else { &["--follow"] };
        let home = convert_within_deadline(&wd, "in", home, extra);
        assert_eq!(fired(&home, "policy.missing_image"), 3);
        let mut expected = vec![
            ("image path outside the dataset: placeholder".to_string(), 1),
            ("image path outside the dataset: placeholder".to_string(), 1),
            (link.to_string(), 1),
        ];
        expected.sort();
        assert_eq!(reasons(&home, "policy.missing_image"), expected);
    }
}

#[test]
fn sharegpt_image_fifo_is_refused_without_blocking() {
    let wd = Workdir::new("image_fifo");
    dataset(&wd, &["pipe.png"]);
    let status = std::process::Command::new("mkfifo")
        .arg(wd.path("in/data/pipe.png"))
        .status()
        .expect("run mkfifo");
    assert!(status.success());
    // Before: the run opened the FIFO and waited for a writer forever.
    let home = convert_within_deadline(&wd, "in", "home", &[]);
    assert_eq!(fired(&home, "policy.missing_image"), 1);
    assert_eq!(
        reasons(&home, "policy.missing_image"),
        [("image is not a regular file: placeholder".to_string(), 1)]
    );
}

#[test]
fn sharegpt_image_over_20_mib_is_refused_unread() {
    let wd = Workdir::new("image_oversized");
    dataset(&wd, &["big.png", "ok.png"]);
    wd.create("in/data/ok.png", png(3));
    // A PNG header, then a hole up to 20 MiB + 1 (sparse: nothing written).
    let big = std::fs::File::create(wd.path("in/data/big.png")).unwrap();
    (&big).write_all(&png(5)).unwrap();
    big.set_len((20 << 20) + 1).unwrap();
    let home = convert_within_deadline(&wd, "in", "home", &[]);
    assert_eq!(fired(&home, "policy.missing_image"), 1);
    assert_eq!(
        reasons(&home, "policy.missing_image"),
        [("image larger than 20 MiB: placeholder".to_string(), 1)]
    );
    let ok = base64(&png(3));
    assert!(home.tree().iter().any(|(_, b)| contains(b, ok.as_bytes())));
}

/// A ChatGPT conversation whose user message shows the file `pointer` names.
fn chatgpt_conversation(id: &str, pointer: &str) -> Value {
    let user = json!({"author": {"role": "user"}, "recipient": "all", "create_time": 1_700_000_000.0,
    "content": {"content_type": "multimodal_text", "parts": [
        "what is this?",
        {"content_type": "image_asset_pointer", "asset_pointer": pointer, "width": 1, "height": 1}
    ]}});
    let answer = json!({"author": {"role": "assistant"}, "recipient": "all", "end_turn": true,
        "create_time": 1_700_000_001.0,
        "content": {"content_type": "text", "parts": ["a picture"]}});
    json!({"id": id, "title": id, "create_time": 1_700_000_000.0, "current_node": "a", "mapping": {
        "root": {"id": "root", "parent": null, "children": ["u"], "message": null},
        "u": {"id": "u", "parent": "root", "children": ["a"], "message": user},
        "a": {"id": "a", "parent": "u", "children": [], "message": answer}
    }})
}

/// An export's `conversations.json` as ChatGPT writes it, over many lines (a one-line array is
/// read as one record: issue 26, item 8, not this test's business).
fn pretty(conversations: &Value) -> String {
    serde_json::to_string_pretty(conversations).expect("serialize")
}

/// The `data:` URL rollover writes for a PNG.
fn data_url(bytes: &[u8]) -> String {
    format!("data:image/png;base64,{}", base64(bytes))
}

#[test]
fn chatgpt_loose_export_symlink_out_of_the_export_is_refused() {
    let wd = Workdir::new("chatgpt_symlink");
    let secret = png(7);
    wd.create("secret.png", &secret);
    wd.create("elsewhere/file-Other.png", &secret);
    let conversations = json!([
        chatgpt_conversation("one", "file-service://file-Secret"),
        chatgpt_conversation("two", "file-service://file-Other"),
    ]);
    wd.create("export/conversations.json", pretty(&conversations));
    std::os::unix::fs::symlink("../secret.png", wd.path("export/file-Secret-photo.png")).unwrap();
    std::os::unix::fs::symlink("../elsewhere", wd.path("export/user-abc")).unwrap();

    let home = convert_within_deadline(&wd, "export", "home", &[]);
    assert_eq!(fired(&home, "policy.unresolved_image"), 2);
    assert_eq!(
        reasons(&home, "policy.unresolved_image"),
        [
            ("image not in the export".to_string(), 1),
            (
                "image path through a symlink (--follow reads it)".to_string(),
                1
            ),
        ]
    );
    assert_not_in_output(&home, &secret);

    let home = convert_within_deadline(&wd, "export", "home2", &["--follow"]);
    assert_eq!(fired(&home, "policy.unresolved_image"), 2);
    assert_eq!(
        reasons(&home, "policy.unresolved_image"),
        [
            ("image not in the export".to_string(), 1),
            ("image symlink leads outside the export".to_string(), 1),
        ]
    );
    assert_not_in_output(&home, &secret);
}

#[test]
fn chatgpt_pointer_matches_a_name_exactly_not_by_prefix() {
    let wd = Workdir::new("chatgpt_exact");
    let image = png(3);
    let conversations = json!([
        chatgpt_conversation("prefix", "sediment://file"),
        chatgpt_conversation("exact", "sediment://file_XYZ"),
    ]);
    wd.create("export/conversations.json", pretty(&conversations));
    wd.create("export/file_XYZ.png", &image);
    let check = |home: &Home| {
        assert_eq!(fired(home, "policy.unresolved_image"), 1);
        assert_eq!(
            reasons(home, "policy.unresolved_image"),
            [("image not in the export".to_string(), 1)]
        );
        let url = data_url(&image);
        let with_image = home
            .rollouts()
            .iter()
            .filter(|p| contains(&std::fs::read(p).unwrap(), url.as_bytes()))
            .count();
        assert_eq!(with_image, 1, "{}", home.run);
    };
    check(&convert_within_deadline(&wd, "export", "home", &[]));

    // The same in the export zip.
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    zip.start_file("conversations.json", options).unwrap();
    zip.write_all(conversations.to_string().as_bytes()).unwrap();
    zip.start_file("file_XYZ.png", options).unwrap();
    zip.write_all(&image).unwrap();
    wd.create("zipped/export.zip", zip.finish().unwrap().into_inner());
    check(&convert_within_deadline(&wd, "zipped", "home2", &[]));
}

/// Sets the uncompressed size of the entry `name` to `size`, in its local header and in the
/// central directory, as a hostile archive declares it.
fn declare_size(zip: &mut [u8], name: &str, size: u32) {
    let mut patched = 0;
    let mut at = 0;
    while at + 46 <= zip.len() {
        let header = &zip[at..at + 4];
        let (size_at, name_len_at, name_at) = if header == b"PK\x03\x04" {
            (at + 22, at + 26, at + 30)
        } else if header == b"PK\x01\x02" {
            (at + 24, at + 28, at + 46)
        } else {
            at += 1;
            continue;
        };
        let len = u16::from_le_bytes([zip[name_len_at], zip[name_len_at + 1]]) as usize;
        if zip.get(name_at..name_at + len) == Some(name.as_bytes()) {
            zip[size_at..size_at + 4].copy_from_slice(&size.to_le_bytes());
            patched += 1;
        }
        at += 4;
    }
    assert_eq!(patched, 2, "local header and central directory of {name}");
}

#[test]
fn chatgpt_zip_image_entries_are_bounded() {
    let wd = Workdir::new("chatgpt_zip_bounded");
    let conversations = json!([
        chatgpt_conversation("declared", "file-service://file-Declared"),
        chatgpt_conversation("lying", "file-service://file-Lying"),
        chatgpt_conversation("fine", "file-service://file-Fine"),
    ]);
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let stored =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let deflated = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("conversations.json", deflated).unwrap();
    zip.write_all(conversations.to_string().as_bytes()).unwrap();
    // Declares 1.5 GiB: refused from its header, unread.
    zip.start_file("file-Declared.png", stored).unwrap();
    zip.write_all(&png(5)).unwrap();
    // Declares 100 bytes and inflates to 24 MiB (a PNG header, then zeros: ~24 KB deflated):
    // read no further than the cap.
    zip.start_file("file-Lying.png", deflated).unwrap();
    zip.write_all(&png(6)).unwrap();
    zip.write_all(&vec![0u8; 24 << 20]).unwrap();
    zip.start_file("file-Fine.png", stored).unwrap();
    zip.write_all(&png(3)).unwrap();
    let mut bytes = zip.finish().unwrap().into_inner();
    declare_size(&mut bytes, "file-Declared.png", 3 << 29);
    declare_size(&mut bytes, "file-Lying.png", 100);
    wd.create("export.zip", &bytes);

    let home = convert_within_deadline(&wd, "export.zip", "home", &[]);
    assert_eq!(home.summary()["converted"], 3, "{}", home.run);
    assert_eq!(fired(&home, "policy.unresolved_image"), 2);
    assert_eq!(
        reasons(&home, "policy.unresolved_image"),
        vec![("image larger than 20 MiB".to_string(), 1); 2]
    );
    let fine = data_url(&png(3));
    assert!(home
        .tree()
        .iter()
        .any(|(_, b)| contains(b, fine.as_bytes())));
    // Nothing of the refused entries: the rollouts stay small.
    let written: usize = home
        .rollouts()
        .iter()
        .map(|p| std::fs::read(p).unwrap().len())
        .sum();
    assert!(written < 64 << 10, "{written} bytes of rollouts");
}
