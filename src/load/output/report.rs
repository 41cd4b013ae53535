//! The result of a load run, as the library returns it and as `--json` writes it.
//!
//! Field names are part of the interface contract (DESIGN.md): `requests`, `duration_s`, `rps`,
//! `latency_us`, `status`, `errors`, and `latency_uncorrected_us` in rate mode. Fields beyond
//! the contract are added with `#[serde(default)]` so older reports still load.
//!
//! The latency summaries include the requests left unanswered (censored, see
//! [`crate::load::stats`]) and carry `lower_bound`, the figures that are only lower bounds;
//! `latency_answered_us` is the view of answered requests alone, what wrk would report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::load::scaleout::segment::SegmentInfo;
use crate::load::stats::h2::{H2Counts, GRPC_CODES};
use crate::load::stats::steps::StepReport;
use crate::load::stats::urls::UrlReport;
use crate::load::stats::RATE_HELD_FRACTION;
use crate::load::stats::{
    censored_view, per_second_rates, ErrorCounts, LatencyHistogram, LatencySummary, LatencyView,
    ThreadStats,
};
use crate::load::{LoadConfig, Mode};

/// What a load run measured.
/// A network path a run went across (`--net`) and what it did during the run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NetReport {
    /// The path in words.
    pub path: String,
    pub spec: crate::net::NetSpec,
    /// Packets that reached the path (both directions), and of them those lost to `loss`,
    /// those a full queue of the path dropped (the bottleneck's or a link's: the path's
    /// doing, as a router's), and those the relay had no room for (its own limit).
    pub packets: u64,
    pub lost: u64,
    #[serde(default)]
    pub queue_dropped: u64,
    /// The longest a packet took through the path's queues and rates (the bottleneck's and its
    /// link's: waiting, then its own time on the wire), µs: at most `queue` packets' time.
    #[serde(default)]
    pub queued_max_us: f64,
    pub overflowed: u64,
    /// Packets the kernel dropped at the path's TUN devices (a relay too slow to take them).
    #[serde(default)]
    pub device_dropped: u64,
    /// TCP segments retransmitted across the path, seen on it (a data segment that starts
    /// below the highest sequence its connection sent): by the clients, and by the server.
    pub retrans_clients: u64,
    pub retrans_server_side: u64,
    /// The relay itself: packets it wrote, their mean and largest lateness against when the
    /// path was due to deliver them (µs), how many were more than 1 ms late, and the CPU its
    /// two threads used (s). A late relay, not the path it stands for, set the figures.
    #[serde(default)]
    pub written: u64,
    #[serde(default)]
    pub late_mean_us: f64,
    #[serde(default)]
    pub late_max_us: f64,
    #[serde(default)]
    pub late_packets: u64,
    /// 99% of the packets were written less late than this (µs).
    #[serde(default)]
    pub late_p99_us: f64,
    #[serde(default)]
    pub relay_cpu_s: f64,
    /// The CPUs the relay's threads ran on (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relay_cpus: Vec<usize>,
    /// What each connection got toward the clients over the run, Mbit/s: the fewest, the
    /// median and the most, over `flows` connections (a shared bottleneck's fairness).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<FlowShares>,
    /// The mean response's bytes (headers and body), and the time it takes on one
    /// connection's link at the path's rate, ms (0: unshaped).
    #[serde(default)]
    pub response_bytes: f64,
    #[serde(default)]
    pub transfer_ms: f64,
}

/// The spread of what each connection got across a path.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowShares {
    pub flows: usize,
    pub min_mbit: f64,
    pub median_mbit: f64,
    pub max_mbit: f64,
}

impl FlowShares {
    /// From each connection's bytes over `seconds`; `None` without a connection.
    pub fn of(bytes: &[u64], seconds: f64) -> Option<FlowShares> {
        let mut mbit: Vec<f64> = bytes
            .iter()
            .map(|b| *b as f64 * 8.0 / seconds.max(1e-9) / 1e6)
            .collect();
        mbit.sort_by(f64::total_cmp);
        let n = mbit.len();
        (n > 0).then(|| FlowShares {
            flows: n,
            min_mbit: mbit[0],
            median_mbit: if n % 2 == 1 {
                mbit[n / 2]
            } else {
                (mbit[n / 2 - 1] + mbit[n / 2]) / 2.0
            },
            max_mbit: mbit[n - 1],
        })
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct LoadReport {
    /// Complete responses (timeouts and failures are not requests here; see `errors`).
    pub requests: u64,
    /// Wall time of the run, in seconds.
    pub duration_s: f64,
    /// Complete responses per second.
    pub rps: f64,
    /// Closed loop only: responses per second counted in whole cycles: every connection
    /// cycling at the requests' mean latency plus the client's mean turnaround (see the
    /// engine's `settle`); a window that ends mid-cycle counts no partial cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle_rps: Option<f64>,
    /// Every response read, counted or not: `requests`, the drain's answers, and, with
    /// `--settle`, the answers before the window opened.
    #[serde(default)]
    pub responses_read: u64,
    /// Latency in microseconds; in rate mode measured from intended send times, a wait for a
    /// busy connection in, the generator's own lateness out (`send_late_mean_us`). Unanswered
    /// requests are in it at their age (closed loop: with the requests they held back), and
    /// `lower_bound` lists the figures that are therefore only lower bounds.
    pub latency_us: LatencySummary,
    /// Rate mode only: latency from the actual send times (what a naive tool reports), with
    /// the requests in flight at the end at their age since sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_uncorrected_us: Option<LatencySummary>,
    /// The answered requests alone (intended send times in rate mode): what a tool that drops
    /// unanswered requests reports. Its mean is what Little's law needs.
    #[serde(default)]
    pub latency_answered_us: LatencySummary,
    /// Complete responses by status code (empty for echo targets).
    pub status: BTreeMap<String, u64>,
    pub errors: ErrorCounts,
    /// Requests still in flight when the run ended, younger than the timeout: not answered,
    /// not timed out. Many of them mean the server was still holding work at the end.
    #[serde(default)]
    pub unanswered: u64,
    /// Rate mode: requests that were due before the end but could not be sent (their
    /// connection was still waiting, or down); censored in `latency_us`.
    #[serde(default)]
    pub unsent: u64,
    /// Requests answered in the short drain after the end: latency samples, not in `requests`.
    #[serde(default)]
    pub drained: u64,
    pub bytes_read: u64,
    /// The bytes of the responses in `responses_read`, head and body: a response's mean size
    /// is their quotient, where `bytes_read` also holds the part of a response still arriving
    /// when the run ended. HTTP/1.1 and echo only (an HTTP/2 connection's frames are not
    /// split by response): 0 in an HTTP/2 run.
    #[serde(default)]
    pub response_bytes: u64,
    pub bytes_written: u64,
    /// Complete responses per second, for each second of the run.
    pub per_second: Vec<f64>,
    /// CPU time the load threads used (user + system), to spot a saturated generator.
    pub client_cpu_s: f64,
    /// Time the load threads waited on a run queue for a CPU (`schedstat`): a generator whose
    /// core is shared with other work is late without being busy.
    #[serde(default)]
    pub client_wait_s: f64,
    /// Rate mode: how late the answered requests went out after they could (their intended
    /// time, or when their connection had room), on average (µs): the generator's own lateness
    /// (its slack, a nap, a late timer), in neither `latency_us` nor `latency_uncorrected_us`
    /// (which starts at the actual send).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_late_mean_us: Option<f64>,
    /// Rate mode: the longest of those (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_late_max_us: Option<f64>,
    /// Rate mode: how long the answered requests waited after their intended time for their
    /// connection to have room, on average (µs): the server's backlog, inside `latency_us`
    /// (coordinated omission corrected), not in `latency_uncorrected_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_held_mean_us: Option<f64>,
    /// Rate mode only: the requested rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate: Option<f64>,
    /// Rate mode only: whether requests went out at the requested rate (within 5%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_held: Option<bool>,
    /// Rate mode only: requests sent per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_rate: Option<f64>,
    /// Rate mode only: the `--slack` that applied, µs: how late a send could go out to share
    /// a wakeup (its lateness is inside the latency); 0 where fewer than two sends fell due
    /// per slack on a thread, so each went at its own time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack_us: Option<u64>,
    /// Across a network path (`--net`): the path and what it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<NetReport>,
    /// Rate mode with a load plan (`-R 100..5000`, `-R 1000@10s,...`): the plan as `-R` takes
    /// it; `target_rate` is its mean rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// With a load plan: each report step's target, achieved rate, latency and whether it held
    /// (see [`crate::load::stats::steps`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepReport>,
    /// Requests written to the wire (count mode: plus connect failures, this is `-n`).
    #[serde(default)]
    pub requests_sent: u64,
    #[serde(default)]
    pub target: String,
    /// "closed", "count" or "rate".
    #[serde(default)]
    pub mode: String,
    #[serde(default)]
    pub connections: usize,
    #[serde(default)]
    pub threads: usize,
    /// The engine's driver: "epoll" or "uring" (`--engine`).
    #[serde(default)]
    pub engine: String,
    /// `--segment I/N` only: this worker's part of a distributed run (see `sweetspot merge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<SegmentInfo>,
    /// Wall-clock start and end of the run, Unix seconds, to line up the workers of one run.
    #[serde(default)]
    pub started_at_unix_s: f64,
    #[serde(default)]
    pub ended_at_unix_s: f64,
    /// `--start-at` / `--start-in` only: seconds the run began after the agreed time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_late_s: Option<f64>,
    /// The whole `latency_us` histogram, base64 of HdrHistogram's compressed V2 encoding, so
    /// that reports can be merged exactly (histograms added, never percentiles averaged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
    /// Rate mode: the same for `latency_uncorrected_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram_uncorrected: Option<String>,
    /// `--urls` only: counts and latency per line of the file (see [`crate::load::source::urls`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<UrlReport>,
    /// The time series (`sweetspot load` with `--json`, `--csv`, `--html` or `--hlog`): one
    /// point per interval, then one for the requests unanswered at the end, if any (see
    /// [`crate::load::stats::series`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<crate::load::stats::series::SeriesPoint>,
    /// `https://` targets only: the TLS side of the run, handshakes measured apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsReport>,
    /// HTTP/2 runs only (`--h2c`, or `h2` by ALPN): streams, the server's cap on them, the
    /// waits for a stream, GOAWAYs and resets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http2: Option<H2Report>,
    /// `--engine uring` only: how the driver gathered responses, and how long they waited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uring: Option<UringReport>,
    /// Rate mode over plain TCP with the epoll driver: responses timed by the kernel's stamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamps: Option<StampReport>,
}

/// Rate mode over plain TCP with the epoll driver: each response ends when the kernel stamped
/// its arrival (`SO_TIMESTAMPNS`), not when it was read, so the worker naps between polls (a
/// quarter of its slack, at most 250 us, after a poll of few events) and reads several
/// responses a wakeup; how long they waited to be read is here, in no latency.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct StampReport {
    /// Reads that carried a stamp.
    pub stamped: u64,
    /// How long they waited between arriving and being read, µs.
    pub hold_mean_us: f64,
    pub hold_max_us: f64,
}

/// How the io_uring driver waited. Latency ends when a response reached its socket, so the
/// wait is in no latency; it only delays the connection's next request (closed loop), which
/// is why it is reported.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct UringReport {
    /// Responses a wait gathered at most (0: it did not gather; rate mode, few connections).
    pub gather: usize,
    /// The longest a gathering wait lasted, µs.
    pub window_us: u64,
    /// Reads whose arrival was timestamped, and how long they waited to be handled, µs.
    pub held: u64,
    pub hold_mean_us: f64,
    pub hold_max_us: f64,
}

/// An HTTP/2 run: concurrency is connections x `streams`; a request that found the server's
/// `MAX_CONCURRENT_STREAMS` full waited for a stream on the client (inside its latency).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct H2Report {
    /// "h2c" (cleartext, prior knowledge) or "h2" (TLS, ALPN).
    pub protocol: String,
    /// Streams per connection (`--streams`).
    pub streams: usize,
    /// HTTP/2 connections opened (reconnects after a GOAWAY included).
    pub connections_opened: u64,
    /// The lowest `MAX_CONCURRENT_STREAMS` a server announced (`None`: unlimited).
    pub server_max_streams: Option<u64>,
    /// Requests that waited for a stream under that cap, their mean and longest wait (µs), and
    /// the waits' share of the answered requests' summed latency.
    pub stream_waits: u64,
    pub stream_wait_mean_us: f64,
    pub stream_wait_max_us: f64,
    pub stream_wait_share: f64,
    /// Connections the server ended with GOAWAY, and streams it reset (RST_STREAM; also in
    /// `errors.read`).
    pub goaways: u64,
    pub resets: u64,
    /// `--grpc`: the window's calls by `grpc-status` code (`"0"`, `"14"`; `"other"` past the
    /// defined codes); a call without one is a protocol error, not here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc_status: BTreeMap<String, u64>,
}

impl H2Report {
    /// The HTTP/2 figures of one run split over workers (`sweetspot merge`): counts added, the
    /// lowest cap, the longest wait, the mean weighted by each worker's waits, and the waits'
    /// share of the merged `latency`. The parts ran one protocol at
    /// one stream count (the merge checks it).
    pub fn add_up(parts: &[&H2Report], latency: &LatencyHistogram) -> H2Report {
        let mut sum = H2Report {
            protocol: parts
                .first()
                .map(|p| p.protocol.clone())
                .unwrap_or_default(),
            streams: parts.first().map_or(0, |p| p.streams),
            ..H2Report::default()
        };
        let mut waited_us = 0.0;
        for p in parts {
            sum.connections_opened += p.connections_opened;
            sum.server_max_streams = match (sum.server_max_streams, p.server_max_streams) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            sum.stream_waits += p.stream_waits;
            waited_us += p.stream_wait_mean_us * p.stream_waits as f64;
            sum.stream_wait_max_us = sum.stream_wait_max_us.max(p.stream_wait_max_us);
            sum.goaways += p.goaways;
            sum.resets += p.resets;
            for (code, n) in &p.grpc_status {
                *sum.grpc_status.entry(code.clone()).or_default() += n;
            }
        }
        if sum.stream_waits > 0 {
            sum.stream_wait_mean_us = waited_us / sum.stream_waits as f64;
        }
        sum.stream_wait_share = wait_share(waited_us, latency);
        sum
    }
}

/// The TLS side of an `https://` run. Handshakes are not in any request's latency (requests go
/// out once the handshake is done, as they go out once TCP has connected); they are here.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct TlsReport {
    /// The protocol version the pre-flight handshake negotiated ("TLSv1.3").
    pub version: String,
    /// The ALPN protocol the server chose (`None` if it does not do ALPN).
    pub alpn: Option<String>,
    /// Handshakes completed by the run's connections (not counting the pre-flight one): one
    /// per connection opened, so one per request with `--no-keepalive`.
    pub handshakes: u64,
    /// Of those, the ones that resumed an earlier session (abbreviated handshakes).
    pub resumed: u64,
    /// Handshake times in microseconds, from the TCP connection being established to the
    /// handshake's end.
    pub handshake_us: LatencySummary,
    /// The handshakes' share of the time spent waiting: all handshake time over handshake time
    /// plus the answered requests' latency. With `--no-keepalive` every request pays one, and
    /// this is mean handshake / (mean handshake + mean latency).
    pub handshake_share: f64,
    /// The handshake times' histogram (base64, compressed V2, as `histogram`), so that the
    /// segments of a distributed run merge exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake_histogram: Option<String>,
}

impl TlsReport {
    /// The TLS side of one run split over workers (`sweetspot merge`): handshakes and
    /// resumptions added, their histograms added and summarized, the share taken again against
    /// the merged `latency`; version and ALPN are the first part's (the merge checks they
    /// agree). `None` when a part has no histogram (a report written before it was kept).
    pub fn add_up(parts: &[&TlsReport], latency: &LatencyHistogram) -> Option<TlsReport> {
        let first = parts.first()?;
        let mut handshakes = LatencyHistogram::new();
        for p in parts {
            let h = LatencyHistogram::decode(p.handshake_histogram.as_deref()?).ok()?;
            handshakes.merge(&h);
        }
        Some(TlsReport {
            version: first.version.clone(),
            alpn: first.alpn.clone(),
            ..TlsReport::of(
                Some(&handshakes),
                parts.iter().map(|p| p.resumed).sum(),
                latency,
            )
        })
    }

    /// The figures of `handshakes` (none: no handshake completed), `resumed` of them, beside
    /// the answered requests' `latency`; version and ALPN are the caller's to set.
    fn of(
        handshakes: Option<&LatencyHistogram>,
        resumed: u64,
        latency: &LatencyHistogram,
    ) -> TlsReport {
        let handshake_us = handshakes
            .map(LatencyHistogram::summary)
            .unwrap_or_default();
        TlsReport {
            version: String::new(),
            alpn: None,
            handshake_histogram: handshakes.map(LatencyHistogram::encode),
            handshakes: handshake_us.count,
            resumed,
            handshake_share: handshake_share(
                handshake_us.mean * handshake_us.count as f64,
                latency.mean() * latency.len() as f64,
            ),
            handshake_us,
        }
    }
}

impl LoadReport {
    /// Every response the server gave while the run lasted: `responses_read`, or, where a run
    /// does not count it (HTTP/2), the run's responses and the drain's.
    pub fn answered(&self) -> u64 {
        self.responses_read.max(self.requests + self.drained)
    }

    /// Client CPU time per complete response, in microseconds (0 when there were none).
    pub fn client_cpu_us_per_request(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.client_cpu_s * 1e6 / self.requests as f64
        }
    }
}

/// Rate mode's sends: how late they went out on average and at worst, and how long they
/// were held on average, µs (none where no send was timed).
fn send_lateness(merged: &ThreadStats) -> Option<(f64, f64, f64)> {
    let n = merged.send_late_count;
    (n > 0).then(|| {
        (
            merged.send_late_ns as f64 / 1000.0 / n as f64,
            merged.send_late_max_ns as f64 / 1000.0,
            merged.send_held_ns as f64 / 1000.0 / n as f64,
        )
    })
}

/// A plan's steps and a URL list's URLs, each summarized where the run had them.
fn steps_and_urls(
    config: &LoadConfig,
    merged: &ThreadStats,
) -> (
    Vec<crate::load::stats::steps::StepReport>,
    Vec<crate::load::stats::urls::UrlReport>,
) {
    let steps = match (&config.plan, &merged.steps) {
        (Some(plan), Some(steps)) => {
            crate::load::stats::steps::summarize(plan, steps, config.timeout)
        }
        _ => Vec::new(),
    };
    let rate_mode = matches!(config.mode, Mode::Rate { .. });
    let urls = match (&config.urls, &merged.urls) {
        (Some(list), Some(stats)) => {
            crate::load::stats::urls::url_reports(list, stats, config.timeout, !rate_mode)
        }
        _ => Vec::new(),
    };
    (steps, urls)
}

/// Builds the report from the merged measurements of every thread.
pub fn build(config: &LoadConfig, threads: usize, merged: &ThreadStats) -> LoadReport {
    let duration_s = merged.elapsed.as_secs_f64();
    let per_second = |count: u64| {
        if duration_s > 0.0 {
            count as f64 / duration_s
        } else {
            0.0
        }
    };
    let rate_mode = matches!(config.mode, Mode::Rate { .. });
    let (target_rate, achieved_rate, rate_held) = rate_figures(config, merged);
    let ((latency_us, latency), uncorrected) = latency_views(config, merged);
    let send_late = send_lateness(merged);
    let (steps, urls) = steps_and_urls(config, merged);
    LoadReport {
        requests: merged.requests,
        duration_s,
        rps: per_second(merged.requests),
        cycle_rps: cycle_rps(config, merged),
        responses_read: merged.responses_read,
        latency_us,
        latency_uncorrected_us: uncorrected.as_ref().map(|(summary, _)| *summary),
        latency_answered_us: merged.latency.summary(),
        status: merged.status_map(),
        errors: merged.errors,
        unanswered: merged.unanswered,
        unsent: merged.unsent,
        drained: merged.drained,
        bytes_read: merged.bytes_read,
        response_bytes: merged.response_bytes,
        bytes_written: merged.bytes_written,
        per_second: per_second_rates(&merged.completed_per_second, duration_s),
        client_cpu_s: merged.cpu_s,
        client_wait_s: merged.wait_s,
        send_late_mean_us: send_late.map(|l| l.0),
        send_late_max_us: send_late.map(|l| l.1),
        send_held_mean_us: send_late.map(|l| l.2),
        target_rate,
        rate_held,
        achieved_rate,
        slack_us: rate_mode.then(|| config.effective_slack().as_micros() as u64),
        net: None,
        plan: config.plan.as_ref().map(|p| p.to_string()),
        steps,
        requests_sent: merged.sent,
        target: match &config.urls {
            Some(list) => list.describe(),
            None => config.target.to_string(),
        },
        mode: config.mode.name().to_string(),
        connections: config.connections,
        threads,
        engine: config.engine.name().to_string(),
        uring: (config.engine == crate::load::Engine::Uring)
            .then(|| uring_report(config, threads, merged)),
        stamps: stamp_report(config, merged),
        segment: None,
        started_at_unix_s: 0.0,
        ended_at_unix_s: 0.0,
        start_late_s: None,
        // The histograms the summaries describe: censored requests included.
        histogram: Some(crate::load::stats::LatencyHistogram::encode(&latency)),
        histogram_uncorrected: uncorrected
            .as_ref()
            .map(|(_, h)| crate::load::stats::LatencyHistogram::encode(h)),
        urls,
        series: Vec::new(),
        tls: config.target.is_tls().then(|| tls_report(merged)),
        http2: merged
            .h2
            .as_ref()
            .map(|counts| h2_report(config, merged, counts)),
    }
}

/// The share of the summed `latency` that `waited_us` of stream waits were (0 without latency).
fn wait_share(waited_us: f64, latency: &LatencyHistogram) -> f64 {
    let total_us = latency.mean() * latency.len() as f64;
    if total_us > 0.0 {
        (waited_us / total_us).min(1.0)
    } else {
        0.0
    }
}

/// The HTTP/2 figures of a run.
fn h2_report(config: &LoadConfig, merged: &ThreadStats, counts: &H2Counts) -> H2Report {
    H2Report {
        protocol: if config.target.is_tls() { "h2" } else { "h2c" }.to_string(),
        streams: config.streams,
        connections_opened: counts.connections,
        server_max_streams: counts.server_max_streams,
        stream_waits: counts.stream_waits.count,
        stream_wait_mean_us: counts.stream_waits.mean_us(),
        stream_wait_max_us: counts.stream_waits.max.as_secs_f64() * 1e6,
        stream_wait_share: wait_share(
            counts.stream_waits.total.as_secs_f64() * 1e6,
            &merged.latency,
        ),
        goaways: counts.goaways,
        resets: counts.resets,
        grpc_status: counts
            .grpc_status
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| {
                let key = if code < GRPC_CODES {
                    code.to_string()
                } else {
                    "other".to_string()
                };
                (key, *n)
            })
            .collect(),
    }
}

/// Rate mode: the rate asked for, the rate sent, and whether it was held.
fn rate_figures(
    config: &LoadConfig,
    merged: &ThreadStats,
) -> (Option<f64>, Option<f64>, Option<bool>) {
    let duration_s = merged.elapsed.as_secs_f64();
    match config.mode {
        Mode::Rate { rate, .. } => {
            let achieved = if duration_s > 0.0 {
                merged.sent as f64 / duration_s
            } else {
                0.0
            };
            (
                Some(rate),
                Some(achieved),
                Some(achieved >= rate * RATE_HELD_FRACTION),
            )
        }
        _ => (None, None, None),
    }
}

/// A latency summary and the histogram it describes.
type View = (LatencySummary, LatencyHistogram);

/// The latency as reported, with its histogram (censored requests included; a closed loop's
/// with the requests they held back), and rate mode's uncorrected view beside it.
fn latency_views(config: &LoadConfig, merged: &ThreadStats) -> (View, Option<View>) {
    let rate_mode = matches!(config.mode, Mode::Rate { .. });
    let view = if rate_mode {
        LatencyView::RateCorrected
    } else {
        LatencyView::ClosedLoop
    };
    let timeouts = merged.errors.timeout;
    let corrected = censored_view(
        &merged.latency,
        &merged.censored,
        view,
        timeouts,
        config.timeout,
    );
    let uncorrected = merged.latency_uncorrected.as_ref().map(|h| {
        censored_view(
            h,
            &merged.censored,
            LatencyView::RateUncorrected,
            timeouts,
            config.timeout,
        )
    });
    (corrected, uncorrected)
}

/// Rate mode over plain TCP with the epoll driver: how long the kernel-stamped responses
/// waited to be read.
fn stamp_report(config: &LoadConfig, merged: &ThreadStats) -> Option<StampReport> {
    let stamped = config.engine == crate::load::Engine::Epoll
        && matches!(config.mode, Mode::Rate { .. })
        && !config.target.is_tls();
    stamped.then(|| StampReport {
        stamped: merged.hold.count,
        hold_mean_us: merged.hold.mean_us(),
        hold_max_us: merged.hold.max.as_secs_f64() * 1e6,
    })
}

/// The io_uring driver's waits: its smallest share of connections decides whether it gathers.
fn uring_report(config: &LoadConfig, threads: usize, merged: &ThreadStats) -> UringReport {
    let share = config.connections / threads.max(1);
    let paced = matches!(config.mode, Mode::Rate { .. });
    UringReport {
        gather: if config.gather.is_zero() {
            0
        } else {
            crate::load::engine::ring::batch_size(share, paced)
        },
        window_us: config.gather.as_micros() as u64,
        held: merged.hold.count,
        hold_mean_us: merged.hold.mean_us(),
        hold_max_us: merged.hold.max.as_secs_f64() * 1e6,
    }
}

/// The handshake figures of an `https://` run (version and ALPN come from the pre-flight).
fn tls_report(merged: &ThreadStats) -> TlsReport {
    TlsReport::of(
        merged.handshake.as_ref(),
        merged.handshakes_resumed,
        &merged.latency,
    )
}

/// The share of `handshake_total` in `handshake_total + latency_total` (0 when both are 0).
pub fn handshake_share(handshake_total: f64, latency_total: f64) -> f64 {
    let total = handshake_total + latency_total;
    if total > 0.0 {
        handshake_total / total
    } else {
        0.0
    }
}

/// Closed loop only: the throughput in whole cycles of every connection, cycling at the
/// requests' mean latency plus the client's turnaround (HTTP/1.1's: a connection's cycles are
/// not an HTTP/2 run's, whose streams cycle apart).
fn cycle_rps(config: &LoadConfig, merged: &ThreadStats) -> Option<f64> {
    (matches!(config.mode, Mode::Closed { .. }) && merged.h2.is_none()).then(|| {
        merged
            .cycles
            .rate(config.connections as u64, merged.latency.mean() / 1e6)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_share_is_the_handshakes_part_of_all_waiting() {
        // --no-keepalive: 100 requests, each a 3 ms handshake and a 1 ms response.
        assert_eq!(handshake_share(100.0 * 3000.0, 100.0 * 1000.0), 0.75);
        assert_eq!(handshake_share(0.0, 5000.0), 0.0);
        assert_eq!(handshake_share(0.0, 0.0), 0.0);
    }

    #[test]
    fn tls_report_counts_handshakes_and_their_share() {
        let mut stats = ThreadStats::new(false);
        let mut handshakes = LatencyHistogram::new();
        for _ in 0..4 {
            handshakes.record_us(3000);
            stats.latency.record_us(1000);
        }
        stats.handshake = Some(handshakes);
        stats.handshakes_resumed = 1;
        let report = tls_report(&stats);
        assert_eq!(report.handshakes, 4);
        assert_eq!(report.resumed, 1);
        assert!((report.handshake_us.p50 - 3000.0).abs() <= 3.0);
        assert!(
            (report.handshake_share - 0.75).abs() < 0.001,
            "{}",
            report.handshake_share
        );
        let none = tls_report(&ThreadStats::new(false));
        assert_eq!((none.handshakes, none.handshake_share), (0, 0.0));
    }

    #[test]
    fn only_https_runs_report_a_tls_side() {
        let config = |url: &str| {
            LoadConfig::new(
                crate::load::Target::parse(url).unwrap(),
                1,
                Mode::Count { requests: 1 },
            )
        };
        let stats = ThreadStats::new(false);
        assert!(build(&config("http://h/"), 1, &stats).tls.is_none());
        let https = build(&config("https://h/"), 1, &stats);
        assert_eq!(https.tls.map(|t| t.handshakes), Some(0));
        let json = serde_json::to_string(&build(&config("http://h/"), 1, &stats)).unwrap();
        assert!(!json.contains("\"tls\""), "{json}");
    }
}
