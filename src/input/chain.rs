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

/// [`chains`] when the rules merge resent histories (`policy.resent_history`), else every
/// request a chain of its own.
pub fn group(histories: &[Vec<Value>], merge: bool) -> Vec<Chain> {
    if !merge {
        let single = |i| Chain {
            members: vec![i],
            diverged: None,
        };
        return (0..histories.len()).map(single).collect();
    }
    chains(histories)
}

/// Groups requests into chains. `histories[i]` is request `i`'s messages (normalised);
/// an empty history is a chain of its own.
///
/// A request continues the chain whose last request its history extends, the longest such
/// (the later chain on a tie); otherwise it starts a chain, diverging from the earlier request
/// it shares the longest beginning with (the latest on a tie).
///
/// Time and memory are linear in the messages given: each message is interned once, and every
/// history is a path in a trie of message ids whose nodes know which chains end there and the
/// latest request that passed through. A log of N requests is read in O(total messages), not
/// by comparing each request with every earlier one (`reference_chains` in the tests is that
/// comparison, kept as the definition this must equal).
pub fn chains(histories: &[Vec<Value>]) -> Vec<Chain> {
    let mut index = PrefixIndex::default();
    let mut chains: Vec<Chain> = Vec::new();
    for (i, history) in histories.iter().enumerate() {
        if history.is_empty() {
            chains.push(Chain {
                members: vec![i],
                diverged: None,
            });
            continue;
        }
        let path = index.path(history);
        // The chain whose last request this one extends, preferring the longest: the deepest
        // proper prefix of the path at which some chain ends.
        let extends = path[..path.len() - 1]
            .iter()
            .rev()
            .flatten()
            .find_map(|&node| {
                let chain = index.nodes[node].chain_ends.last()?;
                Some((node, *chain))
            });
        let c = match extends {
            Some((node, c)) => {
                index.nodes[node].chain_ends.remove(&c);
                chains[c].members.push(i);
                c
            }
            None => {
                // Not a continuation: does it leave an earlier request? The deepest node of
                // the path that an earlier request reached is their common beginning.
                let diverged = path
                    .iter()
                    .enumerate()
                    .rev()
                    .find_map(|(depth, node)| node.map(|n| (depth, n)))
                    .map(|(depth, node)| Divergence {
                        from: index.nodes[node].latest,
                        at: depth + 1,
                    });
                chains.push(Chain {
                    members: vec![i],
                    diverged,
                });
                chains.len() - 1
            }
        };
        let end = index.insert(history, i);
        index.nodes[end].chain_ends.insert(c);
    }
    chains
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
    histories: Vec<Vec<Value>>,
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

/// The trie behind [`chains`]: node 0 is the empty history; an edge is one interned message.
#[derive(Default)]
struct PrefixIndex<'a> {
    ids: std::collections::HashMap<&'a Value, u32>,
    edges: std::collections::HashMap<(usize, u32), usize>,
    nodes: Vec<Node>,
}

#[derive(Default)]
struct Node {
    /// The chains whose last request ends at this node.
    chain_ends: std::collections::BTreeSet<usize>,
    /// The latest request whose history passes through (or ends at) this node.
    latest: usize,
}

impl<'a> PrefixIndex<'a> {
    fn id(&mut self, message: &'a Value) -> u32 {
        let next = u32::try_from(self.ids.len()).unwrap_or(u32::MAX);
        *self.ids.entry(message).or_insert(next)
    }

    fn root(&mut self) -> usize {
        if self.nodes.is_empty() {
            self.nodes.push(Node::default());
        }
        0
    }

    /// The node of each non-empty prefix of `history` already in the index (`None` from the
    /// first message no earlier request had there).
    fn path(&mut self, history: &'a [Value]) -> Vec<Option<usize>> {
        let mut node = Some(self.root());
        history
            .iter()
            .map(|message| {
                let id = self.id(message);
                node = node.and_then(|n| self.edges.get(&(n, id)).copied());
                node
            })
            .collect()
    }

    /// Adds request `request`'s history; returns the node where it ends.
    fn insert(&mut self, history: &'a [Value], request: usize) -> usize {
        let mut node = self.root();
        for message in history {
            let id = self.id(message);
            let next = self.nodes.len();
            node = *self.edges.entry((node, id)).or_insert(next);
            if node == next {
                self.nodes.push(Node::default());
            }
            self.nodes[node].latest = request;
        }
        node
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
            proptest::prop_assert_eq!(chains(&histories), reference_chains(&histories));
        }
    }

    fn h(items: &[&str]) -> Vec<Value> {
        items.iter().map(|s| json!(s)).collect()
    }

    #[test]
    fn three_growing_requests_are_one_chain() {
        let got = chains(&[
            h(&["u1"]),
            h(&["u1", "a1", "t1"]),
            h(&["u1", "a1", "t1", "a2", "u2"]),
        ]);
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
        let got = chains(&[
            h(&["u1"]),
            h(&["u1", "a1", "u2"]),
            h(&["u1", "a1", "u2-edited"]),
        ]);
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
        let got = chains(&[h(&["x"]), h(&["y"]), h(&["x", "a", "x2"]), h(&["y"])]);
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
