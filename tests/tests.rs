//! The integration tests, as one binary (after xsv's `tests/tests.rs`): the library and the
//! dev-dependencies are linked once, not once per file, which was most of the suite's time
//! (issue 27). Each module is one area and keeps its file; `cargo test --release --test tests
//! scheduled::` runs one area, `... --test tests NAME` one test.
//!
//! Tests of different areas now run side by side: a test must not depend on running alone
//! (each has its own `Workdir`; process-wide state such as the environment is never changed).
//! `architecture::every_test_file_is_a_module_of_the_one_binary` fails when a file in `tests/`
//! is not declared here, since with `autotests = false` Cargo would silently not build it.

// A test says where it failed by panicking, and reads JSON of any shape; its helpers are
// `pub` for the other test modules, not an API (`unreachable_pub` is about the library's).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::wildcard_enum_match_arm,
    unreachable_pub
)]

mod common;
mod conformance_support;

mod api_sources;
mod architecture;
mod cli;
mod cluster;
mod codex_source;
mod commands_speak;
mod conformance;
mod convert;
mod counts_agree;
mod digest;
mod explain;
mod explain_anywhere;
mod inputs;
mod measures;
mod not_read;
mod parquet;
mod polish_cli;
mod polish_report;
mod promises;
mod properties;
mod report;
mod responses;
mod review;
mod scheduled;
mod sessions_traces;
mod sharding;
mod sources;
mod validate;
