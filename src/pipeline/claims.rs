//! Batch API results a shard counts whose requests other shards convert.
//!
//! A result is `joined` when a request with its `custom_id` is in the input, and quarantined
//! when none is. An unsharded run sees every request it joins; a shard converts only its
//! share of the walk, so for the results it counts (those of its own results files, or
//! ranges) that no request of its own claimed, it reads the records of the files it did not
//! convert (those that start with a Batch request line first, then the rest) and claims a
//! result for each record the pipeline would have joined with it: a record that parses, is
//! not too large nor cut short, and, for a chat record, is sampled (`--sample`). It stops as
//! soon as every result it counts is claimed. Nothing is read when the shard's own requests
//! claimed them all, which is the case whenever the results and their requests are in the
//! shard's own files.
//!
//! In: the batch index, after the conversion. Out: the results claimed (marked in the index).
//! Nothing here fails: a file that cannot be read claims nothing, as in the pipeline.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde_json::Value;

use super::{reader, record, Options};
use crate::input::batch::BatchIndex;
use crate::input::format;
use crate::input::parse::parse_record;
use crate::rules::{InvalidUnicode, RuleSet};
use crate::source::{records, RecordEvent, SourceFile};

/// What a claim needs beside the index.
pub(crate) struct Walk<'a> {
    /// Every file of the walk, in order.
    pub files: &'a [SourceFile],
    /// The files of the walk this run converted whole: their requests joined already.
    pub converted: &'a [bool],
}

/// Claims the results of `index` that this run counts for the requests in the rest of the
/// walk, reading its files in parallel on the current pool.
pub(crate) fn claim_elsewhere(
    index: &BatchIndex,
    walk: &Walk<'_>,
    rules: &RuleSet,
    options: &Options,
) {
    let remaining = AtomicUsize::new(index.unclaimed());
    if remaining.load(Ordering::Relaxed) == 0 {
        return;
    }
    // The files most likely to hold the requests first: most searches end in them.
    let requests: HashSet<usize> = index.request_files().iter().copied().collect();
    let others = (0..walk.files.len()).filter(|w| !requests.contains(w));
    let order: Vec<usize> = index
        .request_files()
        .iter()
        .copied()
        .chain(others)
        .filter(|&w| !walk.converted.get(w).copied().unwrap_or(false))
        .collect();
    let held = index.held();
    order.par_iter().for_each(|&w| {
        if remaining.load(Ordering::Relaxed) == 0 || options.stop.load(Ordering::Relaxed) != 0 {
            return;
        }
        let file = &walk.files[w];
        claim_file(file, held.get(&w), index, rules, options, &remaining);
    });
}

/// Claims the results named by the records of one file. `held`: the ordinals of the result
/// lines the index holds from it (a results file), which the pipeline never reads again.
fn claim_file(
    file: &SourceFile,
    held: Option<&HashSet<u64>>,
    index: &BatchIndex,
    rules: &RuleSet,
    options: &Options,
    remaining: &AtomicUsize,
) {
    let repair = rules.policy.invalid_unicode == InvalidUnicode::Replace;
    let rate = options.sample.unwrap_or(1.0);
    // A results file is replayed from the scan, which read it with the same limit.
    let limit = options.max_record_bytes;
    let mut format = options.from;
    let mut ordinal = 0u64;
    let archive = crate::input::format::archive_lines();
    for event in records(file, archive).max_record_bytes(limit) {
        if remaining.load(Ordering::Relaxed) == 0 || options.stop.load(Ordering::Relaxed) != 0 {
            return;
        }
        let RecordEvent::Record(record) = event else {
            continue;
        };
        let here = ordinal;
        ordinal += 1;
        if held.is_some_and(|h| h.contains(&here)) {
            continue;
        }
        // As the reader decides it: at the first record it sends.
        let format = *format.get_or_insert_with(|| reader::detect(&record));
        if record.oversized.is_some() || record.truncated {
            continue;
        }
        // A record the run leaves out (the baseline's round trip; `--sample` for a format read
        // record by record, sampled before it is read) is never joined; a format read whole
        // joins every record it parses.
        let by_record = format::reader(format).granularity() == format::Granularity::Record;
        if options.baseline || (by_record && !record::sampled(&file.key, here, rate)) {
            continue;
        }
        if !may_name_custom_id(&record.bytes) {
            continue;
        }
        let Ok((value, _)) = parse_record(&record.bytes, repair) else {
            continue;
        };
        let id = value.get("custom_id").and_then(Value::as_str);
        if id.is_some_and(|id| index.claim(id)) {
            remaining.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// False only when the record cannot hold a `custom_id` key: the name is not in its bytes,
/// nor any `\u` escape that could spell it. Most records are never parsed here.
fn may_name_custom_id(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, b"custom_id").is_some()
        || memchr::memmem::find(bytes, b"\\u").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_without_the_key_or_an_escape_is_not_parsed() {
        assert!(may_name_custom_id(br#"{"custom_id":"a"}"#));
        assert!(may_name_custom_id(br#"{"custom\u005fid":"a"}"#));
        assert!(!may_name_custom_id(br#"{"messages":[]}"#));
    }
}
