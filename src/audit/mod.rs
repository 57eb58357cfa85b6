//! The audit: every decision the converter takes, text accounting, run counters and reports.
//!
//! Reports carry no transcript text: counts, lengths, hashes, rule ids and locations only.

pub mod accounting;
pub mod decision;
pub mod report;
pub mod review;
pub mod sample;
pub mod summary;
pub mod tally;

pub use decision::{Action, Decision};
pub use summary::Summary;
