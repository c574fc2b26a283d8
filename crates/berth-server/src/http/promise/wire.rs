//! The Promise wire format: the input of a request (JSON body on any method, merged with query
//! parameters), its members read through their documented lenient types (numbers, flags, names,
//! lists, dates), and what a failed RPC adds to the problem document.

use crate::http::error::ApiError;
use crate::http::fields::parse_date;
pub(super) use crate::http::promise_rpc::rpc_error;
use crate::http::state::AppState;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header;
use berth_api::promise::{Count, Flag, Names, Text};
use berth_app::AppError;
use berth_core::Instant;
use berth_core::limits::REQUEST_QUANTITY_MAX;
use berth_core::model::cloud::Origin;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
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
            .map_err(crate::http::extract::unreadable)?;
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

/// [`Input`] of a Promise RPC: a body that cannot be read (too large, not JSON) is refused as
/// the RPC's own errors are, with Promise's `result` and `message`.
#[derive(Debug, Default)]
pub(super) struct RpcInput(pub Map<String, Value>);

impl FromRequest<AppState> for RpcInput {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<RpcInput, ApiError> {
        Input::from_request(request, state)
            .await
            .map(|Input(body)| RpcInput(body))
            .map_err(rpc_error)
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

/// Member `field` of `body` read as its documented wire type (`berth_api::promise::Count`,
/// `Flag`, `Text`, `Names`, a date's `String`): `None` when absent or `null`; an error when the
/// type cannot read it, which the caller turns into its own message.
pub(super) fn member<'a, T: Deserialize<'a>>(
    body: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<T>, serde_json::Error> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => T::deserialize(value).map(Some),
    }
}

/// The members of `body` named in `fields`, the member names of the request's documented type:
/// a handler reads nothing its type does not document (Promise ignores other members).
pub(super) fn documented(mut body: Map<String, Value>, fields: &[&str]) -> Map<String, Value> {
    body.retain(|name, _| fields.contains(&name.as_str()));
    body
}

/// A non-negative integer ([`Count`]: a JSON number or a numeric string), at most `max`.
pub(super) fn number(
    body: &Map<String, Value>,
    field: &str,
    max: u64,
) -> Result<Option<u64>, ApiError> {
    let bad = || ApiError::bad_request(format!("{field} must be an integer from 0 to {max}"));
    let value = match member::<Count>(body, field).map_err(|_| bad())? {
        None => return Ok(None),
        Some(Count::Number(n)) => n,
        Some(Count::Text(text)) => text
            .trim()
            .parse::<i64>()
            .ok()
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(bad)?,
    };
    match value <= max {
        true => Ok(Some(value)),
        false => Err(bad()),
    }
}

/// A count (instances, addresses, volumes, cores) within the reservation bounds.
pub(super) fn count(body: &Map<String, Value>, field: &str) -> Result<Option<u64>, ApiError> {
    number(body, field, u64::from(REQUEST_QUANTITY_MAX))
}

/// A memory or storage size (MB or GB), up to a thousand times the count bound.
pub(super) fn size(body: &Map<String, Value>, field: &str) -> Result<Option<u64>, ApiError> {
    number(body, field, u64::from(REQUEST_QUANTITY_MAX) * 1024)
}

/// A string member ([`Text`]: a string that is not blank, trimmed, or a number's text), when
/// given.
pub(super) fn text(body: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match member::<Text>(body, field) {
        Ok(None) => Ok(None),
        Ok(Some(Text::Text(text))) if !text.trim().is_empty() => Ok(Some(text.trim().to_owned())),
        Ok(Some(Text::Number(n))) => Ok(Some(n.to_string())),
        _ => Err(ApiError::bad_request(format!(
            "{field} must be a non-empty string"
        ))),
    }
}

/// A boolean ([`Flag`]: JSON, or `true`/`false` text).
pub(super) fn flag(body: &Map<String, Value>, field: &str) -> Result<Option<bool>, ApiError> {
    match member::<Flag>(body, field) {
        Ok(None) => Ok(None),
        Ok(Some(Flag::Bool(b))) => Ok(Some(b)),
        Ok(Some(Flag::Text(t))) if t.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Ok(Some(Flag::Text(t))) if t.eq_ignore_ascii_case("false") => Ok(Some(false)),
        _ => Err(ApiError::bad_request(format!(
            "{field} must be true or false"
        ))),
    }
}

/// A date member: a string, RFC 3339, `YYYY-MM-DD HH:MM` or `now`.
pub(super) fn date(
    body: &Map<String, Value>,
    field: &str,
    now: Instant,
) -> Result<Option<Instant>, ApiError> {
    match member::<String>(body, field) {
        Ok(None) => Ok(None),
        Ok(Some(t)) if t.trim() == "0" => Ok(Some(now)),
        Ok(Some(t)) => parse_date(field, &t, now).map(Some),
        Err(_) => Err(ApiError::bad_request(format!(
            "{field}: {} is not a date (RFC 3339, YYYY-MM-DD HH:MM or now)",
            body.get(field).unwrap_or(&Value::Null)
        ))),
    }
}

/// A list of names ([`Names`]: a JSON array of strings, or one comma-separated string); `Err`
/// when it is neither.
pub(super) fn names(body: &Map<String, Value>, field: &str) -> Result<Option<Names>, ()> {
    member::<Names>(body, field).map_err(|_| ())
}

/// A list of uuids ([`Names`]; `Kind:`-prefixed ids are taken without the prefix).
pub(super) fn uuids(body: &Map<String, Value>, field: &str) -> Result<Vec<uuid::Uuid>, ApiError> {
    let parse = |t: &str| {
        let t = t.trim();
        let t = t.rsplit_once(':').map_or(t, |(_, id)| id);
        uuid::Uuid::parse_str(t)
            .map_err(|_| ApiError::bad_request(format!("{field}: {t} is not a uuid")))
    };
    match names(body, field) {
        Ok(None) => Ok(Vec::new()),
        Ok(Some(Names::Joined(t))) => t
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(parse)
            .collect(),
        Ok(Some(Names::List(items))) => items.iter().map(|t| parse(t)).collect(),
        Err(()) => Err(ApiError::bad_request(format!("{field} must list uuids"))),
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

/// The provider a request names, from the first of `fields` it gives: a provider cloud's id
/// (`<uuid>` or `ResourceProvider:<uuid>`, as Promise's `provider-id` and the seed's
/// `source` give it) or `local` (berth's own capacity); `None` when it names none.
pub(super) fn provider_of(
    body: &Map<String, Value>,
    fields: &[&str],
) -> Result<Option<Origin>, ApiError> {
    for field in fields {
        let Some(named) = text(body, field)? else {
            continue;
        };
        let id = named
            .rsplit_once(':')
            .map_or(named.as_str(), |(_, id)| id)
            .trim();
        if id.eq_ignore_ascii_case(Origin::LOCAL_NAME) {
            return Ok(Some(Origin::Local));
        }
        return match id.parse() {
            Ok(id) => Ok(Some(Origin::Cloud(id))),
            Err(_) => Err(ApiError::bad_request(format!(
                "{field} {named} is not a provider id: give a provider cloud's id, \
                 ResourceProvider:<id> or local"
            ))),
        };
    }
    Ok(None)
}

/// The provider cloud a reservation or an instance is restricted to, named by the first of
/// `fields` given (`provider-id`, then the seed's `source`; `providerId` on the ETSI paths): the
/// id, or `ResourceProvider:<id>`. berth's own capacity
/// (`local`) is no cloud: a request without a provider may use it.
pub(super) fn cloud_of(
    body: &Map<String, Value>,
    fields: &[&str],
) -> Result<Option<uuid::Uuid>, ApiError> {
    match provider_of(body, fields)? {
        None => Ok(None),
        Some(Origin::Cloud(id)) => Ok(Some(id)),
        Some(Origin::Local) => Err(ApiError::bad_request(
            "provider-id local names berth's own capacity: give a provider cloud's id, or none to use any capacity",
        )),
    }
}

/// An ETSI-style timestamp: RFC 3339 in UTC (`2015-09-21T01:00:00Z`).
pub(super) fn time(at: Instant) -> String {
    jiff::Timestamp::from_microsecond(at.as_micros())
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// The error of an RPC's read: a rejection of the query carries Promise's `result` and
/// `message`; the store failing is not the request's fault and answers as any read's would.
pub(super) fn rpc_read_error(error: AppError) -> ApiError {
    match error {
        AppError::Rejected(_) => rpc_error(error.into()),
        other => other.into(),
    }
}
