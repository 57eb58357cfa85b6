//! The one loop of a file's events ([`walk_file`]): each record identified, then routed to
//! the work its format's reader takes, then the file finished. The reader thread and a file
//! read in memory (`process_bytes`, `read_file`) both walk a file through it; what they do
//! differently is the caller's [`FileWalk`]: which events it takes (a shard's ranges, the stop
//! flag), what a record may hold (`--memory`) and where the works go (batches, or a list).

use std::ops::ControlFlow;

use crate::source::{RawRecord, RecordEvent};

use super::{FileRecords, Work};

/// Why a walk ends before the file's last event.
pub(in crate::pipeline) enum Halt {
    /// Read no further: what the file holds is still handed over ([`FileRecords::finish`]).
    End,
    /// The run stops: the file is left unfinished.
    Stop,
}

/// What the walk does with an event.
pub(in crate::pipeline) enum Step {
    /// Routes a record, hands a blank line or a damage on.
    Take,
    /// Leaves it; a record still counts in its file's ordinals.
    Skip,
}

/// The caller's part of [`walk_file`]. Generic, so that the reader's hooks are compiled into
/// its loop: a walk costs no call per record that the loop written out would not.
pub(in crate::pipeline) trait FileWalk {
    /// Whether the walk takes `event`, its record identified already.
    fn take(&mut self, _event: &RecordEvent, _records: &FileRecords) -> ControlFlow<Halt, Step> {
        ControlFlow::Continue(Step::Take)
    }

    /// Whether `record`, taken, is routed: what it holds of the run's memory is the caller's
    /// to grant. A record skipped here was refused, and the caller said why.
    fn admit(
        &mut self,
        _record: &RawRecord,
        _records: &mut FileRecords,
    ) -> ControlFlow<Halt, Step> {
        ControlFlow::Continue(Step::Take)
    }

    /// The work an event taken made, in file order: a routed record's (`None` when its file
    /// holds it), a blank line's or a damage's.
    fn work(&mut self, work: Option<Work>, records: &FileRecords) -> ControlFlow<Halt>;

    /// The file's last work ([`FileRecords::finish`]: the records it held, or why it was
    /// refused), once the walk ended other than by [`Halt::Stop`]. `Break`: the file was not
    /// whole after all, and the run stops.
    fn finish(&mut self, last: Option<Work>) -> ControlFlow<()>;
}

/// Walks a file's `events` (each with its ordinal when it was given one, as a Batch API
/// results file replayed) into works through `walker`: each record identified by `records`,
/// then, if the walker takes and admits it, routed; then the file finished. `Break`: the walk
/// was stopped ([`Halt::Stop`], or by [`FileWalk::finish`]), the file left unfinished.
pub(in crate::pipeline) fn walk_file(
    events: impl Iterator<Item = (RecordEvent, Option<u64>)>,
    mut records: FileRecords,
    walker: &mut impl FileWalk,
) -> ControlFlow<()> {
    let mut ordinal = 0u64;
    for (mut event, given) in events {
        // Every record is identified, those a shard leaves to another too, so that each
        // record's identity is the one an unsharded run gives it.
        if let RecordEvent::Record(record) = &mut event {
            records.identify(record);
        }
        match walker.take(&event, &records) {
            ControlFlow::Continue(Step::Take) => {}
            ControlFlow::Continue(Step::Skip) => {
                if let RecordEvent::Record(_) = event {
                    ordinal += 1;
                }
                continue;
            }
            ControlFlow::Break(Halt::End) => break,
            ControlFlow::Break(Halt::Stop) => return ControlFlow::Break(()),
        }
        let work = match event {
            RecordEvent::Record(record) => {
                match walker.admit(&record, &mut records) {
                    ControlFlow::Continue(Step::Take) => {}
                    ControlFlow::Continue(Step::Skip) => {
                        ordinal += 1;
                        continue;
                    }
                    ControlFlow::Break(Halt::End) => break,
                    ControlFlow::Break(Halt::Stop) => return ControlFlow::Break(()),
                }
                let work = records.route(record, given.unwrap_or(ordinal));
                ordinal += 1;
                work
            }
            RecordEvent::Blank(n) => Some(Work::Blank(n)),
            RecordEvent::Damage(damage) => Some(Work::Damage(damage)),
        };
        match walker.work(work, &records) {
            ControlFlow::Continue(()) => {}
            ControlFlow::Break(Halt::End) => break,
            ControlFlow::Break(Halt::Stop) => return ControlFlow::Break(()),
        }
    }
    walker.finish(records.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::format::SourceFormat;
    use crate::model::identity::RecordId;
    use crate::pipeline::reader::tests::raw;

    /// Takes the events `keep` says, in turn, and lists the works.
    struct Taking {
        keep: Vec<bool>,
        seen: usize,
        works: Vec<Work>,
    }

    impl FileWalk for Taking {
        fn take(
            &mut self,
            _event: &RecordEvent,
            _records: &FileRecords,
        ) -> ControlFlow<Halt, Step> {
            self.seen += 1;
            match self.keep[self.seen - 1] {
                true => ControlFlow::Continue(Step::Take),
                false => ControlFlow::Continue(Step::Skip),
            }
        }

        fn work(&mut self, work: Option<Work>, _records: &FileRecords) -> ControlFlow<Halt> {
            self.works.extend(work);
            ControlFlow::Continue(())
        }

        fn finish(&mut self, last: Option<Work>) -> ControlFlow<()> {
            self.works.extend(last);
            ControlFlow::Continue(())
        }
    }

    /// Each record's ordinal and identity, of the works a walk taking `keep` made.
    fn walked(lines: &[&str], keep: &[bool]) -> Vec<(u64, RecordId)> {
        let events = lines.iter().map(|line| match line.is_empty() {
            true => (RecordEvent::Blank(1), None),
            false => (RecordEvent::Record(raw(line.as_bytes(), None)), None),
        });
        let mut taking = Taking {
            keep: keep.to_vec(),
            seen: 0,
            works: Vec::new(),
        };
        let records = FileRecords::new(0, Some(SourceFormat::CHAT));
        assert!(walk_file(events, records, &mut taking).is_continue());
        let records = taking.works.iter().filter_map(|work| match work {
            Work::Records(records) => Some(records.records.iter()),
            Work::Blank(_) | Work::Damage(_) | Work::FileEnd(_) | Work::Segment(..) => None,
        });
        records.flatten().map(|(r, o)| (*o, r.id)).collect()
    }

    /// A record another shard reads is still identified and counted: the records this walk
    /// takes keep the ordinals and identities a walk of the whole file gives them.
    #[test]
    fn a_record_skipped_keeps_its_place_in_the_ordinals_and_the_identities() {
        let same = r#"{"messages":[{"role":"user","content":"same"}]}"#;
        let other = r#"{"messages":[{"role":"user","content":"other"}]}"#;
        let lines = [same, other, "", same, same, other];
        let whole = walked(&lines, &[true; 6]);
        assert_eq!(whole.len(), 5);
        assert_eq!(
            whole
                .iter()
                .map(|(o, id)| (*o, id.occurrence))
                .collect::<Vec<_>>(),
            [(0, 0), (1, 0), (2, 1), (3, 2), (4, 1)]
        );
        let part = walked(&lines, &[false, true, true, false, true, false]);
        assert_eq!(part, [whole[1], whole[3]]);
    }
}
