//! The fast way in: one rollout line read by hand, straight into the fields the views need.
//!
//! Built on the strict scanner of [`crate::model::scan`] (serde_json's acceptance, stricter in
//! refusing lone surrogates and nesting past serde_json's limit), it reads the line in one pass
//! and fills [`RawLine`] and [`Fields`] as a serde-derived reader would: the same
//! fields of the same types, `null` as absent, unknown keys skipped but still checked, a
//! duplicate key or a field of another type refused. A line it reads needs no other check;
//! refusing a line is always safe: the caller then reads it the slow way, through a `Value`.
//! Values only type-checked are skipped without being copied; a kept string is borrowed from
//! the line unless it holds escapes.
//!
//! Why by hand: serde's visitors spend their time on a field-name match per key, a visitor per
//! value and a `RawValue` per skipped value; this reader spends it in the string scan
//! (figures: samples/BENCHMARKS.md, "rollout lines read by hand"). Tests compare it with the
//! serde reader on every shape (`view::tests`), including random and damaged lines.

use super::{Fields, Kind, LineView, Obj, PartView, RawBaseInstructions, RawLine, Text};
use crate::model::rollout::wire;
use crate::model::scan::Scanner;

/// The depth of a payload's values (inside the line and the payload).
const PAYLOAD_DEPTH: usize = 2;

/// Reads `raw` (one line, no newline) the fast way; `None` when it is not JSON, not an
/// object, or has a shape the slow way must read.
///
/// The line and its payload are filled in place, and the line becomes its view here: moved
/// through the readers' `Option`s, the payload's fields (a few hundred bytes) were copied
/// five times a line, ~3 % of a conversion of small records.
pub(super) fn line(raw: &str) -> Option<LineView<'_>> {
    let mut s = Scanner::new(raw);
    s.ws();
    let mut line = RawLine::default();
    s.fill(&mut line, |s, line, seen, key| {
        match key {
            wire::line::TIMESTAMP => line.timestamp = seen.field(0, || s.opt_text())?,
            wire::line::TYPE => line.tag = seen.field(1, || s.opt_text())?,
            wire::line::PAYLOAD => seen.field(2, || s.payload(&mut line.payload))?,
            _ => s.skip(1)?,
        }
        Some(())
    })?;
    s.end()?;
    Some(line.into_view())
}

/// Which fields of one object were read: serde refuses a field given twice.
#[derive(Default)]
struct Seen(u32);

impl Seen {
    /// Reads field number `field` with `read`, or refuses it the second time.
    #[inline(always)]
    fn field<T>(&mut self, field: u32, read: impl FnOnce() -> Option<T>) -> Option<T> {
        let bit = 1 << field;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        read()
    }
}

impl<'a> Scanner<'a> {
    /// An object read into a new `T` (see [`Scanner::fill`]).
    #[inline(always)]
    fn record<T: Default>(
        &mut self,
        member: impl FnMut(&mut Self, &mut T, &mut Seen, &str) -> Option<()>,
    ) -> Option<T> {
        let mut read = T::default();
        self.fill(&mut read, member)?;
        Some(read)
    }

    /// An object read into `read`: `member` reads each key's value into it (or skips it),
    /// with the object's [`Seen`] to refuse a field given twice.
    #[inline(always)]
    fn fill<T>(
        &mut self,
        read: &mut T,
        mut member: impl FnMut(&mut Self, &mut T, &mut Seen, &str) -> Option<()>,
    ) -> Option<()> {
        let mut seen = Seen::default();
        self.object(|s, key| member(s, read, &mut seen, key))
    }

    /// A string or `null` (absent), as serde reads an `Option<Text>`.
    #[inline(always)]
    fn opt_text(&mut self) -> Option<Option<Text<'a>>> {
        if self.null()? {
            return Some(None);
        }
        Some(Some(Text(self.string()?.text()?)))
    }

    /// A value the checks only type-check. A number is parsed as serde_json parses it, so one
    /// out of range is refused here as it was by the serde reader.
    pub(super) fn kind(&mut self) -> Option<Kind> {
        self.ws();
        Some(match self.peek()? {
            b'"' => {
                self.string()?;
                Kind::String
            }
            b'{' => {
                self.skip(PAYLOAD_DEPTH)?;
                Kind::Object
            }
            b'[' => {
                self.skip(PAYLOAD_DEPTH)?;
                Kind::Array
            }
            b't' | b'f' => {
                self.skip(PAYLOAD_DEPTH)?;
                Kind::Bool
            }
            b'n' => {
                self.literal(b"null")?;
                Kind::Null
            }
            _ => {
                let number = self.number()?;
                serde_json::from_str::<serde_json::Number>(number).ok()?;
                Kind::Number
            }
        })
    }

    /// A payload: `null` (absent), or an object read into `slot` by [`Scanner::fields`].
    fn payload(&mut self, slot: &mut Option<Obj<Fields<'a>>>) -> Option<()> {
        if self.null()? {
            *slot = None;
            return Some(());
        }
        self.fields(&mut slot.insert(Obj(Fields::default())).0)
    }

    /// A payload object: every field the views read, of every payload type, in one pass.
    fn fields(&mut self, fields: &mut Fields<'a>) -> Option<()> {
        self.fill(fields, |s, f, seen, key| {
            match key {
                wire::key::TYPE => f.kind = seen.field(0, || s.opt_text())?,
                wire::key::ROLE => f.role = seen.field(1, || s.opt_text())?,
                wire::key::PHASE => f.phase = seen.field(2, || s.opt_text())?,
                wire::key::CONTENT => f.content = seen.field(3, || s.nullable(Self::parts))?,
                wire::key::CALL_ID => f.call_id = seen.field(4, || s.opt_text())?,
                wire::key::ARGUMENTS => f.arguments = seen.field(5, || s.kind())?,
                wire::key::INPUT => f.input = seen.field(6, || s.kind())?,
                wire::key::OUTPUT => f.output = seen.field(7, || s.kind())?,
                wire::key::MESSAGE => f.message = seen.field(8, || s.opt_text())?,
                wire::key::ID => f.id = seen.field(9, || s.opt_text())?,
                wire::key::TIMESTAMP => f.timestamp = seen.field(10, || s.kind())?,
                wire::key::CWD => f.cwd = seen.field(11, || s.kind())?,
                wire::key::ORIGINATOR => f.originator = seen.field(12, || s.kind())?,
                wire::key::CLI_VERSION => f.cli_version = seen.field(13, || s.kind())?,
                wire::key::BASE_INSTRUCTIONS => {
                    f.base_instructions =
                        seen.field(14, || s.nullable(|s| s.base_instructions().map(Obj)))?
                }
                _ => s.skip(PAYLOAD_DEPTH)?,
            }
            Some(())
        })
    }

    fn base_instructions(&mut self) -> Option<RawBaseInstructions<'a>> {
        self.record(|s, b: &mut RawBaseInstructions<'a>, seen, key| {
            if key == wire::key::TEXT {
                b.text = seen.field(0, || s.opt_text())?;
                Some(())
            } else {
                s.skip(3)
            }
        })
    }

    /// `content`: an array of objects (a part that is anything else is the slow way's).
    fn parts(&mut self) -> Option<Vec<Obj<PartView<'a>>>> {
        let mut parts = Vec::new();
        self.array(|s| {
            let part = s.record(|s, part: &mut PartView<'a>, seen, key| {
                match key {
                    wire::key::TYPE => part.kind = seen.field(0, || s.opt_text())?,
                    wire::key::TEXT => part.text = seen.field(1, || s.opt_text())?,
                    _ => s.skip(4)?,
                }
                Some(())
            })?;
            parts.push(Obj(part));
            Some(())
        })?;
        Some(parts)
    }
}
