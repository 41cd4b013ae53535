//! When a connection may send, per mode: the [`SendPolicy`] (closed loop, fixed count, rate),
//! and each connection's [`Schedule`] (its ticket, its place in the plan and its next intended
//! send time). The policy only decides and owns no socket, so all of it is tested here without
//! one; the plan it follows is `source::plan`'s.

use std::time::{Duration, Instant};

use crate::load::source::plan::{RatePlan, StepWindow};
use crate::load::Mode;

/// When a connection may send; one per worker.
///
/// - closed loop: a new batch as soon as the last one is answered;
/// - fixed count: the same, while this worker's share of tickets lasts; every ticket ends as
///   exactly one response or one failure. A connection takes a ticket when it starts to
///   connect (so `--no-keepalive -n N` opens exactly N connections), spends it with its first
///   send, and gives it back if it closes before sending;
/// - rate (wrk2's model, generalized to load plans): every request has an intended send time
///   from the run's [`RatePlan`] (request `k` of the run is due when the integral of the rate
///   reaches `k`; connection `c` of `C` sends requests `c, c + C, ...`, so at a constant rate
///   its request `j` is due at `phase + j * interval`); its latency is measured from that
///   intended time, and a connection still waiting for an answer sends late rather than
///   skipping. A constant rate is a plan of one step, so ramps and steps need nothing else.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SendPolicy<'p> {
    /// A new batch as soon as the previous one is answered.
    Closed,
    /// Like closed, while tickets last; `tickets_left` are requests not yet sent (or failed),
    /// not counting tickets held by connections.
    Count { tickets_left: u64 },
    /// Request `j` of connection `c` is due at `start + T(c + j * connections)` of `plan`.
    Rate {
        plan: &'p RatePlan,
        start: Instant,
        connections: u64,
    },
}

/// A connection's part of the policy's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Count mode: a ticket taken when connecting, spent by the first send.
    pub holds_ticket: bool,
    /// Rate mode: when this connection's next request is due.
    pub next_intended: Instant,
    /// Rate mode: the connection's number in the whole run.
    pub connection: u64,
    /// Rate mode: the connection's request number (`j`) of `next_intended`.
    pub next: u64,
}

/// Requests of one connection that were due and never sent, in one report step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsent {
    /// The report step ([`RatePlan::windows`]).
    pub window: usize,
    /// When the oldest was due.
    pub oldest: Instant,
    /// At least the gap between two of them (so a fill down from the oldest stays below
    /// every true age).
    pub step: Duration,
    pub count: u64,
}

/// What a connection that may write should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to send now.
    Wait,
    /// Send this many requests as one batch.
    Send(usize),
    /// Nothing more to send ever (count mode ran out of tickets): close the connection.
    Finish,
}

impl<'p> SendPolicy<'p> {
    /// The policy of `mode` for a worker with `requests` tickets (count mode); rate mode
    /// follows `rate_plan` from `start` over the run's `total_connections` connections.
    pub fn new(
        mode: &Mode,
        rate_plan: Option<&'p RatePlan>,
        requests: Option<u64>,
        total_connections: usize,
        start: Instant,
    ) -> SendPolicy<'p> {
        match *mode {
            Mode::Closed { .. } => SendPolicy::Closed,
            Mode::Count { .. } => SendPolicy::Count {
                tickets_left: requests.unwrap_or(0),
            },
            Mode::Rate { .. } => SendPolicy::Rate {
                plan: rate_plan.expect("a rate-mode run has its plan (RunPlan::rate_plan)"),
                start,
                connections: total_connections.max(1) as u64,
            },
        }
    }

    /// Sends are paced by intended times (rate mode): latency is measured from them, the
    /// worker needs precise timers, and there is an uncorrected latency view.
    pub fn is_paced(&self) -> bool {
        matches!(self, SendPolicy::Rate { .. })
    }

    /// The schedule of connection `index` (its global number): in rate mode its first request
    /// is request `index` of the run, so at a constant rate the connections' phases spread
    /// evenly over one interval from the start.
    pub fn schedule(&self, start: Instant, index: usize) -> Schedule {
        let connection = index as u64;
        let next_intended = match self {
            SendPolicy::Rate {
                plan,
                start,
                connections,
            } => *start + plan.connection_offset(connection, *connections, 0),
            _ => start,
        };
        Schedule {
            holds_ticket: false,
            next_intended,
            connection,
            next: 0,
        }
    }

    /// Rate mode: when request `j` of the schedule's connection is due.
    #[inline]
    fn due_at(&self, schedule: &Schedule, j: u64) -> Instant {
        match self {
            SendPolicy::Rate {
                plan,
                start,
                connections,
            } => *start + plan.connection_offset(schedule.connection, *connections, j),
            _ => schedule.next_intended,
        }
    }

    /// May this connection start to connect? Count mode: only holding a ticket (taken now if
    /// it has none); `false` means the worker's tickets are gone.
    pub fn may_connect(&mut self, schedule: &mut Schedule) -> bool {
        if let SendPolicy::Count { tickets_left } = self {
            if !schedule.holds_ticket {
                if *tickets_left == 0 {
                    return false;
                }
                *tickets_left -= 1;
                schedule.holds_ticket = true;
            }
        }
        true
    }

    /// A connect attempt failed: the ticket it held ends there, counted as a connect failure.
    pub fn connect_failed(&mut self, schedule: &mut Schedule) {
        schedule.holds_ticket = false;
    }

    /// The connection closed: a ticket it still holds (it never sent) goes back to the pool.
    pub fn closed(&mut self, schedule: &mut Schedule) {
        if schedule.holds_ticket {
            schedule.holds_ticket = false;
            if let SendPolicy::Count { tickets_left } = self {
                *tickets_left += 1;
            }
        }
    }

    /// What an open connection with `in_flight` requests unanswered (at most `pipeline`) sends
    /// at `now`. Count mode takes the tickets of what it sends here; rate mode sends only
    /// requests due by `now` and before the `deadline`.
    pub fn decide(
        &mut self,
        schedule: &mut Schedule,
        in_flight: usize,
        pipeline: usize,
        now: Instant,
        deadline: Option<Instant>,
    ) -> Decision {
        match self {
            SendPolicy::Closed => {
                if in_flight == 0 {
                    Decision::Send(pipeline)
                } else {
                    Decision::Wait
                }
            }
            SendPolicy::Count { tickets_left } => {
                if in_flight != 0 {
                    return Decision::Wait;
                }
                let held = u64::from(schedule.holds_ticket);
                let count = (*tickets_left + held).min(pipeline as u64);
                if count == 0 {
                    return Decision::Finish;
                }
                *tickets_left -= count - held;
                schedule.holds_ticket = false;
                Decision::Send(count as usize)
            }
            SendPolicy::Rate { .. } => {
                let room = pipeline.saturating_sub(in_flight);
                let mut due = 0;
                let mut next = schedule.next_intended;
                while due < room && next <= now && before(deadline, next) {
                    due += 1;
                    next = self.due_at(schedule, schedule.next + due as u64);
                }
                if due > 0 {
                    Decision::Send(due)
                } else {
                    Decision::Wait
                }
            }
        }
    }

    /// The intended send time of the next request the connection sends at `now`: in rate mode
    /// its schedule's next time (which moves on to the connection's next request), otherwise
    /// `now`.
    #[inline]
    pub fn intended(&self, schedule: &mut Schedule, now: Instant) -> Instant {
        match self {
            SendPolicy::Rate { .. } => {
                let intended = schedule.next_intended;
                schedule.next += 1;
                schedule.next_intended = self.due_at(schedule, schedule.next);
                intended
            }
            _ => now,
        }
    }

    /// Rate mode: when an open connection with room in its pipeline must be woken to send its
    /// next request (none past the deadline). Other modes send on answers, never on timers.
    pub fn next_due(
        &self,
        schedule: &Schedule,
        in_flight: usize,
        pipeline: usize,
        deadline: Option<Instant>,
    ) -> Option<Instant> {
        match self {
            SendPolicy::Rate { .. }
                if in_flight < pipeline && before(deadline, schedule.next_intended) =>
            {
                Some(schedule.next_intended)
            }
            _ => None,
        }
    }

    /// Count mode: every ticket is taken (held or spent), so the worker ends once no
    /// connection holds one and nothing is in flight. Never true in the other modes.
    pub fn tickets_gone(&self) -> bool {
        matches!(self, SendPolicy::Count { tickets_left: 0 })
    }

    /// Rate mode: the requests of `schedule` that were due strictly before `limit` and never
    /// sent, cut by the report steps `windows` (of the policy's plan); none in other modes.
    pub fn unsent(
        &self,
        schedule: &Schedule,
        limit: Instant,
        windows: &[StepWindow],
    ) -> Vec<Unsent> {
        let SendPolicy::Rate {
            plan,
            start,
            connections,
        } = self
        else {
            return Vec::new();
        };
        let limit_s = limit.saturating_duration_since(*start).as_secs_f64();
        plan.unsent_pieces(
            windows,
            schedule.connection,
            *connections,
            schedule.next,
            limit_s,
        )
        .into_iter()
        .map(|piece| Unsent {
            window: piece.window,
            oldest: self.due_at(schedule, piece.first),
            step: Duration::try_from_secs_f64(piece.max_gap_s).unwrap_or(Duration::MAX),
            count: piece.count,
        })
        .collect()
    }
}

fn before(deadline: Option<Instant>, t: Instant) -> bool {
    deadline.is_none_or(|d| t < d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn count(tickets: u64) -> SendPolicy<'static> {
        SendPolicy::new(
            &Mode::Count { requests: 0 },
            None,
            Some(tickets),
            1,
            Instant::now(),
        )
    }

    /// Rate mode on `plan` over `senders` connections.
    fn rate(plan: &RatePlan, senders: usize, start: Instant) -> SendPolicy<'_> {
        let mode = Mode::Rate {
            rate: plan.mean_rate(),
            duration: plan.duration(),
        };
        SendPolicy::new(&mode, Some(plan), None, senders, start)
    }

    fn fresh(policy: &SendPolicy, start: Instant) -> Schedule {
        policy.schedule(start, 0)
    }

    #[test]
    fn closed_sends_a_full_batch_only_when_nothing_is_in_flight() {
        let now = Instant::now();
        let mut p = SendPolicy::new(&Mode::Closed { duration: MS(1) }, None, None, 4, now);
        let mut s = fresh(&p, now);
        assert!(p.may_connect(&mut s));
        assert_eq!(p.decide(&mut s, 0, 3, now, None), Decision::Send(3));
        assert_eq!(p.decide(&mut s, 1, 3, now, None), Decision::Wait);
        assert_eq!(p.intended(&mut s, now), now);
        assert_eq!(p.next_due(&s, 0, 3, None), None);
        assert!(!p.tickets_gone());
        assert_eq!(p.unsent(&s, now + MS(10), &[]), []);
    }

    #[test]
    fn count_tickets_are_taken_on_connect_and_spent_by_the_first_send() {
        let now = Instant::now();
        let mut p = count(2);
        let mut a = fresh(&p, now);
        let mut b = fresh(&p, now);
        assert!(p.may_connect(&mut a));
        assert!(a.holds_ticket);
        assert_eq!(p, SendPolicy::Count { tickets_left: 1 });
        // Connecting again (a reconnect) with a ticket in hand takes no other.
        assert!(p.may_connect(&mut a));
        assert_eq!(p, SendPolicy::Count { tickets_left: 1 });
        assert!(p.may_connect(&mut b));
        assert_eq!(p, SendPolicy::Count { tickets_left: 0 });
        assert!(p.tickets_gone());
        let mut c = fresh(&p, now);
        assert!(
            !p.may_connect(&mut c),
            "no ticket left for a third connection"
        );
        // Pipelined: the held ticket and no more (the pool is empty).
        assert_eq!(p.decide(&mut a, 0, 4, now, None), Decision::Send(1));
        assert!(!a.holds_ticket);
        assert_eq!(p.decide(&mut a, 0, 4, now, None), Decision::Finish);
        assert_eq!(p.decide(&mut b, 1, 4, now, None), Decision::Wait);
        assert!(b.holds_ticket, "waiting does not spend the ticket");
    }

    #[test]
    fn count_batches_take_as_many_tickets_as_they_send() {
        let now = Instant::now();
        let mut p = count(10);
        let mut s = fresh(&p, now);
        assert!(p.may_connect(&mut s));
        assert_eq!(p.decide(&mut s, 0, 4, now, None), Decision::Send(4));
        assert_eq!(p, SendPolicy::Count { tickets_left: 6 });
        assert_eq!(p.decide(&mut s, 0, 4, now, None), Decision::Send(4));
        assert_eq!(p.decide(&mut s, 0, 4, now, None), Decision::Send(2));
        assert_eq!(p, SendPolicy::Count { tickets_left: 0 });
        assert_eq!(p.decide(&mut s, 0, 4, now, None), Decision::Finish);
    }

    #[test]
    fn count_tickets_come_back_on_close_and_end_on_connect_failure() {
        let now = Instant::now();
        let mut p = count(2);
        let mut s = fresh(&p, now);
        assert!(p.may_connect(&mut s));
        p.closed(&mut s);
        assert!(!s.holds_ticket);
        assert_eq!(
            p,
            SendPolicy::Count { tickets_left: 2 },
            "closed before sending"
        );
        assert!(p.may_connect(&mut s));
        p.connect_failed(&mut s);
        p.closed(&mut s);
        assert_eq!(
            p,
            SendPolicy::Count { tickets_left: 1 },
            "a failed connect uses its ticket up"
        );
        // A connection that sent holds nothing, so closing it gives nothing back.
        assert!(p.may_connect(&mut s));
        assert_eq!(p.decide(&mut s, 0, 1, now, None), Decision::Send(1));
        p.closed(&mut s);
        assert_eq!(p, SendPolicy::Count { tickets_left: 0 });
        assert!(p.tickets_gone());
    }

    #[test]
    fn a_constant_rate_spreads_phases_over_one_interval() {
        let start = Instant::now();
        let plan = RatePlan::constant(100.0, MS(1000));
        let mut p = rate(&plan, 4, start);
        assert!(p.is_paced());
        let phases: Vec<Duration> = (0..4)
            .map(|i| p.schedule(start, i).next_intended - start)
            .collect();
        assert_eq!(phases, vec![MS(0), MS(10), MS(20), MS(30)]);
        // Connection 1 then sends every 40 ms (4 connections at 100/s): wrk2's schedule.
        let mut s = p.schedule(start, 1);
        assert_eq!(
            p.decide(&mut s, 0, 1, start + MS(10), None),
            Decision::Send(1)
        );
        let sent: Vec<Duration> = (0..3).map(|_| p.intended(&mut s, start) - start).collect();
        assert_eq!(sent, vec![MS(10), MS(50), MS(90)]);
        assert_eq!(s.next_intended - start, MS(130));
    }

    #[test]
    fn rate_sends_what_is_due_within_the_pipeline_and_before_the_deadline() {
        let start = Instant::now();
        let plan = RatePlan::constant(100.0, MS(1000));
        let mut p = rate(&plan, 1, start);
        let mut s = fresh(&p, start);
        assert_eq!(p.decide(&mut s, 0, 1, start, None), Decision::Send(1));
        // Late by 35 ms: four requests are due, the pipeline has room for two.
        assert_eq!(
            p.decide(&mut s, 0, 2, start + MS(35), None),
            Decision::Send(2)
        );
        assert_eq!(
            p.decide(&mut s, 1, 8, start + MS(35), None),
            Decision::Send(4)
        );
        assert_eq!(p.decide(&mut s, 2, 2, start + MS(35), None), Decision::Wait);
        let deadline = Some(start + MS(20));
        assert_eq!(
            p.decide(&mut s, 0, 8, start + MS(35), deadline),
            Decision::Send(2)
        );
        // Sending moves the schedule on by one request each, from intended times.
        assert_eq!(p.intended(&mut s, start + MS(35)), start);
        assert_eq!(p.intended(&mut s, start + MS(35)), start + MS(10));
        assert_eq!(s.next_intended, start + MS(20));
        assert_eq!(s.next, 2);
        assert_eq!(p.decide(&mut s, 0, 1, start + MS(15), None), Decision::Wait);
        assert_eq!(p.next_due(&s, 0, 1, None), Some(start + MS(20)));
        assert_eq!(p.next_due(&s, 1, 1, None), None, "pipeline full");
        assert_eq!(p.next_due(&s, 0, 1, deadline), None, "due at the deadline");
        let windows = plan.windows();
        assert_eq!(
            p.unsent(&s, start + MS(45), &windows),
            [Unsent {
                window: 0,
                oldest: start + MS(20),
                step: MS(10),
                count: 3
            }]
        );
        assert_eq!(p.unsent(&s, start + MS(20), &windows), []);
    }

    #[test]
    fn steps_change_the_rate_at_their_boundary() {
        // 2 connections, 200/s for 1 s then 400/s: connection 1 has requests 1, 3, 5, ...
        let start = Instant::now();
        let plan = RatePlan::parse("200@1s,400@1s", None, MS(1)).unwrap();
        let mut p = rate(&plan, 2, start);
        let mut s = p.schedule(start, 1);
        assert_eq!(s.next_intended - start, MS(5));
        // Its request 99 is request 199 of the run, the last at 200/s (995 ms); request 100
        // is request 201, the second of the 400/s step: 1 s + 2.5 ms.
        s.next = 99;
        s.next_intended = start + plan.connection_offset(1, 2, 99);
        assert_eq!(s.next_intended - start, MS(995));
        let late = start + MS(1013);
        assert_eq!(p.decide(&mut s, 0, 8, late, None), Decision::Send(4));
        let due: Vec<Duration> = (0..4).map(|_| p.intended(&mut s, late) - start).collect();
        assert_eq!(
            due,
            vec![
                MS(995),
                Duration::from_micros(1_002_500),
                Duration::from_micros(1_007_500),
                Duration::from_micros(1_012_500)
            ]
        );
        // Never sent after that, with the run over at 2 s: what was due in each step.
        let windows = plan.windows();
        let unsent = p.unsent(&s, start + MS(2000), &windows);
        assert_eq!(
            unsent,
            [Unsent {
                window: 1,
                oldest: start + Duration::from_micros(1_017_500),
                step: MS(5),
                count: 197
            }]
        );
        // From request 10 on: 90 in the first step, every 10 ms, then the second step's 200.
        s.next = 10;
        let unsent = p.unsent(&s, start + MS(2000), &windows);
        assert_eq!(unsent.len(), 2);
        assert_eq!(
            (unsent[0].window, unsent[0].count, unsent[0].step),
            (0, 90, MS(10))
        );
        assert_eq!(unsent[0].oldest - start, MS(105));
        assert_eq!((unsent[1].window, unsent[1].count), (1, 200));
    }
}
