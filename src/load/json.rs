//! JSON output of a load report (`--json PATH` or `--json -` for stdout).

use std::io::Write;

use anyhow::Context;

use super::report::LoadReport;

/// Checks, before a run, that `dest` can be written: a report that cannot be saved should
/// cost a usage error (exit 2) now, not the whole run. Opens the file without truncating it,
/// and removes it again if it did not exist.
pub fn check_destination(dest: &str) -> anyhow::Result<()> {
    if dest == "-" {
        return Ok(());
    }
    let path = std::path::Path::new(dest);
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| crate::usage(format!("--json {dest}: cannot write: {e}")))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Writes `report` as pretty JSON to `dest`, a path or "-" for stdout.
pub fn write(report: &LoadReport, dest: &str) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(report).context("cannot serialize the report")?;
    text.push('\n');
    if dest == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()?;
    } else {
        std::fs::write(dest, text).with_context(|| format!("cannot write {dest}"))?;
    }
    Ok(())
}
