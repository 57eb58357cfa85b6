//! The invariants of migration.md section 5, checked on what was written.
//!
//! In: a rollout's bytes (any rollout: ours before writing, or files Codex or an earlier
//! migration wrote) and the marker registry of the rules. Out: the [`Violation`]s, each with the
//! invariant, the 1-based line and a message. It reads only the bytes, never the converter's
//! data, so a converter bug cannot hide from it. Invariant 12 (accounting) needs the input and
//! lives in [`crate::audit::accounting`].

mod view;

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::convert::ids::is_uuid;
use crate::model::rollout::{
    KNOWN_PHASES, ROLE_ASSISTANT, ROLE_DEVELOPER, ROLE_USER, TAG_COMPACTED, TAG_EVENT_MSG,
    TAG_RESPONSE_ITEM, TAG_SESSION_META, TAG_TURN_CONTEXT,
};
use crate::model::time::parse_rfc3339_ms;
use crate::rules::Marker;
use view::{Kind, LineView, Payload};

/// The invariants, in the order of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Invariant {
    SessionMeta,
    LineFormat,
    Roles,
    ContentTypes,
    Phase,
    CallPairing,
    CallShapes,
    ReasoningPlacement,
    ContextualUser,
    BaseInstructions,
    UiParity,
    Accounting,
}

impl Invariant {
    pub const ALL: [Invariant; 12] = [
        Invariant::SessionMeta,
        Invariant::LineFormat,
        Invariant::Roles,
        Invariant::ContentTypes,
        Invariant::Phase,
        Invariant::CallPairing,
        Invariant::CallShapes,
        Invariant::ReasoningPlacement,
        Invariant::ContextualUser,
        Invariant::BaseInstructions,
        Invariant::UiParity,
        Invariant::Accounting,
    ];

    pub fn number(self) -> usize {
        match self {
            Invariant::SessionMeta => 1,
            Invariant::LineFormat => 2,
            Invariant::Roles => 3,
            Invariant::ContentTypes => 4,
            Invariant::Phase => 5,
            Invariant::CallPairing => 6,
            Invariant::CallShapes => 7,
            Invariant::ReasoningPlacement => 8,
            Invariant::ContextualUser => 9,
            Invariant::BaseInstructions => 10,
            Invariant::UiParity => 11,
            Invariant::Accounting => 12,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Invariant::SessionMeta => "session_meta",
            Invariant::LineFormat => "line_format",
            Invariant::Roles => "roles",
            Invariant::ContentTypes => "content_types",
            Invariant::Phase => "phase",
            Invariant::CallPairing => "call_pairing",
            Invariant::CallShapes => "call_shapes",
            Invariant::ReasoningPlacement => "reasoning_placement",
            Invariant::ContextualUser => "contextual_user",
            Invariant::BaseInstructions => "base_instructions",
            Invariant::UiParity => "ui_parity",
            Invariant::Accounting => "accounting",
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.number(), self.name())
    }
}

/// One broken invariant at one line (0 when it concerns the whole file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub invariant: Invariant,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: [{}] {}",
            self.line, self.invariant, self.message
        )
    }
}

const USER_CONTENT: [&str; 3] = ["input_text", "input_image", "input_audio"];
const CALL_TYPES: [&str; 3] = ["function_call", "custom_tool_call", "local_shell_call"];
const OUTPUT_TYPES: [&str; 2] = ["function_call_output", "custom_tool_call_output"];

/// A message of the rollout that needs a UI event.
struct Pending {
    line: usize,
}

/// Checks a rollout's bytes. `file_uuid` is the UUID in the file name, when there is one.
pub fn check(bytes: &[u8], file_uuid: Option<&str>, markers: &[Marker]) -> Vec<Violation> {
    let mut v = Vec::new();
    let mut add = |invariant: Invariant, line: usize, message: String| {
        v.push(Violation {
            invariant,
            line,
            message,
        })
    };
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        add(
            Invariant::LineFormat,
            1,
            "file starts with a UTF-8 byte-order mark".to_string(),
        );
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(err) => {
            let line = bytes[..err.valid_up_to()]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1;
            add(
                Invariant::LineFormat,
                line,
                format!(
                    "invalid UTF-8 at byte {}: Codex refuses the whole file",
                    err.valid_up_to()
                ),
            );
            return v;
        }
    };
    let body = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let last = memchr::memchr_iter(b'\n', body.as_bytes()).count() + 1;
    let mut lines: Vec<(usize, LineView)> = Vec::with_capacity(last);
    for (i, raw) in body.split('\n').enumerate() {
        let n = i + 1;
        if raw.is_empty() && n == last {
            break;
        }
        if raw.ends_with('\r') {
            add(Invariant::LineFormat, n, "CRLF line ending".to_string());
        }
        let raw = raw.trim_end_matches('\r');
        match parse_line(raw) {
            Ok(Some(line)) => lines.push((n, line)),
            Ok(None) => add(
                Invariant::LineFormat,
                n,
                "line is JSON but not an object".to_string(),
            ),
            Err(err) if raw.trim().is_empty() => {
                add(Invariant::LineFormat, n, format!("blank line ({err})"))
            }
            Err(err) => add(
                Invariant::LineFormat,
                n,
                format!("not JSON: {err} (Codex skips such a line silently)"),
            ),
        }
    }

    // 1. session_meta first and once, required fields, id equal to the file name's.
    let metas: Vec<usize> = lines
        .iter()
        .filter(|(_, l)| tag(l) == Some(TAG_SESSION_META))
        .map(|(n, _)| *n)
        .collect();
    let mut base_text: Option<&str> = None;
    match lines.first() {
        Some((n, first)) if tag(first) == Some(TAG_SESSION_META) => {
            let payload = first.payload();
            let id = match payload.id {
                Some(_) => Kind::String,
                None => Kind::Null,
            };
            for (key, kind) in [
                ("id", id),
                ("timestamp", payload.timestamp),
                ("cwd", payload.cwd),
                ("originator", payload.originator),
                ("cli_version", payload.cli_version),
            ] {
                if kind != Kind::String {
                    add(
                        Invariant::SessionMeta,
                        *n,
                        format!(
                            "session_meta has no string `{key}` (Codex cannot resume without it)"
                        ),
                    );
                }
            }
            if let Some(id) = payload.id.as_deref() {
                if !is_uuid(id) {
                    add(
                        Invariant::SessionMeta,
                        *n,
                        format!("session id `{id}` is not a UUID"),
                    );
                }
                if let Some(name_id) = file_uuid {
                    if !name_id.eq_ignore_ascii_case(id) {
                        add(
                            Invariant::SessionMeta,
                            *n,
                            format!("session id `{id}` differs from the file name's `{name_id}`"),
                        );
                    }
                }
            }
            match &payload.base_instructions {
                _ if payload.base_instructions_not_object => add(
                    Invariant::SessionMeta,
                    *n,
                    "base_instructions is not an object".to_string(),
                ),
                None => {}
                Some(o) => match o.0.text.as_deref() {
                    Some("") => add(
                        Invariant::BaseInstructions,
                        *n,
                        "empty base_instructions.text: the model would get no instructions at all"
                            .to_string(),
                    ),
                    Some(t) => base_text = Some(t),
                    None => add(
                        Invariant::SessionMeta,
                        *n,
                        "base_instructions has no string `text`".to_string(),
                    ),
                },
            }
        }
        Some((n, _)) => add(
            Invariant::SessionMeta,
            *n,
            "first line is not session_meta".to_string(),
        ),
        None => add(Invariant::SessionMeta, 0, "no lines".to_string()),
    }
    for n in metas.iter().skip(1) {
        add(
            Invariant::SessionMeta,
            *n,
            "second session_meta line".to_string(),
        );
    }

    // 2. timestamps well-formed and non-decreasing.
    let mut previous: Option<i64> = None;
    for (n, line) in &lines {
        match line.timestamp.as_deref().and_then(parse_rfc3339_ms) {
            None => add(
                Invariant::LineFormat,
                *n,
                "timestamp missing or not RFC 3339".to_string(),
            ),
            Some(ms) => {
                if previous.is_some_and(|p| ms < p) {
                    add(
                        Invariant::LineFormat,
                        *n,
                        "timestamp goes backwards".to_string(),
                    );
                }
                previous = Some(ms);
            }
        }
        match tag(line) {
            Some(
                TAG_SESSION_META | TAG_RESPONSE_ITEM | TAG_EVENT_MSG | TAG_COMPACTED
                | TAG_TURN_CONTEXT,
            ) => {}
            Some(other) => add(
                Invariant::LineFormat,
                *n,
                format!("unknown line type `{other}` (Codex skips it silently)"),
            ),
            None => add(
                Invariant::LineFormat,
                *n,
                "line has no string `type`".to_string(),
            ),
        }
        if line.payload.is_none() {
            add(
                Invariant::LineFormat,
                *n,
                "line has no object `payload`".to_string(),
            );
        }
    }

    // Items in order, with the events.
    let mut calls: HashMap<String, (usize, bool)> = HashMap::new();
    let mut call_seen_ids: HashSet<String> = HashSet::new();
    let mut reasoning_open: Option<usize> = None;
    let mut users_needing_event: Vec<Pending> = Vec::new();
    let mut assistants_needing_event: Vec<Pending> = Vec::new();
    let mut user_events = 0usize;
    let mut agent_events = 0usize;
    let mut last_contextual: Option<usize> = None;
    for (n, line) in &lines {
        let n = *n;
        let payload = line.payload();
        let contextual_before = last_contextual.take();
        match tag(line) {
            Some(TAG_EVENT_MSG) => match payload.kind.as_deref() {
                Some("user_message") => {
                    user_events += 1;
                    if let Some(at) = contextual_before {
                        add(Invariant::ContextualUser, at, "real user text matches a registered marker: Codex would hide this message".to_string());
                    }
                }
                Some("agent_message") => agent_events += 1,
                _ => {}
            },
            Some(TAG_RESPONSE_ITEM) => {
                let kind = payload.kind.as_deref().unwrap_or("");
                if let Some(open) = reasoning_open.take() {
                    // Reasoning is the model's: it explains an assistant message or a call. A
                    // user or developer message right after it means the item it explained
                    // was lost (any message used to pass here).
                    let explained = if kind == "message" {
                        payload.role.as_deref() == Some(ROLE_ASSISTANT)
                    } else {
                        CALL_TYPES.contains(&kind)
                    };
                    if !explained {
                        let what = if kind == "message" {
                            format!(
                                "a {} message",
                                payload.role.as_deref().unwrap_or("(no role)")
                            )
                        } else {
                            format!("`{kind}`")
                        };
                        add(Invariant::ReasoningPlacement, open, format!("reasoning item followed by {what}, not by the assistant message or call it explains"));
                    }
                }
                match kind {
                    "message"
                        if check_message(
                            n,
                            payload,
                            markers,
                            base_text,
                            &mut add,
                            &mut users_needing_event,
                            &mut assistants_needing_event,
                        ) =>
                    {
                        last_contextual = Some(n);
                    }
                    "reasoning" => {
                        reasoning_open = Some(n);
                        if let Some(parts) = &payload.content {
                            if parts.iter().any(|p| {
                                !matches!(p.0.kind.as_deref(), Some("reasoning_text" | "text"))
                            }) {
                                add(
                                    Invariant::ContentTypes,
                                    n,
                                    "reasoning content holds a part that is not reasoning_text"
                                        .to_string(),
                                );
                            }
                        }
                    }
                    k if CALL_TYPES.contains(&k) => {
                        let Some(id) = payload.call_id.as_deref() else {
                            add(
                                Invariant::CallShapes,
                                n,
                                format!("{k} has no string call_id"),
                            );
                            continue;
                        };
                        if !call_seen_ids.insert(id.to_string()) {
                            add(
                                Invariant::CallPairing,
                                n,
                                format!("call id `{id}` used by an earlier call"),
                            );
                        }
                        calls.insert(id.to_string(), (n, false));
                        if k == "function_call" && payload.arguments != Kind::String {
                            add(
                                Invariant::CallShapes,
                                n,
                                "function_call arguments is not a string (Codex drops the call)"
                                    .to_string(),
                            );
                        }
                        if k == "custom_tool_call" && payload.input != Kind::String {
                            add(
                                Invariant::CallShapes,
                                n,
                                "custom_tool_call input is not a string".to_string(),
                            );
                        }
                    }
                    k if OUTPUT_TYPES.contains(&k) => {
                        match payload.output {
                            Kind::String | Kind::Array => {}
                            other => add(
                                Invariant::CallShapes,
                                n,
                                format!(
                                    "output is {}, not a string or an array (Codex drops the line)",
                                    other.article_name()
                                ),
                            ),
                        }
                        let Some(id) = payload.call_id.as_deref() else {
                            add(
                                Invariant::CallShapes,
                                n,
                                format!("{k} has no string call_id"),
                            );
                            continue;
                        };
                        match calls.get_mut(id) {
                            None => add(
                                Invariant::CallPairing,
                                n,
                                format!("output for `{id}` without an earlier call"),
                            ),
                            Some((_, answered)) if *answered => add(
                                Invariant::CallPairing,
                                n,
                                format!("second output for `{id}`"),
                            ),
                            Some((_, answered)) => *answered = true,
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    if let Some(open) = reasoning_open {
        add(
            Invariant::ReasoningPlacement,
            open,
            "reasoning item at the end, with nothing after it".to_string(),
        );
    }
    let mut unanswered: Vec<(usize, &String)> = calls
        .iter()
        .filter(|(_, (_, a))| !a)
        .map(|(id, (n, _))| (*n, id))
        .collect();
    unanswered.sort();
    for (n, id) in unanswered {
        add(
            Invariant::CallPairing,
            n,
            format!("call `{id}` has no output (Codex would invent an \"aborted\" one)"),
        );
    }
    // 11. UI parity: events paired with messages in order, by count.
    for pending in users_needing_event.iter().skip(user_events) {
        add(
            Invariant::UiParity,
            pending.line,
            "real user message without a user_message event".to_string(),
        );
    }
    for pending in assistants_needing_event.iter().skip(agent_events) {
        add(
            Invariant::UiParity,
            pending.line,
            "assistant message without an agent_message event".to_string(),
        );
    }
    v.sort_by_key(|x| (x.line, x.invariant));
    v
}

/// One line to its view; `Ok(None)` when it is JSON but not an object. A lone surrogate
/// escape is an error here: simd-json would read it as U+0000, and serde_json skips it unchecked
/// in the values the views ignore, while Codex (serde_json) rejects the line and so loses it.
fn parse_line(raw: &str) -> Result<Option<LineView<'_>>, String> {
    // Only a line with a `\u` escape can hold a surrogate: most have none, and skip the scan
    // and its copy.
    if memchr::memmem::find(raw.as_bytes(), b"\\u").is_some() {
        let lone = crate::input::parse::repair_lone_surrogates(&mut raw.as_bytes().to_vec());
        if lone > 0 {
            return Err(format!(
                "{lone} lone surrogate escape(s), which Codex cannot parse"
            ));
        }
    }
    // Deeper than serde_json's limit: Codex cannot read the line, so serde_json says why. (The
    // fast way skips unread values without a depth limit, and simd-json would recurse without
    // one and overflow the stack.)
    if crate::input::parse::nests_deeper_than(raw.as_bytes(), crate::input::parse::MAX_DEPTH) {
        let value = serde_json::from_str::<Value>(raw).map_err(|e| e.to_string())?;
        return Ok(view::from_value(&value));
    }
    if let Some(line) = view::fast(raw) {
        return Ok(Some(line));
    }
    // Not JSON, or a shape the fast way does not read: parse to a `Value` (simd-json for speed,
    // serde_json for the error message).
    let mut buf = raw.as_bytes().to_vec();
    let value = match simd_json::serde::from_slice::<Value>(&mut buf) {
        Ok(value) => value,
        Err(_) => serde_json::from_str::<Value>(raw).map_err(|e| e.to_string())?,
    };
    Ok(view::from_value(&value))
}

fn tag<'v>(line: &'v LineView) -> Option<&'v str> {
    line.tag.as_deref()
}

fn check_message(
    n: usize,
    payload: &Payload,
    markers: &[Marker],
    base: Option<&str>,
    add: &mut impl FnMut(Invariant, usize, String),
    users: &mut Vec<Pending>,
    assistants: &mut Vec<Pending>,
) -> bool {
    let role = payload.role.as_deref().unwrap_or("");
    match role {
        ROLE_USER | ROLE_ASSISTANT | ROLE_DEVELOPER => {}
        "system" => add(
            Invariant::Roles,
            n,
            "system message: Codex drops it from the history without a word".to_string(),
        ),
        other => add(
            Invariant::Roles,
            n,
            format!("unknown role `{other}`: the API rejects it"),
        ),
    }
    if payload.phase.is_some() || payload.phase_json.is_some() {
        let phase = payload.phase.as_deref();
        if role != ROLE_ASSISTANT {
            add(Invariant::Phase, n, format!("phase on a {role} message"));
        } else if !phase.is_some_and(|p| KNOWN_PHASES.contains(&p)) {
            // Shown as JSON, quoted when it is a string.
            let shown = match phase {
                Some(p) => Value::from(p).to_string(),
                None => payload
                    .phase_json
                    .as_deref()
                    .unwrap_or_default()
                    .to_string(),
            };
            add(
                Invariant::Phase,
                n,
                format!("unknown phase {shown} (Codex drops the message)"),
            );
        }
    }
    let Some(content) = &payload.content else {
        add(
            Invariant::ContentTypes,
            n,
            "content is not an array (Codex drops the message)".to_string(),
        );
        return false;
    };
    let allowed: &[&str] = if role == ROLE_ASSISTANT {
        &["output_text"]
    } else {
        &USER_CONTENT
    };
    for part in content {
        let kind = part.0.kind.as_deref().unwrap_or("(none)");
        if !allowed.contains(&kind) {
            add(
                Invariant::ContentTypes,
                n,
                format!("{role} content holds `{kind}`"),
            );
        }
    }
    let texts: Vec<&str> = content.iter().filter_map(|p| p.0.text.as_deref()).collect();
    match role {
        ROLE_USER => {
            let fragments = texts
                .iter()
                .filter(|t| markers.iter().any(|m| m.wraps(t)))
                .count();
            if fragments == 0 {
                users.push(Pending { line: n });
                return false;
            }
            if fragments < texts.len() || content.len() > texts.len() {
                add(
                    Invariant::ContextualUser,
                    n,
                    "user message mixes registered fragments and real text: Codex hides all of it"
                        .to_string(),
                );
            }
            return true;
        }
        ROLE_ASSISTANT => assistants.push(Pending { line: n }),
        ROLE_DEVELOPER => {
            if let Some(base) = base {
                if texts.contains(&base) {
                    add(
                        Invariant::BaseInstructions,
                        n,
                        "base instructions repeated as a developer message".to_string(),
                    );
                }
            }
        }
        _ => {}
    }
    false
}

/// The UUID in a rollout file name (`rollout-...-<uuid>.jsonl[.zst]`), if any.
pub fn uuid_in_file_name(name: &str) -> Option<&str> {
    let stem = name
        .strip_suffix(".jsonl.zst")
        .or_else(|| name.strip_suffix(".jsonl"))?;
    let start = stem.len().checked_sub(36)?;
    let candidate = stem.get(start..)?;
    is_uuid(candidate).then_some(candidate)
}
