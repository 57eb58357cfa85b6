//! Items to rollout bytes: the session meta first, a `user_message` event after each real user
//! message and an `agent_message` event after each assistant message, timestamps one
//! millisecond apart from the session start (deterministic, non-decreasing). Items are
//! serialised in place, never cloned.

use std::borrow::Cow;

use super::{Conversation, ConvertError, ItemKind, OutItem, OutPayload};
use crate::model::responses::{Format, ResponsesOptions};
use crate::model::rollout::table::{JsonOut, WriteJson};
use crate::model::rollout::wire::{line, tag};
use crate::model::rollout::{
    BaseInstructions, Compacted, ContentItem, EventMsg, GitInfo, NativeItem, ResponseItem,
    SessionMeta, ROLE_USER,
};
use crate::model::time::{format_ms, ms_digits, MAX_MS};
use crate::model::transcript::RecordMeta;
use crate::rules::RuleSet;

/// The last stage: a converted conversation to the bytes of one output format. The convert
/// stage builds the same [`Conversation`] whichever renderer runs; the caller picks one with
/// [`renderer`]. A renderer may take decisions of its own (appended to the conversation's) and
/// may fail when a rule says quarantine.
pub(crate) trait Render: Sync {
    fn render(
        &self,
        conversation: &mut Conversation,
        rules: &RuleSet,
    ) -> Result<Vec<u8>, ConvertError>;
}

/// Codex rollout lines (`--format codex`).
pub(crate) struct CodexRollout;

/// Responses API request bodies (`--format responses`).
pub(crate) struct ResponsesBody(pub ResponsesOptions);

impl Render for CodexRollout {
    fn render(
        &self,
        conversation: &mut Conversation,
        _rules: &RuleSet,
    ) -> Result<Vec<u8>, ConvertError> {
        // The rollout writes the session meta: the defaults it took are its decisions.
        let mut defaults = std::mem::take(&mut conversation.meta_defaults);
        conversation.decisions.append(&mut defaults);
        Ok(conversation.to_bytes())
    }
}

impl Render for ResponsesBody {
    fn render(
        &self,
        conversation: &mut Conversation,
        rules: &RuleSet,
    ) -> Result<Vec<u8>, ConvertError> {
        super::responses::render(conversation, rules, self.0)
    }
}

/// Renders `conversation` as `format` says: [`renderer`]'s, with no box (an allocation a
/// record on the pipeline's path).
pub(crate) fn render_as(
    format: Format,
    conversation: &mut Conversation,
    rules: &RuleSet,
) -> Result<Vec<u8>, ConvertError> {
    match format {
        Format::Codex => CodexRollout.render(conversation, rules),
        Format::Responses(options) => ResponsesBody(options).render(conversation, rules),
    }
}

/// The renderer of a format.
pub(crate) fn renderer(format: Format) -> Box<dyn Render> {
    match format {
        Format::Codex => Box::new(CodexRollout),
        Format::Responses(options) => Box::new(ResponsesBody(options)),
    }
}

/// The longest working folder of a source written into a session meta, in bytes (Linux's
/// `PATH_MAX`).
pub(crate) const MAX_CWD_BYTES: usize = 4096;

/// Whether a source's working folder can be a session's: an absolute path (`/...` or a
/// drive's `C:\...`, as `rules check` asks of `[session] cwd`), clean (no `.`, `..` or empty
/// component, no control character such as NUL or a newline) and at most [`MAX_CWD_BYTES`].
/// Another one is replaced by the rules' cwd (decision `builtin.source-cwd`).
pub(crate) fn usable_cwd(cwd: &str) -> bool {
    if cwd.len() > MAX_CWD_BYTES
        || !crate::rules::is_absolute_folder(cwd)
        || cwd.chars().any(char::is_control)
    {
        return false;
    }
    let drive = !cwd.starts_with('/');
    let rest = if drive { &cwd[2..] } else { cwd };
    let rest = &rest[1..];
    rest.is_empty()
        || rest
            .split(['/', '\\'])
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// The session meta: `[session]` of the rules, except the working folder and git branch a
/// source records (Claude Code `cwd`, `gitBranch`; an empty branch means none). `--cwd`
/// names the folder of every session, a source's included (its own is kept in the audit line);
/// so does the rules' cwd a session whose own is not [`usable_cwd`].
pub(crate) fn session_meta<'r>(
    rules: &'r RuleSet,
    id: &str,
    started_ms: i64,
    base: Option<String>,
    source: &RecordMeta,
) -> SessionMeta<'r> {
    let session = &rules.session;
    SessionMeta {
        id: id.to_string(),
        timestamp: format_ms(started_ms),
        cwd: match &source.cwd {
            Some(cwd) if usable_cwd(cwd) && !session.cwd_overrides_source => {
                Cow::Owned(cwd.clone())
            }
            Some(_) | None => Cow::Borrowed(&session.cwd),
        },
        originator: Cow::Borrowed(&session.originator),
        cli_version: Cow::Borrowed(&session.cli_version),
        source: session.source.as_deref().map(Cow::Borrowed),
        model_provider: session.model_provider.as_deref().map(Cow::Borrowed),
        // Empty base instructions would leave the model with no instructions at all.
        base_instructions: base
            .filter(|t| !t.is_empty())
            .map(|text| BaseInstructions { text }),
        git: git_info(source),
    }
}

/// The source's git facts (an empty field means none), when it says any.
fn git_info(source: &RecordMeta) -> Option<GitInfo> {
    let given = |field: &Option<String>| field.clone().filter(|f| !f.is_empty());
    let git = GitInfo {
        commit_hash: given(&source.git_commit),
        branch: given(&source.git_branch),
        repository_url: given(&source.git_repository),
    };
    (git != GitInfo::default()).then_some(git)
}

/// Writes the whole rollout, one JSON object per line, `\n` endings. `times[i]` is when input
/// message `i` was written, if the source says (empty for chat records): an item from it is
/// stamped then, unless that would go back in time. Payloads are written by their tables'
/// fast writers ([`WriteJson`]); a message's event copies the bytes of its one text part.
pub(crate) fn write(
    meta: &SessionMeta,
    items: &[OutItem],
    started_ms: i64,
    times: &[Option<i64>],
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    let mut clock = Clock::new(started_ms);
    let out = &mut JsonOut::new(out);
    write_line(out, &mut clock, tag::SESSION_META, meta)?;
    for item in items {
        if let Some(at) = item.origin.and_then(|i| times.get(i).copied().flatten()) {
            clock.advance_to(at);
        }
        match &item.payload {
            OutPayload::Compacted(message) => {
                let compacted = Compacted {
                    message,
                    replacement_history: None,
                };
                write_line(out, &mut clock, tag::COMPACTED, &compacted)?
            }
            OutPayload::CompactedReplacing(message) => {
                let compacted = Compacted {
                    message,
                    replacement_history: Some(vec![replacement_message(message)]),
                };
                write_line(out, &mut clock, tag::COMPACTED, &compacted)?
            }
            OutPayload::CompactedNative(native) => {
                write_line(out, &mut clock, tag::COMPACTED, native)?
            }
            OutPayload::Item(response) => {
                out.take_marked();
                write_line(out, &mut clock, tag::RESPONSE_ITEM, response)?;
                let text = out.take_marked();
                if let Some(event) = event_for(item.kind, response) {
                    out.copy_next(text);
                    write_line(out, &mut clock, tag::EVENT_MSG, &event)?;
                }
            }
        }
    }
    Ok(())
}

/// The one message a replacing `compacted` line leaves in the history: the summary, as a user
/// message (what Claude Code sends after compaction).
pub(crate) fn replacement_message(summary: &str) -> ResponseItem {
    ResponseItem::Message {
        role: ROLE_USER,
        content: vec![ContentItem::InputText {
            text: summary.to_string(),
        }],
        phase: None,
    }
}

/// One line: its head ([`line_head`]), the payload and `}\n`.
fn write_line<P: WriteJson + ?Sized>(
    out: &mut JsonOut<'_>,
    clock: &mut Clock,
    tag: &'static str,
    payload: &P,
) -> Result<(), serde_json::Error> {
    line_head(out, clock, tag);
    payload.write_json(out)?;
    out.bytes.extend_from_slice(b"}\n");
    Ok(())
}

/// `{"timestamp":"…","type":"TAG","payload":` of the next line; the caller writes the payload
/// and `}\n`.
/// Neither needs escaping (a timestamp is digits, `-:.TZ`; a tag is one of the model's
/// lowercase names), so both are copied between quotes.
fn line_head(out: &mut JsonOut<'_>, clock: &mut Clock, tag: &'static str) {
    clock.tick();
    out.bytes
        .reserve(HEAD + line::field::TYPE.len() + tag.len() + line::field::PAYLOAD.len() + 2);
    out.bytes.extend_from_slice(&clock.head);
    out.key(b',', line::field::TYPE);
    out.bytes.push(b'"');
    out.bytes.extend_from_slice(tag.as_bytes());
    out.bytes.push(b'"');
    out.key(b',', line::field::PAYLOAD);
}

/// `{"timestamp":"`, where a line's head starts.
const OPEN: usize = line::field::TIMESTAMP.len() + 1;

/// A line's head up to its timestamp's closing quote: `{"timestamp":"…Z"`.
const HEAD: usize = OPEN + 24 + 1;

/// The line timestamps: `format_ms` of the start, then of each next millisecond, kept in the
/// head of the line they start ([`line_head`] copies it whole). Lines within one second
/// differ only in the milliseconds, so only those digits are rewritten; the date is formatted
/// again when the second changes.
struct Clock {
    next: i64,
    /// `{"timestamp":"`, the last tick's time and its closing quote.
    head: [u8; HEAD],
    /// True when `head` holds a tick, which the next one may rewrite the milliseconds of.
    ticked: bool,
}

impl Clock {
    fn new(started_ms: i64) -> Clock {
        let mut head = [b'"'; HEAD];
        head[0] = b'{';
        head[1..OPEN - 1].copy_from_slice(&line::field::TIMESTAMP.as_bytes()[1..]);
        Clock {
            next: started_ms,
            head,
            ticked: false,
        }
    }

    /// Moves the clock forward to `ms` (never back: line times stay non-decreasing).
    fn advance_to(&mut self, ms: i64) {
        if ms > self.next {
            self.next = ms;
            // The next tick may be in another second: format it whole.
            self.ticked = false;
        }
    }

    /// The next millisecond, into the head.
    fn tick(&mut self) {
        // Past the last representable millisecond the clock stands still (non-decreasing).
        let ms = self.next.min(MAX_MS);
        self.next = self.next.saturating_add(1);
        // `format_ms` ends in `.mmmZ`; before the epoch it clamps to 0, so reformat there.
        let same_second = ms > 0 && ms % 1000 != 0 && self.ticked;
        let stamp = &mut self.head[OPEN..HEAD - 1];
        if same_second {
            let millis = ms % 1000;
            for (at, digit) in [millis / 100, millis / 10 % 10, millis % 10]
                .into_iter()
                .enumerate()
            {
                stamp[20 + at] = b'0' + digit as u8;
            }
        } else {
            stamp.copy_from_slice(&ms_digits(ms));
        }
        self.ticked = true;
    }

    /// The last tick's time, as [`format_ms`] writes it.
    #[cfg(test)]
    fn stamp(&self) -> &str {
        std::str::from_utf8(&self.head[OPEN..HEAD - 1]).unwrap_or_default()
    }
}

fn event_for(kind: ItemKind, item: &ResponseItem) -> Option<EventMsg<'_>> {
    if let ResponseItem::Native(native) = item {
        return native_event(kind, native);
    }
    let ResponseItem::Message { content, phase, .. } = item else {
        return None;
    };
    match kind {
        ItemKind::RealUser => Some(EventMsg::UserMessage {
            message: joined_text(content),
            images: content
                .iter()
                .filter_map(|c| match c {
                    ContentItem::InputImage { image_url, .. } => image_url.as_deref(),
                    ContentItem::InputText { .. }
                    | ContentItem::InputAudio { .. }
                    | ContentItem::OutputText { .. } => None,
                })
                .collect(),
        }),
        ItemKind::Assistant => Some(EventMsg::AgentMessage {
            message: joined_text(content),
            phase: *phase,
        }),
        ItemKind::ContextualUser
        | ItemKind::Developer
        | ItemKind::Reasoning
        | ItemKind::Call
        | ItemKind::Output
        | ItemKind::Compacted => None,
    }
}

/// The UI event of a message read from a Codex rollout, as [`event_for`] writes ours.
fn native_event(kind: ItemKind, native: &NativeItem) -> Option<EventMsg<'_>> {
    match kind {
        ItemKind::RealUser => Some(EventMsg::UserMessage {
            message: native.joined_text(),
            images: native.image_urls(),
        }),
        ItemKind::Assistant => Some(EventMsg::AgentMessage {
            message: native.joined_text(),
            phase: native.phase(),
        }),
        ItemKind::ContextualUser
        | ItemKind::Developer
        | ItemKind::Reasoning
        | ItemKind::Call
        | ItemKind::Output
        | ItemKind::Compacted => None,
    }
}

/// A message's texts joined by newlines: borrowed when it has one text (most messages), so
/// that an event costs no copy and no list of the texts.
fn joined_text(content: &[ContentItem]) -> Cow<'_, str> {
    let mut texts = content.iter().filter_map(ContentItem::text);
    let Some(first) = texts.next() else {
        return Cow::Borrowed("");
    };
    let Some(second) = texts.next() else {
        return Cow::Borrowed(first);
    };
    let mut joined = [first, second].join("\n");
    for text in texts {
        joined.push('\n');
        joined.push_str(text);
    }
    Cow::Owned(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_cwd_is_usable_only_absolute_clean_and_bounded() {
        for good in [
            "/",
            "/home/me/proj",
            "/home/é/a b",
            "C:\\Users\\me",
            "D:/work",
        ] {
            assert!(usable_cwd(good), "{good}");
        }
        let long = format!("/{}", "a".repeat(MAX_CWD_BYTES));
        for bad in [
            "",
            "proj",
            "../../etc",
            "/home/me/../../etc",
            "/home/./me",
            "/home//me",
            "/home/me/",
            "/home/me\0",
            "/home/me\n/evil",
            long.as_str(),
        ] {
            assert!(!usable_cwd(bad), "{bad:?}");
        }
    }

    /// Every line the tables' fast writers write is byte for byte what serde_json writes for
    /// [`Line`] and the derived `Serialize`.
    #[test]
    fn lines_by_hand_are_serde_json_lines() {
        use crate::model::rollout::{Line, Phase, ReasoningText, SummaryText, ToolOutput};
        use serde::Serialize;
        let texts = [
            "",
            "plain",
            "quote \" backslash \\ slash / tab \t nl \n cr \r",
            "\u{0}\u{1}\u{8}\u{b}\u{c}\u{1f}\u{7f} é ☃ 😀 \u{2028}",
            "long text that goes past eight bytes with a \" late in it and more after it",
        ];
        let mut items = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let phases = [None, Some(Phase::Commentary), Some(Phase::FinalAnswer)];
            items.push(ResponseItem::Message {
                role: ["user", "assistant", "developer"][i % 3],
                content: vec![
                    ContentItem::InputText {
                        text: text.to_string(),
                    },
                    ContentItem::InputImage {
                        image_url: Some(format!("data:image/png;base64,{text}")),
                        file_id: None,
                        detail: Some("high".into()),
                    },
                    ContentItem::OutputText {
                        text: text.repeat(3),
                    },
                    ContentItem::InputAudio {
                        audio_url: None,
                        file_id: Some(text.to_string()),
                    },
                ],
                phase: phases[i % 3],
            });
            items.push(ResponseItem::Message {
                role: "assistant",
                content: Vec::new(),
                phase: phases[(i + 1) % 3],
            });
            // One text part: its event copies the escaped text from the item's line.
            items.push(ResponseItem::Message {
                role: ["user", "assistant"][i % 2],
                content: vec![
                    ContentItem::InputImage {
                        image_url: Some(format!("data:image/png;base64,{text}")),
                        file_id: None,
                        detail: None,
                    },
                    ContentItem::OutputText {
                        text: text.to_string(),
                    },
                ],
                phase: phases[(i + 2) % 3],
            });
            items.push(ResponseItem::FunctionCallOutput {
                call_id: text.to_string(),
                output: ToolOutput::Text(text.to_string()),
            });
            items.push(ResponseItem::FunctionCall {
                name: text.to_string(),
                arguments: format!("{{\"q\": {text:?}}}"),
                call_id: format!("call_{i}{text}"),
            });
            items.push(ResponseItem::CustomToolCall {
                call_id: text.to_string(),
                name: "apply_patch".into(),
                input: text.repeat(2),
            });
            for output in [
                ToolOutput::Text(text.to_string()),
                ToolOutput::Items(Vec::new()),
                ToolOutput::Items(vec![
                    ContentItem::InputText {
                        text: text.to_string(),
                    },
                    ContentItem::InputImage {
                        image_url: Some(text.to_string()),
                        file_id: None,
                        detail: None,
                    },
                ]),
            ] {
                items.push(ResponseItem::FunctionCallOutput {
                    call_id: text.to_string(),
                    output: output.clone(),
                });
                items.push(ResponseItem::CustomToolCallOutput {
                    call_id: text.to_string(),
                    output,
                });
            }
            items.push(ResponseItem::Reasoning {
                summary: vec![SummaryText {
                    text: text.to_string(),
                }],
                content: Some(vec![ReasoningText {
                    text: text.to_string(),
                }]),
                encrypted_content: None,
            });
        }
        let events: Vec<EventMsg<'_>> = texts
            .iter()
            .flat_map(|text| {
                [
                    EventMsg::UserMessage {
                        message: Cow::Borrowed(text),
                        images: Vec::new(),
                    },
                    EventMsg::UserMessage {
                        message: Cow::Owned(text.repeat(2)),
                        images: vec![text, "data:image/png;base64,AAAA"],
                    },
                    EventMsg::AgentMessage {
                        message: Cow::Borrowed(text),
                        phase: None,
                    },
                    EventMsg::AgentMessage {
                        message: Cow::Borrowed(text),
                        phase: Some(Phase::PartialAnswer),
                    },
                ]
            })
            .collect();
        fn serde_line<P: Serialize>(tag: &'static str, timestamp: &str, payload: &P) -> Vec<u8> {
            let line = Line {
                timestamp,
                tag,
                payload,
            };
            let mut bytes = serde_json::to_vec(&line).unwrap();
            bytes.push(b'\n');
            bytes
        }
        let mut clock = Clock::new(1_700_000_000_999);
        // One line by the fast writer, and the same by serde_json.
        fn both<P: WriteJson + Serialize>(
            clock: &mut Clock,
            tag: &'static str,
            payload: &P,
        ) -> (Vec<u8>, Option<std::ops::Range<usize>>) {
            let mut bytes = Vec::new();
            let mut out = JsonOut::new(&mut bytes);
            write_line(&mut out, clock, tag, payload).unwrap();
            let marked = out.take_marked();
            let expected = serde_line(tag, clock.stamp(), payload);
            assert_eq!(
                String::from_utf8(bytes.clone()).unwrap(),
                String::from_utf8(expected).unwrap()
            );
            (bytes, marked)
        }
        for (i, text) in texts.iter().enumerate() {
            let some = |k: usize| (i + k).is_multiple_of(2);
            let meta = SessionMeta {
                id: format!("id{text}"),
                timestamp: format_ms(i as i64),
                cwd: text.to_string().into(),
                originator: text.repeat(2).into(),
                cli_version: "0.169.0".into(),
                source: some(0).then(|| text.to_string().into()),
                model_provider: some(1).then(|| "openai".into()),
                base_instructions: some(0).then(|| BaseInstructions {
                    text: text.repeat(3),
                }),
                git: some(1).then(|| GitInfo {
                    commit_hash: some(0).then(|| text.repeat(4)),
                    branch: Some(text.to_string()),
                    repository_url: (i % 3 == 0).then(|| format!("https://x/{text}")),
                }),
            };
            both(&mut clock, tag::SESSION_META, &meta);
            both(
                &mut clock,
                tag::SESSION_META,
                &SessionMeta {
                    git: Some(GitInfo::default()),
                    ..meta
                },
            );
            for replacement_history in [None, Some(vec![replacement_message(text)])] {
                let compacted = Compacted {
                    message: text,
                    replacement_history,
                };
                both(&mut clock, tag::COMPACTED, &compacted);
            }
        }
        let mut copies = 0;
        for item in &items {
            let (line, text) = both(&mut clock, tag::RESPONSE_ITEM, item);
            // An event written from the item's escaped text is the event escaped anew.
            for kind in [ItemKind::RealUser, ItemKind::Assistant] {
                let Some(event) = event_for(kind, item) else {
                    continue;
                };
                let mut copied = line.clone();
                let mut out = JsonOut::new(&mut copied);
                out.copy_next(text.clone());
                event.write_json(&mut out).unwrap();
                let mut escaped = line.clone();
                event.write_json(&mut JsonOut::new(&mut escaped)).unwrap();
                assert_eq!(copied, escaped);
                copies += usize::from(text.is_some());
            }
        }
        for event in &events {
            both(&mut clock, tag::EVENT_MSG, event);
        }
        assert_eq!(
            copies,
            2 * texts.len(),
            "each one-text message's events copy its text"
        );
    }

    #[test]
    fn clock_ticks_as_format_ms() {
        for start in [
            -3,
            0,
            1,
            998,
            59_998,
            1_700_000_000_995,
            253_402_300_797_990,
        ] {
            let mut clock = Clock::new(start);
            for ms in start..start + 2_005 {
                clock.tick();
                assert_eq!(clock.stamp(), format_ms(ms), "{start} {ms}");
            }
        }
    }

    #[test]
    fn clock_stands_still_at_the_end_of_year_9999() {
        let mut clock = Clock::new(MAX_MS - 2);
        let ticks: Vec<String> = (0..5)
            .map(|_| {
                clock.tick();
                clock.stamp().to_string()
            })
            .collect();
        assert_eq!(
            ticks,
            [
                "9999-12-31T23:59:59.997Z",
                "9999-12-31T23:59:59.998Z",
                "9999-12-31T23:59:59.999Z",
                "9999-12-31T23:59:59.999Z",
                "9999-12-31T23:59:59.999Z",
            ]
        );
    }

    #[test]
    fn items_take_their_message_time_and_never_go_back() {
        let meta = SessionMeta {
            id: "0199a213-81c0-7800-8aa1-bbab2a035a53".into(),
            timestamp: format_ms(0),
            cwd: "/p".into(),
            originator: "rollover".into(),
            cli_version: "0.169.0".into(),
            git: Some(GitInfo {
                branch: Some("main".into()),
                ..GitInfo::default()
            }),
            ..SessionMeta::default()
        };
        let item = |origin: usize| OutItem {
            kind: ItemKind::Reasoning,
            payload: OutPayload::Item(ResponseItem::Reasoning {
                summary: Vec::new(),
                content: None,
                encrypted_content: None,
            }),
            origin: Some(origin),
        };
        let items = [item(0), item(1), item(2)];
        let times = [Some(5_999), Some(1_000), None];
        let mut out = Vec::new();
        write(&meta, &items, 0, &times, &mut out).unwrap();
        let stamps: Vec<String> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["timestamp"].to_string())
            .collect();
        assert_eq!(
            stamps,
            [
                "\"1970-01-01T00:00:00.000Z\"",
                "\"1970-01-01T00:00:05.999Z\"",
                "\"1970-01-01T00:00:06.000Z\"",
                "\"1970-01-01T00:00:06.001Z\"",
            ]
        );
    }
}
