//! `/work` as a user measures it: the CPU a request asks for is what the server spends on it
//! (the sweep's exact server CPU, in every architecture), the waits drawn follow the
//! distribution asked for, and `wait=blocking` stalls an event loop where `wait=async` does not.

use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{timing_lock, Client, Server, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_sweetspot");

/// The server CPU per request of every architecture at `cpu_us` = 200 µs and 2 ms, from a
/// sweep (a fixed count of requests over 4 connections, so the pools and the loops all work):
/// at 2 ms within 10% of what was asked, and the CPU 1.8 ms more asks for (the difference of
/// the two, in which the HTTP exchange around the work cancels out) within 10% of 1.8 ms.
/// The exchange itself costs some 10 to 30 µs a request here (a VM, its client asleep while
/// the server works), so the whole of a 200 µs request is printed but not bounded at 10%.
/// This machine is shared, and a neighbour's burst can only add CPU to a trial, so an
/// architecture outside the bounds is measured again (up to three trials in all) and judged
/// by its least-CPU trial: an architecture that truly spends more fails every trial.
#[test]
fn server_cpu_per_request_is_the_cpu_asked_for_in_every_architecture() {
    let _timing = timing_lock();
    let tmp = TempDir::new("work-cpu");
    let mut best: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    let mut pending: Vec<String> = sweetspot::arch::Arch::all()
        .iter()
        .map(|a| a.name().to_string())
        .collect();
    let mut wrong = Vec::new();
    for trial in 1..=3 {
        if pending.is_empty() {
            break;
        }
        for (arch, (small, large)) in cpu_per_request(&tmp, trial, &pending) {
            let kept = best.entry(arch).or_insert((small, large));
            if large < kept.1 {
                *kept = (small, large);
            }
        }
        wrong.clear();
        pending.retain(|name| {
            let (small, large) = best[name];
            let line = format!(
                "{name}: {small:.0} us at 200 us, {large:.0} us at 2 ms, {:.0} us more (trial {trial})",
                large - small
            );
            eprintln!("{line}");
            let off = (large - 2000.0).abs() > 200.0 || (large - small - 1800.0).abs() > 180.0;
            if off {
                wrong.push(line);
            }
            off
        });
    }
    assert_eq!(best.len(), sweetspot::arch::Arch::all().len());
    assert!(
        wrong.is_empty(),
        "off by more than 10% in three trials:\n{}",
        wrong.join("\n")
    );
}

/// One sweep of `archs` at `cpu_us` = 200 and 2000: each architecture's server CPU per request
/// at the two.
fn cpu_per_request(tmp: &TempDir, trial: u32, archs: &[String]) -> Vec<(String, (f64, f64))> {
    let experiment = tmp.path().join(format!("work-{trial}.toml"));
    let list = archs
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    std::fs::write(
        &experiment,
        format!(
            r#"
name = "work-cpu"
archs = [{list}]
workers = []
concurrency = [4]
mode = "count"
requests = 400
warmup = "0s"
timeout = "5s"

[[workload]]
name = "cpu200"
route = "/work?cpu_us=200"

[[workload]]
name = "cpu2000"
route = "/work?cpu_us=2000"
"#
        ),
    )
    .unwrap();
    let out = tmp.path().join(format!("out-{trial}"));
    let run = Command::new(BIN)
        .args(["sweep", experiment.to_str().unwrap(), "--plain", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let points = results["points"].as_array().unwrap();
    let cpu_of = |arch: &str, workload: &str| -> f64 {
        let p = points
            .iter()
            .find(|p| p["arch"] == arch && p["workload"] == workload)
            .unwrap_or_else(|| panic!("no point {arch} {workload}"));
        assert_eq!(p["ok"], true, "{p}");
        p["server_cpu_us_per_request"].as_f64().unwrap()
    };
    archs
        .iter()
        .map(|a| (a.clone(), (cpu_of(a, "cpu200"), cpu_of(a, "cpu2000"))))
        .collect()
}

/// Sends `count` requests for `path` over `connections` keep-alive connections at once and
/// returns each one's time, send to full reply, in milliseconds.
fn latencies_ms(port: u16, path: &str, connections: usize, count: usize) -> Vec<f64> {
    let per = count / connections;
    let threads: Vec<_> = (0..connections)
        .map(|_| {
            let path = path.to_string();
            std::thread::spawn(move || {
                let mut client = Client::connect(port);
                let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
                let mut out = Vec::with_capacity(per);
                for _ in 0..per {
                    let start = Instant::now();
                    client.send(request.as_bytes());
                    assert_eq!(client.read_reply(false).status, 200, "{path}");
                    out.push(start.elapsed().as_secs_f64() * 1e3);
                }
                out
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

fn mean_and_cv(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt() / mean)
}

/// Over 2,000 requests the observed waits (each request's time, which is its wait plus a
/// fraction of a millisecond of exchange) have the mean and the coefficient of variation of
/// the distribution asked for: the mean within 10%, the CV within 0.15 (the sampling error of
/// either is a few percent here). A server that waits longer fails all three trials.
#[test]
fn observed_waits_follow_the_distribution_asked_for() {
    let _timing = timing_lock();
    let server = Server::start(&["--arch", "epoll"]);
    for (query, cv) in [
        ("wait_ms=10", 0.0),
        ("wait_ms=10&dist=exp&seed=5", 1.0),
        ("wait_ms=10&dist=lognormal&cv=0.5&seed=9", 0.5),
    ] {
        // A neighbour's burst on this shared machine can only add to the waits: a query is
        // judged by the trial (of up to three) whose mean is nearest the one asked for.
        let mut best: Option<(f64, f64)> = None;
        for _ in 0..3 {
            let waits = latencies_ms(server.port, &format!("/work?{query}"), 50, 2000);
            let (mean, cv) = mean_and_cv(&waits);
            eprintln!("{query}: mean {mean:.2} ms, cv {cv:.3}");
            if best.is_none_or(|(m, _)| (mean - 10.0).abs() < (m - 10.0).abs()) {
                best = Some((mean, cv));
            }
            if (mean - 10.0).abs() < 1.0 {
                break;
            }
        }
        let (mean, observed_cv) = best.unwrap();
        assert!((mean - 10.0).abs() < 1.0, "{query}: mean {mean:.2} ms");
        assert!(
            (observed_cv - cv).abs() < 0.15,
            "{query}: cv {observed_cv:.3}, asked {cv}"
        );
    }
}

/// Ten requests waiting 100 ms each at once: as timers, an event loop answers them all in
/// about 100 ms; blocking its one thread, it answers them one after another (a second).
#[test]
fn a_blocking_wait_serializes_an_event_loop_and_an_async_one_does_not() {
    let _timing = timing_lock();
    let server = Server::start(&["--arch", "epoll"]);
    let all_done = |path: &str| {
        let start = Instant::now();
        let times = latencies_ms(server.port, path, 10, 10);
        assert_eq!(times.len(), 10);
        start.elapsed()
    };
    let waiting = all_done("/work?wait_ms=100");
    let blocking = all_done("/work?wait_ms=100&wait=blocking");
    eprintln!("async {waiting:?}, blocking {blocking:?}");
    assert!(waiting < Duration::from_millis(300), "{waiting:?}");
    assert!(blocking >= Duration::from_millis(1000), "{blocking:?}");
}
