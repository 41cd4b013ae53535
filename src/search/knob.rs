//! The search of one integer knob: a pool's size for the map, a server's workers or threads
//! for `tune`. Bracket the best on a doubling scale, narrow it by a golden-section search in
//! log2 space with noise gating (by a bisection below the knee where the curve is a plateau),
//! measure the best and the smallest close to it again, then take
//! the cheapest of those within [`WITHIN_BEST`] of the best. Written here, not taken from a
//! crate: the search over live servers is the product. Pure: every number comes from a
//! [`Curve`], so it is tested on synthetic curves.

use super::rank::{cheapest, Level, TIE_FRACTION};

/// A knob value within this fraction of the best value's throughput is as good (curves have
/// plateaus).
pub const WITHIN_BEST: f64 = 0.05;
/// Noise gating: two values closer than this many times their measured spread are measured
/// again rather than compared.
const GATE_SPREADS: f64 = 3.0;
/// At most this many repetitions of one value.
pub const MAX_REPS: u32 = 3;
/// A curve whose doublings past its knee are all within this many times [`WITHIN_BEST`] of the
/// best is a plateau (past the knee a pool's throughput declines gently here: 5% a doubling at
/// 256 connections with blocking waits); one falling 10% a doubling is a peak.
const FLAT: f64 = 1.5;
/// A value measured this close to the line it is placed against (a fraction of the line) is
/// measured once more first: one run's noise.
const NEAR_LINE: f64 = 0.02;

/// Where a knob's numbers come from.
pub trait Curve {
    /// The level at `w` over its first `reps` repetitions, measuring those missing (`None`:
    /// interrupted).
    fn level(&mut self, w: u32, reps: u32) -> Option<Level>;
    /// How many repetitions of `w` were measured.
    fn reps(&self, w: u32) -> u32;
    /// The values measured so far.
    fn measured(&self) -> Vec<u32>;
    /// What no more than `w` can pass, requests a second (infinite: not known).
    fn own_bound(&self, w: u32) -> f64;
}

/// The measured values, each with its throughput that counts.
fn measured(curve: &mut dyn Curve) -> Option<Vec<(u32, f64)>> {
    let mut out = Vec::new();
    for w in curve.measured() {
        let reps = curve.reps(w).max(1);
        out.push((w, curve.level(w, reps)?.rps.0));
    }
    Some(out)
}

fn best_of(values: &[(u32, f64)]) -> f64 {
    values.iter().map(|(_, l)| *l).fold(0.0, f64::max)
}

/// The knob's best value in `lo..=cap`: double from `lo` until two doublings bring no clear
/// gain, or one where the own bound stopped growing (from the largest doubling whose successor's
/// own bound can come within [`WITHIN_BEST`] of what was already reached, and without measuring
/// one whose own bound cannot); then a golden-section search in log2 space around the smallest
/// doubling within [`WITHIN_BEST`] of the best (from no lower than the smallest value whose own
/// bound can come that close, which ends the search where it measures that close), down to
/// adjacent values or values [`WITHIN_BEST`] apart, measuring close calls again unless both are
/// on the plateau (where the curve is flat past that doubling, a bisection below it instead);
/// the best and the smallest within twice [`WITHIN_BEST`] of it measured once more; of those
/// within [`WITHIN_BEST`] of the best, the cheapest ([`cheapest`]: p99, CPU per request,
/// memory), the smallest of those. `None`: interrupted.
pub fn search(curve: &mut dyn Curve, lo: u32, cap: u32) -> Option<u32> {
    let lo = lo.max(1).min(cap);
    let scale = Scale { lo, cap };
    let (floor, best_w, best) = double(curve, scale)?;
    // The knee: the smallest value of the doubling scale within WITHIN_BEST of the best (the
    // best itself may sit far out on a plateau). Golden section in log2 space around it.
    let knee = measured(curve)?
        .into_iter()
        .filter(|(w, l)| scale.on(*w) && *l >= best * (1.0 - WITHIN_BEST))
        .map(|(w, _)| w)
        .min()
        .unwrap_or(best_w);
    let (mut a, mut b) = (
        f64::from((knee / 2).max(floor)).log2(),
        f64::from((knee * 2).min(cap)).log2(),
    );
    // No value whose own bound is below WITHIN_BEST of the best can be as good: the section
    // starts at the smallest that can, where that is above the knee's half. That one is the
    // knee (nothing left to narrow) when it is the knee already or measures within WITHIN_BEST
    // of the best. (Own bounds not known, as for `tune`: nothing to start from.)
    let target = best * (1.0 - WITHIN_BEST);
    if best > 0.0 && curve.own_bound(lo).is_finite() {
        let can = f64::from(smallest_reaching(curve, lo, knee, target)).log2();
        if can >= f64::from(knee).log2()
            || (can > a && curve.level(scale.at(can), 1)?.rps.0 >= target)
        {
            (a, b) = (can, can);
        }
        a = a.max(can);
    }
    // A plateau (every doubling measured past the knee within FLAT times WITHIN_BEST of the
    // best): the smallest value as good as the best lies between the section's start and the
    // knee, and a bisection in log2 space finds it in about half the values a golden section
    // would measure (blocking pools at 256 connections here: 4 against 7 and their repeats). A
    // peak is left to the golden section, which looks past the knee for it.
    let flat = measured(curve)?
        .iter()
        .filter(|(w, _)| scale.on(*w) && *w > knee)
        .all(|(_, l)| *l >= best * (1.0 - FLAT * WITHIN_BEST));
    if flat && best > 0.0 && scale.at(a) < knee && a < b {
        let above = f64::from(bisect(curve, scale.at(a), knee, scale)?).log2();
        (a, b) = (above, above);
    }
    golden_section(curve, a, b, scale)?;
    cheapest_near_best(curve, best_w)
}

/// The values a search takes: `lo..=cap`, and the doubling scale from `lo`.
#[derive(Clone, Copy)]
struct Scale {
    lo: u32,
    cap: u32,
}

impl Scale {
    /// The value at `t` in log2 space.
    fn at(self, t: f64) -> u32 {
        (2f64.powf(t).round() as u32).clamp(self.lo, self.cap)
    }

    /// Whether `w` is on the doubling scale from `lo` (or is the cap).
    fn on(self, w: u32) -> bool {
        w == self.cap || (w / self.lo).is_power_of_two() && w.is_multiple_of(self.lo)
    }
}

/// Down to adjacent values, or values within WITHIN_BEST of each other: a value that much off
/// the best is within the best's spread (below the knee, throughput grows at most in
/// proportion to a pool).
fn resolved(lo: u32, hi: u32) -> bool {
    hi - lo <= 1 || f64::from(hi) <= f64::from(lo) * (1.0 + WITHIN_BEST)
}

/// The doubling from `lo`: the value it started at past those whose own bound cannot come
/// within WITHIN_BEST of what was reached (the floor), the best value and its throughput.
fn double(curve: &mut dyn Curve, scale: Scale) -> Option<(u32, u32, f64)> {
    let Scale { lo, cap } = scale;
    let reached = best_of(&measured(curve)?);
    let own = |curve: &dyn Curve, w: u32| curve.own_bound(w);
    let mut w = lo;
    while w < cap && own(curve, (w * 2).min(cap)) < reached * (1.0 - WITHIN_BEST) {
        w = (w * 2).min(cap);
    }
    let floor = w;
    if w < cap && own(curve, w) < reached * (1.0 - WITHIN_BEST) {
        w = (w * 2).min(cap);
    }
    let (mut best_w, mut best) = (w, curve.level(w, 1)?.rps.0);
    while w < cap {
        w = (w * 2).min(cap);
        let l = curve.level(w, 1)?.rps.0;
        if l > best * (1.0 + TIE_FRACTION) {
            (best_w, best) = (w, l);
        } else {
            best = best.max(l);
            // Two doublings without a clear gain: past the knee, on a plateau or falling; one,
            // where the best's own bound already was the doubled value's (more threads than
            // that add no cores, nor, with async waits, any waiting).
            // Nothing has met the bound yet: no plateau to stop on; double on to the cap.
            let stalled = own(curve, w).is_finite() && own(curve, w) <= own(curve, best_w);
            if best > 0.0 && (w >= best_w * 4 || stalled) {
                break;
            }
        }
    }
    Some((floor, best_w, best))
}

/// On a plateau: the smallest value in `below..=above` within WITHIN_BEST of the best, by
/// bisection in log2 space (a value within a run's noise of that line measured once more).
fn bisect(curve: &mut dyn Curve, below: u32, above: u32, scale: Scale) -> Option<u32> {
    let (mut below, mut above) = (below, above);
    while !resolved(below, above) {
        let mid = scale.at((f64::from(below).log2() + f64::from(above).log2()) / 2.0);
        if mid <= below || mid >= above {
            break;
        }
        let line = best_of(&measured(curve)?) * (1.0 - WITHIN_BEST);
        let mut l = curve.level(mid, 1)?.rps.0;
        if (l - line).abs() < NEAR_LINE * line {
            l = curve.level(mid, 2)?.rps.0;
        }
        if l >= line {
            above = mid;
        } else {
            below = mid;
        }
    }
    Some(above)
}

/// A golden-section search between `a` and `b` in log2 space, close calls measured again
/// unless both are on the plateau; ties go to the smaller value.
fn golden_section(curve: &mut dyn Curve, a: f64, b: f64, scale: Scale) -> Option<()> {
    const PHI: f64 = 0.618_033_988_749_895;
    let (mut a, mut b) = (a, b);
    let mut steps = 0;
    while !resolved(scale.at(a), scale.at(b)) && steps < 12 {
        steps += 1;
        let (x1, x2) = (b - PHI * (b - a), a + PHI * (b - a));
        let (p1, p2) = (scale.at(x1), scale.at(x2));
        if p1 == p2 {
            break;
        }
        let (mut l1, mut l2) = (curve.level(p1, 1)?.rps, curve.level(p2, 1)?.rps);
        // Both on the plateau (within WITHIN_BEST of the best so far, as good as it by the
        // final choice's own rule): the smaller goes on, whatever the noise between them says;
        // no need to measure them again.
        let top = best_of(&measured(curve)?);
        let plateau = l1.0.min(l2.0) >= top * (1.0 - WITHIN_BEST);
        // Noise gating: too close to call against their spread: measure both again.
        let mut rep = 1;
        while rep < MAX_REPS && !plateau && gated(l1, l2) {
            l1 = curve.level(p1, rep + 1)?.rps;
            l2 = curve.level(p2, rep + 1)?.rps;
            rep += 1;
        }
        if l1.0 >= l2.0 * (1.0 - WITHIN_BEST / 2.0) {
            b = x2;
        } else {
            a = x1;
        }
    }
    Some(())
}

/// The best value and the smallest within twice WITHIN_BEST of it measured once more (a
/// single run's noise is about WITHIN_BEST); of those within WITHIN_BEST of the best mean,
/// the cheapest (p99, then CPU per request, then memory), and the smallest of those.
fn cheapest_near_best(curve: &mut dyn Curve, best_w: u32) -> Option<u32> {
    let all = measured(curve)?;
    let top = best_of(&all);
    let close = all
        .iter()
        .filter(|(_, l)| *l > 0.0 && *l >= top * (1.0 - 2.0 * WITHIN_BEST));
    let smallest = close.clone().map(|(w, _)| *w).min();
    let best_value = close.max_by(|a, b| a.1.total_cmp(&b.1)).map(|(w, _)| *w);
    for w in [best_value, smallest].into_iter().flatten() {
        if curve.reps(w) < 2 {
            curve.level(w, 2)?;
        }
    }
    let all = measured(curve)?;
    let top = best_of(&all);
    let near: Vec<u32> = all
        .iter()
        .filter(|(_, l)| *l > 0.0 && *l >= top * (1.0 - WITHIN_BEST))
        .map(|(w, _)| *w)
        .collect();
    let mut levels = Vec::new();
    for &w in &near {
        levels.push(curve.level(w, curve.reps(w))?);
    }
    let (cheap, _) = cheapest(&levels, (0..near.len()).collect());
    cheap.into_iter().map(|i| near[i]).min().or(Some(best_w))
}

/// The smallest value in `lo..=hi` whose own bound reaches `target` (`hi` when none below it
/// does); own bounds grow with the value.
fn smallest_reaching(curve: &dyn Curve, lo: u32, hi: u32, target: f64) -> u32 {
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if curve.own_bound(mid) >= target {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    hi
}

/// Whether two values' difference is within [`GATE_SPREADS`] times their spread (with one
/// sample each, the spread is unknown and taken as 2% of the level).
pub fn gated(a: (f64, f64, f64), b: (f64, f64, f64)) -> bool {
    let spread = |l: (f64, f64, f64)| {
        if l.2 > l.1 {
            (l.2 - l.1) / 2.0
        } else {
            0.02 * l.0
        }
    };
    (a.0 - b.0).abs() < GATE_SPREADS * spread(a).max(spread(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A synthetic knob: throughput by value, deterministic noise by repetition.
    struct Synthetic<F: Fn(u32) -> f64> {
        f: F,
        bound: Option<f64>,
        reps: BTreeMap<u32, u32>,
        asked: Vec<(u32, u32)>,
    }

    impl<F: Fn(u32) -> f64> Curve for Synthetic<F> {
        fn level(&mut self, w: u32, reps: u32) -> Option<Level> {
            let have = self.reps.entry(w).or_insert(0);
            while *have < reps {
                self.asked.push((w, *have));
                *have += 1;
            }
            let rps: Vec<f64> = (0..reps.max(1))
                .map(|r| (self.f)(w) * (1.0 + 0.005 * f64::from(r % 3)))
                .collect();
            let mean = rps.iter().sum::<f64>() / rps.len() as f64;
            let (min, max) = (
                rps.iter().copied().fold(f64::INFINITY, f64::min),
                rps.iter().copied().fold(0.0, f64::max),
            );
            Some(Level {
                rps: (mean, min, max),
                p99_us: 10_000.0,
                p99_range: (0.0, 0.0),
                cpu_us: 100.0,
                rss_kb: 8000.0 + f64::from(w),
            })
        }
        fn reps(&self, w: u32) -> u32 {
            self.reps.get(&w).copied().unwrap_or(0)
        }
        fn measured(&self) -> Vec<u32> {
            self.reps.keys().copied().collect()
        }
        fn own_bound(&self, w: u32) -> f64 {
            self.bound.map_or(f64::INFINITY, |per| per * f64::from(w))
        }
    }

    fn synthetic<F: Fn(u32) -> f64>(f: F) -> Synthetic<F> {
        Synthetic {
            f,
            bound: None,
            reps: BTreeMap::new(),
            asked: Vec::new(),
        }
    }

    #[test]
    fn a_plateau_gives_its_start_and_a_peak_its_top() {
        // Rising to 40 workers, flat after: the smallest within 5% of the top (38 or so).
        let mut c = synthetic(|w| 1000.0 * f64::from(w.min(40)) / 40.0);
        let w = search(&mut c, 1, 256).unwrap();
        assert!((38..=40).contains(&w), "{w} {:?}", c.asked);
        assert!(c.asked.len() < 30, "{:?}", c.asked);
        // Peaked at 12, falling either side by 10% a doubling: the smallest within 5% of the
        // peak is 9 (0.9 ^ log2(12 / 9) = 96%).
        let mut c = synthetic(|w| 1000.0 * 0.9f64.powf((f64::from(w) / 12.0).log2().abs()));
        let w = search(&mut c, 1, 64).unwrap();
        assert!((9..=10).contains(&w), "{w} {:?}", c.asked);
    }

    #[test]
    fn a_plateau_is_bisected_below_its_knee() {
        // Rising to 40 workers, flat after: past the knee (64) every doubling is flat, so the
        // smallest value within 5% of the top is found between 32 and 64 by bisection: at
        // most five values off the doubling scale (the golden section, from 32 to 128, asks
        // eight: 36 to 75).
        let mut c = synthetic(|w| 1000.0 * f64::from(w.min(40)) / 40.0);
        let w = search(&mut c, 1, 256).unwrap();
        assert!((38..=40).contains(&w), "{w} {:?}", c.asked);
        let off_scale: std::collections::BTreeSet<u32> = c
            .asked
            .iter()
            .map(|(w, _)| *w)
            .filter(|w| !w.is_power_of_two())
            .collect();
        assert!(off_scale.len() <= 5, "{off_scale:?} {:?}", c.asked);
        assert!(
            off_scale.iter().all(|w| (32..64).contains(w)),
            "{off_scale:?}"
        );
        // A peak is not a plateau: falling 10% a doubling past 12, the golden section looks
        // past the knee for it (and finds 9, within 5% of the peak's 1,000).
        let mut c = synthetic(|w| 1000.0 * 0.9f64.powf((f64::from(w) / 12.0).log2().abs()));
        assert!((9..=10).contains(&search(&mut c, 1, 64).unwrap()));
        assert!(c
            .asked
            .iter()
            .any(|(w, _)| (9..16).contains(w) && *w > 8 && !w.is_power_of_two()));
    }

    #[test]
    fn values_that_all_miss_the_bound_do_not_stop_the_doubling() {
        // Below 24 workers every run misses the p99 bound (it counts 0); from 24 on, 1,000/s.
        let mut c = synthetic(|w| if w >= 24 { 1000.0 } else { 0.0 });
        let w = search(&mut c, 1, 64).unwrap();
        assert!((24..=26).contains(&w), "{w} {:?}", c.asked);
    }

    #[test]
    fn the_range_is_kept_and_no_value_is_asked_twice() {
        let mut c = synthetic(|w| f64::from(w.min(6)));
        let w = search(&mut c, 3, 24).unwrap();
        assert!((5..=6).contains(&w), "{w}");
        assert!(c.asked.iter().all(|(w, _)| (3..=24).contains(w)));
        let mut seen = std::collections::BTreeSet::new();
        assert!(c.asked.iter().all(|a| seen.insert(*a)), "{:?}", c.asked);
        // A one-value range.
        let mut c = synthetic(f64::from);
        assert_eq!(search(&mut c, 4, 4), Some(4));
    }

    #[test]
    fn where_the_own_bound_says_where_the_plateau_starts_nothing_is_narrowed() {
        // Each worker adds 100/s up to 20, and 2,000/s after: 19 is the smallest whose own
        // bound comes within 5% of the best, and it measures within: no golden section.
        let mut c = synthetic(|w| 100.0 * f64::from(w.min(20)));
        c.bound = Some(100.0);
        let w = search(&mut c, 1, 256).unwrap();
        assert_eq!(w, 19, "{:?}", c.asked);
        let values: std::collections::BTreeSet<u32> = c.asked.iter().map(|(w, _)| *w).collect();
        assert_eq!(
            values.into_iter().collect::<Vec<_>>(),
            [1, 2, 4, 8, 16, 19, 32, 64, 128],
            "{:?}",
            c.asked
        );
        // A plateau the own bound cannot place (it starts at twice what the bound allows):
        // the section runs from the knee's half as before, and the value the bound allows,
        // below it, is not measured.
        let mut c = synthetic(|w| 100.0 * f64::from(w.min(40)) / 2.0);
        c.bound = Some(100.0);
        let w = search(&mut c, 1, 256).unwrap();
        assert!((38..=40).contains(&w), "{w} {:?}", c.asked);
        assert!(
            c.asked.iter().all(|(w, _)| w.is_power_of_two() || *w > 32),
            "{:?}",
            c.asked
        );
    }

    #[test]
    fn a_known_own_bound_skips_what_cannot_reach_and_stops_the_doubling() {
        // Each worker adds 100/s up to 20 (a pool waiting on blocking waits): with 1,900
        // reached already at 19 (as the halving measured), values whose own bound cannot come
        // within 5% of it are not measured.
        let mut c = synthetic(|w| 100.0 * f64::from(w.min(20)));
        c.bound = Some(100.0);
        c.level(19, 1);
        c.asked.clear();
        let w = search(&mut c, 1, 256).unwrap();
        assert!((19..=20).contains(&w), "{w}");
        assert!(c.asked.iter().all(|(w, _)| *w >= 16), "{:?}", c.asked);
    }
}
