//! `/reservation/v1/leases`: create, list, show, update and delete leases; the lifecycle record
//! of a lease; and berth's availability search (`POST /reservation/v1/availability`).
//!
//! A lease is visible to its own project and to admins; to anyone else it does not exist (404).

use super::lease_wire::{
    self, conform, date_field, lease_update, reservation_objects, reservation_spec, wire_lease,
    wire_record,
};
use crate::auth::Role;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, Caller};
use crate::http::idempotency::IdempotencyHeader;
use crate::http::rejection::refusal_json;
use crate::http::rejection::refusal_members;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use berth_api::blazar::{
    Availability, AvailabilityOutcome, AvailabilityRequest, Hold, LeaseEnvelope, LeaseList,
    LeaseRequest, OfferedHost, OfferedHosts, RecordList, ZoneCapacity,
};
use berth_api::time::lease_time;
use berth_app::{AskHold, CreateLease, HoldOutcome, SEARCH_HORIZON_DEFAULT};
use berth_core::limits;
use berth_core::model::lease::LeaseStatus;
use berth_core::query::leases::{self, LeaseQuery};
use berth_core::{Catalog, Instant, LeaseId, ProviderId, Span};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(Method::GET, "/reservation/v1/leases", Rule::PROJECT_READER, "List leases", list)
        .answers::<LeaseList>(200)
        .add(Method::POST, "/reservation/v1/leases", Rule::PROJECT_MEMBER, "Create a lease", create)
        .accepts::<LeaseRequest>()
        .answers::<LeaseEnvelope>(201)
        .answers::<LeaseEnvelope>(202)
        .add(Method::GET, "/reservation/v1/leases/{lease_id}", Rule::PROJECT_READER, "Show a lease", show)
        .answers::<LeaseEnvelope>(200)
        .add(Method::PUT, "/reservation/v1/leases/{lease_id}", Rule::PROJECT_MEMBER, "Update a lease", update)
        .accepts::<LeaseRequest>()
        .answers::<LeaseEnvelope>(200)
        .add(Method::DELETE, "/reservation/v1/leases/{lease_id}", Rule::PROJECT_MEMBER, "Delete a lease", delete)
        .answers_empty(204)
        .add(
            Method::GET,
            "/reservation/v1/leases/{lease_id}/events", Rule::PROJECT_READER,
            "The lifecycle record of a lease (berth extension)",
            events,
        )
        .answers::<RecordList>(200)
        .add(
            Method::POST,
            "/reservation/v1/availability", Rule::SYSTEM_READER,
            "Whether a lease request fits, the counter-offer, free capacity per zone (berth extension)",
            availability,
        )
        .changes_nothing()
        .accepts::<AvailabilityRequest>()
        .answers::<Availability>(200);
}

pub(super) fn lease_id(text: &str) -> Result<LeaseId, ApiError> {
    Uuid::parse_str(text)
        .map(LeaseId::new)
        .map_err(|_| ApiError::not_found(format!("Lease {text} could not be found")))
}

/// The lease as the caller may see it, rendered.
fn render(catalog: &Catalog, caller: &Caller, id: LeaseId) -> Result<LeaseEnvelope, ApiError> {
    leases::find(catalog, id, caller.project_scope().as_deref())
        .map(|lease| LeaseEnvelope {
            lease: wire_lease(lease, catalog),
            waitlisted: None,
            series: None,
        })
        .ok_or_else(|| ApiError::not_found(format!("Lease {id} could not be found")))
}

async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<LeaseList>, ApiError> {
    let status = query
        .get("status")
        .map(|s| {
            LeaseStatus::parse(s).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "Invalid status {s}: one of PENDING, ACTIVE, TERMINATED, ERROR, HELD, WAITING, EXPIRED"
                ))
            })
        })
        .transpose()?;
    let project = query.get("project_id").cloned();
    if project.is_some() && !caller.0.is_admin() {
        return Err(ApiError::forbidden());
    }
    let query = LeaseQuery {
        viewer: caller.project_scope(),
        project,
        status,
    };
    let leases = state
        .berth
        .leases(query, |catalog, lease| wire_lease(lease, catalog))
        .await?;
    Ok(Json(LeaseList { leases }))
}

async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<LeaseEnvelope>, ApiError> {
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

/// The name a request gives a date: Blazar's (`start_date`), or the seed's (`start`) when it
/// gives only that.
fn date_name<'a>(body: &Map<String, Value>, blazar: &'a str, seed: &'a str) -> &'a str {
    match (body.contains_key(blazar), body.contains_key(seed)) {
        (false, true) => seed,
        _ => blazar,
    }
}

/// The window of a request: `start_date` (default `now`) and `end_date`, neither in the past;
/// `start` and `end`, as the instance-reservation seed names them, when those are absent.
fn window(body: &Map<String, Value>, now: Instant) -> Result<(Instant, Instant), ApiError> {
    let start_name = date_name(body, "start_date", "start");
    let start = match body.get(start_name) {
        None => return Err(ApiError::bad_request("Missing parameter: start_date")),
        Some(_) => date_field(body, start_name, now)?.unwrap_or(now),
    };
    let end = date_field(body, date_name(body, "end_date", "end"), now)?
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

fn horizon(body: &Map<String, Value>) -> Result<Span, ApiError> {
    match lease_wire::count(body, "search_horizon_days", 1)? {
        Some(days) => Ok(Span::from_days(i64::try_from(days).unwrap_or(i64::MAX / 2))),
        None => Ok(SEARCH_HORIZON_DEFAULT),
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
    let before_end = date_field(body, "before_end_date", now)?;
    let reservations = reservation_objects(body)?
        .into_iter()
        .map(reservation_spec)
        .collect::<Result<_, _>>()?;
    let horizon = horizon(body)?;
    let hold = hold_id(body)?;
    conform::<LeaseRequest>(body)?;
    Ok(CreateLease {
        name,
        project_id: caller.0.project_id.clone(),
        user_id: caller.0.user_id.clone(),
        start,
        end,
        before_end,
        reservations,
        horizon,
        idempotency: None,
        hold,
    })
}

/// `hold_id` (berth): the hold a new lease is made from.
fn hold_id(body: &Map<String, Value>) -> Result<Option<LeaseId>, ApiError> {
    match body.get("hold_id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Uuid::parse_str(text)
            .map(|id| Some(LeaseId::new(id)))
            .map_err(|_| ApiError::bad_request(format!("hold_id: {text} is not a hold id"))),
        Some(_) => Err(ApiError::bad_request("hold_id must be a string")),
    }
}

/// `on_conflict` and `wait_until` (berth): when the lease may wait, until when. `wait_until`
/// is required with `on_conflict: "wait"` and refused without it; it must be in the future,
/// before the lease's end and at most `WAIT_PAST_START_MAX_MINUTES` after its start.
fn wait_until(
    body: &Map<String, Value>,
    (start, end): (Instant, Instant),
    now: Instant,
) -> Result<Option<Instant>, ApiError> {
    let wait = match body.get("on_conflict") {
        None | Some(Value::Null) => false,
        Some(Value::String(text)) if text == "refuse" => false,
        Some(Value::String(text)) if text == "wait" => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "on_conflict: {other} is not one of \"refuse\", \"wait\""
            )));
        }
    };
    let until = date_field(body, "wait_until", now)?;
    let until = match (wait, until) {
        (false, None) => return Ok(None),
        (false, Some(_)) => {
            return Err(ApiError::bad_request(
                "wait_until: given without on_conflict \"wait\"",
            ));
        }
        (true, None) => {
            return Err(ApiError::bad_request(
                "wait_until: required with on_conflict \"wait\"",
            ));
        }
        (true, Some(until)) => until,
    };
    let latest = start + Span::from_minutes(limits::WAIT_PAST_START_MAX_MINUTES);
    if until <= now {
        return Err(ApiError::bad_request("wait_until: in the past"));
    }
    if until >= end {
        return Err(ApiError::bad_request("wait_until: must be before end_date"));
    }
    if until > latest {
        return Err(ApiError::bad_request(format!(
            "wait_until: more than {} minutes after start_date (WAIT_PAST_START_MAX_MINUTES)",
            limits::WAIT_PAST_START_MAX_MINUTES
        )));
    }
    if body.get("hold_id").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::bad_request(
            "hold_id: a lease made from a hold does not wait",
        ));
    }
    Ok(Some(until))
}

/// `hold` and `hold_minutes` of an availability search (berth): how long to hold the offer,
/// or `None` for no hold.
fn hold_minutes(body: &Map<String, Value>) -> Result<Option<u32>, ApiError> {
    let hold = match body.get("hold") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(hold)) => Some(*hold),
        Some(_) => return Err(ApiError::bad_request("hold must be a boolean")),
    };
    let minutes = match body.get("hold_minutes") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_u64()
                .or_else(|| value.as_str().and_then(|t| t.parse().ok()))
                .and_then(|m| u32::try_from(m).ok())
                .filter(|m| (1..=limits::HOLD_MINUTES_MAX).contains(m))
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "hold_minutes: {value} is not a whole number of minutes from 1 to {} \
                         (HOLD_MINUTES_MAX)",
                        limits::HOLD_MINUTES_MAX
                    ))
                })?,
        ),
    };
    match (hold, minutes) {
        (Some(false), Some(_)) => Err(ApiError::bad_request("hold_minutes: given with hold false")),
        (Some(false) | None, None) => Ok(None),
        (_, Some(minutes)) => Ok(Some(minutes)),
        (Some(true), None) => Ok(Some(limits::HOLD_MINUTES_DEFAULT)),
    }
}

async fn create(
    State(state): State<AppState>,
    caller: Caller,
    key: IdempotencyHeader,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<(StatusCode, Json<LeaseEnvelope>), ApiError> {
    let now = state.berth.now();
    // Read first, so that a bad `recurrence` is refused naming it.
    let recurrence = super::series::recurrence(&body)?;
    let mut cmd = create_command(&body, &caller, now)?;
    let until = wait_until(&body, (cmd.start, cmd.end), now)?;
    cmd.idempotency = key.bind(&caller, &body);
    if let Some(rule) = recurrence {
        return super::series::create(&state, cmd, rule).await;
    }
    let (lease, waitlisted) = match until {
        None => (state.berth.create_lease(cmd).await?, None),
        Some(until) => state.berth.create_lease_or_wait(cmd, until).await?,
    };
    // The write was committed by this process: its catalog already holds it.
    let lease = state
        .berth
        .read_local(|catalog| wire_lease(&lease, catalog));
    // A waitlisted lease (a replayed key's too) is accepted, not yet created.
    let status = match lease.status == LeaseStatus::Waiting.as_str() {
        true => StatusCode::ACCEPTED,
        false => StatusCode::CREATED,
    };
    let waitlisted = waitlisted.as_ref().map(refusal_members);
    Ok((
        status,
        Json(LeaseEnvelope {
            lease,
            waitlisted,
            series: None,
        }),
    ))
}

/// 404 unless the lease exists and the caller may see it.
async fn check_visible(state: &AppState, caller: &Caller, id: LeaseId) -> Result<(), ApiError> {
    let scope = caller.project_scope();
    let seen = state
        .berth
        .read(|c| leases::find(c, id, scope.as_deref()).is_some())
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
) -> Result<Json<LeaseEnvelope>, ApiError> {
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
    let horizon = horizon(&body)?;
    conform::<LeaseRequest>(&body)?;
    let lease = state.berth.update_lease(id, update, horizon).await?;
    // The write was committed by this process: its catalog already holds it.
    let lease = state
        .berth
        .read_local(|catalog| wire_lease(&lease, catalog));
    Ok(Json(LeaseEnvelope {
        lease,
        waitlisted: None,
        series: None,
    }))
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
) -> Result<Json<RecordList>, ApiError> {
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
    Ok(Json(RecordList {
        events: records.iter().map(wire_record).collect(),
    }))
}

async fn availability(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<Json<Availability>, ApiError> {
    let now = state.berth.now();
    let (start, end) = window(&body, now)?;
    let specs = reservation_objects(&body)?
        .into_iter()
        .map(reservation_spec)
        .collect::<Result<Vec<_>, _>>()?;
    let horizon = horizon(&body)?;
    let hold = match hold_minutes(&body)? {
        Some(minutes) => Some(ask_hold(&caller, minutes)?),
        None => None,
    };
    conform::<AvailabilityRequest>(&body)?;
    let answer = state
        .berth
        .availability(start, end, specs, horizon, hold)
        .await?;
    let availability_zones = answer
        .zones
        .iter()
        .map(|z| ZoneCapacity {
            availability_zone: z.zone.clone(),
            hosts: z.hosts,
            free_hosts: z.free_hosts,
            free: z.free.iter().cloned().collect(),
        })
        .collect();
    let outcome = match &answer.refusal {
        Some(refusal) => match refusal_json(refusal) {
            Value::Object(refused) => AvailabilityOutcome::Refused(refused),
            _ => unreachable!("invariant: a refusal is a JSON object"),
        },
        None => AvailabilityOutcome::Fits {
            reservations: answer.hosts.iter().map(|hosts| offered(hosts)).collect(),
        },
    };
    Ok(Json(Availability {
        fits: answer.refusal.is_none(),
        start_date: lease_time(start.as_micros()),
        end_date: lease_time(end.as_micros()),
        availability_zones,
        outcome,
        hold: answer.hold.as_ref().map(wire_hold),
    }))
}

/// A hold is a write in the caller's project: it needs the member (or admin) role there.
fn ask_hold(caller: &Caller, minutes: u32) -> Result<AskHold, ApiError> {
    let writes = caller
        .0
        .roles
        .iter()
        .any(|role| matches!(role, Role::Member | Role::Admin));
    if !writes || !caller.0.has_project() {
        return Err(ApiError::forbidden());
    }
    Ok(AskHold {
        project_id: caller.0.project_id.clone(),
        user_id: caller.0.user_id.clone(),
        minutes,
    })
}

/// The hold's wire form.
fn wire_hold(outcome: &HoldOutcome) -> Hold {
    match outcome {
        HoldOutcome::Held(lease) => Hold {
            held: true,
            hold_id: Some(lease.id.uuid()),
            start_date: Some(lease_time(lease.start.as_micros())),
            end_date: Some(lease_time(lease.end.as_micros())),
            lapses_at: lease.lapses_at.map(|at| lease_time(at.as_micros())),
            reservations: lease
                .reservations
                .iter()
                .map(|r| offered(&r.hosts))
                .collect(),
            reason: None,
        },
        HoldOutcome::NotHeld(reason) => Hold {
            held: false,
            hold_id: None,
            start_date: None,
            end_date: None,
            lapses_at: None,
            reservations: Vec::new(),
            reason: Some(reason.clone()),
        },
    }
}

/// The hosts one reservation would take.
fn offered(hosts: &[(ProviderId, u32)]) -> OfferedHosts {
    OfferedHosts {
        hosts: hosts
            .iter()
            .map(|(provider_uuid, slots)| OfferedHost {
                provider_uuid: provider_uuid.uuid(),
                slots: *slots,
            })
            .collect(),
    }
}
