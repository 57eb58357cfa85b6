//! Batch API files as `convert` reads them: a results file's lines hold no conversation of
//! their own, convert joins each to its request (read from the other files of the run), so a
//! result is explained through the request it answers; a requests file is explained with the
//! results beside it joined, as `convert` of their folder joins them. The files beside are
//! found as `convert FOLDER` finds them, and the results read as it reads them
//! ([`BatchIndex::scan`]).

use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use crate::input::batch::BatchIndex;
use crate::rules::{InvalidUnicode, RuleSet};
use crate::source::{discover, records, RecordEvent, SourceFile, WalkOptions};

/// What to read for the file named, and with which results.
pub(super) struct Joined {
    /// The file to read: the one named, or the requests file of the result named.
    pub file: SourceFile,
    pub line: Option<u64>,
    pub index: BatchIndex,
    /// Said first, when the file read is not the one named.
    pub note: Option<String>,
}

/// `file` (its record on `line`, or its first) as convert reads it among the files of its
/// folder: a results file's result through its request, a requests file with its results.
pub(super) fn joined(
    file: SourceFile,
    line: Option<u64>,
    rules: &RuleSet,
    walk: &WalkOptions,
) -> Result<Joined> {
    let own = scan(std::slice::from_ref(&file), rules)?;
    let is_results = !own.results_files().is_empty();
    if !is_results && own.request_files().is_empty() {
        return Ok(Joined {
            file,
            line,
            index: BatchIndex::default(),
            note: None,
        });
    }
    let folder = file.path.parent().unwrap_or(Path::new("."));
    let beside = discover(&[folder.to_path_buf()], None, walk)
        .with_context(|| format!("looking beside {} for its Batch API files", file.display))?
        .files;
    let index = scan(&beside, rules)?;
    if !is_results {
        return Ok(Joined {
            file,
            line,
            index,
            note: None,
        });
    }
    // The result asked for: the one on `line`, or the file's first.
    let mut results: Vec<_> = own
        .results()
        .into_iter()
        .filter(|r| line.is_none_or(|l| r.record.location.line == l))
        .collect();
    results.sort_by_key(|r| r.ordinal);
    let Some(result) = results.first() else {
        bail!(
            "{}: no Batch API result starts on line {}",
            file.display,
            line.unwrap_or(1)
        );
    };
    let id = result.custom_id().to_string();
    let at = result.record.location.to_string();
    for &i in index.request_files() {
        let Some(requests) = beside.get(i) else {
            continue;
        };
        if let Some(request_line) = request_line(requests, &id) {
            let note = format!(
                "{at} is a Batch API result (custom_id {id}): convert joins it to its request, {}:{request_line}, explained here with the result joined",
                requests.display
            );
            return Ok(Joined {
                file: requests.clone(),
                line: Some(request_line),
                index,
                note: Some(note),
            });
        }
    }
    bail!(
        "{at} is a Batch API result (custom_id {id}): it holds no conversation, convert joins it to its request, and no file in {} holds the request {id}: explain the requests file instead (`rollover explain REQUESTS.jsonl`), kept in the same folder as its results",
        folder.display()
    )
}

/// The Batch API results of `files`, read as `convert` reads them before a run.
fn scan(files: &[SourceFile], rules: &RuleSet) -> Result<BatchIndex> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .context("starting a thread to read Batch API results")?;
    Ok(BatchIndex::scan(
        files,
        &rules.input,
        rules.policy.invalid_unicode == InvalidUnicode::Replace,
        crate::source::split::DEFAULT_MAX_RECORD_BYTES,
        &Arc::new(AtomicUsize::new(0)),
        &pool,
    ))
}

/// The line of the request `custom_id` in `file`, if it holds it.
fn request_line(file: &SourceFile, custom_id: &str) -> Option<u64> {
    records(file, crate::input::format::archive_lines()).find_map(|event| match event {
        RecordEvent::Record(record) => {
            let value: serde_json::Value = serde_json::from_slice(&record.bytes).ok()?;
            (value.get("custom_id")?.as_str()? == custom_id).then_some(record.location.line)
        }
        RecordEvent::Blank(_) | RecordEvent::Damage(_) => None,
    })
}
