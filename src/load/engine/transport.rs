//! The byte stream under a connection ([`Transport`]): plain TCP over mio, or TLS over the same
//! socket ([`TlsStream`], rustls driven by the engine's `tls`); the event loop, the framing and
//! the policies never know which one they drive. A TLS connection stays connecting until its
//! handshake completes, and the handshake is measured apart ([`Transport::take_handshake`]) as
//! the TCP connect is: neither is in a request's latency. An enum rather than a trait object:
//! a match on two arms costs nothing next to the system call it guards.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use nix::errno::Errno;
use socket2::{Domain, Protocol, Socket, Type};

use crate::load::config::TlsOptions;
use crate::load::engine::tls::{self, TlsRead, TlsSession};
use crate::load::target::Target;

/// The pre-flight connection gives up after this long, so an unreachable target fails fast.
const PREFLIGHT_CONNECT_LIMIT: Duration = Duration::from_secs(3);

/// One connection's byte stream.
#[derive(Debug)]
pub enum Transport {
    /// Plain TCP, non-blocking, registered edge-triggered for both directions.
    Plain(TcpStream),
    /// TLS over such a socket.
    Tls(Box<TlsStream>),
}

/// What every TLS connection of a run shares: the client configuration (trust, ALPN, the
/// session cache) and the name the certificate must carry, sent as SNI.
#[derive(Debug, Clone)]
pub struct TlsConnector {
    pub config: Arc<rustls::ClientConfig>,
    pub name: rustls::pki_types::ServerName<'static>,
}

impl TlsConnector {
    /// The connector for an `https://` target's `host`; a bad `--cacert` is a usage error.
    pub fn new(options: &TlsOptions, host: &str) -> anyhow::Result<TlsConnector> {
        TlsConnector::offering(options, host, &[tls::ALPN_HTTP1])
    }

    /// [`TlsConnector::new`] offering these ALPN protocols.
    pub fn offering(
        options: &TlsOptions,
        host: &str,
        alpn: &[&[u8]],
    ) -> anyhow::Result<TlsConnector> {
        Ok(TlsConnector {
            config: tls::client_config_offering(options, alpn)?,
            name: tls::server_name(host)?,
        })
    }
}

/// A TLS connection: the socket and the session over it.
#[derive(Debug)]
pub struct TlsStream {
    stream: TcpStream,
    session: TlsSession,
    /// The TCP connection is established (the handshake may still be running).
    tcp_open: bool,
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
    pub fn connect(
        addr: SocketAddr,
        keepalive: bool,
        tls: Option<&TlsConnector>,
    ) -> io::Result<Transport> {
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
        let stream = TcpStream::from_std(socket.into());
        match tls {
            None => Ok(Transport::Plain(stream)),
            Some(tls) => {
                let session = TlsSession::new(&tls.config, tls.name.clone(), Instant::now())
                    .map_err(tls_error)?;
                Ok(Transport::Tls(Box::new(TlsStream {
                    stream,
                    session,
                    tcp_open: false,
                })))
            }
        }
    }

    /// Registers the stream once for both directions (edge triggered: no `epoll_ctl` per
    /// request). Closing the descriptor removes it from the poll set.
    pub fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        match self {
            Transport::Plain(stream) => {
                registry.register(stream, token, Interest::READABLE | Interest::WRITABLE)
            }
            Transport::Tls(tls) => registry.register(
                &mut tls.stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            ),
        }
    }

    /// The socket's descriptor, for an io_uring driver to name in its operations.
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match self {
            Transport::Plain(stream) => stream.as_fd(),
            Transport::Tls(tls) => tls.stream.as_fd(),
        }
    }

    /// Called on an event while connecting: has the opening completed? For TLS, first the TCP
    /// connection, then the handshake (a failed one, e.g. a refused certificate, is `Failed`).
    pub fn finish_connect(&mut self) -> Handshake {
        match self {
            Transport::Plain(stream) => tcp_connected(stream),
            Transport::Tls(tls) => {
                if !tls.tcp_open {
                    match tcp_connected(&tls.stream) {
                        Handshake::Ready => {
                            tls.tcp_open = true;
                            tls.session.restart_clock(Instant::now());
                        }
                        other => return other,
                    }
                }
                match tls.session.handshake(&mut tls.stream) {
                    Ok(true) => Handshake::Ready,
                    Ok(false) => Handshake::Pending,
                    Err(_) => Handshake::Failed,
                }
            }
        }
    }

    /// A TLS handshake that completed since the last call (once per connection).
    #[inline]
    pub fn take_handshake(&mut self) -> Option<tls::Handshake> {
        match self {
            Transport::Plain(_) => None,
            Transport::Tls(tls) => tls.session.take_handshake(),
        }
    }

    /// Whether a read shorter than the buffer proves the socket empty (plain TCP), so an
    /// edge-triggered reader may stop there. A TLS read hands over plaintext record by record
    /// and says `WouldBlock` itself when the socket is empty.
    #[inline]
    pub fn short_read_drains(&self) -> bool {
        matches!(self, Transport::Plain(_))
    }

    /// On a writable edge with no request bytes left to hand over: writes what TLS still holds.
    #[inline]
    pub fn flush_pending(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            Transport::Tls(tls) => tls
                .session
                .flush(&mut tls.stream)
                .map(|_| ())
                .map_err(tls_error),
        }
    }

    /// Reads what is there; `WouldBlock` when nothing is, `Ok(0)` at the end of the stream.
    /// `peer_closed`: the poller saw the peer close, so read on to the end of the stream.
    #[inline]
    pub fn read(&mut self, buf: &mut [u8], peer_closed: bool) -> io::Result<usize> {
        match self {
            // read(2) directly: one system call, no wrapper state.
            Transport::Plain(stream) => match nix::unistd::read(stream.as_raw_fd(), buf) {
                Ok(n) => Ok(n),
                Err(Errno::EAGAIN) => Err(io::ErrorKind::WouldBlock.into()),
                Err(e) => Err(e.into()),
            },
            Transport::Tls(tls) => match tls.session.read(&mut tls.stream, buf, peer_closed) {
                Ok(TlsRead::Data(n)) => Ok(n),
                Ok(TlsRead::WouldBlock) => Err(io::ErrorKind::WouldBlock.into()),
                Ok(TlsRead::Closed) => Ok(0),
                Err(e) => Err(tls_error(e)),
            },
        }
    }

    /// Has the kernel stamp each arrival with its time (`SO_TIMESTAMPNS`), for
    /// [`Transport::read_stamped`].
    pub fn stamp_arrivals(&self) -> io::Result<()> {
        nix::sys::socket::setsockopt(
            &self.as_fd(),
            nix::sys::socket::sockopt::ReceiveTimestampns,
            &true,
        )
        .map_err(io::Error::from)
    }

    /// As [`Transport::read`], with the kernel's receive time of the last bytes read
    /// (realtime, since the epoch) where the socket gives one ([`Transport::stamp_arrivals`];
    /// plain TCP: TLS reads through its session and gives none).
    #[inline]
    pub fn read_stamped(
        &mut self,
        buf: &mut [u8],
        peer_closed: bool,
    ) -> io::Result<(usize, Option<Duration>)> {
        use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
        let Transport::Plain(stream) = self else {
            return self.read(buf, peer_closed).map(|n| (n, None));
        };
        let mut space = nix::cmsg_space!(nix::sys::time::TimeSpec);
        let mut iov = [io::IoSliceMut::new(buf)];
        match recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::empty(),
        ) {
            Ok(msg) => {
                let stamp = msg.cmsgs().ok().and_then(|mut cmsgs| {
                    cmsgs.find_map(|c| match c {
                        ControlMessageOwned::ScmTimestampns(ts) => Some(Duration::from(ts)),
                        _ => None,
                    })
                });
                Ok((msg.bytes, stamp))
            }
            Err(Errno::EAGAIN) => Err(io::ErrorKind::WouldBlock.into()),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes what the socket takes now; `WouldBlock` when it takes nothing. TLS takes the
    /// bytes into rustls and writes them encrypted; what the socket does not take yet goes out
    /// on the next writable edge ([`Transport::flush_pending`]).
    #[inline]
    pub fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(stream) => stream.write(bytes),
            Transport::Tls(tls) => match tls.session.send(&mut tls.stream, bytes) {
                Ok(0) => Err(io::ErrorKind::WouldBlock.into()),
                Ok(n) => Ok(n),
                Err(e) => Err(tls_error(e)),
            },
        }
    }
}

/// Whether a non-blocking TCP connect has completed.
fn tcp_connected(stream: &TcpStream) -> Handshake {
    match stream.take_error() {
        Ok(Some(_)) | Err(_) => Handshake::Failed,
        Ok(None) => match stream.peer_addr() {
            Ok(_) => Handshake::Ready,
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Handshake::Pending,
            Err(_) => Handshake::Failed,
        },
    }
}

fn tls_error(e: tls::TlsFailure) -> io::Error {
    match e {
        tls::TlsFailure::Io(e) => e,
        tls::TlsFailure::Tls(e) => io::Error::new(io::ErrorKind::InvalidData, e),
    }
}

/// Connects once, blocking, before the run: an unreachable target becomes one clear error
/// (exit 1) within a few seconds instead of a run full of connect errors; so does, for an
/// `https://` target, a certificate the run would refuse (one handshake, [`tls::preflight`]).
/// Returns the address the workers connect to (at `via`, the target's port, where a network
/// path's near end stands for the target), and what the handshake learnt.
pub fn preflight_connect(
    target: &Target,
    timeout: Duration,
    tls: Option<&TlsConnector>,
    via: Option<std::net::Ipv4Addr>,
) -> anyhow::Result<(SocketAddr, Option<tls::ServerInfo>)> {
    let addrs = match via {
        Some(ip) => vec![SocketAddr::from((ip, target.port()))],
        None => target.resolve()?,
    };
    let limit = timeout.min(PREFLIGHT_CONNECT_LIMIT);
    let mut last_error = None;
    for addr in addrs {
        match StdTcpStream::connect_timeout(&addr, limit) {
            Ok(stream) => {
                let info = match tls {
                    Some(tls) => Some(tls::preflight(&tls.config, target.host(), stream, limit)?),
                    None => None,
                };
                return Ok((addr, info));
            }
            Err(e) => last_error = Some((addr, e)),
        }
    }
    let (addr, e) = last_error.expect("resolve returns at least one address");
    anyhow::bail!("cannot connect to {target} ({addr}): {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stamped read says when the bytes reached the socket, not when they were read: bytes
    /// left 60 ms in the socket read as 60 ms old (the epoll driver's rate mode naps on this).
    #[test]
    fn a_stamped_read_dates_the_bytes_by_their_arrival() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = Transport::connect(addr, true, None).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.stamp_arrivals().unwrap();
        // The first socket to ask turns the kernel's stamping on through a deferred work item:
        // a packet in the moment before that carries no stamp (the engine then times it when
        // it is read).
        std::thread::sleep(Duration::from_millis(50));
        server.write_all(b"HTTP/1.1 200 OK\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(60));
        let mut buf = [0u8; 64];
        let (n, stamp) = client.read_stamped(&mut buf, false).unwrap();
        assert_eq!(&buf[..n], b"HTTP/1.1 200 OK\r\n");
        // The stamp is on the realtime clock: its age against that clock's now.
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let age = wall - stamp.expect("a stamp");
        assert!(
            (Duration::from_millis(55)..Duration::from_millis(1000)).contains(&age),
            "{age:?}"
        );
        // Nothing more: would block, as a plain read does.
        let e = client.read_stamped(&mut buf, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        // Without the option the kernel stamps nothing.
        let mut plain = Transport::connect(addr, true, None).unwrap();
        let (mut other, _) = listener.accept().unwrap();
        other.write_all(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let (n, stamp) = plain.read_stamped(&mut buf, false).unwrap();
        assert_eq!((n, stamp), (1, None));
    }
}
