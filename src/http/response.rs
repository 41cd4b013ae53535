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

/// What a response says of the connection after it (RFC 9112 9.3): an HTTP/1.1 connection
/// persists unless one side says `close`, so keeping it open needs no header; an HTTP/1.0
/// client that asked for keep-alive is told it was granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persist {
    /// HTTP/1.1 kept open: no header.
    Default,
    /// HTTP/1.0 kept open: `Connection: keep-alive`.
    KeepAlive,
    /// Closed after the response: `Connection: close`.
    Close,
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
    /// `persist` chooses the Connection header. A file body is not written: the caller
    /// streams it after this.
    pub fn write_to(&self, out: &mut Vec<u8>, persist: Persist, head: bool) {
        // Written piece by piece rather than through `write!`: this runs once per reply, and
        // the formatting machinery was a visible share of a small reply's cost.
        out.extend_from_slice(b"HTTP/1.1 ");
        push_decimal(out, self.status as u64);
        out.push(b' ');
        out.extend_from_slice(status_reason(self.status).as_bytes());
        out.extend_from_slice(b"\r\nServer: sweetspot\r\nDate: ");
        push_date(out);
        out.extend_from_slice(b"\r\nContent-Type: ");
        out.extend_from_slice(self.content_type.as_bytes());
        out.extend_from_slice(b"\r\nContent-Length: ");
        push_decimal(out, self.content_length());
        out.extend_from_slice(b"\r\n");
        for (name, value) in &self.headers {
            let _ = write!(out, "{name}: {value}\r\n");
        }
        out.extend_from_slice(match persist {
            Persist::Default => b"\r\n",
            Persist::KeepAlive => b"Connection: keep-alive\r\n\r\n",
            Persist::Close => b"Connection: close\r\n\r\n",
        });
        if !head {
            out.extend_from_slice(&self.body);
        }
    }
}

/// Appends `n` in decimal.
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends the current time as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`), formatted
/// once per second per thread: the coarse realtime clock (no hardware read) says which
/// second it is.
fn push_date(out: &mut Vec<u8>) {
    use std::cell::Cell;
    use std::time::{Duration, UNIX_EPOCH};
    const LEN: usize = 29;
    thread_local! {
        static CACHED: Cell<(u64, [u8; LEN])> = const { Cell::new((u64::MAX, [0; LEN])) };
    }
    let secs = crate::sys::coarse_unix_seconds();
    let (cached_secs, mut text) = CACHED.get();
    if cached_secs != secs {
        let date = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
        match <[u8; LEN]>::try_from(date.as_bytes()) {
            Ok(bytes) => {
                text = bytes;
                CACHED.set((secs, text));
            }
            // Not reached for any time this program will see (years 1970 to 9999 are
            // all 29 bytes); written out plainly rather than cached if it ever is.
            Err(_) => {
                out.extend_from_slice(date.as_bytes());
                return;
            }
        }
    }
    out.extend_from_slice(&text);
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
        Response::text(200, "Hello").write_to(&mut out, Persist::Close, true);
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

    #[test]
    fn a_reply_is_exactly_its_status_line_headers_and_body() {
        let mut out = b"before|".to_vec();
        Response::text(404, "gone\n")
            .with_header("Allow", "GET, HEAD")
            .write_to(&mut out, Persist::KeepAlive, false);
        let text = String::from_utf8(out).unwrap();
        let date_at = text.find("Date: ").unwrap() + 6;
        let date = &text[date_at..date_at + 29];
        assert!(httpdate::parse_http_date(date).is_ok(), "{date}");
        assert_eq!(
            text.replace(date, "DATE"),
            "before|HTTP/1.1 404 Not Found\r\nServer: sweetspot\r\nDate: DATE\r\n\
             Content-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n\
             Allow: GET, HEAD\r\nConnection: keep-alive\r\n\r\ngone\n"
        );
        // HTTP/1.1 kept open: no Connection header at all.
        let mut out = Vec::new();
        Response::text(200, "ok").write_to(&mut out, Persist::Default, false);
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("Connection"), "{text}");
        assert!(text.ends_with("Content-Length: 2\r\n\r\nok"), "{text}");
    }

    #[test]
    fn decimals_are_written_like_display() {
        for n in [0, 7, 10, 99, 100, 65_535, 1 << 40, u64::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }

    #[test]
    fn the_cached_date_is_the_current_second() {
        for _ in 0..3 {
            let mut out = Vec::new();
            push_date(&mut out);
            let sent = httpdate::parse_http_date(std::str::from_utf8(&out).unwrap()).unwrap();
            let now = std::time::SystemTime::now();
            let age = now.duration_since(sent).unwrap();
            assert!(age < std::time::Duration::from_secs(2), "{age:?}");
        }
    }
}
