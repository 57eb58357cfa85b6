//! The invariants of migration.md section 5, checked on what was written.
//!
//! In: a rollout's bytes (any rollout: ours before writing, or files Codex or an earlier
//! migration wrote, including rollouts Codex resumed and appended to) and the marker registry
//! of the rules. Out: the [`Violation`]s, each with the invariant, the 1-based line and a
//! message, and [`Warning`]s for what Codex ignores on purpose. It reads only the bytes,
//! through the wire types of [`crate::model::rollout::view`], never the converter's data or
//! helpers, so a converter bug cannot hide from it. Invariant 12 (accounting) needs the input
//! and lives in [`crate::audit::accounting`]. The [`Invariant`]s themselves are declared in
//! [`crate::model::invariant`] (re-exported here), since a quarantine's class names them.
//!
//! - [`lines`]: bytes to lines (invariant 2 for the bytes themselves).
//! - [`meta`]: the session meta (1) and each line's envelope (2).
//! - [`items`]: items and events in order (3 to 11), messages in [`message`].
//! - [`generation`]: which generation of Codex rollout a file is; a paginated file's
//!   ordinals, one mode per file. A pre-envelope file is named, not checked line by line.
//! - [`responses`]: the same invariants adapted to Responses request bodies.

pub(crate) mod generation;
mod items;
mod lines;
mod message;
mod meta;
pub mod responses;

use std::fmt;

use serde::Serialize;

pub use crate::model::invariant::Invariant;
pub use crate::model::rollout::generation::Generation;
use crate::model::rollout::{ROLE_ASSISTANT, ROLE_DEVELOPER, ROLE_SYSTEM, ROLE_USER};
use crate::rules::Marker;

/// The Codex releases rollover's output is checked against, oldest first: the conformance
/// test resumes the converted corpora in each (`tests/conformance.rs`, `.ci/run`), `--version`
/// names them and `validate --codex-version` takes any of them. Every one reads the rollouts,
/// the response items and the contextual-user markers these invariants check alike (0.171.0
/// adds only optional lines rollover does not write: codex-target.md, "0.171.0"). Adding a
/// release here makes CI test it.
pub const SUPPORTED_CODEX: &[&str] = &["0.169.1", "0.171.0"];

/// The supported release `asked` names: itself, or the newest one it is a prefix of at a dot
/// (`0.171` is 0.171.0; `0.17` is not a release). `None` when it names none.
pub fn supported_codex(asked: &str) -> Option<&'static str> {
    SUPPORTED_CODEX.iter().rev().copied().find(|release| {
        *release == asked
            || release
                .strip_prefix(asked)
                .is_some_and(|rest| rest.starts_with('.'))
    })
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

/// Something Codex ignores on purpose: reported, but the rollout still passes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub kind: WarningKind,
    pub line: usize,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// A legacy response item type Codex parses and leaves out of the model's history.
    IgnoredItemType,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: [warning] {}", self.line, self.message)
    }
}

/// All that one check found, each list in line order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Findings {
    pub violations: Vec<Violation>,
    pub warnings: Vec<Warning>,
    /// The file's generation of Codex rollout, by its first line (`None`: not a rollout's).
    #[serde(skip)]
    pub generation: Option<Generation>,
}

impl Findings {
    fn violation(&mut self, invariant: Invariant, line: usize, message: String) {
        self.violations.push(Violation {
            invariant,
            line,
            message,
        });
    }

    fn warning(&mut self, kind: WarningKind, line: usize, message: String) {
        self.warnings.push(Warning {
            kind,
            line,
            message,
        });
    }
}

/// Checks a rollout's bytes: its violations. `file_uuid` is the UUID in the file name, when
/// there is one.
pub fn check(bytes: &[u8], file_uuid: Option<&str>, markers: &[Marker]) -> Vec<Violation> {
    check_with_warnings(bytes, file_uuid, markers).violations
}

/// Checks a rollout's bytes: its violations and its warnings.
pub fn check_with_warnings(bytes: &[u8], file_uuid: Option<&str>, markers: &[Marker]) -> Findings {
    check_read(bytes, &[], file_uuid, markers)
}

/// A line of a rollout too long to read (`validate --max-record-bytes`): skipped unbuffered,
/// an empty line standing for it in the bytes checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongLine {
    /// 1-based.
    pub line: usize,
    /// Its bytes, line ending excluded.
    pub size: u64,
    pub limit: u64,
}

/// [`check_with_warnings`] of a rollout read with its too-long lines left out (`long`, in
/// order): each is a violation of invariant 2.
pub fn check_read(
    bytes: &[u8],
    long: &[LongLine],
    file_uuid: Option<&str>,
    markers: &[Marker],
) -> Findings {
    let mut out = Findings {
        generation: generation::generation(bytes),
        ..Findings::default()
    };
    if out.generation == Some(Generation::PreEnvelope) {
        out.violation(
            Invariant::SessionMeta,
            1,
            Generation::PreEnvelope.describe().to_string(),
        );
        return out;
    }
    if let Some(generation) = out.generation {
        generation::check(bytes, generation, markers, &mut out);
    }
    if let Some(lines) = lines::read(bytes, long, &mut out) {
        let base = meta::check_session_meta(&lines, file_uuid, &mut out);
        meta::check_envelopes(&lines, &mut out);
        let mut walk = items::Walk::new(markers, base);
        // A paginated file's UI events are `item_completed` ones, checked by `generation`.
        walk.ui_events = out.generation != Some(Generation::Paginated);
        walk.run(&lines, &mut out);
    }
    out.violations.sort_by_key(|x| (x.line, x.invariant));
    out.warnings.sort_by_key(|x| (x.line, x.kind));
    out
}

/// The UUID in a rollout file name (`rollout-...-<uuid>.jsonl[.zst]`), if any.
pub fn uuid_in_file_name(name: &str) -> Option<&str> {
    let stem = name
        .strip_suffix(".jsonl.zst")
        .or_else(|| name.strip_suffix(".jsonl"))?;
    let start = stem.len().checked_sub(36)?;
    let candidate = stem.get(start..)?;
    meta::is_uuid(candidate).then_some(candidate)
}
