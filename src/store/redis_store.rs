//! The study's store: Redis, with a list of remarks and a visitor counter.
//!
//! Each remark is one list element holding a small JSON object (name and text), so names
//! and remarks can carry any character. Commands are built and replies parsed by the redis
//! crate; [`RedisStore`] is the blocking client, `redis_pipe` the event loops' one.

use std::time::Duration;

use redis::Value;

use super::{GuestbookPage, Remark, StoreError};

/// The list of remarks.
pub const REMARKS_KEY: &str = "guestbook_remarks";
/// The visitor counter.
pub const VISITORS_KEY: &str = "visitor_count";

const TIMEOUT: Duration = Duration::from_secs(2);

fn err(e: redis::RedisError) -> StoreError {
    StoreError(format!("redis: {e}"))
}

/// A blocking Redis connection.
pub struct RedisStore {
    conn: redis::Connection,
}

impl RedisStore {
    pub fn connect(host: &str, port: u16) -> Result<RedisStore, StoreError> {
        let info = redis::ConnectionInfo {
            addr: redis::ConnectionAddr::Tcp(host.to_string(), port),
            redis: Default::default(),
        };
        let client = redis::Client::open(info).map_err(err)?;
        let conn = client.get_connection_with_timeout(TIMEOUT).map_err(err)?;
        conn.set_read_timeout(Some(TIMEOUT)).map_err(err)?;
        conn.set_write_timeout(Some(TIMEOUT)).map_err(err)?;
        Ok(RedisStore { conn })
    }

    pub fn visit(&mut self) -> Result<GuestbookPage, StoreError> {
        let (visitors, list): (Value, Value) =
            visit_pipeline().query(&mut self.conn).map_err(err)?;
        page_from_replies(&visitors, &list)
    }

    pub fn add_remark(&mut self, remark: &Remark) -> Result<(), StoreError> {
        let _: Value = add_remark_command(remark)
            .query(&mut self.conn)
            .map_err(err)?;
        Ok(())
    }
}

/// The commands of one visit: count it, read the list.
pub fn visit_pipeline() -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.cmd("INCR").arg(VISITORS_KEY);
    pipe.cmd("LRANGE").arg(REMARKS_KEY).arg(0).arg(-1);
    pipe
}

/// The command that stores one remark.
pub fn add_remark_command(remark: &Remark) -> redis::Cmd {
    let entry = serde_json::to_string(remark).expect("a remark serialises");
    let mut cmd = redis::cmd("RPUSH");
    cmd.arg(REMARKS_KEY).arg(entry);
    cmd
}

/// Builds a page from the replies to [`visit_pipeline`].
pub fn page_from_replies(visitors: &Value, list: &Value) -> Result<GuestbookPage, StoreError> {
    let visitors = match visitors {
        Value::Int(n) => *n as u64,
        other => {
            return Err(StoreError(format!(
                "redis: unexpected INCR reply {other:?}"
            )))
        }
    };
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
        .filter_map(|v| match v {
            Value::BulkString(bytes) => serde_json::from_slice::<Remark>(bytes).ok(),
            _ => None,
        })
        .collect();
    Ok(GuestbookPage { visitors, remarks })
}

/// Turns an error reply into a [`StoreError`].
pub fn check_reply(value: &Value) -> Result<(), StoreError> {
    match value {
        Value::ServerError(e) => Err(StoreError(format!("redis: {e:?}"))),
        _ => Ok(()),
    }
}
