//! JSON output of a load report (`--json PATH` or `--json -` for stdout).

use std::io::Write;

use anyhow::Context;

use super::report::LoadReport;

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
