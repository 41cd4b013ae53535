//! What the load generator talks to: an HTTP URL or a `tcp://` echo endpoint.
//!
//! Parsing is strict and local (no URL crate needed for `http[s]://host[:port][/path]`): anything
//! we cannot drive is refused up front with one line, so bad input exits 2 before a socket opens.
//! An `https://` target is the same HTTP/1.1 target over TLS (see the engine's `tls`).

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::Context;

/// A load target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An HTTP/1.1 server; `host_header` is what goes in the `Host:` header. `tls`: `https://`,
    /// the same requests over TLS (the certificate is checked against `host`, sent as SNI).
    Http {
        host: String,
        port: u16,
        path_and_query: String,
        host_header: String,
        tls: bool,
    },
    /// A line-echo server: every line sent comes back unchanged.
    Echo { host: String, port: u16 },
}

impl Target {
    /// Parses `http[s]://HOST[:PORT][/PATH[?QUERY]]` or `tcp://HOST:PORT`. Errors are usage
    /// errors.
    pub fn parse(s: &str) -> anyhow::Result<Target> {
        let bad = |why: &str| crate::usage(format!("invalid target {s:?}: {why}"));
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| bad("expected http[s]://HOST[:PORT]/PATH or tcp://HOST:PORT"))?;
        let scheme = scheme.to_ascii_lowercase();
        match scheme.as_str() {
            "http" | "https" => {
                let tls = scheme == "https";
                let default_port = if tls { 443 } else { 80 };
                let rest = rest.split('#').next().unwrap_or("");
                let (authority, path) = match rest.find(['/', '?']) {
                    Some(i) => (&rest[..i], &rest[i..]),
                    None => (rest, "/"),
                };
                let path_and_query = if path.starts_with('?') {
                    format!("/{path}")
                } else {
                    path.to_string()
                };
                if path_and_query.bytes().any(|b| b <= b' ' || b == 0x7f) {
                    return Err(bad("the path contains spaces or control characters"));
                }
                let (host, port) =
                    split_authority(authority, Some(default_port)).map_err(|w| bad(&w))?;
                let host_header = if port == default_port {
                    authority_host(authority).to_string()
                } else {
                    format!("{}:{port}", authority_host(authority))
                };
                Ok(Target::Http {
                    host,
                    port,
                    path_and_query,
                    host_header,
                    tls,
                })
            }
            "tcp" => {
                let authority = rest.trim_end_matches('/');
                if authority.contains('/') {
                    return Err(bad("a tcp:// target has no path"));
                }
                let (host, port) = split_authority(authority, None).map_err(|w| bad(&w))?;
                Ok(Target::Echo { host, port })
            }
            _ => Err(bad("the scheme must be http://, https:// or tcp://")),
        }
    }

    /// The host name or address to connect to.
    pub fn host(&self) -> &str {
        match self {
            Target::Http { host, .. } | Target::Echo { host, .. } => host,
        }
    }

    /// The TCP port to connect to.
    pub fn port(&self) -> u16 {
        match self {
            Target::Http { port, .. } | Target::Echo { port, .. } => *port,
        }
    }

    /// Whether this is an `https://` target.
    pub fn is_tls(&self) -> bool {
        matches!(self, Target::Http { tls: true, .. })
    }

    /// Resolves the host to socket addresses (IPv4 first), or fails with one line.
    pub fn resolve(&self) -> anyhow::Result<Vec<SocketAddr>> {
        let mut addrs: Vec<SocketAddr> = (self.host(), self.port())
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {}", self.host()))?
            .collect();
        addrs.sort_by_key(|a| a.is_ipv6());
        if addrs.is_empty() {
            anyhow::bail!("cannot resolve {}: no addresses", self.host());
        }
        Ok(addrs)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Http {
                host_header,
                path_and_query,
                tls,
                ..
            } => {
                let scheme = if *tls { "https" } else { "http" };
                write!(f, "{scheme}://{host_header}{path_and_query}")
            }
            Target::Echo { host, port } if host.contains(':') => write!(f, "tcp://[{host}]:{port}"),
            Target::Echo { host, port } => write!(f, "tcp://{host}:{port}"),
        }
    }
}

/// The host part of an authority as written (brackets kept for IPv6), for the Host header.
fn authority_host(authority: &str) -> &str {
    if authority.starts_with('[') {
        match authority.find(']') {
            Some(i) => &authority[..=i],
            None => authority,
        }
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    }
}

/// Splits `host[:port]` or `[v6]:port` into a connectable host and a port.
fn split_authority(authority: &str, default_port: Option<u16>) -> Result<(String, u16), String> {
    if authority.contains('@') {
        return Err("user information in the URL is not supported".into());
    }
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| "unclosed '[' in the host".to_string())?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err("unexpected text after ']'".into()),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("missing host".into());
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("invalid port {p:?}"))?,
        None => default_port.ok_or_else(|| "missing port (tcp://HOST:PORT)".to_string())?,
    };
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_with_port_path_and_query() {
        let t = Target::parse("http://127.0.0.1:8080/sleep?ms=50").unwrap();
        assert_eq!(
            t,
            Target::Http {
                host: "127.0.0.1".into(),
                port: 8080,
                path_and_query: "/sleep?ms=50".into(),
                host_header: "127.0.0.1:8080".into(),
                tls: false,
            }
        );
    }

    #[test]
    fn parses_https_with_its_default_port() {
        let t = Target::parse("https://localhost/x").unwrap();
        assert_eq!(
            t,
            Target::Http {
                host: "localhost".into(),
                port: 443,
                path_and_query: "/x".into(),
                host_header: "localhost".into(),
                tls: true,
            }
        );
        assert!(t.is_tls());
        assert_eq!(t.to_string(), "https://localhost/x");
        let p = Target::parse("HTTPS://[::1]:8443").unwrap();
        assert_eq!((p.host(), p.port()), ("::1", 8443));
        assert_eq!(p.to_string(), "https://[::1]:8443/");
        assert!(!Target::parse("http://h/").unwrap().is_tls());
    }

    #[test]
    fn defaults_port_80_and_root_path() {
        let t = Target::parse("http://example.com").unwrap();
        assert_eq!(t.port(), 80);
        match t {
            Target::Http {
                path_and_query,
                host_header,
                ..
            } => {
                assert_eq!(path_and_query, "/");
                assert_eq!(host_header, "example.com");
            }
            _ => panic!("not http"),
        }
        let q = Target::parse("http://h:81?x=1").unwrap();
        assert_eq!(q.to_string(), "http://h:81/?x=1");
    }

    #[test]
    fn parses_ipv6_and_echo() {
        let t = Target::parse("http://[::1]:9000/").unwrap();
        assert_eq!(t.host(), "::1");
        assert_eq!(t.to_string(), "http://[::1]:9000/");
        let e = Target::parse("tcp://127.0.0.1:7000").unwrap();
        assert_eq!(
            e,
            Target::Echo {
                host: "127.0.0.1".into(),
                port: 7000
            }
        );
    }

    #[test]
    fn refuses_what_it_cannot_drive() {
        for bad in [
            "127.0.0.1:80",
            "ftp://x/",
            "http://:80/",
            "http://h:99999/",
            "http://h:0/",
            "tcp://h",
            "tcp://h:1/path",
            "http://h/a b",
        ] {
            let err = Target::parse(bad).unwrap_err();
            assert!(err.downcast_ref::<crate::UsageError>().is_some(), "{bad}");
        }
    }
}
