//! The sans-IO HTTP/1.1 layer every architecture shares.
//!
//! [`RequestParser`] turns bytes into [`Request`]s (httparse does the tokenising; this module
//! adds framing, limits and keep-alive rules), and [`Response`] turns an answer back into
//! bytes. No sockets here: an architecture decides only who waits and who runs, so the wire
//! behaviour is the same in all of them. [`grpc`] is gRPC's framing and the lab's one method,
//! which the async architecture serves over HTTP/2 and `load --grpc` calls.

#[cfg(test)]
mod fuzz;
pub mod grpc;
mod request;
mod response;

pub use request::{HttpError, Method, Request, RequestParser, MAX_BODY, MAX_HEADER_BYTES};
pub use response::{status_reason, FileBody, Persist, Response, FILE_CHUNK};
