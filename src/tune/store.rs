//! A tune run's finished points on disk, for `tune --resume DIR`: one JSON line each in
//! `DIR/points.jsonl`, appended and synced as each point finishes, so an interrupted run
//! (Ctrl-C, kill -9) loses no finished point. A last line cut short by a kill is dropped when
//! the file is read, and the file cut back to the last whole line. The search asks for the same
//! points in the same order, and those on disk are answered from them, so no finished point is
//! measured twice. (The map's store keeps a file per point named by architecture and pool; a
//! tune point is named by its knobs' values, so it has its own.)

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::lab::results::PointResult;

/// The file the points are in, inside the run's directory.
pub const POINTS_FILE: &str = "points.jsonl";

/// One finished point as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record {
    key: String,
    result: PointResult,
}

/// What names a point: the knobs' values, the connections, the loop and the repetition.
pub fn key(values: &[u32], concurrency: u32, closed: bool, rep: u32) -> String {
    let values: Vec<String> = values.iter().map(u32::to_string).collect();
    format!(
        "{}|c{concurrency}|{}|r{rep}",
        values.join(","),
        if closed { "closed" } else { "run" }
    )
}

/// The points of one run.
pub struct Store {
    file: File,
    records: BTreeMap<String, PointResult>,
}

impl Store {
    /// Opens (creating) `dir/points.jsonl` and reads every whole point in it.
    pub fn open(dir: &Path) -> anyhow::Result<Store> {
        let path = dir.join(POINTS_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut text = Vec::new();
        file.read_to_end(&mut text)
            .with_context(|| format!("reading {}", path.display()))?;
        let mut records = BTreeMap::new();
        let mut whole = 0usize;
        for line in text.split_inclusive(|&b| b == b'\n') {
            if !line.ends_with(b"\n") {
                break;
            }
            match serde_json::from_slice::<Record>(line) {
                Ok(r) => {
                    records.insert(r.key, r.result);
                }
                Err(_) => break,
            }
            whole += line.len();
        }
        if whole < text.len() {
            // A line cut short (or garbage after it): keep what came before it.
            file.set_len(whole as u64)
                .with_context(|| format!("cutting {} back", path.display()))?;
            file.seek(SeekFrom::End(0))?;
        }
        Ok(Store { file, records })
    }

    /// The point stored under `key`, if it finished.
    pub fn get(&self, key: &str) -> Option<&PointResult> {
        self.records.get(key)
    }

    /// Stores a finished point, on disk before this returns.
    pub fn put(&mut self, key: &str, result: &PointResult) -> anyhow::Result<()> {
        let record = Record {
            key: key.to_string(),
            result: result.clone(),
        };
        let mut line = serde_json::to_vec(&record)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.sync_data()?;
        self.records.insert(record.key, record.result);
        Ok(())
    }

    /// How many points are stored.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(rps: f64) -> PointResult {
        PointResult {
            rps,
            ok: true,
            ..PointResult::default()
        }
    }

    #[test]
    fn points_survive_a_reopen_and_a_torn_line_is_dropped() {
        let dir = std::env::temp_dir().join(format!("sweetspot-tune-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (key(&[2, 3], 16, false, 0), key(&[2, 3], 1, true, 0));
        assert_ne!(a, b);
        {
            let mut store = Store::open(&dir).unwrap();
            assert!(store.is_empty());
            store.put(&a, &result(100.0)).unwrap();
            store.put(&b, &result(7.0)).unwrap();
        }
        // A kill in the middle of a third line.
        let path = dir.join(POINTS_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"key\":\"4|c16|run|r0\",\"resu").unwrap();
        drop(f);
        let mut store = Store::open(&dir).unwrap();
        assert_eq!(store.len(), 2);
        assert_eq!(store.get(&a).unwrap().rps, 100.0);
        assert_eq!(store.get(&b).unwrap().rps, 7.0);
        // The torn line is gone: the next point lands on a line of its own.
        let c = key(&[4], 16, false, 0);
        store.put(&c, &result(50.0)).unwrap();
        drop(store);
        let store = Store::open(&dir).unwrap();
        assert_eq!(store.len(), 3);
        assert_eq!(store.get(&c).unwrap().rps, 50.0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
