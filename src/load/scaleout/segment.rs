//! One `sweetspot load` as worker I of N of a distributed run (`--segment I/N`), and a start
//! time all workers share (`--start-at`, `--start-in`). As k6's execution segments, in whole
//! units: connections (and `-n`) are dealt out as evenly as possible, the first `C mod N`
//! workers getting one more, and the rate follows the connections (worker I sends `R * c_I / C`),
//! so the shares add up exactly. Each worker keeps the global numbering of its connections, so
//! their send phases are those one process driving all `C` would use. The split is a pure
//! function of (I, N): any scheduler (Slurm, a Kubernetes Indexed Job, ssh) can start them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Worker `index` of `count` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub index: u64,
    pub count: u64,
}

impl Segment {
    /// Parses `I/N` with 0 <= I < N.
    pub fn parse(text: &str) -> Result<Segment, String> {
        let bad = || format!("--segment: expected I/N with 0 <= I < N (e.g. 0/4), not {text:?}");
        let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
        let index: u64 = i.trim().parse().map_err(|_| bad())?;
        let count: u64 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Segment { index, count })
    }

    /// This worker's part of `total` units: `total / N`, plus one for the first `total mod N`.
    pub fn share(&self, total: u64) -> u64 {
        total / self.count + u64::from(self.index < total % self.count)
    }

    /// The global number of this worker's first unit (the sum of the shares before it).
    pub fn first(&self, total: u64) -> u64 {
        self.index * (total / self.count) + self.index.min(total % self.count)
    }
}

/// What a segment's JSON report says about the distributed run it belongs to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SegmentInfo {
    pub index: u64,
    pub count: u64,
    /// This worker's share of the connections, and the run's total (`-c`).
    pub connections: u64,
    pub total_connections: u64,
    /// Rate mode: the run's total rate (`-R`); this worker's is `target_rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_rate: Option<f64>,
    /// Count mode: the run's total request count (`-n`) and this worker's share of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Where the worker ran and how many CPUs it had, to judge its own CPU use.
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub cores: usize,
    /// Rate mode with a load plan: the whole run's plan as `-R` takes it (each worker runs its
    /// share of every step; `sweetspot merge` checks the workers ran the same plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

/// The host name, for reports (empty if unknown).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Parses `--start-at`: Unix seconds, fractions allowed.
pub fn parse_start_at(text: &str) -> Result<SystemTime, String> {
    let seconds: f64 = text.trim().parse().map_err(|_| {
        format!("--start-at: expected Unix seconds (e.g. 1767225600), not {text:?}")
    })?;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("--start-at: expected Unix seconds, not {text:?}"));
    }
    Duration::try_from_secs_f64(seconds)
        .ok()
        .and_then(|d| UNIX_EPOCH.checked_add(d))
        .ok_or_else(|| format!("--start-at: {text:?} is out of range"))
}

/// Seconds since the epoch of a wall-clock time.
pub fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Sleeps until `at` (wall clock) and returns how late the caller is after it: zero, or a
/// little for the sleep's overshoot, when it arrived early; the whole delay when it arrived
/// after `at` (then `arrived_late` is true).
pub fn wait_until(at: SystemTime) -> (Duration, bool) {
    let arrived_late = SystemTime::now() > at;
    while let Ok(left) = at.duration_since(SystemTime::now()) {
        if left.is_zero() {
            break;
        }
        // Short naps near the end, so a wall-clock step is noticed.
        std::thread::sleep(left.min(Duration::from_millis(200)));
    }
    let late = SystemTime::now().duration_since(at).unwrap_or_default();
    (late, arrived_late)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_parse_and_refuse_nonsense() {
        assert_eq!(Segment::parse("0/4"), Ok(Segment { index: 0, count: 4 }));
        assert_eq!(Segment::parse("3/4"), Ok(Segment { index: 3, count: 4 }));
        for bad in [
            "4/4", "5/4", "0/0", "1", "a/b", "-1/4", "1/-4", "", "1/2/3", "1.5/4",
        ] {
            assert!(Segment::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn shares_add_up_to_the_total_and_tile_it() {
        for total in [
            0u64,
            1,
            2,
            3,
            7,
            10,
            99,
            100,
            101,
            1000,
            1_000_003,
            u32::MAX as u64,
        ] {
            for count in [1u64, 2, 3, 4, 5, 7, 16, 64, 1000] {
                let mut sum = 0;
                for index in 0..count {
                    let s = Segment { index, count };
                    assert_eq!(
                        s.first(total),
                        sum,
                        "total {total} count {count} index {index}"
                    );
                    let share = s.share(total);
                    assert!(share == total / count || share == total / count + 1);
                    sum += share;
                }
                assert_eq!(sum, total, "total {total} count {count}");
            }
        }
    }

    #[test]
    fn rates_follow_connections_and_add_up() {
        for (connections, count, rate) in [(10u64, 4u64, 1000.0f64), (7, 3, 333.3), (64, 64, 1.0)] {
            let total: f64 = (0..count)
                .map(|index| {
                    rate * Segment { index, count }.share(connections) as f64 / connections as f64
                })
                .sum();
            assert!((total - rate).abs() <= rate * 1e-12, "{total} vs {rate}");
        }
    }

    #[test]
    fn start_at_parses_unix_seconds() {
        let t = parse_start_at("1767225600.5").unwrap();
        assert_eq!(unix_seconds(t), 1_767_225_600.5);
        for bad in ["soon", "-5", "0", "inf", "1e300"] {
            assert!(parse_start_at(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn waiting_for_a_past_time_reports_lateness() {
        let past = SystemTime::now() - Duration::from_secs(3);
        let (late, arrived_late) = wait_until(past);
        assert!(arrived_late);
        assert!(late >= Duration::from_secs(3), "{late:?}");
        let soon = SystemTime::now() + Duration::from_millis(30);
        let (late, arrived_late) = wait_until(soon);
        assert!(!arrived_late);
        assert!(SystemTime::now() >= soon);
        assert!(late < Duration::from_secs(1), "{late:?}");
    }
}
