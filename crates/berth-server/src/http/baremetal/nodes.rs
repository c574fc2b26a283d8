//! `/baremetal/v1/nodes`: bare-metal nodes. Anyone may list and show them; enrolling, changing
//! (JSON Patch, Ironic's maintenance and provision-state actions) and deleting are for admins;
//! deploying is for the holder of the node's claim.

use super::wire::{time, uuid_field};
use crate::http::attributes::{self, attr_json};
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, Caller, PatchJson};
use crate::http::fields::read_documented;
use crate::http::routes::Routes;
use crate::http::state::AppState;
use crate::http::status::lease_effects;
use crate::policy::Rule;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use berth_api::baremetal::{
    DeployNode, EnrolNode, Node, NodeList, PatchOperation, ProvisionTarget, SetMaintenance,
};
use berth_api::common::Link;
use berth_app::EnrollNode;
use berth_core::decide::baremetal::{NodeChange, find_node};
use berth_core::model::baremetal::ProvisionState;
use berth_core::query::baremetal::NodeFilter;
use berth_core::{AttrValue, Catalog, Provider, ProviderId};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

pub(super) fn register(routes: &mut Routes) {
    routes
        .add(
            Method::GET,
            "/baremetal/v1/nodes",
            Rule::SYSTEM_READER,
            "List nodes",
            list,
        )
        .answers::<NodeList>(200)
        .add(
            Method::GET,
            "/baremetal/v1/nodes/",
            Rule::SYSTEM_READER,
            "List nodes (the path python-ironicclient gives a filtered listing)",
            list,
        )
        .answers::<NodeList>(200)
        .add(
            Method::POST,
            "/baremetal/v1/nodes",
            Rule::SYSTEM_ADMIN,
            "Enrol a node",
            create,
        )
        .accepts::<EnrolNode>()
        .answers::<Node>(201)
        .add(
            Method::GET,
            "/baremetal/v1/nodes/{node_ident}",
            Rule::SYSTEM_READER,
            "Show a node",
            show,
        )
        .answers::<Node>(200)
        .add(
            Method::PATCH,
            "/baremetal/v1/nodes/{node_ident}",
            Rule::SYSTEM_ADMIN,
            "Change a node (JSON Patch; provision states move along explicit transitions)",
            update,
        )
        .accepts::<Vec<PatchOperation>>()
        .answers::<Node>(200)
        .add(
            Method::DELETE,
            "/baremetal/v1/nodes/{node_ident}",
            Rule::SYSTEM_ADMIN,
            "Delete a node",
            delete,
        )
        .answers_empty(204)
        .add(
            Method::POST,
            "/baremetal/v1/nodes/{node_ident}/deploy",
            Rule::PROJECT_MEMBER,
            "Deploy an instance on a node with its claim",
            deploy,
        )
        .accepts::<DeployNode>()
        .answers::<Node>(200)
        .add(
            Method::PUT,
            "/baremetal/v1/nodes/{node_ident}/maintenance",
            Rule::SYSTEM_ADMIN,
            "Put a node into maintenance (Ironic's action)",
            set_maintenance,
        )
        .accepts::<SetMaintenance>()
        .answers_empty(202)
        .add(
            Method::DELETE,
            "/baremetal/v1/nodes/{node_ident}/maintenance",
            Rule::SYSTEM_ADMIN,
            "Take a node out of maintenance (Ironic's action)",
            unset_maintenance,
        )
        .answers_empty(202)
        .add(
            Method::PUT,
            "/baremetal/v1/nodes/{node_ident}/states/provision",
            Rule::SYSTEM_ADMIN,
            "Move a node by Ironic's provision action: manage, provide, or deleted (tear down)",
            provision,
        )
        .accepts::<ProvisionTarget>()
        .answers_empty(202);
}

/// A node property: a string, a number or a boolean.
fn attr_value(key: &str, value: &Value) -> Result<AttrValue, ApiError> {
    attributes::attr_value(key, value)?.ok_or_else(|| {
        ApiError::bad_request(format!(
            "properties/{key} must be a string, a number or a boolean"
        ))
    })
}

/// A node as the API shows it to a caller of `project` (`None`: an admin): another project's
/// claim on it shows as `claimed` without its id.
pub(super) fn node_json(
    catalog: &Catalog,
    provider: &Provider,
    project: Option<&str>,
) -> Option<Node> {
    let node = provider.node()?;
    let claim = catalog.claim_on(provider.uuid());
    let seen = claim.filter(|c| project.is_none_or(|p| p == c.project_id));
    let claim_uuid = seen.filter(|c| c.allocation.is_none()).map(|c| c.uuid);
    let allocation_uuid = seen.filter(|c| c.allocation.is_some()).map(|c| c.uuid);
    let condition = provider.condition();
    Some(Node {
        uuid: provider.uuid().uuid(),
        name: provider.name().to_owned(),
        resource_class: node.resource_class.clone(),
        provision_state: node.provision_state.as_str().to_owned(),
        maintenance: condition.is_some(),
        maintenance_reason: condition.and_then(|c| c.reason.clone()),
        instance_uuid: node.instance_uuid,
        claimed: claim.is_some(),
        claim_uuid,
        allocation_uuid,
        properties: provider
            .attributes()
            .iter()
            .map(|(k, v)| (k.clone(), attr_json(v)))
            .collect(),
        traits: provider
            .traits()
            .iter()
            .map(|t| t.as_str().to_owned())
            .collect(),
        availability_zone: provider.availability_zone().map(str::to_owned),
        created_at: time(node.enrolled_at),
        updated_at: time(provider.updated_at()),
        links: vec![Link::to_self(format!(
            "/baremetal/v1/nodes/{}",
            provider.uuid()
        ))],
        leases: None,
    })
}

fn shown(catalog: &Catalog, ident: &str, project: Option<&str>) -> Result<Node, ApiError> {
    let provider = find_node(catalog, ident)?;
    Ok(node_json(catalog, provider, project).expect("invariant: find_node returns nodes"))
}

fn flag(query: &BTreeMap<String, String>, key: &str) -> Result<Option<bool>, ApiError> {
    match query.get(key).map(String::as_str) {
        None => Ok(None),
        Some("true" | "True" | "1") => Ok(Some(true)),
        Some("false" | "False" | "0") => Ok(Some(false)),
        Some(other) => Err(ApiError::bad_request(format!(
            "{key} must be true or false, got {other:?}"
        ))),
    }
}

async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Json<NodeList>, ApiError> {
    let provision_state =
        match query.get("provision_state") {
            None => None,
            Some(text) => Some(ProvisionState::parse(text).ok_or_else(|| {
                ApiError::bad_request(format!("Unknown provision_state {text:?}"))
            })?),
        };
    let filter = NodeFilter {
        provision_state,
        maintenance: flag(&query, "maintenance")?,
        associated: flag(&query, "associated")?,
        resource_class: query.get("resource_class").cloned(),
    };
    let project = caller.project_scope();
    let nodes = state
        .berth
        .nodes(filter, |catalog, provider| {
            node_json(catalog, provider, project.as_deref())
        })
        .await?
        .into_iter()
        .flatten()
        .collect();
    Ok(Json(NodeList { nodes }))
}

async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(ident): Path<String>,
) -> Result<Json<Node>, ApiError> {
    let project = caller.project_scope();
    let node = state
        .berth
        .read(|catalog| shown(catalog, &ident, project.as_deref()))
        .await??;
    Ok(Json(node))
}

const NODE_FIELDS: [&str; 8] = [
    "driver",
    "uuid",
    "name",
    "resource_class",
    "properties",
    "traits",
    "availability_zone",
    "provision_state",
];

fn text(body: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(Some(text.trim().to_owned())),
        Some(other) => Err(ApiError::bad_request(format!(
            "{key} must be a non-empty string, got {other}"
        ))),
    }
}

fn traits(value: Option<&Value>) -> Result<Vec<String>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| ApiError::bad_request("traits must be a list of strings"))
            })
            .collect(),
        Some(_) => Err(ApiError::bad_request("traits must be a list of strings")),
    }
}

fn properties(value: Option<&Value>) -> Result<berth_core::model::provider::Attributes, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| Ok((k.clone(), attr_value(k, v)?)))
            .collect(),
        Some(_) => Err(ApiError::bad_request("properties must be an object")),
    }
}

fn enrolment(body: &Map<String, Value>) -> Result<EnrollNode, ApiError> {
    if let Some(unknown) = body.keys().find(|k| !NODE_FIELDS.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "Unknown field {unknown:?}; a node has {}",
            NODE_FIELDS.join(", ")
        )));
    }
    // berth drives no hardware: Ironic's hardware type is read (it must be a string) and dropped.
    text(body, "driver")?;
    let provision_state = match text(body, "provision_state")? {
        None => ProvisionState::Enroll,
        Some(text) => ProvisionState::parse(&text)
            .ok_or_else(|| ApiError::bad_request(format!("Unknown provision_state {text:?}")))?,
    };
    Ok(EnrollNode {
        uuid: body
            .get("uuid")
            .map(|v| uuid_field("uuid", v).map(ProviderId::new))
            .transpose()?,
        name: text(body, "name")?,
        resource_class: text(body, "resource_class")?
            .ok_or_else(|| ApiError::bad_request("resource_class is required"))?,
        properties: properties(body.get("properties"))?,
        traits: traits(body.get("traits"))?,
        availability_zone: text(body, "availability_zone")?,
        provision_state,
    })
}

async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<(StatusCode, Json<Node>), ApiError> {
    let enrol = enrolment(&body)?;
    let _: EnrolNode = read_documented(&body)?;
    let uuid = state.berth.enroll_node(enrol).await?;
    let node = state
        .berth
        .read_local(|catalog| shown(catalog, &uuid.to_string(), None))?;
    Ok((StatusCode::CREATED, Json(node)))
}

/// The node changes of a JSON Patch (RFC 6902 `add`, `replace` and `remove` on `/name`,
/// `/properties/<key>`, `/traits`, `/maintenance`, `/maintenance_reason` and
/// `/provision_state`).
fn patch_changes(ops: &[Value]) -> Result<Vec<NodeChange>, ApiError> {
    let mut changes = Vec::new();
    let mut maintenance: Option<bool> = None;
    let mut reason: Option<String> = None;
    for op in ops {
        let kind = op["op"].as_str().unwrap_or_default();
        let path = op["path"].as_str().ok_or_else(|| {
            ApiError::bad_request(format!("Patch operation without a path: {op}"))
        })?;
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
        match path {
            "/name" if !removing => changes.push(NodeChange::Name(
                value
                    .as_str()
                    .ok_or_else(|| ApiError::bad_request("/name must be a string"))?
                    .to_owned(),
            )),
            "/traits" => changes.push(NodeChange::Traits(match removing {
                true => Vec::new(),
                false => traits(Some(value))?,
            })),
            "/maintenance" => {
                maintenance = Some(match removing {
                    true => false,
                    false => value
                        .as_bool()
                        .ok_or_else(|| ApiError::bad_request("/maintenance must be a boolean"))?,
                });
            }
            "/maintenance_reason" => reason = value.as_str().map(str::to_owned),
            "/provision_state" if !removing => {
                let text = value.as_str().unwrap_or_default();
                let state = ProvisionState::parse(text).ok_or_else(|| {
                    ApiError::bad_request(format!("Unknown provision_state {value}"))
                })?;
                changes.push(NodeChange::ProvisionState(state));
            }
            path if path.starts_with("/properties/") && path.len() > "/properties/".len() => {
                let key = &path["/properties/".len()..];
                changes.push(NodeChange::Property(
                    key.to_owned(),
                    match removing {
                        true => None,
                        false => Some(attr_value(key, value)?),
                    },
                ));
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "{kind} {other} is not a supported node change"
                )));
            }
        }
    }
    match (maintenance, reason) {
        (Some(on), reason) => changes.push(NodeChange::Maintenance(on, reason)),
        (None, Some(reason)) => changes.push(NodeChange::Maintenance(true, Some(reason))),
        (None, None) => {}
    }
    if changes.is_empty() {
        return Err(ApiError::bad_request("The patch changes nothing"));
    }
    Ok(changes)
}

async fn update(
    State(state): State<AppState>,
    Path(ident): Path<String>,
    PatchJson(body): PatchJson<Value>,
) -> Result<Json<Node>, ApiError> {
    let ops = body.as_array().ok_or_else(|| {
        ApiError::bad_request("The body must be a JSON Patch: a list of operations")
    })?;
    let changes = patch_changes(ops)?;
    let _: Vec<PatchOperation> = read_documented(&body)?;
    let (uuid, effects) = state.berth.update_node(ident, changes).await?;
    let mut node = state
        .berth
        .read_local(|catalog| shown(catalog, &uuid.to_string(), None))?;
    node.leases = Some(lease_effects(effects));
    Ok(Json(node))
}

async fn delete(
    State(state): State<AppState>,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.berth.delete_node(ident).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn deploy(
    State(state): State<AppState>,
    caller: Caller,
    Path(ident): Path<String>,
    ApiJson(body): ApiJson<Map<String, Value>>,
) -> Result<Json<Node>, ApiError> {
    let field = |key: &str| {
        body.get(key)
            .ok_or_else(|| ApiError::bad_request(format!("{key} is required")))
            .and_then(|v| uuid_field(key, v))
    };
    let (claim, instance) = (field("reservation_uuid")?, field("instance_uuid")?);
    let _: DeployNode = read_documented(&body)?;
    let project = caller.project_scope();
    state
        .berth
        .deploy_node(ident.clone(), claim, instance, project.clone())
        .await?;
    let node = state
        .berth
        .read_local(|catalog| shown(catalog, &ident, project.as_deref()))?;
    Ok(Json(node))
}

async fn set_maintenance(
    State(state): State<AppState>,
    Path(ident): Path<String>,
    ApiJson(body): ApiJson<SetMaintenance>,
) -> Result<StatusCode, ApiError> {
    let change = NodeChange::Maintenance(true, body.reason);
    state.berth.update_node(ident, vec![change]).await?;
    Ok(StatusCode::ACCEPTED)
}

async fn unset_maintenance(
    State(state): State<AppState>,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let change = NodeChange::Maintenance(false, None);
    state.berth.update_node(ident, vec![change]).await?;
    Ok(StatusCode::ACCEPTED)
}

/// The provision states an Ironic action moves a node through (decided at once: berth has no
/// conductor, so `provide` and a teardown's cleaning end where Ironic's would).
fn provision_path(target: &str) -> Result<Vec<ProvisionState>, ApiError> {
    match target {
        "manage" => Ok(vec![ProvisionState::Manageable]),
        "provide" => Ok(vec![ProvisionState::Available]),
        "deleted" | "undeploy" => Ok(vec![ProvisionState::Cleaning, ProvisionState::Available]),
        other => Err(ApiError::bad_request(format!(
            "The requested action \"{other}\" is not supported: berth serves manage, provide and deleted"
        ))),
    }
}

async fn provision(
    State(state): State<AppState>,
    Path(ident): Path<String>,
    ApiJson(body): ApiJson<ProvisionTarget>,
) -> Result<StatusCode, ApiError> {
    let changes = provision_path(&body.target)?
        .into_iter()
        .map(NodeChange::ProvisionState)
        .collect();
    state.berth.update_node(ident, changes).await?;
    Ok(StatusCode::ACCEPTED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::fields::{documented_fields, sorted};

    /// The fields the enrolment accepts by hand are exactly those its wire type documents.
    #[test]
    fn node_fields_are_the_documented_ones() {
        assert_eq!(documented_fields::<EnrolNode>(), sorted(&NODE_FIELDS));
    }
}
