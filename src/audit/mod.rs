//! The audit: every decision the converter takes, text accounting, run counters and reports.
//!
//! Reports carry no transcript text: counts, lengths, hashes, rule ids and locations only.

pub mod accounting;
pub(crate) mod chart;
pub(crate) mod decision;
pub(crate) mod findings;
pub mod report;
pub(crate) mod review;
pub(crate) mod sample;
pub(crate) mod summary;
pub(crate) mod tally;

pub use decision::{Action, Decision};
pub use summary::Summary;
