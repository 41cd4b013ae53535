//! `results.json`: the record of a sweep, and the only input `sweetspot report` needs.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::Exporter;
use crate::sweep::results::SweepResults;

/// Writes `results.json`.
pub struct JsonExporter;

/// The file name of the record.
pub const RESULTS_FILE: &str = "results.json";

impl Exporter for JsonExporter {
    fn name(&self) -> &'static str {
        "json"
    }

    fn export(&self, results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        let path = dir.join(RESULTS_FILE);
        let text = serde_json::to_string_pretty(results).context("encoding results")?;
        // Write then rename, so an interrupted write never leaves half a record.
        let partial = dir.join(format!("{RESULTS_FILE}.partial"));
        std::fs::write(&partial, text + "\n")
            .with_context(|| format!("writing {}", partial.display()))?;
        std::fs::rename(&partial, &path).with_context(|| format!("writing {}", path.display()))?;
        Ok(vec![path])
    }
}
