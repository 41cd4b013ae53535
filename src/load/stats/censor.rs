//! Requests without an answer, never left out: each [`Censored`] request is recorded at the
//! age it reached, and [`lower_bounds`] flags the figures it can reach.

use super::*;

/// A request whose latency is only known to be at least some age.
///
/// A request sent and not answered when the run ends has a latency of *at least* its age then.
/// Leaving it out (as wrk and ab do) makes a server that never answers most of its connections
/// look fast. So, at the end of a run (after the engine's short drain, which lets young requests
/// finish with their true latency, so a healthy run censors nothing):
/// - every request still in flight is recorded at its age (`InFlight`): since its intended send
///   time in the corrected histogram, since its actual one in the uncorrected;
/// - rate mode: every request whose intended send time had passed but that could not be sent
///   (its connection still waiting, or down) is recorded at its age since that intended time,
///   in the corrected histogram only (`Unsent`);
/// - closed loop (closed and count modes): a connection stuck on one request would have sent
///   many more had it been answered, so, as HdrHistogram's coordinated-omission correction
///   (`recordValueWithExpectedInterval`) does, each censored request of age `A` also stands for
///   the requests it held back: `A - I`, `A - 2I`, ... down to `I`, with `I` the mean latency of
///   the answered requests (the interval at which the connection would have sent). Without
///   this, 63 connections stuck for the whole run among 20,000 fast answers are 0.3% of the
///   samples and move no percentile up to p99; with it, p99 is at least (nearly) the run's
///   length. Every such value is a lower bound too.
///
/// Timeouts are never samples (their latency is only known to be at least the timeout). In a
/// closed loop a timed-out request is the same stuck connection as a censored one: it is
/// recorded at the timeout and stands for the requests it held back, all lower bounds
/// ([`censored_view`]); in rate mode it only flags the figures it can reach.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Censored {
    /// Sent, not answered when the run ended: its age since the intended and the actual send.
    InFlight {
        since_intended_us: u64,
        since_sent_us: u64,
    },
    /// Rate mode: `count` requests of one connection that were due (every `step_us`, the
    /// oldest `oldest_us` old at the end) but could not be sent.
    Unsent {
        oldest_us: u64,
        step_us: f64,
        count: u64,
    },
}

/// Which latency a view measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyView {
    /// From intended send times (closed and count modes: the actual ones), in a closed loop
    /// filled in for the requests a stuck connection held back.
    ClosedLoop,
    /// Rate mode, from intended send times: unsent requests that were due count too.
    RateCorrected,
    /// Rate mode, from actual send times: only requests that were sent.
    RateUncorrected,
    /// Closed loop, one line of a URL list: censored requests at their age and timed-out ones
    /// at the timeout, standing for no others (what a stuck connection held back would have
    /// been other lines).
    ClosedLoopLine,
}

/// One view's histogram with its censored requests in, and what the flags need to know.
#[derive(Debug, Clone)]
pub struct CensoredHistogram {
    pub histogram: LatencyHistogram,
    /// Recorded values that are only lower bounds (censored and synthetic ones).
    pub unknown: u64,
    /// The smallest of those values, microseconds.
    pub smallest_unknown_us: Option<u64>,
}

/// Adds the censored requests to a copy of the histogram of answered requests, as the module
/// header describes for each view.
pub fn with_censored(
    answered: &LatencyHistogram,
    censored: &[Censored],
    view: LatencyView,
) -> CensoredHistogram {
    let mut with = CensoredHistogram {
        histogram: answered.clone(),
        unknown: 0,
        smallest_unknown_us: None,
    };
    // The interval a stuck closed-loop connection would have sent at: the mean answered latency.
    let interval = answered.mean();
    for c in censored {
        match (*c, view) {
            (Censored::InFlight { since_sent_us, .. }, LatencyView::RateUncorrected) => {
                with.record_stuck(since_sent_us as f64, 0.0, 1);
            }
            (
                Censored::InFlight {
                    since_intended_us, ..
                },
                LatencyView::RateCorrected | LatencyView::ClosedLoopLine,
            ) => with.record_stuck(since_intended_us as f64, 0.0, 1),
            (Censored::InFlight { since_sent_us, .. }, LatencyView::ClosedLoop) => {
                with.record_stuck(since_sent_us as f64, interval, 1);
            }
            (
                Censored::Unsent {
                    oldest_us,
                    step_us,
                    count,
                },
                LatencyView::RateCorrected,
            ) => {
                let lowest = with
                    .histogram
                    .record_linear_fill(oldest_us as f64, step_us, count);
                with.note(lowest, count);
            }
            (Censored::Unsent { .. }, _) => {}
        }
    }
    with
}

impl CensoredHistogram {
    /// Counts `count` recorded lower bounds, the smallest `lowest` (none recorded: `None`).
    fn note(&mut self, lowest: Option<u64>, count: u64) {
        if let Some(v) = lowest {
            self.unknown = self.unknown.saturating_add(count);
            self.smallest_unknown_us = Some(self.smallest_unknown_us.map_or(v, |s| s.min(v)));
        }
    }

    /// Records `times` stuck requests of age `age_us` as lower bounds, each standing also for
    /// the requests its connection held back at `interval` (`age - interval`, ... down to
    /// `interval`; none with an interval under 1 µs, or one not half the age).
    fn record_stuck(&mut self, age_us: f64, interval: f64, times: u64) {
        let lowest = self
            .histogram
            .record_linear_fill_times(age_us, 0.0, 1, times);
        self.note(lowest, times);
        if interval >= 1.0 && age_us >= 2.0 * interval {
            let held_back = (age_us / interval).floor() as u64 - 1;
            let lowest = self.histogram.record_linear_fill_times(
                age_us - interval,
                interval,
                held_back,
                times,
            );
            self.note(lowest, held_back.saturating_mul(times));
        }
    }
}

/// The percentiles of a [`LatencySummary`] with their quantiles.
const QUANTILES: [(LatencyKey, f64); 6] = [
    (LatencyKey::P50, 0.50),
    (LatencyKey::P75, 0.75),
    (LatencyKey::P90, 0.90),
    (LatencyKey::P99, 0.99),
    (LatencyKey::P999, 0.999),
    (LatencyKey::P9999, 0.9999),
];

/// The figures of `summary` that are only lower bounds.
///
/// `summary.count` values were recorded, `unknown` of them lower bounds, the smallest of
/// which is `smallest_unknown_us`; `timeouts` more requests were not recorded and took at
/// least `timeout_us`. Values are compared at the histogram's precision: the caller passes
/// the bounds as the histogram's lowest equivalent values.
///
/// Call the requests whose latency is only bounded below *unknown* (censored and synthetic
/// ones, recorded at their bound, and timeouts, not recorded), and `m` the smallest bound among
/// them. Every recorded value is at most the true one, so no figure is ever above the truth. A
/// figure is flagged when an unknown request can change it: `max` and `mean` whenever there is
/// one; a percentile (and `min`) when its value is at least `m` (an unknown request sits at or
/// below it, and its true latency may be far above), or when the unknown requests are numerous
/// enough to occupy its rank from above (`unknown >= N - rank + 1` over all `N` requests,
/// timeouts included). A figure not flagged is below every unknown request's bound, so it is the
/// exact value at its rank among the requests with a known latency, which is all it claims to be.
pub fn lower_bounds(
    summary: &LatencySummary,
    unknown: u64,
    smallest_unknown_us: Option<u64>,
    timeouts: u64,
    timeout_us: u64,
) -> LowerBounds {
    let mut flags = LowerBounds::default();
    let unknown_total = unknown + timeouts;
    if unknown_total == 0 {
        return flags;
    }
    let bound = match (smallest_unknown_us, timeouts > 0) {
        (Some(s), true) => s.min(timeout_us),
        (Some(s), false) => s,
        (None, _) => timeout_us,
    } as f64;
    let all = summary.count + timeouts;
    // Rank (1-based, over all requests) of quantile q, as HdrHistogram counts it.
    let rank = |q: f64| ((q * all as f64).ceil() as u64).max(1);
    let unknown_can_hold = |q: f64| unknown_total > all.saturating_sub(rank(q));
    flags.insert(LatencyKey::Mean);
    flags.insert(LatencyKey::Max);
    if summary.count == 0 || summary.min >= bound || unknown_can_hold(0.0) {
        flags.insert(LatencyKey::Min);
    }
    for (key, q) in QUANTILES {
        if summary.count == 0 || summary.get(key) >= bound || unknown_can_hold(q) {
            flags.insert(key);
        }
    }
    flags
}

/// The summary of a view with its censored requests, flagged: what a report shows.
pub fn censored_summary(
    answered: &LatencyHistogram,
    censored: &[Censored],
    view: LatencyView,
    timeouts: u64,
    timeout: Duration,
) -> LatencySummary {
    censored_view(answered, censored, view, timeouts, timeout).0
}

/// [`censored_summary`] with the histogram it summarizes (which a report serializes).
pub fn censored_view(
    answered: &LatencyHistogram,
    censored: &[Censored],
    view: LatencyView,
    timeouts: u64,
    timeout: Duration,
) -> (LatencySummary, LatencyHistogram) {
    let mut with = with_censored(answered, censored, view);
    let timeout_us = u64::try_from(timeout.as_micros()).unwrap_or(u64::MAX);
    // Closed loop: a timed-out request is recorded at the timeout (its latency is at least
    // that) and, like a censored request of that age, stands for the requests its connection
    // held back meanwhile (none per URL line: those would have been other lines). Without
    // this, 7 of 8 connections stuck until they time out are 7 requests among thousands of
    // fast answers, and the percentiles say the server is fast.
    let age = timeout_us.min(MAX_LATENCY_US) as f64;
    let unrecorded_timeouts = match view {
        LatencyView::ClosedLoop if timeouts > 0 => {
            with.record_stuck(age, answered.mean(), timeouts);
            0
        }
        LatencyView::ClosedLoopLine if timeouts > 0 => {
            with.record_stuck(age, 0.0, timeouts);
            0
        }
        _ => timeouts,
    };
    let mut summary = with.histogram.summary();
    summary.lower_bound = lower_bounds(
        &summary,
        with.unknown,
        with.smallest_unknown_us
            .map(|s| with.histogram.lowest_equivalent(s)),
        unrecorded_timeouts,
        with.histogram.lowest_equivalent(timeout_us),
    );
    (summary, with.histogram)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    /// Every figure from the median up, and the mean, are lower bounds.
    fn assert_bounds_from_p50_up(s: &LatencySummary) {
        for key in [
            LatencyKey::P50,
            LatencyKey::P90,
            LatencyKey::P99,
            LatencyKey::P999,
            LatencyKey::Max,
            LatencyKey::Mean,
        ] {
            assert!(s.lower_bound.contains(key), "{key:?}: {:?}", s.lower_bound);
        }
    }

    /// 1000 answered requests of 1..=1000 µs.
    fn answered_1_to_1000() -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for us in 1..=1000 {
            h.record_us(us);
        }
        h
    }

    #[test]
    fn no_censored_request_and_no_timeout_flags_nothing() {
        let s = censored_summary(
            &answered_1_to_1000(),
            &[],
            LatencyView::ClosedLoop,
            0,
            SECOND,
        );
        assert!(s.lower_bound.is_empty(), "{:?}", s.lower_bound);
        assert_eq!(s.count, 1000);
    }

    #[test]
    fn one_old_request_in_a_rate_run_flags_the_tail_only() {
        // One request of 1001 still waiting after 5 s: it is the max, a lower bound; p99
        // (990 µs) and below are answered values under its 5 s bound, exact.
        let stuck = Censored::InFlight {
            since_intended_us: 5_000_000,
            since_sent_us: 4_000_000,
        };
        let h = answered_1_to_1000();
        let s = censored_summary(&h, &[stuck], LatencyView::RateCorrected, 0, SECOND);
        assert_eq!(s.count, 1001);
        assert!((s.max - 5_000_000.0).abs() / 5e6 < 0.001, "{}", s.max);
        let flagged: Vec<&str> = s.lower_bound.keys().map(LatencyKey::name).collect();
        assert_eq!(flagged, ["mean", "p9999", "max"]);
        assert!((s.p99 - 991.0).abs() <= 1.0, "{}", s.p99);
        // The uncorrected view has it at its age since the actual send.
        let u = censored_summary(&h, &[stuck], LatencyView::RateUncorrected, 0, SECOND);
        assert!((u.max - 4_000_000.0).abs() / 4e6 < 0.001, "{}", u.max);
    }

    #[test]
    fn a_young_censored_request_flags_every_figure_at_or_above_its_age() {
        // A request censored at 500 µs could take any time: p50 (500) and above may all be
        // higher in truth; min (1) and anything below 500 µs are exact.
        let young = Censored::InFlight {
            since_intended_us: 500,
            since_sent_us: 500,
        };
        let s = censored_summary(
            &answered_1_to_1000(),
            &[young],
            LatencyView::RateCorrected,
            0,
            SECOND,
        );
        let flagged: Vec<&str> = s.lower_bound.keys().map(LatencyKey::name).collect();
        assert_eq!(
            flagged,
            ["mean", "p50", "p75", "p90", "p99", "p999", "p9999", "max"]
        );
    }

    #[test]
    fn closed_loop_fill_puts_p99_of_a_mostly_stuck_run_near_the_run_length() {
        // The iterative server: one connection answered 20,000 times at 50 µs, 63 connections
        // stuck for the whole second. Unfilled, the 63 are 0.3% and p99 stays at 50 µs.
        let mut answered = LatencyHistogram::new();
        for i in 0..20_000 {
            answered.record_us(if i % 2 == 0 { 40 } else { 60 });
        }
        let stuck = vec![
            Censored::InFlight {
                since_intended_us: 1_000_000,
                since_sent_us: 1_000_000,
            };
            63
        ];
        let unfilled = censored_summary(&answered, &stuck, LatencyView::RateUncorrected, 0, SECOND);
        assert!(unfilled.p99 < 100.0, "{}", unfilled.p99);
        assert!(
            unfilled.lower_bound.contains(LatencyKey::Max)
                && !unfilled.lower_bound.contains(LatencyKey::P99)
        );
        let s = censored_summary(&answered, &stuck, LatencyView::ClosedLoop, 0, SECOND);
        // Each stuck connection stands for 1 s / 50 µs = 20,000 requests: itself and 19,999.
        assert_eq!(s.count, 20_000 + 63 * (1 + 19_999));
        assert!(
            s.p99 >= 980_000.0 && s.p99 <= 1_000_000.0 * 1.001,
            "{}",
            s.p99
        );
        assert!(s.p50 > 400_000.0, "{}", s.p50);
        assert_bounds_from_p50_up(&s);
        // The fastest answer (40 µs) is below every bound (the fill stops at 50 µs): exact.
        assert!(!s.lower_bound.contains(LatencyKey::Min));
        assert_eq!(s.min, 40.0);
    }

    #[test]
    fn unsent_requests_count_in_the_corrected_view_only() {
        // Rate mode: 1000 requests due every 1 ms and never sent, the oldest 1 s old.
        let unsent = Censored::Unsent {
            oldest_us: 1_000_000,
            step_us: 1000.0,
            count: 1000,
        };
        let h = answered_1_to_1000();
        let c = with_censored(&h, &[unsent], LatencyView::RateCorrected);
        assert_eq!(c.histogram.len(), 2000);
        assert_eq!(c.unknown, 1000);
        assert_eq!(c.smallest_unknown_us, Some(1000));
        let s = censored_summary(&h, &[unsent], LatencyView::RateCorrected, 0, SECOND);
        assert!((s.p99 - 980_000.0).abs() / 980_000.0 < 0.002, "{}", s.p99);
        assert!(s.lower_bound.contains(LatencyKey::P50) && s.lower_bound.contains(LatencyKey::P99));
        let u = with_censored(&h, &[unsent], LatencyView::RateUncorrected);
        assert_eq!((u.histogram.len(), u.unknown), (1000, 0));
    }

    #[test]
    fn at_a_rate_timeouts_are_not_samples_but_flag_the_ranks_they_can_hold() {
        let h = answered_1_to_1000();
        // 5 timeouts of 1005 requests: they can hold every rank above 1000, so p999 and p9999
        // (ranks 1004 and 1005) are lower bounds, p99 (rank 995) is not.
        let s = censored_summary(&h, &[], LatencyView::RateCorrected, 5, SECOND);
        assert_eq!(s.count, 1000);
        let flagged: Vec<&str> = s.lower_bound.keys().map(LatencyKey::name).collect();
        assert_eq!(flagged, ["mean", "p999", "p9999", "max"]);
        // 20 timeouts reach p99's rank (1010 of 1020).
        let s = censored_summary(&h, &[], LatencyView::RateCorrected, 20, SECOND);
        assert!(
            s.lower_bound.contains(LatencyKey::P99) && !s.lower_bound.contains(LatencyKey::P90)
        );
        // A timeout of 600 µs bounds those requests at 600 µs: p75 (750) may be higher.
        let s = censored_summary(
            &h,
            &[],
            LatencyView::RateCorrected,
            1,
            Duration::from_micros(600),
        );
        assert!(
            s.lower_bound.contains(LatencyKey::P75) && !s.lower_bound.contains(LatencyKey::P50)
        );
    }

    #[test]
    fn a_closed_loop_timeout_counts_with_the_requests_it_held_back() {
        // 1,000 answers with a mean of 500.5 µs, and 7 connections that timed out after 1 s:
        // each held back about 1,997 requests, at 999.5 ms, 999 ms, ... down to 500.5 µs.
        let h = answered_1_to_1000();
        let s = censored_summary(&h, &[], LatencyView::ClosedLoop, 7, SECOND);
        let held_back = (1_000_000.0 / 500.5_f64).floor() as u64 - 1;
        assert_eq!(s.count, 1000 + 7 + 7 * held_back);
        // p99 is near the timeout now, and only a lower bound; so is p50.
        assert!(s.p99 >= 980_000.0, "{}", s.p99);
        assert!(s.max >= 999_000.0, "{}", s.max);
        assert_bounds_from_p50_up(&s);
        // The fastest answer (1 µs) is below the fill: exact.
        assert!(!s.lower_bound.contains(LatencyKey::Min));
        // Without a timeout nothing changes.
        let healthy = censored_summary(&h, &[], LatencyView::ClosedLoop, 0, SECOND);
        assert_eq!(healthy.count, 1000);
        assert!(healthy.lower_bound.is_empty(), "{:?}", healthy.lower_bound);
        assert_eq!(healthy.p99, h.summary().p99);
    }

    #[test]
    fn nothing_answered_flags_everything() {
        let stuck = Censored::InFlight {
            since_intended_us: 2_000,
            since_sent_us: 2_000,
        };
        let empty = LatencyHistogram::new();
        let s = censored_summary(&empty, &[stuck], LatencyView::ClosedLoop, 0, SECOND);
        assert_eq!(s.count, 1);
        assert_eq!(s.lower_bound.keys().count(), LatencyKey::ALL.len());
        // Three timeouts and nothing answered: recorded at the timeout, no interval to fill.
        let none = censored_summary(&empty, &[], LatencyView::ClosedLoop, 3, SECOND);
        assert_eq!(none.count, 3);
        assert_eq!(none.lower_bound.keys().count(), LatencyKey::ALL.len());
    }
}
