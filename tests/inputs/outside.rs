//! Reads stay inside the inputs (issue 26, item 4): an image a record points to is read only
//! when it is a regular file inside the input tree, within 20 MiB; anything else is the
//! policy's placeholder, counted with the reason, and none of its bytes reach the output.
//!
//! Each run has a deadline: a FIFO or `/dev/zero` read as an image would hang the run or grow
//! it without end, and the test must fail rather than wait forever.

use std::io::{Cursor, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use super::common::{Home, Run, Workdir};

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
