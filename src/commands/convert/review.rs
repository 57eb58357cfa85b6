//! `convert`/`audit --review N`: the review pages of a run, written after it into
//! `OUT/rollover/runs/NNNN/review/` ([`crate::audit::review`] renders them).
//!
//! The choice is deterministic: the run's `conversations.jsonl` and `quarantine.jsonl` are read
//! in input order, and for each rule that fired, each repair (an action other than a
//! classification) and each quarantine class, the first N conversations are chosen. Each
//! chosen record is read again as `explain` reads it ([`crate::pipeline::record::read_file`]:
//! the same reader, the same conversion), so a page shows what the run did, and the page's
//! decisions are checked in the tests against the run's report line. Memory: the counts per
//! reason, the chosen records' places, and one source file's conversations at a time.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::audit::review::{
    render_index, render_page, ReviewDecision, ReviewGroup, ReviewIndex, ReviewItem, ReviewLink,
    ReviewPage, ReviewRow,
};
use crate::audit::{Action, Decision};
use crate::commands::ui::conversion::{action_parts, describe, items_from};
use crate::convert::render::renderer;
use crate::convert::{convert, OutItem, OutPayload, RecordKey};
use crate::input::batch::BatchIndex;
use crate::input::SourceFormat;
use crate::model::responses::Format;
use crate::model::rollout::{ContentItem, ResponseItem, ToolOutput};
use crate::model::transcript::{Content, Message, Part};
use crate::pipeline::record::{read_file, Outcome};
use crate::rules::RuleSet;
use crate::source::discover;

/// The id of a page's quarantine reason, where an index link for a quarantine jumps.
const QUARANTINED_ANCHOR: &str = "quarantined";

/// The longest text a page shows of one message part or item (a longer one is cut, saying how
/// much was left out), so that one huge tool output cannot make a page unreadable.
const TEXT_CAP: usize = 20_000;

/// What the review wrote: the pages and where the index is.
pub(super) struct Written {
    pub pages: usize,
    pub index: PathBuf,
}

/// A record chosen for a page: where it is, and what for.
struct Chosen {
    source: String,
    line: u64,
    reasons: Vec<String>,
    /// For a quarantined record: its reason and its bytes as quarantined.
    quarantined: Option<(String, String)>,
}

/// A reason's conversation count, and its pages: each chosen conversation with the anchor of
/// the place on it the reason applies to.
type ReasonPages = (u64, Vec<(usize, String)>);

/// Writes the review pages of run `run` of the home `out`, `per_reason` conversations for
/// each reason, reading the sources with `rules` (and `from`, as the run did).
pub(super) fn write(
    out: &Path,
    run: u32,
    per_reason: usize,
    rules: &RuleSet,
    from: Option<SourceFormat>,
    stdin: Option<&str>,
) -> Result<Written> {
    let run_dir = out.join("rollover").join("runs").join(format!("{run:04}"));
    // Each reason's pages, with the anchor of the place on each page the reason applies to.
    let mut groups: BTreeMap<(String, String), ReasonPages> = BTreeMap::new();
    let mut chosen: Vec<Chosen> = Vec::new();
    let mut place: HashMap<(String, u64), usize> = HashMap::new();
    let mut choose = |kind: &str,
                      name: &str,
                      source: &str,
                      line: u64,
                      anchor: String,
                      chosen: &mut Vec<Chosen>|
     -> Option<usize> {
        let (count, pages) = groups
            .entry((kind.to_string(), name.to_string()))
            .or_default();
        *count += 1;
        if pages.len() >= per_reason {
            return None;
        }
        let at = *place.entry((source.to_string(), line)).or_insert_with(|| {
            chosen.push(Chosen {
                source: source.to_string(),
                line,
                reasons: Vec::new(),
                quarantined: None,
            });
            chosen.len() - 1
        });
        if !pages.iter().any(|(page, _)| *page == at) {
            pages.push((at, anchor));
            chosen[at].reasons.push(format!("{kind} {name}"));
        }
        Some(at)
    };
    for line in lines(&run_dir.join("conversations.jsonl"))? {
        let (Some(source), Some(at)) = (line["source"].as_str(), line["line"].as_u64()) else {
            continue;
        };
        let decisions = line["decisions"].as_array().cloned().unwrap_or_default();
        let mut seen = Vec::new();
        for decision in &decisions {
            let rule = decision["rule"].as_str().unwrap_or_default().to_string();
            let action = decision["action"].as_str().unwrap_or_default().to_string();
            let mut keys = vec![("rule", rule)];
            if crate::audit::decision::is_repair(&action) {
                keys.push(("repair", action));
            }
            // The row of the message the decision is about (`mx`: the items of none).
            let anchor = match decision["message"].as_u64() {
                Some(message) => format!("m{message}"),
                None => "mx".to_string(),
            };
            for key in keys {
                if !seen.contains(&key) {
                    choose(key.0, &key.1, source, at, anchor.clone(), &mut chosen);
                    seen.push(key);
                }
            }
        }
    }
    for line in lines(&run_dir.join("quarantine.jsonl"))? {
        let (Some(source), Some(at)) = (line["source"].as_str(), line["line"].as_u64()) else {
            continue;
        };
        let class = line["class"].as_str().unwrap_or_default();
        let anchor = QUARANTINED_ANCHOR.to_string();
        if let Some(i) = choose("quarantine", class, source, at, anchor, &mut chosen) {
            let reason = line["reason"].as_str().unwrap_or_default().to_string();
            let record = line["record"].as_str().unwrap_or_default().to_string();
            chosen[i].quarantined = Some((reason, record));
        }
    }
    let dir = run_dir.join("review");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let files: Vec<String> = (1..=chosen.len()).map(|n| format!("{n:04}.html")).collect();
    // One source file read at a time, its chosen records together.
    let mut by_source: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, c) in chosen.iter().enumerate() {
        by_source.entry(c.source.as_str()).or_default().push(i);
    }
    let mut records: Vec<String> = chosen
        .iter()
        .map(|c| format!("{}:{}", c.source, c.line))
        .collect();
    for (source, indexes) in by_source {
        // Standard input is gone once read: its records show as the run reports them.
        let source = (stdin != Some(source)).then_some(source);
        let pages = pages_of_source(source, &indexes, &chosen, &files, run, rules, from);
        for (i, page) in indexes.iter().zip(pages) {
            records[*i] = page.record.clone();
            let html = render_page(&page).context("rendering a review page")?;
            let path = dir.join(&files[*i]);
            std::fs::write(&path, html).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    let index = ReviewIndex {
        run,
        per_reason,
        groups: groups
            .into_iter()
            .map(|((kind, name), (count, pages))| ReviewGroup {
                kind,
                name,
                count,
                pages: pages
                    .into_iter()
                    .map(|(i, anchor)| ReviewLink {
                        file: files[i].clone(),
                        anchor,
                        record: records[i].clone(),
                    })
                    .collect(),
            })
            .collect(),
    };
    let html = render_index(&index).context("rendering the review index")?;
    let path = dir.join("index.html");
    std::fs::write(&path, html).with_context(|| format!("writing {}", path.display()))?;
    Ok(Written {
        pages: chosen.len(),
        index: path,
    })
}

/// The JSON lines of a run report (none when it is missing).
fn lines(path: &Path) -> Result<Vec<Value>> {
    let Ok(file) = std::fs::File::open(path) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if let Ok(value) = serde_json::from_str::<Value>(&line) {
            out.push(value);
        }
    }
    Ok(out)
}

/// The pages of the records `indexes` of `chosen`, all from `source`.
fn pages_of_source(
    source: Option<&str>,
    indexes: &[usize],
    chosen: &[Chosen],
    files: &[String],
    run: u32,
    rules: &RuleSet,
    from: Option<SourceFormat>,
) -> Vec<ReviewPage> {
    let walk = crate::commands::named_file_walk(from);
    let file = source.and_then(|source| {
        let path = PathBuf::from(source);
        discover(std::slice::from_ref(&path), None, &walk)
            .ok()
            .and_then(|found| found.files.into_iter().next())
    });
    let reads = file
        .as_ref()
        .map(|file| read_file(file, from, rules, &BatchIndex::default()).0)
        .unwrap_or_default();
    indexes
        .iter()
        .map(|&i| {
            let c = &chosen[i];
            let mut page = ReviewPage {
                file: files[i].clone(),
                run,
                record: format!("{}:{}", c.source, c.line),
                format: String::new(),
                session_id: String::new(),
                chosen_for: c.reasons.clone(),
                base_instructions: None,
                rows: Vec::new(),
                synthesized: ReviewRow::default(),
                quarantined: c.quarantined.as_ref().map(|(reason, _)| reason.clone()),
                raw: None,
                page_json: String::new(),
            };
            let mut decisions = Value::Array(Vec::new());
            let found = reads.iter().find_map(|w| {
                let at = w
                    .work
                    .records
                    .iter()
                    .position(|(r, _)| r.location.line == c.line)?;
                Some((w, at))
            });
            let Some((work, at)) = found else {
                page.raw = Some(match &c.quarantined {
                    Some((_, record)) => cap(record),
                    None => format!("{} could not be read again for this page", c.source),
                });
                page.page_json = page_json(&page, c, Value::Null);
                return page;
            };
            page.format = work.work.format.name().to_string();
            let (record, _) = &work.work.records[at];
            page.record = record.location.to_string();
            let Some(read) = work.conversations.iter().find(|r| r.indexes.contains(&at)) else {
                // The run's reason stands (a Batch API result, say, was refused against the
                // requests of every input file, not of this one alone).
                if let (None, Some(Outcome::Quarantined { entry, .. })) =
                    (&page.quarantined, &work.outcomes[at])
                {
                    page.quarantined = Some(entry.reason.clone());
                }
                page.raw = Some(cap(&String::from_utf8_lossy(&record.bytes)));
                page.page_json = page_json(&page, c, Value::Null);
                return page;
            };
            let (first, _) = &work.work.records[read.indexes[0]];
            let key = RecordKey {
                source: file.as_ref().map_or("", |f| f.key.as_str()),
                record: first.id,
                naming: None,
            };
            let transcript = read.transcript.clone();
            page.rows = transcript.messages.iter().map(source_row).collect();
            match convert(transcript, rules, &key) {
                Ok(mut conversation) => {
                    if let Err(err) = renderer(Format::Codex).render(&mut conversation, rules) {
                        let reason = format!("{} (rule `{}`)", err.reason, err.rule);
                        page.quarantined.get_or_insert(reason);
                    }
                    page.session_id = conversation.meta.id.clone();
                    page.base_instructions = conversation
                        .meta
                        .base_instructions
                        .as_ref()
                        .map(|b| cap(&b.text));
                    for row in &mut page.rows {
                        row.decisions = decisions_of(&conversation.decisions, row.index);
                        row.items = items_of(&conversation.items, row.index);
                    }
                    page.synthesized.decisions = decisions_of(&conversation.decisions, None);
                    page.synthesized.items = items_of(&conversation.items, None);
                    decisions =
                        serde_json::to_value(&conversation.decisions).unwrap_or(Value::Null);
                }
                Err(err) => {
                    let at = err
                        .message
                        .map(|m| format!(" at message {m}"))
                        .unwrap_or_default();
                    let reason = format!("{}{at} (rule `{}`)", err.reason, err.rule);
                    page.quarantined.get_or_insert(reason);
                }
            }
            page.page_json = page_json(&page, c, decisions);
            page
        })
        .collect()
}

/// The page's facts as JSON for tools, escaped for the script element that holds it.
fn page_json(page: &ReviewPage, chosen: &Chosen, decisions: Value) -> String {
    let json = serde_json::json!({
        "source": chosen.source,
        "line": chosen.line,
        "session_id": page.session_id,
        "decisions": decisions,
        "quarantined": page.quarantined,
    });
    crate::audit::report::json_in_html(&json)
}

/// `text`, cut at [`TEXT_CAP`] bytes (on a character boundary) with what was left out.
fn cap(text: &str) -> String {
    if text.len() <= TEXT_CAP {
        return text.to_string();
    }
    let mut end = TEXT_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[… {} more bytes not shown]",
        &text[..end],
        text.len() - end
    )
}

/// A source message as lines: its text and parts, calls, outputs and reasoning.
fn source_row(m: &Message) -> ReviewRow {
    let mut source = Vec::new();
    for t in &m.thinking {
        for s in t.summary.iter().chain(&t.content) {
            source.push(format!("[thinking] {}", cap(s)));
        }
    }
    if let Some(r) = &m.reasoning {
        source.push(format!("[reasoning] {}", cap(r)));
    }
    match &m.content {
        Content::Missing | Content::Null => {}
        Content::Text(text) => source.push(cap(text)),
        Content::Parts(parts) => {
            for part in parts {
                source.push(match part {
                    Part::Text(text) => cap(text),
                    Part::Image { url, file_id, .. } => {
                        let at = url.as_deref().or(file_id.as_deref()).unwrap_or("?");
                        format!("[image {}]", short(at))
                    }
                    Part::Audio { .. } => "[audio]".to_string(),
                    Part::File { filename, .. } => {
                        format!("[file {}]", filename.as_deref().unwrap_or("?"))
                    }
                    Part::Refusal(text) => format!("[refusal] {}", cap(text)),
                    Part::Unknown { kind } => format!("[{kind} part]"),
                });
            }
        }
    }
    if let Some(refusal) = &m.refusal {
        source.push(format!("[refusal] {}", cap(refusal)));
    }
    for call in m.tool_calls.iter().chain(&m.function_call) {
        source.push(format!(
            "[call {} {}] {}",
            call.name,
            call.id.as_deref().unwrap_or("(no id)"),
            cap(&call.arguments)
        ));
    }
    for id in &m.tool_call_ids {
        source.push(format!(
            "[output of {id}]{}",
            if m.tool_error { " (failed)" } else { "" }
        ));
    }
    ReviewRow {
        index: Some(m.index),
        role: m.role.to_string(),
        source,
        decisions: Vec::new(),
        items: Vec::new(),
    }
}

/// A long URL (a `data:` image) as its first 80 characters.
fn short(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

fn decisions_of(decisions: &[Decision], message: Option<usize>) -> Vec<ReviewDecision> {
    decisions
        .iter()
        .filter(|d| d.message == message)
        .map(|d| {
            let action = serde_json::to_value(&d.action).unwrap_or(Value::Null);
            let (name, mut details) = action_parts(action);
            if d.bytes_dropped > 0 {
                details.push(format!("{} bytes dropped", d.bytes_dropped));
            }
            if d.bytes_added > 0 {
                details.push(format!("{} bytes added", d.bytes_added));
            }
            ReviewDecision {
                rule: d.rule.to_string(),
                action: name,
                details: details.join(", "),
                changes: !matches!(d.action, Action::Classified { .. }),
            }
        })
        .collect()
}

fn items_of(items: &[OutItem], origin: Option<usize>) -> Vec<ReviewItem> {
    items_from(items, origin)
        .map(|item| ReviewItem {
            what: describe(item),
            text: item_text(item),
        })
        .collect()
}

/// The text an item carries, as written.
fn item_text(item: &OutItem) -> String {
    let contents = |content: &[ContentItem]| -> String {
        content
            .iter()
            .map(|c| match c {
                ContentItem::InputText { text } | ContentItem::OutputText { text } => cap(text),
                ContentItem::InputImage {
                    image_url, file_id, ..
                } => format!(
                    "[image {}]",
                    short(image_url.as_deref().or(file_id.as_deref()).unwrap_or("?"))
                ),
                ContentItem::InputAudio { .. } => "[audio]".to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    match &item.payload {
        OutPayload::Compacted(text) | OutPayload::CompactedReplacing(text) => cap(text),
        OutPayload::CompactedNative(native) => cap(native.summary()),
        OutPayload::Item(response) => match response {
            ResponseItem::Message { content, .. } => contents(content),
            ResponseItem::Reasoning {
                summary, content, ..
            } => summary
                .iter()
                .map(|s| cap(&s.text))
                .chain(content.iter().flatten().map(|r| cap(&r.text)))
                .collect::<Vec<_>>()
                .join("\n"),
            ResponseItem::FunctionCall { arguments, .. } => cap(arguments),
            ResponseItem::CustomToolCall { input, .. } => cap(input),
            ResponseItem::FunctionCallOutput { output, .. }
            | ResponseItem::CustomToolCallOutput { output, .. } => match output {
                ToolOutput::Text(text) => cap(text),
                ToolOutput::Items(items) => contents(items),
            },
            ResponseItem::Native(native) => {
                cap(&serde_json::Value::Object(native.payload.clone()).to_string())
            }
        },
    }
}
