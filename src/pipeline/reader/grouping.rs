//! One file's records on their way to works: each record identified (its digest and occurrence
//! among the file's records), the file's format decided ([`detect`], or `--from`), and each
//! record routed to the work its format's reader takes ([`FileRecords`]).

use crate::input::format::{self, Granularity, Group, SourceFormat};
use crate::model::identity::Occurrences;
use crate::model::Location;
use crate::pipeline::budget::{OverBudget, LARGE_RECORD};
use crate::source::{Damage, RawRecord};

use super::{Records, Work};

/// One file's records on their way to the workers, as the reader sends them: each record's
/// identity (its digest and occurrence among the file's records), the file's format (`--from`,
/// else detected at its first record), and each record as the work its format's reader takes:
/// a record of a format read record by record as its own [`Records`], and the records of a
/// format whose conversations span the file held for one [`Records`] at the file's end.
/// [`super::walk_file`] walks every file through it, for the reader and for a file read in
/// memory alike.
pub(in crate::pipeline) struct FileRecords {
    file: usize,
    /// Forced by `--from`, or decided at the file's first record.
    format: Option<SourceFormat>,
    occurrences: Occurrences,
    /// The records held for a format read whole, with their ordinals.
    whole: Vec<(RawRecord, u64)>,
    /// The records of the conversations of a file that interleaves them
    /// ([`format::FormatReader::group`]), keyed by the ordinal of each one's first record,
    /// with whether it is complete; and the first ordinal of each one still open. A complete
    /// conversation is handed over once every conversation that began before it is: the
    /// reports keep the file's order.
    open: std::collections::BTreeMap<u64, (bool, Vec<(RawRecord, u64)>)>,
    open_keys: std::collections::HashMap<String, u64>,
    /// The bytes of those records; past `max_whole` the file is refused (`refused`: where
    /// its first record was) and its records dropped as they come.
    whole_bytes: u64,
    max_whole: u64,
    refused: Option<Location>,
    /// The file was refused because it needs more than `--memory`.
    over: Option<OverBudget>,
}

impl FileRecords {
    /// The records of the file at `file` (its index among the run's files), in `from` if
    /// given.
    pub(in crate::pipeline) fn new(file: usize, from: Option<SourceFormat>) -> FileRecords {
        FileRecords {
            file,
            format: from,
            occurrences: Occurrences::default(),
            whole: Vec::new(),
            open: std::collections::BTreeMap::new(),
            open_keys: std::collections::HashMap::new(),
            whole_bytes: 0,
            max_whole: u64::MAX,
            refused: None,
            over: None,
        }
    }

    /// A format read whole holds at most `limit` bytes of records (`--max-conversation-bytes`).
    pub(in crate::pipeline) fn max_conversation_bytes(mut self, limit: u64) -> FileRecords {
        self.max_whole = limit;
        self
    }

    /// Gives the next record of the file its identity; the first one decides the file's
    /// format unless it was given. Every record of the file comes here, in file order.
    pub(in crate::pipeline) fn identify(&mut self, record: &mut RawRecord) {
        record.id = self.occurrences.next(&record.bytes);
        if self.format.is_none() {
            self.format = Some(detect(record));
        }
    }

    /// Whether the file's format reads its records together (known once a record came).
    pub(in crate::pipeline) fn spans_file(&self) -> bool {
        self.format
            .is_some_and(|f| format::reader(f).granularity() == Granularity::File)
    }

    /// Whether the file's records are being held for its work (a format read whole, the file
    /// not refused).
    pub(in crate::pipeline) fn holds(&self) -> bool {
        self.spans_file() && self.refused.is_none()
    }

    /// What `record` costs the run's memory budget, as its format's
    /// [`memory_cost`](crate::input::FormatReader::memory_cost) says, when it is held with its
    /// file or is large on its own ([`LARGE_RECORD`]); nothing otherwise.
    pub(in crate::pipeline) fn cost(&self, record: &RawRecord) -> u64 {
        let reader = format::reader(self.format.unwrap_or(SourceFormat::CHAT));
        let len = record.bytes.len() as u64;
        let counted = match reader.granularity() {
            Granularity::File => self.refused.is_none(),
            Granularity::Record => len >= LARGE_RECORD,
        };
        if counted {
            reader.memory_cost().of(len, 1)
        } else {
            0
        }
    }

    /// The file needs more than the whole budget (`over`, found at `record`): refused, its
    /// records dropped as they come, a damage naming `--memory` at its end.
    pub(in crate::pipeline) fn refuse_over(&mut self, over: OverBudget, record: &RawRecord) {
        if self.refused.is_none() {
            let first = self.whole.first().map(|(r, _)| r.location.clone());
            self.refused = Some(first.unwrap_or_else(|| record.location.clone()));
            self.whole = Vec::new();
        }
        self.over = Some(over);
    }

    /// The work of an identified record, `ordinal` its place among the file's records; `None`
    /// when the record is held for its file's work ([`FileRecords::finish`]).
    pub(in crate::pipeline) fn route(&mut self, record: RawRecord, ordinal: u64) -> Option<Work> {
        let format = self.format.unwrap_or(SourceFormat::CHAT);
        match format::reader(format).granularity() {
            Granularity::Record => Some(Work::Records(Records::new(
                vec![(record, ordinal)],
                self.file,
                format,
            ))),
            Granularity::File => {
                let group = format::reader(format).group(&record.bytes);
                self.whole_bytes += record.bytes.len() as u64;
                if self.refused.is_none() && self.whole_bytes > self.max_whole {
                    let first = self.whole.first().map(|(r, _)| r.location.clone());
                    let first = first.or_else(|| {
                        let held = self.open.values().next()?.1.first()?;
                        Some(held.0.location.clone())
                    });
                    self.refused = Some(first.unwrap_or_else(|| record.location.clone()));
                    self.whole = Vec::new();
                    self.open.clear();
                    self.open_keys.clear();
                }
                if self.refused.is_some() {
                    return None;
                }
                let last = matches!(group, Group::Last(_));
                match group {
                    Group::File => {
                        self.whole.push((record, ordinal));
                        return None;
                    }
                    Group::Alone => {
                        self.open.insert(ordinal, (true, vec![(record, ordinal)]));
                    }
                    Group::Member(key) | Group::Last(key) => {
                        let first = *self.open_keys.entry(key.clone()).or_insert(ordinal);
                        let held = self
                            .open
                            .entry(first)
                            .or_insert_with(|| (false, Vec::new()));
                        held.1.push((record, ordinal));
                        if last {
                            held.0 = true;
                            self.open_keys.remove(&key);
                        }
                    }
                }
                self.complete(format)
            }
        }
    }

    /// The complete conversations that no open one is interleaved with, as one work in file
    /// order (their reader tells them apart): the longest run of complete ones, in the order
    /// they began, whose records all come before the next one's first record. So a
    /// conversation is reported in the file's order whatever record of it names it.
    fn complete(&mut self, format: SourceFormat) -> Option<Work> {
        let mut cut = None;
        let mut last = 0u64;
        for (at, (&first, (complete, held))) in self.open.iter().enumerate() {
            if at > 0 && last < first {
                cut = Some(first);
            }
            if !complete {
                break;
            }
            let end = held.last().map_or(first, |(_, ordinal)| *ordinal);
            last = last.max(end);
            if at + 1 == self.open.len() {
                cut = Some(u64::MAX);
            }
        }
        let cut = cut?;
        let mut records = Vec::new();
        while let Some(entry) = self.open.first_entry() {
            if *entry.key() >= cut {
                break;
            }
            records.extend(entry.remove().1);
        }
        records.sort_unstable_by_key(|(_, ordinal)| *ordinal);
        let held: u64 = records.iter().map(|(r, _)| r.bytes.len() as u64).sum();
        self.whole_bytes = self.whole_bytes.saturating_sub(held);
        Some(Work::Records(Records::new(records, self.file, format)))
    }

    /// The records held for a format read whole, once the file's last record was routed; a
    /// file refused for its size is a damage naming the limit.
    pub(in crate::pipeline) fn finish(self) -> Option<Work> {
        let format = self.format?;
        if let (Some(location), Some(over)) = (&self.refused, self.over) {
            return Some(Work::Damage(Damage {
                location: location.clone(),
                compressed_offset: None,
                message: format!(
                    "its {} conversation holds {} bytes of records: {over} (a file of this format is held whole while it is read)",
                    format.name(),
                    self.whole_bytes,
                ),
            }));
        }
        if let Some(location) = self.refused {
            return Some(Work::Damage(Damage {
                location,
                compressed_offset: None,
                message: format!(
                    "its {} conversation holds {} bytes of records, more than --max-conversation-bytes ({}): not converted (a file of this format is held whole while it is read); raise the limit to read it",
                    format.name(),
                    self.whole_bytes,
                    self.max_whole,
                ),
            }));
        }
        // The conversations never closed are read together with the file's other records,
        // in file order: their reader tells them apart as it does in any file.
        let mut whole = self.whole;
        if !self.open.is_empty() {
            whole.extend(self.open.into_values().flat_map(|(_, records)| records));
            whole.sort_unstable_by_key(|(_, ordinal)| *ordinal);
        }
        if whole.is_empty() {
            return None;
        }
        Some(Work::Records(Records::new(whole, self.file, format)))
    }
}

/// The format of the file whose first record this is: a row of a binary file (Parquet) by
/// its file's magic, anything else by its own bytes.
pub(in crate::pipeline) fn detect(record: &RawRecord) -> SourceFormat {
    if let Some(magic) = record.magic {
        return format::detect(None, magic);
    }
    let value = serde_json::from_slice::<serde_json::Value>(&record.bytes).ok();
    format::detect(value.as_ref(), &record.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::reader::tests::raw;

    /// What `FileRecords` hands over for OTLP spans routed in order: each work's ordinals.
    fn grouped(spans: &[&str]) -> Vec<Vec<u64>> {
        let mut grouped = FileRecords::new(0, Some(SourceFormat::OTEL));
        let mut works = Vec::new();
        for (ordinal, span) in spans.iter().enumerate() {
            works.extend(grouped.route(raw(span.as_bytes(), None), ordinal as u64));
        }
        works.extend(grouped.finish());
        works
            .into_iter()
            .map(|work| match work {
                Work::Records(records) => records.records.iter().map(|(_, o)| *o).collect(),
                Work::Blank(_) | Work::Damage(_) | Work::FileEnd(_) | Work::Segment(..) => {
                    Vec::new()
                }
            })
            .collect()
    }

    #[test]
    fn a_trace_is_handed_over_at_its_root_once_no_earlier_trace_is_open() {
        let child = |t: &str| format!(r#"{{"traceId":"{t}","spanId":"c","parentSpanId":"r"}}"#);
        let root = |t: &str| format!(r#"{{"traceId":"{t}","spanId":"r","parentSpanId":""}}"#);
        let (a, a_root, b, b_root) = (child("a"), root("a"), child("b"), root("b"));
        // One trace after the other: each at its root.
        assert_eq!(
            grouped(&[&a, &a, &a_root, &b, &b_root]),
            [vec![0, 1, 2], vec![3, 4]]
        );
        // Interleaved: b, complete first, waits for a (its records come between a's).
        assert_eq!(
            grouped(&[&a, &b, &b_root, &a, &a_root]),
            [vec![0, 1, 2, 3, 4]]
        );
        // A line that is no span is handed over in its place; a trace never closed at the end.
        assert_eq!(
            grouped(&[&a, &a_root, "[1]", &b]),
            [vec![0, 1], vec![2], vec![3]]
        );
    }
}
