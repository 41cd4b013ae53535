//! The live progress line shown on a terminal while a load run is going.
//!
//! Workers publish their completed-response counts in atomics; the run's main thread reads
//! them every 100 ms and updates an indicatif bar on stderr. Nothing is drawn when stderr is
//! not a terminal (the caller decides), so piped and scripted runs stay clean.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::load::{LoadConfig, Mode};

/// A progress bar over the run's duration (or request count in count mode).
pub struct LiveProgress {
    bar: ProgressBar,
    by_count: bool,
}

impl LiveProgress {
    pub fn new(config: &LoadConfig) -> LiveProgress {
        let (length, by_count) = match config.mode {
            Mode::Count { requests } => (requests, true),
            Mode::Closed { duration } | Mode::Rate { duration, .. } => {
                (duration.as_millis() as u64, false)
            }
        };
        let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr());
        let template = if by_count {
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} requests {msg}"
        } else {
            "{spinner} [{elapsed_precise}] {wide_bar} {msg}"
        };
        bar.set_style(
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        LiveProgress { bar, by_count }
    }

    /// Shows `completed` responses after `elapsed`.
    pub fn update(&self, completed: u64, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64().max(1e-3);
        if self.by_count {
            self.bar.set_position(completed);
        } else {
            self.bar.set_position(elapsed.as_millis() as u64);
        }
        self.bar.set_message(format!(
            "{completed} responses, {:.0} req/s",
            completed as f64 / seconds
        ));
    }

    /// Removes the bar before the summary is printed.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
