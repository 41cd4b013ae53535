//! The command line: clap derive for `serve`, `load`, `sweep`, `report`, `map`, `advise`,
//! `tune` and `merge`.
//!
//! Each subcommand's raw flags are turned into a validated config by the module that owns it
//! (two stages, as ripgrep does), so bad input fails early with one line and exit code 2.

use clap::{Parser, Subcommand};

/// sweetspot: which concurrency model, and how many threads, for my workload?
#[derive(Debug, Parser)]
#[command(name = "sweetspot", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the app (HTTP/1.1 or line echo) in one concurrency architecture.
    Serve(crate::serve::ServeArgs),
    /// Generate load against an HTTP(S) or echo target and report throughput and latency.
    Load(crate::load::LoadArgs),
    /// Run an experiment (a preset or a TOML file) and recommend an architecture.
    Sweep(crate::sweep::SweepArgs),
    /// Re-render the tables, plots and report of a finished sweep from its results.json.
    Report(crate::sweep::ReportArgs),
    /// Map which architecture and pool size win over CPU-versus-wait and concurrency.
    Map(crate::map::MapArgs),
    /// Advise an architecture and pool size for one workload (or a running server), in minutes.
    Advise(crate::map::advise::AdviseArgs),
    /// Tune your own server's knobs (workers, threads) for your request and p99 bound.
    Tune(crate::tune::TuneArgs),
    /// Merge the JSON reports or interval logs of the segments of one distributed load run.
    Merge(crate::merge::MergeArgs),
    /// The guard of a run (started by the run itself): takes back what the run left once it ends.
    #[command(name = "__reclaim", hide = true)]
    Reclaim {
        /// The run's directory.
        dir: std::path::PathBuf,
    },
}

/// Dispatches a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => crate::serve::run_serve(args),
        Command::Load(args) => crate::load::run_load(args),
        Command::Sweep(args) => crate::sweep::run_sweep(args),
        Command::Report(args) => crate::sweep::run_report(args),
        Command::Merge(args) => crate::merge::run_merge(args),
        Command::Map(args) => crate::map::run_map(args),
        Command::Advise(args) => crate::map::advise::run_advise(args),
        Command::Tune(args) => crate::tune::run_tune(args),
        Command::Reclaim { dir } => crate::reclaim::guard(&dir),
    }
}
