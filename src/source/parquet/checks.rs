//! A row group checked before a byte of it is decompressed: its column chunks inside the
//! file, their codecs, and the sizes and values every page header declares.

use super::*;

impl Rows {
    /// What the row group's metadata and page headers declare, against the file and the
    /// limit, before any page is decompressed.
    pub(super) fn check_group(&self, group: &RowGroupMetaData) -> Result<(), Problem> {
        if group.num_rows() < 0 {
            return Err(format!("it declares {} rows", group.num_rows()));
        }
        let mut declared = Totals::default();
        for column in group.columns() {
            let path = column.column_path().string();
            match column.compression() {
                Compression::UNCOMPRESSED
                | Compression::SNAPPY
                | Compression::GZIP(_)
                | Compression::ZSTD(_) => {}
                other @ (Compression::LZO
                | Compression::BROTLI(_)
                | Compression::LZ4
                | Compression::LZ4_RAW) => {
                    return Err(format!(
                        "column `{path}` is compressed with {other}, which rollover does not read (it reads snappy, gzip, zstd and uncompressed pages)"
                    ))
                }
            }
            let (chunk_start, chunk_len) = chunk_range(column)
                .ok_or_else(|| format!("column `{path}` declares a negative offset or size"))?;
            if chunk_start.saturating_add(chunk_len) > self.source.len {
                return Err(format!(
                    "column `{path}` declares {chunk_len} bytes at byte {chunk_start}, past the end of the file"
                ));
            }
            declared.add(
                u64::try_from(column.uncompressed_size()).unwrap_or(u64::MAX),
                chunk_len,
                0,
            );
            declared.check(self.limit)?;
        }
        let mut pages = Totals::default();
        for column in group.columns() {
            let gzip = matches!(column.compression(), Compression::GZIP(_));
            let path = column.column_path().string();
            let (chunk_start, chunk_len) = chunk_range(column).unwrap_or((0, 0));
            self.check_pages(chunk_start, chunk_len, gzip, &mut pages)
                .map_err(|problem| format!("column `{path}`: {problem}"))?;
        }
        Ok(())
    }

    /// Reads each page header of the column chunk `len` bytes at `start`, adds what it
    /// declares to `totals`, and fails once they pass the limit.
    pub(super) fn check_pages(
        &self,
        start: u64,
        len: u64,
        gzip: bool,
        totals: &mut Totals,
    ) -> Result<(), Problem> {
        let end = start + len;
        let mut at = start;
        while at < end {
            let sizes = self.page_header(at, end)?;
            let (Ok(uncompressed), Ok(compressed), Ok(values)) = (
                u64::try_from(sizes.uncompressed),
                u64::try_from(sizes.compressed),
                u64::try_from(sizes.values),
            ) else {
                return Err(format!("the page at byte {at} declares a negative size"));
            };
            let data = at + sizes.header_len as u64;
            if data.saturating_add(compressed) > end {
                return Err(format!(
                    "the page at byte {at} declares {compressed} bytes, past the end of its column chunk"
                ));
            }
            totals.add(uncompressed, compressed, values);
            totals.check(self.limit)?;
            let levels = u64::try_from(sizes.levels).unwrap_or(0);
            // Index pages are skipped, and v2 pages may store their values uncompressed.
            if gzip && sizes.kind != 1 && sizes.compressed_values && compressed > levels {
                let bytes = self
                    .source
                    .bytes(data + levels, compressed - levels)
                    .map_err(|e| e.to_string())?;
                let expands = gunzipped_size(&bytes, uncompressed.saturating_sub(levels) + 1);
                if expands > uncompressed.saturating_sub(levels) {
                    return Err(format!(
                        "the gzip page at byte {at} expands past the {uncompressed} bytes its header declares"
                    ));
                }
            }
            at = data + compressed;
        }
        Ok(())
    }

    /// The page header at `at` (its column chunk ends at `end`), read a little at a time: a
    /// header is not longer than the limit.
    pub(super) fn page_header(&self, at: u64, end: u64) -> Result<thrift::PageSizes, Problem> {
        let mut want = HEADER_READ as u64;
        loop {
            let len = want.min(end - at);
            let bytes = self.source.bytes(at, len).map_err(|e| e.to_string())?;
            match thrift::page_header(&bytes) {
                Ok(sizes) => return Ok(sizes),
                Err(_) if len < end - at && len < self.limit => want = len * 8,
                Err(err) => return Err(format!("the page header at byte {at}: {err}")),
            }
        }
    }
}

/// Declared sizes of a row group, summed.
#[derive(Default)]
pub(super) struct Totals {
    uncompressed: u64,
    compressed: u64,
    values: u64,
}

impl Totals {
    fn add(&mut self, uncompressed: u64, compressed: u64, values: u64) {
        self.uncompressed = self.uncompressed.saturating_add(uncompressed);
        self.compressed = self.compressed.saturating_add(compressed);
        self.values = self.values.saturating_add(values);
    }

    fn check(&self, limit: u64) -> Result<(), Problem> {
        let over = |what: &str, n: u64| {
            format!("it declares {n} {what}, more than --max-record-bytes ({limit}); raise the limit to read it")
        };
        if self.uncompressed > limit {
            return Err(over("bytes uncompressed", self.uncompressed));
        }
        if self.compressed > limit {
            return Err(over("bytes compressed", self.compressed));
        }
        if self.values.saturating_mul(LEVEL_WEIGHT) > limit {
            return Err(format!(
                "it declares {} values, more than --max-record-bytes ({limit}) allows at {LEVEL_WEIGHT} bytes each; raise the limit to read it",
                self.values
            ));
        }
        Ok(())
    }
}

/// Where a column chunk's pages are: its first page (the dictionary's, when it has one), as
/// the parquet crate reads it, and its compressed length.
pub(super) fn chunk_range(
    column: &parquet::file::metadata::ColumnChunkMetaData,
) -> Option<(u64, u64)> {
    let start = column
        .dictionary_page_offset()
        .unwrap_or(column.data_page_offset());
    Some((
        u64::try_from(start).ok()?,
        u64::try_from(column.compressed_size()).ok()?,
    ))
}

/// How many bytes `gzip` expands to, counted up to `cap` (and no further).
pub(super) fn gunzipped_size(gzip: &[u8], cap: u64) -> u64 {
    let mut decoder = flate2::read::MultiGzDecoder::new(gzip).take(cap);
    io::copy(&mut decoder, &mut io::sink()).unwrap_or(cap)
}
