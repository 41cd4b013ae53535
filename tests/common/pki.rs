//! Test certificates made with rcgen: a CA and a leaf it signed, or a self-signed leaf, with
//! the leaf's key and the rustls server configuration that presents them. One copy for the HTTPS tests (tests/tls.rs,
//! through tests/common) and the unit tests of src/load/tls.rs (which include this file by
//! `#[path]`, as a library cannot depend on a test crate).
#![allow(dead_code)]

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Certificates for a test: the leaf the server presents, its key, and the CA's PEM (for a
/// self-signed leaf, the leaf's own PEM).
pub struct Pki {
    pub leaf: CertificateDer<'static>,
    pub key: PrivateKeyDer<'static>,
    pub ca_pem: String,
}

impl Pki {
    /// A rustls server configuration that presents the leaf and offers ALPN `http/1.1`.
    pub fn server_config(&self) -> rustls::ServerConfig {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![self.leaf.clone()], self.key.clone_key())
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config
    }
}

/// A CA and a leaf for `localhost` and `127.0.0.1` signed by it.
pub fn ca_signed() -> Pki {
    ca_signed_for(&["localhost", "127.0.0.1"])
}

/// A CA and a leaf for `names` signed by it.
pub fn ca_signed_for(names: &[&str]) -> Pki {
    ca_signed_with(names, |_| {})
}

/// [`ca_signed_for`], with the leaf's parameters adjusted by `adjust` before it is signed.
pub fn ca_signed_with(names: &[&str], adjust: impl FnOnce(&mut rcgen::CertificateParams)) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sweetspot test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut leaf_params = CertificateParams::new(names).unwrap();
    adjust(&mut leaf_params);
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
    Pki {
        leaf: leaf.der().clone(),
        key: PrivatePkcs8KeyDer::from(leaf_key.serialize_der()).into(),
        ca_pem: ca.pem(),
    }
}

/// A self-signed leaf for `localhost` and `127.0.0.1`.
pub fn self_signed() -> Pki {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    Pki {
        leaf: cert.cert.der().clone(),
        key: PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()).into(),
        ca_pem: cert.cert.pem(),
    }
}

/// `der` as a PEM block labelled `label` (`CERTIFICATE`, `PRIVATE KEY`).
pub fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = text
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// The server's files for `pki` in `dir`: `cert.pem` (the leaf), `key.pem` (its key) and
/// `ca.pem` (the CA a client trusts), as paths.
pub fn write_server_files(
    dir: &std::path::Path,
    pki: &Pki,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let (cert, key, ca) = (
        dir.join("cert.pem"),
        dir.join("key.pem"),
        dir.join("ca.pem"),
    );
    std::fs::write(&cert, pem("CERTIFICATE", &pki.leaf)).unwrap();
    std::fs::write(&key, pem("PRIVATE KEY", pki.key.secret_der())).unwrap();
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    (cert, key, ca)
}
