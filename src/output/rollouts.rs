//! A file's rollouts as its manifest entry holds them: each rollout's path and the digest of
//! the bytes written, in the order they were recorded, written into the manifest as the JSON
//! list `[{"path":...,"digest":...},...]`.
//!
//! A run holds every entry of the home in memory (the manifest is written whole at its end),
//! so an entry is held compact: a path rollover names (`sessions/YYYY/MM/DD/rollout-TIME-UUID.jsonl`,
//! [`crate::convert::Conversation::relative_path`]) as its second and its UUID, and a digest
//! of 32 lowercase hex digits as its 16 bytes: 48 bytes a session. Two strings took ~180
//! bytes (14 MB of a run writing 64,000 sessions, a fifth of its peak). Any other path or
//! digest (a Responses bodies' file, a manifest edited by hand) is held as it is. A path is
//! held compact only when writing it back gives the same bytes, so the manifest reads and
//! writes exactly what it did.

use std::collections::HashSet;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::manifest::RolloutEntry;
use crate::model::time::{rollout_stem, rollout_stem_ms, ROLLOUT_STEM_LEN};

/// The rollouts of one input file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rollouts {
    slots: Vec<Slot>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    /// A path as rollover names a rollout, and a digest as rollover writes one.
    Made {
        seconds: i64,
        id: [u8; 16],
        digest: [u8; 16],
    },
    /// Any other path or digest, as it is.
    Other(Box<RolloutEntry>),
}

/// The length of a path rollover names: the stem, `-`, a UUID, `.jsonl`.
const MADE_LEN: usize = ROLLOUT_STEM_LEN + 1 + UUID_LEN + SUFFIX.len();
const UUID_LEN: usize = 36;
const SUFFIX: &str = ".jsonl";
/// Where a hyphenated UUID has its hyphens.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];
const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// A rollout's path as a key: equal keys, equal paths.
#[derive(Debug, PartialEq, Eq, Hash)]
enum Key<'a> {
    Made(i64, [u8; 16]),
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
            (Some((seconds, id)), Some(digest)) => Slot::Made {
                seconds,
                id,
                digest,
            },
            _ => Slot::Other(Box::new(RolloutEntry {
                path: path.to_string(),
                digest: digest.to_string(),
            })),
        }
    }

    fn key(&self) -> Key<'_> {
        match self {
            Slot::Made { seconds, id, .. } => Key::Made(*seconds, *id),
            Slot::Other(entry) => key(&entry.path),
        }
    }

    /// The path and digest as text.
    fn text(&self) -> (Text<'_, MADE_LEN>, Text<'_, 32>) {
        match self {
            Slot::Made {
                seconds,
                id,
                digest,
            } => (Text::Made(made_path(*seconds, id)), Text::Made(hex(digest))),
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
            Text::Made(bytes) => std::str::from_utf8(bytes).unwrap_or_default(),
            Text::Other(text) => text,
        }
    }
}

fn key(path: &str) -> Key<'_> {
    match made(path) {
        Some((seconds, id)) => Key::Made(seconds, id),
        None => Key::Other(path),
    }
}

/// The second and UUID of a path rollover names, when writing them back gives `path`.
fn made(path: &str) -> Option<(i64, [u8; 16])> {
    let bytes = path.as_bytes();
    if bytes.len() != MADE_LEN || !path.ends_with(SUFFIX) {
        return None;
    }
    let ms = rollout_stem_ms(&bytes[..ROLLOUT_STEM_LEN])?;
    if bytes[ROLLOUT_STEM_LEN] != b'-' {
        return None;
    }
    let id = uuid(&bytes[ROLLOUT_STEM_LEN + 1..ROLLOUT_STEM_LEN + 1 + UUID_LEN])?;
    Some((ms / 1000, id))
}

fn made_path(seconds: i64, id: &[u8; 16]) -> [u8; MADE_LEN] {
    let mut path = [0u8; MADE_LEN];
    path[..ROLLOUT_STEM_LEN].copy_from_slice(&rollout_stem(seconds * 1000));
    path[ROLLOUT_STEM_LEN] = b'-';
    let (uuid, suffix) = path[ROLLOUT_STEM_LEN + 1..].split_at_mut(UUID_LEN);
    let digits = hex(id);
    let mut next = digits.iter();
    for (at, out) in uuid.iter_mut().enumerate() {
        *out = if HYPHENS.contains(&at) {
            b'-'
        } else {
            next.next().copied().unwrap_or(b'0')
        };
    }
    suffix.copy_from_slice(SUFFIX.as_bytes());
    path
}

/// A UUID as lowercase hex with hyphens (how rollover writes one), as its 16 bytes.
fn uuid(text: &[u8]) -> Option<[u8; 16]> {
    if text.len() != UUID_LEN || HYPHENS.iter().any(|&at| text[at] != b'-') {
        return None;
    }
    let mut digits = [0u8; 32];
    let plain = text
        .iter()
        .enumerate()
        .filter(|(at, _)| !HYPHENS.contains(at));
    for (out, (_, &digit)) in digits.iter_mut().zip(plain) {
        *out = digit;
    }
    hex16(&digits)
}

/// 32 lowercase hex digits as 16 bytes; `None` for anything else.
fn hex16(text: &[u8]) -> Option<[u8; 16]> {
    let nibble = |digit: u8| match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    };
    if text.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

/// 16 bytes as 32 lowercase hex digits.
fn hex(bytes: &[u8; 16]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
    out
}

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

    /// The compact form is what bounds a run's memory: 48 bytes a session.
    #[test]
    fn a_session_rollover_named_takes_48_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 48);
        assert!(made(PATH).is_some());
        assert!(hex16(DIGEST.as_bytes()).is_some());
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
