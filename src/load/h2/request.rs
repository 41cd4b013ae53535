//! The requests of an HTTP/2 run, built once before it: each line's method, URI (scheme,
//! authority, path) and headers as the `http` crate's types, and its body, so that a stream
//! clones a template instead of parsing anything. HTTP/1.1's connection headers (`Host`
//! becomes `:authority`; `Connection`, `Keep-Alive`, `Transfer-Encoding`, `Upgrade`,
//! `Proxy-Connection`) have no place in HTTP/2 and are left out, as RFC 9113 §8.2.2 says.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri};

use crate::load::{LoadConfig, Target};

/// Headers HTTP/2 forbids (or carries as a pseudo-header).
const CONNECTION_HEADERS: [&str; 6] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// One request line, ready to send.
#[derive(Debug, Clone)]
pub struct Template {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    /// Empty: the HEADERS frame ends the stream.
    pub body: Bytes,
}

impl Template {
    /// The request head to send (its body goes after, see [`Template::body`]).
    pub fn head(&self) -> Request<()> {
        let mut request = Request::new(());
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// The lines of a run: one, or those of `--urls`, in the rotation's order.
#[derive(Debug, Clone)]
pub struct H2Requests {
    lines: Vec<Template>,
}

impl H2Requests {
    /// The requests of `config` (its target, or its `--urls` lines with `-H` on each). An
    /// error is one line, for a usage error.
    pub fn of(config: &LoadConfig) -> Result<H2Requests, String> {
        let tls = config.target.is_tls();
        let lines = match (&config.urls, &config.target) {
            (Some(list), _) => list
                .requests
                .iter()
                .map(|r| {
                    let mut headers: Vec<(String, String)> = config
                        .headers
                        .iter()
                        .filter(|(n, _)| !r.headers.iter().any(|(m, _)| m.eq_ignore_ascii_case(n)))
                        .cloned()
                        .collect();
                    headers.extend(r.headers.iter().cloned());
                    template(
                        &r.method,
                        tls,
                        &r.host_header,
                        &r.path_and_query,
                        &headers,
                        &r.body,
                    )
                    .map_err(|e| format!("--urls {} line {}: {e}", list.file, r.line))
                })
                .collect::<Result<Vec<_>, _>>()?,
            (
                None,
                Target::Http {
                    host_header,
                    path_and_query,
                    ..
                },
            ) => vec![template(
                &config.method,
                tls,
                host_header,
                path_and_query,
                &config.headers,
                &config.body,
            )?],
            (None, Target::Echo { .. }) => return Err("HTTP/2 needs an http:// target".into()),
        };
        Ok(H2Requests { lines })
    }

    /// Line `line` of the rotation.
    pub fn line(&self, line: usize) -> &Template {
        &self.lines[line]
    }

    pub fn lines(&self) -> usize {
        self.lines.len()
    }
}

/// One template: `authority` is what HTTP/1.1 would send as `Host` (a `-H Host:` overrides it).
fn template(
    method: &str,
    tls: bool,
    authority: &str,
    path_and_query: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<Template, String> {
    let authority = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map_or(authority, |(_, v)| v.as_str());
    let scheme = if tls { "https" } else { "http" };
    let uri: Uri = format!("{scheme}://{authority}{path_and_query}")
        .parse()
        .map_err(|e| format!("not a URI for HTTP/2: {e}"))?;
    let method = Method::from_bytes(method.as_bytes()).map_err(|e| format!("-m: {e}"))?;
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if CONNECTION_HEADERS.contains(&lower.as_str()) {
            continue;
        }
        let name =
            HeaderName::from_bytes(lower.as_bytes()).map_err(|e| format!("-H {name}: {e}"))?;
        let value = HeaderValue::from_str(value).map_err(|e| format!("-H {name}: {e}"))?;
        map.append(name, value);
    }
    if !body.is_empty() && !map.contains_key(http::header::CONTENT_LENGTH) {
        map.insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    Ok(Template {
        method,
        uri,
        headers: map,
        body: Bytes::copy_from_slice(body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_moves_host_to_the_authority_and_drops_connection_headers() {
        let headers = vec![
            ("Host".to_string(), "example.test:8080".to_string()),
            ("Connection".to_string(), "close".to_string()),
            ("X-Trace".to_string(), "1".to_string()),
        ];
        let t = template(
            "POST",
            false,
            "127.0.0.1:80",
            "/guestbook?x=1",
            &headers,
            b"hi",
        )
        .unwrap();
        let head = t.head();
        assert_eq!(head.method(), Method::POST);
        assert_eq!(
            head.uri().to_string(),
            "http://example.test:8080/guestbook?x=1"
        );
        assert_eq!(head.headers().len(), 2);
        assert_eq!(head.headers()["x-trace"], "1");
        assert_eq!(head.headers()["content-length"], "2");
        assert_eq!(&t.body[..], b"hi");
        let tls = template("GET", true, "h:443", "/", &[], b"").unwrap();
        assert_eq!(tls.head().uri().scheme_str(), Some("https"));
        assert!(tls.body.is_empty());
        assert!(template("G ET", false, "h", "/", &[], b"").is_err());
    }
}
