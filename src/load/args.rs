//! The flags of `sweetspot load`, as clap parses them ([`LoadArgs`]); [`super::config`] turns
//! them into a validated config.

/// Flags of `sweetspot load`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// http://HOST:PORT/PATH, https://HOST:PORT/PATH (TLS) or tcp://HOST:PORT (echo protocol).
    /// With --urls: optional, the http(s)://HOST:PORT of the file's path-only lines (no path).
    #[arg(required_unless_present = "urls")]
    pub target: Option<String>,
    /// Send the requests of FILE, one per line, round robin on every connection: connection i
    /// starts at line i mod n. A line: `[METHOD] URL [@BODYFILE] [H:Name: value]...`, the URL
    /// a /path or http(s)://HOST:PORT/path (one scheme and host:port per file), METHOD GET if left out,
    /// BODYFILE relative to FILE's directory; blank lines and `#` comments are skipped. Counts
    /// and percentiles per line in the report (see the README).
    #[arg(long, value_name = "FILE")]
    pub urls: Option<std::path::PathBuf>,
    /// Connections to keep open.
    #[arg(short = 'c', long = "connections", default_value_t = 10)]
    pub connections: u64,
    /// Threads, each an event loop over its share of the connections [default: one per core].
    #[arg(short = 't', long = "threads")]
    pub threads: Option<u64>,
    /// How long to run (e.g. 10s, 500ms, 2m) [default: 10s].
    #[arg(short = 'd', long = "duration", conflicts_with = "requests")]
    pub duration: Option<String>,
    /// Send exactly this many requests in total, then stop.
    #[arg(short = 'n', long = "requests")]
    pub requests: Option<u64>,
    /// Rate in requests/s over all connections, latency from intended send times: a number
    /// (constant, over -d), FROM..TO (a linear ramp over -d, e.g. 100..5000) or steps
    /// RATE@DUR,... (e.g. 1000@10s,2000@10s,4000@10s; a step may be FROM..TO@DUR; the run lasts
    /// their sum, so -d is not needed). Plans report each step (a ramp: 10 slices) and whether
    /// it held.
    #[arg(
        short = 'R',
        long = "rate",
        value_name = "RATE|FROM..TO|RATE@DUR,...",
        conflicts_with = "requests",
        allow_negative_numbers = true
    )]
    pub rate: Option<String>,
    /// A request without a complete response after this long is a timeout.
    #[arg(long, default_value = "2s")]
    pub timeout: String,
    /// Open a new connection for every request (https://: with its own TLS handshake, which
    /// the report measures apart, with its share of the time waited).
    #[arg(long)]
    pub no_keepalive: bool,
    /// https:// only: accept any certificate (self-signed, expired, another host's).
    #[arg(short = 'k', long, conflicts_with = "cacert")]
    pub insecure: bool,
    /// https:// only: trust the CA certificates in this PEM file instead of the built-in
    /// (Mozilla) roots.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<std::path::PathBuf>,
    /// HTTP method.
    #[arg(short = 'm', long = "method", default_value = "GET")]
    pub method: String,
    /// An extra request header "Name: value" (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Request body; @PATH reads it from a file.
    #[arg(long)]
    pub body: Option<String>,
    /// Requests sent back to back on a connection before waiting for their responses.
    #[arg(long, default_value_t = 1)]
    pub pipeline: u64,
    /// Bytes per echo query (tcp:// targets), the last one a newline.
    #[arg(long = "message", value_name = "BYTES", default_value_t = 64)]
    pub message: u64,
    /// Write the report as JSON to PATH, or to stdout with "-".
    #[arg(long, value_name = "PATH")]
    pub json: Option<String>,
    /// How each thread waits and moves bytes: epoll (wrk's exact closed loop: one send and
    /// one read per request; speaks https://) or uring (io_uring, less CPU per request: sends
    /// submitted together per turn, receives completed into buffers, and under closed-loop load
    /// a wait gathers most connections' responses for up to --gather; latency ends at the
    /// kernel's arrival timestamp, and the report says how long responses waited and how many
    /// requests the server had at once; http:// and tcp:// only).
    #[arg(long, value_enum, default_value_t = Engine::Epoll)]
    pub engine: Engine,
    /// --engine uring: how long a wait may gather responses before handling them (e.g. 100us,
    /// 1ms; 0 for none: one wakeup per response, as wrk) [default: 100us]. Longer saves CPU and
    /// holds each connection's next request longer; the report says how long responses waited.
    #[arg(long, value_name = "DURATION")]
    pub gather: Option<String>,
    /// Pin load threads to these CPUs, round robin (e.g. --pin 1 or --pin 0,1).
    #[arg(long = "pin", value_name = "CPUS", value_delimiter = ',')]
    pub pin: Vec<usize>,
    /// Rate mode (-R): let requests that fall due within DURATION of the first one due go out
    /// together at its end, one wakeup for all of them, as wrk2 sends on its timer tick, when
    /// a thread has at least two sends due per DURATION on average, cut to 20 sends' worth at
    /// high rates [default: 0, every request at its own time]. Cheaper per request, but the
    /// server gets bursts, and a burst queues there: at 20,000/s a 1ms slack raised nginx's
    /// p50 by 30-40us. The lateness the generator chose is in no latency (it is reported as
    /// "send late"); a wait for a connection still busy with the server is. Over plain TCP
    /// with the epoll engine a response ends at the kernel's stamp of its arrival, and a
    /// thread naps a quarter of DURATION (at most 250us) between polls to read several at once.
    #[arg(long, value_name = "DURATION", requires = "rate")]
    pub slack: Option<String>,
    /// No human summary (JSON only, if asked for).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Be worker I of N of a distributed run: take this worker's share of -c and of -R or -n
    /// (shares add up exactly); merge the workers' JSON with `sweetspot merge`.
    #[arg(long, value_name = "I/N")]
    pub segment: Option<String>,
    /// Wait until this wall-clock time (Unix seconds), then start; a late worker says by how much.
    #[arg(long, value_name = "UNIX_TIME", conflicts_with = "start_in")]
    pub start_at: Option<String>,
    /// Wait this long (e.g. 5s), then start.
    #[arg(long, value_name = "DURATION")]
    pub start_in: Option<String>,
    /// Write an HdrHistogram interval log (one histogram per interval, see --interval) to PATH.
    #[arg(long, value_name = "PATH")]
    pub hlog: Option<std::path::PathBuf>,
    /// The time series' interval (at least 100ms): --json gets a "series" of one point per
    /// interval, and --csv, --html and --hlog are written per interval [default: 1s].
    #[arg(long, value_name = "DURATION")]
    pub interval: Option<String>,
    /// Write the time series as CSV to PATH: a header line, then one line per interval
    /// (responses, errors by kind, p50/p90/p99/max latency).
    #[arg(long, value_name = "PATH")]
    pub csv: Option<std::path::PathBuf>,
    /// Write one self-contained HTML page to PATH: latency (p50, p99, max) and throughput
    /// (responses/s, errors/s) over time.
    #[arg(long, value_name = "PATH")]
    pub html: Option<std::path::PathBuf>,
    /// Closed loop: open the measured window (-d long) only once every connection has been
    /// answered once, or after DURATION whatever is still unanswered; connecting and the first
    /// requests are not measured. The report's `cycle_rps` counts whole cycles either way.
    #[arg(long, value_name = "DURATION", conflicts_with_all = ["requests", "rate"])]
    pub settle: Option<String>,
    /// Put a network path between the clients and the server (as root): the clients run in a
    /// network namespace of their own and reach the server, on this machine's loopback, over
    /// rtt=50ms[,jitter=5ms][,rate=10mbit][,bottleneck=100mbit][,queue=N][,loss=0.5%]: the
    /// round trip (jitter: the width of its spread, rtt ± jitter/2), each connection's own
    /// link, a link all share, the packets each queue holds (default 1000, tail drop) and the
    /// loss, both ways. The report gives the path, what it carried, lost and dropped, the TCP
    /// retransmissions seen on it, what each connection got, and its relay's lateness, drops
    /// and CPU (the relay runs on the --pin CPUs).
    #[arg(long, value_name = "PATH")]
    pub net: Option<String>,
    /// HTTP/2 over cleartext TCP with prior knowledge (h2c), to an http:// target; with
    /// https:// HTTP/2 is used whenever the server picks `h2` by ALPN.
    #[arg(long, conflicts_with = "http1")]
    pub h2c: bool,
    /// Over https://, offer HTTP/1.1 only (ALPN `http/1.1`), never HTTP/2.
    #[arg(long)]
    pub http1: bool,
    /// gRPC unary calls over HTTP/2 (h2c to an http:// target, h2 by ALPN to https://): a POST
    /// to the URL's path (`/package.Service/Method`), `content-type: application/grpc`,
    /// `te: trailers`, the message (`--body`, `@FILE` for its bytes) length-prefixed. Calls
    /// are counted by their `grpc-status`; `--streams` are each channel's.
    #[arg(long, conflicts_with_all = ["http1", "urls"])]
    pub grpc: bool,
    /// HTTP/2: concurrent streams per connection, each its own request loop (h2load's -m;
    /// -m here is the method). Concurrency is connections x streams. Default 1.
    #[arg(long, value_name = "N")]
    pub streams: Option<u64>,
}

/// How the engine's threads wait for their sockets and move bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// epoll through mio.
    #[default]
    Epoll,
    /// io_uring.
    Uring,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Epoll => "epoll",
            Engine::Uring => "uring",
        }
    }
}
