//! Iterative: one connection at a time, in the main thread. The baseline of the study: a
//! slow request, or a keep-alive client that lingers, holds up everyone else.

use std::net::TcpListener;
use std::sync::Arc;

use super::blocking::{accept_next, serve_connection, use_blocking_accept};
use super::{Architecture, ServerContext};
use crate::store::LazyStore;

pub struct IterativeServer;

impl Architecture for IterativeServer {
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()> {
        use_blocking_accept(&listener)?;
        let mut store = LazyStore::new(ctx.app.store.clone());
        while let Some(stream) = accept_next(&listener, &ctx, &mut || {}) {
            serve_connection(stream, &ctx, &mut store);
        }
        Ok(())
    }
}
