//! `sweetspot tune` as a user runs it, on a real server with two knobs (the shipped
//! standard-library Python server, `experiments/peers/knobs.py`: processes, each a loop
//! handing requests to a pool of threads, under CPython's global lock): the search and its
//! check against the full grid in one run; bad input.

use std::path::Path;
use std::process::Command;

mod common;
use common::{timing_lock, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_sweetspot");

/// The shipped two-knob server (processes x threads) as tune starts it.
const KNOBS_PY: &str =
    "exec python3 {peers}/knobs.py --procs {workers} --threads {threads} --port {port}";

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn python() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `knobs.py` at 1..2 processes x 1..3 threads, 2 ms of CPU a request at 16 connections, its
/// default one process of three threads, 400 ms points, with `flag`: its results, stdout and
/// stderr (the run succeeded).
fn tune_under_the_gil(out: &Path, flag: &str) -> (serde_json::Value, String, String) {
    let run = Command::new(BIN)
        .args([
            "tune",
            "--cmd",
            KNOBS_PY,
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
            flag,
            "--out",
        ])
        .arg(out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    assert!(run.status.success(), "{stderr}");
    (read_json(&out.join("results.json")), stdout, stderr)
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
    let (r, stdout, _) = tune_under_the_gil(&out, "--verify");
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    let pick = &r["pick"]["pick"];
    assert_eq!(pick[0], cores.min(2), "{stdout}");
    // Threads add nothing under the GIL, so their count is the rule's tie-break among equals
    // (the lower p99, then CPU, then memory, then the fewest), which the moment's noise can
    // turn (one full run picked 2 threads by a p99 of 22.7 against 29.6 ms at 953 against 951
    // req/s): the processes are the answer, and the grid below checks the pick's throughput.
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
    // The profile at one connection: its wait is the latency less the CPU and the run-queue
    // waits (exactly), next to nothing for a route that only computes.
    let p = &r["profile"];
    let f = |key: &str| p[key].as_f64().unwrap();
    let wait_us = (f("mean_latency_ms") * 1000.0 - f("cpu_us") - f("runqueue_us")).max(0.0);
    assert!((f("wait_ms") * 1000.0 - wait_us).abs() < 1e-6, "{p}");
    assert!(f("wait_ms") < 1.0, "{p}");
    assert!(stdout.contains("Profile at one connection ("), "{stdout}");
    assert!(stdout.contains("sweet spot: workers="), "{stdout}");
    assert!(stdout.contains("| workers \\ threads |"), "{stdout}");
    assert!(stdout.contains("the pick is inside"), "{stdout}");
    assert!(out.join("tune.md").exists());
    // The heat map marks the pick; the report holds it and every configuration's costs.
    let svg = std::fs::read_to_string(out.join("tune.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("the pick"), "{svg}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("<th>CPU / request</th>"));
    // The Why: the verdict, then the pick and each rule of thumb with what limited it.
    assert!(
        html.contains("<p class=\"verdict\">") && html.contains("<tr><td>the pick</td>"),
        "{html}"
    );
    for rule in r["rules"].as_array().unwrap() {
        let name = rule["rule"].as_str().unwrap();
        assert!(html.contains(&format!("<tr><td>{name}</td>")), "{name}");
    }
    let rows = html.matches("<tr><td class=\"num\">").count();
    assert_eq!(rows, r["measured"].as_array().unwrap().len(), "{html}");
}

/// `--predict` on the same server and requests: the model reads the knobs (processes give
/// cores, threads only requests at once: a lock a process), predicts all 6 configurations and
/// measures only what decides (the start, each knob's other end, the leader): fewer than the
/// 6 configurations, the pick 2 processes.
#[test]
fn tune_predict_reads_a_lock_a_process_and_measures_only_what_decides() {
    assert!(python(), "the tests need python3");
    let _timing = timing_lock();
    let tmp = TempDir::new("tune-predict");
    let out = tmp.path().join("out");
    let (r, stdout, stderr) = tune_under_the_gil(&out, "--predict");
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    assert_eq!(r["pick"]["pick"][0], cores.min(2), "{stdout}");
    let model = &r["model"];
    if cores >= 2 {
        assert_eq!(model["roles"]["cores"], "first", "{stdout}");
    }
    assert_eq!(model["configurations"], 6, "{model}");
    let rows = r["predictions"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    let measured: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|p| !p["measured_rps"].is_null())
        .collect();
    assert_eq!(model["measured"], measured.len(), "{model}");
    assert!(measured.len() < 6, "{stdout}");
    for p in &measured {
        assert!(p["why"].is_string(), "{p}");
    }
    // Predicted only: no measurement, an interval around the prediction.
    for p in rows.iter().filter(|p| p["measured_rps"].is_null()) {
        let f = |k: &str| p[k].as_f64().unwrap();
        assert!(
            f("low") <= f("rps") && f("rps") <= f("high") && f("rps") > 0.0,
            "{p}"
        );
        assert!(p["why"].is_null(), "{p}");
    }
    // The leader was predicted before it was measured, and the check is counted.
    assert!(model["checked"].as_u64().unwrap() >= 1, "{model}");
    assert!(
        stdout.contains("The model: workers x threads requests at once"),
        "{stdout}"
    );
    assert!(stdout.contains("measured to decide"), "{stdout}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<h2>The model</h2>"), "{html}");
    assert!(
        stderr.contains("(the model's leader)") || stderr.contains("(a first point for the model)")
    );
}

/// `--predict` on one knob, threads in one process, where 6 connections' requests wait 10 ms
/// each: from 6 threads on, every request is served at once (a plateau); the pick is the
/// smallest on it (6, or 7 within the noise), found from fewer configurations than the
/// range's 6. The requests only wait: CPU spun under CPython's lock blurs the edge (a thread
/// woken from its wait waits for the lock's switch interval; with 300 us of CPU, 5, 6 and 7
/// threads read 471, 475 and 479 req/s in one run). (With `--verify` and 300 us of CPU, the
/// grid's best was threads=6 at 517 req/s, the pick 6 at 507; the grid's 18 points are left
/// out of the test command for its time.)
#[test]
fn tune_predict_finds_the_plateaus_edge_from_fewer_configurations() {
    assert!(python(), "the tests need python3");
    let _timing = timing_lock();
    let tmp = TempDir::new("tune-predict-plateau");
    let out = tmp.path().join("out");
    let run = Command::new(BIN)
        .args([
            "tune",
            "--cmd",
            "exec python3 {peers}/knobs.py --procs 1 --threads {threads} --port {port}",
            "--url",
            "http://127.0.0.1:{port}/work?wait_ms=10",
            "--concurrency",
            "6",
            "--threads",
            "2..7",
            "--duration",
            "300ms",
            "--warmup",
            "100ms",
            "--predict",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let r = read_json(&out.join("results.json"));
    let pick = r["pick"]["pick"][0].as_u64().unwrap();
    assert!((6..=7).contains(&pick), "{stdout}");
    let model = &r["model"];
    assert_eq!(model["configurations"], 6, "{model}");
    assert!(model["measured"].as_u64().unwrap() < 6, "{stdout}");
    assert_eq!(model["roles"]["pool"], "per_request", "{stdout}");
    let rows = r["predictions"].as_array().unwrap();
    let measured = rows.iter().filter(|p| !p["measured_rps"].is_null()).count();
    assert_eq!(model["measured"], measured, "{model}");
}

/// A tune run on `knobs.py` over its processes (one thread each), 400 ms points; its
/// results.
fn tune_knobs_py(out: &Path, url: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let run = Command::new(BIN)
        .args([
            "tune",
            "--cmd",
            "exec python3 {peers}/knobs.py --procs {workers} --threads 1 --port {port}",
            "--url",
            url,
            "--concurrency",
            "4",
            "--workers",
            "1..2",
            "--duration",
            "400ms",
            "--warmup",
            "100ms",
            "--out",
        ])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    (read_json(&out.join("results.json")), stdout)
}

/// The load is the user's own: a URL list replaces --url's request (20 ms of CPU there, where
/// the list asks 200 us: throughput only the list's requests allow), and a rate plan replaces
/// the closed loop (a ramp of 100 to 300 a second sends 200 a second on average, whatever the
/// server could do).
#[test]
fn tune_loads_a_url_list_and_a_rate_plan() {
    assert!(python(), "the tests need python3");
    let _timing = timing_lock();
    let tmp = TempDir::new("tune-load");
    let list = tmp.path().join("requests.txt");
    std::fs::write(
        &list,
        "# the user's requests\n/work?cpu_us=200\nGET /hello\n",
    )
    .unwrap();
    let slow = "http://127.0.0.1:{port}/work?cpu_us=20000";
    let (r, stdout) = tune_knobs_py(
        &tmp.path().join("urls"),
        slow,
        &["--urls", list.to_str().unwrap()],
    );
    assert_eq!(
        r["urls"].as_str().unwrap(),
        std::path::absolute(&list).unwrap().to_str().unwrap()
    );
    assert!(stdout.contains("the requests of"), "{stdout}");
    // 20 ms a request allows 50 a second a core: 100 at most on two.
    let best = r["pick"]["level"]["rps"][0].as_f64().unwrap();
    assert!(best > 300.0, "{best}: {stdout}");
    // A closed loop of 4 connections asking 200 us each is served over 1,000 a second here;
    // the plan sends 200 a second on average.
    let fast = "http://127.0.0.1:{port}/work?cpu_us=200";
    let (r, stdout) = tune_knobs_py(&tmp.path().join("plan"), fast, &["--plan", "100..300"]);
    assert_eq!(r["plan"], "100..300");
    assert!(stdout.contains("the plan 100..300"), "{stdout}");
    for c in r["measured"].as_array().unwrap() {
        for s in c["samples"].as_array().unwrap() {
            let rps = s["rps"].as_f64().unwrap();
            assert!((170.0..=230.0).contains(&rps), "{rps}: {c}");
        }
    }
}

/// A run stopped with Ctrl-C says how to go on; `--resume` finishes it without measuring a
/// saved point again, and resuming a finished run measures nothing.
#[test]
fn an_interrupted_tune_resumes_without_repeating_a_point() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::time::{Duration, Instant};
    assert!(python(), "the tests need python3");
    let _timing = timing_lock();
    let tmp = TempDir::new("tune-resume");
    let out = tmp.path().join("out");
    let points = out.join("points.jsonl");
    let lines = || {
        std::fs::read_to_string(&points)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let first = Command::new(BIN)
        .args([
            "tune",
            "--cmd",
            KNOBS_PY,
            "--url",
            "http://127.0.0.1:{port}/work?cpu_us=500",
            "--concurrency",
            "4",
            "--workers",
            "1..2",
            "--threads",
            "1..4",
            "--duration",
            "300ms",
            "--warmup",
            "100ms",
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while lines().len() < 3 {
        assert!(Instant::now() < deadline, "no points written");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(Pid::from_raw(first.id() as i32), Signal::SIGINT).unwrap();
    let stopped = first.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert!(!stopped.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "`sweetspot tune --resume {}` continues",
            out.display()
        )),
        "{stderr}"
    );
    let before = lines();
    assert!(before.len() >= 3);
    // The same directory is not started over by mistake.
    let again = Command::new(BIN)
        .args(["tune", "--cmd", "x {workers} {port}", "--workers", "1..2"])
        .args([
            "--url",
            "http://127.0.0.1:{port}/",
            "--concurrency",
            "1",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("holds a tune run already"));
    let resume = || {
        let run = Command::new(BIN)
            .args(["tune", "--resume"])
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).to_string();
        assert!(run.status.success(), "{stderr}");
        stderr
    };
    let stderr = resume();
    let after = lines();
    // Every point saved before the interrupt is still there, unchanged, and was answered from
    // the disk; the rest were measured once each.
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(stderr.matches("(saved)").count(), before.len(), "{stderr}");
    let r = read_json(&out.join("results.json"));
    assert_eq!(r["interrupted"], false);
    assert!(r["pick"]["pick"].is_array(), "{r}");
    assert_eq!(r["points_measured"].as_u64().unwrap() as usize, after.len());
    let stderr = resume();
    assert_eq!(lines(), after);
    assert_eq!(stderr.matches("(saved)").count(), after.len(), "{stderr}");
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
        // The model answers the closed loop of one copy of the server.
        vec![
            "--cmd",
            "srv -w {workers} {port}",
            "--workers",
            "1..2",
            "--predict",
            "--rate",
            "100",
        ],
        vec![
            "--cmd",
            "srv -w {workers} {port}",
            "--workers",
            "1..2",
            "--predict",
            "--replicas",
            "2",
        ],
        // A URL list that is not there, a plan that is not one, a rate and a plan.
        vec![
            "--cmd",
            "srv -w {workers} {port}",
            "--workers",
            "1..2",
            "--urls",
            "/nonexistent/requests.txt",
        ],
        vec![
            "--cmd",
            "srv -w {workers} {port}",
            "--workers",
            "1..2",
            "--plan",
            "fast",
        ],
        vec![
            "--cmd",
            "srv -w {workers} {port}",
            "--workers",
            "1..2",
            "--plan",
            "100..200",
            "--rate",
            "50",
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
    // Resuming where no run is.
    let run = Command::new(BIN)
        .args(["tune", "--resume", "/nonexistent/tune-run"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no tune run there"), "{stderr}");
}

/// A URL that answers 404: every configuration's requests fail, and tune says so, naming the
/// status, and exits non-zero; no pool is derived from the failed requests (no Goetz rule,
/// no profile).
#[test]
fn tune_on_a_url_that_answers_404_fails_naming_it() {
    let _timing = timing_lock();
    let tmp = TempDir::new("tune-404");
    let out = tmp.path().join("out");
    let command =
        format!("exec {BIN} serve --arch prethreaded --workers {{workers}} --port {{port}}");
    let run = Command::new(BIN)
        .args([
            "tune",
            "--cmd",
            &command,
            "--url",
            "http://127.0.0.1:{port}/no-such-page",
        ])
        .args([
            "--concurrency",
            "4",
            "--workers",
            "1..4",
            "--duration",
            "300ms",
        ])
        .args(["--warmup", "100ms", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    let last = stderr.trim().lines().last().unwrap();
    assert!(
        last.starts_with("sweetspot: every configuration failed: workers=")
            && last.contains("every response was 404"),
        "{stderr}"
    );
    let r = read_json(&out.join("results.json"));
    assert!(r["profile"].is_null(), "{}", r["profile"]);
    let rules = r["rules"].as_array().unwrap();
    assert!(rules.iter().all(|x| x["rule"] != "goetz"), "{rules:?}");
    assert!(
        rules
            .iter()
            .all(|x| x["missed_because"].as_str().unwrap().contains("404")),
        "{rules:?}"
    );
}

/// A Python server of one process and eight threads on CPU work takes turns on one core under
/// its interpreter lock: the point says `lock`; two processes use both cores: `cores`.
#[test]
fn threads_taking_turns_under_a_runtime_lock_are_named_a_lock() {
    assert!(python(), "the tests need python3");
    // Alone on the cores (every test here takes the timing lock): other work on the machine
    // would take the core the lock leaves idle.
    let _timing = timing_lock();
    let tmp = TempDir::new("sweep-lock");
    let knobs = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/peers/knobs.py");
    let experiment = tmp.path().join("lock.toml");
    std::fs::write(
        &experiment,
        format!(
            r#"
name = "lock"
concurrency = [16]
duration = "1500ms"
[[workload]]
name = "cpu"
route = "/work?cpu_us=2000"
[[external]]
name = "py"
command = "exec python3 {} --procs {{workers}} --threads 8 --port {{port}}"
url = "http://127.0.0.1:{{port}}"
workers = [1, 2]
"#,
            knobs.display()
        ),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let run = Command::new(BIN)
        .args([
            "sweep",
            experiment.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let results = read_json(&out.join("results.json"));
    let points = results["points"].as_array().unwrap();
    let of = |workers: u64| {
        let p = points.iter().find(|p| p["workers"] == workers).unwrap();
        (p["limit"]["kind"].as_str().unwrap().to_string(), p.clone())
    };
    let (kind, p) = of(1);
    assert_eq!(kind, "lock", "{}", p["limit"]);
    let sharing = p["server"]["busiest_threads_sharing"].as_f64().unwrap();
    assert!(sharing > 4.0, "{sharing}");
    let evidence = p["limit"]["evidence"].as_str().unwrap();
    assert!(
        evidence.contains(&format!("was shared by {sharing:.1} threads")),
        "{sharing}: {evidence}"
    );
    if std::thread::available_parallelism().unwrap().get() >= 2 {
        let (kind, p) = of(2);
        assert_eq!(kind, "cores", "{}", p["limit"]);
    }
}
