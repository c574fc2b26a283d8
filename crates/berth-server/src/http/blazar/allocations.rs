//! `/reservation/v1/os-hosts/allocations` and `/os-hosts/{id}/allocation`: which reservations
//! hold each host, from the ledger; and `/os-hosts/properties`: what filters may name.

use super::lease_wire::typed;
use crate::http::error::ApiError;
use crate::http::extract::ApiJson;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::Method;
use berth_api::blazar::{
    HeldBy, HostAllocation, HostAllocationEnvelope, HostAllocationList, PropertyPrivacy,
    PropertyPrivacyEnvelope, ResourceProperty, ResourcePropertyList, SetPropertyPrivacy,
};
use berth_api::time::{lease_time, record_time};
use berth_core::Provider;
use berth_core::query::leases::{HoldFilter, Holding, IdFilter};
use berth_core::query::properties::Shown;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/reservation/v1/os-hosts/allocations",
            Rule::SYSTEM_ADMIN,
            "Reservations holding each host",
            list,
        )
        .answers::<HostAllocationList>(200)
        .add(
            Method::GET,
            "/reservation/v1/os-hosts/{host_id}/allocation",
            Rule::SYSTEM_ADMIN,
            "Reservations holding one host",
            show,
        )
        .answers::<HostAllocationEnvelope>(200)
        .add(
            Method::GET,
            "/reservation/v1/os-hosts/properties",
            Rule::SYSTEM_ADMIN,
            "Properties filters may name, with their values",
            properties,
        )
        .answers::<ResourcePropertyList>(200)
        .add(
            Method::PATCH,
            "/reservation/v1/os-hosts/properties/{property_name}",
            Rule::SYSTEM_ADMIN,
            "Mark a property private or public",
            set_privacy,
        )
        .accepts::<SetPropertyPrivacy>()
        .answers::<PropertyPrivacyEnvelope>(200);
}

/// An id filter of the query: a value that is not an id as Blazar writes it (a lower-case
/// hyphenated uuid) names nothing, so it keeps nothing.
fn id_filter(query: &BTreeMap<String, String>, key: &str) -> IdFilter {
    match query.get(key) {
        None => IdFilter::Any,
        Some(text) => match Uuid::parse_str(text) {
            Ok(id) if id.to_string() == *text => IdFilter::Is(id),
            _ => IdFilter::Nothing,
        },
    }
}

fn hold_filter(query: &BTreeMap<String, String>) -> HoldFilter {
    HoldFilter {
        lease: id_filter(query, "lease_id"),
        reservation: id_filter(query, "reservation_id"),
    }
}

/// The allocation entry of one host.
fn allocation(provider: &Provider, holdings: &[Holding]) -> HostAllocation {
    HostAllocation {
        resource_id: provider.id().to_string(),
        reservations: holdings
            .iter()
            .map(|holding| HeldBy {
                id: holding.reservation.uuid(),
                lease_id: holding.lease.uuid(),
                start_date: lease_time(holding.window.start().as_micros()),
                end_date: lease_time(holding.window.end().as_micros()),
            })
            .collect(),
    }
}

async fn list(
    State(state): State<AppState>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<HostAllocationList>, ApiError> {
    let allocations = state
        .berth
        .hosts_held(hold_filter(&query), allocation)
        .await?;
    Ok(Json(HostAllocationList { allocations }))
}

async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<HostAllocationEnvelope>, ApiError> {
    let missing = || ApiError::not_found(format!("Host {id} not found"));
    let host = id.parse::<i64>().map_err(|_| missing())?;
    let found = state
        .berth
        .host_held(host, hold_filter(&query), allocation)
        .await?;
    found
        .map(|allocation| Json(HostAllocationEnvelope { allocation }))
        .ok_or_else(missing)
}

async fn properties(
    State(state): State<AppState>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<ResourcePropertyList>, ApiError> {
    let flag = |key: &str| {
        query
            .get(key)
            .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "True" | "yes"))
    };
    let shown = match flag("all") {
        true => Shown::All,
        false => Shown::Public,
    };
    let detail = flag("detail");
    let resource_properties = state
        .berth
        .property_values(shown)
        .await?
        .into_iter()
        .map(|property| ResourceProperty {
            private: detail.then_some(property.private),
            values: detail.then(|| shown_values(&property.values)),
            property: property.name,
        })
        .collect();
    Ok(Json(ResourcePropertyList {
        resource_properties,
    }))
}

/// A property's values as Blazar shows them: each once, sorted.
fn shown_values(values: &[berth_core::AttrValue]) -> Vec<String> {
    let shown: BTreeSet<String> = values.iter().map(show_value).collect();
    shown.into_iter().collect()
}

fn show_value(value: &berth_core::AttrValue) -> String {
    match value {
        berth_core::AttrValue::String(text) => text.clone(),
        berth_core::AttrValue::Bool(flag) => flag.to_string(),
        berth_core::AttrValue::Number(n) if n.fract() == 0.0 => format!("{}", *n as i64),
        berth_core::AttrValue::Number(n) => n.to_string(),
    }
}

async fn set_privacy(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<Json<PropertyPrivacyEnvelope>, ApiError> {
    if !body.get("private").is_some_and(Value::is_boolean) {
        return Err(ApiError::bad_request("private must be true or false"));
    }
    let SetPropertyPrivacy { private } = typed(&body)?;
    state
        .berth
        .set_property_privacy(name.clone(), private)
        .await?;
    let now = record_time(state.berth.now().as_micros());
    Ok(Json(PropertyPrivacyEnvelope {
        resource_property: PropertyPrivacy {
            id: name.clone(),
            resource_type: "physical:host".to_owned(),
            property_name: name,
            private,
            created_at: now.clone(),
            updated_at: now,
        },
    }))
}
