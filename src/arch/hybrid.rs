//! Hybrid: one epoll loop for every socket, plus a [`WorkerPool`] of threads for what would
//! stall it (the shape of libuv's `uv_queue_work`, Node's worker threads, Netty, Tomcat NIO).
//! The loop is [`super::event_loop`] on [`super::epoll`]; `/fib` and the embedded store's
//! calls go to the pool, and their replies come back through the pool's eventfd.

use std::net::TcpListener;
use std::sync::Arc;

use super::epoll::EpollPoller;
use super::event_loop::{self, Extras};
use super::pool::WorkerPool;
use super::{Architecture, ServerContext};

pub struct HybridServer;

impl Architecture for HybridServer {
    fn serve(&self, listener: TcpListener, ctx: Arc<ServerContext>) -> anyhow::Result<()> {
        let pool = WorkerPool::start(&ctx, ctx.workers.max(1))?;
        let extras = Extras {
            accepted: None,
            pool: Some(pool),
        };
        event_loop::run_with(EpollPoller::new()?, listener, ctx, extras)
    }
}
