//! What the analysis concluded, as plain data: the records `results.json` keeps under
//! `analysis` and `recommendation`, which the output formats read and never compute.
//!
//! These are derived from the points: `sweetspot report` recomputes them, so a file written by
//! an older version whose analysis had another shape still loads (see
//! [`crate::sweep::results::SweepResults`]).

use serde::{Deserialize, Serialize};

use crate::model::usl::{UslFit, UslLimit};

/// The architecture that wins a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestChoice {
    pub arch: String,
    pub workers: Option<u32>,
    pub concurrency: u32,
    /// HTTP/2 points: streams a connection (`concurrency` is then the requests in flight).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u32>,
    pub rps: f64,
    pub p99_us: f64,
    /// True when this p99 is only a lower bound (possible only when nothing met the bound).
    #[serde(default)]
    pub p99_lower_bound: bool,
    /// True when the bound was met; false means no point met it and this is the lowest p99.
    pub within_bound: bool,
    /// Other architectures within [`super::WITHIN_BEST`] of this one's throughput (under the
    /// same rule), outside the spread of the repetitions.
    pub ties: Vec<String>,
    /// Other architectures whose repetitions overlap this one's: the difference is inside the
    /// spread, so none of them won.
    #[serde(default)]
    pub indistinguishable: Vec<String>,
    /// Each candidate architecture's best throughput under the bound, best first, with its
    /// min..max over the repetitions (equal to the throughput for a single run).
    pub ranking: Vec<RankedArch>,
    /// Architectures with no point under the bound, with why.
    pub excluded: Vec<(String, String)>,
    /// Repetitions behind each point (1 when not repeated).
    #[serde(default)]
    pub repetitions: u32,
    /// What decided the ranking: "throughput", or "p99" when every candidate delivered the
    /// rate offered (a fixed-rate sweep), so throughput could not tell them apart.
    #[serde(default)]
    pub ranked_by: RankedBy,
    /// The rate offered, for a fixed-rate sweep.
    #[serde(default)]
    pub offered_rps: Option<f64>,
}

/// What a ranking compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankedBy {
    /// Highest throughput first.
    #[default]
    Throughput,
    /// Lowest p99 first, then lowest server CPU per request.
    P99,
}

/// One architecture's best point under the bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedArch {
    pub arch: String,
    pub rps: f64,
    pub rps_min: f64,
    pub rps_max: f64,
    #[serde(default)]
    pub p99_us: f64,
    #[serde(default)]
    pub cpu_us_per_request: f64,
    /// The connections of the point that represents it.
    #[serde(default)]
    pub concurrency: u32,
    /// What limited that point, with its evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<crate::lab::limit::Limit>,
}

/// A sweet spot found over worker counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweetSpot {
    pub arch: String,
    pub workload: String,
    pub concurrency: u32,
    pub workers: u32,
    pub rps: f64,
    pub best_rps: f64,
    pub best_workers: u32,
    /// The largest pool measured: a sweet spot there means the curve had not levelled off.
    #[serde(default)]
    pub max_workers_tried: u32,
}

/// The USL fit of one series, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UslSeries {
    pub arch: String,
    pub workload: String,
    /// `concurrency` (fixed workers) or `workers` (fixed concurrency).
    pub axis: String,
    /// The fixed value of the other axis.
    pub fixed: Option<u32>,
    /// Distinct levels of N measured in this series.
    pub levels: usize,
    /// `None` when the fit was refused; `refused` says why.
    pub fit: Option<UslFit>,
    pub refused: Option<String>,
    /// What limited scaling over the levels measured.
    pub limit: Option<UslLimit>,
    /// N* = sqrt((1 - sigma) / kappa), when the model peaks.
    pub predicted_peak_n: Option<f64>,
    /// X_max = X(N*).
    pub predicted_peak_rps: Option<f64>,
    /// Without a peak (kappa = 0): the ceiling lambda / sigma.
    pub ceiling_rps: Option<f64>,
    pub measured_best_n: u32,
    pub measured_best_rps: f64,
    /// The largest N measured in this series.
    pub measured_max_n: u32,
}

/// Goetz's estimate beside the measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoetzEstimate {
    pub workload: String,
    pub cores: f64,
    pub utilization: f64,
    pub wait_ms: f64,
    /// Median server CPU per request over the workload's points, microseconds.
    pub compute_us: f64,
    pub pool_size: f64,
    /// The most connections any point of the workload offered: more threads than requests in
    /// flight have nothing to do, so the useful pool is capped there (0: unknown).
    #[serde(default)]
    pub concurrency_cap: u32,
    pub measured_sweet_spot: Option<u32>,
}

impl GoetzEstimate {
    /// The pool size worth having: Goetz's, capped by the concurrency (a pool larger than the
    /// requests that can be in flight at once has idle threads whatever the formula says);
    /// and whether the cap applied.
    pub fn useful_pool_size(&self) -> (f64, bool) {
        let cap = f64::from(self.concurrency_cap);
        if self.concurrency_cap > 0 && self.pool_size > cap {
            (cap, true)
        } else {
            (self.pool_size, false)
        }
    }
}

/// Everything concluded about one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadAnalysis {
    pub workload: String,
    pub best: Option<BestChoice>,
    /// The cheapest architecture in server CPU per request (among usable points).
    pub cheapest: Option<(String, f64)>,
    /// Architectures whose CPU per request over the repetitions overlaps the cheapest's: no
    /// cheaper one can be named among them.
    #[serde(default)]
    pub cheapest_within_spread: Vec<String>,
    pub sweet_spots: Vec<SweetSpot>,
    pub usl: Vec<UslSeries>,
    pub goetz: Option<GoetzEstimate>,
}

/// The analysis of a whole sweep.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Analysis {
    pub p99_bound_ms: f64,
    pub workloads: Vec<WorkloadAnalysis>,
    /// Points whose measurement should be read with care.
    pub warnings: Vec<String>,
    pub failed_points: usize,
    pub generator_bound_points: usize,
    /// Points whose limit was the lab's (the load generator, the `--net` path): never a winner.
    #[serde(default)]
    pub lab_limited_points: usize,
    /// Servers that sized themselves for more CPUs than their quota let them use, each beside
    /// a right-sized run of the same case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oversized: Vec<crate::lab::budget::Oversized>,
}

/// The recommendation in plain words.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Recommendation {
    /// One line per workload: the architecture to pick.
    pub summary: Vec<String>,
    /// The reasons, sweet spots and theory, in sentences.
    pub details: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_sizes_are_capped_by_the_concurrency() {
        let goetz = |pool_size, concurrency_cap| GoetzEstimate {
            workload: "w".into(),
            cores: 2.0,
            utilization: 1.0,
            wait_ms: 10.0,
            compute_us: 100.0,
            pool_size,
            concurrency_cap,
            measured_sweet_spot: None,
        };
        assert_eq!(goetz(260.5, 64).useful_pool_size(), (64.0, true));
        assert_eq!(goetz(3.5, 64).useful_pool_size(), (3.5, false));
        assert_eq!(goetz(260.5, 0).useful_pool_size(), (260.5, false));
    }
}
