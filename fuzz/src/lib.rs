//! The harness every fuzz target shares: the fuzzer's bytes as one input file in one source
//! format, forced as `convert --from FORMAT` forces it, through the library's own per-file
//! function ([`rollover::pipeline::process_bytes`]: split into records → identify and group
//! them for the format's reader → read into transcripts → convert → render → validate →
//! account), exactly as `convert` runs a file, minus the writing.
//!
//! Each input is converted three ways: to Codex rollouts with Unicode repair on and off
//! (`policy.invalid_unicode`), and to Responses bodies (`--format responses`), whose renderer
//! and checks are their own.
//!
//! What must hold: no panic anywhere, and no conversation that renders to no bytes. A
//! conversation may break an invariant (the pipeline quarantines it then). To hunt converter
//! bugs, `ROLLOVER_FUZZ_STRICT=1` makes these crashes too:
//! - a conversation quarantined by an invariant of the validator;
//! - a record a format's reader gave no account of (the pipeline quarantines it as a bug);
//! - a non-deterministic conversion: every input is converted twice and the outcomes (each
//!   rollout's bytes, its audit line, each quarantine line) must be identical.
//!
//! `ROLLOVER_FUZZ_STRICT=2` adds a conversation quarantined by the text accounting.

use std::path::Path;
use std::sync::OnceLock;

use rollover::input::batch::BatchIndex;
use rollover::input::SourceFormat;
use rollover::model::responses::{Format, ResponsesOptions};
use rollover::output::QuarantineEntry;
use rollover::pipeline::{process_bytes, Outcome, Refusal};
use rollover::rules::{InvalidUnicode, RuleSet};

/// The input file, in a folder that does not exist: a ChatGPT export's or a dataset's images
/// are looked up beside it, and nothing is there, whatever the machine holds.
const PATH: &str = "/nonexistent/rollover-fuzz/input.jsonl";
/// Its key, which the session ids derive from.
const KEY: &str = "input.jsonl";

struct Setup {
    /// The conversions of every input: rules and output format.
    passes: Vec<(RuleSet, Format)>,
    /// 0: panics only; 1: also violations, unaccounted records and determinism; 2: also
    /// accounting.
    strict: u8,
    /// Batch API results of other files: none here.
    batch: BatchIndex,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let repair = RuleSet::builtin().expect("the built-in rules load");
        let mut quarantine = repair.clone();
        quarantine.policy.invalid_unicode = InvalidUnicode::Quarantine;
        let responses = Format::Responses(ResponsesOptions::default());
        Setup {
            passes: vec![
                (repair.clone(), Format::Codex),
                (quarantine, Format::Codex),
                (repair, responses),
            ],
            strict: std::env::var("ROLLOVER_FUZZ_STRICT")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            batch: BatchIndex::default(),
        }
    })
}

/// The built-in rule set (Unicode repair on), for targets that look at more than conversion.
pub fn builtin_rules() -> &'static RuleSet {
    &setup().passes[0].0
}

/// `data` as one file in `format`, through the pipeline; panics on what must not happen.
pub fn run(format: SourceFormat, data: &[u8]) {
    let Setup {
        passes,
        strict,
        batch,
    } = setup();
    let path = Path::new(PATH);
    for (rules, output) in passes {
        let convert = || {
            process_bytes(
                data.to_vec(),
                path,
                KEY,
                Some(format),
                rules,
                batch,
                *output,
            )
        };
        let outcomes = convert();
        for outcome in &outcomes {
            check(outcome, *strict);
        }
        if *strict >= 1 {
            let again = convert();
            assert!(
                trace(&outcomes) == trace(&again),
                "conversion is not deterministic ({format}, {output:?}):\nfirst:  {}\nsecond: {}",
                String::from_utf8_lossy(&trace(&outcomes)),
                String::from_utf8_lossy(&trace(&again)),
            );
        }
    }
}

/// Panics on an outcome strict mode forbids.
fn check(outcome: &Outcome, strict: u8) {
    match outcome {
        Outcome::Converted(done) => {
            assert!(!done.bytes.is_empty(), "a conversation renders to no bytes");
        }
        Outcome::Quarantined { entry, why } => check_entry(entry, why, strict),
        Outcome::Merged | Outcome::NotSampled | Outcome::Dropped { .. } => {}
    }
}

fn check_entry(entry: &QuarantineEntry, why: &Refusal, strict: u8) {
    match why {
        Refusal::Unbalanced(_) => assert!(strict < 2, "text accounting: {}", entry.reason),
        Refusal::Invariants { .. } => {
            assert!(
                strict < 1,
                "converted rollout breaks invariants: {}",
                entry.reason
            )
        }
        // The pipeline's own net for a reader that loses a record: a bug of ours.
        Refusal::Unaccounted(_) => assert!(strict < 1, "{}", entry.reason),
        // A later record of a refused conversation: refused for what its first record was.
        Refusal::PartOf(first) => check_entry(entry, &first.cause, strict),
        Refusal::TooLarge { .. }
        | Refusal::Input(_)
        | Refusal::Rule(_)
        | Refusal::UnclaimedResult(_) => {}
    }
}

/// What a run would write of these outcomes, in order: each converted conversation's audit
/// line and rollout bytes, each quarantine line, each drop.
fn trace(outcomes: &[Outcome]) -> Vec<u8> {
    let mut out = Vec::new();
    for outcome in outcomes {
        trace_one(outcome, &mut out);
    }
    out
}

fn trace_one(outcome: &Outcome, out: &mut Vec<u8>) {
    match outcome {
        Outcome::Converted(done) => {
            out.extend(format!("{} records: ", done.records).as_bytes());
            out.extend(done.audit_bytes().unwrap_or_default());
            out.push(b'\n');
            out.extend(&done.bytes);
        }
        Outcome::Merged => out.extend(b"merged\n"),
        Outcome::Quarantined { entry, .. } => {
            out.extend(serde_json::to_vec(entry).unwrap_or_default());
            out.push(b'\n');
        }
        Outcome::NotSampled => out.extend(b"not sampled\n"),
        Outcome::Dropped { rule, what } => {
            out.extend(format!("dropped {what} by {rule}\n").as_bytes());
        }
    }
}
