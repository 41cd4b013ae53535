//! `/fib`: CPU work of a known, tunable cost. The naive recursion is the point.
//!
//! fib(50) runs for about half a minute, so the server's copy can be cancelled: above
//! [`PLAIN_UP_TO`] each call asks a check the architecture supplies (has the client hung up,
//! has the shutdown deadline passed) and gives up when told to; at and below it the plain
//! recursion runs, unchanged. The check is a closure, so this stays free of IO. Asked once per
//! a million calls or so, it costs nothing measurable (fib(30) asks once, fib(50) ~30,000
//! times in 30 s), while a cancelled fib stops within milliseconds.

/// Calls for `n` at or below this run the plain recursion without asking: F(29) takes about
/// 2^20 calls (a millisecond or two), the most work done between two checks.
pub const PLAIN_UP_TO: u32 = 29;

/// F(n) with F(0) = 0, F(1) = 1, by naive recursion.
pub fn fib(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

/// F(n) by the same naive recursion, asking `cancel` at every call above [`PLAIN_UP_TO`]
/// whether to give up: `None` once it says yes (it is not asked again).
pub fn fib_cancellable(n: u32, cancel: &mut dyn FnMut() -> bool) -> Option<u64> {
    if n <= PLAIN_UP_TO {
        return Some(fib(n));
    }
    if cancel() {
        return None;
    }
    Some(fib_cancellable(n - 1, cancel)? + fib_cancellable(n - 2, cancel)?)
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

    /// How often `fib_cancellable(n)` asks: once per call above the plain recursion.
    fn checks(n: u32) -> u32 {
        if n <= PLAIN_UP_TO {
            0
        } else {
            1 + checks(n - 1) + checks(n - 2)
        }
    }

    #[test]
    fn a_check_that_never_cancels_changes_nothing() {
        for n in (0..=33).chain([40]) {
            let mut asked = 0;
            let mut never = || {
                asked += 1;
                false
            };
            assert_eq!(fib_cancellable(n, &mut never), Some(fib(n)), "n={n}");
            assert_eq!(asked, checks(n), "n={n}");
        }
        assert_eq!(checks(PLAIN_UP_TO), 0);
        assert_eq!(checks(30), 1);
        assert_eq!(checks(33), 7);
        assert_eq!(fib_cancellable(40, &mut || false), Some(102_334_155));
    }

    #[test]
    fn a_check_that_cancels_stops_the_recursion_at_once() {
        let mut asked = 0;
        let mut cancel_on_second = || {
            asked += 1;
            asked == 2
        };
        // fib(50) makes about 2e10 calls (minutes here); told to stop at the second check,
        // after one F(29) at most, it returns at once without asking again.
        assert_eq!(fib_cancellable(50, &mut cancel_on_second), None);
        assert_eq!(asked, 2, "asked again after it said yes");
        let mut first = || true;
        assert_eq!(fib_cancellable(PLAIN_UP_TO + 1, &mut first), None);
        // Too small to reach a check: never asked, never cancelled.
        let mut always = || -> bool { panic!("asked for a fib at or below PLAIN_UP_TO") };
        assert_eq!(fib_cancellable(PLAIN_UP_TO, &mut always), Some(514_229));
    }
}
