//! `/allocations/{consumer}`, `POST /allocations` (1.13), `/resource_providers/{uuid}/allocations`
//! and `POST /reshaper` (1.30).

use super::schema::{POST_ALLOCATIONS, PUT_ALLOCATIONS, RESHAPER};
use super::wire::{json_body, no_provider, provider_uuid, respond};
use crate::http::error::ApiError;
use crate::http::rejection::CONCURRENT_UPDATE;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use crate::policy::Rule;
use axum::extract::{Path, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use berth_api::placement::{
    AllocationsBatch, AllocationsRequest, ConsumerAllocations, ConsumerAllocationsOut,
    ConsumerPart, ProviderAllocations, ProviderPart, PutAllocationsList, PutInventories, Reshape,
};
use berth_core::decide::allocation::{ConsumerGeneration, ConsumerWrite, InventoryWrite};
use berth_core::model::consumer::Allocations;
use berth_core::query::consumers::{self, UNKNOWN_CONSUMER_TYPE};
use berth_core::{Catalog, ProviderId, ResourceClass};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use uuid::Uuid;

/// The project and user Placement records for consumers written before 1.8 without them.
const INCOMPLETE_CONSUMER: &str = "00000000-0000-0000-0000-000000000000";

pub(super) fn register(routes: &mut Routes) {
    let one = "/placement/allocations/{consumer_uuid}";
    routes
        .add(
            Method::GET,
            one,
            Rule::SERVICE,
            "Show a consumer's allocations",
            show,
        )
        .answers::<ConsumerAllocationsOut>(200)
        .add(
            Method::PUT,
            one,
            Rule::SERVICE,
            "Replace a consumer's allocations",
            replace,
        )
        .accepts::<AllocationsRequest>()
        .answers_empty(204)
        .add(
            Method::DELETE,
            one,
            Rule::SERVICE,
            "Delete a consumer's allocations",
            delete,
        )
        .answers_empty(204)
        .add(
            Method::POST,
            "/placement/allocations",
            Rule::SERVICE,
            "Replace several consumers' allocations atomically (1.13)",
            batch,
        )
        .accepts::<AllocationsBatch>()
        .answers_empty(204)
        .add(
            Method::GET,
            "/placement/resource_providers/{uuid}/allocations",
            Rule::SERVICE,
            "List a provider's allocations",
            provider,
        )
        .answers::<ProviderAllocations>(200)
        .add(
            Method::POST,
            "/placement/reshaper",
            Rule::SERVICE_ONLY,
            "Replace inventories and allocations atomically (1.30)",
            reshaper,
        )
        .accepts::<Reshape>()
        .answers_empty(204);
}

fn consumer_uuid(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text)
        .map_err(|_| ApiError::bad_request(format!("Malformed consumer_uuid: {text}")))
}

fn invalid(error: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("JSON does not validate: {error}"))
}

fn parse<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(invalid)
}

fn resources(
    provider: ProviderId,
    raw: &BTreeMap<String, i64>,
    allocations: &mut Allocations,
) -> Result<(), ApiError> {
    if raw.is_empty() {
        return Err(invalid(format!(
            "resources of {provider} must name at least one class"
        )));
    }
    for (name, amount) in raw {
        let class = ResourceClass::parse(name)
            .ok_or_else(|| invalid(format!("'{name}' is not a valid resource class name")))?;
        let amount = u64::try_from(*amount)
            .ok()
            .filter(|a| *a >= 1)
            .ok_or_else(|| {
                invalid(format!(
                    "{amount} is less than the minimum of 1 ({name} on {provider})"
                ))
            })?;
        allocations
            .entry(provider)
            .or_default()
            .insert(class, amount);
    }
    Ok(())
}

fn owner(field: &str, value: Option<String>, mv: Microversion) -> Result<String, ApiError> {
    match value {
        Some(text) if (1..=255).contains(&text.chars().count()) => Ok(text),
        Some(_) => Err(invalid(format!("'{field}' must be 1 to 255 characters"))),
        None if mv.at_least(8) => Err(invalid(format!("'{field}' is a required property"))),
        None => Ok(INCOMPLETE_CONSUMER.to_owned()),
    }
}

/// A consumer's write in the dict format, with every microversion gate applied (the body has
/// passed its route's schema: below 1.28 a `PUT` names at least one provider, a `POST` may
/// clear a consumer at any version).
fn dict_write(
    consumer: Uuid,
    body: ConsumerAllocations,
    mv: Microversion,
) -> Result<ConsumerWrite, ApiError> {
    if body.mappings.is_some() && !mv.at_least(34) {
        return Err(invalid(
            "Additional properties are not allowed ('mappings' was unexpected)",
        ));
    }
    let generation = match (body.consumer_generation, mv.at_least(28)) {
        (None, true) => return Err(invalid("'consumer_generation' is a required property")),
        (Some(_), false) => {
            return Err(invalid(
                "Additional properties are not allowed ('consumer_generation' was unexpected)",
            ));
        }
        (None, false) => ConsumerGeneration::Unchecked,
        (Some(None), true) => ConsumerGeneration::New,
        (Some(Some(generation)), true) => ConsumerGeneration::Is(generation),
    };
    let consumer_type = match (body.consumer_type, mv.at_least(38)) {
        (None, true) => return Err(invalid("'consumer_type' is a required property")),
        (Some(_), false) => {
            return Err(invalid(
                "Additional properties are not allowed ('consumer_type' was unexpected)",
            ));
        }
        (None, false) => None,
        (Some(kind), true) => {
            let valid = (1..=255).contains(&kind.len())
                && kind
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            match valid {
                true => Some(kind),
                false => return Err(invalid(format!("'{kind}' does not match '^[A-Z0-9_]+$'"))),
            }
        }
    };
    let mut allocations = Allocations::new();
    for (provider, part) in &body.allocations {
        let provider = Uuid::parse_str(provider)
            .map(ProviderId::new)
            .map_err(|_| invalid(format!("'{provider}' is not a 'uuid'")))?;
        resources(provider, &part.resources, &mut allocations)?;
    }
    Ok(ConsumerWrite {
        reservation: None,
        consumer,
        project_id: owner("project_id", body.project_id, mv)?,
        user_id: owner("user_id", body.user_id, mv)?,
        consumer_type,
        generation,
        allocations,
    })
}

fn list_write(
    consumer: Uuid,
    body: PutAllocationsList,
    mv: Microversion,
) -> Result<ConsumerWrite, ApiError> {
    if body.allocations.is_empty() {
        return Err(invalid("allocations must not be empty"));
    }
    let mut allocations = Allocations::new();
    for item in &body.allocations {
        let provider = Uuid::parse_str(&item.resource_provider.uuid)
            .map(ProviderId::new)
            .map_err(|_| invalid(format!("'{}' is not a 'uuid'", item.resource_provider.uuid)))?;
        resources(provider, &item.resources, &mut allocations)?;
    }
    Ok(ConsumerWrite {
        reservation: None,
        consumer,
        project_id: owner("project_id", body.project_id, mv)?,
        user_id: owner("user_id", body.user_id, mv)?,
        consumer_type: None,
        generation: ConsumerGeneration::Unchecked,
        allocations,
    })
}

async fn replace(
    State(state): State<AppState>,
    mv: Microversion,
    Path(consumer): Path<String>,
    request: Request,
) -> Result<StatusCode, ApiError> {
    let consumer = consumer_uuid(&consumer)?;
    let value = json_body(request, &state).await?;
    let request = match mv.at_least(12) {
        true => AllocationsRequest::Dict(PUT_ALLOCATIONS.decode(mv, value)?),
        false => AllocationsRequest::List(PUT_ALLOCATIONS.decode(mv, value)?),
    };
    let write = match request {
        AllocationsRequest::Dict(body) => dict_write(consumer, body, mv)?,
        AllocationsRequest::List(body) => list_write(consumer, body, mv)?,
    };
    state
        .berth
        .set_allocations(vec![write])
        .await
        .map_err(|error| {
            unallocatable(
                error,
                &format!("Unable to allocate inventory for consumer {consumer}: "),
            )
        })?;
    Ok(StatusCode::NO_CONTENT)
}

async fn batch(
    State(state): State<AppState>,
    mv: Microversion,
    request: Request,
) -> Result<StatusCode, ApiError> {
    mv.require(13)?;
    let AllocationsBatch(body) = POST_ALLOCATIONS.decode(mv, json_body(request, &state).await?)?;
    if body.is_empty() {
        return Err(invalid("the request must name at least one consumer"));
    }
    let mut writes = Vec::with_capacity(body.len());
    for (consumer, allocations) in body {
        writes.push(dict_write(consumer_uuid(&consumer)?, allocations, mv)?);
    }
    state
        .berth
        .set_allocations(writes)
        .await
        .map_err(|error| unallocatable(error, "Unable to allocate inventory: "))?;
    Ok(StatusCode::NO_CONTENT)
}

fn amounts(by_class: &BTreeMap<ResourceClass, u64>) -> BTreeMap<String, u64> {
    by_class
        .iter()
        .map(|(c, a)| (c.as_str().to_owned(), *a))
        .collect()
}

fn consumer_body(catalog: &Catalog, uuid: Uuid, mv: Microversion) -> ConsumerAllocationsOut {
    let Some(consumer) = catalog.consumer(uuid) else {
        return ConsumerAllocationsOut {
            allocations: BTreeMap::new(),
            project_id: None,
            user_id: None,
            consumer_generation: None,
            consumer_type: None,
        };
    };
    let allocations = consumer
        .allocations
        .iter()
        .map(|(provider, by_class)| {
            let part = ProviderPart {
                generation: catalog
                    .provider(*provider)
                    .map(berth_core::Provider::generation),
                resources: amounts(by_class),
            };
            (provider.to_string(), part)
        })
        .collect();
    let owned = mv.at_least(12);
    ConsumerAllocationsOut {
        allocations,
        project_id: owned.then(|| consumer.project_id.clone()),
        user_id: owned.then(|| consumer.user_id.clone()),
        consumer_generation: mv.at_least(28).then_some(consumer.generation),
        consumer_type: mv.at_least(38).then(|| {
            consumer
                .consumer_type
                .clone()
                .unwrap_or_else(|| UNKNOWN_CONSUMER_TYPE.to_owned())
        }),
    }
}

async fn show(
    State(state): State<AppState>,
    mv: Microversion,
    Path(consumer): Path<String>,
) -> Result<Response, ApiError> {
    let consumer = consumer_uuid(&consumer)?;
    let body = state
        .berth
        .read(|catalog| consumer_body(catalog, consumer, mv))
        .await?;
    Ok(respond(mv, state.berth.now(), &body))
}

async fn delete(
    State(state): State<AppState>,
    Path(consumer): Path<String>,
) -> Result<StatusCode, ApiError> {
    let consumer = consumer_uuid(&consumer)?;
    state.berth.delete_allocations(consumer).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn provider_body(
    found: &consumers::ProviderAllocations<'_>,
    mv: Microversion,
) -> ProviderAllocations {
    let allocations = found
        .held
        .iter()
        .map(|held| {
            let entry = ConsumerPart {
                resources: amounts(held.resources),
                consumer_generation: mv.at_least(28).then_some(held.generation),
            };
            (held.consumer.to_string(), entry)
        })
        .collect();
    ProviderAllocations {
        allocations,
        resource_provider_generation: found.provider.generation(),
    }
}

async fn provider(
    State(state): State<AppState>,
    mv: Microversion,
    Path(uuid): Path<String>,
) -> Result<Response, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let body = state
        .berth
        .provider_allocations(uuid, |found| provider_body(found, mv))
        .await?
        .ok_or_else(|| no_provider(uuid))?;
    Ok(respond(mv, state.berth.now(), &body))
}

async fn reshaper(
    State(state): State<AppState>,
    mv: Microversion,
    request: Request,
) -> Result<StatusCode, ApiError> {
    mv.require(30)?;
    let mut body = json_body(request, &state).await?;
    RESHAPER.check_body(mv.minor(), &body)?;
    let Some(object) = body.as_object_mut() else {
        return Err(invalid("the body must be an object"));
    };
    if let Some(extra) = object
        .keys()
        .find(|k| *k != "inventories" && *k != "allocations")
    {
        return Err(invalid(format!(
            "Additional properties are not allowed ('{extra}' was unexpected)"
        )));
    }
    // Checked and parsed one part at a time, in this order, for Placement's messages.
    let inventories: BTreeMap<String, PutInventories> = parse(
        object
            .remove("inventories")
            .ok_or_else(|| invalid("'inventories' is a required property"))?,
    )?;
    let allocations: BTreeMap<String, ConsumerAllocations> = parse(
        object
            .remove("allocations")
            .ok_or_else(|| invalid("'allocations' is a required property"))?,
    )?;
    let reshape = Reshape {
        inventories,
        allocations,
    };
    let mut inventory_writes = Vec::with_capacity(reshape.inventories.len());
    for (provider, put) in reshape.inventories {
        let provider = Uuid::parse_str(&provider)
            .map(ProviderId::new)
            .map_err(|_| invalid(format!("'{provider}' is not a 'uuid'")))?;
        let mut records = BTreeMap::new();
        for (name, record) in &put.inventories {
            records.insert(
                super::inventories::class_name(name)?,
                super::inventories::to_inventory(
                    provider,
                    name,
                    record,
                    mv,
                    super::inventories::Writing::Update,
                )?,
            );
        }
        inventory_writes.push(InventoryWrite {
            provider,
            generation: put.resource_provider_generation,
            inventories: records,
        });
    }
    let mut writes = Vec::with_capacity(reshape.allocations.len());
    for (consumer, body) in reshape.allocations {
        writes.push(dict_write(consumer_uuid(&consumer)?, body, mv)?);
    }
    // An unknown provider in the inventories is Placement's `resource_provider.not_found`.
    state
        .berth
        .reshape(inventory_writes, writes)
        .await
        .map_err(|error| match error {
            berth_app::AppError::Rejected(
                rejection @ berth_core::Rejection::ProviderNotFound(_),
            ) => ApiError::bad_request(rejection.to_string())
                .with_code("placement.resource_provider.not_found"),
            berth_app::AppError::Rejected(berth_core::Rejection::GenerationConflict {
                uuid,
                expected,
                actual,
            }) => ApiError::conflict(
                CONCURRENT_UPDATE,
                format!(
                    "resource provider generation conflict for provider {uuid}: actual: {actual}, given: {expected}"
                ),
            ),
            other => unallocatable(other, "Unable to allocate inventory: "),
        })?;
    Ok(StatusCode::NO_CONTENT)
}

/// An allocation the core refused, in Placement's words: a resource class it does not know is
/// 400 `{prefix}No such resource class X`; a class a provider has no inventory of, or amounts
/// its unit rules refuse, 409 `Unable to allocate inventory: ...`.
fn unallocatable(error: berth_app::AppError, prefix: &str) -> ApiError {
    match error {
        berth_app::AppError::Rejected(
            rejection @ berth_core::Rejection::UnknownResourceClass(_),
        ) => ApiError::bad_request(format!("{prefix}{rejection}")),
        other => other.into(),
    }
}
