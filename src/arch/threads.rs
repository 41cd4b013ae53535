//! What the two thread-per-connection architectures share: the stack size of a connection
//! thread and the bounded wait for the last ones to finish. Used by [`super::threaded`] and
//! [`super::prethreaded`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Small stacks let thousands of connection threads fit; the deepest work (fib(50)
/// recursion, page rendering) needs far less.
pub const STACK_SIZE: usize = 256 * 1024;

/// Waits until `count` reaches zero or `limit` passes.
pub fn wait_for_zero(count: &AtomicUsize, limit: Duration) {
    let deadline = Instant::now() + limit;
    while count.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}
