//! `/fib`: CPU work of a known, tunable cost. The naive recursion is the point.
//!
//! fib(50) runs for about half a minute, so the server's copy can be cancelled: every
//! [`CHECK_EVERY`] calls it asks a check the architecture supplies (has the client hung up,
//! has the shutdown deadline passed) and gives up when told to. The check is a closure, so
//! this stays free of IO; asked that rarely it costs nothing measurable.

/// The recursion asks its cancellation check once per this many (non-leaf) calls: a few
/// milliseconds of work at most between checks.
pub const CHECK_EVERY: u32 = 1 << 20;

/// F(n) with F(0) = 0, F(1) = 1, by naive recursion.
pub fn fib(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

/// F(n) by the same naive recursion, asking `cancel` every [`CHECK_EVERY`] calls whether to
/// give up: `None` once it says yes (it is not asked again).
pub fn fib_cancellable(n: u32, cancel: &mut dyn FnMut() -> bool) -> Option<u64> {
    let mut walk = Walk {
        countdown: CHECK_EVERY,
        cancelled: false,
        cancel,
    };
    let value = walk.fib(n);
    (!walk.cancelled).then_some(value)
}

struct Walk<'a> {
    /// Calls left before the next check; held at 1 once cancelled, so every call returns.
    countdown: u32,
    cancelled: bool,
    cancel: &'a mut dyn FnMut() -> bool,
}

impl Walk<'_> {
    fn fib(&mut self, n: u32) -> u64 {
        if n < 2 {
            return n as u64;
        }
        self.countdown -= 1;
        if self.countdown == 0 {
            if self.cancelled || (self.cancel)() {
                self.cancelled = true;
                self.countdown = 1;
                return 0;
            }
            self.countdown = CHECK_EVERY;
        }
        self.fib(n - 1) + self.fib(n - 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let got: Vec<u64> = (0..=10).map(super::fib).collect();
        assert_eq!(got, [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55]);
        assert_eq!(super::fib(30), 832_040);
    }

    #[test]
    fn a_check_that_never_cancels_changes_nothing() {
        let mut asked = 0u64;
        let mut never = || {
            asked += 1;
            false
        };
        for n in 0..=32 {
            assert_eq!(fib_cancellable(n, &mut never), Some(fib(n)), "n={n}");
        }
        // fib(32) alone makes F(33) - 1 = 3,524,577 non-leaf calls: asked 3 times for it,
        // and the smaller ones add up to about as many again.
        assert!((3..=10).contains(&asked), "asked {asked} times");
        assert_eq!(fib_cancellable(40, &mut || false), Some(102_334_155));
    }

    #[test]
    fn a_check_that_cancels_stops_the_recursion_at_once() {
        let mut asked = 0u32;
        let mut cancel_on_second = || {
            asked += 1;
            asked == 2
        };
        // fib(50) makes about 2e10 calls (minutes here); cancelled at the second check, after
        // 2^21 of them, it returns at once.
        assert_eq!(fib_cancellable(50, &mut cancel_on_second), None);
        assert_eq!(asked, 2, "asked again after it said yes");
        // Too small to reach a check: never asked, never cancelled.
        let mut always = || -> bool { panic!("asked for a fib below CHECK_EVERY calls") };
        assert_eq!(fib_cancellable(20, &mut always), Some(6765));
    }
}
