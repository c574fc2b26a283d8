//! `/resource_classes` and `/resource_classes/{name}` (1.2).

use super::Mount;
use super::wire::{absolute_url, respond};
use crate::http::error::ApiError;
use crate::http::extract::ApiJson;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use crate::policy::Rule;
use axum::extract::Path;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_api::placement::{CreateResourceClass, Link, ResourceClassList};
use berth_core::ResourceClass;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/placement/resource_classes",
            Rule::SERVICE,
            "List resource classes",
            list,
        )
        .answers::<ResourceClassList>(200)
        .add(
            Method::POST,
            "/placement/resource_classes",
            Rule::SERVICE,
            "Create a custom resource class",
            create,
        )
        .accepts::<CreateResourceClass>()
        .answers_empty(201)
        .add(
            Method::GET,
            "/placement/resource_classes/{name}",
            Rule::SERVICE,
            "Show a resource class",
            show,
        )
        .answers::<berth_api::placement::ResourceClass>(200)
        .add(
            Method::PUT,
            "/placement/resource_classes/{name}",
            Rule::SERVICE,
            "Create or verify a custom resource class (1.7)",
            ensure,
        )
        .answers_empty(201)
        .answers_empty(204)
        .add(
            Method::DELETE,
            "/placement/resource_classes/{name}",
            Rule::SERVICE,
            "Delete a custom resource class",
            delete,
        )
        .answers_empty(204);
}

fn representation(name: &str, mount: Mount) -> berth_api::placement::ResourceClass {
    berth_api::placement::ResourceClass {
        name: name.to_owned(),
        links: vec![Link::to_self(
            mount.path(&format!("/resource_classes/{name}")),
        )],
    }
}

async fn list(
    State(state): State<AppState>,
    mv: Microversion,
    mount: Mount,
) -> Result<Response, ApiError> {
    mv.require(2)?;
    let names = state.berth.resource_classes().await?;
    let body = ResourceClassList {
        resource_classes: names
            .iter()
            .map(|name| representation(name, mount))
            .collect(),
    };
    Ok(respond(mv, state.berth.now(), &body))
}

async fn create(
    State(state): State<AppState>,
    mv: Microversion,
    mount: Mount,
    headers: HeaderMap,
    ApiJson(body): ApiJson<CreateResourceClass>,
) -> Result<Response, ApiError> {
    mv.require(2)?;
    state.berth.create_resource_class(&body.name).await?;
    let location = absolute_url(
        &headers,
        &mount.path(&format!("/resource_classes/{}", body.name)),
    );
    let location = HeaderValue::from_str(&location)
        .map_err(|_| ApiError::bad_request("Invalid Host header"))?;
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
}

async fn show(
    State(state): State<AppState>,
    mv: Microversion,
    mount: Mount,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    mv.require(2)?;
    let exists = state
        .berth
        .read(|catalog| ResourceClass::parse(&name).is_some_and(|c| catalog.has_resource_class(&c)))
        .await?;
    match exists {
        true => Ok(respond(
            mv,
            state.berth.now(),
            &representation(&name, mount),
        )),
        false => Err(ApiError::not_found(format!(
            "No such resource class {name}"
        ))),
    }
}

async fn ensure(
    State(state): State<AppState>,
    mv: Microversion,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    mv.require(2)?;
    if !mv.at_least(7) {
        // Renaming (1.2 to 1.6) would silently rewrite every inventory of the class; berth
        // supports the create-or-verify semantics of 1.7 and later only.
        return Err(ApiError::bad_request(
            "Renaming resource classes is not supported; use microversion 1.7 or later",
        ));
    }
    match state.berth.ensure_resource_class(&name).await? {
        true => Ok(StatusCode::CREATED),
        false => Ok(StatusCode::NO_CONTENT),
    }
}

async fn delete(
    State(state): State<AppState>,
    mv: Microversion,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    mv.require(2)?;
    state.berth.delete_resource_class(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}
