//! Load generation (placeholder until the load engine lands).

/// Flags of `sweetspot load`.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {
    /// http://HOST:PORT/PATH or tcp://HOST:PORT (echo protocol).
    pub target: String,
}

/// Runs `sweetspot load`.
pub fn run_load(_args: LoadArgs) -> anyhow::Result<()> {
    anyhow::bail!("load is not implemented yet")
}
