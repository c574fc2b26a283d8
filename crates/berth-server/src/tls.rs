//! Native TLS (`--tls-cert`, `--tls-key`): the server's rustls configuration from PEM files, for
//! operators without a terminating proxy. HTTP/1.1 only, TLS 1.2 and 1.3, no client
//! certificates.

use crate::config::TlsFiles;
use anyhow::Context as _;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The acceptor that serves the certificate chain and key of `files`.
pub fn acceptor(files: &TlsFiles) -> anyhow::Result<TlsAcceptor> {
    let cert_pem = std::fs::read(&files.cert)
        .with_context(|| format!("reading the TLS certificate {}", files.cert.display()))?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing the TLS certificate {}", files.cert.display()))?;
    anyhow::ensure!(
        !chain.is_empty(),
        "the TLS certificate file {} holds no PEM certificate",
        files.cert.display()
    );
    let key_pem = std::fs::read(&files.key)
        .with_context(|| format!("reading the TLS key {}", files.key.display()))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .with_context(|| format!("parsing the TLS key {}", files.key.display()))?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the TLS certificate and key do not make a server configuration")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
