//! The README's "Open the result in Codex" steps, run against the real Codex: its `config.toml`
//! snippet, and the session picker's listing, read through `codex app-server` (JSON-RPC, one
//! JSON message per line on stdio): `initialize`, `initialized`, then `thread/list` with the
//! documented `cwd` filter (codex-rs app-server-protocol v2 `ThreadListParams`; omitting `cwd`
//! lists every folder, as `codex resume --all` does).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use super::codex_command;

/// The first ```toml block of the README section headed `section`: the snippet users copy.
pub fn readme_toml(readme: &str, section: &str) -> String {
    let start = readme
        .find(section)
        .unwrap_or_else(|| panic!("README has no section {section:?}"));
    let rest = &readme[start..];
    let open = rest
        .find("```toml\n")
        .expect("a ```toml block in the section")
        + 8;
    let close = rest[open..].find("```").expect("the ```toml block ends") + open;
    rest[open..close].to_string()
}

/// Writes `$codex_home/config.toml`: the README's snippet, wrapped in the keys that keep Codex
/// offline in a test (no update check, no analytics, no plugin or app lookups). Top-level keys
/// go first and tables last, so the snippet's own tables are not extended.
pub fn write_readme_config(codex_home: &Path, snippet: &str) {
    std::fs::create_dir_all(codex_home).expect("create CODEX_HOME");
    let toml = format!(
        "check_for_update_on_startup = false\n\n{snippet}\n[analytics]\nenabled = false\n\n[features]\nplugins = false\nremote_plugin = false\napps = false\nshell_snapshot = false\n"
    );
    std::fs::write(codex_home.join("config.toml"), toml).expect("write config.toml");
}

/// `thread/list` through `codex app-server`: the threads the picker would show, with `cwd`
/// as the filter (None: every folder). Returns the response's `data`.
pub fn thread_list(codex_bin: &Path, codex_home: &Path, cwd: Option<&str>) -> Vec<Value> {
    let mut cmd = codex_command(codex_bin, codex_home);
    cmd.arg("app-server").stdin(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn codex app-server");
    let mut stdin = child.stdin.take().expect("app-server stdin");
    let stdout = child.stdout.take().expect("app-server stdout");
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut params = json!({"limit": 100});
    if let Some(cwd) = cwd {
        params["cwd"] = json!(cwd);
    }
    let messages = [
        json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "rollover-conformance", "version": "1"}}}),
        json!({"method": "initialized"}),
        json!({"id": 2, "method": "thread/list", "params": params}),
    ];
    for message in messages {
        writeln!(stdin, "{message}").expect("write to app-server");
    }
    stdin.flush().expect("flush app-server stdin");
    let mut seen = Vec::new();
    let result = loop {
        let line = match received.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => line,
            Err(_) => break None,
        };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            seen.push(line);
            continue;
        };
        if message["id"] == 2 {
            break Some(message);
        }
        seen.push(line);
    };
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let Some(response) = result else {
        panic!(
            "codex app-server gave no thread/list answer; it said:\n{}",
            seen.join("\n")
        );
    };
    assert!(
        response.get("error").is_none(),
        "thread/list failed: {response}"
    );
    response["result"]["data"]
        .as_array()
        .unwrap_or_else(|| panic!("thread/list answer without data: {response}"))
        .clone()
}
