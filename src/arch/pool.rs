//! The worker pool of `hybrid`: threads that run what would stall the event loop (`/fib`, the
//! embedded store's calls) and hand the replies back through an eventfd the loop polls.
//! Used by [`super::event_loop`] when it is given a pool; started by [`super::hybrid`].

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::request::cancel_check;
use super::ServerContext;
use crate::app::Route;
use crate::http::Response;
use crate::store::LazyStore;

/// Which request of which connection a job answers: the loop's (token, generation).
pub type JobId = (usize, u64);

struct Job {
    id: JobId,
    route: Route,
    /// Set by the loop when the connection closed: a job not started yet is skipped, a long
    /// `/fib` under way gives up.
    cancelled: Arc<AtomicBool>,
    /// The connection's socket (the loop's), which a long `/fib` checks for a hang-up.
    fd: RawFd,
}

/// Replies the workers have finished, and the eventfd that tells the loop there are some.
struct Done {
    /// `None`: a `/fib` gave up (its client gone, or past the drain): close the connection.
    replies: Mutex<Vec<(JobId, Option<Response>)>>,
    wake: EventFd,
}

/// Threads that run routes off the loop, each with its own lazily opened store connection.
pub struct WorkerPool {
    jobs: Option<Sender<Job>>,
    done: Arc<Done>,
    threads: Vec<JoinHandle<()>>,
    /// The jobs handed out and not yet answered, for [`WorkerPool::cancel`] (loop side only).
    outstanding: HashMap<JobId, Arc<AtomicBool>>,
}

impl WorkerPool {
    /// Starts `workers` threads serving `ctx`'s app.
    pub fn start(ctx: &Arc<ServerContext>, workers: usize) -> anyhow::Result<WorkerPool> {
        let wake = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .context("cannot create the worker pool's eventfd")?;
        let done = Arc::new(Done {
            replies: Mutex::new(Vec::new()),
            wake,
        });
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let mut threads = Vec::with_capacity(workers);
        for i in 0..workers {
            let (ctx, queue, done) = (Arc::clone(ctx), Arc::clone(&queue), Arc::clone(&done));
            let thread = std::thread::Builder::new()
                .name(format!("hybrid-worker-{i}"))
                .spawn(move || work(&ctx, &queue, &done))
                .context("cannot start a worker thread")?;
            threads.push(thread);
        }
        Ok(WorkerPool {
            jobs: Some(jobs),
            done,
            threads,
            outstanding: HashMap::new(),
        })
    }

    /// Queues `route` (answered later through [`WorkerPool::take_done`] under `id`).
    pub fn submit(&mut self, id: JobId, route: Route, fd: RawFd) {
        let cancelled = Arc::new(AtomicBool::new(false));
        self.outstanding.insert(id, Arc::clone(&cancelled));
        let sender = self
            .jobs
            .as_ref()
            .expect("the queue is open while the pool lives");
        if let Err(mpsc::SendError(job)) = sender.send(Job {
            id,
            route,
            cancelled,
            fd,
        }) {
            // Every worker is gone (a panic): answer 503 rather than leave the client waiting.
            let resp = Response::text(503, "no worker left to run this request\n".to_string());
            self.done.finish(job.id, Some(resp));
        }
    }

    /// Drops job `id` if no worker has taken it yet: its connection is gone, and a client
    /// that gave up must not cost the CPU of its request after all. (Blocking workers get
    /// this for free: they read a request only when they start it, and a reset connection
    /// fails that read.)
    pub fn cancel(&mut self, id: JobId) {
        if let Some(cancelled) = self.outstanding.remove(&id) {
            cancelled.store(true, Ordering::Relaxed);
        }
    }

    /// The descriptor that turns readable when replies are waiting.
    pub fn done_fd(&self) -> BorrowedFd<'_> {
        self.done.wake.as_fd()
    }

    /// The replies finished since the last call.
    pub fn take_done(&mut self) -> Vec<(JobId, Option<Response>)> {
        // Reset the eventfd first: a reply queued after the take below bumps it again.
        let _ = self.done.wake.read();
        let done =
            std::mem::take(&mut *self.done.replies.lock().unwrap_or_else(|e| e.into_inner()));
        for (id, _) in &done {
            self.outstanding.remove(id);
        }
        done
    }
}

impl Done {
    fn finish(&self, id: JobId, resp: Option<Response>) {
        self.replies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((id, resp));
        // Only fails if the counter would overflow, i.e. the loop is long gone.
        let _ = self.wake.write(1);
    }
}

/// A worker: takes jobs until the queue closes.
fn work(ctx: &ServerContext, queue: &Mutex<Receiver<Job>>, done: &Done) {
    let mut store = LazyStore::new(ctx.app.store.clone());
    loop {
        let job = queue.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(Job {
            id,
            route,
            cancelled,
            fd,
        }) = job
        else {
            return;
        };
        if cancelled.load(Ordering::Relaxed) {
            continue;
        }
        // The flag first: once it is set the loop may have closed `fd` and reused its number.
        let mut client_gone = cancel_check(fd, ctx, None);
        let mut cancel = || cancelled.load(Ordering::Relaxed) || client_gone();
        done.finish(id, ctx.app.complete(route, &mut store, &mut cancel));
    }
}

impl Drop for WorkerPool {
    /// Closes the queue and joins the workers, which end once idle. A worker still computing
    /// (a stop that gave up on a long `/fib` at the drain deadline) is waited for a moment
    /// only, then left to end with the process.
    fn drop(&mut self) {
        self.jobs = None;
        let deadline = Instant::now() + Duration::from_millis(200);
        while self.threads.iter().any(|t| !t.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for thread in self.threads.drain(..) {
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}
