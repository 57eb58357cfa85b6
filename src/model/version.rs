//! Versions of one conversation: the same conversation (one identity) read more than once, in
//! one run or across runs (dated exports, a backup beside the live file, a log that grew).
//! The newest wins, and no run writes an older version over a newer one.
//!
//! A version is its source's own time (a ChatGPT `update_time`, a session's last line, a log's
//! latest response), its message count, and the digest of its messages in order, chained
//! (`content`): the chain at `n` is the digest of the first `n` messages, so that a version in
//! hand tells whether it extends a recorded one from that one's count and digest alone.

/// A version as the manifest records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Version {
    /// The source's own time of this version (ms since the Unix epoch), when it says.
    pub time_ms: Option<i64>,
    pub messages: u64,
    /// The chain digest of its messages ([`InHand::chain`] at `messages`).
    pub content: u128,
}

/// A version being placed: with the chain digest at every message count, to tell whether it
/// extends a recorded version. Held from conversion to placement only.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InHand {
    pub version: Version,
    /// `chain[i]`: the digest of the first `i + 1` messages.
    pub chain: Vec<u128>,
}

/// How a version in hand stands to one placed before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The same messages.
    Same,
    /// Newer: it extends the other's messages, or it is the same file's later content.
    Newer,
    /// Older: the other extends it, or its source's time is earlier.
    Older,
    /// Neither extends the other, and the source's time does not settle it.
    Unrelated,
}

impl InHand {
    /// The chain digest of the first `n` messages (`0` for none).
    pub fn at(&self, n: u64) -> Option<u128> {
        match n {
            0 => Some(0),
            n => self.chain.get(usize::try_from(n - 1).ok()?).copied(),
        }
    }

    /// Whether this version's messages begin with all of `other`'s.
    pub fn extends(&self, other: &Version) -> bool {
        other.messages <= self.version.messages && self.at(other.messages) == Some(other.content)
    }

    /// How this version stands to `other`, placed before. Content decides first: the same
    /// messages are the same version, and one that extends the other is newer. Otherwise the
    /// source's own times decide when both have one and they differ (an export made later
    /// that edited a message is newer; a backup older); a version with fewer messages whose
    /// time says nothing is older (it cannot be told from a prefix of the other, whose chain
    /// is not in hand).
    pub fn stands_to(&self, other: &Version) -> Standing {
        let own = &self.version;
        if own.messages == other.messages && own.content == other.content {
            return Standing::Same;
        }
        if self.extends(other) {
            return Standing::Newer;
        }
        match (own.time_ms, other.time_ms) {
            (Some(own_time), Some(other_time)) if own_time < other_time => Standing::Older,
            (Some(own_time), Some(other_time)) if own_time > other_time => Standing::Unrelated,
            (Some(_) | None, Some(_) | None) if own.messages < other.messages => Standing::Older,
            (Some(_) | None, Some(_) | None) => Standing::Unrelated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_hand(time: Option<i64>, chain: &[u128]) -> InHand {
        InHand {
            version: Version {
                time_ms: time,
                messages: chain.len() as u64,
                content: chain.last().copied().unwrap_or(0),
            },
            chain: chain.to_vec(),
        }
    }

    #[test]
    fn content_decides_before_time() {
        let old = in_hand(Some(10), &[1, 2]);
        let longer = in_hand(Some(15), &[1, 2, 3]);
        assert_eq!(longer.stands_to(&old.version), Standing::Newer);
        assert_eq!(old.stands_to(&longer.version), Standing::Older);
        // An extension is newer whatever its time says.
        let stamped_earlier = in_hand(Some(5), &[1, 2, 3]);
        assert_eq!(stamped_earlier.stands_to(&old.version), Standing::Newer);
        assert_eq!(old.stands_to(&old.version), Standing::Same);
        // An edited message: neither extends; the later time is newer, but not by content.
        let edited = in_hand(Some(20), &[1, 9, 10]);
        assert_eq!(edited.stands_to(&old.version), Standing::Unrelated);
        assert_eq!(old.stands_to(&edited.version), Standing::Older);
        // No times: fewer messages are older, as many or more are unrelated.
        let a = in_hand(None, &[4]);
        let b = in_hand(None, &[5, 6]);
        assert_eq!(a.stands_to(&b.version), Standing::Older);
        assert_eq!(b.stands_to(&a.version), Standing::Unrelated);
        assert_eq!(in_hand(None, &[]).at(0), Some(0));
    }
}
