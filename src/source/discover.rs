//! Walk the input paths and list the files to read, in a stable order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use walkdir::WalkDir;

use super::SourceError;

/// Extensions (after any compression suffix) that hold records when found by walking a folder.
/// A file named directly on the command line is always read, whatever its name.
const RECORD_EXTENSIONS: [&str; 4] = ["jsonl", "json", "ndjson", "traj"];
const COMPRESSION_EXTENSIONS: [&str; 3] = ["zst", "zstd", "gz"];

/// One input file to read.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    /// The path as shown in messages and reports.
    pub display: Arc<str>,
    /// A stable key for deterministic ids: the path relative to the parent of the INPUT
    /// argument it was found under, with `/` separators.
    pub key: String,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch (0 when the system cannot tell).
    pub mtime_ns: u64,
}

/// Lists every record file under `inputs`, sorted within each input; inputs keep their order.
/// Folders are not entered when they are `skip` (the output home: converting `.` into `./home`
/// must not read back its own rollouts and quarantine).
pub fn discover(inputs: &[PathBuf], skip: Option<&Path>) -> Result<Vec<SourceFile>, SourceError> {
    let skip = skip.and_then(|p| std::fs::canonicalize(p).ok());
    let mut files = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).map_err(|source| SourceError::MissingInput {
            path: input.display().to_string(),
            source,
        })?;
        let base = input.parent().unwrap_or_else(|| Path::new(""));
        if meta.is_file() {
            files.push(source_file(input.clone(), base, &meta));
            continue;
        }
        let walk = WalkDir::new(input)
            .sort_by_file_name()
            .follow_links(true)
            .into_iter()
            .filter_entry(|entry| {
                !(entry.file_type().is_dir()
                    && skip.is_some()
                    && std::fs::canonicalize(entry.path()).ok() == skip)
            });
        for entry in walk {
            let entry = entry.map_err(|err| SourceError::Walk {
                path: input.display().to_string(),
                message: err.to_string(),
            })?;
            if !entry.file_type().is_file() || !is_record_file(entry.path()) {
                continue;
            }
            let meta = entry.metadata().map_err(|err| SourceError::Walk {
                path: entry.path().display().to_string(),
                message: err.to_string(),
            })?;
            files.push(source_file(entry.into_path(), base, &meta));
        }
    }
    Ok(files)
}

fn source_file(path: PathBuf, base: &Path, meta: &std::fs::Metadata) -> SourceFile {
    let relative = path.strip_prefix(base).unwrap_or(&path);
    let key = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    SourceFile {
        display: Arc::from(path.display().to_string()),
        path,
        key,
        size: meta.len(),
        mtime_ns: meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64),
    }
}

/// True for `x.jsonl`, `x.json.zst`, `x.traj.gz` and the like.
pub fn is_record_file(path: &Path) -> bool {
    let name = match path.file_name() {
        Some(name) => name.to_string_lossy().to_ascii_lowercase(),
        None => return false,
    };
    let mut parts: Vec<&str> = name.rsplit('.').collect();
    if parts.len() < 2 {
        return false;
    }
    if COMPRESSION_EXTENSIONS.contains(&parts[0]) {
        parts.remove(0);
        if parts.len() < 2 {
            return false;
        }
    }
    RECORD_EXTENSIONS.contains(&parts[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_file_names() {
        for yes in [
            "a.jsonl",
            "a.JSON",
            "a.jsonl.zst",
            "b.traj",
            "c.json.gz",
            "d.ndjson.zstd",
        ] {
            assert!(is_record_file(Path::new(yes)), "{yes}");
        }
        for no in ["LICENSE", "README.md", "a.zst", "jsonl", "x.txt.gz"] {
            assert!(!is_record_file(Path::new(no)), "{no}");
        }
    }
}
