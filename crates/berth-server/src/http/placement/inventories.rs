//! `/resource_providers/{uuid}/inventories[/{class}]`, `/usages` and `/allocations` of one provider.

use super::schema::{CREATE_INVENTORY, REPLACE_INVENTORIES, UPDATE_INVENTORY};
use super::wire::Mount;
use super::wire::{absolute_url, find, json_body, provider_uuid, respond};
use crate::http::error::ApiError;
use crate::http::rejection::{CONCURRENT_UPDATE, INVENTORY_INUSE};
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::Microversion;
use crate::policy::Rule;
use axum::extract::State;
use axum::extract::{Path, Request};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use berth_api::placement::{
    Inventories, InventoryOut, InventoryRecord, PostInventory, ProviderUsages, PutInventories,
    PutInventory,
};
use berth_app::AppError;
use berth_core::limits::INVENTORY_AMOUNT_MAX;
use berth_core::model::inventory::{FullReservation, InventoryError};
use berth_core::{Inventory, Provider, ProviderId, Rejection, ResourceClass};
use std::collections::BTreeMap;

pub(super) fn register(routes: &mut Routes) {
    let all = "/placement/resource_providers/{uuid}/inventories";
    let one = "/placement/resource_providers/{uuid}/inventories/{resource_class}";
    routes
        .add(
            Method::GET,
            all,
            Rule::SERVICE,
            "List a provider's inventories",
            list,
        )
        .answers::<Inventories>(200)
        .add(
            Method::PUT,
            all,
            Rule::SERVICE,
            "Replace a provider's inventories",
            replace,
        )
        .accepts::<PutInventories>()
        .answers::<Inventories>(200)
        .add(
            Method::POST,
            all,
            Rule::SERVICE,
            "Create one inventory",
            create,
        )
        .accepts::<PostInventory>()
        .answers::<berth_api::placement::Inventory>(201)
        .add(
            Method::DELETE,
            all,
            Rule::SERVICE,
            "Delete all inventories (1.5)",
            delete_all,
        )
        .answers_empty(204)
        .add(Method::GET, one, Rule::SERVICE, "Show one inventory", show)
        .answers::<berth_api::placement::Inventory>(200)
        .add(
            Method::PUT,
            one,
            Rule::SERVICE,
            "Update one inventory",
            update,
        )
        .accepts::<PutInventory>()
        .answers::<berth_api::placement::Inventory>(200)
        .add(
            Method::DELETE,
            one,
            Rule::SERVICE,
            "Delete one inventory",
            delete,
        )
        .answers_empty(204)
        .add(
            Method::GET,
            "/placement/resource_providers/{uuid}/usages",
            Rule::SERVICE,
            "Show a provider's usages",
            usages,
        )
        .answers::<ProviderUsages>(200);
}

fn out(record: &Inventory) -> InventoryOut {
    InventoryOut {
        total: record.total(),
        reserved: record.reserved(),
        min_unit: record.min_unit(),
        max_unit: record.max_unit(),
        step_size: record.step_size(),
        allocation_ratio: record.allocation_ratio(),
    }
}

fn inventories_body(provider: &Provider) -> Inventories {
    Inventories {
        resource_provider_generation: provider.generation(),
        inventories: provider
            .inventories()
            .iter()
            .map(|(class, record)| (class.as_str().to_owned(), out(record)))
            .collect(),
    }
}

fn record_body(
    provider: &Provider,
    class: &ResourceClass,
) -> Result<berth_api::placement::Inventory, ApiError> {
    let record = provider
        .inventories()
        .get(class)
        .ok_or_else(|| not_found(provider, class.as_str()))?;
    Ok(berth_api::placement::Inventory {
        resource_provider_generation: provider.generation(),
        record: out(record),
    })
}

fn not_found(provider: &Provider, class: &str) -> ApiError {
    ApiError::not_found(format!(
        "No inventory of class {class} for {}",
        provider.uuid()
    ))
}

pub(super) fn class_name(name: &str) -> Result<ResourceClass, ApiError> {
    ResourceClass::parse(name)
        .ok_or_else(|| ApiError::bad_request(format!("No such resource class {name}")))
}

/// What a request does to an inventory, as its refusals name it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Writing {
    Create,
    Update,
}

/// Converts a wire record for `provider`, applying Placement's defaults and checks.
pub(super) fn to_inventory(
    provider: ProviderId,
    class: &str,
    record: &InventoryRecord,
    mv: Microversion,
    writing: Writing,
) -> Result<Inventory, ApiError> {
    let field = |name: &str, value: Option<i64>, default: i64, min: i64| -> Result<u64, ApiError> {
        let value = value.unwrap_or(default);
        if value < min || value > i64::try_from(INVENTORY_AMOUNT_MAX).expect("fits") {
            return Err(ApiError::bad_request(format!(
                "JSON does not validate: {class}: {name} must be an integer between {min} and {INVENTORY_AMOUNT_MAX}, got {value}"
            )));
        }
        Ok(u64::try_from(value).expect("invariant: checked non-negative"))
    };
    let max = i64::try_from(INVENTORY_AMOUNT_MAX).expect("fits");
    let units = [
        field("min_unit", record.min_unit, 1, 1)?,
        field("max_unit", record.max_unit, max, 1)?,
        field("step_size", record.step_size, 1, 1)?,
    ];
    let full = if mv.at_least(26) {
        FullReservation::Allowed
    } else {
        FullReservation::Refused
    };
    let total = field("total", Some(record.total), 0, 1)?;
    let reserved = field("reserved", record.reserved, 0, 0)?;
    Inventory::new(
        total,
        reserved,
        units,
        record.allocation_ratio.unwrap_or(1.0),
        full,
    )
    .map_err(|error| {
        let verb = match writing {
            Writing::Create => "create",
            Writing::Update => "update",
        };
        let why = match (error, full) {
            (InventoryError::ReservedExceedsTotal, FullReservation::Refused) => {
                "The reserved value is greater than or equal to total.".to_owned()
            }
            (InventoryError::ReservedExceedsTotal, FullReservation::Allowed) => {
                "The reserved value is greater than total.".to_owned()
            }
            (other, _) => format!("{other}."),
        };
        ApiError::bad_request(format!(
            "Unable to {verb} inventory for resource provider {provider}: Invalid inventory for '{class}' on resource provider '{provider}'. {why}"
        ))
    })
}

async fn list(
    State(state): State<AppState>,
    mv: Microversion,
    Path(uuid): Path<String>,
) -> Result<Response, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let body = state
        .berth
        .read(|catalog| find(catalog, uuid).map(inventories_body))
        .await??;
    Ok(respond(mv, state.berth.now(), &body))
}

async fn replace(
    State(state): State<AppState>,
    mv: Microversion,
    Path(uuid): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let body: PutInventories = REPLACE_INVENTORIES.decode(mv, json_body(request, &state).await?)?;
    let mut inventories = BTreeMap::new();
    for (name, record) in &body.inventories {
        inventories.insert(
            class_name(name)?,
            to_inventory(uuid, name, record, mv, Writing::Update)?,
        );
    }
    state
        .berth
        .set_inventories(uuid, body.resource_provider_generation, inventories)
        .await
        .map_err(|error| match error {
            AppError::Rejected(rejection @ Rejection::UnknownResourceClass(_)) => {
                ApiError::bad_request(format!(
                    "Unknown resource class in inventory for resource provider {uuid}: {rejection}"
                ))
            }
            AppError::Rejected(rejection @ Rejection::InventoryInUse { .. }) => {
                ApiError::conflict(INVENTORY_INUSE, format!("update conflict: {rejection}"))
            }
            other => other.into(),
        })?;
    let body = state
        .berth
        .read(|catalog| find(catalog, uuid).map(inventories_body))
        .await??;
    Ok(respond(mv, state.berth.now(), &body))
}

async fn create(
    State(state): State<AppState>,
    mv: Microversion,
    mount: Mount,
    headers: HeaderMap,
    Path(uuid): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let body: PostInventory = CREATE_INVENTORY.decode(mv, json_body(request, &state).await?)?;
    let class = class_name(&body.resource_class)?;
    let record = InventoryRecord {
        total: body.total,
        reserved: body.reserved,
        min_unit: body.min_unit,
        max_unit: body.max_unit,
        step_size: body.step_size,
        allocation_ratio: body.allocation_ratio,
    };
    let record = to_inventory(uuid, class.as_str(), &record, mv, Writing::Create)?;
    state
        .berth
        .add_inventory(uuid, class.clone(), record)
        .await?;
    let body = state
        .berth
        .read(|catalog| find(catalog, uuid).and_then(|p| record_body(p, &class)))
        .await??;
    let mut response = respond(mv, state.berth.now(), &body);
    *response.status_mut() = StatusCode::CREATED;
    let location = absolute_url(
        &headers,
        &mount.path(&format!(
            "/resource_providers/{uuid}/inventories/{}",
            class.as_str()
        )),
    );
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

async fn delete_all(
    State(state): State<AppState>,
    mv: Microversion,
    Path(uuid): Path<String>,
) -> Result<StatusCode, ApiError> {
    if !mv.at_least(5) {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            crate::http::error::UNDEFINED,
            "The method DELETE is not allowed for this resource.",
        ));
    }
    let uuid = provider_uuid(&uuid)?;
    state.berth.remove_inventory(uuid, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn show(
    State(state): State<AppState>,
    mv: Microversion,
    Path((uuid, class)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let body = state
        .berth
        .read(|catalog| {
            let provider = find(catalog, uuid)?;
            let class = ResourceClass::parse(&class).ok_or_else(|| not_found(provider, &class))?;
            record_body(provider, &class)
        })
        .await??;
    Ok(respond(mv, state.berth.now(), &body))
}

async fn update(
    State(state): State<AppState>,
    mv: Microversion,
    Path((uuid, class)): Path<(String, String)>,
    request: Request,
) -> Result<Response, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let body: PutInventory = UPDATE_INVENTORY.decode(mv, json_body(request, &state).await?)?;
    let class = class_name(&class)?;
    let record = InventoryRecord {
        total: body.total,
        reserved: body.reserved,
        min_unit: body.min_unit,
        max_unit: body.max_unit,
        step_size: body.step_size,
        allocation_ratio: body.allocation_ratio,
    };
    let record = to_inventory(uuid, class.as_str(), &record, mv, Writing::Update)?;
    // Placement answers 400, not 404, when the record to update does not exist.
    state
        .berth
        .update_inventory(
            uuid,
            body.resource_provider_generation,
            class.clone(),
            record,
        )
        .await
        .map_err(|error| match error {
            AppError::Rejected(rejection @ Rejection::InventoryNotFound { .. }) => {
                ApiError::bad_request(format!(
                    "No inventory record with resource class for resource provider {uuid}: {rejection}"
                ))
            }
            other => other.into(),
        })?;
    let body = state
        .berth
        .read(|catalog| find(catalog, uuid).and_then(|p| record_body(p, &class)))
        .await??;
    Ok(respond(mv, state.berth.now(), &body))
}

async fn delete(
    State(state): State<AppState>,
    Path((uuid, class)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let class = class_name(&class)?;
    // Placement reports an in-use single inventory with `concurrent_update` (a quirk clients see).
    state
        .berth
        .remove_inventory(uuid, Some(class.clone()))
        .await
        .map_err(|error| match error {
            AppError::Rejected(rejection @ Rejection::InventoryInUse { .. }) => ApiError::conflict(
                CONCURRENT_UPDATE,
                format!(
                    "Unable to delete inventory of class {}: {rejection}",
                    class.as_str()
                ),
            ),
            AppError::Rejected(rejection @ Rejection::InventoryNotFound { .. }) => {
                ApiError::not_found(format!(
                    "No inventory of class {} found for delete: {rejection}",
                    class.as_str()
                ))
            }
            other => other.into(),
        })?;
    Ok(StatusCode::NO_CONTENT)
}

async fn usages(
    State(state): State<AppState>,
    mv: Microversion,
    Path(uuid): Path<String>,
) -> Result<Response, ApiError> {
    let uuid = provider_uuid(&uuid)?;
    let body = state
        .berth
        .read(|catalog| {
            let provider = find(catalog, uuid)?;
            // Every inventory class has an entry, zero when unused (clients index by class).
            let usages = provider
                .inventories()
                .keys()
                .map(|class| (class.as_str().to_owned(), provider.used(class)))
                .collect();
            Ok::<_, ApiError>(ProviderUsages {
                resource_provider_generation: provider.generation(),
                usages,
            })
        })
        .await??;
    Ok(respond(mv, state.berth.now(), &body))
}
