//! Prethreaded: a fixed pool of `--workers` threads started at once, each accepting on the
//! shared listener and serving one connection at a time (the study's fifth server).

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::Context;

use super::blocking::{accept_next, serve_connection, use_blocking_accept};
use super::threads::{wait_for_zero, STACK_SIZE};
use super::{Architecture, ServerContext, DRAIN};
use crate::store::LazyStore;

pub struct PrethreadedServer;

impl Architecture for PrethreadedServer {
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()> {
        use_blocking_accept(&listener)?;
        let listener = Arc::new(listener);
        let running = Arc::new(AtomicUsize::new(0));
        for i in 0..ctx.workers {
            let worker_ctx = Arc::clone(&ctx);
            let listener = Arc::clone(&listener);
            let worker_running = Arc::clone(&running);
            running.fetch_add(1, Ordering::SeqCst);
            let spawned = std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .stack_size(STACK_SIZE)
                .spawn(move || {
                    let mut store = LazyStore::new(worker_ctx.app.store.clone());
                    while let Some(stream) = accept_next(&listener, &worker_ctx, &mut || {}) {
                        serve_connection(stream, &worker_ctx, &mut store);
                    }
                    worker_running.fetch_sub(1, Ordering::SeqCst);
                });
            if let Err(e) = spawned {
                running.fetch_sub(1, Ordering::SeqCst);
                ctx.shutdown.store(true, Ordering::SeqCst);
                wait_for_zero(&running, DRAIN);
                return Err(e).with_context(|| format!("cannot start worker thread {i}"));
            }
        }
        // Workers leave their accept loops once stopping, after their current connection.
        while !ctx.stopping() {
            crate::sys::stop::wait_for_stop(std::time::Duration::from_millis(100));
        }
        wait_for_zero(&running, DRAIN);
        Ok(())
    }
}
