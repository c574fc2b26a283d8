//! Promise's reservation RPCs: `create-reservation`, `update-reservation`,
//! `cancel-reservation` and `query-reservation`, with the `capacity` vector (`cores`, `ram`,
//! `instances`, `addresses`, and berth's `gigabytes`) and the `{"result", "message"}` envelope.

use super::capacity::rpc_window;
use super::reservations::{note_priority, priority, refused, reservation_data, update_with};
use super::wire::{
    RpcInput, cloud_of, count, date, documented, flag, object, rpc_error, size, text, time, uuids,
};
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
    CancelReservation as CancelRequest, CreateReservation as CreateRequest,
    HeldStep as HeldStepBody, HeldVector, Names, Nothing, QueryReservation as QueryRequest,
    ReservationAccepted, ReservationUpdated, ReservationsMatched, RpcAnswer,
    UpdateReservation as UpdateRequest,
};
use berth_app::{CreateReservation, SEARCH_HORIZON_DEFAULT};
use berth_core::Instant;
use berth_core::decide::promise::ReservationChange;
use berth_core::model::promise::{Ask, PoolAsk, PromiseKind, StorageAsk};
use berth_core::query::promise::{HeldStep, ReservationQuery, WindowScope};
use serde_json::{Map, Value};
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
        .changes_nothing()
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
const CREATE_FIELDS: [&str; 9] = [
    "capacity",
    "start",
    "end",
    "expiry",
    "zone",
    "priority",
    "provider-id",
    "source",
    "hold_id",
];

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

/// The hold a reservation is made from (`hold_id`, berth), if any.
fn hold_of(body: &Map<String, Value>) -> Result<Option<uuid::Uuid>, ApiError> {
    text(body, "hold_id")?
        .map(|text| {
            text.trim()
                .parse()
                .map_err(|_| ApiError::bad_request(format!("hold_id {text} is not a hold id")))
        })
        .transpose()
}

async fn create(
    State(state): State<AppState>,
    caller: Caller,
    key: Result<IdempotencyHeader, ApiError>,
    RpcInput(body): RpcInput,
) -> Result<Json<RpcAnswer<ReservationAccepted>>, ApiError> {
    let now = state.berth.now();
    let idempotency = key.map_err(rpc_error)?.bind(&caller, &body);
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
            provider: cloud_of(&body, &["provider-id", "source"])?,
            priority: priority(&body)?,
            grant: state.authz.policy().grant(&caller.0),
            project_id: caller.0.project_id.clone(),
            user_id: caller.0.user_id.clone(),
            horizon_micros: SEARCH_HORIZON_DEFAULT.as_micros(),
            idempotency,
            hold: hold_of(&body)?,
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
            reservation_id: lease.id.uuid(),
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
    RpcInput(body): RpcInput,
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
    RpcInput(body): RpcInput,
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

/// The `query-reservation` of `body`, for `project`'s reservations.
fn reservation_query(
    body: &Map<String, Value>,
    now: Instant,
    project: Option<String>,
) -> Result<ReservationQuery, ApiError> {
    let window = match object(body, "window")? {
        None => None,
        Some(w) => {
            let scope = match text(w, "scope")?.as_deref() {
                None | Some("inclusive") => WindowScope::Inclusive,
                Some("exclusive") => WindowScope::Exclusive,
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "window.scope {other} is unknown: use inclusive or exclusive"
                    )));
                }
            };
            Some((rpc_window(body, now)?, scope))
        }
    };
    let elements = object(body, "elements")?.cloned().unwrap_or_default();
    Ok(ReservationQuery {
        project,
        zone: text(body, "zone")?,
        window,
        without: uuids(body, "without")?,
        some: element_names(&elements, "some")?,
        every: element_names(&elements, "every")?,
        utilization: flag(body, "show-utilization")?.unwrap_or(true),
    })
}

fn held_json(step: &HeldStep) -> HeldStepBody {
    HeldStepBody {
        timestamp: time(step.at),
        count: step.count,
        capacity: HeldVector {
            cores: step.cores,
            ram: step.ram,
            instances: step.instances,
            addresses: step.addresses,
        },
    }
}

async fn query(
    State(state): State<AppState>,
    caller: Caller,
    RpcInput(body): RpcInput,
) -> Result<Json<RpcAnswer<ReservationsMatched>>, ApiError> {
    let body = documented(body, &QUERY_FIELDS);
    let now = state.berth.now();
    let query = reservation_query(&body, now, caller.project_scope()).map_err(rpc_error)?;
    let matched = state.berth.matching_reservations(query).await?;
    Ok(Json(RpcAnswer::ok(
        "reservations matched",
        ReservationsMatched {
            reservations: matched.reservations.iter().map(|id| id.uuid()).collect(),
            utilization: matched.utilization.iter().map(held_json).collect(),
        },
    )))
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
