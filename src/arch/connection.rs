//! The request step every architecture shares, and the blocking per-connection loop.
//!
//! [`next_request`] takes the next complete request out of a connection's input, answers
//! malformed ones itself, and hands back the [`Route`] plus how to frame its reply. The
//! blocking architectures (iterative, forking, preforked, threaded, prethreaded) run
//! [`serve_connection`]: read, answer the complete requests in order (pipelining) until
//! [`MAX_QUEUED_OUTPUT`] is queued, write, repeat, until the client closes, asks to close,
//! stays silent past the idle timeout, drains nothing of its output for the write timeout, or
//! the server is stopping. Reads wait in short slices so a stop is noticed between requests.
//!
//! Long CPU work (`/fib`) asks [`cancel_check`] now and then: a client that has hung up, or a
//! stop past its drain deadline, ends it with no reply and closes the connection, so a gone
//! client does not keep a core busy for half a minute.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use super::{Protocol, ServerContext, Timeouts, DRAIN};
use crate::app::{echo, App, Route};
use crate::http::{FileBody, Method, RequestParser, Response};
use crate::store::LazyStore;

/// How long one blocking read waits before re-checking the stop flag and the idle timeout.
const READ_SLICE: Duration = Duration::from_millis(500);
/// How long one blocking write waits; a write that copies nothing in a slice is retried
/// until the write timeout has passed without progress.
const WRITE_SLICE: Duration = Duration::from_millis(250);
/// How long an accept waits before re-checking the stop flag.
const ACCEPT_SLICE: Duration = Duration::from_millis(200);

/// How to frame the reply to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyShape {
    pub keep_alive: bool,
    pub head: bool,
}

impl ReplyShape {
    /// Serialises `resp` into `out`.
    pub fn write(self, resp: &Response, out: &mut Vec<u8>) {
        resp.write_to(out, self.keep_alive, self.head);
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
            };
            Next::Request(app.route(&req), shape, used)
        }
        Ok(None) => Next::Incomplete,
        Err(e) => {
            let mut resp = Response::error(e.status());
            if e.status() == 405 {
                resp = resp.with_header("Allow", "GET, HEAD, POST");
            }
            resp.write_to(out, false, false);
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
    Response::error(408).write_to(out, false, false);
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

/// What answering the buffered input left to do (the blocking loop here, and the async
/// architecture's tasks).
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

/// Answers the complete requests in `input` into `out`, blocking on the work each needs,
/// until `out` holds [`MAX_QUEUED_OUTPUT`]. The bytes used are dropped from `input` once, at
/// the end, so a long pipeline costs linear time.
fn answer_http(
    stream: &TcpStream,
    input: &mut Vec<u8>,
    out: &mut Vec<u8>,
    ctx: &ServerContext,
    store: &mut LazyStore,
) -> Answered {
    let mut pos = 0;
    let answered = loop {
        if out.len() >= MAX_QUEUED_OUTPUT {
            break Answered::Backlog;
        }
        match next_request(&input[pos..], out, &ctx.app, ctx.stopping()) {
            Next::Request(route, shape, used) => {
                pos += used;
                let mut cancel = cancel_check(stream.as_raw_fd(), ctx, None);
                let Some(resp) = ctx.app.complete(route, store, &mut cancel) else {
                    break Answered::Cancelled;
                };
                shape.write(&resp, out);
                ctx.served.add(1);
                match resp.file {
                    Some(file) if !shape.head => break Answered::Stream(file, !shape.keep_alive),
                    _ if !shape.keep_alive => break Answered::Close,
                    _ => {}
                }
            }
            Next::Incomplete => break Answered::NeedInput,
            Next::Rejected => {
                ctx.served.add(1);
                break Answered::Reject;
            }
        }
    };
    input.drain(..pos);
    answered
}

/// Serves one connection to the end, blocking.
pub fn serve_connection(mut stream: TcpStream, ctx: &ServerContext, store: &mut LazyStore) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(READ_SLICE)).is_err()
        || stream
            .set_write_timeout(Some(WRITE_SLICE.min(ctx.timeouts.write)))
            .is_err()
    {
        return;
    }
    let _ = stream.set_nodelay(true);
    let mut input = Vec::with_capacity(4096);
    let mut out = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 16 * 1024];
    let mut last_activity = Instant::now();
    let mut clock = RequestClock::default();
    loop {
        let answered = match ctx.protocol {
            Protocol::Http => {
                let before = input.len();
                let answered = answer_http(&stream, &mut input, &mut out, ctx, store);
                if answered == Answered::Cancelled {
                    return;
                }
                if input.len() < before {
                    clock.reset();
                }
                // The clock matters only for a request partly in (no clock read otherwise).
                let now = if input.is_empty() {
                    last_activity
                } else {
                    Instant::now()
                };
                if clock.observe(&input, now) && answered == Answered::NeedInput {
                    out.extend_from_slice(CONTINUE);
                }
                answered
            }
            Protocol::Echo => match echo::echo_lines(&mut input, &mut out) {
                Ok(lines) => {
                    ctx.served.add(lines);
                    Answered::NeedInput
                }
                Err(()) => Answered::Close,
            },
        };
        if !out.is_empty() {
            if write_all_or_stall(&mut stream, &out, ctx.timeouts.write).is_err() {
                return;
            }
            out.clear();
            last_activity = Instant::now();
        }
        match answered {
            Answered::Close => return,
            Answered::Reject => {
                linger(&mut stream);
                return;
            }
            Answered::Stream(file, close) => {
                if stream_file(&mut stream, &file, &mut out, ctx.timeouts.write).is_err() || close {
                    return;
                }
                last_activity = Instant::now();
                // The next request waited on the server: its deadline starts now.
                clock.reset();
                continue;
            }
            Answered::Backlog if !ctx.stopping() => continue,
            _ if ctx.stopping() => return,
            _ => {}
        }
        // One clock read per read serves the activity time and the request's deadline.
        let now = match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                input.extend_from_slice(&chunk[..n]);
                last_activity = Instant::now();
                if ctx.protocol == Protocol::Http
                    && clock.observe(&input, last_activity)
                    && write_all_or_stall(&mut stream, CONTINUE, ctx.timeouts.write).is_err()
                {
                    return;
                }
                last_activity
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                let now = Instant::now();
                if now.saturating_duration_since(last_activity) >= ctx.idle_timeout {
                    return;
                }
                now
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Instant::now(),
            Err(_) => return,
        };
        if clock.expired(&ctx.timeouts, now) {
            request_timeout(&mut out);
            ctx.served.add(1);
            if write_all_or_stall(&mut stream, &out, ctx.timeouts.write).is_ok() {
                linger(&mut stream);
            }
            return;
        }
    }
}

/// Writes all of `buf`, failing once the client has taken none of it for `timeout`. A
/// blocking write with SO_SNDTIMEO may wait its whole timeout and still return the few bytes
/// it copied at the start, so writes wait in slices ([`WRITE_SLICE`]) and progress is judged
/// between them: the timeout is honoured to within a slice.
fn write_all_or_stall(
    stream: &mut TcpStream,
    buf: &[u8],
    timeout: Duration,
) -> std::io::Result<()> {
    let mut pos = 0;
    let mut last_progress = Instant::now();
    while pos < buf.len() {
        match stream.write(&buf[pos..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => {
                pos += n;
                last_progress = Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if last_progress.elapsed() >= timeout {
                    return Err(ErrorKind::TimedOut.into());
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Closes after an error reply without a reset: stops sending (FIN), then reads and drops
/// what the client still sends, until it closes, [`LINGER_TIME`] passes or
/// [`LINGER_BYTES`] have come.
fn linger(stream: &mut TcpStream) {
    if stream.shutdown(std::net::Shutdown::Write).is_err() {
        return;
    }
    let deadline = Instant::now() + LINGER_TIME;
    let mut discarded = 0;
    let mut buf = [0u8; 16 * 1024];
    while discarded < LINGER_BYTES && Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => discarded += n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}

/// Streams a file body in [`FILE_CHUNK`](crate::http::FILE_CHUNK)s through `buf` (left
/// empty), each write bounded by the write timeout. A file that ends early is an error: the
/// promised Content-Length cannot be met, so the connection must close.
fn stream_file(
    stream: &mut TcpStream,
    file: &FileBody,
    buf: &mut Vec<u8>,
    timeout: Duration,
) -> std::io::Result<()> {
    let mut offset = 0;
    while offset < file.len {
        buf.clear();
        let n = file.read_chunk(offset, buf)?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        write_all_or_stall(stream, buf, timeout)?;
        offset += n as u64;
    }
    buf.clear();
    Ok(())
}

/// Puts a listener in the mode [`accept_next`] expects: blocking accepts that give up after
/// a short slice. A blocking accept wakes exactly one of the threads or processes waiting in
/// it (the kernel's exclusive wait), where a poll on a shared listener wakes them all: with
/// hundreds of pool workers that thundering herd costs more than the requests.
pub fn use_blocking_accept(listener: &TcpListener) -> std::io::Result<()> {
    listener.set_nonblocking(false)?;
    socket2::SockRef::from(listener).set_read_timeout(Some(ACCEPT_SLICE))
}

/// Waits for the next connection on a listener prepared by [`use_blocking_accept`], calling
/// `on_tick` whenever it wakes; `None` once the server is stopping. Running out of file
/// descriptors or memory is logged and answered by leaving the connection in the backlog a
/// little longer.
pub fn accept_next(
    listener: &TcpListener,
    ctx: &ServerContext,
    on_tick: &mut dyn FnMut(),
) -> Option<TcpStream> {
    loop {
        on_tick();
        if ctx.stopping() {
            return None;
        }
        match listener.accept() {
            Ok((stream, _)) => return Some(stream),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) if is_resource_exhaustion(&e) => {
                eprintln!("sweetspot: accept: {e}; delaying new connections");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(_) => {}
        }
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
