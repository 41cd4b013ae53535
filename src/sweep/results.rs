//! The results of a sweep, as written to and read back from `results.json`: the experiment
//! that produced them, the machine they ran on, one [`PointResult`] per grid cell and the
//! analysis (`recommendation` is a contract key of DESIGN.md). `sweetspot report DIR`
//! deserializes this and renders again, so every output is a function of this file alone.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::analysis::findings::{Analysis, Recommendation};
use super::spec::Experiment;
pub use crate::lab::results::{
    format_utc, utc_timestamp, ClientUsage, ErrorCounts, Machine, PointLatency, PointResult,
    RunFigures, RunMeasurement, ServerUsage, Spread,
};

/// Everything a sweep produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResults {
    /// Format version of this file.
    pub version: u32,
    /// The preset name or the experiment file it came from.
    pub source: String,
    pub experiment: Experiment,
    pub started: String,
    pub finished: String,
    /// True when the sweep was stopped before every point ran.
    pub interrupted: bool,
    pub points_planned: usize,
    pub machine: Machine,
    /// The version of each thing the experiment requires (`[[requires]]`), by name.
    #[serde(default)]
    pub versions: std::collections::BTreeMap<String, String>,
    pub points: Vec<PointResult>,
    /// Plain-words recommendation (also structured in `analysis`).
    #[serde(default, deserialize_with = "derived")]
    pub recommendation: Recommendation,
    #[serde(default, deserialize_with = "derived")]
    pub analysis: Analysis,
}

/// Reads a field the analysis derives from the points: a shape this version does not know
/// (a file from an older version) reads as empty instead of failing, and `report` recomputes it.
fn derived<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

impl SweepResults {
    pub fn read(path: &Path) -> anyhow::Result<SweepResults> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// The cores the servers could use, as the analysis sees them: the machine's, or the
    /// experiment's budget where it gave one quota or a set of CPUs (an axis of quotas has no
    /// one budget: the machine's).
    pub fn cores(&self) -> f64 {
        let e = &self.experiment;
        let cpuset = e.cpuset.as_ref().map(|l| l.cpus().to_vec());
        let quota = match e.cpus[..] {
            [one] => Some(one),
            _ => None,
        };
        crate::lab::budget::budget_cores(quota, cpuset.as_deref(), self.machine.cores.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `results.json` of an older shape (its `ranking` a list of pairs, its USL fits without
    /// `levels`), from a real two-repetition sweep.
    const PAIR_RANKING: &str = include_str!("../../tests/data/results-pair-ranking.json");

    #[test]
    fn an_older_results_file_still_loads_and_analyses_again() {
        let mut results: SweepResults = serde_json::from_str(PAIR_RANKING).unwrap();
        assert_eq!(results.points.len(), 18);
        // The analysis of the old shape reads as empty ...
        assert!(results.analysis.workloads.is_empty());
        // ... while what was measured is kept as written, error counts included.
        let raw: serde_json::Value = serde_json::from_str(PAIR_RANKING).unwrap();
        for (point, raw) in results.points.iter().zip(raw["points"].as_array().unwrap()) {
            assert_eq!(point.figures.rps, raw["rps"].as_f64().unwrap());
            assert_eq!(
                serde_json::to_value(point.errors_by_kind).unwrap(),
                raw["errors_by_kind"]
            );
            assert_eq!(point.spread.repetitions, 2);
        }
        crate::sweep::analysis::finalize(&mut results);
        assert_eq!(results.analysis.workloads.len(), 1);
        assert!(results.recommendation.summary[0].starts_with("hello:"));
    }
}
