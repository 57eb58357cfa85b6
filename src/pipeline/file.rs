//! One file read in memory through the reader thread's own loop ([`walk_file`]): split →
//! identify → route (each record to its format's grouping, [`FileRecords`]) → finish, with
//! hooks that take every event and list the works. [`process_bytes`] (the fuzz targets) and
//! [`read_file`] (`explain`, `review`) read a file through it.

use std::ops::ControlFlow;
use std::path::Path;

use super::reader::{walk_file, FileRecords, FileWalk, Halt, Records, Work};
use super::record::{process_work, read_work, Outcome, ReadConversation, WorkContext};
use crate::input::batch::BatchIndex;
use crate::input::format::ReadContext;
use crate::input::SourceFormat;
use crate::model::responses::Format;
use crate::rules::RuleSet;
use crate::source::{records_in, Damage, RecordEvent};

/// A file's record events walked as the reader walks a file ([`walk_file`]), in order: the
/// works its records make. Damage ends the file (the works before it stand) and comes back
/// with them; blank lines make none.
pub(super) fn group_file(
    events: impl IntoIterator<Item = RecordEvent>,
    from: Option<SourceFormat>,
) -> (Vec<Work>, Option<Damage>) {
    let mut grouped = Grouped::default();
    // A file read in memory is never stopped: its walk always ends in its finish.
    let _ = walk_file(
        events.into_iter().map(|event| (event, None)),
        FileRecords::new(0, from),
        &mut grouped,
    );
    (grouped.works, grouped.damage)
}

/// A file walked in memory: every record taken, nothing held back for memory, the works
/// listed up to the first damage.
#[derive(Default)]
struct Grouped {
    works: Vec<Work>,
    damage: Option<Damage>,
}

impl FileWalk for Grouped {
    fn work(&mut self, work: Option<Work>, _records: &FileRecords) -> ControlFlow<Halt> {
        match work {
            Some(Work::Damage(damage)) => {
                self.damage = Some(damage);
                ControlFlow::Break(Halt::End)
            }
            Some(work @ (Work::Records(_) | Work::FileEnd(_) | Work::Segment(..))) => {
                self.works.push(work);
                ControlFlow::Continue(())
            }
            Some(Work::Blank(_)) | None => ControlFlow::Continue(()),
        }
    }

    fn finish(&mut self, last: Option<Work>) -> ControlFlow<()> {
        self.works.extend(last);
        ControlFlow::Continue(())
    }
}

/// One file's decompressed `bytes` through every stage `convert` runs on a file, in memory:
/// split into records ([`records_in`], as [`crate::source::records`] splits a file), each
/// identified and grouped for its format as the reader thread does ([`FileRecords`]: `from`
/// forces the format as `--from` does, else the first record decides it), then converted as
/// the workers do ([`process_work`]). One outcome per record, in input order; blank lines
/// yield none. Nothing is written, nothing sampled; `path` names the file (a ChatGPT
/// export's or a dataset's images are looked up beside it) and `source_key` keys its session
/// ids. What the fuzz targets drive: these bytes as one file in format X.
pub fn process_bytes(
    bytes: Vec<u8>,
    path: &Path,
    source_key: &str,
    from: Option<SourceFormat>,
    rules: &RuleSet,
    batch: &BatchIndex,
    format: Format,
) -> Vec<Outcome> {
    let display: std::sync::Arc<str> = path.display().to_string().into();
    // The file's folder is its tree, as for a file named on the command line.
    let cache = crate::input::format::FileCache::default();
    let output = crate::output::for_format(format);
    let context = WorkContext {
        read: ReadContext {
            rules,
            path,
            key: source_key,
            root: path.parent(),
            follow: false,
            cache: &cache,
        },
        batch,
        output: &*output,
        sample: None,
        dry_run: false,
        baseline: false,
        naming: None,
    };
    // An in-memory stream cannot be damaged; were it, the records before it stand.
    let (works, _) = group_file(records_in(display, bytes), from);
    let mut outcomes = Vec::new();
    for work in works {
        match work {
            Work::Records(mut records) => outcomes.extend(process_work(&mut records, &context)),
            Work::Blank(_) | Work::Damage(_) | Work::FileEnd(_) | Work::Segment(..) => {}
        }
    }
    outcomes
}

/// One work of a file as [`read_file`] reads it: its records, what became of those the reader
/// refused or dropped, and the conversations it read (not converted).
pub(crate) struct WorkRead {
    pub work: Records,
    pub outcomes: Vec<Option<Outcome>>,
    pub conversations: Vec<ReadConversation>,
}

/// A file read as `convert` reads it, up to its conversations: split into records, grouped
/// for its format (`from` as `--from` does, else the first record decides) as the reader
/// thread groups them, each work through [`read_work`]. Nothing is converted or written.
/// Damage ends the file: the works before it stand, and the damage comes back with them.
/// Memory: the file's records and transcripts (what `explain` shows of one conversation).
pub(crate) fn read_file(
    file: &crate::source::SourceFile,
    from: Option<SourceFormat>,
    rules: &RuleSet,
    batch: &BatchIndex,
) -> (Vec<WorkRead>, Option<crate::source::Damage>) {
    let cache = crate::input::format::FileCache::default();
    let read_context = ReadContext {
        rules,
        path: &file.path,
        key: &file.key,
        root: file.path.parent(),
        follow: false,
        cache: &cache,
    };
    let (works, damage) = group_file(
        crate::source::records(file, crate::input::format::archive_lines()),
        from,
    );
    let reads = works
        .into_iter()
        .filter_map(|work| match work {
            Work::Records(work) => Some(work),
            Work::Blank(_) | Work::Damage(_) | Work::FileEnd(_) | Work::Segment(..) => None,
        })
        .map(|work| {
            let reader = crate::input::format::reader(work.format);
            let mut outcomes: Vec<Option<Outcome>> = work.records.iter().map(|_| None).collect();
            let conversations = read_work(reader, &work, &read_context, batch, &mut outcomes);
            WorkRead {
                work,
                outcomes,
                conversations,
            }
        })
        .collect();
    (reads, damage)
}
