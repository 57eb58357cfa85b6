//! The chain module ([`rollover::input::chain`]) on shapes the fuzzer picks: parts linked to
//! earlier parts, requests ending anywhere in them and linked to any request (before or after
//! it, or in a loop), over a tiny alphabet of messages so that prefixes, repeats and
//! divergences are common. What must hold, beside no panic: every request is in exactly one
//! chain, each chain's requests extend one another's histories, and a divergence names a
//! request the chain's first shares exactly that many messages with. The same bytes, read as
//! a Responses log of linked entries (ids, previous ids, inputs and outputs from the same
//! alphabet), then go through the pipeline as `--from responses` ([`rollover_fuzz::run`]).

#![no_main]

use libfuzzer_sys::fuzz_target;
use rollover::input::chain::{chains, Histories, Part};
use rollover::input::SourceFormat;
use serde_json::{json, Value};

/// At most this many parts and requests: the checks compare histories pairwise.
const MOST: usize = 64;

fuzz_target!(|data: &[u8]| {
    check_chains(data);
    rollover_fuzz::run(SourceFormat::RESPONSES, &log(data));
});

/// Each 3 bytes: a part (its parent among the parts made, a message or two) or a request
/// (the part it ends with, and the request it continues).
fn check_chains(data: &[u8]) {
    let mut histories = Histories::default();
    let mut parts: Vec<Part> = Vec::new();
    for op in data.chunks_exact(3).take(MOST) {
        let pick = |b: u8, n: usize| (n > 0 && b % 4 != 0).then(|| usize::from(b) % n);
        if op[0] % 2 == 0 {
            let parent = pick(op[1], parts.len()).map(|p| parts[p]);
            let messages: Vec<Value> = (0..op[0] % 3).map(|k| json!((op[2] >> (2 * k)) % 3)).collect();
            parts.push(histories.part(parent, messages));
        } else {
            let last = pick(op[1], parts.len()).map(|p| parts[p]);
            let after = (op[2] % 3 != 0).then(|| usize::from(op[2]) % MOST);
            histories.request(last, after);
        }
    }
    let n = histories.len();
    let found = chains(&histories);
    let mut seen = vec![0u32; n];
    for chain in &found {
        for pair in chain.members.windows(2) {
            let (a, b) = (histories.history(pair[0]), histories.history(pair[1]));
            assert!(!a.is_empty() && a.len() < b.len() && b.starts_with(&a), "{chain:?}");
        }
        for &m in &chain.members {
            seen[m] += 1;
        }
        if let Some(d) = chain.diverged {
            let first = histories.history(chain.members[0]);
            let from = histories.history(d.from);
            let common = first.iter().zip(&from).take_while(|(x, y)| x == y).count();
            assert!(d.at > 0 && common == d.at, "{chain:?}: shares {common}");
        }
    }
    assert!(seen.iter().all(|&k| k == 1), "every request in one chain: {seen:?}");
}

/// The bytes as a Responses log: each 4 bytes one stored response object.
fn log(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, e) in data.chunks_exact(4).take(MOST).enumerate() {
        let mut entry = json!({
            "object": "response", "status": "completed", "model": "m",
            "input": [{"role": "user", "content": format!("u{}", e[2] % 3)}],
            "output": [{"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": format!("a{}", e[3] % 3)}]}],
        });
        if e[0] % 5 != 0 {
            entry["id"] = json!(format!("r{}", e[0] % 7));
        }
        if e[1] % 3 != 0 {
            entry["previous_response_id"] = json!(format!("r{}", e[1] % 8));
        }
        if i == 0 && e[1] % 7 == 0 {
            // A first entry of no shape at all now and then.
            out.extend_from_slice(b"[1]\n");
            continue;
        }
        out.extend_from_slice(entry.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}
