//! The one JSON writer: pretty JSON with a final newline, to a file (written whole, then
//! renamed into place, so an interrupted write never leaves half a record) or to stdout
//! ("-"), and the check that a destination can be written before a long run starts.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;

/// Checks, before a run, that `dest` can be written: a report that cannot be saved should
/// cost a usage error (exit 2) now, not the whole run. Opens the file without truncating it,
/// and removes it again if it did not exist. `flag` names the option in the error.
pub fn check_destination(flag: &str, dest: &str) -> anyhow::Result<()> {
    if dest == "-" {
        return Ok(());
    }
    let path = Path::new(dest);
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| crate::usage(format!("{flag} {dest}: cannot write: {e}")))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// `value` as pretty JSON with a final newline.
pub fn to_text<T: Serialize>(value: &T) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(value).context("cannot encode JSON")?;
    text.push('\n');
    Ok(text)
}

/// Writes `value` to `dest`: a path, or "-" for stdout.
pub fn write<T: Serialize>(value: &T, dest: &str) -> anyhow::Result<()> {
    let text = to_text(value)?;
    if dest == "-" {
        crate::print_stdout(&text)?;
        return Ok(());
    }
    write_file(Path::new(dest), &text)
}

/// A command's results where they go: its summary on stdout (on stderr when `--json -`
/// takes stdout; none with `--quiet`: `summary` is `None`), then `value` as JSON to `json`.
pub fn write_results<T: Serialize>(
    summary: Option<&str>,
    json: Option<&str>,
    value: &T,
) -> anyhow::Result<()> {
    if let Some(summary) = summary {
        if json == Some("-") {
            eprint!("{summary}");
        } else {
            crate::print_stdout(summary)?;
        }
    }
    if let Some(dest) = json {
        write(value, dest)?;
    }
    Ok(())
}

/// The record every command that measures keeps in its run's directory.
pub const RESULTS_FILE: &str = "results.json";

/// The one writer of a run's record: `value` as pretty JSON into `dir/results.json`, whole
/// or not at all ([`write_file`]), the directory made if needed. Returns the file's path.
pub fn write_record<T: Serialize>(dir: &Path, value: &T) -> anyhow::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(RESULTS_FILE);
    write_file(&path, &to_text(value)?)?;
    Ok(path)
}

/// Writes `text` to `path` whole: into `path.partial`, then renamed over `path`.
pub fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    std::fs::write(&partial, text)
        .with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_written_whole_and_nothing_partial_stays() {
        let dir = std::env::temp_dir().join(format!("sweetspot-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        write(&serde_json::json!({"a": 1}), path.to_str().unwrap()).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\n  \"a\": 1\n}\n"
        );
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_destination_is_a_usage_error() {
        let e = check_destination("--json", "/nonexistent-dir/x.json").unwrap_err();
        assert!(e.downcast_ref::<crate::UsageError>().is_some());
        assert!(e
            .to_string()
            .starts_with("--json /nonexistent-dir/x.json: cannot write"));
    }
}
