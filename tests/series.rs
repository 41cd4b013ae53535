//! The time series of `sweetspot load` (`--json` `series`, `--csv`, `--html`) against a real
//! server on a free port: the intervals add up exactly to the report, and a server stopped
//! with SIGSTOP for two seconds shows as empty intervals in the right place, with the held
//! requests' latency where they complete. Every run is bounded; the server is killed by PID.

mod common;

use std::time::{Duration, Instant};

use common::{sweetspot, timing_lock, unix_now, Server, TempDir};
use nix::sys::signal::{kill, Signal};
use serde_json::Value;
use sweetspot::load::output::timeseries::CSV_HEADER;

/// The points of a report's series that are intervals (not the censored tail).
fn intervals(report: &Value) -> Vec<&Value> {
    report["series"]
        .as_array()
        .unwrap_or_else(|| panic!("no series in {report}"))
        .iter()
        .filter(|p| p.get("censored").is_none())
        .collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn a_three_second_run_has_three_intervals_that_add_up_to_the_report() {
    let _t = timing_lock();
    let server = Server::start(&["--arch", "threaded"]);
    let dir = TempDir::new("series-3s");
    let csv = dir.path().join("run.csv");
    let (code, stdout, stderr, _) = sweetspot(&[
        "load",
        &server.url("/hello"),
        "-c",
        "4",
        "-t",
        "1",
        "-d",
        "3s",
        "--json",
        "-",
        "--csv",
        csv.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let points = intervals(&report);
    let starts: Vec<f64> = points
        .iter()
        .map(|p| p["start_s"].as_f64().unwrap())
        .collect();
    assert_eq!(starts, vec![0.0, 1.0, 2.0]);
    let lengths: Vec<f64> = points
        .iter()
        .map(|p| p["length_s"].as_f64().unwrap())
        .collect();
    assert_eq!(&lengths[..2], &[1.0, 1.0]);
    // The last interval ends when the run noticed its deadline, a hair after 3 s.
    assert!((1.0..1.05).contains(&lengths[2]), "{lengths:?}");
    let responses: u64 = points.iter().map(|p| u(&p["responses"])).sum();
    assert_eq!(responses, u(&report["requests"]));
    assert!(points.iter().all(|p| u(&p["responses"]) > 0), "{points:?}");
    for kind in ["connect", "read", "write", "timeout", "protocol"] {
        let sum: u64 = points.iter().map(|p| u(&p["errors"][kind])).sum();
        assert_eq!(sum, u(&report["errors"][kind]), "{kind}");
    }
    // Every latency sample of the report is in exactly one point (drain answers in the last
    // interval, unanswered requests in the tail point).
    let samples: u64 = report["series"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !p["latency_us"].is_null())
        .map(|p| u(&p["latency_us"]["count"]))
        .sum();
    assert_eq!(samples, u(&report["latency_us"]["count"]));
    // The CSV says the same, one line per point after the header.
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], CSV_HEADER);
    assert_eq!(lines.len(), 1 + report["series"].as_array().unwrap().len());
    for (line, point) in lines[1..].iter().zip(report["series"].as_array().unwrap()) {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), CSV_HEADER.split(',').count(), "{line}");
        assert_eq!(cells[2].parse::<u64>().unwrap(), u(&point["responses"]));
        assert_eq!(
            cells[0].parse::<f64>().unwrap(),
            point["start_s"].as_f64().unwrap()
        );
        if !point["latency_us"].is_null() {
            assert_eq!(
                cells[13].parse::<u64>().unwrap(),
                u(&point["latency_us"]["p99"])
            );
        }
    }
}

/// Runs `load ARGS --start-in 1s --json -` against `server`, stops the server with SIGSTOP
/// `stop_after` into the run for `stall`, and returns the report with the stall's start and
/// end in seconds from the run's start (as the report's own start time places them).
fn run_with_stall(
    server: &Server,
    args: &[&str],
    stop_after: Duration,
    stall: Duration,
) -> (Value, f64, f64) {
    let mut all = vec!["load", "--start-in", "1s", "--json", "-", "-q"];
    all.extend_from_slice(args);
    let planned_start = unix_now() + 1.0;
    let pid = server.pid();
    let staller = std::thread::spawn(move || {
        let wait = planned_start + stop_after.as_secs_f64() - unix_now();
        std::thread::sleep(Duration::from_secs_f64(wait.max(0.0)));
        let stopped = unix_now();
        kill(pid, Signal::SIGSTOP).unwrap();
        let until = Instant::now() + stall;
        std::thread::sleep(until - Instant::now());
        kill(pid, Signal::SIGCONT).unwrap();
        (stopped, unix_now())
    });
    let (code, stdout, stderr, _) = sweetspot(&all);
    let (stopped, resumed) = staller.join().unwrap();
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let start = report["started_at_unix_s"].as_f64().unwrap();
    (report, stopped - start, resumed - start)
}

/// Asserts the stall is where it was: every interval wholly inside it has no response, every
/// interval wholly outside it (by more than `MARGIN`) has some. An interval the stall's start
/// or end falls in (one interval edge of tolerance) may have either. Returns the index of the
/// interval in which the stall ended.
fn assert_stall_in_place(points: &[&Value], stopped: f64, resumed: f64) -> usize {
    const MARGIN: f64 = 0.05;
    let mut inside = 0;
    for (i, p) in points.iter().enumerate() {
        let start = p["start_s"].as_f64().unwrap();
        let end = start + p["length_s"].as_f64().unwrap();
        let responses = u(&p["responses"]);
        if start >= stopped + MARGIN && end <= resumed - MARGIN {
            inside += 1;
            assert_eq!(
                responses, 0,
                "interval {i} is inside the stall {stopped:.3}..{resumed:.3}: {p}"
            );
            assert!(p["latency_us"].is_null(), "{p}");
        } else if end <= stopped - MARGIN || start >= resumed + MARGIN {
            assert!(
                responses > 0,
                "interval {i} is outside the stall {stopped:.3}..{resumed:.3}: {p}"
            );
        }
    }
    assert!(
        inside >= 1,
        "no interval lies inside the stall {stopped:.3}..{resumed:.3}"
    );
    points
        .iter()
        .position(|p| {
            let start = p["start_s"].as_f64().unwrap();
            start <= resumed && resumed < start + p["length_s"].as_f64().unwrap()
        })
        .expect("the stall ends within the run")
}

#[test]
fn a_closed_loop_stall_is_empty_seconds_then_the_held_latency_where_it_completes() {
    let _t = timing_lock();
    let server = Server::start(&["--arch", "epoll"]);
    let dir = TempDir::new("series-stall");
    let html = dir.path().join("run.html");
    let url = server.url("/hello");
    let args = [
        url.as_str(),
        "-c",
        "4",
        "-t",
        "1",
        "-d",
        "5s",
        "--timeout",
        "10s",
        "--html",
        html.to_str().unwrap(),
    ];
    let stall = Duration::from_millis(2200);
    let (report, stopped, resumed) =
        run_with_stall(&server, &args, Duration::from_millis(1400), stall);
    let points = intervals(&report);
    assert_eq!(points.len(), 5, "{report}");
    let ended_in = assert_stall_in_place(&points, stopped, resumed);
    // The four requests held through the stall complete when it ends, in that interval, with
    // (nearly) the stall's length as latency; none timed out (--timeout 10s).
    let max = u(&points[ended_in]["latency_us"]["max"]);
    let held_us = (resumed - stopped) * 1e6;
    assert!(
        max as f64 >= held_us * 0.9,
        "max {max} µs, stall {held_us} µs"
    );
    assert_eq!(u(&report["errors"]["timeout"]), 0);
    let responses: u64 = points.iter().map(|p| u(&p["responses"])).sum();
    assert_eq!(responses, u(&report["requests"]));
    // The page: one file, two inline SVG plots, nothing fetched.
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<svg").count(), 2);
    for external in ["<script", "<link", "src=\"http", "href=\"http", "url(http"] {
        assert!(!page.contains(external), "{external}");
    }
    assert!(page.contains("Latency over time") && page.contains("Throughput over time"));
}

#[test]
fn a_rate_mode_stall_shows_as_latency_from_the_intended_send_times() {
    let _t = timing_lock();
    let server = Server::start(&["--arch", "epoll"]);
    let url = server.url("/hello");
    let args = [
        url.as_str(),
        "-R",
        "400",
        "-c",
        "4",
        "-t",
        "1",
        "-d",
        "5s",
        "--timeout",
        "10s",
        "--interval",
        "500ms",
    ];
    let stall = Duration::from_millis(2000);
    let (report, stopped, resumed) =
        run_with_stall(&server, &args, Duration::from_millis(1300), stall);
    let points = intervals(&report);
    assert_eq!(points.len(), 10, "{report}");
    assert_eq!(points[1]["start_s"].as_f64(), Some(0.5));
    let ended_in = assert_stall_in_place(&points, stopped, resumed);
    // The requests due during the stall were sent late and are measured from when they were
    // due: in the interval the stall ended, latency reaches the stall's length, and half of
    // the interval's requests were due before it ended, most of them long before.
    let latency = &points[ended_in]["latency_us"];
    let held_us = (resumed - stopped) * 1e6;
    assert!(
        u(&latency["max"]) as f64 >= held_us * 0.9,
        "{latency} vs {held_us}"
    );
    assert!(
        u(&latency["p50"]) as f64 >= held_us * 0.2,
        "{latency} vs {held_us}"
    );
    // Before the stall, at 400/s against /hello, latency was far lower.
    assert!(
        u(&points[0]["latency_us"]["p99"]) < 100_000,
        "{}",
        points[0]
    );
}

#[test]
fn bad_series_flags_exit_2_with_one_line() {
    for (args, says) in [
        (
            vec!["--interval", "10ms"],
            "--interval must be between 100ms and 1h",
        ),
        (vec!["--interval", "often"], "--interval"),
        (vec!["--interval", "100ms", "-d", "168h"], "-d 168h"),
        (
            vec!["--csv", "/nonexistent-dir/run.csv"],
            "--csv: cannot create /nonexistent-dir/run.csv",
        ),
        (
            vec!["--html", "/nonexistent-dir/run.html"],
            "--html: cannot create /nonexistent-dir/run.html",
        ),
    ] {
        let mut all = vec!["load", "http://127.0.0.1:1/"];
        all.extend_from_slice(&args);
        let (code, stdout, stderr, _) = sweetspot(&all);
        assert_eq!(code, 2, "{args:?}: {stdout}{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
