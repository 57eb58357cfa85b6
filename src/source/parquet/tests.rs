use super::checks::Totals;
use super::*;
use std::io::Write;

/// A data page header (compact protocol) declaring these sizes and values.
fn header(uncompressed: i32, compressed: i32, values: i32) -> Vec<u8> {
    fn zigzag(out: &mut Vec<u8>, n: i32) {
        let mut n = ((n << 1) ^ (n >> 31)) as u32;
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }
    let mut out = vec![0x15];
    zigzag(&mut out, 0);
    out.push(0x15);
    zigzag(&mut out, uncompressed);
    out.push(0x15);
    zigzag(&mut out, compressed);
    // Field 5, the data page header: its num_values.
    out.push(0x2C);
    out.push(0x15);
    zigzag(&mut out, values);
    out.push(0);
    out.push(0);
    out
}

fn pages(chunk: Vec<u8>, gzip: bool) -> Result<(), Problem> {
    let len = chunk.len() as u64;
    let rows = Rows::of_bytes("t.parquet".into(), chunk.into(), Arc::default());
    rows.check_pages(0, len, gzip, &mut Totals::default())
}

#[test]
fn a_page_declaring_more_than_the_limit_is_refused_before_it_is_read() {
    let mut chunk = header(i32::MAX, 10, 1);
    chunk.extend_from_slice(&[0; 10]);
    let err = pages(chunk, false).unwrap_err();
    assert_eq!(
        err,
        format!("it declares {} bytes uncompressed, more than --max-record-bytes ({DEFAULT_MAX_RECORD_BYTES}); raise the limit to read it", i32::MAX)
    );
    // Values that would take more than the limit once decoded (a run-length bomb).
    let mut chunk = header(10, 10, 100_000_000);
    chunk.extend_from_slice(&[0; 10]);
    let err = pages(chunk, false).unwrap_err();
    assert!(err.starts_with("it declares 100000000 values"), "{err}");
    // A page longer than its column chunk, and a negative size.
    let mut chunk = header(10, 11, 1);
    chunk.extend_from_slice(&[0; 10]);
    assert!(pages(chunk, false)
        .unwrap_err()
        .contains("past the end of its column chunk"));
    let mut chunk = header(-1, 10, 1);
    chunk.extend_from_slice(&[0; 10]);
    assert!(pages(chunk, false).unwrap_err().contains("a negative size"));
}

#[test]
fn a_gzip_page_that_expands_past_its_header_is_refused_without_holding_it() {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&vec![0; 8 << 20]).unwrap();
    let bomb = encoder.finish().unwrap();
    assert!(bomb.len() < 16 << 10);
    let mut chunk = header(100, bomb.len() as i32, 1);
    chunk.extend_from_slice(&bomb);
    let err = pages(chunk, true).unwrap_err();
    assert_eq!(
        err,
        "the gzip page at byte 0 expands past the 100 bytes its header declares"
    );
    // The same bytes in a page that declares them all are read.
    let mut chunk = header(8 << 20, bomb.len() as i32, 1);
    chunk.extend_from_slice(&bomb);
    assert_eq!(pages(chunk, true), Ok(()));
}
