//! One HTTP/2 connection's bytes moved for its [`Session`]: [`Conn::drive`] writes what the
//! session queued and reads what the server sent, waking the senders whose requests ended;
//! [`Conn::send`] opens a stream and returns its [`Response`]. Everything runs on the worker's
//! one thread (a `RefCell`, never held across an await).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::hpack::Heads;
use super::wire::{Lost, Outcome, Session, MAX_FRAME};

/// The read buffer: four of the largest frames we accept.
const READ_BYTES: usize = 4 * (MAX_FRAME + 9);

pub struct Conn {
    session: RefCell<Session>,
    wakers: RefCell<Vec<Option<Waker>>>,
    driver: RefCell<Option<Waker>>,
    /// Every sender of the connection has ended: the driver may stop.
    senders_done: Cell<bool>,
    /// Written into a TLS session whose records are not all out yet (its flush was pending).
    unflushed: Cell<bool>,
    buffer: RefCell<Vec<u8>>,
    filled: Cell<usize>,
}

impl Conn {
    /// A connection for `slots` senders of the requests `heads`.
    pub fn new(slots: usize, heads: &Heads) -> Conn {
        Conn {
            session: RefCell::new(Session::new(slots, heads.table_size())),
            wakers: RefCell::new(vec![None; slots]),
            driver: RefCell::new(None),
            senders_done: Cell::new(false),
            unflushed: Cell::new(false),
            buffer: RefCell::new(vec![0; READ_BYTES]),
            filled: Cell::new(0),
        }
    }

    /// The server's SETTINGS came.
    pub fn settled(&self) -> bool {
        self.session.borrow().settled()
    }

    /// Streams the server allows at once (see [`Session::cap`]).
    pub fn cap(&self) -> usize {
        self.session.borrow().cap()
    }

    pub fn went_away(&self) -> bool {
        self.session.borrow().went_away()
    }

    /// Why no request may go now, if none may.
    pub fn refusal(&self) -> Option<Lost> {
        self.session.borrow().refusal()
    }

    /// Sends `slot`'s request: line `line` of `heads`, and `body`.
    pub fn send(
        &self,
        slot: usize,
        heads: &Heads,
        line: usize,
        body: &Bytes,
    ) -> Result<Response<'_>, Lost> {
        self.session.borrow_mut().open(slot, heads, line, body)?;
        self.wake_driver();
        Ok(Response {
            conn: self,
            slot,
            done: false,
        })
    }

    /// The senders have all ended.
    pub fn senders_done(&self) {
        self.senders_done.set(true);
        self.wake_driver();
    }

    fn wake_driver(&self) {
        if let Some(waker) = self.driver.borrow().as_ref() {
            waker.wake_by_ref();
        }
    }

    /// Moves the connection's bytes over `io` until it fails or closes (every request in flight
    /// then lost), or until its senders have all ended and nothing is left to write.
    pub async fn drive<T: AsyncRead + AsyncWrite + Unpin>(&self, io: &mut T) {
        std::future::poll_fn(|cx| self.poll_drive(io, cx)).await
    }

    fn poll_drive<T: AsyncRead + AsyncWrite + Unpin>(
        &self,
        io: &mut T,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        {
            let mut driver = self.driver.borrow_mut();
            if !driver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *driver = Some(cx.waker().clone());
            }
        }
        loop {
            let wrote = match self.write(io, cx) {
                Ok(wrote) => wrote,
                Err(()) => return self.fail(Lost::Closed),
            };
            if self.senders_done.get() && !wrote {
                return Poll::Ready(());
            }
            match self.read(io, cx) {
                Poll::Ready(Ok(())) => continue,
                Poll::Ready(Err(why)) => return self.fail(why),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Writes what is queued; `Ok(true)` while bytes are left (the socket is full), ours or
    /// TLS's.
    fn write<T: AsyncWrite + Unpin>(&self, io: &mut T, cx: &mut Context<'_>) -> Result<bool, ()> {
        let mut session = self.session.borrow_mut();
        let mut wrote_any = false;
        while !session.pending().is_empty() {
            match Pin::new(&mut *io).poll_write(cx, session.pending()) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Err(()),
                Poll::Ready(Ok(n)) => {
                    session.wrote(n);
                    wrote_any = true;
                }
                Poll::Pending => return Ok(true),
            }
        }
        if wrote_any || self.unflushed.get() {
            // TLS holds records until flushed (a full socket leaves some for the next turn);
            // TCP's flush does nothing.
            match Pin::new(&mut *io).poll_flush(cx) {
                Poll::Ready(Err(_)) => return Err(()),
                Poll::Ready(Ok(())) => self.unflushed.set(false),
                Poll::Pending => {
                    self.unflushed.set(true);
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// One read, its whole frames given to the session and the senders they ended woken.
    fn read<T: AsyncRead + Unpin>(
        &self,
        io: &mut T,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), Lost>> {
        let mut buffer = self.buffer.borrow_mut();
        let filled = self.filled.get();
        let mut read = ReadBuf::new(&mut buffer[filled..]);
        match Pin::new(&mut *io).poll_read(cx, &mut read) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(_)) => return Poll::Ready(Err(Lost::Closed)),
            Poll::Ready(Ok(())) => {}
        }
        let n = read.filled().len();
        if n == 0 {
            return Poll::Ready(Err(Lost::Closed));
        }
        let end = filled + n;
        let mut woken = Vec::new();
        let taken = {
            let mut session = self.session.borrow_mut();
            let taken = session.receive(&buffer[..end]);
            session.take_woken(&mut woken);
            taken
        };
        self.wake(&woken);
        let Ok(taken) = taken else {
            return Poll::Ready(Err(Lost::Protocol));
        };
        buffer.copy_within(taken..end, 0);
        self.filled.set(end - taken);
        Poll::Ready(Ok(()))
    }

    fn fail(&self, why: Lost) -> Poll<()> {
        let mut woken = Vec::new();
        {
            let mut session = self.session.borrow_mut();
            session.fail(why);
            session.take_woken(&mut woken);
        }
        self.wake(&woken);
        Poll::Ready(())
    }

    fn wake(&self, slots: &[usize]) {
        let mut wakers = self.wakers.borrow_mut();
        for &slot in slots {
            if let Some(waker) = wakers[slot].take() {
                waker.wake();
            }
        }
    }
}

/// A request's answer: its status and `grpc-status`, or how it was lost. Dropped before then,
/// it cancels the stream.
pub struct Response<'c> {
    conn: &'c Conn,
    slot: usize,
    done: bool,
}

impl Future for Response<'_> {
    type Output = Result<(u16, Option<u32>), Lost>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let outcome = self.conn.session.borrow_mut().outcome(self.slot);
        let ready = match outcome {
            Outcome::Answered { status, grpc } => Ok((status, grpc)),
            Outcome::Lost(why) => Err(why),
            Outcome::Idle => Err(Lost::Closed),
            Outcome::Waiting => {
                let mut wakers = self.conn.wakers.borrow_mut();
                let waker = &mut wakers[self.slot];
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                return Poll::Pending;
            }
        };
        self.done = true;
        Poll::Ready(ready)
    }
}

impl Drop for Response<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.conn.session.borrow_mut().cancel(self.slot);
            self.conn.wakers.borrow_mut()[self.slot] = None;
            self.conn.wake_driver();
        }
    }
}
