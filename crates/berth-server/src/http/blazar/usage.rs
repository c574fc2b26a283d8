//! `GET /reservation/v1/usage` (berth extension): the usage report, as JSON or CSV. A project
//! reads its own usage; an admin any project's, or every project's.

use super::lease_wire::date_field;
use super::leases::lease_id;
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use berth_api::blazar::{
    ClassUtilization, LeaseUtilization, UsageEnvelope, UsageReport, UsageRow, UtilizationEnvelope,
    UtilizationStep,
};
use berth_api::time::lease_time;
use berth_core::Instant;
use berth_core::model::ledger::Window;
use berth_core::query::usage::{UNIT_HOUR, UnitMicros};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/reservation/v1/usage", Rule::PROJECT_READER,
            "Usage by project and resource class over a period: reserved, consumed, lent, idle, on-demand and preemptible unit-hours, as JSON or CSV (berth extension)",
            usage,
        )
        .answers::<UsageEnvelope>(200)
        .add(
            Method::GET,
            "/reservation/v1/leases/{lease_id}/utilization", Rule::PROJECT_READER,
            "How much of what a lease held its consumers used, over time (berth extension)",
            utilization,
        )
        .answers::<UtilizationEnvelope>(200);
}

async fn utilization(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<UtilizationEnvelope>, ApiError> {
    let id = lease_id(&id)?;
    let found = state
        .berth
        .lease_utilization(id, caller.project_scope().as_deref())
        .await?;
    let time = |at: Instant| lease_time(at.as_micros());
    let classes = found
        .classes
        .into_iter()
        .map(|class| ClassUtilization {
            resource_class: class.class.as_str().to_owned(),
            reserved_hours: hours(class.reserved),
            consumed_hours: hours(class.consumed),
            utilization: (class.reserved > 0)
                .then(|| hours(class.consumed) / hours(class.reserved)),
            steps: class
                .steps
                .into_iter()
                .map(|(at, reserved, consumed)| UtilizationStep {
                    time: time(at),
                    reserved,
                    consumed,
                })
                .collect(),
        })
        .collect();
    Ok(Json(UtilizationEnvelope {
        utilization: LeaseUtilization {
            lease_id: id.to_string(),
            start: found.period.map(|p| time(p.start())),
            counted_until: found.period.map(|p| time(p.end())),
            classes,
        },
    }))
}

/// The query parameters the report takes.
const PARAMETERS: [&str; 4] = ["start", "end", "project_id", "format"];

/// The CSV header.
const CSV_HEADER: &str = "project_id,resource_class,reserved_hours,consumed_hours,lent_hours,idle_hours,on_demand_hours,preemptible_hours";

async fn usage(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Response, ApiError> {
    if let Some(unknown) = query.keys().find(|k| !PARAMETERS.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "Unknown parameter {unknown}: one of start, end, project_id, format"
        )));
    }
    let csv = match query.get("format").map(String::as_str) {
        None | Some("json") => false,
        Some("csv") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "format: {other} is not one of json, csv"
            )));
        }
    };
    let now = state.berth.now();
    let fields: Map<String, Value> = query
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let start = date_field(&fields, "start", now)?
        .ok_or_else(|| ApiError::bad_request("Missing parameter: start"))?;
    let end = date_field(&fields, "end", now)?.unwrap_or(now);
    let period = Window::new(start, end)
        .ok_or_else(|| ApiError::bad_request("end must be later than start"))?;
    let project = match (caller.project_scope(), query.get("project_id")) {
        (Some(own), Some(asked)) if *asked != own => return Err(ApiError::forbidden()),
        (Some(own), _) => Some(own),
        (None, asked) => asked.cloned(),
    };
    let report = state.berth.usage_report(period, project.as_deref()).await?;
    let rows: Vec<UsageRow> = report
        .into_iter()
        .map(|((project_id, class), totals)| UsageRow {
            project_id,
            resource_class: class.as_str().to_owned(),
            reserved_hours: hours(totals.reserved),
            consumed_hours: hours(totals.consumed),
            lent_hours: hours(totals.lent),
            idle_hours: hours(totals.idle),
            on_demand_hours: hours(totals.on_demand),
            preemptible_hours: hours(totals.preemptible),
        })
        .collect();
    if csv {
        return Ok((
            [(header::CONTENT_TYPE, "text/csv; charset=utf-8")],
            csv_text(&rows),
        )
            .into_response());
    }
    Ok(Json(UsageEnvelope {
        usage: UsageReport {
            start: lease_time(period.start().as_micros()),
            end: lease_time(period.end().as_micros()),
            counted_until: lease_time(period.end().min(now).max(period.start()).as_micros()),
            rows,
        },
    })
    .into_response())
}

/// Unit-microseconds as unit-hours, to the microsecond.
fn hours(micros: UnitMicros) -> f64 {
    let whole = u32::try_from(micros / UNIT_HOUR).map_or(f64::from(u32::MAX), f64::from);
    let rest = u32::try_from(micros % UNIT_HOUR).map_or(0.0, f64::from);
    whole + rest / 3_600_000_000.0
}

/// The rows as CSV (RFC 4180), with a header line.
fn csv_text(rows: &[UsageRow]) -> String {
    let mut text = String::from(CSV_HEADER);
    text.push('\n');
    for row in rows {
        let _ = writeln!(
            text,
            "{},{},{},{},{},{},{},{}",
            csv_field(&row.project_id),
            csv_field(&row.resource_class),
            row.reserved_hours,
            row.consumed_hours,
            row.lent_hours,
            row.idle_hours,
            row.on_demand_hours,
            row.preemptible_hours
        );
    }
    text
}

/// A text field as CSV writes it: quoted, with quotes doubled, when it holds a comma, a quote
/// or a line break.
fn csv_field(text: &str) -> std::borrow::Cow<'_, str> {
    match text.contains([',', '"', '\n', '\r']) {
        true => format!("\"{}\"", text.replace('"', "\"\"")).into(),
        false => text.into(),
    }
}
