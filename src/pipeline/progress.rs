//! What a run tells its caller as it goes ([`Progress`]); the command decides how to show it.

use crate::source::Damage;

/// Progress callbacks; the command decides how to show them.
pub trait Progress: Sync {
    fn start(&self, files: u64, bytes: u64);
    /// `records` and `bytes` (decompressed) done in this batch; `disk` bytes of the input files
    /// read so far in all (compressed bytes for compressed files).
    fn advance(&self, records: u64, bytes: u64, disk: u64);
    fn damage(&self, damage: &Damage);
    /// Something the user should know that is not a problem with a record.
    fn note(&self, message: &str);
    /// Every record of one input file is done (`--verbose` shows it).
    fn file_done(&self, _file: &FileCounts) {}
}

/// One input file's records, once all are done.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileCounts {
    /// The file as the reports name it.
    pub file: String,
    pub records: u64,
    pub converted: u64,
    pub quarantined: u64,
}
