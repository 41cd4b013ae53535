//! tonic's server for the `grpc` preset and the tests: the lab's method /sweetspot.Lab/Work
//! with /work's semantics (experiments/peers/lab.proto), on a tokio runtime of WORKERS threads.
//!
//!     sweetspot-tonic PORT WORKERS
//!
//! It prints `listening on http://127.0.0.1:PORT workers=N` once it serves (PORT 0: a free one).
//! The service is written out by hand, as tonic-build would generate it, so that building it
//! needs no protoc. A call waits wait_us (a tokio sleep; with `blocking`, a thread sleep that
//! holds its worker), then spends cpu_us of its thread's CPU time; figures past /work's bounds
//! are INVALID_ARGUMENT. SIGTERM stops it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio_stream::StreamExt;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};

const MAX_CPU_US: u64 = 10_000_000;
const MAX_WAIT_US: u64 = 60_000_000;

#[derive(Clone, PartialEq, prost::Message)]
struct WorkRequest {
    #[prost(uint64, tag = "1")]
    cpu_us: u64,
    #[prost(uint64, tag = "2")]
    wait_us: u64,
    #[prost(bool, tag = "3")]
    blocking: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
struct WorkReply {
    #[prost(uint64, tag = "1")]
    cpu_us: u64,
    #[prost(uint64, tag = "2")]
    wait_us: u64,
}

type Boxed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

/// The service `sweetspot.Lab`.
#[derive(Clone)]
struct Lab;

impl NamedService for Lab {
    const NAME: &'static str = "sweetspot.Lab";
}

impl tonic::codegen::Service<http::Request<Body>> for Lab {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Boxed<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if request.uri().path() != "/sweetspot.Lab/Work" {
            return Box::pin(async { Ok(Status::unimplemented("no such method").into_http()) });
        }
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<WorkReply, WorkRequest>::default();
            Ok(Grpc::new(codec).unary(Work, request).await)
        })
    }
}

/// The method `Work`.
struct Work;

impl UnaryService<WorkRequest> for Work {
    type Response = WorkReply;
    type Future = Boxed<Response<WorkReply>, Status>;

    fn call(&mut self, request: Request<WorkRequest>) -> Self::Future {
        Box::pin(work(request.into_inner()))
    }
}

async fn work(w: WorkRequest) -> Result<Response<WorkReply>, Status> {
    if w.cpu_us > MAX_CPU_US || w.wait_us > MAX_WAIT_US {
        return Err(Status::invalid_argument(format!(
            "cpu_us at most {MAX_CPU_US}, wait_us at most {MAX_WAIT_US}"
        )));
    }
    if w.wait_us > 0 {
        let wait = Duration::from_micros(w.wait_us);
        if w.blocking {
            std::thread::sleep(wait);
        } else {
            tokio::time::sleep(wait).await;
        }
    }
    spin(w.cpu_us);
    Ok(Response::new(WorkReply {
        cpu_us: w.cpu_us,
        wait_us: w.wait_us,
    }))
}

/// This thread's CPU time, in microseconds.
fn thread_cpu_us() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `t`, which lives through the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1_000
}

/// Spends `cpu_us` of this thread's CPU time.
fn spin(cpu_us: u64) {
    let until = thread_cpu_us() + cpu_us;
    while thread_cpu_us() < until {
        std::hint::spin_loop();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = || -> ! {
        eprintln!("usage: sweetspot-tonic PORT WORKERS");
        std::process::exit(2)
    };
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or_else(|| usage());
    let workers: usize = args
        .get(2)
        .and_then(|w| w.parse().ok())
        .filter(|w| *w > 0)
        .unwrap_or_else(|| usage());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap_or_else(|e| {
                eprintln!("sweetspot-tonic: port {port}: {e}");
                std::process::exit(1)
            });
        let port = listener.local_addr().expect("a bound address").port();
        println!("listening on http://127.0.0.1:{port} workers={workers}");
        // As tonic's own `serve` does with `tcp_nodelay(true)`: without it, a reply that
        // waits for the client's delayed ACK costs a call 40 ms.
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|s| {
            if let Ok(s) = &s {
                let _ = s.set_nodelay(true);
            }
            s
        });
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        let served = tonic::transport::Server::builder()
            .add_service(Lab)
            .serve_with_incoming_shutdown(incoming, async move {
                term.recv().await;
            });
        if let Err(e) = served.await {
            eprintln!("sweetspot-tonic: {e}");
            std::process::exit(1);
        }
    });
}
