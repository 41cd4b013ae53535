//! The async peer of `sweetspot serve --arch async --workers N`: hyper's HTTP/1.1 server on
//! tokio's multi-thread runtime with N worker threads, a task per connection, shaped like
//! hyper's own hello example.
//!
//! Usage: hyper_hello PORT WORKERS (PORT 0: any free port); prints
//! `listening on http://127.0.0.1:PORT`.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

async fn hello(_: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::builder()
        .header("Server", "hyper")
        .header("Content-Type", "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from_static(b"Hello, World!")))
        .expect("a response"))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let workers: usize = args.next().and_then(|w| w.parse().ok()).unwrap_or(2);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(serve(port));
}

async fn serve(port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    let port = listener.local_addr().expect("local address").port();
    println!("listening on http://127.0.0.1:{port}");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::task::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(hello))
                .await;
        });
    }
}
