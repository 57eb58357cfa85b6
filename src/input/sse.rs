//! Server-sent events as API loggers keep them, for the three log readers (Anthropic
//! Messages, Chat Completions streams, Responses): one reading of a raw SSE line and of a
//! logged event list, so that the readers agree on what a line is and count what they drop.
//!
//! A raw line is `data: {...}`, `data: [DONE]`, a field line (`event:`, `id:`, `retry:`), a
//! comment (`: ...`) or blank. A logged event is `{"event", "data"}` (data an object or JSON
//! text), a bare data object, or a raw `data:` line. A `data:` line whose JSON cannot be read is
//! dropped and counted ([`Unreadable`]): the readers turn the count into a
//! `builtin.unreadable-event` note whose bytes enter the text accounting.

use serde_json::Value;

use crate::model::transcript::SourceNote;
use crate::rules::Builtin;

/// What one raw SSE line is.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    /// A `data:` line's JSON.
    Data(Value),
    /// `data: [DONE]`: the end of a stream.
    Done,
    /// A field line (`event:`, `id:`, `retry:`), a comment or a blank line: part of the stream
    /// around it, saying nothing of its content.
    Filler,
    /// A `data:` line whose data is not JSON; its length in bytes.
    Unreadable(usize),
    /// Not an SSE line at all.
    Other,
}

/// Reads one raw line.
pub(crate) fn line(text: &str) -> Line {
    let text = text.trim();
    if text.is_empty() || text.starts_with(':') {
        return Line::Filler;
    }
    if let Some(data) = text.strip_prefix("data:") {
        let data = data.trim();
        if data == "[DONE]" {
            return Line::Done;
        }
        return match serde_json::from_str(data) {
            Ok(value) => Line::Data(value),
            Err(_) => Line::Unreadable(data.len()),
        };
    }
    let field = ["event:", "id:", "retry:"];
    if field.iter().any(|f| text.starts_with(f)) {
        Line::Filler
    } else {
        Line::Other
    }
}

/// Data lines dropped because their JSON could not be read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unreadable {
    pub count: u64,
    pub bytes: usize,
}

impl Unreadable {
    /// Counts a line's reading: unreadable data is one more.
    pub(crate) fn count(&mut self, line: &Line) {
        if let Line::Unreadable(bytes) = line {
            self.count += 1;
            self.bytes += bytes;
        }
    }

    pub(crate) fn add(&mut self, other: Unreadable) {
        self.count += other.count;
        self.bytes += other.bytes;
    }

    /// The note saying what was dropped, when anything was.
    pub(crate) fn note(self) -> Option<SourceNote> {
        (self.count > 0).then(|| SourceNote {
            rule: Builtin::UnreadableEvent.into(),
            what: "SSE data that is not JSON dropped".into(),
            count: self.count,
            bytes_dropped: self.bytes,
        })
    }
}

/// A logged event list (`response.sse_events`, or `response.events`): each event's data, in
/// order, `[DONE]` and fillers left out, unreadable data counted.
pub(crate) struct Events {
    pub data: Vec<Value>,
    pub unreadable: Unreadable,
}

/// The events logged with `record`'s response, or `None` when it has no event list.
pub(crate) fn events(record: &Value) -> Option<Events> {
    let response = record.get("response")?;
    let list = response
        .get("sse_events")
        .or_else(|| response.get("events"))?
        .as_array()?;
    let mut events = Events {
        data: Vec::with_capacity(list.len()),
        unreadable: Unreadable::default(),
    };
    for event in list {
        let read = event_line(event);
        events.unreadable.count(&read);
        if let Line::Data(value) = read {
            events.data.push(value);
        }
    }
    Some(events)
}

/// The data of one logged event, `None` when it has none to give.
pub(crate) fn data(event: &Value) -> Option<Value> {
    match event_line(event) {
        Line::Data(value) => Some(value),
        Line::Done | Line::Filler | Line::Unreadable(_) | Line::Other => None,
    }
}

/// One logged event read as the line it was.
fn event_line(event: &Value) -> Line {
    match event {
        Value::String(text) => line(text),
        Value::Object(map) => match map.get("data") {
            Some(Value::String(text)) => line(&format!("data: {text}")),
            Some(data @ Value::Object(_)) => Line::Data(data.clone()),
            Some(_) => Line::Other,
            None => Line::Data(event.clone()),
        },
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => Line::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_of_line_reads_the_same_for_every_reader() {
        assert_eq!(line(r#"data: {"a":1}"#), Line::Data(json!({"a": 1})));
        assert_eq!(line("data: [DONE]"), Line::Done);
        for filler in [
            "",
            "  ",
            ": ping",
            "event: message_start",
            "id: 7",
            "retry: 100",
        ] {
            assert_eq!(line(filler), Line::Filler, "{filler:?}");
        }
        assert_eq!(line("data: {oops"), Line::Unreadable(5));
        assert_eq!(line("hello"), Line::Other);
    }

    #[test]
    fn a_logged_list_keeps_its_data_and_counts_what_it_drops() {
        let record = json!({"response": {"sse_events": [
            {"event": "message_start", "data": {"type": "message_start"}},
            {"data": "{\"type\":\"ping\"}"},
            "data: not json",
            {"data": "[DONE]"},
            "event: done",
        ]}});
        let events = events(&record).expect("an event list");
        assert_eq!(
            events.data,
            vec![json!({"type": "message_start"}), json!({"type": "ping"})]
        );
        assert_eq!(events.unreadable, Unreadable { count: 1, bytes: 8 });
        let note = events.unreadable.note().expect("a note");
        assert_eq!(note.rule.as_str(), "builtin.unreadable-event");
        assert_eq!(note.bytes_dropped, 8);
        assert!(Unreadable::default().note().is_none());
    }
}
