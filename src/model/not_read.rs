//! What a run did not read, by reason: each reason's exact count and its first paths, each
//! with why. The walk fills it, `summary.json` carries it (`not_read`), both reports list it.
//! Only the first [`NotRead::LISTED`] paths of a reason are kept: a walk of ten million
//! hidden files keeps their count, not ten million paths.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Why a path was not read; the order is the reports' (what needs a person first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotReadReason {
    /// A file or folder that could not be read (a finding: the run is incomplete).
    Unreadable,
    /// A symlink leading back to a folder above it (`--follow`).
    SymlinkLoop,
    /// A folder taken for a Codex home inside an input, not entered.
    CodexHome,
    /// A zip holding no `conversations.json`: not a ChatGPT data export.
    NotAnExport,
    /// The output folder, found inside an input.
    OutputFolder,
    /// A file with an extension the walk does not read.
    OtherExtension,
    /// A hidden file or folder (`--hidden` reads them).
    Hidden,
    /// A symlink not followed (`--follow` follows them).
    Symlink,
    /// A file or folder matching `--exclude`.
    Excluded,
    /// A record file matching no `--glob`.
    Unmatched,
}

impl NotReadReason {
    /// What the reports call the paths of this reason.
    pub fn label(self) -> &'static str {
        match self {
            NotReadReason::Unreadable => "unreadable files and folders",
            NotReadReason::SymlinkLoop => "symlink loops",
            NotReadReason::CodexHome => "folders taken for Codex homes",
            NotReadReason::NotAnExport => "zips that are not ChatGPT exports",
            NotReadReason::OutputFolder => "the output folder",
            NotReadReason::OtherExtension => "files with other extensions",
            NotReadReason::Hidden => "hidden files and folders",
            NotReadReason::Symlink => "symlinks not followed",
            NotReadReason::Excluded => "files and folders matching --exclude",
            NotReadReason::Unmatched => "files matching no --glob",
        }
    }
}

/// One path not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotReadPath {
    pub path: String,
    pub reason: String,
}

/// The paths of one reason: how many, and the first [`NotRead::LISTED`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotReadList {
    pub count: u64,
    pub paths: Vec<NotReadPath>,
}

/// Every reason's paths; a reason with none is absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NotRead(pub BTreeMap<NotReadReason, NotReadList>);

impl NotRead {
    /// Paths kept per reason; past it only the count grows.
    pub const LISTED: usize = 1000;

    /// Counts a path not read, keeping it while fewer than [`Self::LISTED`] are.
    pub fn add(&mut self, why: NotReadReason, path: String, reason: String) {
        let list = self.0.entry(why).or_default();
        list.count += 1;
        if list.paths.len() < Self::LISTED {
            list.paths.push(NotReadPath { path, reason });
        }
    }

    /// How many paths were not read for `why`.
    pub fn count(&self, why: NotReadReason) -> u64 {
        self.0.get(&why).map_or(0, |list| list.count)
    }

    /// Replaces the paths of `why` with `paths` (the unreadable ones: the walk's and a
    /// shard's own, known only once the run's parts are put together).
    pub fn set(&mut self, why: NotReadReason, paths: impl IntoIterator<Item = NotReadPath>) {
        self.0.remove(&why);
        for p in paths {
            self.add(why, p.path, p.reason);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_only_the_count_grows() {
        let mut not_read = NotRead::default();
        for i in 0..NotRead::LISTED + 5 {
            not_read.add(NotReadReason::Hidden, format!(".h{i}"), "hidden".into());
        }
        let list = &not_read.0[&NotReadReason::Hidden];
        assert_eq!(list.count, NotRead::LISTED as u64 + 5);
        assert_eq!(list.paths.len(), NotRead::LISTED);
        assert_eq!(not_read.count(NotReadReason::Unreadable), 0);
        let json = serde_json::to_value(&not_read).unwrap();
        assert_eq!(json["hidden"]["count"], NotRead::LISTED as u64 + 5);
    }
}
