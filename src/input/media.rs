//! Content parts several readers build alike: a media part given inline or by reference
//! (Gemini `inlineData`/`fileData`, OTel `blob`/`uri`/`file`), parts as a message's content,
//! a tool output without empty texts (ChatGPT, Claude Code), and a JSON value's kind and text.

use serde_json::Value;

use crate::model::transcript::{Content, Part};

/// Whether media of `mime` (or of `modality` when the type is unknown) is an image, audio,
/// or something else.
fn class(mime: Option<&str>, modality: Option<&str>) -> &'static str {
    let top = mime.and_then(|m| m.split('/').next()).or(modality);
    match top {
        Some("image") => "image",
        Some("audio") => "audio",
        _ => "other",
    }
}

/// Media given inline, base64 `data` of `mime`: an image as a `data:` URL, audio as audio
/// data, anything else a file part (its size counted, its bytes not kept).
pub(crate) fn inline_part(mime: Option<&str>, modality: Option<&str>, data: String) -> Part {
    match class(mime, modality) {
        "image" => Part::Image {
            url: Some(format!(
                "data:{};base64,{data}",
                mime.unwrap_or("image/png")
            )),
            file_id: None,
            detail: None,
        },
        "audio" => Part::Audio {
            format: mime.and_then(|m| m.split('/').nth(1)).map(str::to_string),
            data: Some(data),
            url: None,
            file_id: None,
        },
        _ => Part::File {
            filename: None,
            file_id: None,
            data_len: data.len(),
        },
    }
}

/// Media given by reference: an image by its URL, audio by its URL, anything else a file
/// part named by it.
pub(crate) fn linked_part(mime: Option<&str>, modality: Option<&str>, uri: String) -> Part {
    match class(mime, modality) {
        "image" => Part::Image {
            url: Some(uri),
            file_id: None,
            detail: None,
        },
        "audio" => Part::Audio {
            data: None,
            format: mime.and_then(|m| m.split('/').nth(1)).map(str::to_string),
            url: Some(uri),
            file_id: None,
        },
        _ => Part::File {
            filename: Some(uri),
            file_id: None,
            data_len: 0,
        },
    }
}

/// Media given by a provider's file id.
pub(crate) fn file_part(mime: Option<&str>, modality: Option<&str>, file_id: String) -> Part {
    match class(mime, modality) {
        "image" => Part::Image {
            url: None,
            file_id: Some(file_id),
            detail: None,
        },
        "audio" => Part::Audio {
            data: None,
            format: None,
            url: None,
            file_id: Some(file_id),
        },
        _ => Part::File {
            filename: None,
            file_id: Some(file_id),
            data_len: 0,
        },
    }
}

/// A message's content of `parts`: a single text as text, nothing as an empty text, anything
/// else as parts.
pub(crate) fn content(mut parts: Vec<Part>) -> Content {
    match parts.as_slice() {
        [] => Content::Text(String::new()),
        [Part::Text(_)] => match parts.pop() {
            Some(Part::Text(text)) => Content::Text(text),
            _ => Content::Parts(parts),
        },
        _ => Content::Parts(parts),
    }
}

/// A tool output's content of `parts` without their empty texts: Codex drops an empty text
/// item from an output array, so writing one would not resume as written.
pub(crate) fn tool_output_content(parts: Vec<Part>) -> Content {
    content(
        parts
            .into_iter()
            .filter(|p| !matches!(p, Part::Text(t) if t.is_empty()))
            .collect(),
    )
}

/// A tool message's content without its empty text parts (see [`tool_output_content`]),
/// still parts; nothing left is an empty text.
pub(crate) fn without_empty_texts(content: Content) -> Content {
    match content {
        Content::Parts(parts) => {
            let parts: Vec<Part> = parts
                .into_iter()
                .filter(|p| !matches!(p, Part::Text(t) if t.is_empty()))
                .collect();
            if parts.is_empty() {
                Content::Text(String::new())
            } else {
                Content::Parts(parts)
            }
        }
        other @ (Content::Missing | Content::Null | Content::Text(_)) => other,
    }
}

/// The JSON type of `value`, as errors and the audit name it.
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_is_an_image_audio_or_a_file() {
        assert_eq!(
            inline_part(Some("image/jpeg"), None, "AAAA".into()),
            Part::Image {
                url: Some("data:image/jpeg;base64,AAAA".into()),
                file_id: None,
                detail: None
            }
        );
        assert_eq!(
            inline_part(None, Some("audio"), "AA".into()),
            Part::Audio {
                data: Some("AA".into()),
                format: None,
                url: None,
                file_id: None
            }
        );
        assert_eq!(
            linked_part(Some("application/pdf"), None, "gs://b/f.pdf".into()),
            Part::File {
                filename: Some("gs://b/f.pdf".into()),
                file_id: None,
                data_len: 0
            }
        );
    }
}
