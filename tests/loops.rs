//! What the multi-loop and hybrid architectures promise beyond the conformance suite:
//! reactors count what each loop accepted (both accept modes), `--accept` is refused where it
//! means nothing (and `--spin-us` everywhere but async, where it holds each worker before it
//! parks), and hybrid keeps its loop responsive while its pool runs a long `/fib`, with
//! thousands of idle keep-alive connections held; async takes a burst of thousands of
//! connects without losing one and holds them idle in kilobytes each. Real servers on free
//! ports. A loop, and a ring that has idled, read what arrived between the work of waits that
//! fell due together.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;

/// The per-loop counts on a stats line: `...; accepted per loop A B ...`.
fn accepted_per_loop(stats: &str) -> Vec<u64> {
    let line = stats
        .lines()
        .find(|l| l.starts_with("stopped: served "))
        .unwrap_or_else(|| panic!("no stats line in {stats:?}"));
    let (_, counts) = line
        .split_once("; accepted per loop ")
        .unwrap_or_else(|| panic!("no per-loop counts in {line:?}"));
    counts
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}

/// `connections` connections, some of them several requests each, to a 3-loop reactors
/// server: the stats line has three counts that sum to exactly the connections made.
fn reactors_count_accepts(accept: &str) {
    let server = Server::start(&["--arch", "reactors", "--workers", "3", "--accept", accept]);
    let connections = 60;
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let port = server.port;
            std::thread::spawn(move || {
                for i in 0..connections / 4 {
                    let mut c = Client::connect(port);
                    for _ in 0..i % 3 {
                        c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
                        assert_eq!(c.read_reply(false).text(), "Hello, World!");
                    }
                    c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
                    assert_eq!(c.read_reply(false).text(), "Hello, World!");
                    assert!(c.closed_by_server());
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let (code, rest) = server.stop_with(Signal::SIGTERM);
    assert_eq!(code, Some(0));
    let counts = accepted_per_loop(&rest);
    assert_eq!(counts.len(), 3, "{rest}");
    assert_eq!(counts.iter().sum::<u64>(), connections, "{rest}");
    if accept == "reuseport" {
        // Each loop has its own listener on the port the first one got (--port 0), and the
        // kernel hashes 60 connections from distinct source ports over all three.
        assert!(counts.iter().all(|&n| n > 0), "{rest}");
    }
}

#[test]
fn reactors_reuseport_count_what_each_loop_accepted() {
    reactors_count_accepts("reuseport");
}

#[test]
fn reactors_shared_count_what_each_loop_accepted() {
    reactors_count_accepts("shared");
}

#[test]
fn accept_is_refused_for_other_architectures_and_bad_modes() {
    for args in [
        &["--arch", "epoll", "--accept", "shared"][..],
        &["--arch", "hybrid", "--accept", "reuseport"],
        &["--arch", "reactors", "--accept", "sometimes"],
    ] {
        let out = sweetspot_output(&[&["serve", "--port", "0"][..], args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--accept"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} started serving");
    }
}

#[test]
fn spin_us_is_refused_for_other_architectures_and_past_its_bound() {
    for (args, says) in [
        (
            &["--arch", "epoll", "--spin-us", "10"][..],
            "only async takes it",
        ),
        (
            &["--arch", "reactors", "--spin-us", "10"],
            "only async takes it",
        ),
        (&["--arch", "async", "--spin-us", "1001"], "at most 1000"),
        (&["--arch", "async", "--spin-us", "-1"], "'-1'"),
        (&["--arch", "async", "--spin-us", "soon"], "--spin-us"),
    ] {
        let out = sweetspot_output(&[&["serve", "--port", "0"][..], args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} started serving");
    }
}

/// `--spin-us` reaches the runtime: with one worker, which spins blind to new work, every
/// request after the first two waits out a whole spin (the client sends the next one as soon
/// as it has a reply, so each park was short), and the answers are the same.
#[test]
fn async_spin_holds_a_lone_worker_before_each_park() {
    let requests: u32 = 60;
    let spin = Duration::from_micros(1000);
    let server = Server::start(&["--arch", "async", "--workers", "1", "--spin-us", "1000"]);
    let mut c = Client::connect(server.port);
    let started = Instant::now();
    for _ in 0..requests {
        c.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.read_reply(false).text(), "Hello, World!");
    }
    let took = started.elapsed();
    drop(c);
    assert!(
        took >= spin * (requests - 2),
        "{requests} requests in {took:?}"
    );
    assert_eq!(server.stop_and_count_served(), u64::from(requests));
}

/// fib(44) by naive recursion: over a second of one core here, far longer than a /hello.
const LONG_FIB: &[u8] = b"GET /fib?n=44 HTTP/1.1\r\nHost: t\r\n\r\n";
const LONG_FIB_VALUE: &str = "701408733";

/// Whether a reply has begun to arrive on `c`, without waiting for one.
fn reply_waiting(c: &mut Client) -> bool {
    if !c.reader.buffer().is_empty() {
        return true;
    }
    let s = c.reader.get_ref();
    s.set_nonblocking(true).unwrap();
    let peeked = s.peek(&mut [0u8; 1]);
    s.set_nonblocking(false).unwrap();
    matches!(peeked, Ok(n) if n > 0)
}

/// Waits until the server has burnt at least 100 ms of CPU more than `before` ticks: the
/// long fib is running.
fn wait_for_fib_to_run(server: &Server, before: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while proc_stat(server.pid().as_raw()).unwrap().cpu_ticks < before + 10 {
        assert!(Instant::now() < deadline, "the fib did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts a long fib on one connection, then asks for /hello on another while it runs:
/// returns how long the /hello took and whether the fib's reply had arrived by then.
fn hello_during_a_long_fib(server: &Server) -> (Duration, bool) {
    let before = proc_stat(server.pid().as_raw()).unwrap().cpu_ticks;
    let mut busy = Client::connect(server.port);
    busy.send(LONG_FIB);
    wait_for_fib_to_run(server, before);
    let start = Instant::now();
    assert_eq!(get(server.port, "/hello").text(), "Hello, World!");
    let took = start.elapsed();
    let fib_answered = reply_waiting(&mut busy);
    assert_eq!(busy.read_reply(false).text(), LONG_FIB_VALUE);
    (took, fib_answered)
}

#[test]
fn hybrid_answers_hello_while_its_pool_runs_a_long_fib() {
    let server = Server::start(&["--arch", "hybrid", "--workers", "2"]);
    let (took, fib_answered) = hello_during_a_long_fib(&server);
    assert!(!fib_answered, "/hello waited for the fib ({took:?})");
    assert!(took < Duration::from_secs(1), "/hello took {took:?}");
}

/// The contrast that makes the test above mean something: epoll runs the fib inline, so the
/// same /hello is answered only after it.
#[test]
fn epoll_answers_hello_only_after_a_long_fib() {
    let server = Server::start(&["--arch", "epoll"]);
    let (took, fib_answered) = hello_during_a_long_fib(&server);
    assert!(fib_answered, "/hello answered in {took:?} before the fib");
}

/// 2,000 idle keep-alive connections held by hybrid's one loop: a long fib on the pool does
/// not stop a new /hello, and every idle connection still answers afterwards.
#[test]
fn hybrid_holds_2000_idle_keepalive_connections_during_a_long_fib() {
    sweetspot::sys::raise_fd_limit();
    let server = Server::start(&["--arch", "hybrid", "--workers", "2", "--idle-timeout", "60"]);
    let idle_count = 2000;
    let hello = b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut idle: Vec<Client> = (0..idle_count)
        .map(|_| {
            let mut c = Client::connect(server.port);
            c.send(hello);
            assert_eq!(c.read_reply(false).text(), "Hello, World!");
            c
        })
        .collect();
    let (took, fib_answered) = hello_during_a_long_fib(&server);
    assert!(
        !fib_answered,
        "/hello waited for the fib beside {idle_count} idle connections ({took:?})"
    );
    assert!(took < Duration::from_secs(1), "/hello took {took:?}");
    for c in &mut idle {
        assert!(!reply_waiting(c), "an unasked reply");
        c.send(hello);
        assert_eq!(c.read_reply(false).text(), "Hello, World!");
    }
    drop(idle);
    // Twice per idle connection, the fib, and the /hello beside it.
    assert_eq!(server.stop_and_count_served(), 2 * idle_count + 2);
}

/// Work queued for a client that reset its connection (what `sweetspot load` does on a
/// timeout without keep-alive) is dropped, not run: behind one long fib on a one-worker pool,
/// five more from clients that then vanish cost nothing, and the next request is answered
/// right after the first fib instead of five fibs later.
#[test]
fn hybrid_skips_queued_work_of_clients_that_reset() {
    let server = Server::start(&["--arch", "hybrid", "--workers", "1"]);
    let before = proc_stat(server.pid().as_raw()).unwrap().cpu_ticks;
    let mut first = Client::connect(server.port);
    first.send(LONG_FIB);
    wait_for_fib_to_run(&server, before);
    for _ in 0..5 {
        let mut gone = Client::connect(server.port);
        gone.send(LONG_FIB);
        std::thread::sleep(Duration::from_millis(20));
        socket2::SockRef::from(gone.reader.get_ref())
            .set_linger(Some(Duration::ZERO))
            .unwrap();
    }
    let mut next = Client::connect(server.port);
    next.send(b"GET /fib?n=20 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert!(!reply_waiting(&mut first), "the first fib ended too soon");
    assert_eq!(first.read_reply(false).text(), LONG_FIB_VALUE);
    let first_done = Instant::now();
    assert_eq!(next.read_reply(false).text(), "6765");
    let waited = first_done.elapsed();
    assert!(
        waited < Duration::from_millis(700),
        "the next request waited {waited:?} after the first fib: the vanished clients' work ran"
    );
    assert_eq!(server.stop_and_count_served(), 2);
}

/// A c10k-style burst on async: 10,000 connects opened back to back, far faster than one at a
/// time past the listen backlog (4,096), each given 3 s (a SYN dropped by a full backlog waits
/// 1 s for its retransmit, two drops 3 s): none fails, each then answers /hello, and the server
/// holds them all idle in well under 8 KiB each (a 16 KiB read buffer per task would be
/// 160 MiB; the event loops hold 10,000 in about 15 MiB).
#[test]
fn async_takes_a_burst_of_10000_connects_and_holds_them_in_kilobytes() {
    let limit = sweetspot::sys::raise_fd_limit();
    let count: u64 = 10_000;
    assert!(
        limit > count + 100,
        "the file limit {limit} is too low here"
    );
    let server = Server::start(&["--arch", "async", "--workers", "2", "--idle-timeout", "60"]);
    let addr: SocketAddr = ([127, 0, 0, 1], server.port).into();
    let before_kb = rss_kb(server.pid().as_raw()).unwrap();
    let mut failed = 0;
    let conns: Vec<TcpStream> = (0..count)
        .filter_map(
            |_| match TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
                Ok(s) => Some(s),
                Err(_) => {
                    failed += 1;
                    None
                }
            },
        )
        .collect();
    assert_eq!(failed, 0, "{failed} of {count} connects failed");
    let hello = b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut clients: Vec<Client> = conns
        .into_iter()
        .map(|s| {
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            Client {
                reader: std::io::BufReader::new(s),
            }
        })
        .collect();
    for c in &mut clients {
        c.send(hello);
    }
    for c in &mut clients {
        assert_eq!(c.read_reply(false).text(), "Hello, World!");
    }
    let held_kb = rss_kb(server.pid().as_raw()).unwrap() - before_kb;
    assert!(
        held_kb < 8 * count,
        "{count} idle connections cost {held_kb} KiB"
    );
    drop(clients);
    assert_eq!(server.stop_and_count_served(), count);
}

/// A request that waits 100 ms, then burns 500 ms of CPU in the loop.
const WAIT_THEN_WORK: &[u8] = b"GET /work?wait_ms=100&cpu_us=500000 HTTP/1.1\r\nHost: t\r\n\r\n";

/// Two waits fall due together while the loop is busy; a /hello arrives during the first's
/// work. The loop reads it before it starts the second's work (it runs the work of waits due
/// for [`sweetspot::arch::TURN_CPU`] at most, then looks at what arrived): the /hello's reply
/// comes between the two. Were a turn to run every wait due at once, it would come last.
fn a_loop_reads_between_the_work_of_waits_due_together(args: &[&str]) {
    let server = Server::start(args);
    // Connected first: the /hello is a request on a connection the loop has, not an accept.
    let mut hello = Client::connect(server.port);
    let mut waits = [Client::connect(server.port), Client::connect(server.port)];
    for w in &mut waits {
        w.send(WAIT_THEN_WORK);
    }
    // Busy past both waits' ends: they fall due together behind it.
    let mut busy = Client::connect(server.port);
    busy.send(b"GET /work?cpu_us=300000 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(busy.read_reply(false).status, 200);
    // The first wait's work is running now.
    std::thread::sleep(Duration::from_millis(100));
    hello.send(b"GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(hello.read_reply(false).text(), "Hello, World!");
    let answered: Vec<bool> = waits.iter_mut().map(reply_waiting).collect();
    assert_eq!(
        answered.iter().filter(|a| **a).count(),
        1,
        "{args:?}: the waits answered before the /hello: {answered:?}"
    );
    for w in &mut waits {
        assert_eq!(w.read_reply(false).status, 200);
    }
}

#[test]
fn epoll_reads_between_the_work_of_waits_due_together() {
    a_loop_reads_between_the_work_of_waits_due_together(&["--arch", "epoll"]);
}

#[test]
fn poll_reads_between_the_work_of_waits_due_together() {
    a_loop_reads_between_the_work_of_waits_due_together(&["--arch", "poll"]);
}

#[test]
fn a_reactor_reads_between_the_work_of_waits_due_together() {
    a_loop_reads_between_the_work_of_waits_due_together(&["--arch", "reactors", "--workers", "1"]);
}

/// uring slices the work of waits due together once its ring has idled: its replies are sent
/// by turn, and the /hello's goes out before the second wait's work begins.
#[test]
fn a_ring_that_idled_reads_between_the_work_of_waits_due_together() {
    a_loop_reads_between_the_work_of_waits_due_together(&["--arch", "uring", "--workers", "1"]);
}
