//! Responses and their serialisation, with keep-alive and HEAD handled in one place.

use std::io::Write;

/// An answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A response with a body of the given type.
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// A `text/plain` response.
    pub fn text(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response::new(status, "text/plain; charset=utf-8", body)
    }

    /// A plain-text error page carrying its reason phrase.
    pub fn error(status: u16) -> Response {
        Response::text(status, format!("{} {}\n", status, status_reason(status)))
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// Appends the response to `out`. `head` omits the body (but keeps its length);
    /// `keep_alive` chooses the Connection header.
    pub fn write_to(&self, out: &mut Vec<u8>, keep_alive: bool, head: bool) {
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\nServer: sweetspot\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            self.status,
            status_reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (name, value) in &self.headers {
            let _ = write!(out, "{name}: {value}\r\n");
        }
        out.extend_from_slice(if keep_alive {
            b"Connection: keep-alive\r\n\r\n"
        } else {
            b"Connection: close\r\n\r\n"
        });
        if !head {
            out.extend_from_slice(&self.body);
        }
    }
}

/// The reason phrase of the statuses sweetspot sends.
pub fn status_reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_keeps_the_length_and_drops_the_body() {
        let mut out = Vec::new();
        Response::text(200, "Hello").write_to(&mut out, false, true);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(text.contains("Content-Length: 5\r\n"));
        assert!(text.ends_with("Connection: close\r\n\r\n"));
    }
}
