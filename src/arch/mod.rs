//! The concurrency architectures, behind one contract. Every architecture serves the same
//! [`App`] through the same request step ([`request`]); it decides only who waits and who runs.
//! [`Architecture::serve`] takes a bound, non-blocking listener and the shared
//! [`ServerContext`] and returns once a stop has been asked for and the in-flight work has
//! drained (bounded by [`DRAIN`]). [`Arch`] is the one list of them, read by the command line,
//! the sweep and the conformance suite. Shared below the architecture files: [`listen`],
//! [`request`], [`blocking`], [`threads`], [`children`], [`pool`], [`pipeline`], [`event_loop`],
//! [`idle_spin`], [`tls`].

pub mod async_h2;
pub mod async_tasks;
pub mod blocking;
pub mod children;
pub mod epoll;
pub mod event_loop;
pub mod forking;
pub mod hybrid;
pub mod idle_spin;
pub mod iterative;
pub mod listen;
pub mod pipeline;
pub mod poll;
pub mod pool;
pub mod preforked;
pub mod prethreaded;
pub mod reactors;
pub mod request;
pub mod threaded;
pub mod threads;
pub mod tls;
pub mod uring;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::app::App;
use crate::sys::SharedCounter;

/// How long a shutdown waits for in-flight requests before it stops anyway.
pub const DRAIN: Duration = Duration::from_secs(5);

/// How much of the work of waits that are over an event loop (poll, epoll, reactors) runs
/// before it polls for what arrived meanwhile. A turn that ran every wait due at once read
/// what came in meanwhile together, after it, so those requests' waits began together and
/// ended together: on reactors/2 at 16 connections, 20 us of CPU and 200 us waits, requests
/// went round in bunches (29,000 to 32,000 a second, p50 500 us, the cores half idle; 35,000
/// to 42,000 with this and 1 ns of timer slack). Each of its replies is a write of its own
/// anyway. uring batches its sends by turn, and slices a turn only after an idle wait (its
/// `SLICE`): sliced this finely, a request cost it 37 us of CPU where it had cost 27.
pub const TURN_CPU: Duration = Duration::from_micros(10);

/// The architectures: the one list of them. The command line (`serve --arch`), experiment
/// files (`archs = [...]`), the sweep's presets and help, and the conformance suite all take
/// their names and properties from here. The doc comment of each arm is its one-line
/// description in `--help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Arch {
    /// One connection at a time, in the main thread.
    Iterative,
    /// A new process per connection.
    Forking,
    /// A fixed pool of processes, each accepting in turn.
    Preforked,
    /// A new thread per connection.
    Threaded,
    /// A fixed pool of threads, each accepting in turn.
    Prethreaded,
    /// One thread, a poll(2) event loop.
    Poll,
    /// One thread, an epoll(7) event loop.
    Epoll,
    /// Several threads, each an epoll loop owning the connections it accepted.
    Reactors,
    /// One epoll loop for every socket; a thread pool runs /fib and SQLite calls.
    Hybrid,
    /// A tokio multi-threaded runtime, a task per connection.
    Async,
    /// io_uring, one ring per thread: multishot accept and receive, batched sends.
    Uring,
}

/// What holds an architecture's threads (or processes), and for how long ([`Arch::holding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    /// One thread serves one connection at a time (iterative).
    OneConnectionAtATime,
    /// A thread or process made for each connection, for as long as it lives (forking,
    /// threaded).
    SpawnPerConnection,
    /// A fixed pool whose workers each hold one keep-alive connection while it lives
    /// (preforked, prethreaded).
    PoolPerConnection,
    /// Event loops hand each request to a fixed pool, a worker held while the request runs
    /// (hybrid).
    PoolPerRequest,
    /// Event loops: no thread is held by a connection or a request (poll, epoll, reactors,
    /// async, uring).
    Loops,
}

impl Arch {
    /// Every architecture, in the study's order (the enum's order).
    pub fn all() -> &'static [Arch] {
        <Arch as clap::ValueEnum>::value_variants()
    }

    /// The name used on the command line, in experiment files and in results.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Iterative => "iterative",
            Arch::Forking => "forking",
            Arch::Preforked => "preforked",
            Arch::Threaded => "threaded",
            Arch::Prethreaded => "prethreaded",
            Arch::Poll => "poll",
            Arch::Epoll => "epoll",
            Arch::Reactors => "reactors",
            Arch::Hybrid => "hybrid",
            Arch::Async => "async",
            Arch::Uring => "uring",
        }
    }

    /// The architecture called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::all().iter().copied().find(|a| a.name() == name)
    }

    /// Every name, space-separated, for error messages and help.
    pub fn names() -> String {
        Arch::all()
            .iter()
            .map(|a| a.name())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The one-line description (the arm's doc comment, as `--help` shows it).
    pub fn description(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .and_then(|v| v.get_help().map(|h| h.to_string()))
            .unwrap_or_default()
    }

    /// Whether `--workers` sizes a pool (processes or threads) worth sweeping over.
    pub fn pooled(self) -> bool {
        matches!(
            self,
            Arch::Preforked
                | Arch::Prethreaded
                | Arch::Reactors
                | Arch::Hybrid
                | Arch::Async
                | Arch::Uring
        )
    }

    /// Whether every request runs on one thread, so the server can use one core at most.
    pub fn single_threaded(self) -> bool {
        matches!(self, Arch::Iterative | Arch::Poll | Arch::Epoll)
    }

    /// What holds the architecture's threads (or processes), and for how long: the one place
    /// that says it, so that every rule, search and sentence about pools and loops reads it
    /// from here (a new architecture answers here, not in each of them).
    pub fn holding(self) -> Holding {
        match self {
            Arch::Iterative => Holding::OneConnectionAtATime,
            Arch::Forking | Arch::Threaded => Holding::SpawnPerConnection,
            Arch::Preforked | Arch::Prethreaded => Holding::PoolPerConnection,
            Arch::Hybrid => Holding::PoolPerRequest,
            Arch::Poll | Arch::Epoll | Arch::Reactors | Arch::Async | Arch::Uring => Holding::Loops,
        }
    }

    /// Whether each worker of its pool holds one keep-alive connection for as long as it
    /// lives: a smaller pool than the connections starves the rest.
    pub fn holds_connections(self) -> bool {
        self.holding() == Holding::PoolPerConnection
    }

    /// Whether a fixed pool of workers each holds a request while it runs (its `--workers`
    /// caps the requests served at once).
    pub fn pool_holds_requests(self) -> bool {
        matches!(
            self.holding(),
            Holding::PoolPerConnection | Holding::PoolPerRequest
        )
    }

    /// Whether it makes a thread or process for each connection.
    pub fn spawns_per_connection(self) -> bool {
        self.holding() == Holding::SpawnPerConnection
    }

    /// Whether it serves one connection at a time, the next waiting until it closes.
    pub fn one_connection_at_a_time(self) -> bool {
        self.holding() == Holding::OneConnectionAtATime
    }

    /// Whether its connections are read by event loops (one or more threads each waiting on
    /// many sockets).
    pub fn runs_event_loops(self) -> bool {
        matches!(self.holding(), Holding::Loops | Holding::PoolPerRequest)
    }

    /// The cores it can use at most on a machine of `cores`: one for a single thread.
    pub fn parallelism(self, cores: f64) -> f64 {
        if self.single_threaded() {
            1.0
        } else {
            cores
        }
    }

    /// Whether it serves HTTP/2 (h2c, and HTTPS with ALPN) besides HTTP/1.1.
    pub fn serves_http2(self) -> bool {
        self == Arch::Async
    }

    /// Whether it takes `--spin-us` (its runtime spins before it parks).
    pub fn spins(self) -> bool {
        self == Arch::Async
    }

    /// Whether workers are processes forked from the server, whose parent must then stay
    /// single-threaded (see [`crate::sys::fork`]).
    pub fn forks(self) -> bool {
        matches!(self, Arch::Forking | Arch::Preforked)
    }

    /// The worker count used when `--workers` is not given, on a machine with `cores` cores
    /// (0: one worker per connection).
    pub fn default_workers(self, cores: usize) -> usize {
        match self {
            Arch::Preforked => 2 * cores,
            Arch::Prethreaded => 4 * cores,
            Arch::Reactors | Arch::Hybrid | Arch::Async | Arch::Uring => cores,
            Arch::Forking | Arch::Threaded => 0,
            Arch::Iterative | Arch::Poll | Arch::Epoll => 1,
        }
    }

    /// Whether `--accept` chooses how its event loops share the port.
    pub fn has_accept_modes(self) -> bool {
        self == Arch::Reactors
    }

    /// Whether the first listener must allow SO_REUSEPORT siblings: the loops of `reactors`
    /// (with `--accept reuseport`) and the rings of `uring` each take a listener of their own.
    pub fn binds_reuseport(self, accept: Accept) -> bool {
        match self {
            Arch::Reactors => accept == Accept::Reuseport,
            Arch::Uring => true,
            _ => false,
        }
    }

    /// How `default_workers` reads in help text.
    pub fn workers_help(self) -> String {
        match (self.pooled(), self.default_workers(1)) {
            (true, n) => format!("--workers, default {n} per core"),
            (false, 0) => "a worker per connection, workers=0".into(),
            (false, n) if self.single_threaded() => format!("single-threaded, workers={n}"),
            (false, n) => format!("workers={n} per core"),
        }
    }

    /// The implementation.
    pub fn server(self) -> Box<dyn Architecture> {
        match self {
            Arch::Iterative => Box::new(iterative::IterativeServer),
            Arch::Forking => Box::new(forking::ForkingServer),
            Arch::Preforked => Box::new(preforked::PreforkedServer),
            Arch::Threaded => Box::new(threaded::ThreadedServer),
            Arch::Prethreaded => Box::new(prethreaded::PrethreadedServer),
            Arch::Poll => Box::new(poll::PollServer),
            Arch::Epoll => Box::new(epoll::EpollServer),
            Arch::Reactors => Box::new(reactors::ReactorsServer),
            Arch::Hybrid => Box::new(hybrid::HybridServer),
            Arch::Async => Box::new(async_tasks::AsyncServer),
            Arch::Uring => Box::new(uring::UringServer),
        }
    }

    /// One line per architecture: name, description, workers. For `--help` and `--list`.
    pub fn table() -> String {
        Arch::all()
            .iter()
            .map(|a| {
                format!(
                    "  {:<12} {} [{}]\n",
                    a.name(),
                    a.description().trim_end_matches('.'),
                    a.workers_help()
                )
            })
            .collect()
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Arch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Arch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Arch, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Arch::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!("unknown arch {name:?} (known: {})", Arch::names()))
        })
    }
}

/// What a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    #[default]
    Http,
    Echo,
}

impl Protocol {
    /// The name used on the command line and in experiment files.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Echo => "echo",
        }
    }
}

/// How the event loops of a multi-loop architecture (reactors) share the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Accept {
    /// A SO_REUSEPORT listener per loop: the kernel spreads connections by hash.
    #[default]
    Reuseport,
    /// One listener in every loop, registered with EPOLLEXCLUSIVE: one waiter is woken.
    Shared,
}

/// Connections accepted by each event loop, for architectures with several (reactors): the
/// stats line lists them, so an uneven spread shows.
#[derive(Debug, Default)]
pub struct AcceptCounts(Mutex<Vec<Arc<AtomicU64>>>);

impl AcceptCounts {
    /// The counter of one more loop.
    pub fn new_loop(&self) -> Arc<AtomicU64> {
        let counter = Arc::new(AtomicU64::new(0));
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&counter));
        counter
    }

    /// Each loop's count, in the order the loops were made (empty: not a multi-loop server).
    pub fn get(&self) -> Vec<u64> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

/// One architecture's way of serving.
pub trait Architecture {
    /// Fails (before the ready line) when this machine cannot run the architecture at all.
    fn check(&self) -> anyhow::Result<()> {
        Ok(())
    }

    /// Serves until `ctx` says stop, then drains in-flight work (bounded) and returns.
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()>;
}

/// What every worker of a server shares.
pub struct ServerContext {
    pub app: App,
    pub protocol: Protocol,
    pub idle_timeout: Duration,
    pub timeouts: Timeouts,
    pub workers: usize,
    /// How the loops of reactors share the port (ignored by the others).
    pub accept: Accept,
    /// How long an async worker spins before it parks ([`idle_spin`]; ignored by the others).
    pub spin: Duration,
    /// Connections each loop accepted (reactors).
    pub accepted: AcceptCounts,
    /// Set by SIGINT or SIGTERM.
    pub shutdown: Arc<AtomicBool>,
    /// Requests (or echo lines) answered, across threads and forked processes.
    pub served: SharedCounter,
    /// HTTPS (`serve --tls-cert`): HTTP/1.1 on every architecture, and HTTP/2 by ALPN on
    /// async.
    pub tls: Option<Arc<tls::ServerTls>>,
}

impl ServerContext {
    /// Whether a shutdown has been asked for.
    pub fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }
}

/// The per-connection deadlines besides the idle timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Queued output with no progress for this long drops the client.
    pub write: Duration,
    /// The whole request head must arrive within this (from its first byte).
    pub header: Duration,
    /// The body must arrive within this once the head is in.
    pub body: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            write: Duration::from_secs(10),
            header: Duration::from_secs(10),
            body: Duration::from_secs(30),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_command_line_names_and_round_trip_through_serde() {
        for &arch in Arch::all() {
            let clap_name = clap::ValueEnum::to_possible_value(&arch).unwrap();
            assert_eq!(clap_name.get_name(), arch.name());
            assert_eq!(Arch::from_name(arch.name()), Some(arch));
            let json = serde_json::to_string(&arch).unwrap();
            assert_eq!(json, format!("\"{}\"", arch.name()));
            assert_eq!(serde_json::from_str::<Arch>(&json).unwrap(), arch);
            assert!(!arch.description().is_empty(), "{arch} has no description");
        }
        let err = serde_json::from_str::<Arch>("\"uring-not-yet\"").unwrap_err();
        assert!(err.to_string().contains("unknown arch"), "{err}");
        assert!(err.to_string().contains("epoll"), "{err}");
    }

    #[test]
    fn properties_agree_with_default_workers() {
        for &arch in Arch::all() {
            if arch.single_threaded() {
                assert_eq!(arch.default_workers(8), 1, "{arch}");
                assert!(!arch.pooled(), "{arch}");
            }
            if arch.pooled() {
                assert!(arch.default_workers(1) >= 1, "{arch}");
                assert!(arch.default_workers(4) > arch.default_workers(1), "{arch}");
            }
        }
        assert!(Arch::Prethreaded.pooled() && !Arch::Threaded.pooled());
        assert!(Arch::Epoll.single_threaded() && !Arch::Forking.single_threaded());
        assert_eq!(Arch::table().lines().count(), Arch::all().len());
    }
}
