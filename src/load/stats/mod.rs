//! Statistics of a load run: latency histograms, counts by status and by failure, per-second
//! throughput, and one summary made from many threads. Each engine thread owns one
//! [`ThreadStats`] and touches nothing shared while it runs; the run merges them at the end
//! (HdrHistograms add exactly, counters sum), and nothing here grows with the number of
//! requests. Requests without an answer are [`Censored`], never left out, and [`lower_bounds`]
//! flags the figures they can reach. Below: the time series ([`series`]), per step of a plan
//! ([`steps`]), per URL ([`urls`]) and HTTP/2's own counts ([`h2`]); above, the engine records
//! here and the outputs read.

mod accumulator;
mod censor;
pub mod h2;
mod histogram;
mod hold;
pub mod series;
pub mod steps;
mod summary;
pub mod urls;

pub use accumulator::*;
pub use censor::*;
pub use histogram::*;
pub use hold::*;
pub use summary::*;

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::load::error::FailureKind;
