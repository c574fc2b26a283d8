//! The Blazar lease wire format: date fields, lenient typed fields as the Blazar client sends
//! them, reservation specs, and the lease, event and record representations.

use crate::http::error::ApiError;
use crate::http::fields::{integer, parse_date, read_documented};
use berth_api::blazar::{self as wire, Event, Record, ReservationAllocation, ReservationDetails};
use berth_api::time::{lease_time, record_time};
use berth_core::decide::health::missing_resources;
use berth_core::decide::lease::{LeaseUpdate, ReservationUpdate};
use berth_core::limits::REQUEST_QUANTITY_MAX;
use berth_core::model::lease::{
    Affinity, Lease, LeaseEvent, LeaseRecord, Reservation, ReservationSpec,
};
use berth_core::{Catalog, Instant, ReservationId};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use uuid::Uuid;

/// A body checked by hand, read as its documented request type: what a handler accepts is what
/// the OpenAPI document describes (400 otherwise, as for any body that does not validate).
pub(crate) fn typed<T: DeserializeOwned>(body: &Map<String, Value>) -> Result<T, ApiError> {
    read_documented(body)
}

/// [`typed`], for a handler that goes on reading the body it checked by hand.
pub(crate) fn conform<T: DeserializeOwned>(body: &Map<String, Value>) -> Result<(), ApiError> {
    typed::<T>(body).map(drop)
}

/// A required or optional date field.
pub(crate) fn date_field(
    body: &Map<String, Value>,
    field: &str,
    now: Instant,
) -> Result<Option<Instant>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => parse_date(field, text, now).map(Some),
        Some(other) => Err(ApiError::bad_request(format!(
            "{field}: {other} is an invalid date. Required format: %Y-%m-%d %H:%M, RFC 3339 or now"
        ))),
    }
}

/// An integer field given as a JSON number or a numeric string, in `[min, REQUEST_QUANTITY_MAX]`.
pub(crate) fn count(
    body: &Map<String, Value>,
    field: &str,
    min: u64,
) -> Result<Option<u64>, ApiError> {
    integer(body, field, min, u64::from(REQUEST_QUANTITY_MAX))
}

fn required_count(body: &Map<String, Value>, field: &str, min: u64) -> Result<u64, ApiError> {
    count(body, field, min)?.ok_or_else(|| missing(field))
}

fn missing(field: &str) -> ApiError {
    ApiError::bad_request(format!("Missing parameter: {field}"))
}

fn small(value: u64) -> u32 {
    u32::try_from(value).expect("invariant: counts are bounded by REQUEST_QUANTITY_MAX")
}

/// A string field; filters may also be given as JSON (kept as its text).
pub(crate) fn text(body: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other @ Value::Array(_)) if field.ends_with("_properties") => {
            Ok(Some(other.to_string()))
        }
        Some(_) => Err(ApiError::bad_request(format!("{field} must be a string"))),
    }
}

/// Blazar's affinity: `true`, `false`, `null` or the strings the client sends.
pub(crate) fn affinity(body: &Map<String, Value>) -> Result<Option<Affinity>, ApiError> {
    match body.get("affinity") {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(Affinity::Any)),
        Some(Value::Bool(true)) => Ok(Some(Affinity::SameHost)),
        Some(Value::Bool(false)) => Ok(Some(Affinity::DifferentHosts)),
        Some(Value::String(text)) => match text.as_str() {
            "True" | "true" => Ok(Some(Affinity::SameHost)),
            "False" | "false" => Ok(Some(Affinity::DifferentHosts)),
            "None" | "none" | "null" => Ok(Some(Affinity::Any)),
            other => Err(bad_affinity(other)),
        },
        Some(other) => Err(bad_affinity(&other.to_string())),
    }
}

fn bad_affinity(value: &str) -> ApiError {
    ApiError::bad_request(format!(
        "affinity must be true, false or null (or \"True\", \"False\", \"None\"), not {value}"
    ))
}

fn addresses(body: &Map<String, Value>) -> Result<Vec<String>, ApiError> {
    let bad = |v: &Value| {
        ApiError::bad_request(format!("Invalid IP address in required_floatingips: {v}"))
    };
    match body.get("required_floatingips") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .and_then(|t| t.trim().parse::<std::net::IpAddr>().ok())
                    .map(|ip| ip.to_string())
                    .ok_or_else(|| bad(item))
            })
            .collect(),
        Some(other) => Err(bad(other)),
    }
}

/// A reservation of a create request.
pub(crate) fn reservation_spec(body: &Map<String, Value>) -> Result<ReservationSpec, ApiError> {
    let kind = text(body, "resource_type")?.ok_or_else(|| missing("resource_type"))?;
    match kind.as_str() {
        "physical:host" => Ok(ReservationSpec::Host {
            min: small(required_count(body, "min", 1)?),
            max: small(required_count(body, "max", 1)?),
            hypervisor_properties: text(body, "hypervisor_properties")?
                .unwrap_or_default()
                .into(),
            resource_properties: text(body, "resource_properties")?
                .unwrap_or_default()
                .into(),
            before_end: text(body, "before_end")?
                .unwrap_or_else(|| "default".into())
                .into(),
        }),
        "virtual:instance" => Ok(ReservationSpec::Instance {
            vcpus: required_count(body, "vcpus", 1)?,
            memory_mb: required_count(body, "memory_mb", 1)?,
            disk_gb: required_count(body, "disk_gb", 0)?,
            amount: small(required_count(body, "amount", 1)?),
            affinity: affinity(body)?.unwrap_or(Affinity::Any),
            resource_properties: text(body, "resource_properties")?
                .unwrap_or_default()
                .into(),
        }),
        "virtual:floatingip" => Ok(ReservationSpec::FloatingIp {
            network_id: text(body, "network_id")?
                .filter(|t| !t.trim().is_empty())
                .ok_or_else(|| missing("network_id"))?
                .into(),
            amount: small(required_count(body, "amount", 1)?),
            required_floatingips: addresses(body)?,
        }),
        other => Err(ApiError::bad_request(format!(
            "Unsupported resource type: {other} (supported: physical:host, virtual:instance, virtual:floatingip)"
        ))),
    }
}

/// The reservations array of a request body.
pub(crate) fn reservation_objects(
    body: &Map<String, Value>,
) -> Result<Vec<&Map<String, Value>>, ApiError> {
    match body.get("reservations") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_object()
                    .ok_or_else(|| ApiError::bad_request("each reservation must be an object"))
            })
            .collect(),
        Some(_) => Err(ApiError::bad_request("reservations must be a list")),
    }
}

/// One reservation change of an update request.
pub(crate) fn reservation_update(body: &Map<String, Value>) -> Result<ReservationUpdate, ApiError> {
    let id = text(body, "id")?.ok_or_else(|| missing("reservations[].id"))?;
    let id = Uuid::parse_str(id.trim())
        .map(ReservationId::new)
        .map_err(|_| ApiError::bad_request(format!("Invalid reservation id: {id}")))?;
    Ok(ReservationUpdate {
        id,
        resource_type: text(body, "resource_type")?,
        min: count(body, "min", 1)?.map(small),
        max: count(body, "max", 1)?.map(small),
        amount: count(body, "amount", 1)?.map(small),
        vcpus: count(body, "vcpus", 1)?,
        memory_mb: count(body, "memory_mb", 1)?,
        disk_gb: count(body, "disk_gb", 0)?,
        affinity: affinity(body)?,
        hypervisor_properties: text(body, "hypervisor_properties")?,
        resource_properties: text(body, "resource_properties")?,
    })
}

/// An update request.
pub(crate) fn lease_update(
    body: &Map<String, Value>,
    now: Instant,
) -> Result<LeaseUpdate, ApiError> {
    let name = match body.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name.clone()),
        Some(_) => return Err(ApiError::bad_request("name must be a string")),
    };
    Ok(LeaseUpdate {
        name,
        start: date_field(body, "start_date", now)?,
        end: date_field(body, "end_date", now)?,
        before_end: date_field(body, "before_end_date", now)?,
        reservations: reservation_objects(body)?
            .into_iter()
            .map(reservation_update)
            .collect::<Result<_, _>>()?,
    })
}

/// A reservation as Blazar returns it, with the hosts it holds (berth's addition).
/// `missing_resources` is `false` when nothing is missing (Blazar's flag), and otherwise says
/// how much: hosts or instances, their resources, and on which hosts out of service.
pub(crate) fn wire_reservation(
    lease: &Lease,
    r: &Reservation,
    catalog: &Catalog,
) -> wire::Reservation {
    wire::Reservation {
        id: r.id.uuid(),
        lease_id: lease.id.uuid(),
        status: r.status.as_str().to_owned(),
        missing_resources: missing_resources(catalog, r).unwrap_or(Value::Bool(false)),
        resources_changed: r.resources_changed,
        resource_id: r.id.uuid(),
        spec: details(r),
        created_at: record_time(r.created_at.as_micros()),
        updated_at: record_time(r.updated_at.as_micros()),
        allocations: r
            .hosts
            .iter()
            .map(|(host, slots)| ReservationAllocation {
                host_id: catalog.provider(*host).map(|p| p.id().to_string()),
                provider_uuid: host.uuid(),
                slots: *slots,
            })
            .collect(),
    }
}

/// The fields of a reservation's kind.
fn details(r: &Reservation) -> ReservationDetails {
    match &r.spec {
        ReservationSpec::Host {
            min,
            max,
            hypervisor_properties,
            resource_properties,
            before_end,
        } => ReservationDetails::Host {
            min: *min,
            max: *max,
            hypervisor_properties: hypervisor_properties.to_string(),
            resource_properties: resource_properties.to_string(),
            before_end: before_end.to_string(),
        },
        ReservationSpec::Instance {
            vcpus,
            memory_mb,
            disk_gb,
            amount,
            affinity,
            resource_properties,
        } => ReservationDetails::Instance {
            vcpus: *vcpus,
            memory_mb: *memory_mb,
            disk_gb: *disk_gb,
            amount: *amount,
            affinity: match affinity {
                Affinity::SameHost => Some(true),
                Affinity::DifferentHosts => Some(false),
                Affinity::Any => None,
            },
            resource_properties: resource_properties.to_string(),
            // Blazar names the flavor, the aggregate and the server group of an instance
            // reservation after the reservation: one uuid for all four.
            flavor_id: r.id.uuid(),
            aggregate_id: berth_core::model::fence::reservation_aggregate(r.id),
            server_group_id: (*affinity != Affinity::Any).then_some(r.id.uuid()),
        },
        ReservationSpec::FloatingIp {
            network_id,
            amount,
            required_floatingips,
        } => ReservationDetails::FloatingIp {
            network_id: network_id.to_string(),
            amount: *amount,
            required_floatingips: required_floatingips.clone(),
            floatingip_ids: r.floating_ips.to_vec(),
        },
    }
}

/// A lifecycle event as Blazar returns it.
pub(crate) fn wire_event(lease: &Lease, event: &LeaseEvent) -> Event {
    Event {
        id: event.id,
        lease_id: lease.id.uuid(),
        event_type: event.kind.as_str().to_owned(),
        time: lease_time(event.at.as_micros()),
        status: event.status.as_str().to_owned(),
        created_at: record_time(event.created_at.as_micros()),
        updated_at: record_time(event.updated_at.as_micros()),
    }
}

/// A lease as Blazar returns it.
pub(crate) fn wire_lease(lease: &Lease, catalog: &Catalog) -> wire::Lease {
    wire::Lease {
        id: lease.id.uuid(),
        name: lease.name.to_string(),
        start_date: lease_time(lease.start.as_micros()),
        end_date: lease_time(lease.end.as_micros()),
        status: lease.status.as_str().to_owned(),
        status_reason: lease.status_reason().map(str::to_owned),
        degraded: lease.degraded,
        user_id: lease.user_id.to_string(),
        project_id: lease.project_id.to_string(),
        trust_id: None,
        created_at: record_time(lease.created_at.as_micros()),
        updated_at: record_time(lease.updated_at.as_micros()),
        reservations: lease
            .reservations
            .iter()
            .map(|r| wire_reservation(lease, r, catalog))
            .collect(),
        events: lease.events.iter().map(|e| wire_event(lease, e)).collect(),
        lapses_at: lease.lapses_at.map(|at| lease_time(at.as_micros())),
        series_id: lease.series().map(|o| o.series_id),
        occurrence: lease.series().map(|o| o.index),
    }
}

/// A series (berth) as its occurrences left show it; `None` when none is left.
pub(crate) fn wire_series(leases: Vec<wire::Lease>, first: Option<&Lease>) -> Option<wire::Series> {
    let occurrence = first?.series()?;
    Some(wire::Series {
        id: occurrence.series_id,
        name: leases.first()?.name.clone(),
        recurrence: occurrence.rule.to_string(),
        count: occurrence.count,
        leases,
    })
}

/// One entry of the lifecycle record.
pub(crate) fn wire_record(record: &LeaseRecord) -> Record {
    Record {
        lease_id: record.lease_id.uuid(),
        kind: record.kind.clone(),
        time: lease_time(record.at.as_micros()),
        details: serde_json::from_str(&record.details).unwrap_or(Value::Null),
    }
}
