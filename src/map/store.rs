//! Finished points on disk, one file each, written atomically (a temporary file, fsync, rename,
//! fsync of the directory), so a run killed at any moment (Ctrl-C, kill -9, a reboot) loses no
//! finished point and leaves no half-written one. `--resume DIR` opens the same store: the search
//! asks for the same points in the same order, and those on disk are answered from it, so no
//! finished point is measured twice.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::search::{Probe, Sample};

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
    /// The file name of this point: its cell, candidate, run length and repetition.
    pub fn file_name(&self) -> String {
        let label: String = self
            .probe
            .candidate
            .label()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        format!(
            "{}~{label}~{}ms~{}.json",
            self.cell, self.probe.duration_ms, self.probe.rep
        )
    }
}

/// The points of one run, in `DIR/points/`.
pub struct Store {
    dir: PathBuf,
    records: BTreeMap<String, PointRecord>,
}

impl Store {
    /// Opens (creating) `out/points` and reads every finished point in it. Temporary files of
    /// a write that was cut short are removed.
    pub fn open(out: &Path) -> anyhow::Result<Store> {
        let dir = out.join("points");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut records = BTreeMap::new();
        for entry in std::fs::read_dir(&dir)?.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_string();
            if name.ends_with(".tmp") {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if !name.ends_with(".json") {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let record: PointRecord = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", path.display()))?;
            records.insert(name, record);
        }
        Ok(Store { dir, records })
    }

    /// The stored sample of a point, if it finished before.
    pub fn get(&self, record_name: &str) -> Option<&PointRecord> {
        self.records.get(record_name)
    }

    /// Writes a finished point atomically and keeps it.
    pub fn put(&mut self, record: PointRecord) -> anyhow::Result<()> {
        let name = record.file_name();
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!("{name}.tmp"));
        let text = serde_json::to_string_pretty(&record)?;
        {
            let mut file = std::fs::File::create(&tmp)
                .with_context(|| format!("writing {}", tmp.display()))?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
        }
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        if let Ok(dir) = std::fs::File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        self.records.insert(name, record);
        Ok(())
    }

    /// Every stored point of a cell, in file-name order.
    pub fn of_cell(&self, cell: &str) -> Vec<&PointRecord> {
        self.records.values().filter(|r| r.cell == cell).collect()
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// `every point failed (N); the first: CELL LABEL: FAILURE` when every stored point
    /// failed (its server did not run, or its requests failed), else `None`.
    pub fn every_point_failed(&self) -> Option<String> {
        if self.records.is_empty() || self.records.values().any(|r| r.failure.is_none()) {
            return None;
        }
        let first = self.records.values().next()?;
        let failure = first.failure.as_deref()?;
        Some(format!(
            "every point failed ({}); the first: {} {}: {}",
            self.records.len(),
            first.cell,
            first.probe.candidate.label(),
            failure.lines().next().unwrap_or(failure)
        ))
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Arch;
    use crate::map::search::Candidate;

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
            },
            failure: None,
        }
    }

    #[test]
    fn points_survive_a_reopen_and_a_torn_write_is_dropped() {
        let dir = std::env::temp_dir().join(format!("sweetspot-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut store = Store::open(&dir).unwrap();
        store.put(record(0)).unwrap();
        store.put(record(1)).unwrap();
        std::fs::write(dir.join("points/x.json.tmp"), "{\"cell\": \"half").unwrap();
        let again = Store::open(&dir).unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!(
            again.get("async-r10-c16~prethreaded-8~200ms~1.json"),
            Some(&record(1))
        );
        assert!(!dir.join("points/x.json.tmp").exists());
        assert_eq!(again.of_cell("async-r10-c16").len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
