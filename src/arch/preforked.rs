//! Preforked: a fixed pool of `--workers` processes forked at start, each accepting on the
//! shared listener and serving one connection at a time. The parent only watches: a worker
//! that dies is logged and replaced, and on stop every worker is stopped and reaped.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::blocking::{accept_next, serve_connection, use_blocking_accept};
use super::children::Children;
use super::{Architecture, ServerContext, DRAIN};
use crate::store::LazyStore;
use crate::sys::{fork, ForkResult};

pub struct PreforkedServer;

fn spawn_worker(listener: &TcpListener, ctx: &ServerContext) -> std::io::Result<nix::unistd::Pid> {
    match fork()? {
        ForkResult::Child => {
            let mut store = LazyStore::new(ctx.app.store.clone());
            while let Some(stream) = accept_next(listener, ctx, &mut || {}) {
                serve_connection(stream, ctx, &mut store);
            }
            crate::sys::exit_child(0);
        }
        ForkResult::Parent { child } => Ok(child),
    }
}

impl Architecture for PreforkedServer {
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()> {
        use_blocking_accept(&listener)?;
        let mut children = Children::default();
        for _ in 0..ctx.workers {
            match spawn_worker(&listener, &ctx) {
                Ok(pid) => children.insert(pid),
                Err(e) => {
                    children.stop_all(Duration::ZERO);
                    return Err(e).context("cannot fork the worker processes");
                }
            }
        }
        while !ctx.stopping() {
            crate::sys::stop::wait_for_stop(Duration::from_millis(100));
            for (pid, status) in children.reap() {
                if ctx.stopping() {
                    break;
                }
                eprintln!("sweetspot: worker {pid} ended ({status:?}); starting another");
                match spawn_worker(&listener, &ctx) {
                    Ok(pid) => children.insert(pid),
                    Err(e) => eprintln!("sweetspot: cannot replace worker: {e}"),
                }
            }
        }
        children.stop_all(DRAIN);
        Ok(())
    }
}
