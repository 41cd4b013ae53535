//! Synthetic servers for the search's tests: a curve of throughput and p99 by candidate,
//! samples, cells and pool plateaus.

use super::*;

/// A synthetic server: throughput by architecture and pool, p99 by a fixed rule, a little
/// deterministic noise by repetition; counts what it was asked.
pub struct Curve<F: Fn(Candidate) -> (f64, f64)> {
    pub f: F,
    pub asked: Vec<Probe>,
}

impl<F: Fn(Candidate) -> (f64, f64)> Measure<Probe> for Curve<F> {
    fn measure(&mut self, probe: &Probe) -> Option<Sample> {
        self.asked.push(*probe);
        let (rps, p99) = (self.f)(probe.candidate);
        let noise = 1.0 + 0.005 * f64::from(probe.rep % 3);
        Some(sample(rps * noise, p99))
    }
}

/// A sample that met its window: throughput and p99 as given, the same small server's
/// costs.
pub fn sample(rps: f64, p99_us: f64) -> Sample {
    Sample {
        rps,
        p99_us,
        p50_us: 0.0,
        p99_lower_bound: false,
        ok: true,
        cpu_us: 100.0,
        rss_kb: 8000,
        threads: 2,
        processes: 1,
        limit: None,
        bound_rps: 0.0,
        client_cpu_us: 0.0,
    }
}

pub fn cell(archs: &[Arch], concurrency: u32) -> Cell {
    Cell {
        archs: archs.to_vec(),
        concurrency,
        cores: 2,
        budget: 2.0,
        quota: false,
        cpu_us: 1000.0,
        wait_ms: 10.0,
        blocking: false,
        p99_bound_us: 100_000.0,
        base_ms: 100,
        rounds: 4,
        max_pool: 256,
        rules: vec![("goetz".into(), 22), ("2n+1".into(), 5)],
        round_trip_us: 0.0,
        p99_jitter_us: 0.0,
        path_rtt_us: 0.0,
        forecast: Vec::new(),
        allowance: None,
        spare: 0,
    }
}

/// A pool curve rising as a pool of `knee` workers fills, then flat (a plateau).
pub fn plateau(w: u32, knee: u32, top: f64) -> f64 {
    top * (f64::from(w.min(knee)) / f64::from(knee))
}

/// A synthetic server of `f`, nothing asked yet.
pub fn synthetic<F: Fn(Candidate) -> (f64, f64)>(f: F) -> Curve<F> {
    Curve {
        f,
        asked: Vec::new(),
    }
}
