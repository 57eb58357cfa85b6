//! The output folder, a Codex home.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::OutputError;

/// Folder of rollover's own files inside the home.
pub const RUN_DIR: &str = "rollover";

#[derive(Debug, Clone)]
pub struct Home {
    pub root: PathBuf,
}

fn write_error(path: &Path, source: std::io::Error) -> OutputError {
    OutputError::Write {
        path: path.display().to_string(),
        source,
    }
}

impl Home {
    pub fn new(root: &Path) -> Home {
        Home {
            root: root.to_path_buf(),
        }
    }

    pub fn run_dir(&self) -> PathBuf {
        self.root.join(RUN_DIR)
    }

    /// Writes `bytes` at `relative` atomically: a temporary file in the same folder, then
    /// renamed over the target, so a killed run never leaves a half-written rollout. (No fsync
    /// per file: it costs more than the conversion; a power loss can lose the newest files,
    /// which a re-run writes again byte for byte.)
    pub fn write_atomic(&self, relative: &Path, bytes: &[u8]) -> Result<PathBuf, OutputError> {
        let target = self.root.join(relative);
        let dir = target.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = dir.join(format!(".{name}.tmp{}", std::process::id()));
        let result = (|| {
            let mut file = File::create(&temp)?;
            file.write_all(bytes)?;
            fs::rename(&temp, &target)
        })();
        if let Err(err) = result {
            let _ = fs::remove_file(&temp);
            return Err(write_error(&target, err));
        }
        Ok(target)
    }

    /// Creates (truncating) one of the run's own files.
    pub fn create_run_file(&self, name: &str) -> Result<File, OutputError> {
        let dir = self.run_dir();
        fs::create_dir_all(&dir).map_err(|e| write_error(&dir, e))?;
        let path = dir.join(name);
        File::create(&path).map_err(|e| write_error(&path, e))
    }

    pub fn run_file(&self, name: &str) -> PathBuf {
        self.run_dir().join(name)
    }
}
