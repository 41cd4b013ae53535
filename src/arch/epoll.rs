//! Epoll: one thread, an epoll(7) event loop (the study's seventh server).
//!
//! The kernel keeps the interest list, so a wait costs in proportion to the connections that
//! are ready, not to all of them. Level-triggered, like the study's. The loop itself is
//! [`event_loop`](super::event_loop).

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};

use super::event_loop::{self, Event, Interest, Poller};
use super::{Architecture, ServerContext};

pub struct EpollServer;

impl Architecture for EpollServer {
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()> {
        event_loop::run(EpollPoller::new()?, listener, ctx)
    }
}

/// An epoll(7) readiness backend.
pub struct EpollPoller {
    epoll: Epoll,
    ready: Vec<EpollEvent>,
    /// Register the listener with EPOLLEXCLUSIVE: several loops wait on one listener and a
    /// new connection wakes one of them, not all (reactors' `--accept shared`).
    exclusive_accept: bool,
}

impl EpollPoller {
    pub fn new() -> io::Result<EpollPoller> {
        Ok(EpollPoller {
            epoll: Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?,
            ready: vec![EpollEvent::empty(); 1024],
            exclusive_accept: false,
        })
    }

    /// A backend whose listener registration is EPOLLEXCLUSIVE, for a listener shared by
    /// several loops.
    pub fn with_exclusive_accept() -> io::Result<EpollPoller> {
        Ok(EpollPoller {
            exclusive_accept: true,
            ..EpollPoller::new()?
        })
    }
}

fn event_of(token: usize, interest: Interest) -> EpollEvent {
    let mut flags = EpollFlags::empty();
    if interest.read {
        flags |= EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP;
    }
    if interest.write {
        flags |= EpollFlags::EPOLLOUT;
    }
    EpollEvent::new(flags, token as u64)
}

impl Poller for EpollPoller {
    fn add(&mut self, fd: BorrowedFd<'_>, token: usize, interest: Interest) -> io::Result<()> {
        let mut event = event_of(token, interest);
        if self.exclusive_accept && token == event_loop::LISTENER {
            // Only at EPOLL_CTL_ADD, and only with EPOLLIN (EPOLLRDHUP is refused); the loop
            // never modifies the listener, only adds and deletes it.
            let flags = EpollFlags::EPOLLIN | EpollFlags::EPOLLEXCLUSIVE;
            event = EpollEvent::new(flags, token as u64);
        }
        Ok(self.epoll.add(fd, event)?)
    }

    fn modify(&mut self, fd: BorrowedFd<'_>, token: usize, interest: Interest) -> io::Result<()> {
        Ok(self.epoll.modify(fd, &mut event_of(token, interest))?)
    }

    fn delete(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        Ok(self.epoll.delete(fd)?)
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Duration) -> io::Result<()> {
        // To the nanosecond: a /sleep timer due in 9.7 ms wakes the loop at 9.7 ms, not at a
        // millisecond tick.
        let n = crate::sys::epoll_wait_precise(self.epoll.0.as_fd(), &mut self.ready, timeout)?;
        let hangup = EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR;
        for ev in &self.ready[..n] {
            let flags = ev.events();
            events.push(Event {
                token: ev.data() as usize,
                readable: flags.intersects(EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP | hangup),
                writable: flags.intersects(EpollFlags::EPOLLOUT | hangup),
                hangup: flags.intersects(hangup),
            });
        }
        Ok(())
    }
}
