//! The blocking per-connection loop of iterative, forking, preforked, threaded and
//! prethreaded: read, let the [`Exchange`] answer the complete requests (blocking on their
//! work), write, repeat, until the client closes or asks to, stays silent past the idle
//! timeout, drains nothing for the write timeout, or the server stops. Reads, writes and
//! accepts wait in short slices so a stop is noticed between requests; an idle accept sees it
//! at once, as the stop signal shuts its listener down ([`crate::sys::stop`]).

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::request::{
    cancel_check, is_resource_exhaustion, Answered, Exchange, Step, LINGER_BYTES, LINGER_TIME,
};
use super::tls::Wire;
use super::ServerContext;
use crate::http::FileBody;
use crate::store::LazyStore;

/// How long one blocking read waits before re-checking the stop flag and the idle timeout.
const READ_SLICE: Duration = Duration::from_millis(500);
/// How long one blocking write waits; a write that copies nothing in a slice is retried
/// until the write timeout has passed without progress.
const WRITE_SLICE: Duration = Duration::from_millis(250);
/// A client that takes less than this in a write timeout is stalled, not slow.
const MIN_PROGRESS: usize = 16 * 1024;
/// How long an accept waits before re-checking the stop flag.
const ACCEPT_SLICE: Duration = Duration::from_millis(200);

/// Answers the complete requests buffered in `ex`, blocking on the work each needs.
fn answer(
    ex: &mut Exchange,
    stream: &Wire,
    ctx: &ServerContext,
    store: &mut LazyStore,
) -> Answered {
    loop {
        match ex.next(ctx) {
            Step::Complete(route, shape) => {
                let mut cancel = cancel_check(stream.tcp().as_raw_fd(), ctx, None);
                let resp = ctx.app.complete(route, store, &mut cancel);
                if let Some(answered) = ex.reply(resp, shape, ctx) {
                    return answered;
                }
            }
            Step::Then(answered) => return answered,
        }
    }
}

/// Serves one connection to the end, blocking (over TLS when the server has it: the
/// handshake is done by the first reads).
pub fn serve_connection(stream: TcpStream, ctx: &ServerContext, store: &mut LazyStore) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(Some(READ_SLICE)).is_err()
        || stream
            .set_write_timeout(Some(WRITE_SLICE.min(ctx.timeouts.write)))
            .is_err()
    {
        return;
    }
    let _ = stream.set_nodelay(true);
    let Ok(mut stream) = Wire::new(stream, ctx.tls.as_ref()) else {
        return;
    };
    let mut ex = Exchange::new(4096);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let answered = answer(&mut ex, &stream, ctx, store);
        if answered == Answered::Cancelled {
            return;
        }
        if !ex.out.is_empty() {
            if write_all_or_stall(&mut stream, &ex.out, ctx.timeouts.write).is_err() {
                return;
            }
            ex.out.clear();
            ex.last_activity = Instant::now();
        }
        match answered {
            Answered::Close => return,
            Answered::Reject => {
                linger(&mut stream);
                return;
            }
            Answered::Stream(file, close) => {
                if stream_file(&mut stream, &file, &mut ex.out, ctx.timeouts.write).is_err()
                    || close
                {
                    return;
                }
                ex.streamed(Instant::now());
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
                ex.input.extend_from_slice(&chunk[..n]);
                let now = Instant::now();
                if ex.arrived(now, ctx.protocol) {
                    if write_all_or_stall(&mut stream, &ex.out, ctx.timeouts.write).is_err() {
                        return;
                    }
                    ex.out.clear();
                }
                now
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                let now = Instant::now();
                if now.saturating_duration_since(ex.last_activity) >= ctx.idle_timeout {
                    return;
                }
                now
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Instant::now(),
            Err(_) => return,
        };
        if ex.expired(ctx, now) {
            if write_all_or_stall(&mut stream, &ex.out, ctx.timeouts.write).is_ok() {
                linger(&mut stream);
            }
            return;
        }
    }
}

/// Writes all of `buf`, failing once the client has taken less than [`MIN_PROGRESS`] of it
/// in `timeout`. A blocking write with SO_SNDTIMEO may wait its whole timeout and still
/// return the few bytes it copied at the start, so writes wait in slices ([`WRITE_SLICE`])
/// and progress is judged between them: the timeout is honoured to within a slice. A client
/// that reads nothing still lets a few bytes through now and then (its kernel's window
/// opening a crack as it packs its receive queue), so a trickle is no progress.
fn write_all_or_stall(stream: &mut Wire, buf: &[u8], timeout: Duration) -> std::io::Result<()> {
    let mut pos = 0;
    let mut last_progress = Instant::now();
    let mut since_progress = 0;
    while pos < buf.len() {
        match stream.write(&buf[pos..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => {
                pos += n;
                since_progress += n;
                if since_progress >= MIN_PROGRESS || pos == buf.len() {
                    last_progress = Instant::now();
                    since_progress = 0;
                } else if last_progress.elapsed() >= timeout {
                    return Err(ErrorKind::TimedOut.into());
                }
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
    // TLS: what rustls took may still wait for the socket.
    while !stream.push()? {
        if last_progress.elapsed() >= timeout {
            return Err(ErrorKind::TimedOut.into());
        }
    }
    Ok(())
}

/// Closes after an error reply without a reset: stops sending (FIN), then reads and drops
/// what the client still sends, until it closes, [`LINGER_TIME`] passes or
/// [`LINGER_BYTES`] have come.
fn linger(stream: &mut Wire) {
    if stream.close_write().is_err() {
        return;
    }
    let deadline = Instant::now() + LINGER_TIME;
    let mut discarded = 0;
    let mut buf = [0u8; 16 * 1024];
    while discarded < LINGER_BYTES && Instant::now() < deadline {
        match stream.tcp().read(&mut buf) {
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
    stream: &mut Wire,
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
