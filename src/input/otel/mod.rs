//! OpenTelemetry GenAI traces: OTLP JSON files (the collector's file exporter, one
//! `{"resourceSpans": [...]}` export per line, or one export for the whole file) and JSON
//! Lines of spans (OTLP span objects, or the OpenTelemetry SDK's `span.to_json()`).
//!
//! In: spans, one record each. The source layer streams an OTLP export span by span
//! (`source::nested`), and the pipeline holds a trace's spans only until its root span comes
//! ([`FormatReader::group`]: exporters write a span when it ends, so a trace's root comes
//! last), so memory is bounded by the traces open at once, each held as its spans, never by
//! the file; a trace whose root span is not in the file stays open to the file's end. Time is
//! linear in the spans (the chains are built in linear time, `super::chain`).
//!
//! Out: per trace, its inference spans as conversations. A span carries a conversation as
//! the GenAI semantic conventions write it: `gen_ai.input.messages`,
//! `gen_ai.output.messages` (`{role, parts: [text | tool_call{id, name, arguments} |
//! tool_call_response{id, response} | reasoning | blob | uri | file | …], finish_reason}`),
//! `gen_ai.system_instructions` and `gen_ai.tool.definitions`, as span attributes or on a
//! `gen_ai.client.inference.operation.details` event; older traces carry the deprecated
//! per-message events (`gen_ai.system.message`, `gen_ai.user.message`,
//! `gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`) or `gen_ai.prompt` /
//! `gen_ai.completion` (a JSON list of chat messages, or OpenLLMetry's flattened
//! `gen_ai.prompt.<n>.role`/`.content`). Each inference span resends the history, so a
//! trace's spans are chained as logged requests are (`policy.resent_history`): a chain is
//! one conversation, rebuilt from its longest input and that span's output (its first
//! choice; further choices are counted, `builtin.extra-choices`). System instructions are a
//! system message the rule files classify; `reasoning` parts are reasoning; tool calls and
//! responses are calls and outputs paired by id. A conversation's id is its trace id and
//! root span (`<trace>/<root span>`, and `/<first span>` for a trace's further chains).
//!
//! A span with no GenAI messages (the agent's own spans, `execute_tool` spans, HTTP spans)
//! is dropped by `policy.structural_line` and counted; every span field and attribute not
//! read is named in the audit's ignored fields. A record that is not a span is refused with
//! why.

use std::collections::{BTreeSet, HashMap};

use serde::Deserialize;
use serde_json::{json, Map, Value};

mod attributes;

use attributes::{attributes, event_role, json_value, message_parts, read_attributes};

use super::builder::TranscriptBuilder;
use super::chain::{self, Link};
use super::fields::text_or_json;
use super::format::{
    DroppedRecord, FileRead, FormatReader, Granularity, Group, InputRecord, ReadContext,
    SourceFormat,
};
use super::media::{content, file_part, inline_part, json_kind, linked_part};
use super::InputError;
use crate::model::time::parse_rfc3339_ms;
use crate::model::transcript::{
    Content, Message, Part, ReasoningOrigin, Role, Thinking, ToolCall, Transcript,
};
use crate::rules::policy::ResentHistory;
use crate::rules::{Builtin, DropOrQuarantine, PolicyId};

pub(crate) struct OtelReader;

impl SourceFormat {
    /// OpenTelemetry GenAI traces (OTLP JSON, JSON Lines of spans).
    pub const OTEL: SourceFormat = SourceFormat::named("otel").with_global_ids();
}

const FORMAT: SourceFormat = SourceFormat::OTEL;

/// Attribute values nest (`arrayValue`, `kvlistValue`) no deeper than this is read: deeper
/// values are cut (`null`), so that reading one never recurses on the input's depth.
const MAX_DEPTH: usize = 64;

impl FormatReader for OtelReader {
    fn format(&self) -> SourceFormat {
        FORMAT
    }

    fn describe(&self) -> &'static str {
        "OpenTelemetry GenAI traces (OTLP JSON, JSON Lines of spans)"
    }

    fn granularity(&self) -> Granularity {
        Granularity::File
    }

    fn detect(&self, first: Option<&Value>, _raw: &[u8]) -> bool {
        first.is_some_and(|v| is_span(v) || v.get("resourceSpans").is_some_and(Value::is_array))
    }

    fn read(&self, records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
        read_spans(records, context)
    }

    fn group(&self, bytes: &[u8]) -> Group {
        #[derive(Deserialize)]
        struct Context<'a> {
            #[serde(borrow, default)]
            trace_id: Option<std::borrow::Cow<'a, str>>,
        }
        #[derive(Deserialize)]
        struct Probe<'a> {
            #[serde(rename = "traceId", borrow, default)]
            trace_id: Option<std::borrow::Cow<'a, str>>,
            #[serde(rename = "parentSpanId", borrow, default)]
            parent: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow, default)]
            context: Option<Context<'a>>,
            #[serde(borrow, default)]
            parent_id: Option<std::borrow::Cow<'a, str>>,
        }
        let Ok(probe) = serde_json::from_slice::<Probe<'_>>(bytes) else {
            return Group::Alone;
        };
        let trace = probe
            .trace_id
            .or_else(|| probe.context.and_then(|c| c.trace_id));
        let Some(trace) = trace.filter(|t| !t.is_empty()) else {
            return Group::Alone;
        };
        let root = probe
            .parent
            .or(probe.parent_id)
            .is_none_or(|p| p.is_empty());
        if root {
            Group::Last(trace.into_owned())
        } else {
            Group::Member(trace.into_owned())
        }
    }
}

/// An OTLP span (`traceId`, `spanId`) or an SDK span (`context.trace_id`, `context.span_id`).
pub(crate) fn is_span(value: &Value) -> bool {
    let otlp = value.get("traceId").is_some() && value.get("spanId").is_some();
    let sdk = value
        .get("context")
        .is_some_and(|c| c.get("trace_id").is_some() && c.get("span_id").is_some());
    otlp || sdk
}

fn refuse(problem: impl Into<String>) -> InputError {
    InputError::NotInFormat {
        format: FORMAT,
        problem: problem.into(),
    }
}

/// A span as written by OTLP JSON or by the SDK's `to_json()`: the fields read, and the
/// rest kept by name for the audit.
#[derive(Debug, Deserialize)]
struct SpanRecord {
    #[serde(rename = "traceId", default)]
    trace_id: Option<Value>,
    #[serde(rename = "spanId", default)]
    span_id: Option<Value>,
    #[serde(rename = "parentSpanId", default)]
    parent_span_id: Option<Value>,
    #[serde(rename = "startTimeUnixNano", default)]
    start_nanos: Option<Value>,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    parent_id: Option<Value>,
    #[serde(default)]
    start_time: Option<Value>,
    #[serde(default)]
    attributes: Option<Value>,
    #[serde(default)]
    events: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A span event: its name and attributes (`body`, for an event logged as a record).
#[derive(Debug, Deserialize)]
struct EventRecord {
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    attributes: Option<Value>,
    #[serde(default)]
    body: Option<Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// One span, read.
struct Span {
    record: usize,
    trace: String,
    id: String,
    parent: Option<String>,
    start: Option<i64>,
    /// The conversation it carries, when it carries one.
    exchange: Option<Exchange>,
    name: String,
    ignored: BTreeSet<String>,
}

/// What an inference span says: the request's history and the response.
#[derive(Default)]
struct Exchange {
    system: Option<Value>,
    input: Vec<Value>,
    output: Vec<Value>,
    tools: Vec<Value>,
    model: Option<String>,
}

impl Exchange {
    fn is_empty(&self) -> bool {
        self.system.is_none() && self.input.is_empty() && self.output.is_empty()
    }
}

fn hex_id(value: Option<&Value>) -> Option<String> {
    let text = value?.as_str()?;
    let text = text.strip_prefix("0x").unwrap_or(text);
    (!text.is_empty()).then(|| text.to_ascii_lowercase())
}

/// A span record read: its ids, start, and the conversation it carries.
fn read_span(value: Value, record: usize) -> Result<Span, InputError> {
    let span: SpanRecord =
        serde_json::from_value(value).map_err(|e| refuse(format!("unreadable span: {e}")))?;
    let context = span.context.unwrap_or(Value::Null);
    let trace = hex_id(span.trace_id.as_ref())
        .or_else(|| hex_id(context.get("trace_id")))
        .ok_or_else(|| refuse("span without a trace id"))?;
    let id = hex_id(span.span_id.as_ref())
        .or_else(|| hex_id(context.get("span_id")))
        .unwrap_or_default();
    let parent = hex_id(span.parent_span_id.as_ref()).or_else(|| hex_id(span.parent_id.as_ref()));
    let start = match span.start_nanos {
        Some(Value::String(n)) => n.parse::<i64>().ok().map(|n| n / 1_000_000),
        Some(Value::Number(n)) => n.as_i64().map(|n| n / 1_000_000),
        _ => span
            .start_time
            .as_ref()
            .and_then(Value::as_str)
            .and_then(parse_rfc3339_ms),
    };
    let mut ignored = BTreeSet::new();
    let name = span
        .rest
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    for key in span.rest.keys() {
        ignored.insert(format!("span.{key}"));
    }
    let mut exchange = Exchange::default();
    read_attributes(
        attributes(span.attributes),
        &mut exchange,
        &mut ignored,
        "attributes.",
    );
    let events = match span.events {
        Some(Value::Array(events)) => events,
        _ => Vec::new(),
    };
    for event in events {
        let Ok(event) = serde_json::from_value::<EventRecord>(event) else {
            ignored.insert("events[] (not an object)".to_string());
            continue;
        };
        for key in event.rest.keys() {
            ignored.insert(format!("events[].{key}"));
        }
        let name = event.name.as_ref().and_then(Value::as_str).unwrap_or("");
        let mut attrs = attributes(event.attributes);
        if let Some(Value::Object(body)) = event.body.map(json_value) {
            attrs.extend(body);
        }
        if let Some(role) = event_role(name) {
            let mut message = Map::new();
            message.insert("role".to_string(), json!(role));
            for key in ["content", "tool_calls", "id", "tool_call_id"] {
                if let Some(value) = attrs
                    .remove(key)
                    .or_else(|| attrs.remove(&format!("gen_ai.event.{key}")))
                {
                    message.insert(key.to_string(), value);
                }
            }
            for key in attrs.keys() {
                ignored.insert(format!("events.{name}.{key}"));
            }
            exchange.input.push(Value::Object(message));
        } else if name == "gen_ai.choice" {
            let mut message = match attrs.remove("message").map(json_value) {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            message.entry("role").or_insert_with(|| json!("assistant"));
            for key in ["content", "tool_calls"] {
                if let Some(value) = attrs.remove(key) {
                    message.insert(key.to_string(), value);
                }
            }
            if let Some(reason) = attrs.remove("finish_reason") {
                message.insert("finish_reason".to_string(), reason);
            }
            for key in attrs.keys() {
                ignored.insert(format!("events.{name}.{key}"));
            }
            // `index` orders the choices; the first is the reply.
            exchange.output.push(Value::Object(message));
        } else {
            read_attributes(
                attrs,
                &mut exchange,
                &mut ignored,
                &format!("events.{name}."),
            );
        }
    }
    Ok(Span {
        record,
        trace,
        id,
        parent,
        start,
        exchange: (!exchange.is_empty()).then_some(exchange),
        name,
        ignored,
    })
}

/// An inference span in its trace's chains.
struct Inference {
    records: Vec<usize>,
    span: Span,
}

impl Link for Inference {
    fn records(&self) -> &[usize] {
        &self.records
    }
}

/// Reads a file's spans (or whole exports given as records).
pub(crate) fn read_spans(records: Vec<InputRecord>, context: &ReadContext<'_>) -> FileRead {
    let mut read = FileRead::default();
    // Traces in the order their first span came, each with its spans.
    let mut traces: Vec<(String, Vec<Span>)> = Vec::new();
    let mut by_trace: HashMap<String, usize> = HashMap::new();
    let mut repairs = 0;
    // A record holding a whole export may hold several conversations, but one record names
    // one conversation: its spans are read as one trace group of their own.
    for record in records {
        let index = record.index;
        repairs += record.repairs;
        let value = record.value;
        if let Some(Value::Array(_)) = value.get("resourceSpans") {
            export(value, index, context, &mut read);
            continue;
        }
        if !value.is_object() {
            let kind = json_kind(&value);
            read.refused.push((
                index,
                refuse(format!("record is a JSON {kind}, not a span")),
            ));
            continue;
        }
        if !is_span(&value) {
            read.refused.push((
                index,
                refuse("object without a trace id and a span id: not a span"),
            ));
            continue;
        }
        match read_span(value, index) {
            Ok(span) => {
                let at = *by_trace.entry(span.trace.clone()).or_insert_with(|| {
                    traces.push((span.trace.clone(), Vec::new()));
                    traces.len() - 1
                });
                traces[at].1.push(span);
            }
            Err(err) => read.refused.push((index, err)),
        }
    }
    for (trace, spans) in traces {
        trace_conversations(trace, spans, repairs, context, &mut read);
    }
    read
}

/// A record holding a whole OTLP export: its spans, one conversation at most (the record
/// names it); an export holding several is refused with why.
fn export(value: Value, index: usize, context: &ReadContext<'_>, read: &mut FileRead) {
    let mut spans = Vec::new();
    let mut bad = None;
    let resource_spans = value.get("resourceSpans").and_then(Value::as_array);
    for rs in resource_spans.into_iter().flatten() {
        let scopes = rs.get("scopeSpans").and_then(Value::as_array);
        for ss in scopes.into_iter().flatten() {
            let items = ss.get("spans").and_then(Value::as_array);
            for span in items.into_iter().flatten() {
                match read_span(span.clone(), index) {
                    Ok(span) => spans.push(span),
                    Err(err) => bad = Some(err),
                }
            }
        }
    }
    if let Some(err) = bad {
        read.refused.push((index, err));
        return;
    }
    let mut inner = FileRead::default();
    let traces: BTreeSet<String> = spans.iter().map(|s| s.trace.clone()).collect();
    let mut by_trace: Vec<(String, Vec<Span>)> =
        traces.into_iter().map(|t| (t, Vec::new())).collect();
    for span in spans {
        if let Some((_, list)) = by_trace.iter_mut().find(|(t, _)| *t == span.trace) {
            list.push(span);
        }
    }
    for (trace, spans) in by_trace {
        trace_conversations(trace, spans, 0, context, &mut inner);
    }
    match inner.conversations.len() {
        0 => match inner.refused.into_iter().next() {
            Some((_, err)) => read.refused.push((index, err)),
            None => read.dropped.push(DroppedRecord {
                index,
                rule: PolicyId::StructuralLine.into(),
                what: "OTLP export with no GenAI messages".to_string(),
            }),
        },
        1 => {
            let mut conversation = inner.conversations.remove(0);
            conversation.records = vec![index];
            read.conversations.push(conversation);
        }
        n => read.refused.push((
            index,
            refuse(format!(
                "one record holds {n} conversations (an export inside a JSON array): give the exports one per line, as the collector's file exporter writes them"
            )),
        )),
    }
}

/// One trace's conversations: its inference spans chained by their histories.
fn trace_conversations(
    trace: String,
    spans: Vec<Span>,
    repairs: usize,
    context: &ReadContext<'_>,
    read: &mut FileRead,
) {
    let root = spans
        .iter()
        .find(|s| s.parent.is_none())
        .or_else(|| spans.first())
        .map(|s| s.id.clone())
        .unwrap_or_default();
    let quarantine = context.rules.policy.structural_line == DropOrQuarantine::Quarantine;
    let mut inferences = Vec::new();
    for span in spans {
        if span.exchange.is_some() {
            inferences.push(Inference {
                records: vec![span.record],
                span,
            });
        } else if quarantine {
            read.refused.push((
                span.record,
                InputError::RefusedByRule {
                    rule: PolicyId::StructuralLine.into(),
                    reason: format!("span `{}` with no GenAI messages", span.name),
                },
            ));
        } else {
            read.dropped.push(DroppedRecord {
                index: span.record,
                rule: PolicyId::StructuralLine.into(),
                what: "span with no GenAI messages".to_string(),
            });
        }
    }
    // Requests in the order they were made.
    inferences.sort_by_key(|i| (i.span.start, i.span.record));
    let mut histories = chain::Histories::default();
    let each = inferences.iter().map(|i| {
        let Some(exchange) = &i.span.exchange else {
            return Vec::new();
        };
        let mut history: Vec<Value> = exchange
            .system
            .iter()
            .map(|s| json!({"system": s}))
            .collect();
        history.extend(exchange.input.iter().map(|m| message_parts(m.clone())));
        if exchange.input.is_empty() {
            return Vec::new();
        }
        history
            .into_iter()
            .map(|m| Value::String(m.to_string()))
            .collect()
    });
    for history in each {
        histories.whole(history);
    }
    let merge = context.rules.policy.resent_history == ResentHistory::Merge;
    let merged = "inference span merged into a later one resending its history";
    let mut chains = 0usize;
    chain::drive(inferences, histories, merge, merged, read, |mut members| {
        let Some(last) = members.pop() else {
            return Err(refuse("empty chain"));
        };
        let first_span = members
            .first()
            .map_or(last.span.id.clone(), |m| m.span.id.clone());
        let mut ignored: BTreeSet<String> = BTreeSet::new();
        let mut start = last.span.start;
        for member in members {
            ignored.extend(member.span.ignored);
            start = match (start, member.span.start) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let id = if chains == 0 {
            format!("{trace}/{root}")
        } else {
            format!("{trace}/{root}/{first_span}")
        };
        chains += 1;
        let mut transcript = conversation(last.span, ignored)?;
        transcript.meta.id = Some(id);
        transcript.meta.source_id = Some(trace.clone());
        transcript.meta.created_ms = start;
        transcript.meta.unicode_repairs = repairs;
        Ok(transcript)
    });
}

/// The conversation an inference span holds: its system instructions, history and reply.
fn conversation(span: Span, mut ignored: BTreeSet<String>) -> Result<Transcript, InputError> {
    let Some(exchange) = span.exchange else {
        return Err(refuse("span with no GenAI messages"));
    };
    ignored.extend(span.ignored);
    let mut built = TranscriptBuilder::new(FORMAT, "gen_ai.input.messages");
    built.meta.model = exchange.model;
    if let Some(system) = exchange.system {
        let parts: Vec<Value> = match system {
            Value::Array(parts) => parts,
            other @ (Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Object(_)) => {
                vec![json!({"type": "text", "content": text_or_json(other)})]
            }
        };
        let message = json!({"role": "system", "parts": parts});
        add_message(message, &mut built);
    }
    for message in exchange.input {
        add_message(message_parts(message), &mut built);
    }
    let mut outputs = exchange.output.into_iter();
    if let Some(reply) = outputs.next() {
        let reply = message_parts(reply);
        let reason = reply.get("finish_reason").and_then(Value::as_str);
        built.meta.finished = matches!(reason, Some("stop" | "end_turn" | "STOP"));
        add_message(reply, &mut built);
    }
    let extra = outputs.count();
    if extra > 0 {
        built.note(
            Builtin::ExtraChoices,
            "output message beyond the first choice",
            extra as u64,
            0,
        );
    }
    for tool in exchange.tools {
        built.tool(tool_definition(tool));
    }
    for field in ignored {
        built.ignore(field);
    }
    built.finish()
}

/// A tool definition in the Chat Completions shape the record's tools take.
fn tool_definition(tool: Value) -> Value {
    let is_function = tool.get("type").and_then(Value::as_str) == Some("function");
    if is_function && tool.get("function").is_none() {
        let mut function = Map::new();
        for key in ["name", "description", "parameters"] {
            if let Some(v) = tool.get(key) {
                function.insert(key.to_string(), v.clone());
            }
        }
        return json!({"type": "function", "function": function});
    }
    tool
}

fn string(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(str::to_string)
}

/// A `tool_call` part as a call.
fn call(part: &Value) -> ToolCall {
    let (arguments, from_object, missing) = match part.get("arguments") {
        None | Some(Value::Null) => ("{}".to_string(), false, true),
        Some(Value::String(text)) => (text.clone(), false, false),
        Some(other) => (other.to_string(), true, false),
    };
    ToolCall {
        id: string(part.get("id")),
        name: string(part.get("name")).unwrap_or_default(),
        arguments,
        arguments_from_object: from_object,
        arguments_missing: missing,
        custom: false,
    }
}

/// A content part that is not a call, a response or reasoning.
fn content_part(part: &Value, kind: &str) -> Part {
    let text = |key: &str| string(part.get(key));
    let (mime, modality) = (text("mime_type"), text("modality"));
    match kind {
        "text" => Part::Text(
            part.get("content")
                .cloned()
                .map(text_or_json)
                .unwrap_or_default(),
        ),
        "blob" => inline_part(
            mime.as_deref(),
            modality.as_deref(),
            part.get("content")
                .cloned()
                .map(text_or_json)
                .unwrap_or_default(),
        ),
        "uri" => linked_part(
            mime.as_deref(),
            modality.as_deref(),
            text("uri").unwrap_or_default(),
        ),
        "file" => file_part(
            mime.as_deref(),
            modality.as_deref(),
            text("file_id").unwrap_or_default(),
        ),
        other => Part::Unknown {
            kind: other.to_string(),
        },
    }
}

/// One message (`{role, parts}`) into the conversation: content parts a message of its
/// role, `reasoning` reasoning before what follows, `tool_call` calls, `tool_call_response`
/// outputs, in order.
fn add_message(message: Value, built: &mut TranscriptBuilder) {
    let role = match message.get("role").and_then(Value::as_str) {
        Some(name) => Role::of(name),
        None => Role::Other(String::new()),
    };
    let name = string(message.get("name"));
    let parts = match message.get("parts") {
        Some(Value::Array(parts)) => parts.clone(),
        _ => Vec::new(),
    };
    let mut pending: Vec<Part> = Vec::new();
    let mut wrote = false;
    let flush = |pending: &mut Vec<Part>, built: &mut TranscriptBuilder, wrote: &mut bool| {
        if !pending.is_empty() {
            built.message(Message {
                role: role.clone(),
                name: name.clone(),
                content: content(std::mem::take(pending)),
                ..Message::default()
            });
            *wrote = true;
        }
    };
    for part in &parts {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "tool_call" => {
                flush(&mut pending, built, &mut wrote);
                built.call(call(part));
                wrote = true;
            }
            "tool_call_response" => {
                flush(&mut pending, built, &mut wrote);
                let response = part
                    .get("response")
                    .cloned()
                    .map(text_or_json)
                    .unwrap_or_default();
                built.output(string(part.get("id")), Content::Text(response), false);
                wrote = true;
            }
            "reasoning" => {
                flush(&mut pending, built, &mut wrote);
                let text = part
                    .get("content")
                    .cloned()
                    .map(text_or_json)
                    .unwrap_or_default();
                built.thinking(Thinking {
                    content: vec![text],
                    origin: ReasoningOrigin::OpenTelemetry,
                    ..Thinking::default()
                });
            }
            other => pending.push(content_part(part, other)),
        }
    }
    flush(&mut pending, built, &mut wrote);
    if !wrote {
        // A message with no parts is still a message, for the converter's rules to decide.
        built.message(Message {
            role,
            name,
            content: Content::Text(String::new()),
            ..Message::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::format::read_values;
    use crate::rules::RuleSet;

    fn read(values: Vec<Value>) -> FileRead {
        let rules = RuleSet::builtin().expect("default rules");
        read_values(
            &OtelReader,
            values,
            &rules,
            std::path::Path::new("traces.jsonl"),
        )
    }

    fn kv(key: &str, value: Value) -> Value {
        json!({"key": key, "value": {"stringValue": value.to_string()}})
    }

    fn span(id: &str, parent: Option<&str>, start: u64, attributes: Vec<Value>) -> Value {
        json!({"traceId": "4BF92F3577B34DA6A3CE929D0E0E4736", "spanId": id,
               "parentSpanId": parent.unwrap_or(""), "name": "chat gpt-4", "kind": 3,
               "startTimeUnixNano": start.to_string(), "attributes": attributes})
    }

    #[test]
    fn a_traces_inference_spans_chain_into_one_conversation() {
        let q =
            json!([{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]);
        let call = json!([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"location": "Paris"}}]}]);
        let mut history = q.as_array().cloned().unwrap_or_default();
        history.extend(call.as_array().cloned().unwrap_or_default());
        history.push(json!({"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "rainy"}]}));
        let reply = json!([{"role": "assistant", "parts": [{"type": "reasoning", "content": "easy"}, {"type": "text", "content": "Rainy."}], "finish_reason": "stop"}]);
        let read = read(vec![
            span(
                "00000000000000a1",
                Some("00000000000000f0"),
                1_000_000,
                vec![
                    kv("gen_ai.input.messages", q),
                    kv("gen_ai.output.messages", call),
                ],
            ),
            span(
                "00000000000000a2",
                Some("00000000000000f0"),
                2_000_000,
                vec![
                    kv("gen_ai.input.messages", Value::Array(history)),
                    kv("gen_ai.output.messages", reply),
                    kv("gen_ai.usage.input_tokens", json!(5)),
                ],
            ),
            span("00000000000000f0", None, 500_000, vec![]),
        ]);
        assert!(read.refused.is_empty(), "{:?}", read.refused);
        assert_eq!(read.dropped.len(), 1);
        assert_eq!(read.conversations.len(), 1);
        let c = &read.conversations[0];
        assert_eq!(c.records, [0, 1]);
        let t = &c.transcript;
        let shape: Vec<String> = t
            .messages
            .iter()
            .map(|m| {
                format!(
                    "{} {} {} {:?} {}",
                    m.role,
                    m.content.joined_texts(),
                    m.tool_calls.len(),
                    m.tool_call_ids,
                    m.thinking.len()
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                "user Weather in Paris? 0 [] 0",
                "assistant  1 [] 0",
                "tool rainy 0 [\"c1\"] 0",
                "assistant Rainy. 0 [] 1"
            ]
        );
        assert_eq!(
            t.meta.id.as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736/00000000000000f0")
        );
        assert!(t.meta.finished);
        assert_eq!(t.note_counts(), [("policy.resent_history", 1)]);
        assert!(t
            .ignored_fields
            .contains(&"attributes.gen_ai.usage.input_tokens".to_string()));
        assert!(t.ignored_fields.contains(&"span.kind".to_string()));
    }

    #[test]
    fn deprecated_events_and_flattened_attributes_are_read() {
        let events = json!({"traceId": "t1", "spanId": "s1", "events": [
            {"name": "gen_ai.system.message", "attributes": [{"key": "content", "value": {"stringValue": "Be brief"}}]},
            {"name": "gen_ai.user.message", "attributes": {"content": "Hi"}},
            {"name": "gen_ai.choice", "attributes": {"index": 0, "finish_reason": "stop", "message": "{\"content\":\"Hello\"}"}}
        ]});
        let flat = json!({"traceId": "t2", "spanId": "s2", "attributes": {
            "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "2+2?",
            "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.tool_calls.0.name": "calc",
            "gen_ai.completion.0.tool_calls.0.arguments": "{\"x\":\"2+2\"}", "gen_ai.completion.0.tool_calls.0.id": "k"
        }});
        let read = read(vec![events, flat]);
        let texts: Vec<Vec<String>> = read
            .conversations
            .iter()
            .map(|c| {
                c.transcript
                    .messages
                    .iter()
                    .map(|m| {
                        format!(
                            "{}:{}:{}",
                            m.role,
                            m.content.joined_texts(),
                            m.tool_calls.len()
                        )
                    })
                    .collect()
            })
            .collect();
        assert_eq!(
            texts,
            [
                vec!["system:Be brief:0", "user:Hi:0", "assistant:Hello:0"],
                vec!["user:2+2?:0", "assistant::1"]
            ]
        );
    }

    #[test]
    fn a_root_span_closes_its_trace_and_a_child_waits() {
        let reader = OtelReader;
        assert_eq!(
            reader.group(br#"{"traceId":"ab","spanId":"1","parentSpanId":""}"#),
            Group::Last("ab".into())
        );
        assert_eq!(
            reader.group(br#"{"traceId":"ab","spanId":"2","parentSpanId":"1"}"#),
            Group::Member("ab".into())
        );
        assert_eq!(
            reader.group(br#"{"context":{"trace_id":"0xab"},"parent_id":null}"#),
            Group::Last("0xab".into())
        );
        assert_eq!(reader.group(b"not json"), Group::Alone);
    }
}
