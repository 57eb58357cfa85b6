//! Paths into a record: `body.messages`, `answer_generation.train_messages[-1]`.
//!
//! They live with the rules because the rule files declare them (`messages_at`, `finished`);
//! the input adapters only follow them.

use std::fmt;

use serde_json::Value;

/// A parsed path: keys separated by dots, each optionally followed by `[i]` indexes (negative
/// indexes count from the end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathExpr {
    text: String,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(i64),
}

impl PathExpr {
    /// Parses a path; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<PathExpr, String> {
        let mut steps = Vec::new();
        if text.trim().is_empty() {
            return Err("empty path".to_string());
        }
        for segment in text.split('.') {
            let (key, mut rest) = match segment.find('[') {
                Some(i) => (&segment[..i], &segment[i..]),
                None => (segment, ""),
            };
            if key.is_empty() && steps.is_empty() && rest.is_empty() {
                return Err(format!("empty key in `{text}`"));
            }
            if !key.is_empty() {
                steps.push(Step::Key(key.to_string()));
            } else if rest.is_empty() {
                return Err(format!("empty key in `{text}`"));
            }
            while !rest.is_empty() {
                let close = rest
                    .find(']')
                    .ok_or_else(|| format!("unclosed `[` in `{text}`"))?;
                if !rest.starts_with('[') {
                    return Err(format!("unexpected `{rest}` in `{text}`"));
                }
                let index: i64 = rest[1..close]
                    .trim()
                    .parse()
                    .map_err(|_| format!("`{}` is not an index in `{text}`", &rest[1..close]))?;
                steps.push(Step::Index(index));
                rest = &rest[close + 1..];
            }
        }
        Ok(PathExpr {
            text: text.to_string(),
            steps,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The node at this path in any JSON tree, if every step exists: `first` looks up the
    /// root's keys, `key` the keys of an object below it, `index` an array's element (a
    /// negative index counts from the end; see [`PathExpr::get`], which is this walk on a
    /// `Value`). A reader asking one object for many paths makes its lookup once: a tape
    /// object's key bits answer an absent key, as most of a rule file's are, without a walk
    /// of its keys.
    pub(crate) fn walk<N>(
        &self,
        root: N,
        first: impl Fn(&str) -> Option<N>,
        key: impl Fn(N, &str) -> Option<N>,
        index: impl Fn(N, i64) -> Option<N>,
    ) -> Option<N> {
        let mut steps = self.steps.iter();
        let mut current = match steps.next() {
            None => return Some(root),
            Some(Step::Key(k)) => first(k)?,
            Some(Step::Index(i)) => index(root, *i)?,
        };
        for step in steps {
            current = match step {
                Step::Key(k) => key(current, k)?,
                Step::Index(i) => index(current, *i)?,
            };
        }
        Some(current)
    }

    /// True when one path is a prefix of the other, so that the value at one may hold, or be
    /// part of, the value at the other. Two indexes count as the same step (`[0]` and `[-1]`
    /// are one element of a list of one); a key and an index never are (an object has no
    /// index, a list no key).
    pub(crate) fn overlaps(&self, other: &PathExpr) -> bool {
        self.steps.iter().zip(&other.steps).all(|pair| match pair {
            (Step::Key(a), Step::Key(b)) => a == b,
            (Step::Index(_), Step::Index(_)) => true,
            _ => false,
        })
    }

    /// The value at this path, if every step exists.
    pub fn get<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        let mut current = value;
        for step in &self.steps {
            current = match step {
                Step::Key(key) => current.as_object()?.get(key)?,
                Step::Index(i) => {
                    let list = current.as_array()?;
                    list.get(resolve(*i, list.len())?)?
                }
            };
        }
        Some(current)
    }

    /// Mutable access, to move the value out without copying it.
    pub fn get_mut<'v>(&self, value: &'v mut Value) -> Option<&'v mut Value> {
        let mut current = value;
        for step in &self.steps {
            current = match step {
                Step::Key(key) => current.as_object_mut()?.get_mut(key)?,
                Step::Index(i) => {
                    let list = current.as_array_mut()?;
                    let len = list.len();
                    list.get_mut(resolve(*i, len)?)?
                }
            };
        }
        Some(current)
    }
}

pub(crate) use crate::model::tape::resolve;

impl fmt::Display for PathExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_resolve_keys_and_indexes() {
        let v = json!({"a": {"b": [[1], [2, 3]]}});
        assert_eq!(
            PathExpr::parse("a.b[-1]").unwrap().get(&v),
            Some(&json!([2, 3]))
        );
        assert_eq!(
            PathExpr::parse("a.b[0][0]").unwrap().get(&v),
            Some(&json!(1))
        );
        assert_eq!(PathExpr::parse("a.b[5]").unwrap().get(&v), None);
        assert_eq!(PathExpr::parse("a.c").unwrap().get(&v), None);
    }

    #[test]
    fn bad_paths_are_rejected() {
        assert!(PathExpr::parse("").is_err());
        assert!(PathExpr::parse("a[x]").is_err());
        assert!(PathExpr::parse("a[1").is_err());
    }
}
