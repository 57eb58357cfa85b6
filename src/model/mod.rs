//! Wire types and the plain data that moves between pipeline stages. No logic lives here.
//!
//! - [`transcript`]: a conversation as read from an input record (roles, parts, tool calls).
//! - [`rollout`]: Codex rollout lines and Responses items, as written.
//! - [`location`]: where a record came from (file, line, byte offset), carried by every error.

pub mod location;
pub mod rollout;
pub mod transcript;

pub use location::Location;
