//! A table keyed by 128-bit digests (xxh3-128 of a record or of a session's path), for the
//! tables a run grows by one entry a record: the records seen in a file
//! ([`super::identity::Occurrences`]) and the sessions placed in a run (the pipeline's claims).
//!
//! Each entry is stored once, in order, in chunks of [`CHUNK`] that never move, and the hash
//! table holds only its place (4 bytes a bucket). A `HashMap<u128, u128>` holds the entries
//! themselves in its buckets (32 bytes each, half of them empty after the table doubles) and
//! moves them all into fresh memory each time it doubles: for 64,000 sessions it touched
//! ~8 MB of fresh pages, where this touches ~3 MB. A fresh page is what a run of small records
//! pays most for memory: ~40 us each on a virtual machine whose host reclaims idle memory
//! ([samples/BENCHMARKS.md](../../samples/BENCHMARKS.md) has the figures).
//!
//! Keys are digests, uniform in every bit: their low 64 bits are the hash.
//!
//! Memory: 16 bytes and the value's size an entry, in chunks, and ~4-8 bytes of table.

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;
use std::collections::HashMap;

/// Entries a chunk holds.
const CHUNK: usize = 4096;

/// Digests and their values, in the order they came.
#[derive(Debug)]
pub(crate) struct DigestTable<V> {
    /// Each entry's place in `chunks`.
    places: HashTable<u32>,
    chunks: Vec<Vec<(u128, V)>>,
    len: usize,
    /// Entries past the last place a `u32` can number (a table of 4 billion entries, 64 GB
    /// of them): held as a map does.
    overflow: HashMap<u128, V, FxBuildHasher>,
    /// The most entries given a place (`u32::MAX`; less in tests).
    limit: usize,
}

impl<V> Default for DigestTable<V> {
    fn default() -> DigestTable<V> {
        DigestTable {
            places: HashTable::new(),
            chunks: Vec::new(),
            len: 0,
            overflow: HashMap::default(),
            limit: u32::MAX as usize,
        }
    }
}

fn hash(key: u128) -> u64 {
    key as u64
}

impl<V> DigestTable<V> {
    /// The entry at `place`.
    fn at(&self, place: u32) -> &(u128, V) {
        let place = place as usize;
        &self.chunks[place / CHUNK][place % CHUNK]
    }

    /// The value of `key`, if it was inserted.
    pub(crate) fn get(&self, key: u128) -> Option<&V> {
        match self
            .places
            .find(hash(key), |&place| self.at(place).0 == key)
        {
            Some(&place) => Some(&self.at(place).1),
            None => self.overflow.get(&key),
        }
    }

    /// The value of `key`, if it was inserted; otherwise inserts `value` for it and returns
    /// `None`.
    pub(crate) fn get_or_insert(&mut self, key: u128, value: V) -> Option<&V> {
        if self.get(key).is_some() {
            return self.get(key);
        }
        match u32::try_from(self.len) {
            Ok(place) if self.len < self.limit => {
                if self.chunks.last().is_none_or(|chunk| chunk.len() == CHUNK) {
                    self.chunks.push(Vec::with_capacity(CHUNK));
                }
                if let Some(chunk) = self.chunks.last_mut() {
                    chunk.push((key, value));
                }
                let chunks = &self.chunks;
                self.places.insert_unique(hash(key), place, |&place| {
                    let place = place as usize;
                    hash(chunks[place / CHUNK][place % CHUNK].0)
                });
                self.len += 1;
            }
            Ok(_) | Err(_) => {
                self.overflow.insert(key, value);
            }
        }
        None
    }

    #[cfg(test)]
    /// How many keys it holds.
    pub(crate) fn len(&self) -> usize {
        self.len + self.overflow.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys spread as digests are, and a seventh that share their low 64 bits (the hash), to
    /// collide on purpose.
    fn keys(n: u64) -> Vec<u128> {
        (0..n)
            .map(|i| {
                let digest = crate::model::hash::xxh3_128(&i.to_le_bytes());
                if i % 7 == 0 {
                    (u128::from(i) << 64) | 42
                } else {
                    digest
                }
            })
            .collect()
    }

    /// What a `HashMap` says, for every key, across chunks and into the overflow.
    #[test]
    fn it_answers_as_a_map_does() {
        for limit in [u32::MAX as usize, 5_000, 3] {
            let mut table = DigestTable::<u64> {
                limit,
                ..DigestTable::default()
            };
            let mut map = HashMap::new();
            let keys = keys(3 * CHUNK as u64 + 17);
            for (i, &key) in keys.iter().enumerate() {
                // Every key twice: the first insert wins.
                for value in [i as u64, u64::MAX] {
                    let before = map.get(&key).copied();
                    assert_eq!(table.get_or_insert(key, value).copied(), before);
                    map.entry(key).or_insert(value);
                }
            }
            assert_eq!(table.len(), map.len(), "limit {limit}");
            for (key, value) in &map {
                assert_eq!(table.get(*key), Some(value), "limit {limit}");
            }
            assert_eq!(table.get(0xDEAD_BEEF), None);
            assert_eq!(table.overflow.len(), map.len().saturating_sub(limit));
        }
    }
}
