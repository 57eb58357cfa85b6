//! The gate every converted session passes on the collector's thread, in input order, before
//! the writers place it: what a run does with a conversation it reads more than once (in one
//! run, or across runs), so that the newest version wins and none is lost.
//!
//! - The same session placed earlier in this run (the same conversation read twice): not
//!   placed again (a duplicate).
//! - A conversation with versions ([`crate::model::version`]: one named by its source's id,
//!   or a chain of records) against the version placed earlier in this run, else the one the
//!   manifest recorded: the same version goes on as usual; a newer one is placed (over this
//!   run's own, which is then counted as an older snapshot); an older one is not written; one
//!   that neither extends nor is extended by the other is, from the same file, the file's
//!   new content (across runs) or another conversation under the same source id (in one run:
//!   both kept, this one under a session of its own), and from another file a conflict: not
//!   written unless `--force` (which keeps a copy first).
//!
//! Memory: ~36 bytes a session placed in the run, and a version for each session with versions.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use super::reader::Work;
use super::record::{Converted, Outcome};
use super::PlannedFile;
use crate::model::digests::DigestTable;
use crate::model::version::{Standing, Version};
use crate::output::{Guard, Manifest, Placed};

/// The sessions placed so far in this run, by a hash of their path, with the digest placed:
/// a conversation read twice (one file under two names, a conversation in two exports) is
/// placed once, by the first in input order, so that a run's output does not depend on which
/// writer came first. Memory: ~36 bytes a session of the run ([`DigestTable`]: the digest
/// held as its 128 bits; as a `String` it was ~130 bytes a session, 8 MB of a run writing
/// 64,000; in a `HashMap`, 32 bytes a bucket, all moved into fresh memory at each doubling).
#[derive(Debug, Default)]
pub(super) struct Claims {
    placed: DigestTable<u128>,
    /// The digests that are not the manifest's 32 hex digits (none is written today), kept
    /// as text so that a duplicate records what was placed whatever it is.
    texts: HashMap<u128, String, rustc_hash::FxBuildHasher>,
}

/// The bits of a digest written as the manifest writes it (32 lowercase hex digits).
fn digest_bits(text: &str) -> Option<u128> {
    let canonical =
        text.len() == 32 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    canonical
        .then(|| u128::from_str_radix(text, 16).ok())
        .flatten()
}

impl Claims {
    /// Claims the session at `path` (its xxh3-128) for `digest`, unless an earlier one of the
    /// run did: then the digest placed.
    fn claim(&mut self, path: u128, digest: &str) -> Option<String> {
        if let Some(&bits) = self.placed.get(path) {
            return Some(crate::model::identity::hex128(bits));
        }
        if let Some(text) = self.texts.get(&path) {
            return Some(text.clone());
        }
        match digest_bits(digest) {
            Some(bits) => {
                self.placed.get_or_insert(path, bits);
            }
            None => {
                self.texts.insert(path, digest.to_string());
            }
        }
        None
    }

    /// The digest this run placed at `path`, if it placed one.
    fn placed(&self, path: u128) -> Option<String> {
        if let Some(text) = self.texts.get(&path) {
            return Some(text.clone());
        }
        self.placed
            .get(path)
            .map(|&bits| crate::model::identity::hex128(bits))
    }

    /// A newer version placed at `path` over this run's earlier one: its digest is held as
    /// text, which is looked up first.
    fn replace(&mut self, path: u128, digest: &str) {
        self.texts.insert(path, digest.to_string());
    }
}

/// A version placed in this run: which file placed it, and where its record is.
struct RunVersion {
    version: Version,
    file: usize,
    source: String,
    /// Where it is in the batch being admitted (its work, its outcome), while that batch is
    /// not placed yet: a newer version in the same batch takes its place instead of
    /// following it (the writers place a batch's sessions side by side).
    in_batch: Option<(usize, usize)>,
}

pub(super) struct Gate<'p> {
    claims: Claims,
    /// Versions placed in this run, by the path's xxh3-128.
    run: FxHashMap<u128, RunVersion>,
    /// Versions the manifest recorded, by path, with the file each came from.
    recorded: HashMap<String, (Version, String)>,
    files: &'p [PlannedFile],
    guard: &'p Guard,
    force: bool,
}

impl<'p> Gate<'p> {
    pub(super) fn new(
        files: &'p [PlannedFile],
        guard: &'p Guard,
        manifest: &Manifest,
        force: bool,
    ) -> Gate<'p> {
        let recorded = manifest
            .versions()
            .filter_map(|(path, record)| {
                Some((
                    path.to_string(),
                    (record.version.as_ref()?.model(), record.from.clone()),
                ))
            })
            .collect();
        Gate {
            claims: Claims::default(),
            run: FxHashMap::default(),
            recorded,
            files,
            guard,
            force,
        }
    }

    /// Decides, in input order, for each conversation of the batch, whether and how it is
    /// placed; one not to be placed gets its [`Placed`] here and no bytes.
    pub(super) fn admit(&mut self, batch: &[Work], outcomes: &mut [Vec<Outcome>]) {
        let mut placed_here = Vec::new();
        for (w, work) in batch.iter().enumerate() {
            let Work::Records(work) = work else {
                continue;
            };
            for o in 0..outcomes.get(w).map_or(0, Vec::len) {
                if matches!(outcomes[w][o], Outcome::Converted(_)) {
                    if let Some(key) = self.one(work.file, (w, o), outcomes) {
                        placed_here.push(key);
                    }
                }
            }
        }
        // Placed by the writers before the next batch comes.
        for key in placed_here {
            if let Some(run) = self.run.get_mut(&key) {
                run.in_batch = None;
            }
        }
    }

    /// Decides for the conversation at `at`; returns its path's key when it is to be placed
    /// with a version.
    fn one(
        &mut self,
        file: usize,
        at: (usize, usize),
        outcomes: &mut [Vec<Outcome>],
    ) -> Option<u128> {
        let Outcome::Converted(done) = &mut outcomes[at.0][at.1] else {
            return None;
        };
        // A session of its own for another conversation under one source id: once (a second
        // split of the same content would give the same path).
        for _ in 0..2 {
            let key = crate::model::hash::xxh3_128(done.path.as_bytes());
            let Some(placed) = self.claims.placed(key) else {
                break;
            };
            let prior = self.run.get(&key);
            let standing = match (&done.version, prior) {
                (Some(version), Some(prior)) => version.stands_to(&prior.version),
                (Some(_) | None, Some(_) | None) => Standing::Same,
            };
            match (standing, prior) {
                (Standing::Same, _) | (_, None) => {
                    not_placed(done, Placed::Duplicate, placed);
                    return None;
                }
                (Standing::Newer, Some(prior)) => {
                    let earlier = prior.source.clone();
                    let source = format!("{}:{}", done.source, done.line);
                    match prior.in_batch {
                        // Not placed yet: this one takes its place, the earlier is older.
                        Some((w, o)) => {
                            let digest = done.digest.clone();
                            if let Outcome::Converted(earlier) = &mut outcomes[w][o] {
                                not_placed(earlier, Placed::Older { newer: source }, digest);
                            }
                        }
                        // Placed already: this one replaces it, which is counted as older.
                        None => {
                            done.supersedes = Some(earlier);
                            done.placement.expect = Some(placed);
                        }
                    }
                    let Outcome::Converted(done) = &mut outcomes[at.0][at.1] else {
                        return None;
                    };
                    self.claims.replace(key, &done.digest);
                    self.remember(key, file, done, at);
                    return Some(key);
                }
                (Standing::Older, Some(prior)) => {
                    let newer = prior.source.clone();
                    not_placed(done, Placed::Older { newer }, placed);
                    return None;
                }
                (Standing::Unrelated, Some(prior)) if prior.file == file => {
                    done.split_from = Some(prior.source.clone());
                    done.split();
                }
                (Standing::Unrelated, Some(prior)) => {
                    let other = prior.source.clone();
                    not_placed(done, Placed::Conflict { other }, placed);
                    return None;
                }
            }
        }
        if let (Some(version), Some((recorded, from))) =
            (&done.version, self.recorded.get(&done.path))
        {
            let origin = self.files.get(file).map(|f| f.source.origin.as_str());
            let there = self
                .guard
                .recorded(&done.path)
                .unwrap_or_default()
                .to_string();
            match version.stands_to(recorded) {
                Standing::Same | Standing::Newer => {}
                Standing::Older => {
                    let newer = from.clone();
                    not_placed(done, Placed::Older { newer }, there);
                    return None;
                }
                // The file it came from holds other content now: the file's.
                Standing::Unrelated if origin == Some(from.as_str()) => {}
                Standing::Unrelated if self.force => done.placement.copy = true,
                Standing::Unrelated => {
                    let other = from.clone();
                    not_placed(done, Placed::Conflict { other }, there);
                    return None;
                }
            }
        }
        let key = crate::model::hash::xxh3_128(done.path.as_bytes());
        self.claims.claim(key, &done.digest);
        self.remember(key, file, done, at);
        done.version.is_some().then_some(key)
    }

    fn remember(&mut self, key: u128, file: usize, done: &Converted, at: (usize, usize)) {
        if let Some(version) = &done.version {
            self.run.insert(
                key,
                RunVersion {
                    version: version.version,
                    file,
                    source: format!("{}:{}", done.source, done.line),
                    in_batch: Some(at),
                },
            );
        }
    }
}

/// Marks a conversation not to be placed: what the run did instead, and the digest of what
/// is at its path (which the manifest keeps for it).
fn not_placed(done: &mut Converted, placed: Placed, there: String) {
    done.placed = Some(placed);
    done.reword(None, Some(there));
    done.bytes = Vec::new();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claimed_digest_is_given_back_as_it_was_placed() {
        let hex = "0123456789abcdef00000000000000ff";
        assert!(digest_bits(hex).is_some());
        let mut claims = Claims::default();
        let texts = [
            hex,
            "",
            "ABCDEF",
            "00ff",
            "not a digest",
            "0123456789ABCDEF00000000000000FF",
            "+123456789abcdef00000000000000ff",
            "0123456789abcdef00000000000000ff0",
        ];
        for (path, text) in texts.iter().enumerate() {
            assert_eq!(
                claims.claim(path as u128, text),
                None,
                "{text:?} is claimed first"
            );
        }
        assert_eq!(
            claims.placed.len(),
            1,
            "only the hex digest is held as bits"
        );
        for (path, text) in texts.iter().enumerate() {
            assert_eq!(claims.claim(path as u128, "other").as_deref(), Some(*text));
        }
    }
}
