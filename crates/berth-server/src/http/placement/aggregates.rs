//! `/resource_providers/{uuid}/aggregates` (1.1; generations from 1.19).

use super::schema::AGGREGATES;
use super::wire::{find, generation_changed, json_body, provider_uuid, respond};
use crate::http::error::ApiError;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use crate::policy::Rule;
use axum::extract::State;
use axum::extract::{Path, Request};
use axum::http::Method;
use axum::response::Response;
use berth_api::placement::{AggregatesRequest, ProviderAggregates, PutAggregates};
use berth_core::Provider;
use std::collections::BTreeSet;
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    let path = "/placement/resource_providers/{uuid}/aggregates";
    routes
        .add(
            Method::GET,
            path,
            Rule::SERVICE,
            "List a provider's aggregates",
            list,
        )
        .answers::<ProviderAggregates>(200)
        .add(
            Method::PUT,
            path,
            Rule::SERVICE,
            "Replace a provider's aggregates",
            replace,
        )
        .accepts::<AggregatesRequest>()
        .answers::<ProviderAggregates>(200);
}

fn body(provider: &Provider, mv: Microversion) -> ProviderAggregates {
    ProviderAggregates {
        aggregates: provider.aggregates().iter().copied().collect(),
        resource_provider_generation: mv.at_least(19).then(|| provider.generation()),
    }
}

async fn list(
    State(state): State<AppState>,
    mv: Microversion,
    Path(uuid): Path<String>,
) -> Result<Response, ApiError> {
    mv.require(1)?;
    let uuid = provider_uuid(&uuid)?;
    let out = state
        .berth
        .read(|catalog| find(catalog, uuid).map(|p| body(p, mv)))
        .await??;
    Ok(respond(mv, state.berth.now(), &out))
}

async fn replace(
    State(state): State<AppState>,
    mv: Microversion,
    Path(uuid): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    mv.require(1)?;
    let uuid = provider_uuid(&uuid)?;
    // As Placement: an unknown provider is 404 whatever the body.
    state
        .berth
        .read(|catalog| find(catalog, uuid).map(|_| ()))
        .await??;
    let value = json_body(request, &state).await?;
    // Below 1.19 the body is a bare list; from 1.19 it carries the generation.
    let request = match mv.at_least(19) {
        true => AggregatesRequest::WithGeneration(AGGREGATES.decode::<PutAggregates>(mv, value)?),
        false => AggregatesRequest::List(AGGREGATES.decode(mv, value)?),
    };
    let (names, generation) = match request {
        AggregatesRequest::WithGeneration(put) => {
            (put.aggregates, Some(put.resource_provider_generation))
        }
        AggregatesRequest::List(names) => (names, None),
    };
    let mut aggregates = BTreeSet::new();
    let mut given = Vec::with_capacity(names.len());
    for name in &names {
        let parsed = Uuid::parse_str(name).map_err(|_| {
            ApiError::bad_request(format!("JSON does not validate: '{name}' is not a 'uuid'"))
        })?;
        if !aggregates.insert(parsed) {
            return Err(ApiError::bad_request(format!(
                "JSON does not validate: aggregates has non-unique elements: {name}"
            )));
        }
        given.push(parsed);
    }
    state
        .berth
        .set_aggregates(uuid, generation, aggregates)
        .await
        .map_err(generation_changed)?;
    // As Placement, the answer lists the aggregates in the order the request gave them.
    let mut out = state
        .berth
        .read(|catalog| find(catalog, uuid).map(|p| body(p, mv)))
        .await??;
    out.aggregates = given;
    Ok(respond(mv, state.berth.now(), &out))
}
