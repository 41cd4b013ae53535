//! The gate: an open-loop load (Poisson arrivals at a fixed rate) offered to a server through a
//! client-side limiter, as the libraries put one in front of a call. A request arriving while
//! fewer than the controller's limit are in flight is sent; otherwise it is rejected at once
//! (shed: counted, never sent, never a server error). Every admitted request's end reaches the
//! controller, which moves the limit by its own rule ([`super::controllers`]).
//!
//! Written here, not on the load engine: the engine sends a request per connection when its
//! schedule says, and keeps every request it cannot send; a gate decides per arrival and drops
//! what it refuses. Arrivals are timed on this thread (a sleep to each one's instant); the
//! requests go out on a one-thread tokio runtime, each on an idle keep-alive connection or a
//! new one, so the connections open are at most the most ever in flight. Responses are framed
//! by the load engine's sans-IO framer.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::controllers::{Controller, Ending, Nanos, Outcome};
use crate::load::{LatencyHistogram, LatencySummary, ResponseFramer};

/// How often the limit, the requests in flight and the counts are sampled into the series.
pub const SERIES_STEP: Duration = Duration::from_millis(50);

/// One stretch of a run with its own request (a wait that doubles, then comes back).
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// When it starts, from the start of the run.
    pub from: Duration,
    /// The request's path and query.
    pub path: String,
}

/// What one gated run does.
#[derive(Debug, Clone)]
pub struct GatePlan {
    pub addr: SocketAddr,
    /// The `Host` header.
    pub host: String,
    /// At least one; the first starts at 0.
    pub phases: Vec<Phase>,
    /// Mean arrivals per second.
    pub rate: f64,
    pub duration: Duration,
    /// An admitted request unanswered this long is a timeout (a drop to the controller).
    pub timeout: Duration,
    pub seed: u64,
}

/// One step of the series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Tick {
    /// Seconds from the start, at the end of the step.
    pub t_s: f64,
    pub limit: usize,
    pub inflight: usize,
    /// Arrivals, admissions, sheds and answered-2xx completions during the step.
    pub offered: u32,
    pub admitted: u32,
    pub shed: u32,
    pub ok: u32,
}

/// What a phase measured over its second half (the limit settled, or not).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PhaseCounts {
    pub from_s: f64,
    pub to_s: f64,
    pub path: String,
    /// Admitted requests of the second half answered 2xx, by latency (admission to answer).
    #[serde(skip)]
    pub latency: Option<Box<LatencyHistogram>>,
    pub latency_us: LatencySummary,
}

/// What a gated run counted. `offered = admitted + shed` and `admitted = answered + timeouts
/// + failed + unfinished`, exactly.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GateCounts {
    pub offered: u64,
    pub admitted: u64,
    pub shed: u64,
    /// Responses of any status.
    pub answered: u64,
    pub ok: u64,
    pub status: BTreeMap<u16, u64>,
    pub timeouts: u64,
    pub failed: u64,
    /// Still in flight when the drain after the run ended.
    pub unfinished: u64,
    /// The most connections open at once.
    pub connections: usize,
    /// How late the gate saw arrivals, after their drawn instants (mean and worst, us): the
    /// gate's own lag, which a controller sees as load that came late.
    pub arrival_late_mean_us: f64,
    pub arrival_late_max_us: f64,
    pub duration_s: f64,
    pub series: Vec<Tick>,
    pub phases: Vec<PhaseCounts>,
    /// Set when the run was stopped early (a signal): its figures cover what ran.
    #[serde(default)]
    pub interrupted: bool,
}

/// The state arrivals and completions share.
struct Shared {
    controller: Box<dyn Controller>,
    inflight: usize,
    counts: GateCounts,
    /// The step being counted.
    step: Tick,
    phase_starts: Vec<Nanos>,
    phase_ends: Vec<Nanos>,
}

impl Shared {
    /// The phase a request admitted at `start` belongs to, if in the second half of it.
    fn settled_phase(&self, start: Nanos) -> Option<usize> {
        let i = self.phase_starts.iter().rposition(|&s| s <= start)?;
        let (from, to) = (self.phase_starts[i], self.phase_ends[i]);
        (start >= from + (to - from) / 2 && start < to).then_some(i)
    }

    fn end(&mut self, now: Nanos, outcome: Outcome, status: Option<u16>) {
        self.inflight -= 1;
        match outcome.ending {
            Ending::Answered | Ending::BackPressure => {
                let status = status.unwrap_or(0);
                self.counts.answered += 1;
                *self.counts.status.entry(status).or_default() += 1;
                if (200..300).contains(&status) {
                    self.counts.ok += 1;
                    self.step.ok += 1;
                    if let Some(i) = self.settled_phase(outcome.start) {
                        let h = self.counts.phases[i]
                            .latency
                            .get_or_insert_with(|| Box::new(LatencyHistogram::new()));
                        h.record(Duration::from_nanos(outcome.rtt));
                    }
                }
            }
            Ending::Timeout => self.counts.timeouts += 1,
            Ending::Failed => self.counts.failed += 1,
        }
        self.controller.on_outcome(now, &outcome);
    }
}

/// Idle keep-alive connections, most recently used first.
struct Idle {
    streams: Mutex<Vec<TcpStream>>,
    open: Mutex<(usize, usize)>,
}

impl Idle {
    fn opened(&self) {
        let mut o = self.open.lock().unwrap_or_else(|p| p.into_inner());
        o.0 += 1;
        o.1 = o.1.max(o.0);
    }
    fn closed(&self) {
        let mut o = self.open.lock().unwrap_or_else(|p| p.into_inner());
        o.0 = o.0.saturating_sub(1);
    }
}

struct Job {
    start: Nanos,
    started: Instant,
    inflight: usize,
    request: Arc<[u8]>,
}

impl Shared {
    /// The state of a run of `plan` before its first arrival.
    fn new(plan: &GatePlan, controller: Box<dyn Controller>) -> Shared {
        let duration_ns = plan.duration.as_nanos() as Nanos;
        let starts: Vec<Nanos> = plan
            .phases
            .iter()
            .map(|p| p.from.as_nanos() as Nanos)
            .collect();
        let mut ends: Vec<Nanos> = starts.iter().skip(1).copied().collect();
        ends.push(duration_ns);
        let phases = plan
            .phases
            .iter()
            .zip(starts.iter().zip(&ends))
            .map(|(p, (&from, &to))| PhaseCounts {
                from_s: from as f64 / 1e9,
                to_s: to as f64 / 1e9,
                path: p.path.clone(),
                ..PhaseCounts::default()
            })
            .collect();
        Shared {
            controller,
            inflight: 0,
            counts: GateCounts {
                phases,
                ..GateCounts::default()
            },
            step: Tick::default(),
            phase_starts: starts,
            phase_ends: ends,
        }
    }

    /// What the run counted, once it is over: the unfinished, the means, the summaries.
    fn finish(&mut self, interrupted: bool, connections: usize) -> GateCounts {
        let mut counts = std::mem::take(&mut self.counts);
        counts.unfinished = self.inflight as u64;
        counts.interrupted = interrupted;
        counts.connections = connections;
        if counts.offered > 0 {
            counts.arrival_late_mean_us /= counts.offered as f64;
        }
        for p in &mut counts.phases {
            if let Some(h) = &p.latency {
                p.latency_us = h.summary();
            }
        }
        counts
    }
}

/// Runs `plan` through `controller`; `stop` ends it early with what was counted.
pub fn run(
    plan: &GatePlan,
    controller: Box<dyn Controller>,
    stop: &AtomicBool,
) -> anyhow::Result<GateCounts> {
    let requests: Vec<Arc<[u8]>> = plan
        .phases
        .iter()
        .map(|p| {
            format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", p.path, plan.host)
                .into_bytes()
                .into()
        })
        .collect();
    let shared = Arc::new(Mutex::new(Shared::new(plan, controller)));
    let starts = lock(&shared).phase_starts.clone();
    let idle = Arc::new(Idle {
        streams: Mutex::new(Vec::new()),
        open: Mutex::new((0, 0)),
    });
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the gate's runtime")?;
    let sender = {
        let shared = Arc::clone(&shared);
        let idle = Arc::clone(&idle);
        let (addr, timeout) = (plan.addr, plan.timeout);
        std::thread::Builder::new()
            .name("gate-requests".into())
            .spawn(move || {
                runtime.block_on(serve_jobs(rx, shared, idle, addr, timeout));
                runtime.shutdown_background();
            })
            .context("starting the gate's request thread")?
    };
    let t0 = Instant::now();
    let interrupted = arrivals(plan, &shared, &tx, &requests, &starts, t0, stop);
    // The drain: what was admitted may still end, for at most the timeout.
    let drain_end = Instant::now() + plan.timeout + Duration::from_millis(50);
    while Instant::now() < drain_end && lock(&shared).inflight > 0 {
        std::thread::sleep(Duration::from_millis(2));
        let now = t0.elapsed().as_nanos() as Nanos;
        lock(&shared).controller.on_time(now);
    }
    drop(tx);
    let _ = sender.join();
    let connections = idle.open.lock().unwrap_or_else(|p| p.into_inner()).1;
    let counts = lock(&shared).finish(interrupted, connections);
    Ok(counts)
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// The arrival loop on this thread; true if `stop` ended it early.
fn arrivals(
    plan: &GatePlan,
    shared: &Mutex<Shared>,
    tx: &tokio::sync::mpsc::UnboundedSender<Job>,
    requests: &[Arc<[u8]>],
    starts: &[Nanos],
    t0: Instant,
    stop: &AtomicBool,
) -> bool {
    let duration_ns = plan.duration.as_nanos() as Nanos;
    let step_ns = SERIES_STEP.as_nanos() as Nanos;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(plan.seed);
    let gap = Exp::new(plan.rate).expect("a positive rate");
    let mut next_arrival = (gap.sample(&mut rng) * 1e9) as Nanos;
    let mut next_step = step_ns;
    loop {
        if stop.load(Ordering::Relaxed) {
            let mut s = lock(shared);
            let now = t0.elapsed().as_nanos() as Nanos;
            close_step(&mut s, now.min(duration_ns));
            s.counts.duration_s = now.min(duration_ns) as f64 / 1e9;
            return true;
        }
        let due = next_arrival.min(next_step);
        if due > duration_ns {
            let mut s = lock(shared);
            while next_step <= duration_ns {
                close_step(&mut s, next_step);
                next_step += step_ns;
            }
            s.counts.duration_s = duration_ns as f64 / 1e9;
            return false;
        }
        let now = t0.elapsed().as_nanos() as Nanos;
        if now < due {
            std::thread::sleep(Duration::from_nanos((due - now).min(20_000_000)));
            continue;
        }
        let mut s = lock(shared);
        s.controller.on_time(now);
        if next_step <= next_arrival {
            close_step(&mut s, next_step);
            next_step += step_ns;
            continue;
        }
        let late_us = (now - next_arrival) as f64 / 1e3;
        s.counts.arrival_late_mean_us += late_us;
        s.counts.arrival_late_max_us = s.counts.arrival_late_max_us.max(late_us);
        next_arrival += ((gap.sample(&mut rng) * 1e9) as Nanos).max(1);
        s.counts.offered += 1;
        s.step.offered += 1;
        if s.inflight < s.controller.limit() {
            s.inflight += 1;
            let inflight = s.inflight;
            s.controller.on_admit(now, inflight);
            s.counts.admitted += 1;
            s.step.admitted += 1;
            let phase = starts.iter().rposition(|&p| p <= now).unwrap_or(0);
            let job = Job {
                start: now,
                started: Instant::now(),
                inflight,
                request: Arc::clone(&requests[phase]),
            };
            drop(s);
            let _ = tx.send(job);
        } else {
            s.counts.shed += 1;
            s.step.shed += 1;
        }
    }
}

/// Ends the series step at `at`: the limit and the requests in flight then, the counts of it.
fn close_step(s: &mut Shared, at: Nanos) {
    let mut tick = s.step;
    tick.t_s = at as f64 / 1e9;
    tick.limit = s.controller.limit();
    tick.inflight = s.inflight;
    s.counts.series.push(tick);
    s.step = Tick::default();
}

async fn serve_jobs(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Job>,
    shared: Arc<Mutex<Shared>>,
    idle: Arc<Idle>,
    addr: SocketAddr,
    timeout: Duration,
) {
    while let Some(job) = rx.recv().await {
        let shared = Arc::clone(&shared);
        let idle = Arc::clone(&idle);
        tokio::spawn(async move {
            let result = tokio::time::timeout(timeout, exchange(&idle, addr, &job.request)).await;
            let elapsed = job.started.elapsed().as_nanos() as Nanos;
            let (ending, status) = match result {
                Ok(Ok(status)) if status == 429 || status == 503 => {
                    (Ending::BackPressure, Some(status))
                }
                Ok(Ok(status)) => (Ending::Answered, Some(status)),
                Ok(Err(_)) => (Ending::Failed, None),
                Err(_) => (Ending::Timeout, None),
            };
            let outcome = Outcome {
                start: job.start,
                rtt: elapsed.max(1),
                inflight: job.inflight,
                ending,
            };
            lock(&shared).end(job.start + elapsed.max(1), outcome, status);
        });
    }
}

/// Sends `request` on an idle connection (or a new one) and reads one response; the
/// connection goes back to the idle ones unless the server will close it. Its status.
async fn exchange(idle: &Idle, addr: SocketAddr, request: &[u8]) -> std::io::Result<u16> {
    let reused = idle.streams.lock().unwrap_or_else(|p| p.into_inner()).pop();
    if let Some(mut stream) = reused {
        match one_response(&mut stream, request).await {
            Ok(answer) => return Ok(keep(idle, stream, answer)),
            // The server closed it while idle: the request goes again, on a new connection.
            Err(_) => idle.closed(),
        }
    }
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    idle.opened();
    match one_response(&mut stream, request).await {
        Ok(answer) => Ok(keep(idle, stream, answer)),
        Err(e) => {
            idle.closed();
            Err(e)
        }
    }
}

/// Puts `stream` back with the idle ones unless the server closes it; the status.
fn keep(idle: &Idle, stream: TcpStream, (status, close): (u16, bool)) -> u16 {
    if close {
        idle.closed();
    } else {
        idle.streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(stream);
    }
    status
}

/// Writes the request and frames one response: its status and whether the server closes.
async fn one_response(stream: &mut TcpStream, request: &[u8]) -> std::io::Result<(u16, bool)> {
    stream.write_all(request).await?;
    let mut framer = ResponseFramer::Http(crate::load::HttpResponseFramer::new("GET"));
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return match framer.on_eof() {
                Some(info) => Ok((info.status, true)),
                None => Err(std::io::ErrorKind::UnexpectedEof.into()),
            };
        }
        pending.extend_from_slice(&chunk[..n]);
        loop {
            let fed = framer
                .feed(&pending)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            pending.drain(..fed.consumed);
            if let Some(info) = fed.complete {
                return Ok((info.status, info.close));
            }
            if fed.consumed == 0 || pending.is_empty() {
                break;
            }
        }
    }
}
