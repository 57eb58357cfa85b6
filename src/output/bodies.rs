//! The Responses output's files (`--format responses`): one JSON Lines file of request bodies
//! per input file, `OUT/responses/<input key>.jsonl[.zst]`. The ordered collector appends each
//! body in record order to a hidden temporary file in the target's folder (0600, folders
//! 0700); when the input file ends, the file is finished (zstd frame closed, fsync with
//! `--durable`) and renamed into place through the [`Guard`], so a file changed since rollover
//! wrote it is never clobbered. A file never finished (a stop, a failure) is removed; one a
//! kill left behind is removed by the next start (`Home::remove_temporary_files`).

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::model::hash::Xxh3;

use super::home::{private_dir_all, private_file, write_error, Home};
use super::{Guard, OutputError, Placed};

/// Counts the digest of what reaches the disk.
struct Hashing<W: Write> {
    inner: W,
    hasher: Xxh3,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl Hashing<BufWriter<File>> {
    /// `bytes` written to the file itself, after the buffer's bytes: the same bytes in the
    /// same order as `write_all`, with no copy into the buffer.
    fn write_direct(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.inner.flush()?;
        self.inner.get_mut().write_all(bytes)?;
        self.hasher.update(bytes);
        Ok(())
    }
}

/// A body line at least this long is written by [`Hashing::write_direct`].
const DIRECT_BYTES: usize = 32 << 10;

enum Sink {
    Plain(Hashing<BufWriter<File>>),
    Zstd(zstd::Encoder<'static, Hashing<BufWriter<File>>>),
}

/// One output file being written.
pub struct BodyFile {
    relative: PathBuf,
    target: PathBuf,
    temp: PathBuf,
    sink: Option<Sink>,
}

impl BodyFile {
    /// Starts `relative` (under the home) as a temporary file beside it.
    pub fn create(home: &Home, relative: &Path, compress: bool) -> Result<BodyFile, OutputError> {
        let target = home.root.join(relative);
        let dir = target.parent().unwrap_or(&home.root).to_path_buf();
        private_dir_all(&dir)?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = dir.join(home.temp_name(&name));
        let mut options = OpenOptions::new();
        let file = private_file(options.write(true).create(true).truncate(true), &temp)?;
        let hashing = Hashing {
            inner: BufWriter::with_capacity(super::LINE_BUFFER, file),
            hasher: Xxh3::new(),
        };
        let sink = if compress {
            let encoder = zstd::Encoder::new(hashing, 3).map_err(|e| write_error(&target, e))?;
            Sink::Zstd(encoder)
        } else {
            Sink::Plain(hashing)
        };
        Ok(BodyFile {
            relative: relative.to_path_buf(),
            target,
            temp,
            sink: Some(sink),
        })
    }

    pub fn relative(&self) -> &Path {
        &self.relative
    }

    /// Appends one body line. A long line goes to the file in its own `write`, after what the
    /// buffer holds: copied into the buffer first, it was a second copy of every byte of agent
    /// transcripts' bodies (~1.7 % of their conversion, on the collector's thread).
    pub fn append(&mut self, line: &[u8]) -> Result<(), OutputError> {
        let written = match &mut self.sink {
            Some(Sink::Plain(out)) if line.len() >= DIRECT_BYTES => out.write_direct(line),
            Some(Sink::Plain(out)) => out.write_all(line),
            Some(Sink::Zstd(out)) => out.write_all(line),
            None => Ok(()),
        };
        written.map_err(|e| write_error(&self.target, e))
    }

    /// Finishes the file and puts it in place (unless the guard keeps a changed one); returns
    /// what happened and the digest of the bytes on disk.
    pub fn finish(mut self, home: &Home, guard: &Guard) -> Result<(Placed, String), OutputError> {
        let target = self.target.clone();
        let hashing = match self.sink.take() {
            Some(Sink::Plain(out)) => out,
            Some(Sink::Zstd(out)) => out.finish().map_err(|e| write_error(&target, e))?,
            None => return Ok((Placed::Unchanged, String::new())),
        };
        let Hashing { inner, hasher } = hashing;
        let file = inner
            .into_inner()
            .map_err(|e| write_error(&target, e.into_error()))?;
        if home.durable {
            file.sync_all().map_err(|e| write_error(&target, e))?;
        }
        drop(file);
        let digest = crate::model::identity::hex128(hasher.digest128());
        let temp = self.temp.clone();
        let placed = guard.place_with(home, &self.relative, &digest, || {
            fs::rename(&temp, &target).map_err(|e| write_error(&target, e))?;
            if home.durable {
                if let Some(dir) = target.parent() {
                    File::open(dir)
                        .and_then(|d| d.sync_all())
                        .map_err(|e| write_error(dir, e))?;
                }
            }
            Ok(())
        })?;
        Ok((placed, digest))
    }
}

impl Drop for BodyFile {
    /// Whatever was not renamed into place goes: no half-written file is left behind.
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.temp);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Lines long enough to be written directly, between buffered ones and at either end,
    /// reach the file in order, and the digest is the file's: as if every line went through
    /// the buffer.
    #[test]
    fn long_lines_written_directly_keep_their_order_and_the_digest() {
        let root = tempfile::tempdir().expect("temp dir");
        let home = Home::new(root.path());
        let guard = Guard::new(HashMap::new(), false);
        let relative = Path::new("responses/a.jsonl");
        let long = |c: u8, n: usize| {
            let mut line = vec![c; n];
            line.push(b'\n');
            line
        };
        let lines = [
            long(b'a', DIRECT_BYTES + 5),
            long(b'b', 10),
            long(b'c', 20),
            long(b'd', DIRECT_BYTES - 1),
            long(b'e', 3 * DIRECT_BYTES),
            long(b'f', 7),
            long(b'g', super::super::LINE_BUFFER + 1),
        ];
        let mut body = BodyFile::create(&home, relative, false).expect("create");
        for line in &lines {
            body.append(line).expect("append");
        }
        let (placed, digest) = body.finish(&home, &guard).expect("finish");
        assert_eq!(placed, Placed::Written);
        let expected = lines.concat();
        let written = fs::read(root.path().join(relative)).expect("read");
        assert!(written == expected, "the file is not the lines in order");
        assert_eq!(
            digest,
            crate::model::identity::hex128(crate::model::hash::xxh3_128(&expected))
        );
    }
}
