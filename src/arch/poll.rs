//! Poll: one thread, a poll(2) event loop (the study's sixth server).
//!
//! The whole `pollfd` array goes to the kernel on every wait and is scanned on the way back,
//! so the cost of a wake grows with the number of connections: the reason poll falls behind
//! epoll at high concurrency in the study. The loop itself is [`event_loop`](super::event_loop).

use std::collections::HashMap;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use super::event_loop::{self, Event, Interest, Poller};
use super::{Architecture, ServerContext};

pub struct PollServer;

impl Architecture for PollServer {
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()> {
        event_loop::run(PollPoller::default(), listener, ctx)
    }
}

/// A poll(2) readiness backend: a dense `pollfd` array plus the token of each entry.
#[derive(Default)]
pub struct PollPoller {
    fds: Vec<libc::pollfd>,
    tokens: Vec<usize>,
    index: HashMap<RawFd, usize>,
}

fn events_of(interest: Interest) -> libc::c_short {
    let mut events = 0;
    if interest.read {
        events |= libc::POLLIN;
    }
    if interest.write {
        events |= libc::POLLOUT;
    }
    events
}

impl Poller for PollPoller {
    fn add(&mut self, fd: BorrowedFd<'_>, token: usize, interest: Interest) -> io::Result<()> {
        let raw = fd.as_raw_fd();
        if self.index.contains_key(&raw) {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        self.index.insert(raw, self.fds.len());
        self.fds.push(libc::pollfd {
            fd: raw,
            events: events_of(interest),
            revents: 0,
        });
        self.tokens.push(token);
        Ok(())
    }

    fn modify(&mut self, fd: BorrowedFd<'_>, token: usize, interest: Interest) -> io::Result<()> {
        let i = *self
            .index
            .get(&fd.as_raw_fd())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        self.fds[i].events = events_of(interest);
        self.tokens[i] = token;
        Ok(())
    }

    fn delete(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let i = self
            .index
            .remove(&fd.as_raw_fd())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        self.fds.swap_remove(i);
        self.tokens.swap_remove(i);
        if let Some(moved) = self.fds.get(i) {
            self.index.insert(moved.fd, i);
        }
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Duration) -> io::Result<()> {
        // To the nanosecond (ppoll): a timer is due when it is due, not at a millisecond tick.
        if crate::sys::poll(&mut self.fds, Some(timeout))? == 0 {
            return Ok(());
        }
        let hangup = libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
        for (pfd, &token) in self.fds.iter().zip(&self.tokens) {
            if pfd.revents != 0 {
                events.push(Event {
                    token,
                    readable: pfd.revents & (libc::POLLIN | hangup) != 0,
                    writable: pfd.revents & (libc::POLLOUT | hangup) != 0,
                    hangup: pfd.revents & hangup != 0,
                });
            }
        }
        Ok(())
    }
}
