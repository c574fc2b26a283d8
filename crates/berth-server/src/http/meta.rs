//! berth's own endpoints: `/` (surfaces and versions), `/healthz`, `/metrics`, `/openapi.json`.

use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::{PLACEMENT_MAX, PLACEMENT_MIN};
use crate::policy::Rule;
use axum::Json;
use axum::extract::State;
use axum::http::{Method, StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};

/// Registers the meta routes.
pub fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/",
            Rule::PUBLIC,
            "List the API surfaces and their versions",
            root,
        )
        .add(
            Method::GET,
            "/healthz",
            Rule::PUBLIC,
            "Liveness and readiness (database reachable)",
            healthz,
        )
        .add(
            Method::GET,
            "/metrics",
            Rule::PUBLIC,
            "Prometheus metrics",
            metrics,
        )
        .add(
            Method::GET,
            "/openapi.json",
            Rule::PUBLIC,
            "This OpenAPI document",
            openapi,
        );
}

async fn root() -> Json<Value> {
    Json(json!({
        "name": "berth",
        "version": env!("CARGO_PKG_VERSION"),
        "surfaces": [
            {"id": "placement", "path": "/placement", "compatible_with": "OpenStack Placement",
             "min_version": PLACEMENT_MIN.to_string(), "max_version": PLACEMENT_MAX.to_string()},
            {"id": "reservation", "path": "/reservation/v1", "compatible_with": "OpenStack Blazar",
             "min_version": "1.0", "max_version": "1.0"},
            {"id": "promise", "path": "/promise", "compatible_with": "OPNFV Promise"},
            {"id": "baremetal", "path": "/baremetal/v1",
             "compatible_with": "the OpenStack Ironic node-reservation spec"},
        ],
        "links": [
            {"rel": "health", "href": "/healthz"},
            {"rel": "metrics", "href": "/metrics"},
            {"rel": "openapi", "href": "/openapi.json"},
            {"rel": "dashboard", "href": "/ui"},
        ],
    }))
}

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    let backend = state.berth.backend();
    match state.berth.ready().await {
        Ok(()) => (
            StatusCode::OK,
            Json(json!({"live": true, "ready": true, "database": backend})),
        ),
        Err(error) => {
            tracing::warn!(error = %error, "readiness check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"live": true, "ready": false, "database": backend})),
            )
        }
    }
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

async fn openapi(State(state): State<AppState>) -> Json<Value> {
    Json(state.openapi.as_ref().clone())
}
