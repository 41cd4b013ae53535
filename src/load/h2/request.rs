//! The requests of an HTTP/2 run, built once before it: each line's method, URI (scheme,
//! authority, path) and headers checked with the `http` crate's types and encoded once in
//! HPACK ([`Heads`]), and its body, so that a stream copies a template instead of parsing or
//! encoding anything. HTTP/1.1's connection headers (`Host`
//! becomes `:authority`; `Connection`, `Keep-Alive`, `Transfer-Encoding`, `Upgrade`,
//! `Proxy-Connection`) have no place in HTTP/2 and are left out, as RFC 9113 §8.2.2 says.

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Uri};

use super::hpack::{Heads, Line};
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
    method: String,
    scheme: &'static str,
    authority: String,
    path: String,
    /// Its other headers, names in lower case.
    fields: Vec<(String, String)>,
    /// Empty: the HEADERS frame ends the stream.
    pub body: Bytes,
}

impl Template {
    fn line(&self) -> Line<'_> {
        Line {
            method: &self.method,
            scheme: self.scheme,
            authority: &self.authority,
            path: &self.path,
            headers: &self.fields,
        }
    }
}

/// The lines of a run: one, or those of `--urls`, in the rotation's order.
#[derive(Debug, Clone)]
pub struct H2Requests {
    lines: Vec<Template>,
    /// Their heads, encoded.
    pub heads: Heads,
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
        let heads = Heads::new(&lines.iter().map(Template::line).collect::<Vec<_>>());
        Ok(H2Requests { lines, heads })
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
    Method::from_bytes(method.as_bytes()).map_err(|e| format!("-m: {e}"))?;
    let mut fields = Vec::new();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if CONNECTION_HEADERS.contains(&lower.as_str()) {
            continue;
        }
        HeaderName::from_bytes(lower.as_bytes()).map_err(|e| format!("-H {name}: {e}"))?;
        HeaderValue::from_str(value).map_err(|e| format!("-H {name}: {e}"))?;
        fields.push((lower, value.clone()));
    }
    if !body.is_empty() && !fields.iter().any(|(n, _)| n == "content-length") {
        fields.push(("content-length".into(), body.len().to_string()));
    }
    Ok(Template {
        method: method.to_string(),
        scheme,
        authority: uri.authority().map_or("", |a| a.as_str()).to_string(),
        path: uri.path_and_query().map_or("/", |p| p.as_str()).to_string(),
        fields,
        body: Bytes::copy_from_slice(body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(t: &Template) -> Vec<u8> {
        Heads::new(&[t.line()]).plain(0).to_vec()
    }

    fn decode(block: &[u8]) -> Vec<(String, String)> {
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        loona_hpack::Decoder::new()
            .decode(block)
            .unwrap()
            .into_iter()
            .map(|(n, v)| (text(&n), text(&v)))
            .collect()
    }

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
        let fields = decode(&plain(&t));
        assert_eq!(
            fields,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":authority", "example.test:8080"),
                (":path", "/guestbook?x=1"),
                ("x-trace", "1"),
                ("content-length", "2"),
            ]
            .map(|(n, v)| (n.to_string(), v.to_string()))
        );
        assert_eq!(&t.body[..], b"hi");
        let tls = template("GET", true, "h:443", "/", &[], b"").unwrap();
        let block = plain(&tls);
        assert_eq!(decode(&block)[1], (":scheme".into(), "https".into()));
        // Whole static entries are one byte each: GET, https and "/".
        assert_eq!(&block[..2], &[0x82, 0x87]);
        assert_eq!(block.last(), Some(&0x84));
        assert!(tls.body.is_empty());
        assert!(template("G ET", false, "h", "/", &[], b"").is_err());
    }
}
