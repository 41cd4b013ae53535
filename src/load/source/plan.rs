//! Load plans for rate mode: a constant rate (`-R 1000`), a linear ramp (`-R 100..5000`) or
//! steps (`-R 1000@10s,2000@10s`, a step may itself be a ramp), each a [`RatePlan`] of linear
//! [`Segment`]s; when each request is due under it ([`RatePlan::time_of`]); and its report
//! steps ([`RatePlan::windows`]), whose figures the statistics keep step by step. Parsed by
//! the config, followed by the engine's send policy.

use std::fmt;
use std::time::Duration;

/// A ramp is reported as this many equal slices.
pub const RAMP_SLICES: u32 = 10;
/// At most this many report steps (a ramp counts [`RAMP_SLICES`]): each costs a histogram per
/// load thread.
pub const MAX_REPORT_STEPS: usize = 100;
/// The shortest step: shorter ones would be rows of a handful of requests.
pub const MIN_STEP: Duration = Duration::from_millis(10);
/// The highest rate a plan may ask for, requests/s.
pub const MAX_PLAN_RATE: f64 = 100_000_000.0;
/// The longest plan.
pub const MAX_PLAN_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// A stretch of a plan over which the rate moves linearly from `from_rate` to `to_rate`
/// (equal: a constant rate), in requests/s over all connections.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    pub from_rate: f64,
    pub to_rate: f64,
    pub duration: Duration,
}

impl Segment {
    fn seconds(&self) -> f64 {
        self.duration.as_secs_f64()
    }

    /// Requests due over the whole segment.
    fn total(&self) -> f64 {
        (self.from_rate + self.to_rate) * 0.5 * self.seconds()
    }

    /// The rate `s` seconds into the segment.
    fn rate_at(&self, s: f64) -> f64 {
        self.from_rate + (self.to_rate - self.from_rate) * s / self.seconds()
    }

    /// Requests due in the first `s` seconds of the segment: `r0 s + (r1 - r0) s^2 / 2D`.
    fn count_at(&self, s: f64) -> f64 {
        self.from_rate * s + (self.to_rate - self.from_rate) * s * s / (2.0 * self.seconds())
    }

    /// When (seconds into the segment) `n` requests are due: the root of `a s^2 + r0 s = n`
    /// with `a = (r1 - r0) / 2D`, written `2n / (r0 + sqrt(r0^2 + 4an))` so that a constant
    /// rate (`a = 0`) gives exactly `n / r0` and nothing cancels.
    fn time_of(&self, n: f64) -> f64 {
        if n <= 0.0 {
            return 0.0;
        }
        let a = (self.to_rate - self.from_rate) / (2.0 * self.seconds());
        let discriminant = (self.from_rate * self.from_rate + 4.0 * a * n).max(0.0);
        2.0 * n / (self.from_rate + discriminant.sqrt())
    }

    fn is_constant(&self) -> bool {
        self.from_rate == self.to_rate
    }
}

/// One report step: a window of the run with its planned rates at both ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepWindow {
    /// From the start of the run.
    pub start: Duration,
    pub end: Duration,
    pub from_rate: f64,
    pub to_rate: f64,
    /// Requests due in the window (`start <= T(k) < end`).
    pub scheduled: u64,
}

impl StepWindow {
    /// The planned mean rate over the window.
    pub fn target_rate(&self) -> f64 {
        (self.from_rate + self.to_rate) * 0.5
    }

    pub fn seconds(&self) -> f64 {
        (self.end - self.start).as_secs_f64()
    }
}

/// Requests of one connection that were due in one report step and were never sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnsentPiece {
    /// The report step (index into [`RatePlan::windows`]).
    pub window: usize,
    /// The connection's request number (its `j`) of the first of them.
    pub first: u64,
    pub count: u64,
    /// The longest gap between two consecutive of them, seconds: the connection's interval at
    /// the lowest rate of the window. Filling ages down from the oldest by this gap never goes
    /// above a true age (see the statistics' `Censored::Unsent`).
    pub max_gap_s: f64,
}

/// How the rate changes over a run: a validated, non-empty list of [`Segment`]s.
#[derive(Debug, Clone, PartialEq)]
pub struct RatePlan {
    segments: Vec<Segment>,
    /// Start of each segment in seconds, and the end of the plan last.
    start_s: Vec<f64>,
    /// Requests due before each segment, and the plan's total last.
    start_count: Vec<f64>,
    duration: Duration,
}

impl RatePlan {
    /// A plan over `segments`, which must be non-empty, each with a positive duration and rates
    /// (the parser and [`RatePlan::check`] make sure of that).
    pub fn new(segments: Vec<Segment>) -> RatePlan {
        assert!(!segments.is_empty(), "a plan has at least one segment");
        let mut start_s = Vec::with_capacity(segments.len() + 1);
        let mut start_count = Vec::with_capacity(segments.len() + 1);
        let mut duration = Duration::ZERO;
        let mut count = 0.0;
        for segment in &segments {
            start_s.push(duration.as_secs_f64());
            start_count.push(count);
            duration += segment.duration;
            count += segment.total();
        }
        start_s.push(duration.as_secs_f64());
        start_count.push(count);
        RatePlan {
            segments,
            start_s,
            start_count,
            duration,
        }
    }

    /// `rate` requests/s for `duration`.
    pub fn constant(rate: f64, duration: Duration) -> RatePlan {
        RatePlan::new(vec![Segment {
            from_rate: rate,
            to_rate: rate,
            duration,
        }])
    }

    /// Parses `-R`: `RATE`, `FROM..TO` (both over `duration`, or `default_duration` without
    /// `-d`) or steps `RATE@DUR,FROM..TO@DUR,...`. Steps carry their own length: with them
    /// `duration` (`-d`) must be absent or equal to their sum. The error is one line, without
    /// the flag's name.
    pub fn parse(
        text: &str,
        duration: Option<Duration>,
        default_duration: Duration,
    ) -> Result<RatePlan, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err(
                "empty; give a rate (1000), a ramp (100..5000) or steps (1000@10s,2000@10s)".into(),
            );
        }
        let plan = if text.contains('@') || text.contains(',') {
            let mut segments = Vec::new();
            for (i, item) in text.split(',').enumerate() {
                let n = i + 1;
                let item = item.trim();
                if item.is_empty() {
                    return Err(format!(
                        "step {n} is empty (steps are RATE@DURATION, separated by commas)"
                    ));
                }
                let Some((rates, length)) = item.split_once('@') else {
                    return Err(format!(
                        "step {n} ({item}) has no duration: write RATE@DURATION, like 1000@10s"
                    ));
                };
                let (from_rate, to_rate) =
                    parse_rates(rates.trim()).map_err(|e| format!("step {n}: {e}"))?;
                let length = length.trim();
                if length.is_empty() {
                    return Err(format!(
                        "step {n} ({item}) needs a duration after @, like {}@10s",
                        rates.trim()
                    ));
                }
                let duration =
                    crate::units::parse_duration(length).map_err(|e| format!("step {n}: {e}"))?;
                if duration < MIN_STEP {
                    return Err(format!(
                        "step {n} ({item}) lasts {length}; a step must last at least 10ms"
                    ));
                }
                segments.push(Segment {
                    from_rate,
                    to_rate,
                    duration,
                });
            }
            let plan = RatePlan::new(segments);
            if let Some(d) = duration {
                if d != plan.duration() {
                    return Err(format!(
                        "the steps last {} but -d says {}; leave -d out (steps carry their own durations)",
                        seconds_text(plan.duration()),
                        seconds_text(d)
                    ));
                }
            }
            plan
        } else {
            let (from_rate, to_rate) = parse_rates(text)?;
            let duration = duration.unwrap_or(default_duration);
            if duration < MIN_STEP {
                return Err("a plan must last at least 10ms".into());
            }
            RatePlan::new(vec![Segment {
                from_rate,
                to_rate,
                duration,
            }])
        };
        plan.check()?;
        Ok(plan)
    }

    /// Checks the limits every plan must meet (also for plans built in code).
    pub fn check(&self) -> Result<(), String> {
        for (i, s) in self.segments.iter().enumerate() {
            for rate in [s.from_rate, s.to_rate] {
                check_rate(rate).map_err(|e| format!("step {}: {e}", i + 1))?;
            }
            if s.duration.is_zero() {
                return Err(format!("step {} lasts 0s", i + 1));
            }
        }
        if self.duration > MAX_PLAN_DURATION {
            return Err(format!(
                "the plan lasts {}; at most 7 days",
                seconds_text(self.duration)
            ));
        }
        let steps = self.report_step_count();
        if steps > MAX_REPORT_STEPS {
            return Err(format!(
                "{steps} report steps (a ramp counts {RAMP_SLICES}); at most {MAX_REPORT_STEPS}"
            ));
        }
        Ok(())
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The length of the plan (the sum of its segments).
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// One constant rate: no steps to report.
    pub fn is_constant(&self) -> bool {
        self.segments.len() == 1 && self.segments[0].is_constant()
    }

    /// Requests due over the whole plan (`N(end)`, not rounded).
    pub fn total_requests(&self) -> f64 {
        self.start_count[self.segments.len()]
    }

    /// Requests per second averaged over the plan.
    pub fn mean_rate(&self) -> f64 {
        self.total_requests() / self.duration.as_secs_f64()
    }

    /// The highest rate anywhere in the plan.
    pub fn peak_rate(&self) -> f64 {
        self.segments
            .iter()
            .map(|s| s.from_rate.max(s.to_rate))
            .fold(0.0, f64::max)
    }

    /// The same plan with every rate multiplied by `factor` (a segment of a distributed run).
    pub fn scaled(&self, factor: f64) -> RatePlan {
        RatePlan::new(
            self.segments
                .iter()
                .map(|s| Segment {
                    from_rate: s.from_rate * factor,
                    to_rate: s.to_rate * factor,
                    duration: s.duration,
                })
                .collect(),
        )
    }

    /// The segment holding time `t` (seconds; the last one past the end).
    fn segment_at(&self, t: f64) -> usize {
        let n = self.segments.len();
        self.start_s[..n].partition_point(|&s| s <= t).max(1) - 1
    }

    /// The planned rate at `t` seconds into the run (the last rate past the end).
    pub fn rate_at(&self, t: f64) -> f64 {
        let i = self.segment_at(t);
        let segment = &self.segments[i];
        let s = (t - self.start_s[i]).clamp(0.0, segment.seconds());
        segment.rate_at(s)
    }

    /// `N(t)`: requests due in the first `t` seconds. Past the end it goes on at the last rate,
    /// so that [`RatePlan::time_of`] is defined (and increasing) for every `k`.
    pub fn count_at(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        let n = self.segments.len();
        let end = self.start_s[n];
        if t >= end {
            return self.start_count[n] + (t - end) * self.segments[n - 1].to_rate;
        }
        let i = self.segment_at(t);
        self.start_count[i] + self.segments[i].count_at(t - self.start_s[i])
    }

    /// `T(k)`: when request `k` of the run (over all connections, from 0) is due, seconds from
    /// the start: with `N(t)` the integral of the rate from the start (requests due by `t`),
    /// the time where `N(T(k)) = k`. Requests are dealt round robin over the `C` connections: connection `c`
    /// sends requests `c, c + C, c + 2C, ...`, so at a constant rate `R` its `j`-th request is
    /// due at `c / R + j * C / R`, which is wrk2's `phase + j * interval`. On a linear segment
    /// from `r0` to `r1` over `D`, `N(s) = r0 s + (r1 - r0) s^2 / 2D`, inverted in closed form
    /// ([`Segment::time_of`]). The engine measures latency from `T(k)` and sends late rather
    /// than skipping, at every rate, so coordinated omission stays corrected.
    pub fn time_of(&self, k: u64) -> f64 {
        let k = k as f64;
        let n = self.segments.len();
        if k >= self.start_count[n] {
            let last = &self.segments[n - 1];
            return self.start_s[n] + (k - self.start_count[n]) / last.to_rate;
        }
        let i = self.start_count[..n].partition_point(|&c| c <= k).max(1) - 1;
        let s = self.segments[i].time_of(k - self.start_count[i]);
        self.start_s[i] + s.min(self.segments[i].seconds())
    }

    /// [`RatePlan::time_of`] as an offset from the start, rounded to the nanosecond (exact
    /// for any plan: seven days are 6e14 ns, well inside f64's 2^53). Times past twice the
    /// longest plan are all that far: no run sends then, and an `Instant` plus it cannot
    /// overflow (a tiny rate puts a connection's first request centuries away).
    pub fn offset_of(&self, k: u64) -> Duration {
        let ns = (self.time_of(k) * 1e9).round();
        let far = 2 * MAX_PLAN_DURATION;
        if ns < far.as_nanos() as f64 {
            Duration::from_nanos(ns as u64)
        } else {
            far
        }
    }

    /// When request `j` of connection `connection` (of `connections`) is due: request
    /// `connection + j * connections` of the run.
    pub fn connection_offset(&self, connection: u64, connections: u64, j: u64) -> Duration {
        self.offset_of(connection.saturating_add(j.saturating_mul(connections)))
    }

    /// How many requests of connection `connection` (of `connections`), from its request
    /// `next` on, are due strictly before `limit` seconds.
    pub fn due_before(&self, connection: u64, connections: u64, next: u64, limit: f64) -> u64 {
        connection_requests_below(self.count_at(limit), connection, connections)
            .saturating_sub(next)
    }

    /// The report steps: one per constant segment, [`RAMP_SLICES`] equal slices per ramp; the
    /// statistics aggregate per step and say whether each one held.
    pub fn windows(&self) -> Vec<StepWindow> {
        let mut windows = Vec::with_capacity(self.report_step_count());
        let mut start = Duration::ZERO;
        for segment in &self.segments {
            let slices = if segment.is_constant() {
                1
            } else {
                RAMP_SLICES
            };
            for i in 0..slices {
                let from = start + segment.duration * i / slices;
                let to = start + segment.duration * (i + 1) / slices;
                let at = |d: Duration| segment.rate_at((d - start).as_secs_f64());
                windows.push(StepWindow {
                    start: from,
                    end: to,
                    from_rate: at(from),
                    to_rate: at(to),
                    scheduled: 0,
                });
            }
            start += segment.duration;
        }
        for w in &mut windows {
            w.scheduled = count_below(self.count_at(w.end.as_secs_f64()))
                - count_below(self.count_at(w.start.as_secs_f64()));
        }
        windows
    }

    fn report_step_count(&self) -> usize {
        self.segments
            .iter()
            .map(|s| {
                if s.is_constant() {
                    1
                } else {
                    RAMP_SLICES as usize
                }
            })
            .sum()
    }

    /// The requests of one connection, from its request `next` on, due before `limit` seconds
    /// and never sent, cut by report step (`windows` from [`RatePlan::windows`]).
    pub fn unsent_pieces(
        &self,
        windows: &[StepWindow],
        connection: u64,
        connections: u64,
        next: u64,
        limit: f64,
    ) -> Vec<UnsentPiece> {
        let mut pieces = Vec::new();
        for (index, w) in windows.iter().enumerate() {
            let from = w.start.as_secs_f64();
            if from >= limit {
                break;
            }
            let to = w.end.as_secs_f64().min(limit);
            let first =
                connection_requests_below(self.count_at(from), connection, connections).max(next);
            let end = connection_requests_below(self.count_at(to), connection, connections);
            if end <= first {
                continue;
            }
            let lowest_rate = self.rate_at(from).min(self.rate_at(to));
            pieces.push(UnsentPiece {
                window: index,
                first,
                count: end - first,
                max_gap_s: connections as f64 / lowest_rate,
            });
        }
        pieces
    }
}

/// How many requests `k = 0, 1, ...` lie strictly below `n` (requests due): `ceil(n)`, with a
/// little slack so that an `n` meant to be a whole number but computed a hair above it does not
/// count one more.
fn count_below(n: f64) -> u64 {
    let n = n - n.abs() * 1e-12 - 1e-9;
    if n <= 0.0 {
        0
    } else {
        n.ceil() as u64
    }
}

/// How many requests of connection `connection` (requests `connection + j * connections`) lie
/// strictly below `n` requests due.
fn connection_requests_below(n: f64, connection: u64, connections: u64) -> u64 {
    let below = count_below(n);
    if below <= connection {
        0
    } else {
        (below - connection).div_ceil(connections.max(1))
    }
}

/// Parses `RATE` or `FROM..TO`.
fn parse_rates(text: &str) -> Result<(f64, f64), String> {
    match text.split_once("..") {
        Some((from, to)) => {
            let (from, to) = (from.trim(), to.trim());
            if from.is_empty() || to.is_empty() {
                return Err(format!(
                    "the ramp {text} needs a rate at both ends, like 100..5000"
                ));
            }
            Ok((parse_rate(from)?, parse_rate(to)?))
        }
        None => {
            let rate = parse_rate(text)?;
            Ok((rate, rate))
        }
    }
}

fn parse_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a rate (requests/s, like 1000)"))?;
    check_rate(rate)?;
    Ok(rate)
}

fn check_rate(rate: f64) -> Result<(), String> {
    if rate.is_finite() && rate > 0.0 && rate <= MAX_PLAN_RATE {
        Ok(())
    } else {
        Err(format!(
            "a rate must be above 0 and at most {MAX_PLAN_RATE} requests/s, not {rate}"
        ))
    }
}

/// `10s`, `0.5s`: a duration as `-R` and `-d` accept it back.
fn seconds_text(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

/// The plan as `-R` would take it back: `1000` is not written so (it needs `-d`); a constant
/// plan is `1000@10s`, a ramp `100..5000@10s`.
impl fmt::Display for RatePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if s.is_constant() {
                write!(f, "{}@{}", s.from_rate, seconds_text(s.duration))?;
            } else {
                write!(
                    f,
                    "{}..{}@{}",
                    s.from_rate,
                    s.to_rate,
                    seconds_text(s.duration)
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_S: Duration = Duration::from_secs(10);

    fn plan(text: &str) -> RatePlan {
        RatePlan::parse(text, None, TEN_S).unwrap()
    }

    fn err(text: &str, duration: Option<Duration>) -> String {
        RatePlan::parse(text, duration, TEN_S).unwrap_err()
    }

    /// `T(k)` in whole nanoseconds (what the engine's `Instant`s hold).
    fn ns(p: &RatePlan, k: u64) -> u64 {
        (p.time_of(k) * 1e9).round() as u64
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn parses_a_rate_a_ramp_and_steps() {
        let c = RatePlan::parse("1000", Some(Duration::from_secs(3)), TEN_S).unwrap();
        assert_eq!(c, RatePlan::constant(1000.0, Duration::from_secs(3)));
        assert!(c.is_constant());
        assert_eq!(plan("250.5").duration(), TEN_S, "-d's default");
        let ramp = plan("100..5000");
        assert_eq!(
            ramp.segments(),
            [Segment {
                from_rate: 100.0,
                to_rate: 5000.0,
                duration: TEN_S
            }]
        );
        assert!(!ramp.is_constant());
        let steps = plan("1000@10s, 2000@10s,4000@500ms");
        assert_eq!(steps.segments().len(), 3);
        assert_eq!(steps.segments()[2].to_rate, 4000.0);
        assert_eq!(steps.duration(), Duration::from_millis(20_500));
        let mixed = plan("100..1000@30s,1000@10s");
        assert_eq!(mixed.duration(), Duration::from_secs(40));
        assert_eq!(mixed.to_string(), "100..1000@30s,1000@10s");
        assert_eq!(steps.to_string(), "1000@10s,2000@10s,4000@0.5s");
        // What Display writes parses back to the same plan.
        assert_eq!(plan(&steps.to_string()), steps);
    }

    #[test]
    fn steps_and_d_must_agree() {
        let sum = Duration::from_secs(20);
        assert_eq!(
            RatePlan::parse("1000@10s,2000@10s", Some(sum), TEN_S)
                .unwrap()
                .duration(),
            sum
        );
        let e = err("1000@10s,2000@10s", Some(Duration::from_secs(30)));
        assert_eq!(
            e,
            "the steps last 20s but -d says 30s; leave -d out (steps carry their own durations)"
        );
    }

    #[test]
    fn bad_plans_name_what_is_wrong() {
        for (text, expected) in [
            (
                "0",
                "a rate must be above 0 and at most 100000000 requests/s, not 0",
            ),
            ("-5", "a rate must be above 0"),
            ("inf", "not inf"),
            ("NaN", "not NaN"),
            ("1e9", "not 1000000000"),
            ("fast", "\"fast\" is not a rate"),
            ("5..", "the ramp 5.. needs a rate at both ends"),
            ("..5", "the ramp ..5 needs a rate at both ends"),
            ("1000..0", "a rate must be above 0"),
            ("0..1000", "a rate must be above 0"),
            (
                "1000@",
                "step 1 (1000@) needs a duration after @, like 1000@10s",
            ),
            (
                "1000@0s",
                "step 1 (1000@0s) lasts 0s; a step must last at least 10ms",
            ),
            ("1000@1ms", "a step must last at least 10ms"),
            ("1000@10s,2000", "step 2 (2000) has no duration"),
            ("1000@10s,,2000@1s", "step 2 is empty"),
            ("1000@10s,", "step 2 is empty"),
            ("1000@ten", "step 1: invalid duration"),
            ("0@1s", "step 1: a rate must be above 0"),
            ("1000@8d", "step 1: unknown unit"),
            ("1000@200h", "the plan lasts 720000s; at most 7 days"),
            ("", "empty"),
        ] {
            let e = err(text, None);
            assert!(e.contains(expected), "{text:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{text:?}: {e}");
        }
        let many = ["1..2@1s"; 11].join(",");
        assert_eq!(
            err(&many, None),
            "110 report steps (a ramp counts 10); at most 100"
        );
        assert!(RatePlan::parse(&["1@1s"; 100].join(","), None, TEN_S).is_ok());
    }

    #[test]
    fn constant_rate_matches_wrk2_phase_plus_j_intervals() {
        let p = RatePlan::constant(1000.0, TEN_S);
        assert_eq!(p.time_of(0), 0.0);
        assert_eq!(p.time_of(1), 0.001);
        assert_eq!(p.time_of(9999), 9.999);
        // Connection 1 of 4 at 1000/s: phase 1 ms, interval 4 ms; its request 2 at 9 ms.
        assert_eq!(p.connection_offset(1, 4, 2), Duration::from_millis(9));
        assert_eq!(p.total_requests(), 10_000.0);
        assert_eq!(p.mean_rate(), 1000.0);
    }

    #[test]
    fn steps_schedule_each_rate_for_its_time() {
        let p = plan("1000@10s,2000@10s,4000@10s");
        assert_eq!(p.total_requests(), 70_000.0);
        assert_eq!(ns(&p, 9_999), 9_999_000_000);
        assert_eq!(ns(&p, 10_000), 10_000_000_000);
        assert_eq!(ns(&p, 10_001), 10_000_500_000);
        assert_eq!(ns(&p, 29_999), 19_999_500_000);
        assert_eq!(ns(&p, 30_000), 20_000_000_000);
        assert_eq!(ns(&p, 30_004), 20_001_000_000);
        assert_eq!(ns(&p, 69_999), 29_999_750_000);
        // Past the end the last rate goes on (the engine stops at the deadline).
        assert_eq!(ns(&p, 70_000), 30_000_000_000);
        assert_eq!(ns(&p, 70_004), 30_001_000_000);
        // A request centuries away is as far as two of the longest plans.
        let slow = RatePlan::constant(1e-300, TEN_S);
        assert_eq!(slow.offset_of(1), 2 * MAX_PLAN_DURATION);
        assert_eq!(p.rate_at(5.0), 1000.0);
        assert_eq!(p.rate_at(10.0), 2000.0);
        assert_eq!(p.rate_at(29.0), 4000.0);
        assert_eq!(p.count_at(15.0), 20_000.0);
        assert_eq!(p.peak_rate(), 4000.0);
    }

    #[test]
    fn a_ramp_schedules_by_the_integral_of_its_rate() {
        // 100..300/s over 2 s: rate 100 + 100 t, N(t) = 100 t + 50 t^2, 400 requests.
        let p = plan("100..300@2s");
        assert_eq!(p.total_requests(), 400.0);
        assert_eq!(p.rate_at(0.5), 150.0);
        assert_eq!(p.count_at(1.0), 150.0);
        assert_eq!(p.time_of(0), 0.0);
        // 50 t^2 + 100 t = 150: t = 1.
        assert_eq!(p.time_of(150), 1.0);
        // = 250: t = -1 + sqrt(6).
        assert!(
            close(p.time_of(250), 6f64.sqrt() - 1.0),
            "{}",
            p.time_of(250)
        );
        // = 1: t = -1 + sqrt(1.02).
        assert!(
            close(p.time_of(1), 1.02f64.sqrt() - 1.0),
            "{}",
            p.time_of(1)
        );
        assert_eq!(p.time_of(400), 2.0);
        // Descending: 300..100 over 2 s, N(t) = 300 t - 50 t^2; = 150 at t = 3 - sqrt(6).
        let down = plan("300..100@2s");
        assert!(
            close(down.time_of(150), 3.0 - 6f64.sqrt()),
            "{}",
            down.time_of(150)
        );
        // = 399: 50 t^2 - 300 t + 399 = 0, t = 3 - sqrt(1.02).
        assert!(
            close(down.time_of(399), 3.0 - 1.02f64.sqrt()),
            "{}",
            down.time_of(399)
        );
        assert_eq!(down.time_of(400), 2.0);
    }

    #[test]
    fn time_of_inverts_count_at_and_never_goes_back() {
        let p = plan("100..5000@10s,5000@2s,5000..50@3s");
        let total = p.total_requests() as u64;
        let mut last = -1.0;
        for k in (0..total + 100).step_by(7) {
            let t = p.time_of(k);
            assert!(t > last, "T({k}) = {t} after {last}");
            last = t;
            assert!(
                (p.count_at(t) - k as f64).abs() < 1e-6,
                "N(T({k})) = {}",
                p.count_at(t)
            );
        }
    }

    #[test]
    fn a_ramp_reports_ten_slices_and_steps_one_row_each() {
        let p = plan("100..300@2s");
        let w = p.windows();
        assert_eq!(w.len(), 10);
        assert_eq!(w[0].start, Duration::ZERO);
        assert_eq!(w[0].end, Duration::from_millis(200));
        assert_eq!(w[9].end, Duration::from_secs(2));
        assert_eq!((w[0].from_rate, w[0].to_rate), (100.0, 120.0));
        assert!(close(w[0].target_rate(), 110.0));
        // Slice i holds 20 + 2 (2i + 1) requests: 22, 26, ..., 58.
        let scheduled: Vec<u64> = w.iter().map(|w| w.scheduled).collect();
        assert_eq!(scheduled, [22, 26, 30, 34, 38, 42, 46, 50, 54, 58]);
        let steps = plan("200@1s,400@1s").windows();
        assert_eq!(steps.len(), 2);
        assert_eq!(
            steps[1],
            StepWindow {
                start: Duration::from_secs(1),
                end: Duration::from_secs(2),
                from_rate: 400.0,
                to_rate: 400.0,
                scheduled: 400
            }
        );
        assert_eq!(steps[0].scheduled, 200);
        assert_eq!(RatePlan::constant(3.0, TEN_S).windows().len(), 1);
    }

    #[test]
    fn due_before_counts_one_connections_requests() {
        // 200/s then 400/s, 2 connections: connection 1 has the odd requests, 1..599.
        let p = plan("200@1s,400@1s");
        assert_eq!(p.due_before(1, 2, 0, 1.0), 100);
        assert_eq!(p.due_before(1, 2, 0, 2.0), 300);
        assert_eq!(p.due_before(1, 2, 40, 2.0), 260);
        assert_eq!(p.due_before(0, 2, 0, 0.0), 0);
        // Request 0 is due at 0: strictly before 1 ns, one.
        assert_eq!(p.due_before(0, 2, 0, 1e-9), 1);
        assert_eq!(p.due_before(1, 2, 400, 2.0), 0);
        // A connection's numbering: request j of connection c is c + j C.
        assert_eq!(p.connection_offset(1, 2, 99), Duration::from_millis(995));
        assert_eq!(
            p.connection_offset(1, 2, 100),
            Duration::from_secs(1) + Duration::from_micros(2500)
        );
    }

    #[test]
    fn unsent_requests_are_cut_by_report_step() {
        let p = plan("200@1s,400@1s");
        let w = p.windows();
        // Connection 1 of 2 sent up to its request 90 (k = 181, at 905 ms); the run ended at 2 s.
        let pieces = p.unsent_pieces(&w, 1, 2, 90, 2.0);
        assert_eq!(
            pieces,
            [
                UnsentPiece {
                    window: 0,
                    first: 90,
                    count: 10,
                    max_gap_s: 0.01
                },
                UnsentPiece {
                    window: 1,
                    first: 100,
                    count: 200,
                    max_gap_s: 0.005
                },
            ]
        );
        let total: u64 = pieces.iter().map(|p| p.count).sum();
        assert_eq!(total, p.due_before(1, 2, 90, 2.0));
        // Cut at a limit inside the second step.
        let cut = p.unsent_pieces(&w, 1, 2, 90, 1.5);
        assert_eq!(cut[1].count, 100);
        // On a ramp the gap is the one at the slice's lowest rate.
        let ramp = plan("100..300@2s");
        let rw = ramp.windows();
        let pieces = ramp.unsent_pieces(&rw, 0, 4, 0, 2.0);
        assert_eq!(pieces.len(), 10);
        assert!(close(pieces[0].max_gap_s, 0.04));
        assert!(close(pieces[9].max_gap_s, 4.0 / 280.0));
        assert_eq!(pieces.iter().map(|p| p.count).sum::<u64>(), 100);
    }

    #[test]
    fn scaling_multiplies_every_rate() {
        let p = plan("100..300@2s,1000@1s").scaled(0.25);
        assert_eq!(p.segments()[0].from_rate, 25.0);
        assert_eq!(p.segments()[1].to_rate, 250.0);
        assert_eq!(p.duration(), Duration::from_secs(3));
    }
}
