//! sweetspot: a laboratory for server concurrency.
//!
//! Three jobs share this library: [`arch`] serves one app ([`app`]) over one sans-IO HTTP layer
//! ([`http`]) in every concurrency architecture; [`load`] generates load and measures latency
//! honestly (and [`merge`] adds up the segments of a distributed run); [`sweep`] runs experiments across both and explains the result. [`cli`] is the
//! command line; [`sys`] is the only home of `unsafe`.

pub mod app;
pub mod arch;
pub mod cli;
pub mod http;
pub mod load;
pub mod merge;
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
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
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

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
