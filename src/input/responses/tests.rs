use super::*;
use crate::model::transcript::{Content, ReasoningOrigin, Thinking, ToolCall};
use crate::rules::RuleSet;
use std::collections::HashMap;
use std::path::Path;

fn read(values: Vec<Value>) -> FileRead {
    read_with(values, RuleSet::builtin().unwrap())
}

fn read_with(values: Vec<Value>, rules: RuleSet) -> FileRead {
    crate::input::format::read_values(&ResponsesReader, values, &rules, Path::new("log.jsonl"))
}

fn stored(id: &str, previous: Option<&str>, input: Value, output: Value) -> Value {
    json!({"object": "response", "id": id, "previous_response_id": previous, "status": "completed",
           "model": "gpt-5", "input": input, "output": output})
}

/// The resolver as it was, kept as the definition [`resolve`] must equal: each entry's
/// full history built by recursion, every history its parent's copied and extended
/// (quadratic in memory, a stack frame per link: for small inputs only).
fn reference_resolve(
    i: usize,
    entries: &[Entry],
    by_response: &HashMap<String, usize>,
    full: &mut Vec<Option<Result<Vec<Value>, String>>>,
    visiting: &mut std::collections::HashSet<usize>,
) {
    if full[i].is_some() {
        return;
    }
    let entry = &entries[i];
    let result = match &entry.previous {
        None => Ok(entry.input.clone()),
        Some(previous) => match by_response.get(previous) {
            None => Err(previous.clone()),
            Some(&parent) if parent == i || !visiting.insert(i) => Err(previous.clone()),
            Some(&parent) => {
                reference_resolve(parent, entries, by_response, full, visiting);
                match full[parent].clone() {
                    Some(Ok(mut history)) => {
                        history.extend(entries[parent].output.iter().cloned());
                        history.extend(entry.input.iter().cloned());
                        Ok(history)
                    }
                    Some(Err(missing)) => Err(missing),
                    None => Err(previous.clone()),
                }
            }
        },
    };
    full[i] = Some(result);
}

fn reference_histories(entries: &[Entry]) -> Vec<Option<Result<Vec<Value>, String>>> {
    let by_response: HashMap<String, usize> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((e.response_id.clone()?, i)))
        .collect();
    let mut full = vec![None; entries.len()];
    for i in 0..entries.len() {
        let mut visiting = std::collections::HashSet::new();
        reference_resolve(i, entries, &by_response, &mut full, &mut visiting);
    }
    full
}

proptest::proptest! {
    /// Random chain shapes in random orders (ids repeated, links to ids no entry has,
    /// links to itself and loops): every entry's history, or the missing id, exactly as
    /// the recursive resolver gives it; and the parts made parents first.
    #[test]
    fn the_linear_resolver_equals_the_recursive_one(
        shapes in proptest::collection::vec(
            (
                proptest::option::of(0u8..6),
                proptest::option::of(0u8..7),
                proptest::collection::vec(0u8..4, 0..3),
                proptest::collection::vec(0u8..4, 0..3),
            ),
            0..14,
        )
    ) {
        let entries: Vec<Entry> = shapes
            .iter()
            .enumerate()
            .map(|(record, (id, previous, input, output))| Entry {
                record,
                response_id: id.map(|n| format!("resp_{n}")),
                previous: previous.map(|n| format!("resp_{n}")),
                input: input.iter().map(|m| json!({"role": "user", "content": format!("in {m}")})).collect(),
                output: output.iter().map(|m| json!({"type": "message", "role": "assistant", "content": format!("out {m}")})).collect(),
                ..Entry::default()
            })
            .collect();
        let links = resolve(&entries);
        let want = reference_histories(&entries);
        for (i, want) in want.into_iter().enumerate() {
            let got = links.parents[i].clone().map(|_| links.history(i, &entries));
            proptest::prop_assert_eq!(Some(got), want, "entry {}", i);
        }
        let mut seen = vec![false; entries.len()];
        for &i in &links.settled {
            if let Some(parent) = links.parent(i) {
                proptest::prop_assert!(seen[parent], "{} settled before its parent", i);
            }
            seen[i] = true;
        }
        let resolved = links.parents.iter().filter(|p| p.is_ok()).count();
        proptest::prop_assert_eq!(links.settled.len(), resolved);
    }
}

#[test]
fn a_previous_response_id_chain_is_one_conversation() {
    let values = vec![
        stored(
            "resp_1",
            None,
            json!([{"role": "user", "content": "Hi"}]),
            json!([{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Greet."}], "encrypted_content": "gAAA"},
                   {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "Hello!", "annotations": [], "logprobs": []}]}]),
        ),
        stored(
            "resp_2",
            Some("resp_1"),
            json!([{"role": "user", "content": "Run it"}]),
            json!([{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "run", "arguments": "{}", "status": "completed"}]),
        ),
        stored(
            "resp_3",
            Some("resp_2"),
            json!([{"type": "function_call_output", "call_id": "call_1", "output": "done"}]),
            json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}]),
        ),
    ];
    assert!(ResponsesReader.detect(Some(&values[0]), b""));
    let read = read(values);
    assert!(read.refused.is_empty(), "{:?}", read.refused);
    assert_eq!(read.conversations.len(), 1);
    let c = &read.conversations[0];
    assert_eq!(c.records, vec![0, 1, 2]);
    let m = &c.transcript.messages;
    let roles: Vec<&str> = m.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    assert_eq!(m[0].content, Content::Text("Hi".into()));
    assert_eq!(
        m[1].thinking,
        vec![Thinking {
            summary: vec!["Greet.".into()],
            content: vec![],
            encrypted: Some("gAAA".into()),
            origin: ReasoningOrigin::OpenAi
        }]
    );
    assert_eq!(m[1].content.texts(), vec!["Hello!"]);
    assert_eq!(
        m[3].tool_calls,
        vec![ToolCall {
            id: Some("call_1".into()),
            name: "run".into(),
            arguments: "{}".into(),
            ..ToolCall::default()
        }]
    );
    assert_eq!(m[4].tool_call_ids, ["call_1"]);
    assert_eq!(m[4].content, Content::Text("done".into()));
    assert_eq!(m[5].content.texts(), vec!["Done."]);
    let notes = c.transcript.note_counts();
    assert_eq!(notes, [("policy.resent_history", 2)]);
}

#[test]
fn a_missing_link_is_quarantined_with_its_id_and_what_continues_it() {
    let values = vec![
        stored(
            "resp_2",
            Some("resp_gone"),
            json!([{"role": "user", "content": "Run it"}]),
            json!([]),
        ),
        stored(
            "resp_3",
            Some("resp_2"),
            json!([{"role": "user", "content": "Again"}]),
            json!([]),
        ),
        stored(
            "resp_9",
            None,
            json!([{"role": "user", "content": "Other"}]),
            json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]),
        ),
    ];
    let read = read(values);
    assert_eq!(read.conversations.len(), 1);
    assert_eq!(read.conversations[0].records, vec![2]);
    assert_eq!(read.refused.len(), 2);
    for (index, error) in &read.refused {
        assert!([0, 1].contains(index));
        assert_eq!(error, &InputError::MissingLink("resp_gone".into()));
    }
    assert!(read.refused[0].1.to_string().contains("resp_gone"));
}

#[test]
fn a_code_interpreter_call_is_a_custom_call_and_its_logs() {
    let values = vec![stored(
        "resp_1",
        None,
        json!("Compute 2**10"),
        json!([{"type": "code_interpreter_call", "id": "ci_1", "code": "print(2**10)", "container_id": "cntr", "status": "completed",
                "outputs": [{"type": "logs", "logs": "1024\n"}]},
               {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "1024"}]}]),
    )];
    let read = read(values);
    let m = &read.conversations[0].transcript.messages;
    assert_eq!(m.len(), 4);
    assert_eq!(
        m[1].tool_calls,
        vec![ToolCall {
            id: Some("ci_1".into()),
            name: "code_interpreter".into(),
            arguments: "print(2**10)".into(),
            custom: true,
            ..ToolCall::default()
        }]
    );
    assert_eq!(
        (m[2].role.as_str(), m[2].tool_call_ids.clone()),
        ("tool", vec!["ci_1".to_string()])
    );
    assert_eq!(m[2].content, Content::Text("1024\n".into()));
    assert_eq!(m[3].content.texts(), vec!["1024"]);
    let notes = &read.conversations[0].transcript.source_notes;
    assert_eq!(notes[0].rule.as_str(), "policy.hosted_tool");
    assert_eq!(
        notes[0].what,
        "code_interpreter_call item as a call and its output"
    );
}

#[test]
fn stateless_requests_resending_history_merge_and_instructions_lead() {
    let first = json!({"request": {"uri": "https://api.openai.com/v1/responses", "body": {"model": "m", "instructions": "Be kind.",
            "input": [{"role": "user", "content": "Q"}]}},
        "response": {"body": {"object": "response", "id": "r1", "output": [{"type": "function_call", "id": "fc", "call_id": "c1", "name": "f", "arguments": "{}", "status": "completed"}]}}});
    let second = json!({"request": {"uri": "https://api.openai.com/v1/responses", "body": {"model": "m", "instructions": "Be kind.",
            "input": [{"role": "user", "content": "Q"}, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "status": null},
                      {"type": "function_call_output", "call_id": "c1", "output": "42"}]}},
        "response": {"body": {"object": "response", "id": "r2", "status": "completed", "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "42."}]}]}}});
    let read = read(vec![first, second]);
    assert_eq!(read.conversations.len(), 1);
    let t = &read.conversations[0].transcript;
    let roles: Vec<&str> = t.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
    assert_eq!(t.messages[0].content, Content::Text("Be kind.".into()));
    assert!(t.meta.finished);
}
