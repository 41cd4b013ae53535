//! The study's store: Redis, with a list of remarks and a visitor counter.
//!
//! Each remark is one list element holding a small JSON object (name and text), so names
//! and remarks can carry any character. Commands are built and replies parsed by the redis
//! crate; [`RedisStore`] is the blocking client, `redis_pipe` the event loops' one.

use std::time::{Duration, Instant};

use redis::Value;

use super::{GuestbookPage, Remark, StoreError, View, PAGE_SIZE};

/// The list of remarks.
pub const REMARKS_KEY: &str = "guestbook_remarks";
/// The visitor counter.
pub const VISITORS_KEY: &str = "visitor_count";

/// How long one store call may take in all: connecting, sending, waiting for the reply, and
/// one reconnect (a longer call answers 503).
pub const STORE_TIMEOUT: Duration = Duration::from_secs(2);

fn err(e: redis::RedisError) -> StoreError {
    StoreError(format!("redis: {e}"))
}

/// A blocking Redis connection.
pub struct RedisStore {
    host: String,
    port: u16,
    conn: redis::Connection,
    /// Whether a command has succeeded on `conn`, so a failure means it went stale.
    proven: bool,
    /// When the current call must be over.
    deadline: Instant,
}

/// What is left until `deadline`, or the timeout error once it has passed.
fn time_left(deadline: Instant) -> Result<Duration, StoreError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(StoreError(format!(
            "redis: no answer within {} s",
            STORE_TIMEOUT.as_secs_f64()
        )))
    } else {
        Ok(left)
    }
}

fn open_connection(
    host: &str,
    port: u16,
    deadline: Instant,
) -> Result<redis::Connection, StoreError> {
    let info = redis::ConnectionInfo {
        addr: redis::ConnectionAddr::Tcp(host.to_string(), port),
        redis: Default::default(),
    };
    let client = redis::Client::open(info).map_err(err)?;
    let conn = client
        .get_connection_with_timeout(time_left(deadline)?)
        .map_err(err)?;
    Ok(conn)
}

impl RedisStore {
    /// Connects, within `deadline`.
    pub fn connect(host: &str, port: u16, deadline: Instant) -> Result<RedisStore, StoreError> {
        Ok(RedisStore {
            host: host.to_string(),
            port,
            conn: open_connection(host, port, deadline)?,
            proven: false,
            deadline,
        })
    }

    /// Bounds the next call: it fails once `deadline` passes.
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    /// Points the socket timeouts at what is left of the call. After a failed read the
    /// crate still reads every remaining reply of a pipeline (to keep the connection in
    /// step), each read waiting the full read timeout: so each of the `replies` reads gets
    /// an equal share of what is left.
    fn arm(&self, replies: u32) -> Result<(), StoreError> {
        let left = time_left(self.deadline)?;
        let per_read = (left / replies.max(1)).max(std::time::Duration::from_millis(1));
        self.conn.set_read_timeout(Some(per_read)).map_err(err)?;
        self.conn.set_write_timeout(Some(left)).map_err(err)
    }

    /// Runs `command`. A connection that worked before and is now found dropped (Redis
    /// restarted while this worker was idle) is replaced and the command sent once more: it
    /// never reached the Redis now running, so every worker recovers with the store instead
    /// of each failing its first request.
    fn run<T>(
        &mut self,
        replies: u32,
        command: impl Fn(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        self.arm(replies)?;
        let result = match command(&mut self.conn) {
            Err(e) if self.proven && (e.is_connection_dropped() || e.is_connection_refusal()) => {
                self.proven = false;
                self.conn = open_connection(&self.host, self.port, self.deadline)?;
                self.arm(replies)?;
                command(&mut self.conn)
            }
            other => other,
        };
        self.proven = result.is_ok();
        result.map_err(err)
    }

    pub fn visit(&mut self, view: View) -> Result<GuestbookPage, StoreError> {
        let (visitors, total, list): (Value, Value, Value) =
            self.run(VISIT_REPLIES as u32, |c| visit_pipeline(view).query(c))?;
        page_from_replies(view, &[visitors, total, list])
    }

    pub fn add_remark(&mut self, remark: &Remark) -> Result<(), StoreError> {
        let _: Value = self.run(1, |c| add_remark_command(remark).query(c))?;
        Ok(())
    }
}

/// How many replies [`visit_pipeline`] gets.
pub const VISIT_REPLIES: usize = 3;

/// The commands of one visit: count it (or only read the count), the list's length, and
/// the page's slice of the list (the newest remarks are at its tail).
pub fn visit_pipeline(view: View) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    if view.count {
        pipe.cmd("INCR").arg(VISITORS_KEY);
    } else {
        pipe.cmd("GET").arg(VISITORS_KEY);
    }
    pipe.cmd("LLEN").arg(REMARKS_KEY);
    let skip = i64::try_from(view.skip()).unwrap_or(i64::MAX / 2);
    pipe.cmd("LRANGE")
        .arg(REMARKS_KEY)
        .arg(-(skip + PAGE_SIZE as i64))
        .arg(-(skip + 1));
    pipe
}

/// The command that stores one remark.
pub fn add_remark_command(remark: &Remark) -> redis::Cmd {
    let entry = serde_json::to_string(remark).expect("a remark serialises");
    let mut cmd = redis::cmd("RPUSH");
    cmd.arg(REMARKS_KEY).arg(entry);
    cmd
}

/// Builds a page from the [`VISIT_REPLIES`] replies to [`visit_pipeline`].
pub fn page_from_replies(view: View, replies: &[Value]) -> Result<GuestbookPage, StoreError> {
    let [visitors, total, list] = replies else {
        return Err(StoreError("redis: wrong number of replies".into()));
    };
    let visitors = match visitors {
        Value::Int(n) => *n as u64,
        Value::Nil => 0,
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| StoreError("redis: visitor count is not a number".into()))?,
        other => {
            return Err(StoreError(format!(
                "redis: unexpected visitor count reply {other:?}"
            )))
        }
    };
    let total = match total {
        Value::Int(n) => *n as u64,
        other => {
            return Err(StoreError(format!(
                "redis: unexpected LLEN reply {other:?}"
            )))
        }
    };
    // LRANGE with a start before the list's head clamps it to the head: past the last page
    // that would repeat the oldest remarks, so such a page is empty.
    if view.skip() >= total {
        return Ok(GuestbookPage {
            visitors,
            remarks: Vec::new(),
            page: view.page,
            total,
        });
    }
    let items = match list {
        Value::Array(items) => items,
        other => {
            return Err(StoreError(format!(
                "redis: unexpected LRANGE reply {other:?}"
            )))
        }
    };
    let remarks = items
        .iter()
        .rev()
        .filter_map(|v| match v {
            Value::BulkString(bytes) => serde_json::from_slice::<Remark>(bytes).ok(),
            _ => None,
        })
        .collect();
    Ok(GuestbookPage {
        visitors,
        remarks,
        page: view.page,
        total,
    })
}

/// Turns an error reply into a [`StoreError`].
pub fn check_reply(value: &Value) -> Result<(), StoreError> {
    match value {
        Value::ServerError(e) => Err(StoreError(format!("redis: {e:?}"))),
        _ => Ok(()),
    }
}
