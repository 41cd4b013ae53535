//! The concurrency architectures, behind one contract.
//!
//! Every architecture serves the same [`App`] through the same sans-IO HTTP layer; it decides
//! only who waits and who runs. [`Architecture::serve`] takes a bound, non-blocking listener
//! and the shared [`ServerContext`] and returns once a shutdown has been asked for and the
//! in-flight work has drained (bounded by [`DRAIN`]). Adding an architecture is one new file
//! plus one arm in [`Arch::server`].
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

use std::io::Write;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::app::App;
use crate::store::StoreConfig;
use crate::sys::SharedCounter;

/// How long a shutdown waits for in-flight requests before it stops anyway.
pub const DRAIN: Duration = Duration::from_secs(5);

/// Flags of `sweetspot serve`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Workers: preforked defaults to 2 processes per core and prethreaded to \
4 threads per core; forking and threaded make one worker per connection (reported as \
workers=0); iterative, poll and epoll are single-threaded (workers=1).\n\n\
Stops on SIGINT or SIGTERM: stops accepting, finishes in-flight requests (at most 5 s), \
prints a stats line and exits 0."
)]
pub struct ServeArgs {
    /// The concurrency architecture.
    #[arg(long, value_enum)]
    pub arch: Arch,
    /// Worker processes (preforked) or threads (prethreaded).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Address to listen on (127.0.0.1, ::1, 0.0.0.0, ...).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on; 0 takes a free one (see the ready line).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Directory of static files [default: the shipped public/].
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Guestbook store: sqlite:PATH or redis://HOST:PORT [default: sqlite in the data directory].
    #[arg(long)]
    pub store: Option<String>,
    /// Protocol: HTTP/1.1 or line echo.
    #[arg(long, value_enum, default_value_t = Protocol::Http)]
    pub protocol: Protocol,
    /// Seconds a connection may stay silent before it is dropped.
    #[arg(long, default_value_t = 10.0)]
    pub idle_timeout: f64,
    /// Seconds a client may take to drain nothing of its queued output before it is dropped.
    #[arg(long, default_value_t = 10.0)]
    pub write_timeout: f64,
    /// Seconds the whole request head may take to arrive (else 408 and close).
    #[arg(long, default_value_t = 10.0)]
    pub header_timeout: f64,
    /// Seconds a request body may take to arrive once its head is in (else 408 and close).
    #[arg(long, default_value_t = 30.0)]
    pub body_timeout: f64,
}

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
    pub timeouts: Timeouts,
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

/// A validated `serve` configuration.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub arch: Arch,
    pub workers: usize,
    pub addr: SocketAddr,
    pub root: PathBuf,
    pub store: StoreConfig,
    pub protocol: Protocol,
    pub idle_timeout: Duration,
    pub timeouts: Timeouts,
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

impl ServeConfig {
    /// Validates raw flags; every problem is a usage error (exit 2).
    pub fn from_args(args: &ServeArgs) -> anyhow::Result<ServeConfig> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = match args.workers {
            Some(_) if !args.arch.takes_workers() => {
                return Err(crate::usage(format!(
                "--workers has no effect with --arch {} (only preforked and prethreaded take it)",
                args.arch.name()
            )))
            }
            Some(0) => return Err(crate::usage("--workers must be at least 1")),
            Some(n) if n > 10_000 => {
                return Err(crate::usage(format!(
                    "--workers {n} is too many (at most 10000)"
                )))
            }
            Some(n) => n,
            None => args.arch.default_workers(cores),
        };
        let host = args.host.trim_start_matches('[').trim_end_matches(']');
        let addr = (host, args.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| crate::usage(format!("--host {}: not an address", args.host)))?;
        if !(args.idle_timeout > 0.0 && args.idle_timeout <= 86_400.0) {
            return Err(crate::usage("--idle-timeout must be in (0, 86400] seconds"));
        }
        for (flag, value) in [
            ("--write-timeout", args.write_timeout),
            ("--header-timeout", args.header_timeout),
            ("--body-timeout", args.body_timeout),
        ] {
            if !(value > 0.0 && value <= 86_400.0) {
                return Err(crate::usage(format!(
                    "{flag} must be in (0, 86400] seconds"
                )));
            }
        }
        Ok(ServeConfig {
            arch: args.arch,
            workers,
            addr,
            root: args.root.clone().unwrap_or_else(App::default_root),
            store: StoreConfig::parse(args.store.as_deref())?,
            protocol: args.protocol,
            idle_timeout: Duration::from_secs_f64(args.idle_timeout),
            timeouts: Timeouts {
                write: Duration::from_secs_f64(args.write_timeout),
                header: Duration::from_secs_f64(args.header_timeout),
                body: Duration::from_secs_f64(args.body_timeout),
            },
        })
    }
}

/// Binds a listening socket with a deep backlog (the studies go to 15,000 connections).
pub fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket
        .bind(&addr.into())
        .with_context(|| format!("cannot listen on {addr}"))?;
    socket.listen(4096)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Runs `sweetspot serve`.
pub fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = ServeConfig::from_args(&args)?;
    serve(&config)
}

/// Serves `config` until SIGINT or SIGTERM; prints the ready line and the stats line.
pub fn serve(config: &ServeConfig) -> anyhow::Result<()> {
    crate::sys::raise_fd_limit();
    let app = App::new(&config.root, config.store.clone())?;
    if config.protocol == Protocol::Http {
        config.store.prepare()?;
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&shutdown))?;
    }
    let listener = bind(config.addr)?;
    let local = listener.local_addr()?;
    let ctx = Arc::new(ServerContext {
        app,
        protocol: config.protocol,
        idle_timeout: config.idle_timeout,
        timeouts: config.timeouts,
        workers: config.workers,
        shutdown,
        served: SharedCounter::new()?,
    });
    let scheme = match config.protocol {
        Protocol::Http => "http",
        Protocol::Echo => "tcp",
    };
    let host = match local {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    let started = Instant::now();
    {
        // Flushed before any fork, so children never repeat it.
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "listening on {scheme}://{host}:{} arch={} workers={}",
            local.port(),
            config.arch.name(),
            config.workers
        )?;
        out.flush()?;
    }
    config.arch.server().serve(listener, Arc::clone(&ctx))?;
    let (user, system) = crate::sys::cpu_times();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "stopped: served {} requests in {:.1} s; cpu user {:.3} s, system {:.3} s",
        ctx.served.get(),
        started.elapsed().as_secs_f64(),
        user,
        system
    )?;
    out.flush()?;
    Ok(())
}
