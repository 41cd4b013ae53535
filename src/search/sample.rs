//! What a search knows of a measured point: its [`Sample`] (throughput in whole cycles, p99,
//! cost), the [`Level`] of a candidate's samples against a p99 bound, and why samples that do
//! not count [`Miss`] it. [`sample_of`] reads a sample from the lab's result.

use serde::{Deserialize, Serialize};

use super::rank::Level;
use crate::lab::limit::{Limit, LimitKind};
use crate::lab::results::PointResult;
use crate::load::LatencyKey;
use crate::render::numbers::duration_us;

/// How near the edge of a clear lead (a throughput [`TIE_FRACTION`] ahead) a dearer candidate
/// has to be for its loss on cost to be confirmed.
pub const EDGE_FRACTION: f64 = 0.02;

/// One measurement's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Throughput, in whole cycles where the load generator counted them.
    pub rps: f64,
    pub p99_us: f64,
    /// The median latency (0: not known).
    #[serde(default)]
    pub p50_us: f64,
    /// The p99 is only a lower bound (requests still unanswered): it never meets a bound.
    pub p99_lower_bound: bool,
    /// The point ran (a server that could not start is `false`).
    pub ok: bool,
    /// The server's CPU per request (µs), peak RSS (KiB), threads and processes (0: unknown).
    #[serde(default)]
    pub cpu_us: f64,
    #[serde(default)]
    pub rss_kb: u64,
    #[serde(default)]
    pub threads: u64,
    #[serde(default)]
    pub processes: u64,
    /// What limited the point, with its evidence (`None`: not judged, as in older point logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// The point's own bound, requests a second: its server's CPU a request on the cores the
    /// load generator left it, and each cycle's ([`crate::lab::limit::own_bound_rps`]; 0: not
    /// known, as in older point logs).
    #[serde(default)]
    pub bound_rps: f64,
    /// The load generator's CPU a request, µs (0: not known).
    #[serde(default)]
    pub client_cpu_us: f64,
}

impl Sample {
    /// The throughput that counts: the point's when its p99 meets the bound, else 0.
    pub fn score(&self, p99_bound_us: f64) -> f64 {
        if self.meets(p99_bound_us) {
            self.rps
        } else {
            0.0
        }
    }

    /// Whether it ran, the lab did not set its figures, and its p99 (not a lower bound)
    /// meets the bound.
    pub fn meets(&self, p99_bound_us: f64) -> bool {
        self.ok && !self.p99_lower_bound && self.p99_us <= p99_bound_us && self.lab().is_none()
    }

    /// The lab's limit (the load generator, the path) where it, not the server, set the
    /// figures: such a sample never counts.
    pub fn lab(&self) -> Option<LimitKind> {
        self.limit.as_ref().and_then(Limit::lab)
    }
}

/// A level of some samples against a p99 bound.
pub fn level_of(samples: &[Sample], p99_bound_us: f64) -> Level {
    let scores: Vec<f64> = samples.iter().map(|s| s.score(p99_bound_us)).collect();
    let mean = |f: fn(&Sample) -> f64| {
        if samples.is_empty() {
            0.0
        } else {
            samples.iter().map(f).sum::<f64>() / samples.len() as f64
        }
    };
    let p99s: Vec<f64> = samples.iter().map(|s| s.p99_us).collect();
    let (_, p99_min, p99_max) = mean_min_max(&p99s);
    Level {
        rps: mean_min_max(&scores),
        p99_us: mean(|s| s.p99_us),
        p99_range: if samples.len() > 1 {
            (p99_min, p99_max)
        } else {
            (0.0, 0.0)
        },
        cpu_us: mean(|s| s.cpu_us),
        rss_kb: mean(|s| s.rss_kb as f64),
    }
}

/// Why a candidate's runs miss the p99 bound (its throughput does not count).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Miss {
    /// Over 1% of its requests failed or timed out (or were answered with non-2xx).
    Errors,
    /// Requests left unanswered: its p99 is only a lower bound.
    Unanswered,
    /// Its worst p99, µs, over the bound.
    OverBound(f64),
    /// The lab (the load generator, the path), not the server, set its figures.
    Lab(LimitKind),
}

impl Miss {
    /// Why `samples` miss the bound; `None`: they meet it (or there are none).
    pub fn of(samples: &[Sample], p99_bound_us: f64) -> Option<Miss> {
        if level_of(samples, p99_bound_us).rps.0 > 0.0 || samples.is_empty() {
            return None;
        }
        Some(if samples.iter().any(|x| !x.ok) {
            Miss::Errors
        } else if let Some(kind) = samples.iter().find_map(Sample::lab) {
            Miss::Lab(kind)
        } else if samples.iter().any(|x| x.p99_lower_bound) {
            Miss::Unanswered
        } else {
            Miss::OverBound(samples.iter().map(|x| x.p99_us).fold(0.0, f64::max))
        })
    }

    /// In words, for a reader.
    pub fn text(self, p99_bound_us: f64) -> String {
        match self {
            Miss::Errors => "over 1% of its requests failed or timed out".into(),
            Miss::Unanswered => "requests left unanswered: its p99 is only a lower bound".into(),
            Miss::OverBound(p99) => format!(
                "p99 {} over the {} bound",
                duration_us(p99),
                duration_us(p99_bound_us)
            ),
            Miss::Lab(kind) => format!(
                "the lab's {} set its figures, not the server: it cannot be judged",
                kind.name()
            ),
        }
    }

    /// One letter for a table cell: `x` p99 over the bound, `u` unanswered, `e` errors, `l`
    /// the lab's limit.
    pub fn mark(self) -> &'static str {
        match self {
            Miss::Errors => "e",
            Miss::Unanswered => "u",
            Miss::OverBound(_) => "x",
            Miss::Lab(_) => "l",
        }
    }
}

/// (mean, min, max) of some scores; all 0 for none.
pub fn mean_min_max(xs: &[f64]) -> (f64, f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, min, max)
}

/// What the search needs of a measured point: its throughput in whole cycles (where the load
/// generator counted them), its p99, and what it cost the server. A point whose p99 is a lower
/// bound, or that left connections unanswered, never meets a p99 bound; nor does one answered
/// with anything but 2xx, or with more than 1% of its requests failed (fast errors are not
/// throughput).
pub fn sample_of(result: &PointResult, cores: u32) -> Sample {
    let answered_ok = result
        .figures
        .status
        .keys()
        .all(|code| code.starts_with('2'));
    let few_errors = (result.errors as f64) <= 0.01 * (result.figures.requests.max(1) as f64);
    let known = !result.figures.server.cpu_unavailable && !result.figures.server.remote;
    let cpu_us = if known {
        result.server_cpu_us_per_request
    } else {
        0.0
    };
    // A starved point's whole-cycle figure takes the served connections for all of them.
    let mut rps = result
        .figures
        .cycle_rps
        .filter(|r| *r > 0.0 && !result.starved)
        .unwrap_or(result.figures.rps);
    // No server answers faster than its cores run its CPU per request: a figure above that
    // is the short window's estimate, and the cores' figure is the better one.
    if cpu_us > 0.0 {
        rps = rps.min(f64::from(cores.max(1)) * 1e6 / cpu_us);
    }
    // Nor faster than its own bound (its CPU a request on the room the rest of the machine
    // left it, each cycle's): whole cycles counted in a short window read forking at 4% over
    // it (64 processes at 1 ms of CPU, 300 ms), where its CPU and its requests in the window
    // put it at the bound.
    if result.bound_rps > 0.0 {
        rps = rps.min(result.bound_rps);
    }
    Sample {
        rps,
        p99_us: result.figures.latency_us.p99,
        p50_us: result.figures.latency_us.p50,
        p99_lower_bound: result
            .figures
            .latency_us
            .lower_bound
            .contains(LatencyKey::P99)
            || result.starved,
        ok: result.ok && answered_ok && few_errors,
        cpu_us,
        rss_kb: result.figures.server.rss_kb,
        threads: result.figures.server.threads,
        processes: result.figures.server.processes,
        limit: result.limit.clone(),
        bound_rps: result.bound_rps,
        client_cpu_us: result.figures.client.cpu_s * 1e6 / result.figures.requests.max(1) as f64,
    }
}
