//! The HTTP layer: the router factory, shared state, extractors, one module per surface, and
//! the dashboard (`ui`).
//!
//! This module only declares its children and assembles the router from their `register`
//! functions; what they share lives in sibling modules (`state`, `surface`, `error`,
//! `rejection`, `fields`, ...), which they import by their own paths, never through here.
//!
//! Handlers are thin: extract, convert to domain values, make one service call, map the result.
//! No SQL, no clock reads and no business rules here.

pub mod attributes;
pub mod authorize;
pub mod baremetal;
pub mod blazar;
pub mod context;
pub mod deadline;
pub mod error;
pub mod extract;
pub mod fields;
pub mod forward;
pub mod forwarded;
pub mod idempotency;
pub(crate) mod link;
pub mod meta;
pub mod placement;
pub mod promise;
pub mod promise_rpc;
pub mod rejection;
pub mod routes;
pub mod state;
pub mod status;
pub mod surface;
pub mod ui;
pub mod writer;

use crate::auth::Authenticator;
use crate::metrics::Metrics;
use crate::policy::{AccessPolicy, Authorization};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use berth_app::Berth;
use state::{AppState, HttpLimits, Shared};
use std::sync::Arc;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

/// Builds the whole application router, with `policy`'s overrides applied to the routes' rules
/// (an override naming no route is an error).
pub fn router(
    berth: Arc<Berth>,
    auth: Arc<Authenticator>,
    limits: HttpLimits,
    policy: AccessPolicy,
    forwarder: Option<Arc<writer::Forwarder>>,
) -> anyhow::Result<Router> {
    let mut routes = routes::Routes::default();
    meta::register(&mut routes);
    placement::register(&mut routes);
    blazar::register(&mut routes);
    promise::register(&mut routes);
    baremetal::register(&mut routes);
    ui::register(&mut routes);
    let authz = Authorization::new(routes.rules(), policy)?;
    let openapi = routes.openapi(authz.rules());
    let state = AppState::new(Shared {
        berth,
        auth,
        metrics: Metrics::global(),
        openapi,
        authz,
        limits,
        forwarder,
        write_routes: routes.writes(),
    });
    Ok(routes
        .into_router()
        .fallback(fallback)
        .layer(axum::middleware::from_fn_with_state(
            limits.request_timeout,
            deadline::middleware,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authorize::middleware,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            forward::middleware,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            context::middleware,
        ))
        .layer(DefaultBodyLimit::max(limits.body_limit_bytes))
        .layer(CatchPanicLayer::custom(|_| {
            error::ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "An internal error occurred.",
            )
            .into_response_static()
        }))
        .layer(TraceLayer::new_for_http())
        .with_state(state))
}

/// Cross-origin requests from `origins`' pages, as oslo.middleware's CORS filter allows them:
/// a preflight is answered with the method and headers it asks for, and the answers show the
/// version and request-id headers to the page.
pub fn cors(origins: Vec<axum::http::HeaderValue>) -> tower_http::cors::CorsLayer {
    use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, CorsLayer};
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods(AllowMethods::mirror_request())
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers([
            axum::http::HeaderName::from_static("openstack-api-version"),
            axum::http::HeaderName::from_static("x-openstack-request-id"),
            axum::http::header::LOCATION,
        ])
}

async fn fallback() -> error::ApiError {
    error::ApiError::not_found("The resource could not be found.")
}
