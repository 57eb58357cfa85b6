//! How the commands talk to people: quiet or verbose, colour (as ripgrep decides it), the
//! terminal's width, and numbers written one way everywhere (digit grouping, bytes in binary
//! units, plurals: indicatif's, as its progress bar shows them), and lines wrapped to the
//! terminal by the columns they take (textwrap).

use std::io::IsTerminal;

use anstyle::{AnsiColor, Style};
use indicatif::HumanBytes;
use textwrap::core::{display_width, Fragment};
use textwrap::wrap_algorithms::wrap_first_fit;

use crate::cli::{ColorChoice, GlobalArgs};

pub mod conversion;
pub mod help;

/// Output settings shared by every command.
#[derive(Debug, Clone)]
pub struct Ui {
    /// Print nothing but errors (`--quiet`).
    pub quiet: bool,
    /// Add a line per file (`--verbose`).
    pub verbose: bool,
    /// Colour the output.
    pub color: bool,
    /// Columns to fit lines in.
    pub width: usize,
}

/// Width used when stdout is not a terminal and `COLUMNS` does not say.
pub const DEFAULT_WIDTH: usize = 80;

impl Ui {
    pub fn new(args: &GlobalArgs) -> Ui {
        let terminal = std::io::stdout().is_terminal();
        Ui {
            quiet: args.quiet,
            verbose: args.verbose,
            color: wants_color(args.color, terminal, |name| std::env::var_os(name)),
            width: width(terminal),
        }
    }

    /// Plain settings: no colour, 80 columns (tests, and callers without a command line).
    pub fn plain() -> Ui {
        Ui {
            quiet: false,
            verbose: false,
            color: false,
            width: DEFAULT_WIDTH,
        }
    }

    fn paint(&self, text: &str, style: Style) -> String {
        if self.color {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_string()
        }
    }

    /// A good state: ok, converted, passed.
    pub fn ok(&self, text: &str) -> String {
        self.paint(text, AnsiColor::Green.on_default())
    }

    /// A state that needed a decision: repaired, kept, a warning.
    pub fn warn(&self, text: &str) -> String {
        self.paint(text, AnsiColor::Yellow.on_default())
    }

    /// A bad state: quarantined, damaged, failed, an error.
    pub fn bad(&self, text: &str) -> String {
        self.paint(text, AnsiColor::Red.on_default().bold())
    }
}

/// ripgrep's rule: `never` and `always` say it; `auto` colours a terminal unless `NO_COLOR`
/// is set (to anything but the empty string) or `TERM` is `dumb`.
fn wants_color(
    choice: ColorChoice,
    terminal: bool,
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> bool {
    match choice {
        ColorChoice::Never => false,
        ColorChoice::Always => true,
        ColorChoice::Auto => {
            let no_color = env("NO_COLOR").is_some_and(|v| !v.is_empty());
            let dumb = env("TERM").is_some_and(|v| v == "dumb");
            terminal && !no_color && !dumb
        }
    }
}

/// The terminal's width; else `COLUMNS`; else 80. Never below 40, so labels still fit.
fn width(terminal: bool) -> usize {
    let measured = terminal
        .then(|| terminal_size::terminal_size().map(|(w, _)| usize::from(w.0)))
        .flatten();
    let columns = || {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok())
    };
    measured
        .or_else(columns)
        .filter(|&w| w > 0)
        .unwrap_or(DEFAULT_WIDTH)
        .max(40)
}

/// `1234567` → `1,234,567` (indicatif's grouping, as the progress bar shows counts), and
/// `1 file` / `2 files`: the reports write counts the same way.
pub use crate::audit::report::{group, plural};

/// Bytes in binary units, as the progress bar shows them: `512 B`, `1.50 KiB`, `111.39 MiB`.
pub fn bytes(n: u64) -> String {
    HumanBytes(n).to_string()
}

/// Bytes per second in binary units.
pub fn bytes_per_second(n: f64) -> String {
    format!("{}/s", HumanBytes(n.max(0.0) as u64))
}

/// `label` then `items` joined by `, `, wrapped to `width` columns: continuation lines start
/// under the first item. An item longer than a line is not cut (a path stays whole).
pub fn wrap_list(indent: &str, label: &str, items: &[String], width: usize) -> Vec<String> {
    let pieces: Vec<String> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            if i + 1 < items.len() {
                format!("{item},")
            } else {
                item.clone()
            }
        })
        .collect();
    wrap_pieces(indent, label, pieces.iter().map(String::as_str), width)
}

/// Words of `text` wrapped after `label` like [`wrap_list`] does items.
pub fn wrap_text(indent: &str, label: &str, text: &str, width: usize) -> Vec<String> {
    wrap_pieces(indent, label, text.split(' '), width)
}

/// One piece kept whole on a line (a word, or an item of a list), with the columns it takes.
#[derive(Debug)]
struct Piece<'a> {
    text: &'a str,
    columns: usize,
}

impl Fragment for Piece<'_> {
    fn width(&self) -> f64 {
        self.columns as f64
    }

    /// One space between two pieces of a line.
    fn whitespace_width(&self) -> f64 {
        1.0
    }

    fn penalty_width(&self) -> f64 {
        0.0
    }
}

/// `indent` and `label`, then `pieces` separated by one space, wrapped first-fit to `width`
/// columns (textwrap's first fit, so a piece longer than a line is never cut); continuation
/// lines are padded to start under the first piece. Widths are columns on the terminal, not
/// characters (a CJK character or an emoji takes two) and colour escapes take none.
fn wrap_pieces<'a>(
    indent: &str,
    label: &str,
    pieces: impl Iterator<Item = &'a str>,
    width: usize,
) -> Vec<String> {
    let head = format!("{indent}{label}");
    let head_columns = display_width(&head);
    let pieces: Vec<Piece<'_>> = pieces
        .map(|text| Piece {
            text,
            columns: display_width(text),
        })
        .collect();
    let room = width.saturating_sub(head_columns) as f64;
    let pad = " ".repeat(head_columns);
    let mut lines = Vec::new();
    for (i, line) in wrap_first_fit(&pieces, &[room]).into_iter().enumerate() {
        let words: Vec<&str> = line.iter().map(|piece| piece.text).collect();
        let start = if i == 0 { head.as_str() } else { pad.as_str() };
        lines.push(format!("{start}{}", words.join(" ")));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        let shown: Vec<String> = [0, 999, 1000, 1234567, u64::MAX]
            .into_iter()
            .map(group)
            .collect();
        assert_eq!(
            shown,
            [
                "0",
                "999",
                "1,000",
                "1,234,567",
                "18,446,744,073,709,551,615"
            ]
        );
    }

    #[test]
    fn bytes_use_binary_units() {
        let shown: Vec<String> = [0, 512, 1023, 1024, 1536, 3 * 1024 * 1024, 116_800_000]
            .into_iter()
            .map(bytes)
            .collect();
        assert_eq!(
            shown,
            [
                "0 B",
                "512 B",
                "1023 B",
                "1.00 KiB",
                "1.50 KiB",
                "3.00 MiB",
                "111.39 MiB"
            ]
        );
        assert_eq!(bytes_per_second(-1.0), "0 B/s");
        assert_eq!(bytes_per_second(2048.7), "2.00 KiB/s");
    }

    #[test]
    fn plurals_agree_with_the_count() {
        assert_eq!(plural(1, "file", "files"), "1 file");
        assert_eq!(plural(0, "file", "files"), "0 files");
        assert_eq!(plural(1200, "file", "files"), "1,200 files");
    }

    #[test]
    fn a_long_list_wraps_under_its_first_item() {
        let items: Vec<String> = ["alpha 1", "beta 22", "gamma 333"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let lines = wrap_list("  ", "x  ", &items, 20);
        assert_eq!(lines, ["  x  alpha 1,", "     beta 22,", "     gamma 333"]);
    }

    #[test]
    fn wide_characters_take_two_columns_when_a_line_wraps() {
        // Each word is 4 characters but 8 columns wide: counted by characters, two fit in 10.
        let lines = wrap_text("", "", "漢字漢字 漢字漢字 漢字漢字", 10);
        assert_eq!(lines, ["漢字漢字", "漢字漢字", "漢字漢字"]);
        let items: Vec<String> = ["🙂🙂 a", "日本 b", "c"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // `x ` then `🙂🙂 a,` and `日本 b,` (7 columns each, 5 characters): 2 + 7 + 1 + 7 = 17
        // columns, more than 16 (13 characters would have fitted).
        let lines = wrap_list("", "x ", &items, 16);
        assert_eq!(lines, ["x 🙂🙂 a,", "  日本 b, c"]);
        for line in &lines {
            assert!(display_width(line) <= 16, "{line}");
        }
    }

    #[test]
    fn the_label_and_colour_escapes_count_by_what_they_show() {
        let label = "\u{1b}[1mé\u{1b}[0m ";
        let lines = wrap_text("  ", label, "one two three", 12);
        assert_eq!(
            lines,
            [format!("  {label}one two"), "    three".to_string()]
        );
        // Nothing to wrap: the head alone.
        assert_eq!(wrap_list("  ", "x  ", &[], 20), ["  x  "]);
        assert_eq!(wrap_text("", "", "", 20), [""]);
    }

    #[test]
    fn colour_follows_the_choice_the_terminal_and_no_color() {
        let none = |_: &str| None;
        let no_color = |name: &str| (name == "NO_COLOR").then(|| "1".into());
        assert!(wants_color(ColorChoice::Auto, true, none));
        assert!(!wants_color(ColorChoice::Auto, false, none));
        assert!(!wants_color(ColorChoice::Auto, true, no_color));
        assert!(wants_color(ColorChoice::Always, false, no_color));
        assert!(!wants_color(ColorChoice::Never, true, none));
    }
}
