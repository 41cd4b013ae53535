//! Vector's adaptive request concurrency (ARC): responses' rtts are averaged over an interval
//! one past-rtt long; at its end the limit grows by 1 if the limit was reached, nothing pushed
//! back and the interval's mean rtt is at most the past mean (an EWMA, alpha 0.4), or is cut to
//! `floor(limit x 0.9)` if something pushed back (a timeout, 429 or 503) or the mean reached
//! past mean + 2.5 deviations. Starts at 1, at most 200. Follows vectordotdev/vector
//! `src/sinks/util/adaptive_concurrency/controller.rs` at 4daa1f83 and its `mod.rs` defaults,
//! and `lib/vector-common/src/stats/mod.rs` (`EwmaVar`, `Mean`). Vector's semaphore makes a
//! request wait for a permit; the gate here rejects it instead, as the other limiters do.

use super::{Controller, Ending, Nanos, Outcome};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VectorConfig {
    pub initial_concurrency: usize,
    pub decrease_ratio: f64,
    pub ewma_alpha: f64,
    pub rtt_deviation_scale: f64,
    pub max_concurrency_limit: usize,
}

impl Default for VectorConfig {
    fn default() -> Self {
        VectorConfig {
            initial_concurrency: 1,
            decrease_ratio: 0.9,
            ewma_alpha: 0.4,
            rtt_deviation_scale: 2.5,
            max_concurrency_limit: 200,
        }
    }
}

/// `EwmaVar`'s state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanVariance {
    pub mean: f64,
    pub variance: f64,
}

/// `EwmaVar`: an exponentially weighted mean and variance.
#[derive(Debug, Clone, Copy)]
pub struct EwmaVar {
    state: Option<MeanVariance>,
    alpha: f64,
}

impl EwmaVar {
    pub fn new(alpha: f64) -> EwmaVar {
        EwmaVar { state: None, alpha }
    }

    pub fn update(&mut self, point: f64) -> MeanVariance {
        let state = match self.state {
            None => MeanVariance {
                mean: point,
                variance: 0.0,
            },
            Some(s) => {
                let difference = point - s.mean;
                let increment = self.alpha * difference;
                MeanVariance {
                    mean: s.mean + increment,
                    variance: (1.0 - self.alpha) * difference.mul_add(increment, s.variance),
                }
            }
        };
        self.state = Some(state);
        state
    }
}

pub struct Vector {
    config: VectorConfig,
    limit: usize,
    past_rtt: EwmaVar,
    next_update: Nanos,
    /// The interval's mean rtt (seconds) and its count.
    current_sum: f64,
    current_count: usize,
    had_back_pressure: bool,
    reached_limit: bool,
}

impl Vector {
    pub fn new(config: VectorConfig) -> Vector {
        Vector {
            config,
            limit: config.initial_concurrency,
            past_rtt: EwmaVar::new(config.ewma_alpha),
            next_update: 0,
            current_sum: 0.0,
            current_count: 0,
            had_back_pressure: false,
            reached_limit: false,
        }
    }

    fn current_rtt(&self) -> Option<f64> {
        (self.current_count > 0).then(|| self.current_sum / self.current_count as f64)
    }

    fn manage_limit(&mut self, past: MeanVariance, current: Option<f64>) {
        let threshold = past.variance.sqrt() * self.config.rtt_deviation_scale;
        if self.limit < self.config.max_concurrency_limit
            && self.reached_limit
            && !self.had_back_pressure
            && current.is_some_and(|c| c <= past.mean)
        {
            self.limit += 1;
        } else if self.limit > 1
            && (self.had_back_pressure || current.unwrap_or(0.0) >= past.mean + threshold)
        {
            self.limit = ((self.limit as f64 * self.config.decrease_ratio) as usize).max(1);
        }
    }
}

impl Controller for Vector {
    fn limit(&self) -> usize {
        self.limit
    }

    fn on_admit(&mut self, _now: Nanos, inflight: usize) {
        if inflight >= self.limit {
            self.reached_limit = true;
        }
    }

    fn on_outcome(&mut self, now: Nanos, o: &Outcome) {
        let back_pressure = matches!(o.ending, Ending::BackPressure | Ending::Timeout);
        let use_rtt = o.ending == Ending::Answered;
        if back_pressure {
            self.had_back_pressure = true;
        }
        if use_rtt {
            // `Mean::update`: the running mean of the interval.
            self.current_count += 1;
            self.current_sum += o.rtt as f64 / 1e9;
        }
        let current = self.current_rtt();
        match self.past_rtt.state {
            None => {
                if let Some(c) = current {
                    self.past_rtt.update(c);
                    self.next_update = now + (c * 1e9) as Nanos;
                }
            }
            Some(mut past) => {
                if now >= self.next_update {
                    self.manage_limit(past, current);
                    if let Some(c) = current {
                        past = self.past_rtt.update(c);
                    }
                    self.next_update = now + (past.mean * 1e9) as Nanos;
                    self.current_sum = 0.0;
                    self.current_count = 0;
                    self.had_back_pressure = false;
                    self.reached_limit = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::controllers::testing::{answered, ending, MS};

    #[test]
    fn the_ewma_variance_is_vectors() {
        let mut e = EwmaVar::new(0.4);
        assert_eq!(e.update(10.0).mean, 10.0);
        // difference 10, increment 4: mean 14, variance 0.6 x (10 x 4 + 0) = 24.
        let s = e.update(20.0);
        assert!((s.mean - 14.0).abs() < 1e-12 && (s.variance - 24.0).abs() < 1e-12);
    }

    #[test]
    fn grows_by_one_when_the_limit_was_reached_and_the_rtt_held() {
        let mut v = Vector::new(VectorConfig::default());
        // First response: past rtt = 10 ms, next update 10 ms later.
        v.on_admit(0, 1);
        v.on_outcome(10 * MS, &answered(0.0, 10.0, 1));
        assert_eq!((v.limit, v.next_update), (1, 20 * MS));
        // The interval's mean is kept from the first response on: (10 + 10) / 2 = 10 <= 10.
        v.on_admit(10 * MS, 1);
        v.on_outcome(20 * MS, &answered(10.0, 10.0, 1));
        assert_eq!(v.limit, 2);
        assert_eq!(v.next_update, 30 * MS);
        // Not reached (1 in flight of 2): no growth, even with a fast rtt.
        v.on_admit(20 * MS, 1);
        v.on_outcome(30 * MS, &answered(20.0, 5.0, 1));
        assert_eq!(v.limit, 2);
        // past is now 0.6 x 10 + 0.4 x 5 = 8 ms, variance 0.6 x (-5 x -2) = 6 ms^2 (in s^2).
        let past = v.past_rtt.state.unwrap();
        assert!((past.mean - 0.008).abs() < 1e-12, "{past:?}");
        assert!((past.variance - 6e-6).abs() < 1e-15, "{past:?}");
    }

    #[test]
    fn a_slow_interval_or_a_timeout_cuts_to_nine_tenths_floored() {
        let mut v = Vector::new(VectorConfig {
            initial_concurrency: 10,
            ..VectorConfig::default()
        });
        v.on_outcome(10 * MS, &answered(0.0, 10.0, 1)); // past 10 ms, next at 20 ms
                                                        // threshold is 0 (no variance yet): 30 ms >= 10 ms + 0: floor(9) = 9.
        v.on_outcome(20 * MS, &answered(0.0, 30.0, 5));
        assert_eq!(v.limit, 9);
        // A timeout pushes back: floor(8.1) = 8, its rtt not averaged.
        let next = v.next_update;
        v.on_outcome(next, &ending(answered(0.0, 1.0, 5), Ending::Timeout));
        assert_eq!(v.limit, 8);
        // A failed connection is not back pressure (Vector's HTTP protocol errors are not).
        let next = v.next_update;
        v.on_outcome(next, &ending(answered(0.0, 1.0, 5), Ending::Failed));
        assert_eq!(v.limit, 8);
    }
}
