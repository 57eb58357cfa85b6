//! Walk the input paths and list the files to read, in a stable order, the way fd walks:
//! hidden entries and symlinks are left out unless asked for, a symlink loop or an unreadable
//! entry is reported and skipped (never fatal), a Codex home found inside an input is not
//! entered (an input that is a home, or any home with `--from codex`, is read for its
//! rollouts), and `--glob`/`--exclude` ([`PathFilter`]) leave out what they say. Standard input (`-`) and other streams (FIFOs, `/dev/stdin`, `<(...)`) are copied
//! once to a temporary file, since a run reads each file more than once (digest, batch
//! results, records).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use walkdir::WalkDir;

use super::filter::{PathFilter, Verdict};
use super::open::ArchiveLines;
use super::SourceError;
use crate::model::not_read::{NotRead, NotReadReason};

/// Extensions (after any compression suffix) that hold records when found by walking a folder.
/// A file named directly on the command line is always read, whatever its name.
const RECORD_EXTENSIONS: [&str; 5] = ["jsonl", "json", "ndjson", "traj", "sse"];
const COMPRESSION_EXTENSIONS: [&str; 3] = ["zst", "zstd", "gz"];
/// Extensions of files read whole, never under a compression suffix, with what they hold.
const WHOLE_EXTENSIONS: [(&str, &str); 2] =
    [("zip", "a ChatGPT data export"), ("parquet", "a dataset")];

/// Every extension a walk reads, as `convert --help` says it: written from the lists the
/// walk reads by, so the help cannot leave one out.
pub fn extensions_read() -> String {
    let dotted = |list: &[&str]| -> String {
        list.iter()
            .map(|e| format!(".{e}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let whole: Vec<String> = WHOLE_EXTENSIONS
        .iter()
        .map(|(e, what)| format!(".{e} ({what})"))
        .collect();
    format!(
        "{}, each plain or compressed as {}; {}",
        dotted(&RECORD_EXTENSIONS),
        dotted(&COMPRESSION_EXTENSIONS),
        whole.join(", ")
    )
}
/// The INPUT that means standard input.
pub const STDIN: &str = "-";

/// One input file to read.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: PathBuf,
    /// The path as shown in messages and reports.
    pub display: Arc<str>,
    /// The input tree it was found in, the only place the files its records point to (dataset
    /// images) are read from: the INPUT folder, or the folder of a file named on the command
    /// line; `None` for standard input and other streams, which have none.
    pub root: Option<Arc<Path>>,
    /// A stable key for deterministic ids: the path relative to the parent of the INPUT
    /// argument it was found under, with `/` separators (the `--stdin-name` for a stream).
    pub key: String,
    /// Where the file is, losslessly, for the manifest: its absolute path with its folder's
    /// symlinks resolved (bytes that are not UTF-8 escaped as `\\xNN`), or `stdin:NAME` for
    /// standard input and other anonymous streams. Two files never share an origin.
    pub origin: String,
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch (0 when the system cannot tell).
    pub mtime_ns: u64,
    /// Status change time (nanoseconds) and inode: with the size and the mtime, what tells
    /// that a file changed without reading it (git's index rule; 0 when unknown).
    pub ctime_ns: u64,
    pub ino: u64,
}

/// How to walk.
#[derive(Debug, Clone, Default)]
pub struct WalkOptions {
    /// Read hidden files and enter hidden folders (`--hidden`).
    pub hidden: bool,
    /// Follow symlinks (`--follow`).
    pub follow: bool,
    /// The key (and display name) of standard input and other anonymous streams.
    pub stdin_name: String,
    /// `--glob` and `--exclude`, matched against the path below the INPUT folder.
    pub filter: PathFilter,
    /// The signal that asked the run to stop (0: none): the walk ends early, and the caller
    /// ends the run.
    pub stop: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Read the rollouts of a Codex home found inside an input (`--from codex`); otherwise
    /// only a home that is itself an input is read.
    pub codex_homes: bool,
    /// How a zip is read: a zip it finds nothing to read in is left out, not read as damaged.
    pub archive: Option<ArchiveLines>,
}

/// A path the walk could not read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub path: String,
    pub message: String,
}

/// What the walk found and left out.
#[derive(Debug, Default)]
pub struct Skipped {
    /// Files with other extensions, by extension (`.txt`; `(none)` without one).
    pub other_extensions: BTreeMap<String, u64>,
    /// Every path left out but the unreadable ones, by reason, counted (a hidden or excluded
    /// folder counts once), the first of each kept.
    pub not_read: NotRead,
    /// Codex homes inside an input, not entered.
    pub codex_homes: Vec<String>,
    /// Symlinks leading back to a folder above them (with `--follow`).
    pub loops: Vec<String>,
    /// Files and folders that could not be read.
    pub unreadable: Vec<Unreadable>,
    /// Inputs that are the output folder itself.
    pub output: Vec<String>,
}

impl Skipped {
    /// Files left out for their extension.
    pub fn other_extension_files(&self) -> u64 {
        self.other_extensions.values().sum()
    }

    /// Hidden files and folders left out.
    pub fn hidden(&self) -> u64 {
        self.not_read.count(NotReadReason::Hidden)
    }

    /// Symlinks not followed.
    pub fn symlinks(&self) -> u64 {
        self.not_read.count(NotReadReason::Symlink)
    }

    /// Files and folders matching `--exclude`.
    pub fn excluded(&self) -> u64 {
        self.not_read.count(NotReadReason::Excluded)
    }

    /// Record files matching no `--glob`.
    pub fn unmatched(&self) -> u64 {
        self.not_read.count(NotReadReason::Unmatched)
    }

    fn skip(&mut self, why: NotReadReason, path: &Path, reason: String) {
        self.not_read.add(why, path.display().to_string(), reason);
    }

    /// One line per kind of skip, for the user, e.g. "skipped 12 files with other
    /// extensions: .txt 8, .csv 4".
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.other_extensions.is_empty() {
            let mut by_count: Vec<(&String, &u64)> = self.other_extensions.iter().collect();
            by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let list: Vec<String> = by_count.iter().map(|(e, n)| format!("{e} {n}")).collect();
            let n = self.other_extension_files();
            notes.push(format!(
                "skipped {n} {} with other extensions: {}",
                plural(n, "file", "files"),
                list.join(", ")
            ));
        }
        let (hidden, symlinks, excluded, unmatched) = (
            self.hidden(),
            self.symlinks(),
            self.excluded(),
            self.unmatched(),
        );
        if hidden > 0 {
            notes.push(format!(
                "skipped {hidden} hidden {} (--hidden reads them)",
                plural(hidden, "file or folder", "files and folders")
            ));
        }
        if symlinks > 0 {
            notes.push(format!(
                "skipped {symlinks} {} (--follow follows them)",
                plural(symlinks, "symlink", "symlinks")
            ));
        }
        if excluded > 0 {
            notes.push(format!(
                "skipped {excluded} {} matching --exclude",
                plural(excluded, "file or folder", "files and folders")
            ));
        }
        if unmatched > 0 {
            notes.push(format!(
                "skipped {unmatched} {} matching no --glob",
                plural(unmatched, "file", "files")
            ));
        }
        if let Some(zips) = self.not_read.0.get(&NotReadReason::NotAnExport) {
            let n = zips.count;
            notes.push(format!(
                "skipped {n} {} without conversations.json (not ChatGPT exports)",
                plural(n, "zip", "zips")
            ));
        }
        for home in &self.codex_homes {
            notes.push(format!(
                "skipped {home}: it is a Codex home (rollouts, not transcripts)"
            ));
        }
        for path in &self.output {
            notes.push(format!("skipped {path}: it is the output folder (--out)"));
        }
        notes
    }
}

fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// The files to read, what was left out, and the temporary copies of streams (removed when
/// this is dropped: keep it until the run ends).
#[derive(Debug, Default)]
pub struct Discovery {
    pub files: Vec<SourceFile>,
    pub skipped: Skipped,
    /// The copies of streams, open until the run is done with them ([`Spool`]).
    pub spools: Vec<Spool>,
}

/// The copy of a stream: an unnamed file (`O_TMPFILE`, or one unlinked at once), read through
/// `/proc/self/fd/N`, so that nothing of it is left in `$TMPDIR` however the process ends; a
/// named temporary file only where `/proc` is not there.
#[derive(Debug)]
pub enum Spool {
    Unnamed(std::fs::File),
    Named(tempfile::TempPath),
}

/// Lists every record file under `inputs`, sorted within each input; inputs keep their order.
/// Folders are not entered when they are `skip` (the output home: converting `.` into `./home`
/// must not read back its own rollouts and quarantine) or a Codex home.
pub fn discover(
    inputs: &[PathBuf],
    skip: Option<&Path>,
    options: &WalkOptions,
) -> Result<Discovery, SourceError> {
    let skip = skip.and_then(|p| std::fs::canonicalize(p).ok());
    let mut found = Discovery::default();
    for input in inputs {
        if input.as_os_str() == STDIN {
            let origin = format!("stdin:{}", options.stdin_name);
            spool(input, &options.stdin_name, origin, &mut found);
            continue;
        }
        let meta = std::fs::metadata(input).map_err(|source| SourceError::MissingInput {
            path: input.display().to_string(),
            source,
        })?;
        let base = input.parent().unwrap_or_else(|| Path::new(""));
        if meta.is_file() {
            if let Some(why) = super::open::not_an_archive(input, options.archive) {
                found.skipped.skip(NotReadReason::NotAnExport, input, why);
                continue;
            }
            let root = Some(Arc::from(base));
            found
                .files
                .push(source_file(input.clone(), base, root, &meta));
            continue;
        }
        if !meta.is_dir() {
            // A FIFO, `/dev/stdin`, `<(...)`: a stream, read once into a temporary file.
            let (key, origin) = if is_anonymous_stream(input) {
                let name = options.stdin_name.clone();
                let origin = format!("stdin:{name}");
                (name, origin)
            } else {
                (key_of(input, base), origin_of(input))
            };
            spool(input, &key, origin, &mut found);
            continue;
        }
        let walk_from = Walk {
            root: input,
            tree: Arc::from(input.as_path()),
            base,
            output: skip.as_deref(),
            options,
        };
        walk(&walk_from, input, &mut found);
    }
    Ok(found)
}

/// One INPUT folder's walk: what every folder below it is walked with.
struct Walk<'a> {
    /// The INPUT folder: `--glob` and `--exclude` match the paths below it.
    root: &'a Path,
    /// The same, shared by its files as their [`SourceFile::root`].
    tree: Arc<Path>,
    /// Its parent: the files' keys are relative to it.
    base: &'a Path,
    /// The output folder, never entered.
    output: Option<&'a Path>,
    options: &'a WalkOptions,
}

impl Walk<'_> {
    /// What the filters say of `path` (below the INPUT folder, or followed there by a
    /// symlink, whose own path below it is what is matched).
    fn verdict(&self, path: &Path, is_dir: bool) -> Verdict {
        let filter = &self.options.filter;
        let relative = path.strip_prefix(self.root).unwrap_or(path);
        if filter.is_empty() || relative.as_os_str().is_empty() {
            Verdict::Keep
        } else if is_dir {
            filter.folder(relative)
        } else {
            filter.file(relative)
        }
    }
}

/// Walks one folder, sorted by name, adding its record files and counting what it leaves out.
/// Symlinks are followed here rather than by walkdir, so a folder that cannot be read behind
/// one is reported with its own path (walkdir's loop check fails on it without a path).
fn walk(walk_from: &Walk<'_>, input: &Path, found: &mut Discovery) {
    let Walk {
        base,
        output,
        options,
        ..
    } = *walk_from;
    let mut entries = WalkDir::new(input).sort_by_file_name().into_iter();
    while let Some(entry) = entries.next() {
        if options.stop.load(std::sync::atomic::Ordering::Relaxed) != 0 {
            return;
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                let path = err.path().unwrap_or(input).display().to_string();
                let message = err
                    .io_error()
                    .map_or_else(|| err.to_string(), |io| io.to_string());
                found.skipped.unreadable.push(Unreadable { path, message });
                continue;
            }
        };
        let path = entry.path();
        if entry.depth() > 0 && is_hidden(entry.file_name()) && !options.hidden {
            let reason = "hidden (--hidden reads it)".to_string();
            found.skipped.skip(NotReadReason::Hidden, path, reason);
            if entry.file_type().is_dir() {
                entries.skip_current_dir();
            }
            continue;
        }
        let meta = if entry.path_is_symlink() && entry.depth() > 0 {
            if !options.follow {
                let reason = "a symlink (--follow follows it)".to_string();
                found.skipped.skip(NotReadReason::Symlink, path, reason);
                continue;
            }
            std::fs::metadata(path).map_err(|e| e.to_string())
        } else {
            entry.metadata().map_err(|e| e.to_string())
        };
        let meta = match meta {
            Ok(meta) => meta,
            Err(message) => {
                found.skipped.unreadable.push(Unreadable {
                    path: path.display().to_string(),
                    message,
                });
                continue;
            }
        };
        if meta.is_dir() {
            let canonical = std::fs::canonicalize(path).ok();
            if output.is_some() && canonical.as_deref() == output {
                found.skipped.output.push(path.display().to_string());
                let reason = "the output folder (--out)".to_string();
                found
                    .skipped
                    .skip(NotReadReason::OutputFolder, path, reason);
            } else if walk_from.verdict(path, true) == Verdict::Excluded {
                let reason = "matches --exclude".to_string();
                found.skipped.skip(NotReadReason::Excluded, path, reason);
            } else if is_codex_home(path) {
                if entry.depth() == 0 || options.codex_homes {
                    walk_codex_home(walk_from, path, found);
                } else {
                    found.skipped.codex_homes.push(path.display().to_string());
                    let reason =
                        "a Codex home (rollouts, not transcripts; --from codex reads them)";
                    found
                        .skipped
                        .skip(NotReadReason::CodexHome, path, reason.to_string());
                }
            } else if entry.path_is_symlink() && entry.depth() > 0 {
                let parent = path.parent().and_then(|p| std::fs::canonicalize(p).ok());
                match (&canonical, &parent) {
                    (Some(target), Some(parent)) if parent.starts_with(target) => {
                        found.skipped.loops.push(format!(
                            "{} (leads back to {})",
                            path.display(),
                            target.display()
                        ));
                        let reason = format!("a symlink loop: leads back to {}", target.display());
                        found.skipped.skip(NotReadReason::SymlinkLoop, path, reason);
                    }
                    _ => walk(walk_from, path, found),
                }
                continue;
            } else {
                continue;
            }
            entries.skip_current_dir();
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        if !is_record_file(path) {
            let extension = path.extension().map_or_else(
                || "(none)".to_string(),
                |e| format!(".{}", e.to_string_lossy()),
            );
            let reason = format!("another extension ({extension})");
            *found.skipped.other_extensions.entry(extension).or_insert(0) += 1;
            found
                .skipped
                .skip(NotReadReason::OtherExtension, path, reason);
            continue;
        }
        match walk_from.verdict(path, false) {
            Verdict::Keep => {}
            Verdict::Excluded => {
                let reason = "matches --exclude".to_string();
                found.skipped.skip(NotReadReason::Excluded, path, reason);
                continue;
            }
            Verdict::Unmatched => {
                let reason = "matches no --glob".to_string();
                found.skipped.skip(NotReadReason::Unmatched, path, reason);
                continue;
            }
        }
        if is_zip_name(path) {
            if let Some(why) = super::open::not_an_archive(path, options.archive) {
                found.skipped.skip(NotReadReason::NotAnExport, path, why);
                continue;
            }
        }
        let root = Some(Arc::clone(&walk_from.tree));
        found
            .files
            .push(source_file(entry.into_path(), base, root, &meta));
    }
}

/// The folders of a Codex home that hold its rollouts, live and archived.
const HOME_ROLLOUT_DIRS: [&str; 2] = ["sessions", "archived_sessions"];

/// A Codex home read as an input (the INPUT itself, or any home with `--from codex`): its
/// rollouts, under `sessions/` and `archived_sessions/`. Nothing else of a home (the prompt
/// history, rollover's run folders, logs) holds a conversation.
fn walk_codex_home(walk_from: &Walk<'_>, home: &Path, found: &mut Discovery) {
    for folder in HOME_ROLLOUT_DIRS {
        let dir = home.join(folder);
        if dir.is_dir() {
            walk(walk_from, &dir, found);
        }
    }
}

fn is_zip_name(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("zip"))
}

fn is_hidden(name: &OsStr) -> bool {
    name.to_string_lossy().starts_with('.')
}

/// A folder Codex (or rollover) wrote, recognised by what only they write: a rollover
/// manifest whose first line is its header (`{"manifest":N}`), or a rollout under
/// `sessions/` (at `sessions/YYYY/MM/DD/`) whose first line is a session's first line (a
/// `session_meta` line, or the header of a rollout from before those). A stray file named
/// like one (an empty `rollout-x.jsonl`, a `manifest` holding `{}`) is not enough.
pub fn is_codex_home(dir: &Path) -> bool {
    let manifest = dir.join("rollover").join("manifest");
    if first_line(&manifest).is_some_and(|line| is_manifest_header(&line)) {
        return true;
    }
    // Live and archived sessions, plain or zstd (as Codex or a user may leave them).
    ["sessions", "archived_sessions"].iter().any(|folder| {
        let sessions = dir.join(folder);
        sessions.is_dir()
            && WalkDir::new(&sessions)
                .max_depth(4)
                .into_iter()
                .filter_map(Result::ok)
                .filter(|e| {
                    e.file_type().is_file() && {
                        let name = e.file_name().to_string_lossy();
                        name.starts_with("rollout-")
                            && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst"))
                    }
                })
                .take(16)
                .any(|e| first_line(e.path()).is_some_and(|line| is_rollout_start(&line)))
    })
}

/// The first line of a file, read up to 1 MiB (a session's first line holds its
/// instructions); `None` when it cannot be read.
fn first_line(path: &Path) -> Option<Vec<u8>> {
    use std::io::{BufRead, Read};
    let file = std::fs::File::open(path).ok()?;
    let mut line = Vec::new();
    let plain: Box<dyn Read> = if path.extension().is_some_and(|e| e == "zst") {
        Box::new(zstd::stream::read::Decoder::new(file).ok()?)
    } else {
        Box::new(file)
    };
    std::io::BufReader::new(plain.take(1 << 20))
        .read_until(b'\n', &mut line)
        .ok()?;
    Some(line)
}

fn is_manifest_header(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Header {
        #[allow(dead_code)]
        manifest: u32,
    }
    serde_json::from_slice::<Header>(line).is_ok()
}

/// A rollout's first line: `{"timestamp", "type": "session_meta", "payload": {...}}`, or the
/// header of a rollout from before the envelope (`{"id", "timestamp", "instructions"...}`).
fn is_rollout_start(line: &[u8]) -> bool {
    let Ok(serde_json::Value::Object(object)) = serde_json::from_slice(line) else {
        return false;
    };
    let enveloped = object.get("type").and_then(|t| t.as_str()) == Some("session_meta")
        && object.get("payload").is_some_and(|p| p.is_object());
    let header = object.get("id").is_some_and(|i| i.is_string())
        && object.get("timestamp").is_some_and(|t| t.is_string())
        && object.contains_key("instructions");
    enveloped || header
}

/// `/dev/stdin`, `/dev/fd/N`, `/proc/self/fd/N` (what `<(...)` gives): streams without a name
/// of their own, keyed by `--stdin-name` so their ids do not depend on a descriptor number.
fn is_anonymous_stream(path: &Path) -> bool {
    path == Path::new("/dev/stdin")
        || path.parent() == Some(Path::new("/dev/fd"))
        || path.parent() == Some(Path::new("/proc/self/fd"))
}

/// Copies a stream (`-` is standard input) to a temporary file, read then like any file under
/// the name `key`. A stream that fails is reported as unreadable.
fn spool(input: &Path, key: &str, origin: String, found: &mut Discovery) {
    let copy = |out: &mut std::fs::File| -> std::io::Result<()> {
        if input.as_os_str() == STDIN {
            std::io::copy(&mut std::io::stdin().lock(), out)?;
        } else {
            std::io::copy(&mut std::fs::File::open(input)?, out)?;
        }
        out.flush()
    };
    let copied = (|| -> std::io::Result<(PathBuf, Spool)> {
        if Path::new("/proc/self/fd").is_dir() {
            use std::os::fd::AsRawFd;
            let mut file = tempfile::tempfile()?;
            copy(&mut file)?;
            let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
            return Ok((path, Spool::Unnamed(file)));
        }
        let mut temp = tempfile::Builder::new()
            .prefix("rollover-stdin-")
            .tempfile()?;
        copy(temp.as_file_mut())?;
        let temp = temp.into_temp_path();
        Ok((temp.to_path_buf(), Spool::Named(temp)))
    })()
    .and_then(|(path, spool)| Ok((std::fs::metadata(&path)?, path, spool)));
    match copied {
        Ok((meta, path, spool)) => {
            let mut file = source_file(path, Path::new(""), None, &meta);
            file.key = key.to_string();
            file.origin = origin;
            file.display = Arc::from(key);
            found.files.push(file);
            found.spools.push(spool);
        }
        Err(err) => found.skipped.unreadable.push(Unreadable {
            path: input.display().to_string(),
            message: err.to_string(),
        }),
    }
}

fn key_of(path: &Path, base: &Path) -> String {
    let relative = path.strip_prefix(base).unwrap_or(path);
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The origin of the file at `path` ([`SourceFile::origin`]): its folder resolved once per
/// folder (a walk asks for every file of a folder in turn).
fn origin_of(path: &Path) -> String {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(PathBuf, PathBuf)>> =
            const { std::cell::RefCell::new(None) };
    }
    let parent = path.parent().unwrap_or_else(|| Path::new(""));
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let resolved = LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((asked, resolved)) = last.as_ref() {
            if asked == parent {
                return resolved.clone();
            }
        }
        let resolved = std::fs::canonicalize(parent)
            .or_else(|_| std::path::absolute(parent))
            .unwrap_or_else(|_| parent.to_path_buf());
        *last = Some((parent.to_path_buf(), resolved.clone()));
        resolved
    });
    let full = match path.file_name() {
        Some(name) => resolved.join(name),
        None => resolved,
    };
    lossless(full.as_os_str())
}

/// A path as text without loss: UTF-8 as it is (a backslash doubled), any other byte `\xNN`.
fn lossless(text: &OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::with_capacity(text.len());
    for chunk in text.as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                out.push(c);
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

fn source_file(
    path: PathBuf,
    base: &Path,
    root: Option<Arc<Path>>,
    meta: &std::fs::Metadata,
) -> SourceFile {
    SourceFile {
        display: Arc::from(path.display().to_string()),
        root,
        key: key_of(&path, base),
        origin: origin_of(&path),
        path,
        size: meta.len(),
        mtime_ns: meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64),
        ctime_ns: ctime_ns(meta),
        ino: std::os::unix::fs::MetadataExt::ino(meta),
    }
}

/// A file's status change time in nanoseconds since the Unix epoch.
pub fn ctime_ns(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let seconds = u64::try_from(meta.ctime()).unwrap_or(0);
    let nanos = u64::try_from(meta.ctime_nsec()).unwrap_or(0);
    seconds.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// True for `x.jsonl`, `x.json.zst`, `x.traj.gz` and the like, a `.zip` and a `.parquet`.
pub fn is_record_file(path: &Path) -> bool {
    let name = match path.file_name() {
        Some(name) => name.to_string_lossy().to_ascii_lowercase(),
        None => return false,
    };
    // A ChatGPT data export, read whole (its conversations files) without unpacking; a
    // Parquet dataset, read by its row groups.
    if WHOLE_EXTENSIONS
        .iter()
        .any(|(e, _)| name.rsplit_once('.').is_some_and(|(_, ext)| ext == *e))
    {
        return true;
    }
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
            "train-00000-of-00006.parquet",
        ] {
            assert!(is_record_file(Path::new(yes)), "{yes}");
        }
        for no in ["LICENSE", "README.md", "a.zst", "jsonl", "x.txt.gz"] {
            assert!(!is_record_file(Path::new(no)), "{no}");
        }
    }
}
