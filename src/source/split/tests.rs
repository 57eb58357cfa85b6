use super::lines::{CHUNK, CHUNK_LINE_MAX};
use super::*;

/// The events of a file holding `bytes`, in a compact form: `R line offset element bytes`,
/// `O line size`, `B`, `D line offset`.
fn events(bytes: &[u8], max: u64) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!(
        "rollover-split-{}-{}",
        std::process::id(),
        crate::model::hash::xxh3_64(bytes)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f.json");
    std::fs::write(&path, bytes).unwrap();
    let file = SourceFile {
        path: path.clone(),
        display: Arc::from("f.json"),
        key: "f.json".into(),
        origin: "f.json".into(),
        size: bytes.len() as u64,
        mtime_ns: 0,
        ctime_ns: 0,
        ino: 0,
        root: None,
    };
    let out = records(&file, None)
        .max_record_bytes(max)
        .map(|event| match event {
            RecordEvent::Record(r) if r.oversized.is_some() => {
                format!("O {} {}", r.location.line, r.oversized.unwrap_or(0))
            }
            RecordEvent::Record(r) => format!(
                "R {} {} {:?} {}{}",
                r.location.line,
                r.location.byte_offset,
                r.location.element,
                String::from_utf8_lossy(&r.bytes),
                if r.truncated { " (truncated)" } else { "" }
            ),
            RecordEvent::Blank(n) => format!("B{n}"),
            RecordEvent::Damage(d) => {
                format!("D {} {}", d.location.line, d.location.byte_offset)
            }
        })
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    out
}

#[test]
fn document_array_splits_into_elements_with_lines() {
    let doc = b"[\n  {\"a\": 1},\n  {\"b\": 2}\n]\n";
    assert_eq!(
        events(doc, 1 << 20),
        ["R 2 4 Some(0) {\"a\": 1}", "R 3 16 Some(1) {\"b\": 2}"]
    );
}

#[test]
fn concatenated_documents_are_one_record_each() {
    let doc = b"{\n  \"a\": 1\n}\n{\n  \"b\": 2\n}\n";
    assert_eq!(
        events(doc, 1 << 20),
        [
            "R 1 0 None {\n  \"a\": 1\n}",
            "R 4 13 None {\n  \"b\": 2\n}"
        ]
    );
}

#[test]
fn message_array_is_one_record() {
    let doc = br#"[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]"#;
    let text = String::from_utf8_lossy(doc);
    assert_eq!(events(doc, 1 << 20), [format!("R 1 0 None {text}")]);
}

#[test]
fn an_empty_array_holds_no_record() {
    assert!(events(b"[]", 1 << 20).is_empty());
    assert!(events(b"[\n]\n", 1 << 20).is_empty());
    assert!(events(b"\xEF\xBB\xBF[ ]", 1 << 20).is_empty());
}

#[test]
fn a_one_line_array_of_records_is_read_element_by_element() {
    let doc = b"\xEF\xBB\xBF[{\"id\":\"a\"},{\"id\":\"b\"}]\n";
    assert_eq!(
        events(doc, 1 << 20),
        [
            "R 1 4 Some(0) {\"id\":\"a\"}",
            "R 1 15 Some(1) {\"id\":\"b\"}"
        ]
    );
}

#[test]
fn blank_lines_are_counted_not_kept_and_a_document_owes_none() {
    let mut lines = vec![b'\n'; 5];
    lines.extend_from_slice(b"{\"a\":1}\n");
    assert_eq!(events(&lines, 1 << 20), ["B5", "R 6 5 None {\"a\":1}"]);
    let mut doc = vec![b'\n'; 3];
    doc.extend_from_slice(b"[\n{\"a\":1}\n]");
    assert_eq!(events(&doc, 1 << 20), ["R 5 5 Some(0) {\"a\":1}"]);
}

#[test]
fn a_document_that_is_not_json_is_read_as_lines() {
    let doc = b"{\"a\":\n{\"b\":1}\n";
    assert_eq!(
        events(doc, 1 << 20),
        ["R 1 0 None {\"a\":", "R 2 6 None {\"b\":1}"]
    );
}

#[test]
fn an_array_over_the_limit_is_read_element_by_element() {
    let mut doc = b"[\n".to_vec();
    for i in 0..50 {
        doc.extend_from_slice(format!("  {{\"n\": {i:03}}},\n").as_bytes());
    }
    doc.extend_from_slice(format!("  \"{}\"\n]\n", "x".repeat(300)).as_bytes());
    let got = events(&doc, 200);
    assert_eq!(got.len(), 51);
    assert_eq!(got[0], "R 2 4 Some(0) {\"n\": 000}");
    assert_eq!(got[49], "R 51 690 Some(49) {\"n\": 049}");
    assert_eq!(got[50], "O 52 302");
    // An object over the limit is one oversized record.
    let object = format!("{{\n\"a\": \"{}\"\n}}\n", "x".repeat(300));
    assert_eq!(events(object.as_bytes(), 200), ["O 1 312"]);
}

#[test]
fn records_sharing_blocks_keep_their_own_bytes_and_places() {
    // Lines of every size around a block's room: many to one block, one that just fits
    // or just misses the rest of a block, one too long to share ([`CHUNK_LINE_MAX`]), and
    // CRLF endings stripped inside a shared block. Over 1 MiB in all: several blocks.
    let sizes = [
        1usize,
        7,
        300,
        CHUNK_LINE_MAX - 9,
        CHUNK_LINE_MAX - 8,
        CHUNK_LINE_MAX + 1,
        5000,
        2,
    ];
    let mut doc = Vec::new();
    let mut want = Vec::new();
    for i in 0..200 {
        let size = sizes[i % sizes.len()];
        let offset = doc.len();
        let text = format!("{{\"n\":{i},\"s\":\"{}\"}}", "x".repeat(size));
        doc.extend_from_slice(text.as_bytes());
        doc.extend_from_slice(if i % 3 == 0 { b"\r\n" } else { b"\n" });
        want.push(format!("R {} {offset} None {text}", i + 1));
    }
    assert!(doc.len() > 4 * CHUNK);
    assert_eq!(events(&doc, 1 << 20), want);
}

/// A zstd file's records (slices of the decoded blocks, a line cut by a block's end
/// carried into the next, a longer one gathered) are the plain file's: bytes, lines,
/// offsets, blank lines, oversized lines.
#[test]
fn a_zstd_files_records_are_the_plain_files() {
    let sizes = [
        10usize,
        70_000,
        CARRY_MAX - 40,
        CARRY_MAX + 1,
        3,
        600_000,
        150_000,
        1_500_000,
        200_000,
    ];
    let mut doc = Vec::new();
    for i in 0..60 {
        let size = sizes[i % sizes.len()];
        let text = format!("{{\"n\":{i},\"s\":\"{}\"}}", "y".repeat(size));
        doc.extend_from_slice(text.as_bytes());
        doc.extend_from_slice(match i % 4 {
            0 => b"\r\n",
            1 => b"\n\n\n",
            _ => b"\n",
        });
    }
    doc.extend_from_slice(b"{\"last\":\"no newline\"}");
    let zstd = zstd::encode_all(&doc[..], 3).unwrap();
    for max in [1 << 20, 100_000] {
        let plain = events(&doc, max);
        assert!(
            plain.iter().any(|e| e.starts_with('O')),
            "an oversized line"
        );
        assert_eq!(events(&zstd, max), plain, "max {max}");
    }
}

#[test]
fn strip_handles_bom_and_crlf() {
    assert_eq!(strip_line(b"\xEF\xBB\xBF{}\r\n"), b"{}");
    assert_eq!(strip_line(b"{}\r\n"), b"{}");
}
