//! Statistics of a load run: latency histograms, counts by status and by failure, per-second
//! throughput, and one summary made from many threads. Each engine thread owns one
//! [`ThreadStats`] and touches nothing shared while it runs; the run merges them at the end
//! (HdrHistograms add exactly, counters sum), and nothing here grows with the number of
//! requests. Requests without an answer are [`Censored`], never left out, and [`lower_bounds`]
//! flags the figures they can reach. Below: the time series ([`series`]), per step of a plan
//! ([`steps`]) and per URL ([`urls`]); above, the engine records here and the outputs read.

pub mod series;
pub mod steps;
pub mod urls;

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::load::error::FailureKind;

/// The largest latency recorded exactly: one hour. Longer values saturate at it.
const MAX_LATENCY_US: u64 = 3_600_000_000;
/// [`LatencyHistogram::record_linear_fill`] records at most this many distinct values per call.
const MAX_FILL_RECORDS: u64 = 10_000;
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

/// Load threads busy at least this fraction of the time on the cores they could use are
/// saturated: their figures may describe the generator, not the server. Both `merge` (per
/// worker) and the sweep (per point) flag it with this bar.
pub const SATURATED_BUSY_FRACTION: f64 = 0.85;

/// A rate is held when requests went out at no less than this fraction of the target (the
/// run's in its report, each step's in a plan's table).
pub const RATE_HELD_FRACTION: f64 = 0.95;

/// A figure of a [`LatencySummary`]; [`LatencyKey::name`] is its JSON name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LatencyKey {
    Min,
    Mean,
    P50,
    P75,
    P90,
    P99,
    P999,
    P9999,
    Max,
}

impl LatencyKey {
    /// Every figure, in the order of the JSON.
    pub const ALL: [LatencyKey; 9] = [
        LatencyKey::Min,
        LatencyKey::Mean,
        LatencyKey::P50,
        LatencyKey::P75,
        LatencyKey::P90,
        LatencyKey::P99,
        LatencyKey::P999,
        LatencyKey::P9999,
        LatencyKey::Max,
    ];

    /// The name of the figure in the JSON ("p99").
    pub fn name(self) -> &'static str {
        match self {
            LatencyKey::Min => "min",
            LatencyKey::Mean => "mean",
            LatencyKey::P50 => "p50",
            LatencyKey::P75 => "p75",
            LatencyKey::P90 => "p90",
            LatencyKey::P99 => "p99",
            LatencyKey::P999 => "p999",
            LatencyKey::P9999 => "p9999",
            LatencyKey::Max => "max",
        }
    }

    /// The key named `name` in the JSON.
    pub fn from_name(name: &str) -> Option<LatencyKey> {
        LatencyKey::ALL.into_iter().find(|k| k.name() == name)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// Which latency figures are only lower bounds.
///
/// A request that was sent and never answered (still in flight when the run ended, or timed
/// out) has a latency of at least its age, so every figure that depends on it is a lower bound.
/// Serialized as the list of the affected keys ([`LatencyKey::name`]), for example
/// `["p99", "p999", "p9999", "max"]`; empty (and left out of the JSON) when every figure is exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LowerBounds(u16);

impl LowerBounds {
    /// Marks `key` as a lower bound.
    pub fn insert(&mut self, key: LatencyKey) {
        self.0 |= key.bit();
    }

    /// Unmarks `key`.
    pub fn remove(&mut self, key: LatencyKey) {
        self.0 &= !key.bit();
    }

    /// Whether the figure `key` is a lower bound.
    pub fn contains(&self, key: LatencyKey) -> bool {
        self.0 & key.bit() != 0
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The affected keys, in [`LatencyKey::ALL`] order.
    pub fn keys(&self) -> impl Iterator<Item = LatencyKey> + '_ {
        LatencyKey::ALL.into_iter().filter(|k| self.contains(*k))
    }
}

impl Serialize for LowerBounds {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.keys().map(LatencyKey::name))
    }
}

impl<'de> Deserialize<'de> for LowerBounds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let names = Vec::<String>::deserialize(deserializer)?;
        let mut bounds = LowerBounds::default();
        for name in &names {
            let Some(key) = LatencyKey::from_name(name) else {
                let known: Vec<&str> = LatencyKey::ALL.iter().map(|k| k.name()).collect();
                return Err(serde::de::Error::custom(format!(
                    "unknown latency key {name:?} in lower_bound (known: {})",
                    known.join(", ")
                )));
            };
            bounds.insert(key);
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

impl LatencySummary {
    /// The figure `key`, in microseconds.
    pub fn get(&self, key: LatencyKey) -> f64 {
        match key {
            LatencyKey::Min => self.min,
            LatencyKey::Mean => self.mean,
            LatencyKey::P50 => self.p50,
            LatencyKey::P75 => self.p75,
            LatencyKey::P90 => self.p90,
            LatencyKey::P99 => self.p99,
            LatencyKey::P999 => self.p999,
            LatencyKey::P9999 => self.p9999,
            LatencyKey::Max => self.max,
        }
    }

    /// The figure `key` as people read it, `>= ` before a lower bound.
    pub fn figure(&self, key: LatencyKey) -> String {
        crate::render::latency_figure(self.get(key), self.lower_bound.contains(key))
    }
}

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
    /// `https://` only: TLS handshake times (from the TCP connection to the handshake's end),
    /// one per connection opened; none before the first handshake.
    pub handshake: Option<LatencyHistogram>,
    /// Handshakes that resumed an earlier session.
    pub handshakes_resumed: u64,
    /// Complete responses.
    pub requests: u64,
    /// Requests written (or started to be written) to a connection.
    pub sent: u64,
    /// Requests still waiting for their response when the run ended: neither answered nor
    /// timed out (younger than the timeout).
    pub unanswered: u64,
    /// Rate mode: requests that were due but could not be sent by the end.
    pub unsent: u64,
    /// Requests answered in the drain after the end of the run: latency samples, not counted
    /// as responses of the run (its throughput ends with it).
    pub drained: u64,
    /// Requests whose latency is only bounded below (see the module header).
    pub censored: Vec<Censored>,
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
    /// The time series (and `--hlog`) only: hands this thread's intervals to the collector.
    pub intervals: Option<crate::load::stats::series::IntervalRecorder>,
    /// `--urls` only: the same counts per request line.
    pub urls: Option<crate::load::stats::urls::UrlRecorder>,
    /// A load plan's per-step counts (see [`crate::load::stats::steps`]); none without a plan.
    pub steps: Option<crate::load::stats::steps::StepRecorder>,
    /// `--engine uring`: how long received responses waited to be handled.
    pub hold: Hold,
    /// Closed loop: the connections' whole cycles and their seconds (see
    /// [`crate::load::engine::settle::CycleTotals`]).
    pub cycles: crate::load::engine::settle::CycleTotals,
    /// Every response read, counted or not (a settling run's first answers and the drain's
    /// included): what the server answered while the run lasted.
    pub responses_read: u64,
}

/// How long responses waited between reaching their socket and being handled (the io_uring
/// driver knows both; the epoll driver times a response when it reads it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Hold {
    /// Reads whose arrival was timestamped.
    pub count: u64,
    pub total: Duration,
    pub max: Duration,
}

impl Hold {
    pub fn record(&mut self, held: Duration) {
        self.count += 1;
        self.total += held;
        self.max = self.max.max(held);
    }

    pub fn merge(&mut self, other: &Hold) {
        self.count += other.count;
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    /// The mean wait in µs (0 with none).
    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total.as_secs_f64() * 1e6 / self.count as f64
        }
    }
}

impl ThreadStats {
    pub fn new(uncorrected: bool) -> ThreadStats {
        ThreadStats {
            latency: LatencyHistogram::new(),
            latency_uncorrected: uncorrected.then(LatencyHistogram::new),
            handshake: None,
            handshakes_resumed: 0,
            requests: 0,
            sent: 0,
            unanswered: 0,
            unsent: 0,
            drained: 0,
            censored: Vec::new(),
            status_counts: vec![0; STATUS_SLOTS],
            errors: ErrorCounts::default(),
            bytes_read: 0,
            bytes_written: 0,
            completed_per_second: Vec::with_capacity(64),
            cpu_s: 0.0,
            elapsed: Duration::ZERO,
            intervals: None,
            urls: None,
            steps: None,
            hold: Hold::default(),
            cycles: Default::default(),
            responses_read: 0,
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
        match (&mut self.handshake, &other.handshake) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => self.handshake = Some(theirs.clone()),
            _ => {}
        }
        self.handshakes_resumed += other.handshakes_resumed;
        self.cycles.merge(&other.cycles);
        self.responses_read += other.responses_read;
        self.hold.merge(&other.hold);
        self.requests += other.requests;
        self.sent += other.sent;
        self.unanswered += other.unanswered;
        self.unsent += other.unsent;
        self.drained += other.drained;
        self.censored.extend_from_slice(&other.censored);
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
        match (&mut self.urls, &other.urls) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => self.urls = Some(theirs.clone()),
            _ => {}
        }
        match (&mut self.steps, &other.steps) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, Some(theirs)) => self.steps = Some(theirs.clone()),
            _ => {}
        }
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
    fn holds_add_up_and_keep_their_longest() {
        let mut a = Hold::default();
        assert_eq!(a.mean_us(), 0.0);
        a.record(Duration::from_micros(100));
        a.record(Duration::from_micros(300));
        let mut b = Hold::default();
        b.record(Duration::from_micros(50));
        a.merge(&b);
        assert_eq!(a.count, 3);
        assert_eq!(a.max, Duration::from_micros(300));
        assert_eq!(a.mean_us(), 150.0);
    }

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
        b.insert(LatencyKey::P99);
        b.insert(LatencyKey::Max);
        assert!(
            b.contains(LatencyKey::P99)
                && b.contains(LatencyKey::Max)
                && !b.contains(LatencyKey::P50)
        );
        b.insert(LatencyKey::Mean);
        b.remove(LatencyKey::Mean);
        assert!(!b.contains(LatencyKey::Mean));
        let text = serde_json::to_string(&b).unwrap();
        assert_eq!(text, r#"["p99","max"]"#);
        assert_eq!(serde_json::from_str::<LowerBounds>(&text).unwrap(), b);
        assert!(serde_json::from_str::<LowerBounds>(r#"["p42"]"#).is_err());
    }

    /// 1000 answered requests of 1..=1000 µs.
    fn answered_1_to_1000() -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for us in 1..=1000 {
            h.record_us(us);
        }
        h
    }

    const SECOND: Duration = Duration::from_secs(1);

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
