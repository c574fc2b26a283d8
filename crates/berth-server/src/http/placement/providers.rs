//! `/resource_providers` and `/resource_providers/{uuid}`.

use super::query;
use super::schema::{CREATE_PROVIDER, UPDATE_PROVIDER};
use super::wire::Mount;
use super::wire::{absolute_url, find, json_body, provider_uuid, respond};
use crate::http::error::ApiError;
use crate::http::extract::ApiJson;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::status::{StatusBody, condition, lease_effects};
use crate::http::surface::Microversion;
use crate::policy::Rule;
use axum::Json;
use axum::extract::State;
use axum::extract::{Path, RawQuery, Request};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use berth_api::placement::{
    CreateResourceProvider, Link, ResourceProvider, ResourceProviderList, UpdateResourceProvider,
};
use berth_api::status::{ProviderCondition, StatusChange};
use berth_app::{AppError, CreateProvider};
use berth_core::decide::inventory::Reparenting;
use berth_core::query::names::Names;
use berth_core::query::providers::ProviderFilter;
use berth_core::{Provider, ProviderId, Rejection};
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/placement/resource_providers",
            Rule::SERVICE,
            "List resource providers",
            list,
        )
        .answers::<ResourceProviderList>(200)
        .add(
            Method::POST,
            "/placement/resource_providers",
            Rule::SERVICE,
            "Create a resource provider",
            create,
        )
        .accepts::<CreateResourceProvider>()
        .answers::<ResourceProvider>(200)
        .answers_empty(201)
        .add(
            Method::GET,
            "/placement/resource_providers/{uuid}",
            Rule::SERVICE,
            "Show a resource provider",
            show,
        )
        .answers::<ResourceProvider>(200)
        .add(
            Method::PUT,
            "/placement/resource_providers/{uuid}",
            Rule::SERVICE,
            "Update a resource provider",
            update,
        )
        .accepts::<UpdateResourceProvider>()
        .answers::<ResourceProvider>(200)
        .add(
            Method::DELETE,
            "/placement/resource_providers/{uuid}",
            Rule::SERVICE,
            "Delete a resource provider",
            delete,
        )
        .answers_empty(204)
        .add(
            Method::GET,
            "/placement/resource_providers/{uuid}/status",
            Rule::SERVICE,
            "Show whether a provider is up, down or in maintenance (berth)",
            show_status,
        )
        .answers::<ProviderCondition>(200)
        .add(
            Method::PUT,
            "/placement/resource_providers/{uuid}/status",
            Rule::SYSTEM_ADMIN,
            "Mark a provider up, down or in maintenance, healing the leases on it (berth)",
            set_status,
        )
        .accepts::<StatusChange>()
        .answers::<ProviderCondition>(200);
}

/// A provider's condition as the status routes show it, before any change.
fn shown_condition(provider: &Provider) -> ProviderCondition {
    ProviderCondition {
        condition: condition(provider),
        leases: None,
    }
}

async fn show_status(
    State(state): State<AppState>,
    Path(uuid): Path<String>,
) -> Result<Json<ProviderCondition>, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let body = state
        .berth
        .read(|catalog| find(catalog, uuid).map(shown_condition))
        .await??;
    Ok(Json(body))
}

async fn set_status(
    State(state): State<AppState>,
    Path(uuid): Path<String>,
    ApiJson(body): ApiJson<StatusBody>,
) -> Result<Json<ProviderCondition>, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let (status, reason) = body.parse()?;
    let effects = state
        .berth
        .set_provider_status(uuid, status, reason)
        .await?;
    let mut body = state
        .berth
        .read_local(|catalog| find(catalog, uuid).map(shown_condition))?;
    body.leases = Some(lease_effects(effects));
    Ok(Json(body))
}

/// The representation of a provider at a microversion.
pub(crate) fn representation(
    provider: &Provider,
    mv: Microversion,
    mount: Mount,
) -> ResourceProvider {
    let base = mount.path(&format!("/resource_providers/{}", provider.uuid()));
    let mut rels = vec![
        ("self", base.clone()),
        ("inventories", format!("{base}/inventories")),
        ("usages", format!("{base}/usages")),
    ];
    if mv.at_least(1) {
        rels.push(("aggregates", format!("{base}/aggregates")));
    }
    if mv.at_least(6) {
        rels.push(("traits", format!("{base}/traits")));
    }
    if mv.at_least(11) {
        rels.push(("allocations", format!("{base}/allocations")));
    }
    let nested = mv.at_least(14);
    ResourceProvider {
        uuid: provider.uuid().uuid(),
        name: provider.name().to_owned(),
        generation: provider.generation(),
        links: rels
            .into_iter()
            .map(|(rel, href)| Link {
                rel: rel.to_owned(),
                href,
            })
            .collect(),
        parent_provider_uuid: nested.then(|| provider.parent().map(ProviderId::uuid)),
        root_provider_uuid: nested.then(|| provider.root().uuid()),
    }
}

/// The list's filters, and the classes and traits they name (checked against the catalog when
/// the list is read).
fn filter(
    pairs: &[(String, String)],
    mv: Microversion,
) -> Result<(ProviderFilter, Names), ApiError> {
    let mut allowed = vec!["name", "uuid"];
    for (minor, key) in [
        (3, "member_of"),
        (4, "resources"),
        (14, "in_tree"),
        (18, "required"),
    ] {
        if mv.at_least(minor) {
            allowed.push(key);
        }
    }
    query::only(pairs, &allowed)?;
    let last = |key| query::values(pairs, key).last();
    let mut filter = ProviderFilter {
        name: last("name").map(str::to_owned),
        uuid: last("uuid")
            .map(|v| query::uuid_param("uuid", v).map(ProviderId::new))
            .transpose()?,
        in_tree: last("in_tree")
            .map(|v| query::uuid_param("in_tree", v).map(ProviderId::new))
            .transpose()?,
        member_of: query::member_of(query::values(pairs, "member_of"), mv)?,
        ..ProviderFilter::default()
    };
    let mut names = Names::default();
    if let Some(text) = last("resources") {
        filter.resources = query::resources(text)?;
        names.classes(filter.resources.iter().map(|(class, _)| class.clone()));
    }
    if query::values(pairs, "required").next().is_some() {
        let (traits, named) = query::required(query::values(pairs, "required"), mv, "required")?;
        filter.traits = traits;
        names.traits(named);
    }
    Ok((filter, names))
}

async fn list(
    State(state): State<AppState>,
    mv: Microversion,
    mount: Mount,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = query::pairs(raw.as_deref())?;
    let (filter, names) = filter(&pairs, mv)?;
    let resource_providers = state
        .berth
        .resource_providers(filter, names, |p| representation(p, mv, mount))
        .await
        .map_err(query::read_error)?;
    let body = ResourceProviderList { resource_providers };
    Ok(respond(mv, state.berth.now(), &body))
}

fn optional_uuid(field: &str, value: Option<&str>) -> Result<Option<ProviderId>, ApiError> {
    value
        .map(|text| {
            Uuid::parse_str(text).map(ProviderId::new).map_err(|_| {
                ApiError::bad_request(format!(
                    "JSON does not validate: '{text}' is not a valid uuid for '{field}'"
                ))
            })
        })
        .transpose()
}

async fn create(
    State(state): State<AppState>,
    mv: Microversion,
    mount: Mount,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, ApiError> {
    let body: CreateResourceProvider =
        CREATE_PROVIDER.decode(mv, json_body(request, &state).await?)?;
    if body.parent_provider_uuid.is_some() && !mv.at_least(14) {
        return Err(ApiError::bad_request(
            "JSON does not validate: Additional properties are not allowed ('parent_provider_uuid' was unexpected)",
        ));
    }
    let cmd = CreateProvider {
        uuid: optional_uuid("uuid", body.uuid.as_deref())?,
        name: body.name.clone(),
        parent: optional_uuid("parent_provider_uuid", body.parent_provider_uuid.as_deref())?,
    };
    let named = cmd.uuid;
    let uuid = state
        .berth
        .create_provider(cmd)
        .await
        .map_err(|error| match error {
            AppError::Rejected(rejection @ Rejection::ParentIsSelf) => {
                let uuid = named.map(|u| u.to_string()).unwrap_or_default();
                ApiError::bad_request(format!(
                    "Unable to create resource provider \"{}\", {uuid}: {rejection}",
                    body.name
                ))
            }
            other => other.into(),
        })?;
    let location = absolute_url(
        &headers,
        &mount.path(&format!("/resource_providers/{uuid}")),
    );
    let location = HeaderValue::from_str(&location)
        .map_err(|_| ApiError::bad_request("Invalid Host header"))?;
    if !mv.at_least(20) {
        return Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response());
    }
    let body = state
        .berth
        .read(|catalog| find(catalog, uuid).map(|p| representation(p, mv, mount)))
        .await??;
    let mut response = respond(mv, state.berth.now(), &body);
    response.headers_mut().insert(header::LOCATION, location);
    Ok(response)
}

async fn show(
    State(state): State<AppState>,
    mv: Microversion,
    mount: Mount,
    Path(uuid): Path<String>,
) -> Result<Response, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let body = state
        .berth
        .read(|catalog| find(catalog, uuid).map(|p| representation(p, mv, mount)))
        .await??;
    Ok(respond(mv, state.berth.now(), &body))
}

async fn update(
    State(state): State<AppState>,
    mv: Microversion,
    mount: Mount,
    Path(uuid): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let body: UpdateResourceProvider =
        UPDATE_PROVIDER.decode(mv, json_body(request, &state).await?)?;
    if body.parent_provider_uuid.is_some() && !mv.at_least(14) {
        return Err(ApiError::bad_request(
            "JSON does not validate: Additional properties are not allowed ('parent_provider_uuid' was unexpected)",
        ));
    }
    let parent = match body.parent_provider_uuid {
        None => None,
        Some(requested) => Some(optional_uuid("parent_provider_uuid", requested.as_deref())?),
    };
    let reparenting = if mv.at_least(37) {
        Reparenting::Allowed
    } else {
        Reparenting::Refused
    };
    state
        .berth
        .update_provider(uuid, body.name, parent, reparenting)
        .await?;
    let body = state
        .berth
        .read(|catalog| find(catalog, uuid).map(|p| representation(p, mv, mount)))
        .await??;
    Ok(respond(mv, state.berth.now(), &body))
}

async fn delete(
    State(state): State<AppState>,
    Path(uuid): Path<String>,
) -> Result<StatusCode, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    state
        .berth
        .delete_provider(uuid)
        .await
        .map_err(|error| match error {
            AppError::Rejected(Rejection::ProviderNotFound(uuid)) => ApiError::not_found(format!(
                "No resource provider with uuid {uuid} found for delete"
            )),
            other => other.into(),
        })?;
    Ok(StatusCode::NO_CONTENT)
}
