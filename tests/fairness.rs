//! Each architecture is what it says it is: every worker of a pool does work, the rings of
//! `uring` share the connections, and a wait is as long in every architecture as in a thread
//! that sleeps (no timer tick added). Real `sweetspot serve` processes driven by the real
//! `sweetspot load`, per-thread and per-process CPU read from `/proc`.

use std::collections::BTreeMap;

use nix::sys::signal::Signal;

mod common;
use common::{proc_stat, processes, sweetspot, timing_lock, Server};

/// `sweetspot load URL ARGS --json -`, parsed.
fn load(url: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["load", url];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "-"]);
    let (code, stdout, stderr, _) = sweetspot(&all);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).expect("load's JSON")
}

/// CPU ticks of each thread of `pid`, by thread name (threads of one name summed in a list).
fn thread_ticks(pid: i32) -> BTreeMap<String, Vec<u64>> {
    let mut by_name: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let dir = entry.path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        by_name
            .entry(name.trim().to_string())
            .or_default()
            .push(ticks);
    }
    by_name
}

/// The CPU ticks of each worker of a server started with `--workers 2`, read while it is
/// still running after a load of CPU work on 32 connections: the named threads of the pooled
/// architectures, or the worker processes of `preforked`.
fn worker_ticks(arch: &str) -> Vec<u64> {
    let server = Server::start(&["--arch", arch, "--workers", "2"]);
    let pid = server.pid().as_raw();
    load(&server.url("/fib?n=22"), &["-c", "32", "-d", "1500ms"]);
    let ticks = if arch == "preforked" {
        processes()
            .iter()
            .filter(|p| p.ppid == pid && p.state != "Z")
            .map(|p| proc_stat(p.pid).map_or(0, |s| s.cpu_ticks))
            .collect()
    } else {
        let threads = thread_ticks(pid);
        let names: &[&str] = match arch {
            "prethreaded" => &["worker-0", "worker-1"],
            "reactors" => &["reactor-0", "reactor-1"],
            "hybrid" => &["hybrid-worker-0", "hybrid-worker-1"],
            "uring" => &["uring-0", "uring-1"],
            "async" => &["async-worker"],
            other => panic!("no worker names for {other}"),
        };
        names
            .iter()
            .flat_map(|n| threads.get(*n).cloned().unwrap_or_default())
            .collect()
    };
    drop(server);
    ticks
}

#[test]
fn every_pool_puts_all_its_workers_to_work() {
    let _timing = timing_lock();
    for arch in [
        "preforked",
        "prethreaded",
        "reactors",
        "hybrid",
        "async",
        "uring",
    ] {
        let ticks = worker_ticks(arch);
        // Two workers, each with a real share of 1.5 s of CPU work (a tick is 10 ms): not a
        // pool of two where one does everything.
        assert_eq!(ticks.len(), 2, "{arch}: workers found: {ticks:?}");
        let total: u64 = ticks.iter().sum();
        assert!(total >= 40, "{arch}: the workers barely ran: {ticks:?}");
        for t in &ticks {
            assert!(
                *t * 5 >= total,
                "{arch}: a worker did under a fifth of the work: {ticks:?}"
            );
        }
    }
}

#[test]
fn uring_spreads_connections_over_its_rings_and_says_how() {
    let _timing = timing_lock();
    let server = Server::start(&["--arch", "uring", "--workers", "2"]);
    load(&server.url("/hello"), &["-c", "64", "-n", "6400"]);
    let (code, stdout) = server.stop_with(Signal::SIGTERM);
    assert_eq!(code, Some(0));
    let counts: Vec<u64> = stdout
        .split("accepted per loop ")
        .nth(1)
        .unwrap_or_else(|| panic!("no accept counts: {stdout}"))
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 2, "{stdout}");
    // The 64 of the run, and the load generator's own probe of the target.
    assert!((64..=66).contains(&counts.iter().sum::<u64>()), "{stdout}");
    // A hash of 64 connections over two listeners: both take a share (all on one ring has a
    // chance of 2^-63).
    assert!(counts.iter().all(|&c| c > 0), "{stdout}");
}

/// The median latency of `/sleep?ms=10` at one connection, microseconds.
fn sleep_p50(args: &[&str]) -> f64 {
    let server = Server::start(args);
    let report = load(&server.url("/sleep?ms=10"), &["-c", "1", "-n", "60"]);
    report["latency_us"]["p50"].as_f64().unwrap()
}

#[test]
fn a_wait_is_as_long_in_every_architecture_as_in_a_sleeping_thread() {
    let _timing = timing_lock();
    let threaded = sleep_p50(&["--arch", "threaded"]);
    assert!(
        (10_000.0..10_600.0).contains(&threaded),
        "threaded: {threaded} us"
    );
    let mut report = Vec::new();
    let mut off = Vec::new();
    for arch in [
        "iterative",
        "forking",
        "preforked",
        "prethreaded",
        "poll",
        "epoll",
        "reactors",
        "hybrid",
        "async",
        "uring",
    ] {
        let p50 = sleep_p50(&["--arch", arch]);
        report.push(format!("{arch} {p50:.0}"));
        // Within 0.2 ms of a thread that sleeps: no millisecond tick added by a loop's timer.
        if (p50 - threaded).abs() > 200.0 {
            off.push(arch);
        }
    }
    assert!(
        off.is_empty(),
        "threaded {threaded:.0} us; off by more than 200 us: {off:?}; all: {report:?}"
    );
}
