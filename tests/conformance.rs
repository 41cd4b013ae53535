//! The conformance suite: one list of cases, each run against every architecture on a server
//! of its own, reported one by one (`epoll::hello`, `uring::slowloris`, ...) so one failure
//! hides none of the rest; cargo's filter picks cases (`cargo test --test conformance --
//! epoll::`). A new architecture joins with one line in [`SUITE`]; what the suite expects of
//! it (whether it takes `--workers`, its default worker count) comes from `Arch`, and a test
//! checks that the list names every `Arch`. An entry may run an architecture with extra flags
//! (`reactors_shared`: `reactors --accept shared`); the cases get that "spec" as `arch`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use libtest_mimic::{Arguments, Trial};
use nix::sys::signal::Signal;
use sweetspot::arch::Arch;

const SECRET: &str = "TOP-SECRET-OUTSIDE-ROOT";

/// The site every suite server serves: a copy of a few pages plus a symlink leading out.
struct Site {
    base: TempDir,
}

impl Site {
    fn new() -> Site {
        let base = TempDir::new("site");
        let root = base.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(base.path().join("secret.txt"), SECRET).unwrap();
        std::fs::write(root.join("index.html"), "<h1>home</h1>").unwrap();
        std::fs::write(root.join("sub/index.html"), "<h1>sub</h1>").unwrap();
        std::fs::write(root.join("style.css"), "body{}").unwrap();
        std::fs::write(root.join("data.json"), "{}").unwrap();
        std::fs::write(root.join("big.bin"), vec![b'x'; BIG_FILE_BYTES]).unwrap();
        // Sparse: 200 MB that costs no disk.
        std::fs::File::create(root.join("huge.bin"))
            .unwrap()
            .set_len(HUGE_FILE_BYTES)
            .unwrap();
        std::os::unix::fs::symlink(base.path().join("secret.txt"), root.join("leak.txt")).unwrap();
        std::os::unix::fs::symlink(base.path(), root.join("up")).unwrap();
        Site { base }
    }

    fn root(&self) -> String {
        self.base.path().join("root").display().to_string()
    }

    fn store(&self) -> String {
        format!("sqlite:{}", self.base.path().join("gb.sqlite").display())
    }
}

type Case = fn(u16);
/// A case that also needs the architecture's name or the server's process.
type ServerCase = fn(&str, &Server);

/// Cases that watch the server process, run after [`CASES`] on the same server. Timed cases
/// start with a request on a fresh connection, so an iterative server is free when they do.
const SERVER_CASES: &[(&str, ServerCase)] = &[
    ("never-reading client", never_reading_client),
    ("slowloris", slowloris),
    ("huge static file", huge_static_file),
    ("abandoned fib stops", abandoned_fib_stops),
    ("abandoned work stops", abandoned_work_stops),
    ("waits to the nanosecond", precise_waits),
    // Last: iterative works off its slow requests long after the case returns.
    ("vanished clients", vanished_clients_cost_no_cpu),
];

/// Every suite server runs with `--write-timeout` of this many seconds.
const WRITE_TIMEOUT_S: u64 = 2;
/// A sparse static file far larger than any buffer a server should hold.
const HUGE_FILE_BYTES: u64 = 200 << 20;
/// A static file whose replies dwarf the requests for it.
const BIG_FILE_BYTES: usize = 64 * 1024;

/// Every HTTP case, run in order against one server per architecture.
const CASES: &[(&str, Case)] = &[
    ("hello", hello),
    ("fib", fib),
    ("sleep", sleep),
    ("work", work),
    ("static files", static_files),
    ("traversal", traversal),
    ("keep-alive", keep_alive),
    ("pipelining", pipelining),
    ("head", head),
    ("bad input", bad_input),
    ("200 concurrent clients", concurrent_clients),
    ("guestbook", guestbook),
    ("guestbook caps and pages", guestbook_caps_and_pages),
    ("idle clients are dropped", idle_timeout),
    ("deep pipeline", deep_pipeline),
    ("http/1.1 rules", http11_rules),
    ("expect 100-continue", expect_continue),
    ("413 is read, not reset", lingering_413),
];

fn hello(port: u16) {
    let r = get(port, "/hello");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.text(), "Hello, World!");
}

fn fib(port: u16) {
    assert_eq!(get(port, "/fib?n=10").text(), "55");
    assert_eq!(get(port, "/fib?n=0").text(), "0");
    assert_eq!(get(port, "/fib?n=1").text(), "1");
    assert_eq!(get(port, "/fib?n=30").text(), "832040");
    for bad in ["/fib?n=51", "/fib?n=-1", "/fib?n=abc", "/fib"] {
        assert_eq!(get(port, bad).status, 400, "{bad}");
    }
}

/// `/work`: the drawn work in the reply, the wait then the CPU taken, bad input refused.
fn work(port: u16) {
    let start = Instant::now();
    let r = get(port, "/work?cpu_us=3000&wait_ms=40");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "cpu_us=3000 wait_us=40000\n");
    assert!(
        start.elapsed() >= Duration::from_millis(43),
        "{:?}",
        start.elapsed()
    );
    let start = Instant::now();
    let r = get(port, "/work?cpu_us=1000&wait_ms=30&wait=blocking");
    assert_eq!(r.text(), "cpu_us=1000 wait_us=30000\n");
    assert!(
        start.elapsed() >= Duration::from_millis(31),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(get(port, "/work").text(), "cpu_us=0 wait_us=0\n");
    let head = raw(
        port,
        "HEAD /work?wait_ms=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(head.status, 200);
    for bad in [
        "/work?cpu_us=10000001",
        "/work?wait_ms=60001",
        "/work?wait=maybe",
        "/work?dist=lognormal",
        "/work?dist=zipf",
        "/work?cv=2",
    ] {
        assert_eq!(get(port, bad).status, 400, "{bad}");
    }
}

fn sleep(port: u16) {
    let start = Instant::now();
    let r = get(port, "/sleep?ms=80");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert!(start.elapsed() >= Duration::from_millis(80));
    assert_eq!(get(port, "/sleep?ms=60001").status, 400);
    assert_eq!(get(port, "/sleep?ms=x").status, 400);
}

fn static_files(port: u16) {
    let home = get(port, "/");
    assert_eq!(home.status, 200);
    assert_eq!(
        home.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(home.text(), "<h1>home</h1>");
    assert_eq!(get(port, "/sub/").text(), "<h1>sub</h1>");
    assert_eq!(get(port, "/sub").text(), "<h1>sub</h1>");
    let css = get(port, "/style.css");
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    assert_eq!(css.text(), "body{}");
    assert_eq!(
        get(port, "/data.json").header("content-type"),
        Some("application/json")
    );
    assert_eq!(get(port, "/missing.html").status, 404);
}

fn traversal(port: u16) {
    for evil in [
        "/../secret.txt",
        "/../../../../etc/passwd",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/sub/..%2f..%2fsecret.txt",
        "/sub/%2e%2e/%2e%2e/secret.txt",
        "/..%5csecret.txt",
        "/leak.txt",
        "/up/secret.txt",
        "/index.html%00.txt",
        "/%00",
    ] {
        let r = get(port, evil);
        assert!(matches!(r.status, 400 | 404), "{evil} gave {}", r.status);
        assert!(!r.text().contains(SECRET), "{evil} leaked the secret");
        assert!(!r.text().contains("root:"), "{evil} leaked /etc/passwd");
    }
}

fn keep_alive(port: u16) {
    let mut c = Client::connect(port);
    for _ in 0..3 {
        c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.read_reply(false);
        assert_eq!(r.text(), "Hello, World!");
        // HTTP/1.1 persists by default (RFC 9112 9.3): no Connection header says so.
        assert_eq!(r.header("connection"), None);
    }
    c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(c.read_reply(false).header("connection"), Some("close"));
    assert!(c.closed_by_server());

    let mut c = Client::connect(port);
    c.send(b"GET /hello HTTP/1.0\r\n\r\n");
    let r = c.read_reply(false);
    assert_eq!((r.status, r.header("connection")), (200, Some("close")));
    assert!(c.closed_by_server());

    let mut c = Client::connect(port);
    c.send(b"GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.read_reply(false).header("connection"), Some("keep-alive"));
    c.send(b"GET /fib?n=7 HTTP/1.0\r\n\r\n");
    assert_eq!(c.read_reply(false).text(), "13");
    assert!(c.closed_by_server());
}

fn pipelining(port: u16) {
    let mut c = Client::connect(port);
    c.send(
        b"GET /sleep?ms=30 HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /hello HTTP/1.1\r\nHost: t\r\n\r\n\
          POST /guestbook HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nguest-name=\
          GET /fib?n=12 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(c.read_reply(false).text(), "slept 30 ms\n");
    assert_eq!(c.read_reply(false).text(), "Hello, World!");
    assert_eq!(c.read_reply(false).status, 400);
    assert_eq!(c.read_reply(false).text(), "144");
    assert!(c.closed_by_server());
}

fn head(port: u16) {
    let mut c = Client::connect(port);
    c.send(b"HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_reply(true);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("13"));
    // No body was sent: the next reply starts right after the head.
    c.send(b"GET /fib?n=6 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(c.read_reply(false).text(), "8");
    let r = raw(
        port,
        "HEAD / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.header("content-length"), Some("13"));
}

fn bad_input(port: u16) {
    let big_header = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(9 * 1024));
    let cases: Vec<(String, u16)> =
        vec![
        ("GARBAGE\r\n\r\n".into(), 400),
        ("GET /hello HTTP/9.9\r\n\r\n".into(), 400),
        ("GET hello HTTP/1.1\r\n\r\n".into(), 400),
        (big_header, 431),
        (
            "POST /guestbook HTTP/1.1\r\nHost: t\r\nContent-Length: 2097152\r\n\r\n".into(),
            413,
        ),
        (
            "POST /guestbook HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                .into(),
            400,
        ),
        (
            "POST /guestbook HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n".into(),
            501,
        ),
        (
            "POST /guestbook HTTP/1.1\r\nContent-Length: abc\r\n\r\n".into(),
            400,
        ),
        ("DELETE /hello HTTP/1.1\r\nHost: t\r\n\r\n".into(), 405),
        ("BREW /pot HTTP/1.1\r\nHost: t\r\n\r\n".into(), 501),
        ("GET /hello HTTP/1.1\r\n\r\n".into(), 400),
        ("GET /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".into(), 400),
        (format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "u".repeat(100_000)), 414),
    ];
    for (request, status) in cases {
        let mut c = Client::connect(port);
        c.send(request.as_bytes());
        let r = c.read_reply(false);
        assert_eq!(r.status, status, "{:?}", &request[..request.len().min(60)]);
        assert_eq!(r.header("connection"), Some("close"));
        assert!(c.closed_by_server(), "connection left open after {status}");
    }
    let r = raw(
        port,
        "POST /hello HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 405);
    // The server is still fine.
    assert_eq!(get(port, "/hello").status, 200);
}

fn concurrent_clients(port: u16) {
    let handles: Vec<_> = (0..200)
        .map(|i| {
            std::thread::spawn(move || {
                let r = get(port, &format!("/fib?n={}", i % 20));
                (r.status, r.text(), i)
            })
        })
        .collect();
    let fibs: Vec<u64> = (0..20).map(sweetspot::app::fib).collect();
    for h in handles {
        let (status, text, i) = h.join().unwrap();
        assert_eq!(status, 200);
        assert_eq!(text, fibs[i % 20].to_string());
    }
}

fn guestbook(port: u16) {
    let marker = format!("<script>alert({port})</script>");
    let r = post_remark(port, "Mallory & co", &marker);
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/guestbook"));
    let first = get(port, "/guestbook");
    assert_eq!(first.status, 200);
    assert_eq!(
        first.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let page = first.text();
    assert!(page.contains(&format!("&lt;script&gt;alert({port})&lt;/script&gt;")));
    assert!(page.contains("Mallory &amp; co"));
    assert!(!page.contains("<script>"));
    assert!(page.contains("<form method=\"post\" action=\"/guestbook\">"));
    let second = get(port, "/guestbook").text();
    assert_eq!(visitors(&second), visitors(&page) + 1);
    assert_eq!(post_remark(port, "", "no name").status, 400);
    assert_eq!(post_remark(port, "no remark", "  ").status, 400);
}

/// A remark over 2 KiB or a name over 100 bytes gets 413; the page shows the newest 20
/// remarks, newest first, with older ones on `?page=`; HEAD does not count a visitor.
fn guestbook_caps_and_pages(port: u16) {
    assert_eq!(
        post_remark(port, &"n".repeat(100), &"r".repeat(2048)).status,
        303
    );
    let r = post_remark(port, &"n".repeat(101), "fine");
    assert_eq!(
        (r.status, r.text()),
        (413, "guest-name is over 100 bytes\n".into())
    );
    let r = post_remark(port, "fine", &"r".repeat(2049));
    assert_eq!(
        (r.status, r.text()),
        (413, "guest-remarks is over 2048 bytes\n".into())
    );
    guestbook_pages(port);
}

/// Posts 25 remarks and checks the first two pages, the visitor count under HEAD and bad pages.
fn guestbook_pages(port: u16) {
    for i in 0..25 {
        assert_eq!(
            post_remark(port, "pager", &format!("[pt-{i:02}]")).status,
            303
        );
    }
    let first = get(port, "/guestbook").text();
    let shown = |page: &str| -> Vec<String> {
        page.match_indices("[pt-")
            .map(|(at, _)| page[at..at + 7].to_string())
            .collect()
    };
    let newest: Vec<String> = (5..25).rev().map(|i| format!("[pt-{i:02}]")).collect();
    assert_eq!(shown(&first), newest);
    assert!(first.contains("href=\"/guestbook?page=2\">older"));
    let second = get(port, "/guestbook?page=2").text();
    let older: Vec<String> = (0..5).rev().map(|i| format!("[pt-{i:02}]")).collect();
    assert_eq!(shown(&second), older);
    assert_eq!(
        shown(&get(port, "/guestbook?page=99").text()),
        Vec::<String>::new()
    );
    let before = visitors(&get(port, "/guestbook").text());
    let head = raw(
        port,
        "HEAD /guestbook HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(head.status, 200);
    assert_eq!(visitors(&get(port, "/guestbook").text()), before + 1);
    for bad in [
        "/guestbook?page=0",
        "/guestbook?page=x",
        "/guestbook?page=-1",
    ] {
        assert_eq!(get(port, bad).status, 400, "{bad}");
    }
}

/// 40,000 pipelined requests sent at once, read as they come: every one is answered, in
/// order, though the replies far exceed what the server queues per connection.
fn deep_pipeline(port: u16) {
    let n = 40_000;
    let mut c = Client::connect(port);
    let writer = c.reader.get_ref().try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let one = b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
        (&writer).write_all(&one.repeat(n)).unwrap();
    });
    for i in 0..n {
        let r = c.read_reply(false);
        assert_eq!(r.text(), "Hello, World!", "reply {i}");
    }
    sender.join().unwrap();
}

/// RFC 9112/9110 behaviour: a Date header, chunked request bodies, absolute-form targets,
/// HTTP/1.2 read as 1.1.
fn http11_rules(port: u16) {
    let hello = get(port, "/hello");
    let date = hello.header("date").expect("a Date header");
    assert!(date.ends_with(" GMT") && date.len() == 29, "{date:?}");
    let mut c = Client::connect(port);
    c.send(
        b"POST /guestbook HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\
          Content-Type: application/x-www-form-urlencoded\r\n\r\n\
          b\r\nguest-name=\r\n1c;x=y\r\nchunky&guest-remarks=chunked\r\n0\r\n\r\n\
          GET http://example.com/fib?n=9 HTTP/1.1\r\nHost: example.com\r\n\r\n\
          GET /hello HTTP/1.2\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(c.read_reply(false).status, 303);
    assert_eq!(c.read_reply(false).text(), "34");
    assert_eq!(c.read_reply(false).text(), "Hello, World!");
    assert!(c.closed_by_server());
    assert!(get(port, "/guestbook")
        .text()
        .contains("<strong>chunky</strong>: chunked"));
}

/// `Expect: 100-continue` gets `100 Continue` before the body is sent, then the reply.
fn expect_continue(port: u16) {
    let mut c = Client::connect(port);
    c.reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let body = "guest-name=exp&guest-remarks=continued";
    c.send(
        format!(
            "POST /guestbook HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    let mut interim = [0u8; 25];
    c.reader
        .read_exact(&mut interim)
        .expect("no 100 Continue before the body");
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.send(body.as_bytes());
    assert_eq!(c.read_reply(false).status, 303);
}

/// A 413 sent while the client is still uploading reaches it: the server reads and drops
/// the rest for a while before closing, instead of resetting the connection (a reset makes
/// the client's next write fail, and a client like curl then never reads the 413).
fn lingering_413(port: u16) {
    let mut c = Client::connect(port);
    let mut upload =
        b"POST /guestbook HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n".to_vec();
    upload.extend(std::iter::repeat_n(b'x', 300_000));
    c.send(&upload);
    // The server has answered and decided to close by now; the rest of the body follows.
    std::thread::sleep(Duration::from_millis(300));
    c.reader
        .get_mut()
        .write_all(&vec![b'y'; 1_700_000])
        .expect("the upload was reset instead of read to its end");
    let r = c.read_reply(false);
    assert_eq!(r.status, 413);
    assert_eq!(r.header("connection"), Some("close"));
}

fn idle_timeout(port: u16) {
    // Servers in the suite run with --idle-timeout 1.
    for opening in [&b""[..], b"GET /hel"] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
        s.write_all(opening).unwrap();
        let start = Instant::now();
        let mut buf = [0u8; 64];
        let n = s
            .read(&mut buf)
            .expect("server should close the idle connection");
        assert_eq!(n, 0);
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(900),
            "closed after {waited:?}"
        );
        assert!(waited < Duration::from_secs(4), "closed after {waited:?}");
    }
}

/// The architecture of a suite entry's spec (its first word).
fn arch_name(spec: &str) -> &str {
    spec.split_whitespace().next().expect("an empty spec")
}

/// `--arch NAME` and the entry's extra flags, from a spec such as `reactors --accept shared`.
fn arch_args(spec: &str) -> Vec<&str> {
    let mut words = spec.split_whitespace();
    let mut args = vec!["--arch", words.next().expect("an empty spec")];
    args.extend(words);
    args
}

/// Whether `arch` takes `--workers` (the suite then asks for a small pool).
fn pooled(arch: &str) -> bool {
    Arch::from_name(arch_name(arch))
        .unwrap_or_else(|| panic!("{arch} is not an Arch"))
        .pooled()
}

fn suite_args<'a>(arch: &'a str, root: &'a str, store: &'a str) -> Vec<&'a str> {
    let mut args = arch_args(arch);
    args.extend([
        "--root",
        root,
        "--store",
        store,
        "--idle-timeout",
        "1",
        "--write-timeout",
        "2",
        "--header-timeout",
        "2",
        "--body-timeout",
        "3",
    ]);
    if pooled(arch) {
        args.extend(["--workers", "4"]);
    }
    args
}

/// Runs `case` against a fresh server for `arch`, then checks that the server reaped its
/// children and stops cleanly on SIGTERM with its stats line.
fn with_server(arch: &str, case: impl FnOnce(&Server)) {
    let site = Site::new();
    let (root, store) = (site.root(), site.store());
    let args = suite_args(arch, &root, &store);
    let server = Server::start(&args);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = if args.contains(&"--workers") {
        4
    } else {
        Arch::from_name(arch_name(arch))
            .unwrap()
            .default_workers(cores)
    };
    assert_eq!(
        server.ready_line,
        format!(
            "listening on http://127.0.0.1:{} arch={} workers={workers}",
            server.port,
            arch_name(arch)
        )
    );
    let pgid = server.pid();
    let kind = Arch::from_name(arch_name(arch)).unwrap();
    if kind.forks() && kind.pooled() {
        // The pool forks its workers after the ready line.
        wait_for_steady_children(pgid);
    }
    case(&server);
    assert_eq!(
        unreaped_children(pgid),
        Vec::<i32>::new(),
        "{arch}: unreaped children"
    );
    let (code, rest) = server.stop_with(Signal::SIGTERM);
    assert_eq!(code, Some(0), "{arch}: exit code after SIGTERM");
    assert!(
        rest.starts_with("stopped: served "),
        "{arch}: stats line {rest:?}"
    );
    assert!(wait_group_gone(pgid), "{arch}: processes left after stop");
}

/// Waits (at most 3 s) until the server's set of children has held still for 300 ms, so a
/// case starts after a pool has forked all its workers.
fn wait_for_steady_children(pid: nix::unistd::Pid) {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut last = children(pid, false);
    let mut since = Instant::now();
    while since.elapsed() < Duration::from_millis(300) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let now = children(pid, false);
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
}

/// Children still zombies a second after they were first seen as zombies: a server reaps
/// within a fifth of a second, so these it does not reap. (A child that exits just now, say
/// at the end of a lingering close, is not counted against it.)
fn unreaped_children(pid: nix::unistd::Pid) -> Vec<i32> {
    let first = children(pid, true);
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut left = first;
    // Looked at every 20 ms: the answer is known as soon as the first ones are reaped.
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = children(pid, true);
        left.retain(|p| now.contains(p));
    }
    left
}

/// Cases that start servers of their own (other protocols, stores, limits, stops).
/// A case that starts its own servers for the architecture it is given.
type OwnServerCase = fn(&str);

const OWN_SERVER_CASES: &[(&str, OwnServerCase)] = &[
    ("persistence", persistence),
    ("redis store", redis_store),
    ("echo", echo),
    ("echo never read", echo_never_read),
    ("fd exhaustion", fd_exhaustion),
    ("shutdown bounded", shutdown_is_bounded_during_a_long_fib),
];

/// A case's name as a test name: `200 concurrent clients` -> `200_concurrent_clients`.
fn test_name(case: &str) -> String {
    case.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Every case of every entry of [`SUITE`], named `entry::case`.
fn suite_trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    for &(entry, arch) in SUITE {
        let name = |case: &str| format!("{entry}::{}", test_name(case));
        for &(case_name, case) in CASES {
            trials.push(Trial::test(name(case_name), move || {
                with_server(arch, |server| case(server.port));
                Ok(())
            }));
        }
        for &(case_name, case) in SERVER_CASES {
            trials.push(Trial::test(name(case_name), move || {
                with_server(arch, |server| case(arch, server));
                Ok(())
            }));
        }
        for &(case_name, case) in OWN_SERVER_CASES {
            trials.push(Trial::test(name(case_name), move || {
                case(arch);
                Ok(())
            }));
        }
    }
    trials
}

/// The server's resident memory once it has answered and its memory has stopped moving: an
/// architecture may finish setting up its threads after the ready line (uring's rings fill
/// their receive buffers then, 4 MiB a ring), which a memory bound must not count.
fn http_baseline_rss_kb(server: &Server) -> u64 {
    assert_eq!(get(server.port, "/hello").status, 200);
    settled_rss_kb(server.pid())
}

/// The group's largest RSS once two readings 100 ms apart agree (at most 3 s).
fn settled_rss_kb(pgid: nix::unistd::Pid) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut last = group_max_rss_kb(pgid);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = group_max_rss_kb(pgid);
        if now == last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// A client that pipelines requests with large replies and never reads: the server's memory
/// stays bounded (it stops reading once a connection's queued output is full) and the client
/// is dropped once it has drained nothing for the write timeout (with the idle timeout
/// shorter, queued output must not exempt it).
fn never_reading_client(arch: &str, server: &Server) {
    let pgid = server.pid();
    let before = http_baseline_rss_kb(server);
    let request = b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n";
    let count = 3000;
    let s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut sent = 0;
    for _ in 0..count {
        if (&s).write_all(request).is_err() {
            break;
        }
        sent += 1;
    }
    let sent_at = Instant::now();
    std::thread::sleep(Duration::from_millis(1000));
    let during = group_max_rss_kb(pgid);
    assert!(
        during < before + 16 * 1024,
        "{arch}: RSS grew from {before} KiB to {during} KiB under a client that never reads"
    );
    std::thread::sleep(Duration::from_secs(WRITE_TIMEOUT_S + 1).saturating_sub(sent_at.elapsed()));
    // Dropped by now: what can still be read is far less than the replies to what was sent.
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut received = 0usize;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match (&s).read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => received += n,
        }
    }
    let full = sent * BIG_FILE_BYTES;
    assert!(
        sent > 100 && received < full / 2,
        "{arch}: a client that read nothing for {WRITE_TIMEOUT_S} s was not dropped \
         (sent {sent} requests, then read {received} of {full} bytes)"
    );
    assert_eq!(get(server.port, "/hello").status, 200);
}

/// A 200 MB file: HEADs read none of it, a GET streams it whole and right, and memory stays
/// bounded throughout (the file is never read into memory whole).
fn huge_static_file(arch: &str, server: &Server) {
    let port = server.port;
    let pgid = server.pid();
    let before = http_baseline_rss_kb(server);
    let heads: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                raw(
                    port,
                    "HEAD /huge.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                )
            })
        })
        .collect();
    for h in heads {
        let r = h.join().unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length"), Some("209715200"));
    }
    let after_heads = group_max_rss_kb(pgid);
    assert!(
        after_heads < before + 16 * 1024,
        "{arch}: RSS {before} KiB -> {after_heads} KiB after HEADs of a 200 MB file"
    );
    let mut c = Client::connect(port);
    // The next request's head is half sent behind the file: while the server streams, its
    // header deadline does not run (no 408 may land inside the body).
    c.send(b"GET /huge.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /hel");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut c.reader, &mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line:?}");
    let mut head = Vec::new();
    loop {
        let mut h = String::new();
        std::io::BufRead::read_line(&mut c.reader, &mut h).unwrap();
        if h.trim_end().is_empty() {
            break;
        }
        head.push(h.trim_end().to_ascii_lowercase());
    }
    assert!(
        head.contains(&"content-length: 209715200".to_string()),
        "{head:?}"
    );
    // Read a little, then stall: the server holds its bounded buffer, not the file.
    let mut buf = vec![0u8; 1 << 20];
    c.reader.read_exact(&mut buf).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let during = group_max_rss_kb(pgid);
    assert!(
        during < before + 16 * 1024,
        "{arch}: RSS {before} KiB -> {during} KiB while streaming a 200 MB file"
    );
    let mut left = HUGE_FILE_BYTES - buf.len() as u64;
    let mut slow_reads = 0;
    while left > 0 {
        let n = (left as usize).min(buf.len());
        c.reader.read_exact(&mut buf[..n]).unwrap();
        assert!(
            buf[..n].iter().all(|&b| b == 0),
            "{arch}: wrong bytes in the file body"
        );
        left -= n as u64;
        // Slowly for 3 s (past the 2 s header timeout), draining enough to stay alive.
        if slow_reads < 20 {
            slow_reads += 1;
            std::thread::sleep(Duration::from_millis(150));
        }
    }
    c.send(b"lo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(c.read_reply(false).text(), "Hello, World!");
    assert!(c.closed_by_server());
}

/// Sends `head` at once, then `trickle` one byte every 300 ms (never pausing long enough for
/// the 1 s idle timeout) for up to 8 s; returns the status the server answered with (0 for
/// none) and how long after the first byte it came.
fn trickle(port: u16, head: &'static [u8], trickle: &'static [u8]) -> (u16, Duration) {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(12))).unwrap();
    let writer = s.try_clone().unwrap();
    let start = Instant::now();
    let sender = std::thread::spawn(move || {
        let _ = (&writer).write_all(head);
        for byte in trickle.iter().cycle() {
            std::thread::sleep(Duration::from_millis(300));
            if start.elapsed() > Duration::from_secs(8) || (&writer).write_all(&[*byte]).is_err() {
                break;
            }
        }
    });
    let mut reply = Vec::new();
    let mut buf = [0u8; 256];
    let status = loop {
        match (&s).read(&mut buf) {
            Ok(0) | Err(_) => break 0,
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                if reply.len() >= 12 {
                    break std::str::from_utf8(&reply[9..12])
                        .unwrap()
                        .parse()
                        .unwrap_or(1);
                }
            }
        }
    };
    let took = start.elapsed();
    drop(s);
    sender.join().unwrap();
    (status, took)
}

/// Slowloris: a head that trickles in a byte at a time, resetting any idle timer, gets 408
/// once the header timeout (2 s in the suite) is up; a body has its own deadline (3 s); and
/// while six of them try to pin the workers, a normal client is still answered promptly
/// (iterative serves one connection at a time, so there one trickler is tried).
fn slowloris(arch: &str, server: &Server) {
    let port = server.port;
    assert_eq!(get(port, "/hello").status, 200);
    // The head and the body trickle at once, except where one connection is served at a time.
    let body = move || {
        trickle(
            port,
            b"POST /guestbook HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n",
            b"x",
        )
    };
    let concurrent_body = (arch != "iterative").then(|| std::thread::spawn(body));
    let (status, took) = trickle(port, b"GET /hello HTTP/1.1\r\nHost: t\r\nX-Slow: ", b"a");
    assert_eq!(status, 408, "{arch}: a trickled head was not timed out");
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_millis(4500),
        "{arch}: header timeout of 2 s answered after {took:?}"
    );
    let (status, took) = match concurrent_body {
        Some(handle) => handle.join().unwrap(),
        None => body(),
    };
    assert_eq!(status, 408, "{arch}: a trickled body was not timed out");
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_millis(5500),
        "{arch}: body timeout of 3 s answered after {took:?}"
    );
    if arch == "iterative" {
        return;
    }
    let pinners: Vec<_> = (0..6)
        .map(|_| {
            std::thread::spawn(move || {
                trickle(port, b"GET /hello HTTP/1.1\r\nHost: t\r\nX-S: ", b"b")
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    assert_eq!(get(port, "/hello").text(), "Hello, World!");
    let waited = start.elapsed();
    assert!(
        waited < Duration::from_millis(4500),
        "{arch}: a normal client waited {waited:?} behind six slow ones"
    );
    for p in pinners {
        assert_eq!(
            p.join().unwrap().0,
            408,
            "{arch}: a pinning client was not timed out"
        );
    }
}

/// Out of file descriptors under a flood of idle connections: the server logs it, delays the
/// connections it cannot take, stays up, and serves again once the flood is gone.
fn fd_exhaustion(arch: &str) {
    let dir = TempDir::new("fds");
    let log_path = dir.path().join("stderr.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut args = arch_args(arch);
    args.extend(["--idle-timeout", "1"]);
    if pooled(arch) {
        args.extend(["--workers", "4"]);
    }
    let mut server = Server::start_with_fd_limit(&args, 48, log);
    let flood: Vec<TcpStream> = (0..120)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        server.running(),
        "{arch}: died under the flood; its stderr: {}",
        std::fs::read_to_string(&log_path).unwrap_or_default()
    );
    drop(flood);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let mut c = Client::connect(server.port);
        c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        if c.read_reply(false).text() == "Hello, World!" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{arch}: no answer after the flood"
        );
    }
    assert!(server.running(), "{arch}: died after the flood");
    if matches!(
        arch_name(arch),
        "threaded" | "poll" | "epoll" | "reactors" | "hybrid"
    ) {
        let log = std::fs::read_to_string(&log_path).unwrap();
        assert!(
            log.contains("Too many open files"),
            "{arch}: running out of descriptors was not logged: {log:?}"
        );
    }
}

/// CPU ticks of every process in the server's group (the forking architectures compute in
/// children).
fn group_cpu_ticks(pgid: i32) -> u64 {
    processes()
        .iter()
        .filter(|p| p.pgrp == pgid)
        .map(|p| p.cpu_ticks)
        .sum()
}

/// A fib(50) (about 30 s of CPU) whose client closes, or resets, its connection stops within
/// a couple of seconds: the server group's CPU time stops growing, and `/hello` is answered
/// afterwards (on iterative and the event loops only once the fib has given up). Bytes that
/// arrive while a long fib runs (a pipelined request) are not a hang-up: both are answered.
fn abandoned_fib_stops(arch: &str, server: &Server) {
    let pgid = server.pid().as_raw();
    let children_before = child_pids(pgid);
    abandoned_request_stops(arch, server, "/fib?n=50");
    let mut c = Client::connect(server.port);
    // fib(44) takes about 2 s alone here; two clean-clone runs of the whole suite on this
    // shared VM waited out the client's 20 s for it (in one, other targets' timing tests
    // failed in the same run). A hang still fails, at a minute.
    c.reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    c.send(b"GET /fib?n=44 HTTP/1.1\r\nHost: t\r\n\r\n");
    let before = group_cpu_ticks(pgid);
    let deadline = Instant::now() + Duration::from_secs(10);
    while group_cpu_ticks(pgid) < before + 5 {
        assert!(Instant::now() < deadline, "{arch}: fib(44) did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(c.read_reply(false).text(), "701408733", "{arch}");
    assert_eq!(c.read_reply(false).text(), "Hello, World!", "{arch}");
    assert!(c.closed_by_server(), "{arch}");
    no_new_children_left(arch, pgid, &children_before);
}

/// Every thread of the server's processes (a connection's child too, while one is open)
/// sleeps and waits with 1 ns of timer slack, not the default 50 us: a 200 us wait taken with
/// its slack ran late by up to a quarter, and waits of one loop that fell due within it ended
/// together, their requests bunched from then on.
fn precise_waits(arch: &str, server: &Server) {
    let mut open = Client::connect(server.port);
    open.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(open.read_reply(false).status, 200);
    let mut threads = 0;
    for pid in group_live(server.pid()) {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            // (Read per thread at /proc/TID: the task directories do not list it.)
            let tid = task.file_name();
            let path = format!("/proc/{}/timerslack_ns", tid.to_string_lossy());
            let Ok(slack) = std::fs::read_to_string(path) else {
                continue;
            };
            assert_eq!(slack.trim(), "1", "{arch}: thread {tid:?}");
            threads += 1;
        }
    }
    assert!(threads >= 1, "{arch}: no thread of the server was read");
}

/// The server's children (forking: one per connection).
fn child_pids(pid: i32) -> Vec<i32> {
    processes()
        .iter()
        .filter(|p| p.ppid == pid)
        .map(|p| p.pid)
        .collect()
}

/// Leaves no child of a case still exiting for the suite's zombie check to race with.
fn no_new_children_left(arch: &str, pid: i32, before: &[i32]) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while child_pids(pid).iter().any(|p| !before.contains(p)) {
        assert!(
            Instant::now() < deadline,
            "{arch}: a connection's child lingers"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// CPU work whose client closed or reset its connection stops within two seconds, and the
/// server answers afterwards.
fn abandoned_request_stops(arch: &str, server: &Server, path: &str) {
    let pgid = server.pid().as_raw();
    for reset in [false, true] {
        assert_eq!(get(server.port, "/hello").status, 200);
        let how = if reset { "reset" } else { "closed" };
        let mut busy = Client::connect(server.port);
        busy.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let before = group_cpu_ticks(pgid);
        let deadline = Instant::now() + Duration::from_secs(10);
        while group_cpu_ticks(pgid) < before + 10 {
            assert!(Instant::now() < deadline, "{arch}: {path} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let stream = busy.reader.get_ref();
        if reset {
            socket2::SockRef::from(stream)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
        }
        drop(busy);
        let left = Instant::now();
        // Stopped: a 500 ms window in which the group spends at most 20 ms of CPU.
        let mut samples = vec![(Instant::now(), group_cpu_ticks(pgid))];
        let stopped_after = loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = (Instant::now(), group_cpu_ticks(pgid));
            samples.push(now);
            let window = samples
                .iter()
                .rev()
                .find(|(t, _)| now.0.duration_since(*t) >= Duration::from_millis(500));
            if let Some(&(t, ticks)) = window {
                // A forked child's ticks leave the sum when it is reaped.
                if now.1.saturating_sub(ticks) <= 2 {
                    break t.duration_since(left);
                }
            }
            assert!(
                left.elapsed() < Duration::from_secs(4),
                "{arch}: {path} still burning CPU {:?} after its client {how}: {} ticks since",
                left.elapsed(),
                now.1.saturating_sub(samples[0].1)
            );
        };
        eprintln!("{arch}: CPU quiet from {stopped_after:?} after the {path} client {how}");
        assert!(
            stopped_after <= Duration::from_secs(2),
            "{arch}: {path} stopped only {stopped_after:?} after its client {how}"
        );
        assert_eq!(get(server.port, "/hello").text(), "Hello, World!", "{arch}");
    }
}

/// `/work`'s CPU, ten seconds of it, is abandoned as `/fib`'s is.
fn abandoned_work_stops(arch: &str, server: &Server) {
    let pgid = server.pid().as_raw();
    let children_before = child_pids(pgid);
    abandoned_request_stops(arch, server, "/work?cpu_us=10000000");
    no_new_children_left(arch, pgid, &children_before);
}

/// Clients that half-close and then reset while their request waits must not make the
/// server spin (an event loop that keeps a hung-up socket registered wakes forever).
fn vanished_clients_cost_no_cpu(arch: &str, server: &Server) {
    let ticks = || proc_stat(server.pid().as_raw()).unwrap().cpu_ticks;
    let before = ticks();
    for _ in 0..5 {
        let s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        (&s).write_all(b"GET /sleep?ms=1500 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        socket2::SockRef::from(&s)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(s);
    }
    std::thread::sleep(Duration::from_millis(1600));
    let spent = ticks() - before;
    assert!(
        spent < 50,
        "{arch}: {spent} ticks of CPU spent on vanished clients"
    );
}

/// A remark answered 2xx survives a clean restart and a SIGKILL of the whole server.
fn persistence(arch: &str) {
    let site = Site::new();
    let (root, store) = (site.root(), site.store());
    let args = suite_args(arch, &root, &store);
    let args = &args[..];
    let server = Server::start(args);
    assert_eq!(
        post_remark(server.port, "ann", "before restart").status,
        303
    );
    let (code, _) = server.stop_with(Signal::SIGINT);
    assert_eq!(code, Some(0));

    let server = Server::start(args);
    let page = get(server.port, "/guestbook").text();
    assert!(page.contains("before restart"));
    assert_eq!(post_remark(server.port, "bob", "before kill").status, 303);
    server.crash();

    let server = Server::start(args);
    let page = get(server.port, "/guestbook").text();
    assert!(page.contains("before restart") && page.contains("before kill"));
}

/// The Redis store, the store going away (503 on guestbook only) and coming back.
fn redis_store(arch: &str) {
    let redis = Redis::start();
    let url = redis.url();
    let mut args = arch_args(arch);
    args.extend(["--store", &url]);
    if pooled(arch) {
        args.extend(["--workers", "3"]);
    }
    let server = Server::start(&args);
    let port = server.port;
    assert_eq!(post_remark(port, "rita", "<i>on redis</i>").status, 303);
    let page = get(port, "/guestbook");
    assert_eq!(page.status, 200);
    assert!(page.text().contains("&lt;i&gt;on redis&lt;/i&gt;"));
    let n = visitors(&page.text());
    assert_eq!(visitors(&get(port, "/guestbook").text()), n + 1);
    guestbook_pages(port);

    let redis_port = redis.port;
    redis.stop();
    for _ in 0..3 {
        assert_eq!(get(port, "/guestbook").status, 503);
        assert_eq!(post_remark(port, "x", "y").status, 503);
        assert_eq!(get(port, "/hello").text(), "Hello, World!");
    }
    let redis = Redis::start_on(redis_port);
    let mut recovered = false;
    for _ in 0..50 {
        let r = get(port, "/guestbook");
        if r.status == 200 {
            recovered = visitors(&r.text()) >= 1;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        recovered,
        "{arch}: guestbook did not recover when redis came back"
    );
    assert_eq!(post_remark(port, "back", "again").status, 303);
    assert!(get(port, "/guestbook").text().contains("again"));
    hung_redis(arch, port, &redis);
    drop(server);
    drop(redis);
}

/// A hung store (redis-server stopped by SIGSTOP: its port still accepts, nothing answers):
/// guestbook calls answer 503 within the 2 s store timeout, a pool keeps a worker for
/// `/hello` meanwhile (an event loop never waits on the store at all), and the guestbook
/// recovers once the store resumes.
fn hung_redis(arch: &str, port: u16, redis: &Redis) {
    redis.signal(Signal::SIGSTOP);
    let callers = if arch == "iterative" { 1 } else { 2 };
    let hung: Vec<_> = (0..callers)
        .map(|i| {
            std::thread::spawn(move || {
                let start = Instant::now();
                let status = if i == 0 {
                    get(port, "/guestbook").status
                } else {
                    post_remark(port, "hung", "store").status
                };
                (status, start.elapsed())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    if arch != "iterative" {
        let start = Instant::now();
        assert_eq!(get(port, "/hello").text(), "Hello, World!");
        let waited = start.elapsed();
        assert!(
            waited < Duration::from_millis(1000),
            "{arch}: /hello waited {waited:?} behind a hung store"
        );
    }
    for h in hung {
        let (status, took) = h.join().unwrap();
        assert_eq!(status, 503, "{arch}: a guestbook call to a hung store");
        assert!(
            took < Duration::from_millis(3500),
            "{arch}: a call to a hung store took {took:?}"
        );
    }
    // Calls after the first timeout (reconnecting included) are bounded too.
    let start = Instant::now();
    assert_eq!(get(port, "/guestbook").status, 503);
    assert!(
        start.elapsed() < Duration::from_millis(3500),
        "{arch}: {:?}",
        start.elapsed()
    );
    redis.signal(Signal::SIGCONT);
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(port, "/guestbook").status != 200 {
        assert!(
            Instant::now() < deadline,
            "{arch}: guestbook did not recover after SIGCONT"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The line-echo protocol: lines come back unchanged, split however the client sends them.
fn echo(arch: &str) {
    let mut args = arch_args(arch);
    args.extend(["--protocol", "echo"]);
    if pooled(arch) {
        args.extend(["--workers", "4"]);
    }
    let server = Server::start(&args);
    assert!(server
        .ready_line
        .starts_with("listening on tcp://127.0.0.1:"));
    let port = server.port;
    let handles: Vec<_> = (0..10)
        .map(|client| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                s.set_nodelay(true).unwrap();
                let mut sent = Vec::new();
                for i in 0..100 {
                    let line = format!("client {client} query {i}\n");
                    let (a, b) = line.as_bytes().split_at(line.len() / 2);
                    s.write_all(a).unwrap();
                    s.write_all(b).unwrap();
                    sent.extend_from_slice(line.as_bytes());
                    let mut back = vec![0u8; line.len()];
                    s.read_exact(&mut back).unwrap();
                    assert_eq!(back, line.as_bytes());
                }
                sent.len()
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap() > 0);
    }
    let (code, rest) = server.stop_with(Signal::SIGTERM);
    assert_eq!(code, Some(0));
    assert!(rest.contains("served 1000 requests"), "{rest}");
}

/// An echo client that sends lines and never reads: the server stops reading instead of
/// queueing without bound, and drops the client after the write timeout.
fn echo_never_read(arch: &str) {
    let mut args = arch_args(arch);
    args.extend(["--protocol", "echo", "--write-timeout", "2"]);
    if arch == "preforked" || arch == "prethreaded" {
        args.extend(["--workers", "2"]);
    }
    let server = Server::start(&args);
    let pgid = server.pid();
    // The baseline is a server that has answered: an architecture may finish setting up its
    // threads after the ready line (uring's rings make their fixed receive buffers then).
    {
        let mut warm = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        warm.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        warm.write_all(b"warm\n").unwrap();
        let mut back = [0u8; 5];
        warm.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"warm\n", "{arch}");
    }
    let before = settled_rss_kb(pgid);
    let s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    s.set_write_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let lines = "echo this line back to me please\n".repeat(2048);
    let mut sent = 0usize;
    while sent < 64 << 20 {
        match (&s).write(lines.as_bytes()) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    let during = group_max_rss_kb(pgid);
    assert!(
        sent < 64 << 20,
        "{arch}: the server took all {sent} bytes from a client that reads nothing"
    );
    assert!(
        during < before + 16 * 1024,
        "{arch}: RSS grew from {before} KiB to {during} KiB under an echo client that never reads"
    );
    std::thread::sleep(Duration::from_millis(2500));
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut received = 0usize;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match (&s).read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => received += n,
        }
    }
    assert!(
        received < sent / 2,
        "{arch}: echo client not dropped after the write timeout ({received} of {sent} bytes came back)"
    );
}

/// The spec of a suite entry: its name, or its architecture and extra flags.
/// The suite's entries: a test-name prefix and the architecture with its flags.
const SUITE: &[(&str, &str)] = &[
    ("iterative", "iterative"),
    ("forking", "forking"),
    ("preforked", "preforked"),
    ("threaded", "threaded"),
    ("prethreaded", "prethreaded"),
    ("poll", "poll"),
    ("epoll", "epoll"),
    ("reactors", "reactors"),
    ("reactors_shared", "reactors --accept shared"),
    ("hybrid", "hybrid"),
    ("async", "async"),
    ("uring", "uring"),
];

/// The list names every architecture `serve` has, and nothing else (entries with extra flags
/// follow their architecture's plain entry).
fn every_architecture_is_in_the_suite() {
    let mut listed: Vec<&str> = SUITE.iter().map(|(_, spec)| arch_name(spec)).collect();
    listed.dedup();
    let all: Vec<&str> = Arch::all().iter().map(|a| a.name()).collect();
    assert_eq!(listed, all);
}

fn main() {
    let mut args = Arguments::from_args();
    // Most cases wait on the server's timers (idle, header and body timeouts, the shutdown
    // grace), not on the CPU: eight at once take a quarter of the time two do, and 32 at once
    // took 30 s where eight took 73 (four runs, one beside two busy loops, on this 2-core
    // machine, 2026-11-28), and pass alike. No other test binary runs beside them.
    args.test_threads.get_or_insert(32);
    let mut trials = suite_trials();
    let single: &[(&str, fn())] = &[
        (
            "every_architecture_is_in_the_suite",
            every_architecture_is_in_the_suite,
        ),
        (
            "preforked_workers_die_with_their_parent",
            preforked_workers_die_with_their_parent,
        ),
        (
            "forking_children_die_with_their_parent",
            forking_children_die_with_their_parent,
        ),
        (
            "uring_unavailable_is_one_line_and_exit_2",
            uring_unavailable_is_one_line_and_exit_2,
        ),
        (
            "a_stop_signal_wakes_a_blocked_accept_and_a_wait",
            a_stop_signal_wakes_a_blocked_accept_and_a_wait,
        ),
    ];
    for &(name, test) in single {
        trials.push(Trial::test(name, move || {
            test();
            Ok(())
        }));
    }
    libtest_mimic::run(&args, trials).exit();
}

/// SIGKILL of the parent alone (nothing to clean up) takes its workers with it, a busy one
/// included: the group empties, the request in flight is cut off, and the port binds again.
fn workers_die_with_their_parent(arch: &str, extra: &[&str]) {
    let mut args = vec!["--arch", arch];
    args.extend_from_slice(extra);
    let server = Server::start(&args);
    let (pid, port) = (server.pid(), server.port);
    let mut busy = Client::connect(port);
    busy.send(b"GET /sleep?ms=8000 HTTP/1.1\r\nHost: t\r\n\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    let workers = || {
        processes()
            .iter()
            .filter(|p| p.ppid == pid.as_raw() && p.state != "Z")
            .count()
    };
    while workers() == 0 {
        assert!(Instant::now() < deadline, "{arch}: no worker process");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let killed = Instant::now();
    nix::sys::signal::kill(pid, Signal::SIGKILL).unwrap();
    assert!(
        wait_group_gone(pid),
        "{arch}: workers outlived their parent"
    );
    let mut rest = Vec::new();
    let _ = busy.reader.read_to_end(&mut rest);
    assert!(
        killed.elapsed() < Duration::from_secs(4),
        "{arch}: the request in flight went on after the parent died"
    );
    assert!(rest.is_empty(), "{arch}: answered after the parent died");
    std::net::TcpListener::bind(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("{arch}: port {port} still held: {e}"));
    drop(server);
}

fn preforked_workers_die_with_their_parent() {
    workers_die_with_their_parent("preforked", &["--workers", "3"]);
}

fn forking_children_die_with_their_parent() {
    workers_die_with_their_parent("forking", &[]);
}

/// A stop honours its bound while a request that outlasts it runs (fib(50) takes about 30 s
/// here): the server exits 0 with its stats line shortly after the 5 s drain, whether the
/// fib runs in a loop, a thread or a child process.
fn shutdown_is_bounded_during_a_long_fib(arch: &str) {
    let mut args = arch_args(arch);
    if pooled(arch) {
        args.extend(["--workers", "2"]);
    }
    let server = Server::start(&args);
    let mut busy = Client::connect(server.port);
    busy.send(b"GET /fib?n=50 HTTP/1.1\r\nHost: t\r\n\r\n");
    // The forking architectures compute in a child: count the whole group's CPU.
    let pgid = server.pid().as_raw();
    let ticks = || -> u64 {
        processes()
            .iter()
            .filter(|p| p.pgrp == pgid)
            .map(|p| p.cpu_ticks)
            .sum()
    };
    let before = ticks();
    let deadline = Instant::now() + Duration::from_secs(5);
    while ticks() < before + 10 {
        assert!(Instant::now() < deadline, "{arch}: fib did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stopping = Instant::now();
    let (code, rest) = server.stop_with(Signal::SIGTERM);
    let took = stopping.elapsed();
    assert_eq!(code, Some(0), "{arch}");
    assert!(rest.starts_with("stopped: served "), "{arch}: {rest:?}");
    assert!(
        took < Duration::from_secs(8),
        "{arch}: stopping took {took:?}"
    );
    assert!(
        took >= Duration::from_secs(5),
        "{arch}: stopped after {took:?}, before the drain deadline"
    );
}

/// The servers' prompt stop (`sys::stop`), in this process: an accept(2) that has no timeout
/// and a wait of a minute both return once SIGTERM arrives, and the accept with EINVAL (its
/// listener shut down), not a connection. Without the wake the accept would never return.
fn a_stop_signal_wakes_a_blocked_accept_and_a_wait() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    use sweetspot::sys::stop::{on_stop_signals, wait_for_stop, wake_on_stop};
    let stopping = Arc::new(AtomicBool::new(false));
    on_stop_signals(Arc::clone(&stopping)).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let wake = wake_on_stop(&listener);
    let (accepted, blocked) = mpsc::channel();
    let (waited, waiting) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = listener.accept().map(|_| ()).map_err(|e| e.raw_os_error());
        accepted.send(outcome).unwrap();
    });
    std::thread::spawn(move || {
        wait_for_stop(Duration::from_secs(60));
        waited.send(()).unwrap();
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(blocked.try_recv().is_err() && waiting.try_recv().is_err());
    assert!(!stopping.load(Ordering::SeqCst));
    nix::sys::signal::raise(Signal::SIGTERM).unwrap();
    let outcome = blocked
        .recv_timeout(Duration::from_secs(10))
        .expect("the accept was still blocked 10 s after SIGTERM");
    assert_eq!(outcome, Err(Some(nix::libc::EINVAL)));
    waiting
        .recv_timeout(Duration::from_secs(10))
        .expect("the wait was still waiting 10 s after SIGTERM");
    assert!(stopping.load(Ordering::SeqCst));
    drop(wake);
}

/// Where io_uring cannot be set up (here: a seccomp filter failing `io_uring_setup` with
/// EPERM, as Docker's default profile does), `serve --arch uring` prints no ready line and
/// exits 2 with one line saying why. Other architectures run under the same filter.
fn uring_unavailable_is_one_line_and_exit_2() {
    let run = |arch: &str| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_sweetspot"));
        command.args(["serve", "--arch", arch, "--port", "0", "--protocol", "echo"]);
        sweetspot::sys::uring::deny_io_uring_before_exec(&mut command);
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawning sweetspot")
    };
    let out = run("uring").wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("io_uring is unavailable"), "{stderr}");
    assert!(stderr.contains("Operation not permitted"), "{stderr}");

    // The filter denies io_uring only: epoll under it starts and serves.
    let mut epoll = run("epoll");
    let mut line = String::new();
    let stdout = epoll.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(epoll.id() as i32),
        Signal::SIGTERM,
    );
    let status = epoll.wait().unwrap();
    assert!(
        line.starts_with("listening on tcp://127.0.0.1:"),
        "{line:?}"
    );
    assert_eq!(status.code(), Some(0));
}
