//! The lab: measuring one point, for every command that measures. [`plan`] says what a point
//! is; [`measure::measure`] starts its server ([`server`], ours or an external command, in a
//! [`cgroup`] where the machine allows), loads it, samples its process tree ([`probe`]), stops
//! it with everything it forked, and returns a typed [`results::PointResult`], its flags from
//! [`stats`] set. [`peers`] holds the peer servers' sources and requirements. Nothing here
//! reads an experiment file: `sweep` turns one into plans, `map`, `advise` and `tune` build
//! theirs in code.

pub mod budget;
pub mod cert;
pub mod cgroup;
pub mod context;
pub mod limit;
pub mod measure;
pub mod peers;
pub mod plan;
pub mod points;
pub mod probe;
pub mod results;
pub mod server;
pub mod stats;

pub use context::{Lab, Origin};

/// The load generator's threads' nice value where the lab may set it (root): ahead of the
/// server's threads (0), as a client on a machine of its own would be. A server of hundreds of
/// runnable threads otherwise holds the generator's one thread behind them, and connections
/// sit in the generator between a response and the next request: prethreaded/256 at 20 us of
/// CPU and 2 ms blocking waits over 256 connections kept 0.76 to 0.79 of them in the server at
/// nice 0 (under the 0.8 of [`stats::LITTLE_MIN_RATIO`]: starved, the lab's), 0.84 to 0.85 at
/// -10; uring/202 0.81 to 0.82 against 0.92 to 0.94. What the generator uses, it takes from
/// the server as before: each point still counts its CPU beside the server's.
pub const GENERATOR_NICE: i32 = -10;
pub use measure::{measure, LabOptions, Pinning};
pub use plan::{PointPlan, PointSpec, Setup, TargetSpec, Workload};
pub use results::{Machine, PointResult};
