//! The Promise wire format: the input of a request (JSON body on any method, merged with query
//! parameters), lenient numbers, dates, and what a failed RPC adds to the problem document.

use crate::http::error::ApiError;
use crate::http::fields::{integer, parse_date};
use crate::http::state::AppState;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header;
use berth_api::promise::RpcFailure;
use berth_core::Instant;
use berth_core::limits::REQUEST_QUANTITY_MAX;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The input of a Promise request: the JSON object of the body (any method; an empty body is
/// an empty object), with each query parameter added where the body does not set it. A dotted
/// parameter (`timePeriod.startTime`) sets a member of a nested object.
#[derive(Debug, Default)]
pub(super) struct Input(pub Map<String, Value>);

impl FromRequest<AppState> for Input {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Input, ApiError> {
        let query = request.uri().query().unwrap_or("").to_owned();
        let content_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            });
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("Unable to read the request body: {e}")))?;
        let mut body = match bytes.iter().all(u8::is_ascii_whitespace) {
            true => Map::new(),
            false => {
                if content_type
                    .as_deref()
                    .is_some_and(|t| t != "application/json")
                {
                    return Err(ApiError::new(
                        axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        "unsupported_media_type",
                        "The request body must be application/json",
                    ));
                }
                match serde_json::from_slice::<Value>(&bytes) {
                    Ok(Value::Object(map)) => map,
                    Ok(_) => return Err(ApiError::bad_request("The body must be a JSON object")),
                    Err(e) => {
                        return Err(ApiError::bad_request(format!("Malformed JSON body: {e}")));
                    }
                }
            }
        };
        let params: Vec<(String, String)> = serde_urlencoded::from_str(&query)
            .map_err(|e| ApiError::bad_request(format!("Malformed query string: {e}")))?;
        for (key, value) in params {
            merge_param(&mut body, &key, value);
        }
        Ok(Input(body))
    }
}

fn merge_param(body: &mut Map<String, Value>, key: &str, value: String) {
    match key.split_once('.') {
        None => {
            body.entry(key.to_owned()).or_insert(Value::String(value));
        }
        Some((outer, inner)) => {
            let entry = body
                .entry(outer.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(nested) = entry {
                merge_param(nested, inner, value);
            }
        }
    }
}

/// The members of `body` that the request type `T` reads: the handler reads its input through
/// `T`, so that the type documents every member it takes. A member `T` does not know is
/// dropped (or refused, where `T` denies unknown members); `null` reads as absent.
pub(super) fn read_as<T: DeserializeOwned + Serialize>(
    body: Map<String, Value>,
) -> Result<Map<String, Value>, ApiError> {
    let typed: T = serde_json::from_value(Value::Object(body))
        .map_err(|e| ApiError::bad_request(format!("Malformed request body: {e}")))?;
    match serde_json::to_value(typed) {
        Ok(Value::Object(members)) => Ok(members),
        _ => Ok(Map::new()),
    }
}

/// A nested object member (absent: empty).
pub(super) fn object<'a>(
    body: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a Map<String, Value>>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(ApiError::bad_request(format!("{field} must be an object"))),
    }
}

/// A non-negative integer given as a JSON number or a numeric string, at most `max`.
pub(super) fn number(
    body: &Map<String, Value>,
    field: &str,
    max: u64,
) -> Result<Option<u64>, ApiError> {
    integer(body, field, 0, max)
}

/// A count (instances, addresses, volumes, cores) within the reservation bounds.
pub(super) fn count(body: &Map<String, Value>, field: &str) -> Result<Option<u64>, ApiError> {
    number(body, field, u64::from(REQUEST_QUANTITY_MAX))
}

/// A memory or storage size (MB or GB), up to a thousand times the count bound.
pub(super) fn size(body: &Map<String, Value>, field: &str) -> Result<Option<u64>, ApiError> {
    number(body, field, u64::from(REQUEST_QUANTITY_MAX) * 1024)
}

/// A string member, when given.
pub(super) fn text(body: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(Some(text.trim().to_owned())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(ApiError::bad_request(format!(
            "{field} must be a non-empty string"
        ))),
    }
}

/// A boolean given as JSON or as `true`/`false` text.
pub(super) fn flag(body: &Map<String, Value>, field: &str) -> Result<Option<bool>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(t)) if t.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(t)) if t.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(_) => Err(ApiError::bad_request(format!(
            "{field} must be true or false"
        ))),
    }
}

/// A date member (RFC 3339, `YYYY-MM-DD HH:MM` or `now`).
pub(super) fn date(
    body: &Map<String, Value>,
    field: &str,
    now: Instant,
) -> Result<Option<Instant>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(t)) if t.trim() == "0" => Ok(Some(now)),
        Some(Value::String(t)) => parse_date(field, t, now).map(Some),
        Some(other) => Err(ApiError::bad_request(format!(
            "{field}: {other} is not a date (RFC 3339, YYYY-MM-DD HH:MM or now)"
        ))),
    }
}

/// A list of uuids (a JSON array, or one comma-separated string).
pub(super) fn uuids(body: &Map<String, Value>, field: &str) -> Result<Vec<uuid::Uuid>, ApiError> {
    let parse = |t: &str| {
        let t = t.trim();
        let t = t.rsplit_once(':').map_or(t, |(_, id)| id);
        uuid::Uuid::parse_str(t)
            .map_err(|_| ApiError::bad_request(format!("{field}: {t} is not a uuid")))
    };
    match body.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(t)) => t
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(parse)
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| ApiError::bad_request(format!("{field} must list uuids")))
                    .and_then(parse)
            })
            .collect(),
        Some(_) => Err(ApiError::bad_request(format!("{field} must list uuids"))),
    }
}

/// The `reservationId` of every object of the filter list `field` (trimmed), or 400 naming
/// the list when one lacks it.
pub(super) fn reservation_ids<'a>(
    field: &str,
    items: &'a [Value],
) -> Result<Vec<&'a str>, ApiError> {
    items
        .iter()
        .map(|item| {
            item.get("reservationId")
                .and_then(Value::as_str)
                .map(str::trim)
                .ok_or_else(|| ApiError::bad_request(format!("{field}: reservationId is missing")))
        })
        .collect()
}

/// An ETSI-style timestamp: RFC 3339 in UTC (`2015-09-21T01:00:00Z`).
pub(super) fn time(at: Instant) -> String {
    jiff::Timestamp::from_microsecond(at.as_micros())
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// An RPC error: the problem document carries Promise's `result` (`conflict` for 409, else
/// `error`) and `message` as well.
pub(super) fn rpc_error(error: ApiError) -> ApiError {
    let result = match error.status() {
        axum::http::StatusCode::CONFLICT => "conflict",
        _ => "error",
    };
    let failure = RpcFailure {
        result: result.to_owned(),
        message: error.detail().to_owned(),
    };
    error.merge_extra(failure)
}
