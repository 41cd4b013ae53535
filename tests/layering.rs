//! The layering of `src/`, checked from the source: every `crate::` path in a module's code
//! (comments aside) names a module of its own layer or one below. The layers, bottom up, are
//! documented in `docs/DESIGN.md`. The files of `arch/` and of `load/` import each other
//! without a cycle, and outside `load/` only its face (`load/mod.rs`) and `load::scaleout`
//! (what `merge` adds up) are used.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::source::{code_of, rust_files};

/// Top-level modules by layer, bottom up. A module may use its own layer's modules only
/// where listed in [`SIDEWAYS`].
const LAYERS: &[&[&str]] = &[
    &["lib", "sys"],
    &[
        "http",
        "store",
        "render",
        "reclaim",
        "units",
        "os",
        "deadlines",
    ],
    &["net"],
    &["app"],
    &["arch", "load"],
    &["serve", "model"],
    &["lab"],
    &["merge", "search"],
    // The commands that measure, side by side: none reaches a measurement through another.
    &["sweep", "map", "tune", "limiter"],
    &["cli", "main"],
];

/// Allowed uses within one layer: (user, used).
const SIDEWAYS: &[(&str, &str)] = &[];

/// What the crate root itself defines (`usage`, `UsageError`, `print_stdout`, `toml_usage`):
/// below everything.
const ROOT_ITEMS: &[&str] = &["usage", "UsageError", "print_stdout", "toml_usage"];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// The names that follow `crate::` in `code`, with `crate::{a, b::c}` groups opened.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name = part.trim().split("::").next().unwrap_or("").trim();
                if !name.is_empty() {
                    names.insert(name.to_string());
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            names.insert(name);
        }
    }
    names
}

/// `src/arch/event_loop.rs` -> ("arch", "event_loop").
fn module_of(src: &Path, file: &Path) -> (String, String) {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    let top = parts.remove(0);
    (top, parts.join("/"))
}

/// The modules directly inside `dir` (its files and folders), by name.
fn submodules(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
        .filter(|n| n != "mod")
        .collect()
}

/// Every path that follows `prefix` in `code` (`a::b::C`), with groups opened:
/// `prefix a::{b::C, D}` gives `a::b::C` and `a::D`.
fn paths_under(code: &str, prefix: &str) -> Vec<String> {
    let path_char = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    let mut out = Vec::new();
    for rest in code.split(prefix).skip(1) {
        let head: String = rest.chars().take_while(|&c| path_char(c)).collect();
        match rest[head.len()..].strip_prefix('{') {
            Some(group) => {
                let end = group.find('}').unwrap_or(group.len());
                for part in group[..end].split(',') {
                    let tail: String = part.trim().chars().take_while(|&c| path_char(c)).collect();
                    if !tail.is_empty() {
                        out.push(format!("{head}{tail}"));
                    }
                }
            }
            None => out.push(head.trim_end_matches(':').to_string()),
        }
    }
    out
}

/// A circle among `edges`, as the names along it, if there is one (depth-first search for a
/// back edge).
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|n| n == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

#[test]
fn every_import_runs_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let load_modules = submodules(&src.join("load"));
    let mut wrong = Vec::new();
    for file in &files {
        let (top, _) = module_of(&src, file);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        if top != "load" {
            for inner in paths_under(&code, "crate::load::") {
                let first = inner.split("::").next().unwrap_or("");
                if load_modules.contains(first) && first != "scaleout" {
                    wrong.push(format!(
                        "{} reaches into crate::load::{inner} (use load's face or load::scaleout)",
                        file.display()
                    ));
                }
            }
        }
        let mine = layer_of(&top).unwrap_or_else(|| panic!("{top} is in no layer"));
        for used in crate_paths(&code) {
            if used == top || ROOT_ITEMS.contains(&used.as_str()) {
                continue;
            }
            let theirs = layer_of(&used).unwrap_or_else(|| panic!("crate::{used} is in no layer"));
            let sideways = theirs == mine && SIDEWAYS.contains(&(top.as_str(), used.as_str()));
            if theirs > mine || (theirs == mine && !sideways) {
                wrong.push(format!("{} uses crate::{used}", file.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layering:\n{}",
        wrong.join("\n")
    );
}

/// The files of one flat folder of `src/` (its `mod.rs` aside: it declares them) and the ones
/// each imports (`super::NAME`, `crate::FOLDER::NAME`); a circle among them, if any.
fn flat_folder_cycle(folder: &str) -> Option<Vec<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(folder);
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let names: BTreeSet<String> = files
        .iter()
        .map(|f| f.file_stem().unwrap().to_string_lossy().to_string())
        .filter(|n| n != "mod")
        .collect();
    assert!(names.len() > 3, "{folder}: {names:?}");
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let me = file.file_stem().unwrap().to_string_lossy().to_string();
        if me == "mod" {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let used = code
            .split("super::")
            .skip(1)
            .chain(code.split(&format!("crate::{folder}::")).skip(1))
            .filter_map(|rest| {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.contains(&name).then_some(name)
            })
            .filter(|name| *name != me)
            .collect();
        edges.insert(me, used);
    }
    find_cycle(&edges)
}

#[test]
fn arch_files_import_each_other_without_a_cycle() {
    let cycle = flat_folder_cycle("arch");
    assert!(
        cycle.is_none(),
        "arch/ imports in a circle: {}",
        cycle.unwrap().join(" -> ")
    );
}

/// The map's files: results are data below both the run and the outputs, so neither takes
/// anything from the other's way back.
#[test]
fn map_files_import_each_other_without_a_cycle() {
    let cycle = flat_folder_cycle("map");
    assert!(
        cycle.is_none(),
        "map/ imports in a circle: {}",
        cycle.unwrap().join(" -> ")
    );
}

/// `load/`'s files, each named by its path under `load/` (`stats/urls`; a folder's `mod.rs`
/// by the folder), import each other without a cycle. A folder's `mod.rs` naming its own
/// children is how Rust declares them, not an import, and `load/mod.rs` is the face the
/// files take the config's names through: neither is an edge.
#[test]
fn load_files_import_each_other_without_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("load"), &mut files);
    let name_of = |file: &Path| {
        let (_, rest) = module_of(&src, file);
        rest.trim_end_matches("/mod")
            .trim_end_matches("mod")
            .to_string()
    };
    let names: BTreeSet<String> = files.iter().map(|f| name_of(f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let me = name_of(file);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let used = paths_under(&code, "crate::load::")
            .into_iter()
            .filter_map(|path| {
                // The longest module the path names: `stats::urls::UrlReport` -> `stats/urls`.
                let parts: Vec<&str> = path.split("::").collect();
                (1..=parts.len())
                    .rev()
                    .map(|n| parts[..n].join("/"))
                    .find(|m| names.contains(m))
            })
            .filter(|used| {
                let own_child = used.starts_with(&format!("{me}/"));
                *used != me && !used.is_empty() && !own_child
            })
            .collect();
        edges.insert(me, used);
    }
    assert!(edges.len() > 20, "{edges:?}");
    let cycle = find_cycle(&edges);
    assert!(
        cycle.is_none(),
        "load/ imports in a circle: {}",
        cycle.unwrap().join(" -> ")
    );
}

#[test]
fn the_checks_see_imports_and_skip_comments() {
    let code = code_of(
        "use crate::{app::App, sys};\n// crate::sweep in a comment\nlet u = \"http://x\"; crate::load::run();",
    );
    let paths: Vec<String> = crate_paths(&code).into_iter().collect();
    assert_eq!(paths, ["app", "load", "sys"]);
    let under = paths_under(
        "use crate::load::stats::{urls::UrlReport, LatencyKey};\nx = crate::load::run(c);",
        "crate::load::",
    );
    assert_eq!(
        under,
        ["stats::urls::UrlReport", "stats::LatencyKey", "run"].map(String::from)
    );
    assert!(layer_of("sweep") > layer_of("load") && layer_of("render") < layer_of("app"));
}
