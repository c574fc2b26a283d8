//! Promise's reservation RPCs: `create-reservation`, `update-reservation`,
//! `cancel-reservation` and `query-reservation`, with the `capacity` vector (`cores`, `ram`,
//! `instances`, `addresses`, and berth's `gigabytes`) and the `{"result", "message"}` envelope.

use super::capacity::rpc_window;
use super::reservations::{note_priority, priority, refused, reservation_data, update_with};
use super::wire::{Input, count, date, documented, object, rpc_error, size, text, time, uuids};
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::idempotency::IdempotencyHeader;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::State;
use axum::http::Method;
use berth_api::promise::{
    CancelReservation as CancelRequest, CreateReservation as CreateRequest, HeldStep, HeldVector,
    Names, Nothing, QueryReservation as QueryRequest, ReservationAccepted, ReservationUpdated,
    ReservationsMatched, RpcAnswer, UpdateReservation as UpdateRequest,
};
use berth_app::{CreateReservation, SEARCH_HORIZON_DEFAULT_MICROS};
use berth_core::decide::promise::ReservationChange;
use berth_core::model::lease::{Lease, ReservationSpec};
use berth_core::model::ledger::Window;
use berth_core::model::promise::{Ask, PoolAsk, PromiseKind, StorageAsk};
use berth_core::{Catalog, Instant};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::POST,
            "/promise/create-reservation",
            Rule::PROJECT_MEMBER,
            "Create a reservation (Promise RPC)",
            create,
        )
        .accepts::<CreateRequest>()
        .answers::<RpcAnswer<ReservationAccepted>>(200)
        .add(
            Method::POST,
            "/promise/update-reservation",
            Rule::PROJECT_MEMBER,
            "Update a reservation (Promise RPC)",
            update,
        )
        .accepts::<UpdateRequest>()
        .answers::<RpcAnswer<ReservationUpdated>>(200)
        .add(
            Method::POST,
            "/promise/cancel-reservation",
            Rule::PROJECT_MEMBER,
            "Cancel a reservation (Promise RPC)",
            cancel,
        )
        .accepts::<CancelRequest>()
        .answers::<RpcAnswer<Nothing>>(200)
        .add(
            Method::POST,
            "/promise/query-reservation",
            Rule::PROJECT_READER,
            "Query reservations (Promise RPC)",
            query,
        )
        .accepts::<QueryRequest>()
        .answers::<RpcAnswer<ReservationsMatched>>(200);
}

/// The members of a `capacity` vector (`berth_api::promise::CapacityRequest`); any other is
/// refused.
const CAPACITY_FIELDS: [&str; 6] = [
    "cores",
    "ram",
    "instances",
    "addresses",
    "gigabytes",
    "volumes",
];

/// The members of `create-reservation` ([`CreateRequest`]).
const CREATE_FIELDS: [&str; 6] = ["capacity", "start", "end", "expiry", "zone", "priority"];

/// The members of `update-reservation` ([`UpdateRequest`]).
const UPDATE_FIELDS: [&str; 5] = ["reservation-id", "capacity", "start", "end", "expiry"];

/// The members of `cancel-reservation` ([`CancelRequest`]).
const CANCEL_FIELDS: [&str; 1] = ["reservation-id"];

/// The members of `query-reservation` ([`QueryRequest`]).
const QUERY_FIELDS: [&str; 5] = ["window", "zone", "without", "elements", "show-utilization"];

/// The ask of a `capacity` vector; `None` when absent.
fn capacity_ask(body: &Map<String, Value>) -> Result<Option<Ask>, ApiError> {
    let Some(capacity) = object(body, "capacity")? else {
        return Ok(None);
    };
    if let Some(unknown) = capacity
        .keys()
        .find(|k| !CAPACITY_FIELDS.contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "Unknown capacity member {unknown}: use cores, ram, instances, addresses, gigabytes"
        )));
    }
    let pool = PoolAsk {
        cores: count(capacity, "cores")?.unwrap_or(0),
        ram_mb: size(capacity, "ram")?.unwrap_or(0),
        instances: count(capacity, "instances")?.unwrap_or(0),
    };
    let gigabytes = size(capacity, "gigabytes")?.unwrap_or(0);
    let ask = Ask {
        pool: (pool != PoolAsk::default()).then_some(pool),
        public_ips: count(capacity, "addresses")?.unwrap_or(0),
        storage: (gigabytes > 0).then_some(StorageAsk {
            size_gb: gigabytes,
            snapshots: 0,
            volumes: 1,
        }),
        ..Ask::default()
    };
    match ask.is_empty() {
        true => Err(ApiError::bad_request(
            "capacity asks for nothing: give cores, ram, instances, addresses or gigabytes",
        )),
        false => Ok(Some(ask)),
    }
}

async fn create(
    State(state): State<AppState>,
    caller: Caller,
    key: IdempotencyHeader,
    Input(body): Input,
) -> Result<Json<RpcAnswer<ReservationAccepted>>, ApiError> {
    let now = state.berth.now();
    let idempotency = key.bind(&caller, &body);
    let body = documented(body, &CREATE_FIELDS);
    let parsed = (|| {
        let ask =
            capacity_ask(&body)?.ok_or_else(|| ApiError::bad_request("capacity is missing"))?;
        Ok::<_, ApiError>(CreateReservation {
            kind: PromiseKind::Capacity,
            ask,
            start: date(&body, "start", now)?,
            end: date(&body, "end", now)?,
            expiry: date(&body, "expiry", now)?,
            zone: text(&body, "zone")?,
            priority: priority(&body)?,
            grant: state.authz.policy().grant(&caller.0),
            project_id: caller.0.project_id.clone(),
            user_id: caller.0.user_id.clone(),
            horizon_micros: SEARCH_HORIZON_DEFAULT_MICROS,
            idempotency,
        })
    })()
    .map_err(rpc_error)?;
    let ask = parsed.ask.clone();
    let (start, end) = (parsed.start.unwrap_or(now), parsed.end.unwrap_or(now));
    let asked = parsed.priority;
    let lease = state
        .berth
        .create_reservation(parsed)
        .await
        .map_err(|e| rpc_error(refused(e, &ask, start, end.max(start))))?;
    let mut data = state.berth.read_local(|c| reservation_data(c, &lease));
    note_priority(&mut data, asked, lease.priority());
    Ok(Json(RpcAnswer::ok(
        "reservation request accepted",
        ReservationAccepted {
            reservation_id: lease.id,
            reservation: data,
        },
    )))
}

fn rpc_id(body: &Map<String, Value>) -> Result<Uuid, ApiError> {
    let text = text(body, "reservation-id")?
        .ok_or_else(|| ApiError::bad_request("reservation-id is missing"))?;
    let id = text.rsplit_once(':').map_or(text.as_str(), |(_, id)| id);
    Uuid::parse_str(id)
        .map_err(|_| ApiError::not_found(format!("Reservation {text} could not be found")))
}

async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Input(body): Input,
) -> Result<Json<RpcAnswer<ReservationUpdated>>, ApiError> {
    let body = documented(body, &UPDATE_FIELDS);
    let now = state.berth.now();
    let (id, change) = (|| {
        Ok::<_, ApiError>((
            rpc_id(&body)?,
            ReservationChange {
                start: date(&body, "start", now)?,
                end: date(&body, "end", now)?,
                expiry: date(&body, "expiry", now)?,
                ask: capacity_ask(&body)?,
            },
        ))
    })()
    .map_err(rpc_error)?;
    let lease = update_with(&state, &caller, id, change)
        .await
        .map_err(rpc_error)?;
    let data = state.berth.read_local(|c| reservation_data(c, &lease));
    Ok(Json(RpcAnswer::ok(
        "reservation update successful",
        ReservationUpdated { reservation: data },
    )))
}

async fn cancel(
    State(state): State<AppState>,
    caller: Caller,
    Input(body): Input,
) -> Result<Json<RpcAnswer<Nothing>>, ApiError> {
    let body = documented(body, &CANCEL_FIELDS);
    let id = rpc_id(&body).map_err(rpc_error)?;
    state
        .berth
        .cancel_reservation(id, caller.project_scope())
        .await
        .map_err(|e| rpc_error(e.into()))?;
    Ok(Json(RpcAnswer::ok("reservation canceled", Nothing {})))
}

/// Names a lease answers to as a resource element: its hosts (uuid or name) and addresses.
fn elements(catalog: &Catalog, lease: &Lease) -> Vec<String> {
    let mut names = Vec::new();
    for r in &lease.reservations {
        for (host, _) in &r.hosts {
            names.push(host.to_string());
            if let Some(p) = catalog.provider(*host) {
                names.push(p.name().to_owned());
            }
        }
        for fip in &r.floating_ips {
            names.push(fip.to_string());
            if let Some(f) = catalog.floating_ip(*fip) {
                names.push(f.address.clone());
            }
        }
    }
    names
}

/// Element names ([`Names`]): a list's `Kind:`-prefixed ids are taken without the prefix.
fn element_names(body: &Map<String, Value>, field: &str) -> Result<Vec<String>, ApiError> {
    match super::wire::names(body, field) {
        Ok(None) => Ok(Vec::new()),
        Ok(Some(Names::Joined(t))) => Ok(t.split(',').map(|s| s.trim().to_owned()).collect()),
        Ok(Some(Names::List(items))) => Ok(items
            .iter()
            .map(|s| {
                let s = s.trim();
                s.rsplit_once(':').map_or(s, |(_, id)| id).to_owned()
            })
            .collect()),
        Err(()) => Err(ApiError::bad_request(format!(
            "elements.{field} must list ids"
        ))),
    }
}

/// A `query-reservation` filter.
struct Filter {
    zone: Option<String>,
    window: Option<(Window, bool)>,
    without: Vec<Uuid>,
    some: Vec<String>,
    every: Vec<String>,
}

impl Filter {
    fn parse(body: &Map<String, Value>, now: Instant) -> Result<Filter, ApiError> {
        let window = match object(body, "window")? {
            None => None,
            Some(w) => {
                let exclusive = match text(w, "scope")?.as_deref() {
                    None | Some("inclusive") => false,
                    Some("exclusive") => true,
                    Some(other) => {
                        return Err(ApiError::bad_request(format!(
                            "window.scope {other} is unknown: use inclusive or exclusive"
                        )));
                    }
                };
                Some((rpc_window(body, now)?, exclusive))
            }
        };
        let elements = object(body, "elements")?.cloned().unwrap_or_default();
        Ok(Filter {
            zone: text(body, "zone")?,
            window,
            without: uuids(body, "without")?,
            some: element_names(&elements, "some")?,
            every: element_names(&elements, "every")?,
        })
    }

    fn matches(&self, catalog: &Catalog, lease: &Lease) -> bool {
        if self.without.contains(&lease.id) {
            return false;
        }
        if let Some(zone) = &self.zone {
            let in_zone = lease.terms.as_ref().and_then(|t| t.zone.as_ref()) == Some(zone)
                || lease.reservations.iter().any(|r| {
                    r.hosts.iter().any(|(h, _)| {
                        catalog.provider(*h).and_then(|p| p.availability_zone()) == Some(zone)
                    })
                });
            if !in_zone {
                return false;
            }
        }
        if let Some((w, exclusive)) = &self.window {
            let starts = w.contains(lease.start);
            let ends = lease.end > w.start() && lease.end <= w.end();
            let hit = match exclusive {
                true => starts && ends,
                false => starts || ends || lease.window().overlaps(w),
            };
            if !hit {
                return false;
            }
        }
        if !self.some.is_empty() || !self.every.is_empty() {
            let held = elements(catalog, lease);
            if !self.some.is_empty() && !self.some.iter().any(|e| held.contains(e)) {
                return false;
            }
            if !self.every.iter().all(|e| held.contains(e)) {
                return false;
            }
        }
        true
    }
}

/// What a lease holds, as a capacity vector.
fn held(catalog: &Catalog, lease: &Lease) -> [i64; 4] {
    let mut v = [0i64; 4];
    for r in &lease.reservations {
        match &r.spec {
            ReservationSpec::Instance {
                vcpus, memory_mb, ..
            } => {
                let slots: i64 = r.hosts.iter().map(|(_, n)| i64::from(*n)).sum();
                v[0] += *vcpus as i64 * slots;
                v[1] += *memory_mb as i64 * slots;
                v[2] += if *vcpus > 0 { slots } else { 0 };
            }
            ReservationSpec::Host { .. } => {
                for (host, _) in &r.hosts {
                    let total = |name: &str| {
                        catalog.provider(*host).map_or(0, |p| {
                            berth_core::ResourceClass::parse(name)
                                .and_then(|c| p.inventories().get(&c).map(|i| i.capacity() as i64))
                                .unwrap_or(0)
                        })
                    };
                    v[0] += total("VCPU");
                    v[1] += total("MEMORY_MB");
                }
            }
            ReservationSpec::FloatingIp { .. } => v[3] += r.floating_ips.len() as i64,
        }
    }
    v
}

/// The step function of what the matching leases hold over the window (or their whole span).
fn utilization(catalog: &Catalog, leases: &[&Lease], window: Option<Window>) -> Vec<HeldStep> {
    let mut deltas: BTreeMap<Instant, ([i64; 4], i64)> = BTreeMap::new();
    for lease in leases.iter().filter(|l| l.holds_capacity()) {
        let (from, until) = match window {
            Some(w) => (lease.start.max(w.start()), lease.end.min(w.end())),
            None => (lease.start, lease.end),
        };
        if from >= until {
            continue;
        }
        let v = held(catalog, lease);
        for (at, sign) in [(from, 1), (until, -1)] {
            let entry = deltas.entry(at).or_default();
            for (total, amount) in entry.0.iter_mut().zip(v) {
                *total += sign * amount;
            }
            entry.1 += sign;
        }
    }
    let mut level = [0i64; 4];
    let mut count = 0;
    deltas
        .into_iter()
        .map(|(at, (d, n))| {
            for (total, delta) in level.iter_mut().zip(d) {
                *total += delta;
            }
            count += n;
            HeldStep {
                timestamp: time(at),
                count,
                capacity: HeldVector {
                    cores: level[0],
                    ram: level[1],
                    instances: level[2],
                    addresses: level[3],
                },
            }
        })
        .collect()
}

async fn query(
    State(state): State<AppState>,
    caller: Caller,
    Input(body): Input,
) -> Result<Json<RpcAnswer<ReservationsMatched>>, ApiError> {
    let body = documented(body, &QUERY_FIELDS);
    let now = state.berth.now();
    let filter = Filter::parse(&body, now).map_err(rpc_error)?;
    let show = super::wire::flag(&body, "show-utilization")
        .map_err(rpc_error)?
        .unwrap_or(true);
    let project = caller.project_scope();
    let answer = state
        .berth
        .read(move |c| {
            let mut leases: Vec<&Lease> = c
                .leases()
                .filter(|l| project.as_deref().is_none_or(|p| p == l.project_id))
                .filter(|l| filter.matches(c, l))
                .collect();
            leases.sort_by_key(|l| (l.start, l.id));
            let ids: Vec<Uuid> = leases.iter().map(|l| l.id).collect();
            let steps = match show {
                true => utilization(c, &leases, filter.window.map(|(w, _)| w)),
                false => Vec::new(),
            };
            RpcAnswer::ok(
                "reservations matched",
                ReservationsMatched {
                    reservations: ids,
                    utilization: steps,
                },
            )
        })
        .await?;
    Ok(Json(answer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::fields::{documented_fields, sorted};
    use berth_api::promise::CapacityRequest;

    /// The members the reservation RPCs read are exactly those their wire types document.
    #[test]
    fn rpc_fields_are_the_documented_ones() {
        assert_eq!(documented_fields::<CreateRequest>(), sorted(&CREATE_FIELDS));
        assert_eq!(documented_fields::<UpdateRequest>(), sorted(&UPDATE_FIELDS));
        assert_eq!(documented_fields::<CancelRequest>(), sorted(&CANCEL_FIELDS));
        assert_eq!(documented_fields::<QueryRequest>(), sorted(&QUERY_FIELDS));
        assert_eq!(
            documented_fields::<CapacityRequest>(),
            sorted(&CAPACITY_FIELDS)
        );
    }
}
