//! Sharding selection: which files, and which ranges of split files, a shard reads, and which
//! Batch API results it counts.

use super::Portion;
use crate::model::Location;
use crate::source::{open, Compression, ShardPlan, Share, SourceFile};

/// The files this run reads, and what part of each: every file whole in an unsharded run;
/// a shard keeps its own files and the split files one of whose ranges it owns.
pub(super) fn select(walk: &[SourceFile], shard: Option<&ShardPlan>) -> Vec<Portion> {
    let Some(shard) = shard else {
        return (0..walk.len())
            .map(|index| Portion {
                index,
                ranges: false,
                counted: true,
            })
            .collect();
    };
    let mut portions = Vec::new();
    for (index, file) in walk.iter().enumerate() {
        // Only a split file is opened here, to see whether its size counts its ranges: a zip,
        // which fails to open without a reader's hook, is not plain text either way.
        let compressed = shard.is_split(file)
            && open(&file.path, None).map_or(true, |o| o.compression != Compression::None);
        let share = shard.share(file, compressed);
        if share != Share::None {
            portions.push(Portion {
                index,
                ranges: share == Share::Ranges,
                counted: shard.counts_file(file),
            });
        }
    }
    portions
}

/// Whether this run counts the Batch API result at `location` of `file`: every result in an
/// unsharded run; in a shard, those of its own files, and of its own ranges of a split file.
pub(super) fn owns_result(
    shard: Option<&ShardPlan>,
    file: &SourceFile,
    location: &Location,
) -> bool {
    match shard {
        None => true,
        Some(plan) if plan.is_split(file) => {
            plan.owns_range(&file.key, plan.range_of(location.byte_offset))
        }
        Some(plan) => plan.file_owner(&file.key) == plan.shard.index,
    }
}
