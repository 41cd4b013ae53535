//! The load engine: one event loop per thread over its share of the connections. Each
//! [`Worker`] owns its connections, one read buffer and its own [`Recorder`]; workers share
//! only the stop flag and a progress counter. The parts: [`transport`] (TCP or TLS bytes),
//! [`connection`] (state and framing), [`policy`] (when a connection may send, per mode),
//! [`source`] (which bytes), [`timers`] (wakeups and timeouts) and [`recorder`] (what is
//! counted). How a worker waits and moves bytes is its [`Driver`]: epoll through mio, or
//! io_uring ([`ring`]); everything above the bytes is shared. The config comes from
//! [`crate::load::config`]; the statistics go to [`crate::load::stats`].

pub mod connection;
pub mod framing;
pub mod policy;
pub mod recorder;
pub mod ring;
pub mod settle;
pub mod source;
pub mod timers;
pub mod tls;
pub mod transport;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mio::{Events, Poll};

use crate::load::config::MAX_BATCH;
use crate::load::engine::framing::{EchoReplyFramer, HttpResponseFramer, ResponseFramer};
use crate::load::error::FailureKind;
use crate::load::source::plan::{RatePlan, StepWindow};
use crate::load::source::urls::RequestSet;
use crate::load::stats::ThreadStats;
use crate::load::target::Target;
use crate::load::{Engine, LoadConfig, Mode};
use connection::{slot_of, token_for, Connection, Framed, Phase, TIMER_TOKEN};
use policy::{Decision, SendPolicy};
use recorder::InFlight;
use recorder::Recorder;
use source::RequestSource;
use timers::{PreciseTimer, TimeoutSweep, Wakeups, MAX_POLL_WAIT};
use transport::{Handshake, Transport};

/// One read takes up to this many bytes; shared by all connections of a worker.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Closed and count modes: when a poll brought fewer than this many events while at least
/// `NAP_MIN_CONNECTIONS` connections wait on the server, the worker naps `NAP` before polling
/// again. Being woken for every single response is what costs most per request on a VM (the
/// server pays the cross-CPU wakeup, the generator the sleep); a short nap lets responses
/// gather. A response that arrives during a nap is charged the rest of it (latency ends when
/// the response is read, on the same monotonic clock as the send time, in the epoll driver;
/// the io_uring driver ends it at the kernel's receive timestamp instead, see [`ring`]), so the
/// nap bounds that error at `NAP`.
const NAP_BELOW_EVENTS: usize = 4;
pub const NAP_MIN_CONNECTIONS: usize = 32;
pub const NAP: Duration = Duration::from_micros(30);
/// Rate mode naps too, where the kernel stamps each arrival (plain TCP, epoll): a response
/// then ends at its stamp, whenever it is read, so a nap costs its latency nothing, and a send
/// falling due during one goes out after it, late by at most the nap, measured from its
/// intended time as the slack's lateness is. A quarter of the slack, at most this: at 20,000
/// requests a second, one wakeup for several responses instead of one each.
const RATE_NAP_MAX: Duration = Duration::from_micros(250);
/// The drain after a deadline lasts at least this long (if anything is still in flight)...
const DRAIN_MIN: Duration = Duration::from_millis(100);
/// ... or this many times the p99 measured so far, whichever is longer, but never longer than
/// the timeout (a request older than that is a timeout anyway).
const DRAIN_P99_FACTOR: u32 = 4;
/// Rate mode: a request due this close to the deadline and not sent was not held back, the
/// deadline just came first; it is not censored.
const UNSENT_SLACK: Duration = Duration::from_millis(1);
/// Wait before retrying a connection that could not be opened.
pub const CONNECT_RETRY_DELAY: Duration = Duration::from_millis(20);
/// A connection has settled once answered this often: its first answer waited behind the
/// connects and the first requests of every other; its second one cycled under the load.
const SETTLE_ANSWERS: u64 = 2;
/// While a run settles, a worker looks at the barrier at least this often (another worker may
/// open the window).
const SETTLE_LOOK: Duration = Duration::from_millis(2);

/// What every worker of one run shares (read-only, except the atomics).
pub struct RunPlan<'a> {
    pub config: &'a LoadConfig,
    /// The target's address, then its replicas' ([`LoadConfig::replicas`]): connection `i`
    /// connects to the `i mod len`-th.
    pub addrs: Vec<SocketAddr>,
    /// The requests, serialized once (one, or the lines of `--urls`).
    pub request: &'a RequestSet,
    pub start: Instant,
    /// Closed and rate modes end here; count mode has none. With `settle`, the latest end:
    /// each worker ends the window's length after it opened.
    pub deadline: Option<Instant>,
    /// Closed mode with a settled window (see [`settle`]): the barrier the workers share.
    pub settle: Option<&'a settle::Settle>,
    pub stop: Option<&'a AtomicBool>,
    /// All connections of the run, to spread rate-mode send phases evenly.
    pub total_connections: usize,
    /// The time series (and `--hlog`) only: where each thread hands over its intervals.
    pub intervals: Option<crate::load::stats::series::IntervalPlan>,
    /// `https://` targets: what every connection's TLS session is made from.
    pub tls: Option<transport::TlsConnector>,
    /// Rate mode: the plan every connection's intended send times follow (a constant rate is
    /// a plan of one step), over `total_connections`.
    pub rate_plan: Option<RatePlan>,
    /// Rate mode: the plan's report steps (one for a constant rate).
    pub windows: Vec<StepWindow>,
    /// Count per report step: the rate changes (a ramp or steps).
    pub count_steps: bool,
}

/// One worker's share of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerShare {
    pub index: usize,
    /// Global index of the worker's first connection.
    pub first_connection: usize,
    pub connections: usize,
    /// Count mode: how many requests this worker sends.
    pub requests: Option<u64>,
}

/// Splits connections (and, in count mode, requests) across threads as evenly as possible;
/// the shares add up exactly.
pub fn split_shares(connections: usize, threads: usize, mode: &Mode) -> Vec<WorkerShare> {
    let threads = threads.clamp(1, connections.max(1));
    let mut shares = Vec::with_capacity(threads);
    let mut first = 0;
    for index in 0..threads {
        let count = connections / threads + usize::from(index < connections % threads);
        shares.push(WorkerShare {
            index,
            first_connection: first,
            connections: count,
            requests: None,
        });
        first += count;
    }
    if let Mode::Count { requests } = *mode {
        let mut assigned = 0;
        for share in &mut shares {
            let n = requests * share.connections as u64 / connections as u64;
            share.requests = Some(n);
            assigned += n;
        }
        for share in shares.iter_mut().take((requests - assigned) as usize) {
            share.requests = share.requests.map(|n| n + 1);
        }
    }
    shares
}

/// Pins the calling load thread, worker `index`, to its CPU of `--pin` (round robin), if any,
/// and gives it the config's nice value, if any (a failure leaves it as it was).
pub fn pin_worker(config: &LoadConfig, index: usize) {
    if !config.pin_cpus.is_empty() {
        crate::sys::pin_current_thread(config.pin_cpus[index % config.pin_cpus.len()]);
    }
    if let Some(nice) = config.nice {
        let _ = crate::sys::set_thread_nice(nice);
    }
}

/// Gives worker `index`'s recorder the run's per-line (`--urls`, over `lines` lines),
/// per-interval and per-step views.
pub fn attach_views(recorder: &mut Recorder, plan: &RunPlan<'_>, index: usize, lines: usize) {
    if plan.config.urls.is_some() {
        recorder.set_urls(lines);
    }
    recorder.set_intervals(plan.intervals.as_ref().map(|p| p.recorder(index)));
    if plan.count_steps {
        recorder.set_steps(Some(crate::load::stats::steps::StepRecorder::new(
            &plan.windows,
        )));
    }
}

/// The time before which a rate-mode request due and never sent is censored: the deadline
/// (`None`: none) or the end of sending, whichever came first, less [`UNSENT_SLACK`].
pub fn unsent_limit(deadline: Option<Instant>, window_end: Instant) -> Instant {
    deadline
        .map_or(window_end, |d| d.min(window_end))
        .checked_sub(UNSENT_SLACK)
        .unwrap_or(window_end)
}

/// Runs one worker to the end of its share and returns what it measured.
pub fn run_worker(
    plan: &RunPlan<'_>,
    share: WorkerShare,
    completed: &AtomicU64,
) -> io::Result<ThreadStats> {
    pin_worker(plan.config, share.index);
    let mut worker = Worker::new(plan, &share)?;
    attach_views(
        &mut worker.recorder,
        plan,
        share.index,
        plan.request.lines(),
    );
    let result = worker.run(completed);
    // A settled window's CPU only: making thousands of connections and settling them is not
    // what the window's requests cost (4,096 connections settled before a 300 ms window read
    // 37 us a request where 3 s read 10).
    let (cpu_before, wait_before) = worker.before_window;
    let stats = worker.recorder.finish(
        worker.elapsed,
        crate::sys::thread_cpu_seconds() - cpu_before,
        crate::sys::thread_runqueue_wait_seconds() - wait_before,
    );
    result?;
    Ok(stats)
}

/// How a worker waits for its sockets and moves their bytes.
enum Driver {
    /// epoll through mio: readiness events, then one `send` and one `read` per request.
    Epoll(Poll),
    /// io_uring: sends submitted together once per turn, receives completed into buffers
    /// with the kernel's arrival timestamps (see [`ring`]).
    Uring(Box<ring::RingDriver>),
}

struct Worker<'p, 'a> {
    plan: &'p RunPlan<'a>,
    /// The run-wide index of this worker's first connection.
    first_connection: usize,
    driver: Driver,
    connections: Vec<Connection>,
    read_buffer: Vec<u8>,
    recorder: Recorder,
    policy: SendPolicy<'p>,
    source: RequestSource<'p>,
    wakeups: Wakeups,
    /// Connections to send on once the current poll's events are handled.
    send_queue: Vec<usize>,
    /// Rate mode: a nanosecond timer for the earliest wakeup.
    precise_timer: Option<PreciseTimer>,
    /// Sends are paced by intended times (rate mode).
    paced: bool,
    /// Rate mode: how late a send may go out to share a wakeup
    /// ([`LoadConfig::thread_slack`]).
    slack: Duration,
    /// Arrivals are timed by the kernel's stamps (rate mode over plain TCP with epoll): see
    /// [`RATE_NAP_MAX`].
    stamped: bool,
    pipeline: usize,
    timeout: Duration,
    /// The measured window: from its start to when sending stopped.
    elapsed: Duration,
    /// When the measured window opened: the run's start, or once the run settled; `None`
    /// while it settles.
    window_start: Option<Instant>,
    /// When a settled window closed (its deadline), if it did.
    closed_at: Option<Instant>,
    /// The thread's CPU and run-queue wait, s, before its settled window opened (0 without
    /// settling): left out of what the window's requests cost.
    before_window: (f64, f64),
}

impl<'p, 'a> Worker<'p, 'a> {
    fn new(plan: &'p RunPlan<'a>, share: &WorkerShare) -> io::Result<Worker<'p, 'a>> {
        let config = plan.config;
        let policy = SendPolicy::new(
            &config.mode,
            plan.rate_plan.as_ref(),
            share.requests,
            plan.total_connections,
            plan.start,
        );
        let framer = match &config.target {
            Target::Http { .. } => ResponseFramer::Http(HttpResponseFramer::new(&config.method)),
            Target::Echo { .. } => ResponseFramer::Echo(EchoReplyFramer::new(config.message_len)),
        };
        let pipeline = config.pipeline.max(1);
        let source = RequestSource::new(plan.request);
        let connections = (0..share.connections)
            .map(|i| {
                let schedule = policy.schedule(plan.start, share.first_connection + i);
                let first_line = source.first_line(share.first_connection + i);
                Connection::new(framer.clone(), pipeline, schedule, plan.start, first_line)
            })
            .collect();
        let paced = policy.is_paced();
        let driver = match config.engine {
            Engine::Epoll => Driver::Epoll(Poll::new()?),
            Engine::Uring => Driver::Uring(Box::new(ring::RingDriver::new(
                share.connections,
                paced,
                config.gather,
            )?)),
        };
        Ok(Worker {
            plan,
            first_connection: share.first_connection,
            driver,
            connections,
            read_buffer: vec![0; READ_BUFFER_BYTES],
            recorder: {
                let mut recorder = Recorder::new(plan.start, config.timeout, paced);
                if plan.settle.is_some() {
                    recorder.settle_first();
                }
                recorder
            },
            policy,
            source,
            wakeups: Wakeups::new(share.connections),
            send_queue: Vec::with_capacity(share.connections),
            precise_timer: None,
            paced,
            slack: config.thread_slack(share.connections, plan.total_connections),
            stamped: paced && plan.tls.is_none() && matches!(config.engine, Engine::Epoll),
            pipeline,
            timeout: config.timeout,
            elapsed: Duration::ZERO,
            window_start: plan.settle.is_none().then_some(plan.start),
            closed_at: None,
            before_window: (0.0, 0.0),
        })
    }

    /// The worker's loop: connect, then turn the driver until the run ends (its deadline, a
    /// count reached, a stop), drain what is in flight, and count the window.
    fn run(&mut self, completed: &AtomicU64) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let nap = self.begin()?;
        let start = self.plan.start;
        let mut sweep = TimeoutSweep::new(self.timeout, Instant::now());
        let mut last_batch = 0;
        let mut window_end = None;
        let mut drain_until = None;
        loop {
            let now = Instant::now();
            self.open_window(now);
            if let Some(until) = drain_until {
                if now >= until || self.stopped() || self.nothing_in_flight() {
                    break;
                }
            } else if self.should_end(now) {
                window_end = Some(now);
                drain_until = self.end_at(now);
                if drain_until.is_some() {
                    continue;
                }
                break;
            }
            let wake = self.next_wake(now, sweep.next(), drain_until);
            let wait = wake.saturating_duration_since(now);
            match self.driver {
                Driver::Epoll(_) => {
                    let nap = if (1..NAP_BELOW_EVENTS).contains(&last_batch) {
                        nap
                    } else {
                        Duration::ZERO
                    };
                    last_batch = self.epoll_turn(&mut events, wait, nap)?;
                }
                Driver::Uring(_) => self.ring_turn(wait)?,
            }
            self.send_queued();
            let now = Instant::now();
            self.run_due_wakeups(now);
            if sweep.due(now) {
                self.sweep_timeouts(now);
            }
            completed.store(self.recorder.responses(), Ordering::Relaxed);
            self.recorder.tick(now);
        }
        self.finish(start, window_end);
        completed.store(self.recorder.responses(), Ordering::Relaxed);
        Ok(())
    }

    /// Before the loop: the precise timer where sends are paced on epoll, the thread's timer
    /// slack, every connection opened. Returns the nap a turn may take after a small batch.
    fn begin(&mut self) -> io::Result<Duration> {
        if let (true, Driver::Epoll(poll)) = (self.paced, &self.driver) {
            // (A ring's waits are timed to the nanosecond already.)
            self.precise_timer = Some(PreciseTimer::new(poll.registry(), TIMER_TOKEN)?);
        }
        // The default 50 µs of timer slack would make rate-mode sends and naps late.
        let _ = nix::sys::prctl::set_timerslack(1);
        // Each connect is timed from when it is made: opening thousands takes a while (on
        // loopback each call does its handshake), and the last ones are not late for that.
        for slot in 0..self.connections.len() {
            self.connect(slot, Instant::now());
        }
        Ok(match (self.paced, self.stamped) {
            _ if self.connections.len() < NAP_MIN_CONNECTIONS => Duration::ZERO,
            (false, _) => NAP,
            (true, true) => (self.slack / 4).min(RATE_NAP_MAX),
            (true, false) => Duration::ZERO,
        })
    }

    /// The run ends at `now`: at its deadline, the sends still due go out, a settled window
    /// closes, and what is in flight gets a drain (its end returned); otherwise nothing.
    fn end_at(&mut self, now: Instant) -> Option<Instant> {
        let at_deadline = self.deadline().is_some_and(|d| now >= d);
        if at_deadline && self.paced && !self.stopped() {
            // Requests due before the deadline that a late wakeup has not sent yet go
            // out now (from their intended times, so the lateness is measured); only
            // those whose connection is busy or down stay unsent.
            self.run_due_wakeups(now);
        }
        if at_deadline && self.plan.settle.is_some() {
            // A settled window keeps the load on while its last requests are answered
            // (see `keeps_load`): what is sent from now on is outside the window.
            self.closed_at = Some(now);
            self.recorder.close_window(now);
        }
        if at_deadline && !self.stopped() && !self.nothing_in_flight() {
            let until = now + drain_grace(self.timeout, self.recorder.p99_us());
            self.recorder.start_drain();
            return Some(until);
        }
        None
    }

    /// After the loop: the window's length, the connections' cycles, what is still unanswered
    /// censored at its age.
    fn finish(&mut self, start: Instant, window_end: Option<Instant>) {
        let end = Instant::now();
        let window_end = window_end.unwrap_or(end);
        self.elapsed = window_end.saturating_duration_since(self.window_start.unwrap_or(start));
        self.recorder.set_cycles(
            settle::CycleTotals::of(self.connections.iter().map(|c| &c.cycles)),
            self.connections.iter().map(|c| c.answered).sum(),
            self.connections.iter().map(|c| c.answered_bytes).sum(),
        );
        self.censor(end, window_end);
    }

    /// When the loop must wake next: the timeout sweep, the settle's look, the drain's or the
    /// run's end, and the earliest send due (rate mode, its slack added while the server keeps
    /// up), the precise timer armed for it.
    fn next_wake(
        &mut self,
        now: Instant,
        sweep_next: Instant,
        drain_until: Option<Instant>,
    ) -> Instant {
        let mut wake = (now + MAX_POLL_WAIT).min(sweep_next);
        if let (None, Some(settle)) = (self.window_start, self.plan.settle) {
            wake = wake.min(now + SETTLE_LOOK).min(settle.limit());
        }
        match (drain_until, self.deadline()) {
            (Some(until), _) => wake = wake.min(until),
            (None, Some(deadline)) => wake = wake.min(deadline),
            (None, None) => {}
        }
        if let Some(at) = self.wakeups.earliest() {
            // Rate mode's slack: a send due later goes out at the end of its slack, with
            // every other send due by then, in one wakeup (its lateness is measured);
            // only while the server keeps up (no more unanswered than a batch): one with
            // requests queued gets the next as intended, not in bursts that queue more.
            let keeping_up = self.recorder.outstanding() <= MAX_BATCH as u64;
            let at = if at > now && keeping_up {
                at + self.slack
            } else {
                at
            };
            wake = wake.min(at);
            if let Some(timer) = self.precise_timer.as_mut() {
                timer.arm(at, now);
            }
        }
        wake
    }

    /// Waits for readiness (napping first when `nap`, see `NAP`) and handles the events;
    /// returns how many there were.
    fn epoll_turn(
        &mut self,
        events: &mut Events,
        wait: Duration,
        nap: Duration,
    ) -> io::Result<usize> {
        if !nap.is_zero() && wait > nap {
            std::thread::sleep(nap);
        }
        let Driver::Epoll(poll) = &mut self.driver else {
            unreachable!("an epoll turn on an epoll driver");
        };
        match poll.poll(events, Some(wait)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(0),
            Err(e) => return Err(e),
        }
        for event in events.iter() {
            if event.token() == TIMER_TOKEN {
                if let Some(timer) = self.precise_timer.as_mut() {
                    timer.fired();
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
                    if event.is_writable() {
                        if writing {
                            self.flush(slot);
                        } else {
                            self.flush_pending(slot);
                        }
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
        Ok(events.iter().count())
    }

    fn stopped(&self) -> bool {
        self.plan.stop.is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// The end of the measured window: the run's deadline, or, with a settled window, its
    /// length after it opened (none while it settles).
    fn deadline(&self) -> Option<Instant> {
        match (self.plan.settle, self.window_start) {
            (None, _) => self.plan.deadline,
            (Some(_), None) => None,
            (Some(_), Some(start)) => self.plan.config.mode.duration().map(|d| start + d),
        }
    }

    /// While the run settles: opens the window once every connection was answered (by any
    /// worker) or the limit passed; from then on the recorder counts.
    fn open_window(&mut self, now: Instant) {
        if self.window_start.is_some() {
            return;
        }
        if let Some(start) = self.plan.settle.and_then(|s| s.window_start(now)) {
            self.window_start = Some(start);
            self.recorder.open_window(start);
            self.before_window = (
                crate::sys::thread_cpu_seconds(),
                crate::sys::thread_runqueue_wait_seconds(),
            );
        }
    }

    /// Nothing of the window is in flight: no request at all, or, once a settled window
    /// closed, none sent before it closed (each connection's oldest request is its first).
    fn nothing_in_flight(&self) -> bool {
        match self.closed_at {
            None => self.connections.iter().all(|c| c.in_flight.is_empty()),
            Some(closed) => self
                .connections
                .iter()
                .all(|c| c.in_flight.front().is_none_or(|r| r.sent >= closed)),
        }
    }

    /// A settled window's drain keeps every connection's closed loop going: the requests of
    /// the window still in flight are then answered under the load they were sent into, not
    /// faster as the other connections fall silent (which would flatter the last cycle of
    /// every connection, and so the mean latency and the throughput in whole cycles).
    fn keeps_load(&self) -> bool {
        self.closed_at.is_some()
    }

    /// Records what is still unanswered when the run ends at `end` (sending stopped at
    /// `window_end`): every request in flight, and in rate mode every request that was due
    /// and could not be sent. They become censored records, not samples (see stats).
    fn censor(&mut self, end: Instant, window_end: Instant) {
        let limit = unsent_limit(self.deadline(), window_end);
        let lines = self.plan.request.lines();
        for conn in &self.connections {
            for request in &conn.in_flight {
                if self.closed_at.is_some_and(|closed| request.sent >= closed) {
                    continue; // sent after a settled window closed: not of the run
                }
                self.recorder.censor_in_flight(request, end);
            }
            let mut line = conn.request;
            for unsent in self
                .policy
                .unsent(&conn.schedule, limit, &self.plan.windows)
            {
                self.recorder.censor_unsent(&unsent, end, line);
                line = (line + unsent.count as usize) % lines;
            }
        }
    }

    fn should_end(&self, now: Instant) -> bool {
        if self.stopped() {
            return true;
        }
        if self.deadline().is_some_and(|d| now >= d) {
            return true;
        }
        self.policy.tickets_gone()
            && self
                .connections
                .iter()
                .all(|c| c.in_flight.is_empty() && !c.schedule.holds_ticket)
    }

    /// Opens a non-blocking connection for `slot`, if the policy allows (count mode: only
    /// for a ticket, see [`SendPolicy::may_connect`]).
    fn connect(&mut self, slot: usize, now: Instant) {
        if self.recorder.draining() {
            return;
        }
        let conn = &mut self.connections[slot];
        if !self.policy.may_connect(&mut conn.schedule) {
            conn.phase = Phase::Finished;
            return;
        }
        match self.open_transport(slot) {
            Ok(stream) => {
                let conn = &mut self.connections[slot];
                conn.stream = Some(stream);
                conn.phase = Phase::Connecting { since: now };
            }
            Err(_) => self.connect_failed(slot, now),
        }
    }

    fn open_transport(&mut self, slot: usize) -> io::Result<Transport> {
        let addrs = &self.plan.addrs;
        let mut stream = Transport::connect(
            addrs[(self.first_connection + slot) % addrs.len()],
            self.plan.config.keepalive,
            self.plan.tls.as_ref(),
        )?;
        let conn = &mut self.connections[slot];
        conn.generation = conn.generation.wrapping_add(1);
        match &mut self.driver {
            Driver::Epoll(poll) => {
                if self.stamped {
                    stream.stamp_arrivals()?;
                }
                stream.register(poll.registry(), token_for(slot, conn.generation))?
            }
            Driver::Uring(driver) => driver.connecting(&stream, slot, conn.generation)?,
        }
        Ok(stream)
    }

    fn finish_connect(&mut self, slot: usize) {
        let conn = &mut self.connections[slot];
        let Some(stream) = conn.stream.as_mut() else {
            return;
        };
        let progress = stream.finish_connect();
        let now = Instant::now();
        match progress {
            Handshake::Pending => {}
            Handshake::Failed => self.connect_failed(slot, now),
            Handshake::Ready => {
                if let Some(handshake) = stream.take_handshake() {
                    self.recorder.handshake(handshake);
                }
                conn.phase = Phase::Open;
                conn.room_since = now;
                if let Driver::Uring(driver) = &mut self.driver {
                    if driver.opened(conn, slot).is_err() {
                        return self.fail(slot, FailureKind::Read);
                    }
                }
                self.try_send(slot, now);
            }
        }
    }

    /// A connection attempt failed: count it (in count mode it uses up a ticket) and retry later.
    fn connect_failed(&mut self, slot: usize, now: Instant) {
        self.policy
            .connect_failed(&mut self.connections[slot].schedule);
        self.close(slot);
        self.recorder.failed(FailureKind::Connect, 1);
        let retry_at = now + CONNECT_RETRY_DELAY;
        self.connections[slot].phase = Phase::Disconnected { retry_at };
        self.wakeups.schedule(slot, retry_at);
    }

    /// Drops the socket and forgets everything in flight (the caller has counted it).
    fn close(&mut self, slot: usize) {
        let conn = &mut self.connections[slot];
        if let Driver::Uring(driver) = &mut self.driver {
            driver.closing(conn, slot);
        }
        self.policy.closed(&mut conn.schedule);
        self.recorder.dropped(conn.in_flight.len());
        conn.reset(Instant::now());
    }

    /// Counts the requests lost with a broken connection, then opens a new one.
    fn fail(&mut self, slot: usize, kind: FailureKind) {
        self.recorder.lost(kind, &self.connections[slot].in_flight);
        self.reconnect(slot);
    }

    fn reconnect(&mut self, slot: usize) {
        self.close(slot);
        let now = Instant::now();
        if self.deadline().is_some_and(|d| now >= d) {
            return;
        }
        self.connect(slot, now);
    }

    /// Sends whatever the policy allows now on an open, idle-for-writing connection.
    fn try_send(&mut self, slot: usize, now: Instant) {
        let keeps_load = self.keeps_load();
        let deadline = self.deadline().filter(|_| !keeps_load);
        let conn = &mut self.connections[slot];
        if conn.phase != Phase::Open || conn.writing() {
            return;
        }
        let past_deadline = deadline.is_some_and(|d| now >= d);
        // Rate mode still sends, once, at the deadline what was due before it (see `run`).
        if !keeps_load && (self.recorder.draining() || (past_deadline && !self.paced)) {
            return;
        }
        let in_flight = conn.in_flight.len();
        match self
            .policy
            .decide(&mut conn.schedule, in_flight, self.pipeline, now, deadline)
        {
            Decision::Wait => {}
            Decision::Send(count) => self.send_batch(slot, count, now),
            Decision::Finish => {
                self.close(slot);
                self.connections[slot].phase = Phase::Finished;
                return;
            }
        }
        let conn = &self.connections[slot];
        if conn.phase == Phase::Open {
            let next = self.policy.next_due(
                &conn.schedule,
                conn.in_flight.len(),
                self.pipeline,
                deadline,
            );
            if let Some(at) = next {
                self.wakeups.schedule(slot, at);
            }
        }
    }

    /// Puts the connection's next `count` requests in flight, each intended when the policy
    /// says, and writes them as one batch.
    fn send_batch(&mut self, slot: usize, count: usize, now: Instant) {
        // Paced sends are timed as they go: several due in one turn go one after another,
        // and the turn's clock would start the later ones' latency before they were sent.
        let now = if self.paced { Instant::now() } else { now };
        let conn = &mut self.connections[slot];
        let first = conn.request;
        let mut line = first;
        for _ in 0..count {
            let intended = self.policy.intended(&mut conn.schedule, now);
            conn.in_flight
                .push_back(InFlight::new(intended, conn.room_since, now, line as u32));
            line = self.source.next_line(line);
        }
        conn.request = line;
        let bytes = self.source.batch(first, count);
        conn.write_from = bytes.start;
        conn.write_to = bytes.end;
        self.recorder.sent(count, first);
        self.flush(slot);
    }

    /// A writable edge with the batch handed over: TLS may still hold some of it encrypted.
    #[inline]
    fn flush_pending(&mut self, slot: usize) {
        if let Some(stream @ Transport::Tls(_)) = self.connections[slot].stream.as_mut() {
            if stream.flush_pending().is_err() {
                self.fail(slot, FailureKind::Write);
            }
        }
    }

    /// Writes the rest of the current batch; on `WouldBlock` the writable event resumes it.
    /// (On a ring: submits it, and its completion resumes what the socket did not take.)
    fn flush(&mut self, slot: usize) {
        if let Driver::Uring(driver) = &mut self.driver {
            let conn = &mut self.connections[slot];
            if driver.send(conn, slot, self.source.bytes()).is_err() {
                self.fail(slot, FailureKind::Write);
            }
            return;
        }
        loop {
            let conn = &mut self.connections[slot];
            if !conn.writing() {
                return;
            }
            let bytes = self.source.bytes();
            let Some(stream) = conn.stream.as_mut() else {
                return;
            };
            match stream.write(&bytes[conn.write_from..conn.write_to]) {
                Ok(0) => return self.fail(slot, FailureKind::Write),
                Ok(n) => {
                    conn.write_from += n;
                    self.recorder.bytes_written(n);
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
        let short_read_drains = self.connections[slot]
            .stream
            .as_ref()
            .is_none_or(Transport::short_read_drains);
        loop {
            let conn = &mut self.connections[slot];
            if conn.generation != generation {
                // The connection was replaced (a failed write while sending the next request).
                return;
            }
            let Some(stream) = conn.stream.as_mut() else {
                return;
            };
            let read = if self.stamped {
                stream.read_stamped(&mut self.read_buffer, peer_closed)
            } else {
                stream
                    .read(&mut self.read_buffer, peer_closed)
                    .map(|n| (n, None))
            };
            let (n, stamp) = match read {
                Ok(read) => read,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.fail(slot, FailureKind::Read),
            };
            // The monotonic clock, read when the bytes are in hand: the send times are on it
            // too. Where the kernel stamped them, when they reached the socket. The wall clock
            // is read first: a gap between the two reads (a preemption) then makes the arrival
            // later, never earlier, than it was, and no latency shorter than the server took.
            let wall = stamp.map(|_| ring::wall_clock());
            let mut now = Instant::now();
            if let Some(wall) = wall {
                let at = ring::arrival(stamp, now, wall);
                self.recorder.held(now - at);
                now = at;
            }
            if n == 0 {
                return self.on_peer_closed(slot);
            }
            self.recorder.bytes_read(n);
            let framed = conn.frame(&self.read_buffer[..n], &mut self.recorder, now);
            self.arrive(slot);
            if !self.framed(slot, framed) {
                return;
            }
            // Edge-triggered: a short read means the socket was empty when read, and any data
            // arriving later raises a new edge, so there is no need for a read that fails. An
            // end of stream that arrived before the event was reported raises no new edge, so
            // then the loop reads on until it sees it.
            // (A TLS read says `WouldBlock` itself when the socket is empty.)
            if n < self.read_buffer.len() && !peer_closed && short_read_drains {
                return;
            }
        }
    }

    /// A settling run: the connection's answer that settles it passes the barrier.
    #[inline]
    fn arrive(&mut self, slot: usize) {
        let conn = &mut self.connections[slot];
        if let (Some(settle), false) = (self.plan.settle, conn.arrived) {
            if conn.answered >= SETTLE_ANSWERS {
                conn.arrived = true;
                settle.arrive();
            }
        }
    }

    /// Acts on what framing a read produced: a framing failure fails the connection; a server
    /// that closes (or a run without keep-alive) gets a new connection once nothing is in
    /// flight; otherwise the connection is queued to send again. False when the connection
    /// was failed or replaced.
    fn framed(&mut self, slot: usize, framed: Result<Framed, FailureKind>) -> bool {
        let framed = match framed {
            Ok(framed) => framed,
            Err(kind) => {
                self.fail(slot, kind);
                return false;
            }
        };
        if framed.close || !self.plan.config.keepalive {
            if self.connections[slot].in_flight.is_empty() {
                self.reconnect(slot);
                return false;
            }
            if framed.close {
                // The server closes with requests still pipelined behind this response.
                self.fail(slot, FailureKind::Read);
                return false;
            }
        }
        self.queue_send(slot);
        true
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

    /// The server closed: that ends a close-delimited response; otherwise it loses what is in
    /// flight (a read failure) or was just an idle keep-alive connection being closed.
    fn on_peer_closed(&mut self, slot: usize) {
        let now = Instant::now();
        let conn = &mut self.connections[slot];
        conn.frame_eof(&mut self.recorder, now);
        self.arrive(slot);
        let conn = &self.connections[slot];
        if conn.in_flight.is_empty() {
            self.reconnect(slot);
        } else {
            self.fail(slot, FailureKind::Read);
        }
    }

    /// Fires the timers that are due: reconnects after a failed connect, and rate-mode sends.
    fn run_due_wakeups(&mut self, now: Instant) {
        while let Some(slot) = self.wakeups.pop_due(now) {
            match self.connections[slot].phase {
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
                Phase::Disconnected { retry_at }
                    if retry_at <= now && !self.wakeups.pending(slot) =>
                {
                    self.connect(slot, now);
                }
                _ => {}
            }
        }
    }
}

/// How a run ends: closed and rate runs stop sending at their deadline, then drain, so that
/// the requests in flight are answered with their true latency. Those answers are latency
/// samples but not responses of the run (its throughput and length end at the deadline). What
/// is still in flight after the drain (or when the stop flag ends a run) is censored, recorded
/// by [`crate::load::stats`] at its age. Without the drain every closed-loop connection would end
/// with a young request in flight, and every run would look censored.
///
/// How long the drain after a deadline may last: `DRAIN_MIN` or `DRAIN_P99_FACTOR` times the
/// p99 so far (µs), whichever is longer, capped by the timeout.
pub fn drain_grace(timeout: Duration, p99_us: u64) -> Duration {
    DRAIN_MIN
        .max(Duration::from_micros(p99_us).saturating_mul(DRAIN_P99_FACTOR))
        .min(timeout)
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
    fn shares_add_up_exactly() {
        let shares = split_shares(10, 3, &Mode::Count { requests: 1001 });
        let conns: Vec<usize> = shares.iter().map(|s| s.connections).collect();
        assert_eq!(conns, vec![4, 3, 3]);
        let firsts: Vec<usize> = shares.iter().map(|s| s.first_connection).collect();
        assert_eq!(firsts, vec![0, 4, 7]);
        let total: u64 = shares.iter().map(|s| s.requests.unwrap()).sum();
        assert_eq!(total, 1001);
        let small = split_shares(3, 2, &Mode::Count { requests: 1 });
        assert_eq!(small.iter().map(|s| s.requests.unwrap()).sum::<u64>(), 1);
    }
}
