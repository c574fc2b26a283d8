//! `/traits`, `/traits/{name}` and `/resource_providers/{uuid}/traits` (1.6).

use super::query;
use super::schema::PROVIDER_TRAITS;
use super::wire::Mount;
use super::wire::{
    absolute_url, caching_headers, find, generation_changed, json_body, provider_uuid, respond,
};
use crate::http::error::ApiError;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use crate::policy::Rule;
use axum::extract::State;
use axum::extract::{Path, RawQuery, Request};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_api::placement::{ProviderTraits, PutTraits, TraitList};
use berth_core::model::name::is_custom_name;
use berth_core::query::names::{NameFilter, TraitQuery};
use berth_core::{Provider, TraitName};
use std::collections::BTreeSet;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/placement/traits",
            Rule::SERVICE,
            "List traits",
            list,
        )
        .answers::<TraitList>(200)
        .add(
            Method::GET,
            "/placement/traits/{name}",
            Rule::SERVICE,
            "Check that a trait exists",
            show,
        )
        .answers_empty(204)
        .add(
            Method::PUT,
            "/placement/traits/{name}",
            Rule::SERVICE,
            "Create a custom trait",
            create,
        )
        .answers_empty(201)
        .answers_empty(204)
        .add(
            Method::DELETE,
            "/placement/traits/{name}",
            Rule::SERVICE,
            "Delete a custom trait",
            delete,
        )
        .answers_empty(204)
        .add(
            Method::GET,
            "/placement/resource_providers/{uuid}/traits",
            Rule::SERVICE,
            "List a provider's traits",
            provider_list,
        )
        .answers::<ProviderTraits>(200)
        .add(
            Method::PUT,
            "/placement/resource_providers/{uuid}/traits",
            Rule::SERVICE,
            "Replace a provider's traits",
            provider_set,
        )
        .accepts::<PutTraits>()
        .answers::<ProviderTraits>(200)
        .add(
            Method::DELETE,
            "/placement/resource_providers/{uuid}/traits",
            Rule::SERVICE,
            "Remove a provider's traits",
            provider_clear,
        )
        .answers_empty(204);
}

async fn list(
    State(state): State<AppState>,
    mv: Microversion,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    mv.require(6)?;
    let pairs = query::pairs(raw.as_deref())?;
    query::only(&pairs, &["name", "associated"])?;
    let name = query::values(&pairs, "name").last();
    let associated = match query::values(&pairs, "associated").last() {
        None => None,
        Some(v) if v.eq_ignore_ascii_case("true") => Some(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Some(false),
        Some(_) => {
            return Err(ApiError::bad_request(
                "The query parameter \"associated\" only accepts \"true\" or \"false\"",
            ));
        }
    };
    let name = match name {
        None => NameFilter::Any,
        Some(text) => match (text.strip_prefix("in:"), text.strip_prefix("startswith:")) {
            (Some(list), _) => {
                NameFilter::In(list.split(',').map(|s| s.trim().to_owned()).collect())
            }
            (_, Some(prefix)) => NameFilter::StartsWith(prefix.to_owned()),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "Badly formatted name parameter. Expected name query string parameter in form: ?name=[in|startswith]:[name1,name2|prefix]. Got: \"{text}\""
                )));
            }
        },
    };
    let traits = state.berth.traits(TraitQuery { name, associated }).await?;
    Ok(respond(mv, state.berth.now(), &TraitList { traits }))
}

async fn show(
    State(state): State<AppState>,
    mv: Microversion,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    mv.require(6)?;
    let exists = state
        .berth
        .read(|catalog| TraitName::parse(&name).is_some_and(|t| catalog.has_trait(&t)))
        .await?;
    match exists {
        true => Ok(bodiless(StatusCode::NO_CONTENT, mv, state.berth.now())),
        false => Err(ApiError::not_found(format!("No such trait(s): {name}"))),
    }
}

/// A bodiless answer with Placement's caching headers from 1.15.
fn bodiless(status: StatusCode, mv: Microversion, now: berth_core::Instant) -> Response {
    let mut response = status.into_response();
    caching_headers(mv, now, response.headers_mut());
    response
}

async fn create(
    State(state): State<AppState>,
    mv: Microversion,
    mount: Mount,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    mv.require(6)?;
    if !is_custom_name(&name) {
        return Err(ApiError::bad_request(
            "The trait is invalid. A valid trait must be no longer than 255 characters, start with the prefix \"CUSTOM_\" and use following characters: \"A\"-\"Z\", \"0\"-\"9\" and \"_\"",
        ));
    }
    let status = match state.berth.create_trait(&name).await? {
        true => StatusCode::CREATED,
        false => StatusCode::NO_CONTENT,
    };
    let mut response = bodiless(status, mv, state.berth.now());
    let location = absolute_url(&headers, &mount.path(&format!("/traits/{name}")));
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
    mv.require(6)?;
    state.berth.delete_trait(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn traits_body(provider: &Provider) -> ProviderTraits {
    ProviderTraits {
        traits: provider
            .traits()
            .iter()
            .map(|name| name.as_str().to_owned())
            .collect(),
        resource_provider_generation: provider.generation(),
    }
}

async fn provider_list(
    State(state): State<AppState>,
    mv: Microversion,
    Path(uuid): Path<String>,
) -> Result<Response, ApiError> {
    mv.require(6)?;
    let uuid = provider_uuid(&uuid)?;
    let body = state
        .berth
        .read(|catalog| find(catalog, uuid).map(traits_body))
        .await??;
    Ok(respond(mv, state.berth.now(), &body))
}

async fn provider_set(
    State(state): State<AppState>,
    mv: Microversion,
    Path(uuid): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    mv.require(6)?;
    let uuid = provider_uuid(&uuid)?;
    let body: PutTraits = PROVIDER_TRAITS.decode(mv, json_body(request, &state).await?)?;
    let mut traits = BTreeSet::new();
    for name in &body.traits {
        let parsed = TraitName::parse(name)
            .ok_or_else(|| ApiError::bad_request(format!("No such trait(s): {name}")))?;
        traits.insert(parsed);
    }
    state
        .berth
        .set_traits(uuid, Some(body.resource_provider_generation), traits)
        .await
        .map_err(generation_changed)?;
    let body = state
        .berth
        .read(|catalog| find(catalog, uuid).map(traits_body))
        .await??;
    Ok(respond(mv, state.berth.now(), &body))
}

async fn provider_clear(
    State(state): State<AppState>,
    mv: Microversion,
    Path(uuid): Path<String>,
) -> Result<StatusCode, ApiError> {
    mv.require(6)?;
    let uuid = provider_uuid(&uuid)?;
    state.berth.set_traits(uuid, None, BTreeSet::new()).await?;
    Ok(StatusCode::NO_CONTENT)
}
