//! `/promise/flavors` (the flavor catalogue: admins create and delete, anyone lists and shows)
//! and `/promise/policy` (the reservation policy: anyone reads it, admins set it).

use super::wire::{Input, flag, number, read_as, text};
use crate::http::error::ApiError;
use crate::http::extract::Caller;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use berth_api::promise::{
    CreateFlavor as FlavorRequest, Flavor as FlavorBody, FlavorEnvelope, FlavorList,
    Policy as PolicyBody, PolicyEnvelope, SetPolicy,
};
use berth_app::CreateFlavor;
use berth_core::limits::REQUEST_QUANTITY_MAX;
use berth_core::model::promise::{Flavor, Policy, PolicyPatch};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/promise/flavors",
            Rule::SYSTEM_READER,
            "List flavors",
            list,
        )
        .answers::<FlavorList>(200)
        .add(
            Method::POST,
            "/promise/flavors",
            Rule::SYSTEM_ADMIN,
            "Create a flavor",
            create,
        )
        .accepts::<FlavorRequest>()
        .answers::<FlavorEnvelope>(201)
        .add(
            Method::GET,
            "/promise/flavors/{flavor_id}",
            Rule::SYSTEM_READER,
            "Show a flavor",
            show,
        )
        .answers::<FlavorEnvelope>(200)
        .add(
            Method::DELETE,
            "/promise/flavors/{flavor_id}",
            Rule::SYSTEM_ADMIN,
            "Delete a flavor",
            delete,
        )
        .answers_empty(204)
        .add(
            Method::GET,
            "/promise/policy",
            Rule::SYSTEM_READER,
            "Show the reservation policy",
            get_policy,
        )
        .answers::<PolicyEnvelope>(200)
        .add(
            Method::PUT,
            "/promise/policy",
            Rule::SYSTEM_ADMIN,
            "Set the reservation policy",
            put_policy,
        )
        .accepts::<SetPolicy>()
        .answers::<PolicyEnvelope>(200);
}

pub(super) fn flavor_json(flavor: &Flavor) -> FlavorBody {
    FlavorBody {
        id: flavor.id.clone(),
        name: flavor.name.clone(),
        vcpus: flavor.vcpus,
        ram: flavor.ram_mb,
        disk: flavor.disk_gb,
        cpu_architecture: flavor.cpu_architecture.clone(),
        extra_specs: flavor.extra_specs.clone(),
        created_at: super::wire::time(flavor.created_at),
    }
}

async fn list(
    State(state): State<AppState>,
    _caller: Caller,
) -> Result<Json<FlavorList>, ApiError> {
    let flavors = state
        .berth
        .read(|c| c.flavors().map(flavor_json).collect::<Vec<_>>())
        .await?;
    Ok(Json(FlavorList { flavors }))
}

async fn show(
    State(state): State<AppState>,
    _caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<FlavorEnvelope>, ApiError> {
    state
        .berth
        .read(|c| c.flavor(&id).map(flavor_json))
        .await?
        .map(|flavor| Json(FlavorEnvelope { flavor }))
        .ok_or_else(|| ApiError::not_found(format!("Flavor {id} could not be found")))
}

fn extra_specs(value: Option<&Value>) -> Result<BTreeMap<String, String>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(_) | Value::Bool(_) => Ok((k.clone(), v.to_string())),
                _ => Err(ApiError::bad_request(format!(
                    "extra_specs.{k} must be a string"
                ))),
            })
            .collect(),
        Some(_) => Err(ApiError::bad_request("extra_specs must be an object")),
    }
}

const FLAVOR_FIELDS: [&str; 7] = [
    "id",
    "name",
    "vcpus",
    "ram",
    "disk",
    "cpu_architecture",
    "extra_specs",
];

async fn create(
    State(state): State<AppState>,
    Input(input): Input,
) -> Result<(StatusCode, Json<FlavorEnvelope>), ApiError> {
    let body = match input.get("flavor") {
        Some(Value::Object(inner)) => inner.clone(),
        _ => input,
    };
    if let Some(unknown) = body.keys().find(|k| !FLAVOR_FIELDS.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "Unknown flavor field: {unknown}"
        )));
    }
    let body = read_as::<FlavorRequest>(body)?;
    let required = |field: &str, v: Option<u64>| {
        v.ok_or_else(|| ApiError::bad_request(format!("Missing parameter: {field}")))
    };
    let max = u64::from(REQUEST_QUANTITY_MAX);
    let cmd = CreateFlavor {
        id: text(&body, "id")?,
        name: text(&body, "name")?
            .ok_or_else(|| ApiError::bad_request("Missing parameter: name"))?,
        vcpus: required("vcpus", number(&body, "vcpus", max)?)?,
        ram_mb: required("ram", number(&body, "ram", max * 1024)?)?,
        disk_gb: number(&body, "disk", max)?.unwrap_or(0),
        cpu_architecture: text(&body, "cpu_architecture")?,
        extra_specs: extra_specs(body.get("extra_specs"))?,
    };
    let flavor = state.berth.create_flavor(cmd).await?;
    Ok((
        StatusCode::CREATED,
        Json(FlavorEnvelope {
            flavor: flavor_json(&flavor),
        }),
    ))
}

async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.berth.delete_flavor(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn policy_json(policy: &Policy) -> PolicyEnvelope {
    PolicyEnvelope {
        reservation: PolicyBody {
            max_future_start_range: policy.max_future_start_days,
            max_future_end_range: policy.max_future_end_days,
            max_duration: policy.max_duration_hours,
            expiry: policy.expiry_minutes,
            preemption: policy.preemption,
        },
    }
}

async fn get_policy(
    State(state): State<AppState>,
    _caller: Caller,
) -> Result<Json<PolicyEnvelope>, ApiError> {
    let policy = state.berth.read(|c| c.policy().clone()).await?;
    Ok(Json(policy_json(&policy)))
}

const POLICY_FIELDS: [&str; 5] = [
    "max-future-start-range",
    "max-future-end-range",
    "max-duration",
    "expiry",
    "preemption",
];

/// The policy changes `body` names: a number sets a limit, `null` removes it, an absent member
/// keeps it.
fn policy_patch(body: &Map<String, Value>) -> Result<PolicyPatch, ApiError> {
    if let Some(unknown) = body.keys().find(|k| !POLICY_FIELDS.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "Unknown policy field: {unknown}"
        )));
    }
    let limit = |field: &str, max: u64| -> Result<Option<Option<u32>>, ApiError> {
        match body.get(field) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(_) => Ok(Some(number(body, field, max)?.map(|v| v as u32))),
        }
    };
    Ok(PolicyPatch {
        max_future_start_days: limit("max-future-start-range", 365)?,
        max_future_end_days: limit("max-future-end-range", 365)?,
        max_duration_hours: limit("max-duration", 876_000)?,
        expiry_minutes: limit("expiry", 52_560_000)?,
        preemption: flag(body, "preemption")?,
    })
}

async fn put_policy(
    State(state): State<AppState>,
    Input(input): Input,
) -> Result<Json<PolicyEnvelope>, ApiError> {
    let body = match input.get("reservation") {
        Some(Value::Object(inner)) => inner.clone(),
        Some(_) => return Err(ApiError::bad_request("reservation must be an object")),
        None => input,
    };
    let patch = policy_patch(&body)?;
    // `null` removes a limit: the patch reads the members as given, which the request type
    // documents (and accepts: the members were checked above).
    read_as::<SetPolicy>(body)?;
    let policy = state.berth.update_policy(patch).await?;
    Ok(Json(policy_json(&policy)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::fields::{documented_fields, sorted};

    /// The members a flavor and a policy change accept by hand are exactly those their wire
    /// types document (beside the member each may be nested under).
    #[test]
    fn flavor_and_policy_fields_are_the_documented_ones() {
        let mut flavor = FLAVOR_FIELDS.to_vec();
        flavor.push("flavor");
        assert_eq!(documented_fields::<FlavorRequest>(), sorted(&flavor));
        let mut policy = POLICY_FIELDS.to_vec();
        policy.push("reservation");
        assert_eq!(documented_fields::<SetPolicy>(), sorted(&policy));
    }
}
