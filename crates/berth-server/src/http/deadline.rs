//! The request deadline. Every request runs under a [`berth_app::Deadline`]; when the request
//! timeout passes, the deadline expires. A request none of whose decisions was taken for a
//! commit is then cut short with 503 `timeout_not_committed` (nothing was changed; a retry is
//! safe); one whose decision was taken runs on until its batch's outcome is known and answers
//! with it, so a client is never told an error for a write that exists. [`COMMIT_GRACE`] bounds
//! that wait, as a backstop for a store that hangs beyond its own timeouts.

use crate::http::error::ApiError;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use berth_app::{AppError, Deadline};
use std::time::Duration;

/// How long past its timeout a request whose write is being committed may run. The stores
/// give up on their own well before (SQLite's busy timeout and PostgreSQL's lock and acquire
/// timeouts are 10 s each).
pub const COMMIT_GRACE: Duration = Duration::from_secs(30);

/// Runs the request under a deadline `timeout` from now.
pub async fn middleware(State(timeout): State<Duration>, request: Request, next: Next) -> Response {
    let deadline = Deadline::new();
    let work = deadline.scope(next.run(request));
    tokio::pin!(work);
    tokio::select! {
        response = &mut work => return response,
        () = tokio::time::sleep(timeout) => {}
    }
    if deadline.expire() {
        return ApiError::from(AppError::TimedOut).into_response();
    }
    match tokio::time::timeout(COMMIT_GRACE, work).await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!(
                grace_s = COMMIT_GRACE.as_secs(),
                "a committing write outlived its grace; its outcome is unknown to the client"
            );
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "timeout_outcome_unknown",
                "The request did not finish in time, and a write it made may have been \
                 committed. Retry with the same Idempotency-Key to learn its outcome.",
            )
            .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_request_with_nothing_taken_is_cut_short_with_nothing_changed() {
        let app = Router::new()
            .route("/", get(std::future::pending::<()>))
            .layer(axum::middleware::from_fn_with_state(
                Duration::from_millis(1),
                middleware,
            ));
        let response = app
            .oneshot(Request::new(Body::empty()))
            .await
            .expect("answered");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(response.headers().contains_key("retry-after"));
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("body");
        let body: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(body["code"], "timeout_not_committed", "{body}");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("nothing was changed")),
            "{body}"
        );
    }
}
