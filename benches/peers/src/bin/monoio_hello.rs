//! The io_uring peer of `sweetspot serve --arch uring --workers 1`: a monoio runtime on one
//! thread (monoio is thread-per-core: one io_uring, tasks that never move; its ring set up
//! with the same deferred task running as sweetspot's), a task per
//! connection that reads into an owned buffer and answers each request head it finds with the
//! same "Hello, World!" response and headers as sweetspot's `/hello`.
//!
//! Usage: monoio_hello PORT (0: any free port); prints `listening on http://127.0.0.1:PORT`.

use std::time::{Duration, SystemTime};

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};

const BODY: &str = "Hello, World!";

fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // The ring set up as liburing advises for one thread that submits and reaps: completion
    // work is deferred until the thread asks for it, instead of interrupting it per completion.
    let mut ring = io_uring::IoUring::builder();
    ring.setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun();
    monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .uring_builder(ring)
        .enable_timer()
        .build()
        .expect("an io_uring runtime")
        .block_on(serve(port));
}

async fn serve(port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind");
    let port = listener.local_addr().expect("local address").port();
    println!("listening on http://127.0.0.1:{port}");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        monoio::spawn(connection(stream));
    }
}

/// The response, with a `Date` made at most once a second.
struct Answer {
    made: SystemTime,
    bytes: Vec<u8>,
}

impl Answer {
    fn new() -> Answer {
        let made = SystemTime::now();
        let bytes = format!(
            "HTTP/1.1 200 OK\r\nServer: monoio\r\nDate: {}\r\nContent-Type: text/plain; \
             charset=utf-8\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{BODY}",
            httpdate::fmt_http_date(made),
            BODY.len()
        )
        .into_bytes();
        Answer { made, bytes }
    }

    fn fresh(&mut self) -> &[u8] {
        if self.made.elapsed().unwrap_or_default() >= Duration::from_secs(1) {
            *self = Answer::new();
        }
        &self.bytes
    }
}

async fn connection(mut stream: TcpStream) {
    let mut answer = Answer::new();
    let mut pending: Vec<u8> = Vec::with_capacity(4096);
    let mut buf = vec![0u8; 4096];
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    loop {
        let (read, b) = stream.read(buf).await;
        buf = b;
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        // Every complete head is one GET to answer (the bench sends no bodies).
        let mut start = 0;
        while let Some(end) = pending[start..].windows(4).position(|w| w == b"\r\n\r\n") {
            out.extend_from_slice(answer.fresh());
            start += end + 4;
        }
        pending.drain(..start);
        if pending.len() > 64 * 1024 {
            return;
        }
        if !out.is_empty() {
            let (written, o) = stream.write_all(out).await;
            out = o;
            if written.is_err() {
                return;
            }
            out.clear();
        }
    }
}
