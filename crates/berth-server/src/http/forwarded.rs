//! What a forwarded request carries and what is answered about it (`http::forward` forwards,
//! `http::link` carries): the headers that mark a request forwarded between replicas and the
//! answer that names the writer, the refusal of a replica that does not take forwarded
//! writes, and the answer to a forwarded write whose outcome is not known.

use crate::http::error::ApiError;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// The writer's secret on a forwarded request.
pub const FORWARDED: HeaderName = HeaderName::from_static("x-berth-forwarded");
/// The address of the caller of a forwarded request.
pub const FORWARDED_FOR: HeaderName = HeaderName::from_static("x-berth-forwarded-for");
/// Where a forwarded Placement request was mounted (`root`, when at a listener's root).
pub const FORWARDED_MOUNT: HeaderName = HeaderName::from_static("x-berth-forwarded-mount");
/// On a 421: this replica does not take writes under that secret; nothing was done.
pub const NOT_WRITER: HeaderName = HeaderName::from_static("x-berth-not-writer");
/// On the answer to a forwarded request: the id of the writer that decided it. An answer
/// without it did not come from a berth that took the request (the advertised address reached
/// something else), and the forwarding replica decides the request itself.
pub const WRITER: HeaderName = HeaderName::from_static("x-berth-writer");

/// The refusal of a forwarded request by a replica that does not take it: 421 `not_writer`,
/// with [`NOT_WRITER`] for the forwarding replica to read.
pub(crate) fn not_writer() -> Response {
    let mut refused = ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "not_writer",
        "This replica does not take forwarded writes: another holds the writer's term, or the \
         secret is not its own.",
    )
    .into_response();
    refused
        .headers_mut()
        .insert(NOT_WRITER, HeaderValue::from_static("1"));
    refused
}

/// The answer to a write whose outcome is not known: 503 `timeout_outcome_unknown`.
pub(crate) fn lost_answer() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "timeout_outcome_unknown",
        "The replica that takes the writes did not answer, and the write may have been \
         committed. Retry with the same Idempotency-Key to learn its outcome.",
    )
}
