//! The state every handler and middleware shares ([`AppState`]), and the limits applied to
//! every request.

use crate::auth::Authenticator;
use crate::metrics::Metrics;
use crate::policy::Authorization;
use berth_app::Berth;
use std::sync::Arc;
use std::time::Duration;

/// State shared by every handler: one reference-counted [`Shared`], so that the copy each
/// middleware layer and handler takes of it per request costs one counter, not one per field.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Shared>);

impl AppState {
    /// The state of a router serving `shared`.
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What every handler and middleware shares.
#[derive(Debug)]
pub struct Shared {
    /// The service.
    pub berth: Arc<Berth>,
    /// Who is calling.
    pub auth: Arc<Authenticator>,
    /// Request metrics.
    pub metrics: Metrics,
    /// The OpenAPI document of every route served.
    pub openapi: serde_json::Value,
    /// The rule of every route, and the operator's policy.
    pub authz: Authorization,
    /// Limits applied to every request (a long poll ends before the request timeout).
    pub limits: HttpLimits,
    /// Where writes are forwarded to, where replicas share a database and this one forwards.
    pub forwarder: Option<Arc<crate::http::writer::Forwarder>>,
    /// The routes that may change something (those forwarded).
    pub write_routes: crate::http::writer::WriteRoutes,
}

/// Limits applied to every request.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Largest request body.
    pub body_limit_bytes: usize,
    /// When a request's deadline passes: a request none of whose writes was taken for a commit
    /// is cut short then; one with a write being committed answers with its outcome (within
    /// [`COMMIT_GRACE`](crate::http::deadline::COMMIT_GRACE)).
    pub request_timeout: Duration,
}
