//! Scale-out, end to end: four `sweetspot load --segment I/4` processes against one of our
//! servers, then `sweetspot merge` of their reports; their interval logs read by an independent
//! reader (HdrHistogram's Python package, `pip install hdrhistogram`; scripts/test installs it).

mod common;

use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use common::{sweetspot_output as sweetspot, unix_now, Server, TempDir};
use serde::Deserialize;
use sweetspot::load::output::hlog;
use sweetspot::load::stats::LatencyHistogram;
use sweetspot::load::LoadReport;

/// A `--start-at` value `seconds` from now, to the millisecond.
fn start_at_in(seconds: f64) -> String {
    format!("{:.3}", unix_now() + seconds)
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs the four segments of one rate-mode run together and returns their report paths.
fn four_segments(server: &Server, dir: &TempDir) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{}/hello", server.port);
    let start_at = start_at_in(2.0);
    let children: Vec<_> = (0..4)
        .map(|i| {
            let json = dir.path().join(format!("w{i}.json")).display().to_string();
            let hlog = dir.path().join(format!("w{i}.hlog")).display().to_string();
            let child = Command::new(env!("CARGO_BIN_EXE_sweetspot"))
                .args([
                    "load", &url, "-c", "10", "-t", "1", "-R", "600", "-d", "2.5s",
                ])
                .args(["--segment", &format!("{i}/4"), "--start-at", &start_at])
                .args(["--json", &json, "--hlog", &hlog, "-q"])
                .spawn()
                .expect("spawn a worker");
            (child, json, hlog)
        })
        .collect();
    children
        .into_iter()
        .map(|(mut child, json, hlog)| {
            assert!(child.wait().unwrap().success(), "worker {json} failed");
            (json, hlog)
        })
        .collect()
}

fn read_report(path: &str) -> LoadReport {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn four_segments_merge_exactly_and_their_hlogs_read_independently() {
    let server = Server::start(&["--arch", "epoll"]);
    let dir = TempDir::new("scaleout");
    let files = four_segments(&server, &dir);
    let reports: Vec<LoadReport> = files.iter().map(|(json, _)| read_report(json)).collect();

    // The shares: 10 connections as 3, 3, 2, 2 and the rate following them, adding up exactly.
    let conns: Vec<u64> = reports
        .iter()
        .map(|r| r.segment.as_ref().unwrap().connections)
        .collect();
    assert_eq!(conns, vec![3, 3, 2, 2]);
    let rate: f64 = reports.iter().map(|r| r.target_rate.unwrap()).sum();
    assert!((rate - 600.0).abs() < 1e-9, "{rate}");
    for r in &reports {
        assert_eq!(r.errors.total(), 0, "{r:?}");
        assert!(r.start_late_s.unwrap() < 0.5, "{:?}", r.start_late_s);
    }

    let merged_path = dir.path().join("merged.json").display().to_string();
    let html_path = dir.path().join("merged.html").display().to_string();
    let mut args = vec!["merge", "-q", "--json", &merged_path, "--html", &html_path];
    args.extend(files.iter().map(|(json, _)| json.as_str()));
    let out = sweetspot(&args);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&merged_path).unwrap()).unwrap();

    let sum_requests: u64 = reports.iter().map(|r| r.requests).sum();
    assert_eq!(merged["requests"], sum_requests);
    assert!(sum_requests > 1000, "{sum_requests}");
    assert_eq!(merged["status"]["200"], sum_requests);
    assert_eq!(merged["segments"], 4);
    assert_eq!(merged["target_rate"], 600.0);
    assert_eq!(merged["workers"].as_array().unwrap().len(), 4);

    // The merged percentiles are those of the workers' histograms added here.
    let mut all = LatencyHistogram::new();
    for r in &reports {
        all.merge(&LatencyHistogram::decode(r.histogram.as_ref().unwrap()).unwrap());
    }
    // Through text and back, as the merged report was (serde_json's float parsing is not
    // always correctly rounded, so a value read back can differ from the one written).
    let expected: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&all.summary()).unwrap()).unwrap();
    assert_eq!(merged["latency_us"], expected);
    // Every response is a sample: those of the run and those answered in the drain after it.
    let sum_drained: u64 = reports.iter().map(|r| r.drained).sum();
    assert_eq!(all.len(), sum_requests + sum_drained);

    // The same merge from the interval logs.
    let merged_hlog = dir.path().join("merged-hlog.json").display().to_string();
    let mut args = vec!["merge", "-q", "--json", &merged_hlog];
    args.extend(files.iter().map(|(_, hlog)| hlog.as_str()));
    let out = sweetspot(&args);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let from_hlogs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&merged_hlog).unwrap()).unwrap();
    assert_eq!(from_hlogs["latency_us"], expected);
    assert_eq!(from_hlogs["requests"], sum_requests);

    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        html.contains("<table") && html.contains("4 segments"),
        "{html}"
    );

    // An independent reader: HdrHistogram's Python package decodes every interval line.
    for ((_, hlog_path), report) in files.iter().zip(&reports) {
        let ours = hlog::read(&std::fs::read_to_string(hlog_path).unwrap()).unwrap();
        let our_counts: Vec<u64> = ours.intervals.iter().map(|i| i.latency.len()).collect();
        let theirs = python_interval_counts(hlog_path);
        assert_eq!(theirs, our_counts, "{hlog_path}");
        assert_eq!(theirs.iter().sum::<u64>(), report.latency_us.count);
        assert!(our_counts.len() >= 3, "{our_counts:?}");
    }
}

/// Total counts of every interval of an hlog, as HdrHistogram's Python log reader decodes them.
fn python_interval_counts(path: &str) -> Vec<u64> {
    let script = r#"
import sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600000000, 3))
counts = []
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    counts.append(str(h.get_total_count()))
print(",".join(counts))
"#;
    let out = Command::new("python3")
        .args(["-c", script, path])
        .output()
        .expect("python3 (the tests need it and `pip install hdrhistogram`)");
    assert!(
        out.status.success(),
        "the Python hdrhistogram reader failed (pip install hdrhistogram): {}",
        stderr_of(&out)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

#[test]
fn mismatched_or_incomplete_runs_are_refused_with_one_line() {
    let server = Server::start(&["--arch", "epoll"]);
    let dir = TempDir::new("scaleout-refuse");
    let url = format!("http://127.0.0.1:{}/hello", server.port);
    let json = |name: &str| dir.path().join(name).display().to_string();
    let start_at = start_at_in(0.5);
    let spawn = |seg: &str, path: &str, target: &str| {
        Command::new(env!("CARGO_BIN_EXE_sweetspot"))
            .args([
                "load",
                target,
                "-c",
                "4",
                "-d",
                "1s",
                "-q",
                "--segment",
                seg,
            ])
            .args(["--start-at", &start_at, "--json", path])
            .spawn()
            .unwrap()
    };
    let other = format!("http://127.0.0.1:{}/other", server.port);
    let (a, b, bad_target) = (json("a.json"), json("b.json"), json("other.json"));
    let workers = [
        spawn("0/2", &a, &url),
        spawn("1/2", &b, &url),
        spawn("1/2", &bad_target, &other),
    ];
    for mut w in workers {
        assert!(w.wait().unwrap().success());
    }
    // The same segment again, after the others ended: not the same run.
    let later = json("later.json");
    let out = sweetspot(&[
        "load",
        &url,
        "-c",
        "4",
        "-d",
        "0.2s",
        "-q",
        "--segment",
        "1/2",
        "--json",
        &later,
    ]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    // A report whose histogram and counts disagree is not merged.
    let tampered = json("tampered.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    value["latency_us"]["count"] = (value["latency_us"]["count"].as_u64().unwrap() + 1).into();
    std::fs::write(&tampered, value.to_string()).unwrap();
    let ok = sweetspot(&["merge", "-q", &a, &b]);
    assert!(ok.status.success(), "{}", stderr_of(&ok));
    for (files, says) in [
        (vec![a.as_str()], "missing"),
        (vec![a.as_str(), a.as_str()], "appears twice"),
        (vec![a.as_str(), bad_target.as_str()], "target"),
        (vec![a.as_str(), later.as_str()], "do not overlap"),
        (vec![a.as_str(), tampered.as_str()], "histogram holds"),
    ] {
        let mut args = vec!["merge"];
        args.extend(files);
        let out = sweetspot(&args);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
    }
    let out = sweetspot(&["merge", "/nonexistent/x.json"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn bad_segments_exit_2_and_a_late_worker_says_so() {
    let server = Server::start(&["--arch", "epoll"]);
    let url = format!("http://127.0.0.1:{}/hello", server.port);
    for bad in [
        vec!["--segment", "4/4"],
        vec!["--segment", "0/0"],
        vec!["--segment", "x"],
        vec!["-c", "2", "--segment", "3/4"],
        vec!["--start-at", "soon"],
        vec!["--start-in", "forever"],
        vec!["--hlog", "/nonexistent-dir/run.hlog"],
    ] {
        let mut args = vec!["load", &url, "-d", "1s"];
        args.extend(&bad);
        let out = sweetspot(&args);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{bad:?}: {err}");
    }
    let dir = TempDir::new("scaleout-late");
    let json = dir.path().join("late.json").display().to_string();
    let past = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 5;
    let out = sweetspot(&[
        "load",
        &url,
        "-n",
        "20",
        "-c",
        "2",
        "-q",
        "--segment",
        "0/1",
        "--start-at",
        &past.to_string(),
        "--json",
        &json,
    ]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("late"), "{err}");
    let report = read_report(&json);
    assert!(
        report.start_late_s.unwrap() >= 4.0,
        "{:?}",
        report.start_late_s
    );
    assert_eq!(report.requests, 20);
}

/// The Kubernetes recipe, checked without a cluster: deploy/k8s/load-job.yaml parses, its load
/// Job is Indexed with as many completions as segments, and the pods' own command lines, run
/// here as processes with the Job's environment (JOB_COMPLETION_INDEX as Kubernetes sets it,
/// a local target, a short load and a scratch directory for /results), produce reports that the
/// merge Job's command line merges.
#[test]
fn the_kubernetes_indexed_job_runs_its_segments_and_merge_as_written() {
    use serde_yaml::Value;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/k8s/load-job.yaml"
    ))
    .unwrap();
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .collect();
    let job = |name: &str| {
        docs.iter()
            .find(|d| d["kind"] == "Job" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Job {name}"))
            .clone()
    };
    let load = job("sweetspot-load");
    let merge = job("sweetspot-merge");
    assert_eq!(load["spec"]["completionMode"], "Indexed");
    let container = &load["spec"]["template"]["spec"]["containers"][0];
    let env = |c: &Value, name: &str| {
        c["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].as_str().unwrap().to_string())
    };
    let segments: u64 = env(container, "SEGMENTS").unwrap().parse().unwrap();
    assert_eq!(load["spec"]["completions"].as_u64(), Some(segments));
    assert_eq!(load["spec"]["parallelism"].as_u64(), Some(segments));
    assert_eq!(env(container, "START_AT").as_deref(), Some("START_AT_UNIX"));
    let claim = docs
        .iter()
        .find(|d| d["kind"] == "PersistentVolumeClaim")
        .unwrap()["metadata"]["name"]
        .clone();
    for j in [&load, &merge] {
        assert_eq!(
            j["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
            claim
        );
    }

    let server = Server::start(&["--arch", "epoll"]);
    let dir = TempDir::new("scaleout-k8s");
    // `sweetspot` on PATH, as in the image, and /results in the scratch directory.
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_sweetspot"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let results = dir.path().display().to_string();
    let shell = |c: &Value| {
        assert_eq!(c["command"][0], "/bin/sh");
        c["args"][0].as_str().unwrap().replace("/results", &results)
    };
    let start_at = start_at_in(0.5);
    let pods: Vec<_> = (0..segments)
        .map(|index| {
            Command::new("/bin/sh")
                .args(["-c", &shell(container)])
                .env("PATH", &path)
                .env("JOB_COMPLETION_INDEX", index.to_string())
                .env("SEGMENTS", segments.to_string())
                .env("START_AT", &start_at)
                .env("TARGET", format!("http://127.0.0.1:{}/hello", server.port))
                .env("LOAD_FLAGS", "-c 8 -R 400 -d 1s")
                .spawn()
                .unwrap()
        })
        .collect();
    for mut pod in pods {
        assert!(pod.wait().unwrap().success());
    }
    let merge_container = &merge["spec"]["template"]["spec"]["containers"][0];
    let out = Command::new("/bin/sh")
        .args(["-c", &shell(merge_container)])
        .env("PATH", &path)
        .env("SEGMENTS", env(merge_container, "SEGMENTS").unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("merged.json")).unwrap())
            .unwrap();
    assert_eq!(merged["segments"], segments);
    assert_eq!(merged["target_rate"], 400.0);
    let sum: u64 = (0..segments)
        .map(|i| read_report(&format!("{results}/segment-{i}.json")).requests)
        .sum();
    assert_eq!(merged["requests"], sum);
    assert!(sum >= 300, "{sum}");
}

/// The ssh recipe, run as written with its transport replaced by a local stand-in (no sshd
/// runs here): deploy/ssh/load.sh with three "hosts" starts three segments at one time, copies
/// their reports back and merges them.
#[test]
fn the_ssh_recipe_runs_its_workers_and_merges_them() {
    let server = Server::start(&["--arch", "epoll"]);
    let dir = TempDir::new("scaleout-ssh");
    // `SSH HOST COMMAND`: runs COMMAND in a shell here, as sshd would on HOST.
    let fake_ssh = dir.path().join("fake-ssh");
    std::fs::write(&fake_ssh, "#!/bin/sh\nshift\nexec /bin/sh -c \"$1\"\n").unwrap();
    std::fs::set_permissions(
        &fake_ssh,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let url = format!("http://127.0.0.1:{}/hello", server.port);
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/ssh/load.sh"))
        .args(["gen-a gen-b gen-c", &url, "-c", "6", "-n", "601", "-t", "1"])
        .env("SSH", &fake_ssh)
        .env("SWEETSPOT", env!("CARGO_BIN_EXE_sweetspot"))
        .env("LOCAL_SWEETSPOT", env!("CARGO_BIN_EXE_sweetspot"))
        .env("OUT", &out_dir)
        .env("START_DELAY_S", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("merged.json")).unwrap())
            .unwrap();
    assert_eq!(merged["segments"], 3);
    assert_eq!(merged["target_requests"], 601);
    // -n is dealt out exactly: 201 + 200 + 200 requests, every one answered.
    assert_eq!(merged["requests"], 601);
    let shares: Vec<u64> = (0..3)
        .map(|i| {
            read_report(
                &out_dir
                    .join(format!("segment-{i}.json"))
                    .display()
                    .to_string(),
            )
            .requests
        })
        .collect();
    assert_eq!(shares, vec![201, 200, 200]);
    assert!(out_dir.join("merged.html").exists());
}

#[test]
fn urls_segments_rotate_from_their_global_connection_and_merge_per_line() {
    let server = Server::start(&["--arch", "epoll"]);
    let dir = TempDir::new("scaleout-urls");
    let urls = dir.path().join("u.txt");
    std::fs::write(&urls, "/hello\n/fib?n=7\n/no/such/page\n").unwrap();
    let urls = urls.display().to_string();
    let target = format!("http://127.0.0.1:{}", server.port);
    let start_at = start_at_in(1.0);
    // Two workers of one connection each; 300 requests each are exactly 100 per line.
    let children: Vec<_> = (0..2)
        .map(|i| {
            let json = dir.path().join(format!("u{i}.json")).display().to_string();
            let child = Command::new(env!("CARGO_BIN_EXE_sweetspot"))
                .args(["load", "--urls", &urls, &target, "-c", "2", "-n", "600"])
                .args(["--segment", &format!("{i}/2"), "--start-at", &start_at])
                .args(["--json", &json, "-q"])
                .spawn()
                .expect("spawn a worker");
            (child, json)
        })
        .collect();
    let reports: Vec<String> = children
        .into_iter()
        .map(|(mut child, json)| {
            assert!(child.wait().unwrap().success(), "worker {json} failed");
            json
        })
        .collect();
    for path in &reports {
        let report = read_report(path);
        let counts: Vec<u64> = report.urls.iter().map(|u| u.requests).collect();
        assert_eq!(counts, vec![100, 100, 100], "{path}");
    }
    let out = sweetspot(&["merge", &reports[0], &reports[1], "--json", "-", "-q"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let merged: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["requests"], 600);
    let lines = merged["urls"].as_array().unwrap();
    assert_eq!(lines.len(), 3);
    for (u, expected_status) in lines.iter().zip(["200", "200", "404"]) {
        assert_eq!(u["requests"], 200, "{u}");
        assert_eq!(u["latency_us"]["count"], 200, "{u}");
        assert_eq!(u["status"][expected_status], 200, "{u}");
    }
    assert_eq!(lines[2]["http_errors"], 200);
    // The merged per-line histogram is the two workers' added exactly.
    let mut both = LatencyHistogram::coarse();
    for path in &reports {
        let report = read_report(path);
        both.merge(&LatencyHistogram::decode(report.urls[0].histogram.as_ref().unwrap()).unwrap());
    }
    let mut merged_first = LatencyHistogram::coarse();
    merged_first.merge(&LatencyHistogram::decode(lines[0]["histogram"].as_str().unwrap()).unwrap());
    assert_eq!(merged_first.len(), 200);
    assert_eq!(merged_first.summary(), both.summary());
    // Each worker's connections keep their number in the whole run, and so their first line:
    // one request each, worker 0's connection 0 sends line 1, worker 1's connection 1 line 2.
    for i in 0..2 {
        let json = dir
            .path()
            .join(format!("one{i}.json"))
            .display()
            .to_string();
        let segment = format!("{i}/2");
        let out = sweetspot(&[
            "load",
            "--urls",
            &urls,
            &target,
            "-c",
            "2",
            "-n",
            "2",
            "--segment",
            &segment,
            "--json",
            &json,
            "-q",
        ]);
        assert!(out.status.success(), "{}", stderr_of(&out));
        let sent: Vec<u64> = read_report(&json)
            .urls
            .iter()
            .map(|u| u.requests_sent)
            .collect();
        let mut expected = vec![0, 0, 0];
        expected[i] = 1;
        assert_eq!(sent, expected, "segment {segment}");
    }
}

#[test]
fn segments_of_a_load_plan_report_their_share_of_each_step_and_merge() {
    let server = Server::start(&["--arch", "epoll"]);
    let dir = TempDir::new("plan-segments");
    let url = format!("http://127.0.0.1:{}/hello", server.port);
    let json = |name: &str| dir.path().join(name).display().to_string();
    let start_at = start_at_in(0.5);
    let spawn = |seg: &str, path: &str, plan: &str| {
        Command::new(env!("CARGO_BIN_EXE_sweetspot"))
            .args(["load", &url, "-c", "4", "-t", "1", "-R", plan, "-q"])
            .args(["--segment", seg, "--start-at", &start_at, "--json", path])
            .spawn()
            .unwrap()
    };
    let (a, b, other) = (json("a.json"), json("b.json"), json("other.json"));
    // The other plan has the same mean rate and length: only the plan tells them apart.
    let workers = [
        spawn("0/2", &a, "200@1s,400@1s"),
        spawn("1/2", &b, "200@1s,400@1s"),
        spawn("1/2", &other, "400@1s,200@1s"),
    ];
    for mut w in workers {
        assert!(w.wait().unwrap().success());
    }
    for path in [&a, &b] {
        let report = read_report(path);
        assert_eq!(report.plan.as_deref(), Some("100@1s,200@1s"), "{path}");
        assert_eq!(
            report.segment.as_ref().unwrap().plan.as_deref(),
            Some("200@1s,400@1s")
        );
        let scheduled: Vec<u64> = report.steps.iter().map(|s| s.scheduled).collect();
        assert_eq!(scheduled, [100, 200], "{path}");
        for (step, rate) in report.steps.iter().zip([100.0, 200.0]) {
            assert_eq!(step.target_rps, rate);
            assert!((step.requests as f64 - rate).abs() <= 3.0, "{step:?}");
            assert!(step.held, "{step:?}");
        }
    }
    let merged = sweetspot(&["merge", "-q", &a, &b, "--json", "-"]);
    assert!(merged.status.success(), "{}", stderr_of(&merged));
    let value: serde_json::Value = serde_json::from_slice(&merged.stdout).unwrap();
    let requests = value["requests"].as_f64().unwrap();
    assert!((594.0..=600.0).contains(&requests), "{value}");
    // The steps add up exactly: the whole run's rates, every worker's requests.
    let steps = value["steps"].as_array().expect("merged steps");
    assert_eq!(steps.len(), 2, "{value}");
    for (step, rate) in steps.iter().zip([200.0, 400.0]) {
        assert_eq!(step["target_rps"].as_f64(), Some(rate), "{step}");
        assert_eq!(step["scheduled"].as_f64(), Some(rate), "{step}");
        assert_eq!(step["latency_us"]["count"].as_f64(), Some(rate), "{step}");
        assert_eq!(step["held"], true, "{step}");
    }
    let from_workers: u64 = [&a, &b]
        .iter()
        .map(|p| read_report(p).steps[1].requests)
        .sum();
    assert_eq!(steps[1]["requests"].as_u64(), Some(from_workers));
    let refused = sweetspot(&["merge", "-q", &a, &other]);
    let err = stderr_of(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains("load plan"), "{err}");
}
