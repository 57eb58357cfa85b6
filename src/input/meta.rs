//! A record's facts (id, start time, model, whether it is finished) read by the rule file's
//! paths, from a `Value` or from simd-json's tape: the chat reader and the logged-request
//! readers (streamed Chat Completions, Responses) find them the same way.

use serde_json::Value;

use super::tree::{TapeNode, TapeObject};
use crate::model::time::{epoch_number_to_ms, parse_rfc3339_ms};
use crate::model::transcript::RecordMeta;
use crate::rules::{InputRules, PathExpr};

/// The record's facts by the rule paths, read from its `Value`.
pub(crate) fn read_meta(record: &Value, rules: &InputRules, meta: &mut RecordMeta) {
    read_meta_with(
        rules,
        meta,
        |path| path.get(record).map(Found::of_value),
        |path| path.get(record).cloned(),
    );
}

/// [`read_meta`] of a record on the parser's tape: the same paths and the same readings,
/// without the record's `Value` (building it and searching its maps costs more than the reading).
pub(crate) fn read_meta_tape(
    root: TapeNode<'_>,
    record: &TapeObject<'_>,
    rules: &InputRules,
    meta: &mut RecordMeta,
) {
    let first = |key: &str| record.find(key);
    let find = |path: &PathExpr| path.walk(root, first, TapeNode::lookup, TapeNode::index);
    read_meta_with(
        rules,
        meta,
        |path| find(path).map(Found::of_tape),
        |path| {
            let node = find(path)?;
            super::parse::tape_value_at(node.nodes(), &mut node.at())
        },
    );
}

/// A value a rule path of the record's meta found, as [`read_meta`] reads it.
pub(crate) enum Found<'v> {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(&'v str),
    /// A list or an object.
    Nested,
}

impl<'v> Found<'v> {
    fn of_value(value: &'v Value) -> Found<'v> {
        match value {
            Value::Null => Found::Null,
            Value::Bool(b) => Found::Bool(*b),
            Value::Number(n) => Found::Number(n.clone()),
            Value::String(s) => Found::String(s),
            Value::Array(_) | Value::Object(_) => Found::Nested,
        }
    }

    /// As [`super::parse::tape_value_at`] reads the node: a float that is not finite is null.
    pub(crate) fn of_tape(node: TapeNode<'v>) -> Found<'v> {
        use simd_json::{Node, StaticNode};
        match node.node() {
            None | Some(Node::Static(StaticNode::Null)) => Found::Null,
            Some(Node::Static(StaticNode::Bool(b))) => Found::Bool(b),
            Some(Node::Static(StaticNode::I64(n))) => Found::Number(n.into()),
            Some(Node::Static(StaticNode::U64(n))) => Found::Number(n.into()),
            Some(Node::Static(StaticNode::F64(f))) => {
                serde_json::Number::from_f64(f).map_or(Found::Null, Found::Number)
            }
            Some(Node::String(s)) => Found::String(s),
            Some(Node::Array { .. } | Node::Object { .. }) => Found::Nested,
        }
    }
}

/// The record's id, start time, model and finished signal by the rule paths: `find` reads
/// the value at a path, `value_at` makes it a `Value` (only a finished signal's `equals` that
/// is not a string compares a whole value).
fn read_meta_with<'v>(
    rules: &InputRules,
    meta: &mut RecordMeta,
    find: impl Fn(&PathExpr) -> Option<Found<'v>>,
    value_at: impl Fn(&PathExpr) -> Option<Value>,
) {
    meta.id = rules.id_at.iter().find_map(|p| match find(p)? {
        Found::String(s) => Some(s.to_string()),
        Found::Number(n) => Some(n.to_string()),
        Found::Null | Found::Bool(_) | Found::Nested => None,
    });
    meta.created_ms = rules.created_at.iter().find_map(|p| match find(p)? {
        Found::Number(n) => epoch_number_to_ms(n.as_f64()?),
        Found::String(s) => parse_rfc3339_ms(s),
        Found::Null | Found::Bool(_) | Found::Nested => None,
    });
    meta.model = rules.model_at.iter().find_map(|p| match find(p)? {
        Found::String(s) => Some(s.to_string()),
        Found::Null | Found::Bool(_) | Found::Number(_) | Found::Nested => None,
    });
    meta.finished = rules
        .finished
        .iter()
        .any(|signal| match find(&signal.path) {
            None | Some(Found::Null) => false,
            Some(found) => match &signal.equals {
                None => !matches!(found, Found::Bool(false)),
                Some(expected) => match found {
                    Found::String(s) => s == expected,
                    Found::Null | Found::Bool(_) | Found::Number(_) | Found::Nested => {
                        value_at(&signal.path).is_some_and(|other| {
                            serde_json::from_str::<Value>(expected).is_ok_and(|e| e == other)
                        })
                    }
                },
            },
        });
}
