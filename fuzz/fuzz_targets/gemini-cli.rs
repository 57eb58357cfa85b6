//! The fuzzer's bytes as one `--from gemini-cli` file, through the pipeline ([`rollover_fuzz::run`]).

#![no_main]

use libfuzzer_sys::fuzz_target;
use rollover::input::SourceFormat;

fuzz_target!(|data: &[u8]| rollover_fuzz::run(SourceFormat::GEMINI_CLI, data));
