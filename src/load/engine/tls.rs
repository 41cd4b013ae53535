//! HTTPS for the load generator: rustls (its `ring` provider, so nothing to install) driven by
//! hand over the engine's own non-blocking sockets, because the engine is an edge-triggered
//! loop that owns its sockets and frames responses in place (a TLS stream type that blocks, owns
//! the socket or wants an async runtime would not fit). [`TlsSession`] is one connection's TLS,
//! [`client_config`] the configuration all share, and [`preflight`] one blocking handshake
//! before the run, so a certificate problem is one line ([`describe`]) and exit 1.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;

use crate::load::config::TlsOptions;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{ring, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, HandshakeKind,
    RootCertStore, SignatureScheme,
};

use crate::usage;

/// The application protocol offered (ALPN) for the engine, which frames HTTP/1.1 only...
pub const ALPN_HTTP1: &[u8] = b"http/1.1";
/// ... and the one an HTTP/2 run offers first.
pub const ALPN_H2: &[u8] = b"h2";

/// Builds the client configuration every connection of a run shares. A `--cacert` file that
/// cannot be read or holds no usable certificate is a usage error (exit 2).
///
/// ALPN is `http/1.1`; the trusted roots are the `--cacert` file's, else Mozilla's via
/// webpki-roots. SNI is the URL's host ([`server_name`]); rustls sends none for an IP address,
/// as RFC 6066 says.
pub fn client_config(options: &TlsOptions) -> anyhow::Result<Arc<ClientConfig>> {
    client_config_offering(options, &[ALPN_HTTP1])
}

/// [`client_config`] offering these ALPN protocols, in order of preference (`h2` first for an
/// HTTP/2 run, see [`crate::load::h2`]).
pub fn client_config_offering(
    options: &TlsOptions,
    alpn: &[&[u8]],
) -> anyhow::Result<Arc<ClientConfig>> {
    let provider = Arc::new(ring::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("TLS: {e}"))?;
    let mut config = if options.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { algorithms }))
            .with_no_client_auth()
    } else {
        let roots = match &options.cacert {
            Some(path) => read_ca_file(path)?,
            None => RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            },
        };
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// The CA certificates of a PEM file, as trust roots.
fn read_ca_file(path: &Path) -> anyhow::Result<RootCertStore> {
    let shown = path.display();
    let bad = |why: String| usage(format!("--cacert {shown}: {why}"));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(pem_problem(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(pem_problem(e)))?;
    if certs.is_empty() {
        return Err(bad(
            "no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| bad(format!("not a usable CA certificate ({e})")))?;
    }
    Ok(roots)
}

fn pem_problem(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => format!("cannot read it ({e})"),
        other => format!("not a PEM file ({other})"),
    }
}

/// The name the certificate must carry, and the SNI sent: the URL's host. Bad input (exit 2)
/// if it is neither an IP address nor a valid DNS name.
pub fn server_name(host: &str) -> anyhow::Result<ServerName<'static>> {
    ServerName::try_from(host.to_string())
        .map_err(|_| usage(format!("{host:?} is not a host name TLS can verify")))
}

/// `--insecure`: any certificate chain is accepted; the handshake's signatures are still
/// verified with the provider's algorithms, so the connection is real TLS, just unauthenticated.
#[derive(Debug)]
struct AcceptAnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Why a TLS connection failed: what rustls refused, or the socket.
#[derive(Debug)]
pub enum TlsFailure {
    Tls(rustls::Error),
    Io(io::Error),
}

/// A completed handshake: how long it took from the TCP connection being established, and
/// whether it resumed an earlier session (an abbreviated handshake).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Handshake {
    pub duration: Duration,
    pub resumed: bool,
}

/// What one [`TlsSession::read`] produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsRead {
    /// This many plaintext bytes are at the start of the buffer; call again.
    Data(usize),
    /// Nothing more until the socket's next readable edge.
    WouldBlock,
    /// The server closed the connection (with close_notify or not); nothing more will come.
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum HandshakeState {
    Pending,
    /// Completed, not yet taken by [`TlsSession::take_handshake`].
    Done(Handshake),
    Taken,
}

/// One client TLS connection over a non-blocking socket the caller owns and polls
/// (edge-triggered: [`TlsSession::read`] is called until it says `WouldBlock` or `Closed`).
///
/// It is rustls's `ClientConnection` plus what the loop needs: it moves ciphertext between the
/// socket and rustls (`read_tls` / `process_new_packets` / `write_tls`), hands plaintext to the
/// framer, and notes when the handshake completed, so the handshake is measured apart from the
/// requests. The engine drives the handshake while the connection is still connecting
/// ([`TlsSession::handshake`]) and sends requests once it is done, so a handshake, like a TCP
/// connect, is in no request's latency; the report gives its own percentiles and its share.
pub struct TlsSession {
    conn: ClientConnection,
    started: Instant,
    handshake: HandshakeState,
    /// The last socket read returned less than asked: the socket is empty until its next edge.
    socket_drained: bool,
}

impl TlsSession {
    /// Starts a handshake on a connection established at `connected`; the ClientHello is
    /// queued, and goes out with the first [`TlsSession::flush`] or [`TlsSession::send`].
    pub fn new(
        config: &Arc<ClientConfig>,
        name: ServerName<'static>,
        connected: Instant,
    ) -> Result<TlsSession, TlsFailure> {
        let conn = ClientConnection::new(Arc::clone(config), name).map_err(TlsFailure::Tls)?;
        Ok(TlsSession {
            conn,
            started: connected,
            handshake: HandshakeState::Pending,
            socket_drained: false,
        })
    }

    /// Starts the handshake's clock again at `at` (the session was made before its TCP
    /// connection was established; the handshake is timed from then).
    pub fn restart_clock(&mut self, at: Instant) {
        self.started = at;
    }

    /// The handshake, once, after it completed; `None` before and after that.
    pub fn take_handshake(&mut self) -> Option<Handshake> {
        match self.handshake {
            HandshakeState::Done(handshake) => {
                self.handshake = HandshakeState::Taken;
                Some(handshake)
            }
            _ => None,
        }
    }

    /// Whether the handshake has completed.
    pub fn is_established(&self) -> bool {
        !self.conn.is_handshaking()
    }

    /// The protocol the server chose by ALPN (`None` if it does not do ALPN).
    pub fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// Ciphertext is waiting for the socket to take it (wait for a writable edge).
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Hands plaintext to TLS and writes what ciphertext the socket takes. Returns how many
    /// bytes rustls accepted: fewer than given (even 0) when its buffers are full, and then a
    /// writable edge (or, during the handshake, the handshake completing) makes room.
    pub fn send<S: Write>(&mut self, sock: &mut S, bytes: &[u8]) -> Result<usize, TlsFailure> {
        // Make room first: what a writable edge allows must go out now, or no edge follows.
        self.flush(sock)?;
        let accepted = if bytes.is_empty() {
            0
        } else {
            self.conn.writer().write(bytes).map_err(TlsFailure::Io)?
        };
        self.flush(sock)?;
        Ok(accepted)
    }

    /// Writes pending ciphertext until the socket would block. True if nothing is left.
    pub fn flush<S: Write>(&mut self, sock: &mut S) -> Result<bool, TlsFailure> {
        while self.conn.wants_write() {
            match self.conn.write_tls(sock) {
                Ok(0) => return Err(TlsFailure::Io(io::ErrorKind::WriteZero.into())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TlsFailure::Io(e)),
            }
        }
        Ok(true)
    }

    /// Advances the handshake as far as the socket allows: writes what is queued, reads and
    /// processes the server's flight. True once it has completed (then [`TlsSession::take_handshake`]
    /// has its time); false to wait for the next edge. Reads until `WouldBlock`, so an
    /// edge-triggered poller loses nothing; plaintext that came early stays in rustls for
    /// [`TlsSession::read`].
    pub fn handshake<S: Read + Write>(&mut self, sock: &mut S) -> Result<bool, TlsFailure> {
        loop {
            self.flush(sock)?;
            if !self.conn.is_handshaking() {
                self.note_handshake();
                return Ok(true);
            }
            match self.conn.read_tls(sock) {
                Ok(0) => {
                    return Err(TlsFailure::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection during the handshake",
                    )))
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TlsFailure::Io(e)),
            }
            self.process(sock)?;
        }
    }

    /// Processes what `read_tls` buffered; on an error, sends rustls's alert (best effort, so
    /// the server learns why) and returns it.
    fn process<S: Write>(&mut self, sock: &mut S) -> Result<(), TlsFailure> {
        if let Err(e) = self.conn.process_new_packets() {
            let _ = self.conn.write_tls(sock);
            return Err(TlsFailure::Tls(e));
        }
        Ok(())
    }

    fn note_handshake(&mut self) {
        if self.handshake == HandshakeState::Pending && !self.conn.is_handshaking() {
            self.handshake = HandshakeState::Done(Handshake {
                duration: self.started.elapsed(),
                resumed: self.conn.handshake_kind() == Some(HandshakeKind::Resumed),
            });
        }
    }

    /// Reads ciphertext from the socket, advances the handshake (answering it as needed) and
    /// puts the next plaintext in `out`. Call it until it returns `WouldBlock` or `Closed`.
    /// `to_eof`: the poller saw the peer close, so read on until the end of the stream (a short
    /// read is then no proof that nothing follows).
    pub fn read<S: Read + Write>(
        &mut self,
        sock: &mut S,
        out: &mut [u8],
        to_eof: bool,
    ) -> Result<TlsRead, TlsFailure> {
        debug_assert!(!out.is_empty());
        loop {
            match self.conn.reader().read(out) {
                Ok(0) => return Ok(TlsRead::Closed),
                Ok(n) => return Ok(TlsRead::Data(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(TlsRead::Closed),
                Err(e) => return Err(TlsFailure::Io(e)),
            }
            if self.socket_drained && !to_eof {
                // Edge-triggered: data arriving after the short read raises a new edge, so a
                // read that could only fail with EAGAIN is not needed.
                self.socket_drained = false;
                return Ok(TlsRead::WouldBlock);
            }
            let mut probe = ShortReadProbe {
                inner: &mut *sock,
                short: false,
            };
            match self.conn.read_tls(&mut probe) {
                Ok(0) => {} // End of stream: the reader reports it next time round.
                Ok(_) => self.socket_drained = probe.short,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.socket_drained = false;
                    return Ok(TlsRead::WouldBlock);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(TlsFailure::Io(e)),
            }
            self.process(sock)?;
            self.note_handshake();
            if self.conn.wants_write() {
                // Handshake messages, and once it completes the requests that waited for it.
                self.flush(sock)?;
            }
        }
    }
}

impl std::fmt::Debug for TlsSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSession")
            .field("handshaking", &self.conn.is_handshaking())
            .field("handshake", &self.handshake)
            .finish_non_exhaustive()
    }
}

/// A reader that notes whether the last read returned less than asked for.
struct ShortReadProbe<'a, S> {
    inner: &'a mut S,
    short: bool,
}

impl<S: Read> Read for ShortReadProbe<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

/// What the pre-flight handshake learnt about the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// "TLSv1.3" or "TLSv1.2".
    pub version: String,
    /// The ALPN protocol the server chose, if it does ALPN.
    pub alpn: Option<String>,
}

/// One blocking handshake over `tcp` (connected to `host`'s address) before the run: a
/// certificate the run would refuse on every connection is one line here ([`describe`]).
pub fn preflight(
    config: &Arc<ClientConfig>,
    host: &str,
    mut tcp: std::net::TcpStream,
    limit: Duration,
) -> anyhow::Result<ServerInfo> {
    let name = server_name(host)?;
    tcp.set_read_timeout(Some(limit))?;
    tcp.set_write_timeout(Some(limit))?;
    let mut conn =
        ClientConnection::new(Arc::clone(config), name).map_err(|e| anyhow!("TLS: {e}"))?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut tcp) {
            let why = match e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                Some(tls) => describe(tls, host),
                None => match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
                        "no handshake from {host} within {:.1} s (is it a TLS server?)",
                        limit.as_secs_f64()
                    ),
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => format!(
                        "{host} closed the connection during the handshake (is it a TLS server?)"
                    ),
                    _ => format!("handshake with {host} failed: {e}"),
                },
            };
            anyhow::bail!("TLS: {why}");
        }
    }
    let info = ServerInfo {
        version: match conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".to_string(),
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".to_string(),
            other => format!("{other:?}"),
        },
        alpn: conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned()),
    };
    // A polite end, so the server logs no error; failures here do not matter.
    conn.send_close_notify();
    let _ = conn.complete_io(&mut tcp);
    Ok(info)
}

/// One line for a TLS failure with `host` (the name the certificate was checked against),
/// saying what to do about it where there is something to do.
pub fn describe(error: &rustls::Error, host: &str) -> String {
    use rustls::Error as E;
    match error {
        E::InvalidCertificate(cert) => describe_certificate(cert, host),
        E::NoApplicationProtocol => {
            format!("{host} does not speak http/1.1 over TLS (no common ALPN protocol)")
        }
        E::AlertReceived(rustls::AlertDescription::NoApplicationProtocol) => format!(
            "{host} speaks none of the protocols offered (no common ALPN protocol; --http1 offers http/1.1 alone)"
        ),
        E::AlertReceived(alert) => format!("{host} refused the handshake (alert {alert:?})"),
        E::InvalidMessage(_) => {
            format!("{host} did not answer with TLS (is it an http:// server?)")
        }
        E::PeerIncompatible(why) => {
            format!("{host} shares no TLS version or cipher suite with rustls ({why:?})")
        }
        other => format!("handshake with {host} failed: {other}"),
    }
}

fn describe_certificate(error: &CertificateError, host: &str) -> String {
    match error {
        CertificateError::UnknownIssuer => format!(
            "certificate for {host} not trusted (UnknownIssuer); use --cacert FILE or --insecure"
        ),
        CertificateError::NotValidForName => format!(
            "certificate is not valid for {host} (NotValidForName); target a name it has, or use --insecure"
        ),
        CertificateError::NotValidForNameContext { presented, .. } => format!(
            "certificate is not valid for {host} (NotValidForName; it names {}); target a name it has, or use --insecure",
            presented.iter().map(|n| bare_name(n)).collect::<Vec<_>>().join(", ")
        ),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            format!("certificate for {host} has expired (Expired); use --insecure to accept it")
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => format!(
            "certificate for {host} is not valid yet (NotValidYet); check the clock, or use --insecure"
        ),
        CertificateError::Other(other) => {
            let name = other.to_string();
            if name == "CaUsedAsEndEntity" {
                format!(
                    "certificate for {host} is a CA certificate, served as the server's own \
                     (CaUsedAsEndEntity; e.g. made by `openssl req -x509`); use --insecure, or \
                     serve a certificate signed by the --cacert CA"
                )
            } else {
                format!("certificate for {host} rejected ({name}); use --cacert FILE or --insecure")
            }
        }
        other => {
            let debug = format!("{other:?}");
            let name = debug.split([' ', '(', '{']).next().unwrap_or("");
            format!("certificate for {host} rejected ({name}); use --cacert FILE or --insecure")
        }
    }
}

/// `localhost` for rustls's `DnsName("localhost")`, `127.0.0.1` for `IpAddress(127.0.0.1)`.
fn bare_name(presented: &str) -> &str {
    presented
        .strip_prefix("DnsName(\"")
        .and_then(|rest| rest.strip_suffix("\")"))
        .or_else(|| {
            presented
                .strip_prefix("IpAddress(")
                .and_then(|rest| rest.strip_suffix(')'))
        })
        .unwrap_or(presented)
}

/// The test certificates, one copy shared with the integration tests.
#[cfg(test)]
#[path = "../../../tests/common/pki.rs"]
mod test_pki;

#[cfg(test)]
mod tests {
    use super::test_pki::{ca_signed_for, ca_signed_with, Pki};
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::sync::Mutex;

    /// What the test server saw of one connection.
    #[derive(Debug, Default, Clone)]
    struct Seen {
        sni: Option<String>,
        alpn: Option<Vec<u8>>,
        requests: usize,
    }

    /// A blocking rustls server answering every request on each connection with `body`,
    /// until the client closes; `connections` connections, then it stops.
    fn serve(pki: &Pki, body: Vec<u8>, connections: usize) -> (u16, Arc<Mutex<Vec<Seen>>>) {
        let config = Arc::new(pki.server_config());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = Arc::clone(&seen);
        std::thread::spawn(move || {
            for _ in 0..connections {
                let Ok((tcp, _)) = listener.accept() else {
                    return;
                };
                tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let conn = rustls::ServerConnection::new(Arc::clone(&config)).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let mut record = Seen::default();
                let mut pending = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let read = tls.read(&mut buf);
                    if !tls.conn.is_handshaking() && record.alpn.is_none() {
                        record.sni = tls.conn.server_name().map(str::to_string);
                        record.alpn = tls.conn.alpn_protocol().map(<[u8]>::to_vec);
                    }
                    let n = match read {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        record.requests += 1;
                        let head =
                            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                        let _ = tls.write_all(head.as_bytes());
                        let _ = tls.write_all(&body);
                    }
                }
                seen2.lock().unwrap().push(record);
            }
        });
        (port, seen)
    }

    fn temp_file(name: &str, contents: &str) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("sweetspot-tls-{}-{name}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        path
    }

    fn trusting(pki: &Pki, name: &str) -> Arc<ClientConfig> {
        let path = temp_file(name, &pki.ca_pem);
        let config = client_config(&TlsOptions {
            insecure: false,
            cacert: Some(path.clone()),
        })
        .unwrap();
        std::fs::remove_file(path).unwrap();
        config
    }

    fn preflight_to(
        config: &Arc<ClientConfig>,
        host: &str,
        port: u16,
    ) -> anyhow::Result<ServerInfo> {
        let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        preflight(config, host, tcp, Duration::from_secs(3))
    }

    /// Two requests on one keep-alive connection through the non-blocking state machine under
    /// an edge-triggered mio poll, with a body large enough to span many records and reads.
    #[test]
    fn session_fetches_responses_under_edge_triggered_poll() {
        use mio::{Events, Interest, Poll, Token};
        let pki = ca_signed_for(&["localhost"]);
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let (port, seen) = serve(&pki, body.clone(), 1);
        let config = trusting(&pki, "session.pem");
        let std_stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        std_stream.set_nonblocking(true).unwrap();
        let mut stream = mio::net::TcpStream::from_std(std_stream);
        let mut poll = Poll::new().unwrap();
        poll.registry()
            .register(
                &mut stream,
                Token(0),
                Interest::READABLE | Interest::WRITABLE,
            )
            .unwrap();
        let mut session =
            TlsSession::new(&config, server_name("localhost").unwrap(), Instant::now()).unwrap();
        let request = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
        let expected_len =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).len() + body.len();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut events = Events::with_capacity(8);
        let mut out = vec![0u8; 64 * 1024];
        let mut handshakes = Vec::new();
        while !session.handshake(&mut stream).unwrap() {
            assert!(Instant::now() < deadline, "handshake stalled");
            poll.poll(&mut events, Some(Duration::from_millis(100)))
                .unwrap();
        }
        handshakes.extend(session.take_handshake());
        assert_eq!(session.take_handshake(), None, "taken once");
        for round in 0..2 {
            assert_eq!(session.send(&mut stream, request).unwrap(), request.len());
            let mut got = Vec::new();
            while got.len() < expected_len {
                assert!(
                    Instant::now() < deadline,
                    "round {round}: stalled at {}",
                    got.len()
                );
                poll.poll(&mut events, Some(Duration::from_millis(100)))
                    .unwrap();
                for event in events.iter() {
                    if event.is_writable() && session.wants_write() {
                        session.flush(&mut stream).unwrap();
                    }
                    loop {
                        match session.read(&mut stream, &mut out, false).unwrap() {
                            TlsRead::Data(n) => got.extend_from_slice(&out[..n]),
                            TlsRead::WouldBlock => break,
                            TlsRead::Closed => panic!("server closed"),
                        }
                    }
                }
                handshakes.extend(session.take_handshake());
            }
            assert_eq!(
                got.len(),
                expected_len,
                "round {round}: exactly one response"
            );
            assert!(got.ends_with(&body));
        }
        assert!(session.is_established());
        assert_eq!(session.alpn(), Some(ALPN_HTTP1));
        assert_eq!(handshakes.len(), 1, "one handshake, taken once");
        assert!(!handshakes[0].resumed);
        assert!(handshakes[0].duration > Duration::ZERO);
        drop(stream);
        let until = Instant::now() + Duration::from_secs(5);
        while seen.lock().unwrap().is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].sni.as_deref(), Some("localhost"));
        assert_eq!(seen[0].alpn.as_deref(), Some(ALPN_HTTP1));
        assert_eq!(seen[0].requests, 2);
    }

    #[test]
    fn preflight_accepts_the_given_ca_and_reports_the_session() {
        let pki = ca_signed_for(&["localhost", "127.0.0.1"]);
        let (port, seen) = serve(&pki, b"ok".to_vec(), 2);
        let config = trusting(&pki, "accept.pem");
        let info = preflight_to(&config, "localhost", port).unwrap();
        assert_eq!(info.alpn.as_deref(), Some("http/1.1"));
        assert_eq!(info.version, "TLSv1.3");
        // An IP address is checked against the certificate's IP names, and sends no SNI.
        preflight_to(&config, "127.0.0.1", port).unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while seen.lock().unwrap().len() < 2 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let seen = seen.lock().unwrap();
        let snis: Vec<Option<&str>> = seen.iter().map(|s| s.sni.as_deref()).collect();
        assert_eq!(snis, vec![Some("localhost"), None]);
    }

    #[test]
    fn preflight_refuses_an_unknown_issuer_in_one_line() {
        let pki = ca_signed_for(&["localhost", "127.0.0.1"]);
        let (port, _) = serve(&pki, b"ok".to_vec(), 2);
        let webpki = client_config(&TlsOptions::default()).unwrap();
        let e = preflight_to(&webpki, "127.0.0.1", port).unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "TLS: certificate for 127.0.0.1 not trusted (UnknownIssuer); use --cacert FILE or --insecure"
        );
        assert!(
            e.downcast_ref::<crate::UsageError>().is_none(),
            "exit 1, not 2"
        );
        let insecure = client_config(&TlsOptions {
            insecure: true,
            cacert: None,
        })
        .unwrap();
        preflight_to(&insecure, "127.0.0.1", port).unwrap();
    }

    /// Why the preflight to a server of `pki`, trusting its CA (saved as `file`), refused it
    /// as `host`.
    fn refusal(pki: &Pki, file: &str, host: &str) -> String {
        let (port, _) = serve(pki, b"ok".to_vec(), 1);
        let config = trusting(pki, file);
        let e = preflight_to(&config, host, port).unwrap_err();
        format!("{e:#}")
    }

    #[test]
    fn preflight_names_a_certificate_for_another_host() {
        let pki = ca_signed_for(&["localhost"]);
        assert_eq!(
            refusal(&pki, "name.pem", "127.0.0.1"),
            "TLS: certificate is not valid for 127.0.0.1 (NotValidForName; it names localhost); target a name it has, or use --insecure"
        );
    }

    #[test]
    fn preflight_says_a_certificate_has_expired() {
        let pki = ca_signed_with(&["localhost"], |params| {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        });
        assert_eq!(
            refusal(&pki, "expired.pem", "localhost"),
            "TLS: certificate for localhost has expired (Expired); use --insecure to accept it"
        );
    }

    #[test]
    fn preflight_says_when_the_server_does_not_speak_tls() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut tcp, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = tcp.read(&mut buf);
            let _ = tcp.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        });
        let config = client_config(&TlsOptions::default()).unwrap();
        let e = preflight_to(&config, "127.0.0.1", port).unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "TLS: 127.0.0.1 did not answer with TLS (is it an http:// server?)"
        );
    }

    #[test]
    fn cacert_problems_are_usage_errors() {
        let missing = client_config(&TlsOptions {
            insecure: false,
            cacert: Some("/nonexistent/ca.pem".into()),
        })
        .unwrap_err();
        assert!(missing.downcast_ref::<crate::UsageError>().is_some());
        assert!(
            format!("{missing}").starts_with("--cacert /nonexistent/ca.pem: cannot read it ("),
            "{missing}"
        );
        let empty = temp_file("empty.pem", "not a certificate\n");
        let e = client_config(&TlsOptions {
            insecure: false,
            cacert: Some(empty.clone()),
        })
        .unwrap_err();
        std::fs::remove_file(&empty).unwrap();
        assert!(e.downcast_ref::<crate::UsageError>().is_some());
        assert_eq!(
            format!("{e}"),
            format!(
                "--cacert {}: no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)",
                empty.display()
            )
        );
        assert!(server_name("bad_host!")
            .unwrap_err()
            .downcast_ref::<crate::UsageError>()
            .is_some());
    }

    #[test]
    fn describes_certificate_failures_by_name() {
        let d = |e: CertificateError| describe(&rustls::Error::InvalidCertificate(e), "h");
        assert_eq!(
            d(CertificateError::Expired),
            "certificate for h has expired (Expired); use --insecure to accept it"
        );
        assert_eq!(
            d(CertificateError::BadSignature),
            "certificate for h rejected (BadSignature); use --cacert FILE or --insecure"
        );
        assert_eq!(
            describe(&rustls::Error::NoApplicationProtocol, "h"),
            "h does not speak http/1.1 over TLS (no common ALPN protocol)"
        );
    }
}
