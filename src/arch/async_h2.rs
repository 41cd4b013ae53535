//! The async architecture's HTTP/2 (h2c with prior knowledge): a connection whose first bytes
//! are HTTP/2's preface is handed to the `h2` crate's server, the ecosystem's implementation
//! (hyper's), and each stream becomes a task of its own, as hyper serves HTTP/2: the same app
//! and routes as over HTTP/1.1 (the async architecture's handler), so `/sleep` and `/work`
//! waits overlap on one connection and `/fib` holds the worker that runs its stream. The
//! server allows [`MAX_STREAMS`] concurrent streams a connection (nginx's default), reads a
//! request body up to [`MAX_BODY`] and sends a response as the client's window allows, a file
//! in [`FILE_CHUNK`] pieces, so a client that reads nothing holds one chunk per stream. A
//! stream whose content type is `application/grpc` is a gRPC unary call: the lab's method
//! ([`grpc::WORK_METHOD`]) is `/work` with its message's figures, answered with a
//! [`grpc::WorkReply`] and a `grpc-status` trailer (a status other than OK in the headers
//! alone, as gRPC's Trailers-Only response).

use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::http::{grpc, Method, Request, Response, FILE_CHUNK, MAX_BODY};

/// HTTP/2's connection preface, the first bytes a client with prior knowledge sends.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Concurrent streams a connection may open (`SETTINGS_MAX_CONCURRENT_STREAMS`).
pub const MAX_STREAMS: u32 = 128;

/// Whether `input`, the first bytes of a connection, are (or may yet become) the preface.
pub fn starts_preface(input: &[u8]) -> bool {
    let n = input.len().min(PREFACE.len());
    n > 0 && input[..n] == PREFACE[..n]
}

/// Serves an HTTP/2 connection whose first bytes, `read`, are already in, each request by
/// `handler` (given the request and the socket, to see a client that left); returns when the
/// client is gone, the connection failed, or `stop` came (GOAWAY, then its streams end).
pub async fn serve<IO, H, F>(
    stream: IO,
    fd: RawFd,
    read: Vec<u8>,
    mut stop: Pin<Box<dyn Future<Output = ()> + Send>>,
    handler: H,
) where
    IO: AsyncRead + AsyncWrite + Unpin,
    H: Fn(Request, RawFd) -> F + Clone + Send + 'static,
    F: Future<Output = Option<Response>> + Send + 'static,
{
    let io = Rewind {
        read,
        pos: 0,
        inner: stream,
    };
    let handshake = h2::server::Builder::new()
        .max_concurrent_streams(MAX_STREAMS)
        .handshake::<_, Bytes>(io);
    let mut connection = match handshake.await {
        Ok(connection) => connection,
        Err(_) => return,
    };
    let mut stopping = false;
    loop {
        let next = if stopping {
            connection.accept().await
        } else {
            tokio::select! {
                next = connection.accept() => next,
                _ = &mut stop => {
                    stopping = true;
                    connection.graceful_shutdown();
                    continue;
                }
            }
        };
        match next {
            Some(Ok((request, respond))) => {
                tokio::spawn(answer(handler.clone(), request, respond, fd));
            }
            Some(Err(_)) | None => return,
        }
    }
}

/// One stream: its request read, routed and completed as over HTTP/1.1, its response sent.
async fn answer<H, F>(
    handler: H,
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    fd: RawFd,
) where
    H: Fn(Request, RawFd) -> F,
    F: Future<Output = Option<Response>>,
{
    let (parts, body) = request.into_parts();
    let is_grpc = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(grpc::CONTENT_TYPE));
    if is_grpc {
        return grpc_call(handler, parts, body, respond, fd).await;
    }
    let head_only = parts.method == http::Method::HEAD;
    let response = match read_request(&parts, body).await {
        Ok(request) => match handler(request, fd).await {
            Some(response) => response,
            None => return respond.send_reset(h2::Reason::CANCEL),
        },
        Err(status) => Response::error(status),
    };
    let _ = send(&mut respond, &response, head_only).await;
}

/// A gRPC unary call: its message read and decoded, the lab's method run as `/work` by the
/// same handler, and its reply or its status sent.
async fn grpc_call<H, F>(
    handler: H,
    parts: http::request::Parts,
    body: RecvStream,
    mut respond: SendResponse<Bytes>,
    fd: RawFd,
) where
    H: Fn(Request, RawFd) -> F,
    F: Future<Output = Option<Response>>,
{
    let outcome = match read_request(&parts, body).await {
        Err(_) => Err((
            grpc::RESOURCE_EXHAUSTED,
            "the message could not be read".to_string(),
        )),
        Ok(request) => match work_of(&parts, &request.body) {
            Err(status) => Err(status),
            Ok(query) => {
                let work = Request {
                    method: Method::Get,
                    path: "/work".into(),
                    query: Some(query),
                    body: Vec::new(),
                    content_type: None,
                    ..request
                };
                match handler(work, fd).await {
                    Some(response) => grpc_outcome(&response),
                    None => return respond.send_reset(h2::Reason::CANCEL),
                }
            }
        },
    };
    let _ = send_grpc(&mut respond, outcome).await;
}

/// The `/work` query a call of the lab's method asks for, or the status that refuses it.
fn work_of(parts: &http::request::Parts, body: &[u8]) -> Result<String, (u32, String)> {
    use prost::Message;
    if parts.uri.path() != grpc::WORK_METHOD {
        return Err((
            grpc::UNIMPLEMENTED,
            format!(
                "no method {} (this server has {})",
                parts.uri.path(),
                grpc::WORK_METHOD
            ),
        ));
    }
    let message = grpc::unframe(body).map_err(|why| (grpc::INTERNAL, why.to_string()))?;
    let work = grpc::WorkRequest::decode(message)
        .map_err(|e| (grpc::INTERNAL, format!("not a WorkRequest: {e}")))?;
    Ok(format!(
        "cpu_us={}&wait_us={}{}",
        work.cpu_us,
        work.wait_us,
        if work.blocking { "&wait=blocking" } else { "" }
    ))
}

/// `/work`'s response as a call's outcome: its figures as a reply, or its error as a status.
fn grpc_outcome(response: &Response) -> Result<grpc::WorkReply, (u32, String)> {
    let text = String::from_utf8_lossy(&response.body).trim().to_string();
    if response.status != 200 {
        let code = match response.status {
            400 => grpc::INVALID_ARGUMENT,
            503 => grpc::UNAVAILABLE,
            _ => grpc::UNKNOWN,
        };
        return Err((code, text));
    }
    let figure = |key: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
            .unwrap_or(0)
    };
    Ok(grpc::WorkReply {
        cpu_us: figure("cpu_us"),
        wait_us: figure("wait_us"),
    })
}

/// Sends a call's reply (headers, the framed message, then `grpc-status: 0` as a trailer),
/// or its status alone in the headers (Trailers-Only).
async fn send_grpc(
    respond: &mut SendResponse<Bytes>,
    outcome: Result<grpc::WorkReply, (u32, String)>,
) -> Result<(), h2::Error> {
    use prost::Message;
    let head = http::Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, grpc::CONTENT_TYPE);
    let reply = match outcome {
        Ok(reply) => reply,
        Err((code, message)) => {
            let message: String = message
                .chars()
                .map(|c| {
                    if c.is_ascii_graphic() || c == ' ' {
                        c
                    } else {
                        '?'
                    }
                })
                .collect();
            let head = head
                .header("grpc-status", code)
                .header("grpc-message", message)
                .body(())
                .unwrap_or_default();
            respond.send_response(head, true)?;
            return Ok(());
        }
    };
    let mut stream = respond.send_response(head.body(()).unwrap_or_default(), false)?;
    send_data(
        &mut stream,
        Bytes::from(grpc::frame(&reply.encode_to_vec())),
        false,
    )
    .await?;
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    stream.send_trailers(trailers)
}

/// The app's request from an HTTP/2 one (`Err`: the status to answer with).
async fn read_request(parts: &http::request::Parts, mut body: RecvStream) -> Result<Request, u16> {
    let method = match parts.method {
        http::Method::GET => Method::Get,
        http::Method::HEAD => Method::Head,
        http::Method::POST => Method::Post,
        _ => return Err(501),
    };
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|_| 400u16)?;
        let _ = body.flow_control().release_capacity(chunk.len());
        if bytes.len() + chunk.len() > MAX_BODY {
            return Err(413);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Request {
        method,
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        keep_alive: true,
        http10: false,
        content_type: parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        body: bytes,
    })
}

/// Sends `response` (its head only for HEAD), its body as the client's window allows.
async fn send(
    respond: &mut SendResponse<Bytes>,
    response: &Response,
    head_only: bool,
) -> Result<(), h2::Error> {
    let mut head = http::Response::builder()
        .status(response.status)
        .header(http::header::CONTENT_TYPE, response.content_type)
        .header(http::header::CONTENT_LENGTH, response.content_length());
    for (name, value) in &response.headers {
        if !name.eq_ignore_ascii_case("connection") && !name.eq_ignore_ascii_case("keep-alive") {
            head = head.header(*name, value.as_str());
        }
    }
    let head = head.body(()).unwrap_or_default();
    let empty = head_only || response.content_length() == 0;
    let mut stream = respond.send_response(head, empty)?;
    if empty {
        return Ok(());
    }
    let Some(file) = &response.file else {
        return send_data(&mut stream, Bytes::copy_from_slice(&response.body), true).await;
    };
    let mut offset = 0;
    let mut chunk = Vec::with_capacity(FILE_CHUNK);
    while offset < file.len {
        chunk.clear();
        let n = match file.read_chunk(offset, &mut chunk) {
            Ok(n) if n > 0 => n,
            _ => {
                stream.send_reset(h2::Reason::INTERNAL_ERROR);
                return Ok(());
            }
        };
        offset += n as u64;
        send_data(
            &mut stream,
            Bytes::copy_from_slice(&chunk),
            offset >= file.len,
        )
        .await?;
    }
    Ok(())
}

/// Sends `data` as the stream's window opens (never more buffered than it).
async fn send_data(
    stream: &mut h2::SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
) -> Result<(), h2::Error> {
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let granted = match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(granted) => granted?,
            None => return Err(h2::Reason::STREAM_CLOSED.into()),
        };
        if granted == 0 {
            continue;
        }
        let piece = data.split_to(granted.min(data.len()));
        stream.send_data(piece, end && data.is_empty())?;
    }
    Ok(())
}

/// The connection, with the bytes already read from it given back first.
struct Rewind<IO> {
    read: Vec<u8>,
    pos: usize,
    inner: IO,
}

impl<IO: AsyncRead + Unpin> AsyncRead for Rewind<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if self.pos < self.read.len() {
            let n = (self.read.len() - self.pos).min(buf.remaining());
            let pos = self.pos;
            buf.put_slice(&self.read[pos..pos + n]);
            self.pos += n;
            if self.pos == self.read.len() {
                self.read = Vec::new();
                self.pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Rewind<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preface_is_told_from_http1_by_its_first_bytes() {
        assert!(starts_preface(b"PRI * HT"));
        assert!(starts_preface(PREFACE));
        assert!(starts_preface(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00"));
        assert!(!starts_preface(b"GET / HTTP/1.1\r\n"));
        assert!(!starts_preface(b"PRIX"));
        assert!(!starts_preface(b""));
    }
}
