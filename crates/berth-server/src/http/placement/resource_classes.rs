//! `/resource_classes` and `/resource_classes/{name}` (1.2).

use super::schema::RESOURCE_CLASS;
use super::wire::Mount;
use super::wire::{absolute_url, json_body, respond};
use crate::http::error::{ApiError, UNDEFINED};
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use crate::policy::Rule;
use axum::extract::State;
use axum::extract::{Path, Request};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_api::placement::{CreateResourceClass, Link, ResourceClassList};
use berth_app::AppError;
use berth_core::{Rejection, ResourceClass};

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
    request: Request,
) -> Result<Response, ApiError> {
    mv.require(2)?;
    let body: CreateResourceClass = RESOURCE_CLASS.decode(mv, json_body(request, &state).await?)?;
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

/// `PUT /resource_classes/{name}`: from 1.7 creates the class unless it exists (201, or 204)
/// with its `Location`; from 1.2 to 1.6 renames it to the body's name.
async fn ensure(
    State(state): State<AppState>,
    mv: Microversion,
    mount: Mount,
    headers: HeaderMap,
    Path(name): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    mv.require(2)?;
    if !mv.at_least(7) {
        let body: CreateResourceClass =
            RESOURCE_CLASS.decode(mv, json_body(request, &state).await?)?;
        state
            .berth
            .rename_resource_class(&name, &body.name)
            .await
            .map_err(|error| match error {
                AppError::Rejected(Rejection::UnknownResourceClass(name)) => {
                    ApiError::not_found(format!("No such resource class {name}"))
                }
                AppError::Rejected(Rejection::ResourceClassStandard(name)) => {
                    ApiError::bad_request(format!("Cannot update standard resource class {name}"))
                }
                AppError::Rejected(Rejection::ResourceClassExists(name)) => {
                    ApiError::conflict(UNDEFINED, format!("Resource class already exists: {name}"))
                }
                other => other.into(),
            })?;
        return Ok(respond(
            mv,
            state.berth.now(),
            &representation(&body.name, mount),
        ));
    }
    // As Placement: the name in the path is checked as a body naming it would be.
    let named = CreateResourceClass { name: name.clone() };
    let named = serde_json::to_value(&named).expect("invariant: wire types serialize");
    RESOURCE_CLASS.check_body(mv.minor(), &named)?;
    let status = match state.berth.ensure_resource_class(&name).await? {
        true => StatusCode::CREATED,
        false => StatusCode::NO_CONTENT,
    };
    let location = absolute_url(&headers, &mount.path(&format!("/resource_classes/{name}")));
    let mut response = status.into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

async fn delete(
    State(state): State<AppState>,
    mv: Microversion,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    mv.require(2)?;
    state
        .berth
        .delete_resource_class(&name)
        .await
        .map_err(|error| match error {
            AppError::Rejected(Rejection::UnknownResourceClass(name)) => {
                ApiError::not_found(format!("No such resource class {name}"))
            }
            other => other.into(),
        })?;
    Ok(StatusCode::NO_CONTENT)
}
