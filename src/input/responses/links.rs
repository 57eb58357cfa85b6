//! The `previous_response_id` links between a log's entries, followed without recursion.

use std::collections::HashMap;

use serde_json::Value;

use super::Entry;

/// The entries' `previous_response_id` links followed: each entry's parent (the entry whose
/// response its request continues), or the id in its ancestry that no entry answers.
#[derive(Debug)]
pub(crate) struct Links {
    /// Per entry: `Ok(parent)` (`None`: a history of its own), or `Err(id)`, the missing link.
    pub parents: Vec<Result<Option<usize>, String>>,
    /// The entries that resolve, each after its parent.
    pub settled: Vec<usize>,
}

impl Links {
    pub(super) fn parent(&self, entry: usize) -> Option<usize> {
        self.parents
            .get(entry)
            .cloned()
            .and_then(Result::ok)
            .flatten()
    }

    /// Entry `entry`'s full request history: its ancestors' inputs and outputs, then its own
    /// input (copied, walked up the links, not recursively).
    pub(crate) fn history(&self, entry: usize, entries: &[Entry]) -> Vec<Value> {
        let mut line = vec![entry];
        let mut at = entry;
        while let Some(parent) = self.parent(at) {
            line.push(parent);
            at = parent;
        }
        let mut items = Vec::new();
        for (k, &a) in line.iter().enumerate().rev() {
            items.extend(entries[a].input.iter().cloned());
            if k > 0 {
                items.extend(entries[a].output.iter().cloned());
            }
        }
        items
    }
}

/// Follows every entry's `previous_response_id` to the entry whose response has that id (the
/// last one, when ids repeat), without recursion: a chain of any length, written in any
/// order, is walked up with a stack of its own. An entry whose ancestry names an id no entry
/// answers, loops back on itself or reaches a loop, is `Err` with the id where it broke.
pub(crate) fn resolve(entries: &[Entry]) -> Links {
    let by_response: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((e.response_id.as_deref()?, i)))
        .collect();
    let mut parents: Vec<Option<Result<Option<usize>, String>>> = vec![None; entries.len()];
    let mut settled = Vec::new();
    let mut on_stack = vec![false; entries.len()];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..entries.len() {
        if parents[start].is_some() {
            continue;
        }
        // Up the links to an entry already settled, or one that settles here.
        let mut at = start;
        loop {
            let Some(previous) = &entries[at].previous else {
                parents[at] = Some(Ok(None));
                settled.push(at);
                break;
            };
            match by_response.get(previous.as_str()) {
                Some(&parent) if parent != at && !on_stack[at] => {
                    on_stack[at] = true;
                    stack.push((at, parent));
                    if parents[parent].is_some() {
                        break;
                    }
                    at = parent;
                }
                // Missing, itself, or back to an entry on the way up (a loop).
                Some(_) | None => {
                    parents[at] = Some(Err(previous.clone()));
                    break;
                }
            }
        }
        // Down again: each entry as its parent went.
        while let Some((entry, parent)) = stack.pop() {
            on_stack[entry] = false;
            let outcome = match &parents[parent] {
                Some(Ok(_)) => Ok(Some(parent)),
                Some(Err(missing)) => Err(missing.clone()),
                None => Err(entries[entry].previous.clone().unwrap_or_default()),
            };
            if outcome.is_ok() {
                settled.push(entry);
            }
            parents[entry] = Some(outcome);
        }
    }
    Links {
        parents: parents
            .into_iter()
            .map(|p| p.unwrap_or_else(|| Err(String::new())))
            .collect(),
        settled,
    }
}
