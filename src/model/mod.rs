//! A model of a server under the closed loop the lab measures, to predict a candidate before
//! measuring it: what holds the server's threads ([`Holding`], said by `Arch`), the cores it may
//! use, the CPU a request costs it beyond the workload's own, and the round trip outside it.
//! [`predict`] solves the loop exactly by Mean Value Analysis ([`mva`]): the connections are
//! the customers, the cores a multi-server station, the round trip and a wait that blocks no
//! thread a delay, and a pool of workers that hold each request a flow-equivalent station in
//! front of the cores. [`bound_rps`] is the physical bound with the server's own cost counted.
//! Pure: every figure comes from its arguments, so it is tested on values worked by hand.
//! The equations are in docs/DESIGN.md ("The model").

pub mod fit;
pub mod mva;
pub mod usl;

use serde::{Deserialize, Serialize};

use crate::arch::Holding;

/// What a server is to the model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerModel {
    /// What holds its threads, and for how long.
    pub holding: Holding,
    /// The cores it can use: its parallelism within the machine and its budget.
    pub cores: f64,
    /// Its CPU a request beyond the workload's own (parsing, system calls, wake-ups, its
    /// hand-offs), µs: measured at one connection.
    pub overhead_us: f64,
    /// What a cycle holds outside the server (the client's turnaround, the loopback or the
    /// path), µs.
    pub round_trip_us: f64,
}

/// What a request asks of the server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    /// CPU a request, µs.
    pub cpu_us: f64,
    /// Wait a request, µs.
    pub wait_us: f64,
    /// The wait blocks the thread that runs the request (a synchronous driver).
    pub blocking: bool,
}

impl Workload {
    /// Whether a request waits at all (its cost then carries [`fit::CostCurve`]'s `w`).
    pub fn waits(&self) -> bool {
        self.wait_us > 0.0
    }
}

/// The term of the model that binds a prediction: the asymptote it is nearest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// The cores: cores / (C + overhead).
    Cores,
    /// The pool: P requests at once, each holding a worker for its CPU (and a blocking wait).
    Pool,
    /// The offered load: N connections each cycling through the server, the wait and the
    /// round trip.
    Wait,
}

/// A candidate predicted: throughput, the mean latency (the cycle less the round trip), the
/// bound it is held to and the term that binds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    pub rps: f64,
    pub latency_us: f64,
    pub bound_rps: f64,
    pub binding: Binding,
}

/// The physical bound of `connections` on `server` for `workload`, counting the server's own
/// cost a request: min(cores / (C + o), N / (C + o + W + RTT)). A pool caps N at its size
/// where each worker holds a connection, and adds min(P / (C + o + W_b), ...) where each holds
/// a request (W_b: a wait that blocks it).
pub fn bound_rps(
    server: &ServerModel,
    workload: &Workload,
    connections: u32,
    pool: Option<u32>,
) -> (f64, Binding) {
    let service_s = (workload.cpu_us + server.overhead_us) * 1e-6;
    let cycle_s = service_s + (workload.wait_us + server.round_trip_us) * 1e-6;
    let n = f64::from(customers(server.holding, connections, pool));
    let mut bounds = vec![
        (server.cores / service_s, Binding::Cores),
        (n / cycle_s, Binding::Wait),
    ];
    if let Some(p) = requests_held(server.holding, workload, pool) {
        let held_s = service_s
            + if workload.blocking {
                workload.wait_us * 1e-6
            } else {
                0.0
            };
        // (poll and epoll: their one loop, on their one core.)
        let binding = if pool.is_some() {
            Binding::Pool
        } else {
            Binding::Cores
        };
        bounds.push((f64::from(p) / held_s, binding));
    }
    // The first of equal bounds binds.
    bounds
        .into_iter()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("the cores and the connections bound it")
}

/// How many requests a server serves at once where a fixed set of workers each holds one:
/// a pool that holds requests (hybrid), and event loops blocked by a wait, whose loops (their
/// pool, one without) serve nothing else meanwhile (reactors/22 served 43,921 req/s at 20 us
/// and 200 us blocking waits on 256 connections, where the loops taken as the cores' servers
/// predicted 6,627). `None`: nothing caps them but the connections.
fn requests_held(holding: Holding, workload: &Workload, pool: Option<u32>) -> Option<u32> {
    match (holding, pool) {
        (Holding::PoolPerRequest, Some(p)) => Some(p.max(1)),
        (Holding::Loops, _) if workload.blocking => Some(pool.unwrap_or(1).max(1)),
        _ => None,
    }
}

/// The connections that cycle: one at a time for a server that serves one connection until
/// it closes, at most the pool where each worker holds a connection (the rest starve).
fn customers(holding: Holding, connections: u32, pool: Option<u32>) -> u32 {
    match (holding, pool) {
        (Holding::OneConnectionAtATime, _) => connections.min(1),
        (Holding::PoolPerConnection, Some(p)) => connections.min(p),
        _ => connections,
    }
}

/// `connections` on `server` for `workload` (with `pool` workers where it has a pool),
/// solved exactly by MVA.
pub fn predict(
    server: &ServerModel,
    workload: &Workload,
    connections: u32,
    pool: Option<u32>,
) -> Prediction {
    let (bound_rps, binding) = bound_rps(server, workload, connections, pool);
    let n = customers(server.holding, connections, pool) as usize;
    let service_s = (workload.cpu_us + server.overhead_us) * 1e-6;
    let wait_s = workload.wait_us * 1e-6;
    let rtt_s = server.round_trip_us * 1e-6;
    let cores = mva::multi_server(server.cores, service_s);
    let level = match requests_held(server.holding, workload, pool) {
        Some(p) => {
            let inner_delay = if workload.blocking { wait_s } else { 0.0 };
            let outer_delay = rtt_s + if workload.blocking { 0.0 } else { wait_s };
            let station = mva::flow_equivalent(&cores, inner_delay, p as usize);
            mva::solve(&station, outer_delay, n).pop()
        }
        None => mva::solve(&cores, rtt_s + wait_s, n).pop(),
    };
    let (rps, cycle_s) = level.map_or((0.0, f64::INFINITY), |l| {
        (l.throughput, l.customers as f64 / l.throughput.max(1e-12))
    });
    Prediction {
        rps,
        latency_us: (cycle_s - rtt_s).max(0.0) * 1e6,
        bound_rps,
        binding,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(holding: Holding, cores: f64) -> ServerModel {
        ServerModel {
            holding,
            cores,
            overhead_us: 0.0,
            round_trip_us: 0.0,
        }
    }

    fn work(cpu_us: f64, wait_us: f64, blocking: bool) -> Workload {
        Workload {
            cpu_us,
            wait_us,
            blocking,
        }
    }

    #[test]
    fn the_servers_own_cost_is_in_the_bound() {
        // 20 us of CPU and 30 of the server's own on 2 cores: 40,000 a second, not 100,000.
        let s = ServerModel {
            overhead_us: 30.0,
            ..server(Holding::Loops, 2.0)
        };
        let (bound, binding) = bound_rps(&s, &work(20.0, 0.0, false), 256, None);
        assert_eq!((bound.round(), binding), (40_000.0, Binding::Cores));
        // One connection with a 50 us round trip: 1 / (50 + 50 us) = 10,000 a second.
        let s = ServerModel {
            round_trip_us: 50.0,
            ..s
        };
        let (bound, binding) = bound_rps(&s, &work(20.0, 0.0, false), 1, None);
        assert_eq!((bound.round(), binding), (10_000.0, Binding::Wait));
    }

    #[test]
    fn a_pool_that_holds_requests_binds_at_its_size_over_the_time_it_holds_one() {
        // 8 workers, each held through 1 ms of CPU and a blocking 9 ms wait: 800 a second
        // bound, the cores (2,000) and 64 connections (6,400) further away.
        let s = server(Holding::PoolPerRequest, 2.0);
        let (bound, binding) = bound_rps(&s, &work(1000.0, 9000.0, true), 64, Some(8));
        assert_eq!((bound.round(), binding), (800.0, Binding::Pool));
        let p = predict(&s, &work(1000.0, 9000.0, true), 64, Some(8));
        assert!(p.rps < 800.0 && p.rps > 780.0, "{p:?}");
        // The same wait without blocking: the pool holds only the CPU, and the cores bind.
        let (bound, binding) = bound_rps(&s, &work(1000.0, 9000.0, false), 64, Some(8));
        assert_eq!((bound.round(), binding), (2000.0, Binding::Cores));
    }

    #[test]
    fn a_pool_of_connection_holders_serves_only_as_many_connections() {
        // 4 workers holding a connection each of 16: 4 cycling through 1 ms of CPU and 9 ms
        // away, 400 a second (2 cores are never full).
        let s = server(Holding::PoolPerConnection, 2.0);
        let p = predict(&s, &work(1000.0, 9000.0, false), 16, Some(4));
        assert!((p.rps - 400.0).abs() < 10.0, "{p:?}");
        assert_eq!(p.binding, Binding::Wait);
        // An iterative server: one connection at a time, 100 a second.
        let s = server(Holding::OneConnectionAtATime, 1.0);
        let p = predict(&s, &work(1000.0, 9000.0, false), 16, None);
        assert!((p.rps - 100.0).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn an_event_loop_blocked_by_a_wait_serves_one_request_a_wait() {
        // One loop (epoll), 1 ms of CPU and a 9 ms wait that blocks it: 100 a second whatever
        // the connections; without blocking, 64 connections reach the core's 1,000.
        let s = server(Holding::Loops, 1.0);
        let blocked = predict(&s, &work(1000.0, 9000.0, true), 64, None);
        assert!((blocked.rps - 100.0).abs() < 1e-6, "{blocked:?}");
        // Eight loops on 2 cores, each blocked through 1 ms of CPU and 9 ms of wait: 800 a
        // second, the loops' bound (the cores' is 2,000), as a pool of 8 that holds requests.
        let reactors = server(Holding::Loops, 2.0);
        let (bound, binding) = bound_rps(&reactors, &work(1000.0, 9000.0, true), 64, Some(8));
        assert_eq!((bound.round(), binding), (800.0, Binding::Pool));
        let eight = predict(&reactors, &work(1000.0, 9000.0, true), 64, Some(8));
        let pool = predict(
            &server(Holding::PoolPerRequest, 2.0),
            &work(1000.0, 9000.0, true),
            64,
            Some(8),
        );
        assert!(eight.rps < 800.0 && eight.rps > 780.0, "{eight:?}");
        assert!((eight.rps - pool.rps).abs() < 1e-9, "{eight:?} {pool:?}");
        let free = predict(&s, &work(1000.0, 9000.0, false), 64, None);
        assert!(free.rps > 990.0 && free.rps <= 1000.0, "{free:?}");
        assert_eq!(free.binding, Binding::Cores);
        // The latency is the cycle less the round trip: 64 / 1,000 a second = 64 ms.
        assert!((free.latency_us / 1000.0 - 64.0).abs() < 1.0, "{free:?}");
    }
}
