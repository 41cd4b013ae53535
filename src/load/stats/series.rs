//! The time series of a load run: per interval (1 s unless `--interval`), the responses, the
//! errors by kind and the latency percentiles, for `--json` (`series`), `--csv`, `--html` and the
//! interval log. Each load thread owns an [`IntervalRecorder`] and shares nothing while it runs;
//! the [`IntervalCollector`] in the thread that started the run adds their intervals into
//! [`SeriesPoint`]s. The files are written by `output::timeseries` and `output::hlog`.

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::load::error::FailureKind;
use crate::load::stats::{ErrorCounts, LatencyHistogram};

/// The interval of the series unless `--interval` says otherwise.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// `--interval` at least this long: each interval costs a histogram per thread.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// `--interval` at most this long.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);
/// A run may have at most this many intervals (one point each, about 130 bytes).
pub const MAX_INTERVALS: u64 = 1_000_000;

/// What one thread measured in one interval, or (added up) what every thread did.
#[derive(Debug, Clone, Default)]
pub struct IntervalData {
    /// Complete responses of the run that completed in the interval.
    pub responses: u64,
    /// Failures detected in the interval, by kind.
    pub errors: ErrorCounts,
    /// Latencies of the responses that completed in the interval (drain answers included),
    /// from the intended send time; None when there was none.
    pub latency: Option<LatencyHistogram>,
}

impl IntervalData {
    /// Adds another thread's data of the same interval.
    pub fn merge(&mut self, other: IntervalData) {
        self.responses += other.responses;
        self.errors.merge(&other.errors);
        match (&mut self.latency, other.latency) {
            (Some(mine), Some(theirs)) => mine.merge(&theirs),
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }

    fn is_empty(&self) -> bool {
        self.responses == 0 && self.errors.total() == 0 && self.latency.is_none()
    }
}

/// What a load thread hands over: its data of one interval, and how far it has got.
#[derive(Debug)]
pub struct IntervalSnapshot {
    thread: usize,
    index: u64,
    data: IntervalData,
    /// Every interval before this one is complete for this thread (u64::MAX: the thread ended).
    complete_before: u64,
}

/// What every engine thread needs to record its intervals: where to send them, how long they
/// are, and how long the run is (None: count mode).
#[derive(Debug, Clone)]
pub struct IntervalPlan {
    pub tx: Sender<IntervalSnapshot>,
    pub interval: Duration,
    pub run_length: Option<Duration>,
}

impl IntervalPlan {
    /// The recorder of thread `thread`.
    pub fn recorder(&self, thread: usize) -> IntervalRecorder {
        IntervalRecorder::new(thread, self.interval, self.run_length, self.tx.clone())
    }
}

/// One load thread's recorder of its intervals.
///
/// Which interval an event belongs to:
/// - a response counts in the interval in which it **completed** (was read), not the one in
///   which it was sent; so a server that stops answering for two seconds shows two intervals
///   with no response, and the requests it held show their long latency in the interval in
///   which they finally complete (in rate mode, from their intended send time, so a stall shows
///   as latency rising through it);
/// - an error counts in the interval in which it was detected (a timeout: when the request was
///   found older than `--timeout`);
/// - the answers of the drain after the deadline (latency samples, not responses of the run)
///   count in the run's last interval, so a run of `-d 3s` has exactly three intervals;
/// - the requests still unanswered at the end belong to no interval: they are one last point,
///   at the end of the run, with no length, whose `censored` is their number and whose
///   latencies are their ages (lower bounds), as in the report's `latency_us`.
///
/// The hot path is [`IntervalRecorder::record_response`]: a comparison with the end of the
/// current interval, a counter and a histogram record; no allocation (the interval's histogram
/// is made once per interval, by the first sample). When an interval is over the recorder sends
/// its [`IntervalData`] over a channel.
#[derive(Debug, Clone)]
pub struct IntervalRecorder {
    thread: usize,
    interval: Duration,
    /// The index of the last interval of the run (the one ending at the deadline), if known:
    /// anything later (the drain) counts in it.
    last: Option<u64>,
    index: u64,
    /// When the current interval ends, from the start of the run (Duration::MAX: never).
    ends_at: Duration,
    current: IntervalData,
    tx: Sender<IntervalSnapshot>,
}

impl IntervalRecorder {
    /// A recorder of `interval`-long intervals for thread `thread`, for a run that ends
    /// `run_length` after its start (None: count mode, it ends when the work is done).
    pub fn new(
        thread: usize,
        interval: Duration,
        run_length: Option<Duration>,
        tx: Sender<IntervalSnapshot>,
    ) -> IntervalRecorder {
        let interval = interval.max(Duration::from_millis(1));
        let last = run_length.map(|length| interval_count(length, interval).saturating_sub(1));
        let mut recorder = IntervalRecorder {
            thread,
            interval,
            last,
            index: 0,
            ends_at: Duration::ZERO,
            current: IntervalData::default(),
            tx,
        };
        recorder.ends_at = recorder.end_of(0);
        recorder
    }

    fn end_of(&self, index: u64) -> Duration {
        if self.last.is_some_and(|last| index >= last) {
            return Duration::MAX;
        }
        self.interval
            .checked_mul(u32::try_from(index + 1).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX)
    }

    /// Counts one response of the run that completed `since_start` into it, with its latency.
    #[inline]
    pub fn record_response(&mut self, latency: Duration, since_start: Duration) {
        self.roll(since_start);
        self.current.responses += 1;
        self.current
            .latency
            .get_or_insert_with(LatencyHistogram::new)
            .record(latency);
    }

    /// Records a latency sample that is not a response of the run (an answer of the drain).
    #[inline]
    pub fn record_latency(&mut self, latency: Duration, since_start: Duration) {
        self.roll(since_start);
        self.current
            .latency
            .get_or_insert_with(LatencyHistogram::new)
            .record(latency);
    }

    /// Counts `n` failures of one kind, detected `since_start` into the run.
    #[inline]
    pub fn count_errors(&mut self, kind: FailureKind, n: u64, since_start: Duration) {
        self.roll(since_start);
        self.current.errors.add(kind, n);
    }

    /// Hands over the finished interval, if `since_start` is past it. Also called from the
    /// engine's loop, which wakes at least every 50 ms, so an idle thread does not hold the
    /// series (and the log) back.
    #[inline]
    pub fn roll(&mut self, since_start: Duration) {
        if since_start >= self.ends_at {
            self.advance(since_start);
        }
    }

    #[cold]
    fn advance(&mut self, since_start: Duration) {
        let mut now = (since_start.as_nanos() / self.interval.as_nanos()) as u64;
        if let Some(last) = self.last {
            now = now.min(last);
        }
        if now > self.index {
            self.send(now);
            self.index = now;
        }
        self.ends_at = self.end_of(self.index);
    }

    /// Hands over the last interval: the thread is done.
    pub fn finish(mut self) {
        self.send(u64::MAX);
    }

    fn send(&mut self, complete_before: u64) {
        // The collector is gone only if the run is being torn down; nothing to report to then.
        let _ = self.tx.send(IntervalSnapshot {
            thread: self.thread,
            index: self.index,
            data: std::mem::take(&mut self.current),
            complete_before,
        });
    }
}

/// How many intervals of `interval` a run of `length` has (at least one).
pub fn interval_count(length: Duration, interval: Duration) -> u64 {
    let n = length.as_nanos().div_ceil(interval.as_nanos().max(1));
    u64::try_from(n).unwrap_or(u64::MAX).max(1)
}

/// One complete interval, as the collector hands it on (to the interval log).
pub struct CompleteInterval<'a> {
    pub start: Duration,
    pub length: Duration,
    pub data: &'a IntervalData,
}

/// Adds the threads' intervals up as they complete and keeps one [`SeriesPoint`] per interval.
///
/// It adds the threads' data of each interval and, once every thread has moved past an
/// interval, turns it into one [`SeriesPoint`] (and hands it to the interval log, if any) and
/// drops its histograms. Only intervals not yet complete are held as histograms, so memory does
/// not grow with the run beyond one small point per interval.
pub struct IntervalCollector {
    interval: Duration,
    /// The planned length of the run (None: count mode).
    run_length: Option<Duration>,
    rx: Receiver<IntervalSnapshot>,
    complete_before: Vec<u64>,
    pending: BTreeMap<u64, IntervalData>,
    /// Every latency sample of the intervals made so far, added up.
    recorded: LatencyHistogram,
    /// The next interval to make.
    next: u64,
    points: Vec<SeriesPoint>,
}

impl IntervalCollector {
    /// A collector of the `interval`-long intervals of `threads` threads, in a run planned to
    /// last `run_length` (None: count mode), and the plan the threads' recorders are made from.
    pub fn new(
        interval: Duration,
        threads: usize,
        run_length: Option<Duration>,
    ) -> (IntervalCollector, IntervalPlan) {
        let interval = interval.max(Duration::from_millis(1));
        let (tx, rx) = std::sync::mpsc::channel();
        (
            IntervalCollector {
                interval,
                run_length,
                rx,
                complete_before: vec![0; threads],
                pending: BTreeMap::new(),
                recorded: LatencyHistogram::new(),
                next: 0,
                points: Vec::new(),
            },
            IntervalPlan {
                tx,
                interval,
                run_length,
            },
        )
    }

    /// Takes what the threads handed over (waiting up to `wait` for the first of it), and
    /// makes every interval all threads are past; `done` sees each one.
    pub fn pump(
        &mut self,
        wait: Duration,
        done: &mut dyn FnMut(CompleteInterval) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        match self.rx.recv_timeout(wait) {
            Ok(snapshot) => self.take(snapshot),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return Ok(()),
        }
        while let Ok(snapshot) = self.rx.try_recv() {
            self.take(snapshot);
        }
        // Once every thread has ended, the last interval is `finish`'s to make (its length is
        // the run's end, which only `finish` knows).
        let complete = self.complete_before.iter().copied().min().unwrap_or(0);
        while self.next < complete && complete != u64::MAX {
            self.make(self.next, self.interval, done)?;
        }
        Ok(())
    }

    /// After every thread ended: makes what is left, the last interval ending at `elapsed`
    /// (the end of the run, which a run with a deadline notices a little after it: the
    /// intervals are still those of the planned length, the last one a hair longer), then the
    /// point of the requests unanswered at the end: the run's whole latency
    /// histogram `whole` (censored requests included) less every interval's samples.
    /// Returns the series and those censored samples (None when there are none).
    pub fn finish(
        mut self,
        elapsed: Duration,
        whole: Option<&LatencyHistogram>,
        done: &mut dyn FnMut(CompleteInterval) -> anyhow::Result<()>,
    ) -> anyhow::Result<(Vec<SeriesPoint>, Option<LatencyHistogram>)> {
        while let Ok(snapshot) = self.rx.try_recv() {
            self.take(snapshot);
        }
        let planned = self
            .run_length
            .map_or(elapsed, |length| length.min(elapsed));
        let count = interval_count(planned, self.interval);
        // Only a run stopped early and still answering after its end has data past it.
        let last_pending = self.pending.keys().next_back().copied();
        let end = last_pending.map_or(count, |p| count.max(p + 1));
        while self.next < end {
            let start = self.start_of(self.next);
            let rest = elapsed.saturating_sub(start);
            let length = if self.next + 1 == count {
                rest
            } else {
                self.interval.min(rest)
            };
            self.make(self.next, length, done)?;
        }
        let mut censored = None;
        if let Some(whole) = whole {
            let mut rest = whole.clone();
            if rest.subtract(&self.recorded).is_ok() && !rest.is_empty() {
                self.points.push(SeriesPoint::censored(elapsed, &rest));
                censored = Some(rest);
            }
        }
        Ok((self.points, censored))
    }

    fn start_of(&self, index: u64) -> Duration {
        self.interval
            .checked_mul(u32::try_from(index).unwrap_or(u32::MAX))
            .unwrap_or(Duration::MAX)
    }

    fn take(&mut self, snapshot: IntervalSnapshot) {
        if !snapshot.data.is_empty() {
            self.pending
                .entry(snapshot.index)
                .or_default()
                .merge(snapshot.data);
        }
        if let Some(c) = self.complete_before.get_mut(snapshot.thread) {
            *c = (*c).max(snapshot.complete_before);
        }
    }

    fn make(
        &mut self,
        index: u64,
        length: Duration,
        done: &mut dyn FnMut(CompleteInterval) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let data = self.pending.remove(&index).unwrap_or_default();
        let start = self.start_of(index);
        if let Some(h) = &data.latency {
            self.recorded.merge(h);
        }
        self.points.push(SeriesPoint::of(start, length, &data));
        self.next = index + 1;
        done(CompleteInterval {
            start,
            length,
            data: &data,
        })
    }
}

/// The latency of the samples of one interval, microseconds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntervalLatency {
    /// Samples behind the figures.
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl IntervalLatency {
    /// The figures of a histogram; None when it is empty.
    pub fn of(h: &LatencyHistogram) -> Option<IntervalLatency> {
        (!h.is_empty()).then(|| IntervalLatency {
            count: h.len(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            max: h.as_hdr().max(),
        })
    }
}

/// One interval of the series (an element of the report's `series`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SeriesPoint {
    /// When the interval began, seconds from the start of the run.
    pub start_s: f64,
    /// Its length in seconds: the interval, less for the last one; 0 for the point of the
    /// requests unanswered at the end.
    pub length_s: f64,
    /// Complete responses that completed in the interval.
    pub responses: u64,
    /// `responses / length_s` (0 when the length is 0).
    pub responses_per_s: f64,
    /// Failures detected in the interval, by kind.
    pub errors: ErrorCounts,
    /// Latency of the samples that completed in the interval; null when none did.
    pub latency_us: Option<IntervalLatency>,
    /// Samples that are only lower bounds: requests unanswered at the end, at their age (in a
    /// closed loop with the requests they held back, as in `latency_us` of the report). Only
    /// the last point, at the end of the run, has any.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub censored: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl SeriesPoint {
    fn of(start: Duration, length: Duration, data: &IntervalData) -> SeriesPoint {
        let length_s = length.as_secs_f64();
        SeriesPoint {
            start_s: start.as_secs_f64(),
            length_s,
            responses: data.responses,
            responses_per_s: rate(data.responses, length_s),
            errors: data.errors,
            latency_us: data.latency.as_ref().and_then(IntervalLatency::of),
            censored: 0,
        }
    }

    fn censored(at: Duration, h: &LatencyHistogram) -> SeriesPoint {
        SeriesPoint {
            start_s: at.as_secs_f64(),
            length_s: 0.0,
            responses: 0,
            responses_per_s: 0.0,
            errors: ErrorCounts::default(),
            latency_us: IntervalLatency::of(h),
            censored: h.len(),
        }
    }

    /// Failures of every kind per second (0 when the length is 0).
    pub fn errors_per_s(&self) -> f64 {
        rate(self.errors.total(), self.length_s)
    }
}

fn rate(count: u64, length_s: f64) -> f64 {
    if length_s > 0.0 {
        count as f64 / length_s
    } else {
        0.0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn two_threads_intervals_add_up_and_each_interval_is_made_once() {
        let (mut collector, plan) =
            IntervalCollector::new(Duration::from_secs(1), 2, Some(MS(3500)));
        let mut a = plan.recorder(0);
        let mut b = plan.recorder(1);
        drop(plan);
        let mut seen = Vec::new();
        let mut all = LatencyHistogram::new();
        for ms in 0..3500u64 {
            let at = MS(ms);
            let latency = Duration::from_micros(100 + ms);
            let r = if ms % 2 == 0 { &mut a } else { &mut b };
            r.record_response(latency, at);
            all.record(latency);
            if ms % 100 == 0 {
                r.count_errors(FailureKind::Timeout, 1, at);
            }
            collector
                .pump(Duration::ZERO, &mut |c| {
                    seen.push((c.start.as_millis(), c.length.as_millis(), c.data.responses));
                    Ok(())
                })
                .unwrap();
        }
        // Both threads are past 0, 1 and 2 s: those are made while the run goes on.
        assert_eq!(
            seen,
            vec![(0, 1000, 1000), (1000, 1000, 1000), (2000, 1000, 1000)]
        );
        // The drain: an answer at 3.7 s counts in the last interval (3..3.5 s), as a sample.
        a.record_latency(MS(5), MS(3700));
        all.record(MS(5));
        a.finish();
        b.finish();
        let mut whole = all.clone();
        whole.record_us(4_000_000); // a censored request, at its age
        let (points, censored) = collector
            .finish(MS(3500), Some(&whole), &mut |c| {
                seen.push((c.start.as_millis(), c.length.as_millis(), c.data.responses));
                Ok(())
            })
            .unwrap();
        assert_eq!(seen.last(), Some(&(3000, 500, 500)));
        assert_eq!(points.len(), 5);
        let starts: Vec<f64> = points.iter().map(|p| p.start_s).collect();
        assert_eq!(starts, vec![0.0, 1.0, 2.0, 3.0, 3.5]);
        let responses: Vec<u64> = points.iter().map(|p| p.responses).collect();
        assert_eq!(responses, vec![1000, 1000, 1000, 500, 0]);
        let timeouts: Vec<u64> = points.iter().map(|p| p.errors.timeout).collect();
        assert_eq!(timeouts, vec![10, 10, 10, 5, 0]);
        assert_eq!(points[3].length_s, 0.5);
        assert_eq!(points[3].responses_per_s, 1000.0);
        assert_eq!(points[3].latency_us.unwrap().count, 501);
        assert_eq!(points[4].censored, 1);
        assert_eq!(points[4].length_s, 0.0);
        assert_eq!(censored.unwrap().len(), 1);
        // Percentiles of each interval are those of its own samples: 1.0..2.0 s holds
        // latencies 1100..2099 µs.
        let l = points[1].latency_us.unwrap();
        assert_eq!(l.count, 1000);
        assert_eq!((l.p50, l.max), (1599, 2099));
        assert_eq!(l.p90, 1999);
        assert_eq!(l.p99, 2089);
        let total: u64 = points
            .iter()
            .filter_map(|p| p.latency_us)
            .map(|l| l.count)
            .sum();
        assert_eq!(total, whole.len());
    }

    #[test]
    fn a_stall_is_empty_intervals_then_the_held_latencies_where_they_complete() {
        // One thread, 1 response/ms for 1 s, nothing from 1.0 to 3.0 s (the stall), then the
        // 50 requests held since 1.0 s complete at 3.05 s with 2.05 s of latency.
        let (mut collector, plan) =
            IntervalCollector::new(Duration::from_secs(1), 1, Some(MS(4000)));
        let mut r = plan.recorder(0);
        let mut none = |_: CompleteInterval| Ok(());
        for ms in 0..1000 {
            r.record_response(Duration::from_micros(200), MS(ms));
        }
        for ms in (1000..3050).step_by(50) {
            r.roll(MS(ms)); // the engine's loop wakes, nothing completes
            collector.pump(Duration::ZERO, &mut none).unwrap();
        }
        for _ in 0..50 {
            r.record_response(MS(2050), MS(3050));
        }
        r.finish();
        // The loop noticed the deadline 300 µs late: still four intervals, the last a hair
        // longer.
        let (points, _) = collector
            .finish(Duration::from_micros(4_000_300), None, &mut none)
            .unwrap();
        assert_eq!(points.len(), 4);
        assert_eq!(points[3].length_s, 1.0003);
        let responses: Vec<u64> = points.iter().map(|p| p.responses).collect();
        assert_eq!(responses, vec![1000, 0, 0, 50]);
        assert_eq!(points[1].latency_us, None);
        assert_eq!(points[2].latency_us, None);
        let held = points[3].latency_us.unwrap();
        assert!((2_049_000..=2_051_000).contains(&held.p50), "{held:?}");
    }

    #[test]
    fn count_mode_has_no_last_interval_until_the_end() {
        // No run length: the recorder rolls wherever time goes; the collector ends at elapsed.
        let (collector, plan) = IntervalCollector::new(MS(500), 1, None);
        let mut r = plan.recorder(0);
        let mut none = |_: CompleteInterval| Ok(());
        r.record_response(MS(1), MS(100));
        r.record_response(MS(1), MS(1200));
        r.count_errors(FailureKind::Connect, 2, MS(1300));
        r.finish();
        let (points, censored) = collector.finish(MS(1300), None, &mut none).unwrap();
        assert!(censored.is_none());
        let rows: Vec<(f64, f64, u64, u64)> = points
            .iter()
            .map(|p| (p.start_s, p.length_s, p.responses, p.errors.connect))
            .collect();
        assert_eq!(
            rows,
            vec![(0.0, 0.5, 1, 0), (0.5, 0.5, 0, 0), (1.0, 0.3, 1, 2)]
        );
    }

    #[test]
    fn only_intervals_not_yet_complete_are_held_as_histograms() {
        // A long run in 100 ms intervals: two threads, one a little behind the other; the
        // collector never holds more than the intervals the slower thread has not finished.
        let (mut collector, plan) = IntervalCollector::new(MS(100), 2, None);
        let mut fast = plan.recorder(0);
        let mut slow = plan.recorder(1);
        drop(plan);
        let mut none = |_: CompleteInterval| Ok(());
        let mut most_held = 0;
        for ms in (0..100_000u64).step_by(10) {
            fast.record_response(MS(1), MS(ms));
            slow.record_response(MS(1), MS(ms.saturating_sub(250)));
            collector.pump(Duration::ZERO, &mut none).unwrap();
            most_held = most_held.max(collector.pending.len());
        }
        assert!(most_held <= 4, "{most_held}");
        fast.finish();
        slow.finish();
        let (points, _) = collector.finish(MS(100_000), None, &mut none).unwrap();
        assert_eq!(points.len(), 1000);
        assert_eq!(points.iter().map(|p| p.responses).sum::<u64>(), 20_000);
    }

    #[test]
    fn interval_counts_round_up() {
        assert_eq!(interval_count(MS(3000), MS(1000)), 3);
        assert_eq!(interval_count(MS(3001), MS(1000)), 4);
        assert_eq!(interval_count(MS(0), MS(1000)), 1);
        assert_eq!(interval_count(MS(250), MS(100)), 3);
    }

    /// A point of the series, for the tests here and of its outputs.
    pub(crate) fn point(
        start_s: f64,
        responses: u64,
        latency: Option<(u64, u64, u64, u64, u64)>,
    ) -> SeriesPoint {
        SeriesPoint {
            start_s,
            length_s: 1.0,
            responses,
            responses_per_s: responses as f64,
            errors: ErrorCounts::default(),
            latency_us: latency.map(|(count, p50, p90, p99, max)| IntervalLatency {
                count,
                p50,
                p90,
                p99,
                max,
            }),
            censored: 0,
        }
    }

    #[test]
    fn points_round_trip_through_json_and_leave_out_a_zero_censored() {
        let p = point(1.0, 5, Some((5, 10, 20, 30, 40)));
        let text = serde_json::to_string(&p).unwrap();
        assert!(!text.contains("censored"), "{text}");
        assert!(text.contains("\"start_s\":1.0"), "{text}");
        assert_eq!(serde_json::from_str::<SeriesPoint>(&text).unwrap(), p);
        let empty = point(2.0, 0, None);
        let text = serde_json::to_string(&empty).unwrap();
        assert!(text.contains("\"latency_us\":null"), "{text}");
    }
}
