//! The `Idempotency-Key` request header (IETF httpapi draft) on the create endpoints of leases,
//! Promise reservations and node claims: validated here, then bound to the caller's project, the
//! route and a fingerprint of what the request asks, for the service to record with what the
//! request creates. A retry with the same key and the same request answers with the first
//! result; the same key with another request is 422 `idempotency_key_reused`.

use crate::http::error::ApiError;
use crate::http::extract::Caller;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use berth_core::limits::IDEMPOTENCY_KEY_LEN_MAX;
use berth_core::model::idempotency::{IdempotencyKey, Idempotent};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// The header's name.
pub const HEADER: &str = "idempotency-key";

/// A request's `Idempotency-Key` (if it sent one) and route (method and path).
#[derive(Debug, Clone)]
pub struct IdempotencyHeader {
    key: Option<String>,
    route: String,
}

impl IdempotencyHeader {
    /// The key of `caller`'s request asking `input` (its JSON input, as parsed), with the
    /// request's fingerprint: a SHA-256 of the method, the path and the input in canonical JSON
    /// (object members sorted), so whitespace and member order do not make two requests differ.
    pub fn bind(&self, caller: &Caller, input: &Map<String, Value>) -> Option<Idempotent> {
        let key = self.key.clone()?;
        let mut hasher = Sha256::new();
        hasher.update(self.route.as_bytes());
        hasher.update(b"\n");
        hasher.update(serde_json::to_vec(input).expect("invariant: a JSON map serializes"));
        let fingerprint =
            hasher
                .finalize()
                .iter()
                .fold(String::with_capacity(64), |mut hex, byte| {
                    let _ = write!(hex, "{byte:02x}");
                    hex
                });
        Some(Idempotent {
            key: IdempotencyKey {
                project_id: caller.0.project_id.clone(),
                route: self.route.clone(),
                key,
            },
            fingerprint,
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let route = format!("{} {}", parts.method, parts.uri.path());
        let mut values = parts.headers.get_all(HEADER).iter();
        let key = match (values.next(), values.next()) {
            (None, _) => None,
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "Idempotency-Key may be given only once",
                ));
            }
            (Some(value), None) => Some(parse(value.to_str().map_err(|_| invalid())?)?),
        };
        Ok(IdempotencyHeader { key, route })
    }
}

/// The key of a header value: a Structured Field string (`"..."`, as the draft has it) or the
/// bare text, 1 to [`IDEMPOTENCY_KEY_LEN_MAX`] characters.
fn parse(value: &str) -> Result<String, ApiError> {
    let value = value.trim();
    let key = match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(quoted) => unescape(quoted)?,
        None => value.to_owned(),
    };
    match (1..=IDEMPOTENCY_KEY_LEN_MAX).contains(&key.len()) {
        true => Ok(key),
        false => Err(invalid()),
    }
}

/// The content of a Structured Field string: `\"` and `\\` are its only escapes.
fn unescape(quoted: &str) -> Result<String, ApiError> {
    let mut out = String::with_capacity(quoted.len());
    let mut chars = quoted.chars();
    // Bounded by the header's length.
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('"' | '\\')) => out.push(escaped),
                _ => return Err(invalid()),
            },
            '"' => return Err(invalid()),
            other => out.push(other),
        }
    }
    Ok(out)
}

fn invalid() -> ApiError {
    ApiError::bad_request(format!(
        "Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_LEN_MAX} visible ASCII characters"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_bare_or_quoted_and_bounded() {
        assert_eq!(parse("abc-1").expect("bare"), "abc-1");
        assert_eq!(parse("\"abc 1\"").expect("quoted"), "abc 1");
        assert_eq!(parse(r#""a\"b\\c""#).expect("escaped"), r#"a"b\c"#);
        assert_eq!(parse(&"k".repeat(255)).expect("longest").len(), 255);
        for bad in [
            String::new(),
            "\"\"".to_owned(),
            "k".repeat(256),
            r#""a\b""#.to_owned(),
        ] {
            assert!(parse(&bad).is_err(), "{bad:?} is refused");
        }
    }
}
