//! The house rules that are not imports (those are `tests/layering.rs`): what an architecture
//! is, said once on `Arch` (no file outside `src/arch/` sorts architectures by name); no
//! function over 80 lines outside tests; every experiment file a preset that `sweep --list`
//! or `map --list` shows.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::source::{code_of, rust_files};

/// The longest a function outside tests may be, in lines (its signature to its closing brace).
const MAX_FUNCTION_LINES: usize = 80;

/// The code of a source file outside its tests: up to a `#[cfg(test)]` (the project keeps
/// its unit tests last), none for a file of tests (`tests.rs`, `testing.rs`).
fn code_outside_tests(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    if name == "tests.rs" || name == "testing.rs" {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let code = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    code_of(code)
}

fn source_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files.sort();
    files
}

/// Where a line sorts architectures by name: an or-pattern of them, a match arm on one, or a
/// comparison with one.
fn sorts_architectures(line: &str) -> bool {
    let at: Vec<usize> = line.match_indices("Arch::").map(|(i, _)| i).collect();
    at.iter().any(|&i| {
        let rest = &line[i + "Arch::".len()..];
        let name_len = rest
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(name_len);
        if !name.starts_with(|c: char| c.is_ascii_uppercase()) {
            return false;
        }
        let after = after.trim_start();
        let before = line[..i].trim_end();
        after.starts_with('|')
            || after.starts_with("=>")
            || after.starts_with("==")
            || after.starts_with("!=")
            || before.ends_with('|')
            || before.ends_with("==")
            || before.ends_with("!=")
    })
}

#[test]
fn no_file_outside_arch_sorts_architectures_by_name() {
    let arch_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/arch");
    let mut found = Vec::new();
    for path in source_files() {
        if path.starts_with(&arch_dir) {
            continue;
        }
        for (n, line) in code_outside_tests(&path).lines().enumerate() {
            if sorts_architectures(line) {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "what an architecture is belongs on Arch (src/arch/mod.rs), not in:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_architecture_check_sees_patterns_arms_and_comparisons() {
    assert!(sorts_architectures("matches!(a, Arch::Poll | Arch::Epoll)"));
    assert!(sorts_architectures("    Arch::Hybrid => true,"));
    assert!(sorts_architectures("if arch == Arch::Async {"));
    assert!(sorts_architectures("a != Arch::Uring"));
    assert!(sorts_architectures(
        "Some(Arch::Prethreaded | Arch::Preforked)"
    ));
    assert!(!sorts_architectures("arch: Arch::Hybrid,"));
    assert!(!sorts_architectures(
        "for arch in [Arch::Iterative, Arch::Epoll] {"
    ));
    assert!(!sorts_architectures("use crate::arch::Arch;"));
    assert!(!sorts_architectures("Arch::from_name(name)"));
}

/// Every function of `code` with its first line (1-based) and its length in lines: from the
/// line that opens it to the line that closes it at the same indentation (the code is
/// formatted by rustfmt, so a closing brace sits where its opening line starts).
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let mut words = body;
        for prefix in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
        ] {
            words = words.strip_prefix(prefix).unwrap_or(words);
        }
        let Some(rest) = words.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let close = format!("{indent}}}");
        if let Some(end) = (i..lines.len()).find(|&j| lines[j].trim_end() == close) {
            found.push((name, i + 1, end - i + 1));
        }
    }
    found
}

#[test]
fn no_function_outside_tests_is_over_80_lines() {
    let mut long = Vec::new();
    for path in source_files() {
        for (name, line, len) in functions(&code_outside_tests(&path)) {
            if len > MAX_FUNCTION_LINES {
                long.push(format!("{}:{line} {name}: {len} lines", path.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (cut where the story has seams):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_function_count_measures_from_signature_to_closing_brace() {
    let code = "fn a() {\n    x();\n}\n\nimpl T {\n    pub fn b(\n        y: u32,\n    ) -> u32 {\n        y\n    }\n    fn c();\n}\n";
    assert_eq!(
        functions(code),
        vec![("a".to_string(), 1, 3), ("b".to_string(), 6, 5)]
    );
}

#[test]
fn every_experiment_file_is_a_preset_a_list_shows() {
    let bin = env!("CARGO_BIN_EXE_sweetspot");
    let listed = |command: &str| -> Vec<String> {
        let out = Command::new(bin)
            .args([command, "--list"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{command} --list failed");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    };
    let (sweeps, maps) = (listed("sweep"), listed("map"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .collect();
    names.sort();
    assert!(names.len() >= 20, "{names:?}");
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !sweeps.contains(n) && !maps.contains(n))
        .collect();
    assert!(missing.is_empty(), "not a listed preset: {missing:?}");
    // A map preset is listed by `map`, a sweep preset by `sweep`: never the wrong one.
    for n in &names {
        assert_ne!(
            n.starts_with("map"),
            sweeps.contains(n),
            "{n}: listed by the wrong command"
        );
    }
}
