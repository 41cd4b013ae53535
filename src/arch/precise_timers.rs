//! The async architecture's precise waits: one timerfd for the whole runtime, armed for the
//! earliest deadline of a heap, and one task that wakes every wait due when it fires. A wait
//! stands for an I/O completion (a database answering), which has no tick, so tokio's own timer
//! (which rounds every deadline up to its next millisecond: a 10 ms wait took 10.5 to 11 ms
//! here) will not do; a timerfd per wait did, at six system calls a wait (create, arm, register,
//! the wakeup's read, deregister, close), 95 us of server CPU a request at 1,000 connections
//! (50 us of CPU, 5 ms of wait) where the event loops, one timer each, spent 68. Here a wait
//! costs a lock, a heap push and a channel, and a system call only when it is the earliest:
//! the event loops' own shape. Written here because tokio has no timer finer than its tick.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{Expiration, TimerSetTimeFlags};
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

use crate::sys::TimerHandle;

/// A wait in the heap, ordered by its deadline (then by arrival), earliest on top.
struct Due {
    at: Instant,
    seq: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    /// Reversed: the heap's top is the earliest.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
struct Heap {
    due: BinaryHeap<Due>,
    seq: u64,
    /// The deadline the timerfd is armed for, if any.
    armed: Option<Instant>,
}

/// Every precise wait of one runtime.
pub struct PreciseTimers {
    heap: Mutex<Heap>,
    fd: AsyncFd<TimerHandle>,
}

impl PreciseTimers {
    /// The runtime's timers, with the task that fires them spawned on it. Must be called
    /// inside the runtime; `None` when no timerfd can be had (waits then use tokio's timer).
    pub fn start() -> Option<Arc<PreciseTimers>> {
        let fd = crate::sys::watched_idle_timer().ok()?;
        let timers = Arc::new(PreciseTimers {
            heap: Mutex::new(Heap::default()),
            fd,
        });
        tokio::spawn(Arc::clone(&timers).fire());
        Some(timers)
    }

    /// Waits `duration`, to the timerfd's precision.
    pub async fn sleep(&self, duration: Duration) {
        if duration.is_zero() {
            return;
        }
        let at = Instant::now() + duration;
        let (wake, woken) = oneshot::channel();
        {
            let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
            heap.seq += 1;
            let seq = heap.seq;
            heap.due.push(Due { at, seq, wake });
            if heap.armed.is_none_or(|armed| at < armed) {
                self.arm(&mut heap, at);
            }
        }
        if woken.await.is_err() {
            // The firing task is gone (the runtime is shutting down): tokio's timer.
            tokio::time::sleep_until(at.into()).await;
        }
    }

    /// Arms the timerfd for `at` (absolute, on the monotonic clock `Instant` reads).
    fn arm(&self, heap: &mut Heap, at: Instant) {
        let now = Instant::now();
        let Ok(clock) = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) else {
            return;
        };
        // Never zero (that would disarm it): a deadline passed fires at once.
        let target = clock + TimeSpec::from_duration(at.saturating_duration_since(now));
        let set = self.fd.get_ref().0.set(
            Expiration::OneShot(target),
            TimerSetTimeFlags::TFD_TIMER_ABSTIME,
        );
        heap.armed = set.is_ok().then_some(at);
    }

    /// The firing task: at each expiry, wakes every wait due and arms the timerfd for the
    /// next.
    async fn fire(self: Arc<Self>) {
        loop {
            let Ok(mut ready) = self.fd.readable().await else {
                return;
            };
            // Take the expiry (or find none yet), then look for more only after arming below.
            let _ = ready.get_inner().0.wait();
            ready.clear_ready();
            let now = Instant::now();
            let mut due = Vec::new();
            {
                let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
                while heap.due.peek().is_some_and(|d| d.at <= now) {
                    due.push(heap.due.pop().expect("peeked").wake);
                }
                heap.armed = None;
                if let Some(next) = heap.due.peek().map(|d| d.at) {
                    self.arm(&mut heap, next);
                }
            }
            for wake in due {
                // A wait dropped before its deadline (its connection gone) has no receiver.
                let _ = wake.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    /// Every wait ends, none before its deadline: waits of 1 to 20 ms started in a shuffled
    /// order (so later ones are often the earliest and re-arm the timer), some dropped on the
    /// way (their connection gone) without holding up the rest.
    #[test]
    fn every_wait_ends_at_or_after_its_deadline_and_none_is_lost() {
        runtime().block_on(async {
            let timers = PreciseTimers::start().expect("a timerfd");
            let mut tasks = Vec::new();
            for i in 0..300u64 {
                let timers = Arc::clone(&timers);
                let ms = (i * 7919) % 20 + 1;
                tasks.push(tokio::spawn(async move {
                    let wait = Duration::from_millis(ms);
                    let started = Instant::now();
                    if i % 10 == 0 {
                        // Dropped after 1 ms, before its deadline.
                        let _ = tokio::time::timeout(
                            Duration::from_millis(1),
                            timers.sleep(wait + Duration::from_millis(5)),
                        )
                        .await;
                        return Duration::MAX;
                    }
                    timers.sleep(wait).await;
                    let took = started.elapsed();
                    assert!(took >= wait, "{took:?} < {wait:?}");
                    took
                }));
            }
            let all = tokio::time::timeout(Duration::from_secs(10), async {
                let mut ended = 0;
                for t in tasks {
                    if t.await.unwrap() != Duration::MAX {
                        ended += 1;
                    }
                }
                ended
            })
            .await
            .expect("every wait ended");
            assert_eq!(all, 270);
            // Nothing is left in the heap once every wait has fired.
            tokio::time::sleep(Duration::from_millis(10)).await;
            assert!(timers.heap.lock().unwrap().due.is_empty());
        });
    }

    /// A wait shorter than the one the timer is armed for re-arms it: it ends first, long
    /// before the longer one's deadline.
    #[test]
    fn a_shorter_wait_rearms_the_timer() {
        runtime().block_on(async {
            let timers = PreciseTimers::start().expect("a timerfd");
            let long = {
                let timers = Arc::clone(&timers);
                tokio::spawn(async move { timers.sleep(Duration::from_millis(400)).await })
            };
            tokio::time::sleep(Duration::from_millis(5)).await;
            let started = Instant::now();
            timers.sleep(Duration::from_millis(2)).await;
            let took = started.elapsed();
            assert!(!long.is_finished());
            assert!(
                took >= Duration::from_millis(2) && took < Duration::from_millis(300),
                "{took:?}"
            );
            long.await.unwrap();
        });
    }
}
