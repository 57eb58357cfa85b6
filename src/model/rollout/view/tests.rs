use super::super::{
    BaseInstructions, Compacted, ContentItem, EventMsg, GitInfo, Line, Phase, ReasoningText,
    ResponseItem, SessionMeta, SummaryText, ToolOutput, ROLE_ASSISTANT, ROLE_USER,
};
use super::*;

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
    }
}

#[test]
fn every_written_item_reads_back() {
    let items = [
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
    ];
    for item in &items {
        let raw = round_trip(TAG_RESPONSE_ITEM, item);
        let view = read(&raw);
        assert_eq!(
            view.item,
            RolloutItemView::ResponseItem(expected_view(item)),
            "{raw}"
        );
    }
}

#[test]
fn session_meta_events_and_compacted_read_back() {
    let meta = SessionMeta {
        id: "0199a213-81c0-7800-8aa1-bbab2a035a53".into(),
        timestamp: "2025-10-01T12:00:00.000Z".into(),
        cwd: "/p".into(),
        originator: "rollover".into(),
        cli_version: "0.169.0".into(),
        source: Some("cli".into()),
        model_provider: None,
        base_instructions: Some(BaseInstructions {
            text: "be brief".into(),
        }),
        git: Some(GitInfo {
            branch: "main".into(),
        }),
    };
    let raw = round_trip(TAG_SESSION_META, &meta);
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
        let raw = round_trip(TAG_EVENT_MSG, event);
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
        TAG_COMPACTED,
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
    let raw = round_trip(TAG_COMPACTED, &replacing);
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
        (TAG_TURN_CONTEXT, RolloutItemView::TurnContext),
        (TAG_WORLD_STATE, RolloutItemView::WorldState),
        (TAG_TOKEN_USAGE_RECORD, RolloutItemView::TokenUsageRecord),
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
