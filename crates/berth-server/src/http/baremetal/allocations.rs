//! `/baremetal/v1/allocations` and `/baremetal/v1/nodes/{node}/allocation`: Ironic's allocation
//! API (from microversion 1.52) over berth's node claims. An allocation takes the first eligible
//! node of its class (among its candidate nodes, with its traits), decided at once: it answers
//! `active` with its node, or `error` with why no node fitted (such an allocation is not kept).
//! Callers see, change and delete their project's allocations (Ironic's `owner`); admins all.

use super::wire::time;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, Caller, PatchJson};
use crate::http::fields::read_documented;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::surface::{IRONIC_ALLOCATIONS, Microversion};
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::header::{HeaderName, LOCATION};
use axum::http::{Method, StatusCode};
use berth_api::baremetal::{Allocation, AllocationList, CreateAllocation, PatchOperation};
use berth_api::common::Link;
use berth_app::{AllocateNode, Allocated, FailedAllocation};
use berth_core::Rejection;
use berth_core::decide::baremetal::find_node;
use berth_core::decide::node_allocation::AllocationPatch;
use berth_core::model::baremetal::{AllocationRecord, NodeClaim};
use berth_core::query::baremetal::{self, AllocationFilter};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use uuid::Uuid;

const ALLOCATIONS: &str = "/baremetal/v1/allocations";
const ONE: &str = "/baremetal/v1/allocations/{allocation_ident}";
const OF_NODE: &str = "/baremetal/v1/nodes/{node_ident}/allocation";

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            ALLOCATIONS,
            Rule::PROJECT_READER,
            "List allocations",
            list,
        )
        .answers::<AllocationList>(200)
        .add(
            Method::GET,
            "/baremetal/v1/allocations/",
            Rule::PROJECT_READER,
            "List allocations (the path python-ironicclient gives a filtered listing)",
            list,
        )
        .answers::<AllocationList>(200)
        .add(
            Method::POST,
            ALLOCATIONS,
            Rule::PROJECT_MEMBER,
            "Allocate the first eligible node of a class, or backfill a deployed node's allocation",
            create,
        )
        .accepts::<CreateAllocation>()
        .answers::<Allocation>(201)
        .add(
            Method::GET,
            ONE,
            Rule::PROJECT_READER,
            "Show an allocation",
            show,
        )
        .answers::<Allocation>(200)
        .add(
            Method::PATCH,
            ONE,
            Rule::PROJECT_MEMBER,
            "Change an allocation's name or extra (JSON Patch)",
            update,
        )
        .accepts::<Vec<PatchOperation>>()
        .answers::<Allocation>(200)
        .add(
            Method::DELETE,
            ONE,
            Rule::PROJECT_MEMBER,
            "Delete an allocation, freeing its node",
            delete,
        )
        .answers_empty(204)
        .add(
            Method::GET,
            OF_NODE,
            Rule::PROJECT_READER,
            "Show a node's allocation",
            show_of_node,
        )
        .answers::<Allocation>(200)
        .add(
            Method::DELETE,
            OF_NODE,
            Rule::PROJECT_MEMBER,
            "Delete a node's allocation",
            delete_of_node,
        )
        .answers_empty(204);
}

fn links(uuid: Uuid) -> Vec<Link> {
    vec![
        Link::to_self(format!("{ALLOCATIONS}/{uuid}")),
        Link {
            rel: "bookmark".to_owned(),
            href: format!("/baremetal/allocations/{uuid}"),
        },
    ]
}

fn extra_of(record: &AllocationRecord) -> Map<String, Value> {
    serde_json::from_str(&record.extra).unwrap_or_default()
}

fn allocation_json(claim: &NodeClaim) -> Allocation {
    let record = claim
        .allocation
        .as_ref()
        .expect("invariant: allocations are claims with a record");
    Allocation {
        uuid: claim.uuid,
        name: record.name.clone(),
        node_uuid: Some(claim.node_uuid.uuid()),
        state: "active".to_owned(),
        last_error: None,
        resource_class: record.resource_class.clone(),
        candidate_nodes: record.candidate_nodes.iter().map(|n| n.uuid()).collect(),
        traits: record.traits.clone(),
        extra: extra_of(record),
        owner: record.owner.clone(),
        created_at: time(claim.created_at),
        updated_at: (claim.updated_at != claim.created_at).then(|| time(claim.updated_at)),
        links: links(claim.uuid),
    }
}

/// An allocation no node fitted, as Ironic shows one that failed: `error`, with why.
fn failed_json(failed: &FailedAllocation) -> Allocation {
    let record = &failed.record;
    let mut why = format!(
        "No available nodes match the resource class {}",
        record.resource_class
    );
    if !record.traits.is_empty() {
        why.push_str(&format!(" and the traits {}", record.traits.join(", ")));
    }
    if !record.candidate_nodes.is_empty() {
        why.push_str(" among the candidate nodes");
    }
    let reasons: Vec<String> = failed
        .reasons
        .iter()
        .map(|r| format!("{}: {}", r.node_uuid, r.detail))
        .collect();
    if !reasons.is_empty() {
        why.push_str(&format!(" ({})", reasons.join("; ")));
    }
    Allocation {
        uuid: failed.uuid,
        name: record.name.clone(),
        node_uuid: None,
        state: "error".to_owned(),
        last_error: Some(why),
        resource_class: record.resource_class.clone(),
        candidate_nodes: record.candidate_nodes.iter().map(|n| n.uuid()).collect(),
        traits: record.traits.clone(),
        extra: extra_of(record),
        owner: record.owner.clone(),
        created_at: time(failed.at),
        updated_at: None,
        links: links(failed.uuid),
    }
}

const ALLOCATION_FIELDS: [&str; 8] = [
    "candidate_nodes",
    "extra",
    "name",
    "node",
    "owner",
    "resource_class",
    "traits",
    "uuid",
];

/// A name as Ironic accepts one: 1 to 255 of `A-Z a-z 0-9 - . _ ~`, and not a uuid (which
/// would make it ambiguous where a uuid or a name is accepted).
fn valid_name(name: &str) -> bool {
    (1..=255).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c))
        && Uuid::parse_str(name).is_err()
}

fn strings(body: &Map<String, Value>, key: &str) -> Result<Vec<String>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_owned).ok_or_else(|| {
                    ApiError::bad_request(format!("{key} must be a list of strings"))
                })
            })
            .collect(),
        Some(_) => Err(ApiError::bad_request(format!(
            "{key} must be a list of strings"
        ))),
    }
}

fn text(body: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(ApiError::bad_request(format!(
            "{key} must be a string, got {other}"
        ))),
    }
}

fn extra_text(value: Option<&Value>) -> Result<String, ApiError> {
    match value {
        None | Some(Value::Null) => Ok("{}".to_owned()),
        Some(object @ Value::Object(_)) => Ok(object.to_string()),
        Some(_) => Err(ApiError::bad_request("extra must be an object")),
    }
}

/// The allocation a request body asks for, checked as Ironic checks it.
fn allocation_command(
    caller: &Caller,
    body: &Map<String, Value>,
) -> Result<AllocateNode, ApiError> {
    if let Some(unknown) = body
        .keys()
        .find(|k| !ALLOCATION_FIELDS.contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "Additional properties are not allowed ('{unknown}' was unexpected)"
        )));
    }
    let node = text(body, "node")?;
    let resource_class = text(body, "resource_class")?;
    let candidate_nodes = strings(body, "candidate_nodes")?;
    match (&node, &resource_class) {
        (None, None) => {
            return Err(ApiError::bad_request(
                "The resource_class field is mandatory when not backfilling",
            ));
        }
        (Some(_), _) if !candidate_nodes.is_empty() => {
            return Err(ApiError::bad_request(
                "Cannot use candidate_nodes when backfilling an allocation for a node",
            ));
        }
        _ => {}
    }
    let name = text(body, "name")?;
    if let Some(name) = name.as_deref().filter(|n| !valid_name(n)) {
        return Err(ApiError::bad_request(format!(
            "Cannot create allocation with invalid name '{name}'"
        )));
    }
    let uuid = match body.get("uuid") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            value
                .as_str()
                .and_then(|text| Uuid::parse_str(text).ok())
                .ok_or_else(|| {
                    ApiError::bad_request(format!("Expected a UUID but received {value}"))
                })?,
        ),
    };
    // A member's allocations are its project's: it may name no other owner (403, as Ironic).
    let owner = text(body, "owner")?;
    let scope = caller.project_scope();
    let owner = match (scope, owner) {
        (Some(own), Some(named)) if own != named => return Err(ApiError::forbidden()),
        (Some(own), _) => Some(own),
        (None, named) => named,
    };
    Ok(AllocateNode {
        uuid,
        node,
        candidate_nodes,
        project_id: owner.clone().unwrap_or_else(|| caller.0.project_id.clone()),
        user_id: caller.0.user_id.clone(),
        record: AllocationRecord {
            name,
            resource_class: resource_class.unwrap_or_default(),
            candidate_nodes: Vec::new(),
            traits: strings(body, "traits")?,
            extra: extra_text(body.get("extra"))?,
            owner,
        },
    })
}

async fn create(
    State(state): State<AppState>,
    version: Microversion,
    caller: Caller,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<(StatusCode, [(HeaderName, String); 1], Json<Allocation>), ApiError> {
    version.require(IRONIC_ALLOCATIONS)?;
    let cmd = allocation_command(&caller, &body)?;
    let _: CreateAllocation = read_documented(&body)?;
    let shown = match state.berth.allocate(cmd).await? {
        Allocated::Active(claim) => allocation_json(&claim),
        Allocated::Failed(failed) => failed_json(&failed),
    };
    // As Ironic, `Location` names the allocation (one in `error` is not kept: it is 404 there).
    let location = format!("{ALLOCATIONS}/{}", shown.uuid);
    Ok((StatusCode::CREATED, [(LOCATION, location)], Json(shown)))
}

/// The largest page of allocations (Ironic's `api.max_limit`).
const PAGE_MAX: usize = 1_000;
const LIST_KEYS: [&str; 9] = [
    "node",
    "resource_class",
    "state",
    "owner",
    "limit",
    "marker",
    "sort_key",
    "sort_dir",
    "fields",
];

/// An allocation listing's query, checked as Ironic checks it.
fn list_filter(
    caller: &Caller,
    query: &BTreeMap<String, String>,
) -> Result<AllocationFilter, ApiError> {
    if let Some(unknown) = query.keys().find(|k| !LIST_KEYS.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "Unknown argument: {unknown:?}"
        )));
    }
    let state = query.get("state").cloned();
    if let Some(bad) = state
        .as_deref()
        .filter(|s| !["allocating", "active", "error"].contains(s))
    {
        return Err(ApiError::bad_request(format!(
            "Invalid state {bad:?}: allocating, active or error"
        )));
    }
    let limit = match query.get("limit") {
        None => PAGE_MAX,
        Some(text) => match text.parse::<usize>() {
            Ok(0) | Err(_) => return Err(ApiError::bad_request("Limit must be positive")),
            Ok(n) => n.min(PAGE_MAX),
        },
    };
    let after = query
        .get("marker")
        .map(|text| {
            Uuid::parse_str(text)
                .map_err(|_| ApiError::bad_request(format!("Invalid marker {text:?}: a UUID")))
        })
        .transpose()?;
    if query
        .get("sort_key")
        .is_some_and(|k| !["id", "uuid"].contains(&k.as_str()))
        || query.get("sort_dir").is_some_and(|d| d != "asc")
    {
        return Err(ApiError::bad_request(
            "Allocations are listed by uuid, ascending, only",
        ));
    }
    Ok(AllocationFilter {
        viewer: caller.project_scope(),
        node: query.get("node").cloned(),
        resource_class: query.get("resource_class").cloned(),
        state,
        owner: query.get("owner").cloned(),
        after,
        limit,
    })
}

/// The fields `?fields=` keeps (all when absent); an unknown one is refused.
fn field_list(query: &BTreeMap<String, String>) -> Result<Option<Vec<String>>, ApiError> {
    let Some(text) = query.get("fields") else {
        return Ok(None);
    };
    let fields: Vec<String> = text.split(',').map(|f| f.trim().to_owned()).collect();
    let unknown: Vec<&str> = fields
        .iter()
        .map(String::as_str)
        .filter(|f| !SHOWN_FIELDS.contains(f))
        .collect();
    match unknown.is_empty() {
        true => Ok(Some(fields)),
        false => Err(ApiError::bad_request(format!(
            "Field(s) \"{}\" are not valid",
            unknown.join(", ")
        ))),
    }
}

/// The members of an allocation as the API shows it (what `?fields=` may name).
const SHOWN_FIELDS: [&str; 13] = [
    "uuid",
    "name",
    "node_uuid",
    "state",
    "last_error",
    "resource_class",
    "candidate_nodes",
    "traits",
    "extra",
    "owner",
    "created_at",
    "updated_at",
    "links",
];

/// An allocation with only `fields` (all when `None`).
fn trimmed(allocation: Allocation, fields: Option<&[String]>) -> Value {
    let mut value = crate::http::error::members(allocation);
    if let (Some(fields), Value::Object(map)) = (fields, &mut value) {
        map.retain(|key, _| fields.iter().any(|f| f == key));
    }
    value
}

async fn list(
    State(state): State<AppState>,
    version: Microversion,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<AllocationList>, ApiError> {
    version.require(IRONIC_ALLOCATIONS)?;
    let filter = list_filter(&caller, &query)?;
    let fields = field_list(&query)?;
    let limit = filter.limit;
    let shown = state.berth.allocations(filter, allocation_json).await?;
    // A full page links to the next one, with the same filters, as Ironic's `next`.
    let next = match (shown.len() == limit, shown.last()) {
        (true, Some(last)) => {
            let mut again = query.clone();
            again.insert("limit".to_owned(), limit.to_string());
            again.insert("marker".to_owned(), last.uuid.to_string());
            let encoded = serde_urlencoded::to_string(&again)
                .map_err(|error| ApiError::bad_request(error.to_string()))?;
            Some(format!("{ALLOCATIONS}?{encoded}"))
        }
        _ => None,
    };
    let allocations = shown
        .into_iter()
        .map(|a| trimmed(a, fields.as_deref()))
        .collect();
    Ok(Json(AllocationList { allocations, next }))
}

async fn show(
    State(state): State<AppState>,
    version: Microversion,
    caller: Caller,
    Path(ident): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    version.require(IRONIC_ALLOCATIONS)?;
    let fields = field_list(&query)?;
    let project = caller.project_scope();
    let shown = state
        .berth
        .read(|catalog| {
            baremetal::find_allocation(catalog, &ident, project.as_deref()).map(allocation_json)
        })
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Allocation {ident} could not be found.")))?;
    Ok(Json(trimmed(shown, fields.as_deref())))
}

/// The changes of a JSON Patch on an allocation: `add`, `replace` or `remove` of `/name`,
/// `/extra` or `/extra/<key>`; anything else is refused, as Ironic refuses it.
fn allocation_patch(
    current: &AllocationRecord,
    ops: &[Value],
) -> Result<AllocationPatch, ApiError> {
    let mut patch = AllocationPatch::default();
    let before = extra_of(current);
    let mut extra = before.clone();
    for op in ops {
        let kind = op["op"].as_str().unwrap_or_default();
        let path = op["path"].as_str().unwrap_or_default();
        let value = &op["value"];
        let removing = match kind {
            "add" | "replace" => false,
            "remove" => true,
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unsupported patch operation {other:?} on {path}"
                )));
            }
        };
        match (path, removing) {
            ("/name", true) => patch.name = Some(None),
            ("/name", false) => {
                let name = value
                    .as_str()
                    .filter(|n| valid_name(n))
                    .ok_or_else(|| ApiError::bad_request(format!("Invalid name {value}")))?;
                patch.name = Some(Some(name.to_owned()));
            }
            ("/extra", true) => extra.clear(),
            ("/extra", false) => {
                extra = value
                    .as_object()
                    .cloned()
                    .ok_or_else(|| ApiError::bad_request("/extra must be an object"))?;
            }
            (path, _) if path.starts_with("/extra/") && path.len() > "/extra/".len() => {
                let key = path["/extra/".len()..]
                    .replace("~1", "/")
                    .replace("~0", "~");
                match removing {
                    true if extra.remove(&key).is_none() => {
                        return Err(ApiError::bad_request(format!(
                            "can't remove non-existent object '{key}'"
                        )));
                    }
                    true => {}
                    false => {
                        extra.insert(key, value.clone());
                    }
                }
            }
            (other, _) => {
                return Err(ApiError::bad_request(format!(
                    "Cannot update allocation field {other}: only /name and /extra change"
                )));
            }
        }
    }
    if extra != before {
        patch.extra = Some(Value::Object(extra).to_string());
    }
    Ok(patch)
}

async fn update(
    State(state): State<AppState>,
    version: Microversion,
    caller: Caller,
    Path(ident): Path<String>,
    PatchJson(body): PatchJson<Value>,
) -> Result<Json<Allocation>, ApiError> {
    version.require(IRONIC_ALLOCATIONS)?;
    // The patch applies to the record as it is under the writer lock, and only once the
    // allocation is known to be the caller's: another project's does not exist for it,
    // whatever the body says.
    let ops = match (
        body.as_array(),
        read_documented::<Vec<PatchOperation>, _>(&body),
    ) {
        (Some(ops), Ok(_)) => Ok(ops.clone()),
        (None, _) => Err("The body must be a JSON Patch: a list of operations".to_owned()),
        (Some(_), Err(error)) => Err(error.detail().to_owned()),
    };
    let edit = move |record: &AllocationRecord| {
        ops.and_then(|ops| allocation_patch(record, &ops).map_err(|e| e.detail().to_owned()))
            .map_err(Rejection::BadNode)
    };
    let uuid = state
        .berth
        .update_allocation(ident.clone(), caller.project_scope(), edit)
        .await?;
    let shown = state
        .berth
        .read_local(|catalog| catalog.claim(uuid).map(allocation_json))
        .ok_or_else(|| ApiError::not_found(format!("Allocation {ident} could not be found.")))?;
    Ok(Json(shown))
}

async fn delete(
    State(state): State<AppState>,
    version: Microversion,
    caller: Caller,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    version.require(IRONIC_ALLOCATIONS)?;
    state
        .berth
        .delete_allocation(ident, caller.project_scope())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The uuid of node `ident`'s allocation that the caller sees (404 for the node or for it).
async fn allocation_of_node(
    state: &AppState,
    caller: &Caller,
    ident: &str,
) -> Result<Allocation, ApiError> {
    let project = caller.project_scope();
    state
        .berth
        .read(|catalog| {
            let node = find_node(catalog, ident)?;
            Ok(
                baremetal::allocation_of_node(catalog, node.uuid(), project.as_deref())
                    .map(allocation_json),
            )
        })
        .await?
        .map_err(|rejection: berth_core::Rejection| ApiError::from(rejection))?
        .ok_or_else(|| ApiError::not_found(format!("Node {ident} has no allocation")))
}

async fn show_of_node(
    State(state): State<AppState>,
    version: Microversion,
    caller: Caller,
    Path(ident): Path<String>,
) -> Result<Json<Allocation>, ApiError> {
    version.require(IRONIC_ALLOCATIONS)?;
    Ok(Json(allocation_of_node(&state, &caller, &ident).await?))
}

async fn delete_of_node(
    State(state): State<AppState>,
    version: Microversion,
    caller: Caller,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    version.require(IRONIC_ALLOCATIONS)?;
    let allocation = allocation_of_node(&state, &caller, &ident).await?;
    state
        .berth
        .delete_allocation(allocation.uuid.to_string(), caller.project_scope())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::fields::{documented_fields, sorted};

    /// The fields an allocation accepts by hand are exactly those its wire type documents.
    #[test]
    fn allocation_fields_are_the_documented_ones() {
        assert_eq!(
            documented_fields::<CreateAllocation>(),
            sorted(&ALLOCATION_FIELDS)
        );
    }

    /// The fields `?fields=` may name are exactly those an allocation shows.
    #[test]
    fn listed_fields_are_the_shown_ones() {
        assert_eq!(documented_fields::<Allocation>(), sorted(&SHOWN_FIELDS));
    }

    #[test]
    fn names_follow_ironic() {
        for good in ["a", "alloc-1", "x.y_z~w", &"n".repeat(255)] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            "with space",
            "slash/",
            &"n".repeat(256),
            "6f1c2b3a-58a4-4a6e-9c59-0b6f3c1d2e4f",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
