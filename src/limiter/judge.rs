//! Judging a limiter against the sweet spot measured in the same run, as pure functions: the
//! knee of a closed-loop sweep over N (the smallest N reaching 95% of the best throughput),
//! where a limit settled (median and spread of a phase's second half), how long it took after a
//! step, and the verdict sentence.

use serde::{Deserialize, Serialize};

/// One closed-loop level of the knee's sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Level {
    pub concurrency: usize,
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// The knee: the smallest concurrency within 5% of the best throughput, and that best.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    pub concurrency: usize,
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// The most throughput any level reached: the server's capacity for this request.
    pub capacity_rps: f64,
}

/// A level reaching this share of the best throughput is past the knee.
pub const KNEE_SHARE: f64 = 0.95;

pub fn knee(levels: &[Level]) -> Option<Knee> {
    let best = levels.iter().map(|l| l.rps).fold(0.0f64, f64::max);
    if best <= 0.0 {
        return None;
    }
    let mut sorted: Vec<&Level> = levels.iter().collect();
    sorted.sort_by_key(|l| l.concurrency);
    let k = sorted.into_iter().find(|l| l.rps >= KNEE_SHARE * best)?;
    Some(Knee {
        concurrency: k.concurrency,
        rps: k.rps,
        p50_us: k.p50_us,
        p99_us: k.p99_us,
        capacity_rps: best,
    })
}

/// Whether a sweep over rising N can stop: neither of its last two levels gained 5% on the
/// best before them.
pub fn past_the_knee(levels: &[Level]) -> bool {
    let n = levels.len();
    if n < 3 {
        return false;
    }
    let before = levels[..n - 2].iter().map(|l| l.rps).fold(0.0f64, f64::max);
    before > 0.0 && levels[n - 2..].iter().all(|l| l.rps < 1.05 * before)
}

/// Where a limit sat: the median of its samples, half the range of their middle 80%, and its
/// drift (the slope of a least-squares line through them, per second).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Settled {
    pub median: f64,
    pub spread: f64,
    pub min: f64,
    pub max: f64,
    #[serde(default)]
    pub trend_per_s: f64,
    /// Seconds the samples span.
    #[serde(default)]
    pub span_s: f64,
}

impl Settled {
    /// Still moving: the drift over the span is at least 2, and a tenth of the median.
    pub fn drifting(&self) -> bool {
        (self.trend_per_s * self.span_s).abs() >= (0.1 * self.median).max(2.0)
    }
}

/// Nearest-rank quantile of sorted values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[super::controllers::nearest_rank(sorted.len(), q)]
}

/// The least-squares slope of `(x, y)` points (0 for fewer than two distinct x).
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx > 0.0 {
        sxy / sxx
    } else {
        0.0
    }
}

/// Where the limit samples `(t_s, limit)` sat.
pub fn settled(samples: &[(f64, f64)]) -> Option<Settled> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted: Vec<f64> = samples.iter().map(|s| s.1).collect();
    sorted.sort_by(f64::total_cmp);
    let first = samples.iter().map(|s| s.0).fold(f64::MAX, f64::min);
    let last = samples.iter().map(|s| s.0).fold(f64::MIN, f64::max);
    Some(Settled {
        median: quantile(&sorted, 0.5),
        spread: (quantile(&sorted, 0.9) - quantile(&sorted, 0.1)) / 2.0,
        min: sorted[0],
        max: sorted[sorted.len() - 1],
        trend_per_s: slope(samples),
        span_s: last - first,
    })
}

/// The band around a settled limit that counts as there: its spread, a quarter of it, or 2,
/// whichever is widest.
pub fn band(s: &Settled) -> f64 {
    s.spread.max(0.25 * s.median).max(2.0)
}

/// Seconds from `from_s` until the limit entered the band around `target` for good (within
/// the samples `(t_s, limit)` of `from_s..to_s`); `None` if it was still outside it in the
/// second half of that stretch, or still drifting there (it never settled).
pub fn settle_time(
    samples: &[(f64, f64)],
    from_s: f64,
    to_s: f64,
    target: &Settled,
) -> Option<f64> {
    if target.drifting() {
        return None;
    }
    let width = band(target);
    let inside = samples.iter().filter(|(t, _)| *t > from_s && *t <= to_s);
    let last_out = inside
        .filter(|(_, l)| (l - target.median).abs() > width)
        .map(|(t, _)| *t)
        .fold(None, |_, t| Some(t));
    match last_out {
        None => Some(0.0),
        Some(t) if t >= from_s + (to_s - from_s) / 2.0 => None,
        Some(t) => Some(t - from_s),
    }
}

/// How a controller did in one phase, beside the knee of that phase's request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseVerdict {
    pub from_s: f64,
    pub to_s: f64,
    pub path: String,
    pub knee: Option<Knee>,
    pub limit: Option<Settled>,
    /// Seconds from the phase's start to settling; `None`: it did not settle.
    pub settle_s: Option<f64>,
    /// Answered-2xx per second over the phase's second half.
    pub goodput_rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl PhaseVerdict {
    pub fn goodput_ratio(&self) -> Option<f64> {
        self.knee
            .filter(|k| k.rps > 0.0)
            .map(|k| self.goodput_rps / k.rps)
    }
    pub fn p99_ratio(&self) -> Option<f64> {
        self.knee
            .filter(|k| k.p99_us > 0.0 && self.p99_us > 0.0)
            .map(|k| self.p99_us / k.p99_us)
    }
}

/// The sentence for one controller's phase: where it settled against the knee, and what that
/// cost in p99 and goodput.
pub fn sentence(title: &str, p: &PhaseVerdict, shed_share: f64) -> String {
    let where_ = match (&p.limit, p.settle_s) {
        (Some(l), None) if l.drifting() => format!(
            "was still {} at the end ({:.0} to {:.0} in the last half, {:+.1} a second)",
            if l.trend_per_s > 0.0 {
                "rising"
            } else {
                "falling"
            },
            l.min,
            l.max,
            l.trend_per_s
        ),
        (Some(l), Some(_)) => format!("settled at {:.0} ± {:.0}", l.median, l.spread),
        (Some(l), None) => format!(
            "did not settle ({:.0} to {:.0} in the last half)",
            l.min, l.max
        ),
        (None, _) => "set no limit".to_string(),
    };
    let knee = match p.knee {
        Some(k) => format!("against a knee of {}", k.concurrency),
        None => "with no knee measured".to_string(),
    };
    let cost = match (p.p99_ratio(), p.goodput_ratio()) {
        (Some(r), Some(g)) => format!(": p99 {r:.1}x the knee's at {g:.2}x its goodput"),
        (None, Some(g)) => format!(": no answer in the last half, {g:.2}x the knee's goodput"),
        _ => String::new(),
    };
    format!(
        "{title} {where_} {knee}{cost}; {:.0}% shed.",
        shed_share * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(n: usize, rps: f64, p99: f64) -> Level {
        Level {
            concurrency: n,
            rps,
            p50_us: p99 / 2.0,
            p99_us: p99,
        }
    }

    #[test]
    fn the_knee_is_the_smallest_level_within_five_percent_of_the_best() {
        let pool8 = [
            level(4, 199.0, 21e3),
            level(1, 50.0, 20e3),
            level(8, 397.0, 22e3),
            level(6, 298.0, 21e3),
            level(12, 399.0, 31e3),
            level(16, 401.0, 41e3),
        ];
        let k = knee(&pool8).unwrap();
        assert_eq!(
            (k.concurrency, k.rps, k.p99_us, k.capacity_rps),
            (8, 397.0, 22e3, 401.0)
        );
        // 380 is 94.8% of 401: not yet.
        let near = [level(6, 380.0, 1.0), level(8, 401.0, 1.0)];
        assert_eq!(knee(&near).unwrap().concurrency, 8);
        assert_eq!(knee(&[level(1, 0.0, 0.0)]), None);
        assert_eq!(knee(&[]), None);
    }

    #[test]
    fn a_sweep_stops_when_two_levels_gain_nothing_on_the_best_before_them() {
        assert!(!past_the_knee(&[level(1, 50.0, 1.0), level(2, 100.0, 1.0)]));
        let flat = [
            level(1, 50.0, 1.0),
            level(2, 100.0, 1.0),
            level(4, 99.0, 1.0),
        ];
        assert!(!past_the_knee(&flat));
        let mut more = flat.to_vec();
        more.push(level(8, 100.0, 1.0));
        assert!(past_the_knee(&more));
    }

    #[test]
    fn settled_is_the_median_and_half_the_middle_eighty_percent() {
        // Ten samples a second apart, shuffled in value: no drift to speak of.
        let ten: Vec<(f64, f64)> = [3, 7, 1, 9, 5, 10, 2, 8, 4, 6]
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as f64, f64::from(v)))
            .collect();
        let s = settled(&ten).unwrap();
        // Nearest rank: p50 = 5th = 5, p90 = 9th = 9, p10 = 1st = 1.
        assert_eq!(
            (s.median, s.spread, s.min, s.max, s.span_s),
            (5.0, 4.0, 1.0, 10.0, 9.0)
        );
        assert!(!s.drifting(), "{s:?}");
        assert_eq!(settled(&[]), None);
    }

    #[test]
    fn a_limit_that_keeps_rising_is_drifting_not_settled() {
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]), 2.0);
        assert_eq!(slope(&[(1.0, 1.0)]), 0.0);
        // From 30 to 37 over 30 s (Windowed Gradient2's creep): +0.233 a second, 7 in all
        // against a median of 33.5: a tenth is 3.35, so it drifts.
        let creep: Vec<(f64, f64)> = (0..=30)
            .map(|i| (30.0 + i as f64, 30.0 + i as f64 * 7.0 / 30.0))
            .collect();
        let s = settled(&creep).unwrap();
        assert!(
            (s.trend_per_s - 7.0 / 30.0).abs() < 1e-9 && s.drifting(),
            "{s:?}"
        );
        assert_eq!(settle_time(&creep, 0.0, 60.0, &s), None);
        // Under 2 in all: steady.
        let flat: Vec<(f64, f64)> = (0..=30)
            .map(|i| (i as f64, 8.0 + i as f64 / 20.0))
            .collect();
        assert!(!settled(&flat).unwrap().drifting());
    }

    #[test]
    fn settling_is_the_last_time_outside_the_band_or_never() {
        let target = settled(&[(0.0, 40.0), (1.0, 40.0)]).unwrap();
        assert_eq!(band(&target), 10.0);
        // From 20 at t=0.5 rising to 40 by t=2; inside from 1.5 on (35 is within 10).
        let climb: Vec<(f64, f64)> = (1..=20)
            .map(|i| {
                let t = i as f64 * 0.5;
                (t, (20.0 + 10.0 * (t - 0.5)).min(40.0))
            })
            .collect();
        // Out at 0.5 (20) and 1.0 (25); 1.5 gives 30 = 40 - 10, inside.
        assert_eq!(settle_time(&climb, 0.0, 10.0, &target), Some(1.0));
        assert_eq!(settle_time(&climb, 2.0, 10.0, &target), Some(0.0));
        let late = [(1.0, 40.0), (6.0, 90.0), (7.0, 40.0)];
        assert_eq!(settle_time(&late, 0.0, 10.0, &target), None);
    }

    #[test]
    fn the_sentence_says_where_against_the_knee_and_at_what_cost() {
        let k = Knee {
            concurrency: 8,
            rps: 400.0,
            p50_us: 20e3,
            p99_us: 22e3,
            capacity_rps: 401.0,
        };
        let mut p = PhaseVerdict {
            from_s: 0.0,
            to_s: 10.0,
            path: "/".into(),
            knee: Some(k),
            limit: Some(Settled {
                median: 41.0,
                spread: 9.0,
                min: 30.0,
                max: 55.0,
                trend_per_s: 0.0,
                span_s: 5.0,
            }),
            settle_s: Some(2.0),
            goodput_rps: 392.0,
            p50_us: 50e3,
            p99_us: 68.2e3,
        };
        assert_eq!(
            sentence("Gradient2", &p, 0.331),
            "Gradient2 settled at 41 ± 9 against a knee of 8: p99 3.1x the knee's at 0.98x its \
             goodput; 33% shed."
        );
        p.settle_s = None;
        assert!(sentence("Vegas", &p, 0.0).starts_with("Vegas did not settle (30 to 55 in"));
        p.limit = p.limit.map(|l| Settled {
            trend_per_s: 5.0,
            ..l
        });
        assert!(sentence("Gradient2", &p, 0.0).starts_with(
            "Gradient2 was still rising at the end (30 to 55 in the last half, +5.0 a second) \
             against a knee of 8"
        ));
    }
}
