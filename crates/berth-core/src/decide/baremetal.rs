//! Decisions about bare-metal nodes and node claims: enrol, change (explicit provision-state
//! transitions, maintenance, properties), delete, claim the first eligible node of a list (or
//! any node of a class), release, expire, and deploy with a claim.
//!
//! A claim is decided under the writer lock like every decision, over the latest committed
//! catalog of every replica, and holds its node through a Placement allocation of the node's
//! one unit: so two claims can never hold one node, whatever the number of clients or
//! replicas.

use crate::catalog::Catalog;
use crate::change::{Change, Decision};
use crate::decide::allocation::{ConsumerGeneration, ConsumerWrite, set_allocations_with};
use crate::decide::health::{self, Effects};
use crate::decide::inventory::{self, NewHost, enroll_host};
use crate::limits::{CLAIM_CANDIDATES_MAX, RESOURCE_CLASS_LEN_MAX, TRAITS_PER_PROVIDER_MAX};
use crate::model::baremetal::{
    AllocationRecord, NodeClaim, NodeRecord, ProvisionState, Unclaimable, placement_class,
};
use crate::model::consumer::Allocations;
use crate::model::id::ProviderId;
use crate::model::inventory::Inventory;
use crate::model::ledger::Window;
use crate::model::name::{ResourceClass, TraitName, is_custom_name};
use crate::model::provider::Attributes;
use crate::model::provider::{AttrValue, Provider, ProviderStatus};
use crate::model::time::{Instant, Span};

use crate::query::presentation::FencePolicy;
use crate::rejection::Rejection;
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

fn bad(text: impl Into<String>) -> Rejection {
    Rejection::BadNode(text.into())
}

/// A node to enrol.
#[derive(Debug, Clone)]
pub struct NewNode {
    /// Its uuid.
    pub uuid: ProviderId,
    /// Its name (unique among providers); the uuid when absent.
    pub name: Option<String>,
    /// Ironic's resource class, for example `baremetal-gold`.
    pub resource_class: String,
    /// Typed properties (`cpus`, `memory_mb`, `local_gb`, `cpu_arch`, ...).
    pub properties: Attributes,
    /// Traits (standard, or `CUSTOM_*`, created when missing).
    pub traits: Vec<String>,
    /// Its availability zone.
    pub availability_zone: Option<String>,
    /// The state to enrol it in: `enroll` (default), `manageable` or `available`.
    pub provision_state: ProvisionState,
}

fn check_resource_class(text: &str) -> Result<ResourceClass, Rejection> {
    let text = text.trim();
    if text.is_empty() || text.chars().count() > RESOURCE_CLASS_LEN_MAX {
        return Err(bad(format!(
            "resource_class must be 1 to {RESOURCE_CLASS_LEN_MAX} characters"
        )));
    }
    ResourceClass::parse(&placement_class(text))
        .ok_or_else(|| bad(format!("resource_class {text:?} is not usable")))
}

/// The traits named, with the changes that create the custom ones that do not exist yet.
fn traits_of(
    catalog: &Catalog,
    names: &[String],
) -> Result<(BTreeSet<TraitName>, Vec<Change>), Rejection> {
    let mut traits = BTreeSet::new();
    let mut created = Vec::new();
    for name in names {
        let parsed =
            TraitName::parse(name).ok_or_else(|| bad(format!("Invalid trait {name:?}")))?;
        if !catalog.has_trait(&parsed) {
            if !is_custom_name(name) {
                return Err(Rejection::UnknownTraits(name.clone()));
            }
            if !traits.contains(&parsed) {
                created.push(Change::TraitCreated(parsed.clone()));
            }
        }
        traits.insert(parsed);
    }
    Ok((traits, created))
}

/// Enrols a node: a new root provider with one unit of its class, its properties, traits and
/// node record, reservable as a host.
pub fn enroll_node(catalog: &Catalog, new: &NewNode, now: Instant) -> Decision {
    let name = new.name.clone().unwrap_or_else(|| new.uuid.to_string());
    if catalog.provider(new.uuid).is_some() {
        return Err(Rejection::DuplicateUuid(new.uuid));
    }
    if catalog.provider_by_name(&name).is_some() {
        return Err(Rejection::DuplicateName(name));
    }
    if !matches!(
        new.provision_state,
        ProvisionState::Enroll | ProvisionState::Manageable | ProvisionState::Available
    ) {
        return Err(bad(
            "provision_state at enrolment must be enroll, manageable or available",
        ));
    }
    let class = check_resource_class(&new.resource_class)?;
    let (traits, mut changes) = traits_of(catalog, &new.traits)?;
    if !catalog.has_resource_class(&class) {
        changes.insert(0, Change::ResourceClassCreated(class.clone()));
    }
    let host = NewHost {
        name,
        uuid: new.uuid,
        vcpus: None,
        memory_mb: None,
        local_gb: None,
        availability_zone: new.availability_zone.clone(),
        hypervisor_type: Some("ironic".to_owned()),
        service_name: None,
        attributes: Attributes::new(),
        reservable: true,
    };
    for (key, value) in &new.properties {
        inventory::check_node_property(key, Some(value))?;
    }
    changes.extend(
        enroll_host(catalog, &host, now)?
            .into_iter()
            .filter(|c| !matches!(c, Change::InventoriesReplaced { .. })),
    );
    changes.extend([
        Change::AttributesReplaced {
            uuid: new.uuid,
            attributes: new.properties.clone(),
        },
        Change::InventoriesReplaced {
            uuid: new.uuid,
            inventories: BTreeMap::from([(class, Inventory::simple(1))]),
        },
        Change::TraitsReplaced {
            uuid: new.uuid,
            traits,
        },
        Change::NodeSet {
            uuid: new.uuid,
            node: Some(NodeRecord {
                resource_class: new.resource_class.trim().to_owned(),
                provision_state: new.provision_state,
                instance_uuid: None,
                enrolled_at: now,
            }),
        },
    ]);
    Ok(changes)
}

/// A node found by uuid or name.
pub fn find_node<'c>(catalog: &'c Catalog, ident: &str) -> Result<&'c Provider, Rejection> {
    Uuid::parse_str(ident)
        .ok()
        .and_then(|uuid| catalog.provider(ProviderId::new(uuid)))
        .or_else(|| catalog.provider_by_name(ident))
        .filter(|p| p.node().is_some())
        .ok_or_else(|| Rejection::NodeNotFound(ident.to_owned()))
}

fn node_of(provider: &Provider) -> &NodeRecord {
    provider
        .node()
        .expect("invariant: find_node returns nodes only")
}

/// One change to a node (the operations of a PATCH).
#[derive(Debug, Clone, PartialEq)]
pub enum NodeChange {
    /// Rename.
    Name(String),
    /// Set (`Some`) or remove (`None`) a property.
    Property(String, Option<AttrValue>),
    /// Replace the traits.
    Traits(Vec<String>),
    /// Enter (`true`, with a reason) or leave maintenance.
    Maintenance(bool, Option<String>),
    /// Move to a provision state (an explicit transition).
    ProvisionState(ProvisionState),
}

/// Changes a node; returns the changes, and the node's uuid with what maintenance did to the
/// leases on it. Provision states move only along [`ProvisionState::may_become`] (409
/// otherwise); leaving `active` tears the instance down (its allocation goes); maintenance is
/// the provider's condition, so entering it heals the leases on the node.
pub fn update_node(
    catalog: &Catalog,
    ident: &str,
    edits: &[NodeChange],
    now: Instant,
) -> Result<(Vec<Change>, (ProviderId, Effects)), Rejection> {
    let provider = find_node(catalog, ident)?;
    let uuid = provider.uuid();
    let mut node = node_of(provider).clone();
    let mut changes = Vec::new();
    let mut effects = Effects::default();
    let mut attributes = Vec::new();
    let mut rename = None;
    for edit in edits {
        match edit {
            NodeChange::Name(name) => rename = Some(name.clone()),
            NodeChange::Property(key, value) => attributes.push((key.clone(), value.clone())),
            NodeChange::Traits(names) => {
                let (traits, created) = traits_of(catalog, names)?;
                changes.extend(created);
                changes.push(Change::TraitsReplaced { uuid, traits });
            }
            NodeChange::Maintenance(on, reason) => {
                let status = match on {
                    true => ProviderStatus::Maintenance,
                    false => ProviderStatus::Up,
                };
                let (more, done) = health::set_status(catalog, uuid, status, reason.clone(), now)?;
                changes.extend(more);
                effects = done;
            }
            NodeChange::ProvisionState(to) => {
                changes.extend(transition(catalog, uuid, &mut node, *to, now)?);
            }
        }
    }
    // Each of these writes the provider's whole row: the rename comes last so that it stays.
    if !attributes.is_empty() {
        let mut properties = provider.attributes().clone();
        for (key, value) in attributes {
            inventory::check_node_property(&key, value.as_ref())?;
            match value {
                Some(value) => properties.insert(key, value),
                None => properties.remove(&key),
            };
        }
        changes.extend([
            Change::AttributesReplaced {
                uuid,
                attributes: properties,
            },
            Change::ProviderUpdated(inventory::bumped(provider, now)),
        ]);
    }
    if let Some(name) = rename {
        changes.extend(inventory::update_provider(
            catalog,
            uuid,
            &name,
            None,
            inventory::Reparenting::Refused,
            now,
        )?);
    }
    changes.push(Change::NodeSet {
        uuid,
        node: Some(node),
    });
    Ok((changes, (uuid, effects)))
}

/// Moves `node` to provision state `to`: only an explicit transition; leaving `active` tears the
/// instance down (its allocation goes); a claimed node cannot be taken out of `available`.
fn transition(
    catalog: &Catalog,
    uuid: ProviderId,
    node: &mut NodeRecord,
    to: ProvisionState,
    now: Instant,
) -> Decision {
    if !node.provision_state.may_become(to) {
        return Err(Rejection::NodeTransition {
            node: uuid,
            from: node.provision_state.as_str(),
            to: to.as_str().to_owned(),
        });
    }
    if node.provision_state == ProvisionState::Available
        && let Some(claim) = catalog.claim_on(uuid)
    {
        return Err(Rejection::NodeInUse(format!(
            "Node {uuid} is claimed by reservation {}; release it first",
            claim.uuid
        )));
    }
    let mut changes = Vec::new();
    // A teardown ends the node's allocation (Ironic's), as it ends its instance.
    if node.provision_state == ProvisionState::Active
        && let Some(claim) = catalog.claim_on(uuid)
    {
        changes.push(Change::ClaimSet {
            uuid: claim.uuid,
            claim: None,
        });
    }
    if node.provision_state == ProvisionState::Active
        && let Some(instance) = node.instance_uuid.take()
        && catalog.consumer(instance).is_some()
    {
        changes.extend(crate::decide::allocation::delete_allocations(
            catalog, instance, now,
        )?);
    }
    node.provision_state = to;
    Ok(changes)
}

/// Deletes a node; refused while it is deployed, claimed, used or reserved.
pub fn delete_node(catalog: &Catalog, ident: &str) -> Decision {
    let provider = find_node(catalog, ident)?;
    let uuid = provider.uuid();
    if node_of(provider).provision_state == ProvisionState::Active {
        return Err(Rejection::NodeInUse(format!("Node {uuid} is active")));
    }
    if let Some(claim) = catalog.claim_on(uuid) {
        return Err(Rejection::NodeInUse(format!(
            "Node {uuid} is claimed by reservation {}",
            claim.uuid
        )));
    }
    let mut changes = vec![Change::NodeSet { uuid, node: None }];
    changes.extend(
        inventory::delete_host(catalog, provider.id()).map_err(|rejection| match rejection {
            Rejection::HostInUse(_) => {
                Rejection::NodeInUse(format!("Node {uuid} is in use or reserved by a lease"))
            }
            other => other,
        })?,
    );
    Ok(changes)
}

/// Which nodes a claim may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidates {
    /// These nodes, the first eligible one in list order.
    Nodes(Vec<ProviderId>),
    /// Any node of this Ironic resource class having all these traits, in enrolment order.
    Class {
        /// The resource class.
        resource_class: String,
        /// Required traits.
        traits: Vec<String>,
        /// Only among these nodes (empty: any node of the class).
        among: Vec<ProviderId>,
    },
}

/// A claim to make.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The claim's uuid.
    pub uuid: Uuid,
    /// The instance it is for.
    pub instance_uuid: Uuid,
    /// The nodes it may take.
    pub candidates: Candidates,
    /// The claiming project.
    pub project_id: String,
    /// The claiming user.
    pub user_id: String,
    /// How long it holds (an allocation holds until it is deleted).
    pub ttl: Span,
    /// Present when the claim is an Ironic allocation.
    pub allocation: Option<AllocationRecord>,
}

fn unclaimable(
    node_uuid: ProviderId,
    reason: &'static str,
    detail: impl Into<String>,
) -> Unclaimable {
    Unclaimable {
        node_uuid,
        reason,
        detail: detail.into(),
    }
}

/// The allocation a claim writes: the node's one unit of its class, to the instance.
fn claim_write(request: &ClaimRequest, node: &Provider, record: &NodeRecord) -> ConsumerWrite {
    let class = ResourceClass::parse(&placement_class(&record.resource_class))
        .expect("invariant: an enrolled node's class parses");
    ConsumerWrite {
        consumer: request.instance_uuid,
        project_id: request.project_id.clone(),
        user_id: request.user_id.clone(),
        consumer_type: Some("INSTANCE".to_owned()),
        generation: ConsumerGeneration::New,
        allocations: Allocations::from([(node.uuid(), BTreeMap::from([(class, 1)]))]),
        reservation: None,
    }
}

/// Whether `uuid` can be claimed now by the request: the changes that claim it, or why not.
fn try_node(
    catalog: &Catalog,
    request: &ClaimRequest,
    uuid: ProviderId,
    now: Instant,
    policy: FencePolicy,
) -> Result<Vec<Change>, Unclaimable> {
    let Some(provider) = catalog.provider(uuid) else {
        return Err(unclaimable(uuid, "not_found", "no such node"));
    };
    let Some(node) = provider.node() else {
        return Err(unclaimable(uuid, "not_a_node", "not a bare-metal node"));
    };
    if let Some(condition) = provider.condition() {
        let why = condition.reason.as_deref().unwrap_or("no reason given");
        return Err(unclaimable(
            uuid,
            "maintenance",
            format!("in {} ({why})", condition.status.as_str()),
        ));
    }
    if node.provision_state != ProvisionState::Available {
        return Err(unclaimable(
            uuid,
            "provision_state",
            format!("provision state is {}", node.provision_state.as_str()),
        ));
    }
    if let Some(instance) = node.instance_uuid {
        return Err(unclaimable(
            uuid,
            "associated",
            format!("associated with instance {instance}"),
        ));
    }
    if let Some(claim) = catalog.claim_on(uuid) {
        let detail = match (claim.allocation.is_some(), claim.live_at(now)) {
            (true, _) => format!("held by allocation {}", claim.uuid),
            (false, true) => format!("claimed by reservation {}", claim.uuid),
            (false, false) => format!("claim {} expired and is being released", claim.uuid),
        };
        return Err(unclaimable(uuid, "claimed", detail));
    }
    let window = Window::onwards(now);
    let foreign = catalog
        .leases_holding(uuid)
        .filter(|l| l.holds_capacity() && l.window().overlaps(&window))
        .any(|l| *l.project_id != *request.project_id);
    if foreign {
        return Err(unclaimable(
            uuid,
            "reserved",
            "reserved by a lease of another project",
        ));
    }
    set_allocations_with(
        catalog,
        &[claim_write(request, provider, node)],
        now,
        policy,
    )
    .map_err(|rejection| match rejection {
        Rejection::Fenced { .. } => {
            unclaimable(uuid, "reserved", "reserved by a lease that has not started")
        }
        other => unclaimable(uuid, "in_use", other.to_string()),
    })
}

/// The nodes a request lists, checked: not empty, no duplicates, at most
/// [`CLAIM_CANDIDATES_MAX`]; for a class, the class's nodes having the traits, in enrolment
/// order.
fn candidates(catalog: &Catalog, request: &ClaimRequest) -> Result<Vec<ProviderId>, Rejection> {
    match &request.candidates {
        Candidates::Nodes(nodes) => {
            if nodes.is_empty() {
                return Err(bad("node_uuid must list at least one node"));
            }
            if nodes.len() > CLAIM_CANDIDATES_MAX {
                return Err(bad(format!(
                    "node_uuid lists more than {CLAIM_CANDIDATES_MAX} nodes"
                )));
            }
            let mut seen = BTreeSet::new();
            if let Some(twice) = nodes.iter().find(|n| !seen.insert(**n)) {
                return Err(bad(format!("node_uuid lists {twice} more than once")));
            }
            Ok(nodes.clone())
        }
        Candidates::Class {
            resource_class,
            traits,
            among,
        } => {
            let class = check_resource_class(resource_class)?;
            // Both are the caller's, and the filter below runs under the writer lock.
            if among.len() > CLAIM_CANDIDATES_MAX {
                return Err(bad(format!(
                    "candidate_nodes lists more than {CLAIM_CANDIDATES_MAX} nodes"
                )));
            }
            if traits.len() > TRAITS_PER_PROVIDER_MAX {
                return Err(bad(format!(
                    "traits lists more than {TRAITS_PER_PROVIDER_MAX} traits"
                )));
            }
            let among: BTreeSet<ProviderId> = among.iter().copied().collect();
            let wanted: Vec<TraitName> = traits
                .iter()
                .map(|t| TraitName::parse(t).ok_or_else(|| bad(format!("Invalid trait {t:?}"))))
                .collect::<Result<_, _>>()?;
            Ok(catalog
                .providers()
                .filter(|p| p.node().is_some() && p.inventories().contains_key(&class))
                .filter(|p| wanted.iter().all(|t| p.traits().contains(t)))
                .map(Provider::uuid)
                .filter(|uuid| among.is_empty() || among.contains(uuid))
                .collect())
        }
    }
}

/// Claims the first eligible node of the request for its instance, or refuses with why each
/// listed node could not be taken (in list order).
pub fn claim(
    catalog: &Catalog,
    request: &ClaimRequest,
    now: Instant,
    policy: FencePolicy,
) -> Result<(Vec<Change>, NodeClaim), Rejection> {
    if request.allocation.is_none() && request.ttl.is_zero() {
        return Err(bad("ttl must be a positive number of seconds"));
    }
    let nodes = candidates(catalog, request)?;
    if catalog.consumer(request.instance_uuid).is_some() {
        return Err(Rejection::NodeInUse(format!(
            "Instance {} already holds a node or other allocations",
            request.instance_uuid
        )));
    }
    let mut reasons = Vec::new();
    for uuid in nodes {
        match try_node(catalog, request, uuid, now, policy) {
            Ok(mut changes) => {
                let claim = NodeClaim {
                    uuid: request.uuid,
                    node_uuid: uuid,
                    instance_uuid: request.instance_uuid,
                    project_id: request.project_id.clone(),
                    user_id: request.user_id.clone(),
                    created_at: now,
                    updated_at: now,
                    expires_at: match request.allocation {
                        Some(_) => NodeClaim::NEVER,
                        None => now + request.ttl,
                    },
                    allocation: request.allocation.clone(),
                };
                changes.push(Change::ClaimSet {
                    uuid: claim.uuid,
                    claim: Some(claim.clone()),
                });
                return Ok((changes, claim));
            }
            Err(reason) => reasons.push(reason),
        }
    }
    Err(Rejection::NoNodeClaimable(reasons))
}

/// The changes that end a claim that was not deployed: the claim goes, and its allocation
/// with it.
fn end_claim(catalog: &Catalog, claim: &NodeClaim, now: Instant) -> Vec<Change> {
    let mut changes = Vec::new();
    let deployed = catalog
        .provider(claim.node_uuid)
        .and_then(Provider::node)
        .is_some_and(|n| n.instance_uuid == Some(claim.instance_uuid));
    #[cfg(feature = "planted-defects")]
    let deployed = deployed || crate::planted::planted(crate::planted::Defect::ClaimKeepsNode);
    if !deployed && catalog.consumer(claim.instance_uuid).is_some() {
        changes.extend(
            crate::decide::allocation::delete_allocations(catalog, claim.instance_uuid, now)
                .unwrap_or_default(),
        );
    }
    changes.push(Change::ClaimSet {
        uuid: claim.uuid,
        claim: None,
    });
    changes
}

/// Releases a claim (`project`: only that project's; `None`: an admin, any).
pub fn release_claim(
    catalog: &Catalog,
    uuid: Uuid,
    project: Option<&str>,
    now: Instant,
) -> Decision {
    let claim = catalog
        .claim(uuid)
        .filter(|c| project.is_none_or(|p| p == c.project_id))
        .ok_or(Rejection::ClaimNotFound(uuid))?;
    Ok(end_claim(catalog, claim, now))
}

/// Releases claim `uuid` if it has expired by `now` (the lifecycle engine's action; nothing
/// when it is gone or still live).
pub fn expire_claim(catalog: &Catalog, uuid: Uuid, now: Instant) -> Vec<Change> {
    match catalog.claim(uuid) {
        Some(claim) if !claim.live_at(now) => end_claim(catalog, claim, now),
        _ => Vec::new(),
    }
}

/// Deploys the instance of a live claim on its node: the node becomes `active` with the
/// instance, the claim is used up (an Ironic allocation stays, as it does in Ironic) and the
/// Placement allocation stays (the instance holds the node).
/// Anything else is refused with 409: no claim, someone else's, another node's or another
/// instance's, or one that expired.
pub fn deploy(
    catalog: &Catalog,
    ident: &str,
    claim_uuid: Uuid,
    instance_uuid: Uuid,
    project: Option<&str>,
    now: Instant,
) -> Decision {
    let provider = find_node(catalog, ident)?;
    let uuid = provider.uuid();
    let refuse = |why: String| Err(Rejection::DeployRefused(why));
    let Some(claim) = catalog
        .claim(claim_uuid)
        .filter(|c| project.is_none_or(|p| p == c.project_id))
    else {
        return refuse(format!(
            "Node {uuid} can only be deployed with a live reservation of the caller; {claim_uuid} is not one"
        ));
    };
    if claim.node_uuid != uuid {
        return refuse(format!(
            "Reservation {claim_uuid} holds node {}, not {uuid}",
            claim.node_uuid
        ));
    }
    if claim.instance_uuid != instance_uuid {
        return refuse(format!(
            "Reservation {claim_uuid} is for instance {}, not {instance_uuid}",
            claim.instance_uuid
        ));
    }
    if !claim.live_at(now) {
        return refuse(format!("Reservation {claim_uuid} has expired"));
    }
    let node = node_of(provider);
    if node.provision_state != ProvisionState::Available || !provider.is_up() {
        return refuse(format!(
            "Node {uuid} is {} and {}",
            node.provision_state.as_str(),
            provider.status().as_str()
        ));
    }
    let kept = claim.allocation.as_ref().map(|_| NodeClaim {
        updated_at: now,
        ..claim.clone()
    });
    Ok(vec![
        Change::ClaimSet {
            uuid: claim_uuid,
            claim: kept,
        },
        Change::NodeSet {
            uuid,
            node: Some(NodeRecord {
                provision_state: ProvisionState::Active,
                instance_uuid: Some(instance_uuid),
                ..node.clone()
            }),
        },
    ])
}
