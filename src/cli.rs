//! The command line: clap derive for `serve`, `load`, `sweep`, `report`, `map`, `advise`,
//! `tune`, `limiters` and `merge`.
//!
//! Each subcommand's raw flags are turned into a validated config by the module that owns it
//! (two stages, as ripgrep does), so bad input fails early with one line and exit code 2.

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::UsageError;

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
    /// Audit adaptive concurrency limiters (Vegas, Gradient2, AIMD, Envoy, Vector) against the
    /// knee measured in the same run.
    Limiters(crate::limiter::LimitersArgs),
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
        Command::Limiters(args) => crate::limiter::run_limiters(args),
        Command::Reclaim { dir } => crate::reclaim::guard(&dir),
    }
}

/// Runs the program for the given arguments and returns the exit code: 0 on success,
/// 2 for unusable arguments, 1 for every other failure.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cli = match <Cli as clap::Parser>::try_parse_from(&args) {
        Ok(cli) => cli,
        // --help and --version print as clap renders them; every argument error is one line.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!(
                "sweetspot: {}",
                one_line_clap_error(&e, &command_path(&args))
            );
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("sweetspot: {e:#}");
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// `sweetspot` or `sweetspot SUBCOMMAND`: the first argument that names a subcommand, for the
/// `--help` hint of an argument error.
fn command_path(args: &[OsString]) -> String {
    use clap::CommandFactory;
    let command = Cli::command();
    let sub = args.iter().skip(1).find_map(|arg| {
        command
            .get_subcommands()
            .find(|c| arg.to_str() == Some(c.get_name()))
    });
    match sub {
        Some(sub) => format!("sweetspot {}", sub.get_name()),
        None => "sweetspot".into(),
    }
}

/// A clap error (3 to 7 lines with usage and tips) as one line: the message, any possible
/// values, and where to find help.
fn one_line_clap_error(e: &clap::Error, command_path: &str) -> String {
    use clap::CommandFactory;
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let names: Vec<String> = Cli::command()
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name().to_string())
            .collect();
        return format!(
            "a subcommand is required: {} (try '{command_path} --help')",
            names.join(", ")
        );
    }
    let rendered = e.render().to_string();
    let parts: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|line| {
            !(line.is_empty()
                || line.starts_with("tip:")
                || line.starts_with("Usage:")
                || line.starts_with("For more information"))
        })
        .map(|line| line.strip_prefix("error: ").unwrap_or(line))
        .collect();
    format!("{} (try '{command_path} --help')", parts.join(" "))
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_line_error_of(line: &str) -> String {
        let args: Vec<OsString> = line.split_whitespace().map(Into::into).collect();
        let e = <Cli as clap::Parser>::try_parse_from(&args).unwrap_err();
        one_line_clap_error(&e, &command_path(&args))
    }

    #[test]
    fn clap_errors_become_one_line() {
        for (line, expected) in [
            (
                "sweetspot load",
                "the following required arguments were not provided: <TARGET> \
                 (try 'sweetspot load --help')",
            ),
            (
                "sweetspot load http://h/ --bogus",
                "unexpected argument '--bogus' found (try 'sweetspot load --help')",
            ),
            (
                "sweetspot serve --arch nope",
                // The possible values are the architectures, from the one list.
                &format!(
                    "invalid value 'nope' for '--arch <ARCH>' [possible values: {}] \
                     (try 'sweetspot serve --help')",
                    crate::arch::Arch::names().replace(' ', ", ")
                ),
            ),
            (
                "sweetspot",
                "a subcommand is required: serve, load, sweep, report, map, advise, tune, limiters, merge (try 'sweetspot --help')",
            ),
            (
                "sweetspot bogus",
                "unrecognized subcommand 'bogus' (try 'sweetspot --help')",
            ),
        ] {
            assert_eq!(one_line_error_of(line), expected, "{line}");
        }
    }
}
