//! Allocation candidates over small catalogs, including the worked example of the forbidden
//! aggregates spec (cn1 and cn2 with NUMA children, sharing storage ss1 and ss2).

use super::*;
use crate::change::Decision;
use crate::decide::inventory::{self, NewProvider};
use crate::model::inventory::Inventory;
use crate::model::time::Instant;

const T0: Instant = Instant::from_micros(1);

struct World {
    catalog: Catalog,
    names: BTreeMap<String, ProviderId>,
    next: u128,
}

impl World {
    fn new() -> World {
        World {
            catalog: Catalog::new(),
            names: BTreeMap::new(),
            next: 1,
        }
    }

    fn apply(&mut self, changes: Decision) {
        let changes = changes.expect("accepted");
        self.catalog.apply(&changes);
    }

    fn provider(
        &mut self,
        name: &str,
        parent: Option<&str>,
        inventory: &[(&str, u64)],
    ) -> ProviderId {
        let uuid = ProviderId::from_u128(self.next);
        self.next += 1;
        let parent = parent.map(|p| self.names[p]);
        let new = NewProvider {
            uuid,
            name: name.into(),
            parent,
            availability_zone: None,
        };
        self.apply(inventory::create_provider(&self.catalog, &new, T0));
        let inventories = inventory
            .iter()
            .map(|(class, total)| {
                (
                    ResourceClass::parse(class).expect("class"),
                    Inventory::simple(*total),
                )
            })
            .collect();
        self.apply(inventory::set_inventories(
            &self.catalog,
            uuid,
            None,
            inventories,
            T0,
        ));
        self.names.insert(name.into(), uuid);
        uuid
    }

    fn aggregates(&mut self, name: &str, aggregates: &[u128]) {
        let uuid = self.names[name];
        let set = aggregates
            .iter()
            .map(|a| Uuid::from_u128(0xa000 + a))
            .collect();
        self.apply(inventory::set_aggregates(
            &self.catalog,
            uuid,
            None,
            set,
            T0,
        ));
    }

    fn traits(&mut self, name: &str, traits: &[&str]) {
        let uuid = self.names[name];
        let set = traits
            .iter()
            .map(|t| TraitName::parse(t).expect("trait"))
            .collect();
        self.apply(inventory::set_traits(&self.catalog, uuid, None, set, T0));
    }

    fn name(&self, uuid: ProviderId) -> &str {
        self.names
            .iter()
            .find(|(_, u)| **u == uuid)
            .map(|(n, _)| n.as_str())
            .expect("known")
    }

    /// Each candidate as sorted `provider:CLASS=n` strings, sorted.
    fn run(&self, query: &CandidateQuery) -> Vec<String> {
        let mut out: Vec<String> = allocation_candidates(&self.catalog, query)
            .candidates
            .iter()
            .map(|c| {
                let mut parts: Vec<String> = c
                    .parts
                    .iter()
                    .flat_map(|p| {
                        p.resources
                            .iter()
                            .map(move |(class, n)| (p.provider, class, n))
                    })
                    .map(|(p, class, n)| format!("{}:{}={n}", self.name(p), class.as_str()))
                    .collect();
                parts.sort();
                parts.join(" ")
            })
            .collect();
        out.sort();
        out
    }
}

fn agg(n: u128) -> Uuid {
    Uuid::from_u128(0xa000 + n)
}

fn group(suffix: &str, resources: &[(&str, u64)]) -> Group {
    Group {
        suffix: suffix.into(),
        resources: resources
            .iter()
            .map(|(c, n)| (ResourceClass::parse(c).expect("class"), *n))
            .collect(),
        ..Group::default()
    }
}

fn forbidding(mut group: Group, aggregates: &[u128]) -> Group {
    group.member_of.forbidden = aggregates.iter().map(|a| agg(*a)).collect();
    group
}

fn query(groups: Vec<Group>) -> CandidateQuery {
    CandidateQuery {
        groups,
        nested_aware: true,
        ..CandidateQuery::default()
    }
}

const A: u128 = 1;
const B: u128 = 2;
const C: u128 = 3;

/// The spec's world: aggA on cn1, aggB on cn2 and ss1, aggC on numa1_1 and ss2.
fn spec_world() -> World {
    let mut w = World::new();
    w.provider("cn1", None, &[("VCPU", 8)]);
    w.provider("numa1_1", Some("cn1"), &[("VCPU", 8)]);
    w.provider("numa1_2", Some("cn1"), &[("VCPU", 8)]);
    w.provider("cn2", None, &[("VCPU", 8)]);
    w.provider("numa2_1", Some("cn2"), &[("VCPU", 8)]);
    w.provider("numa2_2", Some("cn2"), &[("VCPU", 8)]);
    w.provider("ss1", None, &[("DISK_GB", 100)]);
    w.provider("ss2", None, &[("DISK_GB", 100)]);
    w.aggregates("cn1", &[A]);
    w.aggregates("cn2", &[B]);
    w.aggregates("ss1", &[B]);
    w.aggregates("numa1_1", &[C]);
    w.aggregates("ss2", &[C]);
    w.traits("ss1", &[SHARING_TRAIT]);
    w.traits("ss2", &[SHARING_TRAIT]);
    w
}

fn vcpu_providers(w: &World, g: Group) -> Vec<String> {
    w.run(&query(vec![g]))
        .into_iter()
        .map(|c| c.trim_end_matches(":VCPU=1").to_owned())
        .collect()
}

#[test]
fn unsuffixed_forbidden_aggregates_span_the_tree() {
    let w = spec_world();
    // !aggA excludes cn1, numa1_1 and numa1_2.
    assert_eq!(
        vcpu_providers(&w, forbidding(group("", &[("VCPU", 1)]), &[A])),
        ["cn2", "numa2_1", "numa2_2"]
    );
    // !aggB excludes cn2, numa2_1, numa2_2 (and ss1, below).
    assert_eq!(
        vcpu_providers(&w, forbidding(group("", &[("VCPU", 1)]), &[B])),
        ["cn1", "numa1_1", "numa1_2"]
    );
    // !aggC excludes numa1_1 (and ss2, below).
    assert_eq!(
        vcpu_providers(&w, forbidding(group("", &[("VCPU", 1)]), &[C])),
        ["cn1", "cn2", "numa1_2", "numa2_1", "numa2_2"]
    );
    let disk = |forbidden: u128| {
        w.run(&query(vec![forbidding(
            group("", &[("DISK_GB", 1)]),
            &[forbidden],
        )]))
    };
    assert_eq!(disk(B), ["ss2:DISK_GB=1"], "ss1 is excluded with aggB");
    assert_eq!(disk(C), ["ss1:DISK_GB=1"], "ss2 is excluded with aggC");
    assert_eq!(
        disk(A),
        ["ss1:DISK_GB=1", "ss2:DISK_GB=1"],
        "one candidate per sharing provider"
    );
}

#[test]
fn suffixed_forbidden_aggregates_do_not_span() {
    let w = spec_world();
    assert_eq!(
        vcpu_providers(&w, forbidding(group("1", &[("VCPU", 1)]), &[A])),
        ["cn2", "numa1_1", "numa1_2", "numa2_1", "numa2_2"],
        "!aggA excludes only cn1"
    );
    assert_eq!(
        vcpu_providers(&w, forbidding(group("1", &[("VCPU", 1)]), &[B])),
        ["cn1", "numa1_1", "numa1_2", "numa2_1", "numa2_2"],
        "!aggB excludes only cn2 (and ss1)"
    );
    assert_eq!(
        vcpu_providers(&w, forbidding(group("1", &[("VCPU", 1)]), &[C])),
        ["cn1", "cn2", "numa1_2", "numa2_1", "numa2_2"],
        "!aggC excludes only numa1_1 (and ss2)"
    );
    let disk = |forbidden: u128| {
        w.run(&query(vec![forbidding(
            group("1", &[("DISK_GB", 1)]),
            &[forbidden],
        )]))
    };
    assert_eq!(disk(B), ["ss2:DISK_GB=1"]);
    assert_eq!(disk(C), ["ss1:DISK_GB=1"]);
}

#[test]
fn sharing_providers_serve_the_trees_they_share_an_aggregate_with() {
    let w = spec_world();
    // ss1 shares with cn2's tree (aggB); ss2 with cn1's tree (aggC on numa1_1).
    let both = w.run(&query(vec![group("", &[("VCPU", 1), ("DISK_GB", 10)])]));
    assert!(
        both.contains(&"numa1_1:VCPU=1 ss2:DISK_GB=10".to_owned()),
        "{both:?}"
    );
    assert!(both.contains(&"cn2:VCPU=1 ss1:DISK_GB=10".to_owned()));
    assert!(
        !both.iter().any(|c| c.contains("cn1") && c.contains("ss1")),
        "ss1 does not serve cn1"
    );
    assert!(
        !both.iter().any(|c| c.contains("cn2") && c.contains("ss2")),
        "ss2 does not serve cn2"
    );
    let mut required = group("", &[("VCPU", 1), ("DISK_GB", 10)]);
    required.member_of.required = vec![BTreeSet::from([agg(B)])];
    let in_b = w.run(&query(vec![required]));
    assert_eq!(
        in_b,
        [
            "cn2:VCPU=1 ss1:DISK_GB=10",
            "numa2_1:VCPU=1 ss1:DISK_GB=10",
            "numa2_2:VCPU=1 ss1:DISK_GB=10"
        ]
    );
}

#[test]
fn a_sharing_provider_passes_member_of_only_as_a_member_itself() {
    let w = spec_world();
    // cn1's tree is in aggA and ss2 shares with it (aggC), but ss2 is not in aggA: as
    // Placement since its bug 1792503, ss2 may not serve a request for aggA.
    let mut in_a = group("", &[("VCPU", 1), ("DISK_GB", 10)]);
    in_a.member_of.required = vec![BTreeSet::from([agg(A)])];
    assert!(w.run(&query(vec![in_a])).is_empty());
    let mut in_c = group("", &[("VCPU", 1), ("DISK_GB", 10)]);
    in_c.member_of.required = vec![BTreeSet::from([agg(C)])];
    assert_eq!(w.run(&query(vec![in_c])), ["numa1_1:VCPU=1 ss2:DISK_GB=10"]);
}

#[test]
fn in_tree_naming_a_sharing_provider_lets_it_serve_the_group() {
    let w = spec_world();
    let vcpu = group("", &[("VCPU", 1)]);
    let mut disk = group("1", &[("DISK_GB", 10)]);
    disk.in_tree = Some(w.names["ss1"]);
    let found = w.run(&query(vec![vcpu, disk]));
    // ss1 shares with cn2's tree only.
    assert!(!found.is_empty());
    assert!(
        found
            .iter()
            .all(|c| c.contains("ss1:DISK_GB=10") && !c.contains("cn1") && !c.contains("numa1")),
        "{found:?}"
    );
}

#[test]
fn limit_stops_the_search_and_bounds_are_reported() {
    let mut w = World::new();
    for n in 0..50 {
        w.provider(&format!("cn{n:02}"), None, &[("VCPU", 4)]);
    }
    let mut q = query(vec![group("", &[("VCPU", 2)])]);
    q.limit = Some(5);
    let found = allocation_candidates(&w.catalog, &q);
    assert_eq!(found.candidates.len(), 5);
    assert!(!found.truncated);
    assert_eq!(
        w.name(found.candidates[0].parts[0].provider),
        "cn00",
        "trees in creation order"
    );
    q.limit = None;
    assert_eq!(allocation_candidates(&w.catalog, &q).candidates.len(), 50);
}

#[test]
fn granular_groups_policies_and_subtrees() {
    let mut w = World::new();
    w.provider("cn", None, &[]);
    w.provider("pf1", Some("cn"), &[("SRIOV_NET_VF", 2)]);
    w.provider("pf2", Some("cn"), &[("SRIOV_NET_VF", 2)]);
    let two = |policy| CandidateQuery {
        group_policy: policy,
        ..query(vec![
            group("1", &[("SRIOV_NET_VF", 1)]),
            group("2", &[("SRIOV_NET_VF", 1)]),
        ])
    };
    assert_eq!(
        w.run(&two(GroupPolicy::None)).len(),
        4,
        "pf1+pf1 (summed), pf1+pf2, pf2+pf1, pf2+pf2"
    );
    assert!(
        w.run(&two(GroupPolicy::None))
            .contains(&"pf1:SRIOV_NET_VF=2".to_owned())
    );
    assert_eq!(
        w.run(&two(GroupPolicy::Isolate)),
        ["pf1:SRIOV_NET_VF=1 pf2:SRIOV_NET_VF=1"; 2]
    );
    // Summing the two groups on one provider must still respect capacity.
    let three = query(vec![
        group("1", &[("SRIOV_NET_VF", 2)]),
        group("2", &[("SRIOV_NET_VF", 1)]),
    ]);
    assert!(!w.run(&three).iter().any(|c| c == "pf1:SRIOV_NET_VF=3"));
    let mut same = two(GroupPolicy::Isolate);
    same.same_subtree = vec![vec!["1".into(), "2".into()]];
    assert!(
        w.run(&same).is_empty(),
        "pf1 and pf2 are siblings: neither is above the other"
    );
}

#[test]
fn traits_on_the_unsuffixed_group_are_judged_on_the_providers_used() {
    let mut w = World::new();
    w.provider("cn", None, &[("MEMORY_MB", 1024)]);
    w.provider("numa", Some("cn"), &[("VCPU", 4)]);
    w.traits("cn", &["HW_CPU_X86_AVX2"]);
    let mut g = group("", &[("VCPU", 1)]);
    g.traits.all_of = BTreeSet::from([TraitName::parse("HW_CPU_X86_AVX2").expect("trait")]);
    assert!(
        w.run(&query(vec![g.clone()])).is_empty(),
        "the root gives no VCPU, so its trait does not count"
    );
    g.resources
        .push((ResourceClass::parse("MEMORY_MB").expect("class"), 1));
    assert_eq!(w.run(&query(vec![g])), ["cn:MEMORY_MB=1 numa:VCPU=1"]);
    let mut root_required = query(vec![group("", &[("VCPU", 1)])]);
    root_required.root_required.all_of =
        BTreeSet::from([TraitName::parse("HW_CPU_X86_AVX2").expect("trait")]);
    assert_eq!(w.run(&root_required), ["numa:VCPU=1"]);
    root_required.root_required = TraitFilter {
        forbidden: BTreeSet::from([TraitName::parse("HW_CPU_X86_AVX2").expect("trait")]),
        ..TraitFilter::default()
    };
    assert!(w.run(&root_required).is_empty());
    let mut old = query(vec![group("", &[("VCPU", 1), ("MEMORY_MB", 1)])]);
    old.nested_aware = false;
    assert!(
        w.run(&old).is_empty(),
        "before 1.29 one tree gives one provider"
    );
}

/// A root with `width` children of one VCPU each.
fn wide_tree(width: usize) -> World {
    let mut w = World::new();
    w.provider("root", None, &[]);
    for child in 0..width {
        w.provider(&format!("c{child:03}"), Some("root"), &[("VCPU", 1)]);
    }
    w
}

#[test]
fn a_satisfiable_request_over_a_wide_tree_is_found_within_the_combination_bound() {
    // Five isolated groups over 100 one-VCPU children: the first satisfiable combination
    // (c000, c001, c002, c003, c004) comes after about 1.02 million others in odometer order,
    // every one of which repeats a child; walked depth first with pruning it is the first one.
    let w = wide_tree(100);
    let groups = (1..=5)
        .map(|n| group(&n.to_string(), &[("VCPU", 1)]))
        .collect();
    let mut isolated = query(groups);
    isolated.group_policy = GroupPolicy::Isolate;
    isolated.limit = Some(1);
    let found = allocation_candidates(&w.catalog, &isolated);
    assert_eq!(found.candidates.len(), 1);
    assert!(!found.truncated);
    assert_eq!(
        w.run(&isolated),
        vec!["c000:VCPU=1 c001:VCPU=1 c002:VCPU=1 c003:VCPU=1 c004:VCPU=1"]
    );
    // Without isolation the groups may share a child, but not beyond its capacity: the same
    // dead-end prefix is pruned on summed capacity.
    let mut shared = isolated.clone();
    shared.group_policy = GroupPolicy::None;
    assert_eq!(
        allocation_candidates(&w.catalog, &shared).candidates.len(),
        1
    );
}

#[test]
fn a_stop_probe_ends_the_search_as_truncated() {
    let w = wide_tree(20);
    let groups = (1..=3)
        .map(|n| group(&n.to_string(), &[("VCPU", 1)]))
        .collect();
    let mut isolated = query(groups);
    isolated.group_policy = GroupPolicy::Isolate;
    let all = allocation_candidates(&w.catalog, &isolated);
    assert!(!all.truncated);
    assert_eq!(all.candidates.len(), 20 * 19 * 18);
    let cut = allocation_candidates_within(&w.catalog, &isolated, &|| true);
    // With many groups the answer is bounded by its mappings rather than its candidates.
    let many = query(
        (1..=8)
            .map(|n| group(&n.to_string(), &[("VCPU", 1)]))
            .collect(),
    );
    let bounded = allocation_candidates(&w.catalog, &many);
    assert_eq!(bounded.candidates.len(), limits::CANDIDATE_MAPPINGS_MAX / 8);
    assert!(bounded.truncated);
    assert!(cut.truncated);
    assert!(cut.candidates.len() < all.candidates.len());
}
