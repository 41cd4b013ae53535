//! Request parsing: one complete request at a time out of a connection's input buffer.
//!
//! Limits are part of the contract: headers over 8 KiB get 431, a target over 4 KiB 414, a
//! body over 1 MiB 413 (chunked bodies are decoded, RFC 9112 7.1), Content-Length together
//! with Transfer-Encoding 400 (a request-smuggling shape), a transfer coding other than
//! chunked 501, an HTTP/1.1 request without exactly one Host 400, an unknown method 501 and
//! a known but unsupported one 405. Absolute-form targets are accepted and HTTP/1.2 and
//! later minors are read as HTTP/1.1.

use std::mem::MaybeUninit;

/// Largest request head (request line plus headers) accepted.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// Largest request body accepted.
pub const MAX_BODY: usize = 1024 * 1024;
const MAX_HEADERS: usize = 64;

/// The methods the app answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
}

/// One parsed request, with its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// The path as sent, still percent-encoded, without the query.
    pub path: String,
    /// The query string after `?`, if any, still encoded.
    pub query: Option<String>,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// An HTTP/1.0 request (whose keep-alive the response must announce).
    pub http10: bool,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first value of query parameter `name`, decoded.
    pub fn query_param(&self, name: &str) -> Option<String> {
        let query = self.query.as_deref()?;
        form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }
}

/// A request that cannot be served; the status to answer with, after which the connection
/// is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("malformed request")]
    BadRequest,
    #[error("request headers too large")]
    HeadersTooLarge,
    #[error("request target too long")]
    UriTooLong,
    #[error("request body too large")]
    BodyTooLarge,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("not implemented")]
    NotImplemented,
}

impl HttpError {
    /// The response status for this error.
    pub fn status(self) -> u16 {
        match self {
            HttpError::BadRequest => 400,
            HttpError::HeadersTooLarge => 431,
            HttpError::UriTooLong => 414,
            HttpError::BodyTooLarge => 413,
            HttpError::MethodNotAllowed => 405,
            HttpError::NotImplemented => 501,
        }
    }
}

/// Parses requests out of a byte buffer; holds no state between calls beyond the buffer the
/// caller owns, so pipelined requests come out one by one, in order.
#[derive(Debug, Default, Clone, Copy)]
pub struct RequestParser;

/// What the head of a request says, owned, so a patched copy of the head can be parsed.
struct Head {
    len: usize,
    method: &'static str,
    target: String,
    minor: u8,
    content_length: Option<usize>,
    transfer_encoding: Option<String>,
    connection_close: bool,
    connection_keep_alive: bool,
    content_type: Option<String>,
    hosts: usize,
    expect_continue: bool,
}

impl RequestParser {
    /// Whether the request head at the front of `buf` is complete (or already malformed):
    /// what the header deadline watches.
    pub fn head_complete(buf: &[u8]) -> bool {
        !matches!(parse_head(buf), Ok(None))
    }

    /// Whether the client waits for `100 Continue` before sending the body of the request at
    /// the front of `buf`: an HTTP/1.1 head with `Expect: 100-continue` is complete, its
    /// body is not all there, and nothing is wrong with it so far.
    pub fn wants_continue(buf: &[u8]) -> bool {
        matches!(parse_head(buf), Ok(Some(head)) if head.expect_continue && head.minor >= 1)
            && matches!(Self::parse(buf), Ok(None))
    }

    /// Tries to parse one complete request from the front of `buf`.
    ///
    /// Returns `Ok(Some((request, consumed)))` when a whole request (head and body) is there,
    /// `Ok(None)` when more bytes are needed, or the error to answer with.
    pub fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, HttpError> {
        let Some(head) = parse_head(buf)? else {
            return Ok(None);
        };
        let chunked = match head.transfer_encoding.as_deref() {
            None => false,
            Some(_) if head.content_length.is_some() => return Err(HttpError::BadRequest),
            Some(te) if te.trim().eq_ignore_ascii_case("chunked") => true,
            // Other codings (gzip, chunked not last, ...) are not supported.
            Some(_) => return Err(HttpError::NotImplemented),
        };
        if head.content_length.is_some_and(|n| n > MAX_BODY) {
            return Err(HttpError::BodyTooLarge);
        }
        let method = match head.method {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" | "DELETE" | "PATCH" | "OPTIONS" | "CONNECT" | "TRACE" => {
                return Err(HttpError::MethodNotAllowed)
            }
            _ => return Err(HttpError::NotImplemented),
        };
        if head.target.len() > MAX_TARGET_BYTES {
            return Err(HttpError::UriTooLong);
        }
        let target = origin_form(&head.target).ok_or(HttpError::BadRequest)?;
        // RFC 9112 3.2: exactly one Host in HTTP/1.1, at most one before.
        if head.hosts > 1 || (head.minor >= 1 && head.hosts == 0) {
            return Err(HttpError::BadRequest);
        }
        let (body, total) = if chunked {
            match decode_chunked(&buf[head.len..])? {
                Some((body, used)) => (body, head.len + used),
                None => return Ok(None),
            }
        } else {
            let total = head.len + head.content_length.unwrap_or(0);
            if buf.len() < total {
                return Ok(None);
            }
            (buf[head.len..total].to_vec(), total)
        };
        let keep_alive = match head.minor {
            0 => head.connection_keep_alive && !head.connection_close,
            _ => !head.connection_close,
        };
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p.to_string(), Some(q.to_string())),
            None => (target.to_string(), None),
        };
        let request = Request {
            method,
            path,
            query,
            keep_alive,
            http10: head.minor == 0,
            content_type: head.content_type,
            body,
        };
        Ok(Some((request, total)))
    }
}

/// Longest request target accepted (longer: 414).
pub const MAX_TARGET_BYTES: usize = 4096;

/// Parses the head at the front of `buf`; `Ok(None)` while it is incomplete. A higher
/// HTTP/1 minor version (HTTP/1.2) is read as HTTP/1.1 (RFC 9110 2.5), which httparse
/// refuses, so such a head is parsed from a copy with the version patched.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, HttpError> {
    match parse_head_as_is(buf) {
        Err(HttpError::BadRequest) => {
            let Some(at) = higher_minor_version(buf) else {
                // `GET / HTTP/1.2` with its line end still to come: wait for it, as the
                // whole line will be patched (so the outcome does not depend on the split).
                let line = buf.strip_suffix(b"\r").unwrap_or(buf);
                let waiting = !buf.contains(&b'\n')
                    && line.len() >= 9
                    && line[line.len() - 9..line.len() - 1] == *b" HTTP/1."
                    && (b'2'..=b'9').contains(&line[line.len() - 1]);
                return if waiting {
                    Ok(None)
                } else {
                    Err(HttpError::BadRequest)
                };
            };
            let end = buf.len().min(MAX_HEADER_BYTES + 1);
            let mut patched = buf[..end].to_vec();
            patched[at] = b'1';
            let head = parse_head_as_is(&patched)?;
            Ok(head)
        }
        other => other,
    }
}

/// Where the minor digit of `HTTP/1.N` (N at least 2) ends the request line, if it does.
fn higher_minor_version(buf: &[u8]) -> Option<usize> {
    let line_end = buf
        .iter()
        .take(MAX_HEADER_BYTES)
        .position(|&b| b == b'\n')?;
    let line = buf[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&buf[..line_end]);
    let version = line.get(line.len().checked_sub(9)?..)?;
    (version[0] == b' ' && &version[1..8] == b"HTTP/1." && (b'2'..=b'9').contains(&version[8]))
        .then_some(line.len() - 1)
}

/// Every verdict on a head depends only on a fixed-length prefix of the input (the request
/// line's first [`LINE_WINDOW`] bytes, the head's first [`MAX_HEADER_BYTES`]), so it is the
/// same however the input was split into reads (the property `http::fuzz` checks).
const LINE_WINDOW: usize = MAX_TARGET_BYTES + 64;

/// `method` as one of the names [`RequestParser::parse`] tells apart, or `""` for any other.
fn known_method(method: &str) -> &'static str {
    [
        "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE",
    ]
    .into_iter()
    .find(|m| *m == method)
    .unwrap_or("")
}

fn parse_head_as_is(buf: &[u8]) -> Result<Option<Head>, HttpError> {
    // Left uninitialised: httparse fills only what it parses, and zeroing 64 headers (2 KiB)
    // for every request showed in a profile of small requests.
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    if buf.len() > LINE_WINDOW && !buf[..LINE_WINDOW].contains(&b'\n') {
        // A request line this long: 414 if what there is of it is well formed so far.
        let mut req = httparse::Request::new(&mut []);
        return match req.parse_with_uninit_headers(&buf[..LINE_WINDOW], &mut headers) {
            Ok(httparse::Status::Partial) => Err(HttpError::UriTooLong),
            _ => Err(HttpError::BadRequest),
        };
    }
    let window = &buf[..buf.len().min(MAX_HEADER_BYTES)];
    let mut req = httparse::Request::new(&mut []);
    let head_len = match req.parse_with_uninit_headers(window, &mut headers) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > MAX_HEADER_BYTES {
                return Err(HttpError::HeadersTooLarge);
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::HeadersTooLarge),
        Err(_) => return Err(HttpError::BadRequest),
    };
    let mut head = Head {
        len: head_len,
        // The method as one of the names the server knows (no allocation per request).
        method: known_method(req.method.ok_or(HttpError::BadRequest)?),
        target: req.path.ok_or(HttpError::BadRequest)?.to_string(),
        minor: req.version.ok_or(HttpError::BadRequest)?,
        content_length: None,
        transfer_encoding: None,
        connection_close: false,
        connection_keep_alive: false,
        content_type: None,
        hosts: 0,
        expect_continue: false,
    };
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let text = std::str::from_utf8(h.value).map_err(|_| HttpError::BadRequest)?;
            let text = text.trim();
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(HttpError::BadRequest);
            }
            let n: usize = text.parse().unwrap_or(usize::MAX);
            if head.content_length.is_some_and(|prev| prev != n) {
                return Err(HttpError::BadRequest);
            }
            head.content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            let value = String::from_utf8_lossy(h.value);
            head.transfer_encoding = Some(match head.transfer_encoding.take() {
                // Repeated fields are one comma-separated list.
                Some(prev) => format!("{prev}, {value}"),
                None => value.into_owned(),
            });
        } else if name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                head.connection_close |= token.eq_ignore_ascii_case(b"close");
                head.connection_keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("content-type") {
            head.content_type = Some(String::from_utf8_lossy(h.value).into_owned());
        } else if name.eq_ignore_ascii_case("host") {
            head.hosts += 1;
        } else if name.eq_ignore_ascii_case("expect") {
            head.expect_continue |= h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
    }
    Ok(Some(head))
}

/// The origin-form of a request target: itself when it starts with `/`, the path and query
/// of an absolute-form `http://host/path?q` target (RFC 9112 3.2.2: a server MUST accept
/// it), `None` for anything else.
fn origin_form(target: &str) -> Option<&str> {
    if target.starts_with('/') {
        return Some(target);
    }
    let lower = target.get(..8).unwrap_or(target).to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &target[7..]
    } else if lower.starts_with("https://") {
        &target[8..]
    } else {
        return None;
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    if authority_end == 0 {
        return None;
    }
    match &rest[authority_end..] {
        "" => Some("/"),
        path if path.starts_with('/') => Some(path),
        // `http://host?q`: the path is empty, which means `/`; the query alone is kept
        // by splitting on `?` later, so leave it to a leading `/` the caller cannot add.
        _ => None,
    }
}

/// Decodes a chunked body at the front of `buf` (RFC 9112 7.1): the body and how many
/// bytes it took, `None` while incomplete. Over [`MAX_BODY`] decoded, or over that plus
/// 64 KiB encoded (tiny chunks), is 413; trailer fields are read and dropped.
fn decode_chunked(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, HttpError> {
    const MAX_ENCODED: usize = MAX_BODY + 64 * 1024;
    let mut pos = 0;
    let mut body = Vec::new();
    loop {
        if pos > MAX_ENCODED {
            return Err(HttpError::BodyTooLarge);
        }
        // A chunk-size line (with extensions) is judged on its first 1 KiB only.
        let window = &buf[pos..buf.len().min(pos + 1024)];
        let (used, size) = match httparse::parse_chunk_size(window) {
            Ok(httparse::Status::Complete(c)) => c,
            Ok(httparse::Status::Partial) => {
                return if buf.len() - pos > 1024 {
                    Err(HttpError::BadRequest)
                } else {
                    Ok(None)
                };
            }
            Err(_) => return Err(HttpError::BadRequest),
        };
        pos += used;
        if size == 0 {
            break;
        }
        let size = usize::try_from(size).map_err(|_| HttpError::BodyTooLarge)?;
        if body.len() + size > MAX_BODY {
            return Err(HttpError::BodyTooLarge);
        }
        if buf.len() < pos + size + 2 {
            return if pos + size + 2 - buf.len() > MAX_ENCODED {
                Err(HttpError::BodyTooLarge)
            } else {
                Ok(None)
            };
        }
        body.extend_from_slice(&buf[pos..pos + size]);
        if &buf[pos + size..pos + size + 2] != b"\r\n" {
            return Err(HttpError::BadRequest);
        }
        pos += size + 2;
    }
    // Trailer section: fields up to an empty line.
    loop {
        let Some(line_len) = buf[pos..].iter().position(|&b| b == b'\n') else {
            return if buf.len() - pos > MAX_HEADER_BYTES {
                Err(HttpError::HeadersTooLarge)
            } else {
                Ok(None)
            };
        };
        if line_len > MAX_HEADER_BYTES {
            return Err(HttpError::HeadersTooLarge);
        }
        let line = &buf[pos..pos + line_len];
        pos += line_len + 1;
        if line.is_empty() || line == b"\r" {
            return Ok(Some((body, pos)));
        }
        if pos > MAX_ENCODED + MAX_HEADER_BYTES {
            return Err(HttpError::HeadersTooLarge);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Option<(Request, usize)>, HttpError> {
        RequestParser::parse(s.as_bytes())
    }

    #[test]
    fn parses_a_get_with_query_and_keeps_http11_alive() {
        let (req, used) = parse("GET /fib?n=10 HTTP/1.1\r\nHost: x\r\n\r\nGET /next")
            .unwrap()
            .unwrap();
        assert_eq!(req.method, Method::Get);
        assert_eq!(req.path, "/fib");
        assert_eq!(req.query_param("n").as_deref(), Some("10"));
        assert!(req.keep_alive);
        assert_eq!(used, "GET /fib?n=10 HTTP/1.1\r\nHost: x\r\n\r\n".len());
    }

    #[test]
    fn http10_closes_unless_asked_and_connection_close_is_honoured() {
        let req = |s| parse(s).unwrap().unwrap().0.keep_alive;
        assert!(!req("GET / HTTP/1.0\r\n\r\n"));
        assert!(req("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
        assert!(!req(
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        ));
    }

    #[test]
    fn waits_for_the_whole_body() {
        assert_eq!(
            parse("POST /g HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab"),
            Ok(None)
        );
        let (req, _) = parse("POST /g HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde")
            .unwrap()
            .unwrap();
        assert_eq!(req.body, b"abcde");
    }

    #[test]
    fn tells_a_complete_head_from_a_partial_one() {
        assert!(!RequestParser::head_complete(b""));
        assert!(!RequestParser::head_complete(
            b"GET / HTTP/1.1\r\nHost: x\r\n"
        ));
        assert!(RequestParser::head_complete(
            b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nab"
        ));
        assert!(RequestParser::head_complete(b"\x01garbage\r\n\r\n"));
    }

    #[test]
    fn bad_input_gets_the_contract_status() {
        let status = |s: &str| RequestParser::parse(s.as_bytes()).unwrap_err().status();
        assert_eq!(status("GARBAGE\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"), 400);
        assert_eq!(
            status("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"),
            501
        );
        assert_eq!(
            status("POST / HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n"),
            413
        );
        assert_eq!(status("DELETE / HTTP/1.1\r\n\r\n"), 405);
        assert_eq!(status("BREW / HTTP/1.1\r\n\r\n"), 501);
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(9000));
        assert_eq!(status(&big), 431);
        let partial_big = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(9000));
        assert_eq!(status(&partial_big), 431);
        let long_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(100_000));
        assert_eq!(status(&long_uri), 414);
        assert_eq!(status(&long_uri[..50_000]), 414);
        let uri_5k = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(5000));
        assert_eq!(status(&uri_5k), 414);
        assert_eq!(status("GET / HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 400);
        assert_eq!(status("GET ftp://x/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    }

    #[test]
    fn host_is_required_in_http11_only() {
        assert!(parse("GET / HTTP/1.0\r\n\r\n").unwrap().is_some());
        assert!(parse("GET / HTTP/1.1\r\nhOsT: a\r\n\r\n")
            .unwrap()
            .is_some());
    }

    #[test]
    fn absolute_form_targets_are_accepted() {
        for (target, path, query) in [
            ("http://example.com/fib?n=3", "/fib", Some("n=3")),
            ("HTTP://example.com:8080/a/b", "/a/b", None),
            ("https://h", "/", None),
        ] {
            let text = format!("GET {target} HTTP/1.1\r\nHost: example.com\r\n\r\n");
            let (req, _) = parse(&text).unwrap().unwrap();
            assert_eq!(
                (req.path.as_str(), req.query.as_deref()),
                (path, query),
                "{target}"
            );
        }
    }

    #[test]
    fn http12_is_read_as_http11() {
        let text = "GET /hello HTTP/1.2\r\nHost: x\r\n\r\nGET";
        let (req, used) = parse(text).unwrap().unwrap();
        assert_eq!(req.path, "/hello");
        assert!(req.keep_alive);
        assert_eq!(used, text.len() - 3);
        assert_eq!(parse("GET /hello HTTP/1.2\r\nHo"), Ok(None));
        assert_eq!(
            parse("GET /hello HTTP/1.2\r\n\r\n").unwrap_err().status(),
            400
        );
    }

    #[test]
    fn chunked_bodies_are_decoded() {
        let text = "POST /g HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
                    5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
        let (req, used) = parse(text).unwrap().unwrap();
        assert_eq!(req.body, b"hello, world");
        assert_eq!(used, text.len() - 4);
        // Every proper prefix is incomplete, never an error.
        for cut in 0..text.len() - 4 {
            assert_eq!(parse(&text[..cut]), Ok(None), "cut at {cut}");
        }
        let status = |s: &str| RequestParser::parse(s.as_bytes()).unwrap_err().status();
        let head = "POST /g HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(status(&format!("{head}zz\r\n")), 400);
        assert_eq!(status(&format!("{head}3\r\nabcXY")), 400);
        assert_eq!(status(&format!("{head}100001\r\n")), 413);
        let tiny = "1\r\na\r\n".repeat(200_000);
        assert_eq!(status(&format!("{head}{tiny}")), 413);
    }

    #[test]
    fn expect_100_continue_is_wanted_until_the_body_is_in() {
        let head =
            "POST /g HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
        assert!(RequestParser::wants_continue(head.as_bytes()));
        assert!(!RequestParser::wants_continue(
            format!("{head}abc").as_bytes()
        ));
        assert!(!RequestParser::wants_continue(&head.as_bytes()[..20]));
        let too_big = head.replace("Length: 3", "Length: 9999999");
        assert!(!RequestParser::wants_continue(too_big.as_bytes()));
        let http10 = head.replace("HTTP/1.1", "HTTP/1.0");
        assert!(!RequestParser::wants_continue(http10.as_bytes()));
    }
}
