//! The io_uring driver of the load engine (`--engine uring`): the same loop, connections,
//! policies and recorder as the epoll driver ([`super`]), with the bytes moved by a ring
//! ([`crate::sys::uring::Ring`]). Sends of one turn go to the kernel together in the
//! `io_uring_enter` that waits; each connection has one multishot `recvmsg` into provided
//! buffers, whose completions carry the kernel's receive timestamp (`SO_TIMESTAMPNS`), where a
//! response's latency ends; connects complete by a one-shot poll; closing cancels what is in
//! flight. Plain TCP only: `https://` runs on the epoll driver.

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime};

use nix::sys::socket::{setsockopt, sockopt::ReceiveTimestampns};

use crate::load::engine::connection::{Connection, Phase};
use crate::load::engine::transport::Transport;
use crate::load::engine::{Driver, Worker};
use crate::load::error::FailureKind;
use crate::sys::uring::{Completion, Ring, Socket};

/// At most this many responses are gathered before a turn handles them.
pub const BATCH_MAX: usize = 64;
/// A thread with fewer connections than this does not gather.
const BATCH_MIN_CONNECTIONS: usize = 16;
/// Bytes per provided receive buffer; a larger response takes several completions.
const BUFFER_BYTES: usize = 16 * 1024;
/// A receive timestamp older than this (or in the future) means the realtime clock was set
/// meanwhile: the response is then timed when it is handled.
const MAX_STAMP_AGE: Duration = Duration::from_secs(1);

/// What an operation is for, in the top two bits of its `user_data`; then the connection's
/// generation (30 bits) and its slot (32 bits).
const CANCEL: u64 = 0;
const RECV: u64 = 1 << 62;
const SEND: u64 = 2 << 62;
const CONNECT: u64 = 3 << 62;
const KIND: u64 = 3 << 62;
const GENERATION: u64 = (1 << 30) - 1;

fn tag(kind: u64, slot: usize, generation: u32) -> u64 {
    kind | (generation as u64 & GENERATION) << 32 | (slot as u64 & 0xffff_ffff)
}

fn untag(user_data: u64) -> (u64, usize, u64) {
    (
        user_data & KIND,
        (user_data & 0xffff_ffff) as usize,
        (user_data >> 32) & GENERATION,
    )
}

/// Whether io_uring can be used here (kernel, `io_uring_disabled`, seccomp, locked memory).
pub fn check_available() -> io::Result<()> {
    Ring::new(8, 1, 64).map(drop)
}

/// When a response reached its socket, on the monotonic clock: its kernel timestamp `stamp`
/// (realtime) is `wall - stamp` old at the moment `mono` and `wall` were read together.
/// Without a usable stamp, `mono` (when it was handled).
pub fn arrival(stamp: Option<Duration>, mono: Instant, wall: Duration) -> Instant {
    stamp
        .and_then(|stamp| wall.checked_sub(stamp))
        .filter(|age| *age <= MAX_STAMP_AGE)
        .and_then(|age| mono.checked_sub(age))
        .unwrap_or(mono)
}

/// How many responses a gathering wait waits for (0: the driver does not gather).
pub fn batch_size(connections: usize, paced: bool) -> usize {
    if paced || connections < BATCH_MIN_CONNECTIONS {
        0
    } else {
        // All but one in sixteen: the server gets its requests in waves and answers each wave
        // in one pass, the generator wakes once per wave; the stragglers do not hold it up
        // past the window.
        (connections - connections / 16).min(BATCH_MAX)
    }
}

pub fn wall_clock() -> Duration {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

/// One worker's ring and what its turns reuse.
pub struct RingDriver {
    ring: Ring,
    completions: Vec<Completion>,
    /// The bytes of a turn's receives, copied out of the provided buffers as they are reaped
    /// (so each buffer goes straight back to the kernel) ...
    received: Vec<u8>,
    /// ... and where each receive's bytes end in `received`, with its timestamp.
    receipts: Vec<(usize, Option<Duration>)>,
    /// Send buffers handed back by their completions, for the next sends.
    spare: Vec<Vec<u8>>,
    /// Responses a wait gathers (0: it does not), for at most `window`.
    batch: usize,
    window: Duration,
}

impl RingDriver {
    /// The driver of a thread with `connections`, gathering for at most `window` (`--gather`;
    /// zero: never).
    pub fn new(connections: usize, paced: bool, window: Duration) -> io::Result<RingDriver> {
        let scale = (connections.max(1) * 2).next_power_of_two();
        let ring = Ring::new(
            scale.clamp(64, 4096) as u32,
            scale.clamp(64, 1024) as u16,
            BUFFER_BYTES,
        )?;
        Ok(RingDriver {
            ring,
            completions: Vec::with_capacity(256),
            received: Vec::with_capacity(BUFFER_BYTES),
            receipts: Vec::with_capacity(256),
            spare: Vec::new(),
            batch: if window.is_zero() {
                0
            } else {
                batch_size(connections, paced)
            },
            window,
        })
    }

    /// A connect was started on `stream`: time its arrivals, and learn when it completes.
    pub fn connecting(
        &mut self,
        stream: &Transport,
        slot: usize,
        generation: u32,
    ) -> io::Result<()> {
        setsockopt(&stream.as_fd(), ReceiveTimestampns, &true)?;
        self.poll_writable(stream, slot, generation)
    }

    /// Waits (again) for the connect of `conn` to complete.
    pub fn await_connect(&mut self, conn: &Connection, slot: usize) -> io::Result<()> {
        match &conn.stream {
            Some(stream) => self.poll_writable(stream, slot, conn.generation),
            None => Ok(()),
        }
    }

    fn poll_writable(
        &mut self,
        stream: &Transport,
        slot: usize,
        generation: u32,
    ) -> io::Result<()> {
        self.ring.poll_once(
            stream.as_fd().as_raw_fd(),
            libc::POLLOUT as u32,
            tag(CONNECT, slot, generation),
        )
    }

    /// The connection is open: receive on it from now on (again, after a receive ended).
    pub fn opened(&mut self, conn: &Connection, slot: usize) -> io::Result<()> {
        match &conn.stream {
            Some(stream) => self
                .ring
                .recvmsg_multi(Socket::Fd(stream.as_fd()), tag(RECV, slot, conn.generation)),
            None => Ok(()),
        }
    }

    /// The connection is about to be closed: cancel what holds its socket open.
    pub fn closing(&mut self, conn: &Connection, slot: usize) {
        if conn.stream.is_some() {
            for kind in [RECV, CONNECT] {
                let _ = self
                    .ring
                    .cancel(tag(kind, slot, conn.generation), tag(CANCEL, slot, 0));
            }
        }
    }

    /// Queues the rest of the connection's batch (`bytes[write_from..write_to]`).
    pub fn send(&mut self, conn: &Connection, slot: usize, bytes: &[u8]) -> io::Result<()> {
        let Some(stream) = conn.stream.as_ref().filter(|_| conn.writing()) else {
            return Ok(());
        };
        let mut buffer = self.spare.pop().unwrap_or_default();
        buffer.clear();
        buffer.extend_from_slice(&bytes[conn.write_from..conn.write_to]);
        self.ring.send(
            Socket::Fd(stream.as_fd()),
            buffer,
            tag(SEND, slot, conn.generation),
        )
    }
}

impl Worker<'_, '_> {
    fn ring_driver(&mut self) -> &mut RingDriver {
        self.ring_parts().0
    }

    /// The ring driver and the connections, borrowed apart.
    fn ring_parts(&mut self) -> (&mut RingDriver, &mut Vec<Connection>) {
        match self {
            Worker {
                driver: Driver::Uring(driver),
                connections,
                ..
            } => (driver, connections),
            _ => unreachable!("a ring turn on a ring driver"),
        }
    }

    /// Submits the turn's operations, waits (up to `wait`, then for a batch), and handles
    /// every completion.
    pub(super) fn ring_turn(&mut self, wait: Duration) -> io::Result<()> {
        let driver = self.ring_driver();
        if driver.batch > 1 {
            driver
                .ring
                .submit_and_gather(driver.batch, driver.window, wait)?;
        } else {
            driver.ring.submit_and_wait_for(1, wait)?;
        }
        let mut completions = std::mem::take(&mut driver.completions);
        let mut received = std::mem::take(&mut driver.received);
        let mut receipts = std::mem::take(&mut driver.receipts);
        received.clear();
        receipts.clear();
        driver
            .ring
            .reap_stamped(&mut completions, |_, bytes, stamp| {
                received.extend_from_slice(bytes);
                receipts.push((received.len(), stamp));
            });
        // Both clocks read together, once: each stamp's age is taken against this moment. The
        // wall clock first: a gap between the reads makes arrivals later, never earlier (a
        // latency under what the server took was seen when the monotonic clock came first).
        let wall = wall_clock();
        let mono = Instant::now();
        let (mut from, mut receipt) = (0, 0);
        for completion in completions.drain(..) {
            let data = completion.buffered.then(|| {
                let (to, stamp) = receipts[receipt];
                receipt += 1;
                let bytes = &received[from..to];
                from = to;
                let at = arrival(stamp, mono, wall);
                if !bytes.is_empty() {
                    self.recorder.held(mono - at);
                }
                (bytes, at)
            });
            self.ring_completion(completion, data);
        }
        let driver = self.ring_driver();
        driver.completions = completions;
        driver.received = received;
        driver.receipts = receipts;
        Ok(())
    }

    fn ring_completion(&mut self, mut completion: Completion, data: Option<(&[u8], Instant)>) {
        let (kind, slot, generation) = untag(completion.user_data);
        if let Some(buffer) = completion.sent_buffer.take() {
            self.ring_driver().spare.push(buffer);
        }
        let Some(conn) = self.connections.get(slot) else {
            return;
        };
        if conn.generation as u64 & GENERATION != generation {
            return; // An operation of a connection since closed.
        }
        match (kind, conn.phase) {
            (CONNECT, Phase::Connecting { .. }) => {
                self.finish_connect(slot);
                let conn = &self.connections[slot];
                if matches!(conn.phase, Phase::Connecting { .. }) {
                    // Not yet (a spurious wakeup): wait again.
                    let (driver, connections) = self.ring_parts();
                    if driver.await_connect(&connections[slot], slot).is_err() {
                        self.connect_failed(slot, Instant::now());
                    }
                }
            }
            (SEND, Phase::Open) => {
                // A negative result is the socket's error; nothing sent is a failure too.
                let n = match usize::try_from(completion.result) {
                    Ok(n) if n > 0 => n,
                    _ => return self.fail(slot, FailureKind::Write),
                };
                self.connections[slot].write_from += n;
                self.recorder.bytes_written(n);
                // What the socket did not take goes out next.
                self.flush(slot);
            }
            (RECV, Phase::Open) => self.ring_received(slot, &completion, data),
            _ => {}
        }
    }

    fn ring_received(
        &mut self,
        slot: usize,
        completion: &Completion,
        data: Option<(&[u8], Instant)>,
    ) {
        let at_end = match data {
            Some((bytes, at)) if !bytes.is_empty() => {
                self.recorder.bytes_read(bytes.len());
                let conn = &mut self.connections[slot];
                let generation = conn.generation;
                let framed = conn.frame(bytes, &mut self.recorder, at);
                self.arrive(slot);
                if !self.framed(slot, framed) || self.connections[slot].generation != generation {
                    return;
                }
                false
            }
            // An empty receive that ends the operation is the end of the stream.
            Some(_) => !completion.more,
            None => completion.result == 0,
        };
        if at_end {
            return self.on_peer_closed(slot);
        }
        if completion.more {
            return;
        }
        if completion.result < 0 && completion.result != -libc::ENOBUFS {
            return self.fail(slot, FailureKind::Read);
        }
        // The multishot receive ended without an error of the socket's (out of buffers, or a
        // full completion queue): arm it again.
        let (driver, connections) = self.ring_parts();
        if driver.opened(&connections[slot], slot).is_err() {
            self.fail(slot, FailureKind::Read);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_carry_kind_slot_and_generation() {
        for kind in [CANCEL, RECV, SEND, CONNECT] {
            let t = tag(kind, 123_456, 77);
            assert_eq!(untag(t), (kind, 123_456, 77));
        }
        // Generations wrap within their 30 bits, as the comparison with a connection's does.
        let t = tag(RECV, 1, u32::MAX);
        assert_eq!(untag(t), (RECV, 1, u32::MAX as u64 & GENERATION));
        assert_ne!(tag(RECV, 1, 2), tag(SEND, 1, 2));
        assert_ne!(tag(RECV, 1, 2), tag(RECV, 1, 3));
    }

    #[test]
    fn a_response_arrives_when_its_stamp_says() {
        let mono = Instant::now();
        let wall = Duration::from_secs(1_800_000_000);
        let stamp = wall - Duration::from_micros(150);
        assert_eq!(
            arrival(Some(stamp), mono, wall),
            mono - Duration::from_micros(150)
        );
        assert_eq!(arrival(Some(wall), mono, wall), mono, "just arrived");
        assert_eq!(arrival(None, mono, wall), mono, "no stamp: when handled");
        // A stamp from the future or from long ago: the clock was set; when handled.
        assert_eq!(
            arrival(Some(wall + Duration::from_millis(1)), mono, wall),
            mono
        );
        assert_eq!(
            arrival(Some(wall - Duration::from_secs(5)), mono, wall),
            mono
        );
    }

    #[test]
    fn only_closed_loads_of_many_connections_gather_batches() {
        assert_eq!(batch_size(50, false), 47);
        assert_eq!(batch_size(25, false), 24);
        assert_eq!(batch_size(16, false), 15);
        assert_eq!(batch_size(15, false), 0);
        assert_eq!(
            batch_size(1000, true),
            0,
            "rate mode sends at intended times"
        );
        assert_eq!(batch_size(10_000, false), BATCH_MAX);
    }
}
