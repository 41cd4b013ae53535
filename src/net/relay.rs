//! The path itself: two threads, one each way, that carry packets between the client's TUN
//! device (in the client's namespace) and the server's (here), holding each until the shared
//! bottleneck and its client's link let it out ([`super::packet`]), dropping the share `loss`
//! asks and what a full queue drops, and standing the path's near end in for the server's
//! loopback address (the server listens where it always does). Written here, not taken from
//! netem: this kernel has no netem (`CONFIG_NET_SCH_NETEM` unset), and what a userspace path
//! needs is a queue, a clock and two descriptors. The relay measures itself ([`Counts`]): its
//! CPU, how late it wrote each packet, what it could not hold.
//!
//! Memory is bounded: at most [`QUEUE_BYTES`] wait in each direction (the path's own queues
//! are smaller), and a packet past that is dropped as the relay's, not the path's.

use std::collections::HashMap;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::{RngExt, SeedableRng};

use super::packet::{self, Field, FlowState, Link, RateQueue};
use crate::deadlines::DueHeap;

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

/// What the path did, counted as it ran: packets taken, lost to `loss`, dropped by the path's
/// full queues (the bottleneck's or a link's: the path's doing), dropped for want of room in
/// the relay or a device (the relay's); TCP segments retransmitted toward the server (by the
/// clients) and toward the clients (by the server); of those written, how late against their
/// due time (the sum, the largest, how many by more than [`LATE`], and their distribution);
/// the relay threads' CPU; and the bytes the path took from each connection each way.
#[derive(Debug)]
pub struct Counts {
    pub packets: AtomicU64,
    pub lost: AtomicU64,
    pub queue_dropped: AtomicU64,
    /// The longest a packet took through the path's queues and rates (waiting, then its own
    /// time on the wire), ns.
    pub queued_max_ns: AtomicU64,
    pub overflowed: AtomicU64,
    pub retrans_up: AtomicU64,
    pub retrans_down: AtomicU64,
    pub written: AtomicU64,
    pub late_ns: AtomicU64,
    pub late_max_ns: AtomicU64,
    pub late_packets: AtomicU64,
    pub cpu_ns: AtomicU64,
    /// Lateness of the packets written, µs (each thread adds its own every [`CPU_EVERY`]).
    pub late_us: Mutex<Histogram<u64>>,
    /// Bytes taken from each connection that carried data that way (by the client's port):
    /// [toward the server, toward the client] (each thread publishes its own every
    /// [`CPU_EVERY`]).
    pub flow_bytes: Mutex<HashMap<u16, [u64; 2]>>,
    /// A reader asks both threads to publish now ([`Counts::sync`]); each says when it has.
    sync_asked: AtomicU64,
    sync_done: [AtomicU64; 2],
}

impl Default for Counts {
    fn default() -> Counts {
        Counts {
            packets: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            queue_dropped: AtomicU64::new(0),
            queued_max_ns: AtomicU64::new(0),
            overflowed: AtomicU64::new(0),
            retrans_up: AtomicU64::new(0),
            retrans_down: AtomicU64::new(0),
            written: AtomicU64::new(0),
            late_ns: AtomicU64::new(0),
            late_max_ns: AtomicU64::new(0),
            late_packets: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
            late_us: Mutex::new(late_histogram()),
            flow_bytes: Mutex::new(HashMap::new()),
            sync_asked: AtomicU64::new(0),
            sync_done: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }
}

/// A histogram of lateness in µs, up to a minute, 2 significant digits.
fn late_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 2).expect("valid bounds")
}

impl Counts {
    fn wrote(&self, late: Duration, local: &mut Histogram<u64>) {
        let ns = late.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.written.fetch_add(1, Ordering::Relaxed);
        self.late_ns.fetch_add(ns, Ordering::Relaxed);
        self.late_max_ns.fetch_max(ns, Ordering::Relaxed);
        if late > LATE {
            self.late_packets.fetch_add(1, Ordering::Relaxed);
        }
        local.saturating_record((ns / 1000).max(1));
    }

    /// Asks both relay threads to add what they measured to the counts, and waits until they
    /// have (at most a second: a thread wakes every [`IDLE`] at least).
    pub fn sync(&self) {
        let asked = self.sync_asked.fetch_add(1, Ordering::SeqCst) + 1;
        let until = Instant::now() + Duration::from_secs(1);
        while self
            .sync_done
            .iter()
            .any(|done| done.load(Ordering::SeqCst) < asked)
            && Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The lateness below which 99% of the packets written were, µs (0 before any).
    pub fn late_p99_us(&self) -> f64 {
        let h = self.late_us.lock().unwrap_or_else(|e| e.into_inner());
        if h.is_empty() {
            0.0
        } else {
            h.value_at_quantile(0.99) as f64
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

/// One direction: the shared bottleneck (if any), each client's link, the loss, what it holds
/// and each connection's state (by the client's port), and the lateness it has not yet added
/// to the counts.
struct Direction {
    bottleneck: Option<RateQueue>,
    link: Link,
    loss: f64,
    /// The packets held, by when they leave (then by arrival).
    held: DueHeap<Vec<u8>>,
    held_bytes: usize,
    flows: HashMap<u16, FlowState>,
    /// From the client (toward the server): the client's port is the source port.
    toward_server: bool,
    late_us: Histogram<u64>,
}

impl Direction {
    fn take(
        &mut self,
        mut bytes: Vec<u8>,
        now: Instant,
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
        let len = bytes.len();
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
        if let Some((seq, data, syn)) = packet::tcp_segment(&bytes) {
            if flow.retransmits(seq, data, syn) {
                let retransmitted = if self.toward_server {
                    &counts.retrans_up
                } else {
                    &counts.retrans_down
                };
                retransmitted.fetch_add(1, Ordering::Relaxed);
            }
        }
        // The bottleneck all share, then the client's own link.
        let at = match self.bottleneck.as_mut() {
            Some(bottleneck) => bottleneck.pass(now, len),
            None => Some(now),
        };
        let Some(through) = at.and_then(|at| self.link.through(flow, at, len)) else {
            counts.queue_dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if self.bottleneck.is_some() || self.link.rate_bps.is_some() {
            let queued = through.saturating_duration_since(now).as_nanos() as u64;
            counts.queued_max_ns.fetch_max(queued, Ordering::Relaxed);
        }
        let out = self.link.delayed(flow, through, rng.random::<f64>());
        flow.bytes += len as u64;
        self.held_bytes += len;
        self.held.push(out, bytes);
    }

    /// Adds what this direction measured since the last time to the shared counts: its
    /// packets' lateness and each connection's bytes.
    fn publish(&mut self, counts: &Counts) {
        if let Ok(mut shared) = counts.late_us.lock() {
            let _ = shared.add(&self.late_us);
        }
        self.late_us.reset();
        if let Ok(mut shared) = counts.flow_bytes.lock() {
            let way = usize::from(!self.toward_server);
            for (port, flow) in self.flows.iter().filter(|(_, f)| f.data) {
                shared.entry(*port).or_default()[way] = flow.bytes;
            }
        }
    }

    /// Writes every packet due by `now` to `to`. A write the device refuses for want of room
    /// drops the packet, as a full link would; any other error ends the path with it.
    /// Each packet written counts its lateness against its due time; one the device had no
    /// room for counts as overflowed.
    fn release(&mut self, now: Instant, to: &OwnedFd, counts: &Counts) -> io::Result<()> {
        use nix::errno::Errno;
        while let Some((out, bytes)) = self.held.pop_due(now) {
            self.held_bytes -= bytes.len();
            match nix::unistd::write(to, &bytes) {
                Ok(_) => counts.wrote(
                    Instant::now().saturating_duration_since(out),
                    &mut self.late_us,
                ),
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
        self.held.next_at()
    }
}

/// What one direction of the path is: each client's link, the bottleneck all share (its rate
/// and queue, packets), the loss, which way it carries, and the CPUs its thread may run on
/// (empty: any; the lab keeps it off the server's).
#[derive(Debug, Clone)]
pub struct Way {
    pub link: Link,
    pub bottleneck: Option<(u64, usize)>,
    pub loss: f64,
    pub toward_server: bool,
    pub cpus: Vec<usize>,
}

/// One direction of the path, run on a thread of its own until `stop`: packets read from
/// `from` wait out `link` (and `loss`) and are written to `to`. Two threads, one each way,
/// because writing a packet to a TUN device runs the receiving side's network stack on the
/// writer's thread: one thread for both ways held a core at 1,024 clients of 5 mbit/s
/// (97% of it, carrying about 98,000 packets a second) and capped every server alike.
pub fn run(
    from: Arc<OwnedFd>,
    to: Arc<OwnedFd>,
    way: Way,
    ends: Ends,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
) -> io::Result<()> {
    if !way.cpus.is_empty() {
        crate::sys::pin_current_thread_to(&way.cpus);
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(
        seed ^ u64::from(std::process::id()) ^ u64::from(way.toward_server),
    );
    let mut dir = Direction {
        bottleneck: way
            .bottleneck
            .map(|(bps, queue)| RateQueue::new(bps, queue)),
        link: way.link,
        loss: way.loss,
        held: DueHeap::default(),
        held_bytes: 0,
        flows: HashMap::new(),
        toward_server: way.toward_server,
        late_us: late_histogram(),
    };
    let mut buf = vec![0u8; PACKET_MAX];
    let mut cpu_counted = thread_cpu_ns();
    let mut cpu_read = Instant::now();
    let way_index = usize::from(!way.toward_server);
    while !stop.load(Ordering::Relaxed) {
        let asked = counts.sync_asked.load(Ordering::SeqCst);
        let syncing = counts.sync_done[way_index].load(Ordering::SeqCst) < asked;
        if syncing || cpu_read.elapsed() >= CPU_EVERY {
            let cpu = thread_cpu_ns();
            counts
                .cpu_ns
                .fetch_add(cpu.saturating_sub(cpu_counted), Ordering::Relaxed);
            (cpu_counted, cpu_read) = (cpu, Instant::now());
            dir.publish(&counts);
            if syncing {
                counts.sync_done[way_index].store(asked, Ordering::SeqCst);
            }
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
                    dir.take(buf[..n].to_vec(), now, ends, &mut rng, &counts);
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
