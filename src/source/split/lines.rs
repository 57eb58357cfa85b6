//! A file's physical lines: read from the stream's buffer, copied into blocks shared by the
//! records around them, gathered when longer than a buffer, skipped past `--max-record-bytes`
//! (only the head kept), and the damage that ends a stream.

use super::*;
use sniff::looks_like_message;

/// The size of the blocks records are copied into. A block is freed when the last record in
/// it is: records are released a batch at a time, and a batch holds about 1 MiB of them.
pub(super) const CHUNK: usize = 256 << 10;

/// A line too long to share a block ([`CHUNK`]) gets one of its own.
pub(super) const CHUNK_LINE_MAX: usize = CHUNK / 8;

/// `line` as a record's bytes: copied into the current block of `chunk`, or a new one when it
/// does not fit. One allocation per 256 KiB of small records instead of one per record, and
/// the block is freed once, by whichever thread drops its last record: a worker freeing each
/// record the reader thread allocated made the reader reclaim every one (mimalloc's
/// cross-thread frees), on the pipeline's serial thread.
pub(super) fn take_line(chunk: &mut BytesMut, line: &[u8]) -> Bytes {
    if line.len() > CHUNK_LINE_MAX {
        return Bytes::copy_from_slice(line);
    }
    if chunk.capacity() < line.len() {
        *chunk = BytesMut::with_capacity(CHUNK);
    }
    chunk.extend_from_slice(line);
    chunk.split().freeze()
}

/// The longest head of a line carried into the next block of a shared buffer
/// ([`LineSource::carry`]): a longer line is gathered in `spill`, as from any buffer.
pub(crate) const CARRY_MAX: usize = 256 << 10;

/// `spill` grown past this by one long line is freed after it.
pub(super) const SPILL_KEEP: usize = 16 << 20;

/// One physical line as read, or the error that stopped reading.
pub(super) enum ReadLine {
    Line {
        bytes: Bytes,
        line: u64,
        offset: u64,
    },
    /// A line longer than the limit: its first bytes and its whole size (line ending
    /// included); the rest was skipped.
    Oversized {
        head: Vec<u8>,
        size: u64,
        line: u64,
        offset: u64,
    },
    /// The first line opens an array whose first element is not a chat message: an array of
    /// records (a ChatGPT `conversations.json` on one line). `head` is what was read of it;
    /// the rest of the line is still in the stream.
    OpensArray {
        head: Vec<u8>,
        line: u64,
        offset: u64,
    },
    /// Empty lines in a row (bare `\n`s), counted at once.
    Blanks(u64),
    Eof,
    Error {
        partial: Vec<u8>,
        line: u64,
        offset: u64,
        message: String,
    },
}

/// A line (or JSON value) gathered past its first [`SPILL_KEEP`] bytes, in blocks of one
/// size: one buffer doubled up to the limit held twice the limit at the copy, and the
/// allocator kept each size it passed through (an oversized line of a 256 MiB limit peaked at
/// ~650 MB); blocks of one size are reused and cost the bytes held.
#[derive(Default)]
pub(crate) struct Blocks {
    blocks: Vec<Vec<u8>>,
    len: usize,
}

/// The size of a [`Blocks`] block.
pub(super) const BLOCK: usize = 4 << 20;

impl Blocks {
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let full = self.blocks.last().is_none_or(|b| b.len() == b.capacity());
            if full {
                self.blocks.push(Vec::with_capacity(BLOCK));
            }
            let Some(last) = self.blocks.last_mut() else {
                return;
            };
            let n = (last.capacity() - last.len()).min(bytes.len());
            last.extend_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends the bytes to `out`, each block freed once copied.
    pub(crate) fn append_to(self, out: &mut Vec<u8>) {
        out.reserve_exact(self.len);
        for block in self.blocks {
            out.extend_from_slice(&block);
        }
    }
}

/// A first line at least this long that opens an array is looked at for its first element.
pub(super) const ARRAY_CHECK: usize = 1 << 20;

/// Appends `bytes` to `buf`, its capacity doubling but never past `cap` (unless `bytes`
/// need it): a line or value gathered up to a limit costs the limit, not the next power of
/// two past it.
pub(crate) fn gather(buf: &mut Vec<u8>, bytes: &[u8], cap: usize) {
    let need = buf.len().saturating_add(bytes.len());
    if need > buf.capacity() {
        let want = buf.capacity().saturating_mul(2).clamp(need, cap.max(need));
        buf.reserve_exact(want - buf.len());
    }
    buf.extend_from_slice(bytes);
}

/// What the head of a first line says: `Some(true)` when it opens an array whose first
/// element (read whole) is not a chat message, `Some(false)` when it does not open an array or
/// its first element is a message (one record), `None` while the first element is cut.
pub(super) fn opens_record_array(head: &[u8]) -> Option<bool> {
    let body = head.strip_prefix(BOM).unwrap_or(head).trim_ascii_start();
    if body.first() != Some(&b'[') {
        return Some(false);
    }
    match Elements::new(body, Framing::Array, u64::MAX).next() {
        Some(Element::Value { bytes, .. }) => Some(!looks_like_message(&bytes)),
        Some(Element::Oversized { .. }) => Some(false),
        Some(Element::Broken { .. }) | None => None,
    }
}

/// Removes the line ending (LF or CRLF) and a UTF-8 BOM at the line's start: files joined
/// with `cat` carry each one's BOM at the start of a line.
pub(super) fn strip_line(bytes: &[u8]) -> &[u8] {
    let mut s = bytes;
    if s.starts_with(BOM) {
        s = &s[BOM.len()..];
    }
    if let Some(rest) = s.strip_suffix(b"\n") {
        s = rest;
    }
    if let Some(rest) = s.strip_suffix(b"\r") {
        s = rest;
    }
    s
}

pub(super) fn count_newlines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

impl RecordReader {
    /// The next line. A line is buffered up to the limit (plus its CRLF) only; past it, the
    /// rest is skipped to the line's end and the line is [`ReadLine::Oversized`].
    pub(super) fn read_line(&mut self) -> ReadLine {
        let Some(reader) = self.reader.as_mut() else {
            return ReadLine::Eof;
        };
        // Empty lines in a row are counted from the buffer in one pass: a file of newlines
        // is read at the speed of memchr, not a line's bookkeeping each.
        if let Ok(available) = reader.fill_buf() {
            let empty = available.iter().take_while(|b| **b == b'\n').count();
            if empty > 0 {
                reader.consume(empty);
                self.offset += empty as u64;
                self.line += empty as u64;
                return ReadLine::Blanks(empty as u64);
            }
        }
        // The limit, a BOM and a CRLF.
        let keep = usize::try_from(self.max_record_bytes.saturating_add(5)).unwrap_or(usize::MAX);
        // A first line that opens an array is looked at once it is this long, then at each
        // doubling (linear in all): an array of records is streamed from there.
        let mut array_check = self.sniffing.then_some(ARRAY_CHECK);
        // A line that spans buffer refills is gathered in `spill` (kept from line to line) and
        // copied out once at its size: growing a fresh vector per line cost reallocations and
        // freshly zeroed pages on the reader thread.
        let buf = &mut self.spill;
        let chunk = &mut self.chunk;
        buf.clear();
        // Past `SPILL_KEEP`, the line goes on in blocks of one size ([`Blocks`]).
        let mut blocks = Blocks::default();
        let mut size = 0u64;
        let start = self.offset;
        let mut whole_chunk = None;
        let shares = reader.shares();
        let mut carried = false;
        let mut opens_array = false;
        let error = loop {
            let available = match reader.fill_buf() {
                Ok(available) => available,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) => break Some(err),
            };
            if available.is_empty() {
                break None;
            }
            let (used, ends) = match memchr::memchr(b'\n', available) {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            let room = keep.saturating_sub(buf.len() + blocks.len()).min(used);
            if ends && size == 0 && room == used {
                // The common case: the whole line is in the buffer, taken as a slice of it
                // when the buffer is a shared block (zstd's), else copied into one.
                whole_chunk = Some(if shares {
                    reader.take_shared(used)
                } else {
                    let line = take_line(chunk, &available[..used]);
                    reader.consume(used);
                    line
                });
                size = used as u64;
                break None;
            }
            if !ends && size == 0 && shares && !carried && used <= CARRY_MAX {
                // A line cut by the end of a shared block: its head goes to the head of the
                // next block, so that the line is still one slice (once a line; a longer one
                // is gathered below).
                reader.carry();
                carried = true;
                continue;
            }
            let taken = &available[..room];
            let into_spill = SPILL_KEEP.saturating_sub(buf.len()).min(taken.len());
            gather(buf, &taken[..into_spill], SPILL_KEEP);
            blocks.push(&taken[into_spill..]);
            reader.consume(used);
            size += used as u64;
            if room < used {
                // Past the limit: the head in `buf` is all that is kept of it.
                blocks = Blocks::default();
            }
            if ends {
                break None;
            }
            if let Some(at) = array_check.filter(|&at| buf.len() >= at && room == used) {
                match opens_record_array(buf) {
                    Some(true) => {
                        opens_array = true;
                        break None;
                    }
                    Some(false) => array_check = None,
                    None => array_check = Some(at.saturating_mul(2)),
                }
            }
        };
        if let Some(line) = whole_chunk {
            self.offset += size;
            self.line += 1;
            if strip_line(&line).len() as u64 <= self.max_record_bytes {
                return ReadLine::Line {
                    bytes: line,
                    line: self.line,
                    offset: start,
                };
            }
            return ReadLine::Oversized {
                head: line[..line.len().min(OVERSIZED_HEAD)].to_vec(),
                size,
                line: self.line,
                offset: start,
            };
        }
        if opens_array {
            // Not a line: the array's elements are read from here (the line's head, then
            // the stream).
            let mut head = std::mem::take(&mut self.spill);
            blocks.append_to(&mut head);
            return ReadLine::OpensArray {
                head,
                line: self.line + 1,
                offset: start,
            };
        }
        // What was read of a line not read whole: a partial or oversized line's head only.
        let gathered = (self.spill.len() + blocks.len()) as u64;
        if let Some(err) = error {
            self.offset += size;
            self.line += 1;
            let mut partial = std::mem::take(&mut self.spill);
            blocks.append_to(&mut partial);
            return ReadLine::Error {
                partial,
                line: self.line,
                offset: start,
                message: err.to_string(),
            };
        }
        if size == 0 {
            return ReadLine::Eof;
        }
        self.offset += size;
        self.line += 1;
        if gathered == size {
            // A long line's buffer is handed over whole rather than copied: the copy was one
            // more record's worth of memory at the peak.
            let buf = if !blocks.is_empty() {
                let mut all = Vec::with_capacity(self.spill.len() + blocks.len());
                all.extend_from_slice(&self.spill);
                self.spill = Vec::new();
                blocks.append_to(&mut all);
                all
            } else if self.spill.capacity() > SPILL_KEEP {
                std::mem::take(&mut self.spill)
            } else {
                self.spill.as_slice().to_vec()
            };
            if strip_line(&buf).len() as u64 <= self.max_record_bytes {
                return ReadLine::Line {
                    bytes: buf.into(),
                    line: self.line,
                    offset: start,
                };
            }
            return ReadLine::Oversized {
                head: buf[..buf.len().min(OVERSIZED_HEAD)].to_vec(),
                size,
                line: self.line,
                offset: start,
            };
        }
        ReadLine::Oversized {
            head: self.spill[..self.spill.len().min(OVERSIZED_HEAD)].to_vec(),
            size,
            line: self.line,
            offset: start,
        }
    }

    /// The event of an oversized record: its first bytes, marked with its size.
    pub(super) fn oversized(&self, head: &[u8], size: u64, line: u64, offset: u64) -> RecordEvent {
        let stripped = strip_line(head);
        RecordEvent::Record(RawRecord {
            location: self.location(line, offset, None),
            bytes: Bytes::copy_from_slice(&stripped[..stripped.len().min(OVERSIZED_HEAD)]),
            truncated: false,
            oversized: Some(size),
            id: Default::default(),
            magic: None,
        })
    }

    pub(super) fn damage(&mut self, partial: Vec<u8>, line: u64, offset: u64, message: String) {
        let location = self.location(line, offset, None);
        let stripped = strip_line(&partial);
        if !stripped.iter().all(u8::is_ascii_whitespace) {
            self.queue.push_back(RecordEvent::Record(RawRecord {
                location: location.clone(),
                bytes: Bytes::copy_from_slice(stripped),
                truncated: true,
                oversized: None,
                id: Default::default(),
                magic: None,
            }));
        }
        let compressed_offset = match self.compression {
            Compression::None => None,
            Compression::Zstd | Compression::Gzip | Compression::Zip => {
                Some(self.compressed_read.load(Ordering::Relaxed))
            }
        };
        self.queue.push_back(RecordEvent::Damage(Damage {
            location,
            compressed_offset,
            message: format!("cannot read further: {message}"),
        }));
        self.mode = Mode::Done;
        self.reader = None;
    }

    /// The event of one line read whole: its bytes are the record's, stripped in place (no
    /// copy of every record on the reader thread).
    pub(super) fn line_event(&self, bytes: Bytes, line: u64, offset: u64) -> RecordEvent {
        let stripped = strip_line(&bytes);
        if stripped.iter().all(u8::is_ascii_whitespace) {
            return RecordEvent::Blank(1);
        }
        let bytes = bytes.slice_ref(stripped);
        RecordEvent::Record(RawRecord {
            location: self.location(line, offset, None),
            bytes,
            truncated: false,
            oversized: None,
            id: Default::default(),
            magic: None,
        })
    }
}
