//! A worker's timers: the [`Wakeups`] heap (reconnects after a failed connect, rate-mode sends),
//! the [`PreciseTimer`] that wakes the poll at the earliest of them to the nanosecond, and the
//! [`TimeoutSweep`] that looks for requests older than the timeout every so often.
//!
//! epoll's own timeout is whole milliseconds, which would send up to 1 ms late in rate mode
//! and charge that to the server; a timerfd registered in the same poll is exact.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};

/// Per-connection wakeups, earliest first. A connection has at most one live wakeup (its
/// earliest); later or replaced heap entries are stale and skipped when they come up.
#[derive(Debug)]
pub struct Wakeups {
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
    /// The live wakeup of each connection slot.
    at: Vec<Option<Instant>>,
}

impl Wakeups {
    pub fn new(slots: usize) -> Wakeups {
        Wakeups {
            heap: BinaryHeap::new(),
            at: vec![None; slots],
        }
    }

    /// Wakes `slot` at `at`, unless it is already to be woken earlier.
    pub fn schedule(&mut self, slot: usize, at: Instant) {
        let current = &mut self.at[slot];
        if current.is_none_or(|current| at < current) {
            *current = Some(at);
            self.heap.push(Reverse((at, slot)));
        }
    }

    /// The earliest entry (possibly stale: waking early for it is harmless).
    pub fn earliest(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// The next slot whose live wakeup is due by `now`, which stops being pending.
    pub fn pop_due(&mut self, now: Instant) -> Option<usize> {
        while let Some(Reverse((at, slot))) = self.heap.peek().copied() {
            if at > now {
                return None;
            }
            self.heap.pop();
            if self.at[slot] == Some(at) {
                self.at[slot] = None;
                return Some(slot);
            }
        }
        None
    }

    /// `slot` has a wakeup coming.
    pub fn pending(&self, slot: usize) -> bool {
        self.at[slot].is_some()
    }
}

/// A one-shot nanosecond timer registered in the worker's poll under its own token.
pub struct PreciseTimer {
    timer: TimerFd,
    /// When it is set to fire.
    armed_for: Option<Instant>,
}

impl PreciseTimer {
    pub fn new(registry: &Registry, token: Token) -> io::Result<PreciseTimer> {
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        registry.register(
            &mut SourceFd(&timer.as_fd().as_raw_fd()),
            token,
            Interest::READABLE,
        )?;
        Ok(PreciseTimer {
            timer,
            armed_for: None,
        })
    }

    /// Sets the timer to fire by `at` unless it already does (it is armed for a time after
    /// `now` and no later than `at`: with rate mode's slack, one arming serves every send due
    /// before it fires); past times need no timer (the poll does not wait). A failure to arm
    /// only costs precision.
    pub fn arm(&mut self, at: Instant, now: Instant) {
        if at <= now || self.armed_for.is_some_and(|t| t > now && t <= at) {
            return;
        }
        let delay = TimeSpec::from_duration(at - now);
        if self
            .timer
            .set(Expiration::OneShot(delay), TimerSetTimeFlags::empty())
            .is_ok()
        {
            self.armed_for = Some(at);
        }
    }

    /// Its event came: it is no longer armed.
    pub fn fired(&mut self) {
        self.armed_for = None;
        // Non-blocking: clears the expiration; EAGAIN if it was already read.
        let _ = self.timer.wait();
    }
}

/// Every `every`, the worker looks for requests and connects older than the timeout.
#[derive(Debug, Clone, Copy)]
pub struct TimeoutSweep {
    every: Duration,
    next: Instant,
}

/// The longest the loop sleeps, so a stop request is noticed promptly.
pub const MAX_POLL_WAIT: Duration = Duration::from_millis(50);

impl TimeoutSweep {
    /// Sweeps ten times per timeout, between every 1 ms and every `MAX_POLL_WAIT`.
    pub fn new(timeout: Duration, now: Instant) -> TimeoutSweep {
        let every = (timeout / 10).clamp(Duration::from_millis(1), MAX_POLL_WAIT);
        TimeoutSweep {
            every,
            next: now + every,
        }
    }

    /// When the next sweep is due.
    pub fn next(&self) -> Instant {
        self.next
    }

    /// Is a sweep due at `now`? If so, the next one is `every` later.
    pub fn due(&mut self, now: Instant) -> bool {
        if now >= self.next {
            self.next = now + self.every;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakeups_keep_the_earliest_per_slot_and_skip_stale_entries() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut w = Wakeups::new(3);
        w.schedule(0, t + ms(5));
        w.schedule(1, t + ms(3));
        w.schedule(0, t + ms(2)); // earlier: replaces slot 0's wakeup
        w.schedule(0, t + ms(9)); // later: ignored
        assert!(w.pending(0) && w.pending(1) && !w.pending(2));
        assert_eq!(w.earliest(), Some(t + ms(2)));
        assert_eq!(w.pop_due(t + ms(1)), None);
        assert_eq!(w.pop_due(t + ms(10)), Some(0));
        assert_eq!(w.pop_due(t + ms(10)), Some(1));
        assert_eq!(w.pop_due(t + ms(10)), None, "slot 0's 5 ms entry was stale");
        assert!(!w.pending(0) && !w.pending(1));
    }

    /// With slack, the timer armed for a send serves every later send due by then: it is
    /// re-armed only for an earlier time (or once it has fired).
    #[test]
    fn the_timer_is_armed_again_only_for_an_earlier_time() {
        let poll = mio::Poll::new().unwrap();
        let mut timer = PreciseTimer::new(poll.registry(), Token(7)).unwrap();
        let now = Instant::now();
        let ms = Duration::from_millis;
        timer.arm(now + ms(10), now);
        assert_eq!(timer.armed_for, Some(now + ms(10)));
        timer.arm(now + ms(12), now);
        assert_eq!(
            timer.armed_for,
            Some(now + ms(10)),
            "fires early enough already"
        );
        timer.arm(now + ms(4), now);
        assert_eq!(timer.armed_for, Some(now + ms(4)), "re-armed earlier");
        timer.arm(now, now);
        assert_eq!(
            timer.armed_for,
            Some(now + ms(4)),
            "a past time needs no timer"
        );
        // Once its time has passed it counts as fired: the next send arms it again.
        timer.arm(now + ms(20), now + ms(5));
        assert_eq!(timer.armed_for, Some(now + ms(20)));
    }

    #[test]
    fn the_sweep_runs_a_tenth_of_the_timeout_apart_within_bounds() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut s = TimeoutSweep::new(ms(200), t);
        assert_eq!(s.next(), t + ms(20));
        assert!(!s.due(t + ms(19)));
        assert!(s.due(t + ms(21)));
        assert_eq!(s.next(), t + ms(41));
        assert_eq!(TimeoutSweep::new(ms(5), t).next(), t + ms(1));
        assert_eq!(TimeoutSweep::new(ms(5000), t).next(), t + MAX_POLL_WAIT);
    }
}
