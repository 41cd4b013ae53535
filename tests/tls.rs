//! `sweetspot load` over HTTPS against a real TLS server on a free port: a small HTTP/1.1
//! keep-alive server here on rustls (a thread per connection, `rustls::ServerConnection` over a
//! std `TcpStream`), with certificates this file makes with rcgen (a CA and a leaf it signed, or
//! a self-signed leaf). The server counts what it saw (connections, handshakes, SNI, ALPN,
//! requests answered), so the tests assert exact counts on both sides: responses, one handshake
//! per connection (one per request with `--no-keepalive`), and that a certificate the client
//! does not trust is one line and exit 1 before the run opens a single connection. Then our
//! own servers over HTTPS: every architecture that serves it, answering curl and `load
//! --http1`, with the handshakes its stats line counts equal to the clients' own.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::pki::{ca_signed, ca_signed_for, self_signed, write_server_files, Pki};
use common::tiny::TinyServer;
use common::{sweetspot, Server, TempDir};
use sweetspot::load::{self, LoadConfig, LoadReport, Mode, Target, TlsOptions};

/// Body of `/big` (many TLS records per response).
const BIG_BODY: usize = 100_000;

/// A PEM file removed on drop.
struct PemFile(PathBuf);

impl PemFile {
    fn new(tag: &str, pem: &str) -> PemFile {
        let path = std::env::temp_dir().join(format!(
            "sweetspot-tls-test-{}-{tag}.pem",
            std::process::id()
        ));
        std::fs::write(&path, pem).unwrap();
        PemFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for PemFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The SNI and the ALPN protocol of one completed handshake, as the server saw them.
type Names = (Option<String>, Option<Vec<u8>>);

/// What the server saw.
#[derive(Default)]
struct Seen {
    handshakes: AtomicU64,
    requests: AtomicU64,
    /// SNI and ALPN of each completed handshake.
    names: Mutex<Vec<Names>>,
}

/// An HTTP/1.1 server over rustls: `/` answers "hello", `/big` answers `BIG_BODY` bytes; keeps
/// the connection open unless the request says `Connection: close`. Stops accepting on drop.
struct TlsServer {
    port: u16,
    seen: Arc<Seen>,
    /// Accepts the connections and counts them.
    tcp: TinyServer,
}

impl TlsServer {
    fn start(pki: &Pki) -> TlsServer {
        let config = Arc::new(pki.server_config());
        let seen = Arc::new(Seen::default());
        let seen2 = Arc::clone(&seen);
        let tcp =
            TinyServer::start(move |tcp, _stop| serve_connection(tcp, Arc::clone(&config), &seen2));
        TlsServer {
            port: tcp.port,
            seen,
            tcp,
        }
    }

    fn handshakes(&self) -> u64 {
        self.seen.handshakes.load(Ordering::SeqCst)
    }

    fn requests(&self) -> u64 {
        self.seen.requests.load(Ordering::SeqCst)
    }

    fn connections(&self) -> u64 {
        self.tcp.accepted.load(Ordering::SeqCst)
    }

    /// Waits (briefly) until the server has recorded `n` handshakes: the client may finish a
    /// run before the server thread of its last connection has noted its handshake.
    fn wait_handshakes(&self, n: u64) -> u64 {
        let until = Instant::now() + Duration::from_secs(5);
        while self.handshakes() < n && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.handshakes()
    }
}

fn serve_connection(tcp: TcpStream, config: Arc<rustls::ServerConfig>, seen: &Seen) {
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.set_nodelay(true).unwrap();
    let conn = rustls::ServerConnection::new(config).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut noted = false;
    let mut pending = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let big = vec![b'x'; BIG_BODY];
    loop {
        let read = tls.read(&mut buf);
        if !noted && !tls.conn.is_handshaking() {
            noted = true;
            seen.handshakes.fetch_add(1, Ordering::SeqCst);
            seen.names.lock().unwrap().push((
                tls.conn.server_name().map(str::to_string),
                tls.conn.alpn_protocol().map(<[u8]>::to_vec),
            ));
        }
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).to_ascii_lowercase();
            pending.drain(..end + 4);
            let close = head.contains("\r\nconnection: close");
            let body: &[u8] = if head.starts_with("get /big ") {
                &big
            } else {
                b"hello"
            };
            let mut response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{}\r\n",
                body.len(),
                if close { "Connection: close\r\n" } else { "" }
            )
            .into_bytes();
            response.extend_from_slice(body);
            if tls.write_all(&response).is_err() {
                return;
            }
            seen.requests.fetch_add(1, Ordering::SeqCst);
            if close {
                tls.conn.send_close_notify();
                let _ = tls.flush();
                return;
            }
        }
    }
}

fn count_config(url: &str, connections: usize, requests: u64, tls: TlsOptions) -> LoadConfig {
    let mut config = LoadConfig::new(
        Target::parse(url).unwrap(),
        connections,
        Mode::Count { requests },
    );
    config.threads = 2.min(connections);
    config.tls = tls;
    config
}

fn trusting(ca: &PemFile) -> TlsOptions {
    TlsOptions {
        insecure: false,
        cacert: Some(ca.0.clone()),
    }
}

fn assert_clean(report: &LoadReport, requests: u64) {
    assert_eq!(report.requests, requests, "{report:#?}");
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(report.status.get("200"), Some(&requests));
}

#[test]
fn keepalive_run_counts_every_response_with_one_handshake_per_connection() {
    let pki = ca_signed();
    let ca = PemFile::new("keepalive", &pki.ca_pem);
    let server = TlsServer::start(&pki);
    let url = format!("https://localhost:{}/", server.port);
    let report = load::run(&count_config(&url, 10, 500, trusting(&ca)), None).unwrap();
    assert_clean(&report, 500);
    let tls = report
        .tls
        .as_ref()
        .expect("an https run reports its TLS side");
    assert_eq!(tls.handshakes, 10, "one handshake per connection");
    assert_eq!(tls.handshake_us.count, 10);
    assert!(tls.handshake_us.p50 > 0.0);
    assert_eq!(tls.version, "TLSv1.3");
    assert_eq!(tls.alpn.as_deref(), Some("http/1.1"));
    assert!(tls.handshake_share > 0.0 && tls.handshake_share < 1.0);
    // The server: the pre-flight handshake, then one per connection; every request answered.
    assert_eq!(server.wait_handshakes(11), 11);
    assert_eq!(server.connections(), 11);
    assert_eq!(server.requests(), 500);
    let names = server.seen.names.lock().unwrap();
    assert!(
        names
            .iter()
            .all(|(sni, alpn)| sni.as_deref() == Some("localhost")
                && alpn.as_deref() == Some(&b"http/1.1"[..])),
        "SNI and ALPN of every handshake: {names:?}"
    );
}

#[test]
fn no_keepalive_pays_one_handshake_per_request() {
    let pki = ca_signed();
    let ca = PemFile::new("nokeepalive", &pki.ca_pem);
    let server = TlsServer::start(&pki);
    let url = format!("https://localhost:{}/", server.port);
    let mut config = count_config(&url, 4, 200, trusting(&ca));
    config.keepalive = false;
    let report = load::run(&config, None).unwrap();
    assert_clean(&report, 200);
    let tls = report.tls.as_ref().unwrap();
    assert_eq!(tls.handshakes, 200, "one handshake per request");
    assert!(tls.resumed <= tls.handshakes);
    let expected_share =
        tls.handshake_us.mean / (tls.handshake_us.mean + report.latency_answered_us.mean);
    assert!(
        (tls.handshake_share - expected_share).abs() < 0.01,
        "{} vs {expected_share}",
        tls.handshake_share
    );
    assert_eq!(server.wait_handshakes(201), 201);
    assert_eq!(server.connections(), 201);
    assert_eq!(server.requests(), 200);
}

#[test]
fn large_responses_over_many_records_are_framed_exactly() {
    let pki = ca_signed();
    let ca = PemFile::new("big", &pki.ca_pem);
    let server = TlsServer::start(&pki);
    let url = format!("https://localhost:{}/big", server.port);
    let report = load::run(&count_config(&url, 3, 60, trusting(&ca)), None).unwrap();
    assert_clean(&report, 60);
    let head = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n".len() as u64;
    assert_eq!(report.bytes_read, 60 * (head + BIG_BODY as u64));
    assert_eq!(report.response_bytes, report.bytes_read);
    assert_eq!(report.tls.as_ref().unwrap().handshakes, 3);
}

#[test]
fn closed_loop_over_tls_handshakes_once_per_connection() {
    let pki = ca_signed();
    let ca = PemFile::new("closed", &pki.ca_pem);
    let server = TlsServer::start(&pki);
    let url = format!("https://localhost:{}/", server.port);
    let mut config = count_config(&url, 4, 1, trusting(&ca));
    config.mode = Mode::Closed {
        duration: Duration::from_millis(500),
    };
    let report = load::run(&config, None).unwrap();
    assert!(report.requests > 0);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(report.tls.as_ref().unwrap().handshakes, 4);
    assert_eq!(server.wait_handshakes(5), 5);
}

#[test]
fn an_untrusted_certificate_is_one_line_and_exit_1_before_the_run() {
    let server = TlsServer::start(&ca_signed());
    let url = format!("https://127.0.0.1:{}/", server.port);
    let (code, stdout, stderr, took) = sweetspot(&["load", &url, "-n", "100", "-c", "4"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert_eq!(
        stderr,
        "sweetspot: TLS: certificate for 127.0.0.1 not trusted (UnknownIssuer); use --cacert FILE or --insecure\n"
    );
    assert_eq!(stdout, "");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(server.connections(), 1, "the pre-flight connection only");
    assert_eq!(server.requests(), 0);
}

#[test]
fn a_certificate_for_another_name_is_one_line_too() {
    let pki = ca_signed_for(&["localhost"]);
    let ca = PemFile::new("othername", &pki.ca_pem);
    let server = TlsServer::start(&pki);
    let url = format!("https://127.0.0.1:{}/", server.port);
    let (code, _, stderr, _) = sweetspot(&["load", &url, "-n", "10", "--cacert", ca.path()]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr,
        "sweetspot: TLS: certificate is not valid for 127.0.0.1 (NotValidForName; it names localhost); target a name it has, or use --insecure\n"
    );
    assert_eq!(server.connections(), 1, "the pre-flight connection only");
}

#[test]
fn insecure_accepts_a_self_signed_certificate_and_an_ip_target_sends_no_sni() {
    let server = TlsServer::start(&self_signed());
    let url = format!("https://127.0.0.1:{}/", server.port);
    let (code, stdout, stderr, _) = sweetspot(&[
        "load",
        &url,
        "-n",
        "50",
        "-c",
        "2",
        "--insecure",
        "--json",
        "-",
        "-q",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let report: LoadReport = serde_json::from_str(&stdout).expect("JSON report");
    assert_clean(&report, 50);
    assert_eq!(report.tls.as_ref().unwrap().handshakes, 2);
    assert_eq!(server.wait_handshakes(3), 3);
    let names = server.seen.names.lock().unwrap();
    assert!(names.iter().all(|(sni, _)| sni.is_none()), "{names:?}");
}

#[test]
fn the_human_report_gives_the_handshakes_apart() {
    let pki = ca_signed();
    let ca = PemFile::new("human", &pki.ca_pem);
    let server = TlsServer::start(&pki);
    let url = format!("https://localhost:{}/", server.port);
    let (code, stdout, stderr, _) = sweetspot(&[
        "load",
        &url,
        "-n",
        "40",
        "-c",
        "2",
        "--no-keepalive",
        "--cacert",
        ca.path(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!(
            "Running 40-request test @ https://localhost:{}/\n",
            server.port
        )),
        "{stdout}"
    );
    let tls_line = stdout
        .lines()
        .find(|l| l.starts_with("  TLS: "))
        .unwrap_or_else(|| panic!("no TLS line: {stdout}"));
    assert!(
        tls_line.starts_with("  TLS: TLSv1.3, ALPN http/1.1, 40 handshakes ("),
        "{tls_line}"
    );
    assert!(stdout.contains("  TLS handshake\n"), "{stdout}");
    assert!(
        stdout.contains("of the time waited (handshakes + responses); every request paid one (--no-keepalive)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("  40 requests in "), "{stdout}");
}

/// Two segments of one count-mode run over TLS, each its own handshakes: the merged report's
/// TLS section is their sum, its handshake percentiles from their histograms added.
#[test]
fn segments_over_tls_merge_their_handshakes_exactly() {
    let pki = ca_signed();
    let ca = PemFile::new("merge", &pki.ca_pem);
    let server = TlsServer::start(&pki);
    let url = format!("https://localhost:{}/", server.port);
    let dir = common::TempDir::new("tls-merge");
    let start_at = format!("{:.3}", common::unix_now() + 1.0);
    let mut jsons = Vec::new();
    let children: Vec<std::process::Child> = (0..2)
        .map(|i| {
            let json = dir.path().join(format!("w{i}.json")).display().to_string();
            jsons.push(json.clone());
            std::process::Command::new(env!("CARGO_BIN_EXE_sweetspot"))
                .args(["load", "-q", "-n", "60", "-c", "4", "--no-keepalive"])
                .args(["--cacert", ca.path()])
                .args(["--segment", &format!("{i}/2"), "--start-at", &start_at])
                .args(["--json", &json, &url])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let read = |path: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let parts: Vec<serde_json::Value> = jsons.iter().map(|j| read(j)).collect();
    let merged = dir.path().join("merged.json").display().to_string();
    let (code, text, err, _) = sweetspot(&["merge", "--json", &merged, &jsons[0], &jsons[1]]);
    assert_eq!(code, 0, "{err}");
    let m = read(&merged);
    let tls = &m["tls"];
    let sum = |key: &str| {
        parts
            .iter()
            .map(|p| p["tls"][key].as_u64().unwrap())
            .sum::<u64>()
    };
    // Every request paid a handshake: 60 of them, as the server saw.
    assert_eq!(tls["handshakes"].as_u64(), Some(60), "{tls}");
    assert_eq!(sum("handshakes"), 60);
    assert_eq!(tls["resumed"].as_u64(), Some(sum("resumed")));
    // The server saw those and each segment's pre-flight one.
    assert_eq!(server.wait_handshakes(62), 62);
    assert_eq!(tls["version"], "TLSv1.3");
    assert_eq!(tls["handshake_us"]["count"].as_u64(), Some(60), "{tls}");
    // The merged percentiles come from the added histograms: the max is the larger max, the
    // mean the count-weighted mean of the parts'.
    let max = parts
        .iter()
        .map(|p| p["tls"]["handshake_us"]["max"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(tls["handshake_us"]["max"].as_f64(), Some(max), "{tls}");
    let weighted: f64 = parts
        .iter()
        .map(|p| {
            let h = &p["tls"]["handshake_us"];
            h["mean"].as_f64().unwrap() * h["count"].as_f64().unwrap()
        })
        .sum::<f64>()
        / 60.0;
    let mean = tls["handshake_us"]["mean"].as_f64().unwrap();
    assert!(
        (mean - weighted).abs() <= 0.01 * weighted,
        "{mean} vs {weighted}"
    );
    assert!(
        text.contains("  TLS: TLSv1.3, ALPN http/1.1, 60 handshakes ("),
        "{text}"
    );
}

#[test]
fn https_to_a_plain_http_server_says_so_in_one_line() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut tcp, _)) = listener.accept() {
            let mut buf = [0u8; 1024];
            let _ = tcp.read(&mut buf);
            let _ = tcp.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let url = format!("https://127.0.0.1:{port}/");
    let (code, _, stderr, _) = sweetspot(&["load", &url, "-n", "10"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr,
        "sweetspot: TLS: 127.0.0.1 did not answer with TLS (is it an http:// server?)\n"
    );
}

#[test]
fn tls_flags_misused_are_exit_2_with_one_line() {
    for (args, message) in [
        (
            vec!["load", "http://127.0.0.1:1/", "--insecure"],
            "sweetspot: --insecure and --cacert apply to https:// targets only\n",
        ),
        (
            vec![
                "load",
                "https://127.0.0.1:1/",
                "--cacert",
                "/nonexistent/ca.pem",
            ],
            "",
        ),
    ] {
        let (code, _, stderr, _) = sweetspot(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        if message.is_empty() {
            assert!(
                stderr.starts_with("sweetspot: --cacert /nonexistent/ca.pem: cannot read it ("),
                "{stderr}"
            );
        } else {
            assert_eq!(stderr, message);
        }
    }
}

/// `sweetspot load -q --json FILE ARGS...`: the exit code and the report.
fn load_json(args: &[&str]) -> (i32, serde_json::Value, String) {
    let dir = TempDir::new("tls-load");
    let json = dir.path().join("report.json");
    let json_text = json.display().to_string();
    let mut all = vec!["load", "-q", "--json", &json_text];
    all.extend_from_slice(args);
    let (code, _, err, _) = sweetspot(&all);
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (code, report, err)
}

fn count(v: &serde_json::Value, path: &[&str]) -> u64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_u64()
        .unwrap_or_else(|| panic!("no {path:?} in {v}"))
}

#[test]
fn our_servers_answer_https_on_http1_on_every_architecture() {
    let dir = TempDir::new("our-https");
    let (cert, key, ca) = write_server_files(dir.path(), &ca_signed());
    // A file of many TLS records, some writes of which the socket takes only in part.
    let root = dir.path().join("www");
    std::fs::create_dir_all(&root).unwrap();
    let big: Vec<u8> = (0..1_500_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(root.join("big.bin"), &big).unwrap();
    let fetched = dir.path().join("fetched.bin");
    let root = root.to_str().unwrap();
    let (cert, key, ca) = (
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
        ca.to_str().unwrap(),
    );
    for arch in sweetspot::arch::Arch::all().iter().map(|a| a.name()) {
        let server = Server::start(&[
            "--arch",
            arch,
            "--root",
            root,
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ]);
        assert!(
            server.ready_line.starts_with("listening on https://"),
            "{arch}: {}",
            server.ready_line
        );
        let url = format!("https://127.0.0.1:{}/hello", server.port);
        // curl, trusting the CA: three requests on one kept-alive connection, the last a
        // file of 1.5 MB, every byte of which arrives.
        let file_url = format!("https://127.0.0.1:{}/big.bin", server.port);
        let curl = std::process::Command::new("curl")
            .args(["-s", "--max-time", "20", "--http1.1", "--cacert", ca, "-w"])
            .arg("%{http_code} %{http_version} %{num_connects}\\n")
            .args(["-o", "/dev/null", &url, "-o", "/dev/null", &url, "-o"])
            .arg(&fetched)
            .arg(&file_url)
            .output()
            .expect("curl (scripts/test installs it)");
        assert_eq!(
            String::from_utf8_lossy(&curl.stdout),
            "200 1.1 1\n200 1.1 0\n200 1.1 0\n",
            "{arch}: {}",
            String::from_utf8_lossy(&curl.stderr)
        );
        assert!(
            std::fs::read(&fetched).unwrap() == big,
            "{arch}: the file differs"
        );
        // Our generator, kept alive (one connection at a time for iterative).
        let connections = if arch == "iterative" { "1" } else { "2" };
        let (code, kept, err) = load_json(&[
            "--cacert",
            ca,
            "--http1",
            "-c",
            connections,
            "-n",
            "200",
            &url,
        ]);
        assert_eq!(code, 0, "{arch}: {err}");
        assert_eq!(count(&kept, &["status", "200"]), 200, "{arch}: {kept}");
        assert_eq!(kept["tls"]["alpn"], "http/1.1", "{arch}");
        assert_eq!(
            count(&kept, &["tls", "handshakes"]),
            connections.parse::<u64>().unwrap(),
            "{arch}"
        );
        // A connection per request: a handshake each, resumed by ticket (across processes too).
        let (code, fresh, err) = load_json(&[
            "--cacert",
            ca,
            "--http1",
            "--no-keepalive",
            "-c",
            "1",
            "-n",
            "20",
            &url,
        ]);
        assert_eq!(code, 0, "{arch}: {err}");
        assert_eq!(count(&fresh, &["status", "200"]), 20, "{arch}: {fresh}");
        assert_eq!(count(&fresh, &["tls", "handshakes"]), 20, "{arch}");
        let resumed = count(&fresh, &["tls", "resumed"]);
        assert!(resumed >= 19, "{arch}: {resumed} of 20 resumed");
        let (code, stats) = server.stop_with(nix::sys::signal::Signal::SIGTERM);
        assert_eq!(code, Some(0), "{arch}");
        assert!(stats.contains("served 223 requests"), "{arch}: {stats}");
        // The server saw what the clients made: curl's, each run's pre-flight, and the runs'.
        let (full, server_resumed, _) = sweetspot::lab::cert::stats_handshakes(&stats)
            .unwrap_or_else(|| panic!("{arch}: no handshakes in {stats:?}"));
        let kept_handshakes = count(&kept, &["tls", "handshakes"]);
        assert_eq!(
            full + server_resumed,
            1 + (1 + kept_handshakes) + (1 + 20),
            "{arch}: {stats}"
        );
        assert_eq!(
            server_resumed,
            resumed + count(&kept, &["tls", "resumed"]),
            "{arch}: {stats}"
        );
    }
}

#[test]
fn a_bad_certificate_or_key_or_tls_for_echo_is_one_line_and_exit_2() {
    let dir = TempDir::new("our-https-bad");
    let (cert, key, _) = write_server_files(dir.path(), &ca_signed());
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let missing = dir.path().join("missing.pem");
    let missing = missing.to_str().unwrap();
    let cases: [(&str, &str, &str, &str, &str); 5] = [
        ("prethreaded", "http", missing, key, "--tls-cert"),
        ("epoll", "http", cert, missing, "--tls-key"),
        ("threaded", "http", cert, cert, "--tls-key"),
        ("uring", "http", cert, missing, "--tls-key"),
        (
            "epoll",
            "echo",
            cert,
            key,
            "only --protocol http is served over TLS",
        ),
    ];
    for (arch, protocol, cert, key, says) in cases {
        let (code, _, err, _) = sweetspot(&[
            "serve",
            "--arch",
            arch,
            "--protocol",
            protocol,
            "--port",
            "0",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ]);
        assert_eq!(code, 2, "{arch}: {err}");
        assert!(err.contains(says), "{arch}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{arch}: {err}");
    }
}
