//! Scale-out: one run split over many `sweetspot load` workers ([`segment`]: `--segment I/N`
//! and a shared start time), and what `sweetspot merge` needs to add their reports back into
//! one. Merging is exact only with the whole histograms and per-URL and per-step counts, so
//! this is the one door `merge` uses into the statistics, the interval log and the tables.

pub mod segment;

pub use segment::SegmentInfo;

pub use crate::load::output::hlog::{read as read_interval_log, REPORT_COMMENT};
pub use crate::load::output::human::{h2_block, tls_block};
pub use crate::load::output::report::{H2Report, TlsReport};
pub use crate::load::stats::steps::{
    merge_workers as merge_steps, render_table as step_table, StepReport,
};
pub use crate::load::stats::urls::{merge_url_reports, render_table as url_table, UrlReport};
pub use crate::load::stats::{LatencyHistogram, LowerBounds};
