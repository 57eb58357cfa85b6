//! Content parts to content items, by the part policies of the rules.

use crate::audit::{Action, Decision};
use crate::model::rollout::ContentItem;
use crate::model::transcript::Part;
use crate::rules::{PartAction, Policies};

use super::ConvertError;

/// Which side of the conversation a part is on: user/tool input or assistant output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Input,
    Output,
}

/// Converts the non-text part `part` of message `message`; text parts are the caller's.
/// Pushes the decision taken, returns the item to write (if any).
pub fn convert_part(
    part: &Part,
    side: Side,
    policies: &Policies,
    message: usize,
    decisions: &mut Vec<Decision>,
) -> Result<Option<ContentItem>, ConvertError> {
    let text_item = |text: String| match side {
        Side::Input => ContentItem::InputText { text },
        Side::Output => ContentItem::OutputText { text },
    };
    let (kind, action, template_key, template, keep): (
        &str,
        PartAction,
        &str,
        &str,
        Option<ContentItem>,
    ) = match part {
        Part::Text(_) | Part::Refusal(_) => return Ok(None),
        Part::Image {
            url,
            file_id,
            detail,
        } => {
            let remote = url.as_deref().is_some_and(|u| !u.starts_with("data:"));
            let undecodable = url
                .as_deref()
                .is_some_and(|u| u.starts_with("data:") && !super::image::data_url_decodes(u));
            let low = detail.as_deref() == Some("low");
            let item = ContentItem::InputImage {
                image_url: url.clone(),
                file_id: file_id.clone(),
                detail: detail.clone(),
            };
            if side == Side::Output {
                (
                    "image",
                    policies.unknown_part,
                    "unknown_part",
                    policies.unknown_part_template.as_str(),
                    None,
                )
            } else if undecodable {
                (
                    "undecodable_image",
                    policies.undecodable_image,
                    "undecodable_image",
                    policies.undecodable_image_template.as_str(),
                    Some(item),
                )
            } else if remote {
                (
                    "remote_image",
                    policies.remote_image,
                    "remote_image",
                    policies.remote_image_template.as_str(),
                    Some(item),
                )
            } else if low {
                (
                    "low_detail_image",
                    policies.low_detail_image,
                    "low_detail_image",
                    policies.low_detail_image_template.as_str(),
                    Some(item),
                )
            } else {
                return Ok(Some(item));
            }
        }
        Part::Audio {
            data,
            format,
            url,
            file_id,
        } => {
            let audio_url = match (url, data) {
                (Some(u), _) => Some(u.clone()),
                (None, Some(d)) => Some(format!(
                    "data:audio/{};base64,{d}",
                    format.as_deref().unwrap_or("wav")
                )),
                (None, None) => None,
            };
            let item = ContentItem::InputAudio {
                audio_url,
                file_id: file_id.clone(),
            };
            let keep = if side == Side::Input {
                Some(item)
            } else {
                None
            };
            (
                "audio",
                policies.audio_part,
                "audio_part",
                policies.audio_part_template.as_str(),
                keep,
            )
        }
        Part::File { .. } => (
            "file",
            policies.file_part,
            "file_part",
            policies.file_part_template.as_str(),
            None,
        ),
        Part::Unknown { .. } => (
            "unknown",
            policies.unknown_part,
            "unknown_part",
            policies.unknown_part_template.as_str(),
            None,
        ),
    };
    let rule = format!("policy.{template_key}");
    let decide = |action: Action, added: usize, decisions: &mut Vec<Decision>| {
        decisions.push(Decision {
            message: Some(message),
            rule: rule.clone(),
            action,
            bytes_dropped: 0,
            bytes_added: added,
        })
    };
    match (action, keep) {
        (PartAction::Keep, Some(item)) => {
            decide(
                Action::PartKeptUnsupported {
                    part: kind.to_string(),
                },
                0,
                decisions,
            );
            Ok(Some(item))
        }
        (
            PartAction::OmitDetail,
            Some(ContentItem::InputImage {
                image_url, file_id, ..
            }),
        ) => {
            decide(Action::ImageDetailOmitted, 0, decisions);
            Ok(Some(ContentItem::InputImage {
                image_url,
                file_id,
                detail: None,
            }))
        }
        (PartAction::Drop, _) => {
            decide(
                Action::PartDropped {
                    part: kind.to_string(),
                },
                0,
                decisions,
            );
            Ok(None)
        }
        (PartAction::Quarantine, _) => Err(ConvertError {
            rule,
            reason: format!("{kind} content part"),
            message: Some(message),
        }),
        // Placeholder, and keep/omit_detail where nothing can be kept (e.g. assistant images).
        (PartAction::Placeholder | PartAction::Keep | PartAction::OmitDetail, _) => {
            let text = fill_placeholder(template, part);
            decide(
                Action::PartPlaceholder {
                    part: kind.to_string(),
                },
                text.len(),
                decisions,
            );
            Ok(Some(text_item(text)))
        }
    }
}

/// Fills `{url}`, `{name}`, `{format}`, `{type}` in a placeholder template.
fn fill_placeholder(template: &str, part: &Part) -> String {
    let (url, name, format, kind) = match part {
        Part::Image { url, file_id, .. } => (
            url.clone().or_else(|| file_id.clone()).unwrap_or_default(),
            String::new(),
            String::new(),
            "image".to_string(),
        ),
        Part::Audio { format, url, .. } => (
            url.clone().unwrap_or_default(),
            String::new(),
            format.clone().unwrap_or_else(|| "audio".to_string()),
            "audio".to_string(),
        ),
        Part::File {
            filename, file_id, ..
        } => (
            String::new(),
            filename
                .clone()
                .or_else(|| file_id.clone())
                .unwrap_or_else(|| "unnamed".to_string()),
            String::new(),
            "file".to_string(),
        ),
        Part::Unknown { kind } => (String::new(), String::new(), String::new(), kind.clone()),
        Part::Text(_) | Part::Refusal(_) => {
            (String::new(), String::new(), String::new(), String::new())
        }
    };
    // A remote URL can be long and carry tokens: keep it, it is what the user had.
    template
        .replace("{url}", &url)
        .replace("{name}", &name)
        .replace("{format}", &format)
        .replace("{type}", &kind)
}
