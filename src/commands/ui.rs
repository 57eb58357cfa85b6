//! How the commands talk to people: quiet or verbose, colour (as ripgrep decides it), the
//! terminal's width, and numbers written one way everywhere (digit grouping, bytes in binary
//! units, plurals).

use std::io::IsTerminal;

use anstyle::{AnsiColor, Style};

use crate::cli::{ColorChoice, GlobalArgs};

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

/// `1234567` → `1,234,567`.
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in binary units, as the progress bar shows them: `512 B`, `1.50 KiB`, `111.39 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

/// Bytes per second in binary units.
pub fn bytes_per_second(n: f64) -> String {
    format!("{}/s", bytes(n.max(0.0) as u64))
}

/// `1 file`, `2 files`, `1,234 files`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", group(n), if n == 1 { one } else { many })
}

/// `label` then `items` joined by `, `, wrapped to `width` columns: continuation lines start
/// under the first item. An item longer than a line is not cut (a path stays whole).
pub fn wrap_list(indent: &str, label: &str, items: &[String], width: usize) -> Vec<String> {
    let head = format!("{indent}{label}");
    let pad = " ".repeat(head.chars().count());
    let mut lines = Vec::new();
    let mut line = head;
    let mut empty = true;
    for (i, item) in items.iter().enumerate() {
        let piece = if i + 1 < items.len() {
            format!("{item},")
        } else {
            item.clone()
        };
        let extra = piece.chars().count() + usize::from(!empty);
        if !empty && visible_len(&line) + extra > width {
            lines.push(std::mem::replace(&mut line, pad.clone()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(&piece);
        empty = false;
    }
    lines.push(line);
    lines
}

/// Words of `text` wrapped after `label` like [`wrap_list`] does items.
pub fn wrap_text(indent: &str, label: &str, text: &str, width: usize) -> Vec<String> {
    let words: Vec<String> = text.split(' ').map(str::to_string).collect();
    let head = format!("{indent}{label}");
    let pad = " ".repeat(head.chars().count());
    let mut lines = Vec::new();
    let mut line = head;
    let mut empty = true;
    for word in words {
        if !empty && visible_len(&line) + 1 + visible_len(&word) > width {
            lines.push(std::mem::replace(&mut line, pad.clone()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(&word);
        empty = false;
    }
    lines.push(line);
    lines
}

/// Characters shown, not counting colour escapes.
fn visible_len(text: &str) -> usize {
    let mut n = 0;
    let mut escape = false;
    for c in text.chars() {
        match (escape, c) {
            (false, '\u{1b}') => escape = true,
            (true, 'm') => escape = false,
            (true, _) => {}
            (false, _) => n += 1,
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        let shown: Vec<String> = [0, 999, 1000, 1234567].into_iter().map(group).collect();
        assert_eq!(shown, ["0", "999", "1,000", "1,234,567"]);
    }

    #[test]
    fn bytes_use_binary_units() {
        let shown: Vec<String> = [512, 1536, 3 * 1024 * 1024]
            .into_iter()
            .map(bytes)
            .collect();
        assert_eq!(shown, ["512 B", "1.50 KiB", "3.00 MiB"]);
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
