//! One record's bytes through the whole per-record pipeline, as `pipeline::process` runs it:
//! parse (with and without Unicode repair) → extract (built-in input rules) → convert →
//! `Conversation::to_bytes` → `validate::check`, plus the text accounting; and the validator
//! alone on the raw bytes, since `rollover validate` reads files nobody checked.
//!
//! What must hold: no panic anywhere. A converted conversation may have violations (the
//! pipeline quarantines it then). To hunt converter bugs, `ROLLOVER_FUZZ_STRICT=1` makes a
//! violation or a non-deterministic conversion a crash, and `ROLLOVER_FUZZ_STRICT=2` an
//! unbalanced text account too.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rollover::audit::accounting::{account, transcript_bytes};
use rollover::convert::{convert, RecordKey};
use rollover::input::{extract, parse_record};
use rollover::rules::RuleSet;
use rollover::validate::check;

struct Setup {
    rules: RuleSet,
    /// 0: panics only; 1: also violations and determinism; 2: also accounting.
    strict: u8,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| Setup {
        rules: RuleSet::builtin().expect("the built-in rules load"),
        strict: std::env::var("ROLLOVER_FUZZ_STRICT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    })
}

fuzz_target!(|data: &[u8]| {
    let Setup { rules, strict } = setup();
    // The validator must take any bytes.
    let _ = check(data, None, &rules.markers);

    for repair in [true, false] {
        let Ok((value, repairs)) = parse_record(data, repair) else {
            continue;
        };
        let Ok(mut transcript) = extract(value, &rules.input) else {
            continue;
        };
        transcript.meta.unicode_repairs = repairs;
        let bytes_in = transcript_bytes(&transcript);
        let key = RecordKey {
            source: "fuzz/input.jsonl",
            ordinal: 7,
            salt: 0,
        };
        let again = (*strict >= 1).then(|| transcript.clone());
        let Ok(conversation) = convert(transcript, rules, &key) else {
            continue;
        };
        let bytes = conversation.to_bytes();
        assert!(!bytes.is_empty(), "a conversation renders to no bytes");
        let violations = check(&bytes, Some(&conversation.meta.id), &rules.markers);
        let balance = account(bytes_in, &conversation);
        let _ = conversation.relative_path();
        if *strict >= 1 {
            assert!(
                violations.is_empty(),
                "converted rollout breaks invariants: {violations:?}\n{}",
                String::from_utf8_lossy(&bytes)
            );
            assert!(
                *strict < 2 || balance.balanced(),
                "text accounting: {balance:?}"
            );
            if let Some(t) = again {
                if let Ok(second) = convert(t, rules, &key) {
                    assert_eq!(bytes, second.to_bytes(), "conversion is not deterministic");
                }
            }
        }
    }
});
