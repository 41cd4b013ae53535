//! One client connection and everything it needs between events: its [`Transport`], where it
//! stands ([`Phase`]), the part of its batch still to write, its requests in flight, its
//! response framer and its part of the send policy ([`Schedule`]). Sized once, before the run.
//!
//! [`Connection::frame`] turns the bytes of one read into responses: framed in place in the
//! worker's read buffer, only a response head split across reads is copied.

use std::collections::VecDeque;
use std::time::Instant;

use mio::Token;

use crate::load::engine::framing::ResponseFramer;
use crate::load::engine::policy::Schedule;
use crate::load::engine::recorder::{InFlight, Recorder};
use crate::load::engine::settle::CycleSpan;
use crate::load::engine::transport::Transport;
use crate::load::error::FailureKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No socket; open one at `retry_at`.
    Disconnected { retry_at: Instant },
    /// A non-blocking connect (or handshake) in progress since `since`.
    Connecting { since: Instant },
    /// Connected: requests may be sent.
    Open,
    /// Nothing more to do (count mode ran out of tickets).
    Finished,
}

/// One client connection.
pub struct Connection {
    pub stream: Option<Transport>,
    /// Bumped whenever the socket is replaced, so events for an old socket are ignored.
    pub generation: u32,
    pub phase: Phase,
    /// The line of the [`RequestSource`](crate::load::engine::source::RequestSource) this connection sends
    /// next (round robin, kept across reconnects).
    pub request: usize,
    /// The part of the current batch still to write: `source.bytes()[write_from..write_to]`.
    pub write_from: usize,
    pub write_to: usize,
    pub in_flight: VecDeque<InFlight>,
    pub framer: ResponseFramer,
    /// Bytes of a response head that arrived split across reads (empty almost always).
    pub partial_head: Vec<u8>,
    /// The connection's part of the send policy.
    pub schedule: Schedule,
    /// In the worker's send queue.
    pub send_queued: bool,
    /// Responses read on this connection (its sockets so far), counted or not.
    pub answered: u64,
    /// Their bytes, head and body: the size of a response, where the bytes read also hold
    /// the part of one still arriving when the run ended.
    pub answered_bytes: u64,
    /// Bytes of the response now arriving, framed so far.
    unfinished: u64,
    /// A settling run: this connection passed the barrier.
    pub arrived: bool,
    /// The responses of the measured window, for throughput in whole cycles.
    pub cycles: CycleSpan,
    /// Since when the connection has had room for its next request: when it opened or its
    /// last response arrived (the kernel's stamp where there is one). A request due before
    /// then waited for the server ([`InFlight::new`]).
    pub room_since: Instant,
}

/// What framing one read's bytes produced.
pub struct Framed {
    /// The server said it closes (or a close-delimited body ended).
    pub close: bool,
}

impl Connection {
    pub fn new(
        framer: ResponseFramer,
        pipeline: usize,
        schedule: Schedule,
        start: Instant,
        first_line: usize,
    ) -> Connection {
        Connection {
            stream: None,
            generation: 0,
            phase: Phase::Disconnected { retry_at: start },
            request: first_line,
            write_from: 0,
            write_to: 0,
            in_flight: VecDeque::with_capacity(pipeline),
            framer,
            partial_head: Vec::new(),
            schedule,
            send_queued: false,
            answered: 0,
            answered_bytes: 0,
            unfinished: 0,
            arrived: false,
            cycles: CycleSpan::default(),
            room_since: start,
        }
    }

    /// Part of the current batch is still to be written.
    #[inline]
    pub fn writing(&self) -> bool {
        self.write_from < self.write_to
    }

    /// Drops the socket and forgets everything in flight (the caller has counted it).
    pub fn reset(&mut self, now: Instant) {
        // Closing the descriptor removes it from the epoll set; no deregister call needed.
        self.stream = None;
        self.generation = self.generation.wrapping_add(1);
        self.in_flight.clear();
        self.framer.reset();
        self.partial_head.clear();
        self.unfinished = 0;
        self.write_from = 0;
        self.write_to = 0;
        self.phase = Phase::Disconnected { retry_at: now };
    }

    /// Frames `fresh` (one read's bytes, read at `now`) and records every response it
    /// completes. A framing error or a response nobody asked for is a protocol failure.
    pub fn frame(
        &mut self,
        fresh: &[u8],
        recorder: &mut Recorder,
        now: Instant,
    ) -> Result<Framed, FailureKind> {
        let n = fresh.len();
        let buffered = !self.partial_head.is_empty();
        if buffered {
            self.partial_head.extend_from_slice(fresh);
        }
        let data: &[u8] = if buffered { &self.partial_head } else { fresh };
        let mut offset = 0;
        let mut close = false;
        while offset < data.len() {
            let fed = self
                .framer
                .feed(&data[offset..])
                .map_err(|_| FailureKind::Protocol)?;
            offset += fed.consumed;
            self.unfinished += fed.consumed as u64;
            match fed.complete {
                Some(info) => {
                    let request = self.in_flight.pop_front().ok_or(FailureKind::Protocol)?;
                    self.answered += 1;
                    self.answered_bytes += std::mem::take(&mut self.unfinished);
                    self.room_since = now;
                    if recorder.response(request, info.status, now).of_window() {
                        self.cycles.add(request.sent, now);
                    }
                    if info.close {
                        close = true;
                        break;
                    }
                }
                None if fed.consumed == 0 => break,
                None => {}
            }
        }
        if buffered {
            self.partial_head.drain(..offset);
        } else if offset < n && !close {
            self.partial_head.extend_from_slice(&fresh[offset..]);
        }
        Ok(Framed { close })
    }

    /// The server closed the stream: that ends a close-delimited response (recorded here).
    pub fn frame_eof(&mut self, recorder: &mut Recorder, now: Instant) {
        if let Some(info) = self.framer.on_eof() {
            if let Some(request) = self.in_flight.pop_front() {
                self.answered += 1;
                self.answered_bytes += std::mem::take(&mut self.unfinished);
                if recorder.response(request, info.status, now).of_window() {
                    self.cycles.add(request.sent, now);
                }
            }
        }
    }
}

/// The token of the worker's timer; connection tokens never reach it (slots are below 2^32-1).
pub const TIMER_TOKEN: Token = Token(usize::MAX);

/// The poll token of connection `slot` in its `generation`.
pub fn token_for(slot: usize, generation: u32) -> Token {
    Token(slot | (generation as usize) << 32)
}

/// The slot and generation of a token.
pub fn slot_of(token: Token) -> (usize, u32) {
    (token.0 & 0xffff_ffff, (token.0 >> 32) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::engine::framing::HttpResponseFramer;
    use std::time::Duration;

    fn connection() -> Connection {
        let now = Instant::now();
        let schedule = Schedule {
            holds_ticket: false,
            next_intended: now,
            connection: 0,
            next: 0,
        };
        Connection::new(
            ResponseFramer::Http(HttpResponseFramer::new("GET")),
            4,
            schedule,
            now,
            0,
        )
    }

    #[test]
    fn tokens_carry_slot_and_generation() {
        let token = token_for(12345, 7);
        assert_eq!(slot_of(token), (12345, 7));
        assert_ne!(token, TIMER_TOKEN);
    }

    #[test]
    fn responses_split_across_reads_are_framed_and_recorded() {
        let now = Instant::now();
        let mut recorder = Recorder::new(now, Duration::from_secs(1), false);
        let mut conn = connection();
        for _ in 0..2 {
            conn.in_flight.push_back(InFlight::new(now, now, now, 0));
        }
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        let (a, b) = wire.split_at(50);
        assert!(!conn.frame(a, &mut recorder, now).unwrap().close);
        assert_eq!(conn.in_flight.len(), 1);
        assert!(!conn.partial_head.is_empty());
        assert!(!conn.frame(b, &mut recorder, now).unwrap().close);
        assert!(conn.in_flight.is_empty() && conn.partial_head.is_empty());
        assert_eq!((conn.answered, conn.answered_bytes), (2, wire.len() as u64));
        let stats = recorder.finish(Duration::from_secs(1), 0.0, 0.0);
        assert_eq!(stats.requests, 2);
        // One more response than was asked for is a protocol failure.
        let mut recorder = Recorder::new(now, Duration::from_secs(1), false);
        assert_eq!(
            conn.frame(&wire[..40], &mut recorder, now).err(),
            Some(FailureKind::Protocol)
        );
    }

    #[test]
    fn a_response_cut_off_by_the_end_is_not_in_the_answered_bytes() {
        let now = Instant::now();
        let mut recorder = Recorder::new(now, Duration::from_secs(1), false);
        let mut conn = connection();
        for _ in 0..2 {
            conn.in_flight.push_back(InFlight::new(now, now, now, 0));
        }
        let one = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
        let mut wire = one.to_vec();
        wire.extend_from_slice(&one[..one.len() - 4]);
        conn.frame(&wire, &mut recorder, now).unwrap();
        assert_eq!((conn.answered, conn.answered_bytes), (1, one.len() as u64));
        // The socket is replaced: what had arrived of the second response is not carried over.
        conn.reset(now);
        conn.in_flight.push_back(InFlight::new(now, now, now, 0));
        conn.frame(one, &mut recorder, now).unwrap();
        assert_eq!(
            (conn.answered, conn.answered_bytes),
            (2, 2 * one.len() as u64)
        );
        // A close-delimited body ends with the stream, and its bytes are the response's.
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end";
        conn.in_flight.push_back(InFlight::new(now, now, now, 0));
        conn.frame(close, &mut recorder, now).unwrap();
        conn.frame_eof(&mut recorder, now);
        assert_eq!(
            (conn.answered, conn.answered_bytes),
            (3, 2 * one.len() as u64 + close.len() as u64)
        );
    }
}
