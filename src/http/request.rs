//! Request parsing: one complete request at a time out of a connection's input buffer.
//!
//! Limits are part of the contract: headers over 8 KiB get 431, a body over 1 MiB gets 413,
//! Content-Length together with Transfer-Encoding gets 400 (a request-smuggling shape), a
//! chunked body gets 501, an unknown method 501 and a known but unsupported one 405.

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

impl RequestParser {
    /// Whether the request head at the front of `buf` is complete (or already malformed):
    /// what the header deadline watches.
    pub fn head_complete(buf: &[u8]) -> bool {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        !matches!(req.parse(buf), Ok(httparse::Status::Partial))
    }

    /// Tries to parse one complete request from the front of `buf`.
    ///
    /// Returns `Ok(Some((request, consumed)))` when a whole request (head and body) is there,
    /// `Ok(None)` when more bytes are needed, or the error to answer with.
    pub fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, HttpError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let head_len = match req.parse(buf) {
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
        if head_len > MAX_HEADER_BYTES {
            return Err(HttpError::HeadersTooLarge);
        }
        let method_name = req.method.ok_or(HttpError::BadRequest)?;
        let target = req.path.ok_or(HttpError::BadRequest)?;
        let version = req.version.ok_or(HttpError::BadRequest)?;

        let mut content_length: Option<usize> = None;
        let mut transfer_encoding = false;
        let mut connection_close = false;
        let mut connection_keep_alive = false;
        let mut content_type = None;
        for h in req.headers.iter() {
            let name = h.name;
            if name.eq_ignore_ascii_case("content-length") {
                let text = std::str::from_utf8(h.value).map_err(|_| HttpError::BadRequest)?;
                let text = text.trim();
                if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(HttpError::BadRequest);
                }
                let n: usize = text.parse().unwrap_or(usize::MAX);
                if content_length.is_some_and(|prev| prev != n) {
                    return Err(HttpError::BadRequest);
                }
                content_length = Some(n);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                transfer_encoding = true;
            } else if name.eq_ignore_ascii_case("connection") {
                let value = String::from_utf8_lossy(h.value).to_ascii_lowercase();
                for token in value.split(',').map(str::trim) {
                    connection_close |= token == "close";
                    connection_keep_alive |= token == "keep-alive";
                }
            } else if name.eq_ignore_ascii_case("content-type") {
                content_type = Some(String::from_utf8_lossy(h.value).into_owned());
            }
        }
        if transfer_encoding && content_length.is_some() {
            return Err(HttpError::BadRequest);
        }
        if transfer_encoding {
            // Chunked request bodies are refused rather than half-supported.
            return Err(HttpError::NotImplemented);
        }
        let body_len = content_length.unwrap_or(0);
        if body_len > MAX_BODY {
            return Err(HttpError::BodyTooLarge);
        }
        let method = match method_name {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" | "DELETE" | "PATCH" | "OPTIONS" | "CONNECT" | "TRACE" => {
                return Err(HttpError::MethodNotAllowed)
            }
            _ => return Err(HttpError::NotImplemented),
        };
        if !target.starts_with('/') {
            return Err(HttpError::BadRequest);
        }
        let total = head_len + body_len;
        if buf.len() < total {
            return Ok(None);
        }
        let keep_alive = match version {
            1 => !connection_close,
            _ => connection_keep_alive && !connection_close,
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
            content_type,
            body: buf[head_len..total].to_vec(),
        };
        Ok(Some((request, total)))
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
        assert!(!req("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
    }

    #[test]
    fn waits_for_the_whole_body() {
        assert_eq!(
            parse("POST /g HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"),
            Ok(None)
        );
        let (req, _) = parse("POST /g HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcde")
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
            status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
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
    }
}
