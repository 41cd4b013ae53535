//! HTTP/2 load: `--h2c` (cleartext, prior knowledge), or `https://` when the server picks `h2`
//! by ALPN. A worker thread runs a tokio current-thread runtime; each connection is our own
//! client ([`wire`] says why not the `h2` crate's, [`conn`] moves its bytes), and carries
//! `--streams M` request loops. Each loop is one sender to the run's [`SendPolicy`]:
//! closed loop, a ticket a request (count), or its own intended times at R / (C x M) (rate,
//! coordinated omission corrected as over HTTP/1.1), so plans, `--urls`, the time series and
//! the reports are the HTTP/1.1 engine's, counted by the same [`Recorder`]. A stream that finds
//! the server's `MAX_CONCURRENT_STREAMS` full waits in a gate of ours, timed (its wait is
//! inside its latency and reported apart, see [`crate::load::stats::h2`]), so a server never
//! sees more streams than it allows. GOAWAY and RST_STREAM are counted; a stream never
//! answered is reset at the timeout; what is in flight at the end is censored.

pub mod conn;
pub mod hpack;
pub mod request;
pub mod wire;

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, Semaphore, SemaphorePermit};

use crate::deadlines::{Deadline, PreciseTimers};
use crate::load::engine::policy::{Decision, Schedule, SendPolicy};
use crate::load::engine::recorder::{Answer, InFlight, Recorder};
use crate::load::engine::transport::TlsConnector;
use crate::load::engine::{
    attach_views, drain_grace, unsent_limit, RunPlan, WorkerShare, CONNECT_RETRY_DELAY,
};
use crate::load::error::FailureKind;
use crate::load::stats::h2::H2Counts;
use crate::load::stats::ThreadStats;
use conn::Conn;
pub use request::H2Requests;
use wire::Lost;

/// How often the worker ticks its interval views and looks at the stop flag.
const TICK: Duration = Duration::from_millis(5);

/// What every HTTP/2 worker of a run shares.
pub struct H2Plan {
    pub requests: H2Requests,
    /// `https://`: the TLS client (ALPN `h2` first) and the name to check.
    pub tls: Option<TlsConnector>,
    /// Streams per connection.
    pub streams: usize,
}

/// Runs one HTTP/2 worker to the end of its share (see the module header).
pub fn run_worker(
    plan: &RunPlan<'_>,
    h2: &H2Plan,
    share: WorkerShare,
    completed: &AtomicU64,
) -> io::Result<ThreadStats> {
    crate::load::engine::pin_worker(plan.config, share.index);
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    if nap_before_park(plan, h2, &share) {
        // As the HTTP/1.1 engine naps (see `crate::load::engine::NAP`): before the thread
        // blocks for events, a short sleep lets responses gather, one wakeup for several.
        builder.on_thread_park(|| std::thread::sleep(crate::load::engine::NAP));
    }
    let runtime = builder.build()?;
    let worker = Worker::new(plan, h2, &share);
    let window_end = runtime.block_on(async {
        if let Some(timers) = PreciseTimers::start() {
            let _ = worker.timers.set(timers);
        }
        let connections = all((0..share.connections)
            .map(|i| worker.connection(i))
            .collect());
        let (_, end) = tokio::join!(connections, worker.control(completed));
        end
    });
    Ok(worker.finish(window_end))
}

/// Whether a worker naps before it waits for events: in closed and count modes, with many
/// requests in flight ([`crate::load::engine::NAP_MIN_CONNECTIONS`] streams or more); a rate
/// mode's sends go at their own times.
fn nap_before_park(plan: &RunPlan<'_>, h2: &H2Plan, share: &WorkerShare) -> bool {
    !matches!(plan.config.mode, crate::load::Mode::Rate { .. })
        && share.connections * h2.streams >= crate::load::engine::NAP_MIN_CONNECTIONS
}

/// One loop's place in the policy.
struct Sender {
    schedule: Schedule,
    /// When its last answer came (it had room from then on).
    room_since: Instant,
}

/// The policy and the counts the loops of a worker share (one thread: a `RefCell`, never
/// held across an await).
struct State<'p> {
    recorder: Recorder,
    policy: SendPolicy<'p>,
    counts: H2Counts,
}

struct Worker<'p, 'a> {
    plan: &'p RunPlan<'a>,
    h2: &'p H2Plan,
    first_connection: usize,
    state: RefCell<State<'p>>,
    senders: Vec<RefCell<Sender>>,
    /// Each loop's bound on the request it waits for.
    watches: Vec<Watch>,
    /// Each connection's place in the `--urls` rotation (its streams take turns, as an
    /// HTTP/1.1 connection's requests do).
    lines: Vec<Cell<usize>>,
    /// Bytes read and written on every connection (TLS records and frames included).
    bytes_read: Cell<u64>,
    bytes_written: Cell<u64>,
    /// New requests may go (until the deadline, the stop flag or the tickets' end).
    sending: Cell<bool>,
    /// The run is over: what is in flight is censored.
    over: Cell<bool>,
    /// Told whenever `sending` or `over` changes, or a connection ends.
    changed: Notify,
    live: Cell<usize>,
    in_flight: Cell<usize>,
    /// Rate mode's sends and every request's timeout wait on a timerfd (tokio's own timer
    /// rounds up to its next millisecond: sends went out 1 ms late on average on it).
    timers: OnceCell<Arc<PreciseTimers>>,
}

/// A request's bound, one a loop: its timeout and the run's end are the control loop's to see
/// (every [`TICK`]), which then wakes the loop; a request costs two stores, where a timer of
/// its own (a heap entry and a channel) cost 1.5 to 3 us of CPU a request, a fifth of all.
#[derive(Default)]
struct Watch {
    until: Cell<Option<Instant>>,
    expired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

/// One HTTP/2 connection's gate: a stream a request, first come first served (a FIFO
/// semaphore: with a plain wake-all, the first loops polled would take every freed stream),
/// as many as the server allows (its `MAX_CONCURRENT_STREAMS`, 1 until its SETTINGS came).
struct Gate {
    streams: Semaphore,
    /// Permits the semaphore was given: the cap as last seen.
    cap: Cell<usize>,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            streams: Semaphore::new(1),
            cap: Cell::new(1),
        }
    }

    /// Follows the cap to `cap` (up at once; down as streams are given back).
    fn follow(&self, cap: usize) {
        let had = self.cap.get();
        if cap > had {
            self.streams.add_permits(cap - had);
            self.cap.set(cap);
        } else if cap < had {
            self.cap.set(had - self.streams.forget_permits(had - cap));
        }
    }
}

/// How a request ended for its loop.
enum Next {
    Continue,
    /// The connection is gone (or the run over): the loop ends.
    Stop,
}

impl<'p, 'a> Worker<'p, 'a> {
    fn new(plan: &'p RunPlan<'a>, h2: &'p H2Plan, share: &WorkerShare) -> Worker<'p, 'a> {
        let config = plan.config;
        let m = h2.streams;
        let policy = SendPolicy::new(
            &config.mode,
            plan.rate_plan.as_ref(),
            share.requests,
            plan.total_connections * m,
            plan.start,
        );
        let senders = (0..share.connections * m)
            .map(|i| {
                let global = share.first_connection * m + i;
                RefCell::new(Sender {
                    schedule: policy.schedule(plan.start, global),
                    room_since: plan.start,
                })
            })
            .collect();
        let mut recorder = Recorder::new(plan.start, config.timeout, policy.is_paced());
        attach_views(&mut recorder, plan, share.index, h2.requests.lines());
        Worker {
            plan,
            h2,
            first_connection: share.first_connection,
            state: RefCell::new(State {
                recorder,
                policy,
                counts: H2Counts::default(),
            }),
            watches: (0..share.connections * m)
                .map(|_| Watch::default())
                .collect(),
            senders,
            lines: (0..share.connections)
                .map(|i| Cell::new((share.first_connection + i) % h2.requests.lines()))
                .collect(),
            bytes_read: Cell::new(0),
            bytes_written: Cell::new(0),
            sending: Cell::new(true),
            over: Cell::new(false),
            changed: Notify::new(),
            live: Cell::new(share.connections),
            in_flight: Cell::new(0),
            timers: OnceCell::new(),
        }
    }

    /// Ends the run: sending stops at the deadline, the stop flag, or when every connection
    /// is done (count mode); what is in flight then has a drain to be answered. Returns when
    /// the measured window ended.
    async fn control(&self, completed: &AtomicU64) -> Instant {
        let stopped = || self.plan.stop.is_some_and(|s| s.load(Ordering::Relaxed));
        let window_end = loop {
            let now = Instant::now();
            self.tick(now, completed);
            if stopped() || self.live.get() == 0 || self.plan.deadline.is_some_and(|d| now >= d) {
                break now;
            }
            let next = self.plan.deadline.map_or(now + TICK, |d| d.min(now + TICK));
            tokio::select! {
                _ = tokio::time::sleep_until(next.into()) => {}
                _ = self.changed.notified() => {}
            }
        };
        self.announce(&self.sending, false);
        if !stopped() && self.in_flight.get() > 0 {
            let p99 = {
                let mut state = self.state.borrow_mut();
                state.recorder.start_drain();
                state.recorder.p99_us()
            };
            let until = Instant::now() + drain_grace(self.plan.config.timeout, p99);
            while self.in_flight.get() > 0 && Instant::now() < until && !stopped() {
                tokio::time::sleep(Duration::from_millis(1)).await;
                self.tick(Instant::now(), completed);
            }
        }
        self.announce(&self.over, true);
        window_end
    }

    fn tick(&self, now: Instant, completed: &AtomicU64) {
        {
            let mut state = self.state.borrow_mut();
            state.recorder.tick(now);
            completed.store(state.recorder.responses(), Ordering::Relaxed);
        }
        self.sweep(now, false);
    }

    fn announce(&self, flag: &Cell<bool>, value: bool) {
        flag.set(value);
        self.changed.notify_waiters();
        if self.over.get() {
            self.sweep(Instant::now(), true);
        }
    }

    /// Resolves once the run is over.
    async fn ended(&self) {
        loop {
            let changed = self.changed.notified();
            if self.over.get() {
                return;
            }
            changed.await;
        }
    }

    /// Connection `local` of this worker, opened again after a failure or a GOAWAY until
    /// sending stops.
    async fn connection(&self, local: usize) {
        let global = self.first_connection + local;
        let addr = self.plan.addrs[global % self.plan.addrs.len()];
        while self.sending.get() {
            match self.open(addr).await {
                Ok(io) => self.run_connection(io, local).await,
                Err(()) => {
                    if !self.connect_failed(local) {
                        break;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(CONNECT_RETRY_DELAY) => {}
                        _ = self.ended() => {}
                    }
                }
            }
            if self.state.borrow().policy.tickets_gone() {
                break;
            }
        }
        self.live.set(self.live.get() - 1);
        self.changed.notify_waiters();
    }

    /// A failed connect is one failure; in count mode it spends a ticket (`false`: none left).
    fn connect_failed(&self, local: usize) -> bool {
        let mut state = self.state.borrow_mut();
        let mut sender = self.senders[local * self.h2.streams].borrow_mut();
        let state = &mut *state;
        if !state.policy.may_connect(&mut sender.schedule) {
            return false;
        }
        state.policy.connect_failed(&mut sender.schedule);
        state.recorder.failed(FailureKind::Connect, 1);
        true
    }

    /// TCP (and TLS) to `addr`, within the timeout, its bytes counted.
    async fn open(&self, addr: SocketAddr) -> Result<Counted<'_, Box<dyn Io>>, ()> {
        let limit = self.plan.config.timeout;
        let connect = tokio::time::timeout(limit, TcpStream::connect(addr));
        let tcp = tokio::select! {
            r = connect => r.map_err(|_| ())?.map_err(|_| ())?,
            _ = self.ended() => return Err(()),
        };
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = match &self.h2.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let began = Instant::now();
                let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
                let handshake =
                    tokio::time::timeout(limit, connector.connect(tls.name.clone(), tcp));
                let stream = handshake.await.map_err(|_| ())?.map_err(|_| ())?;
                let resumed =
                    stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
                self.state
                    .borrow_mut()
                    .recorder
                    .handshake(crate::load::engine::tls::Handshake {
                        duration: began.elapsed(),
                        resumed,
                    });
                Box::new(stream)
            }
        };
        Ok(Counted {
            inner: io,
            read: &self.bytes_read,
            written: &self.bytes_written,
        })
    }

    /// One HTTP/2 connection over `io`: its loops run until it breaks or the run ends.
    async fn run_connection(&self, mut io: Counted<'_, Box<dyn Io>>, local: usize) {
        let m = self.h2.streams;
        let conn = Conn::new(m, &self.h2.requests.heads);
        self.state.borrow_mut().counts.connections += 1;
        let gate = Gate::new();
        let loops = async {
            all((0..m)
                .map(|s| self.stream_loop(&conn, &gate, s, local * m + s))
                .collect())
            .await;
            conn.senders_done();
        };
        // The connection, polled here, follows the server's cap into the gate as its SETTINGS
        // come (waiting loops go at once, not after the first answer).
        let mut drive = std::pin::pin!(conn.drive(&mut io));
        let follow = std::future::poll_fn(|cx| {
            let polled = drive.as_mut().poll(cx);
            gate.follow(m.min(conn.cap()));
            polled
        });
        let driven = async {
            tokio::select! {
                _ = follow => {}
                _ = self.ended() => {}
            }
        };
        tokio::join!(biased; loops, driven);
        if conn.settled() {
            self.state.borrow_mut().counts.server_cap(conn.cap());
        }
        if conn.went_away() {
            self.state.borrow_mut().counts.goaways += 1;
        }
    }

    /// One stream's request loop (sender `index`, slot `slot` of its connection): a request,
    /// its answer, the next.
    async fn stream_loop(&self, conn: &Conn, gate: &Gate, slot: usize, index: usize) {
        loop {
            if !self.due(index).await {
                return;
            }
            let wanted = Instant::now();
            let Some((permit, granted)) = self.acquire(conn, gate).await else {
                return;
            };
            let next = self.request(conn, slot, index, wanted, granted).await;
            drop(permit);
            if matches!(next, Next::Stop) {
                return;
            }
        }
    }

    /// Waits until sender `index` may send (rate mode: its next intended time); `false`:
    /// sending is over for it.
    async fn due(&self, index: usize) -> bool {
        loop {
            if !self.sending.get() {
                return false;
            }
            let at = {
                let state = self.state.borrow();
                match state.policy {
                    SendPolicy::Rate { .. } => self.senders[index].borrow().schedule.next_intended,
                    _ => return !state.policy.tickets_gone(),
                }
            };
            if self.plan.deadline.is_some_and(|d| at >= d) {
                self.ended().await;
                return false;
            }
            if at <= Instant::now() {
                return true;
            }
            tokio::select! {
                _ = self.until(at) => {}
                _ = self.changed.notified() => {}
            }
        }
    }

    /// A precise wait until `at`.
    fn until(&self, at: Instant) -> Deadline {
        Deadline::new(self.timers.get().map(|t| &**t), at)
    }

    /// A stream under the server's cap, and when it was had if it had to wait for one
    /// (`None`: the run ended first). A wait counts once `conn` knows the server's SETTINGS
    /// (before them, the cap of 1 is ours).
    async fn acquire<'g>(
        &self,
        conn: &Conn,
        gate: &'g Gate,
    ) -> Option<(SemaphorePermit<'g>, Option<Instant>)> {
        if let Ok(permit) = gate.streams.try_acquire() {
            return Some((permit, None));
        }
        let wanted = Instant::now();
        let settled = conn.settled();
        let permit = tokio::select! {
            p = gate.streams.acquire() => p.ok()?,
            _ = self.ended() => return None,
        };
        let now = Instant::now();
        if settled {
            self.state.borrow_mut().counts.waited(now - wanted);
        }
        Some((permit, Some(now)))
    }

    /// Sends sender `index`'s next request on `conn` (its slot `slot`) and reads its answer.
    async fn request(
        &self,
        conn: &Conn,
        slot: usize,
        index: usize,
        wanted: Instant,
        granted: Option<Instant>,
    ) -> Next {
        if conn.refusal().is_some() {
            return Next::Stop;
        }
        let Some((request, line)) = self.take(index, wanted, granted) else {
            return Next::Continue;
        };
        let requests = &self.h2.requests;
        let body = &requests.line(line).body;
        let response = match conn.send(slot, &requests.heads, line, body) {
            Ok(response) => response,
            Err(why) => {
                self.lost(request, kind_of(why), false);
                return Next::Stop;
            }
        };
        self.in_flight.set(self.in_flight.get() + 1);
        let limit = request.sent + self.plan.config.timeout;
        let outcome = self.bounded(index, limit, response).await;
        if outcome.is_none() && self.over.get() {
            self.in_flight.set(self.in_flight.get() - 1);
            let mut state = self.state.borrow_mut();
            state.recorder.censor_in_flight(&request, Instant::now());
            state.recorder.dropped(1);
            return Next::Stop;
        }
        self.in_flight.set(self.in_flight.get() - 1);
        let now = Instant::now();
        self.senders[index].borrow_mut().room_since = now;
        match outcome {
            Some(Ok((status, grpc))) => {
                let mut state = self.state.borrow_mut();
                let answer = state.recorder.response(request, status, now);
                if let (Answer::Counted, Some(code)) = (answer, grpc) {
                    state.counts.grpc(code);
                }
                Next::Continue
            }
            None => {
                self.lost(request, FailureKind::Timeout, false);
                Next::Continue
            }
            Some(Err(why)) => {
                let reset = why == Lost::Reset;
                self.lost(request, kind_of(why), reset);
                if reset {
                    Next::Continue
                } else {
                    Next::Stop
                }
            }
        }
    }

    /// `future`, given up (`None`) at `limit` or when the run is over: sender `index`'s watch,
    /// which the control loop's sweep marks (a timer a request cost more than the h2 crate's
    /// own work per request; see [`Watch`]).
    async fn bounded<T>(
        &self,
        index: usize,
        limit: Instant,
        future: impl Future<Output = T>,
    ) -> Option<T> {
        let watch = &self.watches[index];
        watch.until.set(Some(limit));
        watch.expired.set(false);
        let mut future = std::pin::pin!(future);
        let outcome = std::future::poll_fn(|cx| {
            if watch.expired.get() {
                return Poll::Ready(None);
            }
            match future.as_mut().poll(cx) {
                Poll::Ready(value) => Poll::Ready(Some(value)),
                Poll::Pending => {
                    let mut waker = watch.waker.borrow_mut();
                    if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        *waker = Some(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        })
        .await;
        watch.until.set(None);
        watch.waker.borrow_mut().take();
        outcome
    }

    /// Marks the watches due by `now` (all of them with `all`) and wakes their loops.
    fn sweep(&self, now: Instant, all: bool) {
        for watch in &self.watches {
            if watch.until.get().is_some_and(|until| all || until <= now) {
                watch.expired.set(true);
                if let Some(waker) = watch.waker.borrow_mut().take() {
                    waker.wake();
                }
            }
        }
    }

    /// Takes sender `index`'s next request from the policy (`None`: none now), wanted at
    /// `wanted`, its stream had at `granted` after a wait for one: its intended time and line.
    fn take(
        &self,
        index: usize,
        wanted: Instant,
        granted: Option<Instant>,
    ) -> Option<(InFlight, usize)> {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let mut sender = self.senders[index].borrow_mut();
        let now = Instant::now();
        match state
            .policy
            .decide(&mut sender.schedule, 0, 1, now, self.plan.deadline)
        {
            Decision::Send(_) => {}
            Decision::Wait | Decision::Finish => return None,
        }
        let intended = state.policy.intended(&mut sender.schedule, wanted);
        let cursor = &self.lines[index / self.h2.streams];
        let line = cursor.get();
        cursor.set((line + 1) % self.h2.requests.lines());
        let room = granted.map_or(sender.room_since, |g| g.max(sender.room_since));
        let sent = Instant::now();
        state.recorder.sent(1, line);
        Some((InFlight::new(intended, room, sent, line as u32), line))
    }

    /// A request that ended without an answer, as a failure of `kind`.
    fn lost(&self, request: InFlight, kind: FailureKind, reset: bool) {
        let mut state = self.state.borrow_mut();
        state.recorder.lost(kind, &VecDeque::from([request]));
        state.recorder.dropped(1);
        if reset {
            state.counts.resets += 1;
        }
    }

    /// What the worker measured: the requests due and never sent censored, the counts in.
    fn finish(self, window_end: Instant) -> ThreadStats {
        let end = Instant::now();
        let limit = unsent_limit(self.plan.deadline, window_end);
        let mut state = self.state.into_inner();
        for (index, sender) in self.senders.iter().enumerate() {
            let sender = sender.borrow();
            let cursor = &self.lines[index / self.h2.streams];
            let mut line = cursor.get();
            for unsent in state
                .policy
                .unsent(&sender.schedule, limit, &self.plan.windows)
            {
                state.recorder.censor_unsent(&unsent, end, line);
                line = (line + unsent.count as usize) % self.h2.requests.lines();
            }
            cursor.set(line);
        }
        state.recorder.bytes_read(self.bytes_read.get() as usize);
        state
            .recorder
            .bytes_written(self.bytes_written.get() as usize);
        state.recorder.set_h2(state.counts);
        let elapsed = window_end.saturating_duration_since(self.plan.start);
        state.recorder.finish(
            elapsed,
            crate::sys::thread_cpu_seconds(),
            crate::sys::thread_runqueue_wait_seconds(),
        )
    }
}

/// Runs `futures` to their ends, polling only those woken (`join_all` polls every one on each
/// wake: with 10 streams on each of 10 connections, a hundred polls an answer).
async fn all<F: Future<Output = ()>>(mut futures: FuturesUnordered<F>) {
    while futures.next().await.is_some() {}
}

/// The failure a request lost with its connection is: a reset, a GOAWAY or the connection's
/// end lost the response (read); anything else is the protocol's.
fn kind_of(why: Lost) -> FailureKind {
    match why {
        Lost::Reset | Lost::GoAway | Lost::Closed => FailureKind::Read,
        Lost::Protocol => FailureKind::Protocol,
    }
}

/// A connection's bytes: TCP or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

/// `inner`, its bytes counted into the worker's state.
struct Counted<'w, T> {
    inner: T,
    read: &'w Cell<u64>,
    written: &'w Cell<u64>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<'_, T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.read.set(self.read.get() + n);
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<'_, T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.written.set(self.written.get() + n as u64);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
