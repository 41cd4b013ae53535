//! HTTPS for the architectures (`serve --tls-cert`): [`ServerTls`], the configuration and the
//! handshake counts every worker shares (across forked processes too); [`Wire`], one
//! connection's socket, cleartext or TLS, with the `Read` and `Write` of a socket, so the
//! blocking loop ([`super::blocking`]) and the event loops ([`super::event_loop`]) serve both
//! through one path; and [`Sealer`], TLS over bytes the architecture moves itself (uring's
//! receives and sends, which the ring completes into and from buffers).
//!
//! rustls does the TLS. What is written here is the glue between rustls's buffers and a socket
//! the architecture owns and waits on in its own way (blocking with timeouts, or non-blocking
//! under poll or epoll): tokio-rustls is that glue for tokio's sockets only, and async uses it.
//! A handshake's CPU is the thread's own CPU time across the calls that advanced it, so it is
//! counted apart from the requests' on every architecture.

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use nix::time::{clock_gettime, ClockId};
use rustls::{HandshakeKind, ServerConfig, ServerConnection};

use crate::sys::SharedCounter;

/// A server's TLS: its configuration and what its handshakes cost, summed over every thread
/// and forked process of the server.
pub struct ServerTls {
    pub config: Arc<ServerConfig>,
    /// Full handshakes completed.
    pub full: SharedCounter,
    /// Handshakes that resumed an earlier session (from a ticket).
    pub resumed: SharedCounter,
    /// CPU time the handshakes took, in nanoseconds of the threads that ran them.
    pub cpu_ns: SharedCounter,
}

impl ServerTls {
    /// Counters at zero for `config`.
    pub fn new(config: Arc<ServerConfig>) -> io::Result<ServerTls> {
        Ok(ServerTls {
            config,
            full: SharedCounter::new()?,
            resumed: SharedCounter::new()?,
            cpu_ns: SharedCounter::new()?,
        })
    }

    /// Counts one handshake that has just completed on `conn`, and the CPU it took.
    pub fn note(&self, conn: &ServerConnection, cpu_ns: u64) {
        if conn.handshake_kind() == Some(HandshakeKind::Resumed) {
            self.resumed.add(1);
        } else {
            self.full.add(1);
        }
        self.cpu_ns.add(cpu_ns);
    }

    /// `; tls handshakes F full, R resumed, cpu C ms` for the stats line.
    pub fn summary(&self) -> String {
        format!(
            "; tls handshakes {} full, {} resumed, cpu {:.3} ms",
            self.full.get(),
            self.resumed.get(),
            self.cpu_ns.get() as f64 / 1e6
        )
    }
}

/// The calling thread's CPU time in nanoseconds (0 where the clock cannot be read).
pub fn thread_cpu_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// One connection's socket: cleartext, or TLS over it.
pub enum Wire {
    Plain(TcpStream),
    Tls(Box<TlsWire>),
}

/// One connection's rustls, and what its handshake has cost so far.
struct Session {
    conn: ServerConnection,
    tls: Arc<ServerTls>,
    /// CPU the handshake has taken so far; counted once it completes.
    handshake_cpu_ns: u64,
}

impl Session {
    fn new(tls: &Arc<ServerTls>) -> io::Result<Session> {
        Ok(Session {
            conn: ServerConnection::new(Arc::clone(&tls.config)).map_err(io::Error::other)?,
            tls: Arc::clone(tls),
            handshake_cpu_ns: 0,
        })
    }

    /// Processes what `read_tls` buffered: a handshake's step is timed on this thread's CPU
    /// clock, and the handshake counted once it completes.
    fn process(&mut self) -> io::Result<()> {
        let handshaking = self.conn.is_handshaking();
        let started = if handshaking { thread_cpu_ns() } else { 0 };
        let processed = self.conn.process_new_packets();
        if handshaking {
            self.handshake_cpu_ns += thread_cpu_ns().saturating_sub(started);
            if processed.is_ok() && !self.conn.is_handshaking() {
                self.tls.note(&self.conn, self.handshake_cpu_ns);
            }
        }
        processed
            .map(|_| ())
            .map_err(|e| io::Error::new(ErrorKind::InvalidData, e))
    }
}

/// rustls's server side over a socket: reads give plaintext, writes take plaintext.
pub struct TlsWire {
    session: Session,
    sock: TcpStream,
}

impl Wire {
    /// `stream` as the server speaks on it: TLS when the server has `tls`.
    pub fn new(stream: TcpStream, tls: Option<&Arc<ServerTls>>) -> io::Result<Wire> {
        let Some(tls) = tls else {
            return Ok(Wire::Plain(stream));
        };
        Ok(Wire::Tls(Box::new(TlsWire {
            session: Session::new(tls)?,
            sock: stream,
        })))
    }

    /// The socket under it.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Wire::Plain(s) => s,
            Wire::Tls(t) => &t.sock,
        }
    }

    /// Ciphertext is waiting for the socket to take it (wait for it to be writable).
    pub fn pending(&self) -> bool {
        match self {
            Wire::Plain(_) => false,
            Wire::Tls(t) => t.session.conn.wants_write(),
        }
    }

    /// Writes waiting ciphertext until the socket would block: true once none is left.
    pub fn push(&mut self) -> io::Result<bool> {
        match self {
            Wire::Plain(_) => Ok(true),
            Wire::Tls(t) => t.push(),
        }
    }

    /// Stops sending: TLS says so first (close_notify, best effort), then the socket's FIN.
    pub fn close_write(&mut self) -> io::Result<()> {
        if let Wire::Tls(t) = self {
            t.session.conn.send_close_notify();
            let _ = t.push();
        }
        self.tcp().shutdown(std::net::Shutdown::Write)
    }
}

impl TlsWire {
    fn push(&mut self) -> io::Result<bool> {
        while self.session.conn.wants_write() {
            match self.session.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(false)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Processes what `read_tls` buffered ([`Session::process`]); its reply (and any alert)
    /// goes out as far as the socket takes it now, the rest at the socket's next writable turn.
    fn process(&mut self) -> io::Result<()> {
        let processed = self.session.process();
        let pushed = self.push();
        processed?;
        pushed.map(|_| ())
    }
}

/// rustls over bytes moved by someone else: ciphertext in from a completed receive, plaintext
/// out to the connection's input; plaintext replies in, ciphertext out to a send buffer.
pub struct Sealer {
    session: Session,
}

impl Sealer {
    pub fn new(tls: &Arc<ServerTls>) -> io::Result<Sealer> {
        let mut session = Session::new(tls)?;
        // Every seal drains what it encrypted, so rustls's own buffer never holds more than a
        // record's worth; the connection's output limit bounds what is sealed at once.
        session.conn.set_buffer_limit(None);
        Ok(Sealer { session })
    }

    /// Takes received ciphertext, advances the handshake (timed, counted once done) and
    /// appends the plaintext it yields to `plain`. An error is a connection to drop (after
    /// [`Sealer::flush_into`] has the alert).
    pub fn receive(&mut self, mut bytes: &[u8], plain: &mut Vec<u8>) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.session.conn.read_tls(&mut bytes)? == 0 {
                break;
            }
            self.session.process()?;
            // What was read before the `WouldBlock` (no more for now) is in `plain`.
            match self.session.conn.reader().read_to_end(plain) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Encrypts `plain` and appends the records to `out`, with whatever else TLS has to say.
    pub fn seal(&mut self, plain: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        self.session.conn.writer().write_all(plain)?;
        self.flush_into(out)
    }

    /// Appends the ciphertext TLS has waiting (a handshake's flight, tickets, an alert).
    pub fn flush_into(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        while self.session.conn.wants_write() {
            self.session.conn.write_tls(out)?;
        }
        Ok(())
    }
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let t = match self {
            Wire::Plain(s) => return s.read(buf),
            Wire::Tls(t) => t,
        };
        loop {
            match t.session.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if t.session.conn.read_tls(&mut t.sock)? == 0 {
                return Ok(0);
            }
            t.process()?;
        }
    }
}

impl Write for Wire {
    /// Takes plaintext as rustls's buffer has room (`WouldBlock` when it has none: the socket
    /// has not taken what was encrypted before), and writes what the socket takes of it.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let t = match self {
            Wire::Plain(s) => return s.write(buf),
            Wire::Tls(t) => t,
        };
        if buf.is_empty() {
            return Ok(0);
        }
        t.push()?;
        let taken = t.session.conn.writer().write(buf)?;
        t.push()?;
        if taken == 0 {
            return Err(ErrorKind::WouldBlock.into());
        }
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.push()? {
            true => Ok(()),
            false => Err(ErrorKind::WouldBlock.into()),
        }
    }
}
