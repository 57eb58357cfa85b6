//! Sources: find input files, open them through their compression, split them into records.
//!
//! In: the INPUT paths of the command line. Out: [`SourceFile`]s in a deterministic order, then
//! per file a stream of [`RawRecord`]s, each with its [`Location`](crate::model::Location), or a
//! [`Damage`] where the file cannot be read further (the records before it are still yielded).
//! A text file is split into lines or a document's elements ([`split`]); a Parquet file into
//! its rows, a row group at a time ([`parquet`]). A zip's members are read through
//! [`archive`], within a cap.
//! [`shard`] says which files, or ranges of a large file, one shard of a sharded run reads.
//! Fails: on a missing input path (fatal); everything else is per file and reported, not fatal.

pub(crate) mod archive;
pub mod discover;
pub(crate) mod elements;
pub(crate) mod filter;
pub(crate) mod nested;
pub(crate) mod open;
pub mod parquet;
pub(crate) mod shard;
pub(crate) mod split;

pub use discover::{
    discover, extensions_read, Discovery, Skipped, SourceFile, Unreadable, WalkOptions,
};
pub use filter::{InvalidGlob, PathFilter};
pub use open::{open, open_hashing, Compression, DigestSlot};
pub use shard::{Shard, ShardPlan, ShardSource, Share};
pub use split::{records, records_hashing, records_in, Damage, RawRecord, RecordEvent};

use thiserror::Error;

/// Errors that stop the reading of one input file or of the whole discovery.
#[derive(Debug, Error)]
pub enum SourceError {
    #[error("cannot read input path {path} (check the path)")]
    MissingInput {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot walk {path}: {message}")]
    Walk { path: String, message: String },
    #[error("cannot open {path}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
}
