//! The embedded guestbook store: one SQLite file in WAL mode with full sync, so a remark
//! answered 2xx survives a crash, and many processes can read while one writes.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::{GuestbookPage, Remark, StoreError};

/// A connection to the guestbook file.
pub struct SqliteStore {
    conn: Connection,
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
        conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
        conn.execute_batch("PRAGMA synchronous = FULL;")
            .map_err(err)?;
        Ok(SqliteStore { conn })
    }

    pub fn visit(&mut self) -> Result<GuestbookPage, StoreError> {
        let visitors: i64 = self
            .conn
            .query_row(
                "INSERT INTO counters (name, value) VALUES ('visitors', 1)
                 ON CONFLICT(name) DO UPDATE SET value = value + 1 RETURNING value",
                [],
                |row| row.get(0),
            )
            .map_err(err)?;
        let mut stmt = self
            .conn
            .prepare_cached("SELECT name, remarks FROM remarks ORDER BY id")
            .map_err(err)?;
        let remarks = stmt
            .query_map([], |row| {
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
        })
    }

    pub fn add_remark(&mut self, remark: &Remark) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO remarks (name, remarks) VALUES (?1, ?2)",
                (&remark.name, &remark.remarks),
            )
            .map_err(err)?;
        Ok(())
    }
}
