//! Netflix's WindowedLimit in front of another Netflix limit: samples under 100 us are ignored;
//! the rest gather in a window (the average rtt, the most in flight, any drop) that is handed
//! to the limit as one sample when a sample ends past the window's end, if it holds at least 10
//! samples; the next window ends `clamp(2 x min rtt, 1 s, 1 s)` after it. Follows
//! Netflix/concurrency-limits `concurrency-limits-core/src/main/java/com/netflix/concurrency/
//! limits/limit/WindowedLimit.java` and `limit/window/ImmutableAverageSampleWindow.java` at
//! 414f64dd (2024-10-25), with the defaults.

use super::{Nanos, NetflixLimit};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowConfig {
    pub min_window: Nanos,
    pub max_window: Nanos,
    pub window_size: usize,
    pub min_rtt_threshold: Nanos,
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig {
            min_window: 1_000_000_000,
            max_window: 1_000_000_000,
            window_size: 10,
            min_rtt_threshold: 100_000,
        }
    }
}

/// `ImmutableAverageSampleWindow`.
#[derive(Debug, Clone, Copy)]
struct AverageWindow {
    min_rtt: Nanos,
    sum: Nanos,
    max_inflight: usize,
    count: usize,
    did_drop: bool,
}

impl Default for AverageWindow {
    fn default() -> Self {
        AverageWindow {
            min_rtt: Nanos::MAX,
            sum: 0,
            max_inflight: 0,
            count: 0,
            did_drop: false,
        }
    }
}

pub struct Windowed<D> {
    config: WindowConfig,
    delegate: D,
    next_update: Nanos,
    window: AverageWindow,
}

impl<D: NetflixLimit> Windowed<D> {
    pub fn new(config: WindowConfig, delegate: D) -> Windowed<D> {
        Windowed {
            config,
            delegate,
            next_update: 0,
            window: AverageWindow::default(),
        }
    }
}

impl<D: NetflixLimit> NetflixLimit for Windowed<D> {
    fn limit(&self) -> usize {
        self.delegate.limit()
    }

    fn on_sample(&mut self, start: Nanos, rtt: Nanos, inflight: usize, did_drop: bool) {
        let end = start + rtt;
        if rtt < self.config.min_rtt_threshold {
            return;
        }
        let w = &mut self.window;
        w.min_rtt = w.min_rtt.min(rtt);
        w.sum += rtt;
        w.max_inflight = w.max_inflight.max(inflight);
        w.count += 1;
        w.did_drop |= did_drop;
        if end > self.next_update {
            let current = std::mem::take(&mut self.window);
            let span = current
                .min_rtt
                .saturating_mul(2)
                .max(self.config.min_window)
                .min(self.config.max_window);
            self.next_update = end + span;
            if current.min_rtt < Nanos::MAX && current.count >= self.config.window_size {
                let average = current.sum / current.count as Nanos;
                self.delegate
                    .on_sample(start, average, current.max_inflight, current.did_drop);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::controllers::aimd::{Aimd, AimdConfig};
    use crate::limiter::controllers::testing::MS;

    /// Records what the window hands on.
    struct Seen(Vec<(Nanos, usize, bool)>);
    impl NetflixLimit for Seen {
        fn limit(&self) -> usize {
            self.0.len()
        }
        fn on_sample(&mut self, _start: Nanos, rtt: Nanos, inflight: usize, did_drop: bool) {
            self.0.push((rtt, inflight, did_drop));
        }
    }

    #[test]
    fn a_window_of_ten_samples_reaches_the_limit_as_their_average_once_a_second() {
        let mut w = Windowed::new(WindowConfig::default(), Seen(Vec::new()));
        // The first sample ends past next_update = 0: a window of one, too small, dropped;
        // the next window ends at 10 + 1000 ms.
        w.on_sample(0, 10 * MS, 3, false);
        assert!(w.delegate.0.is_empty());
        assert_eq!(w.next_update, 1010 * MS);
        // Under the 100 us threshold: ignored altogether.
        w.on_sample(20 * MS, 50_000, 99, true);
        // Ten samples of 10 and 30 ms, ending before 1010 ms: gathered.
        for i in 0..10u64 {
            let rtt = if i % 2 == 0 { 10 } else { 30 } * MS;
            w.on_sample(100 * MS * i, rtt, i as usize + 1, i == 4);
        }
        assert!(w.delegate.0.is_empty());
        // One ending past 1010 ms closes the window: 11 samples, mean (5 x 10 + 5 x 30 + 20) / 11.
        w.on_sample(1000 * MS, 20 * MS, 2, false);
        assert_eq!(w.delegate.0, vec![(20 * MS, 10, true)]);
        assert_eq!(w.next_update, 2020 * MS);
    }

    #[test]
    fn behind_a_window_aimd_moves_once_per_window() {
        let mut w = Windowed::new(
            WindowConfig::default(),
            Aimd::new(AimdConfig {
                min_limit: 1,
                initial_limit: 10,
                ..AimdConfig::default()
            }),
        );
        for i in 0..200u64 {
            w.on_sample(i * 10 * MS, 5 * MS, 10, false);
        }
        // 2 s of samples: the first window (one sample) is dropped, one full window passed.
        assert_eq!(w.limit(), 11);
    }
}
