//! The flags `advise` and `tune` share, declared once: the connections, the p99 bound, the
//! network path, `--verify` and `--json`, each checked in one place.

use serde::{Deserialize, Serialize};

use crate::usage;

/// The most connections `advise` and `tune` load a server with.
pub const MAX_CONCURRENCY: u32 = 10_000;

/// Flags of the searches over a workload (`advise`, `tune`).
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
pub struct SearchFlags {
    /// Concurrent connections (closed loop), from 1 to 10,000.
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    pub concurrency: u32,
    /// The p99 the answer must meet.
    #[arg(long, default_value = "1s", value_parser = crate::units::duration_arg)]
    #[serde(with = "crate::units::as_text")]
    pub p99: std::time::Duration,
    /// Check the answer against a full, longer measurement of the same case, and say whether
    /// the pick is inside the best's spread.
    #[arg(long)]
    #[serde(default)]
    pub verify: bool,
    /// Print the results as JSON instead of text.
    #[arg(long)]
    #[serde(default)]
    pub json: bool,
    /// Clients across a network path, as root:
    /// rtt=50ms[,jitter=5ms][,rate=10mbit][,bottleneck=100mbit][,queue=N][,loss=0.5%]
    /// (see `load --net`).
    #[arg(long, value_name = "PATH")]
    #[serde(default)]
    pub net: Option<String>,
    /// The server's CPU budget.
    #[command(flatten)]
    #[serde(default)]
    pub budget: crate::lab::budget::BudgetFlags,
}

impl SearchFlags {
    /// `--concurrency`, checked (from 1 to [`MAX_CONCURRENCY`]), with the file limit raised
    /// for it.
    pub fn concurrency(&self) -> anyhow::Result<u32> {
        if !(1..=MAX_CONCURRENCY).contains(&self.concurrency) {
            return Err(usage(format!("--concurrency: from 1 to {MAX_CONCURRENCY}")));
        }
        crate::os::check_file_limit(
            u64::from(self.concurrency),
            &format!("concurrency = {}", self.concurrency),
        )?;
        Ok(self.concurrency)
    }

    /// `--p99` in milliseconds, above 0.
    pub fn p99_bound_ms(&self) -> anyhow::Result<f64> {
        if self.p99.is_zero() {
            return Err(usage("--p99: above 0"));
        }
        Ok(self.p99.as_secs_f64() * 1000.0)
    }

    /// `--net`, checked, and refused unless this process may make the path.
    pub fn net(&self) -> anyhow::Result<Option<crate::net::NetSpec>> {
        crate::net::net_option(self.net.as_deref(), None)
    }
}
