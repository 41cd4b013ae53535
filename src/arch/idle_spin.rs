//! Spin before park (`serve --arch async --spin-us N`): a tokio worker that ran out of work
//! waits `N` us on the CPU before it parks, when its last park was shorter than that.
//!
//! Under a steady stream of small requests a worker that is faster than its clients runs out
//! of work every few requests and parks: an `epoll_wait` that comes straight back with two or
//! three requests (benches/async_floor.txt: 0.36 waits per request, 2.8 requests per wait).
//! Waiting first lets the next poll find a batch; a worker whose last park was long
//! (light load, one connection) parks at once, so an idle server pays nothing. What it costs
//! is CPU that would otherwise sleep: under a rate below capacity the worker spins through
//! the gaps between requests. benches/async_spin.txt measures both sides; the default, 0,
//! parks at once, as tokio (and hyper on it) does. Written here rather than taken from a
//! crate: tokio has no spin before park, and when a worker waits is the architecture itself.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The longest spin `--spin-us` takes: already hundreds of times an `epoll_wait` that returns
/// at once; a longer one would hold the CPU through whole scheduler slices.
pub const MAX_SPIN: Duration = Duration::from_millis(1);

thread_local! {
    /// When this worker last parked (`None`: it is running).
    static PARKED_AT: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Whether this worker's last park was shorter than the spin.
    static SHORT_PARK: Cell<bool> = const { Cell::new(false) };
}

/// Called as a worker is about to park (tokio's `on_thread_park`): spins `spin` when the
/// worker's last park was shorter than that.
pub fn before_park(spin: Duration) {
    if SHORT_PARK.get() {
        let start = Instant::now();
        while start.elapsed() < spin {
            std::hint::spin_loop();
        }
    }
    PARKED_AT.set(Some(Instant::now()));
}

/// Called as a worker wakes (tokio's `on_thread_unpark`): notes whether the park was short.
pub fn after_unpark(spin: Duration) {
    if let Some(at) = PARKED_AT.take() {
        SHORT_PARK.set(at.elapsed() < spin);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Long enough that a preempted test thread cannot blur "spun" and "did not spin".
    const SPIN: Duration = Duration::from_millis(50);

    fn timed(f: impl FnOnce()) -> Duration {
        let start = Instant::now();
        f();
        start.elapsed()
    }

    #[test]
    fn a_first_park_and_a_park_after_a_long_one_do_not_spin() {
        // Each test runs on a thread of its own, so the thread-locals start fresh.
        assert!(timed(|| before_park(SPIN)) < SPIN);
        std::thread::sleep(SPIN + Duration::from_millis(5));
        after_unpark(SPIN);
        assert!(!SHORT_PARK.get());
        assert!(timed(|| before_park(SPIN)) < SPIN);
    }

    #[test]
    fn a_park_after_a_short_one_spins_the_whole_spin() {
        before_park(SPIN);
        after_unpark(SPIN);
        assert!(SHORT_PARK.get());
        assert!(timed(|| before_park(SPIN)) >= SPIN);
        // The park that followed the spin is measured from after the spin.
        after_unpark(SPIN);
        assert!(SHORT_PARK.get());
    }

    #[test]
    fn waking_without_a_park_changes_nothing() {
        after_unpark(SPIN);
        assert!(!SHORT_PARK.get());
    }
}
