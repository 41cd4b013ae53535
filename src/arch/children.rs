//! Worker processes of the forking and preforked servers: reaping them as they exit, so no
//! zombie is left, and stopping them all when the server stops, so none outlives it.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// The live children of a server process.
#[derive(Debug, Default)]
pub struct Children {
    live: HashSet<Pid>,
}

impl Children {
    pub fn insert(&mut self, pid: Pid) {
        self.live.insert(pid);
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Reaps every child that has exited, without blocking; returns the exits.
    pub fn reap(&mut self) -> Vec<(Pid, WaitStatus)> {
        let mut exited = Vec::new();
        while !self.live.is_empty() {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(status) => {
                    if let Some(pid) = status.pid() {
                        self.live.remove(&pid);
                        exited.push((pid, status));
                    }
                }
            }
        }
        exited
    }

    /// Asks every child to stop (SIGTERM), waits up to `grace` for them to finish their
    /// in-flight requests, then kills the rest (SIGKILL) and reaps them.
    pub fn stop_all(&mut self, grace: Duration) {
        for &pid in &self.live {
            let _ = kill(pid, Signal::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        while !self.live.is_empty() && Instant::now() < deadline {
            self.reap();
            std::thread::sleep(Duration::from_millis(2));
        }
        for &pid in &self.live {
            let _ = kill(pid, Signal::SIGKILL);
        }
        for pid in std::mem::take(&mut self.live) {
            let _ = waitpid(pid, None);
        }
    }
}
