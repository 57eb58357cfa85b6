//! The fuzzer's bytes as one `--from chat` file (Chat Completions records, batch files, eval
//! samples, trajectories), through the pipeline ([`rollover_fuzz::run`]); and the validator
//! alone on the raw bytes, since `rollover validate` reads files nobody checked.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rollover::input::SourceFormat;
use rollover::validate::check;

fuzz_target!(|data: &[u8]| {
    // The validator must take any bytes.
    let _ = check(data, None, &rollover_fuzz::builtin_rules().markers);
    rollover_fuzz::run(SourceFormat::CHAT, data);
});
