//! Lenient fields of JSON request bodies, as OpenStack clients send them, shared by the Blazar
//! and Promise surfaces: integers given as JSON numbers or numeric strings, and request dates
//! (`now`, Blazar's `YYYY-MM-DD HH:MM`, RFC 3339).

use crate::http::error::ApiError;
use berth_api::time::utc;
use berth_core::Instant;
use serde_json::{Map, Value};

/// Parses a request date: `now`, Blazar's `YYYY-MM-DD HH:MM` (UTC), the same with seconds, or
/// RFC 3339 with any offset (converted to UTC).
pub fn parse_date(field: &str, text: &str, now: Instant) -> Result<Instant, ApiError> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("now") {
        return Ok(now);
    }
    let stamp = utc(text, &["%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"]);
    stamp
        .map(|t| Instant::from_micros(t.as_microsecond()))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "{field}: {text} is an invalid date. Required format: %Y-%m-%d %H:%M, RFC 3339 or now"
            ))
        })
}

/// An integer field given as a JSON number or a numeric string, in `[min, max]`.
pub fn integer(
    body: &Map<String, Value>,
    field: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, ApiError> {
    let bad = || ApiError::bad_request(format!("{field} must be an integer from {min} to {max}"));
    let value = match body.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_i64().ok_or_else(bad)?,
        Some(Value::String(text)) => text.trim().parse::<i64>().map_err(|_| bad())?,
        Some(_) => return Err(bad()),
    };
    u64::try_from(value)
        .ok()
        .filter(|v| (min..=max).contains(v))
        .map(Some)
        .ok_or_else(bad)
}

/// A request body, already checked by hand with its surface's own messages, read as its
/// documented wire type (from a `&Map` or a `&Value`, without copying it): a body the type
/// cannot read is refused, so the schema in the OpenAPI document and what the handler accepts
/// cannot drift apart.
pub fn read_documented<'de, T, D>(body: D) -> Result<T, ApiError>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de, Error = serde_json::Error>,
{
    T::deserialize(body)
        .map_err(|error| ApiError::bad_request(format!("JSON does not validate: {error}")))
}

/// The member names a wire type's schema documents, sorted: what a handler that checks its
/// fields by hand must accept, no more and no less.
#[cfg(test)]
pub(crate) fn documented_fields<T: schemars::JsonSchema>() -> Vec<String> {
    let schema = schemars::schema_for!(T);
    let mut names: Vec<String> = schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    names.sort_unstable();
    names
}

/// `fields`, sorted, to compare with [`documented_fields`].
#[cfg(test)]
pub(crate) fn sorted(fields: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = fields.iter().map(|f| (*f).to_owned()).collect();
    names.sort_unstable();
    names
}
