//! What a map run holds, as data both the run ([`super::run`]) and the outputs
//! ([`super::output`]) read: `results.json`'s shape, and its atomic write.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::halving::{Outcome, Verify};
use super::points::PointRecord;
use super::spec::{CellSpec, MapSpec};
use crate::lab::results::Machine;

pub use crate::render::json::RESULTS_FILE;

/// What a map run wrote: `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MapResults {
    pub version: u32,
    /// The preset or file the map came from.
    pub source: String,
    pub spec: MapSpec,
    pub machine: Machine,
    pub started: String,
    pub finished: String,
    /// True when some cell was not searched (the run was stopped).
    pub interrupted: bool,
    /// Wall time of the run, summed over its resumptions, in seconds.
    pub wall_s: f64,
    pub cells: Vec<CellResult>,
    /// Points the search measured in all (the round trips' among them), and how many the
    /// full grid of every cell would have needed.
    pub points_measured: usize,
    pub full_grid_points: usize,
    /// Points verification measured besides (`verify`, `--verify-cells`): not the search's,
    /// nor of its budget or its share of the grid.
    #[serde(default)]
    pub points_verifying: usize,
    /// What the map shows, in a paragraph computed from the cells.
    #[serde(default)]
    pub summary: String,
    /// The round trip at one connection here beyond a request's C and its path's round trip,
    /// µs (see [`super::run::round_trip`]): the longest of the map's, then each measured (per
    /// C and path), and the points they took (counted in `points_measured`).
    #[serde(default)]
    pub round_trip_us: f64,
    #[serde(default)]
    pub round_trip_points: usize,
    #[serde(default)]
    pub round_trips: Vec<RoundTripAt>,
}

impl MapResults {
    /// A run's results before any cell: nothing measured yet, `wall_s` so far.
    pub fn new(source: &str, spec: &MapSpec, machine: Machine, wall_s: f64) -> MapResults {
        MapResults {
            version: 1,
            source: source.to_string(),
            spec: spec.clone(),
            machine,
            started: String::new(),
            finished: String::new(),
            interrupted: false,
            wall_s,
            cells: Vec::new(),
            points_measured: 0,
            full_grid_points: 0,
            points_verifying: 0,
            summary: String::new(),
            round_trip_us: 0.0,
            round_trip_points: 0,
            round_trips: Vec::new(),
        }
    }
}

/// The round trip at one connection of a request of one C across one path.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RoundTripAt {
    pub cpu_us: f64,
    /// The path's round trip, ms (0: none).
    pub rtt_ms: f64,
    /// The cycle less C, µs: the path's round trip and what the machine adds.
    pub us: f64,
    /// The machine's p99 jitter at one connection, µs: two p99s closer than it are as good
    /// (see [`super::halving::Cell::p99_jitter_us`]).
    pub jitter_us: f64,
    /// What the leanest server's cycle held beyond both CPUs, µs: the model's hand-off.
    #[serde(default)]
    pub handoff_us: f64,
}

/// One cell's answer and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    pub cell: CellSpec,
    /// `None`: the cell was not searched (interrupted).
    pub outcome: Option<Outcome>,
    /// Goetz's pool for the cell, `cores x (1 + W/C)`.
    pub goetz: u32,
    /// Every point measured for the cell, its verification's among them.
    pub points: Vec<PointRecord>,
    /// The search's points, and its verification's (`verify`).
    pub points_measured: usize,
    pub full_grid_points: usize,
    #[serde(default)]
    pub points_verifying: usize,
    /// The full measurement the pick was checked against (`verify = true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
}

/// Writes `results.json` atomically (a temporary file, then a rename).
pub fn write_results(results: &MapResults, dir: &Path) -> anyhow::Result<()> {
    crate::render::json::write_record(dir, results).map(|_| ())
}
