//! The human summary of a load run, in the manner of wrk's.
//!
//! Pure formatting over a [`LoadReport`], so it is tested without a run. A figure that is only
//! a lower bound (requests left unanswered, see [`crate::load::stats`]) is printed as `>= 1.00 s`.

use std::fmt::Write;

use crate::load::output::report::{H2Report, LoadReport, TlsReport};
use crate::load::stats::LatencyKey;
use crate::load::stats::LatencySummary;
use crate::load::{LoadConfig, Mode};
use crate::render::numbers::{cpu_list_text, duration_us, percent};

/// Renders the summary, ending with a newline.
pub fn render(report: &LoadReport, config: &LoadConfig) -> String {
    let mut out = String::new();
    header(&mut out, report, config);
    let corrected = report.latency_uncorrected_us.is_some();
    latency_block(
        &mut out,
        if corrected {
            "Latency (from intended send times: waits for a busy connection in, the generator's own lateness out)"
        } else {
            "Latency"
        },
        &report.latency_us,
    );
    if let Some(uncorrected) = &report.latency_uncorrected_us {
        latency_block(
            &mut out,
            "Uncorrected latency (from actual send times, as wrk and ab measure: waits for a busy connection out)",
            uncorrected,
        );
    }
    if let Some(tls) = &report.tls {
        tls_block(&mut out, tls, config.keepalive);
    }
    if let Some(h2) = &report.http2 {
        h2_block(&mut out, h2, report.connections);
    }
    counts(&mut out, report);
    if !report.urls.is_empty() {
        out.push_str(&crate::load::stats::urls::render_table(&report.urls));
    }
    rates(&mut out, report);
    out.push_str(&crate::load::stats::steps::render_table(&report.steps));
    let _ = writeln!(
        out,
        "Client CPU:   {:.2}s ({:.2}us per request)",
        report.client_cpu_s,
        report.client_cpu_us_per_request()
    );
    if let Some(uring) = &report.uring {
        uring_line(&mut out, report, uring);
    }
    if let Some(stamps) = report.stamps.as_ref().filter(|s| s.stamped > 0) {
        let _ = writeln!(
            out,
            "Arrivals:     timed by the kernel's stamps ({} reads); responses waited {:.0} µs on average (max {:.0} µs) to be read, in no latency",
            stamps.stamped, stamps.hold_mean_us, stamps.hold_max_us
        );
    }
    if let Some(net) = &report.net {
        net_lines(&mut out, net);
    }
    out
}

/// What the path did and what its relay did: the packets, the drops of each kind, the
/// retransmissions seen on it, the relay's lateness and CPU, and what each connection got.
fn net_lines(out: &mut String, net: &crate::load::output::report::NetReport) {
    let _ = writeln!(
        out,
        "Path:         {}: {} packets, {} lost, {} dropped by a full queue{}; TCP \
         retransmissions on the path: {} by the clients, {} by the server",
        net.path,
        net.packets,
        net.lost,
        net.queue_dropped,
        if net.queued_max_us > 0.0 {
            format!(
                " (the longest through its queues {})",
                crate::render::numbers::duration_us(net.queued_max_us)
            )
        } else {
            String::new()
        },
        net.retrans_clients,
        net.retrans_server_side
    );
    if let Some(f) = &net.flows {
        let _ = writeln!(
            out,
            "Connections:  {} got {:.2} to {:.2} Mbit/s toward the clients (median {:.2})",
            f.flows, f.min_mbit, f.max_mbit, f.median_mbit
        );
    }
    let cpus = if net.relay_cpus.is_empty() {
        String::new()
    } else {
        format!(" on CPU {}", cpu_list_text(&net.relay_cpus))
    };
    let _ = writeln!(
        out,
        "Relay:        {} packets written {:.0} µs late on average (p99 {:.0} µs, max {:.0} µs), \
         {} more than 1 ms late; {} it had no room for, {} dropped at its devices; its threads \
         used {:.2} s of CPU{cpus}",
        net.written,
        net.late_mean_us,
        net.late_p99_us,
        net.late_max_us,
        net.late_packets,
        net.overflowed,
        net.device_dropped,
        net.relay_cpu_s
    );
}

/// What ran against what: the mode, threads and connections, the segment and a late start.
fn header(out: &mut String, report: &LoadReport, config: &LoadConfig) {
    let what = match config.mode {
        Mode::Closed { duration } => {
            format!("{} closed-loop test", seconds(duration.as_secs_f64()))
        }
        Mode::Count { requests } => format!("{requests}-request test"),
        Mode::Rate { rate, duration } => match &config.plan {
            Some(plan) => format!(
                "{} test at {plan} (a mean of {rate:.2} req/s)",
                seconds(duration.as_secs_f64())
            ),
            None => format!("{} test at {rate} req/s", seconds(duration.as_secs_f64())),
        },
    };
    let _ = writeln!(out, "Running {what} @ {}", report.target);
    let _ = writeln!(
        out,
        "  {} threads and {} connections{}{}{}",
        report.threads,
        report.connections,
        if config.keepalive {
            ""
        } else {
            ", a new connection per request"
        },
        match (&report.http2, config.pipeline) {
            (Some(h2), _) => format!(" x {} streams ({})", h2.streams, h2.protocol),
            (None, 1) => String::new(),
            (None, depth) => format!(", pipeline {depth}"),
        },
        if report.http2.is_some() {
            String::new()
        } else {
            engine_note(config.engine)
        }
    );
    if let Some(seg) = &report.segment {
        let _ = writeln!(
            out,
            "  segment {}/{} of a run of {} connections{}{}",
            seg.index,
            seg.count,
            seg.total_connections,
            seg.total_rate
                .map_or(String::new(), |r| format!(" at {r} req/s")),
            seg.total_requests
                .map_or(String::new(), |n| format!(", {n} requests")),
        );
    }
    if let Some(late) = report.start_late_s {
        let _ = writeln!(out, "  started {late:.3} s after the agreed start time");
    }
}

/// Requests, bytes, status codes, errors, and what was left unanswered or unsent.
fn counts(out: &mut String, report: &LoadReport) {
    let _ = writeln!(
        out,
        "  {} requests in {}, {} read, {} written",
        report.requests,
        seconds(report.duration_s),
        bytes(report.bytes_read as f64),
        bytes(report.bytes_written as f64)
    );
    if !report.status.is_empty() {
        let codes: Vec<String> = report
            .status
            .iter()
            .map(|(code, n)| format!("{code}: {n}"))
            .collect();
        let _ = writeln!(out, "  Status codes: {}", codes.join(", "));
    }
    let e = &report.errors;
    if e.total() > 0 {
        let _ = writeln!(
            out,
            "  Errors: connect {}, read {}, write {}, timeout {}, protocol {}",
            e.connect, e.read, e.write, e.timeout, e.protocol
        );
    }
    if report.unanswered > 0 {
        let _ = writeln!(
            out,
            "  Unanswered at the end: {} (sent, neither answered nor timed out)",
            report.unanswered
        );
    }
    if report.unsent > 0 {
        let _ = writeln!(
            out,
            "  Due but never sent: {} (their connection was still waiting, or down)",
            report.unsent
        );
    }
    if !report.latency_us.lower_bound.is_empty() {
        let answered = &report.latency_answered_us;
        let _ = writeln!(
            out,
            "  >= marks a lower bound: unanswered requests count at their age{}{}; \
             the answered requests alone: p50 {}, p99 {}",
            if report.mode == "rate" {
                ""
            } else {
                " with the requests they held back"
            },
            match (report.errors.timeout > 0, report.mode == "rate") {
                (false, _) => "",
                (true, true) => ", timeouts at least at the timeout",
                (true, false) => ", timeouts at the timeout with the requests they held back",
            },
            duration_us(answered.p50),
            duration_us(answered.p99)
        );
    }
}

/// Requests and bytes per second, and whether a fixed rate was held.
fn rates(out: &mut String, report: &LoadReport) {
    let _ = writeln!(out, "Requests/sec: {:>12.2}", report.rps);
    let _ = writeln!(
        out,
        "Transfer/sec: {:>12}",
        bytes(report.bytes_read as f64 / report.duration_s.max(1e-9))
    );
    if let (Some(target), Some(achieved), Some(held)) =
        (report.target_rate, report.achieved_rate, report.rate_held)
    {
        let _ = writeln!(
            out,
            "Rate:         target {target:.2}/s, sent {achieved:.2}/s: {}{}",
            if held {
                "held"
            } else {
                "NOT HELD (the server or the generator could not keep up)"
            },
            report
                .slack_us
                .map(|us| format!(" (slack {us} us)"))
                .unwrap_or_default()
        );
        if let (Some(late), Some(max)) = (report.send_late_mean_us, report.send_late_max_us) {
            let _ = writeln!(
                out,
                "Send late:    {late:.0} us on average, at most {max:.0} us, after a request could \
                 go: the generator's own lateness, in no latency"
            );
        }
        if let Some(held) = report.send_held_mean_us {
            let _ = writeln!(
                out,
                "Send held:    {held:.0} us on average after the intended time, waiting for a \
                 connection still busy with the server: in the latency above"
            );
        }
    }
}

/// How the header line names a driver other than the default.
fn engine_note(engine: crate::load::Engine) -> String {
    match engine {
        crate::load::Engine::Epoll => String::new(),
        other => format!(", {} engine", other.name()),
    }
}

/// The io_uring driver's waits: responses are timed at arrival, so the wait is in no
/// latency, but it delays each connection's next request.
fn uring_line(
    out: &mut String,
    report: &LoadReport,
    uring: &crate::load::output::report::UringReport,
) {
    let gathering = if uring.gather > 1 {
        format!(
            "up to {} responses per wakeup, waiting at most {} µs for them",
            uring.gather, uring.window_us
        )
    } else {
        "no gathering".to_string()
    };
    let _ = writeln!(
        out,
        "io_uring:     {gathering}; responses waited {:.0} µs on average (max {:.0} µs) to be handled, timed at arrival",
        uring.hold_mean_us, uring.hold_max_us
    );
    // Little's law: what the server actually had to answer at once, which the wait lowers.
    let _ = writeln!(
        out,
        "              {:.1} requests at the server on average ({} connections)",
        report.rps * report.latency_us.mean / 1e6,
        report.connections
    );
}

/// HTTP/2: connections x streams, the server's cap, the client's waits for a stream, and what
/// the server ended (GOAWAY) or reset.
pub fn h2_block(out: &mut String, h2: &H2Report, connections: usize) {
    let cap = match h2.server_max_streams {
        Some(max) => format!("the server allows {max} streams a connection"),
        None => "the server sets no stream limit".to_string(),
    };
    let _ = writeln!(
        out,
        "  HTTP/2 ({}): {} connections x {} streams; {}; {} connections opened",
        h2.protocol, connections, h2.streams, cap, h2.connections_opened
    );
    if h2.stream_waits > 0 {
        let _ = writeln!(
            out,
            "  Stream waits: {} requests waited for a stream under the server's cap (mean {}, max {}), {} of their latency",
            h2.stream_waits,
            duration_us(h2.stream_wait_mean_us),
            duration_us(h2.stream_wait_max_us),
            percent(h2.stream_wait_share)
        );
    }
    if h2.goaways > 0 || h2.resets > 0 {
        let _ = writeln!(
            out,
            "  Server ended {} connections with GOAWAY and reset {} streams (counted as read errors)",
            h2.goaways, h2.resets
        );
    }
    if !h2.grpc_status.is_empty() {
        let codes: Vec<String> = h2
            .grpc_status
            .iter()
            .map(|(code, n)| {
                let name = code
                    .parse()
                    .map_or("UNKNOWN_CODE", crate::http::grpc::status_name);
                format!("{n} {name} ({code})")
            })
            .collect();
        let _ = writeln!(out, "  gRPC calls by grpc-status: {}", codes.join(", "));
    }
}

/// The TLS side: what was negotiated, the handshakes' own percentiles, and their share of the
/// time spent waiting (every request's, with `--no-keepalive`).
pub fn tls_block(out: &mut String, tls: &TlsReport, keepalive: bool) {
    let _ = writeln!(
        out,
        "  TLS: {}, ALPN {}, {} handshakes ({} resumed), not in the latency above",
        if tls.version.is_empty() {
            "?"
        } else {
            &tls.version
        },
        tls.alpn.as_deref().unwrap_or("none"),
        tls.handshakes,
        tls.resumed
    );
    latency_block(out, "TLS handshake", &tls.handshake_us);
    let _ = writeln!(
        out,
        "  Handshakes were {} of the time waited (handshakes + responses){}",
        percent(tls.handshake_share),
        if keepalive {
            ""
        } else {
            "; every request paid one (--no-keepalive)"
        }
    );
}

fn latency_block(out: &mut String, title: &str, l: &LatencySummary) {
    let _ = writeln!(out, "  {title}");
    if l.count == 0 {
        let _ = writeln!(out, "    no samples");
        return;
    }
    let _ = writeln!(
        out,
        "    {:>10} {:>10} {:>10} {:>10}",
        "Avg", "Stdev", "Min", "Max"
    );
    let _ = writeln!(
        out,
        "    {:>10} {:>10} {:>10} {:>10}",
        l.figure(LatencyKey::Mean),
        duration_us(l.stdev),
        l.figure(LatencyKey::Min),
        l.figure(LatencyKey::Max)
    );
    for (label, key) in [
        ("50%", LatencyKey::P50),
        ("75%", LatencyKey::P75),
        ("90%", LatencyKey::P90),
        ("99%", LatencyKey::P99),
        ("99.9%", LatencyKey::P999),
        ("99.99%", LatencyKey::P9999),
    ] {
        let _ = writeln!(out, "    {label:>7} {:>10}", l.figure(key));
    }
}

fn seconds(s: f64) -> String {
    format!("{s:.2}s")
}

/// A byte count with a binary unit.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = n;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2}{}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::stats::LowerBounds;
    use crate::load::Target;

    #[test]
    fn lower_bounds_print_with_a_sign_and_a_note() {
        let mut bounds = LowerBounds::default();
        for key in [
            LatencyKey::P99,
            LatencyKey::P999,
            LatencyKey::P9999,
            LatencyKey::Max,
            LatencyKey::Mean,
        ] {
            bounds.insert(key);
        }
        let latency = LatencySummary {
            count: 100,
            min: 40.0,
            mean: 50_000.0,
            p50: 50.0,
            p75: 60.0,
            p90: 70.0,
            p99: 1_000_000.0,
            p999: 1_000_000.0,
            p9999: 1_000_000.0,
            max: 1_000_000.0,
            lower_bound: bounds,
            ..Default::default()
        };
        let report = LoadReport {
            requests: 97,
            duration_s: 1.0,
            rps: 97.0,
            cycle_rps: None,
            responses_read: 97,
            latency_us: latency,
            latency_uncorrected_us: None,
            latency_answered_us: LatencySummary {
                p50: 50.0,
                p99: 80.0,
                ..latency
            },
            status: Default::default(),
            errors: Default::default(),
            unanswered: 3,
            unsent: 0,
            drained: 0,
            bytes_read: 0,
            response_bytes: 0,
            bytes_written: 0,
            per_second: vec![97.0],
            client_cpu_s: 0.1,
            client_wait_s: 0.0,
            send_late_mean_us: None,
            send_late_max_us: None,
            send_held_mean_us: None,
            target_rate: None,
            rate_held: None,
            achieved_rate: None,
            slack_us: None,
            net: None,
            plan: None,
            steps: Vec::new(),
            requests_sent: 100,
            target: "http://127.0.0.1:1/".into(),
            mode: "closed".into(),
            connections: 4,
            threads: 1,
            engine: "epoll".into(),
            segment: None,
            started_at_unix_s: 0.0,
            ended_at_unix_s: 0.0,
            start_late_s: None,
            histogram: None,
            histogram_uncorrected: None,
            urls: Vec::new(),
            series: Vec::new(),
            tls: None,
            http2: None,
            uring: None,
            stamps: None,
        };
        let config = LoadConfig::new(
            Target::parse("http://127.0.0.1:1/").unwrap(),
            4,
            crate::load::Mode::Closed {
                duration: std::time::Duration::from_secs(1),
            },
        );
        let text = render(&report, &config);
        assert!(text.contains("        99%  >= 1.00 s\n"), "{text}");
        assert!(text.contains("        50%      50 us\n"), "{text}");
        assert!(text.contains(">= 50.0 ms"), "{text}");
        assert!(text.contains("      40 us  >= 1.00 s\n"), "{text}");
        assert!(
            text.contains("the answered requests alone: p50 50 us, p99 80 us"),
            "{text}"
        );
    }

    #[test]
    fn tls_block_gives_handshakes_apart_and_their_share() {
        let tls = TlsReport {
            version: "TLSv1.3".into(),
            alpn: Some("http/1.1".into()),
            handshakes: 200,
            resumed: 199,
            handshake_us: LatencySummary {
                count: 200,
                mean: 1500.0,
                p50: 1400.0,
                p99: 3000.0,
                max: 4000.0,
                ..Default::default()
            },
            handshake_share: 0.6,
            handshake_histogram: None,
        };
        let mut out = String::new();
        tls_block(&mut out, &tls, false);
        assert!(
            out.starts_with(
                "  TLS: TLSv1.3, ALPN http/1.1, 200 handshakes (199 resumed), not in the latency above\n  TLS handshake\n"
            ),
            "{out}"
        );
        assert!(out.contains("        50%     1.4 ms\n"), "{out}");
        assert!(out.ends_with(
            "  Handshakes were 60% of the time waited (handshakes + responses); every request paid one (--no-keepalive)\n"
        ), "{out}");
    }

    #[test]
    fn the_uring_line_gives_the_wait_and_what_the_server_had_at_once() {
        let report = LoadReport {
            rps: 90_000.0,
            latency_us: LatencySummary {
                mean: 400.0,
                ..Default::default()
            },
            connections: 50,
            ..Default::default()
        };
        let mut out = String::new();
        let uring = crate::load::output::report::UringReport {
            gather: 47,
            window_us: 200,
            held: 1000,
            hold_mean_us: 150.4,
            hold_max_us: 210.0,
        };
        uring_line(&mut out, &report, &uring);
        assert_eq!(
            out,
            "io_uring:     up to 47 responses per wakeup, waiting at most 200 µs for them; responses waited 150 µs on average (max 210 µs) to be handled, timed at arrival\n              36.0 requests at the server on average (50 connections)\n"
        );
        out.clear();
        uring_line(
            &mut out,
            &report,
            &crate::load::output::report::UringReport { gather: 0, ..uring },
        );
        assert!(out.starts_with("io_uring:     no gathering; "), "{out}");
    }

    #[test]
    fn units_read_like_wrk() {
        assert_eq!(bytes(512.0), "512.00B");
        assert_eq!(bytes(1536.0), "1.50KB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0), "3.00MB");
    }
}
