//! sweetspot: a laboratory for server concurrency.
//!
//! Three jobs share this library: [`serve`] serves one app ([`app`]) over one sans-IO HTTP layer
//! ([`http`]) in every concurrency architecture of [`arch`]; [`load`] generates load and measures latency
//! honestly; [`sweep`] runs experiments across both and explains the result. [`cli`] is the
//! command line; [`sys`] is the only home of `unsafe`.

pub mod app;
pub mod arch;
pub mod cli;
pub mod http;
pub mod load;
pub mod serve;
pub mod store;
pub mod sweep;
pub mod sys;

use std::ffi::OsString;
use std::process::ExitCode;

/// An error that means "the user asked for something unusable": exit code 2, one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Builds a [`UsageError`] wrapped in `anyhow`, for validation code.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// Runs the program for the given arguments and returns the exit code: 0 on success,
/// 2 for unusable arguments, 1 for every other failure.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match <cli::Cli as clap::Parser>::try_parse_from(args) {
        Ok(cli) => cli,
        // --help and --version print as clap renders them; every argument error is one line.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("sweetspot: {}", one_line_clap_error(&e));
            return ExitCode::from(2);
        }
    };
    match cli::run(cli) {
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

/// A clap error (3 to 7 lines with usage and tips) as one line: the message, any possible
/// values, and where to find help.
fn one_line_clap_error(e: &clap::Error) -> String {
    use clap::CommandFactory;
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let names: Vec<String> = cli::Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        return format!(
            "a subcommand is required: {} (try 'sweetspot --help')",
            names.join(", ")
        );
    }
    let rendered = e.render().to_string();
    let mut parts = Vec::new();
    let mut help = "sweetspot".to_string();
    for line in rendered.lines().map(str::trim) {
        if let Some(usage) = line.strip_prefix("Usage: ") {
            // "Usage: sweetspot load [OPTIONS] <TARGET>": the command path, for the hint.
            help = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['-', '<', '[']))
                .collect::<Vec<_>>()
                .join(" ");
        } else if !(line.is_empty()
            || line.starts_with("tip:")
            || line.starts_with("For more information"))
        {
            parts.push(line.strip_prefix("error: ").unwrap_or(line));
        }
    }
    format!("{} (try '{help} --help')", parts.join(" "))
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

    fn error_of(line: &str) -> clap::Error {
        <cli::Cli as clap::Parser>::try_parse_from(line.split_whitespace()).unwrap_err()
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
                "invalid value 'nope' for '--arch <ARCH>' [possible values: iterative, forking, \
                 preforked, threaded, prethreaded, poll, epoll] (try 'sweetspot --help')",
            ),
            (
                "sweetspot",
                "a subcommand is required: serve, load, sweep, report (try 'sweetspot --help')",
            ),
            (
                "sweetspot bogus",
                "unrecognized subcommand 'bogus' (try 'sweetspot --help')",
            ),
        ] {
            assert_eq!(one_line_clap_error(&error_of(line)), expected, "{line}");
        }
    }
}
