//! Shards: which inputs one of N processes converts, so that a job engine (Slurm job arrays,
//! Kubernetes Indexed Jobs, anything that hands out an index) can spread an archive across
//! machines, each writing into the one shared Codex home.
//!
//! In: the shard (`K/N`), each input file's key and size. Out: what share of each file the
//! shard reads ([`Share`]) and, for a split file, which of its byte ranges it owns. Nothing
//! here fails: the command checks the numbers when it parses them.
//!
//! An input file belongs to the shard `xxh3(key) % N`: its key (the path relative to the
//! INPUT argument's parent), never its absolute path, so every machine agrees whatever the
//! mount point. A file larger than the split size is cut into byte ranges of that size (by
//! offset in the decompressed stream); a range belongs to the shard `xxh3(key, range) % N` and
//! owns the records that *start* inside it. Every shard reading a split file reads it from the
//! start (records keep their ordinals, so their ids are those of an unsharded run) and converts
//! only its ranges' records: the reading is repeated, the conversion is not. Its file-level
//! counts (files, bytes on disk, files done) belong to the owner of range 0, so that the shards'
//! summaries add up to an unsharded run's.

use std::fmt;

use super::discover::SourceFile;

/// Files larger than this are split into ranges of this size (`--split-bytes`): 256 MiB.
pub(crate) const DEFAULT_SPLIT_BYTES: u64 = 256 << 20;

/// Shard `index` of `count` (`--shard 2/4`: index 2, count 4; indexes start at 0, as Slurm's
/// `--array=0-3` and Kubernetes' completion indexes do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// The folder of this shard's state and reports: `0002-of-0004`.
    pub fn folder_name(&self) -> String {
        format!("{:04}-of-{:04}", self.index, self.count)
    }

    /// Reads a folder name written by [`Shard::folder_name`].
    pub fn parse_folder_name(name: &str) -> Option<Shard> {
        let (index, count) = name.split_once("-of-")?;
        if index.len() < 4 || count.len() < 4 {
            return None;
        }
        let shard = Shard {
            index: index.parse().ok()?,
            count: count.parse().ok()?,
        };
        (shard.index < shard.count).then_some(shard)
    }
}

/// How much of one input file a shard reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// Another shard's file (or, split, only other shards' ranges).
    None,
    /// The whole file is this shard's.
    Whole,
    /// A split file: this shard converts the records of its own ranges.
    Ranges,
}

/// A shard and how it cuts large files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardPlan {
    pub shard: Shard,
    /// Files larger than this are split into ranges of this many bytes.
    pub split_bytes: u64,
    /// Whether files may be split at all (not for outputs written per input file).
    pub split: bool,
}

fn bucket(bytes: &[u8], count: u32) -> u32 {
    (crate::model::hash::xxh3_64(bytes) % u64::from(count.max(1))) as u32
}

impl ShardPlan {
    /// The shard of a whole file.
    pub fn file_owner(&self, key: &str) -> u32 {
        bucket(key.as_bytes(), self.shard.count)
    }

    /// The shard of range `range` of a split file.
    pub fn range_owner(&self, key: &str, range: u64) -> u32 {
        bucket(format!("{key}\n{range}").as_bytes(), self.shard.count)
    }

    /// The range a record starting at decompressed byte `offset` is in.
    pub fn range_of(&self, offset: u64) -> u64 {
        offset / self.split_bytes.max(1)
    }

    pub fn is_split(&self, file: &SourceFile) -> bool {
        self.split && file.size > self.split_bytes
    }

    /// Whether this shard converts the records of range `range` of the file keyed `key`.
    pub fn owns_range(&self, key: &str, range: u64) -> bool {
        self.range_owner(key, range) == self.shard.index
    }

    /// What this shard reads of `file`. `compressed`: the file's ranges cannot be counted from
    /// its size on disk, so a split compressed file is always read (its owned ranges found on
    /// the way); an uncompressed one only when one of its ranges is this shard's.
    pub fn share(&self, file: &SourceFile, compressed: bool) -> Share {
        if !self.is_split(file) {
            return match self.file_owner(&file.key) == self.shard.index {
                true => Share::Whole,
                false => Share::None,
            };
        }
        if compressed || self.last_owned_range(file).is_some() {
            Share::Ranges
        } else {
            Share::None
        }
    }

    /// Whether this shard counts `file` in the file-level numbers (files, bytes on disk, files
    /// done): the owner of a whole file, or of range 0 of a split one.
    pub fn counts_file(&self, file: &SourceFile) -> bool {
        if self.is_split(file) {
            self.owns_range(&file.key, 0)
        } else {
            self.file_owner(&file.key) == self.shard.index
        }
    }

    /// The last range of an uncompressed split file that this shard owns (its records all
    /// start before the file's size, so there are `ceil(size / split)` ranges).
    pub fn last_owned_range(&self, file: &SourceFile) -> Option<u64> {
        let ranges = file.size.div_ceil(self.split_bytes.max(1));
        (0..ranges)
            .rev()
            .find(|range| self.owns_range(&file.key, *range))
    }
}

/// Where the shard came from, as the run says on stderr and records in its summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSource {
    pub shard: Shard,
    /// `--shard`, `SLURM_ARRAY_TASK_ID` or `JOB_COMPLETION_INDEX`.
    pub index_from: &'static str,
    /// `--shard`, `--shards`, `SLURM_ARRAY_TASK_COUNT`.
    pub count_from: &'static str,
}

pub(crate) const SLURM_INDEX: &str = "SLURM_ARRAY_TASK_ID";
pub(crate) const SLURM_COUNT: &str = "SLURM_ARRAY_TASK_COUNT";
pub(crate) const KUBERNETES_INDEX: &str = "JOB_COMPLETION_INDEX";

fn check(index: u32, count: u32, from: &str) -> Result<Shard, String> {
    if count == 0 {
        return Err(format!("{from}: the shard count must be at least 1"));
    }
    if index >= count {
        return Err(format!(
            "{from}: shard {index} is not below the shard count {count} (shards are numbered 0 to {})",
            count - 1
        ));
    }
    Ok(Shard { index, count })
}

/// The shard of this run: `--shard K/N`, or the engine's index from the environment
/// (`env(NAME)`): Slurm's `SLURM_ARRAY_TASK_ID` with `SLURM_ARRAY_TASK_COUNT` or `--shards N`,
/// Kubernetes' `JOB_COMPLETION_INDEX` with `--shards N`. `None`: an unsharded run.
pub(crate) fn resolve(
    flag: Option<Shard>,
    shards: Option<u32>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<ShardSource>, String> {
    if let Some(shard) = flag {
        if let Some(count) = shards.filter(|n| *n != shard.count) {
            return Err(format!(
                "--shard {shard} and --shards {count} disagree on the shard count: give one"
            ));
        }
        return Ok(Some(ShardSource {
            shard,
            index_from: "--shard",
            count_from: "--shard",
        }));
    }
    let number = |name: &str| -> Result<Option<u32>, String> {
        match env(name) {
            None => Ok(None),
            Some(text) => text
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| format!("{name}={text:?} is not a shard number (0 or more)")),
        }
    };
    let slurm = number(SLURM_INDEX)?;
    let kubernetes = number(KUBERNETES_INDEX)?;
    let (index, index_from, count, count_from) = match (slurm, kubernetes) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "both {SLURM_INDEX} and {KUBERNETES_INDEX} are set: pass --shard K/N to say which shard this is"
            ))
        }
        (Some(index), None) => match (shards, number(SLURM_COUNT)?) {
            (Some(count), _) => (index, SLURM_INDEX, count, "--shards"),
            (None, Some(count)) => (index, SLURM_INDEX, count, SLURM_COUNT),
            (None, None) => {
                return Err(format!(
                    "{SLURM_INDEX} is set but not {SLURM_COUNT}: pass --shards N (the size of the job array)"
                ))
            }
        },
        (None, Some(index)) => match shards {
            Some(count) => (index, KUBERNETES_INDEX, count, "--shards"),
            None => {
                return Err(format!(
                    "{KUBERNETES_INDEX} is set: pass --shards N (the Job's completions) to shard the run"
                ))
            }
        },
        (None, None) => match shards {
            Some(count) => {
                return Err(format!(
                    "--shards {count} needs this run's index: pass --shard K/{count}, or run it as a Slurm array task ({SLURM_INDEX}) or in a Kubernetes Indexed Job ({KUBERNETES_INDEX})"
                ))
            }
            None => return Ok(None),
        },
    };
    let from = format!("{index_from}={index} with {count_from} {count}");
    let shard = check(index, count, &from)?;
    Ok(Some(ShardSource {
        shard,
        index_from,
        count_from,
    }))
}

/// The fingerprint of a walk's inputs: every file's key, size and modification time, in the
/// walk's order (hex). Each shard of a run walks every input, so the shards of one run agree
/// on it; shards run over other inputs do not, and `report merge` refuses to join them.
pub(crate) fn walk_fingerprint(walk: &[SourceFile]) -> String {
    let mut hash = crate::model::hash::Xxh3::new();
    for file in walk {
        hash.update(&(file.key.len() as u64).to_le_bytes());
        hash.update(file.key.as_bytes());
        hash.update(&file.size.to_le_bytes());
        hash.update(&file.mtime_ns.to_le_bytes());
    }
    format!("{:032x}", hash.digest128())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn file(key: &str, size: u64) -> SourceFile {
        SourceFile {
            path: key.into(),
            display: Arc::from(key),
            root: None,
            key: key.to_string(),
            origin: format!("/{key}"),
            size,
            mtime_ns: 0,
            ctime_ns: 0,
            ino: 0,
        }
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn every_file_and_range_belongs_to_exactly_one_shard() {
        for count in [1, 2, 3, 7] {
            let plans: Vec<ShardPlan> = (0..count)
                .map(|index| ShardPlan {
                    shard: Shard { index, count },
                    split_bytes: 100,
                    split: true,
                })
                .collect();
            for n in 0..50 {
                let small = file(&format!("a/{n}.jsonl"), 10);
                let owners = plans
                    .iter()
                    .filter(|p| p.share(&small, false) == Share::Whole);
                assert_eq!(owners.count(), 1, "{count} {n}");
                let big = file(&format!("b/{n}.jsonl"), 1000);
                let counters = plans.iter().filter(|p| p.counts_file(&big));
                assert_eq!(counters.count(), 1);
                for range in 0..10 {
                    let owners = plans.iter().filter(|p| p.owns_range(&big.key, range));
                    assert_eq!(owners.count(), 1);
                }
            }
        }
    }

    #[test]
    fn shards_resolve_from_flags_and_engines() {
        let none = env(&[]);
        assert_eq!(resolve(None, None, &none), Ok(None));
        assert!(resolve(None, Some(4), &none).is_err());
        let slurm = env(&[(SLURM_INDEX, "3"), (SLURM_COUNT, "4")]);
        let got = resolve(None, None, &slurm).map(|s| s.map(|s| (s.shard, s.count_from)));
        assert_eq!(got, Ok(Some((Shard { index: 3, count: 4 }, SLURM_COUNT))));
        // A failed task submitted again alone (--array=3) sees a count of 1: --shards wins.
        let alone = env(&[(SLURM_INDEX, "3"), (SLURM_COUNT, "1")]);
        let got = resolve(None, Some(4), &alone).map(|s| s.map(|s| s.shard));
        assert_eq!(got, Ok(Some(Shard { index: 3, count: 4 })));
        assert!(resolve(None, None, &alone).is_err());
        let k8s = env(&[(KUBERNETES_INDEX, "1")]);
        assert!(resolve(None, None, &k8s).is_err());
        let got = resolve(None, Some(2), &k8s).map(|s| s.map(|s| (s.shard, s.index_from)));
        assert_eq!(
            got,
            Ok(Some((Shard { index: 1, count: 2 }, KUBERNETES_INDEX)))
        );
        assert!(resolve(None, Some(2), env(&[(KUBERNETES_INDEX, "x")])).is_err());
        let flag = Some(Shard { index: 0, count: 2 });
        assert!(resolve(flag, Some(3), &none).is_err());
        assert_eq!(
            Shard::parse_folder_name(&Shard { index: 2, count: 7 }.folder_name()),
            Some(Shard { index: 2, count: 7 })
        );
    }
}
