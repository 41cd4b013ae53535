//! Which request bytes a connection sends: the [`RequestSource`].
//!
//! The requests of a run are serialized once before it, into a [`RequestSet`]: one request
//! repeated `pipeline` times, or with `--urls` the file's lines laid out so that any
//! `pipeline` consecutive requests of the rotation are one slice (see [`crate::load::source::urls`]).
//! Each connection keeps a cursor ([`Connection::request`](crate::load::engine::connection::Connection)), the
//! line of its next request: connection `i` starts at line `i mod n`
//! ([`RequestSource::first_line`]) and a batch of `k` requests advances it by `k`, round robin.
//! The hot path writes a slice of the set's buffer and computes each request's line with an
//! add and a compare.

use std::ops::Range;

use crate::load::source::urls::RequestSet;

/// The requests of a run, each pre-serialized.
#[derive(Debug, Clone, Copy)]
pub struct RequestSource<'a> {
    set: &'a RequestSet,
}

impl<'a> RequestSource<'a> {
    pub fn new(set: &'a RequestSet) -> RequestSource<'a> {
        RequestSource { set }
    }

    /// How many requests rotate (1 without `--urls`).
    #[inline]
    pub fn lines(&self) -> usize {
        self.set.lines()
    }

    /// The line global connection `connection` starts at.
    pub fn first_line(&self, connection: usize) -> usize {
        connection % self.set.lines()
    }

    /// The line after `line`, round robin.
    #[inline]
    pub fn next_line(&self, line: usize) -> usize {
        let next = line + 1;
        if next == self.set.lines() {
            0
        } else {
            next
        }
    }

    /// Where in [`RequestSource::bytes`] the `count` requests starting at `line` are
    /// (`count` at most the pipeline depth).
    #[inline]
    pub fn batch(&self, line: usize, count: usize) -> Range<usize> {
        self.set.window(line, count)
    }

    /// Every request's bytes; a batch is a range of them.
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.set.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_rotate_and_batches_are_consecutive_requests() {
        let set = RequestSet::new(&[b"a".to_vec(), b"bb".to_vec(), b"c".to_vec()], 2).unwrap();
        let source = RequestSource::new(&set);
        assert_eq!(
            (0..5).map(|i| source.first_line(i)).collect::<Vec<_>>(),
            vec![0, 1, 2, 0, 1]
        );
        assert_eq!(source.next_line(1), 2);
        assert_eq!(source.next_line(2), 0);
        assert_eq!(&source.bytes()[source.batch(2, 2)], b"ca");
        assert_eq!(&source.bytes()[source.batch(1, 2)], b"bbc");
        let one = RequestSet::new(&[b"GET /".to_vec()], 3).unwrap();
        let single = RequestSource::new(&one);
        assert_eq!((single.first_line(7), single.next_line(0)), (0, 0));
        assert_eq!(&single.bytes()[single.batch(0, 3)], b"GET /GET /GET /");
    }
}
