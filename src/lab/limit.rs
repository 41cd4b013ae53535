//! What limited a point, with the figures that show it: the server's cores, its pool, a
//! runtime lock, the offered load's own wait, connections its shape leaves unanswered, failed
//! requests, or the lab itself (the load generator). A pure function of the measured point and
//! the server's shape ([`Shape`]), so every rule is tested on known figures; the thresholds
//! and the measurement behind each are in docs/DESIGN.md. A point no rule explains says so,
//! with its figures, rather than take the nearest name.

use super::plan::{PointPlan, TargetSpec};
pub use super::results::{Limit, LimitKind};
use super::results::{PointResult, ServerUsage};
use super::stats::requests_in_flight;
use crate::arch::Arch;
use crate::load::SATURATED_BUSY_FRACTION;
use crate::render::numbers::thousands;

/// A share of the cores the server may use at or above which its cores are its limit.
pub const CORES_BUSY: f64 = 0.9;
/// Throughput within this fraction of the pool's own bound, W / (C + W + RTT): every worker
/// was held.
pub const POOL_HELD: f64 = 0.1;
/// Throughput within this fraction of N / (C + W + RTT): the offered load set the pace.
pub const WAIT_REACHED: f64 = 0.1;
/// Under this share of its cores the server counts as idle between requests.
pub const IDLE_BELOW: f64 = 0.5;
/// A runtime lock: the busiest process's CPU is spread over more than this many threads
/// taking turns (the inverse Simpson index of their shares) while it uses about one core
/// ([`LOCK_CORE`]) and cores are free. One thread doing the work (an event loop) is about 1.
pub const LOCK_THREADS: f64 = 1.8;
pub const LOCK_CORE: (f64, f64) = (0.75, 1.15);
/// ... and at least this much of a core stood idle on the machine, while the requests
/// queued in the server: at least this share of the connections' requests in it (Little's
/// law), not in the load generator.
pub const LOCK_FREE: f64 = 0.5;
pub const LOCK_QUEUED: f64 = 0.9;
/// ... and at least this many requests in the server beyond those in their wait (Little's
/// law: throughput x W of them are waiting): about two (0.9 of two, as [`LOCK_QUEUED`] reads
/// the queue) that want a CPU at once, one waiting on the other. Fewer is threads waiting for the next request, not for each other (uring/2,
/// threaded and prethreaded/16 at 16 connections and a wait of 10x C read `lock` with 1.03 of
/// a core over 2.0 threads while most requests sat in their waits).
pub const LOCK_CONTENDING: f64 = 1.8;
/// One thread did a process's work when its CPU was spread over at most this many threads.
pub const ONE_THREAD: f64 = 1.3;
/// The path's relay, not the path it stands for, set the figures when the packets it wrote
/// left on average at least this share of the round trip after they were due (and at least
/// [`PATH_LATE_MIN_US`]: its poll wakes in whole milliseconds, so a fraction of one is its
/// resolution, not a distortion), or it dropped at least [`PATH_DROPPED`] of them for want of
/// room (beyond the path's own `loss`).
pub const PATH_LATE: f64 = 0.05;
pub const PATH_LATE_MIN_US: f64 = 1000.0;
/// ... or the slowest 1% of its packets were at least this share of the round trip late (and
/// at least [`PATH_LATE_P99_MIN_US`]).
pub const PATH_LATE_P99: f64 = 0.25;
pub const PATH_LATE_P99_MIN_US: f64 = 5000.0;
pub const PATH_DROPPED: f64 = 0.001;
/// How a failure caused by a memory limit says so (the lab writes it, the rules read it).
pub const OOM_KILLED: &str = "the OOM killer killed it";

/// A memory limit held the server when its tasks reached it at least this many times in the
/// window (each a reclaim, or an allocation refused).
pub const MEMORY_HITS: u64 = 10;
/// A CPU quota held the server when it ran out in at least this share of the periods...
pub const THROTTLED_PERIODS: f64 = 0.1;
/// ... while the server used at least this share of the quota.
pub const QUOTA_USED: f64 = 0.8;

/// An HTTP/2 connection's one task is the bound when the machine had at least this much of a
/// core idle (beyond it, the machine's cores are: [`cores`] reads them first at 90% busy).
pub const CONNECTION_FREE: f64 = 0.2;
/// Requests that waited on the client for a stream under the server's cap took at least this
/// share of the answered requests' latency: the cap, not the server's work, set the pace.
pub const STREAM_WAITED: f64 = 0.1;

/// A connection's cycle is its round trip when what the server's and the generator's CPU and
/// the wait leave of it, the hand-off between them (a wake-up on each side and the loopback),
/// is at most this many microseconds a request.
pub const HANDOFF_MAX_US: f64 = 150.0;

/// Each connection's two ends took turns (one generator thread per connection): the server
/// and the generator together kept at least this much of a core busy per connection ...
pub const TURNS_BUSY: f64 = 0.9;
/// ... of which the generator's threads took at least this much of a core each: its own time
/// per request was a good part of every cycle ...
pub const TURNS_CLIENT: f64 = 0.25;
/// ... and together at most this much a connection: past it the two ends ran side by side,
/// not in series (h2o's one connection at 1.19 of a core beside our generator's 0.26).
pub const TURNS_SERIES: f64 = 1.3;
/// An HTTP/2 connection's one task at about a core: its thread, and the kernel's network work
/// charged to it (h2o's one connection of 100 streams read 0.86 to 1.26 here).
pub const CONNECTION_CORE: (f64, f64) = (0.75, 1.3);

/// The load a point offered, in words: `64 connections`, or over HTTP/2 `100 in flight (10
/// connections x 10 streams)`.
fn offered(p: &PointResult) -> String {
    let connections = |n: u32| format!("{n} connection{}", if n == 1 { "" } else { "s" });
    match p.streams {
        Some(streams) if streams > 1 => format!(
            "{} in flight ({} x {streams} streams)",
            p.concurrency,
            connections(p.concurrency / streams)
        ),
        _ => connections(p.concurrency),
    }
}

/// A share as a whole percentage: `92%`.
fn pct(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// What the rules need to know of the server and the load beyond the measured point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Workers that each hold a request while it runs (a pool of threads or processes).
    pub pool: Option<u32>,
    /// Each worker holds one keep-alive connection for as long as it lives.
    pub holds_connections: bool,
    /// The cores the architecture can use at most (1 for one thread), before its affinity.
    pub parallelism: f64,
    /// The wait a request asks for, and the path's round trip, ms.
    pub wait_ms: f64,
    /// The wait holds the worker that runs the request (a blocking wait, or `/sleep`); an
    /// async wait on `/work` frees it for another request meanwhile.
    pub wait_holds_worker: bool,
    pub rtt_ms: f64,
    /// The closed loop (the connections set the load).
    pub closed: bool,
    /// The machine's cores.
    pub cores: u32,
    /// No lock is held by a request on the server's way: our own architectures on every route
    /// but the guestbook's (its SQLite store serializes writers), a URL list (which may hold
    /// it) aside. Their threads taking turns are handing requests along (a loop and its
    /// workers), never waiting for a lock.
    pub takes_no_lock: bool,
}

impl Shape {
    /// The shape of a plan's server on a machine of `cores` cores.
    pub fn of(plan: &PointPlan, cores: u32) -> Shape {
        let arch = match &plan.point.target {
            TargetSpec::Ours { arch, .. } => Some(*arch),
            TargetSpec::External(_) => None,
        };
        let pool = arch
            .filter(|a| a.pool_holds_requests())
            .and_then(|_| Some(plan.point.workers.unwrap_or(0)).filter(|w| *w > 0));
        let cores_f = f64::from(cores.max(1));
        Shape {
            pool,
            holds_connections: arch.is_some_and(Arch::holds_connections),
            // Replicas each bring their own loops and pools, within the machine's cores.
            // Ours as its architecture says; another server, all of them.
            parallelism: (arch.map_or(cores_f, |a| a.parallelism(cores_f))
                * f64::from(plan.setup.replicas.max(1)))
            .min(cores_f),
            wait_ms: plan.point.workload.wait_ms(),
            wait_holds_worker: wait_holds_worker(&plan.point.workload.route),
            rtt_ms: plan.setup.net.map_or(0.0, |n| n.rtt_us as f64 / 1000.0),
            closed: plan.setup.mode == super::plan::LoadMode::Closed,
            cores: cores.max(1),
            takes_no_lock: arch.is_some()
                && plan.point.workload.urls.is_none()
                && path_of(&plan.point.workload.route) != "/guestbook",
        }
    }
}

/// Whether a route's wait holds the worker that runs it: all but `/work`'s async waits.
fn wait_holds_worker(route: &str) -> bool {
    let query = route.split_once('?').map_or("", |(_, q)| q);
    path_of(route) != "/work" || query.split('&').any(|kv| kv == "wait=blocking")
}

/// A route's path, its query left off.
fn path_of(route: &str) -> &str {
    route.split_once('?').map_or(route, |(path, _)| path)
}

/// What limited `p`, a point measured on a server of `shape`.
pub fn limit_of(p: &PointResult, shape: &Shape) -> Limit {
    let limit = |kind, evidence: String| Limit { kind, evidence };
    if !p.ok {
        let failure = p.failure.as_deref().unwrap_or("it did not run");
        let first = failure.lines().next().unwrap_or(failure);
        let kind = if first.contains(OOM_KILLED) {
            LimitKind::Memory
        } else {
            LimitKind::Errors
        };
        return limit(kind, format!("the point failed: {first}"));
    }
    if let Some(found) = path(p).or_else(|| memory(p)) {
        return found;
    }
    if let Some(cause) = p.failure_cause() {
        return limit(LimitKind::Errors, format!("requests failed: {cause}"));
    }
    let f = Figures::of(p, shape);
    if p.generator_bound {
        let waited = match f.client_waited_per_thread {
            w if w > 0.0 => format!(" and waited {} of one for a CPU (its core shared)", pct(w)),
            _ => String::new(),
        };
        return limit(
            LimitKind::Generator,
            format!(
                "the load generator used {} of a core per thread{waited} while the server used \
                 {} of its {:.1} cores: the figure is the lab's, not the server's",
                pct(f.client_per_thread),
                pct(f.used / f.room.max(0.01)),
                f.room
            ),
        );
    }
    if let Some(found) = stream_cap(p)
        .or_else(|| starved(p, shape, &f))
        .or_else(|| path_bound(p, shape, &f))
        .or_else(|| bottleneck_bound(p, &f))
        .or_else(|| quota(p, &f))
        .or_else(|| cores(p, &f))
    {
        return found;
    }
    connection(p, &f)
        .or_else(|| lock(p, &f, shape))
        .or_else(|| queued_for_cores(p, &f))
        .or_else(|| pool(p, shape, &f))
        .or_else(|| held(p, shape, &f))
        .or_else(|| wait(p, shape, &f))
        .or_else(|| round_trip(p, shape, &f))
        .or_else(|| late_waits(p, shape, &f))
        .or_else(|| turns(p, &f))
        .or_else(|| generator_core(p, &f))
        .unwrap_or_else(|| {
            limit(
                LimitKind::Unexplained,
                format!(
                    "no rule fits: the server used {:.2} of {:.1} cores, held {:.1} requests \
                     of {}, its tasks waited {} µs a request for a CPU; the load \
                     generator used {:.2} cores ({} thread(s)), the machine {:.2} of {:.0}",
                    f.used,
                    f.room,
                    f.in_server,
                    offered(p),
                    thousands(f.runqueue_us),
                    f.client,
                    p.figures.client.threads,
                    f.machine_busy,
                    f.allowed
                ),
            )
        })
}

/// A point's own bound, requests a second: what its server could serve at the CPU it spent a
/// request, `s`, on the cores it could use less what the rest of the machine kept busy in the
/// window (`room / s`), and in a closed loop `N / (s + g + W + RTT)`, each connection's
/// cycle holding the server's CPU, the generator's (`g`, a request's own send and read), the
/// wait and the path. Unlike the workload's `min(cores / C, N / (C + W))`, it counts what a
/// request costs this server and what the lab's generator takes of the machine: a point at
/// it is at its real limit. 0 where the server's CPU is not known.
pub fn own_bound_rps(p: &PointResult, shape: &Shape) -> f64 {
    let requests = p.figures.requests;
    let s_us = p.figures.server.cpu_us_per_request(requests);
    if !p.ok || s_us <= 0.0 || requests == 0 || p.figures.server.cpu_unavailable {
        return 0.0;
    }
    let f = Figures::of(p, shape);
    let g_us = p.figures.client.cpu_s * 1e6 / requests as f64;
    // What the rest of the machine (the generator, and anything else) kept busy in the window,
    // from the machine's own count where it was read: the generator's CPU spans its whole run,
    // settling 4,096 connections included, and read as a share of the window it left the
    // server less room than it had (winners 12 to 22% over their bound).
    // Pinned apart (fewer CPUs allowed than the machine has), nothing else shares them.
    let others = if f.allowed < f64::from(shape.cores) {
        0.0
    } else {
        (f.machine_busy - f.used).max(0.0)
    };
    let cores = room_beside(shape, f.allowed, others, &p.figures.server) * 1e6 / s_us;
    if !shape.closed {
        return cores;
    }
    let cycle_us = s_us + g_us + (shape.wait_ms + shape.rtt_ms) * 1000.0;
    cores.min(f64::from(p.concurrency) * 1e6 / cycle_us)
}

/// The cores a server could use beside `others` busy on its `allowed` CPUs: its parallelism
/// within them, at least half a core, within its quota where it has one.
fn room_beside(shape: &Shape, allowed: f64, others: f64, server: &ServerUsage) -> f64 {
    let room = shape
        .parallelism
        .min(allowed)
        .min((allowed - others).max(0.5));
    if server.quota_cores > 0.0 {
        room.min(server.quota_total())
    } else {
        room
    }
}

/// The figures the rules read.
struct Figures {
    /// Cores the server used, and those it could have: its parallelism within its affinity,
    /// less what the load generator took where they share the machine.
    used: f64,
    room: f64,
    /// Throughput in whole cycles where counted, and the requests in the server by Little's law.
    rps: f64,
    in_server: f64,
    /// Cores the busiest process used.
    process_cores: f64,
    /// Of a core, per load thread: what it ran, and what it waited on a run queue for one.
    client_per_thread: f64,
    client_waited_per_thread: f64,
    runqueue_us: f64,
    /// The CPUs the server may use, the load generator's cores, and the whole machine's
    /// busy cores (the server's own figure where that was not read).
    allowed: f64,
    client: f64,
    machine_busy: f64,
}

impl Figures {
    fn of(p: &PointResult, shape: &Shape) -> Figures {
        let s = &p.figures.server;
        let share = |cpu_s: f64| s.busy(cpu_s, p.figures.duration_s).unwrap_or(0.0);
        let allowed = match s.cores_allowed {
            0 => f64::from(shape.cores),
            n => f64::from(n),
        };
        let (used, client) = (share(s.cpu_s), share(p.figures.client.cpu_s));
        // Pinned apart from the generator (fewer CPUs allowed than the machine has), the
        // server does not share its cores with it.
        let shared = if allowed < f64::from(shape.cores) {
            0.0
        } else {
            client
        };
        let room = room_beside(shape, allowed, shared, s);
        let rps = p.whole_cycle_rps();
        let threads = f64::from(p.figures.client.threads.max(1));
        Figures {
            used,
            room,
            rps,
            in_server: requests_in_flight(rps, p.figures.latency_us.mean),
            process_cores: share(s.busiest_cpu_s),
            client_per_thread: client / threads,
            client_waited_per_thread: share(p.figures.client.wait_s) / threads,
            runqueue_us: s.runqueue_wait_s * 1e6 / s.answered_at_least(p.figures.requests) as f64,
            allowed,
            client,
            machine_busy: if s.machine_busy_cores > 0.0 {
                s.machine_busy_cores
            } else {
                used + client
            },
        }
    }
}

/// A memory limit: the OOM killer took one of the server's processes in the window, or its
/// tasks reached the limit at least [`MEMORY_HITS`] times while holding within 5% of it.
fn memory(p: &PointResult) -> Option<Limit> {
    let s = &p.figures.server;
    if s.memory_limit_bytes == 0 {
        return None;
    }
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    let full = s.memory_peak_bytes as f64 >= 0.95 * s.memory_limit_bytes as f64;
    (s.oom_kills > 0 || (s.memory_limit_hits >= MEMORY_HITS && full)).then(|| Limit {
        kind: LimitKind::Memory,
        evidence: format!(
            "the server reached its {:.0} MiB memory limit (peak {:.1} MiB): {} times in the \
             window, and the OOM killer killed {} of its processes",
            mib(s.memory_limit_bytes),
            mib(s.memory_peak_bytes),
            thousands(s.memory_limit_hits as f64),
            s.oom_kills
        ),
    })
}

/// The path as asked for: throughput within [`WAIT_REACHED`] of N / (C + W + RTT + T), T the
/// mean response's time on one connection's link at the path's rate and at least the rest of
/// the cycle, with the server idle: the link set the pace, whatever the server.
fn path_bound(p: &PointResult, shape: &Shape, f: &Figures) -> Option<Limit> {
    let n = p.figures.net.as_ref()?;
    // The link sets the pace where a response's time on it is at least the rest of the cycle
    // (a round trip alone is the offered load's own wait, judged as `wait`).
    if !shape.closed || n.transfer_ms <= 0.0 || n.transfer_ms < cycle_ms(p, shape) {
        return None;
    }
    let cycle_ms = cycle_ms(p, shape) + n.transfer_ms;
    let bound = f64::from(p.concurrency) * 1000.0 / cycle_ms.max(1e-6);
    let rps = f.rps;
    (rps >= (1.0 - WAIT_REACHED) * bound && f.used < IDLE_BELOW * f.room).then(|| Limit {
        kind: LimitKind::Path,
        evidence: format!(
            "{} req/s is {} of N/(C+W+RTT+T) = {} req/s for {}: each response of \
             {} bytes takes {} on its {} link, so the path set the pace, the server busy {:.2} \
             of {:.1} cores: the figure is the path's, not the server's",
            thousands(rps),
            pct(rps / bound),
            thousands(bound),
            offered(p),
            thousands(n.response_bytes),
            crate::render::numbers::duration_us(n.transfer_ms * 1000.0),
            crate::net::rate_text(n.spec.rate_bps.unwrap_or(0)),
            f.used,
            f.room
        ),
    })
}

/// The shared bottleneck as asked for: responses a second within [`WAIT_REACHED`] of what
/// its rate carries (B / the mean response's bits), with the server idle: the bottleneck all
/// connections share set the pace, whatever the server.
fn bottleneck_bound(p: &PointResult, f: &Figures) -> Option<Limit> {
    let n = p.figures.net.as_ref()?;
    let bps = n.spec.bottleneck_bps? as f64;
    if n.response_bytes <= 0.0 {
        return None;
    }
    let bound = bps / (n.response_bytes * 8.0);
    let rps = f.rps;
    (rps >= (1.0 - WAIT_REACHED) * bound && f.used < IDLE_BELOW * f.room).then(|| Limit {
        kind: LimitKind::Path,
        evidence: format!(
            "{} req/s of {} bytes is {} of the {} bottleneck's {} req/s, shared by {}, \
             the server busy {:.2} of {:.1} cores (a full queue dropped {} \
             packets): the figure is the path's, not the server's",
            thousands(rps),
            thousands(n.response_bytes),
            pct(rps / bound),
            crate::net::rate_text(bps as u64),
            thousands(bound),
            offered(p),
            f.used,
            f.room,
            thousands(n.queue_dropped as f64)
        ),
    })
}

/// The path's relay: packets written late against when the path was due to deliver them
/// (on average, or the slowest 1%), or dropped for want of room in the relay or at its devices,
/// beyond [`PATH_LATE`] or [`PATH_DROPPED`].
fn path(p: &PointResult) -> Option<Limit> {
    let n = p.figures.net.as_ref()?;
    let late = n.late_packets as f64 / n.written.max(1) as f64;
    let dropped = (n.overflowed + n.device_dropped) as f64 / n.packets.max(1) as f64;
    let rtt_us = n.spec.rtt_us as f64;
    let budget_us = (PATH_LATE * rtt_us).max(PATH_LATE_MIN_US);
    let tail_budget_us = (PATH_LATE_P99 * rtt_us).max(PATH_LATE_P99_MIN_US);
    let late_tail = n.late_p99_us >= tail_budget_us;
    (n.late_mean_us >= budget_us || late_tail || dropped >= PATH_DROPPED).then(|| Limit {
        kind: LimitKind::Path,
        evidence: format!(
            "the path's relay wrote its {} packets {} late on average{} (p99 {}, max {}; {} of \
             them more than 1 ms late) and dropped {} for want of room ({} at its devices), \
             using {:.2} s of CPU: the figure is the lab's, not the server's",
            thousands(n.written as f64),
            crate::render::numbers::duration_us(n.late_mean_us),
            if rtt_us > 0.0 {
                format!(
                    " ({} of the {} round trip)",
                    pct(n.late_mean_us / rtt_us),
                    crate::render::numbers::duration_us(rtt_us)
                )
            } else {
                String::new()
            },
            crate::render::numbers::duration_us(n.late_p99_us),
            crate::render::numbers::duration_us(n.late_max_us),
            pct(late),
            thousands((n.overflowed + n.device_dropped) as f64),
            thousands(n.device_dropped as f64),
            n.relay_cpu_s
        ),
    })
}

/// Connections left unanswered by the server's shape: a pool of connection-holding workers
/// smaller than the connections, or one thread serving one connection at a time.
fn starved(p: &PointResult, shape: &Shape, f: &Figures) -> Option<Limit> {
    if !p.starved {
        return None;
    }
    let stuck = p.figures.unanswered + p.errors_by_kind.timeout;
    let never = match stuck {
        0 => String::new(),
        1 => ", 1 request never answered".to_string(),
        n => format!(", {} requests never answered", thousands(n as f64)),
    };
    let evidence = match shape
        .pool
        .filter(|w| shape.holds_connections && *w < p.concurrency)
    {
        Some(w) => format!(
            "{w} workers each hold one keep-alive connection, of {} offered: \
             {:.1} requests in the server by Little's law{never}",
            offered(p),
            f.in_server
        ),
        None => format!(
            "{:.1} requests in the server by Little's law, of {} offered{never}",
            f.in_server,
            offered(p)
        ),
    };
    Some(Limit {
        kind: LimitKind::Starved,
        evidence,
    })
}

/// A CPU quota: the server's quota ran out in at least [`THROTTLED_PERIODS`] of the periods
/// while it used at least [`QUOTA_USED`] of it.
fn quota(p: &PointResult, f: &Figures) -> Option<Limit> {
    let s = &p.figures.server;
    if s.quota_cores <= 0.0 || s.quota_periods == 0 {
        return None;
    }
    let throttled = s.throttled_periods as f64 / s.quota_periods as f64;
    (throttled >= THROTTLED_PERIODS && f.used >= QUOTA_USED * s.quota_total()).then(|| Limit {
        kind: LimitKind::Quota,
        evidence: format!(
            "the server used {:.2} of its {} of CPU quota and was throttled in {} of {} \
             periods of {} ms ({:.2} s throttled over its CPUs in a {:.2} s window)",
            f.used,
            if s.replicas > 1 {
                format!(
                    "{} replicas' {} each",
                    s.replicas,
                    super::budget::cores_words(s.quota_cores)
                )
            } else {
                super::budget::cores_words(s.quota_cores)
            },
            pct(throttled),
            thousands(s.quota_periods as f64),
            super::cgroup::QUOTA_PERIOD_US / 1000,
            s.throttled_s,
            p.figures.duration_s
        ) + &if super::budget::is_oversized(p) {
            format!(
                "; it sees {} CPUs and ran more than its quota at once",
                s.cores_allowed
            )
        } else {
            String::new()
        },
    })
}

/// The cores: the server used at least [`CORES_BUSY`] of those it could, or one thread did
/// its work at about a core (an event loop: its one core is its bound, whatever is free).
fn cores(p: &PointResult, f: &Figures) -> Option<Limit> {
    if f.used >= CORES_BUSY * f.room {
        return Some(Limit {
            kind: LimitKind::Cores,
            evidence: format!(
                "the server used {:.2} of the {:.1} cores it could ({}); its tasks waited {} µs \
                 a request for a CPU",
                f.used,
                f.room,
                pct(f.used / f.room),
                thousands(f.runqueue_us)
            ),
        });
    }
    let s = &p.figures.server;
    if f.machine_busy >= CORES_BUSY * f.allowed && f.used >= IDLE_BELOW * f.room {
        return Some(Limit {
            kind: LimitKind::Cores,
            evidence: format!(
                "the machine's {:.0} cores were {} busy (the server {:.2} of them, the load \
                 generator {:.2}); its tasks waited {} µs a request for a CPU",
                f.allowed,
                pct(f.machine_busy / f.allowed),
                f.used,
                f.client,
                thousands(f.runqueue_us)
            ),
        });
    }
    let process_cores = f.process_cores;
    let one_thread = s.busiest_threads_sharing > 0.0 && s.busiest_threads_sharing <= ONE_THREAD;
    if !(one_thread && process_cores >= CORES_BUSY) {
        return None;
    }
    // Over fewer HTTP/2 connections than cores, the one thread at work is a connection's: the
    // server has more, and the connection kept the others idle.
    connection(p, f).or_else(|| {
        Some(Limit {
            kind: LimitKind::Cores,
            evidence: format!(
                "one thread did the work at {process_cores:.2} of a core (its process's CPU over \
             {:.1} threads), with {:.2} of {:.1} cores used: its one core is the bound",
                s.busiest_threads_sharing, f.used, f.room
            ),
        })
    })
}

/// HTTP/2 streams that queued on the client: the server announced a cap under the streams
/// asked for, and the requests that waited for a stream spent at least [`STREAM_WAITED`] of
/// the answered requests' latency doing so.
fn stream_cap(p: &PointResult) -> Option<Limit> {
    let streams = p.streams.filter(|s| *s > 1)?;
    let h2 = p.figures.http2?;
    let cap = h2.server_max_streams.filter(|c| *c < u64::from(streams))?;
    (h2.wait_share >= STREAM_WAITED).then(|| Limit {
        kind: LimitKind::Connection,
        evidence: format!(
            "the server allows {cap} streams a connection and {streams} were asked ({}): {} \
             requests waited on the client for a stream, {} of the requests' time",
            offered(p),
            thousands(h2.waits as f64),
            pct(h2.wait_share)
        ),
    })
}

/// An HTTP/2 connection's frames are read and written by one task (ours, nginx's and h2o's
/// workers alike), so the streams of `c` connections can use about `c` cores: the server used
/// about one core a connection, fewer connections than the cores it could use, the requests
/// were in the server, and the machine had [`CONNECTION_FREE`] to spare. (A runtime's worker threads
/// taking that one task in turn looks like [`lock`]'s turns; this rule comes first.)
fn connection(p: &PointResult, f: &Figures) -> Option<Limit> {
    let streams = p.streams.filter(|s| *s > 1)?;
    let connections = (p.concurrency / streams).max(1);
    let per = f.used / f64::from(connections);
    let about_a_core = (CONNECTION_CORE.0..=CONNECTION_CORE.1).contains(&per);
    let fewer = f64::from(connections) < f.allowed;
    let free = f.allowed - f.machine_busy.max(f.used + f.client) >= CONNECTION_FREE;
    let queued = f.in_server >= LOCK_QUEUED * f64::from(p.concurrency);
    (about_a_core && fewer && free && queued).then(|| Limit {
        kind: LimitKind::Connection,
        evidence: format!(
            "{}: the server used {:.2} cores, {per:.2} a connection, with {:.2} of the \
             machine's {:.0} busy: each connection's frames are read and written by one task, \
             so its streams share about one core",
            offered(p),
            f.used,
            f.machine_busy.max(f.used + f.client),
            f.allowed
        ),
    })
}

/// A runtime lock: the busiest process's CPU was spread over several threads taking turns,
/// it used about one core, and cores were free.
fn lock(p: &PointResult, f: &Figures, shape: &Shape) -> Option<Limit> {
    if shape.takes_no_lock {
        return None;
    }
    let wait_ms = shape.wait_ms;
    let s = &p.figures.server;
    let process_cores = f.process_cores;
    let one_core = (LOCK_CORE.0..=LOCK_CORE.1).contains(&process_cores);
    let free = f.allowed - f.machine_busy.max(f.used + f.client) >= LOCK_FREE;
    let queued = f.in_server >= LOCK_QUEUED * f64::from(p.concurrency);
    // With one request in flight no thread can wait for a lock another request holds: threads
    // taking turns on it are handing one request along (a loop and its pool).
    let contended = p.concurrency >= 2;
    let taking_turns = s.busiest_threads_sharing > LOCK_THREADS && one_core;
    // Threads waiting for a lock sleep; threads on a run queue longer than they ran waited
    // for a CPU (the scheduler kept them on fewer cores than were free: [`queued_for_cores`]).
    let cpu_us = s.cpu_us_per_request(p.figures.requests);
    let contending = f.in_server - f.rps * wait_ms / 1000.0;
    let waiting_on_each_other = contending >= LOCK_CONTENDING && f.runqueue_us < cpu_us;
    (taking_turns && waiting_on_each_other && free && queued && contended).then(|| Limit {
        kind: LimitKind::Lock,
        evidence: format!(
            "one process's {process_cores:.2} of a core was shared by {:.1} threads taking \
             turns ({:.1} running or runnable on average), with {:.2} of {:.1} cores used: \
             a lock lets one thread run at a time",
            s.busiest_threads_sharing, s.busiest_running_threads, f.used, f.room
        ),
    })
}

/// The pool: fewer request-holding workers than connections, and throughput at the pool's own
/// bound, W / (C + W + RTT): each worker served one request at a time and the rest queued.
fn pool(p: &PointResult, shape: &Shape, f: &Figures) -> Option<Limit> {
    let w = shape.pool?;
    // A worker is held through the request's CPU, and its wait where the wait holds it.
    let cycle_ms = if shape.wait_holds_worker {
        cycle_ms(p, shape)
    } else {
        cycle_ms(p, shape) - shape.wait_ms
    };
    let bound = f64::from(w) * 1000.0 / cycle_ms.max(1e-6);
    let rps = f.rps;
    // At the pool's bound, within POOL_HELD either way (well above it, the pool did not hold
    // it: 157 req/s of hybrid/1 through async waits is 16 times 1 / (C + W)).
    let held = (rps - bound).abs() <= POOL_HELD * bound;
    (shape.closed && w < p.concurrency && held && f.used < IDLE_BELOW * f.room).then(|| Limit {
        kind: LimitKind::Pool,
        evidence: format!(
            "{} req/s is {} of its pool's {w} / {} = {} req/s: each worker served one request \
             at a time, {:.1} requests in the server of {}, {:.2} of {:.1} cores \
             used",
            thousands(rps),
            pct(rps / bound),
            crate::render::numbers::duration_us(cycle_ms * 1000.0),
            thousands(bound),
            f.in_server,
            offered(p),
            f.used,
            f.room
        ),
    })
}

/// The cores as a queue: the server's tasks waited longer for a CPU than they ran, with the
/// server using at least half its cores (the rest lost to switching among many processes,
/// and to the generator's share of the machine).
fn queued_for_cores(p: &PointResult, f: &Figures) -> Option<Limit> {
    let cpu_us = p.figures.server.cpu_us_per_request(p.figures.requests);
    let idle = f.allowed - f.machine_busy.max(f.used + f.client);
    (cpu_us > 0.0 && f.runqueue_us >= cpu_us && f.used >= IDLE_BELOW * f.room).then(|| Limit {
        kind: LimitKind::Cores,
        evidence: format!(
            "its tasks waited {} µs a request for a CPU, longer than the {} µs they ran: they \
             queued for the cores, {:.2} of {:.1} used{}",
            thousands(f.runqueue_us),
            thousands(cpu_us),
            f.used,
            f.room,
            if idle >= LOCK_FREE {
                format!(
                    ", while {idle:.2} of the machine's {:.0} stood idle (the scheduler kept \
                     them on fewer CPUs than were free)",
                    f.allowed
                )
            } else {
                String::new()
            }
        ),
    })
}

/// A pool the lab was not told of (an external server's threads or processes): throughput
/// times the cycle (Little's law) says how many requests were served at once, fewer than
/// the connections while the rest queued in the server, each held through its wait with the
/// server idle.
fn held(p: &PointResult, shape: &Shape, f: &Figures) -> Option<Limit> {
    if shape.pool.is_some() || !shape.closed {
        return None;
    }
    let cycle_ms = cycle_ms(p, shape);
    let waits_ms = shape.wait_ms + shape.rtt_ms;
    // Queued connections cycle slower than the window is long: whole cycles undercount them,
    // the window's responses do not.
    let rps = f.rps.max(p.figures.rps);
    let serving = rps * cycle_ms / 1000.0;
    let n = f64::from(p.concurrency);
    let queued = f.in_server >= LOCK_QUEUED * n;
    let fewer = serving <= (1.0 - POOL_HELD) * n;
    (waits_ms * 2.0 >= cycle_ms && queued && fewer && f.used < IDLE_BELOW * f.room).then(|| Limit {
        kind: LimitKind::Pool,
        evidence: format!(
            "{} req/s of {} cycles is {serving:.1} requests served at once, while {:.1} of \
                 {} connections' requests were in the server (Little's law): a pool of about \
                 {:.0} held through each wait, {:.2} of {:.1} cores used",
            thousands(rps),
            crate::render::numbers::duration_us(cycle_ms * 1000.0),
            f.in_server,
            p.concurrency,
            serving.round().max(1.0),
            f.used,
            f.room
        ),
    })
}

/// A request's cycle in ms: the server's CPU per request, the wait it asks for, the path's
/// round trip.
fn cycle_ms(p: &PointResult, shape: &Shape) -> f64 {
    p.figures.server.cpu_us_per_request(p.figures.requests) / 1000.0 + shape.wait_ms + shape.rtt_ms
}

/// The offered load: throughput within [`WAIT_REACHED`] of N / (C + W + RTT) with the server
/// idle in between.
fn wait(p: &PointResult, shape: &Shape, f: &Figures) -> Option<Limit> {
    if !shape.closed {
        return None;
    }
    let bound = f64::from(p.concurrency) * 1000.0 / cycle_ms(p, shape).max(1e-6);
    let rps = f.rps;
    let reached = rps >= (1.0 - WAIT_REACHED) * bound;
    (reached && f.used < IDLE_BELOW * f.room).then(|| Limit {
        kind: LimitKind::Wait,
        evidence: format!(
            "{} req/s is {} of N/(C+W{}) = {} req/s for {}: the load offered set \
             the pace, the server busy {:.2} of {:.1} cores",
            thousands(rps),
            pct(rps / bound),
            if shape.rtt_ms > 0.0 { "+RTT" } else { "" },
            thousands(bound),
            offered(p),
            f.used,
            f.room
        ),
    })
}

/// The waits as the server served them: a closed loop whose requests were in the server
/// (at least [`LOCK_QUEUED`] of the connections'), the server short of its cores, and a cycle
/// (N / throughput) mostly the wait, but longer than the CPU, the wait and the round trip
/// asked: each request was held beyond them (a timer that fires late, or tasks ready behind
/// each other in the server's own queue while a core stood idle). The model's term for it is
/// the waits' extra (`model::fit::Fitted::wait_extra_us`). Waits of 100 x C on map-wide:
/// hybrid/2's 2 ms ones at 16 connections and async/2's 200 ms ones at 256 cycled 16% and
/// 57% longer than asked, with a quarter of the cores or more idle.
fn late_waits(p: &PointResult, shape: &Shape, f: &Figures) -> Option<Limit> {
    if !shape.closed || shape.wait_ms <= 0.0 {
        return None;
    }
    let n = f64::from(p.concurrency);
    let rps = f.rps.max(p.figures.rps);
    let asked_ms = cycle_ms(p, shape);
    let took_ms = n * 1000.0 / rps.max(1e-9);
    let extra_ms = took_ms - asked_ms;
    let mostly_waits = shape.wait_ms * 2.0 >= asked_ms;
    // At most twice as long as asked: a cycle many times the wait is not the wait's.
    let held = f.in_server >= LOCK_QUEUED * n && extra_ms > 0.0 && extra_ms <= shape.wait_ms;
    (mostly_waits && held && f.used < CORES_BUSY * f.room).then(|| Limit {
        kind: LimitKind::Wait,
        evidence: format!(
            "{} req/s of {} is a cycle of {}, {} longer than the {} of CPU and wait{} asked: \
             the server held {:.1} of {} requests through waits that took longer than asked \
             (its timers, or tasks ready behind each other in its own queue), busy {:.2} of \
             {:.1} cores: the waits as it served them set the pace",
            thousands(rps),
            offered(p),
            crate::render::numbers::duration_us(took_ms * 1000.0),
            crate::render::numbers::duration_us(extra_ms * 1000.0),
            crate::render::numbers::duration_us(asked_ms * 1000.0),
            if shape.rtt_ms > 0.0 {
                " and round trip"
            } else {
                ""
            },
            f.in_server,
            p.concurrency,
            f.used,
            f.room
        ),
    })
}

/// The round trip: a closed loop whose connections each had a generator thread of their own
/// (each connection's requests in series with its thread), the server under its cores, and a
/// cycle (N / throughput) that the server's CPU a request, the generator's, the wait and a
/// hand-off of at most [`HANDOFF_MAX_US`] fill: every request waited for the last one's answer
/// to reach the client and the next to reach the server (at one connection the two ends, each
/// about half a core, take turns and the machine is mostly idle).
fn round_trip(p: &PointResult, shape: &Shape, f: &Figures) -> Option<Limit> {
    let threads = p.figures.client.threads.max(1);
    if !shape.closed || p.streams.is_some_and(|s| s > 1) || p.concurrency > threads {
        return None;
    }
    let requests = p.figures.requests.max(1) as f64;
    // Whole cycles undercount slow connections; the window's responses do not (as `held`).
    let rps = f.rps.max(p.figures.rps);
    let cycle_us = f64::from(p.concurrency) * 1e6 / rps.max(1e-9);
    let server_us = p.figures.server.cpu_us_per_request(p.figures.requests);
    let client_us = p.figures.client.cpu_s * 1e6 / requests;
    let wait_us = (shape.wait_ms + shape.rtt_ms) * 1000.0;
    let handoff_us = cycle_us - server_us - client_us - wait_us;
    let filled = handoff_us <= HANDOFF_MAX_US && handoff_us >= -0.1 * cycle_us;
    (filled && server_us > 0.0 && f.used < CORES_BUSY * f.room).then(|| Limit {
        kind: LimitKind::Wait,
        evidence: format!(
            "{} req/s on {} is a request a connection every {} µs: the server's {} µs of CPU, \
             the load generator's {} µs{} and {} µs of hand-off (a wake-up on each side and the \
             loopback), in series; the server busy {:.2} of {:.1} cores: each connection's \
             round trip set the pace",
            thousands(rps),
            offered(p),
            thousands(cycle_us),
            thousands(server_us),
            thousands(client_us),
            if wait_us > 0.0 {
                format!(", {} µs of wait", thousands(wait_us))
            } else {
                String::new()
            },
            thousands(handoff_us.max(0.0)),
            f.used,
            f.room
        ),
    })
}

/// HTTP/2 connections whose two ends took turns: streams carried over no more connections
/// than generator threads (each connection's client side is one thread's, in series with it),
/// neither side at its cores, yet together they kept about one core busy per connection, the
/// generator a good part of it. Each batch of streams then waits on the generator's own work
/// as much as on the server's: a cheaper generator gives a higher figure (one h2c connection
/// of 100 streams to h2o, benches/h2_turns.txt: 466 to 534k req/s with ours at 0.95 us a
/// request, 255 to 298k with h2load at 1.7 us), so the figure is the lab's. Measured over HTTP/2 only (HTTP/1.1's
/// one request a connection is the offered load's cycle, [`wait`]).
fn turns(p: &PointResult, f: &Figures) -> Option<Limit> {
    let streams = p.streams.filter(|s| *s > 1)?;
    let connections = p.concurrency / streams;
    let threads = p.figures.client.threads.max(1);
    let together = f.used + f.client;
    let taking_turns = connections >= 1
        && connections <= threads
        && f.client_per_thread >= TURNS_CLIENT
        && together >= TURNS_BUSY * f64::from(connections)
        && together <= TURNS_SERIES * f64::from(connections);
    let client_us = p.figures.client.cpu_s * 1e6 / p.figures.requests.max(1) as f64;
    taking_turns.then(|| Limit {
        kind: LimitKind::Generator,
        evidence: format!(
            "the server ({:.2} of a core) and the load generator ({:.2}, {threads} thread(s)) \
             took turns on {}: {:.2} cores of work in series, each waiting on the other, so the \
             generator's own {:.1} µs a request is in every cycle: the figure is the lab's as \
             much as the server's",
            f.used,
            f.client,
            offered(p),
            together,
            client_us
        ),
    })
}

/// A load generator at its cores where no rule of the server's fits: its threads wanted at
/// least [`SATURATED_BUSY_FRACTION`] of a core each (ran, or waited for one), and the server
/// was under [`CORES_BUSY`] of its room (the marking before the rules asks under 70%: between
/// the two, the server had room the generator could not fill). Ten h2c connections of 10
/// streams to h2o on one load thread, with the `h2` crate's client we used before our own:
/// 244 to 272k req/s, the generator at 0.96 to 0.98 of a core and h2o at 0.60 to 0.77; with
/// h2load 378 to 551k, h2o at 0.83 to 0.95.
fn generator_core(p: &PointResult, f: &Figures) -> Option<Limit> {
    let wanted = f.client_per_thread + f.client_waited_per_thread;
    (wanted >= SATURATED_BUSY_FRACTION).then(|| Limit {
        kind: LimitKind::Generator,
        evidence: format!(
            "the load generator wanted {} of a core per thread ({} thread(s)) while the server \
             used {:.2} of the {:.1} cores it could ({}), and no limit of the server's fits: \
             the generator's cores set the figure, the lab's, not the server's",
            pct(wanted),
            p.figures.client.threads,
            f.used,
            f.room,
            pct(f.used / f.room.max(0.01))
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::results::{ClientUsage, PointLatency, RunFigures, ServerUsage};
    use crate::load::NetReport;

    /// Asserts the limit's kind and how its evidence begins.
    fn says(l: Limit, kind: LimitKind, start: &str) -> Limit {
        assert_eq!(l.kind, kind, "{l:?}");
        assert!(l.evidence.starts_with(start), "{}", l.evidence);
        l
    }

    /// Asserts the limit's kind and a part of its evidence.
    fn mentions(l: Limit, kind: LimitKind, part: &str) {
        assert_eq!(l.kind, kind, "{l:?}");
        assert!(l.evidence.contains(part), "{}", l.evidence);
    }

    fn shape() -> Shape {
        Shape {
            pool: None,
            holds_connections: false,
            parallelism: 2.0,
            wait_ms: 0.0,
            wait_holds_worker: true,
            rtt_ms: 0.0,
            closed: true,
            cores: 2,
            takes_no_lock: false,
        }
    }

    /// A point over 1 s: `rps`, a mean latency, the server's CPU seconds.
    fn point(concurrency: u32, rps: f64, mean_us: f64, server_cpu_s: f64) -> PointResult {
        let mut p = PointResult {
            ok: true,
            concurrency,
            figures: RunFigures {
                rps,
                requests: rps as u64,
                duration_s: 1.0,
                latency_us: PointLatency {
                    mean: mean_us,
                    ..Default::default()
                },
                server: ServerUsage {
                    cpu_s: server_cpu_s,
                    window_s: 1.0,
                    answered: rps as u64,
                    cores_allowed: 2,
                    ..Default::default()
                },
                client: ClientUsage {
                    cpu_s: 0.2,
                    threads: 1,
                    wait_s: 0.0,
                    send_late_us: None,
                },
                ..Default::default()
            },
            ..Default::default()
        };
        p.figures.status.insert("200".into(), rps as u64);
        p
    }

    #[test]
    fn a_server_using_its_cores_is_cores_bound() {
        // fib on prethreaded/4: 1.65 cores of the 1.8 left by the generator.
        says(
            limit_of(&point(16, 9_849.0, 1_600.0, 1.65), &shape()),
            LimitKind::Cores,
            "the server used 1.65 of the 1.8 cores it could (92%)",
        );
        // One thread: its one core is the bound.
        let single = Shape {
            parallelism: 1.0,
            ..shape()
        };
        mentions(
            limit_of(&point(16, 5_316.0, 3_000.0, 0.99), &single),
            LimitKind::Cores,
            "0.99 of the 1.0 cores",
        );
    }

    #[test]
    fn an_unknown_pool_is_found_by_littles_law_and_a_cpu_queue_is_the_cores() {
        // Puma, one thread, 20 ms waits at 16 connections: one request at a time.
        let s = Shape {
            wait_ms: 20.0,
            ..shape()
        };
        let mut p = point(16, 48.0, 333_000.0, 0.012);
        says(
            limit_of(&p, &s),
            LimitKind::Pool,
            "48 req/s of 20.2 ms cycles is 1.0 requests served at once, while 16.0 of 16 \
             connections' requests were in the server (Little's law): a pool of about 1",
        );
        // Served as many at once as connections: the wait, not a pool.
        p.figures.rps = 780.0;
        p.figures.requests = 780;
        p.figures.latency_us.mean = 20_500.0;
        assert_eq!(limit_of(&p, &s).kind, LimitKind::Wait);
        // Sixteen processes on 2 ms of CPU waiting 6.8 ms each for a CPU: the cores.
        let mut p = point(16, 869.0, 18_400.0, 1.61);
        p.figures.client.cpu_s = 0.05;
        p.figures.server.machine_busy_cores = 1.7;
        p.figures.server.runqueue_wait_s = 869.0 * 0.0068;
        says(
            limit_of(&p, &shape()),
            LimitKind::Cores,
            "its tasks waited 6,800 µs a request for a CPU, longer than the 1,853 µs they ran",
        );
    }

    #[test]
    fn waits_that_took_longer_than_asked_are_the_wait() {
        // async/2, 2 ms of CPU and 200 ms waits at 256 connections: 805 req/s is a 318 ms
        // cycle, 116 ms more than asked, every request in the server, 1.47 of 2 cores used.
        let s = Shape {
            wait_ms: 200.0,
            pool: Some(2),
            ..shape()
        };
        let mut p = point(256, 805.0, 318_000.0, 1.64);
        p.figures.client.cpu_s = 0.02;
        p.figures.server.machine_busy_cores = 1.7;
        says(
            limit_of(&p, &s),
            LimitKind::Wait,
            "805 req/s of 256 connections is a cycle of 318.0 ms, 116.0 ms longer than the \
             202.0 ms of CPU and wait asked: the server held 256.0 of 256 requests",
        );
        // The same cycle with a third of the requests out of the server (in the client): not
        // the server's waits.
        p.figures.latency_us.mean = 106_000.0;
        assert_ne!(limit_of(&p, &s).kind, LimitKind::Wait);
        // No wait asked: nothing of it.
        let mut p = point(256, 805.0, 318_000.0, 1.64);
        p.figures.client.cpu_s = 0.02;
        assert_ne!(limit_of(&p, &shape()).kind, LimitKind::Wait);
    }

    #[test]
    fn a_server_at_its_memory_limit_is_the_memory_before_its_failures() {
        let mut p = point(64, 800.0, 80_000.0, 0.3);
        p.figures.server.memory_limit_bytes = 32 << 20;
        p.figures.server.memory_peak_bytes = 32 << 20;
        p.figures.server.memory_limit_hits = 4_321;
        p.figures.server.oom_kills = 3;
        p.errors_by_kind.read = 200;
        p.errors = 200;
        says(
            limit_of(&p, &shape()),
            LimitKind::Memory,
            "the server reached its 32 MiB memory limit (peak 32.0 MiB): 4,321 times in the \
             window, and the OOM killer killed 3 of its processes",
        );
        // Killed at it: the point failed, and says why.
        let failed = PointResult {
            ok: false,
            failure: Some(format!(
                "server exited (signal: 9 (SIGKILL)) during the run: {OOM_KILLED} at its 32 MiB \
                 memory limit"
            )),
            ..Default::default()
        };
        mentions(
            limit_of(&failed, &shape()),
            LimitKind::Memory,
            "at its 32 MiB memory limit",
        );
        // Far under its limit: its failures are its own.
        p.figures.server.memory_peak_bytes = 8 << 20;
        p.figures.server.oom_kills = 0;
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Errors);
    }

    #[test]
    fn a_server_throttled_by_its_quota_is_the_quota() {
        // Half a core of quota, used to the full and throttled in 9 periods of 10.
        let mut p = point(16, 2_400.0, 6_600.0, 0.49);
        p.figures.server.quota_cores = 0.5;
        p.figures.server.quota_periods = 10;
        p.figures.server.throttled_periods = 9;
        p.figures.server.throttled_s = 0.45;
        says(
            limit_of(&p, &shape()),
            LimitKind::Quota,
            "the server used 0.49 of its 0.5 cores of CPU quota and was throttled in 90% of 10 \
             periods of 100 ms (0.45 s throttled over its CPUs in a 1.00 s window)",
        );
        // Rarely throttled: the quota did not hold it.
        p.figures.server.throttled_periods = 0;
        assert_ne!(limit_of(&p, &shape()).kind, LimitKind::Quota);
    }

    /// A path's report: `packets` carried, `late` written more than 1 ms late, `dropped` for
    /// want of room, a response of `bytes` taking `transfer_ms` on its link.
    fn across(late: u64, dropped: u64, bytes: f64, transfer_ms: f64) -> NetReport {
        NetReport {
            path: "rtt 100 ms, 5 mbit/s a connection each way".into(),
            spec: crate::net::NetSpec {
                rtt_us: 100_000,
                rate_bps: Some(5_000_000),
                ..crate::net::NetSpec::default()
            },
            packets: 100_000,
            overflowed: dropped,
            written: 100_000 - dropped,
            late_mean_us: 300.0,
            late_max_us: 90_000.0,
            late_p99_us: 2_000.0,
            late_packets: late,
            relay_cpu_s: 1.9,
            response_bytes: bytes,
            transfer_ms,
            ..NetReport::default()
        }
    }

    #[test]
    fn a_late_relay_or_a_link_that_sets_the_pace_is_the_path() {
        // 1,024 clients: the relay wrote its packets 8 ms late on average, 8% of the round
        // trip: the figure is the lab's.
        let mut p = point(1024, 1_200.0, 800_000.0, 0.6);
        let mut n = across(78_000, 0, 65_677.0, 105.0);
        n.late_mean_us = 8_000.0;
        p.figures.net = Some(n);
        let l = says(
            limit_of(&p, &shape()),
            LimitKind::Path,
            "the path's relay wrote its 100,000 packets 8.0 ms late on average (8% of the \
             100.0 ms round trip) (p99 2.0 ms, max 90.0 ms; 78% of them more than 1 ms late)",
        );
        assert!(l.kind.is_lab());
        // Half a millisecond late on average (its poll's resolution): not the path.
        p.figures.net.as_mut().unwrap().late_mean_us = 500.0;
        assert_ne!(limit_of(&p, &shape()).kind, LimitKind::Path);
        // ... unless its slowest 1% were a quarter of the round trip late.
        p.figures.net.as_mut().unwrap().late_p99_us = 25_000.0;
        mentions(limit_of(&p, &shape()), LimitKind::Path, "(p99 25.0 ms");
        p.figures.net.as_mut().unwrap().late_p99_us = 24_000.0;
        assert_ne!(limit_of(&p, &shape()).kind, LimitKind::Path);
        // Drops at its devices (the kernel's, a relay too slow to read them) are its own.
        p.figures.net.as_mut().unwrap().device_dropped = 200;
        mentions(
            limit_of(&p, &shape()),
            LimitKind::Path,
            "dropped 200 for want of room (200 at its devices)",
        );
        // Drops for want of room count too, before the failures they cause.
        p.figures.net = Some(across(0, 500, 65_677.0, 105.0));
        p.errors_by_kind.timeout = 100;
        p.errors = 100;
        mentions(
            limit_of(&p, &shape()),
            LimitKind::Path,
            "dropped 500 for want of room",
        );
        // An on-time relay on a 1 mbit/s link: 16 connections of 525 ms responses.
        let mut p = point(16, 29.3, 546_000.0, 0.001);
        let mut n = across(0, 0, 65_677.0, 525.4);
        n.spec.rtt_us = 0;
        n.spec.rate_bps = Some(1_000_000);
        p.figures.net = Some(n);
        says(
            limit_of(&p, &shape()),
            LimitKind::Path,
            "29.3 req/s is 96% of N/(C+W+RTT+T) = 30.5 req/s for 16 connections: each response \
             of 65,677 bytes takes 525.4 ms on its 1 mbit/s link",
        );
        // A small response across the same path's round trip: the wait, not the link.
        let mut q = point(1024, 10_107.0, 100_300.0, 0.26);
        let mut n = across(0, 0, 180.0, 0.3);
        n.late_mean_us = 365.0;
        q.figures.net = Some(n);
        let rtt = Shape {
            rtt_ms: 100.0,
            ..shape()
        };
        assert_eq!(limit_of(&q, &rtt).kind, LimitKind::Wait);
        // The same path with the server far from it: not the path.
        p.figures.rps = 10.0;
        p.figures.requests = 10;
        assert_ne!(limit_of(&p, &shape()).kind, LimitKind::Path);
        // A 10 mbit/s bottleneck all 16 share, full: 18.2 responses of 65,677 bytes a second
        // is 95% of the 19.0 it carries, the server idle.
        let mut p = point(16, 18.2, 880_000.0, 0.001);
        let mut n = across(0, 0, 65_677.0, 0.0);
        n.spec.rate_bps = None;
        n.spec.bottleneck_bps = Some(10_000_000);
        n.queue_dropped = 340;
        p.figures.net = Some(n);
        says(
            limit_of(&p, &shape()),
            LimitKind::Path,
            "18.2 req/s of 65,677 bytes is 96% of the 10 mbit/s bottleneck's 19.0 req/s, shared \
             by 16 connections",
        );
        // Half of it: not the bottleneck.
        p.figures.rps = 9.0;
        p.figures.requests = 9;
        assert_ne!(limit_of(&p, &shape()).kind, LimitKind::Path);
    }

    #[test]
    fn threads_on_a_run_queue_beside_an_idle_core_queued_for_a_cpu_not_a_lock() {
        // threaded at 16 connections, 1 ms of CPU and 10 ms waits (measured): 1,077 req/s,
        // 1.06 of a core over 16 threads, 3.5 running or runnable, 2.6 ms a request on a run
        // queue, the machine 1.18 of 2 busy.
        let mut p = point(16, 1_077.0, 14_743.0, 1.138);
        p.figures.client.cpu_s = 0.02;
        p.figures.server.busiest_cpu_s = 1.057;
        p.figures.server.busiest_threads_sharing = 16.0;
        p.figures.server.busiest_running_threads = 3.45;
        p.figures.server.runqueue_wait_s = 2.869;
        p.figures.server.machine_busy_cores = 1.18;
        let s = Shape {
            wait_ms: 10.0,
            ..shape()
        };
        says(
            limit_of(&p, &s),
            LimitKind::Cores,
            "its tasks waited 2,664 µs a request for a CPU, longer than the 1,057 µs they ran",
        );
        mentions(
            limit_of(&p, &s),
            LimitKind::Cores,
            "while 0.82 of the machine's 2 stood idle",
        );
        // The same threads asleep instead (no run-queue wait): waiting for each other.
        p.figures.server.runqueue_wait_s = 0.0;
        assert_eq!(limit_of(&p, &s).kind, LimitKind::Lock);
    }

    #[test]
    fn a_points_own_bound_counts_its_cost_and_the_generators_share() {
        // 40,000 req/s over 64 connections, the server at 1.2 cores (30 us a request), the
        // generator at 0.2 (5 us): the server had 1.8 of the 2 cores, 1.8 / 30 us = 60,000.
        let p = point(64, 40_000.0, 1_500.0, 1.2);
        assert!((own_bound_rps(&p, &shape()) - 60_000.0).abs() < 1e-6);
        // One connection, 15,000 req/s, the server's 23 us and the generator's 30 us a request
        // in series: 1 / 53 us = 18,868, not the cores' 1.55 / 23 us.
        let mut one = point(1, 15_000.0, 60.0, 0.345);
        one.figures.client.cpu_s = 0.45;
        assert!((own_bound_rps(&one, &shape()) - 1e6 / 53.0).abs() < 1e-3);
        // A wait of 1 ms and a path of 2 ms are in every cycle: 1 / 3,053 us.
        let s = Shape {
            wait_ms: 1.0,
            rtt_ms: 2.0,
            ..shape()
        };
        assert!((own_bound_rps(&one, &s) - 1e6 / 3053.0).abs() < 1e-3);
        // 4,096 connections whose generator ran 0.6 of a core over its whole run (settling
        // included) but the machine kept only 1.9 of 2 busy in the window, the server 1.6: the
        // rest took 0.3, and the server had 1.7 cores, 1.7 / 40 us = 42,500.
        let mut wide = point(4096, 40_000.0, 100_000.0, 1.6);
        wide.figures.client.cpu_s = 0.6;
        wide.figures.server.machine_busy_cores = 1.9;
        assert!((own_bound_rps(&wide, &shape()) - 42_500.0).abs() < 1e-6);
        // The server's CPU not known: no bound.
        one.figures.server.cpu_s = 0.0;
        assert_eq!(own_bound_rps(&one, &shape()), 0.0);
    }

    #[test]
    fn a_saturated_machine_is_the_cores_whoever_used_them() {
        // Two GIL-bound processes at 0.86 of a core each while other work fills the rest.
        let mut p = point(16, 850.0, 18_000.0, 1.72);
        p.figures.server.busiest_threads_sharing = 8.2;
        p.figures.server.busiest_cpu_s = 0.89;
        p.figures.server.machine_busy_cores = 1.96;
        p.figures.client.cpu_s = 0.05;
        says(
            limit_of(&p, &shape()),
            LimitKind::Cores,
            "the machine's 2 cores were 98% busy (the server 1.72 of them, the load generator 0.05)",
        );
        // The same processes with the machine's other core idle: each one's lock.
        p.figures.server.machine_busy_cores = 1.0;
        p.figures.server.cpu_s = 0.95;
        p.figures.server.busiest_cpu_s = 0.95;
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Lock);
        // The same figures on a server of ours that takes no lock on its route: its threads
        // took turns handing requests along, not waiting for a lock.
        let ours = Shape {
            takes_no_lock: true,
            ..shape()
        };
        assert_ne!(limit_of(&p, &ours).kind, LimitKind::Lock);
    }

    #[test]
    fn an_idle_server_at_n_over_the_cycle_is_the_offered_wait() {
        // 16 connections of a 20 ms wait: at most 16 / 20.02 ms = 799 req/s.
        let s = Shape {
            wait_ms: 20.0,
            ..shape()
        };
        let wait = says(
            limit_of(&point(16, 768.0, 20_800.0, 0.02), &s),
            LimitKind::Wait,
            "768 req/s is 96% of N/(C+W) = 799 req/s",
        );
        assert!(
            wait.evidence.contains("799 req/s for 16 connections:"),
            "{wait:?}"
        );
        // Over HTTP/2 the 16 in flight are streams: the evidence names both.
        let h2 = PointResult {
            streams: Some(4),
            ..point(16, 768.0, 20_800.0, 0.02)
        };
        mentions(
            limit_of(&h2, &s),
            LimitKind::Wait,
            "799 req/s for 16 in flight (4 connections x 4 streams):",
        );
    }

    #[test]
    fn a_held_pool_under_the_connections_is_the_pool() {
        // prethreaded/4, a connection per request: 64 connections queue for 4 workers (the
        // mean latency holds the queue), 102 us of CPU and 20 ms of wait a request.
        let s = Shape {
            pool: Some(4),
            holds_connections: true,
            wait_ms: 20.0,
            ..shape()
        };
        says(
            limit_of(&point(64, 196.0, 326_000.0, 0.02), &s),
            LimitKind::Pool,
            "196 req/s is 99% of its pool's 4 / 20.1 ms = 199 req/s: each worker served one \
             request at a time, 63.9 requests in the server of 64 connections",
        );
        // Half the pool's bound: something else held it back, not the pool.
        assert_ne!(
            limit_of(&point(64, 100.0, 326_000.0, 0.02), &s).kind,
            LimitKind::Pool
        );
        // hybrid/1 through /work's async waits of 100 ms at 16 connections (measured): 157
        // req/s, 16 times what one worker held through each wait would serve. The worker is
        // held only through the CPU: the pool did not bind, the offered load did.
        let async_wait = Shape {
            pool: Some(1),
            wait_ms: 100.0,
            wait_holds_worker: false,
            ..shape()
        };
        let mut p = point(16, 157.0, 101_900.0, 0.17);
        p.figures.server.cpu_s = 0.163;
        says(
            limit_of(&p, &async_wait),
            LimitKind::Wait,
            "157 req/s is 99% of N/(C+W) = 158 req/s",
        );
        assert!(wait_holds_worker(
            "/work?cpu_us=1000&wait_ms=30&wait=blocking"
        ));
        assert!(wait_holds_worker("/sleep?ms=10"));
        assert!(!wait_holds_worker("/work?cpu_us=1000&wait_ms=30"));
        // With keep-alive the same pool leaves the other connections unanswered.
        let mut p = point(64, 196.0, 20_400.0, 0.02);
        p.starved = true;
        let l = limit_of(&p, &s);
        assert_eq!(l.kind, LimitKind::Starved, "{l:?}");
        assert_eq!(
            l.evidence,
            "4 workers each hold one keep-alive connection, of 64 connections offered: 4.0 \
             requests in the server by Little's law"
        );
        p.figures.unanswered = 60;
        let l = limit_of(&p, &s);
        assert!(
            l.evidence.ends_with(", 60 requests never answered"),
            "{}",
            l.evidence
        );
    }

    #[test]
    fn threads_waiting_on_one_core_of_a_process_are_a_lock() {
        // Puma-like: one process whose one core eight threads take turns on, of two cores.
        let mut p = point(16, 470.0, 34_000.0, 1.0);
        p.figures.server.busiest_running_threads = 1.6;
        p.figures.server.busiest_threads_sharing = 7.6;
        p.figures.server.busiest_cpu_s = 0.98;
        says(
            limit_of(&p, &shape()),
            LimitKind::Lock,
            "one process's 0.98 of a core was shared by 7.6 threads",
        );
        // One thread doing the work (an event loop at one core): its core, not a lock.
        p.figures.server.busiest_threads_sharing = 1.1;
        says(
            limit_of(&p, &shape()),
            LimitKind::Cores,
            "one thread did the work at 0.98 of a core",
        );
        // Two runtime threads sharing 0.82 of a core while a third of the connections' time
        // went to the load generator (44 requests in the server of 64): no lock held them.
        let mut q = point(64, 107_864.0, 408.0, 0.82);
        q.figures.server.busiest_threads_sharing = 2.0;
        q.figures.server.busiest_cpu_s = 0.83;
        q.figures.server.machine_busy_cores = 1.49;
        assert_eq!(limit_of(&q, &shape()).kind, LimitKind::Unexplained);
        p.figures.server.busiest_threads_sharing = 7.6;
        // The same threads spread over both cores: not a lock.
        p.figures.server.cpu_s = 1.7;
        p.figures.server.busiest_cpu_s = 1.7;
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Cores);
    }

    #[test]
    fn the_lab_and_failures_come_first() {
        let mut p = point(16, 80_000.0, 190.0, 0.5);
        p.generator_bound = true;
        p.figures.client.cpu_s = 0.97;
        let l = says(
            limit_of(&p, &shape()),
            LimitKind::Generator,
            "the load generator used 97% of a core per thread",
        );
        assert!(l.kind.is_lab());
        p.figures.status.insert("500".into(), 5_000);
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Errors);
        let failed = PointResult {
            ok: false,
            failure: Some("server exited (signal 9)\nmore".into()),
            ..Default::default()
        };
        let l = limit_of(&failed, &shape());
        assert_eq!(l.evidence, "the point failed: server exited (signal 9)");
    }

    /// 100 HTTP/2 requests in flight as `streams` a connection over 1 s: (rps, mean latency),
    /// then the cores of (the server's one busy thread, the generator's one thread, the machine).
    fn h2_point(streams: u32, (rps, mean_us): (f64, f64), cores: (f64, f64, f64)) -> PointResult {
        let mut p = PointResult {
            streams: Some(streams),
            ..point(100, rps, mean_us, cores.0)
        };
        p.figures.client.cpu_s = cores.1;
        p.figures.server.busiest_cpu_s = cores.0;
        p.figures.server.busiest_threads_sharing = 1.0;
        p.figures.server.machine_busy_cores = cores.2;
        p
    }

    #[test]
    fn one_connection_whose_ends_took_turns_is_the_generators_figure() {
        // h2o over one h2c connection of 100 streams (measured): 150k req/s, h2o's one thread
        // at 0.42 of a core, our generator's one thread at 0.72, the machine 1.14 of 2.
        let mut p = h2_point(100, (150_000.0, 667.0), (0.42, 0.72, 1.14));
        let l = says(
            limit_of(&p, &shape()),
            LimitKind::Generator,
            "the server (0.42 of a core) and the load generator (0.72, 1 thread(s)) took turns \
             on 100 in flight (1 connection x 100 streams): 1.14 cores of work in series, each \
             waiting on the other, so the generator's own 4.8 µs a request is in every cycle",
        );
        assert!(l.kind.is_lab());
        // Ten connections on the one generator thread: it serves them in turn, not in series
        // with each, so the rule does not apply.
        p.streams = Some(10);
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Unexplained);
        // One HTTP/1.1 connection, its ends as busy (0.35 and 0.6 of a core): not this rule's,
        // which was measured over HTTP/2, but the connection's round trip.
        let mut h1 = point(1, 20_000.0, 50.0, 0.35);
        h1.figures.client.cpu_s = 0.6;
        mentions(
            limit_of(&h1, &shape()),
            LimitKind::Wait,
            "round trip set the pace",
        );
        // One connection whose generator hardly worked (a tenth of a core): the server's, its
        // one connection at 0.85 of a core.
        p.streams = Some(100);
        p.figures.client.cpu_s = 0.1;
        p.figures.server.cpu_s = 0.85;
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Connection);
        // h2o's one thread busy to 0.95 of a core, the generator at 0.37 (measured once our
        // client cost less than h2load): one thread did the work, and it is the connection's.
        let mut one = h2_point(100, (340_000.0, 294.0), (0.95, 0.37, 1.4));
        one.figures.server.threads = 4;
        says(
            limit_of(&one, &shape()),
            LimitKind::Connection,
            "100 in flight (1 connection x 100 streams): the server used 0.95 cores, 0.95 a \
             connection",
        );
        // The same thread over HTTP/1.1: its one core.
        one.streams = None;
        mentions(
            limit_of(&one, &shape()),
            LimitKind::Cores,
            "one thread did the work at 0.95 of a core",
        );
        // h2o's one connection at 1.19 of a core beside the generator's 0.26: 1.46 cores,
        // side by side, not in series; the connection's (its thread and the kernel's work).
        let mut side = h2_point(100, (440_000.0, 227.0), (1.19, 0.26, 1.5));
        side.figures.server.busiest_threads_sharing = 1.3;
        assert_eq!(limit_of(&side, &shape()).kind, LimitKind::Connection);
        // Both sides idle between requests (0.2 and 0.3 of a core): not in series.
        p.figures.client.cpu_s = 0.3;
        p.figures.server.cpu_s = 0.2;
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Unexplained);
    }

    #[test]
    fn one_h2_connection_at_about_a_core_is_the_connection_not_a_lock() {
        // async with 2 workers, 1 h2c connection of 64 streams on /hello: 125k req/s, the
        // server at 0.92 of a core spread over its 2 workers, the generator at 0.5, 1.42 of 2
        // cores busy.
        let mut p = point(64, 125_029.0, 510.0, 0.92);
        p.streams = Some(64);
        p.figures.client.cpu_s = 0.5;
        p.figures.server.busiest_cpu_s = 0.92;
        p.figures.server.busiest_threads_sharing = 2.0;
        p.figures.server.busiest_running_threads = 0.6;
        p.figures.server.machine_busy_cores = 1.42;
        says(
            limit_of(&p, &shape()),
            LimitKind::Connection,
            "64 in flight (1 connection x 64 streams): the server used 0.92 cores, 0.92 a \
             connection, with 1.42 of the machine's 2 busy: each connection's frames are read \
             and written by one task",
        );
        // The same figures over 64 HTTP/1.1 connections: threads taking turns on one core.
        let mut h1 = p.clone();
        h1.streams = None;
        assert_eq!(limit_of(&h1, &shape()).kind, LimitKind::Lock);
        // The same with a wait of 0.5 ms a request: 62.5 of the 64 requests in the server
        // were in their waits, 1.5 wanted a CPU: threads waiting for the next request, not for
        // each other.
        let waits = Shape {
            wait_ms: 0.5,
            ..shape()
        };
        assert_ne!(limit_of(&h1, &waits).kind, LimitKind::Lock);
        // Two connections of 32 at the same 0.92: under half a core each, not their bound.
        p.streams = Some(32);
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Lock);
        // One connection with no core to spare on the machine (1.9 of 2 busy): not this rule.
        p.streams = Some(64);
        p.figures.server.machine_busy_cores = 1.9;
        assert_ne!(limit_of(&p, &shape()).kind, LimitKind::Connection);
    }

    #[test]
    fn streams_that_waited_under_the_servers_cap_are_the_connection() {
        // One connection asking 10 streams of a server that allows 5: 5,000 requests waited on
        // the client for a stream, 45% of the requests' time.
        let mut p = point(10, 5_000.0, 2_000.0, 0.3);
        p.streams = Some(10);
        p.figures.http2 = Some(crate::lab::results::StreamCap {
            server_max_streams: Some(5),
            waits: 5_000,
            wait_share: 0.45,
        });
        says(
            limit_of(&p, &shape()),
            LimitKind::Connection,
            "the server allows 5 streams a connection and 10 were asked (10 in flight (1 \
             connection x 10 streams)): 5,000 requests waited on the client for a stream, 45% \
             of the requests' time",
        );
        // Waits under a tenth of the time: not the cap's figure.
        p.figures.http2 = Some(crate::lab::results::StreamCap {
            wait_share: 0.05,
            ..p.figures.http2.unwrap()
        });
        assert_ne!(limit_of(&p, &shape()).kind, LimitKind::Connection);
        // A cap at or above the streams asked never held a request back.
        p.figures.http2 = Some(crate::lab::results::StreamCap {
            server_max_streams: Some(10),
            waits: 5_000,
            wait_share: 0.45,
        });
        assert_ne!(limit_of(&p, &shape()).kind, LimitKind::Connection);
    }

    #[test]
    fn one_connection_is_its_round_trip_and_never_a_lock() {
        // iterative on /hello at one connection (measured, sweep quick): 16,181 req/s, the
        // server 0.36 of a core, the generator 0.398, 60.9 µs a request.
        let mut p = point(1, 16_181.0, 60.9, 0.36);
        p.figures.client.cpu_s = 0.398;
        says(
            limit_of(&p, &shape()),
            LimitKind::Wait,
            "16,181 req/s on 1 connection is a request a connection every 61.8 µs: the server's \
             22.2 µs of CPU, the load generator's 24.6 µs and 15.0 µs of hand-off (a wake-up on \
             each side and the loopback), in series; the server busy 0.36 of 1.6 cores",
        );
        // A cycle the two CPUs leave 455 µs of: no hand-off is that long; not this rule's.
        let mut gap = point(1, 2_000.0, 500.0, 0.04);
        gap.figures.client.cpu_s = 0.05;
        assert_eq!(limit_of(&gap, &shape()).kind, LimitKind::Unexplained);
        // hybrid's fib at one connection (measured): 0.91 of a core over 2.7 threads (the loop
        // and the pool worker handing the one request along), which read as a lock: its
        // cycle is the server's CPU and the load's, the offered load's own pace.
        let mut fib = point(1, 3_507.0, 283.9, 0.909);
        fib.figures.client.cpu_s = 0.0831;
        fib.figures.server.busiest_cpu_s = 0.909;
        fib.figures.server.busiest_threads_sharing = 2.7;
        fib.figures.server.busiest_running_threads = 0.8;
        assert_eq!(limit_of(&fib, &shape()).kind, LimitKind::Wait);
        // Two requests in flight on one generator thread, both in the server: threads taking
        // turns can be waiting for each other, a lock.
        fib.concurrency = 2;
        fib.figures.latency_us.mean = 570.0;
        assert_eq!(limit_of(&fib, &shape()).kind, LimitKind::Lock);
    }

    #[test]
    fn a_generator_at_its_core_where_the_server_had_room_is_the_generators_figure() {
        // Ten h2c connections of 10 streams on one generator thread (measured): 168k req/s,
        // the generator at 0.93 of a core, h2o at 0.73 of the 1.07 left to it.
        let mut p = h2_point(10, (168_000.0, 595.0), (0.73, 0.93, 1.7));
        let l = says(
            limit_of(&p, &shape()),
            LimitKind::Generator,
            "the load generator wanted 93% of a core per thread (1 thread(s)) while the server \
             used 0.73 of the 1.1 cores it could (68%), and no limit of the server's fits",
        );
        assert!(l.kind.is_lab());
        // A thread that waited for its core wanted it as much: 0.7 run and 0.2 waited.
        p.figures.client.cpu_s = 0.7;
        p.figures.client.wait_s = 0.2;
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Generator);
        // Under 85% of a core: not the generator's.
        p.figures.client.wait_s = 0.1;
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Unexplained);
        // The server at 90% of its room (1.3 cores beside the generator's 0.7) comes first.
        p.figures.client.wait_s = 0.2;
        p.figures.server.cpu_s = 1.2;
        assert_eq!(limit_of(&p, &shape()).kind, LimitKind::Cores);
    }

    #[test]
    fn a_point_no_rule_fits_says_so_with_its_figures() {
        // Half the cores, far from the wait's bound, no pool, no lock.
        let s = Shape {
            wait_ms: 1.0,
            ..shape()
        };
        says(
            limit_of(&point(64, 2_000.0, 30_000.0, 0.9), &s),
            LimitKind::Unexplained,
            "no rule fits: the server used 0.90 of 1.8 cores, held 60.0 requests of 64",
        );
    }
}
