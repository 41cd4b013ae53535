//! The byte stream under a connection: how it is opened, how its opening completes, how bytes
//! go in and out. Today plain TCP over mio; TLS plugs in here as another [`Transport`] variant
//! (its handshake is what [`Transport::finish_connect`] reports as [`Handshake::Pending`]), so
//! the event loop, the framing and the policies never know which one they drive.
//!
//! An enum rather than a trait object: the hot path calls `read` and `write` once per request,
//! and a match on a two-armed enum costs nothing next to the system call.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use nix::errno::Errno;
use socket2::{Domain, Protocol, Socket, Type};

use crate::load::target::Target;

/// The pre-flight connection gives up after this long, so an unreachable target fails fast.
const PREFLIGHT_CONNECT_LIMIT: Duration = Duration::from_secs(3);

/// One connection's byte stream.
#[derive(Debug)]
pub enum Transport {
    /// Plain TCP, non-blocking, registered edge-triggered for both directions.
    Plain(TcpStream),
}

/// Where the opening of a transport stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// Not yet: wait for the next event.
    Pending,
    /// Open: requests may be written.
    Ready,
    /// It failed (a connect error; a TLS error would be one too).
    Failed,
}

impl Transport {
    /// Starts a non-blocking connection to `addr`. Without keep-alive the socket is reset on
    /// close instead of lingering in TIME_WAIT, so a long run does not exhaust the ports.
    pub fn connect(addr: SocketAddr, keepalive: bool) -> io::Result<Transport> {
        let socket = Socket::new(
            Domain::for_address(addr),
            Type::STREAM.nonblocking(),
            Some(Protocol::TCP),
        )?;
        socket.set_nodelay(true)?;
        if !keepalive {
            socket.set_linger(Some(Duration::ZERO))?;
        }
        match socket.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        Ok(Transport::Plain(TcpStream::from_std(socket.into())))
    }

    /// Registers the stream once for both directions (edge triggered: no `epoll_ctl` per
    /// request). Closing the descriptor removes it from the poll set.
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        match self {
            Transport::Plain(stream) => {
                registry.register(stream, token, Interest::READABLE | Interest::WRITABLE)
            }
        }
    }

    /// Called on an event while connecting: has the opening completed?
    pub fn finish_connect(&mut self) -> Handshake {
        match self {
            Transport::Plain(stream) => match stream.take_error() {
                Ok(Some(_)) | Err(_) => Handshake::Failed,
                Ok(None) => match stream.peer_addr() {
                    Ok(_) => Handshake::Ready,
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => Handshake::Pending,
                    Err(_) => Handshake::Failed,
                },
            },
        }
    }

    /// Reads what is there; `WouldBlock` when nothing is, `Ok(0)` at the end of the stream.
    #[inline]
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            // read(2) directly: one system call, no wrapper state.
            Transport::Plain(stream) => match nix::unistd::read(stream.as_raw_fd(), buf) {
                Ok(n) => Ok(n),
                Err(Errno::EAGAIN) => Err(io::ErrorKind::WouldBlock.into()),
                Err(e) => Err(e.into()),
            },
        }
    }

    /// Writes what the socket takes now; `WouldBlock` when it takes nothing.
    #[inline]
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.write(bytes),
        }
    }
}

/// Connects once, blocking, before the run: an unreachable target becomes one clear error
/// (exit 1) within a few seconds instead of a run full of connect errors. Returns the address
/// the workers connect to.
pub fn preflight_connect(target: &Target, timeout: Duration) -> anyhow::Result<SocketAddr> {
    let addrs = target.resolve()?;
    let limit = timeout.min(PREFLIGHT_CONNECT_LIMIT);
    let mut last_error = None;
    for addr in addrs {
        match StdTcpStream::connect_timeout(&addr, limit) {
            Ok(_) => return Ok(addr),
            Err(e) => last_error = Some((addr, e)),
        }
    }
    let (addr, e) = last_error.expect("resolve returns at least one address");
    anyhow::bail!("cannot connect to {target} ({addr}): {e}")
}
