//! `/reservation/v1/leases`: create, list, show, update and delete leases; the lifecycle record
//! of a lease; and berth's availability search (`POST /reservation/v1/availability`).
//!
//! A lease is visible to its own project and to admins; to anyone else it does not exist (404).

use super::lease_wire::{
    self, date_field, lease_json, lease_update, record_json, reservation_objects, reservation_spec,
};
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, Caller};
use crate::http::idempotency::IdempotencyHeader;
use crate::http::rejection::refusal_json;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use berth_app::{CreateLease, SEARCH_HORIZON_DEFAULT_MICROS};
use berth_core::model::lease::{Lease, LeaseStatus};
use berth_core::{Catalog, Instant};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(Method::GET, "/reservation/v1/leases", Rule::PROJECT_READER, "List leases", list)
        .add(Method::POST, "/reservation/v1/leases", Rule::PROJECT_MEMBER, "Create a lease", create)
        .add(Method::GET, "/reservation/v1/leases/{lease_id}", Rule::PROJECT_READER, "Show a lease", show)
        .add(Method::PUT, "/reservation/v1/leases/{lease_id}", Rule::PROJECT_MEMBER, "Update a lease", update)
        .add(Method::DELETE, "/reservation/v1/leases/{lease_id}", Rule::PROJECT_MEMBER, "Delete a lease", delete)
        .add(
            Method::GET,
            "/reservation/v1/leases/{lease_id}/events", Rule::PROJECT_READER,
            "The lifecycle record of a lease (berth extension)",
            events,
        )
        .add(
            Method::POST,
            "/reservation/v1/availability", Rule::SYSTEM_READER,
            "Whether a lease request fits, the counter-offer, free capacity per zone (berth extension)",
            availability,
        );
}

fn visible(caller: &Caller, lease: &Lease) -> bool {
    caller.0.is_admin() || caller.0.project_id == lease.project_id
}

fn lease_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text)
        .map_err(|_| ApiError::not_found(format!("Lease {text} could not be found")))
}

/// The lease as the caller may see it, rendered.
fn render(catalog: &Catalog, caller: &Caller, id: Uuid) -> Result<Value, ApiError> {
    catalog
        .lease(id)
        .filter(|lease| visible(caller, lease))
        .map(|lease| json!({"lease": lease_json(lease, catalog)}))
        .ok_or_else(|| ApiError::not_found(format!("Lease {id} could not be found")))
}

async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let status = query
        .get("status")
        .map(|s| {
            LeaseStatus::parse(s).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid status {s}: one of PENDING, ACTIVE, TERMINATED, ERROR"
                ))
            })
        })
        .transpose()?;
    let project = query.get("project_id").cloned();
    if project.is_some() && !caller.0.is_admin() {
        return Err(ApiError::forbidden());
    }
    let leases = state
        .berth
        .read(move |catalog| {
            let mut leases: Vec<&Lease> = catalog
                .leases()
                .filter(|l| visible(&caller, l))
                .filter(|l| status.is_none_or(|s| l.status == s))
                .filter(|l| project.as_ref().is_none_or(|p| *p == l.project_id))
                .collect();
            leases.sort_by_key(|l| (l.created_at, l.id));
            leases
                .iter()
                .map(|l| lease_json(l, catalog))
                .collect::<Vec<_>>()
        })
        .await?;
    Ok(Json(json!({ "leases": leases })))
}

async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = lease_id(&id)?;
    Ok(Json(state.berth.read(|c| render(c, &caller, id)).await??))
}

fn name_field(body: &Map<String, Value>) -> Result<String, ApiError> {
    match body.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => Ok(name.clone()),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            Err(ApiError::bad_request("Missing parameter: name"))
        }
        Some(_) => Err(ApiError::bad_request("name must be a string")),
    }
}

/// The window of a request: `start_date` (default `now`) and `end_date`, neither in the past.
fn window(body: &Map<String, Value>, now: Instant) -> Result<(Instant, Instant), ApiError> {
    let start = match body.get("start_date") {
        None => return Err(ApiError::bad_request("Missing parameter: start_date")),
        Some(_) => date_field(body, "start_date", now)?.unwrap_or(now),
    };
    let end = date_field(body, "end_date", now)?
        .ok_or_else(|| ApiError::bad_request("Missing parameter: end_date"))?;
    // `now` is resolved before the request is queued; a minute of slack covers clock reads.
    if start.as_micros() < now.as_micros() - 60_000_000 {
        return Err(ApiError::bad_request(
            "Start date must be later than current date",
        ));
    }
    if end <= start {
        return Err(ApiError::bad_request(
            "End date must be later than start date.",
        ));
    }
    Ok((start, end))
}

fn horizon(body: &Map<String, Value>) -> Result<i64, ApiError> {
    match lease_wire::count(body, "search_horizon_days", 1)? {
        Some(days) => Ok(i64::try_from(days)
            .unwrap_or(i64::MAX / 2)
            .saturating_mul(86_400_000_000)),
        None => Ok(SEARCH_HORIZON_DEFAULT_MICROS),
    }
}

fn create_command(
    body: &Map<String, Value>,
    caller: &Caller,
    now: Instant,
) -> Result<CreateLease, ApiError> {
    let name = name_field(body)?;
    let (start, end) = window(body, now)?;
    if let Some(events) = body.get("events")
        && !events.is_array()
        && !events.is_null()
    {
        return Err(ApiError::bad_request("events must be a list"));
    }
    Ok(CreateLease {
        name,
        project_id: caller.0.project_id.clone(),
        user_id: caller.0.user_id.clone(),
        start,
        end,
        before_end: date_field(body, "before_end_date", now)?,
        reservations: reservation_objects(body)?
            .into_iter()
            .map(reservation_spec)
            .collect::<Result<_, _>>()?,
        horizon_micros: horizon(body)?,
        idempotency: None,
    })
}

async fn create(
    State(state): State<AppState>,
    caller: Caller,
    key: IdempotencyHeader,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let mut cmd = create_command(&body, &caller, state.berth.now())?;
    cmd.idempotency = key.bind(&caller, &body);
    let lease = state.berth.create_lease(cmd).await?;
    // The write was committed by this process: its catalog already holds it.
    let body = state
        .berth
        .read_local(|catalog| json!({"lease": lease_json(&lease, catalog)}));
    Ok((StatusCode::CREATED, Json(body)))
}

/// 404 unless the lease exists and the caller may see it.
async fn check_visible(state: &AppState, caller: &Caller, id: Uuid) -> Result<(), ApiError> {
    let seen = state
        .berth
        .read(|c| c.lease(id).is_some_and(|l| visible(caller, l)))
        .await?;
    match seen {
        true => Ok(()),
        false => Err(ApiError::not_found(format!(
            "Lease {id} could not be found"
        ))),
    }
}

async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    let id = lease_id(&id)?;
    check_visible(&state, &caller, id).await?;
    let now = state.berth.now();
    let update = lease_update(&body, now)?;
    if let Some(start) = update.start
        && start.as_micros() < now.as_micros() - 60_000_000
        && body.get("start_date").and_then(Value::as_str) != Some("now")
    {
        let unchanged = state.berth.read(|c| c.lease(id).map(|l| l.start)).await? == Some(start);
        if !unchanged {
            return Err(ApiError::bad_request(
                "Start date must be later than current date",
            ));
        }
    }
    let lease = state
        .berth
        .update_lease(id, update, horizon(&body)?)
        .await?;
    // The write was committed by this process: its catalog already holds it.
    let body = state
        .berth
        .read_local(|catalog| json!({"lease": lease_json(&lease, catalog)}));
    Ok(Json(body))
}

async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = lease_id(&id)?;
    check_visible(&state, &caller, id).await?;
    state.berth.delete_lease(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = lease_id(&id)?;
    // The record outlives the lease: admins may still read a deleted lease's record.
    let exists = state.berth.read(|c| c.lease(id).is_some()).await?;
    if exists || !caller.0.is_admin() {
        check_visible(&state, &caller, id).await?;
    }
    let records = state.berth.lease_records(id).await?;
    if records.is_empty() {
        return Err(ApiError::not_found(format!(
            "Lease {id} could not be found"
        )));
    }
    Ok(Json(json!({
        "events": records.iter().map(record_json).collect::<Vec<_>>(),
    })))
}

async fn availability(
    State(state): State<AppState>,
    _caller: Caller,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    let now = state.berth.now();
    let (start, end) = window(&body, now)?;
    let specs = reservation_objects(&body)?
        .into_iter()
        .map(reservation_spec)
        .collect::<Result<Vec<_>, _>>()?;
    let answer = state
        .berth
        .availability(start, end, specs, horizon(&body)?)
        .await?;
    let zones: Vec<Value> = answer
        .zones
        .iter()
        .map(|z| {
            json!({
                "availability_zone": z.zone,
                "hosts": z.hosts,
                "free_hosts": z.free_hosts,
                "free": z.free.iter().cloned().collect::<BTreeMap<String, u64>>(),
            })
        })
        .collect();
    let mut out = json!({
        "fits": answer.refusal.is_none(),
        "start_date": berth_api::time::lease_time(start.as_micros()),
        "end_date": berth_api::time::lease_time(end.as_micros()),
        "availability_zones": zones,
    });
    match &answer.refusal {
        Some(refusal) => {
            if let (Some(out), Value::Object(extra)) = (out.as_object_mut(), refusal_json(refusal)) {
                out.extend(extra);
            }
        }
        None => out["reservations"] = json!(answer.hosts.iter().map(|hosts| json!({
            "hosts": hosts.iter().map(|(h, n)| json!({"provider_uuid": h, "slots": n})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>()),
    }
    Ok(Json(out))
}
