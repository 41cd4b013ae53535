//! The load engine: one event loop per thread over its share of the connections.
//!
//! Each [`Worker`] owns a mio `Poll`, its connections, one read buffer shared by all of them and
//! its own [`ThreadStats`]; workers share nothing while they run but the stop flag and a progress
//! counter. This is the product, so it is written here rather than borrowed from an HTTP client:
//! the hot path is one `send` and one `read` per request (sockets are registered once, edge
//! triggered, for both directions, so no `epoll_ctl` per request) and no allocation: request
//! bytes are pre-serialized, responses are framed in place and only partial heads are copied.
//!
//! Latency ends when the response is read, on the same monotonic clock as the send time. (The
//! kernel's receive timestamps, SO_TIMESTAMPNS, are on the realtime clock; converting them was
//! seen to run tens of microseconds early here, measuring a 50 ms wait at 49.95 ms.) Sends are
//! issued together after each poll's events, and under a server-bound closed-loop load the
//! worker naps briefly instead of being woken for every response (see `NAP`), which on a VM is
//! most of the cost per request on both sides; a response that arrives during a nap is charged
//! the rest of the nap, at most `NAP`.

//! When a request may be sent is the [`SendPolicy`]: closed loop (a new batch as soon as the last
//! one is answered), fixed count (the same, while this worker's share of tickets lasts; every
//! ticket ends as exactly one response or one failure) and constant rate (wrk2's model: request
//! k of a connection is due at `phase + k * interval`, its latency is measured from that intended
//! time, and a connection still waiting for an answer sends late rather than skipping).
//!
//! How a run ends: closed and rate runs stop sending at their deadline, then drain: the requests
//! in flight get a short grace ([`drain_grace`]: at least 100 ms, four times the run's p99 so
//! far, at most the timeout) to be answered with their true latency. Those answers are latency
//! samples but not responses of the run (its throughput and length end at the deadline). What
//! is still in flight after the drain (or when the stop flag ends a run) is censored: recorded
//! by [`super::stats`] at its age, and in rate mode so is every request that was due before the
//! deadline (less `UNSENT_SLACK`) and could not be sent. Without the drain every closed-loop
//! connection would end with a young request in flight, and every run would look censored.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::os::fd::{AsFd, AsRawFd};

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use nix::errno::Errno;
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use socket2::{Domain, Protocol, Socket, Type};

use super::error::FailureKind;
use super::framing::{EchoReplyFramer, HttpResponseFramer, ResponseFramer};
use super::request::RequestBytes;
use super::stats::{Censored, ThreadStats};
use super::target::Target;
use super::{LoadConfig, Mode};

/// One read takes up to this many bytes; shared by all connections of a worker.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// The longest the loop sleeps, so a stop request is noticed promptly.
const MAX_POLL_WAIT: Duration = Duration::from_millis(50);
/// Closed and count modes: when a poll brought fewer than this many events while at least
/// `NAP_MIN_CONNECTIONS` connections wait on the server, the worker naps `NAP` before polling
/// again. Being woken for every single response is what costs most per request on a VM (the
/// server pays the cross-CPU wakeup, the generator the sleep); a short nap lets responses
/// gather. Latency does not include the nap: it ends at the kernel's receive timestamp.
const NAP_BELOW_EVENTS: usize = 4;
const NAP_MIN_CONNECTIONS: usize = 32;
const NAP: Duration = Duration::from_micros(30);
/// The drain after a deadline lasts at least this long (if anything is still in flight)...
const DRAIN_MIN: Duration = Duration::from_millis(100);
/// ... or this many times the p99 measured so far, whichever is longer, but never longer than
/// the timeout (a request older than that is a timeout anyway).
const DRAIN_P99_FACTOR: u32 = 4;
/// Rate mode: a request due this close to the deadline and not sent was not held back, the
/// deadline just came first; it is not censored.
const UNSENT_SLACK: Duration = Duration::from_millis(1);
/// Wait before retrying a connection that could not be opened.
const CONNECT_RETRY_DELAY: Duration = Duration::from_millis(20);

/// What every worker of one run shares (read-only, except the atomics).
pub struct RunPlan<'a> {
    pub config: &'a LoadConfig,
    pub addr: SocketAddr,
    pub request: &'a RequestBytes,
    pub start: Instant,
    /// Closed and rate modes end here; count mode has none.
    pub deadline: Option<Instant>,
    pub stop: Option<&'a AtomicBool>,
    /// All connections of the run, to spread rate-mode send phases evenly.
    pub total_connections: usize,
    /// `--hlog` only: where each thread hands over its per-second latency histograms.
    pub intervals: Option<std::sync::mpsc::Sender<super::hlog::IntervalSnapshot>>,
}

/// One worker's share of the run.
pub struct WorkerShare {
    pub index: usize,
    /// Global index of the worker's first connection.
    pub first_connection: usize,
    pub connections: usize,
    /// Count mode: how many requests this worker sends.
    pub requests: Option<u64>,
}

/// When a connection may send.
#[derive(Debug, Clone, Copy)]
enum SendPolicy {
    /// A new batch as soon as the previous one is answered.
    Closed,
    /// Like closed, while tickets last; `tickets_left` are requests not yet sent (or failed).
    Count { tickets_left: u64 },
    /// Request k of a connection is due at its phase plus k intervals.
    Rate { interval: Duration },
}

/// A request on the wire: when it should have been sent and when it was.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    intended: Instant,
    sent: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No socket; open one at `retry_at`.
    Disconnected { retry_at: Instant },
    /// A non-blocking connect in progress since `since`.
    Connecting { since: Instant },
    /// Connected: requests may be sent.
    Open,
    /// Nothing more to do (count mode ran out of tickets).
    Finished,
}

/// One client connection and everything it needs between events, sized once.
struct Connection {
    stream: Option<TcpStream>,
    /// Bumped whenever the socket is replaced, so events for an old socket are ignored.
    generation: u32,
    phase: Phase,
    /// The part of the current batch still to write: `request.batch(pipeline)[write_from..write_to]`.
    write_from: usize,
    write_to: usize,
    in_flight: VecDeque<InFlight>,
    framer: ResponseFramer,
    /// Bytes of a response head that arrived split across reads (empty almost always).
    partial_head: Vec<u8>,
    /// Rate mode: when this connection's next request is due.
    next_intended: Instant,
    /// The earliest pending wakeup for this connection in the worker's timer heap.
    wakeup_at: Option<Instant>,
    /// Count mode: a ticket taken when connecting, spent by the first send.
    holds_ticket: bool,
    /// In the worker's `send_queue`.
    send_queued: bool,
}

impl Connection {
    fn writing(&self) -> bool {
        self.write_from < self.write_to
    }
}

/// What framing one read's bytes produced.
struct Framed {
    /// The server said it closes (or a close-delimited body ended).
    close: bool,
}

/// The token of the worker's timer; connection tokens never reach it (slots are below 2^32-1).
const TIMER_TOKEN: Token = Token(usize::MAX);

fn token_for(slot: usize, generation: u32) -> Token {
    Token(slot | (generation as usize) << 32)
}

fn slot_of(token: Token) -> (usize, u32) {
    (token.0 & 0xffff_ffff, (token.0 >> 32) as u32)
}

/// Runs one worker to the end of its share and returns what it measured.
pub fn run_worker(
    plan: &RunPlan<'_>,
    share: WorkerShare,
    completed: &AtomicU64,
) -> io::Result<ThreadStats> {
    if !plan.config.pin_cpus.is_empty() {
        pin_current_thread(plan.config.pin_cpus[share.index % plan.config.pin_cpus.len()]);
    }
    let mut worker = Worker::new(plan, &share)?;
    worker.stats.intervals = plan
        .intervals
        .as_ref()
        .map(|tx| super::hlog::IntervalRecorder::new(share.index, tx.clone()));
    let result = worker.run(completed);
    if let Some(intervals) = worker.stats.intervals.take() {
        intervals.finish();
    }
    result?;
    let mut stats = worker.stats;
    stats.cpu_s = thread_cpu_seconds();
    Ok(stats)
}

struct Worker<'p, 'a> {
    plan: &'p RunPlan<'a>,
    poll: Poll,
    connections: Vec<Connection>,
    read_buffer: Vec<u8>,
    stats: ThreadStats,
    policy: SendPolicy,
    /// Timers: (when, connection slot). Stale entries are skipped (see `wakeup_at`).
    wakeups: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Connections to send on once the current poll's events are handled.
    send_queue: Vec<usize>,
    /// Rate mode: a nanosecond timer for the earliest wakeup (epoll's own timeout is whole
    /// milliseconds, which would send up to 1 ms late and charge that to the server).
    precise_timer: Option<TimerFd>,
    /// When `precise_timer` is set to fire.
    timer_armed_for: Option<Instant>,
    rate_mode: bool,
    pipeline: usize,
    timeout: Duration,
    /// Past the deadline, waiting for the requests in flight: no sends, no new connections.
    draining: bool,
}

impl<'p, 'a> Worker<'p, 'a> {
    fn new(plan: &'p RunPlan<'a>, share: &WorkerShare) -> io::Result<Worker<'p, 'a>> {
        let config = plan.config;
        let policy = match config.mode {
            Mode::Closed { .. } => SendPolicy::Closed,
            Mode::Count { .. } => SendPolicy::Count {
                tickets_left: share.requests.unwrap_or(0),
            },
            Mode::Rate { rate, .. } => SendPolicy::Rate {
                interval: Duration::from_secs_f64(plan.total_connections as f64 / rate),
            },
        };
        let framer = match &config.target {
            Target::Http { .. } => ResponseFramer::Http(HttpResponseFramer::new(&config.method)),
            Target::Echo { .. } => ResponseFramer::Echo(EchoReplyFramer::new(config.message_len)),
        };
        let pipeline = config.pipeline.max(1);
        let connections = (0..share.connections)
            .map(|i| {
                let phase = match policy {
                    SendPolicy::Rate { interval } => interval.mul_f64(
                        (share.first_connection + i) as f64 / plan.total_connections as f64,
                    ),
                    _ => Duration::ZERO,
                };
                Connection {
                    stream: None,
                    generation: 0,
                    phase: Phase::Disconnected {
                        retry_at: plan.start,
                    },
                    write_from: 0,
                    write_to: 0,
                    in_flight: VecDeque::with_capacity(pipeline),
                    framer: framer.clone(),
                    partial_head: Vec::new(),
                    next_intended: plan.start + phase,
                    wakeup_at: None,
                    holds_ticket: false,
                    send_queued: false,
                }
            })
            .collect();
        Ok(Worker {
            plan,
            poll: Poll::new()?,
            connections,
            read_buffer: vec![0; READ_BUFFER_BYTES],
            stats: ThreadStats::new(matches!(policy, SendPolicy::Rate { .. })),
            rate_mode: matches!(policy, SendPolicy::Rate { .. }),
            policy,
            wakeups: BinaryHeap::new(),
            send_queue: Vec::with_capacity(share.connections),
            precise_timer: None,
            timer_armed_for: None,
            pipeline,
            timeout: config.timeout,
            draining: false,
        })
    }

    fn run(&mut self, completed: &AtomicU64) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        if self.rate_mode {
            let timer = TimerFd::new(
                ClockId::CLOCK_MONOTONIC,
                TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
            )?;
            self.poll.registry().register(
                &mut SourceFd(&timer.as_fd().as_raw_fd()),
                TIMER_TOKEN,
                Interest::READABLE,
            )?;
            self.precise_timer = Some(timer);
        }
        // The default 50 µs of timer slack would make rate-mode sends and naps late.
        let _ = nix::sys::prctl::set_timerslack(1);
        let sweep_every = (self.timeout / 10).clamp(Duration::from_millis(1), MAX_POLL_WAIT);
        let start = self.plan.start;
        // Each connect is timed from when it is made: opening thousands takes a while (on
        // loopback each call does its handshake), and the last ones are not late for that.
        for slot in 0..self.connections.len() {
            self.connect(slot, Instant::now());
        }
        let mut next_sweep = Instant::now() + sweep_every;
        let nap_allowed = !self.rate_mode && self.connections.len() >= NAP_MIN_CONNECTIONS;
        let mut last_batch = 0;
        let mut window_end = None;
        let mut drain_until = None;
        loop {
            let now = Instant::now();
            if let Some(until) = drain_until {
                if now >= until || self.stopped() || self.nothing_in_flight() {
                    break;
                }
            } else if self.should_end(now) {
                window_end = Some(now);
                let at_deadline = self.plan.deadline.is_some_and(|d| now >= d);
                if at_deadline && self.rate_mode && !self.stopped() {
                    // Requests due before the deadline that a late wakeup has not sent yet go
                    // out now (from their intended times, so the lateness is measured); only
                    // those whose connection is busy or down stay unsent.
                    self.run_due_wakeups(now);
                }
                if at_deadline && !self.stopped() && !self.nothing_in_flight() {
                    let p99 = self.stats.latency.value_at_quantile(0.99);
                    drain_until = Some(now + drain_grace(self.timeout, p99));
                    self.draining = true;
                    continue;
                }
                break;
            }
            let mut wake = (now + MAX_POLL_WAIT).min(next_sweep);
            match (drain_until, self.plan.deadline) {
                (Some(until), _) => wake = wake.min(until),
                (None, Some(deadline)) => wake = wake.min(deadline),
                (None, None) => {}
            }
            if let Some(Reverse((at, _))) = self.wakeups.peek().copied() {
                wake = wake.min(at);
                self.arm_precise_timer(at, now);
            }
            let wait = wake.saturating_duration_since(now);
            if nap_allowed && (1..NAP_BELOW_EVENTS).contains(&last_batch) && wait > NAP {
                std::thread::sleep(NAP);
            }
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            last_batch = events.iter().count();
            for event in events.iter() {
                if event.token() == TIMER_TOKEN {
                    self.timer_armed_for = None;
                    if let Some(timer) = &self.precise_timer {
                        // Non-blocking: clears the expiration; EAGAIN if it was already read.
                        let _ = timer.wait();
                    }
                    continue;
                }
                let (slot, generation) = slot_of(event.token());
                let Some(conn) = self.connections.get(slot) else {
                    continue;
                };
                if conn.generation != generation {
                    continue;
                }
                let (phase, writing) = (conn.phase, conn.writing());
                match phase {
                    Phase::Connecting { .. } => self.finish_connect(slot),
                    Phase::Open => {
                        if event.is_writable() && writing {
                            self.flush(slot);
                        }
                        if event.is_read_closed() || event.is_error() {
                            self.read_responses(slot, true);
                        } else if event.is_readable() {
                            self.read_responses(slot, false);
                        }
                    }
                    Phase::Disconnected { .. } | Phase::Finished => {}
                }
            }
            self.send_queued();
            let now = Instant::now();
            self.run_due_wakeups(now);
            if now >= next_sweep {
                self.sweep_timeouts(now);
                next_sweep = now + sweep_every;
            }
            completed.store(self.stats.requests, Ordering::Relaxed);
            if let Some(intervals) = self.stats.intervals.as_mut() {
                intervals.roll(now - start);
            }
        }
        let end = Instant::now();
        let window_end = window_end.unwrap_or(end);
        self.stats.elapsed = window_end - start;
        self.censor(end, window_end);
        completed.store(self.stats.requests, Ordering::Relaxed);
        Ok(())
    }

    fn stopped(&self) -> bool {
        self.plan.stop.is_some_and(|s| s.load(Ordering::Relaxed))
    }

    fn nothing_in_flight(&self) -> bool {
        self.connections.iter().all(|c| c.in_flight.is_empty())
    }

    /// Records what is still unanswered when the run ends at `end` (sending stopped at
    /// `window_end`): every request in flight, and in rate mode every request that was due
    /// and could not be sent. They become [`Censored`] records, not samples (see stats).
    fn censor(&mut self, end: Instant, window_end: Instant) {
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let limit = match self.plan.deadline {
            Some(deadline) => deadline.min(window_end),
            None => window_end,
        }
        .checked_sub(UNSENT_SLACK)
        .unwrap_or(window_end);
        let interval = match self.policy {
            SendPolicy::Rate { interval } => Some(interval),
            _ => None,
        };
        for conn in &self.connections {
            for request in &conn.in_flight {
                self.stats.censored.push(Censored::InFlight {
                    since_intended_us: us(end.saturating_duration_since(request.intended)),
                    since_sent_us: us(end.saturating_duration_since(request.sent)),
                });
                self.stats.unanswered += 1;
            }
            if let Some(interval) = interval {
                let count = due_before(conn.next_intended, limit, interval);
                if count > 0 {
                    self.stats.censored.push(Censored::Unsent {
                        oldest_us: us(end.saturating_duration_since(conn.next_intended)),
                        step_us: interval.as_secs_f64() * 1e6,
                        count,
                    });
                    self.stats.unsent += count;
                }
            }
        }
    }

    /// Sets the precise timer to fire at `at` unless it already does; past times need no timer
    /// (the poll does not wait). A failure to arm only costs precision.
    fn arm_precise_timer(&mut self, at: Instant, now: Instant) {
        let Some(timer) = &self.precise_timer else {
            return;
        };
        if at <= now || self.timer_armed_for == Some(at) {
            return;
        }
        let delay = TimeSpec::from_duration(at - now);
        if timer
            .set(Expiration::OneShot(delay), TimerSetTimeFlags::empty())
            .is_ok()
        {
            self.timer_armed_for = Some(at);
        }
    }

    fn should_end(&self, now: Instant) -> bool {
        if self.plan.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return true;
        }
        if self.plan.deadline.is_some_and(|d| now >= d) {
            return true;
        }
        match self.policy {
            SendPolicy::Count { tickets_left: 0 } => self
                .connections
                .iter()
                .all(|c| c.in_flight.is_empty() && !c.holds_ticket),
            _ => false,
        }
    }

    /// Opens a non-blocking connection for `slot`. In count mode a connection is opened only
    /// for a ticket, which it holds until it sends (so `--no-keepalive -n N` opens exactly N
    /// connections) or gives back if it closes first.
    fn connect(&mut self, slot: usize, now: Instant) {
        if self.draining {
            return;
        }
        if let SendPolicy::Count { tickets_left } = &mut self.policy {
            let conn = &mut self.connections[slot];
            if !conn.holds_ticket {
                if *tickets_left == 0 {
                    conn.phase = Phase::Finished;
                    return;
                }
                *tickets_left -= 1;
                conn.holds_ticket = true;
            }
        }
        match self.open_socket(slot) {
            Ok(stream) => {
                let conn = &mut self.connections[slot];
                conn.stream = Some(stream);
                conn.phase = Phase::Connecting { since: now };
            }
            Err(_) => self.connect_failed(slot, now),
        }
    }

    fn open_socket(&mut self, slot: usize) -> io::Result<TcpStream> {
        let addr = self.plan.addr;
        let socket = Socket::new(
            Domain::for_address(addr),
            Type::STREAM.nonblocking(),
            Some(Protocol::TCP),
        )?;
        socket.set_nodelay(true)?;
        if !self.plan.config.keepalive {
            // One connection per request: reset instead of leaving TIME_WAIT sockets behind, so
            // a long run does not exhaust the ephemeral ports.
            socket.set_linger(Some(Duration::ZERO))?;
        }
        match socket.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        let mut stream = TcpStream::from_std(socket.into());
        let conn = &mut self.connections[slot];
        conn.generation = conn.generation.wrapping_add(1);
        self.poll.registry().register(
            &mut stream,
            token_for(slot, conn.generation),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        Ok(stream)
    }

    fn finish_connect(&mut self, slot: usize) {
        let conn = &mut self.connections[slot];
        let Some(stream) = conn.stream.as_ref() else {
            return;
        };
        let failed = match stream.take_error() {
            Ok(Some(_)) | Err(_) => true,
            Ok(None) => match stream.peer_addr() {
                Ok(_) => false,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                Err(_) => true,
            },
        };
        let now = Instant::now();
        if failed {
            self.connect_failed(slot, now);
        } else {
            conn.phase = Phase::Open;
            self.try_send(slot, now);
        }
    }

    /// A connection attempt failed: count it (in count mode it uses up a ticket) and retry later.
    fn connect_failed(&mut self, slot: usize, now: Instant) {
        // The ticket held for this attempt ends here, as a connect failure.
        self.connections[slot].holds_ticket = false;
        self.close(slot);
        self.stats.errors.add(FailureKind::Connect, 1);
        let retry_at = now + CONNECT_RETRY_DELAY;
        self.connections[slot].phase = Phase::Disconnected { retry_at };
        self.schedule_wakeup(slot, retry_at);
    }

    /// Drops the socket and forgets everything in flight (the caller has counted it).
    fn close(&mut self, slot: usize) {
        let conn = &mut self.connections[slot];
        if conn.holds_ticket {
            conn.holds_ticket = false;
            if let SendPolicy::Count { tickets_left } = &mut self.policy {
                *tickets_left += 1;
            }
        }
        // Closing the descriptor removes it from the epoll set; no deregister call needed.
        conn.stream = None;
        conn.generation = conn.generation.wrapping_add(1);
        conn.in_flight.clear();
        conn.framer.reset();
        conn.partial_head.clear();
        conn.write_from = 0;
        conn.write_to = 0;
        conn.phase = Phase::Disconnected {
            retry_at: Instant::now(),
        };
    }

    /// Counts the requests lost with a broken connection, then opens a new one.
    fn fail(&mut self, slot: usize, kind: FailureKind) {
        let lost = self.connections[slot].in_flight.len() as u64;
        let lost = if kind == FailureKind::Protocol {
            lost.max(1)
        } else {
            lost
        };
        self.stats.errors.add(kind, lost);
        self.reconnect(slot);
    }

    fn reconnect(&mut self, slot: usize) {
        self.close(slot);
        let now = Instant::now();
        if self.plan.deadline.is_some_and(|d| now >= d) {
            return;
        }
        self.connect(slot, now);
    }

    /// Sends whatever the policy allows now on an open, idle-for-writing connection.
    fn try_send(&mut self, slot: usize, now: Instant) {
        let conn = &self.connections[slot];
        if conn.phase != Phase::Open || conn.writing() {
            return;
        }
        let deadline = self.plan.deadline;
        let past_deadline = deadline.is_some_and(|d| now >= d);
        // Rate mode still sends, once, at the deadline what was due before it (see `run`).
        if self.draining || (past_deadline && !self.rate_mode) {
            return;
        }
        match &mut self.policy {
            SendPolicy::Closed => {
                if conn.in_flight.is_empty() {
                    self.send_batch(slot, self.pipeline, now, None);
                }
            }
            SendPolicy::Count { tickets_left } => {
                if conn.in_flight.is_empty() {
                    let held = u64::from(conn.holds_ticket);
                    let count = (*tickets_left + held).min(self.pipeline as u64);
                    if count == 0 {
                        self.close(slot);
                        self.connections[slot].phase = Phase::Finished;
                        return;
                    }
                    *tickets_left -= count - held;
                    self.connections[slot].holds_ticket = false;
                    self.send_batch(slot, count as usize, now, None);
                }
            }
            SendPolicy::Rate { interval } => {
                let interval = *interval;
                let room = self.pipeline - conn.in_flight.len();
                let mut due = 0;
                let mut next = conn.next_intended;
                let before_deadline = |t: Instant| deadline.is_none_or(|d| t < d);
                while due < room && next <= now && before_deadline(next) {
                    due += 1;
                    next += interval;
                }
                if due > 0 {
                    self.send_batch(slot, due, now, Some(interval));
                }
                let conn = &self.connections[slot];
                if conn.phase == Phase::Open
                    && conn.in_flight.len() < self.pipeline
                    && before_deadline(conn.next_intended)
                {
                    let at = conn.next_intended;
                    self.schedule_wakeup(slot, at);
                }
            }
        }
    }

    /// Puts `count` requests in flight and writes them as one batch. In rate mode each takes the
    /// next intended time of the connection's schedule; otherwise they are intended now.
    fn send_batch(&mut self, slot: usize, count: usize, now: Instant, interval: Option<Duration>) {
        let conn = &mut self.connections[slot];
        for _ in 0..count {
            let intended = match interval {
                Some(interval) => {
                    let intended = conn.next_intended;
                    conn.next_intended += interval;
                    intended
                }
                None => now,
            };
            conn.in_flight.push_back(InFlight {
                intended,
                sent: now,
            });
        }
        conn.write_from = 0;
        conn.write_to = self.plan.request.len() * count;
        self.stats.sent += count as u64;
        self.flush(slot);
    }

    /// Writes the rest of the current batch; on `WouldBlock` the writable event resumes it.
    fn flush(&mut self, slot: usize) {
        let bytes = self.plan.request.batch(self.pipeline);
        loop {
            let conn = &mut self.connections[slot];
            if !conn.writing() {
                return;
            }
            let Some(stream) = conn.stream.as_mut() else {
                return;
            };
            match stream.write(&bytes[conn.write_from..conn.write_to]) {
                Ok(0) => return self.fail(slot, FailureKind::Write),
                Ok(n) => {
                    conn.write_from += n;
                    self.stats.bytes_written += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.fail(slot, FailureKind::Write),
            }
        }
    }

    /// Reads until the socket is drained, framing and counting every response on the way.
    /// `peer_closed`: the event said the peer closed, so read on until the end of the stream.
    fn read_responses(&mut self, slot: usize, peer_closed: bool) {
        let generation = self.connections[slot].generation;
        loop {
            let conn = &mut self.connections[slot];
            if conn.generation != generation {
                // The connection was replaced (a failed write while sending the next request).
                return;
            }
            let Some(stream) = conn.stream.as_ref() else {
                return;
            };
            let fd = stream.as_raw_fd();
            let n = match nix::unistd::read(fd, &mut self.read_buffer) {
                Ok(n) => n,
                Err(Errno::EAGAIN) => return,
                Err(Errno::EINTR) => continue,
                Err(_) => return self.fail(slot, FailureKind::Read),
            };
            // The monotonic clock, read when the bytes are in hand: the send times are on it too.
            let now = Instant::now();
            if n == 0 {
                return self.on_peer_closed(slot);
            }
            self.stats.bytes_read += n as u64;
            let framed = match self.frame(slot, n, now) {
                Ok(framed) => framed,
                Err(kind) => return self.fail(slot, kind),
            };
            if framed.close || !self.plan.config.keepalive {
                if self.connections[slot].in_flight.is_empty() {
                    return self.reconnect(slot);
                }
                if framed.close {
                    // The server closes with requests still pipelined behind this response.
                    return self.fail(slot, FailureKind::Read);
                }
            }
            self.queue_send(slot);
            // Edge-triggered: a short read means the socket was empty when read, and any data
            // arriving later raises a new edge, so there is no need for a read that fails. An
            // end of stream that arrived before the event was reported raises no new edge, so
            // then the loop reads on until it sees it.
            if n < self.read_buffer.len() && !peer_closed {
                return;
            }
        }
    }

    /// Marks a connection whose responses were just read as ready to send again. Sends wait
    /// until every event of the poll is handled and then go out back to back, as wrk's do: the
    /// server finds them together, and the generator sleeps (and is woken) less often.
    fn queue_send(&mut self, slot: usize) {
        let conn = &mut self.connections[slot];
        if !conn.send_queued {
            conn.send_queued = true;
            self.send_queue.push(slot);
        }
    }

    fn send_queued(&mut self) {
        let mut queue = std::mem::take(&mut self.send_queue);
        for &slot in &queue {
            self.connections[slot].send_queued = false;
            self.try_send(slot, Instant::now());
        }
        queue.clear();
        self.send_queue = queue;
    }

    /// Frames `self.read_buffer[..n]` on `slot` and records every response it completes.
    fn frame(&mut self, slot: usize, n: usize, now: Instant) -> Result<Framed, FailureKind> {
        let conn = &mut self.connections[slot];
        let fresh = &self.read_buffer[..n];
        let buffered = !conn.partial_head.is_empty();
        if buffered {
            conn.partial_head.extend_from_slice(fresh);
        }
        let data: &[u8] = if buffered { &conn.partial_head } else { fresh };
        let mut offset = 0;
        let mut close = false;
        while offset < data.len() {
            let fed = conn
                .framer
                .feed(&data[offset..])
                .map_err(|_| FailureKind::Protocol)?;
            offset += fed.consumed;
            match fed.complete {
                Some(info) => {
                    let request = conn.in_flight.pop_front().ok_or(FailureKind::Protocol)?;
                    record_response(
                        &mut self.stats,
                        request,
                        info.status,
                        now,
                        self.plan.start,
                        self.timeout,
                        self.rate_mode,
                        self.draining,
                    );
                    if info.close {
                        close = true;
                        break;
                    }
                }
                None if fed.consumed == 0 => break,
                None => {}
            }
        }
        if buffered {
            conn.partial_head.drain(..offset);
        } else if offset < n && !close {
            conn.partial_head.extend_from_slice(&fresh[offset..]);
        }
        Ok(Framed { close })
    }

    /// The server closed: that ends a close-delimited response; otherwise it loses what is in
    /// flight (a read failure) or was just an idle keep-alive connection being closed.
    fn on_peer_closed(&mut self, slot: usize) {
        let now = Instant::now();
        let conn = &mut self.connections[slot];
        if let Some(info) = conn.framer.on_eof() {
            if let Some(request) = conn.in_flight.pop_front() {
                record_response(
                    &mut self.stats,
                    request,
                    info.status,
                    now,
                    self.plan.start,
                    self.timeout,
                    self.rate_mode,
                    self.draining,
                );
            }
        }
        if conn.in_flight.is_empty() {
            self.reconnect(slot);
        } else {
            self.fail(slot, FailureKind::Read);
        }
    }

    fn schedule_wakeup(&mut self, slot: usize, at: Instant) {
        let conn = &mut self.connections[slot];
        if conn.wakeup_at.is_none_or(|current| at < current) {
            conn.wakeup_at = Some(at);
            self.wakeups.push(Reverse((at, slot)));
        }
    }

    /// Fires the timers that are due: reconnects after a failed connect, and rate-mode sends.
    fn run_due_wakeups(&mut self, now: Instant) {
        while let Some(Reverse((at, slot))) = self.wakeups.peek().copied() {
            if at > now {
                break;
            }
            self.wakeups.pop();
            let conn = &mut self.connections[slot];
            if conn.wakeup_at != Some(at) {
                continue;
            }
            conn.wakeup_at = None;
            match conn.phase {
                Phase::Disconnected { retry_at } if retry_at <= now => self.connect(slot, now),
                Phase::Open => self.try_send(slot, now),
                _ => {}
            }
        }
    }

    /// Counts requests older than the timeout as timeouts (never as latency samples) and
    /// replaces their connection; gives up on connects that take longer than the timeout.
    fn sweep_timeouts(&mut self, now: Instant) {
        for slot in 0..self.connections.len() {
            let conn = &self.connections[slot];
            match conn.phase {
                Phase::Open
                    if conn
                        .in_flight
                        .front()
                        .is_some_and(|r| now.saturating_duration_since(r.sent) >= self.timeout) =>
                {
                    self.fail(slot, FailureKind::Timeout);
                }
                Phase::Connecting { since }
                    if now.saturating_duration_since(since) >= self.timeout =>
                {
                    // Its completion may only be unread yet (behind thousands of others): a
                    // connect that completed is not a failure.
                    self.finish_connect(slot);
                    if matches!(self.connections[slot].phase, Phase::Connecting { .. }) {
                        self.connect_failed(slot, now);
                    }
                }
                Phase::Disconnected { retry_at } if retry_at <= now && conn.wakeup_at.is_none() => {
                    self.connect(slot, now);
                }
                _ => {}
            }
        }
    }
}

/// Counts one complete response: a latency sample unless it came back after the timeout, in
/// which case it is a timeout (a timeout is never a latency sample). In the drain after the
/// deadline it is a sample only, not a response of the run.
#[inline]
#[allow(clippy::too_many_arguments)]
fn record_response(
    stats: &mut ThreadStats,
    request: InFlight,
    status: u16,
    now: Instant,
    start: Instant,
    timeout: Duration,
    rate_mode: bool,
    draining: bool,
) {
    let service_time = now.saturating_duration_since(request.sent);
    if service_time >= timeout {
        stats.errors.add(FailureKind::Timeout, 1);
        return;
    }
    let latency = now.saturating_duration_since(request.intended);
    stats.latency.record(latency);
    if let Some(intervals) = stats.intervals.as_mut() {
        intervals.record(latency, now.saturating_duration_since(start));
    }
    if rate_mode {
        if let Some(uncorrected) = stats.latency_uncorrected.as_mut() {
            uncorrected.record(service_time);
        }
    }
    if draining {
        stats.drained += 1;
    } else {
        stats.count_response(status, now.saturating_duration_since(start));
    }
}

/// How long the drain after a deadline may last: `DRAIN_MIN` or `DRAIN_P99_FACTOR` times the
/// p99 so far (µs), whichever is longer, capped by the timeout.
pub fn drain_grace(timeout: Duration, p99_us: u64) -> Duration {
    DRAIN_MIN
        .max(Duration::from_micros(p99_us).saturating_mul(DRAIN_P99_FACTOR))
        .min(timeout)
}

/// How many requests of a schedule `next, next + interval, ...` are due strictly before `limit`.
pub fn due_before(next: Instant, limit: Instant, interval: Duration) -> u64 {
    if next >= limit || interval.is_zero() {
        return 0;
    }
    let span = (limit - next).as_nanos();
    ((span - 1) / interval.as_nanos() + 1) as u64
}

/// CPU time (user + system) of the calling thread, in seconds.
fn thread_cpu_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(usage) => {
            let seconds =
                |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            seconds(usage.user_time()) + seconds(usage.system_time())
        }
        Err(_) => 0.0,
    }
}

/// Pins the calling thread to one CPU; a failure only loses the pinning.
fn pin_current_thread(cpu: usize) {
    use nix::sched::{sched_setaffinity, CpuSet};
    let mut set = CpuSet::new();
    if set.set(cpu).is_ok() {
        let _ = sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_grace_is_bounded_both_ways() {
        let two_s = Duration::from_secs(2);
        assert_eq!(drain_grace(two_s, 0), Duration::from_millis(100));
        assert_eq!(drain_grace(two_s, 10_000), Duration::from_millis(100));
        assert_eq!(drain_grace(two_s, 100_000), Duration::from_millis(400));
        assert_eq!(drain_grace(two_s, 5_000_000), two_s);
        assert_eq!(
            drain_grace(Duration::from_millis(30), 0),
            Duration::from_millis(30)
        );
    }

    #[test]
    fn due_before_counts_the_schedule_strictly_before_the_limit() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(due_before(t, t, ms(1)), 0);
        assert_eq!(due_before(t + ms(5), t, ms(1)), 0);
        assert_eq!(due_before(t, t + ms(1), ms(1)), 1);
        assert_eq!(due_before(t, t + ms(10), ms(1)), 10);
        assert_eq!(
            due_before(t, t + ms(10) + Duration::from_nanos(1), ms(1)),
            11
        );
        assert_eq!(due_before(t, t + ms(10), Duration::ZERO), 0);
    }
}
