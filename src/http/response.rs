//! Responses and their serialisation, with keep-alive and HEAD handled in one place.
//!
//! A body is either bytes in memory or an open file ([`FileBody`]): a file is never read
//! into memory whole; the architecture streams it in bounded chunks after the head
//! ([`FileBody::read_chunk`]), and a HEAD reply reads none of it.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// How much of a file body is read per step: what a streamed file adds to a connection's
/// memory.
pub const FILE_CHUNK: usize = 64 * 1024;

/// A body streamed from an open file.
#[derive(Debug, Clone)]
pub struct FileBody {
    pub file: Arc<File>,
    pub len: u64,
}

impl PartialEq for FileBody {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.file, &other.file) && self.len == other.len
    }
}
impl Eq for FileBody {}

impl FileBody {
    /// Appends the bytes at `offset` (at most [`FILE_CHUNK`], never past `len`) to `out`;
    /// returns how many. A file that shrank under us ends the body early (0): the
    /// connection must then close, as its Content-Length can no longer be met.
    pub fn read_chunk(&self, offset: u64, out: &mut Vec<u8>) -> std::io::Result<usize> {
        let want = (self.len.saturating_sub(offset)).min(FILE_CHUNK as u64) as usize;
        let start = out.len();
        out.resize(start + want, 0);
        let mut got = 0;
        while got < want {
            match self
                .file
                .read_at(&mut out[start + got..], offset + got as u64)
            {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    out.truncate(start);
                    return Err(e);
                }
            }
        }
        out.truncate(start + got);
        Ok(got)
    }
}

/// An answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// When set, the body comes from this file instead of `body`.
    pub file: Option<FileBody>,
}

impl Response {
    /// A response with a body of the given type.
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
            file: None,
        }
    }

    /// A response whose body is streamed from `file`.
    pub fn file(status: u16, content_type: &'static str, file: FileBody) -> Response {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: Vec::new(),
            file: Some(file),
        }
    }

    /// The length of the body, wherever it comes from.
    pub fn content_length(&self) -> u64 {
        self.file.as_ref().map_or(self.body.len() as u64, |f| f.len)
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
    /// `keep_alive` chooses the Connection header. A file body is not written: the caller
    /// streams it after this.
    pub fn write_to(&self, out: &mut Vec<u8>, keep_alive: bool, head: bool) {
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\nServer: sweetspot\r\nDate: {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            self.status,
            status_reason(self.status),
            httpdate::fmt_http_date(std::time::SystemTime::now()),
            self.content_type,
            self.content_length()
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
        100 => "Continue",
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
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
        let date = text
            .lines()
            .find_map(|l| l.strip_prefix("Date: "))
            .expect("a Date header");
        let sent = httpdate::parse_http_date(date).unwrap();
        let age = std::time::SystemTime::now().duration_since(sent).unwrap();
        assert!(age < std::time::Duration::from_secs(2), "{date}");
    }
}
