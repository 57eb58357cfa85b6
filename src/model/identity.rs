//! A conversation's identity: what makes it itself, whatever file or position it is read from.
//!
//! A session id is a function of this identity (and of the session's start time), never of a
//! path or a record's position, so that the same conversation gets the same session from any
//! folder, a new file with an old name gets new sessions, and an append shifts nothing:
//!
//! - a source that names its conversations with ids that are unique beyond one file (a Claude
//!   Code `sessionId`, a ChatGPT conversation `id`) gives `FORMAT:ID`; a conversation the
//!   source spawned from another under the same id (a Claude Code subagent's sidechain) adds
//!   the digest of its first record;
//! - any other record (a Chat Completions line, a Batch API request, whose `custom_id` is
//!   unique only within its batch, the first line of a Responses or Anthropic chain, a
//!   ShareGPT row) is identified by the xxh3-128 digest of its bytes, with the occurrence
//!   number of identical records before it in the same file (`#2`, `#3`), so that duplicates
//!   stay separate sessions and nothing merges silently.

use std::collections::HashMap;

use super::digests::DigestTable;

use super::source_format::SourceFormat;

/// A record's own identity: the digest of its bytes, and how many identical records came
/// before it in its file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RecordId {
    /// xxh3-128 of the record's bytes as split (an oversized record: of the bytes kept).
    pub digest: u128,
    /// Identical records before this one in the same file (0 for the first).
    pub occurrence: u32,
}

impl RecordId {
    /// The identity of a record read on its own, outside any file (tests, `explain` of a
    /// record given alone): its first occurrence.
    pub fn of(bytes: &[u8]) -> RecordId {
        RecordId {
            digest: crate::model::hash::xxh3_128(bytes),
            occurrence: 0,
        }
    }

    /// `record:<digest>` for the first occurrence, `record:<digest>#n` for the n-th.
    pub fn identity(&self) -> String {
        use std::fmt::Write;
        // Sized for `record:`, 32 digits and `#n`: written in one allocation.
        let mut out = String::with_capacity(48);
        out.push_str("record:");
        push_hex128(&mut out, self.digest);
        if self.occurrence > 0 {
            let _ = write!(out, "#{}", self.occurrence + 1);
        }
        out
    }
}

/// `value` as 32 lowercase hex digits, as `format!("{value:032x}")` writes it: the digests of
/// records and rollouts, two a conversation. `fmt`'s `LowerHex` for a `u128` cost ~900
/// instructions a call, ~1 % of a dry run of small records.
pub fn hex128(value: u128) -> String {
    let mut out = String::with_capacity(32);
    push_hex128(&mut out, value);
    out
}

/// Appends [`hex128`] of `value` to `out`.
///
/// Two digits a byte of the big-endian bytes, appended as one `str`: pushed a `char` at a
/// time, with a `u128` shift a digit, it cost ~780 instructions a call (1.1 % of the
/// instructions of a `--format responses` run over small records).
pub fn push_hex128(out: &mut String, value: u128) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 32];
    for (pair, byte) in digits.chunks_exact_mut(2).zip(value.to_be_bytes()) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
    // Every digit is ASCII: the check cannot fail.
    out.push_str(std::str::from_utf8(&digits).unwrap_or_default());
}

/// Counts identical records within one file, in file order. Memory: ~20 bytes per distinct
/// record of the file being read ([`DigestTable`]), and an entry of a second map per record
/// that repeats; both freed at the file's end.
///
/// Most records are seen once: a set of their digests holds them, and only a digest seen
/// again gets a count. One `HashMap` of digest to count took 32 bytes a bucket (the `u128`
/// key aligns the entry to 16) and moved them all each time it doubled: ~8 MB of tables,
/// touched fresh, for a file of 64,000 records, a fifth of a dry run's page faults.
#[derive(Debug, Default)]
pub struct Occurrences {
    seen: DigestTable<()>,
    /// The digests seen more than once: the occurrence the next one is.
    repeated: HashMap<u128, u32, rustc_hash::FxBuildHasher>,
}

impl Occurrences {
    /// The identity of the next record of the file, whose bytes are `bytes`.
    pub fn next(&mut self, bytes: &[u8]) -> RecordId {
        let digest = crate::model::hash::xxh3_128(bytes);
        let occurrence = match self.seen.get_or_insert(digest, ()) {
            None => 0,
            Some(()) => {
                let next = self.repeated.entry(digest).or_insert(1);
                *next += 1;
                *next - 1
            }
        };
        RecordId { digest, occurrence }
    }
}

/// The identity of a conversation: its source's own id where the format has global ids
/// ([`SourceFormat::has_global_ids`]), otherwise its first record's. `spawned` is true for a conversation spawned from another
/// under the same source id (a subagent's sidechain).
pub fn conversation_identity(
    format: Option<SourceFormat>,
    source_id: Option<&str>,
    spawned: bool,
    first: &RecordId,
) -> String {
    match (format, source_id) {
        (Some(format), Some(id)) if !id.is_empty() && format.has_global_ids() => {
            if spawned {
                format!("{format}:{id}/{}", first.identity())
            } else {
                format!("{format}:{id}")
            }
        }
        (Some(_) | None, Some(_) | None) => first.identity(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hex writer writes what `format!("{:032x}")` writes, for the edges and for values
    /// with every nibble.
    #[test]
    fn hex128_is_fmts_lower_hex_padded_to_32_digits() {
        let mut value: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
        for probe in [0, 1, 0xf, 0x10, u128::MAX, u128::MAX - 1, 1 << 127, value] {
            assert_eq!(hex128(probe), format!("{probe:032x}"));
        }
        for _ in 0..1000 {
            value = value.wrapping_mul(0x2545_f491_4f6c_dd1d).rotate_left(17) ^ 0x9e37;
            assert_eq!(hex128(value), format!("{value:032x}"));
        }
        assert_eq!(
            RecordId {
                digest: 0xab,
                occurrence: 2
            }
            .identity(),
            format!("record:{:032x}#3", 0xab)
        );
    }

    #[test]
    fn identical_records_get_their_occurrence_and_others_do_not() {
        let mut seen = Occurrences::default();
        let a = seen.next(b"{\"messages\":[]}");
        let b = seen.next(b"{\"messages\":[1]}");
        let a2 = seen.next(b"{\"messages\":[]}");
        assert_eq!(a.occurrence, 0);
        assert_eq!(b.occurrence, 0);
        assert_eq!(a2.occurrence, 1);
        assert_eq!(a.digest, a2.digest);
        assert_ne!(a.identity(), a2.identity());
        assert!(a2.identity().ends_with("#2"), "{}", a2.identity());
        assert_eq!(a, RecordId::of(b"{\"messages\":[]}"));
        // Past the second, each repeat counts on, apart from another's repeats.
        let occurrences: Vec<u32> = [
            &b"a"[..],
            b"b",
            b"a",
            b"b",
            b"a",
            b"{\"messages\":[]}",
            b"a",
        ]
        .iter()
        .map(|bytes| seen.next(bytes).occurrence)
        .collect();
        assert_eq!(occurrences, [0, 0, 1, 1, 2, 2, 3]);
    }

    #[test]
    fn global_ids_name_the_conversation_and_others_fall_back_to_the_record() {
        let first = RecordId::of(b"line");
        let claude = Some(SourceFormat::named("claude-code").with_global_ids());
        let main = conversation_identity(claude, Some("s1"), false, &first);
        assert_eq!(main, "claude-code:s1");
        let side = conversation_identity(claude, Some("s1"), true, &first);
        assert_ne!(side, main);
        // A batch custom_id is unique only within its batch: the record names it.
        let batch = conversation_identity(
            Some(SourceFormat::named("chat")),
            Some("request-1"),
            false,
            &first,
        );
        assert_eq!(batch, first.identity());
        assert_eq!(
            conversation_identity(claude, None, false, &first),
            first.identity()
        );
    }
}
