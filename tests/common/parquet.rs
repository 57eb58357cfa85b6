//! Parquet files written from JSON rows with the parquet crate's own writer (no pyarrow):
//! a schema in Parquet's message syntax, rows as `serde_json` values, striped into each leaf
//! column's values and definition and repetition levels (Dremel's rule, by recursion: test
//! data is shallow). Lists are the three-level `LIST` groups pyarrow and the Hub write; a
//! timestamp leaf takes RFC 3339 text.

use std::sync::Arc;

use parquet::basic::{Compression, ConvertedType, Repetition, Type as PhysicalType};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::{SchemaDescriptor, Type, TypePtr};
use serde_json::Value;

/// How a file is written.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// Rows per row group.
    pub group_rows: usize,
    pub compression: Compression,
    /// Dictionary pages for the columns (the Hub's writers use them).
    pub dictionary: bool,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            group_rows: 4,
            compression: Compression::SNAPPY,
            dictionary: true,
        }
    }
}

/// `rows` in a Parquet file of `schema`.
pub fn write(schema: &str, rows: &[Value], layout: Layout) -> Vec<u8> {
    let schema = Arc::new(parse_message_type(schema).expect("a valid schema"));
    let descr = SchemaDescriptor::new(Arc::clone(&schema));
    let properties = WriterProperties::builder()
        .set_compression(layout.compression)
        .set_dictionary_enabled(layout.dictionary)
        // Not the crate's version: the bytes stay the same across its releases where they can.
        .set_created_by("rollover tests".into())
        .build();
    let mut out = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut out, Arc::clone(&schema), Arc::new(properties))
        .expect("a writer");
    for group in rows.chunks(layout.group_rows.max(1)) {
        let mut group_writer = writer.next_row_group().expect("a row group");
        let mut column = 0;
        while let Some(mut column_writer) = group_writer.next_column().expect("a column") {
            let leaf = descr.column(column);
            let nodes = path_nodes(&schema, leaf.path().parts());
            let mut striped = Striped::default();
            for row in group {
                walk(
                    row.get(nodes[0].name()),
                    &nodes,
                    false,
                    0,
                    0,
                    0,
                    &mut striped,
                );
            }
            let def = (leaf.max_def_level() > 0).then_some(&striped.def[..]);
            let rep = (leaf.max_rep_level() > 0).then_some(&striped.rep[..]);
            let values = &striped.values;
            match leaf.physical_type() {
                PhysicalType::BYTE_ARRAY => {
                    let values: Vec<ByteArray> = values
                        .iter()
                        .map(|v| match v {
                            Value::String(s) => ByteArray::from(s.as_str()),
                            other => ByteArray::from(other.to_string().as_str()),
                        })
                        .collect();
                    column_writer
                        .typed::<ByteArrayType>()
                        .write_batch(&values, def, rep)
                }
                PhysicalType::INT64 => {
                    // Text in an integer column is a time (the schemas here are microseconds).
                    let values: Vec<i64> = values
                        .iter()
                        .map(|v| match v {
                            Value::String(text) => micros(text),
                            v => v.as_i64().unwrap_or_else(|| {
                                panic!("an integer for {:?}, not {v}", leaf.path())
                            }),
                        })
                        .collect();
                    column_writer
                        .typed::<Int64Type>()
                        .write_batch(&values, def, rep)
                }
                PhysicalType::INT32 => {
                    let values: Vec<i32> = values
                        .iter()
                        .map(|v| v.as_i64().expect("an integer") as i32)
                        .collect();
                    column_writer
                        .typed::<Int32Type>()
                        .write_batch(&values, def, rep)
                }
                PhysicalType::DOUBLE => {
                    let values: Vec<f64> = values
                        .iter()
                        .map(|v| v.as_f64().expect("a number"))
                        .collect();
                    column_writer
                        .typed::<DoubleType>()
                        .write_batch(&values, def, rep)
                }
                PhysicalType::BOOLEAN => {
                    let values: Vec<bool> = values
                        .iter()
                        .map(|v| v.as_bool().expect("a boolean"))
                        .collect();
                    column_writer
                        .typed::<BoolType>()
                        .write_batch(&values, def, rep)
                }
                other => panic!("the test writer writes no {other} column"),
            }
            .expect("the column's values");
            column_writer.close().expect("the column closes");
            column += 1;
        }
        group_writer.close().expect("the row group closes");
    }
    writer.close().expect("the file closes");
    out
}

/// RFC 3339 text as microseconds since the epoch.
fn micros(text: &str) -> i64 {
    let time = humantime::parse_rfc3339_weak(text).expect("a time");
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after the epoch");
    since.as_micros() as i64
}

/// The schema's nodes from the root's field down to the leaf at `path`.
fn path_nodes(schema: &TypePtr, path: &[String]) -> Vec<TypePtr> {
    let mut nodes = Vec::new();
    let mut here = schema;
    for name in path {
        let next = here
            .get_fields()
            .iter()
            .find(|f| f.name() == name)
            .expect("a field of the path");
        nodes.push(Arc::clone(next));
        here = next;
    }
    nodes
}

#[derive(Default)]
struct Striped {
    values: Vec<Value>,
    def: Vec<i16>,
    rep: Vec<i16>,
}

fn is_list(node: &Type) -> bool {
    !node.is_primitive() && node.get_basic_info().converted_type() == ConvertedType::LIST
}

/// Stripes `value`, the value of `nodes[0]`, down to the leaf `nodes[last]`. `in_list`: the
/// node's parent is a `LIST` group, so each item of a repeated node is the element's value.
fn walk(
    value: Option<&Value>,
    nodes: &[TypePtr],
    in_list: bool,
    def: i16,
    rep: i16,
    rep_depth: i16,
    out: &mut Striped,
) {
    let node = &nodes[0];
    let leaf = nodes.len() == 1;
    let present = value.filter(|v| !v.is_null());
    match node.get_basic_info().repetition() {
        Repetition::REPEATED => {
            let items = present.and_then(Value::as_array).filter(|a| !a.is_empty());
            let Some(items) = items else {
                out.def.push(def);
                out.rep.push(rep);
                return;
            };
            for (i, item) in items.iter().enumerate() {
                let r = if i == 0 { rep } else { rep_depth + 1 };
                if leaf {
                    out.values.push(item.clone());
                    out.def.push(def + 1);
                    out.rep.push(r);
                } else {
                    let next = if in_list {
                        Some(item)
                    } else {
                        item.get(nodes[1].name())
                    };
                    walk(next, &nodes[1..], false, def + 1, r, rep_depth + 1, out);
                }
            }
        }
        repetition => {
            let optional = repetition == Repetition::OPTIONAL;
            let Some(present) = present else {
                assert!(optional, "no value for required `{}`", node.name());
                out.def.push(def);
                out.rep.push(rep);
                return;
            };
            let d = if optional { def + 1 } else { def };
            if leaf {
                out.values.push(present.clone());
                out.def.push(d);
                out.rep.push(rep);
                return;
            }
            let next = if is_list(node) {
                Some(present)
            } else {
                present.get(nodes[1].name())
            };
            walk(next, &nodes[1..], is_list(node), d, rep, rep_depth, out);
        }
    }
}
