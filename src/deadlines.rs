//! Precise waits for a tokio runtime (the async architecture's, an HTTP/2 load worker's): one
//! timerfd for the whole runtime, armed for the earliest deadline of a [`DueHeap`] (the heap the
//! event loop and the network path keep too), and one task that wakes every wait due when it
//! fires. A server's wait stands for an I/O completion (a database answering), which has no tick, so tokio's own timer
//! (which rounds every deadline up to its next millisecond: a 10 ms wait took 10.5 to 11 ms
//! here) will not do; a timerfd per wait did, at six system calls a wait (create, arm, register,
//! the wakeup's read, deregister, close), 95 us of server CPU a request at 1,000 connections
//! (50 us of CPU, 5 ms of wait) where the event loops, one timer each, spent 68. Here a wait
//! costs a lock, a heap push and a channel, and a system call only when it is the earliest:
//! the event loops' own shape. Written here because tokio has no timer finer than its tick.
//!
//! Every other wait (idle and request deadlines, a stalled write, the accept loop's look at
//! the stop flag) is a [`Deadline`] here too, so tokio's timer stays empty: with any timer in
//! it, a worker out of work parks in `epoll_wait` with a timeout, arming and cancelling a kernel
//! hrtimer every time (0.97 of each a request at one connection, where hyper arms none).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{Expiration, TimerSetTimeFlags};
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

use crate::sys::TimerHandle;

/// Things due at instants, the earliest on top, in the order pushed among equal instants: the
/// event loop's waits, the network path's held packets and the precise timers' waits.
pub struct DueHeap<T> {
    heap: BinaryHeap<Reverse<Due<T>>>,
    seq: u64,
}

/// One entry, ordered by its instant, then by arrival.
struct Due<T> {
    at: Instant,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Due<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<T> Eq for Due<T> {}
impl<T> PartialOrd for Due<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Due<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl<T> Default for DueHeap<T> {
    fn default() -> Self {
        DueHeap {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<T> DueHeap<T> {
    pub fn push(&mut self, at: Instant, item: T) {
        self.seq += 1;
        let seq = self.seq;
        self.heap.push(Reverse(Due { at, seq, item }));
    }

    /// When the earliest is due.
    pub fn next_at(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(d)| d.at)
    }

    /// The earliest, with when it was due, if it is due by `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, T)> {
        if self.next_at()? > now {
            return None;
        }
        self.heap.pop().map(|Reverse(d)| (d.at, d.item))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Keeps only what `keep` says.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.heap.retain(|Reverse(d)| keep(&d.item));
    }
}

/// Below this many waits the heap is never swept of abandoned ones.
const SWEEP_FLOOR: usize = 1024;

#[derive(Default)]
struct Heap {
    due: DueHeap<oneshot::Sender<()>>,
    /// The deadline the timerfd is armed for, if any.
    armed: Option<Instant>,
    /// At this many waits, the abandoned ones (dropped before their deadline: a connection
    /// closed while its idle wait was due in minutes) are swept out, and this doubles what is
    /// left: the heap stays within twice its live waits, at an amortized O(1) a push.
    sweep_at: usize,
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

    /// Puts a wait for `at` in the heap; the receiver hears when it is due.
    fn register(&self, at: Instant) -> oneshot::Receiver<()> {
        let (wake, woken) = oneshot::channel();
        let mut heap = self.heap.lock().unwrap_or_else(|p| p.into_inner());
        if heap.due.len() >= heap.sweep_at.max(SWEEP_FLOOR) {
            heap.due.retain(|wake| !wake.is_closed());
            heap.sweep_at = 2 * heap.due.len();
        }
        heap.due.push(at, wake);
        if heap.armed.is_none_or(|armed| at < armed) {
            self.arm(&mut heap, at);
        }
        woken
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
                while let Some((_, wake)) = heap.due.pop_due(now) {
                    due.push(wake);
                }
                heap.armed = None;
                if let Some(next) = heap.due.next_at() {
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

/// One wait until `at`, put on the runtime's timerfd when made (on tokio's timer when there is
/// no timerfd, or once the firing task is gone). Kept across polls and reads; dropped to
/// abandon it.
pub struct Deadline {
    at: Instant,
    woken: Option<oneshot::Receiver<()>>,
    coarse: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Deadline {
    pub fn new(timers: Option<&PreciseTimers>, at: Instant) -> Deadline {
        Deadline {
            at,
            woken: timers.map(|t| t.register(at)),
            coarse: None,
        }
    }

    /// When it is due.
    pub fn at(&self) -> Instant {
        self.at
    }
}

impl Future for Deadline {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(woken) = self.woken.as_mut() {
            match Pin::new(woken).poll(cx) {
                Poll::Ready(Ok(())) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
                // The firing task is gone (the runtime is shutting down).
                Poll::Ready(Err(_)) => self.woken = None,
            }
        }
        let at = self.at;
        self.coarse
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at.into())))
            .as_mut()
            .poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn sleep(timers: &PreciseTimers, duration: Duration) {
        Deadline::new(Some(timers), Instant::now() + duration).await
    }

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
                            sleep(&timers, wait + Duration::from_millis(5)),
                        )
                        .await;
                        return Duration::MAX;
                    }
                    sleep(&timers, wait).await;
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
                tokio::spawn(async move { sleep(&timers, Duration::from_millis(400)).await })
            };
            tokio::time::sleep(Duration::from_millis(5)).await;
            let started = Instant::now();
            sleep(&timers, Duration::from_millis(2)).await;
            let took = started.elapsed();
            assert!(!long.is_finished());
            assert!(
                took >= Duration::from_millis(2) && took < Duration::from_millis(300),
                "{took:?}"
            );
            long.await.unwrap();
        });
    }

    /// Waits abandoned long before their deadline (connections closed while their idle wait
    /// was minutes away) are swept out: the heap stays within twice its live waits (and the
    /// sweep's floor), and the live ones still end.
    #[test]
    fn abandoned_waits_do_not_pile_up() {
        runtime().block_on(async {
            let timers = PreciseTimers::start().expect("a timerfd");
            let live: Vec<Deadline> = (0..100)
                .map(|i| {
                    Deadline::new(
                        Some(&timers),
                        Instant::now() + Duration::from_millis(20 + i),
                    )
                })
                .collect();
            let far = Instant::now() + Duration::from_secs(600);
            let mut most = 0;
            for _ in 0..20_000 {
                drop(Deadline::new(Some(&timers), far));
                most = most.max(timers.heap.lock().unwrap().due.len());
            }
            assert!(most <= 2 * 100 + SWEEP_FLOOR, "the heap held {most} waits");
            let all_live = async {
                for wait in live {
                    wait.await;
                }
            };
            tokio::time::timeout(Duration::from_secs(5), all_live)
                .await
                .expect("the live waits ended");
        });
    }

    /// Without a timerfd a deadline waits on tokio's timer, and still not less than asked.
    #[test]
    fn a_deadline_without_a_timerfd_waits_on_tokio() {
        runtime().block_on(async {
            let started = Instant::now();
            Deadline::new(None, started + Duration::from_millis(15)).await;
            let took = started.elapsed();
            assert!(
                took >= Duration::from_millis(15) && took < Duration::from_secs(2),
                "{took:?}"
            );
        });
    }
}
