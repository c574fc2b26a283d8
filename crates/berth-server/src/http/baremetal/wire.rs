//! What the bare-metal handlers share on the wire: times as the API shows them, and uuid fields
//! of requests.

use crate::http::error::ApiError;
use berth_core::Instant;
use serde_json::Value;
use uuid::Uuid;

/// A time as the bare-metal API shows it: RFC 3339, UTC, microseconds.
pub(super) fn time(at: Instant) -> String {
    jiff::Timestamp::from_microsecond(at.as_micros())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string())
        .unwrap_or_default()
}

/// A uuid field of a request, or 400 naming it.
pub(super) fn uuid_field(field: &str, value: &Value) -> Result<Uuid, ApiError> {
    value
        .as_str()
        .and_then(|text| Uuid::parse_str(text).ok())
        .ok_or_else(|| ApiError::bad_request(format!("{field} must be a UUID, got {value}")))
}
