//! Bare-metal nodes and claims through the public API: the first eligible node of a list is
//! claimed, every other listed node says why it was not, a claim holds its node through a
//! Placement allocation until it is deployed, released or expires, deploying needs the claim,
//! and provision states move only along explicit transitions. As a property: random claims,
//! releases, deployments, teardowns and time passing never leave a node claimed twice, never
//! let a claim and an instance share a node, and every claim's node is allocated to its
//! instance. Ironic allocations are claims that never expire, with unique names, backfilled
//! for deployed nodes and ended by a teardown.

mod support;

use berth_core::decide::baremetal::{
    Candidates, ClaimRequest, NewNode, NodeChange, claim, delete_node, deploy, enroll_node,
    release_claim, update_node,
};
use berth_core::decide::lease::{NewLease, create_lease};
use berth_core::decide::node_allocation::{self, AllocationPatch, Backfill};
use berth_core::model::baremetal::{AllocationRecord, NodeClaim, ProvisionState};
use berth_core::model::provider::Attributes;
use berth_core::query::baremetal::find_allocation;
use berth_core::query::presentation::FencePolicy;
use berth_core::{AttrValue, Instant, LeaseId, ProviderId, Rejection, ReservationId};
use proptest::prelude::*;
use support::{TICK, World};
use uuid::Uuid;

const TTL: i64 = 2 * TICK;

fn node_uuid(idx: u128) -> ProviderId {
    ProviderId::from_u128(0xB000 + idx)
}

/// `count` available nodes of class `baremetal-gold` (the even ones with a GPU trait).
fn world(count: u128) -> World {
    let mut w = World::with_hosts(0, |_| (None, Attributes::new()));
    for idx in 0..count {
        let new = NewNode {
            uuid: node_uuid(idx),
            name: Some(format!("n{idx}")),
            resource_class: "baremetal-gold".into(),
            properties: Attributes::from([
                ("cpus".to_owned(), AttrValue::Number(32.0)),
                ("cpu_arch".to_owned(), AttrValue::String("x86_64".into())),
            ]),
            traits: match idx % 2 {
                0 => vec!["CUSTOM_GPU".into()],
                _ => Vec::new(),
            },
            availability_zone: None,
            provision_state: ProvisionState::Available,
        };
        let changes = enroll_node(&w.catalog, &new, w.at()).expect("enrolled");
        w.apply(&changes);
    }
    w
}

fn request(w: &mut World, instance: Uuid, project: &str, nodes: Vec<ProviderId>) -> ClaimRequest {
    ClaimRequest {
        uuid: w.id(),
        instance_uuid: instance,
        candidates: Candidates::Nodes(nodes),
        project_id: project.into(),
        user_id: "u".into(),
        ttl: berth_core::Span::from_micros(TTL),
        allocation: None,
    }
}

fn claim_in(w: &mut World, request: &ClaimRequest) -> Result<NodeClaim, Rejection> {
    let (changes, made) = claim(&w.catalog, request, w.at(), FencePolicy::Enforced)?;
    w.apply(&changes);
    Ok(made)
}

fn edit(w: &mut World, node: ProviderId, change: NodeChange) -> Result<(), Rejection> {
    let (changes, _) = update_node(&w.catalog, &node.to_string(), &[change], w.at())?;
    w.apply(&changes);
    Ok(())
}

fn state(w: &World, node: ProviderId) -> ProvisionState {
    w.catalog
        .provider(node)
        .and_then(|p| p.node())
        .expect("a node")
        .provision_state
}

/// A lease of project `project` on node `name` from `at.0` to `at.1` ticks from now.
fn reserve(w: &mut World, project: &str, name: &str, at: (i64, i64)) {
    let lease = NewLease {
        id: LeaseId::new(w.id()),
        name: "other".into(),
        project_id: project.into(),
        user_id: "u".into(),
        start: Instant::from_micros((w.now + at.0) * TICK),
        end: Instant::from_micros((w.now + at.1) * TICK),
        before_end: None,
        reservations: vec![(
            ReservationId::new(w.id()),
            support::one_host_where(format!(r#"["==", "$hypervisor_hostname", "{name}"]"#)),
        )],
        event_ids: [w.id(), w.id(), w.id()],
        notice_lead: berth_core::Span::ZERO,
    };
    let horizon = Instant::from_micros((w.now + 100) * TICK);
    let (changes, _) = create_lease(
        &w.catalog,
        &lease,
        w.at(),
        &berth_core::decide::admission::Search::until(horizon),
    )
    .expect("reserved");
    w.apply(&changes);
}

#[test]
fn the_first_eligible_node_is_claimed_and_the_others_say_why_not() {
    let mut w = world(6);
    let n = node_uuid;
    // n0 in maintenance, n1 manageable, n2 claimed, n3 deployed, n4 reserved by another
    // project's lease, n5 free.
    edit(
        &mut w,
        n(0),
        NodeChange::Maintenance(true, Some("disk".into())),
    )
    .expect("ok");
    edit(
        &mut w,
        n(1),
        NodeChange::ProvisionState(ProvisionState::Manageable),
    )
    .expect("ok");
    let first = request(&mut w, Uuid::from_u128(1), "p", vec![n(2)]);
    claim_in(&mut w, &first).expect("n2 is free");
    let second = request(&mut w, Uuid::from_u128(2), "p", vec![n(3)]);
    let on_n3 = claim_in(&mut w, &second).expect("n3 is free");
    let changes = deploy(
        &w.catalog,
        &n(3).to_string(),
        on_n3.uuid,
        on_n3.instance_uuid,
        Some("p"),
        w.at(),
    )
    .expect("deployed");
    w.apply(&changes);
    reserve(&mut w, "q", "n4", (5, 9));

    let unknown = ProviderId::from_u128(0xDEAD);
    let all: Vec<ProviderId> = vec![unknown, n(0), n(1), n(2), n(3), n(4)];
    let refused = request(&mut w, Uuid::from_u128(3), "p", all.clone());
    let Err(Rejection::NoNodeClaimable(reasons)) = claim_in(&mut w, &refused) else {
        panic!("nothing listed is claimable");
    };
    let got: Vec<(ProviderId, &str)> = reasons.iter().map(|r| (r.node_uuid, r.reason)).collect();
    assert_eq!(
        got,
        [
            (unknown, "not_found"),
            (n(0), "maintenance"),
            (n(1), "provision_state"),
            (n(2), "claimed"),
            (n(3), "provision_state"),
            (n(4), "reserved"),
        ]
    );
    // With n5 at the end of the list, it is the one claimed; the lease's own project can
    // claim n4, the first in its list.
    let mut with_free = all.clone();
    with_free.push(n(5));
    let ok = request(&mut w, Uuid::from_u128(3), "p", with_free);
    assert_eq!(claim_in(&mut w, &ok).expect("n5").node_uuid, n(5));
    let owner = request(&mut w, Uuid::from_u128(4), "q", vec![n(4), n(5)]);
    let Err(Rejection::NoNodeClaimable(reasons)) = claim_in(&mut w, &owner) else {
        panic!("a lease that has not started fences its node, even from its own project");
    };
    assert_eq!(reasons[0].reason, "reserved");
    // Once the lease runs, its project claims the node; another project still cannot.
    w.now += 5;
    w.fire_due();
    let stranger = request(&mut w, Uuid::from_u128(5), "p", vec![n(4)]);
    let Err(Rejection::NoNodeClaimable(reasons)) = claim_in(&mut w, &stranger) else {
        panic!("a running lease keeps its node for its project");
    };
    assert_eq!(reasons[0].reason, "reserved");
    let owner = request(&mut w, Uuid::from_u128(4), "q", vec![n(4)]);
    assert_eq!(
        claim_in(&mut w, &owner)
            .expect("the lease's project")
            .node_uuid,
        n(4)
    );
}

#[test]
fn bad_claims_are_refused_before_any_node_is_looked_at() {
    let mut w = world(2);
    let empty = request(&mut w, Uuid::from_u128(1), "p", Vec::new());
    assert!(matches!(
        claim_in(&mut w, &empty),
        Err(Rejection::BadNode(_))
    ));
    let twice = request(
        &mut w,
        Uuid::from_u128(1),
        "p",
        vec![node_uuid(0), node_uuid(0)],
    );
    assert!(matches!(
        claim_in(&mut w, &twice),
        Err(Rejection::BadNode(_))
    ));
    let first = request(&mut w, Uuid::from_u128(1), "p", vec![node_uuid(0)]);
    claim_in(&mut w, &first).expect("claimed");
    let again = request(&mut w, Uuid::from_u128(1), "p", vec![node_uuid(1)]);
    assert!(
        matches!(claim_in(&mut w, &again), Err(Rejection::NodeInUse(_))),
        "one instance, one node"
    );
}

#[test]
fn a_claim_by_class_and_traits_takes_a_matching_node() {
    let mut w = world(4);
    let mut by_class = request(&mut w, Uuid::from_u128(1), "p", Vec::new());
    by_class.candidates = Candidates::Class {
        resource_class: "baremetal-gold".into(),
        traits: vec!["CUSTOM_GPU".into()],
        among: Vec::new(),
    };
    assert_eq!(
        claim_in(&mut w, &by_class).expect("n0").node_uuid,
        node_uuid(0)
    );
    by_class.uuid = w.id();
    by_class.instance_uuid = Uuid::from_u128(2);
    assert_eq!(
        claim_in(&mut w, &by_class).expect("n2").node_uuid,
        node_uuid(2)
    );
    by_class.uuid = w.id();
    by_class.instance_uuid = Uuid::from_u128(3);
    assert!(matches!(
        claim_in(&mut w, &by_class),
        Err(Rejection::NoNodeClaimable(_))
    ));
}

#[test]
fn deploying_needs_the_live_claim_and_expiry_frees_the_node() {
    let mut w = world(2);
    let n0 = node_uuid(0);
    let mine = request(&mut w, Uuid::from_u128(1), "p", vec![n0]);
    let made = claim_in(&mut w, &mine).expect("claimed");
    let attempt = |w: &World, claim: Uuid, instance: Uuid, project: &str| {
        deploy(
            &w.catalog,
            &n0.to_string(),
            claim,
            instance,
            Some(project),
            w.at(),
        )
    };
    for (claim, instance, project) in [
        (Uuid::from_u128(77), made.instance_uuid, "p"),
        (made.uuid, Uuid::from_u128(78), "p"),
        (made.uuid, made.instance_uuid, "someone-else"),
    ] {
        assert!(matches!(
            attempt(&w, claim, instance, project),
            Err(Rejection::DeployRefused(_))
        ));
    }
    // The claim lapses; until the engine fires the expiry it still cannot deploy.
    w.now += 3;
    assert!(matches!(
        attempt(&w, made.uuid, made.instance_uuid, "p"),
        Err(Rejection::DeployRefused(_))
    ));
    w.fire_due();
    assert!(w.catalog.claim(made.uuid).is_none(), "expired and released");
    assert!(
        w.catalog.consumer(made.instance_uuid).is_none(),
        "its allocation went too"
    );
    let again = request(&mut w, Uuid::from_u128(2), "p", vec![n0]);
    let made = claim_in(&mut w, &again).expect("the node is free again");
    let changes = attempt(&w, made.uuid, made.instance_uuid, "p").expect("deployed");
    w.apply(&changes);
    assert_eq!(state(&w, n0), ProvisionState::Active);
    assert!(w.catalog.claim(made.uuid).is_none(), "the claim is used up");
    assert!(
        w.catalog.consumer(made.instance_uuid).is_some(),
        "the instance holds the node"
    );
    assert!(matches!(
        delete_node(&w.catalog, &n0.to_string()),
        Err(Rejection::NodeInUse(_))
    ));
    // Teardown: the instance's allocation goes, the node is cleaned, then offered again.
    assert!(matches!(
        edit(
            &mut w,
            n0,
            NodeChange::ProvisionState(ProvisionState::Available)
        ),
        Err(Rejection::NodeTransition { .. })
    ));
    edit(
        &mut w,
        n0,
        NodeChange::ProvisionState(ProvisionState::Cleaning),
    )
    .expect("teardown");
    assert!(w.catalog.consumer(made.instance_uuid).is_none());
    edit(
        &mut w,
        n0,
        NodeChange::ProvisionState(ProvisionState::Available),
    )
    .expect("clean");
    let changes = delete_node(&w.catalog, &n0.to_string()).expect("deletable");
    w.apply(&changes);
    assert!(w.catalog.provider(n0).is_none());
}

#[test]
fn releasing_is_for_the_claims_project_or_an_admin() {
    let mut w = world(1);
    let mine = request(&mut w, Uuid::from_u128(1), "p", vec![node_uuid(0)]);
    let made = claim_in(&mut w, &mine).expect("claimed");
    assert_eq!(
        release_claim(&w.catalog, made.uuid, Some("q"), w.at()),
        Err(Rejection::ClaimNotFound(made.uuid))
    );
    let changes = release_claim(&w.catalog, made.uuid, None, w.at()).expect("admin");
    w.apply(&changes);
    assert!(w.catalog.consumer(made.instance_uuid).is_none());
}

#[derive(Debug, Clone)]
enum Op {
    Claim { instance: u8, nodes: Vec<u8> },
    Release { pick: usize },
    Deploy { pick: usize },
    Teardown { node: u8 },
    Advance,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..12, prop::collection::vec(0u8..6, 1..5)).prop_map(|(instance, mut nodes)| {
            nodes.dedup();
            Op::Claim { instance, nodes }
        }),
        1 => any::<usize>().prop_map(|pick| Op::Release { pick }),
        2 => any::<usize>().prop_map(|pick| Op::Deploy { pick }),
        1 => (0u8..6).prop_map(|node| Op::Teardown { node }),
        1 => Just(Op::Advance),
    ]
}

fn pick(w: &World, pick: usize) -> Option<NodeClaim> {
    let claims: Vec<&NodeClaim> = w.catalog.claims().collect();
    claims.get(pick % claims.len().max(1)).map(|c| (*c).clone())
}

fn check(w: &World) {
    for claim in w.catalog.claims() {
        let consumer = w
            .catalog
            .consumer(claim.instance_uuid)
            .expect("claim allocated");
        assert_eq!(
            consumer
                .entries()
                .map(|(p, _, n)| (p, n))
                .collect::<Vec<_>>(),
            [(claim.node_uuid, 1)]
        );
    }
    for idx in 0..6 {
        let provider = w.catalog.provider(node_uuid(idx)).expect("node");
        let used: u64 = provider.usages().values().sum();
        assert!(used <= 1, "node {idx} is held twice");
        let node = provider.node().expect("node");
        let claimed = w.catalog.claim_on(node_uuid(idx)).is_some();
        assert!(
            !(claimed && node.instance_uuid.is_some()),
            "claimed and deployed at once"
        );
        assert_eq!(used == 1, claimed || node.instance_uuid.is_some());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_node_is_never_held_twice(ops in prop::collection::vec(op(), 1..40)) {
        let mut w = world(6);
        for op in ops {
            match op {
                Op::Claim { instance, nodes } => {
                    let nodes = nodes.into_iter().map(|n| node_uuid(u128::from(n))).collect();
                    let r = request(&mut w, Uuid::from_u128(u128::from(instance) + 1), "p", nodes);
                    let _ = claim_in(&mut w, &r);
                }
                Op::Release { pick: p } => {
                    if let Some(c) = pick(&w, p) {
                        let changes = release_claim(&w.catalog, c.uuid, Some("p"), w.at()).expect("ok");
                        w.apply(&changes);
                    }
                }
                Op::Deploy { pick: p } => {
                    if let Some(c) = pick(&w, p) {
                        let at = w.at();
                        if let Ok(changes) = deploy(&w.catalog, &c.node_uuid.to_string(), c.uuid, c.instance_uuid, Some("p"), at) {
                            w.apply(&changes);
                        }
                    }
                }
                Op::Teardown { node } => {
                    let _ = edit(&mut w, node_uuid(u128::from(node)), NodeChange::ProvisionState(ProvisionState::Cleaning))
                        .and_then(|()| edit(&mut w, node_uuid(u128::from(node)), NodeChange::ProvisionState(ProvisionState::Available)));
                }
                Op::Advance => {
                    w.now += 1;
                    w.fire_due();
                }
            }
            check(&w);
        }
    }
}

/// An Ironic allocation of class `baremetal-gold` with `traits`, among `among` (any when empty).
fn allocation(w: &mut World, name: &str, traits: &[&str], among: Vec<ProviderId>) -> ClaimRequest {
    let uuid = w.id();
    let record = AllocationRecord {
        name: Some(name.into()),
        resource_class: "baremetal-gold".into(),
        candidate_nodes: among.clone(),
        traits: traits.iter().map(|t| (*t).to_owned()).collect(),
        extra: "{}".into(),
        owner: Some("p".into()),
    };
    ClaimRequest {
        uuid,
        instance_uuid: uuid,
        candidates: Candidates::Class {
            resource_class: record.resource_class.clone(),
            traits: record.traits.clone(),
            among,
        },
        project_id: "p".into(),
        user_id: "u".into(),
        ttl: berth_core::Span::ZERO,
        allocation: Some(record),
    }
}

fn allocate_in(w: &mut World, request: &ClaimRequest) -> Result<NodeClaim, Rejection> {
    let (changes, made) =
        node_allocation::allocate(&w.catalog, request, w.at(), FencePolicy::Enforced)?;
    w.apply(&changes);
    Ok(made)
}

#[test]
fn an_allocation_is_a_claim_that_never_expires_and_whose_name_is_unique() {
    let mut w = world(4);
    let gpu = allocation(&mut w, "a0", &["CUSTOM_GPU"], Vec::new());
    let made = allocate_in(&mut w, &gpu).expect("n0");
    assert_eq!(made.node_uuid, node_uuid(0));
    assert_eq!(made.expires_at, NodeClaim::NEVER);
    assert_eq!(
        w.catalog.next_due(),
        None,
        "nothing for the lifecycle engine"
    );
    // Among candidates: the first eligible one of the class.
    let among = allocation(&mut w, "a1", &[], vec![node_uuid(3), node_uuid(0)]);
    assert_eq!(
        allocate_in(&mut w, &among).expect("n3").node_uuid,
        node_uuid(3)
    );
    // Time passes: both still hold.
    w.now += 100;
    w.fire_due();
    assert_eq!(w.catalog.claims().count(), 2);
    let twice = allocation(&mut w, "a0", &[], Vec::new());
    assert!(
        matches!(allocate_in(&mut w, &twice), Err(Rejection::NodeInUse(_))),
        "a name is taken once"
    );
    let mut same_uuid = allocation(&mut w, "a2", &[], Vec::new());
    same_uuid.uuid = made.uuid;
    assert!(matches!(
        allocate_in(&mut w, &same_uuid),
        Err(Rejection::NodeInUse(_))
    ));
    let none = allocation(
        &mut w,
        "a3",
        &["CUSTOM_GPU"],
        vec![node_uuid(0), node_uuid(1)],
    );
    match allocate_in(&mut w, &none) {
        Err(Rejection::NoNodeClaimable(reasons)) => {
            assert_eq!(reasons.len(), 1, "n1 has no GPU: {reasons:?}");
            assert_eq!(reasons[0].reason, "claimed");
        }
        other => panic!("{other:?}"),
    }
    // A renamed allocation keeps the rest; the edit sees the record as it is.
    let (changes, _) = node_allocation::update_allocation(
        &w.catalog,
        "a1",
        Some("p"),
        |record| {
            assert_eq!(record.candidate_nodes, vec![node_uuid(3), node_uuid(0)]);
            Ok(AllocationPatch {
                name: Some(Some("renamed".into())),
                extra: Some(r#"{"k":"v"}"#.into()),
            })
        },
        w.at(),
    )
    .expect("renamed");
    w.apply(&changes);
    let renamed = find_allocation(&w.catalog, "renamed", None).expect("found by its new name");
    assert_eq!(renamed.node_uuid, node_uuid(3));
    assert!(
        find_allocation(&w.catalog, "renamed", Some("q")).is_none(),
        "not another project's"
    );
    // Deleting frees the node for the next.
    let changes =
        node_allocation::delete_allocation(&w.catalog, "renamed", Some("p"), w.at()).expect("gone");
    w.apply(&changes);
    let again = allocation(&mut w, "a4", &[], vec![node_uuid(3)]);
    let made = allocate_in(&mut w, &again).expect("n3 again");
    assert_eq!(made.node_uuid, node_uuid(3));
    // Deploying with an allocation keeps it, as Ironic's stays with the deployed node.
    let changes = deploy(&w.catalog, "n3", made.uuid, made.uuid, None, w.at()).expect("deployed");
    w.apply(&changes);
    assert_eq!(state(&w, node_uuid(3)), ProvisionState::Active);
    assert!(w.catalog.claim(made.uuid).is_some(), "the allocation stays");
}

#[test]
fn a_backfilled_allocation_records_a_deployed_node_and_goes_with_its_teardown() {
    let mut w = world(2);
    let instance = Uuid::from_u128(0x1D);
    let first = request(&mut w, instance, "p", vec![node_uuid(0)]);
    let held = claim_in(&mut w, &first).expect("claimed");
    let changes = deploy(&w.catalog, "n0", held.uuid, instance, None, w.at()).expect("deployed");
    w.apply(&changes);
    let backfill = |w: &mut World, node: &str| Backfill {
        uuid: w.id(),
        node: node.into(),
        record: AllocationRecord {
            name: None,
            resource_class: String::new(),
            candidate_nodes: Vec::new(),
            traits: Vec::new(),
            extra: "{}".into(),
            owner: None,
        },
        project_id: "p".into(),
        user_id: "u".into(),
    };
    let idle = backfill(&mut w, "n1");
    assert!(matches!(
        node_allocation::backfill(&w.catalog, &idle, w.at()),
        Err(Rejection::BadNode(_))
    ));
    let deployed = backfill(&mut w, "n0");
    let (changes, made) = node_allocation::backfill(&w.catalog, &deployed, w.at()).expect("made");
    w.apply(&changes);
    assert_eq!(
        (made.instance_uuid, made.node_uuid),
        (instance, node_uuid(0))
    );
    let record = made.allocation.as_ref().expect("an allocation");
    assert_eq!(record.resource_class, "baremetal-gold", "the node's class");
    let twice = backfill(&mut w, "n0");
    assert!(matches!(
        node_allocation::backfill(&w.catalog, &twice, w.at()),
        Err(Rejection::NodeInUse(_))
    ));
    edit(
        &mut w,
        node_uuid(0),
        NodeChange::ProvisionState(ProvisionState::Cleaning),
    )
    .expect("torn down");
    assert!(
        w.catalog.claim(made.uuid).is_none(),
        "the teardown ended it"
    );
    assert!(
        w.catalog.consumer(instance).is_none(),
        "and the instance's allocation"
    );
}
