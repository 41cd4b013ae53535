//! Sans-IO response framing: where one response ends and the next begins. The engine feeds
//! whatever bytes a read returned and learns when a response is complete, its status, and
//! whether the server will close. Heads are parsed with httparse; bodies are only counted
//! (Content-Length, chunked, close-delimited, none for HEAD, 1xx, 204 and 304: RFC 9112 6.3).
//! It is the hot path's parser, written here rather than taken from an HTTP client crate
//! because it must not allocate or copy per response; and a head byte for byte the same as the
//! last one (a server repeats it until its `Date` changes) is taken without parsing.

use crate::load::error::FramingError;
use crate::load::source::request::echo_byte;

/// A head that has not ended after this many bytes is refused.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;
/// Heads up to this long are remembered for reuse (see the module header).
const CACHED_HEAD_BYTES: usize = 512;

/// What the engine needs to know about a complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseInfo {
    /// HTTP status code; 0 for echo replies, which have none.
    pub status: u16,
    /// The server will close the connection after this response.
    pub close: bool,
}

/// The result of feeding bytes: how many were consumed, and the response they completed, if any.
/// When nothing is consumed and nothing completed, the caller keeps the bytes (a partial head)
/// and feeds them again with more appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    pub consumed: usize,
    pub complete: Option<ResponseInfo>,
}

/// Frames the responses of one connection, one after another.
#[derive(Debug, Clone)]
pub enum ResponseFramer {
    Http(HttpResponseFramer),
    Echo(EchoReplyFramer),
}

impl ResponseFramer {
    /// Consumes bytes up to the end of at most one response.
    #[inline]
    pub fn feed(&mut self, input: &[u8]) -> Result<Fed, FramingError> {
        match self {
            ResponseFramer::Http(f) => f.feed(input),
            ResponseFramer::Echo(f) => f.feed(input),
        }
    }

    /// The peer closed: completes a close-delimited response, if one is being read.
    pub fn on_eof(&mut self) -> Option<ResponseInfo> {
        match self {
            ResponseFramer::Http(f) => f.on_eof(),
            ResponseFramer::Echo(_) => None,
        }
    }

    /// True between responses (no response partly read).
    pub fn is_between_responses(&self) -> bool {
        match self {
            ResponseFramer::Http(f) => matches!(f.state, BodyState::Head),
            ResponseFramer::Echo(f) => f.received == 0,
        }
    }

    /// Forgets any partly read response (the connection is being replaced).
    pub fn reset(&mut self) {
        match self {
            ResponseFramer::Http(f) => f.state = BodyState::Head,
            ResponseFramer::Echo(f) => f.received = 0,
        }
    }
}

/// Frames echo replies: each query of `message_len` bytes comes back unchanged.
#[derive(Debug, Clone)]
pub struct EchoReplyFramer {
    message_len: usize,
    received: usize,
}

impl EchoReplyFramer {
    pub fn new(message_len: usize) -> EchoReplyFramer {
        EchoReplyFramer {
            message_len: message_len.max(1),
            received: 0,
        }
    }

    /// A reply that differs from the query (an HTTP server's 400, say) is a protocol error,
    /// not a reply: counting bytes alone would report such a run as thousands of answers.
    #[inline]
    fn feed(&mut self, input: &[u8]) -> Result<Fed, FramingError> {
        let take = input.len().min(self.message_len - self.received);
        let start = self.received;
        if input[..take]
            .iter()
            .enumerate()
            .any(|(k, &b)| b != echo_byte(self.message_len, start + k))
        {
            return Err(FramingError::EchoMismatch);
        }
        self.received += take;
        let complete = if self.received == self.message_len {
            self.received = 0;
            Some(ResponseInfo {
                status: 0,
                close: false,
            })
        } else {
            None
        };
        Ok(Fed {
            consumed: take,
            complete,
        })
    }
}

/// Frames HTTP/1.x responses.
#[derive(Debug, Clone)]
pub struct HttpResponseFramer {
    /// Responses to HEAD carry no body whatever their headers say.
    head_request: bool,
    state: BodyState,
    status: u16,
    close: bool,
    /// The last head parsed (if short enough), the `head_request` it was parsed for, and the
    /// state it left: status, close, body.
    last_head: Vec<u8>,
    last_parsed: (bool, u16, bool, BodyState),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyState {
    /// Waiting for (the rest of) a status line and headers.
    Head,
    /// `remaining` body bytes to go (Content-Length).
    Fixed { remaining: u64 },
    /// A chunked body.
    Chunked(ChunkState),
    /// The body runs until the server closes the connection.
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Hex digits of a chunk size; `digits` counts them.
    Size {
        size: u64,
        digits: u8,
    },
    /// A chunk extension or whitespace, skipped until CR.
    SizeExtension {
        size: u64,
    },
    /// The LF ending a chunk-size line.
    SizeLf {
        size: u64,
    },
    Data {
        remaining: u64,
    },
    DataCr,
    DataLf,
    /// Start of a trailer line, or the CR of the final empty line.
    TrailerLineStart,
    TrailerLine,
    /// The LF of the final empty line.
    FinalLf,
}

impl HttpResponseFramer {
    /// A framer for responses to requests with the given method (only HEAD matters).
    pub fn new(method: &str) -> HttpResponseFramer {
        HttpResponseFramer {
            head_request: method.eq_ignore_ascii_case("HEAD"),
            state: BodyState::Head,
            status: 0,
            close: false,
            last_head: Vec::new(),
            last_parsed: (false, 0, false, BodyState::Head),
        }
    }

    fn feed(&mut self, input: &[u8]) -> Result<Fed, FramingError> {
        let mut consumed = 0;
        if self.state == BodyState::Head {
            match self.parse_head(input)? {
                Some(n) => consumed = n,
                None => {
                    return Ok(Fed {
                        consumed: 0,
                        complete: None,
                    })
                }
            }
            if self.state == BodyState::Head {
                // No body (HEAD, 204, 304) or an interim 1xx that the caller skips.
                return Ok(Fed {
                    consumed,
                    complete: self.finish_unless_interim(),
                });
            }
        }
        let rest = &input[consumed..];
        let (used, done) = match &mut self.state {
            BodyState::Head => unreachable!("head handled above"),
            BodyState::Fixed { remaining } => {
                let take = (*remaining).min(rest.len() as u64);
                *remaining -= take;
                (take as usize, *remaining == 0)
            }
            BodyState::UntilClose => (rest.len(), false),
            BodyState::Chunked(chunk) => feed_chunked(chunk, rest)?,
        };
        consumed += used;
        let complete = if done {
            self.state = BodyState::Head;
            Some(ResponseInfo {
                status: self.status,
                close: self.close,
            })
        } else {
            None
        };
        Ok(Fed { consumed, complete })
    }

    /// A response without body ended with its head; 1xx responses are interim and skipped.
    fn finish_unless_interim(&self) -> Option<ResponseInfo> {
        if (100..200).contains(&self.status) {
            None
        } else {
            Some(ResponseInfo {
                status: self.status,
                close: self.close,
            })
        }
    }

    fn on_eof(&mut self) -> Option<ResponseInfo> {
        if self.state == BodyState::UntilClose {
            self.state = BodyState::Head;
            Some(ResponseInfo {
                status: self.status,
                close: true,
            })
        } else {
            None
        }
    }

    /// Parses a complete head and sets the body state; `None` if the head is incomplete. A
    /// head identical to the last one parsed is not parsed again.
    #[inline]
    fn parse_head(&mut self, input: &[u8]) -> Result<Option<usize>, FramingError> {
        let known = self.last_head.len();
        let (for_head_request, status, close, state) = self.last_parsed;
        if known > 0
            && for_head_request == self.head_request
            && input.len() >= known
            && input[..known] == self.last_head[..]
        {
            (self.status, self.close, self.state) = (status, close, state);
            return Ok(Some(known));
        }
        let parsed = self.parse_new_head(input)?;
        if let Some(head_len) = parsed {
            self.last_head.clear();
            if head_len <= CACHED_HEAD_BYTES {
                self.last_head.extend_from_slice(&input[..head_len]);
                self.last_parsed = (self.head_request, self.status, self.close, self.state);
            }
        }
        Ok(parsed)
    }

    fn parse_new_head(&mut self, input: &[u8]) -> Result<Option<usize>, FramingError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let head_len = match response.parse(input) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if input.len() > MAX_HEAD_BYTES => {
                return Err(FramingError::HeadTooLarge(MAX_HEAD_BYTES))
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(FramingError::Head(e)),
        };
        let status = response.code.unwrap_or(0);
        // HTTP/1.0 closes unless it says keep-alive; HTTP/1.1 keeps open unless it says close.
        let mut close = response.version == Some(0);
        let mut content_length: Option<u64> = None;
        let mut chunked = false;
        for header in response.headers.iter() {
            let name = header.name.as_bytes();
            if name.eq_ignore_ascii_case(b"content-length") {
                let value = parse_content_length(header.value)?;
                if content_length.is_some_and(|v| v != value) {
                    return Err(FramingError::ContentLength);
                }
                content_length = Some(value);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                chunked = last_token_is(header.value, b"chunked");
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in header.value.split(|b| *b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        close = false;
                    }
                }
            }
        }
        self.status = status;
        self.close = close;
        let no_body =
            self.head_request || (100..200).contains(&status) || status == 204 || status == 304;
        self.state = if no_body {
            BodyState::Head
        } else if chunked {
            BodyState::Chunked(ChunkState::Size { size: 0, digits: 0 })
        } else {
            match content_length {
                Some(0) => BodyState::Head,
                Some(n) => BodyState::Fixed { remaining: n },
                None => {
                    self.close = true;
                    BodyState::UntilClose
                }
            }
        };
        Ok(Some(head_len))
    }
}

fn parse_content_length(value: &[u8]) -> Result<u64, FramingError> {
    let digits = value.trim_ascii();
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(FramingError::ContentLength);
    }
    Ok(digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

fn last_token_is(value: &[u8], token: &[u8]) -> bool {
    value
        .rsplit(|b| *b == b',')
        .next()
        .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(token))
}

/// Advances a chunked body over `input`; returns bytes used and whether the body ended.
fn feed_chunked(state: &mut ChunkState, input: &[u8]) -> Result<(usize, bool), FramingError> {
    let mut i = 0;
    while i < input.len() {
        if let ChunkState::Data { remaining } = state {
            let take = (*remaining).min((input.len() - i) as u64);
            *remaining -= take;
            i += take as usize;
            if *remaining == 0 {
                *state = ChunkState::DataCr;
            }
            continue;
        }
        let byte = input[i];
        i += 1;
        *state = match *state {
            ChunkState::Size { size, digits } => match hex_value(byte) {
                Some(v) => {
                    if digits >= 15 {
                        return Err(FramingError::ChunkSize);
                    }
                    ChunkState::Size {
                        size: size << 4 | u64::from(v),
                        digits: digits + 1,
                    }
                }
                None if digits == 0 => return Err(FramingError::ChunkSize),
                None => match byte {
                    b'\r' => ChunkState::SizeLf { size },
                    b';' | b' ' | b'\t' => ChunkState::SizeExtension { size },
                    _ => return Err(FramingError::ChunkSize),
                },
            },
            ChunkState::SizeExtension { size } => match byte {
                b'\r' => ChunkState::SizeLf { size },
                b'\n' => return Err(FramingError::ChunkSize),
                _ => ChunkState::SizeExtension { size },
            },
            ChunkState::SizeLf { size } => match byte {
                b'\n' if size == 0 => ChunkState::TrailerLineStart,
                b'\n' => ChunkState::Data { remaining: size },
                _ => return Err(FramingError::ChunkSize),
            },
            ChunkState::DataCr => match byte {
                b'\r' => ChunkState::DataLf,
                _ => return Err(FramingError::ChunkTerminator),
            },
            ChunkState::DataLf => match byte {
                b'\n' => ChunkState::Size { size: 0, digits: 0 },
                _ => return Err(FramingError::ChunkTerminator),
            },
            ChunkState::TrailerLineStart => match byte {
                b'\r' => ChunkState::FinalLf,
                b'\n' => return Ok((i, true)),
                _ => ChunkState::TrailerLine,
            },
            ChunkState::TrailerLine => match byte {
                b'\n' => ChunkState::TrailerLineStart,
                _ => ChunkState::TrailerLine,
            },
            ChunkState::FinalLf => match byte {
                b'\n' => return Ok((i, true)),
                _ => return Err(FramingError::ChunkTerminator),
            },
            ChunkState::Data { .. } => unreachable!("data handled above"),
        };
    }
    Ok((i, false))
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes the way the engine does (keeping partial heads),
    /// and returns every completed response plus the framer.
    fn frame_in_steps(framer: &mut ResponseFramer, input: &[u8], step: usize) -> Vec<ResponseInfo> {
        let mut done = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        for piece in input.chunks(step) {
            pending.extend_from_slice(piece);
            let mut offset = 0;
            while offset < pending.len() {
                let fed = framer.feed(&pending[offset..]).expect("valid framing");
                offset += fed.consumed;
                if let Some(info) = fed.complete {
                    done.push(info);
                } else if fed.consumed == 0 {
                    break;
                }
            }
            pending.drain(..offset);
        }
        assert!(
            pending.is_empty(),
            "left over: {:?}",
            String::from_utf8_lossy(&pending)
        );
        done
    }

    fn http(method: &str) -> ResponseFramer {
        ResponseFramer::Http(HttpResponseFramer::new(method))
    }

    fn ok(status: u16) -> ResponseInfo {
        ResponseInfo {
            status,
            close: false,
        }
    }

    const NGINX_LIKE: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\nHello, World!";

    #[test]
    fn content_length_in_every_split() {
        for step in 1..=NGINX_LIKE.len() {
            let mut f = http("GET");
            assert_eq!(
                frame_in_steps(&mut f, NGINX_LIKE, step),
                vec![ok(200)],
                "step {step}"
            );
            assert!(f.is_between_responses());
        }
    }

    #[test]
    fn a_repeated_head_means_the_same_and_a_changed_one_is_parsed_again() {
        let second: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: text/plain\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\n!";
        let closing: &[u8] =
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno";
        let mut input = Vec::new();
        for part in [NGINX_LIKE, NGINX_LIKE, second, NGINX_LIKE, closing, closing] {
            input.extend_from_slice(part);
        }
        let closed = ResponseInfo {
            status: 503,
            close: true,
        };
        for step in [1, 7, 64, input.len()] {
            let mut f = http("GET");
            assert_eq!(
                frame_in_steps(&mut f, &input, step),
                vec![ok(200), ok(200), ok(200), ok(200), closed, closed],
                "step {step}"
            );
            assert!(f.is_between_responses());
            let ResponseFramer::Http(h) = &f else {
                unreachable!()
            };
            assert_eq!(
                h.last_head,
                &closing[..closing.len() - 2],
                "the last head is kept"
            );
        }
        // The same head answering a HEAD request (a framer whose requests change method) has
        // no body: the remembered meaning is only reused for the same kind of request.
        let mut h = HttpResponseFramer::new("GET");
        assert_eq!(h.feed(NGINX_LIKE).unwrap().complete, Some(ok(200)));
        h.head_request = true;
        let head_only = &NGINX_LIKE[..NGINX_LIKE.len() - 13];
        let fed = h.feed(head_only).unwrap();
        assert_eq!(
            (fed.consumed, fed.complete),
            (head_only.len(), Some(ok(200)))
        );
        // A head that repeats for a HEAD request still has no body.
        let mut f = http("HEAD");
        let mut heads = NGINX_LIKE[..NGINX_LIKE.len() - 13].to_vec();
        heads.extend_from_within(..);
        assert_eq!(frame_in_steps(&mut f, &heads, 5), vec![ok(200), ok(200)]);
    }

    #[test]
    fn pipelined_responses_in_one_read() {
        let mut input = Vec::new();
        for _ in 0..3 {
            input.extend_from_slice(NGINX_LIKE);
        }
        input.extend_from_slice(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        let mut f = http("GET");
        let got = frame_in_steps(&mut f, &input, input.len());
        assert_eq!(got, vec![ok(200), ok(200), ok(200), ok(404)]);
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let body: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5;name=v\r\nHello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: 1\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        for step in 1..=body.len() {
            let mut f = http("GET");
            assert_eq!(
                frame_in_steps(&mut f, body, step),
                vec![ok(200), ok(201)],
                "step {step}"
            );
        }
    }

    #[test]
    fn chunked_errors_are_protocol_errors() {
        let mut f = http("GET");
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let fed = f.feed(head).unwrap();
        assert_eq!(fed.consumed, head.len());
        assert_eq!(f.feed(b"zz\r\n"), Err(FramingError::ChunkSize));
        let mut g = http("GET");
        g.feed(head).unwrap();
        assert_eq!(g.feed(b"3\r\nabcXY"), Err(FramingError::ChunkTerminator));
    }

    #[test]
    fn close_delimited_body_ends_at_eof() {
        let mut f = http("GET");
        let fed = f
            .feed(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html>partial")
            .unwrap();
        assert_eq!(fed.complete, None);
        assert!(!f.is_between_responses());
        assert_eq!(f.feed(b" more").unwrap().consumed, 5);
        assert_eq!(
            f.on_eof(),
            Some(ResponseInfo {
                status: 200,
                close: true
            })
        );
    }

    #[test]
    fn no_body_for_head_204_304_and_interim_1xx_skipped() {
        let mut f = http("HEAD");
        let got = frame_in_steps(
            &mut f,
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
            7,
        );
        assert_eq!(got, vec![ok(200)]);
        let mut g = http("GET");
        let input = b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        assert_eq!(
            frame_in_steps(&mut g, input, 3),
            vec![ok(204), ok(304), ok(200)]
        );
    }

    #[test]
    fn connection_close_and_http10_keepalive() {
        let mut f = http("GET");
        let got = frame_in_steps(
            &mut f,
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nxHTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\ny",
            1000,
        );
        assert_eq!(
            got,
            vec![
                ResponseInfo {
                    status: 200,
                    close: true
                },
                ok(200)
            ]
        );
    }

    #[test]
    fn malformed_heads_are_errors() {
        let mut f = http("GET");
        assert!(matches!(
            f.feed(b"HTTX/1.1 200 OK\r\n\r\n"),
            Err(FramingError::Head(_))
        ));
        let mut g = http("GET");
        assert_eq!(
            g.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n"),
            Err(FramingError::ContentLength)
        );
        let mut h = http("GET");
        let huge = vec![b'a'; MAX_HEAD_BYTES + 10];
        let mut input = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        input.extend_from_slice(&huge);
        assert_eq!(
            h.feed(&input),
            Err(FramingError::HeadTooLarge(MAX_HEAD_BYTES))
        );
    }

    #[test]
    fn echo_replies_are_counted_bytes() {
        let mut f = ResponseFramer::Echo(EchoReplyFramer::new(4));
        let got = frame_in_steps(&mut f, b"abc\nabc\nab", 3);
        assert_eq!(got.len(), 2);
        assert!(!f.is_between_responses());
        assert_eq!(f.feed(b"c\n").unwrap().complete.map(|i| i.status), Some(0));
    }

    #[test]
    fn an_echo_reply_that_is_not_the_query_is_a_protocol_error() {
        let mut f = ResponseFramer::Echo(EchoReplyFramer::new(4));
        assert_eq!(f.feed(b"HTTP/1.1 400"), Err(FramingError::EchoMismatch));
        let mut f = ResponseFramer::Echo(EchoReplyFramer::new(4));
        assert_eq!(f.feed(b"ab").unwrap().consumed, 2);
        assert_eq!(f.feed(b"X\n"), Err(FramingError::EchoMismatch));
        let mut f = ResponseFramer::Echo(EchoReplyFramer::new(4));
        assert_eq!(f.feed(b"abcX"), Err(FramingError::EchoMismatch));
    }
}
