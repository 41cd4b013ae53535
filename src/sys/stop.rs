//! Prompt stops for `serve`. SIGINT and SIGTERM set the server's stop flag, wake whoever waits
//! in [`wait_for_stop`] (a self-pipe), and shut down the listening sockets registered with
//! [`wake_on_stop`], so an accept(2) blocked on one returns at once (EINVAL) instead of at the
//! end of its slice: the blocking servers' workers, the rings' multishot accepts and the
//! reactors' loops all see the stop within a millisecond, not 100 to 300. The handler needs no
//! thread, so a forking parent stays single-threaded, and forked workers inherit it (the
//! sockets and the pipe are shared with them).

use std::io;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Listening sockets a stop shuts down (-1: a free slot). A fixed table: the handler may not
/// allocate or lock. More listeners than slots are not woken, only slower to stop.
static LISTENERS: [AtomicI32; 64] = [const { AtomicI32::new(-1) }; 64];
/// The self-pipe's ends (-1 until [`on_stop_signals`]).
static WAKE_READ: AtomicI32 = AtomicI32::new(-1);
static WAKE_WRITE: AtomicI32 = AtomicI32::new(-1);

/// Makes SIGINT and SIGTERM stop the server: `flag` is set first, then the pipe and the
/// registered listeners wake their waiters, who find the flag set.
pub fn on_stop_signals(flag: Arc<AtomicBool>) -> io::Result<()> {
    if WAKE_WRITE.load(Ordering::SeqCst) < 0 {
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC)?;
        WAKE_READ.store(read.into_raw_fd(), Ordering::SeqCst);
        WAKE_WRITE.store(write.into_raw_fd(), Ordering::SeqCst);
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let flag = Arc::clone(&flag);
        let handler = move || {
            flag.store(true, Ordering::SeqCst);
            let write = WAKE_WRITE.load(Ordering::SeqCst);
            // SAFETY: write(2) and shutdown(2) are async-signal-safe; the buffer is a static
            // byte; the descriptors are plain integers (a closed one fails with EBADF, and
            // shutdown of a descriptor that is not a socket with ENOTSOCK, both ignored); the
            // handler allocates nothing and takes no lock (signal-hook keeps errno).
            unsafe {
                if write >= 0 {
                    libc::write(write, b"x".as_ptr().cast(), 1);
                }
                for slot in &LISTENERS {
                    let fd = slot.load(Ordering::SeqCst);
                    if fd >= 0 {
                        libc::shutdown(fd, libc::SHUT_RD);
                    }
                }
            }
        };
        // SAFETY: the handler does only what the comment above names, all of it allowed in a
        // signal handler; it may run on any thread, at any time, and more than once.
        unsafe { signal_hook::low_level::register(signal, handler) }?;
    }
    Ok(())
}

/// A listener registered to be shut down by a stop signal, until this is dropped, with or
/// soon after the listener (a second signal in between would shut down the reading side of
/// whatever took the number: the server is stopping then, and a reply still goes out).
#[must_use = "the registration ends when this is dropped"]
pub struct StopWake {
    slot: Option<usize>,
}

/// Registers `listener` (see [`StopWake`]).
pub fn wake_on_stop(listener: &impl AsRawFd) -> StopWake {
    let fd = listener.as_raw_fd();
    let slot = LISTENERS.iter().position(|slot| {
        slot.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
    StopWake { slot }
}

impl Drop for StopWake {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            LISTENERS[slot].store(-1, Ordering::SeqCst);
        }
    }
}

/// Waits up to `timeout`, less once a stop signal has arrived (then returns at once, every
/// time after); a plain sleep before [`on_stop_signals`].
pub fn wait_for_stop(timeout: Duration) {
    let read = WAKE_READ.load(Ordering::SeqCst);
    if read < 0 {
        std::thread::sleep(timeout);
        return;
    }
    let mut fds = [libc::pollfd {
        fd: read,
        events: libc::POLLIN,
        revents: 0,
    }];
    // The pipe is never drained: once written, every later wait returns at once.
    let _ = super::poll(&mut fds, Some(timeout));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_registration_takes_a_slot_and_gives_it_back() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let fd = listener.as_raw_fd();
        let wake = wake_on_stop(&listener);
        let slot = wake.slot.unwrap();
        assert_eq!(LISTENERS[slot].load(Ordering::SeqCst), fd);
        drop(wake);
        assert_eq!(LISTENERS[slot].load(Ordering::SeqCst), -1);
    }
}
