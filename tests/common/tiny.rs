//! A tiny std::net server for what no real server does on purpose (never answering, chunked
//! or close-delimited bodies, TLS made here): it accepts on a free port of 127.0.0.1, hands
//! each connection to a handler on its own thread, counts what it accepted, and stops accepting
//! on drop.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Accepts on a free port; each accepted connection goes to the handler on its own thread,
/// with the flag that says the server is stopping.
pub struct TinyServer {
    pub port: u16,
    /// Connections accepted so far.
    pub accepted: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl TinyServer {
    pub fn start(handle: impl Fn(TcpStream, &AtomicBool) + Send + Sync + 'static) -> TinyServer {
        let handle = Arc::new(handle);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (accepted2, stop2) = (Arc::clone(&accepted), Arc::clone(&stop));
        let acceptor = std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        accepted2.fetch_add(1, Ordering::SeqCst);
                        stream.set_nonblocking(false).unwrap();
                        let (stop3, handle) = (Arc::clone(&stop2), Arc::clone(&handle));
                        std::thread::spawn(move || handle(stream, &stop3));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        TinyServer {
            port,
            accepted,
            stop,
            acceptor: Some(acceptor),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for TinyServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}
