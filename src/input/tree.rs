//! One way to read a JSON tree, whether it is a parsed `Value` or simd-json's tape.
//!
//! The chat reader reads a message through [`Tree`], so the same code reads it from a
//! `serde_json::Value` (its strings moved out) and from a [`TapeNode`] (a node of the tape
//! simd-json parsed the record into, its strings copied out once). Reading the tape skips the
//! `Value` tree: a `String` for every key, a B-tree node for every object, and dropping them
//! all again, which was a third of reading a small chat record.
//!
//! Both sides answer as a `Value` built from the same tape would: an object's later duplicate
//! key wins, its keys are listed in byte order once each, and a float too large for `f64` is
//! `null` (simd-json's serde path makes it so).

use serde_json::{Map, Value};
use simd_json::{Node, StaticNode};

pub(crate) use crate::model::tape::{TapeNode, TapeObject};

/// A JSON value to read from, taken apart as it is read.
pub(crate) trait Tree: Sized {
    /// An object of this tree.
    type Object: Object<Node = Self>;

    /// What the value is, its parts moved or copied out.
    fn into_json(self) -> Json<Self>;

    /// The string, or the value back when it is not one.
    fn into_string(self) -> Result<String, Self>;

    /// The elements of a list, walked rather than collected.
    type Items: Iterator<Item = Self>;

    /// The list's elements, or the value back when it is not a list: walked where they are,
    /// where [`Tree::into_json`] collects them (an allocation a list, on the hot path).
    fn into_items(self) -> Result<Self::Items, Self>;

    /// The string, borrowed, when the value is one: read without a copy.
    fn as_str(&self) -> Option<&str>;

    /// The value as JSON text, as serde_json writes a `Value` (keys in byte order).
    fn to_json(&self) -> String;

    fn is_null(&self) -> bool;

    /// An object's keys with their values, walked once and taken apart: a key given twice
    /// comes each time, in order, so the last is the one a `Value` keeps. The value back when
    /// it is not an object.
    fn each_entry(self, visit: impl FnMut(&str, Self)) -> Result<(), Self>;
}

/// An object of a [`Tree`], its values taken out by key.
pub(crate) trait Object {
    type Node;

    /// The value of `key`, taken out (`None` when the key is absent).
    fn take(&mut self, key: &str) -> Option<Self::Node>;

    /// The value of `key`, when it is a string.
    fn str_of(&self, key: &str) -> Option<&str>;

    fn contains(&self, key: &str) -> bool;
}

/// The keys of an object's entries (each with whether its value is `null`, in the order
/// given) as the object's `Value` keeps them: in byte order, once each, and a key whose last
/// value is `null` left out.
pub(crate) fn kept_keys<K: Ord + Into<String>>(mut entries: Vec<(K, bool)>) -> Vec<String> {
    if entries.is_empty() {
        return Vec::new();
    }
    // A stable sort keeps duplicates in the order given: the last of each is the one kept.
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut keys = Vec::new();
    let mut entries = entries.into_iter().peekable();
    while let Some((key, null)) = entries.next() {
        let last = entries.peek().is_none_or(|next| next.0 != key);
        if last && !null {
            keys.push(key.into());
        }
    }
    keys
}

/// A [`Tree`] value taken apart.
pub(crate) enum Json<N: Tree> {
    Null,
    Bool,
    Number,
    String(String),
    List(Vec<N>),
    Object(N::Object),
}

impl<N: Tree> Json<N> {
    /// The JSON type, as messages about a wrong type name it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool => "boolean",
            Json::Number => "number",
            Json::String(_) => "string",
            Json::List(_) => "list",
            Json::Object(_) => "object",
        }
    }
}

impl Tree for Value {
    type Object = Map<String, Value>;

    fn into_json(self) -> Json<Value> {
        match self {
            Value::Null => Json::Null,
            Value::Bool(_) => Json::Bool,
            Value::Number(_) => Json::Number,
            Value::String(s) => Json::String(s),
            Value::Array(items) => Json::List(items),
            Value::Object(map) => Json::Object(map),
        }
    }

    fn into_string(self) -> Result<String, Value> {
        match self {
            Value::String(s) => Ok(s),
            other @ Value::Null
            | other @ Value::Bool(_)
            | other @ Value::Number(_)
            | other @ Value::Array(_)
            | other @ Value::Object(_) => Err(other),
        }
    }

    type Items = std::vec::IntoIter<Value>;

    fn into_items(self) -> Result<Self::Items, Value> {
        match self {
            Value::Array(items) => Ok(items.into_iter()),
            other @ Value::Null
            | other @ Value::Bool(_)
            | other @ Value::Number(_)
            | other @ Value::String(_)
            | other @ Value::Object(_) => Err(other),
        }
    }

    fn as_str(&self) -> Option<&str> {
        Value::as_str(self)
    }

    fn to_json(&self) -> String {
        self.to_string()
    }

    fn is_null(&self) -> bool {
        Value::is_null(self)
    }

    fn each_entry(self, mut visit: impl FnMut(&str, Value)) -> Result<(), Value> {
        match self {
            Value::Object(map) => {
                for (key, value) in map {
                    visit(&key, value);
                }
                Ok(())
            }
            other @ Value::Null
            | other @ Value::Bool(_)
            | other @ Value::Number(_)
            | other @ Value::String(_)
            | other @ Value::Array(_) => Err(other),
        }
    }
}

impl Object for Map<String, Value> {
    type Node = Value;

    /// Moved out, `null` left in its place.
    fn take(&mut self, key: &str) -> Option<Value> {
        self.get_mut(key).map(std::mem::take)
    }

    fn str_of(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }

    fn contains(&self, key: &str) -> bool {
        self.contains_key(key)
    }
}

impl<'t> Tree for TapeNode<'t> {
    type Object = TapeObject<'t>;

    fn into_json(self) -> Json<TapeNode<'t>> {
        match self.node() {
            None | Some(Node::Static(StaticNode::Null)) => Json::Null,
            Some(Node::Static(StaticNode::Bool(_))) => Json::Bool,
            Some(Node::Static(StaticNode::F64(f))) if !f.is_finite() => Json::Null,
            Some(Node::Static(_)) => Json::Number,
            Some(Node::String(s)) => Json::String(s.to_owned()),
            Some(Node::Array { .. }) => Json::List(self.items().collect()),
            Some(Node::Object { len, .. }) => {
                Json::Object(TapeObject::new(self.nodes(), self.at(), len))
            }
        }
    }

    fn into_string(self) -> Result<String, TapeNode<'t>> {
        match self.node() {
            Some(Node::String(s)) => Ok(s.to_owned()),
            _ => Err(self),
        }
    }

    type Items = crate::model::tape::TapeItems<'t>;

    fn into_items(self) -> Result<Self::Items, TapeNode<'t>> {
        match self.is_list() {
            true => Ok(self.items()),
            false => Err(self),
        }
    }

    fn as_str(&self) -> Option<&str> {
        TapeNode::as_str(self)
    }

    /// Built as a `Value` first, so that it is the text the `Value` path writes.
    fn to_json(&self) -> String {
        let mut at = self.at();
        super::parse::tape_value_at(self.nodes(), &mut at)
            .unwrap_or(Value::Null)
            .to_string()
    }

    fn is_null(&self) -> bool {
        match self.node() {
            None | Some(Node::Static(StaticNode::Null)) => true,
            Some(Node::Static(StaticNode::F64(f))) => !f.is_finite(),
            _ => false,
        }
    }

    fn each_entry(self, mut visit: impl FnMut(&str, TapeNode<'t>)) -> Result<(), TapeNode<'t>> {
        let entries = self.entries().ok_or(self)?;
        for (key, value) in entries {
            visit(key, value);
        }
        Ok(())
    }
}

impl<'t> Object for TapeObject<'t> {
    type Node = TapeNode<'t>;

    #[inline(always)]
    fn take(&mut self, key: &str) -> Option<TapeNode<'t>> {
        self.find(key)
    }

    fn str_of(&self, key: &str) -> Option<&str> {
        match self.find(key)?.node()? {
            Node::String(s) => Some(s),
            Node::Object { .. } | Node::Array { .. } | Node::Static(_) => None,
        }
    }

    fn contains(&self, key: &str) -> bool {
        TapeObject::contains(self, key)
    }
}
