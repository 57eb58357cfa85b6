//! The architecture cannot drift silently: dependencies between the library's modules point
//! one way, along the pipeline (`src/lib.rs` module docs, "Architecture"):
//!
//! model ← source, rules ← input ← convert ← pipeline ← commands, with audit (decisions,
//! accounting, summary) beside convert, validate reading only the wire types and the marker
//! registry, and output writing what the pipeline hands it.
//!
//! Every `crate::<module>` path in `src/` is read; one that is not an allowed edge below fails
//! this test with the file and line. Changing the architecture means changing this list, in the
//! same commit as those docs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Each top-level module and the modules it may use.
const ALLOWED: &[(&str, &[&str])] = &[
    ("model", &[]),
    ("cli", &[]),
    ("source", &["model"]),
    ("rules", &["model"]),
    ("input", &["model", "source", "rules"]),
    ("audit", &["model", "rules"]),
    ("convert", &["model", "rules", "audit"]),
    ("validate", &["model", "rules"]),
    // An output checks its bytes against the rules' markers ([`Output::check`]).
    ("output", &["model", "rules", "validate"]),
    (
        "pipeline",
        &[
            "model", "source", "rules", "input", "audit", "convert", "validate", "output",
        ],
    ),
    (
        "commands",
        &[
            "model", "source", "rules", "input", "audit", "convert", "validate", "output",
            "pipeline", "cli",
        ],
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`src/convert/tools.rs` → `convert`).
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("below src");
    let first = relative.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

/// Every `crate::NAME` in `text`, with its line, including grouped `use crate::{a, b}`.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            if let Some(group) = after.strip_prefix('{') {
                // Names at the group's own depth: `crate::{a::{b, c}, d}` uses `a` and `d`.
                let mut depth = 0;
                let mut at_name = true;
                let mut name = String::new();
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => at_name = true,
                        c if at_name && (c.is_alphanumeric() || c == '_') => name.push(c),
                        c if at_name && !name.is_empty() && !c.is_whitespace() => {
                            found.push((n + 1, std::mem::take(&mut name)));
                            at_name = false;
                        }
                        _ => {}
                    }
                    if at_name && !name.is_empty() && matches!(c, ',' | '}') {
                        found.push((n + 1, std::mem::take(&mut name)));
                    }
                }
                if !name.is_empty() {
                    found.push((n + 1, name));
                }
            } else {
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.push((n + 1, name));
            }
            rest = after;
        }
    }
    found
}

#[test]
fn modules_only_use_earlier_stages() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed: BTreeMap<&str, BTreeSet<&str>> = ALLOWED
        .iter()
        .map(|(module, uses)| (*module, uses.iter().copied().collect()))
        .collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    let mut seen_modules = BTreeSet::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" || module == "main" {
            continue;
        }
        seen_modules.insert(module.clone());
        let Some(may_use) = allowed.get(module.as_str()) else {
            wrong.push(format!(
                "{}: module `{module}` is not in the allowed list of tests/architecture.rs",
                file.display()
            ));
            continue;
        };
        let text = fs::read_to_string(file).expect("read source");
        for (line, used) in crate_paths(&text) {
            if used != module && !may_use.contains(used.as_str()) {
                wrong.push(format!(
                    "{}:{line}: `{module}` uses `crate::{used}`, which is not an allowed edge",
                    file.strip_prefix(&src).unwrap_or(file).display()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "modules reach into later stages:\n{}",
        wrong.join("\n")
    );
    // Every listed module exists, so the list cannot rot.
    for (module, _) in ALLOWED {
        assert!(
            seen_modules.contains(*module),
            "`{module}` is listed but not in src/"
        );
    }
}

#[test]
fn the_path_reader_sees_grouped_and_inline_paths() {
    let text = "use crate::{audit::{Action, Decision}, model};\nlet x = crate::convert::ids::x(); // crate::pipeline\n";
    assert_eq!(
        crate_paths(text),
        vec![
            (1, "audit".to_string()),
            (1, "model".to_string()),
            (2, "convert".to_string())
        ]
    );
}

/// The module a `.rs` file of `tests/` must be declared in: `X/mod.rs` or `X.rs` for a file
/// in folder `X`, `tests.rs` for a file directly in `tests/`; a `mod.rs` is declared where its
/// folder would be.
fn declaring_file(tests: &Path, file: &Path) -> std::path::PathBuf {
    let mut dir = file.parent().expect("a file has a folder");
    if file.file_name().is_some_and(|n| n == "mod.rs") {
        dir = dir.parent().expect("below tests/");
    }
    if dir == tests {
        tests.join("tests.rs")
    } else if dir.join("mod.rs").is_file() {
        dir.join("mod.rs")
    } else {
        dir.with_extension("rs")
    }
}

/// With `autotests = false` Cargo builds one test binary, tests/tests.rs: a file added to
/// `tests/` and declared nowhere would compile to nothing and its tests would never run.
#[test]
fn every_test_file_is_a_module_of_the_one_binary() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    rust_files(&tests, &mut files);
    // A folder with a Cargo.toml is a crate of its own (tests/typed-checks), not a module.
    files.retain(|file| {
        !file
            .ancestors()
            .take_while(|dir| *dir != tests)
            .any(|dir| dir.join("Cargo.toml").is_file())
    });
    files.sort();
    let mut undeclared = Vec::new();
    for file in &files {
        if *file == tests.join("tests.rs") {
            continue;
        }
        let module = if file.file_name().is_some_and(|n| n == "mod.rs") {
            file.parent().and_then(Path::file_name)
        } else {
            file.file_stem()
        }
        .expect("a module name")
        .to_string_lossy()
        .into_owned();
        let parent = declaring_file(&tests, file);
        let text = fs::read_to_string(&parent).unwrap_or_default();
        let declared = text.lines().any(|line| {
            let line = line.trim().trim_start_matches("pub ");
            line == format!("mod {module};")
        });
        if !declared {
            undeclared.push(format!(
                "{}: no `mod {module};` in {}",
                file.strip_prefix(&tests).unwrap_or(file).display(),
                parent.strip_prefix(&tests).unwrap_or(&parent).display()
            ));
        }
    }
    assert!(
        undeclared.is_empty(),
        "test files that are not part of the test binary:\n{}",
        undeclared.join("\n")
    );
    // The check sees the modules of tests.rs and of a folder.
    assert!(files.contains(&tests.join("scheduled/identity.rs")));
}
