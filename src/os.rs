//! What every command asks of its own process: a stop flag that SIGINT and SIGTERM set, an
//! open-file limit high enough for the connections it will hold, and input files read with a
//! bound.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;

use crate::usage;

/// High concurrency levels need a descriptor per connection in the generator, and the servers
/// inherit the limit: raises the soft limit to the hard one, and fails now (a usage error
/// that begins with `what`, not an error at the first connection over it) when it cannot go
/// high enough.
pub fn check_file_limit(connections: u64, what: &str) -> anyhow::Result<()> {
    let file_limit = crate::sys::raise_fd_limit();
    let needed = connections + 64;
    if file_limit > 0 && file_limit < needed {
        return Err(usage(format!(
            "{what}: needs {needed} open files, but the file limit can be raised only to \
             {file_limit} (raise ulimit -n, or ask for fewer connections)"
        )));
    }
    Ok(())
}

/// A flag SIGINT and SIGTERM set: the command ends early with what it measured; a second
/// signal while the first is handled exits at once (130).
pub fn stop_on_signals() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop))
            .context("installing signal handlers")?;
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    Ok(stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_limit_already_met_is_ok_and_an_impossible_one_is_a_usage_error_naming_it() {
        check_file_limit(1, "one").unwrap();
        let e = check_file_limit(u64::MAX - 64, "concurrency = huge").unwrap_err();
        assert!(e.downcast_ref::<crate::UsageError>().is_some());
        let text = e.to_string();
        assert!(
            text.starts_with("concurrency = huge: needs 18446744073709551615 open files"),
            "{text}"
        );
        assert!(text.contains("can be raised only to"), "{text}");
    }
}

/// Why [`read_regular_file`] refused a file.
#[derive(Debug)]
pub enum FileRefused {
    /// It could not be opened or read.
    Io(std::io::Error),
    /// A device, a pipe or a directory: never read without bound.
    NotRegular,
    /// Longer than the bound.
    TooLarge,
}

/// Reads a regular file of at most `max_bytes`. A device (`/dev/zero`), a pipe or a file
/// growing while it is read never makes a command read without bound.
pub fn read_regular_file(path: &std::path::Path, max_bytes: u64) -> Result<Vec<u8>, FileRefused> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(FileRefused::Io)?;
    if !file.metadata().map_err(FileRefused::Io)?.is_file() {
        return Err(FileRefused::NotRegular);
    }
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(FileRefused::Io)?;
    if bytes.len() as u64 > max_bytes {
        return Err(FileRefused::TooLarge);
    }
    Ok(bytes)
}

/// Tests: an empty directory of this process's own under the temporary directory.
#[cfg(test)]
pub fn fresh_test_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sweetspot-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
