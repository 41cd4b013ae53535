//! `sweetspot load` over HTTP/2 against real servers on free ports: nginx (Debian's, with its
//! http2 module) over h2c and over TLS with ALPN, its access log counting what it answered;
//! our own `serve --arch async`, which speaks h2c beside HTTP/1.1; and a small HTTP/2 server
//! here on the `h2` crate that misbehaves on purpose (a stream cap it counts, GOAWAY mid-run,
//! resets, streams it never answers). Every request is answered and counted once, or counted
//! as one error, or censored; nothing hangs.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::pki::{ca_signed, pem, write_server_files};
use common::{free_port, sweetspot, timing_lock, Server, TempDir};
use serde_json::Value;

/// A real nginx, in the foreground on a free port, stopped on drop.
struct Nginx {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl Nginx {
    /// nginx serving `dir`/www with `listen` options (`http2`, or `ssl http2` with the test
    /// certificate), at most `streams` concurrent streams a connection, an access log a line a
    /// request.
    fn start(tls: bool, streams: u32) -> Nginx {
        let dir = TempDir::new("nginx");
        let root = dir.path();
        std::fs::create_dir_all(root.join("www")).unwrap();
        std::fs::write(root.join("www/index.html"), "Hello, World!").unwrap();
        let port = free_port();
        let mut ssl = String::new();
        if tls {
            let pki = ca_signed();
            std::fs::write(root.join("cert.pem"), pem("CERTIFICATE", &pki.leaf)).unwrap();
            std::fs::write(
                root.join("key.pem"),
                pem("PRIVATE KEY", pki.key.secret_der()),
            )
            .unwrap();
            std::fs::write(root.join("ca.pem"), &pki.ca_pem).unwrap();
            ssl = format!(
                "ssl_certificate {0}/cert.pem; ssl_certificate_key {0}/key.pem;",
                root.display()
            );
        }
        let user = if nix::unistd::geteuid().is_root() {
            "user root;"
        } else {
            ""
        };
        let conf = format!(
            "{user} worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 1024; }}
http {{
    log_format counted '$status $server_protocol';
    access_log {d}/access.log counted;
    keepalive_requests 100000000;
    client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    server {{ listen 127.0.0.1:{port} {listen}; http2_max_concurrent_streams {streams};
        {ssl} root {d}/www; }}
}}
",
            d = root.display(),
            listen = if tls { "ssl http2" } else { "http2" },
        );
        std::fs::write(root.join("nginx.conf"), conf).unwrap();
        let child = Command::new(nginx_binary())
            .args(["-p", &root.display().to_string(), "-c"])
            .arg(root.join("nginx.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        wait_listening(port);
        Nginx { child, port, dir }
    }

    /// Requests nginx logged, by "STATUS PROTOCOL".
    fn logged(&self) -> Vec<String> {
        // nginx writes each line as the request ends; the run is over, let it land.
        std::thread::sleep(Duration::from_millis(200));
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

fn nginx_binary() -> &'static str {
    if Path::new("/usr/sbin/nginx").exists() {
        "/usr/sbin/nginx"
    } else {
        "nginx"
    }
}

fn wait_listening(port: u16) {
    for _ in 0..250 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on port {port}");
}

/// Runs `sweetspot load ARGS --json FILE -q` and returns its exit code, report and seconds.
fn load(args: &[&str]) -> (i32, Value, f64, String) {
    let dir = TempDir::new("h2-load");
    let json = dir.path().join("report.json");
    let mut all: Vec<&str> = vec!["load", "-q", "--json"];
    let json_text = json.display().to_string();
    all.push(&json_text);
    all.extend_from_slice(args);
    let (code, _, stderr, took) = sweetspot(&all);
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (code, report, took.as_secs_f64(), stderr)
}

fn n(report: &Value, path: &[&str]) -> u64 {
    let mut v = report;
    for key in path {
        v = &v[*key];
    }
    v.as_u64()
        .or_else(|| v.as_f64().map(|f| f as u64))
        .unwrap_or_else(|| panic!("{path:?} is not a number in {report}"))
}

fn errors(report: &Value) -> u64 {
    ["connect", "read", "write", "timeout", "protocol"]
        .iter()
        .map(|k| n(report, &["errors", k]))
        .sum()
}

#[test]
fn nginx_h2c_answers_every_request_once_under_its_stream_cap() {
    let _timing = timing_lock();
    let nginx = Nginx::start(false, 5);
    let url = format!("http://127.0.0.1:{}/index.html", nginx.port);
    let (code, r, _, err) = load(&["--h2c", "-c", "3", "--streams", "10", "-n", "3000", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(n(&r, &["requests"]), 3000, "{r}");
    assert_eq!(n(&r, &["status", "200"]), 3000);
    assert_eq!(errors(&r), 0);
    let h2 = &r["http2"];
    assert_eq!(h2["protocol"], "h2c");
    assert_eq!(n(h2, &["streams"]), 10);
    assert_eq!(n(h2, &["server_max_streams"]), 5);
    assert_eq!(
        n(h2, &["resets"]),
        0,
        "nginx refused no stream: the cap was kept"
    );
    assert!(
        n(h2, &["stream_waits"]) > 1000,
        "10 loops on 5 streams wait: {h2}"
    );
    let logged = nginx.logged();
    assert_eq!(logged.len(), 3000, "nginx answered each request once");
    assert!(
        logged.iter().all(|l| l == "200 HTTP/2.0"),
        "{:?}",
        &logged[..3]
    );
}

#[test]
fn nginx_h2_over_tls_is_chosen_by_alpn_and_refused_with_http1() {
    let nginx = Nginx::start(true, 128);
    let url = format!("https://127.0.0.1:{}/index.html", nginx.port);
    let ca = nginx.ca().display().to_string();
    let (code, r, _, err) = load(&[
        "--cacert",
        &ca,
        "-c",
        "2",
        "--streams",
        "4",
        "-n",
        "500",
        &url,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(n(&r, &["requests"]), 500, "{r}");
    assert_eq!(r["http2"]["protocol"], "h2");
    assert_eq!(r["tls"]["alpn"], "h2");
    assert_eq!(n(&r, &["tls", "handshakes"]), 2);
    let (code, r, _, err) = load(&["--cacert", &ca, "--http1", "-c", "2", "-n", "300", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(n(&r, &["requests"]), 300);
    assert!(r.get("http2").is_none(), "--http1 stays on HTTP/1.1: {r}");
    assert_eq!(r["tls"]["alpn"], "http/1.1");
    let logged = nginx.logged();
    assert_eq!(logged.iter().filter(|l| *l == "200 HTTP/2.0").count(), 500);
    assert_eq!(logged.iter().filter(|l| *l == "200 HTTP/1.1").count(), 300);
}

/// What the misbehaving server does.
#[derive(Clone, Copy)]
enum Misbehave {
    /// Answers every stream after `delay_ms`, allowing `max_streams` at once.
    Cap { max_streams: u32, delay_ms: u64 },
    /// Ends each connection with GOAWAY after this many streams.
    GoawayAfter(u64),
    /// Resets every k-th stream (RST_STREAM INTERNAL_ERROR).
    ResetEvery(u64),
    /// Never answers every k-th stream.
    SilentEvery(u64),
}

/// What the misbehaving server saw.
#[derive(Default)]
struct Seen {
    streams: AtomicU64,
    answered: AtomicU64,
    /// The most streams open at once on one connection.
    max_active: AtomicU64,
    resets: AtomicU64,
    silent: AtomicU64,
    goaways: AtomicU64,
}

/// An HTTP/2 (h2c) server on the `h2` crate, behaving as `how`; stopped on drop.
struct Peer {
    port: u16,
    seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Peer {
    fn start(how: Misbehave) -> Peer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Seen::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&seen), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while !st.load(Ordering::Relaxed) {
                    let accepted =
                        tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
                    if let Ok(Ok((tcp, _))) = accepted {
                        tokio::spawn(peer_connection(tcp, how, Arc::clone(&s)));
                    }
                }
            });
            rt.shutdown_timeout(Duration::from_millis(100));
        });
        Peer {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn peer_connection(tcp: tokio::net::TcpStream, how: Misbehave, seen: Arc<Seen>) {
    let mut builder = h2::server::Builder::new();
    if let Misbehave::Cap { max_streams, .. } = how {
        builder.max_concurrent_streams(max_streams);
    }
    let Ok(mut conn) = builder.handshake::<_, Bytes>(tcp).await else {
        return;
    };
    let mut on_this = 0;
    let mut held = Vec::new();
    let active = Arc::new(AtomicU64::new(0));
    while let Some(Ok((_request, mut respond))) = conn.accept().await {
        on_this += 1;
        let k = seen.streams.fetch_add(1, Ordering::SeqCst) + 1;
        match how {
            Misbehave::ResetEvery(every) if k.is_multiple_of(every) => {
                seen.resets.fetch_add(1, Ordering::SeqCst);
                respond.send_reset(h2::Reason::INTERNAL_ERROR);
                continue;
            }
            Misbehave::SilentEvery(every) if k.is_multiple_of(every) => {
                seen.silent.fetch_add(1, Ordering::SeqCst);
                held.push(respond);
                continue;
            }
            Misbehave::GoawayAfter(after) if on_this == after => {
                seen.goaways.fetch_add(1, Ordering::SeqCst);
                conn.graceful_shutdown();
            }
            _ => {}
        }
        let delay = match how {
            Misbehave::Cap { delay_ms, .. } => delay_ms,
            _ => 0,
        };
        let now = active.fetch_add(1, Ordering::SeqCst) + 1;
        seen.max_active.fetch_max(now, Ordering::SeqCst);
        let (seen, active) = (Arc::clone(&seen), Arc::clone(&active));
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            active.fetch_sub(1, Ordering::SeqCst);
            let response = http::Response::builder().status(200).body(()).unwrap();
            if let Ok(mut body) = respond.send_response(response, false) {
                if body.send_data(Bytes::from_static(b"ok"), true).is_ok() {
                    seen.answered.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
    }
}

#[test]
fn a_server_allowing_five_streams_never_sees_a_sixth() {
    let peer = Peer::start(Misbehave::Cap {
        max_streams: 5,
        delay_ms: 5,
    });
    let (code, r, _, err) = load(&[
        "--h2c",
        "-c",
        "2",
        "--streams",
        "10",
        "-d",
        "1s",
        &peer.url(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(errors(&r), 0, "{r}");
    assert_eq!(peer.seen.max_active.load(Ordering::SeqCst), 5);
    let h2 = &r["http2"];
    assert_eq!(n(h2, &["server_max_streams"]), 5);
    assert!(n(h2, &["stream_waits"]) > 100, "{h2}");
    // Half of the loops wait a whole answer (5 ms) for a stream: the wait is reported.
    let mean = h2["stream_wait_mean_us"].as_f64().unwrap();
    assert!((2000.0..20000.0).contains(&mean), "{h2}");
    let share = h2["stream_wait_share"].as_f64().unwrap();
    assert!((0.2..0.8).contains(&share), "{h2}");
}

/// 600 requests over 2 connections x 4 streams, h2c: against a GOAWAY every 50 streams, a
/// dozen connections.
const GOAWAY_RUN: [&str; 7] = ["--h2c", "-c", "2", "--streams", "4", "-n", "600"];

#[test]
fn goaway_mid_run_reconnects_and_every_ticket_ends_once() {
    let peer = Peer::start(Misbehave::GoawayAfter(50));
    let url = peer.url();
    let (code, r, took, err) = load(&[&GOAWAY_RUN[..], &[url.as_str()]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(took < 10.0, "{took}");
    let answered = n(&r, &["requests"]);
    assert_eq!(answered + errors(&r), 600, "{r}");
    assert_eq!(answered, peer.seen.answered.load(Ordering::SeqCst));
    assert!(answered >= 500, "{r}");
    let h2 = &r["http2"];
    assert!(n(h2, &["goaways"]) >= 8, "{h2}");
    assert!(n(h2, &["connections_opened"]) >= 10, "{h2}");
    assert_eq!(n(&r, &["errors", "read"]), errors(&r));
}

#[test]
fn segments_over_http2_merge_their_goaways_and_connections() {
    // Two workers of one count-mode run against a server that sends GOAWAY every 50 streams:
    // the merged report adds their HTTP/2 figures, and every ticket still ends once.
    let peer = Peer::start(Misbehave::GoawayAfter(50));
    let dir = TempDir::new("h2-merge");
    let start_at = format!("{:.3}", common::unix_now() + 1.5);
    let url = peer.url();
    let workers: Vec<(Child, String)> = (0..2)
        .map(|i| {
            let json = dir.path().join(format!("w{i}.json")).display().to_string();
            let child = Command::new(env!("CARGO_BIN_EXE_sweetspot"))
                .args(["load", "-q"])
                .args(GOAWAY_RUN)
                .args(["--segment", &format!("{i}/2"), "--start-at", &start_at])
                .args(["--json", &json, &url])
                .spawn()
                .unwrap();
            (child, json)
        })
        .collect();
    let reports: Vec<(String, Value)> = workers
        .into_iter()
        .map(|(mut child, json)| {
            assert!(child.wait().unwrap().success(), "{json}");
            let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            (json, report)
        })
        .collect();
    let sum = |path: &[&str]| reports.iter().map(|(_, r)| n(r, path)).sum::<u64>();
    let merged = dir.path().join("merged.json").display().to_string();
    let html = dir.path().join("merged.html").display().to_string();
    let (code, text, err, _) = sweetspot(&[
        "merge",
        "--json",
        &merged,
        "--html",
        &html,
        &reports[0].0,
        &reports[1].0,
    ]);
    assert_eq!(code, 0, "{err}");
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    let h2 = &m["http2"];
    assert_eq!(h2["protocol"], "h2c", "{m}");
    assert_eq!(n(h2, &["streams"]), 4);
    assert_eq!(n(h2, &["goaways"]), sum(&["http2", "goaways"]));
    assert!(n(h2, &["goaways"]) >= 8, "{h2}");
    assert_eq!(
        n(h2, &["connections_opened"]),
        sum(&["http2", "connections_opened"])
    );
    assert_eq!(n(&m, &["requests"]) + errors(&m), 600, "{m}");
    assert_eq!(
        n(&m, &["requests"]),
        peer.seen.answered.load(Ordering::SeqCst)
    );
    assert!(
        text.contains("HTTP/2 (h2c): 2 connections x 4 streams"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<h2>HTTP/2</h2>"), "{page}");
}

#[test]
fn reset_streams_are_read_errors_counted_once() {
    let peer = Peer::start(Misbehave::ResetEvery(10));
    let (code, r, _, err) = load(&[
        "--h2c",
        "-c",
        "2",
        "--streams",
        "3",
        "-n",
        "300",
        &peer.url(),
    ]);
    assert_eq!(code, 0, "{err}");
    let resets = peer.seen.resets.load(Ordering::SeqCst);
    assert_eq!(resets, 30);
    assert_eq!(n(&r, &["http2", "resets"]), resets, "{r}");
    assert_eq!(n(&r, &["errors", "read"]), resets);
    assert_eq!(n(&r, &["requests"]), 300 - resets);
    assert_eq!(
        n(&r, &["requests"]),
        peer.seen.answered.load(Ordering::SeqCst)
    );
}

#[test]
fn a_stream_never_answered_times_out_or_is_censored_never_hangs() {
    let peer = Peer::start(Misbehave::SilentEvery(10));
    let (code, r, took, err) = load(&[
        "--h2c",
        "-c",
        "1",
        "--streams",
        "4",
        "-n",
        "100",
        "--timeout",
        "300ms",
        &peer.url(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(n(&r, &["errors", "timeout"]), 10, "{r}");
    assert_eq!(n(&r, &["requests"]), 90);
    assert!(took < 10.0, "{took}");
    // A timed run: the silent streams still open at its end are censored, not lost.
    let peer = Peer::start(Misbehave::SilentEvery(10));
    let (code, r, took, err) = load(&[
        "--h2c",
        "-c",
        "1",
        "--streams",
        "4",
        "-d",
        "1s",
        "--timeout",
        "30s",
        &peer.url(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(took < 5.0, "{took}");
    assert_eq!(
        n(&r, &["unanswered"]),
        4,
        "every loop ends on a silent stream: {r}"
    );
    assert_eq!(errors(&r), 0);
}

#[test]
fn rate_mode_over_h2c_measures_a_20ms_server_as_http1_does() {
    let _timing = timing_lock();
    let server = Server::start(&["--arch", "async", "--workers", "1"]);
    let url = server.url("/sleep?ms=20");
    let (code, h2, _, err) = load(&[
        "--h2c",
        "-c",
        "2",
        "--streams",
        "4",
        "-R",
        "200",
        "-d",
        "3s",
        &url,
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, h1, _, err) = load(&["-c", "8", "-R", "200", "-d", "3s", &url]);
    assert_eq!(code, 0, "{err}");
    for r in [&h2, &h1] {
        assert_eq!(errors(r), 0, "{r}");
        assert!(n(r, &["requests"]) >= 590, "{r}");
        let p50 = n(r, &["latency_us", "p50"]);
        let p99 = n(r, &["latency_us", "p99"]);
        assert!((20_000..22_500).contains(&p50), "p50 {p50}");
        assert!((20_000..26_000).contains(&p99), "p99 {p99}");
    }
    let gap = n(&h2, &["latency_us", "p50"]) as i64 - n(&h1, &["latency_us", "p50"]) as i64;
    assert!(
        gap.abs() < 1500,
        "p50 over h2c and HTTP/1.1 differ by {gap} us"
    );
    assert!(h1.get("http2").is_none());
}

#[test]
fn http2_flags_that_cannot_apply_are_refused_with_one_line() {
    for args in [
        vec!["load", "--streams", "4", "-n", "1", "http://127.0.0.1:9/"],
        vec!["load", "--h2c", "-n", "1", "tcp://127.0.0.1:9"],
        vec![
            "load",
            "--h2c",
            "--pipeline",
            "2",
            "-n",
            "1",
            "http://127.0.0.1:9/",
        ],
        vec![
            "load",
            "--h2c",
            "--streams",
            "0",
            "-n",
            "1",
            "http://127.0.0.1:9/",
        ],
        vec!["load", "--h2c", "--http1", "-n", "1", "http://127.0.0.1:9/"],
        vec![
            "load",
            "--h2c",
            "--engine",
            "uring",
            "-n",
            "1",
            "http://127.0.0.1:9/",
        ],
    ] {
        let (code, _, stderr, _) = sweetspot(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn our_async_server_speaks_h2c_beside_http1_on_one_port() {
    let server = Server::start(&["--arch", "async"]);
    let (code, r, _, err) = load(&[
        "--h2c",
        "-c",
        "2",
        "--streams",
        "8",
        "-n",
        "2000",
        &server.url("/hello"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(n(&r, &["status", "200"]), 2000, "{r}");
    assert_eq!(n(&r, &["http2", "server_max_streams"]), 128);
    let (code, r, _, err) = load(&["-c", "2", "-n", "500", &server.url("/hello")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(n(&r, &["status", "200"]), 500);
    // A POST with a body, a HEAD, an unknown path and a static file, over HTTP/2.
    let dir = TempDir::new("h2-urls");
    let urls = dir.path().join("urls.txt");
    let mut f = std::fs::File::create(&urls).unwrap();
    writeln!(f, "GET /hello").unwrap();
    writeln!(f, "GET /nope").unwrap();
    writeln!(f, "GET /fib?n=10").unwrap();
    drop(f);
    let url_arg = urls.display().to_string();
    let base = server.url("/");
    let (code, r, _, err) = load(&[
        "--h2c",
        "-c",
        "1",
        "--streams",
        "3",
        "-n",
        "300",
        "--urls",
        &url_arg,
        &base,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(n(&r, &["status", "200"]), 200, "{r}");
    assert_eq!(n(&r, &["status", "404"]), 100);
    let served = server.stop_and_count_served();
    assert!(served >= 2800, "{served}");
}

#[test]
fn sweep_h2_maps_connections_by_streams_end_to_end() {
    let _timing = timing_lock();
    let out = TempDir::new("sweep-h2");
    let dir = out.path().join("results");
    let dir_text = dir.display().to_string();
    let (code, stdout, stderr, _) = sweetspot(&["sweep", "h2", "-o", &dir_text, "--plain"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    // The level is the requests in flight, in the tables and in the recommendation.
    assert!(stdout.contains("arch (100 in flight)"), "{stdout}");
    assert!(
        stdout.contains("req/s at 100 in flight with p99"),
        "{stdout}"
    );
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let points = results["points"].as_array().unwrap();
    let mut seen = Vec::new();
    for p in points {
        let arch = p["arch"].as_str().unwrap().to_string();
        let streams = n(p, &["streams"]);
        assert!(arch.ends_with(&format!(
            "@{streams}stream{}",
            if streams == 1 { "" } else { "s" }
        )));
        assert_eq!(n(p, &["concurrency"]), 100, "{p}");
        assert!(n(p, &["requests"]) > 1000, "{p}");
        assert_eq!(n(p, &["errors"]), 0, "{p}");
        seen.push((arch, p["workload"].as_str().unwrap().to_string()));
    }
    // async on three routes, nginx and h2o on /hello, each at 1, 10 and 100 streams.
    assert_eq!(seen.len(), 15, "{seen:?}");
    for s in ["1stream", "10streams", "100streams"] {
        for (server, workload) in [
            ("async", "hello"),
            ("async", "wait"),
            ("async", "fib"),
            ("nginx", "hello"),
            ("h2o", "hello"),
        ] {
            let arch = format!("{server}@{s}");
            assert!(
                seen.contains(&(arch.clone(), workload.to_string())),
                "{arch} {workload}"
            );
        }
    }
    // The 10 ms wait: 100 in flight answer about 10,000 a second however they are carried.
    for p in points.iter().filter(|p| p["workload"] == "wait") {
        let rps = p["rps"].as_f64().unwrap();
        assert!((7000.0..10_100.0).contains(&rps), "{p}");
    }
    // h2o's one connection of 100 streams: one of h2o's threads reads and writes all its
    // frames, at most a core, and our client is cheap enough to keep it there (when it cost
    // twice h2load's CPU, the two ends took turns and the figure was the lab's).
    let one = points
        .iter()
        .find(|p| p["arch"] == "h2o@100streams")
        .unwrap();
    assert_eq!(one["limit"]["kind"], "connection", "{one}");
    let evidence = one["limit"]["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with("100 in flight (1 connection x 100 streams): the server used"),
        "{evidence}"
    );
    // async's one connection of 100 streams on /hello: its one task reads and writes every
    // frame, at about one of the server's two cores: the connection, not a lock.
    let async_one = points
        .iter()
        .find(|p| p["arch"] == "async@100streams" && p["workload"] == "hello")
        .unwrap();
    assert_eq!(async_one["limit"]["kind"], "connection", "{async_one}");
    // Every point whose figure the lab set is a faded bar marked `lab` in the chart, with
    // the note saying what that means (where there is one: since our client costs less than
    // h2load, which points the generator sets varies from run to run); the others are not
    // marked.
    let lab = points
        .iter()
        .filter(|p| p["workload"] == "hello" && p["limit"]["kind"] == "generator")
        .count();
    let bars = std::fs::read_to_string(dir.join("hello-bars.svg")).unwrap();
    assert_eq!(bars.matches("\nlab\n</text>").count(), lab, "{bars}");
    assert_eq!(
        bars.contains("faded, lab: set by the lab, not the server"),
        lab > 0,
        "{bars}"
    );
}

/// 10 streams asked of one connection to an nginx that allows 5: half of the requests wait on
/// the client for a stream, and the point says the cap, not the server's work, set the pace.
#[test]
fn streams_past_the_servers_cap_are_the_connections_limit() {
    let _timing = timing_lock();
    let out = TempDir::new("sweep-h2-cap");
    let file = out.path().join("cap.toml");
    std::fs::write(
        &file,
        r#"name = "cap"
description = "10 streams asked of an nginx that allows 5"
archs = []
workers = []
concurrency = [10]
streams = [10]
mode = "closed"
duration = "500ms"
warmup = "200ms"
repetitions = 1
timeout = "5s"
load_threads = 1
p99_bound_ms = 1000

[[workload]]
name = "hello"
route = "/hello"

[[external]]
name = "nginx"
command = "exec {peers}/nginx-h2c.sh {port} {workers} 5"
url = "http://127.0.0.1:{port}"
workloads = ["hello"]
workers = [1]
"#,
    )
    .unwrap();
    let dir = out.path().join("results");
    let dir_text = dir.display().to_string();
    let (code, stdout, stderr, _) = sweetspot(&[
        "sweep",
        &file.display().to_string(),
        "-o",
        &dir_text,
        "--plain",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let p = &results["points"][0];
    assert_eq!(p["arch"], "nginx@10streams", "{p}");
    assert_eq!(n(p, &["http2", "server_max_streams"]), 5, "{p}");
    assert!(n(p, &["http2", "waits"]) > 1000, "{p}");
    assert_eq!(p["limit"]["kind"], "connection", "{p}");
    let evidence = p["limit"]["evidence"].as_str().unwrap();
    assert!(
        evidence.starts_with(
            "the server allows 5 streams a connection and 10 were asked (10 in flight (1 \
             connection x 10 streams)): "
        ),
        "{evidence}"
    );
}

#[test]
fn an_axis_of_streams_is_refused_where_it_cannot_run() {
    let dir = TempDir::new("h2-spec");
    let refused = |extra: &str| {
        let path = dir.path().join("e.toml");
        std::fs::write(
            &path,
            format!("name = \"e\"\nconcurrency = [10]\n{extra}\n[[workload]]\nname = \"h\"\nroute = \"/hello\"\n"),
        )
        .unwrap();
        let (code, _, stderr, _) = sweetspot(&["sweep", &path.display().to_string()]);
        assert_eq!(code, 2, "{extra}: {stderr}");
        stderr
    };
    assert!(refused("archs = [\"epoll\"]\nstreams = [10]").contains("epoll does not speak HTTP/2"));
    assert!(refused("archs = [\"async\"]\nstreams = [0]").contains("streams"));
    assert!(refused("archs = [\"async\"]\nstreams = [3]")
        .contains("no concurrency level is a multiple"));
}

#[test]
fn our_async_server_serves_h2_over_tls_by_alpn() {
    let dir = TempDir::new("h2-tls");
    let (cert, key, ca) = write_server_files(dir.path(), &ca_signed());
    let (cert, key, ca) = (
        cert.display().to_string(),
        key.display().to_string(),
        ca.display().to_string(),
    );
    let server = Server::start(&["--arch", "async", "--tls-cert", &cert, "--tls-key", &key]);
    assert!(
        server.ready_line.starts_with("listening on https://"),
        "{}",
        server.ready_line
    );
    let url = format!("https://127.0.0.1:{}/page4k.html", server.port);
    let (code, r, _, err) = load(&[
        "--cacert",
        &ca,
        "-c",
        "2",
        "--streams",
        "4",
        "-n",
        "400",
        &url,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(n(&r, &["status", "200"]), 400, "{r}");
    assert_eq!(r["http2"]["protocol"], "h2");
    assert_eq!(r["tls"]["alpn"], "h2");
    // A 4 KB page goes out as more than one TLS record: without TCP_NODELAY on the socket
    // before its handshake, the second waited for the client's delayed ACK, 40 ms a response
    // (a median of 44 ms, 365 req/s, where it is now under 2 ms).
    let p50 = r["latency_us"]["p50"].as_f64().unwrap();
    assert!(p50 < 20_000.0, "median {p50} us: {r}");
    // A client that offers HTTP/1.1 alone is served HTTP/1.1 over TLS on the same port.
    let (code, r, _, err) = load(&["--cacert", &ca, "--http1", "-n", "30", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(n(&r, &["status", "200"]), 30, "{r}");
    assert!(r.get("http2").is_none(), "{r}");
    assert_eq!(r["tls"]["alpn"], "http/1.1");
    assert_eq!(server.stop_and_count_served(), 430);
    // A key that is not a key: one line, exit 2.
    let (code, _, err, _) = sweetspot(&[
        "serve",
        "--arch",
        "async",
        "--port",
        "0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &ca,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--tls-key"), "{err}");
}

/// A `WorkRequest` (experiments/peers/lab.proto) for `cpu_us` and `wait_us`, in a file.
fn work_message(dir: &Path, name: &str, cpu_us: u64, wait_us: u64) -> String {
    use prost::Message;
    let path = dir.join(name);
    let message = sweetspot::http::grpc::WorkRequest {
        cpu_us,
        wait_us,
        blocking: false,
    };
    std::fs::write(&path, message.encode_to_vec()).unwrap();
    format!("@{}", path.display())
}

/// The gRPC calls of a report by status code.
fn grpc_codes(report: &Value) -> Vec<(String, u64)> {
    report["http2"]["grpc_status"]
        .as_object()
        .unwrap_or_else(|| panic!("no grpc_status in {report}"))
        .iter()
        .map(|(code, n)| (code.clone(), n.as_u64().unwrap()))
        .collect()
}

/// Runs `load --grpc` three ways against `base`: good calls (all OK, every one counted once),
/// figures past /work's bounds (INVALID_ARGUMENT) and a method the server lacks
/// (UNIMPLEMENTED). Returns the good run's report.
fn grpc_calls_by_code(dir: &Path, base: &str) -> Value {
    let good = work_message(dir, "good.bin", 20, 500);
    let bad = work_message(dir, "bad.bin", 20_000_000, 0);
    let method = format!("{base}/sweetspot.Lab/Work");
    let (code, ok, _, err) = load(&[
        "--grpc",
        "--body",
        &good,
        "-c",
        "3",
        "--streams",
        "4",
        "-n",
        "300",
        &method,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(grpc_codes(&ok), [("0".to_string(), 300)], "{ok}");
    assert_eq!(n(&ok, &["requests"]), 300, "{ok}");
    assert_eq!(ok["http2"]["protocol"], "h2c");
    let (code, r, _, err) = load(&["--grpc", "--body", &bad, "-c", "1", "-n", "20", &method]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(grpc_codes(&r), [("3".to_string(), 20)], "{r}");
    let missing = format!("{base}/sweetspot.Lab/Nothing");
    let (code, r, _, err) = load(&["--grpc", "--body", &good, "-n", "20", &missing]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(grpc_codes(&r), [("12".to_string(), 20)], "{r}");
    ok
}

/// A peer process stopped (SIGTERM) when dropped, the test failing or not.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

#[test]
fn grpc_calls_to_our_async_server_are_counted_once_each_by_status() {
    let dir = TempDir::new("grpc-ours");
    let server = Server::start(&["--arch", "async", "--workers", "2"]);
    grpc_calls_by_code(dir.path(), &format!("http://127.0.0.1:{}", server.port));
    // Every call reached the app as /work, the refused ones too (a 400 is served).
    assert_eq!(server.stop_and_count_served(), 320);
    // gRPC is HTTP/2's and a POST: the flags that cannot apply are one line, exit 2.
    for args in [
        &["load", "--grpc", "--http1", "http://127.0.0.1:9/x"][..],
        &["load", "--grpc", "-m", "PUT", "http://127.0.0.1:9/x"][..],
        &["load", "--grpc", "tcp://127.0.0.1:9"][..],
    ] {
        let (code, _, err, _) = sweetspot(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn grpc_calls_to_grpcio_are_counted_once_each_by_status() {
    let dir = TempDir::new("grpc-grpcio");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/experiments/peers/grpcio.sh");
    let mut peer = Stopped(
        Command::new(script)
            .args(["0", "4"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("grpcio.sh (scripts/test installs python3-grpcio)"),
    );
    // The port it took, from its ready line (a port found free here could be taken by
    // another test's server before the peer binds it).
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(peer.0.stdout.take().unwrap()),
        &mut ready,
    )
    .unwrap();
    let port: u16 = ready
        .split_whitespace()
        .nth(2)
        .and_then(|url| url.rsplit(':').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no ready line from grpcio.sh: {ready:?}"));
    let r = grpc_calls_by_code(dir.path(), &format!("http://127.0.0.1:{port}"));
    // Each of the 3 channels carried its 4 streams; grpcio announces no stream cap.
    assert_eq!(n(&r, &["http2", "connections_opened"]), 3, "{r}");
    assert!(r["http2"]["server_max_streams"].is_null(), "{r}");
    drop(peer);
}

#[test]
fn segments_of_a_grpc_run_merge_their_statuses() {
    let dir = TempDir::new("grpc-merge");
    let server = Server::start(&["--arch", "async", "--workers", "2"]);
    let good = work_message(dir.path(), "good.bin", 10, 0);
    let url = format!("http://127.0.0.1:{}/sweetspot.Lab/Work", server.port);
    let start_at = format!("{:.3}", common::unix_now() + 1.0);
    let jsons: Vec<String> = (0..2)
        .map(|i| dir.path().join(format!("w{i}.json")).display().to_string())
        .collect();
    let mut workers: Vec<Child> = (0..2)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_sweetspot"))
                .args(["load", "-q", "--grpc", "--body", &good, "-c", "2"])
                .args(["--streams", "3", "-n", "400"])
                .args(["--segment", &format!("{i}/2"), "--start-at", &start_at])
                .args(["--json", &jsons[i], &url])
                .spawn()
                .unwrap()
        })
        .collect();
    for w in &mut workers {
        assert!(w.wait().unwrap().success());
    }
    let merged = dir.path().join("merged.json").display().to_string();
    let (code, _, err, _) = sweetspot(&["merge", "--json", &merged, &jsons[0], &jsons[1]]);
    assert_eq!(code, 0, "{err}");
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    let parts: u64 = jsons
        .iter()
        .map(|j| {
            let r: Value = serde_json::from_str(&std::fs::read_to_string(j).unwrap()).unwrap();
            n(&r, &["http2", "grpc_status", "0"])
        })
        .sum();
    assert_eq!(parts, 400);
    assert_eq!(grpc_codes(&m), [("0".to_string(), 400)], "{m}");
    assert_eq!(server.stop_and_count_served(), 400);
}

#[test]
fn a_grpc_sweep_counts_each_points_calls_by_status_against_async_and_grpcio() {
    let out = TempDir::new("sweep-grpc");
    let experiment = out.path().join("grpc.toml");
    std::fs::write(
        &experiment,
        r#"
name = "grpc-small"
archs = ["async"]
workers = []
concurrency = [8]
streams = [1, 4]
grpc = true
duration = "300ms"
warmup = "100ms"

[[workload]]
name = "wait"
route = "/work?cpu_us=10&wait_ms=2"

[[external]]
name = "grpcio"
command = "exec {peers}/grpcio.sh {port} {workers}"
url = "http://127.0.0.1:{port}"
workers = [4]
"#,
    )
    .unwrap();
    let dir = out.path().join("results").display().to_string();
    let (code, stdout, stderr, _) =
        sweetspot(&["sweep", experiment.to_str().unwrap(), "-o", &dir, "--plain"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&dir).join("results.json")).unwrap(),
    )
    .unwrap();
    let points = results["points"].as_array().unwrap();
    assert_eq!(points.len(), 4, "{results}");
    for p in points {
        // Every call of the window OK and counted once, as a response.
        let requests = n(p, &["requests"]);
        assert!(requests > 100, "{p}");
        assert_eq!(n(p, &["grpc_status", "0"]), requests, "{p}");
        assert_eq!(p["grpc_status"].as_object().unwrap().len(), 1, "{p}");
        assert_eq!(n(p, &["errors"]), 0, "{p}");
    }
    // grpcio's pool of 4 serves 4 calls at a time through their 2 ms waits: the pool, at
    // about 4 / 2 ms = 2,000 calls a second, where async takes all 8 at once.
    let grpcio = points
        .iter()
        .find(|p| p["arch"] == "grpcio@1stream")
        .unwrap();
    assert_eq!(grpcio["limit"]["kind"], "pool", "{grpcio}");
    assert!(n(grpcio, &["requests"]) as f64 / grpcio["duration_s"].as_f64().unwrap() < 2100.0);
    // A route gRPC cannot carry, and a server of ours that does not speak HTTP/2: one line.
    for (bad, says) in [
        (
            "name = \"x\"\narchs = [\"async\"]\ngrpc = true\n[[workload]]\nname = \"h\"\nroute = \"/hello\"\n",
            "gRPC carries /work only",
        ),
        (
            "name = \"x\"\narchs = [\"epoll\"]\ngrpc = true\n[[workload]]\nname = \"w\"\nroute = \"/work?cpu_us=5\"\n",
            "only async serves gRPC",
        ),
    ] {
        std::fs::write(&experiment, bad).unwrap();
        let (code, _, err, _) = sweetspot(&["sweep", experiment.to_str().unwrap(), "-o", &dir]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
