//! What a map measures, as read from TOML or a preset (`experiments/map.toml`,
//! `experiments/map-quick.toml`): a CPU cost per request, wait-to-CPU ratios, concurrency
//! levels and wait modes make the cells; each cell is `/work?cpu_us=C&wait_ms=W&wait=MODE`.
//! Checked strictly before anything runs (one line, exit 2).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::arch::Arch;
use crate::lab::plan::de_archs;
use crate::usage;

/// The map presets, by name, as shipped in `experiments/`.
pub const PRESETS: &[(&str, &str)] =
    shipped!("experiments/", ".toml"; "map", "map-wide", "map-quick", "map-net");

/// How a cell's request waits (`wait=` of `/work`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitMode {
    /// As each architecture waits for `/sleep`: a timer of its loop, or a blocked thread.
    Async,
    /// Blocking whichever thread runs the request, as a synchronous database driver does.
    Blocking,
}

impl WaitMode {
    pub fn name(self) -> &'static str {
        match self {
            WaitMode::Async => "async",
            WaitMode::Blocking => "blocking",
        }
    }
}

/// A map: the cells and how each is searched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The candidate architectures (`"all"` or a list).
    #[serde(default = "all_archs", deserialize_with = "de_archs")]
    pub archs: Vec<Arch>,
    /// CPU per request, microseconds (C): one value or a list, each a map of its own.
    #[serde(deserialize_with = "de_one_or_many")]
    pub cpu_us: Vec<f64>,
    /// Wait-to-CPU ratios (W/C): each cell waits `ratio x C`.
    pub ratios: Vec<f64>,
    /// Concurrency levels (connections, closed loop).
    pub concurrency: Vec<u32>,
    /// Wait modes, each a map of its own.
    #[serde(default = "default_waits")]
    pub waits: Vec<WaitMode>,
    /// `const`, `exp` or `lognormal` (with `cv`), applied to both C and W per request.
    #[serde(default)]
    pub dist: Option<String>,
    #[serde(default)]
    pub cv: Option<f64>,
    /// A cell's winner must have a p99 at most this (a p99 that is a lower bound never does).
    #[serde(default = "default_p99_bound_ms")]
    pub p99_bound_ms: f64,
    /// The first halving round's run length (each round doubles it), e.g. "200ms".
    #[serde(default = "default_base", with = "crate::units::as_text")]
    pub base: Duration,
    /// At most this many rounds of halving.
    #[serde(default = "default_rounds")]
    pub rounds: u32,
    /// The largest pool tried.
    #[serde(default = "default_max_pool")]
    pub max_pool: u32,
    /// Warm-up before each measurement, e.g. "100ms".
    #[serde(default = "default_warmup", with = "crate::units::as_text")]
    pub warmup: Duration,
    /// Also measure each cell's full grid, and record whether the adaptive pick is inside the
    /// spread of the grid's best (slow: for small maps).
    #[serde(default)]
    pub verify: bool,
    /// Verify only these cells (their keys), as `verify` does every cell; the search and the
    /// model are the run's own (verification's points are never fitted nor budgeted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verify_cells: Vec<String>,
    /// Measure only to decide: each cell's candidates are predicted by the model of each
    /// server fitted on the run's points so far, and those whose interval lies under what
    /// another measured are left out (`false`: every candidate the search reaches is measured).
    #[serde(default = "predict_by_default")]
    pub predict: bool,
    /// How many points the run may measure, a share of its full grid (`"2%"`) or a number
    /// (`"150"`); spread over the cells still to run (see [`PointBudget`]). Unset: as many as
    /// the search asks for.
    #[serde(
        default,
        rename = "budget",
        with = "point_budget_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub point_budget: Option<PointBudget>,
    /// A network path between the load generator and every server (see [`crate::net`]):
    /// every cycle then holds its round trip, and so does each cell's bound. Read into a
    /// typed path once, with the file.
    #[serde(
        default,
        with = "crate::net::as_key",
        skip_serializing_if = "Option::is_none"
    )]
    pub net: Option<crate::net::NetSpec>,
    /// Round trips of the network path, ms (one value or a list, as `concurrency` is): each a
    /// map of its own, across `net`'s path with this round trip (0, and no other setting in
    /// `net`: loopback). Unset: `net`'s own round trip.
    #[serde(
        default,
        deserialize_with = "de_one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub rtt_ms: Vec<f64>,
    /// A CPU quota for every server, in cores (as `--cpus`; root): the bound and the default
    /// pools follow it. A list is an axis, as `rtt_ms` is: each quota a map of its own.
    #[serde(
        default,
        deserialize_with = "crate::lab::budget::de_cpus",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub cpus: Vec<f64>,
    /// The CPUs every server may run on (as `--cpuset`; root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<crate::lab::budget::CpuList>,
}

/// The `/work` route of a workload: whole microseconds of CPU, the wait in whole milliseconds
/// (`wait_ms`) or, under one, in microseconds (`wait_us`), the wait mode and the spread.
pub fn work_route(
    cpu_us: f64,
    wait_ms: f64,
    mode: WaitMode,
    dist: Option<&str>,
    cv: Option<f64>,
) -> String {
    let wait = if wait_ms.fract() == 0.0 {
        format!("wait_ms={wait_ms}")
    } else {
        format!("wait_us={}", (wait_ms * 1000.0).round())
    };
    let mut route = format!("/work?cpu_us={cpu_us}&{wait}&wait={}", mode.name());
    if let Some(dist) = dist.filter(|d| *d != "const") {
        route.push_str(&format!("&dist={dist}"));
        if let Some(cv) = cv {
            route.push_str(&format!("&cv={cv}"));
        }
    }
    route
}

/// A number or a list of numbers.
fn de_one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(f64),
        Many(Vec<f64>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(x) => vec![x],
        OneOrMany::Many(xs) => xs,
    })
}

fn all_archs() -> Vec<Arch> {
    Arch::all().to_vec()
}
fn default_waits() -> Vec<WaitMode> {
    vec![WaitMode::Async]
}
fn default_p99_bound_ms() -> f64 {
    1000.0
}
/// The first round's run length unless a map says otherwise (and `advise`'s).
pub const DEFAULT_BASE: Duration = Duration::from_millis(200);

fn default_base() -> Duration {
    DEFAULT_BASE
}
fn predict_by_default() -> bool {
    true
}

/// The points a map run may measure: a share of its full grid or a number. Each cell is
/// allowed what is left over the cells still to run ([`PointBudget::allowance`]); the model
/// decides the rest. The servers the model does not know yet are measured whatever the
/// budget (it cannot predict them), so a run may pass it, and says so.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PointBudget {
    /// A share of the full grid, 0 to 1.
    Share(f64),
    Points(usize),
}

/// A cell is allowed at least this many points where the run's budget affords it: its leader
/// and one long run to confirm.
pub const MIN_ALLOWANCE: usize = 2;

impl PointBudget {
    /// `"2%"` or `"150"`.
    pub fn parse(text: &str) -> Result<PointBudget, String> {
        let bad =
            || format!("budget `{text}`: a share of the grid (2%) or a number of points (150)");
        let t = text.trim();
        if let Some(share) = t.strip_suffix('%') {
            let v: f64 = share.trim().parse().map_err(|_| bad())?;
            return (v > 0.0 && v <= 100.0)
                .then_some(PointBudget::Share(v / 100.0))
                .ok_or_else(bad);
        }
        match t.parse::<usize>() {
            Ok(n) if n > 0 => Ok(PointBudget::Points(n)),
            _ => Err(bad()),
        }
    }

    pub fn text(&self) -> String {
        match self {
            PointBudget::Share(s) => format!("{}%", s * 100.0),
            PointBudget::Points(n) => n.to_string(),
        }
    }

    /// The points of a run whose full grid holds `grid` points.
    pub fn points(&self, grid: usize) -> usize {
        match self {
            PointBudget::Share(s) => (grid as f64 * s).floor() as usize,
            PointBudget::Points(n) => *n,
        }
    }

    /// What the next cell may measure: what is left of `total` once `spent` were measured,
    /// shared by the `cells` still to run (this one among them), at least [`MIN_ALLOWANCE`]
    /// where that leaves enough for the cells after, else what is left shared out, rounded
    /// up, and one at least: the model's leader, measured whatever the budget. A run whose
    /// budget the model's first points passed (map-quick's 16: its round trips and the
    /// servers the model did not know yet took 21) gives each cell after them its leader;
    /// one the cells' floor carried past its budget (map-wide's last 8 cells took 18 points
    /// of the 9 left, at two each) keeps it.
    pub fn allowance(total: usize, spent: usize, cells: usize) -> usize {
        let (left, cells) = (total.saturating_sub(spent), cells.max(1));
        if left >= MIN_ALLOWANCE * cells {
            left / cells
        } else {
            left.div_ceil(cells).max(1)
        }
    }

    /// What is left of `total` beyond every remaining cell's [`PointBudget::allowance`]: the
    /// most the next cell may add where the model missed it, so that a run of misses does not
    /// carry the run past its budget (map-wide passed its 191 points by 8 when every miss
    /// doubled a cell's allowance, and by 7 more when each took one point at least).
    pub fn spare(total: usize, spent: usize, cells: usize) -> usize {
        let each = PointBudget::allowance(total, spent, cells);
        total
            .saturating_sub(spent)
            .saturating_sub(each * cells.max(1))
    }
}

mod point_budget_text {
    use super::PointBudget;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &Option<PointBudget>, s: S) -> Result<S::Ok, S::Error> {
        match b {
            Some(b) => s.serialize_str(&b.text()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PointBudget>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Number(usize),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Text(t) => t,
            Raw::Number(n) => n.to_string(),
        };
        PointBudget::parse(&text)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

fn default_rounds() -> u32 {
    3
}
fn default_max_pool() -> u32 {
    256
}
fn default_warmup() -> Duration {
    Duration::from_millis(100)
}

/// One cell of a map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSpec {
    pub wait: WaitMode,
    pub ratio: f64,
    pub concurrency: u32,
    pub cpu_us: f64,
    pub wait_ms: f64,
    /// The round trip of the cell's network path, ms (0: none, or a path of no delay).
    #[serde(default)]
    pub rtt_ms: f64,
    /// The cell's network path (`net` at the cell's round trip), if it has one.
    #[serde(
        default,
        with = "crate::net::as_key",
        skip_serializing_if = "Option::is_none"
    )]
    pub net: Option<crate::net::NetSpec>,
    /// The servers' CPU quota in this cell, in cores (the map's `cpus`), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    /// The request every measurement of the cell sends.
    pub route: String,
    /// A name for its points on disk: `async-r10-c64`.
    pub key: String,
}

impl CellSpec {
    /// The cell's network path.
    pub fn net_spec(&self) -> Option<crate::net::NetSpec> {
        self.net
    }
}

impl MapSpec {
    /// The set of `cpuset`, as a list of CPUs.
    pub fn cpuset_cpus(&self) -> Option<Vec<usize>> {
        self.cpuset.as_ref().map(|l| l.cpus().to_vec())
    }

    /// The cores of CPU a server may use under a quota of `cpus` (a cell's) within the map's
    /// set, on a machine of `cores`.
    pub fn budget(&self, cpus: Option<f64>, cores: u32) -> f64 {
        crate::lab::budget::budget_cores(cpus, self.cpuset_cpus().as_deref(), cores)
    }

    /// The whole cores a server sizes itself for there (see
    /// [`crate::lab::budget::whole_cores`]).
    pub fn whole_cores(&self, cpus: Option<f64>, cores: u32) -> u32 {
        crate::lab::budget::whole_cores(cpus, self.cpuset_cpus().as_deref(), cores)
    }

    /// The quotas the map has: each of `cpus`, or none.
    pub fn quotas(&self) -> Vec<Option<f64>> {
        if self.cpus.is_empty() {
            vec![None]
        } else {
            self.cpus.iter().copied().map(Some).collect()
        }
    }

    /// The suffix of a key under a quota: `-cpus0.5` when the map has several, else none.
    pub fn cpus_suffix(&self, cpus: Option<f64>) -> String {
        match cpus {
            Some(q) if self.cpus.len() > 1 => {
                format!("-cpus{}", crate::lab::budget::cpus_text(q))
            }
            _ => String::new(),
        }
    }

    /// A preset by name, or a TOML file.
    pub fn load(name_or_path: &str) -> anyhow::Result<MapSpec> {
        if let Some((_, text)) = PRESETS.iter().find(|(n, _)| *n == name_or_path) {
            return MapSpec::from_toml(text, &format!("preset {name_or_path}"));
        }
        // The sweep's rule: a name that looks like a file is read as one.
        let path = std::path::Path::new(name_or_path);
        let looks_like_file = name_or_path.ends_with(".toml") || name_or_path.contains('/');
        if !looks_like_file && !path.exists() {
            let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
            return Err(usage(format!(
                "unknown map preset {name_or_path:?} (presets: {}; or give a FILE.toml)",
                names.join(", ")
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
        MapSpec::from_toml(&text, &path.display().to_string())
    }

    /// Parses and checks a map; every error is one line naming the key.
    pub fn from_toml(text: &str, origin: &str) -> anyhow::Result<MapSpec> {
        let spec: MapSpec =
            toml::from_str(text).map_err(|e| crate::toml_usage(text, origin, &e))?;
        spec.check()
            .map_err(|msg| usage(format!("{origin}: {msg}")))?;
        Ok(spec)
    }

    /// The round trips the map has, ms: `rtt_ms`, or `net`'s own (0 without a path).
    pub fn rtts(&self) -> Vec<f64> {
        if self.rtt_ms.is_empty() {
            vec![self.net.map_or(0.0, |n| n.rtt_us as f64 / 1000.0)]
        } else {
            self.rtt_ms.clone()
        }
    }

    /// The network path of the map's cells at a round trip of `rtt_ms`: `net` as given when
    /// the map has no `rtt_ms`; otherwise `net` (or no other setting) at that round trip,
    /// and no path at all for 0 with no other setting.
    pub fn net_at(&self, rtt_ms: f64) -> Option<crate::net::NetSpec> {
        if self.rtt_ms.is_empty() {
            return self.net;
        }
        let mut path = self.net.unwrap_or_default();
        path.rtt_us = (rtt_ms * 1000.0).round() as u64;
        (path != crate::net::NetSpec::default()).then_some(path)
    }

    /// Whether some cell runs across a network path (and so needs root).
    pub fn has_path(&self) -> bool {
        self.rtts().iter().any(|&r| self.net_at(r).is_some())
    }

    /// `net` and `rtt_ms`, checked together (again after `--net` replaced `net`).
    pub fn check_net(&self) -> Result<(), String> {
        if !self.rtt_ms.is_empty() {
            if let Some(n) = self.net.filter(|n| n.rtt_us > 0) {
                return Err(format!(
                    "net = {:?} has a round trip and rtt_ms a list: give the round trip in one of them",
                    n.key()
                ));
            }
            for (i, &r) in self.rtt_ms.iter().enumerate() {
                if self.rtt_ms[..i].contains(&r) {
                    return Err(format!("rtt_ms: {r} is given twice"));
                }
                if !(0.0..=10_000.0).contains(&r) || (r * 1000.0).fract() != 0.0 {
                    return Err(format!(
                        "rtt_ms: {r} is not whole microseconds in 0..=10000 ms"
                    ));
                }
            }
        }
        Ok(())
    }

    fn check(&self) -> Result<(), String> {
        self.check_net()?;
        crate::lab::budget::check_keys(&self.cpus, self.cpuset.as_ref())?;
        if self.archs.is_empty() {
            return Err("archs: none given".into());
        }
        if self.cpu_us.is_empty()
            || self.ratios.is_empty()
            || self.concurrency.is_empty()
            || self.waits.is_empty()
        {
            return Err(
                "cpu_us, ratios, concurrency and waits each need at least one value".into(),
            );
        }
        for &cpu_us in &self.cpu_us {
            if !(1.0..=10_000_000.0).contains(&cpu_us) || cpu_us.fract() != 0.0 {
                return Err(format!(
                    "cpu_us = {cpu_us}: whole microseconds in 1..=10000000"
                ));
            }
            for &r in &self.ratios {
                let wait_ms = r * cpu_us / 1000.0;
                if !(r >= 0.0 && wait_ms <= 60_000.0) {
                    return Err(format!(
                        "ratios: {r} gives a wait of {wait_ms} ms; a ratio is >= 0 and a wait at most 60000 ms"
                    ));
                }
                if (wait_ms * 1000.0).fract() != 0.0 {
                    return Err(format!(
                        "ratios: {r} x cpu_us {cpu_us} gives a wait of {wait_ms} ms; /work waits whole microseconds"
                    ));
                }
            }
        }
        if let Some(&c) = self
            .concurrency
            .iter()
            .find(|&&c| !(1..=10_000).contains(&c))
        {
            return Err(format!("concurrency: {c} is not in 1..=10000"));
        }
        if let Some(dist) = &self.dist {
            if !["const", "exp", "lognormal"].contains(&dist.as_str()) {
                return Err(format!("dist = {dist:?}: const, exp or lognormal"));
            }
        }
        if self.p99_bound_ms.is_nan() || self.p99_bound_ms <= 0.0 {
            return Err("p99_bound_ms: must be > 0".into());
        }
        if !(Duration::from_millis(10)..=Duration::from_secs(60)).contains(&self.base) {
            return Err("base: a duration from 10ms to 60s, e.g. \"200ms\"".into());
        }
        if self.warmup > Duration::from_secs(60) {
            return Err("warmup: a duration up to 60s, e.g. \"100ms\"".into());
        }
        if !(1..=8).contains(&self.rounds) {
            return Err(format!("rounds = {}: must be in 1..=8", self.rounds));
        }
        if !(1..=4096).contains(&self.max_pool) {
            return Err(format!("max_pool = {}: must be in 1..=4096", self.max_pool));
        }
        Ok(())
    }

    /// The warm-up before each point, seconds.
    pub fn warmup_s(&self) -> f64 {
        self.warmup.as_secs_f64()
    }

    /// The first round's run length in milliseconds.
    pub fn base_ms(&self) -> u32 {
        self.base.as_millis() as u32
    }

    /// Whether the cell `key` is verified in full after its search.
    pub fn verifies(&self, key: &str) -> bool {
        self.verify || self.verify_cells.iter().any(|k| k == key)
    }

    /// The first of `keys` that names no cell of this map, with the map's cells to choose
    /// from; `None` when all do.
    pub fn unknown_cell(&self, keys: &[String]) -> Option<String> {
        let cells: Vec<String> = self.cells().into_iter().map(|c| c.key).collect();
        keys.iter().find(|k| !cells.contains(k)).map(|k| {
            format!(
                "no cell `{k}` in map `{}` ({} cells, named like {})",
                self.name,
                cells.len(),
                cells.iter().take(2).cloned().collect::<Vec<_>>().join(", ")
            )
        })
    }

    /// The cells, map by map (wait mode, then CPU, then round trip), then by ratio, then by
    /// concurrency.
    pub fn cells(&self) -> Vec<CellSpec> {
        let mut cells = Vec::new();
        for &wait in &self.waits {
            for &cpu_us in &self.cpu_us {
                for rtt_ms in self.rtts() {
                    for cpus in self.quotas() {
                        for &ratio in &self.ratios {
                            for &concurrency in &self.concurrency {
                                let mut cell = self.cell(wait, cpu_us, rtt_ms, ratio, concurrency);
                                cell.cpus = cpus;
                                cell.key = format!("{}{}", cell.key, self.cpus_suffix(cpus));
                                cells.push(cell);
                            }
                        }
                    }
                }
            }
        }
        cells
    }

    /// The suffix of a key at a round trip: `-rtt100` when the map has several, else none.
    pub fn rtt_suffix(&self, rtt_ms: f64) -> String {
        if self.rtt_ms.len() > 1 {
            format!("-rtt{rtt_ms}")
        } else {
            String::new()
        }
    }

    /// One cell: its `/work` route, its path and its key (`async-r10-c64`, with `-u200` for
    /// the CPU when the map has several and `-rtt100` for the round trip when it has several).
    fn cell(
        &self,
        mode: WaitMode,
        cpu_us: f64,
        rtt_ms: f64,
        ratio: f64,
        concurrency: u32,
    ) -> CellSpec {
        let wait_ms = ratio * cpu_us / 1000.0;
        let route = work_route(cpu_us, wait_ms, mode, self.dist.as_deref(), self.cv);
        let cpu = if self.cpu_us.len() > 1 {
            format!("-u{cpu_us}")
        } else {
            String::new()
        };
        CellSpec {
            wait: mode,
            ratio,
            concurrency,
            cpu_us,
            wait_ms,
            rtt_ms,
            net: self.net_at(rtt_ms),
            cpus: None,
            route,
            key: format!(
                "{}{cpu}{}-r{ratio}-c{concurrency}",
                mode.name(),
                self.rtt_suffix(rtt_ms)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verified_cells_are_the_named_ones_or_every_one() {
        let mut quick = MapSpec::load("map-quick").unwrap();
        assert!(!quick.verifies("async-r10-c16"));
        quick.verify_cells = vec!["async-r10-c16".into()];
        assert!(quick.verifies("async-r10-c16"));
        assert!(!quick.verifies("async-r0-c16"));
        quick.verify = true;
        assert!(quick.verifies("async-r0-c16"));
        assert_eq!(quick.unknown_cell(&["async-r10-c16".into()]), None);
        let msg = quick
            .unknown_cell(&["async-r10-c16".into(), "async-r10-c17".into()])
            .unwrap();
        assert_eq!(
            msg,
            "no cell `async-r10-c17` in map `map-quick` (9 cells, named like async-r0-c1, \
             async-r0-c16)"
        );
    }

    #[test]
    fn presets_parse_and_make_their_cells() {
        for (name, text) in PRESETS {
            let spec = MapSpec::from_toml(text, name).unwrap();
            assert_eq!(&spec.name, name);
            assert!(!spec.cells().is_empty());
        }
        let quick = MapSpec::load("map-quick").unwrap();
        assert_eq!(quick.cells().len(), 9);
        assert!(quick.cells().iter().all(|c| c.wait == WaitMode::Async));
        let full = MapSpec::load("map").unwrap();
        assert!(full.cells().iter().any(|c| c.wait == WaitMode::Blocking));
        let wide = MapSpec::load("map-wide").unwrap();
        assert_eq!(wide.cells().len(), 54);
        assert_eq!(wide.cells()[0].key, "async-u20-r0-c16");
        assert_eq!(
            wide.cells()[53].route,
            "/work?cpu_us=2000&wait_ms=200&wait=blocking"
        );
        assert_eq!(
            wide.cells()[3].route,
            "/work?cpu_us=20&wait_us=200&wait=async"
        );
    }

    #[test]
    fn a_point_budget_is_a_share_or_a_number_and_is_spread_over_the_cells_left() {
        assert_eq!(PointBudget::parse("2%"), Ok(PointBudget::Share(0.02)));
        assert_eq!(PointBudget::parse(" 150 "), Ok(PointBudget::Points(150)));
        for bad in ["0", "0%", "101%", "two", "-3", "2.5", ""] {
            assert!(PointBudget::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(PointBudget::Share(0.02).points(9558), 191);
        assert_eq!(PointBudget::Points(40).points(9558), 40);
        // 191 points, 40 spent, 48 cells left: 3 each; 2 where 2 each is what is left.
        assert_eq!(PointBudget::allowance(191, 40, 48), 3);
        assert_eq!(PointBudget::allowance(191, 95, 48), 2);
        // Less than 2 each left: shared out, rounded up, one at least. 9 points over 8 cells
        // are spent to the last whatever each cell takes of its allowance, and no further.
        assert_eq!(PointBudget::allowance(191, 182, 8), 2);
        assert_eq!(PointBudget::allowance(191, 184, 7), 1);
        assert_eq!(PointBudget::allowance(191, 190, 8), 1);
        let (mut spent, mut most) = (182, 0);
        for left in (1..=8).rev() {
            let a = PointBudget::allowance(191, spent, left);
            assert!(a >= 1);
            most += a;
            spent += a;
        }
        assert_eq!((spent, most), (191, 9));
        // The budget gone (the model's first points passed it): the leader, nothing spare.
        assert_eq!(PointBudget::allowance(191, 191, 5), 1);
        assert_eq!(PointBudget::allowance(191, 200, 5), 1);
        // 151 left over 48 cells: 3 each and 7 spare; none where what is left is shared out.
        assert_eq!(PointBudget::spare(191, 40, 48), 7);
        assert_eq!(PointBudget::spare(191, 150, 30), 0);
        assert_eq!(PointBudget::spare(191, 182, 8), 0);
        assert_eq!(PointBudget::spare(191, 200, 5), 0);
        // In a map file, as text or as a number, and back.
        let base = "name='m'\narchs=['epoll']\ncpu_us=2000\nratios=[0]\nconcurrency=[8]\n";
        let spec = MapSpec::from_toml(&format!("{base}budget='2%'\n"), "m").unwrap();
        assert_eq!(spec.point_budget, Some(PointBudget::Share(0.02)));
        let spec = MapSpec::from_toml(&format!("{base}budget=120\n"), "m").unwrap();
        assert_eq!(spec.point_budget, Some(PointBudget::Points(120)));
        let json = serde_json::to_string(&spec).unwrap();
        let back: MapSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back.point_budget, Some(PointBudget::Points(120)));
        assert!(MapSpec::from_toml(&format!("{base}budget='lots'\n"), "m").is_err());
        assert_eq!(MapSpec::from_toml(base, "m").unwrap().point_budget, None);
    }

    #[test]
    fn a_cell_is_a_work_route() {
        let spec = MapSpec::from_toml(
            "name='m'\narchs=['epoll']\ncpu_us=2000\nratios=[15]\nconcurrency=[8]\n\
             waits=['blocking']\ndist='lognormal'\ncv=1.5\n",
            "t",
        )
        .unwrap();
        let cell = &spec.cells()[0];
        assert_eq!(
            cell.route,
            "/work?cpu_us=2000&wait_ms=30&wait=blocking&dist=lognormal&cv=1.5"
        );
        assert_eq!(cell.key, "blocking-r15-c8");
    }

    #[test]
    fn round_trips_are_an_axis_of_paths() {
        let spec = MapSpec::from_toml(
            "name='m'\ncpu_us=1000\nratios=[0, 10]\nconcurrency=[16, 256]\n\
             rtt_ms=[0, 100]\nnet='rate=5mbit,loss=0.5%'\n",
            "t",
        )
        .unwrap();
        let cells = spec.cells();
        assert_eq!(cells.len(), 8);
        assert_eq!(cells[0].key, "async-rtt0-r0-c16");
        assert_eq!(cells[7].key, "async-rtt100-r10-c256");
        // Each cell's path is the map's at its round trip, read back as it was given.
        assert_eq!(
            cells[0].net.map(|n| n.key()).as_deref(),
            Some("rtt=0ms,rate=5000000bit,loss=0.5%")
        );
        assert_eq!(
            cells[7].net.unwrap(),
            crate::net::NetSpec {
                rtt_us: 100_000,
                rate_bps: Some(5_000_000),
                loss_pct: 0.5,
                ..crate::net::NetSpec::default()
            }
        );
        assert_eq!(cells[7].rtt_ms, 100.0);
        assert!(spec.has_path());
        // Without other settings a round trip of 0 is loopback, no path at all.
        let plain = MapSpec::from_toml(
            "name='m'\ncpu_us=1000\nratios=[0]\nconcurrency=[16]\nrtt_ms=[0, 20]\n",
            "t",
        )
        .unwrap();
        let cells = plain.cells();
        assert_eq!(cells[0].net, None);
        assert_eq!(cells[1].net.map(|n| n.key()).as_deref(), Some("rtt=20ms"));
        assert_eq!(cells[1].key, "async-rtt20-r0-c16");
        let loopback = MapSpec::from_toml(
            "name='m'\ncpu_us=1000\nratios=[0]\nconcurrency=[16]\nrtt_ms=0\n",
            "t",
        )
        .unwrap();
        assert!(!loopback.has_path());
        assert_eq!(loopback.cells()[0].key, "async-r0-c16");
        // A map without rtt_ms runs across its net as given, at its round trip.
        let one = MapSpec::from_toml(
            "name='m'\ncpu_us=1000\nratios=[0]\nconcurrency=[16]\nnet='rtt=50ms,jitter=5ms'\n",
            "t",
        )
        .unwrap();
        assert_eq!(one.rtts(), [50.0]);
        assert_eq!(
            one.cells()[0].net.map(|n| n.key()).as_deref(),
            Some("rtt=50ms,jitter=5ms")
        );
        assert_eq!(one.cells()[0].key, "async-r0-c16");
    }

    #[test]
    fn bad_maps_are_one_line() {
        for (bad, says) in [
            ("cpu_us=0\nratios=[1]\nconcurrency=[1]", "cpu_us"),
            ("cpu_us=[20, 0.5]\nratios=[1]\nconcurrency=[1]", "cpu_us"),
            ("cpu_us=[]\nratios=[1]\nconcurrency=[1]", "cpu_us"),
            ("cpu_us=20\nratios=[1]\nconcurrency=[10001]", "concurrency"),
            ("cpu_us=3\nratios=[0.5]\nconcurrency=[1]", "microseconds"),
            ("cpu_us=1000\nratios=[100000]\nconcurrency=[1]", "ratios"),
            ("cpu_us=1000\nratios=[1]\nconcurrency=[0]", "concurrency"),
            (
                "cpu_us=1000\nratios=[1]\nconcurrency=[1]\nbase='soon'",
                "base",
            ),
            (
                "cpu_us=1000\nratios=[1]\nconcurrency=[1]\narchs=['fibers']",
                "archs",
            ),
            (
                "cpu_us=1000\nratios=[1]\nconcurrency=[1]\ndist='zipf'",
                "dist",
            ),
            (
                "cpu_us=1000\nratios=[1]\nconcurrency=[1]\ncolour=1",
                "colour",
            ),
            (
                "cpu_us=1000\nratios=[1]\nconcurrency=[1]\nrtt_ms=[0, 100]\nnet='rtt=5ms'",
                "rtt_ms",
            ),
            (
                "cpu_us=1000\nratios=[1]\nconcurrency=[1]\nrtt_ms=[0, 0]",
                "twice",
            ),
            (
                "cpu_us=1000\nratios=[1]\nconcurrency=[1]\nrtt_ms=[-1]",
                "rtt_ms",
            ),
            (
                "cpu_us=1000\nratios=[1]\nconcurrency=[1]\nrtt_ms=[0.0001]",
                "rtt_ms",
            ),
            (
                "cpu_us=1000\nratios=[1]\nconcurrency=[1]\nrtt_ms=[1, 10]\nnet='jitter=2ms'",
                "jitter",
            ),
        ] {
            let e = MapSpec::from_toml(&format!("name='m'\n{bad}\n"), "t").unwrap_err();
            assert!(e.downcast_ref::<crate::UsageError>().is_some());
            let text = e.to_string();
            assert!(text.contains(says), "{bad}: {text}");
            assert_eq!(text.lines().count(), 1, "{text}");
        }
    }
}
