use super::super::{
    BaseInstructions, Compacted, ContentItem, EventMsg, GitInfo, Line, Phase, ReasoningText,
    ResponseItem, SessionMeta, SummaryText, ToolOutput, ROLE_ASSISTANT, ROLE_USER,
};
use super::*;
use crate::model::scan::{json_leaf, one_edit};
use proptest::prelude::*;

fn text(s: &str) -> Option<Text<'_>> {
    Some(Text(Cow::Borrowed(s)))
}

/// Writes `payload` as a line the way the converter does, and reads it back the fast way,
/// checking that the slow way reads the same.
fn round_trip<P: serde::Serialize>(tag: &'static str, payload: &P) -> String {
    serde_json::to_string(&Line {
        timestamp: "2025-10-01T12:00:00.000Z",
        tag,
        payload,
    })
    .unwrap()
}

fn read(raw: &str) -> LineView<'_> {
    let view = fast(raw).unwrap_or_else(|| panic!("the fast way refused {raw}"));
    assert_eq!(Some(&view), fast_serde(raw).as_ref(), "{raw}");
    let value: Value = serde_json::from_str(raw).unwrap();
    assert_eq!(from_value(&value).as_ref(), Some(&view), "{raw}");
    assert!(view.payload_is_object);
    assert_eq!(view.timestamp, text("2025-10-01T12:00:00.000Z"));
    view
}

fn part_views(content: &[ContentItem]) -> Vec<PartView<'_>> {
    content
        .iter()
        .map(|c| PartView {
            kind: text(match c {
                ContentItem::InputText { .. } => "input_text",
                ContentItem::InputImage { .. } => "input_image",
                ContentItem::InputAudio { .. } => "input_audio",
                ContentItem::OutputText { .. } => "output_text",
            }),
            text: c.text().and_then(text),
        })
        .collect()
}

fn output_kind(output: &ToolOutput) -> Kind {
    match output {
        ToolOutput::Text(_) => Kind::String,
        ToolOutput::Items(_) => Kind::Array,
    }
}

/// What each item the converter writes must read back as. No `_` arm: a new writer variant
/// does not compile here until its view is decided.
fn expected_view(item: &ResponseItem) -> ResponseItemView<'_> {
    match item {
        ResponseItem::Message {
            role,
            content,
            phase,
        } => ResponseItemView::Message(MessageView {
            role: text(role),
            content: Some(part_views(content)),
            phase: match phase {
                Some(p) => PhaseView::Text(Text(Cow::Borrowed(p.as_str()))),
                None => PhaseView::Absent,
            },
            id: None,
        }),
        ResponseItem::Reasoning { content, .. } => ResponseItemView::Reasoning {
            content: content.as_ref().map(|parts| {
                parts
                    .iter()
                    .map(|p| PartView {
                        kind: text("reasoning_text"),
                        text: text(&p.text),
                    })
                    .collect()
            }),
        },
        ResponseItem::FunctionCall { call_id, .. } => ResponseItemView::FunctionCall {
            call_id: text(call_id),
            arguments: Kind::String,
        },
        ResponseItem::FunctionCallOutput { call_id, output } => {
            ResponseItemView::FunctionCallOutput {
                call_id: text(call_id),
                output: output_kind(output),
            }
        }
        ResponseItem::CustomToolCall { call_id, .. } => ResponseItemView::CustomToolCall {
            call_id: text(call_id),
            input: Kind::String,
        },
        ResponseItem::CustomToolCallOutput { call_id, output } => {
            ResponseItemView::CustomToolCallOutput {
                call_id: text(call_id),
                output: output_kind(output),
            }
        }
        ResponseItem::Native(native) => native_view(native),
    }
}

/// What an item read from a Codex rollout reads back as: the view of its own type (the two
/// kinds [`written_items`] holds).
fn native_view(native: &super::super::NativeItem) -> ResponseItemView<'_> {
    let field = |name: &str| {
        native
            .payload
            .get(name)
            .and_then(Value::as_str)
            .and_then(text)
    };
    match native.kind {
        wire::item::MESSAGE => ResponseItemView::Message(MessageView {
            role: field("role"),
            content: Some(
                native.payload["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| PartView {
                        kind: p["type"].as_str().and_then(text),
                        text: p["text"].as_str().and_then(text),
                    })
                    .collect(),
            ),
            phase: match native.payload.get("phase").and_then(Value::as_str) {
                Some(p) => PhaseView::Text(Text(Cow::Borrowed(p))),
                None => PhaseView::Absent,
            },
            id: field("id"),
        }),
        wire::item::WEB_SEARCH_CALL => ResponseItemView::WebSearchCall,
        other => panic!("no view decided for a native `{other}` in these tests"),
    }
}

/// An item of every kind the converter writes, and of every kind of content part.
fn written_items() -> Vec<ResponseItem> {
    vec![
        ResponseItem::Message {
            role: ROLE_ASSISTANT,
            content: vec![ContentItem::OutputText { text: "a".into() }],
            phase: Some(Phase::FinalAnswer),
        },
        ResponseItem::Message {
            role: ROLE_USER,
            content: vec![
                ContentItem::InputText {
                    text: "say \"hi\"\n".into(),
                },
                ContentItem::InputImage {
                    image_url: Some("data:image/png;base64,AA==".into()),
                    file_id: None,
                    detail: Some("high".into()),
                },
                ContentItem::InputAudio {
                    audio_url: None,
                    file_id: Some("file_1".into()),
                },
            ],
            phase: None,
        },
        ResponseItem::Reasoning {
            summary: vec![SummaryText { text: "s".into() }],
            content: Some(vec![ReasoningText { text: "r".into() }]),
            encrypted_content: None,
        },
        ResponseItem::Reasoning {
            summary: vec![],
            content: None,
            encrypted_content: Some("e".into()),
        },
        ResponseItem::FunctionCall {
            name: "shell".into(),
            arguments: "{\"a\":1}".into(),
            call_id: "call_1".into(),
        },
        ResponseItem::FunctionCallOutput {
            call_id: "call_1".into(),
            output: ToolOutput::Text("out".into()),
        },
        ResponseItem::CustomToolCall {
            call_id: "call_2".into(),
            name: "apply_patch".into(),
            input: "patch".into(),
        },
        ResponseItem::CustomToolCallOutput {
            call_id: "call_2".into(),
            output: ToolOutput::Items(vec![ContentItem::InputText { text: "x".into() }]),
        },
        native(
            serde_json::json!({"type": "message", "id": "msg_1", "role": "assistant",
            "content": [{"type": "output_text", "text": "kept"}], "phase": "final_answer"}),
        ),
        native(
            serde_json::json!({"type": "web_search_call", "status": "completed",
            "action": {"type": "search", "query": "q"}}),
        ),
    ]
}

/// A native item (as a Codex rollout holds it) of `value`.
fn native(value: Value) -> ResponseItem {
    use super::super::{NativeItem, NativeRole};
    let Value::Object(payload) = value else {
        panic!("an object");
    };
    ResponseItem::Native(NativeItem::item(NativeRole::Standalone, payload).expect("a known type"))
}

#[test]
fn every_written_item_reads_back() {
    let items = written_items();
    for item in &items {
        let raw = round_trip(tag::RESPONSE_ITEM, item);
        let view = read(&raw);
        assert_eq!(
            view.item,
            RolloutItemView::ResponseItem(expected_view(item)),
            "{raw}"
        );
    }
}

/// A session meta with each optional field given or not.
fn session_meta(
    source: Option<&'static str>,
    model_provider: Option<&'static str>,
    base_instructions: Option<&'static str>,
    git_branch: Option<&'static str>,
) -> SessionMeta<'static> {
    SessionMeta {
        id: "0199a213-81c0-7800-8aa1-bbab2a035a53".into(),
        timestamp: "2025-10-01T12:00:00.000Z".into(),
        cwd: "/p".into(),
        originator: "rollover".into(),
        cli_version: "0.169.0".into(),
        source: source.map(Into::into),
        model_provider: model_provider.map(Into::into),
        base_instructions: base_instructions.map(|text| BaseInstructions { text: text.into() }),
        git: git_branch.map(|branch| GitInfo {
            branch: Some(branch.into()),
            ..GitInfo::default()
        }),
    }
}

#[test]
fn session_meta_events_and_compacted_read_back() {
    let meta = session_meta(Some("cli"), None, Some("be brief"), Some("main"));
    let raw = round_trip(tag::SESSION_META, &meta);
    let expected = RolloutItemView::SessionMeta(SessionMetaView {
        id: text(&meta.id),
        timestamp: Kind::String,
        cwd: Kind::String,
        originator: Kind::String,
        cli_version: Kind::String,
        base_instructions: BaseInstructionsView::Object {
            text: text("be brief"),
        },
    });
    assert_eq!(read(&raw).item, expected);

    let events = [
        EventMsg::UserMessage {
            message: Cow::Borrowed("hi"),
            images: vec!["https://x/y.png"],
        },
        EventMsg::AgentMessage {
            message: Cow::Borrowed("a\tb"),
            phase: Some(Phase::Commentary),
        },
    ];
    for event in &events {
        let raw = round_trip(tag::EVENT_MSG, event);
        // No `_` arm, as above.
        let expected = match event {
            EventMsg::UserMessage { message, .. } => EventMsgView::UserMessage {
                message: text(message),
            },
            EventMsg::AgentMessage { message, .. } => EventMsgView::AgentMessage {
                message: text(message),
            },
        };
        assert_eq!(read(&raw).item, RolloutItemView::EventMsg(expected));
    }
    let raw = round_trip(
        tag::COMPACTED,
        &Compacted {
            message: "summary",
            replacement_history: None,
        },
    );
    assert_eq!(read(&raw).item, RolloutItemView::Compacted);
    let replacing = Compacted {
        message: "summary",
        replacement_history: Some(vec![ResponseItem::Message {
            role: "user",
            content: vec![ContentItem::InputText {
                text: "summary".into(),
            }],
            phase: None,
        }]),
    };
    let raw = round_trip(tag::COMPACTED, &replacing);
    assert_eq!(read(&raw).item, RolloutItemView::Compacted);
}

#[test]
fn what_codex_writes_reads_by_name() {
    for (payload, expected) in [
        (
            r#"{"type":"local_shell_call","call_id":"c","status":"completed","action":{"type":"exec","command":["ls"]}}"#,
            ResponseItemView::LocalShellCall { call_id: text("c") },
        ),
        (
            r#"{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}}"#,
            ResponseItemView::WebSearchCall,
        ),
        (
            r#"{"type":"image_generation_call","id":"ig_1","status":"completed","result":"AA=="}"#,
            ResponseItemView::ImageGenerationCall,
        ),
        (
            r#"{"type":"tool_search_call","call_id":"c","execution":"client","arguments":{}}"#,
            ResponseItemView::ToolSearchCall,
        ),
        (
            r#"{"type":"tool_search_output","call_id":"c","execution":"client","status":"completed","tools":[]}"#,
            ResponseItemView::ToolSearchOutput,
        ),
        (
            r#"{"type":"compaction","encrypted_content":"e"}"#,
            ResponseItemView::Compaction,
        ),
        (
            r#"{"type":"compaction_summary","encrypted_content":"e"}"#,
            ResponseItemView::Compaction,
        ),
        (
            r#"{"type":"ghost_snapshot","ghost_commit":{"id":"abc"}}"#,
            ResponseItemView::GhostSnapshot,
        ),
        (
            r#"{"type":"bogus_item","x":1}"#,
            ResponseItemView::Other(text("bogus_item")),
        ),
        (r#"{"role":"user"}"#, ResponseItemView::Other(None)),
    ] {
        let raw = format!(
            r#"{{"timestamp":"2025-10-01T12:00:00.000Z","type":"response_item","payload":{payload}}}"#
        );
        assert_eq!(read(&raw).item, RolloutItemView::ResponseItem(expected));
    }
    for (tag, expected) in [
        (tag::TURN_CONTEXT, RolloutItemView::TurnContext),
        (tag::WORLD_STATE, RolloutItemView::WorldState),
        (tag::TOKEN_USAGE_RECORD, RolloutItemView::TokenUsageRecord),
        (
            "event",
            RolloutItemView::Other(Text(Cow::Borrowed("event"))),
        ),
    ] {
        let raw = format!(
            r#"{{"timestamp":"2025-10-01T12:00:00.000Z","type":"{tag}","payload":{{"full":true,"state":{{"a":[1]}}}}}}"#
        );
        assert_eq!(read(&raw).item, expected);
    }
    let raw = r#"{"timestamp":"2025-10-01T12:00:00.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t"}}"#;
    assert_eq!(
        read(raw).item,
        RolloutItemView::EventMsg(EventMsgView::TaskStarted)
    );
    let raw = r#"{"timestamp":"2025-10-01T12:00:00.000Z","type":"event_msg","payload":{"type":"token_count","info":null}}"#;
    assert_eq!(
        read(raw).item,
        RolloutItemView::EventMsg(EventMsgView::Other(text("token_count")))
    );
}

/// The fast way, when it accepts a line, reads what the slow way reads.
fn same(line: &str) -> bool {
    let fast = fast(line);
    assert_eq!(fast, fast_serde(line), "{line}");
    let value: Value = serde_json::from_str(line).unwrap();
    let slow = from_value(&value);
    if let Some(fast) = &fast {
        assert_eq!(Some(fast), slow.as_ref(), "{line}");
    }
    fast.is_some()
}

#[test]
fn fast_reads_what_slow_reads() {
    for line in [
        r#"{"timestamp":"2025-10-01T12:00:00.000Z","type":"session_meta","payload":{"id":"x","timestamp":"t","cwd":"/","originator":"o","cli_version":"1","source":"cli","base_instructions":{"text":"be \"nice\"\n"}}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a\u00e9b"},{"type":"input_image","image_url":"x"}],"phase":"commentary"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[],"phase":null}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"f","arguments":{"a":[1,{"b":null}]},"call_id":"c1"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"x"}]}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c1","output":1.5,"input":true}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"reasoning","summary":[],"content":null,"encrypted_content":null}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":"hi","images":["a"]}}"#,
        r#"{"timestamp":"t","type":"turn_context","payload":{"cwd":"/","approval_policy":"never","sandbox_policy":{"mode":"x"}}}"#,
        r#"{"type":"compacted","payload":{"message":"m"},"extra":[[],{}]}"#,
        r#"{"timestamp":"t","type":"x","payload":{}}"#,
        r#"{}"#,
    ] {
        assert!(same(line), "the fast way refused {line}");
    }
}

#[test]
fn odd_shapes_go_the_slow_way() {
    for line in [
        r#"[1,2]"#,
        r#""text""#,
        r#"{"timestamp":1,"type":"x","payload":{}}"#,
        r#"{"timestamp":"t","type":"x","payload":["a","b"]}"#,
        r#"{"timestamp":"t","type":"x","payload":{"phase":7}}"#,
        r#"{"timestamp":"t","type":"x","payload":{"content":"text"}}"#,
        r#"{"timestamp":"t","type":"x","payload":{"content":["a"]}}"#,
        r#"{"timestamp":"t","type":"x","payload":{"content":[{"type":1}]}}"#,
        r#"{"timestamp":"t","type":"x","payload":{"call_id":5}}"#,
        r#"{"timestamp":"t","type":"x","payload":{"base_instructions":"b"}}"#,
        r#"{"timestamp":"t","type":"x","payload":{"base_instructions":{"text":3}}}"#,
        r#"{"timestamp":"t","type":"x","type":"y","payload":{}}"#,
        r#"{"timestamp":"t","type":"x","payload":{"role":"a","role":"b"}}"#,
    ] {
        assert!(!same(line), "the fast way accepted {line}");
    }
    // The slow way keeps what the checks tell apart.
    let v: Value = serde_json::from_str(
        r#"{"type":"response_item","payload":{"type":"message","phase":7,"content":[1,{"type":2}]}}"#,
    )
    .unwrap();
    let Some(RolloutItemView::ResponseItem(ResponseItemView::Message(message))) =
        from_value(&v).map(|l| l.item)
    else {
        panic!("not a message");
    };
    assert_eq!(message.phase, PhaseView::NotText("7".into()));
    assert_eq!(
        message.content,
        Some(vec![PartView::default(), PartView::default()])
    );
    let v: Value =
        serde_json::from_str(r#"{"type":"session_meta","payload":{"base_instructions":[]}}"#)
            .unwrap();
    let Some(RolloutItemView::SessionMeta(meta)) = from_value(&v).map(|l| l.item) else {
        panic!("not a session_meta");
    };
    assert_eq!(meta.base_instructions, BaseInstructionsView::NotObject);
}

/// The hand reader and the serde reader agree on `line`: both refuse it, or both read the
/// same view, but for a lone surrogate in a string serde skips unchecked (only the hand reader
/// refuses it; serde_json's `Value` says so). And what the hand reader accepts serde_json reads
/// too, when it skips the line as it skips a field nobody reads (numbers by their grammar only).
fn agree(line: &str) {
    let hand = fast(line);
    let serde = fast_serde(line);
    if hand.is_none() && serde.is_some() {
        let err = serde_json::from_str::<Value>(line).unwrap_err().to_string();
        // serde_json's words for a high surrogate alone, or before a non-surrogate.
        let lone = ["lone leading surrogate", "unexpected end of hex escape"];
        assert!(lone.iter().any(|m| err.contains(m)), "{line:?}: {err}");
    } else {
        assert_eq!(hand, serde, "{line:?}");
    }
    if hand.is_some() {
        assert!(
            serde_json::from_str::<serde::de::IgnoredAny>(line).is_ok(),
            "{line:?}"
        );
    }
}

#[test]
fn hand_reader_has_serde_json_acceptance() {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let lines = [
        // Whitespace serde_json allows, anywhere between tokens, and around the line.
        " {\t\"type\" :\r\"x\" , \"payload\":{ } }\t",
        "{\"type\":\"x\"}\u{a0}",
        "{\"type\":\"x\"}\u{c}",
        // Keys with escapes are matched by their text.
        r#"{"typ\u0065":"response_item","payload":{"\u0074ype":"message","r\u006fle":"user"}}"#,
        r#"{"type":"x","t\u0079pe":"y"}"#,
        // Strings: escapes, controls, surrogates.
        r#"{"type":"a\"b\\c\/d\b\f\n\r\t\u00e9\uD83D\uDE00"}"#,
        r#"{"type":"\x"}"#,
        r#"{"type":"\u00g0"}"#,
        r#"{"type":"\u00"}"#,
        r#"{"type":"\ud800"}"#,
        r#"{"type":"\udc00"}"#,
        r#"{"type":"\ud800\u0041"}"#,
        r#"{"other":"\ud800","type":"x"}"#,
        r#"{"other":"\udc00","type":"x"}"#,
        r#"{"other":["\ud83d\u0041"],"type":"x"}"#,
        r#"{"payload":{"output":"\ud83d\ude00","x":"\\ud800"}}"#,
        "{\"type\":\"a\tb\"}",
        "{\"other\":\"a\u{1}b\",\"type\":\"x\"}",
        "{\"type\":\"a\u{7f}b\u{e9}\"}",
        "{\"type\":\"abc",
        "{\"type\":\"abc\\",
        // Numbers where a value is type-checked (range too) and skipped (grammar only).
        r#"{"payload":{"output":-0.5E-3,"x":1e400}}"#,
        // Literals and structure.
        r#"{"payload":{"output":tru}}"#,
        r#"{"payload":{"output":nul}}"#,
        r#"{"payload":{"output":true,"cwd":false,"id":null}}"#,
        r#"{"payload":nul}"#,
        r#"{"payload":null,"type":"x"}"#,
        r#"{"type":"x",}"#,
        r#"{"type":"x""payload":{}}"#,
        r#"{"type" "x"}"#,
        r#"{"payload":{"content":[{"type":"input_text","text":"t"},]}}"#,
        r#"{"payload":{"content":[{"type":"input_text","text":"t"}{}]}}"#,
        r#"{"payload":{"content":[{"type":"input_text","text":"t","type":"x"}]}}"#,
        r#"{"payload":{"content":[null]}}"#,
        r#"{"payload":{"content":null,"base_instructions":null}}"#,
        r#"{"payload":{"base_instructions":{"text":null,"x":[{}]}}}"#,
        r#"{"payload":{"base_instructions":{"text":"a","text":"b"}}}"#,
        r#"{"type":"x"} {}"#,
        r#"{"type":"x"}x"#,
        "{}",
        "{",
        "",
        " ",
        "null",
        "[]",
        r#"{"type":"x","payload":{"phase":"commentary","phase":null}}"#,
        r#"{"type":"x","x":{"a":[1,2,{"b":[]}],"c":"d"},"y":[]}"#,
        r#"{"type":"x","x":{"a" 1}}"#,
        r#"{"type":"x","x":[1 2]}"#,
        r#"{"type":"x","x":{1:2}}"#,
    ];
    for line in lines {
        agree(line);
    }
    for number in [
        "0",
        "-0",
        "1e400",
        "-1e400",
        "1E-400",
        "123456789012345678901234567890",
        "01",
        "-",
        "1.",
        ".5",
        "1e",
        "1e+",
        "+1",
        "-01",
        "0.5e-3",
        "2.",
    ] {
        for field in ["output", "x"] {
            agree(&format!(r#"{{"payload":{{"{field}":{number}}}}}"#));
            agree(&format!(r#"{{"payload":{{"{field}":[{number}]}}}}"#));
        }
    }
    // Nesting inside skipped and type-checked values: serde skips any depth, the hand reader
    // reads lines up to serde_json's limit, the line's own object and payload counted, and
    // leaves deeper ones to the slow way (which refuses them: Codex cannot read them).
    for n in [1, 100, 126, 127, 128, 129, 1000] {
        for (line, depth) in [
            (format!(r#"{{"type":"x","x":{}}}"#, deep(n)), n + 1),
            (format!(r#"{{"payload":{{"output":{}}}}}"#, deep(n)), n + 2),
            (
                format!(r#"{{"payload":{{"content":[{{"x":{}}}]}}}}"#, deep(n)),
                n + 4,
            ),
        ] {
            if depth <= 128 {
                agree(&line);
            } else {
                assert_eq!(fast(&line), None, "{line}");
                assert!(fast_serde(&line).is_some(), "{line}");
            }
        }
    }
}

/// JSON text shaped like rollout lines: the keys the views read, with values of every type.
fn line_text() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "type",
        "payload",
        "timestamp",
        "role",
        "phase",
        "content",
        "call_id",
        "arguments",
        "input",
        "output",
        "message",
        "id",
        "cwd",
        "originator",
        "cli_version",
        "base_instructions",
        "text",
        "x",
    ]);
    let value = json_leaf().prop_recursive(4, 40, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6).prop_map(|members| {
                Value::Object(
                    members
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                )
            }),
        ]
    });
    value.prop_map(|v| v.to_string())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Any JSON, and any JSON damaged by one edit: the hand reader reads what serde reads.
    #[test]
    fn hand_reader_reads_what_serde_reads(text in line_text(), edit in one_edit()) {
        agree(&text);
        if let Some(damaged) = edit.apply(&text) {
            agree(&damaged);
        }
    }
}

// --- The templates ---------------------------------------------------------------------------

/// Whether the templates read the line `item` is written as. Every variant is decided here (no
/// `_` arm): a line the converter writes by the thousand that falls to the scanner costs the
/// check ~2.5x its time, which no output would show.
fn read_by_template(item: &ResponseItem) -> bool {
    match item {
        ResponseItem::Message { content, .. } => content.iter().all(|part| match part {
            ContentItem::InputText { .. } | ContentItem::OutputText { .. } => true,
            ContentItem::InputImage { .. } | ContentItem::InputAudio { .. } => false,
        }),
        ResponseItem::FunctionCall { .. }
        | ResponseItem::FunctionCallOutput { .. }
        | ResponseItem::CustomToolCall { .. }
        | ResponseItem::CustomToolCallOutput { .. } => true,
        // Read from a Codex rollout, in its own key order: the scanner reads them.
        ResponseItem::Reasoning { .. } | ResponseItem::Native(_) => false,
    }
}

#[test]
fn the_lines_a_rollout_is_mostly_made_of_are_read_by_template() {
    let mut items = written_items();
    items.extend([
        ResponseItem::Message {
            role: ROLE_ASSISTANT,
            content: vec![ContentItem::OutputText {
                text: "a \"b\"\n".into(),
            }],
            phase: Some(Phase::Commentary),
        },
        ResponseItem::Message {
            role: ROLE_USER,
            content: vec![
                ContentItem::InputText { text: "a".into() },
                ContentItem::InputText {
                    text: "é😀".into()
                },
            ],
            phase: None,
        },
        ResponseItem::Message {
            role: ROLE_USER,
            content: vec![],
            phase: None,
        },
    ]);
    for item in &items {
        let raw = round_trip(tag::RESPONSE_ITEM, item);
        let by_template = template::line(&raw);
        assert_eq!(by_template.is_some(), read_by_template(item), "{raw}");
        if let Some(view) = by_template {
            assert_eq!(view, read(&raw), "{raw}");
            assert_eq!(
                view.item,
                RolloutItemView::ResponseItem(expected_view(item))
            );
        }
    }
    for event in [
        EventMsg::UserMessage {
            message: Cow::Borrowed("hi"),
            images: vec![],
        },
        EventMsg::AgentMessage {
            message: Cow::Borrowed("a\tb"),
            phase: Some(Phase::FinalAnswer),
        },
        EventMsg::AgentMessage {
            message: Cow::Borrowed(""),
            phase: None,
        },
    ] {
        let raw = round_trip(tag::EVENT_MSG, &event);
        assert_eq!(template::line(&raw), Some(read(&raw)), "{raw}");
    }
    for (source, model_provider, base, git) in [
        (None, None, None, None),
        (
            Some("cli"),
            Some("openai"),
            Some("be \"brief\""),
            Some("main"),
        ),
        (Some("cli"), None, Some(""), None),
    ] {
        let raw = round_trip(
            tag::SESSION_META,
            &session_meta(source, model_provider, base, git),
        );
        assert_eq!(template::line(&raw), Some(read(&raw)), "{raw}");
    }
    // What the templates leave to the scanner: another order, a space, an escaped name, an
    // extra member, `null` for a string, a line Codex writes with its own fields.
    for raw in [
        r#"{"type":"event_msg","timestamp":"t","payload":{"type":"user_message","message":"m"}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"message":"m","type":"user_message"}}"#,
        r#"{"timestamp": "t","type":"event_msg","payload":{"type":"user_message","message":"m"}}"#,
        r#"{"timestamp":"t","type":"event\u005fmsg","payload":{"type":"user_message","message":"m"}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":"m","images":[]}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":null}}"#,
        r#"{"timestamp":null,"type":"event_msg","payload":{"type":"user_message","message":"m"}}"#,
        r#"{"timestamp":"t","type":"event_msg","payload":{"type":"task_started","turn_id":"t"}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","id":"msg_1","role":"assistant","content":[]}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"text":"a","type":"input_text"}]}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"f","call_id":"c","arguments":"{}"}}"#,
        r#"{"timestamp":"t","type":"session_meta","payload":{"id":"x","forked_from_id":null,"timestamp":"t","cwd":"/","originator":"o","cli_version":"1"}}"#,
        r#"{"timestamp":"t","type":"session_meta","payload":{"id":"x","timestamp":"t","cwd":"/","originator":"o","cli_version":"1","base_instructions":null}}"#,
        r#"{"timestamp":"t","type":"turn_context","payload":{"cwd":"/"}}"#,
    ] {
        assert_eq!(template::line(raw), None, "{raw}");
        assert!(same(raw), "the fast way refused {raw}");
    }
    // A member given twice: the template reads no member after the phase, and the scanner
    // refuses the line (serde refuses a duplicate field).
    let twice = r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[],"phase":"commentary","phase":null}}"#;
    assert_eq!(template::line(twice), None);
    assert!(!same(twice));
}

/// A JSON value of any type, nested a little: what a skipped or type-checked member may hold.
fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(("[a-z]{1,6}", inner), 0..3)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// A string as JSON text: any characters, with escapes, and `\u` escapes (a surrogate pair
/// among them) written the long way as another writer may.
fn json_string() -> impl Strategy<Value = String> {
    "[a-z\"\\\\\n\t\u{1}\u{e9}\u{1f600}☃§ /]{0,40}".prop_map(|text| {
        Value::from(text)
            .to_string()
            .replace('☃', "\\ud83d\\ude00")
            .replace('§', "\\u00e9")
    })
}

/// A line of one of the templates' shapes, its strings and values drawn at random, each
/// optional member there or not.
fn template_line() -> impl Strategy<Value = String> {
    let s = json_string;
    let v = || json_value().prop_map(|v| v.to_string());
    let maybe = |member: &'static str, value: BoxedStrategy<String>| {
        prop::option::of(value).prop_map(move |value| {
            value.map_or(String::new(), |value| format!(",\"{member}\":{value}"))
        })
    };
    let part = (s(), s()).prop_map(|(kind, text)| format!(r#"{{"type":{kind},"text":{text}}}"#));
    let payload = prop_oneof![
        (
            s(),
            prop::collection::vec(part, 0..3),
            maybe("phase", s().boxed())
        )
            .prop_map(|(role, parts, phase)| format!(
                r#""response_item","payload":{{"type":"message","role":{role},"content":[{}]{phase}}}"#,
                parts.join(",")
            )),
        (v(), v(), s()).prop_map(|(name, arguments, call_id)| format!(
            r#""response_item","payload":{{"type":"function_call","name":{name},"arguments":{arguments},"call_id":{call_id}}}"#
        )),
        (s(), v(), v()).prop_map(|(call_id, name, input)| format!(
            r#""response_item","payload":{{"type":"custom_tool_call","call_id":{call_id},"name":{name},"input":{input}}}"#
        )),
        (
            prop::sample::select(vec!["function_call_output", "custom_tool_call_output"]),
            s(),
            v()
        )
            .prop_map(|(kind, call_id, output)| format!(
                r#""response_item","payload":{{"type":"{kind}","call_id":{call_id},"output":{output}}}"#
            )),
        (
            prop::sample::select(vec!["user_message", "agent_message"]),
            s(),
            maybe("phase", s().boxed())
        )
            .prop_map(|(kind, message, phase)| format!(
                r#""event_msg","payload":{{"type":"{kind}","message":{message}{phase}}}"#
            )),
        (
            (s(), v(), v(), v(), v()),
            (
                maybe("source", v().boxed()),
                maybe("model_provider", v().boxed()),
                maybe(
                    "base_instructions",
                    s().prop_map(|text| format!(r#"{{"text":{text}}}"#)).boxed()
                ),
                maybe("git", v().boxed()),
            )
        )
            .prop_map(|((id, timestamp, cwd, originator, cli_version), (a, b, c, d))| format!(
                r#""session_meta","payload":{{"id":{id},"timestamp":{timestamp},"cwd":{cwd},"originator":{originator},"cli_version":{cli_version}{a}{b}{c}{d}}}"#
            )),
    ];
    (s(), payload)
        .prop_map(|(timestamp, payload)| format!(r#"{{"timestamp":{timestamp},"type":{payload}}}"#))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// Every line of a template's shape is read by it, as the scanner reads it; damaged by one
    /// edit, it is refused or still read as the scanner reads it.
    #[test]
    fn templates_read_what_the_scanner_reads(raw in template_line(), edit in one_edit()) {
        let by_template = template::line(&raw);
        prop_assert!(by_template.is_some(), "{}", raw);
        prop_assert_eq!(&by_template, &scan::line(&raw), "{}", raw);
        agree(&raw);
        if let Some(damaged) = edit.apply(&raw) {
            if let Some(view) = template::line(&damaged) {
                prop_assert_eq!(Some(view), scan::line(&damaged), "{}", damaged);
            }
            agree(&damaged);
        }
    }
}

/// What [`fast_first_line`] must answer on `text`: nothing, or the line up to the first
/// newline as [`fast`] reads it.
fn first_line_agrees(text: &str) {
    if let Some((view, len)) = fast_first_line(text) {
        let end = text.find('\n').unwrap_or(text.len());
        assert_eq!(len, end, "{text:?}");
        assert_eq!(Some(view), fast(&text[..end]), "{text:?}");
    }
}

#[test]
fn a_templates_line_ends_at_the_first_newline() {
    let call = |name: &str| {
        format!(
            r#"{{"timestamp":"t","type":"response_item","payload":{{"type":"function_call","name":{name},"arguments":"{{}}","call_id":"c"}}}}"#
        )
    };
    for (text, read) in [
        (call("\"f\""), true),
        (call("\"f\"") + "\n", true),
        (call("\"f\"") + "\n" + &call("\"g\""), true),
        (call("\"f\"") + "\r\n", false),
        (call("\"f\"") + " \n", false),
        (call("\"f\"") + "{}", false),
        // A newline between the tokens of a skipped value, or before it: in a file the line
        // ends there, and neither half is a template's.
        (call("[1,\n2]"), false),
        (call("\n\"f\""), false),
        (call("{\"a\":\n1}"), false),
    ] {
        assert_eq!(fast_first_line(&text).is_some(), read, "{text:?}");
        first_line_agrees(&text);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// A line of a template's shape or any JSON, damaged or not, and then another line after
    /// a newline (or a CRLF, or trailing space, or nothing): the first line is read as the
    /// text up to its first newline reads, or left to the caller.
    #[test]
    fn the_first_line_is_read_as_the_line(
        first in prop_oneof![template_line(), line_text()],
        second in template_line(),
        edit in one_edit(),
        separator in prop::sample::select(vec!["\n", "\r\n", " \n", "", "\n\n"]),
        newline_at in any::<prop::sample::Index>(),
    ) {
        let first = edit.apply(&first).unwrap_or(first);
        first_line_agrees(&format!("{first}{separator}{second}"));
        first_line_agrees(&format!("{first}{separator}"));
        // A newline anywhere in the first line (between bytes of one character, the text is
        // not a `str`: skipped).
        let at = newline_at.index(first.len() + 1);
        if first.is_char_boundary(at) {
            first_line_agrees(&format!("{}\n{}", &first[..at], &first[at..]));
        }
    }
}
