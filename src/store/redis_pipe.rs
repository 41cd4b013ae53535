//! Pipelined Redis for the architectures that must never block on the store. [`RedisCodec`]
//! is the sans-IO part: requests encoded into a buffer, fed bytes turned into answers in
//! order (the redis crate encodes and parses; [`resp_frame_len`] finds where a reply ends).
//! [`RedisPipe`] drives it over one non-blocking socket for the event loops and uring; the
//! async architecture drives it over a tokio stream. A store that stops answering fails every
//! waiting request (503) and its connection is replaced.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Instant;

use redis::Value;

use super::redis_store::{
    add_remark_command, check_reply, page_from_replies, visit_pipeline, VISIT_REPLIES,
};
use super::{GuestbookPage, Remark, StoreError, View, STORE_TIMEOUT};

/// What a waiting request asked of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisRequest {
    Visit(View),
    AddRemark(Remark),
}

/// The store's answer to one [`RedisRequest`].
#[derive(Debug)]
pub enum RedisAnswer {
    Page(GuestbookPage),
    Added,
}

struct Waiting<T> {
    tag: T,
    visit: Option<View>,
    replies: Vec<Value>,
    needed: usize,
    submitted: Instant,
}

/// Requests finished by a step, with their answers.
pub type Finished<T> = Vec<(T, Result<RedisAnswer, StoreError>)>;

/// The sans-IO half of a pipelined Redis connection: the command bytes not yet written, the
/// reply bytes not yet matched, and the requests waiting in order; `T` tags each waiter.
pub struct RedisCodec<T> {
    out: Vec<u8>,
    input: Vec<u8>,
    waiting: VecDeque<Waiting<T>>,
}

impl<T> Default for RedisCodec<T> {
    fn default() -> Self {
        RedisCodec {
            out: Vec::new(),
            input: Vec::new(),
            waiting: VecDeque::new(),
        }
    }
}

impl<T> RedisCodec<T> {
    /// Encodes `request` into the output and queues its waiter.
    pub fn push(&mut self, tag: T, request: &RedisRequest, now: Instant) {
        let (visit, needed) = match request {
            RedisRequest::Visit(view) => {
                self.out
                    .extend_from_slice(&visit_pipeline(*view).get_packed_pipeline());
                (Some(*view), VISIT_REPLIES)
            }
            RedisRequest::AddRemark(remark) => {
                self.out
                    .extend_from_slice(&add_remark_command(remark).get_packed_command());
                (None, 1)
            }
        };
        self.waiting.push_back(Waiting {
            tag,
            visit,
            replies: Vec::with_capacity(needed),
            needed,
            submitted: now,
        });
    }

    /// The command bytes not yet written.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// Drops the first `n` output bytes, written.
    pub fn wrote(&mut self, n: usize) {
        self.out.drain(..n);
    }

    /// Whether requests wait for replies.
    pub fn is_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// When the oldest waiting request was submitted.
    pub fn oldest(&self) -> Option<Instant> {
        self.waiting.front().map(|w| w.submitted)
    }

    /// Takes `bytes` read from the store and appends the requests they finish to `done`. An
    /// unparsable reply, or one no request waits for, is an error: the stream is out of step.
    pub fn feed(&mut self, bytes: &[u8], done: &mut Finished<T>) -> Result<(), StoreError> {
        self.input.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(len) = resp_frame_len(&self.input[start..]) {
            let value = redis::parse_redis_value(&self.input[start..start + len])
                .map_err(|e| StoreError(format!("redis: {e}")))?;
            start += len;
            let Some(front) = self.waiting.front_mut() else {
                return Err(StoreError("redis: reply with no request".into()));
            };
            front.replies.push(value);
            if front.replies.len() == front.needed {
                let w = self.waiting.pop_front().expect("front exists");
                done.push((w.tag, answer(w.visit, &w.replies)));
            }
        }
        self.input.drain(..start);
        Ok(())
    }

    /// Fails every waiting request with `e` and forgets the bytes of the broken stream.
    pub fn fail_all(&mut self, e: &StoreError, done: &mut Finished<T>) {
        self.out.clear();
        self.input.clear();
        for w in self.waiting.drain(..) {
            done.push((w.tag, Err(StoreError(e.0.clone()))));
        }
    }
}

/// Pipelined guestbook commands over one non-blocking connection; `T` tags each waiter.
/// Connecting is non-blocking too: commands wait in the codec until the socket is writable.
/// Every request must be answered within [`STORE_TIMEOUT`] of its submission.
pub struct RedisPipe<T> {
    host: String,
    port: u16,
    stream: Option<TcpStream>,
    generation: u64,
    dead: Vec<TcpStream>,
    codec: RedisCodec<T>,
}

impl<T> RedisPipe<T> {
    pub fn new(host: &str, port: u16) -> RedisPipe<T> {
        RedisPipe {
            host: host.to_string(),
            port,
            stream: None,
            generation: 0,
            dead: Vec::new(),
            codec: RedisCodec::default(),
        }
    }

    /// The live socket, if connected, and a number that changes with every new connection.
    pub fn socket(&self) -> Option<(&TcpStream, u64)> {
        self.stream.as_ref().map(|s| (s, self.generation))
    }

    /// Sockets that failed; the loop deregisters them before dropping them.
    pub fn take_dead(&mut self) -> Vec<TcpStream> {
        std::mem::take(&mut self.dead)
    }

    /// Whether unsent command bytes remain.
    pub fn wants_write(&self) -> bool {
        !self.codec.output().is_empty()
    }

    fn connect(&mut self) -> Result<(), StoreError> {
        let addrs = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| StoreError(format!("redis: cannot resolve {}: {e}", self.host)))?;
        let mut last = StoreError(format!("redis: no address for {}", self.host));
        for addr in addrs {
            let io = |e: std::io::Error| StoreError(format!("redis: connect {addr}: {e}"));
            let socket = socket2::Socket::new(
                socket2::Domain::for_address(addr),
                socket2::Type::STREAM,
                None,
            )
            .map_err(io)?;
            socket.set_nonblocking(true).map_err(io)?;
            let _ = socket.set_nodelay(true);
            match socket.connect(&addr.into()) {
                Ok(()) => {}
                // Completes later: the poller reports the socket writable (or failed).
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                Err(e) => {
                    last = io(e);
                    continue;
                }
            }
            self.stream = Some(socket.into());
            self.generation += 1;
            return Ok(());
        }
        Err(last)
    }

    /// Queues a request; the answer comes from a later [`on_ready`](Self::on_ready). Fails at
    /// once when the store cannot be reached.
    pub fn submit(&mut self, tag: T, request: RedisRequest) -> Result<(), StoreError> {
        if self.stream.is_none() {
            self.connect()?;
        }
        self.codec.push(tag, &request, Instant::now());
        Ok(())
    }

    /// When the oldest waiting request is overdue, fails every waiting request (503) and
    /// drops the connection; the loop calls this on every turn.
    pub fn expire(&mut self, now: Instant) -> Finished<T> {
        let mut done = Vec::new();
        if self
            .codec
            .oldest()
            .is_some_and(|t| now >= t + STORE_TIMEOUT)
        {
            let e = StoreError(format!(
                "redis: no answer within {} s",
                STORE_TIMEOUT.as_secs_f64()
            ));
            self.fail_all(e, &mut done);
        }
        done
    }

    /// Writes what it can, reads what is there, and returns the requests now answered. After
    /// a connection failure every waiting request is answered with the error.
    pub fn on_ready(&mut self) -> Finished<T> {
        let mut done = Vec::new();
        if let Err(e) = self.pump(&mut done) {
            self.fail_all(e, &mut done);
        }
        done
    }

    fn pump(&mut self, done: &mut Finished<T>) -> Result<(), StoreError> {
        let io = |e: std::io::Error| StoreError(format!("redis: {e}"));
        let Some(stream) = self.stream.as_mut() else {
            return Ok(());
        };
        while !self.codec.output().is_empty() {
            match stream.write(self.codec.output()) {
                Ok(0) => return Err(StoreError("redis: connection closed".into())),
                Ok(n) => self.codec.wrote(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io(e)),
            }
        }
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => return Err(StoreError("redis: connection closed".into())),
                Ok(n) => self.codec.feed(&chunk[..n], done)?,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io(e)),
            }
        }
    }

    fn fail_all(&mut self, e: StoreError, done: &mut Finished<T>) {
        if let Some(stream) = self.stream.take() {
            self.dead.push(stream);
        }
        self.codec.fail_all(&e, done);
    }
}

fn answer(visit: Option<View>, replies: &[Value]) -> Result<RedisAnswer, StoreError> {
    for r in replies {
        check_reply(r)?;
    }
    match visit {
        Some(view) => page_from_replies(view, replies).map(RedisAnswer::Page),
        None => Ok(RedisAnswer::Added),
    }
}

/// The length of the complete RESP reply at the front of `buf`, or `None` if it is not all
/// there yet.
pub fn resp_frame_len(buf: &[u8]) -> Option<usize> {
    let line_end = buf.windows(2).position(|w| w == b"\r\n")?;
    let header = std::str::from_utf8(&buf[1..line_end]).ok();
    let after = line_end + 2;
    match buf.first()? {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(after),
        b'$' | b'!' | b'=' => {
            let n: i64 = header?.parse().ok()?;
            if n < 0 {
                return Some(after);
            }
            let end = after + n as usize + 2;
            (buf.len() >= end).then_some(end)
        }
        b'*' | b'~' | b'>' | b'%' => {
            let mut n: i64 = header?.parse().ok()?;
            if n < 0 {
                return Some(after);
            }
            if buf[0] == b'%' {
                n *= 2;
            }
            let mut pos = after;
            for _ in 0..n {
                pos += resp_frame_len(&buf[pos..])?;
            }
            Some(pos)
        }
        // Not RESP: treat the line as one reply so the parser reports the error.
        _ => Some(after),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codec_encodes_in_order_and_answers_each_request_once_its_replies_are_in() {
        let mut codec = RedisCodec::default();
        let t0 = Instant::now();
        let view = View {
            page: 1,
            count: true,
        };
        let remark = Remark {
            name: "a".into(),
            remarks: "b".into(),
        };
        codec.push(1, &RedisRequest::Visit(view), t0);
        codec.push(2, &RedisRequest::AddRemark(remark), t0);
        let out = String::from_utf8(codec.output().to_vec()).unwrap();
        let incr = out.find("INCR").unwrap();
        assert!(
            incr < out.find("LLEN").unwrap()
                && out.find("LRANGE").unwrap() < out.find("RPUSH").unwrap()
        );
        codec.wrote(out.len());
        assert!(codec.output().is_empty());
        assert_eq!(codec.oldest(), Some(t0));
        let mut done = Vec::new();
        // The visit's three replies and the post's one, split mid-frame.
        let replies = b":7\r\n:1\r\n*1\r\n$26\r\n{\"name\":\"x\",\"remarks\":\"y\"}\r\n:2\r\n";
        codec.feed(&replies[..9], &mut done).unwrap();
        assert!(done.is_empty());
        codec
            .feed(&replies[9..replies.len() - 2], &mut done)
            .unwrap();
        assert_eq!(done.len(), 1);
        match &done[0] {
            (1, Ok(RedisAnswer::Page(page))) => assert_eq!(page.visitors, 7),
            other => panic!("unexpected {other:?}"),
        }
        codec
            .feed(&replies[replies.len() - 2..], &mut done)
            .unwrap();
        assert!(matches!(done[1], (2, Ok(RedisAnswer::Added))));
        assert!(!codec.is_waiting());
        // A reply nobody waits for means the stream is out of step.
        assert!(codec.feed(b"+OK\r\n", &mut done).is_err());
    }

    #[test]
    fn a_failed_codec_answers_every_waiter_with_the_error() {
        let mut codec = RedisCodec::default();
        let remark = Remark {
            name: "a".into(),
            remarks: "b".into(),
        };
        codec.push(
            "p",
            &RedisRequest::AddRemark(remark.clone()),
            Instant::now(),
        );
        codec.push("q", &RedisRequest::AddRemark(remark), Instant::now());
        let mut done = Vec::new();
        codec.fail_all(&StoreError("gone".into()), &mut done);
        let tags: Vec<_> = done
            .iter()
            .map(|(t, a)| (*t, a.as_ref().err().map(|e| e.0.clone())))
            .collect();
        assert_eq!(
            tags,
            [("p", Some("gone".into())), ("q", Some("gone".into()))]
        );
        assert!(codec.output().is_empty() && !codec.is_waiting());
    }

    #[test]
    fn frames_replies_only_when_complete() {
        assert_eq!(resp_frame_len(b":12\r\n+OK"), Some(5));
        assert_eq!(resp_frame_len(b"$3\r\nab"), None);
        assert_eq!(resp_frame_len(b"$3\r\nabc\r\n"), Some(9));
        assert_eq!(resp_frame_len(b"$-1\r\n"), Some(5));
        let list = b"*2\r\n$1\r\na\r\n$2\r\nbc\r\n";
        assert_eq!(resp_frame_len(list), Some(list.len()));
        assert_eq!(resp_frame_len(&list[..list.len() - 1]), None);
        assert_eq!(resp_frame_len(b"*0\r\n"), Some(4));
    }
}
