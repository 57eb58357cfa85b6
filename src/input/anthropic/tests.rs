use super::*;
use crate::model::transcript::{ReasoningOrigin, Thinking, ToolCall};
use crate::rules::RuleSet;
use std::path::Path;

fn read(values: Vec<Value>) -> FileRead {
    let rules = RuleSet::builtin().unwrap();
    crate::input::format::read_values(&AnthropicReader, values, &rules, Path::new("log.jsonl"))
}

fn ev(data: Value) -> Value {
    json!({"event": data["type"].clone(), "data": data})
}

#[test]
fn an_sse_stream_with_thinking_and_a_tool_call() {
    let events = vec![
        ev(
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-0", "content": []}}),
        ),
        ev(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        ev(json!({"type": "ping"})),
        ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "The user wants "}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "the weather."}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQB"}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 0})),
        ev(
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Checking."}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 1})),
        ev(
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": "}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"Paris\"}"}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 2})),
        ev(
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}}),
        ),
        ev(json!({"type": "message_stop"})),
    ];
    let pair = json!({"request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages", "body": {
            "model": "claude-sonnet-4-0", "max_tokens": 1024, "stream": true, "system": "Be brief.",
            "messages": [{"role": "user", "content": "Weather in Paris?"}]}},
        "response": {"status": 200, "sse_events": events}});
    assert!(AnthropicReader.detect(Some(&pair), b""));
    let read = read(vec![pair]);
    assert!(read.refused.is_empty(), "{:?}", read.refused);
    let t = &read.conversations[0].transcript;
    assert_eq!(t.messages.len(), 3);
    assert_eq!(
        (t.messages[0].role.as_str(), t.messages[0].content.clone()),
        ("system", Content::Text("Be brief.".into()))
    );
    assert_eq!(
        t.messages[1].content,
        Content::Parts(vec![Part::Text("Weather in Paris?".into())])
    );
    let reply = &t.messages[2];
    assert_eq!(reply.role.as_str(), "assistant");
    assert_eq!(
        reply.thinking,
        vec![Thinking {
            summary: vec![],
            content: vec!["The user wants the weather.".into()],
            encrypted: None,
            origin: ReasoningOrigin::Anthropic
        }]
    );
    assert_eq!(
        reply.content,
        Content::Parts(vec![Part::Text("Checking.".into())])
    );
    assert_eq!(
        reply.tool_calls,
        vec![ToolCall {
            id: Some("toolu_1".into()),
            name: "weather".into(),
            arguments: r#"{"city":"Paris"}"#.into(),
            arguments_from_object: true,
            ..ToolCall::default()
        }]
    );
    assert_eq!(t.meta.model.as_deref(), Some("claude-sonnet-4-0"));
    assert!(!t.meta.finished);
    let notes: Vec<&str> = t.source_notes.iter().map(|n| n.rule.as_str()).collect();
    assert_eq!(notes, ["builtin.thinking-signature"]);
}

/// Many blocks, their deltas in any order; a delta goes to the last block
/// started with its index, a delta without one nowhere, and text is appended to the text
/// the block holds (a value that is no string is replaced).
#[test]
fn sse_deltas_find_their_blocks_among_many() {
    let n = 2000;
    let mut events = vec![json!({"type": "message_start", "message": {"id": "m", "model": "c"}})];
    for i in 0..n {
        events.push(json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": format!("t{i}"), "name": "f", "input": {}}}));
    }
    for i in (0..n).rev() {
        events.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": format!("{{\"i\":{i}")}}));
    }
    for i in 0..n {
        events.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": "}"}}));
    }
    // Index `n` twice: the deltas go to the second block.
    events.push(json!({"type": "content_block_start", "index": n, "content_block": {"type": "text", "text": "first"}}));
    events.push(json!({"type": "content_block_start", "index": n, "content_block": {"type": "text", "text": 7}}));
    for word in ["a", "b", "c"] {
        events.push(json!({"type": "content_block_delta", "index": n, "delta": {"type": "text_delta", "text": word}}));
    }
    events.push(
        json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "lost"}}),
    );
    let mut content: Vec<Value> = (0..n)
        .map(|i| json!({"type": "tool_use", "id": format!("t{i}"), "name": "f", "input": {"i": i}}))
        .collect();
    content.push(json!({"type": "text", "text": "first"}));
    content.push(json!({"type": "text", "text": "abc"}));
    assert_eq!(
        assemble(events),
        json!({"type": "message", "role": "assistant", "id": "m", "model": "c", "content": content})
    );
}

fn request(messages: Value) -> Value {
    json!({"model": "claude-haiku-4-5", "max_tokens": 100, "messages": messages})
}

fn pair(messages: Value, reply: &str) -> Value {
    json!({"request": {"uri": "https://api.anthropic.com/v1/messages", "body": request(messages)},
           "response": {"status": 200, "body": {"type": "message", "role": "assistant", "id": "msg", "stop_reason": "end_turn",
             "content": [{"type": "text", "text": reply}]}}})
}

#[test]
fn a_file_of_raw_sse_lines_is_a_response() {
    let lines = [
        "event: message_start",
        r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[]}}"#,
        "event: content_block_start",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi there"}}"#,
        r#"data: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#,
        r#"data: {"type":"message_stop"}"#,
    ];
    assert!(AnthropicReader.detect(None, lines[0].as_bytes()));
    assert!(!AnthropicReader.detect(
        None,
        br#"data: {"object":"chat.completion.chunk","choices":[]}"#
    ));
    let read = read(lines.iter().map(|l| json!(l)).collect());
    assert!(read.refused.is_empty(), "{:?}", read.refused);
    let c = &read.conversations[0];
    assert_eq!(c.records, (0..7).collect::<Vec<_>>());
    assert_eq!(c.transcript.messages.len(), 1);
    assert_eq!(c.transcript.messages[0].content.texts(), vec!["Hi there"]);
    assert!(c.transcript.meta.finished);
}

#[test]
fn a_chain_of_three_requests_is_one_conversation() {
    let u1 = json!({"role": "user", "content": "Who is youngest?"});
    let a1 = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "info", "input": {"name": "Alice"}}]});
    let r1 = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "Alice is 30", "cache_control": {"type": "ephemeral"}}]});
    let r1_moved = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "Alice is 30"}]});
    let a2 = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_b", "name": "info", "input": {"name": "Bob"}}]});
    let r2 = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "Bob is 5", "is_error": false}]});
    let read = read(vec![
        pair(json!([u1]), "ignored: the next request holds it"),
        pair(json!([u1, a1, r1]), "ignored too"),
        pair(json!([u1, a1, r1_moved, a2, r2]), "Bob."),
    ]);
    assert_eq!(read.conversations.len(), 1);
    let c = &read.conversations[0];
    assert_eq!(c.records, vec![0, 1, 2]);
    type Shape<'a> = (&'a str, Vec<&'a str>, Vec<String>, Vec<String>);
    let shape: Vec<Shape> = c
        .transcript
        .messages
        .iter()
        .map(|m| {
            (
                m.role.as_str(),
                m.content.texts(),
                m.tool_calls.iter().filter_map(|t| t.id.clone()).collect(),
                m.tool_call_ids.clone(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            ("user", vec!["Who is youngest?"], vec![], vec![]),
            ("assistant", vec![], vec!["toolu_a".to_string()], vec![]),
            (
                "tool",
                vec!["Alice is 30"],
                vec![],
                vec!["toolu_a".to_string()]
            ),
            ("assistant", vec![], vec!["toolu_b".to_string()], vec![]),
            (
                "tool",
                vec!["Bob is 5"],
                vec![],
                vec!["toolu_b".to_string()]
            ),
            ("assistant", vec!["Bob."], vec![], vec![]),
        ]
    );
    assert!(c.transcript.meta.finished);
    let notes = c.transcript.note_counts();
    assert_eq!(notes, [("policy.resent_history", 2)]);
}

#[test]
fn a_chain_that_diverges_is_kept_apart_and_says_where() {
    let u1 = json!({"role": "user", "content": "Plan a trip"});
    let a1 = json!({"role": "assistant", "content": "Where to?"});
    let read = read(vec![
        pair(json!([u1]), "Where to?"),
        pair(
            json!([u1, a1, {"role": "user", "content": "Rome"}]),
            "Rome it is.",
        ),
        pair(
            json!([u1, a1, {"role": "user", "content": "Paris"}]),
            "Paris it is.",
        ),
    ]);
    assert_eq!(read.conversations.len(), 2);
    assert_eq!(read.conversations[0].records, vec![0, 1]);
    assert_eq!(read.conversations[1].records, vec![2]);
    let second = &read.conversations[1].transcript;
    assert_eq!(
        second.messages.last().unwrap().content.texts(),
        vec!["Paris it is."]
    );
    assert_eq!(
        second.source_notes,
        vec![SourceNote {
            rule: crate::rules::Builtin::ChainDiverged.into(),
            what: "request disagrees at message 3 with the history of record 2: a conversation of its own".into(),
            count: 1,
            bytes_dropped: 0,
        }]
    );
}

/// A second result line of one `custom_id` (found by the `anthropic` fuzz target) is
/// refused; the first joins its request, so every line is in a conversation, a refusal
/// or a drop.
#[test]
fn a_second_result_of_one_custom_id_is_refused_and_the_first_joins_its_request() {
    let errored = |message: &str| json!({"custom_id": "bad", "result": {"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error", "message": message}}}});
    let read = read(vec![
        json!({"custom_id": "bad", "params": request(json!([{"role": "user", "content": "Hello"}]))}),
        errored("first"),
        json!({"custom_id": "ok", "params": request(json!([{"role": "user", "content": "Hi"}]))}),
        errored("second"),
        json!({"custom_id": "ok", "result": {"type": "succeeded", "message": {"type": "message", "role": "assistant", "id": "msg_ok", "stop_reason": "end_turn", "content": [{"type": "text", "text": "Hello!"}]}}}),
        json!({"custom_id": "ok", "result": {"type": "succeeded", "message": {"type": "message", "role": "assistant", "id": "msg_2", "stop_reason": "end_turn", "content": [{"type": "text", "text": "Again!"}]}}}),
    ]);
    let failed = InputError::BatchFailed {
        custom_id: "bad".into(),
        kind: "errored".into(),
        reason: "first".into(),
    };
    assert_eq!(
        read.refused,
        vec![
            (0, failed.clone()),
            (1, failed),
            (3, InputError::BatchResultWithoutRequest("bad".into())),
            (5, InputError::BatchResultWithoutRequest("ok".into())),
        ]
    );
    assert_eq!(read.conversations.len(), 1);
    assert_eq!(read.conversations[0].records, vec![2, 4]);
    assert_eq!(
        read.conversations[0].transcript.messages[1].content.texts(),
        vec!["Hello!"]
    );
    assert!(read.dropped.is_empty());
}

#[test]
fn a_batch_result_that_errored_quarantines_its_request_with_the_reason() {
    let read = read(vec![
        json!({"custom_id": "ok", "params": request(json!([{"role": "user", "content": "Hi"}]))}),
        json!({"custom_id": "bad", "params": request(json!([{"role": "user", "content": "Hello"}]))}),
        json!({"custom_id": "bad", "result": {"type": "errored", "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: too large"}}}}),
        json!({"custom_id": "ok", "result": {"type": "succeeded", "message": {"type": "message", "role": "assistant", "id": "msg_ok", "stop_reason": "end_turn", "content": [{"type": "text", "text": "Hello!"}]}}}),
        json!({"custom_id": "late", "result": {"type": "expired"}}),
    ]);
    assert_eq!(read.conversations.len(), 1);
    assert_eq!(read.conversations[0].records, vec![0, 3]);
    assert_eq!(
        read.conversations[0].transcript.messages[1].content.texts(),
        vec!["Hello!"]
    );
    assert_eq!(
        read.refused,
        vec![
            (
                1,
                InputError::BatchFailed {
                    custom_id: "bad".into(),
                    kind: "errored".into(),
                    reason: "max_tokens: too large".into()
                }
            ),
            (
                2,
                InputError::BatchFailed {
                    custom_id: "bad".into(),
                    kind: "errored".into(),
                    reason: "max_tokens: too large".into()
                }
            ),
            (4, InputError::BatchResultWithoutRequest("late".into())),
        ]
    );
    assert_eq!(
        read.refused[0].1.to_string(),
        "batch result `bad` errored: max_tokens: too large"
    );
}
