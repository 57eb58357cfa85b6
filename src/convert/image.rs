//! Inline (`data:`) images: Codex 0.169 decodes every one on resume and replaces an image it
//! cannot decode by "image content omitted because it could not be processed". We decode it
//! first, so that the decision is ours, by rule, and in the audit.

use base64::Engine;

/// True when `url` is a `data:` URL whose payload decodes as a PNG, JPEG, GIF or WebP image.
pub fn data_url_decodes(url: &str) -> bool {
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
}
