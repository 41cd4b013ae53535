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
pub use measure::{measure, LabOptions, Pinning};
pub use plan::{PointPlan, PointSpec, Setup, TargetSpec, Workload};
pub use results::{Machine, PointResult};
