//! Async: tokio's multi-threaded runtime, a task per connection, in the shape of mini-redis
//! (one listener, a task spawned per connection, a graceful stop told through a `watch`
//! channel). Each task drives the sans-IO [`Exchange`] like the blocking loop
//! ([`super::blocking`]) but waits without holding a thread: `/sleep`, idle and request
//! deadlines and stalled writes on the runtime's one timerfd ([`crate::deadlines`], which
//! keeps tokio's own timer, and so a kernel timer per worker park, out of the way), SQLite on
//! the blocking pool, Redis through one task that owns a pipelined connection ([`RedisCodec`]).
//! `/fib` runs inline and holds its worker, as plain async code does; that is what the lab
//! shows. `--workers` is the number of runtime worker threads; `--spin-us` makes a worker
//! that keeps running out of work spin before it parks ([`super::idle_spin`], off by default).

use std::future::Future;
use std::io::ErrorKind;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_rustls::server::TlsStream;

use super::async_h2::{self, starts_preface, PREFACE};
use super::idle_spin;
use super::request::{
    cancel_check, is_resource_exhaustion, Answered, Exchange, Step, LINGER_BYTES, LINGER_TIME,
};
use super::tls::thread_cpu_ns;
use super::{Architecture, Protocol, ServerContext, DRAIN};
use crate::app::{App, Route};
use crate::deadlines::{Deadline, PreciseTimers};
use crate::http::{FileBody, Request, Response};
use crate::store::redis_pipe::{Finished, RedisAnswer, RedisCodec, RedisRequest};
use crate::store::{LazyStore, StoreConfig, StoreError};

/// How often the accept loop looks at the stop flag (set by the signal handler).
const STOP_CHECK: Duration = Duration::from_millis(50);
/// How long accepting pauses after running out of descriptors or memory.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// The most connections taken from the backlog in one go, before the stop flag is looked at
/// again (the rest are taken at once after it).
const ACCEPT_BATCH: usize = 1024;
/// The most bytes one read takes.
const READ_CHUNK: usize = 16 * 1024;
/// While part of a request is in, how often a read wakes to check the request's deadline.
const CLOCK_SLICE: Duration = Duration::from_millis(100);
/// How long the runtime's shutdown waits for tasks still running past the drain.
const RUNTIME_SHUTDOWN: Duration = Duration::from_millis(100);
/// Requests queued for the Redis task before callers wait to queue more.
const REDIS_QUEUE: usize = 1024;
/// A Redis connect that takes longer than this fails (503).
const REDIS_CONNECT_TIMEOUT: Duration = Duration::from_millis(200);
/// Waiting requests with no reply byte from Redis for this long fail (503), and the
/// connection is replaced, as the blocking client's read timeout does.
const REDIS_REPLY_TIMEOUT: Duration = crate::store::STORE_TIMEOUT;

pub struct AsyncServer;

impl Architecture for AsyncServer {
    fn serve(
        &self,
        listener: std::net::TcpListener,
        ctx: Arc<ServerContext>,
    ) -> anyhow::Result<()> {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder
            .worker_threads(ctx.workers)
            .thread_name("async-worker")
            .enable_io()
            .enable_time();
        let spin = ctx.spin;
        if !spin.is_zero() {
            builder
                .on_thread_park(move || idle_spin::before_park(spin))
                .on_thread_unpark(move || idle_spin::after_unpark(spin));
        }
        let runtime = builder.build().context("cannot start the tokio runtime")?;
        let result = runtime.block_on(accept_loop(listener, ctx));
        // Tasks still running past the drain (a long /fib) are abandoned, not waited for.
        runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
        result
    }
}

/// What every connection task shares.
/// What every connection's task shares. The accept loop runs in `block_on`, on the server's
/// own thread, so a worker stuck in CPU work never stops accepts or the stop from being seen;
/// it takes every connection waiting in the backlog at each wakeup ([`ACCEPT_BATCH`]): a burst
/// of thousands of connects otherwise outruns the listen backlog. No semaphore bounds
/// connections (no other architecture caps them); running out of descriptors is logged and
/// answered by leaving connections in the backlog for a moment.
struct Shared {
    ctx: Arc<ServerContext>,
    /// The Redis task, when the guestbook lives in Redis.
    redis: Option<RedisClient>,
    /// Turns true when the server stops.
    stop: watch::Receiver<bool>,
    /// Every precise wait's timer (`None`: no timerfd could be had; tokio's timer then).
    timers: Option<Arc<PreciseTimers>>,
}

/// Accepts until the server stops, then tells the tasks and waits for them (at most
/// [`DRAIN`]).
async fn accept_loop(
    listener: std::net::TcpListener,
    ctx: Arc<ServerContext>,
) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    // Each task holds a clone of `done_tx`; `done_rx` yields `None` once all are dropped.
    let (done_tx, mut done_rx) = mpsc::channel::<()>(1);
    let timers = PreciseTimers::start();
    let redis = match (&ctx.app.store, ctx.protocol) {
        (StoreConfig::Redis { host, port }, Protocol::Http) => {
            Some(RedisClient::start(host.clone(), *port, timers.clone()))
        }
        _ => None,
    };
    let shared = Arc::new(Shared {
        ctx: Arc::clone(&ctx),
        redis,
        stop: stop_rx,
        timers,
    });
    let timers = shared.timers.as_deref();
    let mut tick = Deadline::new(timers, Instant::now() + STOP_CHECK);
    while !ctx.stopping() {
        tokio::select! {
            accepted = listener.accept() => {
                // Then the rest of the backlog, without waiting (see the module header).
                let mut next = Some(accepted);
                let mut taken = 0;
                while let Some(accepted) = next.take() {
                    match accepted {
                        Ok((stream, _)) => {
                            let done = done_tx.clone();
                            let shared = Arc::clone(&shared);
                            if shared.ctx.tls.is_some() {
                                tokio::spawn(serve_tls(stream, shared, done));
                            } else {
                                let stream = AsyncWire::Plain(stream);
                                tokio::spawn(Connection::new(stream, shared, done).run());
                            }
                        }
                        Err(e) if is_resource_exhaustion(&e) => {
                            eprintln!("sweetspot: accept: {e}; delaying new connections");
                            tokio::time::sleep(ACCEPT_PAUSE).await;
                            break;
                        }
                        // A connection that went bad before it was accepted (ECONNABORTED, ...).
                        Err(_) => {}
                    }
                    taken += 1;
                    if taken < ACCEPT_BATCH {
                        // Pending once the backlog is empty; the select above waits again.
                        let mut cx = TaskContext::from_waker(Waker::noop());
                        if let Poll::Ready(accepted) = listener.poll_accept(&mut cx) {
                            next = Some(accepted);
                        }
                    }
                }
            }
            _ = &mut tick => tick = Deadline::new(timers, Instant::now() + STOP_CHECK),
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(done_tx);
    let _ = tokio::time::timeout(DRAIN, done_rx.recv()).await;
    Ok(())
}

/// What one wait for input ended with.
enum Input {
    /// Bytes were appended to the input.
    Data,
    /// The client closed, the read failed, or the server is stopping.
    End,
    /// Silent for the idle timeout.
    Idle,
    /// A slice passed with nothing read: check the request deadline and wait again.
    Quiet,
}

/// The server's stop, as a future a connection keeps for its whole life.
type StopWait = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One connection's socket: cleartext, or TLS over it (tokio-rustls).
enum AsyncWire {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncWire {
    fn tcp(&self) -> &TcpStream {
        match self {
            AsyncWire::Plain(s) => s,
            AsyncWire::Tls(t) => t.get_ref().0,
        }
    }

    /// Waits for input and appends what came to `input`. Cleartext waits for readiness, then
    /// reads through a buffer on this thread's stack ([`read_into`]); TLS reads plaintext
    /// from rustls, which keeps its own buffers.
    fn poll_input(&mut self, cx: &mut TaskContext<'_>, input: &mut Vec<u8>) -> Poll<Input> {
        match self {
            AsyncWire::Plain(s) => match s.poll_read_ready(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(read_into(s, input)),
                Poll::Ready(Err(_)) => Poll::Ready(Input::End),
                Poll::Pending => Poll::Pending,
            },
            AsyncWire::Tls(t) => {
                let mut chunk = [std::mem::MaybeUninit::<u8>::uninit(); READ_CHUNK];
                let mut buf = tokio::io::ReadBuf::uninit(&mut chunk);
                match Pin::new(&mut **t).poll_read(cx, &mut buf) {
                    Poll::Ready(Ok(())) if buf.filled().is_empty() => Poll::Ready(Input::End),
                    Poll::Ready(Ok(())) => {
                        input.extend_from_slice(buf.filled());
                        Poll::Ready(Input::Data)
                    }
                    Poll::Ready(Err(e)) if e.kind() == ErrorKind::Interrupted => {
                        Poll::Ready(Input::Quiet)
                    }
                    Poll::Ready(Err(_)) => Poll::Ready(Input::End),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncRead for AsyncWire {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            AsyncWire::Plain(s) => Pin::new(s).poll_read(cx, buf),
            AsyncWire::Tls(t) => Pin::new(&mut **t).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for AsyncWire {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            AsyncWire::Plain(s) => Pin::new(s).poll_write(cx, buf),
            AsyncWire::Tls(t) => Pin::new(&mut **t).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            AsyncWire::Plain(s) => Pin::new(s).poll_flush(cx),
            AsyncWire::Tls(t) => Pin::new(&mut **t).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            AsyncWire::Plain(s) => Pin::new(s).poll_shutdown(cx),
            AsyncWire::Tls(t) => Pin::new(&mut **t).poll_shutdown(cx),
        }
    }
}

/// A connection to a `--tls-cert` server: its handshake (within the header timeout, its CPU
/// counted apart: the thread's CPU across the polls of the handshake alone), then HTTP/2 if
/// the client chose `h2` by ALPN, HTTP/1.1 otherwise.
async fn serve_tls(stream: TcpStream, shared: Arc<Shared>, done: mpsc::Sender<()>) {
    let Some(tls) = shared.ctx.tls.clone() else {
        return;
    };
    let fd = stream.as_raw_fd();
    // Before the handshake, as every connection of ours: a TLS record written after another
    // would otherwise wait for the client's delayed ACK (40 ms a response over h2).
    let _ = stream.set_nodelay(true);
    let accept = tokio_rustls::TlsAcceptor::from(Arc::clone(&tls.config)).accept(stream);
    let mut accept = std::pin::pin!(accept);
    let mut cpu_ns = 0;
    let timed = std::future::poll_fn(|cx| {
        let started = thread_cpu_ns();
        let polled = accept.as_mut().poll(cx);
        cpu_ns += thread_cpu_ns().saturating_sub(started);
        polled
    });
    let limit = shared.ctx.timeouts.header;
    let Ok(Ok(stream)) = tokio::time::timeout(limit, timed).await else {
        return;
    };
    tls.note(stream.get_ref().1, cpu_ns);
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let connection = Connection::new(AsyncWire::Tls(Box::new(stream)), shared, done);
    if h2 {
        let _done = connection._done; // held until the streams are done: the drain counts it
        let AsyncWire::Tls(stream) = connection.stream else {
            return;
        };
        let handler = handler(connection.shared);
        async_h2::serve(*stream, fd, Vec::new(), connection.stop, handler).await;
    } else {
        connection.run().await;
    }
}

/// One connection's task.
struct Connection {
    stream: AsyncWire,
    shared: Arc<Shared>,
    /// Resolves when the server stops. Made once per connection: a new wait per read would
    /// take the channel's lock for every request.
    stop: StopWait,
    /// The idle (or request-slice) wake-up, kept across reads and made again only when it
    /// must come earlier or has fired (`None`): a timer per read would take the timers' lock
    /// for every request.
    wake: Option<Deadline>,
    /// The connection's sans-IO state: input, output, deadlines (no buffers kept idle).
    ex: Exchange,
    /// Dropped when the task ends: the accept loop's drain counts these.
    _done: mpsc::Sender<()>,
    /// Nothing was read yet: the first bytes may be HTTP/2's preface ([`super::async_h2`]).
    fresh: bool,
}

impl Connection {
    fn new(stream: AsyncWire, shared: Arc<Shared>, done: mpsc::Sender<()>) -> Connection {
        let mut stop = shared.stop.clone();
        // Only cleartext may turn out to be HTTP/2 by its first bytes (TLS chose by ALPN).
        let fresh = matches!(stream, AsyncWire::Plain(_));
        Connection {
            stream,
            stop: Box::pin(async move {
                let _ = stop.wait_for(|stop| *stop).await;
            }),
            wake: None,
            shared,
            ex: Exchange::new(0),
            _done: done,
            fresh,
        }
    }

    fn ctx(&self) -> &ServerContext {
        &self.shared.ctx
    }

    /// Serves the connection to its end.
    async fn run(mut self) {
        let _ = self.stream.tcp().set_nodelay(true);
        loop {
            let answered = self.answer().await;
            if answered == Answered::Cancelled {
                return;
            }
            if !self.ex.out.is_empty() {
                if self.write_out().await.is_err() {
                    return;
                }
                self.ex.last_activity = Instant::now();
            }
            let stopping = self.ctx().stopping();
            match answered {
                Answered::Close => return,
                Answered::Reject => return self.linger().await,
                Answered::Stream(file, close) => {
                    if self.stream_file(&file).await.is_err() || close {
                        return;
                    }
                    self.ex.streamed(Instant::now());
                    continue;
                }
                Answered::Backlog if !stopping => continue,
                _ if stopping => return,
                _ => {}
            }
            let now = match self.read_some().await {
                Input::Data if self.fresh && starts_preface(&self.ex.input) => {
                    return self.h2c().await;
                }
                Input::Data => {
                    self.fresh = false;
                    let now = Instant::now();
                    if self.ex.arrived(now, self.shared.ctx.protocol)
                        && self.write_out().await.is_err()
                    {
                        return;
                    }
                    now
                }
                Input::End | Input::Idle => return,
                Input::Quiet => Instant::now(),
            };
            if self.ex.expired(&self.shared.ctx, now) {
                if self.write_out().await.is_ok() {
                    self.linger().await;
                }
                return;
            }
        }
    }

    /// A connection that began with (part of) HTTP/2's preface: the rest of it read, it is
    /// served as HTTP/2 ([`super::async_h2`]); bytes that turn out not to be the preface are
    /// HTTP/1.1's.
    async fn h2c(mut self) {
        while self.ex.input.len() < PREFACE.len() && starts_preface(&self.ex.input) {
            match self.read_some().await {
                Input::Data | Input::Quiet => {}
                Input::End | Input::Idle => return,
            }
        }
        if !self.ex.input.starts_with(PREFACE) {
            self.fresh = false;
            if !self.ex.arrived(Instant::now(), self.shared.ctx.protocol)
                || self.write_out().await.is_ok()
            {
                return Box::pin(self.run()).await;
            }
            return;
        }
        let input = std::mem::take(&mut self.ex.input);
        let _done = self._done; // held until the streams are done: the drain counts it
        let AsyncWire::Plain(stream) = self.stream else {
            return;
        };
        let fd = stream.as_raw_fd();
        async_h2::serve(stream, fd, input, self.stop, handler(self.shared)).await;
    }

    /// Answers the complete requests buffered, awaiting the work each needs.
    async fn answer(&mut self) -> Answered {
        let shared = Arc::clone(&self.shared);
        loop {
            match self.ex.next(&shared.ctx) {
                Step::Complete(route, shape) => {
                    let resp = complete(&shared, route, self.stream.tcp().as_raw_fd()).await;
                    if let Some(answered) = self.ex.reply(resp, shape, &shared.ctx) {
                        return answered;
                    }
                }
                Step::Then(answered) => return answered,
            }
        }
    }

    async fn read_some(&mut self) -> Input {
        let idle_at = self.ex.last_activity + self.ctx().idle_timeout;
        let wake_at = if self.ex.input.is_empty() {
            idle_at
        } else {
            idle_at.min(Instant::now() + CLOCK_SLICE)
        };
        // The wake-up only moves earlier here; one that is late for a later idle deadline
        // fires, finds the connection not idle (Quiet), and is made again on the next call.
        let wake = match self.wake.take() {
            Some(wake) if wake.at() <= wake_at => wake,
            _ => Deadline::new(self.shared.timers.as_deref(), wake_at),
        };
        let wake = self.wake.insert(wake);
        tokio::select! {
            biased;
            // poll_read_ready keeps this task's waker in the socket's own slot; `readable()`
            // would queue a waiter under the socket's lock on every wait.
            input = std::future::poll_fn(|cx| self.stream.poll_input(cx, &mut self.ex.input)) => input,
            _ = wake => {
                self.wake = None;
                if Instant::now() >= idle_at {
                    Input::Idle
                } else {
                    Input::Quiet
                }
            }
            _ = &mut self.stop => Input::End,
        }
    }

    /// Writes all queued output and clears it.
    async fn write_out(&mut self) -> std::io::Result<()> {
        let timeout = self.ctx().timeouts.write;
        let timers = self.shared.timers.as_deref();
        match &mut self.stream {
            AsyncWire::Plain(s) => write_all_or_stall(s, &self.ex.out, timeout, timers).await?,
            AsyncWire::Tls(t) => write_tls_or_stall(t, &self.ex.out, timeout, timers).await?,
        }
        self.ex.out.clear();
        Ok(())
    }

    /// Streams a file body in chunks through the output buffer (left empty). A file that
    /// ends early is an error: its Content-Length cannot be met, so the connection closes.
    async fn stream_file(&mut self, file: &FileBody) -> std::io::Result<()> {
        let mut offset = 0;
        while offset < file.len {
            self.ex.out.clear();
            let n = file.read_chunk(offset, &mut self.ex.out)?;
            if n == 0 {
                return Err(ErrorKind::UnexpectedEof.into());
            }
            self.write_out().await?;
            offset += n as u64;
        }
        Ok(())
    }

    /// Closes after an error reply without a reset: stops sending, then reads and drops
    /// what the client still sends, until it closes, [`LINGER_TIME`] passes or
    /// [`LINGER_BYTES`] have come.
    async fn linger(mut self) {
        if self.stream.shutdown().await.is_err() {
            return;
        }
        let deadline = tokio::time::Instant::now() + LINGER_TIME;
        let mut discarded = 0;
        let mut buf = vec![0u8; 16 * 1024];
        while discarded < LINGER_BYTES {
            match tokio::time::timeout_at(deadline, self.stream.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => discarded += n,
                _ => return,
            }
        }
    }
}

/// Reads what a readable `stream` has into `input`, through a buffer on this thread's stack
/// (not in the task, so a waiting connection holds no read buffer). Polled once, through
/// `poll_read`: a read shorter than the buffer tells tokio the socket is drained, so the next
/// wait does not begin with a read that finds nothing (a `try_read` keeps the readiness until
/// such an empty read).
fn read_into(stream: &mut TcpStream, input: &mut Vec<u8>) -> Input {
    use tokio::io::AsyncRead;
    // Uninitialized: the kernel writes what it reads, and zeroing 16 KiB per read would cost
    // more than the read of a small request.
    let mut chunk = [std::mem::MaybeUninit::<u8>::uninit(); READ_CHUNK];
    let mut buf = tokio::io::ReadBuf::uninit(&mut chunk);
    let mut cx = TaskContext::from_waker(Waker::noop());
    match Pin::new(stream).poll_read(&mut cx, &mut buf) {
        Poll::Ready(Ok(())) if buf.filled().is_empty() => Input::End,
        Poll::Ready(Ok(())) => {
            input.extend_from_slice(buf.filled());
            Input::Data
        }
        Poll::Ready(Err(e)) if e.kind() == ErrorKind::Interrupted => Input::Quiet,
        Poll::Ready(Err(_)) => Input::End,
        // The readiness was stale: wait again (`poll_read_ready` registers this task's waker).
        Poll::Pending => Input::Quiet,
    }
}

/// Writes all of `buf`, failing once the client has taken none of it for `timeout` (waited on
/// `timers`).
async fn write_all_or_stall(
    stream: &mut TcpStream,
    buf: &[u8],
    timeout: Duration,
    timers: Option<&PreciseTimers>,
) -> std::io::Result<()> {
    let mut pos = 0;
    while pos < buf.len() {
        // Usually the socket takes it all at once: no timer (and no clock read) for that.
        match stream.try_write(&buf[pos..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => {
                pos += n;
                continue;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() != ErrorKind::WouldBlock => return Err(e),
            Err(_) => {}
        }
        let stalled = Deadline::new(timers, Instant::now() + timeout);
        tokio::select! {
            biased;
            ready = stream.writable() => ready?,
            _ = stalled => return Err(ErrorKind::TimedOut.into()),
        }
    }
    Ok(())
}

/// [`write_all_or_stall`] through TLS: rustls takes the plaintext, and the write is done once
/// the ciphertext is flushed to the socket.
async fn write_tls_or_stall(
    stream: &mut TlsStream<TcpStream>,
    buf: &[u8],
    timeout: Duration,
    timers: Option<&PreciseTimers>,
) -> std::io::Result<()> {
    let mut pos = 0;
    loop {
        // Usually the socket takes it all at once: no timer (and no clock read) for that.
        let now = tls_step(
            stream,
            &mut TaskContext::from_waker(Waker::noop()),
            &buf[pos..],
        );
        let step = match now {
            Poll::Ready(step) => step,
            Poll::Pending => {
                let stalled = Deadline::new(timers, Instant::now() + timeout);
                let progress = std::future::poll_fn(|cx| tls_step(stream, cx, &buf[pos..]));
                tokio::select! {
                    biased;
                    step = progress => step,
                    _ = stalled => return Err(ErrorKind::TimedOut.into()),
                }
            }
        };
        match step {
            Ok(None) => return Ok(()),
            Ok(Some(0)) => return Err(ErrorKind::WriteZero.into()),
            Ok(Some(n)) => pos += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// One step of [`write_tls_or_stall`]: plaintext given to rustls (`Some(bytes taken)`), or,
/// with none left, the ciphertext flushed (`None`).
fn tls_step(
    stream: &mut TlsStream<TcpStream>,
    cx: &mut TaskContext<'_>,
    rest: &[u8],
) -> Poll<std::io::Result<Option<usize>>> {
    if rest.is_empty() {
        Pin::new(stream).poll_flush(cx).map_ok(|()| None)
    } else {
        Pin::new(stream).poll_write(cx, rest).map_ok(Some)
    }
}

/// Waits `duration` to the nanosecond, on the runtime's one timerfd ([`PreciseTimers`]); on
/// tokio's timer (its millisecond ticks) if none could be had.
async fn precise_sleep(shared: &Shared, duration: Duration) {
    if !duration.is_zero() {
        Deadline::new(shared.timers.as_deref(), Instant::now() + duration).await
    }
}

/// Does the work of a route: CPU work inline, waits as timers, the store off the workers.
/// `None`: a `/fib` gave up, its client on `stream` gone or the drain deadline passed.
async fn complete(shared: &Shared, route: Route, stream: RawFd) -> Option<Response> {
    let resp = match route {
        Route::Ready(resp) => resp,
        // Inline on purpose: see the module header.
        Route::Fib(_) => return App::compute(route, &mut cancel_check(stream, &shared.ctx, None)),
        Route::Sleep(ms) => {
            precise_sleep(shared, Duration::from_millis(ms)).await;
            App::sleep_done(ms)
        }
        // A blocking wait holds the tokio worker that runs the task, as a synchronous driver
        // called from async code does; the CPU runs inline, as `/fib` does.
        Route::Work(w) => {
            if w.blocking {
                std::thread::sleep(w.wait);
            } else if !w.wait.is_zero() {
                precise_sleep(shared, w.wait).await;
            }
            let cancel = &mut cancel_check(stream, &shared.ctx, None);
            return App::compute(Route::Work(w.after_wait()), cancel);
        }
        Route::GuestbookView(_) | Route::GuestbookPost(_) => match &shared.redis {
            Some(redis) => redis.call(route).await,
            None => {
                let ctx = Arc::clone(&shared.ctx);
                tokio::task::spawn_blocking(move || {
                    // Connections come from (and go back to) the process's SQLite pool.
                    let mut store = LazyStore::new(ctx.app.store.clone());
                    ctx.app.complete(route, &mut store, &mut || false)
                })
                .await
                .unwrap_or(Some(Response::error(500)))?
            }
        },
    };
    Some(resp)
}

/// An HTTP/2 stream's handler ([`async_h2`]): the request routed and completed as over
/// HTTP/1.1, counted as served.
fn handler(shared: Arc<Shared>) -> impl Fn(Request, RawFd) -> Pin<Box<StreamAnswer>> + Clone {
    move |request, fd| {
        let shared = Arc::clone(&shared);
        Box::pin(async move {
            let route = shared.ctx.app.route(&request);
            let response = complete(&shared, route, fd).await;
            shared.ctx.served.add(1);
            response
        })
    }
}

/// What an HTTP/2 stream's handler returns.
type StreamAnswer = dyn Future<Output = Option<Response>> + Send;

/// One guestbook call for the Redis task, and where its answer goes.
/// Where a store task sends one request's answer.
type Reply = oneshot::Sender<Result<RedisAnswer, StoreError>>;

struct RedisJob {
    request: RedisRequest,
    reply: Reply,
}

/// The connection tasks' handle on the Redis task.
struct RedisClient {
    jobs: mpsc::Sender<RedisJob>,
}

impl RedisClient {
    /// Spawns the task that owns the Redis connection (its reply deadline on `timers`).
    fn start(host: String, port: u16, timers: Option<Arc<PreciseTimers>>) -> RedisClient {
        let (jobs, rx) = mpsc::channel(REDIS_QUEUE);
        tokio::spawn(redis_task(host, port, rx, timers));
        RedisClient { jobs }
    }

    /// Runs a guestbook route on Redis; 503 when the store is unavailable.
    async fn call(&self, route: Route) -> Response {
        let request = App::store_request(route).expect("only guestbook routes reach the store");
        let (reply, answer) = oneshot::channel();
        let gone = || StoreError("redis: the store task is gone".into());
        let answer = match self.jobs.send(RedisJob { request, reply }).await {
            Ok(()) => answer.await.unwrap_or_else(|_| Err(gone())),
            Err(_) => Err(gone()),
        };
        App::store_answered(answer)
    }
}

/// Connects when a job comes, pipelines jobs over the connection until it fails, and
/// connects again for the next job: a store that goes away answers 503 and comes back
/// without a restart.
/// The Redis client of the async architecture: the redis crate encodes and parses, the
/// [`RedisCodec`] frames, over a tokio stream (the same path as the event loops' pipe, so the
/// architectures differ only in who waits, and no async client features are needed).
async fn redis_task(
    host: String,
    port: u16,
    mut jobs: mpsc::Receiver<RedisJob>,
    timers: Option<Arc<PreciseTimers>>,
) {
    while let Some(first) = jobs.recv().await {
        let connected = tokio::time::timeout(
            REDIS_CONNECT_TIMEOUT,
            TcpStream::connect((host.as_str(), port)),
        )
        .await;
        match connected {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                redis_pipeline(stream, first, &mut jobs, timers.as_deref()).await;
            }
            Ok(Err(e)) => {
                let _ = first.reply.send(Err(StoreError(format!(
                    "redis: connect {host}:{port}: {e}"
                ))));
            }
            Err(_) => {
                let _ = first.reply.send(Err(StoreError(format!(
                    "redis: connect {host}:{port}: timed out"
                ))));
            }
        }
    }
}

/// Pipelines jobs over one connection: sends their commands as they come and matches
/// replies in order. Returns when the connection fails (every waiting job then gets the
/// error) or the server is gone. The reply deadline is one wait on `timers`, made again only
/// when it fires (then due from the last byte heard) or when waiting starts.
async fn redis_pipeline(
    mut stream: TcpStream,
    first: RedisJob,
    jobs: &mut mpsc::Receiver<RedisJob>,
    timers: Option<&PreciseTimers>,
) {
    let (mut rd, mut wr) = stream.split();
    let mut codec = RedisCodec::default();
    let mut done: Finished<Reply> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    codec.push(first.reply, &first.request, Instant::now());
    let mut heard = Instant::now();
    let mut reply_wait: Option<Deadline> = None;
    let failure = loop {
        if !codec.is_waiting() {
            reply_wait = None;
        } else if reply_wait.is_none() {
            reply_wait = Some(Deadline::new(timers, heard + REDIS_REPLY_TIMEOUT));
        }
        let waited = std::future::poll_fn(|cx| match reply_wait.as_mut() {
            Some(wait) => Pin::new(wait).poll(cx),
            None => Poll::Pending,
        });
        tokio::select! {
            read = rd.read(&mut chunk) => match read {
                Ok(0) => break StoreError("redis: connection closed".into()),
                Ok(n) => {
                    heard = Instant::now();
                    if let Err(e) = codec.feed(&chunk[..n], &mut done) {
                        break e;
                    }
                    for (reply, answer) in done.drain(..) {
                        let _ = reply.send(answer);
                    }
                }
                Err(e) => break StoreError(format!("redis: {e}")),
            },
            written = wr.write(codec.output()), if !codec.output().is_empty() => match written {
                Ok(0) => break StoreError("redis: connection closed".into()),
                Ok(n) => codec.wrote(n),
                Err(e) => break StoreError(format!("redis: {e}")),
            },
            job = jobs.recv() => match job {
                Some(job) => {
                    if !codec.is_waiting() {
                        heard = Instant::now();
                    }
                    codec.push(job.reply, &job.request, Instant::now());
                }
                None => return,
            },
            _ = waited => {
                reply_wait = None;
                if heard.elapsed() >= REDIS_REPLY_TIMEOUT {
                    break StoreError("redis: no reply in time".into());
                }
            }
        }
    };
    codec.fail_all(&failure, &mut done);
    for (reply, answer) in done {
        let _ = reply.send(answer);
    }
}
