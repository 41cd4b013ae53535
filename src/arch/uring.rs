//! Uring: io_uring, one ring per thread, completions instead of readiness. `--workers` threads
//! (default one per core) each own a ring ([`crate::sys::uring::Ring`]), a SO_REUSEPORT
//! listener with a multishot accept, and the connections it accepted. Requests are answered by
//! the step the event loop shares ([`pipeline::answer`]); `/sleep` is a ring timeout and Redis a
//! [`RedisPipe`] polled on the ring, while `/fib` and SQLite run inline as they do in epoll.
//! Where io_uring cannot be set up, [`UringServer::check`] fails before the ready line and
//! `serve` exits 2. Over TLS (`--tls-cert`) a connection's received bytes go through its
//! [`Sealer`] into its input, and its replies are sealed into the buffer its send takes.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::pipeline::{self, Deadlines, Ending, Pipeline, PipelineHost, MAX_BUFFERED};
use super::request::{
    cancel_check, is_resource_exhaustion, LINGER_BYTES, LINGER_TIME, MAX_QUEUED_OUTPUT,
};
use super::tls::Sealer;
use super::{Architecture, Protocol, ServerContext, DRAIN};
use crate::app::{App, Route};
use crate::http::{Response, FILE_CHUNK};
use crate::store::redis_pipe::{Finished, RedisPipe};
use crate::store::{LazyStore, StoreConfig};
use crate::sys::uring::{Completion, Ring, Socket};

/// How often the ring wakes to check deadlines and the stop flag.
const TICK: Duration = Duration::from_millis(200);
/// A ring that has idled (waited [`IDLE`] or longer) in its last [`BUSY_TURNS`] turns runs the
/// work of waits due [`SLICE`] by slice: after each it sends what is done and takes what
/// arrived (see `RingLoop::due`). One with work always ready stops slicing after that many.
const SLICE: Duration = Duration::from_micros(500);
const IDLE: Duration = Duration::from_micros(100);
const BUSY_TURNS: u32 = 16;
/// Submission queue size of each ring.
const RING_ENTRIES: u32 = 1024;
/// Provided buffers per ring, and their size: many small ones, since every connection with
/// input waiting holds one until the loop reaps it (thousands at c10k; too few and receives
/// end with ENOBUFS and must be re-armed, which collapses throughput).
const BUFFERS: u16 = 8192;
const BUFFER_SIZE: usize = 512;
/// Largest send buffer a connection keeps for its next replies (larger ones, from big
/// replies, are freed once sent).
const KEPT_OUTPUT: usize = 16 * 1024;

/// What an operation is for: the top byte of its `user_data`.
const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const SEND: u64 = 3;
const SLEEP: u64 = 4;
const TICKER: u64 = 5;
const REDIS: u64 = 6;
const CANCEL: u64 = 7;

/// `user_data`: kind (8 bits), connection slot (24 bits), generation (32 bits).
fn tag(kind: u64, slot: usize, generation: u32) -> u64 {
    (kind << 56) | ((slot as u64 & 0xff_ffff) << 32) | generation as u64
}

fn untag(user_data: u64) -> (u64, usize, u32) {
    (
        user_data >> 56,
        ((user_data >> 32) & 0xff_ffff) as usize,
        user_data as u32,
    )
}

/// The io_uring architecture.
pub struct UringServer;

fn new_ring() -> anyhow::Result<Ring> {
    Ring::new(RING_ENTRIES, BUFFERS, BUFFER_SIZE).map_err(|e| {
        crate::usage(format!(
            "uring: io_uring is unavailable here ({e}); see /proc/sys/kernel/io_uring_disabled, \
             the seccomp profile and `ulimit -l`"
        ))
    })
}

impl Architecture for UringServer {
    fn check(&self) -> anyhow::Result<()> {
        new_ring().map(drop)
    }

    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()> {
        let threads = ctx.workers.max(1);
        // A SO_REUSEPORT listener per ring: the kernel spreads connections over them. (Multishot
        // accepts armed by every ring on one shared listener all land on the ring that armed
        // first, so the others would sit idle.)
        let addr = listener.local_addr()?;
        let mut listeners = vec![listener];
        for _ in 1..threads {
            listeners.push(
                super::listen::bind(addr, true)
                    .with_context(|| format!("cannot add a SO_REUSEPORT listener on {addr}"))?,
            );
        }
        let mut handles = Vec::with_capacity(threads);
        for (i, listener) in listeners.into_iter().enumerate() {
            let ctx = Arc::clone(&ctx);
            let accepted = ctx.accepted.new_loop();
            let handle = std::thread::Builder::new()
                .name(format!("uring-{i}"))
                .spawn(move || -> anyhow::Result<()> {
                    let ring = new_ring()?;
                    let _wake = crate::sys::stop::wake_on_stop(&listener);
                    RingLoop::new(ring, listener, ctx, accepted).run()
                })
                .context("spawning a ring thread")?;
            handles.push(handle);
        }
        let mut result = Ok(());
        for handle in handles {
            let outcome = handle
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("a ring thread panicked")));
            if result.is_ok() {
                result = outcome;
            }
        }
        result
    }
}

struct Conn {
    stream: TcpStream,
    generation: u32,
    /// Its output is what is not yet handed to a send.
    pipeline: Pipeline,
    /// Bytes of the send in flight (0: none).
    sending: usize,
    /// Its idle, write-stall and lingering deadlines.
    deadlines: Deadlines,
    /// What is left of the route whose ring timeout is armed.
    waiting: Option<Route>,
    peer_closed: bool,
    recv_armed: bool,
    recv_cancelled: bool,
    /// A receive failed: the connection is dead.
    broken: bool,
    /// Listed in the loop's `dirty`, to be processed at the end of this turn.
    dirty: bool,
    /// Whether the socket is in the ring's file table (at the connection's slot).
    fixed: Fixed,
    /// Over TLS: the connection's rustls, and the ciphertext waiting for the next send (what
    /// a send did not take goes back to its front).
    tls: Option<Box<(Sealer, Vec<u8>)>>,
}

/// A connection's place in the ring's table of registered files. A connection is registered
/// at its second send, once it has shown it stays (a register call each way is a system
/// call, which a connection that sends one reply would only pay for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fixed {
    /// Nothing sent yet.
    Fresh,
    /// One send so far.
    SentOnce,
    /// Registered: sends name the slot.
    Yes,
    /// Registering failed (no table, or no room): sends name the descriptor.
    Refused,
}

impl Conn {
    fn queued(&self) -> usize {
        self.pipeline.out.len() + self.sending + self.tls.as_ref().map_or(0, |t| t.1.len())
    }
}

enum RingStore {
    Blocking(LazyStore),
    Redis {
        pipe: RedisPipe<(usize, u32)>,
        /// The poll armed on the socket: its sequence number (in its `user_data`), the pipe
        /// generation and the events it waits for.
        polling: Option<(u32, u64, u32)>,
        /// The sequence number of the last poll armed.
        poll_seq: u32,
    },
}

/// A connection gets one multishot receive into the ring's registered provided buffers; its
/// bytes are copied into the connection's input and the buffer goes straight back. Replies are
/// appended to the connection's output, and once per loop turn every connection with output and
/// no send in flight gets one send, all submitted together with the next wait (one
/// `io_uring_enter` per turn, however many connections were served; a ring that has idled
/// lately takes the work of waits due in slices, each a turn of its own: see `due`). Past
/// [`MAX_QUEUED_OUTPUT`] the receive is cancelled and no more requests are answered until the
/// client drains its output; it is re-armed then (and whenever a multishot ends on its own,
/// e.g. when the provided buffers ran out). Static files go out in
/// [`FILE_CHUNK`](crate::http::FILE_CHUNK)s, each when the socket has taken the previous one.
/// Deadlines (idle, header, body, write, lingering after an error) are checked every [`TICK`].
///
/// What a small keep-alive request costs (`benches/modern_vs_nginx.sh` measures it against
/// nginx): the ring defers completion work until the thread asks for it (`DEFER_TASKRUN`, see
/// [`Ring`]); a connection's sends name it by its slot in the registered-file table from its
/// second reply on; a turn reads the clock once, parses each request head once, keeps its send
/// buffer and lists the connections it touched in a plain vector. What remains is mostly the
/// kernel's TCP path: a reply sent over loopback runs the client's receive processing on this
/// thread.
struct RingLoop {
    ring: Ring,
    listener: TcpListener,
    /// Connections this ring accepted (the stats line lists each ring's).
    accepted: Arc<AtomicU64>,
    accepting: bool,
    accept_paused_until: Option<Instant>,
    ctx: Arc<ServerContext>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_generation: u32,
    store: RingStore,
    /// Connections touched this turn (each listed once: see `Conn::dirty`).
    dirty: Vec<usize>,
    /// Waits that are over, whose work is left to run. A ring that sent a turn's replies
    /// together (its turn ran every wait due at once) read the next requests together, began
    /// their waits together and ended them together: at 256 connections, 20 us of CPU and 2 ms
    /// waits each ring's connections went round in one bunch, 2 ms idle, then 3.6 ms of work
    /// (42,000 req/s, 1.18 of 1.7 cores used, p50 5.8 ms). A ring that idles takes a bunch
    /// [`SLICE`] by slice (48,000 to 53,000 req/s, p50 4.0 to 4.6 ms); one busy throughout
    /// keeps its turns whole: sliced, its batches cost a request 31 to 37 us of CPU, not 27.
    due: std::collections::VecDeque<(usize, u32)>,
    /// The ring's turns since it last idled: under [`BUSY_TURNS`], it slices its due work.
    busy_turns: u32,
    /// The time at the start of this turn: one clock read per wake-up, not per request.
    now: Instant,
    last_sweep: Instant,
}

impl RingLoop {
    fn new(
        ring: Ring,
        listener: TcpListener,
        ctx: Arc<ServerContext>,
        accepted: Arc<AtomicU64>,
    ) -> RingLoop {
        let store = match &ctx.app.store {
            StoreConfig::Redis { host, port } => RingStore::Redis {
                pipe: RedisPipe::new(host, *port),
                polling: None,
                poll_seq: 0,
            },
            other => RingStore::Blocking(LazyStore::new(other.clone())),
        };
        RingLoop {
            ring,
            listener,
            accepted,
            accepting: false,
            accept_paused_until: None,
            ctx,
            conns: Vec::new(),
            free: Vec::new(),
            next_generation: 0,
            store,
            dirty: Vec::new(),
            due: std::collections::VecDeque::new(),
            busy_turns: BUSY_TURNS,
            now: Instant::now(),
            last_sweep: Instant::now(),
        }
    }

    fn arm_accept(&mut self) -> anyhow::Result<()> {
        if !self.accepting {
            self.ring
                .accept_multi(self.listener.as_fd(), tag(ACCEPT, 0, 0))
                .context("arming accept")?;
            self.accepting = true;
        }
        Ok(())
    }

    fn run(&mut self) -> anyhow::Result<()> {
        self.arm_accept()?;
        self.ring.timeout(TICK, tag(TICKER, 0, 0))?;
        let mut completions = Vec::with_capacity(1024);
        let mut drain_deadline = None;
        loop {
            let now = Instant::now();
            self.now = now;
            if self.ctx.stopping() {
                let deadline = *drain_deadline.get_or_insert_with(|| {
                    if self.accepting {
                        let _ = self.ring.cancel(tag(ACCEPT, 0, 0), tag(CANCEL, 0, 0));
                    }
                    self.accept_paused_until = None;
                    now + DRAIN
                });
                self.close_idle(Duration::ZERO);
                if self.conns.iter().all(Option::is_none) || now >= deadline {
                    return Ok(());
                }
            }
            let waits = self.due.is_empty();
            if waits {
                self.ring.submit_and_wait().context("io_uring_enter")?;
            } else {
                // Work is left: send what is done, and take what arrived meanwhile.
                self.ring
                    .submit_and_take_ready()
                    .context("io_uring_enter")?;
            }
            self.now = Instant::now();
            self.busy_turns = if waits && self.now - now >= IDLE {
                0
            } else {
                self.busy_turns.saturating_add(1)
            };
            let now = self.now;
            completions.clear();
            let conns = &mut self.conns;
            let dirty = &mut self.dirty;
            self.ring.reap(&mut completions, |user_data, bytes| {
                let (kind, slot, generation) = untag(user_data);
                if kind != RECV {
                    return;
                }
                let Some(conn) = conns.get_mut(slot).and_then(Option::as_mut) else {
                    return;
                };
                if conn.generation != generation {
                    return;
                }
                if let Some((_, discarded)) = conn.deadlines.lingering.as_mut() {
                    *discarded += bytes.len();
                } else if let Some(tls) = conn.tls.as_mut() {
                    if tls.0.receive(bytes, &mut conn.pipeline.input).is_err() {
                        // Not TLS, or broken: dropped (without rustls's alert).
                        conn.broken = true;
                    }
                } else {
                    conn.pipeline.input.extend_from_slice(bytes);
                }
                conn.deadlines.last_active = now;
                if !conn.dirty {
                    conn.dirty = true;
                    dirty.push(slot);
                }
            });
            for c in completions.drain(..) {
                self.complete_op(c)?;
            }
            self.finish_turn();
            self.run_due();
        }
    }

    /// Runs the work of waits that are over, and queues their replies. Slicing, it runs none
    /// while what this turn read has something to submit (a reply, a wait to begin), and else
    /// runs them until [`SLICE`] has passed (one at least).
    fn run_due(&mut self) {
        let slicing = self.busy_turns < BUSY_TURNS;
        if slicing && self.ring.unsubmitted() > 0 {
            return;
        }
        let until = Instant::now() + SLICE;
        while let Some((slot, generation)) = self.due.pop_front() {
            let then = self.live(slot, generation).and_then(|c| c.waiting.take());
            if let Some(resp) = then.and_then(|route| self.start(slot, generation, route)) {
                self.complete(slot, generation, resp);
            }
            if slicing && Instant::now() >= until {
                break;
            }
        }
        self.finish_turn();
    }

    /// A multishot accept's completion: the new connection (unless stopping), and the accept
    /// armed again when it ended (paused for 100 ms when the process ran out of files).
    fn on_accept(&mut self, c: Completion) -> anyhow::Result<()> {
        if let Some(stream) = c.accepted {
            self.accepted.fetch_add(1, Ordering::Relaxed);
            if !self.ctx.stopping() {
                let _ = stream.set_nodelay(true);
                self.insert(stream);
            }
        }
        if c.more {
            return Ok(());
        }
        self.accepting = false;
        let e = std::io::Error::from_raw_os_error(-c.result);
        if c.result < 0 && is_resource_exhaustion(&e) {
            eprintln!(
                "sweetspot: accept: {e} with {} connections; pausing accepts",
                self.conns.iter().flatten().count()
            );
            self.accept_paused_until = Some(Instant::now() + Duration::from_millis(100));
        } else if !self.ctx.stopping() && self.accept_paused_until.is_none() {
            self.arm_accept()?;
        }
        Ok(())
    }

    /// A send's completion: what was not written goes back before the pending output, a
    /// buffer fully sent is kept for the next reply, a failed send breaks the connection.
    fn on_sent(&mut self, slot: usize, generation: u32, c: Completion) {
        let now = self.now;
        let Some(conn) = self.live(slot, generation) else {
            return;
        };
        let mut buffer = c.sent_buffer.unwrap_or_default();
        conn.sending = 0;
        if c.result <= 0 {
            conn.broken = true;
        } else {
            let n = c.result as usize;
            // Over TLS the buffer was ciphertext, and what is left of it goes back there.
            let unsent = match conn.tls.as_mut() {
                Some(tls) => &mut tls.1,
                None => &mut conn.pipeline.out,
            };
            if n < buffer.len() {
                let mut rest = buffer[n..].to_vec();
                rest.extend_from_slice(unsent);
                *unsent = rest;
            } else if unsent.is_empty() && buffer.capacity() <= KEPT_OUTPUT {
                // The next reply is written into the same allocation.
                buffer.clear();
                *unsent = buffer;
            }
            conn.deadlines.last_active = now;
            conn.deadlines.stalled_since = None;
        }
        self.mark(slot);
    }

    fn complete_op(&mut self, c: Completion) -> anyhow::Result<()> {
        let (kind, slot, generation) = untag(c.user_data);
        match kind {
            ACCEPT => self.on_accept(c)?,
            RECV => {
                let Some(conn) = self.live(slot, generation) else {
                    return Ok(());
                };
                if c.result == 0 {
                    conn.peer_closed = true;
                } else if c.result < 0 && c.result != -libc::ENOBUFS && c.result != -libc::ECANCELED
                {
                    conn.broken = true;
                }
                if !c.more {
                    conn.recv_armed = false;
                    conn.recv_cancelled = false;
                }
                self.mark(slot);
            }
            SEND => self.on_sent(slot, generation, c),
            SLEEP => self.due.push_back((slot, generation)),
            TICKER => {
                self.ring.timeout(TICK, tag(TICKER, 0, 0))?;
                self.on_tick()?;
            }
            REDIS => {
                // A poll replaced or cancelled earlier (its sequence is not the armed one)
                // says nothing about the live socket.
                if let RingStore::Redis { polling, .. } = &mut self.store {
                    if polling.is_some_and(|(seq, _, _)| seq == generation) {
                        *polling = None;
                        self.redis_step(|pipe| pipe.on_ready());
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn on_tick(&mut self) -> anyhow::Result<()> {
        let now = Instant::now();
        if let Some(until) = self.accept_paused_until {
            if now >= until && !self.ctx.stopping() {
                self.accept_paused_until = None;
                self.arm_accept()?;
            }
        }
        self.redis_step(|pipe| pipe.expire(Instant::now()));
        if now.saturating_duration_since(self.last_sweep) >= pipeline::SWEEP_EVERY {
            self.last_sweep = now;
            self.close_idle(self.ctx.idle_timeout);
        }
        Ok(())
    }

    fn live(&mut self, slot: usize, generation: u32) -> Option<&mut Conn> {
        self.conns
            .get_mut(slot)
            .and_then(Option::as_mut)
            .filter(|c| c.generation == generation)
    }

    fn insert(&mut self, stream: TcpStream) {
        let tls = match &self.ctx.tls {
            Some(tls) => match Sealer::new(tls) {
                Ok(sealer) => Some(Box::new((sealer, Vec::new()))),
                Err(_) => return,
            },
            None => None,
        };
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        self.next_generation = self.next_generation.wrapping_add(1);
        self.conns[slot] = Some(Conn {
            stream,
            generation: self.next_generation,
            pipeline: Pipeline::default(),
            sending: 0,
            deadlines: Deadlines::new(Instant::now()),
            waiting: None,
            peer_closed: false,
            recv_armed: false,
            recv_cancelled: false,
            broken: false,
            dirty: false,
            fixed: Fixed::Fresh,
            tls,
        });
        self.mark(slot);
    }

    fn close(&mut self, slot: usize) {
        if let Some(conn) = self.conns[slot].take() {
            if conn.fixed == Fixed::Yes {
                // The table's reference would keep the socket open past its descriptor.
                let _ = self.ring.unfix(slot as u32);
            }
            // Ends the multishot receive (it completes with 0) so the kernel lets go of the
            // socket; the descriptor closes when `stream` drops.
            let _ = conn.stream.shutdown(Shutdown::Both);
            if conn.recv_armed {
                let _ = self
                    .ring
                    .cancel(tag(RECV, slot, conn.generation), tag(CANCEL, 0, 0));
            }
            self.free.push(slot);
        }
    }

    /// Lists connection `slot` for processing at the end of this turn.
    fn mark(&mut self, slot: usize) {
        if let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) {
            if !conn.dirty {
                conn.dirty = true;
                self.dirty.push(slot);
            }
        }
    }

    /// Processes every connection touched this turn, then hands each one's output to a
    /// send: the submissions all go in with the next wait.
    fn finish_turn(&mut self) {
        // Processing may list more (a store reply for another connection): they are taken
        // in this same pass.
        let mut i = 0;
        while let Some(&slot) = self.dirty.get(i) {
            i += 1;
            // A slot closed (and perhaps reused) since it was listed is skipped or processed
            // once, by its flag.
            match self.conns[slot].as_mut() {
                Some(conn) if conn.dirty => conn.dirty = false,
                _ => continue,
            }
            self.process(slot);
        }
        self.dirty.clear();
    }

    /// Answers what the connection holds, refilling from a streamed file once the socket has
    /// taken what was queued (and answering what waited behind a file that ended). `false`:
    /// the connection is gone (closed here, or before).
    fn answer_and_refill(&mut self, slot: usize) -> bool {
        loop {
            self.answer(slot);
            let Some(conn) = self.conns[slot].as_mut() else {
                return false;
            };
            if conn.queued() >= FILE_CHUNK {
                return true;
            }
            let Some((file, offset)) = conn.pipeline.file.as_mut() else {
                return true;
            };
            match file.read_chunk(*offset, &mut conn.pipeline.out) {
                Ok(n) if n > 0 => {
                    *offset += n as u64;
                    if *offset < file.len {
                        return true;
                    }
                    conn.pipeline.file = None;
                }
                _ => {
                    self.close(slot);
                    return false;
                }
            }
        }
    }

    fn process(&mut self, slot: usize) {
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if conn.broken {
            self.close(slot);
            return;
        }
        if let Some((until, discarded)) = conn.deadlines.lingering {
            if conn.peer_closed || discarded >= LINGER_BYTES || self.now >= until {
                self.close(slot);
            } else if !conn.recv_armed {
                self.arm_recv(slot);
            }
            return;
        }
        // The request clock sees the new input after the answers (in `answer`): what they
        // take is no longer waited for, and the head is parsed once.
        if (conn.pipeline.pending.is_some() || conn.pipeline.close_after_flush)
            && conn.pipeline.unanswered() > MAX_BUFFERED
        {
            self.close(slot);
            return;
        }
        if !self.answer_and_refill(slot) {
            return;
        }
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        let ending = conn.pipeline.ending(conn.queued(), conn.peer_closed);
        if ending == Some(Ending::Linger) {
            // The error reply is out: stop sending, keep reading until the client is done.
            if conn.stream.shutdown(Shutdown::Write).is_err() {
                self.close(slot);
                return;
            }
            conn.deadlines.lingering = Some((self.now + LINGER_TIME, 0));
            if !conn.recv_armed {
                self.arm_recv(slot);
            }
            return;
        }
        if ending == Some(Ending::Close) {
            self.close(slot);
            return;
        }
        let backlogged = conn.queued() >= MAX_QUEUED_OUTPUT;
        let want_recv = !conn.peer_closed && !backlogged;
        if want_recv && !conn.recv_armed {
            self.arm_recv(slot);
        } else if !want_recv && conn.recv_armed && !conn.recv_cancelled && !conn.peer_closed {
            conn.recv_cancelled = true;
            let target = tag(RECV, slot, conn.generation);
            if self.ring.cancel(target, tag(CANCEL, 0, 0)).is_err() {
                self.close(slot);
                return;
            }
        }
        self.send(slot);
    }

    fn arm_recv(&mut self, slot: usize) {
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        let user_data = tag(RECV, slot, conn.generation);
        if self
            .ring
            .recv_multi(conn.stream.as_fd(), user_data)
            .is_err()
        {
            self.close(slot);
            return;
        }
        if let Some(conn) = self.conns[slot].as_mut() {
            conn.recv_armed = true;
            conn.recv_cancelled = false;
        }
    }

    fn send(&mut self, slot: usize) {
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if conn.sending > 0 {
            return;
        }
        let buffer = match conn.tls.as_mut() {
            Some(tls) => {
                let (sealer, cipher) = &mut **tls;
                let sealed = if conn.pipeline.out.is_empty() {
                    sealer.flush_into(cipher)
                } else {
                    sealer.seal(&conn.pipeline.out, cipher)
                };
                conn.pipeline.out.clear();
                if sealed.is_err() {
                    self.close(slot);
                    return;
                }
                if cipher.is_empty() {
                    return;
                }
                std::mem::take(cipher)
            }
            None if conn.pipeline.out.is_empty() => return,
            None => std::mem::take(&mut conn.pipeline.out),
        };
        conn.sending = buffer.len();
        conn.deadlines.stalled_since.get_or_insert(self.now);
        conn.fixed = match conn.fixed {
            Fixed::Fresh => Fixed::SentOnce,
            Fixed::SentOnce if self.ring.fix(slot as u32, conn.stream.as_fd()) => Fixed::Yes,
            Fixed::SentOnce => Fixed::Refused,
            settled => settled,
        };
        let socket = match conn.fixed {
            Fixed::Yes => Socket::Fixed(slot as u32),
            _ => Socket::Fd(conn.stream.as_fd()),
        };
        let user_data = tag(SEND, slot, conn.generation);
        if self.ring.send(socket, buffer, user_data).is_err() {
            self.close(slot);
        }
    }

    fn answer(&mut self, slot: usize) {
        let ctx = Arc::clone(&self.ctx);
        pipeline::answer(self, slot, &ctx);
    }

    /// Starts the work of a route: the response if it is ready now, or `None` when it will
    /// come from a ring timeout or the store.
    fn start(&mut self, slot: usize, generation: u32, route: Route) -> Option<Response> {
        match route {
            Route::Ready(resp) => Some(resp),
            // A blocking wait holds the ring's thread.
            Route::Work(w) if w.blocking && !w.wait_left().is_zero() => {
                std::thread::sleep(w.wait_left());
                self.start(slot, generation, Route::Work(w.after_wait()))
            }
            Route::Sleep(_) | Route::Work(_) if !route.wait().is_zero() => {
                let wait = route.wait();
                if let Some(conn) = self.conns[slot].as_mut() {
                    conn.waiting = Some(App::after_wait(route));
                }
                let user_data = tag(SLEEP, slot, generation);
                match self.ring.timeout(wait, user_data) {
                    Ok(()) => None,
                    Err(_) => Some(Response::error(503)),
                }
            }
            Route::Sleep(ms) => Some(App::sleep_done(ms)),
            Route::Fib(_) | Route::Work(_) => {
                // CPU work whose client hung up (or past the drain) gives up: close, no reply.
                let fd = self.conns[slot].as_ref()?.stream.as_raw_fd();
                let ctx = Arc::clone(&self.ctx);
                let resp = App::compute(route, &mut cancel_check(fd, &ctx, None));
                if resp.is_none() {
                    self.close(slot);
                }
                resp
            }
            Route::GuestbookView(_) | Route::GuestbookPost(_) => match &mut self.store {
                RingStore::Blocking(store) => self.ctx.app.complete(route, store, &mut || false),
                RingStore::Redis { pipe, .. } => {
                    let request =
                        App::store_request(route).expect("only guestbook routes reach the store");
                    match pipe.submit((slot, generation), request) {
                        Ok(()) => {
                            self.redis_step(|pipe| pipe.on_ready());
                            None
                        }
                        Err(e) => Some(App::guestbook_page(Err(e))),
                    }
                }
            },
        }
    }

    /// Delivers the reply of a pending request from a timeout or the store.
    fn complete(&mut self, slot: usize, generation: u32, resp: Response) {
        if self
            .live(slot, generation)
            .is_some_and(|c| c.pipeline.pending.is_some())
        {
            self.deliver(slot, &resp);
            self.mark(slot);
        }
    }

    fn deliver(&mut self, slot: usize, resp: &Response) {
        if let Some(conn) = self.conns[slot].as_mut() {
            conn.pipeline.deliver(resp, &self.ctx.served);
        }
    }

    fn redis_step(
        &mut self,
        step: impl FnOnce(&mut RedisPipe<(usize, u32)>) -> Finished<(usize, u32)>,
    ) {
        let RingStore::Redis {
            pipe,
            polling,
            poll_seq,
        } = &mut self.store
        else {
            return;
        };
        let finished = step(pipe);
        let dead = !pipe.take_dead().is_empty();
        let want = pipe.socket().map(|(socket, generation)| {
            let mut events = libc::POLLIN as u32;
            if pipe.wants_write() {
                events |= libc::POLLOUT as u32;
            }
            (socket.as_raw_fd(), generation, events)
        });
        // The armed poll is replaced when its socket died or it lacks write interest now
        // needed; its completion is then recognised as stale by its sequence number.
        if let Some((seq, generation, events)) = *polling {
            let current = want.is_some_and(|(_, g, e)| g == generation && e & !events == 0);
            if dead || !current {
                let _ = self.ring.cancel(tag(REDIS, 0, seq), tag(CANCEL, 0, 0));
                *polling = None;
            }
        }
        if let (None, Some((fd, generation, events))) = (*polling, want) {
            *poll_seq = poll_seq.wrapping_add(1);
            match self.ring.poll_once(fd, events, tag(REDIS, 0, *poll_seq)) {
                Ok(()) => *polling = Some((*poll_seq, generation, events)),
                Err(e) => eprintln!("sweetspot: cannot watch the redis socket: {e}"),
            }
        }
        for ((slot, generation), answer) in finished {
            let resp = App::store_answered(answer);
            self.complete(slot, generation, resp);
        }
    }

    /// Closes silent connections, stalled writers and expired lingerers; answers 408 to
    /// requests past their deadline.
    fn close_idle(&mut self, idle: Duration) {
        let write_timeout = self.ctx.timeouts.write;
        let now = Instant::now();
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].as_mut() else {
                continue;
            };
            let idle_pipeline = c.pipeline.idle(c.queued());
            if c.deadlines.expired(idle_pipeline, idle, write_timeout, now) {
                self.close(slot);
                continue;
            }
            if self.ctx.protocol != Protocol::Http || c.deadlines.lingering.is_some() {
                continue;
            }
            let queued = c.queued();
            if c.pipeline
                .time_out_late_request(queued, &self.ctx.timeouts, &self.ctx.served, now)
            {
                self.mark(slot);
            }
        }
        self.finish_turn();
    }
}

impl PipelineHost for RingLoop {
    type Id = usize;

    fn pipeline(&mut self, slot: usize) -> Option<(&mut Pipeline, usize)> {
        let conn = self.conns[slot].as_mut()?;
        let queued = conn.queued();
        Some((&mut conn.pipeline, queued))
    }

    fn start(&mut self, slot: usize, route: Route) -> Option<Response> {
        let generation = self.conns[slot].as_ref()?.generation;
        RingLoop::start(self, slot, generation, route)
    }

    /// The turn's clock: one read per wake-up, not per request.
    fn now(&self) -> Instant {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips_kind_slot_and_generation() {
        for (kind, slot, generation) in [
            (ACCEPT, 0, 0),
            (RECV, 1, 1),
            (SEND, 0xff_ffff, u32::MAX),
            (SLEEP, 12345, 0x8000_0001),
            (CANCEL, 7, 3),
        ] {
            assert_eq!(untag(tag(kind, slot, generation)), (kind, slot, generation));
        }
        assert_ne!(tag(RECV, 5, 9), tag(SEND, 5, 9));
        assert_ne!(tag(RECV, 5, 9), tag(RECV, 5, 10));
    }
}
