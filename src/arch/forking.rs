//! Forking: a new process for every connection, as in the study's second server.
//!
//! The parent only accepts, forks and reaps; the child serves the one connection with its own
//! store connection and leaves through `_exit` (no destructors, no flushing of the parent's
//! buffers). A failed fork (out of processes or memory) is logged and that connection refused.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use super::blocking::{accept_next, serve_connection, use_blocking_accept};
use super::children::Children;
use super::request::warm_up_parser;
use super::{Architecture, ServerContext, DRAIN};
use crate::store::LazyStore;
use crate::sys::{fork, ForkResult};

pub struct ForkingServer;

impl Architecture for ForkingServer {
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()> {
        use_blocking_accept(&listener)?;
        warm_up_parser();
        let mut children = Children::default();
        loop {
            let Some(stream) = accept_next(&listener, &ctx, &mut || {
                children.reap();
            }) else {
                break;
            };
            match fork() {
                Ok(ForkResult::Child) => {
                    drop(listener);
                    let mut store = LazyStore::new(ctx.app.store.clone());
                    serve_connection(stream, &ctx, &mut store);
                    crate::sys::exit_child(0);
                }
                Ok(ForkResult::Parent { child }) => {
                    children.insert(child);
                    drop(stream);
                }
                Err(e) => {
                    eprintln!(
                        "sweetspot: fork failed ({e}) with {} children; refusing a connection",
                        children.len()
                    );
                    drop(stream);
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        children.stop_all(DRAIN);
        Ok(())
    }
}
