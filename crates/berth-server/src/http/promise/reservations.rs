//! Promise reservations, ETSI style: `/promise/reservation/{compute,network,storage}/create`,
//! `/query`, `/update` and `DELETE /promise/reservation/{kind}/{id}`; and the representation
//! both styles share (`reservationData`, status, remaining capacity, counter-offers).

use super::wire::{Input, count, date, documented, object, size, text, time};
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::idempotency::IdempotencyHeader;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use berth_api::promise::{
    CapacityVector, ComputePoolReserved, ContainerReserved, EtsiReservationQuery,
    EtsiReservationRequest, MissingOnHost, MissingResources, NetworkReserved, Offer,
    PriorityLowered, QueryResult, Refused, Remaining, ReservationData, ReservationDataEnvelope,
    ReservationQueryResult, ReservationTerminated, Reserved, StoragePoolReserved, TimeWindow,
    VirtualCpu, VirtualDisks, VirtualMemory,
};
use berth_app::{AppError, CreateReservation, SEARCH_HORIZON_DEFAULT};
use berth_core::decide::promise::ReservationChange;
use berth_core::model::cloud::Origin;
use berth_core::model::lease::{Lease, LeaseStatus};
use berth_core::model::promise::{
    self, Ask, ContainerAsk, Outcome, PRIORITY_DEFAULT, PoolAsk, PromiseKind, StorageAsk,
};
use berth_core::query;
use berth_core::query::missing::{self, Missing};
use berth_core::query::promise::{KindQuery, Named};
use berth_core::rejection::Refusal;
use berth_core::{Catalog, Instant, LeaseId, Rejection};
use serde_json::{Map, Value};
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::POST,
            "/promise/reservation/{kind}/create",
            Rule::PROJECT_MEMBER,
            "Create a reservation (ETSI style)",
            create,
        )
        .accepts::<EtsiReservationRequest>()
        .answers::<ReservationDataEnvelope>(201)
        .add(
            Method::GET,
            "/promise/reservation/{kind}/query",
            Rule::PROJECT_READER,
            "Query reservations (ETSI style)",
            query,
        )
        .answers::<ReservationQueryResult>(200)
        .add(
            Method::POST,
            "/promise/reservation/{kind}/query",
            Rule::PROJECT_READER,
            "Query reservations (ETSI style)",
            query,
        )
        .changes_nothing()
        .accepts::<EtsiReservationQuery>()
        .answers::<ReservationQueryResult>(200)
        .add(
            Method::POST,
            "/promise/reservation/{kind}/update",
            Rule::PROJECT_MEMBER,
            "Update a reservation (ETSI style)",
            update,
        )
        .accepts::<EtsiReservationRequest>()
        .answers::<ReservationDataEnvelope>(201)
        .add(
            Method::DELETE,
            "/promise/reservation/{kind}/{reservation_id}",
            Rule::PROJECT_MEMBER,
            "Terminate a reservation (ETSI style)",
            terminate,
        )
        .answers::<ReservationTerminated>(200);
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

/// Promise's `reservationStatus`.
pub(super) fn status(lease: &Lease) -> &'static str {
    match (lease.outcome(), lease.status) {
        (Some(Outcome::Expired), _) => "expired",
        (Some(Outcome::Preempted { .. }), _) => "preempted",
        (None, LeaseStatus::Terminated) => "terminated",
        (None, LeaseStatus::Error) => "error",
        (None, LeaseStatus::Active) => "active",
        (None, LeaseStatus::Pending) => "initialized",
        (None, LeaseStatus::Held) => "held",
        (None, LeaseStatus::Waiting) => "waiting",
        (None, LeaseStatus::Expired) => "expired",
    }
}

/// The capacity vector of an ask: cores, ram, instances, addresses, gigabytes.
pub(super) fn vector(ask: &Ask) -> CapacityVector {
    let pool = ask.pool.unwrap_or_default();
    let cores = pool.cores + ask.containers.iter().map(|c| c.vcpus).sum::<u64>();
    let ram = pool.ram_mb + ask.containers.iter().map(|c| c.ram_mb).sum::<u64>();
    CapacityVector {
        cores,
        ram,
        instances: pool.instances + ask.containers.len() as u64,
        addresses: ask.public_ips,
        gigabytes: ask.storage.map_or(0, |s| s.size_gb),
    }
}

/// The members of the capacity vector that are resource classes.
pub(super) fn vector_classes() -> [(&'static str, &'static str); 3] {
    [
        ("cores", "VCPU"),
        ("ram", "MEMORY_MB"),
        ("gigabytes", "DISK_GB"),
    ]
}

fn addresses(catalog: &Catalog, lease: &Lease) -> Vec<String> {
    lease
        .reservations
        .iter()
        .flat_map(|r| r.floating_ips.iter())
        .filter_map(|id| catalog.floating_ip(*id).map(|f| f.address.clone()))
        .collect()
}

/// Whether `flavor` pins NUMA nodes, as ETSI's `numaEnabled` says it.
fn numa_enabled(catalog: &Catalog, flavor: Option<&str>) -> String {
    let pinned = flavor
        .and_then(|f| catalog.flavor(f))
        .is_some_and(|f| f.extra_specs.contains_key("hw:numa_nodes"));
    match pinned {
        true => "True",
        false => "False",
    }
    .to_owned()
}

/// An ask in ETSI terms; with the catalog, a container also says whether its flavor pins NUMA
/// nodes.
fn ask_json(catalog: Option<&Catalog>, ask: &Ask, zone: Option<&str>) -> Reserved {
    let zone = zone.map(str::to_owned);
    let container = |c: &ContainerAsk| ContainerReserved {
        container_id: c.container_id.clone(),
        flavor_id: c.flavor_id.clone(),
        virtual_cpu: VirtualCpu {
            num_virtual_cpu: c.vcpus,
            cpu_architecture: c.cpu_architecture.clone(),
        },
        virtual_memory: VirtualMemory {
            virtual_mem_size: c.ram_mb,
            numa_enabled: catalog.map(|catalog| numa_enabled(catalog, c.flavor_id.as_deref())),
        },
        virtual_disks: VirtualDisks {
            storage_id: format!("{}:disk", c.container_id),
            flavour_id: c.flavor_id.clone(),
            type_of_storage: "volume".to_owned(),
            size_of_storage: c.disk_gb,
            operational_state: "enabled".to_owned(),
        },
        zone_id: zone.clone(),
    };
    Reserved {
        compute_pool_reserved: ask.pool.map(|pool| ComputePoolReserved {
            num_cpu_cores: pool.cores,
            num_vc_instances: pool.instances,
            virtual_mem_size: pool.ram_mb,
            zone_id: zone.clone(),
        }),
        virtualization_container_reserved: (!ask.containers.is_empty())
            .then(|| ask.containers.iter().map(container).collect()),
        network_reserved: (ask.public_ips > 0).then(|| NetworkReserved {
            num_public_ips: ask.public_ips,
            network_id: ask.network_id.clone(),
        }),
        storage_pool_reserved: ask.storage.map(|storage| StoragePoolReserved {
            storage_size: storage.size_gb,
            num_snapshots: storage.snapshots,
            num_volumes: storage.volumes,
            zone_id: zone.clone(),
        }),
    }
}

/// What a reservation is missing, on the wire.
fn missing_json(missing: &Missing) -> MissingResources {
    MissingResources {
        amount: missing.amount,
        hosts: missing
            .hosts
            .iter()
            .map(|on| MissingOnHost {
                amount: on.amount,
                host_id: on.host_id.map(|id| id.to_string()),
                hypervisor_hostname: on.name.clone(),
                provider: on.provider.uuid(),
                status: on.status.map(|s| s.as_str().to_owned()),
            })
            .collect(),
        resources: missing.resources.as_ref().map(|amounts| {
            amounts
                .iter()
                .map(|(class, n)| (class.as_str().to_owned(), *n))
                .collect()
        }),
        unit: missing.unit.as_str().to_owned(),
    }
}

/// The zone of a reservation that named none: the one zone of every host it holds, if they
/// share one.
fn held_zone(catalog: &Catalog, lease: &Lease) -> Option<String> {
    let mut zones = lease
        .reservations
        .iter()
        .flat_map(|r| r.hosts.iter())
        .map(|(host, _)| catalog.provider(*host).and_then(|p| p.availability_zone()));
    let first = zones.next()??;
    zones.all(|z| z == Some(first)).then(|| first.to_owned())
}

/// `reservationData`: the reservation as both styles show it.
pub(super) fn reservation_data(catalog: &Catalog, lease: &Lease) -> ReservationData {
    let terms = lease.terms();
    let zone = terms
        .and_then(|t| t.zone.clone())
        .or_else(|| held_zone(catalog, lease));
    let drawn = query::promise::drawn(catalog, lease);
    let ips = addresses(catalog, lease);
    let missing = missing::of_lease(catalog, lease, None);
    ReservationData {
        reservation_id: lease.id.uuid(),
        reservation_status: status(lease).to_owned(),
        start_time: time(lease.start),
        end_time: time(lease.end),
        expiry_time: terms.and_then(|t| t.expiry).map(time),
        zone_id: zone.clone(),
        priority: lease.priority(),
        project_id: lease.project_id.to_string(),
        remaining: Remaining {
            cores: drawn.cores_left,
            ram: drawn.ram_mb_left,
            instances: drawn.instances_left,
        },
        allocations: drawn.instances,
        created_on: time(lease.created_at),
        modified_on: time(lease.updated_at),
        reserved: terms.map_or_else(Reserved::default, |t| {
            ask_json(Some(catalog), &t.ask, zone.as_deref())
        }),
        capacity: terms.map(|t| vector(&t.ask)),
        public_ips: (!ips.is_empty()).then_some(ips),
        status_reason: lease.status_reason().map(str::to_owned),
        // Failures (seed 6.1.1.2 step 7): what a failed or maintained host took away.
        degraded: lease.degraded,
        missing_resources: (!missing.is_empty()).then(|| {
            missing
                .iter()
                .map(|(id, m)| (id.uuid(), missing_json(m)))
                .collect()
        }),
        priority_lowered: None,
        provider_ids: providers_held(catalog, lease),
    }
}

/// Whose capacity `lease` holds: `local` for berth's own hosts first, then each provider cloud's
/// id.
fn providers_held(catalog: &Catalog, lease: &Lease) -> Vec<String> {
    let origins: std::collections::BTreeSet<Option<Uuid>> = lease
        .reservations
        .iter()
        .flat_map(|r| r.hosts.iter())
        .filter_map(|(host, _)| catalog.provider(*host))
        .map(berth_core::catalog::provider_cloud_of)
        .collect();
    origins
        .into_iter()
        .map(|origin| origin.map_or_else(|| Origin::LOCAL_NAME.to_owned(), |id| id.to_string()))
        .collect()
}

/// The counter-offer of a refused request: the most that fits in the window, in the request's
/// own terms, and the earliest window of the same length where all of it fits.
pub(super) fn offer(ask: &Ask, refusal: &Refusal, start: Instant, end: Instant) -> Offer {
    let most = promise::offered(ask, &refusal.amounts);
    let earliest = refusal.earliest_start.map(|at| {
        let shifted = Instant::from_micros(at.as_micros() + (end.as_micros() - start.as_micros()));
        TimeWindow {
            start_time: time(at),
            end_time: time(shifted),
        }
    });
    Offer {
        max_capacity: ask_json(None, &most, None),
        capacity: vector(&most),
        window: TimeWindow {
            start_time: time(start),
            end_time: time(end),
        },
        earliest_window: earliest,
        truncated: refusal.truncated,
    }
}

/// Renders a refused create: 409 with the offer; other errors as they are.
pub(super) fn refused(error: AppError, ask: &Ask, start: Instant, end: Instant) -> ApiError {
    let extra = match &error {
        AppError::Rejected(Rejection::DoesNotFit(refusal)) => Some(Refused {
            offer: offer(ask, refusal, start, end),
        }),
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

/// The members every kind's create and update takes (see [`ComputeReservationRequest`]).
const COMMON_FIELDS: [&str; 8] = [
    "startTime",
    "endTime",
    "expiryTime",
    "zoneId",
    "providerId",
    "priority",
    "resourceGroupId",
    "reservationId",
];

/// The members only `kind`'s create and update take; any other member is refused.
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
) -> Result<(StatusCode, Json<ReservationDataEnvelope>), ApiError> {
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
        provider: super::wire::cloud_of(&body, &["providerId"])?,
        priority: priority(&body)?,
        grant: state.authz.policy().grant(&caller.0),
        project_id: caller.0.project_id.clone(),
        user_id: caller.0.user_id.clone(),
        horizon_micros: SEARCH_HORIZON_DEFAULT.as_micros(),
        idempotency: key.bind(&caller, &body),
        hold: None,
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
        Json(ReservationDataEnvelope {
            reservation_data: data,
        }),
    ))
}

/// Says in the answer that the priority asked for was lowered to the caller's grant.
pub(super) fn note_priority(data: &mut ReservationData, asked: u32, granted: u32) {
    if asked != granted {
        data.priority_lowered = Some(PriorityLowered {
            requested: asked,
            granted,
            reason: "priorities above the project's granted ceiling are lowered to it; an admin grants higher ones in the policy file".to_owned(),
        });
    }
}

/// The members of an ETSI reservation query ([`EtsiReservationQuery`]).
const QUERY_FIELDS: [&str; 1] = ["queryReservationFilter"];

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
) -> Result<Json<ReservationQueryResult>, ApiError> {
    let kind = kind_of(&kind)?;
    let body = documented(body, &QUERY_FIELDS);
    let ids = filter_ids(&body)?;
    let query = KindQuery {
        kind,
        ids: ids.map(|ids| ids.into_iter().map(LeaseId::new).collect()),
        project: caller.project_scope(),
    };
    let answer = state
        .berth
        .reservations_of_kind(query, |c, named| match named {
            Named::One(lease) => QueryResult::One(Box::new(reservation_data(c, lease))),
            Named::Many(leases) => {
                QueryResult::Many(leases.iter().map(|l| reservation_data(c, l)).collect())
            }
        })
        .await
        .map_err(|error| match error {
            AppError::Rejected(Rejection::LeaseNotFound(id)) => {
                ApiError::not_found(format!("Reservation {id} could not be found"))
            }
            other => other.into(),
        })?;
    Ok(Json(ReservationQueryResult {
        query_result: answer,
    }))
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
) -> Result<(StatusCode, Json<ReservationDataEnvelope>), ApiError> {
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
        Json(ReservationDataEnvelope {
            reservation_data: data,
        }),
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
    let change = open_ended(state, id, change).await?;
    let error = match state
        .berth
        .update_reservation(
            id,
            project.clone(),
            change.clone(),
            SEARCH_HORIZON_DEFAULT.as_micros(),
        )
        .await
    {
        Ok(lease) => return Ok(lease),
        Err(error) => error,
    };
    let current = state
        .berth
        .read_local(|c| c.lease(LeaseId::new(id)).cloned())
        .filter(|l| project.as_deref().is_none_or(|p| *p == *l.project_id))
        .ok_or_else(|| ApiError::not_found(format!("Reservation {id} could not be found")))?;
    let ask = change
        .ask
        .or_else(|| current.terms().map(|t| t.ask.clone()))
        .unwrap_or_default();
    let start = change.start.unwrap_or(current.start);
    let end = change.end.unwrap_or(current.end);
    Err(refused(error, &ask, start, end.max(start)))
}

/// A reservation made without an end lasts as long as the policy allows; an update that moves
/// its start and names no end keeps it so, rather than stretching it past what the policy
/// allows (the seed's updates give `startTime` alone).
async fn open_ended(
    state: &AppState,
    id: Uuid,
    mut change: ReservationChange,
) -> Result<ReservationChange, ApiError> {
    let (Some(start), None) = (change.start, change.end) else {
        return Ok(change);
    };
    let now = state.berth.now();
    change.end = state
        .berth
        .read(move |c| {
            let lease = c.lease(LeaseId::new(id))?;
            let policy = c.policy();
            (lease.end == policy.default_end(lease.start, lease.created_at))
                .then(|| policy.default_end(start, now))
        })
        .await?;
    Ok(change)
}

async fn terminate(
    State(state): State<AppState>,
    caller: Caller,
    Path((kind, id)): Path<(String, String)>,
) -> Result<Json<ReservationTerminated>, ApiError> {
    kind_of(&kind)?;
    let id = Uuid::parse_str(&id)
        .map_err(|_| ApiError::not_found(format!("Reservation {id} could not be found")))?;
    state
        .berth
        .cancel_reservation(id, caller.project_scope())
        .await?;
    Ok(Json(ReservationTerminated { reservation_id: id }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::fields::{documented_fields, sorted};
    use berth_api::promise::{
        ComputeReservationRequest, NetworkReservationRequest, StorageReservationRequest,
    };

    fn fields_of(kind: PromiseKind) -> Vec<String> {
        let mut fields = COMMON_FIELDS.to_vec();
        fields.extend(kind_fields(kind));
        sorted(&fields)
    }

    /// The members each kind's create and update accept are exactly those its request type
    /// documents, and the query's those of its type.
    #[test]
    fn reservation_fields_are_the_documented_ones() {
        assert_eq!(
            documented_fields::<ComputeReservationRequest>(),
            fields_of(PromiseKind::Compute)
        );
        assert_eq!(
            documented_fields::<NetworkReservationRequest>(),
            fields_of(PromiseKind::Network)
        );
        assert_eq!(
            documented_fields::<StorageReservationRequest>(),
            fields_of(PromiseKind::Storage)
        );
        assert_eq!(
            documented_fields::<EtsiReservationQuery>(),
            sorted(&QUERY_FIELDS)
        );
    }
}
