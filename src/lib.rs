//! rollover: migrate archives of chat-style transcripts into OpenAI Responses items and Codex
//! rollout files.
//!
//! The pipeline, one module per stage (see README "Architecture"):
//! [`source`] (discover, decompress, split) → [`input`] (parse, read shapes) → [`rules`]
//! (classify) → [`convert`] (Responses items) → [`validate`] (invariants) → [`output`] (write)
//! beside [`audit`] (decisions, accounting, summary). [`pipeline`] runs them in parallel;
//! [`commands`] are the CLI's subcommands.

pub mod audit;
pub mod cli;
pub mod commands;
pub mod convert;
pub mod input;
pub mod model;
pub mod output;
pub mod pipeline;
pub mod rules;
pub mod source;
pub mod validate;
