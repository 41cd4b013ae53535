//! placeholder
#[derive(Debug, clap::Args)]
pub struct ServeArgs {}
pub fn run_serve(_a: ServeArgs) -> anyhow::Result<()> { Ok(()) }
