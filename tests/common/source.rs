//! The tree's own source read as text, for the tests that hold the house's rules
//! (`tests/layering.rs`, `tests/house.rs`): every `.rs` file under a folder, and a file's code
//! without its comments.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, at any depth, appended to `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its comments (line comments and doc comments; the project
/// writes no block comments).
pub fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            // A `//` inside a string literal ("http://...") is not a comment.
            Some(i) if line[..i].matches('"').count() % 2 == 0 => &line[..i],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
