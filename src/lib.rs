//! sweetspot: a laboratory for server concurrency.
//!
//! [`serve`] serves one app ([`app`], on the guestbook's [`store`]) over one sans-IO HTTP layer
//! ([`http`]) in every concurrency architecture of [`arch`]; [`load`] generates load and
//! measures latency honestly (and [`merge`] adds up the segments of a distributed run). The
//! [`lab`] measures one point (a server started, loaded, sampled and stopped), behind one door
//! every command opens the same way ([`lab::Lab`]); the commands that measure sit on it:
//! [`sweep`] (experiments, explained), [`map`] and `advise` (the sweet-spot map, one cell),
//! [`tune`] (the user's own server's knobs), the last three over the [`search`] kernel, and
//! [`limiter`] (adaptive concurrency limiters against the knee). [`net`] is the network path
//! between clients and server. [`cli`] is the command line; [`sys`] is the only home of
//! `unsafe`. The layers, bottom up, are in docs/DESIGN.md and checked by tests/layering.rs.

/// Files shipped in the repository, read into the binary, as `(name, text)` pairs:
/// `shipped!("experiments/", ".toml"; "quick", "echo")` reads `experiments/quick.toml` as
/// `("quick", ...)`.
macro_rules! shipped {
    ($dir:literal, $ext:literal; $($name:literal),+ $(,)?) => {
        &[$((
            $name,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, $name, $ext)),
        )),+]
    };
}

pub mod app;
pub mod arch;
pub mod cli;
pub mod deadlines;
pub mod http;
pub mod lab;
pub mod limiter;
pub mod load;
pub mod map;
pub mod merge;
pub mod model;
pub mod net;
pub mod os;
pub mod reclaim;
pub mod render;
pub mod search;
pub mod serve;
pub mod store;
pub mod sweep;
pub mod sys;
pub mod tune;
pub mod units;

/// An error that means "the user asked for something unusable": exit code 2, one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Builds a [`UsageError`] wrapped in `anyhow`, for validation code.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// A TOML file's error as one usage line: `ORIGIN: line N: KEY: what is wrong` (toml's
/// messages may span lines; the contract is one line, and the key named where a value's own
/// check said what was wrong without it).
pub fn toml_usage(text: &str, origin: &str, e: &toml::de::Error) -> anyhow::Error {
    let message = e
        .message()
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(": ");
    let Some(span) = e.span() else {
        return usage(format!("{origin}: {message}"));
    };
    let start = span.start.min(text.len());
    let line = text[..start].lines().count().max(1);
    let line_text = text[text[..start].rfind('\n').map_or(0, |i| i + 1)..]
        .lines()
        .next()
        .unwrap_or_default();
    let key = line_text
        .split_once('=')
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && !message.contains(k));
    match key {
        Some(key) => usage(format!("{origin}: line {line}: {key}: {message}")),
        None => usage(format!("{origin}: line {line}: {message}")),
    }
}

/// Writes `text` to stdout and flushes it. Unlike `print!`, a closed pipe (`sweetspot sweep
/// --list | head -1`) is an error that `cli::main_with_args` turns into a quiet exit 0, not a panic.
pub fn print_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}
