//! Where a record or a damage was found: file, line and byte offset in the decompressed stream.

use std::fmt;
use std::sync::Arc;

/// A position in an input file. `line` is 1-based; `byte_offset` counts decompressed bytes from
/// the start of the file; `element` is the index inside a top-level JSON array document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub path: Arc<str>,
    pub line: u64,
    pub byte_offset: u64,
    pub element: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} (byte {}", self.path, self.line, self.byte_offset)?;
        if let Some(element) = self.element {
            write!(f, ", element {element}")?;
        }
        write!(f, ")")
    }
}
