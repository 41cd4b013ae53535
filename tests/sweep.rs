//! Integration tests of `sweetspot sweep` and `sweetspot report` through the built binary,
//! against real servers on free ports: a small experiment end to end, an interrupted sweep, an
//! external target started by a shell command, and bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

mod common;
use common::{processes, sweetspot_output as sweetspot, wait_group_gone, Server, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_sweetspot");

/// Writes an experiment file into `dir` and returns `sweetspot sweep FILE --out dir/out`, not
/// yet run (a test adds its flags, environment or limits), with the `--out` directory.
fn sweep_command(dir: &Path, file: &str, toml: &str) -> (Command, PathBuf) {
    let experiment = dir.join(file);
    std::fs::write(&experiment, toml).unwrap();
    let out = dir.join("out");
    let mut command = Command::new(BIN);
    command.args([
        "sweep",
        experiment.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    (command, out)
}

/// Writes an experiment file into `dir`, sweeps it into `dir/out` and asserts it succeeded.
fn sweep_ok(dir: &Path, file: &str, toml: &str) -> (Output, PathBuf) {
    let (mut command, out) = sweep_command(dir, file, toml);
    let run = command.output().expect("running sweetspot");
    assert!(
        run.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    (run, out)
}

/// Runs a sweep of the experiment `toml` that must be refused: exit 2 with one line, which
/// it returns.
fn refused_file(dir: &Path, toml: &str) -> String {
    let (mut command, _) = sweep_command(dir, "bad.toml", toml);
    let run = command.output().expect("running sweetspot");
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    stderr
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn small_experiment_end_to_end_then_report_renders_again() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-e2e");
    let dir = tmp.path().to_path_buf();
    let (run, out) = sweep_ok(
        &dir,
        "small.toml",
        r#"
name = "small"
archs = ["threaded", "epoll"]
concurrency = [1, 4]
duration = "300ms"
warmup = "100ms"
p99_bound_ms = 500

[[workload]]
name = "hello"
route = "/hello"
"#,
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("Recommendation"), "{stdout}");
    for file in [
        "results.json",
        "table.md",
        "report.html",
        "points.csv",
        "hello-throughput.svg",
        "hello-p99.svg",
    ] {
        assert!(out.join(file).is_file(), "missing {file}");
    }
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    // points.csv: a header and a row per point, the same figures as results.json.
    let csv = std::fs::read_to_string(out.join("points.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 5, "{csv}");
    let col = |name: &str| rows[0].iter().position(|h| *h == name).expect(name);
    for (row, p) in rows[1..].iter().zip(points) {
        assert_eq!(row[col("arch")], p["arch"].as_str().unwrap(), "{csv}");
        assert_eq!(row[col("concurrency")], p["concurrency"].to_string());
        let rps: f64 = row[col("rps")].parse().unwrap();
        assert!(
            (rps - p["rps"].as_f64().unwrap()).abs() < 1e-6 * rps.max(1.0),
            "{csv}"
        );
        assert_eq!(row[col("server_rss_kb")], p["server"]["rss_kb"].to_string());
    }
    for p in points {
        for key in [
            "arch",
            "workers",
            "workload",
            "concurrency",
            "rps",
            "errors",
        ] {
            assert!(p.get(key).is_some(), "point lacks {key}: {p}");
        }
        assert!(p["latency_us"]["p50"].is_number() && p["latency_us"]["p99"].is_number());
        assert!(p["server"]["cpu_s"].is_number() && p["server"]["rss_kb"].is_number());
        assert!(p["client"]["cpu_s"].is_number());
        assert_eq!(p["ok"], true, "{p}");
        assert!(p["rps"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["server"]["rss_kb"].as_u64().unwrap() > 0, "{p}");
        // Closed loop: at most one request per connection is left in flight at the end.
        assert!(p["unanswered"].as_u64().unwrap() <= p["concurrency"].as_u64().unwrap());
    }
    let archs: Vec<&str> = points.iter().map(|p| p["arch"].as_str().unwrap()).collect();
    assert!(archs.contains(&"threaded") && archs.contains(&"epoll"));
    assert!(results["recommendation"]["summary"][0]
        .as_str()
        .unwrap()
        .starts_with("hello:"));
    assert!(results["machine"]["cores"].as_u64().unwrap() >= 1);
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(
        table.contains("| concurrency | threaded | epoll |"),
        "{table}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Recommendation") && html.contains("Machine"));
    // The Why: a table under each workload's verdict, the reasoning folded.
    assert!(
        html.contains("<h2>Why</h2>")
            && html.contains("<table class=\"why\">")
            && html.contains("<p class=\"verdict\">")
            && html.contains("<summary>The reasoning in full</summary>"),
        "{html}"
    );
    assert!(!html.contains("<script") && !html.contains("src=\"http"));

    // `report` re-renders every file from results.json alone.
    std::fs::remove_file(out.join("table.md")).unwrap();
    std::fs::remove_file(out.join("hello-p99.svg")).unwrap();
    let report = sweetspot(&["report", out.to_str().unwrap()]);
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(out.join("table.md").is_file() && out.join("hello-p99.svg").is_file());
    // The measurements are kept as they were (derived ratios may differ in the last bit after a
    // JSON round trip, so compare what was measured).
    let again = read_json(&out.join("results.json"));
    let measured = |v: &serde_json::Value| -> Vec<(String, u64, u64)> {
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let arch = p["arch"].as_str().unwrap().to_string();
                (
                    arch,
                    p["requests"].as_u64().unwrap(),
                    p["concurrency"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(measured(&again), measured(&results));
}

/// `table.md` past its recommendation and its Why (whose table names each architecture once
/// more): the workloads' own tables.
fn workload_tables(table: &str) -> &str {
    table
        .split_once("\n## Why\n")
        .and_then(|(_, why)| why.split_once("\n## "))
        .map_or(table, |(_, rest)| rest)
}

#[test]
fn a_variant_runs_its_arch_with_its_flags_as_a_series_of_its_own() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-variant");
    let dir = tmp.path().to_path_buf();
    // The variant serves a static root holding only `mine.txt`; plain epoll serves the shipped
    // one, which lacks it. So 200 against 404 shows the flags reached that series' server alone.
    let root = dir.join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("mine.txt"), "mine\n").unwrap();
    let (_, out) = sweep_ok(
        &dir,
        "variant.toml",
        &format!(
            r#"
name = "variant"
archs = ["epoll"]
concurrency = [2]
duration = "300ms"
warmup = "100ms"

[[variant]]
name = "epoll-mine"
arch = "epoll"
args = ["--root", {root:?}]

[[variant]]
name = "reactors-shared"
arch = "reactors"
args = ["--accept", "shared"]

[[workload]]
name = "mine"
route = "/mine.txt"
"#,
            root = root.to_str().unwrap()
        ),
    );
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    let series: Vec<&str> = points.iter().map(|p| p["arch"].as_str().unwrap()).collect();
    assert_eq!(series, ["epoll", "epoll-mine", "reactors-shared"]);
    let statuses = |p: &serde_json::Value| -> Vec<String> {
        p["status"].as_object().unwrap().keys().cloned().collect()
    };
    assert!(points.iter().all(|p| p["ok"] == true), "{points:?}");
    assert_eq!(statuses(&points[0]), ["404"], "{}", points[0]);
    assert_eq!(statuses(&points[1]), ["200"], "{}", points[1]);
    assert_eq!(statuses(&points[2]), ["404"], "{}", points[2]);
    // reactors reported its default pool (one loop per core) through the ready line.
    assert!(points[2]["workers"].as_u64().unwrap() >= 1, "{}", points[2]);
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    let table = workload_tables(&table);
    // A pooled variant's series names its pool, as a pooled architecture's does.
    let shared = format!("| reactors-shared/{} | ", points[2]["workers"]);
    for series in ["| epoll | ", "| epoll-mine | ", shared.as_str()] {
        assert_eq!(table.matches(series).count(), 1, "{series}: {table}");
    }
}

#[test]
fn a_bad_variant_is_one_line_and_exit_2() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-bad-variant");
    for (variant, expected) in [
        (
            "name = \"shared\"\narch = \"epoll\"\nargs = [\"--accept\", \"shared\"]",
            "variant \"shared\": args: --accept has no effect with --arch epoll",
        ),
        (
            "name = \"r\"\narch = \"reactors\"\nargs = [\"--accept\", \"sideways\"]",
            "variant \"r\": args: invalid value 'sideways' for '--accept",
        ),
        (
            "name = \"r\"\narch = \"reactors\"\nargs = [\"--turbo\"]",
            "variant \"r\": args: unexpected argument '--turbo'",
        ),
        (
            "name = \"r\"\narch = \"reactors\"\nargs = [\"--workers=3\"]",
            "variant \"r\": args: --workers=3 is set by the sweep",
        ),
        (
            "name = \"epoll\"\narch = \"reactors\"",
            "variant \"epoll\": name is an architecture's",
        ),
        (
            "name = \"two words\"\narch = \"reactors\"",
            "variant \"two words\": name must be",
        ),
        ("name = \"r\"\narch = \"fibers\"", "unknown arch \"fibers\""),
        (
            "name = \"r\"\narch = \"reactors\"\n[[variant]]\nname = \"r\"\narch = \"async\"",
            "variant \"r\" appears twice",
        ),
    ] {
        let (mut sweep, out) = sweep_command(
            tmp.path(),
            "e.toml",
            &format!(
                "name = \"x\"\nconcurrency = [1]\n[[workload]]\nname = \"h\"\n\
                 [[variant]]\n{variant}\n"
            ),
        );
        let run = sweep.output().expect("running sweetspot");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{variant}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{variant}: {stderr}");
        assert!(stderr.contains(expected), "{variant}: {stderr}");
        assert!(!out.exists(), "{variant}: the sweep started");
    }
}

#[test]
fn interrupted_sweep_leaves_no_server_and_keeps_finished_points() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-interrupt");
    let dir = tmp.path().to_path_buf();
    // Preforked: the server forks workers, so the whole group must go.
    let (mut sweep, out) = sweep_command(
        &dir,
        "long.toml",
        r#"
name = "long"
archs = ["preforked"]
workers = [2]
concurrency = [1, 2, 3, 4, 5, 6]
duration = "1500ms"
warmup = "0s"

[[workload]]
name = "hello"
route = "/hello"
"#,
    );
    let stderr_path = dir.join("stderr.txt");
    let mut sweep = sweep
        .arg("--plain")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    // Wait for the first point to be saved, noting every server the sweep starts.
    let mut server_groups = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        server_groups.extend(
            processes()
                .iter()
                .filter(|p| p.ppid == sweep.id() as i32)
                .map(|p| p.pid),
        );
        let saved = std::fs::read_to_string(out.join("results.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| !v["points"].as_array().unwrap().is_empty());
        if saved {
            break;
        }
        assert!(Instant::now() < deadline, "no point finished in 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Into the next point's measurement, then Ctrl-C.
    let until = Instant::now() + Duration::from_millis(700);
    while Instant::now() < until {
        server_groups.extend(
            processes()
                .iter()
                .filter(|p| p.ppid == sweep.id() as i32)
                .map(|p| p.pid),
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!server_groups.is_empty(), "never saw a server process");
    kill(Pid::from_raw(sweep.id() as i32), Signal::SIGINT).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = sweep.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "sweep did not exit after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "an interrupted sweep reports it");
    for pgid in &server_groups {
        assert!(
            wait_group_gone(Pid::from_raw(*pgid)),
            "server group {pgid} still has processes"
        );
    }
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    assert!(
        !points.is_empty() && points.len() < 6,
        "{} points",
        points.len()
    );
    assert!(points.iter().all(|p| p["ok"] == true));
    assert_eq!(results["interrupted"], true);
    assert!(
        out.join("report.html").is_file(),
        "outputs are written on interrupt"
    );
    // The point cut off ends its progress line; the closing message has a line of its own.
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    let cut = lines
        .iter()
        .position(|l| l.starts_with(&format!("[{}/6] ", points.len() + 1)))
        .unwrap_or_else(|| panic!("no line for the point cut off: {stderr}"));
    assert!(lines[cut].ends_with(": interrupted"), "{stderr}");
    assert!(
        lines[cut + 1..]
            .iter()
            .any(|l| l.starts_with("sweetspot: interrupted: ")),
        "{stderr}"
    );
}

#[test]
fn external_targets_sit_in_the_same_table() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-external");
    let dir = tmp.path().to_path_buf();
    let python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut text = format!(
        r#"
name = "external"
archs = ["threaded"]
concurrency = [2]
duration = "300ms"
warmup = "300ms"

[[workload]]
name = "index"
route = "/"

[[external]]
name = "self-as-external"
command = "exec '{BIN}' serve --arch epoll --host 127.0.0.1 --port {{port}}"
url = "http://127.0.0.1:{{port}}"
"#
    );
    if python {
        text.push_str(
            r#"
[[external]]
name = "python-http"
command = "exec python3 -m http.server {port} --bind 127.0.0.1"
url = "http://127.0.0.1:{port}"
ready_timeout = "15s"
"#,
        );
    }
    // The warm-up takes python's first, slow answers out of the window: under a loaded test
    // run its first answer once took 316 ms, past the whole 300 ms window (no request counted).
    let (mut sweep, out) = sweep_command(&dir, "external.toml", &text);
    // python's http.server serves the directory it starts in.
    std::fs::write(dir.join("index.html"), "<p>hello</p>").unwrap();
    let run = sweep.current_dir(&dir).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    let external: Vec<&serde_json::Value> = points
        .iter()
        .filter(|p| p["target"] == "external")
        .collect();
    assert_eq!(external.len(), if python { 2 } else { 1 });
    for p in external {
        assert_eq!(p["ok"], true, "{p}");
        assert!(p["rps"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["server"]["cpu_s"].as_f64().unwrap() >= 0.0);
        // Started in the command's own process group: sampled here.
        assert_eq!(p["server"]["remote"], false, "{p}");
        assert_eq!(p["server"]["cpu_unavailable"], false, "{p}");
        assert!(p["workers"].is_null());
    }
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(table.contains("self-as-external"), "{table}");
}

/// An external server's own pool, swept: `{workers}` takes each value of `workers`, every
/// value runs with that many worker processes (sampled from the server's process tree: the
/// parent and its workers), and the points form one pooled series with its sweet spot.
#[test]
fn an_external_servers_pool_is_swept_through_its_workers_placeholder() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-external-pool");
    let dir = tmp.path().to_path_buf();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/prefork_server.py");
    let text = format!(
        r#"
name = "external-pool"
archs = []
concurrency = [2]
duration = "400ms"
warmup = "100ms"

[[workload]]
name = "ok"
route = "/"

[[external]]
name = "pyfork"
command = "exec python3 '{}' {{port}} {{workers}}"
url = "http://127.0.0.1:{{port}}"
workers = [1, 2, 3]
ready_timeout = "15s"
"#,
        script.display()
    );
    let (_, out) = sweep_ok(&dir, "pool.toml", &text);
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    let mut seen = Vec::new();
    for p in points {
        assert_eq!(p["ok"], true, "{p}");
        assert!(p["rps"].as_f64().unwrap() > 0.0, "{p}");
        let workers = p["workers"].as_u64().unwrap();
        assert_eq!(
            p["server"]["processes"].as_u64().unwrap(),
            workers + 1,
            "{workers} workers and their parent: {p}"
        );
        seen.push(workers);
    }
    assert_eq!(seen, [1, 2, 3]);
    let spots = &results["analysis"]["workloads"][0]["sweet_spots"];
    assert_eq!(spots[0]["arch"], "pyfork", "{spots}");
    // One process serves one keep-alive connection at a time: a pool of 1 leaves the second
    // connection unanswered, and is no sweet spot.
    assert!(spots[0]["workers"].as_u64().unwrap() >= 2, "{spots}");
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    for label in ["pyfork/1", "pyfork/2", "pyfork/3"] {
        assert!(table.contains(label), "{label}: {table}");
    }
}

/// `{workers}` and `{threads}` need their values, and values need their placeholder: one line
/// and exit 2 before anything runs.
#[test]
fn a_pool_placeholder_and_its_values_go_together() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-placeholder");
    for (external, said) in [
        (
            "command = \"sleep 1 {workers}\"",
            "{workers} but no workers",
        ),
        ("command = \"sleep 1\"\nworkers = [2]", "no {workers}"),
        (
            "command = \"sleep 1 {threads}\"",
            "{threads} but no threads",
        ),
        ("command = \"sleep 1\"\nthreads = [2]", "no {threads}"),
        (
            "command = \"sleep {workers}\"\nworkers = [0]",
            "workers/threads",
        ),
    ] {
        let text = format!(
            "name = \"x\"\narchs = []\nconcurrency = [1]\n[[workload]]\nname = \"h\"\n\
             route = \"/\"\n[[external]]\nname = \"e\"\nurl = \"http://127.0.0.1:{{port}}\"\n\
             {external}\n"
        );
        let stderr = refused_file(tmp.path(), &text);
        assert!(stderr.contains(said), "{external}: {stderr}");
    }
}

#[test]
fn a_point_that_cannot_start_is_recorded_and_the_sweep_goes_on() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-failing");
    let dir = tmp.path().to_path_buf();
    let (_, out) = sweep_ok(
        &dir,
        "failing.toml",
        r#"
name = "failing"
archs = ["epoll"]
concurrency = [1]
duration = "200ms"
warmup = "0s"

[[workload]]
name = "hello"
route = "/hello"

[[external]]
name = "broken"
command = "echo 'bind: address already in use' >&2; exit 1"
url = "http://127.0.0.1:{port}"
"#,
    );
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    let broken = points.iter().find(|p| p["arch"] == "broken").unwrap();
    assert_eq!(broken["ok"], false);
    assert!(broken["failure"]
        .as_str()
        .unwrap()
        .contains("address already in use"));
    assert!(points
        .iter()
        .any(|p| p["arch"] == "epoll" && p["ok"] == true));
}

/// Where io_uring is unavailable (a seccomp filter inherited by the sweep and every server it
/// starts fails `io_uring_setup` with EPERM), the uring point is recorded as failed with the
/// server's reason and the sweep goes on to the next architecture.
#[test]
fn uring_unavailable_is_a_failed_point_with_the_reason() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-no-uring");
    let dir = tmp.path().to_path_buf();
    let (mut command, out) = sweep_command(
        &dir,
        "no-uring.toml",
        r#"
name = "no-uring"
archs = ["uring", "epoll"]
concurrency = [1]
duration = "200ms"
warmup = "0s"

[[workload]]
name = "hello"
route = "/hello"
"#,
    );
    sweetspot::sys::uring::deny_io_uring_before_exec(&mut command);
    let run = command.output().expect("running sweetspot");
    assert!(
        run.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    let uring = points.iter().find(|p| p["arch"] == "uring").unwrap();
    assert_eq!(uring["ok"], false);
    let failure = uring["failure"].as_str().unwrap();
    assert!(failure.contains("io_uring is unavailable"), "{failure}");
    assert!(failure.contains("Operation not permitted"), "{failure}");
    assert!(points
        .iter()
        .any(|p| p["arch"] == "epoll" && p["ok"] == true));
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-bad");
    let dir = tmp.path().to_path_buf();
    let invalid = dir.join("invalid.toml");
    std::fs::write(&invalid, "name = \"x\"\narchs = [\n").unwrap();
    let unknown_arch = dir.join("unknown.toml");
    std::fs::write(
        &unknown_arch,
        "name = \"x\"\narchs = [\"fibers\"]\nconcurrency = [1]\n[[workload]]\nname = \"h\"\n",
    )
    .unwrap();
    let missing = dir.join("missing.toml");
    for args in [
        vec!["sweep", "no-such-preset"],
        vec!["sweep", invalid.to_str().unwrap()],
        vec!["sweep", unknown_arch.to_str().unwrap()],
        vec!["sweep", missing.to_str().unwrap()],
        vec!["report", dir.to_str().unwrap()],
    ] {
        let run = sweetspot(&args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
    let valid = dir.join("valid.toml");
    std::fs::write(
        &valid,
        "name = \"x\"\narchs = [\"epoll\"]\nconcurrency = [1]\nduration = \"100ms\"\n\
         [[workload]]\nname = \"h\"\nroute = \"/hello\"\n",
    )
    .unwrap();
    let bad_method = Command::new(BIN)
        .args(["sweep", valid.to_str().unwrap(), "--out"])
        .arg(dir.join("out"))
        .env("SWEETSPOT_CPU_METHOD", "perf")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&bad_method.stderr);
    assert_eq!(bad_method.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("SWEETSPOT_CPU_METHOD"), "{stderr}");
    let listed = sweetspot(&["sweep", "--list"]);
    let stdout = String::from_utf8_lossy(&listed.stdout);
    for preset in [
        "quick",
        "echo",
        "zerohttpd",
        "threads",
        "io-wait",
        "cpu-bound",
        "modern",
        "c10k",
    ] {
        assert!(stdout.contains(preset), "{stdout}");
    }
}

#[test]
fn rate_mode_with_pinning_and_repetitions() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-rate");
    let dir = tmp.path().to_path_buf();
    let (_, out) = sweep_ok(
        &dir,
        "rate.toml",
        r#"
name = "rate"
archs = ["epoll"]
concurrency = [4]
mode = "rate"
rate = 200
duration = "400ms"
warmup = "0s"
repetitions = 2
pin = true

[[workload]]
name = "hello"
route = "/hello"
"#,
    );
    let results = read_json(&out.join("results.json"));
    let point = &results["points"][0];
    assert_eq!(point["ok"], true, "{point}");
    assert_eq!(point["spread"]["repetitions"], 2);
    assert_eq!(point["runs"].as_array().unwrap().len(), 2);
    let rps = point["rps"].as_f64().unwrap();
    assert!((120.0..=260.0).contains(&rps), "rate 200 gave {rps} req/s");
    let cores = results["machine"]["cores"].as_u64().unwrap();
    assert_eq!(results["machine"]["pinned"], cores >= 2);
}

/// A server the command does not own (here one the test started, as one started by
/// `ssh HOST ...` or `srun -w NODE ...` runs elsewhere; a server the command detached with
/// `setsid` is still in its cgroup, and so its own): the sweep measures it through `url`,
/// records that its CPU could not be sampled here (n/a, not zero), unless a `cpu_command`
/// reports it.
#[test]
fn a_server_outside_the_command_has_its_cpu_marked_unavailable() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-remote");
    let dir = tmp.path().to_path_buf();
    // Started here, not by the command (as `ssh HOST ...` starts one elsewhere): neither in
    // the command's process group nor in its cgroup.
    let a = Server::start(&["--arch", "epoll"]);
    let b = Server::start(&["--arch", "epoll"]);
    let cpu_of = format!(
        "awk -v hz=$(getconf CLK_TCK) '{{print ($14 + $15) / hz}}' /proc/{}/stat",
        b.pid()
    );
    let text = format!(
        r#"
name = "remote"
archs = []
concurrency = [2]
duration = "300ms"
warmup = "0s"

[[workload]]
name = "hello"
route = "/hello"

[[external]]
name = "elsewhere"
command = "exec sleep 60"
url = "http://127.0.0.1:{a}"

[[external]]
name = "elsewhere-reported"
command = "exec sleep 60"
url = "http://127.0.0.1:{b}"
cpu_command = "{cpu_of}"
"#,
        a = a.port,
        b = b.port,
        cpu_of = cpu_of.replace('"', "\\\""),
    );
    let (mut sweep, out) = sweep_command(&dir, "remote.toml", &text);
    let run = sweep.output().unwrap();
    drop((a, b));
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let results = read_json(&out.join("results.json"));
    let point = |name: &str| {
        results["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["arch"] == name)
            .unwrap_or_else(|| panic!("no point {name}: {results}"))
            .clone()
    };
    let a = point("elsewhere");
    assert_eq!(a["ok"], true, "{a}");
    assert!(a["requests"].as_u64().unwrap() > 0, "{a}");
    assert_eq!(a["server"]["cpu_unavailable"], true, "{a}");
    assert_eq!(a["server"]["remote"], true, "{a}");
    assert_eq!(a["server"]["cpu_s"], 0.0);
    let b = point("elsewhere-reported");
    assert_eq!(b["ok"], true, "{b}");
    assert_eq!(b["server"]["cpu_unavailable"], false, "{b}");
    assert_eq!(b["server"]["remote"], true, "{b}");
    assert!(b["server"]["cpu_s"].as_f64().unwrap() >= 0.0);
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    let row = workload_tables(&table)
        .lines()
        .find(|l| l.contains("| elsewhere |") || l.starts_with("| elsewhere "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("n/a"), "{row}");
}

/// Sweeps an experiment with `line` added to a valid one-workload experiment and asserts it is
/// refused before anything runs: exit 2, one line on stderr naming `key` and a range.
fn refused(line: &str, key: &str) {
    let tmp = TempDir::new("sweep-range");
    let mut text = format!("name = \"x\"\n{line}\n");
    if !line.starts_with("concurrency") {
        text.push_str("concurrency = [1]\n");
    }
    if !line.starts_with("archs") {
        text.push_str("archs = [\"epoll\"]\n");
    }
    text.push_str("[[workload]]\nname = \"h\"\n");
    let (mut sweep, out) = sweep_command(tmp.path(), "e.toml", &text);
    let started = Instant::now();
    let run = sweep.output().expect("running sweetspot");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{line}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{line}: {stderr}");
    assert!(stderr.contains(&format!("{key} ")), "{line}: {stderr}");
    assert!(
        stderr.contains("must be") || stderr.contains("allowed"),
        "{line}: no allowed range in {stderr}"
    );
    assert!(!out.exists(), "{line}: the sweep started");
    assert!(started.elapsed() < Duration::from_secs(5), "{line}");
}

macro_rules! refused {
    ($($test:ident: $line:expr => $key:expr;)*) => {
        $(
            #[test]
            fn $test() {
                refused($line, $key);
            }
        )*
    };
}

refused! {
    refuses_infinite_duration: "duration = inf" => "duration";
    refuses_huge_duration: "duration = 1e300" => "duration";
    refuses_infinite_timeout: "timeout = inf" => "timeout";
    refuses_zero_timeout: "timeout = 0" => "timeout";
    refuses_huge_warmup: "warmup = 1e300" => "warmup";
    refuses_infinite_ready_timeout: "ready_timeout = inf" => "ready_timeout";
    refuses_nan_rate: "mode = \"rate\"\nrate = nan" => "rate";
    refuses_nan_rate_in_closed_mode: "rate = nan" => "rate";
    refuses_two_million_connections: "concurrency = [2000000]" => "concurrency";
    refuses_unknown_store: "store = \"mysql://x\"" => "store";
    refuses_twenty_thousand_workers: "archs = [\"prethreaded\"]\nworkers = [20000]" => "workers";
    refuses_five_thousand_load_threads: "load_threads = 5000" => "load_threads";
    refuses_zero_repetitions: "repetitions = 0" => "repetitions";
    refuses_nan_p99_bound: "p99_bound_ms = nan" => "p99_bound_ms";
    refuses_zero_warmup_connections: "warmup_connections = 0" => "warmup_connections";
    refuses_an_arch_serve_does_not_have: "archs = [\"fibers\"]" => "archs:";
}

#[test]
fn refuses_a_workload_value_out_of_range() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-range-workload");
    let experiment = tmp.path().join("e.toml");
    for (line, key) in [
        ("timeout = inf", "timeout"),
        ("duration = 1e300", "duration"),
        ("concurrency = [2000000]", "concurrency"),
        ("message_len = 0", "message_len"),
        ("wait_ms = -1", "wait_ms"),
        ("route = \"/a b\"", "route"),
        ("urls = \"/nonexistent/requests.txt\"", "urls"),
        ("plan = \"fast\"", "plan"),
        // A plan is a rate's: the closed loop has none.
        ("plan = \"100..200\"", "plan"),
    ] {
        std::fs::write(
            &experiment,
            format!("name = \"x\"\narchs = [\"epoll\"]\nconcurrency = [1]\n[[workload]]\nname = \"h\"\n{line}\n"),
        )
        .unwrap();
        let run = sweetspot(&["sweep", experiment.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{line}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{line}: {stderr}");
        assert!(
            stderr.contains(&format!("workload \"h\": {key} = ")),
            "{line}: {stderr}"
        );
    }
}

#[test]
fn refuses_more_connections_than_the_file_limit_allows() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-fd-limit");
    let experiment = tmp.path().join("e.toml");
    std::fs::write(
        &experiment,
        "name = \"x\"\narchs = [\"epoll\"]\nconcurrency = [1, 5000]\n[[workload]]\nname = \"h\"\n",
    )
    .unwrap();
    let out = tmp.path().join("out");
    let run = Command::new("prlimit")
        .args(["--nofile=1024:1024", BIN, "sweep"])
        .arg(&experiment)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("concurrency = 5000: needs 5064 open files") && stderr.contains("1024"),
        "{stderr}"
    );
    assert!(!out.exists(), "the sweep started");
}

#[test]
fn a_sweep_where_every_point_failed_exits_1() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-all-failed");
    let (mut sweep, out) = sweep_command(
        tmp.path(),
        "e.toml",
        r#"
name = "x"
concurrency = [1, 2]
duration = "200ms"
warmup = "0s"

[[workload]]
name = "h"

[[external]]
name = "broken"
command = "echo 'cannot start' >&2; exit 1"
url = "http://127.0.0.1:{port}"
"#,
    );
    let run = sweep.arg("--plain").output().expect("running sweetspot");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(last.contains("every point failed (2"), "{stderr}");
    assert!(last.contains("cannot start"), "{stderr}");
    let results = read_json(&out.join("results.json"));
    assert_eq!(results["points"].as_array().unwrap().len(), 2);
}

/// Whether this test can make a cgroup of the kind `v1` (cpuacct) or v2 at a mount's root,
/// as the runner (also at its own cgroup, the root here) would.
fn can_make_cgroup(v1: bool) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    mounts.lines().any(|line| {
        let Some((before, after)) = line.split_once(" - ") else {
            return false;
        };
        let mut after = after.split_whitespace();
        let fs = after.next().unwrap_or("");
        let options = after.nth(1).unwrap_or("");
        let usable = if v1 {
            fs == "cgroup" && options.split(',').any(|o| o == "cpuacct")
        } else {
            fs == "cgroup2"
        };
        let Some(mount_point) = before.split_whitespace().nth(4) else {
            return false;
        };
        let probe =
            Path::new(mount_point).join(format!("sweetspot-test-probe-{}", std::process::id()));
        usable && std::fs::create_dir(&probe).is_ok() && std::fs::remove_dir(&probe).is_ok()
    })
}

/// Whether a cgroup the sweep with process id `sweep_pid` made (named `sweetspot-PID-N`, in
/// the cgroup it ran in, which is this test's) is still there. Other runs' cgroups are not
/// this test's business.
fn leftover_cgroups(sweep_pid: u32) -> bool {
    let prefix = format!("sweetspot-{sweep_pid}-");
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut dirs = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (
            parts.next(),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "cpuacct") {
            dirs.push(Path::new("/sys/fs/cgroup/cpuacct").join(path));
        } else if controllers.is_empty() {
            dirs.push(Path::new("/sys/fs/cgroup/unified").join(path));
            dirs.push(Path::new("/sys/fs/cgroup").join(path));
        }
    }
    dirs.iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|entries| entries.flatten())
        .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
}

/// `(requests served, cpu seconds)` from a server's stats line: "stopped: served N requests in
/// X s; cpu user U s, system S s" (getrusage of itself and its reaped children).
fn stats_line(text: &str) -> (f64, f64) {
    let line = text
        .lines()
        .find(|l| l.starts_with("stopped: served "))
        .unwrap_or_else(|| panic!("no stats line in {text:?}"));
    let number_after = |key: &str| -> f64 {
        let rest = &line[line.find(key).unwrap() + key.len()..];
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    (
        number_after("served "),
        number_after("cpu user ") + number_after("system "),
    )
}

#[test]
fn forking_server_cpu_agrees_with_its_own_rusage_by_every_method() {
    let _shared = common::shared_lock();
    let mut methods = vec!["auto", "proc+children"];
    let (v1, v2) = (can_make_cgroup(true), can_make_cgroup(false));
    if v1 {
        methods.push("cgroup-v1-cpuacct");
    }
    if v2 {
        methods.push("cgroup-v2");
    }
    let cgroup = v1 || v2;
    for method in methods {
        let tmp = TempDir::new("sweep-cpu");
        let dir = tmp.path().to_path_buf();
        let stats = dir.join("server-stdout.txt");
        // The same server the runner would start, as an external target so that its stats
        // line (printed on SIGTERM, after it reaped every child) lands in a file of ours.
        let toml = format!(
            r#"
name = "cpu"
archs = []
concurrency = [64]
duration = "2s"
warmup = "0s"

[[workload]]
name = "hello"
route = "/hello"

[[external]]
name = "forking"
command = "exec '{BIN}' serve --arch forking --host 127.0.0.1 --port {{port}} > '{}'"
url = "http://127.0.0.1:{{port}}"
"#,
            stats.display()
        );
        let (mut sweep, out) = sweep_command(&dir, "cpu.toml", &toml);
        let child = sweep
            .env("SWEETSPOT_CPU_METHOD", method)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let sweep_pid = child.id();
        let run = child.wait_with_output().unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let results = read_json(&out.join("results.json"));
        let point = &results["points"][0];
        assert_eq!(point["ok"], true, "{point}");
        let recorded = point["server"]["cpu_method"].as_str().unwrap();
        match method {
            "auto" if cgroup => assert!(recorded.starts_with("cgroup-"), "{recorded}"),
            "auto" => assert_eq!(recorded, "proc+children"),
            forced => assert_eq!(recorded, forced),
        }
        // The runner removed the cgroup it made for the server.
        assert!(
            !leftover_cgroups(sweep_pid),
            "a sweetspot cgroup was left behind"
        );
        let sweep_us =
            point["server"]["cpu_s"].as_f64().unwrap() * 1e6 / point["requests"].as_f64().unwrap();
        let (served, cpu_s) = stats_line(&std::fs::read_to_string(&stats).unwrap());
        assert!(served > 10_000.0, "served {served}");
        let own_us = cpu_s * 1e6 / served;
        let ratio = sweep_us / own_us;
        eprintln!("{method} ({recorded}): {sweep_us:.2} vs {own_us:.2} us/request, {ratio:.3}");
        assert!(
            (0.9..=1.1).contains(&ratio),
            "{method} ({recorded}): sweep {sweep_us:.2} us/request, server's own rusage \
             {own_us:.2} us/request, ratio {ratio:.3}"
        );
    }
}

#[test]
fn a_stuck_point_is_a_flagged_lower_bound_in_results_and_on_the_progress_line() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-censored");
    let dir = tmp.path().to_path_buf();
    let (mut sweep, out) = sweep_command(
        &dir,
        "stuck.toml",
        r#"
name = "stuck"
archs = ["iterative", "epoll"]
concurrency = [64]
duration = "1s"
warmup = "100ms"

[[workload]]
name = "hello"
route = "/hello"
"#,
    );
    let run = sweep.arg("--plain").output().expect("running sweetspot");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    let point = |arch: &str| points.iter().find(|p| p["arch"] == arch).unwrap();
    let iterative = &point("iterative")["latency_us"];
    assert!(
        iterative["p99"].as_f64().unwrap() >= 950_000.0,
        "{iterative}"
    );
    let flagged: Vec<&str> = iterative["lower_bound"]
        .as_array()
        .unwrap_or_else(|| panic!("{iterative}"))
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    for key in ["p50", "p90", "p99", "max"] {
        assert!(flagged.contains(&key), "{key}: {flagged:?}");
    }
    // The mean stays the answered requests' (Little's law), so it is no lower bound.
    assert!(!flagged.contains(&"mean"));
    assert!(
        iterative["mean"].as_f64().unwrap() < 100_000.0,
        "{iterative}"
    );
    assert!(point("epoll")["latency_us"].get("lower_bound").is_none());
    let line = stderr
        .lines()
        .find(|l| l.contains("hello iterative c=64"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("p99 >= 1."), "{line}");
    let epoll = stderr
        .lines()
        .find(|l| l.contains("hello epoll c=64"))
        .unwrap();
    assert!(!epoll.contains(">="), "{epoll}");
}

/// Runs `sweetspot ARGS` with its stdout a pipe whose reading end is already closed, as
/// `sweetspot ... | head -1` is once head has what it wants.
fn into_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_sweetspot"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run sweetspot")
}

#[test]
fn a_closed_pipe_is_a_quiet_exit_not_a_panic() {
    let _shared = common::shared_lock();
    let dir = TempDir::new("pipe");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/quick-results.json"),
        dir.path().join("results.json"),
    )
    .unwrap();
    let server = Server::start(&["--arch", "epoll"]);
    let url = server.url("/hello");
    let report = dir.path().to_str().unwrap().to_string();
    // Two segments of one run, for merge.
    let start_at = format!("{:.3}", common::unix_now() + 1.0);
    let segments: Vec<String> = (0..2)
        .map(|i| dir.path().join(format!("s{i}.json")).display().to_string())
        .collect();
    let children: Vec<std::process::Child> = segments
        .iter()
        .enumerate()
        .map(|(i, json)| {
            Command::new(BIN)
                .args(["load", &url, "-c", "2", "-d", "500ms", "-q"])
                .args(["--segment", &format!("{i}/2"), "--start-at", &start_at])
                .args(["--json", json])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    for args in [
        vec!["sweep", "--list"],
        vec!["report", report.as_str()],
        vec!["load", url.as_str(), "-c", "2", "-n", "200", "--json", "-"],
        vec!["merge", segments[0].as_str(), segments[1].as_str()],
        vec![
            "merge",
            segments[0].as_str(),
            segments[1].as_str(),
            "--json",
            "-",
        ],
    ] {
        let out = into_closed_pipe(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
    // The report was still written in full before stdout was tried.
    assert!(dir.path().join("report.html").is_file());
}

/// An external server that misbehaves does not break the sweep, and nothing of it is left:
/// one that exits during a point or never opens its port is a failed point with the reason;
/// one that ignores SIGTERM, floods its stdout, leaves a child of its own outside its process
/// group or makes a cgroup inside its own is measured, warned of, and cleaned up; one that
/// daemonizes is followed into its daemon. The runner's memory stays bounded through the
/// flood, and no process of any of them, nor any cgroup the sweep made, outlives the sweep.
#[test]
fn misbehaving_external_servers_are_recorded_and_cleaned_up_and_the_sweep_goes_on() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-faulty");
    let dir = tmp.path().to_path_buf();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/faulty_server.py");
    let tag = format!("faulty-tag-{}", std::process::id());
    let in_cgroups = can_make_cgroup(true) || can_make_cgroup(false);
    // A child in a session of its own, or a daemon, can only be followed in a cgroup.
    let modes: &[&str] = if in_cgroups {
        &[
            "exit-mid",
            "no-port",
            "ignore-term",
            "flood",
            "leave-children",
            "nest-cgroup",
            "daemonize",
        ]
    } else {
        &["exit-mid", "no-port", "ignore-term", "flood"]
    };
    let mut text = String::from(
        "name = \"faulty\"\narchs = []\nconcurrency = [2]\nduration = \"600ms\"\n\
         warmup = \"0s\"\n[[workload]]\nname = \"ok\"\nroute = \"/\"\n",
    );
    for mode in modes {
        text.push_str(&format!(
            "[[external]]\nname = \"{mode}\"\ncommand = \"exec python3 '{}' {mode} {{port}} {tag}\"\n\
             url = \"http://127.0.0.1:{{port}}\"\nready_timeout = \"3s\"\n",
            script.display()
        ));
    }
    let (mut command, out) = sweep_command(&dir, "faulty.toml", &text);
    let stderr_file = std::fs::File::create(dir.join("stderr")).unwrap();
    let mut sweep = command
        .arg("--plain")
        .stdout(Stdio::null())
        .stderr(stderr_file)
        .spawn()
        .unwrap();
    let sweep_pid = sweep.id();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut peak_kb = 0u64;
    let status = loop {
        if let Some(status) = sweep.try_wait().unwrap() {
            break status;
        }
        let status_text =
            std::fs::read_to_string(format!("/proc/{sweep_pid}/status")).unwrap_or_default();
        if let Some(kb) = status_text
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        assert!(Instant::now() < deadline, "the sweep hung");
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    assert!(status.success(), "{stderr}");
    assert!(
        peak_kb > 0 && peak_kb < 100 * 1024,
        "the runner's peak RSS was {peak_kb} KiB"
    );
    let results = read_json(&out.join("results.json"));
    eprintln!("runner peak RSS {peak_kb} KiB");
    for p in results["points"].as_array().unwrap() {
        eprintln!(
            "{}: ok {} failure {} warnings {}",
            p["arch"], p["ok"], p["failure"], p["warnings"]
        );
    }
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), modes.len(), "{stderr}");
    let point = |mode: &str| {
        points
            .iter()
            .find(|p| p["arch"] == mode)
            .unwrap_or_else(|| panic!("no point {mode}"))
            .clone()
    };
    let warned = |p: &serde_json::Value, words: &str| {
        p["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains(words))
    };
    let exit_mid = point("exit-mid");
    assert_eq!(exit_mid["ok"], false, "{exit_mid}");
    let failure = exit_mid["failure"].as_str().unwrap();
    assert!(
        failure.contains("exited (exit status: 3) during the run"),
        "{failure}"
    );
    assert!(
        failure.contains("exiting in the middle of a point"),
        "{failure}"
    );
    let no_port = point("no-port");
    assert_eq!(no_port["ok"], false, "{no_port}");
    assert!(
        no_port["failure"]
            .as_str()
            .unwrap()
            .contains("not open within 3.0s"),
        "{no_port}"
    );
    for (mode, words) in [
        (
            "ignore-term",
            "ignored SIGTERM for 3 s: 1 process(es) killed",
        ),
        ("flood", "MiB to its stdout and stderr"),
        (
            "leave-children",
            "left 1 process(es) of its own running outside",
        ),
        ("nest-cgroup", ""),
        ("daemonize", ""),
    ] {
        if !modes.contains(&mode) {
            continue;
        }
        let p = point(mode);
        assert_eq!(p["ok"], true, "{p}");
        assert!(p["requests"].as_u64().unwrap() > 0, "{p}");
        if words.is_empty() {
            assert!(p["warnings"].as_array().unwrap().is_empty(), "{p}");
        } else {
            assert!(warned(&p, words), "{mode}: {p}");
        }
        if in_cgroups {
            // The daemon's CPU is charged to the cgroup it was started in.
            assert!(p["server"]["cpu_s"].as_f64().unwrap() > 0.0, "{p}");
        }
    }
    assert!(
        !leftover_cgroups(sweep_pid),
        "a cgroup of the sweep is left"
    );
    let left: Vec<_> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&tag))
                .unwrap_or(false)
        })
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "processes left running: {left:?}");
}

/// `[[requires]]`: what is missing stops the sweep before anything runs, with one line naming
/// the command that installs it; run as root, the sweep installs it, says so, and records each
/// requirement's version in `results.json`. `{peers}` is the directory of the shipped peer
/// sources (here Python's own file server serves the peers' `htdocs/hello` from it).
#[test]
fn requirements_are_checked_installed_and_versioned_and_peers_are_written() {
    let _shared = common::shared_lock();
    let tmp = TempDir::new("sweep-requires");
    let dir = tmp.path().to_path_buf();
    let marker = dir.join("installed");
    let text = format!(
        r#"
name = "requires"
archs = []
concurrency = [1]
duration = "300ms"
warmup = "0s"

[[workload]]
name = "hello"
route = "/htdocs/hello"

[[external]]
name = "files"
command = "cd {{peers}} && exec python3 -m http.server {{port}} --bind 127.0.0.1"
url = "http://127.0.0.1:{{port}}"
ready_timeout = "15s"

[[requires]]
name = "thing"
check = "test -e '{m}'"
install = "touch '{m}'"
version = "echo thing 1.2.3"
"#,
        m = marker.display()
    );
    let (mut command, out) = sweep_command(&dir, "requires.toml", &text);
    let run = command.env("SWEETSPOT_NO_INSTALL", "1").output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "thing is missing (this experiment needs it): install it with `touch '{}'`",
            marker.display()
        )),
        "{stderr}"
    );
    assert!(
        !out.exists(),
        "nothing runs before the requirements are met"
    );
    if !nix::unistd::geteuid().is_root() {
        std::fs::write(&marker, "").unwrap();
    }
    let (run, out) = sweep_ok(&dir, "requires.toml", &text);
    let stderr = String::from_utf8_lossy(&run.stderr);
    if nix::unistd::geteuid().is_root() {
        assert!(
            stderr.contains("sweep: thing is missing; installing it: touch"),
            "{stderr}"
        );
    }
    assert!(marker.exists());
    let results = read_json(&out.join("results.json"));
    assert_eq!(results["versions"]["thing"], "thing 1.2.3", "{results}");
    let point = &results["points"][0];
    assert_eq!(point["ok"], true, "{point}");
    assert!(point["requests"].as_u64().unwrap() > 0, "{point}");
    assert_eq!(point["status"]["200"], point["requests"], "{point}");
}

/// One connection: the server and the generator hand each request back and forth, both under
/// half a core and the machine mostly idle: the connection's round trip (or, with a CPU-bound
/// route, the offered load's pace), never unexplained and never a lock (hybrid's loop and pool
/// worker hand the one /fib along between them).
#[test]
fn one_connection_is_its_round_trip_never_a_lock() {
    let _timing = common::timing_lock();
    let tmp = TempDir::new("sweep-one");
    let (_, out) = sweep_ok(
        tmp.path(),
        "one.toml",
        r#"
name = "one"
archs = ["epoll", "hybrid"]
workers = [2]
concurrency = [1]
duration = "1s"
[[workload]]
name = "hello"
route = "/hello"
[[workload]]
name = "fib"
route = "/fib?n=22"
"#,
    );
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    for p in points {
        assert_eq!(p["limit"]["kind"], "wait", "{p}");
        if p["workload"] == "hello" {
            let evidence = p["limit"]["evidence"].as_str().unwrap();
            assert!(
                evidence.contains("on 1 connection is a request a connection every")
                    && evidence.ends_with("each connection's round trip set the pace"),
                "{evidence}"
            );
        }
    }
}

/// Every point says what limited it, with figures that agree with its measurement: `/fib` on
/// one thread is its core, 16 connections of a 20 ms wait are the offered load, and four
/// workers holding keep-alive connections starve the other twelve.
#[test]
fn every_point_names_its_limit_with_the_measured_figures() {
    let _timing = common::timing_lock();
    let tmp = TempDir::new("sweep-limits");
    let (_, out) = sweep_ok(
        tmp.path(),
        "limits.toml",
        r#"
name = "limits"
archs = ["epoll", "prethreaded"]
workers = [4]
concurrency = [16]
duration = "1s"
[[workload]]
name = "fib"
route = "/fib?n=25"
[[workload]]
name = "sleep"
route = "/sleep?ms=20"
"#,
    );
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    let kind = |arch: &str, workload: &str| {
        let p = points
            .iter()
            .find(|p| p["arch"] == arch && p["workload"] == workload)
            .unwrap();
        (
            p["limit"]["kind"].as_str().unwrap().to_string(),
            p["limit"]["evidence"].as_str().unwrap().to_string(),
            p.clone(),
        )
    };
    let (k, evidence, p) = kind("epoll", "fib");
    assert_eq!(k, "cores", "{evidence}");
    let used = p["server"]["cpu_s"].as_f64().unwrap() / p["server"]["window_s"].as_f64().unwrap();
    assert!(
        evidence.starts_with(&format!(
            "the server used {used:.2} of the 1.0 cores it could"
        )),
        "{used}: {evidence}"
    );
    let (k, evidence, p) = kind("epoll", "sleep");
    assert_eq!(k, "wait", "{evidence}");
    let rps = p["cycle_rps"]
        .as_f64()
        .unwrap_or(p["rps"].as_f64().unwrap());
    assert!(
        evidence.starts_with(&format!("{} req/s is ", rps.round() as u64)),
        "{rps}: {evidence}"
    );
    let (k, evidence, _) = kind("prethreaded", "sleep");
    assert_eq!(k, "starved", "{evidence}");
    assert!(
        evidence.starts_with("4 workers each hold one keep-alive connection, of 16"),
        "{evidence}"
    );
    // A connection per request: the 64 connections queue for the 4 workers.
    let tmp = TempDir::new("sweep-limits-pool");
    let (_, out) = sweep_ok(
        tmp.path(),
        "pool.toml",
        r#"
name = "pool"
archs = ["prethreaded"]
workers = [4]
concurrency = [64]
duration = "1500ms"
[[workload]]
name = "sleep"
route = "/sleep?ms=20"
keepalive = false
"#,
    );
    let results = read_json(&out.join("results.json"));
    let p = &results["points"][0];
    let evidence = p["limit"]["evidence"].as_str().unwrap();
    assert_eq!(p["limit"]["kind"], "pool", "{evidence}");
    let rps = p["cycle_rps"]
        .as_f64()
        .unwrap_or(p["rps"].as_f64().unwrap());
    assert!(
        evidence.starts_with(&format!("{} req/s is ", rps.round() as u64)),
        "{rps}: {evidence}"
    );
    assert!(evidence.contains("of its pool's 4 / 20."), "{evidence}");
}

/// A CPU quota (`cpus = 0.5`, as a container's `--cpus`): two reactor threads on `/fib` want
/// two cores and get half of one; the point says `quota`, with the throttling the kernel
/// counted. A quota the machine cannot give is one readable line, exit 2.
#[test]
fn a_server_under_a_half_core_quota_is_named_quota_with_its_throttling() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the quota test runs as root (the cgroup v1 cpu controller), as CI does"
    );
    let _timing = common::timing_lock();
    let tmp = TempDir::new("sweep-quota");
    let (_, out) = sweep_ok(
        tmp.path(),
        "quota.toml",
        r#"
name = "quota"
archs = ["reactors"]
workers = [2]
concurrency = [8]
duration = "1500ms"
warmup = "300ms"
cpus = 0.5
[[workload]]
name = "fib"
route = "/fib?n=25"
"#,
    );
    let results = read_json(&out.join("results.json"));
    let p = &results["points"][0];
    let evidence = p["limit"]["evidence"].as_str().unwrap();
    assert_eq!(p["limit"]["kind"], "quota", "{evidence}");
    let s = &p["server"];
    let used = s["cpu_s"].as_f64().unwrap() / s["window_s"].as_f64().unwrap();
    // Half a core, whatever two threads wanted.
    assert!((0.4..0.56).contains(&used), "{used}");
    assert_eq!(s["quota_cores"], 0.5);
    let (periods, throttled) = (
        s["quota_periods"].as_u64().unwrap(),
        s["throttled_periods"].as_u64().unwrap(),
    );
    assert!(periods >= 10 && throttled * 2 >= periods, "{s}");
    assert!(
        evidence.starts_with(&format!(
            "the server used {used:.2} of its 0.5 cores of CPU quota and was throttled in {:.0}% \
             of {periods} periods of 100 ms",
            throttled as f64 * 100.0 / periods as f64
        )),
        "{evidence}"
    );
    let stderr = refused_file(
        tmp.path(),
        "name = \"q\"\narchs = [\"epoll\"]\nconcurrency = [1]\ncpus = 0\n\
         [[workload]]\nname = \"h\"\nroute = \"/hello\"\n",
    );
    assert!(
        stderr.contains("cpus = 0: from 0.01 to 1024 cores"),
        "{stderr}"
    );
}

/// The lab's own limit: the server pinned to CPU 0, the one load thread to CPU 1, and CPU 1
/// shared with two busy loops. The generator gets a third of its core and waits for the rest; the
/// server, alone on its core, idles between requests. The point says `generator` with both
/// figures, marks itself as the lab's, and is not a candidate.
#[test]
fn a_generator_whose_core_is_shared_is_the_labs_limit_and_never_a_winner() {
    let _timing = common::timing_lock();
    // Two busy loops at the generator's own priority: it gets about a third of its core and
    // waits for the rest.
    let hogs = common::BusyLoops::beside_the_generator(1, 2);
    let tmp = TempDir::new("sweep-generator");
    let (mut command, out) = sweep_command(
        tmp.path(),
        "generator.toml",
        r#"
name = "generator"
archs = ["epoll"]
concurrency = [64]
duration = "1500ms"
warmup = "300ms"
load_threads = 1
[[workload]]
name = "hello"
route = "/hello"
"#,
    );
    let run = command
        .args(["--pin", "--plain"])
        .output()
        .expect("running sweetspot");
    drop(hogs);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let results = read_json(&out.join("results.json"));
    // Ahead of the server's threads where the lab may say so (root), as its record says.
    let root = nix::unistd::geteuid().is_root();
    let nice = if root {
        sweetspot::lab::GENERATOR_NICE
    } else {
        0
    };
    assert_eq!(results["machine"]["generator_nice"], nice);
    let p = &results["points"][0];
    let evidence = p["limit"]["evidence"].as_str().unwrap();
    assert_eq!(p["limit"]["kind"], "generator", "{evidence}");
    let window = p["server"]["window_s"].as_f64().unwrap();
    let ran = p["client"]["cpu_s"].as_f64().unwrap() / window;
    let waited = p["client"]["wait_s"].as_f64().unwrap() / window;
    // A share of the core, and a wait for the rest, give or take the scheduler's slices.
    assert!((0.1..0.8).contains(&ran) && waited > 0.2, "{ran} {waited}");
    assert!(
        evidence.starts_with(&format!(
            "the load generator used {:.0}% of a core per thread and waited {:.0}% of one for a \
             CPU (its core shared) while the server used ",
            ran * 100.0,
            waited * 100.0
        )),
        "{evidence}"
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("0 errors, limit lab: generator"),
        "{stderr}"
    );
    assert!(
        stdout.contains("hello: no architecture met p99 <= 100 ms; lowest p99 was epoll (")
            && stdout.contains("); the lab, not the server, set the figures of epoll"),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(md.contains("| lab: generator |"), "{md}");
    assert!(
        md.contains(
            "epoll was not a candidate: at every level the lab's generator set its figures"
        ),
        "{md}"
    );
}

/// A memory limit (`memory = "12M"`, as a container's `--memory`): a process per connection
/// for 128 connections that each wait 100 ms holds more than 12 MiB, so the server's tasks
/// reach the limit; the point says `memory` with what the cgroup counted, before the
/// failures that follow from it.
#[test]
fn a_server_at_its_memory_limit_is_named_memory() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "the memory test runs as root (the cgroup v1 memory controller), as CI does"
    );
    let _timing = common::timing_lock();
    let tmp = TempDir::new("sweep-memory");
    let (mut command, out) = sweep_command(
        tmp.path(),
        "memory.toml",
        r#"
name = "memory"
archs = ["forking"]
concurrency = [128]
duration = "1s"
warmup = "200ms"
timeout = "2s"
memory = "12M"
[[workload]]
name = "sleep"
route = "/sleep?ms=100"
"#,
    );
    let run = command.output().expect("running sweetspot");
    let stderr = String::from_utf8_lossy(&run.stderr);
    // Every point failed (the OOM killer took the server) is exit 1 with the cause.
    assert!(
        run.status.success()
            || (run.status.code() == Some(1) && stderr.contains("the OOM killer killed it")),
        "{stderr}"
    );
    let results = read_json(&out.join("results.json"));
    let p = &results["points"][0];
    let evidence = p["limit"]["evidence"].as_str().unwrap_or_default();
    assert_eq!(p["limit"]["kind"], "memory", "{p}");
    if p["ok"] == false {
        // The OOM killer took the server itself: the point failed, and says why.
        assert!(
            evidence.starts_with(
                "the point failed: server exited (signal: 9 (SIGKILL)) during \
                 the run: the OOM killer killed it at its 12 MiB memory limit"
            ),
            "{evidence}"
        );
    } else {
        let s = &p["server"];
        assert_eq!(s["memory_limit_bytes"], 12 << 20);
        let peak = s["memory_peak_bytes"].as_u64().unwrap();
        assert!(peak as f64 >= 0.95 * f64::from(12 << 20), "{s}");
        let kills = s["oom_kills"].as_u64().unwrap_or(0);
        assert!(
            evidence.starts_with(&format!(
                "the server reached its 12 MiB memory limit (peak {:.1} MiB): ",
                peak as f64 / f64::from(1u32 << 20)
            )) && evidence.ends_with(&format!("the OOM killer killed {kills} of its processes")),
            "{evidence}"
        );
    }
    let stderr = refused_file(
        tmp.path(),
        "name = \"m\"\narchs = [\"epoll\"]\nconcurrency = [1]\nmemory = \"12Q\"\n\
         [[workload]]\nname = \"h\"\nroute = \"/hello\"\n",
    );
    assert!(
        stderr.contains("memory = \"12Q\": unknown unit"),
        "{stderr}"
    );
}

#[test]
fn a_tls_sweep_serves_https_and_records_the_handshakes_apart() {
    let dir = TempDir::new("sweep-tls");
    let toml = r#"
name = "tls-small"
archs = ["epoll", "prethreaded"]
workers = []
concurrency = [4]
tls = true
duration = "300ms"
warmup = "100ms"

[[workload]]
name = "kept"
route = "/hello"

[[workload]]
name = "fresh"
route = "/hello"
keepalive = false
"#;
    let (run, out) = sweep_ok(dir.path(), "tls.toml", toml);
    let summary = String::from_utf8_lossy(&run.stdout);
    assert!(summary.contains("TLS handshakes"), "{summary}");
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    for p in points {
        let (workload, arch) = (p["workload"].as_str().unwrap(), p["arch"].as_str().unwrap());
        assert_eq!(p["ok"], true, "{workload} {arch}: {p}");
        let requests = p["requests"].as_u64().unwrap();
        let tls = &p["tls"];
        let handshakes = tls["handshakes"].as_u64().unwrap();
        let resumed = tls["resumed"].as_u64().unwrap();
        let cpu = tls["server_cpu_us"].as_f64().unwrap();
        assert!(cpu > 0.0, "{workload} {arch}: {tls}");
        if workload == "kept" {
            // A handshake per connection, none per request.
            assert_eq!(handshakes, 4, "{arch}: {tls}");
            assert!(requests > 100, "{arch}: {requests}");
        } else {
            // A handshake per request (the last few connections may be cut by the window),
            // nearly all resumed by ticket.
            assert!(
                handshakes >= requests && handshakes <= requests + 4,
                "{arch}: {handshakes} handshakes for {requests} requests"
            );
            assert!(resumed * 10 >= handshakes * 9, "{arch}: {tls}");
            assert!(tls["share"].as_f64().unwrap() > 0.0, "{arch}: {tls}");
        }
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("Every server served HTTPS"),
        "the method says so"
    );
    assert!(
        html.contains("<h2>TLS handshakes</h2>"),
        "their own section"
    );
    assert!(html.contains("fresh: 1.0"), "a handshake a request");
    assert!(html.contains("kept: 0.0"), "a handshake a connection");
    let refused = refused_file(
        dir.path(),
        "name = \"x\"\narchs = [\"epoll\"]\nprotocol = \"echo\"\ntls = true\nconcurrency = [1]\n[[workload]]\nname = \"a\"\nroute = \"/hello\"\n",
    );
    assert!(
        refused.contains("tls: only protocol = \"http\" is served over TLS"),
        "{refused}"
    );
}
