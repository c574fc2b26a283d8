//! berth's own endpoints: `/` (surfaces and versions), `/healthz`, `/metrics`, `/openapi.json`.

use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::{PLACEMENT_MAX, PLACEMENT_MIN};
use crate::policy::Rule;
use axum::Json;
use axum::extract::State;
use axum::http::{Method, StatusCode, header};
use axum::response::IntoResponse;
use berth_api::common::Link;
use berth_api::service::{Health, Root, Surface};
use serde_json::Value;

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
        .answers::<Root>(200)
        .add(
            Method::GET,
            "/healthz",
            Rule::PUBLIC,
            "Liveness and readiness (database reachable)",
            healthz,
        )
        .answers::<Health>(200)
        .answers::<Health>(503)
        .add(
            Method::GET,
            "/metrics",
            Rule::PUBLIC,
            "Prometheus metrics",
            metrics,
        )
        .answers_media(200, "text/plain")
        .add(
            Method::GET,
            "/openapi.json",
            Rule::PUBLIC,
            "This OpenAPI document",
            openapi,
        )
        .answers_media(200, "application/json");
}

async fn root() -> Json<Root> {
    let surface = |id: &str, path: &str, compatible_with: &str| Surface {
        id: id.to_owned(),
        path: path.to_owned(),
        compatible_with: compatible_with.to_owned(),
        min_version: None,
        max_version: None,
    };
    let versions = |surface: Surface, min: String, max: String| Surface {
        min_version: Some(min),
        max_version: Some(max),
        ..surface
    };
    let link = |rel: &str, href: &str| Link {
        rel: rel.to_owned(),
        href: href.to_owned(),
    };
    Json(Root {
        name: "berth".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        surfaces: vec![
            versions(
                surface("placement", "/placement", "OpenStack Placement"),
                PLACEMENT_MIN.to_string(),
                PLACEMENT_MAX.to_string(),
            ),
            versions(
                surface("reservation", "/reservation/v1", "OpenStack Blazar"),
                "1.0".to_owned(),
                "1.0".to_owned(),
            ),
            surface("promise", "/promise", "OPNFV Promise"),
            surface(
                "baremetal",
                "/baremetal/v1",
                "the OpenStack Ironic node-reservation spec",
            ),
        ],
        links: vec![
            link("health", "/healthz"),
            link("metrics", "/metrics"),
            link("openapi", "/openapi.json"),
            link("dashboard", "/ui"),
        ],
    })
}

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    let backend = state.berth.backend();
    match state.berth.ready().await {
        Ok(()) => (
            StatusCode::OK,
            Json(Health {
                live: true,
                ready: true,
                database: backend.to_owned(),
            }),
        ),
        Err(error) => {
            tracing::warn!(error = %error, "readiness check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(Health {
                    live: true,
                    ready: false,
                    database: backend.to_owned(),
                }),
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
