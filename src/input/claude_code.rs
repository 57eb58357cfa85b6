//! Claude Code sessions (placeholder until the reader lands).
use serde_json::Value;

use super::format::{FileRead, FormatReader, Granularity, InputRecord, ReadContext, SourceFormat};

pub struct ClaudeCodeReader;

impl FormatReader for ClaudeCodeReader {
    fn format(&self) -> SourceFormat {
        SourceFormat::ClaudeCode
    }
    fn granularity(&self) -> Granularity {
        Granularity::File
    }
    fn detect(&self, _first: Option<&Value>, _raw: &[u8]) -> bool {
        false
    }
    fn read(&self, _records: Vec<InputRecord>, _context: &ReadContext<'_>) -> FileRead {
        FileRead::default()
    }
}
