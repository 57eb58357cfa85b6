//! One file per subcommand; each owns its `run` and returns the exit code.

pub mod convert;
pub mod rules;
pub mod validate;
