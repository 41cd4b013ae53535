//! The kinds of failure the load engine counts, as typed errors.
//!
//! A load run treats failures as data: every request that does not end in a complete response
//! ends in exactly one of these kinds, and the report counts them apart (connect, read, write,
//! timeout, protocol), as oha and wrk do. Framing errors say what was wrong with the bytes.

/// Why a request (or a connection attempt) failed. Each variant is one counter in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FailureKind {
    /// The TCP connection could not be opened (refused, unreachable, or not within the timeout).
    #[error("connect")]
    Connect,
    /// Reading failed, or the peer closed the connection while a response was expected.
    #[error("read")]
    Read,
    /// Writing the request failed.
    #[error("write")]
    Write,
    /// No complete response arrived within the timeout.
    #[error("timeout")]
    Timeout,
    /// The response bytes were not a valid response (bad head, bad chunking, unsolicited data).
    #[error("protocol")]
    Protocol,
}

/// What was wrong with a response's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    /// httparse rejected the status line or a header.
    #[error("malformed response head: {0}")]
    Head(httparse::Error),
    /// The head did not end within the size limit.
    #[error("response head larger than {0} bytes")]
    HeadTooLarge(usize),
    /// A Content-Length header that is not a number, or two that disagree.
    #[error("invalid Content-Length")]
    ContentLength,
    /// A chunk-size line that is not hexadecimal or overflows.
    #[error("invalid chunk size line")]
    ChunkSize,
    /// A chunk's data not followed by CRLF.
    #[error("chunk data not followed by CRLF")]
    ChunkTerminator,
    /// An echo reply that is not the query that was sent.
    #[error("echo reply differs from the query")]
    EchoMismatch,
    /// Bytes arrived while no request was in flight.
    #[error("response bytes without a request in flight")]
    Unsolicited,
}
