//! Reactors: N threads (`--workers`, default one per core), each its own epoll loop owning the
//! connections it accepted, as nginx runs its worker processes. Nothing is shared between the
//! loops but the port, the app and the stop flag, so they scale with cores without locks; the
//! price is that a connection stays on the loop that accepted it, busy or not. How the port is
//! shared (`--accept`): `reuseport` (default), a SO_REUSEPORT listener per loop, which the kernel
//! fills by a hash of the addresses (even on average, blind to load); or `shared`, one listener
//! in every loop with EPOLLEXCLUSIVE, so a connection wakes one waiting loop and a loop that
//! waits more takes more. The stats line lists what each loop accepted, so imbalance shows.

use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::Context;

use super::epoll::EpollPoller;
use super::event_loop::{self, Extras};
use super::{Accept, Architecture, ServerContext};

pub struct ReactorsServer;

impl Architecture for ReactorsServer {
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()> {
        let loops = ctx.workers.max(1);
        let addr = listener.local_addr()?;
        let mut listeners = Vec::with_capacity(loops);
        for _ in 1..loops {
            listeners.push(match ctx.accept {
                Accept::Reuseport => super::listen::bind(addr, true)
                    .with_context(|| format!("cannot add a SO_REUSEPORT listener on {addr}"))?,
                Accept::Shared => listener.try_clone()?,
            });
        }
        listeners.insert(0, listener);
        // Every descriptor a loop needs is made before the first loop runs: once one accepts,
        // a flood can take the last free descriptor (the conformance suite's fd exhaustion).
        let mut loops_ready = Vec::with_capacity(loops);
        for listener in listeners {
            let poller = match ctx.accept {
                Accept::Reuseport => EpollPoller::new()?,
                Accept::Shared => EpollPoller::with_exclusive_accept()?,
            };
            loops_ready.push((listener, poller));
        }
        let mut threads = Vec::with_capacity(loops);
        for (i, (listener, poller)) in loops_ready.into_iter().enumerate() {
            let loop_ctx = Arc::clone(&ctx);
            let accepted = ctx.accepted.new_loop();
            let spawned = std::thread::Builder::new()
                .name(format!("reactor-{i}"))
                .spawn(move || {
                    let extras = Extras {
                        accepted: Some(accepted),
                        pool: None,
                    };
                    let stop = Arc::clone(&loop_ctx.shutdown);
                    let _wake = crate::sys::stop::wake_on_stop(&listener);
                    let result = event_loop::run_with(poller, listener, loop_ctx, extras);
                    if result.is_err() {
                        // One loop failing stops the others, so the server does not go on
                        // half-deaf to its port.
                        stop.store(true, Ordering::Relaxed);
                    }
                    result
                });
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    ctx.shutdown.store(true, Ordering::Relaxed);
                    for thread in threads {
                        let _ = thread.join();
                    }
                    return Err(e).context("cannot start a reactor thread");
                }
            }
        }
        let mut first_error = None;
        for thread in threads {
            let result = thread
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("a reactor thread panicked")));
            if let Err(e) = result {
                ctx.shutdown.store(true, Ordering::Relaxed);
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}
