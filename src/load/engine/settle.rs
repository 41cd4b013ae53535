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
/// arrival of the last, and the time they were in flight. In a closed loop each response
/// starts the next cycle, so the span holds `count` whole cycles, and what of it was not in
/// flight is the client's own turnaround.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CycleSpan {
    first_sent: Option<Instant>,
    last_done: Option<Instant>,
    count: u64,
    in_flight: Duration,
}

impl CycleSpan {
    /// A response of the window to a request sent at `sent`, read at `done`.
    #[inline]
    pub fn add(&mut self, sent: Instant, done: Instant) {
        self.first_sent.get_or_insert(sent);
        self.last_done = Some(done);
        self.count += 1;
        self.in_flight += done.saturating_duration_since(sent);
    }

    /// The whole cycles, the seconds they took and the seconds of them in flight.
    pub fn cycles(&self) -> (u64, f64, f64) {
        match (self.first_sent, self.last_done) {
            (Some(first), Some(last)) if last > first => (
                self.count,
                (last - first).as_secs_f64(),
                self.in_flight.as_secs_f64(),
            ),
            _ => (0, 0.0, 0.0),
        }
    }
}

/// Whole cycles, their seconds and their seconds in flight, summed over connections.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CycleTotals {
    pub cycles: u64,
    pub seconds: f64,
    pub in_flight_s: f64,
    /// Turnarounds inside the spans: a connection's cycles less one.
    pub turnarounds: u64,
}

impl CycleTotals {
    /// The totals of some connections' spans.
    pub fn of<'a>(spans: impl IntoIterator<Item = &'a CycleSpan>) -> CycleTotals {
        let mut totals = CycleTotals::default();
        for span in spans {
            let (cycles, seconds, in_flight) = span.cycles();
            totals.cycles += cycles;
            totals.seconds += seconds;
            totals.in_flight_s += in_flight;
            totals.turnarounds += cycles.saturating_sub(1);
        }
        totals
    }

    pub fn merge(&mut self, other: &CycleTotals) {
        self.cycles += other.cycles;
        self.seconds += other.seconds;
        self.in_flight_s += other.in_flight_s;
        self.turnarounds += other.turnarounds;
    }

    /// The client's mean turnaround a cycle: from an answer to the next send on the same
    /// connection (0 without two answers on one).
    pub fn mean_turnaround_s(&self) -> f64 {
        if self.turnarounds == 0 {
            0.0
        } else {
            ((self.seconds - self.in_flight_s) / self.turnarounds as f64).max(0.0)
        }
    }

    /// Throughput in whole cycles of `connections` closed-loop connections whose requests took
    /// `mean_latency_s` on average: each connection completes a cycle every mean latency plus
    /// mean turnaround (renewal theory), so `connections / (latency + turnaround)`. The mean
    /// latency is of every request sent in the window, answered in it or in the drain after
    /// it: requests started in a window are a fair sample of cycles, where the cycles a window
    /// cuts through are not (a long cycle is likelier to be cut). A window that ends in the
    /// middle of every connection's cycle (all of them in step, as a constant workload keeps
    /// them) counts no partial cycle, where responses over the window's length miss up to one.
    pub fn rate(&self, connections: u64, mean_latency_s: f64) -> f64 {
        let cycle_s = mean_latency_s + self.mean_turnaround_s();
        if cycle_s > 0.0 {
            connections as f64 / cycle_s
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
        // 16 connections in step, 101 ms a cycle, 100 ms of it in flight, a 400 ms window:
        // three responses each. Responses over the window say 120/s; whole cycles say 158/s,
        // the true rate.
        let t = Instant::now();
        let spans: Vec<CycleSpan> = (0..16)
            .map(|_| {
                let mut span = CycleSpan::default();
                for k in 0..3 {
                    let sent = t + MS(101 * k);
                    span.add(sent, sent + MS(100));
                }
                span
            })
            .collect();
        let naive = 16.0 * 3.0 / 0.4;
        assert_eq!(naive, 120.0);
        let totals = CycleTotals::of(&spans);
        assert_eq!(totals.cycles, 48);
        assert!((totals.mean_turnaround_s() - 0.001).abs() < 1e-9);
        let rate = totals.rate(16, 0.100);
        assert!((rate - 16.0 / 0.101).abs() < 1e-6, "{rate}");
        assert_eq!(CycleSpan::default().cycles(), (0, 0.0, 0.0));
        assert_eq!(CycleTotals::default().rate(16, 0.0), 0.0);
    }

    #[test]
    fn unequal_cycles_make_the_throughput_of_their_mean() {
        // Answers in 10 ms and in 100 ms: two connections at a mean cycle of 55 ms make
        // 36.4/s, not the 110/s of adding each one's own rate.
        let t = Instant::now();
        let mut fast = CycleSpan::default();
        fast.add(t, t + MS(10));
        let mut slow = CycleSpan::default();
        slow.add(t, t + MS(100));
        let mut totals = CycleTotals::of([&fast]);
        totals.merge(&CycleTotals::of([&slow]));
        assert_eq!(totals.cycles, 2);
        assert_eq!(totals.mean_turnaround_s(), 0.0);
        assert!((totals.rate(2, 0.055) - 2.0 / 0.055).abs() < 1e-9);
    }
}
