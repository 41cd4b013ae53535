//! Threaded: a new thread for every connection, as in the study's fourth server. A thread
//! that cannot be created (out of threads or memory) is logged and that connection refused.

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::blocking::{accept_next, serve_connection, use_blocking_accept};
use super::threads::{wait_for_zero, STACK_SIZE};
use super::{Architecture, ServerContext, DRAIN};
use crate::store::LazyStore;

pub struct ThreadedServer;

impl Architecture for ThreadedServer {
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()> {
        use_blocking_accept(&listener)?;
        let active = Arc::new(AtomicUsize::new(0));
        while let Some(stream) = accept_next(&listener, &ctx, &mut || {}) {
            let thread_ctx = Arc::clone(&ctx);
            let thread_active = Arc::clone(&active);
            active.fetch_add(1, Ordering::SeqCst);
            let spawned = std::thread::Builder::new()
                .name("connection".into())
                .stack_size(STACK_SIZE)
                .spawn(move || {
                    let mut store = LazyStore::new(thread_ctx.app.store.clone());
                    serve_connection(stream, &thread_ctx, &mut store);
                    thread_active.fetch_sub(1, Ordering::SeqCst);
                });
            if let Err(e) = spawned {
                active.fetch_sub(1, Ordering::SeqCst);
                eprintln!(
                    "sweetspot: cannot start a thread ({e}) with {} running; refusing a connection",
                    active.load(Ordering::SeqCst)
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        wait_for_zero(&active, DRAIN);
        Ok(())
    }
}
