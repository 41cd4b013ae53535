//! The closed loop's settled window: the measured window opens only once every connection of
//! the run has been answered once (or a time limit passed), so that connecting thousands of
//! sockets and the first requests behind them are part of the plan, not of the window. Shared
//! by the workers of one run through [`Settle`]; each [`super::connection::Connection`] keeps
//! its own [`CycleSpan`], from which [`CycleTotals`] counts throughput in whole cycles.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The barrier every connection of a run passes once, when its first response is read.
pub struct Settle {
    start: Instant,
    total: usize,
    settled: AtomicUsize,
    /// Nanoseconds after `start` at which the window opened, plus one; 0 while settling.
    opened_ns: AtomicU64,
    /// The window opens by then whoever has not been answered.
    limit: Instant,
}

impl Settle {
    /// A barrier for `total` connections of a run started at `start`, open at the latest
    /// `limit` after it.
    pub fn new(start: Instant, total: usize, limit: Duration) -> Settle {
        Settle {
            start,
            total,
            settled: AtomicUsize::new(0),
            opened_ns: AtomicU64::new(0),
            limit: start + limit,
        }
    }

    /// A connection was answered for the first time.
    pub fn arrive(&self) {
        self.settled.fetch_add(1, Ordering::AcqRel);
    }

    /// When the window opened, opening it now if every connection arrived or the limit passed.
    pub fn window_start(&self, now: Instant) -> Option<Instant> {
        let opened = self.opened_ns.load(Ordering::Acquire);
        if opened > 0 {
            return Some(self.start + Duration::from_nanos(opened - 1));
        }
        if self.settled.load(Ordering::Acquire) < self.total && now < self.limit {
            return None;
        }
        let ns = u64::try_from(now.saturating_duration_since(self.start).as_nanos())
            .unwrap_or(u64::MAX - 1)
            + 1;
        let opened =
            match self
                .opened_ns
                .compare_exchange(0, ns, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => ns,
                Err(first) => first,
            };
        Some(self.start + Duration::from_nanos(opened - 1))
    }

    /// The latest the window opens.
    pub fn limit(&self) -> Instant {
        self.limit
    }

    /// Connections answered at least once so far.
    pub fn settled(&self) -> usize {
        self.settled.load(Ordering::Acquire)
    }
}

/// One connection's responses of the window: how many, from the send of the first to the
/// arrival of the last. In a closed loop each response starts the next cycle, so the span
/// holds `count` whole cycles, whatever the window's phase.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CycleSpan {
    first_sent: Option<Instant>,
    last_done: Option<Instant>,
    count: u64,
}

impl CycleSpan {
    /// A response of the window to a request sent at `sent`, read at `done`.
    #[inline]
    pub fn add(&mut self, sent: Instant, done: Instant) {
        self.first_sent.get_or_insert(sent);
        self.last_done = Some(done);
        self.count += 1;
    }

    /// The whole cycles and the seconds they took (0 and 0 with none).
    pub fn cycles(&self) -> (u64, f64) {
        match (self.first_sent, self.last_done) {
            (Some(first), Some(last)) if last > first => (self.count, (last - first).as_secs_f64()),
            _ => (0, 0.0),
        }
    }
}

/// Whole cycles and their seconds, summed over the connections that completed one: a
/// connection's mean cycle is `seconds / cycles`, and `connections x cycles / seconds` the
/// throughput they make. A connection never answered in the window is not counted (a server
/// that starves it makes the throughput of those it serves, as the responses say).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CycleTotals {
    pub cycles: u64,
    pub seconds: f64,
    pub connections: u64,
}

impl CycleTotals {
    /// The totals of some connections' spans.
    pub fn of<'a>(spans: impl IntoIterator<Item = &'a CycleSpan>) -> CycleTotals {
        let mut totals = CycleTotals::default();
        for span in spans {
            let (cycles, seconds) = span.cycles();
            if cycles > 0 {
                totals.cycles += cycles;
                totals.seconds += seconds;
                totals.connections += 1;
            }
        }
        totals
    }

    pub fn merge(&mut self, other: &CycleTotals) {
        self.cycles += other.cycles;
        self.seconds += other.seconds;
        self.connections += other.connections;
    }

    /// Throughput in whole cycles: every connection at the mean cycle, `connections x cycles /
    /// seconds`. A window that ends in the middle of every connection's cycle (all of them in
    /// step, as a constant workload keeps them) counts no partial cycle, where responses over
    /// the window's length miss up to one cycle of every connection. The ratio of the sums, not
    /// the sum of each connection's ratio: one connection's single quick answer does not stand
    /// for a fast connection (the mean of 1/R is above 1 over the mean of R).
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.connections as f64 * self.cycles as f64 / self.seconds
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn the_window_opens_when_every_connection_arrived_or_at_the_limit() {
        let t = Instant::now();
        let s = Settle::new(t, 2, MS(1000));
        assert_eq!(s.window_start(t + MS(5)), None);
        s.arrive();
        assert_eq!(s.window_start(t + MS(6)), None);
        s.arrive();
        assert_eq!(s.window_start(t + MS(7)), Some(t + MS(7)));
        // Opened once: a later look sees the same instant.
        assert_eq!(s.window_start(t + MS(9)), Some(t + MS(7)));
        let late = Settle::new(t, 3, MS(100));
        assert_eq!(late.window_start(t + MS(99)), None);
        assert_eq!(late.window_start(t + MS(100)), Some(t + MS(100)));
        assert_eq!(late.settled(), 0);
    }

    #[test]
    fn cycles_count_whole_cycles_whatever_the_windows_phase() {
        // 16 connections in step, 101 ms a cycle, a 400 ms window: three responses each.
        // Responses over the window say 120/s; whole cycles say 158/s, the true rate.
        let t = Instant::now();
        let spans: Vec<CycleSpan> = (0..16)
            .map(|_| {
                let mut span = CycleSpan::default();
                for k in 0..3 {
                    span.add(t + MS(101 * k), t + MS(101 * (k + 1)));
                }
                span
            })
            .collect();
        let naive = 16.0 * 3.0 / 0.4;
        assert_eq!(naive, 120.0);
        let rate = CycleTotals::of(&spans).rate();
        assert!((rate - 16.0 / 0.101).abs() < 1e-6, "{rate}");
        assert_eq!(CycleSpan::default().cycles(), (0, 0.0));
        // A starved connection adds nothing: one served connection's rate is the throughput.
        let starved = CycleSpan::default();
        let one = CycleTotals::of([&spans[0], &starved]);
        assert_eq!(one.connections, 1);
        assert!((one.rate() - 1.0 / 0.101).abs() < 1e-6);
        assert_eq!(CycleTotals::default().rate(), 0.0);
    }

    #[test]
    fn unequal_cycles_make_the_throughput_of_their_mean() {
        // One answer in 10 ms, one in 100 ms: two connections at a mean cycle of 55 ms make
        // 36.4/s, not the 110/s of adding each one's own rate.
        let t = Instant::now();
        let mut fast = CycleSpan::default();
        fast.add(t, t + MS(10));
        let mut slow = CycleSpan::default();
        slow.add(t, t + MS(100));
        let mut totals = CycleTotals::of([&fast]);
        totals.merge(&CycleTotals::of([&slow]));
        assert_eq!((totals.cycles, totals.connections), (2, 2));
        assert!(
            (totals.rate() - 2.0 / 0.055).abs() < 1e-9,
            "{}",
            totals.rate()
        );
    }
}
