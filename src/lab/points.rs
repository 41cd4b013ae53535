//! The point log: a run's finished points on disk, for `map`, `advise` and `tune --resume DIR`: one JSON line
//! each in `DIR/points.jsonl`, appended and synced as each point finishes, so an interrupted
//! run (Ctrl-C, kill -9) loses no finished point. A last line cut short by a kill is dropped
//! when the file is read, and the file cut back to the last whole line. The search asks for
//! the same points in the same order, and those on disk are answered from them, so no
//! finished point is measured twice. Each command stores its own record under its own key.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The file the points are in, inside the run's directory.
pub const POINTS_FILE: &str = "points.jsonl";

/// One finished point as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Record<T> {
    key: String,
    point: T,
}

/// The points of one run.
pub struct PointLog<T> {
    file: File,
    records: BTreeMap<String, T>,
}

impl<T: Serialize + DeserializeOwned> PointLog<T> {
    /// Opens (creating) `dir/points.jsonl` and reads every whole point in it.
    pub fn open(dir: &Path) -> anyhow::Result<PointLog<T>> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
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
            match serde_json::from_slice::<Record<T>>(line) {
                Ok(r) => {
                    records.insert(r.key, r.point);
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
        Ok(PointLog { file, records })
    }

    /// The point stored under `key`, if it finished.
    pub fn get(&self, key: &str) -> Option<&T> {
        self.records.get(key)
    }

    /// Stores a finished point, on disk before this returns.
    pub fn put(&mut self, key: &str, point: T) -> anyhow::Result<()> {
        let record = Record {
            key: key.to_string(),
            point,
        };
        let mut line = serde_json::to_vec(&record)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.sync_data()?;
        self.records.insert(record.key, record.point);
        Ok(())
    }

    /// Every stored point with its key, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &T)> {
        self.records.iter()
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

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Point {
        rps: f64,
    }

    fn result(rps: f64) -> Point {
        Point { rps }
    }

    #[test]
    fn points_survive_a_reopen_and_a_torn_line_is_dropped() {
        let dir = crate::os::fresh_test_dir("point-log");
        let (a, b) = ("2,3|c16|run|r0", "2,3|c1|closed|r0");
        {
            let mut store = PointLog::<Point>::open(&dir).unwrap();
            assert!(store.is_empty());
            store.put(a, result(100.0)).unwrap();
            store.put(b, result(7.0)).unwrap();
        }
        // A kill in the middle of a third line.
        let path = dir.join(POINTS_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"key\":\"4|c16|run|r0\",\"poi").unwrap();
        drop(f);
        let mut store = PointLog::<Point>::open(&dir).unwrap();
        assert_eq!(store.len(), 2);
        assert_eq!(store.get(a).unwrap().rps, 100.0);
        assert_eq!(store.get(b).unwrap().rps, 7.0);
        // The torn line is gone: the next point lands on a line of its own.
        let c = "4|c16|run|r0";
        store.put(c, result(50.0)).unwrap();
        drop(store);
        let store = PointLog::<Point>::open(&dir).unwrap();
        assert_eq!(store.len(), 3);
        assert_eq!(store.get(c).unwrap().rps, 50.0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
