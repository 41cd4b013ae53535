//! `sweetspot serve`: the flags, their validation, and the driver that binds the listener,
//! prints the ready line, hands the listener to the chosen [`crate::arch::Architecture`] and prints the stats
//! line once it has drained.
//!
//! Kept apart from [`crate::arch`] so that module is only the contract every architecture
//! implements and the [`Arch`] enum that lists them.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::app::App;
use crate::arch::idle_spin::MAX_SPIN;
use crate::arch::listen::{bind, MAX_WORKERS};
use crate::arch::tls::ServerTls;
use crate::arch::{Accept, AcceptCounts, Arch, Protocol, ServerContext, Timeouts, DRAIN};
use crate::store::StoreConfig;
use crate::sys::SharedCounter;

/// The text after `serve --help`'s options: every architecture with its workers, from [`Arch`].
fn serve_help() -> String {
    format!(
        "Architectures:\n{}\n\
Stops on SIGINT or SIGTERM: stops accepting, finishes in-flight requests (at most {} s), \
prints a stats line and exits 0.",
        Arch::table(),
        DRAIN.as_secs()
    )
}

/// Flags of `sweetspot serve`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = serve_help())]
pub struct ServeArgs {
    /// The concurrency architecture.
    #[arg(long, value_enum)]
    pub arch: Arch,
    /// Worker processes or threads of a pooled architecture (see below).
    #[arg(long)]
    pub workers: Option<usize>,
    /// How the loops of reactors share the port: a SO_REUSEPORT listener each (the default), or
    /// one listener woken with EPOLLEXCLUSIVE.
    #[arg(long, value_enum)]
    pub accept: Option<Accept>,
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
    /// async only: microseconds a worker that ran out of work spins before it parks, when its
    /// last park was shorter than that (at most 1000). Fewer polls under a steady stream, more
    /// CPU under a lighter one (benches/async_spin.txt). 0 parks at once, as tokio does.
    #[arg(long, default_value_t = 0)]
    pub spin_us: u64,
    /// Serve HTTPS with this certificate chain (PEM) and `--tls-key`: HTTP/1.1 on every
    /// architecture, and HTTP/2 by ALPN on async. The port then speaks TLS only;
    /// the stats line counts the handshakes (full and resumed, by ticket) and their CPU.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM), with `--tls-cert`.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// A validated `serve` configuration.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub arch: Arch,
    pub workers: usize,
    pub accept: Accept,
    pub addr: SocketAddr,
    pub root: PathBuf,
    pub store: StoreConfig,
    pub protocol: Protocol,
    pub idle_timeout: Duration,
    pub timeouts: Timeouts,
    /// How long an async worker spins before it parks (zero: it parks at once).
    pub spin: Duration,
    /// HTTPS with this configuration (`--tls-cert`, `--tls-key`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl ServeConfig {
    /// Validates raw flags; every problem is a usage error (exit 2).
    pub fn from_args(args: &ServeArgs) -> anyhow::Result<ServeConfig> {
        let workers = workers_of(args)?;
        if args.accept.is_some() && !args.arch.has_accept_modes() {
            return Err(only_some_take(
                "--accept",
                args.arch,
                Arch::has_accept_modes,
            ));
        }
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
        let spin = spin_of(args)?;
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => {
                if args.protocol != Protocol::Http {
                    return Err(crate::usage(
                        "--tls-cert: only --protocol http is served over TLS",
                    ));
                }
                Some(tls_config(cert, key, args.arch)?)
            }
            _ => None,
        };
        Ok(ServeConfig {
            tls,
            arch: args.arch,
            workers,
            accept: args.accept.unwrap_or_default(),
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
            spin,
        })
    }
}

/// `--workers`, checked against the architecture and the bound; the architecture's default
/// for this machine's cores when absent.
fn workers_of(args: &ServeArgs) -> anyhow::Result<usize> {
    match args.workers {
        Some(_) if !args.arch.pooled() => Err(only_some_take("--workers", args.arch, Arch::pooled)),
        Some(0) => Err(crate::usage("--workers must be at least 1")),
        Some(n) if n > MAX_WORKERS => Err(crate::usage(format!(
            "--workers {n} is too many (at most {MAX_WORKERS})"
        ))),
        Some(n) => Ok(n),
        None => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            Ok(args.arch.default_workers(cores))
        }
    }
}

/// The usage error for `flag` given to `arch`, which does not take it: it names those that do.
fn only_some_take(flag: &str, arch: Arch, takes: fn(Arch) -> bool) -> anyhow::Error {
    let takers: Vec<&str> = Arch::all()
        .iter()
        .filter(|a| takes(**a))
        .map(|a| a.name())
        .collect();
    crate::usage(format!(
        "{flag} has no effect with --arch {} (only {} take it)",
        arch.name(),
        takers.join(", ")
    ))
}

/// `--spin-us`: bounded, and async's alone.
fn spin_of(args: &ServeArgs) -> anyhow::Result<Duration> {
    let spin = Duration::from_micros(args.spin_us);
    if spin > MAX_SPIN {
        return Err(crate::usage(format!(
            "--spin-us {} is too long (at most {})",
            args.spin_us,
            MAX_SPIN.as_micros()
        )));
    }
    if !spin.is_zero() && !args.arch.spins() {
        return Err(crate::usage(format!(
            "--spin-us has no effect with --arch {} (only async takes it)",
            args.arch.name()
        )));
    }
    Ok(spin)
}

/// The room [`tls_config`] makes for tickets: longer than any session rustls puts in one.
const TICKET_ROOM: usize = 2048;

/// The TLS side of `--tls-cert` and `--tls-key`: the chain and key from PEM files; ALPN
/// `http/1.1`, and `h2` first where the architecture serves HTTP/2; resumption by tickets
/// (their key made here, before any fork, so every process of the server can read them).
/// A file that cannot be read or holds no usable PEM is a usage error naming it.
fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
    arch: Arch,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| crate::usage(format!("--tls-cert {}: {e}", cert.display())))?;
    if chain.is_empty() {
        return Err(crate::usage(format!(
            "--tls-cert {}: no certificate in it (expected PEM)",
            cert.display()
        )));
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| crate::usage(format!("--tls-key {}: {e}", key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| crate::usage(format!("--tls-key {}: {e}", key.display())))?;
    config.alpn_protocols = if arch.serves_http2() {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    config.ticketer =
        rustls::crypto::ring::Ticketer::new().map_err(|e| anyhow::anyhow!("TLS tickets: {e}"))?;
    // The ticketer refuses to decrypt anything longer than the longest ticket it has itself
    // encrypted, which a forked worker knows only of its own: one long ticket encrypted here,
    // before any fork, lets every process read its siblings' (a session is a few hundred bytes).
    let _ = config.ticketer.encrypt(&[0; TICKET_ROOM]);
    Ok(Arc::new(config))
}

/// Runs `sweetspot serve`.
pub fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    let config = ServeConfig::from_args(&args)?;
    serve(&config)
}

/// Serves `config` until SIGINT or SIGTERM; prints the ready line and the stats line.
pub fn serve(config: &ServeConfig) -> anyhow::Result<()> {
    crate::sys::raise_fd_limit();
    // Every thread and child after this inherits it: a wait (`/sleep`, `/work`'s, a blocking
    // one's nanosleep, an event loop's timeout) ends when it is due, not up to the default
    // 50 us later, where the kernel may end several together.
    let _ = nix::sys::prctl::set_timerslack(1);
    let app = App::new(&config.root, config.store.clone())?;
    if config.protocol == Protocol::Http {
        config.store.prepare()?;
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    crate::sys::stop::on_stop_signals(Arc::clone(&shutdown))?;
    config.arch.server().check()?;
    let reuse_port = config.arch.binds_reuseport(config.accept);
    let listener = bind(config.addr, reuse_port)?;
    let wake = crate::sys::stop::wake_on_stop(&listener);
    let local = listener.local_addr()?;
    let ctx = Arc::new(ServerContext {
        app,
        protocol: config.protocol,
        idle_timeout: config.idle_timeout,
        timeouts: config.timeouts,
        workers: config.workers,
        accept: config.accept,
        spin: config.spin,
        accepted: AcceptCounts::default(),
        shutdown,
        served: SharedCounter::new()?,
        tls: match &config.tls {
            Some(tls) => Some(Arc::new(ServerTls::new(Arc::clone(tls))?)),
            None => None,
        },
    });
    let scheme = match config.protocol {
        Protocol::Http if config.tls.is_some() => "https",
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
    // Whoever prints the stats line first (this thread after the drain, or the watchdog past
    // the deadline) owns the end of the process.
    let stats_claimed = Arc::new(AtomicBool::new(false));
    if !config.arch.forks() {
        spawn_shutdown_watchdog(Arc::clone(&ctx), started, Arc::clone(&stats_claimed))?;
    }
    let served = config.arch.server().serve(listener, Arc::clone(&ctx));
    drop(wake);
    served?;
    if stats_claimed.swap(true, Ordering::SeqCst) {
        // The watchdog is printing the stats line and ending the process.
        loop {
            std::thread::park();
        }
    }
    print_stats_line(&ctx, started)?;
    Ok(())
}

/// How long past [`DRAIN`] the watchdog waits before it ends the process.
const WATCHDOG_SLACK: Duration = Duration::from_millis(500);

/// Ends the process once a stop has waited [`DRAIN`] (plus a little) for in-flight work that
/// does not finish: a single-threaded loop stuck in a long `/fib` cannot look at the stop flag,
/// and nothing else would bound the shutdown. Not used by the forking architectures, whose
/// parent must stay single-threaded and never runs requests itself (it stops its children
/// with SIGKILL past the same deadline).
fn spawn_shutdown_watchdog(
    ctx: Arc<ServerContext>,
    started: Instant,
    stats_claimed: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("shutdown-watchdog".into())
        .spawn(move || {
            while !ctx.stopping() {
                std::thread::sleep(Duration::from_millis(100));
            }
            std::thread::sleep(DRAIN + WATCHDOG_SLACK);
            if stats_claimed.swap(true, Ordering::SeqCst) {
                return;
            }
            eprintln!(
                "sweetspot: in-flight work still running {} s after the stop; exiting anyway",
                DRAIN.as_secs()
            );
            let _ = print_stats_line(&ctx, started);
            std::process::exit(0);
        })
        .context("cannot start the shutdown watchdog")?;
    Ok(())
}

/// `stopped: served N requests in T s; cpu user U s, system S s`, for a server of several
/// event loops `; accepted per loop A B ...` (connections each loop took, in loop order), and
/// over TLS `; tls handshakes F full, R resumed, cpu C ms` (the handshakes' own CPU).
fn print_stats_line(ctx: &ServerContext, started: Instant) -> anyhow::Result<()> {
    let (user, system) = crate::sys::cpu_times();
    let per_loop = ctx.accepted.get();
    let accepted = if per_loop.is_empty() {
        String::new()
    } else {
        let counts: Vec<String> = per_loop.iter().map(u64::to_string).collect();
        format!("; accepted per loop {}", counts.join(" "))
    };
    let tls = ctx.tls.as_ref().map(|t| t.summary()).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "stopped: served {} requests in {:.1} s; cpu user {:.3} s, system {:.3} s{accepted}{tls}",
        ctx.served.get(),
        started.elapsed().as_secs_f64(),
        user,
        system
    )?;
    out.flush()?;
    Ok(())
}
