//! The wire types' one declaration: a table line per field gives its Rust name and type, its
//! JSON name and when it is left out, and from that one line [`wire_struct!`] and
//! [`wire_enum!`] emit the `#[derive(Serialize)]` type (`#[serde(rename = ..)]` from the
//! literal), the fast writer ([`WriteJson`]), and the list of members ([`Member`]) that the
//! byte templates read back in the same order.
//!
//! The fast writer writes the bytes serde_json writes for the derived `Serialize` (the tests of
//! `convert::render` and `convert::responses` compare the two on every shape): keys are copied
//! whole as `,"name":` (a literal needs no escape), strings go through
//! [`escape_into`], a field skipped by serde is skipped here by the same test. Why not
//! serde_json: it escapes each constant key byte by byte (the cost: `samples/BENCHMARKS.md`).
//!
//! A field's writer may be replaced (`with path`) where a line shares bytes with the next: a
//! message's one text part is marked where it was written, and its UI event copies those bytes
//! instead of escaping the text again ([`JsonOut::mark_text`], [`JsonOut::copied_text`]).

use std::borrow::Cow;
use std::ops::Range;

use crate::model::json::escape_into;

/// Where the fast writer writes, with the one text part it marked and the range to copy for
/// the next copied text.
pub(crate) struct JsonOut<'o> {
    pub bytes: &'o mut Vec<u8>,
    /// Text parts marked since [`JsonOut::take_marked`], and where the last one was written
    /// (escaped, quotes included).
    marked: usize,
    mark: Range<usize>,
    /// Bytes already written that the next [`JsonOut::copied_text`] copies instead of
    /// escaping its text again.
    copy: Option<Range<usize>>,
}

impl<'o> JsonOut<'o> {
    pub(crate) fn new(bytes: &'o mut Vec<u8>) -> JsonOut<'o> {
        JsonOut {
            bytes,
            marked: 0,
            mark: 0..0,
            copy: None,
        }
    }

    /// `SEP"KEY":` where `SEP` is `{` for an object's first member and `,` for the others;
    /// `member` is a name's `,"name":`, copied in one piece.
    #[inline]
    pub(crate) fn key(&mut self, sep: u8, member: &str) {
        if sep == b',' {
            self.bytes.extend_from_slice(member.as_bytes());
        } else {
            self.bytes.push(sep);
            self.bytes.extend_from_slice(&member.as_bytes()[1..]);
        }
    }

    /// `{"KEY":"NAME"`: a tagged object's start. `name` is a literal of a table, written
    /// between quotes as it is.
    #[inline]
    pub(crate) fn tag(&mut self, member: &str, name: &str) {
        self.key(b'{', member);
        self.bytes.push(b'"');
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(b'"');
    }

    /// The end of an object whose next separator is `sep` (`{` when no member was written).
    #[inline]
    pub(crate) fn close(&mut self, sep: u8) {
        if sep == b'{' {
            self.bytes.push(b'{');
        }
        self.bytes.push(b'}');
    }

    /// A text part's text, marked where it was written.
    #[inline]
    pub(crate) fn mark_text(text: &str, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        let start = out.bytes.len();
        escape_into(out.bytes, text);
        out.marked += 1;
        out.mark = start..out.bytes.len();
        Ok(())
    }

    /// Where the one text part marked since the last call was written, if exactly one was.
    pub(crate) fn take_marked(&mut self) -> Option<Range<usize>> {
        let one = self.marked == 1;
        self.marked = 0;
        one.then(|| self.mark.clone())
    }

    /// Makes the next [`JsonOut::copied_text`] copy `range` of the bytes written.
    pub(crate) fn copy_next(&mut self, range: Option<Range<usize>>) {
        self.copy = range;
    }

    /// A text that may already have been written escaped ([`JsonOut::copy_next`]): copied
    /// then, else escaped.
    #[inline]
    pub(crate) fn copied_text(text: &str, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        match out.copy.take() {
            Some(range) => out.bytes.extend_from_within(range),
            None => escape_into(out.bytes, text),
        }
        Ok(())
    }

    /// A value through serde_json: for what no table declares (maps read from a source).
    pub(crate) fn serde<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        serde_json::to_writer(&mut *self.bytes, value)
    }
}

/// Writes the JSON serde_json writes for the value's `Serialize`, faster.
pub(crate) trait WriteJson {
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error>;
}

impl WriteJson for str {
    #[inline]
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        escape_into(out.bytes, self);
        Ok(())
    }
}

impl WriteJson for String {
    #[inline]
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        self.as_str().write_json(out)
    }
}

/// Counts, as serde_json writes them: decimal digits.
macro_rules! write_unsigned {
    ($($ty:ty),*) => {$(
        impl WriteJson for $ty {
            #[inline]
            fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
                crate::model::json::decimal_into(out.bytes, *self as u64);
                Ok(())
            }
        }
    )*};
}
write_unsigned!(u32, u64, usize);

impl WriteJson for bool {
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        out.bytes
            .extend_from_slice(if *self { b"true" } else { b"false" });
        Ok(())
    }
}

impl<T: WriteJson + ?Sized> WriteJson for &T {
    #[inline]
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        (**self).write_json(out)
    }
}

impl<T: WriteJson + ToOwned + ?Sized> WriteJson for Cow<'_, T> {
    #[inline]
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        (**self).write_json(out)
    }
}

/// `null` when absent (a field that leaves it out says `if "Option::is_none"`).
impl<T: WriteJson> WriteJson for Option<T> {
    #[inline]
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        match self {
            Some(value) => value.write_json(out),
            None => {
                out.bytes.extend_from_slice(b"null");
                Ok(())
            }
        }
    }
}

impl<T: WriteJson> WriteJson for [T] {
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        out.bytes.push(b'[');
        for (i, value) in self.iter().enumerate() {
            if i > 0 {
                out.bytes.push(b',');
            }
            value.write_json(out)?;
        }
        out.bytes.push(b']');
        Ok(())
    }
}

impl<T: WriteJson> WriteJson for Vec<T> {
    #[inline]
    fn write_json(&self, out: &mut JsonOut<'_>) -> Result<(), serde_json::Error> {
        self.as_slice().write_json(out)
    }
}

/// One member of a declared object, as the byte templates read it: its name, its `,"name":`,
/// and whether the writer may leave it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) name: &'static str,
    pub(crate) key: &'static str,
    pub(crate) optional: bool,
}

/// Whether a field's value is left out, by the `skip_serializing_if` it gives serde (one of
/// the two the tables use; another one does not compile).
macro_rules! wire_skip {
    ("Option::is_none", $value:expr) => {
        Option::is_none($value)
    };
    ("Vec::is_empty", $value:expr) => {
        Vec::is_empty($value)
    };
    ($value:expr) => {
        false
    };
}
pub(crate) use wire_skip;

/// Whether a field may be left out: whether it says when.
macro_rules! wire_optional {
    ($skip:tt) => {
        true
    };
    () => {
        false
    };
}
pub(crate) use wire_optional;

/// A field's writer: its own `with`, or its type's [`WriteJson`].
macro_rules! wire_write {
    ($with:path; $value:expr, $out:expr) => {
        $with($value, $out)
    };
    (; $value:expr, $out:expr) => {
        $crate::model::rollout::table::WriteJson::write_json($value, $out)
    };
}
pub(crate) use wire_write;

/// One member: `SEP"name":` and its value, unless it is left out; `sep` is `,` after it.
macro_rules! wire_member {
    ($out:ident, $sep:ident, $value:expr; $lit:tt $(if $skip:tt)? $(with $with:path)?) => {
        if !$crate::model::rollout::table::wire_skip!($($skip,)? $value) {
            $out.key($sep, concat!(",\"", $lit, "\":"));
            $sep = b',';
            $crate::model::rollout::table::wire_write!($($with)?; $value, $out)?;
        }
    };
}
pub(crate) use wire_member;

/// `{"type":..` first, when the object is tagged; `{` is the next separator otherwise.
macro_rules! wire_open {
    ($out:expr; $key:tt = $name:tt) => {{
        $out.tag(concat!(",\"", $key, "\":"), $name);
        b','
    }};
    ($out:expr;) => {
        b'{'
    };
}
pub(crate) use wire_open;

/// Declares a struct the wire carries: one line a field, `name: Type = "json_name"`, then
/// `if "Option::is_none"` (or `"Vec::is_empty"`) when serde leaves it out, and `with path` when
/// a writer of its own writes it. `tag "type" = "name"` before the fields writes the object's
/// type first (serde's `tag` on a struct). Emits the struct with `#[derive(Serialize)]`, its
/// [`WriteJson`], and `MEMBERS`, its [`Member`]s in order.
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(<$lt:lifetime>)? $(tag $tag_key:tt = $tag:tt)? {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $ty:ty = $lit:tt $(if $skip:tt)? $(with $with:path)?
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Serialize)]
        $(#[serde(tag = $tag_key, rename = $tag)])?
        $vis struct $name $(<$lt>)? {
            $(
                $(#[$fmeta])*
                #[serde(rename = $lit $(, skip_serializing_if = $skip)?)]
                $fvis $field: $ty,
            )*
        }

        impl $(<$lt>)? $name $(<$lt>)? {
            /// The members the writer writes, in order.
            #[allow(dead_code)]
            pub(crate) const MEMBERS: &'static [$crate::model::rollout::table::Member] = &[$(
                $crate::model::rollout::table::Member {
                    name: $lit,
                    key: concat!(",\"", $lit, "\":"),
                    optional: $crate::model::rollout::table::wire_optional!($($skip)?),
                },
            )*];
        }

        impl $(<$lt>)? $crate::model::rollout::table::WriteJson for $name $(<$lt>)? {
            #[inline]
            fn write_json(
                &self,
                out: &mut $crate::model::rollout::table::JsonOut<'_>,
            ) -> Result<(), serde_json::Error> {
                #[allow(unused_mut)]
                let mut sep: u8 =
                    $crate::model::rollout::table::wire_open!(out; $($tag_key = $tag)?);
                $(
                    $crate::model::rollout::table::wire_member!(
                        out, sep, &self.$field; $lit $(if $skip)? $(with $with)?
                    );
                )*
                out.close(sep);
                Ok(())
            }
        }
    };
}
pub(crate) use wire_struct;

/// Declares an enum the wire carries as objects tagged by `tag "type"`: one line a variant,
/// `Variant = "json_type" { fields as in [`wire_struct!`] }`, and after a `;` at most one
/// `untagged Variant(Type)` written as its content alone. Emits the enum with
/// `#[derive(Serialize)]`, its [`WriteJson`], and `type_name`, a variant's type as written
/// (the untagged one's own).
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident $(<$lt:lifetime>)? tag $tag_key:tt {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $vlit:tt {
                    $(
                        $(#[$fmeta:meta])*
                        $field:ident : $ty:ty = $lit:tt $(if $skip:tt)? $(with $with:path)?
                    ),* $(,)?
                }
            ),* $(,)?
            $(; $(#[$umeta:meta])* untagged $uvariant:ident($uty:ty) $(,)?)?
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Serialize)]
        #[serde(tag = $tag_key)]
        $vis enum $name $(<$lt>)? {
            $(
                $(#[$vmeta])*
                #[serde(rename = $vlit)]
                $variant {
                    $(
                        $(#[$fmeta])*
                        #[serde(rename = $lit $(, skip_serializing_if = $skip)?)]
                        $field: $ty,
                    )*
                },
            )*
            $(
                $(#[$umeta])*
                #[serde(untagged)]
                $uvariant($uty),
            )?
        }

        impl $(<$lt>)? $name $(<$lt>)? {
            /// The variant's type as written (the untagged one's: its own `type_name`).
            #[allow(dead_code)]
            pub(crate) fn type_name(&self) -> &'static str {
                match self {
                    $($name::$variant { .. } => $vlit,)*
                    $($name::$uvariant(inner) => inner.type_name(),)?
                }
            }
        }

        impl $(<$lt>)? $crate::model::rollout::table::WriteJson for $name $(<$lt>)? {
            #[inline]
            fn write_json(
                &self,
                out: &mut $crate::model::rollout::table::JsonOut<'_>,
            ) -> Result<(), serde_json::Error> {
                match self {
                    $(
                        $name::$variant { $($field),* } => {
                            #[allow(unused_mut)]
                            let mut sep: u8 =
                                $crate::model::rollout::table::wire_open!(out; $tag_key = $vlit);
                            $(
                                $crate::model::rollout::table::wire_member!(
                                    out, sep, $field; $lit $(if $skip)? $(with $with)?
                                );
                            )*
                            out.close(sep);
                        }
                    )*
                    $($name::$uvariant(inner) => $crate::model::rollout::table::WriteJson::write_json(inner, out)?,)?
                }
                Ok(())
            }
        }
    };
}
pub(crate) use wire_enum;

/// Declares an enum the wire carries as one of a few strings: `Variant = "json_name"`. Emits
/// the enum with `#[derive(Serialize)]`, `ALL`, `as_str`, `parse` and its [`WriteJson`].
macro_rules! wire_names {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $lit:tt),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(serde::Serialize)]
        $vis enum $name {
            $($(#[$vmeta])* #[serde(rename = $lit)] $variant,)*
        }

        impl $name {
            /// Every value, in the order declared.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $lit,)*
                }
            }

            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($lit => Some($name::$variant),)*
                    _ => None,
                }
            }
        }

        impl $crate::model::rollout::table::WriteJson for $name {
            #[inline]
            fn write_json(
                &self,
                out: &mut $crate::model::rollout::table::JsonOut<'_>,
            ) -> Result<(), serde_json::Error> {
                $crate::model::rollout::table::WriteJson::write_json(self.as_str(), out)
            }
        }
    };
}
pub(crate) use wire_names;
