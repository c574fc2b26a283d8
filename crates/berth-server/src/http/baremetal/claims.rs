//! `/baremetal/v1/reservations`: node claims, exactly as the node-reservation spec has them
//! (`POST {"instance_uuid", "node_uuid": [...]}` takes the first eligible node, in list order),
//! plus a claim by `resource_class` and `traits` and an optional `ttl` in seconds. A refusal
//! is 409 with, per listed node, why it could not be taken. Callers see and release their
//! project's claims; admins see and release all.

use super::wire::{time, uuid_field};
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, Caller};
use crate::http::fields::read_documented;
use crate::http::idempotency::IdempotencyHeader;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use berth_api::baremetal::{Claim, ClaimEnvelope, ClaimList, CreateClaim};
use berth_api::common::Link;
use berth_app::ClaimNode;
use berth_core::ProviderId;
use berth_core::decide::baremetal::Candidates;
use berth_core::model::baremetal::NodeClaim;
use berth_core::query::baremetal::{self, ClaimFilter};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use uuid::Uuid;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/baremetal/v1/reservations",
            Rule::PROJECT_READER,
            "List node claims",
            list,
        )
        .answers::<ClaimList>(200)
        .add(
            Method::POST,
            "/baremetal/v1/reservations",
            Rule::PROJECT_MEMBER,
            "Claim the first eligible node of a list (or of a class) for an instance",
            create,
        )
        .accepts::<CreateClaim>()
        .answers::<ClaimEnvelope>(201)
        .add(
            Method::GET,
            "/baremetal/v1/reservations/{reservation_uuid}",
            Rule::PROJECT_READER,
            "Show a node claim",
            show,
        )
        .answers::<ClaimEnvelope>(200)
        .add(
            Method::DELETE,
            "/baremetal/v1/reservations/{reservation_uuid}",
            Rule::PROJECT_MEMBER,
            "Release a node claim",
            delete,
        )
        .answers_empty(204);
}

fn claim_json(claim: &NodeClaim) -> Claim {
    Claim {
        uuid: claim.uuid,
        node_uuid: claim.node_uuid.uuid(),
        instance_uuid: claim.instance_uuid,
        project_id: claim.project_id.clone(),
        created_at: time(claim.created_at),
        updated_at: time(claim.updated_at),
        expires_at: time(claim.expires_at),
        links: vec![Link::to_self(format!(
            "/baremetal/v1/reservations/{}",
            claim.uuid
        ))],
    }
}

const CLAIM_FIELDS: [&str; 5] = [
    "instance_uuid",
    "node_uuid",
    "resource_class",
    "traits",
    "ttl",
];

fn candidates(body: &Map<String, Value>) -> Result<Candidates, ApiError> {
    match (body.get("node_uuid"), body.get("resource_class")) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "Give node_uuid or resource_class, not both",
        )),
        (Some(Value::Array(items)), None) => Ok(Candidates::Nodes(
            items
                .iter()
                .map(|v| uuid_field("node_uuid", v).map(ProviderId::new))
                .collect::<Result<_, _>>()?,
        )),
        (Some(other), None) => Err(ApiError::bad_request(format!(
            "node_uuid must be a list of node UUIDs, got {other}"
        ))),
        (None, Some(Value::String(class))) => Ok(Candidates::Class {
            resource_class: class.clone(),
            traits: match body.get("traits") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|t| {
                        t.as_str().map(str::to_owned).ok_or_else(|| {
                            ApiError::bad_request("traits must be a list of strings")
                        })
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(ApiError::bad_request("traits must be a list of strings")),
            },
            among: Vec::new(),
        }),
        (None, Some(_)) => Err(ApiError::bad_request("resource_class must be a string")),
        (None, None) => Err(ApiError::bad_request(
            "node_uuid (a list of node UUIDs) is required",
        )),
    }
}

fn ttl(body: &Map<String, Value>) -> Result<Option<Duration>, ApiError> {
    match body.get("ttl") {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .filter(|s| (1..=7 * 24 * 3600).contains(s))
            .map(|s| Some(Duration::from_secs(s)))
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "ttl must be a whole number of seconds from 1 to 604800, got {value}"
                ))
            }),
    }
}

async fn create(
    State(state): State<AppState>,
    caller: Caller,
    key: IdempotencyHeader,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<(StatusCode, Json<ClaimEnvelope>), ApiError> {
    if let Some(unknown) = body.keys().find(|k| !CLAIM_FIELDS.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!("Unknown field {unknown:?}")));
    }
    let instance_uuid = body
        .get("instance_uuid")
        .ok_or_else(|| ApiError::bad_request("instance_uuid is required"))
        .and_then(|v| uuid_field("instance_uuid", v))?;
    let cmd = ClaimNode {
        instance_uuid,
        candidates: candidates(&body)?,
        project_id: caller.0.project_id.clone(),
        user_id: caller.0.user_id.clone(),
        ttl: ttl(&body)?,
        idempotency: key.bind(&caller, &body),
    };
    let _: CreateClaim = read_documented(&body)?;
    let claim = state.berth.claim_node(cmd).await?;
    Ok((
        StatusCode::CREATED,
        Json(ClaimEnvelope {
            reservation: claim_json(&claim),
        }),
    ))
}

async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<ClaimList>, ApiError> {
    let uuid_query = |key: &str| {
        query
            .get(key)
            .map(|text| {
                Uuid::parse_str(text)
                    .map_err(|_| ApiError::bad_request(format!("{key} must be a UUID")))
            })
            .transpose()
    };
    let filter = ClaimFilter {
        viewer: caller.project_scope(),
        node: uuid_query("node_uuid")?.map(ProviderId::new),
        instance: uuid_query("instance_uuid")?,
    };
    let reservations = state.berth.claims(filter, claim_json).await?;
    Ok(Json(ClaimList { reservations }))
}

fn claim_uuid(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text)
        .map_err(|_| ApiError::not_found(format!("Reservation {text} could not be found")))
}

async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(uuid): Path<String>,
) -> Result<Json<ClaimEnvelope>, ApiError> {
    let uuid = claim_uuid(&uuid)?;
    let project = caller.project_scope();
    let claim = state
        .berth
        .read(move |catalog| {
            baremetal::find_claim(catalog, uuid, project.as_deref()).map(claim_json)
        })
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Reservation {uuid} could not be found")))?;
    Ok(Json(ClaimEnvelope { reservation: claim }))
}

async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(uuid): Path<String>,
) -> Result<StatusCode, ApiError> {
    let uuid = claim_uuid(&uuid)?;
    state
        .berth
        .release_claim(uuid, caller.project_scope())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::fields::{documented_fields, sorted};

    /// The fields a claim accepts by hand are exactly those its wire type documents.
    #[test]
    fn claim_fields_are_the_documented_ones() {
        assert_eq!(documented_fields::<CreateClaim>(), sorted(&CLAIM_FIELDS));
    }
}
