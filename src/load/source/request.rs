//! The bytes every connection sends, serialized once before the run.
//!
//! The hot path never formats a request: it writes a slice of a buffer built here, which holds
//! `pipeline` copies back to back so a batch of pipelined requests is one write.

use crate::load::target::Target;

/// One request (an HTTP request or an echo query) repeated `pipeline` times.
#[derive(Debug, Clone)]
pub struct RequestBytes {
    batch: Vec<u8>,
    one_len: usize,
}

impl RequestBytes {
    /// Serializes the request for `target` and repeats it `pipeline` times.
    ///
    /// HTTP: `Host` comes from the target unless a `Host` header is given; a body gets a
    /// `Content-Length` unless one is given; without keep-alive the request says
    /// `Connection: close`. Echo: `message_len` bytes ending in a newline.
    pub fn build(
        target: &Target,
        method: &str,
        headers: &[(String, String)],
        body: &[u8],
        keepalive: bool,
        message_len: usize,
        pipeline: usize,
    ) -> RequestBytes {
        let one = match target {
            Target::Http {
                path_and_query,
                host_header,
                ..
            } => http_request(
                method,
                path_and_query,
                host_header,
                headers,
                body,
                keepalive,
            ),
            Target::Echo { .. } => echo_message(message_len),
        };
        let pipeline = pipeline.max(1);
        let mut batch = Vec::with_capacity(one.len() * pipeline);
        for _ in 0..pipeline {
            batch.extend_from_slice(&one);
        }
        RequestBytes {
            one_len: one.len(),
            batch,
        }
    }

    /// The bytes of `count` requests back to back (`count` at most the pipeline depth).
    #[inline]
    pub fn batch(&self, count: usize) -> &[u8] {
        &self.batch[..self.one_len * count]
    }

    /// The length of one request.
    pub fn len(&self) -> usize {
        self.one_len
    }

    pub fn is_empty(&self) -> bool {
        self.one_len == 0
    }
}

fn has_header(headers: &[(String, String)], name: &str) -> bool {
    headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
}

fn http_request(
    method: &str,
    path_and_query: &str,
    host_header: &str,
    headers: &[(String, String)],
    body: &[u8],
    keepalive: bool,
) -> Vec<u8> {
    let mut head = format!("{method} {path_and_query} HTTP/1.1\r\n");
    if !has_header(headers, "host") {
        head.push_str(&format!("Host: {host_header}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let method_expects_body = ["POST", "PUT", "PATCH"]
        .iter()
        .any(|m| m.eq_ignore_ascii_case(method));
    if (!body.is_empty() || method_expects_body) && !has_header(headers, "content-length") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if !keepalive && !has_header(headers, "connection") {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// The largest request body `--body @FILE` reads: 1 MiB.
pub const MAX_BODY_FILE_BYTES: u64 = 1 << 20;

/// Reads a `--body @FILE` body: a regular file of at most [`MAX_BODY_FILE_BYTES`]. A device
/// (`/dev/zero`), a pipe or a growing file never makes the generator read without bound.
pub fn read_body_file(path: &str) -> Result<Vec<u8>, String> {
    use crate::os::FileRefused;
    crate::os::read_regular_file(path.as_ref(), MAX_BODY_FILE_BYTES).map_err(|e| match e {
        FileRefused::Io(e) => format!("cannot read {path}: {e}"),
        FileRefused::NotRegular => format!("{path} is not a regular file"),
        FileRefused::TooLarge => {
            format!("{path} is larger than {MAX_BODY_FILE_BYTES} bytes (1 MiB)")
        }
    })
}

/// A printable line of exactly `message_len` bytes, the last one a newline.
fn echo_message(message_len: usize) -> Vec<u8> {
    let len = message_len.max(1);
    (0..len).map(|i| echo_byte(len, i)).collect()
}

/// Byte `i` of the echo query of `message_len` bytes (at least 1): what the reply must hold
/// at that offset. Computed rather than stored, so framing a reply needs no copy of the query.
#[inline]
pub fn echo_byte(message_len: usize, i: usize) -> u8 {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    if i + 1 == message_len {
        b'\n'
    } else {
        ALPHABET[i % ALPHABET.len()]
    }
}

/// A byte allowed in a method or a header name (RFC 9110 `tchar`).
pub fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `Name: value` as given to `-H` or `H:`: a token name, no CR, LF or NUL in the value.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| "expected \"Name: value\"".to_string())?;
    let name = name.trim();
    if name.is_empty() || !name.bytes().all(is_token_byte) {
        return Err(format!("invalid header name {name:?}"));
    }
    let value = value.trim();
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err("header values cannot contain CR, LF or NUL".into());
    }
    Ok((name.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target::parse("http://127.0.0.1:8080/hello?x=1").unwrap()
    }

    #[test]
    fn get_is_minimal() {
        let r = RequestBytes::build(&target(), "GET", &[], b"", true, 0, 1);
        assert_eq!(
            r.batch(1),
            b"GET /hello?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"
        );
    }

    #[test]
    fn post_with_headers_body_and_close() {
        let headers = vec![(
            "Content-Type".to_string(),
            "application/x-www-form-urlencoded".to_string(),
        )];
        let r = RequestBytes::build(&target(), "POST", &headers, b"a=1&b=2", false, 0, 1);
        assert_eq!(
            r.batch(1),
            &b"POST /hello?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\nConnection: close\r\n\r\na=1&b=2"[..]
        );
    }

    #[test]
    fn user_host_header_wins_and_pipeline_repeats() {
        let headers = vec![("host".to_string(), "example".to_string())];
        let r = RequestBytes::build(&target(), "GET", &headers, b"", true, 0, 3);
        let one = b"GET /hello?x=1 HTTP/1.1\r\nhost: example\r\n\r\n";
        assert_eq!(r.len(), one.len());
        assert_eq!(r.batch(3), [&one[..], one, one].concat());
    }

    #[test]
    fn echo_message_has_exact_length_and_newline() {
        let t = Target::parse("tcp://127.0.0.1:7000").unwrap();
        let r = RequestBytes::build(&t, "GET", &[], b"", true, 40, 2);
        assert_eq!(r.len(), 40);
        assert_eq!(r.batch(1)[39], b'\n');
        assert!(!r.batch(1)[..39].contains(&b'\n'));
        assert_eq!(
            RequestBytes::build(&t, "GET", &[], b"", true, 1, 1).batch(1),
            b"\n"
        );
    }
}
