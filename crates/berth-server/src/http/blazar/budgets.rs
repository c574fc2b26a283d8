//! Budgets (berth): `/reservation/v1/budgets` lists the budgets the caller sees (its project's,
//! or every project's for an admin) with what each period has been charged;
//! `/reservation/v1/budgets/{project_id}` shows one, and an admin sets (`PUT`) or removes
//! (`DELETE`) it. Leases are charged against it as they are decided, and refused past it
//! (`budget_exceeded`).

use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, Caller};
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use berth_api::blazar::{BudgetBody, BudgetEnvelope, BudgetList, BudgetPeriodBody, BudgetRequest};
use berth_api::time::lease_time;
use berth_core::Instant;
use berth_core::model::budget::{Budget, BudgetPeriod, hours};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

const BUDGETS: &str = "/reservation/v1/budgets";
const BUDGET: &str = "/reservation/v1/budgets/{project_id}";

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            BUDGETS,
            Rule::PROJECT_READER,
            "List budgets of resource-hours per period with their charges (berth extension)",
            list,
        )
        .answers::<BudgetList>(200)
        .add(
            Method::GET,
            BUDGET,
            Rule::PROJECT_READER,
            "Show a project's budget with its charges (berth extension)",
            show,
        )
        .answers::<BudgetEnvelope>(200)
        .add(
            Method::PUT,
            BUDGET,
            Rule::SYSTEM_ADMIN,
            "Set a project's budget of resource-hours per period (berth extension)",
            put,
        )
        .accepts::<BudgetRequest>()
        .answers::<BudgetEnvelope>(200)
        .add(
            Method::DELETE,
            BUDGET,
            Rule::SYSTEM_ADMIN,
            "Remove a project's budget (berth extension)",
            delete,
        )
        .answers_empty(204);
}

/// A budget as answered at `now`: the periods it charged, and the current one always.
fn wire(budget: &Budget, now: Instant) -> BudgetBody {
    let mut charged = budget.charged.clone();
    charged
        .entry(budget.period.containing(now).start())
        .or_default();
    let periods = charged
        .iter()
        .map(|(start, charged)| {
            let period = budget.period.containing(*start);
            BudgetPeriodBody {
                start: lease_time(period.start().as_micros()),
                end: lease_time(period.end().as_micros()),
                charged_hours: charged
                    .iter()
                    .map(|(class, seconds)| (class.as_str().to_owned(), hours(*seconds)))
                    .collect(),
                left_hours: budget
                    .limits
                    .iter()
                    .map(|(class, limit)| {
                        let used = hours(charged.get(class).copied().unwrap_or(0));
                        (class.as_str().to_owned(), (*limit as f64 - used).max(0.0))
                    })
                    .collect(),
            }
        })
        .collect();
    BudgetBody {
        project_id: budget.project_id.clone(),
        period: budget.period.as_str().to_owned(),
        limits: budget
            .limits
            .iter()
            .map(|(class, n)| (class.as_str().to_owned(), *n))
            .collect(),
        periods,
        updated_at: lease_time(budget.updated_at.as_micros()),
    }
}

fn not_found(project: &str) -> ApiError {
    ApiError::not_found(format!("Project {project} has no budget"))
}

async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<BudgetList>, ApiError> {
    let budgets = state
        .berth
        .budgets(caller.project_scope().as_deref())
        .await?;
    Ok(Json(BudgetList {
        budgets: budgets.iter().map(|b| wire(b, state.berth.now())).collect(),
    }))
}

async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(project): Path<String>,
) -> Result<Json<BudgetEnvelope>, ApiError> {
    // Another project's budget does not exist for a project's caller.
    if caller.project_scope().is_some_and(|own| own != project) {
        return Err(not_found(&project));
    }
    let budgets = state.berth.budgets(Some(&project)).await?;
    let budget = budgets.first().ok_or_else(|| not_found(&project))?;
    Ok(Json(BudgetEnvelope {
        budget: wire(budget, state.berth.now()),
    }))
}

async fn put(
    State(state): State<AppState>,
    Path(project): Path<String>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<Json<BudgetEnvelope>, ApiError> {
    let request: BudgetRequest = serde_json::from_value(Value::Object(body)).map_err(|e| {
        ApiError::bad_request(format!(
            "A budget is {{\"period\": \"day\" | \"week\" | \"month\", \"limits\": {{CLASS: hours}}}} ({e})"
        ))
    })?;
    let period = match request.period.as_deref() {
        None => BudgetPeriod::Month,
        Some(text) => BudgetPeriod::parse(text).ok_or_else(|| {
            ApiError::bad_request(format!("period: {text} is not one of day, week, month"))
        })?,
    };
    // Whole numbers here; the classes and their range are checked with the budget.
    let mut limits = BTreeMap::new();
    for (name, value) in &request.limits {
        let hours = value.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!(
                "limits.{name}: {value} is not a whole number of hours"
            ))
        })?;
        limits.insert(name.clone(), hours);
    }
    let budget = state.berth.set_budget(project, period, limits).await?;
    Ok(Json(BudgetEnvelope {
        budget: wire(&budget, state.berth.now()),
    }))
}

async fn delete(
    State(state): State<AppState>,
    Path(project): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.berth.delete_budget(project).await?;
    Ok(StatusCode::NO_CONTENT)
}
