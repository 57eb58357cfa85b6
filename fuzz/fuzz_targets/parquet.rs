//! The fuzzer's bytes as one `--from parquet` file, through the pipeline
//! ([`rollover_fuzz::run`]): a file that opens with `PAR1` is read by its row groups (footer,
//! page headers, pages, rows), anything else as JSON rows.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rollover::input::SourceFormat;

fuzz_target!(|data: &[u8]| rollover_fuzz::run(SourceFormat::PARQUET, data));
