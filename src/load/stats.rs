//! Statistics of a load run: latency histograms, counts by status and by failure, per-second
//! throughput, and how one summary is made from many threads.
//!
//! Each engine thread owns one [`ThreadStats`] and touches nothing shared while it runs; the
//! run merges them at the end (HdrHistograms add exactly, counters sum). Nothing here grows with
//! the number of requests: the histograms are fixed-size and `per_second` grows once a second.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::error::FailureKind;

/// The largest latency recorded exactly: one hour. Longer values saturate at it.
const MAX_LATENCY_US: u64 = 3_600_000_000;
/// Status codes are counted in an array indexed by code; anything above is protocol garbage.
const STATUS_SLOTS: usize = 1000;

/// Latencies in microseconds, 3 significant digits, from 1 µs to one hour.
#[derive(Debug, Clone)]
pub struct LatencyHistogram(Histogram<u64>);

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        LatencyHistogram(
            Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds"),
        )
    }

    /// Records one latency; sub-microsecond values count as 1 µs.
    #[inline]
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.0.saturating_record(us.clamp(1, MAX_LATENCY_US));
    }

    /// Records a value already in microseconds.
    pub fn record_us(&mut self, us: u64) {
        self.0.saturating_record(us.clamp(1, MAX_LATENCY_US));
    }

    /// Adds every sample of `other` (histograms with the same bounds add exactly).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.0
            .add(&other.0)
            .expect("histograms with equal bounds always add");
    }

    /// The underlying HdrHistogram (for serialization: [`super::hlog`]).
    pub fn as_hdr(&self) -> &Histogram<u64> {
        &self.0
    }

    /// Wraps a histogram read back from a report or log. One written by sweetspot has the same
    /// bounds and adds exactly; another is re-recorded into these bounds (within their
    /// precision). Values above one hour cannot be held: an error.
    pub fn from_hdr(other: &Histogram<u64>) -> Result<LatencyHistogram, String> {
        let mut h = LatencyHistogram::new();
        h.0.add(other)
            .map_err(|e| format!("histogram does not fit 1 us to 1 h: {e:?}"))?;
        Ok(h)
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The summary the report shows; all zeros when there are no samples.
    pub fn summary(&self) -> LatencySummary {
        let h = &self.0;
        if h.is_empty() {
            return LatencySummary::default();
        }
        let q = |quantile: f64| h.value_at_quantile(quantile) as f64;
        LatencySummary {
            count: h.len(),
            min: h.min() as f64,
            mean: h.mean(),
            stdev: h.stdev(),
            p50: q(0.50),
            p75: q(0.75),
            p90: q(0.90),
            p99: q(0.99),
            p999: q(0.999),
            p9999: q(0.9999),
            max: h.max() as f64,
            lower_bound: LowerBounds::default(),
        }
    }
}

/// The figures of a [`LatencySummary`], by the names its JSON uses.
pub const LATENCY_KEYS: [&str; 9] = [
    "min", "mean", "p50", "p75", "p90", "p99", "p999", "p9999", "max",
];

/// Which latency figures are only lower bounds.
///
/// A request that was sent and never answered (still in flight when the run ended, or timed
/// out) has a latency of at least its age, so every figure that depends on it is a lower bound.
/// Serialized as the list of the affected keys of [`LATENCY_KEYS`], for example
/// `["p99", "p999", "p9999", "max"]`; empty (and left out of the JSON) when every figure is exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LowerBounds(u16);

impl LowerBounds {
    fn bit(key: &str) -> Option<u16> {
        LATENCY_KEYS.iter().position(|k| *k == key).map(|i| 1 << i)
    }

    /// Marks `key` (one of [`LATENCY_KEYS`]) as a lower bound; unknown keys are ignored.
    pub fn insert(&mut self, key: &str) {
        if let Some(bit) = Self::bit(key) {
            self.0 |= bit;
        }
    }

    /// Whether the figure `key` is a lower bound.
    pub fn contains(&self, key: &str) -> bool {
        Self::bit(key).is_some_and(|bit| self.0 & bit != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The affected keys, in [`LATENCY_KEYS`] order.
    pub fn keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        LATENCY_KEYS.iter().copied().filter(|k| self.contains(k))
    }
}

impl Serialize for LowerBounds {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.keys())
    }
}

impl<'de> Deserialize<'de> for LowerBounds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        let mut bounds = LowerBounds::default();
        for name in &names {
            if Self::bit(name).is_none() {
                return Err(serde::de::Error::custom(format!(
                    "unknown latency key {name:?} in lower_bound (known: {})",
                    LATENCY_KEYS.join(", ")
                )));
            }
            bounds.insert(name);
        }
        Ok(bounds)
    }
}

/// Latency percentiles in microseconds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencySummary {
    /// Number of samples behind the figures (timeouts and errors are never samples).
    #[serde(default)]
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
    /// The figures above that are only lower bounds (see [`LowerBounds`]).
    #[serde(default, skip_serializing_if = "LowerBounds::is_empty")]
    pub lower_bound: LowerBounds,
}

/// Failed requests (and connection attempts) by kind.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    #[serde(default)]
    pub protocol: u64,
}

impl ErrorCounts {
    /// All failures of every kind.
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.protocol
    }

    /// Counts `n` failures of one kind.
    #[inline]
    pub fn add(&mut self, kind: FailureKind, n: u64) {
        let counter = match kind {
            FailureKind::Connect => &mut self.connect,
            FailureKind::Read => &mut self.read,
            FailureKind::Write => &mut self.write,
            FailureKind::Timeout => &mut self.timeout,
            FailureKind::Protocol => &mut self.protocol,
        };
        *counter += n;
    }

    pub fn merge(&mut self, other: &ErrorCounts) {
        self.connect += other.connect;
        self.read += other.read;
        self.write += other.write;
        self.timeout += other.timeout;
        self.protocol += other.protocol;
    }
}

/// Everything one engine thread measured.
#[derive(Debug, Clone)]
pub struct ThreadStats {
    /// Latency from the intended send time (equal to the actual one outside rate mode).
    pub latency: LatencyHistogram,
    /// Rate mode only: latency from the actual send time, the view that hides stalls.
    pub latency_uncorrected: Option<LatencyHistogram>,
    /// Complete responses.
    pub requests: u64,
    /// Requests written (or started to be written) to a connection.
    pub sent: u64,
    /// Requests still waiting for their response when the run ended: neither answered nor
    /// timed out (younger than the timeout).
    pub unanswered: u64,
    status_counts: Vec<u64>,
    pub errors: ErrorCounts,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Complete responses in each second of the run, by second index.
    pub completed_per_second: Vec<u64>,
    /// CPU time (user + system) the thread used.
    pub cpu_s: f64,
    /// When the thread's work ended, from the start of the run.
    pub elapsed: Duration,
    /// `--hlog` only: hands this thread's per-second latency histograms to the log writer.
    pub intervals: Option<super::hlog::IntervalRecorder>,
}

impl ThreadStats {
    pub fn new(uncorrected: bool) -> ThreadStats {
        ThreadStats {
            latency: LatencyHistogram::new(),
            latency_uncorrected: uncorrected.then(LatencyHistogram::new),
            requests: 0,
            sent: 0,
            unanswered: 0,
            status_counts: vec![0; STATUS_SLOTS],
            errors: ErrorCounts::default(),
            bytes_read: 0,
            bytes_written: 0,
            completed_per_second: Vec::with_capacity(64),
            cpu_s: 0.0,
            elapsed: Duration::ZERO,
            intervals: None,
        }
    }

    /// Counts one complete response that finished `since_start` into the run.
    #[inline]
    pub fn count_response(&mut self, status: u16, since_start: Duration) {
        self.requests += 1;
        if let Some(slot) = self.status_counts.get_mut(usize::from(status)) {
            *slot += 1;
        }
        let second = since_start.as_secs() as usize;
        if second >= self.completed_per_second.len() {
            self.completed_per_second.resize(second + 1, 0);
        }
        self.completed_per_second[second] += 1;
    }

    /// Status codes seen, as the report's `{"200": n}` map (echo replies have none).
    pub fn status_map(&self) -> BTreeMap<String, u64> {
        self.status_counts
            .iter()
            .enumerate()
            .filter(|(code, n)| *code != 0 && **n != 0)
            .map(|(code, n)| (code.to_string(), *n))
            .collect()
    }

    /// Adds another thread's measurements into this one.
    pub fn merge(&mut self, other: &ThreadStats) {
        self.latency.merge(&other.latency);
        match (&mut self.latency_uncorrected, &other.latency_uncorrected) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => self.latency_uncorrected = Some(theirs.clone()),
            _ => {}
        }
        self.requests += other.requests;
        self.sent += other.sent;
        self.unanswered += other.unanswered;
        for (mine, theirs) in self.status_counts.iter_mut().zip(&other.status_counts) {
            *mine += theirs;
        }
        self.errors.merge(&other.errors);
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        if other.completed_per_second.len() > self.completed_per_second.len() {
            self.completed_per_second
                .resize(other.completed_per_second.len(), 0);
        }
        for (mine, theirs) in self
            .completed_per_second
            .iter_mut()
            .zip(&other.completed_per_second)
        {
            *mine += theirs;
        }
        self.cpu_s += other.cpu_s;
        self.elapsed = self.elapsed.max(other.elapsed);
    }
}

/// Requests/s for each second of a run lasting `duration_s`: whole seconds as counted, and the
/// final partial second (if at least a tenth of one) scaled to a rate.
pub fn per_second_rates(completed_per_second: &[u64], duration_s: f64) -> Vec<f64> {
    let whole = duration_s.floor() as usize;
    let fraction = duration_s - duration_s.floor();
    let mut rates: Vec<f64> = (0..whole)
        .map(|i| completed_per_second.get(i).copied().unwrap_or(0) as f64)
        .collect();
    if fraction >= 0.1 || (whole == 0 && fraction > 0.0) {
        let tail: u64 = completed_per_second.iter().skip(whole).sum();
        rates.push(tail as f64 / fraction);
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_histograms_equal_one_histogram_of_all_samples() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        let mut all = LatencyHistogram::new();
        for us in 1..=10_000u64 {
            let h = if us % 3 == 0 { &mut a } else { &mut b };
            h.record_us(us * 7);
            all.record_us(us * 7);
        }
        a.merge(&b);
        assert_eq!(a.summary(), all.summary());
        let s = a.summary();
        assert_eq!(s.count, 10_000);
        assert_eq!(s.min, 7.0);
        // 3 significant digits: within 0.1%.
        assert!((s.p50 - 35_000.0).abs() / 35_000.0 < 0.001, "{}", s.p50);
        assert!((s.max - 70_000.0).abs() / 70_000.0 < 0.001, "{}", s.max);
        assert!((s.mean - 35_003.5).abs() / 35_003.5 < 0.001, "{}", s.mean);
    }

    #[test]
    fn lower_bounds_round_trip_as_key_names() {
        let mut b = LowerBounds::default();
        assert!(b.is_empty());
        b.insert("p99");
        b.insert("max");
        b.insert("nonsense");
        assert!(b.contains("p99") && b.contains("max") && !b.contains("p50"));
        let text = serde_json::to_string(&b).unwrap();
        assert_eq!(text, r#"["p99","max"]"#);
        assert_eq!(serde_json::from_str::<LowerBounds>(&text).unwrap(), b);
        assert!(serde_json::from_str::<LowerBounds>(r#"["p42"]"#).is_err());
    }

    #[test]
    fn empty_histogram_summarises_to_zero() {
        let h = LatencyHistogram::new();
        assert_eq!(h.summary(), LatencySummary::default());
    }

    #[test]
    fn durations_record_in_microseconds_and_saturate() {
        let mut h = LatencyHistogram::new();
        h.record(Duration::from_nanos(10));
        h.record(Duration::from_millis(50));
        h.record(Duration::from_secs(10 * 3600));
        let s = h.summary();
        assert_eq!(s.min, 1.0);
        assert!((s.p50 - 50_000.0).abs() < 50.0);
        assert!(s.max >= MAX_LATENCY_US as f64 * 0.999);
    }

    #[test]
    fn thread_stats_merge_sums_counts_and_seconds() {
        let mut a = ThreadStats::new(true);
        let mut b = ThreadStats::new(false);
        a.count_response(200, Duration::from_millis(100));
        a.count_response(404, Duration::from_millis(1500));
        b.count_response(200, Duration::from_millis(2500));
        b.errors.add(FailureKind::Timeout, 3);
        b.errors.add(FailureKind::Connect, 1);
        b.elapsed = Duration::from_secs(3);
        a.merge(&b);
        assert_eq!(a.requests, 3);
        assert_eq!(a.completed_per_second, vec![1, 1, 1]);
        assert_eq!(a.errors.total(), 4);
        assert_eq!(a.errors.timeout, 3);
        assert_eq!(a.elapsed, Duration::from_secs(3));
        let map = a.status_map();
        assert_eq!(map.get("200"), Some(&2));
        assert_eq!(map.get("404"), Some(&1));
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn per_second_rates_scale_the_partial_tail() {
        assert_eq!(per_second_rates(&[10, 20, 5], 2.5), vec![10.0, 20.0, 10.0]);
        assert_eq!(per_second_rates(&[10, 20], 2.0), vec![10.0, 20.0]);
        assert_eq!(per_second_rates(&[10, 20, 1], 2.05), vec![10.0, 20.0]);
        assert_eq!(per_second_rates(&[], 1.0), vec![0.0]);
        assert_eq!(per_second_rates(&[5], 0.05), vec![100.0]);
    }
}
