//! The latency histogram: microseconds to three significant digits from 1 µs to an hour
//! (HdrHistogram), exact to add, with the linear fill that censoring records.

use super::*;

/// The largest latency recorded exactly: one hour. Longer values saturate at it.
pub(super) const MAX_LATENCY_US: u64 = 3_600_000_000;
/// [`LatencyHistogram::record_linear_fill`] records at most this many distinct values per call.
pub(super) const MAX_FILL_RECORDS: u64 = 10_000;
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

    /// Latencies at 2 significant digits (1%), from 1 µs to one hour: 26 KB instead of 190,
    /// for the per-URL histograms of `--urls` ([`crate::load::stats::urls`]).
    pub fn coarse() -> LatencyHistogram {
        LatencyHistogram(
            Histogram::new_with_bounds(1, MAX_LATENCY_US, 2).expect("valid histogram bounds"),
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

    /// The smallest value the histogram treats as equal to `us` (3 significant digits).
    pub fn lowest_equivalent(&self, us: u64) -> u64 {
        self.0.lowest_equivalent(us.clamp(1, MAX_LATENCY_US))
    }

    /// Mean of the samples in microseconds (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.0.is_empty() {
            0.0
        } else {
            self.0.mean()
        }
    }

    /// The value at quantile `q` in microseconds (0 when empty).
    pub fn value_at_quantile(&self, q: f64) -> u64 {
        if self.0.is_empty() {
            0
        } else {
            self.0.value_at_quantile(q)
        }
    }

    /// Records `count` values `top, top - step, top - 2 step, ...` (never below 1 µs) and returns
    /// the smallest. The work is bounded: past `MAX_FILL_RECORDS` distinct values, consecutive
    /// values are grouped and each group is recorded as copies of its smallest value, so every
    /// value recorded is still at most the one it stands for and the count is exact.
    pub fn record_linear_fill(&mut self, top_us: f64, step_us: f64, count: u64) -> Option<u64> {
        self.record_linear_fill_times(top_us, step_us, count, 1)
    }

    /// [`Self::record_linear_fill`] `times` over (the same values, each with `times` copies).
    pub fn record_linear_fill_times(
        &mut self,
        top_us: f64,
        step_us: f64,
        count: u64,
        times: u64,
    ) -> Option<u64> {
        if count == 0 || times == 0 {
            return None;
        }
        let group = count.div_ceil(MAX_FILL_RECORDS);
        let mut smallest = u64::MAX;
        let mut done = 0;
        while done < count {
            let n = group.min(count - done);
            let lowest = top_us - (done + n - 1) as f64 * step_us;
            let us = (lowest.max(1.0) as u64).clamp(1, MAX_LATENCY_US);
            self.0.saturating_record_n(us, n.saturating_mul(times));
            smallest = smallest.min(us);
            done += n;
        }
        Some(smallest)
    }

    /// The underlying HdrHistogram (for the interval log of `--hlog`).
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

    /// The histogram as base64 of its compressed V2 encoding (hdrhistogram's
    /// `V2DeflateSerializer`, the form of an interval-log line, which every HdrHistogram
    /// implementation reads): how a JSON report carries it so that `merge` adds it exactly.
    pub fn encode(&self) -> String {
        use base64::Engine;
        use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.0, &mut bytes)
            .expect("serializing a histogram into memory cannot fail");
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// Reads back what [`LatencyHistogram::encode`] (or any HdrHistogram V2 writer) produced.
    pub fn decode(text: &str) -> Result<LatencyHistogram, String> {
        use base64::Engine;
        use hdrhistogram::serialization::Deserializer;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| format!("histogram is not base64: {e}"))?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("histogram does not decode: {e:?}"))?;
        LatencyHistogram::from_hdr(&h)
    }

    /// Removes every sample of `other` (which must all be in `self`).
    pub fn subtract(&mut self, other: &LatencyHistogram) -> Result<(), String> {
        self.0
            .subtract(&other.0)
            .map_err(|e| format!("cannot subtract histograms: {e:?}"))
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
    fn linear_fill_is_bounded_exact_in_count_and_never_above_its_values() {
        let mut h = LatencyHistogram::new();
        assert_eq!(h.record_linear_fill(100.0, 10.0, 0), None);
        assert_eq!(h.record_linear_fill(100.0, 10.0, 5), Some(60));
        assert_eq!(h.len(), 5);
        assert_eq!(h.summary().max, 100.0);
        // A million values, grouped: count exact, the largest recorded at most the largest.
        let mut big = LatencyHistogram::new();
        let smallest = big.record_linear_fill(1_000_000.0, 1.0, 1_000_000);
        assert_eq!(big.len(), 1_000_000);
        assert_eq!(smallest, Some(1));
        assert!(big.summary().max <= 1_000_000.0 * 1.001);
        assert!((big.summary().p50 - 500_000.0).abs() / 5e5 < 0.001);
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
}
