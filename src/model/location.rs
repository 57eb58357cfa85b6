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
        self.place().fmt(f)
    }
}

/// `path:line (byte N, element E)`: the one spelling of a position, on stderr, in the terminal
/// summary and in both reports. Positions are plain numbers, unlike counts, so that they paste
/// into `sed -n 'Np'`, `tail -c +N` and an editor's `path:line`.
pub struct Place<'a> {
    pub path: &'a str,
    pub line: u64,
    pub byte: u64,
    pub element: Option<usize>,
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} (byte {}", self.path, self.line, self.byte)?;
        if let Some(element) = self.element {
            write!(f, ", element {element}")?;
        }
        write!(f, ")")
    }
}

/// Where a file broke: its [`Place`], and the compressed bytes consumed when the damage
/// surfaced (approximate: read-ahead buffering), for a compressed file.
pub(crate) struct BrokeAt<'a> {
    pub place: Place<'a>,
    pub compressed: Option<u64>,
}

impl fmt::Display for BrokeAt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.place.fmt(f)?;
        if let Some(compressed) = self.compressed {
            write!(f, ", compressed byte {compressed}")?;
        }
        Ok(())
    }
}

impl Location {
    /// How this location is written.
    pub fn place(&self) -> Place<'_> {
        Place {
            path: &self.path,
            line: self.line,
            byte: self.byte_offset,
            element: self.element,
        }
    }

    /// `cause`, found here.
    pub fn at<E>(&self, cause: E) -> Located<E> {
        Located {
            location: self.clone(),
            cause,
        }
    }
}

/// A cause with the place it was found, which formats the two as the style asks of every
/// per-record error: `archive/2024-05.jsonl.zst:1842 (byte 918233): invalid JSON: ...`. The
/// one way a location is put in front of a reason, so that it is never left out and never
/// spelt by hand.
#[derive(Clone, Debug, PartialEq)]
pub struct Located<E> {
    pub location: Location,
    pub cause: E,
}

impl<E: fmt::Display> fmt::Display for Located<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.cause)
    }
}

/// No `source`: the cause is already in the message, and an error chain would print it twice.
impl<E: fmt::Display + fmt::Debug> std::error::Error for Located<E> {}
