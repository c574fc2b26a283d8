//! The HTTP side of the client: one request at a time to berth's API, with the token and (on
//! `/placement`) the microversion, and berth's answers turned into values or [`CliError`]s.

use crate::error::CliError;
use reqwest::Method;
use serde_json::Value;
use std::time::Duration;

/// The Placement microversion the client speaks.
const PLACEMENT_VERSION: &str = "placement 1.39";

/// How long one request may take (long enough for the notification feed's longest wait).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A client of one berth server.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    /// A client of the server at `url` (`http://` or `https://`), sending `token` when given.
    pub(crate) fn new(url: &str, token: Option<&str>) -> Result<Client, CliError> {
        let base = url.trim().trim_end_matches('/').to_owned();
        let parsed = reqwest::Url::parse(&base)
            .map_err(|e| CliError::Usage(format!("--url {url} is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(CliError::Usage(format!(
                "--url {url} must be an http:// or https:// URL"
            )));
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("berth-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CliError::Connection(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Client {
            http,
            base,
            token: token.filter(|t| !t.is_empty()).map(str::to_owned),
        })
    }

    /// `GET path`.
    pub(crate) async fn get(&self, path: &str) -> Result<Value, CliError> {
        self.call(Method::GET, path, None).await
    }

    /// `POST path` with a JSON body.
    pub(crate) async fn post(&self, path: &str, body: &Value) -> Result<Value, CliError> {
        self.call(Method::POST, path, Some(body)).await
    }

    /// `PUT path` with a JSON body.
    pub(crate) async fn put(&self, path: &str, body: &Value) -> Result<Value, CliError> {
        self.call(Method::PUT, path, Some(body)).await
    }

    /// `PATCH path` with a JSON body.
    pub(crate) async fn patch(&self, path: &str, body: &Value) -> Result<Value, CliError> {
        self.call(Method::PATCH, path, Some(body)).await
    }

    /// `DELETE path`.
    pub(crate) async fn delete(&self, path: &str) -> Result<Value, CliError> {
        self.call(Method::DELETE, path, None).await
    }

    /// Sends one request; a 2xx answer is its JSON body (`null` when empty), anything else a
    /// refusal carrying berth's body.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, CliError> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Accept", "application/json");
        if path.starts_with("/placement") {
            request = request.header("OpenStack-API-Version", PLACEMENT_VERSION);
        }
        if let Some(token) = &self.token {
            request = request.header("X-Auth-Token", token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| CliError::Connection(format!("reading berth's answer: {e}")))?;
        let value = match text.trim().is_empty() {
            true => Value::Null,
            false => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        };
        match status.is_success() {
            true => Ok(value),
            false => Err(CliError::Refused {
                status: status.as_u16(),
                body: value,
            }),
        }
    }

    fn unreachable(&self, error: &reqwest::Error) -> CliError {
        // The innermost cause says what went wrong ("Connection refused", "timed out").
        let mut cause: &dyn std::error::Error = error;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        let what = match error.is_timeout() {
            true => "no answer in time from",
            false => "cannot reach",
        };
        CliError::Connection(format!("{what} berth at {}: {cause}", self.base))
    }
}

/// A path segment, percent-encoded.
pub(crate) fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(byte));
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// A query string (with its `?`) of the pairs given, or nothing.
pub(crate) fn query(pairs: &[(&str, Option<String>)]) -> String {
    let present: Vec<(&str, &str)> = pairs
        .iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| (*k, v)))
        .collect();
    match present.is_empty() {
        true => String::new(),
        false => format!(
            "?{}",
            serde_urlencoded::to_string(present).unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_parts_encoded() {
        assert!(Client::new("http://127.0.0.1:8778/", None).is_ok());
        assert!(matches!(
            Client::new("127.0.0.1:8778", None),
            Err(CliError::Usage(_))
        ));
        assert!(matches!(
            Client::new("ftp://host", None),
            Err(CliError::Usage(_))
        ));
        assert_eq!(segment("m1.large"), "m1.large");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
        assert_eq!(query(&[("a", None)]), "");
        assert_eq!(
            query(&[
                ("a", Some("1".into())),
                ("b", None),
                ("c", Some("x y".into()))
            ]),
            "?a=1&c=x+y"
        );
    }
}
