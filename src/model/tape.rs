//! JSON read from simd-json's tape, in a per-thread scratch: how input records are parsed.
//!
//! The chat reader reads a record off the tape ([`crate::input::tree`] gives [`TapeNode`] its
//! `Tree` reading), building no `serde_json::Value`: no `String` per key, no B-tree node per
//! object, nothing to drop again. The buffers are the thread's and
//! are reused from record to record ([`with_scratch`]).
//!
//! A tape answers as a `Value` built from it would: an object's later duplicate key wins
//! ([`TapeObject::find`]). [`is_plain`] says when a tape holds nothing a `Value` reader treats
//! apart (nesting past [`MAX_DEPTH`], serde_json's raw-value key), so that a caller can leave
//! those to its careful path.

use simd_json::Node;

use super::json::is_raw_value_key;

/// serde_json's nesting limit (arrays and objects), which Codex shares.
pub(crate) const MAX_DEPTH: usize = 128;

/// Per-thread parse buffers, reused from record to record: memory is bound by the largest
/// record a thread has parsed (and given back past [`Scratch::KEEP`]).
struct Scratch {
    input: Vec<u8>,
    buffers: simd_json::Buffers,
    /// The tape's nodes, kept empty between records (a tape allocated per record, then grown,
    /// cost its allocation and its reallocations' copies).
    tape: simd_json::tape::Tape<'static>,
}

impl Scratch {
    /// Buffers grown past this for one huge record are freed after it.
    const KEEP: usize = 16 << 20;

    fn trim(&mut self) {
        let tape_bytes = self.tape.0.capacity() * std::mem::size_of::<Node<'_>>();
        if self.input.capacity() > Self::KEEP || tape_bytes > Self::KEEP {
            *self = Scratch::default();
        }
    }
}

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch {
            input: Vec::new(),
            buffers: simd_json::Buffers::new(64 << 10),
            tape: simd_json::tape::Tape(Vec::new()),
        }
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Copies `bytes` into this thread's scratch, lets `prepare` repair the copy in place (it
/// returns how many repairs it made), parses the copy into a simd-json tape and runs `read` on
/// the repairs and the tape (`None` when the copy is not JSON). `read` must not call this
/// again: the scratch is in use until it returns (a nested call would find it borrowed, and
/// gets `None` for the tape).
pub(crate) fn with_scratch<R>(
    bytes: &[u8],
    prepare: impl FnOnce(&mut [u8]) -> usize,
    read: impl FnOnce(usize, Option<&[Node<'_>]>) -> R,
) -> R {
    SCRATCH.with(|scratch| {
        let Ok(mut scratch) = scratch.try_borrow_mut() else {
            return read(0, None);
        };
        let Scratch {
            input,
            buffers,
            tape,
        } = &mut *scratch;
        input.clear();
        input.extend_from_slice(bytes);
        let repairs = prepare(input);
        // Padded here, parsed in place: `fill_tape` copied every record once more into an
        // aligned buffer of its own, to pad it (the same spaces as here).
        input.resize(bytes.len() + simd_json::INPUT_PADDING, b' ');
        let mut filled = std::mem::replace(tape, simd_json::tape::Tape(Vec::new())).reset();
        let parsed = simd_json::fill_tape_padded(input, bytes.len(), buffers, &mut filled).is_ok();
        let result = read(repairs, parsed.then_some(filled.0.as_slice()));
        *tape = filled.reset();
        scratch.trim();
        result
    })
}

/// How many tape nodes the value at `nodes[at]` spans, itself included (an object's keys are
/// nodes of the tape too).
pub(crate) fn span(nodes: &[Node<'_>], at: usize) -> usize {
    match nodes.get(at) {
        Some(Node::Array { count, .. } | Node::Object { count, .. }) => count + 1,
        _ => 1,
    }
}

/// True when the tape holds nothing the input's `Value` reader treats apart: arrays and
/// objects nested at most [`MAX_DEPTH`] deep, no object whose first key is serde_json's
/// raw-value name.
pub(crate) fn is_plain(nodes: &[Node<'_>]) -> bool {
    nests_within(nodes, MAX_DEPTH)
}

/// True when arrays and objects nest at most `levels` deep (at most [`MAX_DEPTH`]) and no
/// object's first key is serde_json's raw-value name. One pass over the nodes, keeping where
/// each open array or object ends.
fn nests_within(nodes: &[Node<'_>], levels: usize) -> bool {
    // Where each open array or object ends, on the stack: a Vec here was an allocation per
    // record and per validated body.
    let mut ends = [0usize; MAX_DEPTH];
    let levels = levels.min(MAX_DEPTH);
    let mut depth = 0;
    for (at, node) in nodes.iter().enumerate() {
        while depth > 0 && ends.get(depth - 1) == Some(&at) {
            depth -= 1;
        }
        let (first_key, count) = match node {
            Node::Array { count, .. } => (None, *count),
            Node::Object { len, count } => (nodes.get(at + 1).filter(|_| *len > 0), *count),
            Node::String(_) | Node::Static(_) => continue,
        };
        let raw_value = matches!(first_key, Some(Node::String(key)) if is_raw_value_key(key));
        let Some(end) = ends.get_mut(depth).filter(|_| !raw_value && depth < levels) else {
            return false;
        };
        *end = at + count + 1;
        depth += 1;
    }
    true
}

/// A list index as a path names it: from the start, or from the end when negative.
pub(crate) fn resolve(index: i64, len: usize) -> Option<usize> {
    if index >= 0 {
        usize::try_from(index).ok()
    } else {
        len.checked_sub(usize::try_from(index.unsigned_abs()).ok()?)
    }
}

/// A value in a simd-json tape: the tape and the value's node.
#[derive(Clone, Copy)]
pub(crate) struct TapeNode<'t> {
    nodes: &'t [Node<'t>],
    at: usize,
}

impl<'t> TapeNode<'t> {
    pub(crate) fn new(nodes: &'t [Node<'t>], at: usize) -> TapeNode<'t> {
        TapeNode { nodes, at }
    }

    #[cfg(test)]
    /// The root value of a tape.
    pub(crate) fn root(nodes: &'t [Node<'t>]) -> TapeNode<'t> {
        TapeNode { nodes, at: 0 }
    }

    pub(crate) fn at(&self) -> usize {
        self.at
    }

    /// The whole tape this node is in.
    pub(crate) fn nodes(&self) -> &'t [Node<'t>] {
        self.nodes
    }

    pub(crate) fn node(&self) -> Option<Node<'t>> {
        self.nodes.get(self.at).copied()
    }

    pub(crate) fn is_string(&self) -> bool {
        matches!(self.node(), Some(Node::String(_)))
    }

    /// The string, when this is one.
    pub(crate) fn as_str(&self) -> Option<&'t str> {
        match self.node()? {
            Node::String(s) => Some(s),
            Node::Object { .. } | Node::Array { .. } | Node::Static(_) => None,
        }
    }

    pub(crate) fn is_object(&self) -> bool {
        matches!(self.node(), Some(Node::Object { .. }))
    }

    pub(crate) fn is_list(&self) -> bool {
        matches!(self.node(), Some(Node::Array { .. }))
    }

    /// The value at `key` of this object (the last one, as a `Value` keeps it).
    pub(crate) fn get(self, key: &str) -> Option<TapeNode<'t>> {
        self.object()?.find(key)
    }

    /// The value at `key` of this object, found by one walk of its keys (no key bits made:
    /// for a reader that asks an object once or twice).
    pub(crate) fn lookup(self, key: &str) -> Option<TapeNode<'t>> {
        let Some(Node::Object { len, .. }) = self.node() else {
            return None;
        };
        let nodes = self.nodes;
        let mut at = self.at + 1;
        let mut found = None;
        for _ in 0..len {
            let Some(Node::String(k)) = nodes.get(at).copied() else {
                return found;
            };
            if k == key {
                found = Some(TapeNode { nodes, at: at + 1 });
            }
            at += 1 + span(nodes, at + 1);
        }
        found
    }

    /// Element `index` of this array (a negative index counts from the end).
    pub(crate) fn index(self, index: i64) -> Option<TapeNode<'t>> {
        let Some(Node::Array { len, .. }) = self.node() else {
            return None;
        };
        let index = resolve(index, len)?;
        self.items().nth(index)
    }

    /// Each key of this object with its value, in the record's order (a key given twice comes
    /// twice), walked once and without the key bits a [`TapeObject`] makes; `None` when this
    /// is not an object.
    pub(crate) fn entries(self) -> Option<impl Iterator<Item = (&'t str, TapeNode<'t>)>> {
        match self.node()? {
            Node::Object { len, .. } => Some(entries(self.nodes, self.at, len)),
            Node::String(_) | Node::Array { .. } | Node::Static(_) => None,
        }
    }

    /// This value as an object, when it is one.
    pub(crate) fn object(self) -> Option<TapeObject<'t>> {
        match self.node()? {
            Node::Object { len, .. } => Some(TapeObject::new(self.nodes, self.at, len)),
            Node::String(_) | Node::Array { .. } | Node::Static(_) => None,
        }
    }

    /// The elements of this array (none if it is not one).
    pub(crate) fn items(self) -> TapeItems<'t> {
        let left = match self.node() {
            Some(Node::Array { len, .. }) => len,
            _ => 0,
        };
        TapeItems {
            nodes: self.nodes,
            at: self.at + 1,
            left,
        }
    }
}

/// The elements of an array of a tape, in order ([`TapeNode::items`]): walked, never
/// collected, and cheap to walk again (a copy is a position in the tape).
#[derive(Clone, Copy)]
pub(crate) struct TapeItems<'t> {
    nodes: &'t [Node<'t>],
    /// The next element's node.
    at: usize,
    left: usize,
}

impl<'t> Iterator for TapeItems<'t> {
    type Item = TapeNode<'t>;

    fn next(&mut self) -> Option<TapeNode<'t>> {
        self.left = self.left.checked_sub(1)?;
        let item = TapeNode {
            nodes: self.nodes,
            at: self.at,
        };
        self.at += span(self.nodes, self.at);
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for TapeItems<'_> {}

/// An object in a simd-json tape. Reading a value leaves the tape as it is: a key read twice
/// reads the same value.
pub(crate) struct TapeObject<'t> {
    nodes: &'t [Node<'t>],
    at: usize,
    len: usize,
    /// A bit for each of its keys ([`key_bit`]): most keys a reader asks for are absent (a
    /// content part has a few of those the part reader asks for), and a clear bit says so
    /// without a walk. A reader that wants most of an object's keys walks it once instead
    /// ([`TapeNode::entries`]: a chat message, a tool call).
    keys: u64,
}

/// Each key of the object at `nodes[at]` (of `len` keys) with its value, in the record's
/// order.
fn entries<'t>(
    nodes: &'t [Node<'t>],
    at: usize,
    len: usize,
) -> impl Iterator<Item = (&'t str, TapeNode<'t>)> {
    let mut at = at + 1;
    (0..len).map_while(move |_| {
        let Some(Node::String(key)) = nodes.get(at).copied() else {
            return None;
        };
        let value = TapeNode { nodes, at: at + 1 };
        at += 1 + span(nodes, at + 1);
        Some((key, value))
    })
}

/// A key's bit in [`TapeObject::keys`], from its length and its first and last bytes (the
/// eleven keys of a chat message each have their own).
#[inline(always)]
fn key_bit(key: &str) -> u64 {
    let bytes = key.as_bytes();
    let (first, last) = (bytes.first().copied(), bytes.last().copied());
    let sum = key.len() + usize::from(first.unwrap_or(0)) + usize::from(last.unwrap_or(0));
    1 << (sum % 64)
}

impl<'t> TapeObject<'t> {
    pub(crate) fn new(nodes: &'t [Node<'t>], at: usize, len: usize) -> TapeObject<'t> {
        let mut object = TapeObject {
            nodes,
            at,
            len,
            keys: 0,
        };
        object.keys = object.entries().fold(0, |keys, (k, _)| keys | key_bit(k));
        object
    }

    /// Each key with its value, in the record's order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&'t str, TapeNode<'t>)> {
        entries(self.nodes, self.at, self.len)
    }

    /// The value of `key` (the last one, as a `Value` keeps it). Inlined: for a key the caller
    /// names, the bit test folds to a constant mask.
    #[inline(always)]
    pub(crate) fn find(&self, key: &str) -> Option<TapeNode<'t>> {
        if self.keys & key_bit(key) == 0 {
            return None;
        }
        self.find_walk(key)
    }

    fn find_walk(&self, key: &str) -> Option<TapeNode<'t>> {
        self.entries()
            .filter(|(k, _)| *k == key)
            .last()
            .map(|(_, v)| v)
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.keys & key_bit(key) != 0 && self.entries().any(|(k, _)| k == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tape of `text`, read by `read`.
    fn on_tape<R>(text: &str, read: impl FnOnce(&[Node<'_>]) -> R) -> R {
        with_scratch(
            text.as_bytes(),
            |_| 0,
            |_, nodes| read(nodes.unwrap_or(&[])),
        )
    }

    #[test]
    fn nesting_is_counted_as_serde_json_counts_it() {
        for depth in [1, 127, 128, 129, 300] {
            for (open, close) in [("[", "]"), ("{\"k\":", "}")] {
                let text = format!("{}1{}", open.repeat(depth), close.repeat(depth));
                let serde = serde_json::from_str::<serde_json::Value>(&text).is_ok();
                let within = on_tape(&text, |nodes| nests_within(nodes, MAX_DEPTH - 1));
                assert_eq!(within, serde, "{open} x {depth}");
                assert_eq!(
                    on_tape(&text, is_plain),
                    depth <= MAX_DEPTH,
                    "{open} x {depth}"
                );
            }
        }
        // Siblings close their parents: depth, not the count of arrays, is what counts.
        let wide = format!("[{}]", vec!["[[1]]"; 200].join(","));
        assert!(on_tape(&wide, is_plain));
        // serde_json's raw-value key at the head of an object, when its build has one.
        if let Some(key) = crate::model::json::raw_value_key() {
            let raw = format!("{{{}:1}}", serde_json::to_string(key).unwrap_or_default());
            assert!(!on_tape(&raw, is_plain));
        }
    }

    #[test]
    fn a_later_duplicate_key_wins_by_either_lookup() {
        on_tape(r#"{"a":1,"b":"x","b":"y","c":[1,2,3]}"#, |nodes| {
            let root = TapeNode::root(nodes);
            assert_eq!(root.get("b").and_then(|n| n.as_str()), Some("y"));
            assert_eq!(root.lookup("b").and_then(|n| n.as_str()), Some("y"));
            assert!(root.lookup("z").is_none());
            assert_eq!(root.get("c").map(|c| c.items().count()), Some(3));
            assert_eq!(
                root.get("c").and_then(|c| c.index(-1)).map(|n| n.at()),
                root.get("c").and_then(|c| c.index(2)).map(|n| n.at())
            );
        });
    }
}
