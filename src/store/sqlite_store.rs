//! The embedded guestbook store: one SQLite file in WAL mode with full sync, so a remark
//! answered 2xx survives a crash, and many processes can read while one writes.
//!
//! Every visit writes (the counter), so writers contend. Three things keep that cheap: a
//! mutex that queues the writers of one process (they sleep until woken instead of polling
//! the file lock), a busy handler that waits in short sleeps for writers in other processes
//! (SQLite's default backs off to 100 ms sleeps, which turns contention into 100 ms stalls),
//! and a per-process pool of idle connections, so a thread per connection does not open the
//! file, read the schema and map the WAL index for every client.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::Connection;

use super::{GuestbookPage, Remark, StoreError, View, PAGE_SIZE};

/// Idle connections kept for reuse, per process.
const POOL_CAPACITY: usize = 64;

/// Writers of one process take turns here, sleeping until woken, instead of polling SQLite's
/// file lock; the busy handler is left for writers in other processes.
static WRITER: Mutex<()> = Mutex::new(());

/// Idle connections, with the process that opened each (a forked child must not use its
/// parent's).
static IDLE: Mutex<Vec<(u32, SqliteStore)>> = Mutex::new(Vec::new());

/// A connection to the guestbook file.
pub struct SqliteStore {
    path: PathBuf,
    conn: Connection,
}

/// Waits for a writer's lock in short sleeps, up to about ten seconds.
fn busy_wait(attempt: i32) -> bool {
    let micros = (50u64 << attempt.clamp(0, 5)).min(1000);
    std::thread::sleep(Duration::from_micros(micros));
    attempt < 10_000
}

fn err(e: rusqlite::Error) -> StoreError {
    StoreError(format!("sqlite: {e}"))
}

impl SqliteStore {
    /// Creates the directory, the file and the schema; used once at server start.
    pub fn create(path: &Path) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError(format!("cannot create {}: {e}", dir.display())))?;
        }
        let store = SqliteStore::open(path)?;
        store
            .conn
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 CREATE TABLE IF NOT EXISTS remarks (
                     id INTEGER PRIMARY KEY, name TEXT NOT NULL, remarks TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS counters (
                     name TEXT PRIMARY KEY, value INTEGER NOT NULL);",
            )
            .map_err(err)?;
        Ok(store)
    }

    /// Opens an existing guestbook file.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_handler(Some(busy_wait)).map_err(err)?;
        conn.execute_batch("PRAGMA synchronous = FULL;")
            .map_err(err)?;
        Ok(SqliteStore {
            path: path.to_path_buf(),
            conn,
        })
    }

    /// An idle pooled connection to `path` opened by this process, or a new one.
    pub fn checkout(path: &Path) -> Result<SqliteStore, StoreError> {
        let pid = std::process::id();
        let pooled = {
            let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
            idle.retain(|(owner, _)| *owner == pid);
            idle.iter()
                .position(|(_, s)| s.path == path)
                .map(|i| idle.swap_remove(i).1)
        };
        match pooled {
            Some(store) => Ok(store),
            None => SqliteStore::open(path),
        }
    }

    /// Returns a healthy connection to the pool (or closes it when the pool is full).
    pub fn checkin(self) {
        let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < POOL_CAPACITY {
            idle.push((std::process::id(), self));
        }
    }

    pub fn visit(&mut self, view: View) -> Result<GuestbookPage, StoreError> {
        let visitors: i64 = if view.count {
            let _turn = WRITER.lock().unwrap_or_else(|e| e.into_inner());
            self.conn
                .query_row(
                    "INSERT INTO counters (name, value) VALUES ('visitors', 1)
                     ON CONFLICT(name) DO UPDATE SET value = value + 1 RETURNING value",
                    [],
                    |row| row.get(0),
                )
                .map_err(err)?
        } else {
            self.conn
                .query_row(
                    "SELECT COALESCE((SELECT value FROM counters WHERE name = 'visitors'), 0)",
                    [],
                    |row| row.get(0),
                )
                .map_err(err)?
        };
        let total: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM remarks", [], |row| row.get(0))
            .map_err(err)?;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT name, remarks FROM remarks ORDER BY id DESC LIMIT ?1 OFFSET ?2")
            .map_err(err)?;
        let skip = i64::try_from(view.skip()).unwrap_or(i64::MAX);
        let remarks = stmt
            .query_map((PAGE_SIZE as i64, skip), |row| {
                Ok(Remark {
                    name: row.get(0)?,
                    remarks: row.get(1)?,
                })
            })
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        Ok(GuestbookPage {
            visitors: visitors as u64,
            remarks,
            page: view.page,
            total: total as u64,
        })
    }

    pub fn add_remark(&mut self, remark: &Remark) -> Result<(), StoreError> {
        let _turn = WRITER.lock().unwrap_or_else(|e| e.into_inner());
        self.conn
            .execute(
                "INSERT INTO remarks (name, remarks) VALUES (?1, ?2)",
                (&remark.name, &remark.remarks),
            )
            .map_err(err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checked_in_connection_is_reused_by_the_next_checkout() {
        let dir = std::env::temp_dir().join(format!("sweetspot-pool-{}", std::process::id()));
        let path = dir.join("gb.sqlite");
        SqliteStore::create(&path).unwrap();
        let first = SqliteStore::checkout(&path).unwrap();
        // A temporary table lives only on the connection that made it.
        first
            .conn
            .execute_batch("CREATE TEMP TABLE marker (x)")
            .unwrap();
        first.checkin();
        let again = SqliteStore::checkout(&path).unwrap();
        let has_marker = |s: &SqliteStore| s.conn.prepare("SELECT x FROM temp.marker").is_ok();
        assert!(has_marker(&again));
        let other = SqliteStore::checkout(&path).unwrap();
        assert!(
            !has_marker(&other),
            "a pooled connection was handed out twice"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
