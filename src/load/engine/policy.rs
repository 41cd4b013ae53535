//! When a connection may send, per mode: the [`SendPolicy`].
//!
//! - closed loop: a new batch as soon as the last one is answered;
//! - fixed count: the same, while this worker's share of tickets lasts; every ticket ends as
//!   exactly one response or one failure. A connection takes a ticket when it starts to
//!   connect (so `--no-keepalive -n N` opens exactly N connections), spends it with its first
//!   send, and gives it back if it closes before sending;
//! - constant rate (wrk2's model): request k of a connection is due at `phase + k * interval`,
//!   its latency is measured from that intended time, and a connection still waiting for an
//!   answer sends late rather than skipping.
//!
//! The policy only decides; it owns no socket, so all of this is tested here without one. Each
//! connection carries its [`Schedule`] (its ticket and its next intended send time). A load
//! plan (a rate that changes over time) is another policy: it decides `Send(n)` and the intended
//! times from the same per-connection schedule.

use std::time::{Duration, Instant};

use crate::load::Mode;

/// When a connection may send; one per worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SendPolicy {
    /// A new batch as soon as the previous one is answered.
    Closed,
    /// Like closed, while tickets last; `tickets_left` are requests not yet sent (or failed),
    /// not counting tickets held by connections.
    Count { tickets_left: u64 },
    /// Request k of a connection is due at its phase plus k intervals.
    Rate { interval: Duration },
}

/// A connection's part of the policy's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Count mode: a ticket taken when connecting, spent by the first send.
    pub holds_ticket: bool,
    /// Rate mode: when this connection's next request is due.
    pub next_intended: Instant,
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

impl SendPolicy {
    /// The policy of `mode` for a worker with `requests` tickets (count mode) in a run of
    /// `total_connections` connections (rate mode: each sends at `rate / total_connections`).
    pub fn new(mode: &Mode, requests: Option<u64>, total_connections: usize) -> SendPolicy {
        match *mode {
            Mode::Closed { .. } => SendPolicy::Closed,
            Mode::Count { .. } => SendPolicy::Count {
                tickets_left: requests.unwrap_or(0),
            },
            Mode::Rate { rate, .. } => SendPolicy::Rate {
                interval: Duration::from_secs_f64(total_connections as f64 / rate),
            },
        }
    }

    /// Sends are paced by intended times (rate mode): latency is measured from them, the
    /// worker needs precise timers, and there is an uncorrected latency view.
    pub fn is_paced(&self) -> bool {
        matches!(self, SendPolicy::Rate { .. })
    }

    /// The schedule of connection `index` of `total` (global numbers): in rate mode the
    /// connections' phases spread evenly over one interval from `start`.
    pub fn schedule(&self, start: Instant, index: usize, total: usize) -> Schedule {
        let phase = match self {
            SendPolicy::Rate { interval } => interval.mul_f64(index as f64 / total as f64),
            _ => Duration::ZERO,
        };
        Schedule {
            holds_ticket: false,
            next_intended: start + phase,
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
            SendPolicy::Rate { interval } => {
                let room = pipeline.saturating_sub(in_flight);
                let mut due = 0;
                let mut next = schedule.next_intended;
                while due < room && next <= now && before(deadline, next) {
                    due += 1;
                    next += *interval;
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
    /// its schedule's next time (which moves on by one interval), otherwise `now`.
    #[inline]
    pub fn intended(&self, schedule: &mut Schedule, now: Instant) -> Instant {
        match self {
            SendPolicy::Rate { interval } => {
                let intended = schedule.next_intended;
                schedule.next_intended += *interval;
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
    /// sent, as (count, interval); none in the other modes.
    pub fn unsent(&self, schedule: &Schedule, limit: Instant) -> Option<(u64, Duration)> {
        match self {
            SendPolicy::Rate { interval } => {
                let count = due_before(schedule.next_intended, limit, *interval);
                (count > 0).then_some((count, *interval))
            }
            _ => None,
        }
    }
}

fn before(deadline: Option<Instant>, t: Instant) -> bool {
    deadline.is_none_or(|d| t < d)
}

/// How many requests of a schedule `next, next + interval, ...` are due strictly before `limit`.
pub fn due_before(next: Instant, limit: Instant, interval: Duration) -> u64 {
    if next >= limit || interval.is_zero() {
        return 0;
    }
    let span = (limit - next).as_nanos();
    ((span - 1) / interval.as_nanos() + 1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn count(tickets: u64) -> SendPolicy {
        SendPolicy::new(&Mode::Count { requests: 0 }, Some(tickets), 1)
    }

    fn fresh(policy: &SendPolicy, start: Instant) -> Schedule {
        policy.schedule(start, 0, 1)
    }

    #[test]
    fn closed_sends_a_full_batch_only_when_nothing_is_in_flight() {
        let now = Instant::now();
        let mut p = SendPolicy::new(&Mode::Closed { duration: MS(1) }, None, 4);
        let mut s = fresh(&p, now);
        assert!(p.may_connect(&mut s));
        assert_eq!(p.decide(&mut s, 0, 3, now, None), Decision::Send(3));
        assert_eq!(p.decide(&mut s, 1, 3, now, None), Decision::Wait);
        assert_eq!(p.intended(&mut s, now), now);
        assert_eq!(p.next_due(&s, 0, 3, None), None);
        assert!(!p.tickets_gone());
        assert_eq!(p.unsent(&s, now + MS(10)), None);
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
    fn rate_phases_spread_over_one_interval() {
        let start = Instant::now();
        let p = SendPolicy::new(
            &Mode::Rate {
                rate: 100.0,
                duration: MS(1000),
            },
            None,
            4,
        );
        assert_eq!(p, SendPolicy::Rate { interval: MS(40) });
        assert!(p.is_paced());
        let phases: Vec<Duration> = (0..4)
            .map(|i| p.schedule(start, i, 4).next_intended - start)
            .collect();
        assert_eq!(phases, vec![MS(0), MS(10), MS(20), MS(30)]);
    }

    #[test]
    fn rate_sends_what_is_due_within_the_pipeline_and_before_the_deadline() {
        let start = Instant::now();
        let mut p = SendPolicy::Rate { interval: MS(10) };
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
        // Sending moves the schedule on by one interval per request, from intended times.
        assert_eq!(p.intended(&mut s, start + MS(35)), start);
        assert_eq!(p.intended(&mut s, start + MS(35)), start + MS(10));
        assert_eq!(s.next_intended, start + MS(20));
        assert_eq!(p.decide(&mut s, 0, 1, start + MS(15), None), Decision::Wait);
        assert_eq!(p.next_due(&s, 0, 1, None), Some(start + MS(20)));
        assert_eq!(p.next_due(&s, 1, 1, None), None, "pipeline full");
        assert_eq!(p.next_due(&s, 0, 1, deadline), None, "due at the deadline");
        assert_eq!(p.unsent(&s, start + MS(45)), Some((3, MS(10))));
        assert_eq!(p.unsent(&s, start + MS(20)), None);
    }

    #[test]
    fn due_before_counts_the_schedule_strictly_before_the_limit() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(due_before(t, t, ms(1)), 0);
        assert_eq!(due_before(t + ms(5), t, ms(1)), 0);
        assert_eq!(due_before(t, t + ms(1), ms(1)), 1);
        assert_eq!(due_before(t, t + ms(10), ms(1)), 10);
        assert_eq!(
            due_before(t, t + ms(10) + Duration::from_nanos(1), ms(1)),
            11
        );
        assert_eq!(due_before(t, t + ms(10), Duration::ZERO), 0);
    }
}
