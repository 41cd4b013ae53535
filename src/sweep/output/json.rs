//! `results.json`: the record of a sweep, and the only input `sweetspot report` needs.

use std::path::{Path, PathBuf};

use super::Exporter;
use crate::render::json;
use crate::sweep::results::SweepResults;

/// Writes `results.json`.
pub struct JsonExporter;

pub use crate::render::json::RESULTS_FILE;

impl Exporter for JsonExporter {
    fn name(&self) -> &'static str {
        "json"
    }

    fn export(&self, results: &SweepResults, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        Ok(vec![json::write_record(dir, results)?])
    }
}
