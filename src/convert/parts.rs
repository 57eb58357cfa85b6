//! Content parts to content items, by the part policies of the rules.

use crate::audit::{Action, Decision};
use crate::model::rollout::ContentItem;
use crate::model::transcript::Part;
use crate::rules::template::fill;
use crate::rules::{PartAction, Policies, PolicyId, RuleRef};

use super::ConvertError;

/// Which side of the conversation a part is on: user/tool input or assistant output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Input,
    Output,
}

/// What the rules say of one non-text part: its kind (for the audit), the policy that decides
/// it, and the item to write if the policy keeps it.
struct Verdict<'p> {
    kind: &'static str,
    action: PartAction,
    /// The policy deciding it.
    policy: PolicyId,
    template: &'p str,
    keep: Option<ContentItem>,
}

/// Converts the non-text part `part` of message `message`; text parts are the caller's.
/// Pushes the decision taken, returns the item to write (if any).
pub(crate) fn convert_part(
    part: &Part,
    side: Side,
    policies: &Policies,
    message: usize,
    decisions: &mut Vec<Decision>,
) -> Result<Option<ContentItem>, ConvertError> {
    let verdict = match verdict(part, side, policies) {
        Ok(verdict) => verdict,
        Err(item) => return Ok(item),
    };
    let Verdict {
        kind,
        action,
        policy,
        template,
        keep,
    } = verdict;
    let rule = RuleRef::Policy(policy);
    let mut decide = |action: Action, added: usize| {
        decisions.push(Decision {
            message: Some(message),
            rule: rule.clone(),
            action,
            bytes_dropped: 0,
            bytes_added: added,
        })
    };
    let part_name = || kind.to_string();
    match (action, keep) {
        (PartAction::Keep, Some(item)) => {
            decide(Action::PartKeptUnsupported { part: part_name() }, 0);
            Ok(Some(item))
        }
        (
            PartAction::OmitDetail,
            Some(ContentItem::InputImage {
                image_url, file_id, ..
            }),
        ) => {
            decide(Action::ImageDetailOmitted, 0);
            Ok(Some(ContentItem::InputImage {
                image_url,
                file_id,
                detail: None,
            }))
        }
        (PartAction::Drop, _) => {
            decide(Action::PartDropped { part: part_name() }, 0);
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
            decide(Action::PartPlaceholder { part: part_name() }, text.len());
            Ok(Some(super::user::text_item(side, text)))
        }
    }
}

/// A verdict of `policy` (with its action and template) on a part of `kind`.
fn verdict_of<'p>(
    kind: &'static str,
    action: PartAction,
    policy: PolicyId,
    template: &'p str,
    keep: Option<ContentItem>,
) -> Verdict<'p> {
    Verdict {
        kind,
        action,
        policy,
        template,
        keep,
    }
}

/// The policy that decides `part`, or (as `Err`) the item to write when no policy needs to:
/// a plain image Codex loads as it is, or nothing for a text part (the caller's).
fn verdict<'p>(
    part: &Part,
    side: Side,
    policies: &'p Policies,
) -> Result<Verdict<'p>, Option<ContentItem>> {
    let p = policies;
    Ok(match part {
        Part::Text(_) | Part::Refusal(_) => return Err(None),
        Part::Image {
            url,
            file_id,
            detail,
        } => return image_verdict(url, file_id, detail, side, policies),
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
            let keep = (side == Side::Input).then_some(item);
            verdict_of(
                "audio",
                p.audio_part,
                PolicyId::AudioPart,
                &p.audio_part_template,
                keep,
            )
        }
        Part::File { .. } => verdict_of(
            "file",
            p.file_part,
            PolicyId::FilePart,
            &p.file_part_template,
            None,
        ),
        Part::Unknown { .. } => verdict_of(
            "unknown",
            p.unknown_part,
            PolicyId::UnknownPart,
            &p.unknown_part_template,
            None,
        ),
    })
}

/// An image part: kept as is when Codex loads it, otherwise the policy for why it would not.
fn image_verdict<'p>(
    url: &Option<String>,
    file_id: &Option<String>,
    detail: &Option<String>,
    side: Side,
    p: &'p Policies,
) -> Result<Verdict<'p>, Option<ContentItem>> {
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
    Ok(if side == Side::Output {
        verdict_of(
            "image",
            p.unknown_part,
            PolicyId::UnknownPart,
            &p.unknown_part_template,
            None,
        )
    } else {
        // Codex would not load it as given: why decides the policy.
        let why = if undecodable {
            Some((
                "undecodable_image",
                p.undecodable_image,
                PolicyId::UndecodableImage,
                &p.undecodable_image_template,
            ))
        } else if remote {
            Some((
                "remote_image",
                p.remote_image,
                PolicyId::RemoteImage,
                &p.remote_image_template,
            ))
        } else if low {
            Some((
                "low_detail_image",
                p.low_detail_image,
                PolicyId::LowDetailImage,
                &p.low_detail_image_template,
            ))
        } else {
            None
        };
        match why {
            Some((kind, action, policy, template)) => {
                verdict_of(kind, action, policy, template, Some(item))
            }
            None => return Err(Some(item)),
        }
    })
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
    fill(
        template,
        &[
            ("url", &url),
            ("name", &name),
            ("format", &format),
            ("type", &kind),
        ],
    )
}
