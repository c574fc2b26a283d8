//! The HTTP layer: the router factory, shared state, extractors, one module per surface, and
//! the dashboard (`ui`).
//!
//! Handlers are thin: extract, convert to domain values, make one service call, map the result.
//! No SQL, no clock reads and no business rules here.

pub mod authorize;
pub mod baremetal;
pub mod blazar;
pub mod context;
pub mod deadline;
pub mod error;
pub mod extract;
pub mod idempotency;
pub mod meta;
pub mod placement;
pub mod promise;
pub mod rejection;
pub mod routes;
pub mod status;
pub mod ui;

use crate::auth::Authenticator;
use crate::metrics::Metrics;
use crate::policy::AccessPolicy;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use berth_app::Berth;
use std::sync::Arc;
use std::time::Duration;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

/// State shared by every handler.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The service.
    pub berth: Arc<Berth>,
    /// Who is calling.
    pub auth: Arc<Authenticator>,
    /// Request metrics.
    pub metrics: Metrics,
    /// The OpenAPI document of every route served.
    pub openapi: Arc<serde_json::Value>,
    /// The rule of every route, and the operator's policy.
    pub authz: Arc<authorize::Authorization>,
    /// Limits applied to every request (a long poll ends before the request timeout).
    pub limits: HttpLimits,
}

/// Limits applied to every request.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Largest request body.
    pub body_limit_bytes: usize,
    /// When a request's deadline passes: a request none of whose writes was taken for a commit
    /// is cut short then; one with a write being committed answers with its outcome (within
    /// [`deadline::COMMIT_GRACE`]).
    pub request_timeout: Duration,
}

/// Builds the whole application router, with `policy`'s overrides applied to the routes' rules
/// (an override naming no route is an error).
pub fn router(
    berth: Arc<Berth>,
    auth: Arc<Authenticator>,
    limits: HttpLimits,
    policy: AccessPolicy,
) -> anyhow::Result<Router> {
    let mut routes = routes::Routes::default();
    meta::register(&mut routes);
    placement::register(&mut routes);
    blazar::register(&mut routes);
    promise::register(&mut routes);
    baremetal::register(&mut routes);
    ui::register(&mut routes);
    let authz = Arc::new(authorize::Authorization::new(&routes, policy)?);
    let openapi = Arc::new(routes.openapi(authz.rules()));
    let state = AppState {
        berth,
        auth,
        metrics: Metrics::global(),
        openapi,
        authz,
        limits,
    };
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

async fn fallback() -> error::ApiError {
    error::ApiError::not_found("The resource could not be found.")
}
