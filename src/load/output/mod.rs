//! What a run leaves behind: [`report`] is the result (`--json`), [`human`] the terminal
//! summary, [`progress`] the live line on standard error. The time-series outputs (`--csv`,
//! `--html`) are with their intervals in [`super::stats::series`].

pub mod hlog;
pub mod human;
pub mod progress;
pub mod report;
pub mod timeseries;
