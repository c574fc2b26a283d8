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
    let mut text = state.metrics.render();
    // This server's own replica, rendered here: the recorder is shared by every server of the
    // process. Without the database, the lines are left out (readiness says why).
    match state.berth.replica_status().await {
        Ok(status) => text.push_str(&replica_lines(&status)),
        Err(error) => tracing::warn!(%error, "reading the replica status failed"),
    }
    if let Some(forwarder) = &state.forwarder {
        text.push_str(&forwarder.metrics_lines());
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// The replica's figures in Prometheus text format.
fn replica_lines(status: &berth_app::ReplicaStatus) -> String {
    let lines = [
        (
            "berth_catalog_seq",
            "gauge",
            "The last commit this replica's catalog holds.",
            status.seq,
        ),
        (
            "berth_catalog_stored_seq",
            "gauge",
            "The last commit in the database.",
            status.stored,
        ),
        (
            "berth_catalog_lag",
            "gauge",
            "Commits in the database this replica had not applied when scraped.",
            status.stored.saturating_sub(status.seq),
        ),
        (
            "berth_change_log_oldest_seq",
            "gauge",
            "The oldest commit the replication log holds (0: none).",
            status.log_oldest,
        ),
        (
            "berth_change_log_retained",
            "gauge",
            "How many commits the replication log keeps.",
            status.log_retained,
        ),
        (
            "berth_change_log_applied_total",
            "counter",
            "Other replicas' commits applied (from the replication log, or as the writer sent them).",
            status.entries_applied,
        ),
        (
            "berth_change_log_sent_applied_total",
            "counter",
            "Of those, commits applied as the writer sent them over the link, without reading the log.",
            status.entries_pushed,
        ),
        (
            "berth_catalog_reloads_total",
            "counter",
            "Whole-catalog loads after start-up (a replica behind the log's retention).",
            status.reloads,
        ),
        (
            "berth_change_log_applied_under_lock_total",
            "counter",
            "Log entries this replica's writers read holding the database's writer lock.",
            status.entries_under_lock,
        ),
        (
            "berth_write_transactions_total",
            "counter",
            "Write transactions this replica began, each holding the database's writer lock.",
            status.write_transactions,
        ),
        (
            "berth_engines_standing_by",
            "gauge",
            "1 while another replica holds the writer's term and this one's engines leave it what falls due.",
            u64::from(status.standing_by),
        ),
        (
            "berth_replica_fed_by_link",
            "gauge",
            "1 while a link brings this replica every commit the writer makes (it does not listen for the database's announcements then).",
            u64::from(status.fed_by_link),
        ),
    ];
    crate::metrics::plain_lines(&lines)
}

async fn openapi(State(state): State<AppState>) -> Json<Value> {
    Json(state.openapi.clone())
}
