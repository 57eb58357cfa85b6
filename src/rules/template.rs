//! Filling the placeholders of a rule file's template (`{text}`, `{call_id}`, `{url}`...).
//!
//! In: a template and the value of each placeholder it may hold. Out: the text, every known
//! placeholder replaced by its value in one pass over the template. A value is copied as it
//! is and never read for placeholders: a call id or a URL holding `{text}` stays as written
//! (one `.replace` per placeholder, chained, filled the later placeholders into the earlier
//! values). Anything else in braces, known names misspelled included, is kept as written.

/// `template` with each `{name}` of `values` replaced by its value, in one pass.
pub(crate) fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let added: usize = values.iter().map(|(_, value)| value.len()).sum();
    let mut out = String::with_capacity(template.len() + added);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let known = values.iter().find_map(|(name, value)| {
            let tail = after.strip_prefix(name)?.strip_prefix('}')?;
            Some((*value, tail))
        });
        match known {
            Some((value, tail)) => {
                out.push_str(value);
                rest = tail;
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn a_value_holding_a_placeholder_is_not_filled_again() {
        let template = "[tool output for call {call_id} with no matching call]\n{text}";
        let filled = fill(
            template,
            &[("call_id", "call_{text}"), ("text", "out {call_id}")],
        );
        assert_eq!(
            filled,
            "[tool output for call call_{text} with no matching call]\nout {call_id}"
        );
    }

    #[test]
    fn every_known_placeholder_is_filled_and_other_braces_are_kept() {
        let filled = fill(
            "<{name}>{{text}} {json} {nam} {name\n{text}\n</{name}>{",
            &[("name", "ctx"), ("text", "body")],
        );
        assert_eq!(filled, "<ctx>{body} {json} {nam} {name\nbody\n</ctx>{");
        assert_eq!(fill("", &[("text", "x")]), "");
        assert_eq!(fill("no placeholders", &[]), "no placeholders");
    }

    #[test]
    fn a_fill_is_what_chained_replaces_gave_when_no_value_holds_a_placeholder() {
        let template = "[{type} {name}: {json}] {type}";
        let values = [
            ("type", "web_search"),
            ("name", "n é"),
            ("json", r#"{"q":1}"#),
        ];
        let chained = template
            .replace("{type}", values[0].1)
            .replace("{name}", values[1].1)
            .replace("{json}", values[2].1);
        assert_eq!(fill(template, &values), chained);
    }
}
