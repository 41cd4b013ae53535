//! sweetspot: a laboratory for server concurrency.
//!
//! Three jobs share this library: [`serve`] serves one app ([`app`]) over one sans-IO HTTP layer
//! ([`http`]) in every concurrency architecture of [`arch`]; [`load`] generates load and
//! measures latency honestly (and [`merge`] adds up the segments of a distributed run);
//! [`sweep`] runs experiments across both and explains the result. [`cli`] is the
//! command line; [`sys`] is the only home of `unsafe`.

pub mod app;
pub mod arch;
pub mod cli;
pub mod http;
pub mod load;
pub mod map;
pub mod merge;
pub mod net;
pub mod reclaim;
pub mod render;
pub mod serve;
pub mod store;
pub mod sweep;
pub mod sys;
pub mod tune;

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

/// Writes `text` to stdout and flushes it. Unlike `print!`, a closed pipe (`sweetspot sweep
/// --list | head -1`) is an error that [`main_with_args`] turns into a quiet exit 0, not a panic.
pub fn print_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Runs the program for the given arguments and returns the exit code: 0 on success,
/// 2 for unusable arguments, 1 for every other failure.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let cli = match <cli::Cli as clap::Parser>::try_parse_from(&args) {
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

/// `sweetspot` or `sweetspot SUBCOMMAND`: the first argument that names a subcommand, for the
/// `--help` hint of an argument error.
fn command_path(args: &[OsString]) -> String {
    use clap::CommandFactory;
    let command = cli::Cli::command();
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
        let names: Vec<String> = cli::Cli::command()
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
        let e = <cli::Cli as clap::Parser>::try_parse_from(&args).unwrap_err();
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
                "a subcommand is required: serve, load, sweep, report, map, advise, tune, merge (try 'sweetspot --help')",
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
