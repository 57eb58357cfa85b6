//! The contextual-user fragment registry: Codex's case-insensitive start/end test.

/// A contextual-user fragment kind Codex recognises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    pub kind: String,
    pub start: String,
    pub end: String,
    pub template: String,
    pub separate: bool,
    start_lower: String,
    end_lower: String,
}

impl Marker {
    pub fn new(
        kind: String,
        start: String,
        end: String,
        template: String,
        separate: bool,
    ) -> Marker {
        Marker {
            start_lower: start.trim().to_lowercase(),
            end_lower: end.trim().to_lowercase(),
            kind,
            start,
            end,
            template,
            separate,
        }
    }

    /// Codex's test: the trimmed text starts with `start` and ends with `end`, ignoring case.
    pub fn wraps(&self, text: &str) -> bool {
        self.wraps_trimmed(text.trim())
    }

    /// [`Marker::wraps`] of a text already trimmed: for a text tried against every marker,
    /// trimmed once.
    pub fn wraps_trimmed(&self, trimmed: &str) -> bool {
        starts_with_ignore_case(trimmed, &self.start_lower)
            && ends_with_ignore_case(trimmed, &self.end_lower)
    }
}

fn starts_with_ignore_case(text: &str, lower_prefix: &str) -> bool {
    text.len() >= lower_prefix.len()
        && text.is_char_boundary(lower_prefix.len())
        && ascii_may_match(text.as_bytes().first(), lower_prefix.as_bytes().first())
        && lowercases_to(&text[..lower_prefix.len()], lower_prefix)
}

fn ends_with_ignore_case(text: &str, lower_suffix: &str) -> bool {
    let Some(at) = text.len().checked_sub(lower_suffix.len()) else {
        return false;
    };
    text.is_char_boundary(at)
        && ascii_may_match(text.as_bytes().last(), lower_suffix.as_bytes().last())
        && lowercases_to(&text[at..], lower_suffix)
}

/// False when the text's first (or last) byte is an ASCII character whose lowercase is not the
/// lowered marker's first (or last) byte: then they cannot match, and most user texts are
/// told apart from every marker by one byte. A non-ASCII byte may lowercase to anything (the
/// Kelvin sign to `k`): the whole test decides.
fn ascii_may_match(text: Option<&u8>, lower: Option<&u8>) -> bool {
    match (text, lower) {
        (Some(&b), Some(&l)) if b.is_ascii() => b.to_ascii_lowercase() == l,
        _ => true,
    }
}

/// `part.to_lowercase() == lower`, without allocating when `part` is ASCII (nearly always:
/// this runs for every user text against every marker, in convert and validate).
fn lowercases_to(part: &str, lower: &str) -> bool {
    if part.is_ascii() {
        part.bytes()
            .map(|b| b.to_ascii_lowercase())
            .eq(lower.bytes())
    } else {
        part.to_lowercase() == lower
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_byte_check_keeps_every_verdict() {
        let marker = Marker::new(
            "k".into(),
            "<Kind>".into(),
            "</kind>".into(),
            String::new(),
            false,
        );
        // The test as it was before the one-byte check: the check must not change a verdict.
        let reference = |text: &str| {
            let t = text.trim();
            let (start, end) = ("<kind>", "</kind>");
            let head = t.len() >= start.len()
                && t.is_char_boundary(start.len())
                && lowercases_to(&t[..start.len()], start);
            let tail = t
                .len()
                .checked_sub(end.len())
                .is_some_and(|at| t.is_char_boundary(at) && lowercases_to(&t[at..], end));
            head && tail
        };
        for text in [
            "<kind>x</kind>",
            "  <KIND>x</KIND>\n",
            "<kind>x</kind",
            "kind>x</kind>",
            "<\u{212A}ind>x</\u{212A}IND>",
            "\u{212A}<kind>x</kind>",
            "<kind>x</kind>\u{212A}",
            "hello",
            "",
            "<kind></kind>",
            "<kind>",
            "é<kind>x</kind>",
            "<KIND>\u{212A}</kind>",
            "<kİnd>x</kind>",
        ] {
            assert_eq!(marker.wraps(text), reference(text), "{text:?}");
        }
    }

    #[test]
    fn lowercases_to_is_to_lowercase_then_equal() {
        let parts = [
            "", "<ENV>", "<env>", "<EnV", "<ENVX", "AbC", "abc", "ÀB", "àb", "İ", "i\u{307}", "ΟΣ",
            "ος", "οσ", "K", "\u{212A}", "k", "a\u{0}",
        ];
        for part in parts {
            for lower in parts.iter().map(|p| p.to_lowercase()) {
                assert_eq!(
                    lowercases_to(part, &lower),
                    part.to_lowercase() == lower,
                    "{part:?} {lower:?}"
                );
            }
        }
    }
}
