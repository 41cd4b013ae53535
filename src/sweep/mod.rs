//! Experiments (placeholder until the sweep lands).

/// Flags of `sweetspot sweep`.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    /// A preset name or a TOML experiment file.
    #[arg(default_value = "quick")]
    pub experiment: String,
}

/// Flags of `sweetspot report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// A directory written by `sweetspot sweep`.
    pub dir: std::path::PathBuf,
}

/// Runs `sweetspot sweep`.
pub fn run_sweep(_args: SweepArgs) -> anyhow::Result<()> {
    anyhow::bail!("sweep is not implemented yet")
}

/// Runs `sweetspot report`.
pub fn run_report(_args: ReportArgs) -> anyhow::Result<()> {
    anyhow::bail!("report is not implemented yet")
}
