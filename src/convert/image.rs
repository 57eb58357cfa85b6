//! Inline (`data:`) images: Codex 0.169 decodes every one on resume and replaces an image it
//! cannot decode by "image content omitted because it could not be processed". We decode it
//! first, so that the decision is ours, by rule, and in the audit.
//!
//! The same image often comes again and again: logs that resend the history resend its
//! screenshots, and a dataset may reuse one. Decoding a small image costs mostly the decoder's
//! set-up (~40,000 instructions and two zeroed tables for a 1x1 PNG), so each thread remembers
//! the verdicts on the last few small URLs it decoded, compared byte for byte (no hash whose
//! collision could pass an image Codex would refuse).

use std::cell::RefCell;
use std::collections::VecDeque;

use base64::Engine;

/// How many verdicts each thread remembers, and the longest URL it remembers one for (a longer
/// image costs its decoding, not the set-up, and would make the memory per thread large).
const REMEMBERED: usize = 8;
const REMEMBERED_MAX_LEN: usize = 64 << 10;

thread_local! {
    static VERDICTS: RefCell<VecDeque<(Box<str>, bool)>> = const { RefCell::new(VecDeque::new()) };
}

/// True when `url` is a `data:` URL whose payload decodes as a PNG, JPEG, GIF or WebP image.
pub(crate) fn data_url_decodes(url: &str) -> bool {
    if url.len() > REMEMBERED_MAX_LEN {
        return decodes(url);
    }
    let known = VERDICTS.with(|v| {
        v.borrow()
            .iter()
            .find(|(seen, _)| **seen == *url)
            .map(|(_, ok)| *ok)
    });
    if let Some(ok) = known {
        return ok;
    }
    let ok = decodes(url);
    VERDICTS.with(|v| {
        let mut v = v.borrow_mut();
        if v.len() == REMEMBERED {
            v.pop_front();
        }
        v.push_back((url.into(), ok));
    });
    ok
}

fn decodes(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("data:") else {
        return false;
    };
    let Some((header, payload)) = rest.split_once(',') else {
        return false;
    };
    if !header.ends_with(";base64") {
        return false;
    }
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(payload.trim()) else {
        return false;
    };
    image::load_from_memory(&bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid 1x1 PNG.
    const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

    #[test]
    fn decodable_and_undecodable_images() {
        assert!(data_url_decodes(&format!("data:image/png;base64,{PIXEL}")));
        // The PNG signature alone: Codex replaces it, so must we.
        assert!(!data_url_decodes("data:image/png;base64,iVBORw0KGgo="));
        assert!(!data_url_decodes("data:image/png;base64,!!!"));
        assert!(!data_url_decodes("https://example.com/a.png"));
    }

    #[test]
    fn remembered_verdicts_are_the_decoders() {
        let good = format!("data:image/png;base64,{PIXEL}");
        let bad = "data:image/png;base64,iVBORw0KGgo=".to_string();
        // More distinct URLs than are remembered, each asked again and again, interleaved.
        let urls: Vec<String> = (0..3 * REMEMBERED)
            .map(|k| match k % 3 {
                0 => good.clone(),
                1 => format!("{bad}{}", "=".repeat(k)),
                _ => format!("data:image/png;base64,{PIXEL}{}", " ".repeat(k)),
            })
            .collect();
        for round in 0..3 {
            for url in &urls {
                assert_eq!(data_url_decodes(url), decodes(url), "round {round}: {url}");
            }
        }
        let long = format!(
            "data:image/png;base64,{}{PIXEL}",
            " ".repeat(REMEMBERED_MAX_LEN)
        );
        assert_eq!(data_url_decodes(&long), decodes(&long));
    }
}
