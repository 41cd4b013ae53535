//! What a worker measured: the [`Recorder`] owns the thread's [`ThreadStats`] and is the one
//! place a response, a failure, a sent request or a censored request is counted.
//!
//! The rules live here: a response is a latency sample from its start (its intended send time
//! moved by the generator's own lateness, [`InFlight`]; the actual send time outside rate
//! mode) unless it came back after the timeout, when it is a timeout
//! and never a sample; rate mode keeps the uncorrected view (from the actual send time) beside
//! it; an answer in the drain after the deadline is a sample but not a response of the run.
//! Per-interval views (`--hlog`, a time series) are recorder concerns: they see every sample
//! here and roll over with [`Recorder::tick`]. A load plan's per-step counts
//! ([`StepRecorder`], by the step of each request's intended send time) are one too.

use std::time::{Duration, Instant};

use std::collections::VecDeque;

use crate::load::engine::policy::Unsent;
use crate::load::error::FailureKind;
use crate::load::stats::series::IntervalRecorder;
use crate::load::stats::steps::StepRecorder;
use crate::load::stats::urls::UrlRecorder;
use crate::load::stats::{Censored, LatencyHistogram, ThreadStats};

/// A request on the wire: when it should have been sent, when its latency starts, when it was
/// sent, and which line of the request source it is (always 0 without `--urls`), for the
/// per-URL statistics.
///
/// `start` is the intended time moved later by the generator's own lateness: the time from
/// when the request could go (its intended time, or later when its connection was still busy
/// with an earlier one) to when it went. A wait for a busy connection is the server's and stays
/// in the latency (coordinated omission stays corrected); a delay the generator chose (rate
/// mode's slack, a nap, a late timer) is not the server's and does not inflate it. Outside
/// rate mode all three are the same moment.
#[derive(Debug, Clone, Copy)]
pub struct InFlight {
    pub intended: Instant,
    pub start: Instant,
    pub sent: Instant,
    pub line: u32,
}

impl InFlight {
    /// A request intended at `intended`, whose connection had room from `room_since`, sent
    /// at `sent`.
    pub fn new(intended: Instant, room_since: Instant, sent: Instant, line: u32) -> InFlight {
        let ready = intended.max(room_since).min(sent);
        InFlight {
            intended,
            start: intended + (sent - ready),
            sent,
            line,
        }
    }

    /// The generator's own lateness: from when the request could go to when it went.
    pub fn own_lateness(&self) -> Duration {
        self.start.saturating_duration_since(self.intended)
    }

    /// How long it waited for its connection (the server's time): from its intended time to
    /// when the connection had room.
    pub fn held(&self) -> Duration {
        self.sent
            .saturating_duration_since(self.intended)
            .saturating_sub(self.own_lateness())
    }
}

/// One worker's measurements.
pub struct Recorder {
    stats: ThreadStats,
    start: Instant,
    timeout: Duration,
    /// Rate mode: also record latency from the actual send time.
    uncorrected: bool,
    /// Past the deadline: answers are samples, not responses of the run.
    draining: bool,
    /// A settling run before its window opened: nothing is a response or a sample.
    settling: bool,
    /// Requests sent before this are not of the measured window (the run's start, or when a
    /// settled window opened).
    window_start: Instant,
    /// Requests sent from this on are not of it either (a settled window closed).
    window_end: Option<Instant>,
    /// Requests sent and neither answered nor dropped with their connection.
    outstanding: u64,
}

/// What a response was to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A response of the measured window (a sample, counted).
    Counted,
    /// Answered in the drain after the deadline: a sample, not counted.
    Drained,
    /// Not of the window (sent before it opened or after it closed), or a timeout.
    Outside,
}

impl Answer {
    /// A request of the window answered (counted or in the drain): a whole cycle.
    pub fn of_window(self) -> bool {
        self != Answer::Outside
    }
}

impl Recorder {
    /// A recorder for a run that started at `start`; `uncorrected` (rate mode) keeps the
    /// latency from actual send times as well.
    pub fn new(start: Instant, timeout: Duration, uncorrected: bool) -> Recorder {
        Recorder {
            stats: ThreadStats::new(uncorrected),
            start,
            timeout,
            uncorrected,
            draining: false,
            settling: false,
            window_start: start,
            window_end: None,
            outstanding: 0,
        }
    }

    /// A run whose window opens once it settled: count nothing until [`Self::open_window`].
    pub fn settle_first(&mut self) {
        self.settling = true;
    }

    /// The settled window opened at `start`: answers to requests sent from then on count.
    pub fn open_window(&mut self, start: Instant) {
        self.settling = false;
        self.window_start = start;
    }

    /// The settled window closed at `end`: requests sent from then on are not of it.
    pub fn close_window(&mut self, end: Instant) {
        self.window_end = Some(end);
    }

    /// The whole cycles of the worker's connections (see
    /// [`crate::load::engine::settle::CycleTotals`]), every response they read, and those
    /// responses' bytes.
    pub fn set_cycles(
        &mut self,
        cycles: crate::load::engine::settle::CycleTotals,
        responses_read: u64,
        response_bytes: u64,
    ) {
        self.stats.cycles = cycles;
        self.stats.responses_read = responses_read;
        self.stats.response_bytes = response_bytes;
    }

    /// The time series (and `--hlog`): hand each interval's counts and histogram over.
    pub fn set_intervals(&mut self, intervals: Option<IntervalRecorder>) {
        self.stats.intervals = intervals;
    }

    /// `--urls`: count per line too, over `lines` lines.
    pub fn set_urls(&mut self, lines: usize) {
        self.stats.urls = Some(UrlRecorder::new(lines));
    }

    /// An HTTP/2 run's own counts (see [`crate::load::h2`]).
    pub fn set_h2(&mut self, counts: crate::load::stats::h2::H2Counts) {
        self.stats.h2 = Some(counts);
    }

    /// A load plan: count per report step as well.
    pub fn set_steps(&mut self, steps: Option<StepRecorder>) {
        self.stats.steps = steps;
    }

    /// Counts one complete response to `request`, read at `now`, and says what it was.
    #[inline]
    pub fn response(&mut self, request: InFlight, status: u16, now: Instant) -> Answer {
        self.outstanding = self.outstanding.saturating_sub(1);
        if self.settling
            || request.sent < self.window_start
            || self.window_end.is_some_and(|end| request.sent >= end)
        {
            return Answer::Outside;
        }
        let stats = &mut self.stats;
        let service_time = now.saturating_duration_since(request.sent);
        if service_time >= self.timeout {
            stats.errors.add(FailureKind::Timeout, 1);
            if let Some(urls) = stats.urls.as_mut() {
                urls.failure(request.line as usize, FailureKind::Timeout);
            }
            if let Some(intervals) = stats.intervals.as_mut() {
                let since_start = now.saturating_duration_since(self.start);
                intervals.count_errors(FailureKind::Timeout, 1, since_start);
            }
            if let Some(steps) = stats.steps.as_mut() {
                let intended = request.intended.saturating_duration_since(self.start);
                steps.record_failure(FailureKind::Timeout, Some(intended), intended);
            }
            return Answer::Outside;
        }
        let latency = now.saturating_duration_since(request.start);
        stats.latency.record(latency);
        if let Some(urls) = stats.urls.as_mut() {
            urls.response(request.line as usize, latency, status, self.draining);
        }
        if let Some(steps) = stats.steps.as_mut() {
            steps.record_response(
                request.intended.saturating_duration_since(self.start),
                now.saturating_duration_since(self.start),
                latency,
                service_time,
                !self.draining,
            );
        }
        if let Some(intervals) = stats.intervals.as_mut() {
            let since_start = now.saturating_duration_since(self.start);
            if self.draining {
                intervals.record_latency(latency, since_start);
            } else {
                intervals.record_response(latency, since_start);
            }
        }
        if self.uncorrected {
            if let Some(uncorrected) = stats.latency_uncorrected.as_mut() {
                uncorrected.record(service_time);
            }
            let late = micros(request.own_lateness()).saturating_mul(1000);
            stats.send_late_ns += late;
            stats.send_late_max_ns = stats.send_late_max_ns.max(late);
            stats.send_held_ns += micros(request.held()).saturating_mul(1000);
            stats.send_late_count += 1;
        }
        if self.draining {
            stats.drained += 1;
            Answer::Drained
        } else {
            stats.count_response(status, now.saturating_duration_since(self.start));
            Answer::Counted
        }
    }

    /// A TLS handshake completed (its time is no request's latency; see the transport).
    pub fn handshake(&mut self, handshake: crate::load::engine::tls::Handshake) {
        let stats = &mut self.stats;
        stats
            .handshake
            .get_or_insert_with(LatencyHistogram::new)
            .record(handshake.duration);
        stats.handshakes_resumed += u64::from(handshake.resumed);
    }

    /// Bytes that reached their socket `held` before they were handled (io_uring driver).
    #[inline]
    pub fn held(&mut self, held: Duration) {
        self.stats.hold.record(held);
    }

    /// `count` requests failed with `kind` (or, `Connect`, a connection attempt did).
    #[inline]
    pub fn failed(&mut self, kind: FailureKind, count: u64) {
        self.count_errors(kind, count);
        if let Some(steps) = self.stats.steps.as_mut() {
            let at = Instant::now().saturating_duration_since(self.start);
            for _ in 0..count {
                steps.record_failure(kind, None, at);
            }
        }
    }

    /// A broken connection lost the requests `in_flight`: each is a failure of `kind` (a
    /// protocol error is one even with nothing in flight: the server sent what no request
    /// asked for). Load plans count each in the step it was due in, `--urls` under its line.
    pub fn lost(&mut self, kind: FailureKind, in_flight: &VecDeque<InFlight>) {
        let count = in_flight.len() as u64;
        if count == 0 {
            if kind == FailureKind::Protocol {
                self.failed(kind, 1);
            }
            return;
        }
        self.count_errors(kind, count);
        if let Some(steps) = self.stats.steps.as_mut() {
            for request in in_flight {
                let intended = request.intended.saturating_duration_since(self.start);
                steps.record_failure(kind, Some(intended), intended);
            }
        }
        if let Some(urls) = self.stats.urls.as_mut() {
            for request in in_flight {
                urls.failure(request.line as usize, kind);
            }
        }
    }

    /// The run's and the current interval's side of `count` failures of `kind`, detected now.
    fn count_errors(&mut self, kind: FailureKind, count: u64) {
        self.stats.errors.add(kind, count);
        if count == 0 {
            return;
        }
        if let Some(intervals) = self.stats.intervals.as_mut() {
            intervals.count_errors(kind, count, self.start.elapsed());
        }
    }

    /// `requests` requests starting at line `first` of the rotation were sent.
    #[inline]
    pub fn sent(&mut self, requests: usize, first: usize) {
        self.stats.sent += requests as u64;
        self.outstanding += requests as u64;
        if let Some(urls) = self.stats.urls.as_mut() {
            urls.sent(first, requests);
        }
    }

    #[inline]
    pub fn bytes_written(&mut self, n: usize) {
        self.stats.bytes_written += n as u64;
    }

    #[inline]
    pub fn bytes_read(&mut self, n: usize) {
        self.stats.bytes_read += n as u64;
    }

    /// `requests` in flight were dropped with their connection (reset, failed, timed out).
    #[inline]
    pub fn dropped(&mut self, requests: usize) {
        self.outstanding = self.outstanding.saturating_sub(requests as u64);
    }

    /// Requests sent and not yet answered or dropped.
    pub fn outstanding(&self) -> u64 {
        self.outstanding
    }

    /// Complete responses so far (the progress display's counter).
    pub fn responses(&self) -> u64 {
        self.stats.requests
    }

    /// The p99 latency so far, in µs.
    pub fn p99_us(&self) -> u64 {
        self.stats.latency.value_at_quantile(0.99)
    }

    /// The deadline passed: what is answered from now on is a sample, not a response.
    pub fn start_drain(&mut self) {
        self.draining = true;
    }

    pub fn draining(&self) -> bool {
        self.draining
    }

    /// Once per loop turn at `now`: per-interval views roll over to the current interval.
    #[inline]
    pub fn tick(&mut self, now: Instant) {
        if let Some(intervals) = self.stats.intervals.as_mut() {
            intervals.roll(now - self.start);
        }
    }

    /// A request still unanswered when the run ended at `end`: censored at its age.
    pub fn censor_in_flight(&mut self, request: &InFlight, end: Instant) {
        let since_intended_us = micros(end.saturating_duration_since(request.start));
        let since_sent_us = micros(end.saturating_duration_since(request.sent));
        let censored = Censored::InFlight {
            since_intended_us,
            since_sent_us,
        };
        self.stats.censored.push(censored);
        self.stats.unanswered += 1;
        if let Some(urls) = self.stats.urls.as_mut() {
            urls.in_flight_at_end(request.line as usize, since_intended_us, since_sent_us);
        }
        if let Some(steps) = self.stats.steps.as_mut() {
            let step = steps.step_of(request.intended.saturating_duration_since(self.start));
            steps.censor(step, censored);
        }
    }

    /// Rate mode: requests of one connection, due at least every `unsent.step` from
    /// `unsent.oldest` on, were never sent; the first would have been line `first_line` of
    /// the rotation.
    pub fn censor_unsent(&mut self, unsent: &Unsent, end: Instant, first_line: usize) {
        let oldest_us = micros(end.saturating_duration_since(unsent.oldest));
        let step_us = unsent.step.as_secs_f64() * 1e6;
        let censored = Censored::Unsent {
            oldest_us,
            step_us,
            count: unsent.count,
        };
        self.stats.censored.push(censored);
        self.stats.unsent += unsent.count;
        if let Some(urls) = self.stats.urls.as_mut() {
            urls.unsent(first_line, oldest_us, step_us, unsent.count);
        }
        if let Some(steps) = self.stats.steps.as_mut() {
            steps.censor(unsent.window, censored);
        }
    }

    /// The end of the worker's run: its measured window was `elapsed` long, and it used
    /// `cpu_s` of CPU and waited `wait_s` for one. The interval views flush their last
    /// interval.
    pub fn finish(mut self, elapsed: Duration, cpu_s: f64, wait_s: f64) -> ThreadStats {
        if let Some(intervals) = self.stats.intervals.take() {
            intervals.finish();
        }
        self.stats.elapsed = elapsed;
        self.stats.cpu_s = cpu_s;
        self.stats.wait_s = wait_s;
        self.stats
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(intended: Instant, sent: Instant) -> InFlight {
        InFlight {
            intended,
            start: intended,
            sent,
            line: 0,
        }
    }

    #[test]
    fn the_generators_own_lateness_is_in_no_latency_and_a_wait_for_the_connection_is() {
        let t = Instant::now();
        let at = |us: u64| t + Duration::from_micros(us);
        // Due at 100, the connection free since 0, sent at 350 (a slack, a nap): 250 us of
        // the generator's own, none held; the latency starts at 350.
        let chosen = InFlight::new(at(100), at(0), at(350), 0);
        assert_eq!(chosen.own_lateness(), Duration::from_micros(250));
        assert_eq!(chosen.held(), Duration::ZERO);
        assert_eq!(chosen.start, at(350));
        // Due at 100, its connection busy until 600 (an earlier answer arrived then), sent
        // at 650: 500 us held (the server's, in the latency), 50 us the generator's own.
        let held = InFlight::new(at(100), at(600), at(650), 0);
        assert_eq!(held.held(), Duration::from_micros(500));
        assert_eq!(held.own_lateness(), Duration::from_micros(50));
        assert_eq!(held.start, at(150));
        // Sent on time: all three are the same moment.
        let exact = InFlight::new(at(100), at(0), at(100), 0);
        assert_eq!((exact.start, exact.held()), (at(100), Duration::ZERO));
        let mut recorder = Recorder::new(t, Duration::from_secs(1), true);
        recorder.response(held, 200, at(1_150));
        recorder.response(chosen, 200, at(1_350));
        let stats = recorder.finish(Duration::from_secs(1), 0.0, 0.0);
        // From the start: 1,000 us each; from the actual send: 500 and 1,000.
        let range = |h: &LatencyHistogram| {
            let (lo, hi) = (h.value_at_quantile(0.0), h.value_at_quantile(1.0));
            (h.lowest_equivalent(lo), h.lowest_equivalent(hi))
        };
        let exact = |us: u64| stats.latency.lowest_equivalent(us);
        assert_eq!(range(&stats.latency), (exact(1_000), exact(1_000)));
        let uncorrected = stats.latency_uncorrected.as_ref().unwrap();
        assert_eq!(range(uncorrected), (exact(500), exact(1_000)));
        assert_eq!(stats.send_late_ns, 300_000);
        assert_eq!(stats.send_late_max_ns, 250_000);
        assert_eq!(stats.send_held_ns, 500_000);
        assert_eq!(stats.send_late_count, 2);
    }

    #[test]
    fn a_response_is_a_sample_from_its_intended_time_and_a_late_one_a_timeout() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut r = Recorder::new(t, ms(100), true);
        r.response(request(t, t + ms(10)), 200, t + ms(30));
        let stats = r.finish(ms(1000), 0.0, 0.0);
        assert_eq!(stats.requests, 1);
        let corrected = stats.latency.value_at_quantile(1.0);
        assert!((29_900..=30_100).contains(&corrected), "{corrected}");
        let uncorrected = stats.latency_uncorrected.as_ref().unwrap();
        let service = uncorrected.value_at_quantile(1.0);
        assert!((19_900..=20_100).contains(&service), "{service}");
        assert_eq!(stats.elapsed, ms(1000));

        let mut r = Recorder::new(t, ms(100), false);
        r.response(request(t, t), 200, t + ms(100));
        let stats = r.finish(ms(1), 0.0, 0.0);
        assert_eq!(stats.requests, 0);
        assert_eq!(stats.latency.len(), 0);
        assert_eq!(stats.errors.timeout, 1);
    }

    #[test]
    fn answers_in_the_drain_are_samples_not_responses() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut r = Recorder::new(t, ms(100), false);
        r.response(request(t, t), 200, t + ms(1));
        r.start_drain();
        assert!(r.draining());
        r.response(request(t, t), 200, t + ms(2));
        let stats = r.finish(ms(1), 0.0, 0.0);
        assert_eq!((stats.requests, stats.drained), (1, 1));
        assert_eq!(stats.latency.len(), 2);
    }

    #[test]
    fn censored_requests_are_counted_at_their_age() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut r = Recorder::new(t, ms(100), true);
        r.censor_in_flight(&request(t, t + ms(5)), t + ms(50));
        r.censor_unsent(
            &Unsent {
                window: 0,
                oldest: t + ms(10),
                step: ms(10),
                count: 3,
            },
            t + ms(50),
            0,
        );
        let stats = r.finish(ms(50), 0.0, 0.0);
        assert_eq!((stats.unanswered, stats.unsent), (1, 3));
        assert_eq!(
            stats.censored,
            vec![
                Censored::InFlight {
                    since_intended_us: 50_000,
                    since_sent_us: 45_000
                },
                Censored::Unsent {
                    oldest_us: 40_000,
                    step_us: 10_000.0,
                    count: 3
                }
            ]
        );
    }

    #[test]
    fn the_engine_recorder_puts_responses_timeouts_and_drain_answers_in_their_intervals() {
        use crate::load::stats::series::IntervalCollector;
        const MS: fn(u64) -> Duration = Duration::from_millis;
        let t = std::time::Instant::now();
        let at = |ms: u64| t + MS(ms);
        let sent = |ms: u64| InFlight {
            intended: at(ms),
            start: at(ms),
            sent: at(ms),
            line: 0,
        };
        let (collector, plan) = IntervalCollector::new(Duration::from_secs(1), 1, Some(MS(2000)));
        let mut r = Recorder::new(t, MS(100), false);
        r.set_intervals(Some(plan.recorder(0)));
        drop(plan);
        r.failed(FailureKind::Connect, 2); // now: in the first interval
        r.failed(FailureKind::Read, 0); // nothing
        r.response(sent(100), 200, at(150));
        r.tick(at(1010));
        r.response(sent(1000), 200, at(1200)); // past the 100 ms timeout: a timeout
        r.response(sent(1100), 200, at(1130));
        r.start_drain();
        r.response(sent(1990), 200, at(2050)); // the drain: a sample of the last interval
        let stats = r.finish(MS(2000), 0.0, 0.0);
        assert_eq!((stats.requests, stats.drained), (2, 1));
        let (points, censored) = collector.finish(MS(2000), None, &mut |_| Ok(())).unwrap();
        assert!(censored.is_none());
        let rows: Vec<(u64, u64, u64, u64)> = points
            .iter()
            .map(|p| {
                (
                    p.responses,
                    p.errors.connect,
                    p.errors.timeout,
                    p.latency_us.map_or(0, |l| l.count),
                )
            })
            .collect();
        assert_eq!(rows, vec![(1, 2, 0, 1), (1, 0, 1, 2)]);
        let last = points[1].latency_us.unwrap();
        assert!((59_900..=60_100).contains(&last.max), "{last:?}");
    }
}
