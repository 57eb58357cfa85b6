//! Wire types and the plain data that moves between pipeline stages, with the code that
//! belongs to the wire itself: how each type is written and read back, and nothing that
//! decides what a conversation becomes.
//!
//! - [`transcript`]: a conversation as read from an input record (roles, parts, tool calls).
//! - [`rollout`]: Codex rollout lines and Responses items, as written and as read back. Each
//!   written type is declared once, a line a field, in a table ([`rollout::table`]) that emits
//!   the `#[derive(Serialize)]` type and its fast writer from the same literals; the views
//!   read lines back with the names of [`rollout::wire`] through the one-pass scanner of
//!   [`scan`] (`rollout::view::scan`, the fast way in, with serde_json's acceptance), or
//!   through a `serde_json::Value` when it refuses a line.
//! - [`json`]: JSON strings escaped fast, byte for byte as serde_json escapes them (the fast
//!   writers of rollout lines and Responses bodies), and the key serde_json's `Value` reader
//!   treats as a raw value (learned from its public API).
//! - [`responses`]: Responses API request bodies (the second output format) and their tools.
//! - [`conversation`]: a converted conversation's items, each with its kind and origin.
//! - [`time`]: the wire format's timestamps (RFC 3339, milliseconds, `Z`), read and written;
//!   the one piece of logic here, because both sides of the wire need the same format.
//! - [`location`]: where a record came from (file, line, byte offset), and [`Located`], a
//!   cause with its location that formats both (`file:line (byte N): cause`).
//! - [`quarantine`]: a quarantine's class (`bad_message`, `too_large`, `invariant`, ...) and
//!   the stage that refused the record; [`invariant`]: the invariants a rollout keeps. Both
//!   are named by the stages that refuse records and by the writer of `quarantine.jsonl`.
//! - [`rule`]: the ids of the rules a decision, a source note or a quarantine cites
//!   ([`rule::RuleRef`]: a policy, a built-in decision, the role aliases or a rule file's
//!   `[[rule]]`), and the one table of repair policies they are generated from.
//! - [`source_format`]: the format a conversation was read from, as a value each reader
//!   declares (its name and whether its ids are unique beyond a file).
//! - [`tape`]: JSON read off simd-json's tape in a per-thread scratch, with no `Value` built:
//!   how the chat reader reads a record.
//! - [`scan`]: a strict one-pass JSON scanner with serde_json's acceptance, over text already
//!   known to be UTF-8: the rollout views' fast way in, and the outline of a written Responses
//!   body that its check walks (strings as spans of the text, nothing copied).
//! - [`digests`]: a table keyed by 128-bit digests that stores each entry once and never
//!   moves it (the records seen in a file, the sessions placed in a run).
//! - [`identity`]: a conversation's identity (its source's id, or its first record's digest
//!   and occurrence), from which its session id is made.
//! - [`not_read`]: what a run did not read, by reason: each reason's count and first paths.
//! - [`version`]: versions of one conversation (its source's time, message count, digest of
//!   its messages), and how one stands to another.

pub(crate) mod conversation;
pub(crate) mod digests;
pub(crate) mod hash;
pub mod identity;
pub(crate) mod invariant;
pub(crate) mod json;
pub(crate) mod location;
pub mod not_read;
pub(crate) mod quarantine;
pub mod responses;
pub(crate) mod rollout;
pub(crate) mod rule;
pub(crate) mod scan;
pub(crate) mod source_format;
pub(crate) mod tape;
pub mod time;
pub mod transcript;
pub(crate) mod version;

pub use location::{Located, Location};
