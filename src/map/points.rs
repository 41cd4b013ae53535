//! A map's finished points, as the lab's point log ([`crate::lab::points`]) keeps them: a [`PointRecord`] each
//! (its cell, the probe, the sample, how it failed), so `--resume DIR` answers the search from
//! the disk and no finished point is measured twice.

use serde::{Deserialize, Serialize};

use super::halving::Probe;
use crate::lab::points::PointLog;
use crate::search::Sample;

/// One finished point as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointRecord {
    /// The cell's key (`async-r10-c16`).
    pub cell: String,
    pub probe: Probe,
    pub sample: Sample,
    /// Why the point failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl PointRecord {
    /// The key of this point: its cell, candidate, run length and repetition.
    pub fn key(&self) -> String {
        Self::key_of(&self.cell, &self.probe)
    }

    /// The key of `probe` in `cell`.
    pub fn key_of(cell: &str, probe: &Probe) -> String {
        let label: String = probe
            .candidate
            .label()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        format!("{cell}~{label}~{}ms~{}", probe.duration_ms, probe.rep)
    }
}

/// The point log of a map or advise run (`DIR/points.jsonl`), each point under its
/// [`PointRecord::key`].
impl PointLog<PointRecord> {
    /// Stores a finished point under its key.
    pub fn put_record(&mut self, record: PointRecord) -> anyhow::Result<()> {
        self.put(&record.key(), record)
    }

    /// Every stored point, in key order.
    pub fn records(&self) -> impl Iterator<Item = &PointRecord> {
        self.iter().map(|(_, r)| r)
    }

    /// Every stored point of a cell, in key order.
    pub fn of_cell(&self, cell: &str) -> Vec<&PointRecord> {
        self.iter()
            .map(|(_, r)| r)
            .filter(|r| r.cell == cell)
            .collect()
    }

    /// `every point failed (N); the first: CELL LABEL: FAILURE` when every stored point
    /// failed (its server did not run, or its requests failed), else `None`.
    pub fn every_point_failed(&self) -> Option<String> {
        if self.is_empty() || self.iter().any(|(_, r)| r.failure.is_none()) {
            return None;
        }
        let (_, first) = self.iter().next()?;
        let failure = first.failure.as_deref()?;
        Some(format!(
            "every point failed ({}); the first: {} {}: {}",
            self.len(),
            first.cell,
            first.probe.candidate.label(),
            failure.lines().next().unwrap_or(failure)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;
    use crate::map::halving::Candidate;

    fn record(rep: u32) -> PointRecord {
        PointRecord {
            cell: "async-r10-c16".into(),
            probe: Probe {
                candidate: Candidate {
                    arch: Arch::Prethreaded,
                    workers: Some(8),
                },
                duration_ms: 200,
                rep,
            },
            sample: Sample {
                rps: 123.5,
                p99_us: 4000.0,
                p50_us: 0.0,
                p99_lower_bound: false,
                ok: true,
                cpu_us: 210.5,
                rss_kb: 8192,
                threads: 3,
                processes: 1,
                limit: None,
                bound_rps: 0.0,
                client_cpu_us: 0.0,
            },
            failure: None,
        }
    }

    #[test]
    fn points_survive_a_reopen_and_are_found_by_cell() {
        let dir = crate::os::fresh_test_dir("map-points");
        let mut log = PointLog::<PointRecord>::open(&dir).unwrap();
        log.put_record(record(0)).unwrap();
        log.put_record(record(1)).unwrap();
        let again = PointLog::<PointRecord>::open(&dir).unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!(
            again.get("async-r10-c16~prethreaded-8~200ms~1"),
            Some(&record(1))
        );
        assert_eq!(again.of_cell("async-r10-c16").len(), 2);
        assert_eq!(again.of_cell("async-r10-c64").len(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
