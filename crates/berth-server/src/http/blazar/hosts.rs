//! `/reservation/v1/os-hosts`: hosts are root resource providers with compute inventory, an
//! availability zone and typed extra capabilities.

use super::lease_wire::{conform, wire_lease};
use crate::http::attributes::{attr_json, attr_value};
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, Caller};
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::status::{StatusBody, lease_effects};
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use berth_api::blazar::{
    CreateHost, Host, HostEnvelope, HostList, HostStatusChanged, LeaseEnvelope, Reallocate,
    UpdateHost,
};
use berth_api::status::StatusChange;
use berth_api::time::record_time;
use berth_app::{EnrollHost, Reallocation, Requester};
use berth_core::{AttrValue, Catalog, LeaseId, Provider, ReservationId, ResourceClass};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/reservation/v1/os-hosts",
            Rule::SYSTEM_ADMIN,
            "List hosts",
            list,
        )
        .answers::<HostList>(200)
        .add(
            Method::POST,
            "/reservation/v1/os-hosts",
            Rule::SYSTEM_ADMIN,
            "Enroll a host",
            create,
        )
        .accepts::<CreateHost>()
        .answers::<HostEnvelope>(201)
        .add(
            Method::GET,
            "/reservation/v1/os-hosts/{host_id}",
            Rule::SYSTEM_ADMIN,
            "Show a host",
            show,
        )
        .answers::<HostEnvelope>(200)
        .add(
            Method::PUT,
            "/reservation/v1/os-hosts/{host_id}",
            Rule::SYSTEM_ADMIN,
            "Set or remove extra capabilities",
            update,
        )
        .accepts::<UpdateHost>()
        .answers::<HostEnvelope>(200)
        .add(
            Method::DELETE,
            "/reservation/v1/os-hosts/{host_id}",
            Rule::SYSTEM_ADMIN,
            "Un-enroll a host",
            delete,
        )
        .answers_empty(204)
        .add(
            Method::PUT,
            "/reservation/v1/os-hosts/{host_id}/status",
            Rule::SYSTEM_ADMIN,
            "Mark a host up, down or in maintenance, healing the leases on it (berth)",
            set_status,
        )
        .accepts::<StatusChange>()
        .answers::<HostStatusChanged>(200)
        .add(
            Method::PUT,
            "/reservation/v1/os-hosts/{host_id}/allocation",
            Rule::PROJECT_MEMBER,
            "Move a lease's reservations off a host (reallocate)",
            reallocate,
        )
        .accepts::<Reallocate>()
        .answers::<LeaseEnvelope>(200);
}

async fn set_status(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<StatusBody>,
) -> Result<Json<HostStatusChanged>, ApiError> {
    let id = host_id(&id)?;
    let (status, reason) = body.parse()?;
    let effects = state.berth.set_host_status(id, status, reason).await?;
    let host = state.berth.read_local(|catalog| find(catalog, id))?;
    Ok(Json(HostStatusChanged {
        host,
        leases: lease_effects(effects),
    }))
}

async fn reallocate(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Reallocate>,
) -> Result<Json<LeaseEnvelope>, ApiError> {
    let id = host_id(&id)?;
    let what = match (body.lease_id, body.reservation_id) {
        (Some(lease), None) => Reallocation::Lease(LeaseId::new(lease)),
        (None, Some(reservation)) => Reallocation::Reservation(ReservationId::new(reservation)),
        _ => {
            return Err(ApiError::bad_request(
                "Exactly one of lease_id and reservation_id is required",
            ));
        }
    };
    let requester = caller
        .project_scope()
        .map_or(Requester::Admin, Requester::Project);
    let lease = state.berth.reallocate(id, what, requester).await?;
    let lease = state
        .berth
        .read_local(|catalog| wire_lease(&lease, catalog));
    Ok(Json(LeaseEnvelope {
        lease,
        waitlisted: None,
        series: None,
    }))
}

/// The total of a compute class, or for a bare-metal node (no compute inventory) the number
/// its `property` says.
fn total(provider: &Provider, class: &str, property: &str) -> u64 {
    ResourceClass::parse(class)
        .and_then(|class| {
            provider
                .inventories()
                .get(&class)
                .map(berth_core::Inventory::total)
        })
        .or_else(|| match provider.attributes().get(property) {
            Some(AttrValue::Number(n)) if *n >= 0.0 => Some(*n as u64),
            _ => None,
        })
        .unwrap_or(0)
}

/// The Blazar representation of a host.
fn representation(provider: &Provider) -> Option<Host> {
    let host = provider.host()?;
    Some(Host {
        id: provider.id().to_string(),
        hypervisor_hostname: provider.name().to_owned(),
        hypervisor_type: host.hypervisor_type.clone(),
        hypervisor_version: None,
        vcpus: total(provider, "VCPU", "cpus"),
        cpu_info: None,
        memory_mb: total(provider, "MEMORY_MB", "memory_mb"),
        local_gb: total(provider, "DISK_GB", "local_gb"),
        service_name: host.service_name.clone(),
        availability_zone: provider.availability_zone().map(str::to_owned),
        reservable: host.reservable,
        status: Some(provider.status().as_str().to_owned()),
        status_reason: provider.condition().and_then(|c| c.reason.clone()),
        trust_id: None,
        created_at: record_time(host.enrolled_at.as_micros()),
        updated_at: Some(record_time(provider.updated_at().as_micros())),
        extra: provider
            .attributes()
            .iter()
            .filter(|(k, _)| {
                !berth_core::decide::inventory::NODE_PROPERTY_KEYS.contains(&k.as_str())
            })
            .map(|(k, v)| (k.clone(), attr_json(v)))
            .collect(),
    })
}

fn host_id(text: &str) -> Result<i64, ApiError> {
    text.parse::<i64>()
        .map_err(|_| ApiError::not_found(format!("Host {text} not found")))
}

fn find(catalog: &Catalog, id: i64) -> Result<Host, ApiError> {
    catalog
        .provider_by_id(id)
        .and_then(representation)
        .ok_or_else(|| ApiError::not_found(format!("Host {id} not found")))
}

async fn list(State(state): State<AppState>) -> Result<Json<HostList>, ApiError> {
    let hosts = state
        .berth
        .read(|catalog| catalog.providers().filter_map(representation).collect())
        .await?;
    Ok(Json(HostList { hosts }))
}

async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<HostEnvelope>, ApiError> {
    let id = host_id(&id)?;
    let host = state.berth.read(|catalog| find(catalog, id)).await??;
    Ok(Json(HostEnvelope { host }))
}

fn amount(body: &Map<String, Value>, key: &str) -> Result<Option<u64>, ApiError> {
    let bad = || ApiError::bad_request(format!("{key} must be a positive integer"));
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().filter(|v| *v >= 1).map(Some).ok_or_else(bad),
        Some(Value::String(text)) => text
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|v| *v >= 1)
            .map(Some)
            .ok_or_else(bad),
        Some(_) => Err(bad()),
    }
}

pub(super) fn text(body: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(Some(text.trim().to_owned())),
        Some(_) => Err(ApiError::bad_request(format!(
            "{key} must be a non-empty string"
        ))),
    }
}

async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<(StatusCode, Json<HostEnvelope>), ApiError> {
    let cmd = enroll_command(&body)?;
    let id = state.berth.enroll_host(cmd).await?;
    let host = state.berth.read(|catalog| find(catalog, id)).await??;
    Ok((StatusCode::CREATED, Json(HostEnvelope { host })))
}

/// The fields of an enrol request that are not extra capabilities: those [`CreateHost`] names.
const HOST_FIELDS: [&str; 8] = [
    "name",
    "reservable",
    "vcpus",
    "memory_mb",
    "local_gb",
    "availability_zone",
    "hypervisor_type",
    "service_name",
];

/// The command of an enrol request, checked field by field with Blazar's messages, then read as
/// [`CreateHost`].
fn enroll_command(body: &Map<String, Value>) -> Result<EnrollHost, ApiError> {
    let name = text(body, "name")?.ok_or_else(|| ApiError::bad_request("name is required"))?;
    let extra = body
        .iter()
        .filter(|(key, _)| !HOST_FIELDS.contains(&key.as_str()));
    let mut attributes = BTreeMap::new();
    for (key, value) in extra {
        let value = attr_value(key, value)?.ok_or_else(|| {
            ApiError::bad_request(format!("Extra capability {key} must not be null"))
        })?;
        attributes.insert(key.clone(), value);
    }
    let cmd = EnrollHost {
        name,
        vcpus: amount(body, "vcpus")?,
        memory_mb: amount(body, "memory_mb")?,
        local_gb: amount(body, "local_gb")?,
        availability_zone: text(body, "availability_zone")?,
        hypervisor_type: text(body, "hypervisor_type")?,
        service_name: text(body, "service_name")?,
        attributes,
        reservable: match body.get("reservable") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(flag)) => *flag,
            Some(Value::String(text)) if text.eq_ignore_ascii_case("true") => true,
            Some(Value::String(text)) if text.eq_ignore_ascii_case("false") => false,
            Some(_) => return Err(ApiError::bad_request("reservable must be true or false")),
        },
    };
    conform::<CreateHost>(body)?;
    Ok(cmd)
}

async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(UpdateHost(body)): ApiJson<UpdateHost>,
) -> Result<Json<HostEnvelope>, ApiError> {
    let id = host_id(&id)?;
    let mut updates = Vec::with_capacity(body.len());
    for (key, value) in &body {
        updates.push((key.clone(), attr_value(key, value)?));
    }
    state.berth.update_host(id, updates).await?;
    let host = state.berth.read(|catalog| find(catalog, id)).await??;
    Ok(Json(HostEnvelope { host }))
}

async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = host_id(&id)?;
    state.berth.delete_host(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::HOST_FIELDS;
    use crate::http::fields::{documented_fields, sorted};
    use berth_api::blazar::CreateHost;

    /// The fields the enrol handler keeps out of the extra capabilities are exactly the ones the
    /// documented request type names.
    #[test]
    fn host_fields_are_documented() {
        assert_eq!(documented_fields::<CreateHost>(), sorted(&HOST_FIELDS));
    }
}
