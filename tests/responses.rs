//! `--format responses`: golden bodies for both wire encodings, and every body written from
//! `samples/`, `../shared/corpora` and the golden input deserializing into async-openai's typed
//! model of the Responses create-request.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::Workdir;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Converts `inputs` into a fresh OUT with `flags`; returns every body line written.
fn convert(inputs: &[PathBuf], flags: &[&str]) -> Vec<String> {
    let out = Workdir::new("responses");
    let status = Command::new(env!("CARGO_BIN_EXE_rollover"))
        .arg("convert")
        .args(inputs)
        .arg("--out")
        .arg(out.root())
        .args(["--format", "responses"])
        .args(flags)
        .output()
        .expect("run rollover");
    assert!(
        status.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let mut files = Vec::new();
    walk(&out.root().join("responses"), &mut files);
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            fs::read_to_string(f)
                .expect("read body file")
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn golden(name: &str, flags: &[&str]) {
    let dir = root().join("tests/golden/responses");
    golden_of(&dir.join("input.jsonl"), name, flags);
}

/// The bodies written from `input` with `flags` equal `tests/golden/responses/NAME`.
fn golden_of(input: &Path, name: &str, flags: &[&str]) {
    let dir = root().join("tests/golden/responses");
    let got = convert(&[input.to_path_buf()], flags).join("\n") + "\n";
    let path = dir.join(name);
    if std::env::var_os("ROLLOVER_BLESS").is_some() {
        fs::write(&path, &got).expect("bless");
    }
    let want = fs::read_to_string(&path).expect("golden file (ROLLOVER_BLESS=1 writes it)");
    assert_eq!(got, want, "{name} differs");
}

#[test]
fn golden_normal_wire() {
    golden("normal.jsonl", &[]);
}

#[test]
fn golden_lite_wire() {
    golden("lite.jsonl", &["--wire", "lite"]);
}

/// The shipped samples in both wires: tools given as legacy `functions` and `tools`, records
/// with and without base instructions, images with and without `detail`, reasoning, refusals.
#[test]
fn golden_samples_in_both_wires() {
    let samples = root().join("samples");
    golden_of(&samples, "samples-normal.jsonl", &[]);
    golden_of(&samples, "samples-lite.jsonl", &["--wire", "lite"]);
}

/// Adapts a body to the typed model where Codex's wire and the OpenAPI schema differ by
/// design, and only there: Lite's `additional_tools` item is Codex's (its tools are checked as
/// typed `Tool`s instead), and the schema's assistant `OutputMessage` requires the `id` and
/// `status` (and each `output_text` its `annotations`) that Codex leaves out of replayed
/// history and the API accepts without.
fn adapt(mut body: Value) -> Value {
    if let Some(input) = body["input"].as_array_mut() {
        input.retain(|item| {
            if item["type"] != "additional_tools" {
                return true;
            }
            let tools = rollover_typed_checks::tools(item["tools"].clone());
            assert!(tools.is_ok(), "additional_tools: {tools:?}");
            false
        });
        for item in input.iter_mut() {
            if item["type"] == "message" && item["role"] == "assistant" {
                item["id"] = "msg_placeholder".into();
                item["status"] = "completed".into();
                for part in item["content"].as_array_mut().into_iter().flatten() {
                    if part.get("annotations").is_none() {
                        part["annotations"] = Value::Array(Vec::new());
                    }
                }
            }
        }
    }
    body
}

#[test]
fn every_body_deserializes_into_the_typed_create_request() {
    let corpora = root().join("../shared/corpora");
    let mut inputs = vec![
        root().join("samples"),
        root().join("tests/golden/responses/input.jsonl"),
    ];
    if let Ok(entries) = fs::read_dir(&corpora) {
        inputs.extend(entries.flatten().map(|e| e.path()));
    }
    for flags in [&[][..], &["--wire", "lite"][..]] {
        let lines = convert(&inputs, flags);
        assert!(lines.len() > 10, "too few bodies: {}", lines.len());
        for line in lines {
            let body: Value = serde_json::from_str(&line).expect("a JSON line");
            let typed = rollover_typed_checks::create_response(adapt(body));
            assert!(typed.is_ok(), "{flags:?}: {typed:?}\n{line}");
        }
    }
}

/// The typed check can fail: a body the create-request does not model is refused, with
/// serde's reason.
#[test]
fn a_body_outside_the_typed_model_is_refused() {
    let body = serde_json::json!({"model": "gpt-5", "input": [{"type": "message", "role": 7}]});
    let refused = rollover_typed_checks::create_response(body);
    assert!(refused.is_err_and(|e| !e.is_empty()));
    let tools = rollover_typed_checks::tools(serde_json::json!([{"type": "no_such_tool"}]));
    assert!(tools.is_err());
}
