//! The certificate our servers serve HTTPS with in a `tls = true` experiment: self-signed for
//! `127.0.0.1` and `localhost`, made once per run with rcgen into the run's scratch directory
//! (the generator accepts it as `load --insecure` does: the handshake's signatures are still
//! checked, the chain is not).

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The certificate and key files under `scratch`, made on the first call of a run.
pub fn lab_certificate(scratch: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let dir = scratch.join("tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    if cert.is_file() && key.is_file() {
        return Ok((cert, key));
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let made = rcgen::generate_simple_self_signed(names).context("making the lab's certificate")?;
    std::fs::write(&key, made.signing_key.serialize_pem())
        .with_context(|| format!("writing {}", key.display()))?;
    std::fs::write(&cert, made.cert.pem())
        .with_context(|| format!("writing {}", cert.display()))?;
    Ok((cert, key))
}

/// From a server's stats line (`...; tls handshakes F full, R resumed, cpu C ms`): the
/// handshakes (full, resumed) and their CPU in milliseconds.
pub fn stats_handshakes(line: &str) -> Option<(u64, u64, f64)> {
    let rest = line.split("; tls handshakes ").nth(1)?;
    let mut words = rest.split([' ', ',']).filter(|w| !w.is_empty());
    let full = words.next()?.parse().ok()?;
    (words.next()? == "full").then_some(())?;
    let resumed = words.next()?.parse().ok()?;
    (words.next()? == "resumed").then_some(())?;
    (words.next()? == "cpu").then_some(())?;
    let cpu_ms = words.next()?.parse().ok()?;
    Some((full, resumed, cpu_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stats_line_gives_its_handshakes() {
        let line = "stopped: served 12 requests in 1.0 s; cpu user 0.1 s, system 0.2 s; \
                    accepted per loop 3 3; tls handshakes 5 full, 1766 resumed, cpu 437.334 ms";
        assert_eq!(stats_handshakes(line), Some((5, 1766, 437.334)));
        assert_eq!(
            stats_handshakes("stopped: served 1 requests in 1.0 s"),
            None
        );
        assert_eq!(
            stats_handshakes("x; tls handshakes 5 whole, 1 resumed, cpu 1 ms"),
            None
        );
    }

    #[test]
    fn the_certificate_is_made_once_and_read_as_pem() {
        let dir = std::env::temp_dir().join(format!("sweetspot-cert-{}", std::process::id()));
        let (cert, key) = lab_certificate(&dir).unwrap();
        let first = std::fs::read_to_string(&cert).unwrap();
        assert!(first.starts_with("-----BEGIN CERTIFICATE-----"), "{first}");
        assert!(std::fs::read_to_string(&key)
            .unwrap()
            .contains("PRIVATE KEY"));
        let (again, _) = lab_certificate(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(again).unwrap(), first);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
