//! A file's rollouts as its manifest entry holds them: each rollout's path and the digest of
//! the bytes written, in the order they were recorded, written into the manifest as the JSON
//! list `[{"path":...,"digest":...},...]`.
//!
//! A run holds every entry of the home in memory (the manifest is written whole at its end),
//! so an entry is held compact: a path rollover names (`sessions/YYYY/MM/DD/rollout-TIME-UUID.jsonl`,
//! [`crate::convert::Conversation::relative_path`]) as the 14 digits of its time and the 16
//! bytes of its UUID, and a digest of 32 lowercase hex digits as its 16 bytes: 40 bytes a
//! session. Two strings took ~180 bytes (~12 MB of a run writing 64,000 sessions). Any other
//! path or digest (a Responses bodies' file, a manifest edited by hand) is held as it is. A
//! path is held compact only when writing it back gives the same bytes, so the manifest reads
//! and writes exactly what it did.
//!
//! Reading and writing a path are a pass over a 90-byte template, no arithmetic on dates: the
//! collector, a serial stage, does both for every session (a first version that went through
//! the time in milliseconds cost it ~4,400 instructions a small record, 8,282 -> 12,727).

use std::collections::HashSet;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::manifest::RolloutEntry;

/// The rollouts of one input file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rollouts {
    slots: Vec<Slot>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    /// A path as rollover names a rollout, and a digest as rollover writes one.
    Made {
        time: [u8; 7],
        id: [u8; 16],
        digest: [u8; 16],
    },
    /// Any other path or digest, as it is.
    Other(Box<RolloutEntry>),
}

/// A path rollover names, with the places of its digits: the time's 14 (the folders repeat
/// the date's 8) and the UUID's 32 hex digits.
const TEMPLATE: &[u8; MADE_LEN] =
    b"sessions/0000/00/00/rollout-0000-00-00T00-00-00-00000000-0000-0000-0000-000000000000.jsonl";
const MADE_LEN: usize = 90;
/// Where the time's 14 digits are in the file name, in runs (`YYYY-MM-DDThh-mm-ss`), and
/// where each run starts among the digits.
const DATE_RUNS: [(usize, usize); 6] = [(28, 32), (33, 35), (36, 38), (39, 41), (42, 44), (45, 47)];
const TIME_RUNS: [usize; 6] = [0, 4, 6, 8, 10, 12];
/// Where the UUID's 32 hex digits are, in runs.
const UUID: [(usize, usize); 5] = [(48, 56), (57, 61), (62, 66), (67, 71), (72, 84)];
const DIGITS: &[u8; 16] = b"0123456789abcdef";
/// The value of each lowercase hex digit; 0xff for any other byte.
const NIBBLE: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut digit = 0;
    while digit < 16 {
        table[DIGITS[digit] as usize] = digit as u8;
        digit += 1;
    }
    table
};

/// A rollout's path as a key: equal keys, equal paths.
#[derive(Debug, PartialEq, Eq, Hash)]
enum Key<'a> {
    Made([u8; 7], [u8; 16]),
    Other(&'a str),
}

/// The paths of a [`Rollouts`], to ask whether it holds one.
pub struct Paths<'a> {
    keys: HashSet<Key<'a>>,
}

impl Paths<'_> {
    pub fn contains(&self, path: &str) -> bool {
        self.keys.contains(&key(path))
    }
}

impl Rollouts {
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Records the rollout at `path`, whose bytes have the digest `digest`.
    pub fn push(&mut self, path: &str, digest: &str) {
        self.slots.push(Slot::new(path, digest));
    }

    /// Calls `each` with every rollout's path and digest, in order.
    pub fn each(&self, mut each: impl FnMut(&str, &str)) {
        for slot in &self.slots {
            let (path, digest) = slot.text();
            each(path.as_str(), digest.as_str());
        }
    }

    /// Every rollout, in order, as owned entries.
    pub fn entries(&self) -> impl Iterator<Item = RolloutEntry> + '_ {
        self.slots.iter().map(|slot| {
            let (path, digest) = slot.text();
            RolloutEntry {
                path: path.as_str().to_string(),
                digest: digest.as_str().to_string(),
            }
        })
    }

    /// The key of the path of the rollout at `at` ([`path_key`]); 0 past the end.
    pub fn key_at(&self, at: usize) -> u128 {
        self.slots.get(at).map_or(0, |slot| slot.key().hash())
    }

    /// The rollout at `at`, as an owned entry (empty past the end).
    pub fn entry_at(&self, at: usize) -> RolloutEntry {
        let (path, digest) = self.slots.get(at).map_or_else(
            || (String::new(), String::new()),
            |slot| {
                let (path, digest) = slot.text();
                (path.as_str().to_string(), digest.as_str().to_string())
            },
        );
        RolloutEntry { path, digest }
    }

    /// Sets the digest of every rollout at `path`.
    pub fn set_digest(&mut self, path: &str, digest: &str) {
        let wanted = key(path);
        let replaced: Vec<usize> = (self.slots.iter().enumerate())
            .filter(|(_, slot)| slot.key() == wanted)
            .map(|(at, _)| at)
            .collect();
        for at in replaced {
            self.slots[at] = Slot::new(path, digest);
        }
    }

    /// The paths held, for [`Paths::contains`].
    pub fn paths(&self) -> Paths<'_> {
        Paths {
            keys: self.slots.iter().map(Slot::key).collect(),
        }
    }
}

impl Slot {
    fn new(path: &str, digest: &str) -> Slot {
        match (made(path), hex16(digest.as_bytes())) {
            (Some((time, id)), Some(digest)) => Slot::Made { time, id, digest },
            _ => Slot::Other(Box::new(RolloutEntry {
                path: path.to_string(),
                digest: digest.to_string(),
            })),
        }
    }

    fn key(&self) -> Key<'_> {
        match self {
            Slot::Made { time, id, .. } => Key::Made(*time, *id),
            Slot::Other(entry) => key(&entry.path),
        }
    }

    /// The path and digest as text.
    fn text(&self) -> (Text<'_, MADE_LEN>, Text<'_, 32>) {
        match self {
            Slot::Made { time, id, digest } => {
                (Text::Made(made_path(time, id)), Text::Made(hex(digest)))
            }
            Slot::Other(entry) => (
                Text::Other(entry.path.as_str()),
                Text::Other(entry.digest.as_str()),
            ),
        }
    }
}

/// A path or digest written out: in a buffer of its own, or borrowed as held.
enum Text<'a, const N: usize> {
    Made([u8; N]),
    Other(&'a str),
}

impl<const N: usize> Text<'_, N> {
    fn as_str(&self) -> &str {
        match self {
            // Written from ASCII digits and names: the check cannot fail.
            Text::Made(bytes) => simdutf8::basic::from_utf8(bytes).unwrap_or_default(),
            Text::Other(text) => text,
        }
    }
}

/// A path's key for look-ups (the manifest's index of the files that list each session):
/// equal paths, equal keys. xxh3-128 of the path as held: a path rollover names by its time
/// and UUID after a byte no text starts with, any other by its text.
pub(crate) fn path_key(path: &str) -> u128 {
    key(path).hash()
}

impl Key<'_> {
    fn hash(&self) -> u128 {
        match self {
            Key::Made(time, id) => {
                let mut held = [0xffu8; 24];
                held[1..8].copy_from_slice(time);
                held[8..].copy_from_slice(id);
                crate::model::hash::xxh3_128(&held)
            }
            Key::Other(path) => crate::model::hash::xxh3_128(path.as_bytes()),
        }
    }
}

fn key(path: &str) -> Key<'_> {
    match made(path) {
        Some((time, id)) => Key::Made(time, id),
        None => Key::Other(path),
    }
}

/// The time's digits (two a byte) and the UUID of a path rollover names, when writing them
/// back gives `path`.
fn made(path: &str) -> Option<([u8; 7], [u8; 16])> {
    let bytes: &[u8; MADE_LEN] = path.as_bytes().try_into().ok()?;
    let mut digits = [0u8; 14];
    for (to, (start, end)) in DATE_RUNS.into_iter().enumerate() {
        let at = TIME_RUNS[to];
        digits[at..at + end - start].copy_from_slice(&bytes[start..end]);
    }
    let mut time = [0u8; 7];
    let mut bad = 0;
    for (pair, two) in time.iter_mut().zip(digits.chunks_exact(2)) {
        let (high, low) = (two[0].wrapping_sub(b'0'), two[1].wrapping_sub(b'0'));
        bad |= if high > 9 || low > 9 { 0xff } else { 0 };
        *pair = high << 4 | low;
    }
    let mut hex = [0u8; 32];
    let mut to = 0;
    for (start, end) in UUID {
        hex[to..to + end - start].copy_from_slice(&bytes[start..end]);
        to += end - start;
    }
    let id = hex16(&hex)?;
    if bad != 0 {
        return None;
    }
    (made_path(&time, &id) == *bytes).then_some((time, id))
}

/// The path rollover names for a time's digits and a UUID: [`TEMPLATE`] with them in place.
fn made_path(time: &[u8; 7], id: &[u8; 16]) -> [u8; MADE_LEN] {
    let mut path = *TEMPLATE;
    let mut digits = [0u8; 14];
    for (two, pair) in digits.chunks_exact_mut(2).zip(time) {
        two[0] = b'0' + (pair >> 4);
        two[1] = b'0' + (pair & 0xf);
    }
    for (from, (start, end)) in DATE_RUNS.into_iter().enumerate() {
        let at = TIME_RUNS[from];
        path[start..end].copy_from_slice(&digits[at..at + end - start]);
    }
    // The folders: the date's year, month and day again.
    path[9..13].copy_from_slice(&digits[0..4]);
    path[14..16].copy_from_slice(&digits[4..6]);
    path[17..19].copy_from_slice(&digits[6..8]);
    let hex = hex(id);
    let mut from = 0;
    for (start, end) in UUID {
        path[start..end].copy_from_slice(&hex[from..from + end - start]);
        from += end - start;
    }
    path
}

/// 32 lowercase hex digits as 16 bytes; `None` for anything else.
fn hex16(text: &[u8]) -> Option<[u8; 16]> {
    let text: &[u8; 32] = text.try_into().ok()?;
    let mut out = [0u8; 16];
    let mut bad = 0;
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        let (high, low) = (NIBBLE[usize::from(pair[0])], NIBBLE[usize::from(pair[1])]);
        bad |= high | low;
        *byte = high << 4 | low;
    }
    (bad <= 0xf).then_some(out)
}

/// 16 bytes as 32 lowercase hex digits.
fn hex(bytes: &[u8; 16]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&PAIRS[usize::from(*byte)]);
    }
    out
}

/// Each byte's two lowercase hex digits.
const PAIRS: [[u8; 2]; 256] = {
    let mut table = [[0u8; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = [DIGITS[byte >> 4], DIGITS[byte & 0xf]];
        byte += 1;
    }
    table
};

/// One rollout as the manifest writes it: the fields of [`RolloutEntry`], borrowed.
#[derive(Serialize)]
struct Written<'a> {
    path: &'a str,
    digest: &'a str,
}

impl Serialize for Slot {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (path, digest) = self.text();
        Written {
            path: path.as_str(),
            digest: digest.as_str(),
        }
        .serialize(serializer)
    }
}

impl Serialize for Rollouts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(&self.slots)
    }
}

impl<'de> Deserialize<'de> for Rollouts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Rollouts;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of rollouts")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Rollouts, A::Error> {
                let mut rollouts = Rollouts::default();
                // Read one at a time: never a second list of every entry as strings.
                while let Some(entry) = seq.next_element::<RolloutEntry>()? {
                    rollouts.push(&entry.path, &entry.digest);
                }
                Ok(rollouts)
            }
        }
        deserializer.deserialize_seq(Entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str =
        "sessions/2024/10/01/rollout-2024-10-01T12-01-40-019247f5-20a0-71e9-8ed7-10c4010d6de1.jsonl";
    const DIGEST: &str = "ac332d535967e7c60984c6f0d7ea8b2c";

    /// What the manifest held before: a list of entries of two strings.
    fn as_list(entries: &[(&str, &str)]) -> Vec<RolloutEntry> {
        entries
            .iter()
            .map(|(path, digest)| RolloutEntry {
                path: path.to_string(),
                digest: digest.to_string(),
            })
            .collect()
    }

    /// Paths and digests near the compact form, each held as it is and written back as it was.
    #[test]
    fn every_path_and_digest_reads_and_writes_as_a_list_of_strings() {
        let upper = PATH.replace("019247f5", "019247F5");
        let braced = PATH.replace("019247f5-20a0", "019247f520a0-");
        let zst = format!("{PATH}.zst");
        let other_day = PATH.replace("10/01/rollout", "10/02/rollout");
        let body = "bodies/2025/chat.responses.jsonl";
        let unicode = "sessions/\u{e9}t\u{e9}/\"quoted\"\\.jsonl";
        let entries: Vec<(&str, &str)> = vec![
            (PATH, DIGEST),
            (&upper, DIGEST),
            (&braced, DIGEST),
            (&zst, DIGEST),
            (&other_day, DIGEST),
            (body, DIGEST),
            (unicode, "not hex"),
            (PATH, "AC332D535967E7C60984C6F0D7EA8B2C"),
            (PATH, "ac332d535967e7c60984c6f0d7ea8b2"),
            (PATH, ""),
        ];
        let mut rollouts = Rollouts::default();
        for (path, digest) in &entries {
            rollouts.push(path, digest);
        }
        let list = as_list(&entries);
        let written = serde_json::to_string(&rollouts).expect("write");
        assert_eq!(written, serde_json::to_string(&list).expect("write"));
        let read: Rollouts = serde_json::from_str(&written).expect("read");
        assert_eq!(read, rollouts);
        assert_eq!(read.entries().collect::<Vec<_>>(), list);
        let mut seen = Vec::new();
        read.each(|path, digest| seen.push((path.to_string(), digest.to_string())));
        let expected: Vec<(String, String)> = entries
            .iter()
            .map(|(p, d)| (p.to_string(), d.to_string()))
            .collect();
        assert_eq!(seen, expected);
        assert_eq!(read.len(), entries.len());
        // Only the first entry's path and digest were both as rollover writes them.
        let held: Vec<bool> = read
            .slots
            .iter()
            .map(|slot| matches!(slot, Slot::Made { .. }))
            .collect();
        assert_eq!(held.iter().filter(|&&made| made).count(), 1);
        assert!(held[0]);
    }

    /// The compact form is what bounds a run's memory: 40 bytes a session.
    #[test]
    fn a_session_rollover_named_takes_40_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 40);
        assert!(made(PATH).is_some());
        assert!(hex16(DIGEST.as_bytes()).is_some());
    }

    /// The index of listers finds a session by the key of its path, however the path is held.
    #[test]
    fn a_paths_key_is_the_same_held_compact_or_as_text() {
        let other = PATH.replace("71e9", "71ea");
        let upper = PATH.replace("019247f5", "019247F5");
        let mut rollouts = Rollouts::default();
        for path in [PATH, other.as_str(), upper.as_str(), "bodies/chat.jsonl"] {
            rollouts.push(path, DIGEST);
        }
        for at in 0..rollouts.len() {
            let entry = rollouts.entry_at(at);
            assert_eq!(rollouts.key_at(at), path_key(&entry.path), "{}", entry.path);
        }
        let keys: HashSet<u128> = (0..rollouts.len()).map(|at| rollouts.key_at(at)).collect();
        assert_eq!(keys.len(), 4);
        assert_eq!(
            rollouts.entry_at(9),
            RolloutEntry {
                path: String::new(),
                digest: String::new()
            }
        );
    }

    #[test]
    fn paths_and_digests_are_found_and_replaced_by_path() {
        let other = PATH.replace("71e9", "71ea");
        let body = "bodies/chat.responses.jsonl";
        let mut rollouts = Rollouts::default();
        rollouts.push(PATH, DIGEST);
        rollouts.push(body, DIGEST);
        rollouts.push(PATH, "0000");
        let paths = rollouts.paths();
        assert!(paths.contains(PATH));
        assert!(paths.contains(body));
        assert!(!paths.contains(&other));
        assert!(!paths.contains("bodies/other.jsonl"));
        let fresh = "ffffffffffffffffffffffffffffffff";
        rollouts.set_digest(PATH, fresh);
        rollouts.set_digest(body, "by hand");
        let digests: Vec<String> = rollouts.entries().map(|e| e.digest).collect();
        assert_eq!(digests, vec![fresh, "by hand", fresh]);
        assert_eq!(
            rollouts.entries().map(|e| e.path).collect::<Vec<_>>(),
            vec![PATH, body, PATH]
        );
    }
}
