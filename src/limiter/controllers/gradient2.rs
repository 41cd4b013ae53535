//! Netflix's Gradient2Limit: the gradient is `tolerance x long_rtt / short_rtt` clamped to
//! 0.5..1, where the short rtt is the sample and the long one an exponential average over 600
//! samples (the first 10 averaged plainly); the new limit is `limit x gradient + queue_size`,
//! smoothed by 0.2 and clamped to min..max. A drop is not looked at, and the limit does not move
//! while fewer than half of it are in flight. Follows Netflix/concurrency-limits
//! `concurrency-limits-core/src/main/java/com/netflix/concurrency/limits/limit/Gradient2Limit.java`
//! and `limit/measurement/ExpAvgMeasurement.java` at 414f64dd (2024-10-25), with the defaults.

use super::{Nanos, NetflixLimit};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gradient2Config {
    pub initial_limit: usize,
    pub min_limit: usize,
    pub max_concurrency: usize,
    pub smoothing: f64,
    pub queue_size: f64,
    pub long_window: usize,
    pub rtt_tolerance: f64,
}

impl Default for Gradient2Config {
    fn default() -> Self {
        Gradient2Config {
            initial_limit: 20,
            min_limit: 20,
            max_concurrency: 200,
            smoothing: 0.2,
            queue_size: 4.0,
            long_window: 600,
            rtt_tolerance: 1.5,
        }
    }
}

/// `ExpAvgMeasurement(window, warmup)`: a plain mean over the first `warmup` samples, then
/// an exponential average with factor 2 / (window + 1).
#[derive(Debug, Clone, Copy)]
pub struct ExpAvg {
    value: f64,
    sum: f64,
    count: usize,
    window: usize,
    warmup: usize,
}

impl ExpAvg {
    pub fn new(window: usize, warmup: usize) -> ExpAvg {
        ExpAvg {
            value: 0.0,
            sum: 0.0,
            count: 0,
            window,
            warmup,
        }
    }

    pub fn add(&mut self, sample: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.sum += sample;
            self.value = self.sum / self.count as f64;
        } else {
            let factor = 2.0 / (self.window as f64 + 1.0);
            self.value = self.value * (1.0 - factor) + sample * factor;
        }
        self.value
    }

    pub fn get(&self) -> f64 {
        self.value
    }

    pub fn scale(&mut self, by: f64) {
        self.value *= by;
    }
}

pub struct Gradient2 {
    config: Gradient2Config,
    estimated: f64,
    long_rtt: ExpAvg,
}

impl Gradient2 {
    pub fn new(config: Gradient2Config) -> Gradient2 {
        Gradient2 {
            config,
            estimated: config.initial_limit as f64,
            long_rtt: ExpAvg::new(config.long_window, 10),
        }
    }

    /// The long-term rtt the gradient compares against (ns).
    pub fn long_rtt(&self) -> f64 {
        self.long_rtt.get()
    }
}

impl NetflixLimit for Gradient2 {
    fn limit(&self) -> usize {
        self.estimated as usize
    }

    fn on_sample(&mut self, _start: Nanos, rtt: Nanos, inflight: usize, _did_drop: bool) {
        let estimated = self.estimated;
        let queue_size = self.config.queue_size;
        let short = rtt as f64;
        let long = self.long_rtt.add(short);
        // Latency back to normal after a long overload: bring the long rtt down faster.
        if long / short > 2.0 {
            self.long_rtt.scale(0.95);
        }
        if (inflight as f64) < estimated / 2.0 {
            return;
        }
        let gradient = (self.config.rtt_tolerance * long / short).clamp(0.5, 1.0);
        let new_limit = estimated * gradient + queue_size;
        let new_limit =
            estimated * (1.0 - self.config.smoothing) + new_limit * self.config.smoothing;
        self.estimated = new_limit
            .min(self.config.max_concurrency as f64)
            .max(self.config.min_limit as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::controllers::testing::MS;

    fn limit(g: &Gradient2) -> f64 {
        g.estimated
    }

    #[test]
    fn the_exponential_average_warms_up_plainly_then_weighs_by_two_over_window_plus_one() {
        let mut a = ExpAvg::new(3, 2);
        assert_eq!(a.add(10.0), 10.0);
        assert_eq!(a.add(20.0), 15.0);
        // factor 2 / 4 = 0.5: 15 x 0.5 + 35 x 0.5.
        assert_eq!(a.add(35.0), 25.0);
    }

    #[test]
    fn steady_latency_creeps_up_by_queue_size_times_smoothing_until_the_maximum() {
        let mut g = Gradient2::new(Gradient2Config::default());
        // long = short: gradient min(1, 1.5) = 1; 20 x 0.8 + (20 + 4) x 0.2 = 20.8.
        g.on_sample(0, 10 * MS, 20, false);
        assert!((limit(&g) - 20.8).abs() < 1e-9);
        g.on_sample(0, 10 * MS, 20, false);
        assert!((limit(&g) - 21.6).abs() < 1e-9);
        for _ in 0..300 {
            g.on_sample(0, 10 * MS, 200, false);
        }
        assert_eq!(NetflixLimit::limit(&g), 200, "the creep stops only at max");
    }

    #[test]
    fn a_slow_sample_cuts_by_the_gradient_and_few_in_flight_hold_the_limit() {
        let config = Gradient2Config {
            initial_limit: 100,
            ..Gradient2Config::default()
        };
        let mut g = Gradient2::new(config);
        g.on_sample(0, 10 * MS, 100, false); // 100 -> 100.8
                                             // long = (10 + 40) / 2 = 25 ms; gradient 1.5 x 25 / 40 = 0.9375;
                                             // 100.8 x 0.9375 + 4 = 98.5; 100.8 x 0.8 + 98.5 x 0.2 = 100.34.
        g.on_sample(0, 40 * MS, 100, false);
        assert!((limit(&g) - 100.34).abs() < 1e-9, "{}", limit(&g));
        // 49 in flight < 100.34 / 2: unchanged, but the long rtt still learns: (50 + 10) / 3.
        g.on_sample(0, 10 * MS, 49, false);
        assert!((limit(&g) - 100.34).abs() < 1e-9);
        assert!((g.long_rtt() - 20.0 * MS as f64).abs() < 1.0);
        // A drop is not looked at: the same sample as an answer.
        let mut a = Gradient2::new(config);
        let mut b = Gradient2::new(config);
        a.on_sample(0, 30 * MS, 100, true);
        b.on_sample(0, 30 * MS, 100, false);
        assert_eq!(limit(&a), limit(&b));
    }

    #[test]
    fn the_gradient_bottoms_at_a_half_and_the_limit_at_min_limit() {
        let config = Gradient2Config {
            initial_limit: 100,
            ..Gradient2Config::default()
        };
        let mut g = Gradient2::new(config);
        g.on_sample(0, MS, 100, false); // 100.8
                                        // long = 500.5 ms, short 1 s: 1.5 x 0.5005 = 0.75075: 100.8 x 0.75075 + 4 = 79.6756;
                                        // 100.8 x 0.8 + 79.6756 x 0.2 = 96.57512.
        g.on_sample(0, 1000 * MS, 100, false);
        assert!((limit(&g) - 96.57512).abs() < 1e-9, "{}", limit(&g));
        // long = (1 + 1000 + 100000) / 3 ms; short 100 s: gradient 1.5 x 0.33667 = 0.505005.
        g.on_sample(0, 100_000 * MS, 100, false);
        // 96.57512 x 0.8 + (96.57512 x 0.505005 + 4) x 0.2 = 87.81428.
        assert!((limit(&g) - 87.81428).abs() < 1e-5, "{}", limit(&g));
        // One in flight: the long rtt learns 1 ms, the limit holds. Then 20 x 0.75075 + 4 =
        // 19.015; 20 x 0.8 + 19.015 x 0.2 = 19.803, clamped up to min_limit 20.
        let mut low = Gradient2::new(Gradient2Config::default());
        low.on_sample(0, MS, 1, false);
        assert_eq!(limit(&low), 20.0);
        low.on_sample(0, 1000 * MS, 20, false);
        assert_eq!(limit(&low), 20.0, "clamped at min_limit 20");
    }
}
