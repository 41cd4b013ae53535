//! What an HTTP/2 run counts beside the requests (see [`crate::load::h2`]): the streams each
//! connection ran, the server's cap on them (`SETTINGS_MAX_CONCURRENT_STREAMS`), how often and
//! how long a request waited for a stream under that cap (the client's own queue, inside its
//! latency), and the GOAWAYs and stream resets the server sent. Pure counts, merged by adding.

use std::time::Duration;

use super::hold::Hold;

/// One thread's (or, merged, one run's) HTTP/2 counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct H2Counts {
    /// HTTP/2 connections opened (a reconnect after a GOAWAY is another).
    pub connections: u64,
    /// The lowest `MAX_CONCURRENT_STREAMS` a server announced on a connection (`None`: no
    /// connection heard one, or every one left it unlimited).
    pub server_max_streams: Option<u64>,
    /// Requests that waited for a stream because the server's cap was full: how many, their
    /// waits summed, and the longest.
    pub stream_waits: Hold,
    /// Connections the server ended with GOAWAY.
    pub goaways: u64,
    /// Requests whose stream the server reset (RST_STREAM), counted as read errors too.
    pub resets: u64,
    /// `--grpc`: the calls of the window by their `grpc-status`, codes 0 to 16 and, last,
    /// any other.
    pub grpc_status: [u64; GRPC_CODES + 1],
}

/// gRPC's defined status codes (0 to 16).
pub const GRPC_CODES: usize = 17;

impl H2Counts {
    /// One wait for a stream under the server's cap.
    pub fn waited(&mut self, wait: Duration) {
        self.stream_waits.record(wait);
    }

    /// A connection's server announced `max` concurrent streams (`usize::MAX`: no limit).
    pub fn server_cap(&mut self, max: usize) {
        if max != usize::MAX {
            let max = max as u64;
            self.server_max_streams = Some(self.server_max_streams.map_or(max, |m| m.min(max)));
        }
    }

    /// A call of the window ended with `code`.
    pub fn grpc(&mut self, code: u32) {
        self.grpc_status[(code as usize).min(GRPC_CODES)] += 1;
    }

    pub fn merge(&mut self, other: &H2Counts) {
        for (mine, theirs) in self.grpc_status.iter_mut().zip(other.grpc_status) {
            *mine += theirs;
        }
        self.connections += other.connections;
        if let Some(max) = other.server_max_streams {
            self.server_cap(max as usize);
        }
        self.stream_waits.merge(&other.stream_waits);
        self.goaways += other.goaways;
        self.resets += other.resets;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_adds_counts_and_keeps_the_lowest_cap_and_longest_wait() {
        let mut a = H2Counts {
            connections: 2,
            ..H2Counts::default()
        };
        a.server_cap(usize::MAX);
        assert_eq!(a.server_max_streams, None);
        a.server_cap(100);
        a.waited(Duration::from_micros(300));
        let mut b = H2Counts {
            goaways: 1,
            resets: 3,
            ..H2Counts::default()
        };
        b.server_cap(5);
        b.waited(Duration::from_micros(100));
        b.waited(Duration::from_micros(500));
        a.merge(&b);
        assert_eq!(a.connections, 2);
        assert_eq!(a.server_max_streams, Some(5));
        assert_eq!(a.stream_waits.count, 3);
        assert_eq!(a.stream_waits.max, Duration::from_micros(500));
        assert_eq!(a.stream_waits.mean_us(), 300.0);
        assert_eq!((a.goaways, a.resets), (1, 3));
        let mut calls = H2Counts::default();
        calls.grpc(0);
        calls.grpc(0);
        calls.grpc(14);
        calls.grpc(99);
        a.merge(&calls);
        a.merge(&calls);
        assert_eq!(a.grpc_status[0], 4);
        assert_eq!(a.grpc_status[14], 2);
        assert_eq!(a.grpc_status[GRPC_CODES], 2);
        assert_eq!(H2Counts::default().stream_waits.mean_us(), 0.0);
    }
}
