//! The OpenStack Placement API under `/placement`, microversions 1.0 to 1.39, and at the root of
//! its own listener (`--placement-listen`), as Placement itself is deployed: [`at_root`] serves
//! the same routes there, and the links and `Location` headers a request gets follow its
//! `wire::Mount`.

mod aggregates;
mod allocations;
mod candidates;
mod inventories;
mod providers;
pub mod query;
mod resource_classes;
mod schema;
mod traits;
mod usages;
mod wire;

use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use crate::http::surface::{PLACEMENT_MAX, PLACEMENT_MIN};
use crate::policy::Rule;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::http::uri::PathAndQuery;
use axum::response::Response;
use berth_api::placement::{Link, Version, VersionList};
use wire::Mount;

/// Registers every Placement route.
pub fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/placement",
            Rule::PUBLIC,
            "Placement version document",
            version_document,
        )
        .answers::<VersionList>(200)
        .add(
            Method::GET,
            "/placement/",
            Rule::PUBLIC,
            "Placement version document",
            version_document,
        )
        .answers::<VersionList>(200);
    providers::register(routes);
    inventories::register(routes);
    allocations::register(routes);
    candidates::register(routes);
    usages::register(routes);
    aggregates::register(routes);
    traits::register(routes);
    resource_classes::register(routes);
}

/// `app` with Placement at the root: every request's path is taken as a Placement path (`/` is
/// the version document, `/resource_providers` the providers) and marked [`Mount::ROOT`], so
/// that it passes the same authorization, microversion and error handling as under `/placement`.
/// berth's other surfaces are not reachable there.
pub fn at_root(app: Router) -> Router {
    let rooted = tower::ServiceBuilder::new()
        .map_request(|mut request: Request| {
            let rest = request
                .uri()
                .path_and_query()
                .map_or("/", PathAndQuery::as_str);
            let rest = if rest.starts_with('/') { rest } else { "/" };
            let mut parts = request.uri().clone().into_parts();
            parts.path_and_query = PathAndQuery::try_from(Mount::PREFIXED.path(rest)).ok();
            if let Ok(uri) = axum::http::Uri::from_parts(parts) {
                *request.uri_mut() = uri;
            }
            request.extensions_mut().insert(Mount::ROOT);
            request
        })
        .service(app);
    Router::new().fallback_service(rooted)
}

async fn version_document(State(state): State<AppState>, mv: Microversion) -> Response {
    let body = VersionList {
        versions: vec![Version {
            id: "v1.0".to_owned(),
            max_version: PLACEMENT_MAX.to_string(),
            min_version: PLACEMENT_MIN.to_string(),
            status: "CURRENT".to_owned(),
            links: vec![Link::to_self("")],
        }],
    };
    wire::respond(mv, state.berth.now(), &body)
}
