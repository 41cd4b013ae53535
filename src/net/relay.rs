//! The path itself: two threads, one each way, that carry packets between the client's TUN
//! device (in the client's namespace) and the server's (here), holding each until its link lets it out
//! ([`super::packet::Link`]), dropping the share `loss` asks, and standing the path's near end
//! in for the server's loopback address (the server listens where it always does). Written
//! here, not taken from netem: this kernel has no netem (`CONFIG_NET_SCH_NETEM` unset), and
//! what a userspace path needs is a queue, a clock and two descriptors.
//!
//! Memory is bounded: at most [`QUEUE_BYTES`] wait in each direction, and a packet past that
//! is dropped, as a router's full queue drops it.

use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};

use super::packet::{self, Field, FlowState, Link};

/// Bytes held in one direction at most.
pub const QUEUE_BYTES: usize = 64 << 20;
/// The largest packet a TUN device hands over (its MTU is 1,500; GSO is off without a vnet
/// header).
const PACKET_MAX: usize = 65_536;
/// How long the relay sleeps with nothing held, between looks at its stop flag.
const IDLE: Duration = Duration::from_millis(50);

/// A packet written this long after its due time was late: the relay, not the path it
/// stands for, held it.
pub const LATE: Duration = Duration::from_millis(1);

/// What the path did, counted as it ran: packets taken, lost to `loss`, dropped for a full
/// queue or a device without room; of those written, how late against their due time (the
/// sum, the largest, and how many by more than [`LATE`]); and the relay threads' CPU.
#[derive(Debug, Default)]
pub struct Counts {
    pub packets: AtomicU64,
    pub lost: AtomicU64,
    pub overflowed: AtomicU64,
    pub written: AtomicU64,
    pub late_ns: AtomicU64,
    pub late_max_ns: AtomicU64,
    pub late_packets: AtomicU64,
    pub cpu_ns: AtomicU64,
}

impl Counts {
    fn wrote(&self, late: Duration) {
        let ns = late.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.written.fetch_add(1, Ordering::Relaxed);
        self.late_ns.fetch_add(ns, Ordering::Relaxed);
        self.late_max_ns.fetch_max(ns, Ordering::Relaxed);
        if late > LATE {
            self.late_packets.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The calling thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    })
}

/// How the relay sees the two ends: the path's near end (the address the clients connect
/// to) and the server's address it stands for.
#[derive(Debug, Clone, Copy)]
pub struct Ends {
    pub near_end: Ipv4Addr,
    pub server: Ipv4Addr,
}

/// A packet held on the path, ordered by when it leaves (then by arrival).
struct Held {
    out: Instant,
    seq: u64,
    bytes: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.out, self.seq) == (other.out, other.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    /// Reversed: the heap's top is the earliest.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.out, other.seq).cmp(&(self.out, self.seq))
    }
}

/// One direction: its link, its loss, what it holds and each connection's link state (by the
/// client's port).
struct Direction {
    link: Link,
    loss: f64,
    held: BinaryHeap<Held>,
    held_bytes: usize,
    flows: HashMap<u16, FlowState>,
    /// From the client (toward the server): the client's port is the source port.
    toward_server: bool,
}

impl Direction {
    fn take(
        &mut self,
        mut bytes: Vec<u8>,
        now: Instant,
        seq: u64,
        ends: Ends,
        rng: &mut impl RngExt,
        counts: &Counts,
    ) {
        counts.packets.fetch_add(1, Ordering::Relaxed);
        if self.loss > 0.0 && rng.random::<f64>() < self.loss {
            counts.lost.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.held_bytes + bytes.len() > QUEUE_BYTES {
            counts.overflowed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(h) = packet::header(&bytes) else {
            return;
        };
        // The near end stands for the server: toward it, the destination becomes the
        // server's address; back from it, the source the near end's.
        if self.toward_server && h.dst == ends.near_end {
            packet::rewrite(&mut bytes, Field::Dst, ends.server);
        } else if !self.toward_server && h.src == ends.server {
            packet::rewrite(&mut bytes, Field::Src, ends.near_end);
        }
        let port = packet::ports(&bytes)
            .map(|(src, dst)| if self.toward_server { src } else { dst })
            .unwrap_or(0);
        if self.flows.len() >= usize::from(u16::MAX) {
            self.flows.retain(|_, f| f.last_out > now);
        }
        let flow = self
            .flows
            .entry(port)
            .or_insert_with(|| FlowState::new(now));
        let out = self
            .link
            .departure(flow, now, bytes.len(), rng.random::<f64>());
        self.held_bytes += bytes.len();
        self.held.push(Held { out, seq, bytes });
    }

    /// Writes every packet due by `now` to `to`. A write the device refuses for want of room
    /// drops the packet, as a full link would; any other error ends the path with it.
    /// Each packet written counts its lateness against its due time; one the device had no
    /// room for counts as overflowed.
    fn release(&mut self, now: Instant, to: &OwnedFd, counts: &Counts) -> io::Result<()> {
        use nix::errno::Errno;
        while self.held.peek().is_some_and(|h| h.out <= now) {
            let h = self.held.pop().expect("peeked");
            self.held_bytes -= h.bytes.len();
            match nix::unistd::write(to, &h.bytes) {
                Ok(_) => counts.wrote(Instant::now().saturating_duration_since(h.out)),
                Err(Errno::EAGAIN | Errno::ENOBUFS | Errno::ENOMEM) => {
                    counts.overflowed.fetch_add(1, Ordering::Relaxed);
                }
                Err(Errno::EINTR | Errno::EINVAL) => {}
                Err(e) => return Err(io::Error::from(e)),
            }
        }
        Ok(())
    }

    fn next_out(&self) -> Option<Instant> {
        self.held.peek().map(|h| h.out)
    }
}

/// One direction of the path, run on a thread of its own until `stop`: packets read from
/// `from` wait out `link` (and `loss`) and are written to `to`. Two threads, one each way,
/// because writing a packet to a TUN device runs the receiving side's network stack on the
/// writer's thread: one thread for both ways held a core at 1,024 clients of 5 mbit/s
/// (97% of it, carrying about 98,000 packets a second) and capped every server alike.
#[allow(clippy::too_many_arguments)]
pub fn run(
    from: Arc<OwnedFd>,
    to: Arc<OwnedFd>,
    link: Link,
    loss: f64,
    toward_server: bool,
    ends: Ends,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> io::Result<()> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(
        seed ^ u64::from(std::process::id()) ^ u64::from(toward_server),
    );
    let mut dir = Direction {
        link,
        loss,
        held: BinaryHeap::new(),
        held_bytes: 0,
        flows: HashMap::new(),
        toward_server,
    };
    let mut buf = vec![0u8; PACKET_MAX];
    let mut seq = 0u64;
    let mut cpu_counted = thread_cpu_ns();
    let mut cpu_read = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if cpu_read.elapsed() >= CPU_EVERY {
            let cpu = thread_cpu_ns();
            counts
                .cpu_ns
                .fetch_add(cpu.saturating_sub(cpu_counted), Ordering::Relaxed);
            (cpu_counted, cpu_read) = (cpu, Instant::now());
        }
        let now = Instant::now();
        let wait = dir
            .next_out()
            .map_or(IDLE, |t| t.saturating_duration_since(now).min(IDLE));
        let mut fds = [libc::pollfd {
            fd: from.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        crate::sys::poll(&mut fds, Some(wait))?;
        let now = Instant::now();
        loop {
            match nix::unistd::read(from.as_raw_fd(), &mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    seq += 1;
                    dir.take(buf[..n].to_vec(), now, seq, ends, &mut rng, &counts);
                }
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        dir.release(Instant::now(), &to, &counts)?;
    }
    Ok(())
}

/// How often a relay thread adds its CPU time to the counts.
const CPU_EVERY: Duration = Duration::from_millis(50);
