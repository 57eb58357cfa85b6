//! A shard's ranges of a split file: which of its events the shard keeps ([`Ranges`]).

use crate::source::{Compression, RecordEvent, ShardPlan, SourceFile};

/// Which events of a split file the shard keeps.
pub(super) struct Ranges {
    pub(super) plan: ShardPlan,
    pub(super) key: String,
    /// The range of the last record read: a blank line after it goes with it.
    last: u64,
    /// The range whose segment is open.
    pub(super) open: Option<u64>,
    /// An uncompressed file is read up to the end of the shard's last range only.
    end: Option<u64>,
}

pub(super) enum Take {
    /// Another shard's.
    Skip,
    /// Beyond this shard's last range: stop reading the file.
    Past,
    /// This shard's, in a range whose segment is open.
    Keep,
    /// This shard's, the first event of this range.
    Enter(u64),
}

impl Ranges {
    pub(super) fn new(plan: ShardPlan, file: &SourceFile, compression: Compression) -> Ranges {
        let end = match compression {
            Compression::None => plan.last_owned_range(file),
            Compression::Zstd | Compression::Gzip | Compression::Zip => None,
        };
        Ranges {
            plan,
            key: file.key.clone(),
            last: 0,
            open: None,
            end,
        }
    }

    pub(super) fn take(&mut self, event: &RecordEvent) -> Take {
        let range = match event {
            RecordEvent::Record(record) => {
                self.last = self.plan.range_of(record.location.byte_offset);
                self.last
            }
            RecordEvent::Blank(_) => self.last,
            RecordEvent::Damage(damage) => self.plan.range_of(damage.location.byte_offset),
        };
        if self.end.is_some_and(|end| range > end) {
            return Take::Past;
        }
        if !self.plan.owns_range(&self.key, range) {
            return Take::Skip;
        }
        if self.open == Some(range) {
            return Take::Keep;
        }
        self.open = Some(range);
        Take::Enter(range)
    }
}
