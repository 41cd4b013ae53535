//! Which request bytes a connection sends: the [`RequestSource`].
//!
//! Today one request, serialized once before the run ([`RequestBytes`]), repeated `pipeline`
//! times so a batch is one write. A list of requests (`--urls`) is another source: each
//! connection keeps a cursor ([`Connection::request`](super::connection::Connection)) and
//! [`RequestSource::pick`] advances it round robin; the hot path still writes a slice of bytes
//! serialized before the run.

use crate::load::request::RequestBytes;

/// The requests of a run, each pre-serialized.
#[derive(Debug, Clone, Copy)]
pub struct RequestSource<'a> {
    bytes: &'a RequestBytes,
}

impl<'a> RequestSource<'a> {
    pub fn new(bytes: &'a RequestBytes) -> RequestSource<'a> {
        RequestSource { bytes }
    }

    /// The request a connection sends next, given its current one: round robin over the
    /// source's requests (one request: always 0).
    #[inline]
    pub fn pick(&self, _current: usize) -> usize {
        0
    }

    /// The bytes of `count` copies of request `index` back to back (`count` at most the
    /// pipeline depth); a batch writes a prefix of them.
    #[inline]
    pub fn batch(&self, _index: usize, count: usize) -> &'a [u8] {
        self.bytes.batch(count)
    }

    /// The length of one request `index`.
    #[inline]
    pub fn len(&self, _index: usize) -> usize {
        self.bytes.len()
    }
}
