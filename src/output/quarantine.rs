//! Quarantine entries: a record that could not be converted, unchanged, with where it came from
//! and why. The record's exact bytes are kept: as `record` (text) when they are UTF-8, as
//! `record_base64` otherwise. The class is the refusing stage's ([`QuarantineClass`], in
//! `model`, re-exported here): this writer lists no stage's errors.

use base64::Engine;
use serde::Serialize;

pub(crate) use crate::model::quarantine::QuarantineClass;
use crate::model::quarantine::QuarantineReason;
use crate::model::Located;

#[derive(Debug, Clone, Serialize)]
pub struct QuarantineEntry {
    pub source: String,
    pub line: u64,
    pub byte_offset: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub element: Option<usize>,
    /// Reason class (`invalid_json`, `no_messages`, `rule`, `invariant`, ...).
    pub class: QuarantineClass,
    /// One-line reason.
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_base64: Option<String>,
}

impl QuarantineEntry {
    /// The entry of the record `raw`, refused for `cause`: its location, class and reason
    /// (`path:line (byte N): why`, on one line) all from that one value.
    pub fn new<R: QuarantineReason>(cause: &Located<R>, raw: &[u8]) -> QuarantineEntry {
        let location = &cause.location;
        let (record, record_base64) = match std::str::from_utf8(raw) {
            Ok(text) => (Some(text.to_string()), None),
            Err(_) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(raw)),
            ),
        };
        QuarantineEntry {
            source: location.path.to_string(),
            line: location.line,
            byte_offset: location.byte_offset,
            element: location.element,
            class: cause.cause.class(),
            reason: cause.to_string().replace('\n', " "),
            record,
            record_base64,
        }
    }

    /// The record's original bytes.
    pub fn raw(&self) -> Vec<u8> {
        match (&self.record, &self.record_base64) {
            (Some(text), _) => text.as_bytes().to_vec(),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap_or_default(),
            (None, None) => Vec::new(),
        }
    }
}
