//! The shape the code keeps, measured (`src/lib.rs` module docs, "Architecture"): files a
//! reader can hold in mind, orchestration apart from the stages, the output chosen once,
//! readers and commands that stand alone, internal items kept internal, a README for users.
//! Each test names what it found and where, so a failure says what to split or move.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn files_under(relative: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&root().join(relative), &mut files);
    files.sort();
    files
}

fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A file holding only tests: `tests.rs`, or anything in a `tests/` folder of `src/`.
fn is_test_file(path: &Path) -> bool {
    let relative = path.strip_prefix(root()).unwrap_or(path);
    relative.file_name().is_some_and(|n| n == "tests.rs")
        || relative.components().any(|c| c.as_os_str() == "tests")
}

/// The lines of a file before its unit-test module (`#[cfg(test)]` then `mod NAME {`).
fn production_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .position(|pair| {
            pair[0].trim() == "#[cfg(test)]"
                && is_module_opening(pair[1])
                && pair[1].trim_end().ends_with('{')
        })
        .unwrap_or(lines.len())
}

/// `mod NAME {`, with or without a visibility (`pub(super) mod tests {`).
fn is_module_opening(line: &str) -> bool {
    let line = line.trim();
    let line = match line.strip_prefix("pub") {
        Some(rest) if rest.starts_with('(') => rest.split_once(')').map_or(rest, |(_, r)| r),
        Some(rest) => rest,
        None => line,
    };
    line.trim_start().starts_with("mod ") && line.ends_with('{')
}

/// Code without comments, so a doc line that names a path does not count as a use.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(n, line)| (n + 1, line.split("//").next().unwrap_or("")))
}

#[test]
fn the_measure_of_production_lines_stops_at_the_test_module() {
    let text = "fn a() {}\nfn b() {}\n#[cfg(test)]\nmod tests {\n    fn c() {}\n}\n";
    assert_eq!(production_lines(text), 2);
    assert_eq!(production_lines("fn a() {}\n#[cfg(test)]\nfn b() {}\n"), 3);
    assert_eq!(
        production_lines("fn a() {}\n#[cfg(test)]\npub(super) mod tests {\n}\n"),
        1
    );
}

#[test]
fn no_production_file_is_over_800_lines() {
    let over: Vec<String> = files_under("src")
        .iter()
        .filter(|f| !is_test_file(f))
        .filter_map(|f| {
            let n = production_lines(&fs::read_to_string(f).expect("read source"));
            (n > 800).then(|| format!("{}: {n} lines", shown(f)))
        })
        .collect();
    assert!(
        over.is_empty(),
        "split these by concern (test modules excluded):\n{}",
        over.join("\n")
    );
}

#[test]
fn the_pipeline_root_is_orchestration_only() {
    let path = root().join("src/pipeline/mod.rs");
    let n = production_lines(&fs::read_to_string(&path).expect("read pipeline/mod.rs"));
    assert!(
        n < 400,
        "src/pipeline/mod.rs has {n} lines; its concerns belong in their own files"
    );
}

/// The output format is chosen once, behind `output::Output`: the pipeline's production code
/// names a variant of the output `Format` in at most three places (a `SourceFormat` is the
/// input's, not counted).
#[test]
fn the_pipeline_chooses_the_output_once() {
    let mut found = Vec::new();
    for file in files_under("src/pipeline")
        .iter()
        .filter(|f| !is_test_file(f))
    {
        let text = fs::read_to_string(file).expect("read source");
        let production = production_lines(&text);
        for (n, code) in code_lines(&text).take(production) {
            if names_segment(code, "Format::") {
                found.push(format!("{}:{n}: {}", shown(file), code.trim()));
            }
        }
    }
    assert!(
        found.len() <= 3,
        "{} `Format::` in src/pipeline (at most 3):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The registered readers, as `input::format::readers` lists them (`&super::NAME::Reader`).
fn reader_modules() -> Vec<String> {
    let format = fs::read_to_string(root().join("src/input/format.rs")).expect("read format.rs");
    let mut names: Vec<String> = format
        .lines()
        .filter_map(|l| l.trim().strip_prefix("&super::"))
        .filter_map(|rest| rest.split("::").next())
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The files of one reader: `src/input/NAME.rs` and anything under `src/input/NAME/`.
fn reader_files(name: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let file = root().join("src/input").join(format!("{name}.rs"));
    if file.exists() {
        files.push(file);
    }
    let folder = root().join("src/input").join(name);
    if folder.is_dir() {
        rust_files(&folder, &mut files);
    }
    files
}

#[test]
fn no_reader_imports_another() {
    let readers = reader_modules();
    assert!(
        readers.len() >= 11,
        "readers found in format.rs: {readers:?}"
    );
    let mut wrong = Vec::new();
    for reader in &readers {
        for file in reader_files(reader) {
            let text = fs::read_to_string(&file).expect("read source");
            for (n, code) in code_lines(&text) {
                for other in readers.iter().filter(|o| *o != reader) {
                    let names_other = names_segment(code, &format!("input::{other}"))
                        || names_segment(code, &format!("super::{other}"))
                        || (code.contains("input::{")
                            && code
                                .split(['{', '}', ',', ' '])
                                .any(|w| w == other.as_str()));
                    if names_other {
                        wrong.push(format!("{}:{n}: {reader} uses {other}", shown(&file)));
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a reader imports another (what two formats share belongs in a shared module):\n{}",
        wrong.join("\n")
    );
}

/// Whether `code` names `path` followed by `::`, `;`, `,`, `}` or a space (a whole segment).
fn names_segment(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(at, _)| {
        let before_ok = at == 0
            || !code[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let after = &code[at + path.len()..];
        before_ok
            && (path.ends_with("::")
                || after.is_empty()
                || after.starts_with([':', ';', ',', '}', ' ']))
    })
}

#[test]
fn no_command_imports_another() {
    // CLI glue every command shares, not a command.
    let shared = ["mod", "ui"];
    let dir = root().join("src/commands");
    let mut commands: Vec<String> = fs::read_dir(&dir)
        .expect("read src/commands")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().to_string()))
        .filter(|name| !shared.contains(&name.as_str()))
        .collect();
    commands.sort();
    commands.dedup();
    let mut wrong = Vec::new();
    for command in &commands {
        let mut files = Vec::new();
        let file = dir.join(format!("{command}.rs"));
        if file.exists() {
            files.push(file);
        }
        if dir.join(command).is_dir() {
            rust_files(&dir.join(command), &mut files);
        }
        for file in files {
            let top_level = file.parent() == Some(dir.as_path());
            let text = fs::read_to_string(&file).expect("read source");
            for (n, code) in code_lines(&text) {
                for other in commands.iter().filter(|c| *c != command) {
                    let grouped = (code.contains("commands::{")
                        || (top_level && code.contains("super::{")))
                        && code
                            .split(['{', '}', ',', ' '])
                            .any(|w| w == other.as_str());
                    if names_segment(code, &format!("commands::{other}"))
                        || (top_level && names_segment(code, &format!("super::{other}")))
                        || grouped
                    {
                        wrong.push(format!("{}:{n}: {command} uses {other}", shown(&file)));
                    }
                }
            }
        }
    }
    assert!(
        commands.len() >= 8,
        "commands found in src/commands: {commands:?}"
    );
    assert!(
        wrong.is_empty(),
        "a command imports another (move what they share to the library):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn internal_items_are_kept_internal() {
    let cargo = fs::read_to_string(root().join("Cargo.toml")).expect("read Cargo.toml");
    let lints = cargo
        .split("[lints.rust]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .unwrap_or("");
    assert!(
        lints
            .lines()
            .any(|l| l.trim_start().starts_with("unreachable_pub")),
        "Cargo.toml's [lints.rust] warns on unreachable_pub (clippy -D warnings makes it an error)"
    );
}

#[test]
fn the_readme_is_for_users() {
    let readme = fs::read_to_string(root().join("README.md")).expect("read README");
    let n = readme.lines().count();
    assert!(n < 600, "README.md has {n} lines: the architecture belongs in src/lib.rs's docs, measurements in samples/BENCHMARKS.md");
}

#[test]
fn a_path_is_named_only_as_a_whole_segment() {
    assert!(names_segment(
        "use super::chat::{alias_role};",
        "super::chat"
    ));
    assert!(names_segment(
        "use crate::commands::explain;",
        "commands::explain"
    ));
    assert!(names_segment("use super::super::codex::X;", "super::codex"));
    assert!(!names_segment("use super::chat_stream::X;", "super::chat"));
    assert!(!names_segment("use super::my_chat::X;", "chat"));
    assert!(names_segment(
        "match format { Format::Codex => 1 }",
        "Format::"
    ));
    assert!(!names_segment("SourceFormat::CHAT", "Format::"));
}
