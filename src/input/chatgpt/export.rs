//! A ChatGPT export zip's conversations as JSON Lines, decompressed and split as read: the
//! lines the source layer reads of a zip ([`crate::source::open::ArchiveLines`]), which only
//! this reader knows how to find in one.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use crate::source::open::{read_buffered, NotAnArchive, READ_BUFFER};

/// Whether a zip entry is an export's conversations file: `conversations.json` or
/// `conversations-NNN.json`, in any folder of the archive.
fn is_conversations_entry(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    let Some(stem) = base.strip_suffix(".json") else {
        return false;
    };
    stem == "conversations"
        || stem
            .strip_prefix("conversations-")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The conversations of a ChatGPT export zip as JSON Lines, one conversation a line: the
/// arrays of its conversations files in name order (a lone object counts as one), each
/// element's bytes as they are in the file but for line breaks outside strings, which become
/// spaces. The entries are decompressed and split as they are read: memory is one read buffer
/// whatever their size, and a conversation longer than `--max-record-bytes` is a line the
/// splitter reports oversized. A break in an entry's JSON between conversations, a truncated
/// or corrupt entry (its CRC-32 is checked) is a read error at that point. The reader's
/// [`crate::source::open::ArchiveLines`].
// Matches a foreign non-exhaustive enum, which needs a wildcard arm.
#[allow(clippy::wildcard_enum_match_arm)]
pub(super) fn export_conversations(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    let mut archive = zip::ZipArchive::new(File::open(path)?).map_err(io::Error::other)?;
    let mut entries = Vec::new();
    for index in 0..archive.len() {
        let entry = archive.by_index_raw(index).map_err(io::Error::other)?;
        if !entry.is_file() || !is_conversations_entry(entry.name()) {
            continue;
        }
        entries.push(Entry {
            name: entry.name().to_string(),
            data_start: entry.data_start(),
            compressed: entry.compressed_size(),
            deflated: match entry.compression() {
                zip::CompressionMethod::Stored => false,
                zip::CompressionMethod::Deflated => true,
                // `CompressionMethod` is non-exhaustive: a binding is the only way to match
                // the rest.
                other => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                        "{}: compression method {other} is not supported (stored and deflated are)",
                        entry.name()
                    ),
                    ))
                }
            },
            crc32: entry.crc32(),
        });
    }
    if entries.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            NotAnArchive("a zip without conversations.json: not a ChatGPT export"),
        ));
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries.reverse();
    Ok(Box::new(ExportLines {
        path: path.to_path_buf(),
        entries,
        current: None,
        out: Vec::with_capacity(READ_BUFFER),
        at: 0,
    }))
}

/// Where one conversations file is in the zip.
struct Entry {
    name: String,
    data_start: u64,
    compressed: u64,
    deflated: bool,
    crc32: u32,
}

/// The export's conversations as lines, produced a buffer at a time (see
/// [`export_conversations`]).
struct ExportLines {
    path: std::path::PathBuf,
    /// The entries still to read, the next last.
    entries: Vec<Entry>,
    current: Option<EntryLines>,
    /// Lines made and not yet consumed: `out[at..]`.
    out: Vec<u8>,
    at: usize,
}

/// One entry being read: its decompressed bytes and where its array is.
struct EntryLines {
    name: String,
    data: Box<dyn Read + Send>,
    crc: crc32fast::Hasher,
    crc32: u32,
    input: Vec<u8>,
    /// Decompressed bytes of the entry read so far.
    read: u64,
    state: Scan,
}

/// Where the transducer is in an entry's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// Before the document (a byte-order mark or white space may come).
    Start,
    /// In the array, between conversations.
    Between,
    /// In a conversation: `depth` brackets open, in a string or not, after a backslash or not;
    /// `lone` when the entry is one object, not an array.
    Value {
        depth: u32,
        string: bool,
        escape: bool,
        lone: bool,
    },
    /// After the document: only white space may come.
    End,
}

impl ExportLines {
    fn open_entry(&self, entry: Entry) -> io::Result<EntryLines> {
        let mut file = File::open(&self.path)?;
        io::Seek::seek(&mut file, io::SeekFrom::Start(entry.data_start))?;
        let raw = BufReader::with_capacity(READ_BUFFER, file.take(entry.compressed));
        let data: Box<dyn Read + Send> = if entry.deflated {
            Box::new(flate2::bufread::DeflateDecoder::new(raw))
        } else {
            Box::new(raw)
        };
        Ok(EntryLines {
            name: entry.name,
            data,
            crc: crc32fast::Hasher::new(),
            crc32: entry.crc32,
            input: vec![0; READ_BUFFER],
            read: 0,
            state: Scan::Start,
        })
    }

    /// Makes more lines into `out`; false at the end of the last entry.
    fn refill(&mut self) -> io::Result<bool> {
        self.out.clear();
        self.at = 0;
        loop {
            let current = match self.current.as_mut() {
                Some(current) => current,
                None => {
                    let Some(entry) = self.entries.pop() else {
                        return Ok(false);
                    };
                    let opened = self.open_entry(entry)?;
                    self.current.insert(opened)
                }
            };
            let n = loop {
                match current.data.read(&mut current.input) {
                    Ok(n) => break n,
                    Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                    Err(err) => return Err(current.error(format!("cannot decompress: {err}"))),
                }
            };
            if n == 0 {
                current.finish()?;
                if !self.out.is_empty() {
                    // A lone object's line ends with its entry.
                    if self.out.last() != Some(&b'\n') {
                        self.out.push(b'\n');
                    }
                }
                self.current = None;
                if !self.out.is_empty() {
                    return Ok(true);
                }
                continue;
            }
            current.crc.update(&current.input[..n]);
            current.transduce(n, &mut self.out)?;
            current.read += n as u64;
            if !self.out.is_empty() {
                return Ok(true);
            }
        }
    }
}

impl EntryLines {
    fn error(&self, message: String) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} in the zip, byte {}: {message}", self.name, self.read),
        )
    }

    /// The entry ended: its JSON is complete and its checksum right.
    fn finish(&self) -> io::Result<()> {
        match self.state {
            Scan::End | Scan::Start => {}
            Scan::Between | Scan::Value { lone: false, .. } => {
                return Err(self.error("the conversations array is not closed".into()))
            }
            Scan::Value {
                lone: true,
                depth,
                string,
                ..
            } if depth > 0 || string => {
                return Err(self.error("the conversation object is not closed".into()))
            }
            Scan::Value { lone: true, .. } => {}
        }
        if self.crc.clone().finalize() != self.crc32 {
            return Err(self.error("CRC-32 mismatch: the zip is corrupt".into()));
        }
        Ok(())
    }

    /// Turns `input[..n]` into lines appended to `out`.
    fn transduce(&mut self, n: usize, out: &mut Vec<u8>) -> io::Result<()> {
        let mut i = 0;
        while i < n {
            let byte = self.input[i];
            match &mut self.state {
                Scan::Start => match byte {
                    b' ' | b'\t' | b'\r' | b'\n' => {}
                    // A UTF-8 byte-order mark.
                    0xEF | 0xBB | 0xBF if self.read + (i as u64) < 3 => {}
                    b'[' => self.state = Scan::Between,
                    b'{' => {
                        out.push(byte);
                        self.state = Scan::Value {
                            depth: 1,
                            string: false,
                            escape: false,
                            lone: true,
                        };
                    }
                    other => {
                        return Err(self.at_error(
                            i,
                            format!("expected `[` or `{{`, found {:?}", other as char),
                        ))
                    }
                },
                Scan::Between => match byte {
                    b' ' | b'\t' | b'\r' | b'\n' | b',' => {}
                    b']' => self.state = Scan::End,
                    _ => {
                        out.push(byte);
                        self.state = Scan::Value {
                            depth: u32::from(matches!(byte, b'{' | b'[')),
                            string: byte == b'"',
                            escape: false,
                            lone: false,
                        };
                    }
                },
                Scan::Value {
                    depth,
                    string,
                    escape,
                    lone,
                } => {
                    if *string {
                        // Jump to the next quote or backslash: a string's bytes pass as they are.
                        if *escape {
                            *escape = false;
                            out.push(byte);
                            i += 1;
                            continue;
                        }
                        let rest = &self.input[i..n];
                        let stop = memchr::memchr3(b'"', b'\\', b'\n', rest).unwrap_or(rest.len());
                        out.extend_from_slice(&rest[..stop]);
                        i += stop;
                        let Some(&special) = rest.get(stop) else {
                            continue;
                        };
                        match special {
                            b'"' => *string = false,
                            b'\\' => *escape = true,
                            // A raw line break in a string is not JSON: the record is reported as
                            // it is (the splitter's line ends here, and so does this one).
                            _ => {}
                        }
                        out.push(special);
                        let ended = special == b'"' && *depth == 0;
                        i += 1;
                        if ended {
                            self.state = if *lone { Scan::End } else { Scan::Between };
                            out.push(b'\n');
                        }
                        continue;
                    }
                    match byte {
                        b'"' => {
                            *string = true;
                            out.push(byte);
                        }
                        b'{' | b'[' => {
                            *depth += 1;
                            out.push(byte);
                        }
                        b'}' | b']' if *depth > 0 => {
                            *depth -= 1;
                            out.push(byte);
                            if *depth == 0 {
                                let lone = *lone;
                                out.push(b'\n');
                                self.state = if lone { Scan::End } else { Scan::Between };
                            }
                        }
                        // A scalar element ends at its delimiter.
                        b',' | b']' | b' ' | b'\t' | b'\r' | b'\n' if *depth == 0 => {
                            out.push(b'\n');
                            self.state = if byte == b']' {
                                Scan::End
                            } else {
                                Scan::Between
                            };
                        }
                        b'\r' | b'\n' => out.push(b' '),
                        _ => out.push(byte),
                    }
                }
                Scan::End => match byte {
                    b' ' | b'\t' | b'\r' | b'\n' => {}
                    other => {
                        return Err(self.at_error(
                            i,
                            format!("{:?} after the end of the document", other as char),
                        ))
                    }
                },
            }
            i += 1;
        }
        Ok(())
    }

    fn at_error(&self, i: usize, message: String) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} in the zip, byte {}: {message}",
                self.name,
                self.read + i as u64
            ),
        )
    }
}

impl Read for ExportLines {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read_buffered(self, buf)
    }
}

impl BufRead for ExportLines {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.at >= self.out.len() && !self.refill()? {
            return Ok(&[]);
        }
        Ok(&self.out[self.at..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.out.len());
    }
}
