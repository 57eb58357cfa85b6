//! The Responses output's files (`--format responses`): one JSON Lines file of request bodies
//! per input file, `OUT/responses/<input key>.jsonl[.zst]`. The ordered collector appends each
//! body in record order to a hidden temporary file in the target's folder (0600, folders
//! 0700); when the input file ends, the file is finished (zstd frame closed, fsync with
//! `--durable`) and renamed into place through the [`Guard`], so a file changed since rollover
//! wrote it is never clobbered. A file never finished (a stop, a failure) is removed; one a
//! kill left behind is removed by the next start (`Home::remove_temporary_files`).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::model::hash::Xxh3;

use super::guard::Placement;
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

/// The bytes of one `write` of a body file, at an offset that is a multiple of it.
const CHUNK: usize = 1 << 20;

/// A file written in whole [`CHUNK`]s, each at a multiple of its size (the last one short):
/// the page cache then takes each `write` as a few large folios. Bodies were written a line
/// at a time when long (agent transcripts' ~73 KB, to skip a copy into a buffer) and through
/// a 256 KiB `BufWriter` otherwise: writing agent transcripts' 235 MB of bodies took the
/// kernel 0.42 s a run (`--format responses -j 1`, the mean of 6), and 0.27 s in chunks of
/// 1 MiB, copy included, with the same user CPU (samples/BENCHMARKS.md).
/// What is not a whole chunk waits in the buffer; a part of a write that spans whole chunks
/// once the buffer is written goes to the file from where it is, not copied.
struct Chunked<F: Write = File> {
    file: F,
    buffer: Vec<u8>,
}

impl<F: Write> Chunked<F> {
    fn new(file: F) -> Chunked<F> {
        Chunked {
            file,
            buffer: Vec::new(),
        }
    }

    /// Writes what the buffer holds and gives the file back.
    fn into_inner(mut self) -> std::io::Result<F> {
        self.flush()?;
        Ok(self.file)
    }
}

impl<F: Write> Write for Chunked<F> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> std::io::Result<()> {
        if self.buffer.capacity() < CHUNK {
            self.buffer.reserve_exact(CHUNK - self.buffer.len());
        }
        let room = CHUNK - self.buffer.len();
        if bytes.len() < room {
            self.buffer.extend_from_slice(bytes);
            return Ok(());
        }
        // The buffer filled up to a whole chunk and written; then the whole chunks of the
        // rest from where they are, and what is left into the buffer.
        self.buffer.extend_from_slice(&bytes[..room]);
        self.file.write_all(&self.buffer)?;
        self.buffer.clear();
        bytes = &bytes[room..];
        let whole = bytes.len() - bytes.len() % CHUNK;
        self.file.write_all(&bytes[..whole])?;
        self.buffer.extend_from_slice(&bytes[whole..]);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.write_all(&self.buffer)?;
        self.buffer.clear();
        Ok(())
    }
}

enum Sink {
    Plain(Hashing<Chunked>),
    Zstd(zstd::Encoder<'static, Hashing<Chunked>>),
}

/// One output file being written.
pub(crate) struct BodyFile {
    relative: PathBuf,
    target: PathBuf,
    temp: PathBuf,
    sink: Option<Sink>,
}

impl BodyFile {
    /// Starts `relative` (under the home) as a temporary file beside it.
    pub(crate) fn create(
        home: &Home,
        relative: &Path,
        compress: bool,
    ) -> Result<BodyFile, OutputError> {
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
            inner: Chunked::new(file),
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

    pub(crate) fn relative(&self) -> &Path {
        &self.relative
    }

    /// Appends one body line.
    pub(crate) fn append(&mut self, line: &[u8]) -> Result<(), OutputError> {
        let written = match &mut self.sink {
            Some(Sink::Plain(out)) => out.write_all(line),
            Some(Sink::Zstd(out)) => out.write_all(line),
            None => Ok(()),
        };
        written.map_err(|e| write_error(&self.target, e))
    }

    /// Finishes the file and puts it in place (unless the guard keeps a changed one); returns
    /// what happened and the digest of the bytes on disk.
    pub(crate) fn finish(
        mut self,
        home: &Home,
        guard: &Guard,
    ) -> Result<(Placed, String), OutputError> {
        let target = self.target.clone();
        let hashing = match self.sink.take() {
            Some(Sink::Plain(out)) => out,
            Some(Sink::Zstd(out)) => out.finish().map_err(|e| write_error(&target, e))?,
            None => return Ok((Placed::Unchanged, String::new())),
        };
        let Hashing { inner, hasher } = hashing;
        let file = inner.into_inner().map_err(|e| write_error(&target, e))?;
        if home.durable {
            file.sync_all().map_err(|e| write_error(&target, e))?;
        }
        drop(file);
        let digest = crate::model::identity::hex128(hasher.digest128());
        let temp = self.temp.clone();
        let placed =
            guard.place_with(home, &self.relative, &digest, &Placement::default(), || {
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

    /// Lines shorter and longer than a chunk, ending at and across its bounds, reach the file
    /// in order, and the digest is the file's.
    #[test]
    fn lines_of_any_length_keep_their_order_and_the_digest() {
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
            long(b'a', CHUNK - 7),
            long(b'b', 10),
            long(b'c', 20),
            long(b'd', CHUNK - 1),
            long(b'e', 3 * CHUNK),
            long(b'f', 7),
            long(b'g', CHUNK + 1),
            long(b'h', 2 * CHUNK - 40),
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

    /// What a `write` was given: its offset in the file and its length.
    #[derive(Default)]
    struct Writes(Vec<(usize, usize)>, usize);

    impl Write for Writes {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.push((self.1, bytes.len()));
            self.1 += bytes.len();
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Every `write` but the last starts at a multiple of a chunk and is whole chunks, for
    /// lines of any length; a line of several chunks is written in one, from where it is.
    #[test]
    fn a_body_file_is_written_in_whole_chunks_at_their_bounds() {
        let mut out = Chunked::new(Writes::default());
        let lengths = [
            1,
            3_000,
            CHUNK - 3_001,
            73_000,
            CHUNK,
            5,
            3 * CHUNK + 17,
            900_000,
        ];
        for (i, n) in lengths.iter().enumerate() {
            out.write_all(&vec![i as u8; *n]).expect("write");
        }
        let Writes(writes, total) = out.into_inner().expect("flush");
        assert_eq!(total, lengths.iter().sum::<usize>());
        let (last, whole) = writes.split_last().expect("writes");
        for &(at, n) in whole {
            assert!(
                at % CHUNK == 0 && n % CHUNK == 0 && n > 0,
                "a write of {n} at {at}"
            );
        }
        assert_eq!(last.0 % CHUNK, 0);
        assert!(last.1 < CHUNK);
        // The 3-chunk line: the buffer topped up and written, then its next whole chunks
        // (two) in one write.
        assert!(writes.iter().any(|&(_, n)| n == 2 * CHUNK), "{writes:?}");
    }
}
