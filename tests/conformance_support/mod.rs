//! Conformance harness: drive the real Codex CLI offline against a fake Responses server and
//! capture the model-visible history it rebuilds from a rollout (std + serde_json only).
//!
//! Adapted from the research harness (`scratch/conformance/fake_server.rs`, Codex 0.169.0).
//! Observed facts it relies on:
//! - Codex POSTs `{base_url}/responses` with a `Content-Length` JSON body (HTTP/1.1, no
//!   compression for a custom provider) and needs `response.completed` in the SSE answer.
//! - With an unknown model slug (`gpt-fake`) the request `input` is
//!   `[developer(base instructions, id "msg_<uuid v5>"), <history as restored from the rollout>,
//!     developer(fresh context, "msg_<uuid v7>"), user(<environment_context>, "msg_<uuid v7>"),
//!     user(prompt, "msg_<uuid v7>")]`.
//!   A catalog model with `use_responses_lite` changes that layout: keep the model unknown.
//! - Outside traffic (update check, analytics, plugins, apps), endless reconnects, login shells
//!   and proxies are switched off by [`write_codex_config`] and [`codex_command`].
#![allow(dead_code)]

pub mod picker;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Max time one `codex exec resume` may take before it is killed.
pub const RESUME_TIMEOUT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------------
// The Codex binary: `$ROLLOVER_CODEX_BIN`, or the one `.ci/run` installed into a cache folder.
// ---------------------------------------------------------------------------------------------

/// The Codex binary under test.
#[derive(Debug, Clone)]
pub struct Codex {
    pub bin: PathBuf,
    /// What `codex --version` printed, e.g. `codex-cli 0.169.0`.
    pub version: String,
    /// Where the binary came from (for the test's output).
    pub origin: String,
}

static CODEXES: OnceLock<Vec<Result<Codex, String>>> = OnceLock::new();

/// Every Codex binary to test against, one per supported release (`rollover::validate::
/// SUPPORTED_CODEX`, the list `rollover --version` names), oldest first, found once per test
/// process. `ROLLOVER_CODEX_VERSION` (one release, or several separated by commas) picks
/// others; `ROLLOVER_CODEX_BIN` tests one binary you have. Panics with every reason when one is
/// missing, naming `.ci/run` (which installs them): the conformance test never skips a release.
pub fn codexes() -> Vec<&'static Codex> {
    let all = CODEXES.get_or_init(provision_all);
    let failed: Vec<&String> = all.iter().filter_map(|c| c.as_ref().err()).collect();
    if !failed.is_empty() {
        let reasons: Vec<&str> = failed.iter().map(|r| r.as_str()).collect();
        panic!("no Codex binary to test against:\n{}", reasons.join("\n\n"));
    }
    all.iter().filter_map(|c| c.as_ref().ok()).collect()
}

/// The releases to test: `ROLLOVER_CODEX_VERSION`, else every supported one.
pub fn releases() -> Vec<String> {
    match env_nonempty("ROLLOVER_CODEX_VERSION") {
        Some(asked) => asked
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
        None => rollover::validate::SUPPORTED_CODEX
            .iter()
            .map(|v| v.to_string())
            .collect(),
    }
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn provision_all() -> Vec<Result<Codex, String>> {
    if let Some(bin) = env_nonempty("ROLLOVER_CODEX_BIN") {
        let bin = PathBuf::from(bin);
        if !bin.is_file() {
            return vec![Err(format!(
                "ROLLOVER_CODEX_BIN={} is not a file",
                bin.display()
            ))];
        }
        return vec![codex_version(&bin).map(|version| {
            let supported = rollover::validate::SUPPORTED_CODEX
                .iter()
                .any(|release| version.split_whitespace().any(|w| w == *release));
            if !supported {
                eprintln!(
                    "[conformance] {} says {version:?}: not one of the supported releases {}",
                    bin.display(),
                    rollover::validate::SUPPORTED_CODEX.join(", ")
                );
            }
            Codex {
                origin: format!("ROLLOVER_CODEX_BIN={}", bin.display()),
                bin,
                version,
            }
        })];
    }
    releases().iter().map(|v| provision_codex(v)).collect()
}

/// `@openai/codex@<version>` from the cache `.ci/run` installs it in.
fn provision_codex(version: &str) -> Result<Codex, String> {
    let caches = match env_nonempty("ROLLOVER_CODEX_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = env_nonempty("HOME").ok_or(
                "HOME is not set: set ROLLOVER_CODEX_CACHE (where to install Codex) \
                 or ROLLOVER_CODEX_BIN (an installed binary)",
            )?;
            Path::new(&home).join(".cache").join("rollover-codex")
        }
    };
    let cache = caches.join(version);
    let install = format!(
        "install it with `bash .ci/run` (it installs every supported release there), or \
         `npm install --prefix {} @openai/codex@{version}`, or point ROLLOVER_CODEX_BIN at a \
         codex binary",
        cache.display()
    );
    let Some(bin) = find_codex_binary(&cache) else {
        return Err(format!(
            "Codex {version} is not installed in {}: {install}",
            cache.display()
        ));
    };
    let printed = codex_version(&bin)?;
    if !printed.split_whitespace().any(|w| w == version) {
        return Err(format!(
            "{} says {printed:?}, not {version}: {install}",
            bin.display()
        ));
    }
    Ok(Codex {
        origin: format!("@openai/codex@{version} installed in {}", cache.display()),
        bin,
        version: printed,
    })
}

fn codex_version(bin: &Path) -> Result<String, String> {
    let mut cmd = Command::new(bin);
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = run_with_timeout(cmd, Duration::from_secs(60))
        .map_err(|e| format!("cannot run {} --version: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --version failed ({}):\n{}{}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// npm's name for this platform's package, as the `@openai/codex` wrapper maps it.
fn platform_package() -> Option<&'static str> {
    use std::env::consts::{ARCH, OS};
    Some(match (OS, ARCH) {
        ("linux" | "android", "x86_64") => "@openai/codex-linux-x64",
        ("linux" | "android", "aarch64") => "@openai/codex-linux-arm64",
        ("macos", "x86_64") => "@openai/codex-darwin-x64",
        ("macos", "aarch64") => "@openai/codex-darwin-arm64",
        ("windows", "x86_64") => "@openai/codex-win32-x64",
        ("windows", "aarch64") => "@openai/codex-win32-arm64",
        _ => return None,
    })
}

/// The codex binary of an npm prefix: `node_modules/<platform package>/vendor/*/bin/codex`,
/// trying this platform's package, then those the wrapper's `optionalDependencies` name for
/// this OS and architecture, then the wrapper's own `vendor/`.
pub fn find_codex_binary(prefix: &Path) -> Option<PathBuf> {
    let modules = prefix.join("node_modules");
    let mut packages: Vec<String> = platform_package().into_iter().map(String::from).collect();
    let (os, arch) = match platform_package() {
        Some(p) => {
            let tail = p.trim_start_matches("@openai/codex-");
            let (os, arch) = tail.split_once('-').unwrap_or((tail, ""));
            (os.to_string(), arch.to_string())
        }
        None => (String::new(), String::new()),
    };
    if let Ok(text) = std::fs::read_to_string(modules.join("@openai/codex/package.json")) {
        if let Ok(manifest) = serde_json::from_str::<Value>(&text) {
            if let Some(deps) = manifest["optionalDependencies"].as_object() {
                for name in deps.keys() {
                    if !os.is_empty()
                        && name.contains(&os)
                        && name.contains(&arch)
                        && !packages.contains(name)
                    {
                        packages.push(name.clone());
                    }
                }
            }
        }
    }
    packages.push("@openai/codex".to_string());
    let exe = if cfg!(windows) { "codex.exe" } else { "codex" };
    for package in packages {
        let vendor = modules.join(&package).join("vendor");
        let Ok(entries) = std::fs::read_dir(&vendor) else {
            continue;
        };
        let mut triples: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        triples.sort();
        for triple in triples {
            let bin = triple.join("bin").join(exe);
            if bin.is_file() {
                return Some(bin);
            }
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Fake Responses server.
// ---------------------------------------------------------------------------------------------

/// SSE body answered to every `POST .../responses`. `response.completed` is required.
pub const SSE_BODY: &str = concat!(
    "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\",",
    "\"role\":\"assistant\",\"id\":\"msg_1\",\"content\":[{\"type\":\"output_text\",\"text\":\"ok\"}]}}\n\n",
    "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\"}}\n\n"
);

#[derive(Default)]
struct Shared {
    requests: Vec<Value>,
    problems: Vec<String>,
}

/// Binds 127.0.0.1:0 and answers each `POST …/responses` with [`SSE_BODY`] (HTTP/1.1,
/// keep-alive, Content-Length or chunked bodies, `Expect: 100-continue`). Stops when dropped.
pub struct FakeServer {
    port: u16,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
}

impl FakeServer {
    pub fn start() -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local_addr").port();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (sh, st) = (shared.clone(), stop.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = conn {
                    let sh = sh.clone();
                    thread::spawn(move || {
                        if let Err(e) = serve_connection(stream, &sh) {
                            sh.lock()
                                .unwrap()
                                .problems
                                .push(format!("connection error: {e}"));
                        }
                    });
                }
            }
        });
        FakeServer { port, shared, stop }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every request body received so far, parsed, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.lock().unwrap().requests.clone()
    }

    /// Protocol surprises (other paths, non-JSON or compressed bodies). Should be empty.
    pub fn problems(&self) -> Vec<String> {
        self.shared.lock().unwrap().problems.clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so its thread ends.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve_connection(stream: TcpStream, shared: &Arc<Mutex<Shared>>) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if !line.trim().is_empty() {
                break;
            }
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();

        let mut content_length: Option<usize> = None;
        let mut chunked = false;
        let mut close = false;
        let mut expect_continue = false;
        let mut content_encoding: Option<String> = None;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end_matches(['\r', '\n']);
            if h.is_empty() {
                break;
            }
            if let Some((name, value)) = h.split_once(':') {
                let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
                match name.as_str() {
                    "content-length" => content_length = value.parse().ok(),
                    "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                    "connection" => close = value.eq_ignore_ascii_case("close"),
                    "expect" => expect_continue = value.eq_ignore_ascii_case("100-continue"),
                    "content-encoding" => content_encoding = Some(value.to_string()),
                    _ => {}
                }
            }
        }
        if expect_continue {
            writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        let body = if chunked {
            read_chunked(&mut reader)?
        } else {
            let mut buf = vec![0u8; content_length.unwrap_or(0)];
            reader.read_exact(&mut buf)?;
            buf
        };

        let path = target.split('?').next().unwrap_or("");
        if method == "POST" && path.ends_with("/responses") {
            {
                let mut sh = shared.lock().unwrap();
                match content_encoding.as_deref() {
                    Some(enc) if !enc.eq_ignore_ascii_case("identity") => sh.problems.push(
                        format!("{method} {target}: unsupported content-encoding {enc}"),
                    ),
                    _ => match serde_json::from_slice::<Value>(&body) {
                        Ok(v) => sh.requests.push(v),
                        Err(e) => sh
                            .problems
                            .push(format!("{method} {target}: body is not JSON: {e}")),
                    },
                }
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                 content-length: {}\r\n\r\n",
                SSE_BODY.len()
            );
            writer.write_all(head.as_bytes())?;
            writer.write_all(SSE_BODY.as_bytes())?;
        } else {
            shared
                .lock()
                .unwrap()
                .problems
                .push(format!("unexpected request: {method} {target}"));
            writer.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")?;
        }
        writer.flush()?;
        if close {
            let _ = writer.shutdown(Shutdown::Both);
            return Ok(());
        }
    }
}

fn read_chunked<R: BufRead>(reader: &mut R) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        if reader.read_line(&mut size_line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "eof in chunk size",
            ));
        }
        let hex = size_line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(hex, 16).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("chunk size {hex:?}: {e}"),
            )
        })?;
        if size == 0 {
            loop {
                let mut t = String::new();
                if reader.read_line(&mut t)? == 0 || t.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = String::new();
        reader.read_line(&mut crlf)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Running Codex.
// ---------------------------------------------------------------------------------------------

/// Write `$codex_home/config.toml` pointing Codex at the fake server on `port`, with everything
/// that would reach outside 127.0.0.1, retry forever or run a login shell switched off.
pub fn write_codex_config(codex_home: &Path, port: u16) {
    std::fs::create_dir_all(codex_home).expect("create CODEX_HOME");
    let toml = format!(
        r#"model = "gpt-fake"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake"
base_url = "http://127.0.0.1:{port}/v1"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
shell_snapshot = false
unbounded_connection_retries = false
"#
    );
    std::fs::write(codex_home.join("config.toml"), toml).expect("write config.toml");
}

/// A `codex` command with its own CODEX_HOME and a clean environment (PATH only, HOME =
/// CODEX_HOME, no proxy), stdin = /dev/null, run in the empty folder `$codex_home/cwd` (so no
/// AGENTS.md is picked up).
pub fn codex_command(codex_bin: &Path, codex_home: &Path) -> Command {
    let cwd = codex_home.join("cwd");
    std::fs::create_dir_all(&cwd).expect("create cwd");
    let mut cmd = Command::new(codex_bin);
    cmd.current_dir(&cwd)
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("HOME", codex_home)
        .env("CODEX_HOME", codex_home)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// `codex exec --skip-git-repo-check resume <id> <prompt>`, killed after [`RESUME_TIMEOUT`].
pub fn run_resume(codex_bin: &Path, codex_home: &Path, id: &str, prompt: &str) -> Output {
    let mut cmd = codex_command(codex_bin, codex_home);
    cmd.args(["exec", "--skip-git-repo-check", "resume", id, prompt]);
    run_with_timeout(cmd, RESUME_TIMEOUT).expect("spawn codex")
}

/// Spawn, drain stdout/stderr in threads, poll `try_wait`, kill on timeout (then stderr ends
/// with a "[harness] timed out" line).
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> std::io::Result<Output> {
    let mut child = cmd.spawn()?;
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let t_out = thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut v);
        }
        v
    });
    let t_err = thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut v);
        }
        v
    });
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if start.elapsed() > timeout {
            timed_out = true;
            let _ = child.kill();
            break child.wait()?;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let stdout = t_out.join().unwrap_or_default();
    let mut stderr = t_err.join().unwrap_or_default();
    if timed_out {
        stderr.extend_from_slice(
            format!("\n[harness] timed out after {timeout:?}, killed\n").as_bytes(),
        );
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

// ---------------------------------------------------------------------------------------------
// Rollouts and the comparison.
// ---------------------------------------------------------------------------------------------

/// What a rollout file asks Codex to restore.
#[derive(Debug, Clone)]
pub struct Rollout {
    pub id: String,
    /// `session_meta.payload.base_instructions.text`, when present.
    pub base_instructions: Option<String>,
    /// The `response_item` payloads, in file order; after a `compacted` line with a
    /// `replacement_history`, that history and the items after it (what Codex resumes from).
    pub items: Vec<Value>,
    /// Line tags other than `session_meta`, `response_item` and `event_msg`.
    pub other_tags: Vec<String>,
}

/// The lines of a (plain `.jsonl`) rollout file, each parsed.
pub fn read_rollout_lines(path: &Path) -> Result<Vec<Value>, String> {
    if path.extension().is_some_and(|e| e != "jsonl") {
        return Err(format!(
            "{}: only plain .jsonl rollouts are checked",
            path.display()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text =
        String::from_utf8(bytes).map_err(|e| format!("{} is not UTF-8: {e}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str(l)
                .map_err(|e| format!("{} line {}: not JSON: {e}", path.display(), n + 1))
        })
        .collect()
}

pub fn parse_rollout(path: &Path) -> Result<Rollout, String> {
    let lines = read_rollout_lines(path)?;
    let meta = lines
        .first()
        .filter(|l| l["type"] == "session_meta")
        .ok_or_else(|| format!("{}: first line is not session_meta", path.display()))?;
    let id = meta["payload"]["id"]
        .as_str()
        .ok_or_else(|| format!("{}: session_meta has no id", path.display()))?
        .to_string();
    let base_instructions = meta["payload"]["base_instructions"]["text"]
        .as_str()
        .map(str::to_string);
    let mut items = Vec::new();
    let mut other_tags = Vec::new();
    for line in &lines[1..] {
        match line["type"].as_str() {
            Some("response_item") => items.push(line["payload"].clone()),
            // Codex replaces the history by the replacement history: the items before are
            // kept for display only.
            Some("compacted") if line["payload"]["replacement_history"].is_array() => {
                items = line["payload"]["replacement_history"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
            }
            Some("event_msg") => {}
            Some(tag) => other_tags.push(tag.to_string()),
            None => other_tags.push("<no type>".to_string()),
        }
    }
    Ok(Rollout {
        id,
        base_instructions,
        items,
        other_tags,
    })
}

/// The one harmless re-serialisation Codex 0.169 applies to a response item: a `reasoning`
/// item gets `"content": null` / `"encrypted_content": null` when absent. Nothing else is
/// forgiven (key order never matters: items are compared as JSON values). Unknown keys that
/// Codex drops, `"aborted"` outputs, truncation, replaced images, dropped lines all show up as
/// mismatches.
pub fn normalize_like_codex(item: &Value) -> Value {
    let mut v = item.clone();
    if let Some(obj) = v.as_object_mut() {
        if obj.get("type").and_then(Value::as_str) == Some("reasoning") {
            for k in ["content", "encrypted_content"] {
                obj.entry(k).or_insert(Value::Null);
            }
        }
    }
    v
}

/// Is `id` of the form `msg_<uuid>` with the given UUID version digit (b'5' or b'7')?
fn is_msg_uuid(id: Option<&Value>, version: u8) -> bool {
    let Some(s) = id
        .and_then(Value::as_str)
        .and_then(|s| s.strip_prefix("msg_"))
    else {
        return false;
    };
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
        && b[14] == version
}

fn is_message_with_role(item: &Value, role: &str) -> bool {
    item["type"] == "message" && item["role"] == role
}

fn texts(item: &Value) -> Vec<&str> {
    item["content"]
        .as_array()
        .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect())
        .unwrap_or_default()
}

/// A Codex-injected fresh-context item: a developer or user message with a `msg_<uuid v7>` id
/// whose parts are all `input_text` runtime fragments (`<...>` or `# AGENTS.md instructions
/// for `). Items restored from a rollout keep the id they had (ours have none), so they never
/// match.
pub fn is_fresh_context(item: &Value) -> bool {
    if !(is_message_with_role(item, "developer") || is_message_with_role(item, "user")) {
        return false;
    }
    if !is_msg_uuid(item.get("id"), b'7') {
        return false;
    }
    match item["content"].as_array() {
        Some(parts) if !parts.is_empty() => parts.iter().all(|p| {
            p["type"] == "input_text"
                && p["text"].as_str().is_some_and(|t| {
                    let t = t.trim_start();
                    t.starts_with('<') || t.starts_with("# AGENTS.md instructions for ")
                })
        }),
        _ => false,
    }
}

fn show(v: &Value) -> String {
    let s = v.to_string();
    const MAX: usize = 1500;
    if s.len() > MAX {
        let mut cut = MAX;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}… ({} bytes)", &s[..cut], s.len())
    } else {
        s
    }
}

/// Compare one request's `input` with what the rollout asks Codex to restore:
/// `input[0]` = developer message with exactly the base instructions (when the rollout has
/// some; otherwise it is Codex's default prompt and is skipped), then exactly our
/// response items in our order, then Codex's fresh context (at least one developer item and a
/// user `<environment_context>` item), then the prompt. `Err` describes the first difference.
pub fn compare_input(rollout: &Rollout, input: &[Value], prompt: &str) -> Result<(), String> {
    let first = input
        .first()
        .ok_or("the request has an empty `input`".to_string())?;
    if !is_message_with_role(first, "developer") {
        return Err(format!(
            "input[0] is not a developer message (base instructions): {}",
            show(first)
        ));
    }
    if let Some(text) = &rollout.base_instructions {
        let want = json!([{"type": "input_text", "text": text}]);
        if first["content"] != want {
            return Err(format!(
                "base instructions mismatch: session_meta.base_instructions.text is {}, \
                 Codex sent input[0] = {}",
                show(&Value::String(text.clone())),
                show(first)
            ));
        }
    }
    let rest = &input[1..];

    // The prompt, last.
    let want_prompt = json!([{"type": "input_text", "text": prompt}]);
    let last = rest.last();
    if !last.is_some_and(|l| is_message_with_role(l, "user") && l["content"] == want_prompt) {
        return Err(format!(
            "the last input item is not the prompt {prompt:?}: {}",
            last.map(show).unwrap_or_default()
        ));
    }
    let rest = &rest[..rest.len() - 1];

    // Codex's fresh context, just before the prompt.
    let mut history_end = rest.len();
    while history_end > 0 && is_fresh_context(&rest[history_end - 1]) {
        history_end -= 1;
    }
    let (history, fresh) = rest.split_at(history_end);

    let expected: Vec<Value> = rollout.items.iter().map(normalize_like_codex).collect();
    if let Some(i) =
        (0..expected.len().max(history.len())).find(|&i| expected.get(i) != history.get(i))
    {
        let ours = expected
            .get(i)
            .map(show)
            .unwrap_or_else(|| "(nothing: Codex sent more items than we wrote)".into());
        let theirs = history
            .get(i)
            .map(show)
            .unwrap_or_else(|| "(nothing: Codex sent fewer items than we wrote)".into());
        return Err(format!(
            "history mismatch at response item #{i} (we wrote {} items, Codex sent {} history \
             items):\n    we wrote:   {ours}\n    Codex sent: {theirs}",
            expected.len(),
            history.len()
        ));
    }

    if rollout.other_tags.iter().all(|t| t != "turn_context") {
        let has_developer = fresh.iter().any(|f| f["role"] == "developer");
        let has_env = fresh.iter().any(|f| {
            f["role"] == "user"
                && texts(f)
                    .iter()
                    .any(|t| t.trim_start().starts_with("<environment_context>"))
        });
        if !has_developer || !has_env {
            return Err(format!(
                "Codex's fresh context (developer + <environment_context> items) is missing \
                 after our history: found {} item(s): {}",
                fresh.len(),
                fresh.iter().map(show).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(())
}

/// What one resume showed.
#[derive(Debug)]
pub struct ResumeCheck {
    pub elapsed: Duration,
    pub items: usize,
}

/// The prompt sent on every resume.
pub const PROMPT: &str = "conformance check: please continue";

/// Copy `rollout_file` into a fresh CODEX_HOME `home` (at `home/<relative>`, `relative` being
/// its `sessions/YYYY/MM/DD/...` path), start a fake server, `codex exec resume <id>`, and
/// check exit status and the request against the rollout. The request bodies are kept in
/// `home/request-N.json` (evidence when the home is kept).
pub fn check_resume(
    codex_bin: &Path,
    home: &Path,
    rollout_file: &Path,
    relative: &Path,
) -> Result<ResumeCheck, String> {
    let rollout = parse_rollout(rollout_file)?;
    if rollout.other_tags.iter().any(|t| t == "compacted") {
        return Err(format!(
            "{}: has a `compacted` line without a replacement history: this check does not \
             model how Codex rebuilds a compacted history",
            rollout_file.display()
        ));
    }
    let target = home.join(relative);
    std::fs::create_dir_all(target.parent().expect("rollout has a parent folder"))
        .map_err(|e| format!("cannot create {}: {e}", target.display()))?;
    std::fs::copy(rollout_file, &target)
        .map_err(|e| format!("cannot copy {}: {e}", rollout_file.display()))?;
    let server = FakeServer::start();
    write_codex_config(home, server.port());
    let started = Instant::now();
    let out = run_resume(codex_bin, home, &rollout.id, PROMPT);
    let elapsed = started.elapsed();
    let requests = server.requests();
    let problems = server.problems();
    drop(server);
    for (n, body) in requests.iter().enumerate() {
        let _ = std::fs::write(
            home.join(format!("request-{}.json", n + 1)),
            serde_json::to_vec_pretty(body).unwrap_or_default(),
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr_tail = {
        let s = stderr.trim_end();
        let mut cut = s.len().saturating_sub(3000);
        while !s.is_char_boundary(cut) {
            cut += 1;
        }
        &s[cut..]
    };
    if !out.status.success() {
        return Err(format!(
            "codex exec resume {} exited with {} after {elapsed:.2?}; stderr (tail):\n{stderr_tail}",
            rollout.id, out.status
        ));
    }
    if !problems.is_empty() {
        return Err(format!("the fake server saw problems: {problems:?}"));
    }
    if requests.len() != 1 {
        return Err(format!(
            "Codex made {} requests, expected exactly one (a compaction request?); stderr \
             (tail):\n{stderr_tail}",
            requests.len()
        ));
    }
    let input = requests[0]["input"]
        .as_array()
        .ok_or("the request has no `input` array")?;
    compare_input(&rollout, input, PROMPT)?;
    validate_resumed(rollout_file, &target)?;
    Ok(ResumeCheck {
        elapsed,
        items: rollout.items.len(),
    })
}

/// The rollout as Codex left it, with the turn it ran appended, must pass `rollover validate`:
/// validate accepts everything Codex itself writes. Codex must have appended something, or the
/// check proves nothing.
fn validate_resumed(original: &Path, resumed: &Path) -> Result<(), String> {
    let lines = |path: &Path| read_rollout_lines(path).map(|l| l.len());
    let (before, after) = (lines(original)?, lines(resumed)?);
    if after <= before {
        return Err(format!(
            "Codex appended nothing to {} ({before} lines before the resume, {after} after)",
            resumed.display()
        ));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_rollover"))
        .args(["validate", "--json"])
        .arg(resumed)
        .output()
        .map_err(|e| format!("cannot run rollover validate: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "rollover validate fails the rollout after Codex resumed it ({}; {before} lines migrated, \
         {after} after the resume):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Rewrite a rollout's lines in place through `edit` (one parsed JSON value per line).
pub fn edit_rollout(path: &Path, edit: impl FnOnce(&mut Vec<Value>)) {
    let mut lines = read_rollout_lines(path).expect("read the rollout");
    edit(&mut lines);
    let mut text = String::new();
    for line in &lines {
        text.push_str(&serde_json::to_string(line).expect("serialise a line"));
        text.push('\n');
    }
    std::fs::write(path, text).expect("write the rollout");
}
