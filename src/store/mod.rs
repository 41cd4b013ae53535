//! Guestbook stores: SQLite (embedded, the default) and Redis (the study's store).
//!
//! [`StoreConfig`] is what the command line names; each worker (process or thread) opens its
//! own [`StoreClient`] through a [`LazyStore`], which connects on first use and drops a broken
//! connection so the next request reconnects: a store that goes away gives 503 on guestbook
//! routes and comes back without a server restart. The event-loop architectures talk to Redis
//! through [`redis_pipe`] instead, without blocking.

pub mod redis_pipe;
mod redis_store;
mod sqlite_store;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

pub use redis_store::{RedisStore, REMARKS_KEY, STORE_TIMEOUT, VISITORS_KEY};
// Command building and reply checking, for Redis clients outside this module (the async one).
pub use redis_store::{
    add_remark_command, check_reply, page_from_replies, visit_pipeline, VISIT_REPLIES,
};
pub use sqlite_store::SqliteStore;

/// One guestbook entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Remark {
    pub name: String,
    pub remarks: String,
}

/// Remarks shown on one guestbook page: the newest first, older ones on `?page=2` and on.
pub const PAGE_SIZE: u64 = 20;

/// Which page a guestbook view reads, and whether it counts as a visit (GET does, HEAD not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// 1 is the newest [`PAGE_SIZE`] remarks.
    pub page: u64,
    pub count: bool,
}

impl View {
    /// How many of the newest remarks the pages before this one hold.
    pub fn skip(self) -> u64 {
        (self.page - 1) * PAGE_SIZE
    }
}

/// What a guestbook view reads: one page of remarks, newest first, the number of remarks in
/// all, and the visitor count (after this visit, when it counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestbookPage {
    pub visitors: u64,
    pub remarks: Vec<Remark>,
    pub page: u64,
    pub total: u64,
}

/// A store failure: the guestbook answers 503 and the connection is dropped for a retry.
#[derive(Debug, thiserror::Error)]
#[error("store unavailable: {0}")]
pub struct StoreError(pub String);

/// Where the guestbook lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    Sqlite(PathBuf),
    Redis { host: String, port: u16 },
}

impl StoreConfig {
    /// Parses `sqlite:PATH` or `redis://HOST:PORT`; `None` means the default SQLite file.
    pub fn parse(spec: Option<&str>) -> anyhow::Result<StoreConfig> {
        let Some(spec) = spec else {
            return Ok(StoreConfig::Sqlite(
                default_data_dir().join("guestbook.sqlite"),
            ));
        };
        if let Some(path) = spec.strip_prefix("sqlite:") {
            if path.is_empty() {
                return Err(crate::usage(
                    "--store sqlite: needs a path, as in sqlite:/tmp/gb.db",
                ));
            }
            return Ok(StoreConfig::Sqlite(PathBuf::from(path)));
        }
        if let Some(rest) = spec.strip_prefix("redis://") {
            let rest = rest.trim_end_matches('/');
            let (host, port) = match rest.rsplit_once(':') {
                Some((h, p)) => (
                    h,
                    p.parse::<u16>()
                        .map_err(|_| crate::usage(format!("--store {spec}: bad port")))?,
                ),
                None => (rest, 6379),
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if host.is_empty() {
                return Err(crate::usage(format!("--store {spec}: missing host")));
            }
            return Ok(StoreConfig::Redis {
                host: host.to_string(),
                port,
            });
        }
        Err(crate::usage(format!(
            "--store {spec}: expected sqlite:PATH or redis://HOST:PORT"
        )))
    }

    /// Prepares the store once at server start (creates the SQLite schema and directory).
    /// Redis needs nothing and may be down at start: the guestbook then answers 503.
    pub fn prepare(&self) -> anyhow::Result<()> {
        match self {
            StoreConfig::Sqlite(path) => SqliteStore::create(path)
                .map(drop)
                .with_context(|| format!("cannot open the SQLite store at {}", path.display())),
            StoreConfig::Redis { .. } => Ok(()),
        }
    }

    /// Opens a blocking client; a network store must connect by `deadline`.
    pub fn connect(&self, deadline: Instant) -> Result<StoreClient, StoreError> {
        match self {
            StoreConfig::Sqlite(path) => SqliteStore::checkout(path).map(StoreClient::Sqlite),
            StoreConfig::Redis { host, port } => {
                RedisStore::connect(host, *port, deadline).map(StoreClient::Redis)
            }
        }
    }
}

impl std::fmt::Display for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreConfig::Sqlite(p) => write!(f, "sqlite:{}", p.display()),
            StoreConfig::Redis { host, port } => write!(f, "redis://{host}:{port}"),
        }
    }
}

/// The data directory: `$SWEETSPOT_DATA`, else `$XDG_DATA_HOME/sweetspot`, else
/// `~/.local/share/sweetspot`, else the system temp dir; absolute, so it does not depend on
/// the working directory.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SWEETSPOT_DATA").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("sweetspot");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".local/share/sweetspot");
    }
    std::env::temp_dir().join("sweetspot")
}

/// A connected blocking store.
pub enum StoreClient {
    Sqlite(SqliteStore),
    Redis(RedisStore),
}

impl StoreClient {
    /// Counts a visit (when `view.count`) and reads one page of remarks.
    pub fn visit(&mut self, view: View) -> Result<GuestbookPage, StoreError> {
        match self {
            StoreClient::Sqlite(s) => s.visit(view),
            StoreClient::Redis(s) => s.visit(view),
        }
    }

    /// Stores a remark durably.
    pub fn add_remark(&mut self, remark: &Remark) -> Result<(), StoreError> {
        match self {
            StoreClient::Sqlite(s) => s.add_remark(remark),
            StoreClient::Redis(s) => s.add_remark(remark),
        }
    }
}

/// A per-worker store handle that connects on first use and reconnects after a failure; a
/// healthy SQLite connection goes back to the process's pool when the handle is dropped.
pub struct LazyStore {
    config: StoreConfig,
    client: Option<StoreClient>,
}

impl LazyStore {
    pub fn new(config: StoreConfig) -> LazyStore {
        LazyStore {
            config,
            client: None,
        }
    }

    /// Runs `f` on a connected client; on failure the client is dropped so the next call
    /// reconnects.
    pub fn with<T>(
        &mut self,
        f: impl FnOnce(&mut StoreClient) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // The whole call, connecting included, is bounded by the store timeout.
        let deadline = Instant::now() + STORE_TIMEOUT;
        if self.client.is_none() {
            self.client = Some(self.config.connect(deadline)?);
        }
        let client = self.client.as_mut().expect("connected above");
        if let StoreClient::Redis(redis) = client {
            redis.set_deadline(deadline);
        }
        let result = f(client);
        if result.is_err() {
            self.client = None;
        }
        result
    }
}

impl Drop for LazyStore {
    fn drop(&mut self) {
        if let Some(StoreClient::Sqlite(store)) = self.client.take() {
            store.checkin();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_store_urls() {
        assert_eq!(
            StoreConfig::parse(Some("redis://127.0.0.1:6380")).unwrap(),
            StoreConfig::Redis {
                host: "127.0.0.1".into(),
                port: 6380
            }
        );
        assert_eq!(
            StoreConfig::parse(Some("sqlite:/tmp/x.db")).unwrap(),
            StoreConfig::Sqlite("/tmp/x.db".into())
        );
        assert!(StoreConfig::parse(Some("mysql://x")).is_err());
        assert!(StoreConfig::parse(Some("redis://h:notaport")).is_err());
        assert!(StoreConfig::parse(None).is_ok());
    }

    #[test]
    fn sqlite_store_counts_visits_and_keeps_remarks() {
        let dir = std::env::temp_dir().join(format!("sweetspot-store-{}", std::process::id()));
        let path = dir.join("gb.sqlite");
        let config = StoreConfig::Sqlite(path.clone());
        config.prepare().unwrap();
        let mut store = LazyStore::new(config);
        let remark = Remark {
            name: "ann".into(),
            remarks: "<b>hi</b>".into(),
        };
        store.with(|c| c.add_remark(&remark)).unwrap();
        let view = View {
            page: 1,
            count: true,
        };
        let first = store.with(|c| c.visit(view)).unwrap();
        let second = store.with(|c| c.visit(view)).unwrap();
        assert_eq!(first.visitors + 1, second.visitors);
        assert_eq!(second.remarks, vec![remark]);
        let head = View {
            page: 1,
            count: false,
        };
        assert_eq!(
            store.with(|c| c.visit(head)).unwrap().visitors,
            second.visitors
        );
        for i in 0..PAGE_SIZE + 2 {
            let r = Remark {
                name: "n".into(),
                remarks: format!("r{i}"),
            };
            store.with(|c| c.add_remark(&r)).unwrap();
        }
        let newest = store.with(|c| c.visit(head)).unwrap();
        assert_eq!(newest.total, PAGE_SIZE + 3);
        assert_eq!(newest.remarks.len() as u64, PAGE_SIZE);
        assert_eq!(newest.remarks[0].remarks, format!("r{}", PAGE_SIZE + 1));
        let older = store
            .with(|c| {
                c.visit(View {
                    page: 2,
                    count: false,
                })
            })
            .unwrap();
        let older: Vec<&str> = older.remarks.iter().map(|r| r.remarks.as_str()).collect();
        assert_eq!(older, ["r1", "r0", "<b>hi</b>"]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
