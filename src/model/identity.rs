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
//!   ShareGPT row) is identified by the digest of its JSON value ([`Canonical`]: key order,
//!   whitespace, escapes and number spelling do not count, so a file written again by another
//!   tool keeps its sessions), with the occurrence number of identical records before it in
//!   the same file (`#2`, `#3`), so that duplicates stay separate sessions and nothing merges
//!   silently. A home written when records were identified by their bytes keeps those
//!   sessions' ids: [`RecordId::legacy_identity`] and the manifest's aliases.

use std::collections::HashMap;

use super::digests::DigestTable;

use super::source_format::SourceFormat;

/// A record's own identity: the digest of its JSON value, and how many identical records
/// came before it in its file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RecordId {
    /// xxh3-128 of the record's bytes as split (an oversized record: of the bytes kept):
    /// what counts its occurrences, and what identified it in a home of scheme 2.
    pub digest: u128,
    /// Identical records before this one in the same file (0 for the first).
    pub occurrence: u32,
    /// The digest of its JSON value ([`Canonical`]), once parsed; 0 when it is not JSON.
    pub value: u128,
}

impl RecordId {
    /// The identity of a record read on its own, outside any file (tests, `explain` of a
    /// record given alone): its first occurrence.
    pub fn of(bytes: &[u8]) -> RecordId {
        RecordId {
            digest: crate::model::hash::xxh3_128(bytes),
            occurrence: 0,
            value: 0,
        }
    }

    /// `record:<digest>` for the first occurrence, `record:<digest>#n` for the n-th: the
    /// digest of the record's value (of its bytes when it is not JSON).
    pub fn identity(&self) -> String {
        let digest = if self.value != 0 {
            self.value
        } else {
            self.digest
        };
        Self::named(digest, self.occurrence)
    }

    /// The identity scheme 2 gave the record: by the digest of its bytes.
    pub fn legacy_identity(&self) -> String {
        Self::named(self.digest, self.occurrence)
    }

    fn named(digest: u128, occurrence: u32) -> String {
        use std::fmt::Write;
        // Sized for `record:`, 32 digits and `#n`: written in one allocation.
        let mut out = String::with_capacity(48);
        out.push_str("record:");
        push_hex128(&mut out, digest);
        if occurrence > 0 {
            let _ = write!(out, "#{}", occurrence + 1);
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
/// again gets a count: a map of digest to count for every record costs 32 bytes a bucket and
/// a copy of all of them at each doubling (`samples/BENCHMARKS.md` has the page faults).
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
        RecordId {
            digest,
            occurrence,
            value: 0,
        }
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
    identity_by(format, source_id, spawned, &first.identity())
}

/// [`conversation_identity`] as scheme 2 made it (a record by the digest of its bytes).
pub fn legacy_conversation_identity(
    format: Option<SourceFormat>,
    source_id: Option<&str>,
    spawned: bool,
    first: &RecordId,
) -> String {
    identity_by(format, source_id, spawned, &first.legacy_identity())
}

fn identity_by(
    format: Option<SourceFormat>,
    source_id: Option<&str>,
    spawned: bool,
    record: &str,
) -> String {
    match (format, source_id) {
        (Some(format), Some(id)) if !id.is_empty() && format.has_global_ids() => {
            if spawned {
                format!("{format}:{id}/{record}")
            } else {
                format!("{format}:{id}")
            }
        }
        (Some(_) | None, Some(_) | None) => record.to_string(),
    }
}

/// The identity of a conversation that shares its source id with another, unrelated one of
/// the same input (two conversations under one id in one export): the id and its own
/// messages' digest, so that both are kept.
pub fn variant_identity(identity: &str, content: u128) -> String {
    let mut out = String::with_capacity(identity.len() + 42);
    out.push_str(identity);
    out.push_str("/content:");
    push_hex128(&mut out, content);
    out
}

/// The canonical form of a JSON value, as the bytes its digest is taken of: objects' members
/// in the order of their keys' bytes (a later duplicate key wins, as in a `Value`), strings
/// as their decoded bytes with their length, numbers by value (`1`, `1.0` and `1e0` alike),
/// no whitespace. Fed one event at a time by a reader of the value (a tape or a `Value`),
/// without recursion. An object, when it closes, is hashed with its members in order and
/// stands in its parent as that digest: each byte is hashed once, by its innermost object,
/// so the time is linear at any depth. Memory: the value's size, in a buffer kept per thread.
#[derive(Debug, Default)]
pub struct Canonical {
    out: Vec<u8>,
    /// Open containers: whether each is an object, and where its members start (in `out`
    /// and in `members`).
    open: Vec<(bool, usize, usize)>,
    /// The members of open objects: where each starts in `out`, and its key's span.
    members: Vec<(usize, usize, usize)>,
    /// The closing object's members: (start, end, key start, key end) in `out`.
    spans: Vec<(usize, usize, usize, usize)>,
    scratch: Vec<u8>,
}

impl Canonical {
    fn clear(&mut self) {
        self.out.clear();
        self.open.clear();
        self.members.clear();
    }

    fn bytes(&mut self, tag: u8, bytes: &[u8]) {
        self.out.push(tag);
        self.out
            .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        self.out.extend_from_slice(bytes);
    }

    pub fn string(&mut self, text: &str) {
        self.bytes(b's', text.as_bytes());
    }

    pub fn key(&mut self, key: &str) {
        let start = self.out.len();
        self.bytes(b'k', key.as_bytes());
        self.members.push((start, start + 9, start + 9 + key.len()));
    }

    pub fn null(&mut self) {
        self.out.push(b'n');
    }

    pub fn bool(&mut self, value: bool) {
        self.out.push(if value { b't' } else { b'f' });
    }

    pub fn int(&mut self, value: i128) {
        self.out.push(b'i');
        self.out.extend_from_slice(&value.to_le_bytes());
    }

    pub fn float(&mut self, value: f64) {
        // An integral float is the integer: `1.0` is `1`.
        if value.is_finite() && value.fract() == 0.0 && value.abs() < 1.7e38 {
            return self.int(value as i128);
        }
        self.out.push(b'd');
        self.out.extend_from_slice(&value.to_bits().to_le_bytes());
    }

    pub fn begin(&mut self, object: bool) {
        self.out.push(if object { b'{' } else { b'[' });
        self.open.push((object, self.out.len(), self.members.len()));
    }

    pub fn end(&mut self) {
        let Some((object, start, first)) = self.open.pop() else {
            return;
        };
        if !object {
            self.out.push(b']');
            return;
        }
        let Canonical {
            out,
            members,
            spans,
            scratch,
            ..
        } = self;
        let end = out.len();
        spans.clear();
        spans.extend(
            members[first..]
                .iter()
                .enumerate()
                .map(|(i, &(at, key_start, key_end))| {
                    let next = members.get(first + i + 1).map_or(end, |m| m.0);
                    (at, next, key_start, key_end)
                }),
        );
        members.truncate(first);
        let key = |span: &(usize, usize, usize, usize)| &out[span.2..span.3];
        // Members already in order, each key once (most objects a writer sorted or kept in
        // one order): hashed where they are; others put in order in `scratch` first.
        let in_order = spans.windows(2).all(|w| key(&w[0]) < key(&w[1]));
        let digest = if in_order {
            crate::model::hash::xxh3_128(&out[start..end])
        } else {
            // Stable: of equal keys, the later stays last, and is the one kept.
            spans.sort_by(|a, b| key(a).cmp(key(b)));
            scratch.clear();
            for (i, span) in spans.iter().enumerate() {
                let duplicate = spans.get(i + 1).is_some_and(|n| key(n) == key(span));
                if !duplicate {
                    scratch.extend_from_slice(&out[span.0..span.1]);
                }
            }
            crate::model::hash::xxh3_128(scratch)
        };
        // `start` is just past the object's `{`: the object becomes `o` and its digest.
        out.truncate(start - 1);
        out.push(b'o');
        out.extend_from_slice(&digest.to_le_bytes());
    }

    /// The digest of the value fed since the last one.
    pub fn digest(&mut self) -> u128 {
        while !self.open.is_empty() {
            self.end();
        }
        let digest = crate::model::hash::xxh3_128(&self.out);
        self.clear();
        digest
    }
}

thread_local! {
    static CANONICAL: std::cell::RefCell<Canonical> = std::cell::RefCell::new(Canonical::default());
}

/// Feeds `feed` into this thread's canonical buffer and returns the digest. The buffer is
/// given back when a huge value grew it past 16 MiB.
fn with_canonical(feed: impl FnOnce(&mut Canonical)) -> u128 {
    CANONICAL.with(|cell| {
        let Ok(mut canonical) = cell.try_borrow_mut() else {
            let mut own = Canonical::default();
            feed(&mut own);
            return own.digest();
        };
        canonical.clear();
        feed(&mut canonical);
        let digest = canonical.digest();
        if canonical.out.capacity() > 16 << 20 {
            *canonical = Canonical::default();
        }
        digest
    })
}

/// The canonical digest of a `serde_json::Value`, walked with an explicit stack.
pub fn value_digest(value: &serde_json::Value) -> u128 {
    use serde_json::Value;
    enum Open<'a> {
        Object(serde_json::map::Iter<'a>),
        Array(std::slice::Iter<'a, Value>),
    }
    with_canonical(|out| {
        let mut stack: Vec<Open<'_>> = Vec::new();
        let mut next = Some(value);
        loop {
            if let Some(value) = next.take() {
                match value {
                    Value::Null => out.null(),
                    Value::Bool(b) => out.bool(*b),
                    Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                        (Some(i), _, _) => out.int(i128::from(i)),
                        (None, Some(u), _) => out.int(i128::from(u)),
                        (None, None, Some(f)) => out.float(f),
                        (None, None, None) => out.null(),
                    },
                    Value::String(text) => out.string(text),
                    Value::Array(items) => {
                        out.begin(false);
                        stack.push(Open::Array(items.iter()));
                    }
                    Value::Object(map) => {
                        out.begin(true);
                        stack.push(Open::Object(map.iter()));
                    }
                }
            }
            let Some(top) = stack.last_mut() else {
                break;
            };
            match top {
                Open::Object(members) => match members.next() {
                    Some((key, value)) => {
                        out.key(key);
                        next = Some(value);
                    }
                    None => {
                        out.end();
                        stack.pop();
                    }
                },
                Open::Array(items) => match items.next() {
                    Some(value) => next = Some(value),
                    None => {
                        out.end();
                        stack.pop();
                    }
                },
            }
        }
    })
}

/// The canonical digest of a value on simd-json's tape (the same digest as [`value_digest`]
/// of the `Value` the tape reads as), in one pass over its nodes.
pub fn tape_digest(nodes: &[simd_json::Node<'_>]) -> u128 {
    use simd_json::{Node, StaticNode};
    with_canonical(|out| {
        // Open containers: items left, whether the next node is an object's key, and whether
        // it is an object.
        let mut open: Vec<(usize, bool, bool)> = Vec::new();
        for node in nodes {
            if let Some((_, key @ true, _)) = open.last_mut() {
                if let Node::String(text) = node {
                    out.key(text);
                    *key = false;
                    continue;
                }
            }
            let container = match node {
                Node::String(text) => {
                    out.string(text);
                    None
                }
                Node::Static(StaticNode::Null) => {
                    out.null();
                    None
                }
                Node::Static(StaticNode::Bool(b)) => {
                    out.bool(*b);
                    None
                }
                Node::Static(StaticNode::I64(i)) => {
                    out.int(i128::from(*i));
                    None
                }
                Node::Static(StaticNode::U64(u)) => {
                    out.int(i128::from(*u));
                    None
                }
                Node::Static(StaticNode::F64(f)) => {
                    out.float(*f);
                    None
                }
                Node::Object { len, .. } => Some((true, *len)),
                Node::Array { len, .. } => Some((false, *len)),
            };
            let mut done = match container {
                Some((object, len)) => {
                    out.begin(object);
                    if len > 0 {
                        open.push((len, object, object));
                        false
                    } else {
                        out.end();
                        true
                    }
                }
                None => true,
            };
            // A value done: its container has one item less, and closes after its last.
            while done {
                let Some((left, key, object)) = open.last_mut() else {
                    break;
                };
                *left -= 1;
                *key = *object;
                if *left > 0 {
                    break;
                }
                out.end();
                open.pop();
                done = true;
            }
        }
    })
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
                occurrence: 2,
                value: 0,
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

    fn digest_of(text: &str) -> u128 {
        value_digest(&serde_json::from_str(text).expect("JSON"))
    }

    fn tape_of(text: &str) -> u128 {
        let mut bytes = text.as_bytes().to_vec();
        let tape = simd_json::to_tape(&mut bytes).expect("tape");
        tape_digest(&tape.0)
    }

    /// Objects nested 200,000 deep digest without recursion, and each level's members are
    /// put in order: the same value spelled with its keys swapped at every level has the
    /// same digest; a changed leaf deep down changes it.
    #[test]
    fn a_deeply_nested_value_digests_in_order_at_every_level() {
        let digest = |swapped: bool, leaf: &str| {
            with_canonical(|out| {
                for _ in 0..200_000 {
                    out.begin(true);
                    if swapped {
                        out.key("z");
                        out.null();
                        out.key("a");
                    } else {
                        out.key("a");
                    }
                    out.begin(false);
                    out.string(leaf);
                    out.end();
                    if !swapped {
                        out.key("z");
                        out.null();
                    }
                    out.key("deeper");
                }
                out.null();
            })
        };
        assert_eq!(digest(false, "x"), digest(true, "x"));
        assert_ne!(digest(false, "x"), digest(false, "y"));
    }

    /// A record written again by another tool (keys reordered, whitespace, escapes, numbers
    /// spelt otherwise) has the same identity; a change of any value does not. The tape and
    /// the `Value` of one text give one digest.
    #[test]
    fn a_value_is_identified_whatever_its_spelling() {
        let compact = r#"{"messages":[{"role":"user","content":"hé"}],"n":1,"t":0.5,"x":null}"#;
        let spellings = [
            compact,
            "{\n  \"x\": null,\n  \"t\": 5e-1,\n  \"n\": 1.0,\n  \"messages\": [ { \"content\": \"h\\u00e9\", \"role\": \"user\" } ]\n}",
            r#"{"n":1,"messages":[{"content":"h\u00E9","role":"user"}],"t":0.50,"x":null}"#,
        ];
        let expected = digest_of(compact);
        for text in spellings {
            assert_eq!(digest_of(text), expected, "{text}");
            assert_eq!(tape_of(text), expected, "{text}");
        }
        for changed in [
            r#"{"messages":[{"role":"user","content":"he"}],"n":1,"t":0.5,"x":null}"#,
            r#"{"messages":[{"role":"user","content":"hé"}],"n":2,"t":0.5,"x":null}"#,
            r#"{"messages":[{"role":"user","content":"hé"}],"n":1,"t":0.5}"#,
            r#"{"messages":[{"role":"user","content":"hé"}],"n":"1","t":0.5,"x":null}"#,
            r#"{"messages":[{"content":"hé"},{"role":"user"}],"n":1,"t":0.5,"x":null}"#,
        ] {
            assert_ne!(digest_of(changed), expected, "{changed}");
            assert_ne!(tape_of(changed), expected, "{changed}");
        }
        // A later duplicate key wins, as in a `Value`.
        assert_eq!(tape_of(r#"{"a":1,"a":2}"#), digest_of(r#"{"a":2}"#));
        // Nesting deeper than any stack of ours is walked without recursion.
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        let mut canonical = Canonical::default();
        for _ in 0..100_000 {
            canonical.begin(false);
        }
        canonical.int(1);
        assert_ne!(canonical.digest(), 0);
        assert_eq!(deep.len(), 200_001);
        // Empty containers and scalars at the top.
        assert_ne!(digest_of("[]"), digest_of("{}"));
        assert_eq!(tape_of("[[],{}]"), digest_of("[[],{}]"));
        assert_eq!(tape_of("\"x\""), digest_of("\"x\""));
    }
}
