//! A row group's levels and values decoded once without building rows, to weigh each row
//! before it is built (a dictionary page lets a few bytes stand for many copies of a string).

use super::*;

impl Rows {
    /// Decodes the row group's levels and values without building its rows, to weigh each
    /// row: a row, and the row group, must decode to at most the limit.
    pub(super) fn weigh(&self, group: &RowGroupMetaData) -> Result<(), Problem> {
        let reader = self.row_group_reader(group).map_err(|e| e.to_string())?;
        let mut rows: Vec<u64> = Vec::new();
        let declared = usize::try_from(group.num_rows()).unwrap_or(0);
        let weighed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for column in 0..group.num_columns() {
                let descr = group.column(column).column_descr();
                let levels = (descr.max_def_level(), descr.max_rep_level());
                let reader = reader.get_column_reader(column)?;
                weigh_column(reader, levels, declared, &mut rows)?;
            }
            Ok::<(), parquet::errors::ParquetError>(())
        }));
        match weighed {
            Ok(Ok(())) => {}
            Ok(Err(err)) => return Err(format!("its pages cannot be decoded: {}", short(&err))),
            Err(panic) => return Err(format!("the parquet reader failed: {}", said(&*panic))),
        }
        let total: u64 = rows.iter().sum();
        if let Some((row, weight)) = rows.iter().enumerate().find(|(_, w)| **w > self.limit) {
            return Err(format!(
                "its row {} decodes to ~{weight} bytes, more than --max-record-bytes ({}); raise the limit to read it",
                row + 1,
                self.limit
            ));
        }
        if total > self.limit {
            return Err(format!(
                "it decodes to ~{total} bytes, more than --max-record-bytes ({}); raise the limit to read it",
                self.limit
            ));
        }
        Ok(())
    }
}

/// Adds the weight of each row's levels and values in `reader`'s column to `rows` (one slot a
/// row, at most `declared` rows).
/// `levels`: the column's maximum definition and repetition levels.
pub(super) fn weigh_column(
    reader: ColumnReader,
    levels: (i16, i16),
    declared: usize,
    rows: &mut Vec<u64>,
) -> parquet::errors::Result<()> {
    let rows = Weighed {
        levels,
        declared,
        rows,
    };
    match reader {
        ColumnReader::BoolColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::Int32ColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::Int64ColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::Int96ColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::FloatColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::DoubleColumnReader(r) => rows.typed(r, |_| 0),
        ColumnReader::ByteArrayColumnReader(r) => rows.typed(r, |v| v.len() as u64),
        ColumnReader::FixedLenByteArrayColumnReader(r) => rows.typed(r, |v| v.len() as u64),
    }
}

/// The weights of a row group's rows, as one column's levels are added to them.
pub(super) struct Weighed<'r> {
    levels: (i16, i16),
    declared: usize,
    rows: &'r mut Vec<u64>,
}

/// Records are read this many at a time when weighed (a record is one row).
pub(super) const WEIGH_BATCH: usize = 256;

impl Weighed<'_> {
    /// Adds the column's levels, and the bytes of its values (`bytes` of each), to their rows.
    fn typed<T: DataType>(
        self,
        mut reader: ColumnReaderImpl<T>,
        bytes: impl Fn(&T::T) -> u64,
    ) -> parquet::errors::Result<()> {
        let Weighed {
            levels: (max_def, max_rep),
            declared,
            rows,
        } = self;
        let mut def = Vec::new();
        let mut rep = Vec::new();
        let mut values = Vec::new();
        // The row of the level being weighed (none before the first).
        let mut row: Option<usize> = None;
        loop {
            def.clear();
            rep.clear();
            values.clear();
            let (records, _, levels) = reader.read_records(
                WEIGH_BATCH,
                (max_def > 0).then_some(&mut def),
                (max_rep > 0).then_some(&mut rep),
                &mut values,
            )?;
            if records == 0 && levels == 0 {
                return Ok(());
            }
            // The record API asserts these (a panic on a corrupt page): refused here, first.
            if let Some(d) = def.iter().find(|d| **d > max_def || **d < 0) {
                return Err(parquet::errors::ParquetError::General(format!(
                    "a definition level of {d}, outside the column's 0-{max_def}"
                )));
            }
            if let Some(r) = rep.iter().find(|r| **r > max_rep || **r < 0) {
                return Err(parquet::errors::ParquetError::General(format!(
                    "a repetition level of {r}, outside the column's 0-{max_rep}"
                )));
            }
            let mut value = 0;
            for level in 0..levels {
                let starts_row = max_rep == 0 || rep.get(level) == Some(&0);
                if starts_row {
                    row = Some(row.map_or(0, |r| r + 1));
                }
                let Some(r) = row.filter(|r| *r < declared) else {
                    continue;
                };
                if rows.len() <= r {
                    rows.resize(r + 1, 0);
                }
                let mut weight = LEVEL_WEIGHT;
                if max_def == 0 || def.get(level) == Some(&max_def) {
                    weight += values.get(value).map_or(0, &bytes);
                    value += 1;
                }
                rows[r] = rows[r].saturating_add(weight);
            }
        }
    }
}
