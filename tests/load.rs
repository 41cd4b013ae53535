//! Accuracy tests of `sweetspot load` against real servers on free ports: our own
//! `sweetspot serve --arch threaded` (for /sleep, /hello, 404 and echo) and tiny std::net servers
//! written here for what no real server does on purpose (never answering, chunked bodies,
//! close-delimited bodies, counting connections). No mocks, no timed speed assertions; every
//! run is bounded in time and every process started here is killed by PID on drop.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use sweetspot::load::stats::LatencyKey;

use common::tiny::TinyServer;
use common::{free_port, sweetspot, timing_lock, Server};
use sweetspot::load::{self, Engine, LoadConfig, LoadReport, Mode, Target};

/// Our threaded server, the target of the accuracy tests.
fn our_server(extra: &[&str]) -> Server {
    let mut args = vec!["--arch", "threaded"];
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// Holds the connection open, reads what comes, never answers (until the server stops).
fn never_answer(mut stream: TcpStream, stop: &AtomicBool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut buf = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return,
        }
    }
}

/// Reads one request head (these tests send no bodies); false at EOF.
fn read_request_head(reader: &mut BufReader<TcpStream>) -> bool {
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) if line == "\r\n" => return true,
            Ok(_) => {}
        }
    }
}

/// Answers every request with a chunked body split over several writes.
fn answer_chunked(stream: TcpStream, _stop: &AtomicBool) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    while read_request_head(&mut reader) {
        let parts: [&[u8]; 3] = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHel",
            b"lo\r\n8;ext=1\r\n, World!\r\n",
            b"0\r\nX-Trailer: yes\r\n\r\n",
        ];
        for part in parts {
            if writer.write_all(part).is_err() {
                return;
            }
        }
    }
}

/// Answers one request with an HTTP/1.0 body that ends when the connection closes.
fn answer_close_delimited(stream: TcpStream, _stop: &AtomicBool) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    if read_request_head(&mut reader) {
        let _ = writer.write_all(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil ");
        let _ = writer.write_all(b"the connection closes");
    }
}

/// Answers every request with a small Content-Length response, keep-alive.
fn answer_hello(stream: TcpStream, _stop: &AtomicBool) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    while read_request_head(&mut reader) {
        if writer
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            .is_err()
        {
            return;
        }
    }
}

fn config(url: &str, connections: usize, mode: Mode) -> LoadConfig {
    let mut config = LoadConfig::new(Target::parse(url).unwrap(), connections, mode);
    config.threads = 2.min(connections);
    config
}

/// [`config`] on the engine's `driver`.
fn config_on(driver: Engine, url: &str, connections: usize, mode: Mode) -> LoadConfig {
    let mut config = config(url, connections, mode);
    config.engine = driver;
    config
}

/// Runs each named test body (a `fn NAME(engine: Engine)`) on both engine drivers, as the
/// tests `NAME::epoll` and `NAME::uring`: everything the epoll driver is held to, the io_uring
/// driver is held to as well.
macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use super::*;
                #[test]
                fn epoll() {
                    super::$name(Engine::Epoll)
                }
                #[test]
                fn uring() {
                    super::$name(Engine::Uring)
                }
            }
        )*
    };
}

on_both_engines!(
    sleep_50ms_over_10_connections_has_p50_between_50_and_60_ms,
    a_server_that_never_answers_gives_timeouts_no_samples_and_ends_on_time,
    requests_still_waiting_at_the_end_are_reported_unanswered,
    iterative_server_at_64_connections_has_a_flagged_p99_of_the_run_length_on_hello,
    iterative_server_at_64_connections_has_a_flagged_p99_of_the_run_length_on_sleep,
    a_healthy_epoll_run_at_64_connections_has_no_lower_bounds,
    rate_mode_counts_due_requests_that_could_not_be_sent,
    rate_mode_at_twice_capacity_shows_the_stall_only_in_corrected_latency,
    rate_mode_below_capacity_holds_the_rate,
    rate_mode_slack_reads_a_known_latency_as_sends_one_by_one_do,
    count_mode_sends_exactly_n_requests,
    count_mode_with_pipelining_sends_exactly_n_requests,
    an_unknown_route_is_counted_under_404,
    no_keepalive_opens_one_connection_per_request,
    no_keepalive_against_our_server,
    chunked_responses_split_across_writes_are_framed,
    post_with_headers_and_body_is_sent_as_given,
    echo_target_counts_replies_of_the_message_length,
    the_stop_flag_ends_a_run_early_with_what_was_measured,
    per_second_throughput_covers_the_run,
    a_closed_system_settles_and_counts_whole_cycles,
);

fn closed(seconds: f64) -> Mode {
    Mode::Closed {
        duration: Duration::from_secs_f64(seconds),
    }
}

fn ms(us: f64) -> f64 {
    us / 1000.0
}

fn sleep_50ms_over_10_connections_has_p50_between_50_and_60_ms(engine: Engine) {
    let _timing = timing_lock();
    let server = our_server(&[]);
    let report = load::run(
        &config_on(engine, &server.url("/sleep?ms=50"), 10, closed(2.0)),
        None,
    )
    .unwrap();
    let l = report.latency_us;
    assert!(
        (50_000.0..60_000.0).contains(&l.p50),
        "p50 {} ms",
        ms(l.p50)
    );
    assert!(l.min >= 50_000.0, "min {} ms", ms(l.min));
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    // Requests answered in the drain after the deadline are samples, not responses of the run.
    assert_eq!(l.count, report.requests + report.drained);
    assert!(report.drained <= 10, "{}", report.drained);
    assert!(l.lower_bound.is_empty(), "{:?}", l.lower_bound);
    assert_eq!(report.unanswered, 0);
    assert_eq!(report.status.get("200"), Some(&report.requests));
    // 10 connections, ~50 ms each: near 200 req/s, and certainly more than one connection's 20.
    assert!(report.requests > 100, "{} requests", report.requests);
}

fn a_server_that_never_answers_gives_timeouts_no_samples_and_ends_on_time(engine: Engine) {
    let server = TinyServer::start(never_answer);
    let mut config = config_on(engine, &server.url("/"), 4, closed(2.0));
    config.timeout = Duration::from_millis(500);
    let started = Instant::now();
    let report = load::run(&config, None).unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(2000 + 500 + 1000),
        "took {took:?}"
    );
    assert!(took >= Duration::from_millis(2000), "took {took:?}");
    assert!(report.errors.timeout >= 4, "{:?}", report.errors);
    assert_eq!(report.requests, 0);
    assert_eq!(report.latency_answered_us.count, 0);
    // Only the requests still waiting at the end (at their age) and the timed-out ones (at
    // the timeout) are in the distribution; with no answered request to give an interval,
    // they stand for no others. Every figure is a lower bound.
    assert_eq!(
        report.latency_us.count,
        report.unanswered + report.errors.timeout
    );
    assert_eq!(
        report.latency_us.lower_bound.keys().count(),
        LatencyKey::ALL.len()
    );
    assert!(report.status.is_empty());
    // Each timed-out connection is replaced, so the run keeps trying: about 4 per 500 ms.
    assert!(report.errors.timeout <= 4 * 5, "{:?}", report.errors);
    // Every request sent either timed out or was still waiting when the run ended.
    assert_eq!(
        report.errors.timeout + report.unanswered,
        report.requests_sent,
        "{report:?}"
    );
}

fn requests_still_waiting_at_the_end_are_reported_unanswered(engine: Engine) {
    let server = TinyServer::start(never_answer);
    let mut config = config_on(engine, &server.url("/"), 3, closed(1.0));
    config.timeout = Duration::from_secs(5);
    let report = load::run(&config, None).unwrap();
    assert_eq!(report.requests, 0);
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    assert_eq!(report.requests_sent, 3);
    assert_eq!(report.unanswered, 3);
    // Waiting since the start: at least the run's length (1 s, plus the drain's 100 ms).
    let l = report.latency_us;
    assert_eq!(l.count, 3);
    assert!((1_000_000.0..1_300_000.0).contains(&l.min), "{l:?}");
    assert!(l.lower_bound.contains(LatencyKey::P50) && l.lower_bound.contains(LatencyKey::Min));
}

/// The iterative server serves one connection at a time: at 64 keep-alive connections the
/// first one is answered for the whole run and 63 never are. Their wait is in the percentiles.
fn stuck_connections_show_in_p99(engine: Engine, path: &str) {
    let server = Server::start(&["--arch", "iterative"]);
    let mut config = config_on(engine, &server.url(path), 64, closed(1.0));
    config.threads = 1;
    let report = load::run(&config, None).unwrap();
    let l = report.latency_us;
    assert_eq!(report.unanswered, 63, "{report:?}");
    assert!(report.requests > 50, "{report:?}");
    assert!(l.p99 >= 950_000.0, "{path}: p99 {} ms", ms(l.p99));
    for key in [
        LatencyKey::P50,
        LatencyKey::P90,
        LatencyKey::P99,
        LatencyKey::P999,
        LatencyKey::Max,
    ] {
        assert!(
            l.lower_bound.contains(key),
            "{path}: {key:?} {:?}",
            l.lower_bound
        );
    }
    // What a tool that drops them would say: the one answered connection's latency.
    let answered = report.latency_answered_us;
    assert!(answered.lower_bound.is_empty());
    assert!(answered.p99 < 500_000.0, "{path}: {answered:?}");
}

fn iterative_server_at_64_connections_has_a_flagged_p99_of_the_run_length_on_hello(engine: Engine) {
    let _timing = timing_lock();
    stuck_connections_show_in_p99(engine, "/hello");
}

fn iterative_server_at_64_connections_has_a_flagged_p99_of_the_run_length_on_sleep(engine: Engine) {
    let _timing = timing_lock();
    stuck_connections_show_in_p99(engine, "/sleep?ms=10");
}

fn a_healthy_epoll_run_at_64_connections_has_no_lower_bounds(engine: Engine) {
    let _timing = timing_lock();
    let server = Server::start(&["--arch", "epoll"]);
    for path in ["/hello", "/sleep?ms=10"] {
        let mut config = config_on(engine, &server.url(path), 64, closed(1.0));
        config.threads = 1;
        let report = load::run(&config, None).unwrap();
        let l = report.latency_us;
        assert_eq!(report.unanswered, 0, "{path}: {report:?}");
        for key in [LatencyKey::P50, LatencyKey::P90, LatencyKey::P99] {
            assert!(!l.lower_bound.contains(key), "{path}: {:?}", l.lower_bound);
        }
        assert_eq!(l.count, report.requests + report.drained);
    }
}

fn rate_mode_counts_due_requests_that_could_not_be_sent(engine: Engine) {
    let _timing = timing_lock();
    let server = Server::start(&["--arch", "iterative"]);
    // 8 connections at 400 req/s: one is served, 7 are stuck with their schedule running on.
    let mode = Mode::Rate {
        rate: 400.0,
        duration: Duration::from_secs(1),
    };
    let mut config = config_on(engine, &server.url("/hello"), 8, mode);
    config.threads = 1;
    let report = load::run(&config, None).unwrap();
    assert_eq!(report.unanswered, 7, "{report:?}");
    // Each stuck connection was due every 20 ms for about a second: ~49 unsent each.
    assert!((7 * 40..=7 * 50).contains(&report.unsent), "{report:?}");
    let corrected = report.latency_us;
    assert!(corrected.p99 >= 950_000.0, "{corrected:?}");
    assert!(
        corrected.lower_bound.contains(LatencyKey::P50)
            && corrected.lower_bound.contains(LatencyKey::P99)
    );
    // From actual send times only the 7 stuck requests are censored: 7 of ~57, above p75.
    let uncorrected = report.latency_uncorrected_us.unwrap();
    assert!(
        uncorrected.lower_bound.contains(LatencyKey::P90)
            && uncorrected.lower_bound.contains(LatencyKey::Max)
    );
    assert!(
        !uncorrected.lower_bound.contains(LatencyKey::P50),
        "{uncorrected:?}"
    );
}

fn rate_mode_at_twice_capacity_shows_the_stall_only_in_corrected_latency(engine: Engine) {
    let _timing = timing_lock();
    let server = our_server(&[]);
    // 10 connections x 100 ms = 100 req/s capacity; ask for 200 req/s for 3 s.
    let mode = Mode::Rate {
        rate: 200.0,
        duration: Duration::from_secs(3),
    };
    let report = load::run(
        &config_on(engine, &server.url("/sleep?ms=100"), 10, mode),
        None,
    )
    .unwrap();
    let corrected = report.latency_us;
    let uncorrected = report
        .latency_uncorrected_us
        .expect("rate mode reports the uncorrected view");
    assert!(
        (100_000.0..250_000.0).contains(&uncorrected.p99),
        "uncorrected p99 {} ms",
        ms(uncorrected.p99)
    );
    assert!(
        (100_000.0..130_000.0).contains(&uncorrected.p50),
        "uncorrected p50 {} ms",
        ms(uncorrected.p50)
    );
    // The backlog grows by 50 ms per request on every connection: ~1.5 s behind by the end.
    assert!(
        corrected.p99 > 1_000_000.0,
        "corrected p99 {} ms",
        ms(corrected.p99)
    );
    assert!(corrected.p99 > 4.0 * uncorrected.p99);
    assert_eq!(report.target_rate, Some(200.0));
    assert_eq!(report.rate_held, Some(false));
    let achieved = report.achieved_rate.unwrap();
    assert!((80.0..130.0).contains(&achieved), "achieved {achieved}/s");
    // Sends waited for busy connections: held by the backlog, as the corrected latency says;
    // the generator itself sent each as soon as its connection had room.
    let held = report.send_held_mean_us.unwrap();
    assert!(held > 100_000.0, "held {held} us");
    let late = report.send_late_mean_us.unwrap();
    assert!(late < 5_000.0, "sent {late} us late");
    assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
}

fn rate_mode_below_capacity_holds_the_rate(engine: Engine) {
    let _timing = timing_lock();
    let server = our_server(&[]);
    let mode = Mode::Rate {
        rate: 100.0,
        duration: Duration::from_secs(2),
    };
    let report = load::run(
        &config_on(engine, &server.url("/sleep?ms=10"), 10, mode),
        None,
    )
    .unwrap();
    assert_eq!(report.rate_held, Some(true), "{report:?}");
    let corrected = report.latency_us;
    assert!(corrected.p50 < 30_000.0, "p50 {} ms", ms(corrected.p50));
    // A free connection for every send: late by the generator's own wakeups alone, and
    // never held.
    let late = report.send_late_mean_us.unwrap();
    assert!((0.0..5_000.0).contains(&late), "sent {late} us late");
    assert!(report.send_held_mean_us.unwrap() < 100.0, "{report:?}");
    // Each connection sends every 100 ms: 2 s at 100/s is about 200 requests.
    assert!((180..=210).contains(&report.requests_sent), "{report:?}");
}

/// A server that adds 2 ms to every request, at 2,000 requests/s over 60 connections and 2
/// threads: sent one by one at their own times (the default, slack 0) and in batches of up to
/// 5 ms (five sends fall due per slack on each thread, so they share wakeups), the latency
/// reads the same 2 ms: the batches' sends went out over a millisecond late on average, by
/// the generator's choice, and that lateness is in no latency (counted in, it would have
/// moved p50 by as much).
fn rate_mode_slack_reads_a_known_latency_as_sends_one_by_one_do(engine: Engine) {
    let _timing = timing_lock();
    let server = our_server(&[]);
    let run = |slack_us: u64| {
        let mode = Mode::Rate {
            rate: 2000.0,
            duration: Duration::from_secs(2),
        };
        let mut config = config_on(engine, &server.url("/sleep?ms=2"), 60, mode);
        config.slack = Duration::from_micros(slack_us);
        let report = load::run(&config, None).unwrap();
        assert_eq!(report.rate_held, Some(true), "{report:?}");
        assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
        assert_eq!(report.slack_us, Some(slack_us));
        // The epoll driver times each response by the kernel's stamp of its arrival: the reads
        // carried one (all but those in the moment the kernel turns stamping on, when this is
        // the first socket to ask), and with the slack the worker napped, so responses waited
        // to be read (in no latency).
        if engine == Engine::Epoll {
            let stamps = report.stamps.clone().expect("stamps");
            assert!(
                stamps.stamped * 100 >= report.requests * 99,
                "{stamps:?} of {}",
                report.requests
            );
            if slack_us > 0 {
                assert!(stamps.hold_mean_us > 0.0, "{stamps:?}");
            }
        } else {
            assert_eq!(report.stamps, None);
        }
        let l = report.latency_us;
        assert!(
            (2_000.0..3_000.0).contains(&l.p50),
            "slack {slack_us} us: p50 {} ms",
            ms(l.p50)
        );
        assert!(
            l.p99 < 10_000.0,
            "slack {slack_us} us: p99 {} ms",
            ms(l.p99)
        );
        (l.p50, l.p99, report.send_late_mean_us.unwrap())
    };
    let (p50_exact, p99_exact, late_exact) = run(0);
    let (p50_batched, p99_batched, late_batched) = run(5000);
    assert!(late_exact < 1_000.0, "one by one: {late_exact} us late");
    assert!(late_batched > 1_000.0, "batched: {late_batched} us late");
    assert!(
        (p50_batched - p50_exact).abs() <= 500.0,
        "p50 {} ms one by one, {} ms batched",
        ms(p50_exact),
        ms(p50_batched)
    );
    assert!(
        (p99_batched - p99_exact).abs() <= 2000.0,
        "p99 {} ms one by one, {} ms batched",
        ms(p99_exact),
        ms(p99_batched)
    );
}

fn count_mode_sends_exactly_n_requests(engine: Engine) {
    let server = our_server(&[]);
    let report = load::run(
        &config_on(
            engine,
            &server.url("/hello"),
            10,
            Mode::Count { requests: 1000 },
        ),
        None,
    )
    .unwrap();
    assert_eq!(report.requests, 1000);
    assert_eq!(report.requests_sent, 1000);
    assert_eq!(report.status.get("200"), Some(&1000));
    assert_eq!(report.errors.total(), 0);
    assert_eq!(server.stop_and_count_served(), 1000);
}

fn count_mode_with_pipelining_sends_exactly_n_requests(engine: Engine) {
    let server = our_server(&[]);
    let mut config = config_on(
        engine,
        &server.url("/hello"),
        3,
        Mode::Count { requests: 1001 },
    );
    config.pipeline = 8;
    let report = load::run(&config, None).unwrap();
    assert_eq!(report.requests, 1001, "{:?}", report.errors);
    assert_eq!(report.errors.total(), 0);
    assert_eq!(server.stop_and_count_served(), 1001);
}

fn an_unknown_route_is_counted_under_404(engine: Engine) {
    let server = our_server(&[]);
    let report = load::run(
        &config_on(
            engine,
            &server.url("/no/such/page"),
            4,
            Mode::Count { requests: 200 },
        ),
        None,
    )
    .unwrap();
    assert_eq!(report.status.get("404"), Some(&200), "{:?}", report.status);
    assert_eq!(report.status.len(), 1);
    assert_eq!(report.errors.total(), 0);
}

fn no_keepalive_opens_one_connection_per_request(engine: Engine) {
    let server = TinyServer::start(answer_close_delimited);
    let mut config = config_on(engine, &server.url("/"), 5, Mode::Count { requests: 100 });
    config.keepalive = false;
    let report = load::run(&config, None).unwrap();
    assert_eq!(report.requests, 100, "{:?}", report.errors);
    assert_eq!(report.errors.total(), 0);
    // One connection per request, plus the pre-flight check.
    assert_eq!(server.accepted.load(Ordering::SeqCst), 101);
}

fn no_keepalive_against_our_server(engine: Engine) {
    let server = our_server(&[]);
    let mut config = config_on(
        engine,
        &server.url("/hello"),
        4,
        Mode::Count { requests: 300 },
    );
    config.keepalive = false;
    let report = load::run(&config, None).unwrap();
    assert_eq!(report.requests, 300, "{:?}", report.errors);
    assert_eq!(report.errors.total(), 0);
    assert_eq!(server.stop_and_count_served(), 300);
}

fn chunked_responses_split_across_writes_are_framed(engine: Engine) {
    let server = TinyServer::start(answer_chunked);
    let report = load::run(
        &config_on(engine, &server.url("/"), 4, Mode::Count { requests: 400 }),
        None,
    )
    .unwrap();
    assert_eq!(report.requests, 400, "{:?}", report.errors);
    assert_eq!(report.errors.total(), 0);
    // Kept alive: the 4 connections and the pre-flight check.
    assert_eq!(server.accepted.load(Ordering::SeqCst), 5);
}

fn post_with_headers_and_body_is_sent_as_given(engine: Engine) {
    let server = our_server(&[]);
    let mut config = config_on(
        engine,
        &server.url("/guestbook"),
        2,
        Mode::Count { requests: 20 },
    );
    config.method = "POST".into();
    config.headers.push((
        "Content-Type".into(),
        "application/x-www-form-urlencoded".into(),
    ));
    config.body = b"guest-name=load&guest-remarks=hello".to_vec();
    let report = load::run(&config, None).unwrap();
    assert_eq!(report.requests, 20, "{:?}", report.errors);
    let ok: u64 = ["200", "303"]
        .iter()
        .filter_map(|code| report.status.get(*code))
        .sum();
    assert_eq!(ok, 20, "{:?}", report.status);
}

fn echo_target_counts_replies_of_the_message_length(engine: Engine) {
    let server = our_server(&["--protocol", "echo"]);
    let mut config = config_on(
        engine,
        &format!("tcp://127.0.0.1:{}", server.port),
        10,
        Mode::Count { requests: 500 },
    );
    config.message_len = 32;
    let report = load::run(&config, None).unwrap();
    assert_eq!(report.requests, 500, "{:?}", report.errors);
    assert_eq!(report.bytes_read, 500 * 32);
    assert_eq!(
        (report.responses_read, report.response_bytes),
        (500, 500 * 32)
    );
    assert_eq!(report.bytes_written, 500 * 32);
    assert!(report.status.is_empty());
}

fn the_stop_flag_ends_a_run_early_with_what_was_measured(engine: Engine) {
    let server = TinyServer::start(answer_hello);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let report = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::SeqCst);
        });
        load::run(
            &config_on(engine, &server.url("/"), 2, closed(30.0)),
            Some(&stop),
        )
        .unwrap()
    });
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(report.requests > 0);
    assert!(report.duration_s < 3.0);
}

fn per_second_throughput_covers_the_run(engine: Engine) {
    let server = TinyServer::start(answer_hello);
    let report = load::run(&config_on(engine, &server.url("/"), 2, closed(2.0)), None).unwrap();
    assert_eq!(report.per_second.len(), 2, "{:?}", report.per_second);
    let sum: f64 = report.per_second.iter().sum();
    let expected = report.requests as f64;
    assert!(
        (sum - expected).abs() / expected < 0.05,
        "{sum} vs {expected}"
    );
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    for args in [
        vec!["load", "not-a-url"],
        vec![
            "load",
            "https://127.0.0.1/",
            "--cacert",
            "/nonexistent/ca.pem",
        ],
        vec!["load", "http://127.0.0.1:1/", "-c", "0"],
        vec!["load", "http://127.0.0.1:1/", "-c", "99999999"],
        vec!["load", "http://127.0.0.1:1/", "-t", "0"],
        vec!["load", "http://127.0.0.1:1/", "-n", "0"],
        vec!["load", "http://127.0.0.1:1/", "-R", "0"],
        vec!["load", "http://127.0.0.1:1/", "-R", "-3"],
        vec!["load", "http://127.0.0.1:1/", "-d", "forever"],
        vec!["load", "http://127.0.0.1:1/", "--timeout", "0s"],
        vec!["load", "http://127.0.0.1:1/", "-H", "no colon"],
        vec!["load", "https://127.0.0.1:1/", "--engine", "uring"],
        vec!["load", "http://127.0.0.1:1/", "--engine", "kqueue"],
        vec!["load", "http://127.0.0.1:1/", "--gather", "1ms"],
        vec!["load", "http://127.0.0.1:1/", "--slack", "1ms"],
        vec!["load", "http://127.0.0.1:1/", "-R", "100", "--slack", "1h"],
        vec![
            "load",
            "http://127.0.0.1:1/",
            "-R",
            "100",
            "--slack",
            "soon",
        ],
        vec![
            "load",
            "http://127.0.0.1:1/",
            "--engine",
            "uring",
            "--gather",
            "1h",
        ],
    ] {
        let (code, _, stderr, _) = sweetspot(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn an_unreachable_target_exits_1_quickly() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let (code, stdout, stderr, took) = sweetspot(&["load", &url, "-d", "1s"]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot connect"), "{stderr}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn json_output_has_the_contract_keys() {
    let server = TinyServer::start(answer_hello);
    let url = server.url("/");
    let (code, stdout, stderr, _) =
        sweetspot(&["load", &url, "-c", "2", "-n", "50", "--json", "-"]);
    assert_eq!(code, 0, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is only JSON");
    for key in [
        "requests",
        "duration_s",
        "rps",
        "latency_us",
        "status",
        "errors",
    ] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    for key in ["min", "mean", "p50", "p90", "p99", "p999", "max"] {
        assert!(
            json["latency_us"].get(key).is_some(),
            "missing latency_us.{key}"
        );
    }
    for key in ["connect", "read", "write", "timeout"] {
        assert!(json["errors"].get(key).is_some(), "missing errors.{key}");
    }
    assert_eq!(json["requests"], 50);
    assert_eq!(json["status"]["200"], 50);
    assert_eq!(json["engine"], "epoll");
    assert!(json.get("uring").is_none());
    assert!(json.get("latency_uncorrected_us").is_none());
    // The human summary went to stderr so stdout stays parseable.
    assert!(stderr.contains("Requests/sec"), "{stderr}");
    let report: LoadReport = serde_json::from_str(&stdout).expect("round-trips");
    assert_eq!(report.requests, 50);
}

#[test]
fn rate_mode_json_has_the_uncorrected_view() {
    let server = TinyServer::start(answer_hello);
    let url = server.url("/");
    let (code, stdout, stderr, _) = sweetspot(&[
        "load", &url, "-c", "2", "-R", "50", "-d", "1s", "--json", "-", "-q",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for key in ["min", "mean", "p50", "p90", "p99", "p999", "max"] {
        assert!(
            json["latency_uncorrected_us"].get(key).is_some(),
            "missing latency_uncorrected_us.{key}"
        );
    }
    assert_eq!(json["target_rate"], 50.0);
    assert_eq!(json["rate_held"], true);
    // No slack by default: every request at its own time.
    assert_eq!(json["slack_us"], 0);
    for key in ["send_late_mean_us", "send_late_max_us", "send_held_mean_us"] {
        assert!(json[key].as_f64().is_some(), "missing {key}: {json}");
    }
    // Everything answered: no lower bounds, so no key.
    assert!(json["latency_us"].get("lower_bound").is_none(), "{json}");
    assert!(json["latency_uncorrected_us"].get("lower_bound").is_none());
}

#[test]
fn json_lists_lower_bounds_by_key_in_both_views() {
    let server = TinyServer::start(never_answer);
    let url = server.url("/");
    let (code, stdout, stderr, _) = sweetspot(&[
        "load", &url, "-c", "2", "-R", "100", "-d", "1s", "--json", "-",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let all: Vec<&str> = LatencyKey::ALL.iter().map(|k| k.name()).collect();
    for view in ["latency_us", "latency_uncorrected_us"] {
        let keys: Vec<&str> = json[view]["lower_bound"]
            .as_array()
            .unwrap_or_else(|| panic!("{view}: {json}"))
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(keys, all, "{view}");
    }
    assert_eq!(json["unanswered"], 2);
    assert!(json["unsent"].as_u64().unwrap() >= 90, "{json}");
    assert!(stderr.contains("99%  >= "), "{stderr}");
}

#[test]
fn an_interval_log_adds_up_to_the_report_with_its_censored_requests() {
    let server = TinyServer::start(never_answer);
    let dir = common::TempDir::new("hlog-censored");
    let log = dir.path().join("run.hlog");
    let url = server.url("/");
    let json = load_json(&[&url, "-c", "3", "-d", "1s", "--hlog", log.to_str().unwrap()]);
    let run = sweetspot::load::output::hlog::read(&std::fs::read_to_string(&log).unwrap()).unwrap();
    // Nothing was answered: every sample of the log is a censored request, in its last
    // interval (tagged "censored"), and the log adds up to the report.
    assert_eq!(
        run.total().len(),
        json["latency_us"]["count"].as_u64().unwrap()
    );
    assert_eq!(run.total().len(), 3);
    let last = run.intervals.last().unwrap();
    assert_eq!(last.latency.len(), 3);
    assert!(last.start_s >= 1.0, "{}", last.start_s);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("Tag=censored"), "{text}");
}

#[test]
fn an_echo_target_that_speaks_http_gives_protocol_errors_not_replies() {
    let server = our_server(&[]);
    let mut config = config(&format!("tcp://127.0.0.1:{}", server.port), 2, closed(0.5));
    config.message_len = 64;
    let report = load::run(&config, None).unwrap();
    assert_eq!(report.requests, 0, "{report:?}");
    assert_eq!(report.rps, 0.0);
    assert!(report.errors.protocol > 0, "{:?}", report.errors);
    assert!(report.per_second.iter().all(|&r| r == 0.0));
}

/// Asserts `sweetspot ARGS` is refused at once: exit 2, one line on stderr.
fn refused_at_once(args: &[&str]) -> String {
    let (code, stdout, stderr, took) = sweetspot(args);
    assert_eq!(code, 2, "{args:?}: {stdout}{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(stdout.is_empty(), "{args:?}: {stdout}");
    assert!(took < Duration::from_secs(2), "{args:?} took {took:?}");
    stderr
}

#[test]
fn pinning_to_a_cpu_the_machine_lacks_is_refused() {
    let server = TinyServer::start(answer_hello);
    let url = server.url("/");
    let stderr = refused_at_once(&["load", &url, "-n", "5", "--pin", "1000"]);
    assert!(stderr.contains("--pin: no CPU 1000"), "{stderr}");
    let stderr = refused_at_once(&["load", &url, "-n", "5", "--pin", "0,1000"]);
    assert!(stderr.contains("--pin: no CPU 1000"), "{stderr}");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 0);
    let (code, _, stderr, _) = sweetspot(&["load", &url, "-n", "5", "--pin", "0", "-q"]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn argument_errors_of_every_subcommand_are_one_line() {
    for args in [
        vec![],
        vec!["bogus"],
        vec!["load"],
        vec!["load", "http://127.0.0.1:1/", "-c", "abc"],
        vec!["load", "http://127.0.0.1:1/", "--bogus"],
        vec!["load", "-d", "1s", "-n", "3", "http://127.0.0.1:1/"],
        vec!["serve"],
        vec!["serve", "--arch", "nope"],
        vec!["serve", "--arch", "epoll", "--port", "99999"],
        vec!["sweep", "--repetitions", "x"],
        vec!["report"],
        vec!["merge"],
        vec!["merge", "--bogus", "x.json"],
    ] {
        let stderr = refused_at_once(&args);
        assert!(stderr.starts_with("sweetspot: "), "{args:?}: {stderr}");
        assert!(stderr.contains("--help"), "{args:?}: {stderr}");
    }
    for args in [vec!["--help"], vec!["load", "--help"], vec!["sweep", "-h"]] {
        let (code, stdout, stderr, _) = sweetspot(&args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(stdout.lines().count() > 5, "{args:?}: {stdout}");
        assert!(stdout.contains("Usage: sweetspot"), "{args:?}: {stdout}");
    }
    let (code, stdout, _, _) = sweetspot(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout.trim(),
        format!("sweetspot {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn an_unwritable_json_path_is_refused_before_the_run() {
    let server = TinyServer::start(answer_hello);
    let url = server.url("/");
    let stderr = refused_at_once(&["load", &url, "-d", "3s", "--json", "/nonexistent/x"]);
    assert!(stderr.contains("--json /nonexistent/x"), "{stderr}");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 0, "the run started");
    // A writable path is left as it was found until the report is written.
    let dir = common::TempDir::new("load-json");
    let path = dir.path().join("report.json");
    let (code, _, stderr, _) = sweetspot(&[
        "load",
        &url,
        "-n",
        "5",
        "-q",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(json["requests"], 5);
}

#[test]
fn a_body_file_must_be_a_regular_file_of_at_most_1_mib() {
    let server = TinyServer::start(answer_hello);
    let url = server.url("/");
    let dir = common::TempDir::new("load-body");
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b'x'; (1 << 20) + 1]).unwrap();
    let fits = dir.path().join("fits");
    std::fs::write(&fits, vec![b'x'; 1 << 20]).unwrap();
    for (body, why) in [
        ("@/dev/zero".to_string(), "not a regular file"),
        (format!("@{}", dir.path().display()), "not a regular file"),
        (format!("@{}", big.display()), "larger than 1048576 bytes"),
        ("@/nonexistent/body".to_string(), "cannot read"),
    ] {
        let stderr = refused_at_once(&["load", &url, "-n", "1", "-m", "POST", "--body", &body]);
        assert!(stderr.contains(why), "{body}: {stderr}");
    }
    assert_eq!(server.accepted.load(Ordering::SeqCst), 0);
    let body = format!("@{}", fits.display());
    let (code, _, stderr, _) =
        sweetspot(&["load", &url, "-n", "1", "-m", "POST", "--body", &body, "-q"]);
    assert_eq!(code, 0, "{stderr}");
}

/// A connect that never completes is a connect error once the timeout passes: a listener
/// whose accept queue is full and never drained makes the kernel drop the SYNs. (Before
/// failing an old connect the generator looks whether it completed unseen, behind thousands
/// of others; that look must not take a pending one for open.)
#[test]
fn connects_to_a_full_backlog_are_connect_errors() {
    use socket2::{Domain, Socket, Type};
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let addr: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    listener.bind(&addr.into()).unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    // A backlog of 0 holds one connection: the generator's preflight connect (which must
    // succeed) takes it, and stays there unaccepted after it closes.
    let url = format!("http://{addr}/");
    let (_, stdout, stderr, _) = sweetspot(&[
        "load",
        &url,
        "-c",
        "4",
        "-t",
        "1",
        "-d",
        "1500ms",
        "--timeout",
        "500ms",
        "--json",
        "-",
        "-q",
    ]);
    let json: serde_json::Value = serde_json::from_str(&stdout).expect(&stderr);
    assert_eq!(json["requests"], 0, "{stdout}");
    let connect = json["errors"]["connect"].as_u64().unwrap();
    // Each of the 4 connections gives up at least once in 1.5 s at a 0.5 s timeout.
    assert!(connect >= 4, "{connect} connect errors: {stdout}");
}

/// `--urls`: a file of requests in `dir`, returned as a path string.
fn url_file(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The per-URL entries of a JSON report, by line number: (requests, status map, bad statuses).
fn url_rows(json: &serde_json::Value) -> Vec<(u64, u64, serde_json::Value, u64)> {
    json["urls"]
        .as_array()
        .expect("urls is an array")
        .iter()
        .map(|u| {
            (
                u["line"].as_u64().unwrap(),
                u["requests"].as_u64().unwrap(),
                u["status"].clone(),
                u["http_errors"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn urls_rotate_hello_fib_and_a_guestbook_post_with_exact_counts() {
    let _guard = timing_lock();
    let dir = common::TempDir::new("urls-mix");
    let store = format!("sqlite:{}", dir.path().join("gb.db").display());
    let server = Server::start(&["--arch", "epoll", "--store", &store]);
    std::fs::write(
        dir.path().join("remark.txt"),
        "guest-name=loader&guest-remarks=sent+by+--urls",
    )
    .unwrap();
    let file = url_file(
        dir.path(),
        "mix.txt",
        "# three requests\n/hello\n\nGET /fib?n=10\nPOST /guestbook @remark.txt H:Content-Type: application/x-www-form-urlencoded\n",
    );
    let target = format!("http://127.0.0.1:{}", server.port);
    let json = load_json(&["--urls", &file, "-c", "1", "-t", "1", "-n", "300", &target]);
    assert_eq!(json["requests"], 300);
    assert_eq!(json["status"]["200"], 200);
    assert_eq!(json["status"]["303"], 100);
    assert_eq!(
        url_rows(&json),
        vec![
            (2, 100, serde_json::json!({"200": 100}), 0),
            (4, 100, serde_json::json!({"200": 100}), 0),
            (5, 100, serde_json::json!({"303": 100}), 0),
        ]
    );
    let urls = json["urls"].as_array().unwrap();
    assert_eq!(urls[0]["method"], "GET");
    assert_eq!(urls[1]["url"], "/fib?n=10");
    assert_eq!(urls[2]["method"], "POST");
    for u in urls {
        assert_eq!(u["requests_sent"], 100, "{u}");
        assert_eq!(u["latency_us"]["count"], 100, "{u}");
        assert_eq!(u["errors"]["timeout"], 0, "{u}");
        assert!(u["latency_us"]["p50"].as_f64().unwrap() > 0.0, "{u}");
        assert!(u["histogram"].is_string(), "{u}");
    }
    // Every POST carried its body: exactly 100 remarks were stored (5 full pages of 20).
    let page = common::get(server.port, "/guestbook").text();
    assert!(page.contains("page 1 of 5"), "{page}");
    assert!(page.contains("sent by --urls"), "{page}");
    let last = common::get(server.port, "/guestbook?page=5").text();
    assert_eq!(last.matches("<li><strong>loader</strong>").count(), 20);
}

#[test]
fn urls_without_target_take_the_host_from_an_absolute_line_and_pipeline_the_rotation() {
    let server = our_server(&[]);
    let dir = common::TempDir::new("urls-abs");
    let file = url_file(
        dir.path(),
        "abs.txt",
        &format!(
            "/hello\nhttp://127.0.0.1:{}/fib?n=5\n/sleep?ms=0\n/hello?second\n",
            server.port
        ),
    );
    let json = load_json(&[
        "--urls",
        &file,
        "-c",
        "1",
        "-t",
        "1",
        "-n",
        "403",
        "--pipeline",
        "3",
    ]);
    assert_eq!(json["requests"], 403);
    let counts: Vec<u64> = url_rows(&json).iter().map(|r| r.1).collect();
    assert_eq!(counts, vec![101, 101, 101, 100]);
}

#[test]
fn a_404_line_is_counted_as_bad_statuses_under_its_own_url() {
    let server = our_server(&[]);
    let dir = common::TempDir::new("urls-404");
    let file = url_file(dir.path(), "u.txt", "/hello\n/no/such/page\n");
    let target = format!("http://127.0.0.1:{}", server.port);
    let (code, stdout, stderr, _) = sweetspot(&[
        "load", "--urls", &file, "-c", "1", "-n", "200", "--json", "-", &target,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        url_rows(&json),
        vec![
            (1, 100, serde_json::json!({"200": 100}), 0),
            (2, 100, serde_json::json!({"404": 100}), 100),
        ]
    );
    assert_eq!(json["status"], serde_json::json!({"200": 100, "404": 100}));
    assert_eq!(json["errors"]["read"], 0);
    // The human table names both lines, the 404 one with its 100 bad statuses.
    assert!(stderr.contains("Per URL"), "{stderr}");
    let row = stderr
        .lines()
        .find(|l| l.contains("2: GET /no/such/page"))
        .unwrap_or_else(|| panic!("no row for line 2 in {stderr}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[3..6], &["100", "100", "0"], "{row}");
}

#[test]
fn urls_over_many_connections_share_the_lines_within_one_request_per_connection() {
    let server = our_server(&[]);
    let dir = common::TempDir::new("urls-many");
    let file = url_file(
        dir.path(),
        "u.txt",
        "/hello\n/hello?b\n/hello?c\n/fib?n=3\n",
    );
    let target = format!("http://127.0.0.1:{}", server.port);
    let json = load_json(&["--urls", &file, "-c", "8", "-t", "2", "-n", "2000", &target]);
    assert_eq!(json["requests"], 2000);
    let rows = url_rows(&json);
    let total: u64 = rows.iter().map(|r| r.1).sum();
    assert_eq!(total, 2000);
    // Each connection sends every line floor(k/4) or ceil(k/4) times: each line's total is
    // within one request per connection of 500.
    for (line, requests, _, _) in &rows {
        assert!((492..=508).contains(requests), "line {line}: {requests}");
    }
}

#[test]
fn a_malformed_urls_file_exits_2_naming_the_line() {
    let dir = common::TempDir::new("urls-bad");
    let target = "http://127.0.0.1:1";
    for (text, expected) in [
        (
            "/hello\n# fine\nG@T /x\n",
            "bad.txt:3: invalid method \"G@T\"",
        ),
        (
            "/hello\nGET http://127.0.0.1:2/x\n",
            "bad.txt:2: http://127.0.0.1:2/x is on 127.0.0.1:2, but this run goes to 127.0.0.1:1 (from TARGET): one host:port per run",
        ),
        ("POST /g @nothere.txt\n", "bad.txt:1: @nothere.txt: cannot read"),
    ] {
        let file = url_file(dir.path(), "bad.txt", text);
        let (code, stdout, stderr, took) =
            sweetspot(&["load", "--urls", &file, "-n", "10", target]);
        assert_eq!(code, 2, "{text:?}: {stdout}{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("sweetspot: {}", file.replace("bad.txt", expected))),
            "{stderr}"
        );
        assert!(took < Duration::from_secs(5));
    }
    for args in [
        vec!["load", "--urls", "/no/such/file.txt", target],
        vec!["load", "--urls", "/no/such/file.txt"],
    ] {
        let (code, _, stderr, _) = sweetspot(&args);
        assert_eq!(code, 2, "{stderr}");
        assert_eq!(
            stderr.trim_end(),
            "sweetspot: --urls /no/such/file.txt: cannot read: No such file or directory (os error 2)"
        );
    }
    let file = url_file(dir.path(), "ok.txt", "/hello\n");
    for (args, expected) in [
        (
            vec!["load", "--urls", &file, "-m", "POST", target],
            "sweetspot: -m and --body do not apply with --urls (each line gives its own)",
        ),
        (
            vec!["load", "--urls", &file],
            "sweetspot: --urls FILE: every line is a path: give the host as TARGET (http://HOST:PORT) or write one absolute URL",
        ),
    ] {
        let (code, _, stderr, _) = sweetspot(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end(), expected.replace("FILE", &file), "{args:?}");
    }
    // Without TARGET or --urls clap refuses, as for any missing argument.
    let (code, _, stderr, _) = sweetspot(&["load", "-n", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("<TARGET>") && stderr.contains("--help"),
        "{stderr}"
    );
}

#[test]
fn urls_count_timeouts_under_the_line_that_timed_out() {
    let server = our_server(&[]);
    let dir = common::TempDir::new("urls-timeout");
    let file = url_file(dir.path(), "u.txt", "/hello\n/sleep?ms=400\n");
    let target = format!("http://127.0.0.1:{}", server.port);
    let json = load_json(&[
        "--urls",
        &file,
        "-c",
        "1",
        "-n",
        "20",
        "--timeout",
        "100ms",
        &target,
    ]);
    assert_eq!(json["requests"], 10);
    assert_eq!(json["errors"]["timeout"], 10);
    let urls = json["urls"].as_array().unwrap();
    assert_eq!(urls[0]["requests"], 10);
    assert_eq!(urls[0]["errors"]["timeout"], 0);
    assert!(
        urls[0]["latency_us"].get("lower_bound").is_none(),
        "{}",
        urls[0]
    );
    assert_eq!(urls[1]["requests"], 0);
    assert_eq!(urls[1]["requests_sent"], 10);
    assert_eq!(urls[1]["errors"]["timeout"], 10);
    // The line's timed-out requests count at the timeout, as lower bounds (nothing answered
    // on it gives an interval to fill the held-back requests with).
    assert_eq!(urls[1]["latency_us"]["count"], 10);
    assert!(f(&urls[1]["latency_us"]["p50"]) >= 100_000.0, "{}", urls[1]);
    assert!(urls[1]["latency_us"]["lower_bound"]
        .as_array()
        .unwrap()
        .contains(&"p50".into()));
}

#[test]
fn a_timeout_cannot_hide_a_stuck_connection() {
    let _guard = timing_lock();
    // The iterative server answers one of 8 keep-alive connections for the whole run; the
    // other 7 wait until they time out (at 1 s), are replaced, and wait again.
    let server = Server::start(&["--arch", "iterative"]);
    let dir = common::TempDir::new("timeout-stuck");
    let url = server.url("/hello");
    let segment = |i: &str| dir.path().join(format!("seg{i}.json"));
    let (code, _, stderr, _) = sweetspot(&[
        "load",
        &url,
        "-c",
        "8",
        "-d",
        "2s",
        "--timeout",
        "1s",
        "--interval",
        "500ms",
        "--json",
        segment("0").to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(segment("0")).unwrap()).unwrap();
    assert!(
        json["errors"]["timeout"].as_u64().unwrap() >= 7,
        "{}",
        json["errors"]
    );
    let latency = &json["latency_us"];
    let flagged = |l: &serde_json::Value, key: &str| {
        l["lower_bound"]
            .as_array()
            .is_some_and(|a| a.contains(&key.into()))
    };
    // Each timed-out request counts at the timeout with the requests its connection held
    // back: p99 is a lower bound near the timeout, not the healthy connection's microseconds.
    assert!(
        flagged(latency, "p99") && flagged(latency, "p50"),
        "{latency}"
    );
    assert!(f(&latency["p99"]) >= 950_000.0, "{latency}");
    assert!(f(&json["latency_answered_us"]["p99"]) < 100_000.0, "{json}");
    // The time series' tail holds the same censored requests.
    let series = json["series"].as_array().unwrap();
    assert!(
        series.last().unwrap()["censored"].as_u64().unwrap() > 0,
        "{series:?}"
    );
    // The same load as two segments of a distributed run: merge keeps the figure and the flag.
    let start_at = format!("{:.3}", common::unix_now() + 1.5);
    let children: Vec<std::process::Child> = ["0/2", "1/2"]
        .iter()
        .zip(["1", "2"])
        .map(|(part, i)| {
            std::process::Command::new(env!("CARGO_BIN_EXE_sweetspot"))
                .args(["load", &url, "-c", "8", "-d", "2s", "--timeout", "1s"])
                .args(["--segment", part, "--start-at", &start_at, "-q"])
                .args(["--json", segment(i).to_str().unwrap()])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let (code, stdout, stderr, _) = sweetspot(&[
        "merge",
        segment("1").to_str().unwrap(),
        segment("2").to_str().unwrap(),
        "--json",
        "-",
        "-q",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let merged: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        merged["errors"]["timeout"].as_u64().unwrap() >= 7,
        "{}",
        merged["errors"]
    );
    assert!(
        flagged(&merged["latency_us"], "p99"),
        "{}",
        merged["latency_us"]
    );
    assert!(
        f(&merged["latency_us"]["p99"]) >= 950_000.0,
        "{}",
        merged["latency_us"]
    );
}

#[test]
fn urls_in_rate_mode_add_up_to_the_run() {
    let _guard = timing_lock();
    let server = our_server(&[]);
    let dir = common::TempDir::new("urls-rate");
    let file = url_file(dir.path(), "u.txt", "/hello\n/fib?n=5\n/hello?x\n");
    let target = format!("http://127.0.0.1:{}", server.port);
    let json = load_json(&["--urls", &file, "-c", "6", "-R", "600", "-d", "1s", &target]);
    let urls = json["urls"].as_array().unwrap();
    let sum = |key: &str| urls.iter().map(|u| u[key].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("requests"), json["requests"].as_u64().unwrap());
    assert_eq!(
        sum("requests_sent"),
        json["requests_sent"].as_u64().unwrap()
    );
    assert_eq!(sum("unanswered"), json["unanswered"].as_u64().unwrap());
    assert_eq!(sum("drained"), json["drained"].as_u64().unwrap());
    // Six connections at 100/s each over three lines: each line within 6 of the others.
    let sent: Vec<u64> = urls
        .iter()
        .map(|u| u["requests_sent"].as_u64().unwrap())
        .collect();
    let (lo, hi) = (sent.iter().min().unwrap(), sent.iter().max().unwrap());
    assert!(hi - lo <= 6, "{sent:?}");
    assert!(*lo >= 150, "{sent:?}");
}

/// Runs `sweetspot load ARGS... --json - -q` and returns the report as JSON.
fn load_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["load"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "-", "-q"]);
    let (code, stdout, stderr, _) = sweetspot(&all);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    serde_json::from_str(&stdout).expect("stdout is only JSON")
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn a_two_step_plan_delivers_each_steps_rate() {
    let _timing = timing_lock();
    let server = our_server(&[]);
    let url = server.url("/hello");
    let json = load_json(&[&url, "-c", "4", "-t", "1", "-R", "200@1s,400@1s"]);
    assert_eq!(json["plan"], "200@1s,400@1s");
    assert_eq!(json["mode"], "rate");
    // The whole run: 600 requests due over 2 s, a mean of 300/s.
    assert_eq!(f(&json["target_rate"]), 300.0);
    assert_eq!(json["requests_sent"], 600, "{json}");
    assert_eq!(json["rate_held"], true);
    let steps = json["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2, "{json}");
    for (step, rate) in steps.iter().zip([200.0, 400.0]) {
        assert_eq!(f(&step["target_rps"]), rate, "{step}");
        assert_eq!(f(&step["scheduled"]), rate, "{step}");
        // Responses that arrived in the step's second: its rate, give or take the few whose
        // answer crossed a boundary.
        let requests = f(&step["requests"]);
        assert!((requests - rate).abs() <= 4.0, "{step}");
        assert_eq!(f(&step["rps"]), requests);
        assert_eq!(step["errors"]["timeout"], 0);
        assert_eq!(step["held"], true, "{step}");
        let latency = &step["latency_us"];
        assert_eq!(
            f(&latency["count"]),
            rate,
            "every request due in the step answered"
        );
        assert!(latency.get("lower_bound").is_none(), "{step}");
        assert!(f(&latency["p99"]) < 20_000.0, "{step}");
    }
    assert_eq!((f(&steps[0]["start_s"]), f(&steps[0]["end_s"])), (0.0, 1.0));
    assert_eq!((f(&steps[1]["start_s"]), f(&steps[1]["end_s"])), (1.0, 2.0));
    let total: f64 = steps.iter().map(|s| f(&s["requests"])).sum();
    assert_eq!(total, f(&json["requests"]), "the rows add up to the run");
}

#[test]
fn a_step_past_capacity_is_not_held_and_its_latency_from_intended_times_grows() {
    let _timing = timing_lock();
    let server = our_server(&[]);
    // 4 connections x 50 ms: 80 responses/s at most. 40/s holds; 160/s cannot.
    let url = server.url("/sleep?ms=50");
    let json = load_json(&[&url, "-c", "4", "-t", "1", "-R", "40@1s,160@1s"]);
    let steps = json["steps"].as_array().expect("steps");
    let (calm, over) = (&steps[0], &steps[1]);
    assert_eq!(calm["held"], true, "{calm}");
    assert!((f(&calm["requests"]) - 40.0).abs() <= 3.0, "{calm}");
    let calm_p50 = f(&calm["latency_us"]["p50"]);
    assert!((50_000.0..70_000.0).contains(&calm_p50), "{calm}");
    assert_eq!(over["held"], false, "{over}");
    let achieved = f(&over["rps"]);
    assert!(
        (60.0..=90.0).contains(&achieved),
        "achieved {achieved}/s: {over}"
    );
    // Each connection is due every 25 ms and served every 50 ms: by the end of the step it is
    // about 500 ms behind its schedule, and requests due late in it were never sent at all.
    let over_latency = &over["latency_us"];
    assert!(f(&over_latency["p50"]) > 4.0 * calm_p50, "{over}");
    assert!(f(&over_latency["p99"]) >= 400_000.0, "{over}");
    assert!(
        over_latency["lower_bound"]
            .as_array()
            .is_some_and(|keys| keys.iter().any(|k| k == "p99")),
        "{over}"
    );
    assert!(f(&json["unsent"]) > 0.0, "{json}");
    // What a naive tool shows: from the actual send times the second step looks like the first.
    let uncorrected_p50 = f(&json["latency_uncorrected_us"]["p50"]);
    assert!(uncorrected_p50 < 70_000.0, "{json}");
}

#[test]
fn a_ramp_reports_ten_slices_and_shows_the_knee() {
    let _timing = timing_lock();
    let server = our_server(&[]);
    // 100/s rising to 1000/s over 4 s against 4 connections x 10 ms, 400 responses/s at most:
    // the knee is near 1.33 s, in the fourth slice.
    let url = server.url("/sleep?ms=10");
    let json = load_json(&[&url, "-c", "4", "-t", "1", "-R", "100..1000", "-d", "4s"]);
    assert_eq!(json["plan"], "100..1000@4s");
    let steps = json["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 10, "{json}");
    let scheduled: Vec<f64> = steps.iter().map(|s| f(&s["scheduled"])).collect();
    // Due by t: N(t) = 100 t + 112.5 t^2; a slice holds the requests due between its ends.
    assert_eq!(
        scheduled,
        [58.0, 94.0, 130.0, 166.0, 202.0, 238.0, 274.0, 310.0, 346.0, 382.0]
    );
    assert_eq!(f(&steps[0]["target_from_rps"]), 100.0);
    assert_eq!(f(&steps[9]["target_to_rps"]), 1000.0);
    assert_eq!(steps[0]["held"], true, "{}", steps[0]);
    assert_eq!(steps[1]["held"], true, "{}", steps[1]);
    for s in &steps[6..] {
        assert_eq!(s["held"], false, "{s}");
        assert!(f(&s["rps"]) <= 420.0, "{s}");
    }
    // Past the knee every connection falls further behind its schedule: the latency of the
    // requests due in a slice, from their intended times, grows slice after slice.
    let p50 = |i: usize| f(&steps[i]["latency_us"]["p50"]);
    assert!((10_000.0..20_000.0).contains(&p50(0)), "{}", steps[0]);
    assert!(p50(2) < p50(5) && p50(5) < p50(7), "{json}");
    assert!(p50(7) > 20.0 * p50(0), "{json}");
}

#[test]
fn the_human_summary_has_a_row_per_step() {
    let server = TinyServer::start(answer_hello);
    let url = server.url("/");
    let (code, stdout, stderr, _) =
        sweetspot(&["load", &url, "-c", "2", "-R", "50@500ms,100@500ms"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("test at 50@0.5s,100@0.5s"), "{stdout}");
    let header = stdout
        .lines()
        .position(|l| l.contains("step") && l.contains("achieved/s") && l.contains("held"))
        .unwrap_or_else(|| panic!("no step table: {stdout}"));
    let rows: Vec<&str> = stdout.lines().skip(header + 1).take(2).collect();
    assert!(
        rows[0].trim_start().starts_with("1 ") && rows[0].contains("0-0.5s"),
        "{stdout}"
    );
    assert!(
        rows[1].trim_start().starts_with("2 ") && rows[1].contains("0.5-1s"),
        "{stdout}"
    );
    assert!(rows.iter().all(|r| r.ends_with("yes")), "{stdout}");
    // A constant rate has no step table.
    let (code, stdout, _, _) = sweetspot(&["load", &url, "-c", "2", "-R", "50", "-d", "300ms"]);
    assert_eq!(code, 0);
    assert!(!stdout.contains("achieved/s"), "{stdout}");
}

#[test]
fn bad_plans_exit_2_naming_what_is_wrong() {
    for (plan, extra, expected) in [
        ("0", None, "above 0"),
        ("5..", None, "both ends"),
        ("1000@", None, "needs a duration after @"),
        ("1000@0s", None, "at least 10ms"),
        ("1000..0", None, "above 0"),
        ("0..1000", None, "above 0"),
        ("1e12", None, "at most 100000000"),
        ("1000@10s,", None, "step 2 is empty"),
        (
            "1000@10s,2000@10s",
            Some("5s"),
            "the steps last 20s but -d says 5s",
        ),
        ("1000@8d", None, "unknown unit"),
    ] {
        let mut args = vec!["load", "http://127.0.0.1:1/", "-R", plan];
        if let Some(d) = extra {
            args.extend_from_slice(&["-d", d]);
        }
        let (code, _, stderr, _) = sweetspot(&args);
        assert_eq!(code, 2, "{plan}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{plan}: {stderr}");
        assert!(
            stderr.contains("-R") && stderr.contains(expected),
            "{plan}: {stderr}"
        );
    }
}

#[test]
fn the_uring_engine_says_so_in_the_json_and_the_summary() {
    let server = TinyServer::start(answer_hello);
    let url = server.url("/");
    let (code, stdout, stderr, _) = sweetspot(&[
        "load", &url, "-c", "2", "-n", "50", "--engine", "uring", "--json", "-",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is only JSON");
    assert_eq!(json["engine"], "uring");
    assert_eq!(json["requests"], 50);
    // Two connections never gather; every response read was timestamped.
    assert_eq!(json["uring"]["gather"], 0);
    assert_eq!(json["uring"]["window_us"], 100);
    let held = json["uring"]["held"].as_u64().unwrap();
    assert!((50..=100).contains(&held), "{held}");
    assert!(stderr.contains("2 connections, uring engine"), "{stderr}");
}

/// Where io_uring cannot be set up (a seccomp filter failing `io_uring_setup`, as Docker's
/// default profile does), `load --engine uring` is one line and exit 2, before any load.
#[test]
fn the_uring_engine_where_io_uring_is_denied_is_one_line_and_exit_2() {
    let server = TinyServer::start(answer_hello);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_sweetspot"));
    command.args(["load", &server.url("/"), "-n", "10", "--engine", "uring"]);
    sweetspot::sys::uring::deny_io_uring_before_exec(&mut command);
    let out = command.output().expect("spawning sweetspot");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("io_uring is unavailable"), "{stderr}");
    // Only the pre-flight check connected, if anything: no load was sent.
    assert!(server.accepted.load(Ordering::SeqCst) <= 1);
}

/// The uring driver waits a while (`--gather`, here 2 ms) to gather a batch of responses when
/// many connections are busy. Here only one of 40 connections is ever answered, so no batch
/// fills and every response waits out the window before it is handled; its latency must still
/// end when it reached the socket (the kernel's timestamp), not when the driver got to it.
#[test]
fn the_uring_engine_times_responses_by_arrival_not_by_its_batching_wait() {
    let _timing = timing_lock();
    let first = std::sync::Arc::new(AtomicBool::new(true));
    let server = TinyServer::start(move |stream, stop| {
        // The first connection to send a request is answered, the others never are (the
        // pre-flight check sends none).
        if matches!(stream.peek(&mut [0u8; 1]), Ok(n) if n > 0)
            && first.swap(false, Ordering::SeqCst)
        {
            answer_hello(stream, stop)
        } else {
            never_answer(stream, stop)
        }
    });
    let mut config = config_on(Engine::Uring, &server.url("/"), 40, closed(1.0));
    config.threads = 1;
    config.timeout = Duration::from_secs(5);
    config.gather = Duration::from_millis(2);
    let report = load::run(&config, None).unwrap();
    assert!(report.requests > 100, "{report:?}");
    assert_eq!(report.unanswered, 39, "{report:?}");
    // No batch fills, so each response waits out the window before it is handled (and its
    // connection's next request goes out): the report says so, and the run is slow for it.
    let uring = report.uring.expect("the uring engine reports its waits");
    assert_eq!((uring.gather, uring.window_us), (38, 2000), "{uring:?}");
    assert!(uring.held >= report.requests, "{uring:?}");
    assert!(uring.hold_mean_us >= 1000.0, "{uring:?}");
    assert!(report.rps < 600.0, "{} req/s", report.rps);
    // The latency is the server's, not the wait's: a tiny server on loopback answers in far
    // less than a millisecond. Timed when handled, every response would take 2 ms or more.
    let answered = report.latency_answered_us;
    assert!(
        answered.p50 < 1000.0 && answered.mean < 1000.0,
        "{answered:?}: timed after the gathering wait"
    );
}

/// A closed system with a known answer: N connections, each request 10 us of CPU and 200 ms
/// of wait a timer of the event loop takes (`reactors`), so throughput is N / (C + W). With the
/// window opened once every connection was answered (`settle`) and counted in whole cycles
/// (`cycle_rps`), the measurement is within 3% of it at 16, 256 and 1,000 connections; counted
/// over the window's length instead, a 1 s window that ends mid-cycle misses part of one.
fn a_closed_system_settles_and_counts_whole_cycles(engine: Engine) {
    let _timing = timing_lock();
    let server = Server::start(&["--arch", "reactors"]);
    for n in [16, 256, 1000] {
        let mut config = config_on(
            engine,
            &server.url("/work?cpu_us=10&wait_ms=200"),
            n,
            closed(1.1),
        );
        config.settle = Some(Duration::from_secs(3));
        let report = load::run(&config, None).unwrap();
        let expected = n as f64 / 0.20001;
        let cycles = report.cycle_rps.unwrap();
        assert!(
            (cycles / expected - 1.0).abs() <= 0.03,
            "{n} connections: {cycles:.0} req/s in whole cycles, {expected:.0} expected"
        );
        // Five cycles of every connection in the window, none of the connects or first
        // requests; every response read is counted somewhere.
        assert!(
            report.requests >= 4 * n as u64 && report.requests <= 6 * n as u64,
            "{n}: {} requests",
            report.requests
        );
        assert!(
            (report.duration_s - 1.1).abs() < 0.05,
            "{}",
            report.duration_s
        );
        assert!(report.responses_read >= report.requests + report.drained + n as u64);
        assert_eq!(report.errors.total(), 0, "{:?}", report.errors);
    }
    // The window that counts partial cycles undercounts this one: 1.1 s holds five whole
    // cycles of 200 ms and half of a sixth.
    let mut config = config_on(
        engine,
        &server.url("/work?cpu_us=10&wait_ms=200"),
        16,
        closed(1.1),
    );
    config.settle = Some(Duration::from_secs(3));
    let report = load::run(&config, None).unwrap();
    assert!(
        report.rps < 0.95 * report.cycle_rps.unwrap(),
        "{} {:?}",
        report.rps,
        report.cycle_rps
    );
}
