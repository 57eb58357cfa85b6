//! zstd streams decoded into blocks the splitter takes its lines from without a copy.

use std::io::{self, BufRead, Read};
use std::sync::Arc;

use super::{read_buffered, LineSource, READ_BUFFER};
use crate::source::split::CARRY_MAX;

/// A zstd stream decoded straight into blocks of up to `READ_BUFFER` (256 KiB), whose lines
/// the splitter then takes as slices ([`LineSource::take_shared`]) instead of copying every
/// byte once more into a block of records. A line cut by a block's end is carried whole into
/// the next block ([`LineSource::carry`]: its head copied once).
///
/// A block holds what that `BufReader` held at each refill, so the bytes read are the same up
/// to a damage too: frames one after another (skippable frames skipped), a stream ending
/// inside a frame an `incomplete frame` error, zstd's own window limit (128 MiB) for a frame
/// that asks for more. Memory: the blocks its records still hold (each at least half full),
/// and zstd's window; the run keeps up to [`BLOCKS_KEPT`] blocks no record holds any more for
/// the next ones, whichever file's ([`FreeBlocks`]).
pub(crate) struct ZstdBlocks<R> {
    input: R,
    decoder: zstd::stream::raw::Decoder<'static>,
    /// Where blocks are given back by their last record (the run's, [`FreeBlocks::shared`]).
    free: FreeBlocks,
    /// The decoded bytes not yet consumed.
    block: bytes::Bytes,
    /// Bytes kept for the head of the next block ([`LineSource::carry`]).
    carried: bytes::Bytes,
    /// The error that ended decoding while bytes were carried: given once they are read.
    pending: Option<io::Error>,
    state: Decoding,
    finished_frame: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Decoding {
    Reading,
    PastEof,
    Finished,
}

impl<R: BufRead> ZstdBlocks<R> {
    pub(crate) fn new(input: R) -> io::Result<ZstdBlocks<R>> {
        ZstdBlocks::with_blocks(input, FreeBlocks::shared())
    }

    /// A reader whose blocks are kept in `free`.
    pub(super) fn with_blocks(input: R, free: FreeBlocks) -> io::Result<ZstdBlocks<R>> {
        Ok(ZstdBlocks {
            input,
            decoder: zstd::stream::raw::Decoder::new()?,
            free,
            block: bytes::Bytes::new(),
            carried: bytes::Bytes::new(),
            pending: None,
            state: Decoding::Reading,
            finished_frame: false,
        })
    }

    /// Decodes the next block (empty at the end of the stream), as zstd's reader fills a
    /// `BufReader` of [`READ_BUFFER`] bytes: the calls into zstd up to the first that gives
    /// bytes, so that a block holds exactly what that buffer held, up to a damage too (a
    /// call that fails gives none of its bytes).
    ///
    /// Bytes carried from the last block ([`LineSource::carry`]) come first, and zstd still
    /// writes after them into [`READ_BUFFER`] bytes of room, so the calls are the same. When
    /// decoding fails, the carried bytes are the block, and the error comes after them.
    fn decode(&mut self) -> io::Result<()> {
        let carried = std::mem::take(&mut self.carried);
        let at = carried.len();
        let mut out = self.free.take(at + READ_BUFFER);
        out[..at].copy_from_slice(&carried);
        let end = match self.decode_into(&mut out, at) {
            Ok(end) => end,
            Err(err) => {
                self.free.give(out);
                if carried.is_empty() {
                    return Err(err);
                }
                self.pending = Some(err);
                self.block = carried;
                return Ok(());
            }
        };
        out.truncate(end);
        // A block less than half full (the end of a frame or of the compressed buffer, or a
        // stream of tiny frames) is copied at its size: its records would otherwise each hold
        // a whole buffer's allocation alive.
        self.block = if out.len() >= READ_BUFFER / 2 {
            self.free.share(out)
        } else {
            let block = bytes::Bytes::copy_from_slice(&out);
            self.free.give(out);
            block
        };
        Ok(())
    }

    /// The calls into zstd for one block, writing after `out`'s first `at` bytes, up to its
    /// end; returns where what they wrote ends.
    fn decode_into(&mut self, out: &mut [u8], at: usize) -> io::Result<usize> {
        use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
        // The first call flushes what zstd holds from the last block, reading nothing.
        let mut first = true;
        let mut end = at;
        loop {
            match self.state {
                Decoding::Reading => {
                    let input = if first {
                        &[][..]
                    } else {
                        self.input.fill_buf()?
                    };
                    if !first && input.is_empty() {
                        self.state = Decoding::PastEof;
                        continue;
                    }
                    first = false;
                    if self.finished_frame && !input.is_empty() {
                        self.decoder.reinit()?;
                        self.finished_frame = false;
                    }
                    let mut src = InBuffer::around(input);
                    let mut dst = OutBuffer::around_pos(&mut *out, at);
                    let hint = self.decoder.run(&mut src, &mut dst)?;
                    end = dst.pos();
                    let used = src.pos();
                    self.input.consume(used);
                    if hint == 0 {
                        self.finished_frame = true;
                    }
                    if end > at {
                        break;
                    }
                }
                Decoding::PastEof => {
                    let mut dst = OutBuffer::around_pos(&mut *out, at);
                    let hint = self.decoder.finish(&mut dst, self.finished_frame)?;
                    end = dst.pos();
                    if hint == 0 {
                        self.state = Decoding::Finished;
                    }
                    break;
                }
                Decoding::Finished => break,
            }
        }
        Ok(end)
    }
}

/// How many blocks no record holds the run keeps for its next ones: more than a run
/// has in flight (the batches read ahead, those being converted or waiting their turn, the
/// one being collected: ~10 blocks), so that in a steady run every block is one given back.
const BLOCKS_KEPT: usize = 16;

/// The blocks of the run's zstd readers that no record holds any more: a block given back is
/// memory already touched, where one freed to the allocator comes back as fresh pages, each a
/// page fault (figures: samples/BENCHMARKS.md, "fresh memory").
/// Memory: at most [`BLOCKS_KEPT`] blocks for the whole process, however many files are
/// decompressed at once, each of the longest block's size (512 KiB, of which only the bytes
/// written were touched); a file's blocks serve the next file's.
#[derive(Clone, Default)]
pub(super) struct FreeBlocks(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

impl FreeBlocks {
    /// The process's blocks, which every zstd reader shares.
    fn shared() -> FreeBlocks {
        static SHARED: std::sync::OnceLock<FreeBlocks> = std::sync::OnceLock::new();
        SHARED.get_or_init(FreeBlocks::default).clone()
    }

    /// A block of `len` bytes to write over: one given back if there is one (where only the
    /// bytes past its last length are zeroed, a few, as a block is most often full), else a new
    /// one, with room for the longest block ([`CARRY_MAX`] carried and [`READ_BUFFER`] read), so
    /// that any block given back serves any next one.
    fn take(&self, len: usize) -> Vec<u8> {
        let kept = match self.0.lock() {
            Ok(mut free) => free.pop(),
            Err(_) => None,
        };
        let mut block = kept
            .filter(|block| block.capacity() >= len)
            .unwrap_or_else(|| Vec::with_capacity(len.max(CARRY_MAX + READ_BUFFER)));
        block.resize(len, 0);
        block
    }

    /// Keeps `block` for a next one, unless enough are kept or it is larger than a block.
    fn give(&self, block: Vec<u8>) {
        if block.capacity() > CARRY_MAX + READ_BUFFER {
            return;
        }
        if let Ok(mut free) = self.0.lock() {
            if free.len() < BLOCKS_KEPT {
                free.push(block);
            }
        }
    }

    /// `block` as the records' shared bytes, given back here when the last of them is dropped.
    fn share(&self, block: Vec<u8>) -> bytes::Bytes {
        bytes::Bytes::from_owner(Shared {
            block,
            free: self.clone(),
        })
    }
}

/// A block whose bytes records share ([`FreeBlocks::share`]).
struct Shared {
    block: Vec<u8>,
    free: FreeBlocks,
}

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        &self.block
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.free.give(std::mem::take(&mut self.block));
    }
}

impl<R: BufRead> Read for ZstdBlocks<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read_buffered(self, buf)
    }
}

impl<R: BufRead> BufRead for ZstdBlocks<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.block.is_empty() {
            match self.pending.take() {
                // Carried again after the error: nothing can follow them, they come back.
                Some(err) if !self.carried.is_empty() => {
                    self.pending = Some(err);
                    self.block = std::mem::take(&mut self.carried);
                }
                Some(err) => return Err(err),
                None => self.decode()?,
            }
        }
        Ok(&self.block)
    }

    fn consume(&mut self, amount: usize) {
        let amount = amount.min(self.block.len());
        bytes::Buf::advance(&mut self.block, amount);
    }
}

impl<R: BufRead + Send> LineSource for ZstdBlocks<R> {
    fn shares(&self) -> bool {
        true
    }

    fn take_shared(&mut self, n: usize) -> bytes::Bytes {
        self.block.split_to(n.min(self.block.len()))
    }

    fn carry(&mut self) {
        self.carried = std::mem::take(&mut self.block);
    }
}
