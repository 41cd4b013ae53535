//! Netflix's VegasLimit: the queue at the bottleneck estimated as `limit x (1 - rtt_noload /
//! rtt)`; grow by beta while it is under the threshold, by log10(limit) while under alpha,
//! shrink by log10(limit) past beta or on a drop; every `probe_multiplier x limit x jitter`
//! samples the next rtt becomes the no-load rtt (a probe). Follows
//! Netflix/concurrency-limits `concurrency-limits-core/src/main/java/com/netflix/concurrency/
//! limits/limit/VegasLimit.java` at 414f64dd (2024-10-25), with its builder's defaults.

use rand::{RngExt, SeedableRng};

use super::{log10_root, Nanos, NetflixLimit};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VegasConfig {
    pub initial_limit: usize,
    pub max_concurrency: usize,
    pub smoothing: f64,
    pub probe_multiplier: usize,
}

impl Default for VegasConfig {
    fn default() -> Self {
        VegasConfig {
            initial_limit: 20,
            max_concurrency: 1000,
            smoothing: 1.0,
            probe_multiplier: 30,
        }
    }
}

pub struct Vegas {
    config: VegasConfig,
    estimated: f64,
    rtt_noload: Nanos,
    probe_count: usize,
    probe_jitter: f64,
    rng: rand::rngs::SmallRng,
}

impl Vegas {
    pub fn new(config: VegasConfig, seed: u64) -> Vegas {
        let mut vegas = Vegas {
            config,
            estimated: config.initial_limit as f64,
            rtt_noload: 0,
            probe_count: 0,
            probe_jitter: 0.0,
            rng: rand::rngs::SmallRng::seed_from_u64(seed),
        };
        vegas.reset_probe_jitter();
        vegas
    }

    /// With the jitter fixed (a test's), so that the probe's sample is known.
    #[cfg(test)]
    pub fn with_jitter(config: VegasConfig, jitter: f64) -> Vegas {
        let mut vegas = Vegas::new(config, 0);
        vegas.probe_jitter = jitter;
        vegas
    }

    /// `ThreadLocalRandom.nextDouble(0.5, 1)`.
    fn reset_probe_jitter(&mut self) {
        self.probe_jitter = self.rng.random_range(0.5..1.0);
    }

    fn should_probe(&self) -> bool {
        self.probe_jitter * self.config.probe_multiplier as f64 * self.estimated
            <= self.probe_count as f64
    }

    fn update_estimated(&mut self, rtt: Nanos, rtt_noload: Nanos, inflight: usize, drop: bool) {
        let estimated = self.estimated;
        let queue = (estimated * (1.0 - rtt_noload as f64 / rtt as f64)).ceil() as i64;
        let limit_int = estimated as i64;
        let new_limit = if drop {
            estimated - log10_root(limit_int) as f64
        } else if (inflight as f64) * 2.0 < estimated {
            return;
        } else {
            let alpha = 3 * log10_root(limit_int);
            let beta = 6 * log10_root(limit_int);
            let threshold = log10_root(limit_int);
            if queue <= threshold {
                estimated + beta as f64
            } else if queue < alpha {
                estimated + log10_root(limit_int) as f64
            } else if queue > beta {
                estimated - log10_root(limit_int) as f64
            } else {
                return;
            }
        };
        let new_limit = new_limit.min(self.config.max_concurrency as f64).max(1.0);
        let s = self.config.smoothing;
        self.estimated = (1.0 - s) * estimated + s * new_limit;
    }
}

impl NetflixLimit for Vegas {
    fn limit(&self) -> usize {
        self.estimated as usize
    }

    fn on_sample(&mut self, _start: Nanos, rtt: Nanos, inflight: usize, did_drop: bool) {
        self.probe_count += 1;
        if self.should_probe() {
            self.reset_probe_jitter();
            self.probe_count = 0;
            self.rtt_noload = rtt;
            return;
        }
        if self.rtt_noload == 0 || rtt < self.rtt_noload {
            self.rtt_noload = rtt;
            return;
        }
        self.update_estimated(rtt, self.rtt_noload, inflight, did_drop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::controllers::testing::MS;

    #[test]
    fn grows_by_beta_without_a_queue_and_shrinks_by_log10_past_beta() {
        // Jitter 1.0: a probe only after 30 x limit samples, far beyond this sequence.
        let mut v = Vegas::with_jitter(VegasConfig::default(), 1.0);
        // First sample: the no-load rtt, limit unchanged.
        v.on_sample(0, 10 * MS, 20, false);
        assert_eq!(NetflixLimit::limit(&v), 20);
        // rtt = noload: queue = ceil(20 x 0) = 0 <= threshold 1: 20 + beta (6 x 1) = 26.
        v.on_sample(0, 10 * MS, 20, false);
        assert_eq!(NetflixLimit::limit(&v), 26);
        // 26 x (1 - 10/11) = 2.36, ceil 3: not < alpha 3, not > beta 6: unchanged.
        v.on_sample(0, 11 * MS, 26, false);
        assert_eq!(NetflixLimit::limit(&v), 26);
        // 26 x (1 - 10/12) = 4.33, ceil 5: unchanged (alpha 3 <= 5 <= beta 6).
        v.on_sample(0, 12 * MS, 26, false);
        assert_eq!(NetflixLimit::limit(&v), 26);
        // 26 x (1 - 10/20) = 13 > beta 6: 26 - 1 = 25.
        v.on_sample(0, 20 * MS, 26, false);
        assert_eq!(NetflixLimit::limit(&v), 25);
        // Few in flight (2 x 12 < 25): no change, whatever the queue.
        v.on_sample(0, 10 * MS, 12, false);
        assert_eq!(NetflixLimit::limit(&v), 25);
        // A drop: 25 - 1 = 24, even with few in flight.
        v.on_sample(0, 10 * MS, 1, true);
        assert_eq!(NetflixLimit::limit(&v), 24);
        // A faster sample is the new no-load rtt, limit unchanged.
        v.on_sample(0, 5 * MS, 24, false);
        assert_eq!(NetflixLimit::limit(&v), 24);
        assert_eq!(v.rtt_noload, 5 * MS);
        // 24 x (1 - 5/6) = 4: not <= 1, not < alpha 3, not > 6: unchanged.
        v.on_sample(0, 6 * MS, 24, false);
        assert_eq!(NetflixLimit::limit(&v), 24);
    }

    #[test]
    fn a_probe_resets_the_no_load_rtt_to_the_sample_it_lands_on() {
        // Jitter 0.5, limit 20, multiplier 30: a probe once 300 samples have been counted.
        let mut v = Vegas::with_jitter(VegasConfig::default(), 0.5);
        v.on_sample(0, 10 * MS, 1, false);
        for _ in 1..299 {
            v.on_sample(0, 50 * MS, 1, false); // few in flight: no change
        }
        assert_eq!(v.rtt_noload, 10 * MS);
        assert_eq!(NetflixLimit::limit(&v), 20);
        v.on_sample(0, 50 * MS, 1, false); // the 300th
        assert_eq!(v.rtt_noload, 50 * MS);
        assert_eq!(v.probe_count, 0);
    }

    #[test]
    fn a_limit_at_and_past_100_uses_log10_two() {
        let config = VegasConfig {
            initial_limit: 100,
            ..VegasConfig::default()
        };
        let mut v = Vegas::with_jitter(config, 1.0);
        v.on_sample(0, 10 * MS, 100, false);
        // Queue 0 <= threshold 2: 100 + beta 12.
        v.on_sample(0, 10 * MS, 100, false);
        assert_eq!(NetflixLimit::limit(&v), 112);
        // 112 x (1 - 10/10.1) = 1.11, ceil 2 <= threshold 2: + 12 again.
        v.on_sample(0, 10_100_000, 112, false);
        assert_eq!(NetflixLimit::limit(&v), 124);
        // 124 x (1 - 10/10.3) = 3.61, ceil 4 < alpha 6: + log10 = 126.
        v.on_sample(0, 10_300_000, 124, false);
        assert_eq!(NetflixLimit::limit(&v), 126);
    }
}
