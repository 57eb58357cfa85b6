//! The few fields of Parquet's Thrift structures that are checked before the parquet crate is
//! trusted with a file: the schema's depth in the footer (the crate builds the schema, and
//! its readers, by recursion) and each page header's sizes (the crate allocates what a header
//! declares before it decompresses). Thrift's compact protocol, read from a byte slice, with
//! no recursion: nested values are skipped with an explicit stack, at most [`MAX_NESTING`]
//! deep. Every count read is checked against the bytes left, so nothing is allocated from a
//! count.

use thiserror::Error;

/// Structures nest no deeper than this when skipped (the parquet crate's own limit).
pub const MAX_NESTING: usize = 64;

/// A Thrift value that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{what} at byte {at} of the Thrift structure")]
pub struct Malformed {
    pub what: &'static str,
    pub at: usize,
}

/// The compact protocol's type codes (as a field header or a list header writes them).
mod code {
    pub(super) const STOP: u8 = 0;
    pub(super) const TRUE: u8 = 1;
    pub(super) const FALSE: u8 = 2;
    pub(super) const BYTE: u8 = 3;
    pub(super) const I16: u8 = 4;
    pub(super) const I32: u8 = 5;
    pub(super) const I64: u8 = 6;
    pub(super) const DOUBLE: u8 = 7;
    pub(super) const BINARY: u8 = 8;
    pub(super) const LIST: u8 = 9;
    pub(super) const SET: u8 = 10;
    pub(super) const MAP: u8 = 11;
    pub(super) const STRUCT: u8 = 12;
}

/// A reader of compact-protocol bytes.
pub struct Compact<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// What is still to skip at one level of nesting.
enum Skipping {
    /// The rest of a struct's fields (the last field id, for delta-encoded headers).
    Struct,
    /// `left` elements of one type.
    List { element: u8, left: u64 },
    /// `left` key-value pairs.
    Map { key: u8, value: u8, left: u64 },
}

impl<'a> Compact<'a> {
    pub fn new(bytes: &'a [u8]) -> Compact<'a> {
        Compact { bytes, at: 0 }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.at
    }

    fn malformed(&self, what: &'static str) -> Malformed {
        Malformed { what, at: self.at }
    }

    fn byte(&mut self) -> Result<u8, Malformed> {
        let byte = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| self.malformed("the structure ends early"))?;
        self.at += 1;
        Ok(byte)
    }

    fn skip_bytes(&mut self, n: u64) -> Result<(), Malformed> {
        let left = (self.bytes.len() - self.at) as u64;
        if n > left {
            return Err(self.malformed("the structure ends early"));
        }
        // `n <= left`, which is a usize.
        self.at += n as usize;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, Malformed> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.malformed("a varint longer than 10 bytes"))
    }

    fn zigzag(&mut self) -> Result<i64, Malformed> {
        let n = self.varint()?;
        Ok((n >> 1) as i64 ^ -((n & 1) as i64))
    }

    /// An `i32` field's value.
    pub fn i32(&mut self) -> Result<i32, Malformed> {
        let n = self.zigzag()?;
        i32::try_from(n).map_err(|_| self.malformed("an i32 out of range"))
    }

    /// The next field header of a struct: its id and type, `None` at the struct's end.
    /// `last` is the previous field's id (0 at the start), for delta-encoded ids.
    pub fn field(&mut self, last: &mut i16) -> Result<Option<u8>, Malformed> {
        let header = self.byte()?;
        let kind = header & 0x0f;
        if kind == code::STOP {
            return Ok(None);
        }
        let delta = header >> 4;
        let id = if delta == 0 {
            i16::try_from(self.zigzag()?).map_err(|_| self.malformed("a field id out of range"))?
        } else {
            last.checked_add(i16::from(delta))
                .ok_or_else(|| self.malformed("a field id out of range"))?
        };
        *last = id;
        Ok(Some(kind))
    }

    /// A list header: the elements' type and their number, which the bytes left must be able
    /// to hold (every element takes a byte at least, but for booleans packed in the header).
    pub fn list(&mut self) -> Result<(u8, u64), Malformed> {
        let header = self.byte()?;
        let element = header & 0x0f;
        let size = match header >> 4 {
            15 => self.varint()?,
            small => u64::from(small),
        };
        if size > (self.bytes.len() - self.at) as u64 {
            return Err(self.malformed("a list longer than the bytes left"));
        }
        Ok((element, size))
    }

    /// Skips one value of `kind` (a field's type code), however deeply it nests, without
    /// recursion.
    pub fn skip(&mut self, kind: u8) -> Result<(), Malformed> {
        let mut stack: Vec<Skipping> = Vec::new();
        self.skip_one(kind, &mut stack)?;
        while let Some(top) = stack.last_mut() {
            match top {
                Skipping::Struct => {
                    // Ids do not matter when skipping: any delta is fine.
                    let mut id = 0;
                    match self.field(&mut id)? {
                        None => {
                            stack.pop();
                        }
                        Some(kind) => self.skip_one(kind, &mut stack)?,
                    }
                }
                Skipping::List { element, left } => {
                    if *left == 0 {
                        stack.pop();
                        continue;
                    }
                    *left -= 1;
                    let element = *element;
                    // A boolean element is one byte (in a struct, the header holds it).
                    if element == code::TRUE || element == code::FALSE {
                        self.skip_bytes(1)?;
                    } else {
                        self.skip_one(element, &mut stack)?;
                    }
                }
                Skipping::Map { key, value, left } => {
                    if *left == 0 {
                        stack.pop();
                        continue;
                    }
                    *left -= 1;
                    let (key, value) = (*key, *value);
                    self.skip_element(key, &mut stack)?;
                    // The key may have opened a level: its value is skipped after it.
                    if matches!(stack.last(), Some(Skipping::Map { .. })) {
                        self.skip_element(value, &mut stack)?;
                    } else {
                        return Err(self.malformed("a map key that is not a scalar"));
                    }
                }
            }
        }
        Ok(())
    }

    /// A list or map element of `kind`: booleans take a byte here.
    fn skip_element(&mut self, kind: u8, stack: &mut Vec<Skipping>) -> Result<(), Malformed> {
        if kind == code::TRUE || kind == code::FALSE {
            return self.skip_bytes(1);
        }
        self.skip_one(kind, stack)
    }

    /// Skips a scalar, or opens a level on `stack` for a nested value.
    fn skip_one(&mut self, kind: u8, stack: &mut Vec<Skipping>) -> Result<(), Malformed> {
        match kind {
            code::TRUE | code::FALSE => Ok(()),
            code::BYTE => self.skip_bytes(1),
            code::I16 | code::I32 | code::I64 => self.varint().map(drop),
            code::DOUBLE => self.skip_bytes(8),
            code::BINARY => {
                let n = self.varint()?;
                self.skip_bytes(n)
            }
            code::LIST | code::SET => {
                let (element, left) = self.list()?;
                self.open(stack, Skipping::List { element, left })
            }
            code::MAP => {
                let left = self.varint()?;
                if left == 0 {
                    return Ok(());
                }
                if left > (self.bytes.len() - self.at) as u64 {
                    return Err(self.malformed("a map longer than the bytes left"));
                }
                let types = self.byte()?;
                self.open(
                    stack,
                    Skipping::Map {
                        key: types >> 4,
                        value: types & 0x0f,
                        left,
                    },
                )
            }
            code::STRUCT => self.open(stack, Skipping::Struct),
            _ => Err(self.malformed("an unknown Thrift type")),
        }
    }

    fn open(&self, stack: &mut Vec<Skipping>, level: Skipping) -> Result<(), Malformed> {
        if stack.len() >= MAX_NESTING {
            return Err(self.malformed("values nested too deep"));
        }
        stack.push(level);
        Ok(())
    }
}

/// The footer's schema: how deep its tree is and how many elements it lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaShape {
    pub depth: usize,
    pub elements: u64,
}

/// The shape of the schema in a footer (`FileMetaData`, field 2: the schema's elements in
/// depth-first order, each with its `num_children`, field 5). Fails past `max_depth` levels
/// as soon as the walk reaches them.
pub fn schema_shape(footer: &[u8], max_depth: usize) -> Result<SchemaShape, Malformed> {
    let mut reader = Compact::new(footer);
    let mut last = 0;
    let mut shape = SchemaShape {
        depth: 0,
        elements: 0,
    };
    while let Some(kind) = reader.field(&mut last)? {
        if last != 2 || kind != code::LIST {
            reader.skip(kind)?;
            continue;
        }
        let (element, count) = reader.list()?;
        if element != code::STRUCT {
            return Err(reader.malformed("a schema that is not a list of structs"));
        }
        // Children still to come of each group open above the next element.
        let mut open: Vec<i64> = Vec::new();
        for _ in 0..count {
            let children = schema_element_children(&mut reader)?;
            if let Some(parent) = open.last_mut() {
                *parent -= 1;
            }
            shape.depth = shape.depth.max(open.len() + 1);
            if shape.depth > max_depth {
                return Err(reader.malformed("a schema nested too deep"));
            }
            if children > 0 {
                open.push(i64::from(children));
            }
            while open.last() == Some(&0) {
                open.pop();
            }
        }
        shape.elements = count;
    }
    Ok(shape)
}

/// A `SchemaElement`'s `num_children` (field 5; 0 when absent), the rest skipped.
fn schema_element_children(reader: &mut Compact<'_>) -> Result<i32, Malformed> {
    let mut last = 0;
    let mut children = 0;
    while let Some(kind) = reader.field(&mut last)? {
        if last == 5 && kind == code::I32 {
            children = reader.i32()?.max(0);
        } else {
            reader.skip(kind)?;
        }
    }
    Ok(children)
}

/// What the checks read of a `PageHeader`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageSizes {
    /// Field 1: 0 data, 1 index, 2 dictionary, 3 data v2.
    pub kind: i32,
    pub uncompressed: i32,
    pub compressed: i32,
    /// The values (levels included) a data page holds, or the entries of a dictionary page.
    pub values: i32,
    /// A v2 data page's levels, stored uncompressed before its compressed values.
    pub levels: i32,
    /// A v2 data page says whether its values are compressed (they are by default).
    pub compressed_values: bool,
    /// The header's own length in bytes.
    pub header_len: usize,
}

/// The page header at the start of `bytes`.
pub fn page_header(bytes: &[u8]) -> Result<PageSizes, Malformed> {
    let mut reader = Compact::new(bytes);
    let mut last = 0;
    let mut sizes = PageSizes {
        compressed_values: true,
        ..PageSizes::default()
    };
    while let Some(kind) = reader.field(&mut last)? {
        match (last, kind) {
            (1, code::I32) => sizes.kind = reader.i32()?,
            (2, code::I32) => sizes.uncompressed = reader.i32()?,
            (3, code::I32) => sizes.compressed = reader.i32()?,
            // data_page_header, dictionary_page_header, data_page_header_v2: num_values is
            // their field 1; v2 also has its levels' lengths (5, 6) and is_compressed (7).
            (5 | 7 | 8, code::STRUCT) => {
                let v2 = last == 8;
                let mut inner = 0;
                while let Some(kind) = reader.field(&mut inner)? {
                    match (inner, kind) {
                        (1, code::I32) => sizes.values = reader.i32()?,
                        (5 | 6, code::I32) if v2 => {
                            let n = reader.i32()?;
                            sizes.levels = sizes.levels.saturating_add(n.max(0));
                        }
                        (7, code::TRUE) if v2 => sizes.compressed_values = true,
                        (7, code::FALSE) if v2 => sizes.compressed_values = false,
                        (_, kind) => reader.skip(kind)?,
                    }
                }
            }
            (_, kind) => reader.skip(kind)?,
        }
    }
    sizes.header_len = reader.position();
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact-protocol writer of what the tests need.
    #[derive(Default)]
    struct Writer {
        out: Vec<u8>,
        last: Vec<i16>,
    }

    impl Writer {
        fn varint(&mut self, mut n: u64) {
            loop {
                let byte = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    self.out.push(byte);
                    return;
                }
                self.out.push(byte | 0x80);
            }
        }

        fn header(&mut self, id: i16, kind: u8) {
            let last = self.last.last().copied().unwrap();
            let delta = id - last;
            if (1..=15).contains(&delta) {
                self.out.push(((delta as u8) << 4) | kind);
            } else {
                self.out.push(kind);
                self.varint(((id << 1) ^ (id >> 15)) as u16 as u64);
            }
            *self.last.last_mut().unwrap() = id;
        }

        fn i32(&mut self, id: i16, n: i32) {
            self.header(id, code::I32);
            self.varint(((n << 1) ^ (n >> 31)) as u32 as u64);
        }

        fn begin(&mut self, id: i16) {
            self.header(id, code::STRUCT);
            self.last.push(0);
        }

        fn end(&mut self) {
            self.out.push(code::STOP);
            self.last.pop();
        }

        fn list_of_structs(&mut self, id: i16, n: u64) {
            self.header(id, code::LIST);
            if n < 15 {
                self.out.push(((n as u8) << 4) | code::STRUCT);
            } else {
                self.out.push(0xf0 | code::STRUCT);
                self.varint(n);
            }
        }

        fn root() -> Writer {
            Writer {
                out: Vec::new(),
                last: vec![0],
            }
        }
    }

    /// A footer whose schema lists elements with these `num_children`.
    fn footer(children: &[i32]) -> Vec<u8> {
        let mut w = Writer::root();
        w.i32(1, 1);
        w.list_of_structs(2, children.len() as u64);
        for &n in children {
            w.last.push(0);
            // A name (field 4, binary) to skip.
            w.header(4, code::BINARY);
            w.varint(1);
            w.out.push(b'x');
            if n > 0 {
                w.i32(5, n);
            }
            w.end();
        }
        // num_rows (field 3, i64), then a nested struct to skip.
        w.header(3, code::I64);
        w.varint(84);
        w.begin(9);
        w.i32(1, 7);
        w.end();
        w.out.push(code::STOP);
        w.out
    }

    #[test]
    fn the_depth_of_a_schema_counts_the_levels_of_groups() {
        // root { a; b { c; d (LIST) { list { element } } } }
        let shape = schema_shape(&footer(&[2, 0, 2, 0, 1, 1, 0]), 64).unwrap();
        assert_eq!(
            shape,
            SchemaShape {
                depth: 5,
                elements: 7
            }
        );
        // A flat schema: the root and its leaves.
        assert_eq!(schema_shape(&footer(&[3, 0, 0, 0]), 64).unwrap().depth, 2);
    }

    #[test]
    fn a_schema_deeper_than_the_limit_fails_where_it_gets_there() {
        let chain: Vec<i32> = (0..10_000).map(|i| if i < 9_999 { 1 } else { 0 }).collect();
        let err = schema_shape(&footer(&chain), 64).unwrap_err();
        assert_eq!(err.what, "a schema nested too deep");
        assert_eq!(schema_shape(&footer(&chain), 10_000).unwrap().depth, 10_000);
    }

    #[test]
    fn counts_larger_than_the_bytes_left_fail_before_any_loop() {
        let mut w = Writer::root();
        w.list_of_structs(2, 1 << 40);
        let err = schema_shape(&w.out, 64).unwrap_err();
        assert_eq!(err.what, "a list longer than the bytes left");
        // Truncated anywhere: an error, never a panic.
        let whole = footer(&[2, 0, 1, 0]);
        for cut in 0..whole.len() {
            assert!(schema_shape(&whole[..cut], 64).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn skipping_nested_values_stops_at_the_nesting_limit() {
        // A struct field holding 100 nested structs.
        let mut w = Writer::root();
        for _ in 0..100 {
            w.begin(1);
        }
        for _ in 0..100 {
            w.end();
        }
        let err = schema_shape(&w.out, 64).unwrap_err();
        assert_eq!(err.what, "values nested too deep");
    }

    #[test]
    fn a_page_header_gives_its_sizes_and_values() {
        let mut w = Writer::root();
        w.i32(1, 3);
        w.i32(2, 1000);
        w.i32(3, 400);
        w.begin(8);
        w.i32(1, 50);
        w.i32(5, 10);
        w.i32(6, 6);
        w.header(7, code::FALSE);
        w.end();
        w.out.push(code::STOP);
        let len = w.out.len();
        w.out.extend_from_slice(b"page data");
        assert_eq!(
            page_header(&w.out).unwrap(),
            PageSizes {
                kind: 3,
                uncompressed: 1000,
                compressed: 400,
                values: 50,
                levels: 16,
                compressed_values: false,
                header_len: len,
            }
        );
    }
}
