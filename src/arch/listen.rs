//! The listening socket and the pool bound that both `serve` and the sweep look down to:
//! [`bind`] (used by `serve` and by the architectures that bind a socket per loop) and
//! [`MAX_WORKERS`].

use std::net::{SocketAddr, TcpListener};

use anyhow::Context;

/// The most workers `--workers` (and an experiment's `workers`) may ask for.
pub const MAX_WORKERS: usize = 10_000;

/// Binds a listening socket with a deep backlog (the studies go to 15,000 connections);
/// with `reuse_port`, one that other SO_REUSEPORT sockets may bind beside (reactors, uring).
pub fn bind(addr: SocketAddr, reuse_port: bool) -> anyhow::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket
        .bind(&addr.into())
        .with_context(|| format!("cannot listen on {addr}"))?;
    socket.listen(4096)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}
