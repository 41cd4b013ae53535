//! `results.json`: the record of a sweep, and the only input `sweetspot report` needs.

use std::path::{Path, PathBuf};

use super::Exporter;
use crate::render::json;
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
        json::write_file(&path, &json::to_text(results)?)?;
        Ok(vec![path])
    }
}
