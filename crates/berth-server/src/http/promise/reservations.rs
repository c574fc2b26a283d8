//! Promise reservations, ETSI style: `/promise/reservation/{compute,network,storage}/create`,
//! `/query`, `/update` and `DELETE /promise/reservation/{kind}/{id}`; and the representation
//! both styles share (`reservationData`, status, remaining capacity, counter-offers).

use super::wire::{Input, count, date, object, size, text, time};
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::idempotency::IdempotencyHeader;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use berth_app::{AppError, CreateReservation, SEARCH_HORIZON_DEFAULT_MICROS};
use berth_core::decide::promise::ReservationChange;
use berth_core::model::lease::{Lease, LeaseStatus, ReservationSpec};
use berth_core::model::promise::{
    self, Ask, ContainerAsk, Outcome, PRIORITY_DEFAULT, PoolAsk, PromiseKind, StorageAsk,
};
use berth_core::rejection::Refusal;
use berth_core::{Catalog, Instant, Rejection};
use serde_json::{Map, Value, json};
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes.add(
        Method::POST,
        "/promise/reservation/{kind}/create",
        Rule::PROJECT_MEMBER,
        "Create a reservation (ETSI style)",
        create,
    );
    for method in [Method::GET, Method::POST] {
        routes.add(
            method,
            "/promise/reservation/{kind}/query",
            Rule::PROJECT_READER,
            "Query reservations (ETSI style)",
            query,
        );
    }
    routes
        .add(
            Method::POST,
            "/promise/reservation/{kind}/update",
            Rule::PROJECT_MEMBER,
            "Update a reservation (ETSI style)",
            update,
        )
        .add(
            Method::DELETE,
            "/promise/reservation/{kind}/{reservation_id}",
            Rule::PROJECT_MEMBER,
            "Terminate a reservation (ETSI style)",
            terminate,
        );
}

pub(super) fn kind_of(path: &str) -> Result<PromiseKind, ApiError> {
    match path {
        "compute" => Ok(PromiseKind::Compute),
        "network" => Ok(PromiseKind::Network),
        "storage" => Ok(PromiseKind::Storage),
        other => Err(ApiError::not_found(format!(
            "Unknown resource type {other}: use compute, network or storage"
        ))),
    }
}

/// The kinds of resource a lease holds (a Blazar lease shows under each).
fn kinds_held(lease: &Lease) -> Vec<PromiseKind> {
    lease
        .reservations
        .iter()
        .map(|r| match &r.spec {
            ReservationSpec::FloatingIp { .. } => PromiseKind::Network,
            ReservationSpec::Instance { vcpus: 0, .. } => PromiseKind::Storage,
            _ => PromiseKind::Compute,
        })
        .collect()
}

/// Promise's `reservationStatus`.
pub(super) fn status(lease: &Lease) -> &'static str {
    match (&lease.outcome, lease.status) {
        (Some(Outcome::Expired), _) => "expired",
        (Some(Outcome::Preempted { .. }), _) => "preempted",
        (None, LeaseStatus::Terminated) => "terminated",
        (None, LeaseStatus::Error) => "error",
        (None, LeaseStatus::Active) => "active",
        (None, LeaseStatus::Pending) => "initialized",
    }
}

/// The capacity vector of an ask: cores, ram, instances, addresses, gigabytes.
pub(super) fn vector(ask: &Ask) -> Value {
    let pool = ask.pool.unwrap_or_default();
    let cores = pool.cores + ask.containers.iter().map(|c| c.vcpus).sum::<u64>();
    let ram = pool.ram_mb + ask.containers.iter().map(|c| c.ram_mb).sum::<u64>();
    json!({
        "cores": cores,
        "ram": ram,
        "instances": pool.instances + ask.containers.len() as u64,
        "addresses": ask.public_ips,
        "gigabytes": ask.storage.map_or(0, |s| s.size_gb),
    })
}

/// The members of the capacity vector that are resource classes.
pub(super) fn vector_classes() -> [(&'static str, &'static str); 3] {
    [
        ("cores", "VCPU"),
        ("ram", "MEMORY_MB"),
        ("gigabytes", "DISK_GB"),
    ]
}

/// What the lease's instances use, against what its compute reservations hold.
fn remaining(catalog: &Catalog, lease: &Lease) -> (Value, Vec<Uuid>) {
    let mut held = [0u64; 3];
    for r in &lease.reservations {
        if let ReservationSpec::Instance {
            vcpus, memory_mb, ..
        } = &r.spec
            && *vcpus > 0
        {
            let slots: u64 = r.hosts.iter().map(|(_, n)| u64::from(*n)).sum();
            held[0] += vcpus * slots;
            held[1] += memory_mb * slots;
            held[2] += slots;
        }
    }
    let mut used = [0u64; 3];
    let mut ids = Vec::new();
    for instance in catalog.instances_of(lease) {
        ids.push(instance.id);
        if let Some(f) = catalog.flavor(&instance.flavor_id) {
            used[0] += f.vcpus;
            used[1] += f.ram_mb;
        }
        used[2] += 1;
    }
    let left = |i: usize| held[i].saturating_sub(used[i]);
    (
        json!({"cores": left(0), "ram": left(1), "instances": left(2)}),
        ids,
    )
}

fn addresses(catalog: &Catalog, lease: &Lease) -> Vec<String> {
    lease
        .reservations
        .iter()
        .flat_map(|r| r.floating_ips.iter())
        .filter_map(|id| catalog.floating_ip(*id).map(|f| f.address.clone()))
        .collect()
}

fn ask_json(ask: &Ask, zone: Option<&str>, out: &mut Map<String, Value>) {
    if let Some(pool) = ask.pool {
        out.insert(
            "computePoolReserved".into(),
            json!({"numCpuCores": pool.cores, "numVcInstances": pool.instances,
                   "virtualMemSize": pool.ram_mb, "zoneId": zone}),
        );
    }
    if !ask.containers.is_empty() {
        let containers: Vec<Value> = ask
            .containers
            .iter()
            .map(|c| {
                json!({
                    "containerId": c.container_id,
                    "flavorId": c.flavor_id,
                    "virtualCpu": {"numVirtualCpu": c.vcpus, "cpuArchitecture": c.cpu_architecture},
                    "virtualMemory": {"virtualMemSize": c.ram_mb},
                    "virtualDisks": {"sizeOfStorage": c.disk_gb},
                    "zoneId": zone,
                })
            })
            .collect();
        out.insert("virtualizationContainerReserved".into(), json!(containers));
    }
    if ask.public_ips > 0 {
        out.insert(
            "networkReserved".into(),
            json!({"numPublicIps": ask.public_ips, "networkId": ask.network_id}),
        );
    }
    if let Some(storage) = ask.storage {
        out.insert(
            "storagePoolReserved".into(),
            json!({"storageSize": storage.size_gb, "numSnapshots": storage.snapshots,
                   "numVolumes": storage.volumes, "zoneId": zone}),
        );
    }
}

/// `reservationData`: the reservation as both styles show it.
pub(super) fn reservation_data(catalog: &Catalog, lease: &Lease) -> Value {
    let terms = lease.terms.as_deref();
    let zone = terms.and_then(|t| t.zone.clone());
    let (remaining, allocations) = remaining(catalog, lease);
    let mut out = json!({
        "reservationId": lease.id,
        "reservationStatus": status(lease),
        "startTime": time(lease.start),
        "endTime": time(lease.end),
        "expiryTime": terms.and_then(|t| t.expiry).map(time),
        "zoneId": zone,
        "priority": lease.priority(),
        "projectId": lease.project_id,
        "remaining": remaining,
        "allocations": allocations,
        "createdOn": time(lease.created_at),
        "modifiedOn": time(lease.updated_at),
    });
    let map = out.as_object_mut().expect("invariant: built as an object");
    if let Some(terms) = terms {
        ask_json(&terms.ask, zone.as_deref(), map);
        map.insert("capacity".into(), vector(&terms.ask));
    }
    let ips = addresses(catalog, lease);
    if !ips.is_empty() {
        map.insert("publicIps".into(), json!(ips));
    }
    if let Some(reason) = &lease.status_reason {
        map.insert("statusReason".into(), json!(reason));
    }
    // Failures (seed 6.1.1.2 step 7): what a failed or maintained host took away.
    map.insert("degraded".into(), json!(lease.degraded));
    let missing = berth_core::decide::health::missing_of(catalog, lease);
    if missing.as_object().is_some_and(|m| !m.is_empty()) {
        map.insert("missingResources".into(), missing);
    }
    out
}

/// The counter-offer of a refused request: the most that fits in the window, in the request's
/// own terms, and the earliest window of the same length where all of it fits.
pub(super) fn offer(ask: &Ask, refusal: &Refusal, start: Instant, end: Instant) -> Value {
    let most = promise::offered(ask, &refusal.amounts);
    let mut max_capacity = Map::new();
    ask_json(&most, None, &mut max_capacity);
    let earliest = refusal.earliest_start.map(|at| {
        let shifted = Instant::from_micros(at.as_micros() + (end.as_micros() - start.as_micros()));
        json!({"startTime": time(at), "endTime": time(shifted)})
    });
    json!({
        "maxCapacity": max_capacity,
        "capacity": vector(&most),
        "window": {"startTime": time(start), "endTime": time(end)},
        "earliestWindow": earliest,
        "truncated": refusal.truncated,
    })
}

/// Renders a refused create: 409 with the offer; other errors as they are.
pub(super) fn refused(error: AppError, ask: &Ask, start: Instant, end: Instant) -> ApiError {
    let extra = match &error {
        AppError::Rejected(Rejection::DoesNotFit(refusal)) => {
            Some(json!({"offer": offer(ask, refusal, start, end)}))
        }
        _ => None,
    };
    match extra {
        Some(extra) => ApiError::from(error).merge_extra(extra),
        None => ApiError::from(error),
    }
}

fn pool(body: &Map<String, Value>) -> Result<Option<PoolAsk>, ApiError> {
    let Some(inner) = object(body, "computePoolReservation")? else {
        return Ok(None);
    };
    let pool = PoolAsk {
        cores: count(inner, "numCpuCores")?.unwrap_or(0),
        ram_mb: size(inner, "virtualMemSize")?.unwrap_or(0),
        instances: count(inner, "numVcInstances")?.unwrap_or(0),
    };
    match pool == PoolAsk::default() {
        true => Err(ApiError::bad_request(
            "computePoolReservation must ask for numCpuCores, numVcInstances or virtualMemSize",
        )),
        false => Ok(Some(pool)),
    }
}

fn container(idx: usize, item: &Value) -> Result<ContainerAsk, ApiError> {
    let item = item.as_object().ok_or_else(|| {
        ApiError::bad_request("virtualizationContainerReservation must list objects")
    })?;
    let flavor = object(item, "containerFlavor")?
        .cloned()
        .unwrap_or_default();
    let nested = |outer: &str, field: &str| -> Result<u64, ApiError> {
        match object(&flavor, outer)? {
            Some(inner) => Ok(size(inner, field)?.unwrap_or(0)),
            None => Ok(0),
        }
    };
    Ok(ContainerAsk {
        container_id: text(item, "containerId")?.unwrap_or_else(|| format!("container-{idx}")),
        flavor_id: text(&flavor, "flavorId")?,
        vcpus: nested("virtualCpu", "numVirtualCpu")?,
        ram_mb: nested("virtualMemory", "virtualMemSize")?,
        disk_gb: nested("storageAttributes", "sizeOfStorage")?,
        cpu_architecture: object(&flavor, "virtualCpu")?
            .map(|v| text(v, "cpuArchitecture"))
            .transpose()?
            .flatten(),
    })
}

fn containers(body: &Map<String, Value>) -> Result<Vec<ContainerAsk>, ApiError> {
    match body.get("virtualizationContainerReservation") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, v)| container(i, v))
            .collect(),
        Some(_) => Err(ApiError::bad_request(
            "virtualizationContainerReservation must be a non-empty list",
        )),
    }
}

fn network(body: &Map<String, Value>) -> Result<Option<(u64, Option<String>)>, ApiError> {
    let Some(inner) = object(body, "networkReservation")? else {
        return Ok(None);
    };
    let ips = count(inner, "numPublicIps")?
        .filter(|n| *n > 0)
        .ok_or_else(|| ApiError::bad_request("networkReservation.numPublicIps is missing"))?;
    Ok(Some((ips, text(inner, "networkId")?)))
}

fn storage(body: &Map<String, Value>) -> Result<Option<StorageAsk>, ApiError> {
    let Some(inner) = object(body, "storagePoolReservation")? else {
        return Ok(None);
    };
    let size_gb = size(inner, "storageSize")?
        .filter(|n| *n > 0)
        .ok_or_else(|| ApiError::bad_request("storagePoolReservation.storageSize is missing"))?;
    Ok(Some(StorageAsk {
        size_gb,
        snapshots: count(inner, "numSnapshots")?.unwrap_or(0),
        volumes: count(inner, "numVolumes")?.unwrap_or(1),
    }))
}

const COMMON_FIELDS: [&str; 7] = [
    "startTime",
    "endTime",
    "expiryTime",
    "zoneId",
    "priority",
    "resourceGroupId",
    "reservationId",
];

fn kind_fields(kind: PromiseKind) -> &'static [&'static str] {
    match kind {
        PromiseKind::Compute => &[
            "computePoolReservation",
            "virtualizationContainerReservation",
        ],
        PromiseKind::Network => &["networkReservation"],
        PromiseKind::Storage => &["storagePoolReservation"],
        PromiseKind::Capacity => &[],
    }
}

/// The ask of an ETSI create or update body for `kind`; `None` when it names no amounts.
fn etsi_ask(kind: PromiseKind, body: &Map<String, Value>) -> Result<Option<Ask>, ApiError> {
    if let Some(unknown) = body
        .keys()
        .find(|k| !COMMON_FIELDS.contains(&k.as_str()) && !kind_fields(kind).contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "Unknown field {unknown} for a {} reservation",
            kind.as_str()
        )));
    }
    let mut ask = Ask {
        pool: pool(body)?,
        containers: containers(body)?,
        storage: storage(body)?,
        ..Ask::default()
    };
    if let Some((ips, network)) = network(body)? {
        ask.public_ips = ips;
        ask.network_id = network;
    }
    Ok((!ask.is_empty()).then_some(ask))
}

pub(super) fn priority(body: &Map<String, Value>) -> Result<u32, ApiError> {
    match super::wire::number(body, "priority", u64::from(promise::PRIORITY_MAX)) {
        Ok(p) => Ok(p.map_or(PRIORITY_DEFAULT, |p| p as u32)),
        Err(_) => Err(ApiError::bad_request(format!(
            "priority must be an integer from 0 to {}",
            promise::PRIORITY_MAX
        ))),
    }
}

async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(kind): Path<String>,
    key: IdempotencyHeader,
    Input(body): Input,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let kind = kind_of(&kind)?;
    let now = state.berth.now();
    let ask = etsi_ask(kind, &body)?.ok_or_else(|| {
        ApiError::bad_request(format!("{} is missing", kind_fields(kind).join(" or ")))
    })?;
    let cmd = CreateReservation {
        kind,
        ask: ask.clone(),
        start: date(&body, "startTime", now)?,
        end: date(&body, "endTime", now)?,
        expiry: date(&body, "expiryTime", now)?,
        zone: text(&body, "zoneId")?,
        priority: priority(&body)?,
        grant: state.authz.policy().grant(&caller.0),
        project_id: caller.0.project_id.clone(),
        user_id: caller.0.user_id.clone(),
        horizon_micros: SEARCH_HORIZON_DEFAULT_MICROS,
        idempotency: key.bind(&caller, &body),
    };
    let (start, end) = (cmd.start.unwrap_or(now), cmd.end.unwrap_or(now));
    let asked = cmd.priority;
    let lease = state
        .berth
        .create_reservation(cmd)
        .await
        .map_err(|e| refused(e, &ask, start, end.max(start)))?;
    let mut data = state.berth.read_local(|c| reservation_data(c, &lease));
    note_priority(&mut data, asked, lease.priority());
    Ok((
        StatusCode::CREATED,
        Json(json!({ "reservationData": data })),
    ))
}

/// Says in the answer that the priority asked for was lowered to the caller's grant.
pub(super) fn note_priority(data: &mut Value, asked: u32, granted: u32) {
    if asked != granted {
        data["priorityLowered"] = json!({
            "requested": asked,
            "granted": granted,
            "reason": "priorities above the project's granted ceiling are lowered to it; an admin grants higher ones in the policy file",
        });
    }
}

fn filter_ids(body: &Map<String, Value>) -> Result<Option<Vec<Uuid>>, ApiError> {
    let items = match body.get("queryReservationFilter") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items.clone(),
        Some(Value::Object(one)) => vec![Value::Object(one.clone())],
        Some(_) => {
            return Err(ApiError::bad_request(
                "queryReservationFilter must list {\"reservationId\": ...} objects",
            ));
        }
    };
    super::wire::reservation_ids("queryReservationFilter", &items)?
        .into_iter()
        .map(|id| {
            Uuid::parse_str(id)
                .map_err(|_| ApiError::not_found(format!("Reservation {id} could not be found")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

async fn query(
    State(state): State<AppState>,
    caller: Caller,
    Path(kind): Path<String>,
    Input(body): Input,
) -> Result<Json<Value>, ApiError> {
    let kind = kind_of(&kind)?;
    let ids = filter_ids(&body)?;
    let project = caller.project_scope();
    let answer = state
        .berth
        .read(move |c| -> Result<Value, ApiError> {
            let visible = |l: &&Lease| project.as_deref().is_none_or(|p| p == l.project_id);
            match ids.as_deref() {
                Some([id]) => {
                    let lease = c.lease(*id).filter(visible).ok_or_else(|| {
                        ApiError::not_found(format!("Reservation {id} could not be found"))
                    })?;
                    Ok(json!({"queryResult": reservation_data(c, lease)}))
                }
                Some(many) => {
                    let mut found = Vec::new();
                    for id in many {
                        let lease = c.lease(*id).filter(visible).ok_or_else(|| {
                            ApiError::not_found(format!("Reservation {id} could not be found"))
                        })?;
                        found.push(reservation_data(c, lease));
                    }
                    Ok(json!({"queryResult": found}))
                }
                None => {
                    let mut leases: Vec<&Lease> = c
                        .leases()
                        .filter(visible)
                        .filter(|l| {
                            kinds_held(l).contains(&kind)
                                || l.terms.as_ref().is_some_and(|t| t.kind == kind)
                        })
                        .collect();
                    leases.sort_by_key(|l| (l.created_at, l.id));
                    let all: Vec<Value> = leases.iter().map(|l| reservation_data(c, l)).collect();
                    Ok(json!({"queryResult": all}))
                }
            }
        })
        .await??;
    Ok(Json(answer))
}

fn reservation_id(body: &Map<String, Value>, field: &str) -> Result<Uuid, ApiError> {
    let text =
        text(body, field)?.ok_or_else(|| ApiError::bad_request(format!("{field} is missing")))?;
    Uuid::parse_str(&text)
        .map_err(|_| ApiError::not_found(format!("Reservation {text} could not be found")))
}

async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(kind): Path<String>,
    Input(body): Input,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let kind = kind_of(&kind)?;
    let now = state.berth.now();
    let id = reservation_id(&body, "reservationId")?;
    let change = ReservationChange {
        start: date(&body, "startTime", now)?,
        end: date(&body, "endTime", now)?,
        expiry: date(&body, "expiryTime", now)?,
        ask: etsi_ask(kind, &body)?,
    };
    let lease = update_with(&state, &caller, id, change).await?;
    let data = state.berth.read_local(|c| reservation_data(c, &lease));
    Ok((
        StatusCode::CREATED,
        Json(json!({ "reservationData": data })),
    ))
}

/// Applies `change` to reservation `id`; an update that does not fit answers with the offer
/// (the lease is read only then, for what the change leaves as it was).
pub(super) async fn update_with(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
    change: ReservationChange,
) -> Result<Lease, ApiError> {
    let project = caller.project_scope();
    let error = match state
        .berth
        .update_reservation(
            id,
            project.clone(),
            change.clone(),
            SEARCH_HORIZON_DEFAULT_MICROS,
        )
        .await
    {
        Ok(lease) => return Ok(lease),
        Err(error) => error,
    };
    let current = state
        .berth
        .read_local(|c| c.lease(id).cloned())
        .filter(|l| project.as_deref().is_none_or(|p| p == l.project_id))
        .ok_or_else(|| ApiError::not_found(format!("Reservation {id} could not be found")))?;
    let ask = change
        .ask
        .or_else(|| current.terms.as_ref().map(|t| t.ask.clone()))
        .unwrap_or_default();
    let start = change.start.unwrap_or(current.start);
    let end = change.end.unwrap_or(current.end);
    Err(refused(error, &ask, start, end.max(start)))
}

async fn terminate(
    State(state): State<AppState>,
    caller: Caller,
    Path((kind, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    kind_of(&kind)?;
    let id = Uuid::parse_str(&id)
        .map_err(|_| ApiError::not_found(format!("Reservation {id} could not be found")))?;
    state
        .berth
        .cancel_reservation(id, caller.project_scope())
        .await?;
    Ok(Json(json!({ "reservationId": id })))
}
