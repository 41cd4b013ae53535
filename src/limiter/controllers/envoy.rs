//! Envoy's adaptive concurrency filter, gradient controller. Every `concurrency_update_interval`
//! the window's latencies are summarized at `sample_aggregate_percentile` (p50) into sampleRTT
//! and the limit becomes `limit x clamp((minRTT x (1 + buffer)) / sampleRTT, 0.5, 2) +
//! sqrt(that)`, truncated and clamped to min_concurrency..max. minRTT is measured in a window
//! with the limit pinned at `min_concurrency` (3): the percentile of the first `request_count`
//! (50) samples of requests sent inside it; the next such window starts `interval` plus up to
//! `jitter` of it later, or at once after 5 windows in a row set the minimum. Follows
//! envoyproxy/envoy `source/extensions/filters/http/adaptive_concurrency/controller/
//! gradient_controller.cc` at c35f67fb and `api/envoy/extensions/filters/http/
//! adaptive_concurrency/v3/adaptive_concurrency.proto` at 149521d8 (its defaults: 15% jitter,
//! max 1000, 50 requests, p50, min_concurrency 3, 25% buffer); the two fields the proto
//! requires take the documentation's example (update interval 100 ms, minRTT interval 60 s).
//! A timeout is a reset (`cancelLatencySample`: no sample). Percentiles are exact over the
//! window's samples where Envoy's histogram approximates them.

use rand::{RngExt, SeedableRng};

use super::{Controller, Ending, Nanos, Outcome};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnvoyConfig {
    pub update_interval: Nanos,
    pub min_rtt_interval: Nanos,
    /// A fraction of `min_rtt_interval`.
    pub jitter: f64,
    pub max_concurrency_limit: u32,
    pub request_count: usize,
    /// A fraction: 0.5 is the median.
    pub percentile: f64,
    pub min_concurrency: u32,
    /// A fraction of minRTT.
    pub buffer: f64,
}

impl Default for EnvoyConfig {
    fn default() -> Self {
        EnvoyConfig {
            update_interval: 100_000_000,
            min_rtt_interval: 60_000_000_000,
            jitter: 0.15,
            max_concurrency_limit: 1000,
            request_count: 50,
            percentile: 0.5,
            min_concurrency: 3,
            buffer: 0.25,
        }
    }
}

pub struct Envoy {
    config: EnvoyConfig,
    limit: u32,
    /// The limit to restore after the minRTT window; non-zero exactly while in one.
    deferred_limit: u32,
    /// Microseconds, as Envoy keeps them.
    min_rtt_us: u64,
    sample_rtt_us: u64,
    samples_us: Vec<u64>,
    min_rtt_epoch: Nanos,
    next_min_rtt: Option<Nanos>,
    next_sample_reset: Option<Nanos>,
    consecutive_min: u32,
    rng: rand::rngs::SmallRng,
}

impl Envoy {
    /// The controller as Envoy constructs it at `now` = 0: in a minRTT window, the reset timer
    /// armed.
    pub fn new(config: EnvoyConfig, seed: u64) -> Envoy {
        let mut envoy = Envoy {
            config,
            limit: config.min_concurrency,
            deferred_limit: 0,
            min_rtt_us: 0,
            sample_rtt_us: 0,
            samples_us: Vec::new(),
            min_rtt_epoch: 0,
            next_min_rtt: None,
            next_sample_reset: None,
            consecutive_min: 0,
            rng: rand::rngs::SmallRng::seed_from_u64(seed),
        };
        envoy.enter_min_rtt_window(0);
        envoy.next_sample_reset = Some(config.update_interval);
        envoy
    }

    pub fn in_min_rtt_window(&self) -> bool {
        self.deferred_limit > 0
    }

    /// The minRTT measured last, microseconds (0 before the first).
    pub fn min_rtt_us(&self) -> u64 {
        self.min_rtt_us
    }

    fn enter_min_rtt_window(&mut self, now: Nanos) {
        if self.in_min_rtt_window() {
            return;
        }
        self.deferred_limit = self.limit;
        self.update_limit(self.config.min_concurrency, now);
        self.samples_us.clear();
        self.min_rtt_epoch = now;
    }

    fn update_min_rtt(&mut self, now: Nanos) {
        if !self.in_min_rtt_window() || self.samples_us.len() < self.config.request_count {
            return;
        }
        self.min_rtt_us = self.summarize_and_clear();
        self.update_limit(self.deferred_limit, now);
        self.deferred_limit = 0;
        self.next_min_rtt = Some(now + self.jittered(self.config.min_rtt_interval));
        self.next_sample_reset = Some(now + self.config.update_interval);
    }

    /// `interval + random % ceil(interval x jitter)`, in whole milliseconds as Envoy's are.
    fn jittered(&mut self, interval: Nanos) -> Nanos {
        let ms = interval / 1_000_000;
        if self.config.jitter == 0.0 {
            return ms * 1_000_000;
        }
        let range = ((ms as f64) * self.config.jitter).ceil().max(1.0) as u64;
        (ms + self.rng.random::<u64>() % range) * 1_000_000
    }

    fn reset_sample_window(&mut self, now: Nanos) {
        if self.samples_us.is_empty() {
            return;
        }
        self.sample_rtt_us = self.summarize_and_clear();
        let new_limit = self.new_limit();
        self.update_limit(new_limit, now);
    }

    /// The window's latencies at the configured percentile (nearest rank), cleared.
    fn summarize_and_clear(&mut self) -> u64 {
        let q = percentile(&mut self.samples_us, self.config.percentile);
        self.samples_us.clear();
        q
    }

    /// `calculateNewLimit`.
    pub fn new_limit(&self) -> u32 {
        let min_rtt = self.min_rtt_us as f64;
        let buffered = min_rtt + min_rtt * self.config.buffer;
        let gradient = (buffered / self.sample_rtt_us.max(1) as f64).clamp(0.5, 2.0);
        let limit = self.limit as f64 * gradient;
        let headroom = limit.sqrt();
        let new_limit = (limit + headroom) as u32;
        new_limit
            .min(self.config.max_concurrency_limit)
            .max(self.config.min_concurrency)
    }

    fn update_limit(&mut self, new_limit: u32, now: Nanos) {
        let old = self.limit;
        self.limit = new_limit;
        let min = self.config.min_concurrency;
        if !self.in_min_rtt_window() && old == min && new_limit == min {
            self.consecutive_min += 1;
        } else {
            self.consecutive_min = 0;
        }
        if self.consecutive_min >= 5 {
            self.next_min_rtt = Some(now);
        }
    }
}

/// The `q` quantile of `values` by nearest rank (sorts them).
pub fn percentile(values: &mut [u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    values[super::nearest_rank(values.len(), q)]
}

impl Controller for Envoy {
    fn limit(&self) -> usize {
        self.limit as usize
    }

    fn on_outcome(&mut self, now: Nanos, o: &Outcome) {
        if matches!(o.ending, Ending::Timeout | Ending::Failed) {
            return; // cancelLatencySample
        }
        if o.start < self.min_rtt_epoch {
            return;
        }
        self.samples_us.push(o.rtt / 1000);
        self.update_min_rtt(now);
    }

    fn on_time(&mut self, now: Nanos) {
        if self.next_min_rtt.is_some_and(|t| t <= now) {
            self.next_min_rtt = None;
            self.enter_min_rtt_window(now);
        }
        if self.next_sample_reset.is_some_and(|t| t <= now) {
            if self.in_min_rtt_window() {
                // Given up; the minRTT calculation arms it again.
                self.next_sample_reset = None;
            } else {
                self.reset_sample_window(now);
                self.next_sample_reset = Some(now + self.config.update_interval);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::controllers::testing::{answered, ending, MS};

    fn no_jitter() -> EnvoyConfig {
        EnvoyConfig {
            jitter: 0.0,
            ..EnvoyConfig::default()
        }
    }

    #[test]
    fn min_rtt_is_the_median_of_fifty_samples_at_the_pinned_limit_then_the_limit_comes_back() {
        let mut e = Envoy::new(no_jitter(), 1);
        assert_eq!(e.limit, 3);
        assert!(e.in_min_rtt_window());
        // The reset timer fires in the window: given up.
        e.on_time(100 * MS);
        assert_eq!(e.next_sample_reset, None);
        // 49 samples of 10..=58 ms: not yet.
        for i in 0..49 {
            e.on_outcome(200 * MS, &answered(1.0, 10.0 + i as f64, 3));
        }
        assert!(e.in_min_rtt_window());
        // A timeout is no sample.
        e.on_outcome(200 * MS, &ending(answered(1.0, 1.0, 3), Ending::Timeout));
        // The 50th (59 ms): the median by nearest rank is the 25th, 34 ms.
        e.on_outcome(250 * MS, &answered(1.0, 59.0, 3));
        assert!(!e.in_min_rtt_window());
        assert_eq!(e.min_rtt_us, 34_000);
        assert_eq!(e.limit, 3, "the deferred limit was the minimum itself");
        assert_eq!(e.next_min_rtt, Some(250 * MS + 60_000 * MS));
        assert_eq!(e.next_sample_reset, Some(350 * MS));
    }

    #[test]
    fn the_gradient_uses_the_buffered_min_rtt_and_adds_its_square_root() {
        let mut e = Envoy::new(no_jitter(), 1);
        for _ in 0..50 {
            e.on_outcome(10 * MS, &answered(1.0, 20.0, 3));
        }
        assert_eq!(e.min_rtt_us, 20_000);
        // sampleRTT 20 ms: gradient 25 / 20 = 1.25; 3 x 1.25 = 3.75 + 1.936 = 5.69 -> 5.
        e.on_outcome(50 * MS, &answered(20.0, 20.0, 3));
        e.on_time(110 * MS);
        assert_eq!(e.limit, 5);
        // sampleRTT 10 ms: gradient clamps at 2: 10 + 3.16 -> 13.
        e.on_outcome(150 * MS, &answered(120.0, 10.0, 5));
        e.on_time(210 * MS);
        assert_eq!(e.limit, 13);
        // No samples in a window: the limit stays.
        e.on_time(310 * MS);
        assert_eq!(e.limit, 13);
        // sampleRTT 100 ms: gradient clamps at 0.5: 6.5 + 2.55 -> 9.
        e.on_outcome(350 * MS, &answered(250.0, 100.0, 9));
        e.on_time(410 * MS);
        assert_eq!(e.limit, 9);
        // Samples sent before the minRTT epoch still count outside a window (epoch 0).
        assert_eq!(e.min_rtt_epoch, 0);
    }

    #[test]
    fn five_windows_at_the_minimum_start_a_new_min_rtt_window() {
        let mut e = Envoy::new(no_jitter(), 1);
        for _ in 0..50 {
            e.on_outcome(10 * MS, &answered(1.0, 10.0, 3));
        }
        // Every window: sampleRTT 100 ms, gradient 0.125 -> 0.5: 1.5 + 1.22 -> 2 -> min 3.
        let mut t = 110;
        for n in 1..=5 {
            e.on_outcome(t * MS, &answered(t as f64 - 100.0, 100.0, 3));
            e.on_time(t * MS);
            assert_eq!(e.limit, 3);
            assert_eq!(e.consecutive_min, n);
            t += 100;
        }
        assert_eq!(e.next_min_rtt, Some(510 * MS));
        e.on_time(520 * MS);
        assert!(e.in_min_rtt_window());
        assert_eq!(e.min_rtt_epoch, 520 * MS);
        // A request sent before the new epoch is not a minRTT sample.
        e.on_outcome(530 * MS, &answered(515.0, 15.0, 3));
        assert!(e.samples_us.is_empty());
    }

    #[test]
    fn the_jitter_delays_the_next_window_by_up_to_its_share() {
        let mut e = Envoy::new(EnvoyConfig::default(), 7);
        for _ in 0..50 {
            e.on_outcome(10 * MS, &answered(1.0, 10.0, 3));
        }
        let next = e.next_min_rtt.unwrap();
        assert!(
            (60_010 * MS..60_010 * MS + 9_000 * MS).contains(&next),
            "{next}"
        );
    }
}
