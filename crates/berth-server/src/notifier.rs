//! Delivering notifications over HTTP: a JSON POST to the subscriber's callback, with a
//! per-request timeout, no redirects followed, and, when the subscription has a secret, an
//! `X-Berth-Signature` header `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.

use berth_app::Notifier;
use hmac::{KeyInit, Mac};
use std::future::Future;
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
    /// A notifier with its own connection pool.
    pub fn new() -> anyhow::Result<HttpNotifier> {
        let client = reqwest::Client::builder()
            .timeout(DELIVERY_TIMEOUT)
            .connect_timeout(DELIVERY_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(HttpNotifier { client })
    }
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
            let response = request.body(body).send().await.map_err(|e| e.to_string())?;
            match response.status() {
                status if status.is_success() => Ok(()),
                status => Err(format!("the callback answered {status}")),
            }
        })
    }
}
