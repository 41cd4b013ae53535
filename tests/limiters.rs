//! `sweetspot limiters` as a user runs it: the pool scenario on our hybrid server (8 pool
//! threads on a 20 ms blocking wait: the knee is N = 8 at 400 req/s at most), every default
//! controller gated in front of it, the counts exact; an interrupt keeps what ran; bad input.
//! The controllers' rules are checked step by step in their own modules' unit tests.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{shared_lock, sweetspot, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_sweetspot");

/// The default controllers, by their names in results.json.
const CONTROLLERS: &[&str] = &[
    "vegas",
    "gradient2",
    "windowed-gradient2",
    "aimd",
    "envoy",
    "vector",
];

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn the_pool_scenario_finds_the_knee_and_judges_every_controller_with_exact_counts() {
    let _load = shared_lock();
    let tmp = TempDir::new("limiters");
    let out = tmp.path().join("out");
    let (code, stdout, stderr, _) = sweetspot(&[
        "limiters",
        "pool",
        "-d",
        "1s",
        "--knee-step",
        "0.3s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("results: {}", out.display())),
        "{stdout}"
    );
    let results = read_json(&out.join("results.json"));
    let s = &results["scenarios"][0];
    assert_eq!(s["name"], "pool");
    // The knee within one step of 8 (the levels are 6, 8, 12), at most 400 req/s.
    let knee = &s["knees"][0]["knee"];
    let k = u(&knee["concurrency"]);
    assert!([6, 8, 12].contains(&k), "knee {knee}");
    let capacity = f(&knee["capacity_rps"]);
    assert!((250.0..=402.0).contains(&capacity), "capacity {capacity}");
    assert!((f(&s["rate"]) - 1.5 * capacity).abs() < 1e-6 * capacity);
    let runs = s["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let statics: Vec<String> = [(k / 2).max(1), k, 2 * k]
        .iter()
        .map(|l| format!("static-{l}"))
        .collect();
    let mut want: Vec<&str> = statics.iter().map(String::as_str).collect();
    want.extend_from_slice(CONTROLLERS);
    assert_eq!(names, want);
    for r in runs {
        let name = r["name"].as_str().unwrap();
        let c = &r["counts"];
        // Shed + admitted = offered; every admitted request ended one way, exactly.
        assert_eq!(
            u(&c["offered"]),
            u(&c["admitted"]) + u(&c["shed"]),
            "{name}"
        );
        assert_eq!(
            u(&c["admitted"]),
            u(&c["answered"]) + u(&c["timeouts"]) + u(&c["failed"]) + u(&c["unfinished"]),
            "{name}"
        );
        assert_eq!(u(&c["ok"]), u(&c["status"]["200"]), "{name}");
        assert!(u(&c["offered"]) > 250, "{name}: {}", c["offered"]);
        // The series covers the run: a step every 50 ms, from 0.05 s to 1 s.
        let series = c["series"].as_array().unwrap();
        assert_eq!(series.len(), 20, "{name}");
        assert!((f(&series[0]["t_s"]) - 0.05).abs() < 1e-9);
        assert!((f(&series[19]["t_s"]) - 1.0).abs() < 1e-9);
        let steps_offered: u64 = series.iter().map(|t| u(&t["offered"])).sum();
        assert_eq!(steps_offered, u(&c["offered"]), "{name}");
        // Goodput never above what 8 threads each holding a request 20 ms can do: over the
        // second half second, 8 x 0.5 s / 20 ms, plus the 8 under way when it began.
        let phase = &r["phases"][0];
        let goodput = f(&phase["goodput_rps"]);
        assert!(
            goodput <= (8.0 * 0.5 / 0.020 + 8.0) / 0.5 + 1e-9,
            "{name}: {goodput}"
        );
        assert!(goodput > 100.0, "{name}: {goodput}");
        assert!(f(&phase["limit"]["median"]) >= 1.0, "{name}");
        assert!(r["verdict"]
            .as_str()
            .unwrap()
            .contains(&format!("against a knee of {k}")));
        assert!(f(&r["lab"]["server_cpu_s"]) > 0.0, "{name}");
    }
    // A static limit holds, exactly.
    let fixed = runs.iter().find(|r| r["name"] == statics[1]).unwrap();
    let settled = &fixed["phases"][0]["limit"];
    assert_eq!(
        (f(&settled["median"]), f(&settled["spread"])),
        (k as f64, 0.0)
    );
    assert!(fixed["counts"]["series"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| u(&t["limit"]) == k && u(&t["inflight"]) <= k));
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for name in CONTROLLERS {
        assert!(table.contains(&format!("| {name} |")), "{name} in table.md");
        assert!(
            html.contains(&format!("<td>{name}</td>")),
            "{name} in report.html"
        );
    }
    assert_eq!(html.matches("<svg").count(), 2, "L(t) and goodput(t)");
}

#[test]
fn an_interrupt_keeps_what_ran_and_ends_at_once() {
    let _load = shared_lock();
    let tmp = TempDir::new("limiters-stop");
    let out = tmp.path().join("out");
    let mut child = Command::new(BIN)
        .args([
            "limiters",
            "pool",
            "-d",
            "30s",
            "--knee-step",
            "0.3s",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The knee's sweep takes about 3 s; then the first gated run of 30 s.
    std::thread::sleep(Duration::from_secs(5));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let stopped = Instant::now();
    let status = child.wait().unwrap();
    assert!(
        stopped.elapsed() < Duration::from_secs(5),
        "{:?}",
        stopped.elapsed()
    );
    assert_eq!(status.code(), Some(0));
    let results = read_json(&out.join("results.json"));
    assert_eq!(results["interrupted"], true);
    let s = &results["scenarios"][0];
    assert!(s["knees"][0]["knee"]["concurrency"].as_u64().is_some());
    let run = &s["runs"][0];
    assert_eq!(run["counts"]["interrupted"], true);
    let c = &run["counts"];
    assert_eq!(u(&c["offered"]), u(&c["admitted"]) + u(&c["shed"]));
    assert!(f(&c["duration_s"]) < 10.0, "{}", c["duration_s"]);
}

#[test]
fn bad_input_exits_2_with_one_line() {
    for (args, says) in [
        (
            vec!["limiters", "--controllers", "vegas,bogus"],
            "unknown controller \"bogus\"",
        ),
        (
            vec!["limiters", "-R", "0"],
            "-R 0: the offered rate must be more than 0",
        ),
        (vec!["limiters", "nope"], "unknown scenario \"nope\""),
        (vec!["limiters", "-d", "0s"], "-d: must be more than 0"),
        (
            vec![
                "limiters",
                "wait-step",
                "--cmd",
                "my-server --port {port}",
                "--url",
                "http://127.0.0.1:{port}/api",
            ],
            "scenario wait-step: it sets the backend's wait, so --url must take it as {wait_ms}",
        ),
        (
            vec![
                "limiters",
                "--cmd",
                "srv",
                "--url",
                "http://127.0.0.1:{port}/",
            ],
            "--cmd: the command must take the port as {port}",
        ),
    ] {
        let (code, stdout, stderr, took) = sweetspot(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("sweetspot: ") && stderr.contains(says),
            "{stderr}"
        );
        assert!(took < Duration::from_secs(5), "{args:?}");
    }
}
