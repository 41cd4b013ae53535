//! Real servers beside ours: the peer sources the project ships in `experiments/peers/`,
//! embedded so a preset runs from any directory (written into the sweep's scratch directory,
//! which an external command names as `{peers}`), and an experiment's `[[requires]]`: what
//! must be installed before anything runs. A missing one is installed when the sweep runs as
//! root (and says so), else it is one line naming the command that installs it, exit 2. The
//! version each reports is recorded in `results.json` (`versions`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;

use super::plan::Requirement;
use crate::usage;

/// The environment variable that forbids installing (a root run then only names what is
/// missing, as any other run does).
pub const NO_INSTALL_ENV: &str = "SWEETSPOT_NO_INSTALL";

/// The peers' files, by their path under `{peers}`.
const FILES: &[(&str, &str)] = shipped!("experiments/peers/", "";
    "app.py", "knobs.py", "app.ru", "server.js", "PoolServer.java", "server.go", "apache.sh",
    "nginx-h2c.sh", "h2o.sh", "grpcio.sh", "grpc_server.py", "lab.proto", "tonic.sh",
    "tonic/Cargo.toml", "tonic/Cargo.lock", "tonic/src/main.rs",
);
/// The pages the peers serve, under `{peers}`, as our server serves them from `public/`.
const HTDOCS: &[(&str, &str)] = &[
    ("htdocs/hello", "Hello, World!"),
    (
        "htdocs/page4k.html",
        include_str!("../../public/page4k.html"),
    ),
];

/// Writes the peers' files into `scratch/peers` (readable by all: Apache's workers run as
/// `www-data` when the sweep runs as root) and returns that directory.
pub fn write_files(scratch: &Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch.join("peers");
    for (name, text) in FILES.iter().chain(HTDOCS) {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        let mode = if name.ends_with(".sh") { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
    }
    for d in [scratch, dir.as_path(), dir.join("htdocs").as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(dir)
}

/// Whether a shell command succeeds (its output discarded).
fn succeeds(command: &str) -> bool {
    Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The first line a shell command prints, or `unknown`.
fn first_line(command: &str) -> String {
    Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Makes sure every requirement is met before a point runs, installing what is missing when
/// allowed to (`install`: root, and [`NO_INSTALL_ENV`] unset); returns each one's version.
/// A requirement that is still missing is a usage error naming what to install.
pub fn ensure(requires: &[Requirement], install: bool) -> anyhow::Result<BTreeMap<String, String>> {
    let mut versions = BTreeMap::new();
    for r in requires {
        if !succeeds(&r.check) {
            if !install {
                return Err(usage(format!(
                    "{} is missing (this experiment needs it): install it with `{}`, or run \
                     the sweep as root to have it installed",
                    r.name, r.install
                )));
            }
            eprintln!("sweep: {} is missing; installing it: {}", r.name, r.install);
            let installed = Command::new("sh")
                .args(["-c", &r.install])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !installed || !succeeds(&r.check) {
                return Err(usage(format!(
                    "{} is still missing after `{}`: install it by hand",
                    r.name, r.install
                )));
            }
        }
        versions.insert(r.name.clone(), first_line(&r.version));
    }
    Ok(versions)
}

/// Whether this sweep may install what is missing: it runs as root and [`NO_INSTALL_ENV`] is
/// not set.
pub fn may_install() -> bool {
    nix::unistd::geteuid().is_root() && std::env::var_os(NO_INSTALL_ENV).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirement(check: &str, install: &str) -> Requirement {
        Requirement {
            name: "thing".into(),
            check: check.into(),
            install: install.into(),
            version: "echo 1.2.3; echo more".into(),
        }
    }

    #[test]
    fn a_met_requirement_gives_its_version() {
        let versions = ensure(&[requirement("true", "false")], false).unwrap();
        assert_eq!(versions["thing"], "1.2.3");
    }

    #[test]
    fn a_missing_requirement_names_its_install_command() {
        let e = ensure(&[requirement("false", "apt-get install thing")], false).unwrap_err();
        let text = format!("{e}");
        assert!(text.contains("thing is missing"), "{text}");
        assert!(text.contains("`apt-get install thing`"), "{text}");
        assert!(e.downcast_ref::<crate::UsageError>().is_some());
    }

    #[test]
    fn an_install_that_does_not_help_is_one_line() {
        let e = ensure(&[requirement("false", "true")], true).unwrap_err();
        assert!(format!("{e}").contains("still missing after `true`"), "{e}");
    }

    #[test]
    fn every_file_is_written_readable() {
        let dir = crate::os::fresh_test_dir("peers");
        let peers = write_files(&dir).unwrap();
        for (name, text) in FILES.iter().chain(HTDOCS) {
            assert_eq!(std::fs::read_to_string(peers.join(name)).unwrap(), *text);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
