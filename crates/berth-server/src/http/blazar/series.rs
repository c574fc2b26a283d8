//! Recurring leases (berth): `recurrence` on `POST /reservation/v1/leases` creates a series,
//! one lease per occurrence, admitted all or none; `/reservation/v1/lease-series/{series_id}`
//! shows, renames, moves and cancels the whole series. One occurrence is changed or cancelled through
//! its own lease.
//!
//! A series is visible to its own project and to admins, as its leases are; to anyone else it
//! does not exist (404).

use super::lease_wire::{typed, wire_lease, wire_series};
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, Caller};
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use berth_api::blazar::{LeaseEnvelope, SeriesEnvelope, SeriesRequest};
use berth_app::{CreateLease, CreateSeries};
use berth_core::decide::lease::Shift;
use berth_core::query::leases;
use berth_core::{Instant, Span, limits};
use serde_json::{Map, Value};
use uuid::Uuid;

const SERIES: &str = "/reservation/v1/lease-series/{series_id}";

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            SERIES,
            Rule::PROJECT_READER,
            "Show a recurring lease's occurrences (berth extension)",
            show,
        )
        .answers::<SeriesEnvelope>(200)
        .add(
            Method::PUT,
            SERIES,
            Rule::PROJECT_MEMBER,
            "Rename or move every occurrence of a recurring lease (berth extension)",
            rename,
        )
        .accepts::<SeriesRequest>()
        .answers::<SeriesEnvelope>(200)
        .add(
            Method::DELETE,
            SERIES,
            Rule::PROJECT_MEMBER,
            "Cancel every occurrence of a recurring lease (berth extension)",
            delete,
        )
        .answers_empty(204);
}

/// `recurrence` of a lease create: the rule, or `None` for an ordinary lease. A recurring
/// lease does not wait and is not made from a hold.
pub(super) fn recurrence(body: &Map<String, Value>) -> Result<Option<String>, ApiError> {
    let rule = match body.get("recurrence") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(rule)) if !rule.trim().is_empty() => rule.clone(),
        Some(_) => {
            return Err(ApiError::bad_request(
                "recurrence must be a non-empty string (an RRULE such as FREQ=WEEKLY;COUNT=4)",
            ));
        }
    };
    if body.get("on_conflict").and_then(Value::as_str) == Some("wait") {
        return Err(ApiError::bad_request(
            "recurrence: a recurring lease does not wait (on_conflict \"wait\")",
        ));
    }
    if body.get("hold_id").is_some_and(|v| !v.is_null()) {
        return Err(ApiError::bad_request(
            "recurrence: a recurring lease is not made from a hold (hold_id)",
        ));
    }
    Ok(Some(rule))
}

/// Creates the series `cmd` and `rule` ask for: 201 with its first occurrence as the lease and
/// every occurrence in `series`.
pub(super) async fn create(
    state: &AppState,
    cmd: CreateLease,
    rule: String,
) -> Result<(StatusCode, Json<LeaseEnvelope>), ApiError> {
    let created = state
        .berth
        .create_series(CreateSeries { lease: cmd, rule })
        .await?;
    // The write was committed by this process: its catalog already holds it.
    let (first, series) = state.berth.read_local(|catalog| {
        let leases = created.iter().map(|l| wire_lease(l, catalog)).collect();
        (
            created.first().map(|l| wire_lease(l, catalog)),
            wire_series(leases, created.first()),
        )
    });
    let lease = first.ok_or_else(|| ApiError::not_found("The series has no occurrence left"))?;
    Ok((
        StatusCode::CREATED,
        Json(LeaseEnvelope {
            lease,
            waitlisted: None,
            series,
        }),
    ))
}

fn series_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| not_found(text))
}

fn not_found(id: impl std::fmt::Display) -> ApiError {
    ApiError::not_found(format!("Lease series {id} could not be found"))
}

/// The series as the caller may see it, rendered; 404 when none of it is visible.
async fn render(state: &AppState, caller: &Caller, id: Uuid) -> Result<SeriesEnvelope, ApiError> {
    let scope = caller.project_scope();
    let rendered = state
        .berth
        .read(|catalog| {
            let visible: Vec<_> = catalog
                .series(id)
                .filter(|l| leases::find(catalog, l.id, scope.as_deref()).is_some())
                .collect();
            let wire = visible.iter().map(|l| wire_lease(l, catalog)).collect();
            wire_series(wire, visible.first().copied())
        })
        .await?;
    rendered
        .map(|series| SeriesEnvelope { series })
        .ok_or_else(|| not_found(id))
}

async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<SeriesEnvelope>, ApiError> {
    let id = series_id(&id)?;
    Ok(Json(render(&state, &caller, id).await?))
}

async fn rename(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<Json<SeriesEnvelope>, ApiError> {
    let id = series_id(&id)?;
    render(&state, &caller, id).await?;
    let request = typed::<SeriesRequest>(&body)?;
    let name = match &request.name {
        Some(name) if name.trim().is_empty() => {
            return Err(ApiError::bad_request("name must not be empty"));
        }
        other => other.clone(),
    };
    let shift = match request.shift_minutes {
        None => None,
        Some(minutes) => {
            let first = state
                .berth
                .read(|c| c.series(id).map(|l| l.start).min())
                .await?;
            Some(shift(first, state.berth.now(), minutes)?)
        }
    };
    if name.is_none() && shift.is_none() {
        return Err(ApiError::bad_request(
            "Missing parameter: name or shift_minutes",
        ));
    }
    if let Some(shift) = shift {
        state.berth.shift_series(id, shift).await?;
    }
    if let Some(name) = name {
        state.berth.rename_series(id, name).await?;
    }
    Ok(Json(render(&state, &caller, id).await?))
}

/// `shift_minutes` as a move of the series: not zero, within `RECURRENCE_SHIFT_DAYS_MAX`, and
/// not moving the first occurrence (starting at `first`) into the past.
fn shift(first: Option<Instant>, now: Instant, minutes: i64) -> Result<Shift, ApiError> {
    let bound = limits::RECURRENCE_SHIFT_DAYS_MAX * 24 * 60;
    if minutes == 0 || !(-bound..=bound).contains(&minutes) {
        return Err(ApiError::bad_request(format!(
            "shift_minutes: {minutes} is not a non-zero number of minutes within {bound} \
             (RECURRENCE_SHIFT_DAYS_MAX)"
        )));
    }
    let span = Span::from_minutes(minutes.abs());
    let shift = match minutes > 0 {
        true => Shift::Later(span),
        false => Shift::Earlier(span),
    };
    if let (Shift::Earlier(span), Some(first)) = (shift, first)
        && first - span < now
    {
        return Err(ApiError::bad_request(
            "shift_minutes: the first occurrence would start in the past",
        ));
    }
    Ok(shift)
}

async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = series_id(&id)?;
    render(&state, &caller, id).await?;
    state.berth.delete_series(id).await?;
    Ok(StatusCode::NO_CONTENT)
}
