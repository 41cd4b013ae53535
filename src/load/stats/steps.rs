//! Per-step statistics of a load plan: what each report step of `-R 100..5000` or
//! `-R 1000@10s,2000@10s` achieved ([`StepReport`]), and whether it [`held`]. Each engine
//! thread owns a [`StepRecorder`] beside its [`crate::load::stats::ThreadStats`] (a separate
//! piece, so the whole-run statistics stay as they are); recorders merge exactly at the end, as
//! the thread statistics do. The windows come from the plan (`source::plan`).

use std::fmt::Write;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::load::error::FailureKind;
use crate::load::source::plan::{RatePlan, StepWindow};
use crate::load::stats::LatencyKey;
use crate::load::stats::RATE_HELD_FRACTION;
use crate::load::stats::{
    censored_view, Censored, ErrorCounts, LatencyHistogram, LatencySummary, LatencyView,
};

/// What one thread measured in one report step.
#[derive(Debug, Clone, Default)]
pub struct StepCounts {
    /// Latency of the answered requests due in the step, from their intended send time.
    pub latency: LatencyHistogram,
    /// Complete responses that arrived in the step's window.
    pub responses: u64,
    /// Their service times (actual send to answer), summed.
    pub service: Duration,
    pub errors: ErrorCounts,
    /// Requests due in the step with no answer at the end (see [`crate::load::stats`]).
    pub censored: Vec<Censored>,
}

/// One thread's per-step counts, indexed by report step.
#[derive(Debug, Clone)]
pub struct StepRecorder {
    /// End of each step from the start of the run, ascending.
    ends: Vec<Duration>,
    steps: Vec<StepCounts>,
}

impl StepRecorder {
    pub fn new(windows: &[StepWindow]) -> StepRecorder {
        assert!(!windows.is_empty(), "a plan has at least one step");
        StepRecorder {
            ends: windows.iter().map(|w| w.end).collect(),
            steps: vec![StepCounts::default(); windows.len()],
        }
    }

    /// The step holding `offset` from the start; past the end, the last one.
    #[inline]
    pub fn step_of(&self, offset: Duration) -> usize {
        self.ends
            .partition_point(|&end| end <= offset)
            .min(self.ends.len() - 1)
    }

    /// One answered request, due at `intended` and answered at `answered` (both from the start),
    /// `latency` after `intended` and `service` after it was sent. `in_run`: a response of the
    /// run (not of the drain after it).
    #[inline]
    pub fn record_response(
        &mut self,
        intended: Duration,
        answered: Duration,
        latency: Duration,
        service: Duration,
        in_run: bool,
    ) {
        let step = self.step_of(intended);
        self.steps[step].latency.record(latency);
        if in_run {
            let index = self.step_of(answered);
            let window = &mut self.steps[index];
            window.responses += 1;
            window.service += service;
        }
    }

    /// One failure of `kind` of a request due at `intended`, or (a connection attempt, no
    /// request) at `at`.
    pub fn record_failure(&mut self, kind: FailureKind, intended: Option<Duration>, at: Duration) {
        let step = self.step_of(intended.unwrap_or(at));
        self.steps[step].errors.add(kind, 1);
    }

    /// A request due in `step` left without an answer at the end.
    pub fn censor(&mut self, step: usize, censored: Censored) {
        if let Some(s) = self.steps.get_mut(step) {
            s.censored.push(censored);
        }
    }

    pub fn steps(&self) -> &[StepCounts] {
        &self.steps
    }

    /// Adds another thread's counts (of the same plan) into these.
    pub fn merge(&mut self, other: &StepRecorder) {
        for (mine, theirs) in self.steps.iter_mut().zip(&other.steps) {
            mine.latency.merge(&theirs.latency);
            mine.responses += theirs.responses;
            mine.service += theirs.service;
            mine.errors.merge(&theirs.errors);
            mine.censored.extend_from_slice(&theirs.censored);
        }
    }
}

/// One report step as the report shows it.
///
/// - `requests`, `rps`: complete responses that *arrived* in the step's window, and their rate.
///   That is what the server delivered while the step's rate was asked of it; the responses of
///   the drain after the end are not counted, as in the whole-run figures, so the rows add up to
///   the run's `requests`.
/// - `latency_us`: the requests *due* in the step (by intended send time), from that intended
///   time (coordinated omission corrected), with the step's censored requests (still in flight at
///   the end, or due and never sent) at their age, as in the whole-run view, and `lower_bound`.
/// - `errors`: failures of the requests due in the step; a failed connection attempt, which
///   has no request, counts in the step it happened in. The rows add up to the run's errors.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StepReport {
    /// 1-based.
    pub step: usize,
    /// The step's window, seconds from the start of the run.
    pub start_s: f64,
    pub end_s: f64,
    /// The planned rate at the start and at the end of the window (equal for a constant step).
    pub target_from_rps: f64,
    pub target_to_rps: f64,
    /// The planned mean rate over the window.
    pub target_rps: f64,
    /// Requests due in the window.
    pub scheduled: u64,
    /// The rate responses arrive at from a server that keeps up (see the module header).
    pub expected_rps: f64,
    /// Complete responses that arrived in the window.
    pub requests: u64,
    /// `requests` per second of the window: the achieved rate.
    pub rps: f64,
    /// Failures of the requests due in the window.
    pub errors: ErrorCounts,
    /// The requests due in the window, from their intended send times, censored ones included.
    pub latency_us: LatencySummary,
    /// `rps` >= 95% of `expected_rps` and `latency_us.p99` exact (see the module header).
    pub held: bool,
    /// The histogram `latency_us` summarizes (base64 of HdrHistogram's compressed V2
    /// encoding, as the report's `histogram`), so that `sweetspot merge` adds steps exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
}

/// Whether a step held: it delivered at least [`RATE_HELD_FRACTION`] of the rate expected from
/// a server keeping up and its p99 is not a lower bound.
///
/// `rps` at least [`RATE_HELD_FRACTION`] of `expected_rps`, and a p99 that is exact (not a lower
/// bound: no request due in the step is left without an answer at a rank that reaches p99). A
/// step that is not held is past the knee. `expected_rps` is the rate at which responses arrive
/// in the window from a server that keeps up: a response arrives one service time (send to
/// answer) after its request is due, so it is the requests due in the window shifted back by the
/// mean service time of the step's responses (at most a quarter of the window), per second.
/// Without the shift a slow endpoint under a steep ramp would look behind by its own latency;
/// with a constant rate and fast answers it equals `target_rps`.
pub fn held(expected_rps: f64, rps: f64, latency: &LatencySummary) -> bool {
    rps >= expected_rps * RATE_HELD_FRACTION && !latency.lower_bound.contains(LatencyKey::P99)
}

/// Responses per second that arrive in `window` from a server answering `service` after each
/// request is due: the requests due in the window moved back by `service` (at most a quarter
/// of the window), per second of it.
pub fn expected_rate(plan: &RatePlan, window: &StepWindow, service: Duration) -> f64 {
    let seconds = window.seconds();
    if seconds <= 0.0 {
        return 0.0;
    }
    let shift = service.as_secs_f64().min(seconds / 4.0);
    let from = window.start.as_secs_f64() - shift;
    let to = window.end.as_secs_f64() - shift;
    (plan.count_at(to) - plan.count_at(from)) / seconds
}

/// The report rows of a run's merged per-step counts under `plan` (this process's share of
/// it). `timeout` bounds the latency of the step's timeouts (as in the whole-run view).
pub fn summarize(plan: &RatePlan, recorder: &StepRecorder, timeout: Duration) -> Vec<StepReport> {
    plan.windows()
        .iter()
        .zip(recorder.steps())
        .enumerate()
        .map(|(i, (w, counts))| {
            let (latency_us, histogram) = censored_view(
                &counts.latency,
                &counts.censored,
                LatencyView::RateCorrected,
                counts.errors.timeout,
                timeout,
            );
            let seconds = w.seconds();
            let rps = if seconds > 0.0 {
                counts.responses as f64 / seconds
            } else {
                0.0
            };
            let target_rps = w.target_rate();
            let mean_service = match u32::try_from(counts.responses) {
                Ok(n) if n > 0 => counts.service / n,
                _ => Duration::ZERO,
            };
            let expected_rps = expected_rate(plan, w, mean_service);
            StepReport {
                step: i + 1,
                start_s: w.start.as_secs_f64(),
                end_s: w.end.as_secs_f64(),
                target_from_rps: w.from_rate,
                target_to_rps: w.to_rate,
                target_rps,
                scheduled: w.scheduled,
                expected_rps,
                requests: counts.responses,
                rps,
                errors: counts.errors,
                held: held(expected_rps, rps, &latency_us),
                latency_us,
                histogram: Some(crate::load::stats::LatencyHistogram::encode(&histogram)),
            }
        })
        .collect()
}

/// The steps of the workers of one distributed run as one run's steps: counts and rates
/// added, histograms added (never percentiles averaged), a figure a lower bound when some
/// worker's was (conservative, as the merged whole-run view). Every worker must report the
/// same windows with their histograms; workers without steps give none.
pub fn merge_workers(workers: &[&[StepReport]]) -> Result<Vec<StepReport>, String> {
    let Some(first) = workers.first() else {
        return Ok(Vec::new());
    };
    let mut merged = Vec::with_capacity(first.len());
    for (i, base) in first.iter().enumerate() {
        let mut row = StepReport {
            target_from_rps: 0.0,
            target_to_rps: 0.0,
            target_rps: 0.0,
            scheduled: 0,
            expected_rps: 0.0,
            requests: 0,
            rps: 0.0,
            errors: ErrorCounts::default(),
            latency_us: LatencySummary::default(),
            held: false,
            histogram: None,
            ..base.clone()
        };
        let mut latency = LatencyHistogram::new();
        let mut bounds = crate::load::stats::LowerBounds::default();
        for steps in workers {
            let step = steps
                .get(i)
                .filter(|s| s.start_s == base.start_s && s.end_s == base.end_s)
                .ok_or("the workers' load plans have different steps")?;
            let histogram = step
                .histogram
                .as_deref()
                .ok_or("a worker's steps carry no histogram (written by an older sweetspot?)")?;
            latency.merge(&crate::load::stats::LatencyHistogram::decode(histogram)?);
            for key in step.latency_us.lower_bound.keys() {
                bounds.insert(key);
            }
            row.target_from_rps += step.target_from_rps;
            row.target_to_rps += step.target_to_rps;
            row.target_rps += step.target_rps;
            row.scheduled += step.scheduled;
            row.expected_rps += step.expected_rps;
            row.requests += step.requests;
            row.errors.merge(&step.errors);
        }
        if workers.iter().any(|steps| steps.len() != first.len()) {
            return Err("the workers' load plans have different steps".into());
        }
        let seconds = row.end_s - row.start_s;
        row.rps = if seconds > 0.0 {
            row.requests as f64 / seconds
        } else {
            0.0
        };
        row.latency_us = latency.summary();
        row.latency_us.lower_bound = bounds;
        row.held = held(row.expected_rps, row.rps, &row.latency_us);
        row.histogram = Some(crate::load::stats::LatencyHistogram::encode(&latency));
        merged.push(row);
    }
    Ok(merged)
}

/// The human table of the steps (empty for none), each line indented by two spaces.
pub fn render_table(steps: &[StepReport]) -> String {
    let mut out = String::new();
    if steps.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "  Steps (achieved: responses/s that arrived in the step; latency: of the requests due \
         in it, from intended send times; held: achieved >= {:.0}% of what a server keeping up \
         delivers, and p99 exact)",
        RATE_HELD_FRACTION * 100.0
    );
    let _ = writeln!(
        out,
        "    {:>4} {:>13} {:>10} {:>10} {:>9} {:>7} {:>10} {:>10} {:>10}  held",
        "step", "window", "target/s", "achieved/s", "requests", "errors", "p50", "p99", "max"
    );
    for s in steps {
        let figure = |key: LatencyKey| s.latency_us.cell(key);
        let _ = writeln!(
            out,
            "    {:>4} {:>13} {:>10.1} {:>10.1} {:>9} {:>7} {:>10} {:>10} {:>10}  {}",
            s.step,
            format!("{}-{}s", s.start_s, s.end_s),
            s.target_rps,
            s.rps,
            s.requests,
            s.errors.total(),
            figure(LatencyKey::P50),
            figure(LatencyKey::P99),
            figure(LatencyKey::Max),
            if s.held { "yes" } else { "NO" }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::source::plan::RatePlan;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn two_steps_plan() -> RatePlan {
        RatePlan::parse("200@1s,400@1s", None, Duration::from_secs(10)).unwrap()
    }

    fn two_steps() -> Vec<StepWindow> {
        two_steps_plan().windows()
    }

    #[test]
    fn responses_count_where_they_arrive_latency_where_it_was_due() {
        let windows = two_steps();
        let mut r = StepRecorder::new(&windows);
        assert_eq!(r.step_of(MS(0)), 0);
        assert_eq!(r.step_of(MS(999)), 0);
        assert_eq!(r.step_of(MS(1000)), 1);
        assert_eq!(r.step_of(MS(5000)), 1, "past the end: the last step");
        // Due at 999 ms, answered at 1001 ms: latency in step 1, response in step 2.
        r.record_response(MS(999), MS(1001), MS(2), MS(2), true);
        r.record_response(MS(10), MS(11), MS(1), MS(1), true);
        // Answered in the drain: a latency sample of step 2, not a response of the run.
        r.record_response(MS(1995), MS(2003), MS(8), MS(8), false);
        let s = r.steps();
        assert_eq!((s[0].responses, s[1].responses), (1, 1));
        assert_eq!((s[0].latency.len(), s[1].latency.len()), (2, 1));
        assert_eq!(s[0].latency.summary().max, 2_000.0);
        r.record_failure(FailureKind::Timeout, Some(MS(500)), MS(2500));
        r.record_failure(FailureKind::Connect, None, MS(1500));
        let s = r.steps();
        assert_eq!(s[0].errors.timeout, 1);
        assert_eq!(s[1].errors.connect, 1);
        let mut other = StepRecorder::new(&windows);
        other.record_response(MS(1500), MS(1501), MS(1), MS(1), true);
        r.merge(&other);
        assert_eq!(r.steps()[1].responses, 2);
        assert_eq!(r.steps()[1].latency.len(), 2);
    }

    #[test]
    fn a_step_holds_at_95_percent_with_an_exact_p99() {
        let plan = two_steps_plan();
        let windows = plan.windows();
        let mut r = StepRecorder::new(&windows);
        // Step 1: 190 of 200 answered in it at 1 ms (95%): held.
        for i in 0..190 {
            r.record_response(MS(i * 5), MS(i * 5 + 1), MS(1), MS(1), true);
        }
        // Step 2: 379 of 400 at 2 ms: of the 399.6 expected in the window (those due 2 ms
        // before it), 94.8%: not held, though every p99 is exact.
        for i in 0..379 {
            r.record_response(MS(1000 + i * 2), MS(1000 + i * 2 + 2), MS(2), MS(2), true);
        }
        let rows = summarize(&plan, &r, Duration::from_secs(2));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].requests, 190);
        assert_eq!(rows[0].rps, 190.0);
        assert_eq!(rows[0].target_rps, 200.0);
        assert_eq!(rows[0].scheduled, 200);
        assert_eq!(rows[0].latency_us.p99, 1000.0);
        assert!(rows[0].held, "{:?}", rows[0]);
        assert_eq!(rows[1].rps, 379.0);
        assert!(rows[1].latency_us.lower_bound.is_empty());
        assert!(!rows[1].held, "{:?}", rows[1]);
        assert_eq!((rows[1].start_s, rows[1].end_s), (1.0, 2.0));
    }

    #[test]
    fn responses_are_expected_one_service_time_after_their_requests_are_due() {
        let plan = RatePlan::parse("100..300@2s", None, Duration::from_secs(10)).unwrap();
        let w = plan.windows();
        // Fast answers: the planned mean rate of the slice (N(0.2) = 22 requests in 0.2 s).
        assert!((expected_rate(&plan, &w[0], Duration::ZERO) - 110.0).abs() < 1e-9);
        // 50 ms answers: the requests due from -50 ms to 150 ms, N(0.15) = 16.125.
        let slow = expected_rate(&plan, &w[0], MS(50));
        assert!((slow - 80.625).abs() < 1e-9, "{slow}");
        // The shift is at most a quarter of the window (50 ms here).
        assert_eq!(expected_rate(&plan, &w[0], MS(900)), slow);
        let step = two_steps_plan();
        let sw = step.windows();
        // Just after a step up, the previous rate's answers are still arriving.
        let after = expected_rate(&step, &sw[1], MS(100));
        assert!((after - 380.0).abs() < 1e-9, "{after}");
    }

    #[test]
    fn a_slow_endpoint_on_a_ramp_holds_when_its_answers_keep_pace() {
        // 100..2100/s over 2 s (N(t) = 100 t + 500 t^2), every answer 50 ms after its request
        // was due: the slice from 0.2 to 0.4 s (300 to 500/s) receives the answers to the
        // requests due from 0.15 to 0.35 s, fewer than it plans.
        let plan = RatePlan::parse("100..2100@2s", None, Duration::from_secs(10)).unwrap();
        let windows = plan.windows();
        let mut r = StepRecorder::new(&windows);
        for k in 0..2200 {
            let due = Duration::from_secs_f64(plan.time_of(k));
            r.record_response(due, due + MS(50), MS(50), MS(50), true);
        }
        let rows = summarize(&plan, &r, Duration::from_secs(2));
        // Due by 0.35 s: N = 96.25 (97 requests), by 0.15 s: N = 26.25 (27): 70 arrive.
        assert_eq!(rows[1].requests, 70);
        assert_eq!(rows[1].target_rps, 400.0);
        assert!(rows[1].rps < 0.95 * rows[1].target_rps, "{:?}", rows[1]);
        assert!((rows[1].expected_rps - 350.0).abs() < 1e-6, "{:?}", rows[1]);
        assert!(rows.iter().all(|row| row.held), "{rows:?}");
    }

    #[test]
    fn a_step_with_requests_left_unanswered_at_p99_did_not_hold() {
        let plan = two_steps_plan();
        let windows = plan.windows();
        let mut r = StepRecorder::new(&windows);
        for i in 0..400 {
            r.record_response(MS(1000 + i * 2), MS(1000 + i * 2 + 1), MS(1), MS(1), true);
        }
        // 5 requests due in step 2 still in flight at the end, 800 ms old: 5 of 405 reach p99.
        for _ in 0..5 {
            r.censor(
                1,
                Censored::InFlight {
                    since_intended_us: 800_000,
                    since_sent_us: 800_000,
                },
            );
        }
        let rows = summarize(&plan, &r, Duration::from_secs(2));
        assert_eq!(rows[1].rps, 400.0);
        assert!(rows[1].latency_us.lower_bound.contains(LatencyKey::P99));
        assert!(
            rows[1].latency_us.p99 >= 799_000.0,
            "{:?}",
            rows[1].latency_us
        );
        assert!(!rows[1].held);
        // Step 1 had nothing: no samples, nothing achieved, not held.
        assert_eq!(rows[0].latency_us.count, 0);
        assert!(!rows[0].held);
        let table = render_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(
            lines[2].contains("0-1s") && lines[2].ends_with("NO"),
            "{table}"
        );
        assert!(
            lines[3].contains(">=") && lines[3].contains("400.0"),
            "{table}"
        );
        assert_eq!(render_table(&[]), "");
    }

    #[test]
    fn the_steps_of_two_workers_merge_exactly() {
        let plan = two_steps_plan().scaled(0.5);
        let windows = plan.windows();
        let run = |latency_ms: u64, answered: u64| {
            let mut r = StepRecorder::new(&windows);
            for i in 0..answered {
                let due = MS(i * 10);
                r.record_response(due, due + MS(latency_ms), MS(latency_ms), MS(1), true);
            }
            summarize(&plan, &r, Duration::from_secs(2))
        };
        // Worker a answers all 100 of its first step at 1 ms; worker b 85 of them at 2 ms.
        let (a, b) = (run(1, 100), run(2, 85));
        assert!(a[0].held && !b[0].held);
        let merged = merge_workers(&[&a, &b]).unwrap();
        assert_eq!(merged.len(), 2);
        let m = &merged[0];
        assert_eq!((m.target_rps, m.scheduled, m.requests), (200.0, 200, 185));
        assert_eq!(m.rps, 185.0);
        assert_eq!(m.latency_us.count, 185);
        // 100 samples at 1 ms and 85 at 2 ms: the median is 1 ms, p99 2 ms.
        assert_eq!((m.latency_us.p50, m.latency_us.p99), (1000.0, 2000.0));
        // Each worker expects 99.9 (its requests due 1 ms before the window).
        assert!((m.expected_rps - 199.8).abs() < 1e-9, "{m:?}");
        assert!(!m.held, "185 of the 199.8 expected is below 95%");
        // Worker a alone held; 95 of 100 with b's would too.
        assert!(merge_workers(&[&a, &run(2, 95)]).unwrap()[0].held);
        assert_eq!(merge_workers(&[]).unwrap(), []);
        let other = RatePlan::parse("100@2s", None, Duration::from_secs(1)).unwrap();
        let c = summarize(&other, &StepRecorder::new(&other.windows()), MS(100));
        assert!(merge_workers(&[&a, &c]).is_err());
        let mut bare = a.clone();
        bare[1].histogram = None;
        assert!(merge_workers(&[&a, &bare]).is_err());
    }

    #[test]
    fn step_reports_round_trip_through_json() {
        let plan = two_steps_plan();
        let rows = summarize(
            &plan,
            &StepRecorder::new(&plan.windows()),
            Duration::from_secs(1),
        );
        let text = serde_json::to_string(&rows).unwrap();
        let back: Vec<StepReport> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, rows);
    }
}
