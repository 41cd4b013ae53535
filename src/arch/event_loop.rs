//! The single-threaded event loop that poll, epoll, reactors (one per thread) and hybrid share.
//! One thread owns every connection; readiness comes from a [`Poller`] (poll(2) or epoll(7),
//! one file each). It never blocks on a wait: `/sleep` is a timer of the loop and Redis a
//! non-blocking [`RedisPipe`]. CPU work (`/fib`) and SQLite run inline and stall the loop (the
//! lesson these architectures teach) unless the loop has a [`WorkerPool`] (hybrid), whose
//! replies come back through its eventfd. Requests are answered by [`pipeline::answer`], in
//! order; running out of file descriptors pauses accepting for a moment and is logged. Of the
//! timers due, a turn runs the work for [`super::TURN_CPU`] at most before it polls again.

use crate::deadlines::DueHeap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pipeline::{self, Deadlines, Ending, Pipeline, PipelineHost, MAX_BUFFERED};
use super::pool::WorkerPool;
use super::request::{
    cancel_check, is_resource_exhaustion, LINGER_BYTES, LINGER_TIME, MAX_QUEUED_OUTPUT,
};
use super::tls::Wire;
use super::{Protocol, ServerContext, DRAIN};
use crate::app::{App, Route};
use crate::http::Response;
use crate::store::redis_pipe::{Finished, RedisPipe};
use crate::store::{LazyStore, StoreConfig};

/// What a registration waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    pub read: bool,
    pub write: bool,
}

/// One readiness report.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub token: usize,
    pub readable: bool,
    pub writable: bool,
    /// The peer is gone both ways (HUP) or the socket has an error: reported whatever the
    /// interest, so it must end the connection or the loop would spin.
    pub hangup: bool,
}

/// A readiness backend: what poll.rs and epoll.rs each provide.
pub trait Poller {
    fn add(&mut self, fd: BorrowedFd<'_>, token: usize, interest: Interest) -> io::Result<()>;
    fn modify(&mut self, fd: BorrowedFd<'_>, token: usize, interest: Interest) -> io::Result<()>;
    fn delete(&mut self, fd: BorrowedFd<'_>) -> io::Result<()>;
    /// Fills `events` with what is ready, waiting at most `timeout`.
    fn wait(&mut self, events: &mut Vec<Event>, timeout: Duration) -> io::Result<()>;
}

/// The listener's token (a backend may register it specially, see `EpollPoller`).
pub const LISTENER: usize = usize::MAX;
const REDIS: usize = usize::MAX - 1;
/// The worker pool's completion eventfd.
const POOL: usize = usize::MAX - 2;
/// The longest the loop sleeps before re-checking the stop flag and idle connections.
const TICK: Duration = Duration::from_millis(200);
/// File chunks one flush reads at most before the loop serves others.
const CHUNKS_PER_FLUSH: usize = 16;

struct Conn {
    stream: Wire,
    generation: u64,
    pipeline: Pipeline,
    /// How much of the pipeline's output has been written (dropped in batches, as its
    /// answered input).
    sent: usize,
    /// Its idle, write-stall and lingering deadlines.
    deadlines: Deadlines,
    /// Answering stopped because the output was full, with input left to answer.
    backlogged: bool,
    peer_closed: bool,
    interest: Interest,
}

impl Conn {
    /// Output queued and not yet written.
    fn queued(&self) -> usize {
        self.pipeline.out.len() - self.sent
    }
}

/// A wait of the loop: when it is due, what is left of its route starts.
struct Timer {
    token: usize,
    generation: u64,
    then: Route,
}

/// The guestbook backend of the loop.
enum LoopStore {
    /// Embedded: called inline.
    Blocking(LazyStore),
    /// Redis: non-blocking, replies matched to (token, generation).
    Redis {
        pipe: RedisPipe<(usize, u64)>,
        registered: Option<(u64, Interest)>,
    },
}

struct EventLoop<P: Poller> {
    poller: P,
    listener: TcpListener,
    listening: bool,
    accept_paused_until: Option<Instant>,
    ctx: Arc<ServerContext>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_generation: u64,
    timers: DueHeap<Timer>,
    store: LoopStore,
    last_idle_sweep: Instant,
    /// Set when a stop is first seen: connections still open then are dropped.
    drain_deadline: Option<Instant>,
    extras: Extras,
    /// When the current turn's wait returned: the activity time of what the turn reads (one
    /// clock read per turn, not several per request).
    now: Instant,
    /// Where every read of the loop lands before it is appended to its connection's input
    /// (kept, so a read does not first zero 16 KiB of stack).
    read_buf: Box<[u8]>,
}

/// Bytes read from a socket per call.
const READ_CHUNK: usize = 16 * 1024;

/// What a loop may be given beyond the poll and epoll servers' plain loop.
#[derive(Default)]
pub struct Extras {
    /// Counts the connections this loop accepts (reactors).
    pub accepted: Option<Arc<AtomicU64>>,
    /// Runs `/fib` and the embedded store's calls off the loop (hybrid); without it they run
    /// inline.
    pub pool: Option<WorkerPool>,
}

/// Runs the event loop on `poller` until the server stops and its connections drain.
pub fn run<P: Poller>(
    poller: P,
    listener: TcpListener,
    ctx: Arc<ServerContext>,
) -> anyhow::Result<()> {
    run_with(poller, listener, ctx, Extras::default())
}

/// [`run`], with the [`Extras`] of reactors or hybrid.
pub fn run_with<P: Poller>(
    poller: P,
    listener: TcpListener,
    ctx: Arc<ServerContext>,
    extras: Extras,
) -> anyhow::Result<()> {
    let store = match &ctx.app.store {
        StoreConfig::Redis { host, port } => LoopStore::Redis {
            pipe: RedisPipe::new(host, *port),
            registered: None,
        },
        other => LoopStore::Blocking(LazyStore::new(other.clone())),
    };
    let mut lp = EventLoop {
        poller,
        listener,
        listening: false,
        accept_paused_until: None,
        ctx,
        conns: Vec::new(),
        free: Vec::new(),
        next_generation: 0,
        timers: DueHeap::default(),
        store,
        last_idle_sweep: Instant::now(),
        drain_deadline: None,
        extras,
        now: Instant::now(),
        read_buf: vec![0; READ_CHUNK].into_boxed_slice(),
    };
    if let Some(pool) = &lp.extras.pool {
        let read = Interest {
            read: true,
            write: false,
        };
        lp.poller.add(pool.done_fd(), POOL, read)?;
    }
    lp.listen(true)?;
    lp.run()
}

impl<P: Poller> EventLoop<P> {
    fn listen(&mut self, on: bool) -> io::Result<()> {
        if on != self.listening {
            let fd = self.listener.as_fd();
            if on {
                self.poller.add(
                    fd,
                    LISTENER,
                    Interest {
                        read: true,
                        write: false,
                    },
                )?;
            } else {
                self.poller.delete(fd)?;
            }
            self.listening = on;
        }
        Ok(())
    }

    fn run(&mut self) -> anyhow::Result<()> {
        let mut events = Vec::with_capacity(1024);
        loop {
            // A fresh clock only for what needs one (a timer to wait for, a drain, paused
            // accepts); otherwise the last turn's time serves, and a busy loop reads the clock
            // once per turn.
            let now = if self.timers.is_empty()
                && self.accept_paused_until.is_none()
                && !self.ctx.stopping()
            {
                self.now
            } else {
                Instant::now()
            };
            if self.ctx.stopping() {
                let deadline = match self.drain_deadline {
                    Some(deadline) => deadline,
                    None => {
                        let _ = self.listen(false);
                        self.accept_paused_until = None;
                        *self.drain_deadline.insert(now + DRAIN)
                    }
                };
                self.close_idle(Duration::ZERO);
                if self.conns.iter().all(Option::is_none) || now >= deadline {
                    return Ok(());
                }
            }
            if let Some(until) = self.accept_paused_until {
                if now >= until {
                    self.accept_paused_until = None;
                    self.listen(true)?;
                }
            }
            let mut timeout = TICK;
            if let Some(due) = self.timers.next_at() {
                timeout = timeout.min(due.saturating_duration_since(now));
            }
            events.clear();
            self.poller.wait(&mut events, timeout)?;
            self.now = Instant::now();
            for ev in &events {
                match ev.token {
                    LISTENER => self.accept_all(),
                    REDIS => self.redis_ready(),
                    POOL => self.pool_ready(),
                    token => self.conn_ready(token, ev),
                }
            }
            self.fire_timers();
            self.expire_redis();
            if self.now.saturating_duration_since(self.last_idle_sweep) >= pipeline::SWEEP_EVERY {
                self.last_idle_sweep = self.now;
                self.close_idle(self.ctx.idle_timeout);
            }
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if let Some(accepted) = &self.extras.accepted {
                        accepted.fetch_add(1, Ordering::Relaxed);
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    self.insert(stream);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_resource_exhaustion(&e) => {
                    eprintln!(
                        "sweetspot: accept: {e} with {} connections; pausing accepts",
                        self.conns.iter().flatten().count()
                    );
                    if self.listen(false).is_ok() {
                        self.accept_paused_until =
                            Some(Instant::now() + Duration::from_millis(100));
                    }
                    return;
                }
                Err(_) => return,
            }
        }
    }

    fn insert(&mut self, stream: TcpStream) {
        let token = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let interest = Interest {
            read: true,
            write: false,
        };
        let Ok(stream) = Wire::new(stream, self.ctx.tls.as_ref()) else {
            self.free.push(token);
            return;
        };
        if self
            .poller
            .add(stream.tcp().as_fd(), token, interest)
            .is_err()
        {
            self.free.push(token);
            return;
        }
        self.next_generation += 1;
        self.conns[token] = Some(Conn {
            stream,
            generation: self.next_generation,
            pipeline: Pipeline::default(),
            sent: 0,
            deadlines: Deadlines::new(Instant::now()),
            backlogged: false,
            peer_closed: false,
            interest,
        });
    }

    fn close(&mut self, token: usize) {
        if let Some(conn) = self.conns[token].take() {
            let _ = self.poller.delete(conn.stream.tcp().as_fd());
            self.free.push(token);
            if let Some(pool) = &mut self.extras.pool {
                // Work still queued for a connection that is gone is skipped, not run.
                pool.cancel((token, conn.generation));
            }
        }
    }

    fn conn_ready(&mut self, token: usize, ev: &Event) {
        let now = self.now;
        let Some(conn) = self.conns.get_mut(token).and_then(Option::as_mut) else {
            return;
        };
        if conn.deadlines.lingering.is_some() {
            self.linger_read(token);
            return;
        }
        if ev.readable && !conn.peer_closed && conn.queued() < MAX_QUEUED_OUTPUT {
            let chunk = &mut self.read_buf;
            loop {
                match conn.stream.read(chunk) {
                    Ok(0) => {
                        conn.peer_closed = true;
                        break;
                    }
                    Ok(n) => {
                        conn.pipeline.input.extend_from_slice(&chunk[..n]);
                        conn.deadlines.last_active = now;
                        // A short read drained the socket: no second read to hear WouldBlock
                        // (the poll is level-triggered, so bytes that come later wake it).
                        if n < chunk.len() || conn.pipeline.unanswered() > MAX_BUFFERED {
                            break;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => {
                        self.close(token);
                        return;
                    }
                }
            }
            if self.ctx.protocol == Protocol::Http {
                conn.pipeline.observe(now);
            }
            if conn.pipeline.pending.is_some() && conn.pipeline.unanswered() > MAX_BUFFERED {
                self.close(token);
                return;
            }
        }
        if ev.hangup && conn.peer_closed {
            // Nothing more can be read or delivered.
            self.close(token);
            return;
        }
        self.process(token);
    }

    /// Answers what can be answered now, then writes; once a streamed file is done, answers
    /// the requests that waited behind it.
    fn process(&mut self, token: usize) {
        loop {
            self.answer(token);
            let file_done = self.flush(token);
            // Output drained in one go leaves no event to resume a backlog: resume it here.
            let room = self.conns[token]
                .as_ref()
                .is_some_and(|c| c.backlogged && c.queued() < MAX_QUEUED_OUTPUT);
            if !file_done && !room {
                break;
            }
        }
    }

    /// Answers what can be answered now into the connection's output.
    fn answer(&mut self, token: usize) {
        let ctx = Arc::clone(&self.ctx);
        let Some(conn) = self.conns[token].as_mut() else {
            return;
        };
        conn.backlogged = false;
        if pipeline::answer(self, token, &ctx) {
            if let Some(conn) = self.conns[token].as_mut() {
                conn.backlogged = true;
            }
        }
    }

    /// Reads and drops what a lingering connection still sends; closes it at its end, or
    /// past [`LINGER_BYTES`].
    fn linger_read(&mut self, token: usize) {
        let Some(conn) = self.conns[token].as_mut() else {
            return;
        };
        let Some((_, discarded)) = conn.deadlines.lingering.as_mut() else {
            return;
        };
        let chunk = &mut self.read_buf;
        loop {
            match conn.stream.read(chunk) {
                Ok(n) if n > 0 && *discarded + n < LINGER_BYTES => *discarded += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                _ => {
                    self.close(token);
                    return;
                }
            }
        }
    }

    /// Starts the work of a route: returns the response if it is ready now, or `None` when
    /// it will come from a timer or the store, or when the work was cancelled (a `/fib`
    /// whose client hung up, or past the drain deadline): the connection is closed then.
    fn start(&mut self, token: usize, generation: u64, route: Route) -> Option<Response> {
        match route {
            Route::Ready(resp) => Some(resp),
            Route::Fib(_) if self.extras.pool.is_some() => self.offload(token, generation, route),
            // A blocking wait holds whichever thread runs it: the pool's, else the loop.
            Route::Work(w) if w.blocking && self.extras.pool.is_some() => {
                self.offload(token, generation, route)
            }
            Route::Work(w) if w.blocking && !w.wait_left().is_zero() => {
                std::thread::sleep(w.wait_left());
                self.start(token, generation, Route::Work(w.after_wait()))
            }
            Route::Sleep(_) | Route::Work(_) if !route.wait().is_zero() => {
                self.timers.push(
                    Instant::now() + route.wait(),
                    Timer {
                        token,
                        generation,
                        then: App::after_wait(route),
                    },
                );
                None
            }
            Route::Sleep(ms) => Some(App::sleep_done(ms)),
            Route::Work(_) if self.extras.pool.is_some() => self.offload(token, generation, route),
            Route::Fib(_) | Route::Work(_) => self.compute_inline(token, route),
            Route::GuestbookView(_) | Route::GuestbookPost(_) => match &mut self.store {
                LoopStore::Blocking(_) if self.extras.pool.is_some() => {
                    self.offload(token, generation, route)
                }
                LoopStore::Blocking(store) => {
                    let resp = self.ctx.app.complete(route, store, &mut || false);
                    self.now = Instant::now();
                    resp
                }
                LoopStore::Redis { pipe, .. } => {
                    let request =
                        App::store_request(route).expect("only guestbook routes reach the store");
                    match pipe.submit((token, generation), request) {
                        Ok(()) => {
                            self.redis_ready();
                            None
                        }
                        Err(e) => Some(App::guestbook_page(Err(e))),
                    }
                }
            },
        }
    }

    /// Does a route's CPU work inline, stalling the loop; closes the connection when the work
    /// was cancelled (its client hung up, or the drain deadline passed), and moves the turn's
    /// clock past it (it may have taken seconds).
    fn compute_inline(&mut self, token: usize, route: Route) -> Option<Response> {
        let fd = self.conns[token].as_ref()?.stream.tcp().as_raw_fd();
        let resp = App::compute(route, &mut cancel_check(fd, &self.ctx, self.drain_deadline));
        if resp.is_none() {
            self.close(token);
        }
        self.now = Instant::now();
        resp
    }

    /// Hands `route` to the worker pool; its reply comes back through [`Self::pool_ready`].
    fn offload(&mut self, token: usize, generation: u64, route: Route) -> Option<Response> {
        let fd = self.conns[token].as_ref()?.stream.tcp().as_raw_fd();
        let pool = self.extras.pool.as_mut().expect("offload needs a pool");
        pool.submit((token, generation), route, fd);
        None
    }

    /// Delivers the replies the worker pool has finished.
    fn pool_ready(&mut self) {
        let Some(pool) = &mut self.extras.pool else {
            return;
        };
        for ((token, generation), resp) in pool.take_done() {
            match resp {
                Some(resp) => self.complete(token, generation, resp),
                // A `/fib` that gave up: no reply, and the connection closes.
                None => {
                    let live = self.conns.get(token).and_then(Option::as_ref);
                    if live.is_some_and(|c| c.generation == generation) {
                        self.close(token);
                    }
                }
            }
        }
    }

    /// Delivers the reply of a pending request from a timer or the store, then carries on
    /// with the connection's next requests.
    fn complete(&mut self, token: usize, generation: u64, resp: Response) {
        let live = self.conns.get(token).and_then(Option::as_ref);
        if live.is_some_and(|c| c.generation == generation && c.pipeline.pending.is_some()) {
            self.deliver(token, &resp);
            self.process(token);
        }
    }

    /// Writes the reply of the connection's pending request into its output.
    fn deliver(&mut self, token: usize, resp: &Response) {
        if let Some(conn) = self.conns[token].as_mut() {
            conn.pipeline.deliver(resp, &self.ctx.served);
        }
    }

    /// Writes what the socket takes, refilling from a streamed file (at most
    /// [`CHUNKS_PER_FLUSH`] chunks, so one fast client cannot hold the loop); returns true
    /// when a file body has just been sent whole.
    fn flush(&mut self, token: usize) -> bool {
        let Some(conn) = self.conns[token].as_mut() else {
            return false;
        };
        let Some((written, file_done)) = write_out(conn) else {
            self.close(token);
            return false;
        };
        settle_output(conn, written);
        // (`out` is empty exactly when nothing is queued: `sent` has caught up and both reset.)
        let ending = conn.pipeline.ending(conn.queued(), conn.peer_closed);
        if ending == Some(Ending::Linger) {
            // The error reply is out: stop sending, keep reading until the client is done.
            let read_only = Interest {
                read: true,
                write: false,
            };
            if conn.stream.close_write().is_err()
                || (conn.interest != read_only
                    && self
                        .poller
                        .modify(conn.stream.tcp().as_fd(), token, read_only)
                        .is_err())
            {
                self.close(token);
                return false;
            }
            conn.interest = read_only;
            conn.deadlines.lingering = Some((Instant::now() + LINGER_TIME, 0));
            return false;
        }
        if ending == Some(Ending::Close) {
            self.close(token);
            return false;
        }
        let want = Interest {
            read: !conn.peer_closed
                && !conn.pipeline.close_after_flush
                && conn.queued() < MAX_QUEUED_OUTPUT,
            write: !conn.pipeline.out.is_empty()
                || conn.pipeline.file.is_some()
                || conn.stream.pending(),
        };
        if want != conn.interest {
            if self
                .poller
                .modify(conn.stream.tcp().as_fd(), token, want)
                .is_err()
            {
                self.close(token);
                return false;
            }
            conn.interest = want;
        }
        file_done
    }

    fn fire_timers(&mut self) {
        if self.timers.is_empty() {
            return;
        }
        let now = Instant::now();
        let until = now + super::TURN_CPU;
        while let Some((_, t)) = self.timers.pop_due(now) {
            let live = self.conns[t.token]
                .as_ref()
                .is_some_and(|c| c.generation == t.generation);
            if let Some(resp) = live
                .then(|| self.start(t.token, t.generation, t.then))
                .flatten()
            {
                self.complete(t.token, t.generation, resp);
            }
            if Instant::now() >= until {
                return;
            }
        }
    }

    fn redis_ready(&mut self) {
        self.redis_step(|pipe| pipe.on_ready());
    }

    /// Answers 503 to Redis calls past the store timeout.
    fn expire_redis(&mut self) {
        self.redis_step(|pipe| pipe.expire(Instant::now()));
    }

    fn redis_step(
        &mut self,
        step: impl FnOnce(&mut RedisPipe<(usize, u64)>) -> Finished<(usize, u64)>,
    ) {
        let LoopStore::Redis { pipe, .. } = &mut self.store else {
            return;
        };
        let finished = step(pipe);
        self.sync_redis_registration();
        for ((token, generation), answer) in finished {
            let resp = App::store_answered(answer);
            self.complete(token, generation, resp);
        }
    }

    /// Keeps the poller's view of the Redis socket in step with the pipe: dead sockets are
    /// deregistered before they close, a new one is added, write interest follows the
    /// unsent bytes.
    fn sync_redis_registration(&mut self) {
        let LoopStore::Redis { pipe, registered } = &mut self.store else {
            return;
        };
        for dead in pipe.take_dead() {
            let _ = self.poller.delete(dead.as_fd());
            *registered = None;
        }
        let Some((socket, generation)) = pipe.socket() else {
            return;
        };
        let want = Interest {
            read: true,
            write: pipe.wants_write(),
        };
        let result = match *registered {
            Some((g, i)) if g == generation && i == want => Ok(()),
            Some((g, _)) if g == generation => self.poller.modify(socket.as_fd(), REDIS, want),
            _ => self.poller.add(socket.as_fd(), REDIS, want),
        };
        match result {
            Ok(()) => *registered = Some((generation, want)),
            Err(e) => eprintln!("sweetspot: cannot watch the redis socket: {e}"),
        }
    }

    /// Closes connections with nothing in flight that have been silent for `idle`, and those
    /// whose queued output has not moved for the write timeout.
    fn close_idle(&mut self, idle: Duration) {
        let write_timeout = self.ctx.timeouts.write;
        for token in 0..self.conns.len() {
            let now = Instant::now();
            let expired = self.conns[token].as_ref().is_some_and(|c| {
                c.deadlines
                    .expired(c.pipeline.idle(c.queued()), idle, write_timeout, now)
            });
            if expired {
                self.close(token);
            }
        }
        self.answer_late_requests();
    }

    /// Answers 408 and closes connections whose request head (or body) missed its deadline.
    /// While the server is the one holding a connection up (pending work, a file streaming,
    /// output queued) its next request is not timed: its clock restarts once the server is
    /// ready for it, and no 408 can land inside another reply.
    fn answer_late_requests(&mut self) {
        if self.ctx.protocol != Protocol::Http {
            return;
        }
        let now = Instant::now();
        for token in 0..self.conns.len() {
            let Some(conn) = self.conns[token].as_mut() else {
                continue;
            };
            let queued = conn.queued();
            if conn.pipeline.time_out_late_request(
                queued,
                &self.ctx.timeouts,
                &self.ctx.served,
                now,
            ) {
                self.flush(token);
            }
        }
    }
}

/// Writes what the socket takes, refilling from a streamed file (at most
/// [`CHUNKS_PER_FLUSH`] chunks); returns the bytes written and whether a file body has just
/// been sent whole, or `None` when the connection is dead (a write failed, or the file shrank
/// or failed and its Content-Length cannot be met).
#[inline]
fn write_out(conn: &mut Conn) -> Option<(usize, bool)> {
    let mut written = 0;
    let mut file_done = false;
    let mut chunks = 0;
    'writing: loop {
        while conn.sent < conn.pipeline.out.len() {
            match conn.stream.write(&conn.pipeline.out[conn.sent..]) {
                Ok(0) => return None,
                Ok(n) => {
                    conn.sent += n;
                    written += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break 'writing,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        let Some((file, offset)) = conn.pipeline.file.as_mut() else {
            break;
        };
        if chunks == CHUNKS_PER_FLUSH {
            break;
        }
        chunks += 1;
        conn.pipeline.out.clear();
        conn.sent = 0;
        match file.read_chunk(*offset, &mut conn.pipeline.out) {
            Ok(n) if n > 0 => {
                *offset += n as u64;
                if *offset >= file.len {
                    conn.pipeline.file = None;
                    file_done = true;
                }
            }
            // The file shrank or failed: its Content-Length cannot be met.
            _ => return None,
        }
    }
    // TLS: ciphertext rustls holds goes out as far as the socket takes it (the rest at the
    // next writable turn: the interest asks for one while any is pending).
    if conn.stream.pending() && conn.stream.push().is_err() {
        return None;
    }
    Some((written, file_done))
}

/// After a write: drops what was sent (compacting a half-sent buffer), and keeps the write
/// stall and idle clocks.
#[inline]
fn settle_output(conn: &mut Conn, written: usize) {
    if conn.sent == conn.pipeline.out.len() {
        conn.pipeline.out.clear();
        conn.sent = 0;
        conn.deadlines.stalled_since = None;
    } else {
        if conn.sent >= conn.pipeline.out.len() / 2 {
            conn.pipeline.out.drain(..conn.sent);
            conn.sent = 0;
        }
        if written > 0 || conn.deadlines.stalled_since.is_none() {
            conn.deadlines.stalled_since = Some(Instant::now());
        }
    }
    if written > 0 {
        // A fresh clock: inline CPU work earlier in this turn may have taken seconds.
        conn.deadlines.last_active = Instant::now();
    }
}

impl<P: Poller> PipelineHost for EventLoop<P> {
    type Id = usize;

    fn pipeline(&mut self, token: usize) -> Option<(&mut Pipeline, usize)> {
        let conn = self.conns[token].as_mut()?;
        let queued = conn.queued();
        Some((&mut conn.pipeline, queued))
    }

    fn start(&mut self, token: usize, route: Route) -> Option<Response> {
        let generation = self.conns[token].as_ref()?.generation;
        EventLoop::start(self, token, generation, route)
    }

    fn now(&self) -> Instant {
        Instant::now()
    }
}
