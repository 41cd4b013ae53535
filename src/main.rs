//! The `sweetspot` binary: parse the command line, hand it to the library, map errors to exit codes.
//!
//! Everything else lives in the library so tests and the sweep call it in-process.

use std::process::ExitCode;

fn main() -> ExitCode {
    sweetspot::cli::main_with_args(std::env::args_os())
}
