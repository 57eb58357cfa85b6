//! The review pages (`--review N`): a reviewer reads real conversations side by side before
//! signing a migration. One self-contained HTML page per conversation chosen (the source
//! messages on the left, every decision where it applies, the items written on the right),
//! and an index of the rules, repairs and quarantine reasons each was chosen for. No external
//! resource; every value is escaped by the template engine (`.html` templates auto-escape).
//! Unlike the reports, these pages hold transcript text: every page says so at its top.

use serde::Serialize;

use super::report::ReportError;

const PAGE: &str = include_str!("templates/review.html.j2");
const INDEX: &str = include_str!("templates/review-index.html.j2");

/// One conversation's page.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReviewPage {
    /// The page's file name in `review/` (`0001.html`).
    pub file: String,
    /// The run it belongs to.
    pub run: u32,
    /// `file:line (byte n)` of its first record, and the source format.
    pub record: String,
    pub format: String,
    /// The session id written, or empty for a record quarantined.
    pub session_id: String,
    /// What the page was chosen for (`rule first-leading-system`, `quarantine no_messages`).
    pub chosen_for: Vec<String>,
    /// Base instructions written into `session_meta`, when any.
    pub base_instructions: Option<String>,
    /// One row per source message, in order.
    pub rows: Vec<ReviewRow>,
    /// What no single message explains: synthesised items, notes of what the reader dropped.
    pub synthesized: ReviewRow,
    /// Why the record is quarantined, when it is.
    pub quarantined: Option<String>,
    /// The record as read (a record the reader refused has no messages to show).
    pub raw: Option<String>,
    /// For tools and tests, as JSON: the record (`source`, `line` as the run reports name it),
    /// the session, the decisions as `conversations.jsonl` writes them, the quarantine reason.
    pub page_json: String,
}

/// A source message and what it became.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ReviewRow {
    pub index: Option<usize>,
    pub role: String,
    /// The message's text, parts, calls and reasoning, as lines.
    pub source: Vec<String>,
    pub decisions: Vec<ReviewDecision>,
    /// The items written from it: (what, text).
    pub items: Vec<ReviewItem>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReviewDecision {
    pub rule: String,
    pub action: String,
    pub details: String,
    /// A repair or a drop (anything but a classification).
    pub changes: bool,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReviewItem {
    pub what: String,
    pub text: String,
}

/// The index: each reason with the pages chosen for it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReviewIndex {
    pub run: u32,
    pub per_reason: usize,
    pub groups: Vec<ReviewGroup>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReviewGroup {
    /// `rule`, `repair` or `quarantine`.
    pub kind: String,
    pub name: String,
    /// Conversations of the run with this reason (pages are the first `per_reason`).
    pub count: u64,
    pub pages: Vec<ReviewLink>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ReviewLink {
    pub file: String,
    /// The id on the page of what the link is for: the message row a decision is about
    /// (`m3`, `mx` for what no single message explains), or the quarantine reason.
    pub anchor: String,
    pub record: String,
}

fn environment() -> Result<minijinja::Environment<'static>, ReportError> {
    let mut env = minijinja::Environment::new();
    env.add_template("review.html", PAGE)?;
    env.add_template("review-index.html", INDEX)?;
    Ok(env)
}

/// A conversation's page.
pub(crate) fn render_page(page: &ReviewPage) -> Result<String, ReportError> {
    Ok(environment()?.get_template("review.html")?.render(page)?)
}

/// The index page.
pub(crate) fn render_index(index: &ReviewIndex) -> Result<String, ReportError> {
    Ok(environment()?
        .get_template("review-index.html")?
        .render(index)?)
}
