//! Logs that resend the whole history: which logged requests are one conversation.
//!
//! A stateless client (Chat Completions, Anthropic Messages, Responses without
//! `previous_response_id`) sends the whole conversation with every request, so a log of an agent
//! run holds the same history again and again. A request whose messages start with an earlier
//! request's messages, and add to them, continues that request's chain; a chain becomes one
//! conversation, rebuilt from its last request and that request's response
//! (`policy.resent_history`). A request that shares a beginning with a chain but then disagrees
//! with it (an edited or retried turn) starts a chain of its own, and the reader says where it
//! diverged (`builtin.chain-diverged`).
//!
//! Messages are compared as the reader normalised them (see [`canonical`]).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::format::{FileRead, SourceConversation};
use super::InputError;
use crate::model::transcript::{SourceNote, Transcript};
use crate::rules::{Builtin, PolicyId};

/// One chain: positions in the list of histories given, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub members: Vec<usize>,
    /// The chain's first request shares a beginning with another chain but disagrees with it.
    pub diverged: Option<Divergence>,
}

/// Where a chain left another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Divergence {
    /// The position of the request it agrees with longest (the other chain's request).
    pub from: usize,
    /// The first message (0-based) where they disagree.
    pub at: usize,
}

/// A part of a history: the history of an earlier part (none at a history's start), then
/// messages of its own. Handed out by [`Histories::part`]; a parent always comes before its
/// children, so the parts form a forest walked in the order they were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part(usize);

/// The requests' histories (normalised messages, as compared), each held once: a request
/// that continues another (Responses `previous_response_id`) names the part its history ends
/// with, and shares its ancestors' messages instead of holding a copy of them. A log of N
/// linked requests holds N requests' own messages, not N histories of up to N messages each.
#[derive(Debug, Default)]
pub struct Histories {
    parts: Vec<PartOf>,
    /// Each request's last part; `None` for an empty history.
    requests: Vec<Option<usize>>,
    /// The request each one continues by an explicit link (`previous_response_id`), if any:
    /// grouping takes it first, wherever the log wrote it.
    after: Vec<Option<usize>>,
}

#[derive(Debug)]
struct PartOf {
    parent: Option<usize>,
    messages: Vec<Value>,
    /// Messages in the history up to and including this part's.
    depth: usize,
}

impl Histories {
    /// A part: `parent`'s history (made before), then `messages`.
    pub fn part(&mut self, parent: Option<Part>, messages: Vec<Value>) -> Part {
        let parent = parent.map(|p| p.0);
        let before = parent.map_or(0, |p| self.parts[p].depth);
        self.parts.push(PartOf {
            parent,
            depth: before + messages.len(),
            messages,
        });
        Part(self.parts.len() - 1)
    }

    /// The next request, whose history ends with `last` (`None`: an empty history), and that
    /// continues request `after` (its position, earlier or later) by an explicit link.
    pub fn request(&mut self, last: Option<Part>, after: Option<usize>) {
        self.requests.push(last.map(|p| p.0));
        self.after.push(after);
    }

    /// The next request, whose whole history is `messages` (a stateless log resends it).
    pub fn whole(&mut self, messages: Vec<Value>) {
        let part = (!messages.is_empty()).then(|| self.part(None, messages));
        self.request(part, None);
    }

    /// The order requests are grouped in: the log's, but a request linked to another
    /// ([`Histories::request`]'s `after`) comes after it, so that a log written newest first
    /// groups as one written oldest first. Walked up the links, not recursively; a link out of
    /// range or in a cycle is not followed.
    pub fn order(&self) -> Vec<usize> {
        let n = self.requests.len();
        let mut order = Vec::with_capacity(n);
        let mut seen = vec![false; n];
        let mut stack = Vec::new();
        for i in 0..n {
            let mut at = Some(i);
            while let Some(j) = at.filter(|&j| j < n && !seen[j]) {
                seen[j] = true;
                stack.push(j);
                at = self.after[j];
            }
            while let Some(j) = stack.pop() {
                order.push(j);
            }
        }
        order
    }

    /// How many requests.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Request `request`'s history, in order (walked up its parts, not recursively).
    pub fn history(&self, request: usize) -> Vec<&Value> {
        let mut parts = Vec::new();
        let mut at = self.requests.get(request).copied().flatten();
        while let Some(p) = at {
            parts.push(p);
            at = self.parts[p].parent;
        }
        parts
            .iter()
            .rev()
            .flat_map(|&p| self.parts[p].messages.iter())
            .collect()
    }

    fn depth(&self, request: usize) -> usize {
        self.requests[request].map_or(0, |p| self.parts[p].depth)
    }
}

/// [`chains`] when the rules merge resent histories (`policy.resent_history`), else every
/// request a chain of its own.
pub fn group(histories: &Histories, merge: bool) -> Vec<Chain> {
    if !merge {
        let single = |i| Chain {
            members: vec![i],
            diverged: None,
        };
        return (0..histories.len()).map(single).collect();
    }
    chains(histories)
}

/// Groups requests into chains, taking them in [`Histories::order`] (the log's, linked
/// requests after the ones they continue); an empty history is a chain of its own.
///
/// A request continues the chain whose last request its history extends, the longest such
/// (the later chain on a tie); otherwise it starts a chain, diverging from the earlier request
/// it shares the longest beginning with (the latest taken on a tie).
///
/// Every history is a path in a trie of interned messages, built once from the parts (each
/// part's messages walked from where its parent ended: time linear in the messages held, not
/// in the histories' lengths). Requests are then taken in order with two questions about the
/// path of each, answered along the trie's heavy paths (a root-to-node path crosses O(log n)
/// of them): which chain ends deepest on it (the chain it continues), and how deep earlier
/// requests reached on it, and which latest (where it diverges). Time O(messages + requests ×
/// log² nodes), memory linear, no recursion. `reference_chains` in the tests compares every
/// pair of histories, the definition this must equal.
pub fn chains(histories: &Histories) -> Vec<Chain> {
    let trie = Trie::of(histories);
    let mut paths = HeavyPaths::of(&trie);
    let mut chains: Vec<Chain> = Vec::new();
    for i in histories.order() {
        if histories.depth(i) == 0 {
            chains.push(Chain {
                members: vec![i],
                diverged: None,
            });
            continue;
        }
        let end = trie.request_end[i];
        let c = match paths.chain_ending_above(&trie, end) {
            Some((at, c)) => {
                paths.unmark(at, c);
                chains[c].members.push(i);
                c
            }
            None => {
                let diverged = paths
                    .deepest_reached(&trie, end)
                    .map(|(at, from)| Divergence { from, at });
                chains.push(Chain {
                    members: vec![i],
                    diverged,
                });
                chains.len() - 1
            }
        };
        paths.reach(&trie, end, i);
        paths.mark(&trie, end, c);
    }
    chains
}

/// Every history's messages as one trie: node 0 is the empty history, an edge one interned
/// message. A node is made after its parent, so ids go from the root down.
struct Trie {
    parent: Vec<u32>,
    depth: Vec<u32>,
    /// The node each request's history ends at.
    request_end: Vec<u32>,
}

impl Trie {
    fn of(histories: &Histories) -> Trie {
        let mut ids: HashMap<&Value, u32> = HashMap::new();
        let mut edges: HashMap<(u32, u32), u32> = HashMap::new();
        let mut trie = Trie {
            parent: vec![0],
            depth: vec![0],
            request_end: Vec::with_capacity(histories.len()),
        };
        // Parts come after their parents: each starts where its parent ended.
        let mut part_end: Vec<u32> = Vec::with_capacity(histories.parts.len());
        for part in &histories.parts {
            let mut node = part.parent.map_or(0, |p| part_end[p]);
            for message in &part.messages {
                let next_id = u32::try_from(ids.len()).unwrap_or(u32::MAX);
                let id = *ids.entry(message).or_insert(next_id);
                let fresh = u32::try_from(trie.parent.len()).unwrap_or(u32::MAX);
                let child = *edges.entry((node, id)).or_insert(fresh);
                if child == fresh {
                    trie.parent.push(node);
                    trie.depth.push(trie.depth[node as usize] + 1);
                }
                node = child;
            }
            part_end.push(node);
        }
        trie.request_end = histories
            .requests
            .iter()
            .map(|last| last.map_or(0, |p| part_end[p]))
            .collect();
        trie
    }

    fn len(&self) -> usize {
        self.parent.len()
    }
}

/// The trie cut into heavy paths (each node continues its parent's path when it has the
/// largest subtree of the parent's children), with what the requests taken so far left on each
/// path: the chains that end at its nodes, and how deep requests reached on it.
struct HeavyPaths {
    /// The path each node is on, and the path's top node.
    path: Vec<u32>,
    top: Vec<u32>,
    /// Per path: (depth, chain) of each chain whose last request ends on it.
    ends: Vec<BTreeSet<(u32, usize)>>,
    /// Per path: the requests that reached it, as (deepest depth reached, request), depths
    /// falling and requests rising: the latest request through a node at depth d is the
    /// last entry reaching d or deeper.
    reached: Vec<Vec<(u32, usize)>>,
}

impl HeavyPaths {
    fn of(trie: &Trie) -> HeavyPaths {
        let n = trie.len();
        let mut size = vec![1u32; n];
        for v in (1..n).rev() {
            let p = trie.parent[v] as usize;
            size[p] = size[p].saturating_add(size[v]);
        }
        let mut heavy = vec![u32::MAX; n];
        for v in 1..n {
            let p = trie.parent[v] as usize;
            if heavy[p] == u32::MAX || size[v] > size[heavy[p] as usize] {
                heavy[p] = v as u32;
            }
        }
        drop(size);
        let mut path = vec![0u32; n];
        let mut top = vec![0u32];
        for v in 1..n {
            let p = trie.parent[v] as usize;
            path[v] = if heavy[p] == v as u32 {
                path[p]
            } else {
                top.push(v as u32);
                (top.len() - 1) as u32
            };
        }
        let paths = top.len();
        HeavyPaths {
            path,
            top,
            ends: vec![BTreeSet::new(); paths],
            reached: vec![Vec::new(); paths],
        }
    }

    /// The path of node `v`, and the node above the path's top (`None` above the root's).
    fn step(&self, trie: &Trie, v: u32) -> (usize, Option<u32>) {
        let path = self.path[v as usize] as usize;
        let top = self.top[path];
        (path, (top != 0).then(|| trie.parent[top as usize]))
    }

    /// The deepest proper ancestor of `end` at which a chain ends (its path and depth), and
    /// that chain (the latest of those ending there).
    fn chain_ending_above(&self, trie: &Trie, end: u32) -> Option<((usize, u32), usize)> {
        let mut node = Some(end);
        let mut proper = true;
        while let Some(v) = node {
            let (path, up) = self.step(trie, v);
            let depth = trie.depth[v as usize];
            let found = if proper {
                self.ends[path].range(..(depth, 0)).next_back()
            } else {
                self.ends[path].range(..=(depth, usize::MAX)).next_back()
            };
            if let Some(&(at, chain)) = found {
                return Some(((path, at), chain));
            }
            proper = false;
            node = up;
        }
        None
    }

    /// The deepest node on `end`'s path from the root (the root left out) that an earlier
    /// request reached: its depth, and the latest request through it.
    fn deepest_reached(&self, trie: &Trie, end: u32) -> Option<(usize, usize)> {
        let mut node = Some(end);
        while let Some(v) = node {
            let (path, up) = self.step(trie, v);
            let reached = &self.reached[path];
            if let Some(&(deepest, _)) = reached.first() {
                let depth = trie.depth[v as usize].min(deepest);
                if depth == 0 {
                    return None;
                }
                let last = reached
                    .partition_point(|&(d, _)| d >= depth)
                    .checked_sub(1)?;
                return Some((depth as usize, reached[last].1));
            }
            node = up;
        }
        None
    }

    /// Request `request`'s history reached every node from the root to `end`.
    fn reach(&mut self, trie: &Trie, end: u32, request: usize) {
        let mut node = Some(end);
        while let Some(v) = node {
            let (path, up) = self.step(trie, v);
            let depth = trie.depth[v as usize];
            let reached = &mut self.reached[path];
            while reached.last().is_some_and(|&(d, _)| d <= depth) {
                reached.pop();
            }
            reached.push((depth, request));
            node = up;
        }
    }

    fn mark(&mut self, trie: &Trie, node: u32, chain: usize) {
        let path = self.path[node as usize] as usize;
        self.ends[path].insert((trie.depth[node as usize], chain));
    }

    fn unmark(&mut self, (path, depth): (usize, u32), chain: usize) {
        self.ends[path].remove(&(depth, chain));
    }
}

/// A logged exchange as the chain driver sees it: the records it was read from.
pub trait Link {
    /// The indexes of its records, the first naming it.
    fn records(&self) -> &[usize];
}

/// The one chain driver of the three log readers (Anthropic, Chat Completions streams,
/// Responses): groups `links` by their normalised `histories` ([`group`]; every link a chain of
/// its own unless `merge`), then builds each chain's conversation from its members, in order
/// (`build`: the last member holds the whole history). Each conversation carries, before the
/// notes `build` gives it, a `policy.resent_history` note counting the requests merged into
/// it (`merged` says what such a request is) and a `builtin.chain-diverged` note when its
/// chain left another. Its records are every member's, in file order; a chain whose
/// conversation cannot be read has every record refused.
pub fn drive<L: Link>(
    links: Vec<L>,
    histories: Histories,
    merge: bool,
    merged: &str,
    read: &mut FileRead,
    mut build: impl FnMut(Vec<L>) -> Result<Transcript, InputError>,
) {
    let groups = group(&histories, merge);
    drop(histories); // the normalised copies are only for grouping
    let first_records: Vec<usize> = links
        .iter()
        .map(|l| l.records().first().copied().unwrap_or_default())
        .collect();
    let mut slots: Vec<Option<L>> = links.into_iter().map(Some).collect();
    for chain in groups {
        let members: Vec<L> = chain
            .members
            .iter()
            .filter_map(|&m| slots.get_mut(m).and_then(Option::take))
            .collect();
        let mut records: Vec<usize> = members
            .iter()
            .flat_map(|m| m.records().iter().copied())
            .collect();
        records.sort_unstable();
        let mut notes = Vec::new();
        if members.len() > 1 {
            notes.push(SourceNote {
                rule: PolicyId::ResentHistory.into(),
                what: merged.to_string(),
                count: (members.len() - 1) as u64,
                bytes_dropped: 0,
            });
        }
        if let Some(d) = chain.diverged {
            notes.push(diverged_note(first_records[d.from], d.at));
        }
        if members.is_empty() {
            continue;
        }
        match build(members) {
            Ok(mut transcript) => {
                notes.append(&mut transcript.source_notes);
                transcript.source_notes = notes;
                read.conversations.push(SourceConversation {
                    transcript,
                    records,
                });
            }
            Err(error) => {
                for index in records {
                    read.refused.push((index, error.clone()));
                }
            }
        }
    }
}

/// The note a chain that left another carries: where it diverged from which record.
pub fn diverged_note(from_record: usize, at: usize) -> SourceNote {
    SourceNote {
        rule: Builtin::ChainDiverged.into(),
        what: format!(
            "request disagrees at message {} with the history of record {}: a conversation of its own",
            at + 1,
            from_record + 1
        ),
        count: 1,
        bytes_dropped: 0,
    }
}

/// A copy of `value` for comparison: object keys in `drop` removed at every depth (e.g.
/// `cache_control`, which clients move to the newest message each turn), and a string
/// `content` written as one text block of type `text_type`.
pub fn canonical(value: &Value, drop: &[&str], text_type: &str) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !drop.contains(&k.as_str()) && !v.is_null())
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("content", Value::String(text)) => {
                            serde_json::json!([{"type": text_type, "text": text}])
                        }
                        _ => canonical(v, drop, text_type),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| canonical(v, drop, text_type))
                .collect(),
        ),
        other @ Value::Null
        | other @ Value::Bool(_)
        | other @ Value::Number(_)
        | other @ Value::String(_) => other.clone(),
    }
}

/// A logged request's body: `request.body`, or `request` itself when it holds the body's
/// fields; a body logged as a JSON string is parsed.
pub fn request_body(record: &mut Value) -> Option<Value> {
    envelope_part(record, "request")
}

/// A logged response's body (`response.body`, or `response` itself), or `None`.
pub fn response_body(record: &mut Value) -> Option<Value> {
    envelope_part(record, "response")
}

fn envelope_part(record: &mut Value, key: &str) -> Option<Value> {
    let part = record.get_mut(key)?;
    let taken = match part.get_mut("body") {
        Some(body) => std::mem::take(body),
        None => {
            let part = std::mem::take(part);
            match part {
                Value::Object(mut map) => {
                    for k in ["method", "uri", "url", "headers", "status", "status_code"] {
                        map.remove(k);
                    }
                    Value::Object(map)
                }
                other @ Value::Null
                | other @ Value::Bool(_)
                | other @ Value::Number(_)
                | other @ Value::String(_)
                | other @ Value::Array(_) => other,
            }
        }
    };
    match taken {
        Value::String(text) => serde_json::from_str(&text).ok(),
        Value::Object(_) => Some(taken),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The definition [`chains`] must equal: each request compared with every chain's last
    /// request and with every earlier request (quadratic, so for tests only).
    fn reference_chains(histories: &[Vec<Value>]) -> Vec<Chain> {
        let mut chains: Vec<Chain> = Vec::new();
        for (i, history) in histories.iter().enumerate() {
            if history.is_empty() {
                chains.push(Chain {
                    members: vec![i],
                    diverged: None,
                });
                continue;
            }
            let extends = chains
                .iter()
                .enumerate()
                .filter_map(|(c, chain)| {
                    let last = &histories[*chain.members.last()?];
                    (!last.is_empty() && last.len() < history.len() && history.starts_with(last))
                        .then_some((last.len(), c))
                })
                .max();
            if let Some((_, c)) = extends {
                chains[c].members.push(i);
                continue;
            }
            let diverged = (0..i)
                .map(|j| (common_prefix(&histories[j], history), j))
                .filter(|(n, _)| *n > 0)
                .max_by_key(|(n, j)| (*n, *j))
                .map(|(at, from)| Divergence { from, at });
            chains.push(Chain {
                members: vec![i],
                diverged,
            });
        }
        chains
    }

    fn common_prefix(a: &[Value], b: &[Value]) -> usize {
        a.iter().zip(b).take_while(|(x, y)| x == y).count()
    }

    /// Flat histories, each request's whole.
    fn flat(histories: &[Vec<Value>]) -> Histories {
        let mut all = Histories::default();
        for history in histories {
            all.whole(history.clone());
        }
        all
    }

    proptest::proptest! {
        /// Histories over a tiny alphabet, so that prefixes, repeats, retries and
        /// divergences are common.
        #[test]
        fn the_index_equals_the_pairwise_definition(
            raw in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..6), 0..24)
        ) {
            let histories: Vec<Vec<Value>> = raw
                .iter()
                .map(|h| h.iter().map(|m| json!(m)).collect())
                .collect();
            proptest::prop_assert_eq!(chains(&flat(&histories)), reference_chains(&histories));
        }

        /// Histories that share parts (as `previous_response_id` links them), requests linked
        /// to others before or after them: the same chains as the same histories written out
        /// in full, in the order grouping takes them.
        #[test]
        fn shared_parts_group_as_their_histories_written_out(
            parts in proptest::collection::vec(
                (proptest::option::of(0usize..64), proptest::collection::vec(0u8..3, 0..4)),
                0..24,
            ),
            requests in proptest::collection::vec(
                (proptest::option::of(0usize..64), proptest::option::of(0usize..30)),
                0..24,
            ),
        ) {
            let mut shared = Histories::default();
            let mut made: Vec<Part> = Vec::new();
            for (parent, messages) in &parts {
                let parent = parent.and_then(|p| made.get(p % made.len().max(1)).copied());
                let messages = messages.iter().map(|m| json!(m)).collect();
                made.push(shared.part(parent, messages));
            }
            for (last, after) in &requests {
                let last = last.and_then(|p| made.get(p % made.len().max(1)).copied());
                shared.request(last, *after);
            }
            proptest::prop_assert_eq!(chains(&shared), reference_in_order(&shared));
        }
    }

    /// [`reference_chains`] over the histories written out, in the order grouping takes them.
    fn reference_in_order(histories: &Histories) -> Vec<Chain> {
        let order = histories.order();
        let written: Vec<Vec<Value>> = order
            .iter()
            .map(|&i| histories.history(i).into_iter().cloned().collect())
            .collect();
        reference_chains(&written)
            .into_iter()
            .map(|c| Chain {
                members: c.members.iter().map(|&m| order[m]).collect(),
                diverged: c.diverged.map(|d| Divergence {
                    from: order[d.from],
                    at: d.at,
                }),
            })
            .collect()
    }

    #[test]
    fn linked_requests_group_after_the_ones_they_continue_in_any_order() {
        let mut histories = Histories::default();
        let first = histories.part(None, h(&["u1"]));
        let second = histories.part(Some(first), h(&["a1", "u2"]));
        let third = histories.part(Some(second), h(&["a2", "u3"]));
        // Newest first, each naming the one it continues by its position.
        histories.request(Some(third), Some(1));
        histories.request(Some(second), Some(2));
        histories.request(Some(first), None);
        assert_eq!(histories.order(), vec![2, 1, 0]);
        assert_eq!(
            chains(&histories),
            vec![Chain {
                members: vec![2, 1, 0],
                diverged: None
            }]
        );
        // A link in a cycle, or out of range, is not followed.
        let mut looped = Histories::default();
        looped.request(None, Some(1));
        looped.request(None, Some(0));
        looped.request(None, Some(7));
        assert_eq!(looped.order(), vec![1, 0, 2]);
    }

    #[test]
    fn a_long_linked_chain_in_either_order_is_one_chain() {
        for newest_first in [false, true] {
            let mut histories = Histories::default();
            let n = 20_000;
            let mut parts = Vec::new();
            let mut last = None;
            for k in 0..n {
                last = Some(histories.part(last, vec![json!(k)]));
                parts.push(last);
            }
            let positions: Vec<usize> = if newest_first {
                (0..n).rev().collect()
            } else {
                (0..n).collect()
            };
            // Request k of the conversation at position positions[k] of the log.
            let mut at = vec![0; n];
            for (k, &p) in positions.iter().enumerate() {
                at[p] = k;
            }
            for &k in &at {
                let after = k.checked_sub(1).map(|previous| positions[previous]);
                histories.request(parts[k], after);
            }
            let got = chains(&histories);
            assert_eq!(got.len(), 1, "newest first: {newest_first}");
            assert_eq!(got[0].members, positions);
        }
    }

    fn h(items: &[&str]) -> Vec<Value> {
        items.iter().map(|s| json!(s)).collect()
    }

    #[test]
    fn three_growing_requests_are_one_chain() {
        let got = chains(&flat(&[
            h(&["u1"]),
            h(&["u1", "a1", "t1"]),
            h(&["u1", "a1", "t1", "a2", "u2"]),
        ]));
        assert_eq!(
            got,
            vec![Chain {
                members: vec![0, 1, 2],
                diverged: None
            }]
        );
    }

    #[test]
    fn a_request_that_disagrees_starts_its_own_chain() {
        let got = chains(&flat(&[
            h(&["u1"]),
            h(&["u1", "a1", "u2"]),
            h(&["u1", "a1", "u2-edited"]),
        ]));
        assert_eq!(
            got,
            vec![
                Chain {
                    members: vec![0, 1],
                    diverged: None
                },
                Chain {
                    members: vec![2],
                    diverged: Some(Divergence { from: 1, at: 2 })
                },
            ]
        );
    }

    #[test]
    fn interleaved_conversations_and_retries_stay_apart() {
        let got = chains(&flat(&[
            h(&["x"]),
            h(&["y"]),
            h(&["x", "a", "x2"]),
            h(&["y"]),
        ]));
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].members, vec![0, 2]);
        assert_eq!(got[1].members, vec![1]);
        assert_eq!(got[2].members, vec![3]);
        assert_eq!(got[2].diverged, Some(Divergence { from: 1, at: 1 }));
    }

    #[test]
    fn canonical_drops_keys_and_types_string_content() {
        let v = json!({"role": "user", "content": "hi", "cache_control": {"type": "ephemeral"}});
        let w = json!({"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": null}]});
        assert_eq!(
            canonical(&v, &["cache_control"], "text"),
            canonical(&w, &["cache_control"], "text")
        );
    }
}
