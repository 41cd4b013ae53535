//! The concurrency architectures, behind one contract.
//!
//! Every architecture serves the same [`App`] through the same sans-IO HTTP layer; it decides
//! only who waits and who runs. [`Architecture::serve`] takes a bound, non-blocking listener
//! and the shared [`ServerContext`] and returns once a shutdown has been asked for and the
//! in-flight work has drained (bounded by [`DRAIN`]). Adding an architecture is one new file
//! plus one arm in [`Arch::server`]. The `serve` command itself (flags, ready and stats lines)
//! is [`crate::serve`].
//!
//! Shared machinery: [`connection`] (the per-connection request loop of the blocking
//! architectures and the request step every architecture uses), [`children`] (reaping and
//! stopping worker processes), [`event_loop`] (the single-threaded loop that poll and epoll
//! drive with their own readiness backends).

pub mod children;
pub mod connection;
pub mod epoll;
pub mod event_loop;
pub mod forking;
pub mod iterative;
pub mod poll;
pub mod preforked;
pub mod prethreaded;
pub mod threaded;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::app::App;
use crate::sys::SharedCounter;

/// How long a shutdown waits for in-flight requests before it stops anyway.
pub const DRAIN: Duration = Duration::from_secs(5);

/// The architectures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
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
}

impl Arch {
    /// Every architecture, in the study's order.
    pub const ALL: [Arch; 7] = [
        Arch::Iterative,
        Arch::Forking,
        Arch::Preforked,
        Arch::Threaded,
        Arch::Prethreaded,
        Arch::Poll,
        Arch::Epoll,
    ];

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Iterative => "iterative",
            Arch::Forking => "forking",
            Arch::Preforked => "preforked",
            Arch::Threaded => "threaded",
            Arch::Prethreaded => "prethreaded",
            Arch::Poll => "poll",
            Arch::Epoll => "epoll",
        }
    }

    /// Whether `--workers` sizes this architecture.
    pub fn takes_workers(self) -> bool {
        matches!(self, Arch::Preforked | Arch::Prethreaded)
    }

    /// The worker count used when `--workers` is not given (0: one per connection).
    pub fn default_workers(self, cores: usize) -> usize {
        match self {
            Arch::Preforked => 2 * cores,
            Arch::Prethreaded => 4 * cores,
            Arch::Forking | Arch::Threaded => 0,
            Arch::Iterative | Arch::Poll | Arch::Epoll => 1,
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
        }
    }
}

/// What a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    Http,
    Echo,
}

/// One architecture's way of serving.
pub trait Architecture {
    /// Serves until `ctx` says stop, then drains in-flight work (bounded) and returns.
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()>;
}

/// What every worker of a server shares.
pub struct ServerContext {
    pub app: App,
    pub protocol: Protocol,
    pub idle_timeout: Duration,
    pub workers: usize,
    /// Set by SIGINT or SIGTERM.
    pub shutdown: Arc<AtomicBool>,
    /// Requests (or echo lines) answered, across threads and forked processes.
    pub served: SharedCounter,
}

impl ServerContext {
    /// Whether a shutdown has been asked for.
    pub fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }
}
