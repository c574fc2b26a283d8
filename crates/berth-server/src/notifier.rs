//! Delivering notifications over HTTP: a JSON POST to the subscriber's callback, with a
//! per-request timeout, no redirects followed, and, when the subscription has a secret, an
//! `X-Berth-Signature` header `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
//!
//! `https` callbacks are verified against the system's trusted roots, plus the certificates of
//! the configured CA file (`--callback-ca-file`) when there is one.
//!
//! Every attempt goes only where the [`destination`] policy lets it: a literal address is
//! checked before the request, and a host name through the client's resolver, which resolves it,
//! refuses the attempt when any address it resolves to is refused, and hands the connector only
//! the addresses it checked. Proxy settings from the environment are ignored (a proxy would
//! connect to addresses berth never saw), and redirects are never followed, so neither can lead
//! a callback to a refused address.

pub mod destination;

use anyhow::Context as _;
use berth_app::Notifier;
use destination::Destinations;
use hmac::{KeyInit, Mac};
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// How long one delivery attempt may take.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// The HTTP notifier.
#[derive(Debug, Clone)]
pub struct HttpNotifier {
    client: reqwest::Client,
    destinations: Arc<Destinations>,
}

impl HttpNotifier {
    /// A notifier with its own connection pool, trusting the system's roots and, when given,
    /// the certificates of the PEM bundle `ca_file` as well, that reaches only what
    /// `destinations` lets through.
    pub fn new(
        ca_file: Option<&Path>,
        destinations: Arc<Destinations>,
    ) -> anyhow::Result<HttpNotifier> {
        let extra = match ca_file {
            Some(path) => ca_certificates(path)?,
            None => Vec::new(),
        };
        let builder = || {
            reqwest::Client::builder()
                .timeout(DELIVERY_TIMEOUT)
                .connect_timeout(DELIVERY_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .dns_resolver(CheckedResolver {
                    destinations: Arc::clone(&destinations),
                })
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
        Ok(HttpNotifier {
            client,
            destinations,
        })
    }
}

/// Resolves a callback's host name, and refuses it unless every address it resolves to passes
/// the destination policy; the connector then connects only to those addresses.
#[derive(Debug)]
struct CheckedResolver {
    destinations: Arc<Destinations>,
}

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let destinations = Arc::clone(&self.destinations);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some(refused) = addresses
                .iter()
                .find_map(|a| destinations.check(a.ip()).err())
            {
                return Err(format!("callback host {host}: {refused}").into());
            }
            let addresses: reqwest::dns::Addrs = Box::new(addresses.into_iter());
            Ok(addresses)
        })
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
        let destinations = Arc::clone(&self.destinations);
        Box::pin(async move {
            // A literal address never reaches the resolver: check it here (subscriptions made
            // before the policy, or under a wider allow-list, are checked again at delivery).
            let parsed = reqwest::Url::parse(&url).map_err(|e| format!("callback URL: {e}"))?;
            destinations
                .check_url(&parsed)
                .map_err(|refused| format!("callback {refused}"))?;
            let mut request = client
                .post(parsed)
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
    use reqwest::dns::Resolve as _;

    #[tokio::test]
    async fn a_name_is_refused_when_an_address_it_resolves_to_is() {
        let name = |text: &str| text.parse::<reqwest::dns::Name>().expect("a name");
        let strict = CheckedResolver {
            destinations: Arc::default(),
        };
        let error = match strict.resolve(name("localhost")).await {
            Ok(_) => panic!("localhost resolves to loopback"),
            Err(error) => error.to_string(),
        };
        assert!(
            error.starts_with("callback host localhost: destination ")
                && error.contains("is a loopback address"),
            "{error}"
        );
        let allowed = destination::parse_allow(&["127.0.0.0/8,::1"]).expect("parsed");
        let open = CheckedResolver {
            destinations: Arc::new(Destinations::new(allowed)),
        };
        let addresses: Vec<SocketAddr> = open
            .resolve(name("localhost"))
            .await
            .expect("allowed")
            .collect();
        assert!(!addresses.is_empty());
        assert!(
            addresses.iter().all(|a| a.ip().is_loopback()),
            "{addresses:?}"
        );
    }

    #[test]
    fn the_client_takes_the_callback_ca_file() {
        let open = |ca: Option<&Path>| HttpNotifier::new(ca, Arc::default());
        assert!(open(None).is_ok());
        let dir = tempfile::tempdir().expect("dir");
        let ca = dir.path().join("ca.pem");
        assert!(open(Some(&ca)).is_err(), "a missing file");
        std::fs::write(&ca, "").expect("write");
        assert!(open(Some(&ca)).is_err(), "an empty file");
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
        std::fs::write(&ca, certified.cert.pem()).expect("write");
        assert_eq!(ca_certificates(&ca).expect("read").len(), 1);
        assert!(open(Some(&ca)).is_ok());
    }
}
