//! Delivering notifications over HTTP: a JSON POST to the subscriber's callback, with a
//! per-request timeout, no redirects followed, and, when the subscription has a secret, an
//! `X-Berth-Signature` header `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
//!
//! `https` callbacks are verified against the system's trusted roots, plus the certificates of
//! the configured CA file (`--callback-ca-file`) when there is one.

use anyhow::Context as _;
use berth_app::Notifier;
use hmac::{KeyInit, Mac};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

/// How long one delivery attempt may take.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// The HTTP notifier.
#[derive(Debug, Clone)]
pub struct HttpNotifier {
    client: reqwest::Client,
}

impl HttpNotifier {
    /// A notifier with its own connection pool, trusting the system's roots and, when given,
    /// the certificates of the PEM bundle `ca_file` as well.
    pub fn new(ca_file: Option<&Path>) -> anyhow::Result<HttpNotifier> {
        let extra = match ca_file {
            Some(path) => ca_certificates(path)?,
            None => Vec::new(),
        };
        let builder = || {
            reqwest::Client::builder()
                .timeout(DELIVERY_TIMEOUT)
                .connect_timeout(DELIVERY_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
        };
        let client = match builder().tls_certs_merge(extra.clone()).build() {
            Ok(client) => client,
            Err(error) => {
                // Without a usable system store (a minimal container), still verify against
                // the configured certificates rather than refuse to start.
                let client = builder()
                    .tls_certs_only(extra)
                    .build()
                    .context("building the notification client")?;
                tracing::warn!(
                    error = %format_args!("{:#}", anyhow::Error::from(error)),
                    "the system's trusted roots are unusable: https callbacks are trusted only when the callback CA file issued their certificate"
                );
                client
            }
        };
        Ok(HttpNotifier { client })
    }
}

/// The certificates of the PEM bundle at `path`: an error when it cannot be read, is not PEM, or
/// holds no certificate.
pub fn ca_certificates(path: &Path) -> anyhow::Result<Vec<reqwest::Certificate>> {
    let pem = std::fs::read(path)
        .with_context(|| format!("reading the callback CA file {}", path.display()))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .with_context(|| format!("parsing the callback CA file {}", path.display()))?;
    anyhow::ensure!(
        !certificates.is_empty(),
        "the callback CA file {} holds no PEM certificate",
        path.display()
    );
    Ok(certificates)
}

/// The signature header value of `body` sent at `timestamp` (unix seconds).
pub fn signature(secret: &str, timestamp: u64, body: &str) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes())
        .expect("invariant: HMAC takes keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("t={timestamp},v1={hex}")
}

impl Notifier for HttpNotifier {
    fn post(
        &self,
        url: String,
        body: String,
        secret: Option<String>,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> {
        let client = self.client.clone();
        Box::pin(async move {
            let mut request = client
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json");
            if let Some(secret) = secret {
                let now = crate::clock::unix_seconds();
                request = request.header("X-Berth-Signature", signature(&secret, now, &body));
            }
            // With its causes: "invalid peer certificate: UnknownIssuer" tells an admin more
            // than "error sending request".
            let response = request
                .body(body)
                .send()
                .await
                .map_err(|e| format!("{:#}", anyhow::Error::from(e)))?;
            match response.status() {
                status if status.is_success() => Ok(()),
                status => Err(format!("the callback answered {status}")),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_takes_the_callback_ca_file() {
        assert!(HttpNotifier::new(None).is_ok());
        let dir = tempfile::tempdir().expect("dir");
        let ca = dir.path().join("ca.pem");
        assert!(HttpNotifier::new(Some(&ca)).is_err(), "a missing file");
        std::fs::write(&ca, "").expect("write");
        assert!(HttpNotifier::new(Some(&ca)).is_err(), "an empty file");
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
        std::fs::write(&ca, certified.cert.pem()).expect("write");
        assert_eq!(ca_certificates(&ca).expect("read").len(), 1);
        assert!(HttpNotifier::new(Some(&ca)).is_ok());
    }
}
