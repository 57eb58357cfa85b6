//! Deterministic ids: the session UUID (a v7 UUID whose time is the session start and whose
//! random bits are a hash of the conversation's identity) and synthesised call ids.

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The session id of a conversation: a v7 UUID whose time is the session start and whose
/// random bits are the SHA-256 of the conversation's identity
/// ([`crate::model::identity::conversation_identity`]): the same conversation and time give
/// the same id, from any file, at any position.
pub(crate) fn session_id(identity: &str, started_ms: i64) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"rollover session\n");
    hasher.update(identity.as_bytes());
    let digest = hasher.finalize();
    let mut random = [0u8; 10];
    random.copy_from_slice(&digest[..10]);
    let ms = u64::try_from(started_ms.max(0)).unwrap_or(0);
    uuid::Builder::from_unix_timestamp_millis(ms, &random)
        .into_uuid()
        .hyphenated()
        .to_string()
}

/// The session id of a conversation that shares its source id with another, unrelated one of
/// the same input: made of the first one's session id and its own messages' digest
/// ([`crate::model::identity::variant_identity`]), with the same time.
pub(crate) fn split_session_id(id: &str, content: u128) -> String {
    let identity = crate::model::identity::variant_identity(id, content);
    session_id(&identity, uuid_ms(id))
}

/// The time (ms) of a v7 UUID; 0 when it is not one.
fn uuid_ms(id: &str) -> i64 {
    Uuid::parse_str(id)
        .ok()
        .and_then(|uuid| uuid.get_timestamp())
        .map(|t| {
            let (seconds, nanos) = t.to_unix();
            i64::try_from(seconds).unwrap_or(0) * 1000 + i64::from(nanos / 1_000_000)
        })
        .unwrap_or(0)
}

/// True when `text` is a UUID in the hyphenated form Codex writes.
pub(crate) fn is_uuid(text: &str) -> bool {
    text.len() == 36 && Uuid::parse_str(text).is_ok()
}

/// A call id for a call the input gave none (legacy `function_call`, or a call without `id`).
pub(crate) fn synthesized_call_id(message: usize, position: usize) -> String {
    format!("call_rollover_m{message}_{position}")
}

/// The id of the `n`-th use (n >= 2) of a call id.
pub(crate) fn renamed_call_id(original: &str, n: usize) -> String {
    format!("{original}#{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_deterministic_and_distinct() {
        let id = session_id("record:00", 1_700_000_000_000);
        assert_eq!(id, session_id("record:00", 1_700_000_000_000));
        assert_ne!(id, session_id("record:00#2", 1_700_000_000_000));
        assert!(is_uuid(&id));
        assert!(id.starts_with("018bcfe5-6800-7"), "{id}");
    }
}
