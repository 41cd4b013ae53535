//! `sweetspot tune` as a user runs it, on a real server with two knobs (the shipped
//! standard-library Python server, `experiments/peers/knobs.py`: processes, each a loop
//! handing requests to a pool of threads, under CPython's global lock): the search and its
//! check against the full grid in one run; bad input.

use std::path::Path;
use std::process::Command;

mod common;
use common::{timing_lock, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_sweetspot");

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn python() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// CPU-bound requests (2 ms of each thread's own CPU): threads in one process share one core
/// (the global lock), processes use both. The pick is 2 processes with 1 thread (the smallest
/// within 5% of the best), checked against every configuration of the ranges in the same run.
#[test]
fn tune_finds_processes_for_cpu_under_the_gil_and_the_grid_agrees() {
    assert!(python(), "the tests need python3");
    let _timing = timing_lock();
    let tmp = TempDir::new("tune");
    let out = tmp.path().join("out");
    let run = Command::new(BIN)
        .args([
            "tune",
            "--cmd",
            "exec python3 {peers}/knobs.py --procs {workers} --threads {threads} --port {port}",
            "--url",
            "http://127.0.0.1:{port}/work?cpu_us=2000",
            "--concurrency",
            "16",
            "--workers",
            "1..2",
            "--threads",
            "1..3",
            "--default",
            "workers=1,threads=3",
            "--duration",
            "400ms",
            "--warmup",
            "100ms",
            "--verify",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let r = read_json(&out.join("results.json"));
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    let pick = &r["pick"]["pick"];
    assert_eq!(pick[0], cores.min(2), "{stdout}");
    assert_eq!(pick[1], 1, "{stdout}");
    assert_eq!(r["verify"]["inside"], true, "{stdout}");
    assert_eq!(r["grid_points"], 2 * 3 * 3);
    assert_eq!(r["verify"]["points"], 2 * 3 * 3);
    // The default (one process, three threads) loses about half: the lock.
    let rules = r["rules"].as_array().unwrap();
    let default = rules.iter().find(|x| x["rule"] == "default").unwrap();
    assert_eq!(default["values"], serde_json::json!([1, 3]));
    if cores >= 2 {
        let loss = default["rps_loss"].as_f64().unwrap();
        assert!((0.3..0.7).contains(&loss), "{loss}: {stdout}");
    }
    assert!(rules.iter().any(|x| x["rule"] == "2n+1"));
    // Every configuration measured carries its costs.
    for c in r["measured"].as_array().unwrap() {
        for key in ["cpu_us", "rss_kb"] {
            assert!(c["level"][key].as_f64().unwrap() > 0.0, "{key}: {c}");
        }
    }
    assert!(stdout.contains("sweet spot: workers="), "{stdout}");
    assert!(stdout.contains("| workers \\ threads |"), "{stdout}");
    assert!(stdout.contains("the pick is inside"), "{stdout}");
    assert!(out.join("tune.md").exists());
    // The heat map marks the pick; the report holds it and every configuration's costs.
    let svg = std::fs::read_to_string(out.join("tune.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("the pick"), "{svg}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("<th>CPU / request</th>"));
    let rows = html.matches("<tr><td class=\"num\">").count();
    assert_eq!(rows, r["measured"].as_array().unwrap().len(), "{html}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let tmp = TempDir::new("tune-bad");
    let out = tmp.path().join("out");
    let out = out.to_str().unwrap();
    let url = "http://127.0.0.1:{port}/";
    for args in [
        // No placeholder for the knob given.
        vec!["--cmd", "srv --port {port}", "--workers", "1..4"],
        // An empty range.
        vec!["--cmd", "srv -w {workers} {port}", "--workers", "5..2"],
        // No knob at all, no port.
        vec!["--cmd", "srv {port}"],
        vec!["--cmd", "srv -w {workers}", "--workers", "1..2"],
        // A default that misses a knob.
        vec![
            "--cmd",
            "srv -w {workers} -t {threads} {port}",
            "--workers",
            "1..2",
            "--threads",
            "1..2",
            "--default",
            "workers=1",
        ],
        // A command that never opens its port.
        vec![
            "--cmd",
            "sleep 30 # {workers} {port}",
            "--workers",
            "1..2",
            "--ready-timeout",
            "1s",
        ],
    ] {
        let run = Command::new(BIN)
            .args(["tune", "--url", url, "--concurrency", "2", "--out", out])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
}
