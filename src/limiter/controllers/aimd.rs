//! Netflix's AIMDLimit: a drop (or an rtt past the 5 s timeout) multiplies the limit by 0.9,
//! truncated; any other sample adds 1 once at least half of the limit is in flight; clamped to
//! min..max. Follows Netflix/concurrency-limits `concurrency-limits-core/src/main/java/com/
//! netflix/concurrency/limits/limit/AIMDLimit.java` at 414f64dd (2024-10-25), with the defaults.

use super::{Nanos, NetflixLimit};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AimdConfig {
    pub min_limit: usize,
    pub initial_limit: usize,
    pub max_limit: usize,
    pub backoff_ratio: f64,
    pub timeout: Nanos,
}

impl Default for AimdConfig {
    fn default() -> Self {
        AimdConfig {
            min_limit: 20,
            initial_limit: 20,
            max_limit: 200,
            backoff_ratio: 0.9,
            timeout: 5_000_000_000,
        }
    }
}

pub struct Aimd {
    config: AimdConfig,
    limit: usize,
}

impl Aimd {
    pub fn new(config: AimdConfig) -> Aimd {
        Aimd {
            config,
            limit: config.initial_limit,
        }
    }
}

impl NetflixLimit for Aimd {
    fn limit(&self) -> usize {
        self.limit
    }

    fn on_sample(&mut self, _start: Nanos, rtt: Nanos, inflight: usize, did_drop: bool) {
        let mut limit = self.limit;
        if did_drop || rtt > self.config.timeout {
            limit = (limit as f64 * self.config.backoff_ratio) as usize;
        } else if inflight * 2 >= limit {
            limit += 1;
        }
        self.limit = limit.max(self.config.min_limit).min(self.config.max_limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::controllers::testing::MS;

    #[test]
    fn adds_one_when_half_is_in_flight_and_backs_off_by_a_tenth_on_a_drop() {
        let config = AimdConfig {
            min_limit: 1,
            initial_limit: 30,
            ..AimdConfig::default()
        };
        let mut a = Aimd::new(config);
        a.on_sample(0, 10 * MS, 15, false); // 15 x 2 >= 30: 31
        assert_eq!(a.limit, 31);
        a.on_sample(0, 10 * MS, 15, false); // 30 < 31: unchanged
        assert_eq!(a.limit, 31);
        a.on_sample(0, 10 * MS, 1, true); // (int) 27.9 = 27
        assert_eq!(a.limit, 27);
        a.on_sample(0, 5_001 * MS, 27, false); // past the timeout: (int) 24.3
        assert_eq!(a.limit, 24);
        a.on_sample(0, 5_000 * MS, 27, false); // at the timeout, not past it: + 1
        assert_eq!(a.limit, 25);
    }

    #[test]
    fn the_defaults_hold_between_twenty_and_two_hundred() {
        let mut a = Aimd::new(AimdConfig::default());
        a.on_sample(0, MS, 1, true);
        assert_eq!(a.limit, 20, "(int) 18 clamped up to min 20");
        for _ in 0..500 {
            a.on_sample(0, MS, 200, false);
        }
        assert_eq!(a.limit, 200);
    }
}
