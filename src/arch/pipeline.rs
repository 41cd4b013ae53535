//! The answering step the event loop (poll, epoll, reactors, hybrid) and uring share. Both
//! keep, per connection, the same sans-IO state, a [`Pipeline`]: input not yet answered,
//! replies not yet sent, the request whose reply waits on work, a file body still streaming,
//! and whether the connection ends once its output is out. [`answer`] takes the complete
//! requests from its front, in order, until one waits, a file streams, the connection is to
//! close, or [`MAX_QUEUED_OUTPUT`] is queued. What differs between the loops is the
//! [`PipelineHost`] each implements; [`answer`] is generic over it, so each loop gets its own
//! copy with no indirection per request.

use std::time::{Duration, Instant};

use super::request::{next_request, request_timeout, Next, ReplyShape, RequestClock};
use super::request::{CONTINUE, MAX_QUEUED_OUTPUT};
use super::{Protocol, ServerContext, Timeouts};
use crate::app::{echo, Route};
use crate::http::{FileBody, Response, MAX_BODY, MAX_HEADER_BYTES};
use crate::sys::SharedCounter;

/// Input held while a request is pending beyond which a flooding client is dropped.
pub const MAX_BUFFERED: usize = MAX_HEADER_BYTES + MAX_BODY + 64 * 1024;

/// How often a loop looks for expired deadlines (idle, write stall, lingering, late request):
/// a deadline fires at most this late. One look walks every connection, a few nanoseconds
/// each; the 200 ms tick wakes an idle loop for it.
pub const SWEEP_EVERY: Duration = Duration::from_millis(200);

/// How a connection ends once nothing is in flight ([`Pipeline::ending`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// After an error reply: stop sending, keep reading (and dropping) until the client is
    /// done ([`LINGER_TIME`](super::request::LINGER_TIME)).
    Linger,
    Close,
}

/// A connection's deadlines apart from its request's ([`RequestClock`]): when it was last
/// active, since when its queued output has not moved, and, after an error reply, until when
/// it lingers (with how much it has dropped so far).
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    pub last_active: Instant,
    pub stalled_since: Option<Instant>,
    pub lingering: Option<(Instant, usize)>,
}

impl Deadlines {
    pub fn new(now: Instant) -> Deadlines {
        Deadlines {
            last_active: now,
            stalled_since: None,
            lingering: None,
        }
    }

    /// Whether the connection is to close at `now`: silent for `idle` with nothing in flight
    /// (`quiet`) and not lingering, its output stuck for `write_timeout`, or its lingering over.
    pub fn expired(
        &self,
        quiet: bool,
        idle: Duration,
        write_timeout: Duration,
        now: Instant,
    ) -> bool {
        let silent = quiet && now.saturating_duration_since(self.last_active) >= idle;
        let stalled = self
            .stalled_since
            .is_some_and(|since| now.saturating_duration_since(since) >= write_timeout);
        match self.lingering {
            Some((until, _)) => stalled || now >= until,
            None => silent || stalled,
        }
    }
}

/// The requests and replies of one connection, apart from its socket.
#[derive(Default)]
pub struct Pipeline {
    pub input: Vec<u8>,
    /// How much of `input` has been answered (dropped from the front in batches, so a long
    /// pipeline is not moved once per request).
    pub consumed: usize,
    /// Replies not yet handed to the socket (how much of it is on its way is the loop's).
    pub out: Vec<u8>,
    /// The deadlines of the request being received.
    pub clock: RequestClock,
    /// A file body being streamed after `out`, and how far it has been read.
    pub file: Option<(FileBody, u64)>,
    /// A request whose reply waits on work the loop started.
    pub pending: Option<ReplyShape>,
    /// The connection closes once its output is out (a last reply, or an error reply).
    pub close_after_flush: bool,
    /// An error reply ends this connection: once it is written, close lingering.
    pub linger: bool,
}

impl Pipeline {
    /// Whether the front of the unanswered input is the next request to be answered (no
    /// earlier reply is still being worked on or streamed), so an interim reply to it can go
    /// out now without overtaking another.
    pub fn answering_front(&self) -> bool {
        self.pending.is_none() && self.file.is_none() && !self.close_after_flush
    }

    /// Whether nothing is in flight: no reply pending or streaming, and none of the output
    /// unwritten (`queued`: the loop's count of it).
    pub fn idle(&self, queued: usize) -> bool {
        queued == 0 && self.pending.is_none() && self.file.is_none()
    }

    /// Whether the connection ends now that every reply is out (`queued` bytes of output
    /// unwritten), and how: lingering after an error reply (unless the client has closed),
    /// closing after a last reply or once the client has closed.
    pub fn ending(&self, queued: usize, peer_closed: bool) -> Option<Ending> {
        if !self.idle(queued) {
            None
        } else if self.close_after_flush && self.linger && !peer_closed {
            Some(Ending::Linger)
        } else if self.close_after_flush || peer_closed {
            Some(Ending::Close)
        } else {
            None
        }
    }

    /// Input received and not yet answered.
    pub fn unanswered(&self) -> usize {
        self.input.len() - self.consumed
    }

    /// Drops answered input from the front once it is at least half the buffer: each byte
    /// is moved a bounded number of times however long the pipeline.
    pub fn compact_input(&mut self) {
        if self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
        } else if self.consumed >= self.input.len() / 2 {
            self.input.drain(..self.consumed);
            self.consumed = 0;
        }
    }

    /// Feeds the unanswered input to the request clock; queues `100 Continue` when a head
    /// asking for it has just completed and its request is the next to be answered.
    pub fn observe(&mut self, now: Instant) {
        if self.clock.observe(&self.input[self.consumed..], now) && self.answering_front() {
            self.out.extend_from_slice(CONTINUE);
        }
    }

    /// Writes the reply of the pending request into `out`, counting it in `served`.
    pub fn deliver(&mut self, resp: &Response, served: &SharedCounter) {
        if let Some(shape) = self.pending.take() {
            shape.write(resp, &mut self.out);
            if let Some(file) = resp.file.as_ref().filter(|_| !shape.head) {
                self.file = Some((file.clone(), 0));
            }
            served.add(1);
            self.close_after_flush = !shape.keep_alive;
        }
    }

    /// The request deadline: while the server holds the connection up (a reply pending,
    /// streaming or queued: `queued` bytes of output are unsent) the next request is not
    /// timed, its clock restarts once the server is ready for it, and no 408 can land inside
    /// another reply; otherwise a request past its deadline gets a 408 and the connection
    /// closes lingering. Returns true when the 408 was written.
    pub fn time_out_late_request(
        &mut self,
        queued: usize,
        timeouts: &Timeouts,
        served: &SharedCounter,
        now: Instant,
    ) -> bool {
        if !self.answering_front() || queued > 0 {
            self.clock.reset();
            return false;
        }
        if !self.clock.expired(timeouts, now) {
            return false;
        }
        request_timeout(&mut self.out);
        self.close_after_flush = true;
        self.linger = true;
        served.add(1);
        true
    }
}

/// What a loop provides to [`answer`].
pub trait PipelineHost {
    /// How the loop names a connection.
    type Id: Copy;

    /// The connection's pipeline and how many bytes of output it has queued and not yet
    /// written, or `None` once it is closed (starting work may close it).
    fn pipeline(&mut self, id: Self::Id) -> Option<(&mut Pipeline, usize)>;

    /// Starts the work of a route for the connection's pending request: the response if it
    /// is ready now, or `None` when it will come later (or the connection was closed). A
    /// reply that comes later is given to [`Pipeline::deliver`] by the loop.
    fn start(&mut self, id: Self::Id, route: Route) -> Option<Response>;

    /// The time the request clock is fed.
    fn now(&self) -> Instant;
}

/// Answers what connection `id` can answer now into its output. Returns true when answering
/// stopped because [`MAX_QUEUED_OUTPUT`] is queued (with input perhaps left to answer).
pub fn answer<H: PipelineHost>(host: &mut H, id: H::Id, ctx: &ServerContext) -> bool {
    let mut backlogged = false;
    match ctx.protocol {
        Protocol::Echo => {
            let Some((p, queued)) = host.pipeline(id) else {
                return false;
            };
            if queued >= MAX_QUEUED_OUTPUT {
                backlogged = true;
            } else {
                match echo::echo_lines(&mut p.input, &mut p.out) {
                    Ok(lines) => ctx.served.add(lines),
                    Err(()) => p.close_after_flush = true,
                }
            }
        }
        Protocol::Http => loop {
            let Some((p, queued)) = host.pipeline(id) else {
                return false;
            };
            if queued >= MAX_QUEUED_OUTPUT {
                backlogged = true;
                break;
            }
            if p.pending.is_some() || p.file.is_some() || p.close_after_flush {
                break;
            }
            let input = &p.input[p.consumed..];
            match next_request(input, &mut p.out, &ctx.app, ctx.stopping()) {
                Next::Request(route, shape, used) => {
                    p.consumed += used;
                    p.clock.reset();
                    // Pending before the work starts: a store reply may arrive at once.
                    p.pending = Some(shape);
                    if let Some(resp) = host.start(id, route) {
                        if let Some((p, _)) = host.pipeline(id) {
                            p.deliver(&resp, &ctx.served);
                        }
                    }
                }
                Next::Incomplete => break,
                Next::Rejected => {
                    ctx.served.add(1);
                    p.close_after_flush = true;
                    p.linger = true;
                }
            }
        },
    }
    let Some((p, _)) = host.pipeline(id) else {
        return backlogged;
    };
    p.compact_input();
    if ctx.protocol == Protocol::Http && !p.close_after_flush {
        if p.unanswered() == 0 {
            // Nothing of a next request yet: the clock only resets, no time needed.
            p.clock = RequestClock::default();
        } else {
            // The clock is read only when it is fed (for a loop that reads it per call).
            let now = host.now();
            if let Some((p, _)) = host.pipeline(id) {
                p.observe(now);
            }
        }
    }
    backlogged
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn deadlines_close_the_silent_the_stalled_and_the_lingered_only() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut d = Deadlines::new(t0);
        assert!(!d.expired(true, s(10), s(5), t0 + s(9)));
        assert!(d.expired(true, s(10), s(5), t0 + s(10)));
        // Work in flight keeps a silent connection open.
        assert!(!d.expired(false, s(10), s(5), t0 + s(60)));
        d.stalled_since = Some(t0 + s(1));
        assert!(!d.expired(false, s(10), s(5), t0 + s(5)));
        assert!(d.expired(false, s(10), s(5), t0 + s(6)));
        d.stalled_since = None;
        // A lingering connection is not closed for silence, only when its lingering ends.
        d.lingering = Some((t0 + s(30), 0));
        assert!(!d.expired(true, s(10), s(5), t0 + s(29)));
        assert!(d.expired(true, s(10), s(5), t0 + s(30)));
    }

    const EXPECTING: &[u8] =
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n";

    fn with_input(input: &[u8], consumed: usize) -> Pipeline {
        Pipeline {
            input: input.to_vec(),
            consumed,
            ..Pipeline::default()
        }
    }

    #[test]
    fn compacting_drops_answered_input_only_once_it_is_half_the_buffer() {
        let mut all = with_input(b"abcdef", 6);
        all.compact_input();
        assert_eq!((all.input.as_slice(), all.consumed), (&b""[..], 0));
        let mut half = with_input(b"abcdef", 3);
        half.compact_input();
        assert_eq!((half.input.as_slice(), half.consumed), (&b"def"[..], 0));
        let mut less = with_input(b"abcdef", 2);
        less.compact_input();
        assert_eq!((less.input.as_slice(), less.consumed), (&b"abcdef"[..], 2));
        assert_eq!(less.unanswered(), 4);
    }

    #[test]
    fn delivering_writes_the_pending_reply_once_and_counts_it() {
        let served = SharedCounter::new().unwrap();
        let shape = ReplyShape {
            keep_alive: false,
            head: false,
            http10: false,
        };
        let mut p = Pipeline {
            pending: Some(shape),
            ..Pipeline::default()
        };
        let resp = Response::text(200, "hi");
        p.deliver(&resp, &served);
        let mut expected = Vec::new();
        shape.write(&resp, &mut expected);
        assert_eq!(p.out, expected);
        assert_eq!(served.get(), 1);
        assert!(p.pending.is_none() && p.file.is_none() && p.close_after_flush);
        // Nothing pending: a late second reply changes nothing.
        p.deliver(&resp, &served);
        assert_eq!((p.out.len(), served.get()), (expected.len(), 1));
    }

    #[test]
    fn continue_goes_out_only_for_the_request_answered_next() {
        let now = Instant::now();
        let mut front = with_input(EXPECTING, 0);
        front.observe(now);
        assert_eq!(front.out, CONTINUE);
        // The head completes once: a second look sends nothing more.
        front.observe(now);
        assert_eq!(front.out, CONTINUE);
        let mut behind = with_input(EXPECTING, 0);
        behind.pending = Some(ReplyShape {
            keep_alive: true,
            head: false,
            http10: false,
        });
        behind.observe(now);
        assert!(behind.out.is_empty());
    }

    #[test]
    fn a_connection_ends_only_once_nothing_is_in_flight() {
        let open = Pipeline::default();
        assert_eq!(open.ending(0, false), None);
        assert_eq!(open.ending(0, true), Some(Ending::Close));
        assert_eq!(open.ending(1, true), None);
        let last = Pipeline {
            close_after_flush: true,
            ..Pipeline::default()
        };
        assert_eq!(last.ending(0, false), Some(Ending::Close));
        let error = Pipeline {
            close_after_flush: true,
            linger: true,
            ..Pipeline::default()
        };
        assert_eq!(error.ending(0, false), Some(Ending::Linger));
        // A client that has closed is not waited for.
        assert_eq!(error.ending(0, true), Some(Ending::Close));
        assert_eq!(error.ending(5, false), None);
        let waiting = Pipeline {
            pending: Some(ReplyShape {
                keep_alive: false,
                head: false,
                http10: false,
            }),
            close_after_flush: true,
            ..Pipeline::default()
        };
        assert!(!waiting.idle(0));
        assert_eq!(waiting.ending(0, true), None);
    }

    #[test]
    fn a_late_request_gets_408_unless_the_server_holds_the_connection_up() {
        let served = SharedCounter::new().unwrap();
        let timeouts = Timeouts {
            header: Duration::from_secs(1),
            ..Timeouts::default()
        };
        let start = Instant::now();
        let late = start + Duration::from_secs(1);
        let mut p = with_input(b"GET / HTTP/1.1\r\n", 0);
        p.observe(start);
        assert!(!p.time_out_late_request(0, &timeouts, &served, start));
        // Output still queued: the clock restarts instead.
        assert!(!p.time_out_late_request(10, &timeouts, &served, late));
        assert!(!p.time_out_late_request(0, &timeouts, &served, late));
        p.observe(start);
        assert!(p.time_out_late_request(0, &timeouts, &served, late));
        let mut expected = Vec::new();
        request_timeout(&mut expected);
        assert_eq!(p.out, expected);
        assert!(p.close_after_flush && p.linger);
        assert_eq!(served.get(), 1);
    }
}
