//! Request sources: what a run sends. [`request`] builds one request's bytes from the flags,
//! [`urls`] reads a `--urls` list (methods, headers and bodies per line, rotated over the
//! connections), and [`plan`] is a rate that changes over the run (a ramp or steps). The
//! engine ([`super::engine`]) takes them from here; the per-URL and per-step figures they
//! lead to are kept in [`super::stats`].

pub mod plan;
pub mod request;
pub mod urls;
