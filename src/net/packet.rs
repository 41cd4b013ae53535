//! What the path does to one IPv4 packet, as pure functions the relay ([`super::relay`]) calls:
//! which connection it belongs to (the client's port), an address rewritten with its checksums
//! kept right (the path's end stands for the server's loopback address), when it leaves the
//! path (the shared bottleneck's queue, then its client's link's, each at its rate and tail
//! dropping when full, then the one-way delay with its jitter, never before the packet ahead
//! of it on the same connection), and whether a TCP segment is a retransmission.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const TCP: u8 = 6;
const UDP: u8 = 17;

/// The parts of an IPv4 header the path reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Header length in bytes.
    pub len: usize,
    pub protocol: u8,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}

/// The IPv4 header of `packet`, `None` for anything else (IPv6, a truncated packet).
pub fn header(packet: &[u8]) -> Option<Header> {
    if packet.len() < 20 || packet[0] >> 4 != 4 {
        return None;
    }
    let len = usize::from(packet[0] & 0x0f) * 4;
    if len < 20 || packet.len() < len {
        return None;
    }
    let addr =
        |at: usize| Ipv4Addr::new(packet[at], packet[at + 1], packet[at + 2], packet[at + 3]);
    Some(Header {
        len,
        protocol: packet[9],
        src: addr(12),
        dst: addr(16),
    })
}

/// The (source, destination) ports of a TCP or UDP packet.
pub fn ports(packet: &[u8]) -> Option<(u16, u16)> {
    let h = header(packet)?;
    if !matches!(h.protocol, TCP | UDP) || packet.len() < h.len + 4 {
        return None;
    }
    let at = |i: usize| u16::from_be_bytes([packet[h.len + i], packet[h.len + i + 1]]);
    Some((at(0), at(2)))
}

/// Whether an IPv4 packet (its header read) is a whole datagram or its first fragment: one
/// past the first carries no ports or transport header of its own.
fn first_fragment(packet: &[u8]) -> bool {
    u16::from_be_bytes([packet[6], packet[7]]) & 0x1fff == 0
}

/// Which address of a packet to rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Src,
    Dst,
}

/// The one's-complement sum of `data` as 16-bit big-endian words (an odd last byte padded).
fn sum(data: &[u8]) -> u32 {
    let mut total: u32 = 0;
    for pair in data.chunks(2) {
        let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
        total += u32::from(word);
    }
    total
}

fn fold(mut total: u32) -> u16 {
    while total > 0xffff {
        total = (total & 0xffff) + (total >> 16);
    }
    total as u16
}

/// The Internet checksum of `data` (RFC 1071).
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data))
}

/// A checksum updated for a 32-bit field changed from `old` to `new` (RFC 1624: HC' = ~(~HC +
/// ~m + m')).
fn updated(check: u16, old: [u8; 4], new: [u8; 4]) -> u16 {
    let mut total = u32::from(!check);
    for i in [0, 2] {
        total += u32::from(!u16::from_be_bytes([old[i], old[i + 1]]));
        total += u32::from(u16::from_be_bytes([new[i], new[i + 1]]));
    }
    !fold(total)
}

/// Rewrites the source or destination address of an IPv4 packet to `to`, and its header's
/// checksum and a TCP or UDP checksum (whose pseudo-header holds the addresses) with it; a
/// fragment past the first carries no ports or checksum of its own. False when it is not IPv4.
pub fn rewrite(packet: &mut [u8], field: Field, to: Ipv4Addr) -> bool {
    let Some(h) = header(packet) else {
        return false;
    };
    let at = match field {
        Field::Src => 12,
        Field::Dst => 16,
    };
    let old: [u8; 4] = packet[at..at + 4].try_into().expect("four bytes");
    let new = to.octets();
    if old == new {
        return true;
    }
    packet[at..at + 4].copy_from_slice(&new);
    packet[10..12].copy_from_slice(&[0, 0]);
    let ip_check = checksum(&packet[..h.len]);
    packet[10..12].copy_from_slice(&ip_check.to_be_bytes());
    let check_at = match h.protocol {
        TCP => h.len + 16,
        UDP => h.len + 6,
        _ => return true,
    };
    if !first_fragment(packet) || packet.len() < check_at + 2 {
        return true;
    }
    let check = u16::from_be_bytes([packet[check_at], packet[check_at + 1]]);
    // A UDP checksum of 0 is none.
    if h.protocol == UDP && check == 0 {
        return true;
    }
    let mut next = updated(check, old, new);
    if h.protocol == UDP && next == 0 {
        next = 0xffff;
    }
    packet[check_at..check_at + 2].copy_from_slice(&next.to_be_bytes());
    true
}

/// The sequence number and payload length of a TCP segment, and whether it is a SYN: what
/// the path needs to see a retransmission. `None` for anything else (not TCP, a fragment past
/// the first, truncated).
pub fn tcp_segment(packet: &[u8]) -> Option<(u32, u32, bool)> {
    let h = header(packet)?;
    if h.protocol != TCP || !first_fragment(packet) || packet.len() < h.len + 20 {
        return None;
    }
    let tcp = &packet[h.len..];
    let offset = usize::from(tcp[12] >> 4) * 4;
    let total = usize::from(u16::from_be_bytes([packet[2], packet[3]])).min(packet.len());
    let payload = total.checked_sub(h.len + offset)?;
    let seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
    Some((seq, payload as u32, tcp[13] & 0x02 != 0))
}

/// How long `len` bytes take on a link of `bps`.
pub fn wire_time(len: usize, bps: u64) -> Duration {
    Duration::from_secs_f64(len as f64 * 8.0 / bps.max(1) as f64)
}

/// A queue in front of a rate, as a router's interface has: packets leave it one after
/// another at the rate, and one that finds `limit` packets in it (waiting or on the wire) is
/// dropped, the tail drop of a full queue. One client's link, or the bottleneck all share.
#[derive(Debug, Clone, PartialEq)]
pub struct RateQueue {
    pub rate_bps: u64,
    pub limit: usize,
    /// When each packet in it is through, oldest first (the last: when the rate is free).
    leaving: std::collections::VecDeque<Instant>,
}

impl RateQueue {
    pub fn new(rate_bps: u64, limit: usize) -> RateQueue {
        RateQueue {
            rate_bps,
            limit: limit.max(1),
            leaving: std::collections::VecDeque::new(),
        }
    }

    /// A packet of `len` bytes reaching the queue at `at` (never earlier than the one before):
    /// when it is through, or `None` when the queue was full and dropped it.
    pub fn pass(&mut self, at: Instant, len: usize) -> Option<Instant> {
        while self.leaving.front().is_some_and(|t| *t <= at) {
            self.leaving.pop_front();
        }
        if self.leaving.len() >= self.limit {
            return None;
        }
        // Behind the last packet still in it, or at once.
        let start = self.leaving.back().map_or(at, |last| (*last).max(at));
        let through = start + wire_time(len, self.rate_bps);
        self.leaving.push_back(through);
        Some(through)
    }

    /// Packets in it at its last packet.
    pub fn held(&self) -> usize {
        self.leaving.len()
    }
}

/// One direction of one client's link: its one-way delay, the jitter of that delay (uniform,
/// `jitter / 2` either side, so that `jitter` is the width of the spread), and the client's
/// link rate (bits a second; `None`: no shaping) with its queue (`queue` packets).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    pub delay: Duration,
    pub jitter: Duration,
    pub rate_bps: Option<u64>,
    pub queue: usize,
}

/// Where one connection stands on one direction of the path: its link's queue, when its last
/// packet left the path (the next never leaves before it: no reordering), the end of the
/// highest TCP sequence it sent (a segment that starts below it is a retransmission), the
/// bytes the path took from it, and whether any of them was data (a connection that only
/// opened and closed, a probe, carried none).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowState {
    pub access: Option<RateQueue>,
    pub last_out: Instant,
    pub seq_end: Option<u32>,
    pub bytes: u64,
    pub data: bool,
}

impl FlowState {
    pub fn new(now: Instant) -> FlowState {
        FlowState {
            access: None,
            last_out: now,
            seq_end: None,
            bytes: 0,
            data: false,
        }
    }

    /// A TCP segment of the connection (`tcp_segment`'s reading): true when it carries data
    /// that starts before the highest sequence already sent, a retransmission. A SYN starts
    /// the count again (a new connection on the same port).
    pub fn retransmits(&mut self, seq: u32, len: u32, syn: bool) -> bool {
        if syn {
            self.seq_end = Some(seq.wrapping_add(1));
            return false;
        }
        if len == 0 {
            return false;
        }
        self.data = true;
        let end = seq.wrapping_add(len);
        let after = |a: u32, b: u32| (a.wrapping_sub(b) as i32) > 0;
        match self.seq_end {
            Some(high) if after(high, seq) => {
                if after(end, high) {
                    self.seq_end = Some(end);
                }
                true
            }
            _ => {
                self.seq_end = Some(end);
                false
            }
        }
    }
}

impl Link {
    /// When a packet of `len` bytes that reached the link at `at` leaves the path: after the
    /// client's link has sent what was ahead of it and then this packet at the rate
    /// ([`Link::through`]), plus the delay and a jitter of `draw` ([`Link::delayed`]). `None`:
    /// the link's queue was full.
    pub fn departure(
        &self,
        flow: &mut FlowState,
        at: Instant,
        len: usize,
        draw: f64,
    ) -> Option<Instant> {
        let through = self.through(flow, at, len)?;
        Some(self.delayed(flow, through, draw))
    }

    /// When a packet of `len` bytes that reached the client's link at `at` is through it
    /// (queued behind what was ahead of it, then on the wire at the rate); `None`: the queue
    /// was full and dropped it.
    pub fn through(&self, flow: &mut FlowState, at: Instant, len: usize) -> Option<Instant> {
        match self.rate_bps {
            Some(bps) => flow
                .access
                .get_or_insert_with(|| RateQueue::new(bps, self.queue))
                .pass(at, len),
            None => Some(at),
        }
    }

    /// When a packet through the links at `through` leaves the path: after the delay and a
    /// jitter of `draw` (in [0, 1): from `-jitter / 2` to `+jitter / 2`), never before the
    /// connection's previous packet.
    pub fn delayed(&self, flow: &mut FlowState, through: Instant, draw: f64) -> Instant {
        let offset = (draw - 0.5) * self.jitter.as_secs_f64();
        let delay = (self.delay.as_secs_f64() + offset).max(0.0);
        let out = (through + Duration::from_secs_f64(delay)).max(flow.last_out);
        flow.last_out = out;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 TCP packet from `src`:`sport` to `dst`:`dport` with `payload`, checksums right.
    fn tcp_packet(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
        let total = 20 + 20 + payload.len();
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = TCP;
        p[12..16].copy_from_slice(&src.octets());
        p[16..20].copy_from_slice(&dst.octets());
        let ip = checksum(&p[..20]);
        p[10..12].copy_from_slice(&ip.to_be_bytes());
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p[32] = 5 << 4;
        p[40..].copy_from_slice(payload);
        let tcp = tcp_checksum(&p);
        p[36..38].copy_from_slice(&tcp.to_be_bytes());
        p
    }

    /// The TCP checksum computed from scratch (pseudo-header, then the segment with a zero
    /// checksum field).
    fn tcp_checksum(p: &[u8]) -> u16 {
        let mut segment = p[20..].to_vec();
        segment[16..18].copy_from_slice(&[0, 0]);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&p[12..20]);
        pseudo.extend_from_slice(&[0, TCP]);
        pseudo.extend_from_slice(&(segment.len() as u16).to_be_bytes());
        !fold(sum(&pseudo) + sum(&segment))
    }

    #[test]
    fn a_packet_is_read_and_its_address_rewritten_with_right_checksums() {
        let client = Ipv4Addr::new(10, 201, 3, 2);
        let end = Ipv4Addr::new(10, 201, 3, 1);
        let mut p = tcp_packet(client, 40_000, end, 8080, b"GET / HTTP/1.1\r\n\r\n!");
        assert_eq!(
            header(&p),
            Some(Header {
                len: 20,
                protocol: TCP,
                src: client,
                dst: end
            })
        );
        assert_eq!(ports(&p), Some((40_000, 8080)));
        assert!(rewrite(&mut p, Field::Dst, Ipv4Addr::LOCALHOST));
        assert_eq!(header(&p).unwrap().dst, Ipv4Addr::LOCALHOST);
        // The header sums to zero with its checksum; the TCP checksum is the one computed
        // from scratch.
        assert_eq!(checksum(&p[..20]), 0);
        assert_eq!(u16::from_be_bytes([p[36], p[37]]), tcp_checksum(&p));
        assert!(rewrite(&mut p, Field::Src, end));
        assert_eq!(checksum(&p[..20]), 0);
        assert_eq!(u16::from_be_bytes([p[36], p[37]]), tcp_checksum(&p));
        // Back again: the packet as it was.
        assert!(rewrite(&mut p, Field::Src, client));
        assert!(rewrite(&mut p, Field::Dst, end));
        assert_eq!(
            p,
            tcp_packet(client, 40_000, end, 8080, b"GET / HTTP/1.1\r\n\r\n!")
        );
        // Not IPv4: left alone.
        let mut v6 = vec![0x60u8; 40];
        assert!(header(&v6).is_none());
        assert!(!rewrite(&mut v6, Field::Dst, end));
        assert!(header(&p[..19]).is_none());
    }

    #[test]
    fn a_link_serializes_at_its_rate_then_delays_without_reordering() {
        let t0 = Instant::now();
        let ms = |n: f64| Duration::from_secs_f64(n / 1000.0);
        let link = Link {
            delay: ms(25.0),
            jitter: Duration::ZERO,
            rate_bps: Some(10_000_000),
            queue: 1000,
        };
        let close = |a: Duration, b: Duration| {
            assert!(a.abs_diff(b) < Duration::from_micros(1), "{a:?} {b:?}")
        };
        let mut flow = FlowState::new(t0);
        // 1,250 bytes at 10 mbit/s take 1 ms on the wire; two back to back: 1 and 2 ms.
        let first = link.departure(&mut flow, t0, 1250, 0.5).unwrap();
        let second = link.departure(&mut flow, t0, 1250, 0.5).unwrap();
        close(first - t0, ms(26.0));
        close(second - t0, ms(27.0));
        // A packet after the link went idle starts at once.
        let later = t0 + ms(10.0);
        close(
            link.departure(&mut flow, later, 1250, 0.5).unwrap() - later,
            ms(26.0),
        );
        // With a jitter of 10 ms, the draws 0 and 1 are 5 ms early and late; a packet drawn
        // early never leaves before the one ahead of it.
        let jittery = Link {
            delay: ms(25.0),
            jitter: ms(10.0),
            rate_bps: None,
            queue: 1000,
        };
        let mut flow = FlowState::new(t0);
        let late = jittery.departure(&mut flow, t0, 100, 1.0).unwrap();
        close(late - t0, ms(30.0));
        let early = jittery
            .departure(&mut flow, t0 + ms(1.0), 100, 0.0)
            .unwrap();
        assert_eq!(early, late);
        let alone = jittery
            .departure(&mut FlowState::new(t0), t0, 100, 0.0)
            .unwrap();
        close(alone - t0, ms(20.0));
    }

    #[test]
    fn a_full_queue_drops_its_tail_and_a_queue_holds_a_packet_at_most_its_length() {
        let t0 = Instant::now();
        let ms = |n: f64| Duration::from_secs_f64(n / 1000.0);
        // 1,250 bytes at 10 mbit/s: 1 ms each. Three fit in a queue of three; the fourth,
        // arriving with them, is dropped; once one is through there is room again.
        let mut q = RateQueue::new(10_000_000, 3);
        let through: Vec<_> = (0..4).map(|_| q.pass(t0, 1250)).collect();
        assert_eq!(through[..3].iter().flatten().count(), 3);
        assert_eq!(through[3], None);
        assert_eq!(through[2], Some(t0 + ms(3.0)));
        assert_eq!(q.held(), 3);
        assert_eq!(q.pass(t0 + ms(1.0), 1250), Some(t0 + ms(4.0)));
        // A link with a queue of 20 packets of 1,500 bytes at 10 mbit/s never holds a packet
        // more than 20 x 1.2 ms, whatever arrives.
        let link = Link {
            delay: ms(5.0),
            jitter: Duration::ZERO,
            rate_bps: Some(10_000_000),
            queue: 20,
        };
        let mut flow = FlowState::new(t0);
        let (mut dropped, mut worst) = (0, Duration::ZERO);
        for i in 0..1000 {
            let at = t0 + Duration::from_micros(i * 100);
            match link.departure(&mut flow, at, 1500, 0.5) {
                Some(out) => worst = worst.max(out - at),
                None => dropped += 1,
            }
        }
        assert!(dropped > 800, "{dropped}");
        assert!(
            worst <= ms(5.0 + 20.0 * 1.2) + Duration::from_micros(1),
            "{worst:?}"
        );
    }

    #[test]
    fn a_segment_that_starts_below_the_highest_sent_is_a_retransmission() {
        let mut flow = FlowState::new(Instant::now());
        assert!(!flow.retransmits(1000, 0, true));
        assert!(!flow.retransmits(1001, 100, false));
        assert!(!flow.retransmits(1101, 100, false));
        // A pure ACK carries no data: never one.
        assert!(!flow.retransmits(1001, 0, false));
        assert!(flow.retransmits(1001, 100, false));
        // Across the sequence space's wrap.
        let mut flow = FlowState::new(Instant::now());
        assert!(!flow.retransmits(u32::MAX - 50, 100, false));
        assert!(!flow.retransmits(49, 10, false));
        assert!(flow.retransmits(u32::MAX - 50, 100, false));
        // A new connection on the same port starts over.
        assert!(!flow.retransmits(7, 0, true));
        assert!(!flow.retransmits(8, 10, false));
        let p = tcp_packet(
            Ipv4Addr::new(10, 0, 0, 1),
            1,
            Ipv4Addr::new(10, 0, 0, 2),
            2,
            b"hello",
        );
        assert_eq!(tcp_segment(&p), Some((0, 5, false)));
        assert_eq!(tcp_segment(&p[..30]), None);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2_000))]

            /// Whatever the bytes (an IPv4 version nibble or not, any header length, cut
            /// anywhere), reading and rewriting never panic; what is not IPv4 is left alone.
            #[test]
            fn random_bytes_never_panic(
                mut bytes in prop::collection::vec(any::<u8>(), 0..80),
                v4 in any::<bool>(),
                to in any::<[u8; 4]>(),
            ) {
                if v4 && !bytes.is_empty() {
                    bytes[0] = (bytes[0] & 0x0f) | 0x40;
                }
                let before = bytes.clone();
                let _ = ports(&bytes);
                let _ = tcp_segment(&bytes);
                let ipv4 = header(&bytes).is_some();
                let rewritten = rewrite(&mut bytes, Field::Src, Ipv4Addr::from(to));
                prop_assert_eq!(rewritten, ipv4);
                if !ipv4 {
                    prop_assert_eq!(bytes, before);
                }
            }

            /// A TCP packet rewritten to another address has both checksums right, and
            /// rewritten back is the packet it was, byte for byte.
            #[test]
            fn rewriting_and_back_restores_the_packet(
                src in any::<[u8; 4]>(),
                dst in any::<[u8; 4]>(),
                to in any::<[u8; 4]>(),
                ports in any::<(u16, u16)>(),
                payload in prop::collection::vec(any::<u8>(), 0..64),
                dst_field in any::<bool>(),
            ) {
                let (src, dst, to) = (Ipv4Addr::from(src), Ipv4Addr::from(dst), Ipv4Addr::from(to));
                let original = tcp_packet(src, ports.0, dst, ports.1, &payload);
                let (field, was) = if dst_field { (Field::Dst, dst) } else { (Field::Src, src) };
                let mut p = original.clone();
                prop_assert!(rewrite(&mut p, field, to));
                prop_assert_eq!(checksum(&p[..20]), 0);
                prop_assert_eq!(u16::from_be_bytes([p[36], p[37]]), tcp_checksum(&p));
                prop_assert!(rewrite(&mut p, field, was));
                prop_assert_eq!(p, original);
            }
        }
    }
}
