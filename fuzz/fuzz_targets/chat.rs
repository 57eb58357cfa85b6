//! One record's bytes through the pipeline's own per-record function
//! (`rollover::pipeline::process_record`: parse → extract → convert → render → validate →
//! account), with and without Unicode repair; and the validator alone on the raw bytes, since
//! `rollover validate` reads files nobody checked.
//!
//! What must hold: no panic anywhere. A converted conversation may break an invariant (the
//! pipeline quarantines it then). To hunt converter bugs, `ROLLOVER_FUZZ_STRICT=1` makes a
//! quarantine by an invariant, or a non-deterministic conversion, a crash, and
//! `ROLLOVER_FUZZ_STRICT=2` a quarantine by the text accounting too.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rollover::input::batch::BatchIndex;
use rollover::model::Location;
use rollover::output::quarantine::QuarantineClass;
use rollover::pipeline::{process_record, Outcome};
use rollover::rules::{InvalidUnicode, RuleSet};
use rollover::source::RawRecord;
use rollover::validate::{check, Invariant};

struct Setup {
    /// The built-in rules, with Unicode repair on and off.
    rules: [RuleSet; 2],
    /// 0: panics only; 1: also violations and determinism; 2: also accounting.
    strict: u8,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let repair = RuleSet::builtin().expect("the built-in rules load");
        let mut quarantine = repair.clone();
        quarantine.policy.invalid_unicode = InvalidUnicode::Quarantine;
        Setup {
            rules: [repair, quarantine],
            strict: std::env::var("ROLLOVER_FUZZ_STRICT")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Setup { rules, strict } = setup();
    // The validator must take any bytes.
    let _ = check(data, None, &rules[0].markers);
    let record = RawRecord {
        location: Location {
            path: "fuzz/input.jsonl".into(),
            line: 8,
            byte_offset: 0,
            element: None,
        },
        bytes: data.to_vec(),
        truncated: false,
        oversized: None,
        id: rollover::model::identity::RecordId::of(data),
    };
    let batch = BatchIndex::default();
    for rules in rules {
        let outcome = process_record(&record, "fuzz/input.jsonl", rules, &batch);
        match &outcome {
            Outcome::Quarantined(entry) => match entry.class {
                QuarantineClass::Invariant(Invariant::Accounting) => {
                    assert!(*strict < 2, "text accounting: {}", entry.reason)
                }
                QuarantineClass::Invariant(_) => {
                    assert!(*strict < 1, "converted rollout breaks invariants: {}", entry.reason)
                }
                _ => {}
            },
            Outcome::Converted(done) => {
                assert!(!done.bytes.is_empty(), "a conversation renders to no bytes");
                if *strict >= 1 {
                    let again = process_record(&record, "fuzz/input.jsonl", rules, &batch);
                    let Outcome::Converted(second) = again else {
                        panic!("conversion is not deterministic: converted, then quarantined");
                    };
                    assert_eq!(done.bytes, second.bytes, "conversion is not deterministic");
                }
            }
        }
    }
});
