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
use berth_core::model::ledger::Window;
use berth_core::query::properties::HOST_PROPERTIES;
use berth_core::{Catalog, Instant, LeaseId, Provider, ReservationId};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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

/// From `now` on, for ever: current and future holds.
fn ahead(now: Instant) -> Window {
    Window::new(now, Instant::from_micros(i64::MAX))
        .expect("invariant: now is before the end of time")
}

/// The allocation entry of one host, filtered by lease and reservation ids.
fn allocation(
    catalog: &Catalog,
    provider: &Provider,
    leases_of: &HashMap<ReservationId, LeaseId>,
    query: &BTreeMap<String, String>,
    now: Instant,
) -> HostAllocation {
    let mut seen = BTreeSet::new();
    let reservations = catalog
        .ledger()
        .holds_on(provider.uuid(), ahead(now))
        .into_iter()
        .filter(|hold| seen.insert(hold.reservation))
        .filter_map(|hold| {
            let lease_id = leases_of.get(&hold.reservation)?;
            let lease = catalog.lease(*lease_id)?;
            let wanted = query
                .get("lease_id")
                .is_none_or(|id| *id == lease.id.to_string())
                && query
                    .get("reservation_id")
                    .is_none_or(|id| *id == hold.reservation.to_string());
            wanted.then(|| HeldBy {
                id: hold.reservation.uuid(),
                lease_id: lease.id.uuid(),
                start_date: lease_time(hold.window.start().as_micros()),
                end_date: lease_time(hold.window.end().as_micros()),
            })
        })
        .collect();
    HostAllocation {
        resource_id: provider.id().to_string(),
        reservations,
    }
}

fn leases_of(catalog: &Catalog) -> HashMap<ReservationId, LeaseId> {
    catalog
        .leases()
        .flat_map(|l| l.reservations.iter().map(move |r| (r.id, l.id)))
        .collect()
}

async fn list(
    State(state): State<AppState>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<HostAllocationList>, ApiError> {
    let now = state.berth.now();
    let allocations = state
        .berth
        .read(move |catalog| {
            let index = leases_of(catalog);
            catalog
                .providers()
                .filter(|p| p.host().is_some())
                .map(|p| allocation(catalog, p, &index, &query, now))
                .collect()
        })
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
    let now = state.berth.now();
    let found = state
        .berth
        .read(move |catalog| {
            let provider = catalog
                .provider_by_id(host)
                .filter(|p| p.host().is_some())?;
            Some(allocation(
                catalog,
                provider,
                &leases_of(catalog),
                &query,
                now,
            ))
        })
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
    let (detail, all) = (flag("detail"), flag("all"));
    let (values, private) = state
        .berth
        .read(|catalog| {
            let mut values: BTreeMap<String, BTreeSet<String>> = HOST_PROPERTIES
                .iter()
                .map(|name| ((*name).to_owned(), BTreeSet::new()))
                .collect();
            for provider in catalog.providers().filter(|p| p.host().is_some()) {
                for name in HOST_PROPERTIES {
                    if let Some(value) =
                        berth_core::query::properties::host_property(provider, name)
                    {
                        values
                            .entry(name.to_owned())
                            .or_default()
                            .insert(show_value(&value));
                    }
                }
                for (key, value) in provider.attributes() {
                    values
                        .entry(key.clone())
                        .or_default()
                        .insert(show_value(value));
                }
            }
            let private: BTreeSet<String> = values
                .keys()
                .filter(|name| catalog.is_private_property(name))
                .cloned()
                .collect();
            (values, private)
        })
        .await?;
    let resource_properties = values
        .into_iter()
        .filter(|(name, _)| all || !private.contains(name))
        .map(|(name, vals)| ResourceProperty {
            private: detail.then(|| private.contains(&name)),
            values: detail.then(|| vals.into_iter().collect()),
            property: name,
        })
        .collect();
    Ok(Json(ResourcePropertyList {
        resource_properties,
    }))
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
