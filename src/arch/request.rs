//! The request step every architecture shares: [`next_request`] takes the next complete
//! request from a connection's input and answers malformed ones itself; [`RequestClock`]
//! holds a request's deadlines; [`cancel_check`] lets long work give up when its client
//! leaves; [`Exchange`] is the sans-IO answering step the blocking loop ([`super::blocking`])
//! and the async task ([`super::async_tasks`]) drive, each with its own I/O.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::{Protocol, ServerContext, Timeouts, DRAIN};
use crate::app::{echo, App, Route};
use crate::http::{FileBody, Method, Persist, RequestParser, Response};

/// How to frame the reply to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyShape {
    pub keep_alive: bool,
    pub head: bool,
    /// The request was HTTP/1.0: keep-alive is announced (HTTP/1.1's is the default).
    pub http10: bool,
}

impl ReplyShape {
    /// Serialises `resp` into `out`.
    pub fn write(self, resp: &Response, out: &mut Vec<u8>) {
        let persist = match (self.keep_alive, self.http10) {
            (false, _) => Persist::Close,
            (true, true) => Persist::KeepAlive,
            (true, false) => Persist::Default,
        };
        resp.write_to(out, persist, self.head);
    }
}

/// Most output queued for one connection: past it the connection is not read (and no more
/// of its pipelined requests are answered) until the client drains some. One reply may
/// overshoot it, so the bound on a connection's output is this plus its largest reply.
pub const MAX_QUEUED_OUTPUT: usize = 1024 * 1024;

/// The next step of an HTTP connection.
#[derive(Debug)]
pub enum Next {
    /// A request to answer, and how many input bytes it took.
    Request(Route, ReplyShape, usize),
    /// More bytes are needed.
    Incomplete,
    /// The request was malformed; its error response is in `out`; close after writing.
    Rejected,
}

/// Parses a request once in this process, before it forks: the parser's first use detects the
/// CPU's features (cpuid, which traps to the hypervisor on a virtual machine, tens of
/// microseconds), and a child forked afterwards inherits the answer instead of paying it per
/// connection.
pub fn warm_up_parser() {
    let _ = RequestParser::parse(b"GET / HTTP/1.1\r\nHost: warm-up\r\n\r\n");
}

/// Takes the next request from the front of `input` (the caller drops the bytes it used).
/// Malformed input gets its status written to `out`.
pub fn next_request(input: &[u8], out: &mut Vec<u8>, app: &App, stopping: bool) -> Next {
    match RequestParser::parse(input) {
        Ok(Some((req, used))) => {
            let shape = ReplyShape {
                keep_alive: req.keep_alive && !stopping,
                head: req.method == Method::Head,
                http10: req.http10,
            };
            Next::Request(app.route(&req), shape, used)
        }
        Ok(None) => Next::Incomplete,
        Err(e) => {
            let mut resp = Response::error(e.status());
            if e.status() == 405 {
                resp = resp.with_header("Allow", "GET, HEAD, POST");
            }
            resp.write_to(out, Persist::Close, false);
            Next::Rejected
        }
    }
}

/// The deadlines of the request being received: its head must be complete within the
/// header timeout of its first byte, and its body within the body timeout of the head. Fed
/// the unanswered input after every read; reset whenever a request is taken.
#[derive(Debug, Default, Clone, Copy)]
pub struct RequestClock {
    started: Option<Instant>,
    head_done: Option<Instant>,
}

impl RequestClock {
    /// Notes what has arrived of the next request (`unanswered`: the input not yet taken).
    /// Returns true when its head has just completed and the client waits for
    /// `100 Continue` before sending the body ([`CONTINUE`]).
    pub fn observe(&mut self, unanswered: &[u8], now: Instant) -> bool {
        if unanswered.is_empty() {
            *self = RequestClock::default();
            return false;
        }
        self.started.get_or_insert(now);
        if self.head_done.is_none() && RequestParser::head_complete(unanswered) {
            self.head_done = Some(now);
            return RequestParser::wants_continue(unanswered);
        }
        false
    }

    /// Forgets the request just taken; the next one's clock starts at the next `observe`.
    pub fn reset(&mut self) {
        *self = RequestClock::default();
    }

    /// Whether the request being received is past its deadline.
    pub fn expired(&self, timeouts: &Timeouts, now: Instant) -> bool {
        match (self.started, self.head_done) {
            (Some(started), None) => now.duration_since(started) >= timeouts.header,
            (_, Some(head)) => now.duration_since(head) >= timeouts.body,
            (None, None) => false,
        }
    }
}

/// The interim reply to `Expect: 100-continue`.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// After an error reply, how long the connection keeps reading (and discarding) what the
/// client still sends before closing, and how much: closing with unread input makes the
/// kernel send a reset, which can destroy the error reply before the client reads it (a
/// 413 to a client still uploading). nginx does the same ("lingering close").
pub const LINGER_TIME: Duration = Duration::from_secs(2);
/// See [`LINGER_TIME`].
pub const LINGER_BYTES: usize = 4 * 1024 * 1024;

/// Writes the 408 that ends a connection whose request missed its deadline.
pub fn request_timeout(out: &mut Vec<u8>) {
    Response::error(408).write_to(out, Persist::Close, false);
}

/// Whether the client has hung up: closed (or shut down) its side, or reset the connection.
/// Looks without waiting and without reading: bytes it has sent (pipelined requests) are
/// not a hang-up. A client that half-closes and still waits for its reply counts as gone, as
/// it does for nginx; that only matters to work long enough to ask.
/// Takes the descriptor's number (a hybrid worker checks a socket the loop owns): poll(2) on a
/// number closed meanwhile is no memory hazard, and the loop cancels the work before it
/// closes the socket, so a reused number is never mistaken for this client.
pub fn peer_gone(fd: RawFd) -> bool {
    // A plain pollfd: nix 0.29's `PollFd` has no name for POLLRDHUP and rejects it.
    let mut fds = [libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    }];
    let hangup = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR;
    matches!(crate::sys::poll(&mut fds, Some(std::time::Duration::ZERO)), Ok(n) if n > 0 && fds[0].revents & hangup != 0)
}

/// The check long work on behalf of the client on socket `fd` asks now and then: give up once the client has
/// hung up ([`peer_gone`]), or once a stop has waited [`DRAIN`] for it (counted from
/// `drain_deadline` when the caller knows it, else [`DRAIN`] after the check first sees the
/// stop).
pub fn cancel_check(
    fd: RawFd,
    ctx: &ServerContext,
    drain_deadline: Option<Instant>,
) -> impl FnMut() -> bool + '_ {
    let mut deadline = drain_deadline;
    move || {
        if ctx.stopping()
            && Instant::now() >= *deadline.get_or_insert_with(|| Instant::now() + DRAIN)
        {
            return true;
        }
        peer_gone(fd)
    }
}

/// What answering the buffered input left for the connection's driver to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answered {
    /// Close once the output is written.
    Close,
    /// An error reply: write it, then close lingering.
    Reject,
    /// Write the output, then stream this file body; then close (true) or carry on.
    Stream(FileBody, bool),
    /// The output is full: write it, then answer more before reading.
    Backlog,
    /// Every complete request is answered: read more.
    NeedInput,
    /// The work of a request was cancelled (the client hung up, or the drain deadline
    /// passed): close now, writing nothing.
    Cancelled,
}

/// What [`Exchange::next`] hands the driver.
#[derive(Debug)]
pub enum Step {
    /// Complete this route (blocking, on a pool, or awaited), then give the reply to
    /// [`Exchange::reply`].
    Complete(Route, ReplyShape),
    /// Answering stopped here: do this.
    Then(Answered),
}

/// The sans-IO state of one connection's exchange: the input not yet answered, the output
/// not yet written, the request's deadlines and the time of the last activity. Requests are
/// answered in order (pipelining) until [`MAX_QUEUED_OUTPUT`] is queued; the bytes used are
/// dropped from `input` once per answering turn, so a long pipeline costs linear time.
#[derive(Debug)]
pub struct Exchange {
    pub input: Vec<u8>,
    pub out: Vec<u8>,
    pub last_activity: Instant,
    clock: RequestClock,
    /// Input already answered this turn (dropped when the turn settles).
    used: usize,
}

impl Exchange {
    pub fn new(capacity: usize) -> Exchange {
        Exchange {
            input: Vec::with_capacity(capacity),
            out: Vec::with_capacity(capacity),
            last_activity: Instant::now(),
            clock: RequestClock::default(),
            used: 0,
        }
    }

    /// The next thing to do with the buffered input: a request to complete, or what ends
    /// this answering turn.
    pub fn next(&mut self, ctx: &ServerContext) -> Step {
        if ctx.protocol == Protocol::Echo {
            return Step::Then(match echo::echo_lines(&mut self.input, &mut self.out) {
                Ok(lines) => {
                    ctx.served.add(lines);
                    Answered::NeedInput
                }
                Err(()) => Answered::Close,
            });
        }
        if self.out.len() >= MAX_QUEUED_OUTPUT {
            return Step::Then(self.settle(Answered::Backlog));
        }
        let input = &self.input[self.used..];
        match next_request(input, &mut self.out, &ctx.app, ctx.stopping()) {
            Next::Request(route, shape, used) => {
                self.used += used;
                Step::Complete(route, shape)
            }
            Next::Incomplete => Step::Then(self.settle(Answered::NeedInput)),
            Next::Rejected => {
                ctx.served.add(1);
                Step::Then(self.settle(Answered::Reject))
            }
        }
    }

    /// Queues the reply to the request [`Exchange::next`] handed out (`None`: its work was
    /// cancelled). Returns what ends the turn, or `None` to ask [`Exchange::next`] again.
    pub fn reply(
        &mut self,
        resp: Option<Response>,
        shape: ReplyShape,
        ctx: &ServerContext,
    ) -> Option<Answered> {
        let Some(resp) = resp else {
            return Some(Answered::Cancelled);
        };
        shape.write(&resp, &mut self.out);
        ctx.served.add(1);
        match resp.file {
            Some(file) if !shape.head => {
                Some(self.settle(Answered::Stream(file, !shape.keep_alive)))
            }
            _ if !shape.keep_alive => Some(self.settle(Answered::Close)),
            _ => None,
        }
    }

    /// Ends an answering turn: drops the input used, restarts the deadline clock when a
    /// request was taken, and queues `100 Continue` when a request waits for it.
    fn settle(&mut self, answered: Answered) -> Answered {
        if self.used > 0 {
            self.input.drain(..self.used);
            self.used = 0;
            self.clock.reset();
        }
        // The clock matters only for a request partly in (no clock read otherwise).
        let now = if self.input.is_empty() {
            self.last_activity
        } else {
            Instant::now()
        };
        if self.clock.observe(&self.input, now) && answered == Answered::NeedInput {
            self.out.extend_from_slice(CONTINUE);
        }
        answered
    }

    /// Notes that input arrived at `now`; true when a `100 Continue` was queued for the
    /// request whose head just completed (write it before waiting for the body).
    pub fn arrived(&mut self, now: Instant, protocol: Protocol) -> bool {
        self.last_activity = now;
        if protocol == Protocol::Http && self.clock.observe(&self.input, now) {
            self.out.extend_from_slice(CONTINUE);
            return true;
        }
        false
    }

    /// Notes that a streamed file body was written at `now`: the next request waited on the
    /// server, so its deadline starts now.
    pub fn streamed(&mut self, now: Instant) {
        self.last_activity = now;
        self.clock.reset();
    }

    /// Whether the request being received is past its deadline at `now`; if so its 408 is
    /// queued (write it, then close lingering).
    pub fn expired(&mut self, ctx: &ServerContext, now: Instant) -> bool {
        if !self.clock.expired(&ctx.timeouts, now) {
            return false;
        }
        request_timeout(&mut self.out);
        ctx.served.add(1);
        true
    }
}

/// Whether an accept or spawn error means the process ran out of something (fds, memory,
/// threads, processes) rather than that one connection went bad.
pub fn is_resource_exhaustion(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}
