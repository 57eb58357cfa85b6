//! `--glob` and `--exclude`: which of the files a folder's walk finds are read, as fd and
//! rclone filter theirs.
//!
//! In: the patterns of the command line. Out: a [`PathFilter`] the walk asks about each entry
//! by its path relative to the INPUT folder itself (`a/b.jsonl` for `archive/a/b.jsonl` found
//! by walking `archive`; fd matches so, where the file's key starts at the folder's parent).
//! A pattern without a `/` matches a name at any depth (`*.bak.jsonl`, `tmp`); one with a `/`
//! matches the whole relative path (`2024-*/**`, `a/*.jsonl`; a leading `/` is allowed). `*`
//! and `?` stay within one name, `**` crosses folders. `--exclude` removes the files it matches
//! and is not entered into the folders it matches; `--glob` keeps only the files it matches
//! (folders are always entered: a file below may match). Fails: a pattern that is not a glob,
//! named with its flag.

use std::path::Path;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use thiserror::Error;

/// A pattern that does not compile.
#[derive(Debug, Error)]
#[error("{flag} `{pattern}` is not a glob: {message}; write it like `*.bak.jsonl`, `tmp` or `2024-*/**` (quote it, so the shell does not expand it)")]
pub struct InvalidGlob {
    pub flag: &'static str,
    pub pattern: String,
    pub message: String,
}

/// The walk's filters; the default keeps everything.
#[derive(Debug, Clone, Default)]
pub struct PathFilter {
    /// `--glob`: a file must match one of these, when any is given.
    globs: Option<GlobSet>,
    /// `--exclude`: a file or folder matching one of these is left out.
    excludes: Option<GlobSet>,
}

/// What the filters say of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    /// Matched by `--exclude`.
    Excluded,
    /// A file matched by no `--glob`.
    Unmatched,
}

impl PathFilter {
    /// Compiles `globs` (`--glob`) and `excludes` (`--exclude`).
    pub fn new(globs: &[String], excludes: &[String]) -> Result<PathFilter, InvalidGlob> {
        Ok(PathFilter {
            globs: compile("--glob", globs)?,
            excludes: compile("--exclude", excludes)?,
        })
    }

    /// Whether any pattern was given.
    pub fn is_empty(&self) -> bool {
        self.globs.is_none() && self.excludes.is_none()
    }

    /// A folder at `relative` (below the INPUT folder): excluded folders are not entered.
    pub fn folder(&self, relative: &Path) -> Verdict {
        match &self.excludes {
            Some(excludes) if excludes.is_match(relative) => Verdict::Excluded,
            Some(_) | None => Verdict::Keep,
        }
    }

    /// A file at `relative` (below the INPUT folder).
    pub fn file(&self, relative: &Path) -> Verdict {
        if self.folder(relative) == Verdict::Excluded {
            return Verdict::Excluded;
        }
        match &self.globs {
            Some(globs) if !globs.is_match(relative) => Verdict::Unmatched,
            Some(_) | None => Verdict::Keep,
        }
    }
}

/// One matcher for all of a flag's patterns; none when the flag was not given.
fn compile(flag: &'static str, patterns: &[String]) -> Result<Option<GlobSet>, InvalidGlob> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let invalid = |pattern: &str, message: String| InvalidGlob {
        flag,
        pattern: pattern.to_string(),
        message,
    };
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        let anchored = match pattern.strip_prefix('/') {
            Some(rest) => rest.to_string(),
            None if pattern.contains('/') => pattern.clone(),
            // A bare name matches at any depth, as in .gitignore and rclone.
            None => format!("**/{pattern}"),
        };
        if anchored.is_empty() {
            return Err(invalid(pattern, "it is empty".to_string()));
        }
        let glob = GlobBuilder::new(&anchored)
            .literal_separator(true)
            .build()
            .map_err(|e| invalid(pattern, e.kind().to_string()))?;
        set.add(glob);
    }
    set.build()
        .map(Some)
        .map_err(|e| invalid(&patterns.join(" "), e.kind().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(globs: &[&str], excludes: &[&str]) -> PathFilter {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        PathFilter::new(&strings(globs), &strings(excludes)).expect("valid globs")
    }

    #[test]
    fn a_bare_name_matches_at_any_depth_and_a_path_from_the_input_folder() {
        let f = filter(&[], &["*.bak.jsonl", "tmp", "/top.jsonl", "a/*.jsonl"]);
        assert_eq!(f.file(Path::new("x.bak.jsonl")), Verdict::Excluded);
        assert_eq!(f.file(Path::new("d/e/x.bak.jsonl")), Verdict::Excluded);
        assert_eq!(f.folder(Path::new("d/tmp")), Verdict::Excluded);
        assert_eq!(f.file(Path::new("top.jsonl")), Verdict::Excluded);
        assert_eq!(f.file(Path::new("d/top.jsonl")), Verdict::Keep);
        assert_eq!(f.file(Path::new("a/x.jsonl")), Verdict::Excluded);
        // `*` stays within one name.
        assert_eq!(f.file(Path::new("a/b/x.jsonl")), Verdict::Keep);
    }

    #[test]
    fn glob_keeps_only_matching_files_and_exclude_wins() {
        let f = filter(&["2024-*/**"], &["*.bak.jsonl"]);
        assert_eq!(f.file(Path::new("2024-05/a/x.jsonl")), Verdict::Keep);
        assert_eq!(f.file(Path::new("2023-12/x.jsonl")), Verdict::Unmatched);
        assert_eq!(f.file(Path::new("2024-05/x.bak.jsonl")), Verdict::Excluded);
        // Folders are entered whatever --glob says: a file below may match.
        assert_eq!(f.folder(Path::new("2023-12")), Verdict::Keep);
        assert!(PathFilter::default().is_empty());
    }

    #[test]
    fn a_bad_pattern_is_named_with_its_flag() {
        let err = PathFilter::new(&[], &["a[b".to_string()]).expect_err("not a glob");
        assert_eq!((err.flag, err.pattern.as_str()), ("--exclude", "a[b"));
        assert!(err
            .to_string()
            .starts_with("--exclude `a[b` is not a glob: "));
        assert!(PathFilter::new(&["/".to_string()], &[]).is_err());
    }
}
